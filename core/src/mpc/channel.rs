//! Sans-IO message channel, sessions and communication accounting.
//!
//! A protocol runs as an `async` state machine that calls
//! [`Channel::send_msg`] and awaits [`Channel::recv_msg`]. `recv` never blocks: when
//! the peer's frame has not been delivered yet it returns `Pending`, and the
//! [`Session`] reports `Poll::Pending` to its driver, which then flushes
//! [`Session::take_outgoing`] to the transport (all frames of the round in one
//! batch) and delivers the next incoming frame with [`Session::deliver`].
//!
//! # Round counting
//!
//! Each frame carries a depth `d(m) = 1 + max{d(m') : m' received before m
//! was sent}`, counted from the start of the session. The number of rounds of
//! a protocol run is the largest depth, i.e. the number of one-way latencies
//! on the critical path; two frames sent simultaneously by both parties count
//! as one round.

use crate::mpc::error::{MpcError, Result};
use crate::mpc::msgs::{Message, MsgKind};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

/// Per-frame overhead counted in the statistics (tag, depth, length).
pub const FRAME_OVERHEAD: u64 = 10;

/// One protocol message on the wire: a tag naming the protocol step (one of
/// [`MsgKind`], though a peer may send anything), the Lamport depth and the
/// packed payload (formats in [`crate::mpc::msgs`]).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Frame {
    /// Protocol step identifier.
    pub tag: u16,
    /// Causal depth (round number) of this message.
    pub depth: u32,
    /// Packed payload.
    pub payload: Vec<u8>,
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Frame {{ tag: {}, depth: {}, {} bytes }}",
            self.tag,
            self.depth,
            self.payload.len()
        )
    }
}

/// Phase to which communication is accounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// One-time setup (base OTs).
    Setup,
    /// Input-independent preprocessing (triples, random OTs).
    Offline,
    /// Input-dependent phase.
    Online,
}

/// Counters of one phase, as seen by one party.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PhaseStats {
    /// Bytes sent (payload + [`FRAME_OVERHEAD`] per frame).
    pub bytes_sent: u64,
    /// Bytes received (payload + [`FRAME_OVERHEAD`] per frame).
    pub bytes_recv: u64,
    /// Frames sent.
    pub frames_sent: u64,
    /// Rounds (causal depth) spent in this phase.
    pub rounds: u32,
}

impl PhaseStats {
    fn add(&mut self, o: &PhaseStats) {
        self.bytes_sent += o.bytes_sent;
        self.bytes_recv += o.bytes_recv;
        self.frames_sent += o.frames_sent;
        self.rounds += o.rounds;
    }
}

/// Counters of all phases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Setup phase.
    pub setup: PhaseStats,
    /// Offline phase.
    pub offline: PhaseStats,
    /// Online phase.
    pub online: PhaseStats,
}

impl Stats {
    /// Sum of offline and online (what per-primitive benchmarks report).
    pub fn offline_online(&self) -> PhaseStats {
        let mut s = self.offline;
        s.add(&self.online);
        s
    }
    /// Component-wise difference `self - earlier` (for measuring one call).
    pub fn since(&self, e: &Stats) -> Stats {
        let d = |a: &PhaseStats, b: &PhaseStats| PhaseStats {
            bytes_sent: a.bytes_sent - b.bytes_sent,
            bytes_recv: a.bytes_recv - b.bytes_recv,
            frames_sent: a.frames_sent - b.frames_sent,
            rounds: a.rounds - b.rounds,
        };
        Stats {
            setup: d(&self.setup, &e.setup),
            offline: d(&self.offline, &e.offline),
            online: d(&self.online, &e.online),
        }
    }
}

#[derive(Default)]
struct Inner {
    outbox: Vec<Frame>,
    inbox: VecDeque<Frame>,
    phase_idx: usize,
    /// Max depth of frames received.
    recv_depth: u32,
    /// Max depth seen (sent or received).
    clock: u32,
    /// Clock at the start of the current phase span.
    phase_base: u32,
    /// Rounds accumulated per phase over previous spans.
    stats: [PhaseStats; 3],
    span_rounds: u32,
    poisoned: bool,
}

