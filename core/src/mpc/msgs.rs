//! Typed protocol messages: the one table of frame tags ([`MsgKind`]) and one
//! struct per protocol step, each with an `encode` and a `decode` that checks
//! the payload against the shape the receiver expects.
//!
//! Protocols send and receive only through these structs
//! ([`crate::mpc::Channel::send_msg`], [`crate::mpc::Channel::recv_msg`]).
//! Every decoder is total: on any byte string it returns the message or a
//! typed [`MpcError`] — [`MpcError::Malformed`] with a [`Defect`] (wrong
//! length, non-zero padding bits, a value out of range, a wrong count) or
//! [`MpcError::InvalidPoint`] — and never panics. Encodings are canonical:
//! `decode(encode(m), m.shape()) == m`, and a successful decode re-encodes to
//! the same bytes.
//!
//! Payloads are little-endian; packed words are written LSB first, back to
//! back, and the last byte is padded with zero bits. Each frame adds
//! [`crate::mpc::channel::FRAME_OVERHEAD`] bytes on the wire.
//!
//! # Tags and sizes
//!
//! | kind | tag | payload bytes | sent by |
//! |---|---|---|---|
//! | [`MsgKind::SetupHello`] | `0x0001` | 48 | both, setup round 1 |
//! | [`MsgKind::BaseOtReply`] | `0x0002` | `32·128` | both, setup round 2 |
//! | [`MsgKind::SeedShare`] | `0x0003` | 16 | both, setup with an injected OT |
//! | [`MsgKind::IknpU`] | `0x0101` | `2048·⌈m/128⌉` for `m` COTs | COT receiver |
//! | [`MsgKind::Derand`] | `0x0103` | `⌈m/8⌉` | COT receiver (pool) |
//! | [`MsgKind::SilentSpcot`] | `0x0104` | `16·t·(2h+1)` for `t` trees of depth `h` | COT sender (silent OT) |
//! | [`MsgKind::BeaverOpen`] | `0x0201` | `⌈2nℓ/8⌉` | both |
//! | [`MsgKind::TripleCorr`] | `0x0202` | `⌈n·ℓ(ℓ+1)/2 / 8⌉` | both (Gilboa) |
//! | [`MsgKind::TruncCorr`] | `0x0203` | `⌈n·s/8⌉` | P0 (`KnownMsb` trunc) |
//! | [`MsgKind::RoundCorr`] | `0x0204` | `⌈n(k+ℓ)/8⌉` | P0 (exact rounding) |
//! | [`MsgKind::B2aCorr`] | `0x0205` | `⌈n·k/8⌉` | P0 (B2A into `Z_{2^k}`) |
//! | [`MsgKind::MuxCorr`] | `0x0206` | `⌈nℓ/8⌉` | both (mux) |
//! | [`MsgKind::SquareCorr`] | `0x0207` | `⌈n·ℓ(ℓ+1)/2 / 8⌉`; bounded: `⌈n·(Σ_{i<m}(ℓ−i) + ℓ−m−1) / 8⌉` | P0 (squaring) |
//! | [`MsgKind::WideCorr`] | `0x0208` | `⌈m·g·ℓ(ℓ+1)/2 / 8⌉` for `m` choosers, `g` per COT | both (broadcast products) |
//! | [`MsgKind::SquareWrapCorr`] | `0x0209` | `⌈n·(ℓ−m−1) / 8⌉` | P1 (bounded squaring, `m`-bit shares) |
//! | [`MsgKind::MulCorr`] | `0x020a` | `⌈n·(Σ_{i<m}(ℓ−i) + 2(ℓ−m)) / 8⌉` | both (bounded product, chooser operand of `m` bits) |
//! | [`MsgKind::CmpLeaf`] | `0x0301` | `⌈n·Σ_j 2^{m_j+1} / 8⌉` | P0 (millionaires) |
//! | [`MsgKind::CmpAnd`] | `0x0302` | `⌈3·merges/8⌉` per tree level | both |
//! | [`MsgKind::Input`] | `0x0401` | `⌈nℓ/8⌉` | input owner |
//! | [`MsgKind::Reveal`] | `0x0402` | `⌈nℓ/8⌉` | both |
//! | [`MsgKind::C2mCiphertexts`] | `0x0501` | `4 + Σ (8 + len_i)` | P1 (C2M) |
//! | [`MsgKind::M2cCiphertexts`] | `0x0502` | `4 + Σ (8 + len_i)` | P0 (M2C) |
//! | [`MsgKind::ExtB2aCorr`] | `0x0601` | `⌈n·⌈log2 q⌉/8⌉` | P0 (Ring2Field) |
//! | [`MsgKind::ExtMsbCorr`] | `0x0602` | `⌈n·⌈log2 q⌉/8⌉` | P0 (known-MSB Ring2Field) |
//! | [`MsgKind::HeKey`] | `0x0701` | `32 + ⌈N·Σ_j ⌈log2 q_j⌉/8⌉` | key owner P0 (RLWE triples, once) |
//! | [`MsgKind::HeUpload`] | `0x0702` | `32 + ⌈2B·N·Σ_j ⌈log2 q_j⌉/8⌉` for `B` batches | P0 (RLWE triples) |
//! | [`MsgKind::HeReply`] | `0x0703` | `⌈2B·N·Σ_{j<k} ⌈log2 q_j⌉/8⌉` (reply primes) | P1 (RLWE triples) |
//!
//! `m_j = min(m, bits − j·m)` are the digit widths of the millionaires'
//! protocol (radix `m`); the COT corrections are `d_j = H(q_j) + c_j −
//! H(q_j ⊕ Δ) mod 2^{w_j}` at the widths `w_j` of [`CorrWidths`].

