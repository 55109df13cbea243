//! The server's side of a session, and the accept loop.

use super::messages::{
    encode_report, fingerprint, Accept, Hello, Refusal, RefuseCode, ReportBlock, SESSION_VERSION,
    TAG_ACCEPT, TAG_REFUSE, TAG_REPORT,
};
use super::{
    frame, plan, setup_party, transport_failed, BlockRow, CkksCache, Patient, SessionError,
    SessionOptions,
};
use crate::mpc::Clock;
use crate::party::{KeyExchangeStats, Server};
use crate::serve::{Handler, HelloProblem, ServeSummary, ServerOptions, SessionEnd};
use crate::transport::{Transport, TransportConfig};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;
use veil_core::bert::{server_run, EncoderWeights};
use veil_core::mpc::{PartyId, Stats};
use veil_core::PolyBackend;

/// What the server saw of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStats {
    /// Padded sequence length.
    pub m: usize,
    /// Non-padding tokens.
    pub valid: usize,
    /// The CKKS parameter set's name.
    pub params: String,
    /// Per block: the server's wall time, CKKS operations and MPC traffic.
    pub blocks: Vec<BlockRow>,
    /// The key exchange as the server saw it.
    pub key_exchange: KeyExchangeStats,
    /// Base-OT setup wall time, seconds.
    pub setup_s: f64,
    /// Inference wall time, seconds.
    pub run_s: f64,
    /// Whole session, seconds.
    pub total_s: f64,
    /// The server's MPC channel counters.
    pub mpc: Stats,
}

impl ServerStats {
    /// MPC bytes sent and received over the whole session (setup included).
    pub fn mpc_bytes(&self) -> u64 {
        let s = &self.mpc;
        [s.setup, s.offline, s.online]
            .iter()
            .map(|p| p.bytes_sent + p.bytes_recv)
            .sum()
    }
}

/// Sends `r` to the client and fails with it.
pub(crate) fn reject<T>(t: &mut dyn Transport, r: Refusal) -> Result<T, SessionError> {
    // A failed send still ends the session with the refusal: the client is gone.
    let _ = t.send(vec![frame(TAG_REFUSE, r.encode())]);
    Err(SessionError::Rejected(r))
}

/// The client's hello of family `H` ([`crate::serve::read_hello`]); one that is malformed or
/// of another version is refused with the reason.
pub(crate) fn read_hello_or_refuse<H: crate::serve::HelloMessage>(
    t: &mut dyn Transport,
) -> Result<H, SessionError> {
    match crate::serve::read_hello::<H>(t) {
        Ok(h) => Ok(h),
        Err(HelloProblem::Transport(e)) => Err(transport_failed(t, e)),
        Err(HelloProblem::Malformed(text)) => reject(t, Refusal::new(RefuseCode::Malformed, text)),
        Err(HelloProblem::Version(text)) => {
            reject(t, Refusal::new(RefuseCode::UnsupportedVersion, text))
        }
    }
}

/// Reads the client's Hello and checks it against the served model; the accepted `(m, valid)`.
fn read_hello<B: PolyBackend>(
    t: &mut dyn Transport,
    weights: &EncoderWeights,
    ckks: &CkksCache<B>,
) -> Result<(usize, usize, std::sync::Arc<veil_core::ckks::Ckks<B>>), SessionError> {
    let hello = read_hello_or_refuse::<Hello>(t)?;
    let cfg = &weights.cfg;
    if hello.fingerprint != fingerprint(cfg) {
        return reject(
            t,
            Refusal::new(
                RefuseCode::OtherModel,
                format!(
                    "this server serves {} layers, hidden {}, {} heads, FFN {}, {} classes",
                    cfg.layers, cfg.hidden, cfg.heads, cfg.ffn, cfg.classes
                ),
            ),
        );
    }
    let (m, valid) = match hello.check_lengths() {
        Ok(mv) => mv,
        Err(text) => return reject(t, Refusal::new(RefuseCode::BadLength, text)),
    };
    let ck = match ckks.get(cfg, m) {
        Ok(ck) => ck,
        Err(e) => return reject(t, Refusal::new(RefuseCode::Unavailable, e.to_string())),
    };
    let expected = ck.params().id();
    if hello.params_id != expected {
        return reject(
            t,
            Refusal::new(
                RefuseCode::OtherParams,
                format!(
                    "at m = {m} this server uses {} (id {expected:#018x}), the client {:#018x}",
                    ck.params().name(),
                    hello.params_id
                ),
            ),
        );
    }
    Ok((m, valid, ck))
}

