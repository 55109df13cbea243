//! `veil bench convert`: CKKS ↔ MPC conversion of two real vectors (EncFormer Table VII setting:
//! `N = 2^16`, depth 8) in three modes — real-only (one ciphertext per vector and direction, as
//! BOLT/BLB), complex (both vectors in one ciphertext) and complex with modulus trimming — with
//! bytes per conversion pair and latency as measured local compute plus a network overlay.
//!
//! Our Π_C2M^ℂ needs `Q_conv < 2^124` (its `Z_q` arithmetic), so it always trims: the protocol is
//! *run* trimmed (real+trim and complex+trim), while the untrimmed rows report the payload a
//! ciphertext at the arrival level would have (computed with [`veil_core::serial::ciphertext_len`],
//! the exact serialized size) and the trimmed runs' compute. MPC traffic besides the ciphertexts
//! (IKNP OT) is reported per protocol and included in the latency overlay: C2M's exact rounding
//! (≈ 410 B per real value; a real-only plan rounds the real parts alone) and
//! M2C's Ring2Field (known-MSB, ≈ 31 B per real value). The report also runs both Ring2Field
//! protocols on the `2n` values of one complex M2C input (before/after).
//!
//! Latency overlay: `T = compute + rounds·latency + 8·bytes/bandwidth`, with the one-way latency
//! and bandwidth of each profile (LAN 1 Gbps/0.3 ms, WAN1 400 Mbps/4 ms, WAN2 100 Mbps/4 ms, WAN3
//! 100 Mbps/80 ms); `bytes` counts both directions on one link (a half-duplex upper bound).
//!
//! # Emulated link (`--netem <profile>`)
//!
//! Runs the complex+trim C2M and M2C between two `veil` processes (`--party 0|1`, hidden flags)
//! over TCP on a veth pair between two network namespaces that the benchmark creates
//! ([`crate::netem`]): `tc netem delay <one-way> rate <bandwidth>` on both ends, addresses
//! `10.77.0.1/30`–`.2` that exist only inside the namespaces. Needs root and iproute2; skipped
//! with the reason otherwise. Kernels without `sch_netem` get `tbf` at the profile's rate on
//! both ends plus a user-space delay line in P1's namespace ([`crate::netem::run_delay_relay`],
//! one-way delay each way), reported as `TbfRateUserDelay`. Wall time is measured by P1 from
//! the end of the OT setup, per protocol, and set against the overlay model with the in-memory
//! compute of the same run.
//!
//! Measured on a 2-core machine whose kernel has no `sch_netem` (`tbf` + delay line), `N = 2^16`,
//! depth 8, complex+trim (ciphertexts 4.79 MB, MPC 28.90 MB per pair, 10 rounds; 2026-11-30):
//!
//! | profile | C2M measured / model | M2C measured / model | pair measured / model | ratio |
//! |---|---|---|---|---|
//! | LAN (1 Gbit/s, 0.3 ms) | 0.82 / 0.59 s | 0.41 / 0.33 s | 1.23 / 0.92 s | 1.34 |
//! | WAN2 (100 Mbit/s, 4 ms) | 2.91 / 2.59 s | 0.63 / 0.74 s | 3.53 / 3.33 s | 1.06 |
//! | WAN3 (100 Mbit/s, 80 ms) | 3.39 / 3.27 s | 0.84 / 0.90 s | 4.22 / 4.17 s | 1.01 |
//!
//! Where bandwidth and latency dominate (WAN2, WAN3) the overlay model is within 6 % of the real
//! socket; at WAN3 the latency term is real (the delay-free model is 25 % short). On LAN the
//! socket is 34 % slower than the model: the model has no per-byte host cost, while the real run
//! pushes 33.7 MB through two TCP stacks, the veth and the delay line on the same 2 cores as the
//! parties' compute. The model charges both directions' bytes to one link while the veth is full
//! duplex, which is why M2C can beat it. Round-trip error over the link: 0.503–0.504 ulp.

use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, Ckks, PublicKey, SecretKey};
use veil_core::convert::{
    c2m_p0, c2m_p1, complexify, decomplexify, m2c_p0, m2c_p1, BoundaryCfg, C2mPlan, ComplexShares,
    M2cPlan, RunStats, K_BITS,
};
use veil_core::mpc::{Modulus, MpcConfig, Party, PartyId, RingShares};
use veil_core::params::{self, CkksParams};
use veil_core::serial::ciphertext_len;

use crate::mpc::drive;
use crate::netem::{NetemLink, Shaping};
use crate::transport::{mem_pair, TcpTransport, Transport, TransportConfig};

/// EncFormer Table VII payload per conversion pair, MB: real, complex, complex + trimming.
pub const PAPER_MB: [f64; 3] = [20.97, 10.49, 6.41];

/// Network profiles: name, bandwidth (bit/s), one-way latency (s).
pub const NETWORKS: [(&str, f64, f64); 4] = [
    ("LAN", 1e9, 0.3e-3),
    ("WAN1", 400e6, 4e-3),
    ("WAN2", 100e6, 4e-3),
    ("WAN3", 100e6, 80e-3),
];

