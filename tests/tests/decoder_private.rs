//! Private generation with small causal decoders end to end, in memory: the client (P0) and
//! the server (P1) in two threads over the in-memory duplex, every product on real CKKS with
//! the keys and values cached encrypted at the server, every nonlinear block in MPC, every
//! boundary through the complex conversion. Each step's logits must match the `f64`
//! reference's ([`veil_core::decoder::reference::step`]) within [`LOGIT_BOUND`], and greedy
//! generation must pick the reference's tokens.

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_core::decoder::plan::{DecodePlan, Ranges, MPC_CONFIG};
use veil_core::decoder::reference::{
    self, argmax, embed_token, random_weights, step_tracked, ActRanges, KvCache,
};
use veil_core::decoder::run::{DecodeRun, ServedDecoder};
use veil_core::decoder::{DecoderConfig, DecoderWeights, Family};
use veil_core::hybrid::{BlockCost, ServerKeys};
use veil_core::mpc::ot::silent::INSECURE_SILENT_TEST;
use veil_core::mpc::{Party, PartyId};
use veil_core::params;
use veil_core::Error;
use veil_host::mpc::drive;
use veil_host::transport::{mem_pair, TransportConfig};

/// Worst logit error accepted against the `f64` reference: the MPC blocks work at `2^{-13}`
/// (softmax, norms and SiLU within `5·10⁻⁴` each) and the conversions add an ulp per value;
/// through two layers and the head this stays well under it.
const LOGIT_BOUND: f64 = 0.05;

fn seeded(s: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(s)
}

fn small(family: Family) -> DecoderConfig {
    DecoderConfig::tiny(family)
}

/// What the client saw: the logits of every step that asked for them, and the block costs.
struct Seen {
    t: usize,
    logits: Vec<Vec<f64>>,
    tokens: Vec<u32>,
    costs: Vec<BlockCost>,
}

/// A party with IKNP, or with the (small, insecure) silent OT behind its pools.
fn party(id: PartyId, seed: u64, silent: bool) -> Party<ChaCha20Rng> {
    if silent {
        Party::with_silent_ot(id, MPC_CONFIG, seeded(seed), INSECURE_SILENT_TEST).unwrap()
    } else {
        Party::new(id, MPC_CONFIG, seeded(seed)).unwrap()
    }
}

