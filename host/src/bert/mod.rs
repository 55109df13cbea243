//! One private inference session between a client and a server, over a [`Transport`].
//!
//! The client (MPC party P0) holds the CKKS secret key and its input; the server (P1) holds the
//! weights and public key material only. A session runs:
//!
//! 1. **Hello.** The client sends a [`Hello`] (protocol version, the [`fingerprint`] of the
//!    public architecture, the id of its validated CKKS parameter set, the padded length `m` and
//!    the valid-token count). The server answers [`Accept`] with the nonlinear blocks it serves
//!    ([`SessionOptions::blocks`]; the client plans with them), or a typed [`Refusal`]
//!    ([`RefuseCode`]: unsupported version, other model, other parameters, bad length, busy,
//!    malformed request, unavailable) and ends the session.
//! 2. **Keys.** [`crate::party::Client::send_keys`] / [`crate::party::Server::receive_keys`]: the
//!    parameter set, the public key and the evaluation keys the [`SessionPlan`] needs, seed
//!    compressed (tags `0x0A01..=0x0A04`).
//! 3. **Base OT.** [`Party::setup`] on both sides (MPC tags `0x00xx`).
//! 4. **Inference.** [`client_run`] / [`server_run`] driven by [`crate::mpc::drive`] (MPC and
//!    conversion tags `0x01xx..=0x06xx`).
//! 5. **Report.** The server sends its per-block [`ReportBlock`]s (operation counts are public:
//!    both parties derive them from the plan), so the client's table shows the server's CKKS
//!    work beside its own MPC traffic.
//!
//! # Messages of this module
//!
//! Tags `0x0B01..=0x0B04` (no other protocol uses `0x0Bxx`); little-endian; every decoder is
//! total over hostile bytes (exact lengths, typed [`DecodeError`]):
//!
//! | tag | from | payload |
//! |---|---|---|
//! | [`TAG_HELLO`] `0x0B01` | client | `version u16 ‖ fingerprint [u8; 32] ‖ params_id u64 ‖ m u32 ‖ valid u32` (50 bytes) |
//! | [`TAG_ACCEPT`] `0x0B02` | server | `version u16 ‖ blocks` ([`encode_blocks`]: 36 bytes; 38 bytes in all) |
//! | [`TAG_REFUSE`] `0x0B03` | server | `code u16 ‖ text_len u16 ‖ text` (UTF-8, ≤ 1024 bytes) |
//! | [`TAG_REPORT`] `0x0B04` | server | `count u32`, then per block `layer u32 ‖ name_len u8 ‖ name ‖ 12 × u64 op counts ‖ 4 × u64 conversion/MPC counters ‖ wall_s f64` |
//!
//! Refusal codes: 1 unsupported version, 2 other model, 3 other parameters, 4 bad length,
//! 5 busy, 6 malformed request, 7 unavailable.
//!
//! # Failures
//!
//! Every failure is a [`SessionError`]. Transport failures (a peer that disconnects, stalls past
//! the receive timeout or sends garbage) surface as [`SessionError::Transport`] or inside the
//! step that was running ([`SessionError::Keys`], [`SessionError::Mpc`]); a party that fails
//! tells its peer with an abort frame, so the peer fails fast rather than at its timeout. The
//! receive timeout bounds every step but one: after its Accept the server waits for the
//! client's keys up to [`SessionOptions::keys_timeout`], since the client generates them then.
//! [`serve`] runs each session on its own thread and keeps accepting whatever one session does
//! (a panic included).

mod calibrate;
mod client;
mod messages;
mod server;

pub use crate::serve::ServeSummary;
pub use calibrate::{calibrate, CalibrationRun};
pub use client::{run_client, ClientResult};
pub use messages::{
    decode_blocks, decode_report, describe_blocks, encode_blocks, encode_report, fingerprint,
    gelu_blocks, Accept, DecodeError, Hello, Refusal, RefuseCode, ReportBlock, ACCEPT_LEN,
    BLOCKS_LEN, HELLO_LEN, MAX_BLOCK_NAME, MAX_REFUSE_TEXT, MAX_REPORT_BLOCKS, SESSION_VERSION,
    TAG_ACCEPT, TAG_HELLO, TAG_REFUSE, TAG_REPORT,
};
pub(crate) use server::{read_hello_or_refuse, reject};
pub use server::{serve, serve_one, BertHandler, ServeOptions, ServerStats, BERT_SESSION_MEMORY};

