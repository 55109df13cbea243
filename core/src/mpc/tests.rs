//! In-crate protocol tests (single thread, [`run_pair`]).

use super::channel::{run_pair, Session};
use super::*;
use alloc::vec::Vec;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

type P = Party<ChaCha20Rng>;

macro_rules! both {
    ($p0:ident, $p1:ident, $b0:expr, $b1:expr) => {{
        let (c0, c1) = ($p0.channel(), $p1.channel());
        let s0 = Session::new(c0, async { $b0 });
        let s1 = Session::new(c1, async { $b1 });
        let (r0, r1) = run_pair(s0, s1);
        (r0.unwrap(), r1.unwrap())
    }};
}

fn parties(cfg: MpcConfig) -> (P, P) {
    let mut p0 = Party::new(PartyId::P0, cfg, ChaCha20Rng::seed_from_u64(10)).unwrap();
    let mut p1 = Party::new(PartyId::P1, cfg, ChaCha20Rng::seed_from_u64(11)).unwrap();
    both!(p0, p1, p0.setup().await, p1.setup().await);
    (p0, p1)
}

fn share(r: &RingCfg, xs: &[u64], rng: &mut ChaCha20Rng) -> (RingShares, RingShares) {
    let a: Vec<u64> = xs.iter().map(|_| rng.next_u64() & r.mask()).collect();
    let b: Vec<u64> = xs.iter().zip(&a).map(|(&x, &a)| r.sub(x, a)).collect();
    (RingShares::new(a), RingShares::new(b))
}

fn open(r: &RingCfg, a: &RingShares, b: &RingShares) -> Vec<i64> {
    a.as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(&x, &y)| r.to_signed(r.add(x, y)))
        .collect()
}

fn inputs(r: &RingCfg, rng: &mut ChaCha20Rng, n: usize, bound_bits: u32) -> Vec<i64> {
    let mut v: Vec<i64> = (0..n)
        .map(|_| (rng.next_u64() % (1u64 << bound_bits)) as i64 - (1i64 << (bound_bits - 1)))
        .collect();
    v.extend([
        0,
        1,
        -1,
        (1i64 << (bound_bits - 1)) - 1,
        -(1i64 << (bound_bits - 1)),
    ]);
    let _ = r;
    v
}

#[test]
fn millionaire_and_msb() {
    for radix in [1u32, 3, 4, 6] {
        let cfg = MpcConfig {
            radix_bits: radix,
            ..MpcConfig::ENCFORMER
        };
        let (mut p0, mut p1) = parties(cfg);
        let r = cfg.ring;
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let n = 200;
        let mut x: Vec<u64> = (0..n).map(|_| rng.next_u64() & r.mask()).collect();
        let mut y: Vec<u64> = (0..n).map(|_| rng.next_u64() & r.mask()).collect();
        x.extend([0, r.mask(), 5, r.mask(), 0, 77]);
        y.extend([0, r.mask(), 5, 0, r.mask(), 78]);
        let (g0, g1) = both!(
            p0,
            p1,
            p0.millionaire(&x, r.ell).await,
            p1.millionaire(&y, r.ell).await
        );
        for k in 0..x.len() {
            assert_eq!(
                g0.as_slice()[k] ^ g1.as_slice()[k],
                (x[k] > y[k]) as u8,
                "radix {radix} k {k}"
            );
        }
        let v = inputs(&r, &mut rng, 100, r.ell);
        let enc: Vec<u64> = v.iter().map(|&a| r.from_signed(a)).collect();
        let (s0, s1) = share(&r, &enc, &mut rng);
        let (m0, m1) = both!(p0, p1, p0.msb(&s0).await, p1.msb(&s1).await);
        for k in 0..v.len() {
            assert_eq!(m0.as_slice()[k] ^ m1.as_slice()[k], (v[k] < 0) as u8);
        }
    }
}

