//! Secure CKKS ↔ MPC conversion with complex packing (EncFormer §V-B, Algorithms 3 and 4,
//! Appendix C), sans-IO over [`crate::mpc::Channel`].
//!
//! Roles: **P0** holds the CKKS secret key (it decrypts masked ciphertexts and encrypts its
//! plaintext shares); **P1** holds the ciphertexts (the FHE evaluator). A ciphertext carries `n`
//! complex slots `x + i·y`, i.e. two real vectors; the MPC side holds `[[x]]`, `[[y]]` over
//! `Z_{2^ℓ}` at fixed-point scale `2^F`.
//!
//! # Π_C2M^ℂ ([`c2m_p1`], [`c2m_p0`])
//!
//! 1. P1 trims `⟨m⟩` to the boundary level `Q_conv` ([`C2mPlan::shortest_admissible`]: the
//!    paper's modulus trimming), re-randomizes it with a fresh `Enc_pk(0)` (circuit privacy
//!    of `c_1`, see [`c2m_mask`]), samples `r̂ ← R_{Q_conv}` uniformly (every coefficient,
//!    every prime) and sends `⟨m⟩ + r̂` (one frame per batch). Its plaintext share is `−r̂`.
//! 2. P0 decrypts: `m + r̂` (with `m = Δ·σ^{-1}(x+iy) + e`) is uniform in `R_{Q_conv}`,
//!    independent of `m` (one-time pad in the additive group `R_{Q_conv}`).
//! 3. Both read the `2n` coefficients of the slot subring (`Y = X^{N/2n}`) as shares mod
//!    `Q_conv` (CRT) and run, locally and with the same public integer maps,
//!    * stage 1: [`local_trunc`] by `2^{s_1}` (Field2Ring with truncation; P0's share is already
//!      uniform thanks to `r̂`) — integer shares of `c_k/2^{s_1}`, reduced mod `2^K`, `K = 123`;
//!    * stage 2: the canonical embedding restricted to the slots, as integer maps applied with
//!      wrapping arithmetic mod `2^K` (module homomorphisms: shares commute with them exactly;
//!      a floating-point FFT on shares would not): by default the two-level `O(n·√n)` map of
//!      [`FastDecode`] ([`C2mPlan::decode_inner`], a common re-randomization and local
//!      truncation, [`C2mPlan::decode_outer`]); when its budget does not close, the direct
//!      `2n × 2n` matrix [`C2mPlan::decode_map`] with twiddles
//!      `round(cos/sin(π e/N)·2^{F+s_1+s_2}/Δ)`;
//!    * stage 3: re-randomization by a common uniform `r ∈ Z_{2^K}` (P0 adds, P1 subtracts),
//!      [`local_trunc`] by `2^{s_2−k}` to scale `2^{F+k}`, reduced mod `2^ℓ`, then the exact
//!      round-to-nearest MPC truncation by `2^k`
//!      ([`crate::mpc::Party::trunc_round_exact`], one batch over all values of all
//!      ciphertexts; `k` = [`C2mPlan::round_bits`], 16 at EncFormer's ring). This is the only
//!      interaction of C2M besides the ciphertext frame.
//!
//! # Π_M2C^ℂ ([`m2c_p0`], [`m2c_p1`])
//!
//! Ring2Field lifts `[[x]], [[y]]` from `Z_{2^ℓ}` to `Z_{2^K}` exactly (one batched comparison,
//! [`crate::mpc::Party::ring_to_field`]). Each party applies [`M2cPlan::encode_map`] (inverse
//! embedding `c_k = (Δ/n)·Σ_j x_j cos(π e_jk/N) + y_j sin(π e_jk/N)` with twiddles scaled by
//! `2^{t'}`), re-randomizes with a common mask and truncates locally by `2^{t'}` to *integer*
//! shares of the plaintext coefficients, which it reduces modulo every prime of the output
//! level `Q_L` (any level: the integer shares are exact, so `Q_L` need not fit `Z_q`). P0
//! encrypts its plaintext share (secret-key, seeded: `c_1` travels as 32 bytes) and sends it;
//! P1 adds its own share: `⟨m⟩ = Enc(p_0) + p_1` encrypts `Δ·σ^{-1}(x+iy)`.
//!
//! # Bit budget (all checked by [`C2mPlan::new`] / [`M2cPlan::new`], typed errors otherwise)
//!
//! Notation: `n` slots, scale `Δ`, `|x_j|, |y_j| ≤ B_max = 2^b`, statistical security σ.
//! Parseval over the `2n` roots of `Y^{2n}+1` gives `|c_k| ≤ √2·B_max·Δ` and
//! `Σ_k |c_k| ≤ 2√n·B_max·Δ` for the subring coefficients.
//!
//! * C2M stage 1: `h_1 = ⌈log2(√2·B_max·Δ)⌉ + 1` (one bit of margin for CKKS noise);
//!   requires `log2 Q_conv ≥ h_1 + 1 + σ`. This is our form of EncFormer's trimming
//!   conditions `log2 q ≥ ℓ + σ + 1` and `q/2 > Δ·B_max`: here Field2Ring acts on the plaintext
//!   coefficients themselves (`|c_k| < 2^{h_1}`), not on `ℓ`-bit values, and it implies
//!   `q/2 > Δ·B_max`;
//!   failure `≤ 2^{h_1+1}/Q_conv` per coefficient; `s_1 = ⌊log2 Δ − log2 2n − F − 4 − e⌋⁺` so the
//!   stage-1 error (`< 1` per coefficient) costs `≤ 2n·2^{s_1+F}/Δ ≤ 2^{-4-e}` ulp, with the
//!   largest `e ≤ 6` whose budgets close without losing the two-level map or raising the
//!   failure probability past `max(2^{-30}, its e = 0 value)` (the stage-1 stochastic noise
//!   dominates C2M's `ε` in practice; `e = 0` at the Table VII example below).
//! * C2M stage 2 (direct map; the two-level map's budget is at [`FastDecode`]): twiddle
//!   rounding (`≤ ½` per entry) costs `≤ √n·B_max·Δ/2^{s_1+s_2}` ulp;
//!   `s_2 = max(⌈3 + ½log2 n + b + log2 Δ⌉ − s_1, log2 n + 4)` makes it `≤ 1/8 + 1/16`.
//!   Twiddle precision `t = F + s_1 + s_2 − log2 Δ ≤ 50`.
//! * C2M stage 3: `h_3 = b + F + s_2 + 1`, requires `K ≥ h_3 + 1 + σ`; failure
//!   `≤ 2^{h_3+1−K}`. (a) The local truncation by `2^{s_2−k}` (P0's share uniform: a
//!   *stochastic rounding*, see [`local_trunc`]) yields `v` at scale `2^{F+k}` with
//!   `|v/2^k − u| < 2^{-k}` ulp, where `u` is the decoded value at scale `2^F`; with
//!   `k = min(16, ℓ − 3 − b − F, s_2)`, `|v| ≤ (2^{b+F} + ¼)·2^k + 1 < 2^{ℓ−2}` (EncFormer:
//!   `2^{37} < 2^{41}`; plans with `b + F + 7 > ℓ` are refused). (b) The exact MPC rounding
//!   returns `round(v/2^k)` with no failure for `|v| < 2^{ℓ−2}` (known-MSB wrap bit + `k`-bit
//!   carry comparison). `u` is within the proved fixed-point error of the exact decode `x·2^F`
//!   of the decrypted plaintext (stage-1 truncation and twiddle rounding; bound `< 1/4` ulp,
//!   observed `< 10^{-3}`), so the output is within `1/2 + ε` of `x·2^F`,
//!   `ε = `[`C2mPlan::error_bound_ulp`] (which includes the `2^{-k}`); for fixed-point inputs
//!   `x = X·2^{-F}` (the paper's setting) it is exactly `X` whenever the CKKS error stays below
//!   `1/2 − ε` ulp (tests: every slot).
//! * M2C: `t' = ⌈log2(n·B_max·2^F/(e_max − 1))⌉⁺` with `e_max = Δ/(16·n·2^F)` so that the
//!   coefficient error (`< 1` truncation + `n·B_max·2^{F−t'}` twiddle rounding) keeps the slot
//!   error `≤ 2n·e·2^F/Δ ≤ 1/8` ulp; `h = ⌈log2(√2·B_max·Δ)⌉ + 1 + t'`, requires
//!   `K ≥ h + 1 + σ` and `log2 Q_L ≥ ⌈log2(√2·B_max·Δ)⌉ + 2`; failure `≤ 2^{h+1−K}` per
//!   coefficient.
//!
//! Example (N = 2^16, n = 2^15, Δ = 2^40, ℓ = 43, F = 13, σ = 40, B_max = 2^8): `h_1 = 50`,
//! `Q_conv` needs 91 bits, so trimming keeps `q_0·q_1` (100 bits); `s_1 = 7`; direct map:
//! `s_2 = 52`, `t = 32`, `h_3 = 74 ≤ 82`, per-ciphertext failure
//! `2n·(2^{51−100} + 2^{75−123}) ≈ 2^{-31.4}`; the two-level map (used) has `t_1 = 34`,
//! `h_I = 81 ≤ 82` and an extra `2n·2^{82−123}` (≈ 2^{-25}) of failure. A larger σ needs a
//! longer `Q_conv`, which `Z_q < 2^124` caps at two primes here; `B_max = 2^12` still fits the
//! direct map.
//!
//! # Cost
//!
//! Communication: C2M sends one uncompressed ciphertext at `Q_conv` per complex vector pair,
//! then runs the exact rounding of stage 3 on its `2n` real values: with IKNP and radix 4 a
//! 16-bit comparison plus 2 COTs, ≈ 410 bytes per real value (offline + online, both
//! directions; ≈ 27 MB for `n = 2^15`) and 7 rounds after the ciphertext frame (8 in all).
//! M2C sends one seeded ciphertext per pair plus Ring2Field of the `2n` real values: the
//! known-MSB variant ([`crate::mpc::Party::ring_to_field_known_msb`]; `|x| ≤ B_max·2^F <
//! 2^{ℓ-2}`), one `Z_{2^K}` COT per value, ≈ 31 bytes per real value and 2 rounds (2.1 MB for
//! `n = 2^15`; the comparison-based [`crate::mpc::Party::ring_to_field`] used before costs
//! ≈ 1.09 KB per value and 9 rounds, 71 MB). Local compute: the C2M decoding map is
//! `O(n·√n)` ([`FastDecode`]) when its budget closes, else `O(n²)`; the M2C encoding map is
//! the direct `O(n²)` matrix. A two-level M2C map does not fit the `2^123` budget at
//! `Δ = 2^40`: its outer stage acts on values carrying the intermediate scale and needs
//! ≈ 42-bit twiddles on top of `√2·B·Δ ≈ 2^49`; a three-level split or a wider ring is future
//! work. At `N = 2^16`, `n = 2^15` one complex C2M + M2C pair takes ≈ 40 s of compute, almost
//! all in the M2C map (`veil bench convert`; ≈ 0.05 s at `N = 2^10`).
//!
//! Measured at EncFormer's Table VII setting (`N = 2^16`, depth 8, `B_max = 2^8`), ciphertext
//! bytes per conversion pair: real 18.83 MB, complex 9.41 MB, complex + trimming 4.79 MB
//! (paper: 20.97, 10.49, 6.41); M2C ciphertexts are seeded (`c_1` as 32 bytes).
//!
//! # Security (semi-honest)
//!
//! P0 sees `(c_0 + r̂, c_1)` with `c_1` re-randomized by `Enc_pk(0)` (pseudorandom under
//! RLWE) and decrypts `m + r̂`, uniform in `R_{Q_conv}` and independent of `m`; every later step
//! of C2M is local except the exact rounding, a composition of a millionaires' comparison and
//! correlated OTs on additive shares (each party sees only OT messages and masked
//! corrections). In M2C, P1 sees Ring2Field transcripts (one COT per value: the correction is
//! masked by the OT pad) and `Enc_sk(p_0)`, semantically secure. Common masks are public to both parties and only serve to make P0's
//! share uniform for the wrap argument. Statistical failure as stated above.

