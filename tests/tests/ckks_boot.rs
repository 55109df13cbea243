//! CKKS bootstrapping: at N = 2^12 (`INSECURE_LOGN12_BOOT_H64`) the factored FFTs against the
//! encoder in `f64`, a full-slot, a constant and a sparse-slot bootstrap against the input values
//! with precision statistics, the same chain with a dense (uniform ternary) main secret, a chain
//! that alternates computation and bootstrapping, and the typed refusals; at N = 2^16 the 128-bit
//! set (dense main secret), its precision asserted.

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::circuits::boot::fft_groups;
use veil_core::circuits::{BootKeys, BootParams, Bootstrapper, Lean};
use veil_core::ckks::{Ciphertext, Ckks, PrecisionStats, SecretKey, C64};
use veil_core::params;
use veil_tests::*;

// The N = 2^16 test allocates and frees large buffers at a high rate (as the `veil` binary,
// which uses mimalloc for the same reason).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bitrev<T: Copy>(v: &[T]) -> Vec<T> {
    let n = v.len();
    let bits = n.trailing_zeros();
    (0..n)
        .map(|i| v[(i.reverse_bits() >> (usize::BITS - bits)) % n])
        .collect()
}

/// The merged FFT groups are the encoder's maps: CoeffToSlot gives the bit-reversed coefficient
/// vector of what the encoder produces, and SlotToCoeff undoes it, for every group count.
#[test]
fn fft_groups_are_the_encoders_maps() {
    let p = params::insecure_logn12().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
    for n in [8usize, 64, 2048] {
        let mut rng = test_rng(n as u64);
        let z = random_values(&mut rng, n, 1.0);
        let scale = (1u64 << 50) as f64;
        let coeffs = ck.encoder().encode_subring(&z, n, scale).unwrap();
        let v: Vec<C64> = (0..n)
            .map(|k| C64::new(coeffs[k] as f64 / scale, coeffs[k + n] as f64 / scale))
            .collect();
        let want = bitrev(&v);
        let stages = n.trailing_zeros() as usize;
        for groups in 1..=stages.min(4) {
            let cts = fft_groups(n, groups, true, C64::real(1.0)).unwrap();
            assert_eq!(cts.len(), groups);
            let mut w = z.clone();
            for t in &cts {
                w = t.apply(&w).unwrap();
            }
            let err = want
                .iter()
                .zip(&w)
                .map(|(a, b)| (*a - *b).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-12, "n {n} groups {groups}: {err:e}");
            let stc = fft_groups(n, groups, false, C64::real(1.0)).unwrap();
            for t in &stc {
                w = t.apply(&w).unwrap();
            }
            let err = z
                .iter()
                .zip(&w)
                .map(|(a, b)| (*a - *b).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-12, "n {n} groups {groups} round trip: {err:e}");
            // A merged group of s stages has at most 2^{s+1} − 1 diagonals.
            for t in &cts {
                let s = stages.div_ceil(groups);
                assert!(t.diagonal_indices().len() < 1 << (s + 1));
            }
        }
    }
    assert!(fft_groups(6, 1, true, C64::real(1.0)).is_err());
    assert!(fft_groups(8, 4, true, C64::real(1.0)).is_err());
}

struct Setup {
    ck: Ckks<CpuBackend>,
    sk: SecretKey,
    keys: BootKeys<CpuBackend>,
    boot: Bootstrapper<CpuBackend>,
}

fn setup(slots: usize, seed: u64) -> Setup {
    setup_with(params::insecure_logn12_boot(), slots, seed)
}

/// The N = 2^12 bootstrapping chain with a uniform ternary (dense) main secret, as the 128-bit
/// set has: only the ephemeral secret of the encapsulation is sparse.
fn insecure_logn12_boot_dense() -> params::CkksParamsLiteral {
    let mut lit = params::insecure_logn12_boot();
    lit.secret = params::SecretDistribution::UniformTernary;
    lit.name = "INSECURE_LOGN12_BOOT_DENSE".into();
    lit
}

