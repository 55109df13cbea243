//! The hybrid CNN mode between a client and a server over a transport
//! ([`veil_core::cnn::hybrid`]): the linear layers under CKKS at the server, every ReLU exact in
//! two-party MPC, the ciphertexts crossing through the complex conversion.
//!
//! 1. Both sides plan the public architecture ([`HybridPlan::new`]); the client sends the public
//!    key and the evaluation keys a dry run asks for (no Galois key in the pixel-wise layout)
//!    with [`Client::send_keys`].
//! 2. Base OT and, with [`HybridOptions::silent_ot`], the silent OT's setup ([`Party::setup`]).
//! 3. Per batch, [`client_run`] / [`server_run`]: the images enter by M2C, and the logits are
//!    opened to the client alone.

use super::{argmax, VisionError};
use crate::model::images::Images;
use crate::mpc::{channel_bytes, drive, session_rng, setup_party, Clock, DriverError, Timed};
use crate::party::{Client, KeyExchangeStats, KeyRequest, PartyError, Server};
use crate::transport::Transport;
use std::time::Instant;
use veil_core::backend::PolyBackend;
use veil_core::ckks::Ckks;
use veil_core::cnn::hybrid::{client_run, dry_counts, server_run, HybridPlan, MPC_CONFIG};
use veil_core::cnn::{Network, PlanMode, StepCost};
use veil_core::mpc::kind::HostKind;
use veil_core::mpc::ot::silent::FERRET_EMP_OT;
use veil_core::mpc::{Party, PartyId};
use veil_core::SecretRng;

/// The frame carrying the client's [`HybridPlan::fingerprint`] (32 bytes) before any key, and
/// the server's empty acceptance.
pub const TAG_HYBRID_PLAN: u16 = HostKind::CnnPlan.tag();

/// The client's half of the plan check: sends its plan's fingerprint and waits for the server's
/// empty [`TAG_HYBRID_PLAN`] frame (a refusal arrives as the server's abort, with its reason).
fn send_plan(t: &mut dyn Transport, plan: &HybridPlan) -> Result<(), VisionError> {
    let net = |e| VisionError::Party(PartyError::Transport(e));
    t.send(vec![crate::transport::frame(
        TAG_HYBRID_PLAN,
        plan.fingerprint().to_vec(),
    )])
    .map_err(net)?;
    let f = t.recv().map_err(net)?;
    if f.tag != TAG_HYBRID_PLAN {
        return Err(VisionError::Party(PartyError::UnexpectedMessage {
            expected: TAG_HYBRID_PLAN,
            found: f.tag,
        }));
    }
    Ok(())
}

/// The server's half: receives the client's fingerprint and refuses (telling the client why)
/// unless it is the server's own.
fn check_plan(t: &mut dyn Transport, plan: &HybridPlan) -> Result<(), VisionError> {
    // A fingerprint is a few dozen bytes: the frame is read under the hello's size limit, not
    // the session's.
    use crate::transport::{TransportConfig, HELLO_LIMITS};
    let f = t
        .recv_limited(TransportConfig::frame_limit(HELLO_LIMITS.max_frame))
        .map_err(|e| VisionError::Party(PartyError::Transport(e)))?;
    let refuse = |t: &mut dyn Transport, e: VisionError| {
        t.abort(&e.to_string());
        Err(e)
    };
    if f.tag != TAG_HYBRID_PLAN {
        return refuse(
            t,
            VisionError::Party(PartyError::UnexpectedMessage {
                expected: TAG_HYBRID_PLAN,
                found: f.tag,
            }),
        );
    }
    if f.payload[..] != plan.fingerprint()[..] {
        return refuse(t, VisionError::PlanMismatch);
    }
    t.send(vec![crate::transport::frame(TAG_HYBRID_PLAN, Vec::new())])
        .map_err(|e| VisionError::Party(PartyError::Transport(e)))
}

/// Options of a hybrid run.
#[derive(Clone, Copy, Debug)]
pub struct HybridOptions {
    /// Ferret silent OT behind the COT pools (EMP's parameters) instead of IKNP alone: about
    /// 16× fewer bytes per ReLU.
    pub silent_ot: bool,
}

impl Default for HybridOptions {
    fn default() -> Self {
        HybridOptions { silent_ot: true }
    }
}

/// One step of one batch with its wall time at the party that saw it (seconds since the
/// previous step ended).
pub type StepRow = Timed<StepCost>;

