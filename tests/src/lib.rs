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
