//! LayerNorm over rows in two-party MPC: the accurate form
//! `y = γ ⊙ (x − μ)/√(var + ε) + β` and EncFormer's surrogate MBLN
//! `y = γ ⊙ (x − μ)/(l·R_d) + β` (§IV-B2). `γ` and `β` are the checkpoint's, held by
//! the server, Party P0 ([`LnAffine`]); P1 passes `None` (its argument is ignored). If
//! P0 passes `None` too, the block applies no affine map (`γ = 1`, `β = 0`): the protocol
//! is the same either way, so P1 cannot tell.
//!
//! # The exact mean, without a division
//!
//! With `Σ = Σ_c x_c` (local), `D = cols·x − Σ = cols·(x − μ)` is exact and local. Let
//! `t = ⌈log2 cols⌉` and `ρ = cols/2^t ∈ (1/2, 1]`: one faithful truncation of `D` by
//! `t` (plus the wanted extra bits) gives `ρ·(x − μ)` with no rounded constant at all.
//! The scale `ρ` is common to every entry, and LayerNorm is invariant under a common
//! scale of `x − μ`, so it cancels exactly (it only rescales `ε`, which is added as
//! `ρ²·cols·ε`).
//!
//! # Accurate ([`LnKind::Accurate`])
//!
//! 1. `[d_z, d_h] = ⌊[32·D, D] / 2^{t+3}⌉` (one batched truncation): `d_z = ρ(x − μ)` at
//!    15 fractional bits (for the output), `d_h` the same at 10 bits (for the square).
//! 2. `S = Σ_c ⌊d_h² / 2^{t−2}⌉` ([`Party::square_fx`], the bounded squaring:
//!    `|d_h| ≤ 2^{20} + 1 < 2^{21}` on the valid range, 25 COTs per element, then the
//!    local row sum): `S = ρ²·cols·var` at `F_S = 22 − t` bits, plus the mean bias of the
//!    faithful truncations (`cols/2` ulps, added back) and `ρ²·cols·ε`.
//! 3. `g = √cols/√S` by [`Rsqrt`] (comparisons against powers of two, Newton; one value
//!    per row) with `S` clamped to `[2^{11}, 2^{38}]` (integers at `F_S`): `g = 1/(ρ√(var+ε))`
//!    at `F_g = 25 − ⌈log2(√cols + 1)⌉` bits.
//! 4. `z = d_z·g` ([`Party::mul_rows_fx`], `2ℓ` COTs per row) at 14 bits; `|z| ≤ √cols`.
//! 5. `y = z·γ` ([`Party::mul_owned_fx`], `ℓ` COTs per column, `γ` at 14 bits) at 13
//!    bits, then `+ β` at P0 (local).
//!
//! Without an elementwise affine ([`LayerNorm::affine`] `= false`, public), step 4
//! truncates straight to 13 bits and step 5 is skipped. The bounds below hold with
//! `γ = 1`, `β = 0` (the path has one rounding fewer).
//!
//! **Range.** Valid input `|x| ≤ 2^9` (2.3× MiniLM's 224; with the input shift `k`
//! below, `|x| ≤ 2^{9+k}`), `cols ≤ 2^{12}`,
//! `|γ| ≤ 2^6`. Then no value on the path wraps: `|32·D| ≤ 2^{40}`, `d_h² ≤ 2^{40}`,
//! `S ≤ 2^{40}`. The variance is accurate on `[var_lo, var_hi]` with
//! `var_lo = 2^{−11}/ρ³ ≤ 2^{−8}` and `var_hi = 2^{16}/ρ³ ≥ 2^{16}`; outside it
//! saturates (the normalizer is clamped, never wraps): a row with `var < var_lo`
//! (e.g. constant rows, variance `≤ ε`) gives `β + γ(x − μ)/√var_lo` — `β` up to the
//! `≤ 1` ulp of `d_z` times `g ≤ 2^{5.5}`, i.e. `≤ 2^{−9.5}` — and a row with
//! `var > var_hi` gives `β + γ(x − μ)/√var_hi`. Inputs beyond `2^9` are outside the
//! block's domain (`d_h²` of an entry with `|x − μ| ≥ 2^{10.5}` wraps).
//!
//! **Error.** `ρ(x − μ)` at 15 bits (`2^{−16}`, relative to the row scale
//! `2^{−16}/σ`); `d_h` at 10 bits moves `S` by a relative `≤ 4/(√cols·σ_h)` (its
//! faithful roundings are independent; 4 standard deviations, `σ_h = 2^{10}ρσ`); the
//! squares' rounding is random and unbiased after the correction; [`Rsqrt`] gives `g`
//! within `g·2^{−15} + 2` ulps at `F_g` (so a relative `2^{−15} + 2^{1−F_g}·ρσ`: the
//! absolute ulps dominate for rows of large `σ`, e.g. `σ ≳ 2^7` at 64 columns); `z`
//! rounded at 14 bits; `γ` rounded at 14 bits; 2 faithful truncations. In all, for
//! `var ≥ 2^{−2}` and the stated `var` range:
//!
//! `|y − y_exact| ≤ 2^{−12} + |γ|·2^{−13}·(1 + |z| + 1/σ + 16|z|/(√cols·ρσ) + |z|·2^{14−F_g}·ρσ)`;
//!
//! the tests assert it elementwise.
//!
//! Against [`LayerNorm::reference`] (exact rounding of every step; the protocol's
//! truncations are faithful) the protocol is within
//! `⌈2 + |γ|·(1 + |z|/8 + 1/(4ρσ) + 16|z|/(√cols·ρσ) + |z|·2^{15−F_g}·ρσ)⌉` ulps for
//! `var ≥ 2^{−2}`: `d_z`'s one ulp times `g = 1/(ρσ)`, `d_h`'s one ulp in `S` (as
//! above), [`Rsqrt`]'s `4 + g·2^{−16}` ulps of its reference times `z`, the last two
//! truncations (the bias of the squares' truncations is corrected in the protocol
//! only, so `S` differs by `≈ √cols` ulps, negligible for that variance range).
//!
//! # Large inputs: the public input shift `k` ([`LayerNorm::run_scaled`])
//!
//! LayerNorm is scale invariant: `LN_ε(x) = LN_{ε·4^{−k}}(x·2^{−k})`. With a public
//! shift `k` (a per-model parameter from calibration: [`LayerNorm::shift_for`] of the
//! largest `|x|` seen, e.g. 3 for GPT-2's outliers of `≈ 3000`), the block computes
//! the accurate form of `x' = x·2^{−k}` with `ε' = ε·4^{−k}`. It does not truncate `x`
//! itself: `D = cols·x − Σ` is exact, so it truncates `D` by `k` more bits instead —
//! `d_z = ⌊D/2^{t+k−2}⌉`, `d_h = ⌊D/2^{t+k+3}⌉` (two truncations of `D`, since `32·D`
//! may exceed `2^{41}`; for `k = 0` it is the one batched truncation above). So:
//!
//! * **Range** `|x| ≤ 2^{9+k}`, for `k ≤` [`LayerNorm::max_shift`] `= 17 − ⌈log2 cols⌉`
//!   (`|D| < 2^{41}`, the truncation's bound): `k ≤ 7` (`|x| ≤ 2^{16}`) at 768 or
//!   1024 columns, `k ≤ 5` at 4096. [`LayerNorm::validate_scaled`] rejects a larger `k`
//!   (typed error). Beyond `2^{9+k}` the block is outside its domain as before (the
//!   shares cannot show it, so the calibrated `k` must cover the model): at `k = 0`,
//!   rows up to `±3000` give errors of `≈ 26` (test
//!   `shift_for_covers_the_calibrated_range_and_k0_is_out_of_it`).
//! * **Precision cost**: every statement above holds for `x'`, i.e. with `σ` replaced
//!   by `σ' = σ·2^{−k}`: the accurate variance range becomes
//!   `[2^{2k}·var_lo, 2^{2k}·var_hi]` — its floor moves from `≤ 2^{−8}` to `≤ 2^{−8+2k}`
//!   — and the error bounds hold for `var ≥ 2^{2k−2}`, with `1/σ'` in place of `1/σ`:
//!   rows of small variance lose `k` bits (`d_z` is `x − μ` at `15 − k` bits). Rows of
//!   large variance gain (the `ρσ'` term of [`Rsqrt`]'s absolute error shrinks by
//!   `2^k`). Constant rows still give `β` (`D = 0` exactly; the same `≤ 2^{−9.5}|γ|`).
//! * **Cost**: 0 extra COTs (the same `2n` truncated values), `+0.2%` bytes (the
//!   framing of one more message: 2143 vs 2138 B/elem at 7 × 64, 1314 either way at
//!   128 × 768); 2 more online rounds
//!   for `k > 0` (the two truncations of `D` are sequential): 11 + 37.
//! * **Measured** (tests, `|x| ≤ 3000`, `k = 3`, `ε = 10^{−5}`, `γ ∈ [0.3, 2.5]`; rows:
//!   uniform `±3000`, one outlier of 3000 among `±10`, mean 2500 with `±8`, `±20`):
//!   at 64 columns max error `1.05·10^{−3}`, mean `1.6·10^{−4}` (0.60 of the bound),
//!   protocol vs [`LayerNorm::reference_scaled`] 8 ulps (0.60 of the bound); at 384
//!   columns max `5.8·10^{−4}`, mean `1.3·10^{−4}`, 7 ulps; constant rows of `3000`,
//!   `−2999.5`, `0` give `β` within `2^{−9}|γ| + 2^{−12}`.
//!
//! # Massive activations: per-column widening ([`LayerNorm::run_wide`])
//!
//! One shift serves rows whose columns are of one size. Real decoders are not: SmolLM2's
//! residual stream carries `2.4·10⁴` in one column (507) of the first position from layer 12
//! on, and tens elsewhere. The shift that covers that column (7) puts the floor of the
//! variance range at `2^{14}·var_lo`, i.e. RMS `≈ 7`, so every later position (RMS 3–30) is
//! normalized by the clamped floor instead of its own scale, and the private tokens leave
//! the plaintext model's at once (emulated with [`LayerNorm::reference_scaled`]: worst logit
//! error 45 on SmolLM2, the same failure the two-party run showed).
//!
//! The mean square is a sum of per-column squares, so each column can be squared at its own
//! scale. With a public widening `w_c` per column (a per-model parameter from calibration,
//! [`LayerNorm::shifts_for`]): `d_h` of column `c` is `⌊D_c/2^{t+k+w_c+3}⌉` (one truncation
//! per distinct widening), its square `⌊d_h²/2^{s_sq}⌉` is multiplied by `4^{w_c}` (local,
//! exact), and the rest is unchanged: `S` is in the units of shift `k`, `d_z` is at shift `k`
//! for every column (its bound is `D`'s, not the square's). So:
//!
//! * **Range**: `|x_c| ≤ 2^{9+k+w_c}` with `k + w_c ≤` [`LayerNorm::max_shift`]; the
//!   widened squares' sum must stay below `2^{41}` ([`LayerNorm::validate_wide`] checks the
//!   worst case), and `S` below [`Rsqrt`]'s clamp `2^{38}` on the data (as before: a row past
//!   it saturates). [`LayerNorm::shifts_for`] picks the smallest `k` whose `S` fits the
//!   calibrated sum of squares and widens only the columns that need it: on SmolLM2,
//!   `k = 2` and column 507 by 5 (column 247 by 1–2) in layers 12–28, `k = 0` with one or two
//!   columns widened elsewhere.
//! * **Precision**: rows keep the floor of shift `k`; a widened column's `d_h` is coarser
//!   by `2^{w_c}`, which moves `S` by a relative `≤ 2·Σ_w |x_c|·δ_c / Σ x²` (`δ_c` one ulp
//!   of its `d_h`, in real units) — negligible for the large column itself, and at most
//!   `≈ 2^{−12}` for a small row whose widened column is small. Test
//!   `rmsnorm_widened_columns_keep_the_small_rows`: a row with `2.4·10⁴` in one column, one of
//!   RMS 2.9, one of RMS 23, all within `2^{−9}` of the real function (where shift 7 misses
//!   the small row by more than 0.1).
//! * **Cost**: the same COTs; one more truncation round per distinct widening (`d_h`'s
//!   truncations run one after another).
//!
//! MBLN takes the same shift: `d = ⌊D/2^{t+k}⌉` and P0 folds `2^k/(ρ·l·R_d)` into `γ`;
//! valid while `|x − μ| < 2^{10+k}` and `|y − β| < 2^8`, with `w = 2^k|γ|/(ρ·l·R_d)`
//! in its bounds below. [`LayerNorm::mbln_local`] needs no shift (`D` is exact).

