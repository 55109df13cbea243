//! `veil-bench mpc`: per-primitive wall time, bytes per element and rounds at
//! `n` elements (default `2^16`), `ℓ = 43`, `F = 13`, both parties as threads
//! of this process, over the in-memory duplex and over TCP on 127.0.0.1.
//! Each party seeds ChaCha20 from OS entropy. Times are the slower party's;
//! bytes count both directions, offline (OT extension, triples) + online;
//! the one-time base-OT setup is reported separately, as SPU does.
//!
//! OT modes: `iknp` (extension on demand), `pool` (IKNP random COTs preprocessed offline,
//! derandomized online with 1 bit each) and `silent` (the same pools filled by the Ferret
//! silent OT of `veil_core::mpc::ot::silent`, bootstrapped once from IKNP in setup); with
//! `silent` the report also has the raw generator: COTs per second on one thread and bits per
//! COT, with and without the bootstrap.
//!
//! Both parties run through [`veil_host::harness::run_pair`]. The SPU columns are what
//! [`crate::peers`] gives: measured in this run (`--peers`, with `../shared/peers` present; only
//! then are there ratio columns), and the figures recorded on
//! [`crate::peers::SPU_REFERENCE_DATE`], in their own columns, never divided into; the report
//! names both sources (`spu_source`, `spu_recorded_source`).

pub mod cli;
mod session;

use crate::error::{mpc, protocol};
use crate::peers::{opt_cell, PeerFigures, SpuColumns, SpuSources};
use crate::BenchError;
use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, RngCore, SeedableRng};
use serde::Serialize;
pub(crate) use session::{
    est_silent_bytes, measure, new_party, steady_bytes_per_cot, timed_setup, Measured,
};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use veil_core::mpc::ot::silent::{SilentParams, FERRET_EMP_OT};
use veil_core::mpc::{
    BoolShares, FieldShares, HeTripleParams, HeTriples, Modulus, MpcConfig, Party, PartyId,
    RingShares, Stats,
};
use veil_host::harness::run_pair;
use veil_host::mpc::{drive, DriverError};
use veil_host::transport::{Transport, TransportConfig};

/// Transport used by a benchmark run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TransportKind {
    /// In-memory duplex.
    Memory,
    /// TCP over 127.0.0.1.
    Tcp,
}

/// Where a run's correlated OTs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum OtMode {
    /// IKNP extension on demand, with the real choice bits.
    Iknp,
    /// IKNP random COTs preprocessed offline (`Party::preprocess_ot`), derandomized online.
    Pool,
    /// The same pools filled by the silent OT (Ferret, [`FERRET_EMP_OT`]).
    Silent,
}

impl OtMode {
    /// The modes of an `--ot` value: `iknp`, `pool`, `silent`, `both` (IKNP and pool) or `all`,
    /// comma-separated, each mode once in the order given.
    pub fn parse_list(arg: &str) -> Result<Vec<OtMode>, crate::BenchError> {
        let mut modes = Vec::new();
        for v in arg.split(',').map(str::trim) {
            let add: &[OtMode] = match v {
                "iknp" => &[OtMode::Iknp],
                "pool" => &[OtMode::Pool],
                "silent" => &[OtMode::Silent],
                "both" => &[OtMode::Iknp, OtMode::Pool],
                "all" => &[OtMode::Iknp, OtMode::Pool, OtMode::Silent],
                v => {
                    return Err(crate::BenchError::InvalidOption {
                        option: "--ot",
                        value: v.into(),
                        expected: "iknp, pool, silent, both or all (comma-separated)",
                    })
                }
            };
            for m in add {
                if !modes.contains(m) {
                    modes.push(*m);
                }
            }
        }
        Ok(modes)
    }

    /// Short name (the `--ot` value).
    pub fn name(self) -> &'static str {
        match self {
            OtMode::Iknp => "iknp",
            OtMode::Pool => "pool",
            OtMode::Silent => "silent",
        }
    }

    pub(crate) fn preprocessed(self) -> bool {
        !matches!(self, OtMode::Iknp)
    }
}

/// Where a run's Beaver triples come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TripleMode {
    /// Gilboa's OT multiplication over the run's OT (`ℓ(ℓ+1)` correction bits and `2ℓ` COTs per
    /// triple).
    Gilboa,
    /// RLWE oblivious linear evaluation ([`veil_core::mpc::HeTriples`], `N = 2^14`); its key
    /// travels in the setup.
    Rlwe,
}

impl TripleMode {
    /// The mode of a `--triples` value: `gilboa` or `rlwe`.
    pub fn parse(arg: &str) -> Result<TripleMode, crate::BenchError> {
        match arg.trim() {
            "gilboa" => Ok(TripleMode::Gilboa),
            "rlwe" => Ok(TripleMode::Rlwe),
            v => Err(crate::BenchError::InvalidOption {
                option: "--triples",
                value: v.into(),
                expected: "gilboa or rlwe",
            }),
        }
    }

    /// Short name (the `--triples` value).
    pub fn name(self) -> &'static str {
        match self {
            TripleMode::Gilboa => "gilboa",
            TripleMode::Rlwe => "rlwe",
        }
    }
}

