//! The session's own frames (see the table in [`super`]): the client's [`Hello`], the server's
//! [`Accept`] or [`Refusal`], and the model fingerprint. Every decoder is total over hostile
//! bytes: exact lengths, range-checked fields, a typed [`DecodeError`].

use sha2::{Digest, Sha256};
use veil_core::bert::{Blocks, EncoderConfig, SEQ_LENS};
use veil_core::mpc::kind::HostKind;
use veil_core::nonlinear::gelu::{GeluKind, GeluSplit};
use veil_core::nonlinear::layernorm::LnKind;
use veil_core::nonlinear::softmax::SoftmaxKind;
use veil_core::transformer::OpCounts;

/// The client's request to open a session.
pub const TAG_HELLO: u16 = HostKind::BertHello.tag();
/// The server accepts the request.
pub const TAG_ACCEPT: u16 = HostKind::BertAccept.tag();
/// The server refuses the request (payload: reason code and text).
pub const TAG_REFUSE: u16 = HostKind::BertRefuse.tag();
/// The server's per-block report after a finished run (public operation counts and its wall
/// times).
pub const TAG_REPORT: u16 = HostKind::BertReport.tag();

/// Version of the session protocol this build speaks. 2: the C2M boundaries end with the local
/// truncation, without the exact rounding's messages (`C2mPlan::local_rounding`). 3: the
/// [`Accept`] carries the nonlinear blocks the server serves, and the client plans with them.
pub const SESSION_VERSION: u16 = 3;
/// Length of an encoded [`Hello`].
pub const HELLO_LEN: usize = 2 + 32 + 8 + 4 + 4;
/// Length of encoded [`Blocks`]: softmax `u8 ‖ f64 ‖ f64`, LayerNorm `u8 ‖ f64 ‖ f64`, GELU
/// `u8`, split `u8`.
pub const BLOCKS_LEN: usize = 2 * (1 + 16) + 2;
/// Length of an encoded [`Accept`].
pub const ACCEPT_LEN: usize = 2 + BLOCKS_LEN;
/// The longest refusal text accepted, in bytes.
pub const MAX_REFUSE_TEXT: usize = 1024;
/// The most blocks a report may carry.
pub const MAX_REPORT_BLOCKS: usize = 4096;
/// The longest block name a report may carry, in bytes.
pub const MAX_BLOCK_NAME: usize = 64;

