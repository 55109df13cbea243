//! A party of the two-party engine: configuration, setup (base OTs) and the
//! correlated-OT helpers shared by all protocols.

use crate::mpc::channel::{Channel, Phase};
use crate::mpc::error::{MpcError, Result};
use crate::mpc::ot::base::{self, BaseSender};
use crate::mpc::ot::iknp::{IknpReceiver, IknpSender};
use crate::mpc::ot::pool::{PooledReceiver, PooledSender};
use crate::mpc::ot::{AesPrg, CotBatchR, CotBatchS, OtEngine};
use crate::mpc::pack::{BitReader, BitWriter};
use crate::mpc::ring::{mask, RingCfg};
use crate::mpc::zq::Modulus;
use alloc::boxed::Box;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

/// Message tags. Payload formats (all little-endian, LSB-first bit packing):
pub mod tags {
    /// Setup round 1: `S` (32 bytes, Chou–Orlandi sender) ‖ 16-byte seed share.
    pub const SETUP_S: u16 = 0x0001;
    /// Setup round 2: 128 Ristretto points `R_i` (32 bytes each).
    pub const SETUP_R: u16 = 0x0002;
    /// IKNP `u` matrix: `128 × ⌈m/128⌉·16` bytes.
    pub const IKNP_U: u16 = crate::mpc::ot::iknp::TAG_IKNP_U;
    /// Pool derandomization bits `r ⊕ r'` (1 bit per OT).
    pub const DERAND: u16 = crate::mpc::ot::pool::TAG_DERAND;
    /// COT corrections `d_j = p_0 + c_j − p_1` packed at the correlation width.
    pub const COT_CORR: u16 = 0x0102;
    /// Beaver opening `(x − a, y − b)`: `2n` words of `ℓ` bits.
    pub const BEAVER_OPEN: u16 = 0x0201;
    /// Millionaires leaf messages: per leaf `2^{m_j}` entries of 2 bits.
    pub const CMP_LEAF: u16 = 0x0301;
    /// AND-tree opening: 3 bits per merge.
    pub const CMP_AND: u16 = 0x0302;
    /// Input sharing: the peer's share, `n` words of `ℓ` bits.
    pub const INPUT: u16 = 0x0401;
    /// Opening: the sender's shares, `n` words of `ℓ` bits.
    pub const REVEAL: u16 = 0x0402;
}

/// Blocks hashed per chunk (keeps hash outputs in L1/L2).
const HASH_CHUNK: usize = 2048;

/// Party index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PartyId {
    /// Party 0 (in EncFormer: the server).
    P0,
    /// Party 1 (the client).
    P1,
}

/// How the truncation after a fixed-point product is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TruncMode {
    /// Inputs known to satisfy `|x| < 2^{ℓ-2}`: the wrap bit is
    /// `msb(x'_0) ∨ msb(x'_1)` for `x' = x + 2^{ℓ-2}` (the MSB-known
    /// optimization of SiRNN/Cheetah): one
    /// COT per element.
    KnownMsb,
    /// Any `|x| < 2^{ℓ-1}`: wrap bit by an `ℓ`-bit millionaires' comparison
    /// (CrypTFlow2 Π_Trunc without the low-carry term); faithful (result is
    /// the floor or one less).
    FullRange,
    /// Any `|x| < 2^{ℓ-1}`, exact floor: the wrap bit and the carry of the
    /// low `s` bits, `[x'_0 mod 2^s + x'_1 mod 2^s ≥ 2^s]`, from one batched
    /// millionaires' call over `2n` inputs, then B2A of both.
    Exact,
}

/// Engine configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MpcConfig {
    /// Ring and fixed-point parameters.
    pub ring: RingCfg,
    /// Radix `m` of the millionaires' protocol (digits of `m` bits, `1..=6`).
    pub radix_bits: u32,
    /// Truncation variant used by multiplications.
    pub trunc: TruncMode,
    /// Statistical security parameter σ of the ring↔field extension.
    pub sigma: u32,
}

impl MpcConfig {
    /// EncFormer parameters: `ℓ = 43, F = 13`, radix 4, σ = 40.
    pub const ENCFORMER: MpcConfig = MpcConfig {
        ring: RingCfg::ENCFORMER,
        radix_bits: 4,
        trunc: TruncMode::KnownMsb,
        sigma: 40,
    };

