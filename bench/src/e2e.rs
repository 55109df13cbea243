//! `veil-bench e2e` and `veil-bench layer`: private inference of a BERT-architecture encoder
//! between a client and a server over TCP loopback, with every cost attributed to its block.
//!
//! Each run plans the session ([`SessionPlan`]), generates the client's keys (timed; their
//! seed-compressed size is what the key upload sends), and runs [`client_run`] / [`server_run`]
//! on two threads over a real TCP connection. The server's progress events give the wall time of
//! each block as the server sees it (the FHE blocks are the server's; the MPC blocks are joint);
//! the client's give each block's bytes and rounds. A network overlay adds the cost model's
//! link term per block ([`veil_core::bert::cost::Network::transfer_s`]: the busier direction's
//! bytes over the bandwidth, one one-way latency per round) and the key upload to the loopback
//! time for each profile of [`veil_core::bert::cost::NETWORKS`]: an estimate, labelled as such.
//!
//! Weights are random at the chosen shape ([`EncoderWeights::random`]): the costs of a private
//! run do not depend on the values. Accuracy against the real checkpoint is the demo's and the
//! tests' job.

use crate::error::{core, protocol};
use crate::nonlinear::{MBLN_PARAMS, MBMAX_PARAMS};
use crate::progress::Progress;
use crate::BenchError;
use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, SeedableRng};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use veil_core::bert::cost::Measured;
use veil_core::bert::cost::NETWORKS;
use veil_core::bert::Blocks;
use veil_core::bert::{
    client_run, server_run, session_params, BlockCost, EncoderConfig, EncoderWeights, SessionPlan,
    MPC_CONFIG,
};
use veil_core::ckks::Ckks;
use veil_core::hybrid::ServerKeys;
use veil_core::mpc::ot::silent::FERRET_EMP_OT;
use veil_core::mpc::{Party, PartyId};
use veil_host::harness::{run_pair, Link};
use veil_host::mpc::drive;
use veil_host::transport::TransportConfig;

/// Arguments of `veil-bench e2e`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchE2eArgs {
    /// Architecture: minilm (all-MiniLM-L6-v2: 6 layers, d = 384, 12 heads, FFN 1536) or
    /// bert-base (12 layers, d = 768, 12 heads, FFN 3072).
    #[arg(long, default_value = "minilm")]
    pub shape: String,
    /// Comma-separated sequence lengths (16, 32, 64, 128).
    #[arg(long, default_value = "16,32,64", value_delimiter = ',')]
    pub m: Vec<usize>,
    /// Layers to run (default: all of the architecture's).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Real tokens per sentence (default: m − m/4, so padding is masked).
    #[arg(long)]
    pub valid: Option<usize>,
    /// GELU approximation: erf (the checkpoint's), bolt, or bolt-split (BOLT's quartic with
    /// EncFormer's split: CKKS evaluates the two candidates, MPC compares and selects).
    #[arg(long, default_value = "erf")]
    pub gelu: String,
    /// Nonlinear blocks: exact (the checkpoint's softmax and LayerNorm, with --gelu) or
    /// encformer (EncFormer's MBMax, MBLN and BOLT split, at the nonlinear benchmark's
    /// parameters; surrogates of a distilled model, so for costs, not for a checkpoint's
    /// accuracy).
    #[arg(long, default_value = "exact")]
    pub blocks: String,
    /// OT: iknp (16 bytes per correlated OT) or silent (Ferret, ≈ 0.45 bit per COT; every
    /// layer after the first runs on silently preprocessed COTs).
    #[arg(long, default_value = "silent")]
    pub ot: String,
    /// CPU worker threads of the server's backend (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Receive timeout, seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout_s: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Comma-separated network profiles (loopback, lan, wan1, wan2, wan3). With it, the benchmark runs
    /// the product itself, `veil serve` and `veil infer`, as two processes on the real
    /// checkpoint: over TCP loopback, then over each emulated link (root, iproute2), with the
    /// network model's prediction beside each measurement.
    #[arg(long, value_delimiter = ',')]
    pub netem: Vec<String>,
    /// With --netem: the sentence (default: a fixed sentence per m, so peers can be given it).
    #[arg(long)]
    pub text: Option<String>,
    /// With --netem: a local BERT checkpoint directory (default: all-MiniLM-L6-v2, fetched once).
    #[arg(long)]
    pub model: Option<std::path::PathBuf>,
}