/// Why a payload did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The payload is not the message's exact length.
    Length {
        /// The length the message has (or, for a refusal, its header announces).
        expected: usize,
        /// The payload's length.
        found: usize,
    },
    /// A refusal carries a reason code this build does not know.
    UnknownReason(u16),
    /// A refusal's text is longer than [`MAX_REFUSE_TEXT`].
    TextTooLong(usize),
    /// A refusal's text is not UTF-8.
    TextNotUtf8,
    /// A report announces more than [`MAX_REPORT_BLOCKS`] blocks.
    TooManyBlocks(usize),
    /// A report's block name is empty, longer than [`MAX_BLOCK_NAME`] or not printable ASCII.
    BadBlockName,
    /// A report's wall time is negative or not finite.
    BadWallTime,
    /// An accept's blocks carry an unknown kind, a constant that is not finite, or a constant
    /// where the kind has none (the encoding is canonical).
    BadBlocks(&'static str),
    /// A field holds a value its message does not allow (e.g. a flag byte other than 0 or 1).
    BadValue(&'static str),
    /// An accept of another protocol version than this build's [`SESSION_VERSION`] (its
    /// fields may mean something else).
    OtherVersion(u16),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Length { expected, found } => {
                write!(f, "payload of {found} bytes, expected {expected}")
            }
            DecodeError::UnknownReason(c) => write!(f, "unknown refusal code {c}"),
            DecodeError::TextTooLong(n) => {
                write!(f, "refusal text of {n} bytes exceeds {MAX_REFUSE_TEXT}")
            }
            DecodeError::TextNotUtf8 => write!(f, "refusal text is not UTF-8"),
            DecodeError::TooManyBlocks(n) => {
                write!(f, "a report of {n} blocks exceeds {MAX_REPORT_BLOCKS}")
            }
            DecodeError::BadBlockName => write!(f, "bad block name in a report"),
            DecodeError::BadWallTime => write!(f, "bad wall time in a report"),
            DecodeError::BadBlocks(why) => write!(f, "bad nonlinear blocks: {why}"),
            DecodeError::BadValue(why) => write!(f, "bad value: {why}"),
            DecodeError::OtherVersion(v) => {
                write!(f, "version {v}, this build speaks {SESSION_VERSION}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// The client's opening request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The session protocol version ([`SESSION_VERSION`]).
    pub version: u16,
    /// [`fingerprint`] of the architecture the client expects.
    pub fingerprint: [u8; 32],
    /// The id of the validated CKKS parameter set the client will use
    /// ([`veil_core::params::CkksParams::id`]).
    pub params_id: u64,
    /// Padded sequence length (one of [`SEQ_LENS`]).
    pub m: u32,
    /// Non-padding tokens, `1..=m`.
    pub valid: u32,
}

impl Hello {
    /// `version u16 ‖ fingerprint [32] ‖ params_id u64 ‖ m u32 ‖ valid u32`, little-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HELLO_LEN);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.fingerprint);
        out.extend_from_slice(&self.params_id.to_le_bytes());
        out.extend_from_slice(&self.m.to_le_bytes());
        out.extend_from_slice(&self.valid.to_le_bytes());
        out
    }

    /// The version field alone, if the payload has one: a server reads it first, so that a
    /// client of another version (whose Hello may have another length) is refused as such.
    pub fn peek_version(b: &[u8]) -> Option<u16> {
        Some(u16::from_le_bytes(b.get(..2)?.try_into().ok()?))
    }

    /// Decodes exactly [`HELLO_LEN`] bytes. The field values are checked by the server
    /// ([`Hello::check_lengths`] and its own comparisons), not here.
    pub fn decode(b: &[u8]) -> Result<Hello, DecodeError> {
        let b: &[u8; HELLO_LEN] = b.try_into().map_err(|_| DecodeError::Length {
            expected: HELLO_LEN,
            found: b.len(),
        })?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut fingerprint = [0u8; 32];
        fingerprint.copy_from_slice(&b[2..34]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[34..42]);
        Ok(Hello {
            version: u16::from_le_bytes([b[0], b[1]]),
            fingerprint,
            params_id: u64::from_le_bytes(id),
            m: u32_at(42),
            valid: u32_at(46),
        })
    }

    /// Checks `m` is a supported length and `1 ≤ valid ≤ m`; the text of a
    /// [`RefuseCode::BadLength`] refusal otherwise.
    pub fn check_lengths(&self) -> Result<(usize, usize), String> {
        let (m, valid) = (self.m as usize, self.valid as usize);
        if !SEQ_LENS.contains(&m) {
            return Err(format!(
                "sequence length {m} is not one of {SEQ_LENS:?} tokens"
            ));
        }
        if valid == 0 || valid > m {
            return Err(format!("{valid} valid tokens do not fit 1..={m}"));
        }
        Ok((m, valid))
    }
}

impl crate::serve::HelloMessage for Hello {
    const TAG: u16 = TAG_HELLO;
    const VERSION: u16 = SESSION_VERSION;
    const NAME: &'static str = "hello";
    type Error = DecodeError;
    fn peek_version(payload: &[u8]) -> Option<u16> {
        Hello::peek_version(payload)
    }
    fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        Hello::decode(payload)
    }
}

/// The server's acceptance: the session continues with the key exchange, planned with the
/// server's nonlinear blocks. They are public (part of the served model's architecture, like
/// its shape); the client adopts them and reports them beside its result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Accept {
    /// The server's session protocol version.
    pub version: u16,
    /// The nonlinear blocks of the session ([`Blocks::EXACT`]: the checkpoint's functions).
    pub blocks: Blocks,
}