/// Options of `veil bench convert`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchConvertOptions {
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// `log2 N` (Table VII: 16).
    #[arg(long, default_value_t = 16)]
    pub log_n: u32,
    /// Multiplicative depth of the parameter set (levels above q_0; Table VII: 8).
    #[arg(long, default_value_t = 8)]
    pub depth: usize,
    /// `log2 B_max` of the boundary values.
    #[arg(long, default_value_t = 8)]
    pub log_bmax: u32,
    /// Worker threads of the CKKS backend (the optimized CPU backend; 0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Also run the complex+trim conversion between two `veil` processes over a real emulated
    /// link with this profile (`lan`, `wan1`, `wan2`, `wan3`): two network namespaces, a veth
    /// pair and `tc netem` (delay + rate; without `sch_netem`, `tbf` plus a user-space delay
    /// line), created and removed by the benchmark. Needs root; skipped with the reason
    /// otherwise.
    #[arg(long)]
    pub netem: Option<String>,
    /// Internal (netem run): act as party 0 (listens on `--addr`) or 1 (connects to it).
    #[arg(long, hide = true)]
    pub party: Option<u8>,
    /// Internal (netem run): P0's `ip:port`.
    #[arg(long, hide = true)]
    pub addr: Option<String>,
    /// Internal (netem run without `sch_netem`): run the user-space delay line, listening on
    /// this `ip:port` and forwarding to `--addr`.
    #[arg(long, hide = true)]
    pub relay: Option<String>,
    /// Internal: the delay line's one-way delay, microseconds.
    #[arg(long, hide = true, default_value_t = 0)]
    pub relay_delay_us: u64,
    /// Internal (netem run): seed of the benchmark's keys and inputs, shared by both party
    /// processes (a benchmark shortcut: P1 also derives the secret key, to check the result).
    #[arg(long, hide = true, default_value_t = 0)]
    pub seed: u64,
}

impl BenchConvertOptions {
    /// Defaults of the CLI for `log2 N`, depth and `log2 B_max`, no netem run.
    pub fn new(log_n: u32, depth: usize, log_bmax: u32) -> Self {
        BenchConvertOptions {
            json: false,
            log_n,
            depth,
            log_bmax,
            threads: 0,
            netem: None,
            party: None,
            addr: None,
            relay: None,
            relay_delay_us: 0,
            seed: 0,
        }
    }
}

/// Latency under one network profile.
#[derive(Clone, Debug, Serialize)]
pub struct NetLatency {
    /// Profile name.
    pub network: String,
    /// Total seconds (compute + overlay).
    pub total_s: f64,
}

/// One mode.
#[derive(Clone, Debug, Serialize)]
pub struct ModeReport {
    /// `real`, `complex`, `complex+trim`, `real+trim`.
    pub mode: String,
    /// Whether the protocol was run in this mode (else: payload computed, compute borrowed from
    /// the trimmed run of the same packing).
    pub measured: bool,
    /// Level of the C2M ciphertexts on the wire.
    pub c2m_level: usize,
    /// C2M ciphertexts.
    pub c2m_ciphertexts: usize,
    /// M2C ciphertexts.
    pub m2c_ciphertexts: usize,
    /// Ciphertext bytes per conversion pair (C2M + M2C).
    pub ciphertext_bytes: u64,
    /// Other MPC bytes (C2M exact rounding + Ring2Field of M2C, offline + online, both
    /// directions).
    pub mpc_bytes: u64,
    /// Of which C2M (exact rounding of stage 3).
    pub c2m_mpc_bytes: u64,
    /// Of which M2C (Ring2Field).
    pub m2c_mpc_bytes: u64,
    /// Rounds (C2M + M2C).
    pub rounds: u32,
    /// C2M rounds (ciphertext frame + exact rounding).
    pub c2m_rounds: u32,
    /// Local compute, seconds (both parties in parallel, wrappers included).
    pub compute_s: f64,
    /// Of which complexify + decomplexify, seconds.
    pub wrapper_s: f64,
    /// Largest error after C2M → M2C, ulps of `2^{-F}`.
    pub max_err_ulp: f64,
    /// Latency per network profile: compute + overlay of every byte and round (ciphertexts and
    /// MPC traffic).
    pub latency: Vec<NetLatency>,
    /// Boundary latency per network profile, EncFormer Table VII's accounting: the CKKS-side
    /// wrappers (complexify/decomplexify) plus the ciphertext payload (one round each way), the
    /// part that packing and trimming change. The MPC share conversions after decryption cost
    /// the same per real value in every mode.
    pub boundary_latency: Vec<NetLatency>,
}

/// The benchmark report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Parameter set name.
    pub params: String,
    /// `log2 N`.
    pub log_n: u32,
    /// Slots per ciphertext.
    pub slots: usize,
    /// Arrival level (depth).
    pub depth: usize,
    /// Worker threads of the CKKS backend.
    pub threads: usize,
    /// Trimmed boundary level.
    pub boundary_level: usize,
    /// C2M twiddle precision (bits) and shifts.
    pub c2m_twiddle_bits: f64,
    /// `log2` failure probability per C2M ciphertext.
    pub c2m_failure_log2: f64,
    /// Paper payloads, MB.
    pub paper_mb: [f64; 3],
    /// Modes.
    pub modes: Vec<ModeReport>,
    /// Ring2Field of the complex M2C input (`2n` values into `Z_{2^K}`): the comparison-based
    /// protocol (used before) vs the known-MSB one (used now).
    pub ring2field: R2fReport,
    /// The run over an emulated link, if asked for and possible.
    pub netem: Option<NetemReport>,
    /// Why the emulated-link run was skipped.
    pub netem_skipped: Option<String>,
}

/// Cost of Ring2Field on one batch (both directions, offline + online, as seen by P1).
#[derive(Clone, Debug, Serialize)]
pub struct R2fReport {
    /// Values converted.
    pub values: usize,
    /// `ℓ`-bit comparison + B2A ([`Party::ring_to_field`]): bytes.
    pub comparison_bytes: u64,
    /// Its rounds.
    pub comparison_rounds: u32,
    /// Known-MSB ([`Party::ring_to_field_known_msb`]): bytes.
    pub known_msb_bytes: u64,
    /// Its rounds.
    pub known_msb_rounds: u32,
}

