//! Versioned, compact byte formats for parameters, keys, ciphertexts and plaintexts.
//!
//! Decoding treats its input as hostile: every length is checked exactly against what the
//! parameters allow (a truncated or over-long input is refused, and nothing is allocated beyond
//! the size the parameters fix), every residue is checked to be reduced modulo its prime, and
//! every failure is a typed [`Error`] — decoders never panic.
//!
//! # Layout
//!
//! All integers are little-endian. Every object starts with the common header (15 bytes):
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 4 | magic `b"VEIL"` |
//! | 4 | 1 | object kind ([`ObjectKind`]: 1 params, 2 ciphertext, 3 plaintext, 4 public key, 5 switching key, 6 evaluation keys, 7 level-0 key) |
//! | 5 | 2 | format version `u16` (this build: [`FORMAT_VERSION`] = 3) |
//! | 7 | 8 | parameter id `u64` ([`CkksParams::id`]) |
//!
//! A bad magic or an unknown kind is [`Error::Malformed`]; another version is
//! [`Error::UnsupportedVersion`]; a parameter id other than the decoding context's is
//! [`Error::ParameterMismatch`].
//!
//! **Packed polynomial** over a basis of primes `m_0, …, m_{r-1}` (rows in basis order: the
//! ciphertext primes `q_0..q_l` first, then the special primes `p_0..p_{k-1}`): row `i` is its
//! `N` NTT-domain residues, each written on exactly `bits(m_i) = 64 - lzcnt(m_i)` bits in a
//! little-endian bit stream (bit `b` of the row is bit `b % 8` of byte `b / 8`), padded with zero
//! bits to a whole byte (never needed for `N ≥ 8`). A polynomial over `Q_l` thus costs
//! `Σ_{i≤l} bits(q_i)·N/8` bytes. Decoding refuses any residue `≥ m_i` and any non-zero padding.
//!
//! Bodies, after the header:
//!
//! * **Params** (kind 1): the [`CkksParamsLiteral`] in `postcard` encoding (at most
//!   [`MAX_PARAMS_BODY`] bytes, no trailing bytes). The decoder validates the literal and checks
//!   that its id equals the header's.
//! * **Ciphertext** (kind 2): `flags: u8` (bit 0 = seeded, other bits zero), `degree: u8` (1 or 2;
//!   1 when seeded), `level: u8` (`≤ L`), `log_slots: u8` (`slots = 2^log_slots ≤ N/2`),
//!   `scale: f64` (finite, `> 0`); when seeded, the 32-byte seed and the packed `c_0` over
//!   `Q_level` (the decoder regenerates `c_1 = expand_uniform(params, seed, 0, Q_level)`);
//!   otherwise the `degree + 1` packed polynomials `c_0, c_1[, c_2]` over `Q_level`.
//! * **Plaintext** (kind 3): `level: u8`, `log_slots: u8`, `scale: f64`, the packed polynomial
//!   over `Q_level`.
//! * **Public key** (kind 4): `flags: u8` (bit 0 = compressed), the 32-byte seed of `a`, packed `b`
//!   over `Q_L`, then — uncompressed only — packed `a` over `Q_L`. Compressed, the decoder
//!   regenerates `a = expand_uniform(params, seed, 0, Q_L)`.
//! * **Switching key** (kind 5): `flags: u8` (bit 0 = compressed), `dnum: u8` (must equal the
//!   parameters' `dnum`), the 32-byte seed, packed `b_0..b_{dnum-1}` over `Q_L ∪ P`, then —
//!   uncompressed only — packed `a_0..a_{dnum-1}`. Compressed, the decoder regenerates
//!   `a_j = expand_uniform(params, seed, j, Q_L ∪ P)`.
//! * **Evaluation keys** (kind 6): `flags: u8` (bit 0 = has a relinearization key),
//!   `count: u32` (Galois keys, `≤ N`), the relinearization key's switching-key body (no header)
//!   if present, then `count` entries `g: u64` (odd, `< 2N`, strictly increasing) followed by
//!   that Galois key's switching-key body.
//!
//! In uncompressed keys the seed still travels (so a decoded key can be re-encoded compressed);
//! the decoder does not check that `a` is its expansion.
//!
//! Secret keys have no format here on purpose.