use crate::mpc::error::{Defect, MpcError, Result};
pub use crate::mpc::kind::MsgKind;
use crate::mpc::pack::{
    bit_reader, check_len, malformed, pack_bits, pack_u128, pack_u64, unpack_bits, unpack_u128,
    unpack_u64, BitReader, BitWriter,
};
use crate::mpc::zq::Modulus;
use alloc::vec::Vec;
use core::fmt;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use zeroize::Zeroize;

/// A typed protocol message.
pub trait Message: Sized {
    /// Its kind (and so its frame tag).
    const KIND: MsgKind;
    /// What the receiver knows in advance about the message (counts, widths).
    type Shape;
    /// Payload bytes.
    fn encode(&self) -> Vec<u8>;
    /// Parses a payload of the expected shape; a typed error on anything else.
    fn decode(bytes: &[u8], shape: &Self::Shape) -> Result<Self>;
    /// The shape of this message (`decode(encode(m), &m.shape()) == m`).
    fn shape(&self) -> Self::Shape;
    /// The payload, consuming the message: the same bytes as [`Message::encode`], without a copy
    /// where the message already holds its payload (the large IKNP matrix).
    fn into_payload(self) -> Vec<u8> {
        self.encode()
    }
    /// [`Message::decode`] of an owned payload: the same checks, without a copy where the
    /// message keeps the bytes as they are.
    fn decode_payload(bytes: Vec<u8>, shape: &Self::Shape) -> Result<Self> {
        Self::decode(&bytes, shape)
    }
}

fn check_width(bits: u32, max: u32) -> Result<()> {
    if bits == 0 || bits > max {
        return Err(MpcError::InvalidConfig("packed word width out of range"));
    }
    Ok(())
}

// ---------------------------------------------------------------- points

/// A Ristretto point as received: its canonical 32-byte encoding and the
/// decompressed point (equality compares the encodings).
#[derive(Clone, Copy)]
pub struct Point {
    bytes: [u8; 32],
    point: RistrettoPoint,
}

impl Point {
    /// Wraps a point (compresses it once).
    pub fn new(point: RistrettoPoint) -> Self {
        Point {
            bytes: point.compress().to_bytes(),
            point,
        }
    }

    /// Decodes 32 bytes; [`MpcError::InvalidPoint`] if they are not a
    /// canonical Ristretto encoding.
    pub fn decode(bytes: &[u8], msg: MsgKind, index: usize) -> Result<Self> {
        let b: [u8; 32] = bytes
            .try_into()
            .map_err(|_| MpcError::InvalidPoint { msg, index })?;
        let point = CompressedRistretto(b)
            .decompress()
            .ok_or(MpcError::InvalidPoint { msg, index })?;
        Ok(Point { bytes: b, point })
    }

    /// The 32-byte encoding.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.bytes
    }

    /// The point.
    pub fn point(&self) -> &RistrettoPoint {
        &self.point
    }
}

impl PartialEq for Point {
    fn eq(&self, o: &Self) -> bool {
        self.bytes == o.bytes
    }
}
impl Eq for Point {}

impl fmt::Debug for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Point({:02x}{:02x}..)", self.bytes[0], self.bytes[1])
    }
}

// ---------------------------------------------------------------- setup

/// One party's 16-byte share of the common seed `H(s_0 ‖ s_1)` (zeroized on
/// drop, redacted in `Debug`).
#[derive(Clone, PartialEq, Eq)]
pub struct SeedShare {
    /// The share.
    pub seed: [u8; 16],
}

impl Drop for SeedShare {
    fn drop(&mut self) {
        self.seed.zeroize();
    }
}

impl fmt::Debug for SeedShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SeedShare(<redacted>)")
    }
}

impl Message for SeedShare {
    const KIND: MsgKind = MsgKind::SeedShare;
    type Shape = ();
    fn encode(&self) -> Vec<u8> {
        self.seed.to_vec()
    }
    fn decode(bytes: &[u8], _: &()) -> Result<Self> {
        check_len(Self::KIND, bytes, 16)?;
        let mut seed = [0u8; 16];
        seed.copy_from_slice(bytes);
        Ok(SeedShare { seed })
    }
    fn shape(&self) {}
}

/// Setup round 1 of the default (IKNP) setup: the Chou–Orlandi sender point
/// `S` (32 bytes) followed by the seed share (16 bytes). The share rides here
/// so that the default setup costs what a setup without a common seed would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupHello {
    /// `S = y·G`.
    pub s: Point,
    /// Common-seed share.
    pub seed: SeedShare,
}

impl Message for SetupHello {
    const KIND: MsgKind = MsgKind::SetupHello;
    type Shape = ();
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(48);
        v.extend_from_slice(self.s.bytes());
        v.extend_from_slice(&self.seed.seed);
        v
    }
    fn decode(bytes: &[u8], _: &()) -> Result<Self> {
        check_len(Self::KIND, bytes, 48)?;
        let s = Point::decode(&bytes[..32], Self::KIND, 0)?;
        let mut seed = [0u8; 16];
        seed.copy_from_slice(&bytes[32..]);
        Ok(SetupHello {
            s,
            seed: SeedShare { seed },
        })
    }
    fn shape(&self) {}
}

