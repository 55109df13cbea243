//! LSB-first bit streams of words up to 64 bits wide: the one packing behind Veil's byte formats
//! (the rows of serialized polynomials, [`crate::serial`], and the payloads of protocol messages,
//! [`crate::mpc::pack`]).
//!
//! Word after word, each on its own width: bit `b` of the stream is bit `b % 8` of byte `b / 8`,
//! and the last byte is padded with zero bits. Both ends work on host bytes only; the formats
//! above them check lengths, ranges and padding ([`padding_is_zero`]).

use alloc::vec::Vec;

/// `2^bits − 1` (all ones for `bits ≥ 64`).
#[inline]
fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Writer of variable-width words (LSB first).
#[derive(Debug, Default)]
pub struct BitWriter {
    out: Vec<u8>,
    acc: u128,
    nacc: u32,
}

impl BitWriter {
    /// Empty writer with capacity for `bits` bits.
    pub fn with_capacity_bits(bits: usize) -> Self {
        BitWriter::appending(Vec::with_capacity(bits.div_ceil(8)))
    }

    /// A writer whose stream starts after the bytes `out` already holds.
    pub fn appending(out: Vec<u8>) -> Self {
        BitWriter {
            out,
            acc: 0,
            nacc: 0,
        }
    }

    /// Appends the low `bits ≤ 64` bits of `w`.
    #[inline]
    pub fn push(&mut self, w: u64, bits: u32) {
        let w = (w & low_mask(bits)) as u128;
        self.acc |= w << self.nacc;
        self.nacc += bits;
        if self.nacc >= 64 {
            self.out.extend_from_slice(&(self.acc as u64).to_le_bytes());
            self.acc >>= 64;
            self.nacc -= 64;
        }
    }

    /// Finishes (pads the last byte with zeros).
    pub fn finish(mut self) -> Vec<u8> {
        let tail = self.nacc.div_ceil(8) as usize;
        self.out
            .extend_from_slice(&(self.acc as u64).to_le_bytes()[..tail]);
        core::mem::take(&mut self.out)
    }
}

/// Reader of what a [`BitWriter`] wrote. It checks nothing: the caller first checks the length
/// of `bytes` (and, with [`padding_is_zero`], the padding) against the words it will read.
#[derive(Debug)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> BitReader<'a> {
    /// Reader over `bytes`, from bit 0.
    pub fn new(bytes: &'a [u8]) -> Self {
        BitReader { bytes, pos: 0 }
    }

    /// Reads `bits ≤ 64` bits. Reads past the end return zero bits (cannot happen when the
    /// length was checked).
    #[inline]
    pub fn read(&mut self, bits: u32) -> u64 {
        let start = self.pos >> 3;
        let mut b = [0u8; 16];
        match self.bytes.get(start..start + 16) {
            Some(window) => b.copy_from_slice(window),
            None => {
                let end = self.bytes.len().max(start);
                b[..end - start].copy_from_slice(&self.bytes[start..end]);
            }
        }
        let v = (u128::from_le_bytes(b) >> (self.pos & 7)) as u64 & low_mask(bits);
        self.pos += bits as usize;
        v
    }
}

/// Whether the bits of `bytes` past the first `total_bits` (the padding of the last byte) are
/// zero.
pub fn padding_is_zero(bytes: &[u8], total_bits: usize) -> bool {
    let r = total_bits % 8;
    r == 0 || bytes.last().is_none_or(|&last| last >> r == 0)
}
