//! Per-primitive tests: both parties as threads over the in-memory duplex,
//! random inputs plus edge values, outputs reconstructed and compared with
//! the plaintext reference. `VEIL_TEST_OT=silent cargo test -p veil-tests --test
//! mpc_primitives` runs the whole suite over silent-OT pools (see
//! `mpc_common::silent_mode`).

mod mpc_common;
use mpc_common::*;
use veil_core::mpc::arith::{bcast, rowsum};
use veil_core::mpc::{BoolShares, FieldShares, Modulus, MpcConfig, MpcError, RingCfg, TruncMode};
use veil_host::mpc::drive;

const N: usize = 300;

fn q104() -> Modulus {
    Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap()
}

#[test]
fn mul_fixed_point_both_trunc_modes() {
    for (cfg, xb, yb) in [
        (MpcConfig::ENCFORMER, 28u32, 13u32),
        (
            MpcConfig {
                trunc: TruncMode::FullRange,
                ..MpcConfig::ENCFORMER
            },
            29,
            14,
        ),
        (
            MpcConfig {
                trunc: TruncMode::Exact,
                ..MpcConfig::ENCFORMER
            },
            29,
            14,
        ),
        (
            MpcConfig {
                ring: RingCfg::new(64, 20).unwrap(),
                ..MpcConfig::ENCFORMER
            },
            40,
            21,
        ),
    ] {
        let r = cfg.ring;
        let mut rng = seeded(1);
        let xs = values(&mut rng, N, xb);
        let ys = values(&mut rng, N, yb);
        let (x0, x1) = share(&r, &xs, &mut rng);
        let (y0, y1) = share(&r, &ys, &mut rng);
        let (z0, z1) = run_mem(
            cfg,
            |p, t| drive(p.channel(), p.mul(&x0, &y0), t).unwrap(),
            |p, t| drive(p.channel(), p.mul(&x1, &y1), t).unwrap(),
        );
        let z = open(&r, &z0, &z1);
        // Mean error against the real quotient: the rounding offset and the
        // dropped carry (≈ Bernoulli(½)) give ≈ −½ ulp (plain floor: ≈ −1).
        let bias: f64 = (0..xs.len())
            .map(|k| z[k] as f64 - xs[k] as f64 * ys[k] as f64 / (1u64 << r.frac) as f64)
            .sum::<f64>()
            / xs.len() as f64;
        if cfg.trunc == TruncMode::Exact {
            // Exact rounding: unbiased.
            assert!(bias.abs() < 0.1, "{cfg:?}: mean error {bias} ulp");
        } else {
            assert!(bias > -0.8 && bias < -0.2, "{cfg:?}: mean error {bias} ulp");
        }
        for k in 0..xs.len() {
            // ⌊x·y/2^F⌉ or one less.
            let exact = ((xs[k] as i128 * ys[k] as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
            assert!(
                z[k] == exact || (z[k] == exact - 1 && cfg.trunc != TruncMode::Exact),
                "{cfg:?}: {} * {} -> {} (want {exact})",
                xs[k],
                ys[k],
                z[k]
            );
        }
    }
}

#[test]
fn trunc_and_public_mul() {
    for mode in [TruncMode::KnownMsb, TruncMode::FullRange, TruncMode::Exact] {
        let cfg = MpcConfig {
            trunc: mode,
            ..MpcConfig::ENCFORMER
        };
        let r = cfg.ring;
        let mut rng = seeded(2);
        let bound = if mode == TruncMode::KnownMsb {
            r.ell - 2
        } else {
            r.ell - 1
        };
        let xs = values(&mut rng, N, bound);
        let (x0, x1) = share(&r, &xs, &mut rng);
        let small = values(&mut rng, N, 26);
        let (s0, s1) = share(&r, &small, &mut rng);
        let c = r.encode(-1.75);
        let ((t0, m0), (t1, m1)) = run_mem(
            cfg,
            |p, t| {
                let a = drive(p.channel(), p.trunc(&x0, 13), t).unwrap();
                (a, drive(p.channel(), p.mul_public(&s0, c), t).unwrap())
            },
            |p, t| {
                let a = drive(p.channel(), p.trunc(&x1, 13), t).unwrap();
                (a, drive(p.channel(), p.mul_public(&s1, c), t).unwrap())
            },
        );
        let tz = open(&r, &t0, &t1);
        for k in 0..xs.len() {
            let e = xs[k] >> 13;
            let exact_ok = mode != TruncMode::Exact || tz[k] == e;
            assert!(
                (tz[k] == e || tz[k] == e - 1) && exact_ok,
                "{mode:?} trunc {} -> {} (want {e})",
                xs[k],
                tz[k]
            );
        }
        let mz = open(&r, &m0, &m1);
        for k in 0..small.len() {
            let e = ((small[k] as i128 * r.to_signed(c) as i128 + 4096) >> 13) as i64;
            let exact_ok = mode != TruncMode::Exact || mz[k] == e;
            assert!(
                (mz[k] == e || mz[k] == e - 1) && exact_ok,
                "public mul {} -> {} (want {e})",
                small[k],
                mz[k]
            );
        }
    }
}

#[test]
fn comparison_msb_drelu_relu_less() {
    for radix in [2u32, 4, 5] {
        let cfg = MpcConfig {
            radix_bits: radix,
            ..MpcConfig::ENCFORMER
        };
        let r = cfg.ring;
        let mut rng = seeded(3);
        let xs = values(&mut rng, N, r.ell);
        let (x0, x1) = share(&r, &xs, &mut rng);
        let as_ = values(&mut rng, N, r.ell - 2);
        let mut bs = values(&mut rng, N, r.ell - 2);
        bs[..20].copy_from_slice(&as_[..20]); // equal pairs
        let (a0, a1) = share(&r, &as_, &mut rng);
        let (b0, b1) = share(&r, &bs, &mut rng);
        // Raw millionaires on unsigned inputs with edges.
        let mut u: Vec<u64> = (0..N).map(|_| rng.next_u64() & r.mask()).collect();
        let mut v: Vec<u64> = (0..N).map(|_| rng.next_u64() & r.mask()).collect();
        u.extend([0, r.mask(), r.mask(), 0, 1 << 42, (1 << 42) - 1, 12345]);
        v.extend([0, r.mask(), 0, r.mask(), (1 << 42) - 1, 1 << 42, 12345]);
        let ell = r.ell;
        use rand_core::RngCore;
        let ((g0, d0, rl0, l0), (g1, d1, rl1, l1)) = run_mem(
            cfg,
            |p, t| {
                let g = drive(p.channel(), p.millionaire(&u, ell), t).unwrap();
                let d = drive(p.channel(), p.drelu(&x0), t).unwrap();
                let rl = drive(p.channel(), p.relu(&x0), t).unwrap();
                let l = drive(p.channel(), p.less_than(&a0, &b0), t).unwrap();
                (g, d, rl, l)
            },
            |p, t| {
                let g = drive(p.channel(), p.millionaire(&v, ell), t).unwrap();
                let d = drive(p.channel(), p.drelu(&x1), t).unwrap();
                let rl = drive(p.channel(), p.relu(&x1), t).unwrap();
                let l = drive(p.channel(), p.less_than(&a1, &b1), t).unwrap();
                (g, d, rl, l)
            },
        );
        for k in 0..u.len() {
            assert_eq!(
                g0.as_slice()[k] ^ g1.as_slice()[k],
                (u[k] > v[k]) as u8,
                "radix {radix}: {} > {}",
                u[k],
                v[k]
            );
        }
        let rl = open(&r, &rl0, &rl1);
        for k in 0..xs.len() {
            assert_eq!(
                d0.as_slice()[k] ^ d1.as_slice()[k],
                (xs[k] >= 0) as u8,
                "drelu {}",
                xs[k]
            );
            assert_eq!(rl[k], xs[k].max(0), "relu {}", xs[k]);
        }
        for k in 0..as_.len() {
            assert_eq!(
                l0.as_slice()[k] ^ l1.as_slice()[k],
                (as_[k] < bs[k]) as u8,
                "{} < {}",
                as_[k],
                bs[k]
            );
        }
    }
}

#[test]
fn b2a_and_mux() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let mut rng = seeded(4);
    use rand_core::RngCore;
    let xs = values(&mut rng, N, r.ell);
    let (x0, x1) = share(&r, &xs, &mut rng);
    let bits: Vec<u8> = (0..xs.len()).map(|_| (rng.next_u32() & 1) as u8).collect();
    let m0: Vec<u8> = (0..xs.len()).map(|_| (rng.next_u32() & 1) as u8).collect();
    let m1: Vec<u8> = bits.iter().zip(&m0).map(|(a, b)| a ^ b).collect();
    let (b0, b1) = (BoolShares::new(m0), BoolShares::new(m1));
    let ((a0, s0), (a1, s1)) = run_mem(
        cfg,
        |p, t| {
            (
                drive(p.channel(), p.b2a(&b0), t).unwrap(),
                drive(p.channel(), p.mux(&b0, &x0), t).unwrap(),
            )
        },
        |p, t| {
            (
                drive(p.channel(), p.b2a(&b1), t).unwrap(),
                drive(p.channel(), p.mux(&b1, &x1), t).unwrap(),
            )
        },
    );
    let a = open(&r, &a0, &a1);
    let s = open(&r, &s0, &s1);
    for k in 0..xs.len() {
        assert_eq!(a[k], bits[k] as i64);
        assert_eq!(s[k], if bits[k] == 1 { xs[k] } else { 0 });
    }
}

#[test]
fn ext_ring_field_both_directions() {
    let q = q104();
    for cfg in [
        MpcConfig::ENCFORMER,
        MpcConfig {
            radix_bits: 3,
            ..MpcConfig::ENCFORMER
        },
    ] {
        let r = cfg.ring;
        let mut rng = seeded(5);
        let xs = values(&mut rng, N, r.ell);
        let (x0, x1) = share(&r, &xs, &mut rng);
        // Z_q shares for Field2Ring, with the edge share q-1 on both sides.
        let mut f0: Vec<u128> = xs.iter().map(|_| q.sample(&mut rng)).collect();
        f0[0] = q.value() - 1;
        let mut f1: Vec<u128> = xs
            .iter()
            .zip(&f0)
            .map(|(&x, &a)| q.sub(q.from_signed(x as i128), a))
            .collect();
        f1[1] = q.value() - 1;
        f0[1] = q.sub(q.from_signed(xs[1] as i128), f1[1]);
        let (ff0, ff1) = (FieldShares::new(f0), FieldShares::new(f1));
        let ((y0, z0), (y1, z1)) = run_mem(
            cfg,
            |p, t| {
                (
                    drive(p.channel(), p.ring_to_field(&x0, &q), t).unwrap(),
                    p.field_to_ring(&ff0, &q).unwrap(),
                )
            },
            |p, t| {
                (
                    drive(p.channel(), p.ring_to_field(&x1, &q), t).unwrap(),
                    p.field_to_ring(&ff1, &q).unwrap(),
                )
            },
        );
        assert!(y0.is_reduced(&q) && y1.is_reduced(&q));
        for k in 0..xs.len() {
            assert_eq!(
                q.to_signed(q.add(y0.as_slice()[k], y1.as_slice()[k])),
                xs[k] as i128,
                "r2f {}",
                xs[k]
            );
        }
        assert_eq!(open(&r, &z0, &z1), xs, "f2r");
    }
    // Typed errors for unsupported moduli.
    assert_eq!(Modulus::new(1u128 << 124), Err(MpcError::ModulusTooLarge));
    let small = Modulus::from_primes(&[0xffff_ffff_0000_0001]).unwrap();
    let cfg = MpcConfig::ENCFORMER;
    let (e0, e1) = run_mem(
        cfg,
        |p, _t| {
            p.field_to_ring(&FieldShares::new(vec![1]), &small)
                .unwrap_err()
        },
        |p, _t| {
            p.field_to_ring(&FieldShares::new(vec![1]), &small)
                .unwrap_err()
        },
    );
    assert!(matches!(e0, MpcError::InvalidConfig(_)) && matches!(e1, MpcError::InvalidConfig(_)));
}

#[test]
fn polynomial_rowsum_bcast() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let mut rng = seeded(6);
    let xs: Vec<f64> = (0..256).map(|i| (i as f64 - 128.0) / 32.0).collect();
    let enc: Vec<i64> = xs.iter().map(|&v| r.to_signed(r.encode(v))).collect();
    let (x0, x1) = share(&r, &enc, &mut rng);
    // GELU-like odd polynomial of degree 5.
    let c = [0.5, 0.3989, 0.0, -0.0665, 0.0, 0.005];
    let (y0, y1) = run_mem(
        cfg,
        |p, t| drive(p.channel(), p.poly_eval(&x0, &c), t).unwrap(),
        |p, t| drive(p.channel(), p.poly_eval(&x1, &c), t).unwrap(),
    );
    for (k, &x) in xs.iter().enumerate() {
        // Reference with the coefficients as encoded. Each truncation is
        // within [-2, 0] ulp of the real quotient (floor, then the dropped
        // carry); Horner amplifies step errors by |x| ≤ 4: ≤ 2·(1+4+16+64+256) ulp.
        let want: f64 = c
            .iter()
            .rev()
            .fold(0.0, |acc, &ck| acc * x + r.decode(r.encode(ck)));
        let got = r.decode(r.add(y0.as_slice()[k], y1.as_slice()[k]));
        assert!(
            (got - want).abs() < 682.0 / 8192.0,
            "p({x}) = {got}, want {want}"
        );
    }
    let s0 = rowsum(&x0, 16, 16, r.ell).unwrap();
    let s1 = rowsum(&x1, 16, 16, r.ell).unwrap();
    let s = open(&r, &s0, &s1);
    for row in 0..16 {
        assert_eq!(s[row], enc[row * 16..row * 16 + 16].iter().sum::<i64>());
    }
    let b = open(&r, &bcast(&s0, 4), &bcast(&s1, 4));
    for (i, v) in b.iter().enumerate() {
        assert_eq!(*v, s[i / 4]);
    }
    assert!(rowsum(&x0, 3, 5, r.ell).is_err());
}

