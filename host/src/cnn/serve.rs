//! Private CNN inference as a service: a server that holds one network's weights accepts clients
//! over TCP ([`serve_cnn`], behind `veil serve --cnn`), and a client that runs the FHE-only or
//! the hybrid protocol against it ([`infer_remote`], behind `veil infer-image --server`).
//!
//! Before any key, the client sends a versioned [`CnnHello`] (frame [`TAG_CNN_HELLO`]): the
//! mode, the OT, the batch, the block size, the batch count, the image count and the
//! [`arch_digest`] of the architecture it expects. The server checks it against its model and
//! answers [`TAG_CNN_ACCEPT`] or [`TAG_CNN_REFUSE`] with a typed [`CnnRefuseCode`] and a reason;
//! after an acceptance both sides run [`super::run_client`] / [`super::run_server`] (FHE-only)
//! or [`super::hybrid::run_client`] / [`super::hybrid::run_server`] (hybrid) with the hello's
//! numbers. The server uses public key material only.
//!
//! | tag | direction | payload |
//! |---|---|---|
//! | `0x0C02` hello | client → server | `version u16 ‖ mode u8 ‖ ot u8 ‖ batch u32 ‖ block u32 ‖ batches u32 ‖ images u32 ‖ digest [32]` |
//! | `0x0C03` accept | server → client | `version u16` |
//! | `0x0C04` refuse | server → client | `code u8 ‖ reason (UTF-8, ≤ 1,024 bytes)` |
//!
//! All integers little-endian; every decoder is total (a typed [`CnnDecodeError`], never a
//! panic) and canonical (what decodes re-encodes to the same bytes).

use super::{choose_block, hybrid, run_client, run_server, ClientOutcome, VisionError};
use crate::model::images::Images;
use crate::party::PartyError;
use crate::serve::{ContextCache, Handler, HelloMessage, HelloProblem, SessionEnd};
use crate::transport::{frame, TcpTransport, Transport, TransportConfig, TransportError};
use sha2::{Digest, Sha256};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;
use veil_core::backend::PolyBackend;
use veil_core::ckks::Ckks;
use veil_core::cnn::hybrid::HybridPlan;
use veil_core::cnn::{batch_params, Layer, Network, PlanMode};
use veil_core::mpc::kind::HostKind;

/// The client's request (see the module's table).
pub const TAG_CNN_HELLO: u16 = HostKind::CnnHello.tag();
impl HelloMessage for CnnHello {
    const TAG: u16 = TAG_CNN_HELLO;
    const VERSION: u16 = CNN_VERSION;
    const NAME: &'static str = "CNN hello";
    type Error = CnnDecodeError;
    fn peek_version(payload: &[u8]) -> Option<u16> {
        CnnHello::peek_version(payload)
    }
    fn decode(payload: &[u8]) -> Result<Self, CnnDecodeError> {
        CnnHello::decode(payload)
    }
}

/// The server's acceptance.
pub const TAG_CNN_ACCEPT: u16 = HostKind::CnnAccept.tag();
/// The server's refusal.
pub const TAG_CNN_REFUSE: u16 = HostKind::CnnRefuse.tag();
/// The version of the CNN serving protocol this build speaks.
pub const CNN_VERSION: u16 = 1;
/// Length of an encoded [`CnnHello`].
pub const CNN_HELLO_LEN: usize = 2 + 1 + 1 + 4 * 4 + 32;
/// Length of an encoded acceptance.
pub const CNN_ACCEPT_LEN: usize = 2;
/// The longest refusal reason on the wire, in bytes.
pub const MAX_CNN_REASON: usize = 1024;
/// The smallest batch served (below it the blocked layout's Galois keys outgrow a frame).
pub const MIN_BATCH: usize = 16;
/// The largest batch served: 8,192 fills `N = 2^14` and runs pixel-wise (FHE-only mode).
pub const MAX_BATCH: usize = 1 << 13;
/// The most batches one session may ask for.
pub const MAX_BATCHES: usize = 1024;
/// The largest block size a hello may carry (no served map is wider).
pub const MAX_BLOCK: usize = 1 << 12;

/// Why a CNN handshake payload did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CnnDecodeError {
    /// The payload is not the message's length.
    Length {
        /// The length the message has (for a refusal: at least).
        expected: usize,
        /// The payload's length.
        found: usize,
    },
    /// A mode byte other than 0 (FHE-only) or 1 (hybrid).
    UnknownMode(u8),
    /// An OT byte other than 0 (IKNP) or 1 (silent), or 1 in the FHE-only mode (which runs no
    /// OT).
    BadOt {
        /// The mode byte.
        mode: u8,
        /// The OT byte.
        ot: u8,
    },
    /// A refusal code this build does not know.
    UnknownCode(u8),
    /// A refusal reason longer than [`MAX_CNN_REASON`] bytes.
    ReasonTooLong(usize),
    /// A refusal reason that is not UTF-8.
    ReasonNotUtf8,
}