fn setup_with(lit: params::CkksParamsLiteral, slots: usize, seed: u64) -> Setup {
    let p = lit.validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut bp = BootParams::for_params(&p).unwrap();
    bp.slots = slots;
    println!("{bp:?}");
    let boot = Bootstrapper::new(&ck, bp).unwrap();
    println!("{:?}, {} plaintexts", boot.levels(), boot.plaintexts());
    let mut rng = test_rng(seed);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = boot
        .gen_keys(&ck, &sk, &[], Lean::None, &mut rng, |_, _| {})
        .unwrap();
    println!("{} rotation keys, {keys:?}", boot.rotations().len());
    Setup { ck, sk, keys, boot }
}

fn fresh_at_zero(s: &Setup, x: &[C64], seed: u64) -> Ciphertext<CpuBackend> {
    let p = s.ck.params();
    let mut rng = test_rng(seed);
    let n = s.boot.params().slots;
    let pt = s.ck.encode(x, n, 0, p.default_scale()).unwrap();
    s.ck.encrypt_sk(&s.sk, &pt, &mut rng).unwrap()
}

fn check_boot(slots: usize, seed: u64, x: Option<Vec<C64>>) -> PrecisionStats {
    check_boot_with(params::insecure_logn12_boot(), slots, seed, x)
}

fn check_boot_with(
    lit: params::CkksParamsLiteral,
    slots: usize,
    seed: u64,
    x: Option<Vec<C64>>,
) -> PrecisionStats {
    let s = setup_with(lit, slots, seed);
    let mut rng = test_rng(seed + 1);
    let x = x.unwrap_or_else(|| random_values(&mut rng, slots, 1.0));
    let ct = fresh_at_zero(&s, &x, seed + 2);
    let t = std::time::Instant::now();
    let (out, cost) = s.boot.bootstrap(&s.ck, &s.keys, &ct).unwrap();
    println!("bootstrap {slots} slots: {:.2?}, {cost:?}", t.elapsed());
    assert_eq!(out.level(), s.boot.levels().output);
    assert!((out.scale() / ct.scale() - 1.0).abs() < 1e-9);
    let st = PrecisionStats::compute(&x, &s.ck.decrypt_decode(&s.sk, &out).unwrap());
    println!("bootstrap {slots} slots: {st}");
    st
}

/// All N/2 slots, uniform complex inputs in [-1, 1] + i[-1, 1].
#[test]
fn bootstrap_full_slots() {
    let st = check_boot(2048, 1, None);
    // Measured 25.9 worst slot, 28.6 mean.
    assert!(st.min_bits() > 24.5, "{st}");
    assert!(st.real.avg_bits.min(st.imag.avg_bits) > 27.5, "{st}");
}

/// A uniform ternary (dense) main secret, as the 128-bit set has: encapsulated to weight 32 for
/// ModRaise, then everything after the switch back runs under the dense secret, whose rescaling
/// and key-switching roundings (`ε·s`, `‖s‖² ≈ 2N/3` instead of `h`) are larger. With the dense
/// default message ratio (11, one bit more lift), the output against the `f64` input stays within
/// a bit of the sparse secret's (`bootstrap_full_slots`).
#[test]
fn bootstrap_full_slots_dense_secret() {
    let st = check_boot_with(insecure_logn12_boot_dense(), 2048, 1, None);
    // Measured 25.5 worst slot, 27.7 mean (sparse h = 64: 26.4, 28.6; dense at the sparse
    // secret's message ratio 12: 24.3, 26.7).
    assert!(st.min_bits() > 24.5, "{st}");
    assert!(st.real.avg_bits.min(st.imag.avg_bits) > 27.0, "{st}");
}

