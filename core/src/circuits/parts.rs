//! Real polynomials of the two real vectors a complex-packed ciphertext carries.
//!
//! The complex packing puts two real vectors in one ciphertext, `z = a + i·b` per slot. An
//! elementwise real function of both, `p(a) + i·p(b)`, is not a polynomial in `z`, so
//! [`eval_part_polys`] unpacks first, with one conjugation:
//!
//! - `u = z + z̄ = 2a` and `v = i·(z − z̄) = −2b`, both with real slots (the product by `i` is
//!   exact and costs no level);
//! - `p(a) = P(u)` with `P(u) = p(u/2)`, and `p(b) = P'(v)` with `P'(v) = p(−v/2)`: the halving
//!   and the sign move into the coefficients;
//! - the result is repacked as `P(u) + i·P'(v)`.
//!
//! Several polynomials of one input share the powers `u^k` and `v^k`, `k ≤ d`. Each power is one
//! product of two lower powers at the least depth, `⌈log₂ k⌉`. Every term `c_k·u^k` is then a
//! constant multiply-accumulate whose constant is encoded at the scale that brings the term to a
//! chosen output scale after the one final rescale. So all terms of a sum have equal scales, and
//! the output has exactly the scale asked for (up to the floating-point rounding of the scale
//! itself): the input's, or a lower one that leaves room for outputs larger than the input.
//!
//! **Depth:** `⌈log₂ d⌉ + 1` levels for degree `d ≥ 1` ([`part_poly_depth`]).
//!
//! **Cost per input ciphertext**, for `J` polynomials of degree `d`: one conjugation,
//! `2(d − 1)` ciphertext products (each relinearized and rescaled), at most `2·J·d` constant
//! multiply-accumulates, and `2J` rescales. The dry-run executors count exactly these.

use crate::circuits::exec::Exec;
use crate::error::{Error, Result};
use alloc::vec::Vec;

/// Levels [`eval_part_polys`] consumes for polynomials of degree `degree` (at least 1).
pub fn part_poly_depth(degree: usize) -> usize {
    match degree {
        0 | 1 => 1,
        d => (usize::BITS - (d - 1).leading_zeros()) as usize + 1,
    }
}

/// One power `w^k` of an unpacked real input, with its level-independent exact scale.
struct Power<C> {
    ct: C,
    scale: f64,
}

/// The powers `w^1 … w^d` of `w` (scale `scale`), each by one product at the least depth.
fn powers<E: Exec>(ex: &E, w: E::Ct, scale: f64, d: usize) -> Result<Vec<Power<E::Ct>>> {
    let mut pw: Vec<Power<E::Ct>> = Vec::with_capacity(d);
    pw.push(Power { ct: w, scale });
    for k in 2..=d {
        // k = a + b with a the largest power of two below k: depth(k) = depth(a) + 1.
        let a = if k.is_power_of_two() {
            k / 2
        } else {
            1 << (usize::BITS - 1 - k.leading_zeros())
        };
        let b = k - a;
        let (pa, pb) = (&pw[a - 1], &pw[b - 1]);
        let lvl = ex.level(&pa.ct).min(ex.level(&pb.ct));
        if lvl == 0 {
            return Err(Error::LevelExhausted);
        }
        let (mut x, mut y) = (ex.clone_ct(&pa.ct), ex.clone_ct(&pb.ct));
        ex.drop_to(&mut x, lvl)?;
        ex.drop_to(&mut y, lvl)?;
        let q = ex.rescale_prime(lvl);
        let mut t = ex.mul_ct(&x, &y)?;
        ex.relin(&mut t)?;
        ex.rescale(&mut t)?;
        let s = pa.scale * pb.scale / q;
        pw.push(Power { ct: t, scale: s });
    }
    Ok(pw)
}

/// `Σ_k c_k·w^k` at level `lf − 1` and scale `target` (the constants are encoded at
/// `target·q_lf / scale(w^k)`, so one rescale by `q_lf` lands every term on `target`).
fn combine<E: Exec>(
    ex: &E,
    pw: &[Power<E::Ct>],
    coeffs: &[f64],
    lf: usize,
    target: f64,
) -> Result<E::Ct> {
    let q = ex.rescale_prime(lf);
    let mut acc = None;
    for (k, &c) in coeffs.iter().enumerate().skip(1) {
        if c == 0.0 {
            continue;
        }
        let p = &pw[k - 1];
        let mut x = ex.clone_ct(&p.ct);
        ex.drop_to(&mut x, lf)?;
        ex.mul_const_acc(&mut acc, &x, c, target * q / p.scale)?;
    }
    let mut out = match acc {
        Some(a) => a,
        None => {
            // A constant polynomial: a zero term carries the ciphertext.
            let p = &pw[0];
            let mut x = ex.clone_ct(&p.ct);
            ex.drop_to(&mut x, lf)?;
            let mut a = None;
            ex.mul_const_acc(&mut a, &x, 0.0, target * q / p.scale)?;
            a.ok_or(Error::InvalidParameters("empty polynomial"))?
        }
    };
    ex.rescale(&mut out)?;
    if coeffs[0] != 0.0 {
        ex.add_const(&mut out, coeffs[0])?;
    }
    Ok(out)
}