/// Serves one session over `t`: the Hello (refused with a typed [`Refusal`] when it does not
/// match `weights`' architecture, the parameter set of its shape or the supported lengths), the
/// Accept with [`SessionOptions::blocks`] (refused as unavailable where they do not plan), the
/// key exchange, the base OT, the inference, the report. Takes public key material only.
pub fn serve_one<B: PolyBackend>(
    t: &mut dyn Transport,
    weights: &EncoderWeights,
    ckks: &CkksCache<B>,
    opts: &SessionOptions,
) -> Result<ServerStats, SessionError> {
    let (m, valid, ck) = read_hello(t, weights, ckks)?;
    let t0 = Instant::now();
    let plan = match plan(&ck, &weights.cfg, m, opts.blocks) {
        Ok(p) => p,
        Err(e) => return reject(t, Refusal::new(RefuseCode::Unavailable, e.to_string())),
    };
    t.send(vec![frame(
        TAG_ACCEPT,
        Accept {
            version: SESSION_VERSION,
            blocks: opts.blocks,
        }
        .encode(),
    )])?;

    // The client generates its keys now: wait for them up to `keys_timeout`. Its Galois keys
    // are the plan's rotations and the conjugation; no frame may carry more.
    let galois = plan.rotations().len() + 1;
    let (server, key_exchange) = match opts.keys_timeout {
        Some(d) => Server::receive_keys(
            &ck,
            &mut Patient {
                t: &mut *t,
                until: crate::transport::deadline_after(d),
            },
            galois,
        ),
        None => Server::receive_keys(&ck, t, galois),
    }
    .map_err(SessionError::Keys)?;

    let (mut p, setup_s) = setup_party(PartyId::P1, opts, t)?;

    let tr = Instant::now();
    let mut blocks = Vec::new();
    let mut clock = Clock::new();
    let mut on_block = |c: &veil_core::bert::BlockCost| blocks.push(clock.row(c));
    crate::mpc::drive(
        p.channel(),
        server_run(&mut p, server.keys(), &plan, weights, valid, &mut on_block),
        t,
    )
    .map_err(SessionError::inference)?;
    let run_s = tr.elapsed().as_secs_f64();

    let report: Vec<ReportBlock> = blocks
        .iter()
        .map(|r| ReportBlock {
            layer: u32::try_from(r.cost.layer).unwrap_or(u32::MAX),
            block: r.cost.block.to_string(),
            ckks: r.cost.tally.ckks,
            converted_cts: r.cost.tally.converted_cts as u64,
            converted_bytes: r.cost.tally.converted_bytes,
            mpc_bytes: r.cost.tally.mpc_bytes,
            mpc_rounds: r.cost.tally.mpc_rounds,
            wall_s: r.wall_s,
        })
        .collect();
    t.send(vec![frame(TAG_REPORT, encode_report(&report))])?;
    Ok(ServerStats {
        m,
        valid,
        params: ck.params().name().to_string(),
        blocks,
        key_exchange,
        setup_s,
        run_s,
        total_s: t0.elapsed().as_secs_f64(),
        mpc: p.channel().stats(),
    })
}

/// Settings of [`serve`].
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// Every session's transport (receive timeout, frame limit).
    pub transport: TransportConfig,
    /// Settings both parties agree on.
    pub session: SessionOptions,
    /// Sessions served at once; a client beyond is refused with [`RefuseCode::Busy`].
    pub max_clients: usize,
    /// Stop after this many connections (all finished before [`serve`] returns); `None` serves
    /// forever.
    pub max_connections: Option<u64>,
    /// Print no per-session line on standard error.
    pub quiet: bool,
    /// The memory the sessions may hold together, bytes ([`ServerOptions::memory_budget`]).
    pub memory_budget: Option<u64>,
    /// What one session counts against it; `None`: [`BERT_SESSION_MEMORY`].
    pub session_memory: Option<u64>,
}

/// The memory a BERT session is counted for against a budget by default, bytes: the demo's
/// measured peak (all-MiniLM-L6-v2, m = 16, client and server in one process: 3.3 GB), so a
/// server-only session stays below it; a larger model or length needs `session_memory`.
pub const BERT_SESSION_MEMORY: u64 = 3_300_000_000;

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            transport: TransportConfig::default(),
            session: SessionOptions::default(),
            max_clients: 4,
            max_connections: None,
            quiet: false,
            memory_budget: None,
            session_memory: None,
        }
    }
}

impl ServeOptions {
    /// The framework's part of these settings.
    pub fn server(&self) -> ServerOptions {
        ServerOptions {
            transport: self.transport,
            max_clients: self.max_clients,
            max_connections: self.max_connections,
            quiet: self.quiet,
            memory_budget: self.memory_budget,
            session_memory: self.session_memory,
        }
    }
}

/// The BERT family's [`Handler`] on the server framework: [`serve_one`] per client.
pub struct BertHandler<B: PolyBackend> {
    /// The served model.
    pub weights: Arc<EncoderWeights>,
    /// The CKKS contexts, shared by every session.
    pub ckks: Arc<CkksCache<B>>,
    /// The session settings.
    pub session: SessionOptions,
}

impl<B: PolyBackend> Handler for BertHandler<B> {
    fn name(&self) -> &str {
        "veil serve"
    }

    fn serve(&self, t: &mut dyn Transport) -> SessionEnd {
        super::session_end(
            serve_one(t, &self.weights, &self.ckks, &self.session),
            |st| {
                format!(
                    "m = {}, {} tokens, {:.1} MB MPC, {:.1} MB keys",
                    st.m,
                    st.valid,
                    st.mpc_bytes() as f64 / 1e6,
                    (st.key_exchange.public_key_bytes + st.key_exchange.evaluation_key_bytes)
                        as f64
                        / 1e6
                )
            },
        )
    }

    fn refuse_busy(&self, t: &mut dyn Transport, reason: &str) {
        let _ = reject::<()>(t, Refusal::new(RefuseCode::Busy, reason));
    }

    fn session_memory(&self) -> u64 {
        BERT_SESSION_MEMORY
    }
}

/// Accepts clients on `listener` and serves `weights` to each on its own thread, on the server
/// framework ([`crate::serve::serve`]): at most [`ServeOptions::max_clients`] at once (one more
/// is told [`RefuseCode::Busy`]), a refused request counted as refused, a failed or panicking
/// session ending only itself. Returns only after [`ServeOptions::max_connections`]
/// connections, once their sessions have finished.
pub fn serve<B: PolyBackend>(
    listener: TcpListener,
    weights: Arc<EncoderWeights>,
    ckks: Arc<CkksCache<B>>,
    opts: ServeOptions,
) -> ServeSummary {
    let handler = BertHandler {
        weights,
        ckks,
        session: opts.session,
    };
    crate::serve::serve(listener, Arc::new(handler), opts.server())
}
