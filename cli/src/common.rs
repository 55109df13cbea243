//! What `veil serve`, `veil infer` and `veil demo` share: loading the model, the client's input,
//! the progress display, and the result's rendering (text and JSON).

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use veil_core::bert::{EncoderConfig, EncoderWeights, SEQ_LENS};
use veil_core::packing::Mat;
use veil_core::PolyBackend;
use veil_host::backend::{BackendChoice, BackendError, BackendKind, Factory, OnBackend};
use veil_host::bert::{
    describe_blocks, serve, BlockRow, CkksCache, ClientResult, ServeOptions, ServeSummary,
    SessionError,
};
use veil_host::model::{self, ClientModel, Model, ModelError};
use veil_host::transport::{TransportConfig, TransportError};

/// Errors of the inference commands.
#[derive(Debug)]
#[non_exhaustive]
pub enum CliError {
    /// The model directory did not load, or the text did not tokenize or embed.
    Model(ModelError),
    /// The session failed.
    Session(SessionError),
    /// The plaintext reference refused its input.
    Reference(veil_core::Error),
    /// A socket could not be opened.
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// No connection to the server.
    Connect {
        /// The address.
        addr: String,
        /// Why.
        source: TransportError,
    },
    /// The command line does not make sense.
    Usage(String),
    /// A JSON report did not encode.
    Json(serde_json::Error),
    /// The demo's server thread failed.
    Server(String),
    /// A private CNN run failed.
    Vision(veil_host::cnn::VisionError),
    /// The chosen backend is not built in, or has no usable device.
    Backend(BackendError),
    /// The private result is farther from the plaintext reference than the stated bound.
    Disagrees {
        /// Worst `|Δlogit|` seen.
        worst: f64,
        /// The bound.
        bound: f64,
    },
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Model(e) => write!(f, "model: {e}"),
            CliError::Session(e) => write!(f, "session: {e}"),
            CliError::Reference(e) => write!(f, "plaintext reference: {e}"),
            CliError::Io { what, source } => write!(f, "{what}: {source}"),
            CliError::Connect { addr, source } => write!(f, "connect to {addr}: {source}"),
            CliError::Usage(s) => write!(f, "{s}"),
            CliError::Json(e) => write!(f, "JSON: {e}"),
            CliError::Server(s) => write!(f, "server: {s}"),
            CliError::Vision(e) => write!(f, "private CNN inference: {e}"),
            CliError::Backend(e) => write!(f, "{e}"),
            CliError::Disagrees { worst, bound } => write!(
                f,
                "the private logits differ from the plaintext reference by {worst:.4} (bound {bound})"
            ),
        }
    }
}

impl std::error::Error for CliError {}

impl From<ModelError> for CliError {
    fn from(e: ModelError) -> Self {
        CliError::Model(e)
    }
}

impl From<BackendError> for CliError {
    fn from(e: BackendError) -> Self {
        CliError::Backend(e)
    }
}

impl From<SessionError> for CliError {
    fn from(e: SessionError) -> Self {
        CliError::Session(e)
    }
}

/// `dir`, or the default model's directory (fetched once into the cache) without one.
pub fn model_dir(dir: Option<&PathBuf>) -> Result<PathBuf, CliError> {
    Ok(match dir {
        Some(d) => d.clone(),
        None => model::fetch::default_model_dir()?,
    })
}

/// Loads the whole checkpoint `dir` (the server's: the encoder and the head, from `head` if
/// given), or the default model without one.
pub fn load_model(dir: Option<&PathBuf>, head: Option<&PathBuf>) -> Result<Model, CliError> {
    Ok(model::load_dir_with_head(
        &model_dir(dir)?,
        head.map(|h| h.as_path()),
    )?)
}

/// Loads the client's part of `dir` (the architecture, the tokenizer and the embedding table;
/// never the encoder's weights or the head), or of the default model without one.
/// `classes`: the served head's output count, by default the directory's `veil-head.json`'s,
/// else 2 (the sentiment head).
pub fn load_client(dir: Option<&PathBuf>, classes: Option<usize>) -> Result<ClientModel, CliError> {
    let dir = model_dir(dir)?;
    let classes = match classes {
        Some(c) => c,
        None => model::head_classes(&dir)?.unwrap_or(2),
    };
    Ok(model::load_client(&dir, classes)?)
}

/// The first `k` layers of `w` with its head (for quick runs; `k = 0` or `k ≥ layers`: all).
pub fn prefix(w: &EncoderWeights, k: usize) -> EncoderWeights {
    if k == 0 || k >= w.layers.len() {
        return w.clone();
    }
    EncoderWeights {
        cfg: EncoderConfig { layers: k, ..w.cfg },
        layers: w.layers[..k].to_vec(),
        head: w.head.clone(),
    }
}

