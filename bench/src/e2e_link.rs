//! `veil-bench e2e --netem PROFILES`: the product itself, `veil serve` and `veil infer`, as two
//! processes on the real checkpoint, first on plain TCP loopback and then over emulated links
//! ([`crate::netem`]: two network namespaces, a rate-limited veth pair, the one-way delay by
//! `netem` or, on kernels without `sch_netem`, by a user-space delay line in the client's
//! namespace).
//!
//! Each profile's measured wall time stands beside the network model's prediction from the
//! loopback run: the loopback time plus the cost model's link term per block
//! ([`veil_core::bert::cost::Network::transfer_s`]: the busier direction's bytes over the
//! bandwidth, one one-way latency per round) and the key upload, the overlay that `bench e2e`
//! and the cost model use. The relative error of that prediction is the model's validation.
//!
//! The sentence of each `m` is fixed ([`text_for`]) so that the peer (SPU's MiniLM script) can be
//! given the same one; `--text` overrides it.

use crate::error::invalid;
use crate::netem::{NetemLink, Shaping};
use crate::BenchError;
use serde::Serialize;
use std::process::Command;
use std::time::Duration;
use veil_core::bert::cost::{Network, NETWORKS};
use veil_host::harness::PartyProcesses;

/// The sentence used at each sequence length: its WordPiece tokens with `[CLS]`/`[SEP]` fill more
/// than half of `m` (so `m` is the supported size it rounds up to).
pub fn text_for(m: usize) -> &'static str {
    match m {
        0..=16 => "The food was wonderful and the staff were friendly.",
        17..=32 => {
            "The food was wonderful and the staff were friendly, and the room was bright and \
             quiet, with a lovely view of the old harbour."
        }
        _ => {
            "The food was wonderful and the staff were friendly, but the room was small and \
             the music downstairs was far too loud. We asked twice for a quieter table, waited \
             almost an hour for the main course, and left feeling that the place is better \
             for a quick lunch."
        }
    }
}

