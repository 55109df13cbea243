//! Ciphertext shifts under segment packing (Appendix A-A, after Jiang et al.): the inter-segment
//! shift `Φ^Δ` (Algorithm 5), the intra-segment shift `Ψ^t` (Algorithm 6), the restricted rotation
//! `RotFirst_L` (Algorithm 7) and the active-region segment shift `Φ_C^Δ` (Algorithm 8), plus
//! shift banks built once per input so that inner loops do no rotations (§III-C).
//!
//! With `ρ(v; r)_i = v_{i+r}` (Table I) and segment-local index `r = i mod m`:
//!
//! * `Φ^Δ(x) = ρ(x; Δ·m)` — one rotation (cyclic over all `N_seg` segments);
//! * `Ψ^t(x) = ρ(x; t) ⊙ 1{r < m−t} + ρ(x; t−m) ⊙ 1{r ≥ m−t}` — two rotations, one mask level;
//! * `RotFirst_L(x, τ) = ρ(x; τ) ⊙ a_{L,τ} + ρ(x; τ−L) ⊙ b_{L,τ}` with
//!   `a_{L,τ} = 1{i < L−τ}`, `b_{L,τ} = 1{L−τ ≤ i < L}`;
//! * `Φ_C^Δ(x) = RotFirst_{C·m}(x, Δ·m)` (wrap-around modulo the `C` active segments).
//!
//! All masked forms put the mask *after* the rotation so that every rotation of one input is
//! hoisted (one gadget decomposition), and rescale once after summing the masked terms.

use super::exec::{accumulate, keyed_terms, pt_key, Exec, PlainTerm, PtValues};
use crate::ckks::C64;
use crate::error::{Error, Result};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// A slot mask: `(cache key, slot → value)`.
pub type SlotFn<'a> = (u64, &'a dyn Fn(usize) -> C64);