impl Inner {
    fn bump_rounds(&mut self) {
        let r = self.clock - self.phase_base;
        if r > self.span_rounds {
            let p = self.phase_idx;
            self.stats[p].rounds += r - self.span_rounds;
            self.span_rounds = r;
        }
    }
}

/// Shared handle to the message buffers of one party (cheap to clone).
#[derive(Clone, Default)]
pub struct Channel(Rc<RefCell<Inner>>);

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.0.borrow();
        write!(
            f,
            "Channel {{ outbox: {}, inbox: {} }}",
            i.outbox.len(),
            i.inbox.len()
        )
    }
}

fn phase_index(p: Phase) -> usize {
    match p {
        Phase::Setup => 0,
        Phase::Offline => 1,
        Phase::Online => 2,
    }
}

impl Channel {
    /// New empty channel (phase [`Phase::Online`]).
    pub fn new() -> Self {
        let c = Channel::default();
        c.0.borrow_mut().phase_idx = 2;
        c
    }

    /// Switches the accounting phase; returns the previous one.
    pub fn set_phase(&self, p: Phase) -> Phase {
        let mut i = self.0.borrow_mut();
        let old = [Phase::Setup, Phase::Offline, Phase::Online][i.phase_idx];
        i.phase_idx = phase_index(p);
        i.phase_base = i.clock;
        i.span_rounds = 0;
        old
    }

    /// Marks the channel (and so its party) as failed: every later receive
    /// and every OT use returns [`MpcError::Poisoned`].
    pub fn poison(&self) {
        self.0.borrow_mut().poisoned = true;
    }

    /// True after [`Channel::poison`].
    pub fn is_poisoned(&self) -> bool {
        self.0.borrow().poisoned
    }

    /// Queues a typed message for the peer.
    pub fn send_msg<M: Message>(&self, m: &M) {
        self.send(M::KIND, m.encode());
    }

    /// [`Channel::send_msg`] of a message given up to the channel: its payload moves into the
    /// frame without a copy where the message holds it ([`Message::into_payload`]).
    pub fn send_owned<M: Message>(&self, m: M) {
        self.send(M::KIND, m.into_payload());
    }

    /// Waits for the next frame, which must be a message `M` of the given
    /// shape ([`MpcError::UnexpectedMessage`] or a decoding error otherwise).
    pub async fn recv_msg<M: Message>(&self, shape: &M::Shape) -> Result<M> {
        let payload = self.recv(M::KIND).await?;
        M::decode_payload(payload, shape)
    }

    fn send(&self, kind: MsgKind, payload: Vec<u8>) {
        let tag = kind.tag();
        let mut i = self.0.borrow_mut();
        let depth = i.recv_depth.saturating_add(1);
        i.clock = i.clock.max(depth);
        i.bump_rounds();
        let p = i.phase_idx;
        i.stats[p].bytes_sent += payload.len() as u64 + FRAME_OVERHEAD;
        i.stats[p].frames_sent += 1;
        i.outbox.push(Frame {
            tag,
            depth,
            payload,
        });
    }

    fn recv(&self, kind: MsgKind) -> Recv {
        Recv {
            ch: self.clone(),
            kind,
        }
    }

    /// Largest frame depth sent or received in the current session (this
    /// party's Lamport clock, reset when a [`Session`] starts). After a run,
    /// `max(depth_0, depth_1)` over the two parties is its exact number of
    /// rounds.
    pub fn depth(&self) -> u32 {
        self.0.borrow().clock
    }

    /// Restarts the depth count (both parties do this at the start of each
    /// session, so depths are session-relative and per-run round counts do
    /// not depend on how the previous run ended).
    fn begin_session(&self) {
        let mut i = self.0.borrow_mut();
        i.recv_depth = 0;
        i.clock = 0;
        i.phase_base = 0;
        i.span_rounds = 0;
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        let i = self.0.borrow();
        Stats {
            setup: i.stats[0],
            offline: i.stats[1],
            online: i.stats[2],
        }
    }

    fn take_outgoing(&self) -> Vec<Frame> {
        core::mem::take(&mut self.0.borrow_mut().outbox)
    }

    fn deliver(&self, f: Frame) {
        self.0.borrow_mut().inbox.push_back(f);
    }
}

/// Future of one raw receive (the payload of the next frame, of a given kind).
struct Recv {
    ch: Channel,
    kind: MsgKind,
}

