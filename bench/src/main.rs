//! `veil-bench`: Veil's benchmarks (CKKS, MPC, the nonlinear blocks, the SCP kernels, the
//! conversions, private inference end to end, CNN packing, bootstrapping), beside the peers where
//! `--peers` runs them. The product binary (`veil`, in `cli/`) does not link this crate.

use clap::Parser;
use std::process::ExitCode;
use veil_bench::{
    accuracy, boot, ckks, cnn, convert, decoder, decoder_private, e2e, e2e_link, mpc, nonlinear,
    scp, to_json, BenchError,
};

// Large polynomial buffers are allocated and freed at a high rate: see
// `veil_host::alloc::tune_mimalloc`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "veil-bench",
    version,
    about = "Veil's benchmarks: CKKS, MPC, conversions, private inference, CNN packing, bootstrapping"
)]
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
    /// The homomorphic half of one generated token (KV cache encrypted at the server, the LM
    /// head), per layer, at SmolLM2's or GPT2-base's shape and the contexts asked for.
    Decoder(decoder::BenchDecoderArgs),
    /// Private generation: real decode steps between the two parties over loopback TCP, at
    /// SmolLM2's or GPT2-base's layer shape with random weights (time, bytes, rounds per step).
    Generate(decoder_private::BenchGenerateArgs),
    /// CKKS bootstrapping: latency per step, precision, levels left, key and plaintext bytes,
    /// peak memory; beside OpenFHE and DESILO FHE (--peers), and an FHE-only MLP (--mlp).
    Boot(boot::BenchBootArgs),
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
        Bench::Decoder(a) => {
            let r = decoder::run(&a)?;
            if a.json {
                println!("{}", to_json("the decoder report", &r)?);
            } else {
                print!("{}", decoder::render(&r));
            }
            Ok(())
        }
        Bench::Generate(a) => {
            let r = decoder_private::run(&a)?;
            if a.json {
                println!("{}", to_json("the generation report", &r)?);
            } else {
                print!("{}", decoder_private::render(&r));
            }
            Ok(())
        }
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
    veil_host::alloc::tune_mimalloc();
    match bench(Bench::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("veil-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