/// The prompt through the private session, then `gen` greedy tokens; `max_ctx` positions;
/// `silent`: the silent OT behind both parties' COT pools.
fn generate(
    w: &DecoderWeights,
    prompt: &[u32],
    gen: usize,
    max_ctx: usize,
    groups: Option<usize>,
    cal: Option<(&ActRanges, bool)>,
    silent: bool,
) -> Result<Seen, String> {
    let p = params::insecure_logn12().validate().unwrap();
    let plan = match cal {
        None => DecodePlan::with_groups(&p, &w.cfg, max_ctx, groups).unwrap(),
        Some((r, per_site)) => {
            let plan = DecodePlan::with_options(&p, &w.cfg, max_ctx, groups, Ranges::calibrated(r))
                .unwrap();
            if per_site {
                plan.with_norms(r).unwrap()
            } else {
                plan
            }
        }
    };
    println!(
        "plan: slots {} groups {} (t = {}) levels {:?} c2m levels {:?}, {} Galois steps",
        plan.slots(),
        plan.layout().groups(),
        plan.layout().t(),
        plan.levels(),
        plan.c2m_levels(),
        plan.rotations().len()
    );
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut g = seeded(77);
    let sk = ck.gen_secret_key(&mut g);
    let pk = ck.gen_public_key(&sk, &mut g).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, plan.rotations(), true, &mut g, |_, _| {})
        .unwrap();
    let served = ServedDecoder::new(w).unwrap();
    let cfg = TransportConfig {
        timeout: Duration::from_secs(120),
        max_frame: 1 << 30,
    };
    let (mut t0, mut t1) = mem_pair(cfg);
    // Steps: every prompt token, then a step per generated token but the last; the logits of
    // the last prompt token and of every generated token's step are wanted.
    let steps = prompt.len() + gen.saturating_sub(1);
    let want = |i: usize| i + 1 >= prompt.len();
    let t = Instant::now();
    std::thread::scope(|s| {
        let (ck1, plan1, pk1, keys1, served1) = (&ck, &plan, &pk, &keys, &served);
        let h = s.spawn(move || {
            let mut p1 = party(PartyId::P1, 2, silent);
            let ch = p1.channel();
            let fut = async {
                let keys = ServerKeys {
                    ck: ck1,
                    pk: pk1,
                    keys: keys1,
                };
                let mut run = DecodeRun::server(&mut p1, keys, plan1, served1)?;
                for i in 0..steps {
                    run.step(None, want(i), &mut |_| {}).await?;
                }
                let cts = run.cache().map(|c| c.ciphertexts()).unwrap_or(0);
                Ok::<_, veil_core::convert::ProtocolError>(cts)
            };
            drive(ch, fut, &mut t1).map_err(|e| e.to_string())
        });
        let mut p0 = party(PartyId::P0, 1, silent);
        let ch = p0.channel();
        let mut costs = Vec::new();
        let fut = async {
            let mut run = DecodeRun::client(&mut p0, &ck, &sk, &plan)?;
            let (mut logits, mut tokens) = (Vec::new(), Vec::new());
            let mut next = prompt[0];
            for i in 0..steps {
                let tok = if i < prompt.len() { prompt[i] } else { next };
                let x = embed_token(w, tok, i)?;
                let out = run
                    .step(Some(&x), want(i), &mut |c| costs.push(c.clone()))
                    .await?;
                if let Some(l) = out {
                    next = argmax(&l);
                    tokens.push(next);
                    logits.push(l);
                }
            }
            Ok::<_, veil_core::convert::ProtocolError>((logits, tokens))
        };
        let r0 = drive(ch, fut, &mut t0).map_err(|e| e.to_string());
        let r1 = h.join().unwrap();
        println!("private run {:.2?}", t.elapsed());
        let ((logits, tokens), cts) = match (r0, r1) {
            (Ok(a), Ok(b)) => (a, b),
            (r0, r1) => {
                return Err(format!(
                    "client: {}; server: {}",
                    r0.err().unwrap_or_default(),
                    r1.err().unwrap_or_default()
                ))
            }
        };
        // Every layer's keys and values: a key and a value ciphertext per group of KV heads and
        // cache block.
        assert_eq!(
            cts,
            2 * w.cfg.layers * plan.kv_cts() * plan.layout().blocks(steps)
        );
        Ok(Seen {
            t: plan.layout().t(),
            logits,
            tokens,
            costs,
        })
    })
}

fn check(family: Family, seed: u64) {
    check_with(small(family), &[5, 17, 230], 3, seed, None);
}

fn check_with(cfg: DecoderConfig, prompt: &[u32], gen: usize, seed: u64, groups: Option<usize>) {
    let w = random_weights(&cfg, seed).unwrap();
    check_weights(&w, prompt, gen, groups, None);
}

/// The private run of `w` against the reference (with the bounds from `cal`, if any, and the
/// norms planned per site if its flag is set): asserts the logit bound and the tokens.
fn check_weights(
    w: &DecoderWeights,
    prompt: &[u32],
    gen: usize,
    groups: Option<usize>,
    cal: Option<(&ActRanges, bool)>,
) {
    let (worst, seen) = compare(w, prompt, gen, groups, cal);
    let greedy = reference::greedy(w, prompt, gen).unwrap();
    println!(
        "{:?}: worst |Δlogit| {worst:.2e}; private {:?}, reference {greedy:?}",
        w.cfg.family, seen.tokens
    );
    assert!(worst < LOGIT_BOUND, "worst |Δlogit| {worst}");
    assert_eq!(seen.tokens, greedy);
    check_report(&seen, gen);
}

