//! The CKKS context: encoding, key generation, encryption, decryption and evaluation over a
//! [`PolyBackend`]. Every entry point validates levels, scales, degrees and parameter identity once
//! and returns a typed [`Error`]; the backend then runs unchecked.

use super::encoder::{Encoder, C64};
use super::keys::{EvaluationKeys, PublicKey, SecretKey, SwitchingKey};
use crate::backend::{Basis, Domain, PolyBackend};
use crate::error::{Error, Result};
use crate::math::sampling::{self, GaussianCdt};
use crate::math::Modulus;
use crate::params::{CkksParams, SecretDistribution};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRng, RngCore, SeedableRng};
use zeroize::Zeroizing;

/// Relative tolerance under which two scales are the same scale.
const SCALE_RTOL: f64 = 1e-9;

/// A CKKS plaintext: one polynomial in the NTT domain over `Q_level`.
pub struct Plaintext<B: PolyBackend> {
    pub(crate) poly: B::Buffer,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    /// Identity of the parameter set that made it ([`CkksParams::id`]).
    pub(crate) params_id: u64,
}

impl<B: PolyBackend> Plaintext<B> {
    /// The level (the plaintext spans `q_0..q_level`).
    pub fn level(&self) -> usize {
        self.level
    }
    /// The scale `Δ`.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// The polynomial (NTT domain over `Q_level`), for inspection and backend conformance tests.
    pub fn poly(&self) -> &B::Buffer {
        &self.poly
    }
}

/// A CKKS ciphertext `(c_0, c_1[, c_2])` in the NTT domain over `Q_level`, decrypting to
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
    /// The level.
    pub fn level(&self) -> usize {
        self.level
    }
    /// The scale `Δ`.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.slots
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
}

/// A ciphertext over the extended basis `Q_level ∪ P`, scaled by `P`: the output of lazy hoisted
/// rotations. Sums of these are brought back with one [`Ckks::mod_down_ext`].
pub struct ExtCiphertext<B: PolyBackend> {
    pub(crate) polys: [B::Buffer; 2],
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    pub(crate) params_id: u64,
}

/// The digits of a hoisted decomposition (shared by many rotations of one ciphertext).
pub struct Hoisted<B: PolyBackend> {
    pub(crate) digits: Vec<B::Buffer>,
    pub(crate) level: usize,
}

/// Expands a public seed into residues uniform mod each prime of `basis` (stream `stream`).
pub fn expand_uniform(params: &CkksParams, seed: &[u8; 32], stream: u64, basis: Basis) -> Vec<u64> {
    let n = params.n();
    let mut rng = ChaCha20Rng::from_seed(*seed);
    rng.set_stream(stream);
    let q_total = params.q().len();
    let moduli: Vec<Modulus> = params.all_moduli().copied().collect();
    let mut out = vec![0u64; basis.rows() * n];
    for r in 0..basis.rows() {
        // Each row has its own word position so that a prefix of rows is a prefix of the stream
        // regardless of how many rows are expanded.
        rng.set_word_pos((basis.global_index(r, q_total) as u128) << 40);
        let m = &moduli[basis.global_index(r, q_total)];
        sampling::uniform_mod(&mut rng, m, &mut out[r * n..(r + 1) * n]);
    }
    out
}

/// The CKKS engine over a backend.
pub struct Ckks<B: PolyBackend> {
    backend: Arc<B>,
    params: CkksParams,
    encoder: Encoder,
    gaussian: GaussianCdt,
    moduli: Vec<Modulus>,
}

impl<B: PolyBackend> core::fmt::Debug for Ckks<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ckks")
            .field("params", &self.params)
            .field("backend", &self.backend.name())
            .finish()
    }
}

