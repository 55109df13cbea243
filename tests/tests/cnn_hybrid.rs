//! The hybrid CNN mode (issue 11): linear layers under real CKKS at the server, exact ReLU in real
//! two-party MPC, joined by the complex conversion. Insecure `N = 2^10` parameters for speed;
//! logits checked against the `f64` reference with a stated bound, both parties' step lists and
//! counts checked against each other and against the plan.

mod mpc_common;

use mpc_common::*;
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_core::cnn::hybrid::{client_run, dry_counts, server_run, HybridPlan, MPC_CONFIG};
use veil_core::cnn::{Conv2d, Layer, Linear, Network, Quadratic, StepCost};
use veil_core::hybrid::ServerKeys;
use veil_core::params;
use veil_host::mpc::drive;
use veil_tests::fixtures::rand_vec;
use veil_tests::*;

/// A narrow LeNet with ReLU: conv 1→4 (5×5, stride 2), ReLU, conv 4→6, ReLU, flatten, fc 294→16,
/// ReLU, fc 16→10 on 28 × 28 inputs.
fn relu_lenet(rng: &mut impl rand_core::RngCore) -> Network {
    relu_lenet_hidden(rng, 16)
}

/// [`relu_lenet`] with `hidden` units in fc1.
fn relu_lenet_hidden(rng: &mut impl rand_core::RngCore, hidden: usize) -> Network {
    let mut conv = |ci: usize, co: usize| {
        let w = rand_vec(rng, co * ci * 25, 1.5 / (ci as f64 * 25.0).sqrt());
        Conv2d::new(ci, co, 5, 2, 2, w, rand_vec(rng, co, 0.2)).unwrap()
    };
    let (c1, c2) = (conv(1, 4), conv(4, 6));
    Network {
        name: "lenet-relu-narrow".into(),
        channels: 1,
        side: 28,
        layers: vec![
            Layer::Conv(c1),
            Layer::Relu,
            Layer::Conv(c2),
            Layer::Relu,
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    294,
                    hidden,
                    rand_vec(rng, 294 * hidden, 0.15),
                    rand_vec(rng, hidden, 0.2),
                )
                .unwrap(),
            ),
            Layer::Relu,
            Layer::Linear(
                Linear::new(
                    hidden,
                    10,
                    rand_vec(rng, hidden * 10, 0.5),
                    rand_vec(rng, 10, 0.1),
                )
                .unwrap(),
            ),
        ],
    }
}

struct Outcome {
    logits: Vec<f64>,
    client: Vec<StepCost>,
    server: Vec<StepCost>,
}

type Side<T> = Result<T, String>;

/// Runs one batch of `x` through the hybrid protocol over the in-memory duplex, with `tweak`
/// applied to both parties' plans; returns each side's result.
#[allow(clippy::type_complexity)]
fn exchange(
    net: &Network,
    batch: usize,
    block: usize,
    x: &[f64],
    valid: usize,
    seed: u64,
    tweak: impl Fn(&mut HybridPlan),
) -> (
    HybridPlan,
    Side<(Vec<f64>, Vec<StepCost>)>,
    Side<Vec<StepCost>>,
) {
    let p = params::insecure_logn10().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let arch = net.public_architecture();
    let mut plan = HybridPlan::new(&p, &arch, batch, block).unwrap();
    let mut server_plan = HybridPlan::new(&p, net, batch, block).unwrap();
    assert_eq!(
        plan.net, server_plan.net,
        "the plan depends on the architecture only"
    );
    assert_eq!(plan.fingerprint(), server_plan.fingerprint());
    tweak(&mut plan);
    tweak(&mut server_plan);
    let mut rng = test_rng(seed);
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).unwrap();
    let (_, rotations) = dry_counts(&plan, &arch).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, &rotations, false, &mut rng, |_, _| {})
        .unwrap();
    let (c, s) = run_mem(
        MPC_CONFIG,
        |pp, t| {
            let mut steps = Vec::new();
            let mut prog = |c: &StepCost| steps.push(c.clone());
            drive(
                pp.channel(),
                client_run(pp, &ck, &sk, &plan, &arch, x, valid, &mut prog),
                t,
            )
            .map(|l| (l, steps))
            .map_err(|e| e.to_string())
        },
        |pp, t| {
            let mut steps = Vec::new();
            let mut prog = |c: &StepCost| steps.push(c.clone());
            drive(
                pp.channel(),
                server_run(
                    pp,
                    ServerKeys {
                        ck: &ck,
                        pk: &pk,
                        keys: &keys,
                    },
                    &server_plan,
                    net,
                    valid,
                    &mut prog,
                ),
                t,
            )
            .map(|_| steps)
            .map_err(|e| e.to_string())
        },
    );
    (plan, c, s)
}

