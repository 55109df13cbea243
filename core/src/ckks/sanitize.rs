//! Output sanitization: what a server does to a ciphertext before it returns it to the owner of
//! the secret key, so that the decryption reveals the intended outputs and as little as possible
//! of the computation that made them (circuit privacy).
//!
//! [`Ckks::sanitize`] takes a relinearized ciphertext `ct` at level `ℓ`, scale `Δ`, and returns
//!
//! `ct' = mask ⊙ ct + Enc_pk(0) + (f, 0)`, with `f` uniform in `[−W, W]^N`,
//!
//! 1. **Mask** (optional, one level): a 0/1 plaintext product and a rescale zero the slots that
//!    are not outputs. It costs a level, so a caller whose last linear layer already writes
//!    zeros off its outputs (its weight diagonals and bias vanish there, as
//!    [`crate::cnn::Linear`]'s do) passes no mask and spends nothing.
//! 2. **Re-randomization**: `Enc_pk(0) = (⌊(b·u + e_0)/p_0⌉, ⌊(a·u + e_1)/p_0⌉)` with a fresh
//!    ternary `u` ([`Ckks::encrypt_pk`]) makes `c_1` a fresh RLWE sample, independent of the
//!    server's `c_1` (which is a function of its weights and the client's `c_1`).
//! 3. **Flood**: `f` is added to `c_0`.
//!
//! # The flooding bound
//!
//! Decrypting `ct` gives the phase `c_0 + c_1·s = Δ·m + e (mod Q_ℓ)`: the encoded outputs `m`
//! and the evaluation noise `e`, integers, which the key's owner reads exactly and which depend
//! on the server's weights, not only on `m`. Let `B` bound `‖e‖_∞` over the weight sets the
//! server wants to hide among (the **evaluation-noise bound**). The phase of `ct'` is
//! `Δ·m + e + e_pk + f` (`e_pk` the re-randomization's rounding, independent of everything).
//! For one coefficient, the statistical distance between `f_j` and `e_j + f_j`, `f_j` uniform on
//! the `2W + 1` integers of `[−W, W]`, is exactly `|e_j| / (2W + 1)`; over `N` independent
//! coefficients it is at most the sum:
//!
//! `SD(e + f, f) ≤ N·B / (2W + 1)`.
//!
//! So `W ≥ 2^(κ−1)·N·B` ([`Flood::for_distance`]) puts the sanitized phase within `2^−κ` of
//! `Δ·m + e_pk + f`, which depends on `m` alone (two weight sets with the same outputs: `2^(1−κ)`),
//! and the re-randomized `c_1` is pseudorandom under RLWE. With `κ = 40`
//! ([`STAT_SECURITY_BITS`]) that is the statistical flood.
//!
//! # What the flood costs
//!
//! `f` decodes, in each slot's real part, to a sum of `N` independent uniform terms: standard
//! deviation `σ = √(N·W(W+1)/6) / Δ` ([`Flood::slot_std`]), at most `N·W/Δ`
//! ([`Flood::slot_max`]). The evaluation noise itself decodes to about `√(N/2)·‖e‖_rms/Δ` per
//! slot, so with `W = 2^(κ−1)·N·B` the flood's error is `2^(κ−1)·N·(B/‖e‖_rms)/√3` times the
//! evaluation's: the outputs lose at least `κ − 1 + log2(N/√3)` bits of precision (`B ≥ ‖e‖_rms`),
//! 53.2 bits at `N = 2^15` and `κ = 40`. A network whose outputs carry fewer bits than that above
//! their noise cannot afford the statistical flood at those parameters; [`Flood::for_precision`]
//! then gives the widest flood a precision target allows, and [`Flood::distance_log2`] states the
//! distance it achieves, which may be `≥ 0`: no statistical guarantee.

use super::evaluator::Ckks;
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::math::sampling;
use crate::rlwe::{Ciphertext, PublicKey};
use alloc::vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

/// The statistical security parameter `κ` of a full flood: distance `2^−40`.
pub const STAT_SECURITY_BITS: u32 = 40;

/// The widest flood this module samples: `2^61` (coefficients stay below `2^62`).
pub const MAX_FLOOD_WIDTH: u64 = 1 << 61;

/// A noise flood: coefficients uniform in `[−W, W]`, added to `c_0` (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flood {
    width: u64,
}

impl Flood {
    /// A flood of width `W = width` (`0` floods nothing). At most [`MAX_FLOOD_WIDTH`].
    pub fn with_width(width: u64) -> Result<Self> {
        if width > MAX_FLOOD_WIDTH {
            return Err(Error::FloodTooWide {
                width_bits: libm::log2(width as f64),
                room_bits: libm::log2(MAX_FLOOD_WIDTH as f64),
            });
        }
        Ok(Self { width })
    }

    /// The statistical flood: `W = ⌈2^(κ−1)·N·B⌉`, so that the sanitized phase is within
    /// `2^−κ` of one that depends on the outputs alone, for an evaluation noise of
    /// `‖e‖_∞ ≤ noise_bound` (`B`) on a ring of degree `n` (`N`). Refused with
    /// [`Error::FloodTooWide`] beyond [`MAX_FLOOD_WIDTH`].
    pub fn for_distance(n: usize, noise_bound: f64, kappa: u32) -> Result<Self> {
        if !(noise_bound.is_finite() && noise_bound >= 0.0) || n == 0 {
            return Err(Error::InvalidParameters(
                "flood: the noise bound must be finite and non-negative",
            ));
        }
        let w = libm::ceil(libm::ldexp(n as f64 * noise_bound, kappa as i32 - 1));
        if w.is_nan() || w > MAX_FLOOD_WIDTH as f64 {
            return Err(Error::FloodTooWide {
                width_bits: libm::log2(w),
                room_bits: libm::log2(MAX_FLOOD_WIDTH as f64),
            });
        }
        Self::with_width(w as u64)
    }

