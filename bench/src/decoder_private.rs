//! `veil-bench generate`: private generation at a real decoder's layer shape, both parties on
//! this machine over loopback TCP: every step a real decode step ([`DecodeRun::step`]: CKKS
//! products and the encrypted KV cache at the server, MPC norms, softmax and SiLU/GELU, the
//! conversions between them), with seeded random weights at SmolLM2's or GPT2-base's shape and
//! `--layers` layers (1 by default: the per-layer cost SPU's decoder layer is compared with).
//! Each step's wall time, bytes both ways and rounds, and the per-block split of the last step.

use crate::decoder::DecoderShape;
use crate::error::{core, invalid, protocol};
use crate::BenchError;
use serde::Serialize;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use veil_core::convert::ProtocolError;
use veil_core::decoder::plan::{session_params, DecodePlan, Ranges};
use veil_core::decoder::reference::{
    argmax, embed_token, greedy, random_weights, step, ActRanges, KvCache,
};

use veil_core::decoder::run::{DecodeRun, ServedDecoder};
use veil_core::decoder::{DecoderConfig, DecoderWeights, Family};
use veil_core::hybrid::ServerKeys;
use veil_core::mpc::PartyId;
use veil_host::harness::{run_pair, Link};
use veil_host::model::llama::LlamaFile;
use veil_host::mpc::drive;
use veil_host::transport::TransportConfig;

/// Options of `veil-bench generate`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchGenerateArgs {
    /// A real checkpoint instead of random weights at `--shape`: `smollm2` (fetched into the
    /// cache on first use). Runs `--prompt` and `--new-tokens` greedy tokens privately and
    /// compares them with the plaintext model's.
    #[arg(long)]
    pub model: Option<String>,
    /// The prompt of a `--model` run (raw text, no chat template).
    #[arg(long, default_value = "The capital of France is")]
    pub prompt: String,
    /// Greedy tokens a `--model` run generates.
    #[arg(long, default_value_t = 2)]
    pub new_tokens: usize,
    /// The shape.
    #[arg(long, value_enum, default_value_t = DecoderShape::Smollm2)]
    pub shape: DecoderShape,
    /// Decoder layers (the shape's own count gives a whole model's token).
    #[arg(long, default_value_t = 1)]
    pub layers: usize,
    /// Steps (positions) to run; the last one asks for logits.
    #[arg(long, default_value_t = 2)]
    pub steps: usize,
    /// The session's maximum context: the plan (the cache's head groups) is made for it.
    #[arg(long, default_value_t = 256)]
    pub max_ctx: usize,
    /// Heads per ciphertext in the cache's layout (`DecodePlan::with_groups`); by default the
    /// cost model's choice for the session's maximum context (`--max-ctx`, or for a `--model`
    /// run the prompt and the new tokens). For measuring the cost model.
    #[arg(long)]
    pub groups: Option<usize>,
    /// OT behind the MPC's correlated OTs: silent (Ferret with EMP's parameters, the product's
    /// default and SPU Cheetah's) or iknp (16 bytes per COT). The silent OT's set-up and its
    /// first extension fall in step 0; later extensions in the step that drains the pool.
    #[arg(long, default_value = "silent")]
    pub ot: String,
    /// MiB of encoded weights the server keeps between steps (`DecodeRun::with_weight_cache`;
    /// 0: every plaintext encoded at each use).
    #[arg(long, default_value_t = 0)]
    pub weight_cache_mib: usize,
    /// Worker threads of each party's CPU backend.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Every receive's timeout, seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One step as the client saw it.
#[derive(Clone, Debug, Serialize)]
pub struct StepRow {
    /// Position (0-based); the context the step attends to is `pos + 1`.
    pub pos: usize,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Bytes sent plus received.
    pub bytes: u64,
    /// Rounds.
    pub rounds: u64,
    /// Whether the step opened logits to the client.
    pub logits: bool,
}

