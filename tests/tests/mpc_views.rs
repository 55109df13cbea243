//! View tests: change one party's input and check that the messages the other
//! party receives keep their distribution. For each bit position of the
//! received byte stream we count ones over `R` runs with input A and `R` runs
//! with input B and form the two-proportion z statistic; under the null
//! hypothesis `Σ z²` over the `k` non-constant positions is ≈ χ²_k. We reject
//! if `Σ z² > k + 6·√(2k)` or `max |z| > 6` or a constant position differs.
//! A negative control (a single leaked input bit planted into the same views)
//! shows that the test does reject.

mod mpc_common;
use mpc_common::*;
use veil_core::mpc::{Modulus, MpcConfig, RingShares};
use veil_host::mpc::drive;
use veil_host::transport::{mem_pair, Transport};

const RUNS: usize = 400;
const N: usize = 16;

struct Verdict {
    stat: f64,
    k: usize,
    max_z: f64,
    const_mismatch: bool,
}

impl Verdict {
    fn indistinguishable(&self) -> bool {
        let k = self.k as f64;
        !self.const_mismatch && self.stat <= k + 6.0 * (2.0 * k).sqrt() && self.max_z <= 6.0
    }
}

/// Features tested: every bit, and the XOR of every bit with the bit `d`
/// positions later (`d ∈ {1, 2, 4, 8, 16, 32}`), which catches leaks that
/// keep single-bit marginals uniform (e.g. several entries masked by one bit).
const SHIFTS: [usize; 7] = [0, 1, 2, 4, 8, 16, 32];

fn bits_of(v: &[u8]) -> Vec<u8> {
    (0..v.len() * 8)
        .map(|i| (v[i / 8] >> (i % 8)) & 1)
        .collect()
}

/// Per-feature one-counts over a sample of views.
fn counts(s: &[Vec<u8>], len_bits: usize) -> Vec<Vec<u32>> {
    let mut c: Vec<Vec<u32>> = SHIFTS
        .iter()
        .map(|&d| vec![0u32; len_bits.saturating_sub(d)])
        .collect();
    for v in s {
        let b = bits_of(v);
        for (si, &d) in SHIFTS.iter().enumerate() {
            let cs = &mut c[si];
            if d == 0 {
                for (k, x) in cs.iter_mut().enumerate() {
                    *x += b[k] as u32;
                }
            } else {
                for (k, x) in cs.iter_mut().enumerate() {
                    *x += (b[k] ^ b[k + d]) as u32;
                }
            }
        }
    }
    c
}

fn compare(a: &[Vec<u8>], b: &[Vec<u8>]) -> Verdict {
    let len = a[0].len();
    assert!(
        a.iter().chain(b).all(|v| v.len() == len),
        "view lengths differ"
    );
    let (ra, rb) = (a.len() as f64, b.len() as f64);
    let mut v = Verdict {
        stat: 0.0,
        k: 0,
        max_z: 0.0,
        const_mismatch: false,
    };
    let (ca_all, cb_all) = (counts(a, len * 8), counts(b, len * 8));
    for (fa, fb) in ca_all.iter().zip(&cb_all) {
        for (&ca, &cb) in fa.iter().zip(fb) {
            let (ca, cb) = (ca as f64, cb as f64);
            let p = (ca + cb) / (ra + rb);
            if p == 0.0 || p == 1.0 {
                continue;
            }
            if (ca == 0.0 || ca == ra) && (cb == 0.0 || cb == rb) {
                // Constant in both samples but different constants.
                v.const_mismatch = true;
            }
            let z = (ca / ra - cb / rb) / (p * (1.0 - p) * (1.0 / ra + 1.0 / rb)).sqrt();
            v.stat += z * z;
            v.k += 1;
            v.max_z = v.max_z.max(z.abs());
        }
    }
    v
}

/// Runs `RUNS` times with input A and `RUNS` times with input B at the
/// varying party, recording the observer's received payloads per run.
fn views<V, O>(
    cfg: MpcConfig,
    observer_is_p1: bool,
    vary: V,
    observe: O,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>)
where
    V: Fn(&mut P, &mut dyn Transport, bool) + Send + Sync,
    O: Fn(&mut P, &mut dyn Transport) + Send + Sync,
{
    let (t0, t1) = mem_pair(tcfg(20_000));
    let vary_loop = |p: &mut P, t: &mut dyn Transport| {
        for i in 0..2 * RUNS {
            vary(p, t, i % 2 == 1);
        }
    };
    let observe_loop = |p: &mut P, t: &mut Recorder<veil_host::transport::MemTransport>| {
        let (mut va, mut vb) = (Vec::new(), Vec::new());
        for i in 0..2 * RUNS {
            t.log.clear();
            observe(p, t);
            let bytes: Vec<u8> = t
                .log
                .iter()
                .flat_map(|f| f.payload.iter().copied())
                .collect();
            if i % 2 == 0 {
                va.push(bytes)
            } else {
                vb.push(bytes)
            }
        }
        (va, vb)
    };
    if observer_is_p1 {
        let rec = Recorder {
            inner: t1,
            log: Vec::new(),
        };
        run_with(cfg, t0, rec, |p, t| vary_loop(p, t), observe_loop).1
    } else {
        let rec = Recorder {
            inner: t0,
            log: Vec::new(),
        };
        run_with(cfg, rec, t1, observe_loop, |p, t| vary_loop(p, t)).0
    }
}

