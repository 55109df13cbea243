//! Veil core: RNS-CKKS, two-party MPC and packing over an abstract polynomial backend.
#![no_std]
extern crate alloc;
#[cfg(test)]
extern crate std;
pub mod mpc;
