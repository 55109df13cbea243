//! The two-party conversion protocols (async over the MPC channel) and the complexify wrappers.

use super::budget::K_BITS;
use super::plan::{C2mPlan, M2cPlan};
use super::wide::{local_trunc_wide, rerandomize, CommonMasks, Wide};
use super::ConvertError;
use crate::backend::{Basis, PolyBackend};
use crate::ckks::{Ciphertext, Ckks, EvaluationKeys, PublicKey, SecretKey, C64};
use crate::math::sampling;
use crate::mpc::msgs::{C2mCiphertexts, M2cCiphertexts, MsgKind};
use crate::mpc::zq::Modulus as ZqModulus;
use crate::mpc::{Channel, MpcError, Party, RingShares, Stats};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

/// Frame tag of C2M ([`C2mCiphertexts`]): `u32` count, then per ciphertext a `u64` length and
/// the uncompressed serialized `⟨m⟩ + r̂` ([`Ckks::serialize_ciphertext`]).
pub const TAG_C2M_CT: u16 = MsgKind::C2mCiphertexts.tag();
/// Frame tag of M2C ([`M2cCiphertexts`]): same layout, seeded (compressed) `Enc_sk(p_0)`.
pub const TAG_M2C_CT: u16 = MsgKind::M2cCiphertexts.tag();

/// Errors of the conversion protocols ([`c2m_p0`], [`c2m_p1`], [`m2c_p0`], [`m2c_p1`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The MPC layer failed: a malformed or unexpected message (the ciphertext batches
    /// included), a party whose ring differs from the plan's, a poisoned party.
    Mpc(MpcError),
    /// A conversion step refused its input (level, degree, slots or scale against the plan).
    Convert(ConvertError),
    /// The CKKS layer failed (encryption, decryption or serialization: key or parameter
    /// mismatch).
    Ckks(crate::Error),
    /// A ciphertext sent by the peer does not deserialize.
    BadCiphertext {
        /// Message that carried it.
        msg: MsgKind,
        /// Its index in the batch.
        index: usize,
        /// The decoder's error.
        source: crate::Error,
    },
    /// A ciphertext sent by the peer has another level, degree, slot count or scale than the
    /// plan.
    CiphertextShape {
        /// Message that carried it.
        msg: MsgKind,
        /// Its index in the batch.
        index: usize,
    },
    /// An M2C input's share vectors do not have the plan's slot count (or an input given by
    /// distinct values has more of them than twice that count).
    InputLength {
        /// Index of the input.
        index: usize,
        /// The plan's slot count.
        expected: usize,
        /// Length of the real (or, if the real part fits, the imaginary) shares.
        found: usize,
    },
    /// A slot of an M2C input ([`SlotShares`]) names a value past the input's distinct values.
    SlotSource {
        /// Index of the input.
        index: usize,
        /// The slot (the imaginary parts' slots follow the real parts').
        slot: usize,
        /// The value it names.
        source: u32,
        /// Distinct values the input has.
        values: usize,
    },
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Mpc(e) => write!(f, "mpc: {e}"),
            ProtocolError::Convert(e) => write!(f, "convert: {e}"),
            ProtocolError::Ckks(e) => write!(f, "ckks: {e}"),
            ProtocolError::BadCiphertext { msg, index, source } => {
                write!(f, "ciphertext {index} of {msg} does not decode: {source}")
            }
            ProtocolError::CiphertextShape { msg, index } => {
                write!(f, "ciphertext {index} of {msg} differs from the plan")
            }
            ProtocolError::InputLength {
                index,
                expected,
                found,
            } => write!(
                f,
                "M2C input {index}: {found} shares, the plan has {expected} slots"
            ),
            ProtocolError::SlotSource {
                index,
                slot,
                source,
                values,
            } => write!(
                f,
                "M2C input {index}: slot {slot} takes value {source} of {values}"
            ),
        }
    }
}

impl core::error::Error for ProtocolError {}

impl From<MpcError> for ProtocolError {
    fn from(e: MpcError) -> Self {
        ProtocolError::Mpc(e)
    }
}

