//! Oblivious transfer.
//!
//! * [`base`]: Chou–Orlandi "simplest OT" (LATINCRYPT 2015) on Ristretto255,
//!   128 instances per direction, run once in setup.
//! * [`iknp`]: IKNP OT extension (Ishai–Kilian–Nissim–Petrank, CRYPTO 2003)
//!   producing correlated OT `(q_j, q_j ⊕ Δ)` / `t_j = q_j ⊕ r_j·Δ` in batches
//!   of any size (semi-honest; the KOS consistency check is not needed in
//!   this model).
//! * [`pool`]: random-COT pools filled offline and derandomized online
//!   (1 bit per OT), the shape in which a silent OT plugs in.
//! * [`silent`]: the Ferret silent OT (Yang et al. CCS 2020, semi-honest),
//!   a random-COT generator at ≈ 0.45 bit per COT that fills the pools;
//!   bootstrapped once from IKNP.
//! * [`CrHash`]: tweakable correlation-robust hash from fixed-key AES,
//!   `H(x, i) = π(π(x) ⊕ i) ⊕ π(x)` (Guo–Katz–Wang–Yu, S&P 2020), turning
//!   COT into random OT and into `k`-bit correlated OT.
//!
//! The protocols above only use [`CotSender`]/[`CotReceiver`], so a silent OT
//! (Ferret, Yang et al. CCS 2020) can replace IKNP without touching them: a
//! party built with [`crate::mpc::Party::with_ot`] runs every protocol over
//! the injected pair.
//!
//! # Contract relied on by the protocols
//!
//! 1. **Pairing.** This party's [`CotSender`] and the peer's [`CotReceiver`]
//!    form one COT functionality (and vice versa): for each `extend` the
//!    sender gets `q_j` and the receiver `t_j = q_j ⊕ r_j·Δ` for its choice
//!    bits `r_j`, with one fixed secret `Δ` per sender ([`CotSender::delta`]).
//! 2. **Order.** Both parties call `extend` (and `fill`) in the same order
//!    with the same sizes; the protocols never call them concurrently.
//! 3. **Receiver never waits.** [`CotReceiver::extend`] only sends (or does
//!    nothing) and returns without awaiting a frame, so both parties can call
//!    it before their [`CotSender::extend`] and the two directions share one
//!    round. [`CotSender::extend`] may await what the peer's receiver sent.
//! 4. **Typed failures.** Every failure (a malformed peer message, a pool
//!    mismatch) is an `Err`, never a panic; after one the party is poisoned.
//! 5. **Fresh outputs.** Outputs of different calls are independent; the
//!    hash tweaks of [`OtEngine`] count COTs, so they never repeat.
//!
//! An optional pool ([`CotSender::fill`]/[`CotReceiver::fill`]) precomputes
//! random COTs offline; [`pool`] adds one to any generator. A silent OT
//! fits this contract as a *pool*: Ferret fills a store of random COTs
//! `(q'_j, t'_j = q'_j ⊕ r'_j·Δ)` in the offline phase (its own interactive
//! rounds, run sequentially), and `extend` derandomizes with Beaver's trick:
//! the receiver sends `d_j = r_j ⊕ r'_j` (1 bit per OT, send-only) and the
//! sender sets `q_j = q'_j ⊕ d_j·Δ`. IKNP costs 128 bits per COT on the wire;
//! Ferret's amortized cost is on the order of one bit per COT or less, plus
//! the 1-bit derandomization.
//!
//! Pools are filled through [`CotSender::extend_random`] /
//! [`CotReceiver::extend_random`]: random COTs whose choice bits the
//! generator may pick itself (IKNP takes the suggested uniform bits, the
//! silent OT of [`silent`] returns its own LPN-derived bits). A generator whose
//! `extend_random` flows the other way (the sender only sends, the receiver
//! waits: [`silent`]) says so with [`CotSender::random_sender_sends`], and
//! [`crate::mpc::Party::preprocess_ot`] then runs the sender fills first.

pub mod base;
pub mod iknp;
pub mod pool;
pub mod silent;

use crate::mpc::channel::Channel;
use crate::mpc::error::Result;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;

/// Boxed future (the OT traits must be object safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Future of a batch of COT outputs (the `q_j` of a sender, the `t_j` of a
/// receiver): the return type of the OT traits' `extend` methods.
pub type BlocksFuture<'a> = BoxFuture<'a, Result<Vec<u128>>>;

