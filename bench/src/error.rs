//! The benchmarks' error type.

use veil_host::harness::HarnessError;
use veil_host::mpc::DriverError;
use veil_host::party::PartyError;

/// Why a benchmark failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BenchError {
    /// A CKKS, parameter or serialization call failed.
    Core {
        /// The step.
        step: &'static str,
        /// The error.
        source: veil_core::Error,
    },
    /// A conversion plan or a non-protocol conversion step was refused.
    Convert {
        /// The step.
        step: &'static str,
        /// The error.
        source: veil_core::convert::ConvertError,
    },
    /// The MPC engine refused its configuration or a party could not be built.
    Mpc {
        /// The step.
        step: &'static str,
        /// The error.
        source: veil_core::mpc::MpcError,
    },
    /// A two-party protocol run failed.
    Protocol {
        /// The protocol (`"mul"`, `"C2M"`, `"setup"`, ...).
        protocol: String,
        /// The driver's error (transport or protocol).
        source: DriverError,
    },
    /// The client–server exchange failed.
    Party(PartyError),
    /// A checkpoint did not fetch or load.
    Model(veil_host::model::ModelError),
    /// The two-party harness failed (a link, a panicked party, a party process).
    Harness(HarnessError),
    /// The optimized CPU backend could not be built.
    Backend {
        /// The backend's error, as it prints.
        reason: String,
    },
    /// An option has a value outside its range.
    InvalidOption {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// What it accepts.
        expected: &'static str,
    },
    /// A measured quantity differs from what it must be.
    Mismatch {
        /// The quantity.
        what: &'static str,
        /// What it must be.
        expected: u64,
        /// What was measured.
        found: u64,
    },
    /// A result fell below its precision floor.
    Precision {
        /// Measured bits.
        bits: f64,
        /// Required bits.
        min_bits: f64,
    },
    /// The operating system's randomness failed.
    Rng(rand_core::Error),
    /// An I/O or process call failed.
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The emulated network link could not be built or run.
    Netem(crate::netem::NetemError),
    /// A party process or a peer benchmark printed something that does not parse.
    Report {
        /// Whose output.
        from: String,
        /// The offending line (shortened).
        line: String,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A report did not encode as JSON.
    Encode {
        /// The report.
        what: &'static str,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A model or image file did not load, or a private CNN run failed.
    Cnn {
        /// The step.
        step: &'static str,
        /// The error, as it prints.
        reason: String,
    },
    /// A peer benchmark (in `../shared/peers`) could not run.
    Peer {
        /// The peer.
        peer: &'static str,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Core { step, source } => write!(f, "{step}: {source}"),
            BenchError::Convert { step, source } => write!(f, "{step}: {source}"),
            BenchError::Mpc { step, source } => write!(f, "{step}: {source}"),
            BenchError::Protocol { protocol, source } => write!(f, "{protocol}: {source}"),
            BenchError::Party(e) => write!(f, "key exchange: {e}"),
            BenchError::Harness(e) => write!(f, "{e}"),
            BenchError::Backend { reason } => write!(f, "CPU backend: {reason}"),
            BenchError::InvalidOption {
                option,
                value,
                expected,
            } => write!(f, "{option} {value:?}: expected {expected}"),
            BenchError::Mismatch {
                what,
                expected,
                found,
            } => write!(f, "{what}: expected {expected}, measured {found}"),
            BenchError::Precision { bits, min_bits } => {
                write!(
                    f,
                    "precision too low: {bits:.1} bits (at least {min_bits:.1})"
                )
            }
            BenchError::Rng(e) => write!(f, "OS randomness: {e}"),
            BenchError::Io { what, source } => write!(f, "{what}: {source}"),
            BenchError::Netem(e) => write!(f, "emulated link: {e}"),
            BenchError::Report { from, line, source } => {
                write!(f, "{from} printed {line:?}: {source}")
            }
            BenchError::Encode { what, source } => write!(f, "encoding {what}: {source}"),
            BenchError::Peer { peer, reason } => write!(f, "peer {peer}: {reason}"),
            BenchError::Cnn { step, reason } => write!(f, "{step}: {reason}"),
            BenchError::Model(e) => write!(f, "model: {e}"),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::Core { source, .. } => Some(source),
            BenchError::Protocol { source, .. } => Some(source),
            BenchError::Party(e) => Some(e),
            BenchError::Model(e) => Some(e),
            BenchError::Harness(e) => Some(e),
            BenchError::Io { source, .. } => Some(source),
            BenchError::Netem(e) => Some(e),
            BenchError::Report { source, .. } => Some(source),
            BenchError::Encode { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<HarnessError> for BenchError {
    fn from(e: HarnessError) -> Self {
        BenchError::Harness(e)
    }
}

impl From<PartyError> for BenchError {
    fn from(e: PartyError) -> Self {
        BenchError::Party(e)
    }
}

impl From<rand_core::Error> for BenchError {
    fn from(e: rand_core::Error) -> Self {
        BenchError::Rng(e)
    }
}

/// `map_err` helper: a CKKS error at `step`.
pub(crate) fn core(step: &'static str) -> impl Fn(veil_core::Error) -> BenchError {
    move |source| BenchError::Core { step, source }
}

/// `map_err` helper: a conversion error at `step`.
pub(crate) fn convert(
    step: &'static str,
) -> impl FnOnce(veil_core::convert::ConvertError) -> BenchError {
    move |source| BenchError::Convert { step, source }
}

/// `map_err` helper: an MPC error at `step`.
pub(crate) fn mpc(step: &'static str) -> impl FnOnce(veil_core::mpc::MpcError) -> BenchError {
    move |source| BenchError::Mpc { step, source }
}

/// A command-line `option` given a `value` it does not accept (it takes `expected`).
pub(crate) fn invalid(
    option: &'static str,
    value: impl Into<String>,
    expected: &'static str,
) -> BenchError {
    BenchError::InvalidOption {
        option,
        value: value.into(),
        expected,
    }
}

/// `map_err` helper: a driven protocol `protocol` failed.
pub(crate) fn protocol(protocol: impl Into<String>) -> impl FnOnce(DriverError) -> BenchError {
    let protocol = protocol.into();
    move |source| BenchError::Protocol { protocol, source }
}

/// `map_err` helper: an I/O call `what` failed.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError::Io { what, source }
}

/// Pretty JSON of a report.
pub fn to_json<T: serde::Serialize>(what: &'static str, v: &T) -> Result<String, BenchError> {
    serde_json::to_string_pretty(v).map_err(|source| BenchError::Encode { what, source })
}