    /// Checks ranges.
    pub fn validate(&self) -> Result<()> {
        RingCfg::new(self.ring.ell, self.ring.frac)?;
        if !(1..=6).contains(&self.radix_bits) {
            return Err(MpcError::InvalidConfig("radix_bits must be in 1..=6"));
        }
        Ok(())
    }
}

/// One party: identity, configuration, randomness, channel and OT state.
pub struct Party<R: RngCore + CryptoRng> {
    pub(crate) id: PartyId,
    pub(crate) cfg: MpcConfig,
    pub(crate) rng: R,
    pub(crate) ch: Channel,
    pub(crate) ot: Option<OtEngine>,
    pub(crate) common: Option<AesPrg>,
}

impl<R: RngCore + CryptoRng> core::fmt::Debug for Party<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Party {{ id: {:?}, cfg: {:?}, set_up: {} }}",
            self.id,
            self.cfg,
            self.ot.is_some()
        )
    }
}

impl<R: RngCore + CryptoRng> Party<R> {
    /// New party with its own CSPRNG. Call [`Party::setup`] before any
    /// protocol that needs OT.
    pub fn new(id: PartyId, cfg: MpcConfig, rng: R) -> Result<Self> {
        cfg.validate()?;
        Ok(Party {
            id,
            cfg,
            rng,
            ch: Channel::new(),
            ot: None,
            common: None,
        })
    }

    /// This party's index.
    pub fn id(&self) -> PartyId {
        self.id
    }

    /// Configuration.
    pub fn config(&self) -> &MpcConfig {
        &self.cfg
    }

    /// Channel handle (to build a [`crate::mpc::Session`] around a protocol).
    pub fn channel(&self) -> Channel {
        self.ch.clone()
    }

    /// Ring parameters.
    pub fn ring(&self) -> RingCfg {
        self.cfg.ring
    }

    /// True for party 0.
    pub fn is_p0(&self) -> bool {
        self.id == PartyId::P0
    }

    /// Number of correlated OTs consumed so far as (sender, receiver).
    pub fn ot_counts(&self) -> (u64, u64) {
        self.ot.as_ref().map_or((0, 0), |o| (o.sent, o.received))
    }

    /// Mutable access to the party's randomness (e.g. to sample shares).
    pub fn rng(&mut self) -> &mut R {
        &mut self.rng
    }

    /// One-time setup (2 rounds): 128 Chou–Orlandi base OTs in each direction
    /// to seed IKNP both ways, plus a common seed `H(s_0 ‖ s_1)` for share
    /// re-randomization in [`Party::field_to_ring`].
    pub async fn setup(&mut self) -> Result<()> {
        let ch = self.ch.clone();
        let prev = ch.set_phase(Phase::Setup);
        let (bs, s_msg) = BaseSender::start(&mut self.rng);
        let mut seed = [0u8; 16];
        self.rng.fill_bytes(&mut seed);
        let mut m1 = s_msg.to_vec();
        m1.extend_from_slice(&seed);
        ch.send(tags::SETUP_S, m1);
        let peer = ch.recv(tags::SETUP_S).await?;
        if peer.len() != 48 {
            return Err(MpcError::Malformed {
                tag: tags::SETUP_S,
                what: "setup message length",
            });
        }
        let mut db = [0u8; 16];
        self.rng.fill_bytes(&mut db);
        let delta = u128::from_le_bytes(db);
        db.zeroize();
        let choices: Vec<u8> = (0..128).map(|i| ((delta >> i) & 1) as u8).collect();
        let (rmsg, keys) = base::receive(&mut self.rng, &peer[..32], &choices, tags::SETUP_S)?;
        ch.send(tags::SETUP_R, rmsg);
        let peer_r = ch.recv(tags::SETUP_R).await?;
        let pairs = bs.finish(&peer_r, 128, tags::SETUP_R)?;
        let sender = IknpSender::new(delta, &keys)?;
        let receiver = IknpReceiver::new(&pairs)?;
        let mut h = Sha256::new();
        h.update(b"veil/common-seed/v1");
        if self.is_p0() {
            h.update(seed);
            h.update(&peer[32..48]);
        } else {
            h.update(&peer[32..48]);
            h.update(seed);
        }
        let d = h.finalize();
        let mut cs = [0u8; 16];
        cs.copy_from_slice(&d[..16]);
        self.common = Some(AesPrg::new(cs));
        seed.zeroize();
        cs.zeroize();
        self.ot = Some(OtEngine {
            sender: Box::new(PooledSender::new(Box::new(sender))),
            receiver: Box::new(PooledReceiver::new(Box::new(receiver))),
            hash: crate::mpc::ot::CrHash::new(),
            sent: 0,
            received: 0,
        });
        ch.set_phase(prev);
        Ok(())
    }

