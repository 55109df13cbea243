//! Subring plaintexts, stored compactly, and sums of products over them.
//!
//! A plaintext of `n` slots lives in the subring `Z[Y]`, `Y = X^g`, `g = N/2n`: only `2n` of its
//! `N` coefficients are nonzero. The canonical NTT puts `a(ψ^{2·bitrev(j)+1})` at position `j`;
//! for `a(X) = b(X^g)` that value depends only on the exponent modulo `2N/g`, that is on the top
//! `log2(N/g)` bits of `j`. So each NTT row is constant on runs of `g` consecutive positions and
//! is kept as `N/g` words ([`SubringPlaintext`]): a quarter of the memory at `N = 2^15` and
//! 4,096 slots.
//!
//! [`Ckks::mul_subring_sums`] evaluates several plaintext sums over one set of ciphertexts in
//! one pass (the giant steps of a baby-step giant-step product): each ciphertext is read once
//! for all the sums and each plaintext word once for its `g` positions, and the products are
//! accumulated lazily and reduced once. The sums are memory-bound, so this, not the arithmetic,
//! sets their speed. The words equal term-by-term products exactly.

use super::encoder::C64;
use super::evaluator::Ckks;
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::rlwe::types::copy_getters;
use crate::rlwe::{Ciphertext, Rlwe};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// A plaintext whose NTT rows are held compactly on the host, `N/g` words per row
/// ([`Ckks::encode_subring_compact`]); multiplied by [`Ckks::mul_subring_sums`].
#[derive(Clone)]
pub struct SubringPlaintext {
    words: Vec<u64>,
    log_gap: u32,
    level: usize,
    scale: f64,
    slots: usize,
    params_id: u64,
}

impl core::fmt::Debug for SubringPlaintext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SubringPlaintext")
            .field("level", &self.level)
            .field("slots", &self.slots)
            .field("log_gap", &self.log_gap)
            .finish_non_exhaustive()
    }
}

impl SubringPlaintext {
    copy_getters! {
        /// The level (rows `q_0..q_level`).
        level: usize,
        /// The scale.
        scale: f64,
        /// The slot count.
        slots: usize,
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// One sum of [`Ckks::mul_subring_sums`]: its terms `(ciphertext, plaintext)`.
pub type SubringSum<'a, B> = Vec<(&'a Ciphertext<B>, &'a SubringPlaintext)>;

impl<B: PolyBackend> Ckks<B> {
    /// Encodes `values` on `slots` slots at `level` and `scale` as [`Ckks::encode`] does (the
    /// same NTT words), kept compactly.
    pub fn encode_subring_compact(
        &self,
        values: &[C64],
        slots: usize,
        level: usize,
        scale: f64,
    ) -> Result<SubringPlaintext> {
        self.rlwe.check_level(level)?;
        let coeffs = self.encoder.encode_subring(values, slots, scale)?;
        let residues = self.message_residues(&coeffs, level, scale)?;
        let n = self.params().n();
        let log_gap = (n / (2 * slots)).trailing_zeros();
        let words = self
            .backend()
            .ntt_subring(&residues, log_gap, Basis::q(level + 1));
        Ok(SubringPlaintext {
            words,
            log_gap,
            level,
            scale,
            slots,
            params_id: self.params().id(),
        })
    }

    /// `[Σ_{(a, pt) ∈ S} a · pt for S in sums]`, `None` for an empty sum. Every term of every
    /// sum must have one level, slot count and degree (a plaintext may sit at a higher level:
    /// its first rows are read), and the terms of one sum one product scale. The ciphertexts
    /// may repeat across sums (and should: each is read once for all of them).
    pub fn mul_subring_sums(
        &self,
        sums: &[SubringSum<'_, B>],
    ) -> Result<Vec<Option<Ciphertext<B>>>> {
        let Some(&(a0, p0)) = sums.iter().flatten().next() else {
            return Ok(sums.iter().map(|_| None).collect());
        };
        // The distinct ciphertexts, by address, in order of first use.
        let mut index: BTreeMap<usize, usize> = BTreeMap::new();
        let mut cts: Vec<&Ciphertext<B>> = Vec::new();
        let mut terms: Vec<(usize, usize, &SubringPlaintext)> = Vec::new();
        let mut scales: Vec<Option<f64>> = Vec::with_capacity(sums.len());
        for (o, sum) in sums.iter().enumerate() {
            let mut scale = None;
            for &(a, pt) in sum {
                self.sum_term_check(a0, a, pt.params_id, pt.level, pt.slots)?;
                if pt.log_gap != p0.log_gap {
                    return Err(Error::InvalidParameters(
                        "subring plaintexts of different slot counts in one product",
                    ));
                }
                let s = a.scale * pt.scale;
                match scale {
                    None => scale = Some(s),
                    Some(t) => Rlwe::<B>::same_scale(t, s)?,
                }
                let x = *index
                    .entry(a as *const Ciphertext<B> as usize)
                    .or_insert_with(|| {
                        cts.push(a);
                        cts.len() - 1
                    });
                terms.push((o, x, pt));
            }
            scales.push(scale);
        }
        let basis = Basis::q(a0.level + 1);
        let n = self.params().n();
        let width = (n >> p0.log_gap) * basis.rows();
        let be = self.backend();
        // One backend call per polynomial index: the inputs are that polynomial of each
        // ciphertext, the outputs that polynomial of each sum.
        let degree = a0.polys.len();
        let mut polys: Vec<Vec<B::Buffer>> = (0..sums.len()).map(|_| Vec::new()).collect();
        for i in 0..degree {
            let xs: Vec<&B::Buffer> = cts.iter().map(|c| &c.polys[i]).collect();
            let ts: Vec<(usize, usize, &[u64])> = terms
                .iter()
                .map(|&(o, x, pt)| (o, x, &pt.words[..width]))
                .collect();
            let mut outs: Vec<B::Buffer> =
                (0..sums.len()).map(|_| be.alloc(basis.rows())).collect();
            be.mul_sum_subring(&xs, &ts, p0.log_gap, &mut outs, basis);
            for (p, out) in polys.iter_mut().zip(outs) {
                p.push(out);
            }
        }
        Ok(polys
            .into_iter()
            .zip(scales)
            .map(|(polys, scale)| scale.map(|scale| a0.with_polys(polys, scale)))
            .collect())
    }
}