impl std::fmt::Display for CnnDecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CnnDecodeError::Length { expected, found } => {
                write!(f, "payload of {found} bytes, expected {expected}")
            }
            CnnDecodeError::UnknownMode(m) => write!(f, "unknown mode {m}"),
            CnnDecodeError::BadOt { mode, ot } => write!(f, "OT byte {ot} with mode {mode}"),
            CnnDecodeError::UnknownCode(c) => write!(f, "unknown refusal code {c}"),
            CnnDecodeError::ReasonTooLong(n) => {
                write!(f, "refusal reason of {n} bytes exceeds {MAX_CNN_REASON}")
            }
            CnnDecodeError::ReasonNotUtf8 => write!(f, "refusal reason is not UTF-8"),
        }
    }
}

impl std::error::Error for CnnDecodeError {}

/// The protocol a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every layer under CKKS, polynomial activations ([`super::run_client`]).
    Fhe,
    /// The linear layers under CKKS, every ReLU exact in MPC ([`super::hybrid`]).
    Hybrid {
        /// Ferret silent OT behind the COT pools instead of IKNP alone.
        silent: bool,
    },
}

impl Mode {
    /// The mode a network needs: hybrid with a [`Layer::Relu`], FHE-only without.
    pub fn of(net: &Network, silent: bool) -> Mode {
        if has_relu(net) {
            Mode::Hybrid { silent }
        } else {
            Mode::Fhe
        }
    }

    fn bytes(self) -> (u8, u8) {
        match self {
            Mode::Fhe => (0, 0),
            Mode::Hybrid { silent } => (1, u8::from(silent)),
        }
    }

    fn from_bytes(mode: u8, ot: u8) -> Result<Mode, CnnDecodeError> {
        match (mode, ot) {
            (0, 0) => Ok(Mode::Fhe),
            (1, 0 | 1) => Ok(Mode::Hybrid { silent: ot == 1 }),
            (0 | 1, _) => Err(CnnDecodeError::BadOt { mode, ot }),
            _ => Err(CnnDecodeError::UnknownMode(mode)),
        }
    }

    fn is_hybrid(self) -> bool {
        matches!(self, Mode::Hybrid { .. })
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Fhe => f.write_str("fhe"),
            Mode::Hybrid { silent: true } => f.write_str("hybrid (silent OT)"),
            Mode::Hybrid { silent: false } => f.write_str("hybrid (IKNP OT)"),
        }
    }
}

fn has_relu(net: &Network) -> bool {
    net.layers.iter().any(|l| matches!(l, Layer::Relu))
}

/// The client's request to run a network on its images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnnHello {
    /// The protocol version ([`CNN_VERSION`]).
    pub version: u16,
    /// FHE-only or hybrid (with its OT).
    pub mode: Mode,
    /// Images per ciphertext batch.
    pub batch: u32,
    /// FEnc2's block size `S`.
    pub block: u32,
    /// Batches the client will send.
    pub batches: u32,
    /// Images in all, `(batches − 1)·batch < images ≤ batches·batch` (the count is public).
    pub images: u32,
    /// [`arch_digest`] of the architecture the client expects.
    pub digest: [u8; 32],
}

impl CnnHello {
    /// `version u16 ‖ mode u8 ‖ ot u8 ‖ batch u32 ‖ block u32 ‖ batches u32 ‖ images u32 ‖
    /// digest [32]`, little-endian.
    pub fn encode(&self) -> Vec<u8> {
        let (mode, ot) = self.mode.bytes();
        let mut out = Vec::with_capacity(CNN_HELLO_LEN);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.push(mode);
        out.push(ot);
        for v in [self.batch, self.block, self.batches, self.images] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.digest);
        out
    }

    /// The version field alone, if the payload has one: the server reads it first, so that a
    /// client of another version (whose hello may have another length) is refused as such.
    pub fn peek_version(b: &[u8]) -> Option<u16> {
        Some(u16::from_le_bytes(b.get(..2)?.try_into().ok()?))
    }

    /// Decodes exactly [`CNN_HELLO_LEN`] bytes with a known mode and OT. The numbers are checked
    /// by the server against its model, not here.
    pub fn decode(b: &[u8]) -> Result<CnnHello, CnnDecodeError> {
        let b: &[u8; CNN_HELLO_LEN] = b.try_into().map_err(|_| CnnDecodeError::Length {
            expected: CNN_HELLO_LEN,
            found: b.len(),
        })?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&b[20..52]);
        Ok(CnnHello {
            version: u16::from_le_bytes([b[0], b[1]]),
            mode: Mode::from_bytes(b[2], b[3])?,
            batch: u32_at(4),
            block: u32_at(8),
            batches: u32_at(12),
            images: u32_at(16),
            digest,
        })
    }
}

/// Encodes an acceptance: `version u16`.
pub fn encode_accept(version: u16) -> Vec<u8> {
    version.to_le_bytes().to_vec()
}

