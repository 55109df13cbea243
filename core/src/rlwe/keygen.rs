//! Key generation: the secret key, the public key, and switching keys for hybrid key switching
//! (relinearization and Galois keys).
//!
//! A switching key from `s'` to `s` has one RLWE sample per gadget digit `j < dnum`:
//! `(b_j, a_j) = (-a_j·s + e_j + P·g_j·s', a_j)` over `Q ∪ P`, with `g_j ≡ 1 (mod q_i)` on the
//! digit's primes and `≡ 0` on the others (Han–Ki 2020, §3). The `a_j` are expanded from one
//! public seed (stream `j`), so a key serializes at half size.

use super::context::Rlwe;
use super::keys::{LevelZeroKey, PublicKey, SecretKey, SwitchingKey};
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::math::sampling;
use crate::params::SecretDistribution;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

impl<B: PolyBackend> Rlwe<B> {
    /// Samples a secret key from the parameter set's distribution.
    ///
    /// The canonical NTT of `s` over `Q ∪ P` is computed by the backend and read back. Should
    /// the device fail to read it back, the same words are computed on the host with the
    /// parameter set's tables (the transform every backend reproduces bit for bit), so key
    /// generation never meets a device fault and never panics.
    pub fn gen_secret_key(&self, rng: &mut (impl RngCore + CryptoRng)) -> SecretKey {
        let n = self.n();
        let coeffs = Zeroizing::new(match self.params.secret_distribution() {
            SecretDistribution::UniformTernary => sampling::ternary(rng, n),
            SecretDistribution::SparseTernary { h } => sampling::sparse_ternary(rng, n, h as usize),
        });
        self.secret_from_coeffs(coeffs)
    }