impl From<ConvertError> for ProtocolError {
    fn from(e: ConvertError) -> Self {
        match e {
            ConvertError::Mpc(e) => ProtocolError::Mpc(e),
            e => ProtocolError::Convert(e),
        }
    }
}

impl From<crate::Error> for ProtocolError {
    fn from(e: crate::Error) -> Self {
        ProtocolError::Ckks(e)
    }
}

/// Shares of one complex vector: `[[x]]` and `[[y]]` over `Z_{2^ℓ}` at scale `2^F`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComplexShares {
    /// Real parts `[[x]]` (`n` elements).
    pub re: RingShares,
    /// Imaginary parts `[[y]]` (`n` elements; empty in M2C input means `y = 0`).
    pub im: RingShares,
}

/// One M2C input given by its distinct values: real slot `s` holds `values[re[s]]`, imaginary
/// slot `s` holds `values[im[s]]`, and a slot whose source is [`SlotShares::ZERO`] a public zero
/// (an empty `im`: every imaginary slot zero). The Ring2Field lift, one correlated OT per value,
/// runs on the distinct values only and its shares are then copied to their slots (the encoding
/// map re-randomizes each slot with a common mask of its own), so a layout that repeats a vector
/// `r` times or pads it with zeros costs `r` times fewer OTs and bytes, or none for the padding.
/// Both parties give the same `re` and `im` (the layout is public).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotShares {
    /// Shares of the distinct values, `[[v]]` over `Z_{2^ℓ}` at scale `2^F`.
    pub values: RingShares,
    /// Per real slot (`n`), the index of its value in `values`, or [`SlotShares::ZERO`].
    pub re: Vec<u32>,
    /// Per imaginary slot (`n`, or empty), likewise.
    pub im: Vec<u32>,
}

impl SlotShares {
    /// The source of a slot that holds a public zero.
    pub const ZERO: u32 = u32::MAX;

    /// One input whose slots take elements of `all` (`re[s]`, `im[s]`: an index into `all`,
    /// or [`SlotShares::ZERO`]): the elements it uses become its distinct values, in the order
    /// the slots first name them. Sources past `all` are refused at the conversion.
    pub fn gather(all: &RingShares, mut re: Vec<u32>, mut im: Vec<u32>) -> SlotShares {
        let a = all.as_slice();
        // The value each element of `all` became (`ZERO`: not yet used).
        let mut at = alloc::vec![SlotShares::ZERO; a.len()];
        // At most one value per element of `all`: no reallocation leaves copies of shares.
        let mut values = Vec::with_capacity(a.len());
        for c in re.iter_mut().chain(im.iter_mut()) {
            let i = *c as usize;
            // A source past `all` (`ZERO` among them) stays as it is: it is past the values
            // too (there are at most `all.len()`), and the conversion's check names it.
            let Some(&v) = a.get(i) else { continue };
            if at[i] == SlotShares::ZERO {
                at[i] = values.len() as u32;
                values.push(v);
            }
            *c = at[i];
        }
        // Imaginary parts that are all public zeros are no imaginary parts.
        if im.iter().all(|&c| c == SlotShares::ZERO) {
            im = Vec::new();
        }
        SlotShares {
            values: RingShares::new(values),
            re,
            im,
        }
    }

    /// [`SlotShares::gather`] for several inputs, `re[k]` with `im[k]`. A missing `im[k]` is
    /// all zero; a missing `re[k]` is empty, which the conversion refuses (nothing is dropped).
    pub fn gather_all(all: &RingShares, re: Vec<Vec<u32>>, im: Vec<Vec<u32>>) -> Vec<SlotShares> {
        let k = re.len().max(im.len());
        let (mut re, mut im) = (re.into_iter(), im.into_iter());
        (0..k)
            .map(|_| {
                let (r, i) = (re.next().unwrap_or_default(), im.next().unwrap_or_default());
                SlotShares::gather(all, r, i)
            })
            .collect()
    }
}

