//! FEnc2's CNN layers on real RNS-CKKS (CPU backend): a LeNet-shaped chain — convolution 5×5,
//! quadratic activation, average pooling, convolution 3×3 with stride 2, quadratic, two fully
//! connected layers — on a fragment-encoded batch, against the `f64` reference, with the error
//! bound asserted. The Galois keys come from a dry run of the same calls.

use std::sync::Arc;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::circuits::{CkksExec, Exec, SymExec};
use veil_core::ckks::{Ciphertext, Ckks, C64};
use veil_core::cnn::{reference, Conv2d, FeatureMap, InputAffine, Linear, Quadratic};
use veil_core::packing::fragment::FragmentLayout;
use veil_tests::fixtures::{cnn_test_params, rand_vec};
use veil_tests::*;

/// `x` packed in `l` and encrypted under `sk` at `level` (scale `Δ`), one ciphertext per slot
/// vector.
fn encrypt_layout(
    ck: &Ckks<CpuBackend>,
    sk: &veil_core::ckks::SecretKey,
    l: &FragmentLayout,
    x: &[f64],
    level: usize,
    rng: &mut rand_chacha::ChaCha20Rng,
) -> Vec<Ciphertext<CpuBackend>> {
    let scale = ck.params().default_scale();
    l.pack(x)
        .unwrap()
        .iter()
        .map(|v| {
            let v: Vec<C64> = v.iter().map(|&r| C64::real(r)).collect();
            let pt = ck.encode(&v, l.slots, level, scale).unwrap();
            ck.encrypt_sk(sk, &pt, rng).unwrap()
        })
        .collect()
}

/// The real parts of every slot of each ciphertext, decrypted under `sk`.
fn decrypt_all(
    ck: &Ckks<CpuBackend>,
    sk: &veil_core::ckks::SecretKey,
    cts: &[Ciphertext<CpuBackend>],
) -> Vec<Vec<f64>> {
    cts.iter()
        .map(|ct| {
            ck.decrypt_decode(sk, ct)
                .unwrap()
                .iter()
                .map(|z| z.re)
                .collect()
        })
        .collect()
}

struct Net {
    c1: Conv2d,
    pool: Conv2d,
    c2: Conv2d,
    f1: Linear,
    f2: Linear,
    q: Quadratic,
}

/// Runs the chain on any executor; `x` are the input ciphertexts in layout `l0`.
fn run_net<E: Exec>(
    ex: &E,
    net: &Net,
    l0: &FragmentLayout,
    x: Vec<E::Ct>,
) -> (Vec<E::Ct>, FeatureMap) {
    let p1 = net.c1.plan(l0).unwrap();
    let pp = net.pool.plan(&p1.output).unwrap();
    let p2 = net.c2.plan(&pp.output).unwrap();
    let fm = FeatureMap::flatten(&p2.output);
    let pf1 = net.f1.plan(&fm).unwrap();
    let pf2 = net.f2.plan(&pf1.output).unwrap();
    let q = &net.q;
    let per = |a: InputAffine, n: usize| InputAffine {
        scale: vec![a.scale[0]; n],
        shift: vec![a.shift[0]; n],
    };
    let y = net.c1.run(ex, &p1, &x, None).unwrap();
    let y = q.run(ex, y).unwrap();
    let y = net
        .pool
        .run(ex, &pp, &y, Some(&q.affine(pp.input.channels)))
        .unwrap();
    let y = net.c2.run(ex, &p2, &y, None).unwrap();
    let y = q.run(ex, y).unwrap();
    let y = net
        .f1
        .run(ex, &pf1, &y, Some(&per(q.affine(1), fm.len())))
        .unwrap();
    let y = q.run(ex, y).unwrap();
    let y = net
        .f2
        .run(ex, &pf2, &y, Some(&q.affine(net.f2.inputs)))
        .unwrap();
    (y, pf2.output)
}