/// The client's input for `text`: its token ids embedded with the published table and padded to
/// the smallest supported length. Returns `(x, valid)`.
pub fn encode_text(
    tokenizer: &model::Tokenizer,
    embeddings: &veil_core::bert::Embeddings,
    text: &str,
) -> Result<(Mat, usize), CliError> {
    let max = *SEQ_LENS.last().unwrap_or(&128);
    let ids = model::tokenize(tokenizer, text, max)?;
    let valid = ids.len();
    let padded = SEQ_LENS
        .iter()
        .copied()
        .find(|&s| s >= valid)
        .unwrap_or(max);
    let x = embeddings
        .embed(&ids, padded)
        .map_err(CliError::Reference)?;
    Ok((x, valid))
}

/// The plaintext reference's logits of the padded input.
pub fn plaintext_logits(w: &EncoderWeights, x: &Mat, valid: usize) -> Result<Vec<f64>, CliError> {
    veil_core::bert::reference::logits(w, x, valid).map_err(CliError::Reference)
}

/// The backend options of the private-inference commands.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct BackendArgs {
    /// The backend the evaluation runs on: cpu, wgpu (a build with `--features wgpu`; Mesa's
    /// lavapipe without a GPU, with CUBECL_WGPU_DEFAULT_DEVICE=Cpu) or cuda (a build with
    /// `--features cuda`, an NVIDIA GPU and its driver). A backend that is not built in or has no
    /// device is an error, never a fallback to the CPU.
    #[arg(long, default_value = "cpu")]
    pub backend: BackendKind,
    /// The device: the CUDA ordinal, or wgpu's N-th discrete GPU; default: the backend's own
    /// choice (VEIL_CUDA_DEVICE or 0; the adapter wgpu picks).
    #[arg(long)]
    pub device: Option<usize>,
    /// CKKS worker threads of the CPU backend (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

impl BackendArgs {
    /// The choice.
    pub fn choice(&self) -> BackendChoice {
        BackendChoice {
            kind: self.backend,
            device: self.device,
            threads: self.threads,
        }
    }
}

/// A listener on `addr`, and the address it took (a port 0 resolved), for the server's first
/// line.
pub fn listen(addr: &str) -> Result<(std::net::TcpListener, String), CliError> {
    let listener = std::net::TcpListener::bind(addr).map_err(|source| CliError::Io {
        what: format!("listen on {addr}"),
        source,
    })?;
    let local = listener
        .local_addr()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| addr.to_string());
    Ok((listener, local))
}

/// The BERT server's accept loop ([`serve`]) on the chosen backend, in a thread of its own.
pub struct BertServer {
    /// Where clients connect.
    pub listener: std::net::TcpListener,
    /// The served model.
    pub weights: Arc<EncoderWeights>,
    /// The accept loop's settings.
    pub opts: ServeOptions,
}

impl OnBackend for BertServer {
    type Output = Result<JoinHandle<ServeSummary>, CliError>;
    fn run<B: PolyBackend>(self, _label: &str, factory: Factory<B>) -> Self::Output {
        let cache = Arc::new(cache_of(factory));
        let BertServer {
            listener,
            weights,
            opts,
        } = self;
        std::thread::Builder::new()
            .name("veil-server".into())
            .spawn(move || serve(listener, weights, cache, opts))
            .map_err(|source| CliError::Io {
                what: "start the server thread".into(),
                source,
            })
    }
}

/// A CKKS context cache whose backends `factory` builds.
pub fn cache_of<B: PolyBackend>(factory: Factory<B>) -> CkksCache<B> {
    CkksCache::new(move |p| factory(p))
}

/// A CKKS context cache on the CPU with `threads` workers (0: all cores): the client's small
/// work (encoding, encryption, decryption) where the server's evaluation runs elsewhere.
pub fn cpu_cache(threads: usize) -> Arc<CkksCache<veil_backend_cpu::CpuBackend>> {
    let threads = veil_host::backend::cpu_threads(threads);
    Arc::new(CkksCache::new(move |p| {
        veil_backend_cpu::CpuBackend::fast(p, threads).map_err(|e| e.to_string())
    }))
}

/// The parameter set a BERT session of `cfg` uses (the backends are probed with it).
pub fn bert_probe_params(cfg: &EncoderConfig) -> Result<veil_core::CkksParams, CliError> {
    veil_host::bert::session_params(cfg, SEQ_LENS[0]).map_err(CliError::Reference)
}

/// A transport configuration with a receive timeout of `secs`.
pub fn transport(secs: u64) -> TransportConfig {
    TransportConfig {
        timeout: Duration::from_secs(secs.max(1)),
        ..TransportConfig::default()
    }
}