/// The inputs of one M2C: full share vectors, or distinct values and their slots.
#[derive(Clone, Copy)]
pub(crate) enum M2cInputs<'a> {
    Full(&'a [ComplexShares]),
    Slots(&'a [SlotShares]),
}

impl M2cInputs<'_> {
    fn len(&self) -> usize {
        match self {
            M2cInputs::Full(x) => x.len(),
            M2cInputs::Slots(x) => x.len(),
        }
    }
}

impl ComplexShares {
    /// One complex vector per pair of real and imaginary share vectors, in order: how a
    /// layout's staged parts become a conversion's input. A missing imaginary part is zero; a
    /// missing real part is empty, which the conversion refuses (nothing is dropped).
    pub fn zip(re: Vec<Vec<u64>>, im: Vec<Vec<u64>>) -> Vec<ComplexShares> {
        let k = re.len().max(im.len());
        let (mut re, mut im) = (re.into_iter(), im.into_iter());
        (0..k)
            .map(|_| ComplexShares {
                re: RingShares::new(re.next().unwrap_or_default()),
                im: RingShares::new(im.next().unwrap_or_default()),
            })
            .collect()
    }
}

/// What one conversion run cost, as seen by one party.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Ciphertexts converted.
    pub ciphertexts: usize,
    /// Serialized ciphertext bytes sent or received.
    pub ciphertext_bytes: u64,
    /// Communication rounds of the run (causal depth).
    pub rounds: u32,
    /// Channel counters of the run (all MPC traffic, ciphertexts included).
    pub channel: Stats,
}

/// P1's output of [`c2m_mask`]: the serialized masked ciphertexts and, per ciphertext, P1's
/// shares `−r̂` of the `2n` subring coefficients mod `Q_conv`.
pub type MaskedBatch = (Vec<Vec<u8>>, Vec<Vec<u128>>);

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The `2n` slot-subring coefficients (positions `k·N/2n`) of a coefficient-domain host copy
/// over `Q_level`, CRT-composed to `Z_{Q_level}`.
fn subring_coeffs(plan: &C2mPlan, host: &[u64]) -> Result<Vec<u128>, MpcError> {
    let n_ring = plan.n_ring;
    let gap = n_ring / (2 * plan.slots);
    let rows = plan.level + 1;
    let mut res = vec![0u64; rows];
    (0..2 * plan.slots)
        .map(|k| {
            for (r, v) in res.iter_mut().enumerate() {
                *v = host[r * n_ring + k * gap];
            }
            plan.basis.compose(&res)
        })
        .collect()
}

