//! `veil infer-image`: private CNN inference of images between a client and a server over TCP
//! loopback, each prediction beside the plaintext model's, with the server's per-layer cost
//! table: FEnc2's packing with quadratic activations (FHE-only mode), or a ReLU network with its
//! ReLUs in MPC (hybrid mode). With `--server ADDR` it runs the client alone against
//! `veil serve --cnn` ([`run_serve_cnn`]), and reports what the client sees.

use crate::common::{listen, print_json, transport, BackendArgs, CliError};
use crate::infer::ServeArgs;
use serde_json::json;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;
use veil_core::ckks::Ckks;
use veil_core::PolyBackend;
use veil_host::backend::{Factory, OnBackend};
use veil_host::cnn;
use veil_host::model::{cnn as cnn_model, images};

/// Options of `veil infer-image`.
#[derive(Clone, Debug, clap::Args)]
pub struct InferImageArgs {
    /// The model: `lenet` (Orion's LeNet with trained quadratic activations, built in; with
    /// `--mode hybrid`, the same LeNet trained with ReLU), `lenet-relu` (ReLU), or a
    /// `.safetensors` file of the same architecture.
    #[arg(long, default_value = "lenet")]
    pub model: String,
    /// `fhe` (polynomial activations under CKKS alone), `hybrid` (linear layers under CKKS, each
    /// ReLU exact in two-party MPC), or `auto`: `hybrid` for a model with ReLU, `fhe` otherwise.
    #[arg(long, default_value = "auto")]
    pub mode: String,
    /// The hybrid mode's oblivious transfer: `silent` (Ferret) or `iknp`.
    #[arg(long, default_value = "silent")]
    pub ot: String,
    /// Images: `mnist-test` (the built-in MNIST test set), an IDX file (`idx3-ubyte`, raw or
    /// gzip), a CIFAR-10 binary batch (`.bin`), or PNG files (`a.png,b.png`, one shape; MNIST
    /// models expect white digits on black, 28 × 28 gray).
    #[arg(long, default_value = "mnist-test")]
    pub images: String,
    /// Labels for accuracy: IDX `idx1-ubyte`, `mnist-test`, a CIFAR-10 `.bin`, or `none`. The
    /// default `auto` takes them from `mnist-test` or a CIFAR batch, and skips them otherwise.
    #[arg(long, default_value = "auto")]
    pub labels: String,
    /// How many images, from the first. Default: all the images of a file (or of the PNG list);
    /// 16 of the built-in `mnist-test` (10,000 images), a quick demonstration.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Images per ciphertext batch (a power of two; default: the image count rounded up, from 16
    /// to 256). 8192 fills N = 2^14 and runs pixel-wise, the fastest per image.
    #[arg(long)]
    pub batch: Option<usize>,
    /// FEnc2's block size S (a power of two; default: the planner's choice).
    #[arg(long)]
    pub block: Option<usize>,
    /// Only the plaintext model (f64), locally.
    #[arg(long)]
    pub plaintext: bool,
    /// Run only the client, against the `veil serve --cnn` server at this address (which must
    /// serve the same architecture as `--model`; the plaintext column comes from the local
    /// model file). Without it, client and server run here over TCP loopback.
    #[arg(long, value_name = "ADDR", conflicts_with = "plaintext")]
    pub server: Option<String>,
    /// With `--server`: the receive timeout of every step, seconds (the key transfer and each
    /// batch's evaluation at the server must fit).
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// With `--server`: how long to keep trying to connect, seconds (a line on stderr says when
    /// it retries; then it fails with the OS's reason, e.g. "Connection refused").
    #[arg(long, default_value_t = veil_host::transport::DEFAULT_CONNECT_TIMEOUT.as_secs())]
    pub connect_timeout: u64,
    /// The backend: of the server's evaluation (loopback; the client's work runs on it too), or,
    /// with `--server`, of the client's CKKS work.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// One JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Images `--limit` takes from the built-in `mnist-test` when it is not given: a quick
/// demonstration, not the 10,000 of the whole test set.
const MNIST_TEST_DEFAULT_LIMIT: usize = 16;

/// How many of the `count` images of `--images spec` to run: `--limit` when given (at least 1),
/// else [`MNIST_TEST_DEFAULT_LIMIT`] of the built-in `mnist-test`, else all of them (a file the
/// user named means its images, all of them).
fn image_limit(spec: &str, limit: Option<usize>, count: usize) -> Result<usize, CliError> {
    match limit {
        Some(0) => Err(CliError::Usage("--limit must be at least 1".into())),
        Some(n) => Ok(n.min(count)),
        None if spec == "mnist-test" => Ok(MNIST_TEST_DEFAULT_LIMIT.min(count)),
        None => Ok(count),
    }
}

/// Runs `veil infer-image`.
pub fn run(a: &InferImageArgs) -> Result<(), CliError> {
    let model = match (a.mode.as_str(), a.model.as_str()) {
        ("hybrid", "lenet") => "lenet-relu",
        ("fhe" | "hybrid" | "auto", m) => m,
        (m, _) => {
            return Err(CliError::Usage(format!(
                "--mode {m}: expected fhe, hybrid or auto"
            )))
        }
    };
    let net = cnn_model::load(model).map_err(CliError::Model)?;
    let has_relu = net
        .layers
        .iter()
        .any(|l| matches!(l, veil_core::cnn::Layer::Relu));
    let hybrid = match a.mode.as_str() {
        "hybrid" => true,
        "fhe" if has_relu => {
            return Err(CliError::Usage(format!(
                "{} has ReLU activations, which are exact only in MPC: use --mode hybrid",
                net.name
            )))
        }
        "fhe" => false,
        _ => has_relu,
    };
    let silent = match a.ot.as_str() {
        "silent" => true,
        "iknp" => false,
        o => {
            return Err(CliError::Usage(format!(
                "--ot {o}: expected silent or iknp"
            )))
        }
    };
    let all = images::read_images(&a.images).map_err(CliError::Model)?;
    all.check_shape(net.channels, net.side)
        .map_err(CliError::Model)?;
    let imgs = all.take(image_limit(&a.images, a.limit, all.count)?);
    let label_spec = match a.labels.as_str() {
        "auto" if a.images == "mnist-test" || a.images.to_ascii_lowercase().ends_with(".bin") => {
            a.images.as_str()
        }
        "auto" => "none",
        other => other,
    };
    let labels = if label_spec == "none" {
        None
    } else {
        let l = images::read_labels(label_spec).map_err(CliError::Model)?;
        if l.len() < imgs.count {
            return Err(CliError::Usage(format!(
                "{} labels for {} images",
                l.len(),
                imgs.count
            )));
        }
        Some(l[..imgs.count].to_vec())
    };
    let x: Vec<f64> = (0..imgs.count).flat_map(|i| imgs.unit(i)).collect();
    let plain = net.reference(&x, imgs.count).map_err(CliError::Reference)?;
    let classes = net.classes();
    let plain_pred: Vec<usize> = plain.chunks(classes).map(veil_host::cnn::argmax).collect();
    let acc = |pred: &[usize]| accuracy(labels.as_deref(), pred);
    if a.plaintext {
        if a.json {
            return print_json(&json!({
                "model": net.name, "mode": "plaintext", "images": imgs.count,
                "predictions": plain_pred, "accuracy": acc(&plain_pred),
            }));
        }
        println!("{} on {} images (plaintext f64)", net.name, imgs.count);
        if imgs.count <= 32 {
            println!("predictions {plain_pred:?}");
        }
        if let Some(v) = acc(&plain_pred) {
            println!("accuracy {:.2} %", 100.0 * v);
        }
        return Ok(());
    }
    let batch = match a.batch {
        Some(b) if b.is_power_of_two() => b,
        Some(b) => {
            return Err(CliError::Usage(format!(
                "--batch {b} is not a power of two"
            )))
        }
        // At least 16: below that the Galois keys of the blocked layout outgrow a frame.
        None => imgs.count.next_power_of_two().clamp(16, 256),
    };
    let p = veil_core::cnn::batch_params(batch)
        .validate()
        .map_err(CliError::Reference)?;
    let choice = a.backend.choice();
    let base = ImageRun {
        a,
        net: &net,
        imgs: &imgs,
        labels: labels.as_deref(),
        plain: &plain,
        plain_pred: &plain_pred,
        batch,
        params: &p,
    };
    if let Some(addr) = &a.server {
        let r = RemoteCli {
            base,
            addr,
            mode: if hybrid {
                cnn::serve::Mode::Hybrid { silent }
            } else {
                cnn::serve::Mode::Fhe
            },
        };
        return choice.dispatch(&p, ImageJob::Remote(r))?;
    }
    if !a.json && !hybrid {
        println!(
            "{}: {} images, batch {batch}, CKKS {} (N = 2^{}), client and server over TCP loopback",
            net.name,
            imgs.count,
            p.name(),
            p.log_n()
        );
    }
    if hybrid {
        return choice.dispatch(&p, ImageJob::Hybrid(HybridCli { base, silent }))?;
    }
    choice.dispatch(&p, ImageJob::Fhe(FheCli(base)))?
}

/// What every `veil infer-image` run works on and reports against: the arguments, the model,
/// the images, their labels and the plaintext model's answers, the batch and its parameter set.
struct ImageRun<'a> {
    a: &'a InferImageArgs,
    net: &'a veil_core::cnn::Network,
    imgs: &'a images::Images,
    labels: Option<&'a [u8]>,
    plain: &'a [f64],
    plain_pred: &'a [usize],
    batch: usize,
    params: &'a veil_core::params::CkksParams,
}

