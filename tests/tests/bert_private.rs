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
    client_run, server_run, BlockCost, Blocks, EncoderConfig, EncoderWeights, SessionPlan,
    MPC_CONFIG,
};
use veil_core::ckks::Ckks;
use veil_core::hybrid::ServerKeys;
use veil_core::mpc::{Party, PartyId};
use veil_core::packing::Mat;
use veil_core::params;
use veil_host::mpc::drive;
use veil_host::transport::{mem_pair, TransportConfig};

/// Worst logit error accepted against the f64 reference.
const LOGIT_BOUND: f64 = 0.05;
/// Worst logit error accepted against the fixed-point emulation (same integer functions; what
/// remains is CKKS noise in the linear layers and the conversions' errors, up to one ulp per
/// element with the local C2M truncation).
const FIXED_BOUND: f64 = 0.02;

/// The small encoder every test here runs: one layer, `d = 64`, two heads, FFN 128.
const TINY: EncoderConfig = EncoderConfig {
    layers: 1,
    hidden: 64,
    heads: 2,
    ffn: 128,
    ln_eps: 1e-12,
    classes: 2,
};

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

fn run_private(
    lit: params::CkksParamsLiteral,
    w: &EncoderWeights,
    x: &Mat,
    m: usize,
    valid: usize,
    blocks: Blocks,
) -> (Vec<f64>, Vec<BlockCost>) {
    let (l, c, _) = run_private_both(lit, w, x, m, valid, blocks);
    (l, c)
}

/// [`run_private`], with the server's block costs (its CKKS counts) as well.
fn run_private_both(
    lit: params::CkksParamsLiteral,
    w: &EncoderWeights,
    x: &Mat,
    m: usize,
    valid: usize,
    blocks: Blocks,
) -> (Vec<f64>, Vec<BlockCost>, Vec<BlockCost>) {
    let p = lit.validate().unwrap();
    let plan = SessionPlan::with_blocks(&p, &w.cfg, m, blocks).unwrap();
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
            let mut server_costs = Vec::new();
            drive(
                ch,
                server_run(
                    &mut p1,
                    ServerKeys {
                        ck: ck1,
                        pk: pk1,
                        keys: keys1,
                    },
                    plan1,
                    w,
                    valid,
                    &mut |c| server_costs.push(c.clone()),
                ),
                &mut t1,
            )
            .unwrap();
            server_costs
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
                    c.tally.mpc_bytes,
                    c.tally.mpc_rounds
                );
                last = Instant::now();
                costs.push(c.clone());
            }),
            &mut t0,
        )
        .unwrap();
        let server_costs = h.join().unwrap();
        println!("private run {:.2?}", t.elapsed());
        (logits, costs, server_costs)
    })
}

/// The private logits against the `f64` reference and the fixed-point emulation.
fn check_logits(got: &[f64], want: &[f64], fx: &[f64]) {
    assert_eq!(got.len(), want.len());
    for ((a, b), c) in got.iter().zip(want).zip(fx) {
        assert!((a - b).abs() < LOGIT_BOUND, "logit {a} vs reference {b}");
        assert!(
            (a - c).abs() < FIXED_BOUND,
            "logit {a} vs fixed-point emulation {c}"
        );
    }
}

#[test]
fn tiny_encoder_matches_reference() {
    let cfg = TINY;
    let w = tiny(cfg, 5);
    let (m, valid) = (16, 11);
    let x = input(m, cfg.hidden, 9);
    let want = veil_core::bert::reference::logits(&w, &x, valid).unwrap();
    let lit = params::insecure_logn12();
    let plan = SessionPlan::new(&lit.clone().validate().unwrap(), &cfg, m).unwrap();
    let fx = logits_fixed(&plan, &w, &x, valid).unwrap();
    let (got, costs) = run_private(lit, &w, &x, m, valid, Blocks::EXACT);
    println!("logits: private {got:?}, fixed-point {fx:?}, f64 reference {want:?}");
    assert_eq!(costs.last().map(|c| c.block), Some("head"));
    check_logits(&got, &want, &fx);
}