/// Lean Galois keys (their `a` halves regenerated from the seeds at each use) take less memory
/// and bootstrap to the same words as whole keys made from the same randomness; they serialize
/// to the same bytes.
#[test]
fn lean_keys_bootstrap_identically() {
    let s = setup(2048, 11);
    let mut rng = test_rng(12);
    let lean = s
        .boot
        .gen_keys(&s.ck, &s.sk, &[], Lean::All, &mut rng, |_, _| {})
        .unwrap();
    let mut rng = test_rng(12);
    let whole = s
        .boot
        .gen_keys(&s.ck, &s.sk, &[], Lean::None, &mut rng, |_, _| {})
        .unwrap();
    let be = s.ck.backend();
    let (ml, mw) = (lean.memory_bytes(be), whole.memory_bytes(be));
    println!("lean keys {ml} bytes, whole {mw}");
    assert!(ml * 10 < mw * 6, "lean keys are about half the size");
    let mut rng = test_rng(13);
    let x = random_values(&mut rng, 2048, 1.0);
    let ct = fresh_at_zero(&s, &x, 14);
    let (a, _) = s.boot.bootstrap(&s.ck, &lean, &ct).unwrap();
    let (b, _) = s.boot.bootstrap(&s.ck, &whole, &ct).unwrap();
    let bits = |c: &Ciphertext<CpuBackend>| -> Vec<u64> {
        s.ck.decrypt_decode(&s.sk, c)
            .unwrap()
            .iter()
            .flat_map(|v| [v.re.to_bits(), v.im.to_bits()])
            .collect()
    };
    assert_eq!(bits(&a), bits(&b), "the same words");
    for (g, k) in &lean.eval.galois {
        let w = &whole.eval.galois[g];
        for compressed in [true, false] {
            assert_eq!(
                s.ck.serialize_switching_key(k, compressed).unwrap(),
                s.ck.serialize_switching_key(w, compressed).unwrap()
            );
        }
    }
}

/// The bootstrapping keys, encapsulation keys included, travel as bytes (seed-compressed or
/// not; lean keys too) and bootstrap to the same words after the round trip; truncated,
/// corrupted or foreign bytes are typed errors.
#[test]
fn boot_keys_round_trip() {
    let s = setup(2048, 21);
    let mut rng = test_rng(22);
    let x = random_values(&mut rng, 2048, 1.0);
    let ct = fresh_at_zero(&s, &x, 23);
    let words = |keys: &BootKeys<CpuBackend>| -> Vec<u64> {
        let (out, _) = s.boot.bootstrap(&s.ck, keys, &ct).unwrap();
        s.ck.decrypt_decode(&s.sk, &out)
            .unwrap()
            .iter()
            .flat_map(|v| [v.re.to_bits(), v.im.to_bits()])
            .collect()
    };
    let want = words(&s.keys);
    let mut rng = test_rng(24);
    let lean = s
        .boot
        .gen_keys(&s.ck, &s.sk, &[], Lean::All, &mut rng, |_, _| {})
        .unwrap();
    let lean_want = words(&lean);
    for compressed in [true, false] {
        let bytes = s.keys.to_bytes(&s.ck, compressed).unwrap();
        println!("boot keys, compressed {compressed}: {} bytes", bytes.len());
        let back = BootKeys::from_bytes(&s.ck, &bytes).unwrap();
        assert_eq!(words(&back), want);
        let lb = lean.to_bytes(&s.ck, compressed).unwrap();
        assert_eq!(words(&BootKeys::from_bytes(&s.ck, &lb).unwrap()), lean_want);
        for cut in [0, 1, 2, 9, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                BootKeys::from_bytes(&s.ck, &bytes[..cut]).is_err(),
                "cut {cut}"
            );
        }
        let mut bad = bytes.clone();
        bad[0] ^= 0x40;
        assert!(BootKeys::from_bytes(&s.ck, &bad).is_err());
        let mut long = bytes.clone();
        long.push(0);
        assert!(BootKeys::from_bytes(&s.ck, &long).is_err());
    }
    let c = s.keys.to_bytes(&s.ck, true).unwrap().len();
    let u = s.keys.to_bytes(&s.ck, false).unwrap().len();
    assert!(c * 10 < u * 6, "seed-compressed is about half: {c} vs {u}");
    // Under other parameters.
    let other = params::insecure_logn12_boot().validate().unwrap();
    let mut lit = other.literal().clone();
    lit.log_default_scale += 1;
    if let Ok(p2) = lit.validate() {
        let ck2 = Ckks::new(Arc::new(CpuBackend::fast(&p2, 1).unwrap()));
        let bytes = s.keys.to_bytes(&s.ck, true).unwrap();
        assert!(BootKeys::from_bytes(&ck2, &bytes).is_err());
    }
}

