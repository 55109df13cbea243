//! TCP transport. Writes go through a writer thread so that two parties
//! sending large batches at the same time cannot deadlock on full socket
//! buffers; reads use socket read timeouts bounded by the frame deadline.

use super::{
    encode_frames, read_frame, send_bytes, ByteSource, FrameDecoder, Transport, TransportConfig,
    TransportError,
};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use veil_core::mpc::Frame;

/// How long a client keeps trying to connect to a server before it gives up, by default (the
/// `--connect-timeout` of `veil infer` and `veil infer-image --server`): much shorter than a
/// session's receive timeout, so an address where nothing listens fails fast.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The first pause between two connection attempts; it doubles up to [`MAX_RETRY_PAUSE`].
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two connection attempts.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Why [`connect_with_retry`] gave up: the address, how long and how often it tried, and the
/// operating system's reason for the last failure.
#[derive(Debug)]
pub struct ConnectError {
    /// The address as given.
    pub addr: String,
    /// Connection attempts made.
    pub attempts: u32,
    /// Time spent trying.
    pub waited: Duration,
    /// The last attempt's error, as the OS reported it (`ConnectionRefused`, `TimedOut`, a
    /// failed name lookup, ...).
    pub source: std::io::Error,
}

impl ConnectError {
    /// The message without the OS's reason: "no connection to ADDR after T s (K attempts)".
    pub fn context(&self) -> String {
        format!(
            "no connection to {} after {:.1} s ({} attempt{})",
            self.addr,
            self.waited.as_secs_f64(),
            self.attempts,
            if self.attempts == 1 { "" } else { "s" }
        )
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.context(), self.source)
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// One attempt: resolves `addr` and tries each of its addresses, each within `wait`.
fn connect_once<A: ToSocketAddrs + std::fmt::Display>(
    addr: &A,
    wait: Duration,
) -> std::io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    let mut last = std::io::Error::new(
        ErrorKind::InvalidInput,
        format!("{addr} resolves to no address"),
    );
    for a in addrs {
        match TcpStream::connect_timeout(&a, wait) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connects to `addr` (`host:port`), retrying for up to `limit` while the server is not there
/// yet. Each attempt waits at most the time left (so an address that drops packets cannot hold
/// it past the limit); between attempts it pauses 50 ms, doubling up to 500 ms. After the first
/// failed attempt, when time is left to retry, `on_retry` gets that attempt's error (a client
/// tells its user it is retrying). An address that does not parse fails at once. The error
/// carries the address and the OS's reason for the last failure ("Connection refused").
pub fn connect_with_retry<A: ToSocketAddrs + std::fmt::Display>(
    addr: A,
    limit: Duration,
    on_retry: &mut dyn FnMut(&std::io::Error),
) -> Result<TcpStream, ConnectError> {
    let start = Instant::now();
    let deadline = super::deadline_after(limit);
    let mut pause = FIRST_RETRY_PAUSE;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let e = match connect_once(&addr, left.max(Duration::from_millis(100))) {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || e.kind() == ErrorKind::InvalidInput {
            return Err(ConnectError {
                addr: addr.to_string(),
                attempts,
                waited: start.elapsed(),
                source: e,
            });
        }
        if attempts == 1 {
            on_retry(&e);
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(MAX_RETRY_PAUSE);
    }
}

struct TcpSource {
    s: TcpStream,
}

impl ByteSource for TcpSource {
    fn fill(&mut self, buf: &mut Vec<u8>, deadline: Instant) -> Result<(), TransportError> {
        let mut tmp = [0u8; 1 << 16];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TransportError::Timeout);
            }
            self.s
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .map_err(|e| TransportError::Io(e.to_string()))?;
            match self.s.read(&mut tmp) {
                Ok(0) => return Err(TransportError::Disconnected),
                Ok(k) => {
                    buf.extend_from_slice(&tmp[..k]);
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                    return Err(TransportError::Timeout)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset
                            | ErrorKind::ConnectionAborted
                            | ErrorKind::BrokenPipe
                    ) =>
                {
                    return Err(TransportError::Disconnected)
                }
                Err(e) => return Err(TransportError::Io(e.to_string())),
            }
        }
    }
}

/// One end of a TCP connection.
pub struct TcpTransport {
    src: TcpSource,
    rb: FrameDecoder,
    tx: Option<Sender<Vec<u8>>>,
    writer: Option<JoinHandle<()>>,
    werr: Arc<Mutex<Option<TransportError>>>,
    cfg: TransportConfig,
}

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TcpTransport {{ peer: {:?} }}",
            self.src.s.peer_addr().ok()
        )
    }
}

impl TcpTransport {
    /// Wraps a connected stream.
    pub fn new(s: TcpStream, cfg: TransportConfig) -> Result<Self, TransportError> {
        let io = |e: std::io::Error| TransportError::Io(e.to_string());
        s.set_nodelay(true).map_err(io)?;
        s.set_write_timeout(Some(cfg.timeout)).map_err(io)?;
        let mut w = s.try_clone().map_err(io)?;
        let (tx, rx) = channel::<Vec<u8>>();
        let werr = Arc::new(Mutex::new(None));
        let werr2 = werr.clone();
        let writer = std::thread::spawn(move || {
            for buf in rx {
                if let Err(e) = w.write_all(&buf).and_then(|_| w.flush()) {
                    let te = match e.kind() {
                        ErrorKind::WouldBlock | ErrorKind::TimedOut => TransportError::Timeout,
                        ErrorKind::BrokenPipe
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted => TransportError::Disconnected,
                        _ => TransportError::Io(e.to_string()),
                    };
                    if let Ok(mut g) = werr2.lock() {
                        *g = Some(te);
                    }
                    let _ = w.shutdown(Shutdown::Both);
                    return;
                }
            }
        });
        Ok(TcpTransport {
            src: TcpSource { s },
            rb: FrameDecoder::new(),
            tx: Some(tx),
            writer: Some(writer),
            werr,
            cfg,
        })
    }