use crate::mpc::DriverError;
use crate::mpc::{SetupError, Timed};
use crate::party::PartyError;
pub use crate::serve::BackendFactory;
use crate::serve::ContextCache;
use crate::transport::{Transport, TransportConfig, TransportError};
use std::sync::Arc;
use std::time::{Duration, Instant};
#[cfg(doc)]
use veil_core::bert::{client_run, server_run};
use veil_core::bert::{BlockCost, Blocks, EncoderConfig, SessionPlan};
use veil_core::ckks::Ckks;
use veil_core::convert::ProtocolError;
use veil_core::mpc::ot::silent::{SilentParams, FERRET_EMP_OT};
use veil_core::mpc::{Frame, MpcConfig, Party};
use veil_core::params::CkksParams;
use veil_core::PolyBackend;
use veil_core::SecretRng;

/// Errors of a session, on either side.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SessionError {
    /// The transport failed outside a key exchange or protocol run (timeout, disconnect,
    /// malformed frame, the peer aborted).
    Transport(TransportError),
    /// A frame arrived with another tag than the step expects.
    UnexpectedMessage {
        /// The tag (or tags) expected, e.g. `"0x0b02 or 0x0b03"`.
        expected: &'static str,
        /// The tag that arrived.
        found: u16,
    },
    /// A session message did not decode.
    Decode {
        /// Which message.
        what: &'static str,
        /// Why.
        source: DecodeError,
    },
    /// (Client) the server refused the session.
    Refused(Refusal),
    /// (Server) this server refused the client's request, and told it why.
    Rejected(Refusal),
    /// (Client) the caller's input does not fit the model (shape, valid count).
    Input(String),
    /// The session's CKKS parameter set did not validate.
    Params(veil_core::Error),
    /// The CKKS backend could not be built.
    Backend(String),
    /// The OS entropy source failed.
    Entropy(String),
    /// The session could not be planned for this shape.
    Plan(ProtocolError),
    /// The key exchange failed.
    Keys(PartyError),
    /// The base-OT setup or the private inference failed.
    Mpc {
        /// `"setup"` or `"inference"`.
        step: &'static str,
        /// The driver's error (transport errors of the step included).
        source: DriverError,
    },
    /// (Client) the server's report does not match the blocks this client ran.
    ReportMismatch {
        /// Blocks this client saw.
        client: usize,
        /// Blocks the server reported.
        server: usize,
    },
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Transport(e) => write!(f, "transport: {e}"),
            SessionError::UnexpectedMessage { expected, found } => {
                write!(f, "expected a frame with tag {expected}, got {found:#06x}")
            }
            SessionError::Decode { what, source } => write!(f, "{what} refused: {source}"),
            SessionError::Refused(r) => write!(f, "the server refused the session: {r}"),
            SessionError::Rejected(r) => write!(f, "refused the client: {r}"),
            SessionError::Input(s) => write!(f, "input: {s}"),
            SessionError::Params(e) => write!(f, "session parameters: {e}"),
            SessionError::Backend(s) => write!(f, "CKKS backend: {s}"),
            SessionError::Entropy(s) => write!(f, "OS entropy source: {s}"),
            SessionError::Plan(e) => write!(f, "plan: {e}"),
            SessionError::Keys(e) => write!(f, "key exchange: {e}"),
            SessionError::Mpc { step, source } => write!(f, "{step}: {source}"),
            SessionError::ReportMismatch { client, server } => write!(
                f,
                "the server reported {server} blocks, this client ran {client}"
            ),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<TransportError> for SessionError {
    fn from(e: TransportError) -> Self {
        SessionError::Transport(e)
    }
}

impl SessionError {
    /// The private inference's protocol failure.
    pub(crate) fn inference(source: DriverError) -> SessionError {
        SessionError::Mpc {
            step: "inference",
            source,
        }
    }

    /// The transport error underneath, wherever it surfaced (a session step, the key exchange
    /// or a protocol run).
    pub fn transport(&self) -> Option<&TransportError> {
        match self {
            SessionError::Transport(e)
            | SessionError::Keys(PartyError::Transport(e))
            | SessionError::Mpc {
                source: DriverError::Transport(e),
                ..
            } => Some(e),
            _ => None,
        }
    }
}

