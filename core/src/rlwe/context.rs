//! [`Rlwe`]: the RLWE context over a backend (parameters, error sampler, moduli) and the checks
//! and small helpers shared by key generation, encryption and key switching.

use super::keys::{SecretKey, SwitchingKey};
use super::types::{Ciphertext, Plaintext};
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::math::sampling::{self, GaussianCdt};
use crate::math::Modulus;
use crate::params::CkksParams;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

/// Relative tolerance under which two scales are the same scale.
const SCALE_RTOL: f64 = 1e-9;

/// The RLWE context: owns the backend and its parameter set, and runs key generation,
/// encryption, decryption, automorphisms and key switching over it.
///
/// Every entry point validates levels, degrees and parameter identity once and returns a typed
/// [`Error`]; the backend then runs unchecked.
pub struct Rlwe<B: PolyBackend> {
    pub(crate) backend: Arc<B>,
    pub(crate) params: CkksParams,
    pub(crate) gaussian: GaussianCdt,
    /// Every prime, `Q` then `P` (global index order).
    pub(crate) moduli: Vec<Modulus>,
}

impl<B: PolyBackend> core::fmt::Debug for Rlwe<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Rlwe")
            .field("params", &self.params)
            .field("backend", &self.backend.name())
            .finish()
    }
}

