//! C2M's `O(n log n)` decoding map on shares: the CKKS decoder's forward special FFT
//! ([`crate::math::special_fft`]) as an integer fixed-point transform in the wide share ring
//! `Z_{2^W}` ([`super::wide`]), with a re-randomized local truncation after every twiddle product.
//! The plan ([`C2mPlan`]) fixes the budget; the map is [`C2mPlan::decode_shares`], with the
//! direct `O(n²)` reference [`C2mPlan::decode_map`].

use super::budget::{local_trunc, to_k, trig_tables, K_MASK};
use super::plan::C2mPlan;
use super::wide::{cmul, local_trunc_wide, rerandomize, CommonMasks, Wide};
use super::ConvertError;
use crate::math::special_fft;
use alloc::vec::Vec;
use zeroize::Zeroizing;

/// One party's shares mod `2^W` of the real and imaginary parts of the `n` slots (output of
/// [`C2mPlan::decode_shares`]).
pub type WideSlots = (Zeroizing<Vec<Wide>>, Zeroizing<Vec<Wide>>);

impl C2mPlan {
    /// Stages 1 and 2 of C2M on one party's shares (identical code for both parties; `p0`
    /// selects the role in the local truncations): from the `2n` slot-subring coefficient shares
    /// mod `Q_conv` (position `k·N/2n`), returns shares mod `2^W` of the real and imaginary parts
    /// of the `n` slots at scale `2^{F+s_2}` ([`C2mPlan::shifts`]), within
    /// [`C2mPlan::error_bound_ulp`] `− 2^{-k}` ulp of the exact decoding of the shared plaintext,
    /// except with probability `≤ 2^{f}`, `f =` [`C2mPlan::failure_log2`] (stage 3's terms
    /// included). Both parties must draw `masks` from the same common stream.
    ///
    /// # The map
    ///
    /// The slots are `z_j = Σ_{i<n} v_i·ω_j^i/Δ` with `v_i = c_i + i·c_{i+n}` and
    /// `ω_j = ζ^{5^j·N/2n}` (`ω_j^n = i`): the CKKS decoder's `fft_special` of `v`, a bit
    /// reversal followed by `log2 n` radix-2 stages (`len = 2, 4, …, n`) with butterflies
    /// `(a, b) ↦ (a + b·w, a − b·w)`, `w = e^{2πi·(5^j mod 4len)/4len}`. In integers:
    ///
    /// 1. *Stage 1 and lift.* [`local_trunc`] by `2^{s_1}` turns the shares mod `Q_conv` into
    ///    *integer* shares (their sum over `Z` is `c_k/2^{s_1}` stochastically rounded, unless
    ///    the wrap fails: `≤ 2^{h_1+1}/Q_conv` per coefficient; `|share| < 2^{124}`), which are
    ///    sign-extended into `Z_{2^W}` exactly (no re-randomization or extra failure: the lift of
    ///    an integer sharing is a sharing mod `2^W`) and multiplied by the public
    ///    `μ̃ ≈ μ = 2^{F+s_1+s_2}/Δ` (exact for `Δ = 2^{40}`): working scale `2^{F+s_2}`.
    /// 2. *Stages.* `p = b·w̃` with `w̃ = round(2^t·w)` componentwise (wrapping, exact on
    ///    shares), each component re-randomized by a fresh common mask and truncated locally by
    ///    `2^t` ([`local_trunc_wide`], `|p| < 2^{h_s}`); then `(a + p, a − p)` exactly. No
    ///    `1/n` here: values grow, and the budget tracks it.
    ///
    /// # Error (proved, ulps of `2^{-F}`, real and imaginary part of every slot)
    ///
    /// Each stage block of length `m` evaluates a subvector at all `m` roots of `Y^m = i`:
    /// `√m` times a unitary map. Hence with `R ≥ ‖v'‖₂` for the input `v'` (Parseval over the
    /// slots: `‖v‖₂ ≤ √2·B'·Δ`, `B' = B + 2^{-F}` for the CKKS error, plus `√(2n)` for the
    /// stage-1 rounding, times `μ̃`), the exact values after stage `s` satisfy
    /// `|y| ≤ M_s = 2^{s/2}·R`, and the exact butterflies have `ℓ∞` gain 2: an error `ε_s` per
    /// value made at stage `s` moves each output by `≤ 2^{L−s}·ε_s`. Stage `s` makes
    /// `ε_s ≤ √2 + √2·η_t·(M_{s−1} + E_{s−1})/2^t` (truncation `< 1` per component, twiddle
    /// rounding `≤ η_t` per component), `E_s = 2·E_{s−1} + ε_s`. So the slot error is at most
    /// * `2n·2^{s_1+F}/Δ` (stage 1: `|δ_k| < 1` at scale `Δ/2^{s_1}`),
    /// * `(√2·B'·2^F + stage 1)·|μ̃ − μ|/μ` (input scaling; zero when `μ` is an integer),
    /// * `(n−1)·√2/2^{s_2}` (stage truncations, `≤ 1/64`: picks `s_2`),
    /// * `Σ_s 2^{L−s}·√2·η_t·(M_{s−1} + E_{s−1})/2^{t+s_2}` (twiddles, `≤ 1/64`: picks `t`).
    ///
    /// # Bits and failure
    ///
    /// Products before the truncation of stage `s`: `|p| < 2^{h_s}`,
    /// `h_s = ⌈log2((M_{s−1} + E_{s−1})·(2^t + √2·η_t))⌉ + 1`, `W ≥ h_s + 1 + σ`; failure
    /// `≤ 2^{h_s+1−W}` for each of the `n` truncated components of a stage. Outputs
    /// `|v| < 2^{h_3}`, `h_3 = b + F + s_2 + 1`, truncated in `Z_{2^W}` by stage 3.
    pub fn decode_shares(
        &self,
        coeffs: &[u128],
        p0: bool,
        masks: &mut CommonMasks,
    ) -> Result<WideSlots, ConvertError> {
        let n = self.slots;
        if coeffs.len() != 2 * n {
            return Err(ConvertError::Budget(
                "decoding-map input length differs from 2n coefficients",
            ));
        }
        let q = self.basis.modulus().value();
        if coeffs.iter().any(|&c| c >= q) {
            return Err(ConvertError::Budget(
                "coefficient share not reduced mod Q_conv",
            ));
        }
        let lift = |c: u128| {
            Wide::from_i128(local_trunc(c, q, p0, self.s1, self.h1))
                .wrapping_mul_i64(self.m0)
                .wrapping_shl(self.m0_shift)
        };
        let mut vr: Zeroizing<Vec<Wide>> =
            Zeroizing::new(coeffs[..n].iter().map(|&c| lift(c)).collect());
        let mut vi: Zeroizing<Vec<Wide>> =
            Zeroizing::new(coeffs[n..].iter().map(|&c| lift(c)).collect());
        special_fft::bit_reverse(&mut vr);
        special_fft::bit_reverse(&mut vi);
        let t = self.t;
        special_fft::for_each_butterfly(n, false, |bf| {
            let (a, b) = (bf.lo, bf.hi);
            let (w, h) = (self.tw[bf.twiddle], self.stage_h[bf.stage]);
            let (pr, pi) = cmul((vr[b], vi[b]), w);
            let pr = local_trunc_wide(rerandomize(pr, masks.wide(), p0), p0, t, h);
            let pi = local_trunc_wide(rerandomize(pi, masks.wide(), p0), p0, t, h);
            vr[b] = vr[a].wrapping_sub(pr);
            vi[b] = vi[a].wrapping_sub(pi);
            vr[a] = vr[a].wrapping_add(pr);
            vi[a] = vi[a].wrapping_add(pi);
        });
        Ok((vr, vi))
    }
}

