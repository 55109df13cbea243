//! FEnc2's quadratic activation `y = a·x² + b·x + c` for public coefficients, with the
//! square by a Beaver product or by one Gilboa cross term, and the input clamped to
//! the range in which the square cannot wrap.
//!
//! # Protocol
//!
//! 1. `x ← clamp(x, −X, X)` ([`Party::clamp`]: two ReLUs in one batch), so that inputs
//!    beyond the valid range saturate to `q(±X)` instead of wrapping.
//! 2. `s = ⌊x² / 2^F⌉` at `F` bits: [`Party::mul_fx`]`(x, x, F)` ([`QuadKind::Beaver`],
//!    `2ℓ` COTs and a triple opening) or [`Party::square_fx`]`(x, F)`
//!    ([`QuadKind::Square`]: the bounded squaring, 25 COTs at `ℓ = 43` and no opening).
//! 3. `v = A·s + B·x` locally, `A = ⌊a·2^{Fa}⌉`, `B = ⌊b·2^{Fa}⌉` (public integers at
//!    `Fa` coefficient bits), then `y = ⌊v / 2^{Fa}⌉ + C`, `C = ⌊c·2^F⌉`: one more
//!    faithful truncation. `bx + c` costs nothing.
//!
//! # Range
//!
//! With `h = ⌊(ℓ−2)/2⌋` the clamp bound is `X = (2^h − 1)/2^F` (`ℓ = 43, F = 13`:
//! `X ≈ 128`), so `x² < 2^{2h} ≤ 2^{ℓ−2}` as an integer at `2F` bits, the bound of the
//! faithful truncation. `Fa` is the largest value in `[0, 2F]` with
//! `|A|·2^{2h−F} + |B|·2^h < 2^{ℓ−2}` (so `v` stays in range too; at `ℓ = 43, F = 13`
//! about `|A| < 2^{14}`: `Fa = 16` for `|a| ≤ 1/8`, `12` for `|a| ≤ 3`;
//! [`Quad::coef_bits`]); [`Quad::validate`]
//! refuses coefficients for which no `Fa ≥ 0` fits, or `|c| ≥ 2^{ℓ−3−F}`.
//! Inputs with `|x| > X` give exactly `q(±X)` (saturation); the input itself must be in
//! the engine's range `|x| < 2^{ℓ−2}` (ring integers), which the clamp needs.
//!
//! # Error
//!
//! Against [`Quad::reference`] (the same integers, exact rounding): the square's
//! faithful truncation moves `s` by at most one, hence `v` by at most `|A|`, and the
//! final truncation adds one: `|y − ref| ≤ 1 + ⌈|A|/2^{Fa}⌉` ulps ([`Quad::ulps`]).
//! Against the real `a·x² + b·x + c` on the clamped `x` (exact at `F` bits):
//! `|s − x²| ≤ 1.5·2^{−F}`, `|A/2^{Fa} − a|, |B/2^{Fa} − b| ≤ 2^{−Fa−1}`, the final
//! truncation `≤ 1.5·2^{−F}`, `|C/2^F − c| ≤ 2^{−F−1}`, so
//! `|err| ≤ (|a| + 2^{−Fa−1})·1.5·2^{−F} + 2^{−Fa−1}(x² + |x|) + 2^{−F+1}`
//! ([`Quad::bound`]).
//!
//! # Cost per element (`ℓ = 43`)
//!
//! The clamp (two ReLUs), then `ℓ` COTs ([`QuadKind::Square`]) or `2ℓ` COTs plus an
//! opening ([`QuadKind::Beaver`]) for the square, and two truncations (1 COT each).

