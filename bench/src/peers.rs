//! Peer figures printed beside ours, and where they come from.
//!
//! The rule: **a ratio to a peer is printed only against a peer run live in the same process
//! tree**. A peer's number appears in a report in one of two ways:
//! - **measured in this run**: [`PeerFigures::spu_live`] runs the shared peer script
//!   (`../shared/peers/mpc/bench_spu.py`, SecretFlow SPU, 2 processes over brpc on loopback) on
//!   the same primitives and element count, as a child of this process, and the source says
//!   "measured in this run". Only these figures are divided into (`t/spu`, `B/spu`, ...);
//! - **recorded**: [`PeerFigures::spu_reference`], fixed figures measured elsewhere, labelled with
//!   the peer's version, the date ([`PeerFigures::date`]) and the machine they were measured
//!   on. Reports print them in their own columns, headed by their date, and never divide by
//!   them: a frozen time from another (noisier or quieter) run is not a comparison.
//!
//! The source strings travel into every report (`spu_source`, `spu_recorded_source` in the
//! JSON) and head the table.

use crate::error::io;
use crate::BenchError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// One peer's figures for one primitive (`None`: not measured in that run).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerFigure {
    /// Wall time of the slower party, s.
    pub time_s: Option<f64>,
    /// Bytes per element, both directions.
    pub bytes_per_elem: Option<f64>,
    /// Rounds.
    pub rounds: Option<u32>,
}

/// A peer's figures per primitive, with their source.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerFigures {
    /// Where the figures come from: "measured in this run ..." or "reference, ...".
    pub source: String,
    /// Whether they were measured in this run.
    pub live: bool,
    /// Elements per primitive the figures were measured at (times only compare at this `n`).
    pub n: usize,
    /// The day recorded figures were measured (`YYYY-MM-DD`); `None` for a live run.
    pub date: Option<String>,
    figures: BTreeMap<String, PeerFigure>,
}

/// SPU's columns of one benchmark row (`veil-bench mpc`, `veil-bench nonlinear`): the figures
/// measured in this run, the only ones a ratio divides by, and the recorded ones, printed apart
/// under their date. Flattened into the row's JSON as `spu_time_s`, `spu_bytes_per_elem`,
/// `spu_rounds`, `spu_recorded_time_s`, `spu_recorded_bytes_per_elem`, `spu_recorded_rounds`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SpuColumns {
    /// SPU Cheetah time, s, measured in this run (`None` without `--peers`).
    #[serde(rename = "spu_time_s")]
    pub time_s: Option<f64>,
    /// SPU Cheetah bytes per element, measured in this run.
    #[serde(rename = "spu_bytes_per_elem")]
    pub bytes_per_elem: Option<f64>,
    /// SPU Cheetah rounds, measured in this run (a plain run does not measure them).
    #[serde(rename = "spu_rounds")]
    pub rounds: Option<u32>,
    /// SPU Cheetah time recorded on the report's `spu_recorded_date`, s (not this run: no ratio
    /// divides by it).
    #[serde(rename = "spu_recorded_time_s")]
    pub recorded_time_s: Option<f64>,
    /// SPU Cheetah bytes per element, recorded.
    #[serde(rename = "spu_recorded_bytes_per_elem")]
    pub recorded_bytes_per_elem: Option<f64>,
    /// SPU Cheetah rounds, recorded.
    #[serde(rename = "spu_recorded_rounds")]
    pub recorded_rounds: Option<u32>,
}

impl SpuColumns {
    /// The columns of a row from SPU's live figure (if it ran) and its recorded one.
    pub fn new(live: Option<PeerFigure>, recorded: Option<PeerFigure>) -> Self {
        SpuColumns {
            time_s: live.and_then(|s| s.time_s),
            bytes_per_elem: live.and_then(|s| s.bytes_per_elem),
            rounds: live.and_then(|s| s.rounds),
            recorded_time_s: recorded.and_then(|s| s.time_s),
            recorded_bytes_per_elem: recorded.and_then(|s| s.bytes_per_elem),
            recorded_rounds: recorded.and_then(|s| s.rounds),
        }
    }

