//! `veil-bench boot`: CKKS bootstrapping latency, precision, levels left, key and plaintext bytes
//! and peak memory, per thread count, beside OpenFHE and DESILO FHE run in the same session
//! (`--peers`: `scripts/boot-peers/run.sh`), and the use the issue asks for: an FHE-only MLP that
//! bootstraps after every layer (`--mlp`).

use crate::ckks::peak_rss_mb;
use crate::error::{core, io};
use crate::BenchError;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use std::process::Command;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::backend::PolyBackend;
use veil_core::circuits::{BootKeys, BootParams, Bootstrapper, LinearTransform};
use veil_core::ckks::{Ciphertext, Ckks, PrecisionStats, SecretKey, C64};
use veil_core::params;
use veil_core::CkksParams;

/// Options of `veil-bench boot`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchBootArgs {
    /// Parameter set: `logn16` (`CKKS_128_LOGN16_BOOT_LOGQP1731`, 128-bit, dense main secret) or `logn12`
    /// (`INSECURE_LOGN12_BOOT_H64`, a quick check).
    #[arg(long, default_value = "logn16")]
    pub params: String,
    /// Thread counts to measure, comma-separated.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Timed bootstraps per thread count (after one untimed warm-up).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Slots (default `N/2`).
    #[arg(long)]
    pub slots: Option<usize>,
    /// Also run OpenFHE and DESILO FHE (`scripts/boot-peers/run.sh`, venvs under `VEIL_PEERS`)
    /// at the same thread counts, before Veil in the same session, and print the ratios.
    #[arg(long)]
    pub peers: bool,
    /// Also run the FHE-only MLP (`--mlp-width`, 4 layers, square activation, a bootstrap after
    /// every layer) at the first thread count.
    #[arg(long)]
    pub mlp: bool,
    /// The MLP's width (its slot count).
    #[arg(long, default_value_t = 512)]
    pub mlp_width: usize,
    /// Lean Galois keys: their `a` halves regenerated from the seeds at each use
    /// (`Lean::All`: about half the key memory, a seed expansion per rotation).
    /// Peak memory is per process: measure the two key modes in separate runs.
    #[arg(long)]
    pub lean_keys: bool,
    /// A memory budget for the bootstrapping keys, in MB: as few Galois keys as needed are lean
    /// (`Lean::Budget`).
    #[arg(long, conflicts_with = "lean_keys")]
    pub key_budget_mb: Option<usize>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// One thread count's measurement.
#[derive(Clone, Debug, Serialize)]
pub struct BootRow {
    /// Worker threads.
    pub threads: usize,
    /// Building and encoding the FFT groups, s.
    pub setup_s: f64,
    /// Relinearization, conjugation and rotation keys, s.
    pub keygen_s: f64,
    /// Fastest bootstrap, s.
    pub boot_s_min: f64,
    /// Median bootstrap, s.
    pub boot_s_median: f64,
    /// Per step of the fastest bootstrap (ModRaise+SubSum, CoeffToSlot, EvalMod, SlotToCoeff), s.
    pub steps_s: [f64; 4],
    /// Precision of the fastest bootstrap's output against the input: real and imaginary
    /// `[min, mean, median]` bits.
    pub precision_real: [f64; 3],
    /// Imaginary parts.
    pub precision_imag: [f64; 3],
    /// Peak resident memory of this configuration (the process's peak was reset before it), MB.
    pub peak_rss_mb: Option<f64>,
}

/// A peer's measurement, as its script printed it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeerBootRow {
    /// Library.
    pub lib: String,
    /// Threads.
    pub threads: Option<usize>,
    /// `ok`, `killed for memory` or the error.
    pub status: String,
    /// Fastest bootstrap, s.
    pub boot_s_min: Option<f64>,
    /// Median bootstrap, s.
    pub boot_s_median: Option<f64>,
    /// Levels left after bootstrapping.
    pub levels_left: Option<f64>,
    /// Worst-slot precision, bits.
    pub prec_min_bits: Option<f64>,
    /// Mean precision, bits.
    pub prec_avg_bits: Option<f64>,
    /// Peak resident memory, MB.
    pub peak_rss_mb: Option<f64>,
    /// Every field the script printed.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The MLP use: per layer, the linear layer, the activation and the bootstrap.