/// Settings of a session: the MPC configuration both parties must agree on (beyond what the
/// [`Hello`] checks), how long the server waits for the client's keys, and the nonlinear blocks
/// the server serves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionOptions {
    /// The MPC engine's configuration ([`veil_core::bert::MPC_CONFIG`] by default).
    pub mpc: MpcConfig,
    /// (Server) how long to wait for the client's keys after the Accept. The client generates
    /// them only then (a minute or more for a full model), so this wait may exceed the
    /// transport's receive timeout, which still bounds every other step. `None`: the receive
    /// timeout. A client that goes silent after its Accept holds its slot this long.
    pub keys_timeout: Option<Duration>,
    /// The silent OT (Ferret) behind the COT pools, or `None` for IKNP alone. Both parties must
    /// choose the same. Silent by default: from the second layer on, the private run's COTs cost
    /// ≈ 0.45 bit each instead of IKNP's 16 bytes (MiniLM: ≈ 50 MB per layer instead of 293).
    pub silent: Option<SilentParams>,
    /// (Server) the nonlinear blocks it serves ([`Blocks::EXACT`], the checkpoint's functions,
    /// by default; [`gelu_blocks`] names the GELU variants). The server plans with them before
    /// it accepts and sends them in its [`Accept`]; the client plans with the Accept's blocks
    /// and ignores this field.
    pub blocks: Blocks,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            mpc: veil_core::bert::MPC_CONFIG,
            keys_timeout: Some(Duration::from_secs(600)),
            silent: Some(FERRET_EMP_OT),
            blocks: Blocks::EXACT,
        }
    }
}

/// A transport whose receives go on past their timeouts until `until` (the frame decoder keeps
/// what has arrived, so a retried receive resumes the same frame). The wait ends at most one
/// receive timeout after `until`.
pub(crate) struct Patient<'a> {
    pub(crate) t: &'a mut dyn Transport,
    pub(crate) until: Instant,
}

impl Transport for Patient<'_> {
    fn send(&mut self, frames: Vec<Frame>) -> Result<(), TransportError> {
        self.t.send(frames)
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        loop {
            match self.t.recv() {
                Err(TransportError::Timeout) if Instant::now() < self.until => {}
                r => return r,
            }
        }
    }
    fn recv_limited(&mut self, limits: TransportConfig) -> Result<Frame, TransportError> {
        loop {
            match self.t.recv_limited(limits) {
                Err(TransportError::Timeout) if Instant::now() < self.until => {}
                r => return r,
            }
        }
    }
    fn abort(&mut self, reason: &str) {
        self.t.abort(reason)
    }
}

/// One block of a session's table, as one party saw it: the block's costs (at the client,
/// `cost.ckks` holds the server's reported operation counts once the run has finished, zero in
/// progress events) and this party's wall time.
pub type BlockRow = Timed<BlockCost>;

/// The CKKS parameter set of a session for architecture `cfg` at padded length `m`: today one
/// 128-bit set for every shape ([`veil_core::bert::session_params`]). The one place the host
/// makes the choice, so both sides derive the same set.
pub fn session_params(cfg: &EncoderConfig, m: usize) -> Result<CkksParams, veil_core::Error> {
    let _ = (cfg, m);
    veil_core::bert::session_params()
}

/// How a cache chooses the parameter set of a session shape.
pub type ParamsPolicy =
    dyn Fn(&EncoderConfig, usize) -> Result<CkksParams, veil_core::Error> + Send + Sync;

/// The CKKS contexts of a BERT server: the parameter policy of a session shape on the server
/// framework's [`ContextCache`] (shared by every shape with the same parameter set).
pub struct CkksCache<B: PolyBackend> {
    contexts: ContextCache<B>,
    params: Box<ParamsPolicy>,
}

impl<B: PolyBackend> std::fmt::Debug for CkksCache<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CkksCache {{ {:?} }}", self.contexts)
    }
}

impl<B: PolyBackend> CkksCache<B> {
    /// A cache whose contexts use [`session_params`] on backends built by `factory`.
    pub fn new(factory: impl Fn(&CkksParams) -> Result<B, String> + Send + Sync + 'static) -> Self {
        Self::with_params(factory, session_params)
    }

