//! Private CNN inference (FEnc2's packing, FHE-only mode) between a client and a server over a
//! transport: the client holds the images and the secret key, the server holds the model and
//! only the public, relinearization and Galois keys.
//!
//! 1. Both sides compile the public architecture for the batch ([`Network::plan`]); the client
//!    derives the rotations from a dry run and sends the keys ([`Client::send_keys`]).
//! 2. The client encrypts each batch in the fragment layout at the lowest level that suffices
//!    (the network's depth) and sends it; the server runs the network, sanitizes each output
//!    ciphertext ([`sanitize_outputs`]: a fresh `Enc_pk(0)` and a noise flood) and sends the
//!    logits back.
//! 3. The client decrypts and takes the argmax; the server reports its per-layer costs.
//!
//! The hybrid mode (exact ReLU in MPC between the linear layers) is in [`hybrid`]; serving a
//! network to remote clients over TCP (`veil serve --cnn`) and the remote client are in
//! [`serve`].

pub mod hybrid;
pub mod serve;

use crate::model::images::Images;
use crate::party::{CiphertextLink, Client, KeyRequest, PartyError, Server};
use crate::transport::Transport;
use rand_core::{CryptoRng, RngCore};
use std::time::Instant;
use veil_core::backend::PolyBackend;
use veil_core::circuits::{CkksExec, OpCounts};
use veil_core::ckks::{Ciphertext, Ckks, Flood, PublicKey};
use veil_core::cnn::{DryRun, LayerCost, Network, PlanMode};

/// Plaintext cache budget of the server (keyed masks and diagonals): 4 GiB.
pub const CACHE_BUDGET: usize = 4 << 30;

/// What can go wrong in a private CNN run.
#[derive(Debug)]
#[non_exhaustive]
pub enum VisionError {
    /// The network does not compile for this batch, block size or parameter set.
    Plan(veil_core::Error),
    /// A party step failed (transport, keys, ciphertexts).
    Party(PartyError),
    /// The parameter set has fewer levels than the network's depth.
    TooDeep {
        /// Levels the network needs.
        depth: usize,
        /// Levels the parameter set has.
        levels: usize,
    },
    /// No block size admits this batch.
    NoBlock {
        /// The batch.
        batch: usize,
    },
    /// The two-party harness failed (the loopback link, a panicked party).
    Harness(crate::harness::HarnessError),
    /// The hybrid mode's plan does not fit (a layer, a level or a conversion).
    HybridPlan(veil_core::convert::ProtocolError),
    /// A step of the hybrid protocol failed (transport, MPC, conversion).
    Hybrid {
        /// The step (`setup`, `batch`).
        step: &'static str,
        /// What failed.
        source: crate::mpc::DriverError,
    },
    /// The operating system's entropy source failed.
    Entropy(String),
    /// The client's hybrid plan is not the server's (another batch, block size, parameter set
    /// or architecture): nothing was sent.
    PlanMismatch,
    /// The server refused the request ([`serve::serve_cnn`]): its typed reason and its text.
    Refused {
        /// Why.
        code: serve::CnnRefuseCode,
        /// The server's explanation.
        reason: String,
    },
    /// The server's answer to the hello did not decode.
    Handshake(serve::CnnDecodeError),
    /// The outputs could not be sanitized (a flood that does not fit the output level).
    Sanitize(veil_core::Error),
    /// No connection to the server within the connect limit ([`serve::infer_remote`]).
    Connect(crate::transport::ConnectError),
}

