//! A party of the two-party engine: configuration, construction with the
//! default (IKNP) or an injected OT, setup (common seed, base OTs) and the
//! correlated-OT helpers shared by all protocols.

use crate::mpc::channel::{Channel, Phase};
use crate::mpc::error::{expect_len, MpcError, Result};
use crate::mpc::msgs::{
    BaseOtReply, CorrMessage, CorrShape, CorrWidths, SeedShare, SetupHello, WideCorr, ZqMessage,
    ZqShape,
};
use crate::mpc::ot::base::{self, BaseSender};
use crate::mpc::ot::iknp::{IknpReceiver, IknpSender};
use crate::mpc::ot::pool::{PooledReceiver, PooledSender};
use crate::mpc::ot::silent::{SilentParams, SilentReceiver, SilentSender};
use crate::mpc::ot::{AesPrg, CotBatchR, CotBatchS, CotReceiver, CotSender, OtEngine};
use crate::mpc::pack::BitWriter;
use crate::mpc::ring::{mask, RingCfg};
use crate::mpc::shares::RingShares;
use crate::mpc::triples::TripleSource;
use crate::mpc::zq::Modulus;
use alloc::boxed::Box;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

/// Blocks hashed per chunk (keeps hash outputs in L1/L2).
const HASH_CHUNK: usize = 2048;

/// First hash domain of the pads of [`Party::cot_send_wide`] (domains 0–2 are the
/// single-pad COTs and the `Z_q` pads).
const WIDE_DOMAIN: u64 = 0x100;

/// COTs per batch of [`Party::preprocess_ot`].
const PREPROCESS_CHUNK: usize = 1 << 22;

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

/// One party: identity, configuration, randomness, channel, OT state and
/// the source of Beaver triples.
///
/// * [`Party::new`] + [`Party::setup`]: the default — Chou–Orlandi base OTs,
///   IKNP extension in both directions behind random-COT pools, and the
///   common seed, in 2 rounds.
/// * [`Party::with_ot`] + [`Party::setup`]: an injected OT (e.g. a silent
///   OT); setup only exchanges the common seed ([`Party::setup_common_seed`]).
/// * [`Party::with_triple_source`]: Beaver triples from another source than
///   the default OT-based Gilboa multiplication ([`Party::triples`]).
pub struct Party<R: RngCore + CryptoRng> {
    pub(crate) id: PartyId,
    pub(crate) cfg: MpcConfig,
    pub(crate) rng: R,
    pub(crate) ch: Channel,
    pub(crate) ot: Option<OtEngine>,
    pub(crate) common: Option<AesPrg>,
    pub(crate) triple_src: Option<Box<dyn TripleSource>>,
    /// Silent-OT parameters: [`Party::setup`] then builds the silent
    /// generator behind the pools ([`Party::with_silent_ot`]).
    pub(crate) silent: Option<SilentParams>,
}

impl<R: RngCore + CryptoRng> core::fmt::Debug for Party<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Party {{ id: {:?}, cfg: {:?}, set_up: {}, ot: {}, common_seed: {}, triples: {} }}",
            self.id,
            self.cfg,
            self.ot.is_some() && self.common.is_some(),
            self.ot.is_some(),
            self.common.is_some(),
            if self.triple_src.is_some() {
                "injected"
            } else {
                "gilboa"
            }
        )
    }
}

impl<R: RngCore + CryptoRng> Party<R> {
    /// New party with its own CSPRNG. Call [`Party::setup`] (base OTs, IKNP
    /// with pools, common seed) before any protocol that needs OT.
    pub fn new(id: PartyId, cfg: MpcConfig, rng: R) -> Result<Self> {
        cfg.validate()?;
        Ok(Party {
            id,
            cfg,
            rng,
            ch: Channel::new(),
            ot: None,
            common: None,
            triple_src: None,
            silent: None,
        })
    }

