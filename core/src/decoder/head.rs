//! The LM head in CKKS: `logits = W·h` for the final hidden state `h` (width `d`) and the
//! server's `V × d` head (SmolLM2: 49,152 × 576), densely packed so that a token's logits
//! cost `⌈V / 2n⌉` ciphertexts, not one per block of the attention's layout.
//!
//! # Packing
//!
//! `h` is zero-padded to `D`, the least power of two `≥ d` (at most `n`), and *replicated*
//! `n / D` times over the `n` slots: slot `s` holds `h[s mod D]`. Output block `b` (rows
//! `b·n .. (b+1)·n` of `W`) is the generalized diagonal product
//!
//! `y_b = Σ_{k<D} diag_{b,k} ⊙ ρ(h, k)`,  `diag_{b,k}[s] = W[b·n + s][(s + k) mod D]`
//!
//! (zero past `V` rows or `d` columns), evaluated by baby-step giant-step with `k = i·g + j`:
//! `y = Σ_i ρ(Σ_j ρ(diag_{ig+j}, −ig) ⊙ ρ(h, j), ig)`. Two blocks share a ciphertext as its
//! real and imaginary parts (`h` is real, so `(d_re + i·d_im) ⊙ h` carries both products),
//! which halves the products and the ciphertexts the client receives.
//!
//! Per token: `g − 1` baby rotations (hoisted, shared by every output), `D/g − 1` giant
//! rotations (lazy) and `D` plaintext products per output ciphertext, one level.
//!
//! The kernel itself ([`matvec`]) takes any placement of the outputs ([`RowMap`]): the LM
//! head's blocks of the vocabulary, or one token's MLP with `gate` and `up` in the real and
//! imaginary parts of one ciphertext.

use crate::circuits::exec::{Exec, PlainTerm, PtValues};
use crate::ckks::C64;
use crate::error::{Error, Result};
use crate::transformer::shift::rotate_sum;
use alloc::vec::Vec;

/// The input packing of a dense product: `n` slots, input width `d` padded to `D`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseLayout {
    slots: usize,
    d: usize,
    dpad: usize,
    g: usize,
}

impl DenseLayout {
    /// The layout; `d` must fit the slots (`D ≤ n`), `n` a power of two.
    pub fn new(slots: usize, d: usize) -> Result<Self> {
        if d == 0 || !slots.is_power_of_two() {
            return Err(Error::InvalidParameters(
                "dense product: the width must be positive, the slots a power of two",
            ));
        }
        let dpad = d.next_power_of_two();
        if dpad > slots {
            return Err(Error::InvalidParameters(
                "dense product: the input is wider than the slots",
            ));
        }
        // Baby steps ≈ √D, a power of two (D is one).
        let g = 1usize << (dpad.trailing_zeros().div_ceil(2));
        Ok(Self { slots, d, dpad, g })
    }

    /// The padded width `D`.
    pub fn dpad(&self) -> usize {
        self.dpad
    }

    /// Slot values of the input: `x` (`d` values) zero-padded to `D` and replicated.
    pub fn input(&self, x: &[f64]) -> Vec<C64> {
        (0..self.slots)
            .map(|s| {
                C64::real(
                    self.input_home(s)
                        .and_then(|c| x.get(c))
                        .copied()
                        .unwrap_or(0.0),
                )
            })
            .collect()
    }

    /// Which element of `x` slot `s` of the input holds (`None`: padding).
    pub fn input_home(&self, s: usize) -> Option<usize> {
        let c = s % self.dpad;
        (s < self.slots && c < self.d).then_some(c)
    }
}

/// The head's packing for `n` slots, width `d` and vocabulary `V`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLayout {
    dense: DenseLayout,
    vocab: usize,
}

impl HeadLayout {
    /// The layout; `d` must fit the slots (`D ≤ n`) and the vocabulary be positive.
    pub fn new(slots: usize, d: usize, vocab: usize) -> Result<Self> {
        if vocab == 0 {
            return Err(Error::InvalidParameters(
                "LM head: the vocabulary must be positive",
            ));
        }
        Ok(Self {
            dense: DenseLayout::new(slots, d)?,
            vocab,
        })
    }

    /// The input packing.
    pub fn dense(&self) -> &DenseLayout {
        &self.dense
    }

    /// Output ciphertexts: `⌈V / 2n⌉`.
    pub fn cts(&self) -> usize {
        self.vocab.div_ceil(2 * self.dense.slots)
    }

