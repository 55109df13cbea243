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
pub use tcp::{connect_with_retry, ConnectError, TcpTransport, DEFAULT_CONNECT_TIMEOUT};

use std::time::{Duration, Instant};
use veil_core::mpc::Frame;

/// A host frame with `tag` and `payload`, outside any MPC sub-protocol (depth 0).
pub fn frame(tag: u16, payload: Vec<u8>) -> Frame {
    Frame {
        tag,
        depth: 0,
        payload,
    }
}

/// Frame magic byte.
pub const MAGIC: u8 = 0x56;
/// Wire format version. Version 2: seeds inside payloads (seeded RLWE uploads and keys of the MPC
/// triples) expand with AES-256 in counter mode ([`veil_core::math::sampling::expand_uniform_row`]);
/// version 1 expanded them with ChaCha20, so a peer of the other version is refused at its first
/// frame instead of computing on other words.
pub const WIRE_VERSION: u8 = 2;
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

/// The limits of a server's first receive on a new connection (the peer's hello, a few dozen
/// bytes, sent as soon as it connects): until the hello is accepted the peer is unknown, so it
/// may neither hold a session slot for the long session timeout nor make the server buffer a
/// frame of [`TransportConfig::max_frame`].
pub const HELLO_LIMITS: TransportConfig = TransportConfig {
    timeout: Duration::from_secs(30),
    max_frame: 64 << 10,
};

impl TransportConfig {
    /// Limits that bound only the frame size, to `max_frame` bytes: combined with
    /// [`TransportConfig::tighter`] (as [`Transport::recv_limited`] does), the configured timeout
    /// stands.
    pub const fn frame_limit(max_frame: usize) -> TransportConfig {
        TransportConfig {
            timeout: Duration::MAX,
            max_frame,
        }
    }

    /// The tighter of each limit of `self` and `other`.
    pub fn tighter(self, other: TransportConfig) -> TransportConfig {
        TransportConfig {
            timeout: self.timeout.min(other.timeout),
            max_frame: self.max_frame.min(other.max_frame),
        }
    }
}

/// Transport errors.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Receives the next frame under `limits` where they are tighter than the configured ones:
    /// a server's first receive from a new peer (under [`HELLO_LIMITS`]), and frames whose size
    /// the session bounds (the client's keys, a plan fingerprint). Limits are only ever combined
    /// with [`TransportConfig::tighter`], so `Duration::MAX` means "the configured timeout". The
    /// transports that read bytes themselves ([`TcpTransport`], [`MemTransport`]) apply them;
    /// the default, for wrappers, is [`Transport::recv`], so a wrapper on a server's path must
    /// forward this method to keep the bounds.
    fn recv_limited(&mut self, limits: TransportConfig) -> Result<Frame, TransportError> {
        let _ = limits;
        self.recv()
    }
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

/// Hands one encoded batch to a sending queue (the writer thread of TCP, the channel of the
/// in-memory pair); a closed queue is a disconnected peer.
pub(crate) fn send_bytes(
    tx: Option<&std::sync::mpsc::Sender<Vec<u8>>>,
    bytes: Vec<u8>,
) -> Result<(), TransportError> {
    tx.ok_or(TransportError::Disconnected)?
        .send(bytes)
        .map_err(|_| TransportError::Disconnected)
}

/// A source of bytes with deadline-bounded reads.
pub(crate) trait ByteSource {
    /// Appends at least one newly arrived byte to `buf`, or fails at the
    /// deadline. Bytes already received are never lost, so a timeout in the
    /// middle of a frame leaves the stream aligned for the next call.
    fn fill(&mut self, buf: &mut Vec<u8>, deadline: Instant) -> Result<(), TransportError>;
}

/// Incremental, sans-IO frame decoder: bytes in, validated frames out.
///
/// Its buffer holds only bytes that have arrived. A header's declared length is checked against
/// the limit and then trusted for nothing else: no memory is reserved for a payload before its
/// bytes come, so a peer that declares 1 GiB and goes silent costs one header, not a gigabyte.
/// The buffer grows by `Vec`'s amortized doubling as bytes arrive (at most twice what is
/// buffered), and is compacted once more than half of it has been consumed.
#[derive(Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
}

impl std::fmt::Debug for FrameDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FrameDecoder {{ buffered: {} }}", self.buffered())
    }
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes received from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Memory the decoder holds for its buffer, in bytes.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The buffer a [`ByteSource`] appends to.
    pub(crate) fn buffer_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// The next complete frame: `Ok(None)` while its bytes have not all arrived; a typed error
    /// for a bad magic or version, a declared length above `max_frame`, or an abort frame
    /// ([`TransportError::PeerAborted`] with the peer's reason).
    pub fn next_frame(&mut self, max_frame: usize) -> Result<Option<Frame>, TransportError> {
        let avail = &self.buf[self.start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
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
        if len > max_frame {
            return Err(TransportError::TooLarge {
                len,
                max: max_frame,
            });
        }
        if avail.len() - HEADER_LEN < len {
            return Ok(None);
        }
        let payload = avail[HEADER_LEN..HEADER_LEN + len].to_vec();
        self.start += HEADER_LEN + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > (1 << 20) && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if tag == ABORT_TAG {
            return Err(TransportError::PeerAborted(
                String::from_utf8_lossy(&payload).into_owned(),
            ));
        }
        Ok(Some(Frame {
            tag,
            depth,
            payload,
        }))
    }
}