/// Communication accounting of Π× at n = 128 against the analytic cost:
/// offline per party: IKNP matrix `128 × (43·128/128)·16` bytes plus Gilboa
/// corrections `n·Σ_{i<43}(43−i)` bits; online: Beaver opening `2n·43` bits
/// each, then truncation (P1: IKNP matrix of `n` COTs, P0: `n·13` bits).
/// Each frame adds 10 bytes. Rounds: offline 2, online 3.
#[test]
fn mul_accounting_matches_analytic_cost() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let n = 128;
    let mut rng = seeded(9);
    let xs = values(&mut rng, n - 9, 20);
    let (x0, x1) = share(&r, &xs, &mut rng);
    let f =
        |p: &mut P, t: &mut veil_host::transport::MemTransport, x: &veil_core::mpc::RingShares| {
            let before = p.channel().stats();
            drive(p.channel(), p.mul(x, x), t).unwrap();
            p.channel().stats().since(&before)
        };
    let (s0, s1) = run_mem(cfg, |p, t| f(p, t, &x0), |p, t| f(p, t, &x1));
    if silent_mode() {
        eprintln!("VEIL_TEST_OT=silent: the IKNP byte counts are not checked");
        return;
    }
    let offline = 128 * 43 * 16 + 10 + (n * 946).div_ceil(8) + 10;
    assert_eq!(s0.offline.bytes_sent as usize, offline);
    assert_eq!(s1.offline.bytes_sent as usize, offline);
    let open = (2 * n * 43).div_ceil(8) + 10;
    assert_eq!(
        s0.online.bytes_sent as usize,
        open + (n * 13).div_ceil(8) + 10
    );
    assert_eq!(s1.online.bytes_sent as usize, open + n * 16 + 10);
    assert_eq!(s0.online.bytes_recv, s1.online.bytes_sent);
    for s in [s0, s1] {
        assert_eq!((s.offline.rounds, s.online.rounds), (2, 3));
        assert_eq!(s.setup.bytes_sent, 0);
    }
}

