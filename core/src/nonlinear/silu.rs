//! SiLU (`x·σ(x)`, the activation of Llama-architecture MLPs, where SwiGLU multiplies it by
//! the up projection) in two-party MPC, as a two-piece polynomial beside ReLU.
//!
//! # The function
//!
//! `SiLU(x) − ReLU(x) = Q(|x|)` with `Q(t) = −t·σ(−t) = −t/(1 + e^t)`, for either sign of `x`
//! (`σ(−t) = 1 − σ(t)`): an even correction that decays like `t·e^{−t}`, more slowly than
//! GELU's, so one polynomial would need degree 11–12 with coefficients in the ten thousands
//! to reach `10⁻⁴` on `[0, 12]`. Two pieces of degree 7 do it with small ones:
//!
//! | piece | variable | fit (Lawson) | max fit error | with the coefficients rounded |
//! |---|---|---|---|---|
//! | `t ∈ [0, 4]` | `u = t/4` | [`SILU_QA`] | `2.5·10⁻⁵` | `3.7·10⁻⁵` |
//! | `t ∈ (4, 12]` | `v = (t − 4)/8` | [`SILU_QB`] | `1.2·10⁻⁵` | `3.3·10⁻⁵` |
//!
//! and beyond `T = 12` the output is `ReLU(x)`, off by at most `12/(1 + e^{12}) = 7.4·10⁻⁵`.
//!
//! # Protocol ([`Silu::run`])
//!
//! 1. `a = [x < 0]` (one [`Party::msb`]), `m = a·x` (one mux): `ReLU(x) = x − m`,
//!    `t = |x| = x − 2m`, local.
//! 2. `[t ≤ 4]` and `[t ≤ 12]` (one MSB over `2n`: `t` is non-negative and small, so
//!    `t − c` does not wrap).
//! 3. Both pieces on all lanes in one batch of GELU's power tree (`u²`; `u³, u⁴`;
//!    `A + u⁴·B`: four bounded products in three levels on `2n` lanes); the lanes outside
//!    a piece's interval come out garbled, as GELU's do, and the exact bits below drop them.
//! 4. `out = ReLU(x) + [t ≤ 4]·Q_A + ([t ≤ 12] ⊕ [t ≤ 4])·Q_B` (one mux over `2n`).
//!
//! # Range and error
//!
//! Input and output at `F = 13`, valid for `|x| < 2^{ℓ−2}` as integers (the MSB's and the
//! mux's range); saturation is natural (beyond `T` the output is `ReLU(x)`). Against the
//! `f64` function ([`Silu::f64_reference`]) the error is at most [`Silu::MAX_ERR`]
//! `= 5·10⁻⁴`. Inside `[−T, T]` it is a fit's error (`≤ 3.7·10⁻⁵`) plus the power tree's
//! fixed point (powers at 20 bits, each within 2 ulps, times `Σ|c_k| ≤ 39`: `7.4·10⁻⁵`; the
//! truncations to 13 bits: within 3 ulps of `2^{−13}`), about `4.8·10⁻⁴` in all. Beyond `T`
//! the output is `ReLU(x)` exactly (no power tree, no truncation), so the error is the tail
//! `|SiLU − ReLU| ≤ 7.4·10⁻⁵` alone. The protocol is within [`Silu::REF_ULPS`] of
//! [`Silu::reference`] (the same steps on the same integers, exactly rounded).
//!
//! # Cost (measured on 613 values, both parties, IKNP at 16 B per COT, `ℓ = 43`)
//!
//! 10.5 kB and 554 COTs per element, 2 + 29 rounds; measured error `1.7·10⁻⁴` for the protocol
//! on the test's inputs, `9.7·10⁻⁵` for the reference over `[−20, 20]` every 5 ulps. The form
//! before it, `t·e^{−t}/(1 + e^{−t})`
//! from the exponential and reciprocal blocks (exact but for its clamp at 16, error `2.7·10⁻⁴`),
//! cost 23.1 kB, 1,231 COTs and 14 + 77 rounds: its reciprocal is per element here (in the
//! softmax it is per row).