impl Accept {
    /// `version u16 ‖ blocks` ([`encode_blocks`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.version.to_le_bytes().to_vec();
        out.extend_from_slice(&encode_blocks(&self.blocks));
        out
    }

    /// Decodes exactly [`ACCEPT_LEN`] bytes. Whether the blocks fit a session (their ranges and
    /// constants) is checked when the client plans with them, a typed error too.
    pub fn decode(b: &[u8]) -> Result<Accept, DecodeError> {
        let b: &[u8; ACCEPT_LEN] = b.try_into().map_err(|_| DecodeError::Length {
            expected: ACCEPT_LEN,
            found: b.len(),
        })?;
        Ok(Accept {
            version: u16::from_le_bytes([b[0], b[1]]),
            blocks: decode_blocks(&b[2..])?,
        })
    }
}

/// The wire form of [`Blocks`] ([`BLOCKS_LEN`] bytes, little-endian):
/// `softmax u8 (0 accurate, 1 MBMax) ‖ c f64 ‖ R_d f64 ‖ layernorm u8 (0 accurate, 1 MBLN) ‖
/// l f64 ‖ R_d f64 ‖ gelu u8 (0 erf, 1 BOLT, 2 tanh) ‖ split u8 (0 all in MPC, 1 CKKS
/// candidates)`. An accurate kind's two constants are zero.
pub fn encode_blocks(b: &Blocks) -> [u8; BLOCKS_LEN] {
    let mut out = [0u8; BLOCKS_LEN];
    let (sk, s0, s1) = match b.softmax {
        SoftmaxKind::Accurate => (0u8, 0.0, 0.0),
        SoftmaxKind::MbMax { c, rd } => (1, c, rd),
    };
    let (lk, l0, l1) = match b.layernorm {
        LnKind::Accurate => (0u8, 0.0, 0.0),
        LnKind::Mbln { l, rd } => (1, l, rd),
        // Not a BERT block: a session never chooses it, and the decoder refuses code 2.
        LnKind::Rms => (2, 0.0, 0.0),
    };
    out[0] = sk;
    out[1..9].copy_from_slice(&f64::to_le_bytes(s0));
    out[9..17].copy_from_slice(&f64::to_le_bytes(s1));
    out[17] = lk;
    out[18..26].copy_from_slice(&f64::to_le_bytes(l0));
    out[26..34].copy_from_slice(&f64::to_le_bytes(l1));
    out[34] = match b.gelu {
        GeluKind::Erf => 0,
        GeluKind::Bolt => 1,
        GeluKind::Tanh => 2,
    };
    out[35] = match b.gelu_split {
        GeluSplit::AllMpc => 0,
        GeluSplit::CkksCandidates => 1,
    };
    out
}

