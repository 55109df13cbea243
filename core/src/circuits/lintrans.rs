//! Homomorphic linear transforms on the slots: a plaintext matrix given by its diagonals,
//! evaluated by baby-step giant-step (Halevi–Shoup 2014; the hoisted and lazy variants of
//! Bossuat–Mouchet–Troncoso-Pastoriza–Hubaux 2021).
//!
//! With `n` slots and `d_k[i] = M[i][(i + k) mod n]`, `M·x = Σ_k d_k ⊙ ρ(x; k)`. Writing each
//! `k = g + b` with `b = k mod n_1` (a *baby step*) and `g = k − b` (a *giant step*),
//!
//! ```text
//! M·x = Σ_g ρ( Σ_b ρ(d_{g+b}; −g) ⊙ ρ(x; b) ; g ).
//! ```
//!
//! The baby rotations `ρ(x; b)` share one gadget decomposition (hoisting); the plaintexts are
//! pre-rotated by `−g` when they are encoded; each giant step's inner sum is key-switched
//! without ModDown and the sum over giant steps is brought down once (lazy). The split `n_1` is
//! the power of two that minimizes the rotation count, so a transform needs exactly the rotation
//! keys of [`LinearTransform::rotations`].
//!
//! Plaintexts are encoded at scale `q_level`, so a transform keeps the ciphertext's scale
//! exactly and consumes one level.

use crate::backend::PolyBackend;
use crate::ckks::periodic::slot_period;
use crate::ckks::{
    Ciphertext, Ckks, EvaluationKeys, PeriodClasses, PeriodicPlaintext, Plaintext, C64,
};
use crate::error::{Error, Result};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;

/// A linear map on `n` complex slots, stored by its nonzero diagonals.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearTransform {
    slots: usize,
    /// `k ∈ [0, n)` → `d_k`, with `d_k[i] = M[i][(i + k) mod n]`.
    diags: BTreeMap<usize, Vec<C64>>,
}

fn rot_vec(v: &[C64], k: i64) -> Vec<C64> {
    let n = v.len();
    let k = k.rem_euclid(n as i64) as usize;
    (0..n).map(|i| v[(i + k) % n]).collect()
}

impl LinearTransform {
    /// The zero map on `slots` slots (a power of two).
    pub fn new(slots: usize) -> Result<Self> {
        if slots == 0 || !slots.is_power_of_two() {
            return Err(Error::InvalidParameters(
                "a linear transform's slot count must be a power of two",
            ));
        }
        Ok(Self {
            slots,
            diags: BTreeMap::new(),
        })
    }

    /// The identity on `slots` slots.
    pub fn identity(slots: usize) -> Result<Self> {
        let mut t = Self::new(slots)?;
        t.diags.insert(0, vec![C64::real(1.0); slots]);
        Ok(t)
    }

    /// A dense matrix (`rows[i][j] = M[i][j]`, `n × n`); all-zero diagonals are skipped.
    pub fn from_dense(rows: &[Vec<C64>]) -> Result<Self> {
        let n = rows.len();
        let mut t = Self::new(n)?;
        if rows.iter().any(|r| r.len() != n) {
            return Err(Error::Shape {
                what: "dense matrix row",
                expected: n,
                found: rows.iter().map(|r| r.len()).find(|&l| l != n).unwrap_or(0),
            });
        }
        for k in 0..n {
            let d: Vec<C64> = (0..n).map(|i| rows[i][(i + k) % n]).collect();
            if d.iter().any(|c| c.re != 0.0 || c.im != 0.0) {
                t.diags.insert(k, d);
            }
        }
        Ok(t)
    }

    /// Sets diagonal `k` (taken mod `n`) to `values` (`n` of them).
    pub fn set_diagonal(&mut self, k: i64, values: Vec<C64>) -> Result<()> {
        if values.len() != self.slots {
            return Err(Error::SlotCount {
                given: values.len(),
                slots: self.slots,
            });
        }
        if values
            .iter()
            .any(|c| !(c.re.is_finite() && c.im.is_finite()))
        {
            return Err(Error::NonFinite);
        }
        self.diags
            .insert(k.rem_euclid(self.slots as i64) as usize, values);
        Ok(())
    }

    /// The slot count `n`.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The nonzero diagonals' indices, ascending in `[0, n)`.
    pub fn diagonal_indices(&self) -> Vec<usize> {
        self.diags.keys().copied().collect()
    }

    /// Multiplies every entry by `c`.
    pub fn scale_by(&mut self, c: C64) {
        for d in self.diags.values_mut() {
            for v in d.iter_mut() {
                *v = *v * c;
            }
        }
    }

    /// `M·x` in `f64` (the reference the homomorphic evaluation is checked against).
    pub fn apply(&self, x: &[C64]) -> Result<Vec<C64>> {
        if x.len() != self.slots {
            return Err(Error::SlotCount {
                given: x.len(),
                slots: self.slots,
            });
        }
        let mut y = vec![C64::default(); self.slots];
        for (&k, d) in &self.diags {
            for i in 0..self.slots {
                y[i] = y[i] + d[i] * x[(i + k) % self.slots];
            }
        }
        Ok(y)
    }

