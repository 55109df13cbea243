//! [`Ckks`]: the CKKS evaluator, a thin layer over [`Rlwe`] that adds the encoder — encoding
//! and decoding with scales, keys for slot rotations — and the scale bookkeeping of evaluation
//! ([`super::arith`], [`super::rotate`]).

use super::encoder::{Encoder, C64};
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::params::CkksParams;
use crate::rlwe::{
    Ciphertext, EvaluationKeys, Plaintext, PublicKey, Rlwe, SecretKey, SwitchingKey,
};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// Public methods of [`Ckks`] that are those of its [`Rlwe`] context: each listed signature
/// (with its docs) becomes a method calling the `Rlwe` method of the same name.
macro_rules! rlwe_methods {
    ($($(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self $(, $arg: $ty)*) -> $ret {
                self.rlwe.$name($($arg),*)
            }
        )*
    };
}

/// The CKKS engine over a backend: an [`Rlwe`] context and the canonical-embedding [`Encoder`].
pub struct Ckks<B: PolyBackend> {
    pub(crate) rlwe: Rlwe<B>,
    pub(crate) encoder: Encoder,
}

impl<B: PolyBackend> core::fmt::Debug for Ckks<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ckks")
            .field("params", self.params())
            .field("backend", &self.backend().name())
            .finish()
    }
}

impl<B: PolyBackend> Ckks<B> {
    /// A CKKS engine on `backend` (whose parameter set it uses).
    pub fn new(backend: Arc<B>) -> Self {
        let rlwe = Rlwe::new(backend);
        Self {
            encoder: Encoder::new(rlwe.params().log_n()),
            rlwe,
        }
    }