/// Decodes exactly [`BLOCKS_LEN`] bytes of [`encode_blocks`]: known kinds, finite constants,
/// zero constants for the accurate kinds.
pub fn decode_blocks(b: &[u8]) -> Result<Blocks, DecodeError> {
    let b: &[u8; BLOCKS_LEN] = b.try_into().map_err(|_| DecodeError::Length {
        expected: BLOCKS_LEN,
        found: b.len(),
    })?;
    let f = |i: usize| -> Result<f64, DecodeError> {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        let v = f64::from_le_bytes(w);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(DecodeError::BadBlocks("a constant is not finite"))
        }
    };
    let (s0, s1, l0, l1) = (f(1)?, f(9)?, f(18)?, f(26)?);
    let zero = |a: f64, b: f64| a.to_bits() == 0 && b.to_bits() == 0;
    let softmax = match b[0] {
        0 if zero(s0, s1) => SoftmaxKind::Accurate,
        0 => return Err(DecodeError::BadBlocks("accurate softmax with constants")),
        1 => SoftmaxKind::MbMax { c: s0, rd: s1 },
        _ => return Err(DecodeError::BadBlocks("unknown softmax kind")),
    };
    let layernorm = match b[17] {
        0 if zero(l0, l1) => LnKind::Accurate,
        0 => return Err(DecodeError::BadBlocks("accurate LayerNorm with constants")),
        1 => LnKind::Mbln { l: l0, rd: l1 },
        _ => return Err(DecodeError::BadBlocks("unknown LayerNorm kind")),
    };
    let gelu = match b[34] {
        0 => GeluKind::Erf,
        1 => GeluKind::Bolt,
        2 => GeluKind::Tanh,
        _ => return Err(DecodeError::BadBlocks("unknown GELU kind")),
    };
    let gelu_split = match b[35] {
        0 => GeluSplit::AllMpc,
        1 => GeluSplit::CkksCandidates,
        _ => return Err(DecodeError::BadBlocks("unknown GELU placement")),
    };
    Ok(Blocks {
        softmax,
        layernorm,
        gelu,
        gelu_split,
    })
}

/// The blocks in words, for reports: `"softmax accurate, LayerNorm accurate, GELU erf in MPC"`.
pub fn describe_blocks(b: &Blocks) -> String {
    let softmax = match b.softmax {
        SoftmaxKind::Accurate => "accurate".to_string(),
        SoftmaxKind::MbMax { c, rd } => format!("MBMax (c = {c}, R_d = {rd:e})"),
    };
    let ln = match b.layernorm {
        LnKind::Accurate => "accurate".to_string(),
        LnKind::Mbln { l, rd } => format!("MBLN (l = {l}, R_d = {rd})"),
        LnKind::Rms => "RMSNorm".to_string(),
    };
    let gelu = match b.gelu {
        GeluKind::Erf => "erf",
        GeluKind::Bolt => "BOLT",
        GeluKind::Tanh => "tanh",
    };
    let place = match b.gelu_split {
        GeluSplit::AllMpc => "in MPC",
        GeluSplit::CkksCandidates => "split (candidates in CKKS, select in MPC)",
    };
    format!("softmax {softmax}, LayerNorm {ln}, GELU {gelu} {place}")
}

/// The session GELU of a command-line name: `erf` (the checkpoint's, all in MPC), `bolt`
/// (BOLT's quartic in MPC) or `bolt-split` (BOLT's with EncFormer's split); softmax and
/// LayerNorm stay accurate. `None` for another name.
pub fn gelu_blocks(name: &str) -> Option<Blocks> {
    let (gelu, gelu_split) = match name {
        "erf" => (GeluKind::Erf, GeluSplit::AllMpc),
        "bolt" => (GeluKind::Bolt, GeluSplit::AllMpc),
        "bolt-split" => (GeluKind::Bolt, GeluSplit::CkksCandidates),
        _ => return None,
    };
    Some(Blocks {
        gelu,
        gelu_split,
        ..Blocks::EXACT
    })
}

/// Why a server refused a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefuseCode {
    /// The client speaks another session protocol version.
    UnsupportedVersion,
    /// The client's model fingerprint is not the served model's.
    OtherModel,
    /// The client's CKKS parameter set is not the one the server uses for this shape.
    OtherParams,
    /// The sequence length or the valid-token count is out of range.
    BadLength,
    /// The server is at its client limit.
    Busy,
    /// The request did not decode.
    Malformed,
    /// The server cannot plan or run this request (its own failure, not the client's).
    Unavailable,
}

impl RefuseCode {
    /// Every code, in wire order.
    pub const ALL: [RefuseCode; 7] = [
        RefuseCode::UnsupportedVersion,
        RefuseCode::OtherModel,
        RefuseCode::OtherParams,
        RefuseCode::BadLength,
        RefuseCode::Busy,
        RefuseCode::Malformed,
        RefuseCode::Unavailable,
    ];

