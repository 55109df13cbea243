//! Typed errors. Nothing that comes from a peer, a file or a caller panics the process.

use core::fmt;

/// Errors of the CKKS layer and below.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A parameter literal was rejected; the message says which field and why.
    InvalidParameters(&'static str),
    /// The parameters exceed the HE Standard bound for 128-bit security.
    InsecureParameters {
        /// `log2(QP)` of the set.
        log_qp: f64,
        /// The largest admissible `log2(QP)` for this ring degree.
        max_log_qp: f64,
        /// `log2 N`.
        log_n: u32,
    },
    /// An operand is at a level the operation cannot use.
    LevelMismatch {
        /// Level of the first operand (or the level found).
        left: usize,
        /// Level of the second operand (or the level required).
        right: usize,
    },
    /// Two operands have scales that differ.
    ScaleMismatch {
        /// Scale of the first operand.
        left: f64,
        /// Scale of the second operand.
        right: f64,
    },
    /// An operand has the wrong degree (number of polynomials).
    DegreeMismatch {
        /// Found degree.
        found: usize,
        /// Expected degree.
        expected: usize,
    },
    /// No level left to rescale or drop to.
    LevelExhausted,
    /// A requested level is above the ciphertext's level.
    InvalidLevel {
        /// The level asked for.
        level: usize,
        /// The highest level available.
        max_level: usize,
    },
    /// The evaluation key for a Galois element is missing.
    MissingGaloisKey(u64),
    /// The relinearization key is missing.
    MissingRelinKey,
    /// Too many or too few values for the slots.
    SlotCount {
        /// Values given.
        given: usize,
        /// Slots available.
        slots: usize,
    },
    /// A value does not fit the encoding (too large for the scale and modulus).
    EncodingOverflow,
    /// A non-finite value (NaN or infinity) was given to the encoder.
    NonFinite,
    /// Bytes could not be decoded; the message says where.
    Malformed(&'static str),
    /// The bytes carry a format version this build does not read.
    UnsupportedVersion {
        /// Version found.
        found: u16,
        /// Version expected.
        expected: u16,
    },
    /// The object was made under different parameters.
    ParameterMismatch,
    /// The backend failed or lacks a capability.
    Backend(&'static str),
    /// Two operands carry different slot counts.
    SlotMismatch {
        /// The slot count required (of the first operand).
        expected: usize,
        /// The slot count found (of the second operand).
        found: usize,
    },
    /// A length, row count or other dimension differs from the one required.
    Shape {
        /// What was measured (e.g. `"rows of the polynomial to decompose"`).
        what: &'static str,
        /// The size required.
        expected: usize,
        /// The size found.
        found: usize,
    },
    /// The compute device faulted after construction (a failed launch, read-back or sync).
    Device {
        /// The operation that failed (e.g. `"download"`).
        what: &'static str,
    },
    /// A noise flood does not fit the ciphertext's modulus, or costs more precision than the
    /// caller allows ([`crate::ckks::sanitize`]).
    FloodTooWide {
        /// `log2` of the flood's width.
        width_bits: f64,
        /// `log2` of the largest width that fits.
        room_bits: f64,
    },
    /// A decoder's KV cache is full: it holds at most `max` positions.
    ContextFull {
        /// The positions the cache holds at most.
        max: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidParameters(m) => write!(f, "invalid parameters: {m}"),
            Error::InsecureParameters {
                log_qp,
                max_log_qp,
                log_n,
            } => write!(
                f,
                "log2(QP) = {log_qp:.1} exceeds the 128-bit bound {max_log_qp} for N = 2^{log_n} \
                 (name the set INSECURE_* to use it anyway)"
            ),
            Error::LevelMismatch { left, right } => write!(f, "level mismatch: {left} vs {right}"),
            Error::ScaleMismatch { left, right } => write!(f, "scale mismatch: {left} vs {right}"),
            Error::DegreeMismatch { found, expected } => {
                write!(f, "degree mismatch: found {found}, expected {expected}")
            }
            Error::LevelExhausted => write!(f, "no level left"),
            Error::InvalidLevel { level, max_level } => {
                write!(f, "invalid level {level} (max {max_level})")
            }
            Error::MissingGaloisKey(g) => write!(f, "missing Galois key for element {g}"),
            Error::MissingRelinKey => write!(f, "missing relinearization key"),
            Error::SlotCount { given, slots } => write!(f, "{given} values for {slots} slots"),
            Error::EncodingOverflow => write!(f, "value too large to encode at this scale"),
            Error::NonFinite => write!(f, "non-finite value"),
            Error::Malformed(m) => write!(f, "malformed bytes: {m}"),
            Error::UnsupportedVersion { found, expected } => {
                write!(
                    f,
                    "unsupported format version {found} (expected {expected})"
                )
            }
            Error::ParameterMismatch => write!(f, "object made under different parameters"),
            Error::Backend(m) => write!(f, "backend: {m}"),
            Error::SlotMismatch { expected, found } => {
                write!(f, "slot mismatch: expected {expected}, found {found}")
            }
            Error::Shape {
                what,
                expected,
                found,
            } => write!(
                f,
                "shape mismatch in {what}: expected {expected}, found {found}"
            ),
            Error::Device { what } => write!(f, "device fault during {what}"),
            Error::FloodTooWide {
                width_bits,
                room_bits,
            } => write!(
                f,
                "noise flood of 2^{width_bits:.1} does not fit (at most 2^{room_bits:.1})"
            ),
            Error::ContextFull { max } => {
                write!(f, "the KV cache is full: it holds at most {max} positions")
            }
        }
    }
}

impl core::error::Error for Error {}

/// Result alias.
pub type Result<T> = core::result::Result<T, Error>;