/// `rescale(Σ_k ρ(x; r_k) ⊙ mask_k)` with all rotations of `x` hoisted together.
pub fn masked_rot_sum<E: Exec>(ex: &E, x: &E::Ct, terms: &[(i64, SlotFn<'_>)]) -> Result<E::Ct> {
    let ks: Vec<i64> = terms.iter().map(|t| t.0).collect();
    let rots = ex.rotate_many(x, &ks)?;
    let n = ex.slots();
    let vals: Vec<_> = terms
        .iter()
        .map(|(_, (_, f))| move || (0..n).map(f).collect::<Vec<C64>>())
        .collect();
    let sum: Vec<PlainTerm<'_, E::Ct>> = rots
        .iter()
        .zip(terms)
        .zip(&vals)
        .map(|((r, (_, (key, _))), v)| (r, Some(*key), v as PtValues<'_>))
        .collect();
    let mut acc = None;
    ex.mul_plain_sum_acc(&mut acc, &sum)?;
    let mut acc = acc.ok_or(Error::InvalidParameters("empty masked sum"))?;
    ex.rescale(&mut acc)?;
    Ok(acc)
}

/// Segment `seg` and local index `r` of slot `i` for segment length `m`.
#[inline]
pub fn seg_of(i: usize, m: usize) -> (usize, usize) {
    (i / m, i % m)
}

/// Terms of `factor · Ψ^τ(x)` restricted to segments `[0, segs)` (masks after rotation).
fn psi_terms(m: usize, tau: i64) -> Vec<(i64, bool)> {
    let t = tau.rem_euclid(m as i64);
    if t == 0 {
        alloc::vec![(0, true)]
    } else {
        alloc::vec![(t, true), (t - m as i64, false)]
    }
}

/// `factor · Ψ^τ(x)` on segments `[0, segs)` (zero elsewhere): `Ψ^τ(x)_{r,c} = x_{(r+τ) mod m, c}`.
/// Two rotations (none for `τ ≡ 0`), one level.
pub fn psi<E: Exec>(
    ex: &E,
    x: &E::Ct,
    m: usize,
    segs: usize,
    tau: i64,
    factor: C64,
) -> Result<E::Ct> {
    Ok(psi_bank(ex, x, m, segs, &[tau], factor)?.pop().unwrap())
}

/// `Bank_Ψ(x, T) = {factor · Ψ^τ(x)}_{τ ∈ T}` on segments `[0, segs)`: all rotations of `x`
/// hoisted in one group, one level (entries with `τ ≡ 0` are a masked copy so every entry sits at
/// the same level).
pub fn psi_bank<E: Exec>(
    ex: &E,
    x: &E::Ct,
    m: usize,
    segs: usize,
    taus: &[i64],
    factor: C64,
) -> Result<Vec<E::Ct>> {
    let mut amounts: Vec<i64> = Vec::new();
    let mut index: BTreeMap<i64, usize> = BTreeMap::new();
    for &tau in taus {
        for (k, _) in psi_terms(m, tau) {
            index.entry(k).or_insert_with(|| {
                amounts.push(k);
                amounts.len() - 1
            });
        }
    }
    let rots = ex.rotate_many(x, &amounts)?;
    let n = ex.slots();
    let mut out = Vec::with_capacity(taus.len());
    for &tau in taus {
        let t = tau.rem_euclid(m as i64) as usize;
        let mut parts = Vec::new();
        for (k, first) in psi_terms(m, tau) {
            let f = move |i: usize| {
                let (c, r) = seg_of(i, m);
                let on = c < segs && if first { r < m - t } else { r >= m - t };
                if on {
                    factor
                } else {
                    C64::default()
                }
            };
            let key = pt_key(
                1,
                &[
                    m as u64,
                    segs as u64,
                    t as u64,
                    first as u64,
                    factor.re.to_bits(),
                    factor.im.to_bits(),
                ],
            );
            parts.push((&rots[index[&k]], key, move || {
                (0..n).map(f).collect::<Vec<C64>>()
            }));
        }
        let sum: Vec<PlainTerm<'_, E::Ct>> = keyed_terms(&parts);
        let mut acc = None;
        ex.mul_plain_sum_acc(&mut acc, &sum)?;
        let mut acc = acc.unwrap();
        ex.rescale(&mut acc)?;
        out.push(acc);
    }
    Ok(out)
}

/// `Bank_Φ(x, D) = {Φ^δ(x) = ρ(x; δ·m)}_{δ ∈ D}`: plain hoisted rotations, no level.
pub fn phi_bank<E: Exec>(ex: &E, x: &E::Ct, m: usize, deltas: &[i64]) -> Result<Vec<E::Ct>> {
    let ks: Vec<i64> = deltas.iter().map(|&d| d * m as i64).collect();
    ex.rotate_many(x, &ks)
}

/// `RotFirst_L(x, τ)`: rotates the first `L` slots cyclically by `τ` (zero elsewhere); two
/// rotations, one level (Algorithm 7).
pub fn rot_first<E: Exec>(ex: &E, x: &E::Ct, len: usize, tau: i64) -> Result<E::Ct> {
    let t = tau.rem_euclid(len as i64) as usize;
    let a = move |i: usize| C64::real((i < len - t) as u8 as f64);
    let b = move |i: usize| C64::real((i >= len - t && i < len) as u8 as f64);
    let (ka, kb) = (
        pt_key(2, &[len as u64, t as u64, 0]),
        pt_key(2, &[len as u64, t as u64, 1]),
    );
    if t == 0 {
        return masked_rot_sum(ex, x, &[(0, (ka, &a))]);
    }
    masked_rot_sum(
        ex,
        x,
        &[(t as i64, (ka, &a)), (t as i64 - len as i64, (kb, &b))],
    )
}

/// `Φ_C^Δ(x) = RotFirst_{C·m}(x, Δ·m)`: segment shift with wrap-around inside the first `C`
/// segments (Algorithm 8).
pub fn phi_c<E: Exec>(ex: &E, x: &E::Ct, m: usize, c: usize, delta: i64) -> Result<E::Ct> {
    rot_first(ex, x, c * m, delta * m as i64)
}

/// The block phase correction of the score kernel (Appendix A-C3):
/// `Align_r(x) = RotFirst_{H·m}(x, (H − r)·m)`: if segment `c < H` of `x` holds head
/// `(c + r) mod H` (phase `r`), segment `c` of the result holds head `c`. The kernels here
/// choose `C` a multiple of `H`, which makes every block's phase zero, so they never need it.
pub fn align<E: Exec>(ex: &E, x: &E::Ct, m: usize, heads: usize, r: usize) -> Result<E::Ct> {
    rot_first(ex, x, heads * m, ((heads - r % heads) * m) as i64)
}

/// `Σ_{k<R} ρ(x; k·stride)` by binary doubling: `⌊log₂R⌋ + popcount(R) − 1` rotations, no level
/// (the head reduction of the score kernel).
pub fn rotate_sum<E: Exec>(ex: &E, x: E::Ct, copies: usize, stride: i64) -> Result<E::Ct> {
    let mut result: Option<E::Ct> = None;
    let mut offset = 0usize;
    let mut pow = x;
    let mut size = 1usize;
    let mut r = copies;
    while r > 0 {
        if r & 1 == 1 {
            let term = if offset == 0 {
                ex.clone_ct(&pow)
            } else {
                ex.rotate(&pow, offset as i64 * stride)?
            };
            accumulate(ex, &mut result, term)?;
            offset += size;
        }
        r >>= 1;
        if r > 0 {
            let rot = ex.rotate(&pow, size as i64 * stride)?;
            ex.add_assign(&mut pow, &rot)?;
            size *= 2;
        }
    }
    result.ok_or(Error::InvalidParameters("rotate_sum of zero copies"))
}

/// `k̃ = k + i·Ψ^{m/2}(k)` on `segs` segments (two rotations, one level).
pub fn complexify_half<E: Exec>(
    ex: &E,
    k: &E::Ct,
    m: usize,
    segs: usize,
    sign: f64,
) -> Result<E::Ct> {
    let h = m / 2;
    let one = move |i: usize| C64::real((i / m < segs) as u8 as f64);
    // Ψ^{m/2}: ρ(k; m/2) on r < m/2, ρ(k; −m/2) on r ≥ m/2, times ±i.
    let a = move |i: usize| {
        let (c, r) = seg_of(i, m);
        if c < segs && r < h {
            C64::new(0.0, sign)
        } else {
            C64::default()
        }
    };
    let b = move |i: usize| {
        let (c, r) = seg_of(i, m);
        if c < segs && r >= h {
            C64::new(0.0, sign)
        } else {
            C64::default()
        }
    };
    let key = |x: u64| pt_key(3, &[m as u64, segs as u64, sign.to_bits(), x]);
    masked_rot_sum(
        ex,
        k,
        &[
            (0, (key(0), &one)),
            (h as i64, (key(1), &a)),
            (-(h as i64), (key(2), &b)),
        ],
    )
}
