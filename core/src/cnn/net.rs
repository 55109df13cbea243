//! A sequential CNN (convolutions, average pooling, polynomial activations, flatten, fully
//! connected layers) planned onto FEnc2's fragment layout and run through an [`Exec`]; the same
//! network also runs as the `f64` reference.
//!
//! Activations hand their affine remainder to the next linear layer ([`super::act`]), so an
//! activation costs one level and every linear layer one level. The planner picks one block size
//! for the input; each stride-`s` layer divides it by `s`.

use super::act::Quadratic;
use super::conv::{Conv2d, ConvPlan, InputAffine};
use super::fc::{FcPlan, FeatureMap, Linear};
use super::linear::RotationCounts;
use super::reference;
use crate::circuits::exec::{Exec, OpCounts};
use crate::error::{Error, Result};
use crate::packing::fragment::FragmentLayout;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

/// One layer of a sequential CNN.
#[derive(Clone, Debug, PartialEq)]
pub enum Layer {
    /// A convolution (or a depthwise one, such as average pooling).
    Conv(Conv2d),
    /// `a·x² + b·x + c`, elementwise.
    Quad(Quadratic),
    /// `max(0, x)`, elementwise: exact only in MPC (the hybrid mode); the FHE-only plan refuses
    /// it, the `f64` reference computes it.
    Relu,
    /// `(C, H, W)` → `C·H·W` features (free: the next layer reads the slots in place).
    Flatten,
    /// A fully connected layer.
    Linear(Linear),
}

/// A sequential network on `channels × side × side` inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    /// A name for reports.
    pub name: String,
    /// Input channels.
    pub channels: usize,
    /// Input side (square inputs).
    pub side: usize,
    /// The layers in order.
    pub layers: Vec<Layer>,
}

/// Options of [`Network::plan_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Every [`Layer::Relu`] is a boundary to MPC ([`Network::plan_hybrid`]).
    pub hybrid: bool,
    /// FEnc2's Arch-aware Ct Compression (§IV-C): a convolution whose output channels leave its
    /// ciphertexts partly empty writes several intra-block positions into each one
    /// ([`FragmentLayout::compact_fold`], [`super::Conv2d::plan_to`]), so the layers after it
    /// read fewer, fuller ciphertexts. It costs the convolution no rotation, product or level.
    pub aac: bool,
    /// Baby-step giant-step over each layer's outer rotations as well
    /// ([`super::ConvPlan::rebalanced`], beyond FEnc2): the same products, fewer rotations and
    /// Galois keys where a ciphertext holds many channels.
    pub bsgs: bool,
}

/// A layer's compiled form.
#[derive(Clone, Debug, PartialEq)]
pub enum LayerPlan {
    /// A convolution's plan.
    Conv(ConvPlan),
    /// An activation over `cts` ciphertexts.
    Quad {
        /// Ciphertexts squared.
        cts: usize,
    },
    /// A ReLU boundary of the hybrid mode over `cts` ciphertexts (MPC; no level).
    Relu {
        /// Ciphertexts converted to shares and back.
        cts: usize,
    },
    /// Flatten into a feature map.
    Flatten(FeatureMap),
    /// A fully connected layer's plan.
    Linear(FcPlan),
}

/// A compiled network.
#[derive(Clone, Debug, PartialEq)]
pub struct NetPlan {
    /// The input layout.
    pub input: FragmentLayout,
    /// One plan per layer.
    pub layers: Vec<LayerPlan>,
    /// The output feature map (classes × batch).
    pub output: FeatureMap,
    /// Levels consumed: the whole network's in the FHE-only mode, the deepest run of linear
    /// layers between ReLU boundaries in the hybrid mode.
    pub depth: usize,
}

/// What one layer cost in a run.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerCost {
    /// The layer (`"conv1"`, `"quad2"`, …).
    pub name: String,
    /// Input ciphertexts.
    pub cts_in: usize,
    /// Output ciphertexts.
    pub cts_out: usize,
    /// Valid elements over slots at the output.
    pub utilization: f64,
    /// The compiled rotation counts (zero for activations).
    pub rotations: RotationCounts,
    /// Every homomorphic operation the executor counted in this layer.
    pub ops: OpCounts,
}

enum State {
    Tensor(FragmentLayout),
    Features(FeatureMap),
}

