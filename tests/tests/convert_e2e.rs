//! CKKS ↔ MPC conversion (EncFormer §V-B, issue 5): two parties over the in-memory duplex and
//! TCP loopback, real CKKS (insecure N = 2^10 parameters for speed) and real MPC.

mod mpc_common;

use mpc_common::*;
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, Ckks, Encoder, PublicKey, SecretKey, C64};
use veil_core::convert::{
    c2m_mask, c2m_p0, c2m_p1, complexify, decomplexify, m2c_p0, m2c_p0_slots, m2c_p1, m2c_p1_slots,
    BoundaryCfg, C2mPlan, CommonMasks, ComplexShares, ConvertError, M2cPlan, ProtocolError,
    RunStats, SlotShares, K_BITS,
};
use veil_core::mpc::{MpcConfig, RingCfg, RingShares};
use veil_core::params;
use veil_core::{Basis, PolyBackend};
use veil_host::mpc::drive;

type Ck = Ckks<CpuBackend>;
const LOG_B: u32 = 8;
const SCALE: f64 = (1u64 << 40) as f64;

fn setup() -> (Ck, SecretKey, ChaCha20Rng) {
    let p = params::insecure_logn10().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
    let mut rng = seeded(501);
    let sk = ck.gen_secret_key(&mut rng);
    (ck, sk, rng)
}

fn pk_of(ck: &Ck, sk: &SecretKey) -> PublicKey<CpuBackend> {
    ck.gen_public_key(sk, &mut seeded(502)).unwrap()
}

fn cfg() -> BoundaryCfg {
    BoundaryCfg::encformer(LOG_B)
}

/// Uniform values in `[-B, B]` plus edge values (±B, 0, ±1 ulp, ±½ ulp).
fn boundary_values(rng: &mut ChaCha20Rng, n: usize) -> Vec<f64> {
    let b = (1u64 << LOG_B) as f64;
    let ulp = 1.0 / 8192.0;
    let mut v: Vec<f64> = (0..n)
        .map(|_| (rng.next_u64() as f64 / u64::MAX as f64 * 2.0 - 1.0) * b)
        .collect();
    let edges = [
        b,
        -b,
        0.0,
        ulp,
        -ulp,
        0.5 * ulp,
        -0.5 * ulp,
        b - ulp,
        -b + ulp,
    ];
    v[..edges.len()].copy_from_slice(&edges);
    v
}

fn encrypt(
    ck: &Ck,
    sk: &SecretKey,
    z: &[C64],
    level: usize,
    rng: &mut ChaCha20Rng,
) -> Ciphertext<CpuBackend> {
    let slots = ck.params().max_slots();
    let pt = ck.encode(z, slots, level, SCALE).unwrap();
    ck.encrypt_sk(sk, &pt, rng).unwrap()
}

/// Largest |open(shares)·2^{-F} − want| in ulps of 2^{-F}.
fn err_ulp(r: &RingCfg, a: &RingShares, b: &RingShares, want: &[f64]) -> f64 {
    let got = open(r, a, b);
    let s = (1u64 << r.frac) as f64;
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w * s).abs())
        .fold(0.0, f64::max)
}

fn run_c2m(
    ck: &Ck,
    sk: &SecretKey,
    plan: &C2mPlan,
    cts: &[Ciphertext<CpuBackend>],
) -> (
    (Vec<ComplexShares>, RunStats),
    (Vec<ComplexShares>, RunStats),
) {
    let pk = &pk_of(ck, sk);
    run_mem(
        MpcConfig::ENCFORMER,
        |p, t| drive(p.channel(), c2m_p0(p, ck, sk, plan, cts.len()), t).unwrap(),
        |p, t| drive(p.channel(), c2m_p1(p, ck, pk, plan, cts), t).unwrap(),
    )
}

#[test]
fn plan_budget_and_trimming() {
    let (ck, _, _) = setup();
    let p = ck.params();
    let n = p.max_slots();
    // Level 0 (60 bits) is below ℓ_coeff + 1 + σ = 91 bits: trimming there is refused.
    assert!(matches!(
        C2mPlan::new(p, 0, n, SCALE, cfg()),
        Err(ConvertError::ModulusTooSmall {
            level: 0,
            needed: 91,
            ..
        })
    ));
    // Level 3 (180 bits) exceeds the Z_q arithmetic: refused, trim further.
    assert!(matches!(
        C2mPlan::new(p, 3, n, SCALE, cfg()),
        Err(ConvertError::ModulusTooLarge { level: 3, .. })
    ));
    let plan = C2mPlan::shortest_admissible(p, n, SCALE, cfg()).unwrap();
    assert_eq!(plan.level(), 1);
    // Table VII's setting (N = 2^16, depth 8) trims to q_0·q_1; the O(n log n) decoding map in
    // Z_{2^192} leaves the failure probability to stage 1 (2n·2^{h_1+1}/Q_conv ≈ 2^-33).
    let big = params::ckks_128_custom(16, 8, 3).validate().unwrap();
    let t7 = C2mPlan::shortest_admissible(&big, 1 << 15, SCALE, cfg()).unwrap();
    assert!(t7.level() == 1 && t7.error_bound_ulp() < 0.02);
    println!(
        "Table VII C2M plan: shifts {:?}, twiddle bits {}, value bits {:?}, stage bits {:?}, \
         bound {:.4} ulp, failure 2^{:.2}",
        t7.shifts(),
        t7.twiddle_bits(),
        t7.value_bits(),
        t7.stage_bits(),
        t7.error_bound_ulp(),
        t7.failure_log2()
    );
    // Spare bits go to stage-1 precision (e = 6) where they do not raise the failure
    // probability past max(2^-30, its value without them): both here and at Table VII.
    assert!(t7.shifts().0 == 1 && t7.failure_log2() < -32.9);
    assert!(plan.shifts().0 == 7 && plan.failure_log2() < -30.0);
    let wide = C2mPlan::shortest_admissible(&big, 1 << 15, SCALE, BoundaryCfg::encformer(12));
    let wide = wide.unwrap();
    println!(
        "B_max = 2^12: level {}, shifts {:?}, t {}, bound {:.4} ulp, failure 2^{:.2}",
        wide.level(),
        wide.shifts(),
        wide.twiddle_bits(),
        wide.error_bound_ulp(),
        wide.failure_log2()
    );
    // Stage 1 still dominates: 2n·2^{h_1+1}/Q_conv with h_1 = 55.
    assert!(wide.error_bound_ulp() < 0.02 && wide.failure_log2() < -27.9);
    assert!(plan.error_bound_ulp() < 0.25, "{}", plan.error_bound_ulp());
    assert!(plan.failure_log2() < -30.0, "{}", plan.failure_log2());
    println!(
        "C2M plan: level {}, shifts {:?}, twiddle bits {}, bound {:.4} ulp, failure 2^{:.1}",
        plan.level(),
        plan.shifts(),
        plan.twiddle_bits(),
        plan.error_bound_ulp(),
        plan.failure_log2()
    );
    // A stronger σ no longer fits q_0·q_1: refused with the bits needed.
    let strict = BoundaryCfg { sigma: 50, ..cfg() };
    assert!(matches!(
        C2mPlan::shortest_admissible(p, n, SCALE, strict),
        Err(ConvertError::ModulusTooSmall { needed: 101, .. })
    ));
    // Exact rounding of C2M: k = min(16, ℓ − 3 − b − F, s_2) bits below 2^{-F}; refused when
    // B_max·2^F leaves fewer than 4 (b + F + 7 > ℓ).
    assert_eq!(plan.round_bits(), 16);
    let b12 = C2mPlan::new(p, 1, n, SCALE, BoundaryCfg::encformer(12)).unwrap();
    assert_eq!(b12.round_bits(), 15);
    assert!(matches!(
        C2mPlan::new(p, 1, n, SCALE, BoundaryCfg::encformer(24)),
        Err(ConvertError::Budget(m)) if m.contains("exact C2M rounding")
    ));
    // B_max·2^F must fit Z_2^ℓ.
    assert!(matches!(
        C2mPlan::new(p, 1, n, SCALE, BoundaryCfg::encformer(29)),
        Err(ConvertError::Budget(_))
    ));
    let m = M2cPlan::new(p, p.max_level(), n, SCALE, cfg()).unwrap();
    assert!(m.error_bound_ulp() < 0.125);
    assert!(m.failure_log2() < -30.0);
    // A tiny scale cannot carry 2^F fixed point with n slots.
    assert!(matches!(
        M2cPlan::new(p, 1, n, (1u64 << 20) as f64, cfg()),
        Err(ConvertError::Budget(_))
    ));
    // A ciphertext below the boundary level is refused, never silently converted.
    let (ck, sk, mut rng) = setup();
    let ct = encrypt(&ck, &sk, &[C64::real(1.0)], 0, &mut rng);
    let pk = pk_of(&ck, &sk);
    assert!(matches!(
        c2m_mask(&ck, &pk, &plan, &[ct], &mut rng),
        Err(ConvertError::LevelTooLow {
            found: 0,
            needed: 1
        })
    ));
}

