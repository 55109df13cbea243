//! The one server framework behind `veil serve` (BERT: [`crate::bert::serve`]) and
//! `veil serve --cnn` ([`crate::cnn::serve::serve_cnn`]): the accept loop, a bounded number of
//! sessions at once (one more client is told it is busy, off the accept loop, on a bounded
//! number of threads), a memory budget, a thread per session that a failure or a panic ends
//! alone, the per-session log line and the counts; the handshake's first step
//! ([`read_hello`]: the frame under the hello limits, its tag, its version, its decoding) and
//! the CKKS contexts per parameter set ([`ContextCache`]). A model family contributes a
//! [`Handler`] (its hello's checks, its keys, its run) and a [`HelloMessage`].

use crate::transport::{TcpTransport, Transport, TransportConfig, TransportError, HELLO_LIMITS};
use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use veil_core::ckks::Ckks;
use veil_core::{CkksParams, PolyBackend};

/// How a server builds the backend of a parameter set (the CLI's `--backend` choice).
pub type BackendFactory<B> = dyn Fn(&CkksParams) -> Result<B, String> + Send + Sync;

/// The CKKS contexts of a server, one per parameter set, built on first use by a backend factory
/// and shared by every later session at that set, whatever the model family (the NTT tables and
/// the backend's plans are read-only).
pub struct ContextCache<B: PolyBackend> {
    factory: Box<BackendFactory<B>>,
    made: Mutex<HashMap<u64, Arc<Ckks<B>>>>,
}

impl<B: PolyBackend> std::fmt::Debug for ContextCache<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.made.lock().map(|g| g.len()).unwrap_or(0);
        write!(f, "ContextCache {{ contexts: {n} }}")
    }
}

impl<B: PolyBackend> ContextCache<B> {
    /// An empty cache whose backends `factory` builds.
    pub fn new(factory: impl Fn(&CkksParams) -> Result<B, String> + Send + Sync + 'static) -> Self {
        ContextCache {
            factory: Box::new(factory),
            made: Mutex::new(HashMap::new()),
        }
    }

    /// The context of `params` (validated), built on first use; the factory's error otherwise.
    pub fn get(&self, params: &CkksParams) -> Result<Arc<Ckks<B>>, String> {
        let mut g = self
            .made
            .lock()
            .map_err(|_| "a session panicked building a backend".to_string())?;
        if let Some(ck) = g.get(&params.id()) {
            return Ok(ck.clone());
        }
        let ck = Arc::new(Ckks::new(Arc::new((self.factory)(params)?)));
        g.insert(params.id(), ck.clone());
        Ok(ck)
    }
}

/// A model family's hello: the first frame of a session, which the server checks before
/// anything else (its version first, so that a client of another version is told so).
pub trait HelloMessage: Sized {
    /// The frame tag.
    const TAG: u16;
    /// The protocol version this build speaks.
    const VERSION: u16;
    /// What refusals call it (`hello`, `CNN hello`).
    const NAME: &'static str;
    /// Why a payload did not decode.
    type Error: std::fmt::Display;
    /// The version field alone, if the payload is long enough to have one.
    fn peek_version(payload: &[u8]) -> Option<u16>;
    /// Decodes the payload (total over hostile bytes).
    fn decode(payload: &[u8]) -> Result<Self, Self::Error>;
}

/// Why a server could not take a client's hello.
#[derive(Clone, Debug, PartialEq)]
pub enum HelloProblem {
    /// The transport failed (a malformed or oversized frame, a timeout, a disconnect).
    Transport(TransportError),
    /// Another frame than the family's hello, or a hello that did not decode; the text says
    /// which, for the refusal.
    Malformed(String),
    /// A hello of another protocol version; the text, for the refusal.
    Version(String),
}

/// The server's first step, the same for every family: the client's first frame under
/// [`HELLO_LIMITS`] (until the hello is accepted the peer is unknown: a small frame, soon), its
/// tag, its version, and its payload decoded. The family refuses with its own codes.
pub fn read_hello<H: HelloMessage>(t: &mut dyn Transport) -> Result<H, HelloProblem> {
    let f = t
        .recv_limited(HELLO_LIMITS)
        .map_err(HelloProblem::Transport)?;
    if f.tag != H::TAG {
        return Err(HelloProblem::Malformed(format!(
            "expected a {} (tag {:#06x}), got tag {:#06x}",
            H::NAME,
            H::TAG,
            f.tag
        )));
    }
    if let Some(v) = H::peek_version(&f.payload) {
        if v != H::VERSION {
            return Err(HelloProblem::Version(format!(
                "this server speaks version {}, the client {v}",
                H::VERSION
            )));
        }
    }
    H::decode(&f.payload).map_err(|e| HelloProblem::Malformed(format!("hello: {e}")))
}

