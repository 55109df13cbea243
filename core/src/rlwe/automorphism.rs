//! Ciphertext operations built on the key-switching steps: relinearization and Galois
//! automorphisms, plain and hoisted, with or without the final ModDown.
//!
//! For a ciphertext `(c_0, c_1)` under `s`, the automorphism `σ_g: X → X^g` gives
//! `(σ_g(c_0), σ_g(c_1))` under `σ_g(s)`; a key switch of `σ_g(c_1)` with the Galois key of `g`
//! brings it back under `s`. The hoisted forms decompose `c_1` once ([`Rlwe::decompose`]) and
//! apply `σ_g` to the digits, so that many automorphisms of one ciphertext share the ModUp.

use super::context::Rlwe;
use super::keys::SwitchingKey;
use super::keyswitch::Hoisted;
use super::types::{Ciphertext, ExtCiphertext};
use crate::backend::{Basis, Domain, PolyBackend};
use crate::error::{Error, Result};
use alloc::vec;

impl<B: PolyBackend> Rlwe<B> {
    /// Relinearizes a degree-2 ciphertext in place: `(c_0, c_1, c_2) → (c_0 + k_0, c_1 + k_1)`
    /// with `(k_0, k_1)` the key switch of `c_2` by the relinearization key (`s² → s`).
    pub fn relinearize_assign(&self, a: &mut Ciphertext<B>, rlk: &SwitchingKey<B>) -> Result<()> {
        self.own(a.params_id, a.level)?;
        if a.degree() != 2 {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: 2,
            });
        }
        self.check_key(rlk)?;
        let basis = Basis::q(a.level + 1);
        let [k0, k1] = self.key_switch(&a.polys[2], a.level, rlk)?;
        a.polys.truncate(2);
        self.backend.add_assign(&mut a.polys[0], &k0, basis);
        self.backend.add_assign(&mut a.polys[1], &k1, basis);
        Ok(())
    }

    /// `σ_g(a)` with key switching by `key` (the Galois key of `g`): the automorphism is applied
    /// to both polynomials first, then `σ_g(c_1)` is decomposed and key-switched.
    pub fn automorphism(
        &self,
        a: &Ciphertext<B>,
        g: u64,
        key: &SwitchingKey<B>,
    ) -> Result<Ciphertext<B>> {
        self.check_degree_one(a)?;
        self.check_galois(g)?;
        self.check_key(key)?;
        let basis = Basis::q(a.level + 1);
        let rows = basis.rows();
        let mut c0 = self.backend.alloc(rows);
        let mut c1 = self.backend.alloc(rows);
        self.backend
            .automorphism(&a.polys[0], g, &mut c0, basis, Domain::Ntt);
        self.backend
            .automorphism(&a.polys[1], g, &mut c1, basis, Domain::Ntt);
        let [k0, k1] = self.key_switch(&c1, a.level, key)?;
        self.backend.add_assign(&mut c0, &k0, basis);
        Ok(self.like(a, c0, k1))
    }

    /// `σ_g(a)` from the hoisted decomposition `h` of `a`'s `c_1`: `(σ_g(c_0) + k_0, k_1)` where
    /// `(k_0, k_1)` is [`Rlwe::gadget_product`] of `h` under `σ_g`.
    pub fn automorphism_hoisted(
        &self,
        a: &Ciphertext<B>,
        h: &Hoisted<B>,
        g: u64,
        key: &SwitchingKey<B>,
    ) -> Result<Ciphertext<B>> {
        self.check_hoisted(a, h)?;
        let basis = Basis::q(a.level + 1);
        let [k0, k1] = self.gadget_product(h, Some(g), key)?;
        let mut c0 = self.backend.alloc(basis.rows());
        self.backend
            .automorphism(&a.polys[0], g, &mut c0, basis, Domain::Ntt);
        self.backend.add_assign(&mut c0, &k0, basis);
        Ok(self.like(a, c0, k1))
    }

    /// [`Rlwe::automorphism_hoisted`] without ModDown: `(P·σ_g(c_0) + acc_0, acc_1)` over
    /// `Q_level ∪ P`, where `(acc_0, acc_1)` is [`Rlwe::gadget_product_lazy`]. `P·σ_g(c_0)` is zero
    /// on the special primes, so only its `Q` rows are added. [`Rlwe::mod_down_ext`] of the result
    /// equals [`Rlwe::automorphism_hoisted`] word for word.
    pub fn automorphism_hoisted_lazy(
        &self,
        a: &Ciphertext<B>,
        h: &Hoisted<B>,
        g: u64,
        key: &SwitchingKey<B>,
    ) -> Result<ExtCiphertext<B>> {
        self.check_hoisted(a, h)?;
        let q_basis = Basis::q(a.level + 1);
        let ext = self.ext_basis(a.level);
        let [mut acc0, acc1] = self.gadget_product_lazy(h, Some(g), key)?;
        // P mod q_i, for lifting c_0 to the extended basis as P·c_0.
        let p_mod = self.p_mod_q(a.level + 1);
        let mut c0 = self.backend.alloc(q_basis.rows());
        self.backend
            .automorphism(&a.polys[0], g, &mut c0, q_basis, Domain::Ntt);
        self.backend.mul_scalar_assign(&mut c0, &p_mod, q_basis);
        let mut lifted = self.backend.alloc(ext.rows());
        self.backend.copy_rows(&c0, q_basis, &mut lifted, q_basis);
        self.backend.add_assign(&mut acc0, &lifted, ext);
        Ok(ExtCiphertext {
            params_id: self.params.id(),
            polys: [acc0, acc1],
            level: a.level,
            scale: a.scale,
            slots: a.slots,
        })
    }

    /// A degree-1 ciphertext whose hoisted `c_1` is `h` (same level).
    fn check_hoisted(&self, a: &Ciphertext<B>, h: &Hoisted<B>) -> Result<()> {
        self.check_degree_one(a)?;
        if h.level != a.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: h.level,
            });
        }
        Ok(())
    }

    /// A fresh degree-1 ciphertext `(c0, c1)` with `a`'s level, scale and slots.
    fn like(&self, a: &Ciphertext<B>, c0: B::Buffer, c1: B::Buffer) -> Ciphertext<B> {
        Ciphertext {
            params_id: self.params.id(),
            polys: vec![c0, c1],
            level: a.level,
            scale: a.scale,
            slots: a.slots,
            seed: None,
        }
    }
}