    /// Connects to `addr` with [`connect_with_retry`], retrying silently for up to `cfg.timeout`
    /// (a party whose peer is starting beside it); a client facing a user wants
    /// [`TcpTransport::connect_within`] and its shorter limit.
    pub fn connect<A: ToSocketAddrs + std::fmt::Display>(
        addr: A,
        cfg: TransportConfig,
    ) -> Result<Self, TransportError> {
        let s = connect_with_retry(addr, cfg.timeout, &mut |_| {})
            .map_err(|e| TransportError::Io(e.to_string()))?;
        Self::new(s, cfg)
    }

    /// Connects to `addr` with [`connect_with_retry`] (up to `limit`, `on_retry` told of the
    /// first failure), then wraps the stream with `cfg`, whose timeout bounds every receive.
    pub fn connect_within<A: ToSocketAddrs + std::fmt::Display>(
        addr: A,
        limit: Duration,
        cfg: TransportConfig,
        on_retry: &mut dyn FnMut(&std::io::Error),
    ) -> Result<Self, ConnectError> {
        let name = addr.to_string();
        let s = connect_with_retry(addr, limit, on_retry)?;
        Self::new(s, cfg).map_err(|e| ConnectError {
            addr: name,
            attempts: 1,
            waited: Duration::ZERO,
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// Accepts one connection on `listener` (blocking).
    pub fn accept(listener: &TcpListener, cfg: TransportConfig) -> Result<Self, TransportError> {
        let (s, _) = listener
            .accept()
            .map_err(|e| TransportError::Io(e.to_string()))?;
        Self::new(s, cfg)
    }

    /// Sends raw bytes (fault injection in tests).
    pub fn send_raw(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        send_bytes(self.tx.as_ref(), bytes)
    }

    /// Closes the connection in both directions now.
    pub fn close(&mut self) {
        self.tx = None;
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
        let _ = self.src.s.shutdown(Shutdown::Both);
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        self.close();
    }
}

impl Transport for TcpTransport {
    fn send(&mut self, frames: Vec<Frame>) -> Result<(), TransportError> {
        if let Some(e) = self.werr.lock().ok().and_then(|g| g.clone()) {
            return Err(e);
        }
        send_bytes(self.tx.as_ref(), encode_frames(&frames))
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        read_frame(&mut self.src, &mut self.rb, &self.cfg)
    }
    fn recv_limited(&mut self, limits: TransportConfig) -> Result<Frame, TransportError> {
        read_frame(&mut self.src, &mut self.rb, &self.cfg.tighter(limits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port on 127.0.0.1 where nothing listens (bound, then released).
    fn closed_port() -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap().to_string();
        drop(l);
        a
    }

    /// Nothing listening: with a 1 s limit it fails within about 2 s (not the session's receive
    /// timeout), says it is retrying once, and ends with the OS's reason and the address.
    #[test]
    fn closed_port_fails_fast_with_the_reason_and_address() {
        let addr = closed_port();
        let mut notices = Vec::new();
        let t0 = Instant::now();
        let e = connect_with_retry(&addr, Duration::from_secs(1), &mut |e| {
            notices.push(e.kind())
        })
        .unwrap_err();
        let took = t0.elapsed();
        eprintln!("{e} ({took:?})");
        assert!(took < Duration::from_secs(2), "took {took:?}");
        assert!(
            took >= Duration::from_millis(900),
            "gave up early: {took:?}"
        );
        assert_eq!(notices, vec![ErrorKind::ConnectionRefused]);
        assert_eq!(e.source.kind(), ErrorKind::ConnectionRefused);
        assert!(e.attempts > 1, "{e}");
        let text = e.to_string();
        assert!(
            text.contains("refused") || text.contains("Refused"),
            "{text}"
        );
        assert!(text.contains(&addr), "{text}");
        assert!(text
            .to_lowercase()
            .ends_with(&format!("{}", e.source).to_lowercase()));

        // The transport's own entry point: the same error, and quickly.
        let t0 = Instant::now();
        let e = TcpTransport::connect_within(
            &addr,
            Duration::from_secs(1),
            TransportConfig::default(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(e.to_string().contains(&addr), "{e}");
    }

    /// A server that starts listening while the client retries is reached.
    #[test]
    fn a_late_server_is_reached() {
        let addr = closed_port();
        let a2 = addr.clone();
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let l = TcpListener::bind(&a2).unwrap();
            l.accept().map(|_| ())
        });
        let mut retried = false;
        let s = connect_with_retry(&addr, Duration::from_secs(10), &mut |_| retried = true);
        assert!(s.is_ok(), "{s:?}");
        assert!(retried);
        server.join().unwrap().unwrap();
    }

    /// An address that does not parse fails at once, with a typed error.
    #[test]
    fn a_malformed_address_fails_at_once() {
        let t0 = Instant::now();
        for bad in ["127.0.0.1", "127.0.0.1:notaport", ""] {
            let e = connect_with_retry(bad, Duration::from_secs(5), &mut |_| {}).unwrap_err();
            assert_eq!(e.source.kind(), ErrorKind::InvalidInput, "{bad}: {e}");
            assert_eq!(e.attempts, 1);
        }
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
}
