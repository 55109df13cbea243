//! Byte and round counters of one block run, offline and online, from the party's
//! channel ([`crate::mpc::Stats`]): start a [`Meter`] before the block, read it after.

use crate::mpc::{Channel, Stats};

/// Counts what a block sends and receives between [`Meter::start`] and
/// [`Meter::read`] (this party's view; the peer's meter sees the same bytes with
/// sent and received swapped).
#[derive(Clone, Debug)]
pub struct Meter {
    ch: Channel,
    before: Stats,
}

impl Meter {
    /// Starts counting on `ch`.
    pub fn start(ch: &Channel) -> Meter {
        Meter {
            ch: ch.clone(),
            before: ch.stats(),
        }
    }

    /// Bytes, frames and rounds per phase since [`Meter::start`].
    pub fn read(&self) -> Stats {
        self.ch.stats().since(&self.before)
    }
}
