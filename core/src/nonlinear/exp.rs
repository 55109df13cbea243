//! The exponential of non-positive shared values, saturated below at [`EXP_SAT`], by
//! range reduction and repeated squaring: `e^d ≈ P(d/2^k)^{2^k}` with a quadratic base
//! `P` and `k =` [`EXP_HALVINGS`] squarings, at [`EXP_FRAC`] internal fractional bits.
//!
//! # Protocol
//!
//! For shared `d ≤ 0` at `frac` fractional bits:
//!
//! 1. `d' = max(d, T)` with `T =` [`EXP_SAT`] `= −16` ([`Party::clamp`], one ReLU).
//! 2. `v = √c_2·(d'/2^k + h)` at `F' =` [`EXP_FRAC`] `= 20` bits, `h = c_1/(2c_2)`: a
//!    local product `d'·M` with the public `M = round(√c_2·2^{F'−frac−k+20})`, one
//!    truncation by 20 bits, plus the public `H = round(√c_2·h·2^{F'})`. Then
//!    `v ∈ [0.55, 0.73]`.
//! 3. The base `P(u) = c_0 + c_1·u + c_2·u² = v² + g`, `g = c_0 − c_1²/(4c_2)`: one
//!    squaring ([`Party::square_fx`]: 25 COTs at `ℓ = 43`, the bounded form on 23-bit
//!    shares) and a local addition.
//!    Completing the square makes all three coefficients free at the price of one
//!    squaring and one cheap truncation (1 COT).
//! 4. `k` squarings `b ← b²` at `F'` (each `< 2^{41} ≤ 2^{ℓ−2}` because `b ≤ 1.0001`).
//!
//! All truncations are *faithful and unbiased*: `⌊x/2^s⌋` or `⌈x/2^s⌉` (P0 offsets the
//! faithful truncation by `2^s` instead of `2^{s−1}`; see `Party::trunc_near`), so a
//! non-negative value never truncates below zero and rounding errors do not add up to
//! a bias through the squarings.
//!
//! # Error, and why `k = 6` with a free quadratic
//!
//! For the softmax the exponential's *relative* error matters, not only its absolute
//! one: a row with its maximum and `n − 1` entries at depth `d` has the sum error
//! `(n − 1)·|ê(d) − e^d|`, and the maximum's probability moves by about
//! `rel(d)/4` at the worst depth `d ≈ −ln(n − 1)` (`−4.8` for `n = 128`). The
//! approximation's relative error is `≈ 2^k·r(d/2^k)` with `r(u) = P(u)e^{−u} − 1`.
//! The Taylor base `1 + u + u²/2` with `k = 5` (`r ≈ u³/6`) gives a relative error of
//! 2 % at `d = −5` and `7·10^{-3}` on such rows; so the coefficients
//! `c_0 = 1`, `c_1 = 0.998883`, `c_2 = 0.471631` minimize (Nelder–Mead in `f64`) the
//! worst probability error over such two-level rows of `n ∈ {16, 128, 512}` entries,
//! at `k = 6` (`u ∈ [−1/4, 0]`): `≤ 1.8·10^{-4}` for the real polynomial, `2.3·10^{-4}`
//! with the reference's integers (`n ≤ 128`; `4·10^{-4}` at `n = 512`).
//!
//! Absolute error: the polynomial's `max_{d∈[T,0]} |P(d/64)^{64} − e^d| = 2.9·10^{-4}`
//! (largest near `d ≈ −3`); the integer reference reaches `3.76·10^{-4}`
//! (`exp_neg_reference(0) = 1 + 64` ulps: the rounding of `H²`, doubled six times).
//! Fixed point of the protocol against the reference: each of the `k + 2` truncations
//! is within one ulp (`2^{−F'}`) of the reference's rounding. The first (of `v`) enters
//! `P = v² + g` times `2v ≤ 2√c_2·h = c_1/√c_2 = 1.455`, the second adds its ulp, and
//! every later squaring doubles an earlier difference (times `b ≤ 1.0002`) and adds one:
//! `< 1.0002^k·2^k·(c_1/√c_2 + 1) + 2^k − 1 = 220.4` ulps, [`EXP_REF_ULPS`] `= 221`,
//! i.e. `2.1·10^{-4}` (measured 105 on the tests' inputs here, 133 on the softmax cost
//! test's 4,096 depths; the earlier bound `2^{k+1} + 2 = 130` missed the factor of the
//! first truncation and the later ones' sum). Asserted:
//! `|exp_neg(d) − e^{max(d,T)}| ≤` [`EXP_ERR`] `= 4.2·10^{-4}` on `[T, 0]` (measured
//! `3.9·10^{-4}`). Below `T` the output is the value at `T` (`0` or `1` ulp at `F'`)
//! against the true `e^d < e^T = 1.1·10^{-7}`, below half an output ulp `2^{−14}` of
//! the ring's `F = 13` for any row of up to 540 entries.
//!
//! # Cost per element
//!
//! One ReLU (clamp), one 1-COT truncation, `k + 1 = 7` squarings (25 COTs each at
//! `ℓ = 43`; 43 before the bounded squaring) and their truncations: measured 4.7 kB
//! with IKNP (both directions; 6.9 kB with full-ring squarings) and 39 rounds.

