//! The hybrid run engine: what every model family's private run shares, whatever its layers.
//!
//! A private inference alternates CKKS blocks at the server with MPC blocks on shares, through
//! the complex conversion of [`crate::convert`] at every boundary (EncFormer Fig. 1; FEnc2's
//! networks in the hybrid mode). The client is MPC party P0 and holds the CKKS secret key; the
//! server is P1 and holds the model, the public key and the evaluation keys. A model family
//! ([`crate::bert`], [`crate::cnn::hybrid`]) contributes its plan and its steps; this module
//! holds the rest, once:
//!
//! - the side of a run ([`Role`]): the client's secret key, or the server's public key,
//!   executor and model;
//! - the party's checks (P0 at the client, P1 at the server, the family's [`MpcConfig`]);
//! - M2C and C2M of one frame, on either side, with their accounting ([`HybridRun::m2c`],
//!   [`HybridRun::c2m`]);
//! - the byte, round and operation meter behind the per-block report ([`Meter`], [`Tally`]);
//! - the opening of the result to the client alone ([`HybridRun::open_to_client`]).

pub(crate) mod plan;
pub(crate) mod track;

use crate::circuits::exec::{CkksExec, Exec, OpCounts};
use crate::ckks::{Ciphertext, Ckks, EvaluationKeys, PublicKey, SecretKey};
use crate::convert::{
    c2m_p0, c2m_p1, m2c_p0_in, m2c_p1_in, C2mPlan, ComplexShares, M2cInputs, M2cPlan,
    ProtocolError, RunStats, SlotShares,
};
use crate::error::Error;
use crate::mpc::{MpcConfig, Party, PartyId, RingShares};
use crate::nonlinear::fixed;
use crate::PolyBackend;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// What one block of a run cost, as one party saw it: the report's common part. A model family's
/// report row ([`crate::bert::BlockCost`], [`crate::cnn::StepCost`]) adds the block's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// CKKS operations (server side; zero at the client).
    pub ckks: OpCounts,
    /// Ciphertexts converted (M2C and C2M).
    pub converted_cts: usize,
    /// Ciphertext bytes carried by the conversions.
    pub converted_bytes: u64,
    /// MPC bytes sent + received in the block (ciphertext frames included).
    pub mpc_bytes: u64,
    /// Of [`Tally::mpc_bytes`], those this party sent (the rest it received). The link is full
    /// duplex: the busier direction bounds the block.
    pub mpc_bytes_sent: u64,
    /// MPC rounds of the block.
    pub mpc_rounds: u64,
}

/// One block's costs, as one party saw them (the host adds wall time between events): the
/// engine's [`Tally`] under the block's name. The encoder's and the decoder's runs report in it
/// (their block names are listed at [`crate::bert::run`] and [`crate::decoder::run`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockCost {
    /// Layer index (`usize::MAX` for the head).
    pub layer: usize,
    /// Block name, e.g. `"m2c:x"`, `"softmax"`, `"c2m:y"`, `"head"`, `"ot-fill"` (a silent-OT
    /// pool fill before a layer).
    pub block: &'static str,
    /// What the block cost.
    pub tally: Tally,
}

/// The meter of a run: the channel's counters and the executor's operation counts at the last
/// mark, and the conversions noted since.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    bytes: u64,
    rounds: u64,
    sent: u64,
    ops: OpCounts,
    conv: (usize, u64),
}

/// `(bytes both ways, rounds, bytes sent)` since the party's channel was opened.
fn channel_reading<R: RngCore + CryptoRng>(p: &Party<R>) -> (u64, u64, u64) {
    let s = p.channel().stats();
    let t = [s.setup, s.offline, s.online];
    (
        t.iter().map(|x| x.bytes_sent + x.bytes_recv).sum(),
        t.iter().map(|x| x.rounds as u64).sum(),
        t.iter().map(|x| x.bytes_sent).sum(),
    )
}

impl Meter {
    /// Marks now: the next [`Meter::take`] counts from here.
    pub fn mark<R: RngCore + CryptoRng>(&mut self, p: &Party<R>, ops: OpCounts) {
        let (bytes, rounds, sent) = channel_reading(p);
        *self = Meter {
            bytes,
            rounds,
            sent,
            ops,
            conv: (0, 0),
        };
    }

    /// Adds one conversion's ciphertexts and bytes to the block in progress.
    pub fn note(&mut self, s: &RunStats) {
        self.conv.0 += s.ciphertexts;
        self.conv.1 += s.ciphertext_bytes;
    }

    /// What the block since the last mark cost (`ops`: the executor's counts now), and a new
    /// mark.
    pub fn take<R: RngCore + CryptoRng>(&mut self, p: &Party<R>, ops: OpCounts) -> Tally {
        let (bytes, rounds, sent) = channel_reading(p);
        let t = Tally {
            ckks: ops.since(&self.ops),
            converted_cts: self.conv.0,
            converted_bytes: self.conv.1,
            mpc_bytes: bytes - self.bytes,
            mpc_bytes_sent: sent - self.sent,
            mpc_rounds: rounds - self.rounds,
        };
        self.mark(p, ops);
        t
    }
}

