//! FEnc2's polynomial activation `a·x² + b·x + c` in one level: the ciphertext becomes
//! `(x + b/2a)²` (a constant addition and one squaring), and the remaining affine map
//! `t ↦ a·t + (c − b²/4a)` is handed to the next linear layer as an [`InputAffine`], whose weights
//! and bias absorb it exactly.

use super::conv::InputAffine;
use crate::circuits::exec::Exec;
use crate::error::{Error, Result};
use alloc::vec;
use alloc::vec::Vec;

/// `a·x² + b·x + c` with `a ≠ 0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quadratic {
    /// `a`.
    pub a: f64,
    /// `b`.
    pub b: f64,
    /// `c`.
    pub c: f64,
}

impl Quadratic {
    /// A validated activation.
    pub fn new(a: f64, b: f64, c: f64) -> Result<Self> {
        let q = Self { a, b, c };
        q.validate()?;
        Ok(q)
    }

    /// Checks the coefficients: what [`Quadratic::new`] checks, for an activation built field
    /// by field ([`crate::cnn::Network::validate`] calls it for every layer).
    pub fn validate(&self) -> Result<()> {
        let (a, b, c) = (self.a, self.b, self.c);
        if !(a.is_finite() && b.is_finite() && c.is_finite()) {
            return Err(Error::NonFinite);
        }
        if a == 0.0 {
            return Err(Error::InvalidParameters(
                "quadratic activation: the leading coefficient must be nonzero",
            ));
        }
        Ok(())
    }

    /// The value at `x`.
    pub fn eval(&self, x: f64) -> f64 {
        (self.a * x + self.b) * x + self.c
    }

    /// `β = b / 2a`, added before squaring.
    pub fn shift(&self) -> f64 {
        self.b / (2.0 * self.a)
    }

    /// The affine map `t ↦ a·t + (c − b²/4a)` the next layer absorbs, for `n` channels.
    pub fn affine(&self, n: usize) -> InputAffine {
        InputAffine {
            scale: vec![self.a; n],
            shift: vec![self.c - self.b * self.b / (4.0 * self.a); n],
        }
    }

    /// Replaces each ciphertext `x` by `(x + β)²` (relinearized and rescaled: one level).
    pub fn run<E: Exec>(&self, ex: &E, cts: Vec<E::Ct>) -> Result<Vec<E::Ct>> {
        cts.into_iter().map(|ct| self.apply(ex, ct)).collect()
    }

    /// `(x + β)²` of one ciphertext (relinearized and rescaled: one level).
    pub fn apply<E: Exec>(&self, ex: &E, mut ct: E::Ct) -> Result<E::Ct> {
        let beta = self.shift();
        if beta != 0.0 {
            ex.add_const(&mut ct, beta)?;
        }
        let mut sq = ex.mul_ct(&ct, &ct)?;
        ex.relin(&mut sq)?;
        ex.rescale(&mut sq)?;
        Ok(sq)
    }
}