/// One profile's run.
#[derive(Clone, Debug, Serialize)]
pub struct LinkRun {
    /// `loopback` or a profile of [`NETWORKS`].
    pub network: String,
    /// How the link was shaped (`None` on loopback).
    pub shaping: Option<Shaping>,
    /// Bandwidth of the profile, bits per second (0 on loopback).
    pub bandwidth_bps: f64,
    /// One-way delay of the profile, seconds.
    pub one_way_s: f64,
    /// Sequence length.
    pub m: usize,
    /// Real tokens.
    pub tokens: usize,
    /// Client wall time, connection to logits, seconds.
    pub total_s: f64,
    /// The private run after the keys, seconds.
    pub run_s: f64,
    /// Key generation and upload, seconds.
    pub keys_s: f64,
    /// Public + evaluation key bytes.
    pub key_bytes: u64,
    /// Bytes of the private run (both directions).
    pub run_bytes: u64,
    /// Rounds of the private run.
    pub rounds: u64,
    /// The model's prediction from the loopback run of the same `m` (`None` for loopback).
    pub predicted_s: Option<f64>,
    /// `(predicted − measured) / measured`.
    pub rel_err: Option<f64>,
    /// The encrypted logits.
    pub logits: Vec<f64>,
    /// The client's per-block table as `veil infer --json` printed it (wall times, bytes,
    /// rounds, the server's CKKS counts), for a block-by-block comparison of two runs.
    pub blocks: serde_json::Value,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct LinkReport {
    /// The OT of both parties (`silent` or `iknp`).
    pub ot: String,
    /// The served GELU (`veil serve --gelu`: erf, bolt or bolt-split).
    pub gelu: String,
    /// The sentence of each `m`.
    pub texts: Vec<(usize, String)>,
    /// One entry per (m, profile).
    pub runs: Vec<LinkRun>,
}

fn field_f(v: &serde_json::Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or(f64::NAN)
}

fn field_u(v: &serde_json::Value, path: &[&str]) -> u64 {
    path.iter().fold(v, |v, k| &v[*k]).as_u64().unwrap_or(0)
}

/// The product's `veil` binary: `VEIL_BIN`, or `veil` beside this benchmark binary (both are
/// built into one target directory: `cargo build --release -p veil -p veil-bench`).
pub fn veil_exe() -> Result<String, BenchError> {
    if let Some(p) = std::env::var_os("VEIL_BIN") {
        return Ok(p.to_string_lossy().into_owned());
    }
    let me = std::env::current_exe().map_err(crate::error::io("locating this executable"))?;
    let veil = me.with_file_name(format!("veil{}", std::env::consts::EXE_SUFFIX));
    if !veil.is_file() {
        return Err(BenchError::Io {
            what: format!(
                "{} is missing: build the product first (cargo build --release -p veil), or set VEIL_BIN",
                veil.display()
            ),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    Ok(veil.to_string_lossy().into_owned())
}

/// Runs `veil serve` and `veil infer --json` (the product binary `veil`) over one link and
/// parses the client's report; `exe` (this benchmark binary) runs the delay line.
fn one(
    veil: &str,
    exe: &str,
    a: &super::e2e::BenchE2eArgs,
    text: &str,
    profile: Option<Network>,
    port: u16,
) -> Result<(serde_json::Value, Option<Shaping>), BenchError> {
    let layers = a.layers.unwrap_or(0).to_string();
    let timeout = a.timeout_s.to_string();
    let threads = a.threads.to_string();
    let mut procs = PartyProcesses::new();
    let mut model_args: Vec<String> = Vec::new();
    if let Some(d) = &a.model {
        model_args = vec!["--model".into(), d.to_string_lossy().into_owned()];
    }
    let link = match profile {
        None => None,
        Some(p) => Some(
            NetemLink::new(Duration::from_secs_f64(p.one_way_s), p.bandwidth_bps)
                .map_err(BenchError::Netem)?,
        ),
    };
    let wrap_exe = |exe: &str, ns: Option<&str>| -> Command {
        match ns {
            None => Command::new(exe),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, exe]);
                c
            }
        }
    };
    let wrap = |ns: Option<&str>| wrap_exe(veil, ns);
    let (server_addr, mut client_addr, ns) = match &link {
        None => (
            format!("127.0.0.1:{port}"),
            format!("127.0.0.1:{port}"),
            [None, None],
        ),
        Some(l) => (
            format!("{}:{port}", l.addr(0)),
            format!("{}:{port}", l.addr(0)),
            [Some(l.namespace(0)), Some(l.namespace(1))],
        ),
    };
    procs
        .spawn_helper(
            wrap(ns[0])
                .args(["serve", "--listen", &server_addr, "--max-clients", "1"])
                .args(["--layers", &layers, "--timeout", &timeout])
                .args(["--threads", &threads, "--ot", &a.ot])
                .args(["--gelu", &a.gelu])
                .args(&model_args),
        )
        .map_err(BenchError::Harness)?;
    let mut shaping = link.as_ref().map(NetemLink::shaping);
    if let (Some(l), Some(p)) = (&link, profile) {
        let lat = p.one_way_s;
        if l.shaping() == Shaping::TbfRateOnly && lat > 0.0 {
            let relay = format!("127.0.0.1:{}", port + 1);
            procs
                .spawn_helper(
                    wrap_exe(exe, Some(l.namespace(1)))
                        .args(["convert", "--relay", &relay, "--addr", &server_addr])
                        .args([
                            "--relay-delay-us",
                            &((lat * 1e6).round() as u64).to_string(),
                        ]),
                )
                .map_err(BenchError::Harness)?;
            shaping = Some(Shaping::TbfRateUserDelay);
            client_addr = relay;
        }
    }
    // The server loads the model before it listens; the client's connect retries for up to the
    // step timeout (`--connect-timeout`), and the delay line connects upstream only once the
    // client is in.
    std::thread::sleep(Duration::from_millis(500));
    procs
        .spawn_party(
            wrap(ns[1])
                .args(["infer", "--server", &client_addr, "--json"])
                .args(["--layers", &layers, "--timeout", &timeout])
                .args(["--connect-timeout", &timeout])
                .args(["--threads", &threads, "--ot", &a.ot])
                .args(&model_args)
                .arg(text),
        )
        .map_err(BenchError::Harness)?;
    let lines = procs
        .wait_output(Duration::from_secs(a.timeout_s.max(60) * 4))
        .map_err(BenchError::Harness)?;
    let out = lines.first().cloned().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&out).map_err(|source| BenchError::Report {
        from: "veil infer".into(),
        line: out.chars().take(200).collect(),
        source,
    })?;
    Ok((v, shaping))
}