    /// The wire value.
    pub fn code(self) -> u16 {
        match self {
            RefuseCode::UnsupportedVersion => 1,
            RefuseCode::OtherModel => 2,
            RefuseCode::OtherParams => 3,
            RefuseCode::BadLength => 4,
            RefuseCode::Busy => 5,
            RefuseCode::Malformed => 6,
            RefuseCode::Unavailable => 7,
        }
    }

    /// The code of a wire value.
    pub fn from_code(c: u16) -> Option<RefuseCode> {
        RefuseCode::ALL.into_iter().find(|r| r.code() == c)
    }
}

impl std::fmt::Display for RefuseCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RefuseCode::UnsupportedVersion => "unsupported protocol version",
            RefuseCode::OtherModel => "another model",
            RefuseCode::OtherParams => "other CKKS parameters",
            RefuseCode::BadLength => "bad sequence length",
            RefuseCode::Busy => "server busy",
            RefuseCode::Malformed => "malformed request",
            RefuseCode::Unavailable => "request unavailable",
        })
    }
}

/// A refusal: its code and a human-readable text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why.
    pub code: RefuseCode,
    /// Details (at most [`MAX_REFUSE_TEXT`] bytes of UTF-8 on the wire).
    pub text: String,
}

impl Refusal {
    /// A refusal with `text`.
    pub fn new(code: RefuseCode, text: impl Into<String>) -> Self {
        Refusal {
            code,
            text: text.into(),
        }
    }

    /// `code u16 ‖ text_len u16 ‖ text[text_len]` (UTF-8; a longer text is cut at a character
    /// boundary to fit [`MAX_REFUSE_TEXT`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut end = self.text.len().min(MAX_REFUSE_TEXT);
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let text = &self.text.as_bytes()[..end];
        let mut out = Vec::with_capacity(4 + text.len());
        out.extend_from_slice(&self.code.code().to_le_bytes());
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
        out.extend_from_slice(text);
        out
    }

    /// Decodes a refusal: exactly `4 + text_len` bytes, a known code, UTF-8 text.
    pub fn decode(b: &[u8]) -> Result<Refusal, DecodeError> {
        if b.len() < 4 {
            return Err(DecodeError::Length {
                expected: 4,
                found: b.len(),
            });
        }
        let code = u16::from_le_bytes([b[0], b[1]]);
        let n = u16::from_le_bytes([b[2], b[3]]) as usize;
        if n > MAX_REFUSE_TEXT {
            return Err(DecodeError::TextTooLong(n));
        }
        if b.len() != 4 + n {
            return Err(DecodeError::Length {
                expected: 4 + n,
                found: b.len(),
            });
        }
        let code = RefuseCode::from_code(code).ok_or(DecodeError::UnknownReason(code))?;
        let text = std::str::from_utf8(&b[4..])
            .map_err(|_| DecodeError::TextNotUtf8)?
            .to_owned();
        Ok(Refusal { code, text })
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.text.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.text)
        }
    }
}

/// One block of the server's report: what the server's side of the block cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportBlock {
    /// Layer index (`u32::MAX` for the head and the blocks after the last layer).
    pub layer: u32,
    /// Block name.
    pub block: String,
    /// The server's CKKS operations in the block.
    pub ckks: OpCounts,
    /// Ciphertexts converted.
    pub converted_cts: u64,
    /// Ciphertext bytes carried by the conversion.
    pub converted_bytes: u64,
    /// MPC bytes sent + received by the server.
    pub mpc_bytes: u64,
    /// MPC rounds.
    pub mpc_rounds: u64,
    /// The server's wall time of the block, seconds.
    pub wall_s: f64,
}

const OPS: usize = 12;
const RECORD_FIXED: usize = 4 + 1 + 8 * OPS + 8 * 4 + 8;

