//! Validated conversion plans: the bit budget of [`super`] made concrete for one parameter set,
//! boundary level, slot count and scale, and the integer fixed-point tables of the canonical
//! embedding restricted to the slots.

use super::ConvertError;
use crate::mpc::zq::{Modulus as ZqModulus, RnsBasis};
use crate::mpc::RingCfg;
use crate::params::CkksParams;
use alloc::vec::Vec;

/// Bit width `K` of the intermediate power-of-two ring `Z_{2^K}` in which the parties apply the
/// (de)coding map. `K = 123` keeps `2^K` a valid [`ZqModulus`] (`< 2^124`), so Ring2Field can
/// target it directly.
pub const K_BITS: u32 = 123;

/// Largest twiddle magnitude `2^t` the tables use: twiddles are `f64` products rounded to
/// integers, exact to well under one unit while `t ≤ 50`.
pub const MAX_TWIDDLE_BITS: f64 = 50.0;

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

    fn check_ring(&self) -> Result<(), ConvertError> {
        // |x·2^F| ≤ 2^{log_bmax + F} plus ±1 truncation slack must stay below 2^{ℓ-1}.
        if self.log_bmax + self.ring.frac + 2 > self.ring.ell {
            return Err(ConvertError::Budget(
                "B_max·2^F does not fit the signed range of Z_2^ell",
            ));
        }
        Ok(())
    }
}

