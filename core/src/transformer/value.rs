//! The value kernel `O^{(h)} = P^{(h)}·V^{(h)}` (§III-C2, Appendix A-C2, A-C4, A-C5): folded-diagonal
//! `P` in minimal packing and head-major `V` give head-major `O`, with no repacking.
//!
//! `O[j,·] = Σ_Δ P[j, j+Δ]·V[j+Δ, ·] = Σ_{t<m/2} Re( (p_t + i·p_{t+m/2})[j] · Ψ^t(u)[j,·] )` with
//! `u = v − i·Ψ^{m/2}(v)`: `(p_t + i p_{t+m/2})(Ψ^t v − i Ψ^{t+m/2} v)` has real part
//! `p_t Ψ^t v + p_{t+m/2} Ψ^{t+m/2} v`.
//!
//! Layouts: `V` head-major with `H_blk` heads per block (head `h̃` channel `u` in segment
//! `h̃·d_h + u`); `P` in minimal folded-diagonal packing with `H_P = N_seg/(m/2)` heads per
//! ciphertext (head `h̃'` pair `t` in segment `h̃'·m/2 + t`, `K_min(P) = ⌈H·m²/2n⌉` ciphertexts);
//! `H_blk | H_P`, so value block `ℓ` reads one `P` ciphertext at head offset `o_ℓ = ℓ·H_blk mod H_P`.
//!
//! Per value block `ℓ`:
//!
//! * `u = v − i·Ψ^{m/2}(v)` (two rotations) and `Bank_Ψ(u, {0..m/2−1})` (two rotations per nonzero
//!   shift);
//! * the broadcast of `P` moves into the kernel: with `Bank_Φ(p, D)` (one plain rotation per
//!   `δ ≠ 0`, shared by the blocks reading the same `P` ciphertext),
//!   `D = {(o_ℓ + h̃)·m/2 + t − (h̃·d_h + u)}`, the broadcast operand is
//!   `B_t = Σ_δ n_{t,δ} ⊙ Φ^δ(p)` where `n_{t,δ}` is the union of the head-channel segments
//!   `e_{h̃·d_h+u}` with that `δ` (the masks `n_u = Σ_h̃ e_{h̃·d_h+u}` of Appendix A-C4 when
//!   `d_h = m/2`); ptmuls only, no key switch;
//! * `acc = Σ_t B_t ⊙ Ψ^t(u)` (tensor products summed, one relinearization per block);
//! * decomplexification `Re(acc)` by one conjugation — paired: blocks `(2w, 2w+1)` become the real
//!   and imaginary parts of one output (`S + conj(D)`, the `i` folded into the masks), which is the
//!   input the output projection consumes.
//!
//! Counts: `#ctmul = B_V·m/2`, `#relin = B_V`, `#conj = ⌈B_V/2⌉`,
//! `#rot = Σ_P (|D| − 1) + B_V·(2 + 2·(m/2 − 1))`; at BERT-base (`d_h = m/2 = 64`, `H_blk = H_P = 2`)
//! `|D| = 127` and `#rot = 6·(126 + 2 + 126) = 1524`, `#ctmul = 6·64 = 384` (Table II: 1524 / 384).
//! Depth: 3 levels from `V` (two bank levels and the product), 2 from `P`.

use super::exec::{
    accumulate, align_levels, check_count, check_slots, keyed_terms, pt_key, Exec, PlainTerm,
};
use super::plan::AttnPlan;
use super::shift::{complexify_half, phi_bank, psi_bank};
use crate::ckks::C64;
use crate::error::Result;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;

/// A `Φ` bank of one `P` ciphertext: `(P index, rotations, δ → position)`.
type Bank<C> = (usize, Vec<C>, BTreeMap<i64, usize>);