/// With OT preprocessing (random-COT pools filled offline, derandomized
/// online), results are unchanged and the online traffic of ReLU drops from
/// 16 bytes to 1 bit per COT.
#[test]
fn preprocessed_ot_pool() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let mut rng = seeded(10);
    let xs = values(&mut rng, N, r.ell);
    let ys = values(&mut rng, N, 14);
    let (x0, x1) = share(&r, &xs, &mut rng);
    let (y0, y1) = share(&r, &ys, &mut rng);
    let f = |p: &mut P,
             t: &mut veil_host::transport::MemTransport,
             x: &veil_core::mpc::RingShares,
             y| {
        // Warm-up to learn this party's OT demand, then preprocess exactly it.
        let c0 = p.ot_counts();
        drive(p.channel(), p.relu(x), t).unwrap();
        let c1 = p.ot_counts();
        let before = p.channel().stats();
        let (ns, nr) = (c1.0 - c0.0, c1.1 - c0.1);
        drive(p.channel(), p.preprocess_ot(ns as usize, nr as usize), t).unwrap();
        let mid = p.channel().stats();
        let out = drive(p.channel(), p.relu(x), t).unwrap();
        let after = p.channel().stats();
        let m = drive(p.channel(), p.mul(x, y), t).unwrap();
        (out, m, mid.since(&before), after.since(&mid), (ns, nr))
    };
    let (a, b) = run_mem(cfg, |p, t| f(p, t, &x0, &y0), |p, t| f(p, t, &x1, &y1));
    let rl = open(&r, &a.0, &b.0);
    for k in 0..xs.len() {
        assert_eq!(rl[k], xs[k].max(0));
    }
    let z = open(&r, &a.1, &b.1);
    for k in 0..xs.len() {
        let e = ((xs[k] as i128 * ys[k] as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
        // |x·y| may exceed the KnownMsb range here only if |x| ≥ 2^28; skip those.
        if xs[k].unsigned_abs() < 1 << 27 {
            assert!(z[k] == e || z[k] == e - 1);
        }
    }
    // Pools pair up: P0's sender count is P1's receiver count.
    assert_eq!(a.4 .0, b.4 .1);
    if silent_mode() {
        eprintln!("VEIL_TEST_OT=silent: the IKNP byte counts are not checked");
        return;
    }
    let cots = (a.4 .0 + a.4 .1) as f64;
    // Preprocessing carried the IKNP matrices (≈16 B per COT in total) ...
    let pre = (a.2.offline.bytes_sent + b.2.offline.bytes_sent) as f64;
    assert!(pre >= 16.0 * cots && a.2.online.bytes_sent == 0);
    // ... and the online ReLU sends no IKNP matrix any more: less than
    // 16 B per COT in total (the leaf messages and openings remain).
    let online = (a.3.online.bytes_sent + b.3.online.bytes_sent) as f64;
    assert!(online < 4.0 * cots, "online {online} bytes for {cots} COTs");
}

/// The same primitives on other rings: ℓ = 16 (F = 6) and ℓ = 64 (F = 20),
/// including Ext with a 119-bit modulus.
#[test]
fn other_ring_sizes() {
    let q119 = Modulus::from_primes(&[0xffff_ffff_0000_0001, (1 << 55) - 55]).unwrap();
    for (ell, frac, radix) in [(16u32, 6u32, 3u32), (64, 20, 4)] {
        let cfg = MpcConfig {
            ring: RingCfg::new(ell, frac).unwrap(),
            radix_bits: radix,
            ..MpcConfig::ENCFORMER
        };
        let r = cfg.ring;
        let mut rng = seeded(11 + ell as u64);
        let xs = values(&mut rng, 200, ell);
        let (x0, x1) = share(&r, &xs, &mut rng);
        let ts = values(&mut rng, 200, ell - 2);
        let (t0, t1) = share(&r, &ts, &mut rng);
        let run = |p: &mut P,
                   t: &mut veil_host::transport::MemTransport,
                   x: &veil_core::mpc::RingShares,
                   tr: &veil_core::mpc::RingShares| {
            let rl = drive(p.channel(), p.relu(x), t).unwrap();
            let tz = drive(p.channel(), p.trunc(tr, frac), t).unwrap();
            let f = drive(p.channel(), p.ring_to_field(x, &q119), t).unwrap();
            let back = p.field_to_ring(&f, &q119).unwrap();
            (rl, tz, f, back)
        };
        let (a, b) = run_mem(cfg, |p, t| run(p, t, &x0, &t0), |p, t| run(p, t, &x1, &t1));
        let rl = open(&r, &a.0, &b.0);
        let tz = open(&r, &a.1, &b.1);
        let back = open(&r, &a.3, &b.3);
        for k in 0..xs.len() {
            assert_eq!(rl[k], xs[k].max(0), "ell {ell}: relu {}", xs[k]);
            assert_eq!(
                q119.to_signed(q119.add(a.2.as_slice()[k], b.2.as_slice()[k])),
                xs[k] as i128,
                "ell {ell}: r2f"
            );
            assert_eq!(back[k], xs[k], "ell {ell}: f2r");
        }
        for k in 0..ts.len() {
            let e = ts[k] >> frac;
            assert!(
                tz[k] == e || tz[k] == e - 1,
                "ell {ell}: trunc {} -> {}",
                ts[k],
                tz[k]
            );
        }
    }
}

/// Field2Ring's error analysis, checked where it is measurable: with
/// ℓ = 16 and a 20-bit q (σ = 3) each element fails independently with
/// probability `(x + 2^{ℓ-1} + 1)/q`, and a failure is an error of exactly
/// `−q mod 2^ℓ`. (With ℓ = 43 and log q ≥ 84 the same formula gives ≤ 2^-41.)
#[test]
fn field_to_ring_failure_rate_matches_bound() {
    let cfg = MpcConfig {
        ring: RingCfg::new(16, 6).unwrap(),
        sigma: 3,
        ..MpcConfig::ENCFORMER
    };
    let r = cfg.ring;
    let q = Modulus::new(1_048_573).unwrap();
    let mut rng = seeded(12);
    let n = 20_000;
    let xs = values(&mut rng, n, 16);
    let f0: Vec<u128> = xs.iter().map(|_| q.sample(&mut rng)).collect();
    let f1: Vec<u128> = xs
        .iter()
        .zip(&f0)
        .map(|(&x, &a)| q.sub(q.from_signed(x as i128), a))
        .collect();
    let (ff0, ff1) = (FieldShares::new(f0), FieldShares::new(f1));
    let (z0, z1) = run_mem(
        cfg,
        |p, _t| p.field_to_ring(&ff0, &q).unwrap(),
        |p, _t| p.field_to_ring(&ff1, &q).unwrap(),
    );
    let z = open(&r, &z0, &z1);
    let qm = (q.value() as u64) & r.mask();
    let mut fails = 0.0;
    let mut expected = 0.0;
    for k in 0..xs.len() {
        expected += (xs[k] + (1 << 15) + 1) as f64 / q.value() as f64;
        if z[k] != xs[k] {
            fails += 1.0;
            assert_eq!(
                r.from_signed(z[k]),
                r.sub(r.from_signed(xs[k]), qm),
                "failure is not the missing q-wrap"
            );
        }
    }
    let sd = expected.sqrt();
    assert!(
        (fails - expected).abs() < 6.0 * sd,
        "failures {fails}, expected {expected:.1} ± {sd:.1}"
    );
    assert!(fails > 0.0);
}

/// Table III forms: `Π_cmp(x, τ)` with public threshold and arithmetic-share
/// output, and `Π_mux` with an arithmetic-share selector (chained).
#[test]
fn table_iii_cmp_and_mux() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let mut rng = seeded(13);
    let mut xs = values(&mut rng, N, 30);
    let tau = r.encode(-1.5);
    xs.extend([r.to_signed(tau), r.to_signed(tau) - 1, r.to_signed(tau) + 1]);
    let (x0, x1) = share(&r, &xs, &mut rng);
    let run =
        |p: &mut P, t: &mut veil_host::transport::MemTransport, x: &veil_core::mpc::RingShares| {
            let b = drive(p.channel(), p.cmp_public(x, tau), t).unwrap();
            let v = drive(p.channel(), p.mux_arith(&b, x), t).unwrap();
            (b, v)
        };
    let ((b0, v0), (b1, v1)) = run_mem(cfg, |p, t| run(p, t, &x0), |p, t| run(p, t, &x1));
    let b = open(&r, &b0, &b1);
    let v = open(&r, &v0, &v1);
    for k in 0..xs.len() {
        let lt = xs[k] < r.to_signed(tau);
        assert_eq!(b[k], lt as i64, "{} < tau", xs[k]);
        assert_eq!(v[k], if lt { xs[k] } else { 0 });
    }
}

