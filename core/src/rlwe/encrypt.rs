//! Encryption (public key and secret key) and decryption.

use super::context::Rlwe;
use super::keys::{PublicKey, SecretKey};
use super::types::{Ciphertext, Plaintext};
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::math::sampling;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

impl<B: PolyBackend> Rlwe<B> {
    /// Public-key encryption: `(b·u + e_0 + m, a·u + e_1)`, `u` uniform ternary.
    pub fn encrypt_pk(
        &self,
        pk: &PublicKey<B>,
        pt: &Plaintext<B>,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Ciphertext<B>> {
        if pk.params_id != self.params.id() {
            return Err(Error::ParameterMismatch);
        }
        self.own(pt.params_id, pt.level)?;
        let basis = Basis::q(pt.level + 1);
        // The ephemeral u decrypts this ciphertext: every copy of it is wiped.
        let u_small = Zeroizing::new(sampling::ternary(rng, self.n()));
        let u: Zeroizing<Vec<i64>> = Zeroizing::new(u_small.iter().map(|&x| x as i64).collect());
        let mut u = self.small_to_ntt(&u, basis);
        let e0 = self.sample_error(rng);
        let e1 = self.sample_error(rng);
        let mut c0 = self.small_to_ntt(&e0, basis);
        let mut c1 = self.small_to_ntt(&e1, basis);
        self.backend.mul_add_assign(&mut c0, &pk.b, &u, basis);
        self.backend.add_assign(&mut c0, &pt.poly, basis);
        self.backend.mul_add_assign(&mut c1, &pk.a, &u, basis);
        self.backend.zeroize(&mut u);
        Ok(Ciphertext {
            params_id: self.params.id(),
            polys: vec![c0, c1],
            level: pt.level,
            scale: pt.scale,
            slots: pt.slots,
            seed: None,
        })
    }

    /// Secret-key encryption `(-a·s + e + m, a)` with `a` expanded from a fresh seed, so the
    /// ciphertext serializes at half size.
    pub fn encrypt_sk(
        &self,
        sk: &SecretKey,
        pt: &Plaintext<B>,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Ciphertext<B>> {
        self.check_sk(sk)?;
        self.own(pt.params_id, pt.level)?;
        let basis = Basis::q(pt.level + 1);
        let (seed, mut c0, a) = self.seeded_sample(sk, basis, rng);
        self.backend.add_assign(&mut c0, &pt.poly, basis);
        Ok(Ciphertext {
            params_id: self.params.id(),
            polys: vec![c0, a],
            level: pt.level,
            scale: pt.scale,
            slots: pt.slots,
            seed: Some(seed),
        })
    }

    /// Decryption: `c_0 + c_1·s (+ c_2·s²)` over `Q_level`.
    pub fn decrypt(&self, sk: &SecretKey, ct: &Ciphertext<B>) -> Result<Plaintext<B>> {
        self.decrypt_at(sk, ct, ct.level)
    }

    /// Decryption on the first `level + 1` primes only (`level ≤ ct.level`): the rows a decoder
    /// that needs fewer primes than the ciphertext has reads.
    pub fn decrypt_at(
        &self,
        sk: &SecretKey,
        ct: &Ciphertext<B>,
        level: usize,
    ) -> Result<Plaintext<B>> {
        self.check_sk(sk)?;
        self.own(ct.params_id, ct.level)?;
        if level > ct.level {
            return Err(Error::InvalidLevel {
                level,
                max_level: ct.level,
            });
        }
        let basis = Basis::q(level + 1);
        let mut s = self.upload_secret(sk, basis);
        let mut m = self.copy_buf(&ct.polys[ct.polys.len() - 1], basis);
        // Horner: ((c_d)·s + c_{d-1})·s + … + c_0
        for i in (0..ct.polys.len() - 1).rev() {
            self.backend.mul_assign(&mut m, &s, basis);
            self.backend.add_assign(&mut m, &ct.polys[i], basis);
        }
        self.backend.zeroize(&mut s);
        Ok(Plaintext {
            params_id: self.params.id(),
            poly: m,
            level,
            scale: ct.scale,
            slots: ct.slots,
        })
    }
}
