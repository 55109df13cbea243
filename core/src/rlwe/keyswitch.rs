//! Hybrid key switching as public, composable steps.
//!
//! A switching key `swk = {(b_j, a_j)}_{j<dnum}` from `s'` to `s` (see [`super::keygen`]) turns a
//! polynomial `c` that decrypts under `s'` into a pair `(k_0, k_1)` with `k_0 + k_1·s ≈ c·s'`.
//! Hybrid key switching (Han–Ki, "Better Bootstrapping for Approximate Homomorphic Encryption",
//! CT-RSA 2020) runs in three steps, each exposed here:
//!
//! 1. [`Rlwe::decompose`] — the gadget decomposition with ModUp: `c` (over `Q_level`) is cut
//!    into `dnum' = ⌈(level+1)/α⌉` digits `[c]_{Q_j}` by groups of `α` primes, and each digit is
//!    lifted to `Q_level ∪ P_level` by fast basis conversion. The result, a [`Hoisted`], depends on `c`
//!    only, so it can be computed once and shared by many key switches of the same `c`: this is
//!    *hoisting* (Halevi–Shoup, "Faster Homomorphic Linear Transformations in HElib", CRYPTO 2018).
//!    A Galois key of `g` switches `s → σ_g^{-1}(s)` ([`Rlwe::gen_galois_key`]), so the
//!    decomposition of `c_1` itself serves every rotation: `σ_g` comes after the key switch, on
//!    its two output polynomials, never on the `dnum` digits.
//! 2. [`Rlwe::gadget_product_lazy`] — the inner product `(Σ_j d_j·b_j, Σ_j d_j·a_j)` over
//!    `Q_level ∪ P_level`, then the optional automorphism `σ_g` of the two sums. The result is `P` times
//!    the key switch plus a small error, still over the extended basis.
//! 3. [`Rlwe::mod_down`] — division by `P` with rounding back to `Q_level`, which also divides the
//!    key-switching error by `P`.
//!
//! [`Rlwe::gadget_product`] is steps 2 and 3. Deferring step 3 (*lazy* ModDown) lets a sum of many
//! key-switched terms — the baby steps of a linear transform — pay for a single ModDown. The sum
//! then carries one rounding error instead of one per term, so it is not the sum of the non-lazy
//! results word for word, but it decrypts to the same value within the key-switching noise. What
//! is exact: ModDown is modular arithmetic on the `Q` rows given the `P` rows, and `P·y` is zero on
//! the `P` rows, so `mod_down(x + P·y) = mod_down(x) + y` word for word; a lazy key switch plus a
//! term lifted as `P·y` and then ModDown equals the non-lazy key switch plus `y`.
//!
//! `P` above is `P_level`, the product of the special primes a key switch uses at its level
//! ([`crate::params::CkksParams::special_at`]): the fewest that keep the level's largest digit's
//! error under the set's margin (two of four for a level-0 key switch at N = 2^16, all four from
//! the level where a digit is full), because a smaller digit needs a smaller `P` for the same
//! error. The keys are made once over all of `P`; step 1 multiplies `c`
//! by `(P/P_level)^{-1} mod q_i` first, which turns the key's `P·g_j·s'` into `P_level·g_j·s'` on
//! every prime of `Q_level ∪ P_level`. The narrower basis saves ModUp and ModDown NTTs and inner
//! product rows where they are otherwise a large share of the work.

use super::context::Rlwe;
use super::keys::SwitchingKey;
use super::types::{Ciphertext, ExtCiphertext};
use crate::backend::{Basis, Domain, PolyBackend};
use crate::error::{Error, Result};
use alloc::vec::Vec;

/// The gadget decomposition with ModUp of one polynomial (step 1 of hybrid key switching): its
/// digits over `Q_level ∪ P_level`, in the NTT domain, computed once and reused by every key switch of
/// that polynomial (hoisting).
pub struct Hoisted<B: PolyBackend> {
    pub(crate) digits: Vec<B::Buffer>,
    pub(crate) level: usize,
}

impl<B: PolyBackend> Hoisted<B> {
    /// The level of the decomposed polynomial.
    pub fn level(&self) -> usize {
        self.level
    }
    /// The digits, each over `Basis::qp(level + 1, k)` (NTT domain).
    pub fn digits(&self) -> &[B::Buffer] {
        &self.digits
    }
}