fn ops_to_array(c: &OpCounts) -> [u64; OPS] {
    [
        c.rotations,
        c.conjugations,
        c.ct_mults,
        c.relins,
        c.pt_mults,
        c.mul_i,
        c.rescales,
        c.hoists,
        c.adds,
        c.lazy_rotations,
        c.lazy_groups,
        c.repacks,
    ]
}

fn ops_from_array(a: [u64; OPS]) -> OpCounts {
    OpCounts {
        rotations: a[0],
        conjugations: a[1],
        ct_mults: a[2],
        relins: a[3],
        pt_mults: a[4],
        // Not carried on the wire: the Transformer path issues no constant multiply-accumulates.
        const_mults: 0,
        mul_i: a[5],
        rescales: a[6],
        hoists: a[7],
        adds: a[8],
        lazy_rotations: a[9],
        lazy_groups: a[10],
        repacks: a[11],
    }
}

/// Encodes a report: `count u32`, then per block `layer u32 ‖ name_len u8 ‖ name ‖ 12 × u64
/// (OpCounts, declaration order) ‖ converted_cts u64 ‖ converted_bytes u64 ‖ mpc_bytes u64 ‖
/// mpc_rounds u64 ‖ wall_s f64`. Names are cut to [`MAX_BLOCK_NAME`] bytes.
pub fn encode_report(blocks: &[ReportBlock]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + blocks.len() * (RECORD_FIXED + 16));
    out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    for b in blocks {
        let name = &b.block.as_bytes()[..b.block.len().min(MAX_BLOCK_NAME)];
        out.extend_from_slice(&b.layer.to_le_bytes());
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        for v in ops_to_array(&b.ckks) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [
            b.converted_cts,
            b.converted_bytes,
            b.mpc_bytes,
            b.mpc_rounds,
            b.wall_s.to_bits(),
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

struct Cursor<'a>(&'a [u8], usize);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let total = self.0.len();
        let s = self.0.get(self.1..self.1 + n).ok_or(DecodeError::Length {
            expected: self.1 + n,
            found: total,
        })?;
        self.1 += n;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
    }
}

/// Decodes a report: every record complete, no trailing bytes, at most [`MAX_REPORT_BLOCKS`]
/// blocks (checked before anything is allocated), names of printable ASCII, wall times finite
/// and non-negative.
pub fn decode_report(b: &[u8]) -> Result<Vec<ReportBlock>, DecodeError> {
    let mut c = Cursor(b, 0);
    let n = c.u32()? as usize;
    if n > MAX_REPORT_BLOCKS {
        return Err(DecodeError::TooManyBlocks(n));
    }
    // Each record is at least RECORD_FIXED bytes: a short payload fails before allocating.
    let min = 4 + n * RECORD_FIXED;
    if b.len() < min {
        return Err(DecodeError::Length {
            expected: min,
            found: b.len(),
        });
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let layer = c.u32()?;
        let len = c.take(1)?[0] as usize;
        let name = c.take(len)?;
        if len == 0 || len > MAX_BLOCK_NAME || !name.iter().all(|&ch| (0x20..0x7f).contains(&ch)) {
            return Err(DecodeError::BadBlockName);
        }
        let block = name.iter().map(|&ch| ch as char).collect();
        let mut ops = [0u64; OPS];
        for v in &mut ops {
            *v = c.u64()?;
        }
        let (converted_cts, converted_bytes, mpc_bytes, mpc_rounds) =
            (c.u64()?, c.u64()?, c.u64()?, c.u64()?);
        let wall_s = f64::from_bits(c.u64()?);
        if !(wall_s.is_finite() && wall_s >= 0.0) {
            return Err(DecodeError::BadWallTime);
        }
        out.push(ReportBlock {
            layer,
            block,
            ckks: ops_from_array(ops),
            converted_cts,
            converted_bytes,
            mpc_bytes,
            mpc_rounds,
            wall_s,
        });
    }
    if c.1 != b.len() {
        return Err(DecodeError::Length {
            expected: c.1,
            found: b.len(),
        });
    }
    Ok(out)
}

