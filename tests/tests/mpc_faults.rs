//! Fault tests: a peer that disconnects mid-protocol, sends garbage, or stops
//! sending. Each case must give a typed error on both sides, well within the
//! receive timeout where no timeout is involved, without panics or hangs.

mod mpc_common;
use mpc_common::*;
use std::time::{Duration, Instant};
use veil_core::mpc::{Frame, MpcConfig, MpcError, MsgKind, PartyId, RingShares};
use veil_host::mpc::{drive, DriverError};
use veil_host::transport::{
    encode_frames, mem_pair, MemTransport, TcpTransport, Transport, TransportError,
};

/// Forwards `sends_left` batches, then drops the connection.
struct CutAfter<T: Transport> {
    inner: Option<T>,
    sends_left: usize,
}

impl<T: Transport> Transport for CutAfter<T> {
    fn send(&mut self, frames: Vec<Frame>) -> Result<(), TransportError> {
        if self.sends_left == 0 {
            self.inner = None; // closes the connection
            return Err(TransportError::Disconnected);
        }
        self.sends_left -= 1;
        self.inner
            .as_mut()
            .ok_or(TransportError::Disconnected)?
            .send(frames)
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        self.inner
            .as_mut()
            .ok_or(TransportError::Disconnected)?
            .recv()
    }
}

trait Raw: Transport {
    fn raw(&mut self, b: Vec<u8>);
}
impl Raw for MemTransport {
    fn raw(&mut self, b: Vec<u8>) {
        self.send_raw(b).unwrap()
    }
}
impl Raw for TcpTransport {
    fn raw(&mut self, b: Vec<u8>) {
        self.send_raw(b).unwrap()
    }
}

fn x64() -> RingShares {
    RingShares::new((0..64u64).collect())
}

const TIMEOUT_MS: u64 = 600;

fn run_cut<T0: Transport, T1: Transport>(
    cfg: MpcConfig,
    mut t0: T0,
    t1: T1,
    cut: usize,
) -> (DriverError, DriverError) {
    let x = x64();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut p = new_party(PartyId::P1, cfg);
            let mut t1 = t1;
            drive(p.channel(), p.setup(), &mut t1).unwrap();
            let mut c = CutAfter {
                inner: Some(t1),
                sends_left: cut,
            };
            drive(p.channel(), p.relu(&x), &mut c).unwrap_err()
        });
        let mut p = new_party(PartyId::P0, cfg);
        drive(p.channel(), p.setup(), &mut t0).unwrap();
        let e0 = drive(p.channel(), p.relu(&x), &mut t0).unwrap_err();
        (e0, h.join().unwrap())
    })
}

#[test]
fn disconnect_mid_protocol() {
    let cfg = MpcConfig::ENCFORMER;
    for tcp in [false, true] {
        for cut in [0usize, 1, 3] {
            let start = Instant::now();
            let big = tcfg(10_000);
            let (e0, e1) = if tcp {
                let (t0, t1) = tcp_pair(big);
                run_cut(cfg, t0, t1, cut)
            } else {
                let (t0, t1) = mem_pair(big);
                run_cut(cfg, t0, t1, cut)
            };
            let el = start.elapsed();
            assert!(
                matches!(
                    e0,
                    DriverError::Transport(
                        TransportError::Disconnected | TransportError::PeerAborted(_)
                    )
                ),
                "tcp={tcp} cut={cut}: P0 got {e0:?}"
            );
            assert_eq!(
                e1,
                DriverError::Transport(TransportError::Disconnected),
                "tcp={tcp} cut={cut}"
            );
            // Detected from the closed connection, not by waiting for the 10 s timeout.
            assert!(el < Duration::from_secs(3), "took {el:?}");
        }
    }
}

fn frame(tag: u16, payload: Vec<u8>) -> Vec<u8> {
    encode_frames(&[Frame {
        tag,
        depth: 1,
        payload,
    }])
}

