//! Periodic plaintexts, stored compactly.
//!
//! A slot vector that repeats with period `p` (a rotation by `p` fixes it) encodes to a message
//! `m(Y)` (`Y = X^{N/2n}` for `n` slots) fixed by the automorphism `Y ↦ Y^{5^p}`. Its NTT value at
//! a root `ψ^e` then depends only on the class of `e mod 4n` in `(Z/4n)^* / ⟨5^p⟩`, and there
//! are `2p` classes: `e ≡ ±5^t` falls in class `(sign, t mod p)`. So each NTT row is stored as
//! `2p` words instead of `N`: the merged FFT groups of bootstrapping, whose diagonals repeat with
//! the largest butterfly span of the group, shrink by `N/2p` (32 to 1024 times at `N = 2^16`).
//!
//! Rounding the encoding to integers can break the symmetry by a unit here and there, so the
//! integer message is first symmetrized exactly over each orbit of the automorphism; the rows are
//! then exactly constant on the classes (checked when encoding).

use super::arith::first_term;
use super::encoder::C64;
use super::evaluator::Ckks;
use crate::backend::{Basis, PolyBackend};
use crate::error::{Error, Result};
use crate::rlwe::types::copy_getters;
use crate::rlwe::{Ciphertext, Rlwe};
use alloc::vec;
use alloc::vec::Vec;

/// The class of every NTT position for slot vectors of period `period` on `slots` slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeriodClasses {
    slots: usize,
    period: usize,
    map: Vec<u32>,
}

impl PeriodClasses {
    /// The period `p`.
    pub fn period(&self) -> usize {
        self.period
    }

    /// Words per compact row: `2p`.
    pub fn width(&self) -> usize {
        2 * self.period
    }

    /// The class of each NTT position (`N` entries, each below [`PeriodClasses::width`]).
    pub fn map(&self) -> &[u32] {
        &self.map
    }
}

/// A plaintext whose slots repeat with a period `p`, held on the host as `2p` words per NTT row
/// ([`Ckks::encode_periodic`]); multiplied by [`Ckks::mul_periodic_sum`].
#[derive(Clone)]
pub struct PeriodicPlaintext {
    words: Vec<u64>,
    period: usize,
    level: usize,
    scale: f64,
    slots: usize,
    params_id: u64,
}

impl core::fmt::Debug for PeriodicPlaintext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PeriodicPlaintext")
            .field("period", &self.period)
            .field("level", &self.level)
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

