//! `veil plan`: the cost model's decisions ([`veil_core::bert::cost`]) for a model, a sequence
//! length and the network profiles, without running an inference.
//!
//! Calibration (on this machine, unless `--calibration FILE` loads a saved one): a private run
//! of the first `--calib-layers` layers and the head on TCP loopback, random weights at the
//! model's shape (costs do not depend on the values), with the GELU to be served (`--gelu
//! erf|bolt`), once with IKNP and once with the silent OT; and, where that GELU's split can run,
//! the same two runs with the split. From these the model extends the calibrated layers to the
//! whole model on each network (and fits per-operation CKKS latencies, for the report), and
//! decides per network:
//! - the OT: IKNP or the silent OT, whichever the model predicts faster;
//! - GELU: fully in MPC, or EncFormer's split (CKKS pre-evaluates `F0`, `F1`; two more
//!   conversions carry them; MPC selects), whichever the model predicts faster under that OT,
//!   the split only where its candidates fit their conversion over the GELU input range
//!   (`--gelu-range`). The erf fit's degree-7 candidates never do; BOLT's quartic does below
//!   `|x| = 32`. The decision is printed as the `veil serve --gelu` value that runs it (`erf`,
//!   `bolt` or `bolt-split`);
//! - packing: minimal packing at every boundary (the only one implemented; expanded packing is
//!   not built, so the model does not weigh it).

use crate::common::BackendArgs;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use veil_core::bert::cost::{
    candidate_counts, candidate_peak, decide_gelu, fit_op_latency, network, predict, Calibration,
    Estimate, GeluDecision, Measured, Network, OpLatency, LOOPBACK, NETWORKS,
};
use veil_core::bert::Blocks;
use veil_core::bert::{session_params, EncoderConfig, SessionPlan};
use veil_core::nonlinear::gelu::{GeluKind, GeluSplit};
use veil_core::PolyBackend;
use veil_host::backend::{BackendError, Factory, OnBackend};
use veil_host::bert::{calibrate as calibration_run, CalibrationRun, SessionError, SessionOptions};

