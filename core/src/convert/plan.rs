//! Validated conversion plans: the bit budget of [`super`] made concrete for one parameter set,
//! boundary level, slot count and scale, and the integer fixed-point tables of the canonical
//! embedding restricted to the slots.

use super::wide::W_BITS;
use super::ConvertError;
use crate::mpc::zq::{Modulus as ZqModulus, RnsBasis};
use crate::mpc::RingCfg;
use crate::params::CkksParams;
use alloc::vec::Vec;

/// Bit width `K` of the intermediate power-of-two ring `Z_{2^K}`: M2C's Ring2Field target and
/// output ring (the fast maps themselves run in the wide ring `Z_{2^W}`), and the ring of the
/// direct reference maps. `K = 123` keeps `2^K` a valid [`ZqModulus`] (`< 2^124`), so
/// Ring2Field can target it directly.
pub const K_BITS: u32 = 123;

/// Largest twiddle magnitude `2^t` of the direct reference maps' tables: twiddles are `f64`
/// products rounded to integers, exact to well under one unit while `t ≤ 50`.
pub const MAX_TWIDDLE_BITS: f64 = 50.0;

/// Largest fraction `k` C2M keeps below `2^{-F}` before its exact MPC rounding (stage 3): the
/// local truncation lands at scale `2^{F+k}`, [`crate::mpc::Party::trunc_round_exact`] removes
/// the `k` bits. `k = 16` (four radix-16 digits in the comparison) puts the local-truncation
/// error at `2^{-16}` ulp.
pub const ROUND_BITS: u32 = 16;

/// Smallest admissible `k` (see [`C2mPlan::round_bits`]): below it the plan is refused.
pub const MIN_ROUND_BITS: u32 = 4;

/// Most extra bits of stage-1 precision [`C2mPlan::new`] tries (see there).
pub const S1_EXTRA_BITS: u32 = 6;

/// What the MPC side promises about boundary values and how much failure it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundaryCfg {
    /// The MPC ring `Z_{2^ℓ}` and fixed-point fraction `F` of the shares.
    pub ring: RingCfg,
    /// Statistical security σ: every local wrap argument fails with probability `≤ 2^{-σ}` per
    /// element.
    pub sigma: u32,
    /// `B_max = 2^{log_bmax}`: every real and imaginary slot value satisfies `|v| ≤ B_max`
    /// (real units, before the `2^F` fixed-point scaling).
    pub log_bmax: u32,
}

impl BoundaryCfg {
    /// EncFormer's ring (`ℓ = 43`, `F = 13`), σ = 40 and the given `log2 B_max`.
    pub fn encformer(log_bmax: u32) -> Self {
        BoundaryCfg {
            ring: RingCfg::ENCFORMER,
            sigma: 40,
            log_bmax,
        }
    }

    pub(super) fn check_ring(&self) -> Result<(), ConvertError> {
        // |x·2^F| ≤ 2^{log_bmax + F} plus ±1 truncation slack must stay below 2^{ℓ-1}.
        if self.log_bmax + self.ring.frac + 2 > self.ring.ell {
            return Err(ConvertError::Budget(
                "B_max·2^F does not fit the signed range of Z_2^ell",
            ));
        }
        Ok(())
    }
}

pub(super) fn check_shape(
    params: &CkksParams,
    level: usize,
    slots: usize,
) -> Result<(), ConvertError> {
    if level > params.max_level() {
        return Err(ConvertError::Ckks(crate::Error::InvalidLevel {
            level,
            max_level: params.max_level(),
        }));
    }
    if slots == 0 || !slots.is_power_of_two() || slots > params.n() / 2 {
        return Err(ConvertError::Ckks(crate::Error::InvalidParameters(
            "slot count must be a power of two ≤ N/2",
        )));
    }
    Ok(())
}

pub(super) fn check_scale(scale: f64) -> Result<f64, ConvertError> {
    if !(scale.is_finite() && scale >= 2.0) {
        return Err(ConvertError::Budget("scale must be finite and ≥ 2"));
    }
    Ok(libm::log2(scale))
}

