//! The RLWE layer: ring-LWE encryption over a [`crate::PolyBackend`], shared by every scheme
//! built above it (today CKKS, [`crate::ckks`]).
//!
//! It holds what does not depend on how messages are encoded:
//!
//! * the data types — [`Plaintext`], [`Ciphertext`], [`ExtCiphertext`] — and the key types
//!   [`SecretKey`], [`PublicKey`], [`SwitchingKey`], [`EvaluationKeys`];
//! * key generation, encryption (public and secret key), decryption ([`Rlwe`]);
//! * hybrid key switching as public steps ([`keyswitch`]): [`Rlwe::decompose`] once into a
//!   [`Hoisted`], [`Rlwe::gadget_product`] with any number of keys, the lazy
//!   [`Rlwe::gadget_product_lazy`] that defers [`Rlwe::mod_down`];
//! * relinearization and Galois automorphisms, plain and hoisted ([`automorphism`]).
//!
//! Layering: `math → params → backend → rlwe → ckks`. This module imports nothing from `ckks`:
//! anything that needs the encoder (slot rotations by amount, constants, scales) lives there.

pub mod automorphism;
pub mod context;
pub mod encrypt;
pub mod keygen;
pub mod keys;
pub mod keyswitch;
pub mod types;

pub use context::Rlwe;
pub use keys::{
    public_key_basis, EvaluationKeys, LevelZeroKey, PublicKey, SecretKey, SwitchingKey,
};
pub use keyswitch::Hoisted;
pub use types::{expand_uniform, Ciphertext, ExtCiphertext, Plaintext};
