//! Test support of the blocks: two parties over the in-memory channel, sharing and
//! opening of signed fixed-point integers, and ulp-bounded comparisons.

use crate::mpc::{MpcConfig, Party, PartyId, RingCfg, RingShares};
use alloc::vec::Vec;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// The party type of the tests.
pub type P = Party<ChaCha20Rng>;

/// Runs two async blocks, one per party, to completion over the in-memory pair and
/// returns both results (unwrapped).
macro_rules! both {
    ($p0:ident, $p1:ident, $b0:expr, $b1:expr) => {{
        let (c0, c1) = ($p0.channel(), $p1.channel());
        let s0 = crate::mpc::Session::new(c0, async { $b0 });
        let s1 = crate::mpc::Session::new(c1, async { $b1 });
        let (r0, r1) = crate::mpc::channel::run_pair(s0, s1);
        (r0.unwrap(), r1.unwrap())
    }};
}
pub(crate) use both;

/// A deterministic test RNG.
pub fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// Two set-up parties with [`MpcConfig::ENCFORMER`] and their ring.
pub fn pair() -> (P, P, RingCfg) {
    pair_with(MpcConfig::ENCFORMER)
}

/// Two set-up parties with `cfg`.
pub fn pair_with(cfg: MpcConfig) -> (P, P, RingCfg) {
    let mut p0 = Party::new(PartyId::P0, cfg, rng(1000)).unwrap();
    let mut p1 = Party::new(PartyId::P1, cfg, rng(1001)).unwrap();
    both!(p0, p1, p0.setup().await, p1.setup().await);
    (p0, p1, cfg.ring)
}

/// `n` signed fixed-point integers uniform in `[−bound, bound]` (reals) at `frac` bits.
pub fn uniform(g: &mut ChaCha20Rng, n: usize, bound: f64, frac: u32) -> Vec<i64> {
    (0..n)
        .map(|_| {
            let u = (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            crate::nonlinear::fixed::encode((2.0 * u - 1.0) * bound, frac)
        })
        .collect()
}

/// Random additive shares of signed ring integers.
pub fn share(r: RingCfg, xs: &[i64], g: &mut ChaCha20Rng) -> (RingShares, RingShares) {
    let a: Vec<u64> = xs.iter().map(|_| g.next_u64() & r.mask()).collect();
    let b: Vec<u64> = xs
        .iter()
        .zip(&a)
        .map(|(&x, &a)| r.sub(r.from_signed(x), a))
        .collect();
    (RingShares::new(a), RingShares::new(b))
}

/// Reconstructs signed ring integers.
pub fn open(r: RingCfg, a: &RingShares, b: &RingShares) -> Vec<i64> {
    a.as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(&x, &y)| r.to_signed(r.add(x, y)))
        .collect()
}

/// Asserts `|got − want| ≤ ulps` elementwise.
#[track_caller]
pub fn assert_within(got: &[i64], want: &[i64], ulps: i64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= ulps,
            "{what}: element {k}: got {g}, reference {w} (bound {ulps} ulp)"
        );
    }
}