/// Benchmark options.
#[derive(Clone, Debug)]
pub struct BenchMpcOptions {
    /// Elements per primitive.
    pub n: usize,
    /// Transports to run.
    pub transports: Vec<TransportKind>,
    /// Engine configuration.
    pub cfg: MpcConfig,
    /// Primitives: mul, trunc, less, relu, select, b2a, ring2field, field2ring.
    pub ops: Vec<String>,
    /// Receive timeout.
    pub timeout: Duration,
    /// OT modes to run.
    pub ot_modes: Vec<OtMode>,
    /// Source of the Beaver triples (multiplication).
    pub triples: TripleMode,
    /// Silent-OT parameters of [`OtMode::Silent`].
    pub silent: SilentParams,
    /// COTs per direction of the raw silent-generator measurement (0: skipped).
    pub generator_cots: usize,
    /// Passes over the primitives in one session (≥ 1); the rows are the last pass's, so that
    /// with 2 or more they show the session in steady state (warm buffers, fills as they fall).
    pub passes: usize,
    /// SPU measured in this process tree ([`PeerFigures::spu_live`]): the only figures the
    /// ratio columns divide by. `None` (or figures that are not live): no ratio columns.
    pub spu_live: Option<PeerFigures>,
    /// SPU figures recorded elsewhere, printed in their own columns with their date, never
    /// divided into.
    pub spu_recorded: PeerFigures,
}

impl Default for BenchMpcOptions {
    fn default() -> Self {
        BenchMpcOptions {
            n: 1 << 16,
            transports: vec![TransportKind::Memory, TransportKind::Tcp],
            cfg: MpcConfig::ENCFORMER,
            ops: ALL_OPS.iter().map(|s| s.to_string()).collect(),
            timeout: Duration::from_secs(120),
            ot_modes: vec![OtMode::Iknp, OtMode::Pool],
            triples: TripleMode::Rlwe,
            silent: FERRET_EMP_OT,
            generator_cots: 2 * FERRET_EMP_OT.main.usable(),
            passes: 1,
            spu_live: None,
            spu_recorded: PeerFigures::spu_reference(),
        }
    }
}

/// All benchmarked primitives.
pub const ALL_OPS: [&str; 8] = [
    "mul",
    "trunc",
    "less",
    "relu",
    "select",
    "b2a",
    "ring2field",
    "field2ring",
];

/// One benchmark row.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    /// Transport.
    pub transport: TransportKind,
    /// Whether OT came from a pool preprocessed offline (pool and silent modes).
    pub ot_pool: bool,
    /// The OT mode.
    pub ot: OtMode,
    /// The source of the Beaver triples.
    pub triples: TripleMode,
    /// Primitive.
    pub primitive: String,
    /// Elements.
    pub n: usize,
    /// Wall time of the slower party, offline + online, seconds.
    pub time_s: f64,
    /// Part of `time_s` spent in OT preprocessing (pool mode), seconds.
    pub pre_s: f64,
    /// CPU time of the busier party's protocol thread, seconds.
    pub cpu_s: f64,
    /// Bytes per element, both directions, offline + online.
    pub bytes_per_elem: f64,
    /// Offline part of `bytes_per_elem`.
    pub offline_bytes_per_elem: f64,
    /// Online part of `bytes_per_elem`.
    pub online_bytes_per_elem: f64,
    /// Rounds of the whole run (offline + online): largest frame depth of
    /// each session (preprocessing, op), exact.
    pub rounds: u32,
    /// Online rounds (max over the parties of the depth spent in the online
    /// phase).
    pub online_rounds: u32,
    /// Correlated OTs per element (both directions).
    pub cots_per_elem: f64,
    /// Estimated bytes per element. IKNP rows: the IKNP extension (16 B per
    /// COT) replaced by a silent OT at 1 bit per COT, all other messages
    /// unchanged. Silent rows: the measured bytes with the silent extensions
    /// this op triggered replaced by its COTs at the generator's
    /// steady-state cost (its extension message over its usable outputs),
    /// i.e. the extensions amortized over long runs instead of charged to
    /// whichever op happened to trigger one.
    pub est_silent_bytes_per_elem: f64,
    /// SPU Cheetah's figures, measured in this run and recorded (the recorded time only at the
    /// recorded `n`).
    #[serde(flatten)]
    pub spu: SpuColumns,
    /// Pool and silent rows: `time_s` with the OT fills amortized, `time_s − pre_s` plus this
    /// op's COTs at the run's fill cost per COT (Σ `pre_s` / Σ COTs over the rows of the same
    /// transport and OT mode), as `veil-bench nonlinear` does; IKNP rows: none.
    pub amortized_s: Option<f64>,
    /// `amortized_s / spu_time_s` (live SPU only).
    pub amortized_ratio: Option<f64>,
}