/// Threads answering busy clients at most at once (beyond, such a connection is closed at once).
pub const MAX_BUSY_THREADS: usize = 16;

/// How one session ended, as its [`Handler`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEnd {
    /// Served; the text is the log line's detail (`m = 16, 9 tokens, …`).
    Served(String),
    /// The handler refused the client's request with a typed reason, and told it so.
    Refused(String),
    /// The session failed (a transport error, a peer that stalled, a protocol error).
    Failed(String),
}

/// A model family's side of the server: what runs on a connection once the framework has
/// accepted it and given it a slot.
pub trait Handler: Send + Sync + 'static {
    /// The name in log lines (`veil serve`, `veil serve --cnn`).
    fn name(&self) -> &str;
    /// Serves one client over `t`: the handshake (a refusal is [`SessionEnd::Refused`]), the
    /// keys, the run, the report.
    fn serve(&self, t: &mut dyn Transport) -> SessionEnd;
    /// Tells a client the server has no room for it (beyond [`ServerOptions::max_clients`], or
    /// beyond [`ServerOptions::memory_budget`]), with `reason`, in the family's busy refusal.
    /// The framework has read the client's first frame already, so that closing does not reset
    /// the connection under the refusal.
    fn refuse_busy(&self, t: &mut dyn Transport, reason: &str);
    /// The memory one session may take, bytes, for [`ServerOptions::memory_budget`]: an
    /// estimate of the keys and the working set of the family's largest request.
    fn session_memory(&self) -> u64;
}

/// Settings of [`serve`].
#[derive(Clone, Copy, Debug)]
pub struct ServerOptions {
    /// Every session's transport (the receive timeout bounds a stalled client).
    pub transport: TransportConfig,
    /// Sessions served at once; one more client is refused as busy.
    pub max_clients: usize,
    /// Stop after this many connections (all finished before [`serve`] returns); `None`
    /// serves forever.
    pub max_connections: Option<u64>,
    /// Print no per-session line on standard error.
    pub quiet: bool,
    /// The memory the sessions may hold together, bytes: a client is admitted only while the
    /// sessions running plus its own [`Handler::session_memory`] fit, and is otherwise refused
    /// as busy with the figures. `None`: no budget (only `max_clients` bounds the sessions).
    pub memory_budget: Option<u64>,
    /// What one session counts against the budget, bytes; `None`: the handler's estimate
    /// ([`Handler::session_memory`]).
    pub session_memory: Option<u64>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            transport: TransportConfig::default(),
            max_clients: 4,
            max_connections: None,
            quiet: false,
            memory_budget: None,
            session_memory: None,
        }
    }
}

/// A reservation of `bytes` of a memory budget, given back when dropped.
struct Reservation {
    used: Arc<Mutex<u64>>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(mut u) = self.used.lock() {
            *u = u.saturating_sub(self.bytes);
        }
    }
}

/// Reserves `bytes` of `total` (`used` held so far), or the bytes free when they do not fit.
fn reserve(used: &Arc<Mutex<u64>>, total: u64, bytes: u64) -> Result<Reservation, u64> {
    let mut u = used.lock().map_err(|_| 0u64)?;
    let free = total.saturating_sub(*u);
    if bytes > free {
        return Err(free);
    }
    *u += bytes;
    Ok(Reservation {
        used: used.clone(),
        bytes,
    })
}

fn gb(b: u64) -> f64 {
    b as f64 / 1e9
}

/// Counts of a finished [`serve`] (one with [`ServerOptions::max_connections`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeSummary {
    /// Connections accepted.
    pub connections: u64,
    /// Sessions that finished.
    pub served: u64,
    /// Clients refused with a typed reason ([`Self::busy`] included).
    pub refused: u64,
    /// Of the refused, those refused because the server was full.
    pub busy: u64,
    /// Sessions that failed (after an acceptance, or before a request could be read), or
    /// panicked.
    pub failed: u64,
}

/// A place among a bounded number; gives it back when dropped (also when its thread panics).
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A place among `max`, or `None` when all are taken.
pub(crate) fn take_slot(c: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
    c.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
        (n < max).then_some(n + 1)
    })
    .ok()
    .map(|_| Slot(c.clone()))
}

