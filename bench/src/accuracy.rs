//! `veil-bench accuracy`: the sentiment head on the held-out UCI sentences (the 300 that
//! training never saw), through three paths of the same model:
//!
//! - **exact**: the `f64` reference ([`veil_core::bert::reference`]);
//! - **fixed-point**: the emulation of the private pipeline ([`veil_core::bert::fixed`]): the
//!   protocol's integer blocks and boundary roundings, at plaintext speed, on every sentence;
//! - **encrypted**: the private pipeline itself (client and server over TCP loopback) on the
//!   `--private N` sentences from `--private-from K` on (about two minutes each on two cores;
//!   each sentence's result is printed as it comes, so a long run can be split).
//!
//! It reports accuracy per path, the agreement of each path's prediction with the exact one, and
//! the worst logit difference. With `--gelu bolt|bolt-split` (a GELU `veil serve` may serve
//! instead of the checkpoint's erf) the fixed-point and encrypted paths run it; checked against
//! the checkpoint's `f64` path, their rows show the cost of that choice with the protocol's.

use crate::BenchError;
use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use veil_core::bert::{client_run, server_run, session_params, SessionPlan, SEQ_LENS};
use veil_core::ckks::Ckks;
use veil_core::hybrid::ServerKeys;
use veil_core::mpc::PartyId;
use veil_host::harness::{run_pair, Link};
use veil_host::model::{self, head};
use veil_host::mpc::drive;
use veil_host::transport::TransportConfig;

/// Arguments of `veil-bench accuracy`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchAccuracyArgs {
    /// A BERT checkpoint directory (default: all-MiniLM-L6-v2 with the sentiment head).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Run the encrypted pipeline on N held-out sentences (from --private-from on).
    #[arg(long, default_value_t = 0)]
    pub private: usize,
    /// The first held-out sentence (0-based) of the encrypted run, so that the split can be
    /// covered in several runs.
    #[arg(long, default_value_t = 0)]
    pub private_from: usize,
    /// Use only the first N held-out sentences (default: all 300).
    #[arg(long)]
    pub limit: Option<usize>,
    /// The served GELU (as `veil serve --gelu`): erf (the checkpoint's), bolt or bolt-split.
    /// The fixed-point and encrypted paths run it; with another than erf, a row gives its `f64`
    /// reference against the checkpoint's.
    #[arg(long, default_value = "erf")]
    pub gelu: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One path's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PathRow {
    /// Path name.
    pub path: String,
    /// Sentences it ran on.
    pub sentences: usize,
    /// Accuracy against the labels.
    pub accuracy: f64,
    /// The exact path's accuracy on the same sentences.
    pub exact_accuracy: f64,
    /// Fraction of sentences whose prediction equals the exact path's.
    pub agreement: f64,
    /// Worst `|logit − exact logit|`.
    pub worst_logit_err: f64,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct AccuracyReport {
    /// Where the head came from.
    pub head: String,
    /// Rows: exact, fixed-point, encrypted.
    pub rows: Vec<PathRow>,
    /// Wall seconds of the encrypted runs (mean per sentence).
    pub private_s_per_sentence: f64,
    /// Held-out sentences whose exact logit margin `|l0 − l1|` is below [`NEAR_TIE`]:
    /// `(index, margin, fixed-point agrees)`. A logit error of half the margin can flip them.
    pub near_ties: Vec<(usize, f64, bool)>,
}

/// The exact-path logit margin below which a sentence is listed as a near tie (four times the
/// worst encrypted logit error measured so far, about 0.033).
pub const NEAR_TIE: f64 = 0.15;

fn margin(l: &[f64]) -> f64 {
    match l {
        [a, b] => (a - b).abs(),
        _ => f64::INFINITY,
    }
}

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> BenchError {
    move |e| BenchError::Io {
        what: what.into(),
        source: std::io::Error::other(e.to_string()),
    }
}

fn row(path: &str, got: &[(Vec<f64>, Vec<f64>, u8)]) -> PathRow {
    let n = got.len().max(1) as f64;
    let am = head::argmax;
    PathRow {
        path: path.into(),
        sentences: got.len(),
        accuracy: got.iter().filter(|(g, _, y)| am(g) == *y as usize).count() as f64 / n,
        exact_accuracy: got.iter().filter(|(_, e, y)| am(e) == *y as usize).count() as f64 / n,
        agreement: got.iter().filter(|(g, e, _)| am(g) == am(e)).count() as f64 / n,
        worst_logit_err: got
            .iter()
            .flat_map(|(g, e, _)| g.iter().zip(e).map(|(a, b)| (a - b).abs()))
            .fold(0.0, f64::max),
    }
}