/// P1's local step of Π_C2M^ℂ: trims each ciphertext to the plan's level, re-randomizes it
/// with a fresh `Enc_pk(0)`, adds a fresh uniform `r̂ ∈ R_{Q_conv}`, and returns the serialized
/// masked ciphertexts with P1's coefficient shares `−r̂` (mod `Q_conv`, the `2n` subring
/// coefficients of each).
///
/// The re-randomization is not in EncFormer's Algorithm 3 but is needed for circuit privacy:
/// `r̂` hides `c_0 + c_1·s`, yet `c_1` itself is a function of P1's computation (after a
/// plaintext product `c_1 = c_1^{in}·w`, and P0 knows `c_1^{in}`). Adding `Enc_pk(0) =
/// (b·u + e_0, a·u + e_1)` makes `c_1` pseudorandom under RLWE; the decrypted value stays
/// uniform (noise needs no flooding: `r̂` already hides `m + e` completely). What the shares
/// then carry is `m + e` on the ring's grid: rounded to nearest when [`C2mPlan::round_bits`] is
/// positive, so that `e` matters only near a rounding boundary; with
/// [`C2mPlan::local_rounding`] (both hybrid paths) rounded stochastically and without bias, so
/// that `e` moves each value's rounding probability by `|e|` in grid steps.
pub fn c2m_mask<B: PolyBackend>(
    ckks: &Ckks<B>,
    pk: &PublicKey<B>,
    plan: &C2mPlan,
    cts: &[Ciphertext<B>],
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<MaskedBatch, ConvertError> {
    let params = ckks.params();
    let n = params.n();
    let basis = Basis::q(plan.level + 1);
    let q = plan.basis.modulus();
    let gap = n / (2 * plan.slots);
    let mut bytes = Vec::with_capacity(cts.len());
    let mut shares = Vec::with_capacity(cts.len());
    for ct in cts {
        if ct.level < plan.level {
            return Err(ConvertError::LevelTooLow {
                found: ct.level,
                needed: plan.level,
            });
        }
        if ct.degree() != 1 {
            return Err(crate::Error::DegreeMismatch {
                found: ct.degree(),
                expected: 1,
            }
            .into());
        }
        if ct.slots != plan.slots || !close(ct.scale, plan.scale) {
            return Err(ConvertError::Budget(
                "ciphertext slots or scale differ from the plan's",
            ));
        }
        let mut c = ckks.clone_ct(ct);
        ckks.drop_level_assign(&mut c, plan.level)?;
        let zero = ckks.encode(&[], plan.slots, plan.level, ct.scale)?;
        let fresh = ckks.encrypt_pk(pk, &zero, rng)?;
        ckks.add_assign(&mut c, &fresh)?;
        let mut rows = Zeroizing::new(vec![0u64; basis.rows() * n]);
        for (r, m) in params.q()[..basis.rows()].iter().enumerate() {
            sampling::uniform_mod(rng, m, &mut rows[r * n..(r + 1) * n]);
        }
        let mut res = vec![0u64; basis.rows()];
        let mut share = Vec::with_capacity(2 * plan.slots);
        for k in 0..2 * plan.slots {
            for (r, v) in res.iter_mut().enumerate() {
                *v = rows[r * n + k * gap];
            }
            share.push(q.neg(plan.basis.compose(&res)?));
        }
        let mut mask = ckks.backend().upload(&rows);
        ckks.backend().ntt(&mut mask, basis);
        ckks.backend().add_assign(&mut c.polys[0], &mask, basis);
        ckks.backend().zeroize(&mut mask);
        c.seed = None;
        bytes.push(ckks.serialize_ciphertext(&c, false)?);
        shares.push(share);
    }
    Ok((bytes, shares))
}

/// Stages 1–3 of Π_C2M^ℂ on one party's coefficient shares (identical code for both). Stages
/// 1, 2 and the local part of 3 are local; the exact rounding of all `2n` values of every
/// ciphertext runs as one batched [`Party::trunc_round_exact`].
async fn c2m_local<R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    plan: &C2mPlan,
    coeffs: &[Vec<u128>],
) -> Result<Vec<ComplexShares>, ProtocolError> {
    let p0 = party.is_p0();
    let ring = plan.cfg.ring;
    let n = plan.slots;
    let mk = ZqModulus::new(1u128 << K_BITS)?;
    let k = plan.round_bits();
    let mut flat: Zeroizing<Vec<u64>> = Zeroizing::new(Vec::with_capacity(coeffs.len() * 2 * n));
    // One common seed per batch (both parties draw it from their common PRG), expanded into the
    // masks of every local truncation of stages 2 and 3a.
    let (a, b) = (party.common_zq(&mk)?, party.common_zq(&mk)?);
    let mut masks = CommonMasks::from_seed((a ^ (b << 64)).to_le_bytes());
    for c in coeffs {
        // Stages 1 and 2: shares mod 2^W of the slots at scale 2^{F+s_2}.
        let (re, im) = plan.decode_shares(c, p0, &mut masks)?;
        // Stage 3a: local truncation by 2^{s_2 − k} in Z_{2^W} to scale 2^{F+k}, |v| < 2^{ℓ-2},
        // reduced mod 2^ℓ. A real-only plan drops the imaginary parts here, before any
        // communication.
        let im: &[Wide] = if plan.real_only { &[] } else { &im };
        for &x in re.iter().chain(im) {
            let t = local_trunc_wide(rerandomize(x, masks.wide(), p0), p0, plan.s2 - k, plan.h3);
            flat.push(t.0[0] & ring.mask());
        }
    }
    // Stage 3b: exact round-to-nearest by 2^k (one batch for all ciphertexts); nothing with a
    // local-rounding plan (k = 0: stage 3a already reached scale 2^F).
    let rounded = if k == 0 {
        RingShares::new(flat.to_vec())
    } else {
        party
            .trunc_round_exact(&RingShares::new(flat.to_vec()), k)
            .await?
    };
    let rounded = rounded.as_slice();
    let per = if plan.real_only { n } else { 2 * n };
    Ok(rounded
        .chunks(per)
        .map(|c| ComplexShares {
            re: RingShares::new(c[..n].to_vec()),
            im: RingShares::new(c[n..].to_vec()),
        })
        .collect())
}