/// Setup round 2: the base-OT receiver points `R_i = c_i·S + x_i·G`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseOtReply {
    /// `R_i`.
    pub points: Vec<Point>,
}

impl Message for BaseOtReply {
    const KIND: MsgKind = MsgKind::BaseOtReply;
    /// Number of base OTs.
    type Shape = usize;
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(32 * self.points.len());
        for p in &self.points {
            v.extend_from_slice(p.bytes());
        }
        v
    }
    fn decode(bytes: &[u8], &n: &usize) -> Result<Self> {
        check_len(Self::KIND, bytes, n.saturating_mul(32))?;
        let points = bytes
            .chunks_exact(32)
            .enumerate()
            .map(|(i, c)| Point::decode(c, Self::KIND, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(BaseOtReply { points })
    }
    fn shape(&self) -> usize {
        self.points.len()
    }
}

// ---------------------------------------------------------------- OT

/// The IKNP `u` matrix of an extension of `m` COTs: 128 columns of
/// `⌈m/128⌉·16` bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct IknpU {
    /// Column-major matrix bytes.
    pub matrix: Vec<u8>,
}

impl IknpU {
    /// Payload bytes for `m` COTs.
    pub fn len_for(m: usize) -> usize {
        128 * m.div_ceil(128) * 16
    }
}

impl fmt::Debug for IknpU {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IknpU({} bytes)", self.matrix.len())
    }
}

impl Message for IknpU {
    const KIND: MsgKind = MsgKind::IknpU;
    /// Number of COTs `m`.
    type Shape = usize;
    fn encode(&self) -> Vec<u8> {
        self.matrix.clone()
    }
    fn decode(bytes: &[u8], &m: &usize) -> Result<Self> {
        check_len(Self::KIND, bytes, IknpU::len_for(m))?;
        Ok(IknpU {
            matrix: bytes.to_vec(),
        })
    }
    fn shape(&self) -> usize {
        self.matrix.len() / 16
    }
    fn into_payload(self) -> Vec<u8> {
        self.matrix
    }
    fn decode_payload(bytes: Vec<u8>, &m: &usize) -> Result<Self> {
        check_len(Self::KIND, &bytes, IknpU::len_for(m))?;
        Ok(IknpU { matrix: bytes })
    }
}

/// Shape of a [`SilentSpcot`]: `t` GGM trees of depth `h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpcotShape {
    /// Trees (the noise weight `t`).
    pub trees: usize,
    /// Depth `h = log2(n/t)` of each tree.
    pub depth: u32,
}

impl SpcotShape {
    /// Blocks of the message: per tree `2h` level blocks and one correction.
    pub fn blocks(&self) -> usize {
        self.trees
            .saturating_mul(2usize.saturating_mul(self.depth as usize).saturating_add(1))
    }
}

/// One silent-OT extension ([`crate::mpc::ot::silent`]): for each of the `t`
/// trees, the `h` level pairs `(K_0^j ⊕ H(q_j), K_1^j ⊕ H(q_j ⊕ Δ))` (sums
/// of the left/right nodes of level `j`, masked by one COT each) followed by
/// the correction `Δ ⊕ Σ_i v_i`; 16 bytes per block, little-endian.
#[derive(Clone, PartialEq, Eq)]
pub struct SilentSpcot {
    /// `t·(2h + 1)` blocks, tree after tree.
    pub blocks: Vec<u128>,
    /// The shape the blocks were made for.
    pub shape: SpcotShape,
}

impl fmt::Debug for SilentSpcot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SilentSpcot({} trees × depth {})",
            self.shape.trees, self.shape.depth
        )
    }
}

impl Message for SilentSpcot {
    const KIND: MsgKind = MsgKind::SilentSpcot;
    type Shape = SpcotShape;
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16 * self.blocks.len());
        for b in &self.blocks {
            v.extend_from_slice(&b.to_le_bytes());
        }
        v
    }
    fn decode(bytes: &[u8], s: &SpcotShape) -> Result<Self> {
        if s.depth == 0 || s.depth > 31 {
            return Err(MpcError::InvalidConfig("SPCOT tree depth out of range"));
        }
        check_len(Self::KIND, bytes, s.blocks().saturating_mul(16))?;
        let blocks = bytes
            .chunks_exact(16)
            .map(|c| {
                let mut b = [0u8; 16];
                b.copy_from_slice(c);
                u128::from_le_bytes(b)
            })
            .collect();
        Ok(SilentSpcot { blocks, shape: *s })
    }
    fn shape(&self) -> SpcotShape {
        self.shape
    }
}

macro_rules! bit_msg {
    ($(#[$m:meta])* $name:ident, $kind:ident) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name {
            /// One bit per byte (`0`/`1`).
            pub bits: Vec<u8>,
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({} bits)", stringify!($name), self.bits.len())
            }
        }

        impl Message for $name {
            const KIND: MsgKind = MsgKind::$kind;
            /// Number of bits.
            type Shape = usize;
            fn encode(&self) -> Vec<u8> {
                pack_bits(&self.bits)
            }
            fn decode(bytes: &[u8], &n: &usize) -> Result<Self> {
                Ok($name {
                    bits: unpack_bits(bytes, n, Self::KIND)?,
                })
            }
            fn shape(&self) -> usize {
                self.bits.len()
            }
        }
    };
}

