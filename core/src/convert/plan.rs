//! Validated conversion plans: the bit budget of [`super::budget`] made concrete for one
//! parameter set, boundary level, slot count and scale. [`C2mPlan`] sizes the decoding map of
//! CKKS→MPC ([`super::decode`]), [`M2cPlan`] the encoding map of MPC→CKKS ([`super::encode`]);
//! both hold the integer fixed-point twiddles of the special FFT restricted to the slots.

use super::budget::{
    ceil_log2, check_scale, check_shape, coeff_bits, decode_budget, direct_budget, direct_shift,
    eta, split_multiplier, BoundaryCfg, K_BITS, MAX_FAST_TWIDDLE_BITS, MIN_ROUND_BITS, ROUND_BITS,
    S1_EXTRA_BITS,
};
use super::wide::W_BITS;
use super::ConvertError;
use crate::math::special_fft::fixed_twiddle_table;
use crate::mpc::zq::{Modulus as ZqModulus, RnsBasis};
use crate::params::CkksParams;
use crate::rlwe::types::copy_getters;
use alloc::vec::Vec;
use core::f64::consts::SQRT_2;

/// A validated CKKS→MPC plan ([`super::c2m_p0`] / [`super::c2m_p1`]).
///
/// Stages (all share arithmetic is linear; the proofs are at [`C2mPlan::decode_shares`] and in
/// the module docs):
/// 1. coefficient shares mod `Q_conv` → integer shares of `⌊c_k / 2^{s_1}⌉` (stochastic
///    rounding) by local truncation (`H_1 = 2^{h_1}`, failure `≤ 2^{h_1+1}/Q_conv`);
/// 2. the CKKS decoder's special FFT on those integer shares, sign-extended into `Z_{2^W}`
///    ([`super::Wide`]), scaled by `μ ≈ 2^{F+s_1+s_2}/Δ` and run as `log2 n` integer radix-2
///    stages with twiddles `round(2^t·w)` and a re-randomized local truncation by `2^t` after
///    each product: shares of the slots at scale `2^{F+s_2}`;
/// 3. common re-randomization and local truncation by `2^{s_2 − k}` in `Z_{2^W}`
///    (`H_3 = 2^{h_3}`, failure `≤ 2^{h_3+1−W}`) to scale `2^{F+k}`, reduced mod `2^ℓ`
///    (`|v| < 2^{ℓ-2}`), then the exact MPC rounding by `2^k`
///    ([`crate::mpc::Party::trunc_round_exact`], `k` = [`C2mPlan::round_bits`]).
#[derive(Clone, Debug)]
pub struct C2mPlan {
    pub(crate) level: usize,
    pub(crate) slots: usize,
    pub(crate) scale: f64,
    pub(crate) n_ring: usize,
    pub(crate) cfg: BoundaryCfg,
    pub(crate) basis: RnsBasis,
    pub(crate) s1: u32,
    pub(crate) h1: u32,
    pub(crate) s2: u32,
    pub(crate) h3: u32,
    /// Twiddle precision `t` of the fast decoding map.
    pub(crate) t: u32,
    /// Input multiplier `μ̃ = m0·2^{m0_shift} ≈ 2^{F+s_1+s_2}/Δ`.
    pub(crate) m0: i64,
    pub(crate) m0_shift: u32,
    /// `h` of the products truncated in each stage (`len = 2, 4, …, n`).
    pub(crate) stage_h: Vec<u32>,
    /// Twiddles `round(2^t·e^{2πi·(5^j mod 4len)/4len})`, `j < len/2`, for `len = 2, 4, …, n`.
    pub(crate) tw: Vec<[i64; 2]>,
    pub(crate) err_bound_ulp: f64,
    /// `s_2'` of the direct reference map ([`C2mPlan::decode_map`]) when its budget closes.
    pub(crate) s2_direct: Option<u32>,
    pub(crate) real_only: bool,
    /// Whether stage 3 ends with the local truncation alone ([`C2mPlan::local_rounding`]).
    pub(crate) local: bool,
}

