//! `veil infer-image`: private CNN inference of images (FEnc2's packing, FHE-only mode) between
//! a client and a server over TCP loopback, each prediction beside the plaintext model's, with
//! the server's per-layer cost table.

use crate::private::{print_json, CliError};
use serde_json::json;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_host::model::{cnn, images};
use veil_host::vision;

/// Options of `veil infer-image`.
#[derive(Clone, Debug, clap::Args)]
pub struct InferImageArgs {
    /// The model: `lenet` (Orion's LeNet with trained quadratic activations, built in),
    /// `lenet-relu` (ReLU: --plaintext only until the hybrid mode lands), or a `.safetensors`
    /// file of the same architecture.
    #[arg(long, default_value = "lenet")]
    pub model: String,
    /// Images: `mnist-test` (the built-in MNIST test set), an IDX file (`idx3-ubyte`, raw or
    /// gzip), a CIFAR-10 binary batch (`.bin`), or PNG files (`a.png,b.png`, one shape; MNIST
    /// models expect white digits on black, 28 × 28 gray).
    #[arg(long, default_value = "mnist-test")]
    pub images: String,
    /// Labels for accuracy: IDX `idx1-ubyte`, `mnist-test`, a CIFAR-10 `.bin`, or `none`. The
    /// default `auto` takes them from `mnist-test` or a CIFAR batch, and skips them otherwise.
    #[arg(long, default_value = "auto")]
    pub labels: String,
    /// How many images (from the first).
    #[arg(long, default_value_t = 16)]
    pub limit: usize,
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
    /// CKKS worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// One JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Runs `veil infer-image`.
pub fn run(a: &InferImageArgs) -> Result<(), CliError> {
    let net = cnn::load(&a.model).map_err(CliError::Model)?;
    let all = images::read_images(&a.images).map_err(CliError::Model)?;
    all.check_shape(net.channels, net.side)
        .map_err(CliError::Model)?;
    if a.limit == 0 {
        return Err(CliError::Usage("--limit must be at least 1".into()));
    }
    let imgs = all.take(a.limit);
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
    let plain_pred: Vec<usize> = plain
        .chunks(classes)
        .map(veil_host::vision::argmax)
        .collect();
    let acc = |pred: &[usize]| {
        labels.as_ref().map(|l| {
            pred.iter()
                .zip(l)
                .filter(|(p, l)| **p == **l as usize)
                .count() as f64
                / pred.len() as f64
        })
    };
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
    let p = veil_host::vision::cnn_params(batch)
        .validate()
        .map_err(CliError::Reference)?;
    let threads = if a.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        a.threads
    };
    let be = CpuBackend::fast(&p, threads).map_err(|e| CliError::Server(e.to_string()))?;
    let ck = Ckks::new(std::sync::Arc::new(be));
    if !a.json {
        println!(
            "{}: {} images, batch {batch}, CKKS {} (N = 2^{}), client and server over TCP loopback",
            net.name,
            imgs.count,
            p.name(),
            p.log_n()
        );
    }
    let t0 = Instant::now();
    let json_mode = a.json;
    let run = vision::run_loopback(&ck, &net, &imgs, batch, a.block, |b, c| {
        if !json_mode && b == 0 {
            eprintln!(
                "  server batch 1: {:<14} done ({} → {} ciphertexts)",
                c.name, c.cts_in, c.cts_out
            );
        }
    })
    .map_err(CliError::Vision)?;
    let wall = t0.elapsed().as_secs_f64();
    let pred: Vec<usize> = run
        .client
        .logits
        .iter()
        .map(|l| veil_host::vision::argmax(l))
        .collect();
    let agree = pred.iter().zip(&plain_pred).filter(|(a, b)| a == b).count();
    let worst = run
        .client
        .logits
        .iter()
        .flatten()
        .zip(&plain)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let eval: f64 = run.batches.iter().map(|b| b.eval_s).sum();
    let back: u64 = run.batches.iter().map(|b| b.bytes_back).sum();
    let peak = vision::peak_rss_bytes();
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
        return print_json(&json!({
            "model": net.name, "mode": "fhe", "images": imgs.count, "batch": batch,
            "block": run.block, "params": p.name(),
            "predictions": pred, "plaintext_predictions": plain_pred,
            "agreement": agree as f64 / imgs.count as f64,
            "accuracy": acc(&pred), "plaintext_accuracy": acc(&plain_pred),
            "worst_logit_error": worst,
            "server_eval_s": eval, "seconds_per_image": eval / imgs.count as f64,
            "wall_s": wall, "keys_s": run.client.keys_s,
            "encrypt_s": run.client.encrypt_s, "decrypt_s": run.client.decrypt_s,
            "galois_keys": run.client.galois_keys, "key_bytes": run.client.key_bytes,
            "bytes_up": run.client.ct_bytes, "bytes_down": back,
            "peak_rss_bytes": peak, "layers_batch1": layers,
        }));
    }
    for (i, (p_, q)) in pred.iter().zip(&plain_pred).enumerate().take(32) {
        let l = labels
            .as_ref()
            .map_or(String::new(), |l| format!("  label {}", l[i]));
        println!(
            "  image {i:>4}: private {p_}  plaintext {q}{l}{}",
            if p_ == q { "" } else { "  (differs)" }
        );
    }
    if pred.len() > 32 {
        println!("  … {} more", pred.len() - 32);
    }
    println!(
        "agreement {agree}/{} ; worst |Δlogit| {worst:.2e}",
        imgs.count
    );
    if let (Some(pa), Some(pp)) = (acc(&pred), acc(&plain_pred)) {
        println!(
            "accuracy private {:.2} %, plaintext {:.2} %",
            100.0 * pa,
            100.0 * pp
        );
    }
    println!(
        "block S = {}, {} Galois keys ({:.1} MB with the public key), up {:.1} MB, down {:.1} MB",
        run.block,
        run.client.galois_keys,
        run.client.key_bytes as f64 / 1e6,
        run.client.ct_bytes as f64 / 1e6,
        back as f64 / 1e6
    );
    println!(
        "server {eval:.2} s ({:.3} s per image), keys {:.1} s, encrypt {:.2} s, decrypt {:.2} s, wall {wall:.1} s, peak RSS {}",
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