use crate::mpc::error::Result;
use crate::mpc::{MpcError, Party, RingCfg, RingShares};
use crate::nonlinear::fixed;
use crate::nonlinear::ops::{add_const, mul_int};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// How the square `x²` is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuadKind {
    /// A Beaver product `x·x` with a Gilboa triple ([`Party::mul_fx`]).
    Beaver,
    /// The bounded squaring ([`Party::square_fx`]): one Gilboa cross term on 23-bit
    /// shares plus two wrap COTs, 25 COTs at `ℓ = 43` against the product's 86.
    Square,
}

/// `y = a·x² + b·x + c` (FEnc2) with public coefficients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quad {
    /// Coefficient of `x²`.
    pub a: f64,
    /// Coefficient of `x`.
    pub b: f64,
    /// Constant term.
    pub c: f64,
    /// How the square is computed.
    pub kind: QuadKind,
}

/// The integer parameters a [`Quad`] runs with.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// Clamp bound as an integer at `F` bits.
    xmax: i64,
    /// Coefficient bits `Fa`.
    fa: u32,
    /// `a`, `b` at `Fa` bits and `c` at `F` bits.
    ai: i64,
    bi: i64,
    ci: i64,
}

impl Quad {
    fn plan(&self, ring: RingCfg) -> Result<Plan> {
        if !(self.a.is_finite() && self.b.is_finite() && self.c.is_finite()) {
            return Err(MpcError::InvalidConfig("quad coefficients must be finite"));
        }
        let (ell, f) = (ring.ell, ring.frac);
        if ell < 8 || 2 * f + 2 > ell {
            return Err(MpcError::InvalidConfig(
                "quad needs 2F + 2 <= l (the square at 2F bits)",
            ));
        }
        let h = (ell - 2) / 2;
        if h <= f {
            return Err(MpcError::InvalidConfig("quad's clamp range is empty"));
        }
        let xmax = (1i64 << h) - 1;
        let limit = libm::ldexp(1.0, (ell - 2) as i32);
        let cmax = libm::ldexp(1.0, (ell - 3 - f) as i32);
        if libm::fabs(self.c) >= cmax {
            return Err(MpcError::InvalidConfig("quad constant c out of range"));
        }
        for fa in (0..=2 * f).rev() {
            let sc = libm::ldexp(1.0, fa as i32);
            let (ai, bi) = (libm::round(self.a * sc), libm::round(self.b * sc));
            let v = libm::fabs(ai) * libm::ldexp(1.0, (2 * h - f) as i32)
                + libm::fabs(bi) * libm::ldexp(1.0, h as i32);
            if v < limit {
                return Ok(Plan {
                    xmax,
                    fa,
                    ai: ai as i64,
                    bi: bi as i64,
                    ci: fixed::encode(self.c, f),
                });
            }
        }
        Err(MpcError::InvalidConfig(
            "quad coefficients too large for the clamp range",
        ))
    }

    /// Checks the coefficients and the ring (see the module doc's range).
    pub fn validate(&self, ring: RingCfg) -> Result<()> {
        self.plan(ring).map(drop)
    }

    /// The clamp bound `X` (real): inputs beyond `±X` saturate to `q(±X)`.
    pub fn range(&self, ring: RingCfg) -> f64 {
        let h = (ring.ell.saturating_sub(2)) / 2;
        fixed::decode((1i64 << h.min(62)) - 1, ring.frac)
    }

    /// The coefficient bits `Fa` (`None` if the coefficients are refused).
    pub fn coef_bits(&self, ring: RingCfg) -> Option<u32> {
        self.plan(ring).ok().map(|p| p.fa)
    }

    /// The stated bound, in ulps at `F` bits, between the protocol and
    /// [`Quad::reference`]: `1 + ⌈|A|/2^{Fa}⌉`.
    pub fn ulps(&self, ring: RingCfg) -> i64 {
        match self.plan(ring) {
            Ok(p) => 1 + (p.ai.unsigned_abs().div_ceil(1u64 << p.fa)) as i64,
            Err(_) => 0,
        }
    }

