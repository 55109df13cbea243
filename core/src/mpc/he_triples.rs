//! Beaver triples from RLWE oblivious linear evaluation: a dealer-free [`TripleSource`] that
//! sends about half the bytes of Gilboa's OT multiplication.
//!
//! # Protocol (semi-honest; P0 holds the key, P1 evaluates)
//!
//! Each party draws its triple shares `a_i, b_i` uniformly in `Z_{2^ℓ}`. The cross terms
//! `a_0·b_1 + b_0·a_1` are computed under a BGV-style RLWE encryption with plaintext modulus
//! `T = t_1···t_k`, a product of primes `≡ 1 (mod 2N)`, so that the `N` slots multiply
//! element-wise (CRT over the `t_i`, an NTT modulo each):
//!
//! 1. **Once per session** ([`TripleSource::setup`]): P0 draws a ternary secret `s` and sends the
//!    public key `pk = (−a·s + e, a)` (`a` as a 32-byte seed, [`HeKey`]).
//! 2. **Per call**: P0 sends `Enc_s(a_0)`, `Enc_s(b_0)` per batch of `N` triples, symmetric and
//!    seeded, so only `c_0` travels ([`HeUpload`]).
//! 3. P1 computes `Enc(a_0)·b_1 + Enc(b_0)·a_1 + r` with `r` uniform in `[0, 2^{2ℓ+1+σ})`, adds
//!    `T·(u·pk + (e_1 + F, e_2))` (a fresh public-key encryption of zero, which makes `c_1`
//!    pseudorandom, and a flooding term `F` uniform over `2^{f}` values that hides the noise of
//!    the products statistically), switches the modulus down to the reply primes and sends it
//!    ([`HeReply`]).
//! 4. P0 decrypts `u = a_0·b_1 + b_0·a_1 + r` in every slot. As `u < 2^{2ℓ+2+σ} ≤ T`, the CRT
//!    gives `u` as an integer, so `c_0 = a_0·b_0 + u` and `c_1 = a_1·b_1 − r (mod 2^ℓ)` are
//!    shares of `c = (a_0 + a_1)(b_0 + b_1)`. Each `u` hides its `a_0·b_1 + b_0·a_1 < 2^{2ℓ+1}`
//!    within statistical distance `2^{-σ}` (per element, the convention of statistical masking
//!    in 2PC; `n` triples are within `n·2^{-σ}`).
//!
//! Statistical bounds: the flood is sized so that all the replies one key answers (at most
//! [`MAX_BATCHES_PER_KEY`] batches, `2^{34}` triples) are together within `2^{-σ-1}` of a
//! simulation; a source refuses further batches. Semi-honest only: nothing checks that P0's key
//! and uploads carry small noise, and a malicious P0 could defeat the flood.
//!
//! The construction is Cheetah's and SPDZ-family HE triple generation (Huang et al., USENIX
//! Security 2022, §3; Keller et al., Overdrive, Eurocrypt 2018), written for this engine: one
//! `N = 2^14` ciphertext carries `N` triples, the plaintext is the CRT of `k` NTT-friendly primes
//! so that the integer product never wraps, and the reply is switched to a smaller modulus.
//!
//! # Parameters ([`HeTripleParams`])
//!
//! Everything is derived from `ℓ`, `N` and the statistical parameter `σ = 40`, with worst-case
//! bounds on every noise term (the flood must hide the products' noise for every input, and
//! decryption must never fail). The ciphertext modulus is checked against the HE Standard's
//! 128-bit bound for a ternary secret (`log2 Q ≤ 438` at `N = 2^14`, 881 at `2^15`, which rings
//! above `ℓ ≈ 60` need). For `ℓ = 43`: `k = 3` plaintext primes of 43 bits, a flood of 223
//! bits, `log2 Q = 359` (three 49-bit reply primes and four 53-bit ones dropped).
//!
//! # Cost (`ℓ = 43`, `N = 2^14`)
//!
//! P0 → P1 `2·log2 Q` bits per triple (≈ 90 B), P1 → P0 `2·log2 q_reply` bits (≈ 37 B): 126.5
//! B per triple, against ≈ 241 for Gilboa's (`ℓ(ℓ+1)` correction bits and `2ℓ` silent COTs);
//! one round per call; the key, ≈ 735 KB, once per session.

use crate::math::modular::Modulus;
use crate::math::ntt::NttTable;
use crate::math::primes::ntt_primes;
use crate::math::sampling::{expand_uniform_row, ternary, GaussianCdt};
use crate::math::SecretRng;
use crate::mpc::channel::Channel;
use crate::mpc::error::{expect_len, MpcError, Result};
use crate::mpc::msgs::{HeKey, HeReply, HeUpload, RnsShape};
use crate::mpc::ot::BoxFuture;
use crate::mpc::party::PartyId;
use crate::mpc::ring::RingCfg;
use crate::mpc::shares::RingShares;
use crate::mpc::triples::{TripleSource, Triples};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore, SeedableRng};
use zeroize::{Zeroize, Zeroizing};

/// Statistical security parameter `σ` of the masking and the noise flooding.
pub const STAT_BITS: u32 = 40;
/// Deviation of the RLWE errors.
pub const SIGMA: f64 = 3.2;
/// The largest `log2 Q` at 128-bit classical security for a ternary secret and `σ = 3.2`
/// (HE Standard, Albrecht et al. 2018, Table 1), by `log2 N`.
const MAX_LOG_Q: [(u32, u32); 4] = [(12, 109), (13, 218), (14, 438), (15, 881)];
/// `log2` of the most reply ciphertexts one key may answer ([`MAX_BATCHES_PER_KEY`]): the
/// flood's statistical bound holds for all of them together.
pub const LOG_MAX_BATCHES: u32 = 20;
/// The most batches of `N` triples one key serves; a source refuses more (build a new one).
pub const MAX_BATCHES_PER_KEY: u64 = 1 << LOG_MAX_BATCHES;
/// The ring degree [`HeTripleParams::new`] tries first.
pub const DEFAULT_LOG_N: u32 = 14;
/// Largest prime size drawn (bits).
const MAX_PRIME_BITS: u32 = 60;
/// The error of a ring too small for the modulus the bounds need.
const TOO_LARGE: &str = "RLWE triples: the modulus exceeds the 128-bit bound for this N";
/// Most primes in one CRT basis (the parameter sets use at most 4).
const MAX_PRIMES: usize = 8;
/// Stream of the public key's uniform part in its seed's expansion.
const PK_STREAM: u64 = u64::MAX;

/// Public parameters of the RLWE triple source for one ring `Z_{2^ℓ}`; both parties derive
/// the same ones from `(ℓ, log2 N)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeTripleParams {
    log_n: u32,
    ell: u32,
    /// Plaintext primes `t_i` (`T = Π t_i ≥ 2^{2ℓ+2+σ}`).
    t: Vec<u64>,
    /// Reply primes, kept by the modulus switch.
    keep: Vec<u64>,
    /// Primes dropped by the modulus switch.
    drop: Vec<u64>,
    /// The flood `F` is uniform in `[−2^{f−1}, 2^{f−1})`.
    flood_bits: u32,
}

