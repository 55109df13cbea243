//! TCP transport. Writes go through a writer thread so that two parties
//! sending large batches at the same time cannot deadlock on full socket
//! buffers; reads use socket read timeouts bounded by the frame deadline.

use super::{
    encode_frames, read_frame, send_bytes, ByteSource, FrameDecoder, Transport, TransportConfig,
    TransportError,
};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use veil_core::mpc::Frame;

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

    /// Connects to `addr`, retrying until the timeout.
    pub fn connect<A: ToSocketAddrs + Clone>(
        addr: A,
        cfg: TransportConfig,
    ) -> Result<Self, TransportError> {
        let deadline = super::deadline_after(cfg.timeout);
        loop {
            match TcpStream::connect(addr.clone()) {
                Ok(s) => return Self::new(s, cfg),
                Err(e) => {
                    if Instant::now() >= deadline {
                        return Err(TransportError::Io(e.to_string()));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
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