    /// An ephemeral secret of exactly `h` nonzero coefficients in `{−1, 1}`, whatever the
    /// parameter set's distribution: the sparse secret of bootstrapping's sparse-secret
    /// encapsulation ([`Rlwe::gen_sparse_switching_key`]). Not for general use: a secret this
    /// sparse is secure only under the small modulus that key lives in.
    pub(crate) fn gen_ephemeral_secret(
        &self,
        h: usize,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> SecretKey {
        let coeffs = Zeroizing::new(sampling::sparse_ternary(rng, self.n(), h.min(self.n())));
        self.secret_from_coeffs(coeffs)
    }

    /// The key of ternary coefficients `coeffs`: their canonical NTT over `Q ∪ P`.
    fn secret_from_coeffs(&self, coeffs: Zeroizing<Vec<i8>>) -> SecretKey {
        let n = self.n();
        let full = self.full_basis();
        let mut ntt = Zeroizing::new(vec![0u64; full.rows() * n]);
        let wide: Zeroizing<Vec<i64>> = Zeroizing::new(coeffs.iter().map(|&c| c as i64).collect());
        let mut buf = self.small_to_ntt(&wide, full);
        let read = self.backend.download(&buf, &mut ntt);
        self.backend.zeroize(&mut buf);
        if read.is_err() {
            let q_total = self.params.q().len();
            for r in 0..full.rows() {
                let g = full.global_index(r, q_total);
                let m = &self.moduli[g];
                let row = &mut ntt[r * n..(r + 1) * n];
                for (o, &c) in row.iter_mut().zip(coeffs.iter()) {
                    *o = m.from_i64(c as i64);
                }
                self.params.ntt_table(g).forward(row);
            }
        }
        SecretKey {
            coeffs,
            ntt,
            params_id: self.params.id(),
        }
    }

    /// The public key `(-a·s + e, a)` over `Q ∪ {p_0}` (the first special prime, so that
    /// [`Rlwe::encrypt_pk`] can encrypt in the extended basis), `a` expanded from a fresh seed.
    pub fn gen_public_key(
        &self,
        sk: &SecretKey,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<PublicKey<B>> {
        self.check_sk(sk)?;
        let basis = super::keys::public_key_basis(&self.params);
        let (seed, b, a) = self.seeded_sample(sk, basis, rng);
        Ok(PublicKey {
            b,
            a,
            seed,
            params_id: self.params.id(),
        })
    }

    /// A switching key from `s'` (given by its NTT rows over `Q`) to `s`.
    pub(crate) fn gen_switching_key(
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
        // −s, so that each digit's `b = e − a·s` is one fused multiply-add pass.
        let mut s = self.upload_secret(sk, full);
        self.backend.neg_assign(&mut s, full);
        let p_mod = self.p_mod_q(levels);
        let mut bs = Vec::with_capacity(self.params.dnum());
        let mut as_ = Vec::with_capacity(self.params.dnum());
        for j in 0..self.params.dnum() {
            let a = self.backend.expand_uniform(&seed, j as u64, full);
            let e = self.sample_error(rng);
            let mut b = self.small_to_ntt(&e, full);
            self.backend.mul_add_assign(&mut b, &a, &s, full);
            // + P·g_j·s' : only the digit's Q rows, so the buffer stops at the digit's last
            // prime (the prefix basis `Q_{end}`; rows below the digit are zero).
            let end = ((j + 1) * alpha).min(levels);
            let prefix = Basis::q(end);
            let mut g = Zeroizing::new(vec![0u64; end * n]);
            for i in j * alpha..end {
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
            self.backend.add_assign(&mut b, &gb, prefix);
            self.backend.zeroize(&mut gb);
            bs.push(b);
            as_.push(a);
        }
        self.backend.zeroize(&mut s);
        SwitchingKey {
            b: bs,
            a: as_,
            seed,
            params_id: self.params.id(),
        }
    }

    /// A switching key from `s` to `s'` over the two primes `q_0` and `p_0` only, with one digit:
    /// `(b, a) = (−a·s' + e + p_0·s, a)` over `{q_0, p_0}`, `a` uniform. It moves a level-0
    /// ciphertext from `s` to a sparse `s'` (bootstrapping's sparse-secret encapsulation,
    /// Bossuat–Troncoso-Pastoriza–Hubaux 2022); the small modulus `q_0·p_0` is what keeps a
    /// sparse `s'` (e.g. `h = 32`) secure. The pair is returned as two 2-row buffers over
    /// `Basis::qp(1, 1)`, NTT domain.
    pub(crate) fn gen_sparse_switching_key(
        &self,
        sk: &SecretKey,
        sparse: &SecretKey,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<LevelZeroKey<B>> {
        self.check_sk(sk)?;
        let n = self.n();
        let basis = Basis::qp(1, 1);
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let a = self.backend.expand_uniform(&seed, 0, basis);
        let e = self.sample_error(rng);
        let mut b = self.small_to_ntt(&e, basis);
        // −s' over {q_0, p_0}: its rows of the full basis.
        let mut s_to = self.upload_secret(sparse, basis);
        self.backend.neg_assign(&mut s_to, basis);
        self.backend.mul_add_assign(&mut b, &a, &s_to, basis);
        self.backend.zeroize(&mut s_to);
        // + p_0·s on the q_0 row (zero on the p_0 row).
        let m = &self.moduli[0];
        let p0 = self.params.p()[0].value() % m.value();
        let (w, ws) = (p0, m.shoup(p0));
        let mut g = Zeroizing::new(vec![0u64; 2 * n]);
        for (o, &x) in g[..n].iter_mut().zip(&sk.ntt[..n]) {
            *o = m.mul_shoup(x, w, ws);
        }
        let mut gb = self.backend.upload(&g);
        self.backend.add_assign(&mut b, &gb, basis);
        self.backend.zeroize(&mut gb);
        Ok(LevelZeroKey {
            b,
            a,
            seed,
            params_id: self.params.id(),
        })
    }

    /// A switching key from `from` to `s` over `Q ∪ P` (the gadget of the parameter set).
    pub(crate) fn gen_switching_key_from(
        &self,
        sk: &SecretKey,
        from: &SecretKey,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SwitchingKey<B>> {
        self.check_sk(sk)?;
        let levels = self.top() + 1;
        Ok(self.gen_switching_key(sk, &from.ntt[..levels * self.n()], rng))
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

    /// The Galois key for element `g`, `g` odd (taken mod `2N`): a switching key from `s` to
    /// `σ_g^{-1}(s)`.
    ///
    /// An automorphism key-switches `c_1` first, to a ciphertext under `σ_g^{-1}(s)`, and then
    /// applies `σ_g` to the result, which is then under `σ_g(σ_g^{-1}(s)) = s`
    /// ([`Rlwe::automorphism`]). This order permutes the two output polynomials instead of the
    /// decomposed digits, which is what makes hoisted rotations cheap; the noise is the same.
    pub fn gen_galois_key(
        &self,
        sk: &SecretKey,
        g: u64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SwitchingKey<B>> {
        self.check_sk(sk)?;
        let two_n = 2 * self.n() as u64;
        let g = g % two_n;
        if g.is_multiple_of(2) {
            return Err(Error::InvalidParameters("Galois elements are odd"));
        }
        let n = self.n();
        let levels = self.top() + 1;
        // σ_g^{-1} = σ_{g^{-1} mod 2N}; the unit group mod 2N has order N, so g^{-1} = g^{N-1}.
        let (mut g_inv, mut base, mut e) = (1u64, g, n as u64 - 1);
        while e > 0 {
            if e & 1 == 1 {
                g_inv = g_inv * base % two_n;
            }
            base = base * base % two_n;
            e >>= 1;
        }
        let t = sk.automorphism(self.params.log_n(), g_inv);
        Ok(self.gen_switching_key(&t, &sk.ntt[..levels * n], rng))
    }
}
