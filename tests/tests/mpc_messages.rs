//! Typed protocol messages end to end:
//!
//! * the protocols run over an injected (INSECURE, test-only) ideal OT and
//!   ideal triples through the host driver and reconstruct to the plaintext
//!   answers;
//! * for every MPC message kind, a sender whose frame of that kind is
//!   truncated, over-long, has a set padding bit (or a value out of range, or
//!   a bad point) makes the receiver fail with the typed decoding error
//!   naming the kind, and the sender then gets the receiver's abort as a
//!   typed transport error (never a panic or a hang).

mod mpc_common;
use mpc_common::*;
use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, SeedableRng};
use std::time::{Duration, Instant};
use veil_core::mpc::insecure::insecure_ideal_party;
use veil_core::mpc::ot::silent::INSECURE_SILENT_TEST;
use veil_core::mpc::{
    BoolShares, Defect, Frame, HeTripleParams, HeTriples, Modulus, MpcConfig, MpcError, MsgKind,
    Party, PartyId, RingShares,
};
use veil_host::mpc::{drive, DriverError};
use veil_host::transport::{mem_pair, MemTransport, Transport, TransportError};

fn ideal(id: PartyId, cfg: MpcConfig) -> P {
    insecure_ideal_party(id, cfg, ChaCha20Rng::from_rng(OsRng).unwrap(), [9; 16]).unwrap()
}

#[test]
fn protocols_over_injected_ideal_ot_through_the_driver() {
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let q = Modulus::from_primes(&[0xffff_ffff_0000_0001, 1_099_511_627_791]).unwrap();
    let mut rng = seeded(3);
    let xs = values(&mut rng, 200, 26);
    let ys = values(&mut rng, 200, 12);
    let (x0, x1) = share(&r, &xs, &mut rng);
    let (y0, y1) = share(&r, &ys, &mut rng);
    let (t0, t1) = mem_pair(tcfg(20_000));
    type Out = (RingShares, BoolShares, RingShares, Vec<u128>);
    let run = |id: PartyId, mut t: MemTransport, x: &RingShares, y: &RingShares| -> Out {
        let mut p = ideal(id, cfg);
        drive(p.channel(), p.setup(), &mut t).unwrap();
        assert_eq!(p.channel().stats().setup.bytes_sent, 16 + 10);
        let m = drive(p.channel(), p.mul(x, y), &mut t).unwrap();
        let lt = drive(p.channel(), p.less_than(x, y), &mut t).unwrap();
        let rl = drive(p.channel(), p.relu(x), &mut t).unwrap();
        let f = drive(p.channel(), p.ring_to_field(x, &q), &mut t).unwrap();
        (m, lt, rl, f.as_slice().to_vec())
    };
    let (a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| run(PartyId::P1, t1, &x1, &y1));
        let a = run(PartyId::P0, t0, &x0, &y0);
        (a, h.join().unwrap())
    });
    let m = open(&r, &a.0, &b.0);
    let rl = open(&r, &a.2, &b.2);
    for k in 0..xs.len() {
        let exact = ((xs[k] as i128 * ys[k] as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
        assert!(m[k] == exact || m[k] == exact - 1, "mul {k}");
        assert_eq!(
            a.1.as_slice()[k] ^ b.1.as_slice()[k],
            (xs[k] < ys[k]) as u8,
            "less_than {k}"
        );
        assert_eq!(rl[k], xs[k].max(0), "relu {k}");
        assert_eq!(q.to_signed(q.add(a.3[k], b.3[k])), xs[k] as i128, "r2f {k}");
    }
}

/// How the armed frame is corrupted.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Truncate,
    Extend,
    Padding,
    /// Every bit of the first packed element set (a `Z_q` value ≥ q).
    HighValue,
    /// The first 32 bytes replaced by a non-point.
    BadPoint,
}

/// Corrupts the first frame of tag `tag` once armed.
struct Corrupt {
    inner: MemTransport,
    armed: Option<(u16, Mode)>,
    hit: bool,
}

