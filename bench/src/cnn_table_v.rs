//! `veil-bench cnn --table-v`: FEnc2's Table V for whole networks. SqueezeNet (CIFAR-10, the
//! four fire modules of Table X), ResNet18 and MobileNet (v1; ImageNet, `224 × 224`) are
//! compiled at their real shapes in the FHE-only mode (ReLU as FEnc2's quadratic, max pooling
//! as average pooling), at batch 1 and at FEnc2's largest batch (256, 16, 16), with and
//! without Arch-aware Ct Compression, and dry-run through the real run's code path
//! ([`SymExec`]): rotations, key switches, products, ciphertexts and slot utilization, beside
//! the FEnc2 column of the paper's Table V.
//!
//! The networks are graphs of the core layers: a residual block is
//! `act(body(x) + shortcut(x))`, its shortcut the identity or a strided `1 × 1` convolution; a
//! fire module's two expansions run as one layer ([`Conv2d::with_point_outputs`]). One block
//! size `S` is chosen per network by these same counts (the fewest key switches among the
//! sizes every stride divides), so no layer re-blocks; strides divide `S` layer by layer, as
//! FEnc2 discards ciphertexts. Bootstrapping is not counted (Table V counts the layers).
//!
//! Each row also carries the two-stage form's floor ([`veil_core::cnn::Floor`]): the fewest
//! rotations and products any layout at full slot utilization can issue for the network's
//! convolutions and fully connected layer (every tensor on full slots of its power-of-two grid,
//! as the paper's 100 % utilization and ct count say). Pooling layers are left out of it (their
//! equal weights admit rotate-and-sum, outside the form), so it understates. Our own layouts
//! run below full utilization, where the floor of a layer with more input ciphertexts is lower;
//! every compiled layer is checked against the floor at its own counts.

use crate::cnn_aac::{conv_strided as conv, fire_expand, weights, QUAD};
use crate::error::core;
use crate::BenchError;
use serde::Serialize;
use veil_core::circuits::{Exec, OpCounts, SymExec};
use veil_core::cnn::{
    conv_floor, fc_floor, Conv2d, ConvPlan, FcPlan, FeatureMap, Floor, InputAffine, Linear,
    Quadratic, Relayout,
};
use veil_core::packing::fragment::FragmentLayout;

/// Slots at `N = 2^16`, the ring Table IV gives all three networks.
const SLOTS: usize = 1 << 15;
/// A level budget no dry run reaches (Table V leaves bootstrapping out).
const LEVELS: usize = 100_000;

/// One stage of a network.
enum Node {
    /// A convolution, then the activation when `act`.
    Conv { conv: Conv2d, act: bool },
    /// `act(body(x) + shortcut(x))`: the body's layers (each with its own activation flag, the
    /// last without), the shortcut a convolution or the identity.
    Residual {
        body: Vec<(Conv2d, bool)>,
        shortcut: Option<Conv2d>,
    },
    /// Flatten, then a fully connected layer.
    Fc(Linear),
}

/// A network at its real shape.
struct Net {
    name: &'static str,
    channels: usize,
    side: usize,
    nodes: Vec<Node>,
    /// FEnc2's largest batch for it (Fig. 6).
    max_batch: usize,
}

/// A node's compiled form.
enum NodePlan {
    Conv(ConvPlan),
    Residual {
        body: Vec<ConvPlan>,
        shortcut: Option<Box<ConvPlan>>,
        /// The identity shortcut's pending affine, as a `1 × 1` depthwise layer.
        affine: Option<Box<(Conv2d, ConvPlan)>>,
    },
    Fc(FcPlan),
}