impl Network {
    /// Validates every layer (as its constructor would: the fields are public) and the chain
    /// (channel and feature counts agree layer to layer).
    pub fn validate(&self) -> Result<()> {
        let (mut ch, mut side) = (self.channels, self.side);
        let mut feats: Option<usize> = None;
        for l in &self.layers {
            match l {
                Layer::Conv(c) => c.validate()?,
                Layer::Linear(f) => f.validate()?,
                Layer::Quad(q) => q.validate()?,
                Layer::Flatten | Layer::Relu => {}
            }
            match (l, feats) {
                (Layer::Conv(c), None) => {
                    if c.in_channels != ch {
                        return Err(Error::Shape {
                            what: "input channels of a convolution",
                            expected: ch,
                            found: c.in_channels,
                        });
                    }
                    side = c.out_side(side)?;
                    ch = c.out_channels;
                }
                (Layer::Conv(_), Some(_)) => {
                    return Err(Error::InvalidParameters(
                        "network: a convolution after flatten",
                    ))
                }
                (Layer::Quad(_), _) | (Layer::Relu, _) => {}
                (Layer::Flatten, None) => feats = Some(ch * side * side),
                (Layer::Flatten, Some(_)) => {
                    return Err(Error::InvalidParameters("network: flatten twice"))
                }
                (Layer::Linear(_), None) => {
                    return Err(Error::InvalidParameters(
                        "network: a fully connected layer before flatten",
                    ))
                }
                (Layer::Linear(f), Some(n)) => {
                    if f.inputs != n {
                        return Err(Error::Shape {
                            what: "input features of a fully connected layer",
                            expected: n,
                            found: f.inputs,
                        });
                    }
                    feats = Some(f.outputs);
                }
            }
        }
        if !matches!(self.layers.last(), Some(Layer::Linear(_))) {
            return Err(Error::InvalidParameters(
                "network: the last layer must be fully connected",
            ));
        }
        Ok(())
    }

    /// Classes (the last layer's outputs).
    pub fn classes(&self) -> usize {
        match self.layers.last() {
            Some(Layer::Linear(f)) => f.outputs,
            _ => 0,
        }
    }

    /// Compiles the network for `batch` samples, input block size `block` and `slots` slots.
    ///
    /// A batch that fills the slots (`batch = slots`) is planned pixel-wise whatever `block`
    /// says: one block covers the unpadded `side × side` map, so every ciphertext holds one pixel
    /// of one channel for the whole batch and no layer rotates
    /// ([`FragmentLayout::is_pixelwise`]).
    pub fn plan(&self, batch: usize, block: usize, slots: usize) -> Result<NetPlan> {
        self.plan_with(batch, block, slots, PlanOptions::default())
    }

    /// [`Network::plan`] for the hybrid mode ([`super::hybrid`]): every [`Layer::Relu`] becomes
    /// a boundary ([`LayerPlan::Relu`]) where the ciphertexts leave for MPC and come back fresh,
    /// so [`NetPlan::depth`] is the deepest run of linear layers between two boundaries. A
    /// polynomial activation is refused (the hybrid mode runs ReLU networks as trained).
    pub fn plan_hybrid(&self, batch: usize, block: usize, slots: usize) -> Result<NetPlan> {
        self.plan_with(
            batch,
            block,
            slots,
            PlanOptions {
                hybrid: true,
                ..PlanOptions::default()
            },
        )
    }