#[derive(Clone, Debug, Serialize)]
pub struct MlpReport {
    /// Width (slots).
    pub width: usize,
    /// Layers (one bootstrap each).
    pub layers: usize,
    /// Per layer: linear s, activation s, bootstrap s.
    pub layer_s: Vec<[f64; 3]>,
    /// End to end, s (keys excluded).
    pub total_s: f64,
    /// Precision of the output against the `f64` MLP: `[min, mean, median]` bits (real parts).
    pub precision: [f64; 3],
}

/// The report of `veil-bench boot`.
#[derive(Clone, Debug, Serialize)]
pub struct BenchBootReport {
    /// The parameter set's name.
    pub params: String,
    /// `log2 N`.
    pub log_n: u32,
    /// `log2(QP)`.
    pub log_qp: f64,
    /// The bootstrapping settings.
    pub boot: String,
    /// Levels left for computation after a bootstrap.
    pub levels_left: usize,
    /// Galois keys (rotations and the conjugation) plus the relinearization key.
    pub keys: usize,
    /// Their bytes serialized seed-compressed (what a client sends), and in memory.
    pub key_bytes_compressed: usize,
    /// In memory.
    pub key_bytes_memory: usize,
    /// How many switching keys were lean (`--lean-keys`, `--key-budget-mb`).
    pub lean_keys: usize,
    /// The encoded FFT plaintexts.
    pub plaintexts: usize,
    /// Their bytes in memory.
    pub plaintext_bytes: usize,
    /// One row per thread count.
    pub rows: Vec<BootRow>,
    /// The peers, when `--peers`.
    pub peers: Vec<PeerBootRow>,
    /// The MLP, when `--mlp`.
    pub mlp: Option<MlpReport>,
}

/// The parameter set named by `--params`.
pub fn params_by_name(name: &str) -> Result<CkksParams, BenchError> {
    let lit = match name {
        "logn16" => params::ckks_128_logn16_boot(),
        "logn12" => params::insecure_logn12_boot(),
        _ => {
            return Err(BenchError::InvalidOption {
                option: "--params",
                value: name.into(),
                expected: "logn16 or logn12",
            })
        }
    };
    lit.validate().map_err(core("parameters"))
}

/// Resets the process's peak resident memory (Linux: `5` into `clear_refs`), so that the next
/// [`peak_rss_mb`] reports one configuration's peak.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn values(n: usize, rng: &mut impl RngCore) -> Vec<C64> {
    let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    (0..n).map(|_| C64::new(u(), u())).collect()
}

struct Session {
    ck: Ckks<CpuBackend>,
    sk: SecretKey,
    keys: BootKeys<CpuBackend>,
    boot: Bootstrapper<CpuBackend>,
    setup_s: f64,
    keygen_s: f64,
}

/// How a session's bootstrapping keys are held.
#[derive(Clone, Copy)]
enum KeyMode {
    Whole,
    Lean,
    Budget(usize),
}

impl KeyMode {
    fn of(a: &BenchBootArgs) -> Self {
        match (a.lean_keys, a.key_budget_mb) {
            (true, _) => Self::Lean,
            (false, Some(mb)) => Self::Budget(mb << 20),
            (false, None) => Self::Whole,
        }
    }
}