#[test]
fn mul_trunc_mux_b2a() {
    for mode in [TruncMode::KnownMsb, TruncMode::FullRange, TruncMode::Exact] {
        let cfg = MpcConfig {
            trunc: mode,
            ..MpcConfig::ENCFORMER
        };
        let (mut p0, mut p1) = parties(cfg);
        let r = cfg.ring;
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        let xs = inputs(&r, &mut rng, 300, 28);
        let ys = inputs(&r, &mut rng, 300, 13);
        let (x0, x1) = share(
            &r,
            &xs.iter().map(|&v| r.from_signed(v)).collect::<Vec<_>>(),
            &mut rng,
        );
        let (y0, y1) = share(
            &r,
            &ys.iter().map(|&v| r.from_signed(v)).collect::<Vec<_>>(),
            &mut rng,
        );
        let (z0, z1) = both!(p0, p1, p0.mul(&x0, &y0).await, p1.mul(&x1, &y1).await);
        let z = open(&r, &z0, &z1);
        for k in 0..xs.len() {
            let exact = ((xs[k] as i128 * ys[k] as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
            let ok = if mode == TruncMode::Exact {
                z[k] == exact
            } else {
                z[k] == exact || z[k] == exact - 1
            };
            assert!(ok, "{mode:?} {} {} -> {} vs {}", xs[k], ys[k], z[k], exact);
        }
        let bound = if mode == TruncMode::KnownMsb {
            r.ell - 2
        } else {
            r.ell - 1
        };
        let ts = inputs(&r, &mut rng, 300, bound);
        let (t0, t1) = share(
            &r,
            &ts.iter().map(|&v| r.from_signed(v)).collect::<Vec<_>>(),
            &mut rng,
        );
        let (u0, u1) = both!(p0, p1, p0.trunc(&t0, 13).await, p1.trunc(&t1, 13).await);
        let u = open(&r, &u0, &u1);
        for k in 0..ts.len() {
            let exact = ts[k] >> 13;
            let ok = if mode == TruncMode::Exact {
                u[k] == exact
            } else {
                u[k] == exact || u[k] == exact - 1
            };
            assert!(ok, "trunc {mode:?} {} -> {} vs {}", ts[k], u[k], exact);
        }
    }
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = parties(cfg);
    let r = cfg.ring;
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let xs = inputs(&r, &mut rng, 100, r.ell);
    let (x0, x1) = share(
        &r,
        &xs.iter().map(|&v| r.from_signed(v)).collect::<Vec<_>>(),
        &mut rng,
    );
    let bits: Vec<u8> = (0..xs.len()).map(|_| (rng.next_u32() & 1) as u8).collect();
    let b0: Vec<u8> = (0..xs.len()).map(|_| (rng.next_u32() & 1) as u8).collect();
    let b1: Vec<u8> = bits.iter().zip(&b0).map(|(a, b)| a ^ b).collect();
    let (bb0, bb1) = (BoolShares::new(b0), BoolShares::new(b1));
    let (m0, m1) = both!(p0, p1, p0.mux(&bb0, &x0).await, p1.mux(&bb1, &x1).await);
    let m = open(&r, &m0, &m1);
    let (a0, a1) = both!(p0, p1, p0.b2a(&bb0).await, p1.b2a(&bb1).await);
    let a = open(&r, &a0, &a1);
    let (rl0, rl1) = both!(p0, p1, p0.relu(&x0).await, p1.relu(&x1).await);
    let rl = open(&r, &rl0, &rl1);
    for k in 0..xs.len() {
        assert_eq!(m[k], if bits[k] == 1 { xs[k] } else { 0 });
        assert_eq!(a[k], bits[k] as i64);
        assert_eq!(rl[k], xs[k].max(0));
    }
}

#[test]
fn ext_roundtrip() {
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = parties(cfg);
    let r = cfg.ring;
    let q = Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let xs = inputs(&r, &mut rng, 200, r.ell);
    let (x0, x1) = share(
        &r,
        &xs.iter().map(|&v| r.from_signed(v)).collect::<Vec<_>>(),
        &mut rng,
    );
    let (f0, f1) = both!(
        p0,
        p1,
        p0.ring_to_field(&x0, &q).await,
        p1.ring_to_field(&x1, &q).await
    );
    for k in 0..xs.len() {
        assert_eq!(
            q.to_signed(q.add(f0.as_slice()[k], f1.as_slice()[k])),
            xs[k] as i128
        );
    }
    let (g0, g1) = both!(p0, p1, p0.field_to_ring(&f0, &q), p1.field_to_ring(&f1, &q));
    assert_eq!(open(&r, &g0, &g1), xs);
}

#[test]
fn poly_and_local() {
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = parties(cfg);
    let r = cfg.ring;
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let xs: Vec<f64> = (0..64).map(|i| (i as f64 - 32.0) / 8.0).collect();
    let (x0, x1) = share(
        &r,
        &xs.iter().map(|&v| r.encode(v)).collect::<Vec<_>>(),
        &mut rng,
    );
    let c = [0.5, -0.25, 0.125, 0.03125];
    let (y0, y1) = both!(
        p0,
        p1,
        p0.poly_eval(&x0, &c).await,
        p1.poly_eval(&x1, &c).await
    );
    for (k, &x) in xs.iter().enumerate() {
        let want = c[0] + c[1] * x + c[2] * x * x + c[3] * x * x * x;
        let got = r.decode(r.add(y0.as_slice()[k], y1.as_slice()[k]));
        assert!((got - want).abs() < 0.01, "{x}: {got} vs {want}");
    }
    let s0 = arith::rowsum(&x0, 8, 8, r.ell).unwrap();
    let s1 = arith::rowsum(&x1, 8, 8, r.ell).unwrap();
    let s = open(&r, &s0, &s1);
    for row in 0..8 {
        let want: i64 = (0..8).map(|c| r.to_signed(r.encode(xs[row * 8 + c]))).sum();
        assert_eq!(s[row], want);
    }
    let b = open(&r, &arith::bcast(&s0, 3), &arith::bcast(&s1, 3));
    assert_eq!(b[4], s[1]);
}

#[test]
fn debug_output_redacts_secrets() {
    use alloc::format;
    let s = format!("{:?}", RingShares::new(alloc::vec![123_456_789]));
    assert!(!s.contains("123456789") && s.contains("redacted"), "{s}");
    let b = format!("{:?}", BoolShares::new(alloc::vec![1, 0, 1]));
    assert!(b.contains("redacted"));
    let (p0, _p1) = parties(MpcConfig::ENCFORMER);
    let d = format!("{p0:?} {:?}", p0.ot);
    assert!(!d.contains("delta") || d.contains("redacted"), "{d}");
    let f = format!(
        "{:?}",
        Frame {
            tag: 1,
            depth: 2,
            payload: alloc::vec![0xAB; 4]
        }
    );
    assert!(!f.contains("171") && f.contains("4 bytes"), "{f}");
}

#[test]
fn empty_and_single_inputs() {
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = parties(cfg);
    let r = cfg.ring;
    let q = Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap();
    for n in [0usize, 1] {
        let x0 = RingShares::new(alloc::vec![r.encode(2.0); n]);
        let x1 = RingShares::new(alloc::vec![0; n]);
        let (a, b) = both!(
            p0,
            p1,
            {
                let m = p0.mul(&x0, &x0).await?;
                let rl = p0.relu(&x0).await?;
                let f = p0.ring_to_field(&x0, &q).await?;
                let g = p0.field_to_ring(&f, &q)?;
                Ok::<_, MpcError>((m, rl, g))
            },
            {
                let m = p1.mul(&x1, &x1).await?;
                let rl = p1.relu(&x1).await?;
                let f = p1.ring_to_field(&x1, &q).await?;
                let g = p1.field_to_ring(&f, &q)?;
                Ok::<_, MpcError>((m, rl, g))
            }
        );
        assert_eq!(a.0.len(), n);
        if n == 1 {
            let m = open(&r, &a.0, &b.0)[0];
            let four = r.to_signed(r.encode(4.0));
            assert!(m == four || m == four - 1, "{m}");
            assert_eq!(
                open(&r, &a.1, &b.1),
                alloc::vec![r.to_signed(r.encode(2.0))]
            );
            assert_eq!(
                open(&r, &a.2, &b.2),
                alloc::vec![r.to_signed(r.encode(2.0))]
            );
        }
    }
}

/// Values of `[-2^{ℓ-2}, 2^{ℓ-2})`: random ones plus the edges and low-bit patterns around the
/// rounding tie (`x mod 2^k ∈ {2^{k-1} − 1, 2^{k-1}, 2^{k-1} + 1}`).
fn known_msb_inputs(r: &RingCfg, rng: &mut ChaCha20Rng, n: usize, k: u32) -> Vec<i64> {
    let lim = 1i64 << (r.ell - 2);
    let mut v: Vec<i64> = (0..n)
        .map(|_| (rng.next_u64() % (2 * lim as u64)) as i64 - lim)
        .collect();
    v.extend([0, 1, -1, lim - 1, -lim, -lim + 1, lim - 2]);
    let h = 1i64 << (k - 1);
    for base in [0i64, 5 << k, -(7 << k), lim - (1 << k), -lim] {
        for d in [h - 1, h, h + 1, 0, (1 << k) - 1] {
            let x = base + d;
            if (-lim..lim).contains(&x) {
                v.push(x);
                v.push(-x - 1);
            }
        }
    }
    v
}

/// Plaintext reference: `⌊(x + 2^{k-1}) / 2^k⌋`.
fn round_ref(x: i64, k: u32) -> i64 {
    (x + (1i64 << (k - 1))).div_euclid(1i64 << k)
}

#[test]
fn trunc_round_exact_is_exact_within_bound() {
    for (cfg, ks) in [
        (MpcConfig::ENCFORMER, &[1u32, 4, 13, 19, 41][..]),
        (
            MpcConfig {
                ring: RingCfg::new(64, 16).unwrap(),
                radix_bits: 3,
                ..MpcConfig::ENCFORMER
            },
            &[1u32, 20, 62][..],
        ),
    ] {
        let (mut p0, mut p1) = parties(cfg);
        let r = cfg.ring;
        let mut rng = ChaCha20Rng::seed_from_u64(21);
        for &k in ks {
            let xs = known_msb_inputs(&r, &mut rng, 2000, k);
            let enc: Vec<u64> = xs.iter().map(|&v| r.from_signed(v)).collect();
            // Random shares, and the degenerate splits (x, 0) and (0, x).
            let (a0, a1) = share(&r, &enc, &mut rng);
            let splits = [
                (a0, a1),
                (
                    RingShares::new(enc.clone()),
                    RingShares::new(alloc::vec![0; enc.len()]),
                ),
                (
                    RingShares::new(alloc::vec![0; enc.len()]),
                    RingShares::new(enc.clone()),
                ),
            ];
            for (x0, x1) in &splits {
                let (y0, y1) = both!(
                    p0,
                    p1,
                    p0.trunc_round_exact(x0, k).await,
                    p1.trunc_round_exact(x1, k).await
                );
                let got = open(&r, &y0, &y1);
                for (i, &x) in xs.iter().enumerate() {
                    assert_eq!(got[i], round_ref(x, k), "ell {} k {k} x {x}", r.ell);
                }
            }
        }
    }
}

#[test]
fn trunc_round_exact_fails_outside_bound_and_checks_shift() {
    // Outside [-2^{ℓ-2}, 2^{ℓ-2}) the MSB trick is wrong: the plaintext comparison above
    // detects it (the test is able to fail).
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = parties(cfg);
    let r = cfg.ring;
    let mut rng = ChaCha20Rng::seed_from_u64(22);
    let k = 8;
    let lim = 1i64 << (r.ell - 2);
    let xs: Vec<i64> = (0..200)
        .map(|i| {
            let d = (rng.next_u64() % lim as u64) as i64;
            if i % 2 == 0 {
                lim + d
            } else {
                -lim - 1 - d
            }
        })
        .collect();
    let enc: Vec<u64> = xs.iter().map(|&v| r.from_signed(v)).collect();
    let (x0, x1) = share(&r, &enc, &mut rng);
    let (y0, y1) = both!(
        p0,
        p1,
        p0.trunc_round_exact(&x0, k).await,
        p1.trunc_round_exact(&x1, k).await
    );
    let got = open(&r, &y0, &y1);
    let wrong = xs
        .iter()
        .zip(&got)
        .filter(|(&x, &g)| g != round_ref(r.to_signed(r.from_signed(x)), k))
        .count();
    assert!(wrong > 50, "only {wrong} wrong outside the bound");
    // A shift beyond ℓ − 2 is a typed error.
    let (c0, c1) = (p0.channel(), p1.channel());
    let (e0, _) = run_pair(
        Session::new(c0, p0.trunc_round_exact(&x0, r.ell - 1)),
        Session::new(c1, async { Ok(()) }),
    );
    assert!(matches!(e0, Err(MpcError::InvalidInput(_))));
}

#[test]
fn ring_to_field_known_msb_is_exact() {
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = parties(cfg);
    let r = cfg.ring;
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    for q in [
        Modulus::new(1u128 << 123).unwrap(),
        Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap(),
    ] {
        let xs = known_msb_inputs(&r, &mut rng, 3000, 1);
        let enc: Vec<u64> = xs.iter().map(|&v| r.from_signed(v)).collect();
        let (a0, a1) = share(&r, &enc, &mut rng);
        let splits = [
            (a0, a1),
            (
                RingShares::new(enc.clone()),
                RingShares::new(alloc::vec![0; enc.len()]),
            ),
            (
                RingShares::new(alloc::vec![0; enc.len()]),
                RingShares::new(enc.clone()),
            ),
        ];
        for (x0, x1) in &splits {
            let (f0, f1) = both!(
                p0,
                p1,
                p0.ring_to_field_known_msb(x0, &q, r.ell - 2).await,
                p1.ring_to_field_known_msb(x1, &q, r.ell - 2).await
            );
            for (k, &x) in xs.iter().enumerate() {
                assert_eq!(
                    q.to_signed(q.add(f0.as_slice()[k], f1.as_slice()[k])),
                    x as i128
                );
            }
        }
    }
}

#[test]
fn ring_to_field_known_msb_typed_errors() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let x = RingShares::new(alloc::vec![1; 4]);
    let q = Modulus::new(1u128 << 123).unwrap();
    let small = Modulus::new(1u128 << r.ell).unwrap();
    for (q, bound) in [(&q, r.ell - 1), (&small, 10)] {
        // A failed run poisons the party: a fresh pair per case.
        let (mut p0, _p1) = parties(cfg);
        let c0 = p0.channel();
        let mut s = Session::new(c0, p0.ring_to_field_known_msb(&x, q, bound));
        match s.poll() {
            core::task::Poll::Ready(Err(MpcError::InvalidConfig(_))) => {}
            other => panic!("expected a typed error, got {other:?}"),
        }
    }
}

#[test]
fn exact_rounding_and_known_msb_ext_on_empty_and_single_inputs() {
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = parties(cfg);
    let r = cfg.ring;
    let q = Modulus::new(1u128 << 123).unwrap();
    for n in [0usize, 1] {
        // x = −20, k = 3: round(−20/8) = round(−2.5) = −2 (ties round up).
        let x0 = RingShares::new(alloc::vec![r.from_signed(-20); n]);
        let x1 = RingShares::new(alloc::vec![0; n]);
        let (a, b) = both!(
            p0,
            p1,
            {
                let t = p0.trunc_round_exact(&x0, 3).await?;
                let f = p0.ring_to_field_known_msb(&x0, &q, 10).await?;
                Ok::<_, MpcError>((t, f))
            },
            {
                let t = p1.trunc_round_exact(&x1, 3).await?;
                let f = p1.ring_to_field_known_msb(&x1, &q, 10).await?;
                Ok::<_, MpcError>((t, f))
            }
        );
        assert_eq!(open(&r, &a.0, &b.0), alloc::vec![-2; n]);
        assert_eq!(a.1.len(), n);
        if n == 1 {
            assert_eq!(
                q.to_signed(q.add(a.1.as_slice()[0], b.1.as_slice()[0])),
                -20
            );
        }
    }
}

/// A pair over the INSECURE ideal COT (and, with `ideal_triples`, ideal
/// Beaver triples) injected through `Party::with_ot`, after setup (which then
/// only exchanges the common seed).
fn ideal_parties(cfg: MpcConfig, ideal_triples: bool) -> (P, P) {
    use super::insecure::{insecure_ideal_cot, insecure_ideal_party};
    let seed = [42u8; 16];
    let mk = |id, s| {
        if ideal_triples {
            insecure_ideal_party(id, cfg, ChaCha20Rng::seed_from_u64(s), seed).unwrap()
        } else {
            let (snd, rcv) = insecure_ideal_cot(seed, id);
            Party::with_ot(
                id,
                cfg,
                ChaCha20Rng::seed_from_u64(s),
                alloc::boxed::Box::new(snd),
                alloc::boxed::Box::new(rcv),
            )
            .unwrap()
        }
    };
    let (mut p0, mut p1) = (mk(PartyId::P0, 30), mk(PartyId::P1, 31));
    both!(p0, p1, p0.setup().await, p1.setup().await);
    (p0, p1)
}

/// The protocols run unchanged over an injected (ideal) OT and reconstruct to
/// the plaintext answers; setup then costs one 16-byte seed share each way.
#[test]
fn protocols_over_injected_ideal_ot() {
    for ideal_triples in [false, true] {
        let cfg = MpcConfig::ENCFORMER;
        let (mut p0, mut p1) = ideal_parties(cfg, ideal_triples);
        let st = p0.channel().stats();
        assert_eq!(
            (st.setup.bytes_sent, st.setup.frames_sent, st.setup.rounds),
            (16 + channel::FRAME_OVERHEAD, 1, 1)
        );
        let r = cfg.ring;
        let q = Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(12);
        let xs = inputs(&r, &mut rng, 150, 28);
        let ys = inputs(&r, &mut rng, 150, 13);
        let enc = |v: &[i64]| v.iter().map(|&a| r.from_signed(a)).collect::<Vec<_>>();
        let (x0, x1) = share(&r, &enc(&xs), &mut rng);
        let (y0, y1) = share(&r, &enc(&ys), &mut rng);
        let (a, b) = both!(
            p0,
            p1,
            {
                let m = p0.mul(&x0, &y0).await?;
                let lt = p0.less_than(&x0, &y0).await?;
                let rl = p0.relu(&x0).await?;
                let f = p0.ring_to_field(&x0, &q).await?;
                let g = p0.field_to_ring(&f, &q)?;
                let e = p0.trunc_round_exact(&y0, 4).await?;
                Ok::<_, MpcError>((m, lt, rl, f, g, e))
            },
            {
                let m = p1.mul(&x1, &y1).await?;
                let lt = p1.less_than(&x1, &y1).await?;
                let rl = p1.relu(&x1).await?;
                let f = p1.ring_to_field(&x1, &q).await?;
                let g = p1.field_to_ring(&f, &q)?;
                let e = p1.trunc_round_exact(&y1, 4).await?;
                Ok::<_, MpcError>((m, lt, rl, f, g, e))
            }
        );
        let m = open(&r, &a.0, &b.0);
        let rl = open(&r, &a.2, &b.2);
        let g = open(&r, &a.4, &b.4);
        let e = open(&r, &a.5, &b.5);
        for k in 0..xs.len() {
            let exact = ((xs[k] as i128 * ys[k] as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
            assert!(m[k] == exact || m[k] == exact - 1, "mul {k}");
            assert_eq!(a.1.as_slice()[k] ^ b.1.as_slice()[k], (xs[k] < ys[k]) as u8);
            assert_eq!(rl[k], xs[k].max(0));
            assert_eq!(
                q.to_signed(q.add(a.3.as_slice()[k], b.3.as_slice()[k])),
                xs[k] as i128
            );
            assert_eq!(g[k], xs[k]);
            assert_eq!(e[k], round_ref(ys[k], 4));
        }
        // No OT traffic at all: only the protocol messages themselves.
        let s = p0.channel().stats();
        assert!(s.offline.bytes_sent < s.online.bytes_sent, "{s:?}");
    }
}

/// The ideal triples are Beaver triples: `c_0 + c_1 = (a_0 + a_1)(b_0 + b_1)`.
#[test]
fn insecure_ideal_triples_are_triples() {
    let cfg = MpcConfig::ENCFORMER;
    let (mut p0, mut p1) = ideal_parties(cfg, true);
    let r = cfg.ring;
    let (t0, t1) = both!(p0, p1, p0.triples(50).await, p1.triples(50).await);
    let o = |a: &RingShares, b: &RingShares| -> Vec<u64> {
        a.as_slice()
            .iter()
            .zip(b.as_slice())
            .map(|(&x, &y)| r.add(x, y))
            .collect()
    };
    let (a, b, c) = (o(&t0.a, &t1.a), o(&t0.b, &t1.b), o(&t0.c, &t1.c));
    for k in 0..50 {
        assert_eq!(c[k], r.mul(a[k], b[k]));
    }
    assert_ne!(t0.a.as_slice(), t1.a.as_slice());
}
