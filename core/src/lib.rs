//! Veil core: RNS-CKKS, two-party MPC and packing over an abstract polynomial backend.
#![no_std]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod error;
pub mod math;
pub mod params;

pub use error::{Error, Result};
pub use params::{CkksParams, CkksParamsLiteral};
pub mod backend;
pub use backend::{Basis, Domain, PolyBackend};
pub mod ckks;
pub mod packing;
pub mod transformer;