/// One row: a network at one batch, with or without AAC.
#[derive(Clone, Debug, Serialize)]
pub struct TableVRow {
    /// `SqueezeNet`, `ResNet18`, `MobileNet`.
    pub network: String,
    /// Samples per batch.
    pub batch: usize,
    /// Whether AAC compacted the tensors.
    pub aac: bool,
    /// Whether the outer rotations ran baby-step giant-step ([`ConvPlan::rebalanced`]; Veil's,
    /// beyond FEnc2).
    pub bsgs: bool,
    /// The block size chosen (the input's; each stride divides it).
    pub block: usize,
    /// Every operation of the dry run, for the whole batch.
    pub ops: OpCounts,
    /// Input ciphertexts.
    pub cts_in: usize,
    /// The most ciphertexts any layer outputs.
    pub cts_peak: usize,
    /// Mean slot utilization over the layers' outputs.
    pub utilization: f64,
    /// The lowest slot utilization of a layer's output.
    pub utilization_min: f64,
    /// Convolution and fully connected layers.
    pub linear_layers: usize,
    /// Activations (quadratics).
    pub activations: usize,
    /// FEnc2's Table V (rotations, key switches, ciphertexts, utilization %) for the same
    /// network, batch and AAC setting (`FEnc2-F` without it).
    pub paper: (u64, u64, u64, f64),
    /// The two-stage form's floor on the rotations of the network's convolutions and fully
    /// connected layer (pooling left out), for the whole batch, at full slot utilization:
    /// no layout in FEnc2's form at full utilization issues fewer.
    pub floor_rotations: u64,
    /// The same floor on plaintext products.
    pub floor_products: u64,
    /// With AAC and BSGS only: every linear layer at its own best block size (AAC fold,
    /// rebalanced), summed, re-blocking between layers not counted. What per-layer block sizes
    /// could give at most in this layout; the re-blocks it needs cost more than it saves
    /// ([`veil_core::cnn::Relayout`]).
    pub envelope: Option<u64>,
    /// With AAC and BSGS, for a chain (SqueezeNet, MobileNet): the re-blocks the envelope's
    /// path needs between layers whose layouts differ.
    pub reblocks: Option<Reblocks>,
    /// Per layer.
    pub layers: Vec<LayerRow>,
}

/// The re-blocks ([`Relayout`], rebalanced) a path of per-layer block sizes needs.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Reblocks {
    /// Re-blocks (layer boundaries whose layouts differ).
    pub count: u64,
    /// Their rotations.
    pub rotations: u64,
    /// Their mask products (one level each).
    pub products: u64,
}

/// One layer of a row.
#[derive(Clone, Debug, Serialize)]
pub struct LayerRow {
    /// `conv1`, `pool2`, `dw3`, `shortcut7`, `fc`.
    pub name: String,
    /// The input's block size (0 for the fully connected layer).
    pub block: usize,
    /// Inner (baby) rotations.
    pub inner: u64,
    /// Outer (giant) rotations.
    pub outer: u64,
    /// Plaintext products.
    pub products: u64,
    /// Output ciphertexts.
    pub cts_out: usize,
    /// Output slot utilization.
    pub utilization: f64,
    /// The two-stage form's floor on this layer's rotations, at its own input ciphertexts
    /// (the layer's inner + outer are never below it).
    pub floor: u64,
}

/// The `--table-v` report.
#[derive(Clone, Debug, Serialize)]
pub struct TableV {
    /// Slots per ciphertext.
    pub slots: usize,
    /// Three rows per network and batch: FEnc2's layout without AAC, with AAC, and with AAC and
    /// baby-step giant-step over the outer rotations.
    pub rows: Vec<TableVRow>,
}

/// FEnc2's Table V: `(FEnc2-F, FEnc2)` × `(rot, key switches, ct count, util %)`, batch 1
/// then the largest batch.
fn paper(net: &str, max: bool) -> [(u64, u64, u64, f64); 2] {
    match (net, max) {
        ("SqueezeNet", false) => [(477, 517, 4, 50.0), (224, 244, 2, 100.0)],
        ("SqueezeNet", true) => [(92, 132, 4, 50.0), (54, 74, 2, 100.0)],
        ("ResNet18", false) => [(1040, 1160, 12, 75.0), (788, 868, 8, 100.0)],
        ("ResNet18", true) => [(502, 622, 12, 75.0), (242, 322, 8, 100.0)],
        ("MobileNet", false) => [(2696, 3336, 64, 25.0), (786, 946, 16, 100.0)],
        _ => [(1894, 2534, 64, 25.0), (472, 632, 16, 100.0)],
    }
}

fn depthwise(c: usize, s: usize, seed: u64) -> Result<Conv2d, BenchError> {
    Conv2d::depthwise(
        c,
        3,
        s,
        1,
        weights(c * 9, seed, 1.0 / 3.0),
        weights(c, seed + 1, 0.1),
    )
    .map_err(core("a depthwise layer"))
}

fn pool(c: usize, k: usize, s: usize, p: usize) -> Result<Conv2d, BenchError> {
    Conv2d::avg_pool_with(c, k, s, p).map_err(core("a pooling layer"))
}