//! # MBLN ([`LnKind::Mbln`])
//!
//! `(x − μ)/(l·R_d) = D/(cols·l·R_d)` is linear in the shares:
//!
//! * [`LayerNorm::mbln_local`] is EncFormer's **0-round** form: it returns `D` (exact,
//!   at 13 bits, `cols` times `x − μ`) and the public factor `κ = 1/(cols·l·R_d)`, so
//!   that `y = γ ⊙ κ·D + β`: the next linear layer (CKKS) folds `κ`, `γ` and `β` into
//!   its weights and bias. 0 rounds, 0 bytes.
//! * [`LayerNorm::run`] with P0's private `γ`: `d = ⌊D/2^t⌉ = ρ(x − μ)` (one truncation,
//!   1 COT per element, 2 rounds), then `y = d·(γ/(ρ·l·R_d))` with P0's folded vector at
//!   19 bits ([`Party::mul_owned_fx`]: `ℓ` COTs per column, `ℓ(ℓ+1)/2` correction bits
//!   per element, then 1 COT per element for its truncation) and `+ β` at P0: 4 rounds
//!   in all. Valid while `|γ ⊙ (x − μ)/(l·R_d)| < 2^8` ([`MBLN_OUT_MAX`]) and
//!   `|x − μ| < 2^{10}` (the product stays below `2^{40}`); beyond that it would wrap, so
//!   the caller keeps it in range (a checkpoint trained with MBLN has `|y| ≪ 2^8`).
//!   With `w = |γ|/(ρ·l·R_d)`: within `1 + ⌈w⌉` ulps of [`LayerNorm::reference`] (two
//!   faithful truncations), and within `(2 + 1.5w)·2^{−13} + |y − β|·2^{−20}/w` of the
//!   formula (`d`'s and the output's rounding, `β` at 13 bits, `w` at 19 bits).

//! # Costs (measured, both parties, IKNP at 16 B per COT, `ℓ = 43`)
//!
//! | form | shape | bytes/elem | COTs/elem | rounds (offline + online) |
//! |---|---|---|---|---|
//! | accurate | 128 × 768 | 1004 | 33.7 | 11 + 35 |
//! | accurate, no elementwise affine (silent OT: 355) | 128 × 768 | 863 | 32.4 | 11 + 33 |
//! | accurate, input shift `k = 3` ([`LayerNorm::run_scaled`]) | 128 × 768 | 1004 | 33.7 | 11 + 37 |
//! | MBLN ([`LayerNorm::run`], private `γ`; shift `k = 3`: the same, 160 B) | 128 × 768 | 159 | 2.3 | 0 + 4 |
//! | MBLN without affine (the public factor: a local product, 2 truncations) | 128 × 768 | 36 | 2.0 | 0 + 4 |
//! | MBLN ([`LayerNorm::mbln_local`], `γ`, `κ` folded into the next layer) | any | 0 | 0 | 0 |
//!
//! (Before the bounded squaring the accurate form took 1314 B and 51.7 COTs per element.)
//! The accurate form's bytes are the square (25 COTs and 774 correction bits per
//! element at `ℓ = 43`), the row-broadcast product (`ℓ(ℓ+1)` bits per element), the owner
//! product (`ℓ(ℓ+1)/2` bits per element) and three 1-COT truncations; the reciprocal
//! square root is per row (28 comparisons per row, `S` against `2^{11..=38}`; `≈ 40`
//! B/elem at 768 columns).
//! Its 35 online rounds: truncation 2, square 4, [`Rsqrt`] 28, row product 4, owner
//! product 4, less the overlaps of the phases (the Meter counts causal depth).

use crate::mpc::arith::{bcast, rowsum};
use crate::mpc::error::{expect_len, MpcError, Result};
use crate::mpc::{Party, PartyId, RingCfg, RingShares};
use crate::nonlinear::fixed;
use crate::nonlinear::ops::{add, mul_int, sub};
use crate::nonlinear::rsqrt::Rsqrt;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

/// Which LayerNorm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LnKind {
    /// `γ ⊙ (x − μ)/√(var + ε) + β`.
    Accurate,
    /// MBLN: `γ ⊙ (x − μ)/(l·R_d) + β` (EncFormer §IV-B2), public `l`, `R_d`.
    Mbln {
        /// The model's scale `l`.
        l: f64,
        /// The model's constant `R_d`.
        rd: f64,
    },
    /// RMSNorm (Llama-architecture decoders): `γ ⊙ x/√(mean(x²) + ε) + β` (the checkpoints'
    /// `β` is zero). The accurate protocol with `D = cols·x` in place of `cols·(x − μ)`: every
    /// statement of the accurate form holds with the variance replaced by the mean square.
    Rms,
}

/// The LayerNorm block over a `rows × cols` row-major matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNorm {
    /// Number of rows (tokens).
    pub rows: usize,
    /// Row length (hidden size).
    pub cols: usize,
    /// `ε` of the checkpoint (accurate form).
    pub eps: f64,
    /// Accurate or MBLN.
    pub kind: LnKind,
    /// Whether the block ends with the checkpoint's per-column map `γ ⊙ · + β`
    /// (PyTorch's `elementwise_affine`). It is part of the public architecture. With
    /// `false` the owner product is skipped: the accurate form truncates the normalized
    /// value straight to 13 bits (one product, `ℓ(ℓ+1)/2` correction bits, and one
    /// truncation fewer per element); MBLN multiplies by its public factor locally
    /// (the same two truncations, no correction bits). An `affine` argument at the
    /// owner is refused.
    pub affine: bool,
}

/// The checkpoint's affine parameters, held by the server = Party P0 (P1 passes None).
/// They are the server's secret: `Debug` shows only their lengths.
#[derive(Clone, Copy)]
pub struct LnAffine<'a> {
    /// `γ`, one per column.
    pub gamma: &'a [f64],
    /// `β`, one per column.
    pub beta: &'a [f64],
}

impl core::fmt::Debug for LnAffine<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "LnAffine {{ gamma: <{} redacted>, beta: <{} redacted> }}",
            self.gamma.len(),
            self.beta.len()
        )
    }
}

/// Largest valid `|x|` (reals): `2^9`.
pub const X_MAX: f64 = 512.0;
/// Largest input shift of any row length (one column); see [`LayerNorm::max_shift`].
pub const SHIFT_MAX: u32 = 17;
/// Largest row length.
pub const COLS_MAX: usize = 1 << 12;
/// Largest `|γ|` of the accurate form.
pub const GAMMA_MAX: f64 = 64.0;
/// Largest `|y − β|` of MBLN's [`LayerNorm::run`].
pub const MBLN_OUT_MAX: f64 = 256.0;

/// Fractional bits of `d_z`, `d_h`, `z`, `γ` (accurate) and MBLN's folded `γ`.
const FZ: u32 = 15;
const FH: u32 = 10;
const FZO: u32 = 14;
const FGAM: u32 = 14;
const FMB: u32 = 19;

/// The derived scales of one row length.
#[derive(Clone, Copy, Debug)]
struct Scales {
    /// `⌈log2 cols⌉`.
    t: u32,
    /// `cols / 2^t`.
    rho: f64,
    /// Fractional bits of `S`.
    fs: u32,
    /// Truncation of the squares.
    s_sq: u32,
    /// Fractional bits of `g`.
    fg: u32,
    /// The public input shift `k` (the block normalizes `x·2^{−k}`).
    k: u32,
}

impl Scales {
    /// `(a, s)` with `d_z = ⌊D·2^a / 2^s⌉ = ⌊32·D / 2^{t+k+3}⌉`, `a = 0` unless
    /// `t + k < 2`.
    fn dz_shift(&self) -> (u32, u32) {
        let s = self.t + self.k + 13 - FH;
        let a = FZ - FH;
        let m = a.min(s);
        (a - m, s - m)
    }

    fn of(cols: usize, k: u32) -> Scales {
        let t = if cols <= 1 {
            0
        } else {
            usize::BITS - (cols - 1).leading_zeros()
        };
        let rho = cols as f64 / libm::exp2(t as f64);
        let s_sq = t.saturating_sub(2);
        let fs = 2 * FH - s_sq;
        let zmax = libm::sqrt(cols as f64) + 1.0;
        let fg = 25 - libm::ceil(libm::log2(zmax)) as u32;
        Scales {
            t,
            rho,
            fs,
            s_sq,
            fg,
            k,
        }
    }
}