#[test]
fn lenet_shaped_chain_on_ckks_matches_the_reference() {
    let p = cnn_test_params();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(21);
    let sk = ck.gen_secret_key(&mut rng);
    let (bs, side, slots) = (2usize, 12usize, 512usize);
    let net = Net {
        c1: Conv2d::new(
            1,
            3,
            5,
            1,
            2,
            rand_vec(&mut rng, 75, 0.4),
            rand_vec(&mut rng, 3, 0.2),
        )
        .unwrap(),
        pool: Conv2d::avg_pool(3, 2).unwrap(),
        c2: Conv2d::new(
            3,
            4,
            3,
            2,
            1,
            rand_vec(&mut rng, 108, 0.3),
            rand_vec(&mut rng, 4, 0.2),
        )
        .unwrap(),
        f1: Linear::new(
            36,
            6,
            rand_vec(&mut rng, 216, 0.3),
            rand_vec(&mut rng, 6, 0.2),
        )
        .unwrap(),
        f2: Linear::new(
            6,
            3,
            rand_vec(&mut rng, 18, 0.4),
            rand_vec(&mut rng, 3, 0.2),
        )
        .unwrap(),
        q: Quadratic::new(0.2, 0.5, 0.05).unwrap(),
    };
    let l0 = FragmentLayout::new(bs, 1, side, side, None, 4, slots).unwrap();
    let top = p.max_level();
    assert!(top >= 8, "the chain needs eight levels");

    // Dry run: levels, counts and the rotations the keys must cover.
    let sym = SymExec::new(slots);
    let sx: Vec<_> = (0..l0.ciphertexts()).map(|_| sym.fresh(top)).collect();
    let (sy, _) = run_net(&sym, &net, &l0, sx);
    let c = sym.counts();
    println!(
        "dry run: {} rotations, {} ptmults, {} ct×ct, output level {}",
        c.rotations, c.pt_mults, c.ct_mults, sy[0].level
    );
    let rots = sym.rotations_used();
    let keys = ck
        .gen_evaluation_keys(&sk, &rots, true, &mut rng, |_, _| {})
        .unwrap();

    let x = rand_vec(&mut rng, l0.len(), 1.0);
    let cts = encrypt_layout(&ck, &sk, &l0, &x, top, &mut rng);
    let ex = CkksExec::new(&ck, &keys, slots);
    let t = Instant::now();
    let (y, out) = run_net(&ex, &net, &l0, cts);
    println!("encrypted chain: {:.2?}", t.elapsed());
    assert_eq!(ex.counts().rotations, c.rotations, "real run = dry run");
    let dec = decrypt_all(&ck, &sk, &y);
    let got = out.unpack(&dec).unwrap();

    let q = net.q;
    let act = |v: Vec<f64>| v.into_iter().map(|t| q.eval(t)).collect::<Vec<_>>();
    let (t, h, w) = reference::conv2d(&net.c1, &x, bs, side, side, None);
    let (t, h, w) = reference::conv2d(&net.pool, &act(t), bs, h, w, None);
    let (t, _, _) = reference::conv2d(&net.c2, &t, bs, h, w, None);
    let t = reference::linear(&net.f1, &act(t), bs, None);
    let want = reference::linear(&net.f2, &act(t), bs, None);
    let (mut max, mut sum) = (0.0f64, 0.0);
    for (a, b) in got.iter().zip(&want) {
        max = max.max((a - b).abs());
        sum += (a - b).abs();
    }
    println!(
        "logits error: max {max:.3e}, mean {:.3e} over {} values",
        sum / want.len() as f64,
        want.len()
    );
    // Scale 2^40 over 40-bit primes, eight rescales: measured ≈ 4e-10; the bound leaves 250×.
    assert!(max < 1e-7, "max error {max}");
}

/// Orion's LeNet shape (two stride-2 5×5 convolutions, three quadratics, two FC layers) at
/// reduced width.
fn narrow_lenet(rng: &mut impl rand_core::RngCore) -> veil_core::cnn::Network {
    use veil_core::cnn::{Layer, Network};
    let mut conv = |ci: usize, co: usize| {
        let w = rand_vec(rng, co * ci * 25, 0.8 / (ci as f64 * 25.0).sqrt());
        Conv2d::new(ci, co, 5, 2, 2, w, rand_vec(rng, co, 0.1)).unwrap()
    };
    let (c1, c2) = (conv(1, 4), conv(4, 6));
    Network {
        name: "lenet-narrow".into(),
        channels: 1,
        side: 28,
        layers: vec![
            Layer::Conv(c1),
            Layer::Quad(Quadratic::new(0.3, 0.5, 0.05).unwrap()),
            Layer::Conv(c2),
            Layer::Quad(Quadratic::new(0.3, 0.5, 0.05).unwrap()),
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    294,
                    16,
                    rand_vec(rng, 294 * 16, 0.06),
                    rand_vec(rng, 16, 0.1),
                )
                .unwrap(),
            ),
            Layer::Quad(Quadratic::new(0.3, 0.5, 0.05).unwrap()),
            Layer::Linear(
                Linear::new(16, 10, rand_vec(rng, 160, 0.3), rand_vec(rng, 10, 0.1)).unwrap(),
            ),
        ],
    }
}