fn fc(i: usize, o: usize, seed: u64) -> Result<Linear, BenchError> {
    Linear::new(
        i,
        o,
        weights(i * o, seed, 1.0 / (i as f64).sqrt()),
        weights(o, seed + 1, 0.1),
    )
    .map_err(core("a fully connected layer"))
}

/// SqueezeNet for CIFAR-10 on Table X's fire modules: conv 3→64, pool, fire ×2, pool,
/// fire ×2, conv 256→10, global pool (10 activations).
fn squeezenet() -> Result<Net, BenchError> {
    let mut nodes = vec![
        Node::Conv {
            conv: conv(3, 64, 3, 1, 1, 1)?,
            act: true,
        },
        Node::Conv {
            conv: pool(64, 2, 2, 0)?,
            act: false,
        },
    ];
    for (i, &(nin, nout)) in [(64, 128), (128, 128), (128, 256), (256, 256)]
        .iter()
        .enumerate()
    {
        if i == 2 {
            nodes.push(Node::Conv {
                conv: pool(nin, 2, 2, 0)?,
                act: false,
            });
        }
        nodes.push(Node::Conv {
            conv: conv(nin, 32, 1, 1, 0, 10 + 2 * i as u64)?,
            act: true,
        });
        nodes.push(Node::Conv {
            conv: fire_expand(32, nout, 20 + 2 * i as u64)?,
            act: true,
        });
    }
    nodes.push(Node::Conv {
        conv: conv(256, 10, 1, 1, 0, 40)?,
        act: true,
    });
    nodes.push(Node::Conv {
        conv: pool(10, 8, 1, 0)?,
        act: false,
    });
    nodes.push(Node::Fc(fc(10, 10, 42)?));
    Ok(Net {
        name: "SqueezeNet",
        channels: 3,
        side: 32,
        nodes,
        max_batch: 256,
    })
}

/// ResNet18 for ImageNet: conv 7×7/2, pool 3×3/2, four stages of two basic blocks (the first
/// of stages 2–4 strided, with a `1 × 1` shortcut), global pool, fc 512→1000 (17 activations).
fn resnet18() -> Result<Net, BenchError> {
    let mut nodes = vec![
        Node::Conv {
            conv: conv(3, 64, 7, 2, 3, 1)?,
            act: true,
        },
        Node::Conv {
            conv: pool(64, 3, 2, 1)?,
            act: false,
        },
    ];
    let mut cin = 64;
    let mut seed = 100;
    for (stage, &c) in [64, 128, 256, 512].iter().enumerate() {
        for blk in 0..2 {
            let s = if stage > 0 && blk == 0 { 2 } else { 1 };
            let body = vec![
                (conv(cin, c, 3, s, 1, seed)?, true),
                (conv(c, c, 3, 1, 1, seed + 2)?, false),
            ];
            let shortcut = if s != 1 || cin != c {
                Some(conv(cin, c, 1, s, 0, seed + 4)?)
            } else {
                None
            };
            nodes.push(Node::Residual { body, shortcut });
            cin = c;
            seed += 10;
        }
    }
    nodes.push(Node::Conv {
        conv: pool(512, 7, 1, 0)?,
        act: false,
    });
    nodes.push(Node::Fc(fc(512, 1000, 900)?));
    Ok(Net {
        name: "ResNet18",
        channels: 3,
        side: 224,
        nodes,
        max_batch: 16,
    })
}

/// MobileNet (v1) for ImageNet: conv 3×3/2 to 32, thirteen depthwise-separable blocks
/// (`3 × 3` depthwise, `1 × 1` pointwise, each activated), global pool, fc 1024→1000
/// (27 activations).
fn mobilenet() -> Result<Net, BenchError> {
    let mut nodes = vec![Node::Conv {
        conv: conv(3, 32, 3, 2, 1, 1)?,
        act: true,
    }];
    let blocks = [
        (64, 1),
        (128, 2),
        (128, 1),
        (256, 2),
        (256, 1),
        (512, 2),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (1024, 2),
        (1024, 1),
    ];
    let mut cin = 32;
    for (i, &(c, s)) in blocks.iter().enumerate() {
        let seed = 200 + 10 * i as u64;
        nodes.push(Node::Conv {
            conv: depthwise(cin, s, seed)?,
            act: true,
        });
        nodes.push(Node::Conv {
            conv: conv(cin, c, 1, 1, 0, seed + 2)?,
            act: true,
        });
        cin = c;
    }
    nodes.push(Node::Conv {
        conv: pool(1024, 7, 1, 0)?,
        act: false,
    });
    nodes.push(Node::Fc(fc(1024, 1000, 900)?));
    Ok(Net {
        name: "MobileNet",
        channels: 3,
        side: 224,
        nodes,
        max_batch: 16,
    })
}

