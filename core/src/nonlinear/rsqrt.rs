//! Reciprocal square root of shared positive fixed-point values by normalization and
//! Newton's iteration (for the LayerNorm block, one value per row, so its per-value
//! cost is spread over a whole row).
//!
//! For `v` (an integer at `frac_in` fractional bits) the block returns
//! `g = mult / √(v / 2^{frac_in})` at `frac_out` bits:
//!
//! 1. **Comparisons**: `c_j = [v < 2^j]` for `j = lo..=hi`, one batched MSB over
//!    `(hi − lo + 1)` values per input. The bits are monotone in `j`, so for
//!    `e = ⌊log2 v⌋` (clamped to `[lo, hi − 1]`) every function of `e` is *linear* in
//!    them: `f(e) = f(hi − 1) + Σ_{lo<j<hi} c_j·(f(j − 1) − f(j))` (telescoping; local
//!    and exact for integer `f`), and the one-hot `[e = j]` is `c_{j+1} ⊕ c_j` (local).
//! 2. **Clamp** (saturation): `v ← v + c_lo·(2^lo − v) + (1 − c_hi)·(2^hi − v)`; the
//!    same mux call also turns the `c_j` into arithmetic shares (a mux of the constant 1).
//! 3. **Normalization**: `v' = v·2^{39−e} / 2^{20} ∈ [1, 2]` at 19 bits (one product with
//!    the shared power of two, exact before its faithful truncation).
//! 4. **Initial value**: `y₀ = 1.26436 − 0.2865·v'` (relative error `≤ 0.0224` on
//!    `[1, 2]`, fitted here by a grid search of the relative minimax line).
//! 5. **Newton** twice: `y ← (3y − v'y³)/2`, as `[y², v'y]` (one batched product) then
//!    `y²·(v'y)` (one product), combined before one truncation; the relative error goes
//!    `0.0224 → 7.5·10⁻⁴ → 8.5·10⁻⁷`, below the 19-bit resolution of `y`.
//! 6. **Denormalization**: `g = mult·2^{(frac_in − e)/2}·y`. As `g` spans many binades,
//!    each candidate `e` gets its own constant at full precision and its own rescaling:
//!    `term_e = ⌊y·f̃_e / 2^{21}⌉·2^{k_e}` (`f̃_e < 2^{21}`) for every `e` (one batched truncation), then
//!    `g = Σ_e [e = j]·term_e` (one batched mux). Every term has relative error
//!    `≤ 2^{−16}` on top of the output's own resolution.
//!
//! Rounds: `1 + 6` (comparison) `+ 2` (mux) `+ 3` (normalization) `+ 2` (initial value)
//! `+ 2·6` (Newton) `+ 4` (denormalization); all of it per row.
//!
//! Error: `|g − mult/√v| ≤ g·2^{−15} + 2` ulps of `frac_out` for `v ∈ [2^lo, 2^hi]`
//! (Newton's residual `< 2^{−20}`, the last truncations of `y` `≤ 2^{−18}`, the
//! constant `≤ 2^{−16}`); outside, `v` is clamped to that interval first. The protocol is
//! within `4 + g·2^{−16}` ulps of [`Rsqrt::reference`] (exact rounding; the faithful
//! truncations are 0 or 1 below it, Newton absorbs the earlier ones, and the last
//! difference of `y` is scaled by `2^{k_e}`).

use crate::mpc::error::{MpcError, Result};
use crate::mpc::{BoolShares, Party, RingShares};
use crate::nonlinear::fixed;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// Scale of `v'` and `y`.
const FY: u32 = 19;
/// `v_c·2^{NORM−e}` has `FY + NORM_SHIFT = NORM` fractional bits.
const NORM: u32 = 39;
/// The normalization product's truncation.
const NORM_SHIFT: u32 = NORM - FY;
/// `y₀ = Y0_A − Y0_B·v'`.
const Y0_A: f64 = 1.264_361_990_202_883;
const Y0_B: f64 = 0.2865;
/// Scale of `Y0_B`.
const Y0_FB: u32 = 16;
/// Newton steps.
const NEWTON: usize = 2;
/// The denormalization truncation.
const G_SHIFT: u32 = 21;