/// The fake peer completes setup honestly, then sends `garbage` instead of
/// its protocol messages (or, with `None`, nothing at all). Returns P0's error,
/// the time P0 took, and what the fake peer then receives.
fn garbage_case<T0: Transport, T1: Raw>(
    t0: T0,
    t1: T1,
    garbage: Option<Vec<u8>>,
    in_setup: bool,
) -> (DriverError, Duration, TransportError) {
    let cfg = MpcConfig::ENCFORMER;
    let x = x64();
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            let mut t1 = t1;
            if !in_setup {
                let mut p = new_party(PartyId::P1, cfg);
                drive(p.channel(), p.setup(), &mut t1).unwrap();
            }
            match garbage {
                Some(g) => t1.raw(g),
                None => std::thread::sleep(Duration::from_millis(3 * TIMEOUT_MS)),
            }
            // Drain until the abort notice (or disconnect) arrives; the fake
            // peer's own receive deadline may expire first while P0 is still
            // waiting for its own timeout, so tolerate a few timeouts.
            let mut timeouts = 0;
            loop {
                match t1.recv() {
                    Ok(_) => continue,
                    Err(TransportError::Timeout) if timeouts < 4 => timeouts += 1,
                    Err(e) => return e,
                }
            }
        });
        let mut t0 = t0;
        let mut p = new_party(PartyId::P0, cfg);
        let start = Instant::now();
        let e0 = if in_setup {
            drive(p.channel(), p.setup(), &mut t0).unwrap_err()
        } else {
            drive(p.channel(), p.setup(), &mut t0).unwrap();
            let start2 = Instant::now();
            let e = drive(p.channel(), p.mul(&x, &x), &mut t0).unwrap_err();
            let el = start2.elapsed();
            drop(t0);
            return (e, el, h.join().unwrap());
        };
        let el = start.elapsed();
        drop(t0);
        (e0, el, h.join().unwrap())
    })
}

