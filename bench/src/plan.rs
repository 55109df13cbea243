//! `veil plan`: the cost model's decisions ([`veil_core::bert::cost`]) for a model, a sequence
//! length and the network profiles, without running an inference.
//!
//! Calibration (on this machine, unless `--calibration FILE` loads a saved one): a private run
//! of the first `--calib-layers` layers and the head on TCP loopback, random weights at the
//! model's shape (costs do not depend on the values), once with IKNP and once with the silent
//! OT; and the GELU split's compare-and-select at the FFN shape (`bench nonlinear`'s
//! `gelu/bolt-split`; its MPC part is the same for every candidate polynomial). From these the
//! model fits per-operation CKKS latencies, extends the calibrated layers to the whole model, and
//! decides per network:
//! - the OT: IKNP or the silent OT, whichever the model predicts faster;
//! - GELU: fully in MPC, or EncFormer's split (CKKS pre-evaluates `F0`, `F1`: the session GELU's
//!   candidates, costed by [`candidate_counts`]; two more `c2m:f1` conversions; MPC selects),
//!   the split only where its candidates stay inside the FC1 boundary's bound over the GELU
//!   input range (`--gelu-range`);
//! - packing: minimal packing at every boundary (the only one implemented; expanded packing is
//!   not built, so the model does not weigh it).

use crate::e2e::BenchE2eArgs;
use crate::mpc::{OtMode, TransportKind};
use crate::nonlinear::{bench_nonlinear, BenchNonlinearOptions, Shapes, Variant};
use crate::BenchError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use veil_core::bert::cost::{
    candidate_counts, candidate_peak, decide_gelu, fit_op_latency, network, predict, Calibration,
    Estimate, GeluDecision, GeluInputs, Measured, Network, OpLatency, LOOPBACK, NETWORKS,
};
use veil_core::bert::Blocks;
use veil_core::bert::{session_params, EncoderConfig, SessionPlan};
use veil_core::nn::gelu::{GeluKind, GeluSplit};

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
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `veil plan` measures (or loads).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanCalibration {
    /// Architecture: `layers×hidden×heads×FFN`.
    pub shape: String,
    /// Sequence length.
    pub m: usize,
    /// The IKNP run.
    pub iknp: Calibration,
    /// The silent-OT run.
    pub silent: Calibration,
    /// The split's compare-and-select at `m × FFN`, IKNP (as one layer's block).
    pub split_iknp: Measured,
    /// The same on silently preprocessed COTs (online part; the pool fill is the run's
    /// `ot-fill`).
    pub split_silent: Measured,
}

/// One network's decisions.
#[derive(Clone, Debug, Serialize)]
pub struct NetworkPlan {
    /// The profile.
    pub network: Network,
    /// The whole model with IKNP.
    pub iknp: Estimate,
    /// The whole model with the silent OT.
    pub silent: Estimate,
    /// The OT chosen (`iknp` or `silent`).
    pub ot: String,
    /// The GELU decision under the chosen OT (per layer).
    pub gelu: GeluDecision,
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
    /// Fitted CKKS latencies (silent calibration).
    pub op_latency: OpLatency,
    /// The GELU split's inputs (silent calibration).
    pub gelu_inputs: GeluInputs,
    /// Degree of the candidate polynomials.
    pub candidate_degree: usize,
    /// Per network.
    pub networks: Vec<NetworkPlan>,
    /// The calibration used.
    pub calibration: PlanCalibration,
}

fn invalid(option: &'static str, value: String, expected: &'static str) -> BenchError {
    BenchError::InvalidOption {
        option,
        value,
        expected,
    }
}

fn calibration_of(run: &crate::e2e::E2eRun, ot: &str) -> Calibration {
    Calibration {
        m: run.m,
        layers: run.layers,
        ot: ot.into(),
        keygen_s: run.keygen_s,
        key_bytes: run.key_bytes,
        blocks: run.raw.clone(),
    }
}