/// `veil-bench generate` output.
#[derive(Clone, Debug, Serialize)]
pub struct GenerateReport {
    /// The shape.
    pub shape: DecoderShape,
    /// Layers run.
    pub layers: usize,
    /// The parameter set.
    pub params: String,
    /// The OT: `silent` or `iknp`.
    pub ot: String,
    /// MiB of encoded weights the server kept between steps.
    pub weight_cache_mib: usize,
    /// The session's maximum context.
    pub max_ctx: usize,
    /// `log2` bounds of the residual stream, the products' outputs and the activation.
    pub ranges: (u32, u32, u32),
    /// Heads per ciphertext in the cache's layout, and positions per cache block.
    pub groups: (usize, usize),
    /// Galois keys the client generates.
    pub galois_keys: usize,
    /// Key generation, seconds.
    pub keygen_s: f64,
    /// Steps.
    pub steps: Vec<StepRow>,
    /// The last step's blocks of layer 0 (and the head): `(block, server seconds, bytes)`.
    pub blocks: Vec<(String, f64, u64)>,
    /// With `--model`: the prompt's ids, the private greedy tokens, the plaintext model's, and
    /// the worst |Δlogit| against the plaintext model at the steps with logits.
    pub real: Option<RealRun>,
}

/// A `--model` run's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct RealRun {
    /// The model.
    pub model: String,
    /// The prompt's ids.
    pub prompt: Vec<u32>,
    /// The private run's greedy tokens.
    pub tokens: Vec<u32>,
    /// The plaintext model's greedy tokens.
    pub reference: Vec<u32>,
    /// Worst |Δlogit| against the plaintext model over the steps with logits.
    pub worst_logit_err: f64,
}

fn config(shape: DecoderShape, layers: usize, ctx: usize) -> DecoderConfig {
    let (hidden, heads, kv_heads, ffn, vocab, gated) = shape.dims();
    DecoderConfig {
        family: if gated { Family::Llama } else { Family::Gpt2 },
        layers,
        hidden,
        heads,
        kv_heads,
        ffn,
        vocab,
        context: ctx.max(1024),
        rope_base: 1e5,
        norm_eps: 1e-5,
        tied_head: true,
    }
}

/// The weights, the prompt and the tokens to generate: a real checkpoint with its tokenized
/// prompt, or seeded random weights at the shape with `--steps` synthetic ids (logits on the
/// last).
#[allow(clippy::type_complexity)]
fn inputs(
    a: &BenchGenerateArgs,
) -> Result<(DecoderWeights, Vec<u32>, usize, Ranges, Option<ActRanges>), BenchError> {
    match a.model.as_deref() {
        Some("smollm2") => {
            let f = LlamaFile::smollm2().map_err(BenchError::Model)?;
            let w = f.weights().map_err(BenchError::Model)?;
            let tok = f.tokenizer().map_err(BenchError::Model)?;
            let ids = tok
                .encode(a.prompt.as_str(), false)
                .map_err(|_| invalid("--prompt", a.prompt.clone(), "text the tokenizer takes"))?
                .get_ids()
                .to_vec();
            if ids.is_empty() || a.new_tokens == 0 {
                return Err(invalid(
                    "--prompt/--new-tokens",
                    a.prompt.clone(),
                    "a non-empty prompt and at least one token",
                ));
            }
            // The server calibrates the bounds on text of its own (never the client's prompt:
            // the bounds are public), the same as `veil serve`'s.
            let texts = veil_host::decoder::calibration_ids(&tok).map_err(BenchError::Model)?;
            let r = veil_host::decoder::calibrate(&w, &texts).map_err(core("calibration"))?;
            if !a.json {
                eprintln!(
                    "calibrated: residual {:.1}, products {:.1}, activation {:.1} (norm inputs \
                     at {} sites)",
                    r.residual,
                    r.products,
                    r.activation,
                    r.norms.len()
                );
            }
            let ranges = Ranges::calibrated(&r);
            Ok((w, ids, a.new_tokens, ranges, Some(r)))
        }
        Some(other) => Err(invalid("--model", other, "smollm2")),
        None => {
            let cfg = config(a.shape, a.layers, a.max_ctx);
            let w = random_weights(&cfg, 7).map_err(core("random weights"))?;
            let ids = (0..a.steps)
                .map(|i| (i * 7919 % cfg.vocab) as u32)
                .collect();
            Ok((w, ids, 1, Ranges::DEFAULT, None))
        }
    }
}