/// Runs `narrow_lenet` encrypted on a batch of `bs` random images and returns the logits'
/// largest error against the `f64` reference, with the dry run's counts.
fn lenet_on_ckks(bs: usize, seed: u64) -> (f64, veil_core::circuits::OpCounts) {
    let p = cnn_test_params();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(seed);
    let sk = ck.gen_secret_key(&mut rng);
    let net = narrow_lenet(&mut rng);
    let slots = 2048usize;
    let plan = net.plan(bs, 4, slots).unwrap();
    assert_eq!(plan.input.channels_per_ct(), 1, "large-batch mode");
    let top = p.max_level();
    let sym = SymExec::new(slots);
    let sx: Vec<_> = (0..plan.input.ciphertexts())
        .map(|_| sym.fresh(top))
        .collect();
    net.run(&sym, &plan, sx, |_| {}).unwrap();
    let c = sym.counts();
    println!(
        "batch {bs}, dry run: {} rotations, {} masks (ptmults), {} constant MACs, {} ct×ct",
        c.rotations, c.pt_mults, c.const_mults, c.ct_mults
    );
    let keys = ck
        .gen_evaluation_keys(&sk, &sym.rotations_used(), true, &mut rng, |_, _| {})
        .unwrap();
    let x: Vec<f64> = rand_vec(&mut rng, bs * 28 * 28, 1.0)
        .into_iter()
        .map(|v| v.abs())
        .collect();
    let cts = encrypt_layout(&ck, &sk, &plan.input, &x, top, &mut rng);
    let ex = CkksExec::new(&ck, &keys, slots);
    let t = Instant::now();
    let y = net
        .run(&ex, &plan, cts, |l| {
            println!(
                "  {:<8} cts {:>4} → {:>4}  rot {:>4}  ptmul {:>5}  const {:>6}",
                l.name, l.cts_in, l.cts_out, l.ops.rotations, l.ops.pt_mults, l.ops.const_mults
            )
        })
        .unwrap();
    println!("encrypted batch of {bs}: {:.2?}", t.elapsed());
    assert_eq!(ex.counts(), c, "the dry run counts what the real run does");
    let dec = decrypt_all(&ck, &sk, &y);
    let got = plan.output.unpack(&dec).unwrap();
    let want = net.reference(&x, bs).unwrap();
    let (mut max, mut sum, mut amp) = (0.0f64, 0.0, 0.0f64);
    for (a, b) in got.iter().zip(&want) {
        max = max.max((a - b).abs());
        sum += (a - b).abs();
        amp = amp.max(b.abs());
    }
    println!(
        "logits error: max {max:.3e}, mean {:.3e} over {} values (largest logit {amp:.2})",
        sum / want.len() as f64,
        want.len()
    );
    (max, c)
}

/// FEnc2's large-batch mode: 32 images fill each ciphertext with one channel, so the
/// convolutions take scalar weights on masked inputs (split scale, `Δ₁·Δ₂ = q`).
#[test]
fn large_batch_lenet_on_ckks_matches_the_reference() {
    let (max, _) = lenet_on_ckks(32, 22);
    // The split scale rounds the weights to 2^-18 and the masks carry ≈ √N·2^-23 of encoding
    // error: measured ≈ 1e-5; the bound leaves 20×.
    assert!(max < 2e-4, "max error {max}");
}

/// The batch filling the slots (2048 images): one pixel of one channel per ciphertext, every
/// layer a matrix of integer weights (`Ckks::mul_const_matrix`), no rotation and no Galois key.
#[test]
fn pixelwise_lenet_on_ckks_matches_the_reference() {
    let (max, c) = lenet_on_ckks(2048, 23);
    assert_eq!((c.rotations, c.pt_mults), (0, 0));
    // Weights rounded to 2^-21 of the layer's largest, and the CKKS noise at 40-bit scales:
    // the bound leaves ≥ 20× over the measured error.
    assert!(max < 1e-4, "max error {max}");
}

