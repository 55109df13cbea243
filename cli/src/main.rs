//! The `veil` command-line tool: private inference (`veil demo`, `veil serve`, `veil infer`),
//! the CKKS smoke demo and the benchmarks (`veil-bench`).

mod demo;
mod demo_ckks;
mod infer;
mod infer_image;
mod private;
mod verify_model;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use veil_bench::{
    accuracy, boot, ckks, cnn, convert, e2e, e2e_link, mpc, nonlinear, plan, scp, to_json,
    BenchError,
};

// Large polynomial buffers are allocated and freed at a high rate; mimalloc keeps them in reused
// pages instead of fresh zero-filled mappings (page faults were ~15% of a rotation's time).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc v3's `mi_option_purge_delay` and `mi_option_allow_thp` (`include/mimalloc.h`; the
/// Rust bindings name no constants for them).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Tunes the allocator for large polynomial buffers:
/// - freed pages stay in the process instead of going back to the OS after mimalloc's purge
///   delay: a bootstrap frees and reallocates buffers of 10–20 MB at a high rate, and every
///   purged page came back as a zero-filled page fault (a third of a bootstrap's time went to
///   the kernel's page clearing); freed pages are reused, not added;
/// - no transparent huge pages: a 2 MB page is backed whole as soon as one byte of it is
///   touched, and the tails of the buffers' size classes cost about 12% more resident memory
///   (0.45 GB of a bootstrap's peak at `N = 2^16`).
#[allow(unsafe_code)]
fn tune_allocator() {
    // SAFETY: sets integer options of the allocator this binary links; no pointer crosses.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
    }
}

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
    /// infer`), or with `--cnn MODEL` a CNN (`veil infer-image --server`).
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
    /// Benchmarks.
    #[command(subcommand)]
    Bench(Bench),
    /// Check the cached default model in full: every pinned file's size and SHA-256, then a load.
    VerifyModel(verify_model::VerifyModelArgs),
}

#[derive(Subcommand)]
enum Bench {
    /// Per-primitive CKKS latency and precision.
    Ckks(ckks::BenchCkksOptions),
    /// Two-party MPC primitives (IKNP OT), in memory and over TCP loopback.
    Mpc(mpc::cli::BenchMpcArgs),
    /// Nonlinear MPC blocks (softmax, GELU, LayerNorm, max pool, FEnc2's quadratic) at BERT-base
    /// shapes over TCP loopback, beside SPU Cheetah (--peers: measured in this run).
    Nonlinear(nonlinear::BenchNonlinearArgs),
    /// Transformer FHE kernels (Stage Compatible Patterns): operation counts vs EncFormer
    /// Table II, the w/o-SCP ablation, and a timed MiniLM-shape chain (skip with --counts-only).
    Scp(scp::BenchScpOptions),
    /// CKKS<->MPC conversion of two real vectors: real vs complex vs complex + trimming
    /// (EncFormer Table VII: bytes per conversion pair, latency under LAN/WAN profiles).
    Convert(convert::BenchConvertOptions),
    /// Private inference end to end (client and server over TCP loopback, random weights at
    /// the architecture's shape): wall time, bytes and rounds per block, keys, network estimates.
    E2e(e2e::BenchE2eArgs),
    /// One BERT-base layer (m = 128, d = 768, 12 heads, FFN 3072) privately: `bench e2e` with
    /// `--shape bert-base --m 128 --layers 1` unless given otherwise.
    Layer(e2e::BenchE2eArgs),
    /// The sentiment head on the 300 held-out UCI sentences: exact, fixed-point emulation of the
    /// protocol, and encrypted (--private N sentences).
    Accuracy(accuracy::BenchAccuracyArgs),
    /// FEnc2's CNN packing: the Table IX block-size sweep (`--table-ix`).
    Cnn(cnn::BenchCnnArgs),
    /// CKKS bootstrapping: latency per step, precision, levels left, key and plaintext bytes,
    /// peak memory; beside OpenFHE and DESILO FHE (--peers), and an FHE-only MLP (--mlp).
    Boot(boot::BenchBootArgs),
}