fn check_party<R: RngCore + CryptoRng>(
    party: &Party<R>,
    ring: crate::mpc::RingCfg,
) -> Result<(), MpcError> {
    if party.config().ring != ring {
        return Err(MpcError::InvalidConfig(
            "party ring differs from the plan's ring",
        ));
    }
    Ok(())
}

/// The channel's counters and causal depth when a run starts: the run's [`RunStats`] are what
/// changed since.
struct RunMeter {
    before: Stats,
    depth: u32,
}

impl RunMeter {
    fn start(ch: &Channel) -> Self {
        RunMeter {
            before: ch.stats(),
            depth: ch.depth(),
        }
    }

    fn finish(&self, ch: &Channel, ciphertexts: usize, ciphertext_bytes: u64) -> RunStats {
        RunStats {
            ciphertexts,
            ciphertext_bytes,
            rounds: ch.depth() - self.depth,
            channel: ch.stats().since(&self.before),
        }
    }
}

/// Ciphertext `index` of the peer's batch `msg`, deserialized and checked against what the plan
/// expects: degree 1 at `level`, with `slots` slots and scale `scale`.
fn peer_ciphertext<B: PolyBackend>(
    ckks: &Ckks<B>,
    msg: MsgKind,
    index: usize,
    bytes: &[u8],
    (level, slots, scale): (usize, usize, f64),
) -> Result<Ciphertext<B>, ProtocolError> {
    let ct = ckks
        .deserialize_ciphertext(bytes)
        .map_err(|source| ProtocolError::BadCiphertext { msg, index, source })?;
    if ct.level != level || ct.degree() != 1 || ct.slots != slots || !close(ct.scale, scale) {
        return Err(ProtocolError::CiphertextShape { msg, index });
    }
    Ok(ct)
}

/// Π_C2M^ℂ, P1 (ciphertext holder, with P0's public key): re-randomizes, masks and sends all
/// `cts` in one frame (one round), then derives its shares (local stages 1–3a, then the batched
/// exact rounding with P0). Returns `[[x]], [[y]]` per ciphertext.
pub async fn c2m_p1<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    pk: &PublicKey<B>,
    plan: &C2mPlan,
    cts: &[Ciphertext<B>],
) -> Result<(Vec<ComplexShares>, RunStats), ProtocolError> {
    check_party(party, plan.cfg.ring)?;
    let ch = party.channel();
    let meter = RunMeter::start(&ch);
    let (bytes, shares) = c2m_mask(ckks, pk, plan, cts, party.rng())?;
    let ct_bytes = bytes.iter().map(|b| b.len() as u64).sum();
    ch.send_msg(&C2mCiphertexts { items: bytes });
    let out = c2m_local(party, plan, &shares).await?;
    Ok((out, meter.finish(&ch, cts.len(), ct_bytes)))
}

