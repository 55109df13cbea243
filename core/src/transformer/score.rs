//! The score kernel `S^{(h)} = Q^{(h)}·K^{(h)ᵀ}` for all heads at once (§III-C1, Appendix A-C1,
//! A-C3, A-C5), producing folded-diagonal scores exported as the minimal sequential stream.
//!
//! Inputs: `B` blocks of `Q` and `K` in segment-column packing with score order `π_S(h,u) = u·H+h`
//! and `C` (a multiple of `H`) active segments, so segment `c` of every block belongs to head
//! `c mod H` (this choice of `C` makes the block phase `r_ℓ = ℓ·C mod H` zero for every block,
//! so the `Align_r` correction of Appendix A-C3 is the identity).
//!
//! With `t = j·β + s` (`s < β`, `j < g/2`, `g = m/β`):
//!
//! * banks (all rotations happen here, hoisted per input): `q_{-s} = Ψ^{-s}(q)` for `s < β`;
//!   `k̃ = k + i·Ψ^{m/2}(k)` and `κ_j = Ψ^{jβ}(k̃)` for `j < g/2`;
//! * `u_t = Σ_ℓ q^{(ℓ)}_{-s} ⊙ κ^{(ℓ)}_j` (tensor products summed, one relinearization per `t`):
//!   slot `(c, r)` holds `Q[r−s, ·]·(K[r−s+t, ·] + i·K[r−s+t+m/2, ·])` for the channel of `c`;
//! * head reduction `Σ_{k < C/H} ρ(u_t; k·H·m)` (binary doubling, `O(log C)` rotations) leaves
//!   head `h` in segment `h`: `s^h_t[r−s] + i·s^h_{t+m/2}[r−s]`;
//! * undoing the baby shift `Ψ^{s}` is fused with placing `cut(S_t)` at stream offset `t·H·m`
//!   (masks before rotation, two rotations, or one when `s = 0`, plus a split where a chunk
//!   straddles two stream ciphertexts).
//!
//! Counts: `#ctmul = B·m/2`, `#relin = m/2`,
//! `#rot = B·(2(β−1) + g) + (m/2)·(⌊log₂ R⌋ + popcount(R) − 1) + export`, `R = C/H`.
//! Depth: 4 levels (bank masks ×2, product, export masks).

use super::exec::{accumulate, align_levels, pt_key, Exec};
use super::pipeline::AttnPlan;
use super::shift::{masked_rot_sum, psi_bank, rotate_sum, seg_of};
use crate::ckks::C64;
use crate::error::{Error, Result};
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

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

/// The score kernel: returns the `⌈H·m²/2n⌉` ciphertexts of the exported score stream
/// ([`crate::packing::ScoreStream`]).
pub fn score<E: Exec>(ex: &E, plan: &AttnPlan, q: &[E::Ct], k: &[E::Ct]) -> Result<Vec<E::Ct>> {
    let (m, heads, n) = (plan.shape.m, plan.shape.heads, plan.shape.slots);
    let (beta, g, c) = (plan.beta, plan.g, plan.c_s);
    if q.len() != plan.b_s || k.len() != plan.b_s || ex.slots() != n {
        return Err(Error::InvalidParameters("score kernel: input count"));
    }
    let half = m / 2;
    // Banks.
    let q_taus: Vec<i64> = (0..beta).map(|s| -(s as i64)).collect();
    let k_taus: Vec<i64> = (0..g / 2).map(|j| (j * beta) as i64).collect();
    let mut qb: Vec<Vec<E::Ct>> = Vec::with_capacity(q.len());
    let mut kb: Vec<Vec<E::Ct>> = Vec::with_capacity(k.len());
    for (ql, kl) in q.iter().zip(k) {
        qb.push(psi_bank(ex, ql, m, c, &q_taus, C64::real(1.0))?);
        let kt = complexify_half(ex, kl, m, c, 1.0)?;
        kb.push(psi_bank(ex, &kt, m, c, &k_taus, C64::real(1.0))?);
    }
    for (qs, ks) in qb.iter_mut().zip(kb.iter_mut()) {
        for x in qs.iter_mut() {
            align_levels(ex, x, &mut ks[0])?;
        }
        let l = ex.level(&qs[0]);
        for y in ks.iter_mut() {
            ex.drop_to(y, l)?;
        }
    }
    let chunk = heads * m;
    let n_out = (half * chunk).div_ceil(n);
    let mut stream: Vec<Option<E::Ct>> = (0..n_out).map(|_| None).collect();
    for t in 0..half {
        let (j, s) = (t / beta, t % beta);
        let mut acc = None;
        for l in 0..q.len() {
            let p = ex.mul_ct(&qb[l][s], &kb[l][j])?;
            accumulate(ex, &mut acc, p)?;
        }
        let mut u = acc.unwrap();
        ex.relin(&mut u)?;
        ex.rescale(&mut u)?;
        let y = rotate_sum(ex, u, c / heads, chunk as i64)?;
        // Export: Ψ^{s} on the first H segments fused with placement at offset o = t·H·m.
        let o = t * chunk;
        // Parts: (rotation, source predicate on local r, destination shift).
        let parts: Vec<(i64, bool)> = if s == 0 {
            vec![(-(o as i64), true)]
        } else {
            vec![
                (s as i64 - o as i64, true),
                (s as i64 - m as i64 - o as i64, false),
            ]
        };
        for (rot, first) in parts {
            // Source slot (h, r) of this part → stream position.
            let src_ok = move |r: usize| {
                if s == 0 {
                    true
                } else if first {
                    r >= s
                } else {
                    r < s
                }
            };
            let dest = move |h: usize, r: usize| -> usize {
                let r2 = if first { r - s } else { r + m - s };
                o + h * m + r2
            };
            // Split by destination ciphertext.
            let mut by_ct: BTreeMap<usize, ()> = BTreeMap::new();
            for h in 0..heads {
                for r in 0..m {
                    if src_ok(r) {
                        by_ct.insert(dest(h, r) / n, ());
                    }
                }
            }
            let straddles = by_ct.len() > 1;
            for (&e, _) in by_ct.iter() {
                let f = |i: usize| -> C64 {
                    let (h, r) = seg_of(i, m);
                    C64::real((h < heads && src_ok(r) && dest(h, r) / n == e) as u8 as f64)
                };
                let vals = || (0..n).map(f).collect::<Vec<C64>>();
                // Keyed by content: a part that does not straddle two stream ciphertexts is the
                // same mask for every t with this s.
                let key = if straddles {
                    pt_key(
                        4,
                        &[
                            m as u64,
                            heads as u64,
                            n as u64,
                            s as u64,
                            first as u64,
                            1,
                            t as u64,
                            e as u64,
                        ],
                    )
                } else {
                    pt_key(
                        4,
                        &[m as u64, heads as u64, n as u64, s as u64, first as u64, 0],
                    )
                };
                let mut z = ex.mul_plain(&y, Some(key), &vals)?;
                ex.rescale(&mut z)?;
                let z = if rot.rem_euclid(n as i64) == 0 {
                    z
                } else {
                    ex.rotate(&z, rot)?
                };
                accumulate(ex, &mut stream[e], z)?;
            }
        }
    }
    stream
        .into_iter()
        .map(|x| x.ok_or(Error::InvalidParameters("score stream: empty ciphertext")))
        .collect()
}