/// Sender side of a correlated-OT generator with global offset `Δ`.
pub trait CotSender {
    /// The global correlation `Δ` (secret; bit 0 may be anything).
    fn delta(&self) -> u128;
    /// Produces `m` blocks `q_j`; the receiver obtains `q_j ⊕ r_j·Δ`.
    fn extend<'a>(&'a mut self, ch: &'a Channel, m: usize) -> BlocksFuture<'a>;
    /// Precomputes `m` random COTs for later [`CotSender::extend`] calls
    /// (implementations without a pool return an error).
    fn fill<'a>(&'a mut self, _ch: &'a Channel, _m: usize) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Err(crate::mpc::MpcError::InvalidConfig("this OT has no pool")) })
    }
    /// Produces `m` *random* COTs `q_j`: the paired
    /// [`CotReceiver::extend_random`] picks (or is given) uniformly random
    /// choice bits. The default is [`CotSender::extend`].
    fn extend_random<'a>(&'a mut self, ch: &'a Channel, m: usize) -> BlocksFuture<'a> {
        self.extend(ch, m)
    }
    /// [`CotSender::extend_random`] appending the `m` outputs to `out` (a
    /// pool), which a generator may fill without an intermediate copy.
    fn extend_random_into<'a>(
        &'a mut self,
        ch: &'a Channel,
        m: usize,
        out: &'a mut Vec<u128>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut q = self.extend_random(ch, m).await?;
            out.extend_from_slice(&q);
            zeroize::Zeroize::zeroize(&mut q);
            Ok(())
        })
    }
    /// True when [`CotSender::extend_random`] only sends and the paired
    /// [`CotReceiver::extend_random`] waits for it (the reverse of IKNP's
    /// flow); both parties' generators answer alike, and
    /// [`crate::mpc::Party::preprocess_ot`] then runs the sender fills before
    /// the receiver fills.
    fn random_sender_sends(&self) -> bool {
        false
    }
    /// Counters of a silent generator behind this sender (`None` for others).
    fn silent_stats(&self) -> Option<silent::SilentStats> {
        None
    }
    /// Precomputed COTs waiting in this sender's pool (0 for a generator without one).
    fn pooled(&self) -> usize {
        0
    }
}

/// Receiver side of a correlated-OT generator.
pub trait CotReceiver {
    /// Produces `t_j = q_j ⊕ r_j·Δ` for the choice bits `r` (one per byte).
    /// For IKNP this only sends (it never waits for the peer), so a party can
    /// call it before its own [`CotSender::extend`] and both directions share
    /// one round.
    fn extend<'a>(&'a mut self, ch: &'a Channel, choices: &'a [u8]) -> BlocksFuture<'a>;
    /// Precomputes random COTs with the given (random) choice bits.
    fn fill<'a>(
        &'a mut self,
        _ch: &'a Channel,
        _random_choices: Vec<u8>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Err(crate::mpc::MpcError::InvalidConfig("this OT has no pool")) })
    }
    /// Precomputed COTs waiting in this receiver's pool (0 for a generator without one).
    fn pooled(&self) -> usize {
        0
    }
    /// Random COTs `(t_j, r_j)` for `suggested.len()` OTs: `suggested` are
    /// uniformly random choice bits the generator may use (the default, via
    /// [`CotReceiver::extend`]) or replace by its own pseudorandom ones (a
    /// silent OT, whose choice bits come out of the LPN expansion). Returns
    /// the outputs and the choice bits actually used.
    fn extend_random<'a>(
        &'a mut self,
        ch: &'a Channel,
        suggested: Vec<u8>,
    ) -> BoxFuture<'a, Result<(Vec<u128>, Vec<u8>)>> {
        Box::pin(async move {
            let t = self.extend(ch, &suggested).await?;
            Ok((t, suggested))
        })
    }
    /// [`CotReceiver::extend_random`] appending the outputs and choice bits
    /// to `t` and `r` (a pool).
    fn extend_random_into<'a>(
        &'a mut self,
        ch: &'a Channel,
        suggested: Vec<u8>,
        t: &'a mut Vec<u128>,
        r: &'a mut Vec<u8>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let (mut tt, mut rr) = self.extend_random(ch, suggested).await?;
            t.extend_from_slice(&tt);
            r.extend_from_slice(&rr);
            zeroize::Zeroize::zeroize(&mut tt);
            zeroize::Zeroize::zeroize(&mut rr);
            Ok(())
        })
    }
}