impl Transport for Corrupt {
    fn send(&mut self, mut frames: Vec<Frame>) -> Result<(), TransportError> {
        if let (Some((tag, mode)), false) = (self.armed, self.hit) {
            if let Some(f) = frames.iter_mut().find(|f| f.tag == tag) {
                let p = &mut f.payload;
                match mode {
                    Mode::Truncate => {
                        p.pop();
                    }
                    Mode::Extend => p.push(0),
                    Mode::Padding => *p.last_mut().unwrap() |= 0x80,
                    Mode::HighValue => {
                        for b in p.iter_mut().take(13) {
                            *b = 0xff;
                        }
                    }
                    Mode::BadPoint => p[..32].fill(0xff),
                }
                self.hit = true;
            }
        }
        self.inner.send(frames)
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        self.inner.recv()
    }
}

/// The protocol that carries a message kind, and who sends it.
#[derive(Clone, Copy, Debug)]
enum Op {
    Setup,
    IdealSetup,
    Mul,
    Trunc,
    RoundExact,
    B2a,
    Mux,
    MuxPooled,
    /// A party with the silent OT: its pool fill carries `SilentSpcot`.
    SilentPooled,
    Millionaire,
    Input,
    Reveal,
    Ring2Field,
    Ring2FieldKnownMsb,
    /// `nonlinear::ops` squaring (the bounded form: P0 sends `SquareCorr`, P1 `SquareWrapCorr`).
    Square,
    /// `nonlinear::ops` row-broadcast product (wide COTs; both send `WideCorr`).
    MulRows,
    /// `nonlinear::ops` bounded product (both send `MulCorr`; bounds of 22 bits, so that the
    /// 3-element payload has padding bits).
    MulBounded,
    /// Setup of parties with the RLWE triple source (P0 sends `HeKey`).
    RlweSetup,
    /// A product over RLWE triples (P0 sends `HeUpload`, P1 `HeReply`).
    RlweMul,
}

fn q100() -> Modulus {
    Modulus::new((1u128 << 99) + 1).unwrap()
}

/// Runs `op` (then a closing `reveal`, so that a sender that finished its part
/// still sees the receiver's abort); returns the first error.
fn run_op(p: &mut P, t: &mut Corrupt, op: Op, arm: Option<(u16, Mode)>) -> Result<(), DriverError> {
    let x = RingShares::new(vec![5, 1 << 20, 77]); // n = 3: packed payloads have padding bits
    let b = BoolShares::new(vec![1, 0, 1]);
    let setup = |p: &mut P, t: &mut Corrupt| drive(p.channel(), p.setup(), t);
    match op {
        Op::Setup | Op::IdealSetup | Op::RlweSetup => {
            t.armed = arm;
            setup(p, t)?;
        }
        _ => {
            setup(p, t)?;
            if matches!(op, Op::MuxPooled) {
                drive(p.channel(), p.preprocess_ot(64, 64), t)?;
            }
            t.armed = arm;
            if matches!(op, Op::SilentPooled) {
                drive(p.channel(), p.preprocess_ot(64, 64), t)?;
            }
            let q = q100();
            match op {
                Op::Mul | Op::RlweMul => drive(p.channel(), p.mul(&x, &x), t).map(drop)?,
                Op::Trunc => drive(p.channel(), p.trunc(&x, 13), t).map(drop)?,
                Op::RoundExact => drive(p.channel(), p.trunc_round_exact(&x, 4), t).map(drop)?,
                Op::B2a => drive(p.channel(), p.b2a(&b), t).map(drop)?,
                Op::Mux | Op::MuxPooled | Op::SilentPooled => {
                    drive(p.channel(), p.mux(&b, &x), t).map(drop)?
                }
                Op::Millionaire => {
                    drive(p.channel(), p.millionaire(x.as_slice(), 41), t).map(drop)?
                }
                Op::Input => {
                    let own = (p.id() == PartyId::P1).then_some(&[1u64, 2, 3][..]);
                    drive(p.channel(), p.share_input(PartyId::P1, own, 3), t).map(drop)?
                }
                Op::Reveal => drive(p.channel(), p.reveal(&x), t).map(drop)?,
                Op::Ring2Field => drive(p.channel(), p.ring_to_field(&x, &q), t).map(drop)?,
                Op::Ring2FieldKnownMsb => {
                    drive(p.channel(), p.ring_to_field_known_msb(&x, &q, 30), t).map(drop)?
                }
                Op::Square => drive(p.channel(), p.square_fx(&x, 13), t).map(drop)?,
                Op::MulBounded => {
                    drive(p.channel(), p.mul_bounded_fx(&x, 22, &x, 22, 13), t).map(drop)?
                }
                Op::MulRows => {
                    let y = RingShares::new(vec![3]);
                    drive(p.channel(), p.mul_rows_fx(&x, &y, 3, 13), t).map(drop)?
                }
                Op::Setup | Op::IdealSetup | Op::RlweSetup => unreachable!(),
            }
        }
    }
    drive(p.channel(), p.reveal(&x), t).map(drop)
}