    /// Offline OT preprocessing: precomputes `as_sender` random COTs with this
    /// party as sender and `as_receiver` as receiver (1 round). Later protocol
    /// calls consume them with 1 derandomization bit per OT instead of the
    /// 128-bit IKNP column, moving OT-extension traffic offline. The peer
    /// must call it with the two counts swapped.
    pub async fn preprocess_ot(&mut self, as_sender: usize, as_receiver: usize) -> Result<()> {
        let ch = self.ch.clone();
        let prev = ch.set_phase(Phase::Offline);
        let r = self.random_bits(as_receiver);
        let ot = self.ot()?;
        // Zero counts are skipped on both sides alike (the peer's counts are
        // these two swapped).
        if as_receiver > 0 {
            ot.receiver.fill(&ch, r).await?;
        }
        if as_sender > 0 {
            ot.sender.fill(&ch, as_sender).await?;
        }
        ch.set_phase(prev);
        Ok(())
    }

    pub(crate) fn ot(&mut self) -> Result<&mut OtEngine> {
        if self.ch.is_poisoned() {
            return Err(MpcError::Poisoned);
        }
        self.ot.as_mut().ok_or(MpcError::NotSetUp)
    }

    pub(crate) fn random_bits(&mut self, n: usize) -> Vec<u8> {
        let mut v = alloc::vec![0u8; n];
        self.rng.fill_bytes(&mut v);
        for b in v.iter_mut() {
            *b &= 1;
        }
        v
    }

    pub(crate) fn random_ring(&mut self, n: usize) -> Vec<u64> {
        let m = self.cfg.ring.mask();
        (0..n).map(|_| self.rng.next_u64() & m).collect()
    }

    /// COT as sender with correlations `corr[j]` of width `widths(j)` bits:
    /// sends `d_j = H(q_j) + c_j − H(q_j ⊕ Δ) mod 2^w` and returns
    /// `p_j = H(q_j) mod 2^w`. The receiver obtains `p_j + r_j·c_j`.
    pub(crate) fn cot_send_corr(
        &mut self,
        b: &CotBatchS,
        corr: &[u64],
        widths: impl Fn(usize) -> u32,
    ) -> Result<Zeroizing<Vec<u64>>> {
        let ch = self.ch.clone();
        let ot = self.ot()?;
        let n = corr.len();
        if b.q.len() != n {
            return Err(MpcError::InvalidInput("COT batch size"));
        }
        let total: usize = (0..n).map(|j| widths(j) as usize).sum();
        let mut w = BitWriter::with_capacity_bits(total);
        let mut p = Vec::with_capacity(n);
        let mut k0 = alloc::vec![0u128; HASH_CHUNK];
        let mut k1 = alloc::vec![0u128; HASH_CHUNK];
        for c0 in (0..n).step_by(HASH_CHUNK) {
            let len = HASH_CHUNK.min(n - c0);
            let tw = b.tweak + c0 as u64;
            ot.hash
                .hash_into(&b.q[c0..c0 + len], 0, tw, 0, &mut k0[..len]);
            ot.hash
                .hash_into(&b.q[c0..c0 + len], b.delta, tw, 0, &mut k1[..len]);
            for k in 0..len {
                let j = c0 + k;
                let bits = widths(j);
                let m = mask(bits);
                let p0 = (k0[k] as u64) & m;
                let p1 = (k1[k] as u64) & m;
                w.push(p0.wrapping_add(corr[j]).wrapping_sub(p1), bits);
                p.push(p0);
            }
        }
        k0.zeroize();
        k1.zeroize();
        ch.send(tags::COT_CORR, w.finish());
        Ok(Zeroizing::new(p))
    }

