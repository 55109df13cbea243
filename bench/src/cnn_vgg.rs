//! `veil-bench cnn --vgg5`: VGG5 for CIFAR-10 timed at its shape (FEnc2 Table IV: four
//! convolutions, four activations, one fully connected layer, `N = 2^15`, no bootstrapping).
//! No registry package ships CIFAR-10 weights for this shape, so the weights are random at a
//! trained net's scale (a count or a latency does not depend on them) and the result is checked
//! against the same network in `f64`.
//!
//! The shape: conv 3→64 (3 × 3), quadratic, 2 × 2 average pooling, conv 64→128, quadratic,
//! pooling, conv 128→256, quadratic, conv 256→256, quadratic, pooling, fc 4096→10. Each
//! average pooling is folded into the layer after it, exactly: pooling then a `K × K`
//! convolution with padding `p` is one `2K × 2K` convolution with stride 2 and padding `2p`
//! whose weights are the `K × K` ones spread over `2 × 2` cells and divided by 4, and pooling
//! then a fully connected layer is one over the unpooled map. That keeps the depth at 9 levels,
//! within `CKKS_128_LOGN15_LOGQP640`'s 10.
//!
//! Every batch is dry-run at block sizes 4 and 8, with and without baby-step giant-step over
//! the outer rotations; `--time` runs the cheapest plan of `--vgg5-batch` on real ciphertexts
//! (server side: keys made locally, no transport).

use crate::cnn_aac::{decrypt_real, encrypt_real, secret_context, weights, QUAD};
use crate::error::core;
use crate::BenchError;
use serde::Serialize;
use veil_core::circuits::{CkksExec, Exec, OpCounts, SymExec};
use veil_core::cnn::{Conv2d, Layer, Linear, Network, PlanOptions, Quadratic};

/// One VGG5 point.
#[derive(Clone, Debug, Serialize)]
pub struct VggPoint {
    /// Images per batch.
    pub batch: usize,
    /// The input block size.
    pub block: usize,
    /// Baby-step giant-step over the outer rotations.
    pub bsgs: bool,
    /// Levels used.
    pub depth: usize,
    /// The dry run's counts for the batch.
    pub ops: OpCounts,
    /// Galois keys the plan needs.
    pub galois_keys: usize,
    /// Input ciphertexts.
    pub cts_in: usize,
    /// `--time`: the server's evaluation, seconds for the batch.
    pub seconds: Option<f64>,
    /// `--time`: worst absolute logit error against `f64`.
    pub worst_error: Option<f64>,
    /// `--time`: the largest |logit| (the error's scale).
    pub logit_scale: Option<f64>,
    /// `--time`: peak resident memory of the process, bytes.
    pub peak_rss: Option<u64>,
}

/// A `K × K` layer followed by nothing, preceded by a `2 × 2` average pooling: the fused
/// `2K × 2K`, stride-2 layer.
fn pooled_conv(ci: usize, co: usize, k: usize, p: usize, seed: u64) -> Result<Conv2d, BenchError> {
    let w = weights(co * ci * k * k, seed, 1.0 / ((ci * k * k) as f64).sqrt());
    let k2 = 2 * k;
    let mut f = vec![0.0; co * ci * k2 * k2];
    for o in 0..co {
        for c in 0..ci {
            for di in 0..k2 {
                for dj in 0..k2 {
                    f[((o * ci + c) * k2 + di) * k2 + dj] =
                        w[((o * ci + c) * k + di / 2) * k + dj / 2] / 4.0;
                }
            }
        }
    }
    Conv2d::new(ci, co, k2, 2, 2 * p, f, weights(co, seed + 1, 0.1)).map_err(core("a VGG5 layer"))
}

/// A `2 × 2` average pooling of `c × side × side` followed by a fully connected layer to
/// `outputs`: one layer over the unpooled map, each pooled weight spread over its `2 × 2` cell
/// and divided by 4.
fn pooled_linear(c: usize, side: usize, outputs: usize, seed: u64) -> Result<Linear, BenchError> {
    let h = side / 2;
    let n = c * h * h;
    let pooled = weights(outputs * n, seed, 1.0 / (n as f64).sqrt());
    let mut fw = vec![0.0; outputs * c * side * side];
    for o in 0..outputs {
        for ch in 0..c {
            for y in 0..side {
                for x in 0..side {
                    fw[((o * c + ch) * side + y) * side + x] =
                        pooled[((o * c + ch) * h + y / 2) * h + x / 2] / 4.0;
                }
            }
        }
    }
    Linear::new(
        c * side * side,
        outputs,
        fw,
        weights(outputs, seed + 1, 0.1),
    )
    .map_err(core("a pooled fully connected layer"))
}