/// The fixed-key AES permutations of the OT stack, keyed by consecutive 16-byte pieces of the
/// hexadecimal expansion of π (`3.243f6a88…`: nothing-up-my-sleeve numbers), in this order.
#[derive(Clone, Copy)]
pub(crate) enum PiKey {
    /// π of [`CrHash`].
    CrHash,
    /// `π_0` of the GGM tree ([`silent::ggm::Ggm`]).
    GgmLeft,
    /// `π_1` of the GGM tree.
    GgmRight,
    /// The column PRG of the LPN code ([`silent::lpn::Lpn`]).
    Lpn,
}

/// The first 128 fractional hexadecimal digits of π, 32 for each [`PiKey`] (the key's bytes are
/// the digits in order: `to_be_bytes`).
const PI_DIGITS: [u128; 4] = [
    0x243f_6a88_85a3_08d3_1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0_082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377_be54_66cf_34e9_0c6c,
    0xc0ac_29b7_c97c_50dd_3f84_d5b5_b547_0917,
];

impl PiKey {
    /// AES-128 under this key: a fixed public permutation.
    pub(crate) fn aes(self) -> Aes128 {
        Aes128::new(&GenericArray::from(PI_DIGITS[self as usize].to_be_bytes()))
    }
}

/// Tweakable correlation-robust hash `H(x, i) = π(π(x) ⊕ i) ⊕ π(x)` with π
/// fixed-key AES-128.
#[derive(Clone)]
pub struct CrHash {
    aes: Aes128,
}

impl core::fmt::Debug for CrHash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CrHash")
    }
}

impl Default for CrHash {
    fn default() -> Self {
        Self::new()
    }
}

impl CrHash {
    /// Instantiates π.
    pub fn new() -> Self {
        CrHash {
            aes: PiKey::CrHash.aes(),
        }
    }

    /// `out[j] = H(xs[j] ⊕ off, (domain << 64) | (tweak0 + j))`.
    pub fn hash(&self, xs: &[u128], off: u128, tweak0: u64, domain: u64) -> Vec<u128> {
        let mut out = alloc::vec![0u128; xs.len()];
        self.hash_into(xs, off, tweak0, domain, &mut out);
        out
    }

    /// As [`CrHash::hash`], writing into `out` (same length as `xs`).
    pub fn hash_into(&self, xs: &[u128], off: u128, tweak0: u64, domain: u64, out: &mut [u128]) {
        let mut buf = [GenericArray::from([0u8; 16]); 64];
        let mut px = [0u128; 64];
        for (c, (chunk, oc)) in xs.chunks(64).zip(out.chunks_mut(64)).enumerate() {
            let n = chunk.len();
            for k in 0..n {
                buf[k] = GenericArray::from((chunk[k] ^ off).to_le_bytes());
            }
            self.aes.encrypt_blocks(&mut buf[..n]);
            for k in 0..n {
                px[k] = u128::from_le_bytes(buf[k].into());
                let tw =
                    ((domain as u128) << 64) | (tweak0.wrapping_add((c * 64 + k) as u64) as u128);
                buf[k] = GenericArray::from((px[k] ^ tw).to_le_bytes());
            }
            self.aes.encrypt_blocks(&mut buf[..n]);
            for k in 0..n {
                oc[k] = u128::from_le_bytes(buf[k].into()) ^ px[k];
            }
        }
    }
}

impl CrHash {
    /// `out[u] = H(x, ((dom0 + u) << 64) | tweak)` for `u < out.len()`: the hashes of
    /// [`CrHash::hash_into`] of one input under consecutive domains, with `π(x)`
    /// computed once (one AES call per output instead of two).
    pub fn hash_domains(&self, x: u128, tweak: u64, dom0: u64, out: &mut [u128]) {
        let mut b = [GenericArray::from(x.to_le_bytes())];
        self.aes.encrypt_blocks(&mut b);
        let px = u128::from_le_bytes(b[0].into());
        let mut buf = [GenericArray::from([0u8; 16]); 64];
        for (c, oc) in out.chunks_mut(64).enumerate() {
            let n = oc.len();
            for k in 0..n {
                let dom = dom0.wrapping_add((c * 64 + k) as u64);
                let tw = ((dom as u128) << 64) | tweak as u128;
                buf[k] = GenericArray::from((px ^ tw).to_le_bytes());
            }
            self.aes.encrypt_blocks(&mut buf[..n]);
            for k in 0..n {
                oc[k] = u128::from_le_bytes(buf[k].into()) ^ px;
            }
        }
    }
}

/// AES-128 in counter mode used as a PRG (seed = AES key).
pub struct AesPrg {
    aes: Aes128,
    ctr: u128,
}