/// Π_C2M^ℂ, P0 (key holder): receives `count` masked ciphertexts, decrypts them (each
/// plaintext is uniform in `R_{Q_conv}`) and derives its shares (local stages 1–3a, then the
/// batched exact rounding with P1).
pub async fn c2m_p0<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    sk: &SecretKey,
    plan: &C2mPlan,
    count: usize,
) -> Result<(Vec<ComplexShares>, RunStats), ProtocolError> {
    check_party(party, plan.cfg.ring)?;
    let ch = party.channel();
    let meter = RunMeter::start(&ch);
    let items = ch.recv_msg::<C2mCiphertexts>(&count).await?.items;
    let n = ckks.params().n();
    let basis = Basis::q(plan.level + 1);
    let mut shares = Vec::with_capacity(count);
    let mut ct_bytes = 0u64;
    for (index, it) in items.iter().enumerate() {
        ct_bytes += it.len() as u64;
        let want = (plan.level, plan.slots, plan.scale);
        let ct = peer_ciphertext(ckks, MsgKind::C2mCiphertexts, index, it, want)?;
        let pt = ckks.decrypt(sk, &ct)?;
        let mut poly = pt.poly;
        ckks.backend().intt(&mut poly, basis);
        let mut host = Zeroizing::new(vec![0u64; basis.rows() * n]);
        ckks.backend().download(&poly, &mut host)?;
        ckks.backend().zeroize(&mut poly);
        shares.push(subring_coeffs(plan, &host)?);
    }
    let out = c2m_local(party, plan, &shares).await?;
    Ok((out, meter.finish(&ch, count, ct_bytes)))
}

/// Ring2Field and the fast encoding map of Π_M2C^ℂ ([`M2cPlan::encode_shares`]): integer shares
/// of the `2n` subring coefficients of each plaintext.
async fn m2c_local<R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    plan: &M2cPlan,
    inputs: M2cInputs<'_>,
) -> Result<Vec<Zeroizing<Vec<i128>>>, ProtocolError> {
    check_party(party, plan.cfg.ring)?;
    let n = plan.slots;
    let lengths = |index: usize, re: usize, im: usize| {
        if re != n || !(im == 0 || im == n) {
            return Err(ProtocolError::InputLength {
                index,
                expected: n,
                found: if re != n { re } else { im },
            });
        }
        Ok(())
    };
    let total = match inputs {
        M2cInputs::Full(xs) => xs.iter().map(|x| x.re.len() + x.im.len()).sum(),
        M2cInputs::Slots(xs) => xs.iter().map(|x| x.values.len()).sum(),
    };
    // Sized once: no reallocation leaves copies of shares behind.
    let mut flat = Vec::with_capacity(total);
    match inputs {
        M2cInputs::Full(xs) => {
            for (index, x) in xs.iter().enumerate() {
                lengths(index, x.re.len(), x.im.len())?;
                flat.extend_from_slice(x.re.as_slice());
                flat.extend_from_slice(x.im.as_slice());
            }
        }
        M2cInputs::Slots(xs) => {
            for (index, x) in xs.iter().enumerate() {
                lengths(index, x.re.len(), x.im.len())?;
                let values = x.values.len();
                // More values than slots would lift shares that no slot takes.
                if values > 2 * n {
                    return Err(ProtocolError::InputLength {
                        index,
                        expected: 2 * n,
                        found: values,
                    });
                }
                let bad =
                    x.re.iter()
                        .chain(&x.im)
                        .enumerate()
                        .find(|&(_, &c)| c != SlotShares::ZERO && c as usize >= values);
                if let Some((slot, &source)) = bad {
                    return Err(ProtocolError::SlotSource {
                        index,
                        slot,
                        source,
                        values,
                    });
                }
                flat.extend_from_slice(x.values.as_slice());
            }
        }
    }
    let mk = ZqModulus::new(1u128 << K_BITS)?;
    // |x| ≤ B_max·2^F < 2^{b+F+1}: the known-MSB Ring2Field (one Z_{2^K} COT per value) applies
    // when b + F + 1 ≤ ℓ − 2; the plan admits b + F + 2 ≤ ℓ, so the edge falls back to the
    // comparison-based one.
    let bound = plan.cfg.log_bmax + plan.cfg.ring.frac + 1;
    let flat = RingShares::new(flat);
    let lifted = if bound + 2 <= plan.cfg.ring.ell {
        party.ring_to_field_known_msb(&flat, &mk, bound).await?
    } else {
        party.ring_to_field(&flat, &mk).await?
    };
    let lifted = lifted.as_slice();
    let p0 = party.is_p0();
    // One common seed per batch (both parties draw it from their common PRG), expanded into the
    // masks of every local truncation of the encoding map.
    let (a, b) = (party.common_zq(&mk)?, party.common_zq(&mk)?);
    let mut masks = CommonMasks::from_seed((a ^ (b << 64)).to_le_bytes());
    let mut at = 0;
    let mut out = Vec::with_capacity(inputs.len());
    match inputs {
        M2cInputs::Full(xs) => {
            for x in xs {
                let re = &lifted[at..at + n];
                at += n;
                let im = &lifted[at..at + x.im.len()];
                at += x.im.len();
                out.push(plan.encode_shares(re, im, p0, &mut masks)?);
            }
        }
        M2cInputs::Slots(xs) => {
            for x in xs {
                let v = &lifted[at..at + x.values.len()];
                at += x.values.len();
                // Checked above: every source is a value or a public zero.
                let spread = |src: &[u32]| -> Zeroizing<Vec<u128>> {
                    Zeroizing::new(
                        src.iter()
                            .map(|&c| v.get(c as usize).copied().unwrap_or(0))
                            .collect(),
                    )
                };
                let (re, im) = (spread(&x.re), spread(&x.im));
                out.push(plan.encode_shares(&re, &im, p0, &mut masks)?);
            }
        }
    }
    Ok(out)
}

