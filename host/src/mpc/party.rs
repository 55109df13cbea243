//! What every model family's session does with its MPC party: make it with fresh OS entropy (and
//! the silent OT where asked), set it up over the transport, and time each block of the run.

use super::driver::{drive, DriverError};
use crate::transport::Transport;
use rand_core::{OsRng, SeedableRng};
use std::time::Instant;
use veil_core::mpc::ot::silent::SilentParams;
use veil_core::mpc::{MpcConfig, Party, PartyId};
use veil_core::SecretRng;

/// Why a session's party could not be set up.
#[derive(Clone, Debug, PartialEq)]
pub enum SetupError {
    /// The OS entropy source failed.
    Entropy(String),
    /// The party could not be made, or its base-OT setup failed.
    Mpc(DriverError),
}

/// A fresh ChaCha20 CSPRNG seeded from the OS, wiped when dropped.
pub fn session_rng() -> Result<SecretRng, SetupError> {
    SecretRng::from_rng(OsRng).map_err(|e| SetupError::Entropy(e.to_string()))
}

/// Party `id` under `config` on a fresh [`session_rng`] (the silent OT behind its pools when
/// `silent` is given), with [`Party::setup`] run over `t`: base OTs and a fresh common seed.
/// Returns the party and the setup's wall time, seconds.
pub fn setup_party(
    id: PartyId,
    config: MpcConfig,
    silent: Option<SilentParams>,
    t: &mut dyn Transport,
) -> Result<(Party<SecretRng>, f64), SetupError> {
    let t0 = Instant::now();
    let rng = session_rng()?;
    let p = match silent {
        Some(sp) => Party::with_silent_ot(id, config, rng, sp),
        None => Party::new(id, config, rng),
    };
    let mut p = p.map_err(|e| SetupError::Mpc(DriverError::Protocol(e)))?;
    drive(p.channel(), p.setup(), t).map_err(SetupError::Mpc)?;
    Ok((p, t0.elapsed().as_secs_f64()))
}

/// MPC bytes sent and received on `p`'s channel so far (setup included).
pub fn channel_bytes(p: &Party<SecretRng>) -> u64 {
    let s = p.channel().stats();
    [s.setup, s.offline, s.online]
        .iter()
        .map(|x| x.bytes_sent + x.bytes_recv)
        .sum()
}

/// One row of a run's per-block report: the engine's cost of the block with this party's wall
/// time.
#[derive(Clone, Debug, PartialEq)]
pub struct Timed<C> {
    /// The block's costs.
    pub cost: C,
    /// This party's wall time of the block (between its progress events), seconds.
    pub wall_s: f64,
}

/// Times a run's blocks: each row's wall time is the time since the previous one (or since
/// [`Clock::restart`]).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    last: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock started now.
    pub fn new() -> Self {
        Clock {
            last: Instant::now(),
        }
    }

    /// Starts the next block's time now.
    pub fn restart(&mut self) {
        self.last = Instant::now();
    }

    /// The row of the block that just ended.
    pub fn row<C: Clone>(&mut self, c: &C) -> Timed<C> {
        let now = Instant::now();
        let wall_s = (now - self.last).as_secs_f64();
        self.last = now;
        Timed {
            cost: c.clone(),
            wall_s,
        }
    }
}