fn check(name: &str, a: &[Vec<u8>], b: &[Vec<u8>]) {
    let v = compare(a, b);
    assert!(v.k > 100, "{name}: too few random positions ({})", v.k);
    assert!(
        v.indistinguishable(),
        "{name}: views differ: stat {} over k {} (max |z| {})",
        v.stat,
        v.k,
        v.max_z
    );
    // Negative control: leak one input bit (A = 0, B = 1) at a random-looking
    // position of the same views; the test must reject.
    let pos = a[0].len() * 4 + 3;
    let mut b2: Vec<Vec<u8>> = b.to_vec();
    let mut a2: Vec<Vec<u8>> = a.to_vec();
    for x in a2.iter_mut() {
        x[pos / 8] &= !(1 << (pos % 8));
    }
    for x in b2.iter_mut() {
        x[pos / 8] |= 1 << (pos % 8);
    }
    assert!(
        !compare(&a2, &b2).indistinguishable(),
        "{name}: negative control not detected"
    );
    // Weaker leak: the bit is biased (flipped to the input in 1/3 of runs).
    let mut b3: Vec<Vec<u8>> = b.to_vec();
    for (i, x) in b3.iter_mut().enumerate() {
        if i % 3 == 0 {
            x[pos / 8] |= 1 << (pos % 8);
        }
    }
    let mut a3: Vec<Vec<u8>> = a.to_vec();
    for (i, x) in a3.iter_mut().enumerate() {
        if i % 3 == 0 {
            x[pos / 8] &= !(1 << (pos % 8));
        }
    }
    assert!(
        !compare(&a3, &b3).indistinguishable(),
        "{name}: biased-bit control not detected"
    );
}

fn fixed_shares(cfg: &MpcConfig, seed: u64) -> RingShares {
    use rand_core::RngCore;
    let mut rng = seeded(seed);
    RingShares::new((0..N).map(|_| rng.next_u64() & cfg.ring.mask()).collect())
}

#[test]
fn comparison_views() {
    let cfg = MpcConfig::ENCFORMER;
    let ell = cfg.ring.ell;
    let m = cfg.ring.mask();
    let other: Vec<u64> = fixed_shares(&cfg, 1).into_vec();
    // P0's input varies (0 vs 2^ℓ−1), P1 observes.
    let (a, b) = views(
        cfg,
        true,
        |p, t, alt| {
            let x = vec![if alt { m } else { 0 }; N];
            drive(p.channel(), p.millionaire(&x, ell), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.millionaire(&other, ell), t).unwrap();
        },
    );
    check("millionaire, P1 view", &a, &b);
    // P1's input varies, P0 observes.
    let (a, b) = views(
        cfg,
        false,
        |p, t, alt| {
            let y = vec![if alt { m } else { 0 }; N];
            drive(p.channel(), p.millionaire(&y, ell), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.millionaire(&other, ell), t).unwrap();
        },
    );
    check("millionaire, P0 view", &a, &b);
}

#[test]
fn multiplication_views() {
    let cfg = MpcConfig::ENCFORMER;
    let m = cfg.ring.mask();
    let y = fixed_shares(&cfg, 2);
    let y2 = fixed_shares(&cfg, 3);
    let (a, b) = views(
        cfg,
        true,
        |p, t, alt| {
            let x = RingShares::new(vec![if alt { m } else { 0 }; N]);
            drive(p.channel(), p.mul(&x, &y), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.mul(&y2, &y), t).unwrap();
        },
    );
    check("mul, P1 view", &a, &b);
    let (a, b) = views(
        cfg,
        false,
        |p, t, alt| {
            let x = RingShares::new(vec![if alt { m } else { 0 }; N]);
            drive(p.channel(), p.mul(&x, &y), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.mul(&y2, &y), t).unwrap();
        },
    );
    check("mul, P0 view", &a, &b);
}

#[test]
fn ext_views() {
    let cfg = MpcConfig::ENCFORMER;
    let m = cfg.ring.mask();
    let q = Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap();
    let other = fixed_shares(&cfg, 4);
    for observer_is_p1 in [true, false] {
        let (a, b) = views(
            cfg,
            observer_is_p1,
            |p, t, alt| {
                let x = RingShares::new(vec![if alt { m } else { 0 }; N]);
                drive(p.channel(), p.ring_to_field(&x, &q), t).unwrap();
            },
            |p, t| {
                drive(p.channel(), p.ring_to_field(&other, &q), t).unwrap();
            },
        );
        check(
            if observer_is_p1 {
                "ring2field, P1 view"
            } else {
                "ring2field, P0 view"
            },
            &a,
            &b,
        );
    }
}