/// `softmax(logits)`.
pub fn softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = logits.iter().map(|v| (v - max).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

pub use veil_host::model::head::argmax;

/// The label of class `i` of a `classes`-way head (the sentiment head's two labels).
pub fn label(classes: usize, i: usize) -> String {
    match (classes, i) {
        (2, 0) => "negative".into(),
        (2, 1) => "positive".into(),
        _ => format!("class {i}"),
    }
}

/// `max_i |a_i − b_i|`.
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// A spinner on standard error naming the block that just finished (hidden when standard error
/// is not a terminal, and under `quiet`).
pub fn spinner(prefix: &str, quiet: bool) -> ProgressBar {
    let pb = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
    };
    pb.set_style(
        ProgressStyle::with_template("{spinner} {prefix} [{elapsed_precise}] {pos} blocks, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_prefix(prefix.to_string());
    pb.set_message("key exchange and base OT");
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// The display name of a block row.
pub fn block_name(r: &BlockRow) -> String {
    if r.cost.layer == usize::MAX {
        r.cost.block.to_string()
    } else {
        format!("L{} {}", r.cost.layer, r.cost.block)
    }
}

/// Updates `pb` after a block.
pub fn tick(pb: &ProgressBar, r: &BlockRow) {
    pb.inc(1);
    pb.set_message(format!("{} done ({:.0} ms)", block_name(r), r.wall_s * 1e3));
}

/// Sums of a table.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// Wall seconds.
    pub wall_s: f64,
    /// Rotations (conjugations included).
    pub rotations: u64,
    /// ct×ct products.
    pub ct_mults: u64,
    /// ct×pt products.
    pub pt_mults: u64,
    /// Rescales.
    pub rescales: u64,
    /// Ciphertexts converted.
    pub converted_cts: u64,
    /// Ciphertext bytes converted.
    pub converted_bytes: u64,
    /// MPC bytes.
    pub mpc_bytes: u64,
    /// Of the MPC bytes, those this party sent.
    pub mpc_bytes_sent: u64,
    /// MPC rounds.
    pub mpc_rounds: u64,
}

impl Totals {
    /// The sums over `rows`.
    pub fn of(rows: &[BlockRow]) -> Totals {
        let mut t = Totals::default();
        for r in rows {
            let c = &r.cost;
            t.wall_s += r.wall_s;
            t.rotations += c.tally.ckks.rotations + c.tally.ckks.conjugations;
            t.ct_mults += c.tally.ckks.ct_mults;
            t.pt_mults += c.tally.ckks.pt_mults;
            t.rescales += c.tally.ckks.rescales;
            t.converted_cts += c.tally.converted_cts as u64;
            t.converted_bytes += c.tally.converted_bytes;
            t.mpc_bytes += c.tally.mpc_bytes;
            t.mpc_bytes_sent += c.tally.mpc_bytes_sent;
            t.mpc_rounds += c.tally.mpc_rounds;
        }
        t
    }

    /// As JSON.
    pub fn json(&self) -> Value {
        json!({
            "wall_ms": self.wall_s * 1e3,
            "rotations": self.rotations,
            "ct_ct": self.ct_mults,
            "ct_pt": self.pt_mults,
            "rescales": self.rescales,
            "converted_cts": self.converted_cts,
            "converted_bytes": self.converted_bytes,
            "mpc_bytes": self.mpc_bytes,
            "mpc_bytes_sent": self.mpc_bytes_sent,
            "mpc_rounds": self.mpc_rounds,
        })
    }
}

const TABLE_HEAD: &str = "  block                 wall ms  server ms    rot  ct×ct  ct×pt  resc  conv cts  conv MB   MPC MB  rounds";

fn table_line(name: &str, t: &Totals, server_s: f64) -> String {
    format!(
        "  {name:<20} {:>9.1} {:>10.1} {:>6} {:>6} {:>6} {:>5} {:>9} {:>8.2} {:>8.2} {:>7}",
        t.wall_s * 1e3,
        server_s * 1e3,
        t.rotations,
        t.ct_mults,
        t.pt_mults,
        t.rescales,
        t.converted_cts,
        t.converted_bytes as f64 / 1e6,
        t.mpc_bytes as f64 / 1e6,
        t.mpc_rounds
    )
}

fn server_total(r: &ClientResult) -> f64 {
    r.server_blocks.iter().map(|b| b.wall_s).sum()
}

fn server_wall(r: &ClientResult, i: usize) -> f64 {
    r.server_blocks.get(i).map_or(0.0, |b| b.wall_s)
}

/// The per-block table of a private result (rows, then the total) as text: the client's wall
/// time and MPC traffic, the server's wall time and CKKS operations.
pub fn render_table(r: &ClientResult) -> String {
    let mut out = String::new();
    out.push_str(TABLE_HEAD);
    out.push('\n');
    for (i, row) in r.blocks.iter().enumerate() {
        let t = Totals::of(std::slice::from_ref(row));
        out.push_str(&table_line(&block_name(row), &t, server_wall(r, i)));
        out.push('\n');
    }
    out.push_str(&table_line(
        "total",
        &Totals::of(&r.blocks),
        server_total(r),
    ));
    out.push('\n');
    out
}

/// The table's header and one totals line per `(name, result)`.
pub fn render_totals(runs: &[(String, &ClientResult)]) -> String {
    let mut out = String::new();
    out.push_str(TABLE_HEAD);
    out.push('\n');
    for (name, r) in runs {
        out.push_str(&table_line(name, &Totals::of(&r.blocks), server_total(r)));
        out.push('\n');
    }
    out
}

/// The per-block table of a private result as JSON rows.
pub fn table_json(r: &ClientResult) -> Value {
    Value::Array(
        r.blocks
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let mut v = Totals::of(std::slice::from_ref(row)).json();
                v["server_wall_ms"] = json!(server_wall(r, i) * 1e3);
                v["block"] = json!(row.cost.block);
                v["layer"] = if row.cost.layer == usize::MAX {
                    Value::Null
                } else {
                    json!(row.cost.layer)
                };
                v
            })
            .collect(),
    )
}