bit_msg!(
    /// Pool derandomization bits `d_j = r_j ⊕ r'_j`, `⌈m/8⌉` bytes.
    Derand,
    Derand
);
bit_msg!(
    /// One AND-tree level of the millionaires' protocol: per merge the three
    /// openings `(eq_hi ⊕ a, gt_lo ⊕ b, eq_lo ⊕ b')`.
    CmpAnd,
    CmpAnd
);

// ---------------------------------------------------------------- ring words

/// Count and width of a message of uniform-width ring words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordShape {
    /// Number of words.
    pub count: usize,
    /// Bits per word (`1..=64`).
    pub bits: u32,
}

macro_rules! word_msg {
    ($(#[$m:meta])* $name:ident, $kind:ident) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name {
            /// Bits per word (`1..=64`).
            pub bits: u32,
            /// The words (each `< 2^bits`).
            pub words: Vec<u64>,
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({} × {} bits)", stringify!($name), self.words.len(), self.bits)
            }
        }

        impl Message for $name {
            const KIND: MsgKind = MsgKind::$kind;
            type Shape = WordShape;
            fn encode(&self) -> Vec<u8> {
                pack_u64(&self.words, self.bits)
            }
            fn decode(bytes: &[u8], s: &WordShape) -> Result<Self> {
                check_width(s.bits, 64)?;
                Ok($name {
                    bits: s.bits,
                    words: unpack_u64(bytes, s.count, s.bits, Self::KIND)?,
                })
            }
            fn shape(&self) -> WordShape {
                WordShape {
                    count: self.words.len(),
                    bits: self.bits,
                }
            }
        }
    };
}

word_msg!(
    /// Beaver opening: `e = x − a` (first `n` words) then `f = y − b`, `ℓ` bits each.
    BeaverOpen,
    BeaverOpen
);
word_msg!(
    /// Input sharing: the mask `r` the owner sends, `ℓ` bits per element.
    InputShare,
    Input
);
word_msg!(
    /// Opening: the sender's shares, `ℓ` bits per element.
    Reveal,
    Reveal
);

/// Widths `w_j` of the COT corrections of one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorrWidths {
    /// Every correction has `bits` bits.
    Uniform(u32),
    /// Gilboa: `ℓ` blocks of `n` corrections, block `i` of width `ℓ − i`.
    Gilboa {
        /// Triples in the batch.
        n: usize,
        /// Ring width `ℓ`.
        ell: u32,
    },
    /// Gilboa over the low `bits` bits of the chooser's value, then tail blocks:
    /// `bits` blocks of `n` corrections, block `i` of width `ℓ − i`, then `tails`
    /// blocks of `n` corrections of width `tail` (the wrap COTs of the bounded
    /// squaring and product).
    GilboaTail {
        /// Elements in the batch.
        n: usize,
        /// Ring width `ℓ`.
        ell: u32,
        /// Chooser bits `m ≤ ℓ`.
        bits: u32,
        /// Width of the tail blocks.
        tail: u32,
        /// Number of tail blocks (`≤ 8`).
        tails: u32,
    },
    /// The first `n` of width `lo`, the rest of width `hi`.
    Split {
        /// Corrections of width `lo`.
        n: usize,
        /// Width of the first `n`.
        lo: u32,
        /// Width of the others.
        hi: u32,
    },
}

impl CorrWidths {
    /// Width of correction `j`.
    #[inline]
    pub fn width(&self, j: usize) -> u32 {
        match *self {
            CorrWidths::Uniform(b) => b,
            CorrWidths::Gilboa { n, ell } => ell - (j / n.max(1)) as u32,
            CorrWidths::GilboaTail {
                n, ell, bits, tail, ..
            } => {
                let i = j / n.max(1);
                if i < bits as usize {
                    ell - i as u32
                } else {
                    tail
                }
            }
            CorrWidths::Split { n, lo, hi } => {
                if j < n {
                    lo
                } else {
                    hi
                }
            }
        }
    }

    fn valid(&self, count: usize) -> bool {
        match *self {
            CorrWidths::Uniform(b) => (1..=64).contains(&b),
            CorrWidths::Gilboa { n, ell } => {
                (1..=64).contains(&ell) && count == n.saturating_mul(ell as usize)
            }
            CorrWidths::GilboaTail {
                n,
                ell,
                bits,
                tail,
                tails,
            } => {
                (1..=64).contains(&ell)
                    && (1..=ell).contains(&bits)
                    && (1..=64).contains(&tail)
                    && tails <= 8
                    && count == n.saturating_mul((bits + tails) as usize)
            }
            CorrWidths::Split { lo, hi, .. } => (1..=64).contains(&lo) && (1..=64).contains(&hi),
        }
    }

    /// Total bits of `count` corrections.
    pub fn total_bits(&self, count: usize) -> usize {
        match *self {
            CorrWidths::Uniform(b) => count.saturating_mul(b as usize),
            CorrWidths::Gilboa { n, ell } => {
                let e = ell as usize;
                n.saturating_mul(e * (e + 1) / 2)
            }
            CorrWidths::GilboaTail {
                n,
                ell,
                bits,
                tail,
                tails,
            } => {
                let (e, m) = (ell as usize, (bits as usize).min(ell as usize));
                let per = m * e - m * (m.saturating_sub(1)) / 2 + (tail * tails.min(8)) as usize;
                n.saturating_mul(per)
            }
            CorrWidths::Split { n, lo, hi } => {
                let a = n.min(count);
                a.saturating_mul(lo as usize)
                    .saturating_add((count - a).saturating_mul(hi as usize))
            }
        }
    }
}

