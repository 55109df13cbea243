//! Ciphertext operations built on the key-switching steps: relinearization and Galois
//! automorphisms, plain and hoisted, with or without the final ModDown.
//!
//! For a ciphertext `(c_0, c_1)` under `s`, the Galois key of `g` switches `c_1·s` to the
//! secret `σ_g^{-1}(s)`, giving `(c_0 + k_0, k_1)` under `σ_g^{-1}(s)`; applying `σ_g: X → X^g`
//! to both polynomials then gives `σ_g` of the message under `σ_g(σ_g^{-1}(s)) = s`. The key
//! switch does not depend on `g` until its key, so many automorphisms of one ciphertext share
//! one decomposition ([`Rlwe::decompose`], the hoisting), and each permutes only its two output
//! polynomials (the usual order, `σ_g` first, would permute every decomposed digit).

use super::context::Rlwe;
use super::keys::SwitchingKey;
use super::keyswitch::Hoisted;
use super::types::{Ciphertext, ExtCiphertext};
use crate::backend::{Basis, PolyBackend};
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

    /// `σ_g(a)` with key switching by `key` (the Galois key of `g`): `c_1` is decomposed and
    /// key-switched to `σ_g^{-1}(s)`, then `σ_g` is applied to the two resulting polynomials.
    /// The same as [`Rlwe::automorphism_hoisted`] of `a`'s own decomposition, word for word.
    pub fn automorphism(
        &self,
        a: &Ciphertext<B>,
        g: u64,
        key: &SwitchingKey<B>,
    ) -> Result<Ciphertext<B>> {
        self.check_degree_one(a)?;
        self.check_galois(g)?;
        self.check_key(key)?;
        let h = self.decompose(&a.polys[1], a.level)?;
        self.automorphism_hoisted(a, &h, g, key)
    }

    /// `σ_g(a)` from the hoisted decomposition `h` of `a`'s `c_1`: with `(k_0, k_1)` the
    /// [`Rlwe::gadget_product`] of `h` without automorphism, the result is
    /// `(σ_g(c_0 + k_0), σ_g(k_1))`. Only those two polynomials over `Q_level` are permuted, not
    /// the `dnum` digits over `Q_level ∪ P_level`.
    pub fn automorphism_hoisted(
        &self,
        a: &Ciphertext<B>,
        h: &Hoisted<B>,
        g: u64,
        key: &SwitchingKey<B>,
    ) -> Result<Ciphertext<B>> {
        self.check_hoisted(a, h)?;
        self.check_galois(g)?;
        let basis = Basis::q(a.level + 1);
        let [mut k0, k1] = self.gadget_product(h, None, key)?;
        self.backend.add_assign(&mut k0, &a.polys[0], basis);
        let [c0, c1] = self.automorphism_pair(&[k0, k1], g, basis);
        Ok(a.with_polys(vec![c0, c1], a.scale))
    }

    /// [`Rlwe::automorphism_hoisted`] without ModDown: `σ_g(P_level·c_0 + acc_0, acc_1)` over
    /// `Q_level ∪ P_level`, where `(acc_0, acc_1)` is the key inner product of `h`. `P_level·c_0`
    /// is zero on the special primes, so only its `Q` rows are added. A sum of such results needs
    /// one ModDown. [`Rlwe::mod_down_ext`] of one result equals [`Rlwe::automorphism_hoisted`]
    /// word for word when the level's special-prime count is even (ModDown's centred rounding is
    /// then odd-symmetric and commutes with the automorphism's sign flips), and within that count
    /// of units per coefficient when it is odd; `tests/tests/ckks_keyswitch.rs` asserts both.
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
        let [mut acc0, acc1] = self.gadget_product_lazy(h, None, key)?;
        self.check_galois(g)?;
        // P_level mod q_i, for lifting c_0 to the extended basis as P_level·c_0.
        let p_mod = self.p_prefix_mod_q(a.level + 1, self.params.special_at(a.level));
        let mut lifted = self.backend.alloc(ext.rows());
        self.backend
            .copy_rows(&a.polys[0], q_basis, &mut lifted, q_basis);
        self.backend.mul_scalar_assign(&mut lifted, &p_mod, q_basis);
        self.backend.add_assign(&mut acc0, &lifted, ext);
        let polys = self.automorphism_pair(&[acc0, acc1], g, ext);
        Ok(ExtCiphertext {
            params_id: self.params.id(),
            polys,
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
}
