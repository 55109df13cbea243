//! Silent random correlated OT: Ferret (Yang, Weng, Lan, Zhang, Wang, CCS 2020),
//! semi-honest, with regular noise and a local linear code.
//!
//! One *extension* turns `k + t·h` base COTs into `n` random COTs with
//! `16·t·(2h+1)` bytes from the sender to the receiver ([`SilentSpcot`]), where
//! `n = t·2^h`:
//!
//! 1. **MPCOT with regular noise.** The receiver's noise `e ∈ F_2^n` has one
//!    one in each of the `t` blocks of length `2^h`. Block `i` is a single-point
//!    COT: the sender expands a random seed into a GGM tree ([`ggm`]) with
//!    leaves `v_0..v_{2^h}`; for each level `j` it masks the two level sums
//!    with one base COT, `(K_0^j ⊕ H(q_j), K_1^j ⊕ H(q_j ⊕ Δ))`, and adds the
//!    correction `c = Δ ⊕ ⊕_i v_i`. The receiver's base choice bit `b_j` of
//!    level `j` selects `K_{b_j}^j = m_{b_j} ⊕ H(t_j)`, so its puncture index
//!    has the bits `α_j = ¬b_j` (the random choice bits of the base COTs *are*
//!    the noise position: no derandomization); it rebuilds every leaf but `α`
//!    and sets `r_α = c ⊕ ⊕_{i≠α} v_i = v_α ⊕ Δ`. So `r = s ⊕ e·Δ` with
//!    the sender's `s = v`. `H` is the tweakable [`CrHash`] in its own domain
//!    with a counter tweak per base COT.
//! 2. **LPN.** With the other `k` base COTs `(v, w = v ⊕ x·Δ)` the sender
//!    outputs `q = s ⊕ A·v` and the receiver `t = r ⊕ A·w`, with the choice
//!    bits `u = e ⊕ A·x`: `t = q ⊕ u·Δ`. `A` is Ferret's local linear code
//!    ([`lpn`], `d = 10`); `u` is pseudorandom under LPN with regular noise.
//! 3. **Bootstrapping.** The first `k + t·h` outputs of each extension are
//!    kept as the base COTs of the next one; the rest are handed out. Only the
//!    very first extension takes its base COTs from IKNP ([`SilentSender::bootstrap`],
//!    run in [`crate::mpc::Party::setup`]); with a `pre` parameter set that
//!    first extension is a small one whose whole output seeds the main set
//!    (emp-ot's two-stage bootstrap), so IKNP produces only
//!    `k_pre + t_pre·h_pre` COTs.
//! 4. **The low-bit convention** (emp-ot's). `Δ` has its low bit set
//!    ([`SilentSender::new`] refuses another), the sender clears the low bit of
//!    every block it holds (the IKNP seeds, the GGM leaves), and the receiver
//!    puts its choice bit there (the IKNP seeds' `b`, the leaves' noise bit `e`).
//!    `t = q ⊕ u·Δ` still holds, and the receiver's block carries `u` in its
//!    low bit. Since `A` is linear, the receiver's encoding of `w` alone yields
//!    `A·x` in the low bits: one gather per column instead of two. `Δ` keeps
//!    127 random bits.
//! 5. **Messages go ahead.** Right after making an extension's outputs, the
//!    sender sends the next extension's message (its GGM trees, seeded by those
//!    outputs; it keeps only the `t` roots and expands them again later), and
//!    the receiver waits for it before its call returns. When the outputs run
//!    out, both ends make the next ones each on its own, with no message to
//!    wait for, so the two LPN encodings run at the same time instead of one
//!    after the other. The cost: one message more per generator (the last one
//!    sent ahead, which may never be used: 559,440 bytes per direction at
//!    [`FERRET_EMP_OT`]), and no overlap for the first extension or within one
//!    call that runs several extensions (its messages flush when it returns).
//!
//! # Use
//!
//! The generator makes *random* COTs and is a pool filler:
//! [`CotSender::extend_random`] / [`CotReceiver::extend_random`] run
//! extensions as needed and hand out their outputs (the receiver's choice
//! bits are `u`); wrapped in [`super::pool::PooledSender`] /
//! [`super::pool::PooledReceiver`] they serve chosen-bit COTs online with 1
//! derandomization bit each. Its flow is the reverse of IKNP's (the sender
//! only sends, the receiver waits), which [`CotSender::random_sender_sends`]
//! reports. On-demand [`CotSender::extend`]/[`CotReceiver::extend`] (a pool
//! too small for a call) go to the IKNP generator the silent one was
//! bootstrapped from, which keeps the contract of [`super`] (the receiver
//! never waits).
//!
//! # Parameters and security
//!
//! [`FERRET_EMP_OT`] is the regular-noise set of emp-ot's `ferret/constants.h`
//! (`N_REG`, `K_REG`, `T_REG`, `BIN_SZ_REG` and the `*_PRE_REG` bootstrap set);
//! [`FERRET_CCS20`] is the set of the Ferret paper (CCS 2020, §6: `n =
//! 10,485,760, k = 452,000, t = 1,280`, about 0.44 bit per COT), which the
//! paper estimates at 128-bit security against the known attacks on LPN with
//! regular noise (Gaussian elimination / Pooled Gauss, information-set
//! decoding, statistical decoding); emp-ot has since moved to the larger `k` of
//! [`FERRET_EMP_OT`], the default here. Both are semi-honest. The
//! `INSECURE_*` sets are small dimensions for tests only.

