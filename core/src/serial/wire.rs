//! Wire primitives: the common header, a bounds-checked reader, and bit-packing of residue rows.
//!
//! Everything here works on host bytes only; the CKKS-level encoders in the parent module move
//! polynomials across the backend boundary.

use crate::error::{Error, Result};
use crate::math::bits::{padding_is_zero, BitReader, BitWriter};
use alloc::vec::Vec;

/// The four magic bytes that open every Veil object.
pub const MAGIC: [u8; 4] = *b"VEIL";

/// The format version this build writes and reads. Version 3: seeds expand with AES-256 in
/// counter mode ([`crate::math::sampling::expand_uniform_row`]); version 2 expanded them with
/// ChaCha20, so a seeded object of version 2 would expand to other words. Since version 2, Galois
/// keys switch `s → σ_g^{-1}(s)` (the automorphism follows the key switch); version 1 keys
/// switched `σ_g(s) → s`.
pub const FORMAT_VERSION: u16 = 3;

/// Length of the common header: magic (4) + kind (1) + version (2) + parameter id (8).
pub const HEADER_LEN: usize = 15;

/// The kind of object a byte string holds (the fifth byte of the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ObjectKind {
    /// A [`crate::CkksParamsLiteral`] (postcard body).
    Params = 1,
    /// A [`crate::ckks::Ciphertext`].
    Ciphertext = 2,
    /// A [`crate::ckks::Plaintext`].
    Plaintext = 3,
    /// A [`crate::ckks::PublicKey`].
    PublicKey = 4,
    /// A [`crate::ckks::SwitchingKey`] (relinearization or Galois).
    SwitchingKey = 5,
    /// A set of [`crate::ckks::EvaluationKeys`].
    EvaluationKeys = 6,
    /// A [`crate::rlwe::LevelZeroKey`] (bootstrapping's encapsulation key).
    LevelZeroKey = 7,
}

impl ObjectKind {
    /// The kind for a header byte, if known.
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::Params,
            2 => Self::Ciphertext,
            3 => Self::Plaintext,
            4 => Self::PublicKey,
            5 => Self::SwitchingKey,
            6 => Self::EvaluationKeys,
            7 => Self::LevelZeroKey,
            _ => return None,
        })
    }
}

/// A decoded common header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the body holds.
    pub kind: ObjectKind,
    /// The format version (always [`FORMAT_VERSION`] once [`read_header`] accepted it).
    pub version: u16,
    /// [`crate::CkksParams::id`] of the parameters the object was made under.
    pub params_id: u64,
}

/// Decodes and checks the common header: magic, a known kind and the supported version.
/// Returns the header and the body that follows it.
///
/// Errors: [`Error::Malformed`] for a short input, a bad magic or an unknown kind;
/// [`Error::UnsupportedVersion`] for any version other than [`FORMAT_VERSION`].
pub fn read_header(bytes: &[u8]) -> Result<(Header, &[u8])> {
    if bytes.len() < HEADER_LEN {
        return Err(Error::Malformed("truncated header"));
    }
    if bytes[..4] != MAGIC {
        return Err(Error::Malformed("bad magic"));
    }
    let kind = ObjectKind::from_byte(bytes[4]).ok_or(Error::Malformed("unknown object kind"))?;
    let version = u16::from_le_bytes([bytes[5], bytes[6]]);
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&bytes[7..15]);
    Ok((
        Header {
            kind,
            version,
            params_id: u64::from_le_bytes(id),
        },
        &bytes[HEADER_LEN..],
    ))
}

/// [`read_header`], then checks the kind and the parameter id; returns the body.
pub(crate) fn expect_header(bytes: &[u8], kind: ObjectKind, params_id: u64) -> Result<&[u8]> {
    let (h, body) = read_header(bytes)?;
    if h.kind != kind {
        return Err(Error::Malformed("unexpected object kind"));
    }
    if h.params_id != params_id {
        return Err(Error::ParameterMismatch);
    }
    Ok(body)
}

/// Appends a header for `kind` under parameter id `params_id`.
pub(crate) fn write_header(out: &mut Vec<u8>, kind: ObjectKind, params_id: u64) {
    out.extend_from_slice(&MAGIC);
    out.push(kind as u8);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&params_id.to_le_bytes());
}

/// A cursor over untrusted bytes: every read is bounds-checked and fails with
/// [`Error::Malformed`] instead of panicking.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.buf.len() {
            return Err(Error::Malformed("truncated"));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub(crate) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }
    pub(crate) fn seed(&mut self) -> Result<[u8; 32]> {
        let mut a = [0u8; 32];
        a.copy_from_slice(self.take(32)?);
        Ok(a)
    }
    /// Fails unless every byte was consumed.
    pub(crate) fn finish(self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed("trailing bytes"))
        }
    }
}

/// Bits per coefficient of a row modulo `q`: `bits(q) = 64 - lzcnt(q)`.
pub fn row_bits(q: u64) -> u32 {
    64 - q.leading_zeros()
}

/// Bytes of one packed row of `n` coefficients modulo `q`.
pub fn packed_row_len(q: u64, n: usize) -> usize {
    (row_bits(q) as usize * n).div_ceil(8)
}

/// Appends `row` (values `< q`) packed at [`row_bits`]`(q)` bits each, little-endian bit order.
pub(crate) fn pack_row(out: &mut Vec<u8>, row: &[u64], q: u64) {
    let w = row_bits(q);
    out.reserve(packed_row_len(q, row.len()));
    let mut wr = BitWriter::appending(core::mem::take(out));
    for &x in row {
        debug_assert!(x < q);
        wr.push(x, w);
    }
    *out = wr.finish();
}

/// Unpacks `out.len()` coefficients modulo `q` from exactly [`packed_row_len`] bytes; refuses
/// values `≥ q` and non-zero padding bits.
pub(crate) fn unpack_row(bytes: &[u8], q: u64, out: &mut [u64]) -> Result<()> {
    if bytes.len() != packed_row_len(q, out.len()) {
        return Err(Error::Malformed("row length"));
    }
    let w = row_bits(q);
    let mut rd = BitReader::new(bytes);
    for o in out.iter_mut() {
        let v = rd.read(w);
        if v >= q {
            return Err(Error::Malformed("coefficient not reduced modulo its prime"));
        }
        *o = v;
    }
    if !padding_is_zero(bytes, out.len() * w as usize) {
        return Err(Error::Malformed("non-zero padding bits"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn pack_round_trip_and_refusals() {
        for &q in &[(1u64 << 40) + 1, 0x1fff_ffff_ffe0_0001, 1_048_583] {
            for n in [1usize, 3, 8, 17, 64] {
                let row: Vec<u64> = (0..n as u64)
                    .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)) % q)
                    .collect();
                let mut bytes = Vec::new();
                pack_row(&mut bytes, &row, q);
                assert_eq!(bytes.len(), packed_row_len(q, n));
                let mut back = vec![0u64; n];
                unpack_row(&bytes, q, &mut back).unwrap();
                assert_eq!(back, row);
                assert!(unpack_row(&bytes[..bytes.len() - 1], q, &mut back).is_err());
            }
            // q itself (and all ones) is refused.
            let mut bytes = Vec::new();
            pack_row(&mut bytes, &[0], q);
            let w = row_bits(q);
            let big = q.to_le_bytes();
            bytes.copy_from_slice(&big[..(w as usize).div_ceil(8)]);
            let mut out = [0u64];
            assert!(matches!(
                unpack_row(&bytes, q, &mut out),
                Err(Error::Malformed(_))
            ));
        }
    }
}