    /// Slot values of the input: `h` zero-padded to `D` and replicated.
    pub fn input(&self, h: &[f64]) -> Vec<C64> {
        self.dense.input(h)
    }

    /// The logits from the decrypted output ciphertexts (block `2u` in the real parts of
    /// ciphertext `u`, block `2u + 1` in the imaginary parts).
    pub fn logits(&self, cts: &[Vec<C64>]) -> Vec<f64> {
        (0..self.vocab)
            .map(|r| {
                let n = self.dense.slots;
                let (b, s) = (r / n, r % n);
                let z = cts
                    .get(b / 2)
                    .and_then(|c| c.get(s))
                    .copied()
                    .unwrap_or_default();
                if b % 2 == 0 {
                    z.re
                } else {
                    z.im
                }
            })
            .collect()
    }
}

/// A matrix's weights, `W[row][col]`.
pub type HeadWeights<'a> = &'a dyn Fn(usize, usize) -> f64;

/// Where the outputs of [`matvec`] land: `rows(u, s)` is the pair of output rows that slot `s`
/// of output ciphertext `u` carries in its real and imaginary parts (`None`: nothing).
pub type RowMap<'a> = &'a dyn Fn(usize, usize) -> (Option<usize>, Option<usize>);

/// `y = W·x` for the replicated input `x` ([`DenseLayout::input`]) and `W` with `lay`'s input
/// width: `cts` ciphertexts whose slots hold the rows `rows` names, one level below the input.
pub fn matvec<E: Exec>(
    ex: &E,
    lay: &DenseLayout,
    x: &E::Ct,
    cts: usize,
    rows: RowMap<'_>,
    w: HeadWeights<'_>,
) -> Result<Vec<E::Ct>> {
    product(ex, lay, x, cts, rows, w, None)
}

/// `y = W·x` for an output of at most `2·period` rows (`period` a power of two dividing `D`):
/// the hybrid of the diagonal method, `period` diagonals instead of `D` (row `rows(0, s mod
/// period)` in slot `s`), then `log₂(D / period)` rotations by multiples of `period` that add
/// the `D / period` partial sums. One ciphertext, one level below the input; its slots
/// `s < period` hold the rows `rows(0, s)` names. `D / period` times fewer plaintexts to
/// encode and multiply than [`matvec`] for a short output (`W_o`, `W_down`).
pub fn matvec_periodic<E: Exec>(
    ex: &E,
    lay: &DenseLayout,
    x: &E::Ct,
    period: usize,
    rows: RowMap<'_>,
    w: HeadWeights<'_>,
) -> Result<E::Ct> {
    if period == 0 || !period.is_power_of_two() || period > lay.dpad {
        return Err(Error::InvalidParameters(
            "dense product: the period must be a power of two at most the padded width",
        ));
    }
    let z = product(ex, lay, x, 1, rows, w, Some(period))?
        .pop()
        .ok_or(Error::InvalidParameters("dense product: empty output"))?;
    if period == lay.dpad {
        return Ok(z);
    }
    rotate_sum(ex, z, lay.dpad / period, period as i64)
}