impl<B: PolyBackend> core::fmt::Debug for Hoisted<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Hoisted")
            .field("level", &self.level)
            .field("digits", &self.digits.len())
            .finish()
    }
}

impl<B: PolyBackend> Rlwe<B> {
    /// The extended basis of a key switch at `level`: `Q_level ∪ P_level`, with the first
    /// [`CkksParams::special_at`]`(level)` special primes.
    pub(crate) fn ext_basis(&self, level: usize) -> Basis {
        Basis::qp(level + 1, self.params.special_at(level))
    }

    /// Step 1: gadget decomposition with ModUp of `c` (NTT domain over `Q_level`).
    ///
    /// Digit `j` holds `c`'s own rows on its primes `[j·α, (j+1)·α)` and, on every other prime of
    /// `Q_level ∪ P_level`, the fast basis conversion of `[c]_{Q_j}` ([`PolyBackend::decompose`]).
    pub fn decompose(&self, c: &B::Buffer, level: usize) -> Result<Hoisted<B>> {
        self.check_level(level)?;
        let found = self.backend.buffer_rows(c);
        if found < level + 1 {
            return Err(Error::Shape {
                what: "rows of the polynomial to decompose",
                expected: level + 1,
                found,
            });
        }
        let ext = self.ext_basis(level);
        let mut digits: Vec<B::Buffer> = (0..self.params.digits_at(level))
            .map(|_| self.backend.alloc(ext.rows()))
            .collect();
        match self.narrowing(level) {
            Some(t) => {
                // Fewer special primes at this level: decompose `(P/P_level)^{-1}·c`.
                let qb = Basis::q(level + 1);
                let mut scaled = self.backend.alloc(qb.rows());
                self.backend.copy_rows(c, qb, &mut scaled, qb);
                self.backend.mul_scalar_assign(&mut scaled, &t, qb);
                self.backend.decompose(&scaled, level, &mut digits);
            }
            None => self.backend.decompose(c, level, &mut digits),
        }
        Ok(Hoisted { digits, level })
    }

    /// Step 2, lazy: `σ_g(Σ_j d_j·b_j, Σ_j d_j·a_j)` over `Q_level ∪ P_level` (NTT domain), without
    /// ModDown. With `g = None` no automorphism is applied (relinearization); with `Some(g)` the
    /// key must be the Galois key of `g` (a switching key `s → σ_g^{-1}(s)`), and `σ_g` is
    /// applied to the two sums, never to the digits.
    ///
    /// The pair is `P·(k_0, k_1) + e` where `k_0 + k_1·s ≈ σ_g(c·s')` (`s'` the key's source
    /// secret); add several such pairs, then call [`Rlwe::mod_down`] once per polynomial.
    pub fn gadget_product_lazy(
        &self,
        h: &Hoisted<B>,
        g: Option<u64>,
        key: &SwitchingKey<B>,
    ) -> Result<[B::Buffer; 2]> {
        self.check_gadget(h, g, key)?;
        let acc = self.inner_product_unchecked(h, key);
        Ok(match g {
            Some(g) => self.automorphism_pair(&acc, g, self.ext_basis(h.level)),
            None => acc,
        })
    }

    fn check_gadget(&self, h: &Hoisted<B>, g: Option<u64>, key: &SwitchingKey<B>) -> Result<()> {
        self.check_key(key)?;
        if let Some(g) = g {
            self.check_galois(g)?;
        }
        if key.b.len() < h.digits.len() || (!key.is_lean() && key.a.len() < h.digits.len()) {
            return Err(Error::Shape {
                what: "switching-key digits",
                expected: h.digits.len(),
                found: key.b.len().min(key.a.len()),
            });
        }
        Ok(())
    }