#[test]
fn integer_maps_are_homomorphic_and_match_the_encoder() {
    let (ck, _, mut rng) = setup();
    let p = ck.params();
    let n = p.max_slots();
    let plan = C2mPlan::new(p, 1, n, SCALE, cfg()).unwrap();
    let mask = (1u128 << K_BITS) - 1;
    let rnd =
        |rng: &mut ChaCha20Rng| ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) & mask;
    let a: Vec<u128> = (0..2 * n).map(|_| rnd(&mut rng)).collect();
    let b: Vec<u128> = (0..2 * n).map(|_| rnd(&mut rng)).collect();
    let s: Vec<u128> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| x.wrapping_add(*y) & mask)
        .collect();
    // The direct O(n²) decoding map (reference only) is homomorphic.
    let (ar, ai) = plan.decode_map(&a).unwrap();
    let (br, bi) = plan.decode_map(&b).unwrap();
    let (sr, si) = plan.decode_map(&s).unwrap();
    for j in 0..n {
        assert_eq!(ar[j].wrapping_add(br[j]) & mask, sr[j]);
        assert_eq!(ai[j].wrapping_add(bi[j]) & mask, si[j]);
    }
    let m = M2cPlan::new(p, 1, n, SCALE, cfg()).unwrap();
    // The direct O(n²) map (reference only) is homomorphic.
    let ea = m.encode_map(&a[..n], &a[n..]).unwrap();
    let eb = m.encode_map(&b[..n], &b[n..]).unwrap();
    let es = m.encode_map(&s[..n], &s[n..]).unwrap();
    for k in 0..2 * n {
        assert_eq!(ea[k].wrapping_add(eb[k]) & mask, es[k]);
    }
    // The encoding map inverts the decoding map (up to the fixed-point scalings), checked
    // against the floating-point encoder through a plaintext: encode z with the map, put the
    // coefficients in a plaintext and decode with the CKKS decoder.
    let z: Vec<C64> = (0..n)
        .map(|j| {
            C64::new(
                (j as f64 * 0.37).sin() * 100.0,
                (j as f64 * 0.11).cos() * 50.0,
            )
        })
        .collect();
    let f = 8192.0;
    let sx: Vec<u128> = z
        .iter()
        .map(|v| ((v.re * f).round() as i64 as i128 as u128) & mask)
        .collect();
    let sy: Vec<u128> = z
        .iter()
        .map(|v| ((v.im * f).round() as i64 as i128 as u128) & mask)
        .collect();
    let u = m.encode_map(&sx, &sy).unwrap();
    let t = m.direct_twiddle_bits().unwrap();
    let coeffs: Vec<f64> = u
        .iter()
        .map(|&v| {
            let sv = if v >> (K_BITS - 1) == 1 {
                v as i128 - (1i128 << K_BITS)
            } else {
                v as i128
            };
            sv as f64 / 2f64.powi(t as i32) / SCALE
        })
        .collect();
    let gap = p.n() / (2 * n);
    let mut full = vec![0f64; p.n()];
    for (k, c) in coeffs.iter().enumerate() {
        full[k * gap] = *c;
    }
    let back = ck.encoder().decode(&full, n).unwrap();
    // Compare with the fixed-point inputs the map was given.
    for (a, b) in z.iter().zip(&back) {
        let (wr, wi) = ((a.re * f).round(), (a.im * f).round());
        assert!(
            (wr - b.re * f).abs() < 0.2 && (wi - b.im * f).abs() < 0.2,
            "{a:?} {b:?}"
        );
    }
}

#[test]
fn c2m_reconstructs_complex_slots() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let plan = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    let xs: Vec<Vec<f64>> = (0..3).map(|_| boundary_values(&mut rng, n)).collect();
    let ys: Vec<Vec<f64>> = (0..3).map(|_| boundary_values(&mut rng, n)).collect();
    // Ciphertexts at the top level: P1 trims them to the boundary level.
    let cts: Vec<_> = (0..3)
        .map(|i| {
            let z: Vec<C64> = xs[i]
                .iter()
                .zip(&ys[i])
                .map(|(&x, &y)| C64::new(x, y))
                .collect();
            encrypt(&ck, &sk, &z, p.max_level(), &mut rng)
        })
        .collect();
    let r = RingCfg::ENCFORMER;
    // Reference: the exact (f64) decoding of the same ciphertexts' decryption, i.e. the
    // message plus the CKKS error. C2M's re-randomization adds a fresh Enc_pk(0) whose noise
    // (≈ 2^-12 ulp here) is the only difference from what P0 actually decrypts.
    let dec: Vec<Vec<C64>> = cts
        .iter()
        .map(|ct| ck.decrypt_decode(&sk, ct).unwrap())
        .collect();
    let dx: Vec<Vec<f64>> = dec
        .iter()
        .map(|d| d.iter().map(|z| z.re).collect())
        .collect();
    let dy: Vec<Vec<f64>> = dec
        .iter()
        .map(|d| d.iter().map(|z| z.im).collect())
        .collect();
    // (max, mean) error in ulps of the opened shares against `want`.
    let stats = |s0: &[ComplexShares], s1: &[ComplexShares], wx: &[Vec<f64>], wy: &[Vec<f64>]| {
        let f = (1u64 << r.frac) as f64;
        let (mut worst, mut sum, mut cnt) = (0f64, 0f64, 0usize);
        for i in 0..3 {
            for (sh0, sh1, w) in [
                (&s0[i].re, &s1[i].re, &wx[i]),
                (&s0[i].im, &s1[i].im, &wy[i]),
            ] {
                for (g, w) in open(&r, sh0, sh1).iter().zip(w) {
                    let e = (*g as f64 - w * f).abs();
                    worst = worst.max(e);
                    sum += e;
                    cnt += 1;
                }
            }
        }
        (worst, sum / cnt as f64)
    };
    // Exact rounding: |out − x·2^F| ≤ 1/2 + ε, where ε is the error of the value before the
    // rounding: proven ≤ error_bound_ulp (≈ 0.015 here); observed ≲ 10^-4 ulp (stochastic
    // truncations), plus the re-randomization noise (≈ 3·10^-5 ulp).
    let tol = 0.5 + 0.01;
    assert!(plan.error_bound_ulp() < 0.05);
    let t0 = std::time::Instant::now();
    let ((s0, _), (s1, _)) = run_c2m(&ck, &sk, &plan, &cts);
    let (worst, mean) = stats(&s0, &s1, &dx, &dy);
    let (wm, mm) = stats(&s0, &s1, &xs, &ys);
    println!(
        "C2M of 3 ciphertexts: {:?}; vs decrypted: max {worst:.5} mean {mean:.4} ulp; vs \
         message: max {wm:.5} mean {mm:.4} ulp",
        t0.elapsed()
    );
    assert!(
        worst < tol,
        "C2M error {worst} ulp vs the decrypted plaintext"
    );
    let ((s0, st0), (s1, st1)) = run_c2m(&ck, &sk, &plan, &cts);
    let (worst, _) = stats(&s0, &s1, &dx, &dy);
    assert!(worst < tol, "C2M error {worst} ulp");
    assert_eq!(st1.ciphertexts, 3);
    assert_eq!(st0.ciphertext_bytes, st1.ciphertext_bytes);
    let one = veil_core::serial::ciphertext_len(&p, plan.level(), 1, false) as u64;
    assert_eq!(st1.ciphertext_bytes, 3 * one);
    // The masked ciphertexts (one round), then the batched exact rounding of 6n real values.
    let reals = (3 * 2 * n) as f64;
    let mpc_bytes = run_bytes(&st1) - st1.ciphertext_bytes;
    println!(
        "C2M exact rounding (k = {}): {:.1} bytes per real value (both directions), {} rounds \
         in all (P1 {st1:?})",
        plan.round_bits(),
        mpc_bytes as f64 / reals,
        st1.rounds
    );
    assert_eq!(run_bytes(&st0), run_bytes(&st1));
    assert!(st1.rounds <= 12, "{} rounds", st1.rounds);
    assert!(mpc_bytes as f64 / reals < 500.0);

    // EncFormer's local rounding: the local truncation alone, within ε + 1 ulp of the
    // decrypted value, and nothing on the wire but the masked ciphertexts (one round; the frame
    // of each ciphertext message, no MPC step).
    let local = plan.clone().local_rounding();
    assert_eq!(local.round_bits(), 0);
    let exact_term = libm_pow2(-(plan.round_bits() as i32));
    assert!((local.error_bound_ulp() - (plan.error_bound_ulp() - exact_term + 1.0)).abs() < 1e-9);
    let ((s0, st0), (s1, st1)) = run_c2m(&ck, &sk, &local, &cts);
    let (worst, mean) = stats(&s0, &s1, &dx, &dy);
    println!("C2M with local rounding: max {worst:.4} mean {mean:.4} ulp, P1 {st1:?}");
    assert!(worst < 1.0 + 0.01, "local C2M error {worst} ulp");
    // The local truncation rounds stochastically (unbiased): about a third of an ulp on average
    // on continuous inputs, against a quarter for the exact rounding.
    assert!(mean > 0.2 && mean < 0.8, "local C2M mean error {mean} ulp");
    assert_eq!(st1.rounds, 1);
    let extra = run_bytes(&st1) - st1.ciphertext_bytes;
    assert!(extra < 64, "{extra} bytes beyond the ciphertexts");
    assert_eq!(run_bytes(&st0), run_bytes(&st1));
}