fn run_plan(a: &plan::PlanArgs) -> Result<(), BenchError> {
    let r = plan::run(a)?;
    if a.json {
        println!("{}", to_json("the plan", &r)?);
    } else {
        print!("{}", plan::render(&r));
    }
    Ok(())
}

fn print_e2e(a: &e2e::BenchE2eArgs) -> Result<(), BenchError> {
    if !a.netem.is_empty() {
        let r = e2e_link::run(a)?;
        if a.json {
            println!("{}", to_json("the e2e link report", &r)?);
        } else {
            print!("{}", e2e_link::render(&r));
        }
        return Ok(());
    }
    let r = e2e::run(a)?;
    if a.json {
        println!("{}", to_json("the e2e report", &r)?);
    } else {
        print!("{}", e2e::render(&r));
    }
    Ok(())
}

fn bench(b: Bench) -> Result<(), BenchError> {
    match b {
        Bench::Mpc(a) => mpc::cli::run(&a),
        Bench::Cnn(a) => {
            print!("{}", cnn::run(&a)?);
            Ok(())
        }
        Bench::Nonlinear(a) => nonlinear::run(&a),
        Bench::Boot(a) => {
            let r = boot::run(&a)?;
            if a.json {
                println!("{}", to_json("the bootstrapping report", &r)?);
            } else {
                print!("{}", boot::render(&r));
            }
            Ok(())
        }
        Bench::E2e(a) => print_e2e(&a),
        Bench::Accuracy(a) => {
            let r = accuracy::run(&a)?;
            if a.json {
                println!("{}", to_json("the accuracy report", &r)?);
            } else {
                print!("{}", accuracy::render(&r));
            }
            Ok(())
        }
        Bench::Layer(mut a) => {
            if a.shape == "minilm" {
                a.shape = "bert-base".into();
            }
            if a.m == [16, 32, 64] {
                a.m = vec![128];
            }
            a.layers = a.layers.or(Some(1));
            print_e2e(&a)
        }
        Bench::Convert(o) if o.relay.is_some() => convert::run_relay(&o),
        Bench::Convert(o) if o.party.is_some() => {
            let r = convert::run_party(&o)?;
            let line = serde_json::to_string(&r).map_err(|source| BenchError::Encode {
                what: "the party report",
                source,
            })?;
            println!("{line}");
            Ok(())
        }
        Bench::Convert(o) => {
            let r = convert::run(&o)?;
            if o.json {
                println!("{}", to_json("the bench convert report", &r)?);
            } else {
                print!("{}", convert::render(&r));
            }
            Ok(())
        }
        Bench::Scp(o) => {
            let r = scp::run(&o)?;
            if o.json {
                println!("{}", to_json("the bench scp report", &r)?);
            } else {
                print!("{}", scp::render(&r));
            }
            Ok(())
        }
        Bench::Ckks(o) => {
            let r = ckks::run(&o)?;
            if o.json {
                println!("{}", to_json("the bench ckks report", &r)?);
            } else {
                print!("{}", ckks::render(&r));
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    let res: Result<(), Box<dyn std::error::Error>> = match cli.cmd {
        Cmd::Demo(a) => demo::run(&a).map_err(Into::into),
        Cmd::Serve(a) => match &a.cnn {
            Some(model) => infer_image::run_serve_cnn(&a, model).map_err(Into::into),
            None => infer::run_serve(&a).map_err(Into::into),
        },
        Cmd::Infer(a) => infer::run_infer(&a).map_err(Into::into),
        Cmd::InferImage(a) => infer_image::run(&a).map_err(Into::into),
        Cmd::Plan(a) => run_plan(&a).map_err(Into::into),
        Cmd::DemoCkks(o) => demo_ckks::run(&o).map(|_| ()).map_err(Into::into),
        Cmd::Bench(b) => bench(b).map_err(Into::into),
        Cmd::VerifyModel(a) => verify_model::run(&a).map_err(Into::into),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("veil: error: {e}");
            ExitCode::FAILURE
        }
    }
}
