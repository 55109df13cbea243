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
//!      uniform thanks to `r̂`) — *integer* shares of `c_k/2^{s_1}` (stochastically rounded;
//!      `|share| < 2^{124}`, their sum over `Z` is the value), sign-extended into the wide ring
//!      `Z_{2^W}`, `W = 192` ([`Wide`]; exact, no extra failure) and multiplied by the public
//!      `μ ≈ 2^{F+s_1+s_2}/Δ` (exact for power-of-two `Δ`);
//!    * stage 2: the CKKS decoder's forward special FFT restricted to the slot subring
//!      ([`C2mPlan::decode_shares`]): the encoder's bit reversal, then `log2 n` integer radix-2
//!      stages `(a, b) ↦ (a + p, a − p)`, `p = b·round(2^t·w)` in wrapping arithmetic mod `2^W`
//!      (module homomorphisms: shares commute with them exactly; a floating-point FFT on
//!      shares would not), each component of `p` re-randomized by a fresh common mask and
//!      truncated locally by `2^t` ([`local_trunc_wide`]) — shares of the slots at scale
//!      `2^{F+s_2}` (the forward transform has no `1/n`: the proved per-value bound grows by
//!      `√2` per stage by Parseval, errors by `2`; the budget carries both, see below);
//!    * stage 3: re-randomization by a common mask, [`local_trunc_wide`] by `2^{s_2−k}` to scale
//!      `2^{F+k}` (in `Z_{2^W}`), reduced mod `2^ℓ`, then the exact round-to-nearest MPC
//!      truncation by `2^k` ([`crate::mpc::Party::trunc_round_exact`], one batch over all
//!      values of all ciphertexts; `k` = [`C2mPlan::round_bits`], 16 at EncFormer's ring). This
//!      is the only interaction of C2M besides the ciphertext frame. A
//!      [`C2mPlan::local_rounding`] plan (`k = 0`, EncFormer's choice, used by the Transformer
//!      pipeline) stops at the local truncation: within `ε + 1` ulp instead of `½ + ε`, and no
//!      interaction at all beyond the ciphertext frame.
//!
//!    The common masks of stages 2 and 3 come from one common seed per batch ([`CommonMasks`]).
//!    The direct `O(n²)` matrix ([`C2mPlan::decode_map`], mod `2^K`) is kept as a test
//!    reference only.
//!
//! # Π_M2C^ℂ ([`m2c_p0`], [`m2c_p1`])
//!
//! Ring2Field lifts `[[x]], [[y]]` from `Z_{2^ℓ}` to `Z_{2^K}` exactly (one batched comparison,
//! [`crate::mpc::Party::ring_to_field`]). Each party then runs the fast encoding map
//! [`M2cPlan::encode_shares`] on its own shares, with common masks drawn from one common seed
//! per batch ([`CommonMasks`]):
//! * lift: common re-randomization and [`local_trunc`] with shift 0 give *integer* shares of
//!   `X = x·2^F`, sign-extended into the wide ring `Z_{2^W}`, `W = 192` ([`Wide`]), and
//!   multiplied by `M_0 = Δ·2^{g−F}` (working scale `S = Δ·2^g`);
//! * the CKKS encoder's inverse special FFT restricted to the slot subring, as `log2 n` integer
//!   radix-2 stages: butterflies `(a + b, (a − b)·round(2^t·w))` in wrapping arithmetic mod
//!   `2^W` (module homomorphisms: shares commute with them exactly; a floating-point FFT on
//!   shares would not), each output re-randomized by a fresh common mask and truncated locally
//!   ([`local_trunc_wide`]) by `2` (sums) or `2^{t+1}` (twiddled differences); the halvings
//!   supply the `1/n`; then the encoder's bit reversal;
//! * reduction mod `2^K` (a ring homomorphism), common re-randomization and [`local_trunc`] by
//!   `2^g`: integer shares of the plaintext coefficients `c_k ≈ Δ·σ^{-1}(x+iy)_k`, which each
//!   party reduces modulo every prime of the output level `Q_L` (any level: the integer shares
//!   are exact, so `Q_L` need not fit `Z_q`).
//!
//! P0 encrypts its plaintext share (secret-key, seeded: `c_1` travels as 32 bytes) and sends
//! it; P1 adds its own share: `⟨m⟩ = Enc(p_0) + p_1` encrypts `Δ·σ^{-1}(x+iy)`. The direct
//! `O(n²)` matrix ([`M2cPlan::encode_map`], mod `2^K`) is kept as a test reference only.
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
//!   largest `e ≤ 6` whose budgets close without raising the failure probability past
//!   `1.01·max(2^{-30}, its e = 0 value)` (`e = 6` at the Table VII example below). The lift
//!   into `Z_{2^W}` is exact: the stage-1 outputs are integer shares.
//! * C2M stage 2 (fast map; proofs at [`C2mPlan::decode_shares`]): each stage block of length
//!   `m` is `√m` times a unitary map (it evaluates at all roots of `Y^m = i`), so with
//!   `R = μ·(√2·B'·Δ/2^{s_1} + √(2n))` (`B' = B_max + 2^{-F}`, Parseval plus the stage-1
//!   rounding) the exact values after stage `s` are `≤ M_s = 2^{s/2}·R`; an error `ε_s` made
//!   at stage `s` moves each slot by `≤ 2^{L−s}·ε_s` (`L = log2 n`),
//!   `ε_s = √2 + √2·η_t·(M_{s−1} + E_{s−1})/2^t`, `E_s = 2E_{s−1} + ε_s`. The slot error in
//!   ulps of `2^{-F}` is at most
//!   `2n·2^{s_1+F}/Δ` (stage 1)
//!   `+ (n−1)·√2/2^{s_2}` (stage truncations, `≤ 1/64`: picks `s_2 ≥ 16`, with `μ` an integer
//!   or its rounding `≤ 1/64`)
//!   `+ Σ_s 2^{L−s}·√2·η_t·(M_{s−1} + E_{s−1})/2^{t+s_2}` (twiddles, `≤ 1/64`: picks `t ≤ 52`)
//!   `+ (√2·B'·2^F + 2n·2^{s_1+F}/Δ)·|μ̃ − μ|/μ` (input scaling, zero for power-of-two `Δ`);
//!   the plan is refused above `1/4`. Bits: products before the truncation of stage `s`
//!   `|p| < 2^{h_s}`, `h_s = ⌈log2((M_{s−1} + E_{s−1})·(2^t + √2·η_t))⌉ + 1`, requires
//!   `W ≥ h_s + 1 + σ`; failure `≤ n·2^{h_s+1−W}` per stage.
//! * C2M stage 3: `h_3 = b + F + s_2 + 1`, requires `W ≥ h_3 + 1 + σ`; failure
//!   `≤ 2^{h_3+1−W}` per value. (a) The local truncation by `2^{s_2−k}` (P0's share uniform: a
//!   *stochastic rounding*, see [`local_trunc_wide`]) yields `v` at scale `2^{F+k}` with
//!   `|v/2^k − u| < 2^{-k}` ulp, where `u` is the decoded value at scale `2^F`; with
//!   `k = min(16, ℓ − 3 − b − F, s_2)`, `|v| ≤ (2^{b+F} + 1 + ε)·2^k + 1 < 2^{ℓ−2}` (EncFormer:
//!   `2^{37} < 2^{41}`; plans with `b + F + 7 > ℓ` are refused). (b) The exact MPC rounding
//!   returns `round(v/2^k)` with no failure for `|v| < 2^{ℓ−2}` (known-MSB wrap bit + `k`-bit
//!   carry comparison). `u` is within the proved fixed-point error of the exact decode `x·2^F`
//!   of the decrypted plaintext (stages 1 and 2 above), so the output is within `1/2 + ε` of
//!   `x·2^F`, `ε = `[`C2mPlan::error_bound_ulp`] (which includes the `2^{-k}`); for fixed-point
//!   inputs `x = X·2^{-F}` (the paper's setting) it is exactly `X` whenever the CKKS error
//!   stays below `1/2 − ε` ulp (tests: every slot). Failure per ciphertext
//!   `≤ 2n·2^{h_1+1}/Q_conv + Σ_s n·2^{h_s+1−W} + 2n·2^{h_3+1−W}` ([`C2mPlan::failure_log2`]).
//! * M2C (fast map; proofs at [`M2cPlan`]): working scale `S = Δ·2^g`, twiddles `round(2^t·w)`
//!   with per-component error `η_t = ½ + 2^{t−51}` (`t ≤ 52`), `M ≈ √2·B_max·S` a proved bound
//!   on every working value. An error `ε` per value after stage `s` moves each slot by
//!   `≤ 2^s·ε/S` (the inverse of `s` exact stages has `ℓ∞` norm `2^s`), so the slot error is at
//!   most (ulps of `2^{-F}`, real and imaginary parts each)
//!   `√2·n·2^F/Δ` (final rounding to integers; `> 1/16` refuses the scale)
//!   `+ (2n−2)·√2·2^F/S` (stage truncations, `≤ 1/64`: picks `g`)
//!   `+ (2n−2)·√2·M·η_t·2^{F−t}/S` (twiddle rounding, `≤ 1/64`: picks `t`)
//!   `+ √2·B_max·2^F·|M_0 − Δ2^{g−F}|/(Δ2^{g−F})` (input scaling, zero when `Δ·2^{g−F}` is an
//!   integer, else `≤ 1/64`): `< 1/8` in all ([`M2cPlan::error_bound_ulp`]). Bits: lift
//!   `h_0 = b + F + 1` (exact unless the wrap fails: probability `≤ 2^{h_0+1−K}`, i.e. about
//!   `|x|·2^F/2^K`), stage sums `h_u = ⌈log2 2M⌉ + 1`, twiddled differences
//!   `h_v = ⌈log2(2M·(2^t + √2·η_t))⌉ + 1`, final `h_f = ⌈log2 M⌉ + 1`; requires
//!   `W ≥ h_v + 1 + σ`, `K ≥ h_f + 1 + σ` and `log2 Q_L ≥ ⌈log2(√2·B_max·Δ)⌉ + 2`. Failure per
//!   ciphertext `≤ 2n·2^{h_0+1−K} + n·log2(n)·(2^{h_u+1−W} + 2^{h_v+1−W}) + 2n·2^{h_f+1−K}`
//!   ([`M2cPlan::failure_log2`]).
//!
//! Example (N = 2^16, n = 2^15, Δ = 2^40, ℓ = 43, F = 13, σ = 40, B_max = 2^8): `h_1 = 50`,
//! `Q_conv` needs 91 bits, so trimming keeps `q_0·q_1` (100 bits); `s_1 = 1` (`e = 6`),
//! `s_2 = 26`, `μ = 1` (exact), `t = 43`; stage bits `h_s = 92, 93, 93, …, 99, 99`
//! (`len = 2 … 2^15`, `≤ W − 41 = 151`: 52 guard bits), `h_3 = 48`; slot error
//! `≤ 0.0150` ulp (stage 1 `2^{-10}`, stage truncations `2^{-10.5}`, twiddles `≈ 2^{-6.2}`,
//! rounding input `2^{-16}`); failure per ciphertext `2n·2^{51−100} ≈ 2^{-33.0}` (stage 1; the
//! stages add `≈ 2^{-73}`, stage 3 `2^{-127}`). The former two-level `O(n·√n)` map in
//! `Z_{2^K}` needed `h_I = 81 ≤ 82` bits, proved `≈ 0.132` ulp and failed with `≈ 2^{-25}`
//! per ciphertext. A larger σ needs a longer `Q_conv`, which `Z_q < 2^124` caps at two primes
//! here; `B_max = 2^12` fits (`t = 47`, `≤ 0.0166` ulp, failure `2^{-29}` from stage 1).
//!
//! M2C at the same setting: `g = 0` (`M_0 = 2^27`, exact), `t = 44`, `h_0 = 22`, `h_u = 51`,
//! `h_v = 95 ≤ W − 41 = 151`, `h_f = 50 ≤ K − 41 = 82`; slot error `≤ 0.0090` ulp (final
//! rounding `2^{-11.5}`, stage truncations `2^{-10.5}`, twiddles `≈ 2^{-7}`), coefficient error
//! `≤ 266` (at scale `Δ`); failure per ciphertext `≈ 2^{16+51−123} = 2^{-56}` (the final
//! truncation mod `2^K`; stages contribute `2^{-77}`, the lift `2^{-84}`). The fast map accepts
//! `B_max ≤ 2^14` here (`t = 50`, `h_v = 107`, failure `2^{-50}`; the twiddle precision runs out
//! first), where the former direct map in `Z_{2^K}` stopped at `B_max = 2^10`.
//!
//! # Cost
//!
//! Communication: C2M sends one uncompressed ciphertext at `Q_conv` per complex vector pair,
//! then runs the exact rounding of stage 3 on its `2n` real values: with IKNP and radix 4 a
//! 16-bit comparison plus 2 COTs, ≈ 410 bytes per real value (offline + online, both
//! directions; ≈ 27 MB for `n = 2^15`) and 7 rounds after the ciphertext frame (8 in all).
//! M2C sends one seeded ciphertext per pair plus Ring2Field of the `2n` real values (or, for an
//! input given by its distinct values, [`SlotShares`], of those values only: the lifted shares
//! are copied to the slots that take them, and public zeros cost nothing): the known-MSB variant ([`crate::mpc::Party::ring_to_field_known_msb`]; `|x| ≤ B_max·2^F <
//! 2^{ℓ-2}`), one `Z_{2^K}` COT per value, ≈ 31 bytes per real value and 2 rounds (2.1 MB for
//! `n = 2^15`; the comparison-based [`crate::mpc::Party::ring_to_field`] used before costs
//! ≈ 1.09 KB per value and 9 rounds, 71 MB).
//!
//! Local compute: both maps are `O(n log n)` special FFTs in `Z_{2^192}`: `log2 n` stages of
//! `n/2` butterflies (four products of a 192-bit share by a 64-bit twiddle each) and, per
//! stage, `2n` (M2C: sums and differences) or `n` (C2M: the twiddled products) re-randomized
//! local truncations, masks from one AES-CTR stream per batch. (In `Z_{2^K}` neither map fit
//! at `Δ = 2^40` with a truncation per stage to spare; the C2M two-level `O(n·√n)` map used
//! before left one bit of the `2^K` budget and cost ≈ 0.57 s per pair. The wide ring holds
//! `2^{h_v} = 2^{95}` (M2C) and `2^{h_s} ≤ 2^{99}` (C2M) with ≥ 52 bits to spare.) At
//! `N = 2^16`, `n = 2^15` the C2M map takes ≈ 0.06 s per ciphertext (both parties, stages 1
//! and 2; `fast_decoding_map_matches_the_decoder` in the conversion tests) and the M2C map
//! ≈ 0.1 s per pair, both parties (the former direct `O(n²)` M2C map: ≈ 20 s per party,
//! `m2c_map_timing_table_vii` in the conversion tests, run with `--ignored`).
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
//! masked by the OT pad) and `Enc_sk(p_0)`, semantically secure. Common masks are public to both parties. They make P0's share
//! uniform for the wrap argument, and they make the slots independent: a [`SlotShares`] input
//! copies one lifted share to several slots, and the encoding map adds a fresh common mask to
//! every slot before its local truncation, so each slot's wrap and rounding events are those of
//! an independently shared value. Statistical failure as stated above.

// Layering, bottom up: `wide` (share arithmetic in Z_2^W) → `budget` (ring widths, the boundary
// promise, local truncation, sizing) → `plan` (validated C2M / M2C plans) → `decode` / `encode`
// (the maps on shares) → `protocol` (the two-party runs).
mod budget;
mod decode;
mod encode;
mod plan;
mod protocol;
mod wide;

pub use budget::{
    local_trunc, BoundaryCfg, K_BITS, MAX_FAST_TWIDDLE_BITS, MAX_TWIDDLE_BITS, MIN_ROUND_BITS,
    ROUND_BITS, S1_EXTRA_BITS,
};
pub use decode::WideSlots;
pub use plan::{C2mPlan, M2cPlan};
pub use protocol::{
    c2m_mask, c2m_p0, c2m_p1, complexify, decomplexify, m2c_p0, m2c_p0_slots, m2c_p1, m2c_p1_slots,
    ComplexShares, MaskedBatch, ProtocolError, RunStats, SlotShares, TAG_C2M_CT, TAG_M2C_CT,
};
pub(crate) use protocol::{m2c_p0_in, m2c_p1_in, M2cInputs};
pub use wide::{local_trunc_wide, rerandomize, CommonMasks, Wide, W_BITS};

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