fn session(
    p: &CkksParams,
    bp: &BootParams,
    threads: usize,
    extra_rotations: &[i64],
    keys: KeyMode,
    quiet: bool,
) -> Result<Session, BenchError> {
    let be = CpuBackend::fast(p, threads).map_err(|e| BenchError::Backend {
        reason: e.to_string(),
    })?;
    let ck = Ckks::new(std::sync::Arc::new(be));
    let t = Instant::now();
    let boot = Bootstrapper::new(&ck, bp.clone()).map_err(core("bootstrapper"))?;
    let setup_s = t.elapsed().as_secs_f64();
    let mut rng = ChaCha20Rng::from_rng(rand_core::OsRng)?;
    let sk = ck.gen_secret_key(&mut rng);
    let t = Instant::now();
    let mut progress = crate::progress::Progress::new("bootstrapping keys", quiet);
    let report = |d, n| progress.update(d, n);
    let keys = match keys {
        KeyMode::Whole => boot.gen_keys(
            &ck,
            &sk,
            extra_rotations,
            veil_core::circuits::Lean::None,
            &mut rng,
            report,
        ),
        KeyMode::Lean => boot.gen_keys(
            &ck,
            &sk,
            extra_rotations,
            veil_core::circuits::Lean::All,
            &mut rng,
            report,
        ),
        KeyMode::Budget(b) => boot.gen_keys(
            &ck,
            &sk,
            extra_rotations,
            veil_core::circuits::Lean::Budget(b),
            &mut rng,
            report,
        ),
    }
    .map_err(core("key generation"))?;
    let keygen_s = t.elapsed().as_secs_f64();
    Ok(Session {
        ck,
        sk,
        keys,
        boot,
        setup_s,
        keygen_s,
    })
}

/// One fresh input at level 0 and the input scale.
fn fresh(
    s: &Session,
    x: &[C64],
    rng: &mut ChaCha20Rng,
) -> Result<Ciphertext<CpuBackend>, BenchError> {
    let n = s.boot.params().slots;
    let pt =
        s.ck.encode(x, n, 0, s.boot.params().input_scale)
            .map_err(core("encode"))?;
    s.ck.encrypt_sk(&s.sk, &pt, rng).map_err(core("encrypt"))
}

fn measure(s: &Session, threads: usize, reps: usize, quiet: bool) -> Result<BootRow, BenchError> {
    let mut rng = ChaCha20Rng::from_rng(rand_core::OsRng)?;
    let n = s.boot.params().slots;
    let mut times = Vec::new();
    let mut best: Option<(f64, [f64; 4], PrecisionStats)> = None;
    for rep in 0..=reps {
        let x = values(n, &mut rng);
        let ct = fresh(s, &x, &mut rng)?;
        let mut marks: Vec<Instant> = Vec::new();
        let t = Instant::now();
        let (out, _) = s
            .boot
            .bootstrap_with(&s.ck, &s.keys, &ct, |_| marks.push(Instant::now()))
            .map_err(core("bootstrap"))?;
        let total = t.elapsed().as_secs_f64();
        let step = |i: usize| (marks[i + 1] - marks[i]).as_secs_f64();
        let steps = [step(0), step(1), step(2), step(3)];
        let got = s.ck.decrypt_decode(&s.sk, &out).map_err(core("decrypt"))?;
        let st = PrecisionStats::compute(&x, &got);
        if !quiet {
            eprintln!(
                "  {threads} thread(s), bootstrap {rep}{}: {total:.2} s, {st}",
                if rep == 0 { " (warm-up)" } else { "" }
            );
        }
        if rep == 0 {
            continue;
        }
        times.push(total);
        if best.as_ref().is_none_or(|b| total < b.0) {
            best = Some((total, steps, st));
        }
    }
    let (min, steps, st) = best.ok_or(BenchError::InvalidOption {
        option: "--reps",
        value: "0".into(),
        expected: "at least 1",
    })?;
    times.sort_by(f64::total_cmp);
    Ok(BootRow {
        threads,
        setup_s: s.setup_s,
        keygen_s: s.keygen_s,
        boot_s_min: min,
        boot_s_median: times[times.len() / 2],
        steps_s: steps,
        precision_real: [st.real.min_bits, st.real.avg_bits, st.real.median_bits],
        precision_imag: [st.imag.min_bits, st.imag.avg_bits, st.imag.median_bits],
        peak_rss_mb: peak_rss_mb(),
    })
}

