//! SiLU (`x·σ(x)`, the activation of Llama-architecture MLPs, where SwiGLU multiplies it by
//! the up projection) in two-party MPC, from the exponential and reciprocal blocks.
//!
//! # The function
//!
//! `SiLU(x) − ReLU(x) = −t·σ(−t)` with `t = |x|`, for either sign of `x` (`σ(−t) =
//! 1 − σ(t)`), and `σ(−t) = e^{−t}/(1 + e^{−t})` needs the exponential of a non-positive
//! value only, with a denominator in `[1, 2]`: both well conditioned. So
//!
//! `out = ReLU(x) − t'·e^{−t'}·1/(1 + e^{−t'})`, `t' = min(|x|, T)`, `T = 16`,
//!
//! which is exact but for the clamp: beyond `T` the term is below `T·e^{−T} < 1.8·10⁻⁶`.
//!
//! # Protocol ([`Silu::run`])
//!
//! 1. `a = [x < 0]` (one [`Party::msb`]), `m = a·x` (one mux): `ReLU(x) = x − m`,
//!    `t = x − 2m`, local.
//! 2. `t' = min(t, T)` ([`Party::clamp`], one ReLU).
//! 3. `e = e^{−t'}` at 20 bits ([`exp_neg`]).
//! 4. `q = 1/(1 + e)` at 20 bits ([`recip`] with `J = 1`: `1 + e ∈ [1, 2]`).
//! 5. `σ = e·q` and `y = t'·σ`, two bounded products ([`Party::mul_bounded_fx`]: `e, q, σ`
//!    below `2^{21}` at 20 bits, `t'` below `2^{18}` at 13), then `out = ReLU(x) − y`.
//!
//! # Range and error
//!
//! Input and output at `F = 13`, valid for `|x| < 2^{ℓ−2}` as integers (the MSB's and the
//! mux's range); saturation is natural (beyond `T` the output is `ReLU(x)` up to the
//! `≤ 1.8·10⁻⁶` of the tail). Against the `f64` function ([`Silu::f64_reference`]) the
//! error is at most [`Silu::MAX_ERR`] `= 5·10⁻⁴`: the exponential's error (at most
//! [`crate::nonlinear::exp::EXP_ERR`], relative near `0` and small in absolute terms where
//! `t'` is large) times `t'/(1 + e)²`, the reciprocal's few ulps at 20 bits, three
//! truncations at 20 bits and the last at 13. Measured: `2.7·10⁻⁴` at most for the
//! reference over `[−20, 20]` every 5 ulps, `2.3·10⁻⁴` for the protocol on the test's
//! inputs. The protocol is within [`Silu::REF_ULPS`] of [`Silu::reference`] (the same steps
//! on the same integers, exactly rounded).
//!
//! # Cost (measured on 613 values, both parties, IKNP at 16 B per COT, `ℓ = 43`)
//!
//! 23.1 kB and 1,231 COTs per element, 14 + 77 rounds: the reciprocal is per element here
//! (in the softmax it is per row), so it dominates; GELU's degree-7 fit costs 6.8 kB. A
//! piecewise fit of `−t·σ(−t)` (degree 9 or more on `[0, 8]`, or EncFormer's CKKS-side
//! candidates) is the cheaper form to build next.

use crate::mpc::error::{MpcError, Result};
use crate::mpc::{Party, RingCfg, RingShares};
use crate::nonlinear::exp::{exp_neg, exp_neg_reference, EXP_FRAC};
use crate::nonlinear::fixed::{self, round_shift};
use crate::nonlinear::ops::sub;
use crate::nonlinear::recip::{recip, recip_reference};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// The clamp `T` of `|x|`.
pub const SILU_T: f64 = 16.0;
/// The recip's threshold count: `1 + e ∈ [1, 2] ⊂ [15/16, 4)`.
const RECIP_J: u32 = 1;
/// Bound bits of `e`, `q`, `σ` at [`EXP_FRAC`] bits (`≤ 1 + ε`).
const UNIT_BOUND: u32 = EXP_FRAC + 1;
/// Bound bits of `t' ≤ 16` at 13 bits.
const T_BOUND: u32 = 18;

/// The SiLU block (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Silu;

impl Silu {
    /// The asserted bound of `|out − x·σ(x)|` on the valid range.
    pub const MAX_ERR: f64 = 5.0e-4;
    /// The largest difference between the protocol and [`Silu::reference`], in ulps at 13
    /// bits.
    pub const REF_ULPS: i64 = 3;