/// The private predictions beside the plaintext model's.
struct Comparison {
    /// The private predictions.
    pred: Vec<usize>,
    /// How many equal the plaintext model's.
    agree: usize,
    /// The worst logit error against the plaintext model.
    worst: f64,
}

impl ImageRun<'_> {
    /// The private `logits` (one row per image) against the plaintext model's.
    fn compare(&self, logits: &[Vec<f64>]) -> Comparison {
        let pred = cnn::hybrid::predictions(logits);
        let (agree, worst) = agreement(&pred, self.plain_pred, logits, self.plain);
        Comparison { pred, agree, worst }
    }

    /// The JSON fields of every private run: the model, the images, the batch, its block and
    /// parameter set, and `c` with the accuracies.
    fn comparison_json(&self, c: &Comparison, block: usize) -> serde_json::Value {
        json!({
            "model": self.net.name, "images": self.imgs.count, "batch": self.batch,
            "block": block, "params": self.params.name(),
            "predictions": c.pred, "plaintext_predictions": self.plain_pred,
            "agreement": c.agree as f64 / self.imgs.count as f64,
            "accuracy": accuracy(self.labels, &c.pred),
            "plaintext_accuracy": accuracy(self.labels, self.plain_pred),
            "worst_logit_error": c.worst,
        })
    }

    /// Prints [`Self::comparison_json`] with the mode's own fields `more`.
    fn print_json(
        &self,
        c: &Comparison,
        block: usize,
        more: serde_json::Value,
    ) -> Result<(), CliError> {
        print_json(&merged(self.comparison_json(c, block), more))
    }

    /// Prints `c` ([`print_comparison`]).
    fn print_comparison(&self, c: &Comparison) {
        print_comparison(&c.pred, self.plain_pred, self.labels, c.worst);
    }
}

