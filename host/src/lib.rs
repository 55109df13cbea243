//! Veil host: the std side of Veil. `veil-core` stays `no_std`; this crate gives it a world:
//!
//! - [`transport`]: framed, versioned transports (TCP and in memory) with receive timeouts;
//! - [`mpc`]: the driver that runs `veil-core`'s sans-IO protocol sessions over a transport, and
//!   what every model family does with its party (set-up, block timing);
//! - [`backend`]: the polynomial backend a party evaluates on (CPU, wgpu, CUDA), chosen at run
//!   time, with a typed refusal for one that is not built in or has no device;
//! - [`harness`]: the one two-party harness (in memory, TCP loopback, two processes) that the
//!   benchmarks (`veil-bench`) and the tests run both parties on;
//! - [`party`]: the two roles of private inference. The [`party::Client`] generates the CKKS keys
//!   and keeps the secret key; the [`party::Server`] receives the public, relinearization and
//!   Galois keys and holds nothing else;
//! - [`serve`]: the one server framework (accept loop, slots, busy refusals, a thread per
//!   session, the log line and the counts) on which each model family's handler runs;
//! - [`bert`]: private inference of a BERT-architecture encoder between them (hello, keys, base
//!   OT, the run, the report), the BERT family's handler behind `veil serve`;
//! - [`cnn`]: private CNN inference on FEnc2's packing (FHE-only, or hybrid with ReLU in MPC),
//!   client and server over a transport, the CNN family's handler behind `veil serve --cnn`
//!   ([`cnn::serve`]);
//!
//! The benchmarks live in `veil-bench`, the `veil` command-line tool in the `veil` package
//! (`cli/`).

pub mod alloc;
pub mod backend;
pub mod bert;
pub mod cnn;
pub mod decoder;
pub mod harness;
pub mod model;
pub mod mpc;
pub mod party;
pub mod serve;
pub mod transport;

use rand_core::SeedableRng;
pub use veil_core::SecretRng;

/// A ChaCha20 CSPRNG seeded from the operating system's entropy source, wiped when dropped
/// ([`SecretRng`]). Every party seeds its own; nothing in the product uses a fixed seed.
///
/// # Panics
/// If the OS has no entropy to give (as `rand`'s own `from_entropy` does).
pub fn os_rng() -> SecretRng {
    SecretRng::from_rng(rand_core::OsRng).expect("the OS entropy source failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generator the product draws keys, shares and masks from is the one wiped on drop:
    /// the client's ([`os_rng`]), each BERT session party's and the hybrid CNN parties'.
    #[test]
    fn product_generators_wipe_on_drop() {
        let a: SecretRng = os_rng();
        let b: SecretRng = bert::session_rng().unwrap();
        type SetUp = Result<(veil_core::mpc::Party<SecretRng>, f64), bert::SessionError>;
        let party: fn(&bert::SessionOptions, &mut dyn transport::Transport) -> SetUp =
            |o, t| bert::setup_party(veil_core::mpc::PartyId::P0, o, t);
        let _ = party;
        assert!(format!("{a:?}{b:?}").matches("redacted").count() == 2);
    }
}
