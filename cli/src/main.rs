//! The `veil` command-line tool: private inference (`veil demo`, `veil serve`, `veil infer`,
//! `veil infer-image`, private generation with `veil generate --server`), the cost model's plan
//! (`veil plan`), the CKKS smoke demo and the decoder's plaintext generation
//! (`veil generate --plaintext`). The
//! benchmarks are a binary of their own (`veil-bench`, in `bench/`), which this one does not link.

mod common;
mod demo;
mod demo_ckks;
mod generate;
mod infer;
mod infer_image;
mod plan;
mod verify_model;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

// Large polynomial buffers are allocated and freed at a high rate: see
// `veil_host::alloc::tune_mimalloc`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "veil",
    version,
    about = "Veil: private neural-network inference (CKKS + 2PC)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Private inference end to end: a server and a client over loopback TCP classify built-in
    /// sentences; each result beside the plaintext one, then the cost table.
    Demo(demo::DemoArgs),
    /// Serve private inference of a model to clients over TCP: the BERT classifier (`veil
    /// infer`), with `--cnn MODEL` a CNN (`veil infer-image --server`), or with `--model
    /// smollm2|FILE.gguf|GPT2_DIR` private generation (`veil generate --server`).
    Serve(infer::ServeArgs),
    /// Classify a text privately with a `veil serve` server (or --plaintext, locally).
    Infer(infer::InferArgs),
    /// Classify images privately (FEnc2's CNN packing; FHE-only, or hybrid with ReLU in MPC):
    /// a client and a server over TCP loopback, each prediction beside the plaintext model's,
    /// with a per-layer cost table; with `--server ADDR`, only the client, against
    /// `veil serve --cnn`.
    InferImage(infer_image::InferImageArgs),
    /// The cost model's decisions (OT, GELU split, packing) and predicted time and bytes per
    /// network profile, calibrated on this machine by a short run (or a saved calibration).
    Plan(plan::PlanArgs),
    /// Encrypt a vector, compute on it under encryption, decrypt; print precision and timings.
    DemoCkks(demo_ckks::DemoOptions),
    /// Check the cached default model in full: every pinned file's size and SHA-256, then a load.
    VerifyModel(verify_model::VerifyModelArgs),
    /// Generate text with a decoder (SmolLM2 by default): privately with a `veil serve --model`
    /// server (`--server ADDR`), or through the f64 reference on this machine (`--plaintext`).
    Generate(generate::GenerateArgs),
}

fn run_plan(a: &plan::PlanArgs) -> Result<(), Box<dyn std::error::Error>> {
    let r = plan::run(a)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", plan::render(&r));
    }
    Ok(())
}

fn main() -> ExitCode {
    veil_host::alloc::tune_mimalloc();
    let cli = Cli::parse();
    let res: Result<(), Box<dyn std::error::Error>> = match cli.cmd {
        Cmd::Demo(a) => demo::run(&a).map_err(Into::into),
        Cmd::Serve(a) => match &a.cnn {
            Some(model) => infer_image::run_serve_cnn(&a, model).map_err(Into::into),
            None if generate::is_decoder(a.model.as_deref()) => {
                generate::run_serve(&a).map_err(Into::into)
            }
            None => infer::run_serve(&a).map_err(Into::into),
        },
        Cmd::Infer(a) => infer::run_infer(&a).map_err(Into::into),
        Cmd::InferImage(a) => infer_image::run(&a).map_err(Into::into),
        Cmd::Plan(a) => run_plan(&a),
        Cmd::DemoCkks(o) => demo_ckks::run(&o).map(|_| ()).map_err(Into::into),
        Cmd::VerifyModel(a) => verify_model::run(&a).map_err(Into::into),
        Cmd::Generate(a) => generate::run(&a).map_err(Into::into),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("veil: error: {e}");
            ExitCode::FAILURE
        }
    }
}