/// `base`'s fields and `more`'s (JSON objects; `more`'s value wins a shared key).
fn merged(mut base: serde_json::Value, more: serde_json::Value) -> serde_json::Value {
    if let (Some(b), serde_json::Value::Object(m)) = (base.as_object_mut(), more) {
        b.extend(m);
    }
    base
}

/// The keys a client sent, as a report's line on them opens: `block S = …, … Galois keys
/// (… MB with the public key)` in the FHE-only mode, `(… MB of keys)` in the hybrid one.
trait KeysHead {
    /// That opening, for block size `block`.
    fn keys_head(&self, block: usize) -> String;
}

impl KeysHead for cnn::ClientOutcome {
    fn keys_head(&self, block: usize) -> String {
        keys_head(
            block,
            self.galois_keys,
            self.key_bytes,
            "with the public key",
        )
    }
}

impl KeysHead for cnn::hybrid::HybridOutcome {
    fn keys_head(&self, block: usize) -> String {
        keys_head(block, self.galois_keys, self.key_bytes, "of keys")
    }
}

/// `block S = {block}, {galois_keys} Galois keys ({key_bytes} in MB {what})`.
fn keys_head(block: usize, galois_keys: usize, key_bytes: u64, what: &str) -> String {
    format!(
        "block S = {block}, {galois_keys} Galois keys ({:.1} MB {what})",
        key_bytes as f64 / 1e6
    )
}