impl core::fmt::Debug for AesPrg {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AesPrg(<redacted>)")
    }
}

impl AesPrg {
    /// PRG keyed by a 128-bit seed.
    pub fn new(seed: [u8; 16]) -> Self {
        AesPrg {
            aes: Aes128::new(&GenericArray::from(seed)),
            ctr: 0,
        }
    }

    /// Fills `out` (length a multiple of 16) with pseudorandom bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        debug_assert!(out.len().is_multiple_of(16));
        let mut buf = [GenericArray::from([0u8; 16]); 64];
        for chunk in out.chunks_mut(16 * 64) {
            let nb = chunk.len() / 16;
            for k in 0..nb {
                buf[k] = GenericArray::from(self.ctr.to_le_bytes());
                self.ctr = self.ctr.wrapping_add(1);
            }
            self.aes.encrypt_blocks(&mut buf[..nb]);
            for k in 0..nb {
                chunk[16 * k..16 * k + 16].copy_from_slice(&buf[k]);
            }
        }
    }
}

/// Both OT directions of one party plus the hash and the OT counters that
/// keep hash tweaks unique and synchronized with the peer.
pub struct OtEngine {
    /// This party as COT sender.
    pub sender: Box<dyn CotSender>,
    /// This party as COT receiver.
    pub receiver: Box<dyn CotReceiver>,
    /// Correlation-robust hash.
    pub hash: CrHash,
    /// OTs consumed as sender so far (tweak base).
    pub sent: u64,
    /// OTs consumed as receiver so far (tweak base).
    pub received: u64,
}

impl core::fmt::Debug for OtEngine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "OtEngine {{ sent: {}, received: {} }}",
            self.sent, self.received
        )
    }
}

/// Sender view of a batch of COTs: blocks `q_j`, the offset `Δ`, and the tweak
/// base for hashing.
pub struct CotBatchS {
    /// `q_j`.
    pub q: Vec<u128>,
    /// `Δ`.
    pub delta: u128,
    /// Tweak of `q_0`.
    pub tweak: u64,
}

/// Receiver view of a batch of COTs.
pub struct CotBatchR {
    /// `t_j = q_j ⊕ r_j·Δ`.
    pub t: Vec<u128>,
    /// Choice bits `r_j`.
    pub r: Vec<u8>,
    /// Tweak of `t_0`.
    pub tweak: u64,
}

impl Drop for CotBatchS {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.q.zeroize();
        self.delta.zeroize();
    }
}

impl Drop for CotBatchR {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.t.zeroize();
        self.r.zeroize();
    }
}

impl OtEngine {
    /// Engine over the two directions, counters at zero.
    pub fn new(sender: Box<dyn CotSender>, receiver: Box<dyn CotReceiver>) -> Self {
        OtEngine {
            sender,
            receiver,
            hash: CrHash::new(),
            sent: 0,
            received: 0,
        }
    }

    /// Extends `m` COTs as sender (waits for the receiver's message).
    pub async fn send(&mut self, ch: &Channel, m: usize) -> Result<CotBatchS> {
        let q = self.sender.extend(ch, m).await?;
        let tweak = self.sent;
        self.sent += m as u64;
        Ok(CotBatchS {
            q,
            delta: self.sender.delta(),
            tweak,
        })
    }

    /// Extends COTs as receiver with choice bits `r` (sends only).
    pub async fn recv(&mut self, ch: &Channel, r: Vec<u8>) -> Result<CotBatchR> {
        let t = self.receiver.extend(ch, &r).await?;
        let tweak = self.received;
        self.received += r.len() as u64;
        Ok(CotBatchR { t, r, tweak })
    }
}

impl CotBatchS {
    /// Random-OT keys `(H(q_j), H(q_j ⊕ Δ))`.
    pub fn rot_keys(
        &self,
        h: &CrHash,
    ) -> (zeroize::Zeroizing<Vec<u128>>, zeroize::Zeroizing<Vec<u128>>) {
        (
            zeroize::Zeroizing::new(h.hash(&self.q, 0, self.tweak, 0)),
            zeroize::Zeroizing::new(h.hash(&self.q, self.delta, self.tweak, 0)),
        )
    }
}

impl CotBatchR {
    /// Random-OT key `H(t_j)` (equals the sender's key of index `r_j`).
    pub fn rot_keys(&self, h: &CrHash) -> zeroize::Zeroizing<Vec<u128>> {
        zeroize::Zeroizing::new(h.hash(&self.t, 0, self.tweak, 0))
    }
}