/// The fingerprint of a public architecture: SHA-256 of a domain label, the
/// [`EncoderConfig`] fields (`layers, hidden, heads, ffn, classes` as `u64` LE, `ln_eps` as its
/// IEEE-754 bits) and the supported sequence lengths [`SEQ_LENS`]. Two parties with the same
/// fingerprint plan the same session from the same `(params, m)`. The weights are not in it:
/// they are the server's secret.
pub fn fingerprint(cfg: &EncoderConfig) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"veil/session/model-fingerprint/v1");
    for v in [cfg.layers, cfg.hidden, cfg.heads, cfg.ffn, cfg.classes] {
        h.update((v as u64).to_le_bytes());
    }
    h.update(cfg.ln_eps.to_bits().to_le_bytes());
    h.update((SEQ_LENS.len() as u64).to_le_bytes());
    for m in SEQ_LENS {
        h.update((m as u64).to_le_bytes());
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version: SESSION_VERSION,
            fingerprint: fingerprint(&EncoderConfig::MINILM_L6),
            params_id: 0x0123_4567_89ab_cdef,
            m: 16,
            valid: 7,
        }
    }

    #[test]
    fn hello_round_trip_and_exact_length() {
        let h = hello();
        let b = h.encode();
        assert_eq!(b.len(), HELLO_LEN);
        assert_eq!(Hello::decode(&b), Ok(h));
        assert_eq!(Hello::peek_version(&b), Some(SESSION_VERSION));
        for n in [0, 1, HELLO_LEN - 1, HELLO_LEN + 1] {
            let mut c = b.clone();
            c.resize(n, 0);
            assert_eq!(
                Hello::decode(&c),
                Err(DecodeError::Length {
                    expected: HELLO_LEN,
                    found: n
                })
            );
        }
        assert_eq!(h.check_lengths(), Ok((16, 7)));
        for (m, valid) in [(15, 1), (16, 0), (16, 17), (0, 0), (256, 1), (u32::MAX, 1)] {
            assert!(
                Hello { m, valid, ..h }.check_lengths().is_err(),
                "{m} {valid}"
            );
        }
    }

    #[test]
    fn blocks_decoder_refuses_what_it_cannot_carry() {
        let good = encode_blocks(&Blocks::encformer((7.0, 1.5e6), (0.5, 2.0)));
        let bad = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            decode_blocks(&b)
        };
        // Unknown kinds.
        for (i, v) in [(0, 2), (17, 2), (34, 3), (35, 2)] {
            assert!(matches!(bad(i, v), Err(DecodeError::BadBlocks(_))), "{i}");
        }
        // A constant that is not finite.
        let mut b = good;
        b[1..9].copy_from_slice(&f64::NAN.to_le_bytes());
        assert!(matches!(decode_blocks(&b), Err(DecodeError::BadBlocks(_))));
        b[1..9].copy_from_slice(&f64::INFINITY.to_le_bytes());
        assert!(matches!(decode_blocks(&b), Err(DecodeError::BadBlocks(_))));
        // An accurate kind with constants is not canonical.
        assert!(matches!(bad(0, 0), Err(DecodeError::BadBlocks(_))));
        assert!(matches!(bad(17, 0), Err(DecodeError::BadBlocks(_))));
        // Wrong lengths.
        assert!(matches!(
            decode_blocks(&good[..BLOCKS_LEN - 1]),
            Err(DecodeError::Length { .. })
        ));
        let mut a = Accept {
            version: SESSION_VERSION,
            blocks: Blocks::EXACT,
        }
        .encode();
        a.push(0);
        assert!(matches!(
            Accept::decode(&a),
            Err(DecodeError::Length { .. })
        ));
    }

    #[test]
    fn accept_and_refusal_round_trip() {
        let a = Accept {
            version: 7,
            blocks: Blocks::EXACT,
        };
        assert_eq!(a.encode().len(), ACCEPT_LEN);
        assert_eq!(Accept::decode(&a.encode()), Ok(a));
        assert!(Accept::decode(&[1, 2, 3]).is_err());
        let enc = Accept {
            version: SESSION_VERSION,
            blocks: Blocks::encformer((7.0, 1.5e6), (0.5, 2.0)),
        };
        assert_eq!(Accept::decode(&enc.encode()), Ok(enc));
        for name in ["erf", "bolt", "bolt-split"] {
            let b = gelu_blocks(name).unwrap();
            assert_eq!(decode_blocks(&encode_blocks(&b)), Ok(b));
        }
        assert_eq!(gelu_blocks("relu"), None);
        for code in RefuseCode::ALL {
            let r = Refusal::new(code, format!("because {code}"));
            assert_eq!(Refusal::decode(&r.encode()), Ok(r));
        }
        // A long text is cut to the limit at a character boundary and still decodes.
        let r = Refusal::new(RefuseCode::Busy, "é".repeat(MAX_REFUSE_TEXT));
        let d = Refusal::decode(&r.encode()).unwrap();
        assert!(d.text.len() <= MAX_REFUSE_TEXT && d.text.len() >= MAX_REFUSE_TEXT - 1);
        assert_eq!(
            Refusal::decode(&[5, 0, 1]).unwrap_err(),
            DecodeError::Length {
                expected: 4,
                found: 3
            }
        );
        assert_eq!(
            Refusal::decode(&[9, 0, 0, 0]),
            Err(DecodeError::UnknownReason(9))
        );
        assert_eq!(
            Refusal::decode(&[5, 0, 2, 0, 0xff, 0xfe]),
            Err(DecodeError::TextNotUtf8)
        );
        assert_eq!(
            Refusal::decode(&[5, 0, 2, 0, b'a']),
            Err(DecodeError::Length {
                expected: 6,
                found: 5
            })
        );
        assert_eq!(
            Refusal::decode(&[5, 0, 0xff, 0xff]),
            Err(DecodeError::TextTooLong(0xffff))
        );
    }

    #[test]
    fn report_round_trip_and_hostile_bytes() {
        let blocks = vec![
            ReportBlock {
                layer: 0,
                block: "qkv+score".into(),
                ckks: OpCounts {
                    rotations: 5,
                    repacks: 9,
                    ..OpCounts::default()
                },
                converted_cts: 2,
                converted_bytes: 1 << 20,
                mpc_bytes: 77,
                mpc_rounds: 3,
                wall_s: 0.25,
            },
            ReportBlock {
                layer: u32::MAX,
                block: "head".into(),
                ..ReportBlock::default()
            },
        ];
        let b = encode_report(&blocks);
        assert_eq!(decode_report(&b), Ok(blocks.clone()));
        for n in 0..b.len() {
            assert!(decode_report(&b[..n]).is_err(), "prefix {n}");
        }
        let mut long = b.clone();
        long.push(0);
        assert!(decode_report(&long).is_err());
        assert_eq!(
            decode_report(&u32::MAX.to_le_bytes()),
            Err(DecodeError::TooManyBlocks(u32::MAX as usize))
        );
        let mut bad = blocks.clone();
        bad[1].wall_s = f64::NAN;
        assert_eq!(
            decode_report(&encode_report(&bad)),
            Err(DecodeError::BadWallTime)
        );
        bad[1].wall_s = 0.0;
        bad[1].block = String::new();
        assert_eq!(
            decode_report(&encode_report(&bad)),
            Err(DecodeError::BadBlockName)
        );
    }

    #[test]
    fn fingerprint_separates_architectures() {
        let a = EncoderConfig::MINILM_L6;
        let b = EncoderConfig { layers: 5, ..a };
        let c = EncoderConfig { ln_eps: 1e-5, ..a };
        assert_eq!(fingerprint(&a), fingerprint(&a));
        assert_ne!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }
}