/// The FHE-only mode's loopback run and report.
struct FheCli<'a>(ImageRun<'a>);

/// The hybrid mode's run and report.
struct HybridCli<'a> {
    base: ImageRun<'a>,
    silent: bool,
}

/// The client alone against a `veil serve --cnn` server, and its report.
struct RemoteCli<'a> {
    base: ImageRun<'a>,
    addr: &'a str,
    mode: cnn::serve::Mode,
}

macro_rules! image_run_deref {
    ($($t:ident),*) => {$(
        impl<'a> std::ops::Deref for $t<'a> {
            type Target = ImageRun<'a>;
            fn deref(&self) -> &ImageRun<'a> {
                self.base()
            }
        }
    )*};
}

impl<'a> FheCli<'a> {
    fn base(&self) -> &ImageRun<'a> {
        &self.0
    }
}

impl<'a> HybridCli<'a> {
    fn base(&self) -> &ImageRun<'a> {
        &self.base
    }
}

impl<'a> RemoteCli<'a> {
    fn base(&self) -> &ImageRun<'a> {
        &self.base
    }
}

image_run_deref!(FheCli, HybridCli, RemoteCli);

impl FheCli<'_> {
    fn run<B: PolyBackend>(&self, ck: &Ckks<B>) -> Result<(), CliError> {
        let (a, imgs, batch) = (self.a, self.imgs, self.batch);
        let t0 = Instant::now();
        let json_mode = a.json;
        let run = cnn::run_loopback(ck, self.net, imgs, batch, a.block, |b, c| {
            if !json_mode && b == 0 {
                eprintln!(
                    "  server batch 1: {:<14} done ({} → {} ciphertexts)",
                    c.name, c.cts_in, c.cts_out
                );
            }
        })
        .map_err(CliError::Vision)?;
        let wall = t0.elapsed().as_secs_f64();
        let cmp = self.compare(&run.client.logits);
        let eval: f64 = run.batches.iter().map(|b| b.eval_s).sum();
        let back: u64 = run.batches.iter().map(|b| b.bytes_back).sum();
        let sanitize_s: f64 = run.batches.iter().map(|b| b.sanitize_s).sum();
        let peak = cnn::peak_rss_bytes();
        let layers: Vec<serde_json::Value> = run.batches[0]
            .layers
            .iter()
            .map(|(c, s)| {
                json!({
                    "layer": c.name, "cts_in": c.cts_in, "cts_out": c.cts_out,
                    "rotations": c.ops.rotations, "relins": c.ops.relins,
                    "pt_mults": c.ops.pt_mults, "const_mults": c.ops.const_mults,
                    "utilization": if c.utilization.is_finite() { Some(c.utilization) } else { None },
                    "seconds": s,
                })
            })
            .collect();
        if a.json {
            return self.print_json(
                &cmp,
                run.block,
                json!({
                    "mode": "fhe",
                    "server_eval_s": eval, "seconds_per_image": eval / imgs.count as f64,
                    "sanitize_s": sanitize_s,
                    "wall_s": wall, "keys_s": run.client.keys_s,
                    "encrypt_s": run.client.encrypt_s, "decrypt_s": run.client.decrypt_s,
                    "galois_keys": run.client.galois_keys, "key_bytes": run.client.key_bytes,
                    "bytes_up": run.client.ct_bytes, "bytes_down": back,
                    "peak_rss_bytes": peak, "layers_batch1": layers,
                }),
            );
        }
        self.print_comparison(&cmp);
        println!(
            "{}, up {:.1} MB, down {:.1} MB",
            run.client.keys_head(run.block),
            run.client.ct_bytes as f64 / 1e6,
            back as f64 / 1e6
        );
        println!(
            "server {eval:.2} s ({:.3} s per image) + sanitize {sanitize_s:.3} s, keys {:.1} s, encrypt {:.2} s, decrypt {:.2} s, wall {wall:.1} s, peak RSS {}",
            eval / imgs.count as f64,
            run.client.keys_s,
            run.client.encrypt_s,
            run.client.decrypt_s,
            peak.map_or("?".into(), |b| format!("{:.2} GB", b as f64 / 1e9))
        );
        println!("\nper layer (server, batch 1):");
        println!(
            "{:<14} {:>7} {:>7} {:>6} {:>6} {:>7} {:>8} {:>6} {:>8}",
            "layer", "cts in", "cts out", "rot", "relin", "ptmul", "constMAC", "util", "seconds"
        );
        for (c, s) in &run.batches[0].layers {
            println!(
                "{:<14} {:>7} {:>7} {:>6} {:>6} {:>7} {:>8} {:>6} {:>8.2}",
                c.name,
                c.cts_in,
                c.cts_out,
                c.ops.rotations,
                c.ops.relins,
                c.ops.pt_mults,
                c.ops.const_mults,
                if c.utilization.is_finite() {
                    format!("{:.0}%", 100.0 * c.utilization)
                } else {
                    "-".into()
                },
                s
            );
        }
        Ok(())
    }
}

