//! Host side of the MPC engine: the driver that runs sans-IO protocol sessions over a
//! [`crate::transport::Transport`]. The `veil-bench mpc` benchmark is in `veil-bench`.

pub mod driver;

pub use driver::{drive, run_session, DriverError};
