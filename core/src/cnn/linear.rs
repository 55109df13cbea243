//! The two-stage rotation form every CNN linear layer compiles to:
//!
//! ```text
//! out_o = Σ_{b ∈ B_o} ρ( Σ_{(t, a)} d_{o,b,t,a} ⊙ ρ(x_t; a) ; b )
//! ```
//!
//! Baby rotations `ρ(x_t; a)` are taken once per input ciphertext, hoisted (one decomposition),
//! and shared by every output. Giant rotations `ρ(·; b)` act on sums, once per output and shift,
//! with the key-switch outputs summed over `Q ∪ P` and one ModDown per output (lazy key
//! switching). In a convolution on the fragment layout the baby shifts are FEnc2's inner
//! rotations (spatial: whole blocks move) and the giant shifts its outer rotations (channel
//! aggregation), so the counts of Eqs. 3–6 are the sizes of these sets.

use crate::circuits::exec::{keyed_terms, pt_key, Exec, PlainTerm};
use crate::ckks::C64;
use crate::error::{Error, Result};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// One product `d ⊙ ρ(x_input; babies[input][baby])` inside a giant step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    /// The input ciphertext.
    pub input: usize,
    /// Index into that input's baby shifts.
    pub baby: usize,
    /// An identifier the layer uses to build the diagonal (opaque here).
    pub tag: u64,
    /// The part of the product's giant shift moved into the baby stage by
    /// [`TwoStage::rebalance`]: the input is rotated by it too, the giant shift lacks it, and
    /// [`TwoStage::run`] rotates the layer's diagonal by it. `0` in a layer as compiled.
    pub lo: i64,
}

impl Term {
    /// The product's giant shift as the layer compiled it: the step's `shift` plus
    /// [`Term::lo`], modulo `slots` (what a layer's diagonal is defined against).
    pub fn giant(&self, shift: i64, slots: usize) -> i64 {
        (shift + self.lo).rem_euclid(slots as i64)
    }
}

/// One giant step of one output: a shift and the products summed before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Giant {
    /// The rotation applied to the sum.
    pub shift: i64,
    /// The products.
    pub terms: Vec<Term>,
}

/// A compiled linear layer: the baby shifts of each input and the giant steps of each output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TwoStage {
    /// Baby shifts per input ciphertext (`0` when the unrotated input is used).
    pub babies: Vec<Vec<i64>>,
    /// Giant steps per output ciphertext.
    pub outputs: Vec<Vec<Giant>>,
}

/// Rotation counts of a compiled layer, as FEnc2 counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RotationCounts {
    /// Inner (baby) rotations: nonzero baby shifts over all inputs.
    pub inner: u64,
    /// Outer (giant) rotations: nonzero giant shifts over all outputs.
    pub outer: u64,
    /// Plaintext multiplications (one per product).
    pub pt_mults: u64,
}

impl RotationCounts {
    /// Inner + outer.
    pub fn total(&self) -> u64 {
        self.inner + self.outer
    }
}

/// The products registered for one output: giant shift → `(input, baby shift, tag, lo)`.
type GiantTerms = BTreeMap<i64, Vec<(usize, i64, u64, i64)>>;

/// Builds a [`TwoStage`]: register products with [`TwoStageBuilder::add`], then
/// [`TwoStageBuilder::finish`].
pub struct TwoStageBuilder {
    slots: i64,
    babies: Vec<BTreeMap<i64, usize>>,
    outputs: Vec<GiantTerms>,
}

impl TwoStageBuilder {
    /// A builder for `inputs` input and `outputs` output ciphertexts of `slots` slots.
    pub fn new(inputs: usize, outputs: usize, slots: usize) -> Self {
        Self {
            slots: slots as i64,
            babies: (0..inputs).map(|_| BTreeMap::new()).collect(),
            outputs: (0..outputs).map(|_| BTreeMap::new()).collect(),
        }
    }

    /// Adds the product `d_tag ⊙ ρ(x_input; baby)` to the giant step `giant` of `output`.
    pub fn add(&mut self, output: usize, giant: i64, input: usize, baby: i64, tag: u64) {
        self.add_moved(output, giant, input, baby, tag, 0);
    }

    /// [`TwoStageBuilder::add`] for a product whose giant shift lacks `lo` and whose baby
    /// shift carries it ([`Term::lo`]).
    fn add_moved(&mut self, output: usize, giant: i64, input: usize, baby: i64, tag: u64, lo: i64) {
        let (giant, baby) = (giant.rem_euclid(self.slots), baby.rem_euclid(self.slots));
        let next = self.babies[input].len();
        self.babies[input].entry(baby).or_insert(next);
        self.outputs[output]
            .entry(giant)
            .or_default()
            .push((input, baby, tag, lo));
    }