    /// The product `self · inner` (apply `inner` first): diagonal `a + b` collects
    /// `d^self_a ⊙ ρ(d^inner_b; a)`.
    pub fn compose(&self, inner: &LinearTransform) -> Result<LinearTransform> {
        if inner.slots != self.slots {
            return Err(Error::SlotMismatch {
                expected: self.slots,
                found: inner.slots,
            });
        }
        let n = self.slots;
        let mut out = LinearTransform::new(n)?;
        for (&a, da) in &self.diags {
            for (&b, db) in &inner.diags {
                let rb = rot_vec(db, a as i64);
                let e = out
                    .diags
                    .entry((a + b) % n)
                    .or_insert_with(|| vec![C64::default(); n]);
                for i in 0..n {
                    e[i] = e[i] + da[i] * rb[i];
                }
            }
        }
        Ok(out)
    }

    /// The baby-step/giant-step split of the diagonal indices for a baby-step size `n1`: the
    /// distinct baby steps `k mod n1` and giant steps `k − (k mod n1)`.
    fn split(&self, n1: usize) -> (BTreeSet<usize>, BTreeSet<usize>) {
        let babies = self.diags.keys().map(|k| k % n1).collect();
        let giants = self.diags.keys().map(|k| k - k % n1).collect();
        (babies, giants)
    }

    /// The baby-step size: the power of two minimizing the key-switched rotations (nonzero baby
    /// steps plus nonzero giant steps), the smaller one on ties.
    pub fn baby_step(&self) -> usize {
        let mut best = (usize::MAX, 1);
        let mut n1 = 1;
        while n1 <= self.slots {
            let (b, g) = self.split(n1);
            let cost =
                b.iter().filter(|&&x| x != 0).count() + g.iter().filter(|&&x| x != 0).count();
            if cost < best.0 {
                best = (cost, n1);
            }
            n1 *= 2;
        }
        best.1
    }

    /// The rotations the evaluation key-switches (each in `[1, n)`), for key generation.
    pub fn rotations(&self) -> Vec<i64> {
        let (b, g) = self.split(self.baby_step());
        let set: BTreeSet<usize> = b.into_iter().chain(g).filter(|&x| x != 0).collect();
        set.into_iter().map(|x| x as i64).collect()
    }

    /// Encodes the pre-rotated diagonals at `level`, each at scale `q_level` (so that the
    /// evaluation, which rescales once, keeps the input's scale exactly).
    pub fn encode<B: PolyBackend>(
        &self,
        ck: &Ckks<B>,
        level: usize,
    ) -> Result<EncodedLinearTransform<B>> {
        if self.diags.is_empty() {
            return Err(Error::InvalidParameters(
                "a linear transform with no diagonal",
            ));
        }
        let n1 = self.baby_step();
        let scale = ck.rescale_prime(level);
        let pre: Vec<(usize, usize, Vec<C64>)> = self
            .diags
            .iter()
            .map(|(&k, d)| (k - k % n1, k % n1, rot_vec(d, -((k - k % n1) as i64))))
            .collect();
        // Diagonals that all repeat with a short period are kept compactly (2p words per row).
        let period = pre
            .iter()
            .map(|(_, _, d)| slot_period(d))
            .max()
            .unwrap_or(1);
        let stored = if 2 * period * COMPACT_RATIO <= ck.params().n() {
            let classes = ck.period_classes(self.slots, period)?;
            let mut giants: BTreeMap<usize, Vec<(usize, PeriodicPlaintext)>> = BTreeMap::new();
            for (g, b, d) in &pre {
                let pt = ck.encode_periodic(d, &classes, level, scale)?;
                giants.entry(*g).or_default().push((*b, pt));
            }
            Stored::Periodic(classes, giants.into_iter().collect())
        } else {
            let mut giants: BTreeMap<usize, Vec<(usize, Plaintext<B>)>> = BTreeMap::new();
            for (g, b, d) in &pre {
                let pt = ck.encode(d, self.slots, level, scale)?;
                giants.entry(*g).or_default().push((*b, pt));
            }
            Stored::Full(giants.into_iter().collect())
        };
        let (babies, _) = self.split(n1);
        Ok(EncodedLinearTransform {
            slots: self.slots,
            ring_n: ck.params().n(),
            level,
            babies: babies.into_iter().collect(),
            stored,
        })
    }
}

/// Diagonals are stored compactly when their period `p` makes a compact row (`2p` words) at
/// least this many times smaller than a full one.
const COMPACT_RATIO: usize = 4;

/// One giant step `g` and its baby steps' plaintexts `(b, ρ(d_{g+b}; −g))`.
type GiantStep<P> = (usize, Vec<(usize, P)>);