fn log2_prod(ps: &[u64]) -> f64 {
    ps.iter().map(|&p| libm::log2(p as f64)).sum()
}

/// The fewest primes `≡ 1 (mod 2N)` of one size, none in `exclude`, whose product is at least
/// `2^need`: the largest primes below `2^b` for the smallest `b` that reaches it.
fn primes_for(need: f64, n: usize, exclude: &[u64]) -> Result<Vec<u64>> {
    let need = need.max(1.0);
    let k = (libm::ceil(need) as u32)
        .div_ceil(MAX_PRIME_BITS - 1)
        .max(1);
    let first = (libm::ceil(need) as u32).div_ceil(k).max(12);
    for bits in first..=MAX_PRIME_BITS {
        if let Some(ps) = ntt_primes(bits, n, k as usize, exclude) {
            if log2_prod(&ps) >= need {
                return Ok(ps);
            }
        }
    }
    Err(MpcError::InvalidConfig(
        "no NTT primes for the RLWE triple parameters",
    ))
}

impl HeTripleParams {
    /// The parameters for `Z_{2^ℓ}` (128-bit) at `N = 2^14`, or at `N = 2^15` where the modulus
    /// that `ℓ` needs exceeds the bound at `2^14` (`ℓ` above about 60).
    pub fn new(ell: u32) -> Result<Self> {
        Self::with_log_n(ell, DEFAULT_LOG_N).or_else(|e| match e {
            MpcError::InvalidConfig(m) if m == TOO_LARGE => {
                Self::with_log_n(ell, DEFAULT_LOG_N + 1)
            }
            e => Err(e),
        })
    }

    /// The parameters for `Z_{2^ℓ}` at `N = 2^log_n`, `log_n ∈ 12..=15`. A typed error when
    /// `ℓ ∉ 2..=64` or when the modulus the bounds need exceeds the 128-bit bound for that `N`.
    pub fn with_log_n(ell: u32, log_n: u32) -> Result<Self> {
        if !(2..=64).contains(&ell) {
            return Err(MpcError::InvalidConfig("RLWE triples need 2 ≤ ℓ ≤ 64"));
        }
        let max_log_q = MAX_LOG_Q
            .iter()
            .find(|&&(l, _)| l == log_n)
            .map(|&(_, q)| q)
            .ok_or(MpcError::InvalidConfig(
                "RLWE triples need 12 ≤ log2 N ≤ 15",
            ))?;
        let n = 1usize << log_n;
        let t = primes_for((2 * ell + 2 + STAT_BITS) as f64, n, &[])?;
        let log_t = log2_prod(&t);
        let b_e = GaussianCdt::new(SIGMA).bound() as f64;
        let nf = n as f64;
        // Noise of Enc(a_0)·b_1 + Enc(b_0)·a_1 (message part included), worst case: two sums of
        // N terms, each |V[k]·p[j−k]| ≤ (1 + b_e)·T · T/2. The flood must hide it for every
        // input, so no probabilistic bound is used here.
        let log_prod = libm::log2(nf * (1.0 + b_e)) + 2.0 * log_t;
        // The rest, worst case: u·e_pk + e_2·s + e_1 (times T) and the mask r's encoding.
        let log_rest = log_t + libm::log2(2.0 * nf * b_e + b_e + 2.0);
        let log_e = log_add(log_prod, log_rest);
        // Smudging: a flood uniform over 2^f values hides a shift of at most B with statistical
        // distance B/2^f per coefficient; the union over the N coefficients of every reply of
        // the key keeps the whole session within 2^{-σ-1}.
        let flood_bits = libm::ceil(log_e - log_t) as u32 + STAT_BITS + 1 + log_n + LOG_MAX_BATCHES;
        let log_v = log_add(log_e, log_t + (flood_bits - 1) as f64);
        // Modulus switch rounding: (δ_0 + δ_1·s)/Q_d with |δ|/Q_d ≤ (T + 1)/2, ‖s‖_1 ≤ N.
        let log_ms = log_t + libm::log2(nf + 1.0);
        let keep = primes_for(log_ms + 3.0, n, &t)?;
        let mut used = t.clone();
        used.extend_from_slice(&keep);
        let drop = primes_for(log_v - log_ms + 1.0, n, &used)?;
        let p = HeTripleParams {
            log_n,
            ell,
            t,
            keep,
            drop,
            flood_bits,
        };
        if p.log_q() > max_log_q as f64 {
            return Err(MpcError::InvalidConfig(TOO_LARGE));
        }
        Ok(p)
    }

    /// `log2 N`.
    pub fn log_n(&self) -> u32 {
        self.log_n
    }

    /// Triples per ciphertext (`N`).
    pub fn slots(&self) -> usize {
        1 << self.log_n
    }

    /// The ring width `ℓ`.
    pub fn ell(&self) -> u32 {
        self.ell
    }

    /// The plaintext primes `t_i`.
    pub fn plaintext_primes(&self) -> &[u64] {
        &self.t
    }

    /// Every ciphertext prime: the reply primes, then the dropped ones.
    pub fn cipher_primes(&self) -> Vec<u64> {
        let mut q = self.keep.clone();
        q.extend_from_slice(&self.drop);
        q
    }

    /// The reply primes.
    pub fn reply_primes(&self) -> &[u64] {
        &self.keep
    }

    /// `log2 Q` of the fresh ciphertexts.
    pub fn log_q(&self) -> f64 {
        log2_prod(&self.keep) + log2_prod(&self.drop)
    }

    /// Bits of the noise flood `F`.
    pub fn flood_bits(&self) -> u32 {
        self.flood_bits
    }

    /// Payload bytes per triple, both directions, without the once-per-session key.
    pub fn bytes_per_triple(&self) -> f64 {
        let w = |ps: &[u64]| {
            ps.iter()
                .map(|&q| (64 - (q - 1).leading_zeros()) as f64)
                .sum::<f64>()
        };
        2.0 * (w(&self.keep) + w(&self.drop)) / 8.0 + 2.0 * w(&self.keep) / 8.0
    }
}

fn log_add(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    m + libm::log2(libm::exp2(a - m) + libm::exp2(b - m))
}

/// Centered CRT lift of residues modulo `src` to residues modulo `dst`: the representative in
/// about `(−M/2, M/2]` (`M = Π src`), with the quotient rounded in `f64`. Off the boundary
/// `±M/2` the lift is exact; at it either neighbour is congruent to the input.
#[derive(Clone, Debug)]
struct Crt {
    src: Vec<Modulus>,
    dst: Vec<Modulus>,
    /// `(M/m_i)^{-1} mod m_i`.
    hat_inv: Vec<u64>,
    /// `(M/m_i) mod d_j`, at `i·|dst| + j`.
    hat: Vec<u64>,
    /// `α·M mod d_j` at `α·|dst| + j`, for `α ∈ 0..=|src|`.
    alpha_m: Vec<u64>,
    /// `1/m_i`.
    inv_f: Vec<f64>,
}