/// Benchmark report.
#[derive(Clone, Debug, Serialize)]
pub struct BenchMpcReport {
    /// Ring bits ℓ.
    pub ell: u32,
    /// Fractional bits F.
    pub frac: u32,
    /// Elements per primitive.
    pub n: usize,
    /// Passes over the primitives in each session (the rows are the last pass's).
    pub passes: usize,
    /// One-time setup (base OTs, both directions): seconds per transport.
    pub setup_s: Vec<(TransportKind, f64)>,
    /// One-time setup bytes (both directions).
    pub setup_bytes: u64,
    /// Where the SPU columns come from; without SPU live, no ratio columns.
    #[serde(flatten)]
    pub spu: SpuSources,
    /// Setup of the silent mode (base OT + the IKNP bootstrap of both
    /// directions): seconds per transport.
    pub silent_setup_s: Vec<(TransportKind, f64)>,
    /// Setup bytes of the silent mode (both directions), if it ran.
    pub silent_setup_bytes: Option<u64>,
    /// Rows.
    pub rows: Vec<BenchRow>,
    /// The raw silent generator, if the silent mode ran.
    pub generator: Vec<GeneratorRow>,
}

/// The raw silent random-COT generator: both parties fill pools of `cots`
/// random COTs in each direction (`Party::preprocess_ot(cots, cots)`), each party
/// on its own thread, so each thread computes one end of all `2·cots` COTs.
#[derive(Clone, Debug, Serialize)]
pub struct GeneratorRow {
    /// Transport.
    pub transport: TransportKind,
    /// Parameter set (`n`, `k`, `t` of the main set).
    pub params: String,
    /// COTs per direction.
    pub cots: usize,
    /// Wall time of the fills (slower party), s.
    pub time_s: f64,
    /// CPU time of the busier party's thread, s.
    pub cpu_s: f64,
    /// COTs per second on one thread: `2·cots / cpu_s`.
    pub cots_per_s_thread: f64,
    /// Bytes of the setup (base OT + IKNP bootstrap, both directions).
    pub setup_bytes: u64,
    /// Bytes of the fills (both directions, frame headers included).
    pub fill_bytes: u64,
    /// `8·(setup + fill bytes) / (2·cots)`: bits per COT including the base OTs and the bootstrap.
    pub bits_per_cot_with_bootstrap: f64,
    /// `8·fill bytes / (2·cots)`: bits per COT of the fills alone (measured).
    pub bits_per_cot_fills: f64,
    /// Steady state from the message size: `8·(message + frame) / usable COTs` per extension.
    pub bits_per_cot_steady: f64,
    /// The generator alone, both ends on one thread (no pools, no transport):
    /// `cots` random COTs after the bootstrap, seconds.
    pub one_thread_both_ends_s: f64,
    /// `cots / one_thread_both_ends_s`.
    pub one_thread_both_ends_cots_per_s: f64,
}

/// The generator alone on the calling thread: base OT and IKNP in memory,
/// the bootstrap, then `cots` random COTs through both ends (seconds of the
/// last step).
fn generator_one_thread(sp: SilentParams, cots: usize) -> Result<f64, BenchError> {
    use veil_core::mpc::channel::{run_pair as core_pair, Session};
    use veil_core::mpc::ot::base::{receive, BaseSender};
    use veil_core::mpc::ot::iknp::{IknpReceiver, IknpSender};
    use veil_core::mpc::ot::silent::{SilentReceiver, SilentSender};
    use veil_core::mpc::ot::{CotReceiver, CotSender};
    use veil_core::mpc::Channel;
    let step = "the one-thread silent generator";
    let e = |source| BenchError::Mpc { step, source };
    let mut rng = ChaCha20Rng::from_rng(OsRng)?;
    // the low bit set, as `Party::setup` does (the silent OT's low-bit convention)
    let delta = ((rng.next_u64() as u128) << 64) | rng.next_u64() as u128 | 1;
    let (bs, s) = BaseSender::start(&mut rng);
    let choices: Vec<u8> = (0..128).map(|i| ((delta >> i) & 1) as u8).collect();
    let (reply, keys) = receive(&mut rng, &s, &choices);
    let pairs = bs.finish(&reply);
    let mut k = [[0u8; 16]; 2];
    rng.fill_bytes(&mut k[0]);
    rng.fill_bytes(&mut k[1]);
    let mut ss =
        SilentSender::new(IknpSender::new(delta, &keys).map_err(e)?, sp, k[0]).map_err(e)?;
    let mut sr = SilentReceiver::new(IknpReceiver::new(&pairs).map_err(e)?, sp, k[1]).map_err(e)?;
    let (cs, cr) = (Channel::new(), Channel::new());
    let (a, b) = core_pair(
        Session::new(cs.clone(), ss.bootstrap(&cs)),
        Session::new(cr.clone(), sr.bootstrap(&cr)),
    );
    a.map_err(e)?;
    b.map_err(e)?;
    let t0 = Instant::now();
    let (a, b) = core_pair(
        Session::new(cs.clone(), ss.extend_random(&cs, cots)),
        Session::new(cr.clone(), sr.extend_random(&cr, vec![0; cots])),
    );
    let el = t0.elapsed().as_secs_f64();
    let (q, (t, _)) = (a.map_err(e)?, b.map_err(e)?);
    if q.len() != cots || t.len() != cots || q[0] == t[0] && q[1] == t[1] && q[2] == t[2] {
        return Err(e(veil_core::mpc::MpcError::InvalidInput(
            "unexpected generator output",
        )));
    }
    Ok(el)
}