pub mod ggm;
pub mod lpn;
#[cfg(test)]
mod tests;

use super::iknp::{IknpReceiver, IknpSender};
use super::{AesPrg, BlocksFuture, BoxFuture, CotReceiver, CotSender, CrHash};
use crate::mpc::channel::Channel;
use crate::mpc::error::{MpcError, Result};
use crate::mpc::msgs::{SilentSpcot, SpcotShape};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use ggm::Ggm;
use lpn::Lpn;
use zeroize::{DefaultIsZeroes, Zeroize};

/// Hash domain of the SPCOT level masks (apart from the protocols' domains).
const SPCOT_DOMAIN: u64 = 0x5170_0000;

/// One LPN parameter set: `n = t·2^h` outputs from `k` LPN and `t·h` SPCOT
/// base COTs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LpnParams {
    /// Output length `n`.
    pub n: usize,
    /// LPN dimension `k`.
    pub k: usize,
    /// Noise weight `t` (number of single-point COTs).
    pub t: usize,
    /// Tree depth `h = log2(n/t)`.
    pub h: u32,
}

impl LpnParams {
    /// Leaves per tree, `2^h`.
    pub const fn leaves(&self) -> usize {
        1 << self.h
    }

    /// Base COTs one extension consumes: `k + t·h`.
    pub const fn seed_cots(&self) -> usize {
        self.k + self.t * self.h as usize
    }

    /// Outputs left after reserving the next extension's base COTs.
    pub const fn usable(&self) -> usize {
        self.n - self.seed_cots()
    }

    /// The shape of its extension message.
    pub const fn shape(&self) -> SpcotShape {
        SpcotShape {
            trees: self.t,
            depth: self.h,
        }
    }

    /// Bytes of one extension message (payload).
    pub const fn message_bytes(&self) -> usize {
        16 * self.t * (2 * self.h as usize + 1)
    }

    /// Checks `n = t·2^h`, `1 ≤ h ≤ 24`, `1 ≤ k < 2^32`, and that an extension
    /// leaves outputs after reserving its successor's base COTs.
    pub fn validate(&self) -> Result<()> {
        if !(1..=24).contains(&self.h) {
            return Err(MpcError::InvalidConfig(
                "silent OT: tree depth h out of 1..=24",
            ));
        }
        if self.t == 0 || self.t.checked_mul(self.leaves()) != Some(self.n) {
            return Err(MpcError::InvalidConfig("silent OT: n must equal t·2^h"));
        }
        if self.k == 0 || self.k as u64 >= 1 << 32 {
            return Err(MpcError::InvalidConfig("silent OT: k out of 1..2^32"));
        }
        if self.n <= self.seed_cots() {
            return Err(MpcError::InvalidConfig(
                "silent OT: n must exceed the k + t·h reserved base COTs",
            ));
        }
        Ok(())
    }
}

/// The parameters of a silent OT: the main set, and optionally a smaller set
/// for the first extension, whose output seeds the main one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SilentParams {
    /// The set of every regular extension.
    pub main: LpnParams,
    /// The first extension's set (`pre.n ≥ main.seed_cots()`), or `None` to
    /// take the main set's base COTs from IKNP directly.
    pub pre: Option<LpnParams>,
}