    rlwe_methods! {
        /// The parameters.
        fn params(&self) -> &CkksParams;
        /// The backend.
        fn backend(&self) -> &B;
    }
    /// The encoder.
    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }
    /// The RLWE context underneath: key switching as composable steps
    /// ([`Rlwe::decompose`], [`Rlwe::gadget_product`], [`Rlwe::mod_down`]).
    pub fn rlwe(&self) -> &Rlwe<B> {
        &self.rlwe
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
        self.rlwe.check_level(level)?;
        // Only the 2·slots coefficients of the slot subring are non-zero (stride N/2·slots).
        let coeffs = self.encoder.encode_subring(values, slots, scale)?;
        let poly = self.message_ntt(&coeffs, slots, level, scale)?;
        Ok(self.rlwe.plaintext(poly, level, scale, slots))
    }

    /// The NTT rows over `Q_level` of an integer message in the slot subring (`2·slots`
    /// coefficients at stride `N/2·slots`), after checking that it fits.
    pub(crate) fn message_ntt(
        &self,
        coeffs: &[i128],
        slots: usize,
        level: usize,
        scale: f64,
    ) -> Result<B::Buffer> {
        let residues = self.message_residues(coeffs, level, scale)?;
        let n = self.params().n();
        let gap = n / (2 * slots);
        let basis = Basis::q(level + 1);
        let mut rows = vec![0u64; basis.rows() * n];
        for (row, src) in rows.chunks_mut(n).zip(residues.chunks(coeffs.len())) {
            for (k, &c) in src.iter().enumerate() {
                row[k * gap] = c;
            }
        }
        let mut poly = self.backend().upload(&rows);
        self.backend().ntt(&mut poly, basis);
        Ok(poly)
    }

    /// The residues over `Q_level` of an integer message (`coeffs.len()` words per row), after
    /// checking that it fits: centred in `Q_level`, and below `scale·2^63` so that decoding
    /// (which reads the fewest primes above `scale·2^64`) recovers it.
    pub(crate) fn message_residues(
        &self,
        coeffs: &[i128],
        level: usize,
        scale: f64,
    ) -> Result<Vec<u64>> {
        let max = coeffs.iter().map(|c| c.unsigned_abs()).max().unwrap_or(0);
        let bound_bits = (self.params().log_q_at(level) - 1.0).min(libm::log2(scale) + 63.0);
        if max != 0 && libm::log2(max as f64) >= bound_bits {
            return Err(Error::EncodingOverflow);
        }
        let mut out = Vec::with_capacity((level + 1) * coeffs.len());
        for m in &self.rlwe.moduli[..level + 1] {
            // Almost every coefficient fits an i64, whose reduction is a single mul-high.
            out.extend(coeffs.iter().map(|&c| match i64::try_from(c) {
                Ok(v) => m.from_i64(v),
                Err(_) => m.from_i128(c),
            }));
        }
        Ok(out)
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
            bits += libm::log2(self.rlwe.moduli[k].value() as f64);
            k += 1;
        }
        k
    }

    /// Decodes a plaintext into its slot values.
    ///
    /// The first primes (see `decode_rows`) are brought to the host and lifted to centred
    /// integers by Garner's mixed-radix conversion, then divided by the scale.
    pub fn decode(&self, pt: &Plaintext<B>) -> Result<Vec<C64>> {
        self.rlwe.own(pt.params_id, pt.level)?;
        let n = self.params().n();
        let k = self.decode_rows(pt.level, pt.scale);
        let basis = Basis::q(k);
        let be = self.backend();
        let mut coeff = be.alloc(k);
        be.copy_rows(&pt.poly, Basis::q(pt.level + 1), &mut coeff, basis);
        be.intt(&mut coeff, basis);
        let mut host = vec![0u64; k * n];
        be.download(&coeff, &mut host)?;
        let q = &self.rlwe.moduli[..k];
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

    // ---- keys, encryption, decryption (the RLWE layer) ------------------------------------

    rlwe_methods! {
        /// Samples a secret key from the parameter set's distribution ([`Rlwe::gen_secret_key`]).
        fn gen_secret_key(&self, rng: &mut (impl RngCore + CryptoRng)) -> SecretKey;
        /// The public key `(-a·s + e, a)` over `Q ∪ {p_0}` ([`Rlwe::gen_public_key`]).
        fn gen_public_key(&self, sk: &SecretKey, rng: &mut (impl RngCore + CryptoRng))
            -> Result<PublicKey<B>>;
        /// The relinearization key (`s² → s`).
        fn gen_relin_key(&self, sk: &SecretKey, rng: &mut (impl RngCore + CryptoRng))
            -> Result<SwitchingKey<B>>;
        /// The Galois key for element `g` (`s → σ_g^{-1}(s)`,
        /// [`crate::rlwe::Rlwe::gen_galois_key`]).
        fn gen_galois_key(&self, sk: &SecretKey, g: u64, rng: &mut (impl RngCore + CryptoRng))
            -> Result<SwitchingKey<B>>;
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

    rlwe_methods! {
        /// Public-key encryption in `Q_level ∪ {p_0}`, then ModDown by `p_0`:
        /// `(round((b·u + e_0)/p_0) + m, round((a·u + e_1)/p_0))`, `u` uniform ternary
        /// ([`Rlwe::encrypt_pk`]; the noise is the division's rounding alone).
        fn encrypt_pk(&self, pk: &PublicKey<B>, pt: &Plaintext<B>,
            rng: &mut (impl RngCore + CryptoRng)) -> Result<Ciphertext<B>>;
        /// Secret-key encryption `(-a·s + e + m, a)` with `a` expanded from a fresh seed, so the
        /// ciphertext serializes at half size.
        fn encrypt_sk(&self, sk: &SecretKey, pt: &Plaintext<B>,
            rng: &mut (impl RngCore + CryptoRng)) -> Result<Ciphertext<B>>;
        /// Decryption: `c_0 + c_1·s (+ c_2·s²)`.
        fn decrypt(&self, sk: &SecretKey, ct: &Ciphertext<B>) -> Result<Plaintext<B>>;
        /// A deep copy.
        fn clone_ct(&self, ct: &Ciphertext<B>) -> Ciphertext<B>;
    }

    /// Decrypts and decodes.
    pub fn decrypt_decode(&self, sk: &SecretKey, ct: &Ciphertext<B>) -> Result<Vec<C64>> {
        // Only the rows decoding reads are decrypted.
        let level = self.decode_rows(ct.level, ct.scale).min(ct.level + 1) - 1;
        let pt = self.rlwe.decrypt_at(sk, ct, level)?;
        self.decode(&pt)
    }
}