    /// The live cells of a table row, ` | time bytes rounds`, bytes with `bytes_prec` decimals.
    pub(crate) fn live_cells(&self, bytes_prec: usize) -> String {
        format!(
            " | {:>7} {:>7} {:>5}",
            opt_cell(self.time_s, 2),
            opt_cell(self.bytes_per_elem, bytes_prec),
            opt_u_cell(self.rounds),
        )
    }

    /// The recorded cells that end a table row (newline included), aligned under
    /// [`SpuSources::recorded_header`]; bytes with `bytes_prec` decimals.
    pub(crate) fn recorded_cells(&self, sources: &SpuSources, bytes_prec: usize) -> String {
        format!(
            " | {:>w$} {:>7} {:>7} {:>5}\n",
            "",
            opt_cell(self.recorded_time_s, 2),
            opt_cell(self.recorded_bytes_per_elem, bytes_prec),
            opt_u_cell(self.recorded_rounds),
            w = sources.recorded_head().len() + 1,
        )
    }
}

/// Where a report's SPU columns come from. Flattened into the report's JSON as `spu_source`,
/// `spu_live`, `spu_recorded_source`, `spu_recorded_date`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpuSources {
    /// Where the live SPU columns come from ("not run" without `--peers`).
    #[serde(rename = "spu_source")]
    pub source: String,
    /// Whether SPU ran in this process tree; without it the report has no ratio columns.
    #[serde(rename = "spu_live")]
    pub live: bool,
    /// Where the recorded SPU columns come from (version, machine, date).
    #[serde(rename = "spu_recorded_source")]
    pub recorded_source: String,
    /// The day the recorded SPU figures were measured.
    #[serde(rename = "spu_recorded_date")]
    pub recorded_date: String,
}

impl SpuSources {
    /// The sources of a report: `live`, SPU run in this process tree (figures that are not
    /// live count as none), and the `recorded` figures.
    pub fn new(live: Option<&PeerFigures>, recorded: &PeerFigures) -> Self {
        let live = live.filter(|l| l.live);
        SpuSources {
            source: live.map_or_else(
                || "not run in this process tree (--peers runs it): no ratio columns".into(),
                |l| l.source.clone(),
            ),
            live: live.is_some(),
            recorded_source: recorded.source.clone(),
            recorded_date: recorded.date.clone().unwrap_or_else(|| "undated".into()),
        }
    }

    /// The two lines that name the sources above a table.
    pub(crate) fn lines(&self) -> String {
        format!(
            "SPU, measured in this run: {}\nSPU, recorded {} (not this run, never divided into): {}\n",
            self.source, self.recorded_date, self.recorded_source
        )
    }

    /// The heading of the recorded columns: `SPU <date>`.
    pub(crate) fn recorded_head(&self) -> String {
        format!("SPU {}", self.recorded_date)
    }

    /// The recorded columns' part of the table header (newline included).
    pub(crate) fn recorded_header(&self) -> String {
        format!(
            " | {}: {:>7} {:>7} {:>5}\n",
            self.recorded_head(),
            "s",
            "B/e",
            "r"
        )
    }
}

/// A table cell of an optional figure with `prec` decimals (`-` for none).
pub(crate) fn opt_cell(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}