/// Measures the calibration.
pub fn calibrate(a: &PlanArgs, cfg: &EncoderConfig) -> Result<PlanCalibration, BenchError> {
    if a.calib_layers < 2 || a.calib_layers > cfg.layers {
        return Err(invalid(
            "--calib-layers",
            a.calib_layers.to_string(),
            "2..=the architecture's layers",
        ));
    }
    let mut runs = Vec::new();
    for ot in ["iknp", "silent"] {
        eprintln!(
            "calibration: {} layer(s) + head at m = {}, OT {ot} ...",
            a.calib_layers, a.m
        );
        let args = BenchE2eArgs {
            shape: a.shape.clone(),
            m: vec![a.m],
            layers: Some(a.calib_layers),
            valid: None,
            gelu: "erf".into(),
            blocks: "exact".into(),
            ot: ot.into(),
            threads: 0,
            timeout_s: 900,
            json: true,
            netem: Vec::new(),
            text: None,
            model: None,
        };
        let r = crate::e2e::run_cfg(&args, *cfg)?;
        let run = r
            .runs
            .first()
            .ok_or_else(|| invalid("--m", a.m.to_string(), "a supported length"))?;
        runs.push(calibration_of(run, ot));
    }
    eprintln!(
        "calibration: the GELU split's select at {} x {} ...",
        a.m, cfg.ffn
    );
    let rep = bench_nonlinear(&BenchNonlinearOptions {
        shapes: Shapes {
            gelu: (a.m, cfg.ffn),
            ..Shapes::SMALL
        },
        variants: vec![Variant::GeluBoltSplit],
        transports: vec![TransportKind::Tcp],
        quiet: true,
        ot_modes: vec![OtMode::Iknp, OtMode::Silent],
        ..BenchNonlinearOptions::default()
    })?;
    let split = |mode: OtMode| -> Result<Measured, BenchError> {
        let r = rep
            .rows
            .iter()
            .find(|r| r.ot == mode)
            .ok_or_else(|| invalid("--ot", format!("{mode:?}"), "a mode the run measured"))?;
        let n = r.elements as f64;
        let (s, bytes, rounds) = if r.ot_pool {
            (
                r.time_s - r.pre_s,
                r.online_bytes_per_elem * n,
                r.online_rounds,
            )
        } else {
            (r.time_s, r.bytes_per_elem * n, r.rounds)
        };
        Ok(Measured {
            layer: 1,
            block: "gelu (split select)".into(),
            compute_s: s,
            bytes: bytes.round() as u64,
            rounds: rounds as u64,
            ..Measured::default()
        })
    };
    let (split_iknp, split_silent) = (split(OtMode::Iknp)?, split(OtMode::Silent)?);
    let silent = runs.pop().unwrap_or_default();
    let iknp = runs.pop().unwrap_or_default();
    Ok(PlanCalibration {
        shape: arch(cfg),
        m: a.m,
        iknp,
        silent,
        split_iknp,
        split_silent,
    })
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
fn architecture(a: &PlanArgs) -> Result<(String, EncoderConfig), BenchError> {
    let Some(dir) = &a.model else {
        return Ok((a.shape.clone(), crate::e2e::shape(&a.shape)?));
    };
    let path = dir.join("config.json");
    let bytes = std::fs::read(&path).map_err(crate::error::io("reading config.json"))?;
    let c = veil_host::model::parse_config(&bytes).map_err(|e| BenchError::Io {
        what: format!("{}: not a BERT config", path.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok((dir.display().to_string(), c.encoder))
}

/// Runs `veil plan`.
pub fn run(a: &PlanArgs) -> Result<PlanReport, BenchError> {
    let (name, cfg) = architecture(a)?;
    let params = session_params().map_err(|source| BenchError::Core {
        step: "session parameters",
        source,
    })?;
    let plan = SessionPlan::new(&params, &cfg, a.m).map_err(|e| BenchError::Protocol {
        protocol: "session plan".into(),
        source: veil_host::mpc::DriverError::Convert(e),
    })?;
    let cal = match &a.calibration {
        Some(p) => {
            let s =
                std::fs::read_to_string(p).map_err(crate::error::io("reading the calibration"))?;
            let c: PlanCalibration =
                serde_json::from_str(&s).map_err(|source| BenchError::Report {
                    from: p.display().to_string(),
                    line: s.chars().take(120).collect(),
                    source,
                })?;
            if c.m != a.m || c.shape != arch(&cfg) {
                return Err(invalid(
                    "--calibration",
                    format!("{} at m = {}", c.shape, c.m),
                    "a calibration of the same architecture and --m",
                ));
            }
            c
        }
        None => calibrate(a, &cfg)?,
    };
    if let Some(p) = &a.save {
        let s = serde_json::to_string_pretty(&cal).map_err(|source| BenchError::Encode {
            what: "the calibration",
            source,
        })?;
        std::fs::write(p, s).map_err(crate::error::io("writing the calibration"))?;
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
    let lat = fit_op_latency(&cal.silent.blocks).ok_or_else(missing)?;
    // The split the pipeline runs: BOLT's quartic (the erf fit's candidates do not fit the
    // conversion), GELU inputs within 2^{F1_SPLIT}, candidates within 2^{cand}.
    let split = Blocks {
        gelu: GeluKind::Bolt,
        gelu_split: GeluSplit::CkksCandidates,
        ..Blocks::EXACT
    };
    let sb = split.bounds().map_err(|e| BenchError::Core {
        step: "the split's bounds",
        source: e,
    })?;
    let (f0, f1) = {
        let c = split.candidates();
        (c[0].clone(), c[1].clone())
    };
    let degree = f0.len().max(f1.len()).saturating_sub(1);
    let in_range = a.gelu_range < f64::from(1u32 << sb.f1);
    let gelu_for = |c: &Calibration, select: &Measured| -> Result<GeluInputs, BenchError> {
        let conv = last_layer_block(c, "c2m:f1").ok_or_else(missing)?;
        Ok(GeluInputs {
            mpc: last_layer_block(c, "gelu").ok_or_else(missing)?.clone(),
            split_select: select.clone(),
            c2m_f1: conv.clone(),
            candidates: candidate_counts(degree, conv.converted_cts),
            peak: if in_range {
                candidate_peak(&f0, &f1, a.gelu_range)
            } else {
                f64::INFINITY
            },
            bound: f64::from(1u32 << sb.cand),
        })
    };
    let g_iknp = gelu_for(&cal.iknp, &cal.split_iknp)?;
    let g_silent = gelu_for(&cal.silent, &cal.split_silent)?;
    let mut networks = Vec::new();
    for net in nets {
        let iknp = predict(&cal.iknp, cfg.layers, &net).ok_or_else(missing)?;
        let silent = predict(&cal.silent, cfg.layers, &net).ok_or_else(missing)?;
        let use_silent = silent.total_s <= iknp.total_s;
        let gelu = decide_gelu(&lat, if use_silent { &g_silent } else { &g_iknp }, &net);
        networks.push(NetworkPlan {
            network: net,
            iknp,
            silent,
            ot: if use_silent { "silent" } else { "iknp" }.into(),
            gelu,
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
        gelu_inputs: g_silent,
        candidate_degree: degree,
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
    let l = &r.op_latency;
    s += &format!(
        "fitted CKKS latencies: key switch {:.2} ms, ct×pt {:.3} ms, rescale {:.3} ms (rms relative residual {:.0}%)\n",
        l.key_switch_s * 1e3,
        l.pt_mult_s * 1e3,
        l.rescale_s * 1e3,
        l.rel_rms * 100.0
    );
    let g = &r.gelu_inputs;
    s += &format!(
        "GELU split: candidates of degree {}, peak |F| = 2^{:.1} over the input range against the FC1 boundary's 2^{:.0}: {}\n",
        r.candidate_degree,
        g.peak.log2(),
        g.bound.log2(),
        if g.peak <= g.bound {
            "feasible"
        } else {
            "not feasible at this model's range"
        }
    );
    s += "\n| network | OT | T iknp s | T silent s | keys s | T_conv s | T_ckks s | T_mpc s | run MB | rounds | GELU MPC s/layer | GELU split s/layer | GELU |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for n in &r.networks {
        let e = if n.ot == "silent" { &n.silent } else { &n.iknp };
        s += &format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.2} | {:.2} | {} |\n",
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
            if n.gelu.split_chosen {
                "split"
            } else if n.gelu.split_feasible {
                "MPC (faster)"
            } else {
                "MPC (split out of range)"
            }
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

    /// A synthetic calibration: IKNP costs 1 s less compute per layer but 200 MB more.
    fn calibration(ot: &str) -> Calibration {
        let (extra_s, extra_b) = if ot == "iknp" {
            (0.0, 200_000_000)
        } else {
            (1.0, 0)
        };
        let mut blocks = Vec::new();
        for layer in 0..2 {
            blocks.push(blk(layer, "fc1", 2.0, 0, 0, 0));
            blocks.push(blk(layer, "c2m:f1", 0.5, 5_000_000, 6, 4));
            blocks.push(blk(
                layer,
                "gelu",
                3.0 + extra_s,
                30_000_000 + extra_b,
                25,
                0,
            ));
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
            iknp: calibration("iknp"),
            silent: calibration("silent"),
            split_iknp: blk(1, "gelu (split select)", 1.0, 10_000_000, 9, 0),
            split_silent: blk(1, "gelu (split select)", 1.2, 1_000_000, 9, 0),
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
            json: false,
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
        assert!(r.gelu_inputs.peak <= r.gelu_inputs.bound);
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
        // A calibration of another length is refused.
        let bad = run(&PlanArgs { m: 32, ..args });
        assert!(matches!(
            bad,
            Err(BenchError::InvalidOption {
                option: "--calibration",
                ..
            })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
