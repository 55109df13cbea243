//! Private inference of a small BERT-architecture encoder end to end, in memory: the client
//! (P0) and the server (P1) in two threads over the in-memory duplex, every FHE block on real
//! CKKS, every nonlinear block in MPC, every boundary through the complex conversion. The
//! logits must match the plaintext `f64` reference within the stated bound.

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use veil_backend_cpu::CpuBackend;
use veil_core::bert::fixed::logits_fixed;
use veil_core::bert::{
    client_run, server_run, BlockCost, EncoderConfig, EncoderWeights, SessionPlan, MPC_CONFIG,
};
use veil_core::ckks::Ckks;
use veil_core::mpc::{Party, PartyId};
use veil_core::packing::Mat;
use veil_core::params;
use veil_host::mpc::drive;
use veil_host::transport::{mem_pair, TransportConfig};

/// Worst logit error accepted against the f64 reference.
const LOGIT_BOUND: f64 = 0.05;
/// Worst logit error accepted against the fixed-point emulation (same integer functions; what
/// remains is CKKS noise in the linear layers and the conversions' sub-ulp errors).
const FIXED_BOUND: f64 = 0.02;

fn seeded(s: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(s)
}

fn tiny(cfg: EncoderConfig, seed: u64) -> EncoderWeights {
    EncoderWeights::random(cfg, &mut seeded(seed))
}

fn input(m: usize, d: usize, seed: u64) -> Mat {
    let w = EncoderWeights::random(
        EncoderConfig {
            layers: 0,
            hidden: d,
            heads: 1,
            ffn: 1,
            ln_eps: 1e-12,
            classes: m,
        },
        &mut seeded(seed),
    );
    w.head.w.transpose()
}

// ---- f64 reference (local until the product's reference lands) ----
fn ln_rows(x: &Mat, g: &[f64], b: &[f64], eps: f64) -> Mat {
    let mut y = x.clone();
    for r in 0..x.rows {
        let row = &x.data[r * x.cols..(r + 1) * x.cols];
        let mu = row.iter().sum::<f64>() / x.cols as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / x.cols as f64;
        for c in 0..x.cols {
            y.set(r, c, (row[c] - mu) / (var + eps).sqrt() * g[c] + b[c]);
        }
    }
    y
}
fn lin(x: &Mat, w: &Mat, b: &[f64]) -> Mat {
    let mut y = x.matmul(w);
    for r in 0..y.rows {
        for c in 0..y.cols {
            y.data[r * y.cols + c] += b[c];
        }
    }
    y
}
fn erf(x: f64) -> f64 {
    libm::erf(x)
}
fn reference(w: &EncoderWeights, x: &Mat, valid: usize) -> Vec<f64> {
    let c = w.cfg;
    let (m, d, h) = (x.rows, c.hidden, c.heads);
    let dh = d / h;
    let mut x = x.clone();
    for l in &w.layers {
        let (q, k, v) = (
            lin(&x, &l.wq, &l.bq),
            lin(&x, &l.wk, &l.bk),
            lin(&x, &l.wv, &l.bv),
        );
        let mut o = Mat::zeros(m, d);
        for hh in 0..h {
            for i in 0..m {
                let s: Vec<f64> = (0..valid)
                    .map(|j| {
                        (0..dh)
                            .map(|u| q.get(i, hh * dh + u) * k.get(j, hh * dh + u))
                            .sum::<f64>()
                            / (dh as f64).sqrt()
                    })
                    .collect();
                let mx = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - mx).exp()).collect();
                let z: f64 = e.iter().sum();
                for u in 0..dh {
                    let acc: f64 = (0..valid).map(|j| e[j] / z * v.get(j, hh * dh + u)).sum();
                    o.set(i, hh * dh + u, acc);
                }
            }
        }
        let mut y = lin(&o, &l.wo, &l.bo);
        for (a, b) in y.data.iter_mut().zip(&x.data) {
            *a += b;
        }
        let hid = ln_rows(&y, &l.ln1_g, &l.ln1_b, c.ln_eps);
        let mut f = lin(&hid, &l.w1, &l.b1);
        for v in f.data.iter_mut() {
            *v = 0.5 * *v * (1.0 + erf(*v / std::f64::consts::SQRT_2));
        }
        let mut f2 = lin(&f, &l.w2, &l.b2);
        for (a, b) in f2.data.iter_mut().zip(&hid.data) {
            *a += b;
        }
        x = ln_rows(&f2, &l.ln2_g, &l.ln2_b, c.ln_eps);
    }
    let pooled: Vec<f64> = (0..d)
        .map(|cc| (0..valid).map(|r| x.get(r, cc)).sum::<f64>() / valid as f64)
        .collect();
    (0..c.classes)
        .map(|k| {
            w.head.b[k]
                + (0..d)
                    .map(|cc| pooled[cc] * w.head.w.get(cc, k))
                    .sum::<f64>()
        })
        .collect()
}

