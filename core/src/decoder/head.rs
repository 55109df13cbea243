//! Dense products in CKKS for one token: the LM head's `logits = W·h` for the final hidden
//! state `h` (width `d`) and the server's `V × d` head (SmolLM2: 49,152 × 576), and one
//! token's projections and MLP, each packed so that its plaintexts carry (almost) only
//! weights.
//!
//! # Packing
//!
//! `h` is zero-padded to `D`, the least power of two `≥ d` (at most `n`), and laid over the `n`
//! slots in blocks of a *period* `P` (a power of two, `n/D ≤ P ≤ n`): block `j` holds `h`
//! rotated by `j·w`, `w = D·P/n`, so slot `j·P + u` holds `h[(u + j·w) mod D]`. With `P = n`
//! this is the plain replication (slot `s` holds `h[s mod D]`).
//!
//! Output ciphertext `u` carries two rows per slot `t < P` (one in the real part, one in the
//! imaginary part: `W` is real, so `(d_re + i·d_im) ⊙ h` carries both products). Its `w`
//! generalized diagonals are
//!
//! `diag_k[s] = W[row(s mod P)][col(s + k)]`  for `k < w`,
//!
//! with `col(s)` the column slot `s` holds (zero past `V` rows or `d` columns), evaluated by
//! baby-step giant-step with `k = i·g + j`: `z = Σ_i ρ(Σ_j ρ(diag_{ig+j}, −ig) ⊙ ρ(h, j), ig)`.
//! Slot `j·P + t` of `z` then holds row `t`'s products over the `w` columns that block `j`'s
//! window reaches, and the `n/P` windows of a row tile its `D` columns exactly once (a window
//! that runs past its block continues at the next block's start, whose rotation is `w` further
//! on: the window's tail fills the head of the `w`-block its own start leaves out). The
//! `log₂(n/P)` rotations of `rotate_sum` by multiples of `P` add the windows.
//!
//! Per token and output ciphertext: `w = D·P/n` plaintext products, `g − 1` baby rotations
//! (hoisted, shared by every output), `w/g − 1` giant rotations (lazy) and `log₂(n/P)` to add
//! the windows, one level. Over all outputs that is `⌈R/2P⌉·D·P/n` products for `R` rows, the
//! least any packing of `R·d` weights in `n`-slot complex plaintexts needs (up to the padding),
//! where the plain replication spends `D` products on every output ciphertext however few of
//! its slots hold rows (SmolLM2's `q`, `k`, `v`: 960 rows, 64 products at `P = 512` instead of
//! 1,024). The period is the least that holds the rows in one ciphertext, or `P = n` and
//! `⌈R/2n⌉` ciphertexts for more rows ([`DenseLayout::for_rows`]).
//!
//! The kernel itself ([`matvec`]) takes any placement of the outputs ([`RowMap`]): the LM
//! head's blocks of the vocabulary, or one token's MLP with `gate` and `up` in the real and
//! imaginary parts of one ciphertext.

use crate::circuits::exec::{pt_key, Exec, PlainTerm, PtValues};
use crate::ckks::C64;
use crate::error::{Error, Result};
use crate::transformer::shift::rotate_sum;
use alloc::vec::Vec;

/// The input packing of a dense product: `n` slots, input width `d` padded to `D`, blocks of
/// the period `P` (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseLayout {
    slots: usize,
    d: usize,
    dpad: usize,
    period: usize,
}

impl DenseLayout {
    /// The replicated layout (`P = n`); `d` must fit the slots (`D ≤ n`), `n` a power of two.
    pub fn new(slots: usize, d: usize) -> Result<Self> {
        Self::with_period(slots, d, slots)
    }

    /// The layout with period `period`: a power of two with `n/D ≤ P ≤ n`.
    pub fn with_period(slots: usize, d: usize, period: usize) -> Result<Self> {
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
        if !period.is_power_of_two() || period > slots || period < slots / dpad {
            return Err(Error::InvalidParameters(
                "dense product: the period must be a power of two with n/D <= P <= n",
            ));
        }
        Ok(Self {
            slots,
            d,
            dpad,
            period,
        })
    }

    /// The layout whose period is the least that holds `rows` output rows in one ciphertext
    /// (two per slot), within `n/D ≤ P ≤ n` (`P = n` when they need several ciphertexts).
    pub fn for_rows(slots: usize, d: usize, rows: usize) -> Result<Self> {
        let dpad = d.next_power_of_two();
        let lo = (slots / dpad.max(1)).max(1);
        let p = rows
            .div_ceil(2)
            .max(1)
            .next_power_of_two()
            .clamp(lo, slots.max(1));
        Self::with_period(slots, d, p)
    }

    /// The padded width `D`.
    pub fn dpad(&self) -> usize {
        self.dpad
    }

    /// The period `P`: output rows per part of an output ciphertext.
    pub fn period(&self) -> usize {
        self.period
    }

    /// Diagonals per output ciphertext, `w = D·P/n`.
    pub fn diagonals(&self) -> usize {
        self.dpad * self.period / self.slots
    }