fn check_shape(params: &CkksParams, level: usize, slots: usize) -> Result<(), ConvertError> {
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

fn check_scale(scale: f64) -> Result<f64, ConvertError> {
    if !(scale.is_finite() && scale >= 2.0) {
        return Err(ConvertError::Budget("scale must be finite and ≥ 2"));
    }
    Ok(libm::log2(scale))
}

/// `5^j mod 2N` for `j < n`: slot `j` sits at the root `ζ^{5^j}`.
fn rot_group(n_ring: usize, slots: usize) -> Vec<u64> {
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
fn trig_tables(n_ring: usize, s: f64) -> (Vec<i64>, Vec<i64>) {
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
fn coeff_bits(log_bmax: u32, log_delta: f64) -> u32 {
    libm::ceil(0.5 + log_bmax as f64 + log_delta) as u32
}

/// A validated CKKS→MPC plan ([`super::c2m_p0`] / [`super::c2m_p1`]).
///
/// Stages (all share arithmetic is linear; see the module docs for the proofs):
/// 1. coefficient shares mod `Q_conv` → integer shares of `⌊c_k / 2^{s_1}⌋` (+0/1) by local
///    truncation (`H_1 = 2^{h_1}`, failure `≤ 2^{h_1+1}/Q_conv`), reduced mod `2^K`;
/// 2. the decoding map with twiddles `round(cos/sin(πe/N)·2^{F+s_1+s_2}/Δ)`, mod `2^K`;
/// 3. common re-randomization and local truncation by `2^{s_2}` (`H_3 = 2^{h_3}`, failure
///    `≤ 2^{h_3+1}/2^K`), reduced mod `2^ℓ`.
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
    pub(crate) twiddle_bits: f64,
    pub(crate) rot: Vec<u64>,
    pub(crate) cos: Vec<i64>,
    pub(crate) sin: Vec<i64>,
    pub(crate) err_bound_ulp: f64,
}

impl C2mPlan {
    /// Validates the boundary: `Q_level < 2^124`, `log2 Q_level ≥ h_1 + 1 + σ` (which implies
    /// EncFormer's `Q/2 > Δ·B_max` and `log2 q ≥ ℓ + σ + 1` analogues), the twiddle and
    /// intermediate-ring budgets, and the fixed-point error bound `< 1/4` ulp at `2^F`.
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
        // (a) stage-1 truncation error: ≤ Σ_k |D_jk|·2^{s_1}/Δ ≤ 2n·2^{s_1}/Δ real, ≤ 1/16 ulp.
        let s1f = libm::floor(log_delta - (log_n + 1) as f64 - f as f64 - 4.0);
        let s1 = if s1f > 0.0 { s1f as u32 } else { 0 };
        // (b) twiddle rounding: ≤ ½·Σ_k |c_k|/2^{s_1} ≤ √n·B·Δ/2^{s_1} at scale 2^{F+s_2};
        //     ≤ 1/8 ulp needs s_1 + s_2 ≥ log2(8·√n·B·Δ). The stage-1 ±1 errors through the
        //     rounding of the twiddles add ≤ n/2^{s_2} ulp ≤ 1/16.
        let need_b = libm::ceil(3.0 + 0.5 * log_n as f64 + cfg.log_bmax as f64 + log_delta);
        let s2 = ((need_b as i64 - s1 as i64).max(log_n as i64 + 4)).max(1) as u32;
        let twiddle_bits = (f + s1 + s2) as f64 - log_delta;
        if twiddle_bits > MAX_TWIDDLE_BITS {
            return Err(ConvertError::Budget("twiddles exceed 2^50"));
        }
        // Stage 3: |z·2^{F+s_2}| ≤ (B·2^F + 1/4)·2^{s_2} < 2^{h_3}.
        let h3 = cfg.log_bmax + f + s2 + 1;
        if K_BITS < h3 + 1 + cfg.sigma {
            return Err(ConvertError::Budget(
                "decoded values exceed the 2^K ring budget (lower B_max or sigma)",
            ));
        }
        let n_ring = params.n();
        let smul = libm::exp2((f + s1 + s2) as f64 - log_delta);
        let (cos, sin) = trig_tables(n_ring, smul);
        let ulp_a = 2.0 * slots as f64 * libm::exp2(s1 as f64 + f as f64 - log_delta);
        let ulp_b = libm::sqrt(slots as f64)
            * libm::exp2(cfg.log_bmax as f64 + log_delta - (s1 + s2) as f64)
            + slots as f64 / libm::exp2(s2 as f64);
        Ok(C2mPlan {
            level,
            slots,
            scale,
            n_ring,
            cfg,
            basis,
            s1,
            h1,
            s2,
            h3,
            twiddle_bits,
            rot: rot_group(n_ring, slots),
            cos,
            sin,
            err_bound_ulp: ulp_a + ulp_b,
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
    /// `(s_1, s_2)`: the two local truncation shifts.
    pub fn shifts(&self) -> (u32, u32) {
        (self.s1, self.s2)
    }
    /// `t = F + s_1 + s_2 − log2 Δ`: the twiddle precision in bits.
    pub fn twiddle_bits(&self) -> f64 {
        self.twiddle_bits
    }
    /// The proven bound on the fixed-point error before the final truncation, in ulps of
    /// `2^{-F}` (stage-1 truncation plus twiddle rounding; CKKS noise comes on top).
    pub fn error_bound_ulp(&self) -> f64 {
        self.err_bound_ulp
    }
    /// `log2` of the per-ciphertext failure probability: `2n` coefficient truncations at
    /// `2^{h_1+1}/Q` and `2n` output truncations at `2^{h_3+1}/2^K`.
    pub fn failure_log2(&self) -> f64 {
        let q = libm::log2(self.basis.modulus().value() as f64);
        let p1 = libm::exp2((self.h1 + 1) as f64 - q);
        let p3 = libm::exp2((self.h3 + 1) as f64 - K_BITS as f64);
        libm::log2(2.0 * self.slots as f64 * (p1 + p3))
    }
}

/// A validated MPC→CKKS plan ([`super::m2c_p0`] / [`super::m2c_p1`]).
///
/// Stages: Ring2Field of the `Z_{2^ℓ}` shares to `Z_{2^K}` (exact); the encoding map with
/// twiddles `round(cos/sin(πe/N)·Δ·2^{t'}/(n·2^F))` mod `2^K`; common re-randomization and local
/// truncation by `2^{t'}` to integer shares of the plaintext coefficients (failure
/// `≤ 2^{h+1}/2^K`), which each party reduces modulo every prime of `Q_level`.
#[derive(Clone, Debug)]
pub struct M2cPlan {
    pub(crate) level: usize,
    pub(crate) slots: usize,
    pub(crate) scale: f64,
    pub(crate) n_ring: usize,
    pub(crate) cfg: BoundaryCfg,
    pub(crate) t: u32,
    pub(crate) h: u32,
    pub(crate) rot: Vec<u64>,
    pub(crate) cos: Vec<i64>,
    pub(crate) sin: Vec<i64>,
    pub(crate) err_bound_ulp: f64,
}

impl M2cPlan {
    /// Validates an output at `level` and `scale`: the plaintext fits (`Q_level/2 > 2·Δ·B_max`),
    /// the coefficient error keeps the slot error below `1/8` ulp, and `2^K ≥ 2^{h+1+σ}`.
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
        // Slot error from coefficient errors |δc| ≤ e: ≤ 2n·e/Δ real = 2n·e·2^F/Δ ulp ≤ 1/8.
        let e_max = libm::exp2(log_delta - f) / (16.0 * n);
        if e_max <= 1.0625 {
            return Err(ConvertError::Budget(
                "scale too small for the slot count (coefficient rounding alone exceeds 1/8 ulp)",
            ));
        }
        // e = 1 (local truncation) + n·B·2^F/2^{t'} (twiddle rounding, ½ per term).
        let tf = libm::ceil(libm::log2(
            n * libm::exp2(cfg.log_bmax as f64 + f) / (e_max - 1.0),
        ));
        let t = if tf > 0.0 { tf as u32 } else { 0 };
        let twiddle_log = log_delta + t as f64 - libm::log2(n) - f;
        if twiddle_log > MAX_TWIDDLE_BITS {
            return Err(ConvertError::Budget("twiddles exceed 2^50"));
        }
        let h = cb + t;
        if K_BITS < h + 1 + cfg.sigma {
            return Err(ConvertError::Budget(
                "encoded coefficients exceed the 2^K ring budget (lower B_max, sigma or scale)",
            ));
        }
        let n_ring = params.n();
        let (cos, sin) = trig_tables(n_ring, libm::exp2(twiddle_log));
        let e = 1.0 + n * libm::exp2(cfg.log_bmax as f64 + f - t as f64);
        Ok(M2cPlan {
            level,
            slots,
            scale,
            n_ring,
            cfg,
            t,
            h,
            rot: rot_group(n_ring, slots),
            cos,
            sin,
            err_bound_ulp: 2.0 * n * e * libm::exp2(f - log_delta),
        })
    }

    /// The output level.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Slots per ciphertext.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// The output scale `Δ`.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// The extra precision `t'` of the encoding twiddles (the local truncation shift).
    pub fn twiddle_bits(&self) -> u32 {
        self.t
    }
    /// The proven bound on the decoded slot error from the fixed-point encoding, in ulps of
    /// `2^{-F}` (CKKS encryption noise comes on top).
    pub fn error_bound_ulp(&self) -> f64 {
        self.err_bound_ulp
    }
    /// `log2` of the per-ciphertext failure probability (`2n` truncations at `2^{h+1}/2^K`).
    pub fn failure_log2(&self) -> f64 {
        libm::log2(2.0 * self.slots as f64) + (self.h + 1) as f64 - K_BITS as f64
    }
}

/// `2^K − 1`.
pub(crate) const K_MASK: u128 = (1u128 << K_BITS) - 1;

#[inline]
fn to_k(v: i64) -> u128 {
    (v as i128 as u128) & K_MASK
}

impl C2mPlan {
    /// The decoding map on one party's share, modulo `2^K`: for the `2n` subring coefficients
    /// `c_k` (position `k·N/2n`) returns `(Re_j, Im_j)_j = Σ_k c_k·round(cos/sin(π·e_jk/N)·2^t)`
    /// with `e_jk = 5^j·k·N/2n mod 2N`. Integer, wrapping, hence a `Z_{2^K}`-module
    /// homomorphism: the maps of two shares add to the map of the shared vector.
    pub fn decode_map(&self, coeffs: &[u128]) -> (Vec<u128>, Vec<u128>) {
        let n = self.slots;
        debug_assert_eq!(coeffs.len(), 2 * n);
        let gap = (self.n_ring / (2 * n)) as u64;
        let mask = 2 * self.n_ring as u64 - 1;
        let mut re = Vec::with_capacity(n);
        let mut im = Vec::with_capacity(n);
        let tc: Vec<u128> = self.cos.iter().map(|&v| to_k(v)).collect();
        let ts: Vec<u128> = self.sin.iter().map(|&v| to_k(v)).collect();
        for &g in &self.rot {
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
        (re, im)
    }
}

impl M2cPlan {
    /// The encoding map on one party's share, modulo `2^K`: coefficient `k < 2n` (position
    /// `k·N/2n`) is `Σ_j x_j·round(cos(π·e_jk/N)·S) + y_j·round(sin(π·e_jk/N)·S)` with
    /// `S = Δ·2^{t'}/(n·2^F)`, the inverse of the decoding map
    /// (`c_k = (1/n)·Σ_j Re(z_j·ζ^{-e_jk})`). An empty `im` means zero imaginary parts.
    pub fn encode_map(&self, re: &[u128], im: &[u128]) -> Vec<u128> {
        let n = self.slots;
        let gap = (self.n_ring / (2 * n)) as u64;
        let mask = 2 * self.n_ring as u64 - 1;
        let tc: Vec<u128> = self.cos.iter().map(|&v| to_k(v)).collect();
        let ts: Vec<u128> = self.sin.iter().map(|&v| to_k(v)).collect();
        let mut out = Vec::with_capacity(2 * n);
        for k in 0..2 * n as u64 {
            let kg = k * gap;
            let mut acc = 0u128;
            for (j, &g) in self.rot.iter().enumerate() {
                let e = ((g * kg) & mask) as usize;
                acc = acc.wrapping_add(re[j].wrapping_mul(tc[e]));
                if !im.is_empty() {
                    acc = acc.wrapping_add(im[j].wrapping_mul(ts[e]));
                }
            }
            out.push(acc & K_MASK);
        }
        out
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