/// The plaintext polynomial (NTT domain over `Q_level`) with integer coefficients `c_k` at the
/// subring positions `k·N/2n`.
fn subring_poly<B: PolyBackend>(ckks: &Ckks<B>, plan: &M2cPlan, c: &[i128]) -> B::Buffer {
    let n = plan.n_ring;
    let gap = n / (2 * plan.slots);
    let basis = Basis::q(plan.level + 1);
    let mut rows = Zeroizing::new(vec![0u64; basis.rows() * n]);
    for (r, m) in ckks.params().q()[..basis.rows()].iter().enumerate() {
        for (k, &v) in c.iter().enumerate() {
            rows[r * n + k * gap] = m.from_i128(v);
        }
    }
    let mut buf = ckks.backend().upload(&rows);
    ckks.backend().ntt(&mut buf, basis);
    buf
}

/// Π_M2C^ℂ, P0 (key holder): converts its shares, encrypts its plaintext shares under the
/// secret key (seeded) and sends them in one frame.
pub async fn m2c_p0<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    sk: &SecretKey,
    plan: &M2cPlan,
    inputs: &[ComplexShares],
) -> Result<RunStats, ProtocolError> {
    m2c_p0_in(party, ckks, sk, plan, M2cInputs::Full(inputs)).await
}

/// [`m2c_p0`] on inputs given by their distinct values ([`SlotShares`]).
/// Both parties give the same `re`, `im` and number of values per input (the layout is public:
/// derive them from the plan, never from shares); a mismatch gives a wrong ciphertext or a
/// one-sided failure, not a check.
pub async fn m2c_p0_slots<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    sk: &SecretKey,
    plan: &M2cPlan,
    inputs: &[SlotShares],
) -> Result<RunStats, ProtocolError> {
    m2c_p0_in(party, ckks, sk, plan, M2cInputs::Slots(inputs)).await
}

pub(crate) async fn m2c_p0_in<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    sk: &SecretKey,
    plan: &M2cPlan,
    inputs: M2cInputs<'_>,
) -> Result<RunStats, ProtocolError> {
    let ch = party.channel();
    let meter = RunMeter::start(&ch);
    let coeffs = m2c_local(party, plan, inputs).await?;
    let mut bytes = Vec::with_capacity(coeffs.len());
    for c in &coeffs {
        let mut poly = subring_poly(ckks, plan, c);
        let pt = ckks
            .rlwe
            .plaintext(poly, plan.level, plan.scale, plan.slots);
        let ct = ckks.encrypt_sk(sk, &pt, party.rng());
        poly = pt.poly;
        ckks.backend().zeroize(&mut poly);
        bytes.push(ckks.serialize_ciphertext(&ct?, true)?);
    }
    let ct_bytes = bytes.iter().map(|b| b.len() as u64).sum();
    ch.send_msg(&M2cCiphertexts { items: bytes });
    Ok(meter.finish(&ch, inputs.len(), ct_bytes))
}

