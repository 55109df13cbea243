//! The tiny random-weight encoder of the session tests (1 layer, hidden 64, 2 heads, FFN 128,
//! m = 16, deterministic per seed), its inputs, its plaintext logits and its parameter set: one
//! copy for the CPU session tests (`tests/tests/e2e_session.rs`) and the backends' session tests
//! (`backend-wgpu/tests`).

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use veil_core::bert::{EncoderConfig, EncoderWeights, Head, LayerWeights};
use veil_core::cnn::Network;
use veil_core::packing::Mat;
use veil_host::model::images::Images;

/// The padded length of the tiny encoder's inputs.
pub const M: usize = 16;

/// The bound on |encrypted − plaintext| per logit of the tiny encoder: the fixed-point blocks,
/// the conversions and the CKKS noise of one layer stay well below it.
pub const LOGIT_BOUND: f64 = 0.05;

/// The tiny encoder's architecture.
pub fn tiny_cfg() -> EncoderConfig {
    EncoderConfig {
        layers: 1,
        hidden: 64,
        heads: 2,
        ffn: 128,
        ln_eps: 1e-12,
        classes: 2,
    }
}

fn uniform(rng: &mut ChaCha20Rng, a: f64) -> f64 {
    (rng.next_u64() as f64 / u64::MAX as f64 * 2.0 - 1.0) * a
}

fn mat(rng: &mut ChaCha20Rng, rows: usize, cols: usize) -> Mat {
    let a = 1.0 / (rows as f64).sqrt();
    let data = (0..rows * cols).map(|_| uniform(rng, a)).collect();
    Mat { rows, cols, data }
}

fn vector(rng: &mut ChaCha20Rng, n: usize, centre: f64, a: f64) -> Vec<f64> {
    (0..n).map(|_| centre + uniform(rng, a)).collect()
}

/// Random weights of the tiny encoder (deterministic per seed; tests only).
pub fn tiny_weights(seed: u64) -> EncoderWeights {
    let cfg = tiny_cfg();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (d, f) = (cfg.hidden, cfg.ffn);
    let layers = (0..cfg.layers)
        .map(|_| LayerWeights {
            wq: mat(&mut rng, d, d),
            bq: vector(&mut rng, d, 0.0, 0.1),
            wk: mat(&mut rng, d, d),
            bk: vector(&mut rng, d, 0.0, 0.1),
            wv: mat(&mut rng, d, d),
            bv: vector(&mut rng, d, 0.0, 0.1),
            wo: mat(&mut rng, d, d),
            bo: vector(&mut rng, d, 0.0, 0.1),
            ln1_g: vector(&mut rng, d, 1.0, 0.1),
            ln1_b: vector(&mut rng, d, 0.0, 0.1),
            w1: mat(&mut rng, d, f),
            b1: vector(&mut rng, f, 0.0, 0.1),
            w2: mat(&mut rng, f, d),
            b2: vector(&mut rng, d, 0.0, 0.1),
            ln2_g: vector(&mut rng, d, 1.0, 0.1),
            ln2_b: vector(&mut rng, d, 0.0, 0.1),
        })
        .collect();
    let w = EncoderWeights {
        cfg,
        layers,
        head: Head {
            w: mat(&mut rng, d, cfg.classes),
            b: vector(&mut rng, cfg.classes, 0.0, 0.1),
        },
    };
    w.validate().unwrap();
    w
}

/// A client input: `M × d`, LayerNorm-like rows (rows `valid..M` are padding).
pub fn input(seed: u64) -> Mat {
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
    Mat {
        rows: M,
        cols: tiny_cfg().hidden,
        data: (0..M * tiny_cfg().hidden)
            .map(|_| uniform(&mut rng, 1.7))
            .collect(),
    }
}

/// The plaintext model's logits (`f64` reference).
pub fn plaintext(w: &EncoderWeights, x: &Mat, valid: usize) -> Vec<f64> {
    veil_core::bert::reference::logits(w, x, valid).expect("reference")
}

/// The parameter set of these tests: the insecure N = 2^12 test set (fast); the product's
/// 128-bit set is `session_params`.
pub fn test_params(_: &EncoderConfig, _: usize) -> Result<veil_core::CkksParams, veil_core::Error> {
    veil_core::params::insecure_logn12().validate()
}

/// The largest |Δlogit| against the plaintext model, after checking the predictions agree.
pub fn check_against_plaintext(net: &Network, imgs: &Images, logits: &[Vec<f64>]) -> f64 {
    let x: Vec<f64> = (0..imgs.count).flat_map(|i| imgs.unit(i)).collect();
    let want = net.reference(&x, imgs.count).unwrap();
    let classes = net.classes();
    assert_eq!(logits.len(), imgs.count);
    let amp = want.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    assert!(amp > 0.1, "the logits are not trivially small: {amp}");
    let mut worst = 0.0f64;
    for (i, l) in logits.iter().enumerate() {
        let w = &want[i * classes..(i + 1) * classes];
        assert_eq!(l.len(), classes);
        for (a, b) in l.iter().zip(w) {
            worst = worst.max((a - b).abs());
        }
        assert_eq!(
            veil_host::cnn::argmax(l),
            veil_host::cnn::argmax(w),
            "image {i}: {l:?} vs {w:?}"
        );
    }
    worst
}

/// `n` reals uniform in `[-amp, amp]`.
pub fn rand_vec(rng: &mut impl rand_core::RngCore, n: usize, amp: f64) -> Vec<f64> {
    crate::random_values(rng, n, amp)
        .into_iter()
        .map(|c| c.re)
        .collect()
}

/// `N = 2^12` with nine 40-bit levels (a LeNet's depth and two to spare): insecure, for fast CNN
/// tests only.
pub fn cnn_test_params() -> veil_core::CkksParams {
    let mut lit = veil_core::params::insecure_logn12();
    lit.name = "INSECURE_LOGN12_L9_CNN".into();
    lit.log_q = std::iter::once(60)
        .chain(std::iter::repeat_n(40, 9))
        .collect();
    lit.dnum = Some(5);
    lit.validate().unwrap()
}

/// Conv 1→2 (3×3, padding 1), a quadratic, flatten, fc 128→`outputs` on 8 × 8 inputs, random
/// weights (deterministic per seed).
pub fn fhe_net(seed: u64, outputs: usize) -> Network {
    use veil_core::cnn::{Conv2d, Layer, Linear, Quadratic};
    let mut rng = crate::test_rng(seed);
    let conv = Conv2d::new(
        1,
        2,
        3,
        1,
        1,
        rand_vec(&mut rng, 18, 0.5),
        rand_vec(&mut rng, 2, 0.1),
    )
    .unwrap();
    Network {
        name: "tiny-fhe".into(),
        channels: 1,
        side: 8,
        layers: vec![
            Layer::Conv(conv),
            Layer::Quad(Quadratic::new(0.3, 0.5, 0.05).unwrap()),
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    128,
                    outputs,
                    rand_vec(&mut rng, 128 * outputs, 0.2),
                    rand_vec(&mut rng, outputs, 0.1),
                )
                .unwrap(),
            ),
        ],
    }
}

/// `count` deterministic 8 × 8 one-channel images.
pub fn cnn_images(count: usize) -> Images {
    Images {
        count,
        channels: 1,
        height: 8,
        width: 8,
        pixels: (0..count * 64)
            .map(|i| ((i * 37 + 11) % 251) as u8)
            .collect(),
    }
}