use crate::mpc::error::{MpcError, Result};
use crate::mpc::{Party, RingCfg, RingShares, TruncMode};
use crate::nonlinear::fixed::round_shift;
use crate::nonlinear::ops::{add_const, mul_int};
use rand_core::{CryptoRng, RngCore};

/// Internal fractional bits `F'` of the exponential (values in `[0, 1.0002]`, squares
/// below `2^{2F'+1} = 2^{41}`).
pub const EXP_FRAC: u32 = 20;

/// Number of squarings `k` (the input is divided by `2^k`).
pub const EXP_HALVINGS: u32 = 6;

/// Saturation threshold `T`: inputs below it are raised to it (real value).
pub const EXP_SAT: f64 = -16.0;

/// Maximum absolute error of [`exp_neg`] against `e^{max(d, T)}` (real units).
pub const EXP_ERR: f64 = 4.2e-4;

/// Maximum difference between [`exp_neg`] and [`exp_neg_reference`], in ulps at
/// [`EXP_FRAC`].
pub const EXP_REF_ULPS: i64 = 221;

/// Fractional bits of the scaled input product `d'·M` before its truncation.
const EXP_MBITS: u32 = 20;

/// Coefficients of the base polynomial `P(u) = c_0 + c_1·u + c_2·u²` (reals; the
/// block's are [`ExpCoeffs::BLOCK`], the tests pass wrong ones).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExpCoeffs {
    /// Constant term.
    pub c0: f64,
    /// Linear coefficient.
    pub c1: f64,
    /// Quadratic coefficient (`> 0`).
    pub c2: f64,
}

impl ExpCoeffs {
    /// The block's coefficients (see the module doc).
    pub(crate) const BLOCK: ExpCoeffs = ExpCoeffs {
        c0: 1.0,
        c1: 0.998_882_663_753_173_1,
        c2: 0.471_630_553_090_122_5,
    };

    /// The integers `(M, H, G)` for inputs at `frac` bits: `v = ⌊d'·M/2^{20}⌉ + H`
    /// is `√c_2·(u + h)` at `F'` (`u = d'/2^k`, `h = c_1/(2c_2)`), and
    /// `P(u) = v² + g` with `G = g·2^{F'}`, `g = c_0 − c_1²/(4c_2)`.
    fn ints(&self, frac: u32) -> (i64, i64, i64) {
        let sq = libm::sqrt(self.c2);
        let e = EXP_FRAC as i32 - frac as i32 - EXP_HALVINGS as i32 + EXP_MBITS as i32;
        let m = libm::round(libm::ldexp(sq, e)) as i64;
        let h = libm::round(libm::ldexp(self.c1 / (2.0 * sq), EXP_FRAC as i32)) as i64;
        let g = libm::round(libm::ldexp(
            self.c0 - self.c1 * self.c1 / (4.0 * self.c2),
            EXP_FRAC as i32,
        )) as i64;
        (m, h, g)
    }
}

/// Checks that the ring holds the squares at [`EXP_FRAC`] bits (`2F' + 1 ≤ ℓ − 2`) and
/// that `frac` is a usable input scale (`frac ≤ F' + 20 − k`).
pub fn exp_check(ring: RingCfg, frac: u32) -> Result<()> {
    if 2 * EXP_FRAC + 1 > ring.ell.saturating_sub(2) {
        return Err(MpcError::InvalidConfig(
            "exp_neg needs ell >= 2*EXP_FRAC + 3 (43)",
        ));
    }
    if frac > EXP_FRAC + EXP_MBITS - EXP_HALVINGS {
        return Err(MpcError::InvalidConfig("exp_neg input scale too large"));
    }
    Ok(())
}

/// `T` as a signed integer at `frac` bits.
fn sat_at(frac: u32) -> i64 {
    crate::nonlinear::fixed::encode(EXP_SAT, frac)
}

