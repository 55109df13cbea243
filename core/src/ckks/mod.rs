//! RNS-CKKS (Cheon–Kim–Kim–Song 2017; RNS variant Cheon–Han–Kim–Kim–Song 2018) over the RLWE
//! layer ([`crate::rlwe`]).
//!
//! This layer adds what is specific to CKKS: the canonical-embedding [`Encoder`], the evaluator
//! [`Ckks`] with its scale bookkeeping (encode/decode, additions, plaintext and constant products,
//! products with relinearization, rescaling, slot rotations), [`PrecisionStats`], and the
//! sanitization of a result before it goes back to the key's owner ([`sanitize`]). Ciphertexts,
//! keys, key generation, encryption and key switching come from [`crate::rlwe`] and are
//! re-exported here.

pub mod arith;
pub mod encoder;
pub mod evaluator;
pub mod periodic;
pub mod precision;
pub mod rotate;
pub mod sanitize;
pub mod subring;

pub use crate::rlwe::{
    expand_uniform, Ciphertext, EvaluationKeys, ExtCiphertext, Hoisted, Plaintext, PublicKey,
    SecretKey, SwitchingKey,
};
pub use encoder::{Encoder, C64};
pub use evaluator::Ckks;
pub use periodic::{PeriodClasses, PeriodicPlaintext};
pub use precision::PrecisionStats;
pub use sanitize::{Flood, STAT_SECURITY_BITS};
pub use subring::{SubringPlaintext, SubringSum};