    /// A cache with another parameter policy (tests use a fast insecure set). Both parties of a
    /// session must use the same policy, or the server refuses with
    /// [`RefuseCode::OtherParams`].
    pub fn with_params(
        factory: impl Fn(&CkksParams) -> Result<B, String> + Send + Sync + 'static,
        params: impl Fn(&EncoderConfig, usize) -> Result<CkksParams, veil_core::Error>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        CkksCache {
            contexts: ContextCache::new(factory),
            params: Box::new(params),
        }
    }

    /// The parameter set this cache uses for `cfg` at length `m`.
    pub fn params_for(&self, cfg: &EncoderConfig, m: usize) -> Result<CkksParams, SessionError> {
        (self.params)(cfg, m).map_err(SessionError::Params)
    }

    /// The context of a session of `cfg` at length `m` (built on first use).
    pub fn get(&self, cfg: &EncoderConfig, m: usize) -> Result<Arc<Ckks<B>>, SessionError> {
        let params = self.params_for(cfg, m)?;
        self.contexts.get(&params).map_err(SessionError::Backend)
    }
}

/// A fresh ChaCha20 CSPRNG seeded from the OS, wiped when dropped.
pub(crate) fn session_rng() -> Result<SecretRng, SessionError> {
    crate::mpc::session_rng().map_err(SessionError::from)
}

pub(crate) use crate::transport::frame;

/// The client's error for a refusal frame's payload: the server's [`Refusal`], or why it did
/// not decode.
pub(crate) fn refused(payload: &[u8]) -> SessionError {
    match Refusal::decode(payload) {
        Ok(r) => SessionError::Refused(r),
        Err(source) => SessionError::Decode {
            what: "refusal",
            source,
        },
    }
}

/// How a [`crate::serve::Handler`]'s session ended, from its result (`served` writes the log
/// line's detail): a refusal as unavailable is the server's own fault (a backend or a plan
/// that failed), so it counts as a failure.
pub(crate) fn session_end<T>(
    r: Result<T, SessionError>,
    served: impl FnOnce(T) -> String,
) -> crate::serve::SessionEnd {
    use crate::serve::SessionEnd;
    match r {
        Ok(st) => SessionEnd::Served(served(st)),
        Err(SessionError::Rejected(r)) if r.code == RefuseCode::Unavailable => {
            SessionEnd::Failed(r.to_string())
        }
        Err(SessionError::Rejected(r)) => SessionEnd::Refused(r.to_string()),
        Err(e) => SessionEnd::Failed(e.to_string()),
    }
}

/// Receives the next frame; a transport error other than the peer's own abort or disconnect is
/// reported to the peer.
pub(crate) fn recv(t: &mut dyn Transport) -> Result<Frame, SessionError> {
    let r = t.recv();
    on_error(t, r)
}

/// Reports a receive error to the peer (unless the peer ended the session itself).
fn on_error(
    t: &mut dyn Transport,
    r: Result<Frame, TransportError>,
) -> Result<Frame, SessionError> {
    r.map_err(|e| transport_failed(t, e))
}

/// A receive error, reported to the peer (unless the peer ended the session itself).
pub(crate) fn transport_failed(t: &mut dyn Transport, e: TransportError) -> SessionError {
    if !matches!(
        e,
        TransportError::PeerAborted(_) | TransportError::Disconnected
    ) {
        t.abort(&e.to_string());
    }
    SessionError::Transport(e)
}

/// Plans the session (both sides call it with the same arguments: the server with its own
/// blocks, the client with those of the server's Accept).
pub(crate) fn plan<B: PolyBackend>(
    ck: &Ckks<B>,
    cfg: &EncoderConfig,
    m: usize,
    blocks: Blocks,
) -> Result<SessionPlan, SessionError> {
    SessionPlan::with_blocks(ck.params(), cfg, m, blocks).map_err(SessionError::Plan)
}

/// A party with its own CSPRNG, after the base-OT setup over `t`, and the setup's seconds.
pub(crate) fn setup_party(
    id: veil_core::mpc::PartyId,
    opts: &SessionOptions,
    t: &mut dyn Transport,
) -> Result<(Party<SecretRng>, f64), SessionError> {
    crate::mpc::setup_party(id, opts.mpc, opts.silent, t).map_err(SessionError::from)
}

impl From<SetupError> for SessionError {
    fn from(e: SetupError) -> Self {
        match e {
            SetupError::Entropy(e) => SessionError::Entropy(e),
            SetupError::Mpc(source) => SessionError::Mpc {
                step: "setup",
                source,
            },
        }
    }
}