/// A random MLP layer: `W` with entries uniform in `±0.9·√3/√w` (rows of unit variance scaled
/// down), `b` uniform in `±0.1`.
fn random_layer(w: usize, rng: &mut impl RngCore) -> (Vec<Vec<C64>>, Vec<C64>) {
    let a = 0.9 * 3f64.sqrt() / (w as f64).sqrt();
    let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    let m = (0..w)
        .map(|_| (0..w).map(|_| C64::real(a * u())).collect())
        .collect();
    let b = (0..w).map(|_| C64::real(0.1 * u())).collect();
    (m, b)
}

/// The FHE-only MLP: `layers` × (dense `w × w` by BSGS, bias, square, back to the input scale,
/// bootstrap), against the same MLP in `f64`. Runs at the bootstrapper's output level; the
/// bootstrapper's slot count must be `w`.
pub fn run_mlp<B: PolyBackend>(
    ck: &Ckks<B>,
    boot_keys: &BootKeys<B>,
    sk: &SecretKey,
    boot: &Bootstrapper<B>,
    layers: usize,
    rng: &mut ChaCha20Rng,
) -> Result<MlpReport, BenchError> {
    let keys = &boot_keys.eval;
    let w = boot.params().slots;
    let delta = boot.params().input_scale;
    let top = boot.levels().output;
    let x0: Vec<C64> = values(w, rng).iter().map(|v| C64::real(v.re)).collect();
    let pt = ck.encode(&x0, w, top, delta).map_err(core("encode"))?;
    let mut ct = ck.encrypt_sk(sk, &pt, rng).map_err(core("encrypt"))?;
    let mut want = x0;
    let mut layer_s = Vec::new();
    let start = Instant::now();
    for _ in 0..layers {
        let (m, b) = random_layer(w, rng);
        let t = Instant::now();
        let lt = LinearTransform::from_dense(&m).map_err(core("layer"))?;
        let enc = lt.encode(ck, ct.level()).map_err(core("encode layer"))?;
        let (mut y, _) = enc.eval(ck, keys, &ct).map_err(core("linear layer"))?;
        drop(enc);
        let bias = ck
            .encode(&b, w, y.level(), y.scale())
            .map_err(core("bias"))?;
        ck.add_plain_assign(&mut y, &bias).map_err(core("bias"))?;
        let lin = t.elapsed().as_secs_f64();
        let t = Instant::now();
        // Square, then one exact constant multiply back to the input scale.
        let mut sq = ck.mul_relin(&y, &y, keys).map_err(core("square"))?;
        ck.rescale_assign(&mut sq).map_err(core("square"))?;
        let fix = delta * ck.rescale_prime(sq.level()) / sq.scale();
        ck.mul_const_assign(&mut sq, C64::real(1.0), fix)
            .map_err(core("rescale to Δ"))?;
        ck.rescale_assign(&mut sq).map_err(core("rescale to Δ"))?;
        let act = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (out, _) = boot
            .bootstrap(ck, boot_keys, &sq)
            .map_err(core("bootstrap"))?;
        ct = out;
        layer_s.push([lin, act, t.elapsed().as_secs_f64()]);
        let lin_ref = lt.apply(&want).map_err(core("reference"))?;
        want = lin_ref
            .iter()
            .zip(&b)
            .map(|(v, c)| {
                let y = *v + *c;
                y * y
            })
            .collect();
    }
    let total_s = start.elapsed().as_secs_f64();
    let got = ck.decrypt_decode(sk, &ct).map_err(core("decrypt"))?;
    let st = PrecisionStats::compute(&want, &got);
    Ok(MlpReport {
        width: w,
        layers,
        layer_s,
        total_s,
        precision: [st.real.min_bits, st.real.avg_bits, st.real.median_bits],
    })
}

/// Runs the peers' script at `threads` and parses its JSON lines.
fn run_peers(threads: usize, reps: usize) -> Result<Vec<PeerBootRow>, BenchError> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("boot-peers")
        .join("run.sh");
    if !script.exists() {
        return Err(BenchError::Peer {
            peer: "openfhe/desilo",
            reason: format!("{} is missing", script.display()),
        });
    }
    let out = Command::new("bash")
        .arg(&script)
        .arg(threads.to_string())
        .arg(reps.to_string())
        .output()
        .map_err(io("running scripts/boot-peers/run.sh"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
        let row: PeerBootRow = serde_json::from_str(line).map_err(|source| BenchError::Report {
            from: "scripts/boot-peers".into(),
            line: line.chars().take(200).collect(),
            source,
        })?;
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(BenchError::Peer {
            peer: "openfhe/desilo",
            reason: format!(
                "no JSON line (stderr: {})",
                String::from_utf8_lossy(&out.stderr)
                    .chars()
                    .rev()
                    .take(400)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>()
            ),
        });
    }
    Ok(rows)
}