/// One block's costs in one run (per layer, or summed over the layers).
#[derive(Clone, Debug, Default, Serialize)]
pub struct BlockRow {
    /// Block name.
    pub block: String,
    /// Wall seconds at the server (sum over layers).
    pub wall_s: f64,
    /// Key-switched rotations.
    pub rotations: u64,
    /// Ciphertext × ciphertext products.
    pub ct_mults: u64,
    /// Ciphertext × plaintext products.
    pub pt_mults: u64,
    /// Rescales.
    pub rescales: u64,
    /// Conversions (ciphertexts).
    pub converted_cts: usize,
    /// Ciphertext bytes of the conversions.
    pub converted_bytes: u64,
    /// Bytes on the link (both directions).
    pub bytes: u64,
    /// Rounds.
    pub rounds: u64,
}

/// One sequence length's result.
#[derive(Clone, Debug, Serialize)]
pub struct E2eRun {
    /// Sequence length.
    pub m: usize,
    /// Real tokens.
    pub valid: usize,
    /// Layers run.
    pub layers: usize,
    /// Slots per ciphertext.
    pub slots: usize,
    /// Galois keys.
    pub galois_keys: usize,
    /// Key generation, seconds (client).
    pub keygen_s: f64,
    /// Seed-compressed public + evaluation key bytes (the key upload).
    pub key_bytes: u64,
    /// Wall time of the private run on loopback (keys excluded), seconds.
    pub wall_s: f64,
    /// Bytes of the private run on the link (both directions, keys excluded).
    pub run_bytes: u64,
    /// Rounds of the private run.
    pub rounds: u64,
    /// Per block, summed over the layers (the head last).
    pub blocks: Vec<BlockRow>,
    /// Estimated wall time per network profile (loopback time + transfer + latency), keys
    /// included: `(profile, seconds)`.
    pub networks: Vec<(String, f64)>,
    /// Largest block by server wall time.
    pub hotspot: String,
    /// `|logit| ` sanity: both parties finished and the client got this many logits.
    pub logits: usize,
    /// EncFormer's constants fitted to the model (`--blocks encformer`).
    pub fit: Option<EncformerFit>,
    /// Largest `|logit − fixed-point emulation's logit|` ([`veil_core::bert::fixed`], the same
    /// blocks in the clear): the run computed the function, not only sent its bytes.
    pub fixed_logit_err: f64,
    /// Every block event of the run, per layer (the cost model's calibration).
    pub raw: Vec<Measured>,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct E2eReport {
    /// Architecture.
    pub shape: String,
    /// CKKS parameter set.
    pub params: String,
    /// GELU approximation.
    pub gelu: String,
    /// OT.
    pub ot: String,
    /// One entry per sequence length.
    pub runs: Vec<E2eRun>,
}

/// The architecture named `name` (`minilm` or `bert-base`).
pub fn shape(name: &str) -> Result<EncoderConfig, BenchError> {
    EncoderConfig::named(name).ok_or_else(|| BenchError::InvalidOption {
        option: "--shape",
        value: name.into(),
        expected: "minilm or bert-base",
    })
}

/// One block event as the cost model's [`Measured`] (`wall`: the server's seconds for it).
fn measured(c: &BlockCost, wall: f64) -> Measured {
    Measured {
        layer: c.layer,
        block: c.block.into(),
        compute_s: wall,
        ckks: c.tally.ckks,
        converted_cts: c.tally.converted_cts,
        bytes: c.tally.mpc_bytes,
        sent: c.tally.mpc_bytes_sent,
        rounds: c.tally.mpc_rounds,
    }
}

/// The per-layer events summed per block, in first-seen order (`conv_bytes[i]`: the converted
/// ciphertext bytes of `events[i]`).
fn per_block(events: &[Measured], conv_bytes: &[u64]) -> Vec<BlockRow> {
    let mut rows: Vec<BlockRow> = Vec::new();
    for (e, &cb) in events.iter().zip(conv_bytes) {
        let i = match rows.iter().position(|r| r.block == e.block) {
            Some(i) => i,
            None => {
                rows.push(BlockRow {
                    block: e.block.clone(),
                    ..BlockRow::default()
                });
                rows.len() - 1
            }
        };
        let r = &mut rows[i];
        r.wall_s += e.compute_s;
        r.rotations += e.ckks.rotations;
        r.ct_mults += e.ckks.ct_mults;
        r.pt_mults += e.ckks.pt_mults;
        r.rescales += e.ckks.rescales;
        r.converted_cts += e.converted_cts;
        r.converted_bytes += cb;
        r.bytes += e.bytes;
        r.rounds += e.rounds;
    }
    rows
}

/// Whether an `--ot` value asks for the silent OT (`silent`) rather than IKNP (`iknp`).
pub fn silent_ot(v: &str) -> Result<bool, BenchError> {
    match v {
        "silent" => Ok(true),
        "iknp" => Ok(false),
        v => Err(BenchError::InvalidOption {
            option: "--ot",
            value: v.into(),
            expected: "iknp or silent",
        }),
    }
}

/// A fresh party seeded from the OS, with the silent OT or IKNP.
pub fn party(id: PartyId, silent: bool) -> Result<Party<ChaCha20Rng>, BenchError> {
    let rng = ChaCha20Rng::from_rng(OsRng).map_err(BenchError::Rng)?;
    let p = if silent {
        Party::with_silent_ot(id, MPC_CONFIG, rng, FERRET_EMP_OT)
    } else {
        Party::new(id, MPC_CONFIG, rng)
    };
    p.map_err(|source| BenchError::Mpc {
        step: "a party",
        source,
    })
}

/// EncFormer's blocks fitted to a model, as its distillation would: MBMax's `c` covers the
/// largest score and `R_d = valid·c^5` makes a row of scores near 0 sum to about 1; MBLN divides
/// by the mean deviation of the LayerNorm input rows (`l = 1`). The fit reads the exact `f64`
/// forward pass, then the same pass with the fitted blocks must stay inside every bound of the
/// plan's conversions; otherwise a typed error (the run would compute garbage).
pub fn fit_encformer(
    w: &EncoderWeights,
    x: &veil_core::packing::Mat,
    valid: usize,
) -> Result<(Blocks, EncformerFit), BenchError> {
    use veil_core::bert::reference::ranges;
    let exact = ranges(w, x, valid, &Blocks::EXACT).map_err(core("the exact ranges"))?;
    let c = exact.score_valid.ceil().max(1.0);
    let rd = valid as f64 * c.powi(5);
    let ln_rd = exact.ln_std.max(1e-3);
    let blocks = Blocks::encformer((c, rd), (1.0, ln_rd));
    let fitted = ranges(w, x, valid, &blocks).map_err(core("the fitted ranges"))?;
    let b = blocks.bounds().map_err(core("the fitted blocks' bounds"))?;
    let within = [
        (fitted.x, b.x),
        (fitted.score, b.s),
        (fitted.p, b.p),
        (fitted.y, b.y),
        (fitted.h, b.h),
        (fitted.gelu_in, b.f1),
        (fitted.g, b.g),
        (fitted.f2, b.f2),
    ]
    .iter()
    .all(|&(v, bits)| v < f64::from(1u32 << bits));
    if !within {
        return Err(BenchError::InvalidOption {
            option: "--blocks",
            value: format!("encformer: {fitted:?} exceeds the bounds {b:?}"),
            expected: "a model whose fitted surrogates stay within the conversions' bounds",
        });
    }
    Ok((
        blocks,
        EncformerFit {
            mbmax: (c, rd),
            mbln: (1.0, ln_rd),
            gelu_in: fitted.gelu_in,
            ln_out: fitted.x.max(fitted.h),
        },
    ))
}

/// The constants [`fit_encformer`] chose and the ranges the fitted pass showed.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct EncformerFit {
    /// MBMax's `(c, R_d)`.
    pub mbmax: (f64, f64),
    /// MBLN's `(l, R_d)`.
    pub mbln: (f64, f64),
    /// Largest GELU input (the split's bound is 32).
    pub gelu_in: f64,
    /// Largest MBLN output.
    pub ln_out: f64,
}