impl<R: RngCore + CryptoRng> Party<R> {
    /// Faithful, unbiased truncation: shares of `⌊x/2^s⌋` or `⌊x/2^s⌋ + 1` (the
    /// floor or the ceiling of `x/2^s` when it is not an integer; `x/2^s` or one more,
    /// with probability `2^{−s}`, when it is), for `|x| + 2^s < 2^{ℓ−2}`. P0 adds `2^s`
    /// before the faithful truncation ([`Party::trunc`], which returns `⌊·⌋` or one
    /// less). With uniform shares the carry it drops is `1` with probability
    /// `1 − (f+1)/2^s` (`f = x mod 2^s`), so the mean error is `2^{−s}` ulp. Under
    /// [`TruncMode::Exact`] it adds `2^{s−1}` instead (exact round half up). A
    /// non-negative `x` never truncates below `0`. Consumes `x`. (Private step of the
    /// softmax blocks.)
    pub(crate) async fn trunc_near(&mut self, mut x: RingShares, s: u32) -> Result<RingShares> {
        if s == 0 {
            return Ok(x);
        }
        let r = self.config().ring;
        // Checked before the offset `1 << s` (a shift by ≥ 64 would panic).
        if s >= r.ell - 1 {
            return Err(MpcError::InvalidInput("shift must be < ell - 1"));
        }
        let off = match self.config().trunc {
            TruncMode::Exact => 1u64 << (s - 1),
            TruncMode::KnownMsb | TruncMode::FullRange => 1u64 << s,
        };
        if self.is_p0() {
            for v in x.as_mut_slice() {
                *v = r.add(*v, off);
            }
        }
        self.trunc(&x, s).await
    }
}

/// Shares of `exp(max(d, T))` at [`EXP_FRAC`] fractional bits for shared `d ≤ 0` at
/// `frac` fractional bits (`|d| < 2^{ℓ−2}`), elementwise over the whole vector in one
/// batch per round. Error ≤ [`EXP_ERR`] against `e^{max(d,T)}`, see the module doc.
/// A positive `d` is outside the contract (the result is then meaningless).
pub async fn exp_neg<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    d: &RingShares,
    frac: u32,
) -> Result<RingShares> {
    exp_neg_with(p, d, frac, ExpCoeffs::BLOCK).await
}

/// [`exp_neg`] with the given base coefficients.
pub(crate) async fn exp_neg_with<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    d: &RingShares,
    frac: u32,
    co: ExpCoeffs,
) -> Result<RingShares> {
    let r = p.config().ring;
    exp_check(r, frac)?;
    let p0 = p.is_p0();
    let (m, h, g) = co.ints(frac);
    let dc = p.clamp(d, Some(sat_at(frac)), None).await?;
    let v = p.trunc_near(mul_int(r, &dc, m), EXP_MBITS).await?;
    let v = add_const(r, p0, &v, h);
    let sq = p.square_fx(&v, 0).await?;
    let sq = p.trunc_near(sq, EXP_FRAC).await?;
    let mut b = add_const(r, p0, &sq, g);
    for _ in 0..EXP_HALVINGS {
        let z = p.square_fx(&b, 0).await?;
        b = p.trunc_near(z, EXP_FRAC).await?;
    }
    Ok(b)
}

/// Plain-integer reference of [`exp_neg`]: the same steps on the same integers with
/// round-half-up ([`round_shift`]); `d` at `frac` bits, result at [`EXP_FRAC`] bits.
/// Total: any `d` (far outside the contract its additions wrap in `i64` instead of
/// panicking), and `0` for an input scale [`exp_check`] rejects (`frac + k > F' + 20`).
pub fn exp_neg_reference(d: i64, frac: u32) -> i64 {
    exp_neg_reference_with(d, frac, ExpCoeffs::BLOCK)
}

/// [`exp_neg_reference`] with the given coefficients.
pub(crate) fn exp_neg_reference_with(d: i64, frac: u32, co: ExpCoeffs) -> i64 {
    if frac > EXP_FRAC + EXP_MBITS - EXP_HALVINGS {
        return 0;
    }
    let (m, h, g) = co.ints(frac);
    let dc = d.max(sat_at(frac));
    let v = round_shift(dc as i128 * m as i128, EXP_MBITS).wrapping_add(h) as i128;
    let mut b = round_shift(v * v, EXP_FRAC).wrapping_add(g);
    for _ in 0..EXP_HALVINGS {
        b = round_shift(b as i128 * b as i128, EXP_FRAC);
    }
    b
}