/// Decodes an acceptance: exactly [`CNN_ACCEPT_LEN`] bytes, the server's version.
pub fn decode_accept(b: &[u8]) -> Result<u16, CnnDecodeError> {
    let b: [u8; CNN_ACCEPT_LEN] = b.try_into().map_err(|_| CnnDecodeError::Length {
        expected: CNN_ACCEPT_LEN,
        found: b.len(),
    })?;
    Ok(u16::from_le_bytes(b))
}

/// Why a CNN server refused a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CnnRefuseCode {
    /// The request is not a hello, or the hello did not decode.
    Malformed,
    /// The client speaks another protocol version.
    UnsupportedVersion,
    /// The client's architecture digest is not the served model's.
    OtherModel,
    /// The mode does not fit the model (a ReLU network runs hybrid, any other FHE-only).
    WrongMode,
    /// The batch, the batch count or the image count is out of range.
    BadBatch,
    /// The block size does not plan, or its plan is deeper than the parameter set.
    BadBlock,
    /// The server is at its client limit.
    Busy,
    /// The server cannot set up this request (its own failure, not the client's).
    Unavailable,
}

impl CnnRefuseCode {
    /// Every code, in wire order (1, 2, …).
    pub const ALL: [CnnRefuseCode; 8] = [
        CnnRefuseCode::Malformed,
        CnnRefuseCode::UnsupportedVersion,
        CnnRefuseCode::OtherModel,
        CnnRefuseCode::WrongMode,
        CnnRefuseCode::BadBatch,
        CnnRefuseCode::BadBlock,
        CnnRefuseCode::Busy,
        CnnRefuseCode::Unavailable,
    ];

    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            CnnRefuseCode::Malformed => 1,
            CnnRefuseCode::UnsupportedVersion => 2,
            CnnRefuseCode::OtherModel => 3,
            CnnRefuseCode::WrongMode => 4,
            CnnRefuseCode::BadBatch => 5,
            CnnRefuseCode::BadBlock => 6,
            CnnRefuseCode::Busy => 7,
            CnnRefuseCode::Unavailable => 8,
        }
    }

    /// The code of a wire value.
    pub fn from_code(c: u8) -> Option<CnnRefuseCode> {
        CnnRefuseCode::ALL.into_iter().find(|r| r.code() == c)
    }
}

impl std::fmt::Display for CnnRefuseCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CnnRefuseCode::Malformed => "malformed request",
            CnnRefuseCode::UnsupportedVersion => "unsupported protocol version",
            CnnRefuseCode::OtherModel => "another model",
            CnnRefuseCode::WrongMode => "wrong mode for this model",
            CnnRefuseCode::BadBatch => "bad batch",
            CnnRefuseCode::BadBlock => "bad block size",
            CnnRefuseCode::Busy => "server busy",
            CnnRefuseCode::Unavailable => "request unavailable",
        })
    }
}

/// A refusal payload: `code u8 ‖ reason` (UTF-8, cut at a character boundary to fit
/// [`MAX_CNN_REASON`] bytes).
pub fn encode_refusal(code: CnnRefuseCode, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(MAX_CNN_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = Vec::with_capacity(1 + end);
    out.push(code.code());
    out.extend_from_slice(&reason.as_bytes()[..end]);
    out
}

/// Decodes a refusal: at least the code byte, a known code, at most [`MAX_CNN_REASON`] bytes of
/// UTF-8 reason.
pub fn decode_refusal(b: &[u8]) -> Result<(CnnRefuseCode, String), CnnDecodeError> {
    let (&c, text) = b.split_first().ok_or(CnnDecodeError::Length {
        expected: 1,
        found: 0,
    })?;
    let code = CnnRefuseCode::from_code(c).ok_or(CnnDecodeError::UnknownCode(c))?;
    if text.len() > MAX_CNN_REASON {
        return Err(CnnDecodeError::ReasonTooLong(text.len()));
    }
    let reason = std::str::from_utf8(text)
        .map_err(|_| CnnDecodeError::ReasonNotUtf8)?
        .to_owned();
    Ok((code, reason))
}

/// SHA-256 of the network's public geometry: the input's channels and side, then per layer its
/// kind and shape (a convolution's channels, kernel, stride, padding, depthwise flag and point
/// outputs; a linear layer's inputs and outputs; a tag for the quadratic, ReLU and flatten
/// layers). Neither the name nor any weight, bias or activation coefficient enters it, so the
/// client computes it from the same model file's architecture and the server from its weights.
pub fn arch_digest(net: &Network) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"veil-cnn-arch/1");
    let mut put = |v: usize| h.update((v as u64).to_le_bytes());
    put(net.channels);
    put(net.side);
    put(net.layers.len());
    for l in &net.layers {
        match l {
            Layer::Conv(c) => {
                for v in [
                    1,
                    c.in_channels,
                    c.out_channels,
                    c.kernel,
                    c.stride,
                    c.padding,
                    usize::from(c.depthwise),
                    c.point_outputs,
                ] {
                    put(v);
                }
            }
            Layer::Quad(_) => put(2),
            Layer::Relu => put(3),
            Layer::Flatten => put(4),
            Layer::Linear(f) => {
                for v in [5, f.inputs, f.outputs] {
                    put(v);
                }
            }
        }
    }
    h.finalize().into()
}