mod wire;

pub use wire::{
    packed_row_len, read_header, row_bits, Header, ObjectKind, FORMAT_VERSION, HEADER_LEN, MAGIC,
};

use crate::backend::{Basis, PolyBackend};
use crate::ckks::Ckks;
use crate::error::{Error, Result};
use crate::params::{CkksParams, CkksParamsLiteral};
use crate::rlwe::{
    public_key_basis, Ciphertext, EvaluationKeys, LevelZeroKey, Plaintext, PublicKey, SwitchingKey,
};
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use wire::{expect_header, pack_row, unpack_row, write_header, Reader};

/// The largest parameter-literal body accepted (a literal is a few hundred bytes at most).
pub const MAX_PARAMS_BODY: usize = 4096;

const FLAG_SEEDED: u8 = 1;

/// Encodes a parameter set (its literal) with the common header.
pub fn params_to_bytes(params: &CkksParams) -> Result<Vec<u8>> {
    let body = postcard::to_allocvec(params.literal())
        .map_err(|_| Error::Malformed("parameter literal does not encode"))?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    write_header(&mut out, ObjectKind::Params, params.id());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decodes the literal of a parameter-set encoding, without validating it (no prime search, no
/// tables). Returns the header's parameter id with it.
pub fn params_literal_from_bytes(bytes: &[u8]) -> Result<(CkksParamsLiteral, u64)> {
    let (h, body) = read_header(bytes)?;
    if h.kind != ObjectKind::Params {
        return Err(Error::Malformed("unexpected object kind"));
    }
    if body.len() > MAX_PARAMS_BODY {
        return Err(Error::Malformed("parameter literal too long"));
    }
    let (lit, rest): (CkksParamsLiteral, &[u8]) =
        postcard::take_from_bytes(body).map_err(|_| Error::Malformed("parameter literal"))?;
    if !rest.is_empty() {
        return Err(Error::Malformed("trailing bytes"));
    }
    Ok((lit, h.params_id))
}

/// Decodes and validates a parameter set. Fails with the literal's validation error, or with
/// [`Error::ParameterMismatch`] if the validated set's id differs from the header's.
///
/// Validation searches primes and builds NTT tables (up to 80 primes at `N = 2^17`); to take
/// parameters from an untrusted peer, prefer [`params_from_bytes_expecting`], which refuses an
/// unexpected set before doing that work.
///
/// Bytes from a peer or a file choose the set's name, so a set named `INSECURE_*` (which skips the
/// 128-bit check) is refused here; use [`params_from_bytes_expecting`] for a set the caller already
/// uses, or [`params_from_bytes_allowing_insecure`] in tests.
pub fn params_from_bytes(bytes: &[u8]) -> Result<CkksParams> {
    params_from_bytes_inner(bytes, false)
}

/// [`params_from_bytes`] that also accepts `INSECURE_*` sets. For tests and local tooling only.
pub fn params_from_bytes_allowing_insecure(bytes: &[u8]) -> Result<CkksParams> {
    params_from_bytes_inner(bytes, true)
}

fn params_from_bytes_inner(bytes: &[u8], allow_insecure: bool) -> Result<CkksParams> {
    let (lit, id) = params_literal_from_bytes(bytes)?;
    if lit.is_insecure() && !allow_insecure {
        return Err(Error::InvalidParameters(
            "an INSECURE_ parameter set from bytes is refused",
        ));
    }
    let params = lit.validate()?;
    if params.id() != id {
        return Err(Error::ParameterMismatch);
    }
    Ok(params)
}

/// [`params_from_bytes`], refusing with [`Error::ParameterMismatch`] — before any validation
/// work — unless the header carries `expected_id`.
pub fn params_from_bytes_expecting(bytes: &[u8], expected_id: u64) -> Result<CkksParams> {
    let (h, _) = read_header(bytes)?;
    if h.kind == ObjectKind::Params && h.params_id != expected_id {
        return Err(Error::ParameterMismatch);
    }
    // The caller vouches for exactly this set (its id), insecure or not.
    params_from_bytes_inner(bytes, true)
}

/// Bytes of one packed polynomial over `basis` under `params`.
pub fn packed_poly_len(params: &CkksParams, basis: Basis) -> usize {
    basis_moduli(params, basis)
        .iter()
        .map(|&q| packed_row_len(q, params.n()))
        .sum()
}

/// The exact encoded size of a ciphertext of `degree` at `level` (seeded: `compressed` and
/// `degree == 1`).
pub fn ciphertext_len(params: &CkksParams, level: usize, degree: usize, compressed: bool) -> usize {
    let poly = packed_poly_len(params, Basis::q(level + 1));
    if compressed && degree == 1 {
        HEADER_LEN + 12 + 32 + poly
    } else {
        HEADER_LEN + 12 + (degree + 1) * poly
    }
}

/// The exact encoded size of one switching key.
pub fn switching_key_len(params: &CkksParams, compressed: bool) -> usize {
    let full = Basis::qp(params.max_level() + 1, params.p().len());
    let polys = if compressed { 1 } else { 2 } * params.dnum();
    HEADER_LEN + 2 + 32 + polys * packed_poly_len(params, full)
}

/// The exact encoded size of a public key (`compressed`: `a` written as its seed).
pub fn public_key_len(params: &CkksParams, compressed: bool) -> usize {
    let polys = if compressed { 1 } else { 2 };
    HEADER_LEN + 33 + polys * packed_poly_len(params, public_key_basis(params))
}

/// The exact encoded size of an evaluation-key set: a relinearization key when `relin`, and
/// `galois` Galois keys. A receiver that knows which keys a session needs bounds the frame by
/// it (uncompressed, the larger) before reading a byte of it.
pub fn evaluation_keys_len(
    params: &CkksParams,
    galois: usize,
    relin: bool,
    compressed: bool,
) -> usize {
    let body = switching_key_len(params, compressed) - HEADER_LEN;
    HEADER_LEN + 5 + usize::from(relin) * body + galois * (8 + body)
}

fn basis_moduli(params: &CkksParams, basis: Basis) -> Vec<u64> {
    let q_total = params.q().len();
    let all: Vec<u64> = params.all_moduli().map(|m| m.value()).collect();
    (0..basis.rows())
        .map(|r| all[basis.global_index(r, q_total)])
        .collect()
}

fn checked_slots(params: &CkksParams, log_slots: u8) -> Result<usize> {
    if log_slots as u32 >= params.log_n() {
        return Err(Error::Malformed("slot count above N/2"));
    }
    Ok(1usize << log_slots)
}

fn checked_scale(scale: f64) -> Result<f64> {
    if !scale.is_finite() || scale <= 0.0 {
        return Err(Error::Malformed("scale must be finite and positive"));
    }
    Ok(scale)
}

fn checked_level(params: &CkksParams, level: u8) -> Result<usize> {
    let level = level as usize;
    if level > params.max_level() {
        return Err(Error::Malformed("level above the parameters' top level"));
    }
    Ok(level)
}

fn log_slots_of(slots: usize) -> Result<u8> {
    if !slots.is_power_of_two() {
        return Err(Error::InvalidParameters("slot count is not a power of two"));
    }
    Ok(slots.trailing_zeros() as u8)
}

impl<B: PolyBackend> Ckks<B> {
    // ---- polynomials ------------------------------------------------------------------------

    fn write_poly(&self, out: &mut Vec<u8>, buf: &B::Buffer, basis: Basis) -> Result<()> {
        let be = self.backend();
        if be.buffer_rows(buf) < basis.rows() {
            return Err(Error::ParameterMismatch);
        }
        let n = self.params().n();
        let mut host = vec![0u64; basis.rows() * n];
        be.download(buf, &mut host)?;
        let moduli = basis_moduli(self.params(), basis);
        for (row, &q) in host.chunks_exact(n).zip(&moduli) {
            if row.iter().any(|&x| x >= q) {
                return Err(Error::Backend("buffer holds unreduced residues"));
            }
            pack_row(out, row, q);
        }
        Ok(())
    }

    fn read_poly(&self, r: &mut Reader<'_>, basis: Basis) -> Result<B::Buffer> {
        let n = self.params().n();
        let moduli = basis_moduli(self.params(), basis);
        let len: usize = moduli.iter().map(|&q| packed_row_len(q, n)).sum();
        // Take (and so bounds-check) the bytes before allocating anything.
        let bytes = r.take(len)?;
        let mut host = vec![0u64; basis.rows() * n];
        let mut off = 0;
        for (row, &q) in host.chunks_exact_mut(n).zip(&moduli) {
            let l = packed_row_len(q, n);
            unpack_row(&bytes[off..off + l], q, row)?;
            off += l;
        }
        Ok(self.backend().upload(&host))
    }

    fn expand(&self, seed: &[u8; 32], stream: u64, basis: Basis) -> B::Buffer {
        self.backend().expand_uniform(seed, stream, basis)
    }

    // ---- ciphertexts ------------------------------------------------------------------------

    /// Encodes a ciphertext. With `compressed` and a seeded ciphertext (a fresh
    /// [`Ckks::encrypt_sk`] output, see [`Ciphertext::is_seeded`]), `c_1` travels as its 32-byte
    /// seed (about half the size); otherwise every polynomial is written.
    pub fn serialize_ciphertext(&self, ct: &Ciphertext<B>, compressed: bool) -> Result<Vec<u8>> {
        let degree = ct.polys.len().wrapping_sub(1);
        if !(1..=2).contains(&degree) {
            return Err(Error::DegreeMismatch {
                found: degree,
                expected: 1,
            });
        }
        if ct.level > self.params().max_level() {
            return Err(Error::InvalidLevel {
                level: ct.level,
                max_level: self.params().max_level(),
            });
        }
        let seed = match ct.seed {
            Some(s) if compressed && degree == 1 => Some(s),
            _ => None,
        };
        let basis = Basis::q(ct.level + 1);
        let mut out = Vec::with_capacity(ciphertext_len(
            self.params(),
            ct.level,
            degree,
            seed.is_some(),
        ));
        write_header(&mut out, ObjectKind::Ciphertext, self.params().id());
        out.push(if seed.is_some() { FLAG_SEEDED } else { 0 });
        out.push(degree as u8);
        out.push(ct.level as u8);
        out.push(log_slots_of(ct.slots)?);
        out.extend_from_slice(&checked_scale(ct.scale)?.to_bits().to_le_bytes());
        if let Some(s) = seed {
            out.extend_from_slice(&s);
            self.write_poly(&mut out, &ct.polys[0], basis)?;
        } else {
            for p in &ct.polys {
                self.write_poly(&mut out, p, basis)?;
            }
        }
        Ok(out)
    }

    /// Decodes a ciphertext made under this context's parameters.
    pub fn deserialize_ciphertext(&self, bytes: &[u8]) -> Result<Ciphertext<B>> {
        let body = expect_header(bytes, ObjectKind::Ciphertext, self.params().id())?;
        let mut r = Reader::new(body);
        let flags = r.u8()?;
        if flags & !FLAG_SEEDED != 0 {
            return Err(Error::Malformed("unknown ciphertext flags"));
        }
        let seeded = flags & FLAG_SEEDED != 0;
        let degree = r.u8()? as usize;
        if !(1..=2).contains(&degree) || (seeded && degree != 1) {
            return Err(Error::Malformed("ciphertext degree"));
        }
        let level = checked_level(self.params(), r.u8()?)?;
        let slots = checked_slots(self.params(), r.u8()?)?;
        let scale = checked_scale(r.f64()?)?;
        let basis = Basis::q(level + 1);
        let (polys, seed) = if seeded {
            let seed = r.seed()?;
            let c0 = self.read_poly(&mut r, basis)?;
            r.finish()?;
            (vec![c0, self.expand(&seed, 0, basis)], Some(seed))
        } else {
            // Check the exact length before decoding any polynomial.
            if r.remaining() != (degree + 1) * packed_poly_len(self.params(), basis) {
                return Err(Error::Malformed("ciphertext length"));
            }
            let polys = (0..=degree)
                .map(|_| self.read_poly(&mut r, basis))
                .collect::<Result<Vec<_>>>()?;
            r.finish()?;
            (polys, None)
        };
        Ok(Ciphertext {
            params_id: self.params().id(),
            polys,
            level,
            scale,
            slots,
            seed,
        })
    }

    // ---- plaintexts -------------------------------------------------------------------------

    /// Encodes a plaintext (its NTT-domain polynomial over `Q_level`).
    pub fn serialize_plaintext(&self, pt: &Plaintext<B>) -> Result<Vec<u8>> {
        if pt.level > self.params().max_level() {
            return Err(Error::InvalidLevel {
                level: pt.level,
                max_level: self.params().max_level(),
            });
        }
        let basis = Basis::q(pt.level + 1);
        let mut out = Vec::with_capacity(HEADER_LEN + 10 + packed_poly_len(self.params(), basis));
        write_header(&mut out, ObjectKind::Plaintext, self.params().id());
        out.push(pt.level as u8);
        out.push(log_slots_of(pt.slots)?);
        out.extend_from_slice(&checked_scale(pt.scale)?.to_bits().to_le_bytes());
        self.write_poly(&mut out, &pt.poly, basis)?;
        Ok(out)
    }

    /// Decodes a plaintext made under this context's parameters.
    pub fn deserialize_plaintext(&self, bytes: &[u8]) -> Result<Plaintext<B>> {
        let body = expect_header(bytes, ObjectKind::Plaintext, self.params().id())?;
        let mut r = Reader::new(body);
        let level = checked_level(self.params(), r.u8()?)?;
        let slots = checked_slots(self.params(), r.u8()?)?;
        let scale = checked_scale(r.f64()?)?;
        let poly = self.read_poly(&mut r, Basis::q(level + 1))?;
        r.finish()?;
        Ok(self.rlwe.plaintext(poly, level, scale, slots))
    }

    // ---- public keys ------------------------------------------------------------------------

    /// Encodes a public key; `compressed` writes `a` as its seed.
    pub fn serialize_public_key(&self, pk: &PublicKey<B>, compressed: bool) -> Result<Vec<u8>> {
        if pk.params_id != self.params().id() {
            return Err(Error::ParameterMismatch);
        }
        let basis = public_key_basis(self.params());
        self.write_seeded_pair(
            ObjectKind::PublicKey,
            [&pk.b, &pk.a],
            &pk.seed,
            basis,
            compressed,
        )
    }

    /// Decodes a public key made under this context's parameters.
    pub fn deserialize_public_key(&self, bytes: &[u8]) -> Result<PublicKey<B>> {
        let basis = public_key_basis(self.params());
        let (b, a, seed) = self.read_seeded_pair(bytes, ObjectKind::PublicKey, basis)?;
        Ok(PublicKey {
            b,
            a,
            seed,
            params_id: self.params().id(),
        })
    }

    /// `kind`'s header, a flag byte, `seed`, then `b` and (unless `compressed`: the seed's
    /// expansion, stream 0) `a` over `basis`.
    fn write_seeded_pair(
        &self,
        kind: ObjectKind,
        [b, a]: [&B::Buffer; 2],
        seed: &[u8; 32],
        basis: Basis,
        compressed: bool,
    ) -> Result<Vec<u8>> {
        let polys = if compressed { 1 } else { 2 };
        let mut out =
            Vec::with_capacity(HEADER_LEN + 33 + polys * packed_poly_len(self.params(), basis));
        write_header(&mut out, kind, self.params().id());
        out.push(if compressed { FLAG_SEEDED } else { 0 });
        out.extend_from_slice(seed);
        self.write_poly(&mut out, b, basis)?;
        if !compressed {
            self.write_poly(&mut out, a, basis)?;
        }
        Ok(out)
    }

    /// Reads what [`Ckks::write_seeded_pair`] wrote: `(b, a, seed)`.
    fn read_seeded_pair(
        &self,
        bytes: &[u8],
        kind: ObjectKind,
        basis: Basis,
    ) -> Result<(B::Buffer, B::Buffer, [u8; 32])> {
        let body = expect_header(bytes, kind, self.params().id())?;
        let mut r = Reader::new(body);
        let flags = r.u8()?;
        if flags & !FLAG_SEEDED != 0 {
            return Err(Error::Malformed("unknown key flags"));
        }
        let compressed = flags & FLAG_SEEDED != 0;
        let polys = if compressed { 1 } else { 2 };
        if r.remaining() != 32 + polys * packed_poly_len(self.params(), basis) {
            return Err(Error::Malformed("key length"));
        }
        let seed = r.seed()?;
        let b = self.read_poly(&mut r, basis)?;
        let a = if compressed {
            self.expand(&seed, 0, basis)
        } else {
            self.read_poly(&mut r, basis)?
        };
        r.finish()?;
        Ok((b, a, seed))
    }

    // ---- level-0 keys -----------------------------------------------------------------------

    /// Encodes a level-0 key (bootstrapping's encapsulation key, over `{q_0, p_0}`); with
    /// `compressed`, `a` travels as its seed.
    pub fn serialize_level_zero_key(
        &self,
        key: &LevelZeroKey<B>,
        compressed: bool,
    ) -> Result<Vec<u8>> {
        if key.params_id != self.params().id() {
            return Err(Error::ParameterMismatch);
        }
        let (pair, basis) = ([&key.b, &key.a], Basis::qp(1, 1));
        self.write_seeded_pair(ObjectKind::LevelZeroKey, pair, &key.seed, basis, compressed)
    }

    /// Decodes a level-0 key made under this context's parameters.
    pub fn deserialize_level_zero_key(&self, bytes: &[u8]) -> Result<LevelZeroKey<B>> {
        let (b, a, seed) =
            self.read_seeded_pair(bytes, ObjectKind::LevelZeroKey, Basis::qp(1, 1))?;
        Ok(LevelZeroKey {
            b,
            a,
            seed,
            params_id: self.params().id(),
        })
    }

    // ---- switching keys ---------------------------------------------------------------------

    fn key_basis(&self) -> Basis {
        Basis::qp(self.params().max_level() + 1, self.params().p().len())
    }

    fn switching_key_body_len(&self, compressed: bool) -> usize {
        let polys = if compressed { 1 } else { 2 } * self.params().dnum();
        2 + 32 + polys * packed_poly_len(self.params(), self.key_basis())
    }

    fn write_switching_key_body(
        &self,
        out: &mut Vec<u8>,
        key: &SwitchingKey<B>,
        compressed: bool,
    ) -> Result<()> {
        let dnum = self.params().dnum();
        let a_ok = key.a.len() == dnum || key.is_lean();
        if key.params_id != self.params().id() || key.b.len() != dnum || !a_ok {
            return Err(Error::ParameterMismatch);
        }
        let basis = self.key_basis();
        out.reserve(self.switching_key_body_len(compressed));
        out.push(if compressed { FLAG_SEEDED } else { 0 });
        out.push(dnum as u8);
        out.extend_from_slice(&key.seed);
        for b in &key.b {
            self.write_poly(out, b, basis)?;
        }
        if !compressed {
            for j in 0..dnum {
                match key.a.get(j) {
                    Some(a) => self.write_poly(out, a, basis)?,
                    None => {
                        self.write_poly(out, &self.expand(&key.seed, j as u64, basis), basis)?
                    }
                }
            }
        }
        Ok(())
    }

    fn read_switching_key_body(&self, r: &mut Reader<'_>) -> Result<SwitchingKey<B>> {
        let flags = r.u8()?;
        if flags & !FLAG_SEEDED != 0 {
            return Err(Error::Malformed("unknown switching-key flags"));
        }
        let compressed = flags & FLAG_SEEDED != 0;
        let dnum = self.params().dnum();
        if r.u8()? as usize != dnum {
            return Err(Error::Malformed("switching key digit count"));
        }
        if r.remaining() < self.switching_key_body_len(compressed) - 2 {
            return Err(Error::Malformed("truncated"));
        }
        let seed = r.seed()?;
        let basis = self.key_basis();
        let b = (0..dnum)
            .map(|_| self.read_poly(r, basis))
            .collect::<Result<Vec<_>>>()?;
        let a = (0..dnum)
            .map(|j| {
                if compressed {
                    Ok(self.expand(&seed, j as u64, basis))
                } else {
                    self.read_poly(r, basis)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SwitchingKey {
            b,
            a,
            seed,
            params_id: self.params().id(),
        })
    }

    /// Encodes one switching key (relinearization or Galois); `compressed` writes every `a_j`
    /// as the shared seed.
    pub fn serialize_switching_key(
        &self,
        key: &SwitchingKey<B>,
        compressed: bool,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.switching_key_body_len(compressed));
        write_header(&mut out, ObjectKind::SwitchingKey, self.params().id());
        self.write_switching_key_body(&mut out, key, compressed)?;
        Ok(out)
    }

    /// Decodes one switching key made under this context's parameters.
    pub fn deserialize_switching_key(&self, bytes: &[u8]) -> Result<SwitchingKey<B>> {
        let body = expect_header(bytes, ObjectKind::SwitchingKey, self.params().id())?;
        let mut r = Reader::new(body);
        let key = self.read_switching_key_body(&mut r)?;
        r.finish()?;
        Ok(key)
    }

    // ---- evaluation keys --------------------------------------------------------------------

    /// Encodes a set of evaluation keys (relinearization key and Galois keys).
    pub fn serialize_evaluation_keys(
        &self,
        keys: &EvaluationKeys<B>,
        compressed: bool,
    ) -> Result<Vec<u8>> {
        let count = keys.galois.len() + keys.relin.is_some() as usize;
        let mut out = Vec::with_capacity(
            HEADER_LEN + 5 + count * (8 + self.switching_key_body_len(compressed)),
        );
        write_header(&mut out, ObjectKind::EvaluationKeys, self.params().id());
        out.push(keys.relin.is_some() as u8);
        let two_n = 2 * self.params().n() as u64;
        if keys.galois.keys().any(|&g| g % 2 == 0 || g >= two_n) {
            return Err(Error::InvalidParameters(
                "Galois elements are odd and below 2N",
            ));
        }
        out.extend_from_slice(&(keys.galois.len() as u32).to_le_bytes());
        if let Some(k) = &keys.relin {
            self.write_switching_key_body(&mut out, k, compressed)?;
        }
        for (&g, k) in &keys.galois {
            out.extend_from_slice(&g.to_le_bytes());
            self.write_switching_key_body(&mut out, k, compressed)?;
        }
        Ok(out)
    }

    /// Decodes a set of evaluation keys made under this context's parameters.
    pub fn deserialize_evaluation_keys(&self, bytes: &[u8]) -> Result<EvaluationKeys<B>> {
        let body = expect_header(bytes, ObjectKind::EvaluationKeys, self.params().id())?;
        let mut r = Reader::new(body);
        let flags = r.u8()?;
        if flags > 1 {
            return Err(Error::Malformed("unknown evaluation-key flags"));
        }
        let count = r.u32()? as usize;
        let n = self.params().n();
        // Each key takes at least a compressed body; refuse impossible counts up front.
        let min = self.switching_key_body_len(true);
        if count > n || (count + flags as usize).saturating_mul(min) > r.remaining() {
            return Err(Error::Malformed("Galois key count"));
        }
        let relin = if flags == 1 {
            Some(self.read_switching_key_body(&mut r)?)
        } else {
            None
        };
        let two_n = 2 * n as u64;
        let mut galois = BTreeMap::new();
        let mut last = 0u64;
        for _ in 0..count {
            let g = r.u64()?;
            if g % 2 == 0 || g >= two_n || g <= last {
                return Err(Error::Malformed(
                    "Galois elements must be odd, below 2N and strictly increasing",
                ));
            }
            last = g;
            galois.insert(g, self.read_switching_key_body(&mut r)?);
        }
        r.finish()?;
        Ok(EvaluationKeys { relin, galois })
    }
}