impl C2mPlan {
    /// The direct `O(n²)` decoding map (reference only; the protocol uses
    /// [`C2mPlan::decode_shares`]) on one party's share, modulo `2^K`: for the `2n` subring
    /// coefficients `c_k` (position `k·N/2n`, integer shares of `c_k/2^{s_1}`) returns
    /// `(Re_j, Im_j)_j = Σ_k c_k·round(cos/sin(π·e_jk/N)·2^{F+s_1+s_2'}/Δ)` with
    /// `e_jk = 5^j·k·N/2n mod 2N`, `s_2'` = [`C2mPlan::direct_shift`]: the slots at scale
    /// `2^{F+s_2'}`. Integer, wrapping, hence a `Z_{2^K}`-module homomorphism: the maps of two
    /// shares add to the map of the shared vector. A budget error when `s_2'` does not exist or
    /// the input length is not `2n`.
    pub fn decode_map(&self, coeffs: &[u128]) -> Result<(Vec<u128>, Vec<u128>), ConvertError> {
        let s2 = self.s2_direct.ok_or(ConvertError::Budget(
            "the direct decoding map's 2^K budget does not close",
        ))?;
        let n = self.slots;
        if coeffs.len() != 2 * n {
            return Err(ConvertError::Budget(
                "decoding-map input length differs from 2n coefficients",
            ));
        }
        let smul = libm::exp2((self.cfg.ring.frac + self.s1 + s2) as f64) / self.scale;
        let (cos, sin) = trig_tables(self.n_ring, smul);
        let gap = (self.n_ring / (2 * n)) as u64;
        let mask = 2 * self.n_ring as u64 - 1;
        let mut re = Vec::with_capacity(n);
        let mut im = Vec::with_capacity(n);
        let tc: Vec<u128> = cos.iter().map(|&v| to_k(v)).collect();
        let ts: Vec<u128> = sin.iter().map(|&v| to_k(v)).collect();
        for g in special_fft::rot_group(self.n_ring, n) {
            let step = (g * gap) & mask;
            let (mut a, mut b) = (0u128, 0u128);
            let mut e = 0u64;
            for &c in coeffs {
                a = a.wrapping_add(c.wrapping_mul(tc[e as usize]));
                b = b.wrapping_add(c.wrapping_mul(ts[e as usize]));
                e = (e + step) & mask;
            }
            re.push(a & K_MASK);
            im.push(b & K_MASK);
        }
        Ok((re, im))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ckks::{Encoder, C64};
    use crate::convert::{BoundaryCfg, W_BITS};
    use crate::params;
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    /// Table VII (`N = 2^16`, `n = 2^15`, `Δ = 2^40`, `ℓ = 43`, `F = 13`, `σ = 40`, `B = 2^8`):
    /// the budget of the fast decoding map and the failure probability, now dominated by
    /// stage 1 (`2n·2^{h_1+1}/Q_conv ≈ 2^{-33}`).
    #[test]
    fn table_vii_budget() {
        let p = params::ckks_128_custom(16, 8, 3).validate().unwrap();
        let scale = (1u64 << 40) as f64;
        let c =
            C2mPlan::shortest_admissible(&p, 1 << 15, scale, BoundaryCfg::encformer(8)).unwrap();
        std::println!(
            "C2M Table VII: level {} shifts {:?} t {} mu {}·2^{} bits {:?} stages {:?} \
             err {:.5} ulp failure 2^{:.2}",
            c.level(),
            c.shifts(),
            c.twiddle_bits(),
            c.m0,
            c.m0_shift,
            c.value_bits(),
            c.stage_bits(),
            c.error_bound_ulp(),
            c.failure_log2()
        );
        assert_eq!(c.level(), 1);
        assert!(c.error_bound_ulp() < 0.125, "{}", c.error_bound_ulp());
        assert!(c.failure_log2() < -32.5, "{}", c.failure_log2());
        let (h1, hs, h3) = c.value_bits();
        assert!(hs + 1 + 40 <= W_BITS && h3 + 1 + 40 <= W_BITS && h1 == 50);
        assert_eq!((c.shifts(), c.twiddle_bits()), ((1, 26), 43.0));
        assert_eq!(c.tw.len(), (1 << 15) - 1);
    }

    /// Stages 1 and 2 on a fresh sharing against the floating-point decoder at `N = 2^10`.
    #[test]
    fn decode_shares_match_the_decoder() {
        let p = params::insecure_logn10().validate().unwrap();
        let n = p.max_slots();
        let scale = (1u64 << 40) as f64;
        let plan = C2mPlan::new(&p, 1, n, scale, BoundaryCfg::encformer(8)).unwrap();
        let q = plan.basis.modulus().value();
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let enc = Encoder::new(10);
        let z: Vec<C64> = (0..n)
            .map(|j| {
                let u = |r: &mut ChaCha20Rng| (r.next_u64() as f64 / u64::MAX as f64 - 0.5) * 512.0;
                if j == 0 {
                    C64::new(256.0, -256.0)
                } else {
                    C64::new(u(&mut rng), u(&mut rng))
                }
            })
            .collect();
        let coeffs = enc.encode(&z, n, scale).unwrap();
        let gap = p.n() / (2 * n);
        let c: Vec<i128> = (0..2 * n).map(|k| coeffs[k * gap]).collect();
        let (s0, s1): (Vec<u128>, Vec<u128>) = c
            .iter()
            .map(|&v| {
                let a = (((rng.next_u64() as u128) << 64) | rng.next_u64() as u128) % q;
                let x = v.rem_euclid(q as i128) as u128;
                (a, (x + q - a) % q)
            })
            .unzip();
        let (r0, i0) = plan
            .decode_shares(&s0, true, &mut CommonMasks::from_seed([3; 16]))
            .unwrap();
        let (r1, i1) = plan
            .decode_shares(&s1, false, &mut CommonMasks::from_seed([3; 16]))
            .unwrap();
        let full: Vec<f64> = (0..p.n())
            .map(|i| {
                if i % gap == 0 {
                    coeffs[i] as f64 / scale
                } else {
                    0.0
                }
            })
            .collect();
        let want = enc.decode(&full, n).unwrap();
        let out = libm::exp2(plan.s2 as f64);
        let f = 8192.0;
        let mut worst = 0f64;
        for j in 0..n {
            let gr = r0[j].wrapping_add(r1[j]).to_f64() / out;
            let gi = i0[j].wrapping_add(i1[j]).to_f64() / out;
            worst = worst
                .max((gr - want[j].re * f).abs())
                .max((gi - want[j].im * f).abs());
        }
        let bound = plan.error_bound_ulp() - libm::exp2(-(plan.round_bits() as f64));
        std::println!("N=2^10: worst {worst:.2e} ulp, bound {bound:.4}");
        assert!(worst <= bound, "{worst} > {bound}");
    }
}