/// The block size the client proposes when none is given: [`Network::choose_block`] on the
/// public architecture, in the session's mode.
pub fn default_block(
    arch: &Network,
    batch: usize,
    slots: usize,
    mode: Mode,
) -> Result<usize, VisionError> {
    match mode {
        Mode::Fhe => choose_block(arch, batch, slots, PlanMode::Fhe),
        Mode::Hybrid { .. } => choose_block(arch, batch, slots, PlanMode::Hybrid),
    }
}

/// A CKKS context per parameter set of [`batch_params`], built on first use by `factory` and
/// shared by every later session at a batch with the same set (two sets in all: `N = 2^14` for
/// the pixel-wise batch of 8,192 and `N = 2^15` for any other).
pub fn cached_cnn_ckks<B: PolyBackend>(
    factory: impl Fn(&veil_core::CkksParams) -> Result<B, String> + Send + Sync + 'static,
) -> impl Fn(usize) -> Result<Arc<Ckks<B>>, String> + Send + Sync + 'static {
    let contexts = ContextCache::new(factory);
    move |batch| {
        let p = batch_params(batch).validate().map_err(|e| e.to_string())?;
        contexts.get(&p)
    }
}

/// The shared factory of a server's CKKS contexts.
type MakeCkks<B> = dyn Fn(usize) -> Result<Arc<Ckks<B>>, String> + Send + Sync;

/// Settings of [`serve_cnn`]: the server framework's.
pub type CnnServeOptions = crate::serve::ServerOptions;

/// Counts of a finished [`serve_cnn`]: the server framework's.
pub type CnnServeSummary = crate::serve::ServeSummary;

/// What the server saw of one session.
#[derive(Clone, Debug)]
pub struct CnnSession {
    /// The accepted hello.
    pub hello: CnnHello,
    /// Seconds from the acceptance to the last batch.
    pub seconds: f64,
}

/// Sends a refusal (best effort: a client that is gone gets none) and fails with it.
fn refuse<T>(
    t: &mut dyn Transport,
    code: CnnRefuseCode,
    reason: impl Into<String>,
) -> Result<T, VisionError> {
    let reason = reason.into();
    let _ = t.send(vec![frame(TAG_CNN_REFUSE, encode_refusal(code, &reason))]);
    Err(VisionError::Refused { code, reason })
}

/// Whether `block` plans `net` at `batch` on `ck`'s parameters in `mode`; the reason otherwise.
fn check_block<B: PolyBackend>(
    ck: &Ckks<B>,
    net: &Network,
    mode: Mode,
    batch: usize,
    block: usize,
) -> Result<(), String> {
    if block == 0 || block > MAX_BLOCK {
        return Err(format!("block size {block} is not in 1..={MAX_BLOCK}"));
    }
    let params = ck.params();
    let slots = params.n() / 2;
    if mode.is_hybrid() {
        return HybridPlan::new(params, net, batch, block)
            .map(|_| ())
            .map_err(|e| format!("block size {block} at batch {batch} does not plan: {e}"));
    }
    let arch = net.public_architecture();
    let plan = arch
        .dry_run(batch, block, slots)
        .map_err(|e| format!("block size {block} at batch {batch} does not plan: {e}"))?
        .plan;
    if plan.depth > params.max_level() {
        return Err(format!(
            "block size {block} at batch {batch} needs {} levels; {} has {}",
            plan.depth,
            params.name(),
            params.max_level()
        ));
    }
    Ok(())
}

