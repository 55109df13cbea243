//! Veil core: RNS-CKKS, two-party MPC and packing over an abstract polynomial backend.
//!
//! `#![no_std]` with `alloc`. Layers import downward only:
//!
//! * [`math`] → [`params`] → [`backend`] ([`PolyBackend`], the only door to polynomial compute)
//!   → [`rlwe`] (ciphertexts, keys, encryption, key switching as composable steps) → [`ckks`]
//!   (encoder, evaluator with scales, precision statistics) → [`circuits`] (the executor every
//!   homomorphic kernel runs through: real CKKS or a counting dry run; linear transforms,
//!   Chebyshev polynomials and bootstrapping);
//! * [`serial`] (byte formats of parameters, keys and ciphertexts) over `rlwe`/`ckks`;
//! * [`mpc`] (two-party protocols over `Z_2^l`) beside them, importing none of the HE layers;
//! * [`nonlinear`] (the nonlinear blocks in MPC: softmax, LayerNorm, GELU, pooling) over `mpc` alone;
//! * [`packing`], [`convert`] (CKKS ↔ MPC share conversion), [`transformer`] and [`cnn`]
//!   (FEnc2's fragment-encoded convolutions) above;
//! * [`bert`] (private inference of a BERT-architecture encoder) on top, composing them.
#![no_std]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod backend;
pub mod bert;
pub mod circuits;
pub mod ckks;
pub mod cnn;
pub mod convert;
pub mod decoder;
pub mod error;
pub mod hybrid;
pub mod math;
pub mod mpc;
pub mod nonlinear;
pub mod packing;
pub mod params;
pub mod rlwe;
pub mod serial;
pub mod transformer;

pub use backend::{Basis, Domain, PolyBackend};
pub use error::{Error, Result};
pub use math::SecretRng;
pub use params::{CkksParams, CkksParamsLiteral};