/// Blocks `acc_ℓ` of `Σ_t B_t ⊙ Ψ^t(u)` scaled by `½` (even `ℓ`) or `½·i` (odd `ℓ`), before
/// decomplexification.
fn block_products<E: Exec>(
    ex: &E,
    plan: &AttnPlan,
    p: &[E::Ct],
    v: &[E::Ct],
) -> Result<Vec<E::Ct>> {
    let (m, heads, n) = (plan.shape.m, plan.shape.heads, plan.shape.slots);
    let (dh, sp, hblk, hp) = (plan.d_h, plan.s_p, plan.h_blk, plan.h_p);
    let half = m / 2;
    // Block ℓ reads P ciphertext (ℓ·H_blk)/H_P at head offset (ℓ·H_blk) mod H_P.
    let p_ct = |l: usize| (l * hblk) / hp;
    let delta = |l: usize, h: usize, uu: usize, t: usize| {
        (((l * hblk) % hp + h) * sp + t) as i64 - (h * dh + uu) as i64
    };
    let heads_in = |l: usize| hblk.min(heads - l * hblk);
    let mut out = Vec::with_capacity(plan.b_v);
    let mut bank: Option<Bank<E::Ct>> = None;
    for l in 0..plan.b_v {
        let hb = heads_in(l);
        let segs = hb * dh;
        let factor = if l % 2 == 0 {
            C64::real(0.5)
        } else {
            C64::new(0.0, 0.5)
        };
        let u = complexify_half(ex, &v[l], m, segs, -1.0)?;
        let taus: Vec<i64> = (0..half as i64).collect();
        let mut ub = psi_bank(ex, &u, m, segs, &taus, C64::real(1.0))?;
        // Bank_Φ of this block's P ciphertext, shared by all blocks reading it (the BSGS form
        // keeps its baby steps in `babies` instead).
        if plan.phi_bsgs > 0 {
            if bank.as_ref().map(|b| b.0) != Some(p_ct(l)) {
                let ks: Vec<i64> = (0..plan.phi_bsgs as i64).collect();
                let pb = phi_bank(ex, &p[p_ct(l)], m, &ks)?;
                bank = Some((p_ct(l), pb, BTreeMap::new()));
            }
        } else if bank.as_ref().map(|b| b.0) != Some(p_ct(l)) {
            let e = p_ct(l);
            let mut ds = BTreeSet::new();
            for l2 in (0..plan.b_v).filter(|&l2| p_ct(l2) == e) {
                for h in 0..heads_in(l2) {
                    for uu in 0..dh {
                        for t in 0..half {
                            ds.insert(delta(l2, h, uu, t));
                        }
                    }
                }
            }
            let ds: Vec<i64> = ds.into_iter().collect();
            let pb = phi_bank(ex, &p[e], m, &ds)?;
            let idx = ds.iter().enumerate().map(|(i, &d)| (d, i)).collect();
            bank = Some((e, pb, idx));
        }
        let (_, pb, idx) = bank.as_ref().unwrap();
        let delta = |h: usize, uu: usize, t: usize| delta(l, h, uu, t);
        let mut acc = None;
        for t in 0..half {
            if plan.phi_bsgs > 0 {
                let mut bt = bsgs_operand(ex, plan, pb, l, t, hb, &delta, factor)?;
                align_levels(ex, &mut bt, &mut ub[t])?;
                let prod = ex.mul_ct(&bt, &ub[t])?;
                accumulate(ex, &mut acc, prod)?;
                continue;
            }
            let mut groups: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
            for h in 0..hb {
                for uu in 0..dh {
                    groups.entry(delta(h, uu, t)).or_default().push(h * dh + uu);
                }
            }
            let mut masks = Vec::with_capacity(groups.len());
            for (d, segs_on) in &groups {
                let vals = move || {
                    let mut x = vec![C64::default(); n];
                    for &sg in segs_on {
                        for r in 0..m {
                            x[sg * m + r] = factor;
                        }
                    }
                    x
                };
                // Keyed by content (segment set and factor), so equal masks share one encoding.
                let mut desc: Vec<u64> = alloc::vec![m as u64, (l % 2) as u64];
                desc.extend(segs_on.iter().map(|&x| x as u64));
                let key = pt_key(5, &desc);
                masks.push((&pb[idx[d]], key, vals));
            }
            let sum: Vec<PlainTerm<'_, E::Ct>> = keyed_terms(&masks);
            let mut bt = None;
            ex.mul_plain_sum_acc(&mut bt, &sum)?;
            let mut bt = bt.unwrap();
            ex.rescale(&mut bt)?;
            align_levels(ex, &mut bt, &mut ub[t])?;
            let prod = ex.mul_ct(&bt, &ub[t])?;
            accumulate(ex, &mut acc, prod)?;
        }
        let mut acc = acc.unwrap();
        ex.relin(&mut acc)?;
        ex.rescale(&mut acc)?;
        out.push(acc);
    }
    Ok(out)
}

