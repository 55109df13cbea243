//! The reciprocal of shared values in `[1, 2^{J+1})` (e.g. the row sums of a
//! softmax), by normalization with public thresholds and a product series
//! (Goldschmidt's form of Newton's iteration).
//!
//! # Protocol
//!
//! For shared `s` at `frac` fractional bits and a public `J ≥ 0`:
//!
//! 1. Normalization: `b_j = [s < 2^j]` for `j = 1..J` (one batched [`Party::msb`] of
//!    `s − 2^j` over all values and thresholds, then [`Party::b2a`]). The `b_j` are
//!    monotone, so with `e = #{j : s ≥ 2^j}` (`s ∈ [2^e, 2^{e+1})`) the scale
//!    `P = 2^{J−e} = 1 + Σ_j b_j·2^{J−j}` is *linear* in the `b_j`: local and exact.
//! 2. `z = s·P` ([`Party::mul_fx`] without truncation, `< 2^{J+1+frac}`), then one
//!    batched truncation of `(2z, z)` by `J + 1`: `s' = s·2^{−e} ∈ [1, 2)` and `s'/2`.
//! 3. Initial value `y_0 = a − s'/2` with `a = 2√3 − 2` (local): the minimax line of
//!    `1/x` on `[1, 2]` in the relative sense, `ε = 1 − s'·y_0 ∈ [−0.0718, 0.0718]`.
//! 4. One batched product `(s'·y_0, y_0·P)` (the second scaled to the same shift):
//!    `ε = 1 − s'y_0` and `q_0 = y_0·2^{−e}`.
//! 5. `q_1 = q_0(1 + ε)`, `q_2 = q_1(1 + ε²)`, `q_3 = q_2(1 + ε⁴)`, with `ε²` and `ε⁴`
//!    computed alongside, two products per round: `q_3 = (1 − ε^8)/s`.
//!
//! That is 5 product rounds (`s·P`, then 4) after the comparisons; every product is
//! per value (per row of a softmax), so its cost per matrix entry is small: measured
//! 21 kB (both directions) and 29 rounds per value at `J = 7`, i.e. 0.17 kB per entry
//! of a 128-entry row.
//!
//! # Error
//!
//! Relative approximation error `ε^8 ≤ 0.0718^8 < 7.1·10^{-10}`. Fixed point: the
//! truncations of `s'` and `s'/2` perturb `y_0` and `ε` by `≤ 1` ulp each, which the
//! series corrects (it converges for any `|ε| < 1`); the last three products each add
//! `< 1` ulp and multiply earlier errors by `1 + ε^{2^i} ≤ 1.08`; `q_0` carries `< 1`
//! ulp. So `|recip(s) − 1/s| ≤` [`RECIP_ULPS`] ulps at `frac` (absolute, `2^{−frac}`
//! each), plus `7.1·10^{-10}/s`. Protocol and [`recip_reference`] differ by at most
//! [`RECIP_REF_ULPS`].
//!
//! # Range
//!
//! Valid for `s ∈ [15/16, 2^{J+1})` (below `1` the normalization gives `s' = s` and
//! `|ε| ≤ 0.105`, still convergent to `< 1.5·10^{-8}`). Outside that range the result
//! is meaningless (nothing saturates: `s ≥ 2^{J+1}` gives `s' ≥ 2` and a divergent
//! series); callers guarantee the range (the softmax's row sums lie in
//! `[1 − 2^{−13}, 1.0002·cols]`). Requires `J ≤ frac`,
//! `2·frac + 1 ≤ ℓ − 2` and `J + frac + 2 ≤ ℓ − 2` ([`recip_check`]: the truncation
//! of `2z < 2^{J+2+frac}` must stay within the `KnownMsb` bound `2^{ℓ−2}`).

use crate::mpc::error::{MpcError, Result};
use crate::mpc::{Party, RingCfg, RingShares};
use crate::nonlinear::fixed::{encode, round_shift};
use crate::nonlinear::ops::{add_const, mul_int, sub};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// Initial-line constant `a = 2√3 − 2` of `y_0 = a − s'/2`.
pub const RECIP_Y0: f64 = 1.464_101_615_137_754_6;

/// Maximum absolute error of [`recip`] against `1/s`, in ulps at the input's `frac`
/// bits (plus the relative `7.1·10^{-10}`).
pub const RECIP_ULPS: i64 = 6;

/// Maximum difference between [`recip`] and [`recip_reference`], in ulps.
pub const RECIP_REF_ULPS: i64 = 4;

/// Checks the scale and the threshold count (see the module doc).
pub fn recip_check(ring: RingCfg, frac: u32, j: u32) -> Result<()> {
    let lim = ring.ell.saturating_sub(2);
    if j > frac || 2 * frac + 1 > lim || j + frac + 2 > lim {
        return Err(MpcError::InvalidConfig(
            "recip needs J <= frac, 2*frac + 1 <= ell - 2, J + frac + 2 <= ell - 2",
        ));
    }
    Ok(())
}