/// The classification part of a result: label, probabilities, logits.
pub fn classification_json(classes: usize, logits: &[f64]) -> Value {
    let k = argmax(logits);
    json!({
        "label": label(classes, k),
        "class": k,
        "probabilities": softmax(logits),
        "logits": logits,
    })
}

/// A private result as JSON (classification, table, totals, session figures).
pub fn result_json(text: &str, classes: usize, r: &ClientResult) -> Value {
    let mut v = classification_json(classes, &r.logits);
    v["text"] = json!(text);
    v["tokens"] = json!(r.valid);
    v["m"] = json!(r.m);
    v["params"] = json!(r.params);
    v["nonlinear"] = json!(describe_blocks(&r.nonlinear));
    v["fhe_blocks"] = Value::Array(
        r.fhe_blocks
            .iter()
            .map(|&(b, li, qi, lo, qo)| {
                json!({"block": b, "level_in": li, "log_q_in": qi, "level_out": lo, "log_q_out": qo})
            })
            .collect(),
    );
    v["gelu_split"] = json!(r.nonlinear.split());
    v["blocks"] = table_json(r);
    v["totals"] = Totals::of(&r.blocks).json();
    v["totals"]["server_wall_ms"] = json!(server_total(r) * 1e3);
    v["key_exchange"] = json!({
        "public_key_bytes": r.key_exchange.public_key_bytes,
        "evaluation_key_bytes": r.key_exchange.evaluation_key_bytes,
        "galois_keys": r.key_exchange.galois_keys,
        "seconds": r.key_exchange.seconds,
    });
    v["setup_s"] = json!(r.setup_s);
    v["run_s"] = json!(r.run_s);
    v["total_s"] = json!(r.total_s);
    v
}

/// The classification as text lines.
pub fn render_classification(classes: usize, logits: &[f64]) -> String {
    let k = argmax(logits);
    let p = softmax(logits);
    let probs: Vec<String> = (0..logits.len())
        .map(|i| format!("{} {:.4}", label(classes, i), p[i]))
        .collect();
    let lg: Vec<String> = logits.iter().map(|v| format!("{v:+.4}")).collect();
    format!(
        "  label: {}\n  probabilities: {}\n  logits: [{}]\n",
        label(classes, k),
        probs.join(", "),
        lg.join(", ")
    )
}

/// A private result's session line (tokens, parameters, keys, times).
pub fn render_session(r: &ClientResult) -> String {
    let fhe: Vec<String> = r
        .fhe_blocks
        .iter()
        .map(|&(b, li, qi, lo, qo)| format!("{b} level {li} (log Q {qi:.0}) → {lo} ({qo:.0})"))
        .collect();
    format!(
        "  CKKS per FHE block (M2C at the block's depth, C2M trimmed): {}\n{}",
        fhe.join("; "),
        render_keys(r)
    )
}

fn render_keys(r: &ClientResult) -> String {
    format!(
        "  {} tokens (m = {}), {}; {}; keys {:.1} MB ({} Galois keys) in {:.2} s, base OT \
         {:.2} s, inference {:.2} s, total {:.2} s\n",
        r.valid,
        r.m,
        r.params,
        describe_blocks(&r.nonlinear),
        (r.key_exchange.public_key_bytes + r.key_exchange.evaluation_key_bytes) as f64 / 1e6,
        r.key_exchange.galois_keys,
        r.key_exchange.seconds,
        r.setup_s,
        r.run_s,
        r.total_s
    )
}

/// Prints JSON with a typed error.
pub fn print_json(v: &Value) -> Result<(), CliError> {
    println!(
        "{}",
        serde_json::to_string_pretty(v).map_err(CliError::Json)?
    );
    Ok(())
}