/// `B_t = Σ_δ n_{t,δ} ⊙ Φ^δ(p)` by baby-step giant-step ([`AttnPlan::phi_bsgs`] `= G`): with
/// `δ = G·a + b` (`0 ≤ b < G`, on one grid for every block and `t`, so the giant steps share
/// their keys), `B_t = Σ_a ρ^{G·a·m}( Σ_b ρ^{−G·a·m}(n_{t,δ}) ⊙ Φ^b(p) )`: the baby steps
/// `Φ^b(p)` are shared by every block reading `p`, each inner sum is rescaled and the giant steps
/// are summed lazily (one ModDown). Same level as the per-shift bank.
#[allow(clippy::too_many_arguments)]
fn bsgs_operand<E: Exec>(
    ex: &E,
    plan: &AttnPlan,
    babies: &[E::Ct],
    l: usize,
    t: usize,
    hb: usize,
    delta: &dyn Fn(usize, usize, usize) -> i64,
    factor: C64,
) -> Result<E::Ct> {
    let (m, n, dh, g) = (
        plan.shape.m,
        plan.shape.slots,
        plan.d_h,
        plan.phi_bsgs as i64,
    );
    let mut groups: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for h in 0..hb {
        for uu in 0..dh {
            groups.entry(delta(h, uu, t)).or_default().push(h * dh + uu);
        }
    }
    let mut giants: BTreeMap<i64, Vec<(usize, &Vec<usize>)>> = BTreeMap::new();
    for (&d, segs_on) in &groups {
        let (a, b) = (d.div_euclid(g), d.rem_euclid(g));
        giants.entry(a).or_default().push((b as usize, segs_on));
    }
    let mut steps = Vec::with_capacity(giants.len());
    for (a, list) in &giants {
        let k = g * a * m as i64;
        let mut masks = Vec::with_capacity(list.len());
        for &(b, segs_on) in list {
            // The mask pre-rotated by −k: slot i holds the mask's slot i − k.
            let vals = move || {
                let mut x = vec![C64::default(); n];
                for &sg in segs_on {
                    for r in 0..m {
                        let i = (sg * m + r) as i64 + k;
                        x[i.rem_euclid(n as i64) as usize] = factor;
                    }
                }
                x
            };
            let mut desc: Vec<u64> = alloc::vec![m as u64, (l % 2) as u64, k as u64];
            desc.extend(segs_on.iter().map(|&x| x as u64));
            let key = pt_key(6, &desc);
            masks.push((&babies[b], key, vals));
        }
        steps.push((masks, k));
    }
    // All giant steps' sums in one pass over the babies.
    let sums: Vec<Vec<PlainTerm<'_, E::Ct>>> =
        steps.iter().map(|(masks, _)| keyed_terms(masks)).collect();
    let mut terms = Vec::with_capacity(steps.len());
    for (z, (_, k)) in ex.mul_plain_sums(&sums)?.into_iter().zip(&steps) {
        let mut z = z.ok_or(crate::error::Error::InvalidParameters(
            "value kernel: empty giant step",
        ))?;
        ex.rescale(&mut z)?;
        terms.push((z, *k));
    }
    ex.rotate_sum_lazy(terms)
}

/// The value kernel: `P` in minimal folded-diagonal packing ([`crate::packing::PLayout`], `B_V`
/// ciphertexts) and `V` head-major (`B_V` ciphertexts) → `O` head-major with blocks paired as
/// real/imaginary parts ([`AttnPlan::o_map`], `⌈B_V/2⌉` ciphertexts).
pub fn value<E: Exec>(ex: &E, plan: &AttnPlan, p: &[E::Ct], v: &[E::Ct]) -> Result<Vec<E::Ct>> {
    check_slots(ex.slots(), plan.shape.slots)?;
    check_count("value kernel: P ciphertexts", plan.p_cts, p.len())?;
    check_count("value kernel: V ciphertexts", plan.b_v, v.len())?;
    let blocks = block_products(ex, plan, p, v)?;
    let mut it = blocks.into_iter();
    let mut out = Vec::new();
    while let Some(a) = it.next() {
        let z = match it.next() {
            Some(b) => {
                let mut s = ex.clone_ct(&a);
                ex.add_assign(&mut s, &b)?;
                let mut d = a;
                ex.sub_assign(&mut d, &b)?;
                let dc = ex.conjugate(&d)?;
                ex.add_assign(&mut s, &dc)?;
                s
            }
            None => {
                let c = ex.conjugate(&a)?;
                let mut s = a;
                ex.add_assign(&mut s, &c)?;
                s
            }
        };
        out.push(z);
    }
    Ok(out)
}
