//! Encryption (public key and secret key) and decryption.

use super::context::Rlwe;
use super::keys::{public_key_basis, PublicKey, SecretKey};
use super::types::{Ciphertext, Plaintext};
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::math::sampling;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

impl<B: PolyBackend> Rlwe<B> {
    /// Public-key encryption in the extended basis `Q_level ∪ {p_0}`, then ModDown by `p_0`
    /// (as SEAL does):
    ///
    /// `ct = (round((b·u + e_0)/p_0) + m, round((a·u + e_1)/p_0))`, `u` uniform ternary.
    ///
    /// The encryption noise `e·u + e_0 + e_1·s` (about `σ·√(4N/3)` per coefficient) is divided by
    /// `p_0 ≈ 2^60` and vanishes; what remains is the rounding of the division, `r_0 + r_1·s` with
    /// `|r_i| ≤ 1/2` (about `√(N/18)` per coefficient), four to five bits less than encrypting
    /// over `Q` directly. The division by one prime is exact ([`PolyBackend::mod_down_p0`]), so no
    /// basis-conversion overflow adds to the rounding.
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
        let level = pt.level;
        let basis = Basis::q(level + 1);
        let ext = Basis::qp(level + 1, 1);
        // Below the top level the key's rows for Q_level ∪ {p_0} are gathered into one buffer.
        let gathered;
        let (pk_b, pk_a) = if level == self.top() {
            (&pk.b, &pk.a)
        } else {
            let from = public_key_basis(&self.params);
            gathered = (
                self.copy_rows_to(&pk.b, from, ext),
                self.copy_rows_to(&pk.a, from, ext),
            );
            (&gathered.0, &gathered.1)
        };
        // The ephemeral u decrypts this ciphertext: every copy of it is wiped.
        let u_small = Zeroizing::new(sampling::ternary(rng, self.n()));
        let u: Zeroizing<Vec<i64>> = Zeroizing::new(u_small.iter().map(|&x| x as i64).collect());
        let mut u = self.small_to_ntt(&u, ext);
        let e0 = self.sample_error(rng);
        let e1 = self.sample_error(rng);
        let mut x0 = self.small_to_ntt(&e0, ext);
        let mut x1 = self.small_to_ntt(&e1, ext);
        self.backend.mul_add_assign(&mut x0, pk_b, &u, ext);
        self.backend.mul_add_assign(&mut x1, pk_a, &u, ext);
        self.backend.zeroize(&mut u);
        let mut c0 = self.backend.alloc(basis.rows());
        let mut c1 = self.backend.alloc(basis.rows());
        self.backend.mod_down_p0(&x0, level, &mut c0);
        self.backend.mod_down_p0(&x1, level, &mut c1);
        self.backend.zeroize(&mut x0);
        self.backend.zeroize(&mut x1);
        self.backend.add_assign(&mut c0, &pt.poly, basis);
        Ok(Ciphertext {
            params_id: self.params.id(),
            polys: vec![c0, c1],
            level,
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
        Ok(self.plaintext(m, level, ct.scale, ct.slots))
    }
}