#[test]
fn c2m_integers_at_fixed_point_are_recovered_exactly() {
    // The paper's setting: slots hold integers X·2^{-F}. The pre-rounding value is within
    // error_bound_ulp + CKKS noise (≪ 1/2) of X, and the exact MPC rounding returns X.
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let plan = C2mPlan::new(&p, 1, n, SCALE, cfg()).unwrap();
    let r = RingCfg::ENCFORMER;
    let xs = values(&mut rng, n - 9, LOG_B + r.frac);
    let ys = values(&mut rng, n - 9, LOG_B + r.frac);
    let f = (1u64 << r.frac) as f64;
    let z: Vec<C64> = xs
        .iter()
        .zip(&ys)
        .map(|(&x, &y)| C64::new(x as f64 / f, y as f64 / f))
        .collect();
    let ct = encrypt(&ck, &sk, &z, 1, &mut rng);
    let ((s0, _), (s1, _)) = run_c2m(&ck, &sk, &plan, &[ct]);
    let (gx, gy) = (
        open(&r, &s0[0].re, &s1[0].re),
        open(&r, &s0[0].im, &s1[0].im),
    );
    assert!(plan.error_bound_ulp() < 0.25);
    for k in 0..n {
        assert_eq!((gx[k], gy[k]), (xs[k], ys[k]), "slot {k}");
    }
    println!("exact integers: {}/{}", 2 * n, 2 * n);
}

fn share_vec(r: &RingCfg, v: &[f64], rng: &mut ChaCha20Rng) -> (RingShares, RingShares) {
    let xs: Vec<i64> = v.iter().map(|&x| r.to_signed(r.encode(x))).collect();
    share(r, &xs, rng)
}

#[test]
fn m2c_encrypts_the_shared_values_at_any_level() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let r = RingCfg::ENCFORMER;
    for level in [1, p.max_level()] {
        let plan = M2cPlan::new(&p, level, n, SCALE, cfg()).unwrap();
        let xs = boundary_values(&mut rng, n);
        let ys = boundary_values(&mut rng, n);
        let (x0, x1) = share_vec(&r, &xs, &mut rng);
        let (y0, y1) = share_vec(&r, &ys, &mut rng);
        // Second input: real only (empty imaginary shares mean y = 0).
        let (w0, w1) = share_vec(&r, &ys, &mut rng);
        let in0 = vec![
            ComplexShares { re: x0, im: y0 },
            ComplexShares {
                re: w0,
                im: RingShares::default(),
            },
        ];
        let in1 = vec![
            ComplexShares { re: x1, im: y1 },
            ComplexShares {
                re: w1,
                im: RingShares::default(),
            },
        ];
        let (st0, (cts, st1)) = run_mem(
            MpcConfig::ENCFORMER,
            |pp, t| drive(pp.channel(), m2c_p0(pp, &ck, &sk, &plan, &in0), t).unwrap(),
            |pp, t| drive(pp.channel(), m2c_p1(pp, &ck, &plan, &in1), t).unwrap(),
        );
        assert_eq!(cts.len(), 2);
        assert_eq!(cts[0].level(), level);
        let f = (1u64 << r.frac) as f64;
        let dz = ck.decrypt_decode(&sk, &cts[0]).unwrap();
        let dw = ck.decrypt_decode(&sk, &cts[1]).unwrap();
        let mut worst = 0f64;
        for k in 0..n {
            let (wx, wy) = (r.decode(r.encode(xs[k])), r.decode(r.encode(ys[k])));
            worst = worst
                .max((dz[k].re - wx).abs() * f)
                .max((dz[k].im - wy).abs() * f)
                .max((dw[k].re - wy).abs() * f)
                .max(dw[k].im.abs() * f);
        }
        println!("M2C level {level}: max error {worst:.2e} ulp; P0 {st0:?}");
        assert!(worst < 0.5, "M2C error {worst} ulp");
        let seeded = veil_core::serial::ciphertext_len(&p, level, 1, true) as u64;
        assert_eq!(st0.ciphertext_bytes, 2 * seeded);
        assert_eq!(st1.ciphertext_bytes, 2 * seeded);
    }
}

/// Bytes one party sent and received over a run's channel.
fn run_bytes(st: &RunStats) -> u64 {
    let c = st.channel.offline_online();
    c.bytes_sent + c.bytes_recv
}

