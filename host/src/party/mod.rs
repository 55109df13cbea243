//! The two roles of private inference, and the messages between them.
//!
//! - The [`Client`] generates the CKKS keys. Its [`SecretKey`](veil_core::ckks::SecretKey) never
//!   leaves it: it sends the parameter set, the public key and the evaluation keys
//!   (relinearization and Galois keys), all seed-compressed in `veil_core::serial`'s formats, and
//!   decrypts what comes back.
//! - The [`Server`] is built from those bytes, or from a [`PublicKey`](veil_core::ckks::PublicKey)
//!   and [`EvaluationKeys`](veil_core::ckks::EvaluationKeys) directly. No function of it takes a
//!   secret key, and it stores none: the type system shows that the server never holds one.
//!
//! In the CKKS↔MPC conversions the client is MPC party P0 (the key holder) and the server P1 (the
//! ciphertext holder).
//!
//! # Messages
//!
//! Frames over [`crate::transport`], tags `0x0A01..=0x0A06` (no MPC protocol uses them), every
//! payload decoded as hostile bytes (exact lengths, typed errors):
//!
//! | tag | from | payload |
//! |---|---|---|
//! | [`TAG_PARAMS`] | client | `serial::params_to_bytes` (the server checks the id is its own) |
//! | [`TAG_PUBLIC_KEY`] | client | `serialize_public_key(pk, compressed)` |
//! | [`TAG_EVAL_KEYS`] | client | `serialize_evaluation_keys(keys, compressed)` |
//! | [`TAG_KEYS_ACK`] | server | empty: the keys decoded |
//! | [`TAG_CIPHERTEXTS`] | either | `count: u32`, then `count` frames [`TAG_CIPHERTEXT`] |
//! | [`TAG_CIPHERTEXT`] | either | `serialize_ciphertext(ct, compressed)` (seeded when it can be) |
//!
//! A receiver that refuses a message sends an abort frame with the reason, so its peer fails with
//! [`TransportError::PeerAborted`] instead of waiting.

mod client;
mod messages;
mod server;

pub use client::{Client, KeyRequest};
pub use messages::{
    recv_ciphertexts, send_ciphertexts, MAX_CIPHERTEXTS, TAG_CIPHERTEXT, TAG_CIPHERTEXTS,
    TAG_EVAL_KEYS, TAG_KEYS_ACK, TAG_PARAMS, TAG_PUBLIC_KEY,
};
pub use server::Server;

/// What both roles do alike: send and receive ciphertexts under their CKKS context.
pub trait CiphertextLink<B: veil_core::PolyBackend> {
    /// The party's CKKS context.
    fn ckks(&self) -> &veil_core::ckks::Ckks<B>;

    /// Sends ciphertexts to the peer ([`send_ciphertexts`]); the bytes sent.
    fn send_ciphertexts(
        &self,
        t: &mut dyn crate::transport::Transport,
        cts: &[veil_core::ckks::Ciphertext<B>],
    ) -> Result<u64, PartyError> {
        send_ciphertexts(self.ckks(), t, cts)
    }

    /// Receives ciphertexts from the peer ([`recv_ciphertexts`]).
    fn recv_ciphertexts(
        &self,
        t: &mut dyn crate::transport::Transport,
    ) -> Result<Vec<veil_core::ckks::Ciphertext<B>>, PartyError> {
        recv_ciphertexts(self.ckks(), t)
    }
}

use crate::transport::TransportError;

/// What a message carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Payload {
    /// The parameter set.
    Params,
    /// The public key.
    PublicKey,
    /// The evaluation keys (relinearization and Galois keys).
    EvaluationKeys,
    /// The count of a ciphertext batch.
    CiphertextCount,
    /// Ciphertext `index` of a batch.
    Ciphertext {
        /// Position in the batch.
        index: usize,
    },
}

/// Errors of the parties and their key exchange.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum PartyError {
    /// The transport failed (timeout, disconnect, the peer aborted, ...).
    Transport(TransportError),
    /// A frame arrived with another tag than the step expects.
    UnexpectedMessage {
        /// The tag expected.
        expected: u16,
        /// The tag that arrived.
        found: u16,
    },
    /// A payload did not decode.
    Decode {
        /// What it should have been.
        what: Payload,
        /// Why it was refused.
        source: veil_core::Error,
    },
    /// The client's parameter set is not the server's.
    ParamsMismatch {
        /// The server's parameter id.
        expected: u64,
        /// The id the client sent.
        found: u64,
    },
    /// A ciphertext batch announced more ciphertexts than allowed.
    TooManyCiphertexts {
        /// Announced count.
        count: u64,
        /// Limit ([`MAX_CIPHERTEXTS`]).
        max: u64,
    },
    /// Key generation, encryption, decryption or serialization failed locally.
    Ckks {
        /// The step.
        step: &'static str,
        /// The CKKS error.
        source: veil_core::Error,
    },
}

impl std::fmt::Display for PartyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartyError::Transport(e) => write!(f, "transport: {e}"),
            PartyError::UnexpectedMessage { expected, found } => {
                write!(
                    f,
                    "expected a frame with tag {expected:#06x}, got {found:#06x}"
                )
            }
            PartyError::Decode { what, source } => write!(f, "{what:?} refused: {source}"),
            PartyError::ParamsMismatch { expected, found } => write!(
                f,
                "the peer's parameter set {found:#018x} is not this party's {expected:#018x}"
            ),
            PartyError::TooManyCiphertexts { count, max } => {
                write!(f, "a batch of {count} ciphertexts exceeds the limit {max}")
            }
            PartyError::Ckks { step, source } => write!(f, "{step}: {source}"),
        }
    }
}

impl std::error::Error for PartyError {}

impl From<TransportError> for PartyError {
    fn from(e: TransportError) -> Self {
        PartyError::Transport(e)
    }
}

/// Sizes and time of one key exchange, as seen by one party.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KeyExchangeStats {
    /// Bytes of the public key on the wire.
    pub public_key_bytes: u64,
    /// Bytes of the evaluation keys on the wire.
    pub evaluation_key_bytes: u64,
    /// Galois keys sent.
    pub galois_keys: usize,
    /// Wall time of this party's part (key generation included at the client), seconds.
    pub seconds: f64,
}