/// Measured wall time over the emulated link vs the overlay model for the same profile.
#[derive(Clone, Debug, Serialize)]
pub struct NetemReport {
    /// Profile name.
    pub network: String,
    /// Link bandwidth, bit/s.
    pub bandwidth_bps: f64,
    /// One-way latency of the profile, s.
    pub one_way_s: f64,
    /// How the link was shaped.
    pub shaping: Shaping,
    /// The qdisc on P0's end, as `tc` shows it.
    pub qdisc: String,
    /// C2M wall time on the link (P1), s.
    pub c2m_measured_s: f64,
    /// M2C wall time on the link (P1), s.
    pub m2c_measured_s: f64,
    /// In-memory compute of C2M / M2C (same setting, P1's critical path), s.
    pub c2m_compute_s: f64,
    /// See `c2m_compute_s`.
    pub m2c_compute_s: f64,
    /// Overlay model `compute + rounds·latency + 8·bytes/bandwidth` of C2M / M2C, s.
    pub c2m_model_s: f64,
    /// See `c2m_model_s`.
    pub m2c_model_s: f64,
    /// The model with zero latency (what a rate-only link can be compared with), C2M / M2C.
    pub c2m_model_rate_only_s: f64,
    /// See `c2m_model_rate_only_s`.
    pub m2c_model_rate_only_s: f64,
    /// Bytes (both directions) and rounds of the run on the link, C2M / M2C.
    pub c2m_bytes: u64,
    /// See `c2m_bytes`.
    pub m2c_bytes: u64,
    /// C2M rounds.
    pub c2m_rounds: u32,
    /// M2C rounds.
    pub m2c_rounds: u32,
    /// Largest slot error after the round trip over the link (ulps of `2^{-F}`).
    pub max_err_ulp: f64,
}

/// What one party process of the netem run prints (one JSON line on stdout).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PartyReport {
    /// 0 or 1.
    pub party: u8,
    /// C2M wall time, s (from the end of the OT setup).
    pub c2m_s: f64,
    /// M2C wall time, s.
    pub m2c_s: f64,
    /// C2M bytes sent + received (offline + online).
    pub c2m_bytes: u64,
    /// M2C bytes sent + received.
    pub m2c_bytes: u64,
    /// C2M rounds.
    pub c2m_rounds: u32,
    /// M2C rounds.
    pub m2c_rounds: u32,
    /// P1 only: largest slot error of the round trip (ulps); 0 at P0.
    pub max_err_ulp: f64,
}

struct Measured {
    c2m: RunStats,
    m2c: RunStats,
    /// P1's wall time of C2M and of M2C (in memory).
    c2m_s: f64,
    m2c_s: f64,
    c2m_cts: usize,
    compute_s: f64,
    wrapper_s: f64,
    max_err_ulp: f64,
}

fn rng() -> ChaCha20Rng {
    ChaCha20Rng::from_rng(OsRng).expect("OS randomness")
}

fn party(id: PartyId) -> Result<Party<ChaCha20Rng>, String> {
    Party::new(id, MpcConfig::ENCFORMER, rng()).map_err(|e| e.to_string())
}

#[allow(clippy::too_many_arguments)]
fn measure(
    ck: &Ckks<CpuBackend>,
    sk: &SecretKey,
    pk: &PublicKey<CpuBackend>,
    keys: &veil_core::ckks::EvaluationKeys<CpuBackend>,
    c2m: &C2mPlan,
    m2c: &M2cPlan,
    xs: &[f64],
    ys: &[f64],
    complex: bool,
) -> Result<Measured, String> {
    let p = ck.params();
    let (n, top) = (c2m.slots(), p.max_level());
    let mut r = rng();
    let enc = |v: &[f64], r: &mut ChaCha20Rng| -> Result<Ciphertext<CpuBackend>, String> {
        let pt = ck
            .encode_real(v, n, top, c2m.scale())
            .map_err(|e| e.to_string())?;
        ck.encrypt_sk(sk, &pt, r).map_err(|e| e.to_string())
    };
    let cx = enc(xs, &mut r)?;
    let cy = enc(ys, &mut r)?;
    let t0 = Instant::now();
    let mut wrapper = Duration::ZERO;
    let cts = if complex {
        let w = Instant::now();
        let z = complexify(ck, &cx, &cy).map_err(|e| e.to_string())?;
        wrapper += w.elapsed();
        vec![z]
    } else {
        vec![cx, cy]
    };
    let count = cts.len();
    let cfg = TransportConfig {
        timeout: Duration::from_secs(600),
        max_frame: 1 << 30,
    };
    let (mut t0_, mut t1_) = mem_pair(cfg);
    type Out0 = Result<(RunStats, RunStats), String>;
    type Out1 = Result<(Vec<Ciphertext<CpuBackend>>, RunStats, RunStats, f64, f64), String>;
    let (o0, o1): (Out0, Out1) = std::thread::scope(|s| {
        let h = s.spawn(|| -> Out1 {
            let mut p1 = party(PartyId::P1)?;
            drive(p1.channel(), p1.setup(), &mut t1_).map_err(|e| e.to_string())?;
            let t = Instant::now();
            let (sh, a) = drive(p1.channel(), c2m_p1(&mut p1, ck, pk, c2m, &cts), &mut t1_)
                .map_err(|e| e.to_string())?;
            let c2m_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let sh: Vec<ComplexShares> = reshape(sh, complex);
            let (out, b) = drive(p1.channel(), m2c_p1(&mut p1, ck, m2c, &sh), &mut t1_)
                .map_err(|e| e.to_string())?;
            Ok((out, a, b, c2m_s, t.elapsed().as_secs_f64()))
        });
        let r0 = (|| -> Out0 {
            let mut p0 = party(PartyId::P0)?;
            drive(p0.channel(), p0.setup(), &mut t0_).map_err(|e| e.to_string())?;
            let (sh, a) = drive(p0.channel(), c2m_p0(&mut p0, ck, sk, c2m, count), &mut t0_)
                .map_err(|e| e.to_string())?;
            let sh = reshape(sh, complex);
            let b = drive(p0.channel(), m2c_p0(&mut p0, ck, sk, m2c, &sh), &mut t0_)
                .map_err(|e| e.to_string())?;
            Ok((a, b))
        })();
        (r0, h.join().unwrap_or_else(|_| Err("P1 panicked".into())))
    });
    let (_c2m0, _m2c0) = o0?;
    let (out, c2m_st, m2c_st, c2m_s, m2c_s) = o1?;
    let (ox, oy) = if complex {
        let w = Instant::now();
        let pair = decomplexify(ck, &out[0], keys).map_err(|e| e.to_string())?;
        wrapper += w.elapsed();
        pair
    } else {
        let mut it = out.into_iter();
        (it.next().unwrap(), it.next().unwrap())
    };
    let compute_s = t0.elapsed().as_secs_f64();
    let f = (1u64 << MpcConfig::ENCFORMER.ring.frac) as f64;
    let dx = ck.decrypt_decode(sk, &ox).map_err(|e| e.to_string())?;
    let dy = ck.decrypt_decode(sk, &oy).map_err(|e| e.to_string())?;
    let mut worst = 0f64;
    for k in 0..n {
        worst = worst
            .max((dx[k].re - xs[k]).abs() * f)
            .max((dy[k].re - ys[k]).abs() * f);
    }
    Ok(Measured {
        c2m: c2m_st,
        m2c: m2c_st,
        c2m_s,
        m2c_s,
        c2m_cts: count,
        compute_s,
        wrapper_s: wrapper.as_secs_f64(),
        max_err_ulp: worst,
    })
}

