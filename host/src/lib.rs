//! Veil host: the std side of Veil. Transport, parties, benchmarks and the `veil` CLI live here;
//! `veil-core` stays `no_std`.

pub mod bench_ckks;
pub mod bench_convert;
pub mod bench_scp;
pub mod demo;
pub mod mpc;
pub mod netem;
pub mod progress;
pub mod timing;
pub mod transport;

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// A ChaCha20 CSPRNG seeded from the operating system's entropy source. Every party seeds its own;
/// nothing in the product uses a fixed seed.
pub fn os_rng() -> ChaCha20Rng {
    ChaCha20Rng::from_entropy()
}