/// What one party saw of a hybrid run.
#[derive(Clone, Debug, Default)]
pub struct HybridOutcome {
    /// Logits `[image][class]` (the client's; empty at the server).
    pub logits: Vec<Vec<f64>>,
    /// The first batch's steps.
    pub steps: Vec<StepRow>,
    /// Galois keys sent (client) or received.
    pub galois_keys: usize,
    /// Bytes of the public and evaluation keys.
    pub key_bytes: u64,
    /// Key generation and transfer, seconds.
    pub keys_s: f64,
    /// Base OT and silent-OT setup, seconds.
    pub setup_s: f64,
    /// Wall time of all batches, seconds.
    pub run_s: f64,
    /// All MPC-channel bytes of all batches, both directions (conversions included).
    pub mpc_bytes: u64,
    /// Ciphertext bytes in the conversions of all batches.
    pub converted_bytes: u64,
    /// Batches run.
    pub batches: usize,
}

/// Rows with wall times from a step callback.
struct Recorder<'a> {
    clock: Clock,
    rows: Vec<StepRow>,
    keep: bool,
    converted: u64,
    on_step: &'a mut dyn FnMut(usize, &StepRow),
    batch: usize,
}

impl<'a> Recorder<'a> {
    fn new(on_step: &'a mut dyn FnMut(usize, &StepRow)) -> Self {
        Recorder {
            clock: Clock::new(),
            rows: Vec::new(),
            keep: true,
            converted: 0,
            on_step,
            batch: 0,
        }
    }

    fn step(&mut self, c: &StepCost) {
        let row = self.clock.row(c);
        self.converted += c.tally.converted_bytes;
        (self.on_step)(self.batch, &row);
        if self.keep {
            self.rows.push(row);
        }
    }
}

/// One party's run from its set-up on: its party, what the keys and the setup cost, and the
/// steps' recorder.
struct Started<'a> {
    p: Party<SecretRng>,
    keys: KeyExchangeStats,
    keys_s: f64,
    setup_s: f64,
    rec: Recorder<'a>,
    bytes0: u64,
    t0: Instant,
}

impl<'a> Started<'a> {
    /// Sets party `id` up over `t` after a key exchange that cost `keys` in `keys_s` seconds.
    fn new(
        id: PartyId,
        opts: &HybridOptions,
        t: &mut dyn Transport,
        (keys, keys_s): (KeyExchangeStats, f64),
        on_step: &'a mut dyn FnMut(usize, &StepRow),
    ) -> Result<Self, VisionError> {
        let silent = opts.silent_ot.then_some(FERRET_EMP_OT);
        let (p, setup_s) = setup_party(id, MPC_CONFIG, silent, t)?;
        Ok(Started {
            bytes0: channel_bytes(&p),
            t0: Instant::now(),
            p,
            keys,
            keys_s,
            setup_s,
            rec: Recorder::new(on_step),
        })
    }

    /// Batch `b` begins: its steps are timed from now (the first batch's are kept).
    fn batch(&mut self, b: usize) {
        self.rec.batch = b;
        self.rec.keep = b == 0;
        self.rec.clock.restart();
    }

    /// The outcome after `batches` batches.
    fn finish(self, logits: Vec<Vec<f64>>, batches: usize) -> HybridOutcome {
        HybridOutcome {
            logits,
            steps: self.rec.rows,
            galois_keys: self.keys.galois_keys,
            key_bytes: self.keys.evaluation_key_bytes + self.keys.public_key_bytes,
            keys_s: self.keys_s,
            setup_s: self.setup_s,
            run_s: self.t0.elapsed().as_secs_f64(),
            mpc_bytes: channel_bytes(&self.p) - self.bytes0,
            converted_bytes: self.rec.converted,
            batches,
        }
    }
}

/// The client: plans `arch` (public), sends the keys, runs every batch of `images` and returns
/// the logits. `on_step` sees every step of every batch (batch index, row).
#[allow(clippy::too_many_arguments)]
pub fn run_client<B: PolyBackend>(
    ck: &Ckks<B>,
    t: &mut dyn Transport,
    arch: &Network,
    images: &Images,
    batch: usize,
    block: usize,
    opts: &HybridOptions,
    on_step: &mut dyn FnMut(usize, &StepRow),
) -> Result<HybridOutcome, VisionError> {
    let plan = HybridPlan::new(ck.params(), arch, batch, block).map_err(VisionError::HybridPlan)?;
    let (_, rotations) = dry_counts(&plan, arch).map_err(VisionError::Plan)?;
    send_plan(t, &plan)?;
    let mut rng = session_rng()?;
    let client = Client::new(ck, &mut rng)?;
    let t0 = Instant::now();
    let ks = client.send_keys(
        t,
        &KeyRequest {
            rotations,
            conjugation: false,
        },
        &mut rng,
    )?;
    let mut s = Started::new(
        PartyId::P0,
        opts,
        t,
        (ks, t0.elapsed().as_secs_f64()),
        on_step,
    )?;
    let per = arch.channels * arch.side * arch.side;
    let classes = arch.classes();
    let mut logits = Vec::with_capacity(images.count);
    let mut batches = 0;
    for start in (0..images.count).step_by(batch) {
        let n = batch.min(images.count - start);
        let mut x = vec![0.0; batch * per];
        for i in 0..n {
            x[i * per..(i + 1) * per].copy_from_slice(&images.unit(start + i));
        }
        s.batch(batches);
        let out = drive(
            s.p.channel(),
            client_run(
                &mut s.p,
                ck,
                client.secret_key(),
                &plan,
                arch,
                &x,
                n,
                &mut |c| s.rec.step(c),
            ),
            t,
        )
        .map_err(batch_failed)?;
        for i in 0..n {
            logits.push(out[i * classes..(i + 1) * classes].to_vec());
        }
        batches += 1;
    }
    Ok(s.finish(logits, batches))
}