impl std::fmt::Display for VisionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VisionError::Plan(e) => write!(f, "the network does not compile: {e}"),
            VisionError::Party(e) => write!(f, "{e}"),
            VisionError::TooDeep { depth, levels } => write!(
                f,
                "the network needs {depth} levels; the parameter set has {levels}"
            ),
            VisionError::NoBlock { batch } => write!(
                f,
                "no block size fits a batch of {batch} (try a smaller batch)"
            ),
            VisionError::Harness(e) => write!(f, "{e}"),
            VisionError::HybridPlan(e) => write!(f, "the hybrid plan does not fit: {e}"),
            VisionError::Hybrid { step, source } => write!(f, "hybrid {step}: {source}"),
            VisionError::Entropy(e) => write!(f, "entropy: {e}"),
            VisionError::PlanMismatch => write!(
                f,
                "the client's hybrid plan is not the server's (batch, block, parameters or architecture differ)"
            ),
            VisionError::Refused { code, reason } if reason.is_empty() => {
                write!(f, "the server refused: {code}")
            }
            VisionError::Refused { code, reason } => {
                write!(f, "the server refused: {code}: {reason}")
            }
            VisionError::Handshake(e) => write!(f, "the server's answer to the hello: {e}"),
            VisionError::Sanitize(e) => write!(f, "sanitizing the outputs: {e}"),
            VisionError::Connect(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for VisionError {}

impl From<crate::mpc::SetupError> for VisionError {
    fn from(e: crate::mpc::SetupError) -> Self {
        match e {
            crate::mpc::SetupError::Entropy(e) => VisionError::Entropy(e),
            crate::mpc::SetupError::Mpc(source) => VisionError::Hybrid {
                step: "setup",
                source,
            },
        }
    }
}

impl From<PartyError> for VisionError {
    fn from(e: PartyError) -> Self {
        VisionError::Party(e)
    }
}

/// The block size `net` plans `batch` with in `mode` ([`Network::choose_block`]), or
/// [`VisionError::NoBlock`] when none admits the batch.
pub fn choose_block(
    net: &Network,
    batch: usize,
    slots: usize,
    mode: PlanMode,
) -> Result<usize, VisionError> {
    net.choose_block(batch, slots, mode)
        .map_err(VisionError::Plan)?
        .ok_or(VisionError::NoBlock { batch })
}

/// The error the output flood may add to one logit: `2^−10`, at [`FLOOD_TAILS`] standard
/// deviations (the flood's standard deviation per logit is `2^−10 / 8 ≈ 1.2·10^−4`).
///
/// This is a precision budget, not a statistical one: at the served parameters the `2^−40` flood
/// of [`veil_core::ckks::sanitize`] would cost the logits more than 40 bits they do not have
/// (see [`output_flood`]).
pub const FLOOD_TOLERANCE: f64 = 1.0 / 1024.0;

/// Standard deviations of margin between the flood's error and [`FLOOD_TOLERANCE`] (a sum of
/// `N` uniform terms is Gaussian to within `2^−40` at this tail: `P(|X| > 8σ) ≈ 10^−15`).
pub const FLOOD_TAILS: f64 = 8.0;

/// The flood of an output ciphertext at `scale` on a ring of degree `n`: the widest one whose
/// error per logit stays below [`FLOOD_TOLERANCE`] at [`FLOOD_TAILS`] deviations
/// ([`Flood::for_precision`]). It depends on public values only (the ring and the output scale,
/// which the plan fixes), so its width tells the client nothing about the weights.
///
/// What it buys, per coefficient of the phase: an evaluation noise `e_j` is hidden within
/// `|e_j| / (2W + 1)`. At the served parameters `W ≈ 2^20.8` (`N = 2^15`, `Δ = 2^40`) and
/// `2^17.3` (`N = 2^14`, `Δ = 2^36`): the low 20 (17) bits of every coefficient of the noise are
/// flooded, but the whole-ring bound `N·B / (2W + 1)` is not below 1, so the flood is no
/// statistical guarantee. The `2^−40` flood needs `W ≥ 2^39·N·B`: for LeNet at `N = 2^15`
/// (`B ≈ 2^17`) that is `W ≈ 2^71`, past `q_0` and a per-logit deviation of about `2^37`
/// (README, security notes).
pub fn output_flood(n: usize, scale: f64) -> Result<Flood, VisionError> {
    Flood::for_precision(n, scale, FLOOD_TOLERANCE, FLOOD_TAILS).map_err(VisionError::Sanitize)
}

/// Sanitizes the network's output ciphertexts before they go back to the client
/// ([`Ckks::sanitize`]): each gets a fresh `Enc_pk(0)` (its `c_1` becomes a fresh RLWE sample)
/// and the flood of [`output_flood`]. No slot mask and no level: the last layer of every
/// FHE-only network is fully connected ([`Network::validate`]), and its weight diagonals and bias
/// are zero off the output slots, so those slots hold zero plus noise already
/// (`tests/cnn_sanitize.rs` checks it). Takes the public key only.
pub fn sanitize_outputs<B: PolyBackend>(
    ck: &Ckks<B>,
    pk: &PublicKey<B>,
    cts: &[Ciphertext<B>],
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<Vec<Ciphertext<B>>, VisionError> {
    let n = ck.params().n();
    cts.iter()
        .map(|c| {
            let flood = output_flood(n, c.scale())?;
            ck.sanitize(pk, c, None, &flood, rng)
                .map_err(VisionError::Sanitize)
        })
        .collect()
}

/// One batch's server-side cost, per layer.
#[derive(Clone, Debug)]
pub struct BatchCost {
    /// The server's evaluation time, seconds.
    pub eval_s: f64,
    /// Per layer: the executor's counts and the wall time.
    pub layers: Vec<(LayerCost, f64)>,
    /// Ciphertext bytes returned to the client.
    pub bytes_back: u64,
    /// Sanitizing the outputs ([`sanitize_outputs`]), seconds (not in `eval_s`).
    pub sanitize_s: f64,
}

/// The client's view of a run.
#[derive(Clone, Debug)]
pub struct ClientOutcome {
    /// Logits, `[image][class]`.
    pub logits: Vec<Vec<f64>>,
    /// Galois keys sent.
    pub galois_keys: usize,
    /// Bytes of the evaluation keys (seed-compressed).
    pub key_bytes: u64,
    /// Ciphertext bytes sent (the server reports the bytes it returns).
    pub ct_bytes: u64,
    /// Key generation and transfer, seconds.
    pub keys_s: f64,
    /// Encryption, seconds.
    pub encrypt_s: f64,
    /// Decryption, seconds.
    pub decrypt_s: f64,
    /// Wall time from the first batch sent to the last logits decrypted, seconds.
    pub wall_s: f64,
}

/// The client: plans `arch` (public) for `batch` and `block`, sends the keys, encrypts `images`
/// in batches, and decrypts the logits.
pub fn run_client<B: PolyBackend>(
    ck: &Ckks<B>,
    t: &mut dyn Transport,
    arch: &Network,
    images: &Images,
    batch: usize,
    block: usize,
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<ClientOutcome, VisionError> {
    let slots = ck.params().n() / 2;
    let DryRun {
        plan, rotations, ..
    } = arch
        .dry_run(batch, block, slots)
        .map_err(VisionError::Plan)?;
    if plan.depth > ck.params().max_level() {
        return Err(VisionError::TooDeep {
            depth: plan.depth,
            levels: ck.params().max_level(),
        });
    }
    let client = Client::new(ck, rng)?;
    let t0 = Instant::now();
    let ks = client.send_keys(
        t,
        &KeyRequest {
            rotations,
            conjugation: false,
        },
        rng,
    )?;
    let keys_s = t0.elapsed().as_secs_f64();
    let per = arch.channels * arch.side * arch.side;
    let classes = arch.classes();
    let (mut encrypt_s, mut decrypt_s, mut ct_bytes) = (0.0, 0.0, 0u64);
    let mut logits = Vec::with_capacity(images.count);
    let t_all = Instant::now();
    for start in (0..images.count).step_by(batch) {
        let n = batch.min(images.count - start);
        let mut x = vec![0.0; batch * per];
        for i in 0..n {
            x[i * per..(i + 1) * per].copy_from_slice(&images.unit(start + i));
        }
        let te = Instant::now();
        let slots_v = plan.input.pack(&x).map_err(VisionError::Plan)?;
        let cts: Vec<Ciphertext<B>> = slots_v
            .iter()
            .map(|v| {
                let pt = ck
                    .encode_real(v, slots, plan.depth, ck.params().default_scale())
                    .map_err(|source| PartyError::Ckks {
                        step: "encode an image batch",
                        source,
                    })?;
                ck.encrypt_sk(client.secret_key(), &pt, rng)
                    .map_err(|source| PartyError::Ckks {
                        step: "encrypt an image batch",
                        source,
                    })
            })
            .collect::<Result<_, PartyError>>()?;
        encrypt_s += te.elapsed().as_secs_f64();
        ct_bytes += client.send_ciphertexts(t, &cts)?;
        let back = client.recv_ciphertexts(t)?;
        let td = Instant::now();
        let dec: Vec<Vec<f64>> = back
            .iter()
            .map(|c| client.decrypt(c).map(|v| v.iter().map(|z| z.re).collect()))
            .collect::<Result<_, _>>()?;
        let flat = plan.output.unpack(&dec).map_err(VisionError::Plan)?;
        for i in 0..n {
            logits.push(flat[i * classes..(i + 1) * classes].to_vec());
        }
        decrypt_s += td.elapsed().as_secs_f64();
    }
    Ok(ClientOutcome {
        logits,
        galois_keys: ks.galois_keys,
        key_bytes: ks.evaluation_key_bytes + ks.public_key_bytes,
        ct_bytes,
        keys_s,
        encrypt_s,
        decrypt_s,
        wall_s: t_all.elapsed().as_secs_f64(),
    })
}

/// The server: receives the keys, then evaluates `net` on each batch of ciphertexts until the
/// client has sent `batches`, returning each batch's costs. `on_layer` sees every layer as it
/// ends (for progress).
pub fn run_server<B: PolyBackend>(
    ck: &Ckks<B>,
    t: &mut dyn Transport,
    net: &Network,
    batch: usize,
    block: usize,
    batches: usize,
    mut on_layer: impl FnMut(usize, &LayerCost),
) -> Result<Vec<BatchCost>, VisionError> {
    let slots = ck.params().n() / 2;
    // The client's keys are those of the public architecture's dry run: bound the upload by them.
    let rotations = net
        .public_architecture()
        .dry_run(batch, block, slots)
        .map_err(VisionError::Plan)?
        .rotations;
    let plan = net.plan(batch, block, slots).map_err(VisionError::Plan)?;
    let (server, _) = Server::receive_keys(ck, t, rotations.len())?;
    let ex = CkksExec::new(ck, server.evaluation_keys(), slots).with_cache_budget(CACHE_BUDGET);
    let mut rng = crate::os_rng();
    let mut out = Vec::with_capacity(batches);
    for b in 0..batches {
        let cts = crate::party::recv_ciphertexts(ck, t)?;
        let t0 = Instant::now();
        let mut layers = Vec::new();
        let mut tl = Instant::now();
        let y = net
            .run(&ex, &plan, cts, |c| {
                layers.push((c.clone(), tl.elapsed().as_secs_f64()));
                on_layer(b, c);
                tl = Instant::now();
            })
            .map_err(VisionError::Plan)?;
        let eval_s = t0.elapsed().as_secs_f64();
        let ts = Instant::now();
        let y = sanitize_outputs(ck, server.public_key(), &y, &mut rng)?;
        let sanitize_s = ts.elapsed().as_secs_f64();
        let bytes_back = crate::party::send_ciphertexts(ck, t, &y)?;
        out.push(BatchCost {
            eval_s,
            layers,
            bytes_back,
            sanitize_s,
        });
    }
    Ok(out)
}

/// The index of the largest logit (the first on ties): a prediction.
pub fn argmax(v: &[f64]) -> usize {
    v.iter()
        .enumerate()
        .fold(
            (0, f64::NEG_INFINITY),
            |b, (i, &x)| if x > b.1 { (i, x) } else { b },
        )
        .0
}

/// Peak resident memory of this process (`VmHWM` of `/proc/self/status`), bytes; `None` where
/// the file does not exist.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak-memory mark (`/proc/self/clear_refs` ← `5`, Linux ≥ 4.0), so that
/// [`peak_rss_bytes`] measures from here; `false` where that is not possible.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The public architecture of `net` and the block size of a loopback run: `block`, or the
/// planner's choice for `mode` at `batch` on `ck`'s slots.
pub(crate) fn loopback_block<B: PolyBackend>(
    ck: &Ckks<B>,
    net: &Network,
    batch: usize,
    block: Option<usize>,
    mode: PlanMode,
) -> Result<(Network, usize), VisionError> {
    let arch = net.public_architecture();
    let block = match block {
        Some(b) => b,
        None => choose_block(&arch, batch, ck.params().n() / 2, mode)?,
    };
    Ok((arch, block))
}

/// Runs `client` and `server` on TCP loopback, each with its end, under an hour's receive
/// timeout (one step of a large batch takes minutes on a CPU).
pub(crate) fn loopback_pair<C, S: Send>(
    client: impl FnOnce(&mut dyn crate::transport::Transport) -> C,
    server: impl FnOnce(&mut dyn crate::transport::Transport) -> S + Send,
) -> Result<(C, S), VisionError> {
    let cfg = crate::transport::TransportConfig {
        timeout: std::time::Duration::from_secs(3600),
        ..Default::default()
    };
    crate::harness::run_pair(crate::harness::Link::Tcp, cfg, client, server)
        .map_err(VisionError::Harness)
}

/// A loopback run: both parties in this process, over TCP on 127.0.0.1.
#[derive(Clone, Debug)]
pub struct LoopbackRun {
    /// The block size used.
    pub block: usize,
    /// The batch.
    pub batch: usize,
    /// The client's outcome.
    pub client: ClientOutcome,
    /// The server's costs per batch.
    pub batches: Vec<BatchCost>,
    /// The dry run's counts for one batch.
    pub counts: OpCounts,
}

/// Runs a client and a server on TCP loopback: the server with `net`, the client with its public
/// architecture and `images`. `block = None` lets [`Network::choose_block`] pick.
pub fn run_loopback<B: PolyBackend + Sync>(
    ck: &Ckks<B>,
    net: &Network,
    images: &Images,
    batch: usize,
    block: Option<usize>,
    on_layer: impl FnMut(usize, &LayerCost) + Send,
) -> Result<LoopbackRun, VisionError>
where
    B::Buffer: Send + Sync,
{
    let (arch, block) = loopback_block(ck, net, batch, block, PlanMode::Fhe)?;
    let counts = arch
        .dry_run(batch, block, ck.params().n() / 2)
        .map_err(VisionError::Plan)?
        .counts;
    let batches = images.count.div_ceil(batch);
    let (c, s) = loopback_pair(
        |t| {
            let mut rng = crate::mpc::session_rng()?;
            run_client(ck, t, &arch, images, batch, block, &mut rng)
        },
        |t| run_server(ck, t, net, batch, block, batches, on_layer),
    )?;
    let client = c?;
    let batches = s?;
    Ok(LoopbackRun {
        block,
        batch,
        client,
        batches,
        counts,
    })
}