    /// The widest flood whose decoded error stays below `tolerance` in every slot with `tails`
    /// standard deviations of margin (`tails·σ ≤ tolerance`, [`Flood::slot_std`]) at `scale`
    /// on a ring of degree `n`: `W ≈ tolerance·scale / (tails·√(N/6))`.
    pub fn for_precision(n: usize, scale: f64, tolerance: f64, tails: f64) -> Result<Self> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(scale) && ok(tolerance) && ok(tails)) || n == 0 {
            return Err(Error::InvalidParameters(
                "flood: scale, tolerance and tails must be finite and positive",
            ));
        }
        let sigma = tolerance / tails * scale;
        // σ·Δ = √(N·W(W+1)/6) ⇒ W(W+1) = 6·(σΔ)²/N; W = ⌊√(that + 1/4) − 1/2⌋.
        let prod = 6.0 * sigma * sigma / n as f64;
        let w = libm::floor(libm::sqrt(prod + 0.25) - 0.5).max(0.0);
        if w.is_nan() || w > MAX_FLOOD_WIDTH as f64 {
            return Err(Error::FloodTooWide {
                width_bits: libm::log2(w),
                room_bits: libm::log2(MAX_FLOOD_WIDTH as f64),
            });
        }
        Self::with_width(w as u64)
    }

    /// `W`.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// `log2` of the bound `N·B / (2W + 1)` on the statistical distance between the sanitized
    /// phase and one that depends on the outputs alone, for an evaluation noise of
    /// `‖e‖_∞ ≤ noise_bound`. A value `≥ 0` means no statistical guarantee.
    pub fn distance_log2(&self, n: usize, noise_bound: f64) -> f64 {
        libm::log2(n as f64 * noise_bound / (2.0 * self.width as f64 + 1.0))
    }

    /// The standard deviation of the flood's error in a slot's real (or imaginary) part, in
    /// value units at `scale`: `√(N·W(W+1)/6) / Δ`.
    pub fn slot_std(&self, n: usize, scale: f64) -> f64 {
        let w = self.width as f64;
        libm::sqrt(n as f64 * w * (w + 1.0) / 6.0) / scale
    }

    /// The worst-case error of the flood in one slot, in value units at `scale`: `N·W / Δ`.
    pub fn slot_max(&self, n: usize, scale: f64) -> f64 {
        n as f64 * self.width as f64 / scale
    }
}

impl<B: PolyBackend> Ckks<B> {
    /// Sanitizes `ct` before it is returned to the owner of the secret key: an optional 0/1 slot
    /// `mask` (one plaintext product and one rescale: a level), then `Enc_pk(0)` and the
    /// `flood` added (see the module docs for the bound). The result keeps `ct`'s scale and is
    /// at `ct`'s level, or one below with a mask.
    ///
    /// Errors: a ciphertext of degree ≠ 1 ([`Error::DegreeMismatch`]), a mask that is not 0/1
    /// or not one value per slot, a mask on a ciphertext at level 0
    /// ([`Error::LevelExhausted`]), a flood wider than a quarter of `Q_ℓ`
    /// ([`Error::FloodTooWide`]), a key of other parameters.
    pub fn sanitize(
        &self,
        pk: &PublicKey<B>,
        ct: &Ciphertext<B>,
        mask: Option<&[f64]>,
        flood: &Flood,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Ciphertext<B>> {
        if ct.degree() != 1 {
            return Err(Error::DegreeMismatch {
                found: ct.degree(),
                expected: 1,
            });
        }
        let mut out = match mask {
            None => self.clone_ct(ct),
            Some(m) => {
                if m.len() != ct.slots {
                    return Err(Error::SlotCount {
                        given: m.len(),
                        slots: ct.slots,
                    });
                }
                if m.iter().any(|&v| v != 0.0 && v != 1.0) {
                    return Err(Error::InvalidParameters(
                        "sanitize: the slot mask must be 0 or 1 in every slot",
                    ));
                }
                if ct.level == 0 {
                    return Err(Error::LevelExhausted);
                }
                let pt = self.encode_real(m, ct.slots, ct.level, self.rescale_prime(ct.level))?;
                let mut c = self.mul_plain(ct, &pt)?;
                self.rescale_assign(&mut c)?;
                c
            }
        };
        let room_bits = self.params().log_q_at(out.level) - 2.0;
        let width_bits = libm::log2(flood.width as f64);
        if flood.width > MAX_FLOOD_WIDTH || width_bits > room_bits {
            return Err(Error::FloodTooWide {
                width_bits,
                room_bits: room_bits.min(libm::log2(MAX_FLOOD_WIDTH as f64)),
            });
        }
        let zero = self.encode(&[], out.slots, out.level, out.scale)?;
        let mut fresh = self.encrypt_pk(pk, &zero, rng)?;
        if flood.width > 0 {
            let basis = Basis::q(out.level + 1);
            let mut f = Zeroizing::new(vec![0i64; self.params().n()]);
            sampling::uniform_signed(rng, flood.width, &mut f);
            let mut buf = self.rlwe().small_to_ntt(&f, basis);
            self.backend().add_assign(&mut fresh.polys[0], &buf, basis);
            self.backend().zeroize(&mut buf);
        }
        self.add_assign(&mut out, &fresh)?;
        out.seed = None;
        Ok(out)
    }
}