/// Count and widths of a COT-correction message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorrShape {
    /// Number of corrections.
    pub count: usize,
    /// Their widths.
    pub widths: CorrWidths,
}

/// A COT-correction message over `Z_{2^w}` (what the correlated-OT helpers
/// of [`crate::mpc::Party`] send and receive).
pub trait CorrMessage: Message<Shape = CorrShape> {
    /// Builds the message.
    fn from_parts(widths: CorrWidths, d: Vec<u64>) -> Self;
    /// The corrections.
    fn corrections(&self) -> &[u64];
}

/// A COT-correction message over `Z_q`.
pub trait ZqMessage: Message<Shape = ZqShape> {
    /// Builds the message.
    fn from_parts(q: Modulus, d: Vec<u128>) -> Self;
    /// The corrections.
    fn corrections(&self) -> &[u128];
}

macro_rules! corr_msg {
    ($(#[$m:meta])* $name:ident, $kind:ident) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name {
            /// Widths of the corrections.
            pub widths: CorrWidths,
            /// Corrections `d_j < 2^{w_j}`.
            pub d: Vec<u64>,
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({} corrections, {:?})", stringify!($name), self.d.len(), self.widths)
            }
        }

        impl Message for $name {
            const KIND: MsgKind = MsgKind::$kind;
            type Shape = CorrShape;
            fn encode(&self) -> Vec<u8> {
                encode_corr(&self.d, &self.widths)
            }
            fn decode(bytes: &[u8], s: &CorrShape) -> Result<Self> {
                Ok($name {
                    widths: s.widths,
                    d: decode_corr(Self::KIND, bytes, s)?,
                })
            }
            fn shape(&self) -> CorrShape {
                CorrShape {
                    count: self.d.len(),
                    widths: self.widths,
                }
            }
        }

        impl CorrMessage for $name {
            fn from_parts(widths: CorrWidths, d: Vec<u64>) -> Self {
                $name { widths, d }
            }
            fn corrections(&self) -> &[u64] {
                &self.d
            }
        }
    };
}

fn encode_corr(d: &[u64], w: &CorrWidths) -> Vec<u8> {
    if let CorrWidths::Uniform(b) = *w {
        return pack_u64(d, b);
    }
    let mut wr = BitWriter::with_capacity_bits(w.total_bits(d.len()));
    for (j, &v) in d.iter().enumerate() {
        wr.push(v, w.width(j));
    }
    wr.finish()
}

fn decode_corr(msg: MsgKind, bytes: &[u8], s: &CorrShape) -> Result<Vec<u64>> {
    if !s.widths.valid(s.count) {
        return Err(MpcError::InvalidConfig("correction widths out of range"));
    }
    if let CorrWidths::Uniform(b) = s.widths {
        return unpack_u64(bytes, s.count, b, msg);
    }
    let mut rd = bit_reader(msg, bytes, s.widths.total_bits(s.count))?;
    Ok((0..s.count).map(|j| rd.read(s.widths.width(j))).collect())
}

corr_msg!(
    /// Gilboa triple corrections ([`CorrWidths::Gilboa`]): correlation `a mod 2^{ℓ-i}` per bit `i`.
    TripleCorr,
    TripleCorr
);
corr_msg!(
    /// `KnownMsb` truncation: correlation `msb(x'_0)` at width `s`.
    TruncCorr,
    TruncCorr
);
corr_msg!(
    /// Exact rounding: the wrap AND at width `k`, then the carry B2A at width `ℓ`
    /// ([`CorrWidths::Split`]).
    RoundCorr,
    RoundCorr
);
corr_msg!(
    /// B2A into `Z_{2^k}`: correlation `b_0` at width `k`.
    B2aCorr,
    B2aCorr
);
corr_msg!(
    /// Multiplexer: correlation `(1 − 2b_i)·x_i` at width `ℓ`.
    MuxCorr,
    MuxCorr
);
corr_msg!(
    /// Squaring: one Gilboa cross term, correlation `x_0 mod 2^{ℓ-i}` ([`CorrWidths::Gilboa`]),
    /// or the bounded squaring's `m` Gilboa blocks and its wrap tail ([`CorrWidths::GilboaTail`]).
    SquareCorr,
    SquareCorr
);
corr_msg!(
    /// Bounded product ([`crate::mpc::Party::mul_bounded_fx`]): one Gilboa cross term
    /// on the chooser operand's `m` bits and the two wrap COTs
    /// ([`CorrWidths::GilboaTail`], two tails of width `ℓ − m`); both parties send one.
    MulCorr,
    MulCorr
);
corr_msg!(
    /// Bounded squaring ([`crate::mpc::Party::square_bounded_fx`]): P1's wrap-bit
    /// corrections, correlation `(1 − γ)·c mod 2^{ℓ−m−1}` ([`CorrWidths::Uniform`]).
    SquareWrapCorr,
    SquareWrapCorr
);
/// Broadcast products: `g` corrections per COT (pads expanded from one COT by the
/// hash's domain), [`CorrWidths::Gilboa`] over the `m·g` corrections of each bit.
///
/// Unlike the other correction messages it keeps its payload packed, as sent: the
/// broadcast products stream their corrections into it and out of it (one
/// [`BitWriter`] pass, one [`BitReader`] pass) instead of materializing `m·g` words
/// (68 MB per party at BERT-base's LayerNorm shape).
#[derive(Clone, PartialEq, Eq)]
pub struct WideCorr {
    /// Widths of the corrections.
    pub widths: CorrWidths,
    count: usize,
    bytes: Vec<u8>,
}