/// emp-ot's current regular-noise Ferret set (`ferret/constants.h`):
/// `n = 10,608,640 = 1,295·2^13`, `k = 589,824`, `t = 1,295`, and its bootstrap
/// set `n = 649,728 = 1,269·2^9`, `k = 36,288`, `t = 1,269`. IKNP makes 47,709
/// COTs once; each extension costs 559,440 bytes for 10,001,981 COTs (0.447
/// bit per COT). 128-bit target, semi-honest.
pub const FERRET_EMP_OT: SilentParams = SilentParams {
    main: LpnParams {
        n: 10_608_640,
        k: 589_824,
        t: 1_295,
        h: 13,
    },
    pre: Some(LpnParams {
        n: 649_728,
        k: 36_288,
        t: 1_269,
        h: 9,
    }),
};

/// The Ferret paper's set (CCS 2020, §6): `n = 10,485,760 = 1,280·2^13`,
/// `k = 452,000`, `t = 1,280`, estimated there at 128-bit security
/// (semi-honest), 552,960 bytes for 10,017,120 COTs (0.442 bit per COT);
/// bootstrapped through emp-ot's bootstrap set of [`FERRET_EMP_OT`].
pub const FERRET_CCS20: SilentParams = SilentParams {
    main: LpnParams {
        n: 10_485_760,
        k: 452_000,
        t: 1_280,
        h: 13,
    },
    pre: FERRET_EMP_OT.pre,
};

/// INSECURE: a small set for tests (`n = 2^14`, `k = 2048`, `t = 64`) with a
/// small bootstrap set (`n = 2^12`, `k = 512`, `t = 32`). Not secure.
pub const INSECURE_SILENT_TEST: SilentParams = SilentParams {
    main: LpnParams {
        n: 1 << 14,
        k: 2048,
        t: 64,
        h: 8,
    },
    pre: Some(LpnParams {
        n: 1 << 12,
        k: 512,
        t: 32,
        h: 7,
    }),
};

/// INSECURE: [`INSECURE_SILENT_TEST`] without the bootstrap set (IKNP seeds the
/// main set directly). Not secure.
pub const INSECURE_SILENT_TEST_NO_PRE: SilentParams = SilentParams {
    main: INSECURE_SILENT_TEST.main,
    pre: None,
};

impl SilentParams {
    /// Validates both sets and that the bootstrap set's output covers the
    /// main set's base COTs.
    pub fn validate(&self) -> Result<()> {
        self.main.validate()?;
        if let Some(p) = &self.pre {
            p.validate()?;
            if p.n < self.main.seed_cots() {
                return Err(MpcError::InvalidConfig(
                    "silent OT: the bootstrap set must output the main set's base COTs",
                ));
            }
        }
        Ok(())
    }

    /// The set of the first extension.
    pub fn first(&self) -> LpnParams {
        self.pre.unwrap_or(self.main)
    }

    /// COTs IKNP makes once to bootstrap one direction.
    pub fn bootstrap_cots(&self) -> usize {
        self.first().seed_cots()
    }
}

/// Counters of a silent generator (one direction, this end).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SilentStats {
    /// Extensions run (the bootstrap set's included).
    pub extensions: u64,
    /// Random COTs handed out.
    pub handed_out: u64,
    /// Payload bytes of the extension messages (sent by the sender, received
    /// by the receiver), the one sent ahead included.
    pub message_bytes: u64,
    /// Extension messages sent (received), the one sent ahead included: after
    /// the first extension, one more than [`SilentStats::extensions`].
    pub messages: u64,
}

/// Shared state of both ends: parameters, primitives, the stage.
struct Core {
    params: SilentParams,
    ggm: Ggm,
    hash: CrHash,
    lpn_main: Lpn,
    lpn_pre: Option<Lpn>,
    /// Whether the next extension uses the main set (else the bootstrap set).
    main_next: bool,
    /// Base COTs consumed by SPCOTs so far (hash tweak).
    tweak: u64,
    stats: SilentStats,
}

impl Core {
    fn new(params: SilentParams) -> Result<Self> {
        params.validate()?;
        Ok(Core {
            params,
            ggm: Ggm::new(),
            hash: CrHash::new(),
            lpn_main: Lpn::new(params.main.k),
            lpn_pre: params.pre.map(|p| Lpn::new(p.k)),
            main_next: params.pre.is_none(),
            tweak: 0,
            stats: SilentStats::default(),
        })
    }

