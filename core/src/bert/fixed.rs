//! The fixed-point emulation of the private pipeline: the same function the protocol computes,
//! in the clear. The linear layers run in `f64` (CKKS computes them to ~2^-20 here), every
//! C2M boundary rounds to the ring's `F` fractional bits (the protocol truncates locally instead,
//! within one ulp of this: [`crate::convert::C2mPlan::local_rounding`]), every
//! bias is added as its `F`-bit encoding (except FC1's with the GELU split, which CKKS adds before
//! the candidates), and every nonlinear block is its integer reference in
//! [`crate::nonlinear`] (the protocols match those references within a few ulps). So on a sentence
//! set, this path tells what the encrypted path will predict, at plaintext speed: the
//! "fixed-point" column of the accuracy table.

use super::plan::{SessionPlan, MPC_CONFIG};
use super::reference::{head_context, head_scores};
use super::weights::EncoderWeights;
use crate::error::{Error, Result};
use crate::nonlinear::fixed::{decode, encode};
use crate::nonlinear::layernorm::LnAffine;
use crate::packing::Mat;
use alloc::vec::Vec;

fn to_int(x: &Mat, f: u32) -> Vec<i64> {
    x.data.iter().map(|&v| encode(v, f)).collect()
}

fn to_mat(v: &[i64], rows: usize, cols: usize, f: u32) -> Mat {
    Mat {
        rows,
        cols,
        data: v.iter().map(|&x| decode(x, f)).collect(),
    }
}

fn add_bias_int(v: &mut [i64], b: &[f64], f: u32) {
    let cols = b.len();
    for (e, x) in v.iter_mut().enumerate() {
        *x += encode(b[e % cols], f);
    }
}

fn refuse_empty(v: Vec<i64>, what: &'static str) -> Result<Vec<i64>> {
    if v.is_empty() {
        return Err(Error::InvalidParameters(what));
    }
    Ok(v)
}

/// The logits the private pipeline computes for input `x` (`m × d`, `valid` real tokens), by
/// emulation (see the module documentation).
pub fn logits_fixed(
    plan: &SessionPlan,
    w: &EncoderWeights,
    x: &Mat,
    valid: usize,
) -> Result<Vec<f64>> {
    w.validate()?;
    let c = plan.cfg;
    let (m, d, heads, ffn) = (plan.m, c.hidden, c.heads, c.ffn);
    if w.cfg != c || x.rows != m || x.cols != d || valid == 0 || valid > m {
        return Err(Error::InvalidParameters("fixed-point path: shape"));
    }
    let ring = MPC_CONFIG.ring;
    let f = ring.frac;
    let dh = c.head_dim();
    let inv = 1.0 / libm::sqrt(dh as f64);
    let (sm, ln, gelu) = (plan.softmax(valid), plan.layernorm(), plan.gelu());
    let mut xi = to_int(x, f);
    for l in &w.layers {
        let xr = to_mat(&xi, m, d, f);
        let lin = |a: &Mat, wm: &Mat, b: &[f64], s: f64| {
            let mut y = a.matmul(wm);
            for r in 0..y.rows {
                for cc in 0..y.cols {
                    y.data[r * y.cols + cc] = (y.data[r * y.cols + cc] + b[cc]) * s;
                }
            }
            y
        };
        let (q, k, v) = (
            lin(&xr, &l.wq, &l.bq, inv),
            lin(&xr, &l.wk, &l.bk, 1.0),
            lin(&xr, &l.wv, &l.bv, 1.0),
        );
        // Scores, row-major (h·m + query)·m + key, rounded at the C2M boundary.
        let s: Vec<i64> = head_scores(&q, &k, heads)
            .iter()
            .map(|&v| encode(v, f))
            .collect();
        let p = refuse_empty(sm.reference(ring, &s), "softmax reference")?;
        let o = head_context(|e| decode(p[e], f), &v, heads);
        let mut y = to_int(&o.matmul(&l.wo), f);
        add_bias_int(&mut y, &l.bo, f);
        for (a, b) in y.iter_mut().zip(&xi) {
            *a += b;
        }
        let aff = LnAffine {
            gamma: &l.ln1_g,
            beta: &l.ln1_b,
        };
        let hi = refuse_empty(ln.reference(ring, &y, Some(&aff)), "layernorm reference")?;
        let hr = to_mat(&hi, m, d, f);
        let g = if plan.blocks.split() {
            // The bias enters in CKKS; both candidates are evaluated on the unrounded `x` and
            // each is rounded at its own C2M boundary.
            let mut x1 = hr.matmul(&l.w1);
            for (e, v) in x1.data.iter_mut().enumerate() {
                *v += l.b1[e % ffn];
            }
            let ev = |c: &[f64], v: f64| c.iter().rev().fold(0.0, |a, k| a * v + k);
            let enc =
                |c: &[f64]| -> Vec<i64> { x1.data.iter().map(|&v| encode(ev(c, v), f)).collect() };
            let (c0, c1) = gelu.candidates();
            let (f0, f1) = (enc(&c0), enc(&c1));
            refuse_empty(
                gelu.reference_split(&to_int(&x1, f), &f0, &f1),
                "gelu reference",
            )?
        } else {
            let mut f1 = to_int(&hr.matmul(&l.w1), f);
            add_bias_int(&mut f1, &l.b1, f);
            refuse_empty(gelu.reference(ring, &f1), "gelu reference")?
        };
        let gr = to_mat(&g, m, ffn, f);
        let mut f2 = to_int(&gr.matmul(&l.w2), f);
        add_bias_int(&mut f2, &l.b2, f);
        for (a, b) in f2.iter_mut().zip(&hi) {
            *a += b;
        }
        let aff = LnAffine {
            gamma: &l.ln2_g,
            beta: &l.ln2_b,
        };
        xi = refuse_empty(ln.reference(ring, &f2, Some(&aff)), "layernorm reference")?;
    }
    // Head: Σ over real rows, times W/valid at F bits, + b.
    let scale = libm::exp2(f as f64);
    Ok((0..c.classes)
        .map(|k| {
            let dot: f64 = (0..d)
                .map(|cc| {
                    let sum: i64 = (0..valid).map(|r| xi[r * d + cc]).sum();
                    let wq = encode(w.head.w.get(cc, k) / valid as f64, f);
                    (sum as f64) * (wq as f64) / scale
                })
                .sum();
            (dot + encode(w.head.b[k], f) as f64) / scale
        })
        .collect())
}