/// `now + d`, or a deadline a century away where `d` is beyond what [`Instant`] can hold: a
/// timeout of `u64::MAX` seconds (say from the command line) means "wait", not a panic.
pub fn deadline_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

/// Reads and validates one frame, waiting for bytes until the configured timeout.
pub(crate) fn read_frame<S: ByteSource>(
    src: &mut S,
    dec: &mut FrameDecoder,
    cfg: &TransportConfig,
) -> Result<Frame, TransportError> {
    let deadline = deadline_after(cfg.timeout);
    loop {
        if let Some(f) = dec.next_frame(cfg.max_frame)? {
            return Ok(f);
        }
        src.fill(dec.buffer_mut(), deadline)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_timeout_is_a_far_deadline_not_a_panic() {
        let far = deadline_after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(86_400 * 365));
        let cfg = TransportConfig {
            timeout: Duration::MAX,
            max_frame: 1 << 10,
        };
        let bytes = encode_frames(&[Frame {
            tag: 7,
            depth: 0,
            payload: vec![1, 2, 3],
        }]);
        let f = read_frame(&mut Script(vec![bytes]), &mut FrameDecoder::new(), &cfg).unwrap();
        assert_eq!((f.tag, f.payload), (7, vec![1, 2, 3]));
    }

    /// A source that delivers its chunks one per call, then stays silent until the deadline.
    struct Script(Vec<Vec<u8>>);

    impl ByteSource for Script {
        fn fill(&mut self, buf: &mut Vec<u8>, deadline: Instant) -> Result<(), TransportError> {
            if self.0.is_empty() {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                return Err(TransportError::Timeout);
            }
            buf.extend_from_slice(&self.0.remove(0));
            Ok(())
        }
    }

    fn header(tag: u16, len: u32) -> Vec<u8> {
        let mut h = vec![MAGIC, WIRE_VERSION];
        h.extend_from_slice(&tag.to_le_bytes());
        h.extend_from_slice(&7u32.to_le_bytes());
        h.extend_from_slice(&len.to_le_bytes());
        h
    }

    /// A header declaring 1 GiB (the limit) followed by 1 MiB of payload and silence: a typed
    /// timeout, and the buffer holds what arrived, not what was declared.
    #[test]
    fn declared_gigabyte_reserves_nothing() {
        let cfg = TransportConfig {
            timeout: Duration::from_millis(50),
            max_frame: 1 << 30,
        };
        let mut src = Script(vec![header(3, 1 << 30), vec![0xAB; 1 << 20]]);
        let mut dec = FrameDecoder::new();
        assert_eq!(
            read_frame(&mut src, &mut dec, &cfg),
            Err(TransportError::Timeout)
        );
        assert_eq!(dec.buffered(), HEADER_LEN + (1 << 20));
        assert!(dec.capacity() < 4 << 20, "capacity {}", dec.capacity());
    }

    /// Frames split at every byte boundary decode to the frames sent; a frame over the limit is
    /// refused from its header alone.
    #[test]
    fn split_frames_and_limits() {
        let frames = vec![
            Frame {
                tag: 1,
                depth: 2,
                payload: vec![1, 2, 3],
            },
            Frame {
                tag: 9,
                depth: 0,
                payload: vec![],
            },
        ];
        let bytes = encode_frames(&frames);
        let mut dec = FrameDecoder::new();
        let mut got = Vec::new();
        for b in &bytes {
            dec.push(core::slice::from_ref(b));
            while let Some(f) = dec.next_frame(16).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, frames);
        assert_eq!(dec.buffered(), 0);
        let mut dec = FrameDecoder::new();
        dec.push(&header(1, 17));
        assert_eq!(
            dec.next_frame(16),
            Err(TransportError::TooLarge { len: 17, max: 16 })
        );
        let mut dec = FrameDecoder::new();
        dec.push(&[0x00; HEADER_LEN]);
        assert_eq!(
            dec.next_frame(16),
            Err(TransportError::Malformed("bad magic"))
        );
        let mut dec = FrameDecoder::new();
        let mut abort = header(ABORT_TAG, 2);
        abort.extend_from_slice(b"no");
        dec.push(&abort);
        assert_eq!(
            dec.next_frame(16),
            Err(TransportError::PeerAborted("no".into()))
        );
    }
}