/// The real function [`exp_neg`] approximates: `e^{max(d, T)}`.
pub fn exp_neg_f64(d: f64) -> f64 {
    libm::exp(d.max(EXP_SAT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::fixed::{decode, encode, ErrStats};
    use crate::nonlinear::testkit::*;
    use alloc::vec::Vec;
    use std::eprintln;

    /// Runs the protocol on `ds` (at `F = 13`) and returns the opened outputs.
    fn run(ds: &[i64], co: ExpCoeffs) -> Vec<i64> {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(7);
        let (x0, x1) = share(r, ds, &mut g);
        let f = r.frac;
        let (y0, y1) = both!(
            p0,
            p1,
            exp_neg_with(&mut p0, &x0, f, co).await,
            exp_neg_with(&mut p1, &x1, f, co).await
        );
        open(r, &y0, &y1)
    }

    fn inputs() -> Vec<i64> {
        let f = RingCfg::ENCFORMER.frac;
        let mut g = rng(3);
        let mut ds: Vec<i64> = uniform(&mut g, 600, 8.0, f)
            .into_iter()
            .map(|v| -v.abs())
            .collect();
        ds.extend((0..200).map(|i| encode(-16.0 * i as f64 / 200.0, f)));
        ds.extend([0, -1, encode(-3.0, f), sat_at(f), sat_at(f) - 1]);
        // Beyond the threshold: saturates.
        ds.extend([encode(-17.0, f), encode(-100.0, f), encode(-1.0e6, f)]);
        ds
    }

    fn errors(ds: &[i64], got: &[i64]) -> ErrStats {
        let f = RingCfg::ENCFORMER.frac;
        let g: Vec<f64> = got.iter().map(|&v| decode(v, EXP_FRAC)).collect();
        let w: Vec<f64> = ds.iter().map(|&d| exp_neg_f64(decode(d, f))).collect();
        ErrStats::of(&g, &w)
    }

    #[test]
    fn exp_neg_is_within_its_bound_and_its_reference() {
        let ds = inputs();
        let got = run(&ds, ExpCoeffs::BLOCK);
        let e = errors(&ds, &got);
        eprintln!(
            "exp_neg vs e^max(d,T): max {:.3e}, mean {:.3e} over {}",
            e.max_abs, e.mean_abs, e.count
        );
        assert!(e.max_abs <= EXP_ERR, "{e:?}");
        let f = RingCfg::ENCFORMER.frac;
        let want: Vec<i64> = ds.iter().map(|&d| exp_neg_reference(d, f)).collect();
        let ulps = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).max();
        eprintln!("exp_neg vs reference: max {ulps:?} ulp at F'");
        assert_within(&got, &want, EXP_REF_ULPS, "exp_neg");
        // The reference itself meets the bound on a fine grid.
        let grid: Vec<i64> = (0..=16 * 8192).map(|i| -i).collect();
        let rf: Vec<i64> = grid.iter().map(|&d| exp_neg_reference(d, f)).collect();
        let er = errors(&grid, &rf);
        eprintln!("exp_neg reference on the grid: max {:.3e}", er.max_abs);
        assert!(er.max_abs <= EXP_ERR);
        // Saturated inputs give the value at T, which is below 2^-21.
        for (&d, &v) in ds.iter().zip(&got) {
            if d <= sat_at(f) {
                assert!((0..=1).contains(&v), "saturated {d} -> {v}");
            }
            assert!(v >= 0);
        }
        assert!((got[ds.len() - 8] - (1 << EXP_FRAC)).abs() <= 200);
    }

    #[test]
    fn exp_reference_is_total_and_trunc_near_rejects_wide_shifts() {
        let wild = [
            i64::MIN,
            -(1 << 50),
            -1,
            0,
            1,
            1 << 50,
            i64::MAX - 1,
            i64::MAX,
        ];
        for frac in [0, 13, 34, 35, 63, 64, 1 << 31, u32::MAX] {
            for &d in &wild {
                let _ = exp_neg_reference(d, frac);
            }
        }
        assert!(exp_check(RingCfg::ENCFORMER, u32::MAX).is_err());
        for s in [RingCfg::ENCFORMER.ell - 1, 64, 65, 200] {
            let mut p = crate::mpc::Party::new(
                crate::mpc::PartyId::P0,
                crate::mpc::MpcConfig::ENCFORMER,
                rng(1),
            )
            .unwrap();
            let x = RingShares::new(alloc::vec![0; 3]);
            let mut sess = crate::mpc::Session::new(p.channel(), p.trunc_near(x, s));
            assert!(matches!(
                sess.poll(),
                core::task::Poll::Ready(Err(MpcError::InvalidInput(_)))
            ));
        }
    }

    #[test]
    fn a_wrong_base_coefficient_violates_the_bound() {
        let ds = inputs();
        // The constant term of the base off by 2^-13 (relative 1.2e-4 in the base,
        // 64 times that after the squarings).
        let bad = ExpCoeffs {
            c0: 1.0 + libm::ldexp(1.0, -13),
            ..ExpCoeffs::BLOCK
        };
        let e = errors(&ds, &run(&ds, bad));
        eprintln!("exp_neg with a wrong constant term: max {:.3e}", e.max_abs);
        assert!(e.max_abs > EXP_ERR);
    }
}