impl Crt {
    fn new(src: &[Modulus], dst: &[Modulus]) -> Result<Self> {
        if src.len() > MAX_PRIMES {
            return Err(MpcError::InvalidConfig("RLWE triples: too many primes"));
        }
        let mut hat_inv = Vec::with_capacity(src.len());
        let mut hat = Vec::with_capacity(src.len() * dst.len());
        for (i, mi) in src.iter().enumerate() {
            let h = src
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != i)
                .fold(1u64, |acc, (_, mk)| mi.mul(acc, mi.reduce(mk.value())));
            hat_inv.push(mi.inv(h).ok_or(MpcError::InvalidConfig(
                "RLWE triple primes are not coprime",
            ))?);
            for d in dst {
                hat.push(
                    src.iter()
                        .enumerate()
                        .filter(|&(k, _)| k != i)
                        .fold(1u64, |acc, (_, mk)| d.mul(acc, d.reduce(mk.value()))),
                );
            }
        }
        let m_mod: Vec<u64> = dst.iter().map(|d| prod_mod(src, d)).collect();
        let alpha_m = (0..=src.len() as u64)
            .flat_map(|a| {
                dst.iter()
                    .zip(&m_mod)
                    .map(move |(d, &m)| d.mul(d.reduce(a), m))
            })
            .collect();
        Ok(Crt {
            src: src.to_vec(),
            dst: dst.to_vec(),
            hat_inv,
            hat,
            alpha_m,
            inv_f: src.iter().map(|m| 1.0 / m.value() as f64).collect(),
        })
    }

    /// Lifts coefficient `c` of `rows` (one row per source prime) into `out` (one row per
    /// destination prime).
    fn lift(&self, rows: &[Vec<u64>], out: &mut [Vec<u64>], c: usize) {
        let (ns, nd) = (self.src.len(), self.dst.len());
        let mut y = [0u64; MAX_PRIMES];
        let mut frac = 0.0f64;
        for i in 0..ns {
            let m = &self.src[i];
            y[i] = m.mul(rows[i][c], self.hat_inv[i]);
            frac += y[i] as f64 * self.inv_f[i];
        }
        // 0 ≤ α ≤ |src|: each y_i/m_i < 1.
        let alpha = (libm::round(frac) as usize).min(ns);
        let am = &self.alpha_m[alpha * nd..(alpha + 1) * nd];
        for j in 0..nd {
            let d = &self.dst[j];
            let mut acc = 0u128;
            for i in 0..ns {
                acc += y[i] as u128 * self.hat[i * nd + j] as u128;
            }
            out[j][c] = d.sub(d.reduce_u128(acc), am[j]);
        }
    }

    fn lift_rows(&self, rows: &[Vec<u64>], out: &mut [Vec<u64>]) {
        let n = rows.first().map_or(0, Vec::len);
        for c in 0..n {
            self.lift(rows, out, c);
        }
    }
}

/// Precomputed tables of one parameter set.
#[derive(Debug)]
struct Ctx {
    p: HeTripleParams,
    n: usize,
    t: Vec<Modulus>,
    t_ntt: Vec<NttTable>,
    /// Ciphertext primes: reply primes first, then the dropped ones.
    q: Vec<Modulus>,
    q_ntt: Vec<NttTable>,
    /// Number of reply primes.
    k: usize,
    /// Lift from the plaintext primes to every ciphertext prime.
    t_to_q: Crt,
    /// Lift from the dropped primes to the plaintext primes, then the reply primes.
    drop_to_tk: Crt,
    /// Lift from the plaintext primes to the reply primes.
    t_to_keep: Crt,
    /// Lift from the reply primes to the plaintext primes (decryption).
    keep_to_t: Crt,
    /// `T mod q_j`.
    t_mod_q: Vec<u64>,
    /// `Q_d^{-1} mod t_i`.
    qd_inv_t: Vec<u64>,
    /// `Q_d mod t_i`.
    qd_mod_t: Vec<u64>,
    /// `Q_d mod q_j` and `Q_d^{-1} mod q_j` for the reply primes.
    qd_mod_keep: Vec<u64>,
    qd_inv_keep: Vec<u64>,
    /// `2^{f−1} mod q_j` (the flood's offset).
    flood_off: Vec<u64>,
    garner: Garner,
    gauss: GaussianCdt,
}

fn moduli(ps: &[u64]) -> Result<Vec<Modulus>> {
    ps.iter()
        .map(|&p| Modulus::new(p).ok_or(MpcError::InvalidConfig("RLWE triple prime out of range")))
        .collect()
}

fn tables(ms: &[Modulus], log_n: u32) -> Result<Vec<NttTable>> {
    ms.iter()
        .map(|&m| {
            NttTable::new(m, log_n).ok_or(MpcError::InvalidConfig(
                "RLWE triple prime not NTT-friendly",
            ))
        })
        .collect()
}

/// `Π ps mod m`.
fn prod_mod(ps: &[Modulus], m: &Modulus) -> u64 {
    ps.iter()
        .fold(1u64, |acc, p| m.mul(acc, m.reduce(p.value())))
}

/// `(Π ps)^{-1} mod m` for each `m` of `ms`.
fn inv_prod_mod(ps: &[Modulus], ms: &[Modulus]) -> Result<Vec<u64>> {
    ms.iter()
        .map(|m| m.inv(prod_mod(ps, m)))
        .collect::<Option<Vec<u64>>>()
        .ok_or(MpcError::InvalidConfig(
            "RLWE triple primes are not coprime",
        ))
}

/// `x mod m` for `x` given as little-endian 64-bit limbs.
fn limbs_mod(x: &[u64], m: &Modulus) -> u64 {
    x.iter()
        .rev()
        .fold(0u64, |r, &w| m.reduce_u128(((r as u128) << 64) | w as u128))
}

impl Ctx {
    fn new(p: HeTripleParams) -> Result<Self> {
        let t = moduli(&p.t)?;
        let q = moduli(&p.cipher_primes())?;
        let k = p.keep.len();
        let (keep, dropped) = q.split_at(k);
        let mut tk = t.clone();
        tk.extend_from_slice(keep);
        let qd_inv_t = inv_prod_mod(dropped, &t)?;
        let qd_inv_keep = inv_prod_mod(dropped, keep)?;
        let flood_off = q
            .iter()
            .map(|m| m.pow(2, (p.flood_bits - 1) as u64))
            .collect();
        Ok(Ctx {
            n: p.slots(),
            t_ntt: tables(&t, p.log_n)?,
            q_ntt: tables(&q, p.log_n)?,
            t_to_q: Crt::new(&t, &q)?,
            drop_to_tk: Crt::new(dropped, &tk)?,
            t_to_keep: Crt::new(&t, keep)?,
            keep_to_t: Crt::new(keep, &t)?,
            t_mod_q: q.iter().map(|m| prod_mod(&t, m)).collect(),
            qd_mod_t: t.iter().map(|m| prod_mod(dropped, m)).collect(),
            qd_mod_keep: keep.iter().map(|m| prod_mod(dropped, m)).collect(),
            qd_inv_t,
            qd_inv_keep,
            flood_off,
            garner: Garner::new(&t)?,
            gauss: GaussianCdt::new(SIGMA),
            k,
            t,
            q,
            p,
        })
    }