/// Reads the client's hello and checks it against the served model: the version, the digest, the
/// mode, the batch numbers and the block size (each failure a refusal with its own code); the
/// accepted hello and its CKKS context.
fn read_hello<B: PolyBackend>(
    t: &mut dyn Transport,
    net: &Network,
    digest: &[u8; 32],
    make_ckks: &MakeCkks<B>,
) -> Result<(CnnHello, Arc<Ckks<B>>), VisionError> {
    use CnnRefuseCode as R;
    let h = match crate::serve::read_hello::<CnnHello>(t) {
        Ok(h) => h,
        Err(HelloProblem::Transport(
            e @ (TransportError::Malformed(_) | TransportError::TooLarge { .. }),
        )) => return refuse(t, R::Malformed, format!("not a Veil frame: {e}")),
        Err(HelloProblem::Transport(e)) => {
            return Err(VisionError::Party(PartyError::Transport(e)))
        }
        Err(HelloProblem::Malformed(text)) => return refuse(t, R::Malformed, text),
        Err(HelloProblem::Version(text)) => return refuse(t, R::UnsupportedVersion, text),
    };
    if &h.digest != digest {
        let classes = net.classes();
        return refuse(
            t,
            R::OtherModel,
            format!(
                "this server serves another architecture ({} layers on {}×{}×{} inputs, {classes} classes)",
                net.layers.len(),
                net.channels,
                net.side,
                net.side
            ),
        );
    }
    let relu = has_relu(net);
    if relu != h.mode.is_hybrid() {
        return refuse(
            t,
            R::WrongMode,
            if relu {
                format!(
                    "this model has ReLU activations and runs in hybrid mode, not {}",
                    h.mode
                )
            } else {
                "this model has polynomial activations and runs in fhe mode, not hybrid".into()
            },
        );
    }
    let (batch, batches, images) = (h.batch as usize, h.batches as usize, h.images as usize);
    if !batch.is_power_of_two() || !(MIN_BATCH..=MAX_BATCH).contains(&batch) {
        return refuse(
            t,
            R::BadBatch,
            format!("batch {batch} is not a power of two in {MIN_BATCH}..={MAX_BATCH}"),
        );
    }
    if batch == MAX_BATCH && h.mode.is_hybrid() {
        return refuse(
            t,
            R::BadBatch,
            format!("batch {MAX_BATCH} runs pixel-wise in fhe mode only"),
        );
    }
    if !(1..=MAX_BATCHES).contains(&batches) {
        return refuse(
            t,
            R::BadBatch,
            format!("{batches} batches are not in 1..={MAX_BATCHES}"),
        );
    }
    if images > batches * batch || images <= (batches - 1) * batch {
        return refuse(
            t,
            R::BadBatch,
            format!("{images} images do not fill {batches} batches of {batch}"),
        );
    }
    let ck = match make_ckks(batch) {
        Ok(ck) => ck,
        Err(e) => {
            return refuse(
                t,
                R::Unavailable,
                format!("no CKKS context at batch {batch}: {e}"),
            )
        }
    };
    if let Err(reason) = check_block(&ck, net, h.mode, batch, h.block as usize) {
        return refuse(t, R::BadBlock, reason);
    }
    Ok((h, ck))
}