/// The private run's worst logit error against the reference over the same tokens, and what
/// the client saw.
fn compare(
    w: &DecoderWeights,
    prompt: &[u32],
    gen: usize,
    groups: Option<usize>,
    cal: Option<(&ActRanges, bool)>,
) -> (f64, Seen) {
    let seen = generate(w, prompt, gen, 24, groups, cal, false).unwrap();
    // The reference over the same tokens (the prompt, then the private run's own picks).
    let mut cache = KvCache::new(&w.cfg, 24).unwrap();
    let mut want = Vec::new();
    let fed: Vec<u32> = prompt
        .iter()
        .copied()
        .chain(seen.tokens.iter().copied().take(gen - 1))
        .collect();
    for (i, &t) in fed.iter().enumerate() {
        let l = reference::step(w, &mut cache, t).unwrap();
        if i + 1 >= prompt.len() {
            want.push(l);
        }
    }
    assert_eq!(seen.logits.len(), want.len());
    let mut worst = 0.0f64;
    for (got, want) in seen.logits.iter().zip(&want) {
        assert_eq!(got.len(), w.cfg.vocab);
        for (a, b) in got.iter().zip(want) {
            worst = worst.max((a - b).abs());
        }
    }
    (worst, seen)
}

/// The cost report of a run that generated `gen` tokens.
fn check_report(seen: &Seen, gen: usize) {
    // The report names every block of a layer, and the head on the steps with logits.
    let names: Vec<&str> = seen
        .costs
        .iter()
        .filter(|c| c.layer == 0)
        .map(|c| c.block)
        .take(22)
        .collect();
    for b in [
        "norm1", "qkv", "m2c:qkv", "scores", "c2m:s", "softmax", "values", "act", "c2m:d",
    ] {
        assert!(names.contains(&b), "{b} missing from {names:?}");
    }
    let heads = seen.costs.iter().filter(|c| c.block == "head").count();
    println!("blocks of the cache: t = {}", seen.t);
    assert_eq!(heads, gen);
    // Every conversion block moved bytes.
    assert!(seen
        .costs
        .iter()
        .filter(|c| c.block.starts_with("c2m") || c.block.starts_with("m2c"))
        .all(|c| c.tally.mpc_bytes > 0 && c.tally.converted_cts > 0));
}

/// A massive activation (the first token's embedding carries 3000 in one column, which the
/// residual stream keeps through every layer, as SmolLM2's first position does): the norms are
/// planned per site from a calibration run (that column widened, the others at a small shift),
/// and the private run still matches the reference.
#[test]
fn a_massive_activation_column_is_planned_per_site_and_matches() {
    let cfg = small(Family::Llama);
    let mut w = random_weights(&cfg, 19).unwrap();
    // An untied head (the same table), so that the large entry is not a logit of its own.
    if w.head.is_none() {
        w.head = Some(w.embed.clone());
        w.cfg.tied_head = false;
    }
    let d = cfg.hidden;
    let first = 5usize;
    w.embed.data[first * d + 3] = 3000.0;
    // The server's calibration text (not the prompt; it starts with the same token).
    let mut r = ActRanges::default();
    let mut cache = KvCache::new(&w.cfg, 4).unwrap();
    for t in [first as u32, 40, 41, 42] {
        step_tracked(&w, &mut cache, t, &mut r).unwrap();
    }
    let p = params::insecure_logn12().validate().unwrap();
    let plan = DecodePlan::with_options(&p, &w.cfg, 24, None, Ranges::calibrated(&r))
        .unwrap()
        .with_norms(&r)
        .unwrap();
    let ns = plan.norm_shifts();
    println!("norm sites: {ns:?}");
    assert!(ns.iter().all(|n| n.wide.get(3).is_some_and(|&w| w > 0)));
    assert!(ns
        .iter()
        .all(|n| n.wide.iter().filter(|&&w| w > 0).count() < d / 4));
    let prompt = [first as u32, 17, 230];
    check_weights(&w, &prompt, 3, None, Some((&r, true)));
    // One shift for every column (the one the large column needs) costs the rest their low
    // bits: the same run misses the bound by far.
    let (worst, _) = compare(&w, &prompt, 3, None, Some((&r, false)));
    println!("one shift for every column: worst |Δlogit| {worst:.2e}");
    assert!(worst > 10.0 * LOGIT_BOUND, "{worst}");
}

#[test]
fn small_llama_generates_the_reference_tokens() {
    check(Family::Llama, 3);
}

#[test]
fn small_gpt2_generates_the_reference_tokens() {
    check(Family::Gpt2, 4);
}