    /// `(Σ_j d_j·b_j, Σ_j d_j·a_j)` over `Q_level ∪ P_level`: the key inner product of the digits.
    pub(crate) fn inner_product_unchecked(
        &self,
        h: &Hoisted<B>,
        key: &SwitchingKey<B>,
    ) -> [B::Buffer; 2] {
        let ext = self.ext_basis(h.level);
        let mut acc0 = self.backend.alloc(ext.rows());
        let mut acc1 = self.backend.alloc(ext.rows());
        if key.is_lean() {
            self.backend.key_inner_product_seeded(
                &h.digits, &key.b, &key.seed, h.level, &mut acc0, &mut acc1,
            );
        } else {
            self.backend
                .key_inner_product(&h.digits, &key.b, &key.a, h.level, &mut acc0, &mut acc1);
        }
        [acc0, acc1]
    }

    /// `(σ_g(x_0), σ_g(x_1))` over `basis` (NTT domain).
    pub(crate) fn automorphism_pair(
        &self,
        x: &[B::Buffer; 2],
        g: u64,
        basis: Basis,
    ) -> [B::Buffer; 2] {
        x.each_ref().map(|p| {
            let mut o = self.backend.alloc(basis.rows());
            self.backend.automorphism(p, g, &mut o, basis, Domain::Ntt);
            o
        })
    }

    /// Steps 2 and 3: the key switch `(k_0, k_1)` over `Q_level` with
    /// `k_0 + k_1·s ≈ σ_g(c·s')` (`σ_g` omitted when `g = None`). The ModDown comes before `σ_g`
    /// (fewer rows to permute). With an even count of special primes at the level it commutes with
    /// the permutation, so this is the ModDown of [`Rlwe::gadget_product_lazy`] word for word;
    /// with an odd count the two roundings differ by at most that count per coefficient (each is
    /// a correct key switch).
    pub fn gadget_product(
        &self,
        h: &Hoisted<B>,
        g: Option<u64>,
        key: &SwitchingKey<B>,
    ) -> Result<[B::Buffer; 2]> {
        self.check_gadget(h, g, key)?;
        let [acc0, acc1] = self.inner_product_unchecked(h, key);
        let k = self.mod_down_pair_unchecked([&acc0, &acc1], h.level);
        Ok(match g {
            Some(g) => self.automorphism_pair(&k, g, Basis::q(h.level + 1)),
            None => k,
        })
    }

    /// Step 3: ModDown, `round(x / P_level)` over `Q_level` for `x` over `Q_level ∪ P_level` (NTT domain).
    pub fn mod_down(&self, x: &B::Buffer, level: usize) -> Result<B::Buffer> {
        self.check_level(level)?;
        let expected = self.ext_basis(level).rows();
        let found = self.backend.buffer_rows(x);
        if found < expected {
            return Err(Error::Shape {
                what: "rows of the extended polynomial",
                expected,
                found,
            });
        }
        Ok(self.mod_down_unchecked(x, level))
    }

    pub(crate) fn mod_down_unchecked(&self, x: &B::Buffer, level: usize) -> B::Buffer {
        let mut out = self.backend.alloc(level + 1);
        self.backend.mod_down(x, level, &mut out);
        out
    }

    /// ModDown of both polynomials of a key switch ([`PolyBackend::mod_down_pair`]).
    fn mod_down_pair_unchecked(&self, x: [&B::Buffer; 2], level: usize) -> [B::Buffer; 2] {
        let mut out = [self.backend.alloc(level + 1), self.backend.alloc(level + 1)];
        let [o0, o1] = &mut out;
        self.backend.mod_down_pair(x, level, [o0, o1]);
        out
    }

    /// Brings an extended ciphertext back to `Q_level`: [`Rlwe::mod_down`] of both polynomials.
    pub fn mod_down_ext(&self, a: &ExtCiphertext<B>) -> Ciphertext<B> {
        let [p0, p1] = &a.polys;
        Ciphertext {
            params_id: self.params.id(),
            polys: self.mod_down_pair_unchecked([p0, p1], a.level).into(),
            level: a.level,
            scale: a.scale,
            slots: a.slots,
            seed: None,
        }
    }

    /// One key switch of `c` (NTT, over `Q_level`) with `key`, without hoisting:
    /// `(k_0, k_1)` with `k_0 + k_1·s ≈ c·s'`.
    pub fn key_switch(
        &self,
        c: &B::Buffer,
        level: usize,
        key: &SwitchingKey<B>,
    ) -> Result<[B::Buffer; 2]> {
        let h = self.decompose(c, level)?;
        self.gadget_product(&h, None, key)
    }
}