/// One `veil infer-image` run on the chosen backend: the context for the batch's parameter set,
/// then the mode's run.
enum ImageJob<'a> {
    Fhe(FheCli<'a>),
    Hybrid(HybridCli<'a>),
    Remote(RemoteCli<'a>),
}

impl OnBackend for ImageJob<'_> {
    type Output = Result<(), CliError>;
    fn run<B: PolyBackend>(self, label: &str, factory: Factory<B>) -> Self::Output {
        let params = match &self {
            ImageJob::Fhe(j) => j.base(),
            ImageJob::Hybrid(j) => j.base(),
            ImageJob::Remote(j) => j.base(),
        }
        .params;
        let be =
            factory(params).map_err(|reason| CliError::Server(format!("{label}: {reason}")))?;
        let ck = Ckks::new(std::sync::Arc::new(be));
        match self {
            ImageJob::Fhe(j) => j.run(&ck),
            ImageJob::Hybrid(j) => j.run(&ck),
            ImageJob::Remote(j) => j.run(&ck),
        }
    }
}

/// The share of `pred` equal to `labels` (`None` without labels).
fn accuracy(labels: Option<&[u8]>, pred: &[usize]) -> Option<f64> {
    labels.map(|l| {
        pred.iter()
            .zip(l)
            .filter(|(p, l)| **p == **l as usize)
            .count() as f64
            / pred.len() as f64
    })
}

/// How many private predictions equal the plaintext ones, and the worst logit error.
fn agreement(
    pred: &[usize],
    plain_pred: &[usize],
    logits: &[Vec<f64>],
    plain: &[f64],
) -> (usize, f64) {
    let agree = pred.iter().zip(plain_pred).filter(|(a, b)| a == b).count();
    let worst = logits
        .iter()
        .flatten()
        .zip(plain)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    (agree, worst)
}

/// Each private prediction beside the plaintext one (the first 32), the agreement, the worst
/// logit error and, with labels, both accuracies.
fn print_comparison(pred: &[usize], plain_pred: &[usize], labels: Option<&[u8]>, worst: f64) {
    for (i, (p_, q)) in pred.iter().zip(plain_pred).enumerate().take(32) {
        let l = labels.map_or(String::new(), |l| format!("  label {}", l[i]));
        println!(
            "  image {i:>4}: private {p_}  plaintext {q}{l}{}",
            if p_ == q { "" } else { "  (differs)" }
        );
    }
    if pred.len() > 32 {
        println!("  … {} more", pred.len() - 32);
    }
    let agree = pred.iter().zip(plain_pred).filter(|(a, b)| a == b).count();
    println!(
        "agreement {agree}/{} ; worst |Δlogit| {worst:.2e}",
        pred.len()
    );
    if let (Some(private), Some(plain)) = (accuracy(labels, pred), accuracy(labels, plain_pred)) {
        println!(
            "accuracy private {:.2} %, plaintext {:.2} %",
            100.0 * private,
            100.0 * plain
        );
    }
}

impl HybridCli<'_> {
    fn run<B: PolyBackend>(&self, ck: &Ckks<B>) -> Result<(), CliError> {
        let (a, imgs) = (self.a, self.imgs);
        let batch = self.batch;
        if !a.json {
            println!(
                "{}: {} images, batch {batch}, hybrid mode (ReLU in MPC, {} OT), CKKS {} (N = 2^{}), client and server over TCP loopback",
                self.net.name,
                imgs.count,
                if self.silent { "silent" } else { "IKNP" },
                self.params.name(),
                self.params.log_n()
            );
        }
        let opts = cnn::hybrid::HybridOptions {
            silent_ot: self.silent,
        };
        let json_mode = a.json;
        let t0 = Instant::now();
        let run = cnn::hybrid::run_loopback(ck, self.net, imgs, batch, a.block, &opts, |b, r| {
            if !json_mode && b == 0 {
                eprintln!(
                    "  server batch 1: {:<12} done in {:.2} s",
                    r.cost.name, r.wall_s
                );
            }
        })
        .map_err(CliError::Vision)?;
        let wall = t0.elapsed().as_secs_f64();
        let cmp = self.compare(&run.client.logits);
        let n = imgs.count as f64;
        let peak = cnn::peak_rss_bytes();
        let per_image_bytes = run.server.mpc_bytes as f64 / n;
        let steps: Vec<serde_json::Value> = run
            .server
            .steps
            .iter()
            .map(|r| {
                let c = &r.cost;
                json!({
                    "step": c.name,
                    "const_mults": c.layer.as_ref().map(|l| l.ops.const_mults),
                    "rotations": c.layer.as_ref().map(|l| l.ops.rotations),
                    "pt_mults": c.layer.as_ref().map(|l| l.ops.pt_mults),
                    "converted_cts": c.tally.converted_cts, "converted_bytes": c.tally.converted_bytes,
                    "mpc_bytes": c.tally.mpc_bytes, "mpc_rounds": c.tally.mpc_rounds, "seconds": r.wall_s,
                })
            })
            .collect();
        if a.json {
            return self.print_json(&cmp, run.block, json!({
                "mode": "hybrid", "ot": if self.silent { "silent" } else { "iknp" },
                "run_s": run.server.run_s, "seconds_per_image": run.server.run_s / n,
                "wall_s": wall, "keys_s": run.client.keys_s, "setup_s": run.client.setup_s,
                "galois_keys": run.client.galois_keys, "key_bytes": run.client.key_bytes,
                "mpc_bytes": run.server.mpc_bytes, "mpc_bytes_per_image": per_image_bytes,
                "converted_bytes": run.server.converted_bytes,
                "relus_batch1": run.relus, "conversions_per_batch": [run.conversions.0, run.conversions.1],
                "peak_rss_bytes": peak, "steps_batch1": steps,
            }));
        }
        self.print_comparison(&cmp);
        println!(
            "{}, {} ReLUs and {} + {} conversions (M2C + complex C2M) in batch 1",
            run.client.keys_head(run.block),
            run.relus,
            run.conversions.0,
            run.conversions.1
        );
        println!(
            "run {:.2} s ({:.3} s per image), {:.1} MB on the wire ({:.2} MB per image, {:.1} MB of it converted ciphertexts), keys {:.1} s, OT setup {:.1} s, wall {wall:.1} s, peak RSS {}",
            run.server.run_s,
            run.server.run_s / n,
            run.server.mpc_bytes as f64 / 1e6,
            per_image_bytes / 1e6,
            run.server.converted_bytes as f64 / 1e6,
            run.client.keys_s,
            run.client.setup_s,
            peak.map_or("?".into(), |b| format!("{:.2} GB", b as f64 / 1e9))
        );
        println!("\nper step (server, batch 1):");
        println!(
            "{:<12} {:>9} {:>6} {:>7} {:>10} {:>10} {:>6} {:>8}",
            "step", "constMAC", "rot", "conv", "conv MB", "wire MB", "rounds", "seconds"
        );
        for r in &run.server.steps {
            let c = &r.cost;
            let (mac, rot) = c.layer.as_ref().map_or(("-".into(), "-".into()), |l| {
                (l.ops.const_mults.to_string(), l.ops.rotations.to_string())
            });
            println!(
                "{:<12} {:>9} {:>6} {:>7} {:>10.1} {:>10.1} {:>6} {:>8.2}",
                c.name,
                mac,
                rot,
                c.tally.converted_cts,
                c.tally.converted_bytes as f64 / 1e6,
                c.tally.mpc_bytes as f64 / 1e6,
                c.tally.mpc_rounds,
                r.wall_s
            );
        }
        Ok(())
    }
}