/// The product of the strides along the network (every one must divide the block size).
fn total_stride(net: &Net) -> usize {
    net.nodes
        .iter()
        .map(|n| match n {
            Node::Conv { conv, .. } => conv.stride,
            Node::Residual { body, .. } => body.iter().map(|(c, _)| c.stride).product(),
            Node::Fc(_) => 1,
        })
        .product()
}

/// `conv`'s output layout for `t`, compacted by AAC when `aac`.
fn out_of(conv: &Conv2d, t: &FragmentLayout, aac: bool) -> Result<FragmentLayout, BenchError> {
    let out = conv.out_layout(t).map_err(core("an output layout"))?;
    if aac {
        out.with_fold(out.compact_fold())
            .map_err(core("the AAC fold"))
    } else {
        Ok(out)
    }
}

/// Compiles the network: the input layout, the node plans and every tensor's layout.
fn compile(
    net: &Net,
    batch: usize,
    block: usize,
    aac: bool,
    bsgs: bool,
) -> Result<(FragmentLayout, Vec<NodePlan>, Vec<LayerRow>), BenchError> {
    let fin = |p: ConvPlan| if bsgs { p.rebalanced() } else { p };
    let row = |name: String, conv: &Conv2d, p: &ConvPlan| -> Result<LayerRow, BenchError> {
        let c = p.counts();
        let i = &p.input;
        let floor = conv_floor(conv, i.batch, i.height, i.width, i.ciphertexts(), SLOTS)
            .map_err(core("a layer's floor"))?;
        Ok(LayerRow {
            name,
            block: p.input.block,
            inner: c.inner,
            outer: c.outer,
            products: c.pt_mults,
            cts_out: p.output.ciphertexts(),
            utilization: p.output.utilization(),
            floor: floor.rotations,
        })
    };
    let mut l0 = FragmentLayout::new(batch, net.channels, net.side, net.side, None, block, SLOTS)
        .map_err(core("the input layout"))?;
    if aac {
        l0 = l0
            .with_fold(l0.compact_fold())
            .map_err(core("the input fold"))?;
    }
    let mut t = l0;
    let mut plans = Vec::new();
    let mut tensors = Vec::new();
    let mut pending = false;
    for node in &net.nodes {
        match node {
            Node::Conv { conv, act } => {
                let out = out_of(conv, &t, aac)?;
                let p = fin(conv.plan_to(&t, out).map_err(core("a layer plan"))?);
                t = p.output;
                tensors.push(row(layer_name(conv, tensors.len()), conv, &p)?);
                plans.push(NodePlan::Conv(p));
                pending = *act;
            }
            Node::Residual { body, shortcut } => {
                let (sc, target) = match shortcut {
                    Some(c) => {
                        let out = out_of(c, &t, aac)?;
                        let p = fin(c.plan_to(&t, out).map_err(core("a shortcut plan"))?);
                        tensors.push(row(format!("shortcut{}", tensors.len() + 1), c, &p)?);
                        (Some(Box::new(p)), out)
                    }
                    None => (None, t),
                };
                let affine = if shortcut.is_none() && pending {
                    let id = Conv2d::depthwise(
                        t.channels,
                        1,
                        1,
                        0,
                        vec![1.0; t.channels],
                        vec![0.0; t.channels],
                    )
                    .map_err(core("the shortcut's affine"))?;
                    let p = id.plan_to(&t, t).map_err(core("the shortcut's affine"))?;
                    tensors.push(row(format!("affine{}", tensors.len() + 1), &id, &p)?);
                    Some(Box::new((id, p)))
                } else {
                    None
                };
                let mut bt = t;
                let mut bp = Vec::new();
                for (i, (c, _)) in body.iter().enumerate() {
                    let out = if i + 1 == body.len() {
                        target
                    } else {
                        out_of(c, &bt, aac)?
                    };
                    let p = fin(c.plan_to(&bt, out).map_err(core("a residual layer plan"))?);
                    bt = p.output;
                    tensors.push(row(layer_name(c, tensors.len()), c, &p)?);
                    bp.push(p);
                }
                t = target;
                plans.push(NodePlan::Residual {
                    body: bp,
                    shortcut: sc,
                    affine,
                });
                pending = true;
            }
            Node::Fc(l) => {
                let f = FeatureMap::flatten(&t);
                let mut p = l.plan(&f).map_err(core("a fully connected plan"))?;
                if bsgs {
                    p = p.rebalanced();
                }
                let c = p.stages.counts();
                tensors.push(LayerRow {
                    name: "fc".into(),
                    block: 0,
                    inner: c.inner,
                    outer: c.outer,
                    products: c.pt_mults,
                    cts_out: p.output.cts,
                    utilization: (l.outputs * batch) as f64 / (p.output.cts * SLOTS) as f64,
                    floor: fc_floor(l, batch, p.input.cts, SLOTS).rotations,
                });
                plans.push(NodePlan::Fc(p));
                pending = false;
            }
        }
    }
    Ok((l0, plans, tensors))
}

