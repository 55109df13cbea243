//! C2M's `O(n log n)` decoding map on shares: the CKKS decoder's forward special FFT as an
//! integer fixed-point transform in the wide share ring `Z_{2^W}` ([`super::wide`]), with a
//! re-randomized local truncation after every twiddle product. The budget is sized by
//! [`budget`]; the map is [`C2mPlan::decode_shares`].

use super::encode::{bit_reverse, ceil_log2, cmul, eta, split_multiplier, stage_twiddles};
use super::plan::{local_trunc, BoundaryCfg, C2mPlan, ROUND_BITS};
use super::wide::{local_trunc_wide, rerandomize, CommonMasks, Wide, W_BITS};
use super::{ConvertError, MAX_FAST_TWIDDLE_BITS};
use alloc::vec::Vec;
use core::f64::consts::SQRT_2;
use zeroize::Zeroizing;

/// One party's shares mod `2^W` of the real and imaginary parts of the `n` slots (output of
/// [`C2mPlan::decode_shares`]).
pub type WideSlots = (Zeroizing<Vec<Wide>>, Zeroizing<Vec<Wide>>);

/// The sized decoding map of one C2M plan.
pub(super) struct FastBudget {
    pub(super) s2: u32,
    pub(super) t: u32,
    pub(super) m0: i64,
    pub(super) m0_shift: u32,
    pub(super) stage_h: Vec<u32>,
    pub(super) tw: Vec<[i64; 2]>,
    /// Proved slot error of stages 1 and 2 (ulps of `2^{-F}`, without the `2^{-k}` of stage 3).
    pub(super) err_ulp: f64,
}