/// The two roles over TCP loopback (`veil_host::cnn`): the client plans the public
/// architecture and holds the secret key, the server holds the weights and the public keys; the
/// decrypted (sanitized) logits match the plaintext model's.
#[test]
fn client_and_server_over_tcp_agree_with_the_plaintext_model() {
    use veil_core::cnn::{Layer, Network};
    use veil_host::model::images::Images;
    let p = cnn_test_params();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(23);
    let conv = |rng: &mut _, ci: usize, co: usize| {
        let w = rand_vec(rng, co * ci * 25, 0.8 / (ci as f64 * 25.0).sqrt());
        Conv2d::new(ci, co, 5, 2, 2, w, rand_vec(rng, co, 0.1)).unwrap()
    };
    let net = Network {
        name: "lenet-narrow".into(),
        channels: 1,
        side: 28,
        layers: vec![
            Layer::Conv(conv(&mut rng, 1, 2)),
            Layer::Quad(Quadratic::new(0.3, 0.5, 0.05).unwrap()),
            Layer::Conv(conv(&mut rng, 2, 3)),
            Layer::Quad(Quadratic::new(0.3, 0.5, 0.05).unwrap()),
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    147,
                    10,
                    rand_vec(&mut rng, 1470, 0.1),
                    rand_vec(&mut rng, 10, 0.1),
                )
                .unwrap(),
            ),
        ],
    };
    // 40 images in batches of 32: the second batch is partly empty.
    let count = 40;
    let pixels: Vec<u8> = (0..count * 784).map(|i| ((i * 37) % 251) as u8).collect();
    let imgs = Images {
        count,
        channels: 1,
        height: 28,
        width: 28,
        pixels,
    };
    let run = veil_host::cnn::run_loopback(&ck, &net, &imgs, 32, None, |_, _| {}).unwrap();
    assert_eq!(run.client.logits.len(), count);
    assert_eq!(run.batches.len(), 2);
    let x: Vec<f64> = (0..count).flat_map(|i| imgs.unit(i)).collect();
    let want = net.reference(&x, count).unwrap();
    let worst = run
        .client
        .logits
        .iter()
        .flatten()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!(
        "loopback: block {}, {} Galois keys, worst |Δlogit| {worst:.2e}",
        run.block, run.client.galois_keys
    );
    // The evaluation's 2e-4 plus the output flood the server adds before sending (at most
    // `FLOOD_TOLERANCE = 2^-10` per logit at 8 standard deviations, `tests/cnn_sanitize.rs`).
    assert!(
        worst < 2e-4 + veil_host::cnn::FLOOD_TOLERANCE,
        "worst {worst}"
    );
    // A ReLU network is refused by the FHE-only plan with a typed error, not a panic.
    let mut relu = net.clone();
    relu.layers[1] = Layer::Relu;
    assert!(veil_host::cnn::run_loopback(&ck, &relu, &imgs, 32, Some(4), |_, _| {}).is_err());
}