impl fmt::Debug for WideCorr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WideCorr({} corrections, {:?})", self.count, self.widths)
    }
}

impl WideCorr {
    /// Builds the message from its corrections `d_j < 2^{w_j}`.
    pub fn from_parts(widths: CorrWidths, d: Vec<u64>) -> Self {
        WideCorr {
            widths,
            count: d.len(),
            bytes: encode_corr(&d, &widths),
        }
    }

    /// The message of `count` corrections already packed by a [`BitWriter`] at `widths`.
    pub(crate) fn from_packed(widths: CorrWidths, count: usize, bytes: Vec<u8>) -> Self {
        WideCorr {
            widths,
            count,
            bytes,
        }
    }

    /// The corrections, unpacked.
    pub fn corrections(&self) -> Vec<u64> {
        decode_corr(MsgKind::WideCorr, &self.bytes, &self.shape()).unwrap_or_default()
    }

    /// A reader over the packed corrections (non-uniform widths: the layout of
    /// [`BitWriter`]); the length and padding were checked when the message was decoded.
    pub(crate) fn reader(&self) -> Result<BitReader<'_>> {
        bit_reader(
            MsgKind::WideCorr,
            &self.bytes,
            self.widths.total_bits(self.count),
        )
    }

    fn check(bytes: &[u8], s: &CorrShape) -> Result<()> {
        if !s.widths.valid(s.count) {
            return Err(MpcError::InvalidConfig("correction widths out of range"));
        }
        if let CorrWidths::Uniform(_) = s.widths {
            // The word packing's own checks.
            decode_corr(MsgKind::WideCorr, bytes, s).map(drop)
        } else {
            bit_reader(MsgKind::WideCorr, bytes, s.widths.total_bits(s.count)).map(drop)
        }
    }
}

impl Message for WideCorr {
    const KIND: MsgKind = MsgKind::WideCorr;
    type Shape = CorrShape;
    fn encode(&self) -> Vec<u8> {
        self.bytes.clone()
    }
    fn decode(bytes: &[u8], s: &CorrShape) -> Result<Self> {
        Self::check(bytes, s)?;
        Ok(WideCorr {
            widths: s.widths,
            count: s.count,
            bytes: bytes.to_vec(),
        })
    }
    fn shape(&self) -> CorrShape {
        CorrShape {
            count: self.count,
            widths: self.widths,
        }
    }
    fn into_payload(self) -> Vec<u8> {
        self.bytes
    }
    fn decode_payload(bytes: Vec<u8>, s: &CorrShape) -> Result<Self> {
        Self::check(&bytes, s)?;
        Ok(WideCorr {
            widths: s.widths,
            count: s.count,
            bytes,
        })
    }
}

// ---------------------------------------------------------------- millionaires

/// Shape of the millionaires' leaf tables: `n` inputs of `bits` bits in
/// digits of `radix` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafShape {
    /// Inputs.
    pub n: usize,
    /// Input width (`1..=64`).
    pub bits: u32,
    /// Digit width `m` (`1..=6`).
    pub radix: u32,
}

impl LeafShape {
    /// Digits per input.
    pub fn digits(&self) -> usize {
        self.bits.div_ceil(self.radix) as usize
    }

    /// Width of digit `j`.
    pub fn digit_width(&self, j: usize) -> u32 {
        core::cmp::min(self.radix, self.bits - j as u32 * self.radix)
    }

    /// Bits of the table of digit `j` (`2` per entry, `2^{m_j}` entries).
    pub fn table_bits(&self, j: usize) -> u32 {
        2u32 << self.digit_width(j)
    }

    fn total_bits(&self) -> usize {
        let per: usize = (0..self.digits())
            .map(|j| self.table_bits(j) as usize)
            .sum();
        self.n.saturating_mul(per)
    }
}

/// Millionaires' leaf tables: per input and digit (digit-minor order), one
/// word of `2^{m_j+1}` bits holding the masked `(gt, eq)` entries.
#[derive(Clone, PartialEq, Eq)]
pub struct CmpLeaf {
    /// The shape.
    pub shape: LeafShape,
    /// `n·digits` table words.
    pub tables: Vec<u128>,
}

impl fmt::Debug for CmpLeaf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CmpLeaf({} tables, {:?})", self.tables.len(), self.shape)
    }
}

fn push_word(w: &mut BitWriter, word: u128, bits: u32) {
    if bits <= 64 {
        w.push(word as u64, bits);
    } else {
        w.push(word as u64, 64);
        w.push((word >> 64) as u64, bits - 64);
    }
}

fn read_word(r: &mut BitReader<'_>, bits: u32) -> u128 {
    if bits <= 64 {
        r.read(bits) as u128
    } else {
        let lo = r.read(64) as u128;
        lo | ((r.read(bits - 64) as u128) << 64)
    }
}