    fn zero_rows(&self, count: usize) -> Vec<Vec<u64>> {
        vec![vec![0u64; self.n]; count]
    }

    /// The NTT-form encoding over every ciphertext prime of `vals` (`< 2^ℓ`, at most `N`,
    /// padded with zeros) in the slots: inverse NTT modulo each `t_i`, centered lift.
    fn encode(&self, vals: &[u64]) -> Vec<Vec<u64>> {
        let mut pt = self.encode_coeffs(vals);
        for (row, tab) in pt.iter_mut().zip(&self.q_ntt) {
            tab.forward(row);
        }
        pt
    }

    /// As [`Ctx::encode`], in coefficient form.
    fn encode_coeffs(&self, vals: &[u64]) -> Vec<Vec<u64>> {
        let mut slots = self.zero_rows(self.t.len());
        for ((row, m), tab) in slots.iter_mut().zip(&self.t).zip(&self.t_ntt) {
            for (s, &v) in row.iter_mut().zip(vals) {
                *s = m.reduce(v);
            }
            tab.inverse(row);
        }
        let mut out = self.zero_rows(self.q.len());
        self.t_to_q.lift_rows(&slots, &mut out);
        slots.zeroize();
        out
    }

    /// A small signed polynomial in NTT form over every ciphertext prime.
    fn small_ntt(&self, v: &[i64]) -> Vec<Vec<u64>> {
        self.q
            .iter()
            .zip(&self.q_ntt)
            .map(|(m, tab)| {
                let mut row: Vec<u64> = v.iter().map(|&x| m.from_i64(x)).collect();
                tab.forward(&mut row);
                row
            })
            .collect()
    }

    /// The public uniform polynomial of `(seed, stream)`, NTT form.
    fn uniform(&self, seed: &[u8; 32], stream: u64) -> Vec<Vec<u64>> {
        self.q
            .iter()
            .enumerate()
            .map(|(j, m)| {
                let mut row = vec![0u64; self.n];
                expand_uniform_row(seed, stream, j, m, &mut row);
                row
            })
            .collect()
    }

    fn gaussian<R: RngCore + CryptoRng>(&self, rng: &mut R) -> Zeroizing<Vec<i64>> {
        Zeroizing::new(self.gauss.sample_vec(rng, self.n))
    }
}

/// The key owner's secret: `s` in NTT form over every ciphertext prime (zeroized on drop).
struct Secret(Vec<Vec<u64>>);

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// The evaluator's copy of the public key (NTT form).
struct PublicKey {
    p0: Vec<Vec<u64>>,
    p1: Vec<Vec<u64>>,
}

enum Role {
    /// P0: holds `s` once set up.
    Owner(Option<Secret>),
    /// P1: holds `pk` once set up.
    Evaluator(Option<PublicKey>),
}

/// A dealer-free [`TripleSource`] over RLWE oblivious linear evaluation (module docs). Build
/// one per party with the same [`HeTripleParams`]; P0 holds the secret key, which never leaves
/// it and is zeroized on drop. Inject it with
/// [`Party::with_triple_source`](crate::mpc::Party::with_triple_source);
/// [`Party::setup`](crate::mpc::Party::setup) then exchanges the key (1 message, P0 → P1).
pub struct HeTriples {
    ctx: Ctx,
    role: Role,
    /// Wiped on drop: its state predicts every share and mask this source drew.
    rng: SecretRng,
    /// Batches answered under the current key (at most [`MAX_BATCHES_PER_KEY`]).
    batches: u64,
}

impl core::fmt::Debug for HeTriples {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (role, ready) = match &self.role {
            Role::Owner(s) => ("key owner", s.is_some()),
            Role::Evaluator(k) => ("evaluator", k.is_some()),
        };
        write!(
            f,
            "HeTriples {{ ell: {}, log_n: {}, role: {role}, set_up: {ready}, <secrets redacted> }}",
            self.ctx.p.ell, self.ctx.p.log_n
        )
    }
}

