//! The plaintext–ciphertext projection kernel `Y = X·W` (§III-B, Appendix A-B): segment-column
//! packing, baby-step giant-step over segment diagonals, complex packing of two input blocks per
//! ciphertext and decomplexification by conjugation.
//!
//! Input ciphertext `i` holds in segment `c'` the complex column `x_re + i·x_im` (channels given by
//! an input [`ChannelMap`]); output ciphertext `u` holds in segment `c` the columns named by an
//! output map (any pre-permutation `π` of `W`'s columns is just a different map: `π_S` for `Q`, `K`,
//! head-major for `V`, and the output projection reads the head-major value output directly —
//! Appendix A-B1, A-B4). With `C` diagonal segments and `δ = p·N₁ + q`:
//!
//! `c̃_p = Σ_i Σ_q Φ_C^q(x̃_i) ⊙ w̃_{i,p,q}`,  `y = Σ_p Φ_C^{p·N₁}(c̃_p)`,
//! `w̃_{i,p,q}[c'] = M_i[(c'+q) mod C][(c'−p·N₁) mod C]` (the paper's `α(c,q)`, `β(c,p)`), where
//! `M_i[c_in][c_out] = ½(W[ch_re][o] − i·W[ch_im][o])` so that `Re(x̃ ⊙ M) = x_re·W + x_im·W`.
//! Decomplexification `y = c̃ + conj(c̃)` costs one conjugation per output ciphertext; a *paired*
//! output (two real blocks as real/imaginary parts, the minimal FHE→MPC export of SCP Rule 3) is
//! `S + conj(D)` with `S, D = c̃_{re} ± i·c̃_{im}` — still one conjugation per ciphertext.
//!
//! When `C = N_seg` every `Φ_C` is one plain rotation. When `C < N_seg` the two-rotation form of
//! `Φ_C` is used with its masks folded into the weights (baby steps: masks after the hoisted
//! rotations; giant steps: masks before), so the kernel consumes exactly one level either way.
//! All baby-step rotations of an input are hoisted (`rotate_hoisted`, one decomposition per input)
//! and shared by every output group (the `Q/K/V` projection computes them once); the giant-step
//! rotations of an accumulator are lazy (`rotate_hoisted_lazy`): their key-switch outputs are
//! summed over `Q ∪ P` and brought down by one `mod_down_ext`.

use super::exec::{check_count, Exec, PlainTerm, PtValues};
pub use super::plan::ProjConfig;
use crate::ckks::C64;
use crate::error::{Error, Result};
use crate::packing::ChannelMap;
use alloc::vec;
use alloc::vec::Vec;

/// Weights `W[in_channel][out_channel]` (complex for the fused `W_Q + i·W_K`).
pub type WeightFn<'a> = &'a dyn Fn(usize, usize) -> C64;

/// One output of a projection: its layout, its weights and how it is finalized.
pub struct ProjGroup<'a> {
    /// Output layout (`segs ≤ C`); parts 1 make a paired (complex) output.
    pub out: &'a ChannelMap,
    /// `W[in][out]`.
    pub weight: WeightFn<'a>,
    /// Raw complex accumulator `Σ x ⊙ W` (no decomplexification; real inputs only): the fused
    /// projection `X·(W_Q + i·W_K) = Q + i·K` (Appendix A-B3).
    pub raw: bool,
}

/// Number of accumulators (giant-step chains) a group needs per output ciphertext.
fn kinds(g: &ProjGroup<'_>, u: usize) -> usize {
    if g.raw {
        return 1;
    }
    let paired = (0..g.out.segs).any(|c| g.out.get(u, 1, c).is_some());
    1 + paired as usize
}