/// VGG5 at its shape, the poolings folded (module doc).
pub fn vgg5_shape() -> Result<Network, BenchError> {
    let q = || Quadratic::new(QUAD.0, QUAD.1, QUAD.2).map(Layer::Quad);
    let conv = |ci: usize, co: usize, seed: u64| {
        crate::cnn_aac::conv_strided(ci, co, 3, 1, 1, seed).map(Layer::Conv)
    };
    let fc = pooled_linear(256, 8, 10, 70)?;
    let layers = vec![
        conv(3, 64, 40)?,
        q().map_err(core("an activation"))?,
        Layer::Conv(pooled_conv(64, 128, 3, 1, 50)?),
        q().map_err(core("an activation"))?,
        Layer::Conv(pooled_conv(128, 256, 3, 1, 60)?),
        q().map_err(core("an activation"))?,
        conv(256, 256, 65)?,
        q().map_err(core("an activation"))?,
        Layer::Flatten,
        Layer::Linear(fc),
    ];
    let net = Network {
        name: "VGG5 (shape)".into(),
        channels: 3,
        side: 32,
        layers,
    };
    net.validate().map_err(core("VGG5"))?;
    Ok(net)
}

fn dry(net: &Network, batch: usize, block: usize, bsgs: bool, slots: usize) -> Option<VggPoint> {
    let opts = PlanOptions {
        bsgs,
        ..PlanOptions::default()
    };
    let d = net.dry_run_with(batch, block, slots, opts).ok()?;
    Some(VggPoint {
        batch,
        block,
        bsgs,
        depth: d.plan.depth,
        ops: d.counts,
        galois_keys: d.rotations.len(),
        cts_in: d.plan.input.ciphertexts(),
        seconds: None,
        worst_error: None,
        logit_scale: None,
        peak_rss: None,
    })
}

/// The dry runs at batches 16, 64 and 256 (the cheapest plan of each by
/// [`veil_core::cnn::cost_proxy`]), and with `time` the real run of batch `time_batch`.
pub fn vgg5(time: bool, time_batch: usize, threads: usize) -> Result<Vec<VggPoint>, BenchError> {
    let net = vgg5_shape()?;
    let params = veil_core::cnn::batch_params(16)
        .validate()
        .map_err(core("the parameter set"))?;
    let slots = params.n() / 2;
    let mut out = Vec::new();
    let mut batches = vec![16, 64, 256];
    if !batches.contains(&time_batch) {
        batches.push(time_batch);
    }
    for &batch in &batches {
        let mut best: Option<VggPoint> = None;
        for block in [4, 8] {
            for bsgs in [false, true] {
                if let Some(p) = dry(&net, batch, block, bsgs, slots) {
                    eprintln!(
                        "VGG5 batch {batch} S={block}{}: {} rotations, {} products, {} Galois keys",
                        if bsgs { " BSGS" } else { "" },
                        p.ops.rotations,
                        p.ops.pt_mults + p.ops.const_mults,
                        p.galois_keys
                    );
                    let cost = veil_core::cnn::cost_proxy(&p.ops);
                    if best
                        .as_ref()
                        .is_none_or(|b| cost < veil_core::cnn::cost_proxy(&b.ops))
                    {
                        best = Some(p);
                    }
                }
            }
        }
        let Some(mut p) = best else {
            return Err(BenchError::InvalidOption {
                option: "--vgg5",
                value: batch.to_string(),
                expected: "a batch VGG5 plans at block 4 or 8",
            });
        };
        if time && batch == time_batch {
            timed(&net, &params, threads, &mut p)?;
        }
        out.push(p);
    }
    Ok(out)
}