/// Ciphertexts of a `batch × channels × side × side` tensor on full slots of its power-of-two
/// grid, its channels padded to a power of two (Table V's ct count: 8 for ResNet18's first
/// stage; 8 for its input too, 3 channels padded to 4). Padding only adds input ciphertexts,
/// which only lowers the floor.
fn full_cts(batch: usize, channels: usize, side: usize) -> usize {
    let m = side.next_power_of_two();
    (batch * channels.next_power_of_two() * m * m).div_ceil(SLOTS)
}

/// Whether a layer is an average pooling (equal weights).
fn is_pool(c: &Conv2d) -> bool {
    c.depthwise && c.weight.iter().all(|&w| w == c.weight[0])
}

/// Every convolution of `net` in order (a residual block's shortcut before its body), with the
/// side of its input; then the last map's side and channels and the fully connected layer.
fn walk(
    net: &Net,
    mut layer: impl FnMut(&Conv2d, usize) -> Result<(), BenchError>,
) -> Result<(usize, usize, Option<&Linear>), BenchError> {
    let (mut side, mut ch, mut fc) = (net.side, net.channels, None);
    let mut step = |c: &Conv2d, side: usize| -> Result<usize, BenchError> {
        layer(c, side)?;
        c.out_side(side).map_err(core("a layer's output side"))
    };
    for node in &net.nodes {
        match node {
            Node::Conv { conv, .. } => {
                side = step(conv, side)?;
                ch = conv.out_channels;
            }
            Node::Residual { body, shortcut } => {
                if let Some(c) = shortcut {
                    step(c, side)?;
                }
                for (c, _) in body {
                    side = step(c, side)?;
                    ch = c.out_channels;
                }
            }
            Node::Fc(l) => fc = Some(l),
        }
    }
    Ok((side, ch, fc))
}

/// The two-stage form's floor for `net` at `batch`: its convolutions and fully connected layer
/// at full slot utilization, pooling left out.
fn network_floor(net: &Net, batch: usize) -> Result<Floor, BenchError> {
    let mut total = Floor::default();
    let (side, ch, fc) = walk(net, |c, side| {
        if !is_pool(c) {
            let in_cts = full_cts(batch, c.in_channels, side);
            let f =
                conv_floor(c, batch, side, side, in_cts, SLOTS).map_err(core("a layer's floor"))?;
            total = total.plus(f);
        }
        Ok(())
    })?;
    if let Some(l) = fc {
        total = total.plus(fc_floor(l, batch, full_cts(batch, ch, side), SLOTS));
    }
    Ok(total)
}

/// A layer at its best block size.
struct BestBlock {
    /// Its rotations there.
    rotations: u64,
    /// Its input layout there.
    input: FragmentLayout,
    /// Its output layout there.
    output: FragmentLayout,
}

/// The fewest rotations `c` issues on a `batch × C_in × side × side` input at any block size
/// its stride divides (AAC folds, BSGS), with the layouts.
fn best_block(c: &Conv2d, batch: usize, side: usize) -> Result<BestBlock, BenchError> {
    let grid = side.next_power_of_two();
    let mut best: Option<BestBlock> = None;
    let mut s = c.stride;
    while s <= grid {
        let layout = FragmentLayout::new(batch, c.in_channels, side, side, None, s, SLOTS)
            .and_then(|l| l.with_fold(l.compact_fold()));
        if let Ok(l) = layout {
            let out = out_of(c, &l, true)?;
            let rot = c
                .plan_to(&l, out)
                .map_err(core("a layer plan"))?
                .rebalanced()
                .counts()
                .total();
            if best.as_ref().is_none_or(|b| rot < b.rotations) {
                best = Some(BestBlock {
                    rotations: rot,
                    input: l,
                    output: out,
                });
            }
        }
        s *= 2;
    }
    best.ok_or(BenchError::InvalidOption {
        option: "--table-v",
        value: format!("{}x{} at {side}", c.kernel, c.kernel),
        expected: "a layer with an admissible block size",
    })
}