    /// New party whose [`Party::setup`] builds the silent OT
    /// ([`crate::mpc::ot::silent`], Ferret) behind the random-COT pools: base
    /// OTs and IKNP as in the default setup, then IKNP makes the first
    /// extension's base COTs once (1 more round) and every later
    /// [`Party::preprocess_ot`] fills the pools silently (≈ 0.45 bit per COT,
    /// sender to receiver). Calls too large for the pool fall back to IKNP
    /// on demand. The peer must be built with the same `params`.
    pub fn with_silent_ot(
        id: PartyId,
        cfg: MpcConfig,
        rng: R,
        params: SilentParams,
    ) -> Result<Self> {
        params.validate()?;
        let mut p = Self::new(id, cfg, rng)?;
        p.silent = Some(params);
        Ok(p)
    }

    /// New party with an injected correlated OT: `sender` for this party as
    /// COT sender, `receiver` as COT receiver; the peer's instances must be
    /// paired with them (its receiver with this `sender`, its sender with this
    /// `receiver`). [`Party::setup`] then only exchanges the common seed.
    ///
    /// The protocols rely on the contract documented in [`crate::mpc::ot`]:
    /// both parties call `extend` in the same order with the same sizes,
    /// [`CotReceiver::extend`] never waits for the peer (it only sends, or
    /// does nothing), and [`CotSender::extend`] may wait for what the peer's
    /// receiver sent. The OT is used as given (wrap it in
    /// [`PooledSender`]/[`PooledReceiver`] for [`Party::preprocess_ot`]).
    pub fn with_ot(
        id: PartyId,
        cfg: MpcConfig,
        rng: R,
        sender: Box<dyn CotSender>,
        receiver: Box<dyn CotReceiver>,
    ) -> Result<Self> {
        let mut p = Self::new(id, cfg, rng)?;
        p.ot = Some(OtEngine::new(sender, receiver));
        Ok(p)
    }