    #[cfg(test)]
    fn current(&self) -> (LpnParams, &Lpn) {
        self.stage(self.main_next)
    }

    /// The set and code of the main stage (`main`) or the bootstrap stage.
    fn stage(&self, main: bool) -> (LpnParams, &Lpn) {
        match (main, &self.lpn_pre, self.params.pre) {
            (false, Some(l), Some(p)) => (p, l),
            _ => (self.params.main, &self.lpn_main),
        }
    }
}

/// The sender's message of one extension with the set `p` and the hash tweak
/// `tweak`: draws the `t` GGM roots, expands each tree (into a one-tree scratch)
/// for its level sums and correction, and returns the message and the roots
/// (which [`sender_outputs`] expands again). `qs` = the `t·h` SPCOT base COTs.
fn sender_message(
    c: &Core,
    p: LpnParams,
    tweak: u64,
    delta: u128,
    prg: &mut AesPrg,
    qs: &[u128],
) -> (SilentSpcot, Vec<u128>) {
    let (h, l) = (p.h as usize, p.leaves());
    let mut blocks = Vec::with_capacity(p.shape().blocks());
    let mut roots = Vec::with_capacity(p.t);
    let mut leaves = vec![0u128; l];
    let mut scratch = vec![0u128; l / 2];
    let mut sums = vec![(0u128, 0u128); h];
    let mut h0 = vec![0u128; h];
    let mut h1 = vec![0u128; h];
    let mut sb = [0u8; 16];
    for i in 0..p.t {
        prg.fill(&mut sb);
        let root = u128::from_le_bytes(sb);
        roots.push(root);
        c.ggm
            .sender_tree(root, &mut leaves, &mut sums, &mut scratch);
        let q = &qs[i * h..(i + 1) * h];
        let tw = tweak + (i * h) as u64;
        c.hash.hash_into(q, 0, tw, SPCOT_DOMAIN, &mut h0);
        c.hash.hash_into(q, delta, tw, SPCOT_DOMAIN, &mut h1);
        for j in 0..h {
            blocks.push(sums[j].0 ^ h0[j]);
            blocks.push(sums[j].1 ^ h1[j]);
        }
        blocks.push(leaves.iter().fold(delta, |a, &x| a ^ x));
    }
    sb.zeroize();
    leaves.zeroize();
    scratch.zeroize();
    sums.zeroize();
    h0.zeroize();
    h1.zeroize();
    (
        SilentSpcot {
            blocks,
            shape: p.shape(),
        },
        roots,
    )
}

/// The sender's outputs of one extension: the GGM leaves of `roots` (low bits
/// cleared) plus `A·v`, `q = s ⊕ A·v`, into `out[..p.n]`.
fn sender_outputs(c: &Core, p: LpnParams, lpn: &Lpn, roots: &[u128], v: &[u128], out: &mut [u128]) {
    let (h, l) = (p.h as usize, p.leaves());
    let out = &mut out[..p.n];
    let mut scratch = vec![0u128; l / 2];
    let mut sums = vec![(0u128, 0u128); h];
    for (leaves, &root) in out.chunks_exact_mut(l).zip(roots) {
        c.ggm.sender_tree(root, leaves, &mut sums, &mut scratch);
        clear_low_bits(leaves);
    }
    scratch.zeroize();
    sums.zeroize();
    lpn.encode_add(v, out);
}

/// The sender's end (holds `Δ`) of one extension at the current set and tweak:
/// [`sender_message`] then [`sender_outputs`]. `seed` = `k` LPN base COTs then
/// `t·h` SPCOT base COTs.
#[cfg(test)]
fn sender_extension(
    c: &Core,
    delta: u128,
    prg: &mut AesPrg,
    seed: &[u128],
    out: &mut [u128],
) -> SilentSpcot {
    let (p, lpn) = c.current();
    let (v, qs) = seed.split_at(p.k);
    let (msg, mut roots) = sender_message(c, p, c.tweak, delta, prg, qs);
    sender_outputs(c, p, lpn, &roots, v, out);
    roots.zeroize();
    msg
}