impl Future for Recv {
    type Output = Result<Vec<u8>>;
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut i = self.ch.0.borrow_mut();
        if i.poisoned {
            return Poll::Ready(Err(MpcError::Poisoned));
        }
        match i.inbox.pop_front() {
            None => Poll::Pending,
            Some(f) => {
                let p = i.phase_idx;
                i.stats[p].bytes_recv += f.payload.len() as u64 + FRAME_OVERHEAD;
                i.recv_depth = i.recv_depth.max(f.depth);
                i.clock = i.clock.max(f.depth);
                i.bump_rounds();
                if f.tag != self.kind.tag() {
                    return Poll::Ready(Err(MpcError::UnexpectedMessage {
                        expected: self.kind,
                        got: f.tag,
                    }));
                }
                Poll::Ready(Ok(f.payload))
            }
        }
    }
}

/// A running protocol: the state machine plus its channel. `E` is the
/// protocol's error type (the engine's [`MpcError`], or the error of a
/// protocol built on top of it that wraps `MpcError`).
pub struct Session<'a, T, E = MpcError> {
    fut: Pin<Box<dyn Future<Output = core::result::Result<T, E>> + 'a>>,
    ch: Channel,
    done: bool,
}

impl<T, E> fmt::Debug for Session<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Session {{ done: {}, {:?} }}", self.done, self.ch)
    }
}

impl<'a, T, E: From<MpcError>> Session<'a, T, E> {
    /// Wraps a protocol future running over `ch`.
    pub fn new(ch: Channel, fut: impl Future<Output = core::result::Result<T, E>> + 'a) -> Self {
        ch.begin_session();
        Session {
            fut: Box::pin(fut),
            ch,
            done: false,
        }
    }

    /// Advances the state machine as far as possible without new input.
    /// After `Ready`, further polls return an error.
    pub fn poll(&mut self) -> Poll<core::result::Result<T, E>> {
        if self.done {
            return Poll::Ready(Err(MpcError::SessionFinished.into()));
        }
        if self.ch.is_poisoned() {
            self.done = true;
            return Poll::Ready(Err(MpcError::Poisoned.into()));
        }
        let mut cx = Context::from_waker(Waker::noop());
        match self.fut.as_mut().poll(&mut cx) {
            Poll::Ready(r) => {
                self.done = true;
                if r.is_err() {
                    self.ch.poison();
                }
                Poll::Ready(r)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Frames produced since the last call (one round's batch).
    pub fn take_outgoing(&self) -> Vec<Frame> {
        self.ch.take_outgoing()
    }

    /// Marks the party as failed (the driver calls this on transport errors).
    pub fn poison(&self) {
        self.ch.poison()
    }

    /// Delivers a frame received from the peer.
    pub fn deliver(&self, f: Frame) {
        self.ch.deliver(f)
    }

    /// Counters of the underlying channel.
    pub fn stats(&self) -> Stats {
        self.ch.stats()
    }
}

/// Runs two sessions against each other in memory (single thread); for
/// tests of the core crate. Returns both results.
pub fn run_pair<A, B, E: From<MpcError>>(
    mut s0: Session<'_, A, E>,
    mut s1: Session<'_, B, E>,
) -> (core::result::Result<A, E>, core::result::Result<B, E>) {
    let mut r0 = None;
    let mut r1 = None;
    loop {
        let mut progressed = false;
        if r0.is_none() {
            if let Poll::Ready(r) = s0.poll() {
                r0 = Some(r);
                progressed = true;
            }
        }
        if r1.is_none() {
            if let Poll::Ready(r) = s1.poll() {
                r1 = Some(r);
                progressed = true;
            }
        }
        for f in s0.take_outgoing() {
            progressed = true;
            s1.deliver(f);
        }
        for f in s1.take_outgoing() {
            progressed = true;
            s0.deliver(f);
        }
        if r0.is_some() && r1.is_some() {
            break;
        }
        if !progressed {
            // Deadlock: neither side can move.
            return (
                r0.unwrap_or_else(|| Err(MpcError::Deadlock.into())),
                r1.unwrap_or_else(|| Err(MpcError::Deadlock.into())),
            );
        }
    }
    (r0.unwrap(), r1.unwrap())
}
