//! The two-party harness: the one way the benchmarks and tests connect two parties and run them.
//!
//! Three links, one code path for the parties (each gets a `&mut dyn Transport`):
//!
//! - **in memory** ([`Link::Memory`]): [`mem_pair`], both parties threads of this process;
//! - **TCP loopback** ([`Link::Tcp`]): a listener on `127.0.0.1:0`, both ends in this process;
//! - **two processes**: each process builds its end with [`connect_process`] (P0 listens on the
//!   address, P1 connects to it), and an orchestrator starts them with [`PartyProcesses`], which
//!   collects what each party prints last on stdout and stops every child it started if it leaves
//!   early.
//!
//! [`run_pair`] runs P1 on a scoped thread and P0 on the caller's thread. When P0 returns, its end
//! is dropped before P1 is joined, so a P0 that stops early (an error before any message) shows
//! up at P1 as [`TransportError::Disconnected`] rather than a wait for the receive timeout. A
//! panicking party is reported as [`HarnessError::PartyPanicked`].

use crate::transport::{mem_pair, TcpTransport, Transport, TransportConfig, TransportError};
use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use veil_core::mpc::PartyId;

/// How the two in-process parties are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// The in-memory duplex ([`mem_pair`]).
    Memory,
    /// TCP over 127.0.0.1 (an ephemeral port).
    Tcp,
}

/// Errors of the harness itself (the parties' own errors are their return values).
#[derive(Debug)]
#[non_exhaustive]
pub enum HarnessError {
    /// An operating-system call failed.
    Io {
        /// What was being done (`"bind"`, `"accept"`, `"spawn party 1"`, ...).
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Building a transport over a connected socket failed.
    Transport(TransportError),
    /// No peer connected to `addr` within `waited`.
    NoPeer {
        /// The listening address.
        addr: String,
        /// How long P0 waited.
        waited: Duration,
    },
    /// A party thread panicked (`0` or `1`).
    PartyPanicked {
        /// The party.
        party: u8,
    },
    /// A party process exited with a failure status.
    ProcessFailed {
        /// The party (`0` or `1`).
        party: u8,
        /// Its exit status, as the OS reports it.
        status: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// The party processes did not finish within `waited`.
    ProcessTimeout {
        /// How long the orchestrator waited.
        waited: Duration,
    },
}

impl std::fmt::Display for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HarnessError::Io { what, source } => write!(f, "{what}: {source}"),
            HarnessError::Transport(e) => write!(f, "transport: {e}"),
            HarnessError::NoPeer { addr, waited } => {
                write!(f, "no peer connected to {addr} within {waited:?}")
            }
            HarnessError::PartyPanicked { party } => write!(f, "party {party} panicked"),
            HarnessError::ProcessFailed {
                party,
                status,
                stderr,
            } => write!(f, "party process {party} failed ({status}): {stderr}"),
            HarnessError::ProcessTimeout { waited } => {
                write!(f, "party processes did not finish within {waited:?}")
            }
        }
    }
}

impl std::error::Error for HarnessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HarnessError::Io { source, .. } => Some(source),
            HarnessError::Transport(e) => Some(e),
            _ => None,
        }
    }
}

impl From<TransportError> for HarnessError {
    fn from(e: TransportError) -> Self {
        HarnessError::Transport(e)
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

/// The two ends of a link: (P0's end, P1's end).
pub type TransportPair = (Box<dyn Transport>, Box<dyn Transport>);

/// A connected pair of transports over `link`.
pub fn connect_pair(link: Link, cfg: TransportConfig) -> Result<TransportPair, HarnessError> {
    Ok(match link {
        Link::Memory => {
            let (a, b) = mem_pair(cfg);
            (Box::new(a), Box::new(b))
        }
        Link::Tcp => {
            let l = TcpListener::bind("127.0.0.1:0").map_err(io("bind 127.0.0.1:0"))?;
            let addr = l.local_addr().map_err(io("local address"))?;
            let h = std::thread::spawn(move || TcpTransport::connect(addr, cfg));
            let a = TcpTransport::accept(&l, cfg)?;
            let b = h
                .join()
                .map_err(|_| HarnessError::PartyPanicked { party: 1 })??;
            (Box::new(a), Box::new(b))
        }
    })
}

/// Runs the two parties over a fresh pair of transports on `link`: `p1` on a scoped thread, `p0`
/// on the caller's thread. Returns both results.
pub fn run_pair<A, B>(
    link: Link,
    cfg: TransportConfig,
    p0: impl FnOnce(&mut dyn Transport) -> A,
    p1: impl FnOnce(&mut dyn Transport) -> B + Send,
) -> Result<(A, B), HarnessError>
where
    B: Send,
{
    let (t0, t1) = connect_pair(link, cfg)?;
    run_pair_on(t0, t1, p0, p1)
}

/// [`run_pair`] over transports the caller built (e.g. with fault injection).
pub fn run_pair_on<A, B>(
    mut t0: Box<dyn Transport>,
    mut t1: Box<dyn Transport>,
    p0: impl FnOnce(&mut dyn Transport) -> A,
    p1: impl FnOnce(&mut dyn Transport) -> B + Send,
) -> Result<(A, B), HarnessError>
where
    B: Send,
{
    std::thread::scope(|s| {
        let h = s.spawn(move || p1(t1.as_mut()));
        let a = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p0(t0.as_mut())));
        // P0 is done: closing its end lets a waiting P1 fail fast instead of timing out.
        drop(t0);
        let b = h.join();
        match (a, b) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            (Err(_), _) => Err(HarnessError::PartyPanicked { party: 0 }),
            (_, Err(_)) => Err(HarnessError::PartyPanicked { party: 1 }),
        }
    })
}