impl HeTriples {
    /// Party `id`'s side (P0 owns the key), seeded from `rng`.
    pub fn new<R: RngCore + CryptoRng>(
        id: PartyId,
        params: HeTripleParams,
        rng: &mut R,
    ) -> Result<Self> {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let own = SecretRng::from_seed(seed);
        seed.zeroize();
        Ok(HeTriples {
            ctx: Ctx::new(params)?,
            role: match id {
                PartyId::P0 => Role::Owner(None),
                PartyId::P1 => Role::Evaluator(None),
            },
            rng: own,
            batches: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &HeTripleParams {
        &self.ctx.p
    }

    fn q_shape(&self, blocks: usize) -> RnsShape {
        RnsShape {
            n: self.ctx.n,
            blocks,
            moduli: self.ctx.p.cipher_primes(),
        }
    }

    fn reply_shape(&self, blocks: usize) -> RnsShape {
        RnsShape {
            n: self.ctx.n,
            blocks,
            moduli: self.ctx.p.keep.clone(),
        }
    }

    async fn setup_owner(&mut self, ch: &Channel) -> Result<()> {
        let c = &self.ctx;
        let s_small = small_ternary(&mut self.rng, c.n);
        let s = Secret(c.small_ntt(&s_small));
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        let a = c.uniform(&seed, PK_STREAM);
        let e = c.gaussian(&mut self.rng);
        let mut p0 = c.small_ntt(&e);
        for (j, m) in c.q.iter().enumerate() {
            for ((x, &ai), &si) in p0[j].iter_mut().zip(&a[j]).zip(&s.0[j]) {
                *x = m.sub(*x, m.mul(ai, si));
            }
        }
        let shape = self.q_shape(1);
        ch.send_msg(&HeKey {
            seed,
            shape,
            rows: p0.concat(),
        });
        self.role = Role::Owner(Some(s));
        Ok(())
    }

    async fn setup_evaluator(&mut self, ch: &Channel) -> Result<()> {
        let key = ch.recv_msg::<HeKey>(&self.q_shape(1)).await?;
        let c = &self.ctx;
        let p0 = key.rows.chunks(c.n).map(<[u64]>::to_vec).collect();
        let p1 = c.uniform(&key.seed, PK_STREAM);
        self.role = Role::Evaluator(Some(PublicKey { p0, p1 }));
        Ok(())
    }

    async fn setup_once(&mut self, ch: &Channel) -> Result<()> {
        match self.role {
            Role::Owner(None) => self.setup_owner(ch).await,
            Role::Evaluator(None) => self.setup_evaluator(ch).await,
            _ => Ok(()),
        }
    }

    fn random_shares(&mut self, ring: RingCfg, n: usize) -> Zeroizing<Vec<u64>> {
        Zeroizing::new((0..n).map(|_| self.rng.next_u64() & ring.mask()).collect())
    }

    /// P0: sends the encryptions, decrypts the answer, returns its triples.
    async fn owner_triples(&mut self, ch: &Channel, ring: RingCfg, n: usize) -> Result<Triples> {
        let a = self.random_shares(ring, n);
        let b = self.random_shares(ring, n);
        let c = &self.ctx;
        let Role::Owner(Some(s)) = &self.role else {
            return Err(MpcError::NotSetUp);
        };
        let batches = n.div_ceil(c.n);
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        let mut rows = Vec::with_capacity(2 * batches * c.q.len() * c.n);
        for bi in 0..batches {
            let span = bi * c.n..((bi + 1) * c.n).min(n);
            for (v, vals) in [&a[span.clone()], &b[span.clone()]].into_iter().enumerate() {
                // c_0 = −a·s + m + T·e (NTT form); c_1 = a is the seed's stream 2·batch + v.
                let ua = c.uniform(&seed, (2 * bi + v) as u64);
                let mut m = c.encode_coeffs(vals);
                let e = c.gaussian(&mut self.rng);
                for (j, q) in c.q.iter().enumerate() {
                    for (x, &ei) in m[j].iter_mut().zip(e.iter()) {
                        *x = q.add(*x, q.mul(q.from_i64(ei), c.t_mod_q[j]));
                    }
                    c.q_ntt[j].forward(&mut m[j]);
                    for ((x, &ai), &si) in m[j].iter_mut().zip(&ua[j]).zip(&s.0[j]) {
                        *x = q.sub(*x, q.mul(ai, si));
                    }
                }
                for row in m.iter_mut() {
                    rows.extend_from_slice(row);
                    row.zeroize();
                }
            }
        }
        let shape = self.q_shape(2 * batches);
        ch.send_owned(HeUpload { seed, shape, rows });
        let reply = ch
            .recv_msg::<HeReply>(&self.reply_shape(2 * batches))
            .await?;
        let c = &self.ctx;
        let Role::Owner(Some(s)) = &self.role else {
            return Err(MpcError::NotSetUp);
        };
        let mut u = Zeroizing::new(Vec::with_capacity(n));
        let block = c.k * c.n;
        for (bi, pair) in reply.rows.chunks(2 * block).enumerate() {
            let (c0, c1) = pair.split_at(block);
            let mut v: Vec<Vec<u64>> = Vec::with_capacity(c.k);
            for j in 0..c.k {
                let q = &c.q[j];
                let mut x = c1[j * c.n..(j + 1) * c.n].to_vec();
                c.q_ntt[j].forward(&mut x);
                for (xi, &si) in x.iter_mut().zip(&s.0[j]) {
                    *xi = q.mul(*xi, si);
                }
                c.q_ntt[j].inverse(&mut x);
                for (xi, &ci) in x.iter_mut().zip(&c0[j * c.n..(j + 1) * c.n]) {
                    *xi = q.add(*xi, ci);
                }
                v.push(x);
            }
            let mut pt = c.zero_rows(c.t.len());
            c.keep_to_t.lift_rows(&v, &mut pt);
            v.zeroize();
            for (i, row) in pt.iter_mut().enumerate() {
                let t = &c.t[i];
                for x in row.iter_mut() {
                    *x = t.mul(*x, c.qd_mod_t[i]);
                }
                c.t_ntt[i].forward(row);
            }
            let take = c.n.min(n - bi * c.n);
            for slot in 0..take {
                u.push(c.garner.combine(&pt, slot));
            }
            pt.zeroize();
        }
        Ok(own_triples(ring, &a, &b, |i| u[i]))
    }

    /// P1: evaluates on the encryptions, floods, switches down, answers; returns its triples.
    async fn evaluator_triples(
        &mut self,
        ch: &Channel,
        ring: RingCfg,
        n: usize,
    ) -> Result<Triples> {
        let a = self.random_shares(ring, n);
        let b = self.random_shares(ring, n);
        let batches = n.div_ceil(self.ctx.n);
        let up = ch.recv_msg::<HeUpload>(&self.q_shape(2 * batches)).await?;
        let c = &self.ctx;
        let Role::Evaluator(Some(pk)) = &self.role else {
            return Err(MpcError::NotSetUp);
        };
        let nq = c.q.len();
        let r_limbs = (2 * c.p.ell + 1 + STAT_BITS).div_ceil(64) as usize;
        let f_limbs = c.p.flood_bits.div_ceil(64) as usize;
        let mut r_share = Zeroizing::new(Vec::with_capacity(n));
        let mut out = Vec::with_capacity(batches * 2 * c.k * c.n);
        let mut limbs = Zeroizing::new(vec![0u64; r_limbs.max(f_limbs)]);
        for bi in 0..batches {
            let span = bi * c.n..((bi + 1) * c.n).min(n);
            let take = span.len();
            // r uniform in [0, 2^{2ℓ+1+σ}); its residues mod t_i in the slots.
            let r_bits = 2 * c.p.ell + 1 + STAT_BITS;
            let mut r_slots = Zeroizing::new(vec![vec![0u64; c.n]; c.t.len()]);
            for slot in 0..take {
                sample_bits(&mut self.rng, &mut limbs[..r_limbs], r_bits);
                for (i, t) in c.t.iter().enumerate() {
                    r_slots[i][slot] = limbs_mod(&limbs[..r_limbs], t);
                }
                r_share.push(limbs[0]);
            }
            // P1's plaintexts b_1 (times Enc(a_0)) and a_1 (times Enc(b_0)).
            let pb = Zeroizing::new(c.encode(&b[span.clone()]));
            let pa = Zeroizing::new(c.encode(&a[span.clone()]));
            let block = nq * c.n;
            let base = 2 * bi * block;
            let ct_a0 = &up.rows[base..base + block];
            let ct_b0 = &up.rows[base + block..base + 2 * block];
            let ua = c.uniform(&up.seed, (2 * bi) as u64);
            let ub = c.uniform(&up.seed, (2 * bi + 1) as u64);
            // The fresh encryption of zero and the flood: T·(u·pk + (e_1 + F, e_2)), plus r.
            let u_small = small_ternary(&mut self.rng, c.n);
            let mut u = c.small_ntt(&u_small);
            let e2 = c.gaussian(&mut self.rng);
            let mut e2 = c.small_ntt(&e2);
            let e1 = c.gaussian(&mut self.rng);
            // x = r's encoding + T·(e_1 + F), coefficient form.
            let mut x = {
                let mut rr = c.zero_rows(c.t.len());
                for (i, row) in rr.iter_mut().enumerate() {
                    row.copy_from_slice(&r_slots[i]);
                    c.t_ntt[i].inverse(row);
                }
                let mut o = c.zero_rows(nq);
                c.t_to_q.lift_rows(&rr, &mut o);
                rr.zeroize();
                o
            };
            for k in 0..c.n {
                sample_bits(&mut self.rng, &mut limbs[..f_limbs], c.p.flood_bits);
                for (j, q) in c.q.iter().enumerate() {
                    let f = q.sub(limbs_mod(&limbs[..f_limbs], q), c.flood_off[j]);
                    let noise = q.add(f, q.from_i64(e1[k]));
                    x[j][k] = q.add(x[j][k], q.mul(noise, c.t_mod_q[j]));
                }
            }
            let mut c0 = c.zero_rows(nq);
            let mut c1 = c.zero_rows(nq);
            for j in 0..nq {
                let q = &c.q[j];
                c.q_ntt[j].forward(&mut x[j]);
                let tq = c.t_mod_q[j];
                let r = j * c.n..(j + 1) * c.n;
                for k in 0..c.n {
                    let tu = q.mul(u[j][k], tq);
                    let v0 = q.add(
                        q.mul(ct_a0[r.start + k], pb[j][k]),
                        q.mul(ct_b0[r.start + k], pa[j][k]),
                    );
                    c0[j][k] = q.add(q.add(v0, x[j][k]), q.mul(tu, pk.p0[j][k]));
                    let v1 = q.add(q.mul(ua[j][k], pb[j][k]), q.mul(ub[j][k], pa[j][k]));
                    let z1 = q.add(q.mul(tu, pk.p1[j][k]), q.mul(e2[j][k], tq));
                    c1[j][k] = q.add(v1, z1);
                }
                c.q_ntt[j].inverse(&mut c0[j]);
                c.q_ntt[j].inverse(&mut c1[j]);
            }
            u.zeroize();
            e2.zeroize();
            x.zeroize();
            for ct in [&mut c0, &mut c1] {
                c.switch_down(ct);
                for row in ct.iter().take(c.k) {
                    out.extend_from_slice(row);
                }
            }
            c0.zeroize();
            c1.zeroize();
        }
        ch.send_owned(HeReply {
            seed: [0u8; 32],
            shape: self.reply_shape(2 * batches),
            rows: out,
        });
        Ok(own_triples(ring, &a, &b, |i| r_share[i].wrapping_neg()))
    }
}

impl Ctx {
    /// BGV modulus switch of one polynomial (coefficient form, every ciphertext prime) from
    /// `Q` to the reply primes: `(c − δ)/Q_d` with `δ ≡ c (mod Q_d)`, `δ ≡ 0 (mod T)`; the
    /// plaintext is multiplied by `Q_d^{-1} mod T`. Rows past the reply primes are left as
    /// they were.
    fn switch_down(&self, ct: &mut [Vec<u64>]) {
        let (k, nt) = (self.k, self.t.len());
        let (keep, dropped) = ct.split_at_mut(k);
        let mut tk = self.zero_rows(nt + k);
        self.drop_to_tk.lift_rows(dropped, &mut tk);
        // κ = −ĉ·Q_d^{-1} mod T, lifted to the reply primes.
        let (tr, kr) = tk.split_at_mut(nt);
        for (i, row) in tr.iter_mut().enumerate() {
            let t = &self.t[i];
            for x in row.iter_mut() {
                *x = t.neg(t.mul(*x, self.qd_inv_t[i]));
            }
        }
        let mut kappa = self.zero_rows(k);
        self.t_to_keep.lift_rows(tr, &mut kappa);
        for j in 0..k {
            let q = &self.q[j];
            for c in 0..self.n {
                let delta = q.add(kr[j][c], q.mul(self.qd_mod_keep[j], kappa[j][c]));
                keep[j][c] = q.mul(q.sub(keep[j][c], delta), self.qd_inv_keep[j]);
            }
        }
    }
}

/// Garner's mixed-radix CRT over the plaintext primes: `x = v_0 + v_1·t_0 + v_2·t_0·t_1 + …`.
#[derive(Clone, Debug)]
struct Garner {
    t: Vec<Modulus>,
    /// `(t_0···t_{i−1})^{-1} mod t_i`.
    inv: Vec<u64>,
    /// `t_0···t_{i−1} mod 2^64`.
    radix: Vec<u64>,
}

impl Garner {
    fn new(t: &[Modulus]) -> Result<Self> {
        if t.len() > MAX_PRIMES {
            return Err(MpcError::InvalidConfig("RLWE triples: too many primes"));
        }
        let mut inv = Vec::with_capacity(t.len());
        let mut radix = Vec::with_capacity(t.len());
        let mut r = 1u64;
        for (i, ti) in t.iter().enumerate() {
            inv.push(
                ti.inv(prod_mod(&t[..i], ti))
                    .ok_or(MpcError::InvalidConfig(
                        "RLWE triple primes are not coprime",
                    ))?,
            );
            radix.push(r);
            r = r.wrapping_mul(ti.value());
        }
        Ok(Garner {
            t: t.to_vec(),
            inv,
            radix,
        })
    }

    /// The integer below `Π t_i` with the residues of slot `slot` of `rows`, modulo `2^64`.
    fn combine(&self, rows: &[Vec<u64>], slot: usize) -> u64 {
        let mut digits = [0u64; MAX_PRIMES];
        let mut out = 0u64;
        for (i, ti) in self.t.iter().enumerate() {
            // The digits so far, modulo t_i (Horner from the top digit).
            let mut acc = 0u64;
            for k in (0..i).rev() {
                acc = ti.add(
                    ti.mul(acc, ti.reduce(self.t[k].value())),
                    ti.reduce(digits[k]),
                );
            }
            let v = ti.mul(ti.sub(rows[i][slot], acc), self.inv[i]);
            digits[i] = v;
            out = out.wrapping_add(v.wrapping_mul(self.radix[i]));
        }
        out
    }
}

/// This party's triples from its shares `a, b` and its share `x(i)` of the cross terms:
/// `c_i = a_i·b_i + x(i) (mod 2^ℓ)`.
fn own_triples(ring: RingCfg, a: &[u64], b: &[u64], x: impl Fn(usize) -> u64) -> Triples {
    let c = (0..a.len())
        .map(|i| ring.mul(a[i], b[i]).wrapping_add(x(i)) & ring.mask())
        .collect();
    Triples {
        a: RingShares::new(a.to_vec()),
        b: RingShares::new(b.to_vec()),
        c: RingShares::new(c),
    }
}

/// A ternary polynomial as `i64`, both buffers zeroized.
fn small_ternary<R: RngCore + CryptoRng>(rng: &mut R, n: usize) -> Zeroizing<Vec<i64>> {
    let t = Zeroizing::new(ternary(rng, n));
    Zeroizing::new(t.iter().map(|&v| i64::from(v)).collect())
}

/// Fills `limbs` with a uniform integer of `bits` bits (little-endian limbs).
fn sample_bits<R: RngCore>(rng: &mut R, limbs: &mut [u64], bits: u32) {
    for (i, w) in limbs.iter_mut().enumerate() {
        let lo = 64 * i as u32;
        *w = if bits >= lo + 64 {
            rng.next_u64()
        } else if bits > lo {
            rng.next_u64() & ((1u64 << (bits - lo)) - 1)
        } else {
            0
        };
    }
}

impl TripleSource for HeTriples {
    fn setup<'a>(&'a mut self, ch: &'a Channel) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.setup_once(ch))
    }

    fn triples<'a>(
        &'a mut self,
        ch: &'a Channel,
        ring: RingCfg,
        n: usize,
    ) -> BoxFuture<'a, Result<Triples>> {
        Box::pin(async move {
            if ring.ell != self.ctx.p.ell {
                return Err(MpcError::InvalidConfig(
                    "RLWE triple parameters built for another ring width",
                ));
            }
            self.setup_once(ch).await?;
            let batches = n.div_ceil(self.ctx.n) as u64;
            if self.batches.saturating_add(batches) > MAX_BATCHES_PER_KEY {
                return Err(MpcError::InvalidInput(
                    "RLWE triple source: this key has answered its most batches; build a new source",
                ));
            }
            self.batches += batches;
            if n == 0 {
                return Ok(own_triples(ring, &[], &[], |_| 0));
            }
            let t = match self.role {
                Role::Owner(_) => self.owner_triples(ch, ring, n).await?,
                Role::Evaluator(_) => self.evaluator_triples(ch, ring, n).await?,
            };
            expect_len("RLWE triples", n, t.c.len())?;
            Ok(t)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpc::channel::{run_pair, Session};
    use crate::mpc::error::Defect;
    use crate::mpc::msgs::MsgKind;
    use crate::mpc::{MpcConfig, Party};
    use alloc::format;
    use rand_chacha::ChaCha20Rng;

    fn rng(seed: u64) -> ChaCha20Rng {
        ChaCha20Rng::seed_from_u64(seed)
    }

    fn pair(ell: u32) -> (HeTriples, HeTriples) {
        let p = HeTripleParams::new(ell).unwrap();
        (
            HeTriples::new(PartyId::P0, p.clone(), &mut rng(1)).unwrap(),
            HeTriples::new(PartyId::P1, p, &mut rng(2)).unwrap(),
        )
    }

    fn run(
        s0: &mut HeTriples,
        s1: &mut HeTriples,
        ring: RingCfg,
        n: usize,
    ) -> (Result<Triples>, Result<Triples>) {
        let (c0, c1) = (Channel::new(), Channel::new());
        let f0 = Session::new(c0.clone(), async move { s0.triples(&c0, ring, n).await });
        let f1 = Session::new(c1.clone(), async move { s1.triples(&c1, ring, n).await });
        run_pair(f0, f1)
    }

    fn check(ring: RingCfg, t0: &Triples, t1: &Triples, n: usize) {
        assert_eq!(t0.c.len(), n);
        assert_eq!(t1.c.len(), n);
        let (a0, b0, c0) = (t0.a.as_slice(), t0.b.as_slice(), t0.c.as_slice());
        let (a1, b1, c1) = (t1.a.as_slice(), t1.b.as_slice(), t1.c.as_slice());
        for k in 0..n {
            let a = ring.add(a0[k], a1[k]);
            let b = ring.add(b0[k], b1[k]);
            assert_eq!(ring.add(c0[k], c1[k]), ring.mul(a, b), "triple {k}");
        }
        // The shares are not degenerate: both parties' a, b vary.
        assert!(a0.iter().any(|&v| v != a0[0]) && b1.iter().any(|&v| v != b1[0]));
    }

    #[test]
    fn parameters_meet_their_bounds() {
        let p = HeTripleParams::new(43).unwrap();
        assert_eq!(p.log_n(), 14);
        // T ≥ 2^{2ℓ+2+σ} so that a_0·b_1 + b_0·a_1 + r never wraps.
        assert!(log2_prod(p.plaintext_primes()) >= (2 * 43 + 2 + STAT_BITS) as f64);
        // 128-bit: log2 Q ≤ 438 at N = 2^14.
        assert!(p.log_q() <= 438.0, "log Q {}", p.log_q());
        // The flood covers the worst-case product noise with σ bits to spare.
        let log_t = log2_prod(p.plaintext_primes());
        let b_e = GaussianCdt::new(SIGMA).bound() as f64;
        let worst = libm::log2((1u64 << 14) as f64 * (1.0 + b_e)) + log_t; // in units of T
                                                                           // … for every coefficient of every reply of the key together.
        let union = (14 + LOG_MAX_BATCHES) as f64;
        assert!(p.flood_bits() as f64 >= worst + STAT_BITS as f64 + union);
        // About half of Gilboa's ℓ(ℓ+1) bits plus 2ℓ COTs per triple.
        assert!(p.bytes_per_triple() < 130.0, "{}", p.bytes_per_triple());
        // Every prime is distinct and ≡ 1 mod 2N.
        let mut all = p.plaintext_primes().to_vec();
        all.extend(p.cipher_primes());
        for (i, &q) in all.iter().enumerate() {
            assert_eq!(q % (2 << 14), 1);
            assert!(!all[i + 1..].contains(&q));
        }
        for ell in [2, 16, 32, 64] {
            let p = HeTripleParams::new(ell).unwrap();
            assert!(p.log_q() <= if p.log_n() == 14 { 438.0 } else { 881.0 });
        }
        assert_eq!(HeTripleParams::new(64).unwrap().log_n(), 15);
        assert!(HeTripleParams::new(65).is_err());
        assert!(HeTripleParams::new(1).is_err());
        assert!(HeTripleParams::with_log_n(43, 11).is_err());
        // Too small a ring for the modulus this ℓ needs.
        assert!(HeTripleParams::with_log_n(43, 12).is_err());
    }

    #[test]
    fn crt_lift_and_garner_match_integer_arithmetic() {
        let ps = ntt_primes(40, 1 << 4, 3, &[]).unwrap();
        let qs = ntt_primes(50, 1 << 4, 2, &ps).unwrap();
        let (src, dst) = (moduli(&ps[..2]).unwrap(), moduli(&qs).unwrap());
        let crt = Crt::new(&src, &dst).unwrap();
        let m = ps[0] as i128 * ps[1] as i128;
        let mut g = rng(3);
        for _ in 0..2000 {
            let x = ((g.next_u64() >> 1) as i128 * g.next_u64() as i128).rem_euclid(m) - m / 2;
            let rows: Vec<Vec<u64>> = src
                .iter()
                .map(|q| vec![x.rem_euclid(q.value() as i128) as u64])
                .collect();
            let mut out = vec![vec![0u64]; 2];
            crt.lift(&rows, &mut out, 0);
            for (j, d) in dst.iter().enumerate() {
                assert_eq!(out[j][0], x.rem_euclid(d.value() as i128) as u64);
            }
            let u = x + m / 2; // in [0, M)
            let all = moduli(&ps[..2]).unwrap();
            let slots: Vec<Vec<u64>> = all
                .iter()
                .map(|q| vec![(u % q.value() as i128) as u64])
                .collect();
            assert_eq!(Garner::new(&all).unwrap().combine(&slots, 0), u as u64);
        }
    }

    #[test]
    fn triples_reconstruct_over_several_batches() {
        let ring = MpcConfig::ENCFORMER.ring;
        let (mut s0, mut s1) = pair(ring.ell);
        let n = (1 << 14) + 37;
        let (t0, t1) = run(&mut s0, &mut s1, ring, n);
        check(ring, &t0.unwrap(), &t1.unwrap(), n);
        // A second call reuses the key and draws fresh everything else.
        let (t0, t1) = run(&mut s0, &mut s1, ring, 100);
        check(ring, &t0.unwrap(), &t1.unwrap(), 100);
        assert_eq!((s0.batches, s1.batches), (3, 3));
        // A key answers at most MAX_BATCHES_PER_KEY batches.
        s0.batches = MAX_BATCHES_PER_KEY;
        s1.batches = MAX_BATCHES_PER_KEY;
        let (r0, r1) = run(&mut s0, &mut s1, ring, 1);
        assert!(matches!(r0, Err(MpcError::InvalidInput(_))), "{r0:?}");
        assert!(matches!(r1, Err(MpcError::InvalidInput(_))), "{r1:?}");
    }

    #[test]
    fn triples_reconstruct_for_other_rings() {
        for ell in [16u32, 64] {
            let ring = RingCfg::new(ell, 0).unwrap();
            let (mut s0, mut s1) = pair(ell);
            let (t0, t1) = run(&mut s0, &mut s1, ring, 500);
            check(ring, &t0.unwrap(), &t1.unwrap(), 500);
        }
        // A source built for one ring refuses another.
        let (mut s0, mut s1) = pair(43);
        let ring = RingCfg::new(32, 0).unwrap();
        let (r0, r1) = run(&mut s0, &mut s1, ring, 10);
        assert!(matches!(r0, Err(MpcError::InvalidConfig(_))));
        assert!(matches!(r1, Err(MpcError::InvalidConfig(_))));
    }

    #[test]
    fn fixed_point_products_with_injected_rlwe_triples() {
        let cfg = MpcConfig::ENCFORMER;
        let r = cfg.ring;
        let p = HeTripleParams::new(r.ell).unwrap();
        let mut g = rng(7);
        let mut p0 = Party::new(PartyId::P0, cfg, rng(10))
            .unwrap()
            .with_triple_source(Box::new(
                HeTriples::new(PartyId::P0, p.clone(), &mut g).unwrap(),
            ));
        let mut p1 = Party::new(PartyId::P1, cfg, rng(11))
            .unwrap()
            .with_triple_source(Box::new(HeTriples::new(PartyId::P1, p, &mut g).unwrap()));
        let (c0, c1) = (p0.channel(), p1.channel());
        let (a, b) = run_pair(
            Session::new(c0, async { p0.setup().await }),
            Session::new(c1, async { p1.setup().await }),
        );
        a.unwrap();
        b.unwrap();
        let n = 300usize;
        let xs: Vec<i64> = (0..n)
            .map(|_| (g.next_u64() % (1 << 28)) as i64 - (1 << 27))
            .collect();
        let ys: Vec<i64> = (0..n)
            .map(|_| (g.next_u64() % (1 << 13)) as i64 - (1 << 12))
            .collect();
        let split = |v: &[i64], g: &mut ChaCha20Rng| {
            let s0: Vec<u64> = v.iter().map(|_| g.next_u64() & r.mask()).collect();
            let s1: Vec<u64> = v
                .iter()
                .zip(&s0)
                .map(|(&x, &a)| r.sub(r.from_signed(x), a))
                .collect();
            (RingShares::new(s0), RingShares::new(s1))
        };
        let (x0, x1) = split(&xs, &mut g);
        let (y0, y1) = split(&ys, &mut g);
        let (c0, c1) = (p0.channel(), p1.channel());
        let (z0, z1) = run_pair(
            Session::new(c0, async { p0.mul(&x0, &y0).await }),
            Session::new(c1, async { p1.mul(&x1, &y1).await }),
        );
        let (z0, z1) = (z0.unwrap(), z1.unwrap());
        for k in 0..n {
            let z = r.to_signed(r.add(z0.as_slice()[k], z1.as_slice()[k]));
            let exact = ((xs[k] as i128 * ys[k] as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
            assert!(
                z == exact || z == exact - 1,
                "{} · {} → {z}, want {exact}",
                xs[k],
                ys[k]
            );
        }
    }

    /// Malformed key, upload and reply messages get typed errors at their receiver.
    #[test]
    fn malformed_messages_get_typed_errors() {
        let ring = MpcConfig::ENCFORMER.ring;
        // A truncated upload (one batch short) at the evaluator.
        let (mut good0, mut s1) = pair(ring.ell);
        let (c0, c1) = (Channel::new(), Channel::new());
        let shape1 = good0.q_shape(1);
        let f0 = Session::new(c0.clone(), async move {
            good0.setup_once(&c0).await?;
            c0.send_msg(&HeUpload {
                seed: [0u8; 32],
                shape: shape1.clone(),
                rows: vec![0u64; shape1.words()],
            });
            Ok::<(), MpcError>(())
        });
        let f1 = Session::new(c1.clone(), async move { s1.triples(&c1, ring, 10).await });
        let (r0, r1) = run_pair(f0, f1);
        r0.unwrap();
        assert!(
            matches!(
                r1,
                Err(MpcError::Malformed {
                    msg: MsgKind::HeUpload,
                    defect: Defect::Length { .. }
                })
            ),
            "{r1:?}"
        );
        // A residue ≥ its prime in the key.
        let (s0, mut s1) = pair(ring.ell);
        let (c0, c1) = (Channel::new(), Channel::new());
        let shape = s0.q_shape(1);
        let mut rows = vec![0u64; shape.words()];
        rows[5] = shape.moduli[0];
        let f0 = Session::new(c0.clone(), async move {
            c0.send_msg(&HeKey {
                seed: [1u8; 32],
                shape,
                rows,
            });
            Ok::<(), MpcError>(())
        });
        let f1 = Session::new(c1.clone(), async move { s1.setup_once(&c1).await });
        let (_, r1) = run_pair(f0, f1);
        assert!(
            matches!(
                r1,
                Err(MpcError::Malformed {
                    msg: MsgKind::HeKey,
                    defect: Defect::OutOfRange { index: 5 }
                })
            ),
            "{r1:?}"
        );
        // A reply one polynomial short at the key owner.
        let (mut s0, mut s1) = pair(ring.ell);
        let (c0, c1) = (Channel::new(), Channel::new());
        let f0 = Session::new(c0.clone(), async move { s0.triples(&c0, ring, 10).await });
        let f1 = Session::new(c1.clone(), async move {
            s1.setup_once(&c1).await?;
            let up = c1.recv_msg::<HeUpload>(&s1.q_shape(2)).await?;
            drop(up);
            c1.send_msg(&HeReply {
                seed: [0u8; 32],
                shape: s1.reply_shape(1),
                rows: vec![0u64; s1.reply_shape(1).words()],
            });
            Ok::<(), MpcError>(())
        });
        let (r0, _) = run_pair(f0, f1);
        assert!(
            matches!(
                r0,
                Err(MpcError::Malformed {
                    msg: MsgKind::HeReply,
                    defect: Defect::Length { .. }
                })
            ),
            "{r0:?}"
        );
    }

    #[test]
    fn debug_redacts_the_secret() {
        let (s0, _) = pair(43);
        let d = format!("{s0:?}");
        assert!(d.contains("redacted") && d.contains("key owner"), "{d}");
    }
}
