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
//! * undoing the baby shift `Ψ^{s}` is fused with placing `cut(S_t)` at stream offset `t·H·m`:
//!   two hoisted rotations of the reduced ciphertext (one when `s = 0`, none for `t = 0`), masked
//!   afterwards in destination coordinates (a chunk straddling two stream ciphertexts just uses
//!   two masks of the same rotations).
//!
//! Counts: `#ctmul = B·m/2`, `#relin = m/2`,
//! `#rot = B·(2(β−1) + g) + (m/2)·(⌊log₂ R⌋ + popcount(R) − 1) + export`, `R = C/H`,
//! `export = 2·#{t : s ≠ 0} + #{t : s = 0, t·H·m ≢ 0 mod n}` (BERT-base: `210 + 256 + 118 = 584`).
//! Depth: 4 levels (bank masks ×2, product, export masks).

use super::exec::{
    accumulate, align_levels, check_count, check_slots, keyed_terms, pt_key, Exec, PlainTerm,
};
use super::plan::AttnPlan;
use super::shift::{complexify_half, psi_bank, rotate_sum, seg_of};
use crate::ckks::C64;
use crate::error::{Error, Result};
use alloc::vec;
use alloc::vec::Vec;

/// The score kernel: returns the `⌈H·m²/2n⌉` ciphertexts of the exported score stream
/// ([`crate::packing::ScoreStream`]).
pub fn score<E: Exec>(ex: &E, plan: &AttnPlan, q: &[E::Ct], k: &[E::Ct]) -> Result<Vec<E::Ct>> {
    let (m, heads, n) = (plan.shape.m, plan.shape.heads, plan.shape.slots);
    let (beta, g, c) = (plan.beta, plan.g, plan.c_s);
    check_slots(ex.slots(), n)?;
    check_count("score kernel: Q blocks", plan.b_s, q.len())?;
    check_count("score kernel: K blocks", plan.b_s, k.len())?;
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
        // Export: Ψ^{s} on the first H segments fused with placement at offset o = t·H·m. The
        // (at most two) rotations of y are hoisted and masked afterwards in destination
        // coordinates, so a chunk straddling two stream ciphertexts costs no extra rotation.
        let o = t * chunk;
        // Parts: (rotation, whether the part takes local rows r ≥ s).
        let parts: Vec<(i64, bool)> = if s == 0 {
            vec![(-(o as i64), true)]
        } else {
            vec![
                (s as i64 - o as i64, true),
                (s as i64 - m as i64 - o as i64, false),
            ]
        };
        let ks: Vec<i64> = parts.iter().map(|p| p.0).collect();
        let rots = ex.rotate_many(&y, &ks)?;
        // Destination stream position of source slot (h, r) in part `first`, if it has one.
        let dest = move |first: bool, h: usize, r: usize| -> Option<usize> {
            if h >= heads {
                return None;
            }
            let ok = s == 0 || if first { r >= s } else { r < s };
            let r2 = if first { r.checked_sub(s)? } else { r + m - s };
            ok.then_some(o + h * m + r2)
        };
        let (lo, hi) = (o / n, (o + chunk - 1) / n);
        for e in lo..=hi {
            let mut masks = Vec::with_capacity(parts.len());
            for (rot, &(k, first)) in rots.iter().zip(&parts) {
                // Slot i of ρ(y; k) holds source slot (i + k) mod n.
                let f = move |i: usize| -> C64 {
                    let src = (i as i64 + k).rem_euclid(n as i64) as usize;
                    let (h, r) = seg_of(src, m);
                    C64::real(dest(first, h, r).is_some_and(|g| g / n == e) as u8 as f64)
                };
                let vals = move || (0..n).map(f).collect::<Vec<C64>>();
                let key = pt_key(
                    4,
                    &[
                        m as u64,
                        heads as u64,
                        n as u64,
                        beta as u64,
                        t as u64,
                        first as u64,
                        e as u64,
                    ],
                );
                masks.push((rot, key, vals));
            }
            let sum: Vec<PlainTerm<'_, E::Ct>> = keyed_terms(&masks);
            let mut acc_e = None;
            ex.mul_plain_sum_acc(&mut acc_e, &sum)?;
            let mut z = acc_e.unwrap();
            ex.rescale(&mut z)?;
            accumulate(ex, &mut stream[e], z)?;
        }
    }
    stream
        .into_iter()
        .map(|x| x.ok_or(Error::InvalidParameters("score stream: empty ciphertext")))
        .collect()
}
