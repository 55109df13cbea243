//! Typed errors of the MPC engine. Nothing the peer sends can make this crate
//! panic: every decoding step returns one of these errors instead.

use core::fmt;

/// Errors of the MPC protocols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MpcError {
    /// A message arrived with another tag than the protocol step expects.
    UnexpectedMessage {
        /// Tag the protocol waits for.
        expected: u16,
        /// Tag that arrived.
        got: u16,
    },
    /// A message had the right tag but a wrong length or encoding.
    Malformed {
        /// Tag of the offending message.
        tag: u16,
        /// What was wrong.
        what: &'static str,
    },
    /// A curve point sent by the peer does not decode.
    InvalidPoint,
    /// Configuration out of the supported range.
    InvalidConfig(&'static str),
    /// Inputs of a protocol have inconsistent lengths or values.
    InvalidInput(&'static str),
    /// A protocol that needs OT was called before [`crate::mpc::Party::setup`].
    NotSetUp,
    /// The modulus `q` is not supported (`q ≥ 2^124` or `q < 2`).
    ModulusTooLarge,
    /// An earlier protocol run on this party failed; its OT and PRG state is
    /// out of sync with the peer, so the party refuses further work (create a
    /// new party and run setup again).
    Poisoned,
}

impl fmt::Display for MpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MpcError::UnexpectedMessage { expected, got } => {
                write!(f, "unexpected message: expected tag {expected}, got {got}")
            }
            MpcError::Malformed { tag, what } => write!(f, "malformed message (tag {tag}): {what}"),
            MpcError::InvalidPoint => write!(f, "invalid curve point from peer"),
            MpcError::InvalidConfig(s) => write!(f, "invalid configuration: {s}"),
            MpcError::InvalidInput(s) => write!(f, "invalid input: {s}"),
            MpcError::NotSetUp => write!(f, "OT not set up: call Party::setup first"),
            MpcError::ModulusTooLarge => write!(f, "modulus q must satisfy 2 <= q < 2^124"),
            MpcError::Poisoned => {
                write!(f, "party poisoned by an earlier failure; set up a new one")
            }
        }
    }
}

impl core::error::Error for MpcError {}

/// Result alias of this module.
pub type Result<T> = core::result::Result<T, MpcError>;