/// The block (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rsqrt {
    /// Fractional bits of the input.
    pub frac_in: u32,
    /// The input integers are clamped to `[2^lo, 2^hi]`.
    pub lo: u32,
    /// See `lo`; `lo < hi ≤ 40`.
    pub hi: u32,
    /// The output is `mult / √v`.
    pub mult: f64,
    /// Fractional bits of the output.
    pub frac_out: u32,
}

impl Rsqrt {
    /// Checks the parameters: `1 ≤ lo < hi ≤ 40`, `frac_in, frac_out ≤ 62`, `mult > 0`
    /// finite, and the largest output `mult·2^{(frac_in − lo)/2}` below `2^{38}` at
    /// `frac_out` bits.
    pub fn validate(&self) -> Result<()> {
        if self.lo == 0 || self.lo >= self.hi || self.hi > NORM + 1 {
            return Err(MpcError::InvalidConfig("rsqrt needs 1 <= lo < hi <= 40"));
        }
        if self.frac_in > 62 || self.frac_out > 62 {
            return Err(MpcError::InvalidConfig(
                "rsqrt needs frac_in, frac_out <= 62",
            ));
        }
        if !(self.mult.is_finite() && self.mult > 0.0) {
            return Err(MpcError::InvalidConfig("rsqrt multiplier must be positive"));
        }
        let gmax = self.f(self.lo) * libm::ldexp(1.0, self.frac_out as i32);
        if gmax >= libm::ldexp(1.0, 38) {
            return Err(MpcError::InvalidConfig("rsqrt output exceeds its bound"));
        }
        Ok(())
    }

    /// `f(e) = mult·2^{(frac_in − e)/2}`: the output for `v' = 1`.
    fn f(&self, e: u32) -> f64 {
        self.mult * libm::exp2((self.frac_in as f64 - e as f64) / 2.0)
    }

    /// Per-exponent constants `(f̃_e, k_e)` for `e = lo..hi`: `term = ⌊y·f̃/2^{21}⌉·2^k`.
    fn consts(&self) -> Vec<(i64, u32)> {
        (self.lo..self.hi)
            .map(|e| {
                // y·f̃ ≤ 2^{19}·f̃ must stay below 2^{40}: f̃ < 2^{21}.
                let full = self.f(e) * libm::exp2((self.frac_out + G_SHIFT - FY) as f64);
                let mut k = 0u32;
                while full / libm::exp2(k as f64) >= libm::exp2(21.0) {
                    k += 1;
                }
                (libm::round(full / libm::exp2(k as f64)) as i64, k)
            })
            .collect()
    }

