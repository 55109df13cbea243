//! A dry-run executor that follows levels *and exact scales*: both parties derive every
//! boundary's CKKS scale from the public plan (the conversion plans need it), without a
//! ciphertext. It wraps [`SymExec`] (levels, degrees, operation counts, Galois steps) and
//! mirrors [`crate::transformer::CkksExec`]'s scale rules: plaintext products are encoded at
//! scale `q_level`, a rescale divides by `q_level`, a tensor product multiplies the scales, and
//! sums need equal scales.

use crate::error::{Error, Result};
use crate::transformer::exec::PtValues;
use crate::transformer::{Exec, OpCounts, SymCt, SymExec};
use alloc::vec::Vec;

/// A symbolic ciphertext with its exact scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tracked {
    pub sym: SymCt,
    pub scale: f64,
}

/// See the module documentation.
pub(crate) struct ScaleExec {
    inner: SymExec,
    primes: Vec<f64>,
}

fn same_scale(a: f64, b: f64) -> Result<()> {
    if (a - b).abs() > 1e-9 * a.abs().max(b.abs()) {
        return Err(Error::ScaleMismatch { left: a, right: b });
    }
    Ok(())
}

impl ScaleExec {
    /// An executor over the ciphertext primes `q_0..q_L` (as `f64`).
    pub fn new(slots: usize, primes: Vec<f64>) -> Self {
        Self {
            inner: SymExec::new(slots),
            primes,
        }
    }
    /// A fresh ciphertext at `level` and `scale`.
    pub fn fresh(&self, level: usize, scale: f64) -> Tracked {
        Tracked {
            sym: self.inner.fresh(level),
            scale,
        }
    }
    /// Every Galois step used so far.
    pub fn rotations_used(&self) -> Vec<i64> {
        self.inner.rotations_used()
    }
    fn q(&self, level: usize) -> Result<f64> {
        self.primes
            .get(level)
            .copied()
            .ok_or(Error::InvalidParameters("level above the parameter set"))
    }
}

impl Exec for ScaleExec {
    type Ct = Tracked;
    fn slots(&self) -> usize {
        self.inner.slots()
    }
    fn rescale_prime(&self, level: usize) -> f64 {
        self.q(level).unwrap_or(f64::NAN)
    }
    fn level(&self, ct: &Tracked) -> usize {
        ct.sym.level
    }
    fn clone_ct(&self, ct: &Tracked) -> Tracked {
        *ct
    }
    fn rotate_many(&self, ct: &Tracked, ks: &[i64]) -> Result<Vec<Tracked>> {
        Ok(self
            .inner
            .rotate_many(&ct.sym, ks)?
            .into_iter()
            .map(|sym| Tracked {
                sym,
                scale: ct.scale,
            })
            .collect())
    }
    fn rotate_sum_lazy(&self, terms: Vec<(Tracked, i64)>) -> Result<Tracked> {
        let scale = terms
            .first()
            .map(|t| t.0.scale)
            .ok_or(Error::InvalidParameters("empty lazy rotation sum"))?;
        for t in &terms {
            same_scale(scale, t.0.scale)?;
        }
        let sym = self
            .inner
            .rotate_sum_lazy(terms.into_iter().map(|(c, k)| (c.sym, k)).collect())?;
        Ok(Tracked { sym, scale })
    }
    fn conjugate(&self, ct: &Tracked) -> Result<Tracked> {
        Ok(Tracked {
            sym: self.inner.conjugate(&ct.sym)?,
            scale: ct.scale,
        })
    }
    fn mul_plain(&self, ct: &Tracked, key: Option<u64>, values: PtValues<'_>) -> Result<Tracked> {
        let q = self.q(ct.sym.level)?;
        Ok(Tracked {
            sym: self.inner.mul_plain(&ct.sym, key, values)?,
            scale: ct.scale * q,
        })
    }
    fn mul_const_acc(
        &self,
        acc: &mut Option<Tracked>,
        ct: &Tracked,
        w: f64,
        scale: f64,
    ) -> Result<()> {
        let term = ct.scale * scale;
        let keep = match acc {
            Some(a) => {
                same_scale(a.scale, term)?;
                a.scale
            }
            None => term,
        };
        let mut sym = acc.map(|a| a.sym);
        self.inner.mul_const_acc(&mut sym, &ct.sym, w, scale)?;
        *acc = sym.map(|sym| Tracked { sym, scale: keep });
        Ok(())
    }
    fn add_plain(&self, ct: &mut Tracked, values: PtValues<'_>) -> Result<()> {
        self.inner.add_plain(&mut ct.sym, values)
    }
    fn mul_ct(&self, a: &Tracked, b: &Tracked) -> Result<Tracked> {
        Ok(Tracked {
            sym: self.inner.mul_ct(&a.sym, &b.sym)?,
            scale: a.scale * b.scale,
        })
    }
    fn relin(&self, ct: &mut Tracked) -> Result<()> {
        self.inner.relin(&mut ct.sym)
    }
    fn rescale(&self, ct: &mut Tracked) -> Result<()> {
        let q = self.q(ct.sym.level)?;
        self.inner.rescale(&mut ct.sym)?;
        ct.scale /= q;
        Ok(())
    }
    fn add_assign(&self, a: &mut Tracked, b: &Tracked) -> Result<()> {
        same_scale(a.scale, b.scale)?;
        self.inner.add_assign(&mut a.sym, &b.sym)
    }
    fn sub_assign(&self, a: &mut Tracked, b: &Tracked) -> Result<()> {
        same_scale(a.scale, b.scale)?;
        self.inner.sub_assign(&mut a.sym, &b.sym)
    }
    fn mul_i(&self, a: &mut Tracked) -> Result<()> {
        self.inner.mul_i(&mut a.sym)
    }
    fn drop_to(&self, a: &mut Tracked, level: usize) -> Result<()> {
        self.inner.drop_to(&mut a.sym, level)
    }
    fn note_repack(&self) {
        self.inner.note_repack()
    }
    fn counts(&self) -> OpCounts {
        self.inner.counts()
    }
}
