//! The SCP-chained stages of one attention block over a [`super::plan::AttnPlan`]: `Q/K/V`
//! projection → score → (MPC softmax) → value → output projection.

use super::exec::Exec;
use super::plan::AttnPlan;
use super::projection::{accumulators, project, split_complex, ProjGroup};
use super::{score, value};
use crate::ckks::C64;
use crate::error::Result;
use crate::packing::Mat;
use alloc::vec::Vec;

/// `(Q, K, V)` ciphertext lists.
pub type Triple<C> = (Vec<C>, Vec<C>, Vec<C>);
/// `(Q, K)` ciphertext lists.
pub type Pair<C> = (Vec<C>, Vec<C>);

fn real_w(w: &Mat) -> impl Fn(usize, usize) -> C64 + '_ {
    move |i, o| C64::real(w.get(i, o))
}

/// `Q = X·W_Q`, `K = X·W_K` (score order `π_S`) and `V = X·W_V` (head-major) from the minimal
/// input `X`, sharing one set of hoisted baby steps. One level.
pub fn qkv_projection<E: Exec>(
    ex: &E,
    plan: &AttnPlan,
    x: &[E::Ct],
    wq: &Mat,
    wk: &Mat,
    wv: &Mat,
) -> Result<Triple<E::Ct>> {
    let (xm, qm, vm) = (plan.x_map(), plan.qk_map(), plan.v_map());
    let (fq, fk, fv) = (real_w(wq), real_w(wk), real_w(wv));
    let groups = [
        ProjGroup {
            out: &qm,
            weight: &fq,
            raw: false,
        },
        ProjGroup {
            out: &qm,
            weight: &fk,
            raw: false,
        },
        ProjGroup {
            out: &vm,
            weight: &fv,
            raw: false,
        },
    ];
    debug_assert_eq!(accumulators(&groups), 2 * plan.b_s + plan.b_v);
    let mut outs = project(ex, &plan.proj_qkv, x, &xm, &groups)?.into_iter();
    Ok((
        outs.next().unwrap(),
        outs.next().unwrap(),
        outs.next().unwrap(),
    ))
}

/// The fused `Q/K` projection (Appendix A-B3): `X·(W_Q + i·W_K)/4` on the split real input gives
/// `Y' = (Q + i·K)/2`; then `Q = Y' + conj(Y')`, `K = i·(conj(Y') − Y')`. One level.
pub fn fused_qk_projection<E: Exec>(
    ex: &E,
    plan: &AttnPlan,
    x: &[E::Ct],
    wq: &Mat,
    wk: &Mat,
) -> Result<Pair<E::Ct>> {
    let (xs, xmap) = split_complex(ex, x, &plan.x_map())?;
    let qm = plan.qk_map();
    let f = |i: usize, o: usize| C64::new(wq.get(i, o), wk.get(i, o)) * 0.25;
    let groups = [ProjGroup {
        out: &qm,
        weight: &f,
        raw: true,
    }];
    let y = project(ex, &plan.proj_fused, &xs, &xmap, &groups)?
        .pop()
        .unwrap();
    let (mut q, mut k) = (Vec::new(), Vec::new());
    for yb in &y {
        let cj = ex.conjugate(yb)?;
        let mut qb = ex.clone_ct(yb);
        ex.add_assign(&mut qb, &cj)?;
        let mut kb = cj;
        ex.sub_assign(&mut kb, yb)?;
        ex.mul_i(&mut kb)?;
        q.push(qb);
        k.push(kb);
    }
    Ok((q, k))
}

/// The score kernel (see [`score::score`]).
pub fn score_kernel<E: Exec>(
    ex: &E,
    plan: &AttnPlan,
    q: &[E::Ct],
    k: &[E::Ct],
) -> Result<Vec<E::Ct>> {
    score::score(ex, plan, q, k)
}

/// The value kernel (see [`value::value`]); output paired head-major ([`AttnPlan::o_map`]).
pub fn value_kernel<E: Exec>(
    ex: &E,
    plan: &AttnPlan,
    p: &[E::Ct],
    v: &[E::Ct],
) -> Result<Vec<E::Ct>> {
    value::value(ex, plan, p, v)
}

/// The output projection `Y = O·W_O`: reads the paired head-major value output directly (its
/// order is absorbed by the input channel map, i.e. by the plaintext weights) and exports `Y` in
/// minimal packing (SCP Rules 1 and 3). One level.
pub fn output_projection<E: Exec>(
    ex: &E,
    plan: &AttnPlan,
    o: &[E::Ct],
    wo: &Mat,
) -> Result<Vec<E::Ct>> {
    let (om, ym) = (plan.o_map(), plan.x_map());
    let f = real_w(wo);
    let groups = [ProjGroup {
        out: &ym,
        weight: &f,
        raw: false,
    }];
    Ok(project(ex, &plan.proj_out, o, &om, &groups)?.pop().unwrap())
}
