//! Shared helpers of the MPC integration tests.
#![allow(dead_code)]

pub mod views;

use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, RngCore, SeedableRng};
use std::time::Duration;
use veil_core::mpc::{Frame, MpcConfig, Party, PartyId, RingCfg, RingShares};
use veil_host::mpc::drive;
use veil_host::transport::{mem_pair, TcpTransport, Transport, TransportConfig, TransportError};

pub type P = Party<ChaCha20Rng>;

pub fn tcfg(ms: u64) -> TransportConfig {
    TransportConfig {
        timeout: Duration::from_millis(ms),
        max_frame: 1 << 28,
    }
}

/// `VEIL_TEST_OT=silent`: the parties of [`run_with`] (and [`new_party`]) run with the silent
/// OT (INSECURE test set), and [`run_with`] fills their pools with [`SILENT_POOL`] random COTs
/// per direction right after setup, so the suite's protocol calls up to that size are served
/// by silent COTs (larger ones fall back to IKNP on demand). Tests that pin IKNP byte counts
/// skip those checks in this mode.
pub fn silent_mode() -> bool {
    std::env::var("VEIL_TEST_OT").is_ok_and(|v| v == "silent")
}

/// Random COTs per direction preprocessed by [`run_with`] in [`silent_mode`].
pub const SILENT_POOL: usize = 1 << 18;

pub fn new_party(id: PartyId, cfg: MpcConfig) -> P {
    let rng = ChaCha20Rng::from_rng(OsRng).unwrap();
    if silent_mode() {
        use veil_core::mpc::ot::silent::INSECURE_SILENT_TEST;
        Party::with_silent_ot(id, cfg, rng, INSECURE_SILENT_TEST).unwrap()
    } else {
        Party::new(id, cfg, rng).unwrap()
    }
}

/// Setup, then (in [`silent_mode`]) the silent pools.
fn setup_party<T: Transport>(p: &mut P, t: &mut T) {
    drive(p.channel(), p.setup(), t).unwrap();
    if silent_mode() {
        drive(p.channel(), p.preprocess_ot(SILENT_POOL, SILENT_POOL), t).unwrap();
        let st = p.silent_stats().expect("a silent party");
        assert!(st.extensions > 0 && st.handed_out >= SILENT_POOL as u64);
    }
}

/// Runs `f0` (P0) and `f1` (P1) in two threads over `t0`/`t1`, after setup.
pub fn run_with<T0, T1, A, B, F0, F1>(
    cfg: MpcConfig,
    mut t0: T0,
    mut t1: T1,
    f0: F0,
    f1: F1,
) -> (A, B)
where
    T0: Transport,
    T1: Transport,
    A: Send,
    B: Send,
    F0: FnOnce(&mut P, &mut T0) -> A + Send,
    F1: FnOnce(&mut P, &mut T1) -> B + Send,
{
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            let mut p = new_party(PartyId::P1, cfg);
            setup_party(&mut p, &mut t1);
            f1(&mut p, &mut t1)
        });
        let mut p = new_party(PartyId::P0, cfg);
        setup_party(&mut p, &mut t0);
        let a = f0(&mut p, &mut t0);
        (a, h.join().unwrap())
    })
}

/// Both parties over the in-memory duplex.
pub fn run_mem<A: Send, B: Send>(
    cfg: MpcConfig,
    f0: impl FnOnce(&mut P, &mut veil_host::transport::MemTransport) -> A + Send,
    f1: impl FnOnce(&mut P, &mut veil_host::transport::MemTransport) -> B + Send,
) -> (A, B) {
    let (t0, t1) = mem_pair(tcfg(20_000));
    run_with(cfg, t0, t1, f0, f1)
}

/// A connected TCP pair on 127.0.0.1.
pub fn tcp_pair(cfg: TransportConfig) -> (TcpTransport, TcpTransport) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || TcpTransport::connect(addr, cfg).unwrap());
    let a = TcpTransport::accept(&l, cfg).unwrap();
    (a, h.join().unwrap())
}

pub fn seeded(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// Random signed values in `[-2^(bits-1), 2^(bits-1))` plus edge values.
pub fn values(rng: &mut ChaCha20Rng, n: usize, bits: u32) -> Vec<i64> {
    // Valid for every width up to 64 bits (no shift or negation overflows).
    let lo = (-1i64) << (bits - 1);
    let hi = !lo;
    let mask = u64::MAX >> (64 - bits);
    let mut v: Vec<i64> = (0..n)
        .map(|_| ((rng.next_u64() & mask) as i64).wrapping_add(lo))
        .collect();
    v.extend([0, 1, -1, hi, lo, hi - 1, lo + 1, hi / 2, lo / 2]);
    v
}

pub fn share(r: &RingCfg, xs: &[i64], rng: &mut ChaCha20Rng) -> (RingShares, RingShares) {
    let a: Vec<u64> = xs.iter().map(|_| rng.next_u64() & r.mask()).collect();
    let b: Vec<u64> = xs
        .iter()
        .zip(&a)
        .map(|(&x, &a)| r.sub(r.from_signed(x), a))
        .collect();
    (RingShares::new(a), RingShares::new(b))
}

pub fn open(r: &RingCfg, a: &RingShares, b: &RingShares) -> Vec<i64> {
    a.as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(&x, &y)| r.to_signed(r.add(x, y)))
        .collect()
}

/// Transport wrapper recording every frame received.
pub struct Recorder<T: Transport> {
    pub inner: T,
    pub log: Vec<Frame>,
}

impl<T: Transport> Transport for Recorder<T> {
    fn send(&mut self, frames: Vec<Frame>) -> Result<(), TransportError> {
        self.inner.send(frames)
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        let f = self.inner.recv()?;
        self.log.push(f.clone());
        Ok(f)
    }
}
