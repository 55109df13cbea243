//! Veil's benchmarks: what the `veil-bench` binary runs (`veil-bench ckks|mpc|nonlinear|scp|convert|
//! e2e|layer|accuracy|cnn|boot`), plus the per-module criterion benches in `benches/`. The product
//! binary (`veil`) does not link this crate.
//!
//! - [`ckks`]: per-primitive latency and precision of RNS-CKKS (result names shared with the peer
//!   scripts);
//! - [`mpc`]: two-party MPC primitives over the in-memory and TCP links;
//! - [`nonlinear`]: the nonlinear MPC blocks of `veil_core::nonlinear` at BERT-base shapes, beside SPU;
//! - [`scp`]: operation counts of the Transformer attention kernels (EncFormer Table II) and a
//!   timed, checked real run;
//! - [`accuracy`]: the sentiment head on the held-out sentences, exact, fixed-point and encrypted;
//! - [`e2e`]: private inference of a BERT-architecture encoder end to end, per block;
//! - [`convert`]: CKKS↔MPC conversion (EncFormer Table VII), with a two-process run over an
//!   emulated link ([`netem`]) in which the client sends its keys to the server
//!   ([`veil_host::party`]).
//!
//! Every two-party run goes through [`veil_host::harness`]. Peer figures ([`peers`]) are printed
//! only when measured in the same run or labelled as a reference with their source and date.
//! Failures are [`BenchError`]s.

pub mod accuracy;
pub mod boot;
pub mod ckks;
pub mod cnn;
pub mod cnn_aac;
pub mod cnn_table_v;
pub mod cnn_vgg;
pub mod convert;
pub mod decoder;
pub mod decoder_private;
pub mod e2e;
pub mod e2e_link;
mod error;
pub mod mpc;
pub mod netem;
pub mod nonlinear;
pub mod peers;
pub mod progress;
pub mod scp;
pub mod timing;

pub use error::{to_json, BenchError};

use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, EvaluationKeys, SecretKey};
use veil_core::params::CkksParams;

/// `max_i |a_i − b_i|` over the pairs `a` and `b` share (0 for none).
pub(crate) fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// The optimized CPU backend with `threads` workers (0: one per core).
pub fn cpu_backend(p: &CkksParams, threads: usize) -> Result<CpuBackend, BenchError> {
    CpuBackend::fast(p, veil_host::backend::cpu_threads(threads)).map_err(|e| BenchError::Backend {
        reason: e.to_string(),
    })
}

/// A CPU CKKS context for a timed run: the context, a fresh secret key, the evaluation keys
/// (relinearization, conjugation and the Galois steps of a dry run), the OS-seeded generator
/// that drew them (for the run's encryptions), and the key generation's wall time.
pub struct CpuKeys {
    /// The context on the optimized CPU backend.
    pub ck: Ckks<CpuBackend>,
    /// The secret key.
    pub sk: SecretKey,
    /// The evaluation keys.
    pub keys: EvaluationKeys<CpuBackend>,
    /// The generator, for the run's encryptions.
    pub rng: veil_host::SecretRng,
    /// Key generation, seconds.
    pub keygen_s: f64,
}

/// [`CpuKeys`] for `p` with `threads` workers and the Galois steps `rots`; `step` names the
/// benchmark in an error.
pub fn cpu_keys(
    p: &CkksParams,
    threads: usize,
    rots: &[i64],
    step: &'static str,
) -> Result<CpuKeys, BenchError> {
    let ck = Ckks::new(std::sync::Arc::new(cpu_backend(p, threads)?));
    let mut rng = veil_host::os_rng();
    let sk = ck.gen_secret_key(&mut rng);
    let t = std::time::Instant::now();
    let keys = ck
        .gen_evaluation_keys(&sk, rots, true, &mut rng, |_, _| {})
        .map_err(|source| BenchError::Core { step, source })?;
    Ok(CpuKeys {
        keygen_s: t.elapsed().as_secs_f64(),
        ck,
        sk,
        keys,
        rng,
    })
}
