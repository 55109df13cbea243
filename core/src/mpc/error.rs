//! Typed errors of the MPC engine. Nothing the peer sends can make this crate
//! panic: every decoding step returns one of these errors instead.

use crate::mpc::kind::MsgKind;
use core::fmt;

/// What is wrong with a message that arrived with the expected tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Defect {
    /// The payload length differs from the one the expected shape implies.
    Length {
        /// Bytes the shape implies.
        expected: usize,
        /// Bytes that arrived.
        found: usize,
    },
    /// The bits after the last packed element of the final byte are not zero
    /// (every encoder writes them as zero, so the encoding is canonical).
    Padding,
    /// Element `index` is out of range (a `Z_q` element `≥ q`).
    OutOfRange {
        /// Index of the first offending element.
        index: usize,
    },
    /// A count field differs from the count the receiver expects.
    Count {
        /// Count the receiver expects.
        expected: usize,
        /// Count the message declares.
        found: usize,
    },
    /// A length field points past the end of the payload.
    Truncated {
        /// Bytes the length fields require.
        needed: usize,
        /// Bytes that arrived.
        found: usize,
    },
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Defect::Length { expected, found } => {
                write!(f, "length {found} bytes, expected {expected}")
            }
            Defect::Padding => write!(f, "non-zero padding bits"),
            Defect::OutOfRange { index } => write!(f, "element {index} out of range"),
            Defect::Count { expected, found } => write!(f, "count {found}, expected {expected}"),
            Defect::Truncated { needed, found } => {
                write!(f, "truncated: {needed} bytes needed, {found} present")
            }
        }
    }
}

/// Errors of the MPC protocols.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MpcError {
    /// A message arrived with another tag than the protocol step expects.
    UnexpectedMessage {
        /// Message the protocol waits for.
        expected: MsgKind,
        /// Tag that arrived (possibly one of no known message).
        got: u16,
    },
    /// A message had the right tag but its payload does not decode.
    Malformed {
        /// Kind of the offending message.
        msg: MsgKind,
        /// What was wrong.
        defect: Defect,
    },
    /// A curve point sent by the peer does not decode.
    InvalidPoint {
        /// Message that carried it.
        msg: MsgKind,
        /// Index of the point in the message.
        index: usize,
    },
    /// Configuration out of the supported range.
    InvalidConfig(&'static str),
    /// Inputs of a protocol have inconsistent values.
    InvalidInput(&'static str),
    /// Inputs of a protocol have inconsistent lengths.
    LengthMismatch {
        /// Which input.
        what: &'static str,
        /// Length required.
        expected: usize,
        /// Length given.
        found: usize,
    },
    /// A protocol that needs OT (or the common seed) was called before
    /// [`crate::mpc::Party::setup`].
    NotSetUp,
    /// The modulus `q` is not supported (`q ≥ 2^124` or `q < 2`).
    ModulusTooLarge,
    /// An earlier protocol run on this party failed; its OT and PRG state is
    /// out of sync with the peer, so the party refuses further work (create a
    /// new party and run setup again).
    Poisoned,
    /// A [`crate::mpc::Session`] was polled after it finished.
    SessionFinished,
    /// [`crate::mpc::channel::run_pair`]: both parties wait for a message.
    Deadlock,
}

impl fmt::Display for MpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MpcError::UnexpectedMessage { expected, got } => {
                write!(
                    f,
                    "unexpected message: expected {expected}, got tag {got:#06x}"
                )
            }
            MpcError::Malformed { msg, defect } => write!(f, "malformed {msg}: {defect}"),
            MpcError::InvalidPoint { msg, index } => {
                write!(f, "invalid curve point {index} in {msg}")
            }
            MpcError::InvalidConfig(s) => write!(f, "invalid configuration: {s}"),
            MpcError::InvalidInput(s) => write!(f, "invalid input: {s}"),
            MpcError::LengthMismatch {
                what,
                expected,
                found,
            } => write!(f, "{what}: length {found}, expected {expected}"),
            MpcError::NotSetUp => write!(f, "OT not set up: call Party::setup first"),
            MpcError::ModulusTooLarge => write!(f, "modulus q must satisfy 2 <= q < 2^124"),
            MpcError::Poisoned => {
                write!(f, "party poisoned by an earlier failure; set up a new one")
            }
            MpcError::SessionFinished => write!(f, "session already finished"),
            MpcError::Deadlock => write!(f, "deadlock: both parties wait"),
        }
    }
}

impl core::error::Error for MpcError {}

/// Result alias of this module.
pub type Result<T> = core::result::Result<T, MpcError>;

/// `Err(LengthMismatch)` unless `found == expected`.
pub(crate) fn expect_len(what: &'static str, expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(MpcError::LengthMismatch {
            what,
            expected,
            found,
        })
    }
}