mod plan;
mod protocol;

pub use plan::{
    local_trunc, BoundaryCfg, C2mPlan, FastDecode, M2cPlan, K_BITS, MAX_TWIDDLE_BITS,
    MIN_ROUND_BITS, ROUND_BITS, S1_EXTRA_BITS,
};
pub use protocol::{
    c2m_mask, c2m_p0, c2m_p1, complexify, decomplexify, m2c_p0, m2c_p1, ComplexShares, MaskedBatch,
    RunStats, TAG_C2M_CT, TAG_M2C_CT,
};

use core::fmt;

/// Errors of plan validation and of the non-protocol conversion steps.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConvertError {
    /// A CKKS-layer error.
    Ckks(crate::Error),
    /// An MPC-layer error.
    Mpc(crate::mpc::MpcError),
    /// The boundary modulus is too small: trimming to this level is refused.
    ModulusTooSmall {
        /// Level asked for.
        level: usize,
        /// `log2 Q_level`.
        log_q: f64,
        /// Bits required (`h_1 + 1 + σ`).
        needed: u32,
    },
    /// `Q_level ≥ 2^124`, beyond the `Z_q` arithmetic of [`crate::mpc::zq`]: trim further.
    ModulusTooLarge {
        /// Level asked for.
        level: usize,
        /// `log2 Q_level`.
        log_q: f64,
    },
    /// A ciphertext sits below the boundary level (modulus cannot be raised).
    LevelTooLow {
        /// The ciphertext's level.
        found: usize,
        /// The plan's boundary level.
        needed: usize,
    },
    /// The bit budget does not close; the message says which constraint.
    Budget(&'static str),
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertError::Ckks(e) => write!(f, "ckks: {e}"),
            ConvertError::Mpc(e) => write!(f, "mpc: {e}"),
            ConvertError::ModulusTooSmall {
                level,
                log_q,
                needed,
            } => write!(
                f,
                "boundary level {level} (log2 q = {log_q:.1}) is below the admissible {needed} bits"
            ),
            ConvertError::ModulusTooLarge { level, log_q } => write!(
                f,
                "boundary level {level} (log2 q = {log_q:.1}) exceeds the 2^124 Z_q limit"
            ),
            ConvertError::LevelTooLow { found, needed } => {
                write!(
                    f,
                    "ciphertext at level {found} below boundary level {needed}"
                )
            }
            ConvertError::Budget(s) => write!(f, "bit budget: {s}"),
        }
    }
}

impl core::error::Error for ConvertError {}

impl From<crate::Error> for ConvertError {
    fn from(e: crate::Error) -> Self {
        ConvertError::Ckks(e)
    }
}

impl From<crate::mpc::MpcError> for ConvertError {
    fn from(e: crate::mpc::MpcError) -> Self {
        ConvertError::Mpc(e)
    }
}