/// Runs `veil serve --cnn MODEL` (forever): serves the CNN to `veil infer-image --server`
/// clients, one CKKS context per parameter set ([`veil_core::cnn::batch_params`] of each client's batch),
/// shared by the clients that use it.
pub fn run_serve_cnn(a: &ServeArgs, model: &str) -> Result<(), CliError> {
    let net = cnn_model::load(model).map_err(CliError::Model)?;
    net.validate().map_err(CliError::Reference)?;
    let (listener, addr) = listen(&a.listen)?;
    let choice = a.backend.choice();
    let mode = cnn::serve::Mode::of(&net, true);
    eprintln!(
        "veil serve --cnn: {} ({} mode, {}×{}×{} inputs, {} layers, {} classes) on {addr}, \
         at most {} clients at once, backend {}",
        net.name,
        if matches!(mode, cnn::serve::Mode::Fhe) {
            "fhe"
        } else {
            "hybrid"
        },
        net.channels,
        net.side,
        net.side,
        net.layers.len(),
        net.classes(),
        a.max_clients.max(1),
        choice.label()
    );
    eprintln!(
        "veil serve --cnn: a session holds several GB (LeNet: about 9 GB at batch 16, 13 GB in \
         hybrid mode, 18.5 GB at batch 8192); set --max-clients to what memory holds"
    );
    let probe = veil_core::cnn::batch_params(cnn::serve::MIN_BATCH)
        .validate()
        .map_err(CliError::Reference)?;
    let server = CnnServer {
        listener,
        net: Arc::new(net),
        opts: cnn::serve::CnnServeOptions {
            transport: transport(a.timeout),
            max_clients: a.max_clients.max(1),
            max_connections: None,
            quiet: false,
            memory_budget: crate::infer::gb_bytes("--memory-budget", a.memory_budget)?,
            session_memory: crate::infer::gb_bytes("--session-memory", a.session_memory)?,
        },
    };
    choice.dispatch(&probe, server)?;
    Ok(())
}