    /// Replaces the default Beaver-triple generation (Gilboa over this
    /// party's OT, [`Party::triples`]) by `src`; the peer must use the paired
    /// source.
    pub fn with_triple_source(mut self, src: Box<dyn TripleSource>) -> Self {
        self.triple_src = Some(src);
        self
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

    /// Precomputed COTs waiting in this party's pools: `(as sender, as receiver)` (zeros before
    /// setup). The peer's counts are these swapped: both ends of a COT leave their pools at once.
    pub fn pooled_ots(&self) -> (usize, usize) {
        self.ot
            .as_ref()
            .map_or((0, 0), |o| (o.sender.pooled(), o.receiver.pooled()))
    }

    /// Counters of this party's silent-OT sender (extensions run, COTs handed
    /// out, extension-message bytes it sent), for a party built with
    /// [`Party::with_silent_ot`] after setup; `None` otherwise.
    pub fn silent_stats(&self) -> Option<crate::mpc::ot::silent::SilentStats> {
        self.ot.as_ref().and_then(|o| o.sender.silent_stats())
    }

    /// Mutable access to the party's randomness (e.g. to sample shares).
    pub fn rng(&mut self) -> &mut R {
        &mut self.rng
    }

    /// One-time setup. Default party ([`Party::new`]): 128 Chou–Orlandi base
    /// OTs in each direction to seed IKNP both ways (behind random-COT pools),
    /// plus the common seed `H(s_0 ‖ s_1)` for share re-randomization in
    /// [`Party::field_to_ring`]; 2 rounds, the seed shares ride in the first
    /// message ([`SetupHello`]). Party that already has an OT (injected with
    /// [`Party::with_ot`], or from an earlier setup): only
    /// [`Party::setup_common_seed`] (1 round). Party built with
    /// [`Party::with_silent_ot`]: the default setup, then IKNP makes the base
    /// COTs of the first silent extension in both directions (3 rounds).
    pub async fn setup(&mut self) -> Result<()> {
        if self.ot.is_some() {
            return self.setup_common_seed().await;
        }
        let ch = self.ch.clone();
        let prev = ch.set_phase(Phase::Setup);
        let (bs, s) = BaseSender::start(&mut self.rng);
        let seed = self.seed_share();
        ch.send_msg(&SetupHello {
            s,
            seed: seed.clone(),
        });
        let hello = ch.recv_msg::<SetupHello>(&()).await?;
        let mut db = [0u8; 16];
        self.rng.fill_bytes(&mut db);
        // Δ's low bit is 1 (emp-ot's convention): a COT receiver's block then carries its
        // choice bit in its low bit once the sender's blocks have theirs cleared, which the
        // silent OT uses to encode blocks and choice bits in one pass. Δ keeps 127 random bits.
        let delta = u128::from_le_bytes(db) | 1;
        db.zeroize();
        let mut choices: Vec<u8> = (0..128).map(|i| ((delta >> i) & 1) as u8).collect();
        let (reply, keys) = base::receive(&mut self.rng, &hello.s, &choices);
        choices.zeroize();
        ch.send_msg(&reply);
        let peer_r = ch.recv_msg::<BaseOtReply>(&128).await?;
        let pairs = bs.finish(&peer_r);
        let sender = IknpSender::new(delta, &keys)?;
        let receiver = IknpReceiver::new(&pairs)?;
        self.common = Some(self.common_prg(&seed, &hello.seed));
        let (s, r): (Box<dyn CotSender>, Box<dyn CotReceiver>) = match self.silent {
            None => (Box::new(sender), Box::new(receiver)),
            Some(params) => {
                let mut k = [[0u8; 16]; 2];
                self.rng.fill_bytes(&mut k[0]);
                self.rng.fill_bytes(&mut k[1]);
                let mut ss = SilentSender::new(sender, params, k[0])?;
                let mut sr = SilentReceiver::new(receiver, params, k[1])?;
                k.zeroize();
                // Receiver first (it only sends), so both directions share one round.
                sr.bootstrap(&ch).await?;
                ss.bootstrap(&ch).await?;
                (Box::new(ss), Box::new(sr))
            }
        };
        self.ot = Some(OtEngine::new(
            Box::new(PooledSender::new(s)),
            Box::new(PooledReceiver::new(r)),
        ));
        self.setup_triple_source(&ch).await?;
        ch.set_phase(prev);
        Ok(())
    }

    /// The injected triple source's once-per-session exchange ([`TripleSource::setup`]), in
    /// the setup phase.
    async fn setup_triple_source(&mut self, ch: &Channel) -> Result<()> {
        match self.triple_src.as_mut() {
            Some(src) => src.setup(ch).await,
            None => Ok(()),
        }
    }

    /// The common-seed part of the setup alone: both parties send a fresh
    /// 16-byte share ([`SeedShare`], 1 round) and key the common PRG with
    /// `H(s_0 ‖ s_1)`. [`Party::setup`] calls it for a party with an injected
    /// OT; the default setup sends the shares inside [`SetupHello`] instead.
    pub async fn setup_common_seed(&mut self) -> Result<()> {
        if self.ch.is_poisoned() {
            return Err(MpcError::Poisoned);
        }
        let ch = self.ch.clone();
        let prev = ch.set_phase(Phase::Setup);
        let seed = self.seed_share();
        ch.send_msg(&seed);
        let peer = ch.recv_msg::<SeedShare>(&()).await?;
        self.common = Some(self.common_prg(&seed, &peer));
        self.setup_triple_source(&ch).await?;
        ch.set_phase(prev);
        Ok(())
    }

    fn seed_share(&mut self) -> SeedShare {
        let mut s = SeedShare { seed: [0u8; 16] };
        self.rng.fill_bytes(&mut s.seed);
        s
    }

    /// `AES-PRG(H("veil/common-seed/v1" ‖ s_0 ‖ s_1))`, the same at both parties.
    fn common_prg(&self, own: &SeedShare, peer: &SeedShare) -> AesPrg {
        let (s0, s1) = if self.is_p0() {
            (own, peer)
        } else {
            (peer, own)
        };
        let mut h = Sha256::new();
        h.update(b"veil/common-seed/v1");
        h.update(s0.seed);
        h.update(s1.seed);
        let mut d = h.finalize();
        let mut cs = [0u8; 16];
        cs.copy_from_slice(&d[..16]);
        d.zeroize();
        let prg = AesPrg::new(cs);
        cs.zeroize();
        prg
    }

    /// Offline OT preprocessing: precomputes `as_sender` random COTs with this
    /// party as sender and `as_receiver` as receiver (1 round). Later protocol
    /// calls consume them with 1 derandomization bit per OT instead of the
    /// 128-bit IKNP column, moving OT-extension traffic offline. The peer
    /// must call it with the two counts swapped.
    pub async fn preprocess_ot(&mut self, as_sender: usize, as_receiver: usize) -> Result<()> {
        let ch = self.ch.clone();
        let prev = ch.set_phase(Phase::Offline);
        let r = Zeroizing::new(self.random_bits(as_receiver));
        let ot = self.ot()?;
        // Zero counts are skipped on both sides alike (the peer's counts are
        // these two swapped). Both sides cut the batches at the same
        // `PREPROCESS_CHUNK`, so the frames stay far below the transport's
        // frame limit (16 B per COT: 64 MiB per IKNP matrix) and pair up.
        // IKNP: the receiver fills only send, so they go first; a silent OT
        // flows the other way (its sender fills only send), so its sender
        // fills go first. Both parties' generators answer alike.
        let sender_first = ot.sender.random_sender_sends();
        if !sender_first {
            for c in r.chunks(PREPROCESS_CHUNK) {
                ot.receiver.fill(&ch, c.to_vec()).await?;
            }
        }
        let mut left = as_sender;
        while left > 0 {
            let m = left.min(PREPROCESS_CHUNK);
            ot.sender.fill(&ch, m).await?;
            left -= m;
        }
        if sender_first {
            for c in r.chunks(PREPROCESS_CHUNK) {
                ot.receiver.fill(&ch, c.to_vec()).await?;
            }
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

    /// COT as sender with correlations `corr[j]` of width `widths.width(j)`
    /// bits: sends `d_j = H(q_j) + c_j − H(q_j ⊕ Δ) mod 2^w` as message `M`
    /// and returns `p_j = H(q_j) mod 2^w`. The receiver obtains
    /// `p_j + r_j·c_j`.
    pub(crate) fn cot_send_corr<M: CorrMessage>(
        &mut self,
        b: &CotBatchS,
        corr: &[u64],
        widths: CorrWidths,
    ) -> Result<Zeroizing<Vec<u64>>> {
        let ch = self.ch.clone();
        let ot = self.ot()?;
        let n = corr.len();
        expect_len("COT batch", n, b.q.len())?;
        let mut d = Vec::with_capacity(n);
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
                let m = mask(widths.width(j));
                let p0 = (k0[k] as u64) & m;
                let p1 = (k1[k] as u64) & m;
                d.push(p0.wrapping_add(corr[j]).wrapping_sub(p1) & m);
                p.push(p0);
            }
        }
        k0.zeroize();
        k1.zeroize();
        ch.send_msg(&M::from_parts(widths, d));
        Ok(Zeroizing::new(p))
    }

    /// Receiver side of [`Party::cot_send_corr`]: waits for message `M` and
    /// returns `p_j + r_j·c_j mod 2^w`.
    pub(crate) async fn cot_recv_corr<M: CorrMessage>(
        &mut self,
        b: &CotBatchR,
        widths: CorrWidths,
    ) -> Result<Zeroizing<Vec<u64>>> {
        let ch = self.ch.clone();
        let n = b.r.len();
        let msg = ch.recv_msg::<M>(&CorrShape { count: n, widths }).await?;
        let d = msg.corrections();
        let ot = self.ot()?;
        let mut t = alloc::vec![0u128; HASH_CHUNK];
        let mut out = Vec::with_capacity(n);
        for c0 in (0..n).step_by(HASH_CHUNK) {
            let len = HASH_CHUNK.min(n - c0);
            ot.hash
                .hash_into(&b.t[c0..c0 + len], 0, b.tweak + c0 as u64, 0, &mut t[..len]);
            for k in 0..len {
                let j = c0 + k;
                out.push(
                    (t[k] as u64).wrapping_add(d[j].wrapping_mul(b.r[j] as u64))
                        & mask(widths.width(j)),
                );
            }
        }
        t.zeroize();
        Ok(Zeroizing::new(out))
    }

    /// Gilboa products on wide COTs, as sender: the `m = ℓ·R` COTs are bit-major
    /// (COT `c = i·R + c'` is bit `i` of chooser `c'`), and COT `c` carries the `g`
    /// correlations `v[c'·g + t]` (`t < g`) at width `ℓ − i`, padded with the hash of
    /// `q_c` (or `q_c ⊕ Δ`) in domain `WIDE_DOMAIN + ⌊t/2⌋`, half `t mod 2`. One COT so
    /// carries a whole row of a broadcast product (the pads of distinct `(c, t)` are
    /// independent outputs of the correlation-robust hash). Sends the corrections as
    /// one [`WideCorr`] (widths [`CorrWidths::Gilboa`] over `R·g` products) and returns
    /// this party's share of the products, `−Σ_i 2^i·p_{i·R+c', t} mod 2^ℓ` at
    /// `c'·g + t`; the receiver's [`Party::cot_recv_wide_gilboa`] holds
    /// `Σ_i 2^i·(p + r·v) mod 2^ℓ`, so the two add up to `v[c'·g + t]·y_{c'}` for the
    /// chooser's value `y_{c'} = Σ_i 2^i r_{i·R+c'}`. Corrections and pads are
    /// streamed: nothing of size `m·g` but the packed message is held.
    pub(crate) fn cot_send_wide_gilboa(
        &mut self,
        b: &CotBatchS,
        v: &[u64],
        g: usize,
        ell: u32,
    ) -> Result<Zeroizing<Vec<u64>>> {
        let ch = self.ch.clone();
        let ot = self.ot()?;
        let m = b.q.len();
        let e = ell as usize;
        let rr = m / e.max(1);
        expect_len("wide COTs (ℓ per chooser)", rr * e, m)?;
        expect_len("wide COT correlations (choosers·g)", rr * g, v.len())?;
        let widths = CorrWidths::Gilboa { n: rr * g, ell };
        let mut wr = BitWriter::with_capacity_bits(widths.total_bits(m * g));
        let mut sums = Zeroizing::new(alloc::vec![0u64; rr * g]);
        let mut k0 = Zeroizing::new(alloc::vec![0u128; g.div_ceil(2)]);
        let mut k1 = Zeroizing::new(alloc::vec![0u128; g.div_ceil(2)]);
        for c in 0..m {
            let (i, cp) = (c / rr.max(1), c % rr.max(1));
            let w = ell - i as u32;
            let wm = mask(w);
            let tw = b.tweak.wrapping_add(c as u64);
            ot.hash.hash_domains(b.q[c], tw, WIDE_DOMAIN, &mut k0);
            ot.hash
                .hash_domains(b.q[c] ^ b.delta, tw, WIDE_DOMAIN, &mut k1);
            let (row, acc) = (&v[cp * g..cp * g + g], &mut sums[cp * g..cp * g + g]);
            for t in 0..g {
                let h = 64 * (t & 1);
                let p0 = ((k0[t >> 1] >> h) as u64) & wm;
                let p1 = ((k1[t >> 1] >> h) as u64) & wm;
                wr.push(p0.wrapping_add(row[t]).wrapping_sub(p1) & wm, w);
                acc[t] = acc[t].wrapping_add(p0 << i);
            }
        }
        ch.send_owned(WideCorr::from_packed(widths, m * g, wr.finish()));
        let em = mask(ell);
        for x in sums.iter_mut() {
            *x = x.wrapping_neg() & em;
        }
        Ok(sums)
    }

    /// Receiver side of [`Party::cot_send_wide_gilboa`]: waits for the [`WideCorr`]
    /// and returns `Σ_i 2^i·(p_{i·R+c', t} + r_{i·R+c'}·v[c'·g + t]) mod 2^ℓ` at
    /// `c'·g + t`, streaming the corrections out of the packed message.
    pub(crate) async fn cot_recv_wide_gilboa(
        &mut self,
        b: &CotBatchR,
        g: usize,
        ell: u32,
    ) -> Result<Zeroizing<Vec<u64>>> {
        let ch = self.ch.clone();
        let m = b.r.len();
        let e = ell as usize;
        let rr = m / e.max(1);
        expect_len("wide COTs (ℓ per chooser)", rr * e, m)?;
        let widths = CorrWidths::Gilboa { n: rr * g, ell };
        let msg = ch
            .recv_msg::<WideCorr>(&CorrShape {
                count: m * g,
                widths,
            })
            .await?;
        let mut rd = msg.reader()?;
        let ot = self.ot()?;
        let mut sums = Zeroizing::new(alloc::vec![0u64; rr * g]);
        let mut k = Zeroizing::new(alloc::vec![0u128; g.div_ceil(2)]);
        for c in 0..m {
            let (i, cp) = (c / rr.max(1), c % rr.max(1));
            let w = ell - i as u32;
            let wm = mask(w);
            let rc = b.r[c] as u64;
            ot.hash
                .hash_domains(b.t[c], b.tweak.wrapping_add(c as u64), WIDE_DOMAIN, &mut k);
            let acc = &mut sums[cp * g..cp * g + g];
            for t in 0..g {
                let pad = (k[t >> 1] >> (64 * (t & 1))) as u64;
                let d = rd.read(w);
                let out = pad.wrapping_add(d.wrapping_mul(rc)) & wm;
                acc[t] = acc[t].wrapping_add(out << i);
            }
        }
        let em = mask(ell);
        for x in sums.iter_mut() {
            *x &= em;
        }
        Ok(sums)
    }

    /// Z_q version of [`Party::cot_send_corr`] (pads from 256 hash bits, bias ≤ 2^-128; from
    /// 128 bits, unbiased, when `q` is a power of two).
    pub(crate) fn cot_send_corr_zq<M: ZqMessage>(
        &mut self,
        b: &CotBatchS,
        corr: &[u128],
        q: &Modulus,
    ) -> Result<Zeroizing<Vec<u128>>> {
        let ch = self.ch.clone();
        let ot = self.ot()?;
        expect_len("COT batch", corr.len(), b.q.len())?;
        let h = &ot.hash;
        // The high 128 pad bits matter only when `q` is not a power of two.
        let wide = !q.is_power_of_two();
        let hi = |off: u128| wide.then(|| h.hash(&b.q, off, b.tweak, 2));
        let at = |v: &Option<Vec<u128>>, j: usize| v.as_ref().map_or(0, |v| v[j]);
        let (a0, a1) = (h.hash(&b.q, 0, b.tweak, 1), hi(0));
        let (c0, c1) = (h.hash(&b.q, b.delta, b.tweak, 1), hi(b.delta));
        let mut p = Vec::with_capacity(corr.len());
        let mut d = Vec::with_capacity(corr.len());
        for j in 0..corr.len() {
            let p0 = q.reduce_wide(at(&a1, j), a0[j]);
            let p1 = q.reduce_wide(at(&c1, j), c0[j]);
            d.push(q.sub(q.add(p0, corr[j]), p1));
            p.push(p0);
        }
        ch.send_msg(&M::from_parts(*q, d));
        Ok(Zeroizing::new(p))
    }

    /// Receiver side of [`Party::cot_send_corr_zq`].
    pub(crate) async fn cot_recv_corr_zq<M: ZqMessage>(
        &mut self,
        b: &CotBatchR,
        q: &Modulus,
    ) -> Result<Zeroizing<Vec<u128>>> {
        let ch = self.ch.clone();
        let n = b.r.len();
        let msg = ch.recv_msg::<M>(&ZqShape { count: n, q: *q }).await?;
        let d = msg.corrections();
        let ot = self.ot()?;
        let t0 = ot.hash.hash(&b.t, 0, b.tweak, 1);
        // The high 128 pad bits matter only when `q` is not a power of two.
        let t1 = (!q.is_power_of_two()).then(|| ot.hash.hash(&b.t, 0, b.tweak, 2));
        let mut out = Vec::with_capacity(n);
        for j in 0..n {
            let t = q.reduce_wide(t1.as_ref().map_or(0, |v| v[j]), t0[j]);
            out.push(if b.r[j] == 1 { q.add(t, d[j]) } else { t });
        }
        Ok(Zeroizing::new(out))
    }

    /// Shares of the products `b_0·b_1` of P0's bits and P1's, one COT per bit: P0 is the
    /// sender with correlations `b_0` ([`Party::cot_send_corr`], message `M` at `widths`), P1
    /// the receiver choosing with `b_1`. P0 gets the pads `p_j`, P1 `t_j = p_j + b_{0,j}·b_{1,j}
    /// mod 2^{w_j}`, so `t − p` shares the products. `bits` are this party's bits (`0`/`1`).
    pub(crate) async fn cot_bit_products<M: CorrMessage>(
        &mut self,
        bits: &[u64],
        widths: CorrWidths,
    ) -> Result<Zeroizing<Vec<u64>>> {
        let ch = self.ch.clone();
        if self.is_p0() {
            let sb = self.ot()?.send(&ch, bits.len()).await?;
            self.cot_send_corr::<M>(&sb, bits, widths)
        } else {
            let choices = bits.iter().map(|&v| v as u8).collect();
            let rb = self.ot()?.recv(&ch, choices).await?;
            self.cot_recv_corr::<M>(&rb, widths).await
        }
    }

    /// [`Party::cot_bit_products`] over `Z_q` ([`Party::cot_send_corr_zq`]): P0 gets `p_j`, P1
    /// `t_j = p_j + b_{0,j}·b_{1,j} mod q`.
    pub(crate) async fn cot_bit_products_zq<M: ZqMessage>(
        &mut self,
        bits: &[u128],
        q: &Modulus,
    ) -> Result<Zeroizing<Vec<u128>>> {
        let ch = self.ch.clone();
        if self.is_p0() {
            let sb = self.ot()?.send(&ch, bits.len()).await?;
            self.cot_send_corr_zq::<M>(&sb, bits, q)
        } else {
            let choices = bits.iter().map(|&v| v as u8).collect();
            let rb = self.ot()?.recv(&ch, choices).await?;
            self.cot_recv_corr_zq::<M>(&rb, q).await
        }
    }

    /// This party's shares of `x + c` for a public `c` (P0 adds it, mod `2^ℓ`).
    pub(crate) fn add_public(&self, x: &RingShares, c: u64) -> Zeroizing<Vec<u64>> {
        let (r, p0) = (self.cfg.ring, self.is_p0());
        Zeroizing::new(
            x.as_slice()
                .iter()
                .map(|&v| if p0 { r.add(v, c) } else { v })
                .collect(),
        )
    }

    /// Next common pseudorandom element of `Z_q` (same on both parties).
    pub(crate) fn common_zq(&mut self, q: &Modulus) -> Result<u128> {
        if self.ch.is_poisoned() {
            return Err(MpcError::Poisoned);
        }
        let prg = self.common.as_mut().ok_or(MpcError::NotSetUp)?;
        Ok(q.sample_from(|b| prg.fill(b)))
    }
}
