//! Slot rotations and conjugation: Galois automorphisms ([`crate::rlwe::automorphism`]) chosen
//! by the encoder's slot order, plain, hoisted (one decomposition shared by many rotations,
//! Halevi–Shoup 2018) and lazy hoisted (results left over `Q_level ∪ P_level` so that a sum of them
//! needs one ModDown).

use super::evaluator::Ckks;
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::rlwe::{Ciphertext, EvaluationKeys, ExtCiphertext, Hoisted, Rlwe, SwitchingKey};
use alloc::vec::Vec;

impl<B: PolyBackend> Ckks<B> {
    /// The Galois key of `g` in `keys`, checked against these parameters.
    fn galois_key<'k>(&self, keys: &'k EvaluationKeys<B>, g: u64) -> Result<&'k SwitchingKey<B>> {
        let key = keys.galois.get(&g).ok_or(Error::MissingGaloisKey(g))?;
        self.rlwe.check_key(key)?;
        Ok(key)
    }

    /// Applies the Galois automorphism `g` with key switching.
    pub fn automorphism(
        &self,
        a: &Ciphertext<B>,
        g: u64,
        keys: &EvaluationKeys<B>,
    ) -> Result<Ciphertext<B>> {
        self.rlwe.check_degree_one(a)?;
        self.rlwe.check_galois(g)?;
        let key = self.galois_key(keys, g)?;
        self.rlwe.automorphism(a, g, key)
    }

    /// Rotates the slots left by `k` (right for negative `k`).
    pub fn rotate(
        &self,
        a: &Ciphertext<B>,
        k: i64,
        keys: &EvaluationKeys<B>,
    ) -> Result<Ciphertext<B>> {
        self.automorphism(a, self.encoder.galois_element_for_rotation(k), keys)
    }

    /// Complex conjugation of every slot.
    pub fn conjugate(&self, a: &Ciphertext<B>, keys: &EvaluationKeys<B>) -> Result<Ciphertext<B>> {
        self.automorphism(a, self.encoder.galois_element_conjugate(), keys)
    }

    /// The one code path of the hoisted rotations: checks a degree-1 ciphertext and the Galois
    /// keys of the rotations `ks`, decomposes `c_1` once, then runs `each` (a plain or lazy
    /// hoisted automorphism) for every rotation in order.
    fn hoisted_each<T>(
        &self,
        a: &Ciphertext<B>,
        ks: &[i64],
        keys: &EvaluationKeys<B>,
        each: impl Fn(&Rlwe<B>, &Hoisted<B>, u64, &SwitchingKey<B>) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.rlwe.check_degree_one(a)?;
        let gs: Vec<u64> = ks
            .iter()
            .map(|&k| self.encoder.galois_element_for_rotation(k))
            .collect();
        let found: Vec<&SwitchingKey<B>> = gs
            .iter()
            .map(|&g| self.galois_key(keys, g))
            .collect::<Result<_>>()?;
        let h = self.rlwe.decompose(&a.polys[1], a.level)?;
        gs.iter()
            .zip(found)
            .map(|(&g, key)| each(&self.rlwe, &h, g, key))
            .collect()
    }

    /// Hoisted rotations: decomposes `c_1` once, then rotates by each amount in `ks`
    /// ([`Rlwe::automorphism_hoisted`]).
    pub fn rotate_hoisted(
        &self,
        a: &Ciphertext<B>,
        ks: &[i64],
        keys: &EvaluationKeys<B>,
    ) -> Result<Vec<Ciphertext<B>>> {
        self.hoisted_each(a, ks, keys, |r, h, g, key| {
            r.automorphism_hoisted(a, h, g, key)
        })
    }

    /// Lazy hoisted rotations: like [`Ckks::rotate_hoisted`] but each result stays over
    /// `Q_level ∪ P_level` (scaled by `P_level`), so that a sum of rotated terms needs a single ModDown
    /// ([`Ckks::mod_down_ext`]) — the inner loop of baby-step giant-step linear transforms.
    pub fn rotate_hoisted_lazy(
        &self,
        a: &Ciphertext<B>,
        ks: &[i64],
        keys: &EvaluationKeys<B>,
    ) -> Result<Vec<ExtCiphertext<B>>> {
        self.hoisted_each(a, ks, keys, |r, h, g, key| {
            r.automorphism_hoisted_lazy(a, h, g, key)
        })
    }

    /// `a += b` over the extended basis.
    pub fn add_ext_assign(&self, a: &mut ExtCiphertext<B>, b: &ExtCiphertext<B>) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        self.rlwe.own(b.params_id, b.level)?;
        Rlwe::<B>::same_slots(a.slots, b.slots)?;
        if a.level != b.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        Rlwe::<B>::same_scale(a.scale, b.scale)?;
        let ext = Basis::qp(a.level + 1, self.params().special_at(a.level));
        for (x, y) in a.polys.iter_mut().zip(&b.polys) {
            self.backend().add_assign(x, y, ext);
        }
        Ok(())
    }

    /// Brings an extended ciphertext back to `Q_level` (divides by `P_level` with rounding).
    pub fn mod_down_ext(&self, a: &ExtCiphertext<B>) -> Ciphertext<B> {
        self.rlwe.mod_down_ext(a)
    }

    /// `Σ_i ρ(ct_i; k_i)` over ciphertexts of one level, scale and slot count, each rotation
    /// key-switched without ModDown and the sum brought down once (lazy key switching: the giant
    /// steps of a baby-step giant-step transform). Terms whose `k_i ≡ 0 (mod slots)` are added
    /// as they are. Returns the sum and the number of key-switched (nonzero) rotations.
    pub fn rotate_sum_lazy(
        &self,
        terms: Vec<(Ciphertext<B>, i64)>,
        keys: &EvaluationKeys<B>,
    ) -> Result<(Ciphertext<B>, u64)> {
        let mut ext: Option<ExtCiphertext<B>> = None;
        let mut plain: Option<Ciphertext<B>> = None;
        let mut nz = 0u64;
        for (ct, k) in terms {
            let k = k.rem_euclid(ct.slots.max(1) as i64);
            if k == 0 {
                match &mut plain {
                    Some(p) => self.add_assign(p, &ct)?,
                    None => plain = Some(ct),
                }
                continue;
            }
            nz += 1;
            let e = self.rotate_hoisted_lazy(&ct, &[k], keys)?.pop();
            let e = e.ok_or(Error::InvalidParameters("empty lazy rotation"))?;
            match &mut ext {
                Some(a) => self.add_ext_assign(a, &e)?,
                None => ext = Some(e),
            }
        }
        let down = ext.map(|e| self.mod_down_ext(&e));
        let sum = match (down, plain) {
            (Some(mut d), Some(p)) => {
                self.add_assign(&mut d, &p)?;
                d
            }
            (Some(d), None) | (None, Some(d)) => d,
            (None, None) => return Err(Error::InvalidParameters("empty lazy rotation sum")),
        };
        Ok((sum, nz))
    }
}