/// [`TableVRow::envelope`] for `net` at `batch`: the linear layers each at their best block
/// size, the fully connected layer at its best input block size. For a chain (no residual
/// block) also the re-blocks ([`Relayout`], rebalanced) that this path needs between layers
/// whose layouts differ.
fn envelope(net: &Net, batch: usize) -> Result<(u64, Option<Reblocks>), BenchError> {
    let mut total = 0;
    let chain = !net.nodes.iter().any(|n| matches!(n, Node::Residual { .. }));
    let mut moves = Reblocks::default();
    let mut prev: Option<FragmentLayout> = None;
    let (side, ch, fc) = walk(net, |c, side| {
        let b = best_block(c, batch, side)?;
        total += b.rotations;
        if chain {
            if let Some(p) = prev.filter(|p| *p != b.input) {
                let r = Relayout::plan(&p, &b.input)
                    .map_err(core("a re-block"))?
                    .rebalanced()
                    .counts();
                moves.count += 1;
                moves.rotations += r.total();
                moves.products += r.pt_mults;
            }
            prev = Some(b.output);
        }
        Ok(())
    })?;
    if let Some(l) = fc {
        let mut best: Option<u64> = None;
        let mut s = 1;
        while s <= side.next_power_of_two() {
            let layout = FragmentLayout::new(batch, ch, side, side, None, s, SLOTS)
                .and_then(|t| t.with_fold(t.compact_fold()));
            if let Ok(t) = layout {
                let rot = l
                    .plan(&FeatureMap::flatten(&t))
                    .map_err(core("a fully connected plan"))?
                    .rebalanced()
                    .counts()
                    .total();
                best = Some(best.map_or(rot, |b| b.min(rot)));
            }
            s *= 2;
        }
        total += best.unwrap_or(0);
    }
    Ok((total, chain.then_some(moves)))
}

/// `conv3`, `pool4`, `dw5`: a layer's kind and place.
fn layer_name(c: &Conv2d, i: usize) -> String {
    let kind = if is_pool(c) {
        "pool"
    } else if c.depthwise {
        "dw"
    } else {
        "conv"
    };
    format!("{kind}{}", i + 1)
}

/// Runs the compiled network on `cts` (any executor; the table runs it on [`SymExec`]).
fn run_net<E: Exec>(
    ex: &E,
    net: &Net,
    plans: &[NodePlan],
    mut cts: Vec<E::Ct>,
) -> Result<Vec<E::Ct>, BenchError> {
    let q = Quadratic::new(QUAD.0, QUAD.1, QUAD.2).map_err(core("the activation"))?;
    let mut affine: Option<InputAffine> = None;
    for (node, plan) in net.nodes.iter().zip(plans) {
        match (node, plan) {
            (Node::Conv { conv, act }, NodePlan::Conv(p)) => {
                cts = conv
                    .run(ex, p, &cts, affine.as_ref())
                    .map_err(core("a layer"))?;
                affine = None;
                if *act {
                    cts = q.run(ex, cts).map_err(core("an activation"))?;
                    affine = Some(q.affine(conv.out_channels));
                }
            }
            (
                Node::Residual { body, shortcut },
                NodePlan::Residual {
                    body: bp,
                    shortcut: sp,
                    affine: ap,
                },
            ) => {
                let side = match (shortcut, sp, ap) {
                    (Some(c), Some(p), _) => c.run(ex, p, &cts, affine.as_ref()),
                    (None, None, Some(b)) => b.0.run(ex, &b.1, &cts, affine.as_ref()),
                    (None, None, None) => Ok(cts.iter().map(|c| ex.clone_ct(c)).collect()),
                    _ => Err(veil_core::Error::InvalidParameters(
                        "table V: a residual plan does not match its block",
                    )),
                }
                .map_err(core("a shortcut"))?;
                let mut y = cts;
                for ((c, act), p) in body.iter().zip(bp) {
                    y = c.run(ex, p, &y, affine.as_ref()).map_err(core("a layer"))?;
                    affine = None;
                    if *act {
                        y = q.run(ex, y).map_err(core("an activation"))?;
                        affine = Some(q.affine(c.out_channels));
                    }
                }
                for (a, mut b) in y.iter_mut().zip(side) {
                    let level = ex.level(a);
                    ex.drop_to(&mut b, level)
                        .map_err(core("the shortcut's level"))?;
                    ex.add_assign(a, &b).map_err(core("the residual sum"))?;
                }
                let c = body.last().map_or(0, |(c, _)| c.out_channels);
                cts = q.run(ex, y).map_err(core("an activation"))?;
                affine = Some(q.affine(c));
            }
            (Node::Fc(l), NodePlan::Fc(p)) => {
                let a = affine.take().map(|_| q.affine(l.inputs));
                cts = l.run(ex, p, &cts, a.as_ref()).map_err(core("a layer"))?;
            }
            _ => {
                return Err(BenchError::InvalidOption {
                    option: "--table-v",
                    value: net.name.into(),
                    expected: "a plan compiled for this network",
                })
            }
        }
    }
    Ok(cts)
}