/// One party's end in a two-process run: P0 listens on `addr` and accepts one connection within
/// `cfg.timeout`; P1 connects to `addr` (retrying within the timeout).
pub fn connect_process(
    id: PartyId,
    addr: &str,
    cfg: TransportConfig,
) -> Result<TcpTransport, HarnessError> {
    match id {
        PartyId::P0 => accept_within(addr, cfg),
        PartyId::P1 => Ok(TcpTransport::connect(addr, cfg)?),
    }
}

fn accept_within(addr: &str, cfg: TransportConfig) -> Result<TcpTransport, HarnessError> {
    let l = TcpListener::bind(addr).map_err(io(format!("bind {addr}")))?;
    l.set_nonblocking(true).map_err(io("set_nonblocking"))?;
    let start = Instant::now();
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(io("set_nonblocking"))?;
                return Ok(TcpTransport::new(s, cfg)?);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() > cfg.timeout {
                    return Err(HarnessError::NoPeer {
                        addr: addr.into(),
                        waited: cfg.timeout,
                    });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(io(format!("accept on {addr}"))(e)),
        }
    }
}

/// The processes of a two-process run: helpers (e.g. a delay line) and the two parties. Every
/// child still running when this is dropped is killed and reaped.
#[derive(Debug, Default)]
pub struct PartyProcesses {
    helpers: Vec<Child>,
    parties: Vec<Child>,
}

impl PartyProcesses {
    /// No processes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a helper process (stdin and stdout closed, stderr kept for nothing): it runs until
    /// it exits or this value is dropped.
    pub fn spawn_helper(&mut self, cmd: &mut Command) -> Result<(), HarnessError> {
        let c = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io("spawning a helper process"))?;
        self.helpers.push(c);
        Ok(())
    }

    /// Starts party process number `parties().len()` (0, then 1) with stdout and stderr captured.
    pub fn spawn_party(&mut self, cmd: &mut Command) -> Result<(), HarnessError> {
        let i = self.parties.len();
        let c = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io(format!("spawning party {i}")))?;
        self.parties.push(c);
        Ok(())
    }

    /// Waits for every party process to exit (at most `timeout`) and returns the last line each
    /// printed on stdout, in party order. A failed party is [`HarnessError::ProcessFailed`] with
    /// its stderr.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<String>, HarnessError> {
        Ok(self
            .wait_output(timeout)?
            .iter()
            .map(|o| o.lines().last().unwrap_or("").to_string())
            .collect())
    }

    /// As [`PartyProcesses::wait`], but returns everything each party printed on stdout.
    pub fn wait_output(&mut self, timeout: Duration) -> Result<Vec<String>, HarnessError> {
        let deadline = crate::transport::deadline_after(timeout);
        let mut outs: Vec<Option<String>> = vec![None; self.parties.len()];
        loop {
            let mut done = true;
            for (i, c) in self.parties.iter_mut().enumerate() {
                if outs[i].is_some() {
                    continue;
                }
                match c.try_wait().map_err(io(format!("waiting for party {i}")))? {
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
                            return Err(HarnessError::ProcessFailed {
                                party: i as u8,
                                status: st.to_string(),
                                stderr: e.trim().to_string(),
                            });
                        }
                        outs[i] = Some(o);
                    }
                }
            }
            if done {
                return Ok(outs.into_iter().map(Option::unwrap_or_default).collect());
            }
            if Instant::now() > deadline {
                return Err(HarnessError::ProcessTimeout { waited: timeout });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PartyProcesses {
    fn drop(&mut self) {
        for c in self.helpers.iter_mut().chain(self.parties.iter_mut()) {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use veil_core::mpc::Frame;

    fn echo(link: Link) {
        let cfg = TransportConfig {
            timeout: Duration::from_secs(10),
            ..TransportConfig::default()
        };
        let (a, b) = run_pair(
            link,
            cfg,
            |t| {
                t.send(vec![Frame {
                    tag: 7,
                    depth: 1,
                    payload: vec![1, 2, 3],
                }])?;
                t.recv()
            },
            |t| {
                let f = t.recv()?;
                t.send(vec![Frame {
                    tag: f.tag + 1,
                    depth: 2,
                    payload: f.payload.iter().rev().copied().collect(),
                }])?;
                Ok::<_, TransportError>(f.payload.len())
            },
        )
        .unwrap();
        let f = a.unwrap();
        assert_eq!((f.tag, f.payload), (8, vec![3, 2, 1]));
        assert_eq!(b.unwrap(), 3);
    }

    #[test]
    fn run_pair_echoes_over_memory_and_tcp() {
        echo(Link::Memory);
        echo(Link::Tcp);
    }

    /// P0 stops without sending: P1 sees a disconnect at once, not the 60 s timeout.
    #[test]
    fn an_early_p0_exit_disconnects_p1() {
        let cfg = TransportConfig {
            timeout: Duration::from_secs(60),
            ..TransportConfig::default()
        };
        let t = Instant::now();
        let (_, b) = run_pair(Link::Memory, cfg, |_| (), |t| t.recv()).unwrap();
        assert_eq!(b.unwrap_err(), TransportError::Disconnected);
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_panicking_party_is_a_typed_error() {
        let cfg = TransportConfig::default();
        let r = run_pair(Link::Memory, cfg, |_| (), |_| panic!("boom"));
        assert!(matches!(r, Err(HarnessError::PartyPanicked { party: 1 })));
    }
}
