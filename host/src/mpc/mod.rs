//! Host side of the MPC engine: the driver that runs sans-IO protocol sessions over a
//! [`crate::transport::Transport`], and what every model family's session does with its party
//! (set-up, timing). The `veil-bench mpc` benchmark is in `veil-bench`.

pub mod driver;
pub mod party;

pub use driver::{drive, run_session, DriverError};
pub use party::{channel_bytes, session_rng, setup_party, Clock, SetupError, Timed};