/// Real mode: C2M (a real-only plan) yields one `[[x]]` per ciphertext, M2C gets
/// real-only inputs. Complex mode: unchanged.
fn reshape(sh: Vec<ComplexShares>, complex: bool) -> Vec<ComplexShares> {
    if complex {
        sh
    } else {
        sh.into_iter()
            .map(|c| ComplexShares {
                re: c.re,
                im: RingShares::default(),
            })
            .collect()
    }
}

fn latency(compute: f64, bytes: u64, rounds: u32) -> Vec<NetLatency> {
    NETWORKS
        .iter()
        .map(|&(name, bw, lat)| NetLatency {
            network: name.into(),
            total_s: compute + rounds as f64 * lat + 8.0 * bytes as f64 / bw,
        })
        .collect()
}

/// The optimized CPU backend with `threads` workers (0: one per core).
fn backend(p: &CkksParams, threads: usize) -> Result<CpuBackend, String> {
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    CpuBackend::fast(p, threads).map_err(|e| e.to_string())
}

fn params_of(opts: &BenchConvertOptions) -> Result<CkksParams, String> {
    let lit = if opts.log_n >= 14 {
        params::ckks_128_custom(opts.log_n, opts.depth, 3)
    } else {
        // Small rings cannot be 128-bit secure at this depth: smoke runs only.
        let mut l = params::insecure_logn12();
        l.log_n = opts.log_n;
        l.log_q = std::iter::once(60)
            .chain(std::iter::repeat_n(40, opts.depth))
            .collect();
        l.name = format!("INSECURE_LOGN{}_DEPTH{}", opts.log_n, opts.depth);
        l
    };
    lit.validate().map_err(|e| e.to_string())
}

/// Channel bytes of one run as seen by one party: sent + received, offline + online.
fn chan_bytes(s: &RunStats) -> u64 {
    let a = s.channel.offline_online();
    a.bytes_sent + a.bytes_recv
}

/// The benchmark's boundary values (deterministic).
fn inputs(n: usize, log_bmax: u32) -> (Vec<f64>, Vec<f64>) {
    let b = (1u64 << log_bmax) as f64;
    let xs: Vec<f64> = (0..n).map(|i| ((i as f64 * 0.7137).sin()) * b).collect();
    let ys: Vec<f64> = (0..n).map(|i| ((i as f64 * 0.3311).cos()) * b).collect();
    (xs, ys)
}

/// Ring2Field of `values` elements into `Z_{2^K}` with both protocols (in memory).
fn r2f_costs(values: usize, log_bound: u32) -> Result<R2fReport, String> {
    let q = Modulus::new(1u128 << K_BITS).map_err(|e| e.to_string())?;
    let cfg = TransportConfig {
        timeout: Duration::from_secs(600),
        max_frame: 1 << 30,
    };
    let (mut t0, mut t1) = mem_pair(cfg);
    let ring = MpcConfig::ENCFORMER.ring;
    let mut r = rng();
    // Shares of zero: the cost does not depend on the values.
    let x0: Vec<u64> = (0..values).map(|_| r.next_u64() & ring.mask()).collect();
    let x1: Vec<u64> = x0.iter().map(|&v| ring.sub(0, v)).collect();
    let one =
        |id: PartyId, x: Vec<u64>, t: &mut dyn Transport| -> Result<[(u64, u32); 2], String> {
            let mut p = party(id)?;
            drive(p.channel(), p.setup(), t).map_err(|e| e.to_string())?;
            let ch = p.channel();
            let x = RingShares::new(x);
            // Depths restart with every session: each run's depth is its round count.
            let s0 = ch.stats();
            drive(ch.clone(), p.ring_to_field(&x, &q), t).map_err(|e| e.to_string())?;
            let (s1, d1) = (ch.stats(), ch.depth());
            drive(ch.clone(), p.ring_to_field_known_msb(&x, &q, log_bound), t)
                .map_err(|e| e.to_string())?;
            let (s2, d2) = (ch.stats(), ch.depth());
            let b = |a: &veil_core::mpc::Stats, e: &veil_core::mpc::Stats| {
                let d = a.since(e).offline_online();
                d.bytes_sent + d.bytes_recv
            };
            Ok([(b(&s1, &s0), d1), (b(&s2, &s1), d2)])
        };
    let (a, _) = std::thread::scope(|s| {
        let h = s.spawn(|| one(PartyId::P1, x1, &mut t1));
        let r0 = one(PartyId::P0, x0, &mut t0);
        (h.join().unwrap_or_else(|_| Err("P1 panicked".into())), r0)
    });
    let [(cb, cr), (kb, kr)] = a?;
    Ok(R2fReport {
        values,
        comparison_bytes: cb,
        comparison_rounds: cr,
        known_msb_bytes: kb,
        known_msb_rounds: kr,
    })
}