/// What the server evaluates with: the CKKS context and the client's public key material. It
/// holds public types only, so a server built on it cannot reach a secret key.
pub struct ServerKeys<'a, B: PolyBackend> {
    /// The CKKS context.
    pub ck: &'a Ckks<B>,
    /// The client's public key (every C2M re-randomizes with it).
    pub pk: &'a PublicKey<B>,
    /// The client's evaluation keys.
    pub keys: &'a EvaluationKeys<B>,
}

impl<B: PolyBackend> Clone for ServerKeys<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: PolyBackend> Copy for ServerKeys<'_, B> {}

/// The role-specific half of a run: the client's secret key, or what the server evaluates
/// with. `M` is the model family's server-side data (the weights, or the network).
// One value per run, never stored in bulk: the server's executor (with its caches) may make its
// variant much larger than the client's.
#[allow(clippy::large_enum_variant)]
pub enum Role<'a, B: PolyBackend, M: ?Sized> {
    /// The client (P0).
    Client {
        /// The CKKS secret key.
        sk: &'a SecretKey,
    },
    /// The server (P1): public key material only.
    Server {
        /// The public key (C2M re-randomizes with it).
        pk: &'a PublicKey<B>,
        /// The CKKS executor over the evaluation keys.
        ex: CkksExec<'a, B>,
        /// The model.
        model: &'a M,
    },
}

/// One party's side of a hybrid run: its MPC party, the CKKS context, its [`Role`] and the
/// [`Meter`]. The fields are public so that a model's step can borrow the executor and the meter
/// at once.
pub struct HybridRun<'a, 'p, B: PolyBackend, R: RngCore + CryptoRng, M: ?Sized> {
    /// The MPC party (P0 at the client, P1 at the server).
    pub party: &'p mut Party<R>,
    /// The CKKS context.
    pub ck: &'a Ckks<B>,
    /// The side.
    pub role: Role<'a, B, M>,
    /// The report's meter.
    pub meter: Meter,
}

fn check_party<R: RngCore + CryptoRng>(
    p: &Party<R>,
    want: PartyId,
    config: &MpcConfig,
) -> Result<(), ProtocolError> {
    if p.id() != want || p.config() != config {
        return Err(Error::InvalidParameters(
            "the MPC party must be P0 at the client and P1 at the server, with the model's MpcConfig",
        )
        .into());
    }
    Ok(())
}

fn wrong_side(what: &'static str) -> ProtocolError {
    Error::InvalidParameters(what).into()
}

impl<'a, 'p, B: PolyBackend, R: RngCore + CryptoRng, M: ?Sized> HybridRun<'a, 'p, B, R, M> {
    /// The client's side; a typed error unless `party` is P0 with `config`.
    pub fn client(
        party: &'p mut Party<R>,
        ck: &'a Ckks<B>,
        sk: &'a SecretKey,
        config: &MpcConfig,
    ) -> Result<Self, ProtocolError> {
        check_party(party, PartyId::P0, config)?;
        let mut meter = Meter::default();
        meter.mark(party, OpCounts::default());
        Ok(HybridRun {
            party,
            ck,
            role: Role::Client { sk },
            meter,
        })
    }

    /// The server's side, evaluating on `slots` slots with `keys`; a typed error unless `party`
    /// is P1 with `config`.
    pub fn server(
        party: &'p mut Party<R>,
        keys: ServerKeys<'a, B>,
        slots: usize,
        model: &'a M,
        config: &MpcConfig,
    ) -> Result<Self, ProtocolError> {
        check_party(party, PartyId::P1, config)?;
        let mut meter = Meter::default();
        meter.mark(party, OpCounts::default());
        let ServerKeys { ck, pk, keys } = keys;
        Ok(HybridRun {
            party,
            ck,
            role: Role::Server {
                pk,
                ex: CkksExec::new(ck, keys, slots),
                model,
            },
            meter,
        })
    }

    /// Whether this is the server's side.
    pub fn is_server(&self) -> bool {
        matches!(self.role, Role::Server { .. })
    }