impl Message for CmpLeaf {
    const KIND: MsgKind = MsgKind::CmpLeaf;
    type Shape = LeafShape;
    fn encode(&self) -> Vec<u8> {
        let s = &self.shape;
        let nd = s.digits();
        let mut w = BitWriter::with_capacity_bits(s.total_bits());
        for (i, &t) in self.tables.iter().enumerate() {
            push_word(&mut w, t, s.table_bits(i % nd));
        }
        w.finish()
    }
    fn decode(bytes: &[u8], s: &LeafShape) -> Result<Self> {
        if !(1..=6).contains(&s.radix) || !(1..=64).contains(&s.bits) {
            return Err(MpcError::InvalidConfig("millionaires' shape out of range"));
        }
        let nd = s.digits();
        let mut rd = bit_reader(Self::KIND, bytes, s.total_bits())?;
        let mut tables = Vec::with_capacity(s.n * nd);
        for _ in 0..s.n {
            for j in 0..nd {
                tables.push(read_word(&mut rd, s.table_bits(j)));
            }
        }
        Ok(CmpLeaf { shape: *s, tables })
    }
    fn shape(&self) -> LeafShape {
        self.shape
    }
}

// ---------------------------------------------------------------- Z_q

/// Count and modulus of a `Z_q` correction message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZqShape {
    /// Number of elements.
    pub count: usize,
    /// The modulus (elements travel with `⌈log2 q⌉` bits).
    pub q: Modulus,
}

macro_rules! zq_msg {
    ($(#[$m:meta])* $name:ident, $kind:ident) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name {
            /// The modulus.
            pub q: Modulus,
            /// Corrections, each `< q`.
            pub d: Vec<u128>,
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({} elements mod q)", stringify!($name), self.d.len())
            }
        }

        impl Message for $name {
            const KIND: MsgKind = MsgKind::$kind;
            type Shape = ZqShape;
            fn encode(&self) -> Vec<u8> {
                pack_u128(&self.d, self.q.bits())
            }
            fn decode(bytes: &[u8], s: &ZqShape) -> Result<Self> {
                let d = unpack_u128(bytes, s.count, s.q.bits(), Self::KIND)?;
                if let Some(index) = d.iter().position(|&v| v >= s.q.value()) {
                    return Err(malformed(Self::KIND, Defect::OutOfRange { index }));
                }
                Ok($name { q: s.q, d })
            }
            fn shape(&self) -> ZqShape {
                ZqShape {
                    count: self.d.len(),
                    q: self.q,
                }
            }
        }

        impl ZqMessage for $name {
            fn from_parts(q: Modulus, d: Vec<u128>) -> Self {
                $name { q, d }
            }
            fn corrections(&self) -> &[u128] {
                &self.d
            }
        }
    };
}

zq_msg!(
    /// Ring2Field: B2A of the wrap bit into `Z_q`, correlation `w_0`.
    ExtB2aCorr,
    ExtB2aCorr
);
zq_msg!(
    /// Known-MSB Ring2Field: correlation `msb(x'_0)` over `Z_q`.
    ExtMsbCorr,
    ExtMsbCorr
);

// ---------------------------------------------------------------- byte strings

/// Splits a `u32` count, then per item a `u64` length and the bytes.
fn decode_items(msg: MsgKind, bytes: &[u8], expect: usize) -> Result<Vec<Vec<u8>>> {
    let truncated = |needed: usize| {
        malformed(
            msg,
            Defect::Truncated {
                needed,
                found: bytes.len(),
            },
        )
    };
    let head: [u8; 4] = bytes
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| truncated(4))?;
    let count = u32::from_le_bytes(head) as usize;
    if count != expect {
        return Err(malformed(
            msg,
            Defect::Count {
                expected: expect,
                found: count,
            },
        ));
    }
    let mut at = 4usize;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let end = at.saturating_add(8);
        let lb: [u8; 8] = bytes
            .get(at..end)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| truncated(end))?;
        let len = usize::try_from(u64::from_le_bytes(lb)).unwrap_or(usize::MAX);
        let stop = end.saturating_add(len);
        let item = bytes.get(end..stop).ok_or_else(|| truncated(stop))?;
        out.push(item.to_vec());
        at = stop;
    }
    check_len(msg, bytes, at)?;
    Ok(out)
}

fn encode_items(items: &[Vec<u8>]) -> Vec<u8> {
    let total: usize = items.iter().map(|v| v.len() + 8).sum();
    let mut out = Vec::with_capacity(4 + total);
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for it in items {
        out.extend_from_slice(&(it.len() as u64).to_le_bytes());
        out.extend_from_slice(it);
    }
    out
}

macro_rules! items_msg {
    ($(#[$m:meta])* $name:ident, $kind:ident) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name {
            /// Serialized ciphertexts.
            pub items: Vec<Vec<u8>>,
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({} ciphertexts)", stringify!($name), self.items.len())
            }
        }

        impl Message for $name {
            const KIND: MsgKind = MsgKind::$kind;
            /// Number of ciphertexts.
            type Shape = usize;
            fn encode(&self) -> Vec<u8> {
                encode_items(&self.items)
            }
            fn decode(bytes: &[u8], &n: &usize) -> Result<Self> {
                Ok($name {
                    items: decode_items(Self::KIND, bytes, n)?,
                })
            }
            fn shape(&self) -> usize {
                self.items.len()
            }
        }
    };
}

