//! View tests of the nonlinear blocks (`veil_core::nonlinear`: max pool, softmax accurate and MBMax,
//! GELU all-MPC and split): the secret input changes (through the
//! varying party's share, the observer's share fixed) and the messages the other party
//! receives keep their distribution. Statistics and negative controls: `mpc_common::views`.
//!
//! Shapes are small (a few rows) and the run count as small as keeps the biased-bit control
//! clearly detectable: its `|z| ≈ 0.5·√(2R)` is 12.6 at `R = 320` against the threshold ≈ 6.3,
//! while the null's largest `|z|` over the ~10^6 features of a view is about 5.3.

mod mpc_common;
use mpc_common::views::{check_with, views};
use mpc_common::*;
use rand_core::RngCore;
use veil_core::mpc::{MpcConfig, RingShares};
use veil_core::nonlinear::fixed;
use veil_core::nonlinear::pool::MaxPool;
use veil_host::mpc::drive;

/// Runs per input (see the module doc).
const RUNS: usize = 320;

/// Features for long views: every bit and its XOR with the same bit of the next byte.
const SHIFTS: [usize; 2] = [0, 8];

/// The observer's fixed share and the varying party's shares of the secrets `a` and `b`.
fn shares_of(cfg: &MpcConfig, a: &[f64], b: &[f64], seed: u64) -> (RingShares, [RingShares; 2]) {
    let r = cfg.ring;
    let mut g = seeded(seed);
    let o: Vec<u64> = a.iter().map(|_| g.next_u64() & r.mask()).collect();
    let mine = |xs: &[f64]| {
        RingShares::new(
            xs.iter()
                .zip(&o)
                .map(|(&x, &o)| r.sub(r.from_signed(fixed::encode(x, r.frac)), o))
                .collect(),
        )
    };
    let (sa, sb) = (mine(a), mine(b));
    (RingShares::new(o), [sa, sb])
}

/// Views of both observers for a block run `f(p, x)` on secrets `a` vs `b`, checked.
fn check_block<F>(name: &str, a: &[f64], b: &[f64], f: F)
where
    F: Fn(&mut P, &mut dyn veil_host::transport::Transport, &RingShares) + Send + Sync,
{
    let cfg = MpcConfig::ENCFORMER;
    let (o, [sa, sb]) = shares_of(&cfg, a, b, 5);
    for observer_is_p1 in [true, false] {
        let (va, vb) = views(
            cfg,
            observer_is_p1,
            RUNS,
            |p, t, alt| f(p, t, if alt { &sb } else { &sa }),
            |p, t| f(p, t, &o),
        );
        let who = if observer_is_p1 { "P1" } else { "P0" };
        check_with(&format!("{name}, {who} view"), &va, &vb, &SHIFTS);
    }
}

#[test]
fn max_pool_views() {
    let mp = MaxPool {
        channels: 1,
        height: 4,
        width: 4,
    };
    let a = vec![0.0; 16];
    let b: Vec<f64> = (0..16).map(|k| (k as f64 - 7.5) * 3.0).collect();
    check_block("max pool 1x4x4", &a, &b, |p, t, x| {
        drive(p.channel(), mp.run(p, x), t).unwrap();
    });
}

#[test]
fn softmax_views() {
    use veil_core::nonlinear::softmax::{Mask, Softmax, SoftmaxKind};
    // Row 0: all equal vs one dominant entry; row 1: ramp vs a large negative spread.
    let a: Vec<f64> = (0..16)
        .map(|k| if k < 8 { 0.0 } else { k as f64 * 0.5 })
        .collect();
    let b: Vec<f64> = (0..16)
        .map(|k| match k {
            3 => 40.0,
            k if k < 8 => -2.0,
            k => -(k as f64) * 3.0,
        })
        .collect();
    for kind in [
        SoftmaxKind::Accurate,
        SoftmaxKind::MbMax { c: 8.0, rd: 9200.0 },
    ] {
        let sm = Softmax {
            rows: 2,
            cols: 8,
            mask: Mask::None,
            kind,
        };
        let name = format!("softmax 2x8 {kind:?}");
        check_block(&name, &a, &b, |p, t, x| {
            drive(p.channel(), sm.run(p, x), t).unwrap();
        });
    }
}

#[test]
fn gelu_views() {
    use veil_core::nonlinear::gelu::{Gelu, GeluKind};
    // Secrets on every branch: below −T, in [−T, 0), in [0, T], above T (A) versus their
    // mirror images and large values (B).
    let a: Vec<f64> = (0..16).map(|k| (k as f64 - 8.0) * 0.7).collect();
    let b: Vec<f64> = (0..16)
        .map(|k| {
            if k % 2 == 0 {
                25.0 - k as f64
            } else {
                -(k as f64) * 0.3
            }
        })
        .collect();
    let g = Gelu {
        kind: GeluKind::Bolt,
    };
    check_block("GELU bolt 16", &a, &b, |p, t, x| {
        drive(p.channel(), g.run(p, x), t).unwrap();
    });
    // EncFormer's split: the candidates are further inputs of the varying party; the
    // observer's shares of them are fixed, like its share of x.
    let (f0a, f1a) = g.candidate_values(&a);
    let (f0b, f1b) = g.candidate_values(&b);
    let cfg = MpcConfig::ENCFORMER;
    let (o0, [f0_sa, f0_sb]) = shares_of(&cfg, &f0a, &f0b, 6);
    let (o1, [f1_sa, f1_sb]) = shares_of(&cfg, &f1a, &f1b, 7);
    let (ox, [xa, xb]) = shares_of(&cfg, &a, &b, 5);
    for observer_is_p1 in [true, false] {
        let (va, vb) = views(
            cfg,
            observer_is_p1,
            RUNS,
            |p, t, alt| {
                let (x, f0, f1) = if alt {
                    (&xb, &f0_sb, &f1_sb)
                } else {
                    (&xa, &f0_sa, &f1_sa)
                };
                drive(p.channel(), g.run_split(p, x, f0, f1), t).unwrap();
            },
            |p, t| {
                drive(p.channel(), g.run_split(p, &ox, &o0, &o1), t).unwrap();
            },
        );
        let who = if observer_is_p1 { "P1" } else { "P0" };
        check_with(
            &format!("GELU bolt split 16, {who} view"),
            &va,
            &vb,
            &SHIFTS,
        );
    }
}