impl LayerNorm {
    /// Checks the shape and parameters: `F = 13`, `ℓ ≥ 43`, `1 ≤ cols ≤ 2^{12}`,
    /// `rows·cols` representable, `ε ∈ [0, 1]`, MBLN's `l·R_d ≥ 2^{−16}` finite.
    pub fn validate(&self, ring: RingCfg) -> Result<()> {
        if ring.frac != 13 {
            return Err(MpcError::InvalidConfig("LayerNorm needs F = 13"));
        }
        if ring.ell < 43 {
            return Err(MpcError::InvalidConfig("LayerNorm needs ell >= 43"));
        }
        if self.cols == 0 || self.cols > COLS_MAX {
            return Err(MpcError::InvalidConfig("LayerNorm needs 1 <= cols <= 4096"));
        }
        if self.rows.checked_mul(self.cols).is_none() {
            return Err(MpcError::InvalidConfig("LayerNorm shape overflows"));
        }
        if !(self.eps.is_finite() && (0.0..=1.0).contains(&self.eps)) {
            return Err(MpcError::InvalidConfig("LayerNorm eps must be in [0, 1]"));
        }
        if let LnKind::Mbln { l, rd } = self.kind {
            let s = l * rd;
            if !(s.is_finite() && s >= libm::exp2(-16.0)) {
                return Err(MpcError::InvalidConfig("MBLN needs l·R_d >= 2^-16"));
            }
        }
        Ok(())
    }

    /// [`LayerNorm::validate`] for the input shift `k` of [`LayerNorm::run_scaled`]:
    /// also `k ≤` [`LayerNorm::max_shift`] `= 17 − ⌈log2 cols⌉` (so that
    /// `|D| = cols·|x − μ|·2^{13} < 2^{41}` for every `|x| ≤ 2^{9+k}`, the bound of the
    /// faithful truncation). `validate_scaled(ring, 0)` is `validate(ring)`.
    pub fn validate_scaled(&self, ring: RingCfg, shift: u32) -> Result<()> {
        self.validate(ring)?;
        if shift > self.max_shift() {
            return Err(MpcError::InvalidConfig(
                "LayerNorm input shift must be <= 17 - ceil(log2 cols)",
            ));
        }
        Ok(())
    }

    /// [`LayerNorm::validate_scaled`] for the per-column widening `wide` of
    /// [`LayerNorm::run_wide`]: empty, or one per column with `shift + wide[c] ≤`
    /// [`LayerNorm::max_shift`] (each `d_h` then keeps its bound), only for the accurate and
    /// RMS forms, and the widened squares' sum below `2^{41}` on the valid range (no wrap
    /// before [`Rsqrt`]'s clamp).
    pub fn validate_wide(&self, ring: RingCfg, shift: u32, wide: &[u32]) -> Result<()> {
        self.validate_scaled(ring, shift)?;
        if wide.is_empty() {
            return Ok(());
        }
        expect_len("LayerNorm widening", self.cols, wide.len())?;
        if matches!(self.kind, LnKind::Mbln { .. }) {
            return Err(MpcError::InvalidConfig("MBLN takes no widening"));
        }
        let max = self.max_shift();
        if wide.iter().any(|&w| w > max || shift + w > max) {
            return Err(MpcError::InvalidConfig(
                "LayerNorm shift + widening must be <= 17 - ceil(log2 cols)",
            ));
        }
        // each square is at most ρ²·2^{38 − s_sq} before its widening
        let sc = Scales::of(self.cols, shift);
        let each = sc.rho * sc.rho * libm::exp2(38.0 - sc.s_sq as f64);
        let sum: f64 = wide
            .iter()
            .map(|&w| each * libm::exp2(2.0 * w as f64))
            .sum();
        if sum >= libm::exp2(41.0) {
            return Err(MpcError::InvalidConfig(
                "LayerNorm widening: the squares' sum could wrap",
            ));
        }
        Ok(())
    }