    /// [`Network::plan`] with options: the hybrid mode ([`Network::plan_hybrid`]) and FEnc2's
    /// Arch-aware Ct Compression ([`PlanOptions::aac`]).
    pub fn plan_with(
        &self,
        batch: usize,
        block: usize,
        slots: usize,
        opts: PlanOptions,
    ) -> Result<NetPlan> {
        let hybrid = opts.hybrid;
        self.validate()?;
        let (grid, block) = if batch == slots {
            (Some(self.side), self.side)
        } else {
            (None, block)
        };
        let input = FragmentLayout::new(
            batch,
            self.channels,
            self.side,
            self.side,
            grid,
            block,
            slots,
        )?;
        let mut st = State::Tensor(input);
        let mut layers = Vec::with_capacity(self.layers.len());
        let (mut depth, mut seg) = (0, 0);
        for l in &self.layers {
            match (l, &st) {
                (Layer::Conv(c), State::Tensor(t)) => {
                    let mut out = c.out_layout(t)?;
                    if opts.aac {
                        out = out.with_fold(out.compact_fold())?;
                    }
                    let mut p = c.plan_to(t, out)?;
                    if opts.bsgs {
                        p = p.rebalanced();
                    }
                    st = State::Tensor(p.output);
                    layers.push(LayerPlan::Conv(p));
                    seg += 1;
                }
                (Layer::Quad(_), _) if hybrid => {
                    return Err(Error::InvalidParameters(
                        "network: the hybrid mode runs ReLU networks; a polynomial activation belongs to the FHE-only mode",
                    ))
                }
                (Layer::Quad(_), State::Tensor(t)) => {
                    layers.push(LayerPlan::Quad {
                        cts: t.ciphertexts(),
                    });
                    seg += 1;
                }
                (Layer::Quad(_), State::Features(f)) => {
                    layers.push(LayerPlan::Quad { cts: f.cts });
                    seg += 1;
                }
                (Layer::Relu, st) if hybrid => {
                    let cts = match st {
                        State::Tensor(t) => t.ciphertexts(),
                        State::Features(f) => f.cts,
                    };
                    layers.push(LayerPlan::Relu { cts });
                    depth = depth.max(seg);
                    seg = 0;
                }
                (Layer::Relu, _) => {
                    return Err(Error::InvalidParameters(
                        "network: ReLU is exact only in MPC (the hybrid mode); the FHE-only mode needs a polynomial activation",
                    ))
                }
                (Layer::Flatten, State::Tensor(t)) => {
                    let f = FeatureMap::flatten(t);
                    st = State::Features(f.clone());
                    layers.push(LayerPlan::Flatten(f));
                }
                (Layer::Linear(f), State::Features(m)) => {
                    let mut p = f.plan(m)?;
                    if opts.bsgs {
                        p = p.rebalanced();
                    }
                    st = State::Features(p.output.clone());
                    layers.push(LayerPlan::Linear(p));
                    seg += 1;
                }
                _ => return Err(Error::InvalidParameters("network: layer order")),
            }
        }
        depth = depth.max(seg);
        let output = match st {
            State::Features(f) => f,
            _ => return Err(Error::InvalidParameters("network: no output features")),
        };
        Ok(NetPlan {
            input,
            layers,
            output,
            depth,
        })
    }

    /// Runs the network on the input ciphertexts; `on_layer` sees each layer's cost as it ends.
    pub fn run<E: Exec>(
        &self,
        ex: &E,
        plan: &NetPlan,
        input: Vec<E::Ct>,
        on_layer: impl FnMut(&LayerCost),
    ) -> Result<Vec<E::Ct>> {
        self.run_range(ex, plan, 0..self.layers.len(), input, on_layer)
    }

