//! The `veil` command-line tool.

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use veil_host::{bench_ckks, bench_convert, bench_scp, demo};

// Large polynomial buffers are allocated and freed at a high rate; mimalloc keeps them in reused
// pages instead of fresh zero-filled mappings (page faults were ~15% of a rotation's time).
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
    /// Encrypt a vector, compute on it under encryption, decrypt; print precision and timings.
    Demo(demo::DemoOptions),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(Bench),
}

#[derive(Subcommand)]
enum Bench {
    /// Per-primitive CKKS latency and precision.
    Ckks(bench_ckks::BenchCkksOptions),
    /// Two-party MPC primitives (IKNP OT), in memory and over TCP loopback.
    Mpc(veil_host::mpc::cli::BenchMpcArgs),
    /// Transformer FHE kernels (Stage Compatible Patterns): operation counts vs EncFormer
    /// Table II, the w/o-SCP ablation, and a timed MiniLM-shape chain (skip with --counts-only).
    Scp(bench_scp::BenchScpOptions),
    /// CKKS<->MPC conversion of two real vectors: real vs complex vs complex + trimming
    /// (EncFormer Table VII: bytes per conversion pair, latency under LAN/WAN profiles).
    Convert(bench_convert::BenchConvertOptions),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Demo(o) => demo::run(&o).map(|_| ()),
        Cmd::Bench(Bench::Mpc(a)) => veil_host::mpc::cli::run(&a).map_err(|e| e.to_string()),
        Cmd::Bench(Bench::Convert(o)) if o.relay.is_some() => bench_convert::run_relay(&o),
        Cmd::Bench(Bench::Convert(o)) if o.party.is_some() => bench_convert::run_party(&o)
            .and_then(|r| {
                println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
                Ok(())
            }),
        Cmd::Bench(Bench::Convert(o)) => bench_convert::run(&o).and_then(|r| {
            if o.json {
                let s = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
                println!("{s}");
            } else {
                print!("{}", bench_convert::render(&r));
            }
            Ok(())
        }),
        Cmd::Bench(Bench::Scp(o)) => bench_scp::run(&o).and_then(|r| {
            if o.json {
                let s = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
                println!("{s}");
            } else {
                print!("{}", bench_scp::render(&r));
            }
            Ok(())
        }),
        Cmd::Bench(Bench::Ckks(o)) => bench_ckks::run(&o).map(|r| {
            if o.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&r).expect("report serializes")
                );
            } else {
                print!("{}", bench_ckks::render(&r));
            }
        }),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("veil: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