    /// The compiled layer.
    pub fn finish(self) -> TwoStage {
        // Baby shifts in ascending order; renumber the terms to match.
        let mut order: Vec<BTreeMap<i64, usize>> = Vec::with_capacity(self.babies.len());
        let mut babies = Vec::with_capacity(self.babies.len());
        for b in &self.babies {
            let shifts: Vec<i64> = b.keys().copied().collect();
            order.push(shifts.iter().enumerate().map(|(i, &s)| (s, i)).collect());
            babies.push(shifts);
        }
        let outputs = self
            .outputs
            .into_iter()
            .map(|g| {
                g.into_iter()
                    .map(|(shift, terms)| Giant {
                        shift,
                        terms: terms
                            .into_iter()
                            .map(|(input, baby, tag, lo)| Term {
                                input,
                                baby: order[input][&baby],
                                tag,
                                lo,
                            })
                            .collect(),
                    })
                    .collect()
            })
            .collect();
        TwoStage { babies, outputs }
    }
}

/// How [`TwoStage::rebalance`] splits a product's shifts anew, by a power of two `B`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Split {
    /// The giant shift's low part `G mod B` moves into the baby stage.
    Giant(i64),
    /// The baby shift's high part `a − r` moves into the giant stage, `r` the remainder of `a`
    /// (taken in `(−n/2, n/2]`) modulo `B`: in `[0, B)` (taps from the corner, a pooling's), or
    /// centred in `[−B/2, B/2)` when `centred` (taps around the centre, a padded layer's).
    Baby { b: i64, centred: bool },
}

impl Split {
    /// The `lo` of a product with compiled shifts `a` (baby) and `g` (giant) on `n` slots.
    fn lo(self, a: i64, g: i64, n: i64) -> i64 {
        match self {
            Split::Giant(b) => g.rem_euclid(b),
            Split::Baby { b, centred } => {
                let signed = if a > n / 2 { a - n } else { a };
                let mut r = signed.rem_euclid(b);
                if centred && b > 1 && r >= b / 2 {
                    r -= b;
                }
                -(signed - r)
            }
        }
    }
}

impl TwoStage {
    /// Baby-step giant-step over the shifts of the compiled layer (beyond FEnc2, whose outer
    /// rotations are one per channel shift and whose inner ones one per tap). A product's
    /// shifts may be split anew, since `ρ(d ⊙ ρ(x; a); G) = ρ(ρ(d; lo) ⊙ ρ(x; a + lo); G − lo)`
    /// for any `lo`:
    ///
    /// * the giant shift's low part moves into the baby stage, `lo = G mod B`: the inputs take
    ///   more (hoisted) baby rotations and the outputs far fewer giant ones (many channel
    ///   shifts per ciphertext);
    /// * or the baby shift's high part moves into the giant stage, `lo = −(a − r)` with `r` the
    ///   remainder of `a` modulo `B`, in `[0, B)` or centred in `[−B/2, B/2)`: the `K × K`
    ///   taps of a layer that keeps every input in its own output (a depthwise layer or a
    ///   pooling, whose giants are all zero) become `K` baby and `K` giant shifts
    ///   (`2(K − 1)` rotations) instead of `K²` baby ones.
    ///
    /// The split and the power of two `B` (up to `slots`) are those with the fewest rotations
    /// in all, counted exactly; `B = 1` keeps the layer as it is. Products, and so plaintexts
    /// and levels, are unchanged; so is the result, as the tests check against the reference.
    /// Moving giant shifts into the babies holds more baby rotations at once while the layer
    /// runs, so memory grows with them.
    pub fn rebalance(&self, slots: usize) -> TwoStage {
        let n = slots as i64;
        // Every product as compiled: (output, input, baby shift, giant shift, tag). A layer
        // rebalanced before is taken back to this form first (its baby shifts carry `lo`), so
        // rebalancing twice gives what rebalancing once does.
        let mut products: Vec<(usize, usize, i64, i64, u64)> = Vec::new();
        for (o, giants) in self.outputs.iter().enumerate() {
            for g in giants {
                for t in &g.terms {
                    let a = (self.babies[t.input][t.baby] - t.lo).rem_euclid(n);
                    products.push((o, t.input, a, t.giant(g.shift, slots), t.tag));
                }
            }
        }
        // Distinct (output, input, baby, giant) shifts decide the counts.
        let mut shifts: Vec<(usize, usize, i64, i64)> = products
            .iter()
            .map(|&(o, i, a, g, _)| (o, i, a, g))
            .collect();
        shifts.sort_unstable();
        shifts.dedup();
        let count = |split: Split| -> u64 {
            let mut inner: Vec<(usize, i64)> = Vec::with_capacity(shifts.len());
            let mut outer: Vec<(usize, i64)> = Vec::with_capacity(shifts.len());
            for &(o, i, a, g) in &shifts {
                let lo = split.lo(a, g, n);
                inner.push((i, (a + lo).rem_euclid(n)));
                outer.push((o, (g - lo).rem_euclid(n)));
            }
            let distinct = |v: &mut Vec<(usize, i64)>| {
                v.retain(|&(_, s)| s != 0);
                v.sort_unstable();
                v.dedup();
                v.len() as u64
            };
            distinct(&mut inner) + distinct(&mut outer)
        };
        let mut best = (count(Split::Giant(1)), Split::Giant(1));
        let mut b = 2i64;
        while b <= n {
            for split in [
                Split::Giant(b),
                Split::Baby { b, centred: false },
                Split::Baby { b, centred: true },
            ] {
                let c = count(split);
                if c < best.0 {
                    best = (c, split);
                }
            }
            b *= 2;
        }
        // `Giant(1)` rebuilds the compiled form (every `lo` zero).
        let mut builder = TwoStageBuilder::new(self.babies.len(), self.outputs.len(), slots);
        for &(o, input, a, full, tag) in &products {
            let lo = best.1.lo(a, full, n);
            builder.add_moved(o, full - lo, input, a + lo, tag, lo);
        }
        builder.finish()
    }