/// [`exchange`] that must succeed, with the checks every run shares.
fn run_hybrid(
    net: &Network,
    batch: usize,
    block: usize,
    x: &[f64],
    valid: usize,
    seed: u64,
) -> Outcome {
    run_hybrid_with(net, batch, block, x, valid, seed, |_| {})
}

fn run_hybrid_with(
    net: &Network,
    batch: usize,
    block: usize,
    x: &[f64],
    valid: usize,
    seed: u64,
    tweak: impl Fn(&mut HybridPlan),
) -> Outcome {
    let (plan, c, s) = exchange(net, batch, block, x, valid, seed, tweak);
    let (logits, client) = c.unwrap();
    let server = s.unwrap();
    assert_eq!(
        logits.len(),
        valid * 10,
        "the logits of the valid images alone are opened"
    );
    // Both parties see the same steps; the client's dry run counts what the server did.
    let names = |s: &[StepCost]| s.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&client), names(&server));
    for (c, s) in client.iter().zip(&server) {
        assert_eq!(
            c.layer.as_ref().map(|l| l.ops),
            s.layer.as_ref().map(|l| l.ops),
            "{}",
            c.name
        );
        assert_eq!(c.tally.converted_cts, s.tally.converted_cts, "{}", c.name);
    }
    let (m2c, c2m) = plan.conversions();
    let conv: usize = server.iter().map(|c| c.tally.converted_cts).sum();
    assert_eq!(conv, m2c + c2m, "every planned conversion ran once");
    Outcome {
        logits,
        client,
        server,
    }
}

fn images(rng: &mut impl rand_core::RngCore, n: usize) -> Vec<f64> {
    rand_vec(rng, n * 28 * 28, 1.0)
        .into_iter()
        .map(|v| v.abs())
        .collect()
}

fn worst(got: &[f64], want: &[f64]) -> (f64, f64) {
    assert_eq!(got.len(), want.len());
    let w = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let amp = want.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    (w, amp)
}

/// Pixel-wise (the batch fills the 512 slots): no rotation, no Galois key; every ReLU exact.
#[test]
fn pixelwise_hybrid_lenet_matches_the_relu_reference() {
    let mut rng = test_rng(71);
    let net = relu_lenet(&mut rng);
    let x = images(&mut rng, 512);
    let out = run_hybrid(&net, 512, 28, &x, 512, 72);
    let want = net.reference(&x, 512).unwrap();
    let (w, amp) = worst(&out.logits, &want);
    for s in &out.server {
        println!(
            "  {:<12} ops {:?}  conv {} cts {} B  mpc {} B {} rounds",
            s.name,
            s.layer
                .as_ref()
                .map(|l| (l.ops.const_mults, l.ops.rotations)),
            s.tally.converted_cts,
            s.tally.converted_bytes,
            s.tally.mpc_bytes,
            s.tally.mpc_rounds
        );
    }
    println!("pixel-wise hybrid: worst |Δlogit| {w:.2e} (largest logit {amp:.2})");
    // Each boundary rounds to 2^-13 = 1.2e-4 (C2M local truncation: ≤ 2 ulp; M2C < 1/8 ulp),
    // the weights to 2^-21 of each layer's largest, and the layers sum up to 150 rounded
    // inputs: measured 3.1e-4, the bound leaves 16×.
    assert!(w < 5e-3, "worst {w}");
    assert!(amp > 0.2, "the logits are not trivially small");
    assert!(
        out.client
            .iter()
            .any(|s| s.name == "open" && s.tally.mpc_bytes > 0),
        "the logits are opened to the client"
    );
    let relus = out
        .server
        .iter()
        .filter(|s| s.name.starts_with("relu"))
        .count();
    assert_eq!(relus, 3);
}