/// The primitives over parties built with the silent OT (INSECURE test set):
/// the pools are filled by silent extensions (after the one IKNP bootstrap in
/// setup), the protocols run from them with 1 derandomization bit per COT,
/// and every output reconstructs to the plaintext answer.
#[test]
fn primitives_over_the_silent_ot_pool() {
    use veil_core::mpc::ot::silent::INSECURE_SILENT_TEST;
    use veil_core::mpc::{Party, PartyId, RingShares};
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let q = q104();
    let mut rng = seeded(31);
    let xs = values(&mut rng, N, 26);
    let ys = values(&mut rng, N, 12);
    let bs: Vec<u8> = (0..xs.len()).map(|k| (k % 3 == 0) as u8).collect();
    let (x0, x1) = share(&r, &xs, &mut rng);
    let (y0, y1) = share(&r, &ys, &mut rng);
    let b0: Vec<u8> = (0..xs.len()).map(|k| (k % 2) as u8).collect();
    let b1: Vec<u8> = b0.iter().zip(&bs).map(|(a, b)| a ^ b).collect();
    type Out = (
        RingShares,
        BoolShares,
        RingShares,
        RingShares,
        RingShares,
        Vec<u128>,
        u64,
    );
    let run = |id: PartyId,
               t: &mut veil_host::transport::MemTransport,
               x: &RingShares,
               y: &RingShares,
               b: &BoolShares|
     -> Out {
        let mut p: P =
            Party::with_silent_ot(id, cfg, seeded(40 + id as u64), INSECURE_SILENT_TEST).unwrap();
        drive(p.channel(), p.setup(), t).unwrap();
        // A pool larger than the whole run needs, in both directions.
        drive(p.channel(), p.preprocess_ot(200_000, 200_000), t).unwrap();
        let before = p.channel().stats();
        let m = drive(p.channel(), p.mul(x, y), t).unwrap();
        let lt = drive(p.channel(), p.less_than(x, y), t).unwrap();
        let rl = drive(p.channel(), p.relu(x), t).unwrap();
        let ba = drive(p.channel(), p.b2a(b), t).unwrap();
        let mx = drive(p.channel(), p.mux(b, x), t).unwrap();
        let f = drive(p.channel(), p.ring_to_field(x, &q), t).unwrap();
        let online = p.channel().stats().since(&before).online.bytes_sent;
        (m, lt, rl, ba, mx, f.as_slice().to_vec(), online)
    };
    let (bb0, bb1) = (BoolShares::new(b0), BoolShares::new(b1));
    let (t0, t1) = veil_host::transport::mem_pair(tcfg(20_000));
    let (a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut t1 = t1;
            run(PartyId::P1, &mut t1, &x1, &y1, &bb1)
        });
        let mut t0 = t0;
        let a = run(PartyId::P0, &mut t0, &x0, &y0, &bb0);
        (a, h.join().unwrap())
    });
    let m = open(&r, &a.0, &b.0);
    let rl = open(&r, &a.2, &b.2);
    let ba = open(&r, &a.3, &b.3);
    let mx = open(&r, &a.4, &b.4);
    for k in 0..xs.len() {
        let exact = ((xs[k] as i128 * ys[k] as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
        assert!(m[k] == exact || m[k] == exact - 1, "mul {k}");
        assert_eq!(
            a.1.as_slice()[k] ^ b.1.as_slice()[k],
            (xs[k] < ys[k]) as u8,
            "less_than {k}"
        );
        assert_eq!(rl[k], xs[k].max(0), "relu {k}");
        assert_eq!(ba[k], bs[k] as i64, "b2a {k}");
        assert_eq!(mx[k], if bs[k] == 1 { xs[k] } else { 0 }, "mux {k}");
        assert_eq!(q.to_signed(q.add(a.5[k], b.5[k])), xs[k] as i128, "r2f {k}");
    }
    // Served from the pools: no IKNP matrix (16 B per COT) went online.
    let online = (a.6 + b.6) as f64 / xs.len() as f64;
    assert!(online < 1000.0, "online {online} B/elem (IKNP: ≈ 4900)");
}