impl<B: PolyBackend> Ckks<B> {
    /// A CKKS engine on `backend` (whose parameter set it uses).
    pub fn new(backend: Arc<B>) -> Self {
        let params = backend.params().clone();
        Self {
            encoder: Encoder::new(params.log_n()),
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
    /// The encoder.
    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }
    fn n(&self) -> usize {
        self.params.n()
    }
    fn k(&self) -> usize {
        self.params.p().len()
    }
    fn top(&self) -> usize {
        self.params.max_level()
    }
    fn full_basis(&self) -> Basis {
        Basis::qp(self.top() + 1, self.k())
    }

    // ---- small helpers --------------------------------------------------------------------

    /// `P mod q_i` for the first `rows` ciphertext primes (`P` = product of the special primes).
    fn p_mod_q(&self, rows: usize) -> Vec<u64> {
        self.moduli[..rows]
            .iter()
            .map(|m| {
                self.params
                    .p()
                    .iter()
                    .fold(1u64, |acc, p| m.mul(acc, m.reduce(p.value())))
            })
            .collect()
    }

    /// Residues of small signed integers over `basis`, uploaded and transformed to the NTT domain.
    fn small_to_ntt(&self, v: &[i64], basis: Basis) -> B::Buffer {
        let n = self.n();
        let q_total = self.params.q().len();
        let mut rows = Zeroizing::new(vec![0u64; basis.rows() * n]);
        for r in 0..basis.rows() {
            let m = &self.moduli[basis.global_index(r, q_total)];
            for (o, &x) in rows[r * n..(r + 1) * n].iter_mut().zip(v) {
                *o = m.from_i64(x);
            }
        }
        let mut buf = self.backend.upload(&rows);
        self.backend.ntt(&mut buf, basis);
        buf
    }

    fn copy_buf(&self, b: &B::Buffer, basis: Basis) -> B::Buffer {
        let mut out = self.backend.alloc(basis.rows());
        self.backend.copy_rows(b, basis, &mut out, basis);
        out
    }

    fn check_level(&self, level: usize) -> Result<()> {
        if level > self.top() {
            return Err(Error::InvalidLevel {
                level,
                max_level: self.top(),
            });
        }
        Ok(())
    }

    fn same_scale(a: f64, b: f64) -> Result<()> {
        if (a - b).abs() <= SCALE_RTOL * a.abs().max(b.abs()) {
            Ok(())
        } else {
            Err(Error::ScaleMismatch { left: a, right: b })
        }
    }

    fn sample_error(&self, rng: &mut (impl RngCore + CryptoRng)) -> Zeroizing<Vec<i64>> {
        Zeroizing::new(self.gaussian.sample_vec(rng, self.n()))
    }

    /// Uploads the secret key's rows for `basis` (a prefix of `Q ∪ P` or `Q`), into a buffer the
    /// caller must wipe with [`PolyBackend::zeroize`].
    fn upload_secret(&self, sk: &SecretKey, basis: Basis) -> B::Buffer {
        let n = self.n();
        let full = self.full_basis();
        let mut host = Zeroizing::new(vec![0u64; basis.rows() * n]);
        for r in 0..basis.rows() {
            let g = basis.global_index(r, self.params.q().len());
            let s = full.row_of(g, self.params.q().len()).unwrap();
            host[r * n..(r + 1) * n].copy_from_slice(&sk.ntt[s * n..(s + 1) * n]);
        }
        self.backend.upload(&host)
    }

    fn check_sk(&self, sk: &SecretKey) -> Result<()> {
        if sk.params_id != self.params.id() {
            return Err(Error::ParameterMismatch);
        }
        Ok(())
    }

    // ---- encoding -------------------------------------------------------------------------

    /// Encodes complex values into `slots` slots at `level` and `scale`.
    pub fn encode(
        &self,
        values: &[C64],
        slots: usize,
        level: usize,
        scale: f64,
    ) -> Result<Plaintext<B>> {
        self.check_level(level)?;
        let coeffs = self.encoder.encode(values, slots, scale)?;
        // The integer message must fit centred in Q_level, and below scale·2^63 so that decoding
        // (which reads the fewest primes above scale·2^64) recovers it.
        let max = coeffs.iter().map(|c| c.unsigned_abs()).max().unwrap_or(0);
        let bound_bits = (self.params.log_q_at(level) - 1.0).min(libm::log2(scale) + 63.0);
        if max != 0 && libm::log2(max as f64) >= bound_bits {
            return Err(Error::EncodingOverflow);
        }
        let n = self.n();
        let basis = Basis::q(level + 1);
        let mut rows = vec![0u64; basis.rows() * n];
        for r in 0..basis.rows() {
            let m = &self.moduli[r];
            for (o, &c) in rows[r * n..(r + 1) * n].iter_mut().zip(&coeffs) {
                // Almost every coefficient fits an i64, whose reduction is a single mul-high.
                *o = match i64::try_from(c) {
                    Ok(v) => m.from_i64(v),
                    Err(_) => m.from_i128(c),
                };
            }
        }
        let mut poly = self.backend.upload(&rows);
        self.backend.ntt(&mut poly, basis);
        Ok(Plaintext {
            params_id: self.params().id(),
            poly,
            level,
            scale,
            slots,
        })
    }

    /// Encodes real values (imaginary parts zero).
    pub fn encode_real(
        &self,
        values: &[f64],
        slots: usize,
        level: usize,
        scale: f64,
    ) -> Result<Plaintext<B>> {
        let v: Vec<C64> = values.iter().map(|&x| C64::real(x)).collect();
        self.encode(&v, slots, level, scale)
    }

    /// The number of primes decoding reads: the fewest whose product exceeds `scale·2^64`. A
    /// message `m` with `|m| < 2^63` (anything larger is not a CKKS value at this scale) is the
    /// same integer modulo that product as modulo `Q_level`.
    fn decode_rows(&self, level: usize, scale: f64) -> usize {
        let need = libm::log2(scale.max(1.0)) + 64.0;
        let mut k = 0;
        let mut bits = 0.0;
        while k <= level && bits < need {
            bits += libm::log2(self.moduli[k].value() as f64);
            k += 1;
        }
        k
    }

    /// Decodes a plaintext into its slot values.
    pub fn decode(&self, pt: &Plaintext<B>) -> Result<Vec<C64>> {
        self.own(pt.params_id, pt.level)?;
        let n = self.n();
        let k = self.decode_rows(pt.level, pt.scale);
        let basis = Basis::q(k);
        let mut coeff = self.backend.alloc(k);
        self.backend
            .copy_rows(&pt.poly, Basis::q(pt.level + 1), &mut coeff, basis);
        self.backend.intt(&mut coeff, basis);
        let mut host = vec![0u64; k * n];
        self.backend.download(&coeff, &mut host);
        let q = &self.moduli[..k];
        // Garner's mixed-radix constants: inv[i][j] = q_i^{-1} mod q_j (i < j).
        let mut inv = vec![vec![0u64; k]; k];
        for i in 0..k {
            for j in i + 1..k {
                inv[i][j] = q[j]
                    .inv(q[i].value())
                    .ok_or(Error::Backend("non-coprime primes"))?;
            }
        }
        let mut coeffs = vec![0f64; n];
        let mut digits = vec![0u64; k];
        let mut res = vec![0u64; k];
        let mixed = |res: &[u64], digits: &mut [u64]| {
            for j in 0..k {
                let mut t = res[j];
                for i in 0..j {
                    t = q[j].mul(q[j].sub(t, q[j].reduce(digits[i])), inv[i][j]);
                }
                digits[j] = t;
            }
        };
        for c in 0..n {
            for j in 0..k {
                res[j] = host[j * n + c];
            }
            mixed(&res, &mut digits);
            let negative = digits[k - 1] > q[k - 1].value() / 2;
            if negative {
                for j in 0..k {
                    res[j] = q[j].neg(res[j]);
                }
                mixed(&res, &mut digits);
            }
            let mut acc = 0f64;
            for j in (0..k).rev() {
                acc = acc * q[j].value() as f64 + digits[j] as f64;
            }
            coeffs[c] = if negative { -acc } else { acc } / pt.scale;
        }
        self.encoder.decode(&coeffs, pt.slots)
    }

    // ---- key generation -------------------------------------------------------------------

    /// Samples a secret key from the parameter set's distribution.
    pub fn gen_secret_key(&self, rng: &mut (impl RngCore + CryptoRng)) -> SecretKey {
        let n = self.n();
        let coeffs = Zeroizing::new(match self.params.secret_distribution() {
            SecretDistribution::UniformTernary => sampling::ternary(rng, n),
            SecretDistribution::SparseTernary { h } => sampling::sparse_ternary(rng, n, h as usize),
        });
        let wide: Zeroizing<Vec<i64>> = Zeroizing::new(coeffs.iter().map(|&c| c as i64).collect());
        let full = self.full_basis();
        let mut buf = self.small_to_ntt(&wide, full);
        let mut ntt = Zeroizing::new(vec![0u64; full.rows() * n]);
        self.backend.download(&buf, &mut ntt);
        self.backend.zeroize(&mut buf);
        SecretKey {
            coeffs,
            ntt,
            params_id: self.params.id(),
        }
    }

    /// The public key `(-a·s + e, a)` over `Q`.
    pub fn gen_public_key(
        &self,
        sk: &SecretKey,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<PublicKey<B>> {
        self.check_sk(sk)?;
        let basis = Basis::q(self.top() + 1);
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let a = self
            .backend
            .upload(&expand_uniform(&self.params, &seed, 0, basis));
        let e = self.sample_error(rng);
        let mut b = self.small_to_ntt(&e, basis);
        let mut s = self.upload_secret(sk, basis);
        let mut t = self.backend.alloc(basis.rows());
        self.backend.mul(&a, &s, &mut t, basis);
        self.backend.sub_assign(&mut b, &t, basis);
        self.backend.zeroize(&mut s);
        self.backend.zeroize(&mut t);
        Ok(PublicKey {
            b,
            a,
            seed,
            params_id: self.params.id(),
        })
    }

    /// A switching key from `s'` (given by its NTT rows over `Q`) to `s`.
    fn gen_switching_key(
        &self,
        sk: &SecretKey,
        s_from_q: &[u64],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> SwitchingKey<B> {
        let n = self.n();
        let full = self.full_basis();
        let alpha = self.params.alpha();
        let levels = self.top() + 1;
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let mut s = self.upload_secret(sk, full);
        let p_mod = self.p_mod_q(levels);
        let mut bs = Vec::with_capacity(self.params.dnum());
        let mut as_ = Vec::with_capacity(self.params.dnum());
        let mut t = self.backend.alloc(full.rows());
        for j in 0..self.params.dnum() {
            let a = self
                .backend
                .upload(&expand_uniform(&self.params, &seed, j as u64, full));
            let e = self.sample_error(rng);
            let mut b = self.small_to_ntt(&e, full);
            self.backend.mul(&a, &s, &mut t, full);
            self.backend.sub_assign(&mut b, &t, full);
            // + P·g_j·s' : only the digit's Q rows.
            let mut g = Zeroizing::new(vec![0u64; full.rows() * n]);
            for i in j * alpha..((j + 1) * alpha).min(levels) {
                let m = &self.moduli[i];
                let (w, ws) = (p_mod[i], m.shoup(p_mod[i]));
                for (o, &x) in g[i * n..(i + 1) * n]
                    .iter_mut()
                    .zip(&s_from_q[i * n..(i + 1) * n])
                {
                    *o = m.mul_shoup(x, w, ws);
                }
            }
            let mut gb = self.backend.upload(&g);
            self.backend.add_assign(&mut b, &gb, full);
            self.backend.zeroize(&mut gb);
            bs.push(b);
            as_.push(a);
        }
        self.backend.zeroize(&mut s);
        self.backend.zeroize(&mut t);
        SwitchingKey {
            b: bs,
            a: as_,
            seed,
            params_id: self.params.id(),
        }
    }

    /// The relinearization key (`s² → s`).
    pub fn gen_relin_key(
        &self,
        sk: &SecretKey,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SwitchingKey<B>> {
        self.check_sk(sk)?;
        let n = self.n();
        let levels = self.top() + 1;
        let mut s2 = Zeroizing::new(vec![0u64; levels * n]);
        for i in 0..levels {
            let m = &self.moduli[i];
            for c in 0..n {
                let x = sk.ntt[i * n + c];
                s2[i * n + c] = m.mul(x, x);
            }
        }
        Ok(self.gen_switching_key(sk, &s2, rng))
    }

    /// The Galois key for element `g` (`σ_g(s) → s`).
    pub fn gen_galois_key(
        &self,
        sk: &SecretKey,
        g: u64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SwitchingKey<B>> {
        self.check_sk(sk)?;
        let g = g % (2 * self.n() as u64);
        if g.is_multiple_of(2) {
            return Err(Error::InvalidParameters("Galois elements are odd"));
        }
        let n = self.n();
        let levels = self.top() + 1;
        let map = crate::backend::automorphism_ntt_map(self.params.log_n(), g);
        let mut sg = Zeroizing::new(vec![0u64; levels * n]);
        for i in 0..levels {
            for c in 0..n {
                sg[i * n + c] = sk.ntt[i * n + map[c] as usize];
            }
        }
        Ok(self.gen_switching_key(sk, &sg, rng))
    }

    /// Relinearization key plus Galois keys for the rotations `rotations` (and conjugation if asked).
    pub fn gen_evaluation_keys(
        &self,
        sk: &SecretKey,
        rotations: &[i64],
        conjugation: bool,
        rng: &mut (impl RngCore + CryptoRng),
        mut progress: impl FnMut(usize, usize),
    ) -> Result<EvaluationKeys<B>> {
        let total = 1 + rotations.len() + conjugation as usize;
        let mut keys = EvaluationKeys {
            relin: Some(self.gen_relin_key(sk, rng)?),
            ..Default::default()
        };
        progress(1, total);
        let mut done = 1;
        let mut elts: Vec<u64> = rotations
            .iter()
            .map(|&r| self.encoder.galois_element_for_rotation(r))
            .collect();
        if conjugation {
            elts.push(self.encoder.galois_element_conjugate());
        }
        for g in elts {
            if let alloc::collections::btree_map::Entry::Vacant(e) = keys.galois.entry(g) {
                e.insert(self.gen_galois_key(sk, g, rng)?);
            }
            done += 1;
            progress(done, total);
        }
        Ok(keys)
    }

    // ---- encryption -----------------------------------------------------------------------

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
            params_id: self.params().id(),
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
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let a = self
            .backend
            .upload(&expand_uniform(&self.params, &seed, 0, basis));
        let e = self.sample_error(rng);
        let mut c0 = self.small_to_ntt(&e, basis);
        let mut s = self.upload_secret(sk, basis);
        let mut t = self.backend.alloc(basis.rows());
        self.backend.mul(&a, &s, &mut t, basis);
        self.backend.sub_assign(&mut c0, &t, basis);
        self.backend.add_assign(&mut c0, &pt.poly, basis);
        self.backend.zeroize(&mut s);
        self.backend.zeroize(&mut t);
        Ok(Ciphertext {
            params_id: self.params().id(),
            polys: vec![c0, a],
            level: pt.level,
            scale: pt.scale,
            slots: pt.slots,
            seed: Some(seed),
        })
    }

    /// Decryption: `c_0 + c_1·s (+ c_2·s²)`.
    pub fn decrypt(&self, sk: &SecretKey, ct: &Ciphertext<B>) -> Result<Plaintext<B>> {
        self.decrypt_at(sk, ct, ct.level)
    }

    /// Decryption on the first `level + 1` primes only (`level ≤ ct.level`).
    fn decrypt_at(&self, sk: &SecretKey, ct: &Ciphertext<B>, level: usize) -> Result<Plaintext<B>> {
        self.check_sk(sk)?;
        self.own(ct.params_id, ct.level)?;
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
            params_id: self.params().id(),
            poly: m,
            level,
            scale: ct.scale,
            slots: ct.slots,
        })
    }

    /// Decrypts and decodes.
    pub fn decrypt_decode(&self, sk: &SecretKey, ct: &Ciphertext<B>) -> Result<Vec<C64>> {
        // Only the rows decoding reads are decrypted.
        let level = self.decode_rows(ct.level, ct.scale).min(ct.level + 1) - 1;
        let pt = self.decrypt_at(sk, ct, level)?;
        self.decode(&pt)
    }

    // ---- evaluation -----------------------------------------------------------------------

    /// A deep copy.
    pub fn clone_ct(&self, ct: &Ciphertext<B>) -> Ciphertext<B> {
        let basis = Basis::q(ct.level + 1);
        Ciphertext {
            params_id: self.params().id(),
            polys: ct.polys.iter().map(|p| self.copy_buf(p, basis)).collect(),
            level: ct.level,
            scale: ct.scale,
            slots: ct.slots,
            seed: ct.seed,
        }
    }

    /// An operand made under these parameters, at a level they have.
    fn own(&self, params_id: u64, level: usize) -> Result<()> {
        if params_id != self.params.id() {
            return Err(Error::ParameterMismatch);
        }
        self.check_level(level)
    }

    fn binary_check(
        &self,
        a: &Ciphertext<B>,
        b_id: u64,
        b_level: usize,
        b_scale: f64,
        b_slots: usize,
    ) -> Result<()> {
        self.own(a.params_id, a.level)?;
        self.own(b_id, b_level)?;
        if a.level != b_level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: b_level,
            });
        }
        if a.slots != b_slots {
            return Err(Error::InvalidParameters("slot counts differ"));
        }
        Self::same_scale(a.scale, b_scale)
    }

    /// `a += b` (same level, scale and slots; degrees may differ).
    pub fn add_assign(&self, a: &mut Ciphertext<B>, b: &Ciphertext<B>) -> Result<()> {
        self.binary_assign(a, b, false)
    }

    /// `a ±= b` in place.
    fn binary_assign(&self, a: &mut Ciphertext<B>, b: &Ciphertext<B>, sub: bool) -> Result<()> {
        self.binary_check(a, b.params_id, b.level, b.scale, b.slots)?;
        let basis = Basis::q(a.level + 1);
        while a.polys.len() < b.polys.len() {
            a.polys.push(self.backend.alloc(basis.rows()));
        }
        for (x, y) in a.polys.iter_mut().zip(&b.polys) {
            if sub {
                self.backend.sub_assign(x, y, basis);
            } else {
                self.backend.add_assign(x, y, basis);
            }
        }
        a.seed = None;
        Ok(())
    }

    /// `a + b`.
    pub fn add(&self, a: &Ciphertext<B>, b: &Ciphertext<B>) -> Result<Ciphertext<B>> {
        self.binary_new(a, b, false)
    }

    /// `a ± b` into fresh buffers (one pass per polynomial).
    fn binary_new(&self, a: &Ciphertext<B>, b: &Ciphertext<B>, sub: bool) -> Result<Ciphertext<B>> {
        self.binary_check(a, b.params_id, b.level, b.scale, b.slots)?;
        let basis = Basis::q(a.level + 1);
        let degree = a.polys.len().max(b.polys.len());
        let polys = (0..degree)
            .map(|i| match (a.polys.get(i), b.polys.get(i)) {
                (Some(x), Some(y)) if sub => self.backend.sub_new(x, y, basis),
                (Some(x), Some(y)) => self.backend.add_new(x, y, basis),
                (Some(x), None) => self.copy_buf(x, basis),
                (None, Some(y)) => {
                    let mut o = self.copy_buf(y, basis);
                    if sub {
                        self.backend.neg_assign(&mut o, basis);
                    }
                    o
                }
                // Not reached (i is below the larger degree); a zero polynomial is the neutral answer.
                (None, None) => self.backend.alloc(basis.rows()),
            })
            .collect();
        Ok(Ciphertext {
            params_id: self.params().id(),
            polys,
            level: a.level,
            scale: a.scale,
            slots: a.slots,
            seed: None,
        })
    }

    /// `a -= b`.
    pub fn sub_assign(&self, a: &mut Ciphertext<B>, b: &Ciphertext<B>) -> Result<()> {
        self.binary_assign(a, b, true)
    }

    /// `a - b`.
    pub fn sub(&self, a: &Ciphertext<B>, b: &Ciphertext<B>) -> Result<Ciphertext<B>> {
        self.binary_new(a, b, true)
    }

    /// `a = -a`.
    pub fn neg_assign(&self, a: &mut Ciphertext<B>) -> Result<()> {
        self.own(a.params_id, a.level)?;
        let basis = Basis::q(a.level + 1);
        for x in a.polys.iter_mut() {
            self.backend.neg_assign(x, basis);
        }
        a.seed = None;
        Ok(())
    }

    /// `a += pt` (same level, scale and slots).
    pub fn add_plain_assign(&self, a: &mut Ciphertext<B>, pt: &Plaintext<B>) -> Result<()> {
        self.binary_check(a, pt.params_id, pt.level, pt.scale, pt.slots)?;
        self.backend
            .add_assign(&mut a.polys[0], &pt.poly, Basis::q(a.level + 1));
        Ok(())
    }

    /// `a -= pt`.
    pub fn sub_plain_assign(&self, a: &mut Ciphertext<B>, pt: &Plaintext<B>) -> Result<()> {
        self.binary_check(a, pt.params_id, pt.level, pt.scale, pt.slots)?;
        self.backend
            .sub_assign(&mut a.polys[0], &pt.poly, Basis::q(a.level + 1));
        Ok(())
    }

    /// `a *= pt` (slot-wise); the scale becomes `Δ_a·Δ_pt`. The plaintext may sit at a higher level.
    pub fn mul_plain_assign(&self, a: &mut Ciphertext<B>, pt: &Plaintext<B>) -> Result<()> {
        self.own(a.params_id, a.level)?;
        self.own(pt.params_id, pt.level)?;
        if pt.level < a.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: pt.level,
            });
        }
        if pt.slots != a.slots {
            return Err(Error::InvalidParameters("slot counts differ"));
        }
        let basis = Basis::q(a.level + 1);
        for x in a.polys.iter_mut() {
            self.backend.mul_assign(x, &pt.poly, basis);
        }
        a.scale *= pt.scale;
        a.seed = None;
        Ok(())
    }

    /// `a · pt`.
    pub fn mul_plain(&self, a: &Ciphertext<B>, pt: &Plaintext<B>) -> Result<Ciphertext<B>> {
        let mut out = self.clone_ct(a);
        self.mul_plain_assign(&mut out, pt)?;
        Ok(out)
    }

    /// The NTT rows of the constant polynomial `re + im·X^{N/2}` over `basis`.
    fn constant_poly(&self, re: i128, im: i128, basis: Basis) -> B::Buffer {
        let n = self.n();
        let mut rows = vec![0u64; basis.rows() * n];
        for r in 0..basis.rows() {
            let m = &self.moduli[r];
            rows[r * n] = m.from_i128(re);
            rows[r * n + n / 2] = m.from_i128(im);
        }
        let mut buf = self.backend.upload(&rows);
        self.backend.ntt(&mut buf, basis);
        buf
    }

    /// `a *= c` for a complex constant encoded at `scale` (the ciphertext's scale is multiplied by
    /// `scale`). Pass `scale = q_level` (see [`Ckks::rescale_prime`]) to return to the same scale
    /// after the next rescale.
    pub fn mul_const_assign(&self, a: &mut Ciphertext<B>, c: C64, scale: f64) -> Result<()> {
        self.own(a.params_id, a.level)?;
        if !(scale.is_finite() && scale >= 1.0) {
            return Err(Error::InvalidParameters(
                "scale must be finite and at least 1",
            ));
        }
        let (re, im) = self.encoder.encode_constant(c, scale)?;
        let basis = Basis::q(a.level + 1);
        if im == 0 {
            let s: Vec<u64> = self.moduli[..basis.rows()]
                .iter()
                .map(|m| m.from_i128(re))
                .collect();
            for x in a.polys.iter_mut() {
                self.backend.mul_scalar_assign(x, &s, basis);
            }
        } else {
            let k = self.constant_poly(re, im, basis);
            for x in a.polys.iter_mut() {
                self.backend.mul_assign(x, &k, basis);
            }
        }
        a.scale *= scale;
        a.seed = None;
        Ok(())
    }

    /// `a *= k` for an integer `k` (scale unchanged).
    pub fn mul_int_assign(&self, a: &mut Ciphertext<B>, k: i64) -> Result<()> {
        self.own(a.params_id, a.level)?;
        let basis = Basis::q(a.level + 1);
        let s: Vec<u64> = self.moduli[..basis.rows()]
            .iter()
            .map(|m| m.from_i64(k))
            .collect();
        for x in a.polys.iter_mut() {
            self.backend.mul_scalar_assign(x, &s, basis);
        }
        a.seed = None;
        Ok(())
    }

    /// `a += c` for a complex constant (encoded at the ciphertext's scale).
    pub fn add_const_assign(&self, a: &mut Ciphertext<B>, c: C64) -> Result<()> {
        self.own(a.params_id, a.level)?;
        let (re, im) = self.encoder.encode_constant(c, a.scale)?;
        let basis = Basis::q(a.level + 1);
        if im == 0 {
            let s: Vec<u64> = self.moduli[..basis.rows()]
                .iter()
                .map(|m| m.from_i128(re))
                .collect();
            self.backend.add_scalar_assign(&mut a.polys[0], &s, basis);
        } else {
            let k = self.constant_poly(re, im, basis);
            self.backend.add_assign(&mut a.polys[0], &k, basis);
        }
        a.seed = None;
        Ok(())
    }

    /// The prime `q_level` that the next rescale divides by, as `f64`.
    pub fn rescale_prime(&self, level: usize) -> f64 {
        self.moduli[level.min(self.top())].value() as f64
    }

    /// The tensor product `(a_0b_0, a_0b_1 + a_1b_0, a_1b_1)` (degree 2, no relinearization).
    pub fn mul_no_relin(&self, a: &Ciphertext<B>, b: &Ciphertext<B>) -> Result<Ciphertext<B>> {
        self.own(a.params_id, a.level)?;
        self.own(b.params_id, b.level)?;
        if a.level != b.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        if a.degree() != 1 || b.degree() != 1 {
            return Err(Error::DegreeMismatch {
                found: a.degree().max(b.degree()),
                expected: 1,
            });
        }
        if a.slots != b.slots {
            return Err(Error::InvalidParameters("slot counts differ"));
        }
        let basis = Basis::q(a.level + 1);
        let rows = basis.rows();
        let mut d0 = self.backend.alloc(rows);
        let mut d1 = self.backend.alloc(rows);
        let mut d2 = self.backend.alloc(rows);
        self.backend.mul(&a.polys[0], &b.polys[0], &mut d0, basis);
        self.backend.mul(&a.polys[0], &b.polys[1], &mut d1, basis);
        self.backend
            .mul_add_assign(&mut d1, &a.polys[1], &b.polys[0], basis);
        self.backend.mul(&a.polys[1], &b.polys[1], &mut d2, basis);
        Ok(Ciphertext {
            params_id: self.params().id(),
            polys: vec![d0, d1, d2],
            level: a.level,
            scale: a.scale * b.scale,
            slots: a.slots,
            seed: None,
        })
    }

    /// Key switching of one polynomial `c` (NTT, over `Q_level`) with `key`: returns `(k_0, k_1)`
    /// with `k_0 + k_1·s ≈ c·s'`.
    pub(crate) fn key_switch(
        &self,
        c: &B::Buffer,
        level: usize,
        key: &SwitchingKey<B>,
    ) -> (B::Buffer, B::Buffer) {
        let h = self.hoist(c, level);
        self.key_switch_hoisted(&h, None, key)
    }

    /// Gadget decomposition with ModUp of `c` (the shared part of hoisted key switches).
    fn hoist(&self, c: &B::Buffer, level: usize) -> Hoisted<B> {
        let ext = Basis::qp(level + 1, self.k());
        let mut digits: Vec<B::Buffer> = (0..self.params.digits_at(level))
            .map(|_| self.backend.alloc(ext.rows()))
            .collect();
        self.backend.decompose(c, level, &mut digits);
        Hoisted { digits, level }
    }

    /// Inner product (after an optional automorphism of the digits), without ModDown.
    fn key_switch_hoisted_lazy(
        &self,
        h: &Hoisted<B>,
        g: Option<u64>,
        key: &SwitchingKey<B>,
    ) -> [B::Buffer; 2] {
        let ext = Basis::qp(h.level + 1, self.k());
        let permuted;
        let digits = match g {
            Some(g) => {
                permuted = h
                    .digits
                    .iter()
                    .map(|d| {
                        let mut o = self.backend.alloc(ext.rows());
                        self.backend.automorphism(d, g, &mut o, ext, Domain::Ntt);
                        o
                    })
                    .collect::<Vec<_>>();
                &permuted
            }
            None => &h.digits,
        };
        let mut acc0 = self.backend.alloc(ext.rows());
        let mut acc1 = self.backend.alloc(ext.rows());
        self.backend
            .key_inner_product(digits, &key.b, &key.a, h.level, &mut acc0, &mut acc1);
        [acc0, acc1]
    }

    fn key_switch_hoisted(
        &self,
        h: &Hoisted<B>,
        g: Option<u64>,
        key: &SwitchingKey<B>,
    ) -> (B::Buffer, B::Buffer) {
        let [acc0, acc1] = self.key_switch_hoisted_lazy(h, g, key);
        let rows = h.level + 1;
        let mut out0 = self.backend.alloc(rows);
        let mut out1 = self.backend.alloc(rows);
        self.backend.mod_down(&acc0, h.level, &mut out0);
        self.backend.mod_down(&acc1, h.level, &mut out1);
        (out0, out1)
    }

    /// Relinearizes a degree-2 ciphertext in place.
    pub fn relinearize_assign(
        &self,
        a: &mut Ciphertext<B>,
        keys: &EvaluationKeys<B>,
    ) -> Result<()> {
        self.own(a.params_id, a.level)?;
        if a.degree() != 2 {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: 2,
            });
        }
        let rlk = keys.relin.as_ref().ok_or(Error::MissingRelinKey)?;
        self.check_key(rlk)?;
        let basis = Basis::q(a.level + 1);
        let c2 = a.polys.pop().unwrap();
        let (k0, k1) = self.key_switch(&c2, a.level, rlk);
        self.backend.add_assign(&mut a.polys[0], &k0, basis);
        self.backend.add_assign(&mut a.polys[1], &k1, basis);
        Ok(())
    }

    fn check_key(&self, k: &SwitchingKey<B>) -> Result<()> {
        if k.params_id != self.params.id() {
            return Err(Error::ParameterMismatch);
        }
        Ok(())
    }

    /// `a · b` with relinearization (no rescale).
    pub fn mul_relin(
        &self,
        a: &Ciphertext<B>,
        b: &Ciphertext<B>,
        keys: &EvaluationKeys<B>,
    ) -> Result<Ciphertext<B>> {
        let mut out = self.mul_no_relin(a, b)?;
        self.relinearize_assign(&mut out, keys)?;
        Ok(out)
    }

    /// Divides by the last prime `q_level` with rounding; the scale is divided by it exactly.
    pub fn rescale_assign(&self, a: &mut Ciphertext<B>) -> Result<()> {
        self.own(a.params_id, a.level)?;
        if a.level == 0 {
            return Err(Error::LevelExhausted);
        }
        for x in a.polys.iter_mut() {
            let mut out = self.backend.alloc(a.level);
            self.backend.rescale(x, a.level, &mut out);
            *x = out;
        }
        a.scale /= self.moduli[a.level].value() as f64;
        a.level -= 1;
        a.seed = None;
        Ok(())
    }

    /// Drops primes down to `level` (modulus trimming before sending; the scale is unchanged).
    pub fn drop_level_assign(&self, a: &mut Ciphertext<B>, level: usize) -> Result<()> {
        self.own(a.params_id, a.level)?;
        if level > a.level {
            return Err(Error::InvalidLevel {
                level,
                max_level: a.level,
            });
        }
        let (from, to) = (Basis::q(a.level + 1), Basis::q(level + 1));
        for x in a.polys.iter_mut() {
            let mut out = self.backend.alloc(to.rows());
            self.backend.copy_rows(x, from, &mut out, to);
            *x = out;
        }
        a.level = level;
        a.seed = None;
        Ok(())
    }

    /// Applies the Galois automorphism `g` with key switching.
    pub fn automorphism(
        &self,
        a: &Ciphertext<B>,
        g: u64,
        keys: &EvaluationKeys<B>,
    ) -> Result<Ciphertext<B>> {
        self.own(a.params_id, a.level)?;
        if a.degree() != 1 {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: 1,
            });
        }
        if g.is_multiple_of(2) || g >= 2 * self.n() as u64 {
            return Err(Error::InvalidParameters(
                "Galois elements are odd and below 2N",
            ));
        }
        let key = keys.galois.get(&g).ok_or(Error::MissingGaloisKey(g))?;
        self.check_key(key)?;
        let basis = Basis::q(a.level + 1);
        let rows = basis.rows();
        let mut c0 = self.backend.alloc(rows);
        let mut c1 = self.backend.alloc(rows);
        self.backend
            .automorphism(&a.polys[0], g, &mut c0, basis, Domain::Ntt);
        self.backend
            .automorphism(&a.polys[1], g, &mut c1, basis, Domain::Ntt);
        let (k0, mut k1) = self.key_switch(&c1, a.level, key);
        self.backend.add_assign(&mut c0, &k0, basis);
        core::mem::swap(&mut c1, &mut k1);
        Ok(Ciphertext {
            params_id: self.params().id(),
            polys: vec![c0, c1],
            level: a.level,
            scale: a.scale,
            slots: a.slots,
            seed: None,
        })
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

    /// Checks a degree-1 ciphertext of these parameters and the Galois keys of the rotations `ks`;
    /// returns their Galois elements (the shared entry of the hoisted rotations).
    fn hoisted_elements(
        &self,
        a: &Ciphertext<B>,
        ks: &[i64],
        keys: &EvaluationKeys<B>,
    ) -> Result<Vec<u64>> {
        self.own(a.params_id, a.level)?;
        if a.degree() != 1 {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: 1,
            });
        }
        let gs: Vec<u64> = ks
            .iter()
            .map(|&k| self.encoder.galois_element_for_rotation(k))
            .collect();
        for &g in &gs {
            self.check_key(keys.galois.get(&g).ok_or(Error::MissingGaloisKey(g))?)?;
        }
        Ok(gs)
    }

    /// Hoisted rotations: decomposes `c_1` once, then rotates by each amount in `ks`.
    pub fn rotate_hoisted(
        &self,
        a: &Ciphertext<B>,
        ks: &[i64],
        keys: &EvaluationKeys<B>,
    ) -> Result<Vec<Ciphertext<B>>> {
        let gs = self.hoisted_elements(a, ks, keys)?;
        let basis = Basis::q(a.level + 1);
        let h = self.hoist(&a.polys[1], a.level);
        let mut out = Vec::with_capacity(ks.len());
        for &g in &gs {
            let key = &keys.galois[&g];
            let (k0, k1) = self.key_switch_hoisted(&h, Some(g), key);
            let mut c0 = self.backend.alloc(basis.rows());
            self.backend
                .automorphism(&a.polys[0], g, &mut c0, basis, Domain::Ntt);
            self.backend.add_assign(&mut c0, &k0, basis);
            out.push(Ciphertext {
                params_id: self.params().id(),
                polys: vec![c0, k1],
                level: a.level,
                scale: a.scale,
                slots: a.slots,
                seed: None,
            });
        }
        Ok(out)
    }

    /// Lazy hoisted rotations: like [`Ckks::rotate_hoisted`] but each result stays over
    /// `Q_level ∪ P` (scaled by `P`), so that a sum of rotated terms needs a single ModDown
    /// ([`Ckks::mod_down_ext`]) — the inner loop of baby-step giant-step linear transforms.
    pub fn rotate_hoisted_lazy(
        &self,
        a: &Ciphertext<B>,
        ks: &[i64],
        keys: &EvaluationKeys<B>,
    ) -> Result<Vec<ExtCiphertext<B>>> {
        let gs = self.hoisted_elements(a, ks, keys)?;
        let q_basis = Basis::q(a.level + 1);
        let ext = Basis::qp(a.level + 1, self.k());
        // P mod q_i, for lifting c_0 to the extended basis as P·c_0.
        let p_mod = self.p_mod_q(a.level + 1);
        let h = self.hoist(&a.polys[1], a.level);
        let mut out = Vec::with_capacity(ks.len());
        for &g in &gs {
            let [mut acc0, acc1] = self.key_switch_hoisted_lazy(&h, Some(g), &keys.galois[&g]);
            let mut c0 = self.backend.alloc(q_basis.rows());
            self.backend
                .automorphism(&a.polys[0], g, &mut c0, q_basis, Domain::Ntt);
            self.backend.mul_scalar_assign(&mut c0, &p_mod, q_basis);
            let mut lifted = self.backend.alloc(ext.rows());
            self.backend.copy_rows(&c0, q_basis, &mut lifted, q_basis);
            self.backend.add_assign(&mut acc0, &lifted, ext);
            out.push(ExtCiphertext {
                params_id: self.params().id(),
                polys: [acc0, acc1],
                level: a.level,
                scale: a.scale,
                slots: a.slots,
            });
        }
        Ok(out)
    }

    /// `a += b` over the extended basis.
    pub fn add_ext_assign(&self, a: &mut ExtCiphertext<B>, b: &ExtCiphertext<B>) -> Result<()> {
        self.own(a.params_id, a.level)?;
        self.own(b.params_id, b.level)?;
        if a.slots != b.slots {
            return Err(Error::InvalidParameters("slot counts differ"));
        }
        if a.level != b.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        Self::same_scale(a.scale, b.scale)?;
        let ext = Basis::qp(a.level + 1, self.k());
        for (x, y) in a.polys.iter_mut().zip(&b.polys) {
            self.backend.add_assign(x, y, ext);
        }
        Ok(())
    }

    /// Brings an extended ciphertext back to `Q_level` (divides by `P` with rounding).
    pub fn mod_down_ext(&self, a: &ExtCiphertext<B>) -> Ciphertext<B> {
        let rows = a.level + 1;
        let polys = a
            .polys
            .iter()
            .map(|x| {
                let mut o = self.backend.alloc(rows);
                self.backend.mod_down(x, a.level, &mut o);
                o
            })
            .collect();
        Ciphertext {
            params_id: self.params().id(),
            polys,
            level: a.level,
            scale: a.scale,
            slots: a.slots,
            seed: None,
        }
    }
}