/// The receiver's end of one extension: `seed_t`/`seed_b` are its base COTs
/// and their choice bits. Writes the outputs `t = r ⊕ A·w` into `out` and the
/// choice bits `u = e ⊕ A·x` into `u`.
#[cfg(test)]
fn receiver_extension(
    c: &Core,
    seed_t: &[u128],
    seed_b: &[u8],
    msg: &SilentSpcot,
    out: &mut [u128],
    u: &mut [u8],
) {
    let (p, lpn) = c.current();
    receiver_outputs(c, p, lpn, c.tweak, seed_t, seed_b, msg, out, u);
}

/// The receiver's end of one extension for the set `p` (its code `lpn`) and
/// the tweak of the message `msg`: `seed_t`/`seed_b` are its base COTs and their
/// choice bits. Writes the outputs `t = r ⊕ A·w` into `out` and the choice bits
/// `u = e ⊕ A·x` into `u`.
#[allow(clippy::too_many_arguments)]
fn receiver_outputs(
    c: &Core,
    p: LpnParams,
    lpn: &Lpn,
    tweak: u64,
    seed_t: &[u128],
    seed_b: &[u8],
    msg: &SilentSpcot,
    out: &mut [u128],
    u: &mut [u8],
) {
    let (h, l) = (p.h as usize, p.leaves());
    let (w, ts) = seed_t.split_at(p.k);
    let (x, bs) = seed_b.split_at(p.k);
    debug_assert!(w.iter().zip(x).all(|(&wi, &xi)| (wi & 1) as u8 == xi & 1));
    let out = &mut out[..p.n];
    let u = &mut u[..p.n];
    let mut scratch = vec![0u128; l / 2];
    let mut known = vec![0u128; h];
    let mut ht = vec![0u128; h];
    for (i, leaves) in out.chunks_exact_mut(l).enumerate() {
        let t = &ts[i * h..(i + 1) * h];
        let b = &bs[i * h..(i + 1) * h];
        c.hash
            .hash_into(t, 0, tweak + (i * h) as u64, SPCOT_DOMAIN, &mut ht);
        let m = &msg.blocks[i * (2 * h + 1)..(i + 1) * (2 * h + 1)];
        let mut alpha = 0usize;
        for j in 0..h {
            let bj = (b[j] & 1) as u128;
            let sel = 0u128.wrapping_sub(bj); // all ones iff b_j = 1
            known[j] = ((m[2 * j] & !sel) | (m[2 * j + 1] & sel)) ^ ht[j];
            alpha |= ((1 ^ bj) as usize) << (h - 1 - j);
        }
        c.ggm.receiver_tree(alpha, &known, leaves, &mut scratch);
        leaves[alpha] = leaves.iter().fold(m[2 * h], |a, &y| a ^ y);
        // the low bit carries the noise bit e (the sender cleared its leaves' low bits)
        clear_low_bits(leaves);
        leaves[alpha] |= 1;
    }
    scratch.zeroize();
    known.zeroize();
    ht.zeroize();
    // w's low bits are x, so one pass gives t = r ⊕ A·w with u = e ⊕ A·x in its low bits
    lpn.encode_add(w, out);
    for (ui, &ti) in u.iter_mut().zip(out.iter()) {
        *ui = (ti & 1) as u8;
    }
}

/// Clears the low bit of every block (the sender's side of the low-bit convention).
fn clear_low_bits(b: &mut [u128]) {
    for x in b {
        *x &= !1;
    }
}

/// The outputs of the last extension: `v[pos..len]` are not yet handed out
/// (the storage is reused by every extension, so large runs allocate once).
struct Work<T: DefaultIsZeroes> {
    v: Vec<T>,
    pos: usize,
    len: usize,
}

impl<T: DefaultIsZeroes> Work<T> {
    fn new() -> Self {
        Work {
            v: Vec::new(),
            pos: 0,
            len: 0,
        }
    }
    fn available(&self) -> usize {
        self.len - self.pos
    }
    /// Storage for an extension of `n` outputs (its previous contents must
    /// have been handed out).
    fn storage(&mut self, n: usize) -> &mut [T] {
        if self.v.len() < n {
            self.v.zeroize();
            self.v = vec![T::default(); n];
        }
        &mut self.v[..n]
    }
    /// After an extension of `n` outputs whose first `reserved` are the next seed.
    fn filled(&mut self, n: usize, reserved: usize) {
        self.v[..reserved].zeroize();
        self.pos = reserved;
        self.len = n;
    }
    /// Moves up to `m − out.len()` outputs to `out`.
    fn drain_into(&mut self, out: &mut Vec<T>, m: usize) {
        let c = (m - out.len()).min(self.available());
        out.extend_from_slice(&self.v[self.pos..self.pos + c]);
        self.v[self.pos..self.pos + c].zeroize();
        self.pos += c;
    }
}

