//! Nonlinear neural-network blocks in two-party MPC (EncFormer §IV-B, Appendix B):
//! the layers between the CKKS kernels, on additive shares over `Z_{2^ℓ}`.
//!
//! Each block is a batched sans-IO protocol over [`crate::mpc::Party`] (a whole tensor
//! per message and round), has a plain-integer reference computing the same function on
//! the same integers ([`fixed`]), states its valid input range and what it does outside
//! it (saturate, never wrap), and is checked against an `f64` reference with an asserted
//! error bound. The blocks import nothing from the CKKS layers.
//!
//! * [`ops`]: shared steps (fixed-point products with a chosen truncation, squaring,
//!   row-broadcast products, maxima, clamping).
//! * [`layernorm`]: LayerNorm over rows (accurate, by an exact centred sum and
//!   [`rsqrt`]; EncFormer's MBLN, local up to the owner's `γ`).
//! * [`rsqrt`]: reciprocal square root by normalization (comparisons against powers of
//!   two) and Newton's iteration, one value per row.
//! * [`cost`]: per-block byte and round counters, offline and online.
//! * [`exp`]: the exponential of non-positive values, saturated, by a quadratic base
//!   and repeated squaring at 20 fractional bits.
//! * [`recip`]: reciprocals in `[1, 2^{J+1})` by public-threshold normalization and a
//!   product series.
//! * [`softmax`]: masked softmax over rows, accurate and MBMax.
//! * [`gelu`]: GELU (BOLT's piecewise quartic, degree-7 erf and tanh fits), all in MPC or
//!   with EncFormer's CKKS-evaluated candidates.
//! * [`pool`]: 2×2 max pooling (and fused ReLU); [`quad`]: FEnc2's `a·x² + b·x + c`.
//! * [`silu`]: SiLU `x·σ(x)` (Llama-architecture MLPs), two degree-7 pieces beside ReLU on
//!   GELU's power tree.
//!
//! # Fixed point
//!
//! Blocks take and return values at the party's ring, `ℓ = 43`, `F = 13` (EncFormer). A
//! block may compute internally with more fractional bits where its values are small
//! (e.g. an exponential in `[0, 1]` at 20 bits: products `< 2^{40} < 2^{ℓ−2}`), and says
//! so; truncations are faithful ([`crate::mpc::TruncMode::KnownMsb`]), so each block's
//! error argument counts one ulp per truncation on the path.

pub mod cost;
pub mod exp;
pub mod fixed;
pub mod gelu;
pub mod layernorm;
pub mod ops;
pub mod pool;
pub mod quad;
pub mod recip;
pub mod rsqrt;
pub mod silu;
pub mod softmax;
#[cfg(test)]
pub(crate) mod testkit;