/// Why `veil plan` failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum PlanError {
    /// An option has a value outside its range.
    InvalidOption {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// What it accepts.
        expected: &'static str,
    },
    /// A file could not be read or written.
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A saved calibration did not parse.
    Report {
        /// The file.
        from: String,
        /// Its start.
        line: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The calibration did not encode.
    Encode {
        /// What.
        what: &'static str,
        /// The encoder's error.
        source: serde_json::Error,
    },
    /// The session parameters did not validate.
    Core {
        /// The step.
        step: &'static str,
        /// The error.
        source: veil_core::Error,
    },
    /// The architecture does not plan at this length.
    Plan(veil_core::convert::ProtocolError),
    /// A calibration run failed.
    Session(SessionError),
    /// The chosen backend is not built in or has no device.
    Backend(BackendError),
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::InvalidOption {
                option,
                value,
                expected,
            } => write!(f, "{option} {value:?}: expected {expected}"),
            PlanError::Io { what, source } => write!(f, "{what}: {source}"),
            PlanError::Report { from, line, source } => {
                write!(f, "{from}: not a calibration ({source}): {line}")
            }
            PlanError::Encode { what, source } => write!(f, "encoding {what}: {source}"),
            PlanError::Core { step, source } => write!(f, "{step}: {source}"),
            PlanError::Plan(e) => write!(f, "session plan: {e}"),
            PlanError::Session(e) => write!(f, "calibration run: {e}"),
            PlanError::Backend(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PlanError {}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> PlanError {
    move |source| PlanError::Io {
        what: what.into(),
        source,
    }
}

/// Options of `veil plan`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// Architecture: minilm or bert-base (ignored with --model).
    #[arg(long, default_value = "minilm")]
    pub shape: String,
    /// A BERT checkpoint directory: its `config.json` gives the architecture.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Sequence length (16, 32, 64, 128).
    #[arg(long, default_value_t = 16)]
    pub m: usize,
    /// Network profiles, comma-separated: loopback, lan, wan1, wan2, wan3, or all.
    #[arg(long, default_value = "all", value_delimiter = ',')]
    pub network: Vec<String>,
    /// Layers of the calibration run (≥ 2, so that a layer on preprocessed COTs is measured).
    #[arg(long, default_value_t = 2)]
    pub calib_layers: usize,
    /// Load the calibration from this file instead of measuring it.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Save the measured calibration to this file.
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// Largest |x| at GELU's input (all-MiniLM-L6-v2 on real sentences: about 25).
    #[arg(long, default_value_t = 25.0)]
    pub gelu_range: f64,
    /// The GELU to be served: erf (the checkpoint's; its split never fits) or bolt (BOLT's
    /// quartic, in MPC or split). The calibration runs it.
    #[arg(long, default_value = "erf")]
    pub gelu: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The backend the calibration runs on (both parties).
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// One calibration run on the chosen backend.
struct Calibrate(CalibrationRun);

impl OnBackend for Calibrate {
    type Output = Result<Calibration, SessionError>;
    fn run<B: PolyBackend>(self, _label: &str, factory: Factory<B>) -> Self::Output {
        let cache = Arc::new(crate::common::cache_of(factory));
        let mut done = 0usize;
        calibration_run(cache, &self.0, &mut |_| {
            done += 1;
            if done.is_multiple_of(8) {
                eprintln!("  {done} blocks");
            }
        })
    }
}

/// What `veil plan` measures (or loads).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanCalibration {
    /// Architecture: `layers×hidden×heads×FFN`.
    pub shape: String,
    /// Sequence length.
    pub m: usize,
    /// The IKNP run (GELU in MPC).
    pub iknp: Calibration,
    /// The silent-OT run (GELU in MPC).
    pub silent: Calibration,
    /// The GELU the calibration ran (`erf` or `bolt`). Calibrations saved by earlier versions
    /// (without it, or with the select-only split measurement) do not load: a typed error says
    /// which field; recalibrate.
    pub gelu: String,
    /// The same run with the GELU split, IKNP (`None` where the served GELU's split cannot
    /// run: the erf fit's candidates never fit their conversion).
    pub split_iknp: Option<Calibration>,
    /// The same with the silent OT.
    pub split_silent: Option<Calibration>,
}

/// One network's decisions.
#[derive(Clone, Debug, Serialize)]
pub struct NetworkPlan {
    /// The profile.
    pub network: Network,
    /// The whole model with IKNP (GELU in MPC).
    pub iknp: Estimate,
    /// The whole model with the silent OT (GELU in MPC).
    pub silent: Estimate,
    /// The OT chosen (`iknp` or `silent`): that of the fastest calibrated run.
    pub ot: String,
    /// The GELU decision under the chosen OT (whole-model predictions).
    pub gelu: GeluDecision,
    /// The prediction of the chosen OT and GELU placement.
    pub chosen: Estimate,
    /// The `veil serve --gelu` value that runs the decision: `erf`, `bolt` or `bolt-split`.
    pub serve_gelu: String,
    /// The whole model with the split and IKNP, predicted seconds (`None` without a split
    /// calibration).
    pub split_iknp_s: Option<f64>,
    /// The same with the silent OT.
    pub split_silent_s: Option<f64>,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct PlanReport {
    /// Architecture.
    pub shape: String,
    /// Layers.
    pub layers: usize,
    /// Sequence length.
    pub m: usize,
    /// CKKS parameter set.
    pub params: String,
    /// Slots per ciphertext.
    pub slots: usize,
    /// Galois keys.
    pub galois_keys: usize,
    /// Fitted CKKS latencies (silent calibration; for the report, `None` where no FHE block
    /// had operations to fit).
    pub op_latency: Option<OpLatency>,
    /// Degree of the candidate polynomials.
    pub candidate_degree: usize,
    /// The split's CKKS operations per layer (the dry run of its candidates on the `c2m:f1`
    /// boundary's ciphertexts).
    pub candidate_ops: veil_core::transformer::OpCounts,
    /// Largest `|F0|`, `|F1|` over the GELU input range (`f64::INFINITY` beyond the split's
    /// input bound).
    pub candidate_peak: f64,
    /// What the candidates' conversion carries.
    pub candidate_bound: f64,
    /// Per network.
    pub networks: Vec<NetworkPlan>,
    /// The calibration used.
    pub calibration: PlanCalibration,
}

/// The GELU kind of `--gelu` (erf or bolt).
fn served_gelu(v: &str) -> Result<GeluKind, PlanError> {
    match v {
        "erf" => Ok(GeluKind::Erf),
        "bolt" => Ok(GeluKind::Bolt),
        _ => Err(invalid("--gelu", v.into(), "erf or bolt")),
    }
}

fn invalid(option: &'static str, value: String, expected: &'static str) -> PlanError {
    PlanError::InvalidOption {
        option,
        value,
        expected,
    }
}

/// Measures the calibration.
pub fn calibrate(a: &PlanArgs, cfg: &EncoderConfig) -> Result<PlanCalibration, PlanError> {
    served_gelu(&a.gelu)?;
    if a.calib_layers < 2 || a.calib_layers > cfg.layers {
        return Err(invalid(
            "--calib-layers",
            a.calib_layers.to_string(),
            "2..=the architecture's layers",
        ));
    }
    // The split of the served GELU is calibrated by a run of its own where it can run at all
    // (its candidates fit their conversion: BOLT's do, the erf fit's never).
    let split_runs = split_blocks(served_gelu(&a.gelu)?).bounds().is_ok();
    let mut variants = vec![(a.gelu.clone(), "iknp"), (a.gelu.clone(), "silent")];
    if split_runs {
        let split = format!("{}-split", a.gelu);
        variants.push((split.clone(), "iknp"));
        variants.push((split, "silent"));
    }
    let mut runs = Vec::new();
    for (gelu, ot) in variants {
        eprintln!(
            "calibration: {} layer(s) + head at m = {}, OT {ot}, GELU {gelu}, backend {} ...",
            a.calib_layers,
            a.m,
            a.backend.choice().label()
        );
        let blocks = veil_host::bert::gelu_blocks(&gelu)
            .ok_or_else(|| invalid("--gelu", gelu.clone(), "erf or bolt"))?;
        let run = CalibrationRun {
            cfg: EncoderConfig {
                layers: a.calib_layers,
                ..*cfg
            },
            m: a.m,
            session: SessionOptions {
                blocks,
                silent: if ot == "silent" {
                    SessionOptions::default().silent
                } else {
                    None
                },
                ..SessionOptions::default()
            },
            transport: veil_host::transport::TransportConfig {
                timeout: Duration::from_secs(900),
                ..veil_host::transport::TransportConfig::default()
            },
        };
        let probe = session_params().map_err(|source| PlanError::Core {
            step: "session parameters",
            source,
        })?;
        let c = a
            .backend
            .choice()
            .dispatch(&probe, Calibrate(run))
            .map_err(PlanError::Backend)?
            .map_err(PlanError::Session)?;
        runs.push(c);
    }
    let mut runs = runs.into_iter();
    let mut next = || runs.next().unwrap_or_default();
    let (iknp, silent) = (next(), next());
    let (split_iknp, split_silent) = if split_runs {
        (Some(next()), Some(next()))
    } else {
        (None, None)
    };
    Ok(PlanCalibration {
        shape: arch(cfg),
        m: a.m,
        gelu: a.gelu.clone(),
        iknp,
        silent,
        split_iknp,
        split_silent,
    })
}

/// The session blocks of GELU `kind` with EncFormer's split (accurate softmax and LayerNorm).
fn split_blocks(kind: GeluKind) -> Blocks {
    Blocks {
        gelu: kind,
        gelu_split: GeluSplit::CkksCandidates,
        ..Blocks::EXACT
    }
}

fn last_layer_block<'a>(c: &'a Calibration, name: &str) -> Option<&'a Measured> {
    c.blocks
        .iter()
        .filter(|b| b.block == name && b.layer != usize::MAX)
        .max_by_key(|b| b.layer)
}