/// Runs the benchmark (and, with `--netem`, the emulated-link measurement).
pub fn run(opts: &BenchConvertOptions) -> Result<Report, String> {
    let p = params_of(opts)?;
    let be = backend(&p, opts.threads)?;
    let backend_threads = be.threads();
    let ck = Ckks::new(Arc::new(be));
    let mut r = rng();
    let sk = ck.gen_secret_key(&mut r);
    let pk = ck.gen_public_key(&sk, &mut r).map_err(|e| e.to_string())?;
    let keys = ck
        .gen_evaluation_keys(&sk, &[], true, &mut r, |_, _| {})
        .map_err(|e| e.to_string())?;
    let n = p.max_slots();
    let scale = p.default_scale();
    let bcfg = BoundaryCfg::encformer(opts.log_bmax);
    let c2m = C2mPlan::shortest_admissible(&p, n, scale, bcfg).map_err(|e| e.to_string())?;
    let m2c = M2cPlan::new(&p, p.max_level(), n, scale, bcfg).map_err(|e| e.to_string())?;
    let (xs, ys) = inputs(n, opts.log_bmax);
    let c2m_real = c2m.clone().real_only();
    let real = measure(&ck, &sk, &pk, &keys, &c2m_real, &m2c, &xs, &ys, false)?;
    let cplx = measure(&ck, &sk, &pk, &keys, &c2m, &m2c, &xs, &ys, true)?;
    let top = p.max_level();
    let m2c_ct = ciphertext_len(&p, top, 1, true) as u64;
    let mut modes = Vec::new();
    for (name, m, trim, measured) in [
        ("real", &real, false, false),
        ("complex", &cplx, false, false),
        ("complex+trim", &cplx, true, true),
        ("real+trim", &real, true, true),
    ] {
        let level = if trim { c2m.level() } else { top };
        let k = m.c2m_cts;
        let ct_bytes = k as u64 * ciphertext_len(&p, level, 1, false) as u64 + k as u64 * m2c_ct;
        if measured && ct_bytes != m.c2m.ciphertext_bytes + m.m2c.ciphertext_bytes {
            return Err(format!(
                "{name}: measured ciphertext bytes differ from the serialized sizes"
            ));
        }
        // Channel bytes as seen by P1 (sent + received) minus the ciphertext payloads.
        let c2m_mpc_bytes = chan_bytes(&m.c2m).saturating_sub(m.c2m.ciphertext_bytes);
        let m2c_mpc_bytes = chan_bytes(&m.m2c).saturating_sub(m.m2c.ciphertext_bytes);
        let mpc_bytes = c2m_mpc_bytes + m2c_mpc_bytes;
        let rounds = m.c2m.rounds + m.m2c.rounds;
        modes.push(ModeReport {
            mode: name.into(),
            measured,
            c2m_level: level,
            c2m_ciphertexts: k,
            m2c_ciphertexts: k,
            ciphertext_bytes: ct_bytes,
            mpc_bytes,
            c2m_mpc_bytes,
            m2c_mpc_bytes,
            rounds,
            c2m_rounds: m.c2m.rounds,
            compute_s: m.compute_s,
            wrapper_s: m.wrapper_s,
            max_err_ulp: m.max_err_ulp,
            latency: latency(m.compute_s, ct_bytes + mpc_bytes, rounds),
            boundary_latency: latency(m.wrapper_s, ct_bytes, 2),
        });
    }
    let ring2field = r2f_costs(2 * n, opts.log_bmax + MpcConfig::ENCFORMER.ring.frac + 1)?;
    let (netem, netem_skipped) = match &opts.netem {
        None => (None, None),
        Some(profile) => match run_netem(opts, profile, &cplx) {
            Ok(r) => (Some(r), None),
            Err(NetemFail::Skipped(why)) => (None, Some(why)),
            Err(NetemFail::Failed(e)) => return Err(format!("netem run: {e}")),
        },
    };
    Ok(Report {
        params: p.name().into(),
        log_n: opts.log_n,
        slots: n,
        depth: opts.depth,
        threads: backend_threads,
        boundary_level: c2m.level(),
        c2m_twiddle_bits: c2m.twiddle_bits(),
        c2m_failure_log2: c2m.failure_log2(),
        paper_mb: PAPER_MB,
        modes,
        ring2field,
        netem,
        netem_skipped,
    })
}

enum NetemFail {
    /// Prerequisites missing (not root, no `ip`/`tc`, no namespaces): reported, not an error.
    Skipped(String),
    /// The run itself failed.
    Failed(String),
}