/// One corrupted run: (receiver's error, sender's error).
fn corrupted(kind: MsgKind, sender: PartyId, op: Op, mode: Mode) -> (DriverError, DriverError) {
    let cfg = MpcConfig::ENCFORMER;
    let (t0, t1) = mem_pair(tcfg(5_000));
    let arm = Some((kind.tag(), mode));
    // Each side keeps its transport open until both have their result, so the
    // sender reads the receiver's abort notice instead of racing its close.
    let both_done = std::sync::Barrier::new(2);
    let side = |id: PartyId, t: MemTransport| {
        let mut t = Corrupt {
            inner: t,
            armed: None,
            hit: false,
        };
        let mut p = if matches!(op, Op::IdealSetup) {
            ideal(id, cfg)
        } else if matches!(op, Op::RlweSetup | Op::RlweMul) {
            let mut rng = ChaCha20Rng::from_rng(OsRng).unwrap();
            let params = HeTripleParams::new(cfg.ring.ell).unwrap();
            let src = HeTriples::new(id, params, &mut rng).unwrap();
            Party::new(id, cfg, rng)
                .unwrap()
                .with_triple_source(Box::new(src))
        } else if matches!(op, Op::SilentPooled) {
            Party::with_silent_ot(
                id,
                cfg,
                ChaCha20Rng::from_rng(OsRng).unwrap(),
                INSECURE_SILENT_TEST,
            )
            .unwrap()
        } else {
            Party::new(id, cfg, ChaCha20Rng::from_rng(OsRng).unwrap()).unwrap()
        };
        let r = run_op(&mut p, &mut t, op, if id == sender { arm } else { None });
        let hit = t.hit;
        both_done.wait();
        drop(t);
        assert!(
            id != sender || hit,
            "{kind:?}: no frame of this kind was sent"
        );
        r.expect_err("the run must fail")
    };
    let (e0, e1) = std::thread::scope(|s| {
        let h = s.spawn(|| side(PartyId::P1, t1));
        let e0 = side(PartyId::P0, t0);
        (e0, h.join().unwrap())
    });
    if sender == PartyId::P0 {
        (e1, e0)
    } else {
        (e0, e1)
    }
}

