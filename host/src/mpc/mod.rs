//! Host side of the MPC engine: the driver that runs sans-IO protocol
//! sessions over a [`crate::transport::Transport`], and the `veil bench mpc`
//! benchmark.

pub mod bench;
pub mod cli;
pub mod driver;

pub use bench::{bench_mpc, BenchMpcOptions, BenchMpcReport, BenchRow, TransportKind};
pub use driver::{drive, run_session, DriverError};