/// Runs the product over loopback and each profile in `a.netem`, for each `m` of `a.m`.
pub fn run(a: &super::e2e::BenchE2eArgs) -> Result<LinkReport, BenchError> {
    // The product serves the checkpoint's softmax and LayerNorm; only its GELU is a choice.
    if a.blocks != "exact" {
        return Err(invalid(
            "--blocks",
            a.blocks.clone(),
            "exact with --netem (`veil serve` chooses only its GELU: --gelu)",
        ));
    }
    if veil_host::bert::gelu_blocks(&a.gelu).is_none() {
        return Err(invalid("--gelu", a.gelu.clone(), "erf, bolt or bolt-split"));
    }
    let mut profiles = Vec::new();
    for p in a
        .netem
        .iter()
        .filter(|p| !p.eq_ignore_ascii_case("loopback"))
    {
        let f = NETWORKS
            .iter()
            .find(|n| n.name.eq_ignore_ascii_case(p))
            .ok_or_else(|| invalid("--netem", p.clone(), "loopback, lan, wan1, wan2 or wan3"))?;
        profiles.push(*f);
    }
    if !profiles.is_empty() {
        if let Some(why) = crate::netem::unavailable_reason() {
            return Err(BenchError::Netem(crate::netem::NetemError::Unavailable {
                reason: why,
            }));
        }
    }
    let exe = std::env::current_exe().map_err(crate::error::io("locating this executable"))?;
    let exe = exe.to_string_lossy().into_owned();
    let veil = veil_exe()?;
    let base = 41_000 + (std::process::id() % 500) as u16 * 4;
    let mut runs = Vec::new();
    let mut texts = Vec::new();
    for &m in &a.m {
        let text = a.text.clone().unwrap_or_else(|| text_for(m).to_string());
        texts.push((m, text.clone()));
        let mut loop_s = None;
        let todo: Vec<Option<Network>> = std::iter::once(None)
            .chain(profiles.iter().map(|p| Some(*p)))
            .collect();
        for (k, prof) in todo.into_iter().enumerate() {
            let name = prof.map_or("loopback".to_string(), |p| p.name.to_string());
            eprintln!("m = {m}, {name}: veil serve + veil infer ...");
            let (v, shaping) = one(&veil, &exe, a, &text, prof, base + 2 * k as u16)?;
            let key_bytes = field_u(&v, &["key_exchange", "public_key_bytes"])
                + field_u(&v, &["key_exchange", "evaluation_key_bytes"]);
            let run_bytes = field_u(&v, &["totals", "mpc_bytes"]);
            let rounds = field_u(&v, &["totals", "mpc_rounds"]);
            let total_s = field_f(&v, &["total_s"]);
            let (bw, lat) = prof.map_or((0.0, 0.0), |p| (p.bandwidth_bps, p.one_way_s));
            let predicted_s = match (prof, loop_s, v["blocks"].as_array()) {
                (Some(net), Some(l), Some(bs)) => {
                    let blocks = bs.iter().map(|b| {
                        (
                            field_u(b, &["mpc_bytes"]),
                            field_u(b, &["mpc_bytes_sent"]),
                            field_u(b, &["mpc_rounds"]),
                        )
                    });
                    Some(l + net.run_link_s(blocks, key_bytes))
                }
                (Some(_), Some(_), None) => Some(f64::NAN),
                _ => None,
            };
            if prof.is_none() {
                loop_s = Some(total_s);
            }
            let logits = v["logits"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                .unwrap_or_default();
            runs.push(LinkRun {
                network: name,
                shaping,
                bandwidth_bps: bw,
                one_way_s: lat,
                m: field_u(&v, &["m"]) as usize,
                tokens: field_u(&v, &["tokens"]) as usize,
                total_s,
                run_s: field_f(&v, &["run_s"]),
                keys_s: field_f(&v, &["key_exchange", "seconds"]),
                key_bytes,
                run_bytes,
                rounds,
                predicted_s,
                rel_err: predicted_s.map(|p| (p - total_s) / total_s),
                logits,
                blocks: v["blocks"].clone(),
            });
        }
    }
    Ok(LinkReport {
        ot: a.ot.clone(),
        gelu: a.gelu.clone(),
        texts,
        runs,
    })
}

/// The report as a table.
pub fn render(r: &LinkReport) -> String {
    let mut s = format!(
        "private inference, the product's `veil serve` + `veil infer` as two processes, real checkpoint, OT {}, GELU {}\n",
        r.ot, r.gelu
    );
    for (m, t) in &r.texts {
        s += &format!("m = {m}: {t:?}\n");
    }
    s += "| m | tokens | network | shaping | total s | run s | keys MB | run MB | rounds | predicted s | rel. err | logits |\n|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for x in &r.runs {
        s += &format!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {:?} |\n",
            x.m,
            x.tokens,
            x.network,
            x.shaping.map_or("-".to_string(), |s| format!("{s:?}")),
            x.total_s,
            x.run_s,
            x.key_bytes as f64 / 1e6,
            x.run_bytes as f64 / 1e6,
            x.rounds,
            x.predicted_s.map_or("-".into(), |p| format!("{p:.1}")),
            x.rel_err
                .map_or("-".into(), |e| format!("{:+.1}%", e * 100.0)),
            x.logits
                .iter()
                .map(|v| (v * 1e4).round() / 1e4)
                .collect::<Vec<_>>()
        );
    }
    s
}