fn arch(c: &EncoderConfig) -> String {
    format!("{}x{}x{}x{}", c.layers, c.hidden, c.heads, c.ffn)
}

/// The architecture of `--model DIR` (its `config.json`) or of `--shape`.
fn architecture(a: &PlanArgs) -> Result<(String, EncoderConfig), PlanError> {
    let Some(dir) = &a.model else {
        let cfg = EncoderConfig::named(&a.shape)
            .ok_or_else(|| invalid("--shape", a.shape.clone(), "minilm or bert-base"))?;
        return Ok((a.shape.clone(), cfg));
    };
    let path = dir.join("config.json");
    let bytes = std::fs::read(&path).map_err(io("reading config.json"))?;
    let c = veil_host::model::parse_config(&bytes).map_err(|e| PlanError::Io {
        what: format!("{}: not a BERT config", path.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok((dir.display().to_string(), c.encoder))
}

/// Runs `veil plan`.
pub fn run(a: &PlanArgs) -> Result<PlanReport, PlanError> {
    let kind = served_gelu(&a.gelu)?;
    let (name, cfg) = architecture(a)?;
    let params = session_params().map_err(|source| PlanError::Core {
        step: "session parameters",
        source,
    })?;
    let plan = SessionPlan::new(&params, &cfg, a.m).map_err(PlanError::Plan)?;
    let cal = match &a.calibration {
        Some(p) => {
            let s = std::fs::read_to_string(p).map_err(io("reading the calibration"))?;
            let c: PlanCalibration =
                serde_json::from_str(&s).map_err(|source| PlanError::Report {
                    from: p.display().to_string(),
                    line: s.chars().take(120).collect(),
                    source,
                })?;
            if c.m != a.m || c.shape != arch(&cfg) || c.gelu != a.gelu {
                return Err(invalid(
                    "--calibration",
                    format!("{} at m = {}, GELU {}", c.shape, c.m, c.gelu),
                    "a calibration of the same architecture, --m and --gelu",
                ));
            }
            c
        }
        None => calibrate(a, &cfg)?,
    };
    if let Some(p) = &a.save {
        let s = serde_json::to_string_pretty(&cal).map_err(|source| PlanError::Encode {
            what: "the calibration",
            source,
        })?;
        std::fs::write(p, s).map_err(io("writing the calibration"))?;
    }
    let nets: Vec<Network> = if a.network.iter().any(|n| n == "all") {
        std::iter::once(LOOPBACK).chain(NETWORKS).collect()
    } else {
        a.network
            .iter()
            .map(|n| {
                network(n).ok_or_else(|| {
                    invalid(
                        "--network",
                        n.clone(),
                        "loopback, lan, wan1, wan2, wan3 or all",
                    )
                })
            })
            .collect::<Result<_, _>>()?
    };
    let missing = || {
        invalid(
            "--calibration",
            "no layers".into(),
            "a calibration with blocks",
        )
    };
    let lat = fit_op_latency(&cal.silent.blocks);
    // The split of the served GELU: GELU inputs within 2^{F1_SPLIT}, candidates within their
    // bound 2^{cand}. Where the candidates exceed what the conversion carries (the erf fit's),
    // the split is never feasible: their bound is the limit, which their peak exceeds.
    let split = split_blocks(kind);
    let (f1_bits, cand_bits, fits) = match split.bounds() {
        Ok(sb) => (sb.f1, sb.cand, true),
        Err(_) => (
            veil_core::bert::bounds::F1_SPLIT,
            veil_core::bert::bounds::CAND_LIMIT,
            false,
        ),
    };
    let (f0, f1) = {
        let c = split.candidates();
        (c[0].clone(), c[1].clone())
    };
    let degree = f0.len().max(f1.len()).saturating_sub(1);
    let in_range = fits && a.gelu_range < f64::from(1u32 << f1_bits);
    let peak = if in_range {
        candidate_peak(&f0, &f1, a.gelu_range)
    } else {
        f64::INFINITY
    };
    let bound = f64::from(1u32 << cand_bits);
    let feasible = peak <= bound;
    let conv_cts = last_layer_block(&cal.silent, "c2m:f1")
        .ok_or_else(missing)?
        .converted_cts;
    let mut networks = Vec::new();
    for net in nets {
        let iknp = predict(&cal.iknp, cfg.layers, &net).ok_or_else(missing)?;
        let silent = predict(&cal.silent, cfg.layers, &net).ok_or_else(missing)?;
        let split_of = |c: &Option<Calibration>| -> Result<Option<Estimate>, PlanError> {
            match c {
                Some(c) => Ok(Some(predict(c, cfg.layers, &net).ok_or_else(missing)?)),
                None => Ok(None),
            }
        };
        let (split_iknp, split_silent) = (split_of(&cal.split_iknp)?, split_of(&cal.split_silent)?);
        // The fastest of the calibrated runs (the split only where feasible) decides both the
        // OT and GELU: the split removes most of GELU's COTs, where IKNP costs most.
        let mut use_silent = silent.total_s <= iknp.total_s;
        let mut best = if use_silent { &silent } else { &iknp };
        for (is_silent, e) in [(false, &split_iknp), (true, &split_silent)] {
            if let Some(e) = e.as_ref().filter(|_| feasible) {
                if e.total_s < best.total_s {
                    best = e;
                    use_silent = is_silent;
                }
            }
        }
        let chosen = best.clone();
        let (mpc_est, split_est) = if use_silent {
            (&silent, &split_silent)
        } else {
            (&iknp, &split_iknp)
        };
        let gelu = decide_gelu(mpc_est, split_est.as_ref(), feasible);
        let serve_gelu = if gelu.split_chosen {
            format!("{}-split", a.gelu)
        } else {
            a.gelu.clone()
        };
        networks.push(NetworkPlan {
            network: net,
            iknp,
            silent,
            ot: if use_silent { "silent" } else { "iknp" }.into(),
            gelu,
            serve_gelu,
            chosen,
            split_iknp_s: split_iknp.as_ref().map(|e| e.total_s),
            split_silent_s: split_silent.as_ref().map(|e| e.total_s),
        });
    }
    Ok(PlanReport {
        shape: name,
        layers: cfg.layers,
        m: a.m,
        params: params.name().to_string(),
        slots: plan.slots,
        galois_keys: plan.rotations().len(),
        op_latency: lat,
        candidate_degree: degree,
        candidate_ops: candidate_counts(degree, conv_cts),
        candidate_peak: peak,
        candidate_bound: bound,
        networks,
        calibration: cal,
    })
}

/// The report as text.
pub fn render(r: &PlanReport) -> String {
    let mut s = format!(
        "plan: {} ({} layers), m = {}, {} ({} slots, {} Galois keys); minimal packing at every boundary\n",
        r.shape, r.layers, r.m, r.params, r.slots, r.galois_keys
    );
    if let Some(l) = &r.op_latency {
        s += &format!(
            "fitted CKKS latencies: key switch {:.2} ms, ct×pt {:.3} ms, rescale {:.3} ms (rms relative residual {:.0}%)\n",
            l.key_switch_s * 1e3,
            l.pt_mult_s * 1e3,
            l.rescale_s * 1e3,
            l.rel_rms * 100.0
        );
    }
    s += &format!(
        "GELU {} split: candidates of degree {} ({} ct×ct, {} key switches per layer), peak |F| = 2^{:.1} over the input range against their conversion's 2^{:.0}: {}\n",
        r.calibration.gelu,
        r.candidate_degree,
        r.candidate_ops.ct_mults,
        r.candidate_ops.key_switches(),
        r.candidate_peak.log2(),
        r.candidate_bound.log2(),
        if r.candidate_peak <= r.candidate_bound {
            "feasible"
        } else {
            "not feasible"
        }
    );
    s += "\n| network | OT | T iknp s | T silent s | keys s | T_conv s | T_ckks s | T_mpc s | run MB | rounds | T, GELU in MPC s | T, GELU split s | GELU |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for n in &r.networks {
        let e = &n.chosen;
        let why = if n.gelu.split_chosen {
            "split"
        } else if !n.gelu.split_feasible {
            "MPC (split out of range)"
        } else if n.gelu.split_s.is_finite() {
            "MPC (faster)"
        } else {
            "MPC (split not calibrated)"
        };
        s += &format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {why} (`--gelu {}`) |\n",
            n.network.name,
            n.ot,
            n.iknp.total_s,
            n.silent.total_s,
            e.keys_s,
            e.conv_s,
            e.ckks_s,
            e.mpc_s,
            e.run_bytes as f64 / 1e6,
            e.rounds,
            n.gelu.mpc_s,
            n.gelu.split_s,
            n.serve_gelu
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(layer: usize, block: &str, s: f64, bytes: u64, rounds: u64, cts: usize) -> Measured {
        Measured {
            layer,
            block: block.into(),
            compute_s: s,
            converted_cts: cts,
            bytes,
            sent: bytes,
            rounds,
            ckks: veil_core::transformer::OpCounts {
                rotations: if block == "fc1" || block == "fc2" {
                    (s * 500.0) as u64
                } else {
                    0
                },
                pt_mults: if block == "fc1" { 4000 } else { 1000 },
                rescales: 40,
                ..Default::default()
            },
        }
    }

    /// A synthetic calibration: IKNP costs 1 s less compute per layer but 200 MB more. With
    /// the split, FC1 computes the candidates (1.5 s more), a conversion carries them (0.2 s,
    /// 10 MB) and GELU's MPC part shrinks (1.5 s less, 25 MB fewer): 0.2 s slower per layer
    /// on loopback, 15 MB fewer bytes.
    fn calibration(ot: &str, split: bool) -> Calibration {
        let (extra_s, extra_b) = if ot == "iknp" {
            (0.0, 200_000_000)
        } else {
            (1.0, 0)
        };
        let mut blocks = Vec::new();
        for layer in 0..2 {
            blocks.push(blk(layer, "fc1", if split { 3.5 } else { 2.0 }, 0, 0, 0));
            blocks.push(blk(layer, "c2m:f1", 0.5, 5_000_000, 6, 4));
            if split {
                blocks.push(blk(layer, "c2m:cand", 0.2, 10_000_000, 0, 8));
            }
            let (g_s, g_b) = if split {
                (1.5, 5_000_000)
            } else {
                (3.0, 30_000_000)
            };
            blocks.push(blk(layer, "gelu", g_s + extra_s, g_b + extra_b, 25, 0));
            blocks.push(blk(layer, "fc2", 1.0, 0, 0, 0));
        }
        blocks.push(blk(usize::MAX, "head", 0.2, 1000, 2, 0));
        Calibration {
            m: 16,
            layers: 2,
            ot: ot.into(),
            keygen_s: 5.0,
            key_bytes: 190_000_000,
            blocks,
        }
    }

    #[test]
    fn decisions_from_a_saved_calibration() {
        let cal = PlanCalibration {
            shape: arch(&EncoderConfig::MINILM_L6),
            m: 16,
            gelu: "bolt".into(),
            iknp: calibration("iknp", false),
            silent: calibration("silent", false),
            split_iknp: Some(calibration("iknp", true)),
            split_silent: Some(calibration("silent", true)),
        };
        let dir = std::env::temp_dir().join(format!("veil-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cal.json");
        std::fs::write(&file, serde_json::to_string(&cal).unwrap()).unwrap();
        let args = PlanArgs {
            shape: "minilm".into(),
            model: None,
            m: 16,
            network: vec!["all".into()],
            calib_layers: 2,
            calibration: Some(file.clone()),
            save: None,
            gelu_range: 25.0,
            gelu: "bolt".into(),
            json: false,
            backend: BackendArgs {
                backend: veil_host::backend::BackendKind::Cpu,
                device: None,
                threads: 0,
            },
        };
        let r = run(&args).unwrap();
        assert_eq!(r.networks.len(), 5);
        let by = |n: &str| r.networks.iter().find(|p| p.network.name == n).unwrap();
        // Loopback: IKNP is 6 s faster (1 s per layer); WAN2: its 1.2 GB more cost ~96 s.
        assert_eq!(by("loopback").ot, "iknp");
        assert_eq!(by("WAN2").ot, "silent");
        let lo = by("loopback");
        assert!((lo.silent.total_s - lo.iknp.total_s - 6.0).abs() < 1e-9);
        // At MiniLM's GELU range (25 ≤ 32) BOLT's candidates fit their conversion bound.
        assert!(r.networks.iter().all(|n| n.gelu.split_feasible));
        assert!(r.candidate_peak <= r.candidate_bound);
        // Loopback: the split's 0.2 s more per layer (1.0 s over the five later layers and
        // 0.2 s in the first) decide for GELU in MPC; WAN2: its 15 MB fewer per layer (1.2 s at
        // 100 Mbps) decide for the split.
        assert_eq!(by("loopback").serve_gelu, "bolt");
        assert!((by("loopback").gelu.split_s - by("loopback").gelu.mpc_s - 1.2).abs() < 1e-9);
        assert_eq!(by("WAN2").serve_gelu, "bolt-split");
        assert!(render(&r).contains("split (`--gelu bolt-split`)"));
        // Beyond the split's input bound (32) it is never feasible, whatever the times, even
        // where the candidates' peak alone (2^14.96 at 33) would still fit their bound.
        let wide = run(&PlanArgs {
            gelu_range: 33.0,
            ..args.clone()
        })
        .unwrap();
        for n in &wide.networks {
            assert!(!n.gelu.split_feasible && !n.gelu.split_chosen, "{n:?}");
        }
        // Within a small range the split is feasible, and chosen where it is cheaper.
        let small = run(&PlanArgs {
            gelu_range: 1.0,
            ..args.clone()
        })
        .unwrap();
        assert!(small.networks.iter().all(|n| n.gelu.split_feasible));
        assert!(render(&small).contains("| WAN2 | silent |"));
        // The checkpoint's erf GELU: its candidates never fit, even at a small range, so the
        // plan serves it in MPC. Its calibration must be one of the erf GELU.
        let mut erf_cal = cal.clone();
        erf_cal.gelu = "erf".into();
        erf_cal.split_iknp = None;
        erf_cal.split_silent = None;
        let erf_file = dir.join("cal-erf.json");
        std::fs::write(&erf_file, serde_json::to_string(&erf_cal).unwrap()).unwrap();
        let erf = run(&PlanArgs {
            gelu_range: 1.0,
            gelu: "erf".into(),
            calibration: Some(erf_file),
            ..args.clone()
        })
        .unwrap();
        for n in &erf.networks {
            assert!(!n.gelu.split_feasible && n.serve_gelu == "erf", "{n:?}");
        }
        let mismatch = run(&PlanArgs {
            gelu: "erf".into(),
            ..args.clone()
        });
        assert!(matches!(
            mismatch,
            Err(PlanError::InvalidOption {
                option: "--calibration",
                ..
            })
        ));
        // A calibration of another length is refused.
        let bad = run(&PlanArgs { m: 32, ..args });
        assert!(matches!(
            bad,
            Err(PlanError::InvalidOption {
                option: "--calibration",
                ..
            })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