/// Serves one session over `t`: the hello (refused with a typed [`CnnRefuseCode`] when it does
/// not match `net`), the acceptance, then the FHE-only or hybrid run with the hello's batch,
/// block and counts. Takes public key material only. A failure after the acceptance is sent to
/// the client as an abort (unless the client is gone or aborted itself).
pub fn serve_one_cnn<B: PolyBackend>(
    t: &mut dyn Transport,
    net: &Network,
    digest: &[u8; 32],
    make_ckks: &MakeCkks<B>,
) -> Result<CnnSession, VisionError> {
    let (h, ck) = read_hello(t, net, digest, make_ckks)?;
    t.send(vec![frame(TAG_CNN_ACCEPT, encode_accept(CNN_VERSION))])
        .map_err(|e| VisionError::Party(PartyError::Transport(e)))?;
    let t0 = Instant::now();
    let (batch, block) = (h.batch as usize, h.block as usize);
    let res = match h.mode {
        Mode::Fhe => {
            run_server(&ck, t, net, batch, block, h.batches as usize, |_, _| {}).map(|_| ())
        }
        Mode::Hybrid { silent } => hybrid::run_server(
            &ck,
            t,
            net,
            batch,
            block,
            h.images as usize,
            &hybrid::HybridOptions { silent_ot: silent },
            &mut |_, _| {},
        )
        .map(|_| ()),
    };
    if let Err(e) = res {
        let peer_gone = matches!(
            &e,
            VisionError::Party(PartyError::Transport(
                TransportError::PeerAborted(_) | TransportError::Disconnected
            ))
        );
        if !peer_gone && !matches!(e, VisionError::PlanMismatch) {
            t.abort(&e.to_string());
        }
        return Err(e);
    }
    Ok(CnnSession {
        hello: h,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The memory a CNN session is counted for against a budget by default, bytes: LeNet's measured
/// peak at batch 16 (`veil infer-image`, client and server in one process: 9.2 GB); batch 8,192
/// peaks at 18.5 GB, so a server of large batches sets `session_memory`.
pub const CNN_SESSION_MEMORY: u64 = 9_200_000_000;

/// The CNN family's [`Handler`] on the server framework: [`serve_one_cnn`] per client.
pub struct CnnHandler<B: PolyBackend> {
    net: Arc<Network>,
    digest: [u8; 32],
    make_ckks: Arc<MakeCkks<B>>,
}

impl<B: PolyBackend> CnnHandler<B> {
    /// A handler serving `net`, with the CKKS context of a batch from `make_ckks` (see
    /// [`cached_cnn_ckks`]).
    pub fn new(
        net: Arc<Network>,
        make_ckks: impl Fn(usize) -> Result<Arc<Ckks<B>>, String> + Send + Sync + 'static,
    ) -> Self {
        CnnHandler {
            digest: arch_digest(&net),
            net,
            make_ckks: Arc::new(make_ckks),
        }
    }
}

impl<B: PolyBackend> Handler for CnnHandler<B> {
    fn name(&self) -> &str {
        "veil serve --cnn"
    }

    fn serve(&self, t: &mut dyn Transport) -> SessionEnd {
        match serve_one_cnn(t, &self.net, &self.digest, &*self.make_ckks) {
            Ok(s) => SessionEnd::Served(format!(
                "{}, batch {}, {} images",
                s.hello.mode, s.hello.batch, s.hello.images
            )),
            Err(VisionError::Refused { code, reason }) => {
                SessionEnd::Refused(format!("({code}) {reason}"))
            }
            Err(e) => SessionEnd::Failed(e.to_string()),
        }
    }

    fn refuse_busy(&self, t: &mut dyn Transport, reason: &str) {
        let _ = refuse::<()>(t, CnnRefuseCode::Busy, reason);
    }

    fn session_memory(&self) -> u64 {
        CNN_SESSION_MEMORY
    }
}

/// Accepts clients on `listener` and serves `net` to each on its own thread, on the server
/// framework ([`crate::serve::serve`]): at most [`CnnServeOptions::max_clients`] at once (one
/// more is told [`CnnRefuseCode::Busy`]). `make_ckks` gives the CKKS context of a batch (see
/// [`cached_cnn_ckks`]). A failed, refused or panicking session ends only itself. Returns only
/// after [`CnnServeOptions::max_connections`] connections, once their sessions have finished.
pub fn serve_cnn<B: PolyBackend>(
    listener: TcpListener,
    net: Arc<Network>,
    make_ckks: impl Fn(usize) -> Result<Arc<Ckks<B>>, String> + Send + Sync + 'static,
    opts: CnnServeOptions,
) -> CnnServeSummary {
    crate::serve::serve(listener, Arc::new(CnnHandler::new(net, make_ckks)), opts)
}

/// What the client saw of a remote run.
#[derive(Clone, Debug)]
pub enum RemoteOutcome {
    /// An FHE-only run.
    Fhe(ClientOutcome),
    /// A hybrid run.
    Hybrid(hybrid::HybridOutcome),
}

/// A run against a [`serve_cnn`] server.
#[derive(Clone, Debug)]
pub struct RemoteRun {
    /// The block size used.
    pub block: usize,
    /// The batch.
    pub batch: usize,
    /// The mode.
    pub mode: Mode,
    /// The client's outcome (logits and costs).
    pub outcome: RemoteOutcome,
    /// Seconds from the connection to the last logits.
    pub wall_s: f64,
}

impl RemoteRun {
    /// Logits, `[image][class]`.
    pub fn logits(&self) -> &[Vec<f64>] {
        match &self.outcome {
            RemoteOutcome::Fhe(o) => &o.logits,
            RemoteOutcome::Hybrid(o) => &o.logits,
        }
    }
}

/// The client's half of the handshake: sends `hello` and waits for the server's answer; `Ok`
/// on an acceptance, [`VisionError::Refused`] with the server's code and reason on a refusal.
pub fn handshake(t: &mut dyn Transport, hello: &CnnHello) -> Result<(), VisionError> {
    let net = |e| VisionError::Party(PartyError::Transport(e));
    t.send(vec![frame(TAG_CNN_HELLO, hello.encode())])
        .map_err(net)?;
    let f = t.recv().map_err(net)?;
    match f.tag {
        TAG_CNN_ACCEPT => {
            let v = decode_accept(&f.payload).map_err(VisionError::Handshake)?;
            if v != hello.version {
                return Err(VisionError::Refused {
                    code: CnnRefuseCode::UnsupportedVersion,
                    reason: format!(
                        "the server accepted with version {v}, this client speaks {}",
                        hello.version
                    ),
                });
            }
            Ok(())
        }
        TAG_CNN_REFUSE => {
            let (code, reason) = decode_refusal(&f.payload).map_err(VisionError::Handshake)?;
            Err(VisionError::Refused { code, reason })
        }
        found => Err(VisionError::Party(PartyError::UnexpectedMessage {
            expected: TAG_CNN_ACCEPT,
            found,
        })),
    }
}

/// `Err` unless `images` are `arch`'s input and neither they nor `batch` are empty.
fn check_request(arch: &Network, images: &Images, batch: usize) -> Result<(), VisionError> {
    let shape = (arch.channels, arch.side, arch.side);
    if (images.channels, images.height, images.width) != shape
        || images.pixels.len() != images.count * arch.channels * arch.side * arch.side
    {
        return Err(VisionError::Plan(veil_core::Error::InvalidParameters(
            "the images' shape is not the network's input",
        )));
    }
    if images.count == 0 || batch == 0 {
        return Err(VisionError::NoBlock { batch });
    }
    Ok(())
}

/// Runs `images` through the model served at `addr`: connects (retrying for up to
/// [`DEFAULT_CONNECT_TIMEOUT`](crate::transport::DEFAULT_CONNECT_TIMEOUT), or `cfg.timeout` if
/// shorter; [`VisionError::Connect`] when nothing answers), then [`infer_remote_on`]. Every
/// receive waits at most `cfg.timeout`.
#[allow(clippy::too_many_arguments)]
pub fn infer_remote<B: PolyBackend>(
    ck: &Ckks<B>,
    addr: &str,
    arch: &Network,
    images: &Images,
    batch: usize,
    block: Option<usize>,
    mode: Mode,
    cfg: TransportConfig,
) -> Result<RemoteRun, VisionError> {
    check_request(arch, images, batch)?;
    let limit = crate::transport::DEFAULT_CONNECT_TIMEOUT.min(cfg.timeout);
    let mut t = TcpTransport::connect_within(addr, limit, cfg, &mut |_| {})
        .map_err(VisionError::Connect)?;
    infer_remote_on(ck, &mut t, arch, images, batch, block, mode)
}

/// Runs `images` through the model served at the other end of `t` (connected, e.g. with
/// [`TcpTransport::connect_within`]): proposes `batch` and `block` (`None`: [`default_block`])
/// in `mode` for the architecture of `arch` (only its geometry is used:
/// [`Network::public_architecture`]), and on acceptance runs the client's side with `ck` (which
/// must be the parameter set the server uses at `batch`, [`batch_params`] for `veil serve --cnn`). A
/// refusal is [`VisionError::Refused`]. Every receive waits at most `t`'s timeout.
pub fn infer_remote_on<B: PolyBackend>(
    ck: &Ckks<B>,
    t: &mut TcpTransport,
    arch: &Network,
    images: &Images,
    batch: usize,
    block: Option<usize>,
    mode: Mode,
) -> Result<RemoteRun, VisionError> {
    check_request(arch, images, batch)?;
    let slots = ck.params().n() / 2;
    let arch = arch.public_architecture();
    let block = match block {
        Some(b) => b,
        None => default_block(&arch, batch, slots, mode)?,
    };
    let batches = images.count.div_ceil(batch);
    let wide = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    let hello = CnnHello {
        version: CNN_VERSION,
        mode,
        batch: wide(batch),
        block: wide(block),
        batches: wide(batches),
        images: wide(images.count),
        digest: arch_digest(&arch),
    };
    let t0 = Instant::now();
    handshake(t, &hello)?;
    let outcome = match mode {
        Mode::Fhe => {
            let mut rng = crate::os_rng();
            RemoteOutcome::Fhe(run_client(ck, t, &arch, images, batch, block, &mut rng)?)
        }
        Mode::Hybrid { silent } => RemoteOutcome::Hybrid(hybrid::run_client(
            ck,
            t,
            &arch,
            images,
            batch,
            block,
            &hybrid::HybridOptions { silent_ot: silent },
            &mut |_, _| {},
        )?),
    };
    Ok(RemoteRun {
        block,
        batch,
        mode,
        outcome,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use veil_core::cnn::{Conv2d, Linear, Quadratic};

    fn hello() -> CnnHello {
        CnnHello {
            version: CNN_VERSION,
            mode: Mode::Hybrid { silent: true },
            batch: 16,
            block: 4,
            batches: 2,
            images: 20,
            digest: [7; 32],
        }
    }

    #[test]
    fn hello_round_trips_and_is_exactly_its_length() {
        for mode in [
            Mode::Fhe,
            Mode::Hybrid { silent: false },
            Mode::Hybrid { silent: true },
        ] {
            let h = CnnHello { mode, ..hello() };
            let b = h.encode();
            assert_eq!(b.len(), CNN_HELLO_LEN);
            assert_eq!(CnnHello::decode(&b), Ok(h));
            assert_eq!(CnnHello::peek_version(&b), Some(CNN_VERSION));
        }
    }

    #[test]
    fn hello_decoder_refuses_bad_lengths_and_enums() {
        let b = hello().encode();
        for n in [0, 1, 2, 3, CNN_HELLO_LEN - 1] {
            assert_eq!(
                CnnHello::decode(&b[..n]),
                Err(CnnDecodeError::Length {
                    expected: CNN_HELLO_LEN,
                    found: n
                })
            );
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(
            CnnHello::decode(&long),
            Err(CnnDecodeError::Length {
                expected: CNN_HELLO_LEN,
                found: CNN_HELLO_LEN + 1
            })
        );
        assert_eq!(CnnHello::peek_version(&[1]), None);
        for m in [2u8, 7, 255] {
            let mut x = b.clone();
            x[2] = m;
            assert_eq!(CnnHello::decode(&x), Err(CnnDecodeError::UnknownMode(m)));
        }
        for (m, o) in [(0u8, 1u8), (0, 2), (1, 2), (1, 255)] {
            let mut x = b.clone();
            x[2] = m;
            x[3] = o;
            assert_eq!(
                CnnHello::decode(&x),
                Err(CnnDecodeError::BadOt { mode: m, ot: o })
            );
        }
        // Every byte pattern either decodes to a hello that re-encodes to it or is an error.
        for i in 0..CNN_HELLO_LEN {
            for v in [0u8, 1, 2, 0x80, 0xff] {
                let mut x = b.clone();
                x[i] = v;
                if let Ok(h) = CnnHello::decode(&x) {
                    assert_eq!(h.encode(), x);
                }
            }
        }
    }

    #[test]
    fn accept_and_refusal_decoders_are_total() {
        assert_eq!(decode_accept(&encode_accept(CNN_VERSION)), Ok(CNN_VERSION));
        assert!(decode_accept(&[]).is_err());
        assert!(decode_accept(&[1, 0, 0]).is_err());
        for code in CnnRefuseCode::ALL {
            let b = encode_refusal(code, "batch 3 — no");
            assert_eq!(decode_refusal(&b), Ok((code, "batch 3 — no".to_string())));
            assert!(!code.to_string().is_empty());
        }
        assert_eq!(
            decode_refusal(&[]),
            Err(CnnDecodeError::Length {
                expected: 1,
                found: 0
            })
        );
        for c in [0u8, 9, 255] {
            assert_eq!(decode_refusal(&[c]), Err(CnnDecodeError::UnknownCode(c)));
        }
        assert_eq!(
            decode_refusal(&[5, 0xff, 0xfe]),
            Err(CnnDecodeError::ReasonNotUtf8)
        );
        let mut long = vec![5u8];
        long.extend(std::iter::repeat_n(b'a', MAX_CNN_REASON + 1));
        assert_eq!(
            decode_refusal(&long),
            Err(CnnDecodeError::ReasonTooLong(MAX_CNN_REASON + 1))
        );
        // A long reason is cut at a character boundary and still decodes.
        let text = "é".repeat(MAX_CNN_REASON);
        let b = encode_refusal(CnnRefuseCode::Busy, &text);
        let (_, r) = decode_refusal(&b).unwrap();
        assert!(r.len() <= MAX_CNN_REASON && text.starts_with(&r));
    }

    fn net(outputs: usize, w: f64) -> Network {
        Network {
            name: "a".into(),
            channels: 1,
            side: 8,
            layers: vec![
                Layer::Conv(Conv2d::new(1, 2, 3, 1, 1, vec![w; 18], vec![w; 2]).unwrap()),
                Layer::Quad(Quadratic::new(0.3, 0.5, 0.05).unwrap()),
                Layer::Flatten,
                Layer::Linear(
                    Linear::new(128, outputs, vec![w; 128 * outputs], vec![w; outputs]).unwrap(),
                ),
            ],
        }
    }

    /// A fire-style layer (a `1 × 1` branch beside a `3 × 3` one): the client's weight-free
    /// copy is a valid network whose dry run counts what the server's does.
    #[test]
    fn public_architecture_keeps_a_point_branch_valid() {
        let k = 3;
        let (ci, co, pt) = (4, 6, 2);
        let mut w = vec![0.0; co * ci * k * k];
        for (i, v) in w.iter_mut().enumerate() {
            let (o, tap) = (i / (ci * k * k), i % (k * k));
            if o >= pt || tap == 4 {
                *v = 0.25 + (i % 7) as f64 / 16.0;
            }
        }
        let conv = Conv2d::new(ci, co, k, 1, 1, w, vec![0.1; co])
            .unwrap()
            .with_point_outputs(pt)
            .unwrap();
        let net = Network {
            name: "fire".into(),
            channels: ci,
            side: 8,
            layers: vec![
                Layer::Conv(conv),
                Layer::Quad(Quadratic::new(0.125, 0.5, 0.25).unwrap()),
                Layer::Flatten,
                Layer::Linear(
                    Linear::new(co * 64, 3, vec![0.5; co * 64 * 3], vec![0.0; 3]).unwrap(),
                ),
            ],
        };
        let arch = net.public_architecture();
        arch.validate().unwrap();
        assert_eq!(arch_digest(&arch), arch_digest(&net));
        let server = net.dry_run(1, 2, 1024).unwrap().counts;
        let client = arch.dry_run(1, 2, 1024).unwrap().counts;
        assert_eq!(client, server);
    }

    #[test]
    fn arch_digest_covers_the_geometry_only() {
        let a = net(10, 0.5);
        let mut b = net(10, -1.25);
        b.name = "b".into();
        b.layers[1] = Layer::Quad(Quadratic::new(1.0, 0.0, 0.0).unwrap());
        assert_eq!(
            arch_digest(&a),
            arch_digest(&b),
            "weights and name do not enter"
        );
        assert_eq!(arch_digest(&a), arch_digest(&a.public_architecture()));
        assert_ne!(arch_digest(&a), arch_digest(&net(11, 0.5)));
        let mut c = net(10, 0.5);
        c.layers[1] = Layer::Relu;
        assert_ne!(arch_digest(&a), arch_digest(&c));
        let mut d = net(10, 0.5);
        if let Layer::Conv(cv) = &mut d.layers[0] {
            cv.stride = 2;
        }
        assert_ne!(arch_digest(&a), arch_digest(&d));
    }

    #[test]
    fn mode_follows_the_activations() {
        let a = net(10, 0.5);
        assert_eq!(Mode::of(&a, true), Mode::Fhe);
        let mut r = a.clone();
        r.layers[1] = Layer::Relu;
        assert_eq!(Mode::of(&r, false), Mode::Hybrid { silent: false });
    }
}
