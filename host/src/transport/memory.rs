//! In-memory duplex transport over `std::sync::mpsc` byte chunks (tests and
//! benchmarks). Bytes are framed exactly as on TCP, so malformed input can be
//! injected with [`MemTransport::send_raw`].

use super::{
    encode_frames, read_frame, send_bytes, ByteSource, FrameDecoder, Transport, TransportConfig,
    TransportError,
};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Instant;
use veil_core::mpc::Frame;

struct MemSource {
    rx: Receiver<Vec<u8>>,
}

impl ByteSource for MemSource {
    fn fill(&mut self, buf: &mut Vec<u8>, deadline: Instant) -> Result<(), TransportError> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(chunk) => {
                if buf.is_empty() {
                    *buf = chunk;
                } else {
                    buf.extend_from_slice(&chunk);
                }
                Ok(())
            }
            Err(RecvTimeoutError::Timeout) => Err(TransportError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(TransportError::Disconnected),
        }
    }
}

/// One end of an in-memory duplex.
pub struct MemTransport {
    tx: Option<Sender<Vec<u8>>>,
    src: MemSource,
    rb: FrameDecoder,
    cfg: TransportConfig,
}

impl std::fmt::Debug for MemTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MemTransport {{ cfg: {:?} }}", self.cfg)
    }
}

/// A connected pair of in-memory transports.
pub fn mem_pair(cfg: TransportConfig) -> (MemTransport, MemTransport) {
    let (ta, rb) = channel();
    let (tb, ra) = channel();
    (
        MemTransport {
            tx: Some(ta),
            src: MemSource { rx: ra },
            rb: FrameDecoder::new(),
            cfg,
        },
        MemTransport {
            tx: Some(tb),
            src: MemSource { rx: rb },
            rb: FrameDecoder::new(),
            cfg,
        },
    )
}

impl MemTransport {
    /// Sends raw bytes (fault injection in tests).
    pub fn send_raw(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        send_bytes(self.tx.as_ref(), bytes)
    }

    /// Closes the sending direction (the peer sees `Disconnected`).
    pub fn close(&mut self) {
        self.tx = None;
    }
}

impl Transport for MemTransport {
    fn send(&mut self, frames: Vec<Frame>) -> Result<(), TransportError> {
        self.send_raw(encode_frames(&frames))
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        read_frame(&mut self.src, &mut self.rb, &self.cfg)
    }
    fn recv_limited(&mut self, limits: TransportConfig) -> Result<Frame, TransportError> {
        read_frame(&mut self.src, &mut self.rb, &self.cfg.tighter(limits))
    }
}