/// Runs the benchmark.
pub fn run(a: &BenchGenerateArgs) -> Result<GenerateReport, BenchError> {
    if a.layers == 0 || a.steps == 0 || a.steps > a.max_ctx {
        return Err(invalid(
            "--layers/--steps/--max-ctx",
            format!("{}/{}/{}", a.layers, a.steps, a.max_ctx),
            "positive counts, at most --max-ctx steps",
        ));
    }
    let silent = crate::e2e::silent_ot(&a.ot)?;
    let (w, prompt, new, ranges, cal) = inputs(a)?;
    let cfg = w.cfg.clone();
    // Every prompt position, then a step per generated token but the last; logits from the
    // last prompt position on.
    let steps = prompt.len() + new - 1;
    let max_ctx = if a.model.is_some() { steps } else { a.max_ctx };
    let p = session_params().map_err(core("decode parameters"))?;
    // A real checkpoint's norms are planned per site from the calibration (its massive
    // activations: `DecodePlan::with_norms`).
    let plan = DecodePlan::with_options(&p, &cfg, max_ctx, a.groups, ranges)
        .and_then(|plan| match &cal {
            Some(r) => plan.with_norms(r),
            None => Ok(plan),
        })
        .map_err(|e| BenchError::Protocol {
            protocol: "decode plan".into(),
            source: veil_host::mpc::DriverError::Convert(e),
        })?;
    let served = ServedDecoder::new(&w).map_err(core("weights"))?;
    let mut keys = crate::cpu_keys(&p, a.threads, plan.rotations(), "evaluation keys")?;
    let pk = keys
        .ck
        .gen_public_key(&keys.sk, &mut keys.rng)
        .map_err(core("public key"))?;
    let server_keys = ServerKeys {
        ck: &keys.ck,
        pk: &pk,
        keys: &keys.keys,
    };
    let tcfg = TransportConfig {
        timeout: Duration::from_secs(a.timeout_s),
        max_frame: 1 << 31,
    };
    let want = |i: usize| i + 1 >= prompt.len();
    let mut tokens = Vec::new();
    let mut got_logits = Vec::new();
    let server_blocks = Mutex::new(Vec::<(String, f64)>::new());
    let mut rows = Vec::new();
    let mut client_blocks = Vec::<(String, u64)>::new();
    let (ck, sk) = (&keys.ck, &keys.sk);
    run_pair(
        Link::Tcp,
        tcfg,
        |t0| {
            let mut p0 = crate::e2e::party(PartyId::P0, silent)?;
            let ch = p0.channel();
            let fut = async {
                let mut run = DecodeRun::client(&mut p0, ck, sk, &plan)?;
                let mut next = prompt[0];
                for i in 0..steps {
                    let tok = prompt.get(i).copied().unwrap_or(next);
                    let x = embed_token(&w, tok, i)?;
                    let t = Instant::now();
                    let (mut bytes, mut rounds) = (0u64, 0u64);
                    let mut blocks = Vec::new();
                    let out = run
                        .step(Some(&x), want(i), &mut |c| {
                            bytes += c.tally.mpc_bytes;
                            rounds += c.tally.mpc_rounds;
                            if c.layer == 0 || c.layer == usize::MAX {
                                blocks.push((c.block.to_string(), c.tally.mpc_bytes));
                            }
                        })
                        .await?;
                    if let Some(l) = out {
                        next = argmax(&l);
                        tokens.push(next);
                        got_logits.push(l);
                    }
                    let seconds = t.elapsed().as_secs_f64();
                    if !a.json {
                        eprintln!(
                            "step {i}: {seconds:.1} s, {:.1} MiB",
                            bytes as f64 / 1048576.0
                        );
                    }
                    rows.push(StepRow {
                        pos: i,
                        seconds,
                        bytes,
                        rounds,
                        logits: want(i),
                    });
                    client_blocks = blocks;
                }
                Ok::<_, ProtocolError>(())
            };
            drive(ch, fut, t0).map_err(protocol("client"))
        },
        |t1| {
            let mut p1 = crate::e2e::party(PartyId::P1, silent)?;
            let ch = p1.channel();
            let fut = async {
                let mut run = DecodeRun::server(&mut p1, server_keys, &plan, &served)?
                    .with_weight_cache(a.weight_cache_mib << 20);
                for i in 0..steps {
                    let mut mark = Instant::now();
                    let mut blocks = Vec::new();
                    run.step(None, want(i), &mut |c| {
                        if c.layer == 0 || c.layer == usize::MAX {
                            blocks.push((c.block.to_string(), mark.elapsed().as_secs_f64()));
                        }
                        mark = Instant::now();
                    })
                    .await?;
                    if let Ok(mut b) = server_blocks.lock() {
                        *b = blocks;
                    }
                }
                Ok::<_, ProtocolError>(())
            };
            drive(ch, fut, t1).map_err(protocol("server"))
        },
    )
    .map_err(BenchError::from)
    .and_then(|(c, s)| c.and(s))?;
    let sb = server_blocks.into_inner().unwrap_or_default();
    let blocks = sb
        .into_iter()
        .zip(client_blocks)
        .map(|((n, s), (_, b))| (n, s, b))
        .collect();
    let real = match &a.model {
        Some(m) => {
            let reference = greedy(&w, &prompt, new).map_err(core("the plaintext model"))?;
            // The plaintext model's logits along the private run's own tokens.
            let mut cache = KvCache::new(&cfg, steps).map_err(core("the plaintext cache"))?;
            let fed = prompt.iter().chain(tokens.iter()).take(steps);
            let mut worst = 0.0f64;
            let mut k = 0;
            for (i, &t) in fed.enumerate() {
                let l = step(&w, &mut cache, t).map_err(core("the plaintext model"))?;
                if want(i) {
                    if let Some(g) = got_logits.get(k) {
                        for (x, y) in g.iter().zip(&l) {
                            worst = worst.max((x - y).abs());
                        }
                    }
                    k += 1;
                }
            }
            Some(RealRun {
                model: m.clone(),
                prompt: prompt.clone(),
                tokens: tokens.clone(),
                reference,
                worst_logit_err: worst,
            })
        }
        None => None,
    };
    Ok(GenerateReport {
        real,
        shape: a.shape,
        layers: cfg.layers,
        params: p.name().to_string(),
        ot: a.ot.clone(),
        weight_cache_mib: a.weight_cache_mib,
        max_ctx,
        ranges: (plan.ranges().x, plan.ranges().y, plan.ranges().g),
        groups: (plan.layout().groups(), plan.layout().t()),
        galois_keys: plan.rotations().len(),
        keygen_s: keys.keygen_s,
        steps: rows,
        blocks,
    })
}