/// Kills the party processes if the orchestrator leaves early (error, timeout, panic).
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn run_netem(
    opts: &BenchConvertOptions,
    profile: &str,
    mem: &Measured,
) -> Result<NetemReport, NetemFail> {
    let &(name, bw, lat) = NETWORKS
        .iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(profile))
        .ok_or_else(|| {
            NetemFail::Failed(format!("unknown profile {profile} (lan, wan1, wan2, wan3)"))
        })?;
    if let Some(why) = crate::netem::unavailable_reason() {
        return Err(NetemFail::Skipped(why));
    }
    let link = NetemLink::new(Duration::from_secs_f64(lat), bw).map_err(NetemFail::Skipped)?;
    let fail = |e: String| NetemFail::Failed(e);
    let exe = std::env::current_exe().map_err(|e| fail(e.to_string()))?;
    let exe = exe.to_string_lossy().into_owned();
    let seed = OsRng.next_u64().to_string();
    let addr = format!("{}:{}", link.addr(0), 47_000 + std::process::id() % 1000);
    let (log_n, depth, log_b) = (
        opts.log_n.to_string(),
        opts.depth.to_string(),
        opts.log_bmax.to_string(),
    );
    let mut kids = Kids(Vec::new());
    // Without sch_netem, a delay line in P1's namespace adds the one-way delay each way; P1
    // connects to it on its loopback and it forwards over the (rate-limited) veth.
    let mut shaping = link.shaping();
    let mut p1_addr = addr.clone();
    if shaping == Shaping::TbfRateOnly && lat > 0.0 {
        let relay = format!("127.0.0.1:{}", 48_000 + std::process::id() % 1000);
        let child = Command::new("ip")
            .args(["netns", "exec", link.namespace(1), &exe, "bench", "convert"])
            .args(["--relay", &relay, "--addr", &addr])
            .args([
                "--relay-delay-us",
                &((lat * 1e6).round() as u64).to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("spawning the delay line: {e}")))?;
        kids.0.push(child);
        shaping = Shaping::TbfRateUserDelay;
        p1_addr = relay;
    }
    let relays = kids.0.len();
    for i in 0..2 {
        let a = if i == 1 { &p1_addr } else { &addr };
        let child = Command::new("ip")
            .args(["netns", "exec", link.namespace(i), &exe, "bench", "convert"])
            .args(["--log-n", &log_n, "--depth", &depth, "--log-bmax", &log_b])
            .args(["--seed", &seed, "--addr", a, "--party", &i.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("spawning party {i}: {e}")))?;
        kids.0.push(child);
    }
    // Both parties finish within the transport timeout of every receive; add slack for setup.
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut outs: [Option<PartyReport>; 2] = [None, None];
    loop {
        let mut done = true;
        for (i, c) in kids.0.iter_mut().skip(relays).enumerate() {
            if outs[i].is_some() {
                continue;
            }
            match c.try_wait().map_err(|e| fail(e.to_string()))? {
                None => done = false,
                Some(st) => {
                    let (mut o, mut e) = (String::new(), String::new());
                    if let Some(mut s) = c.stdout.take() {
                        let _ = s.read_to_string(&mut o);
                    }
                    if let Some(mut s) = c.stderr.take() {
                        let _ = s.read_to_string(&mut e);
                    }
                    if !st.success() {
                        return Err(fail(format!("party {i} failed ({st}): {}", e.trim())));
                    }
                    let line = o.lines().last().unwrap_or("");
                    let rep: PartyReport = serde_json::from_str(line)
                        .map_err(|x| fail(format!("party {i} output {line:?}: {x}")))?;
                    outs[i] = Some(rep);
                }
            }
        }
        if done {
            break;
        }
        if Instant::now() > deadline {
            return Err(fail("party processes timed out".into()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let p1 = outs[1].take().ok_or_else(|| fail("no P1 report".into()))?;
    let model = |compute: f64, bytes: u64, rounds: u32, lat: f64| {
        compute + rounds as f64 * lat + 8.0 * bytes as f64 / bw
    };
    let (cb, mb) = (chan_bytes(&mem.c2m), chan_bytes(&mem.m2c));
    let (cr, mr) = (mem.c2m.rounds, mem.m2c.rounds);
    Ok(NetemReport {
        network: name.into(),
        bandwidth_bps: bw,
        one_way_s: lat,
        shaping,
        qdisc: link.qdisc(0),
        c2m_measured_s: p1.c2m_s,
        m2c_measured_s: p1.m2c_s,
        c2m_compute_s: mem.c2m_s,
        m2c_compute_s: mem.m2c_s,
        c2m_model_s: model(mem.c2m_s, cb, cr, lat),
        m2c_model_s: model(mem.m2c_s, mb, mr, lat),
        c2m_model_rate_only_s: model(mem.c2m_s, cb, cr, 0.0),
        m2c_model_rate_only_s: model(mem.m2c_s, mb, mr, 0.0),
        c2m_bytes: p1.c2m_bytes,
        m2c_bytes: p1.m2c_bytes,
        c2m_rounds: p1.c2m_rounds,
        m2c_rounds: p1.m2c_rounds,
        max_err_ulp: p1.max_err_ulp,
    })
}

/// Accepts one connection on `addr` within the transport timeout.
fn accept_within(addr: &str, cfg: TransportConfig) -> Result<TcpTransport, String> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + cfg.timeout;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                return TcpTransport::new(s, cfg).map_err(|e| format!("{e:?}"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err("no peer connected before the timeout".into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The delay line of a netem run on a kernel without `sch_netem` (`--relay ip:port --addr
/// upstream --relay-delay-us d`, hidden flags): see [`crate::netem::run_delay_relay`].
pub fn run_relay(opts: &BenchConvertOptions) -> Result<(), String> {
    let listen = opts.relay.as_deref().ok_or("--relay needs ip:port")?;
    let upstream = opts.addr.as_deref().ok_or("--relay needs --addr")?;
    crate::netem::run_delay_relay(
        listen,
        upstream,
        Duration::from_micros(opts.relay_delay_us),
        Duration::from_secs(600),
    )
}

/// One party process of the netem run (`--party 0|1 --addr ip:port --seed s`): complex+trim
/// C2M then M2C over TCP, timed from the end of the OT setup.
pub fn run_party(opts: &BenchConvertOptions) -> Result<PartyReport, String> {
    let id = match opts.party {
        Some(0) => PartyId::P0,
        Some(1) => PartyId::P1,
        _ => return Err("--party must be 0 or 1".into()),
    };
    let addr = opts.addr.as_deref().ok_or("--party needs --addr")?;
    let p = params_of(opts)?;
    let ck = Ckks::new(Arc::new(backend(&p, opts.threads)?));
    let mut r = ChaCha20Rng::seed_from_u64(opts.seed);
    let sk = ck.gen_secret_key(&mut r);
    let pk = ck.gen_public_key(&sk, &mut r).map_err(|e| e.to_string())?;
    let n = p.max_slots();
    let scale = p.default_scale();
    let bcfg = BoundaryCfg::encformer(opts.log_bmax);
    let c2m = C2mPlan::shortest_admissible(&p, n, scale, bcfg).map_err(|e| e.to_string())?;
    let m2c = M2cPlan::new(&p, p.max_level(), n, scale, bcfg).map_err(|e| e.to_string())?;
    let (xs, ys) = inputs(n, opts.log_bmax);
    let cfg = TransportConfig {
        timeout: Duration::from_secs(600),
        max_frame: 1 << 30,
    };
    let mut t: Box<dyn Transport> = match id {
        PartyId::P0 => Box::new(accept_within(addr, cfg)?),
        PartyId::P1 => Box::new(TcpTransport::connect(addr, cfg).map_err(|e| format!("{e:?}"))?),
    };
    let mut party = party(id)?;
    let e = |e: crate::mpc::DriverError| e.to_string();
    let z = if id == PartyId::P1 {
        let top = p.max_level();
        let enc = |v: &[f64]| -> Result<Ciphertext<CpuBackend>, String> {
            let pt = ck
                .encode_real(v, n, top, scale)
                .map_err(|e| e.to_string())?;
            ck.encrypt_sk(&sk, &pt, &mut rng())
                .map_err(|e| e.to_string())
        };
        Some(complexify(&ck, &enc(&xs)?, &enc(&ys)?).map_err(|e| e.to_string())?)
    } else {
        None
    };
    drive(party.channel(), party.setup(), t.as_mut()).map_err(e)?;
    let t0 = Instant::now();
    let (c2m_st, m2c_st, c2m_s, m2c_s, err) = match &z {
        None => {
            let (sh, a) = drive(
                party.channel(),
                c2m_p0(&mut party, &ck, &sk, &c2m, 1),
                t.as_mut(),
            )
            .map_err(e)?;
            let c2m_s = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let b = drive(
                party.channel(),
                m2c_p0(&mut party, &ck, &sk, &m2c, &sh),
                t.as_mut(),
            )
            .map_err(e)?;
            (a, b, c2m_s, t1.elapsed().as_secs_f64(), 0.0)
        }
        Some(z) => {
            let cts = std::slice::from_ref(z);
            let (sh, a) = drive(
                party.channel(),
                c2m_p1(&mut party, &ck, &pk, &c2m, cts),
                t.as_mut(),
            )
            .map_err(e)?;
            let c2m_s = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let (out, b) = drive(
                party.channel(),
                m2c_p1(&mut party, &ck, &m2c, &sh),
                t.as_mut(),
            )
            .map_err(e)?;
            let m2c_s = t1.elapsed().as_secs_f64();
            let d = ck.decrypt_decode(&sk, &out[0]).map_err(|e| e.to_string())?;
            let f = (1u64 << MpcConfig::ENCFORMER.ring.frac) as f64;
            let worst = (0..n).fold(0f64, |w, k| {
                w.max((d[k].re - xs[k]).abs() * f)
                    .max((d[k].im - ys[k]).abs() * f)
            });
            (a, b, c2m_s, m2c_s, worst)
        }
    };
    Ok(PartyReport {
        party: opts.party.unwrap_or(0),
        c2m_s,
        m2c_s,
        c2m_bytes: chan_bytes(&c2m_st),
        m2c_bytes: chan_bytes(&m2c_st),
        c2m_rounds: c2m_st.rounds,
        m2c_rounds: m2c_st.rounds,
        max_err_ulp: err,
    })
}

/// Human-readable tables.
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "CKKS<->MPC conversion of two real vectors  {}  N=2^{} slots={} depth={} threads={} boundary level={} (C2M twiddles {:.0} bits, failure 2^{:.1}/ct)",
        r.params, r.log_n, r.slots, r.depth, r.threads, r.boundary_level, r.c2m_twiddle_bits, r.c2m_failure_log2
    );
    let _ = writeln!(
        s,
        "  {:<13} {:>4} {:>5} {:>10} {:>10} {:>7} {:>9} {:>9} {:>8}  latency LAN/WAN1/WAN2/WAN3 (s)",
        "mode",
        "run",
        "cts",
        "ct MB",
        "MPC MB",
        "rounds",
        "compute",
        "wrappers",
        "err ulp",
    );
    for m in &r.modes {
        let lat: Vec<String> = m
            .latency
            .iter()
            .map(|l| format!("{:.2}", l.total_s))
            .collect();
        let _ = writeln!(
            s,
            "  {:<13} {:>4} {:>2}+{:<2} {:>10.2} {:>10.2} {:>7} {:>8.2}s {:>8.3}s {:>8.3}  {}",
            m.mode,
            if m.measured { "yes" } else { "est" },
            m.c2m_ciphertexts,
            m.m2c_ciphertexts,
            m.ciphertext_bytes as f64 / 1e6,
            m.mpc_bytes as f64 / 1e6,
            m.rounds,
            m.compute_s,
            m.wrapper_s,
            m.max_err_ulp,
            lat.join(" / ")
        );
    }
    let _ = writeln!(
        s,
        "  paper (Table VII) ciphertext MB per pair: real {:.2}, complex {:.2}, complex+trim {:.2}",
        r.paper_mb[0], r.paper_mb[1], r.paper_mb[2]
    );
    for m in &r.modes {
        let _ = writeln!(
            s,
            "  {:<13} MPC MB: C2M exact rounding {:.2} ({} rounds incl. the ciphertext), M2C Ring2Field {:.2}",
            m.mode,
            m.c2m_mpc_bytes as f64 / 1e6,
            m.c2m_rounds,
            m.m2c_mpc_bytes as f64 / 1e6
        );
    }
    if let (Some(re), Some(cx), Some(ct)) = (
        r.modes.iter().find(|m| m.mode == "real"),
        r.modes.iter().find(|m| m.mode == "complex"),
        r.modes.iter().find(|m| m.mode == "complex+trim"),
    ) {
        for (what, pick) in [
            (
                "boundary (wrappers + ciphertexts, Table VII accounting)",
                (|m: &ModeReport| m.boundary_latency.clone()) as fn(&ModeReport) -> Vec<NetLatency>,
            ),
            (
                "total (compute + ciphertexts + MPC traffic)",
                |m: &ModeReport| m.latency.clone(),
            ),
        ] {
            let (a, b, c) = (pick(re), pick(cx), pick(ct));
            let cols: Vec<String> = a
                .iter()
                .zip(b.iter().zip(c.iter()))
                .map(|(a, (b, c))| {
                    format!(
                        "{} {:.3}/{:.3}/{:.3} s = {:.2}x/{:.2}x",
                        a.network,
                        a.total_s,
                        b.total_s,
                        c.total_s,
                        a.total_s / b.total_s,
                        a.total_s / c.total_s
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "  speedup over real, {what}: real/complex/complex+trim  {}",
                cols.join("  ")
            );
        }
    }
    let f = &r.ring2field;
    let _ = writeln!(
        s,
        "  Ring2Field of {} values into Z_2^123: comparison-based {:.2} MB ({:.1} B/value, {} rounds), known-MSB {:.2} MB ({:.1} B/value, {} rounds)",
        f.values,
        f.comparison_bytes as f64 / 1e6,
        f.comparison_bytes as f64 / f.values.max(1) as f64,
        f.comparison_rounds,
        f.known_msb_bytes as f64 / 1e6,
        f.known_msb_bytes as f64 / f.values.max(1) as f64,
        f.known_msb_rounds
    );
    if let Some(why) = &r.netem_skipped {
        let _ = writeln!(s, "  netem run skipped: {why}");
    }
    if let Some(n) = &r.netem {
        let _ = writeln!(
            s,
            "  emulated link {} ({:.0} Mbit/s, {:.1} ms one-way; {:?}: {})",
            n.network,
            n.bandwidth_bps / 1e6,
            n.one_way_s * 1e3,
            n.shaping,
            n.qdisc
        );
        let _ = writeln!(
            s,
            "    {:<5} {:>10} {:>10} {:>10} {:>7} {:>14} {:>7} {:>10} {:>7}",
            "", "measured", "compute", "model", "ratio", "model(lat=0)", "ratio", "MB", "rounds"
        );
        for (name, meas, comp, model, m0, b, rd) in [
            (
                "C2M",
                n.c2m_measured_s,
                n.c2m_compute_s,
                n.c2m_model_s,
                n.c2m_model_rate_only_s,
                n.c2m_bytes,
                n.c2m_rounds,
            ),
            (
                "M2C",
                n.m2c_measured_s,
                n.m2c_compute_s,
                n.m2c_model_s,
                n.m2c_model_rate_only_s,
                n.m2c_bytes,
                n.m2c_rounds,
            ),
            (
                "pair",
                n.c2m_measured_s + n.m2c_measured_s,
                n.c2m_compute_s + n.m2c_compute_s,
                n.c2m_model_s + n.m2c_model_s,
                n.c2m_model_rate_only_s + n.m2c_model_rate_only_s,
                n.c2m_bytes + n.m2c_bytes,
                n.c2m_rounds + n.m2c_rounds,
            ),
        ] {
            let _ = writeln!(
                s,
                "    {:<5} {:>9.3}s {:>9.3}s {:>9.3}s {:>7.2} {:>13.3}s {:>7.2} {:>10.2} {:>7}",
                name,
                meas,
                comp,
                model,
                meas / model,
                m0,
                meas / m0,
                b as f64 / 1e6,
                rd
            );
        }
        let _ = writeln!(
            s,
            "    round-trip max error over the link: {:.3} ulp",
            n.max_err_ulp
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ring_smoke() {
        let r = run(&BenchConvertOptions::new(10, 3, 8)).unwrap();
        print!("{}", render(&r));
        let by = |m: &str| r.modes.iter().find(|x| x.mode == m).unwrap().clone();
        let (re, cx, ct) = (by("real"), by("complex"), by("complex+trim"));
        assert_eq!(re.ciphertext_bytes, 2 * cx.ciphertext_bytes);
        assert!(ct.ciphertext_bytes < cx.ciphertext_bytes);
        assert!(ct.max_err_ulp < 1.5 && by("real+trim").max_err_ulp < 1.5);
    }
}

#[cfg(test)]
mod table_vii {
    use super::*;

    /// The Table VII setting (N = 2^16, depth 8), a few seconds on 2 cores with the fast
    /// backend: the ciphertext bytes of every mode stay within the paper's.
    #[test]
    fn table_vii_setting() {
        let r = run(&BenchConvertOptions::new(16, 8, 8)).unwrap();
        print!("{}", render(&r));
        println!("{}", serde_json::to_string(&r).unwrap());
        for (m, paper) in r.modes.iter().zip(PAPER_MB) {
            assert!(m.ciphertext_bytes as f64 / 1e6 <= paper, "{}", m.mode);
        }
    }
}
