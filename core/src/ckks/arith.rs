//! CKKS arithmetic: additions, plaintext and constant products, the tensor product with
//! relinearization, rescaling and level drops. Each entry point checks parameters, levels,
//! scales and slot counts once.

use super::encoder::C64;
use super::evaluator::Ckks;
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::rlwe::{Ciphertext, EvaluationKeys, Plaintext, Rlwe};
use alloc::vec;
use alloc::vec::Vec;

impl<B: PolyBackend> Ckks<B> {
    /// The checks of a binary operation `a ∘ b`: same parameters, level, slots and scale.
    fn binary_check(
        &self,
        a: &Ciphertext<B>,
        b_id: u64,
        b_level: usize,
        b_scale: f64,
        b_slots: usize,
    ) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        self.rlwe.own(b_id, b_level)?;
        if a.level != b_level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: b_level,
            });
        }
        Rlwe::<B>::same_slots(a.slots, b_slots)?;
        Rlwe::<B>::same_scale(a.scale, b_scale)
    }

    /// `a += b` (same level, scale and slots; degrees may differ).
    pub fn add_assign(&self, a: &mut Ciphertext<B>, b: &Ciphertext<B>) -> Result<()> {
        self.binary_assign(a, b, false)
    }

    /// `a ±= b` in place.
    fn binary_assign(&self, a: &mut Ciphertext<B>, b: &Ciphertext<B>, sub: bool) -> Result<()> {
        self.binary_check(a, b.params_id, b.level, b.scale, b.slots)?;
        let basis = Basis::q(a.level + 1);
        let be = self.backend();
        while a.polys.len() < b.polys.len() {
            a.polys.push(be.alloc(basis.rows()));
        }
        for (x, y) in a.polys.iter_mut().zip(&b.polys) {
            if sub {
                be.sub_assign(x, y, basis);
            } else {
                be.add_assign(x, y, basis);
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
        let be = self.backend();
        let degree = a.polys.len().max(b.polys.len());
        let polys = (0..degree)
            .map(|i| match (a.polys.get(i), b.polys.get(i)) {
                (Some(x), Some(y)) if sub => be.sub_new(x, y, basis),
                (Some(x), Some(y)) => be.add_new(x, y, basis),
                (Some(x), None) => self.rlwe.copy_buf(x, basis),
                (None, Some(y)) => {
                    let mut o = self.rlwe.copy_buf(y, basis);
                    if sub {
                        be.neg_assign(&mut o, basis);
                    }
                    o
                }
                // Not reached (i is below the larger degree); a zero polynomial is the neutral answer.
                (None, None) => be.alloc(basis.rows()),
            })
            .collect();
        Ok(a.with_polys(polys, a.scale))
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
        self.rlwe.own(a.params_id, a.level)?;
        let basis = Basis::q(a.level + 1);
        for x in a.polys.iter_mut() {
            self.backend().neg_assign(x, basis);
        }
        a.seed = None;
        Ok(())
    }

    /// `a += pt` (same level, scale and slots).
    pub fn add_plain_assign(&self, a: &mut Ciphertext<B>, pt: &Plaintext<B>) -> Result<()> {
        self.binary_check(a, pt.params_id, pt.level, pt.scale, pt.slots)?;
        self.backend()
            .add_assign(&mut a.polys[0], &pt.poly, Basis::q(a.level + 1));
        Ok(())
    }

    /// `a -= pt`.
    pub fn sub_plain_assign(&self, a: &mut Ciphertext<B>, pt: &Plaintext<B>) -> Result<()> {
        self.binary_check(a, pt.params_id, pt.level, pt.scale, pt.slots)?;
        self.backend()
            .sub_assign(&mut a.polys[0], &pt.poly, Basis::q(a.level + 1));
        Ok(())
    }

    /// The checks of `a · pt` for a plaintext (of any storage) with parameter id `pt_id`, level
    /// `pt_level` and `pt_slots` slots: same parameters and slots, the plaintext at `a`'s level
    /// or above.
    fn plain_factor_check(
        &self,
        a: &Ciphertext<B>,
        pt_id: u64,
        pt_level: usize,
        pt_slots: usize,
    ) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        self.rlwe.own(pt_id, pt_level)?;
        if pt_level < a.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: pt_level,
            });
        }
        Rlwe::<B>::same_slots(a.slots, pt_slots)
    }

    /// The checks of a term `a · pt` of a sum of products whose first ciphertext is `a0`: those
    /// of [`Ckks::plain_factor_check`], and `a` at `a0`'s level, degree and slot count. (The
    /// product scales are the caller's: one per sum.)
    pub(super) fn sum_term_check(
        &self,
        a0: &Ciphertext<B>,
        a: &Ciphertext<B>,
        pt_id: u64,
        pt_level: usize,
        pt_slots: usize,
    ) -> Result<()> {
        self.plain_factor_check(a, pt_id, pt_level, pt_slots)?;
        if a.level != a0.level {
            return Err(Error::LevelMismatch {
                left: a0.level,
                right: a.level,
            });
        }
        if a.polys.len() != a0.polys.len() {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: a0.degree(),
            });
        }
        Rlwe::<B>::same_slots(a0.slots, a.slots)
    }

    /// `a *= pt` (slot-wise); the scale becomes `Δ_a·Δ_pt`. The plaintext may sit at a higher level.
    pub fn mul_plain_assign(&self, a: &mut Ciphertext<B>, pt: &Plaintext<B>) -> Result<()> {
        self.plain_factor_check(a, pt.params_id, pt.level, pt.slots)?;
        let basis = Basis::q(a.level + 1);
        for x in a.polys.iter_mut() {
            self.backend().mul_assign(x, &pt.poly, basis);
        }
        a.scale *= pt.scale;
        a.seed = None;
        Ok(())
    }

    /// `acc += a · pt` in one multiply-accumulate pass per polynomial, without a temporary
    /// ciphertext. `acc` must have `a`'s level, slots and degree, and the scale `Δ_a·Δ_pt`.
    pub fn mul_plain_acc(
        &self,
        acc: &mut Ciphertext<B>,
        a: &Ciphertext<B>,
        pt: &Plaintext<B>,
    ) -> Result<()> {
        self.plain_factor_check(a, pt.params_id, pt.level, pt.slots)?;
        self.binary_check(acc, a.params_id, a.level, a.scale * pt.scale, a.slots)?;
        if acc.polys.len() != a.polys.len() {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: acc.degree(),
            });
        }
        let basis = Basis::q(a.level + 1);
        for (x, y) in acc.polys.iter_mut().zip(&a.polys) {
            self.backend().mul_add_assign(x, y, &pt.poly, basis);
        }
        acc.seed = None;
        Ok(())
    }

    /// `Σ_j a_j · pt_j` in one pass per polynomial (a linear transform's baby-step sum): the
    /// terms must be nonempty, with one level, slots, degree and product scale.
    pub fn mul_plain_sum(
        &self,
        terms: &[(&Ciphertext<B>, &Plaintext<B>)],
    ) -> Result<Ciphertext<B>> {
        let (a0, p0) = first_term(terms)?;
        let scale = a0.scale * p0.scale;
        for &(a, pt) in terms {
            self.sum_term_check(a0, a, pt.params_id, pt.level, pt.slots)?;
            Rlwe::<B>::same_scale(scale, a.scale * pt.scale)?;
        }
        let basis = Basis::q(a0.level + 1);
        let polys = (0..a0.polys.len())
            .map(|i| {
                let pairs: Vec<(&B::Buffer, &B::Buffer)> = terms
                    .iter()
                    .map(|(a, pt)| (&a.polys[i], &pt.poly))
                    .collect();
                let mut out = self.backend().alloc(basis.rows());
                self.backend().mul_sum(&pairs, &mut out, basis);
                out
            })
            .collect();
        Ok(a0.with_polys(polys, scale))
    }

    /// `a · pt`.
    pub fn mul_plain(&self, a: &Ciphertext<B>, pt: &Plaintext<B>) -> Result<Ciphertext<B>> {
        let mut out = self.clone_ct(a);
        self.mul_plain_assign(&mut out, pt)?;
        Ok(out)
    }

    /// The NTT rows of the constant polynomial `re + im·X^{N/2}` over `basis`.
    fn constant_poly(&self, re: i128, im: i128, basis: Basis) -> B::Buffer {
        let n = self.params().n();
        let mut rows = vec![0u64; basis.rows() * n];
        for r in 0..basis.rows() {
            let m = &self.rlwe.moduli[r];
            rows[r * n] = m.from_i128(re);
            rows[r * n + n / 2] = m.from_i128(im);
        }
        let mut buf = self.backend().upload(&rows);
        self.backend().ntt(&mut buf, basis);
        buf
    }

    /// One residue of the integer `x` per prime of `Q_level` (a scalar per row).
    fn scalar_rows(&self, level: usize, x: i128) -> Vec<u64> {
        self.rlwe.moduli[..level + 1]
            .iter()
            .map(|m| m.from_i128(x))
            .collect()
    }

    /// `a *= c` for a complex constant encoded at `scale` (the ciphertext's scale is multiplied by
    /// `scale`). Pass `scale = q_level` (see [`Ckks::rescale_prime`]) to return to the same scale
    /// after the next rescale.
    pub fn mul_const_assign(&self, a: &mut Ciphertext<B>, c: C64, scale: f64) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        if !(scale.is_finite() && scale >= 1.0) {
            return Err(Error::InvalidParameters(
                "scale must be finite and at least 1",
            ));
        }
        let (re, im) = self.encoder.encode_constant(c, scale)?;
        let basis = Basis::q(a.level + 1);
        if im == 0 {
            let s = self.scalar_rows(a.level, re);
            for x in a.polys.iter_mut() {
                self.backend().mul_scalar_assign(x, &s, basis);
            }
        } else {
            let k = self.constant_poly(re, im, basis);
            for x in a.polys.iter_mut() {
                self.backend().mul_assign(x, &k, basis);
            }
        }
        a.scale *= scale;
        a.seed = None;
        Ok(())
    }

    /// `acc += c·a` for a complex constant `c` encoded at `scale`, in one pass per polynomial
    /// and without a temporary ciphertext (a term of a linear combination). `a` may sit above
    /// `acc`'s level (its lower rows are read, as if dropped); `acc` must have `a`'s slots and
    /// degree and the scale `Δ_a·scale`.
    pub fn mul_const_acc(
        &self,
        acc: &mut Ciphertext<B>,
        a: &Ciphertext<B>,
        c: C64,
        scale: f64,
    ) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        if !(scale.is_finite() && scale >= 1.0) {
            return Err(Error::InvalidParameters(
                "scale must be finite and at least 1",
            ));
        }
        if a.level < acc.level {
            return Err(Error::LevelMismatch {
                left: acc.level,
                right: a.level,
            });
        }
        self.binary_check(acc, a.params_id, acc.level, a.scale * scale, a.slots)?;
        if acc.polys.len() != a.polys.len() {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: acc.degree(),
            });
        }
        let (re, im) = self.encoder.encode_constant(c, scale)?;
        let basis = Basis::q(acc.level + 1);
        if im == 0 {
            let s = self.scalar_rows(acc.level, re);
            for (x, y) in acc.polys.iter_mut().zip(&a.polys) {
                self.backend().mul_scalar_add_assign(x, y, &s, basis);
            }
        } else {
            let k = self.constant_poly(re, im, basis);
            for (x, y) in acc.polys.iter_mut().zip(&a.polys) {
                self.backend().mul_add_assign(x, y, &k, basis);
            }
        }
        acc.seed = None;
        Ok(())
    }

    /// `out_r = Σ_j W[r][j]·ins_j` for a real matrix `W` (`rows × ins.len()`, row-major): a
    /// layer of constant weights over ciphertexts that each hold one feature for a whole batch
    /// (a CNN at full batch). Every output has the scale `Δ_in·scale`; pass `scale = q_level`
    /// ([`Ckks::rescale_prime`]) to return to `Δ_in` after one rescale.
    ///
    /// The scale is split as `scale = Δ₁·Δ₂` with an integer `Δ₁` (FEnc2's split, §IV-C): the
    /// weights are rounded to integers `⌊W·Δ₂⌉` of at most
    /// [`SMALL_WEIGHT_BITS`](crate::backend::SMALL_WEIGHT_BITS) bits, so
    /// [`PolyBackend::small_weight_gemm`] can sum them lazily, and `Δ₁` multiplies each sum
    /// once. Each weight is therefore exact to `1/(2Δ₂) = Δ₁/(2·scale)`, about
    /// `2^-21·max|W|`. Inputs must share parameters, level, scale, slots and degree.
    pub fn mul_const_matrix(
        &self,
        ins: &[&Ciphertext<B>],
        weights: &[f64],
        rows: usize,
        scale: f64,
    ) -> Result<Vec<Ciphertext<B>>> {
        let first = ins
            .first()
            .ok_or(Error::InvalidParameters("a constant matrix needs an input"))?;
        for c in ins {
            self.binary_check(first, c.params_id, c.level, c.scale, c.slots)?;
            if c.polys.len() != first.polys.len() {
                return Err(Error::DegreeMismatch {
                    found: c.degree(),
                    expected: first.degree(),
                });
            }
        }
        if weights.len() != rows * ins.len() {
            return Err(Error::Shape {
                what: "weights of a constant matrix (rows × inputs)",
                expected: rows * ins.len(),
                found: weights.len(),
            });
        }
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(Error::NonFinite);
        }
        if !(scale.is_finite() && scale >= 1.0) {
            return Err(Error::InvalidParameters(
                "scale must be finite and at least 1",
            ));
        }
        let bound = ((1u64 << crate::backend::SMALL_WEIGHT_BITS) - 1) as f64;
        let wmax = weights.iter().fold(0.0f64, |a, w| a.max(w.abs()));
        let d1 = libm::ceil(scale * wmax / bound).max(1.0);
        if d1 >= 9.0e15 {
            return Err(Error::InvalidParameters(
                "a constant matrix's weights are too large for its scale",
            ));
        }
        let d2 = scale / d1;
        let w: Vec<i32> = weights.iter().map(|x| libm::round(x * d2) as i32).collect();
        let level = first.level;
        let basis = Basis::q(level + 1);
        let post = self.scalar_rows(level, d1 as i128);
        let be = self.backend();
        let mut outs: Vec<Ciphertext<B>> = Vec::with_capacity(rows);
        let mut polys: Vec<Vec<B::Buffer>> = (0..rows).map(|_| Vec::new()).collect();
        for d in 0..first.polys.len() {
            let xs: Vec<&B::Buffer> = ins.iter().map(|c| &c.polys[d]).collect();
            let mut part: Vec<B::Buffer> = (0..rows).map(|_| be.alloc(basis.rows())).collect();
            be.small_weight_gemm(&xs, &w, &post, &mut part, basis);
            for (p, b) in polys.iter_mut().zip(part) {
                p.push(b);
            }
        }
        for p in polys {
            outs.push(first.with_polys(p, first.scale * scale));
        }
        Ok(outs)
    }

    /// `a *= k` for an integer `k` (scale unchanged).
    pub fn mul_int_assign(&self, a: &mut Ciphertext<B>, k: i64) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        let basis = Basis::q(a.level + 1);
        let s: Vec<u64> = self.rlwe.moduli[..basis.rows()]
            .iter()
            .map(|m| m.from_i64(k))
            .collect();
        for x in a.polys.iter_mut() {
            self.backend().mul_scalar_assign(x, &s, basis);
        }
        a.seed = None;
        Ok(())
    }

    /// `a += c` for a complex constant (encoded at the ciphertext's scale).
    pub fn add_const_assign(&self, a: &mut Ciphertext<B>, c: C64) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        let (re, im) = self.encoder.encode_constant(c, a.scale)?;
        let basis = Basis::q(a.level + 1);
        if im == 0 {
            let s = self.scalar_rows(a.level, re);
            self.backend().add_scalar_assign(&mut a.polys[0], &s, basis);
        } else {
            let k = self.constant_poly(re, im, basis);
            self.backend().add_assign(&mut a.polys[0], &k, basis);
        }
        a.seed = None;
        Ok(())
    }

    /// The prime `q_level` that the next rescale divides by, as `f64`.
    pub fn rescale_prime(&self, level: usize) -> f64 {
        self.rlwe.moduli[level.min(self.params().max_level())].value() as f64
    }

    /// The tensor product `(a_0b_0, a_0b_1 + a_1b_0, a_1b_1)` (degree 2, no relinearization).
    pub fn mul_no_relin(&self, a: &Ciphertext<B>, b: &Ciphertext<B>) -> Result<Ciphertext<B>> {
        self.rlwe.own(a.params_id, a.level)?;
        self.rlwe.own(b.params_id, b.level)?;
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
        Rlwe::<B>::same_slots(a.slots, b.slots)?;
        let basis = Basis::q(a.level + 1);
        let be = self.backend();
        let rows = basis.rows();
        let mut d0 = be.alloc(rows);
        let mut d1 = be.alloc(rows);
        let mut d2 = be.alloc(rows);
        be.mul(&a.polys[0], &b.polys[0], &mut d0, basis);
        be.mul(&a.polys[0], &b.polys[1], &mut d1, basis);
        be.mul_add_assign(&mut d1, &a.polys[1], &b.polys[0], basis);
        be.mul(&a.polys[1], &b.polys[1], &mut d2, basis);
        Ok(a.with_polys(vec![d0, d1, d2], a.scale * b.scale))
    }

    /// Relinearizes a degree-2 ciphertext in place ([`Rlwe::relinearize_assign`]).
    pub fn relinearize_assign(
        &self,
        a: &mut Ciphertext<B>,
        keys: &EvaluationKeys<B>,
    ) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        if a.degree() != 2 {
            return Err(Error::DegreeMismatch {
                found: a.degree(),
                expected: 2,
            });
        }
        let rlk = keys.relin.as_ref().ok_or(Error::MissingRelinKey)?;
        self.rlwe.relinearize_assign(a, rlk)
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
        self.rlwe.own(a.params_id, a.level)?;
        if a.level == 0 {
            return Err(Error::LevelExhausted);
        }
        for x in a.polys.iter_mut() {
            let mut out = self.backend().alloc(a.level);
            self.backend().rescale(x, a.level, &mut out);
            *x = out;
        }
        a.scale /= self.rlwe.moduli[a.level].value() as f64;
        a.level -= 1;
        a.seed = None;
        Ok(())
    }

    /// A copy of `a` at `level ≤ a.level()`: only the rows kept are copied (one pass, where a
    /// clone followed by [`Ckks::drop_level_assign`] copies twice).
    pub fn copy_at_level(&self, a: &Ciphertext<B>, level: usize) -> Result<Ciphertext<B>> {
        self.rlwe.own(a.params_id, a.level)?;
        if level > a.level {
            return Err(Error::InvalidLevel {
                level,
                max_level: a.level,
            });
        }
        let (from, to) = (Basis::q(a.level + 1), Basis::q(level + 1));
        Ok(Ciphertext {
            params_id: a.params_id,
            polys: a
                .polys
                .iter()
                .map(|x| self.rlwe.copy_rows_to(x, from, to))
                .collect(),
            level,
            scale: a.scale,
            slots: a.slots,
            seed: None,
        })
    }

    /// Drops primes down to `level` (modulus trimming before sending; the scale is unchanged).
    pub fn drop_level_assign(&self, a: &mut Ciphertext<B>, level: usize) -> Result<()> {
        self.rlwe.own(a.params_id, a.level)?;
        if level > a.level {
            return Err(Error::InvalidLevel {
                level,
                max_level: a.level,
            });
        }
        if level == a.level {
            return Ok(());
        }
        let (from, to) = (Basis::q(a.level + 1), Basis::q(level + 1));
        for x in a.polys.iter_mut() {
            let mut out = self.backend().alloc(to.rows());
            self.backend().copy_rows(x, from, &mut out, to);
            *x = out;
        }
        a.level = level;
        a.seed = None;
        Ok(())
    }
}

/// The first term `(a_0, pt_0)` of a sum of products `Σ_j a_j · pt_j`, which fixes the sum's
/// level, degree, slot count and product scale; an error for an empty sum.
pub(super) fn first_term<'t, B: PolyBackend, P>(
    terms: &[(&'t Ciphertext<B>, &'t P)],
) -> Result<(&'t Ciphertext<B>, &'t P)> {
    terms.first().copied().ok_or(Error::InvalidParameters(
        "a sum of products needs at least one term",
    ))
}