/// Shares of `1/s` at `frac` fractional bits for shared `s ∈ [15/16, 2^{J+1})` at
/// `frac` bits, elementwise and batched (see the module doc for the protocol, the
/// error and the range).
pub async fn recip<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    s: &RingShares,
    frac: u32,
    j: u32,
) -> Result<RingShares> {
    recip_with(p, s, frac, j, RECIP_Y0).await
}

/// [`recip`] with the initial-line constant `a`.
pub(crate) async fn recip_with<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    s: &RingShares,
    frac: u32,
    j: u32,
    a: f64,
) -> Result<RingShares> {
    let r = p.config().ring;
    recip_check(r, frac, j)?;
    let p0 = p.is_p0();
    let n = s.len();
    let one = 1i64 << frac;
    // 1. P = 1 + Σ_j [s < 2^j]·2^{J−j}.
    let mut pw = crate::nonlinear::ops::constant(r, p0, 1, n);
    if j > 0 {
        let mut d = Vec::with_capacity(n * j as usize);
        for t in 1..=j {
            d.extend(add_const(r, p0, s, -(1i64 << (t + frac))).into_vec());
        }
        let bits = p.msb(&RingShares::new(d)).await?;
        let b = p.b2a(&bits).await?;
        for (t, chunk) in (1..=j).zip(b.as_slice().chunks(n.max(1))) {
            for (v, &c) in pw.as_mut_slice().iter_mut().zip(chunk) {
                *v = r.add(*v, r.mul(c, 1u64 << (j - t)));
            }
        }
    }
    // 2. s' = s·P/2^J and s'/2, one truncation.
    let z = p.mul_fx(s, &pw, 0).await?;
    let mut zz = mul_int(r, &z, 2).into_vec();
    zz.extend_from_slice(z.as_slice());
    let zz = zeroize::Zeroizing::new(p.trunc_near(RingShares::new(zz), j + 1).await?.into_vec());
    let (s1, half) = zz.split_at(n);
    let (s1, half) = (RingShares::new(s1.to_vec()), RingShares::new(half.to_vec()));
    // 3. y0 = a − s'/2.
    let y0 = add_const(r, p0, &mul_int(r, &half, -1), encode(a, frac));
    // 4. (s'·y0, y0·P·2^{frac−J}) / 2^frac.
    let y0s = mul_int(r, &y0, 1i64 << (frac - j));
    let m = mul_cat(p, [&s1, &y0s], [&y0, &pw], frac).await?;
    let (ry, q0) = m.split_at(n);
    let eps = sub(
        r,
        &crate::nonlinear::ops::constant(r, p0, one, n),
        &RingShares::new(ry.to_vec()),
    )?;
    let mut q = RingShares::new(q0.to_vec());
    // 5. q ← q(1 + ε^{2^i}), ε^{2^{i+1}} alongside.
    let mut e = eps;
    for i in 0..3 {
        let one_e = add_const(r, p0, &e, one);
        if i < 2 {
            let m = mul_cat(p, [&e, &q], [&e, &one_e], frac).await?;
            let (e2, qn) = m.split_at(n);
            e = RingShares::new(e2.to_vec());
            q = RingShares::new(qn.to_vec());
        } else {
            let z = p.mul_fx(&q, &one_e, 0).await?;
            q = p.trunc_near(z, frac).await?;
        }
    }
    Ok(q)
}

/// Product of the concatenations `[x_0, x_1]·[y_0, y_1]`, truncated by `s` (one batch).
async fn mul_cat<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    x: [&RingShares; 2],
    y: [&RingShares; 2],
    s: u32,
) -> Result<Vec<u64>> {
    let cat = |v: [&RingShares; 2]| {
        let mut o = v[0].as_slice().to_vec();
        o.extend_from_slice(v[1].as_slice());
        RingShares::new(o)
    };
    let z = p.mul_fx(&cat(x), &cat(y), 0).await?;
    Ok(p.trunc_near(z, s).await?.into_vec())
}

/// Plain-integer reference of [`recip`] (round half up, exact comparisons). Total:
/// any `s` (the additions wrap in `i64` far outside the range), and `0` for
/// parameters no ring accepts (`J > frac`, `2·frac + 1 > 62` or `J + frac + 2 > 62`).
pub fn recip_reference(s: i64, frac: u32, j: u32) -> i64 {
    recip_reference_with(s, frac, j, RECIP_Y0)
}

