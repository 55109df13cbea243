//! Dense bit packing of message payloads.
//!
//! Ring elements travel with exactly `ℓ` bits each, bits with one bit each,
//! so the byte counts reported by the engine are those of an optimal fixed
//! width encoding. Decoders check the exact length and that the padding bits
//! of the last byte are zero, and return [`MpcError::Malformed`] otherwise.

use crate::math::bits::padding_is_zero;
pub use crate::math::bits::{BitReader, BitWriter};
use crate::mpc::error::{Defect, MpcError, Result};
use crate::mpc::kind::MsgKind;
use alloc::vec::Vec;

/// The `Malformed` error of message `msg`.
pub(crate) fn malformed(msg: MsgKind, defect: Defect) -> MpcError {
    MpcError::Malformed { msg, defect }
}

/// `Err(Malformed{Length})` unless the payload has `expected` bytes.
pub(crate) fn check_len(msg: MsgKind, bytes: &[u8], expected: usize) -> Result<()> {
    if bytes.len() != expected {
        return Err(malformed(
            msg,
            Defect::Length {
                expected,
                found: bytes.len(),
            },
        ));
    }
    Ok(())
}

/// Length and zero padding of a payload of `total_bits` packed bits.
pub(crate) fn check_packed(msg: MsgKind, bytes: &[u8], total_bits: usize) -> Result<()> {
    check_len(msg, bytes, total_bits.div_ceil(8))?;
    if !padding_is_zero(bytes, total_bits) {
        return Err(malformed(msg, Defect::Padding));
    }
    Ok(())
}

/// A [`BitReader`] over a payload of `total_bits` packed bits, once its length and zero padding
/// are checked.
pub(crate) fn bit_reader(msg: MsgKind, bytes: &[u8], total_bits: usize) -> Result<BitReader<'_>> {
    check_packed(msg, bytes, total_bits)?;
    Ok(BitReader::new(bytes))
}

/// Bytes needed for `n` words of `bits` bits.
#[inline]
pub fn packed_len(n: usize, bits: u32) -> usize {
    (n * bits as usize).div_ceil(8)
}

/// Appends `words` (each `< 2^bits`, `bits ≤ 128`) to `out`, LSB first.
pub fn pack_into(out: &mut Vec<u8>, words: impl IntoIterator<Item = u128>, bits: u32) {
    let mut acc: u128 = 0;
    let mut nacc: u32 = 0;
    let m = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    for w in words {
        let w = w & m;
        // Push low bits first so the accumulator never overflows.
        let mut rem = bits;
        let mut w = w;
        while rem > 0 {
            let take = core::cmp::min(rem, 128 - nacc).min(64);
            let part = w & ((1u128 << take) - 1);
            acc |= part << nacc;
            nacc += take;
            w = if take >= 128 { 0 } else { w >> take };
            rem -= take;
            while nacc >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                nacc -= 8;
            }
        }
    }
    if nacc > 0 {
        out.push(acc as u8);
    }
}

/// Packs `u64` words of `bits ≤ 64` bits.
pub fn pack_u64(words: &[u64], bits: u32) -> Vec<u8> {
    if bits == 64 {
        let mut out = Vec::with_capacity(packed_len(words.len(), bits));
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        return out;
    }
    // 64 bits at a time through the accumulator of a `BitWriter` (fewer
    // pushes than the generic byte-wise `pack_into`; the same bytes).
    let mut wr = BitWriter::with_capacity_bits(words.len() * bits as usize);
    for &w in words {
        wr.push(w, bits);
    }
    wr.finish()
}

/// Packs `u128` words of `bits ≤ 128` bits.
pub fn pack_u128(words: &[u128], bits: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(packed_len(words.len(), bits));
    pack_into(&mut out, words.iter().copied(), bits);
    out
}

/// Packs bits (`0`/`1` bytes; only the low bit is used).
pub fn pack_bits(bits: &[u8]) -> Vec<u8> {
    let mut out = alloc::vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        out[i >> 3] |= (b & 1) << (i & 7);
    }
    out
}

/// Unpacks exactly `n` bits; `bytes` must have exactly `⌈n/8⌉` bytes.
pub fn unpack_bits(bytes: &[u8], n: usize, msg: MsgKind) -> Result<Vec<u8>> {
    check_packed(msg, bytes, n)?;
    Ok((0..n).map(|i| (bytes[i >> 3] >> (i & 7)) & 1).collect())
}

/// Unpacks exactly `n` words of `bits ≤ 128` bits.
pub fn unpack_u128(bytes: &[u8], n: usize, bits: u32, msg: MsgKind) -> Result<Vec<u128>> {
    check_packed(msg, bytes, n.saturating_mul(bits as usize))?;
    let m = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let mut out = Vec::with_capacity(n);
    let mut pos = 0usize; // bit position
    for _ in 0..n {
        let mut w: u128 = 0;
        let mut got = 0u32;
        while got < bits {
            let byte = bytes[pos >> 3] as u128;
            let off = (pos & 7) as u32;
            let take = core::cmp::min(8 - off, bits - got);
            let part = (byte >> off) & ((1u128 << take) - 1);
            w |= part << got;
            got += take;
            pos += take as usize;
        }
        out.push(w & m);
    }
    Ok(out)
}

/// Unpacks exactly `n` words of `bits ≤ 64` bits.
pub fn unpack_u64(bytes: &[u8], n: usize, bits: u32, msg: MsgKind) -> Result<Vec<u64>> {
    if bits == 64 {
        check_len(msg, bytes, n.saturating_mul(8))?;
        return Ok(bytes
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect());
    }
    let mut rd = bit_reader(msg, bytes, n.saturating_mul(bits as usize))?;
    Ok((0..n).map(|_| rd.read(bits)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    const K: MsgKind = MsgKind::Reveal;

    #[test]
    fn roundtrip() {
        for bits in [1u32, 3, 13, 43, 57, 60, 64] {
            let m = crate::mpc::ring::mask(bits);
            let w: Vec<u64> = (0..37u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & m)
                .collect();
            let p = pack_u64(&w, bits);
            assert_eq!(p.len(), packed_len(w.len(), bits));
            let mut generic = Vec::new();
            pack_into(&mut generic, w.iter().map(|&v| v as u128), bits);
            assert_eq!(p, generic, "bits {bits}");
            let mut bw = BitWriter::with_capacity_bits(w.len() * bits as usize);
            for &v in &w {
                bw.push(v, bits);
            }
            assert_eq!(bw.finish(), generic, "BitWriter bits {bits}");
            assert_eq!(unpack_u64(&p, w.len(), bits, K).unwrap(), w);
        }
        for bits in [84u32, 123, 128] {
            let m = if bits == 128 {
                u128::MAX
            } else {
                (1u128 << bits) - 1
            };
            let w: Vec<u128> = (0..19u128)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15_1234_5678_9ABC_DEF1) & m)
                .collect();
            assert_eq!(
                unpack_u128(&pack_u128(&w, bits), w.len(), bits, K).unwrap(),
                w
            );
        }
        let b = vec![1u8, 0, 1, 1, 0, 0, 0, 1, 1];
        assert_eq!(unpack_bits(&pack_bits(&b), 9, K).unwrap(), b);
        assert!(unpack_bits(&[0u8; 3], 9, K).is_err());
    }
}