    /// Rotation and product counts (what [`TwoStage::run`] will issue).
    pub fn counts(&self) -> RotationCounts {
        let inner = self
            .babies
            .iter()
            .map(|b| b.iter().filter(|&&s| s != 0).count() as u64)
            .sum();
        let outer = self
            .outputs
            .iter()
            .map(|g| g.iter().filter(|x| x.shift != 0).count() as u64)
            .sum();
        let pt_mults = self
            .outputs
            .iter()
            .flat_map(|g| g.iter().map(|x| x.terms.len() as u64))
            .sum();
        RotationCounts {
            inner,
            outer,
            pt_mults,
        }
    }

    /// Every rotation amount the layer uses (the Galois keys it needs), normalized to `[1, n)`.
    pub fn rotations(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self
            .babies
            .iter()
            .flatten()
            .copied()
            .chain(self.outputs.iter().flatten().map(|g| g.shift))
            .filter(|&s| s != 0)
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// The baby rotations of every input (hoisted: one decomposition per input), indexed like
    /// [`TwoStage::babies`].
    pub fn rotate_inputs<E: Exec>(&self, ex: &E, inputs: &[E::Ct]) -> Result<Vec<Vec<E::Ct>>> {
        if inputs.len() != self.babies.len() {
            return Err(Error::Shape {
                what: "input ciphertexts of a linear layer",
                expected: self.babies.len(),
                found: inputs.len(),
            });
        }
        inputs
            .iter()
            .zip(&self.babies)
            .map(|(ct, ks)| {
                if ks.is_empty() {
                    Ok(Vec::new())
                } else {
                    ex.rotate_many(ct, ks)
                }
            })
            .collect()
    }

    /// Runs the layer: `diag(output, giant, term)` gives the slot values of a product's diagonal
    /// (never called by a dry run). The outputs are not rescaled. `layer` seeds the plaintext
    /// cache keys, so a real executor encodes each diagonal once per level.
    pub fn run<E: Exec>(
        &self,
        ex: &E,
        inputs: &[E::Ct],
        layer: u64,
        diag: &dyn Fn(usize, usize, &Term) -> Vec<C64>,
    ) -> Result<Vec<E::Ct>> {
        if inputs.len() != self.babies.len() {
            return Err(Error::Shape {
                what: "input ciphertexts of a linear layer",
                expected: self.babies.len(),
                found: inputs.len(),
            });
        }
        let rotated = self.rotate_inputs(ex, inputs)?;
        let mut outs = Vec::with_capacity(self.outputs.len());
        for (o, giants) in self.outputs.iter().enumerate() {
            let mut steps = Vec::with_capacity(giants.len());
            for (gi, g) in giants.iter().enumerate() {
                let mut prods = Vec::with_capacity(g.terms.len());
                for t in &g.terms {
                    let mut parts = [o as u64, gi as u64, t.tag, t.input as u64, t.lo as u64];
                    let parts = if t.lo == 0 {
                        &parts[..4]
                    } else {
                        &mut parts[..]
                    };
                    let key = pt_key(layer, parts);
                    let vals = move || {
                        let d = diag(o, gi, t);
                        if t.lo == 0 {
                            return d;
                        }
                        // ρ(d; lo): slot i takes d[i + lo].
                        let n = d.len();
                        let lo = t.lo.rem_euclid(n.max(1) as i64) as usize;
                        (0..n).map(|i| d[(i + lo) % n]).collect()
                    };
                    prods.push((&rotated[t.input][t.baby], key, vals));
                }
                steps.push(prods);
            }
            // All giant steps of this output in one pass over the rotated inputs.
            let groups: Vec<Vec<PlainTerm<'_, E::Ct>>> =
                steps.iter().map(|prods| keyed_terms(prods)).collect();
            let mut sums = Vec::with_capacity(giants.len());
            for (acc, g) in ex.mul_plain_sums(&groups)?.into_iter().zip(giants) {
                if let Some(a) = acc {
                    sums.push((a, g.shift));
                }
            }
            if sums.is_empty() {
                return Err(Error::InvalidParameters(
                    "linear layer: an output ciphertext has no contribution",
                ));
            }
            outs.push(ex.rotate_sum_lazy(sums)?);
        }
        Ok(outs)
    }
}
