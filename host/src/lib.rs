//! Veil host.
pub mod mpc;
pub mod transport;