fn run_private(
    lit: params::CkksParamsLiteral,
    w: &EncoderWeights,
    x: &Mat,
    m: usize,
    valid: usize,
) -> (Vec<f64>, Vec<BlockCost>) {
    let p = lit.validate().unwrap();
    let plan = SessionPlan::new(&p, &w.cfg, m).unwrap();
    println!(
        "plan: slots {} levels {:?} c2m levels {:?}, {} Galois steps",
        plan.slots,
        plan.levels,
        plan.c2m_levels(),
        plan.rotations().len()
    );
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut g = seeded(77);
    let t = Instant::now();
    let sk = ck.gen_secret_key(&mut g);
    let pk = ck.gen_public_key(&sk, &mut g).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, plan.rotations(), true, &mut g, |_, _| {})
        .unwrap();
    println!("keys {:.2?}", t.elapsed());
    let cfg = TransportConfig {
        timeout: Duration::from_secs(120),
        max_frame: 1 << 30,
    };
    let (mut t0, mut t1) = mem_pair(cfg);
    let t = Instant::now();
    std::thread::scope(|s| {
        let (ck1, plan1, pk1, keys1) = (&ck, &plan, &pk, &keys);
        let h = s.spawn(move || {
            let mut p1 = Party::new(PartyId::P1, MPC_CONFIG, seeded(2)).unwrap();
            let ch = p1.channel();
            drive(
                ch,
                server_run(&mut p1, ck1, pk1, keys1, plan1, w, valid, &mut |_| {}),
                &mut t1,
            )
            .unwrap()
        });
        let mut p0 = Party::new(PartyId::P0, MPC_CONFIG, seeded(1)).unwrap();
        let ch = p0.channel();
        let mut costs = Vec::new();
        let mut last = Instant::now();
        let logits = drive(
            ch,
            client_run(&mut p0, &ck, &sk, &plan, x, valid, &mut |c| {
                println!(
                    "  L{:<2} {:<10} {:>8.1?} {:>10} B {:>4} rounds",
                    c.layer as i64,
                    c.block,
                    last.elapsed(),
                    c.mpc_bytes,
                    c.mpc_rounds
                );
                last = Instant::now();
                costs.push(c.clone());
            }),
            &mut t0,
        )
        .unwrap();
        h.join().unwrap();
        println!("private run {:.2?}", t.elapsed());
        (logits, costs)
    })
}

#[test]
fn tiny_encoder_matches_reference() {
    let cfg = EncoderConfig {
        layers: 1,
        hidden: 64,
        heads: 2,
        ffn: 128,
        ln_eps: 1e-12,
        classes: 2,
    };
    let w = tiny(cfg, 5);
    let (m, valid) = (16, 11);
    let x = input(m, cfg.hidden, 9);
    let want = reference(&w, &x, valid);
    let lit = params::insecure_logn12();
    let plan = SessionPlan::new(&lit.clone().validate().unwrap(), &cfg, m).unwrap();
    let fx = logits_fixed(&plan, &w, &x, valid).unwrap();
    let (got, costs) = run_private(lit, &w, &x, m, valid);
    println!("logits: private {got:?}, fixed-point {fx:?}, f64 reference {want:?}");
    assert_eq!(costs.last().map(|c| c.block), Some("head"));
    for ((a, b), c) in got.iter().zip(&want).zip(&fx) {
        assert!((a - b).abs() < LOGIT_BOUND, "logit {a} vs reference {b}");
        assert!(
            (a - c).abs() < FIXED_BOUND,
            "logit {a} vs fixed-point emulation {c}"
        );
    }
}

/// Misuse is refused with a typed error before any message: the wrong MPC role, a token count
/// outside `1..=m`, an input of the wrong shape or outside the conversion's bound, weights of
/// another architecture.
#[test]
fn misuse_is_refused_with_typed_errors() {
    use veil_core::convert::ProtocolError;
    let cfg = EncoderConfig {
        layers: 1,
        hidden: 64,
        heads: 2,
        ffn: 128,
        ln_eps: 1e-12,
        classes: 2,
    };
    let p = params::insecure_logn12().validate().unwrap();
    let plan = SessionPlan::new(&p, &cfg, 16).unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 1).unwrap()));
    let mut g = seeded(3);
    let sk = ck.gen_secret_key(&mut g);
    let pk = ck.gen_public_key(&sk, &mut g).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, &[], true, &mut g, |_, _| {})
        .unwrap();
    let x = Mat::zeros(16, 64);
    let run_client = |id: PartyId, x: &Mat, valid: usize| {
        let (mut t0, _t1) = mem_pair(TransportConfig::default());
        let mut p0 = Party::new(id, MPC_CONFIG, seeded(1)).unwrap();
        let ch = p0.channel();
        drive(
            ch,
            client_run(&mut p0, &ck, &sk, &plan, x, valid, &mut |_| {}),
            &mut t0,
        )
    };
    let is_ckks = |r: Result<Vec<f64>, veil_host::mpc::DriverError>| {
        matches!(
            r,
            Err(veil_host::mpc::DriverError::Convert(ProtocolError::Ckks(_)))
        )
    };
    assert!(is_ckks(run_client(PartyId::P1, &x, 16)));
    assert!(is_ckks(run_client(PartyId::P0, &x, 0)));
    assert!(is_ckks(run_client(PartyId::P0, &x, 17)));
    assert!(is_ckks(run_client(PartyId::P0, &Mat::zeros(15, 64), 16)));
    assert!(is_ckks(run_client(
        PartyId::P0,
        &Mat::from_fn(16, 64, |_, _| 1e6),
        16
    )));
    let other = tiny(EncoderConfig { ffn: 256, ..cfg }, 1);
    let (_t0, mut t1) = mem_pair(TransportConfig::default());
    let mut p1 = Party::new(PartyId::P1, MPC_CONFIG, seeded(2)).unwrap();
    let ch = p1.channel();
    let r = drive(
        ch,
        server_run(&mut p1, &ck, &pk, &keys, &plan, &other, 16, &mut |_| {}),
        &mut t1,
    );
    assert!(matches!(
        r,
        Err(veil_host::mpc::DriverError::Convert(ProtocolError::Ckks(_)))
    ));
}