/// M2C from distinct values (`SlotShares`): a layout that repeats 24 values 16 times with
/// padding in the real parts, and another pattern of them in every other imaginary slot,
/// decrypts to the values in their slots (within ½ ulp) and public zeros elsewhere, as the same
/// layout converted from full share vectors does, for at most a tenth of its lift's bytes. A slot
/// naming a value past the input's is refused by both parties (the check precedes the lift).
#[test]
fn m2c_from_distinct_values_fills_the_repeats_and_zeros() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let r = RingCfg::ENCFORMER;
    let level = 1;
    let plan = M2cPlan::new(&p, level, n, SCALE, cfg()).unwrap();
    let d = 24;
    let vals = boundary_values(&mut rng, d);
    let (v0, v1) = share_vec(&r, &vals, &mut rng);
    let z = SlotShares::ZERO;
    let re: Vec<u32> = (0..n)
        .map(|s| if s % 32 < d { (s % 32) as u32 } else { z })
        .collect();
    let im: Vec<u32> = (0..n)
        .map(|s| if s % 2 == 0 { ((7 * s) % d) as u32 } else { z })
        .collect();
    let want = |m: &[u32], s: usize| {
        if m[s] != z {
            r.decode(r.encode(vals[m[s] as usize]))
        } else {
            0.0
        }
    };
    let slots = |v: &RingShares| SlotShares::gather(v, re.clone(), im.clone());
    let (in0, in1) = (vec![slots(&v0)], vec![slots(&v1)]);
    assert_eq!(in0[0].values.len(), d);
    let (st0, (cts, st1)) = run_mem(
        MpcConfig::ENCFORMER,
        |pp, t| drive(pp.channel(), m2c_p0_slots(pp, &ck, &sk, &plan, &in0), t).unwrap(),
        |pp, t| drive(pp.channel(), m2c_p1_slots(pp, &ck, &plan, &in1), t).unwrap(),
    );
    let f = (1u64 << r.frac) as f64;
    let dz = ck.decrypt_decode(&sk, &cts[0]).unwrap();
    let mut worst = 0f64;
    for k in 0..n {
        worst = worst
            .max((dz[k].re - want(&re, k)).abs() * f)
            .max((dz[k].im - want(&im, k)).abs() * f);
    }
    // The same layout from full share vectors.
    let full = |v: &RingShares| {
        let a = v.as_slice();
        let pick = |m: &[u32]| {
            RingShares::new(
                m.iter()
                    .map(|&c| if c == z { 0 } else { a[c as usize] })
                    .collect(),
            )
        };
        vec![ComplexShares {
            re: pick(&re),
            im: pick(&im),
        }]
    };
    let (f0, f1) = (full(&v0), full(&v1));
    let (fs0, (fcts, _)) = run_mem(
        MpcConfig::ENCFORMER,
        |pp, t| drive(pp.channel(), m2c_p0(pp, &ck, &sk, &plan, &f0), t).unwrap(),
        |pp, t| drive(pp.channel(), m2c_p1(pp, &ck, &plan, &f1), t).unwrap(),
    );
    let df = ck.decrypt_decode(&sk, &fcts[0]).unwrap();
    let mut worst_full = 0f64;
    for k in 0..n {
        worst_full = worst_full
            .max((df[k].re - want(&re, k)).abs() * f)
            .max((df[k].im - want(&im, k)).abs() * f);
    }
    // The lift's bytes: the run's less its ciphertexts.
    let (b, bf) = (
        run_bytes(&st0) - st0.ciphertext_bytes,
        run_bytes(&fs0) - fs0.ciphertext_bytes,
    );
    println!(
        "M2C from {d} distinct values in {n} slots: max error {worst:.2e} ulp (full vectors \
         {worst_full:.2e}), the lift's {b} bytes against {bf} ({:.3}x); P1's run {} bytes",
        b as f64 / bf as f64,
        run_bytes(&st1)
    );
    assert!(
        worst < 0.5 && worst_full < 0.5,
        "{worst} / {worst_full} ulp"
    );
    // 24 values lifted instead of 768: at most a tenth of the bytes (fixed overheads aside).
    assert!(
        10 * b <= bf,
        "{b} bytes from distinct values, {bf} from full vectors"
    );

    // A source past the values: a typed refusal on both sides, naming the caller's index (a
    // gathered one, and one set after the gathering).
    let mut map = re.clone();
    map[5] = 4 * d as u32;
    let bad = vec![SlotShares::gather(&v0, map.clone(), im.clone())];
    let mut bad1 = in1.clone();
    bad1[0].re[5] = 4 * d as u32;
    let (e0, e1) = run_mem(
        MpcConfig::ENCFORMER,
        |pp, t| drive(pp.channel(), m2c_p0_slots(pp, &ck, &sk, &plan, &bad), t),
        |pp, t| drive(pp.channel(), m2c_p1_slots(pp, &ck, &plan, &bad1), t),
    );
    let want_err = ProtocolError::SlotSource {
        index: 0,
        slot: 5,
        source: 4 * d as u32,
        values: d,
    };
    for e in [e0.err(), e1.err()] {
        match e {
            Some(veil_host::mpc::DriverError::Convert(e)) => assert_eq!(e, want_err),
            other => panic!("expected the slot refusal, got {other:?}"),
        }
    }
}

#[test]
fn c2m_then_m2c_round_trip_with_complexify() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let keys = ck
        .gen_evaluation_keys(&sk, &[], true, &mut rng, |_, _| {})
        .unwrap();
    let pk = pk_of(&ck, &sk);
    let c2m = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    let m2c = M2cPlan::new(&p, p.max_level(), n, SCALE, cfg()).unwrap();
    let xs = boundary_values(&mut rng, n);
    let ys = boundary_values(&mut rng, n);
    let top = p.max_level();
    let slots = n;
    let cx = ck
        .encrypt_sk(
            &sk,
            &ck.encode_real(&xs, slots, top, SCALE).unwrap(),
            &mut rng,
        )
        .unwrap();
    let cy = ck
        .encrypt_sk(
            &sk,
            &ck.encode_real(&ys, slots, top, SCALE).unwrap(),
            &mut rng,
        )
        .unwrap();
    // Two real ciphertexts → one complex one → MPC → one complex one → two real ones.
    let z = complexify(&ck, &cx, &cy).unwrap();
    let (_, cts) = run_mem(
        MpcConfig::ENCFORMER,
        |pp, t| {
            let (sh, _) = drive(pp.channel(), c2m_p0(pp, &ck, &sk, &c2m, 1), t).unwrap();
            drive(pp.channel(), m2c_p0(pp, &ck, &sk, &m2c, &sh), t).unwrap();
        },
        |pp, t| {
            let (sh, _) = drive(pp.channel(), c2m_p1(pp, &ck, &pk, &c2m, &[z]), t).unwrap();
            let (cts, _) = drive(pp.channel(), m2c_p1(pp, &ck, &m2c, &sh), t).unwrap();
            cts
        },
    );
    let (ox, oy) = decomplexify(&ck, &cts[0], &keys).unwrap();
    let (dx, dy) = (
        ck.decrypt_decode(&sk, &ox).unwrap(),
        ck.decrypt_decode(&sk, &oy).unwrap(),
    );
    let f = 8192.0;
    let mut worst = 0f64;
    for k in 0..n {
        worst = worst
            .max((dx[k].re - xs[k]).abs() * f)
            .max((dy[k].re - ys[k]).abs() * f);
        worst = worst.max(dx[k].im.abs() * f).max(dy[k].im.abs() * f);
    }
    println!("round trip (complexify → C2M → M2C → decomplexify): max error {worst:.3} ulp");
    assert!(worst < 1.5, "round trip error {worst} ulp");
}

