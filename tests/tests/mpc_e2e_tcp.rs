//! End-to-end over TCP loopback: Z_q shares (as produced by a CKKS→MPC
//! conversion) → Field2Ring → fixed-point product → ReLU → Ring2Field,
//! checked against plaintext; counters are readable after the run.

mod mpc_common;
use mpc_common::*;
use veil_core::mpc::{FieldShares, Modulus, MpcConfig};
use veil_host::mpc::drive;

#[test]
fn field_mul_relu_field_over_tcp() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let q = Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap();
    let mut rng = seeded(7);
    let n = 512;
    let xs: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.37).sin() * 20.0).collect();
    let ws: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.11).cos() * 3.0).collect();
    let xe: Vec<i64> = xs.iter().map(|&v| r.to_signed(r.encode(v))).collect();
    let f0: Vec<u128> = xe.iter().map(|_| q.sample(&mut rng)).collect();
    let f1: Vec<u128> = xe
        .iter()
        .zip(&f0)
        .map(|(&x, &a)| q.sub(q.from_signed(x as i128), a))
        .collect();
    let (w0, w1) = share(
        &r,
        &ws.iter()
            .map(|&v| r.to_signed(r.encode(v)))
            .collect::<Vec<_>>(),
        &mut rng,
    );
    let (ff0, ff1) = (FieldShares::new(f0), FieldShares::new(f1));
    let (t0, t1) = tcp_pair(tcfg(30_000));
    let run = |p: &mut P,
               t: &mut veil_host::transport::TcpTransport,
               f: &FieldShares,
               w: &veil_core::mpc::RingShares| {
        let x = p.field_to_ring(f, &q).unwrap();
        let y = drive(p.channel(), p.mul(&x, w), t).unwrap();
        let z = drive(p.channel(), p.relu(&y), t).unwrap();
        let out = drive(p.channel(), p.ring_to_field(&z, &q), t).unwrap();
        (out, p.channel().stats())
    };
    let ((o0, st0), (o1, st1)) = run_with(
        cfg,
        t0,
        t1,
        |p, t| run(p, t, &ff0, &w0),
        |p, t| run(p, t, &ff1, &w1),
    );
    for k in 0..n {
        let got = q.to_signed(q.add(o0.as_slice()[k], o1.as_slice()[k])) as f64 / 8192.0;
        let want = (xs[k] * ws[k]).max(0.0);
        assert!((got - want).abs() < 3e-3, "{k}: {got} vs {want}");
    }
    // Both parties count the same traffic in opposite directions.
    assert_eq!(st0.online.bytes_sent, st1.online.bytes_recv);
    assert_eq!(st0.offline.bytes_recv, st1.offline.bytes_sent);
    assert!(st0.setup.bytes_sent > 128 * 32 && st0.online.rounds > 0);
}

/// Input sharing by each party and opening, over TCP: P0 inputs `x`, P1
/// inputs `y`, both learn `relu(x·y)` and nothing was sent in the clear
/// except the final opening.
#[test]
fn share_compute_reveal_over_tcp() {
    use veil_core::mpc::PartyId;
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let n = 100;
    let xs: Vec<f64> = (0..n).map(|i| i as f64 / 10.0 - 5.0).collect();
    let ys: Vec<f64> = (0..n).map(|i| 3.0 - i as f64 / 25.0).collect();
    let xe: Vec<u64> = xs.iter().map(|&v| r.encode(v)).collect();
    let ye: Vec<u64> = ys.iter().map(|&v| r.encode(v)).collect();
    let (t0, t1) = tcp_pair(tcfg(30_000));
    let run = |p: &mut P, t: &mut veil_host::transport::TcpTransport, mine: &[u64]| {
        let me = p.id();
        let (xi, yi) = if me == PartyId::P0 {
            (Some(mine), None)
        } else {
            (None, Some(mine))
        };
        let x = drive(p.channel(), p.share_input(PartyId::P0, xi, n), t).unwrap();
        let y = drive(p.channel(), p.share_input(PartyId::P1, yi, n), t).unwrap();
        let z = drive(p.channel(), p.mul(&x, &y), t).unwrap();
        let z = drive(p.channel(), p.relu(&z), t).unwrap();
        drive(p.channel(), p.reveal(&z), t).unwrap()
    };
    let (o0, o1) = run_with(cfg, t0, t1, |p, t| run(p, t, &xe), |p, t| run(p, t, &ye));
    assert_eq!(o0, o1);
    for k in 0..n {
        let got = r.decode(o0[k]);
        let want = (xs[k] * ys[k]).max(0.0);
        assert!((got - want).abs() < 2e-3, "{k}: {got} vs {want}");
    }
}