/// `[p_j(a) + i·p_j(b) for p_j in polys]` for a ciphertext `z = a + i·b` of scale `scale` (see the
/// module documentation). Each polynomial is given by its ascending coefficients. The outputs are
/// at level `level(z) − part_poly_depth(d)` (`d` the largest degree) and at scale `target`.
///
/// Errors: an empty list, an empty or non-finite polynomial, a non-positive scale, or too few
/// levels ([`Error::LevelExhausted`]).
pub fn eval_part_polys<E: Exec>(
    ex: &E,
    z: &E::Ct,
    scale: f64,
    target: f64,
    polys: &[Vec<f64>],
) -> Result<Vec<E::Ct>> {
    if polys.is_empty() || polys.iter().any(|p| p.is_empty()) {
        return Err(Error::InvalidParameters(
            "part polynomials: at least one polynomial, each with a coefficient",
        ));
    }
    let positive = |s: f64| s.is_finite() && s > 0.0;
    if polys.iter().flatten().any(|c| !c.is_finite()) || !positive(scale) || !positive(target) {
        return Err(Error::NonFinite);
    }
    let d = polys.iter().map(|p| p.len() - 1).max().unwrap_or(0).max(1);
    let depth = part_poly_depth(d);
    let level = ex.level(z);
    if level < depth {
        return Err(Error::LevelExhausted);
    }
    let lf = level + 1 - depth;
    // u = z + z̄ = 2a; v = i(z − z̄) = −2b.
    let zc = ex.conjugate(z)?;
    let mut u = ex.clone_ct(z);
    ex.add_assign(&mut u, &zc)?;
    let mut v = ex.clone_ct(z);
    ex.sub_assign(&mut v, &zc)?;
    ex.mul_i(&mut v)?;
    let pu = powers(ex, u, scale, d)?;
    let pv = powers(ex, v, scale, d)?;
    let mut out = Vec::with_capacity(polys.len());
    for p in polys {
        // P(u) = p(u/2), P'(v) = p(−v/2).
        let (mut cu, mut cv) = (Vec::with_capacity(p.len()), Vec::with_capacity(p.len()));
        let (mut hu, mut hv) = (1.0, 1.0);
        for &c in p {
            cu.push(c * hu);
            cv.push(c * hv);
            hu *= 0.5;
            hv *= -0.5;
        }
        let mut re = combine(ex, &pu, &cu, lf, target)?;
        let mut im = combine(ex, &pv, &cv, lf, target)?;
        ex.mul_i(&mut im)?;
        ex.add_assign(&mut re, &im)?;
        out.push(re);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::exec::SymExec;

    #[test]
    fn depth_is_the_least() {
        let want = [
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 3),
            (5, 4),
            (7, 4),
            (8, 4),
            (9, 5),
        ];
        for (d, depth) in want {
            assert_eq!(part_poly_depth(d), depth, "degree {d}");
        }
    }

    /// The dry run counts one conjugation, `2(d − 1)` products and a rescale per product and per
    /// polynomial part, and ends `part_poly_depth(d)` levels down.
    #[test]
    fn dry_run_counts() {
        let ex = SymExec::new(64);
        let z = ex.fresh(6);
        let polys = [
            alloc::vec![0.1, 0.5, 0.25, 0.0, -0.01],
            alloc::vec![0.0, 1.0, 0.5, 0.1, 0.2],
        ];
        let out = eval_part_polys(&ex, &z, 1.0, 1.0, &polys).unwrap();
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|c| c.level == 6 - 3));
        let c = ex.counts();
        assert_eq!(c.conjugations, 1);
        assert_eq!(c.ct_mults, 2 * 3);
        assert_eq!(c.relins, 2 * 3);
        assert_eq!(c.rescales, 2 * 3 + 2 * 2);
        assert_eq!(c.const_mults, 2 * (3 + 4));
        // Too few levels, empty and non-finite inputs are refused.
        let low = ex.fresh(2);
        assert!(eval_part_polys(&ex, &low, 1.0, 1.0, &polys).is_err());
        assert!(eval_part_polys(&ex, &z, 1.0, 1.0, &[]).is_err());
        assert!(eval_part_polys(&ex, &z, 1.0, 1.0, &[alloc::vec![f64::NAN, 1.0]]).is_err());
    }
}