/// The blocked layout (a batch of 2 in FEnc2's fragments, block 4): rotations and Galois keys,
/// same protocol.
#[test]
fn blocked_hybrid_lenet_matches_the_relu_reference() {
    let mut rng = test_rng(73);
    let net = relu_lenet(&mut rng);
    let x = images(&mut rng, 2);
    let out = run_hybrid(&net, 2, 4, &x, 2, 74);
    let want = net.reference(&x, 2).unwrap();
    let (w, amp) = worst(&out.logits, &want);
    let rot: u64 = out
        .server
        .iter()
        .filter_map(|s| s.layer.as_ref())
        .map(|l| l.ops.rotations)
        .sum();
    println!("blocked hybrid: {rot} rotations, worst |Δlogit| {w:.2e} (largest {amp:.2})");
    assert!(rot > 0);
    assert!(w < 5e-3, "worst {w}");
}

/// Misuse is a typed error: a polynomial activation in a hybrid plan, a batch that does not fit,
/// an input outside the conversion bound.
#[test]
fn hybrid_misuse_is_refused() {
    let p = params::insecure_logn10().validate().unwrap();
    let mut rng = test_rng(75);
    let mut net = relu_lenet(&mut rng);
    assert!(
        HybridPlan::new(&p, &net, 1024, 28).is_err(),
        "batch over the slots"
    );
    let x = images(&mut rng, 512);
    // No image, more images than the batch, an input beyond 2^LOG_BOUND, an empty frame: both
    // sides stop with an error (the other one on the closed link), nothing hangs.
    let mut big = x.clone();
    big[5] = 1e6;
    type Case<'a> = (&'a str, &'a [f64], usize, fn(&mut HybridPlan));
    let cases: [Case; 4] = [
        ("no valid image", &x, 0, |_| {}),
        ("more images than the batch", &x, 513, |_| {}),
        ("an input outside the M2C bound", &big, 512, |_| {}),
        ("an empty M2C frame", &x, 512, |p| p.m2c_chunk = 0),
    ];
    for (what, input, valid, tweak) in cases {
        let (_, c, s) = exchange(&net, 512, 28, input, valid, 79, tweak);
        let e = c.expect_err(what);
        println!("{what}: client {e}; server {:?}", s.as_ref().err());
        assert!(s.is_err(), "{what}: the server stops too");
    }
    net.layers[1] = Layer::Quad(Quadratic::new(0.1, 0.5, 0.0).unwrap());
    let e = HybridPlan::new(&p, &net, 512, 28).unwrap_err();
    assert!(e.to_string().contains("polynomial"), "{e}");
}

/// Conversions split over several frames (M2C 5 ciphertexts, complex C2M 3 pairs per frame), and
/// a boundary with an odd count (fc1 with 15 units: 7 pairs, then one real-only C2M).
#[test]
fn conversions_split_across_frames_and_an_odd_boundary() {
    let mut rng = test_rng(80);
    let net = relu_lenet_hidden(&mut rng, 15);
    let x = images(&mut rng, 512);
    let out = run_hybrid_with(&net, 512, 28, &x, 512, 81, |p| {
        p.m2c_chunk = 5;
        p.c2m_chunk = 3;
    });
    let want = net.reference(&x, 512).unwrap();
    let (w, amp) = worst(&out.logits, &want);
    println!("split frames: worst |Δlogit| {w:.2e} (largest {amp:.2})");
    assert!(w < 5e-3, "worst {w}");
    let c2m_fc1 = out.server.iter().find(|s| s.name == "c2m:fc1").unwrap();
    assert_eq!(c2m_fc1.tally.converted_cts, 8, "7 complex + 1 real-only");
}

/// Two parties whose plans differ (another block size) stop with a typed error before any key is
/// sent, on both sides.
#[test]
fn mismatched_plans_are_refused_before_the_keys() {
    use veil_host::cnn::{hybrid, VisionError};
    use veil_host::harness::{run_pair, Link};
    use veil_host::model::images::Images;
    let p = params::insecure_logn10().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(82);
    let net = relu_lenet(&mut rng);
    let arch = net.public_architecture();
    let imgs = Images {
        count: 2,
        channels: 1,
        height: 28,
        width: 28,
        pixels: vec![7; 2 * 784],
    };
    let opts = hybrid::HybridOptions { silent_ot: false };
    let cfg = veil_host::transport::TransportConfig {
        timeout: std::time::Duration::from_secs(20),
        ..Default::default()
    };
    let (c, s) = run_pair(
        Link::Memory,
        cfg,
        |t| hybrid::run_client(&ck, t, &arch, &imgs, 2, 4, &opts, &mut |_, _| {}),
        |t| hybrid::run_server(&ck, t, &net, 2, 8, 2, &opts, &mut |_, _| {}),
    )
    .unwrap();
    let (c, s) = (c.unwrap_err(), s.unwrap_err());
    println!("client: {c}\nserver: {s}");
    assert!(matches!(s, VisionError::PlanMismatch), "{s}");
    assert!(c.to_string().contains("plan"), "the client learns why: {c}");
}