impl C2mPlan {
    /// Validates the boundary: `Q_level < 2^124`, `log2 Q_level ≥ h_1 + 1 + σ` (which implies
    /// EncFormer's `Q/2 > Δ·B_max` and `log2 q ≥ ℓ + σ + 1` analogues), the twiddle and
    /// wide-ring budgets of the decoding map, the fixed-point error bound `< 1/4` ulp at `2^F`,
    /// and room for the exact rounding (`b + F + 3 + 4 ≤ ℓ`, see [`C2mPlan::round_bits`]).
    ///
    /// The stage-1 shift is `s_1 = ⌊log2 Δ − log2 2n − F − 4 − e⌋⁺` with the largest
    /// `e ≤ `[`S1_EXTRA_BITS`] whose budgets close without raising the per-ciphertext failure
    /// probability ([`C2mPlan::failure_log2`]) beyond `1.01·max(its value at e = 0, 2^{-30})`: the
    /// stage-1 stochastic truncation noise is the largest term of the pre-rounding error `ε`,
    /// and the wide ring has bits to spare (`e = 6` at Table VII's `N = 2^16` and at `N = 2^10`).
    pub fn new(
        params: &CkksParams,
        level: usize,
        slots: usize,
        scale: f64,
        cfg: BoundaryCfg,
    ) -> Result<Self, ConvertError> {
        let base = Self::with_s1_margin(params, level, slots, scale, cfg, 0)?;
        // 1% of slack: the stages' own (negligible) terms grow with e.
        let fail_cap = base.failure_log2().max(-30.0) + libm::log2(1.01);
        for e in (1..=S1_EXTRA_BITS).rev() {
            if let Ok(p) = Self::with_s1_margin(params, level, slots, scale, cfg, e) {
                if p.failure_log2() <= fail_cap {
                    return Ok(p);
                }
            }
        }
        Ok(base)
    }

    /// [`C2mPlan::new`] with `e` extra bits of stage-1 precision.
    fn with_s1_margin(
        params: &CkksParams,
        level: usize,
        slots: usize,
        scale: f64,
        cfg: BoundaryCfg,
        extra: u32,
    ) -> Result<Self, ConvertError> {
        check_shape(params, level, slots)?;
        cfg.check_ring()?;
        if cfg.log_bmax + cfg.ring.frac + 3 + MIN_ROUND_BITS > cfg.ring.ell {
            return Err(ConvertError::Budget(
                "B_max·2^F leaves fewer than 4 bits below 2^(ell-2) for the exact C2M rounding",
            ));
        }
        let log_delta = check_scale(scale)?;
        let primes: Vec<u64> = params.q()[..=level].iter().map(|m| m.value()).collect();
        let log_q: f64 = primes.iter().map(|&p| libm::log2(p as f64)).sum();
        let basis =
            RnsBasis::new(&primes).map_err(|_| ConvertError::ModulusTooLarge { level, log_q })?;
        let q = basis.modulus();
        let f = cfg.ring.frac;
        let log_n = slots.trailing_zeros();
        // Stage 1: coefficients |c_k| ≤ √2·B·Δ (+ CKKS noise ≪ Δ): one bit of margin.
        let h1 = coeff_bits(cfg.log_bmax, log_delta) + 1;
        let needed = h1 + 1 + cfg.sigma;
        if q.bits() - 1 < needed {
            return Err(ConvertError::ModulusTooSmall {
                level,
                log_q,
                needed,
            });
        }
        // Stage-1 truncation error: ≤ Σ_k |δ_k|·2^{s_1}/Δ ≤ 2n·2^{s_1}/Δ real, ≤ 2^{-4-e} ulp.
        let s1f = libm::floor(log_delta - (log_n + 1) as f64 - f as f64 - 4.0 - extra as f64);
        let s1 = if s1f > 0.0 { s1f as u32 } else { 0 };
        let fast = decode_budget(slots, log_delta, s1, cfg)?;
        let h3 = cfg.log_bmax + f + fast.s2 + 1;
        let n_ring = params.n();
        Ok(C2mPlan {
            level,
            slots,
            scale,
            n_ring,
            cfg,
            basis,
            s1,
            h1,
            s2: fast.s2,
            h3,
            t: fast.t,
            m0: fast.m0,
            m0_shift: fast.m0_shift,
            stage_h: fast.stage_h,
            tw: fast.tw,
            err_bound_ulp: fast.err_ulp,
            s2_direct: direct_shift(slots, log_delta, s1, cfg),
            real_only: false,
            local: false,
        })
    }