/// The nonlinear blocks named by `--blocks` and `--gelu` (EncFormer's with the nonlinear
/// benchmark's constants; a run fits them to its model instead, [`fit_encformer`]).
pub fn blocks_of(a: &BenchE2eArgs) -> Result<Blocks, BenchError> {
    if a.blocks == "encformer" {
        return Ok(Blocks::encformer(MBMAX_PARAMS, MBLN_PARAMS));
    }
    if a.blocks != "exact" {
        return Err(BenchError::InvalidOption {
            option: "--blocks",
            value: a.blocks.clone(),
            expected: "exact or encformer",
        });
    }
    veil_host::bert::gelu_blocks(&a.gelu).ok_or_else(|| BenchError::InvalidOption {
        option: "--gelu",
        value: a.gelu.clone(),
        expected: "erf, bolt or bolt-split",
    })
}

/// One private run at `m`.
fn run_one(a: &BenchE2eArgs, cfg: EncoderConfig, m: usize) -> Result<E2eRun, BenchError> {
    let params = session_params().map_err(core("session parameters"))?;
    let blocks = blocks_of(a)?;
    let valid = a.valid.unwrap_or(m - m / 4).clamp(1, m);
    let silent = silent_ot(&a.ot)?;
    let mut rng = ChaCha20Rng::from_rng(OsRng).map_err(BenchError::Rng)?;
    let w = EncoderWeights::random(cfg, &mut rng);
    let x = {
        let e = EncoderWeights::random(
            EncoderConfig {
                layers: 0,
                classes: m,
                ..cfg
            },
            &mut rng,
        );
        e.head.w.transpose()
    };
    let (blocks, fit) = if a.blocks == "encformer" {
        let (b, f) = fit_encformer(&w, &x, valid)?;
        (b, Some(f))
    } else {
        (blocks, None)
    };
    let plan =
        SessionPlan::with_blocks(&params, &cfg, m, blocks).map_err(|e| BenchError::Protocol {
            protocol: "session plan".into(),
            source: veil_host::mpc::DriverError::Convert(e),
        })?;
    let ck = Ckks::new(Arc::new(crate::cpu_backend(&params, a.threads)?));
    let t = Instant::now();
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck
        .gen_public_key(&sk, &mut rng)
        .map_err(core("public key"))?;
    let keys = ck
        .gen_evaluation_keys(&sk, plan.rotations(), true, &mut rng, |_, _| {})
        .map_err(core("evaluation keys"))?;
    let server_keys = ServerKeys {
        ck: &ck,
        pk: &pk,
        keys: &keys,
    };
    let keygen_s = t.elapsed().as_secs_f64();
    let key_bytes = (ck
        .serialize_public_key(&pk, true)
        .map_err(core("public key bytes"))?
        .len()
        + ck.serialize_evaluation_keys(&keys, true)
            .map_err(core("evaluation key bytes"))?
            .len()) as u64;
    // The server's events carry the wall time and the CKKS counts; the client's the bytes,
    // rounds and conversions.
    let server_raw = Arc::new(Mutex::new(Vec::<Measured>::new()));
    let mut client_raw = Vec::<(Measured, u64)>::new();
    let tcfg = TransportConfig {
        timeout: Duration::from_secs(a.timeout_s),
        max_frame: 1 << 30,
    };
    // Blocks per layer: 16, and the two candidate conversions with the split.
    let per_layer = if plan.blocks.split() { 18 } else { 16 };
    let blocks_total =
        plan.cfg.layers * per_layer + 1 + if silent { plan.cfg.layers - 1 } else { 0 };
    let mut bar = Progress::new(&format!("m = {m}"), a.json);
    let mut done = 0usize;
    let t = Instant::now();
    let (logits, srv) = run_pair(
        Link::Tcp,
        tcfg,
        |t0| {
            let mut p0 = party(PartyId::P0, silent)?;
            let ch = p0.channel();
            drive(
                ch,
                client_run(&mut p0, &ck, &sk, &plan, &x, valid, &mut |c| {
                    client_raw.push((measured(c, 0.0), c.tally.converted_bytes));
                    done += 1;
                    bar.update(done, blocks_total);
                }),
                t0,
            )
            .map_err(protocol("client"))
        },
        |t1| {
            let mut p1 = party(PartyId::P1, silent)?;
            let ch = p1.channel();
            let mut last = Instant::now();
            let raw = server_raw.clone();
            drive(
                ch,
                server_run(&mut p1, server_keys, &plan, &w, valid, &mut |c| {
                    let dt = last.elapsed().as_secs_f64();
                    last = Instant::now();
                    raw.lock().unwrap().push(measured(c, dt));
                }),
                t1,
            )
            .map_err(protocol("server"))
        },
    )
    .map_err(BenchError::Harness)?;
    let wall_s = t.elapsed().as_secs_f64();
    let logits = logits?;
    srv?;
    let fixed = veil_core::bert::fixed::logits_fixed(&plan, &w, &x, valid)
        .map_err(core("the fixed-point emulation"))?;
    let fixed_logit_err = crate::max_abs_diff(&logits, &fixed);
    let mut raw = server_raw.lock().unwrap().clone();
    let mut conv_bytes = vec![0u64; raw.len()];
    for ((r, cb), (c, bytes)) in raw.iter_mut().zip(conv_bytes.iter_mut()).zip(&client_raw) {
        if r.block == c.block && r.layer == c.layer {
            r.converted_cts = c.converted_cts;
            r.bytes = c.bytes;
            r.sent = c.sent;
            r.rounds = c.rounds;
            *cb = *bytes;
        }
    }
    let blocks = per_block(&raw, &conv_bytes);
    let run_bytes: u64 = blocks.iter().map(|b| b.bytes).sum();
    let rounds: u64 = blocks.iter().map(|b| b.rounds).sum();
    let hotspot = blocks
        .iter()
        .max_by(|x, y| x.wall_s.total_cmp(&y.wall_s))
        .map(|b| b.block.clone())
        .unwrap_or_default();
    let networks = NETWORKS
        .iter()
        .map(|net| {
            let link = net.run_link_s(raw.iter().map(|b| (b.bytes, b.sent, b.rounds)), key_bytes);
            (net.name.to_string(), wall_s + link)
        })
        .collect();
    Ok(E2eRun {
        m,
        valid,
        layers: plan.cfg.layers,
        slots: plan.slots,
        galois_keys: plan.rotations().len(),
        keygen_s,
        key_bytes,
        wall_s,
        run_bytes,
        rounds,
        blocks,
        networks,
        hotspot,
        logits: logits.len(),
        fit,
        fixed_logit_err,
        raw,
    })
}