/// One dry run: the row for `net` at `batch` and `block`.
fn dry(
    net: &Net,
    batch: usize,
    block: usize,
    aac: bool,
    bsgs: bool,
) -> Result<TableVRow, BenchError> {
    let (l0, plans, layers) = compile(net, batch, block, aac, bsgs)?;
    let sym = SymExec::new(SLOTS);
    let xs = (0..l0.ciphertexts()).map(|_| sym.fresh(LEVELS)).collect();
    run_net(&sym, net, &plans, xs)?;
    let util: Vec<f64> = layers.iter().map(|t| t.utilization).collect();
    let (mut linear, mut acts) = (0, 0);
    for n in &net.nodes {
        match n {
            Node::Conv { act, .. } => {
                linear += 1;
                acts += *act as usize;
            }
            Node::Residual { body, shortcut } => {
                linear += body.len() + shortcut.is_some() as usize;
                acts += body.iter().filter(|(_, a)| *a).count() + 1;
            }
            Node::Fc(_) => linear += 1,
        }
    }
    let p = paper(net.name, batch > 1)[aac as usize];
    let floor = network_floor(net, batch)?;
    let env = if aac && bsgs {
        Some(envelope(net, batch)?)
    } else {
        None
    };
    Ok(TableVRow {
        network: net.name.into(),
        batch,
        aac,
        bsgs,
        block,
        ops: sym.counts(),
        cts_in: l0.ciphertexts(),
        cts_peak: layers.iter().map(|t| t.cts_out).max().unwrap_or(0),
        utilization: util.iter().sum::<f64>() / util.len().max(1) as f64,
        utilization_min: util.iter().copied().fold(1.0, f64::min),
        linear_layers: linear,
        activations: acts,
        paper: p,
        floor_rotations: floor.rotations,
        floor_products: floor.products,
        envelope: env.map(|e| e.0),
        reblocks: env.and_then(|e| e.1),
        layers,
    })
}

/// Runs the table: each network at batch 1 and at its largest batch, the block size chosen
/// by the dry run among the two smallest sizes every stride divides.
pub fn table_v() -> Result<TableV, BenchError> {
    let mut rows = Vec::new();
    for net in [squeezenet()?, resnet18()?, mobilenet()?] {
        let grid = net.side.next_power_of_two();
        let first = total_stride(&net);
        for batch in [1, net.max_batch] {
            for (aac, bsgs) in [(false, false), (true, false), (true, true)] {
                let mut best: Option<TableVRow> = None;
                let mut s = first;
                while s <= (2 * first).min(grid / 2) {
                    let r = dry(&net, batch, s, aac, bsgs)?;
                    eprintln!(
                        "{} batch {batch}{}{} S={s}: {} rotations, {} key switches",
                        net.name,
                        if aac { " AAC" } else { "" },
                        if bsgs { " BSGS" } else { "" },
                        r.ops.rotations,
                        r.ops.key_switches()
                    );
                    if best
                        .as_ref()
                        .is_none_or(|b| r.ops.key_switches() < b.ops.key_switches())
                    {
                        best = Some(r);
                    }
                    s *= 2;
                }
                rows.extend(best);
            }
        }
    }
    Ok(TableV { slots: SLOTS, rows })
}