/// A constant input of magnitude 1 puts the whole message in one coefficient at its largest:
/// the sine's relative error `(2π·2^-12)²/6 = 2^-21.4` is met there.
#[test]
fn bootstrap_constant_input() {
    let x = vec![C64::new(1.0, -1.0); 2048];
    let st = check_boot(2048, 4, Some(x));
    assert!(st.min_bits() > 20.0, "{st}");
}

/// The same constant input under a dense main secret, whose defaults lift the input one bit
/// further (`log_message_ratio` 11; with `q_0` just under `2^60`, `q_0/(2^k·Δ)` is just under
/// `2^12`): the sine's relative error `2^-21.4` bounds the worst coefficient.
#[test]
fn bootstrap_constant_input_dense_secret() {
    let x = vec![C64::new(1.0, -1.0); 2048];
    let st = check_boot_with(insecure_logn12_boot_dense(), 2048, 4, Some(x));
    // Measured 21.2 (the sparse secret's ratio 12: 23.1).
    assert!(st.min_bits() > 20.5, "{st}");
}

/// Sparse slots (n = 256 of 2048): SubSum folds the other coefficients away first.
#[test]
fn bootstrap_sparse_slots() {
    let st = check_boot(256, 6, None);
    // Measured 28.5 worst slot.
    assert!(st.min_bits() > 26.5, "{st}");
}

/// Three rounds of computation then bootstrapping: each round squares the values and adds the
/// input back (x ← x²·0.5 + x₀·0.5, which stays in the unit disc), using the levels a bootstrap
/// leaves; the precision after each refresh stays at the single bootstrap's.
#[test]
fn chain_of_bootstraps_keeps_precision() {
    let s = setup(2048, 9);
    let p = s.ck.params();
    let mut rng = test_rng(10);
    let x0 = random_values(&mut rng, 2048, 0.7);
    let mut want = x0.clone();
    let mut ct = fresh_at_zero(&s, &x0, 11);
    for round in 0..3 {
        let (mut y, _) = s.boot.bootstrap(&s.ck, &s.keys, &ct).unwrap();
        let st = PrecisionStats::compute(&want, &s.ck.decrypt_decode(&s.sk, &y).unwrap());
        println!("round {round}: after bootstrap {st}");
        assert!(st.min_bits() > 24.5, "round {round}: {st}");
        // x² / 2 + x₀ / 2 on two of the levels left; the constant's scale brings the result
        // back to exactly Δ, as the next bootstrap wants.
        let mut sq = s.ck.mul_relin(&y, &y, &s.keys.eval).unwrap();
        s.ck.rescale_assign(&mut sq).unwrap();
        let fix = p.default_scale() * s.ck.rescale_prime(sq.level()) / sq.scale();
        s.ck.mul_const_assign(&mut sq, C64::real(0.5), fix).unwrap();
        s.ck.rescale_assign(&mut sq).unwrap();
        assert!((sq.scale() / p.default_scale() - 1.0).abs() < 1e-9);
        let half: Vec<C64> = x0.iter().map(|v| *v * C64::real(0.5)).collect();
        let half = s.ck.encode(&half, 2048, sq.level(), sq.scale()).unwrap();
        s.ck.add_plain_assign(&mut sq, &half).unwrap();
        want = want
            .iter()
            .zip(&x0)
            .map(|(w, a)| *w * *w * C64::real(0.5) + *a * C64::real(0.5))
            .collect();
        y = sq;
        let st = PrecisionStats::compute(&want, &s.ck.decrypt_decode(&s.sk, &y).unwrap());
        println!("round {round}: after computing {st}");
        ct = y;
    }
}

