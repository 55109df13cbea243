//! Veil core: RNS-CKKS, two-party MPC and packing over an abstract polynomial backend.
#![no_std]
pub mod mpc;
extern crate alloc;
#[cfg(test)]
extern crate std;