impl PeriodicPlaintext {
    copy_getters! {
        /// The level (rows `q_0..q_level`).
        level: usize,
        /// The scale.
        scale: f64,
        /// The period of its slots.
        period: usize,
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// The smallest power-of-two period of `v` (its length if none shorter): `v[i] = v[i mod p]`
/// exactly.
pub fn slot_period(v: &[C64]) -> usize {
    let n = v.len();
    let mut p = 1;
    while p < n && !v.iter().enumerate().all(|(i, x)| *x == v[i % p]) {
        p *= 2;
    }
    p.min(n).max(1)
}

impl<B: PolyBackend> Ckks<B> {
    /// The NTT-position classes of period `period` on `slots` slots (both powers of two,
    /// `period | slots ≤ N/2`).
    pub fn period_classes(&self, slots: usize, period: usize) -> Result<PeriodClasses> {
        let p = self.params();
        if !slots.is_power_of_two()
            || slots > p.max_slots()
            || !period.is_power_of_two()
            || period > slots
        {
            return Err(Error::InvalidParameters(
                "a period must be a power of two dividing the slot count (≤ N/2)",
            ));
        }
        // Odd residues mod 4n as ±5^t: class (sign, t mod p).
        let m = 4 * slots;
        let mut class = vec![0u32; m];
        let mut x = 1usize;
        for t in 0..slots {
            class[x] = (t % period) as u32;
            class[m - x] = (period + t % period) as u32;
            x = x * 5 % m;
        }
        let log_n = p.log_n();
        let map = (0..p.n())
            .map(|j| class[crate::math::NttTable::eval_exponent(log_n, j) % m])
            .collect();
        Ok(PeriodClasses { slots, period, map })
    }

    /// Encodes `values` (`slots` of them, repeating with `classes`' period) at `level` and
    /// `scale` as [`Ckks::encode`] does, kept compactly. Fails on values that do not repeat.
    pub fn encode_periodic(
        &self,
        values: &[C64],
        classes: &PeriodClasses,
        level: usize,
        scale: f64,
    ) -> Result<PeriodicPlaintext> {
        self.rlwe.check_level(level)?;
        let (slots, period) = (classes.slots, classes.period);
        if values.len() != slots {
            return Err(Error::SlotMismatch {
                expected: slots,
                found: values.len(),
            });
        }
        if values
            .iter()
            .enumerate()
            .any(|(i, x)| *x != values[i % period])
        {
            return Err(Error::InvalidParameters(
                "the values do not repeat with the period",
            ));
        }
        let mut coeffs = self.encoder.encode_subring(values, slots, scale)?;
        symmetrize(&mut coeffs, period);
        let poly = self.message_ntt(&coeffs, slots, level, scale)?;
        let n = self.params().n();
        let basis = Basis::q(level + 1);
        let mut rows = vec![0u64; basis.rows() * n];
        self.backend().download(&poly, &mut rows)?;
        let width = classes.width();
        let mut words = vec![u64::MAX; basis.rows() * width];
        for (row, out) in rows.chunks(n).zip(words.chunks_mut(width)) {
            for (&v, &c) in row.iter().zip(&classes.map) {
                let w = &mut out[c as usize];
                if *w == u64::MAX {
                    *w = v;
                } else if *w != v {
                    return Err(Error::InvalidParameters(
                        "a periodic encoding is not constant on its classes",
                    ));
                }
            }
        }
        Ok(PeriodicPlaintext {
            words,
            period,
            level,
            scale,
            slots,
            params_id: self.params().id(),
        })
    }

    /// `Σ_j a_j · pt_j` for periodic plaintexts of `classes`' period, in one pass per
    /// polynomial (as [`Ckks::mul_plain_sum`]): the terms must be nonempty, with one level, slots,
    /// degree and product scale.
    pub fn mul_periodic_sum(
        &self,
        terms: &[(&Ciphertext<B>, &PeriodicPlaintext)],
        classes: &PeriodClasses,
    ) -> Result<Ciphertext<B>> {
        let (a0, p0) = first_term(terms)?;
        let scale = a0.scale * p0.scale;
        for &(a, pt) in terms {
            self.sum_term_check(a0, a, pt.params_id, pt.level, pt.slots)?;
            if pt.period != classes.period || pt.slots != classes.slots {
                return Err(Error::InvalidParameters(
                    "a periodic plaintext of another period or slot count",
                ));
            }
            Rlwe::<B>::same_scale(scale, a.scale * pt.scale)?;
        }
        let basis = Basis::q(a0.level + 1);
        let width = classes.width();
        let polys = (0..a0.polys.len())
            .map(|i| {
                let pairs: Vec<(&B::Buffer, &[u64])> = terms
                    .iter()
                    .map(|(a, pt)| (&a.polys[i], pt.words.as_slice()))
                    .collect();
                let mut out = self.backend().alloc(basis.rows());
                self.backend()
                    .mul_sum_compact(&pairs, width, &classes.map, &mut out, basis);
                out
            })
            .collect();
        Ok(a0.with_polys(polys, scale))
    }
}

/// Makes the integer message `c` (`L = 2n` coefficients of `Z[Y]/(Y^L + 1)`) exactly fixed by
/// `Y ↦ Y^h`, `h = 5^period mod 2L`: each orbit takes its first coefficient, with the signs the
/// automorphism gives (an orbit that meets its own negation is zero).
fn symmetrize(c: &mut [i128], period: usize) {
    let l = c.len();
    let two_l = 2 * l;
    let mut h = 1usize;
    for _ in 0..period {
        h = h * 5 % two_l;
    }
    let mut seen = vec![false; l];
    let mut orbit = Vec::new();
    for i0 in 0..l {
        if seen[i0] {
            continue;
        }
        orbit.clear();
        let (mut i, mut neg) = (i0, false);
        let zero;
        loop {
            seen[i] = true;
            orbit.push((i, neg));
            let k = i * h % two_l;
            let (next, flip) = if k >= l { (k - l, !neg) } else { (k, neg) };
            if next == i0 {
                zero = flip;
                break;
            }
            (i, neg) = (next, flip);
        }
        let v = if zero { 0 } else { c[i0] };
        for &(i, neg) in &orbit {
            c[i] = if neg { -v } else { v };
        }
    }
}
