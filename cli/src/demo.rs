//! `veil demo`: private inference end to end on loopback. It starts `veil serve`'s accept loop
//! on `127.0.0.1:0` in a thread, connects a client over real TCP, classifies built-in sentences
//! privately, and prints each result beside the plaintext reference's, then the cost tables.

use crate::common::{
    argmax, bert_probe_params, cpu_cache, encode_text, label, load_model, max_abs_diff,
    plaintext_logits, prefix, print_json, render_session, render_table, render_totals, result_json,
    spinner, tick, transport, BackendArgs, BertServer, CliError,
};
use serde_json::json;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use veil_host::bert::{run_client, ClientResult, ServeOptions, SessionOptions};
use veil_host::transport::TcpTransport;

/// The demo's sentences (the first `--sentences` are used).
pub const SENTENCES: [&str; 3] = [
    "The food was wonderful and the staff were friendly.",
    "This phone broke after two days, a complete waste of money.",
    "The plot was predictable but the acting saved it.",
];

/// Options of `veil demo`.
#[derive(Clone, Debug, clap::Args)]
pub struct DemoArgs {
    /// Run only the first K layers (the head on their output) for a quick run; 0: all.
    #[arg(long, default_value_t = 0)]
    pub layers: usize,
    /// How many of the built-in sentences to classify (1 to 3).
    #[arg(long, default_value_t = 3)]
    pub sentences: usize,
    /// A BERT checkpoint directory; default: all-MiniLM-L6-v2 with the sentiment head.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Receive timeout of every session step, seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// The backend of the server's evaluation (the client encrypts and decrypts on the CPU).
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// Runs the demo.
pub fn run(a: &DemoArgs) -> Result<(), CliError> {
    if !(1..=SENTENCES.len()).contains(&a.sentences) {
        return Err(CliError::Usage(format!(
            "--sentences must be 1 to {}",
            SENTENCES.len()
        )));
    }
    let model = load_model(a.model.as_ref(), None)?;
    let weights = prefix(&model.weights, a.layers);
    let cfg = weights.cfg;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|source| CliError::Io {
        what: "listen on 127.0.0.1:0".into(),
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| CliError::Io {
        what: "read the listening address".into(),
        source,
    })?;
    let choice = a.backend.choice();
    if !a.json {
        println!(
            "veil demo: {} ({} of {} layers, hidden {}, {} heads), server on {addr} ({}), {} sentence(s)",
            model.dir.display(),
            cfg.layers,
            model.weights.cfg.layers,
            cfg.hidden,
            cfg.heads,
            choice.label(),
            a.sentences
        );
    }
    let opts = ServeOptions {
        transport: transport(a.timeout),
        max_clients: 1,
        max_connections: Some(a.sentences as u64),
        quiet: true,
        ..ServeOptions::default()
    };
    let server = choice.dispatch(
        &bert_probe_params(&cfg)?,
        BertServer {
            listener,
            weights: Arc::new(weights.clone()),
            opts,
        },
    )??;

    let cache = cpu_cache(a.backend.threads);
    let mut runs: Vec<(String, ClientResult, Vec<f64>)> = Vec::new();
    let mut failure = None;
    for (i, text) in SENTENCES.iter().take(a.sentences).enumerate() {
        let res = (|| {
            let (x, valid) = encode_text(&model.tokenizer, &model.embeddings, text)?;
            let plain = plaintext_logits(&weights, &x, valid)?;
            let mut t = TcpTransport::connect(addr, transport(a.timeout)).map_err(|source| {
                CliError::Connect {
                    addr: addr.to_string(),
                    source,
                }
            })?;
            let pb = spinner(&format!("sentence {}/{}", i + 1, a.sentences), a.json);
            let r = run_client(
                &mut t,
                &cache,
                &cfg,
                &x,
                valid,
                &SessionOptions::default(),
                &mut |row| tick(&pb, row),
            );
            pb.finish_and_clear();
            Ok::<_, CliError>((r?, plain))
        })();
        match res {
            Ok((r, plain)) => {
                if !a.json {
                    print_beside(i, text, cfg.classes, &r, &plain);
                }
                runs.push((text.to_string(), r, plain));
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failure {
        // The server waits for the connections the demo will not make: leave it.
        return Err(e);
    }
    let summary = server
        .join()
        .map_err(|_| CliError::Server("the server thread panicked".into()))?;
    if summary.failed > 0 {
        return Err(CliError::Server(format!(
            "{} of {} sessions failed at the server",
            summary.failed, summary.connections
        )));
    }
    if a.json {
        let v: Vec<_> = runs
            .iter()
            .map(|(text, r, plain)| {
                let mut v = result_json(text, cfg.classes, r);
                v["plaintext"] = crate::common::classification_json(cfg.classes, plain);
                v["max_abs_logit_diff"] = json!(max_abs_diff(&r.logits, plain));
                v["labels_agree"] = json!(argmax(&r.logits) == argmax(plain));
                v
            })
            .collect();
        return print_json(&json!({ "layers": cfg.layers, "results": v }));
    }
    if let Some((_, r, _)) = runs.first() {
        println!(
            "\ncost per block (sentence 1): wall time and MPC traffic as the client saw them, \
             the server's wall time and CKKS operations"
        );
        print!("{}", render_table(r));
    }
    let totals: Vec<(String, &ClientResult)> = runs
        .iter()
        .enumerate()
        .map(|(i, (_, r, _))| (format!("sentence {}", i + 1), r))
        .collect();
    println!("\ntotals:");
    print!("{}", render_totals(&totals));
    let worst = runs
        .iter()
        .map(|(_, r, p)| max_abs_diff(&r.logits, p))
        .fold(0.0, f64::max);
    let agree = runs
        .iter()
        .filter(|(_, r, p)| argmax(&r.logits) == argmax(p))
        .count();
    println!(
        "\n{agree}/{} labels agree with the plaintext reference; worst |Δlogit| {worst:.4} (bound {LOGIT_BOUND})",
        runs.len()
    );
    if worst > LOGIT_BOUND {
        return Err(CliError::Disagrees {
            worst,
            bound: LOGIT_BOUND,
        });
    }
    Ok(())
}

/// The demo fails when a private logit is farther than this from the plaintext model's: the
/// fixed-point blocks (softmax ≤ 10⁻³, LayerNorm and GELU ≤ 7·10⁻⁴ per element), the conversions
/// (≤ ½ ulp + 2⁻⁴ at 2⁻¹³) and CKKS noise give about 0.03 after six MiniLM layers.
pub const LOGIT_BOUND: f64 = 0.1;

fn print_beside(i: usize, text: &str, classes: usize, r: &ClientResult, plain: &[f64]) {
    let fmt = |l: &[f64]| {
        let v: Vec<String> = l.iter().map(|x| format!("{x:+.4}")).collect();
        format!("[{}]", v.join(", "))
    };
    let (kp, kq) = (argmax(&r.logits), argmax(plain));
    println!("\n{}. {text:?}", i + 1);
    println!(
        "  private:   {:<9} logits {}",
        label(classes, kp),
        fmt(&r.logits)
    );
    println!(
        "  plaintext: {:<9} logits {}",
        label(classes, kq),
        fmt(plain)
    );
    println!(
        "  max |Δlogit| {:.4}{}",
        max_abs_diff(&r.logits, plain),
        if kp == kq { "" } else { "  (labels differ)" }
    );
    print!("{}", render_session(r));
}
