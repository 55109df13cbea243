//! The M2C plan and its `O(n log n)` encoding map on shares: an integer fixed-point inverse
//! special FFT in the wide share ring `Z_{2^W}` ([`super::wide`]), with a local truncation after
//! every radix-2 stage. The bit budget and the error analysis are in [`M2cPlan`].

use super::plan::{
    check_scale, check_shape, coeff_bits, local_trunc, rot_group, trig_tables, BoundaryCfg, K_BITS,
    K_MASK, MAX_TWIDDLE_BITS,
};
use super::wide::{local_trunc_wide, rerandomize, CommonMasks, Wide, W_BITS};
use super::ConvertError;
use crate::params::CkksParams;
use alloc::vec::Vec;
use core::f64::consts::{PI, SQRT_2};
use zeroize::Zeroizing;

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

/// `(cos, sin)(2π·r/m)` for a power of two `m ≥ 8`, `r < m`, evaluated at an angle reduced to
/// `[0, π/4]` by the symmetries of the circle (exact integer reduction).
pub(super) fn unit_root(r: u64, m: u64) -> (f64, f64) {
    let quarter = m / 4;
    let (q, rr) = (r / quarter, r % quarter);
    let (c, s) = if 2 * rr <= quarter {
        let th = 2.0 * PI * rr as f64 / m as f64;
        (libm::cos(th), libm::sin(th))
    } else {
        let th = 2.0 * PI * (quarter - rr) as f64 / m as f64;
        (libm::sin(th), libm::cos(th))
    };
    match q {
        0 => (c, s),
        1 => (-s, c),
        2 => (-c, -s),
        _ => (s, -c),
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
///    uniform and [`local_trunc`] with shift 0 turns them into *integer* shares of `X` (exact
///    unless the wrap fails: probability `≤ 2^{h_0+1−K}`, `h_0 = b + F + 1`), sign-extended
///    into `Z_{2^W}`, `W = 192`; each party multiplies by `M_0 ≈ Δ·2^{g−F}` (exact when
///    `Δ·2^{g−F}` is an integer, e.g. `Δ = 2^40`): the working scale is `S = Δ·2^g`.
/// 2. *Stages.* `u = a + b` and `v = (a − b)·w̃` with `w̃ = round(2^t·w)` (componentwise) are
///    wrapping `Z_{2^W}` operations; after re-randomizing by fresh common masks, each party
///    truncates locally ([`local_trunc_wide`]) `u` by `2^1` and `v` by `2^{t+1}`.
/// 3. *Output.* After the bit reversal, the shares are reduced mod `2^K` (a ring homomorphism),
///    re-randomized, and truncated locally by `2^g` ([`local_trunc`]): integer shares of
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

/// Appends the `len/2` twiddles of one special-FFT stage of length `len ≥ 2`:
/// `round(2^t·w_j)` componentwise, `w_j = e^{±2πi·r_j/4len}`, `r_j = 5^j mod 4len` (the CKKS
/// encoder's `ksi` index), `+` for the forward transform (decoding), `−` for the inverse
/// (encoding). Each component is within `η_t` of `2^t·w_j` (see [`MAX_FAST_TWIDDLE_BITS`]).
pub(super) fn stage_twiddles(out: &mut Vec<[i64; 2]>, len: usize, t: u32, inverse: bool) {
    let two_t = libm::exp2(t as f64);
    let lenq = 4 * len as u64;
    let mut r = 1u64;
    for _ in 0..len / 2 {
        let (c, si) = unit_root(r, lenq);
        let si = libm::round(si * two_t) as i64;
        out.push([
            libm::round(c * two_t) as i64,
            if inverse { -si } else { si },
        ]);
        r = r * 5 % lenq;
    }
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
        let mut tw = Vec::with_capacity(slots.saturating_sub(1));
        let mut len = slots;
        while len >= 2 {
            stage_twiddles(&mut tw, len, t, true);
            len >>= 1;
        }
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

    /// The fast encoding map on one party's shares (identical code for both parties; `p0`
    /// selects the role in the local truncations): from shares mod `2^K` of `X = x·2^F` and
    /// `Y = y·2^F` (`n` each; an empty `im` means `y = 0`), returns integer shares of the `2n`
    /// plaintext coefficients `c_k ≈ Δ·σ^{-1}(x + iy)_k` (position `k·N/2n`), within
    /// [`M2cPlan::coeff_error_bound`] except with probability `2^f`, `f =` [`M2cPlan::failure_log2`].
    /// Both parties must draw `masks` from the same common stream.
    pub fn encode_shares(
        &self,
        re: &[u128],
        im: &[u128],
        p0: bool,
        masks: &mut CommonMasks,
    ) -> Result<Zeroizing<Vec<i128>>, ConvertError> {
        let n = self.slots;
        if re.len() != n || !(im.is_empty() || im.len() == n) {
            return Err(ConvertError::Budget(
                "encoding-map input length differs from the plan's slot count",
            ));
        }
        let mk = 1u128 << K_BITS;
        let lift = |x: u128, masks: &mut CommonMasks| -> Wide {
            let r = masks.bits(K_BITS);
            let x = if p0 {
                x.wrapping_add(r) & K_MASK
            } else {
                x.wrapping_sub(r) & K_MASK
            };
            Wide::from_i128(local_trunc(x, mk, p0, 0, self.h_lift))
                .wrapping_mul_i64(self.m0)
                .wrapping_shl(self.m0_shift)
        };
        let mut vr: Zeroizing<Vec<Wide>> = Zeroizing::new(Vec::with_capacity(n));
        let mut vi: Zeroizing<Vec<Wide>> = Zeroizing::new(Vec::with_capacity(n));
        for &x in re {
            vr.push(lift(x & K_MASK, masks));
        }
        if im.is_empty() {
            vi.resize(n, Wide::ZERO);
        } else {
            for &x in im {
                vi.push(lift(x & K_MASK, masks));
            }
        }
        self.stages(&mut vr, &mut vi, p0, masks);
        bit_reverse(&mut vr);
        bit_reverse(&mut vi);
        let mut out = Zeroizing::new(Vec::with_capacity(2 * n));
        for v in vr.iter().chain(vi.iter()) {
            let r = masks.bits(K_BITS);
            let x = if p0 {
                v.low_u128().wrapping_add(r) & K_MASK
            } else {
                v.low_u128().wrapping_sub(r) & K_MASK
            };
            out.push(local_trunc(x, mk, p0, self.g, self.h_f));
        }
        Ok(out)
    }

    /// The `log2 n` radix-2 stages in place (before the bit reversal).
    fn stages(&self, vr: &mut [Wide], vi: &mut [Wide], p0: bool, masks: &mut CommonMasks) {
        let n = vr.len();
        let (t, h_u, h_v) = (self.t, self.h_u, self.h_v);
        let mut len = n;
        let mut at = 0;
        while len >= 2 {
            let lenh = len / 2;
            let tw = &self.tw[at..at + lenh];
            at += lenh;
            for i in (0..n).step_by(len) {
                for (j, w) in tw.iter().enumerate() {
                    let (p, q) = (i + j, i + j + lenh);
                    let ((ur, ui), (dr, di)) = butterfly((vr[p], vi[p]), (vr[q], vi[q]), *w);
                    let mut tr = |x: Wide, s: u32, h: u32| {
                        local_trunc_wide(rerandomize(x, masks.wide(), p0), p0, s, h)
                    };
                    vr[p] = tr(ur, 1, h_u);
                    vi[p] = tr(ui, 1, h_u);
                    vr[q] = tr(dr, t + 1, h_v);
                    vi[q] = tr(di, t + 1, h_v);
                }
            }
            len = lenh;
        }
    }

    /// The direct `O(n²)` encoding map (reference only; the protocol uses
    /// [`M2cPlan::encode_shares`]) on one party's share, modulo `2^K`: coefficient `k < 2n` is
    /// `Σ_j x_j·round(cos(π·e_jk/N)·S) + y_j·round(sin(π·e_jk/N)·S)` with `S = Δ·2^{t'}/(n·2^F)`,
    /// `e_jk = 5^j·k·N/2n mod 2N`, `t'` = [`M2cPlan::direct_twiddle_bits`]. A `Z_{2^K}`-module
    /// homomorphism; an empty `im` means zero imaginary parts. A budget error when `t'` does not
    /// exist.
    pub fn encode_map(&self, re: &[u128], im: &[u128]) -> Result<Vec<u128>, ConvertError> {
        let t = self.t_direct.ok_or(ConvertError::Budget(
            "the direct encoding map's 2^K budget does not close",
        ))?;
        let n = self.slots;
        if re.len() != n || !(im.is_empty() || im.len() == n) {
            return Err(ConvertError::Budget(
                "encoding-map input length differs from the plan's slot count",
            ));
        }
        let f = self.cfg.ring.frac as f64;
        let twiddle_log = libm::log2(self.scale) + t as f64 - libm::log2(n as f64) - f;
        let (cos, sin) = trig_tables(self.n_ring, libm::exp2(twiddle_log));
        let rot = rot_group(self.n_ring, n);
        let gap = (self.n_ring / (2 * n)) as u64;
        let mask = 2 * self.n_ring as u64 - 1;
        let to_k = |v: i64| (v as i128 as u128) & K_MASK;
        let mut out = Vec::with_capacity(2 * n);
        for k in 0..2 * n as u64 {
            let kg = k * gap;
            let mut acc = 0u128;
            for (j, &g) in rot.iter().enumerate() {
                let e = ((g * kg) & mask) as usize;
                acc = acc.wrapping_add(re[j].wrapping_mul(to_k(cos[e])));
                if !im.is_empty() {
                    acc = acc.wrapping_add(im[j].wrapping_mul(to_k(sin[e])));
                }
            }
            out.push(acc & K_MASK);
        }
        Ok(out)
    }
}

/// The linear part of one butterfly on shares (wrapping, exact mod `2^W`): `(a + b, (a − b)·w)`
/// for complex `a = (re, im)`, `b`, and the integer twiddle `w = [cos, sin]`.
#[inline]
pub(crate) fn butterfly(
    a: (Wide, Wide),
    b: (Wide, Wide),
    w: [i64; 2],
) -> ((Wide, Wide), (Wide, Wide)) {
    let u = (a.0.wrapping_add(b.0), a.1.wrapping_add(b.1));
    let v = cmul((a.0.wrapping_sub(b.0), a.1.wrapping_sub(b.1)), w);
    (u, v)
}

/// The complex product `d·w` of a share `d = (re, im)` by a public integer twiddle
/// `w = [cos, sin]` (wrapping, exact mod `2^W`): four products of a wide share by an `i64`.
#[inline]
pub(super) fn cmul(d: (Wide, Wide), w: [i64; 2]) -> (Wide, Wide) {
    (
        d.0.wrapping_mul_i64(w[0])
            .wrapping_sub(d.1.wrapping_mul_i64(w[1])),
        d.0.wrapping_mul_i64(w[1])
            .wrapping_add(d.1.wrapping_mul_i64(w[0])),
    )
}

/// The special FFT's bit-reversal permutation (as in the CKKS encoder).
pub(super) fn bit_reverse<T>(v: &mut [T]) {
    let n = v.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j ^= bit;
        if i < j {
            v.swap(i, j);
        }
    }
}

/// The old direct map's budget: `t' = ⌈log2(n·B·2^F/(e_max − 1))⌉⁺` with
/// `e_max = Δ/(16·n·2^F)`, `h = ⌈log2(√2·B·Δ)⌉ + 1 + t'`, `K ≥ h + 1 + σ`, twiddles `≤ 2^50`.
fn direct_budget(slots: usize, log_delta: f64, cfg: BoundaryCfg) -> Option<u32> {
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
    use crate::params;
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    fn rnd(rng: &mut ChaCha20Rng) -> Wide {
        Wide([rng.next_u64(), rng.next_u64(), rng.next_u64()])
    }

    /// The butterfly is exactly homomorphic mod `2^W`; with re-randomization and local
    /// truncation the reconstructed outputs are the truncated exact outputs `+{0, 1}`.
    #[test]
    fn butterfly_commutes_with_sharing() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut m0 = CommonMasks::from_seed([7; 16]);
        let mut m1 = CommonMasks::from_seed([7; 16]);
        let (t, h_u, h_v) = (43u32, 51u32, 94u32);
        for _ in 0..2000 {
            let val =
                |rng: &mut ChaCha20Rng| Wide::from_i128((rng.next_u64() as i64 >> 15) as i128);
            let (a, b) = (
                (val(&mut rng), val(&mut rng)),
                (val(&mut rng), val(&mut rng)),
            );
            let (a0, b0) = (
                (rnd(&mut rng), rnd(&mut rng)),
                (rnd(&mut rng), rnd(&mut rng)),
            );
            let a1 = (a.0.wrapping_sub(a0.0), a.1.wrapping_sub(a0.1));
            let b1 = (b.0.wrapping_sub(b0.0), b.1.wrapping_sub(b0.1));
            let w = [
                (rng.next_u64() >> 20) as i64 - (1 << 43),
                (rng.next_u64() >> 20) as i64 - (1 << 43),
            ];
            let (u, v) = butterfly(a, b, w);
            let (u0, v0) = butterfly(a0, b0, w);
            let (u1, v1) = butterfly(a1, b1, w);
            for (x, (x0, x1)) in [
                (u.0, (u0.0, u1.0)),
                (u.1, (u0.1, u1.1)),
                (v.0, (v0.0, v1.0)),
                (v.1, (v0.1, v1.1)),
            ] {
                assert_eq!(x0.wrapping_add(x1), x);
            }
            for (x, (x0, x1), s, h) in
                [(u.0, (u0.0, u1.0), 1, h_u), (v.1, (v0.1, v1.1), t + 1, h_v)]
            {
                let y0 = local_trunc_wide(rerandomize(x0, m0.wide(), true), true, s, h);
                let y1 = local_trunc_wide(rerandomize(x1, m1.wide(), false), false, s, h);
                let got = y0.wrapping_add(y1).to_i128().unwrap();
                let want = x.to_i128().unwrap().div_euclid(1i128 << s);
                assert!(got == want || got == want + 1);
            }
        }
    }

    #[test]
    fn table_vii_budget() {
        let p = params::ckks_128_custom(16, 8, 3).validate().unwrap();
        let m = M2cPlan::new(
            &p,
            8,
            1 << 15,
            (1u64 << 40) as f64,
            BoundaryCfg::encformer(8),
        )
        .unwrap();
        std::println!(
            "g {} t {} bits {:?} err {} ulp coeff err {} failure 2^{}",
            m.guard_bits(),
            m.twiddle_bits(),
            m.value_bits(),
            m.error_bound_ulp(),
            m.coeff_error_bound(),
            m.failure_log2()
        );
        assert_eq!((m.guard_bits(), m.twiddle_bits()), (0, 44));
        assert_eq!(m.value_bits(), (22, 51, 95, 50));
        assert_eq!((m.m0, m.m0_shift), (1 << 27, 0));
        assert!(m.error_bound_ulp() < 0.02, "{}", m.error_bound_ulp());
        assert!(m.failure_log2() < -55.0, "{}", m.failure_log2());
        assert_eq!(m.tw.len(), (1 << 15) - 1);
        // The largest B_max the fast map accepts here (the twiddle precision runs out first).
        let ok = |b: u32| {
            M2cPlan::new(
                &p,
                8,
                1 << 15,
                (1u64 << 40) as f64,
                BoundaryCfg::encformer(b),
            )
        };
        let max_b = (8..28).take_while(|&b| ok(b).is_ok()).last().unwrap();
        let mb = ok(max_b).unwrap();
        std::println!(
            "max log2 B_max {max_b}: t {} bits {:?} err {} failure 2^{}",
            mb.twiddle_bits(),
            mb.value_bits(),
            mb.error_bound_ulp(),
            mb.failure_log2()
        );
        assert_eq!(max_b, 14);
        assert!(matches!(ok(max_b + 1), Err(ConvertError::Budget(_))));
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
