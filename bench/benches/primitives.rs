//! Per-module benches of the hot primitives (criterion):
//!
//! - `ntt`: forward and inverse canonical NTT of one full-level polynomial (optimized CPU backend,
//!   one thread) at `N = 2^14` and `2^16`;
//! - `key_switching`: relinearization, a rotation, 8 hoisted rotations, and the public
//!   key-switching steps of `veil_core::rlwe` alone (decompose with ModUp, gadget product with
//!   and without ModDown), at `N = 2^14`, `L = 6` (`CKKS_128_LOGN14`), one thread;
//! - `mpc`: Beaver multiplication with truncation and the millionaires' comparison
//!   (`less_than`), `n = 4096` elements, both parties in this process over the in-memory link,
//!   after one base-OT setup (IKNP on demand);
//! - `convert_maps`: the C2M decoding map and the M2C encoding map (the share-homomorphic maps of
//!   `veil_core::convert`) on one party's shares, `N = 2^12`, full slots.
//!
//! `cargo bench -p veil-bench` runs them; `-- --quick` for a fast pass, a name to filter.

use criterion::{criterion_main, BatchSize, Criterion};
use rand_core::RngCore;
use std::hint::black_box;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, C64};
use veil_core::convert::{BoundaryCfg, C2mPlan, CommonMasks, M2cPlan, K_BITS};
use veil_core::mpc::{MpcConfig, Party, PartyId, RingShares};
use veil_core::{params, Basis, PolyBackend};
use veil_host::harness::{connect_pair, Link};
use veil_host::mpc::drive;
use veil_host::transport::{Transport, TransportConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn ntt(c: &mut Criterion) {
    let mut g = c.benchmark_group("ntt");
    for (logn, lit) in [
        (14, params::ckks_128_logn14()),
        (16, params::ckks_128_logn16()),
    ] {
        let p = lit.validate().expect("named set");
        let be = CpuBackend::fast(&p, 1).expect("backend");
        let rows = 1;
        let basis = Basis::q(rows);
        let mut rng = veil_host::os_rng();
        let q0 = p.q()[0].value();
        let data: Vec<u64> = (0..p.n()).map(|_| rng.next_u64() % q0).collect();
        let mut buf = be.upload(&data);
        g.bench_function(format!("forward N=2^{logn} (one prime)"), |b| {
            b.iter(|| be.ntt(black_box(&mut buf), basis))
        });
        g.bench_function(format!("inverse N=2^{logn} (one prime)"), |b| {
            b.iter(|| be.intt(black_box(&mut buf), basis))
        });
    }
    g.finish();
}

fn key_switching(c: &mut Criterion) {
    let p = params::ckks_128_logn14().validate().expect("named set");
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 1).expect("backend")));
    let mut rng = veil_host::os_rng();
    let sk = ck.gen_secret_key(&mut rng);
    let rots: Vec<i64> = (1..=8).collect();
    let keys = ck
        .gen_evaluation_keys(&sk, &rots, false, &mut rng, |_, _| {})
        .expect("keys");
    let slots = p.max_slots();
    let x: Vec<C64> = (0..slots)
        .map(|i| C64::new((i as f64 * 0.1).sin(), 0.0))
        .collect();
    let pt = ck
        .encode(&x, slots, p.max_level(), p.default_scale())
        .expect("encode");
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).expect("encrypt");
    let c3 = ck.mul_no_relin(&ct, &ct).expect("mul");
    let mut g = c.benchmark_group("key_switching");
    g.bench_function("relinearize N=2^14 L=6", |b| {
        b.iter_batched(
            || ck.clone_ct(&c3),
            |mut c| ck.relinearize_assign(&mut c, &keys).expect("relin"),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("rotate by 1 N=2^14 L=6", |b| {
        b.iter(|| ck.rotate(black_box(&ct), 1, &keys).expect("rotate"))
    });
    // The public key-switching steps of veil_core::rlwe, one at a time.
    let rl = ck.rlwe();
    let level = ct.level();
    let c1 = &ct.polys()[1];
    let relin = keys.relin.as_ref().expect("relinearization key");
    let hoisted = rl.decompose(c1, level).expect("decompose");
    g.bench_function("step: decompose (ModUp) N=2^14 L=6", |b| {
        b.iter(|| rl.decompose(black_box(c1), level).expect("decompose"))
    });
    g.bench_function("step: gadget product + ModDown N=2^14 L=6", |b| {
        b.iter(|| {
            rl.gadget_product(black_box(&hoisted), None, relin)
                .expect("gadget product")
        })
    });
    g.bench_function("step: lazy gadget product N=2^14 L=6", |b| {
        b.iter(|| {
            rl.gadget_product_lazy(black_box(&hoisted), None, relin)
                .expect("gadget product")
        })
    });
    g.bench_function("8 hoisted rotations N=2^14 L=6", |b| {
        b.iter(|| {
            ck.rotate_hoisted(black_box(&ct), &rots, &keys)
                .expect("rotate")
        })
    });
    g.finish();
}

/// Which MPC primitive a party runs.
#[derive(Clone, Copy)]
enum Op {
    Mul,
    Less,
}

fn run_op(
    p: &mut Party<veil_host::SecretRng>,
    t: &mut dyn Transport,
    op: Op,
    x: &RingShares,
    y: &RingShares,
) {
    let r = match op {
        Op::Mul => drive(p.channel(), p.mul(x, y), t).map(drop),
        Op::Less => drive(p.channel(), p.less_than(x, y), t).map(drop),
    };
    r.expect("protocol run");
}

/// Two set-up parties: P1 on a thread that runs `iters` operations on command, P0 here.
struct MpcPair {
    p0: Party<veil_host::SecretRng>,
    t0: Box<dyn Transport>,
    x: RingShares,
    y: RingShares,
    cmd: mpsc::Sender<(Op, u64)>,
    done: mpsc::Receiver<()>,
}

impl MpcPair {
    fn new(n: usize) -> Self {
        let cfg = TransportConfig {
            timeout: Duration::from_secs(120),
            ..TransportConfig::default()
        };
        // The harness's link; the parties persist across criterion's batches, so they run on a
        // thread of their own instead of one `run_pair` call.
        let (mut t0, mut t1) = connect_pair(Link::Memory, cfg).expect("in-memory link");
        let shares = move |rng: &mut veil_host::SecretRng| {
            let m = MpcConfig::ENCFORMER.ring.mask();
            RingShares::new((0..n).map(|_| rng.next_u64() & (m >> 30)).collect())
        };
        let (cmd, cmd_rx) = mpsc::channel::<(Op, u64)>();
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let mut rng = veil_host::os_rng();
            let (x, y) = (shares(&mut rng), shares(&mut rng));
            let mut p1 =
                Party::new(PartyId::P1, MpcConfig::ENCFORMER, veil_host::os_rng()).expect("party");
            drive(p1.channel(), p1.setup(), t1.as_mut()).expect("setup");
            for (op, iters) in cmd_rx {
                for _ in 0..iters {
                    run_op(&mut p1, t1.as_mut(), op, &x, &y);
                }
                if done_tx.send(()).is_err() {
                    break;
                }
            }
        });
        let mut rng = veil_host::os_rng();
        let (x, y) = (shares(&mut rng), shares(&mut rng));
        let mut p0 =
            Party::new(PartyId::P0, MpcConfig::ENCFORMER, veil_host::os_rng()).expect("party");
        drive(p0.channel(), p0.setup(), t0.as_mut()).expect("setup");
        MpcPair {
            p0,
            t0,
            x,
            y,
            cmd,
            done,
        }
    }

    /// Runs `op` `iters` times on both parties; the wall time until both are done.
    fn run(&mut self, op: Op, iters: u64) -> Duration {
        let t = Instant::now();
        self.cmd.send((op, iters)).expect("P1 alive");
        for _ in 0..iters {
            run_op(&mut self.p0, self.t0.as_mut(), op, &self.x, &self.y);
        }
        self.done.recv().expect("P1 done");
        t.elapsed()
    }
}

