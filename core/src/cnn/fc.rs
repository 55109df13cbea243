//! Fully connected layers by the diagonal method with baby-step giant-step, on any layout that
//! keeps the batch innermost: feature `f` of sample `b` lives at slot `γ_f·BS + b` of one
//! ciphertext ([`FeatureMap`]). Output `o` goes to group `o mod G` of ciphertext `⌊o / G⌋`,
//! `G = n / BS`, so one FC layer's output is the next one's [`FeatureMap::dense`] input.

use super::conv::{check_affine, InputAffine};
use super::linear::{RotationCounts, Term, TwoStage, TwoStageBuilder};
use crate::circuits::exec::{pt_key, Exec};
use crate::ckks::C64;
use crate::error::{Error, Result};
use crate::packing::fragment::FragmentLayout;
use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;

/// Where each feature of a flattened activation lives: `(ciphertext, group)`, slot `group·BS + b`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureMap {
    /// Samples `BS` (innermost in every group).
    pub batch: usize,
    /// Slots per ciphertext.
    pub slots: usize,
    /// Ciphertexts.
    pub cts: usize,
    /// `(ct, group)` of feature `f`.
    pub pos: Vec<(usize, usize)>,
}

impl FeatureMap {
    /// The flattening of a fragment-encoded tensor in PyTorch order (`f = (c·H + y)·W + x`).
    pub fn flatten(l: &FragmentLayout) -> Self {
        let mut pos = Vec::with_capacity(l.channels * l.height * l.width);
        for c in 0..l.channels {
            for y in 0..l.height {
                for x in 0..l.width {
                    let r = l.locate(0, c, y, x);
                    pos.push((r.ct, r.slot / l.batch));
                }
            }
        }
        Self {
            batch: l.batch,
            slots: l.slots,
            cts: l.ciphertexts(),
            pos,
        }
    }

    /// `features` packed densely: feature `f` at group `f mod G` of ciphertext `⌊f / G⌋`.
    pub fn dense(features: usize, batch: usize, slots: usize) -> Result<Self> {
        if batch == 0 || !batch.is_power_of_two() || batch > slots || features == 0 {
            return Err(Error::InvalidParameters(
                "feature map: the batch must be a power of two no larger than the slots",
            ));
        }
        let g = slots / batch;
        Ok(Self {
            batch,
            slots,
            cts: features.div_ceil(g),
            pos: (0..features).map(|f| (f / g, f % g)).collect(),
        })
    }

    /// Features.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// Whether there are no features.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// Groups per ciphertext `G = n / BS`.
    pub fn groups(&self) -> usize {
        self.slots / self.batch
    }

    /// Packs per-sample feature vectors (`[b][f]` row-major) into slot vectors.
    pub fn pack(&self, x: &[f64]) -> Result<Vec<Vec<f64>>> {
        let f = self.len();
        if x.len() != self.batch * f {
            return Err(Error::Shape {
                what: "elements of the feature batch to pack",
                expected: self.batch * f,
                found: x.len(),
            });
        }
        let mut cts = vec![vec![0.0; self.slots]; self.cts];
        for b in 0..self.batch {
            for (i, &(ct, g)) in self.pos.iter().enumerate() {
                cts[ct][g * self.batch + b] = x[b * f + i];
            }
        }
        Ok(cts)
    }

    /// Reads per-sample feature vectors (`[b][f]`) from slot vectors.
    pub fn unpack(&self, cts: &[Vec<f64>]) -> Result<Vec<f64>> {
        if cts.len() != self.cts || cts.iter().any(|c| c.len() != self.slots) {
            return Err(Error::Shape {
                what: "ciphertexts of the feature map",
                expected: self.cts,
                found: cts.len(),
            });
        }
        let f = self.len();
        let mut out = vec![0.0; self.batch * f];
        for b in 0..self.batch {
            for (i, &(ct, g)) in self.pos.iter().enumerate() {
                out[b * f + i] = cts[ct][g * self.batch + b];
            }
        }
        Ok(out)
    }
}

/// A fully connected layer `y = W·x + b`.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// Input features.
    pub inputs: usize,
    /// Output features.
    pub outputs: usize,
    /// `W[o][f]` row-major.
    pub weight: Vec<f64>,
    /// Bias per output.
    pub bias: Vec<f64>,
}

impl Linear {
    /// A validated layer.
    pub fn new(inputs: usize, outputs: usize, weight: Vec<f64>, bias: Vec<f64>) -> Result<Self> {
        let l = Self {
            inputs,
            outputs,
            weight,
            bias,
        };
        l.validate()?;
        Ok(l)
    }