/// Sizes the decoding map for `n = slots`, scale `Δ = 2^{log_delta}` and stage-1 shift `s_1`
/// (proofs at [`C2mPlan::decode_shares`]): the smallest output shift `s_2 ≥ 16` with stage
/// truncations `(n−1)·√2/2^{s_2} ≤ 1/64` ulp and input scaling `≤ 1/64` ulp (exact when
/// `2^{F+s_1+s_2}/Δ` is an integer), then the smallest twiddle precision `t` with twiddle
/// rounding `≤ 1/64` ulp; the per-stage bit bounds `h_s` must satisfy `W ≥ h_s + 1 + σ`, and
/// the total error must stay below `1/4` ulp. Typed budget errors otherwise.
pub(super) fn budget(
    slots: usize,
    log_delta: f64,
    s1: u32,
    cfg: BoundaryCfg,
) -> Result<FastBudget, ConvertError> {
    let f = cfg.ring.frac as f64;
    let n = slots as f64;
    let stages = slots.trailing_zeros();
    // Slot bound with one ulp of margin for the CKKS error of the decrypted plaintext.
    let bp = libm::exp2(cfg.log_bmax as f64) + libm::exp2(-f);
    // Stage-1 truncation: |δ_k| < 1 at scale Δ/2^{s_1}, Σ_k |δ_k| < 2n.
    let e1 = 2.0 * n * libm::exp2(s1 as f64 + f - log_delta);
    let e_tr = |s2: u32| (n - 1.0) * SQRT_2 * libm::exp2(-(s2 as f64));
    let mut s2 = ROUND_BITS.max(ceil_log2(64.0 * SQRT_2 * (n - 1.0).max(1.0)));
    let (m0, m0_shift, mu_t, e_in) = loop {
        let mu = libm::exp2(f + (s1 + s2) as f64 - log_delta);
        let (m, e, d) = split_multiplier(mu);
        let e_in = (SQRT_2 * bp * libm::exp2(f) + e1) * d / mu;
        if m > 0 && e_in <= 1.0 / 64.0 && e_tr(s2) <= 1.0 / 64.0 {
            break (m, e, m as f64 * libm::exp2(e as f64), e_in);
        }
        s2 += 1;
        if s2 > W_BITS {
            return Err(ConvertError::Budget(
                "no output scale makes the fast decoding map accurate enough",
            ));
        }
    };
    // ‖v‖₂ of the FFT input (Parseval: ‖v‖₂ ≤ √2·B'·Δ) after stage 1 (+ ‖δ‖₂ < √(2n)) and μ̃.
    let r = mu_t * (SQRT_2 * bp * libm::exp2(log_delta - s1 as f64) + libm::sqrt(2.0 * n));
    // Per stage: h_s and the accumulated error bounds (truncation and twiddle parts).
    let run = |t: u32| {
        let two_t = libm::exp2(t as f64);
        let (mut m_prev, mut e_prev, mut tw_prev) = (r, 0.0f64, 0.0f64);
        let mut hs = Vec::with_capacity(stages as usize);
        for s in 1..=stages {
            let inp = m_prev + e_prev;
            hs.push(ceil_log2(inp * (two_t + SQRT_2 * eta(t))) + 1);
            let eps_tw = SQRT_2 * eta(t) * inp / two_t;
            e_prev = 2.0 * e_prev + SQRT_2 + eps_tw;
            tw_prev = 2.0 * tw_prev + eps_tw;
            m_prev = libm::exp2(s as f64 / 2.0) * r;
        }
        (hs, e_prev, tw_prev)
    };
    let mut t = 1u32;
    let (stage_h, e_all) = loop {
        let (hs, e_all, e_tw) = run(t);
        if e_tw * libm::exp2(-(s2 as f64)) <= 1.0 / 64.0 {
            break (hs, e_all);
        }
        t += 1;
        if t > MAX_FAST_TWIDDLE_BITS {
            return Err(ConvertError::Budget(
                "the fast decoding map needs twiddles beyond 2^52 (lower B_max)",
            ));
        }
    };
    let h3 = cfg.log_bmax + cfg.ring.frac + s2 + 1;
    if stage_h.iter().any(|&h| W_BITS < h + 1 + cfg.sigma) || W_BITS < h3 + 1 + cfg.sigma {
        return Err(ConvertError::Budget(
            "decoding-map values exceed the 2^W wide-ring budget (lower B_max, sigma or scale)",
        ));
    }
    let err_ulp = e1 + e_in + e_all * libm::exp2(-(s2 as f64));
    if err_ulp >= 0.25 {
        return Err(ConvertError::Budget(
            "the fixed-point decoding error exceeds 1/4 ulp (scale too small for the slot count)",
        ));
    }
    let mut tw = Vec::with_capacity(slots.saturating_sub(1));
    let mut len = 2;
    while len <= slots {
        stage_twiddles(&mut tw, len, t, false);
        len <<= 1;
    }
    Ok(FastBudget {
        s2,
        t,
        m0,
        m0_shift,
        stage_h,
        tw,
        err_ulp,
    })
}

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
        bit_reverse(&mut vr);
        bit_reverse(&mut vi);
        let t = self.t;
        let (mut len, mut at) = (2, 0);
        for &h in &self.stage_h {
            let lenh = len / 2;
            let tw = &self.tw[at..at + lenh];
            at += lenh;
            for i in (0..n).step_by(len) {
                for (j, &w) in tw.iter().enumerate() {
                    let (a, b) = (i + j, i + j + lenh);
                    let (pr, pi) = cmul((vr[b], vi[b]), w);
                    let pr = local_trunc_wide(rerandomize(pr, masks.wide(), p0), p0, t, h);
                    let pi = local_trunc_wide(rerandomize(pi, masks.wide(), p0), p0, t, h);
                    vr[b] = vr[a].wrapping_sub(pr);
                    vi[b] = vi[a].wrapping_sub(pi);
                    vr[a] = vr[a].wrapping_add(pr);
                    vi[a] = vi[a].wrapping_add(pi);
                }
            }
            len <<= 1;
        }
        Ok((vr, vi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ckks::{Encoder, C64};
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