/// FEnc2's Arch-aware Ct Compression on real CKKS: Fig. 5's bottleneck (8 → 2 → 2 → 8 channels)
/// with the reduced tensors compacted (four positions per ciphertext), against the `f64`
/// reference, at the same levels as without AAC and with fewer key switches.
#[test]
fn aac_bottleneck_on_ckks_matches_the_reference() {
    use veil_core::cnn::{Layer, LayerPlan, Network, PlanOptions};
    let p = cnn_test_params();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(91);
    let sk = ck.gen_secret_key(&mut rng);
    let mut conv = |ci: usize, co: usize, k: usize| {
        let w = rand_vec(
            &mut rng,
            co * ci * k * k,
            1.0 / ((ci * k * k) as f64).sqrt(),
        );
        Conv2d::new(ci, co, k, 1, k / 2, w, rand_vec(&mut rng, co, 0.1)).unwrap()
    };
    let (c1, c2, c3) = (conv(8, 2, 1), conv(2, 2, 3), conv(2, 8, 1));
    let net = Network {
        name: "bottleneck".into(),
        channels: 8,
        side: 8,
        layers: vec![
            Layer::Conv(c1),
            Layer::Quad(Quadratic::new(0.25, 0.5, 0.0).unwrap()),
            Layer::Conv(c2),
            Layer::Quad(Quadratic::new(0.25, 0.5, 0.0).unwrap()),
            Layer::Conv(c3),
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    512,
                    4,
                    rand_vec(&mut rng, 2048, 0.05),
                    rand_vec(&mut rng, 4, 0.1),
                )
                .unwrap(),
            ),
        ],
    };
    let slots = 2048usize;
    let x = rand_vec(&mut rng, 8 * 64, 1.0);
    let want = net.reference(&x, 1).unwrap();
    let mut key_switches = Vec::new();
    // FEnc2 without and with AAC, then AAC with baby-step giant-step over the outer
    // rotations (the diagonals rotated by the moved shift: checked on real ciphertexts here).
    for (aac, bsgs) in [(false, false), (true, false), (true, true)] {
        let opts = PlanOptions {
            aac,
            bsgs,
            ..PlanOptions::default()
        };
        let plan = net.plan_with(1, 2, slots, opts).unwrap();
        let first = match &plan.layers[0] {
            LayerPlan::Conv(c) => c.output,
            _ => unreachable!(),
        };
        assert_eq!(first.ciphertexts(), if aac { 1 } else { 4 });
        let top = plan.depth;
        let sym = SymExec::new(slots);
        let sx: Vec<_> = (0..plan.input.ciphertexts())
            .map(|_| sym.fresh(top))
            .collect();
        net.run(&sym, &plan, sx, |_| {}).unwrap();
        let keys = ck
            .gen_evaluation_keys(&sk, &sym.rotations_used(), true, &mut rng, |_, _| {})
            .unwrap();
        let cts = encrypt_layout(&ck, &sk, &plan.input, &x, top, &mut rng);
        let ex = CkksExec::new(&ck, &keys, slots);
        let y = net.run(&ex, &plan, cts, |_| {}).unwrap();
        assert_eq!(ex.counts(), sym.counts(), "the dry run counts the real run");
        assert_eq!(y[0].level(), 0, "AAC or not, the same levels");
        let dec = decrypt_all(&ck, &sk, &y);
        let got = plan.output.unpack(&dec).unwrap();
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let c = sym.counts();
        println!(
            "AAC {aac}, BSGS {bsgs}: worst error {worst:.2e}, {} rotations, {} products, {} relinearizations",
            c.rotations, c.pt_mults, c.relins
        );
        // 40-bit scales over five levels: measured about 1e-9; the bound leaves 1000×.
        assert!(worst < 1e-6, "worst {worst}");
        key_switches.push(c.rotations + c.relins);
        if bsgs {
            let moved = plan.layers.iter().any(|l| match l {
                LayerPlan::Conv(c) => c
                    .stages
                    .outputs
                    .iter()
                    .flatten()
                    .any(|g| g.terms.iter().any(|t| t.lo != 0)),
                _ => false,
            });
            assert!(
                moved,
                "BSGS moved no outer shift: the test would not exercise it"
            );
        }
    }
    assert!(key_switches[1] < key_switches[0], "{key_switches:?}");
    assert!(key_switches[2] < key_switches[1], "{key_switches:?}");
}

/// The second split of baby-step giant-step (`TwoStage::rebalance` moving a tap's high part
/// into a giant step, with a negative `lo`) on real ciphertexts: a depthwise `5 × 5` layer and
/// a global `8 × 8` average pooling, each rebalanced from `K² − 1` baby rotations to at most
/// `2(K − 1)`, still equal to the `f64` reference, and counted exactly by the dry run.
#[test]
fn depthwise_and_pooling_taps_split_into_two_stages_on_ckks() {
    let p = cnn_test_params();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(97);
    let sk = ck.gen_secret_key(&mut rng);
    let slots = 2048usize;
    let dw = Conv2d::depthwise(
        4,
        5,
        1,
        2,
        rand_vec(&mut rng, 4 * 25, 0.2),
        rand_vec(&mut rng, 4, 0.1),
    )
    .unwrap();
    let pool = Conv2d::avg_pool_with(4, 8, 1, 0).unwrap();
    for (layer, k) in [(&dw, 5u64), (&pool, 8)] {
        let l = FragmentLayout::new(1, 4, 8, 8, None, 1, slots).unwrap();
        let plain = layer.plan(&l).unwrap();
        let plan = plain.clone().rebalanced();
        let (a, b) = (plain.counts(), plan.counts());
        assert_eq!(a.pt_mults, b.pt_mults);
        assert!(
            b.total() <= 2 * (k - 1) && b.total() * 2 < a.total(),
            "k = {k}: {b:?} against {a:?}"
        );
        assert!(
            plan.stages
                .outputs
                .iter()
                .flatten()
                .any(|g| g.terms.iter().any(|t| t.lo < 0)),
            "k = {k}: no tap moved into a giant step"
        );
        let sym = SymExec::new(slots);
        let sx: Vec<_> = (0..l.ciphertexts()).map(|_| sym.fresh(2)).collect();
        layer.run(&sym, &plan, &sx, None).unwrap();
        assert_eq!(sym.counts().rotations, b.total());
        let keys = ck
            .gen_evaluation_keys(&sk, &sym.rotations_used(), false, &mut rng, |_, _| {})
            .unwrap();
        let x = rand_vec(&mut rng, l.len(), 1.0);
        let cts = encrypt_layout(&ck, &sk, &l, &x, 2, &mut rng);
        let ex = CkksExec::new(&ck, &keys, slots);
        let y = layer.run(&ex, &plan, &cts, None).unwrap();
        let dec = decrypt_all(&ck, &sk, &y);
        let got = plan.output.unpack(&dec).unwrap();
        let (want, _, _) = reference::conv2d(layer, &x, 1, 8, 8, None);
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!("k = {k}: {a:?} → {b:?}, worst error {worst:.2e}");
        // 40-bit scale, one level: measured about 1e-9; the bound leaves 1000×.
        assert!(worst < 1e-6, "k = {k}: worst {worst}");
    }
}

