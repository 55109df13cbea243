//! One party's session as `veil-bench mpc` and `veil-bench nonlinear` run it: the party of an OT
//! mode, its timed base-OT setup, and the measured run of one protocol (a warm-up first in the
//! pooled modes, to size the OT preprocessing that the measured run then includes).

use super::{thread_cpu_s, OtMode, TransportKind};
use crate::error::{mpc, protocol};
use crate::BenchError;
use rand_chacha::ChaCha20Rng;
use std::sync::Barrier;
use std::time::Instant;
use veil_core::mpc::channel::FRAME_OVERHEAD;
use veil_core::mpc::ot::silent::SilentParams;
use veil_core::mpc::{MpcConfig, Party, PartyId, Stats};
use veil_host::harness::Link;
use veil_host::mpc::{drive, DriverError};
use veil_host::transport::Transport;

impl TransportKind {
    /// The short name tables print and `--transport` takes: `mem` or `tcp`.
    pub(crate) fn short_name(self) -> &'static str {
        match self {
            TransportKind::Memory => "mem",
            TransportKind::Tcp => "tcp",
        }
    }

    /// The harness link of this transport.
    pub(crate) fn link(self) -> Link {
        match self {
            TransportKind::Memory => Link::Memory,
            TransportKind::Tcp => Link::Tcp,
        }
    }
}

/// Steady-state bytes per usable COT of the silent generator: one extension's message and
/// frame over its usable outputs.
pub(crate) fn steady_bytes_per_cot(sp: SilentParams) -> f64 {
    (sp.main.message_bytes() as f64 + FRAME_OVERHEAD as f64) / sp.main.usable() as f64
}

/// Estimated bytes per element with a silent OT. IKNP and pool rows: `off + on` with IKNP
/// (16 B per COT) replaced by 1 bit per COT; silent rows: with the silent extensions the run
/// triggered (`silent` bytes per element) replaced by its COTs at the `steady` cost per COT.
pub(crate) fn est_silent_bytes(
    mode: OtMode,
    off: f64,
    on: f64,
    silent: f64,
    cots: f64,
    steady: f64,
) -> f64 {
    match mode {
        OtMode::Silent => off + on - silent + cots * steady,
        _ => off + on - 16.0 * cots + cots / 8.0,
    }
}

/// A party of OT mode `mode` (the silent one with parameters `silent`).
pub(crate) fn new_party(
    id: PartyId,
    cfg: MpcConfig,
    rng: ChaCha20Rng,
    mode: OtMode,
    silent: SilentParams,
) -> Result<Party<ChaCha20Rng>, BenchError> {
    match mode {
        OtMode::Silent => Party::with_silent_ot(id, cfg, rng, silent),
        _ => Party::new(id, cfg, rng),
    }
    .map_err(mpc("build a party"))
}

/// Waits for the other party, then runs the one-time setup: its wall time (s) and the
/// channel statistics after it.
pub(crate) fn timed_setup<R: rand_core::RngCore + rand_core::CryptoRng>(
    p: &mut Party<R>,
    t: &mut dyn Transport,
    bar: &Barrier,
) -> Result<(f64, Stats), BenchError> {
    bar.wait();
    let t0 = Instant::now();
    drive(p.channel(), p.setup(), t).map_err(protocol("setup"))?;
    Ok((t0.elapsed().as_secs_f64(), p.channel().stats()))
}

/// One protocol run as one party measured it.
pub(crate) struct Measured<T> {
    /// Wall time, OT preprocessing included, s.
    pub wall_s: f64,
    /// Thread CPU time, s.
    pub cpu_s: f64,
    /// OT preprocessing part of `wall_s` (pooled modes), s.
    pub pre_s: f64,
    /// Channel statistics of the run (preprocessing included).
    pub stats: Stats,
    /// Correlated OTs the run consumed.
    pub cots: u64,
    /// Session depth of the preprocessing (0 without).
    pub pre_depth: u32,
    /// Session depth of the run.
    pub depth: u32,
    /// Silent-extension bytes this party sent during the run (frames included).
    pub silent_bytes: u64,
    /// What the run returned.
    pub out: T,
}

/// Measures one run of `run`. With `pool` (the pooled OT modes) a warm-up run, not measured,
/// first learns this party's COT demand, which the measured run then preprocesses offline
/// (input-independent random COTs) inside its timing. `what` names the run in errors.
pub(crate) fn measure<R, T>(
    p: &mut Party<R>,
    t: &mut dyn Transport,
    bar: &Barrier,
    pool: bool,
    what: &str,
    mut run: impl FnMut(&mut Party<R>, &mut dyn Transport) -> Result<T, DriverError>,
) -> Result<Measured<T>, BenchError>
where
    R: rand_core::RngCore + rand_core::CryptoRng,
{
    let demand = if pool {
        bar.wait();
        let c0 = p.ot_counts();
        run(p, t).map_err(protocol(what))?;
        let c1 = p.ot_counts();
        Some(((c1.0 - c0.0) as usize, (c1.1 - c0.1) as usize))
    } else {
        None
    };
    bar.wait();
    let before = p.channel().stats();
    let sil0 = p.silent_stats().unwrap_or_default();
    let c0 = thread_cpu_s();
    let t0 = Instant::now();
    let (mut pre_s, mut pre_depth) = (0.0, 0);
    if let Some((ns, nr)) = demand {
        drive(p.channel(), p.preprocess_ot(ns, nr), t)
            .map_err(protocol(format!("{what} (OT preprocessing)")))?;
        pre_s = t0.elapsed().as_secs_f64();
        pre_depth = p.channel().depth();
    }
    let ot0 = p.ot_counts();
    let out = run(p, t).map_err(protocol(what))?;
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = thread_cpu_s() - c0;
    let ot1 = p.ot_counts();
    let sil1 = p.silent_stats().unwrap_or_default();
    Ok(Measured {
        wall_s,
        cpu_s,
        pre_s,
        stats: p.channel().stats().since(&before),
        cots: (ot1.0 - ot0.0) + (ot1.1 - ot0.1),
        pre_depth,
        depth: p.channel().depth(),
        silent_bytes: sil1.message_bytes - sil0.message_bytes
            + (sil1.messages - sil0.messages) * FRAME_OVERHEAD,
        out,
    })
}