/// The timeout cases accept an elapsed time down to 95% of the configured timeout: a TCP
/// socket's receive timeout (`SO_RCVTIMEO`) fires on the kernel's timer tick, which can be a few
/// milliseconds before the requested instant as `Instant` measures it (seen: 596 ms for 600).
fn check_cases<F>(run: F, label: &str)
where
    F: Fn(Option<Vec<u8>>, bool) -> (DriverError, Duration, TransportError),
{
    let fast = Duration::from_millis(TIMEOUT_MS / 2);
    let peer_ok = |e: &TransportError| {
        matches!(
            e,
            TransportError::PeerAborted(_) | TransportError::Disconnected
        )
    };
    // Random bytes.
    let (e, el, pe) = run(Some(vec![0x13; 40]), false);
    assert_eq!(
        e,
        DriverError::Transport(TransportError::Malformed("bad magic")),
        "{label}"
    );
    assert!(el < fast && peer_ok(&pe), "{label}: {el:?} {pe:?}");
    // Unsupported version.
    let mut g = frame(MsgKind::IknpU.tag(), vec![0; 8]);
    g[1] = 9;
    let (e, el, pe) = run(Some(g), false);
    assert_eq!(
        e,
        DriverError::Transport(TransportError::Malformed("unsupported version")),
        "{label}"
    );
    assert!(el < fast && peer_ok(&pe), "{label}");
    // Oversized frame header.
    let mut g = frame(MsgKind::IknpU.tag(), vec![]);
    g[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let (e, el, pe) = run(Some(g), false);
    assert!(
        matches!(e, DriverError::Transport(TransportError::TooLarge { .. })),
        "{label}: {e:?}"
    );
    assert!(el < fast && peer_ok(&pe), "{label}");
    // Well-formed frame, wrong protocol step.
    let (e, el, pe) = run(Some(frame(0x7777, vec![1, 2, 3])), false);
    assert_eq!(
        e,
        DriverError::Protocol(MpcError::UnexpectedMessage {
            expected: MsgKind::IknpU,
            got: 0x7777
        }),
        "{label}"
    );
    assert!(el < fast && peer_ok(&pe), "{label}");
    // Right step, wrong payload size.
    let (e, el, pe) = run(Some(frame(MsgKind::IknpU.tag(), vec![0; 5])), false);
    assert!(
        matches!(
            e,
            DriverError::Protocol(MpcError::Malformed {
                msg: MsgKind::IknpU,
                ..
            })
        ),
        "{label}: {e:?}"
    );
    assert!(el < fast && peer_ok(&pe), "{label}");
    // Invalid curve points during setup.
    let (e, el, pe) = run(Some(frame(MsgKind::SetupHello.tag(), vec![0xff; 48])), true);
    assert_eq!(
        e,
        DriverError::Protocol(MpcError::InvalidPoint {
            msg: MsgKind::SetupHello,
            index: 0
        }),
        "{label}"
    );
    assert!(el < fast && peer_ok(&pe), "{label}");
    // Truncated frame, then silence: timeout.
    let mut g = frame(MsgKind::IknpU.tag(), vec![0; 100]);
    g.truncate(40);
    let (e, el, pe) = run(Some(g), false);
    assert_eq!(
        e,
        DriverError::Transport(TransportError::Timeout),
        "{label}"
    );
    assert!(
        el >= Duration::from_millis(TIMEOUT_MS * 95 / 100)
            && el < Duration::from_millis(3 * TIMEOUT_MS),
        "{label}: {el:?}"
    );
    assert!(peer_ok(&pe), "{label}: {pe:?}");
    // Peer stops sending entirely: timeout on P0, abort notice at the peer.
    let (e, el, pe) = run(None, false);
    assert_eq!(
        e,
        DriverError::Transport(TransportError::Timeout),
        "{label}"
    );
    assert!(
        el >= Duration::from_millis(TIMEOUT_MS * 95 / 100)
            && el < Duration::from_millis(3 * TIMEOUT_MS),
        "{label}: {el:?}"
    );
    assert!(peer_ok(&pe), "{label}: {pe:?}");
}

#[test]
fn garbage_and_stall_memory() {
    check_cases(
        |g, setup| {
            let (t0, t1) = mem_pair(tcfg(TIMEOUT_MS));
            garbage_case(t0, t1, g, setup)
        },
        "memory",
    );
}

#[test]
fn garbage_and_stall_tcp() {
    check_cases(
        |g, setup| {
            let (t0, t1) = tcp_pair(tcfg(TIMEOUT_MS));
            garbage_case(t0, t1, g, setup)
        },
        "tcp",
    );
}

/// A timeout in the middle of a frame loses no bytes: once the rest arrives
/// the frame is delivered intact (memory and TCP).
#[test]
fn timeout_mid_frame_keeps_stream_aligned() {
    fn check<A: Raw, B: Transport>(mut a: A, mut b: B) {
        let f = Frame {
            tag: 7,
            depth: 3,
            payload: (0..200u8).collect(),
        };
        let bytes = frame_bytes(&f);
        a.raw(bytes[..50].to_vec());
        assert_eq!(b.recv(), Err(TransportError::Timeout));
        a.raw(bytes[50..].to_vec());
        assert_eq!(b.recv(), Ok(f));
    }
    let (a, b) = mem_pair(tcfg(200));
    check(a, b);
    let (a, b) = tcp_pair(tcfg(200));
    check(a, b);
}

fn frame_bytes(f: &Frame) -> Vec<u8> {
    encode_frames(std::slice::from_ref(f))
}

/// After a failed run the party refuses further work instead of computing
/// with OT state that is out of sync with its peer.
#[test]
fn failed_party_is_poisoned() {
    let cfg = MpcConfig::ENCFORMER;
    let (t0, t1) = mem_pair(tcfg(TIMEOUT_MS));
    let x = x64();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut t1 = t1;
            let mut p = new_party(PartyId::P1, cfg);
            drive(p.channel(), p.setup(), &mut t1).unwrap();
            t1.raw(frame(0x7777, vec![0; 4]));
            while t1.recv().is_ok() {}
        });
        let mut t0 = t0;
        let mut p = new_party(PartyId::P0, cfg);
        drive(p.channel(), p.setup(), &mut t0).unwrap();
        let e = drive(p.channel(), p.mul(&x, &x), &mut t0).unwrap_err();
        assert!(
            matches!(e, DriverError::Protocol(MpcError::UnexpectedMessage { .. })),
            "{e:?}"
        );
        let start = Instant::now();
        let e = drive(p.channel(), p.relu(&x), &mut t0).unwrap_err();
        assert_eq!(e, DriverError::Protocol(MpcError::Poisoned));
        assert!(start.elapsed() < Duration::from_millis(100));
        let q = veil_core::mpc::Modulus::from_primes(&[0xffff_ffff_0000_0001, 1 << 40]).unwrap();
        let f = veil_core::mpc::FieldShares::new(vec![1]);
        assert_eq!(p.field_to_ring(&f, &q).unwrap_err(), MpcError::Poisoned);
        drop(t0);
    });
}