/// Re-blocking (`Relayout`, one level of 0/1 masks) on real ciphertexts: a tensor moved from
/// `S = 1` to `S = 4` with AAC's fold (by the compiled and the rebalanced plan, on one executor)
/// and back arrives equal to itself within CKKS's error, with the dry run counting the
/// rotations.
#[test]
fn relayouts_move_tensors_on_ckks() {
    use veil_core::cnn::Relayout;
    let p = cnn_test_params();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(101);
    let sk = ck.gen_secret_key(&mut rng);
    let slots = 2048usize;
    let a = FragmentLayout::new(2, 3, 8, 8, None, 1, slots).unwrap();
    let b = FragmentLayout::new(2, 3, 8, 8, None, 4, slots).unwrap();
    let b = b.with_fold(b.compact_fold()).unwrap();
    let plain = Relayout::plan(&a, &b).unwrap();
    let there = plain.clone().rebalanced();
    let back = Relayout::plan(&b, &a).unwrap().rebalanced();
    let sym = SymExec::new(slots);
    let sx: Vec<_> = (0..a.ciphertexts()).map(|_| sym.fresh(3)).collect();
    plain.run(&sym, &sx).unwrap();
    back.run(&sym, &there.run(&sym, &sx).unwrap()).unwrap();
    assert_eq!(
        sym.counts().rotations,
        plain.counts().total() + there.counts().total() + back.counts().total()
    );
    let keys = ck
        .gen_evaluation_keys(&sk, &sym.rotations_used(), false, &mut rng, |_, _| {})
        .unwrap();
    let x = rand_vec(&mut rng, a.len(), 1.0);
    let cts = encrypt_layout(&ck, &sk, &a, &x, 3, &mut rng);
    let ex = CkksExec::new(&ck, &keys, slots);
    // Both forms of the same move on one executor at one level: their masks are cached under
    // keys that tell them apart.
    let mid_plain = plain.run(&ex, &cts).unwrap();
    let mid = there.run(&ex, &cts).unwrap();
    assert_eq!(mid.len(), b.ciphertexts());
    let y = back.run(&ex, &mid).unwrap();
    assert_eq!(y[0].level(), 1, "one level each way");
    let dec = |cts: &[Ciphertext<CpuBackend>]| decrypt_all(&ck, &sk, cts);
    let worst = |got: Vec<f64>| {
        got.iter()
            .zip(&x)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    };
    let (w0, w1, w2) = (
        worst(b.unpack(&dec(&mid_plain)).unwrap()),
        worst(b.unpack(&dec(&mid)).unwrap()),
        worst(a.unpack(&dec(&y)).unwrap()),
    );
    println!(
        "S 1 → 4 (fold {}): {:?}; back: {:?}; worst error {w1:.2e}, {w2:.2e}",
        b.fold,
        there.counts(),
        back.counts()
    );
    // 40-bit scales: measured about 1e-9 each way; the bound leaves 1000×.
    assert!(w0 < 1e-6 && w1 < 1e-6 && w2 < 1e-6, "{w0} {w1} {w2}");
}