    /// Checks the fields: what [`Linear::new`] checks, for a layer built or changed field by
    /// field ([`crate::cnn::Network::validate`] calls it for every layer).
    pub fn validate(&self) -> Result<()> {
        let (inputs, outputs) = (self.inputs, self.outputs);
        if inputs == 0 || outputs == 0 {
            return Err(Error::InvalidParameters("linear: sizes must be positive"));
        }
        if self.weight.len() != inputs * outputs {
            return Err(Error::Shape {
                what: "linear weights",
                expected: inputs * outputs,
                found: self.weight.len(),
            });
        }
        if self.bias.len() != outputs {
            return Err(Error::Shape {
                what: "linear bias",
                expected: outputs,
                found: self.bias.len(),
            });
        }
        if self.weight.iter().chain(&self.bias).any(|v| !v.is_finite()) {
            return Err(Error::NonFinite);
        }
        Ok(())
    }

    /// Compiles the layer for `input`, choosing the baby-step size `n₁` (a power of two) that
    /// minimizes the rotations.
    pub fn plan(&self, input: &FeatureMap) -> Result<FcPlan> {
        self.validate()?;
        if input.len() != self.inputs {
            return Err(Error::Shape {
                what: "input features of the linear layer",
                expected: self.inputs,
                found: input.len(),
            });
        }
        let output = FeatureMap::dense(self.outputs, input.batch, input.slots)?;
        if bs_fills(input) {
            // One feature per ciphertext: no rotation, the weights alone drive the run.
            let stages = TwoStageBuilder::new(input.cts, output.cts, input.slots).finish();
            return Ok(FcPlan {
                input: input.clone(),
                output,
                baby_step: 1,
                stages,
            });
        }
        let g = input.groups();
        // Distinct shifts δ per (input ct, output ct), over the nonzero weights.
        let mut deltas: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); input.cts * output.cts];
        for o in 0..self.outputs {
            let (oc, og) = output.pos[o];
            for (f, &(ic, ig)) in input.pos.iter().enumerate() {
                if self.weight[o * self.inputs + f] != 0.0 {
                    deltas[ic * output.cts + oc].insert((ig + g - og) % g);
                }
            }
        }
        let mut best: Option<(u64, usize)> = None;
        let mut n1 = 1;
        while n1 <= g {
            let mut babies: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); input.cts];
            let mut giants: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); output.cts];
            for ic in 0..input.cts {
                for oc in 0..output.cts {
                    for &d in &deltas[ic * output.cts + oc] {
                        babies[ic].insert(d % n1);
                        giants[oc].insert(d - d % n1);
                    }
                }
            }
            let rot: u64 = babies
                .iter()
                .chain(&giants)
                .map(|s| s.iter().filter(|&&x| x != 0).count() as u64)
                .sum();
            if best.is_none_or(|(r, _)| rot < r) {
                best = Some((rot, n1));
            }
            n1 *= 2;
        }
        let n1 = best.map_or(1, |b| b.1);
        let bs = input.batch as i64;
        let mut b = TwoStageBuilder::new(input.cts, output.cts, input.slots);
        for ic in 0..input.cts {
            for oc in 0..output.cts {
                for &d in &deltas[ic * output.cts + oc] {
                    let a = d % n1;
                    b.add(oc, (d - a) as i64 * bs, ic, a as i64 * bs, d as u64);
                }
            }
        }
        Ok(FcPlan {
            input: input.clone(),
            output,
            baby_step: n1,
            stages: b.finish(),
        })
    }

    /// Runs the layer (with an optional input affine per feature) and rescales; the result is in
    /// `plan.output`.
    pub fn run<E: Exec>(
        &self,
        ex: &E,
        plan: &FcPlan,
        cts: &[E::Ct],
        affine: Option<&InputAffine>,
    ) -> Result<Vec<E::Ct>> {
        if let Some(a) = affine {
            check_affine(a, self.inputs, "features of the input affine")?;
        }
        let (inp, out) = (&plan.input, &plan.output);
        if inp.len() != self.inputs || out.len() != self.outputs {
            return Err(Error::InvalidParameters(
                "linear: the plan was compiled for another layer",
            ));
        }
        if ex.slots() != inp.slots {
            return Err(Error::SlotMismatch {
                expected: inp.slots,
                found: ex.slots(),
            });
        }
        if bs_fills(inp) {
            if cts.len() != inp.cts {
                return Err(Error::Shape {
                    what: "input ciphertexts of the linear layer",
                    expected: inp.cts,
                    found: cts.len(),
                });
            }
            // One ciphertext per feature.
            let ins: Vec<&E::Ct> = inp.pos.iter().map(|&(c, _)| &cts[c]).collect();
            let level = cts.first().map_or(0, |c| ex.level(c));
            return self.run_pixel(ex, &ins, level, affine);
        }
        let (g, bs, n) = (inp.groups(), inp.batch, inp.slots);
        let mut at: Vec<Option<usize>> = vec![None; inp.cts * g];
        for (f, &(ic, fg)) in inp.pos.iter().enumerate() {
            at[ic * g + fg] = Some(f);
        }
        let diag = |oc: usize, gi: usize, t: &Term| -> Vec<C64> {
            let giant = t.giant(plan.stages.outputs[oc][gi].shift, n) as usize / bs;
            let delta = t.tag as usize;
            let mut d = vec![C64::default(); n];
            for o in 0..self.outputs {
                let (c, og) = out.pos[o];
                if c != oc {
                    continue;
                }
                let ig = (og + delta) % g;
                // The feature of input t.input at group ig, if any.
                if let Some(f) = at[t.input * g + ig] {
                    let mut w = self.weight[o * self.inputs + f];
                    if let Some(a) = affine {
                        w *= a.scale[f];
                    }
                    let j = (og + giant) % g;
                    for b in 0..bs {
                        d[j * bs + b] = C64::real(w);
                    }
                }
            }
            d
        };
        let mut parts: Vec<u64> = vec![bs as u64, n as u64, self.inputs as u64];
        parts.extend(self.weight.iter().map(|w| w.to_bits()));
        parts.extend(inp.pos.iter().map(|&(c, g)| ((c as u64) << 32) | g as u64));
        if let Some(a) = affine {
            parts.extend(a.scale.iter().map(|w| w.to_bits()));
        }
        let tag = pt_key(0xfc, &parts);
        let mut outs = plan.stages.run(ex, cts, tag, &diag)?;
        for (oc, ct) in outs.iter_mut().enumerate() {
            ex.rescale(ct)?;
            let bias = || {
                let mut v = vec![C64::default(); n];
                for o in 0..self.outputs {
                    let (c, og) = out.pos[o];
                    if c != oc {
                        continue;
                    }
                    let val = self.folded_bias(o, affine);
                    for b in 0..bs {
                        v[og * bs + b] = C64::real(val);
                    }
                }
                v
            };
            ex.add_plain(ct, &bias)?;
        }
        Ok(outs)
    }
}