/// [`recip_reference`] with the initial-line constant `a`.
pub(crate) fn recip_reference_with(s: i64, frac: u32, j: u32, a: f64) -> i64 {
    if j > frac || 2 * frac + 1 > 62 || j + frac + 2 > 62 {
        return 0;
    }
    let one = 1i64 << frac;
    let mul = |x: i64, y: i64, sh: u32| round_shift(x as i128 * y as i128, sh);
    let pw: i64 = 1
        + (1..=j)
            .filter(|&t| s < 1i64 << (t + frac))
            .map(|t| 1i64 << (j - t))
            .sum::<i64>();
    let z = s as i128 * pw as i128;
    let s1 = round_shift(2 * z, j + 1);
    let half = round_shift(z, j + 1);
    let y0 = encode(a, frac).wrapping_sub(half);
    let eps = one.wrapping_sub(mul(s1, y0, frac));
    let mut q = mul(y0 << (frac - j), pw, frac);
    let mut e = eps;
    for i in 0..3 {
        let qn = mul(q, one.wrapping_add(e), frac);
        if i < 2 {
            e = mul(e, e, frac);
        }
        q = qn;
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::fixed::{decode, ErrStats};
    use crate::nonlinear::testkit::*;
    use rand_core::RngCore;
    use std::eprintln;

    const FRAC: u32 = 20;
    const J: u32 = 7;

    fn inputs() -> Vec<i64> {
        let mut g = rng(11);
        let mut v: Vec<i64> = (0..300)
            .map(|_| {
                let u = (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                // Log-uniform over [1, 2^{J+1}).
                encode(libm::exp2(u * (J + 1) as f64), FRAC)
            })
            .collect();
        for t in 0..=J + 1 {
            let b = 1i64 << (t + FRAC);
            v.extend([b - 1, b, b + 1]);
        }
        v.retain(|&x| x < 1i64 << (J + 1 + FRAC));
        v.extend([encode(15.0 / 16.0, FRAC), encode(0.99, FRAC)]);
        v
    }

    fn run(v: &[i64], a: f64) -> Vec<i64> {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(5);
        let (x0, x1) = share(r, v, &mut g);
        let (y0, y1) = both!(
            p0,
            p1,
            recip_with(&mut p0, &x0, FRAC, J, a).await,
            recip_with(&mut p1, &x1, FRAC, J, a).await
        );
        open(r, &y0, &y1)
    }

    fn errors(v: &[i64], got: &[i64]) -> ErrStats {
        let g: Vec<f64> = got.iter().map(|&x| decode(x, FRAC)).collect();
        let w: Vec<f64> = v.iter().map(|&x| 1.0 / decode(x, FRAC)).collect();
        ErrStats::of(&g, &w)
    }

    #[test]
    fn recip_is_within_its_bound_and_its_reference() {
        let v = inputs();
        let got = run(&v, RECIP_Y0);
        let e = errors(&v, &got);
        let bound = RECIP_ULPS as f64 * decode(1, FRAC) + 7.1e-10;
        eprintln!(
            "recip vs 1/s: max {:.3e} ({:.2} ulp), mean {:.3e}, over {}",
            e.max_abs,
            e.max_abs / decode(1, FRAC),
            e.mean_abs,
            e.count
        );
        assert!(e.max_abs <= bound, "{e:?}");
        let want: Vec<i64> = v.iter().map(|&s| recip_reference(s, FRAC, J)).collect();
        let ulps = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).max();
        eprintln!("recip vs reference: max {ulps:?} ulp");
        assert_within(&got, &want, RECIP_REF_ULPS, "recip");
        let re = errors(&v, &want);
        assert!(re.max_abs <= bound, "reference {re:?}");
    }

    #[test]
    fn a_wrong_initial_constant_violates_the_bound() {
        let v = inputs();
        // 1.2 instead of 2√3 − 2: ε up to 0.6 at s' = 2, 0.6^8 ≈ 1.7 %.
        let e = errors(&v, &run(&v, 1.2));
        eprintln!("recip with a = 1.2: max {:.3e}", e.max_abs);
        assert!(e.max_abs > RECIP_ULPS as f64 * decode(1, FRAC) + 7.1e-10);
    }

    #[test]
    fn recip_rejects_a_normalization_beyond_the_truncation_bound() {
        // 2z < 2^{J+2+frac} (plus the offset) must stay below 2^{ℓ−2} = 2^41.
        let r = RingCfg::ENCFORMER;
        assert!(recip_check(r, 20, 19).is_ok());
        assert!(recip_check(r, 20, 20).is_err());
        assert!(recip_check(r, 19, 19).is_ok());
    }

    #[test]
    fn recip_reference_is_total() {
        let wild = [i64::MIN, i64::MIN + 1, -1, 0, 1, 1 << 40, 1 << 62, i64::MAX];
        for (frac, j) in [
            (20, 7),
            (20, 0),
            (20, 19),
            (0, 0),
            (5, 7),
            (62, 0),
            (64, 3),
            (300, 200),
        ] {
            for &s in &wild {
                let _ = recip_reference(s, frac, j);
            }
        }
        // Valid inputs are unchanged by the guards.
        assert_eq!(recip_reference(1 << FRAC, FRAC, J), 1 << FRAC);
    }

    #[test]
    fn recip_rejects_bad_scales() {
        let r = RingCfg::ENCFORMER;
        assert!(recip_check(r, 20, 7).is_ok());
        assert!(recip_check(r, 21, 7).is_err());
        assert!(recip_check(r, 5, 7).is_err());
    }
}