#[test]
fn real_baseline_uses_twice_the_ciphertexts() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let plan = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    let xs = boundary_values(&mut rng, n);
    let ys = boundary_values(&mut rng, n);
    let real: Vec<_> = [&xs, &ys]
        .iter()
        .map(|v| {
            ck.encrypt_sk(&sk, &ck.encode_real(v, n, 1, SCALE).unwrap(), &mut rng)
                .unwrap()
        })
        .collect();
    let z: Vec<C64> = xs.iter().zip(&ys).map(|(&x, &y)| C64::new(x, y)).collect();
    let cplx = encrypt(&ck, &sk, &z, 1, &mut rng);
    let real_plan = plan.clone().real_only();
    assert!(real_plan.is_real_only() && !plan.is_real_only());
    let ((r0, rs0), (r1, _)) = run_c2m(&ck, &sk, &real_plan, &real);
    let ((_, cs0), _) = run_c2m(&ck, &sk, &plan, &[cplx]);
    let r = RingCfg::ENCFORMER;
    assert!(err_ulp(&r, &r0[0].re, &r1[0].re, &xs) < 1.3);
    assert!(err_ulp(&r, &r0[1].re, &r1[1].re, &ys) < 1.3);
    // A real-only plan returns no imaginary shares and rounds only the real parts, so the
    // MPC traffic (everything but the ciphertexts) matches the complex run's for the same
    // number of real values.
    assert!(r0.iter().chain(&r1).all(|c| c.im.is_empty()));
    let mpc = |s: &RunStats| {
        let a = s.channel.offline_online();
        a.bytes_sent + a.bytes_recv - s.ciphertext_bytes
    };
    let (mr, mc) = (mpc(&rs0), mpc(&cs0));
    assert!(
        (mr as f64) < 1.1 * mc as f64 && (mc as f64) < 1.1 * mr as f64,
        "MPC bytes real {mr} vs complex {mc}"
    );
    assert_eq!(rs0.ciphertext_bytes, 2 * cs0.ciphertext_bytes);
    println!(
        "C2M bytes per pair: real {} complex {}",
        rs0.ciphertext_bytes, cs0.ciphertext_bytes
    );
}

/// Residues of P0's decrypted plaintext (coefficient domain, all primes) bucketed by
/// `⌊64·v/q_i⌋`.
fn p0_view_histogram(
    ck: &Ck,
    sk: &SecretKey,
    plan: &C2mPlan,
    cts: &[Ciphertext<CpuBackend>],
    masked: bool,
    rng: &mut ChaCha20Rng,
) -> Vec<u64> {
    let p = ck.params();
    let n = p.n();
    let basis = Basis::q(plan.level() + 1);
    let mut h = vec![0u64; 64];
    let pk = pk_of(ck, sk);
    let views: Vec<Ciphertext<CpuBackend>> = if masked {
        let (bytes, _) = c2m_mask(ck, &pk, plan, cts, rng).unwrap();
        bytes
            .iter()
            .map(|b| ck.deserialize_ciphertext(b).unwrap())
            .collect()
    } else {
        cts.iter()
            .map(|c| {
                let mut c = ck.clone_ct(c);
                ck.drop_level_assign(&mut c, plan.level()).unwrap();
                c
            })
            .collect()
    };
    let be = ck.backend();
    for ct in &views {
        let pt = ck.decrypt(sk, ct).unwrap();
        let mut host = vec![0u64; basis.rows() * n];
        be.download(pt.poly(), &mut host).unwrap();
        let mut buf = be.upload(&host);
        be.intt(&mut buf, basis);
        be.download(&buf, &mut host).unwrap();
        for (r, m) in p.q()[..basis.rows()].iter().enumerate() {
            for &v in &host[r * n..(r + 1) * n] {
                h[((v as u128 * 64) / m.value() as u128) as usize] += 1;
            }
        }
    }
    h
}

fn chi2_uniform(h: &[u64]) -> f64 {
    let total: u64 = h.iter().sum();
    let e = total as f64 / h.len() as f64;
    h.iter().map(|&o| (o as f64 - e).powi(2) / e).sum()
}

fn chi2_two(a: &[u64], b: &[u64]) -> f64 {
    // Homogeneity of two equal-size samples.
    a.iter()
        .zip(b)
        .filter(|(x, y)| **x + **y > 0)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2) / (x + y) as f64)
        .sum()
}

#[test]
fn p0_view_is_uniform_and_message_independent() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let plan = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    let b = (1u64 << LOG_B) as f64;
    let zero: Vec<C64> = vec![C64::default(); n];
    let big: Vec<C64> = (0..n)
        .map(|j| C64::new(if j % 2 == 0 { b } else { -b }, b))
        .collect();
    let cz: Vec<_> = (0..4)
        .map(|_| encrypt(&ck, &sk, &zero, 1, &mut rng))
        .collect();
    let cb: Vec<_> = (0..4)
        .map(|_| encrypt(&ck, &sk, &big, 1, &mut rng))
        .collect();
    let hz = p0_view_histogram(&ck, &sk, &plan, &cz, true, &mut rng);
    let hb = p0_view_histogram(&ck, &sk, &plan, &cb, true, &mut rng);
    // 8192 samples in 64 buckets, df = 63: mean 63, sd 11.2; 130 is 6 sd (p ≈ 1e-9).
    let (uz, ub, two) = (chi2_uniform(&hz), chi2_uniform(&hb), chi2_two(&hz, &hb));
    println!("chi2: zero {uz:.1}, big {ub:.1}, zero-vs-big {two:.1}");
    assert!(uz < 130.0 && ub < 130.0 && two < 130.0);
    // The statistic has power: without the mask, the same view is far from uniform.
    let raw = p0_view_histogram(&ck, &sk, &plan, &cb, false, &mut rng);
    let ur = chi2_uniform(&raw);
    println!("chi2 unmasked: {ur:.1}");
    assert!(ur > 1000.0);
}

#[test]
fn c2m_and_m2c_over_tcp_loopback() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let c2m = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    let m2c = M2cPlan::new(&p, 2, n, SCALE, cfg()).unwrap();
    let xs = boundary_values(&mut rng, n);
    let ys = boundary_values(&mut rng, n);
    let z: Vec<C64> = xs.iter().zip(&ys).map(|(&x, &y)| C64::new(x, y)).collect();
    let ct = encrypt(&ck, &sk, &z, 2, &mut rng);
    let pk = pk_of(&ck, &sk);
    let (t0, t1) = tcp_pair(tcfg(20_000));
    let ((a, st_c0, st_m0), (b, cts)) = run_with(
        MpcConfig::ENCFORMER,
        t0,
        t1,
        |pp, t| {
            let (sh, st) = drive(pp.channel(), c2m_p0(pp, &ck, &sk, &c2m, 1), t).unwrap();
            let sm = drive(pp.channel(), m2c_p0(pp, &ck, &sk, &m2c, &sh), t).unwrap();
            (sh, st, sm)
        },
        |pp, t| {
            let (sh, _) = drive(pp.channel(), c2m_p1(pp, &ck, &pk, &c2m, &[ct]), t).unwrap();
            let (cts, _) = drive(pp.channel(), m2c_p1(pp, &ck, &m2c, &sh), t).unwrap();
            (sh, cts)
        },
    );
    let r = RingCfg::ENCFORMER;
    assert!(err_ulp(&r, &a[0].re, &b[0].re, &xs) < 1.3);
    assert!(err_ulp(&r, &a[0].im, &b[0].im, &ys) < 1.3);
    let d = ck.decrypt_decode(&sk, &cts[0]).unwrap();
    for k in 0..n {
        assert!((d[k].re - xs[k]).abs() * 8192.0 < 1.5 && (d[k].im - ys[k]).abs() * 8192.0 < 1.5);
    }
    println!("TCP: C2M {st_c0:?}\n     M2C {st_m0:?}");
}

/// Circuit privacy of C2M: the `c_1` P0 receives is re-randomized (a fresh `Enc_pk(0)` is
/// added), so it shares nothing with the `c_1` P1 computed.
#[test]
fn c2m_rerandomizes_c1() {
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let plan = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    let pk = pk_of(&ck, &sk);
    let ct = encrypt(&ck, &sk, &[C64::new(3.0, -2.0)], 1, &mut rng);
    let (bytes, _) = c2m_mask(&ck, &pk, &plan, std::slice::from_ref(&ct), &mut rng).unwrap();
    let seen = ck.deserialize_ciphertext(&bytes[0]).unwrap();
    let rows = plan.level() + 1;
    let mut a = vec![0u64; rows * p.n()];
    let mut b = vec![0u64; rows * p.n()];
    ck.backend().download(&ct.polys()[1], &mut a).unwrap();
    ck.backend().download(&seen.polys()[1], &mut b).unwrap();
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    assert!(same < 4, "{same} equal words in c_1");
    // And it still decrypts to the masked message (correctness is covered end to end).
    assert_eq!(seen.level(), plan.level());
}

