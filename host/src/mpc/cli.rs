//! `veil bench mpc` arguments (clap derive), kept apart from `main.rs` so the
//! CLI merges with other subcommands by adding one enum variant.

use super::bench::{bench_mpc, BenchMpcOptions, TransportKind};

/// Arguments of `veil bench mpc`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchMpcArgs {
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Elements per primitive.
    #[arg(long, default_value_t = 1 << 16)]
    pub n: usize,
    /// Transport(s): mem, tcp or both.
    #[arg(long, default_value = "both")]
    pub transport: String,
    /// OT mode(s): iknp (on demand), pool (preprocessed offline) or both.
    #[arg(long, default_value = "both")]
    pub ot: String,
    /// Radix m (bits per digit) of the millionaires' protocol, 1..=6.
    #[arg(long, default_value_t = 4)]
    pub radix: u32,
    /// Truncation after products: known-msb (|x| < 2^(l-2), 1 COT),
    /// full-range (faithful) or exact (exact rounding).
    #[arg(long, default_value = "known-msb")]
    pub trunc: String,
    /// Comma-separated primitives (default: all).
    #[arg(long)]
    pub ops: Option<String>,
}

/// Runs the benchmark and prints the report.
pub fn run(args: &BenchMpcArgs) -> Result<(), Box<dyn std::error::Error>> {
    let transports = match args.transport.as_str() {
        "mem" => vec![TransportKind::Memory],
        "tcp" => vec![TransportKind::Tcp],
        "both" => vec![TransportKind::Memory, TransportKind::Tcp],
        _ => return Err("--transport must be mem, tcp or both".into()),
    };
    let pool_modes = match args.ot.as_str() {
        "iknp" => vec![false],
        "pool" => vec![true],
        "both" => vec![false, true],
        _ => return Err("--ot must be iknp, pool or both".into()),
    };
    let mut opts = BenchMpcOptions {
        n: args.n,
        transports,
        pool_modes,
        ..BenchMpcOptions::default()
    };
    opts.cfg.radix_bits = args.radix;
    opts.cfg.trunc = match args.trunc.as_str() {
        "known-msb" => veil_core::mpc::TruncMode::KnownMsb,
        "full-range" => veil_core::mpc::TruncMode::FullRange,
        "exact" => veil_core::mpc::TruncMode::Exact,
        _ => return Err("--trunc must be known-msb, full-range or exact".into()),
    };
    opts.cfg.validate()?;
    if let Some(o) = &args.ops {
        opts.ops = o.split(',').map(|s| s.trim().to_string()).collect();
    }
    let rep = bench_mpc(&opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        print!("{}", rep.to_table());
    }
    Ok(())
}