#[test]
fn every_message_kind_malformed_gives_typed_errors_on_both_sides() {
    use Mode::*;
    use MsgKind as K;
    use PartyId::{P0, P1};
    let cases: &[(MsgKind, PartyId, Op, &[Mode])] = &[
        (K::SetupHello, P1, Op::Setup, &[Truncate, Extend, BadPoint]),
        (K::BaseOtReply, P1, Op::Setup, &[Truncate, Extend, BadPoint]),
        (K::SeedShare, P1, Op::IdealSetup, &[Truncate, Extend]),
        (K::IknpU, P1, Op::Mul, &[Truncate, Extend]),
        (K::Derand, P1, Op::MuxPooled, &[Truncate, Extend, Padding]),
        (K::SilentSpcot, P1, Op::SilentPooled, &[Truncate, Extend]),
        (K::TripleCorr, P1, Op::Mul, &[Truncate, Extend, Padding]),
        (K::BeaverOpen, P1, Op::Mul, &[Truncate, Extend, Padding]),
        // RLWE triples: whole-byte payloads (no padding bits); the seeded messages start with
        // their seed, the reply with a residue.
        (K::HeKey, P0, Op::RlweSetup, &[Truncate, Extend]),
        (K::HeUpload, P0, Op::RlweMul, &[Truncate, Extend]),
        (K::HeReply, P1, Op::RlweMul, &[Truncate, Extend, HighValue]),
        (K::TruncCorr, P0, Op::Trunc, &[Truncate, Extend, Padding]),
        (
            K::RoundCorr,
            P0,
            Op::RoundExact,
            &[Truncate, Extend, Padding],
        ),
        (K::B2aCorr, P0, Op::B2a, &[Truncate, Extend, Padding]),
        (K::MuxCorr, P1, Op::Mux, &[Truncate, Extend, Padding]),
        (K::SquareCorr, P0, Op::Square, &[Truncate, Extend, Padding]),
        (
            K::SquareWrapCorr,
            P1,
            Op::Square,
            &[Truncate, Extend, Padding],
        ),
        (K::WideCorr, P1, Op::MulRows, &[Truncate, Extend, Padding]),
        (K::MulCorr, P0, Op::MulBounded, &[Truncate, Extend, Padding]),
        (K::MulCorr, P1, Op::MulBounded, &[Truncate, Extend, Padding]),
        (
            K::CmpLeaf,
            P0,
            Op::Millionaire,
            &[Truncate, Extend, Padding],
        ),
        (K::CmpAnd, P1, Op::Millionaire, &[Truncate, Extend, Padding]),
        (K::Input, P1, Op::Input, &[Truncate, Extend, Padding]),
        (K::Reveal, P1, Op::Reveal, &[Truncate, Extend, Padding]),
        (
            K::ExtB2aCorr,
            P0,
            Op::Ring2Field,
            &[Truncate, Extend, Padding, HighValue],
        ),
        (
            K::ExtMsbCorr,
            P0,
            Op::Ring2FieldKnownMsb,
            &[Truncate, Extend, Padding, HighValue],
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for &(kind, sender, op, modes) in cases {
        seen.insert(kind);
        for &mode in modes {
            let start = Instant::now();
            let (er, es) = corrupted(kind, sender, op, mode);
            let ok = match (&er, mode) {
                (DriverError::Protocol(MpcError::InvalidPoint { msg, .. }), BadPoint) => {
                    *msg == kind
                }
                (DriverError::Protocol(MpcError::Malformed { msg, defect }), _) => {
                    *msg == kind
                        && match mode {
                            Truncate | Extend => {
                                matches!(defect, Defect::Length { .. } | Defect::Truncated { .. })
                            }
                            Padding => *defect == Defect::Padding,
                            HighValue => matches!(defect, Defect::OutOfRange { index: 0 }),
                            BadPoint => false,
                        }
                }
                _ => false,
            };
            assert!(ok, "{kind:?} {mode:?}: receiver got {er:?}");
            assert!(
                matches!(es, DriverError::Transport(TransportError::PeerAborted(_))),
                "{kind:?} {mode:?}: sender got {es:?}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(4),
                "{kind:?} {mode:?}"
            );
        }
    }
    // Every MPC message kind is covered (C2M/M2C are covered by the conversion tests).
    for k in MsgKind::ALL {
        if !matches!(k, MsgKind::C2mCiphertexts | MsgKind::M2cCiphertexts) {
            assert!(seen.contains(&k), "{k:?} not covered");
        }
    }
}
