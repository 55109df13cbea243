//! RNS-CKKS (Cheon–Kim–Kim–Song 2017; RNS variant Cheon–Han–Kim–Kim–Song 2018; hybrid key
//! switching Han–Ki 2020) over a [`crate::PolyBackend`].

pub mod context;
pub mod encoder;
pub mod keys;
pub mod precision;

pub use context::{expand_uniform, Ciphertext, Ckks, ExtCiphertext, Plaintext};
pub use encoder::{Encoder, C64};
pub use keys::{EvaluationKeys, PublicKey, SecretKey, SwitchingKey};
pub use precision::PrecisionStats;