fn mpc(c: &mut Criterion) {
    let n = 4096;
    let mut pair = MpcPair::new(n);
    let mut g = c.benchmark_group("mpc");
    g.bench_function(format!("Beaver mul + trunc n={n}"), |b| {
        b.iter_custom(|iters| pair.run(Op::Mul, iters))
    });
    g.bench_function(format!("less_than n={n}"), |b| {
        b.iter_custom(|iters| pair.run(Op::Less, iters))
    });
    g.finish();
}

fn convert_maps(c: &mut Criterion) {
    let p = params::insecure_logn12().validate().expect("test set");
    let (n, scale) = (p.max_slots(), p.default_scale());
    let bcfg = BoundaryCfg::encformer(8);
    let c2m = C2mPlan::shortest_admissible(&p, n, scale, bcfg).expect("C2M plan");
    let m2c = M2cPlan::new(&p, p.max_level(), n, scale, bcfg).expect("M2C plan");
    let mut rng = veil_host::os_rng();
    let q = c2m.modulus().value();
    let coeffs: Vec<u128> = (0..2 * n)
        .map(|_| ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) % q)
        .collect();
    let mk = (1u128 << K_BITS) - 1;
    let share = |rng: &mut veil_host::SecretRng| -> Vec<u128> {
        (0..n)
            .map(|_| ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) & mk)
            .collect()
    };
    let (re, im) = (share(&mut rng), share(&mut rng));
    let mut seed = [0u8; 16];
    rng.fill_bytes(&mut seed);
    let mut g = c.benchmark_group("convert_maps");
    g.bench_function(format!("C2M decoding map N=2^12 n={n}"), |b| {
        let mut masks = CommonMasks::from_seed(seed);
        b.iter(|| {
            c2m.decode_shares(black_box(&coeffs), true, &mut masks)
                .expect("decode")
        })
    });
    g.bench_function(format!("M2C encoding map N=2^12 n={n}"), |b| {
        let mut masks = CommonMasks::from_seed(seed);
        b.iter(|| {
            m2c.encode_shares(black_box(&re), &im, true, &mut masks)
                .expect("encode")
        })
    });
    g.finish();
}

mod group {
    //! The criterion group (its generated function has no doc comment of its own).
    #![allow(missing_docs)]
    use super::{convert_maps, key_switching, mpc, ntt};
    criterion::criterion_group!(benches, ntt, key_switching, mpc, convert_maps);
}
criterion_main!(group::benches);