/// Π_M2C^ℂ, P1 (evaluator): converts its shares, receives `Enc(p_0)` and adds its own
/// plaintext shares. Returns `⟨x + i·y⟩` per input at the plan's level and scale.
pub async fn m2c_p1<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    plan: &M2cPlan,
    inputs: &[ComplexShares],
) -> Result<(Vec<Ciphertext<B>>, RunStats), ProtocolError> {
    m2c_p1_in(party, ckks, plan, M2cInputs::Full(inputs)).await
}

/// [`m2c_p1`] on inputs given by their distinct values ([`SlotShares`]).
/// Both parties give the same `re`, `im` and number of values per input (the layout is public:
/// derive them from the plan, never from shares); a mismatch gives a wrong ciphertext or a
/// one-sided failure, not a check.
pub async fn m2c_p1_slots<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    plan: &M2cPlan,
    inputs: &[SlotShares],
) -> Result<(Vec<Ciphertext<B>>, RunStats), ProtocolError> {
    m2c_p1_in(party, ckks, plan, M2cInputs::Slots(inputs)).await
}

pub(crate) async fn m2c_p1_in<B: PolyBackend, R: RngCore + CryptoRng>(
    party: &mut Party<R>,
    ckks: &Ckks<B>,
    plan: &M2cPlan,
    inputs: M2cInputs<'_>,
) -> Result<(Vec<Ciphertext<B>>, RunStats), ProtocolError> {
    let ch = party.channel();
    let meter = RunMeter::start(&ch);
    let coeffs = m2c_local(party, plan, inputs).await?;
    let items = ch.recv_msg::<M2cCiphertexts>(&inputs.len()).await?.items;
    let basis = Basis::q(plan.level + 1);
    let mut out = Vec::with_capacity(inputs.len());
    let mut ct_bytes = 0u64;
    for (index, (it, c)) in items.iter().zip(&coeffs).enumerate() {
        ct_bytes += it.len() as u64;
        let want = (plan.level, plan.slots, plan.scale);
        let mut ct = peer_ciphertext(ckks, MsgKind::M2cCiphertexts, index, it, want)?;
        let mut mine = subring_poly(ckks, plan, c);
        ckks.backend().add_assign(&mut ct.polys[0], &mine, basis);
        ckks.backend().zeroize(&mut mine);
        out.push(ct);
    }
    Ok((out, meter.finish(&ch, inputs.len(), ct_bytes)))
}

/// Complexify (EncFormer §V-B4): `⟨x⟩, ⟨y⟩ ↦ ⟨x + i·y⟩ = ⟨x⟩ + X^{N/2}·⟨y⟩`. Multiplying by the
/// monomial `X^{N/2}` (which is `i` at every slot root) is exact: no noise, scale or level change.
pub fn complexify<B: PolyBackend>(
    ckks: &Ckks<B>,
    x: &Ciphertext<B>,
    y: &Ciphertext<B>,
) -> crate::Result<Ciphertext<B>> {
    let mut z = ckks.clone_ct(y);
    ckks.mul_const_assign(&mut z, C64::new(0.0, 1.0), 1.0)?;
    ckks.add_assign(&mut z, x)?;
    Ok(z)
}

/// Decomplexify: `⟨z⟩ ↦ (⟨(z + z̄)/2⟩, ⟨(z − z̄)/(2i)⟩)` with one conjugation (a key switch, needs
/// the conjugation key). The halving is exact: the scale is doubled instead.
pub fn decomplexify<B: PolyBackend>(
    ckks: &Ckks<B>,
    z: &Ciphertext<B>,
    keys: &EvaluationKeys<B>,
) -> crate::Result<(Ciphertext<B>, Ciphertext<B>)> {
    let c = ckks.conjugate(z, keys)?;
    let mut x = ckks.add(z, &c)?;
    x.set_scale(x.scale() * 2.0);
    let mut y = ckks.sub(z, &c)?;
    ckks.mul_const_assign(&mut y, C64::new(0.0, -1.0), 1.0)?;
    y.set_scale(y.scale() * 2.0);
    Ok((x, y))
}