    /// Receiver side of [`Party::cot_send_corr`]: returns `p_j + r_j·c_j mod 2^w`.
    pub(crate) async fn cot_recv_corr(
        &mut self,
        b: &CotBatchR,
        widths: impl Fn(usize) -> u32,
    ) -> Result<Zeroizing<Vec<u64>>> {
        let ch = self.ch.clone();
        let msg = ch.recv(tags::COT_CORR).await?;
        let n = b.r.len();
        let total: usize = (0..n).map(|j| widths(j) as usize).sum();
        let mut rd = BitReader::new(&msg, total, tags::COT_CORR)?;
        let ot = self.ot()?;
        let mut t = alloc::vec![0u128; HASH_CHUNK];
        let mut out = Vec::with_capacity(n);
        for c0 in (0..n).step_by(HASH_CHUNK) {
            let len = HASH_CHUNK.min(n - c0);
            ot.hash
                .hash_into(&b.t[c0..c0 + len], 0, b.tweak + c0 as u64, 0, &mut t[..len]);
            for k in 0..len {
                let j = c0 + k;
                let bits = widths(j);
                let d = rd.read(bits);
                out.push((t[k] as u64).wrapping_add(d.wrapping_mul(b.r[j] as u64)) & mask(bits));
            }
        }
        t.zeroize();
        Ok(Zeroizing::new(out))
    }

    /// Z_q version of [`Party::cot_send_corr`] (pads from 256 hash bits, bias ≤ 2^-128).
    pub(crate) fn cot_send_corr_zq(
        &mut self,
        b: &CotBatchS,
        corr: &[u128],
        q: &Modulus,
    ) -> Result<Zeroizing<Vec<u128>>> {
        let ch = self.ch.clone();
        let ot = self.ot()?;
        let h = &ot.hash;
        let (a0, a1) = (h.hash(&b.q, 0, b.tweak, 1), h.hash(&b.q, 0, b.tweak, 2));
        let (c0, c1) = (
            h.hash(&b.q, b.delta, b.tweak, 1),
            h.hash(&b.q, b.delta, b.tweak, 2),
        );
        let mut p = Vec::with_capacity(corr.len());
        let mut d = Vec::with_capacity(corr.len());
        for j in 0..corr.len() {
            let p0 = q.reduce_wide(a1[j], a0[j]);
            let p1 = q.reduce_wide(c1[j], c0[j]);
            d.push(q.sub(q.add(p0, corr[j]), p1));
            p.push(p0);
        }
        ch.send(tags::COT_CORR, crate::mpc::pack::pack_u128(&d, q.bits()));
        Ok(Zeroizing::new(p))
    }

    /// Receiver side of [`Party::cot_send_corr_zq`].
    pub(crate) async fn cot_recv_corr_zq(
        &mut self,
        b: &CotBatchR,
        q: &Modulus,
    ) -> Result<Zeroizing<Vec<u128>>> {
        let ch = self.ch.clone();
        let msg = ch.recv(tags::COT_CORR).await?;
        let n = b.r.len();
        let d = crate::mpc::pack::unpack_u128(&msg, n, q.bits(), tags::COT_CORR)?;
        let ot = self.ot()?;
        let (t0, t1) = (
            ot.hash.hash(&b.t, 0, b.tweak, 1),
            ot.hash.hash(&b.t, 0, b.tweak, 2),
        );
        let mut out = Vec::with_capacity(n);
        for j in 0..n {
            if d[j] >= q.value() {
                return Err(MpcError::Malformed {
                    tag: tags::COT_CORR,
                    what: "Z_q element not reduced",
                });
            }
            let t = q.reduce_wide(t1[j], t0[j]);
            out.push(if b.r[j] == 1 { q.add(t, d[j]) } else { t });
        }
        Ok(Zeroizing::new(out))
    }

    /// Next common pseudorandom element of `Z_q` (same on both parties).
    pub(crate) fn common_zq(&mut self, q: &Modulus) -> Result<u128> {
        if self.ch.is_poisoned() {
            return Err(MpcError::Poisoned);
        }
        let prg = self.common.as_mut().ok_or(MpcError::NotSetUp)?;
        let bits = q.bits();
        let m = if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        loop {
            let mut b = [0u8; 16];
            prg.fill(&mut b);
            let v = u128::from_le_bytes(b) & m;
            if v < q.value() {
                return Ok(v);
            }
        }
    }
}