impl<T: DefaultIsZeroes> Drop for Work<T> {
    fn drop(&mut self) {
        self.v.zeroize();
    }
}

/// Sender of the silent random-COT generator (holds `Δ`, the one of the IKNP
/// sender it was bootstrapped from).
pub struct SilentSender {
    iknp: IknpSender,
    core: Core,
    prg: AesPrg,
    /// Base COTs of the next extension (`None` before the bootstrap).
    seed: Option<Vec<u128>>,
    /// The extension whose message went out ahead: its stage (main or
    /// bootstrap) and GGM roots.
    ahead: Option<(bool, Vec<u128>)>,
    work: Work<u128>,
}

impl core::fmt::Debug for SilentSender {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "SilentSender {{ params: {:?}, bootstrapped: {}, available: {}, stats: {:?} }}",
            self.core.params,
            self.seed.is_some(),
            self.work.available(),
            self.core.stats
        )
    }
}

impl Drop for SilentSender {
    fn drop(&mut self) {
        if let Some(s) = self.seed.as_mut() {
            s.zeroize();
        }
        if let Some((_, r)) = self.ahead.as_mut() {
            r.zeroize();
        }
    }
}

impl SilentSender {
    /// Over an IKNP sender (its `Δ` becomes the silent one's); `prg_seed`
    /// keys the PRG of the GGM roots (draw it from the party's CSPRNG).
    pub fn new(iknp: IknpSender, params: SilentParams, mut prg_seed: [u8; 16]) -> Result<Self> {
        if iknp.delta() & 1 == 0 {
            prg_seed.zeroize();
            return Err(MpcError::InvalidConfig(
                "silent OT: the IKNP sender's delta must have its low bit set",
            ));
        }
        let core = Core::new(params)?;
        let prg = AesPrg::new(prg_seed);
        prg_seed.zeroize();
        Ok(SilentSender {
            iknp,
            core,
            prg,
            seed: None,
            ahead: None,
            work: Work::new(),
        })
    }

    /// Takes the first extension's base COTs from IKNP (waits for the peer's
    /// [`SilentReceiver::bootstrap`] message).
    pub async fn bootstrap(&mut self, ch: &Channel) -> Result<()> {
        let m = self.core.params.bootstrap_cots();
        let mut q = self.iknp.extend(ch, m).await?;
        clear_low_bits(&mut q);
        self.seed = Some(q);
        Ok(())
    }

    /// Counters so far.
    pub fn stats(&self) -> SilentStats {
        self.core.stats
    }

    /// Random COTs ready without another extension.
    pub fn available(&self) -> usize {
        self.work.available()
    }

    /// Sends the message of the next extension (seeded by the current seed)
    /// ahead of its outputs. The receiver takes it at once; when the outputs
    /// are needed, both ends make them each on its own, with no message
    /// between, so that their LPN encodings run at the same time instead of
    /// one after the other.
    fn send_ahead(&mut self, ch: &Channel) -> Result<()> {
        let seed = self.seed.as_ref().ok_or(MpcError::NotSetUp)?;
        let main = self.core.main_next;
        let (p, _) = self.core.stage(main);
        let delta = self.iknp.delta();
        let qs = &seed[p.k..p.seed_cots()];
        let (msg, roots) = sender_message(&self.core, p, self.core.tweak, delta, &mut self.prg, qs);
        self.core.tweak += (p.t * p.h as usize) as u64;
        self.core.stats.message_bytes += p.message_bytes() as u64;
        self.core.stats.messages += 1;
        self.core.main_next = true;
        self.ahead = Some((main, roots));
        ch.send_owned(msg);
        Ok(())
    }

    /// Runs one extension (its message sent now, unless it went ahead) and
    /// sends the next one's message ahead; the previous outputs must have been
    /// handed out.
    fn run_extension(&mut self, ch: &Channel) -> Result<()> {
        if self.ahead.is_none() {
            self.send_ahead(ch)?;
        }
        let seed = self.seed.as_mut().ok_or(MpcError::NotSetUp)?;
        let (main, mut roots) = self.ahead.take().ok_or(MpcError::NotSetUp)?;
        let (p, lpn) = self.core.stage(main);
        let out = self.work.storage(p.n);
        sender_outputs(&self.core, p, lpn, &roots, &seed[..p.k], out);
        roots.zeroize();
        self.core.stats.extensions += 1;
        let next = self.core.params.main.seed_cots();
        seed.zeroize();
        seed.extend_from_slice(&out[..next]);
        self.work.filled(p.n, next);
        self.send_ahead(ch)
    }

