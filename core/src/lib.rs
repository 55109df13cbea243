//! Veil core: RNS-CKKS, two-party MPC and packing over an abstract polynomial backend.
//!
//! `#![no_std]` with `alloc`. Layers import downward only: `math` → `params` → `backend` →
//! `ckks` / `serial` → `packing` / `transformer`; `mpc` stands beside them. All polynomial
//! compute goes through [`PolyBackend`].
#![no_std]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod backend;
pub mod ckks;
pub mod convert;
pub mod error;
pub mod math;
pub mod mpc;
pub mod packing;
pub mod params;
pub mod serial;
pub mod transformer;

pub use backend::{Basis, Domain, PolyBackend};
pub use error::{Error, Result};
pub use params::{CkksParams, CkksParamsLiteral};
