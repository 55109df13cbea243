//! Runs a [`Session`] over a [`Transport`]: polls the state machine, sends all
//! frames of a round as one batch, blocks (with the transport's timeout) for
//! the next peer frame. Any failure is reported to the peer with an abort
//! frame before returning, so both sides terminate with a typed error.

use crate::transport::{Transport, TransportError};
use std::future::Future;
use std::task::Poll;
use veil_core::mpc::{Channel, MpcError, Session};

/// Errors of a driven protocol run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverError {
    /// The transport failed (timeout, disconnect, malformed frame, abort).
    Transport(TransportError),
    /// The protocol rejected a message or its inputs.
    Protocol(MpcError),
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverError::Transport(e) => write!(f, "transport: {e}"),
            DriverError::Protocol(e) => write!(f, "protocol: {e}"),
        }
    }
}

impl std::error::Error for DriverError {}

/// Drives `s` to completion over `t`.
pub fn run_session<T>(mut s: Session<'_, T>, t: &mut dyn Transport) -> Result<T, DriverError> {
    loop {
        let p = s.poll();
        let out = s.take_outgoing();
        if !out.is_empty() {
            if let Err(e) = t.send(out) {
                s.poison();
                t.abort(&e.to_string());
                return Err(DriverError::Transport(e));
            }
        }
        match p {
            Poll::Ready(Ok(v)) => return Ok(v),
            Poll::Ready(Err(e)) => {
                t.abort(&e.to_string());
                return Err(DriverError::Protocol(e));
            }
            Poll::Pending => match t.recv() {
                Ok(f) => s.deliver(f),
                Err(e) => {
                    s.poison();
                    if !matches!(
                        e,
                        TransportError::PeerAborted(_) | TransportError::Disconnected
                    ) {
                        t.abort(&e.to_string());
                    }
                    return Err(DriverError::Transport(e));
                }
            },
        }
    }
}

/// Convenience: `drive(party.channel(), party.mul(&x, &y), &mut t)`.
pub fn drive<'a, T>(
    ch: Channel,
    fut: impl Future<Output = Result<T, MpcError>> + 'a,
    t: &mut dyn Transport,
) -> Result<T, DriverError> {
    run_session(Session::new(ch, fut), t)
}