/// `5^j mod 2N` for `j < n`: slot `j` sits at the root `ζ^{5^j}`.
pub(super) fn rot_group(n_ring: usize, slots: usize) -> Vec<u64> {
    let m = 2 * n_ring as u64;
    let mut g = 1u64;
    let mut out = Vec::with_capacity(slots);
    for _ in 0..slots {
        out.push(g);
        g = (g * 5) % m;
    }
    out
}

/// `round(cos(πe/N)·s)` and `round(sin(πe/N)·s)` for `e < 2N`, as `i64`.
pub(super) fn trig_tables(n_ring: usize, s: f64) -> (Vec<i64>, Vec<i64>) {
    let m = 2 * n_ring;
    let mut c = Vec::with_capacity(m);
    let mut si = Vec::with_capacity(m);
    for e in 0..m {
        let th = core::f64::consts::PI * e as f64 / n_ring as f64;
        c.push(libm::round(libm::cos(th) * s) as i64);
        si.push(libm::round(libm::sin(th) * s) as i64);
    }
    (c, si)
}

/// `⌈log2(√2·B_max·Δ)⌉`: a bound on every plaintext coefficient in bits. By Parseval over the
/// `2n` roots of `Y^{2n} + 1` (`Y = X^{N/2n}`), `Σ_k c_k² = (1/n)·Σ_j |z_j|²·Δ² ≤ 2·B_max²·Δ²`, so
/// each `|c_k| ≤ √2·B_max·Δ` and `Σ_k |c_k| ≤ 2·√n·B_max·Δ`.
pub(super) fn coeff_bits(log_bmax: u32, log_delta: f64) -> u32 {
    libm::ceil(0.5 + log_bmax as f64 + log_delta) as u32
}

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
        let fast = super::decode::budget(slots, log_delta, s1, cfg)?;
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

    /// Whether C2M returns only the real parts ([`C2mPlan::real_only`]).
    pub fn is_real_only(&self) -> bool {
        self.real_only
    }

    /// The boundary level `Q_conv` the ciphertexts are trimmed to.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Slots per ciphertext.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// The CKKS scale `Δ` expected at the boundary.
    pub fn scale(&self) -> f64 {
        self.scale
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
    /// exact MPC rounding: `k = min(16, ℓ − 3 − b − F, s_2)`. The local truncation's output
    /// `|v| ≤ (2^{b+F} + 1/4)·2^k + 1 < 2^{b+F+k+1} ≤ 2^{ℓ-2}` satisfies the rounding's
    /// known-MSB precondition.
    pub fn round_bits(&self) -> u32 {
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
    /// whenever the CKKS error stays below `1/2 − error_bound_ulp()` ulp.
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

/// The direct map's budget: twiddle rounding `≤ √n·B·Δ/2^{s_1+s_2'}` ulp `≤ 1/8`, i.e.
/// `s_2' = max(⌈3 + ½log2 n + b + log2 Δ⌉ − s_1, log2 n + 4)`; twiddles
/// `2^{F+s_1+s_2'}/Δ ≤ 2^{50}`; values `< 2^{b+F+s_2'+1}` with `K ≥ b + F + s_2' + 2 + σ`.
fn direct_shift(slots: usize, log_delta: f64, s1: u32, cfg: BoundaryCfg) -> Option<u32> {
    let f = cfg.ring.frac;
    let log_n = slots.trailing_zeros();
    let need = libm::ceil(3.0 + 0.5 * log_n as f64 + cfg.log_bmax as f64 + log_delta);
    let s2 = ((need as i64 - s1 as i64).max(log_n as i64 + 4)).max(1) as u32;
    let tw = (f + s1 + s2) as f64 - log_delta;
    (tw <= MAX_TWIDDLE_BITS && K_BITS >= cfg.log_bmax + f + s2 + 2 + cfg.sigma).then_some(s2)
}

/// `2^K − 1`.
pub(crate) const K_MASK: u128 = (1u128 << K_BITS) - 1;

#[inline]
fn to_k(v: i64) -> u128 {
    (v as i128 as u128) & K_MASK
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
        for g in rot_group(self.n_ring, n) {
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

/// Local (SecureML-style) truncation of an additive share modulo `m ≤ 2^124` to an *integer*
/// share of `⌊x/2^s⌋` or `⌊x/2^s⌋ + 1`, for a shared `x` with `|x| < 2^h` (`s ≤ h`).
///
/// P0 holds `x_0`, assumed uniform mod `m` (fresh mask or common re-randomization), and outputs
/// `A − 2^{h-s}` with `a = x_0 + 2^h mod m = A·2^s + α`; P1 holds `x_1` and outputs `−C` with
/// `m − x_1 = C·2^s + γ` (`x_1 = 0` gives `m`). Whenever `a + x_1 ≥ m` (the wrap P1 assumes),
/// `x + 2^h = a − (m − x_1)` over the integers, so `A − C = ⌊(x+2^h)/2^s⌋ + {0, 1}`. The wrap
/// fails iff `a ≤ x + 2^h`, with probability `(x + 2^h + 1)/m ≤ 2^{h+1}/m`. The integer shares
/// can then be reduced modulo any modulus (`2^ℓ`, or every RNS prime of `Q_level`).
///
/// The `+1` occurs iff `α < ρ = (x + 2^h) mod 2^s`, so for uniform `x_0` it has probability
/// `ρ/2^s`: the result is the stochastic rounding of `x/2^s` (expectation exactly `x/2^s`).
pub fn local_trunc(share: u128, m: u128, p0: bool, s: u32, h: u32) -> i128 {
    debug_assert!(s <= h && share < m && m <= 1u128 << 124 && h < 124);
    if p0 {
        let a = (share + (1u128 << h)) % m;
        (a >> s) as i128 - (1i128 << (h - s))
    } else {
        -(((m - share) >> s) as i128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    /// The local truncation's correctness and its exact failure event: the sum of the integer
    /// shares is `⌊x/2^s⌋` or `⌊x/2^s⌋ + 1` unless `(x_0 + 2^h) mod m ≤ x + 2^h`, and that event
    /// occurs at the predicted rate `≈ 2^h/m` (measurable here: `m ≈ 2^24`, `h = 12`).
    #[test]
    fn local_trunc_stochastic_rounding_with_predicted_failures() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        for m in [1u128 << 24, 16_777_213] {
            let (h, s) = (12u32, 5u32);
            let trials = 200_000;
            let mut fails = 0;
            let mut bias = 0f64;
            for _ in 0..trials {
                let x = (rng.next_u64() % (1 << (h + 1))) as i128 - (1 << h);
                let x0 = (rng.next_u64() as u128) % m;
                let x1 = ((x.rem_euclid(m as i128) as u128) + m - x0) % m;
                let sum = local_trunc(x0, m, true, s, h) + local_trunc(x1, m, false, s, h);
                let fl = x.div_euclid(1 << s);
                let predicted_fail = (x0 + (1u128 << h)) % m <= (x + (1 << h)) as u128;
                if predicted_fail {
                    fails += 1;
                } else {
                    assert!(sum == fl || sum == fl + 1, "x {x} -> {sum}");
                    bias += sum as f64 - x as f64 / (1 << s) as f64;
                }
            }
            // Stochastic rounding is unbiased: mean error 0 (sd of the mean ≈ 0.5/√trials).
            let mean = bias / (trials - fails) as f64;
            assert!(mean.abs() < 0.01, "m {m}: bias {mean}");
            // Expected ≈ trials·2^h/m ≈ 48.8.
            assert!((20..=90).contains(&fails), "m {m}: {fails} failures");
        }
    }

    #[test]
    fn rot_group_and_tables() {
        let r = rot_group(16, 8);
        assert_eq!(r[..4], [1, 5, 25, 125 % 32]);
        let (c, s) = trig_tables(16, 1024.0);
        assert_eq!((c[0], s[0]), (1024, 0));
        assert_eq!((c[8], s[8]), (0, 1024)); // e = N/2: ζ^{N/2} = i
        assert_eq!((c[16], s[16]), (-1024, 0));
    }
}