/// Runs the benchmark.
pub fn run(a: &BenchAccuracyArgs) -> Result<AccuracyReport, BenchError> {
    let dir = match &a.model {
        Some(d) => d.clone(),
        None => model::fetch::default_model_dir().map_err(err("fetch the default model"))?,
    };
    let md = model::load_dir(&dir).map_err(err("load the model"))?;
    let mut sents = head::heldout().map_err(err("held-out sentences"))?;
    if let Some(l) = a.limit {
        sents.truncate(l);
    }
    let params = session_params().map_err(|source| BenchError::Core {
        step: "session parameters",
        source,
    })?;
    let cfg = md.weights.cfg;
    let blocks =
        veil_host::bert::gelu_blocks(&a.gelu).ok_or_else(|| BenchError::InvalidOption {
            option: "--gelu",
            value: a.gelu.clone(),
            expected: "erf, bolt or bolt-split",
        })?;
    let mut plans: BTreeMap<usize, SessionPlan> = BTreeMap::new();
    let (mut exact, mut fixed, mut private) = (Vec::new(), Vec::new(), Vec::new());
    let ck = Ckks::new(Arc::new(crate::cpu_backend(&params, 0)?));
    let mut private_s = 0.0;
    let mut near_ties = Vec::new();
    for (i, s) in sents.iter().enumerate() {
        let ids = md.tokenize(&s.text, 128).map_err(err("tokenize"))?;
        let valid = ids.len();
        let m = *SEQ_LENS.iter().find(|&&m| m >= valid).unwrap_or(&128);
        let x = md.embeddings.embed(&ids, m).map_err(err("embed"))?;
        let e =
            veil_core::bert::reference::logits(&md.weights, &x, valid).map_err(err("reference"))?;
        if let std::collections::btree_map::Entry::Vacant(v) = plans.entry(m) {
            v.insert(SessionPlan::with_blocks(&params, &cfg, m, blocks).map_err(err("plan"))?);
        }
        // The protocol paths are checked against the checkpoint's `f64` path whatever GELU
        // they run: the reference of a GELU fit is the function it fits
        // ([`veil_core::bert::reference::logits_with`]), so with BOLT's the rows show the fit's
        // cost and the protocol's together.
        let plan = &plans[&m];
        let f = veil_core::bert::fixed::logits_fixed(plan, &md.weights, &x, valid)
            .map_err(err("fixed-point path"))?;
        if margin(&e) < NEAR_TIE {
            near_ties.push((i, margin(&e), head::argmax(&f) == head::argmax(&e)));
        }
        exact.push((e.clone(), e.clone(), s.label));
        fixed.push((f, e.clone(), s.label));
        if (a.private_from..a.private_from.saturating_add(a.private)).contains(&i) {
            let t = Instant::now();
            let mut rng = ChaCha20Rng::from_rng(OsRng).map_err(BenchError::Rng)?;
            let sk = ck.gen_secret_key(&mut rng);
            let pk = ck
                .gen_public_key(&sk, &mut rng)
                .map_err(|source| BenchError::Core {
                    step: "public key",
                    source,
                })?;
            let keys = ck
                .gen_evaluation_keys(&sk, plan.rotations(), true, &mut rng, |_, _| {})
                .map_err(|source| BenchError::Core {
                    step: "evaluation keys",
                    source,
                })?;
            let server_keys = ServerKeys {
                ck: &ck,
                pk: &pk,
                keys: &keys,
            };
            let tcfg = TransportConfig {
                timeout: Duration::from_secs(900),
                max_frame: 1 << 30,
            };
            let w = &md.weights;
            let (lg, srv) = run_pair(
                Link::Tcp,
                tcfg,
                |t0| {
                    let mut p0 = crate::e2e::party(PartyId::P0, true)?;
                    let ch = p0.channel();
                    drive(
                        ch,
                        client_run(&mut p0, &ck, &sk, plan, &x, valid, &mut |_| {}),
                        t0,
                    )
                    .map_err(|source| BenchError::Protocol {
                        protocol: "client".into(),
                        source,
                    })
                },
                |t1| {
                    let mut p1 = crate::e2e::party(PartyId::P1, true)?;
                    let ch = p1.channel();
                    drive(
                        ch,
                        server_run(&mut p1, server_keys, plan, w, valid, &mut |_| {}),
                        t1,
                    )
                    .map_err(|source| BenchError::Protocol {
                        protocol: "server".into(),
                        source,
                    })
                },
            )
            .map_err(BenchError::Harness)?;
            srv?;
            let lg = lg?;
            if !a.json {
                let err = crate::max_abs_diff(&lg, &e);
                let am = head::argmax;
                eprintln!(
                    "encrypted {}/{} (held-out #{i}, m = {m}): {:.1} s, label {} (plaintext {}, fixed-point {}, true {}), max |Δlogit| {err:.4}, plaintext margin {:.4}",
                    private.len() + 1,
                    a.private,
                    t.elapsed().as_secs_f64(),
                    am(&lg),
                    am(&e),
                    am(&fixed[i].0),
                    s.label,
                    margin(&e),
                );
            }
            private.push((lg, e, s.label));
            private_s += t.elapsed().as_secs_f64();
        }
    }
    let mut rows = vec![
        row("exact (f64)", &exact),
        row(&format!("fixed-point emulation, GELU {}", a.gelu), &fixed),
    ];
    if !private.is_empty() {
        rows.push(row("encrypted", &private));
    }
    Ok(AccuracyReport {
        head: md.head_source.clone(),
        rows,
        private_s_per_sentence: if private.is_empty() {
            0.0
        } else {
            private_s / private.len() as f64
        },
        near_ties,
    })
}

/// The report as a table.
pub fn render(r: &AccuracyReport) -> String {
    let mut s = format!(
        "held-out UCI sentences, head: {}\n| path | sentences | accuracy | exact accuracy (same sentences) | agreement with exact | worst |Δlogit| |\n|---|---:|---:|---:|---:|---:|\n",
        r.head
    );
    for w in &r.rows {
        s += &format!(
            "| {} | {} | {:.4} | {:.4} | {:.4} | {:.4} |\n",
            w.path, w.sentences, w.accuracy, w.exact_accuracy, w.agreement, w.worst_logit_err
        );
    }
    if r.private_s_per_sentence > 0.0 {
        s += &format!(
            "encrypted: {:.1} s per sentence (keys included)\n",
            r.private_s_per_sentence
        );
    }
    s += &format!(
        "near ties (exact margin |l0 − l1| < {NEAR_TIE}): {}\n",
        r.near_ties.len()
    );
    for (i, m, f) in &r.near_ties {
        s += &format!(
            "  held-out #{i}: margin {m:.4}, fixed-point {}\n",
            if *f { "agrees" } else { "disagrees" }
        );
    }
    s
}
