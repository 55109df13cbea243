//! Runs a [`Session`] over a [`Transport`]: polls the state machine, sends all
//! frames of a round as one batch, blocks (with the transport's timeout) for
//! the next peer frame. Any failure is reported to the peer with an abort
//! frame before returning, so both sides terminate with a typed error.

use crate::transport::{Transport, TransportError};
use std::future::Future;
use std::task::Poll;
use veil_core::convert::ProtocolError;
use veil_core::mpc::{Channel, MpcError, Session};

/// Errors of a driven protocol run.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum DriverError {
    /// The transport failed (timeout, disconnect, malformed frame, abort).
    Transport(TransportError),
    /// The MPC engine rejected a message or its inputs (also when a
    /// conversion protocol failed in its MPC layer).
    Protocol(MpcError),
    /// A conversion protocol failed outside its MPC layer (a ciphertext that
    /// does not decode or does not fit the plan, a CKKS error).
    Convert(ProtocolError),
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverError::Transport(e) => write!(f, "transport: {e}"),
            DriverError::Protocol(e) => write!(f, "protocol: {e}"),
            DriverError::Convert(e) => write!(f, "conversion protocol: {e}"),
        }
    }
}

impl std::error::Error for DriverError {}

impl From<MpcError> for DriverError {
    fn from(e: MpcError) -> Self {
        DriverError::Protocol(e)
    }
}

impl From<ProtocolError> for DriverError {
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Mpc(e) => DriverError::Protocol(e),
            e => DriverError::Convert(e),
        }
    }
}

/// Drives `s` to completion over `t`. `E` is the protocol's error type
/// ([`MpcError`], or [`ProtocolError`] of the conversion protocols).
pub fn run_session<T, E>(mut s: Session<'_, T, E>, t: &mut dyn Transport) -> Result<T, DriverError>
where
    E: From<MpcError> + std::fmt::Display,
    DriverError: From<E>,
{
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
                return Err(e.into());
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
pub fn drive<'a, T, E>(
    ch: Channel,
    fut: impl Future<Output = Result<T, E>> + 'a,
    t: &mut dyn Transport,
) -> Result<T, DriverError>
where
    E: From<MpcError> + std::fmt::Display + 'a,
    DriverError: From<E>,
{
    run_session(Session::new(ch, fut), t)
}