/// The diagonal products: `D` diagonals with the rows `rows` names in every slot, or (with a
/// period `m`) `m` diagonals with the rows repeating every `m` slots.
fn product<E: Exec>(
    ex: &E,
    lay: &DenseLayout,
    x: &E::Ct,
    cts: usize,
    rows: RowMap<'_>,
    w: HeadWeights<'_>,
    period: Option<usize>,
) -> Result<Vec<E::Ct>> {
    let n = lay.slots;
    if ex.slots() != n {
        return Err(Error::SlotMismatch {
            expected: n,
            found: ex.slots(),
        });
    }
    let dp = lay.dpad;
    let diags = period.unwrap_or(dp);
    // Baby steps ≈ √diags, a power of two.
    let g = match period {
        None => lay.g.min(dp),
        Some(m) => (1usize << m.trailing_zeros().div_ceil(2)).min(m),
    };
    let giants = diags / g;
    let ks: Vec<i64> = (0..g as i64).collect();
    let babies = ex.rotate_many(x, &ks)?;
    // diag_{u,k}[s]: the weight that slot s of output u multiplies with ρ(x, k)[s].
    let weight = move |row: Option<usize>, s: usize, k: usize| -> f64 {
        let col = (s + k) % dp;
        match row {
            Some(r) if col < lay.d => w(r, col),
            _ => 0.0,
        }
    };
    let row_at = move |u: usize, s: usize| match period {
        Some(m) => rows(u, s % m),
        None => rows(u, s),
    };
    let mut out = Vec::with_capacity(cts);
    for u in 0..cts {
        let vals = |i: usize, j: usize| {
            move || -> Vec<C64> {
                let k = i * g + j;
                let shift = i * g;
                (0..n)
                    .map(|s| {
                        // ρ(diag, −ig)[s] = diag[(s − ig) mod n].
                        let src = (s + n - shift % n) % n;
                        let (re, im) = row_at(u, src);
                        C64::new(weight(re, src, k), weight(im, src, k))
                    })
                    .collect()
            }
        };
        let closures: Vec<Vec<_>> = (0..giants)
            .map(|i| (0..g).map(|j| vals(i, j)).collect())
            .collect();
        let sums: Vec<Vec<PlainTerm<'_, E::Ct>>> = closures
            .iter()
            .map(|grp| {
                grp.iter()
                    .enumerate()
                    .map(|(j, f)| (&babies[j], None, f as PtValues<'_>))
                    .collect()
            })
            .collect();
        let mut parts = Vec::with_capacity(giants);
        for (i, z) in ex.mul_plain_sums(&sums)?.into_iter().enumerate() {
            if let Some(mut z) = z {
                ex.rescale(&mut z)?;
                parts.push((z, (i * g) as i64));
            }
        }
        if parts.is_empty() {
            return Err(Error::InvalidParameters("dense product: empty output"));
        }
        out.push(ex.rotate_sum_lazy(parts)?);
    }
    Ok(out)
}

/// `W·h` on the replicated input `h` ([`HeadLayout::input`]): [`HeadLayout::cts`] ciphertexts,
/// one level below the input; block `2u` of the vocabulary in the real parts of ciphertext `u`,
/// block `2u + 1` in the imaginary parts.
pub fn lm_head<E: Exec>(
    ex: &E,
    lay: &HeadLayout,
    h: &E::Ct,
    w: HeadWeights<'_>,
) -> Result<Vec<E::Ct>> {
    let (n, vocab) = (lay.dense.slots, lay.vocab);
    let row = move |b: usize, s: usize| Some(b * n + s).filter(|&r| r < vocab);
    let rows = move |u: usize, s: usize| (row(2 * u, s), row(2 * u + 1, s));
    matvec(ex, &lay.dense, h, lay.cts(), &rows, w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::exec::SymExec;
    use alloc::vec;

    #[test]
    fn layout_and_counts() {
        assert!(HeadLayout::new(1024, 2048, 10).is_err());
        assert!(HeadLayout::new(1000, 16, 10).is_err());
        let lay = HeadLayout::new(1 << 14, 576, 49_152).unwrap();
        assert_eq!(
            (lay.dense().dpad(), lay.cts(), lay.dense().g),
            (1024, 2, 32)
        );
        let v = lay.input(&vec![1.0; 576]);
        assert_eq!(v[1024 + 575], C64::real(1.0));
        assert_eq!(v[1024 + 576], C64::default());
        assert_eq!(lay.dense().input_home(2048 + 3), Some(3));
        assert_eq!(lay.dense().input_home(600), None);
        let ex = SymExec::new(1 << 14);
        let w = |_: usize, _: usize| 0.0;
        let out = lm_head(&ex, &lay, &ex.fresh(3), &w).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].level, 2);
        let c = ex.counts();
        assert_eq!(c.pt_mults, 2 * 1024);
        assert_eq!(c.rotations, 31 + 2 * 31);
        // A short output (576 rows: 512 real + 64 imaginary) with period 512: 512 diagonals,
        // then a sum over the two halves of D = 1024.
        let ex = SymExec::new(1 << 14);
        let rows = |_: usize, s: usize| (Some(s), Some(512 + s).filter(|&r| r < 576));
        let y = matvec_periodic(&ex, lay.dense(), &ex.fresh(3), 512, &rows, &w).unwrap();
        assert_eq!(y.level, 2);
        let c = ex.counts();
        assert_eq!(c.pt_mults, 512);
        assert!(c.rotations < 31 + 15 + 2);
        assert!(matvec_periodic(&ex, lay.dense(), &ex.fresh(3), 2048, &rows, &w).is_err());
    }
}
