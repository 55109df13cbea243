//! Veil's CubeCL kernels: one generic [`CubeBackend<R: cubecl::Runtime>`](CubeBackend) that
//! implements `veil_core::backend::PolyBackend` on every CubeCL runtime (CUDA, wgpu).
//!
//! Kernels are grouped by op family, each module with its host-side `launch_*` functions:
//!
//! - [`arith`]: `#[cube]` modular arithmetic on `u64` (64×64→128 products from 32-bit pieces,
//!   Shoup and Barrett reductions),
//! - [`elementwise`]: add, sub, neg, multiply, multiply-accumulate, per-row scalars, fills, copies,
//! - [`ntt`]: the canonical negacyclic NTT and its inverse, batched over rows,
//! - [`automorphism`]: `X → X^g` in the NTT and coefficient domains,
//! - [`basis`]: fast basis conversion (decomposition with ModUp, ModDown, rescale) and the fused
//!   key-switching inner product.
//!
//! Every kernel computes the canonical word `veil-core` defines, so the results are bit-identical
//! to the CPU reference backend; the conformance suite in `veil-tests` checks it on each runtime.
//! The crate is runtime-agnostic: `veil-backend-wgpu` and `veil-backend-cuda` pick the runtime and
//! the device.
//!
//! State of the kernels: written for exactness first. One unit per word (or per butterfly);
//! the NTT runs its first `log N - 9` stages one launch each and the last 9 fused in shared memory;
//! the key inner product is one launch per digit (both halves fused); the basis conversions
//! recompute the source terms per destination row. Not yet: vectorized loads, radix-4/8 or
//! register-blocked NTTs, lazy 128-bit accumulation across digits, a launch-free path for small
//! scalar uploads. Measured so far only on Mesa lavapipe (wgpu); the CUDA path builds and is
//! checked by the same conformance suite on a GPU (`scripts/gpu-check.sh`).

// CubeCL's launch API takes raw buffer lengths (`ArrayArg::from_raw_parts`) and the kernels run
// without bounds checks (`launch_unchecked`); each `unsafe` block states why its indices are in
// bounds. The safe `launch_*` wrappers are crate-private: their one caller, `CubeBackend`, checks
// every buffer's row count, basis and level against the parameter set before it launches
// (`CubeBackend::need`, `need_level`, `map`), so no public safe call can reach out of bounds.
#![allow(unsafe_code)]

pub mod arith;
pub mod automorphism;
mod backend;
pub mod basis;
pub mod elementwise;
pub mod launch;
pub mod ntt;

pub use backend::{CubeBackend, CubeBuffer};
/// The CubeCL version the kernels are built against (for `Runtime` bounds downstream).
pub use cubecl;

/// Errors creating a [`CubeBackend`] or finding a device for it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CubeBackendError {
    /// No usable device for the runtime (no driver, no adapter, or none that qualifies).
    NoDevice {
        /// The runtime (`cuda`, `wgpu`).
        runtime: &'static str,
        /// Why.
        reason: String,
    },
    /// The device lacks a capability the kernels need.
    MissingFeature {
        /// The device.
        device: String,
        /// The missing capability.
        feature: &'static str,
    },
    /// The ring is too large for the kernels' 32-bit unit indices.
    TooLarge {
        /// Words of one buffer spanning every prime.
        words: usize,
    },
    /// The device reported an error while running kernels.
    Device {
        /// The device.
        device: String,
        /// The error.
        detail: String,
    },
    /// The device ran the self-test kernels but did not reproduce the host's words.
    SelfTest {
        /// The device.
        device: String,
        /// What differed.
        detail: String,
    },
}

impl std::fmt::Display for CubeBackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CubeBackendError::NoDevice { runtime, reason } => {
                write!(f, "no usable {runtime} device: {reason}")
            }
            CubeBackendError::MissingFeature { device, feature } => {
                write!(f, "device {device} lacks {feature}, which the kernels need")
            }
            CubeBackendError::TooLarge { words } => {
                write!(
                    f,
                    "{words} words per buffer exceed the kernels' 32-bit indices"
                )
            }
            CubeBackendError::Device { device, detail } => {
                write!(f, "device {device} failed: {detail}")
            }
            CubeBackendError::SelfTest { device, detail } => {
                write!(f, "device {device} failed the self-test: {detail}")
            }
        }
    }
}

impl std::error::Error for CubeBackendError {}

/// The message of a caught panic payload (`String` or `&str`; otherwise a placeholder), for the
/// runtimes' thin crates, which turn driver panics into [`CubeBackendError`]s.
pub fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic without a message".into())
}
