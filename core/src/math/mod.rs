//! Number theory for RNS-CKKS: word-size modular arithmetic, NTT-friendly primes, the canonical
//! negacyclic NTT, RNS basis conversion and the samplers.

pub mod bits;
pub mod modular;
pub mod ntt;
pub mod primes;
pub mod rng;
pub mod rns;
pub mod sampling;
pub mod special_fft;

pub use modular::Modulus;
pub use ntt::NttTable;
pub use rng::SecretRng;
