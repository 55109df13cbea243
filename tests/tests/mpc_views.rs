//! View tests: change one party's input and check that the messages the other
//! party receives keep their distribution (the statistics, with their negative
//! controls, are in `mpc_common::views`).

mod mpc_common;
use mpc_common::views::{check, views};
use mpc_common::*;
use veil_core::mpc::{Modulus, MpcConfig, RingShares};
use veil_host::mpc::drive;

const RUNS: usize = 400;
const N: usize = 16;

fn fixed_shares(cfg: &MpcConfig, seed: u64) -> RingShares {
    use rand_core::RngCore;
    let mut rng = seeded(seed);
    RingShares::new((0..N).map(|_| rng.next_u64() & cfg.ring.mask()).collect())
}

#[test]
fn comparison_views() {
    let cfg = MpcConfig::ENCFORMER;
    let ell = cfg.ring.ell;
    let m = cfg.ring.mask();
    let other: Vec<u64> = fixed_shares(&cfg, 1).into_vec();
    // P0's input varies (0 vs 2^ℓ−1), P1 observes.
    let (a, b) = views(
        cfg,
        true,
        RUNS,
        |p, t, alt| {
            let x = vec![if alt { m } else { 0 }; N];
            drive(p.channel(), p.millionaire(&x, ell), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.millionaire(&other, ell), t).unwrap();
        },
    );
    check("millionaire, P1 view", &a, &b);
    // P1's input varies, P0 observes.
    let (a, b) = views(
        cfg,
        false,
        RUNS,
        |p, t, alt| {
            let y = vec![if alt { m } else { 0 }; N];
            drive(p.channel(), p.millionaire(&y, ell), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.millionaire(&other, ell), t).unwrap();
        },
    );
    check("millionaire, P0 view", &a, &b);
}

#[test]
fn multiplication_views() {
    let cfg = MpcConfig::ENCFORMER;
    let m = cfg.ring.mask();
    let y = fixed_shares(&cfg, 2);
    let y2 = fixed_shares(&cfg, 3);
    let (a, b) = views(
        cfg,
        true,
        RUNS,
        |p, t, alt| {
            let x = RingShares::new(vec![if alt { m } else { 0 }; N]);
            drive(p.channel(), p.mul(&x, &y), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.mul(&y2, &y), t).unwrap();
        },
    );
    check("mul, P1 view", &a, &b);
    let (a, b) = views(
        cfg,
        false,
        RUNS,
        |p, t, alt| {
            let x = RingShares::new(vec![if alt { m } else { 0 }; N]);
            drive(p.channel(), p.mul(&x, &y), t).unwrap();
        },
        |p, t| {
            drive(p.channel(), p.mul(&y2, &y), t).unwrap();
        },
    );
    check("mul, P0 view", &a, &b);
}

#[test]
fn ext_views() {
    let cfg = MpcConfig::ENCFORMER;
    let m = cfg.ring.mask();
    let q = Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap();
    let other = fixed_shares(&cfg, 4);
    for observer_is_p1 in [true, false] {
        let (a, b) = views(
            cfg,
            observer_is_p1,
            RUNS,
            |p, t, alt| {
                let x = RingShares::new(vec![if alt { m } else { 0 }; N]);
                drive(p.channel(), p.ring_to_field(&x, &q), t).unwrap();
            },
            |p, t| {
                drive(p.channel(), p.ring_to_field(&other, &q), t).unwrap();
            },
        );
        check(
            if observer_is_p1 {
                "ring2field, P1 view"
            } else {
                "ring2field, P0 view"
            },
            &a,
            &b,
        );
    }
}