    /// Runs layers `range` of the network (a run of linear layers between two ReLU boundaries
    /// of the hybrid mode, or the whole network): `input` is in the layout the plan gives the
    /// range's first layer. A [`Layer::Relu`] inside the range is refused: it runs in MPC.
    /// Layers are named by their place in the whole network (`conv2`, `fc1`, …).
    pub fn run_range<E: Exec>(
        &self,
        ex: &E,
        plan: &NetPlan,
        range: Range<usize>,
        input: Vec<E::Ct>,
        mut on_layer: impl FnMut(&LayerCost),
    ) -> Result<Vec<E::Ct>> {
        if plan.layers.len() != self.layers.len() {
            return Err(Error::Shape {
                what: "layers of the network plan",
                expected: self.layers.len(),
                found: plan.layers.len(),
            });
        }
        if range.start > range.end || range.end > self.layers.len() {
            return Err(Error::InvalidParameters(
                "network: layer range out of bounds",
            ));
        }
        let mut cts = input;
        let mut pending: Option<(f64, f64)> = None;
        let count =
            |f: fn(&Layer) -> bool| self.layers[..range.start].iter().filter(|l| f(l)).count();
        let mut nconv = count(|l| matches!(l, Layer::Conv(_)));
        let mut nquad = count(|l| matches!(l, Layer::Quad(_)));
        let mut nfc = count(|l| matches!(l, Layer::Linear(_)));
        // A pixel-wise convolution followed by a quadratic runs fused: each output is squared
        // as soon as it exists (its row then carries both layers' operations).
        let mut fused = false;
        let end = range.end;
        for (i, (l, p)) in self
            .layers
            .iter()
            .zip(&plan.layers)
            .enumerate()
            .take(end)
            .skip(range.start)
        {
            let before = ex.counts();
            let cts_in = cts.len();
            let (name, rot, util);
            match (l, p) {
                (Layer::Conv(c), LayerPlan::Conv(cp)) => {
                    let aff = pending.take().map(|(a, g)| InputAffine {
                        scale: alloc::vec![a; c.in_channels],
                        shift: alloc::vec![g; c.in_channels],
                    });
                    nconv += 1;
                    match self.layers.get(i + 1) {
                        Some(Layer::Quad(q)) if cp.input.is_pixelwise() && i + 1 < end => {
                            cts = c.run_then(ex, cp, &cts, aff.as_ref(), &|ct| q.apply(ex, ct))?;
                            fused = true;
                            name = alloc::format!("conv{nconv}+quad{}", nquad + 1);
                        }
                        _ => {
                            cts = c.run(ex, cp, &cts, aff.as_ref())?;
                            name = alloc::format!("conv{nconv}");
                        }
                    }
                    rot = cp.counts();
                    util = cp.output.utilization();
                }
                (Layer::Quad(q), LayerPlan::Quad { .. }) => {
                    if pending.is_some() {
                        return Err(Error::InvalidParameters(
                            "network: two activations without a linear layer between",
                        ));
                    }
                    let was_fused = core::mem::take(&mut fused);
                    if !was_fused {
                        cts = q.run(ex, cts)?;
                    }
                    let a = q.affine(1);
                    pending = Some((a.scale[0], a.shift[0]));
                    nquad += 1;
                    name = if was_fused {
                        alloc::format!("quad{nquad} (fused)")
                    } else {
                        alloc::format!("quad{nquad}")
                    };
                    rot = RotationCounts::default();
                    util = f64::NAN;
                }
                (Layer::Flatten, LayerPlan::Flatten(_)) => {
                    name = String::from("flatten");
                    rot = RotationCounts::default();
                    util = f64::NAN;
                }
                (Layer::Linear(f), LayerPlan::Linear(fp)) => {
                    let aff = pending.take().map(|(a, g)| InputAffine {
                        scale: alloc::vec![a; f.inputs],
                        shift: alloc::vec![g; f.inputs],
                    });
                    cts = f.run(ex, fp, &cts, aff.as_ref())?;
                    nfc += 1;
                    name = alloc::format!("fc{nfc}");
                    rot = fp.counts();
                    util = (f.outputs * fp.output.batch) as f64
                        / (fp.output.cts * fp.output.slots) as f64;
                }
                (Layer::Relu, _) => {
                    return Err(Error::InvalidParameters(
                        "network: ReLU is exact only in MPC (the hybrid mode); the FHE-only mode needs a polynomial activation",
                    ))
                }
                _ => return Err(Error::InvalidParameters("network: plan does not match")),
            }
            on_layer(&LayerCost {
                name,
                cts_in,
                cts_out: cts.len(),
                utilization: util,
                rotations: rot,
                ops: ex.counts().since(&before),
            });
        }
        Ok(cts)
    }

    /// The `f64` reference on `batch` images (`[b][c][y][x]`): logits `[b][class]`.
    pub fn reference(&self, x: &[f64], batch: usize) -> Result<Vec<f64>> {
        self.validate()?;
        let want = batch * self.channels * self.side * self.side;
        if x.len() != want {
            return Err(Error::Shape {
                what: "elements of the reference input",
                expected: want,
                found: x.len(),
            });
        }
        let mut t = x.to_vec();
        let (mut h, mut w) = (self.side, self.side);
        for l in &self.layers {
            match l {
                Layer::Conv(c) => {
                    let (y, ho, wo) = reference::conv2d(c, &t, batch, h, w, None);
                    (t, h, w) = (y, ho, wo);
                }
                Layer::Quad(q) => t.iter_mut().for_each(|v| *v = q.eval(*v)),
                Layer::Relu => t.iter_mut().for_each(|v| *v = v.max(0.0)),
                Layer::Flatten => {}
                Layer::Linear(f) => t = reference::linear(f, &t, batch, None),
            }
        }
        Ok(t)
    }
}