/// The encoded diagonals: full plaintexts, or periodic ones with their classes.
enum Stored<B: PolyBackend> {
    Full(Vec<GiantStep<Plaintext<B>>>),
    Periodic(PeriodClasses, Vec<GiantStep<PeriodicPlaintext>>),
}

/// A [`LinearTransform`] encoded for one level: per giant step, its baby steps' pre-rotated
/// plaintexts. When every diagonal repeats with a period `p` with `2p ≤ N/4` (the merged FFT
/// groups of bootstrapping but the one holding the widest butterflies), they are kept as
/// [`PeriodicPlaintext`]s, `2p` words per row.
pub struct EncodedLinearTransform<B: PolyBackend> {
    slots: usize,
    ring_n: usize,
    level: usize,
    babies: Vec<usize>,
    stored: Stored<B>,
}

impl<B: PolyBackend> core::fmt::Debug for EncodedLinearTransform<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EncodedLinearTransform")
            .field("slots", &self.slots)
            .field("level", &self.level)
            .field("babies", &self.babies.len())
            .field("period", &self.period())
            .finish()
    }
}

/// What one evaluation cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransformCost {
    /// Key-switched baby-step rotations (one shared decomposition).
    pub baby_rotations: u64,
    /// Key-switched giant-step rotations (one ModDown for all of them).
    pub giant_rotations: u64,
    /// Plaintext multiply-accumulates.
    pub pt_mults: u64,
}

impl<B: PolyBackend> EncodedLinearTransform<B> {
    /// The level the plaintexts were encoded at (the input ciphertext's level).
    pub fn level(&self) -> usize {
        self.level
    }

    /// The number of diagonal plaintexts held.
    pub fn plaintexts(&self) -> usize {
        match &self.stored {
            Stored::Full(g) => g.iter().map(|(_, v)| v.len()).sum(),
            Stored::Periodic(_, g) => g.iter().map(|(_, v)| v.len()).sum(),
        }
    }

    /// The period the diagonals are stored with (`None`: full plaintexts).
    pub fn period(&self) -> Option<usize> {
        match &self.stored {
            Stored::Full(_) => None,
            Stored::Periodic(c, _) => Some(c.period()),
        }
    }

    /// Their bytes in memory (`level + 1` rows of `N` words each, or of `2p` words when
    /// periodic).
    pub fn plaintext_bytes(&self) -> usize {
        let width = self.period().map_or(self.ring_n, |p| 2 * p);
        self.plaintexts() * (self.level + 1) * width * 8
    }

    /// `M·x` on the slots of `ct` (at this transform's level and slot count), rescaled: the
    /// output sits one level lower at the input's scale.
    pub fn eval(
        &self,
        ck: &Ckks<B>,
        keys: &EvaluationKeys<B>,
        ct: &Ciphertext<B>,
    ) -> Result<(Ciphertext<B>, TransformCost)> {
        if ct.level() != self.level {
            return Err(Error::LevelMismatch {
                left: ct.level(),
                right: self.level,
            });
        }
        if ct.slots() != self.slots {
            return Err(Error::SlotMismatch {
                expected: self.slots,
                found: ct.slots(),
            });
        }
        let mut cost = TransformCost::default();
        let nz: Vec<i64> = self
            .babies
            .iter()
            .filter(|&&b| b != 0)
            .map(|&b| b as i64)
            .collect();
        let rotated = if nz.is_empty() {
            Vec::new()
        } else {
            ck.rotate_hoisted(ct, &nz, keys)?
        };
        cost.baby_rotations = nz.len() as u64;
        let baby = |b: usize| -> &Ciphertext<B> {
            if b == 0 {
                ct
            } else {
                // `babies` is sorted with 0 first when present, as `nz` drops it.
                let at = nz.iter().position(|&x| x as usize == b).unwrap_or(0);
                &rotated[at]
            }
        };
        let mut terms = Vec::new();
        match &self.stored {
            Stored::Full(giants) => {
                for (g, row) in giants.iter().filter(|(_, r)| !r.is_empty()) {
                    let pairs: Vec<_> = row.iter().map(|(b, pt)| (baby(*b), pt)).collect();
                    terms.push((ck.mul_plain_sum(&pairs)?, *g as i64));
                    cost.pt_mults += row.len() as u64;
                }
            }
            Stored::Periodic(classes, giants) => {
                for (g, row) in giants.iter().filter(|(_, r)| !r.is_empty()) {
                    let pairs: Vec<_> = row.iter().map(|(b, pt)| (baby(*b), pt)).collect();
                    terms.push((ck.mul_periodic_sum(&pairs, classes)?, *g as i64));
                    cost.pt_mults += row.len() as u64;
                }
            }
        }
        let (mut out, giant) = ck.rotate_sum_lazy(terms, keys)?;
        cost.giant_rotations = giant;
        ck.rescale_assign(&mut out)?;
        Ok((out, cost))
    }
}