/// Whether the batch fills the slots, so that each ciphertext holds one feature.
fn bs_fills(m: &FeatureMap) -> bool {
    m.batch == m.slots
}

impl Linear {
    /// Output `o`'s bias with the input affine's shift folded in: `b_o + Σ_f w_{o,f}·β_f`.
    fn folded_bias(&self, o: usize, affine: Option<&InputAffine>) -> f64 {
        let mut val = self.bias[o];
        if let Some(a) = affine {
            val += (0..self.inputs)
                .map(|f| self.weight[o * self.inputs + f] * a.shift[f])
                .sum::<f64>();
        }
        val
    }

    /// The layer when each ciphertext holds one feature of the whole batch (`ins`, one per
    /// feature, at `level`): one [`Exec::mul_const_matrix`] at scale `q_level` (no rotation, no
    /// plaintext), then the bias as a constant per output.
    fn run_pixel<E: Exec>(
        &self,
        ex: &E,
        ins: &[&E::Ct],
        level: usize,
        affine: Option<&InputAffine>,
    ) -> Result<Vec<E::Ct>> {
        let mut w = self.weight.clone();
        if let Some(a) = affine {
            for row in w.chunks_mut(self.inputs) {
                for (x, s) in row.iter_mut().zip(&a.scale) {
                    *x *= s;
                }
            }
        }
        let mut outs = ex.mul_const_matrix(ins, &w, self.outputs, ex.rescale_prime(level))?;
        for (o, ct) in outs.iter_mut().enumerate() {
            ex.rescale(ct)?;
            let val = self.folded_bias(o, affine);
            if val != 0.0 {
                ex.add_const(ct, val)?;
            }
        }
        Ok(outs)
    }
}

/// A compiled fully connected layer.
#[derive(Clone, Debug, PartialEq)]
pub struct FcPlan {
    /// The input feature map.
    pub input: FeatureMap,
    /// The output feature map (dense).
    pub output: FeatureMap,
    /// The baby-step size `n₁`.
    pub baby_step: usize,
    /// Baby and giant rotations.
    pub stages: TwoStage,
}

impl FcPlan {
    /// The plan with baby-step giant-step over its giant rotations as well
    /// ([`TwoStage::rebalance`]); it keeps the layer as it is when that saves nothing.
    pub fn rebalanced(mut self) -> Self {
        self.stages = self.stages.rebalance(self.input.slots);
        self
    }

    /// Rotation counts.
    pub fn counts(&self) -> RotationCounts {
        self.stages.counts()
    }
}