impl<B: PolyBackend> Rlwe<B> {
    /// An RLWE context on `backend` (whose parameter set it uses).
    pub fn new(backend: Arc<B>) -> Self {
        let params = backend.params().clone();
        Self {
            gaussian: GaussianCdt::new(sampling::SIGMA),
            moduli: params.all_moduli().copied().collect(),
            params,
            backend,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &CkksParams {
        &self.params
    }
    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }
    /// The shared handle to the backend.
    pub fn backend_arc(&self) -> &Arc<B> {
        &self.backend
    }
    pub(crate) fn n(&self) -> usize {
        self.params.n()
    }
    pub(crate) fn k(&self) -> usize {
        self.params.p().len()
    }
    pub(crate) fn top(&self) -> usize {
        self.params.max_level()
    }
    pub(crate) fn full_basis(&self) -> Basis {
        Basis::qp(self.top() + 1, self.k())
    }

    // ---- checks ---------------------------------------------------------------------------

    pub(crate) fn check_level(&self, level: usize) -> Result<()> {
        if level > self.top() {
            return Err(Error::InvalidLevel {
                level,
                max_level: self.top(),
            });
        }
        Ok(())
    }

    /// A plaintext under these parameters: `poly` in the NTT domain over `Q_level`.
    pub(crate) fn plaintext(
        &self,
        poly: B::Buffer,
        level: usize,
        scale: f64,
        slots: usize,
    ) -> Plaintext<B> {
        Plaintext {
            params_id: self.params.id(),
            poly,
            level,
            scale,
            slots,
        }
    }

    /// An operand made under these parameters, at a level they have.
    pub(crate) fn own(&self, params_id: u64, level: usize) -> Result<()> {
        if params_id != self.params.id() {
            return Err(Error::ParameterMismatch);
        }
        self.check_level(level)
    }

    pub(crate) fn check_sk(&self, sk: &SecretKey) -> Result<()> {
        if sk.params_id != self.params.id() {
            return Err(Error::ParameterMismatch);
        }
        Ok(())
    }

    pub(crate) fn check_key(&self, k: &SwitchingKey<B>) -> Result<()> {
        if k.params_id != self.params.id() {
            return Err(Error::ParameterMismatch);
        }
        Ok(())
    }

    /// A Galois element this ring has: odd and below `2N`.
    pub(crate) fn check_galois(&self, g: u64) -> Result<()> {
        if g.is_multiple_of(2) || g >= 2 * self.n() as u64 {
            return Err(Error::InvalidParameters(
                "Galois elements are odd and below 2N",
            ));
        }
        Ok(())
    }

    /// A degree-1 ciphertext of these parameters.
    pub(crate) fn check_degree_one(&self, a: &Ciphertext<B>) -> Result<()> {
        self.own(a.params_id, a.level)?;
        if a.degree() != 1 {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: 1,
            });
        }
        Ok(())
    }

    /// Two slot counts that must agree.
    pub(crate) fn same_slots(expected: usize, found: usize) -> Result<()> {
        if expected != found {
            return Err(Error::SlotMismatch { expected, found });
        }
        Ok(())
    }

    /// Two scales that must agree (to a relative `1e-9`).
    pub(crate) fn same_scale(a: f64, b: f64) -> Result<()> {
        if (a - b).abs() <= SCALE_RTOL * a.abs().max(b.abs()) {
            Ok(())
        } else {
            Err(Error::ScaleMismatch { left: a, right: b })
        }
    }

    // ---- small helpers --------------------------------------------------------------------

    /// `P mod q_i` for the first `rows` ciphertext primes (`P` = product of the special primes).
    pub(crate) fn p_mod_q(&self, rows: usize) -> Vec<u64> {
        self.p_prefix_mod_q(rows, self.k())
    }

    /// `P_k mod q_i` for the first `rows` ciphertext primes, `P_k` the product of the first `k`
    /// special primes.
    pub(crate) fn p_prefix_mod_q(&self, rows: usize, k: usize) -> Vec<u64> {
        self.moduli[..rows]
            .iter()
            .map(|m| {
                self.params.p()[..k]
                    .iter()
                    .fold(1u64, |acc, p| m.mul(acc, m.reduce(p.value())))
            })
            .collect()
    }

    /// `[(P/P_level)^{-1}]_{q_i}` for `q_0..q_level`, where `P_level` is the product of the
    /// special primes a key switch uses at `level` ([`CkksParams::special_at`]); `None` when it
    /// uses all of them. Multiplying `c` by it before the gadget decomposition turns the key's
    /// `P·g_j·s'` into `P_level·g_j·s'` modulo every prime of `Q_level ∪ P_level` (on `P_level`
    /// both are zero), so the keys made over all of `P` serve every level.
    pub(crate) fn narrowing(&self, level: usize) -> Option<Vec<u64>> {
        let kl = self.params.special_at(level);
        if kl >= self.k() {
            return None;
        }
        let rest = &self.params.p()[kl..];
        Some(
            self.moduli[..=level]
                .iter()
                .map(|m| {
                    let r = rest
                        .iter()
                        .fold(1u64, |acc, p| m.mul(acc, m.reduce(p.value())));
                    m.inv(r)
                        .expect("distinct primes: a product of special primes is a unit mod q_i")
                })
                .collect(),
        )
    }

    /// A fresh RLWE sample `(−a·s + e, a)` over `basis`, `a` expanded from a fresh public seed
    /// (so the sample serializes at half size), `e` from the error distribution. Returns
    /// `(seed, −a·s + e, a)`; the secret-bearing temporaries are zeroized.
    pub(crate) fn seeded_sample(
        &self,
        sk: &SecretKey,
        basis: Basis,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> ([u8; 32], B::Buffer, B::Buffer) {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let a = self.backend.expand_uniform(&seed, 0, basis);
        let e = self.sample_error(rng);
        let mut b = self.small_to_ntt(&e, basis);
        let mut s = self.upload_secret(sk, basis);
        let mut t = self.backend.alloc(basis.rows());
        self.backend.mul(&a, &s, &mut t, basis);
        self.backend.sub_assign(&mut b, &t, basis);
        self.backend.zeroize(&mut s);
        self.backend.zeroize(&mut t);
        (seed, b, a)
    }

    /// Residues of small signed integers over `basis`, uploaded and transformed to the NTT domain.
    pub(crate) fn small_to_ntt(&self, v: &[i64], basis: Basis) -> B::Buffer {
        let mut buf = self.backend.upload_small(v, basis);
        self.backend.ntt(&mut buf, basis);
        buf
    }

    /// A copy of the `basis` rows of `b`.
    pub(crate) fn copy_buf(&self, b: &B::Buffer, basis: Basis) -> B::Buffer {
        self.copy_rows_to(b, basis, basis)
    }

    /// A new buffer holding the `to` rows of `src` (over `from ⊇ to`), matched by prime.
    pub(crate) fn copy_rows_to(&self, src: &B::Buffer, from: Basis, to: Basis) -> B::Buffer {
        let mut out = self.backend.alloc(to.rows());
        self.backend.copy_rows(src, from, &mut out, to);
        out
    }

    pub(crate) fn sample_error(&self, rng: &mut (impl RngCore + CryptoRng)) -> Zeroizing<Vec<i64>> {
        Zeroizing::new(self.gaussian.sample_vec(rng, self.n()))
    }

    /// Uploads the secret key's rows for `basis` (a prefix of `Q ∪ P` or `Q`), into a buffer the
    /// caller must wipe with [`PolyBackend::zeroize`].
    pub(crate) fn upload_secret(&self, sk: &SecretKey, basis: Basis) -> B::Buffer {
        let n = self.n();
        let full = self.full_basis();
        let q_total = self.params.q().len();
        let mut host = Zeroizing::new(vec![0u64; basis.rows() * n]);
        for r in 0..basis.rows() {
            let g = basis.global_index(r, q_total);
            // Every row of a prefix basis is a row of the full basis.
            let s = full.row_of(g, q_total).unwrap_or(r);
            host[r * n..(r + 1) * n].copy_from_slice(&sk.ntt[s * n..(s + 1) * n]);
        }
        self.backend.upload(&host)
    }

    /// A deep copy of a ciphertext.
    pub fn clone_ct(&self, ct: &Ciphertext<B>) -> Ciphertext<B> {
        let basis = Basis::q(ct.level + 1);
        Ciphertext {
            params_id: self.params.id(),
            polys: ct.polys.iter().map(|p| self.copy_buf(p, basis)).collect(),
            level: ct.level,
            scale: ct.scale,
            slots: ct.slots,
            seed: ct.seed,
        }
    }
}