/// The server: receives the keys, then takes part in the batches of `images` images (the count
/// is public) with `net` (its weights). Holds public key material only.
#[allow(clippy::too_many_arguments)]
pub fn run_server<B: PolyBackend>(
    ck: &Ckks<B>,
    t: &mut dyn Transport,
    net: &Network,
    batch: usize,
    block: usize,
    images: usize,
    opts: &HybridOptions,
    on_step: &mut dyn FnMut(usize, &StepRow),
) -> Result<HybridOutcome, VisionError> {
    let plan = HybridPlan::new(ck.params(), net, batch, block).map_err(VisionError::HybridPlan)?;
    check_plan(t, &plan)?;
    // The client's keys are those of the public architecture's dry run: bound the upload by them.
    let (_, rotations) =
        dry_counts(&plan, &net.public_architecture()).map_err(VisionError::Plan)?;
    let t0 = Instant::now();
    let (server, stats) = Server::receive_keys(ck, t, rotations.len())?;
    let mut s = Started::new(
        PartyId::P1,
        opts,
        t,
        (stats, t0.elapsed().as_secs_f64()),
        on_step,
    )?;
    let batches = images.div_ceil(batch);
    for b in 0..batches {
        let valid = batch.min(images - b * batch);
        s.batch(b);
        drive(
            s.p.channel(),
            server_run(&mut s.p, server.keys(), &plan, net, valid, &mut |c| {
                s.rec.step(c)
            }),
            t,
        )
        .map_err(batch_failed)?;
    }
    Ok(s.finish(Vec::new(), batches))
}

/// A batch's protocol failure.
fn batch_failed(source: DriverError) -> VisionError {
    VisionError::Hybrid {
        step: "batch",
        source,
    }
}

/// A hybrid loopback run: both parties in this process over TCP on 127.0.0.1.
#[derive(Clone, Debug)]
pub struct HybridRun {
    /// The block size used.
    pub block: usize,
    /// The batch.
    pub batch: usize,
    /// The client's view (logits, steps).
    pub client: HybridOutcome,
    /// The server's view (its CKKS counts per step).
    pub server: HybridOutcome,
    /// ReLUs in the first batch.
    pub relus: usize,
    /// Conversions per batch (M2C, complex C2M).
    pub conversions: (usize, usize),
}

/// Runs a hybrid client and server on TCP loopback: the server with `net`, the client with its
/// public architecture and `images`. `block = None` takes the map's side in the pixel-wise
/// layout and the FHE-only planner's choice otherwise. `on_step` sees the server's steps.
#[allow(clippy::too_many_arguments)]
pub fn run_loopback<B: PolyBackend + Sync>(
    ck: &Ckks<B>,
    net: &Network,
    images: &Images,
    batch: usize,
    block: Option<usize>,
    opts: &HybridOptions,
    mut on_step: impl FnMut(usize, &StepRow) + Send,
) -> Result<HybridRun, VisionError>
where
    B::Buffer: Send + Sync,
{
    let (arch, block) = super::loopback_block(ck, net, batch, block, PlanMode::Hybrid)?;
    let plan =
        HybridPlan::new(ck.params(), &arch, batch, block).map_err(VisionError::HybridPlan)?;
    let count = images.count;
    let (c, s) = super::loopback_pair(
        |t| run_client(ck, t, &arch, images, batch, block, opts, &mut |_, _| {}),
        |t| run_server(ck, t, net, batch, block, count, opts, &mut on_step),
    )?;
    Ok(HybridRun {
        block,
        batch,
        client: c?,
        server: s?,
        relus: plan
            .relus(batch.min(count))
            .map_err(VisionError::HybridPlan)?,
        conversions: plan.conversions(),
    })
}

/// The predictions of a run's logits.
pub fn predictions(logits: &[Vec<f64>]) -> Vec<usize> {
    logits.iter().map(|l| argmax(l)).collect()
}