/// A table cell of an optional count (`-` for none).
pub(crate) fn opt_u_cell(v: Option<u32>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

/// SPU's live figures if they came (`--peers`); otherwise a note on stderr that only the recorded
/// figures are shown, and `None`.
pub(crate) fn live_or_note(r: Result<PeerFigures, BenchError>) -> Option<PeerFigures> {
    r.map_err(|e| {
        eprintln!(
            "veil: SPU not measured in this run ({e}); only its recorded figures are shown, \
             with no ratios"
        )
    })
    .ok()
}

/// The primitives both `veil-bench mpc` and `bench_spu.py` run, by the same names.
pub const SPU_OPS: [&str; 5] = ["mul", "trunc", "less", "relu", "select"];

/// The day the recorded SPU figures ([`PeerFigures::spu_reference`],
/// [`PeerFigures::spu_nonlinear_reference`]) were measured.
pub const SPU_REFERENCE_DATE: &str = "2026-11-30";

/// The label of [`PeerFigures::spu_reference`].
pub const SPU_REFERENCE_SOURCE: &str = "reference, SPU 0.9.5 Cheetah, measured 2026-11-30 on the \
     project machine at n = 65536 (not this run; ../shared/peers/mpc: times of the quiet re-run, bytes and \
     rounds from its README table)";

/// The label of [`PeerFigures::spu_nonlinear_reference`].
pub const SPU_NONLINEAR_REFERENCE_SOURCE: &str = "reference, SPU 0.9.5 Cheetah, measured \
     2026-11-30 on the project machine (not this run; ../shared/peers/mpc/README.md table: softmax \
     12x128x128, GELU (tanh) 128x3072, LayerNorm (no affine) 128x768; rounds from a 200 ms added \
     delay, softmax ~308-323)";

impl PeerFigures {
    /// Labelled reference figures from `(op, time s, bytes/elem, rounds)` rows, measured on
    /// `date`.
    fn reference(source: &str, date: &str, n: usize, rows: &[(&str, f64, f64, u32)]) -> Self {
        PeerFigures {
            source: source.into(),
            live: false,
            n,
            date: Some(date.into()),
            figures: rows
                .iter()
                .map(|&(op, t, b, r)| {
                    (
                        op.to_string(),
                        PeerFigure {
                            time_s: Some(t),
                            bytes_per_elem: Some(b),
                            rounds: Some(r),
                        },
                    )
                })
                .collect(),
        }
    }

    /// Figures from `(op, time s, bytes/elem, rounds)` rows, for tests: live (as if measured in
    /// this run) or recorded on `date`.
    #[cfg(test)]
    pub(crate) fn for_test(
        live: bool,
        date: &str,
        n: usize,
        rows: &[(&str, f64, f64, u32)],
    ) -> Self {
        let source = if live {
            "measured in this run (test)"
        } else {
            "reference (test)"
        };
        PeerFigures {
            live,
            date: (!live).then(|| date.into()),
            ..Self::reference(source, date, n, rows)
        }
    }

    /// SecretFlow SPU 0.9.5 Cheetah at `n = 2^16`, FM64, measured 2026-11-30 on the project's
    /// 2-core machine with `../shared/peers/mpc/bench_spu.py` (2 processes, brpc, loopback).
    /// Times: a quiet re-run (mul 0.29, less 0.61, ReLU 0.64, select 0.26 s; trunc 0.13 s from
    /// the README table). Bytes per element and rounds (from a 200 ms added delay): the
    /// README table.
    pub fn spu_reference() -> Self {
        let rows: [(&str, f64, f64, u32); 5] = [
            ("mul", 0.29, 220.0, 10),
            ("trunc", 0.13, 2.1, 2),
            ("less", 0.61, 82.0, 19),
            ("relu", 0.64, 98.5, 22),
            ("select", 0.26, 218.0, 8),
        ];
        Self::reference(SPU_REFERENCE_SOURCE, SPU_REFERENCE_DATE, 1 << 16, &rows)
    }

    /// SecretFlow SPU 0.9.5 Cheetah on the shaped blocks of `bench_spu.py` (softmax over rows,
    /// its tanh GELU, LayerNorm without affine) at BERT-base shapes, measured 2026-11-30 on the
    /// project's 2-core machine: the table of `../shared/peers/mpc/README.md` (times of a noisy
    /// machine; rounds estimated from an added 200 ms delay, softmax's ~308–323 quoted at its
    /// lower end).
    pub fn spu_nonlinear_reference() -> Self {
        let rows: [(&str, f64, f64, u32); 3] = [
            ("softmax_12x128x128", 174.6, 4047.0, 308),
            ("gelu_128x3072", 88.2, 2777.0, 172),
            ("layernorm_128x768", 2.81, 454.0, 72),
        ];
        Self::reference(SPU_NONLINEAR_REFERENCE_SOURCE, SPU_REFERENCE_DATE, 0, &rows)
    }

    /// The figures of primitive `op`, if the peer has them.
    pub fn get(&self, op: &str) -> Option<PeerFigure> {
        self.figures.get(op).copied()
    }

    /// The figures of `op` as they compare with a run at `n` elements: the time only when `n` is
    /// the peer's (bytes per element and rounds do not depend on `n` for these primitives).
    pub fn at(&self, op: &str, n: usize) -> Option<PeerFigure> {
        self.get(op).map(|f| PeerFigure {
            time_s: f.time_s.filter(|_| n == self.n),
            ..f
        })
    }

    /// Runs SPU Cheetah now on the primitives of `ops` it shares with us, at `n` elements, with
    /// `peers_dir/mpc/bench_spu.py` and the Python of `VEIL_SPU_PYTHON` (default
    /// `/tmp/veil-peers/spu/bin/python`, where the peer README installs it). Rounds are not
    /// measured by a plain run (they need a second run with an added delay), so they are `None`.
    pub fn spu_live(peers_dir: &Path, n: usize, ops: &[&str]) -> Result<Self, BenchError> {
        let (python, script) = spu_paths(peers_dir)?;
        let shared: Vec<&str> = ops
            .iter()
            .copied()
            .filter(|o| SPU_OPS.contains(o))
            .collect();
        if shared.is_empty() {
            return Ok(PeerFigures {
                source: "measured in this run: none of the primitives asked for".into(),
                live: true,
                n,
                date: None,
                figures: BTreeMap::new(),
            });
        }
        let (version, figures) = run_spu(&python, &script, Some(n), &shared)?;
        Ok(PeerFigures {
            source: format!(
                "measured in this run: SPU {version} Cheetah, 2 processes over brpc on loopback, \
                 n = {n} (rounds not measured)"
            ),
            live: true,
            n,
            date: None,
            figures,
        })
    }

    /// Runs SPU Cheetah now on the shaped blocks `ops` of `bench_spu.py` (`softmax_AxBxC`,
    /// `gelu_RxC`, `layernorm_RxC`), like [`PeerFigures::spu_live`]. Rounds are not measured by
    /// a plain run, so they are `None` (the recorded ones stay in the recorded columns).
    pub fn spu_live_shaped(peers_dir: &Path, ops: &[&str]) -> Result<Self, BenchError> {
        let (python, script) = spu_paths(peers_dir)?;
        let shaped: Vec<&str> = ops.iter().copied().filter(|o| is_shaped(o)).collect();
        if shaped.is_empty() {
            return Ok(PeerFigures {
                source: "measured in this run: none of the blocks asked for".into(),
                live: true,
                n: 0,
                date: None,
                figures: BTreeMap::new(),
            });
        }
        let (version, figures) = run_spu(&python, &script, None, &shaped)?;
        Ok(PeerFigures {
            source: format!(
                "measured in this run: SPU {version} Cheetah, 2 processes over brpc on loopback \
                 (time and bytes; rounds not measured)"
            ),
            live: true,
            n: 0,
            date: None,
            figures,
        })
    }
}

/// Whether `op` is one of `bench_spu.py`'s shaped blocks (`softmax_12x128x128`, ...).
fn is_shaped(op: &str) -> bool {
    let Some((kind, dims)) = op.split_once('_') else {
        return false;
    };
    matches!(kind, "softmax" | "gelu" | "layernorm")
        && dims.split('x').count() >= 2
        && dims
            .split('x')
            .all(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The Python and the script of the SPU peer, or why they are missing.
fn spu_paths(peers_dir: &Path) -> Result<(String, std::path::PathBuf), BenchError> {
    let peer = "SPU";
    let script = peers_dir.join("mpc").join("bench_spu.py");
    if !script.is_file() {
        return Err(BenchError::Peer {
            peer,
            reason: format!("{} not found", script.display()),
        });
    }
    let python = std::env::var("VEIL_SPU_PYTHON")
        .unwrap_or_else(|_| "/tmp/veil-peers/spu/bin/python".into());
    if !Path::new(&python).is_file() {
        return Err(BenchError::Peer {
            peer,
            reason: format!(
                "no SPU Python at {python} (see {}/mpc/README.md, or set VEIL_SPU_PYTHON)",
                peers_dir.display()
            ),
        });
    }
    Ok((python, script))
}

/// Runs `bench_spu.py` (Cheetah) on `ops` and returns SPU's version and its figures per op (the
/// minimum time over repeats; no rounds).
fn run_spu(
    python: &str,
    script: &Path,
    n: Option<usize>,
    ops: &[&str],
) -> Result<(String, BTreeMap<String, PeerFigure>), BenchError> {
    let peer = "SPU";
    let out = std::env::temp_dir().join(format!("veil-spu-{}.json", std::process::id()));
    eprintln!(
        "veil: running SPU Cheetah on {}{}",
        ops.join(","),
        n.map(|n| format!(" (n = {n})")).unwrap_or_default()
    );
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .args(["--protocols", "CHEETAH", "--ops", &ops.join(",")]);
    if let Some(n) = n {
        cmd.args(["--n", &n.to_string()]);
    }
    let st = cmd
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(io(format!("running {}", script.display())))?;
    if !st.success() {
        return Err(BenchError::Peer {
            peer,
            reason: format!("bench_spu.py failed ({st})"),
        });
    }
    let text = std::fs::read_to_string(&out).map_err(io(format!("reading {}", out.display())))?;
    let _ = std::fs::remove_file(&out);
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| BenchError::Report {
            from: "bench_spu.py".into(),
            line: text.chars().take(80).collect(),
            source,
        })?;
    let version = doc["spu_version"].as_str().unwrap_or("?").to_string();
    let mut figures = BTreeMap::new();
    for r in doc["rows"].as_array().into_iter().flatten() {
        let (Some(name), Some(wall)) = (r["name"].as_str(), r["wall_s"].as_f64()) else {
            continue;
        };
        let e = figures.entry(name.to_string()).or_insert(PeerFigure {
            time_s: None,
            bytes_per_elem: r["bytes_per_elem"].as_f64(),
            rounds: None,
        });
        // With --repeat, the minimum.
        e.time_s = Some(e.time_s.map_or(wall, |t: f64| t.min(wall)));
    }
    Ok((version, figures))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_figures_are_labelled_with_source_and_date() {
        let r = PeerFigures::spu_reference();
        assert!(!r.live);
        assert!(r.source.starts_with("reference") && r.source.contains("2026-11-30"));
        assert_eq!(r.date.as_deref(), Some(SPU_REFERENCE_DATE));
        assert!(r.source.contains(SPU_REFERENCE_DATE));
        let nl = PeerFigures::spu_nonlinear_reference();
        assert!(!nl.live && nl.source.contains(SPU_REFERENCE_DATE));
        assert_eq!(r.get("mul").unwrap().time_s, Some(0.29));
        assert!(r.get("b2a").is_none());
        assert_eq!(r.at("mul", 4096).unwrap().time_s, None);
        assert_eq!(r.at("mul", 4096).unwrap().rounds, Some(10));
    }

    #[test]
    fn a_missing_peer_folder_is_a_typed_error() {
        let e = PeerFigures::spu_live(Path::new("/nonexistent/peers"), 16, &["mul"]).unwrap_err();
        assert!(matches!(e, BenchError::Peer { peer: "SPU", .. }), "{e}");
    }
}
