//! The bit budget of the conversion, below the plans and the maps: the rings' widths, the
//! boundary promise ([`BoundaryCfg`]), the local truncation and the sizing of the decoding map.
//! The plans ([`super::plan`]) validate a boundary with these; the maps ([`super::decode`],
//! [`super::encode`]) run on what the plans fix.

use super::wide::W_BITS;
use super::ConvertError;
use crate::math::special_fft::fixed_twiddle_table;
use crate::mpc::RingCfg;
use crate::params::CkksParams;
use alloc::vec::Vec;
use core::f64::consts::SQRT_2;

/// Bit width `K` of the intermediate power-of-two ring `Z_{2^K}`: M2C's Ring2Field target and
/// output ring (the fast maps themselves run in the wide ring `Z_{2^W}`), and the ring of the
/// direct reference maps. `K = 123` keeps `2^K` a valid [`Modulus`](crate::mpc::zq::Modulus) (`< 2^124`), so
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

/// Smallest admissible `k` (see [`C2mPlan::round_bits`](crate::convert::plan::C2mPlan::round_bits)): below it the plan is refused.
pub const MIN_ROUND_BITS: u32 = 4;

/// Most extra bits of stage-1 precision [`C2mPlan::new`](crate::convert::plan::C2mPlan::new) tries (see there).
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

/// Largest twiddle precision `t` of the fast map. The twiddles `round(2^t·e^{−2πi·r/M})` are
/// computed from the first octant (angle `≤ π/4` with an absolute error
/// `≤ 2^{-52.7}`, `libm` cos/sin within one ulp `≤ 2^{-53}`), so each real component is within
/// `η_t = ½ + 2^{t−51}` of `2^t·w` (the budget uses `η_t`; beyond `t ≈ 51` more bits stop
/// paying).
pub const MAX_FAST_TWIDDLE_BITS: u32 = 52;

/// Per-component twiddle error bound `η_t = ½ + 2^{t−51}`.
pub(super) fn eta(t: u32) -> f64 {
    0.5 + libm::exp2(t as f64 - 51.0)
}

/// `v = m·2^e` with `m < 2^53` (exact for `v ≥ 2^52`, else `m = round(v)`); returns
/// `(m, e, |m·2^e − v|)`.
pub(super) fn split_multiplier(v: f64) -> (i64, u32, f64) {
    if v >= libm::exp2(52.0) {
        let e = libm::floor(libm::log2(v)) as i32 - 52;
        let mut e = e.max(0) as u32;
        // Correct a possible off-by-one of the float log2.
        while v / libm::exp2(e as f64) >= libm::exp2(53.0) {
            e += 1;
        }
        let m = v / libm::exp2(e as f64);
        let mr = libm::round(m);
        (mr as i64, e, libm::fabs(mr - m) * libm::exp2(e as f64))
    } else {
        let m = libm::round(v);
        (m as i64, 0, libm::fabs(m - v))
    }
}

/// `⌈log2 x⌉` for `x > 0`, as `u32` (`0` below 1).
pub(super) fn ceil_log2(x: f64) -> u32 {
    let l = libm::ceil(libm::log2(x));
    if l > 0.0 {
        l as u32
    } else {
        0
    }
}

/// `2^K − 1`.
pub(crate) const K_MASK: u128 = (1u128 << K_BITS) - 1;

#[inline]
pub(super) fn to_k(v: i64) -> u128 {
    (v as i128 as u128) & K_MASK
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
pub(super) fn decode_budget(
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
    let tw = fixed_twiddle_table(slots, t, false);
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

/// The direct map's budget: twiddle rounding `≤ √n·B·Δ/2^{s_1+s_2'}` ulp `≤ 1/8`, i.e.
/// `s_2' = max(⌈3 + ½log2 n + b + log2 Δ⌉ − s_1, log2 n + 4)`; twiddles
/// `2^{F+s_1+s_2'}/Δ ≤ 2^{50}`; values `< 2^{b+F+s_2'+1}` with `K ≥ b + F + s_2' + 2 + σ`.
pub(super) fn direct_shift(slots: usize, log_delta: f64, s1: u32, cfg: BoundaryCfg) -> Option<u32> {
    let f = cfg.ring.frac;
    let log_n = slots.trailing_zeros();
    let need = libm::ceil(3.0 + 0.5 * log_n as f64 + cfg.log_bmax as f64 + log_delta);
    let s2 = ((need as i64 - s1 as i64).max(log_n as i64 + 4)).max(1) as u32;
    let tw = (f + s1 + s2) as f64 - log_delta;
    (tw <= MAX_TWIDDLE_BITS && K_BITS >= cfg.log_bmax + f + s2 + 2 + cfg.sigma).then_some(s2)
}

/// The old direct map's budget: `t' = ⌈log2(n·B·2^F/(e_max − 1))⌉⁺` with
/// `e_max = Δ/(16·n·2^F)`, `h = ⌈log2(√2·B·Δ)⌉ + 1 + t'`, `K ≥ h + 1 + σ`, twiddles `≤ 2^50`.
pub(super) fn direct_budget(slots: usize, log_delta: f64, cfg: BoundaryCfg) -> Option<u32> {
    let f = cfg.ring.frac as f64;
    let n = slots as f64;
    let e_max = libm::exp2(log_delta - f) / (16.0 * n);
    if e_max <= 1.0625 {
        return None;
    }
    let tf = libm::ceil(libm::log2(
        n * libm::exp2(cfg.log_bmax as f64 + f) / (e_max - 1.0),
    ));
    let t = if tf > 0.0 { tf as u32 } else { 0 };
    let twiddle_log = log_delta + t as f64 - libm::log2(n) - f;
    let h = coeff_bits(cfg.log_bmax, log_delta) + 1 + t;
    (twiddle_log <= MAX_TWIDDLE_BITS && K_BITS >= h + 1 + cfg.sigma).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::special_fft::{rot_group, unit_root};
    use core::f64::consts::PI;
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

    #[test]
    fn unit_roots_match_libm() {
        for m in [8u64, 16, 1024, 1 << 17] {
            for r in 0..m.min(4096) {
                let th = 2.0 * PI * r as f64 / m as f64;
                let (c, s) = unit_root(r, m);
                assert!((c - libm::cos(th)).abs() < 1e-15 && (s - libm::sin(th)).abs() < 1e-15);
            }
        }
        assert_eq!(unit_root(2, 8), (0.0, 1.0));
        assert_eq!(unit_root(4, 8), (-1.0, 0.0));
    }

    #[test]
    fn multiplier_split() {
        assert_eq!(split_multiplier(1024.0), (1024, 0, 0.0));
        let (m, e, d) = split_multiplier(libm::exp2(70.0) * 3.0);
        assert_eq!((m as f64) * libm::exp2(e as f64), libm::exp2(70.0) * 3.0);
        assert!(m < 1 << 53 && d == 0.0);
        let (m, e, d) = split_multiplier(100.4);
        assert_eq!((m, e), (100, 0));
        assert!((d - 0.4).abs() < 1e-12);
    }
}