/// Protocol misuse ends in typed errors on both sides, never a panic or a wrong result: a
/// ciphertext count the receiver does not expect, and a party whose ring differs from the plan.
#[test]
fn mismatches_are_typed_errors() {
    use veil_core::mpc::MpcError;
    use veil_host::mpc::DriverError;
    let (ck, sk, mut rng) = setup();
    let p = ck.params().clone();
    let n = p.max_slots();
    let plan = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    let pk = pk_of(&ck, &sk);
    let ct = encrypt(&ck, &sk, &[C64::real(1.0)], 1, &mut rng);
    let (e0, _) = run_mem(
        MpcConfig::ENCFORMER,
        |pp, t| drive(pp.channel(), c2m_p0(pp, &ck, &sk, &plan, 2), t).map(|_| ()),
        |pp, t| {
            drive(
                pp.channel(),
                c2m_p1(pp, &ck, &pk, &plan, std::slice::from_ref(&ct)),
                t,
            )
            .map(|_| ())
        },
    );
    assert!(
        matches!(
            e0,
            Err(DriverError::Protocol(MpcError::Malformed {
                msg: veil_core::mpc::MsgKind::C2mCiphertexts,
                defect: veil_core::mpc::Defect::Count {
                    expected: 2,
                    found: 1
                },
            }))
        ),
        "{e0:?}"
    );
    let other = MpcConfig {
        ring: RingCfg::new(48, 16).unwrap(),
        ..MpcConfig::ENCFORMER
    };
    let (a, b) = run_mem(
        other,
        |pp, t| drive(pp.channel(), c2m_p0(pp, &ck, &sk, &plan, 1), t).map(|_| ()),
        |pp, t| {
            drive(
                pp.channel(),
                c2m_p1(pp, &ck, &pk, &plan, std::slice::from_ref(&ct)),
                t,
            )
            .map(|_| ())
        },
    );
    for e in [a, b] {
        assert!(
            matches!(e, Err(DriverError::Protocol(MpcError::InvalidConfig(_)))),
            "{e:?}"
        );
    }
}

/// Insecure test parameters at `N = 2^log_n` (`insecure_logn12`'s primes: q_0 60 bits, six
/// 40-bit primes), for the conversion tests at larger ring degrees.
fn params_logn(log_n: u32) -> params::CkksParams {
    let mut lit = params::insecure_logn12();
    lit.log_n = log_n;
    lit.name = format!("INSECURE_LOGN{log_n}_CONVERT");
    lit.validate().unwrap()
}

/// Fixed-point inputs `X = round(x·2^F)`: random in `[-B, B]` with edge values, all `±B`,
/// all zero, and alternating signs.
fn map_inputs(rng: &mut ChaCha20Rng, n: usize) -> Vec<(&'static str, Vec<i64>, Vec<i64>)> {
    let r = RingCfg::ENCFORMER;
    let b = 1i64 << (LOG_B + r.frac);
    let fx = |v: Vec<f64>| -> Vec<i64> { v.iter().map(|&x| r.to_signed(r.encode(x))).collect() };
    let alt: Vec<i64> = (0..n).map(|j| if j % 2 == 0 { b } else { -b }).collect();
    let alt_neg: Vec<i64> = alt.iter().map(|v| -v).collect();
    vec![
        (
            "random",
            fx(boundary_values(rng, n)),
            fx(boundary_values(rng, n)),
        ),
        ("+B/-B", vec![b; n], vec![-b; n]),
        ("zero", vec![0; n], vec![0; n]),
        ("alternating", alt, alt_neg),
        ("real only", fx(boundary_values(rng, n)), vec![]),
    ]
}

/// Runs [`M2cPlan::encode_shares`] for both parties on a fresh sharing of `(X, Y)` mod `2^K`
/// (common masks from one seed) and reconstructs the integer coefficients.
fn fast_map_open(m: &M2cPlan, xs: &[i64], ys: &[i64], rng: &mut ChaCha20Rng) -> Vec<i128> {
    let mask = (1u128 << K_BITS) - 1;
    let mut split = |v: &[i64]| -> (Vec<u128>, Vec<u128>) {
        v.iter()
            .map(|&x| {
                let a = ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) & mask;
                (a, (x as i128 as u128).wrapping_sub(a) & mask)
            })
            .unzip()
    };
    let (x0, x1) = split(xs);
    let (y0, y1) = split(ys);
    let mut seed = [0u8; 16];
    rng.fill_bytes(&mut seed);
    let c0 = m
        .encode_shares(&x0, &y0, true, &mut CommonMasks::from_seed(seed))
        .unwrap();
    let c1 = m
        .encode_shares(&x1, &y1, false, &mut CommonMasks::from_seed(seed))
        .unwrap();
    c0.iter().zip(c1.iter()).map(|(a, b)| a + b).collect()
}

/// The fast encoding map on shares against the floating-point CKKS encoder: coefficients within
/// [`M2cPlan::coeff_error_bound`] of `round(Δ·σ^{-1}(z))`, two independent sharings agree within
/// twice that (the map commutes with sharing up to the local-truncation errors), and the slots
/// decoded from the reconstructed coefficients are within [`M2cPlan::error_bound_ulp`].
#[test]
fn fast_encoding_map_matches_the_encoder() {
    let mut rng = seeded(700);
    let f = 8192.0;
    for log_n in [10u32, 12, 16] {
        let p = params_logn(log_n);
        let n = p.max_slots();
        let enc = Encoder::new(log_n);
        let gap = p.n() / (2 * n);
        let m = M2cPlan::new(&p, 1, n, SCALE, cfg()).unwrap();
        let bound = m.coeff_error_bound();
        for (name, xs, ys) in map_inputs(&mut rng, n) {
            let z: Vec<C64> = (0..n)
                .map(|j| C64::new(xs[j] as f64 / f, ys.get(j).map_or(0.0, |&y| y as f64 / f)))
                .collect();
            let want = enc.encode(&z, n, SCALE).unwrap();
            let t0 = std::time::Instant::now();
            let got = fast_map_open(&m, &xs, &ys, &mut rng);
            let map_time = t0.elapsed();
            let again = fast_map_open(&m, &xs, &ys, &mut rng);
            let mut worst_c = 0f64;
            for k in 0..2 * n {
                let d = (got[k] - want[k * gap]).abs() as f64;
                worst_c = worst_c.max(d);
                assert!(d <= bound + 2.0, "{name} N=2^{log_n} k {k}: {d} > {bound}");
                let d2 = (got[k] - again[k]).abs() as f64;
                assert!(d2 <= 2.0 * bound, "{name}: sharings differ by {d2}");
            }
            let mut full = vec![0f64; p.n()];
            for (k, &c) in got.iter().enumerate() {
                full[k * gap] = c as f64 / SCALE;
            }
            let back = enc.decode(&full, n).unwrap();
            let (mut worst, mut sum) = (0f64, 0f64);
            for j in 0..n {
                let y = ys.get(j).copied().unwrap_or(0) as f64;
                let (er, ei) = (
                    (back[j].re * f - xs[j] as f64).abs(),
                    (back[j].im * f - y).abs(),
                );
                worst = worst.max(er).max(ei);
                sum += er + ei;
            }
            println!(
                "fast map N=2^{log_n} {name} (both parties: {map_time:?}): coeff error max {worst_c} (bound {bound:.1}), slot \
                 error max {worst:.2e} mean {:.2e} ulp (bound {:.2e})",
                sum / (2 * n) as f64,
                m.error_bound_ulp()
            );
            assert!(worst <= m.error_bound_ulp() + 1e-3, "{name}: {worst} ulp");
        }
    }
}