/// Runs `veil-bench boot`.
pub fn run(a: &BenchBootArgs) -> Result<BenchBootReport, BenchError> {
    let p = params_by_name(&a.params)?;
    let mut bp = BootParams::for_params(&p).map_err(core("bootstrapping settings"))?;
    if let Some(s) = a.slots {
        bp.slots = s;
    }
    if a.threads.is_empty() || a.threads.contains(&0) {
        return Err(BenchError::InvalidOption {
            option: "--threads",
            value: format!("{:?}", a.threads),
            expected: "a list of positive thread counts",
        });
    }
    // The peers first, while this process is small (DESILO's default bootstrap peaks near 17 GB).
    let mut peers = Vec::new();
    if a.peers {
        for &t in &a.threads {
            if !a.json {
                eprintln!(
                    "peers at {t} thread(s): scripts/boot-peers/run.sh {t} {}",
                    a.reps
                );
            }
            peers.extend(run_peers(t, a.reps)?);
        }
    }
    let mut rows = Vec::new();
    let mut facts = None;
    for &t in &a.threads {
        reset_peak_rss();
        let s = session(&p, &bp, t, &[], KeyMode::of(a), a.json)?;
        if facts.is_none() {
            let nkeys = s.keys.count();
            let key = |c| veil_core::serial::switching_key_len(&p, c);
            facts = Some((
                nkeys,
                nkeys * key(true),
                s.keys.memory_bytes(s.ck.backend()),
                s.boot.plaintexts(),
                s.boot.plaintext_bytes(),
                s.boot.levels().output,
                s.keys.lean_count(),
            ));
        }
        if !a.json {
            eprintln!(
                "{t} thread(s): setup {:.1} s, keys {:.1} s",
                s.setup_s, s.keygen_s
            );
        }
        rows.push(measure(&s, t, a.reps, a.json)?);
    }
    let mut mlp = None;
    if a.mlp {
        let mut mp = bp.clone();
        mp.slots = a.mlp_width;
        let lt_rots = {
            let mut rng = ChaCha20Rng::seed_from_u64(0);
            let (m, _) = random_layer(a.mlp_width, &mut rng);
            LinearTransform::from_dense(&m)
                .map_err(core("layer"))?
                .rotations()
        };
        let s = session(&p, &mp, a.threads[0], &lt_rots, KeyMode::of(a), a.json)?;
        let mut rng = ChaCha20Rng::from_rng(rand_core::OsRng)?;
        mlp = Some(run_mlp(&s.ck, &s.keys, &s.sk, &s.boot, 4, &mut rng)?);
    }
    let (keys, kc, km, pts, pt_bytes, levels_left, lean_count) = facts.unwrap_or_default();
    Ok(BenchBootReport {
        params: p.name().into(),
        log_n: p.log_n(),
        log_qp: p.log_qp(),
        boot: format!("{bp:?}"),
        levels_left,
        keys,
        key_bytes_compressed: kc,
        key_bytes_memory: km,
        lean_keys: lean_count,
        plaintexts: pts,
        plaintext_bytes: pt_bytes,
        rows,
        peers,
        mlp,
    })
}