#[test]
fn bootstrap_refuses_bad_settings_and_inputs() {
    // A dense secret is always encapsulated (its own I would need K of order √N): the defaults
    // match a sparse secret's but for the message ratio (one bit lower), and settings without
    // encapsulation are refused.
    let dense = insecure_logn12_boot_dense().validate().unwrap();
    let sparse = params::insecure_logn12_boot().validate().unwrap();
    let dense_bp = BootParams::for_params(&dense).unwrap();
    let sparse_bp = BootParams::for_params(&sparse).unwrap();
    assert_eq!(dense_bp.ephemeral_weight, Some(32));
    assert_eq!(
        (dense_bp.log_message_ratio, sparse_bp.log_message_ratio),
        (11.0, 12.0)
    );
    assert_eq!(
        BootParams {
            log_message_ratio: 12.0,
            ..dense_bp.clone()
        },
        sparse_bp
    );
    let dense_ck = Ckks::new(Arc::new(CpuBackend::scalar(&dense)));
    let unencapsulated = BootParams {
        ephemeral_weight: None,
        ..dense_bp
    };
    assert!(matches!(
        Bootstrapper::new(&dense_ck, unencapsulated),
        Err(veil_core::Error::InvalidParameters(_))
    ));
    // Outside INSECURE_ sets, the encapsulation key's modulus q_0·p_0 must be within the
    // sparse table's bound for weight 32 (121 bits at N = 2^16): the 128-bit set's (61 + 60
    // bits, just under 121) is, 61-bit q_0 and p_0 (about 122 bits) are not.
    let secure = params::ckks_128_logn16_boot();
    let p16 = secure.validate().unwrap();
    let bits = |m: u64| (m as f64).log2();
    assert!(bits(p16.q()[0].value()) + bits(p16.p()[0].value()) <= 121.0);
    let mut wide = secure.clone();
    wide.log_p[0] = 61;
    wide.name = "CKKS_128_LOGN16_BOOT_WIDE_P0".into();
    let wide = wide.validate().unwrap();
    assert!(bits(wide.q()[0].value()) + bits(wide.p()[0].value()) > 121.0);
    let wide_ck = Ckks::new(Arc::new(CpuBackend::scalar(&wide)));
    assert!(matches!(
        Bootstrapper::new(&wide_ck, BootParams::for_params(&wide).unwrap()),
        Err(veil_core::Error::InsecureParameters { max_log_qp, .. }) if max_log_qp == 121.0
    ));
    // Too few levels.
    let mut lit = params::insecure_logn12();
    lit.secret = params::SecretDistribution::SparseTernary { h: 64 };
    let few = lit.validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&few)));
    assert!(Bootstrapper::new(&ck, BootParams::for_params(&few).unwrap()).is_err());
    // Settings out of range.
    let p = params::insecure_logn12_boot().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
    let good = BootParams::for_params(&p).unwrap();
    for bad in [
        BootParams {
            slots: 3,
            ..good.clone()
        },
        BootParams {
            slots: 4096,
            ..good.clone()
        },
        BootParams {
            cts_levels: 0,
            ..good.clone()
        },
        BootParams {
            stc_levels: 12,
            ..good.clone()
        },
        BootParams {
            k: f64::NAN,
            ..good.clone()
        },
        BootParams {
            log_message_ratio: 4.0,
            ..good.clone()
        },
        BootParams {
            input_scale: (1u64 << 58) as f64,
            ..good.clone()
        },
    ] {
        assert!(Bootstrapper::new(&ck, bad).is_err());
    }
    // Inputs: wrong slots, wrong scale, degree 2.
    let s = setup(2048, 12);
    let mut rng = test_rng(13);
    let x = random_values(&mut rng, 1024, 1.0);
    let pt = s.ck.encode(&x, 1024, 0, p.default_scale()).unwrap();
    let ct = s.ck.encrypt_sk(&s.sk, &pt, &mut rng).unwrap();
    assert!(s.boot.bootstrap(&s.ck, &s.keys, &ct).is_err());
    let x = random_values(&mut rng, 2048, 1.0);
    let pt = s.ck.encode(&x, 2048, 0, p.default_scale() * 2.0).unwrap();
    let ct = s.ck.encrypt_sk(&s.sk, &pt, &mut rng).unwrap();
    assert!(s.boot.bootstrap(&s.ck, &s.keys, &ct).is_err());
    let pt = s.ck.encode(&x, 2048, 3, p.default_scale()).unwrap();
    let ct = s.ck.encrypt_sk(&s.sk, &pt, &mut rng).unwrap();
    let sq = s.ck.mul_no_relin(&ct, &ct).unwrap();
    assert!(s.boot.bootstrap(&s.ck, &s.keys, &sq).is_err());
    let pt = s.ck.encode(&x, 2048, 0, p.default_scale()).unwrap();
    let ct = s.ck.encrypt_sk(&s.sk, &pt, &mut rng).unwrap();
    // Keys made for other settings (no encapsulation pair).
    let mut other = s.boot.params().clone();
    other.ephemeral_weight = None;
    let plain = Bootstrapper::new(&s.ck, other).unwrap();
    let unmatched = plain
        .gen_keys(&s.ck, &s.sk, &[], Lean::None, &mut rng, |_, _| {})
        .unwrap();
    assert!(s.boot.bootstrap(&s.ck, &unmatched, &ct).is_err());
    // Missing Galois keys.
    let mut missing = s
        .boot
        .gen_keys(&s.ck, &s.sk, &[], Lean::None, &mut rng, |_, _| {})
        .unwrap();
    missing.eval =
        s.ck.gen_evaluation_keys(&s.sk, &[], false, &mut rng, |_, _| {})
            .unwrap();
    assert!(s.boot.bootstrap(&s.ck, &missing, &ct).is_err());
}