/// Runs [`C2mPlan::decode_shares`] (stages 1 and 2 of C2M) for both parties on a fresh sharing
/// mod `Q_conv` of the subring coefficients `c` (common masks from one seed) and reconstructs
/// the slots at scale `2^{F+s_2}`, divided by `2^{s_2}` (ulps of `2^{-F}`).
fn fast_decode_open(plan: &C2mPlan, c: &[i128], rng: &mut ChaCha20Rng) -> Vec<(f64, f64)> {
    let q = plan.modulus().value();
    let (c0, c1): (Vec<u128>, Vec<u128>) = c
        .iter()
        .map(|&v| {
            let a = ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) % q;
            (a, (v.rem_euclid(q as i128) as u128 + q - a) % q)
        })
        .unzip();
    let mut seed = [0u8; 16];
    rng.fill_bytes(&mut seed);
    let (r0, i0) = plan
        .decode_shares(&c0, true, &mut CommonMasks::from_seed(seed))
        .unwrap();
    let (r1, i1) = plan
        .decode_shares(&c1, false, &mut CommonMasks::from_seed(seed))
        .unwrap();
    let out = 2f64.powi(plan.shifts().1 as i32);
    (0..plan.slots())
        .map(|j| {
            (
                r0[j].wrapping_add(r1[j]).to_f64() / out,
                i0[j].wrapping_add(i1[j]).to_f64() / out,
            )
        })
        .collect()
}

/// The fast decoding map of C2M (stages 1 and 2 on shares) against the floating-point CKKS
/// decoder at `N = 2^10, 2^12, 2^16`: for plaintexts encoding random, edge (±B, 0, ±1 ulp),
/// all-±B, zero, alternating and real-only slots, the reconstructed slots are within
/// [`C2mPlan::error_bound_ulp`] (less the `2^{-k}` of stage 3) of the exact decoding of the
/// plaintext, and two independent sharings agree within twice that.
#[test]
fn fast_decoding_map_matches_the_decoder() {
    let mut rng = seeded(710);
    let f = 8192.0;
    for log_n in [10u32, 12, 16] {
        let p = params_logn(log_n);
        let n = p.max_slots();
        let enc = Encoder::new(log_n);
        let gap = p.n() / (2 * n);
        let plan = C2mPlan::new(&p, 1, n, SCALE, cfg()).unwrap();
        let bound = plan.error_bound_ulp() - 2f64.powi(-(plan.round_bits() as i32));
        for (name, xs, ys) in map_inputs(&mut rng, n) {
            let z: Vec<C64> = (0..n)
                .map(|j| C64::new(xs[j] as f64 / f, ys.get(j).map_or(0.0, |&y| y as f64 / f)))
                .collect();
            let coeffs = enc.encode(&z, n, SCALE).unwrap();
            let c: Vec<i128> = (0..2 * n).map(|k| coeffs[k * gap]).collect();
            let full: Vec<f64> = coeffs.iter().map(|&v| v as f64 / SCALE).collect();
            let want = enc.decode(&full, n).unwrap();
            let t0 = std::time::Instant::now();
            let got = fast_decode_open(&plan, &c, &mut rng);
            let map_time = t0.elapsed();
            let again = fast_decode_open(&plan, &c, &mut rng);
            let (mut worst, mut sum, mut apart) = (0f64, 0f64, 0f64);
            for j in 0..n {
                let (er, ei) = (
                    (got[j].0 - want[j].re * f).abs(),
                    (got[j].1 - want[j].im * f).abs(),
                );
                worst = worst.max(er).max(ei);
                sum += er + ei;
                apart = apart
                    .max((got[j].0 - again[j].0).abs())
                    .max((got[j].1 - again[j].1).abs());
            }
            println!(
                "fast decode N=2^{log_n} {name} (both parties: {map_time:?}): slot error max \
                 {worst:.2e} mean {:.2e} ulp, sharings apart {apart:.2e} (bound {bound:.2e})",
                sum / (2 * n) as f64
            );
            assert!(worst <= bound, "{name} N=2^{log_n}: {worst} > {bound} ulp");
            assert!(
                apart <= 2.0 * bound,
                "{name}: sharings differ by {apart} ulp"
            );
            if log_n == 10 {
                // The direct O(n²) reference map on the (unshared) stage-1 values agrees too.
                let s1 = plan.shifts().0;
                let k_mask = (1u128 << K_BITS) - 1;
                let c1: Vec<u128> = c
                    .iter()
                    .map(|&v| ((v as f64 / 2f64.powi(s1 as i32)).round() as i128 as u128) & k_mask)
                    .collect();
                let (dr, di) = plan.decode_map(&c1).unwrap();
                let out = 2f64.powi(plan.direct_shift().unwrap() as i32);
                let signed = |v: u128| ((v << (128 - K_BITS)) as i128 >> (128 - K_BITS)) as f64;
                for j in 0..n {
                    let (er, ei) = (
                        (signed(dr[j]) / out - want[j].re * f).abs(),
                        (signed(di[j]) / out - want[j].im * f).abs(),
                    );
                    assert!(er.max(ei) < 0.25, "direct map {name} slot {j}: {er} {ei}");
                }
            }
        }
    }
}

/// C2M end to end at `N = 2^16` (`n = 2^15`, level 1 = `q_0·q_1`): every slot within
/// `½ + ε` of the exact decoding of the decrypted plaintext (random and edge values, complex),
/// and fixed-point inputs `X·2^{-F}` recovered exactly.
#[test]
fn c2m_end_to_end_logn16() {
    let p = params_logn(16);
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
    let mut rng = seeded(816);
    let sk = ck.gen_secret_key(&mut rng);
    let n = p.max_slots();
    let plan = C2mPlan::shortest_admissible(&p, n, SCALE, cfg()).unwrap();
    assert_eq!(plan.level(), 1);
    let r = RingCfg::ENCFORMER;
    let f = (1u64 << r.frac) as f64;
    let xs = boundary_values(&mut rng, n);
    let ys = boundary_values(&mut rng, n);
    let z: Vec<C64> = xs.iter().zip(&ys).map(|(&x, &y)| C64::new(x, y)).collect();
    let ix = values(&mut rng, n - 9, LOG_B + r.frac);
    let iy = values(&mut rng, n - 9, LOG_B + r.frac);
    let zi: Vec<C64> = ix
        .iter()
        .zip(&iy)
        .map(|(&x, &y)| C64::new(x as f64 / f, y as f64 / f))
        .collect();
    let cts = vec![
        encrypt(&ck, &sk, &z, 2, &mut rng),
        encrypt(&ck, &sk, &zi, 1, &mut rng),
    ];
    let dec = ck.decrypt_decode(&sk, &cts[0]).unwrap();
    let t0 = std::time::Instant::now();
    let ((s0, _), (s1, _)) = run_c2m(&ck, &sk, &plan, &cts);
    let elapsed = t0.elapsed();
    let eps = plan.error_bound_ulp();
    let (gx, gy) = (
        open(&r, &s0[0].re, &s1[0].re),
        open(&r, &s0[0].im, &s1[0].im),
    );
    let mut worst = 0f64;
    for k in 0..n {
        worst = worst
            .max((gx[k] as f64 - dec[k].re * f).abs())
            .max((gy[k] as f64 - dec[k].im * f).abs());
    }
    // The re-randomization by Enc_pk(0) adds ≈ 2^-12 ulp of noise to what P0 decrypts.
    assert!(worst <= 0.5 + eps + 1e-3, "C2M N=2^16: {worst} > ½ + {eps}");
    let (gx, gy) = (
        open(&r, &s0[1].re, &s1[1].re),
        open(&r, &s0[1].im, &s1[1].im),
    );
    for k in 0..n {
        assert_eq!((gx[k], gy[k]), (ix[k], iy[k]), "slot {k}");
    }
    println!(
        "C2M N=2^16 (2 ciphertexts, {elapsed:?}): max {worst:.5} ulp vs decrypted (≤ ½ + {eps:.4}), \
         fixed point exact in {} slots; t {}, shifts {:?}, failure 2^{:.2}",
        2 * n,
        plan.twiddle_bits(),
        plan.shifts(),
        plan.failure_log2()
    );
}

