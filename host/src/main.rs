//! `veil` command line.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "veil", about = "Veil private inference engine")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Two-party MPC primitives (IKNP OT), in memory and over TCP loopback.
    Mpc(veil_host::mpc::cli::BenchMpcArgs),
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Bench(BenchCmd::Mpc(a)) => veil_host::mpc::cli::run(&a),
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