/// [`LOG_BOUND`] holds for the built-in LeNet-ReLU: every boundary value (each ReLU's input and
/// the logits) of the first 2,000 MNIST test images stays below 2^6, 16× inside the bound.
#[test]
fn lenet_relu_boundaries_stay_in_bound() {
    use veil_core::cnn::hybrid::LOG_BOUND;
    use veil_host::model::{cnn, images};
    let net = cnn::load("lenet-relu").unwrap();
    let imgs = images::read_images("mnist-test").unwrap().take(2000);
    let x: Vec<f64> = (0..imgs.count).flat_map(|i| imgs.unit(i)).collect();
    use veil_core::cnn::reference;
    let mut t = x;
    let (mut h, batch) = (net.side, imgs.count);
    let mut maxima = Vec::new();
    for l in &net.layers {
        match l {
            Layer::Conv(c) => (t, h, _) = reference::conv2d(c, &t, batch, h, h, None),
            Layer::Linear(f) => t = reference::linear(f, &t, batch, None),
            Layer::Flatten => {}
            Layer::Relu => {
                maxima.push(t.iter().fold(0.0f64, |a, v| a.max(v.abs())));
                t.iter_mut().for_each(|v| *v = v.max(0.0));
            }
            Layer::Quad(_) => panic!("lenet-relu has no polynomial"),
        }
    }
    maxima.push(t.iter().fold(0.0f64, |a, v| a.max(v.abs())));
    println!("boundary maxima (ReLU inputs, logits): {maxima:.2?}");
    assert_eq!(maxima.len(), 4);
    for m in maxima {
        assert!(m < 64.0 && m < (1u64 << LOG_BOUND) as f64, "{m}");
    }
}

/// A partial pixel-wise batch (37 images in 512 slots): only the live slots go through ReLU
/// (the image count is public), and the live logits still match.
#[test]
fn partial_pixelwise_batch_runs_relu_on_live_slots_only() {
    let mut rng = test_rng(76);
    let net = relu_lenet(&mut rng);
    let live = 37;
    let mut x = images(&mut rng, 512);
    x[live * 784..].iter_mut().for_each(|v| *v = 0.0);
    let part = run_hybrid(&net, 512, 28, &x, live, 77);
    let want = net.reference(&x[..live * 784], live).unwrap();
    let (w, _) = worst(&part.logits, &want);
    println!("partial batch: worst |Δlogit| {w:.2e}");
    assert!(w < 5e-3, "worst {w}");
    let full = run_hybrid(&net, 512, 28, &x, 512, 78);
    let relu_bytes = |o: &Outcome| -> u64 {
        o.server
            .iter()
            .filter(|s| s.name.starts_with("relu"))
            .map(|s| s.tally.mpc_bytes)
            .sum()
    };
    let (bp, bf) = (relu_bytes(&part), relu_bytes(&full));
    println!("ReLU bytes: {live} live slots {bp}, all 512 {bf}");
    assert!(bp * 5 < bf, "{bp} vs {bf}");
}

/// The COT demand the hybrid mode preprocesses before each ReLU call is the engine's.
#[test]
fn relu_cot_demand_is_as_stated() {
    use veil_core::cnn::hybrid::RELU_COTS_P0;
    use veil_core::mpc::RingShares;
    for n in [1000usize, 4096] {
        let count = |p: &mut P, t: &mut veil_host::transport::MemTransport, v: u64| {
            let before = p.ot_counts();
            drive(p.channel(), p.relu(&RingShares::new(vec![v; n])), t).unwrap();
            let after = p.ot_counts();
            ((after.0 - before.0) as usize, (after.1 - before.1) as usize)
        };
        let (a, b) = run_mem(MPC_CONFIG, |p, t| count(p, t, 5), |p, t| count(p, t, 7));
        assert_eq!(a, (RELU_COTS_P0.0 * n, RELU_COTS_P0.1 * n));
        assert_eq!(b, (a.1, a.0));
    }
}