/// M2C end to end (Ring2Field, fast map, encryption; decrypt and compare) at `N = 2^log_n`:
/// per-slot error below ½ ulp of `2^F` in real and imaginary parts.
fn m2c_end_to_end(log_n: u32) {
    let p = params_logn(log_n);
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
    let mut rng = seeded(800 + log_n as u64);
    let sk = ck.gen_secret_key(&mut rng);
    let n = p.max_slots();
    let level = 2;
    let plan = M2cPlan::new(&p, level, n, SCALE, cfg()).unwrap();
    let r = RingCfg::ENCFORMER;
    let xs = boundary_values(&mut rng, n);
    let ys = boundary_values(&mut rng, n);
    let (x0, x1) = share_vec(&r, &xs, &mut rng);
    let (y0, y1) = share_vec(&r, &ys, &mut rng);
    let in0 = vec![ComplexShares { re: x0, im: y0 }];
    let in1 = vec![ComplexShares { re: x1, im: y1 }];
    let t0 = std::time::Instant::now();
    let (_, (cts, _)) = run_mem(
        MpcConfig::ENCFORMER,
        |pp, t| drive(pp.channel(), m2c_p0(pp, &ck, &sk, &plan, &in0), t).unwrap(),
        |pp, t| drive(pp.channel(), m2c_p1(pp, &ck, &plan, &in1), t).unwrap(),
    );
    let elapsed = t0.elapsed();
    let f = (1u64 << r.frac) as f64;
    let d = ck.decrypt_decode(&sk, &cts[0]).unwrap();
    let (mut worst, mut sum) = (0f64, 0f64);
    for k in 0..n {
        let (wx, wy) = (r.decode(r.encode(xs[k])), r.decode(r.encode(ys[k])));
        let (er, ei) = ((d[k].re - wx).abs() * f, (d[k].im - wy).abs() * f);
        worst = worst.max(er).max(ei);
        sum += er + ei;
    }
    println!(
        "M2C N=2^{log_n} ({n} slots, {elapsed:?}): slot error max {worst:.2e} mean {:.2e} ulp \
         (fixed-point bound {:.2e}, t {}, g {}, failure 2^{:.1})",
        sum / (2 * n) as f64,
        plan.error_bound_ulp(),
        plan.twiddle_bits(),
        plan.guard_bits(),
        plan.failure_log2()
    );
    assert!(worst < 0.5, "M2C N=2^{log_n}: error {worst} ulp");
}

#[test]
fn m2c_end_to_end_logn12_to_14() {
    for log_n in 12..=14 {
        m2c_end_to_end(log_n);
    }
}

#[test]
fn m2c_end_to_end_logn16() {
    m2c_end_to_end(16);
}

/// Budgets that do not close are typed errors: a scale too large for the `2^K` output ring,
/// a σ too large for the wide ring, `B_max` beyond `Z_{2^ℓ}`, a scale too small for `n` slots.
#[test]
fn m2c_budget_errors_are_typed() {
    let (ck, _, _) = setup();
    let p = ck.params();
    let n = p.max_slots();
    let top = p.max_level();
    let huge = libm_pow2(100);
    assert!(matches!(
        M2cPlan::new(p, top, n, huge, cfg()),
        Err(ConvertError::Budget(_))
    ));
    assert!(matches!(
        M2cPlan::new(p, 1, n, huge, cfg()),
        Err(ConvertError::ModulusTooSmall { .. })
    ));
    assert!(matches!(
        M2cPlan::new(
            p,
            top,
            n,
            SCALE,
            BoundaryCfg {
                sigma: 110,
                ..cfg()
            }
        ),
        Err(ConvertError::Budget(_))
    ));
    assert!(matches!(
        M2cPlan::new(p, top, n, SCALE, BoundaryCfg::encformer(40)),
        Err(ConvertError::Budget(_))
    ));
    assert!(matches!(
        M2cPlan::new(p, top, n, libm_pow2(22), cfg()),
        Err(ConvertError::Budget(_))
    ));
    assert!(matches!(
        M2cPlan::new(p, top, n, f64::NAN, cfg()),
        Err(ConvertError::Budget(_))
    ));
    // The Table VII setting closes with margin; the direct reference map's budget does not
    // close at B_max = 2^12, the fast map's does; at B_max = 2^20 the twiddles would need more
    // than 52 bits.
    let big = params::ckks_128_custom(16, 8, 3).validate().unwrap();
    let t7 = M2cPlan::new(&big, 8, 1 << 15, SCALE, cfg()).unwrap();
    println!(
        "Table VII M2C: t {} g {} bits {:?} error {:.4} ulp coeff error {:.1} failure 2^{:.1}",
        t7.twiddle_bits(),
        t7.guard_bits(),
        t7.value_bits(),
        t7.error_bound_ulp(),
        t7.coeff_error_bound(),
        t7.failure_log2()
    );
    assert!(t7.error_bound_ulp() < 0.125 && t7.failure_log2() < -40.0);
    let wide = M2cPlan::new(&big, 8, 1 << 15, SCALE, BoundaryCfg::encformer(12)).unwrap();
    assert!(wide.direct_twiddle_bits().is_none() && wide.error_bound_ulp() < 0.125);
    println!(
        "B_max = 2^12: t {} bits {:?} failure 2^{:.1}",
        wide.twiddle_bits(),
        wide.value_bits(),
        wide.failure_log2()
    );
    assert!(matches!(
        M2cPlan::new(&big, 8, 1 << 15, SCALE, BoundaryCfg::encformer(20)),
        Err(ConvertError::Budget(_))
    ));
    assert!(matches!(
        wide.encode_map(&[0; 1 << 15], &[]),
        Err(ConvertError::Budget(_))
    ));
}

fn libm_pow2(e: i32) -> f64 {
    2f64.powi(e)
}

/// Timing of the M2C encoding maps at the Table VII size (`n = 2^15`): the direct `O(n²)`
/// reference map on one share against the fast map on both parties' shares. Slow (the direct
/// map takes tens of seconds): `cargo test -p veil-tests --test convert_e2e -- --ignored`.
#[test]
#[ignore]
fn m2c_map_timing_table_vii() {
    let p = params::ckks_128_custom(16, 8, 3).validate().unwrap();
    let n = 1 << 15;
    let m = M2cPlan::new(&p, 8, n, SCALE, cfg()).unwrap();
    let mut rng = seeded(900);
    let r = RingCfg::ENCFORMER;
    let xs: Vec<i64> = boundary_values(&mut rng, n)
        .iter()
        .map(|&x| r.to_signed(r.encode(x)))
        .collect();
    let ys = xs.iter().rev().copied().collect::<Vec<_>>();
    let t0 = std::time::Instant::now();
    let _ = fast_map_open(&m, &xs, &ys, &mut rng);
    let fast = t0.elapsed();
    let mask = (1u128 << K_BITS) - 1;
    let sx: Vec<u128> = xs.iter().map(|&v| v as i128 as u128 & mask).collect();
    let sy: Vec<u128> = ys.iter().map(|&v| v as i128 as u128 & mask).collect();
    let t0 = std::time::Instant::now();
    let _ = m.encode_map(&sx, &sy).unwrap();
    let direct = t0.elapsed();
    println!("n = 2^15: fast map (both parties) {fast:?}; direct map (one party) {direct:?}");
}