    /// Slot values of the input: `x` (`d` values) zero-padded to `D` and laid out in blocks.
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
        if s >= self.slots {
            return None;
        }
        let (j, u) = (s / self.period, s % self.period);
        let c = (u + j * self.diagonals()) % self.dpad;
        (c < self.d).then_some(c)
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
/// [`matvec`] asks only for slots `s < P`, the layout's period: the slots from `P` on carry
/// copies of the window sums and no rows of their own, so rows a map names there are ignored.
pub type RowMap<'a> = &'a dyn Fn(usize, usize) -> (Option<usize>, Option<usize>);

/// `y = W·x` for the input `x` laid out by `lay` ([`DenseLayout::input`]): `cts` ciphertexts
/// whose slots `t < P` hold the rows `rows(u, t)` names, one level below the input (see the
/// module docs).
pub fn matvec<E: Exec>(
    ex: &E,
    lay: &DenseLayout,
    x: &E::Ct,
    cts: usize,
    rows: RowMap<'_>,
    w: HeadWeights<'_>,
) -> Result<Vec<E::Ct>> {
    matvec_keyed(ex, lay, x, cts, rows, w, None)
}

/// [`matvec`] with its plaintext diagonals keyed from `key` (`pt_key(key, [u, k])` for output
/// `u`'s diagonal `k`), so an executor that caches keyed plaintexts encodes them once, not once
/// per call: for weights that are the same at every call (no RoPE folded in), under a key no
/// other matrix uses.
pub fn matvec_keyed<E: Exec>(
    ex: &E,
    lay: &DenseLayout,
    x: &E::Ct,
    cts: usize,
    rows: RowMap<'_>,
    w: HeadWeights<'_>,
    key: Option<u64>,
) -> Result<Vec<E::Ct>> {
    let n = lay.slots;
    if ex.slots() != n {
        return Err(Error::SlotMismatch {
            expected: n,
            found: ex.slots(),
        });
    }
    let (p, diags) = (lay.period, lay.diagonals());
    // Baby steps ≈ √w, a power of two (w is one).
    let g = (1usize << diags.trailing_zeros().div_ceil(2)).min(diags);
    let giants = diags / g;
    let ks: Vec<i64> = (0..g as i64).collect();
    let babies = ex.rotate_many(x, &ks)?;
    // diag_{u,k}[s]: the weight that slot s of output u multiplies with ρ(x, k)[s].
    let weight = move |row: Option<usize>, s: usize, k: usize| -> f64 {
        match (row, lay.input_home((s + k) % n)) {
            (Some(r), Some(col)) => w(r, col),
            _ => 0.0,
        }
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
                        let (re, im) = rows(u, src % p);
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
            .enumerate()
            .map(|(i, grp)| {
                grp.iter()
                    .enumerate()
                    .map(|(j, f)| {
                        let k = key.map(|b| pt_key(b, &[u as u64, (i * g + j) as u64]));
                        (&babies[j], k, f as PtValues<'_>)
                    })
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
        let z = ex.rotate_sum_lazy(parts)?;
        out.push(if p == n {
            z
        } else {
            rotate_sum(ex, z, n / p, p as i64)?
        });
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
            (lay.dense().dpad(), lay.cts(), lay.dense().diagonals()),
            (1024, 2, 1024)
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
        // A short output (576 rows: 512 real + 64 imaginary) at period 512: w = 1024·512/2^14
        // = 32 diagonals (7 baby and 3 giant rotations), then log2(32) = 5 rotations add the
        // windows.
        let d = DenseLayout::for_rows(1 << 14, 576, 576).unwrap();
        assert_eq!((d.period(), d.diagonals()), (512, 32));
        let ex = SymExec::new(1 << 14);
        let rows = |_: usize, s: usize| (Some(s), Some(512 + s).filter(|&r| r < 576));
        let y = matvec(&ex, &d, &ex.fresh(3), 1, &rows, &w).unwrap();
        assert_eq!(y[0].level, 2);
        let c = ex.counts();
        assert_eq!(c.pt_mults, 32);
        assert_eq!(c.rotations, 7 + 3 + 5);
        assert!(DenseLayout::with_period(1 << 14, 576, 8).is_err());
        assert!(DenseLayout::with_period(1 << 14, 576, 3 << 8).is_err());
        assert!(DenseLayout::with_period(1 << 14, 576, 1 << 15).is_err());
    }

    /// Every row's `n/P` windows of `w` diagonals reach each of its `d` columns exactly once,
    /// for every period a layout admits.
    #[test]
    fn windows_tile_the_columns() {
        for (n, d) in [
            (64usize, 16usize),
            (64, 13),
            (256, 48),
            (256, 256),
            (128, 5),
        ] {
            let mut p = n / d.next_power_of_two();
            while p <= n {
                let lay = DenseLayout::with_period(n, d, p).unwrap();
                let w = lay.diagonals();
                for t in 0..p {
                    let mut seen = vec![0u32; d];
                    for j in 0..n / p {
                        for k in 0..w {
                            if let Some(c) = lay.input_home((j * p + t + k) % n) {
                                seen[c] += 1;
                            }
                        }
                    }
                    assert!(seen.iter().all(|&c| c == 1), "n {n} d {d} P {p} t {t}");
                }
                p *= 2;
            }
        }
    }
}