    /// `d_h` with column `c` at `k + wide[c]` (one truncation per distinct widening).
    async fn dh_wide<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        d: RingShares,
        sc: &Scales,
        wide: &[u32],
    ) -> Result<RingShares> {
        let base = sc.t + sc.k + 13 - FH;
        if wide.iter().all(|&w| w == 0) {
            return p.trunc_round(d, base).await;
        }
        let mut ws: Vec<u32> = wide.to_vec();
        ws.sort_unstable();
        ws.dedup();
        let mut out = alloc::vec![0u64; d.len()];
        for w in ws {
            let idx: Vec<usize> = (0..d.len()).filter(|&i| wide[i % self.cols] == w).collect();
            let part = RingShares::new(idx.iter().map(|&i| d.as_slice()[i]).collect());
            let part = p.trunc_round(part, base + w).await?;
            for (&i, &v) in idx.iter().zip(part.as_slice()) {
                out[i] = v;
            }
        }
        Ok(RingShares::new(out))
    }

    /// The largest input shift this row length admits: `17 − ⌈log2 cols⌉` (7 at 768
    /// columns, `|x| ≤ 2^{16}`; 5 at 4096, `|x| ≤ 2^{14}`); 0 for a bad `cols`.
    pub fn max_shift(&self) -> u32 {
        if self.cols == 0 || self.cols > COLS_MAX {
            return 0;
        }
        17 - Scales::of(self.cols, 0).t
    }

    /// The smallest input shift `k` whose valid range `|x| ≤ 2^{9+k}` covers a
    /// calibrated `max |x|` (the model's public parameter): 0 up to 512, 1 up to 1024,
    /// 3 for GPT-2's outliers of `≈ 3000`. Saturates at [`SHIFT_MAX`] (also for NaN or
    /// ∞); [`LayerNorm::validate_scaled`] says whether the row length admits it.
    pub fn shift_for(max_abs: f64) -> u32 {
        (0..SHIFT_MAX)
            .find(|&k| libm::fabs(max_abs) <= X_MAX * libm::exp2(k as f64))
            .unwrap_or(SHIFT_MAX)
    }

    /// The input shift and per-column widening ([`LayerNorm::run_wide`]) for calibrated
    /// bounds: `col_max[c]` bounds `|x_c|` and `sq_max` bounds the row's `Σ_c x_c²` (both
    /// with the caller's margin). The shift is the smallest whose `S` stays below
    /// [`Rsqrt`]'s upper clamp `2^{38}` on those bounds (rows of small variance keep the most
    /// bits), and each column is widened just enough for its bound (`|x_c − μ|`, with
    /// `|μ| ≤ Σ col_max / cols` for the accurate form). Saturates at
    /// [`LayerNorm::max_shift`]: [`LayerNorm::validate_wide`] checks the result's own bounds,
    /// but a column capped there, or a sum of squares past `2^{38}` at the largest shift, is
    /// past the block's range, which only the caller's comparison with its bounds shows (as
    /// `DecodePlan::with_norms` does). Returns `(shift, wide)`, `wide` empty when no column
    /// needs widening.
    pub fn shifts_for(&self, col_max: &[f64], sq_max: f64) -> (u32, Vec<u32>) {
        let max = self.max_shift();
        let sc = Scales::of(self.cols, 0);
        let s_top = libm::exp2(38.0);
        let s_at = |k: u32| {
            sc.rho * sc.rho * sq_max * libm::exp2(2.0 * FH as f64 - sc.s_sq as f64 - 2.0 * k as f64)
        };
        let k = (0..=max).find(|&k| s_at(k) < s_top).unwrap_or(max);
        let mu = match self.kind {
            LnKind::Rms => 0.0,
            _ => col_max.iter().map(|m| libm::fabs(*m)).sum::<f64>() / self.cols.max(1) as f64,
        };
        let wide: Vec<u32> = col_max
            .iter()
            .map(|&m| {
                Self::shift_for(libm::fabs(m) + mu)
                    .min(max)
                    .saturating_sub(k)
            })
            .collect();
        if wide.iter().all(|&w| w == 0) {
            (k, Vec::new())
        } else {
            (k, wide)
        }
    }

    /// The normalizer `g = √cols/√S`, with `S` clamped to `[2^{11}, 2^{38}]` (integers at
    /// `F_S`).
    fn rsqrt(&self, sc: &Scales) -> Rsqrt {
        Rsqrt {
            frac_in: sc.fs,
            lo: 11,
            hi: 38,
            mult: libm::sqrt(self.cols as f64),
            frac_out: sc.fg,
        }
    }

    /// `ρ²·cols·ε` at `F_S` bits, plus (protocol only) the mean bias of the squares'
    /// faithful truncations.
    fn s_offset(&self, sc: &Scales, bias: bool, wide: &[u32]) -> i64 {
        // ε' = ε·4^{−k}: the scaled problem's ε.
        let eps = self.eps * libm::exp2(-2.0 * sc.k as f64);
        let e = fixed::encode(sc.rho * sc.rho * self.cols as f64 * eps, sc.fs);
        // half an ulp of each square, times its widening
        let b = if bias && sc.s_sq > 0 {
            if wide.is_empty() {
                (self.cols / 2) as i64
            } else {
                wide.iter().map(|&w| 1i64 << (2 * w)).sum::<i64>() / 2
            }
        } else {
            0
        };
        e.min(1 << 37) + b
    }

    /// MBLN's folded factor `2^k/(ρ·l·R_d)` (P0 multiplies `γ` by it, at 19 bits).
    fn mbln_fold(&self, sc: &Scales) -> f64 {
        match self.kind {
            LnKind::Mbln { l, rd } => libm::exp2(sc.k as f64) / (sc.rho * l * rd),
            LnKind::Accurate | LnKind::Rms => 1.0,
        }
    }

    /// The per-column multiplier (integers) and `β` (at 13 bits) of the affine map:
    /// `γ` at 14 bits (accurate) or `γ/(ρ·l·R_d)` at 19 bits (MBLN); identity if absent.
    fn affine_ints(
        &self,
        sc: &Scales,
        affine: Option<&LnAffine<'_>>,
    ) -> Result<(Vec<i64>, Vec<i64>)> {
        let cols = self.cols;
        let (fm, fold) = match self.kind {
            LnKind::Accurate | LnKind::Rms => (FGAM, 1.0),
            LnKind::Mbln { .. } => (FMB, self.mbln_fold(sc)),
        };
        if !self.affine && affine.is_some() {
            return Err(MpcError::InvalidInput(
                "LayerNorm without an elementwise affine was given gamma and beta",
            ));
        }
        let Some(a) = affine else {
            return Ok((
                alloc::vec![fixed::encode(fold, fm); cols],
                alloc::vec![0; cols],
            ));
        };
        expect_len("LayerNorm gamma", cols, a.gamma.len())?;
        expect_len("LayerNorm beta", cols, a.beta.len())?;
        let mut g = Vec::with_capacity(cols);
        for &v in a.gamma {
            let w = v * fold;
            if !w.is_finite() {
                return Err(MpcError::InvalidInput("LayerNorm gamma must be finite"));
            }
            if !matches!(self.kind, LnKind::Mbln { .. }) && libm::fabs(v) > GAMMA_MAX {
                return Err(MpcError::InvalidInput("LayerNorm |gamma| must be <= 64"));
            }
            if libm::fabs(w) * libm::exp2(fm as f64) >= libm::exp2(40.0) {
                return Err(MpcError::InvalidInput("MBLN gamma/(l·R_d) too large"));
            }
            g.push(fixed::encode(w, fm));
        }
        let mut b = Vec::with_capacity(cols);
        for &v in a.beta {
            if !(v.is_finite() && libm::fabs(v) < 1e6) {
                return Err(MpcError::InvalidInput(
                    "LayerNorm beta must be finite, < 1e6",
                ));
            }
            b.push(fixed::encode(v, 13));
        }
        Ok((g, b))
    }

    /// EncFormer's 0-round MBLN: shares of `D = cols·(x − μ)` (exact, 13 fractional bits)
    /// and the public factor `κ = 1/(cols·l·R_d)` with `(x − μ)/(l·R_d) = κ·D`; the
    /// consumer folds `κ`, `γ`, `β` into the next linear layer. Local, for either party.
    pub fn mbln_local(&self, ring: RingCfg, x: &RingShares) -> Result<(RingShares, f64)> {
        self.validate(ring)?;
        let LnKind::Mbln { l, rd } = self.kind else {
            return Err(MpcError::InvalidConfig("mbln_local needs LnKind::Mbln"));
        };
        let d = self.centered(ring, x)?;
        Ok((d, 1.0 / (self.cols as f64 * l * rd)))
    }

    /// `D = cols·x − Σ_row x` (local).
    fn centered(&self, r: RingCfg, x: &RingShares) -> Result<RingShares> {
        expect_len(
            "LayerNorm input (rows·cols)",
            self.rows * self.cols,
            x.len(),
        )?;
        if self.kind == LnKind::Rms {
            return Ok(mul_int(r, x, self.cols as i64));
        }
        let s = rowsum(x, self.rows, self.cols, r.ell)?;
        sub(r, &mul_int(r, x, self.cols as i64), &bcast(&s, self.cols))
    }

    /// Runs the block (see the module documentation); `affine` is P0's. Valid for
    /// `|x| ≤ 2^9`; [`LayerNorm::run_scaled`] with shift 0.
    pub async fn run<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
        affine: Option<&LnAffine<'_>>,
    ) -> Result<RingShares> {
        self.run_scaled(p, x, affine, 0).await
    }

    /// Runs the block on `x·2^{−shift}` with `ε·4^{−shift}` (the same function: LayerNorm
    /// is scale invariant), valid for `|x| ≤ 2^{9+shift}`; `shift` is public, the same
    /// at both parties (e.g. [`LayerNorm::shift_for`] of a calibrated `max |x|`). See
    /// the module documentation ("Large inputs") for the precision it costs.
    pub async fn run_scaled<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
        affine: Option<&LnAffine<'_>>,
        shift: u32,
    ) -> Result<RingShares> {
        self.run_owned(p, x, affine, shift, PartyId::P0).await
    }

    /// [`LayerNorm::run_scaled`] with `γ` and `β` held by `owner` (the other party's
    /// `affine` is ignored): in the hybrid protocol the server, which holds the checkpoint,
    /// is MPC party P1.
    pub async fn run_owned<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
        affine: Option<&LnAffine<'_>>,
        shift: u32,
        owner: PartyId,
    ) -> Result<RingShares> {
        self.run_inner(p, x, affine, shift, &[], owner).await
    }

    /// [`LayerNorm::run_scaled`] without an affine map, with the public per-column widening
    /// `wide` of the squares' shift (see "Massive activations" in the module documentation):
    /// valid for `|x_c| ≤ 2^{9+shift+wide[c]}`. An empty `wide` is `run_scaled`.
    pub async fn run_wide<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
        shift: u32,
        wide: &[u32],
    ) -> Result<RingShares> {
        self.run_inner(p, x, None, shift, wide, PartyId::P0).await
    }

    async fn run_inner<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
        affine: Option<&LnAffine<'_>>,
        shift: u32,
        wide: &[u32],
        owner: PartyId,
    ) -> Result<RingShares> {
        let r = p.ring();
        self.validate_wide(r, shift, wide)?;
        let sc = Scales::of(self.cols, shift);
        let p0 = p.is_p0();
        let is_owner = p.id() == owner;
        // The owner's γ and β are the checkpoint's (the server's secret): zeroized on drop.
        let (gam, beta) = if is_owner {
            let (g, b) = self.affine_ints(&sc, affine)?;
            let (g, b) = (Zeroizing::new(g), Zeroizing::new(b));
            (
                Some(Zeroizing::new(
                    g.iter().map(|&v| r.from_signed(v)).collect::<Vec<u64>>(),
                )),
                b,
            )
        } else {
            (None, Zeroizing::new(Vec::new()))
        };
        let d = self.centered(r, x)?;
        let n = d.len();
        let y = match self.kind {
            LnKind::Mbln { .. } => {
                let d1 = p.trunc_round(d, sc.t + sc.k).await?;
                if self.affine {
                    p.mul_owned_fx(
                        &d1,
                        gam.as_ref().map(|g| g.as_slice()),
                        owner,
                        self.cols,
                        FMB,
                    )
                    .await?
                } else {
                    // the public factor 2^k/(ρ·l·R_d): a local product and a truncation
                    let c = fixed::encode(self.mbln_fold(&sc), FMB);
                    p.trunc_round(mul_int(r, &d1, c), FMB).await?
                }
            }
            LnKind::Accurate | LnKind::Rms => {
                let (dz, dh) = if sc.k == 0 && wide.is_empty() {
                    // one batched truncation of [32·D, D] (|32·D| < 2^{41})
                    let mut both = mul_int(r, &d, 1 << (FZ - FH)).into_vec();
                    both.extend_from_slice(d.as_slice());
                    let both = p.trunc_round(RingShares::new(both), sc.t + 13 - FH).await?;
                    let (dz, dh) = both.as_slice().split_at(n);
                    (RingShares::new(dz.to_vec()), RingShares::new(dh.to_vec()))
                } else {
                    // 32·D may exceed 2^{41}: two truncations of D itself
                    let (a, s) = sc.dz_shift();
                    let dz = p.trunc_round(mul_int(r, &d, 1 << a), s).await?;
                    let dh = self.dh_wide(p, d, &sc, wide).await?;
                    (dz, dh)
                };
                let sq = p.square_fx(&dh, sc.s_sq).await?;
                let sq = if wide.iter().any(|&w| w > 0) {
                    let f: Vec<i64> = (0..n).map(|i| 1i64 << (2 * wide[i % self.cols])).collect();
                    RingShares::new(
                        sq.as_slice()
                            .iter()
                            .zip(&f)
                            .map(|(&v, &f)| r.mul(v, r.from_signed(f)))
                            .collect(),
                    )
                } else {
                    sq
                };
                let mut s = rowsum(&sq, self.rows, self.cols, r.ell)?;
                if p0 {
                    let off = r.from_signed(self.s_offset(&sc, true, wide));
                    for v in s.as_mut_slice() {
                        *v = r.add(*v, off);
                    }
                }
                let g = self.rsqrt(&sc).run(p, &s).await?;
                if !self.affine {
                    // the normalized value is the output, at 13 bits
                    p.mul_rows_fx(&dz, &g, self.cols, FZ + sc.fg - 13).await?
                } else {
                    let z = p.mul_rows_fx(&dz, &g, self.cols, FZ + sc.fg - FZO).await?;
                    p.mul_owned_fx(
                        &z,
                        gam.as_ref().map(|g| g.as_slice()),
                        owner,
                        self.cols,
                        FZO + FGAM - 13,
                    )
                    .await?
                }
            }
        };
        if !is_owner || beta.iter().all(|&b| b == 0) {
            return Ok(y);
        }
        let bb = RingShares::new((0..n).map(|k| r.from_signed(beta[k % self.cols])).collect());
        add(r, &y, &bb)
    }

    /// Plain-integer reference of [`LayerNorm::run`]: the same steps with exact rounding.
    /// Returns an empty vector on a bad shape or affine.
    pub fn reference(&self, ring: RingCfg, x: &[i64], affine: Option<&LnAffine<'_>>) -> Vec<i64> {
        self.reference_with(ring, x, affine, 1.0, 0, &[])
    }

    /// Plain-integer reference of [`LayerNorm::run_scaled`] with the input shift
    /// `shift`; empty on a bad shape, affine or shift.
    pub fn reference_scaled(
        &self,
        ring: RingCfg,
        x: &[i64],
        affine: Option<&LnAffine<'_>>,
        shift: u32,
    ) -> Vec<i64> {
        self.reference_with(ring, x, affine, 1.0, shift, &[])
    }

    /// Plain-integer reference of [`LayerNorm::run_wide`]; empty on a bad shape, shift or
    /// widening.
    pub fn reference_wide(&self, ring: RingCfg, x: &[i64], shift: u32, wide: &[u32]) -> Vec<i64> {
        self.reference_with(ring, x, None, 1.0, shift, wide)
    }

    /// [`LayerNorm::reference`] with the normalizer's multiplier scaled by `fudge`
    /// (tests: a wrong coefficient).
    fn reference_with(
        &self,
        ring: RingCfg,
        x: &[i64],
        affine: Option<&LnAffine<'_>>,
        fudge: f64,
        shift: u32,
        wide: &[u32],
    ) -> Vec<i64> {
        if self.validate_wide(ring, shift, wide).is_err() || x.len() != self.rows * self.cols {
            return Vec::new();
        }
        let sc = Scales::of(self.cols, shift);
        let Ok((gam, beta)) = self.affine_ints(&sc, affine) else {
            return Vec::new();
        };
        let mut rs = self.rsqrt(&sc);
        rs.mult *= fudge;
        let cols = self.cols as i64;
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks(self.cols) {
            // i128 and wrapping: any input, no overflow (the ring's values are far smaller).
            let sum: i128 = if self.kind == LnKind::Rms {
                0
            } else {
                row.iter().map(|&v| v as i128).sum()
            };
            let d: Vec<i128> = row
                .iter()
                .map(|&v| (cols as i128).wrapping_mul(v as i128).wrapping_sub(sum))
                .collect();
            match self.kind {
                LnKind::Mbln { .. } => {
                    for (c, &dv) in d.iter().enumerate() {
                        let d1 = fixed::round_shift(dv, sc.t + sc.k) as i128;
                        out.push(
                            fixed::round_shift(d1 * gam[c] as i128, FMB).wrapping_add(beta[c]),
                        );
                    }
                }
                LnKind::Accurate | LnKind::Rms => {
                    let sh = sc.t + sc.k + 13 - FH;
                    let (za, zs) = sc.dz_shift();
                    let s: i64 = d
                        .iter()
                        .enumerate()
                        .map(|(c, &dv)| {
                            let w = wide.get(c).copied().unwrap_or(0);
                            let h = fixed::round_shift(dv, sh + w) as i128;
                            fixed::round_shift(h * h, sc.s_sq).wrapping_shl(2 * w)
                        })
                        .fold(0i64, i64::wrapping_add)
                        .wrapping_add(self.s_offset(&sc, false, wide));
                    let g = rs.reference(&[s])[0] as i128;
                    for (c, &dv) in d.iter().enumerate() {
                        let dz = fixed::round_shift(dv.wrapping_shl(za), zs) as i128;
                        if !self.affine {
                            out.push(fixed::round_shift(dz * g, FZ + sc.fg - 13));
                            continue;
                        }
                        let z = fixed::round_shift(dz * g, FZ + sc.fg - FZO) as i128;
                        out.push(
                            fixed::round_shift(z * gam[c] as i128, FZO + FGAM - 13)
                                .wrapping_add(beta[c]),
                        );
                    }
                }
            }
        }
        out
    }

    /// The exact function (population variance, as in PyTorch's `LayerNorm`); empty
    /// when `x` is not `rows × cols`, the affine lengths are not `cols`, or an affine is
    /// given to a block without one.
    pub fn f64_reference(&self, x: &[f64], affine: Option<&LnAffine<'_>>) -> Vec<f64> {
        let bad_affine = affine.is_some_and(|a| {
            !self.affine || a.gamma.len() != self.cols || a.beta.len() != self.cols
        });
        if self.cols == 0 || self.rows.checked_mul(self.cols) != Some(x.len()) || bad_affine {
            return Vec::new();
        }
        let cols = self.cols;
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks(cols) {
            let mu = if self.kind == LnKind::Rms {
                0.0
            } else {
                row.iter().sum::<f64>() / cols as f64
            };
            let var = row.iter().map(|&v| (v - mu) * (v - mu)).sum::<f64>() / cols as f64;
            let scale = match self.kind {
                LnKind::Accurate | LnKind::Rms => 1.0 / libm::sqrt(var + self.eps),
                LnKind::Mbln { l, rd } => 1.0 / (l * rd),
            };
            for (c, &v) in row.iter().enumerate() {
                let (g, b) = affine
                    .and_then(|a| Some((*a.gamma.get(c)?, *a.beta.get(c)?)))
                    .unwrap_or((1.0, 0.0));
                out.push(g * (v - mu) * scale + b);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::cost::Meter;
    use crate::nonlinear::fixed::ErrStats;
    use crate::nonlinear::testkit::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::RngCore;
    use std::eprintln;

    fn unif(g: &mut ChaCha20Rng, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((g.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Rows: wide (±224), unit, small (σ ≈ 0.6), one dominant entry, shifted mean.
    fn rows(g: &mut ChaCha20Rng, rows: usize, cols: usize) -> Vec<f64> {
        let mut x = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            for c in 0..cols {
                let v = match r % 5 {
                    0 => unif(g, -224.0, 224.0),
                    1 => unif(g, -1.5, 1.5),
                    2 => unif(g, -1.0, 1.0) + 40.0,
                    3 if c == 3 => 224.0,
                    3 => unif(g, -2.0, 2.0),
                    _ => unif(g, -5.0, 5.0) - 3.0,
                };
                x.push(v);
            }
        }
        x
    }

    fn enc(x: &[f64]) -> Vec<i64> {
        x.iter().map(|&v| fixed::encode(v, 13)).collect()
    }

    fn dec(x: &[i64]) -> Vec<f64> {
        x.iter().map(|&v| fixed::decode(v, 13)).collect()
    }

    fn affine_params(g: &mut ChaCha20Rng, cols: usize) -> (Vec<f64>, Vec<f64>) {
        let gamma = (0..cols).map(|_| unif(g, 0.3, 2.5)).collect();
        let beta = (0..cols).map(|_| unif(g, -1.0, 1.0)).collect();
        (gamma, beta)
    }

    /// The accuracy bound of the module documentation, elementwise.
    fn bound(y: f64, beta: f64, gamma: f64, sigma: f64, cols: usize, k: u32) -> f64 {
        let z = (y - beta) / gamma;
        let sc = Scales::of(cols, k);
        let sp = sigma * libm::exp2(-(k as f64)); // σ' = σ·2^{−k}
        let rs = sc.rho * sp;
        let sq = libm::sqrt(cols as f64);
        let g_abs = z.abs() * libm::exp2(14.0 - sc.fg as f64) * rs;
        libm::exp2(-12.0)
            + gamma.abs()
                * libm::exp2(-13.0)
                * (1.0 + z.abs() + 1.0 / sp + 16.0 * z.abs() / (sq * rs) + g_abs)
    }

    /// The module's ulp bound of protocol vs reference, with `σ' = σ·2^{−k}`.
    fn ulp_bound(gamma: f64, z: f64, sigma: f64, cols: usize, k: u32) -> f64 {
        let sc = Scales::of(cols, k);
        let rs = sc.rho * sigma * libm::exp2(-(k as f64));
        let sq = libm::sqrt(cols as f64);
        let g_abs = z.abs() * libm::exp2(15.0 - sc.fg as f64) * rs;
        libm::ceil(
            2.0 + gamma.abs()
                * (1.0 + z.abs() / 8.0 + 1.0 / (4.0 * rs) + 16.0 * z.abs() / (sq * rs) + g_abs),
        )
    }

    /// The accurate form with an elementwise affine, `rows × cols`, `ε = eps`.
    fn accurate(rows: usize, cols: usize, eps: f64) -> LayerNorm {
        LayerNorm {
            rows,
            cols,
            eps,
            kind: LnKind::Accurate,
            affine: true,
        }
    }

    /// `γ` and `β` as P0's [`LnAffine`].
    fn ln_affine<'a>(gamma: &'a [f64], beta: &'a [f64]) -> LnAffine<'a> {
        LnAffine { gamma, beta }
    }

    /// The error a block's run `fut` over the channel `ch` returns at its first poll (before
    /// any message); panics if it does not fail at once.
    fn first_error<'a>(
        ch: crate::mpc::Channel,
        fut: impl core::future::Future<Output = Result<RingShares>> + 'a,
    ) -> MpcError {
        match crate::mpc::Session::new(ch, fut).poll() {
            core::task::Poll::Ready(Err(e)) => e,
            other => panic!("expected an immediate error, got {other:?}"),
        }
    }

    /// The population variance of a row.
    fn variance(row: &[f64]) -> f64 {
        let mu = row.iter().sum::<f64>() / row.len() as f64;
        row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / row.len() as f64
    }

    /// One run of a block beside its references: the opened output `got` (decoded: `gf`),
    /// the integer reference `want`, the real function `exact` of the decoded input `xq`,
    /// and the costs of [`run_ln`].
    struct Outcome {
        got: Vec<i64>,
        gf: Vec<f64>,
        want: Vec<i64>,
        xq: Vec<f64>,
        exact: Vec<f64>,
        cost: (f64, u32, u32, f64),
    }

    impl Outcome {
        /// The error statistics of the first `n` outputs and the costs, for a log line.
        fn summary(&self, n: usize) -> alloc::string::String {
            let e = ErrStats::of(&self.gf[..n], &self.exact[..n]);
            let (bytes, off, on, cots) = self.cost;
            alloc::format!(
                "max err {:.3e} mean {:.3e}; {bytes:.0} B/elem, {cots:.1} COT/elem, rounds offline {off} online {on}",
                e.max_abs, e.mean_abs
            )
        }
    }

    /// Runs both parties on shares of `xs` with the input shift `k` (P0 with `aff`), and the
    /// references of `ln`; the costs are both meters' totals (bytes both ways per element,
    /// offline/online rounds, COTs per element).
    fn run_ln(
        p0: &mut P,
        p1: &mut P,
        ln: &LayerNorm,
        xs: &[i64],
        aff: Option<&LnAffine<'_>>,
        g: &mut ChaCha20Rng,
        k: u32,
    ) -> Outcome {
        let r = p0.ring();
        let (x0, x1) = share(r, xs, g);
        let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
        let c0 = p0.ot_counts();
        let (o0, o1) = both!(
            p0,
            p1,
            ln.run_scaled(p0, &x0, aff, k).await,
            ln.run_scaled(p1, &x1, None, k).await
        );
        let c1 = p0.ot_counts();
        let (s0, s1) = (m0.read(), m1.read());
        let (a, b) = (s0.offline_online(), s1.offline_online());
        let n = xs.len() as f64;
        let cots = ((c1.0 - c0.0) + (c1.1 - c0.1)) as f64 / n;
        let got = open(r, &o0, &o1);
        let xq = dec(xs);
        Outcome {
            gf: dec(&got),
            want: ln.reference_scaled(r, xs, aff, k),
            exact: ln.f64_reference(&xq, aff),
            got,
            xq,
            cost: (
                (a.bytes_sent + b.bytes_sent) as f64 / n,
                s0.offline.rounds,
                s0.online.rounds,
                cots,
            ),
        }
    }

    /// Asserts the accurate form's bounds of the module docs elementwise, with the input
    /// shift `k`: the error against the real function and the ulps against the integer
    /// reference. Rows from `varied` on are constant rows (`β` within
    /// `2^{−9}|γ| + 2^{−12}`). Returns the worst `|protocol − reference|` (ulps), error over
    /// its bound and ulps over their bound.
    fn assert_accurate(
        ln: &LayerNorm,
        o: &Outcome,
        aff: Option<&LnAffine<'_>>,
        k: u32,
        varied: usize,
    ) -> (i64, f64, f64) {
        let cols = ln.cols;
        let (mut worst_ulp, mut worst_rel, mut worst_ulp_rel) = (0i64, 0.0f64, 0.0f64);
        for (row, xr) in o.xq.chunks(cols).enumerate() {
            // RMSNorm: every bound with the variance replaced by the mean square.
            let var = if ln.kind == LnKind::Rms {
                xr.iter().map(|v| v * v).sum::<f64>() / cols as f64
            } else {
                variance(xr)
            };
            let sigma = libm::sqrt(var);
            for c in 0..cols {
                let i = row * cols + c;
                let (ga, be) = aff.map_or((1.0, 0.0), |a| (a.gamma[c], a.beta[c]));
                let err = (o.gf[i] - o.exact[i]).abs();
                if row >= varied {
                    // constant rows: β, up to the ≤ 1 ulp of d_z times g ≤ 2^{5.5}
                    assert_eq!(var, 0.0);
                    let b = libm::exp2(-9.0) * ga + libm::exp2(-12.0);
                    assert!(err <= b, "constant row {row} col {c}: {err}");
                    continue;
                }
                // the module's bound with σ' = σ·2^{−k}
                let b = bound(o.exact[i], be, ga, sigma, cols, k);
                worst_rel = worst_rel.max(err / b);
                assert!(
                    err <= b,
                    "{cols}: row {row} col {c}: {} vs {} (bound {b})",
                    o.gf[i],
                    o.exact[i]
                );
                let z = (o.exact[i] - be) / ga;
                let ulps = ulp_bound(ga, z, sigma, cols, k);
                let d = (o.got[i] - o.want[i]).abs();
                worst_ulp_rel = worst_ulp_rel.max(d as f64 / ulps);
                worst_ulp = worst_ulp.max(d);
                assert!(
                    d as f64 <= ulps,
                    "{cols}: row {row} col {c}: {d} ulp vs reference (shift {k})"
                );
            }
        }
        (worst_ulp, worst_rel, worst_ulp_rel)
    }

    /// Asserts MBLN's bounds elementwise (input shift `k`, P0's `γ`, `β`): `1 + ⌈w⌉` ulps
    /// of the integer reference and [`mbln_bound_k`] of the real function.
    fn assert_mbln(ln: LayerNorm, o: &Outcome, gamma: &[f64], beta: &[f64], k: u32) {
        let sc = Scales::of(ln.cols, k);
        for i in 0..o.got.len() {
            let c = i % ln.cols;
            let w = (gamma[c] * ln.mbln_fold(&sc)).abs();
            let ulps = 1 + libm::ceil(w) as i64;
            assert!(
                (o.got[i] - o.want[i]).abs() <= ulps,
                "{i}: {} vs {}",
                o.got[i],
                o.want[i]
            );
            let b = mbln_bound_k(ln, gamma[c], o.exact[i] - beta[c], k);
            assert!(
                (o.gf[i] - o.exact[i]).abs() <= b,
                "{i}: {} vs {} (bound {b})",
                o.gf[i],
                o.exact[i]
            );
        }
    }

    #[test]
    fn accurate_layernorm_is_within_bounds() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(21);
        let (rows_n, cols) = (10, 64);
        let ln = accurate(rows_n, cols, 1e-12);
        let xs = enc(&rows(&mut g, rows_n, cols));
        let (gamma, beta) = affine_params(&mut g, cols);
        let bare = LayerNorm {
            affine: false,
            ..ln
        };
        for (ln, aff) in [
            (bare, None),
            (ln, None),
            (ln, Some(ln_affine(&gamma, &beta))),
        ] {
            let o = run_ln(&mut p0, &mut p1, &ln, &xs, aff.as_ref(), &mut g, 0);
            assert_eq!(o.want, ln.reference(r, &xs, aff.as_ref()));
            eprintln!(
                "LN accurate {rows_n}x{cols} (elementwise affine {}, given {}): {}",
                ln.affine,
                aff.is_some(),
                o.summary(o.got.len())
            );
            let (worst_ulp, _, _) = assert_accurate(&ln, &o, aff.as_ref(), 0, rows_n);
            eprintln!("LN accurate: max |protocol − reference| = {worst_ulp} ulp");
        }
    }

    #[test]
    fn accurate_layernorm_at_bert_widths() {
        // ρ = cols/2^t ≠ 1 (384 = 0.75·2^9, 768 = 0.75·2^10, 96): the scale must cancel.
        let (mut p0, mut p1, _) = pair();
        let mut g = rng(25);
        for (rows_n, cols) in [(5, 96), (5, 384), (2, 768)] {
            let ln = accurate(rows_n, cols, 1e-12);
            let xs = enc(&rows(&mut g, rows_n, cols));
            let (gamma, beta) = affine_params(&mut g, cols);
            let aff = ln_affine(&gamma, &beta);
            let o = run_ln(&mut p0, &mut p1, &ln, &xs, Some(&aff), &mut g, 0);
            eprintln!("LN accurate {rows_n}x{cols}: {}", o.summary(o.got.len()));
            assert_accurate(&ln, &o, Some(&aff), 0, rows_n);
        }
    }

    /// Costs at BERT-base's LayerNorm shape (run with `--ignored`).
    #[test]
    #[ignore]
    fn bert_shape_costs() {
        let (mut p0, mut p1, _) = pair();
        let mut g = rng(26);
        let (rows_n, cols) = (128, 768);
        let xf = rows(&mut g, rows_n, cols);
        let xs = enc(&xf);
        let (gamma, beta) = affine_params(&mut g, cols);
        let aff = ln_affine(&gamma, &beta);
        for kind in [LnKind::Accurate, LnKind::Mbln { l: 1.0, rd: 24.0 }] {
            let ln = LayerNorm {
                kind,
                ..accurate(rows_n, cols, 1e-12)
            };
            for k in [0, 3] {
                let o = run_ln(&mut p0, &mut p1, &ln, &xs, Some(&aff), &mut g, k);
                let (bytes, off, on, cots) = o.cost;
                eprintln!("LN {kind:?} shift {k} {rows_n}x{cols}: {bytes:.0} B/elem, {cots:.1} COT/elem, rounds offline {off} online {on}");
            }
        }
    }

    #[test]
    fn zero_variance_and_saturation() {
        let (mut p0, mut p1, _) = pair();
        let mut g = rng(22);
        let cols = 64;
        let (gamma, beta) = affine_params(&mut g, cols);
        let aff = ln_affine(&gamma, &beta);
        for eps in [1e-12, 1e-5] {
            // constant rows (variance 0 ≤ ε), then rows of variance 2^18 > var_hi (|x| = 512)
            let mut xf = Vec::new();
            for v in [0.0, 224.0, -100.5, 3.25] {
                xf.extend(core::iter::repeat_n(v, cols));
            }
            for s in [1.0, -1.0] {
                xf.extend((0..cols).map(|c| if c % 2 == 0 { 512.0 * s } else { -512.0 * s }));
            }
            let ln = accurate(xf.len() / cols, cols, eps);
            let xs = enc(&xf);
            let got = run_ln(&mut p0, &mut p1, &ln, &xs, Some(&aff), &mut g, 0).got;
            let gf = dec(&got);
            assert!(gf.iter().all(|v| v.is_finite()));
            for k in 0..4 {
                for c in 0..cols {
                    let e = (gf[k * cols + c] - beta[c]).abs();
                    assert!(
                        e <= libm::exp2(-9.0) * gamma[c] + libm::exp2(-12.0),
                        "constant row {k}: {e}"
                    );
                }
            }
            // saturated: z = ±512/√var_hi with var_hi = 2^16/ρ³ (ρ = 1 here): ±2
            for k in 4..6 {
                for c in 0..cols {
                    let z = (xf[k * cols + c]) / 256.0;
                    let want = gamma[c] * z + beta[c];
                    let e = (gf[k * cols + c] - want).abs();
                    assert!(
                        e <= 2e-3 * gamma[c] + 2e-4,
                        "saturated row {k}: {} vs {want}",
                        gf[k * cols + c]
                    );
                }
            }
        }
    }

    #[test]
    fn a_wrong_coefficient_breaks_the_bound() {
        let r = RingCfg::ENCFORMER;
        let mut g = rng(23);
        let (rows_n, cols) = (5, 64);
        let ln = accurate(rows_n, cols, 1e-12);
        let xs = enc(&rows(&mut g, rows_n, cols));
        let xq = dec(&xs);
        let exact = ln.f64_reference(&xq, None);
        let check = |fudge: f64| {
            let got = dec(&ln.reference_with(r, &xs, None, fudge, 0, &[]));
            got.iter()
                .zip(&exact)
                .all(|(&a, &b)| (a - b).abs() <= bound(b, 0.0, 1.0, 1.0, 64, 0))
        };
        assert!(check(1.0));
        assert!(
            !check(1.003),
            "a 0.3% error of the normalizer must fail the bound"
        );
        let mb = LayerNorm {
            kind: LnKind::Mbln { l: 2.0, rd: 3.0 },
            ..ln
        };
        let ex = mb.f64_reference(&xq, None);
        let wrong = LayerNorm {
            kind: LnKind::Mbln { l: 2.0, rd: 3.01 },
            ..ln
        };
        let got = dec(&wrong.reference(r, &xs, None));
        let worst = got
            .iter()
            .zip(&ex)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst > mbln_bound(mb, 1.0, 100.0), "{worst}");
    }

    fn mbln_bound(ln: LayerNorm, gamma: f64, y: f64) -> f64 {
        mbln_bound_k(ln, gamma, y, 0)
    }

    fn mbln_bound_k(ln: LayerNorm, gamma: f64, y: f64, k: u32) -> f64 {
        let sc = Scales::of(ln.cols, k);
        let w = (gamma * ln.mbln_fold(&sc)).abs();
        (2.0 + 1.5 * w) * libm::exp2(-13.0) + y.abs() * libm::exp2(-20.0) / w
    }

    #[test]
    fn mbln_matches_its_formula_and_counts_rounds() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(24);
        let (rows_n, cols) = (8, 64);
        let xs = enc(&rows(&mut g, rows_n, cols));
        let (gamma, beta) = affine_params(&mut g, cols);
        let aff = ln_affine(&gamma, &beta);
        for (l, rd) in [(1.0, 24.0), (0.5, 6.0)] {
            let ln = LayerNorm {
                kind: LnKind::Mbln { l, rd },
                ..accurate(rows_n, cols, 0.0)
            };
            let o = run_ln(&mut p0, &mut p1, &ln, &xs, Some(&aff), &mut g, 0);
            let (exact, bytes) = (&o.exact, o.cost.0);
            eprintln!(
                "MBLN l={l} rd={rd} {rows_n}x{cols}: {}",
                o.summary(o.got.len())
            );
            assert_mbln(ln, &o, &gamma, &beta, 0);
            // no elementwise affine: the public factor, a local product
            let bare = LayerNorm {
                affine: false,
                ..ln
            };
            let ob = run_ln(&mut p0, &mut p1, &bare, &xs, None, &mut g, 0);
            let (bb, bon) = (ob.cost.0, ob.cost.2);
            eprintln!("MBLN without affine: {bb:.0} B/elem, {bon} online rounds");
            assert!(bb < bytes, "the bare form must be cheaper: {bb} vs {bytes}");
            assert_mbln(
                bare,
                &ob,
                &alloc::vec![1.0; cols],
                &alloc::vec![0.0; cols],
                0,
            );
            // the 0-round form: exact D, no communication
            let (x0, x1) = share(r, &xs, &mut g);
            let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
            let (d0, k0) = ln.mbln_local(r, &x0).unwrap();
            let (d1, _) = ln.mbln_local(r, &x1).unwrap();
            let (s0, s1) = (m0.read().offline_online(), m1.read().offline_online());
            assert_eq!(
                (s0.bytes_sent, s1.bytes_sent, s0.rounds, s1.rounds),
                (0, 0, 0, 0)
            );
            let d = open(r, &d0, &d1);
            for (k, row) in xs.chunks(cols).enumerate() {
                let s: i64 = row.iter().sum();
                for c in 0..cols {
                    assert_eq!(d[k * cols + c], cols as i64 * row[c] - s);
                    let y = gamma[c] * k0 * fixed::decode(d[k * cols + c], 13) + beta[c];
                    assert!((y - exact[k * cols + c]).abs() < 1e-9);
                }
            }
            eprintln!("MBLN 0-round form (mbln_local): 0 B, 0 rounds");
        }
    }

    #[test]
    fn references_with_beta_never_panic_and_debug_hides_the_affine() {
        let r = RingCfg::ENCFORMER;
        // Row [a, b, b, b]: D = 3(a − b), ⌊D/4⌉ = i64::MAX; with γ = 1 (MBLN, l·R_d = 1)
        // the output before β is i64::MAX, and + β used to overflow.
        let (a, b) = (7_686_143_364_045_646_505i64, -(1i64 << 62));
        let gamma = [1.0; 4];
        let beta = [1.0; 4];
        let aff = ln_affine(&gamma, &beta);
        for kind in [LnKind::Mbln { l: 1.0, rd: 1.0 }, LnKind::Accurate] {
            let ln = LayerNorm {
                kind,
                ..accurate(3, 4, 1e-5)
            };
            let x = [
                a,
                b,
                b,
                b,
                i64::MAX,
                i64::MIN,
                0,
                -1,
                i64::MIN,
                i64::MIN,
                5,
                7,
            ];
            assert_eq!(ln.reference(r, &x, Some(&aff)).len(), 12);
        }
        let secret = [0.123_456_789; 4];
        let s = alloc::format!("{:?}", ln_affine(&secret, &secret));
        assert!(!s.contains("0.123"), "{s}");
    }

    #[test]
    fn no_rows_and_single_columns() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(77);
        for kind in [LnKind::Accurate, LnKind::Mbln { l: 1.0, rd: 2.0 }] {
            for (rows, cols) in [(0usize, 4usize), (3, 1)] {
                let ln = LayerNorm {
                    kind,
                    ..accurate(rows, cols, 1e-5)
                };
                let xs = enc(&alloc::vec![1.5; rows * cols]);
                let got = run_ln(&mut p0, &mut p1, &ln, &xs, None, &mut g, 0).got;
                let want = ln.reference(r, &xs, None);
                assert_eq!(got.len(), rows * cols);
                // One column: x − μ = 0, so y = β = 0 (up to the faithful truncations).
                assert_within(&got, &want, 2, "LayerNorm edge shape");
                assert!(got.iter().all(|&v| v.abs() <= 2), "{got:?}");
            }
        }
    }

    #[test]
    fn typed_errors_on_bad_shapes() {
        let r = RingCfg::ENCFORMER;
        let ok = accurate(2, 4, 1e-5);
        assert!(ok.validate(r).is_ok());
        assert!(LayerNorm { cols: 0, ..ok }.validate(r).is_err());
        assert!(LayerNorm { cols: 5000, ..ok }.validate(r).is_err());
        assert!(LayerNorm {
            eps: f64::NAN,
            ..ok
        }
        .validate(r)
        .is_err());
        assert!(LayerNorm { eps: -1.0, ..ok }.validate(r).is_err());
        assert!(LayerNorm {
            kind: LnKind::Mbln { l: 0.0, rd: 1.0 },
            ..ok
        }
        .validate(r)
        .is_err());
        assert!(ok.validate(RingCfg::new(43, 12).unwrap()).is_err());
        let (mut p0, mut p1, _) = pair();
        let x = RingShares::new(alloc::vec![0; 8]);
        let short = RingShares::new(alloc::vec![0; 7]);
        let gamma = [1.0; 3];
        let beta = [0.0; 4];
        let bad = ln_affine(&gamma, &beta);
        let e = first_error(p0.channel(), ok.run(&mut p0, &x, Some(&bad)));
        assert!(matches!(e, MpcError::LengthMismatch { .. }));
        let e = first_error(p1.channel(), ok.run(&mut p1, &short, None));
        assert!(matches!(e, MpcError::LengthMismatch { .. }));
        let (_q0, mut q1, _) = pair();
        let big = [100.0; 4];
        let badg = ln_affine(&big, &beta);
        // a block without an elementwise affine refuses γ and β at the owner
        let bare = LayerNorm {
            affine: false,
            ..ok
        };
        let one = [1.0; 4];
        let fine = ln_affine(&one, &beta);
        // |γ| > GAMMA_MAX, and an affine given to a block without one: refused at P0
        for (ln, aff) in [(ok, &badg), (bare, &fine)] {
            let (mut q0, _q1b, _) = pair();
            let e = first_error(q0.channel(), ln.run(&mut q0, &x, Some(aff)));
            assert!(matches!(e, MpcError::InvalidInput(_)));
        }
        assert!(bare.reference(r, &[0; 8], Some(&fine)).is_empty());
        assert!(bare.f64_reference(&[0.0; 8], Some(&fine)).is_empty());
        assert_eq!(bare.reference(r, &[0; 8], None).len(), 8);
        let _ = &mut q1;
        assert!(ok.reference(r, &[0; 7], None).is_empty());
        assert!(ok.f64_reference(&[0.0; 7], None).is_empty());
        assert!(ok.f64_reference(&[0.0; 8], Some(&bad)).is_empty());
        assert_eq!(ok.f64_reference(&[0.0; 8], None).len(), 8);
        let huge = LayerNorm {
            rows: usize::MAX,
            ..ok
        };
        assert!(huge.f64_reference(&[0.0; 8], None).is_empty());
        // the references never panic, whatever the integers
        let wild = [
            i64::MAX,
            i64::MIN,
            0,
            -1,
            i64::MAX,
            i64::MIN,
            1 << 50,
            -(1 << 50),
        ];
        assert_eq!(ok.reference(r, &wild, None).len(), 8);
        let mb = LayerNorm {
            kind: LnKind::Mbln { l: 1.0, rd: 1.0 },
            ..ok
        };
        assert_eq!(mb.reference(r, &wild, None).len(), 8);
        assert!(ok.mbln_local(r, &x).is_err());
    }

    /// GPT-2-like rows up to ±3000: wide, one outlier in small entries, a large mean,
    /// moderate, and constant rows (variance 0).
    fn big_rows(g: &mut ChaCha20Rng, cols: usize) -> (Vec<f64>, usize) {
        let mut x = Vec::new();
        for r in 0..4 {
            for c in 0..cols {
                x.push(match r {
                    0 => unif(g, -3000.0, 3000.0),
                    1 if c == 5 => 3000.0,
                    1 => unif(g, -10.0, 10.0),
                    2 => unif(g, -8.0, 8.0) + 2500.0,
                    _ => unif(g, -20.0, 20.0),
                });
            }
        }
        for v in [3000.0, -2999.5, 0.0] {
            x.extend(core::iter::repeat_n(v, cols));
        }
        (x, 4)
    }

    #[test]
    fn large_inputs_with_an_input_shift() {
        let (mut p0, mut p1, _) = pair();
        let mut g = rng(31);
        let k = LayerNorm::shift_for(3000.0);
        assert_eq!(k, 3);
        for cols in [64, 384] {
            let (xf, varied) = big_rows(&mut g, cols);
            let rows_n = xf.len() / cols;
            let ln = accurate(rows_n, cols, 1e-5);
            let xs = enc(&xf);
            let (gamma, beta) = affine_params(&mut g, cols);
            let aff = ln_affine(&gamma, &beta);
            let o = run_ln(&mut p0, &mut p1, &ln, &xs, Some(&aff), &mut g, k);
            // the bounds hold for var ≥ 2^{2k−2}
            for xr in o.xq.chunks(cols).take(varied) {
                assert!(variance(xr) >= libm::exp2(2.0 * k as f64 - 2.0));
            }
            let (worst_ulp, worst_rel, worst_ulp_rel) =
                assert_accurate(&ln, &o, Some(&aff), k, varied);
            eprintln!(
                "LN accurate, shift {k}, |x| <= 3000, {rows_n}x{cols}: {} (worst err/bound {worst_rel:.2}); max |protocol − reference_scaled| = {worst_ulp} ulp (worst ulp/bound {worst_ulp_rel:.2})",
                o.summary(varied * cols)
            );
        }
    }

    #[test]
    fn rmsnorm_is_within_bounds_and_keeps_the_mean() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(41);
        // 576 = SmolLM2's width (ρ = 0.5625); rows with a mean of 40 and of −3 among them.
        for (rows_n, cols) in [(10, 64), (5, 576)] {
            let ln = LayerNorm {
                kind: LnKind::Rms,
                ..accurate(rows_n, cols, 1e-5)
            };
            let xs = enc(&rows(&mut g, rows_n, cols));
            let (gamma, _) = affine_params(&mut g, cols);
            let zero = alloc::vec![0.0; cols];
            let aff = ln_affine(&gamma, &zero);
            let o = run_ln(&mut p0, &mut p1, &ln, &xs, Some(&aff), &mut g, 0);
            assert_eq!(o.want, ln.reference(r, &xs, Some(&aff)));
            let (worst_ulp, worst_rel, _) = assert_accurate(&ln, &o, Some(&aff), 0, rows_n);
            eprintln!(
                "RMSNorm {rows_n}x{cols}: {} (worst err/bound {worst_rel:.2}); max |protocol − reference| = {worst_ulp} ulp",
                o.summary(o.got.len())
            );
            // The mean is kept: on the row of mean 40, LayerNorm's output is far from it.
            let row = 2 * cols..3 * cols;
            let centred = accurate(rows_n, cols, 1e-5).f64_reference(&o.xq, Some(&aff));
            let apart = row
                .clone()
                .map(|i| (centred[i] - o.gf[i]).abs())
                .fold(0.0, f64::max);
            assert!(apart > 1.0, "RMSNorm ran as LayerNorm ({apart})");
        }
        // Residual streams up to ±3000 with the input shift (the constant rows included:
        // their mean square is that of the row).
        let k = LayerNorm::shift_for(3000.0);
        let cols = 576;
        let (mut xf, _) = big_rows(&mut g, cols);
        xf.truncate(6 * cols); // the zero row has no scale to normalize
        let ln = LayerNorm {
            kind: LnKind::Rms,
            ..accurate(6, cols, 1e-5)
        };
        let (gamma, _) = affine_params(&mut g, cols);
        let zero = alloc::vec![0.0; cols];
        let aff = ln_affine(&gamma, &zero);
        let o = run_ln(&mut p0, &mut p1, &ln, &enc(&xf), Some(&aff), &mut g, k);
        let (worst_ulp, worst_rel, _) = assert_accurate(&ln, &o, Some(&aff), k, 6);
        eprintln!(
            "RMSNorm, shift {k}, |x| <= 3000, 6x{cols}: {} (worst err/bound {worst_rel:.2}); {worst_ulp} ulp",
            o.summary(o.got.len())
        );
    }

    /// Massive activations (SmolLM2's residual stream: `2.4·10⁴` in one column of the first
    /// position, tens elsewhere): the widening planned from the calibrated bounds keeps both
    /// kinds of row within `2^{−9}` of the real function (and within a few ulps of
    /// [`LayerNorm::reference_wide`]), where the one shift that covers the large column
    /// clamps the small rows' variance and misses them by far.
    #[test]
    fn rmsnorm_widened_columns_keep_the_small_rows() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(47);
        let cols = 576;
        let ln = LayerNorm {
            rows: 3,
            cols,
            eps: 1e-5,
            kind: LnKind::Rms,
            affine: false,
        };
        let mut xf = Vec::with_capacity(3 * cols);
        for row in 0..3 {
            for c in 0..cols {
                xf.push(match (row, c) {
                    (0, 507) => 24_000.0,
                    (0, _) => unif(&mut g, -60.0, 60.0),
                    (1, _) => unif(&mut g, -5.0, 5.0),
                    _ => unif(&mut g, -40.0, 40.0),
                });
            }
        }
        let mut col_max = alloc::vec![2.0 * 60.0; cols];
        col_max[507] = 2.0 * 24_000.0;
        let sq = xf[..cols].iter().map(|v| v * v).sum::<f64>();
        let (k, wide) = ln.shifts_for(&col_max, 4.0 * sq);
        assert_eq!((k, wide[507], wide[0]), (2, 5, 0));
        let xs = enc(&xf);
        let (x0, x1) = share(r, &xs, &mut g);
        let (o0, o1) = both!(
            p0,
            p1,
            ln.run_wide(&mut p0, &x0, k, &wide).await,
            ln.run_wide(&mut p1, &x1, k, &wide).await
        );
        let got = open(r, &o0, &o1);
        let want = ln.reference_wide(r, &xs, k, &wide);
        let exact = ln.f64_reference(&dec(&xs), None);
        // The module's bounds elementwise, with σ the row's RMS, plus the widened columns'
        // term ("Massive activations"): `|z|·Σ_w |x_c|·δ_c / Σ x²` with `δ_c` one ulp of the
        // column's coarser `d_h` (once against the real function, twice against the
        // reference).
        let gf = dec(&got);
        let sc = Scales::of(cols, k);
        let (mut ulps, mut err) = (0i64, 0.0f64);
        for (row, xr) in dec(&xs).chunks(cols).enumerate() {
            let ss = xr.iter().map(|v| v * v).sum::<f64>();
            let rms = libm::sqrt(ss / cols as f64);
            let coarse: f64 = (0..cols)
                .filter(|&c| wide[c] > 0)
                .map(|c| xr[c].abs() * libm::exp2((k + wide[c]) as f64 - 10.0) / sc.rho)
                .sum::<f64>()
                / ss;
            for c in 0..cols {
                let i = row * cols + c;
                let u = (got[i] - want[i]).abs();
                let e = (gf[i] - exact[i]).abs();
                let z = exact[i].abs();
                let ub = ulp_bound(1.0, exact[i], rms, cols, k) + 2.0 * z * coarse * 8192.0;
                assert!(u as f64 <= libm::ceil(ub), "row {row} col {c}: {u} ulps");
                let eb = bound(exact[i], 0.0, 1.0, rms, cols, k) + z * coarse;
                assert!(e <= eb, "row {row} col {c}: {e}");
                (ulps, err) = (ulps.max(u), err.max(e));
            }
        }
        eprintln!("RMSNorm widened (k {k}, column 507 by 5): {ulps} ulp, max err {err:.2e}");
        assert!(err < libm::exp2(-9.0), "max err {err}");
        // One shift for the large column (7) clamps the small row (RMS ≈ 2.9).
        let one = ln.reference_scaled(r, &xs, None, 7);
        let miss = dec(&one[cols..2 * cols])
            .iter()
            .zip(&exact[cols..2 * cols])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(miss > 0.1, "shift 7 on the small row: {miss}");
        // Refused: a widening of the wrong length, past the row length's largest shift, or
        // on MBLN.
        assert!(ln.validate_wide(r, k, &wide[1..]).is_err());
        assert!(ln.validate_wide(r, 3, &alloc::vec![5; cols]).is_err());
        let mbln = LayerNorm {
            kind: LnKind::Mbln { l: 1.0, rd: 1.0 },
            ..ln
        };
        assert!(mbln.validate_wide(r, 0, &wide).is_err());
        assert!(ln
            .reference_wide(r, &xs, 3, &alloc::vec![5; cols])
            .is_empty());
    }

    #[test]
    fn shift_for_covers_the_calibrated_range_and_k0_is_out_of_it() {
        assert_eq!(LayerNorm::shift_for(0.0), 0);
        assert_eq!(LayerNorm::shift_for(512.0), 0);
        assert_eq!(LayerNorm::shift_for(-512.5), 1);
        assert_eq!(LayerNorm::shift_for(1024.0), 1);
        assert_eq!(LayerNorm::shift_for(4096.0), 3);
        assert_eq!(LayerNorm::shift_for(4096.1), 4);
        assert!(LayerNorm::shift_for(3000.0) >= 3);
        assert_eq!(LayerNorm::shift_for(f64::NAN), SHIFT_MAX);
        assert_eq!(LayerNorm::shift_for(f64::INFINITY), SHIFT_MAX);
        assert_eq!(LayerNorm::shift_for(1e30), SHIFT_MAX);
        let r = RingCfg::ENCFORMER;
        let mut ln = accurate(7, 64, 1e-5);
        for (cols, m) in [(1, 17), (768, 7), (1024, 7), (1600, 6), (4096, 5)] {
            ln.cols = cols;
            assert_eq!(ln.max_shift(), m, "{cols}");
            assert!(ln.validate_scaled(r, m).is_ok());
            assert!(ln.validate_scaled(r, m + 1).is_err());
        }
        ln.cols = 64;
        let (mut p0, _p1, _) = pair();
        let mut g = rng(32);
        let (xf, varied) = big_rows(&mut g, 64);
        let xs = enc(&xf);
        // a shift the row length does not admit: a typed error, and an empty reference
        assert!(ln.reference_scaled(r, &xs, None, 12).is_empty());
        let x = RingShares::new(alloc::vec![0; xs.len()]);
        let e = first_error(p0.channel(), ln.run_scaled(&mut p0, &x, None, 12));
        assert!(matches!(e, MpcError::InvalidConfig(_)));
        let (mut p0, mut p1, _) = pair();
        // k = 0 on |x| up to 3000 is outside the block's domain (|x| ≤ 2^9): the shares
        // cannot show it, the square wraps and the output is wrong; the caller must use
        // shift_for of its calibrated maximum.
        let o0 = run_ln(&mut p0, &mut p1, &ln, &xs, None, &mut g, 0);
        let (exact, c0) = (&o0.exact, o0.cost);
        let n = varied * 64;
        let e = ErrStats::of(&o0.gf[..n], &exact[..n]);
        eprintln!(
            "LN accurate, shift 0 (out of range), |x| <= 3000: max err {:.3e}",
            e.max_abs
        );
        assert!(e.max_abs > 0.1, "k = 0 was expected to fail at |x| = 3000");
        let o3 = run_ln(&mut p0, &mut p1, &ln, &xs, None, &mut g, 3);
        let c3 = o3.cost;
        let e = ErrStats::of(&o3.gf[..n], &exact[..n]);
        eprintln!(
            "costs (B/elem, offline rounds, online rounds, COT/elem): k = 0 {c0:?}, k = 3 {c3:?}"
        );
        // the shift costs no COTs, the framing of one more message (< 1% bytes), 2 rounds
        assert_eq!((c3.1, c3.3), (c0.1, c0.3));
        assert!(c3.0 < c0.0 * 1.01, "{} vs {} B/elem", c3.0, c0.0);
        assert_eq!(c3.2, c0.2 + 2);
        assert!(e.max_abs < 0.01, "{}", e.max_abs);
    }

    #[test]
    fn mbln_with_an_input_shift() {
        let (mut p0, mut p1, _) = pair();
        let mut g = rng(33);
        let cols = 64;
        let (xf, _) = big_rows(&mut g, cols);
        let rows_n = xf.len() / cols;
        let xs = enc(&xf);
        let (gamma, beta) = affine_params(&mut g, cols);
        let aff = ln_affine(&gamma, &beta);
        // |x − μ| ≤ 6000 needs 2^{10+k} > 6000, k = 3; |y − β| ≤ 2.5·6000/100 < 2^8
        let k = 3;
        let ln = LayerNorm {
            kind: LnKind::Mbln { l: 1.0, rd: 100.0 },
            ..accurate(rows_n, cols, 0.0)
        };
        let o = run_ln(&mut p0, &mut p1, &ln, &xs, Some(&aff), &mut g, k);
        eprintln!(
            "MBLN shift {k}, |x| <= 3000, {rows_n}x{cols}: {}",
            o.summary(o.got.len())
        );
        assert_mbln(ln, &o, &gamma, &beta, k);
    }
}
