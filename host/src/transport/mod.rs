//! Framed, versioned transports between the two parties.
//!
//! Wire format of one frame (little-endian):
//! `magic 0x56 ‖ version 1 ‖ tag u16 ‖ depth u32 ‖ len u32 ‖ payload[len]`.
//! All frames of one round are written in one batch. Every receive has a
//! deadline; a closed connection, a stall, a bad header or an oversized frame
//! gives a typed [`TransportError`]. A party that fails sends a best-effort
//! abort frame (tag [`ABORT_TAG`]) so that its peer fails fast too.

mod memory;
mod tcp;

pub use memory::{mem_pair, MemTransport};
pub use tcp::TcpTransport;

use std::time::{Duration, Instant};
use veil_core::mpc::Frame;

/// Frame magic byte.
pub const MAGIC: u8 = 0x56;
/// Wire format version.
pub const WIRE_VERSION: u8 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 12;
/// Reserved tag of abort frames (payload: UTF-8 reason).
pub const ABORT_TAG: u16 = 0xFFFF;

/// Transport settings.
#[derive(Clone, Copy, Debug)]
pub struct TransportConfig {
    /// Deadline of every receive.
    pub timeout: Duration,
    /// Largest accepted payload.
    pub max_frame: usize,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            timeout: Duration::from_secs(60),
            max_frame: 1 << 30,
        }
    }
}

/// Transport errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// No (complete) frame arrived before the deadline.
    Timeout,
    /// The peer closed the connection.
    Disconnected,
    /// Bad magic, version or truncated header.
    Malformed(&'static str),
    /// Declared payload larger than the limit.
    TooLarge {
        /// Declared length.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// The peer aborted with a reason.
    PeerAborted(String),
    /// Other I/O error.
    Io(String),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::Timeout => write!(f, "receive timed out"),
            TransportError::Disconnected => write!(f, "peer disconnected"),
            TransportError::Malformed(s) => write!(f, "malformed frame: {s}"),
            TransportError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds limit {max}")
            }
            TransportError::PeerAborted(s) => write!(f, "peer aborted: {s}"),
            TransportError::Io(s) => write!(f, "I/O error: {s}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// A bidirectional frame transport.
pub trait Transport: Send {
    /// Sends one round's frames as one batch.
    fn send(&mut self, frames: Vec<Frame>) -> Result<(), TransportError>;
    /// Receives the next frame (within the configured timeout).
    fn recv(&mut self) -> Result<Frame, TransportError>;
    /// Best-effort abort notice to the peer.
    fn abort(&mut self, reason: &str) {
        let _ = self.send(vec![Frame {
            tag: ABORT_TAG,
            depth: 0,
            payload: reason.as_bytes().to_vec(),
        }]);
    }
}

/// Encodes frames into one buffer.
pub fn encode_frames(frames: &[Frame]) -> Vec<u8> {
    let total: usize = frames.iter().map(|f| HEADER_LEN + f.payload.len()).sum();
    let mut out = Vec::with_capacity(total);
    for f in frames {
        out.push(MAGIC);
        out.push(WIRE_VERSION);
        out.extend_from_slice(&f.tag.to_le_bytes());
        out.extend_from_slice(&f.depth.to_le_bytes());
        out.extend_from_slice(&(f.payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&f.payload);
    }
    out
}

/// A source of bytes with deadline-bounded reads.
pub(crate) trait ByteSource {
    /// Appends at least one newly arrived byte to `buf`, or fails at the
    /// deadline. Bytes already received are never lost, so a timeout in the
    /// middle of a frame leaves the stream aligned for the next call.
    fn fill(&mut self, buf: &mut Vec<u8>, deadline: Instant) -> Result<(), TransportError>;
}

/// Receive buffer with a read offset.
#[derive(Default)]
pub(crate) struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
}

/// Reads and validates one frame.
pub(crate) fn read_frame<S: ByteSource>(
    src: &mut S,
    rb: &mut RecvBuf,
    cfg: &TransportConfig,
) -> Result<Frame, TransportError> {
    let deadline = Instant::now() + cfg.timeout;
    loop {
        let avail = &rb.buf[rb.start..];
        if avail.len() >= HEADER_LEN {
            let h = &avail[..HEADER_LEN];
            if h[0] != MAGIC {
                return Err(TransportError::Malformed("bad magic"));
            }
            if h[1] != WIRE_VERSION {
                return Err(TransportError::Malformed("unsupported version"));
            }
            let tag = u16::from_le_bytes([h[2], h[3]]);
            let depth = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
            if len > cfg.max_frame {
                return Err(TransportError::TooLarge {
                    len,
                    max: cfg.max_frame,
                });
            }
            if avail.len() >= HEADER_LEN + len {
                let payload = avail[HEADER_LEN..HEADER_LEN + len].to_vec();
                rb.start += HEADER_LEN + len;
                if rb.start == rb.buf.len() {
                    rb.buf.clear();
                    rb.start = 0;
                } else if rb.start > (1 << 20) && rb.start * 2 > rb.buf.len() {
                    rb.buf.drain(..rb.start);
                    rb.start = 0;
                }
                if tag == ABORT_TAG {
                    return Err(TransportError::PeerAborted(
                        String::from_utf8_lossy(&payload).into_owned(),
                    ));
                }
                return Ok(Frame {
                    tag,
                    depth,
                    payload,
                });
            }
            rb.buf.reserve(HEADER_LEN + len - avail.len());
        }
        src.fill(&mut rb.buf, deadline)?;
    }
}