/// EncFormer's blocks in the pipeline: GELU with the split (CKKS evaluates BOLT's two
/// candidates on both real vectors of each complex ciphertext, MPC selects), alone and with
/// MBMax and MBLN. The logits match the fixed-point emulation of the same blocks and the `f64`
/// reference of the same functions. The server evaluates the candidates (a conjugation and six
/// products per FC1 ciphertext, as the plan's dry run counts), the conversion carries two more
/// tensors, and GELU's MPC part sends less than half of the all-MPC block's bytes.
#[test]
fn tiny_encoder_with_encformer_blocks_matches_reference() {
    use veil_core::nonlinear::gelu::{GeluKind, GeluSplit};
    let cfg = TINY;
    let w = tiny(cfg, 5);
    let (m, valid) = (16, 11);
    let x = input(m, cfg.hidden, 9);
    let split = Blocks {
        gelu: GeluKind::Bolt,
        gelu_split: GeluSplit::CkksCandidates,
        ..Blocks::EXACT
    };
    // MBMax with (c, R_d) = (4, 4^5·16): about 1/16 per key near 0; MBLN dividing by 16.
    let enc = Blocks::encformer((4.0, 16384.0), (1.0, 16.0));
    let lit = params::insecure_logn12();
    let p = lit.clone().validate().unwrap();
    let gelu_bytes = |c: &[BlockCost]| -> u64 {
        c.iter()
            .filter(|c| c.block == "gelu")
            .map(|c| c.tally.mpc_bytes)
            .sum()
    };
    let (_, exact_costs, exact_server) =
        run_private_both(lit.clone(), &w, &x, m, valid, Blocks::EXACT);
    let fc1_of = |c: &[BlockCost]| c.iter().find(|c| c.block == "fc1").unwrap().tally.ckks;
    for blocks in [split, enc] {
        let plan = SessionPlan::with_blocks(&p, &cfg, m, blocks).unwrap();
        assert!(plan.c2m_cand_level().is_some());
        let want = veil_core::bert::reference::logits_with(&w, &x, valid, &blocks).unwrap();
        let fx = logits_fixed(&plan, &w, &x, valid).unwrap();
        let (got, costs, server) = run_private_both(lit.clone(), &w, &x, m, valid, blocks);
        println!("{blocks:?}\nlogits: private {got:?}, fixed-point {fx:?}, f64 reference {want:?}");
        assert_eq!(costs.iter().filter(|c| c.block == "c2m:cand").count(), 2);
        let (fc1, fc1_exact) = (fc1_of(&server), fc1_of(&exact_server));
        let conj = fc1
            .conjugations
            .checked_sub(fc1_exact.conjugations)
            .expect("the split adds conjugations");
        assert!(conj > 0 && fc1.ct_mults == 6 * conj, "{fc1:?}");
        let dry = plan.dry_counts[2];
        assert_eq!(
            (fc1.ct_mults, fc1.conjugations, fc1.rotations),
            (dry.ct_mults, dry.conjugations, dry.rotations),
            "the dry run counts the real run"
        );
        assert!(
            2 * gelu_bytes(&costs) < gelu_bytes(&exact_costs),
            "{} vs {}",
            gelu_bytes(&costs),
            gelu_bytes(&exact_costs)
        );
        check_logits(&got, &want, &fx);
    }
}

/// Misuse is refused with a typed error before any message: the wrong MPC role, a token count
/// outside `1..=m`, an input of the wrong shape or outside the conversion's bound, weights of
/// another architecture.
#[test]
fn misuse_is_refused_with_typed_errors() {
    use veil_core::convert::ProtocolError;
    let cfg = TINY;
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
        server_run(
            &mut p1,
            ServerKeys {
                ck: &ck,
                pk: &pk,
                keys: &keys,
            },
            &plan,
            &other,
            16,
            &mut |_| {},
        ),
        &mut t1,
    );
    assert!(matches!(
        r,
        Err(veil_host::mpc::DriverError::Convert(ProtocolError::Ckks(_)))
    ));
}