/// Parties that disagree (different lengths, different protocols) get typed
/// errors on both sides instead of a hang or garbage results.
#[test]
fn mismatched_calls_fail_on_both_sides() {
    let cfg = MpcConfig::ENCFORMER;
    let a = RingShares::new(vec![1; 10]);
    let b = RingShares::new(vec![1; 11]);
    let (t0, t1) = mem_pair(tcfg(2_000));
    let start = Instant::now();
    let (e0, e1) = run_with(
        cfg,
        t0,
        t1,
        |p, t| drive(p.channel(), p.mul(&a, &a), t).unwrap_err(),
        |p, t| drive(p.channel(), p.mul(&b, &b), t).unwrap_err(),
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    for e in [&e0, &e1] {
        assert!(
            matches!(
                e,
                DriverError::Protocol(MpcError::Malformed { .. })
                    | DriverError::Transport(TransportError::PeerAborted(_))
            ),
            "{e:?}"
        );
    }
    let (t0, t1) = tcp_pair(tcfg(2_000));
    let (e0, e1) = run_with(
        cfg,
        t0,
        t1,
        |p, t| drive(p.channel(), p.mul(&a, &a), t).unwrap_err(),
        |p, t| drive(p.channel(), p.relu(&a), t).unwrap_err(),
    );
    for e in [&e0, &e1] {
        assert!(
            matches!(
                e,
                DriverError::Protocol(
                    MpcError::Malformed { .. } | MpcError::UnexpectedMessage { .. }
                ) | DriverError::Transport(TransportError::PeerAborted(_))
            ),
            "{e:?}"
        );
    }
}

/// Corrupts the `k`-th batch an honest party sends: truncate, extend, flip a
/// byte or change the tag of its first frame.
struct Mutate<T: Transport> {
    inner: T,
    k: usize,
    mode: u8,
    sent: usize,
}

impl<T: Transport> Transport for Mutate<T> {
    fn send(&mut self, mut frames: Vec<Frame>) -> Result<(), TransportError> {
        if self.sent == self.k {
            let f = &mut frames[0];
            match self.mode {
                0 => {
                    f.payload.pop();
                }
                1 => f.payload.push(0x5a),
                2 => {
                    let mid = f.payload.len() / 2;
                    if let Some(b) = f.payload.get_mut(mid) {
                        *b ^= 0x10;
                    }
                }
                _ => f.tag ^= 0x0400,
            }
        }
        self.sent += 1;
        self.inner.send(frames)
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        self.inner.recv()
    }
}

/// Structural corruption anywhere in mul, ReLU and Ring2Field is detected
/// (typed error on both sides, never a panic or a hang); bit flips inside a
/// payload cannot be detected in the semi-honest model but must not panic.
#[test]
fn corrupted_messages_never_panic() {
    let cfg = MpcConfig::ENCFORMER;
    let x = x64();
    let q = veil_core::mpc::Modulus::from_primes(&[0xffff_ffff_0000_0001, 1 << 40]).unwrap();
    for op in 0..3 {
        for k in [0usize, 1, 2, 4, 6] {
            for mode in 0..4u8 {
                let (t0, t1) = mem_pair(tcfg(2_000));
                let t1 = Mutate {
                    inner: t1,
                    k: usize::MAX, // disabled during setup, armed below
                    mode,
                    sent: 0,
                };
                let run = |p: &mut P, t: &mut dyn Transport| -> Result<(), DriverError> {
                    match op {
                        0 => drive(p.channel(), p.mul(&x, &x), t).map(drop),
                        1 => drive(p.channel(), p.relu(&x), t).map(drop),
                        _ => drive(p.channel(), p.ring_to_field(&x, &q), t).map(drop),
                    }
                };
                let start = Instant::now();
                let (r0, r1) = run_with(
                    cfg,
                    t0,
                    t1,
                    |p, t| run(p, t),
                    |p, t| {
                        t.sent = 0;
                        t.k = k;
                        run(p, t)
                    },
                );
                assert!(start.elapsed() < Duration::from_secs(5));
                if mode != 2 && k < 2 {
                    // The first two batches exist in every protocol here.
                    assert!(
                        r0.is_err() || r1.is_err(),
                        "op {op} k {k} mode {mode}: corruption undetected"
                    );
                }
            }
        }
    }
}