    /// Checks the ring: `F = 13` and `ℓ ≥ 43`.
    pub fn validate(&self, ring: RingCfg) -> Result<()> {
        if ring.frac != 13 {
            return Err(MpcError::InvalidConfig("SiLU needs F = 13"));
        }
        if ring.ell < 43 {
            return Err(MpcError::InvalidConfig("SiLU needs ell >= 43"));
        }
        Ok(())
    }

    /// Shares of `SiLU(x)` at 13 bits, elementwise.
    pub async fn run<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
    ) -> Result<RingShares> {
        let r = p.ring();
        self.validate(r)?;
        let p0 = p.is_p0();
        let a = p.msb(x).await?;
        let m = p.mux(&a, x).await?;
        let relu = sub(r, x, &m)?;
        let t = sub(r, &relu, &m)?;
        let tc = p.clamp(&t, None, Some(fixed::encode(SILU_T, 13))).await?;
        let neg = RingShares::new(tc.as_slice().iter().map(|&v| r.sub(0, v)).collect());
        let e = exp_neg(p, &neg, 13).await?;
        let one = 1u64 << EXP_FRAC;
        let s = RingShares::new(
            e.as_slice()
                .iter()
                .map(|&v| if p0 { r.add(v, one) } else { v })
                .collect(),
        );
        let q = recip(p, &s, EXP_FRAC, RECIP_J).await?;
        let sig = p
            .mul_bounded_fx(&e, UNIT_BOUND, &q, UNIT_BOUND, EXP_FRAC)
            .await?;
        let y = p
            .mul_bounded_fx(&tc, T_BOUND, &sig, UNIT_BOUND, EXP_FRAC)
            .await?;
        sub(r, &relu, &y)
    }

    /// SwiGLU's product `SiLU(gate) ⊙ up` (the Llama MLP's hidden vector before its down
    /// projection), at 13 bits: [`Silu::run`] on `gate`, then one Beaver product
    /// ([`Party::mul_fx`]). Valid while `|SiLU(gate)·up| < 2^{15}` (the product's integers
    /// stay below `2^{ℓ−2}`); the error is [`Silu::MAX_ERR`]`·|up|` plus two ulps (the SiLU
    /// output's and the product's roundings).
    pub async fn swiglu<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        gate: &RingShares,
        up: &RingShares,
    ) -> Result<RingShares> {
        crate::mpc::error::expect_len("SwiGLU up", gate.len(), up.len())?;
        let s = self.run(p, gate).await?;
        p.mul_fx(&s, up, 13).await
    }

    /// The same steps on the same integers with exact rounding (`x` at 13 bits). Total: any
    /// input.
    pub fn reference(&self, ring: RingCfg, x: &[i64]) -> Vec<i64> {
        if self.validate(ring).is_err() {
            return Vec::new();
        }
        let tmax = fixed::encode(SILU_T, 13);
        x.iter()
            .map(|&v| {
                let relu = v.max(0);
                let tc = v.unsigned_abs().min(tmax as u64) as i64;
                let e = exp_neg_reference(-tc, 13);
                let q = recip_reference(e + (1 << EXP_FRAC), EXP_FRAC, RECIP_J);
                let sig = round_shift(e as i128 * q as i128, EXP_FRAC);
                let y = round_shift(tc as i128 * sig as i128, EXP_FRAC);
                relu.wrapping_sub(y)
            })
            .collect()
    }

    /// `x·σ(x)` in `f64`.
    pub fn f64_reference(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .map(|&v| {
                if v >= 0.0 {
                    v / (1.0 + libm::exp(-v))
                } else {
                    let e = libm::exp(v);
                    v * e / (1.0 + e)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::cost::Meter;
    use crate::nonlinear::fixed::ErrStats;
    use crate::nonlinear::testkit::*;
    use std::eprintln;

    /// Uniform in [−25, 25], dense near 0 and around ±T, and huge values.
    fn inputs(g: &mut rand_chacha::ChaCha20Rng, f: u32) -> Vec<i64> {
        let mut xs = uniform(g, 400, 25.0, f);
        xs.extend(uniform(g, 200, 4.0, f));
        let t = fixed::encode(SILU_T, f);
        xs.extend([0, 1, -1, t, t + 1, -t, -t - 1, t - 1, -t + 1]);
        xs.extend([1 << 30, -(1 << 30), (1 << 40) - 5, -(1 << 40) + 5]);
        xs
    }

    #[test]
    fn silu_is_within_its_bounds() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(17);
        let s = Silu;
        let xs = inputs(&mut g, r.frac);
        let (x0, x1) = share(r, &xs, &mut g);
        let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
        let c0 = p0.ot_counts();
        let (o0, o1) = both!(p0, p1, s.run(&mut p0, &x0).await, s.run(&mut p1, &x1).await);
        let (s0, s1) = (m0.read(), m1.read());
        let c1 = p0.ot_counts();
        let got = open(r, &o0, &o1);
        assert_within(
            &got,
            &s.reference(r, &xs),
            Silu::REF_ULPS,
            "silu vs reference",
        );
        let xf: Vec<f64> = xs.iter().map(|&v| fixed::decode(v, r.frac)).collect();
        let gf: Vec<f64> = got.iter().map(|&v| fixed::decode(v, r.frac)).collect();
        let e = ErrStats::of(&gf, &s.f64_reference(&xf));
        let (a, b) = (s0.offline_online(), s1.offline_online());
        let n = xs.len() as f64;
        let cots = ((c1.0 - c0.0) + (c1.1 - c0.1)) as f64 / n;
        eprintln!(
            "SiLU: max err {:.3e} mean {:.3e}; {:.0} B/elem, {cots:.0} COT/elem, rounds offline {} online {}",
            e.max_abs,
            e.mean_abs,
            (a.bytes_sent + b.bytes_sent) as f64 / n,
            s0.offline.rounds,
            s0.online.rounds
        );
        assert!(e.max_abs <= Silu::MAX_ERR, "{e:?}");
        // The reference over a dense grid of [−20, 20] against the function.
        let grid: Vec<i64> = (-20 * 8192..=20 * 8192).step_by(5).collect();
        let gf: Vec<f64> = s
            .reference(r, &grid)
            .iter()
            .map(|&v| fixed::decode(v, 13))
            .collect();
        let xf: Vec<f64> = grid.iter().map(|&v| fixed::decode(v, 13)).collect();
        let e = ErrStats::of(&gf, &s.f64_reference(&xf));
        eprintln!("SiLU reference on [−20, 20]: max err {:.3e}", e.max_abs);
        assert!(e.max_abs <= Silu::MAX_ERR, "{e:?}");
        // And it is not GELU or ReLU: at x = −1, SiLU is −0.269 (GELU −0.159, ReLU 0).
        let at = s.reference(r, &[fixed::encode(-1.0, 13)])[0];
        assert!((fixed::decode(at, 13) + 0.268_941).abs() < 1e-3);
    }

    #[test]
    fn swiglu_multiplies_by_up() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(19);
        let gate = uniform(&mut g, 300, 12.0, r.frac);
        let up = uniform(&mut g, 300, 6.0, r.frac);
        let (g0, g1) = share(r, &gate, &mut g);
        let (u0, u1) = share(r, &up, &mut g);
        let (o0, o1) = both!(
            p0,
            p1,
            Silu.swiglu(&mut p0, &g0, &u0).await,
            Silu.swiglu(&mut p1, &g1, &u1).await
        );
        let got = open(r, &o0, &o1);
        let dec = |v: &[i64]| -> Vec<f64> { v.iter().map(|&x| fixed::decode(x, 13)).collect() };
        let (gf, uf, of) = (dec(&gate), dec(&up), dec(&got));
        let want = Silu.f64_reference(&gf);
        for i in 0..got.len() {
            let err = (of[i] - want[i] * uf[i]).abs();
            let bound = Silu::MAX_ERR * uf[i].abs() + 2.0 * libm::exp2(-13.0);
            assert!(err <= bound, "{i}: {} vs {}", of[i], want[i] * uf[i]);
        }
        // Lengths that differ: a typed error before any message.
        let short = RingShares::new(u0.as_slice()[1..].to_vec());
        let ch = p0.channel();
        let fut = Silu.swiglu(&mut p0, &g0, &short);
        let polled = crate::mpc::Session::new(ch, fut).poll();
        match polled {
            core::task::Poll::Ready(Err(MpcError::LengthMismatch { .. })) => {}
            other => panic!("expected a shape error, got {other:?}"),
        }
    }

    #[test]
    fn silu_refuses_other_rings() {
        let bad = RingCfg {
            frac: 12,
            ..RingCfg::ENCFORMER
        };
        assert!(Silu.validate(bad).is_err());
        assert!(Silu.reference(bad, &[1]).is_empty());
    }
}