/// The report as text: the settings, then one row per thread count beside the peers' rows at the
/// same thread count, with the ratio Veil ÷ peer.
pub fn render(r: &BenchBootReport) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let mb = |b: usize| b as f64 / (1u64 << 20) as f64;
    let _ = writeln!(
        o,
        "bootstrapping, {} (N = 2^{}, log2 QP = {:.0})\n{}\nlevels left {}; {} keys: {:.0} MB \
         seed-compressed, {:.0} MB in memory{}; {} FFT plaintexts: {:.0} MB",
        r.params,
        r.log_n,
        r.log_qp,
        r.boot,
        r.levels_left,
        r.keys,
        mb(r.key_bytes_compressed),
        mb(r.key_bytes_memory),
        if r.lean_keys > 0 {
            format!(" ({} lean)", r.lean_keys)
        } else {
            String::new()
        },
        r.plaintexts,
        mb(r.plaintext_bytes)
    );
    let _ = writeln!(
        o,
        "\n| library | threads | bootstrap s (min / median) | steps s (raise, CtS, EvalMod, StC) | \
         levels left | precision bits (min / mean / median) | peak MB | setup s | keygen s |"
    );
    let _ = writeln!(o, "|---|---:|---:|---|---:|---|---:|---:|---:|");
    for row in &r.rows {
        let _ = writeln!(
            o,
            "| veil | {} | {:.2} / {:.2} | {:.2}, {:.2}, {:.2}, {:.2} | {} | re {:.1} / {:.1} / {:.1}, im {:.1} / {:.1} / {:.1} | {} | {:.1} | {:.1} |",
            row.threads,
            row.boot_s_min,
            row.boot_s_median,
            row.steps_s[0],
            row.steps_s[1],
            row.steps_s[2],
            row.steps_s[3],
            r.levels_left,
            row.precision_real[0],
            row.precision_real[1],
            row.precision_real[2],
            row.precision_imag[0],
            row.precision_imag[1],
            row.precision_imag[2],
            row.peak_rss_mb.map_or("-".into(), |m| format!("{m:.0}")),
            row.setup_s,
            row.keygen_s
        );
        for peer in r.peers.iter().filter(|p| p.threads == Some(row.threads)) {
            let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |x| format!("{x:.d$}"));
            let ratio = peer.boot_s_min.map_or(String::new(), |t| {
                format!(" (veil ÷ this {:.2})", row.boot_s_min / t)
            });
            let mem = match (row.peak_rss_mb, peer.peak_rss_mb) {
                (Some(a), Some(b)) => format!(" (veil ÷ this {:.2})", a / b),
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "| {} [{}] | {} | {} / {}{ratio} | | {} | min {} / mean {} | {}{mem} | | |",
                peer.lib,
                peer.status,
                row.threads,
                f(peer.boot_s_min, 2),
                f(peer.boot_s_median, 2),
                f(peer.levels_left, 0),
                f(peer.prec_min_bits, 1),
                f(peer.prec_avg_bits, 1),
                f(peer.peak_rss_mb, 0),
            );
        }
    }
    if let Some(m) = &r.mlp {
        let _ = writeln!(
            o,
            "\nMLP: {} layers of width {} (dense BSGS, bias, square, bootstrap): {:.1} s end to end, \
             output precision {:.1} / {:.1} / {:.1} bits against f64",
            m.layers, m.width, m.total_s, m.precision[0], m.precision[1], m.precision[2]
        );
        for (i, l) in m.layer_s.iter().enumerate() {
            let _ = writeln!(
                o,
                "  layer {i}: linear {:.2} s, square {:.2} s, bootstrap {:.2} s",
                l[0], l[1], l[2]
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The MLP at N = 2^12 (two layers of width 64): the output matches the f64 MLP.
    #[test]
    fn mlp_matches_f64_at_logn12() {
        let p = params_by_name("logn12").unwrap();
        let mut bp = BootParams::for_params(&p).unwrap();
        bp.slots = 64;
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let (m, _) = random_layer(64, &mut rng);
        let rots = LinearTransform::from_dense(&m).unwrap().rotations();
        let s = session(&p, &bp, 2, &rots, KeyMode::Whole, true).unwrap();
        let r = run_mlp(&s.ck, &s.keys, &s.sk, &s.boot, 2, &mut rng).unwrap();
        println!("{r:?}");
        assert!(r.precision[0] > 18.0, "{r:?}");
        assert!(params_by_name("logn13").is_err());
    }
}
