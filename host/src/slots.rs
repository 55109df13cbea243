//! Session slots shared by the servers (`veil serve` for BERT and for CNNs): a bounded count of
//! sessions, each holding a [`Slot`] that gives its place back when dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Refusal threads for busy clients at most at once (beyond, a connection is closed at once).
pub(crate) const MAX_BUSY_THREADS: usize = 16;

/// Decrements a counter when dropped (also when a session thread panics).
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A place among `max`, or `None` when all are taken.
pub(crate) fn take_slot(c: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
    c.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
        (n < max).then_some(n + 1)
    })
    .ok()
    .map(|_| Slot(c.clone()))
}