/// The CNN server's accept loop ([`cnn::serve::serve_cnn`]) on the chosen backend.
struct CnnServer {
    listener: TcpListener,
    net: Arc<veil_core::cnn::Network>,
    opts: cnn::serve::CnnServeOptions,
}

impl OnBackend for CnnServer {
    type Output = ();
    fn run<B: PolyBackend>(self, _label: &str, factory: Factory<B>) {
        cnn::serve::serve_cnn(
            self.listener,
            self.net,
            cnn::serve::cached_cnn_ckks(move |p| factory(p)),
            self.opts,
        );
    }
}

impl RemoteCli<'_> {
    fn run<B: PolyBackend>(&self, ck: &Ckks<B>) -> Result<(), CliError> {
        use cnn::serve::{infer_remote_on, RemoteOutcome};
        let (a, imgs, batch) = (self.a, self.imgs, self.batch);
        if !a.json {
            println!(
                "{}: {} images, batch {batch}, {} mode, CKKS {} (N = 2^{}), with the server at {}",
                self.net.name,
                imgs.count,
                self.mode,
                self.params.name(),
                self.params.log_n(),
                self.addr
            );
        }
        let mut t = crate::infer::connect(self.addr, a.connect_timeout, transport(a.timeout))?;
        let run = infer_remote_on(ck, &mut t, self.net, imgs, batch, a.block, self.mode)
            .map_err(CliError::Vision)?;
        let n = imgs.count as f64;
        let cmp = self.compare(run.logits());
        let wall = run.wall_s;
        if a.json {
            let mut v = merged(
                self.comparison_json(&cmp, run.block),
                json!({ "server": self.addr, "wall_s": wall, "seconds_per_image": wall / n }),
            );
            match &run.outcome {
                RemoteOutcome::Fhe(c) => {
                    v["mode"] = json!("fhe");
                    v["keys_s"] = json!(c.keys_s);
                    v["encrypt_s"] = json!(c.encrypt_s);
                    v["decrypt_s"] = json!(c.decrypt_s);
                    v["galois_keys"] = json!(c.galois_keys);
                    v["key_bytes"] = json!(c.key_bytes);
                    v["bytes_up"] = json!(c.ct_bytes);
                }
                RemoteOutcome::Hybrid(c) => {
                    let silent = matches!(self.mode, cnn::serve::Mode::Hybrid { silent: true });
                    v["mode"] = json!("hybrid");
                    v["ot"] = json!(if silent { "silent" } else { "iknp" });
                    v["keys_s"] = json!(c.keys_s);
                    v["setup_s"] = json!(c.setup_s);
                    v["run_s"] = json!(c.run_s);
                    v["galois_keys"] = json!(c.galois_keys);
                    v["key_bytes"] = json!(c.key_bytes);
                    v["mpc_bytes"] = json!(c.mpc_bytes);
                    v["mpc_bytes_per_image"] = json!(c.mpc_bytes as f64 / n);
                    v["converted_bytes"] = json!(c.converted_bytes);
                    v["steps_batch1"] = c
                        .steps
                        .iter()
                        .map(|r| {
                            let s = &r.cost;
                            json!({
                                "step": s.name, "converted_cts": s.tally.converted_cts,
                                "converted_bytes": s.tally.converted_bytes, "mpc_bytes": s.tally.mpc_bytes,
                                "mpc_rounds": s.tally.mpc_rounds, "seconds": r.wall_s,
                            })
                        })
                        .collect();
                }
            }
            return print_json(&v);
        }
        self.print_comparison(&cmp);
        match &run.outcome {
            RemoteOutcome::Fhe(c) => {
                println!(
                    "{}, up {:.1} MB",
                    c.keys_head(run.block),
                    c.ct_bytes as f64 / 1e6
                );
                println!(
                    "keys {:.1} s, encrypt {:.2} s, decrypt {:.2} s, wall {wall:.1} s ({:.3} s per image)",
                    c.keys_s,
                    c.encrypt_s,
                    c.decrypt_s,
                    wall / n
                );
            }
            RemoteOutcome::Hybrid(c) => {
                println!(
                    "{}, {:.1} MB on the wire ({:.2} MB per image, {:.1} MB of it converted ciphertexts)",
                    c.keys_head(run.block),
                    c.mpc_bytes as f64 / 1e6,
                    c.mpc_bytes as f64 / n / 1e6,
                    c.converted_bytes as f64 / 1e6
                );
                println!(
                    "run {:.2} s ({:.3} s per image), keys {:.1} s, OT setup {:.1} s, wall {wall:.1} s",
                    c.run_s,
                    c.run_s / n,
                    c.keys_s,
                    c.setup_s
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file means all of its images; `--limit` narrows it; the built-in set keeps its small
    /// default; `--limit 0` is a usage error.
    #[test]
    fn a_file_means_all_its_images() {
        assert_eq!(image_limit("digits.idx3-ubyte", None, 40).unwrap(), 40);
        assert_eq!(image_limit("a.png,b.png,c.png", None, 3).unwrap(), 3);
        assert_eq!(
            image_limit("data_batch_1.bin", None, 10_000).unwrap(),
            10_000
        );
        assert_eq!(image_limit("digits.idx3-ubyte", Some(5), 40).unwrap(), 5);
        assert_eq!(image_limit("digits.idx3-ubyte", Some(100), 40).unwrap(), 40);
        assert_eq!(image_limit("mnist-test", None, 10_000).unwrap(), 16);
        assert_eq!(
            image_limit("mnist-test", Some(10_000), 10_000).unwrap(),
            10_000
        );
        assert!(matches!(
            image_limit("digits.idx3-ubyte", Some(0), 40),
            Err(CliError::Usage(_))
        ));
    }
}