/// The 128-bit set at N = 2^16 (`CKKS_128_LOGN16_BOOT_LOGQP1731`, a uniform ternary main secret
/// encapsulated to a weight-32 one for ModRaise), all 2^15 slots: min, mean and median precision
/// of the real and imaginary parts against the `f64` input, each asserted, and the 10 levels
/// left. About 1.5 min and 8 GB on 2 cores (`veil-bench boot` times it).
#[test]
fn bootstrap_logn16_128bit() {
    let p = params::ckks_128_logn16_boot().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let bp = BootParams::for_params(&p).unwrap();
    let boot = Bootstrapper::new(&ck, bp).unwrap();
    assert_eq!(boot.levels().output, 10);
    let mut rng = test_rng(16);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = boot
        .gen_keys(&ck, &sk, &[], Lean::None, &mut rng, |_, _| {})
        .unwrap();
    let n = p.max_slots();
    let x = random_values(&mut rng, n, 1.0);
    let pt = ck.encode(&x, n, 0, p.default_scale()).unwrap();
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).unwrap();
    let (out, cost) = boot.bootstrap(&ck, &keys, &ct).unwrap();
    println!("N = 2^16: {cost:?}");
    assert_eq!(out.level(), 10);
    let st = PrecisionStats::compute(&x, &ck.decrypt_decode(&sk, &out).unwrap());
    println!("N = 2^16 bootstrap: {st}");
    // Measured 20.3 / 22.8 / 23.0 (real) and 20.4 / 22.8 / 23.0 (imaginary); with the old
    // weight-192 main secret (now refused), 22.0 / 24.6 / 24.8.
    for part in [st.real, st.imag] {
        assert!(part.min_bits > 19.8, "{st}");
        assert!(part.avg_bits > 22.3, "{st}");
        assert!(part.median_bits > 22.5, "{st}");
    }
}