/// Runs `p`'s plan on real ciphertexts: seconds, worst error and peak memory.
fn timed(
    net: &Network,
    params: &veil_core::params::CkksParams,
    threads: usize,
    p: &mut VggPoint,
) -> Result<(), BenchError> {
    let slots = params.n() / 2;
    let (ck, sk, mut rng) = secret_context(params, threads)?;
    let opts = PlanOptions {
        bsgs: p.bsgs,
        ..PlanOptions::default()
    };
    let plan = net
        .plan_with(p.batch, p.block, slots, opts)
        .map_err(core("VGG5's plan"))?;
    let sym = SymExec::new(slots);
    let xs = (0..plan.input.ciphertexts())
        .map(|_| sym.fresh(plan.depth))
        .collect();
    net.run(&sym, &plan, xs, |_| {})
        .map_err(core("VGG5's dry run"))?;
    eprintln!("VGG5: {} Galois keys", sym.rotations_used().len());
    let keys = ck
        .gen_evaluation_keys(&sk, &sym.rotations_used(), false, &mut rng, |_, _| {})
        .map_err(core("the evaluation keys"))?;
    // Images in [0, 1], as a CIFAR-10 batch scaled by 1/255.
    let x: Vec<f64> = weights(plan.input.len(), 77, 0.5)
        .iter()
        .map(|v| v + 0.5)
        .collect();
    let packed = plan.input.pack(&x).map_err(core("packing"))?;
    let cts = encrypt_real(&ck, &sk, &packed, slots, plan.depth, &mut rng)?;
    veil_host::cnn::reset_peak_rss();
    // One pass: each diagonal is used once, so none is cached.
    let ex = CkksExec::new(&ck, &keys, slots).with_cache_budget(0);
    let t0 = std::time::Instant::now();
    let y = net
        .run(&ex, &plan, cts, |c| eprintln!("  {} done", c.name))
        .map_err(core("VGG5 on ciphertexts"))?;
    let secs = t0.elapsed().as_secs_f64();
    let dec = decrypt_real(&ck, &sk, &y)?;
    let got = plan.output.unpack(&dec).map_err(core("unpacking"))?;
    let want = net.reference(&x, p.batch).map_err(core("the reference"))?;
    p.worst_error = Some(crate::max_abs_diff(&got, &want));
    p.logit_scale = Some(want.iter().map(|v| v.abs()).fold(0.0, f64::max));
    p.seconds = Some(secs);
    p.peak_rss = veil_host::cnn::peak_rss_bytes();
    let _ = ex.counts();
    Ok(())
}

/// A text rendering.
pub fn render(pts: &[VggPoint]) -> String {
    let mut s = String::from(
        "VGG5 at its shape on CIFAR-10 inputs (N = 2^15, CKKS_128_LOGN15_LOGQP640, poolings folded): the cheapest plan per batch\n\n",
    );
    s += &format!(
        "{:>5} {:>2} {:>5} {:>5} {:>9} {:>11} {:>6} {:>6} {:>10} {:>9} {:>10} {:>9}\n",
        "batch",
        "S",
        "BSGS",
        "depth",
        "rotations",
        "products",
        "relin",
        "keys",
        "seconds",
        "s/image",
        "worst Δ",
        "peak GB"
    );
    for p in pts {
        s += &format!(
            "{:>5} {:>2} {:>5} {:>5} {:>9} {:>11} {:>6} {:>6} {:>10} {:>9} {:>10} {:>9}\n",
            p.batch,
            p.block,
            if p.bsgs { "yes" } else { "no" },
            p.depth,
            p.ops.rotations,
            p.ops.pt_mults + p.ops.const_mults,
            p.ops.relins,
            p.galois_keys,
            p.seconds.map_or("-".into(), |v| format!("{v:.1}")),
            p.seconds
                .map_or("-".into(), |v| format!("{:.2}", v / p.batch as f64)),
            p.worst_error.map_or("-".into(), |v| format!("{v:.1e}")),
            p.peak_rss
                .map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e9)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use veil_core::cnn::reference;

    fn close(a: &[f64], b: &[f64]) -> f64 {
        assert_eq!(a.len(), b.len());
        crate::max_abs_diff(a, b)
    }

    /// Folding a pooling into the next layer is exact: pooling then the layer equals the
    /// folded layer on the same input.
    #[test]
    fn folded_poolings_equal_pooling_then_the_layer() {
        let (bs, ci, co, side) = (2, 3, 4, 8);
        let x = weights(bs * ci * side * side, 5, 1.0);
        let pool = Conv2d::avg_pool(ci, 2).unwrap();
        let (p, h, w) = reference::conv2d(&pool, &x, bs, side, side, None);
        let conv = crate::cnn_aac::conv_strided(ci, co, 3, 1, 1, 9).unwrap();
        let (want, _, _) = reference::conv2d(&conv, &p, bs, h, w, None);
        let fused = pooled_conv(ci, co, 3, 1, 9).unwrap();
        let (got, gh, gw) = reference::conv2d(&fused, &x, bs, side, side, None);
        assert_eq!((gh, gw), (h, w));
        assert!(close(&got, &want) < 1e-12);

        let fc = pooled_linear(ci, side, 5, 11).unwrap();
        let n = ci * h * w;
        let small = Linear::new(
            n,
            5,
            weights(5 * n, 11, 1.0 / (n as f64).sqrt()),
            weights(5, 12, 0.1),
        )
        .unwrap();
        let want = reference::linear(&small, &p, bs, None);
        let got = reference::linear(&fc, &x, bs, None);
        assert!(close(&got, &want) < 1e-12);
        // The whole shape plans at depth 9 within the 10 levels of its parameter set.
        let net = vgg5_shape().unwrap();
        let plan = net.plan(16, 4, 1 << 14).unwrap();
        assert_eq!(plan.depth, 9);
    }
}