/// Accepts clients on `listener` and serves each with `handler` on its own thread, at most
/// [`ServerOptions::max_clients`] at once and within [`ServerOptions::memory_budget`] (one more
/// is told it is busy, with the reason). One line per session
/// goes to standard error unless quiet. A failed, refused or panicking session ends only
/// itself; an accept error is logged and the loop goes on. Returns only after
/// [`ServerOptions::max_connections`] connections, once their sessions have finished.
pub fn serve<H: Handler>(
    listener: TcpListener,
    handler: Arc<H>,
    opts: ServerOptions,
) -> ServeSummary {
    let active = Arc::new(AtomicUsize::new(0));
    let busy_threads = Arc::new(AtomicUsize::new(0));
    let summary = Arc::new(Mutex::new(ServeSummary::default()));
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let name = handler.name().to_string();
    let log = {
        let name = name.clone();
        move |line: String| {
            if !opts.quiet {
                eprintln!("{name}: {line}");
            }
        }
    };
    let bump = |f: &dyn Fn(&mut ServeSummary)| {
        if let Ok(mut s) = summary.lock() {
            f(&mut s)
        }
    };
    let max_clients = opts.max_clients.max(1);
    let used = Arc::new(Mutex::new(0u64));
    let mut id = 0u64;
    while opts.max_connections.is_none_or(|n| id < n) {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) => {
                log(format!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        id += 1;
        bump(&|s| s.connections += 1);
        workers.retain(|h| !h.is_finished());
        let mut t = match TcpTransport::new(stream, opts.transport) {
            Ok(t) => t,
            Err(e) => {
                log(format!("#{id} {peer}: transport: {e}"));
                bump(&|s| s.failed += 1);
                continue;
            }
        };
        // Room for the session: a slot, and its memory within the budget (a slot taken for a
        // session refused for memory is given back as the arm ends).
        let admitted = match take_slot(&active, max_clients) {
            None => Err(format!("{max_clients} sessions running")),
            Some(slot) => match opts.memory_budget {
                None => Ok((slot, None)),
                Some(total) => {
                    let need = opts
                        .session_memory
                        .unwrap_or_else(|| handler.session_memory());
                    match reserve(&used, total, need) {
                        Ok(r) => Ok((slot, Some(r))),
                        Err(free) => Err(format!(
                            "the server's memory budget: a session needs {:.2} GB, {:.2} GB of {:.2} GB are free",
                            gb(need),
                            gb(free),
                            gb(total)
                        )),
                    }
                }
            },
        };
        let (slot, reservation) = match admitted {
            Ok(room) => room,
            Err(reason) => {
                bump(&|s| {
                    s.refused += 1;
                    s.busy += 1;
                });
                log(format!("#{id} {peer}: refused, busy: {reason}"));
                // Read the request first (so that closing does not reset the connection under
                // the refusal), off the accept loop, on a bounded number of threads.
                if let Some(b) = take_slot(&busy_threads, MAX_BUSY_THREADS) {
                    let handler = handler.clone();
                    let spawned = std::thread::Builder::new()
                        .name(format!("veil-busy-{id}"))
                        .spawn(move || {
                            let _b = b;
                            let _ = t.recv_limited(crate::transport::HELLO_LIMITS);
                            handler.refuse_busy(&mut t, &reason);
                        });
                    if let Ok(h) = spawned {
                        workers.push(h);
                    }
                }
                continue;
            }
        };
        let (handler, summary, session_log) = (handler.clone(), summary.clone(), log.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("veil-session-{id}"))
            .spawn(move || {
                let _slot = slot;
                let _reservation = reservation;
                let t0 = Instant::now();
                let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    handler.serve(&mut t)
                }));
                let secs = t0.elapsed().as_secs_f64();
                let end = res.unwrap_or_else(|_| SessionEnd::Failed("the session panicked".into()));
                match &end {
                    SessionEnd::Served(d) => {
                        session_log(format!("#{id} {peer}: ok, {d}, {secs:.2} s"))
                    }
                    SessionEnd::Refused(r) => session_log(format!("#{id} {peer}: refused: {r}")),
                    SessionEnd::Failed(e) => {
                        session_log(format!("#{id} {peer}: failed after {secs:.2} s: {e}"))
                    }
                }
                if let Ok(mut s) = summary.lock() {
                    match end {
                        SessionEnd::Served(_) => s.served += 1,
                        SessionEnd::Refused(_) => s.refused += 1,
                        SessionEnd::Failed(_) => s.failed += 1,
                    }
                }
            });
        match spawned {
            Ok(h) => workers.push(h),
            Err(e) => {
                log(format!("#{id} {peer}: no thread: {e}"));
                bump(&|s| s.failed += 1);
            }
        }
    }
    for h in workers {
        let _ = h.join();
    }
    let s = summary.lock().map(|g| *g).unwrap_or_default();
    s
}