/// A text rendering.
pub fn render(t: &TableV) -> String {
    let mut s = format!(
        "FEnc2 Table V: whole networks at n = {} slots (N = 2^16), dry-run counts for the batch (per image in brackets) beside the paper's FEnc2-F (no AAC) / FEnc2 (AAC) column; `per-layer S`: every layer at its own best block size, re-blocking not counted; `floor`: the fewest rotations any layout in FEnc2's two-stage form at full slot utilization can issue for the convolutions and fc (pooling left out)\n\n",
        t.slots
    );
    s += &format!(
        "{:<11} {:>5} {:>7} {:>3} {:>16} {:>14} {:>14} {:>16} {:>12} {:>9} {:>11} {:>9} | {:>6} {:>6} {:>4} {:>5}\n",
        "network",
        "batch",
        "variant",
        "S",
        "rotations",
        "per-layer S",
        "floor",
        "key switches",
        "pt products",
        "cts in",
        "cts peak",
        "util",
        "p.rot",
        "p.KS",
        "p.ct",
        "p.ut"
    );
    for r in &t.rows {
        let per = |v: u64| format!("{v} ({:.0})", v as f64 / r.batch as f64);
        s += &format!(
            "{:<11} {:>5} {:>7} {:>3} {:>16} {:>14} {:>14} {:>16} {:>12} {:>9} {:>11} {:>8.1}% | {:>6} {:>6} {:>4} {:>4.0}%\n",
            r.network,
            r.batch,
            match (r.aac, r.bsgs) {
                (false, false) => "F",
                (true, false) => "AAC",
                (false, true) => "BSGS",
                (true, true) => "A+B",
            },
            r.block,
            per(r.ops.rotations),
            r.envelope.map_or("-".into(), per),
            per(r.floor_rotations),
            per(r.ops.key_switches()),
            r.ops.pt_mults + r.ops.const_mults,
            r.cts_in,
            r.cts_peak,
            100.0 * r.utilization,
            r.paper.0,
            r.paper.1,
            r.paper.2,
            r.paper.3
        );
    }
    for r in &t.rows {
        if let (Some(m), Some(e)) = (r.reblocks, r.envelope) {
            s += &format!(
                "\n{} batch {}: per-layer block sizes ({e} rotations) need {} re-blocks between layers, costing {} rotations and {} mask products more (one level each)",
                r.network, r.batch, m.count, m.rotations, m.products
            );
        }
    }
    s + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through the graph executor, the dry run issues exactly the rotations and products the
    /// layers compiled; BSGS keeps every product and cuts rotations; AAC cuts ciphertexts.
    #[test]
    fn the_dry_run_issues_the_compiled_counts() {
        for net in [
            squeezenet().unwrap(),
            resnet18().unwrap(),
            mobilenet().unwrap(),
        ] {
            let s = total_stride(&net);
            let mut rows = Vec::new();
            for (aac, bsgs) in [(false, false), (true, false), (true, true)] {
                let r = dry(&net, 1, s, aac, bsgs).unwrap();
                let inner: u64 = r.layers.iter().map(|l| l.inner + l.outer).sum();
                let prods: u64 = r.layers.iter().map(|l| l.products).sum();
                assert_eq!(r.ops.rotations, inner, "{} {aac} {bsgs}", net.name);
                assert_eq!(
                    r.ops.pt_mults + r.ops.const_mults,
                    prods,
                    "{} {aac} {bsgs}",
                    net.name
                );
                // One relinearization per activated ciphertext.
                assert!(r.ops.relins > 0 && r.activations > 0);
                // No layer beats the two-stage form's floor at its own ciphertexts.
                for l in &r.layers {
                    assert!(
                        l.inner + l.outer >= l.floor,
                        "{} {}: {} + {} under the floor {}",
                        net.name,
                        l.name,
                        l.inner,
                        l.outer,
                        l.floor
                    );
                }
                // The per-layer envelope has the network's own layouts among its choices (for
                // these networks each grid is the next power of two of its side, as
                // `best_block` builds them).
                if let Some(e) = r.envelope {
                    assert!(e <= r.ops.rotations, "{}: envelope {e}", net.name);
                }
                rows.push(r);
            }
            assert!(rows[1].cts_in < rows[0].cts_in, "{}: AAC", net.name);
            assert_eq!(rows[1].ops.pt_mults, rows[2].ops.pt_mults, "{}", net.name);
            assert!(
                rows[2].ops.rotations * 2 < rows[1].ops.rotations,
                "{}: BSGS {} against {}",
                net.name,
                rows[2].ops.rotations,
                rows[1].ops.rotations
            );
        }
    }
}