/// Runs the benchmark.
pub fn run(a: &BenchE2eArgs) -> Result<E2eReport, BenchError> {
    run_cfg(a, shape(&a.shape)?)
}

/// [`run`] on the architecture `cfg` (`a.shape` only labels the report).
pub fn run_cfg(a: &BenchE2eArgs, mut cfg: EncoderConfig) -> Result<E2eReport, BenchError> {
    if let Some(l) = a.layers {
        if l == 0 || l > cfg.layers {
            return Err(BenchError::InvalidOption {
                option: "--layers",
                value: l.to_string(),
                expected: "1..=the architecture's layers",
            });
        }
        cfg.layers = l;
    }
    let params = session_params().map_err(core("session parameters"))?;
    let mut runs = Vec::new();
    for &m in &a.m {
        runs.push(run_one(a, cfg, m)?);
    }
    Ok(E2eReport {
        shape: a.shape.clone(),
        params: params.name().to_string(),
        gelu: if a.blocks == "encformer" {
            "EncFormer's blocks (MBMax, MBLN, BOLT split)".into()
        } else {
            a.gelu.clone()
        },
        ot: a.ot.clone(),
        runs,
    })
}

/// The report as tables.
pub fn render(r: &E2eReport) -> String {
    let mut s = format!(
        "private inference, {} ({}), GELU {}, OT {}; TCP loopback, this machine\n",
        r.shape, r.params, r.gelu, r.ot
    );
    for run in &r.runs {
        s += &format!(
            "\nm = {} ({} real tokens), {} layer(s), {} slots, {} Galois keys: keygen {:.1} s, keys {:.1} MB; run {:.1} s, {:.1} MB, {} rounds; total {:.1} MB\n",
            run.m,
            run.valid,
            run.layers,
            run.slots,
            run.galois_keys,
            run.keygen_s,
            run.key_bytes as f64 / 1e6,
            run.wall_s,
            run.run_bytes as f64 / 1e6,
            run.rounds,
            (run.run_bytes + run.key_bytes) as f64 / 1e6
        );
        s += "| block | wall s | rot | ct×ct | ct×pt | rescale | conv cts | conv MB | MB | rounds |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for b in &run.blocks {
            s += &format!(
                "| {} | {:.2} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} |\n",
                b.block,
                b.wall_s,
                b.rotations,
                b.ct_mults,
                b.pt_mults,
                b.rescales,
                b.converted_cts,
                b.converted_bytes as f64 / 1e6,
                b.bytes as f64 / 1e6,
                b.rounds
            );
        }
        s += &format!("largest hotspot: {}\n", run.hotspot);
        if let Some(f) = &run.fit {
            s += &format!(
                "EncFormer's blocks fitted to the model: MBMax c = {}, R_d = {:.3e}; MBLN l·R_d = {:.3}; largest GELU input {:.1}, largest MBLN output {:.1}\n",
                f.mbmax.0, f.mbmax.1, f.mbln.1, f.gelu_in, f.ln_out
            );
        }
        s += &format!(
            "logits against the fixed-point emulation of the same blocks: max |Δ| {:.4}\n",
            run.fixed_logit_err
        );
        s += "estimated wall time with the keys over (estimate: loopback + per block the busier direction's bytes/bandwidth + rounds·one-way latency):";
        for (n, t) in &run.networks {
            s += &format!(" {n} {t:.0} s;");
        }
        s += "\n";
    }
    s
}