items_msg!(
    /// C2M: `u32` count, then per ciphertext a `u64` length and the uncompressed serialized
    /// masked ciphertext `⟨m⟩ + r̂`.
    C2mCiphertexts,
    C2mCiphertexts
);
items_msg!(
    /// M2C: same layout, seeded (compressed) `Enc_sk(p_0)`.
    M2cCiphertexts,
    M2cCiphertexts
);

// ---------------------------------------------------------------- RLWE triples

/// What the receiver of an RNS message of the RLWE triple source
/// ([`crate::mpc::he_triples`]) knows in advance: `blocks` blocks, each one row of `n`
/// residues per modulus of `moduli`, in that order. A residue modulo `q` travels with
/// `⌈log2 q⌉` bits and must be `< q`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RnsShape {
    /// Residues per row (the ring degree).
    pub n: usize,
    /// Number of blocks.
    pub blocks: usize,
    /// The modulus of each row of a block.
    pub moduli: Vec<u64>,
}

impl RnsShape {
    /// Residues in the message.
    pub fn words(&self) -> usize {
        self.n
            .saturating_mul(self.blocks)
            .saturating_mul(self.moduli.len())
    }

    fn bits(&self) -> usize {
        let per_block: usize = self.moduli.iter().map(|&q| rns_width(q) as usize).sum();
        per_block.saturating_mul(self.n).saturating_mul(self.blocks)
    }

    fn valid(&self) -> bool {
        self.moduli.iter().all(|&q| q >= 3)
    }
}

fn rns_width(q: u64) -> u32 {
    64 - q.saturating_sub(1).leading_zeros()
}

fn encode_rns(out: &mut Vec<u8>, rows: &[u64], s: &RnsShape) {
    let mut wr = BitWriter::with_capacity_bits(s.bits());
    let n = s.n.max(1);
    for (r, row) in rows.chunks(n).enumerate() {
        let w = rns_width(s.moduli[r % s.moduli.len()]);
        for &v in row {
            wr.push(v, w);
        }
    }
    out.extend_from_slice(&wr.finish());
}

fn decode_rns(msg: MsgKind, bytes: &[u8], s: &RnsShape) -> Result<Vec<u64>> {
    if !s.valid() {
        return Err(MpcError::InvalidConfig("RNS message moduli out of range"));
    }
    let mut rd = bit_reader(msg, bytes, s.bits())?;
    let mut out = Vec::with_capacity(s.words());
    for _ in 0..s.blocks {
        for &q in &s.moduli {
            let w = rns_width(q);
            for _ in 0..s.n {
                let v = rd.read(w);
                if v >= q {
                    return Err(malformed(msg, Defect::OutOfRange { index: out.len() }));
                }
                out.push(v);
            }
        }
    }
    Ok(out)
}

macro_rules! rns_msg {
    ($(#[$m:meta])* $name:ident, $kind:ident, $seed:expr) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name {
            /// The public seed the receiver expands the uniform parts from (all zero bytes and
            /// not sent where the message has none).
            pub seed: [u8; 32],
            /// The layout of `rows`.
            pub shape: RnsShape,
            /// The residues, block after block, row after row.
            pub rows: Vec<u64>,
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "{}({} blocks × {} rows × {})",
                    stringify!($name),
                    self.shape.blocks,
                    self.shape.moduli.len(),
                    self.shape.n
                )
            }
        }

        impl Message for $name {
            const KIND: MsgKind = MsgKind::$kind;
            type Shape = RnsShape;
            fn encode(&self) -> Vec<u8> {
                let mut out = Vec::with_capacity($seed + self.shape.bits().div_ceil(8));
                out.extend_from_slice(&self.seed[..$seed]);
                encode_rns(&mut out, &self.rows, &self.shape);
                out
            }
            fn decode(bytes: &[u8], s: &RnsShape) -> Result<Self> {
                let head = bytes.get(..$seed).ok_or_else(|| {
                    malformed(
                        Self::KIND,
                        Defect::Truncated {
                            needed: $seed,
                            found: bytes.len(),
                        },
                    )
                })?;
                let mut seed = [0u8; 32];
                seed[..$seed].copy_from_slice(head);
                Ok($name {
                    seed,
                    shape: s.clone(),
                    rows: decode_rns(Self::KIND, &bytes[$seed..], s)?,
                })
            }
            fn shape(&self) -> RnsShape {
                self.shape.clone()
            }
        }
    };
}

rns_msg!(
    /// RLWE triples, once per session: the key owner's public key, the seed of its uniform part
    /// and `pk_0 = −a·s + e` over every ciphertext prime (NTT form).
    HeKey,
    HeKey,
    32
);
rns_msg!(
    /// RLWE triples: the key owner's seeded encryptions of its triple shares `a_0`, `b_0`, per
    /// batch (two ciphertexts, `c_0` over every ciphertext prime, NTT form); the `c_1` parts are
    /// the seed's expansion.
    HeUpload,
    HeUpload,
    32
);
rns_msg!(
    /// RLWE triples: the evaluator's answer per batch, `(c_0, c_1)` of
    /// `Enc(a_0·b_1 + b_0·a_1 + r)` after noise flooding and the switch to the reply modulus
    /// (coefficient form).
    HeReply,
    HeReply,
    0
);