impl BenchMpcReport {
    /// Human-readable table: ratios to SPU Cheetah only when it ran in this process tree; the
    /// recorded SPU figures in their own columns, headed by their date.
    pub fn to_table(&self) -> String {
        let mut s = format!(
            "veil-bench mpc: n = {}, l = {}, F = {}, pass {} of each session shown; IKNP OT; setup (base OT, and the RLWE triples' key with --triples rlwe) {} bytes, {}\n",
            self.n,
            self.ell,
            self.frac,
            self.passes,
            self.setup_bytes,
            self.setup_s
                .iter()
                .map(|(k, t)| format!("{k:?} {:.3} s", t))
                .collect::<Vec<_>>()
                .join(", ")
        );
        s += &self.spu.lines();
        s += &format!(
            "{:<8} {:<6} {:<6} {:<11} {:>8} {:>7} {:>9} {:>8} {:>8} {:>7} {:>7} {:>6} {:>8} {:>8}",
            "transp",
            "OT",
            "tripl",
            "primitive",
            "time s",
            "cpu s",
            "B/elem",
            "off B/e",
            "on B/e",
            "rounds",
            "on rds",
            "COT/e",
            "silent*",
            "amort s"
        );
        if self.spu.live {
            s += &format!(
                " | {:>7} {:>7} {:>5} | {:>6} {:>6} {:>6} {:>7} {:>6}",
                "spu s", "spu B/e", "spu r", "t/spu", "B/spu", "r/spu", "silent*/spu", "a/spu"
            );
        }
        s += &self.spu.recorded_header();
        let opt = opt_cell;
        for r in &self.rows {
            s += &format!(
                "{:<8} {:<6} {:<6} {:<11} {:>8.3} {:>7.3} {:>9.1} {:>8.1} {:>8.1} {:>7} {:>7} {:>6.1} {:>8.1} {:>8}",
                format!("{:?}", r.transport),
                r.ot.name(),
                r.triples.name(),
                r.primitive,
                r.time_s,
                r.cpu_s,
                r.bytes_per_elem,
                r.offline_bytes_per_elem,
                r.online_bytes_per_elem,
                r.rounds,
                r.online_rounds,
                r.cots_per_elem,
                r.est_silent_bytes_per_elem,
                opt(r.amortized_s, 3),
            );
            if self.spu.live {
                let spu = &r.spu;
                s += &spu.live_cells(1);
                s += &format!(
                    " | {:>6} {:>6} {:>6} {:>7} {:>6}",
                    opt(spu.time_s.map(|t| r.time_s / t), 2),
                    opt(spu.bytes_per_elem.map(|b| r.bytes_per_elem / b), 1),
                    opt(spu.rounds.map(|x| r.rounds as f64 / x as f64), 2),
                    opt(
                        spu.bytes_per_elem.map(|b| r.est_silent_bytes_per_elem / b),
                        2
                    ),
                    opt(r.amortized_ratio, 2),
                );
            }
            s += &r.spu.recorded_cells(&self.spu, 1);
        }
        s += "OT iknp = IKNP extension on demand, with the real choice bits (online where the \
              protocol step is online); OT pool = random COTs preprocessed offline \
              (Party::preprocess_ot, included in time s), derandomized online with 1 bit/COT; \
              OT silent = the same pools filled by the Ferret silent OT (one party across the ops: \
              an op's offline bytes are the extensions it triggered).\n";
        s +=
            "amort s = pool/silent rows: time s − the op's fill + its COTs at the run's fill cost \
              per COT (Σ fill s / Σ COTs over the rows of the same transport and OT).\n";
        s += "tripl = source of the Beaver triples: gilboa = Gilboa's OT multiplication over the \
              row's OT; rlwe = RLWE oblivious linear evaluation (HeTriples, N = 2^14; its public \
              key, sent once, is in the setup bytes).\n";
        s +=
            "silent* (est) = iknp/pool rows: B/elem with IKNP (16 B/COT) replaced by silent OT at \
              1 bit/COT; silent rows: measured B/elem with the silent extensions the op triggered replaced by its COTs at the generator's steady-state cost.\n";
        if let Some(b) = self.silent_setup_bytes {
            s += &format!(
                "silent setup (base OT + IKNP bootstrap, both directions): {} bytes, {}\n",
                b,
                self.silent_setup_s
                    .iter()
                    .map(|(k, t)| format!("{k:?} {t:.3} s"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for g in &self.generator {
            s += &format!(
                "silent generator ({:?}, {}): {} COTs per direction in {:.3} s wall, {:.3} s CPU/thread: \
                 {:.2} M COT/s on one thread; {:.3} bit/COT with setup and bootstrap, {:.3} fills only, \
                 {:.3} steady state; the generator alone, both ends on one thread: {} COTs in {:.3} s \
                 ({:.2} M COT/s)\n",
                g.transport,
                g.params,
                g.cots,
                g.time_s,
                g.cpu_s,
                g.cots_per_s_thread / 1e6,
                g.bits_per_cot_with_bootstrap,
                g.bits_per_cot_fills,
                g.bits_per_cot_steady,
                g.cots,
                g.one_thread_both_ends_s,
                g.one_thread_both_ends_cots_per_s / 1e6
            );
        }
        s
    }
}

/// Per-party inputs of every primitive.
struct Inputs {
    x: RingShares,
    y: RingShares,
    t: RingShares,
    b: BoolShares,
    f: FieldShares,
}

/// A 104-bit modulus (two NTT-friendly primes) for the Ext benchmarks.
fn bench_modulus() -> Modulus {
    Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).expect("static modulus")
}

fn make_inputs(cfg: &MpcConfig, n: usize) -> Result<(Inputs, Inputs), rand_core::Error> {
    let r = cfg.ring;
    let q = bench_modulus();
    let mut rng = ChaCha20Rng::from_rng(OsRng)?;
    let sh = |vals: Vec<u64>, rng: &mut ChaCha20Rng| {
        let a: Vec<u64> = vals.iter().map(|_| rng.next_u64() & r.mask()).collect();
        let b: Vec<u64> = vals.iter().zip(&a).map(|(&v, &a)| r.sub(v, a)).collect();
        (RingShares::new(a), RingShares::new(b))
    };
    let small = |rng: &mut ChaCha20Rng, bits: u32| -> Vec<u64> {
        (0..n)
            .map(|_| r.from_signed((rng.next_u64() % (1 << bits)) as i64 - (1i64 << (bits - 1))))
            .collect()
    };
    let (x0, x1) = {
        let v = small(&mut rng, 24);
        sh(v, &mut rng)
    };
    let (y0, y1) = {
        let v = small(&mut rng, 24);
        sh(v, &mut rng)
    };
    let (t0, t1) = {
        let v = small(&mut rng, r.ell - 3);
        sh(v, &mut rng)
    };
    let b0: Vec<u8> = (0..n).map(|_| (rng.next_u32() & 1) as u8).collect();
    let b1: Vec<u8> = (0..n).map(|_| (rng.next_u32() & 1) as u8).collect();
    let f0: Vec<u128> = (0..n).map(|_| q.sample(&mut rng)).collect();
    let f1: Vec<u128> = x0
        .as_slice()
        .iter()
        .zip(x1.as_slice())
        .zip(&f0)
        .map(|((&a, &b), &f)| q.sub(q.from_signed(r.to_signed(r.add(a, b)) as i128), f))
        .collect();
    Ok((
        Inputs {
            x: x0,
            y: y0,
            t: t0,
            b: BoolShares::new(b0),
            f: FieldShares::new(f0),
        },
        Inputs {
            x: x1,
            y: y1,
            t: t1,
            b: BoolShares::new(b1),
            f: FieldShares::new(f1),
        },
    ))
}

fn run_op<R: rand_core::RngCore + rand_core::CryptoRng>(
    p: &mut Party<R>,
    t: &mut dyn Transport,
    op: &str,
    i: &Inputs,
) -> Result<(), DriverError> {
    let q = bench_modulus();
    let f = p.config().ring.frac;
    match op {
        "mul" => drive(p.channel(), p.mul(&i.x, &i.y), t).map(drop),
        "trunc" => drive(p.channel(), p.trunc(&i.t, f), t).map(drop),
        "less" => drive(p.channel(), p.less_than(&i.x, &i.y), t).map(drop),
        "relu" => drive(p.channel(), p.relu(&i.x), t).map(drop),
        "select" => drive(p.channel(), p.mux(&i.b, &i.x), t).map(drop),
        "b2a" => drive(p.channel(), p.b2a(&i.b), t).map(drop),
        "ring2field" => drive(p.channel(), p.ring_to_field(&i.x, &q), t).map(drop),
        // Local protocol, wrapped in a session so that counters and depths
        // are accounted like the others.
        "field2ring" => {
            let ch = p.channel();
            drive(ch, async { p.field_to_ring(&i.f, &q) }, t).map(drop)
        }
        _ => Err(DriverError::Protocol(
            veil_core::mpc::MpcError::InvalidInput("unknown primitive"),
        )),
    }
}

/// One party's run: setup wall time, setup statistics, one [`Measured`] per op.
type PartyOut = (f64, Stats, Vec<Measured<()>>);

/// CPU time of the calling thread in seconds (Linux `schedstat`), so that
/// numbers stay meaningful on a loaded machine; 0 where unavailable.
pub(crate) fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}

fn party_main(
    id: PartyId,
    cfg: MpcConfig,
    t: &mut dyn Transport,
    inp: &Inputs,
    ops: &[String],
    bar: &Barrier,
    mode: OtMode,
    silent: SilentParams,
    triples: TripleMode,
) -> Result<PartyOut, BenchError> {
    let mut rng = ChaCha20Rng::from_rng(OsRng)?;
    let src = match triples {
        TripleMode::Gilboa => None,
        TripleMode::Rlwe => {
            let params =
                HeTripleParams::new(cfg.ring.ell).map_err(mpc("the RLWE triple parameters"))?;
            Some(HeTriples::new(id, params, &mut rng).map_err(mpc("the RLWE triple source"))?)
        }
    };
    let mut p = new_party(id, cfg, rng, mode, silent)?;
    if let Some(src) = src {
        p = p.with_triple_source(Box::new(src));
    }
    let (setup_s, setup) = timed_setup(&mut p, t, bar)?;
    let out = ops
        .iter()
        .map(|op| {
            measure(&mut p, t, bar, mode.preprocessed(), op, |p, t| {
                run_op(p, t, op, inp)
            })
        })
        .collect::<Result<_, _>>()?;
    Ok((setup_s, setup, out))
}

/// Runs the benchmark.
pub fn bench_mpc(opts: &BenchMpcOptions) -> Result<BenchMpcReport, BenchError> {
    for op in &opts.ops {
        if !ALL_OPS.contains(&op.as_str()) {
            return Err(BenchError::InvalidOption {
                option: "--ops",
                value: op.clone(),
                expected: "mul, trunc, less, relu, select, b2a, ring2field, field2ring",
            });
        }
    }
    let tcfg = TransportConfig {
        timeout: opts.timeout,
        ..TransportConfig::default()
    };
    opts.silent
        .validate()
        .map_err(mpc("the silent-OT parameters"))?;
    let mut rows = Vec::new();
    // Only a peer run in this process tree is divided into.
    let live = opts.spu_live.as_ref().filter(|l| l.live);
    let mut setup_s = Vec::new();
    let mut setup_bytes = 0;
    let mut silent_setup_s = Vec::new();
    let mut silent_setup_bytes = None;
    let mut generator = Vec::new();
    let sp = opts.silent;
    // Steady-state cost of one silent extension, bytes per usable COT.
    let steady = steady_bytes_per_cot(sp);
    for (&kind, &mode) in opts
        .transports
        .iter()
        .flat_map(|k| opts.ot_modes.iter().map(move |m| (k, m)))
    {
        let (i0, i1) = make_inputs(&opts.cfg, opts.n)?;
        let bar = Barrier::new(2);
        let (cfg, ops, tri) = (opts.cfg, &opts.ops, opts.triples);
        let session: Vec<String> = (0..opts.passes.max(1))
            .flat_map(|_| ops.iter().cloned())
            .collect();
        let (r0, r1) = run_pair(
            kind.link(),
            tcfg,
            |t| party_main(PartyId::P0, cfg, t, &i0, &session, &bar, mode, sp, tri),
            |t| party_main(PartyId::P1, cfg, t, &i1, &session, &bar, mode, sp, tri),
        )?;
        let (s0, st0, o0) = r0?;
        let (s1, st1, o1) = r1?;
        match mode {
            OtMode::Iknp => {
                setup_s.push((kind, s0.max(s1)));
                setup_bytes = st0.setup.bytes_sent + st1.setup.bytes_sent;
            }
            OtMode::Pool => setup_bytes = st0.setup.bytes_sent + st1.setup.bytes_sent,
            OtMode::Silent => {
                silent_setup_s.push((kind, s0.max(s1)));
                silent_setup_bytes = Some(st0.setup.bytes_sent + st1.setup.bytes_sent);
                if opts.generator_cots > 0 {
                    generator.push(bench_generator(kind, tcfg, opts)?);
                }
            }
        }
        let n = opts.n as f64;
        for (k, op) in ops.iter().enumerate() {
            // The last pass's outputs.
            let last = o0.len() - ops.len();
            let (a, b) = (&o0[last + k], &o1[last + k]);
            let off = (a.stats.offline.bytes_sent + b.stats.offline.bytes_sent) as f64 / n;
            let on = (a.stats.online.bytes_sent + b.stats.online.bytes_sent) as f64 / n;
            // Exact rounds: session depths (preprocessing, then the op).
            let rounds = a.pre_depth.max(b.pre_depth) + a.depth.max(b.depth);
            // Every COT is counted once as sender (one party) and once as
            // receiver (the other): P0's sent + received covers all of them.
            let cots = a.cots as f64 / n;
            // Silent rows: the extensions this op happened to trigger, replaced by its COTs at
            // the steady-state cost.
            let silent = (a.silent_bytes + b.silent_bytes) as f64 / n;
            let est = est_silent_bytes(mode, off, on, silent, cots, steady);
            rows.push(BenchRow {
                transport: kind,
                ot_pool: mode.preprocessed(),
                ot: mode,
                triples: opts.triples,
                primitive: op.clone(),
                n: opts.n,
                time_s: a.wall_s.max(b.wall_s),
                pre_s: a.pre_s.max(b.pre_s),
                cpu_s: a.cpu_s.max(b.cpu_s),
                bytes_per_elem: off + on,
                offline_bytes_per_elem: off,
                online_bytes_per_elem: on,
                rounds,
                online_rounds: a.stats.online.rounds.max(b.stats.online.rounds),
                cots_per_elem: cots,
                est_silent_bytes_per_elem: est,
                amortized_s: None,
                amortized_ratio: None,
                spu: SpuColumns::new(
                    live.and_then(|l| l.at(op, opts.n)),
                    opts.spu_recorded.at(op, opts.n),
                ),
            });
        }
    }
    amortize(&mut rows);
    Ok(BenchMpcReport {
        ell: opts.cfg.ring.ell,
        frac: opts.cfg.ring.frac,
        n: opts.n,
        passes: opts.passes.max(1),
        setup_s,
        setup_bytes,
        spu: SpuSources::new(live, &opts.spu_recorded),
        silent_setup_s,
        silent_setup_bytes,
        rows,
        generator,
    })
}

/// A benchmark row whose time can be amortized over its session's OT fills ([`amortize`]).
pub(crate) trait AmortizedRow {
    /// Transport and OT mode: the rows that share a fill cost.
    fn group(&self) -> (TransportKind, OtMode);
    /// Wall time, the part spent in OT fills, and the COTs used.
    fn fill(&self) -> (f64, f64, f64);
    /// The peer's time, if measured or quoted.
    fn peer_time(&self) -> Option<f64>;
    /// Records the amortized time and its ratio to the peer's.
    fn set_amortized(&mut self, t: f64, ratio: Option<f64>);
}

/// Fills the amortized times of the pool and silent rows: per transport and OT mode, the fill
/// cost per COT is Σ fill time / Σ COTs of its rows, and a row's amortized time is its time
/// without its own fill plus its COTs at that cost (each op's unmeasured warm-up consumes as
/// many COTs as its measured run, so about half of the generation falls in the measured fills).
pub(crate) fn amortize<R: AmortizedRow>(rows: &mut [R]) {
    let groups: Vec<(TransportKind, OtMode)> = rows.iter().map(R::group).collect();
    for &g in &groups {
        if g.1 == OtMode::Iknp {
            continue;
        }
        let (pre, cots) = rows
            .iter()
            .filter(|r| r.group() == g)
            .fold((0.0, 0.0), |(p, c), r| {
                let (_, pre, cots) = r.fill();
                (p + pre, c + cots)
            });
        let rate = if cots > 0.0 { pre / cots } else { 0.0 };
        for r in rows.iter_mut().filter(|r| r.group() == g) {
            let (time, pre, cots) = r.fill();
            let t = (time - pre).max(0.0) + cots * rate;
            let ratio = r.peer_time().map(|s| t / s);
            r.set_amortized(t, ratio);
        }
    }
}

impl AmortizedRow for BenchRow {
    fn group(&self) -> (TransportKind, OtMode) {
        (self.transport, self.ot)
    }
    fn fill(&self) -> (f64, f64, f64) {
        (self.time_s, self.pre_s, self.cots_per_elem * self.n as f64)
    }
    fn peer_time(&self) -> Option<f64> {
        self.spu.time_s
    }
    fn set_amortized(&mut self, t: f64, ratio: Option<f64>) {
        self.amortized_s = Some(t);
        self.amortized_ratio = ratio;
    }
}

/// One party of the generator measurement: setup, then pools of `cots` random
/// COTs in each direction. Returns (setup stats, fill stats, fill wall s, fill CPU s).
fn generator_party(
    id: PartyId,
    cfg: MpcConfig,
    sp: SilentParams,
    cots: usize,
    t: &mut dyn Transport,
    bar: &Barrier,
) -> Result<(Stats, Stats, f64, f64), BenchError> {
    let rng = ChaCha20Rng::from_rng(OsRng)?;
    let mut p = Party::with_silent_ot(id, cfg, rng, sp).map_err(mpc("build a party"))?;
    drive(p.channel(), p.setup(), t).map_err(protocol("silent setup"))?;
    let setup = p.channel().stats();
    bar.wait();
    let c0 = thread_cpu_s();
    let t0 = Instant::now();
    drive(p.channel(), p.preprocess_ot(cots, cots), t).map_err(protocol("silent fills"))?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_s() - c0;
    Ok((setup, p.channel().stats().since(&setup), wall, cpu))
}

/// The raw silent generator over one transport (see [`GeneratorRow`]).
pub fn bench_generator(
    kind: TransportKind,
    tcfg: TransportConfig,
    opts: &BenchMpcOptions,
) -> Result<GeneratorRow, BenchError> {
    let (sp, cots, cfg) = (opts.silent, opts.generator_cots, opts.cfg);
    let bar = Barrier::new(2);
    let (r0, r1) = run_pair(
        kind.link(),
        tcfg,
        |t| generator_party(PartyId::P0, cfg, sp, cots, t, &bar),
        |t| generator_party(PartyId::P1, cfg, sp, cots, t, &bar),
    )?;
    let (s0, f0, w0, c0) = r0?;
    let (s1, f1, w1, c1) = r1?;
    let setup_bytes = s0.setup.bytes_sent + s1.setup.bytes_sent;
    let fill_bytes = f0.offline.bytes_sent + f1.offline.bytes_sent;
    let total = 2.0 * cots as f64;
    let cpu = c0.max(c1);
    let one = generator_one_thread(sp, cots)?;
    Ok(GeneratorRow {
        transport: kind,
        params: format!("n = {}, k = {}, t = {}", sp.main.n, sp.main.k, sp.main.t),
        cots,
        time_s: w0.max(w1),
        cpu_s: cpu,
        cots_per_s_thread: if cpu > 0.0 {
            total / cpu
        } else {
            total / w0.max(w1)
        },
        setup_bytes,
        fill_bytes,
        bits_per_cot_with_bootstrap: 8.0 * (setup_bytes + fill_bytes) as f64 / total,
        bits_per_cot_fills: 8.0 * fill_bytes as f64 / total,
        bits_per_cot_steady: 8.0 * steady_bytes_per_cot(sp),
        one_thread_both_ends_s: one,
        one_thread_both_ends_cots_per_s: cots as f64 / one,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small in-memory run of the product under both triple sources and two passes: one row
    /// per mode, the RLWE triples at about half of Gilboa's bytes, amortized times only for
    /// pooled rows.
    #[test]
    fn small_run_under_both_triple_sources() {
        let mut bytes = Vec::new();
        for triples in [TripleMode::Gilboa, TripleMode::Rlwe] {
            let opts = BenchMpcOptions {
                n: 1 << 14,
                transports: vec![TransportKind::Memory],
                ot_modes: vec![OtMode::Iknp, OtMode::Pool],
                ops: vec!["mul".into()],
                triples,
                passes: 2,
                generator_cots: 0,
                ..BenchMpcOptions::default()
            };
            let rep = bench_mpc(&opts).unwrap();
            assert_eq!(rep.passes, 2);
            assert_eq!(rep.rows.len(), 2);
            for r in &rep.rows {
                assert_eq!(r.triples, triples);
                assert_eq!(r.amortized_s.is_some(), r.ot == OtMode::Pool);
            }
            // The IKNP row: the triples' bytes plus Beaver and truncation.
            bytes.push(rep.rows[0].bytes_per_elem);
        }
        // Gilboa with IKNP: 2ℓ COTs at 16 B plus ℓ(ℓ+1) correction bits; RLWE: ≈ 127 B + 39 B.
        assert!(bytes[0] > 1500.0 && bytes[1] < 180.0, "{bytes:?}");
        assert!(TripleMode::parse("rlwe").is_ok() && TripleMode::parse("he").is_err());
    }

    /// Without SPU run in this process tree: no ratio column, SPU's recorded figure in its own
    /// column under its date, nothing divided by it; with a live SPU, ratios to it alone.
    #[test]
    fn ratios_only_against_a_peer_run_live() {
        let n = 1 << 10;
        let recorded = PeerFigures::for_test(false, "2026-11-30", n, &[("select", 0.26, 218.0, 8)]);
        let opts = BenchMpcOptions {
            n,
            transports: vec![TransportKind::Memory],
            ot_modes: vec![OtMode::Pool],
            ops: vec!["select".into()],
            triples: TripleMode::Gilboa,
            generator_cots: 0,
            spu_recorded: recorded,
            ..BenchMpcOptions::default()
        };
        let rep = bench_mpc(&opts).unwrap();
        let t = rep.to_table();
        eprintln!("{t}");
        let r = &rep.rows[0];
        assert!(!rep.spu.live && r.spu.time_s.is_none() && r.amortized_ratio.is_none());
        // The flattened SPU fields keep their JSON keys and places.
        let json = serde_json::to_string(&rep).unwrap();
        let at = |k: &str| {
            json.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k}"))
        };
        for keys in [
            &[
                "setup_bytes",
                "spu_source",
                "spu_live",
                "spu_recorded_source",
                "spu_recorded_date",
                "silent_setup_s",
            ][..],
            &[
                "est_silent_bytes_per_elem",
                "spu_time_s",
                "spu_bytes_per_elem",
                "spu_rounds",
                "spu_recorded_time_s",
                "spu_recorded_bytes_per_elem",
                "spu_recorded_rounds",
                "amortized_s",
            ][..],
        ] {
            assert!(
                keys.windows(2).all(|w| at(w[0]) < at(w[1])),
                "{keys:?}: {json}"
            );
        }
        assert_eq!(r.spu.recorded_time_s, Some(0.26));
        for ratio in ["/spu", "spu s", "spu B/e"] {
            assert!(!t.contains(ratio), "{ratio} without a live peer:\n{t}");
        }
        let header = t.lines().find(|l| l.starts_with("transp")).unwrap();
        assert!(header.contains("SPU 2026-11-30"), "{header}");
        let line = t.lines().find(|l| l.contains("select")).unwrap();
        assert!(line.contains("0.26") && line.contains("218.0"), "{line}");

        let live = PeerFigures::for_test(true, "", n, &[("select", 0.5, 200.0, 8)]);
        let rep = bench_mpc(&BenchMpcOptions {
            spu_live: Some(live),
            ..opts
        })
        .unwrap();
        let r = &rep.rows[0];
        assert!(rep.spu.live && rep.to_table().contains("t/spu"));
        assert_eq!(r.amortized_ratio, r.amortized_s.map(|a| a / 0.5));
        assert!(r.amortized_ratio.is_some());
    }
}