    /// Appends `m` random COTs to `out`.
    fn random_into(&mut self, ch: &Channel, m: usize, out: &mut Vec<u128>) -> Result<()> {
        let target = out.len() + m;
        out.reserve(m);
        loop {
            self.work.drain_into(out, target);
            if out.len() == target {
                break;
            }
            self.run_extension(ch)?;
        }
        self.core.stats.handed_out += m as u64;
        Ok(())
    }

    fn random_impl(&mut self, ch: &Channel, m: usize) -> Result<Vec<u128>> {
        let mut out = Vec::new();
        if let Err(e) = self.random_into(ch, m, &mut out) {
            out.zeroize();
            return Err(e);
        }
        Ok(out)
    }
}

impl CotSender for SilentSender {
    fn delta(&self) -> u128 {
        self.iknp.delta()
    }
    /// On demand (chosen choice bits): the IKNP generator.
    fn extend<'a>(&'a mut self, ch: &'a Channel, m: usize) -> BlocksFuture<'a> {
        self.iknp.extend(ch, m)
    }
    fn extend_random<'a>(&'a mut self, ch: &'a Channel, m: usize) -> BlocksFuture<'a> {
        let r = self.random_impl(ch, m);
        Box::pin(async move { r })
    }
    fn extend_random_into<'a>(
        &'a mut self,
        ch: &'a Channel,
        m: usize,
        out: &'a mut Vec<u128>,
    ) -> BoxFuture<'a, Result<()>> {
        let r = self.random_into(ch, m, out);
        Box::pin(async move { r })
    }
    fn random_sender_sends(&self) -> bool {
        true
    }
    fn silent_stats(&self) -> Option<SilentStats> {
        Some(self.core.stats)
    }
}

/// Receiver of the silent random-COT generator.
pub struct SilentReceiver {
    iknp: IknpReceiver,
    core: Core,
    prg: AesPrg,
    /// Base COTs and their choice bits for the next extension.
    seed: Option<(Vec<u128>, Vec<u8>)>,
    /// The next extension's message, taken ahead: its stage and hash tweak.
    ahead: Option<(bool, u64, SilentSpcot)>,
    work_t: Work<u128>,
    work_u: Work<u8>,
}

impl core::fmt::Debug for SilentReceiver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "SilentReceiver {{ params: {:?}, bootstrapped: {}, available: {}, stats: {:?} }}",
            self.core.params,
            self.seed.is_some(),
            self.work_t.available(),
            self.core.stats
        )
    }
}

impl Drop for SilentReceiver {
    fn drop(&mut self) {
        if let Some((t, b)) = self.seed.as_mut() {
            t.zeroize();
            b.zeroize();
        }
    }
}

impl SilentReceiver {
    /// Over an IKNP receiver; `prg_seed` keys the PRG of the bootstrap's
    /// random choice bits (draw it from the party's CSPRNG).
    pub fn new(iknp: IknpReceiver, params: SilentParams, mut prg_seed: [u8; 16]) -> Result<Self> {
        let core = Core::new(params)?;
        let prg = AesPrg::new(prg_seed);
        prg_seed.zeroize();
        Ok(SilentReceiver {
            iknp,
            core,
            prg,
            seed: None,
            ahead: None,
            work_t: Work::new(),
            work_u: Work::new(),
        })
    }