    /// The server's executor (`None` at the client).
    pub fn exec(&self) -> Option<&CkksExec<'a, B>> {
        match &self.role {
            Role::Server { ex, .. } => Some(ex),
            Role::Client { .. } => None,
        }
    }

    /// Limits the server executor's cache of keyed plaintexts to `bytes`
    /// ([`CkksExec::with_cache_budget`]); nothing at the client.
    pub fn set_cache_budget(&mut self, bytes: usize) {
        if let Role::Server { ex, .. } = &mut self.role {
            ex.set_cache_budget(bytes);
        }
    }

    /// The server's model (`None` at the client).
    pub fn model(&self) -> Option<&'a M> {
        match self.role {
            Role::Server { model, .. } => Some(model),
            Role::Client { .. } => None,
        }
    }

    /// The executor's operation counts so far (zero at the client).
    pub fn ops(&self) -> OpCounts {
        self.exec().map(Exec::counts).unwrap_or_default()
    }

    /// Marks now (after set-up work that no block should be charged for).
    pub fn mark(&mut self) {
        let ops = self.ops();
        self.meter.mark(self.party, ops);
    }

    /// The block since the last mark, and a new mark.
    pub fn tally(&mut self) -> Tally {
        let ops = self.ops();
        self.meter.take(self.party, ops)
    }

    /// M2C of one frame of share vectors under `plan`: the server gets the ciphertexts
    /// (`None` at the client). Noted in the meter.
    pub async fn m2c(
        &mut self,
        plan: &M2cPlan,
        inputs: &[ComplexShares],
    ) -> Result<Option<Vec<Ciphertext<B>>>, ProtocolError> {
        self.m2c_in(plan, M2cInputs::Full(inputs)).await
    }

    /// [`HybridRun::m2c`] of inputs given by their distinct values ([`SlotShares`]: the lift's
    /// OTs and bytes only for the values, none for repeats and public zeros). Both sides give
    /// the same slot maps and value counts (the layout is public).
    pub async fn m2c_slots(
        &mut self,
        plan: &M2cPlan,
        inputs: &[SlotShares],
    ) -> Result<Option<Vec<Ciphertext<B>>>, ProtocolError> {
        self.m2c_in(plan, M2cInputs::Slots(inputs)).await
    }

    async fn m2c_in(
        &mut self,
        plan: &M2cPlan,
        inputs: M2cInputs<'_>,
    ) -> Result<Option<Vec<Ciphertext<B>>>, ProtocolError> {
        let (out, st) = match &self.role {
            Role::Server { .. } => {
                let (c, st) = m2c_p1_in(self.party, self.ck, plan, inputs).await?;
                (Some(c), st)
            }
            Role::Client { sk } => (
                None,
                m2c_p0_in(self.party, self.ck, sk, plan, inputs).await?,
            ),
        };
        self.meter.note(&st);
        Ok(out)
    }

    /// C2M of one frame under `plan`: the server gives its (complex) ciphertexts `cts`, the
    /// client `None` and the `count` it expects. Both get one [`ComplexShares`] per ciphertext.
    /// Noted in the meter; a typed error when the side and the arguments disagree.
    pub async fn c2m(
        &mut self,
        plan: &C2mPlan,
        cts: Option<&[Ciphertext<B>]>,
        count: usize,
    ) -> Result<Vec<ComplexShares>, ProtocolError> {
        let (sh, st) = match (&self.role, cts) {
            (Role::Server { pk, .. }, Some(c)) => {
                if c.len() != count {
                    return Err(Error::Shape {
                        what: "ciphertexts at a C2M boundary",
                        expected: count,
                        found: c.len(),
                    }
                    .into());
                }
                c2m_p1(self.party, self.ck, pk, plan, c).await?
            }
            (Role::Client { sk }, None) => c2m_p0(self.party, self.ck, sk, plan, count).await?,
            _ => return Err(wrong_side("C2M called on the wrong side")),
        };
        self.meter.note(&st);
        Ok(sh)
    }

    /// Opens `shares` (fixed point at the ring's fraction) to the client alone: the client pads
    /// its share with a fresh uniform mask first, so the server sees a uniform value. The client
    /// gets the values, the server `None`.
    pub async fn open_to_client(
        &mut self,
        shares: RingShares,
    ) -> Result<Option<Vec<f64>>, ProtocolError> {
        let r = self.party.ring();
        if self.is_server() {
            self.party.reveal(&shares).await?;
            return Ok(None);
        }
        let pad: Vec<u64> = (0..shares.len())
            .map(|_| self.party.rng().next_u64() & r.mask())
            .collect();
        let masked: Vec<u64> = shares
            .as_slice()
            .iter()
            .zip(&pad)
            .map(|(&a, &b)| r.add(a, b))
            .collect();
        let open = self.party.reveal(&RingShares::new(masked)).await?;
        Ok(Some(
            open.iter()
                .zip(&pad)
                .map(|(&v, &m)| fixed::decode(r.to_signed(r.sub(v, m)), r.frac))
                .collect(),
        ))
    }

    /// The client's real input `x` as its shares (fixed point at the ring's fraction; the
    /// server's share is 0), after checking every value is finite and within `2^log_bound`.
    pub fn share_input(&self, x: &[f64], log_bound: u32) -> Result<RingShares, ProtocolError> {
        let lim = libm::exp2(log_bound as f64);
        if x.iter().any(|v| !v.is_finite() || v.abs() > lim) {
            return Err(
                Error::InvalidParameters("a client input value is outside the M2C bound").into(),
            );
        }
        let r = self.party.ring();
        Ok(RingShares::new(
            x.iter()
                .map(|&a| r.from_signed(fixed::encode(a, r.frac)))
                .collect(),
        ))
    }
}