    /// The stated bound against the real function at a clamped input `x` (real).
    pub fn bound(&self, ring: RingCfg, x: f64) -> f64 {
        let Ok(p) = self.plan(ring) else {
            return 0.0;
        };
        let u = libm::ldexp(1.0, -(ring.frac as i32));
        let ca = libm::ldexp(1.0, -(p.fa as i32) - 1);
        (libm::fabs(self.a) + ca) * 1.5 * u + ca * (x * x + libm::fabs(x)) + 2.0 * u
    }

    /// `a·x² + b·x + c` of shared `x` at `F` bits, `x` clamped to `±X` first.
    pub async fn run<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
    ) -> Result<RingShares> {
        let ring = p.config().ring;
        let pl = self.plan(ring)?;
        let f = ring.frac;
        let xc = p.clamp(x, Some(-pl.xmax), Some(pl.xmax)).await?;
        let s = match self.kind {
            QuadKind::Beaver => p.mul_fx(&xc, &xc, f).await?,
            QuadKind::Square => p.square_fx(&xc, f).await?,
        };
        let (as_, bx) = (mul_int(ring, &s, pl.ai), mul_int(ring, &xc, pl.bi));
        let v = crate::nonlinear::ops::add(ring, &as_, &bx)?;
        let y = p.trunc_round(v, pl.fa).await?;
        Ok(add_const(ring, p.is_p0(), &y, pl.ci))
    }

    /// The same function on plain integers at `F` bits, with exact rounding (empty if
    /// the coefficients are refused).
    pub fn reference(&self, ring: RingCfg, x: &[i64]) -> Vec<i64> {
        let Ok(pl) = self.plan(ring) else {
            return Vec::new();
        };
        let f = ring.frac;
        x.iter()
            .map(|&v| {
                let v = v.clamp(-pl.xmax, pl.xmax);
                let s = fixed::mul(v, v, f);
                let t = pl.ai as i128 * s as i128 + pl.bi as i128 * v as i128;
                fixed::round_shift(t, pl.fa) + pl.ci
            })
            .collect()
    }

    /// The real function `a·x² + b·x + c` (no clamp).
    pub fn f64_reference(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .map(|&v| self.a * v * v + self.b * v + self.c)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::testkit::*;
    use std::eprintln;

    /// Runs `q` on `xs`, checks it against the integer reference (ulps) and returns the
    /// reconstructed reals.
    fn run_checked(q: &Quad, xs: &[i64], seed: u64) -> Vec<f64> {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(seed);
        let (x0, x1) = share(r, xs, &mut g);
        let (y0, y1) = both!(p0, p1, q.run(&mut p0, &x0).await, q.run(&mut p1, &x1).await);
        let got = open(r, &y0, &y1);
        assert_within(&got, &q.reference(r, xs), q.ulps(r), "quad vs reference");
        got.iter().map(|&v| fixed::decode(v, r.frac)).collect()
    }

    /// Max of `|err| − bound(x)` (≤ 0 when the bound holds) and the error stats.
    fn excess(q: &Quad, r: RingCfg, xs: &[i64], got: &[f64]) -> (f64, fixed::ErrStats) {
        let xm = q.range(r);
        let xf: Vec<f64> = xs
            .iter()
            .map(|&v| fixed::decode(v, r.frac).clamp(-xm, xm))
            .collect();
        let want = q.f64_reference(&xf);
        let worst = xf
            .iter()
            .zip(got.iter().zip(&want))
            .map(|(&x, (&g, &w))| libm::fabs(g - w) - q.bound(r, x))
            .fold(f64::NEG_INFINITY, f64::max);
        (worst, fixed::ErrStats::of(got, &want))
    }

    /// FEnc2's quadratic `0.125x² + 0.5x + 0.25`, evaluated as `kind`.
    fn fenc2(kind: QuadKind) -> Quad {
        Quad {
            a: 0.125,
            b: 0.5,
            c: 0.25,
            kind,
        }
    }

    #[test]
    fn quad_matches_the_real_function_within_its_bound() {
        let r = RingCfg::ENCFORMER;
        let mut g = rng(11);
        for (kind, seed) in [(QuadKind::Square, 1), (QuadKind::Beaver, 2)] {
            let q = fenc2(kind);
            // |A|·2^{27} < 2^{41}: A < 2^{14}, so Fa = 16 for a = 1/8.
            assert_eq!(q.coef_bits(r), Some(16));
            let mut xs = uniform(&mut g, 200, 8.0, r.frac);
            xs.extend(uniform(&mut g, 56, 120.0, r.frac));
            let got = run_checked(&q, &xs, seed);
            let (worst, e) = excess(&q, r, &xs, &got);
            eprintln!(
                "quad {kind:?}: max abs err {:.3e}, mean {:.3e} (excess over bound {worst:.2e})",
                e.max_abs, e.mean_abs
            );
            assert!(worst <= 0.0, "{kind:?}: bound exceeded by {worst}");
        }
    }

    #[test]
    fn large_coefficients_use_fewer_bits_and_keep_their_bound() {
        let r = RingCfg::ENCFORMER;
        let q = Quad {
            a: -3.0,
            b: 7.5,
            c: -2.0,
            kind: QuadKind::Square,
        };
        let fa = q.coef_bits(r).unwrap();
        assert!(fa < 2 * r.frac);
        let xs = uniform(&mut rng(12), 128, 100.0, r.frac);
        let got = run_checked(&q, &xs, 3);
        let (worst, e) = excess(&q, r, &xs, &got);
        eprintln!(
            "quad a=-3 (Fa = {fa}): max abs err {:.3e}, mean {:.3e}",
            e.max_abs, e.mean_abs
        );
        assert!(worst <= 0.0);
        let too_big = Quad { a: 1e9, ..q };
        assert!(matches!(
            too_big.validate(r),
            Err(MpcError::InvalidConfig(_))
        ));
        let nan = Quad { b: f64::NAN, ..q };
        assert!(nan.validate(r).is_err());
    }

    #[test]
    fn a_wrong_coefficient_fails_the_bound() {
        let r = RingCfg::ENCFORMER;
        let q = fenc2(QuadKind::Square);
        let xs = uniform(&mut rng(13), 64, 8.0, r.frac);
        let wrong = Quad {
            a: q.a + 1.0 / 64.0,
            ..q
        };
        let got = run_checked(&wrong, &xs, 4);
        let (worst, _) = excess(&q, r, &xs, &got);
        assert!(worst > 0.0, "a wrong coefficient must break the bound");
    }

    #[test]
    fn out_of_range_inputs_saturate() {
        let r = RingCfg::ENCFORMER;
        let q = fenc2(QuadKind::Square);
        let xm = fixed::encode(q.range(r), r.frac);
        let huge = (1i64 << (r.ell - 2)) - 1;
        let xs = [xm + 1, -xm - 1, 3 * xm, -5 * xm, huge, -huge, xm, -xm];
        for kind in [QuadKind::Square, QuadKind::Beaver] {
            let q = Quad { kind, ..q };
            let got = run_checked(&q, &xs, 5);
            let want = q.reference(r, &xs);
            let (hi, lo) = (want[6], want[7]);
            for (k, &v) in got.iter().enumerate().take(6) {
                assert_eq!(
                    want[k],
                    if xs[k] > 0 { hi } else { lo },
                    "reference saturates"
                );
                let lim = fixed::decode(if xs[k] > 0 { hi } else { lo }, r.frac);
                assert!(
                    libm::fabs(v - lim) <= q.ulps(r) as f64 * libm::ldexp(1.0, -(r.frac as i32)),
                    "{kind:?}: input {} must saturate ({v} vs {lim})",
                    xs[k]
                );
            }
            let (worst, _) = excess(&q, r, &xs, &got);
            assert!(worst <= 0.0);
        }
    }
}