    /// Makes the first extension's base COTs with IKNP, with random choice
    /// bits (sends only).
    pub async fn bootstrap(&mut self, ch: &Channel) -> Result<()> {
        let m = self.core.params.bootstrap_cots();
        let mut bytes = vec![0u8; m.div_ceil(128) * 16];
        self.prg.fill(&mut bytes);
        let mut bits: Vec<u8> = (0..m).map(|j| (bytes[j / 8] >> (j % 8)) & 1).collect();
        bytes.zeroize();
        match self.iknp.extend(ch, &bits).await {
            Ok(mut t) => {
                // the low bit becomes the choice bit (the sender cleared its low bits)
                for (tj, &bj) in t.iter_mut().zip(&bits) {
                    *tj = (*tj & !1) | (bj & 1) as u128;
                }
                self.seed = Some((t, bits));
                Ok(())
            }
            Err(e) => {
                bits.zeroize();
                Err(e)
            }
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> SilentStats {
        self.core.stats
    }

    /// Random COTs ready without another extension.
    pub fn available(&self) -> usize {
        self.work_t.available()
    }

    /// Takes the next extension's message (the sender sends it ahead of the
    /// outputs).
    async fn recv_ahead(&mut self, ch: &Channel) -> Result<()> {
        if self.seed.is_none() {
            return Err(MpcError::NotSetUp);
        }
        let main = self.core.main_next;
        let (p, _) = self.core.stage(main);
        let msg = ch.recv_msg::<SilentSpcot>(&p.shape()).await?;
        self.ahead = Some((main, self.core.tweak, msg));
        self.core.tweak += (p.t * p.h as usize) as u64;
        self.core.stats.message_bytes += p.message_bytes() as u64;
        self.core.stats.messages += 1;
        self.core.main_next = true;
        Ok(())
    }

    /// Runs one extension (waiting for its message unless it came ahead), then
    /// takes the next one's message.
    async fn run_extension(&mut self, ch: &Channel) -> Result<()> {
        if self.ahead.is_none() {
            self.recv_ahead(ch).await?;
        }
        let (main, tweak, msg) = self.ahead.take().ok_or(MpcError::NotSetUp)?;
        let (p, lpn) = self.core.stage(main);
        let (st, sb) = self.seed.as_mut().ok_or(MpcError::NotSetUp)?;
        let out = self.work_t.storage(p.n);
        let u = self.work_u.storage(p.n);
        receiver_outputs(&self.core, p, lpn, tweak, st, sb, &msg, out, u);
        self.core.stats.extensions += 1;
        let next = self.core.params.main.seed_cots();
        st.zeroize();
        sb.zeroize();
        st.extend_from_slice(&out[..next]);
        sb.extend_from_slice(&u[..next]);
        self.work_t.filled(p.n, next);
        self.work_u.filled(p.n, next);
        self.recv_ahead(ch).await
    }

    /// Appends `m` random COTs and their choice bits to `t` and `u`.
    async fn random_into(
        &mut self,
        ch: &Channel,
        m: usize,
        t: &mut Vec<u128>,
        u: &mut Vec<u8>,
    ) -> Result<()> {
        let target = t.len() + m;
        let target_u = u.len() + m;
        t.reserve(m);
        u.reserve(m);
        loop {
            self.work_t.drain_into(t, target);
            self.work_u.drain_into(u, target_u);
            if t.len() == target {
                break;
            }
            self.run_extension(ch).await?;
        }
        self.core.stats.handed_out += m as u64;
        Ok(())
    }

    async fn random_impl(&mut self, ch: &Channel, m: usize) -> Result<(Vec<u128>, Vec<u8>)> {
        let (mut t, mut u) = (Vec::new(), Vec::new());
        if let Err(e) = self.random_into(ch, m, &mut t, &mut u).await {
            t.zeroize();
            u.zeroize();
            return Err(e);
        }
        Ok((t, u))
    }
}

impl CotReceiver for SilentReceiver {
    /// On demand (chosen choice bits): the IKNP generator (sends only).
    fn extend<'a>(&'a mut self, ch: &'a Channel, choices: &'a [u8]) -> BlocksFuture<'a> {
        self.iknp.extend(ch, choices)
    }
    /// Random COTs with the generator's own choice bits `u` (`suggested` is
    /// only used for its length and zeroized); waits for the sender's
    /// extension messages when its buffer runs short.
    fn extend_random<'a>(
        &'a mut self,
        ch: &'a Channel,
        mut suggested: Vec<u8>,
    ) -> BoxFuture<'a, Result<(Vec<u128>, Vec<u8>)>> {
        let m = suggested.len();
        suggested.zeroize();
        Box::pin(self.random_impl(ch, m))
    }
    fn extend_random_into<'a>(
        &'a mut self,
        ch: &'a Channel,
        mut suggested: Vec<u8>,
        t: &'a mut Vec<u128>,
        r: &'a mut Vec<u8>,
    ) -> BoxFuture<'a, Result<()>> {
        let m = suggested.len();
        suggested.zeroize();
        Box::pin(self.random_into(ch, m, t, r))
    }
}