/// Total accumulators of a set of groups (for [`ProjConfig::auto`]).
pub fn accumulators(groups: &[ProjGroup<'_>]) -> usize {
    groups
        .iter()
        .map(|g| (0..g.out.cts).map(|u| kinds(g, u)).sum::<usize>())
        .sum()
}

/// The projection kernel: returns, per group, its output ciphertexts (one level consumed).
pub fn project<E: Exec>(
    ex: &E,
    cfg: &ProjConfig,
    inputs: &[E::Ct],
    in_map: &ChannelMap,
    groups: &[ProjGroup<'_>],
) -> Result<Vec<Vec<E::Ct>>> {
    let (m, c, n) = (cfg.m, cfg.c, ex.slots());
    let n_seg = n / m;
    check_count("projection: input ciphertexts", in_map.cts, inputs.len())?;
    check_count("projection: input segment length", m, in_map.m)?;
    if c > n_seg || in_map.segs > c {
        return Err(Error::InvalidParameters("projection: bad input layout"));
    }
    if groups.iter().any(|g| g.out.segs > c || g.out.m != m) {
        return Err(Error::InvalidParameters("projection: bad output layout"));
    }
    if groups.iter().any(|g| g.raw)
        && (0..in_map.cts).any(|i| (0..c).any(|s| in_map.get(i, 1, s).is_some()))
    {
        return Err(Error::InvalidParameters("raw projection needs real inputs"));
    }
    let full = c == n_seg;
    let n1 = cfg.n1.clamp(1, c);
    let n2 = c.div_ceil(n1);
    let mi = m as i64;
    // Baby steps: per input, per q, per branch (full: one; restricted: A_q, B_q).
    let mut baby_amounts: Vec<(usize, usize, i64)> = Vec::new();
    for q in 0..n1 {
        baby_amounts.push((q, 0, q as i64 * mi));
        if !full && q > 0 {
            baby_amounts.push((q, 1, (q as i64 - c as i64) * mi));
        }
    }
    let ks: Vec<i64> = baby_amounts.iter().map(|b| b.2).collect();
    let babies: Vec<Vec<E::Ct>> = inputs
        .iter()
        .map(|x| ex.rotate_many(x, &ks))
        .collect::<Result<_>>()?;

    let mut outputs = Vec::with_capacity(groups.len());
    for g in groups {
        let mut outs = Vec::with_capacity(g.out.cts);
        for u in 0..g.out.cts {
            let nk = kinds(g, u);
            let mut accs: Vec<E::Ct> = Vec::with_capacity(nk);
            for kind in 0..nk {
                // M_i[c_in][c_out] for this (group, u, kind).
                let coef = |i: usize, c_in: usize, c_out: usize| -> C64 {
                    let w = |o: usize| -> C64 {
                        let mut acc = C64::default();
                        if let Some(ch) = in_map.get(i, 0, c_in) {
                            acc = acc + (g.weight)(ch, o);
                        }
                        if let Some(ch) = in_map.get(i, 1, c_in) {
                            acc = acc - C64::new(0.0, 1.0) * (g.weight)(ch, o);
                        }
                        acc
                    };
                    let re = g.out.get(u, 0, c_out).map(w).unwrap_or_default();
                    if g.raw {
                        return re;
                    }
                    let im = g.out.get(u, 1, c_out).map(w).unwrap_or_default();
                    let sign = if kind == 0 { 1.0 } else { -1.0 };
                    (re + C64::new(0.0, sign) * im) * 0.5
                };
                let out_active = |c_out: usize| g.out.active(u, c_out);
                // Every giant step's baby-step sum, then all of them in one pass over the
                // babies.
                let coef = &coef;
                let mut steps = Vec::new();
                for p in 0..n2 {
                    let pn = p * n1;
                    let halves: &[usize] = if full || pn == 0 { &[0] } else { &[0, 1] };
                    for &half in halves {
                        let mut prods = Vec::new();
                        for (i, bi) in babies.iter().enumerate() {
                            for (bidx, &(q, branch, _)) in baby_amounts.iter().enumerate() {
                                if pn + q >= c {
                                    continue;
                                }
                                let cond = move |cp: usize| -> bool {
                                    let br =
                                        full || if branch == 0 { cp < c - q } else { cp >= c - q };
                                    let hf = full || if half == 0 { cp >= pn } else { cp < pn };
                                    cp < c && br && hf
                                };
                                let live = (0..c).any(|cp| {
                                    cond(cp)
                                        && in_map.active(i, (cp + q) % c)
                                        && out_active((cp + c - pn % c) % c)
                                });
                                if !live {
                                    continue;
                                }
                                let vals = move || {
                                    let mut v = vec![C64::default(); n];
                                    for cp in 0..c {
                                        if !cond(cp) {
                                            continue;
                                        }
                                        let w = coef(i, (cp + q) % c, (cp + c - pn % c) % c);
                                        for r in 0..m {
                                            v[cp * m + r] = w;
                                        }
                                    }
                                    v
                                };
                                prods.push((&bi[bidx], vals));
                            }
                        }
                        let amount = if half == 0 {
                            pn as i64 * mi
                        } else {
                            (pn as i64 - c as i64) * mi
                        };
                        steps.push((prods, amount));
                    }
                }
                let sums: Vec<Vec<PlainTerm<'_, E::Ct>>> = steps
                    .iter()
                    .map(|(prods, _)| {
                        prods
                            .iter()
                            .map(|(ct, v)| (*ct, None, v as PtValues<'_>))
                            .collect()
                    })
                    .collect();
                let mut giants: Vec<(E::Ct, i64)> = Vec::new();
                for (z, (_, amount)) in ex.mul_plain_sums(&sums)?.into_iter().zip(&steps) {
                    if let Some(mut z) = z {
                        ex.rescale(&mut z)?;
                        giants.push((z, *amount));
                    }
                }
                if giants.is_empty() {
                    return Err(Error::InvalidParameters("projection: empty output"));
                }
                // Giant steps: key switches summed over Q ∪ P, one ModDown per accumulator.
                accs.push(ex.rotate_sum_lazy(giants)?);
            }
            let y = if g.raw {
                accs.pop().unwrap()
            } else {
                let d = ex.conjugate(accs.last().unwrap())?;
                let mut s = accs.swap_remove(0);
                ex.add_assign(&mut s, &d)?;
                s
            };
            outs.push(y);
        }
        outputs.push(outs);
    }
    Ok(outputs)
}

/// Splits minimal (complex) inputs `x̃ = a + i·b` into real ciphertexts `2a = x̃ + conj(x̃)` and
/// `2b = i·(conj(x̃) − x̃)`: one conjugation each, no level. Returns the real ciphertexts and their
/// channel map (`2u ↦` real part of `u`, `2u+1 ↦` imaginary part).
pub fn split_complex<E: Exec>(
    ex: &E,
    x: &[E::Ct],
    map: &ChannelMap,
) -> Result<(Vec<E::Ct>, ChannelMap)> {
    let mut out = Vec::with_capacity(2 * x.len());
    for xi in x {
        let cj = ex.conjugate(xi)?;
        let mut a = ex.clone_ct(xi);
        ex.add_assign(&mut a, &cj)?;
        let mut b = cj;
        ex.sub_assign(&mut b, xi)?;
        ex.mul_i(&mut b)?;
        out.push(a);
        out.push(b);
    }
    let real = map.split_parts();
    Ok((out, real))
}