    /// Modulus trimming: the shortest level (fewest primes, smallest ciphertext) at which
    /// [`C2mPlan::new`] accepts the boundary.
    pub fn shortest_admissible(
        params: &CkksParams,
        slots: usize,
        scale: f64,
        cfg: BoundaryCfg,
    ) -> Result<Self, ConvertError> {
        let mut last = ConvertError::Budget("no level");
        for level in 0..=params.max_level() {
            match Self::new(params, level, slots, scale, cfg) {
                Ok(p) => return Ok(p),
                Err(e @ ConvertError::ModulusTooSmall { .. }) => last = e,
                // Past the Z_q limit with every shorter level too small: report the longest
                // level that was tried and why it is short.
                Err(e @ ConvertError::ModulusTooLarge { .. }) => {
                    return Err(if level == 0 { e } else { last })
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// The same plan for real-only ciphertexts (the BOLT/BLB baseline: one real vector per
    /// ciphertext, imaginary parts zero): C2M then returns only `[[x]]` (empty `im`) and runs
    /// the exact rounding on the `n` real parts alone, half the MPC traffic of a complex
    /// ciphertext.
    pub fn real_only(mut self) -> Self {
        self.real_only = true;
        self
    }

    /// The same plan with EncFormer's local rounding: stage 3's local truncation goes all the way
    /// to scale `2^F` and the exact MPC rounding is skipped ([`C2mPlan::round_bits`] is 0). C2M
    /// then sends nothing beyond the masked ciphertexts (no MPC round, no COT), and each value is
    /// within [`C2mPlan::error_bound_ulp`] `= ε + 1` ulp of `x·2^F` instead of `ε + 2^{-k}` after
    /// rounding: faithful, not exact. For boundaries whose next block tolerates one ulp.
    pub fn local_rounding(mut self) -> Self {
        self.local = true;
        self
    }

    /// Whether the plan ends with the local truncation alone ([`C2mPlan::local_rounding`]).
    pub fn is_local_rounding(&self) -> bool {
        self.local
    }

    /// Whether C2M returns only the real parts ([`C2mPlan::real_only`]).
    pub fn is_real_only(&self) -> bool {
        self.real_only
    }

    copy_getters! {
        /// The boundary level `Q_conv` the ciphertexts are trimmed to.
        level: usize,
        /// Slots per ciphertext.
        slots: usize,
        /// The CKKS scale `Δ` expected at the boundary.
        scale: f64,
    }
    /// `Q_conv`.
    pub fn modulus(&self) -> ZqModulus {
        self.basis.modulus()
    }
    /// `(s_1, s_2)`: the stage-1 truncation shift and the output scale `2^{F+s_2}` of the
    /// decoding map (stage 3 truncates by `2^{s_2−k}`).
    pub fn shifts(&self) -> (u32, u32) {
        (self.s1, self.s2)
    }
    /// Twiddle precision `t` of the fast decoding map (twiddles `round(2^t·w)`), as `f64`.
    pub fn twiddle_bits(&self) -> f64 {
        self.t as f64
    }
    /// `(h_1, max_s h_s, h_3)`: bit bounds of the coefficients before the stage-1 truncation
    /// (mod `Q_conv`), of the twiddled products before the truncations of the decoding map (the
    /// largest stage; see [`C2mPlan::stage_bits`]) and of the slots before the stage-3
    /// truncation (both in `Z_{2^W}`).
    pub fn value_bits(&self) -> (u32, u32, u32) {
        let hs = self.stage_h.iter().copied().max().unwrap_or(0);
        (self.h1, hs, self.h3)
    }
    /// `h_s` of every stage of the decoding map (`len = 2, 4, …, n`): the twiddled products of
    /// that stage satisfy `|v| < 2^{h_s}` before their local truncation.
    pub fn stage_bits(&self) -> &[u32] {
        &self.stage_h
    }
    /// `k`: the bits below `2^{-F}` kept by the local truncation of stage 3 and removed by the
    /// exact MPC rounding: `k = min(16, ℓ − 3 − b − F, s_2)`, or 0 for a
    /// [`C2mPlan::local_rounding`] plan. The local truncation's output
    /// `|v| ≤ (2^{b+F} + 1/4)·2^k + 1 < 2^{b+F+k+1} ≤ 2^{ℓ-2}` satisfies the rounding's
    /// known-MSB precondition.
    pub fn round_bits(&self) -> u32 {
        if self.local {
            return 0;
        }
        let c = self.cfg;
        ROUND_BITS
            .min(c.ring.ell - 3 - c.log_bmax - c.ring.frac)
            .min(self.s2)
    }
    /// The proven bound, in ulps of `2^{-F}`, on `|v/2^k − x·2^F|` for the value `v` that enters
    /// the exact rounding (stage-1 truncation, twiddle rounding and the `2^{-k}` of the local
    /// truncation to scale `2^{F+k}`), where `x` is the exact decoding of the decrypted
    /// plaintext (CKKS noise is part of `x`). The output is `round(v/2^k)`, within
    /// `1/2 + error_bound_ulp()` of `x·2^F`, and equal to `X` for fixed-point `x = X·2^{-F}`
    /// whenever the CKKS error stays below `1/2 − error_bound_ulp()` ulp. For a
    /// [`C2mPlan::local_rounding`] plan (`k = 0`) the output is `v` itself: the bound, `ε + 1`,
    /// is then the whole output error, and no output is promised to equal `X`.
    pub fn error_bound_ulp(&self) -> f64 {
        self.err_bound_ulp + libm::exp2(-(self.round_bits() as f64))
    }
    /// `log2` of the per-ciphertext failure probability: `2n` coefficient truncations at
    /// `2^{h_1+1}/Q`, `n` product truncations per stage at `2^{h_s+1−W}` and `2n` output
    /// truncations at `2^{h_3+1−W}`.
    pub fn failure_log2(&self) -> f64 {
        let n = self.slots as f64;
        let q = libm::log2(self.basis.modulus().value() as f64);
        let w = W_BITS as f64;
        let p1 = 2.0 * n * libm::exp2((self.h1 + 1) as f64 - q);
        let ps: f64 = self
            .stage_h
            .iter()
            .map(|&h| n * libm::exp2((h + 1) as f64 - w))
            .sum();
        let p3 = 2.0 * n * libm::exp2((self.h3 + 1) as f64 - w);
        libm::log2(p1 + ps + p3)
    }
    /// `s_2'` of the direct `O(n²)` reference map ([`C2mPlan::decode_map`]: output scale
    /// `2^{F+s_2'}` mod `2^K`), `None` when its `2^K` budget does not close.
    pub fn direct_shift(&self) -> Option<u32> {
        self.s2_direct
    }
}

/// A validated MPC→CKKS plan ([`super::m2c_p0`] / [`super::m2c_p1`]) with its fast encoding map.
///
/// # The map
///
/// Slot `j` of a ciphertext with `n` slots sits at `ω_j = ζ^{5^j·N/2n}`, a primitive `4n`-th
/// root of unity raised to `5^j`; the plaintext `Σ_{k<2n} c_k·Y^k` (`Y = X^{N/2n}`) with
/// `c_i + i·c_{i+n} = v_i = (Δ/n)·Σ_j z_j·ω_j^{-i}` (`i < n`) decodes to `z` (the CKKS encoder's
/// `fft_special_inv`). Each party evaluates `v` on its shares as the encoder does: `log2 n`
/// radix-2 decimation-in-frequency stages (`len = n, n/2, …, 2`), butterfly
/// `(a, b) ↦ ((a + b)/2, (a − b)·w/2)` with `w = e^{−2πi·(5^j mod 4len)/4len}`, then a bit
/// reversal; the halving in every stage supplies the `1/n`. In integers:
///
/// 1. *Lift.* Ring2Field gives shares of `X = x·2^F` mod `2^K`; a common mask makes P0's share
///    uniform and [`local_trunc`](crate::convert::budget::local_trunc) with shift 0 turns them into *integer* shares of `X` (exact
///    unless the wrap fails: probability `≤ 2^{h_0+1−K}`, `h_0 = b + F + 1`), sign-extended
///    into `Z_{2^W}`, `W = 192`; each party multiplies by `M_0 ≈ Δ·2^{g−F}` (exact when
///    `Δ·2^{g−F}` is an integer, e.g. `Δ = 2^40`): the working scale is `S = Δ·2^g`.
/// 2. *Stages.* `u = a + b` and `v = (a − b)·w̃` with `w̃ = round(2^t·w)` (componentwise) are
///    wrapping `Z_{2^W}` operations; after re-randomizing by fresh common masks, each party
///    truncates locally ([`local_trunc_wide`](crate::convert::wide::local_trunc_wide)) `u` by `2^1` and `v` by `2^{t+1}`.
/// 3. *Output.* After the bit reversal, the shares are reduced mod `2^K` (a ring homomorphism),
///    re-randomized, and truncated locally by `2^g` ([`local_trunc`](crate::convert::budget::local_trunc)): integer shares of
///    `c_k ≈ Δ·σ^{-1}(z)_k`, which each party reduces modulo every prime of `Q_level`.
///
/// # Error (proved, ulps of `2^{-F}`, per real and imaginary part of every slot)
///
/// Write `C_s` for the computed stage `s` and `E_s` for the exact one. Decoding after the exact
/// stages `s+1..L` is the inverse of the exact stages `1..s`, whose inverse butterflies
/// `(u, v) ↦ (u + v·w̄, u − v·w̄)` have `ℓ∞` norm 2: an error of `ε` in every value after stage
/// `s` moves every slot by `≤ 2^s·ε/S`. By telescoping over the stages:
///
/// * stage error `ε = √2·(1 + M·η_t·2^{−t})` per complex value (local truncation `< 1` per
///   component; twiddle rounding `|a − b|·√2·η_t/2^{t+1}` with `|a|, |b| ≤ M`), weighted by
///   `Σ_{s≤L} 2^s = 2n − 2`: `E_stage = (2n − 2)·ε·2^F/S`;
/// * input scaling `E_in = √2·B·2^F·|M_0 − Δ·2^{g−F}|/(Δ·2^{g−F})` (zero when exact);
/// * final truncation (`< 1` per coefficient, `|δv_i| < √2`, decoding has `ℓ∞` norm `n`):
///   `E_fin = √2·n·2^F/Δ`;
///
/// where `M` bounds every working value (complex magnitude): the inputs are
/// `|X + iY|·M_0 ≤ √2·B·2^F·M_0` and after each stage `M_s ≤ M_{s−1}·(1 + √2·η_t·2^{−t}) + √2`
/// (butterflies with halving do not grow the `ℓ∞` norm); `M = M_L`. [`M2cPlan::new`] requires `E_fin ≤ 1/16` and picks the smallest `g` with
/// `(2n−2)·√2·2^F/S ≤ 1/64` and `E_in ≤ 1/64`, then the smallest `t` with the twiddle part of
/// `E_stage` `≤ 1/64`: [`M2cPlan::error_bound_ulp`] `< 1/8` (CKKS encryption noise comes on
/// top).
///
/// # Bits and failure
///
/// Values before a truncation: `|u| < 2^{h_u}`, `h_u = ⌈log2(2M)⌉ + 1`;
/// `|v| < 2^{h_v}`, `h_v = ⌈log2(2M·(2^t + √2·η_t))⌉ + 1`; final `|c·2^g| < 2^{h_f}`,
/// `h_f = ⌈log2 M⌉ + 1`. Requires `W ≥ h_v + 1 + σ` and `K ≥ h_f + 1 + σ` (and
/// `log2 Q_level ≥ ⌈log2(√2·B·Δ)⌉ + 2`). Per ciphertext the failure probability is at most
/// `2n·2^{h_0+1−K} + L·n·(2^{h_u+1−W} + 2^{h_v+1−W}) + 2n·2^{h_f+1−K}`
/// ([`M2cPlan::failure_log2`]).
///
/// At EncFormer's Table VII setting (`N = 2^16`, `n = 2^15`, `Δ = 2^40`, `ℓ = 43`, `F = 13`,
/// `σ = 40`, `B = 2^8`): `g = 0`, `t = 44`, `M_0 = 2^27` (exact), `M ≈ 2^{48.5}`, `h_0 = 22`,
/// `h_u = 51`, `h_v = 95`, `h_f = 50`; slot error `≤ 0.0090` ulp (final rounding `2^{-11.5}`,
/// stage truncations `2^{-10.5}`, twiddles `≈ 2^{-7}`), coefficient error `≤ 266`; failure
/// `≤ 2^{-56.0}` per ciphertext (dominated by the final truncation in `Z_{2^K}`).
///
/// The direct `O(n²)` matrix ([`M2cPlan::encode_map`], twiddles scaled by `2^{t'}`, mod `2^K`)
/// is kept as a reference only.
#[derive(Clone, Debug)]
pub struct M2cPlan {
    pub(crate) level: usize,
    pub(crate) slots: usize,
    pub(crate) scale: f64,
    pub(crate) n_ring: usize,
    pub(crate) cfg: BoundaryCfg,
    /// Guard bits `g` of the working scale `S = Δ·2^g`.
    pub(crate) g: u32,
    /// Twiddle precision `t`.
    pub(crate) t: u32,
    /// Input multiplier `M_0 = m0·2^{m0_shift}`.
    pub(crate) m0: i64,
    pub(crate) m0_shift: u32,
    pub(crate) h_lift: u32,
    pub(crate) h_u: u32,
    pub(crate) h_v: u32,
    pub(crate) h_f: u32,
    /// Twiddles `round(2^t·e^{−2πi·(5^j mod 4len)/4len})`, `j < len/2`, stage after stage.
    pub(crate) tw: Vec<[i64; 2]>,
    pub(crate) err_bound_ulp: f64,
    pub(crate) coeff_err: f64,
    /// `t'` of the direct reference map when its budget closes.
    pub(crate) t_direct: Option<u32>,
}

impl M2cPlan {
    /// Validates an output at `level` and `scale` and sizes the fast map (see the type's docs):
    /// the plaintext fits `Q_level`, the proved slot error is `< 1/8` ulp at `2^F`, the twiddles
    /// fit `2^52`, and every local truncation fails with probability `≤ 2^{-σ}` (`W ≥ h_v + 1 + σ`,
    /// `K ≥ h_f + 1 + σ`). Otherwise a typed [`ConvertError`].
    pub fn new(
        params: &CkksParams,
        level: usize,
        slots: usize,
        scale: f64,
        cfg: BoundaryCfg,
    ) -> Result<Self, ConvertError> {
        check_shape(params, level, slots)?;
        cfg.check_ring()?;
        let log_delta = check_scale(scale)?;
        let log_q: f64 = params.q()[..=level]
            .iter()
            .map(|m| libm::log2(m.value() as f64))
            .sum();
        let cb = coeff_bits(cfg.log_bmax, log_delta) + 1;
        if log_q < (cb + 1) as f64 {
            return Err(ConvertError::ModulusTooSmall {
                level,
                log_q,
                needed: cb + 1,
            });
        }
        let f = cfg.ring.frac as f64;
        let n = slots as f64;
        let stages = slots.trailing_zeros();
        let bmax = libm::exp2(cfg.log_bmax as f64);
        let sigma = cfg.sigma;
        // Final truncation to integers at scale Δ.
        let e_fin = SQRT_2 * n * libm::exp2(f - log_delta);
        if e_fin > 1.0 / 16.0 {
            return Err(ConvertError::Budget(
                "scale too small for the slot count (coefficient rounding alone exceeds 1/16 ulp)",
            ));
        }
        let weight = 2.0 * n - 2.0;
        // Guard bits: stage truncations and input scaling ≤ 1/64 ulp each.
        let mut g = 0u32;
        let (m0, m0_shift, e_in, sw) = loop {
            let v = scale * libm::exp2(g as f64 - f);
            let (m, e, d) = split_multiplier(v);
            let e_in = SQRT_2 * bmax * libm::exp2(f) * d / v;
            let sw = libm::exp2(log_delta + g as f64);
            let e_tr = weight * SQRT_2 * libm::exp2(f) / sw;
            if e_in <= 1.0 / 64.0 && e_tr <= 1.0 / 64.0 && m > 0 {
                break (m, e, e_in, sw);
            }
            g += 1;
            if g > 64 {
                return Err(ConvertError::Budget(
                    "no guard bits make the fixed-point encoding accurate enough",
                ));
            }
        };
        let m0_real = m0 as f64 * libm::exp2(m0_shift as f64);
        let m_in = SQRT_2 * bmax * libm::exp2(f) * m0_real;
        // Bound on every working value after `stages` computed stages at twiddle precision t.
        let m_max = |t: u32| {
            let grow = 1.0 + SQRT_2 * eta(t) * libm::exp2(-(t as f64));
            let mut m = m_in;
            for _ in 0..stages {
                m = m * grow + SQRT_2;
            }
            m
        };
        let mut t = 1u32;
        let e_tw = loop {
            let e = weight * SQRT_2 * m_max(t) * eta(t) * libm::exp2(f - t as f64) / sw;
            if e <= 1.0 / 64.0 {
                break e;
            }
            t += 1;
            if t > MAX_FAST_TWIDDLE_BITS {
                return Err(ConvertError::Budget(
                    "the fast encoding map needs twiddles beyond 2^52 (lower B_max)",
                ));
            }
        };
        let m = m_max(t);
        let e_tr = weight * SQRT_2 * libm::exp2(f) / sw;
        let h_lift = cfg.log_bmax + cfg.ring.frac + 1;
        let h_u = ceil_log2(2.0 * m) + 1;
        let h_v = ceil_log2(2.0 * m * (libm::exp2(t as f64) + SQRT_2 * eta(t))) + 1;
        let h_f = ceil_log2(m) + 1;
        if W_BITS < h_v + 1 + sigma {
            return Err(ConvertError::Budget(
                "encoding-map values exceed the 2^W wide-ring budget (lower B_max, sigma or scale)",
            ));
        }
        if K_BITS < h_f + 1 + sigma || K_BITS < h_lift + 1 + sigma {
            return Err(ConvertError::Budget(
                "encoded coefficients exceed the 2^K ring budget (lower B_max, sigma or scale)",
            ));
        }
        // The integer coefficients (|c| ≤ M/2^g + 1) must fit Q_level/2.
        if libm::log2(m / libm::exp2(g as f64) + 1.0) + 1.0 > log_q {
            return Err(ConvertError::ModulusTooSmall {
                level,
                log_q,
                needed: cb + 1,
            });
        }
        let tw = fixed_twiddle_table(slots, t, true);
        let eps = SQRT_2 * (1.0 + m * eta(t) * libm::exp2(-(t as f64)));
        let d_in = m_in * libm::fabs(m0_real - scale * libm::exp2(g as f64 - f)) / m0_real;
        let coeff_err = (d_in + stages as f64 * eps) / libm::exp2(g as f64) + 1.0;
        Ok(M2cPlan {
            level,
            slots,
            scale,
            n_ring: params.n(),
            cfg,
            g,
            t,
            m0,
            m0_shift,
            h_lift,
            h_u,
            h_v,
            h_f,
            tw,
            err_bound_ulp: e_fin + e_tr + e_tw + e_in,
            coeff_err,
            t_direct: direct_budget(slots, log_delta, cfg),
        })
    }

    copy_getters! {
        /// The output level.
        level: usize,
        /// Slots per ciphertext.
        slots: usize,
        /// The output scale `Δ`.
        scale: f64,
    }
    /// The twiddle precision `t` of the fast map (twiddles `round(2^t·w)`).
    pub fn twiddle_bits(&self) -> u32 {
        self.t
    }
    /// Guard bits `g` of the working scale `Δ·2^g`.
    pub fn guard_bits(&self) -> u32 {
        self.g
    }
    /// `(h_0, h_u, h_v, h_f)`: bit bounds of the shared values at the lift, before the `u` and
    /// `v` truncations of every stage, and before the final truncation (see [`M2cPlan`]).
    pub fn value_bits(&self) -> (u32, u32, u32, u32) {
        (self.h_lift, self.h_u, self.h_v, self.h_f)
    }
    /// The proved bound on the decoded slot error from the fixed-point encoding, in ulps of
    /// `2^{-F}` per real and imaginary part (CKKS encryption noise comes on top).
    pub fn error_bound_ulp(&self) -> f64 {
        self.err_bound_ulp
    }
    /// The proved bound on `|c_k − Δ·σ^{-1}(z)_k|` for every output coefficient (in units of
    /// the coefficient, scale `Δ`).
    pub fn coeff_error_bound(&self) -> f64 {
        self.coeff_err
    }
    /// `log2` of the per-ciphertext failure probability: `2n` lifts at `2^{h_0+1−K}`,
    /// `log2(n)·n` truncations at `2^{h_u+1−W}` and as many at `2^{h_v+1−W}`, `2n` final
    /// truncations at `2^{h_f+1−K}`.
    pub fn failure_log2(&self) -> f64 {
        let n = self.slots as f64;
        let l = self.slots.trailing_zeros() as f64;
        let (k, w) = (K_BITS as f64, W_BITS as f64);
        let p = 2.0 * n * libm::exp2((self.h_lift + 1) as f64 - k)
            + l * n * libm::exp2((self.h_u + 1) as f64 - w)
            + l * n * libm::exp2((self.h_v + 1) as f64 - w)
            + 2.0 * n * libm::exp2((self.h_f + 1) as f64 - k);
        libm::log2(p)
    }
    /// `t'` of the direct `O(n²)` reference map ([`M2cPlan::encode_map`]), `None` when its
    /// `2^K` budget does not close.
    pub fn direct_twiddle_bits(&self) -> Option<u32> {
        self.t_direct
    }
}
