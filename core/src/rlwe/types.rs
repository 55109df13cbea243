//! The data types of the RLWE layer: plaintexts, ciphertexts over `Q_level`, ciphertexts over
//! the extended basis `Q_level ∪ P_level`, and the public expansion of a seed into uniform residues.
//!
//! The types carry the CKKS bookkeeping (`scale`, `slots`) as plain metadata: the RLWE layer copies
//! it through encryption, decryption and key switching and never interprets it.

use crate::backend::PolyBackend;
use alloc::vec::Vec;

/// Getters that return a copy of the field of the same name, each with its own docs:
/// `copy_getters! { /// The level. level: usize, … }` inside an `impl` block. The crate's
/// ciphertexts, plaintexts and conversion plans share their `level`/`scale`/`slots` getters
/// through it.
macro_rules! copy_getters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> $ty {
                self.$name
            }
        )*
    };
}
pub(crate) use copy_getters;

/// A plaintext: one polynomial in the NTT domain over `Q_level`.
pub struct Plaintext<B: PolyBackend> {
    pub(crate) poly: B::Buffer,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    /// Identity of the parameter set that made it ([`CkksParams::id`]).
    pub(crate) params_id: u64,
}

impl<B: PolyBackend> Plaintext<B> {
    copy_getters! {
        /// The level (the plaintext spans `q_0..q_level`).
        level: usize,
        /// The scale `Δ`.
        scale: f64,
        /// The number of slots.
        slots: usize,
    }
    /// The polynomial (NTT domain over `Q_level`), for inspection and backend conformance tests.
    pub fn poly(&self) -> &B::Buffer {
        &self.poly
    }
}

/// A ciphertext `(c_0, c_1[, c_2])` in the NTT domain over `Q_level`, decrypting to
/// `c_0 + c_1·s [+ c_2·s²] ≈ Δ·m`.
pub struct Ciphertext<B: PolyBackend> {
    pub(crate) polys: Vec<B::Buffer>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    /// When `Some`, `c_1` is the expansion of this seed (a fresh secret-key encryption), and the
    /// ciphertext can be serialized compressed.
    pub(crate) seed: Option<[u8; 32]>,
    /// Identity of the parameter set that made it ([`CkksParams::id`]).
    pub(crate) params_id: u64,
}

impl<B: PolyBackend> core::fmt::Debug for Ciphertext<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ciphertext")
            .field("degree", &(self.polys.len() - 1))
            .field("level", &self.level)
            .field("scale", &self.scale)
            .field("slots", &self.slots)
            .finish()
    }
}

impl<B: PolyBackend> Ciphertext<B> {
    copy_getters! {
        /// The level.
        level: usize,
        /// The scale `Δ`.
        scale: f64,
        /// The number of slots.
        slots: usize,
    }
    /// The degree (1 for `(c_0, c_1)`, 2 after a product without relinearization).
    pub fn degree(&self) -> usize {
        self.polys.len() - 1
    }
    /// Whether `c_1` can travel as a seed.
    pub fn is_seeded(&self) -> bool {
        self.seed.is_some()
    }
    /// The polynomials `c_0, c_1[, c_2]` (NTT domain over `Q_level`), for inspection and backend
    /// conformance tests.
    pub fn polys(&self) -> &[B::Buffer] {
        &self.polys
    }
    /// Overrides the scale bookkeeping (the ciphertext is unchanged: the decoded value is
    /// multiplied by `old / new`).
    pub fn set_scale(&mut self, scale: f64) {
        self.scale = scale;
    }
    /// A ciphertext under the same parameters, at the same level and slot count, made of
    /// `polys` (NTT domain over `Q_level`) at `scale`: the output of an operation on this one
    /// (not seeded).
    pub(crate) fn with_polys(&self, polys: Vec<B::Buffer>, scale: f64) -> Self {
        Ciphertext {
            polys,
            level: self.level,
            scale,
            slots: self.slots,
            seed: None,
            params_id: self.params_id,
        }
    }
}

/// A ciphertext over the extended basis `Q_level ∪ P_level`, scaled by `P_level` (the special
/// primes of its level, [`crate::params::CkksParams::special_at`]): the output of lazy key
/// switches (lazy hoisted rotations). Sums of these are brought back to `Q_level` with one
/// ModDown ([`crate::rlwe::Rlwe::mod_down_ext`]).
pub struct ExtCiphertext<B: PolyBackend> {
    pub(crate) polys: [B::Buffer; 2],
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    pub(crate) params_id: u64,
}

impl<B: PolyBackend> ExtCiphertext<B> {
    copy_getters! {
        /// The level (the `Q` part spans `q_0..q_level`).
        level: usize,
        /// The scale `Δ` of the ciphertext this will be after ModDown.
        scale: f64,
        /// The number of slots.
        slots: usize,
    }
    /// The two polynomials over `Basis::qp(level + 1, k)` (NTT domain).
    pub fn polys(&self) -> &[B::Buffer; 2] {
        &self.polys
    }
}

pub use crate::backend::expand_uniform;
