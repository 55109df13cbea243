//! `veil-bench mpc` arguments (clap derive), kept apart from the `veil` binary so the CLI merges
//! with other subcommands by adding one enum variant.

use super::{bench_mpc, BenchMpcOptions, OtMode, TransportKind, TripleMode};
use crate::error::invalid;
use crate::peers::{live_or_note, PeerFigures};
use crate::BenchError;
use std::path::PathBuf;

/// Arguments of `veil-bench mpc`.
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
    /// OT mode(s), comma-separated: iknp (on demand), pool (IKNP preprocessed offline), silent
    /// (pools filled by the Ferret silent OT, plus the raw generator); `both` = iknp,pool;
    /// `all` = iknp,pool,silent.
    #[arg(long, default_value = "both")]
    pub ot: String,
    /// COTs per direction of the raw silent-generator measurement (silent mode; 0 skips it;
    /// default: two main extensions).
    #[arg(long)]
    pub generator_cots: Option<usize>,
    /// Source of the Beaver triples: rlwe (RLWE oblivious linear evaluation, the default) or
    /// gilboa (Gilboa's OT multiplication).
    #[arg(long, default_value = "rlwe")]
    pub triples: String,
    /// Passes over the primitives in one session; the table shows the last one (2 or more: the
    /// session in steady state, its buffers warm and its OT fills where they fall).
    #[arg(long, default_value_t = 1)]
    pub passes: usize,
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
    /// Also run SecretFlow SPU (Cheetah) on the same primitives in this run, with the peer
    /// scripts of `--peers-dir` and the Python of `VEIL_SPU_PYTHON` (default
    /// /tmp/veil-peers/spu/bin/python), and print the ratios to it. Without it, or when SPU
    /// cannot run, there are no ratio columns: only SPU's recorded figures, under their date.
    #[arg(long)]
    pub peers: bool,
    /// The shared peer benchmarks (holds mpc/bench_spu.py).
    #[arg(long, default_value = "../shared/peers")]
    pub peers_dir: PathBuf,
}

/// Runs the benchmark and prints the report.
pub fn run(args: &BenchMpcArgs) -> Result<(), BenchError> {
    let transports = match args.transport.as_str() {
        "mem" => vec![TransportKind::Memory],
        "tcp" => vec![TransportKind::Tcp],
        "both" => vec![TransportKind::Memory, TransportKind::Tcp],
        v => return Err(invalid("--transport", v, "mem, tcp or both")),
    };
    let ot_modes = OtMode::parse_list(&args.ot)?;
    let mut opts = BenchMpcOptions {
        n: args.n,
        transports,
        ot_modes,
        triples: TripleMode::parse(&args.triples)?,
        passes: args.passes.max(1),
        ..BenchMpcOptions::default()
    };
    if let Some(c) = args.generator_cots {
        opts.generator_cots = c;
    }
    opts.cfg.radix_bits = args.radix;
    opts.cfg.trunc = match args.trunc.as_str() {
        "known-msb" => veil_core::mpc::TruncMode::KnownMsb,
        "full-range" => veil_core::mpc::TruncMode::FullRange,
        "exact" => veil_core::mpc::TruncMode::Exact,
        v => return Err(invalid("--trunc", v, "known-msb, full-range or exact")),
    };
    opts.cfg
        .validate()
        .map_err(crate::error::mpc("the MPC configuration"))?;
    if let Some(o) = &args.ops {
        opts.ops = o.split(',').map(|s| s.trim().to_string()).collect();
    }
    if args.peers {
        let ops: Vec<&str> = opts.ops.iter().map(String::as_str).collect();
        opts.spu_live = live_or_note(PeerFigures::spu_live(&args.peers_dir, args.n, &ops));
    }
    let rep = bench_mpc(&opts)?;
    if args.json {
        println!("{}", crate::to_json("the bench mpc report", &rep)?);
    } else {
        print!("{}", rep.to_table());
    }
    Ok(())
}
