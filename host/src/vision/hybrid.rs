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
use crate::mpc::{drive, DriverError};
use crate::party::{Client, KeyRequest, PartyError, Server};
use crate::transport::Transport;
use rand_core::{OsRng, SeedableRng};
use std::time::Instant;
use veil_core::backend::PolyBackend;
use veil_core::ckks::Ckks;
use veil_core::cnn::hybrid::{client_run, dry_counts, server_run, HybridPlan, MPC_CONFIG};
use veil_core::cnn::{Network, PlanMode, StepCost};
use veil_core::mpc::ot::silent::FERRET_EMP_OT;
use veil_core::mpc::{Party, PartyId};
use veil_core::SecretRng;

/// The frame carrying the client's [`HybridPlan::fingerprint`] (32 bytes) before any key, and
/// the server's empty acceptance.
pub const TAG_HYBRID_PLAN: u16 = 0x0C01;

/// The client's half of the plan check: sends its plan's fingerprint and waits for the server's
/// empty [`TAG_HYBRID_PLAN`] frame (a refusal arrives as the server's abort, with its reason).
fn send_plan(t: &mut dyn Transport, plan: &HybridPlan) -> Result<(), VisionError> {
    let net = |e| VisionError::Party(PartyError::Transport(e));
    t.send(vec![plan_frame(plan.fingerprint().to_vec())])
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

fn plan_frame(payload: Vec<u8>) -> veil_core::mpc::Frame {
    veil_core::mpc::Frame {
        tag: TAG_HYBRID_PLAN,
        depth: 0,
        payload,
    }
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
    t.send(vec![plan_frame(Vec::new())])
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

/// One step of one batch with its wall time at the party that saw it.
#[derive(Clone, Debug)]
pub struct StepRow {
    /// The step's costs.
    pub cost: StepCost,
    /// Seconds since the previous step ended.
    pub wall_s: f64,
}

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

fn session_party(id: PartyId, opts: &HybridOptions) -> Result<Party<SecretRng>, VisionError> {
    let rng = SecretRng::from_rng(OsRng).map_err(|e| VisionError::Entropy(e.to_string()))?;
    let p = if opts.silent_ot {
        Party::with_silent_ot(id, MPC_CONFIG, rng, FERRET_EMP_OT)
    } else {
        Party::new(id, MPC_CONFIG, rng)
    };
    p.map_err(|e| VisionError::Hybrid {
        step: "setup",
        source: DriverError::Protocol(e),
    })
}

fn setup(p: &mut Party<SecretRng>, t: &mut dyn Transport) -> Result<f64, VisionError> {
    let t0 = Instant::now();
    drive(p.channel(), p.setup(), t).map_err(|source| VisionError::Hybrid {
        step: "setup",
        source,
    })?;
    Ok(t0.elapsed().as_secs_f64())
}

fn channel_bytes(p: &Party<SecretRng>) -> u64 {
    let s = p.channel().stats();
    [s.setup, s.offline, s.online]
        .iter()
        .map(|x| x.bytes_sent + x.bytes_recv)
        .sum()
}

/// Rows with wall times from a step callback.
struct Recorder<'a> {
    last: Instant,
    rows: Vec<StepRow>,
    keep: bool,
    converted: u64,
    on_step: &'a mut dyn FnMut(usize, &StepRow),
    batch: usize,
}

impl<'a> Recorder<'a> {
    fn new(on_step: &'a mut dyn FnMut(usize, &StepRow)) -> Self {
        Recorder {
            last: Instant::now(),
            rows: Vec::new(),
            keep: true,
            converted: 0,
            on_step,
            batch: 0,
        }
    }

    fn step(&mut self, c: &StepCost) {
        let now = Instant::now();
        let row = StepRow {
            cost: c.clone(),
            wall_s: (now - self.last).as_secs_f64(),
        };
        self.last = now;
        self.converted += c.converted_bytes;
        (self.on_step)(self.batch, &row);
        if self.keep {
            self.rows.push(row);
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
    let mut rng = SecretRng::from_rng(OsRng).map_err(|e| VisionError::Entropy(e.to_string()))?;
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
    let keys_s = t0.elapsed().as_secs_f64();
    let mut p = session_party(PartyId::P0, opts)?;
    let setup_s = setup(&mut p, t)?;
    let per = arch.channels * arch.side * arch.side;
    let classes = arch.classes();
    let mut logits = Vec::with_capacity(images.count);
    let mut rec = Recorder::new(on_step);
    let (b0, tr) = (channel_bytes(&p), Instant::now());
    let mut batches = 0;
    for start in (0..images.count).step_by(batch) {
        let n = batch.min(images.count - start);
        let mut x = vec![0.0; batch * per];
        for i in 0..n {
            x[i * per..(i + 1) * per].copy_from_slice(&images.unit(start + i));
        }
        rec.batch = batches;
        rec.keep = batches == 0;
        rec.last = Instant::now();
        let out = drive(
            p.channel(),
            client_run(
                &mut p,
                ck,
                client.secret_key(),
                &plan,
                arch,
                &x,
                n,
                &mut |c| rec.step(c),
            ),
            t,
        )
        .map_err(|source| VisionError::Hybrid {
            step: "batch",
            source,
        })?;
        for i in 0..n {
            logits.push(out[i * classes..(i + 1) * classes].to_vec());
        }
        batches += 1;
    }
    Ok(HybridOutcome {
        logits,
        steps: rec.rows,
        galois_keys: ks.galois_keys,
        key_bytes: ks.evaluation_key_bytes + ks.public_key_bytes,
        keys_s,
        setup_s,
        run_s: tr.elapsed().as_secs_f64(),
        mpc_bytes: channel_bytes(&p) - b0,
        converted_bytes: rec.converted,
        batches,
    })
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
    let keys_s = t0.elapsed().as_secs_f64();
    let mut p = session_party(PartyId::P1, opts)?;
    let setup_s = setup(&mut p, t)?;
    let mut rec = Recorder::new(on_step);
    let (b0, tr) = (channel_bytes(&p), Instant::now());
    let batches = images.div_ceil(batch);
    for b in 0..batches {
        let valid = batch.min(images - b * batch);
        rec.batch = b;
        rec.keep = b == 0;
        rec.last = Instant::now();
        drive(
            p.channel(),
            server_run(
                &mut p,
                ck,
                server.public_key(),
                server.evaluation_keys(),
                &plan,
                net,
                valid,
                &mut |c| rec.step(c),
            ),
            t,
        )
        .map_err(|source| VisionError::Hybrid {
            step: "batch",
            source,
        })?;
    }
    Ok(HybridOutcome {
        logits: Vec::new(),
        steps: rec.rows,
        galois_keys: stats.galois_keys,
        key_bytes: stats.evaluation_key_bytes + stats.public_key_bytes,
        keys_s,
        setup_s,
        run_s: tr.elapsed().as_secs_f64(),
        mpc_bytes: channel_bytes(&p) - b0,
        converted_bytes: rec.converted,
        batches,
    })
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
    let slots = ck.params().n() / 2;
    let arch = net.public_architecture();
    let block = match block {
        Some(b) => b,
        None => super::choose_block(&arch, batch, slots, PlanMode::Hybrid)?,
    };
    let plan =
        HybridPlan::new(ck.params(), &arch, batch, block).map_err(VisionError::HybridPlan)?;
    let count = images.count;
    let cfg = crate::transport::TransportConfig {
        timeout: std::time::Duration::from_secs(3600),
        ..Default::default()
    };
    let (c, s) = crate::harness::run_pair(
        crate::harness::Link::Tcp,
        cfg,
        |t| run_client(ck, t, &arch, images, batch, block, opts, &mut |_, _| {}),
        |t| run_server(ck, t, net, batch, block, count, opts, &mut on_step),
    )
    .map_err(VisionError::Harness)?;
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