/// A context that crosses a cache block (`t = 16` positions per block with heads of 128 on
/// 2,048 slots): 18 prompt positions and two generated tokens, one layer.
#[test]
fn a_context_across_cache_blocks_matches_the_reference() {
    let cfg = DecoderConfig {
        layers: 1,
        hidden: 256,
        heads: 2,
        kv_heads: 1,
        ..small(Family::Llama)
    };
    let prompt: Vec<u32> = (0..18).map(|i| (i * 37 + 3) % 300).collect();
    check_with(cfg, &prompt, 2, 9, None);
}

/// SmolLM2's head structure (9 query heads over 3 KV heads: pairs and a lone head per KV head)
/// with two heads per ciphertext: two key ciphertexts, the second with an empty group, query
/// ciphertexts reading the second; and with four (one key ciphertext, a padded group).
#[test]
fn grouped_heads_with_padding_and_lone_heads_match_the_reference() {
    let cfg = DecoderConfig {
        layers: 1,
        hidden: 144,
        heads: 9,
        kv_heads: 3,
        ..small(Family::Llama)
    };
    for groups in [2, 4] {
        check_with(cfg.clone(), &[7, 100, 42], 2, 11, Some(groups));
    }
}

/// GPT-2's (one KV head per query head, every head alone) over four key ciphertexts of two
/// heads each.
#[test]
fn gpt2_over_several_key_ciphertexts_matches_the_reference() {
    let cfg = DecoderConfig {
        layers: 1,
        heads: 8,
        kv_heads: 8,
        ..small(Family::Gpt2)
    };
    check_with(cfg, &[3, 250, 9], 2, 12, Some(2));
}

/// A session refuses the position past its maximum context with a typed error, at both
/// parties, before any traffic.
#[test]
fn a_full_context_is_refused() {
    let w = random_weights(&small(Family::Llama), 3).unwrap();
    let err = match generate(&w, &[1, 2, 3], 1, 2, None, None, false) {
        Ok(_) => panic!("a third position in a two-position session ran"),
        Err(e) => e,
    };
    let want = Error::ContextFull { max: 2 }.to_string();
    assert_eq!(err.matches(&want).count(), 2, "{err}");
}

/// With the silent OT, a decode step's layers run on silently made COTs: each layer's pools are
/// topped up to its demand at its last run before it runs (the `ot-fill` blocks), so from the
/// second step on the nonlinear blocks send a derandomization bit per COT instead of IKNP's
/// 16 bytes. The same generation runs twice, with IKNP and with the silent OT: the tokens are
/// the reference's both times, and from step 1 on every MPC block of the silent run costs at
/// most half the IKNP run's bytes at the same step (without the top-up both ran every COT on
/// IKNP, whatever the OT, and cost the same).
#[test]
fn the_silent_ot_serves_every_step_after_the_first_from_its_pools() {
    let w = random_weights(&small(Family::Llama), 11).unwrap();
    let (prompt, gen) = ([5u32, 17, 230], 2);
    let greedy = reference::greedy(&w, &prompt, gen).unwrap();
    let iknp = generate(&w, &prompt, gen, 24, None, None, false).unwrap();
    let silent = generate(&w, &prompt, gen, 24, None, None, true).unwrap();
    assert_eq!(iknp.tokens, greedy);
    assert_eq!(silent.tokens, greedy);
    check_report(&silent, gen);
    let fills = silent.costs.iter().filter(|c| c.block == "ot-fill").count();
    assert!(fills >= 2, "{fills} pool fills");
    assert!(!iknp.costs.iter().any(|c| c.block == "ot-fill"));
    let per_step = |seen: &Seen, block: &str| -> Vec<u64> {
        seen.costs
            .iter()
            .filter(|c| c.layer == 0 && c.block == block)
            .map(|c| c.tally.mpc_bytes)
            .collect()
    };
    for block in ["norm1", "softmax", "norm2", "act"] {
        let (a, b) = (per_step(&iknp, block), per_step(&silent, block));
        println!("{block}: bytes per step at layer 0, IKNP {a:?}, silent {b:?}");
        assert_eq!(a.len(), prompt.len() + gen - 1);
        assert_eq!(a.len(), b.len());
        // Step 0's layer 0 has no measure yet and runs on IKNP in both.
        for (i, (x, y)) in a.iter().zip(&b).enumerate().skip(1) {
            assert!(
                2 * y <= *x,
                "{block} at step {i}: silent {y} bytes, IKNP {x}"
            );
        }
    }
}