/// The report as a table.
pub fn render(r: &GenerateReport) -> String {
    let mut s = format!(
        "private decode, {:?} shape, {} layer(s), {} ({} Galois keys, {:.1} s), {} OT, \
         weight cache {} MiB, \
         max context {} ({} heads per ciphertext, {} positions per cache block)\n\
         step  ctx    seconds      MiB  rounds  logits\n",
        r.shape,
        r.layers,
        r.params,
        r.galois_keys,
        r.keygen_s,
        r.ot,
        r.weight_cache_mib,
        r.max_ctx,
        r.groups.0,
        r.groups.1
    );
    // Every step is in the JSON; the table shows the first two and the powers of two.
    let last = r.steps.len().saturating_sub(1);
    for (i, x) in r.steps.iter().enumerate() {
        let ctx = x.pos + 1;
        if !(i < 2 || ctx.is_power_of_two() || i == last) {
            continue;
        }
        s += &format!(
            "{:>4} {:>4} {:>10.2} {:>8.2} {:>7} {:>7}\n",
            x.pos,
            x.pos + 1,
            x.seconds,
            x.bytes as f64 / 1048576.0,
            x.rounds,
            x.logits
        );
    }
    if let Some(x) = &r.real {
        s += &format!(
            "{}: prompt {:?}\n  private tokens   {:?}\n  plaintext tokens {:?}\n  worst |Δlogit| {:.3e}\n",
            x.model, x.prompt, x.tokens, x.reference, x.worst_logit_err
        );
    }
    s += "last step, layer 0 and the head: block  server s  MiB\n";
    for (n, t, b) in &r.blocks {
        s += &format!("  {n:<12} {t:>9.2} {:>8.3}\n", *b as f64 / 1048576.0);
    }
    s
}