use crate::mpc::error::{MpcError, Result};
use crate::mpc::{BoolShares, Party, RingCfg, RingShares};
use crate::nonlinear::fixed;
use crate::nonlinear::gelu::{power_tree_lanes, power_tree_ref_u};
use crate::nonlinear::ops::{add, sub};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// The cutoff `T`: beyond it the output is `ReLU(x)`.
pub const SILU_T: f64 = 12.0;
/// The boundary between the two pieces.
pub const SILU_MID: f64 = 4.0;
/// `Q(4u) ≈ −4u/(1 + e^{4u})` on `u ∈ [0, 1]`, ascending powers of `u` (Lawson's iteratively
/// reweighted least squares against the exact function, max error `2.49·10⁻⁵`).
pub const SILU_QA: [f64; 8] = [
    -2.482_774_494_911_294_7e-5,
    -1.996_031_807_367_21,
    3.895_941_886_195_384_7,
    1.038_596_131_456_575,
    -10.384_184_722_098_908,
    12.862_969_208_343_854,
    -6.944_030_133_541_418,
    1.454_794_575_017_937_6,
];
/// `Q(4 + 8v)` on `v ∈ [0, 1]`, the same way (max error `1.15·10⁻⁵`).
pub const SILU_QB: [f64; 8] = [
    -0.071_956_371_704_934_19,
    0.423_141_122_899_131_97,
    -1.096_932_327_275_840_4,
    1.525_163_630_205_341_5,
    -1.045_881_698_316_609_5,
    0.098_166_516_045_424_38,
    0.290_285_989_794_756_17,
    -0.122_072_128_198_958_32,
];

/// The power tree's headroom: `|Q| ≤ 0.28` is past GELU's `2^{−2}` at 43 bits.
const HEADROOM: u32 = 1;

/// XOR of two bit-share vectors (local).
fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(&x, &y)| x ^ y).collect()
}

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
        let n = x.len();
        let a = p.msb(x).await?;
        let m = p.mux(&a, x).await?;
        let relu = sub(r, x, &m)?;
        let t = sub(r, &relu, &m)?;
        let (mid, cut) = (fixed::encode(SILU_MID, 13), fixed::encode(SILU_T, 13));
        let shifted = |c: i64| {
            let c = r.from_signed(c);
            t.as_slice()
                .iter()
                .map(move |&v| if p0 { r.add(v, c) } else { v })
        };
        // [t ≤ c] = [t − (c + 1) < 0].
        let mut arg = Vec::with_capacity(2 * n);
        arg.extend(shifted(-(mid + 1)));
        arg.extend(shifted(-(cut + 1)));
        let b = p.msb(&RingShares::new(arg)).await?;
        let (b_mid, b_cut) = b.as_slice().split_at(n);
        // u = t/4 and v = (t − 4)/8 at 20 bits.
        let mut u: Vec<u64> = t.as_slice().iter().map(|&v| r.mul(v, 1 << 5)).collect();
        u.extend(shifted(-mid).map(|v| r.mul(v, 1 << 4)));
        let q = power_tree_lanes(p, &[&SILU_QA, &SILU_QB], HEADROOM, &RingShares::new(u)).await?;
        let mut sel = b_mid.to_vec();
        sel.extend(xor(b_cut, b_mid));
        let o = p.mux(&BoolShares::new(sel), &q).await?;
        let (oa, ob) = o.as_slice().split_at(n);
        let pieces = RingShares::new(oa.iter().zip(ob).map(|(&a, &b)| r.add(a, b)).collect());
        add(r, &relu, &pieces)
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
        let (mid, cut) = (fixed::encode(SILU_MID, 13), fixed::encode(SILU_T, 13));
        x.iter()
            .map(|&v| {
                let relu = v.max(0);
                let t = v.unsigned_abs();
                if t <= mid as u64 {
                    relu + power_tree_ref_u(&SILU_QA, HEADROOM, (t as i64) << 5)
                } else if t <= cut as u64 {
                    relu + power_tree_ref_u(&SILU_QB, HEADROOM, (t as i64 - mid) << 4)
                } else {
                    relu
                }
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
        for c in [SILU_T, SILU_MID] {
            let t = fixed::encode(c, f);
            xs.extend([t, t + 1, -t, -t - 1, t - 1, -t + 1]);
        }
        xs.extend([0, 1, -1]);
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
        let rf = s.reference(r, &xs);
        assert_within(&got, &rf, Silu::REF_ULPS, "silu vs reference");
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