    /// `mult/√v` of shared `v` (one value per element; see the module documentation).
    /// Needs a ring of `ℓ ≥ 43` (else `InvalidConfig`).
    pub async fn run<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        v: &RingShares,
    ) -> Result<RingShares> {
        self.validate()?;
        let r = p.ring();
        // The normalization product reaches 2^{40} and the comparisons 2^{41}.
        if r.ell < NORM + 4 {
            return Err(MpcError::InvalidConfig("rsqrt needs ell >= 43"));
        }
        let p0 = p.is_p0();
        let n = v.len();
        let (lo, hi) = (self.lo, self.hi);
        let nk = (hi - lo + 1) as usize;
        let cst = |c: i64| if p0 { r.from_signed(c) } else { 0 };
        // 1. c_j = [v < 2^j], j = lo..=hi, index (j − lo)·n + k.
        let mut arg = Vec::with_capacity(nk * n);
        for j in lo..=hi {
            arg.extend(v.as_slice().iter().map(|&x| r.sub(x, cst(1i64 << j))));
        }
        let bits = p.msb(&RingShares::new(arg)).await?;
        let bits = bits.as_slice();
        // 2. one mux: arithmetic c_j (mux of 1), c_lo·(2^lo − v), ¬c_hi·(2^hi − v).
        let mut sel = bits.to_vec();
        sel.extend_from_slice(&bits[..n]);
        sel.extend(
            bits[(nk - 1) * n..]
                .iter()
                .map(|&b| if p0 { b ^ 1 } else { b }),
        );
        let mut vals = alloc::vec![cst(1); nk * n];
        vals.extend(v.as_slice().iter().map(|&x| r.sub(cst(1i64 << lo), x)));
        vals.extend(v.as_slice().iter().map(|&x| r.sub(cst(1i64 << hi), x)));
        let mx = p.mux(&BoolShares::new(sel), &RingShares::new(vals)).await?;
        let mx = mx.as_slice();
        let ca = &mx[..nk * n];
        let vc: Vec<u64> = (0..n)
            .map(|k| r.add(v.as_slice()[k], r.add(mx[nk * n + k], mx[(nk + 1) * n + k])))
            .collect();
        // 3. m(e) = 2^{NORM − e} = 2^{NORM−hi+1} + Σ_{lo<j<hi} c_j·2^{NORM−j}.
        let m: Vec<u64> = (0..n)
            .map(|k| {
                let mut s = cst(1i64 << (NORM + 1 - hi));
                for j in lo + 1..hi {
                    let c = ca[(j - lo) as usize * n + k];
                    s = r.add(s, r.mul(c, 1u64 << (NORM - j)));
                }
                s
            })
            .collect();
        let vp = p
            .mul_fx(&RingShares::new(vc), &RingShares::new(m), NORM_SHIFT)
            .await?;
        // 4. y₀ = A − B·v' at FY bits.
        let (ya, yb) = (
            fixed::encode(Y0_A, FY + Y0_FB),
            r.from_signed(fixed::encode(Y0_B, Y0_FB)),
        );
        let y0 = RingShares::new(
            vp.as_slice()
                .iter()
                .map(|&x| r.sub(cst(ya), r.mul(x, yb)))
                .collect(),
        );
        let mut y = p.trunc_round(y0, Y0_FB).await?;
        // 5. Newton: y ← (3y − y²·(v'y))/2.
        for _ in 0..NEWTON {
            let mut lhs = y.as_slice().to_vec();
            lhs.extend_from_slice(vp.as_slice());
            let mut rhs = y.as_slice().to_vec();
            rhs.extend_from_slice(y.as_slice());
            let l1 = p
                .mul_fx(&RingShares::new(lhs), &RingShares::new(rhs), FY)
                .await?;
            let (yy, vy) = l1.as_slice().split_at(n);
            let t = p.triples(n).await?;
            let pr = p.mul_with_triples(yy, vy, &t, 0).await?;
            let raw = RingShares::new(
                y.as_slice()
                    .iter()
                    .zip(pr.as_slice())
                    .map(|(&yv, &pv)| r.sub(r.mul(yv, 3u64 << FY), pv))
                    .collect(),
            );
            y = p.trunc_round(raw, FY + 1).await?;
        }
        // 6. g = Σ_e [e = j]·⌊y·f̃_e/2^{21}⌉·2^{k_e}.
        let cs = self.consts();
        let ne = cs.len();
        let mut terms = Vec::with_capacity(ne * n);
        for &(f, _) in &cs {
            let f = r.from_signed(f);
            terms.extend(y.as_slice().iter().map(|&yv| r.mul(yv, f)));
        }
        let terms = p.trunc_round(RingShares::new(terms), G_SHIFT).await?;
        let mut scaled = Vec::with_capacity(ne * n);
        let mut onehot = Vec::with_capacity(ne * n);
        for (i, &(_, k)) in cs.iter().enumerate() {
            let e = lo as usize + i;
            scaled.extend(
                terms.as_slice()[i * n..(i + 1) * n]
                    .iter()
                    .map(|&t| r.mul(t, 1u64 << k)),
            );
            // [e] = c'_{e+1} ⊕ c'_e with c'_lo = 0, c'_hi = 1.
            for kk in 0..n {
                let upper = if e + 1 == hi as usize {
                    u8::from(p0)
                } else {
                    bits[(e + 1 - lo as usize) * n + kk]
                };
                let lower = if e == lo as usize {
                    0
                } else {
                    bits[(e - lo as usize) * n + kk]
                };
                onehot.push(upper ^ lower);
            }
        }
        let sel = p
            .mux(&BoolShares::new(onehot), &RingShares::new(scaled))
            .await?;
        let s = sel.as_slice();
        Ok(RingShares::new(
            (0..n)
                .map(|k| (0..ne).fold(0u64, |acc, i| r.add(acc, s[i * n + k])))
                .collect(),
        ))
    }

    /// Plain-integer reference of [`Rsqrt::run`] with exact rounding (empty if the
    /// parameters are invalid).
    pub fn reference(&self, v: &[i64]) -> Vec<i64> {
        if self.validate().is_err() {
            return Vec::new();
        }
        let cs = self.consts();
        let ya = fixed::encode(Y0_A, FY + Y0_FB) as i128;
        let yb = fixed::encode(Y0_B, Y0_FB) as i128;
        v.iter()
            .map(|&x| {
                let vc = x.clamp(1i64 << self.lo, 1i64 << self.hi);
                let e = (63 - vc.leading_zeros()).clamp(self.lo, self.hi - 1);
                let vp = fixed::round_shift((vc as i128) << (NORM - e), NORM_SHIFT) as i128;
                let mut y = fixed::round_shift(ya - yb * vp, Y0_FB) as i128;
                for _ in 0..NEWTON {
                    let yy = fixed::round_shift(y * y, FY) as i128;
                    let vy = fixed::round_shift(vp * y, FY) as i128;
                    y = fixed::round_shift(((3 * y) << FY) - yy * vy, FY + 1) as i128;
                }
                let (f, k) = cs[(e - self.lo) as usize];
                fixed::round_shift(y * f as i128, G_SHIFT) << k
            })
            .collect()
    }

    /// The exact function on the clamped input (empty if the parameters are invalid).
    pub fn f64_reference(&self, v: &[i64]) -> Vec<f64> {
        if self.validate().is_err() {
            return Vec::new();
        }
        v.iter()
            .map(|&x| {
                let vc = x.clamp(1i64 << self.lo, 1i64 << self.hi);
                self.mult / libm::sqrt(fixed::decode(vc, self.frac_in))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::testkit::*;
    use rand_core::RngCore;
    use std::eprintln;

    /// The tests' normalizer: input at 16 bits clamped to `[2^{11}, 2^{38}]`, output at 20 bits.
    const LN_RSQRT: Rsqrt = Rsqrt {
        frac_in: 16,
        lo: 11,
        hi: 38,
        mult: 1.0,
        frac_out: 20,
    };

    #[test]
    fn rsqrt_matches_reference_and_exact_function() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(11);
        let rs = Rsqrt {
            mult: 27.7,
            ..LN_RSQRT
        };
        rs.validate().unwrap();
        // log-uniform over [2^9, 2^40): includes both clamps
        let mut vs: Vec<i64> = (0..300)
            .map(|_| {
                let e = 9.0 + 31.0 * (g.next_u32() as f64 / u32::MAX as f64);
                libm::exp2(e) as i64
            })
            .collect();
        vs.extend([
            0,
            1,
            1 << 11,
            (1 << 11) + 1,
            (1 << 38) - 1,
            1 << 38,
            1 << 40,
        ]);
        vs.extend((11..38).map(|j| 1i64 << j));
        vs.extend((12..38).map(|j| (1i64 << j) - 1));
        let (v0, v1) = share(r, &vs, &mut g);
        let (o0, o1) = both!(
            p0,
            p1,
            rs.run(&mut p0, &v0).await,
            rs.run(&mut p1, &v1).await
        );
        let got = open(r, &o0, &o1);
        let want = rs.reference(&vs);
        let exact = rs.f64_reference(&vs);
        let mut worst_ulp = 0i64;
        let mut worst_rel = 0.0f64;
        for k in 0..vs.len() {
            let d = (got[k] - want[k]).abs();
            worst_ulp = worst_ulp.max(d);
            assert!(
                d as f64 <= 4.0 + want[k] as f64 * libm::exp2(-16.0),
                "v = {}: {d} ulp",
                vs[k]
            );
            let gv = fixed::decode(got[k], rs.frac_out);
            eprintln!(
                "v {} got {} ref {} exact {}",
                vs[k],
                gv,
                fixed::decode(want[k], rs.frac_out),
                exact[k]
            );
            let rel = (gv - exact[k]).abs() / exact[k];
            let ulp_rel = libm::ldexp(2.0, -(rs.frac_out as i32)) / exact[k];
            assert!(
                rel <= libm::exp2(-15.0) + ulp_rel,
                "v = {}: rel {rel}",
                vs[k]
            );
            worst_rel = worst_rel.max(rel);
        }
        eprintln!("rsqrt: max rel err {worst_rel:.3e}, max |protocol − reference| {worst_ulp} ulp (bound 4 + g·2^-16)");
    }

    #[test]
    fn rsqrt_rejects_absurd_scales_and_its_references_never_panic() {
        let ok = LN_RSQRT;
        // frac_out as i32 used to wrap negative, pass the check, then overflow
        // (or loop forever) computing the constants.
        for frac_out in [u32::MAX - 5, 1 << 31, 200] {
            let b = Rsqrt { frac_out, ..ok };
            assert!(b.validate().is_err());
            assert!(b.reference(&[1 << 20]).is_empty());
        }
        assert!(Rsqrt {
            frac_in: u32::MAX,
            ..ok
        }
        .validate()
        .is_err());
        // lo > hi (or shifts ≥ 64) in the f64 reference: empty, no panic.
        for bad in [
            Rsqrt {
                lo: 30,
                hi: 20,
                ..ok
            },
            Rsqrt {
                lo: 1,
                hi: 70,
                ..ok
            },
        ] {
            assert!(bad.f64_reference(&[5, 1 << 30]).is_empty());
        }
        let wild = [i64::MIN, -1, 0, 1, i64::MAX];
        assert_eq!(ok.reference(&wild).len(), 5);
        assert_eq!(ok.f64_reference(&wild).len(), 5);
    }

    #[test]
    fn rsqrt_rejects_a_small_ring() {
        let cfg = crate::mpc::MpcConfig {
            ring: crate::mpc::RingCfg::new(40, 13).unwrap(),
            ..crate::mpc::MpcConfig::ENCFORMER
        };
        let mut p = crate::mpc::Party::new(crate::mpc::PartyId::P0, cfg, rng(1)).unwrap();
        let rs = LN_RSQRT;
        let v = RingShares::new(alloc::vec![1 << 20; 2]);
        let mut s = crate::mpc::Session::new(p.channel(), rs.run(&mut p, &v));
        assert!(matches!(
            s.poll(),
            core::task::Poll::Ready(Err(MpcError::InvalidConfig(_)))
        ));
    }

    #[test]
    fn rsqrt_rejects_bad_parameters() {
        let ok = LN_RSQRT;
        assert!(ok.validate().is_ok());
        assert!(Rsqrt { lo: 0, ..ok }.validate().is_err());
        assert!(Rsqrt { hi: 41, ..ok }.validate().is_err());
        assert!(Rsqrt { lo: 38, ..ok }.validate().is_err());
        assert!(Rsqrt {
            mult: f64::NAN,
            ..ok
        }
        .validate()
        .is_err());
        assert!(Rsqrt { frac_out: 40, ..ok }.validate().is_err());
    }
}
