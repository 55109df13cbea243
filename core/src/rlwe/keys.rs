//! Keys: the secret key (zeroized on drop, redacted in `Debug`), the public key, and switching keys
//! (relinearization and Galois) for hybrid key switching with `dnum` gadget digits.

use crate::backend::PolyBackend;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// The CKKS secret key `s`.
///
/// Holds the ternary coefficients and their canonical NTT over every prime (`Q ∪ P`). Both are
/// wiped when the key is dropped; `Debug` never shows them.
pub struct SecretKey {
    pub(crate) coeffs: Zeroizing<alloc::vec::Vec<i8>>,
    /// NTT of `s` over `Q ∪ P`, rows in basis order.
    pub(crate) ntt: Zeroizing<alloc::vec::Vec<u64>>,
    pub(crate) params_id: u64,
}

impl core::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SecretKey { <redacted> }")
    }
}

impl Zeroize for SecretKey {
    fn zeroize(&mut self) {
        self.coeffs.zeroize();
        self.ntt.zeroize();
    }
}

impl ZeroizeOnDrop for SecretKey {}

impl SecretKey {
    /// The Hamming weight of `s` (number of non-zero coefficients). Constant time in `s`.
    pub fn hamming_weight(&self) -> usize {
        self.coeffs.iter().map(|&c| (c as i32 & 1) as usize).sum()
    }

    /// `σ_g(s)`, the secret under the automorphism `X → X^g` (`g` odd, below `2N`): the
    /// coefficients signed-permuted and every NTT row permuted by the same index map as
    /// [`crate::backend::PolyBackend::automorphism`]. Zeroized on drop like any secret key.
    pub(crate) fn automorphism(&self, log_n: u32, g: u64) -> SecretKey {
        let n = 1usize << log_n;
        let two_n = 2 * n;
        let g = (g % two_n as u64) as usize;
        let mut coeffs = Zeroizing::new(alloc::vec![0i8; n]);
        for (i, &c) in self.coeffs.iter().enumerate() {
            let t = (i * g) % two_n;
            if t < n {
                coeffs[t] = c;
            } else {
                coeffs[t - n] = -c;
            }
        }
        let map = crate::backend::automorphism_ntt_map(log_n, g as u64);
        let mut ntt = Zeroizing::new(alloc::vec![0u64; self.ntt.len()]);
        for (o, src) in ntt.chunks_mut(n).zip(self.ntt.chunks(n)) {
            for (x, &j) in o.iter_mut().zip(map.iter()) {
                *x = src[j as usize];
            }
        }
        SecretKey {
            coeffs,
            ntt,
            params_id: self.params_id,
        }
    }
}

/// The rows a public key spans: every ciphertext prime and the first special prime,
/// `Q ∪ {p_0}`.
pub fn public_key_basis(params: &crate::params::CkksParams) -> crate::backend::Basis {
    crate::backend::Basis::qp(params.max_level() + 1, 1)
}

/// The public key `(b, a) = (-a·s + e, a)` over `Q ∪ {p_0}` (every ciphertext prime and the
/// first special prime), in the NTT domain.
pub struct PublicKey<B: PolyBackend> {
    pub(crate) b: B::Buffer,
    pub(crate) a: B::Buffer,
    pub(crate) seed: [u8; 32],
    pub(crate) params_id: u64,
}

impl<B: PolyBackend> core::fmt::Debug for PublicKey<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PublicKey")
            .field("params_id", &self.params_id)
            .finish_non_exhaustive()
    }
}

/// A switching key from a secret `s'` to `s`: for each digit `j < dnum`,
/// `(b_j, a_j) = (-a_j·s + e_j + P·g_j·s', a_j)` over `Q ∪ P` in the NTT domain, where the gadget
/// `g_j ≡ 1 (mod q_i)` for `q_i` in digit `j` and `≡ 0` for the other `q_i`.
pub struct SwitchingKey<B: PolyBackend> {
    pub(crate) b: Vec<B::Buffer>,
    pub(crate) a: Vec<B::Buffer>,
    /// Seed of the `a_j` (stream `j`), for compressed serialization.
    pub(crate) seed: [u8; 32],
    pub(crate) params_id: u64,
}

impl<B: PolyBackend> SwitchingKey<B> {
    /// Drops the expanded `a_j` from memory, keeping their seed: a key switch then regenerates
    /// the digits it reads ([`crate::backend::PolyBackend::expand_uniform`], the same words).
    /// Half the key's memory, for a seed expansion per use: for keys used a few times (the
    /// Galois keys of a bootstrap), not the relinearization key.
    pub fn shed_a(&mut self) {
        self.a = Vec::new();
    }

    /// Whether the `a_j` are regenerated from the seed at each use ([`SwitchingKey::shed_a`]).
    pub fn is_lean(&self) -> bool {
        self.a.is_empty()
    }

    /// Words held in memory (both halves, or `b` alone when lean), times 8.
    pub fn memory_bytes(&self, be: &B) -> usize {
        let n = be.params().n();
        self.b
            .iter()
            .chain(&self.a)
            .map(|x| be.buffer_rows(x) * n * 8)
            .sum()
    }
}

impl<B: PolyBackend> core::fmt::Debug for SwitchingKey<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SwitchingKey")
            .field("digits", &self.b.len())
            .finish_non_exhaustive()
    }
}

/// A one-digit switching key over `{q_0, p_0}` alone (sparse-secret encapsulation's `s → s'`
/// at level 0): `(b, a) = (−a·s' + e + p_0·s, a)` in the NTT domain, `a` expanded from a public
/// seed (stream 0).
pub struct LevelZeroKey<B: PolyBackend> {
    pub(crate) b: B::Buffer,
    pub(crate) a: B::Buffer,
    pub(crate) seed: [u8; 32],
    pub(crate) params_id: u64,
}

impl<B: PolyBackend> core::fmt::Debug for LevelZeroKey<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LevelZeroKey")
            .field("params_id", &self.params_id)
            .finish_non_exhaustive()
    }
}

/// Evaluation keys: relinearization and Galois keys, by Galois element.
pub struct EvaluationKeys<B: PolyBackend> {
    /// The relinearization key (`s² → s`).
    pub relin: Option<SwitchingKey<B>>,
    /// Galois keys (`s → σ_g^{-1}(s)`, see [`crate::rlwe::Rlwe::gen_galois_key`]), by Galois
    /// element `g`.
    pub galois: BTreeMap<u64, SwitchingKey<B>>,
}

impl<B: PolyBackend> Default for EvaluationKeys<B> {
    fn default() -> Self {
        Self {
            relin: None,
            galois: BTreeMap::new(),
        }
    }
}

impl<B: PolyBackend> core::fmt::Debug for EvaluationKeys<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EvaluationKeys")
            .field("relin", &self.relin.is_some())
            .field("galois", &self.galois.keys().collect::<Vec<_>>())
            .finish()
    }
}
