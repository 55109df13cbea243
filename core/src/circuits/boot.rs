//! CKKS bootstrapping (Cheon–Han–Kim–Kim–Song 2018, with the factored DFT of Chen–Chillotti–Song
//! 2019, the cosine EvalMod of Han–Ki 2020 and the sparse-secret encapsulation of
//! Bossuat–Troncoso-Pastoriza–Hubaux 2022), written on [`LinearTransform`], [`ChebyshevPoly`]
//! and the public key-switching steps only, so it runs on every backend.
//!
//! A ciphertext with message polynomial `m` at scale `Δ` is refreshed in these steps:
//!
//! 1. **Lift.** Dropped to level 0 and multiplied by the integer `2^k` (free), so that
//!    `q_0/(2^k·Δ)` is the message ratio EvalMod wants ([`BootParams::log_message_ratio`]).
//! 2. **Encapsulation** (when [`BootParams::ephemeral_weight`] is set): a key switch at level 0,
//!    with a one-digit key modulo `q_0·p_0`, to an ephemeral secret `s'` of weight 32.
//! 3. **ModRaise.** `(c_0, c_1)` are lifted centred from `q_0` to `Q_L`. They decrypt to
//!    `M = m + q_0·I` with a small integer polynomial `I` (`|I_k| ≲ 7·√(h/12)`, `h` the weight
//!    of the secret they are under). The result is labelled with scale `q_0`, so its slots are
//!    `decode(M)/q_0`. With encapsulation, a key switch `s' → s` over `Q_L ∪ P` follows.
//! 4. **SubSum** (sparse slots, `n < N/2`): `Σ_j σ_{5^{n·j}}` over the `N/2n` automorphisms that
//!    fix the slot subring, which keeps the subring's coefficients (times `N/2n`) and zeroes the
//!    others.
//! 5. **CoeffToSlot**: the inverse special FFT as `c` merged groups of its `log2 n` butterfly
//!    stages (one level each; the constant spread evenly over the groups), which leaves
//!    `(M_k + i·M_{k+n})/(2Kq_0)` in bit-reversed slot order; one conjugation separates the real
//!    and imaginary parts into two real ciphertexts holding `t/K`, `t = M_k/q_0 ∈ [−K, K]`.
//! 6. **EvalMod** on each: a Chebyshev interpolant of `cos(2π(Kx − 1/4)/2^r)` on `[−1, 1]`, then
//!    `r` double angles `y ← 2y² − 1`, giving `sin(2πt) ≈ 2π·2^k·m_k/q_0`.
//! 7. **SlotToCoeff**: the forward special FFT in `s` merged groups, on `y_re + i·y_im`, with the
//!    constant `q_0/(2π·2^k)` (and the EvalMod output scale) folded into it so that the result
//!    carries the input's scale exactly.
//!
//! Scales: CoeffToSlot and EvalMod run at scale `q_0` (the EvalMod primes must be of its size,
//! so that products rescale back to it; [`Bootstrapper::new`] checks), SlotToCoeff at `Δ`.
//! Levels, from the top: `c` CoeffToSlot primes, the EvalMod depth, `s` SlotToCoeff primes; what
//! is below is left for computation ([`BootLevels::output`]).

use super::lintrans::{EncodedLinearTransform, LinearTransform};
use super::poly::ChebyshevPoly;
use crate::backend::{Basis, PolyBackend};
use crate::ckks::{Ciphertext, Ckks, EvaluationKeys, C64};
use crate::error::{Error, Result};
use crate::params::{max_log_qp_128_sparse, CkksParams, SecretDistribution};
use crate::rlwe::{LevelZeroKey, SwitchingKey};
use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;
use core::f64::consts::PI;

/// The version byte of [`BootKeys::to_bytes`].
const BOOT_KEYS_VERSION: u8 = 1;

/// The ephemeral secret's Hamming weight in sparse-secret encapsulation (Lattigo's default).
pub const EPHEMERAL_WEIGHT: u32 = 32;

/// The largest EvalMod degree [`BootParams::fit_evalmod`] considers.
pub const MAX_EVALMOD_DEGREE: usize = 255;

/// The smallest message ratio `log2(q_0/Δ)` a bootstrapped input may have.
pub const MIN_LOG_MESSAGE_RATIO: f64 = 8.0;

/// Bootstrapping settings.
#[derive(Clone, Debug, PartialEq)]
pub struct BootParams {
    /// Slots of the ciphertexts to refresh (a power of two `≤ N/2`).
    pub slots: usize,
    /// Levels (merged FFT groups) of CoeffToSlot.
    pub cts_levels: usize,
    /// Levels (merged FFT groups) of SlotToCoeff.
    pub stc_levels: usize,
    /// The bound `K` on `|t| = |M_k/q_0|`: the EvalMod polynomial is fitted on `[−K, K]`.
    pub k: f64,
    /// Double-angle iterations `r`.
    pub double_angles: u32,
    /// Degree of the EvalMod Chebyshev interpolant.
    pub degree: usize,
    /// Sparse-secret encapsulation (Bossuat–Troncoso-Pastoriza–Hubaux 2022): before ModRaise
    /// the level-0 ciphertext is switched to an ephemeral secret of this Hamming weight, under a
    /// key that lives modulo `q_0·p_0` only (where so sparse a secret stays secure: outside
    /// `INSECURE_` sets, [`Bootstrapper::new`] checks `log2(q_0·p_0)` against the sparse-secret
    /// table, [`crate::params::max_log_qp_128_sparse`]), and back to the real secret after
    /// ModRaise. `I` then follows the ephemeral weight, so `K` and the EvalMod degree shrink.
    /// `None`: ModRaise under the real secret (refused for a uniform ternary one).
    pub ephemeral_weight: Option<u32>,
    /// The scale `Δ` of the ciphertexts to refresh (the output has it too).
    pub input_scale: f64,
    /// The message ratio `log2(q_0/Δ')` EvalMod works at: the input is first multiplied by the
    /// integer `2^k`, `k = ⌊log2(q_0/Δ)⌋ − ratio` (free, no level), so that `m/q_0` is as large
    /// as the sine's accuracy allows. EvalMod's absolute error is divided by the same `2^k` on
    /// the way out. A coefficient at its largest (`|m_k| = Δ`, e.g. a constant input of
    /// magnitude 1) meets the sine's relative error `(2π·2^-ratio)²/6`: `2^-21.4` at 12.
    pub log_message_ratio: f64,
}

impl BootParams {
    /// Defaults for a parameter set: all `N/2` slots, 3 + 3 FFT levels, sparse-secret
    /// encapsulation to weight [`EPHEMERAL_WEIGHT`] when the main secret is denser (always for a
    /// uniform ternary one), `K = ⌈7·√(h/12)⌉ + 1` for the weight `h` ModRaise sees (`|I|` has
    /// standard deviation about `√(h/12)`, so `|I| > K − 1` has probability below `2^-36` per
    /// coefficient), and the EvalMod degree and double-angle count of least depth whose error
    /// after the double angles is below `2^-35` (the `f64` floor of the fit is near `2^-40`)
    /// ([`BootParams::fit_evalmod`]). With encapsulation, ModRaise sees only the ephemeral
    /// secret, so `K`, the EvalMod polynomial and the levels are the same for a dense main secret
    /// as for a sparse one.
    pub fn for_params(params: &CkksParams) -> Result<Self> {
        let h = match params.secret_distribution() {
            SecretDistribution::SparseTernary { h } => h,
            // A dense secret's `I` would need `K` of order `√N`: it is always encapsulated.
            SecretDistribution::UniformTernary => u32::MAX,
        };
        let ephemeral_weight = (h > EPHEMERAL_WEIGHT).then_some(EPHEMERAL_WEIGHT);
        // Under a dense main secret every rounding after the switch back (`ε_0 + ε_1·s`) is about
        // `√(2N/3)/√h` times larger, and CoeffToSlot's is amplified by `2K·2^ratio` on the way
        // out: one bit less ratio (one bit more lift) balances it against the sine's cubic error.
        let log_message_ratio = match params.secret_distribution() {
            SecretDistribution::UniformTernary => 11.0,
            SecretDistribution::SparseTernary { .. } => 12.0,
        };
        let weight = ephemeral_weight.unwrap_or(h) as f64;
        let k = libm::ceil(7.0 * libm::sqrt(weight / 12.0)) + 1.0;
        let mut p = Self {
            slots: params.max_slots(),
            cts_levels: 3,
            stc_levels: 3,
            k,
            double_angles: 0,
            degree: 0,
            ephemeral_weight,
            input_scale: params.default_scale(),
            log_message_ratio,
        };
        p.fit_evalmod(-42.0)?;
        Ok(p)
    }

    /// Picks `(degree, r)`: for each `r ≤ 6`, the smallest degree whose interpolant of
    /// `cos(2π(Kx − 1/4)/2^r)` has, after the `r` double angles, a maximum error below
    /// `2^log2_err` on `[−1, 1]` (a bisection: the error falls with the degree once the
    /// polynomial resolves the cosine), and the few degrees above it; the least total depth
    /// wins, then the fewest products (the interpolant's plus `r` squarings).
    pub fn fit_evalmod(&mut self, log2_err: f64) -> Result<()> {
        let ok = |r: u32, d: usize| -> Result<bool> {
            let poly = evalmod_poly(self.k, r, d)?;
            Ok(libm::log2(max_error(&poly, self.k, r)) < log2_err)
        };
        let mut best: Option<((usize, usize), u32, usize)> = None;
        for r in 0..=6u32 {
            if !ok(r, MAX_EVALMOD_DEGREE)? {
                continue;
            }
            let (mut lo, mut hi) = (2usize, MAX_EVALMOD_DEGREE);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if ok(r, mid)? {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            for d in lo..=(lo + 8).min(MAX_EVALMOD_DEGREE) {
                let poly = evalmod_poly(self.k, r, d)?;
                let key = (poly.depth() + r as usize, poly.products() + r as usize);
                if best.is_none_or(|(b, _, _)| key < b) {
                    best = Some((key, r, d));
                }
            }
        }
        let (_, r, d) = best.ok_or(Error::InvalidParameters(
            "no EvalMod polynomial of degree ≤ 255 reaches the error bound",
        ))?;
        self.double_angles = r;
        self.degree = d;
        Ok(())
    }

    /// `k`: the input is multiplied by `2^k` before ModRaise.
    fn lift_bits(&self, q0: f64) -> u32 {
        let k = libm::floor(libm::log2(q0 / self.input_scale) - self.log_message_ratio);
        k.max(0.0) as u32
    }

    fn validate(&self, params: &CkksParams) -> Result<()> {
        let n = self.slots;
        if n < 2 || !n.is_power_of_two() || n > params.max_slots() {
            return Err(Error::InvalidParameters(
                "bootstrapping slots must be a power of two in 2..=N/2",
            ));
        }
        let stages = n.trailing_zeros() as usize;
        if !(1..=stages).contains(&self.cts_levels) || !(1..=stages).contains(&self.stc_levels) {
            return Err(Error::InvalidParameters(
                "FFT level budgets must be in 1..=log2(slots)",
            ));
        }
        if !(self.k.is_finite() && self.k >= 1.0)
            || self.degree < 2
            || self.degree > MAX_EVALMOD_DEGREE
            || self.double_angles > 8
            || self.ephemeral_weight == Some(0)
        {
            return Err(Error::InvalidParameters("invalid EvalMod settings"));
        }
        // ModRaise under a dense secret would need `K` of order `√N`.
        if self.ephemeral_weight.is_none()
            && params.secret_distribution() == SecretDistribution::UniformTernary
        {
            return Err(Error::InvalidParameters(
                "bootstrapping a uniform ternary secret needs sparse-secret encapsulation \
                 (ephemeral_weight)",
            ));
        }
        // The encapsulation key lives modulo q_0·p_0 under the ephemeral secret: that modulus
        // must be within the sparse-secret table's 128-bit bound for its weight.
        if let Some(h) = self.ephemeral_weight {
            let log_q0p0 =
                libm::log2(params.q()[0].value() as f64) + libm::log2(params.p()[0].value() as f64);
            let max = max_log_qp_128_sparse(h, params.log_n()).unwrap_or(0.0);
            if log_q0p0 > max && !params.literal().is_insecure() {
                return Err(Error::InsecureParameters {
                    log_qp: log_q0p0,
                    max_log_qp: max,
                    log_n: params.log_n(),
                });
            }
        }
        let q0 = params.q()[0].value() as f64;
        let scale_ok = self.input_scale.is_finite() && self.input_scale >= 1.0;
        let ratio_ok =
            self.log_message_ratio.is_finite() && self.log_message_ratio >= MIN_LOG_MESSAGE_RATIO;
        if !scale_ok || !ratio_ok || libm::log2(q0 / self.input_scale) < self.log_message_ratio {
            return Err(Error::InvalidParameters(
                "bootstrapping needs log2(q_0/Δ) ≥ log_message_ratio ≥ 8",
            ));
        }
        Ok(())
    }
}

/// `cos(2π(Kx − 1/4)/2^r)` interpolated on `[−1, 1]` at degree `d`. Without double angles
/// (`r = 0`) the function is `sin(2πKx)`, odd, and so is its interpolant at the symmetric
/// Chebyshev nodes: its even coefficients are rounding noise and are set to zero (and a zero
/// leading coefficient dropped), which halves the constant products and skips the even baby
/// powers nothing else needs.
fn evalmod_poly(k: f64, r: u32, d: usize) -> Result<ChebyshevPoly> {
    let div = libm::exp2(r as f64);
    let p =
        ChebyshevPoly::interpolate(|x| libm::cos(2.0 * PI * (k * x - 0.25) / div), -1.0, 1.0, d)?;
    if r > 0 {
        return Ok(p);
    }
    let mut c = p.coeffs;
    c.iter_mut().step_by(2).for_each(|x| *x = 0.0);
    while c.len() > 2 && c[c.len() - 1] == 0.0 {
        c.pop();
    }
    ChebyshevPoly::new(c, -1.0, 1.0)
}

/// The interpolant's maximum error on a grid of `[−1, 1]`, after the `r` double angles (which
/// amplify it about `4^r`-fold), against `sin(2πKx)`.
fn max_error(p: &ChebyshevPoly, k: f64, r: u32) -> f64 {
    let mut worst: f64 = 0.0;
    for i in 0..=4000 {
        let x = -1.0 + 2.0 * i as f64 / 4000.0;
        let mut y = p.eval_f64(x);
        for _ in 0..r {
            y = 2.0 * y * y - 1.0;
        }
        worst = worst.max((y - libm::sin(2.0 * PI * k * x)).abs());
    }
    worst
}

/// The roots `e^{2πi·(5^j mod 4len)/4len}` of the butterflies `j < len/2` of a stage of length
/// `len` (the same in every block of the stage).
fn stage_roots(len: usize) -> Vec<C64> {
    let m = 4 * len as u64;
    let mut r = 1u64;
    (0..len / 2)
        .map(|_| {
            let (c, s) = crate::math::special_fft::unit_root(r, m);
            r = r * 5 % m;
            C64::new(c, s)
        })
        .collect()
}

/// One butterfly stage of length `len` on `n` slots as a 3-diagonal transform: the inverse
/// (decimation-in-frequency, conjugate roots) or the forward (decimation-in-time) one, as the
/// encoder runs them.
fn stage(n: usize, len: usize, inverse: bool) -> Result<LinearTransform> {
    let h = len / 2;
    let zero = C64::default();
    let mut d0 = vec![zero; n];
    let mut dp = vec![zero; n];
    let mut dm = vec![zero; n];
    let roots = stage_roots(len);
    for i in (0..n).step_by(len) {
        for (j, &w) in roots.iter().enumerate() {
            let (lo, hi) = (i + j, i + j + h);
            if inverse {
                let w = w.conj();
                // y_lo = x_lo + x_hi, y_hi = w·(x_lo − x_hi).
                d0[lo] = C64::real(1.0);
                dp[lo] = C64::real(1.0);
                d0[hi] = zero - w;
                dm[hi] = w;
            } else {
                // y_lo = x_lo + w·x_hi, y_hi = x_lo − w·x_hi.
                d0[lo] = C64::real(1.0);
                dp[lo] = w;
                d0[hi] = zero - w;
                dm[hi] = C64::real(1.0);
            }
        }
    }
    let mut t = LinearTransform::new(n)?;
    t.set_diagonal(0, d0)?;
    if h == n / 2 {
        // `+h` and `−h` are the same diagonal; the two halves do not overlap.
        let both: Vec<C64> = dp.iter().zip(&dm).map(|(a, b)| *a + *b).collect();
        t.set_diagonal(h as i64, both)?;
    } else {
        t.set_diagonal(h as i64, dp)?;
        t.set_diagonal(-(h as i64), dm)?;
    }
    Ok(t)
}

/// The stages of an `n`-point special FFT merged into `groups` transforms (applied in order),
/// their product being `factor ×` the inverse FFT followed by a bit reversal (CoeffToSlot,
/// `inverse = true`: `z ↦ factor·bitrev(F^{-1}z)`) or the forward FFT preceded by one
/// (SlotToCoeff: `y ↦ factor·F(bitrev(y))`), where `F` is the encoder's decoding map
/// ("coefficient vector" `v_k = c_k + i·c_{k+n}` to slots).
pub fn fft_groups(
    n: usize,
    groups: usize,
    inverse: bool,
    factor: C64,
) -> Result<Vec<LinearTransform>> {
    let stages = n.trailing_zeros() as usize;
    if !n.is_power_of_two() || n < 2 || groups == 0 || groups > stages {
        return Err(Error::InvalidParameters(
            "an FFT needs a power-of-two size ≥ 2 and 1..=log2(n) groups",
        ));
    }
    let lens: Vec<usize> = crate::math::special_fft::stage_lengths(n, inverse).collect();
    let mut out = Vec::with_capacity(groups);
    let mut at = 0;
    for g in 0..groups {
        let size = stages / groups + usize::from(g < stages % groups);
        let mut t = LinearTransform::identity(n)?;
        for &len in &lens[at..at + size] {
            t = stage(n, len, inverse)?.compose(&t)?;
        }
        at += size;
        out.push(t);
    }
    // The inverse FFT's 1/n and the caller's factor are spread evenly over the groups (the phase
    // on the first): a plaintext's encoding error is absolute, so an entry as small as the whole
    // factor (2^-16 in CoeffToSlot) would lose that many bits.
    let total = if inverse {
        factor * C64::real(1.0 / n as f64)
    } else {
        factor
    };
    let mag = total.abs();
    if !(mag.is_finite() && mag > 0.0) {
        return Err(Error::InvalidParameters(
            "an FFT factor must be finite and nonzero",
        ));
    }
    let each = libm::pow(mag, 1.0 / groups as f64);
    for (g, t) in out.iter_mut().enumerate() {
        let phase = if g == 0 {
            total * C64::real(1.0 / mag)
        } else {
            C64::real(1.0)
        };
        t.scale_by(phase * C64::real(each));
    }
    Ok(out)
}

/// Where a bootstrap's steps leave the ciphertext.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootLevels {
    /// After ModRaise (the top level `L`).
    pub raised: usize,
    /// After CoeffToSlot.
    pub after_cts: usize,
    /// After EvalMod.
    pub after_evalmod: usize,
    /// The output level: what is left for computation.
    pub output: usize,
}

/// The step a bootstrap is in, for progress and per-step timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootStep {
    /// ModRaise and SubSum.
    ModRaise,
    /// CoeffToSlot and the real/imaginary split.
    CoeffToSlot,
    /// EvalMod on the real parts, then on the imaginary parts.
    EvalMod,
    /// SlotToCoeff.
    SlotToCoeff,
    /// Finished.
    Done,
}

/// Operation counts of one bootstrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BootCost {
    /// Key-switched rotations (SubSum, and the baby and giant steps of both FFTs).
    pub rotations: u64,
    /// Conjugations.
    pub conjugations: u64,
    /// Relinearized products (EvalMod).
    pub ct_mults: u64,
    /// The two key switches of sparse-secret encapsulation.
    pub key_switches_extra: u64,
}

impl BootCost {
    /// Key switches: rotations, conjugations and relinearizations.
    pub fn key_switches(&self) -> u64 {
        self.rotations + self.conjugations + self.ct_mults + self.key_switches_extra
    }
}

/// The keys a bootstrap needs, all public (the server holds them): the relinearization,
/// conjugation and rotation keys, and the two keys of sparse-secret encapsulation.
pub struct BootKeys<B: PolyBackend> {
    /// Relinearization, conjugation and Galois keys ([`Bootstrapper::rotations`] and any extra
    /// rotations asked for).
    pub eval: EvaluationKeys<B>,
    /// `s → s'` over `{q_0, p_0}` (`[b, a]`) and `s' → s` over `Q ∪ P`, when encapsulating.
    encapsulation: Option<(LevelZeroKey<B>, SwitchingKey<B>)>,
}

impl<B: PolyBackend> core::fmt::Debug for BootKeys<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BootKeys")
            .field("galois", &self.eval.galois.len())
            .field("encapsulation", &self.encapsulation.is_some())
            .finish_non_exhaustive()
    }
}

impl<B: PolyBackend> BootKeys<B> {
    /// Switching keys held (relinearization, Galois, and the encapsulation pair).
    pub fn count(&self) -> usize {
        usize::from(self.eval.relin.is_some())
            + self.eval.galois.len()
            + 2 * usize::from(self.encapsulation.is_some())
    }

    /// How many of the switching keys are lean ([`crate::rlwe::SwitchingKey::is_lean`]).
    pub fn lean_count(&self) -> usize {
        self.switching_keys().filter(|k| k.is_lean()).count()
    }

    /// The relinearization, Galois and `s' → s` keys.
    fn switching_keys(&self) -> impl Iterator<Item = &SwitchingKey<B>> {
        self.eval
            .relin
            .iter()
            .chain(self.eval.galois.values())
            .chain(self.encapsulation.as_ref().map(|(_, back)| back))
    }

    /// Their bytes in memory (the backend's words, 8 bytes each).
    pub fn memory_bytes(&self, be: &B) -> usize {
        let n = be.params().n();
        let switching: usize = self.switching_keys().map(|k| k.memory_bytes(be)).sum();
        let to = self.encapsulation.as_ref().map_or(0, |(to, _)| {
            (be.buffer_rows(&to.b) + be.buffer_rows(&to.a)) * n * 8
        });
        switching + to
    }

    /// The keys as bytes, for the client to send to the server: the evaluation keys, then the
    /// two encapsulation keys when present, each in the crate's serial format (`compressed`:
    /// every `a` half as its seed, about half the size), behind a small frame (a version byte,
    /// a flag byte, and a little-endian `u64` length before each part).
    pub fn to_bytes(&self, ck: &Ckks<B>, compressed: bool) -> Result<Vec<u8>> {
        let mut parts = vec![ck.serialize_evaluation_keys(&self.eval, compressed)?];
        if let Some((to, back)) = &self.encapsulation {
            parts.push(ck.serialize_level_zero_key(to, compressed)?);
            parts.push(ck.serialize_switching_key(back, compressed)?);
        }
        let mut out = Vec::with_capacity(2 + parts.iter().map(|p| 8 + p.len()).sum::<usize>());
        out.push(BOOT_KEYS_VERSION);
        out.push(u8::from(self.encapsulation.is_some()));
        for p in &parts {
            out.extend_from_slice(&(p.len() as u64).to_le_bytes());
            out.extend_from_slice(p);
        }
        Ok(out)
    }

    /// Decodes [`BootKeys::to_bytes`] under `ck`'s parameters (typed errors for anything
    /// malformed, truncated or made under other parameters). The keys come back whole.
    pub fn from_bytes(ck: &Ckks<B>, bytes: &[u8]) -> Result<Self> {
        let (&version, rest) = bytes.split_first().ok_or(Error::Malformed("empty"))?;
        if version != BOOT_KEYS_VERSION {
            return Err(Error::Malformed("unknown bootstrapping-keys version"));
        }
        let (&flags, mut rest) = rest.split_first().ok_or(Error::Malformed("truncated"))?;
        if flags > 1 {
            return Err(Error::Malformed("unknown bootstrapping-keys flags"));
        }
        let mut part = || -> Result<&[u8]> {
            if rest.len() < 8 {
                return Err(Error::Malformed("truncated"));
            }
            let (len, tail) = rest.split_at(8);
            let len = u64::from_le_bytes(len.try_into().map_err(|_| Error::Malformed("length"))?);
            let len = usize::try_from(len).map_err(|_| Error::Malformed("length"))?;
            if tail.len() < len {
                return Err(Error::Malformed("truncated"));
            }
            let (p, tail) = tail.split_at(len);
            rest = tail;
            Ok(p)
        };
        let eval = ck.deserialize_evaluation_keys(part()?)?;
        let encapsulation = if flags == 1 {
            let to = ck.deserialize_level_zero_key(part()?)?;
            let back = ck.deserialize_switching_key(part()?)?;
            Some((to, back))
        } else {
            None
        };
        if !rest.is_empty() {
            return Err(Error::Malformed("trailing bytes"));
        }
        Ok(Self {
            eval,
            encapsulation,
        })
    }
}

/// Which bootstrapping keys [`Bootstrapper::gen_keys`] makes lean: a lean key's `a` half is
/// dropped as soon as the key is made and regenerated from its seed at every use
/// ([`crate::rlwe::SwitchingKey::shed_a`]), for half its memory and a seed expansion per use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lean {
    /// Every key whole.
    None,
    /// Every Galois and encapsulation key lean (about 2 GB less at `N = 2^16`); the
    /// relinearization key, used by every EvalMod product, stays whole. Same outputs, word for
    /// word.
    All,
    /// As few keys lean as needed for the whole set to fit in this many bytes
    /// ([`BootKeys::memory_bytes`]): first the two used once per bootstrap (the encapsulation's
    /// `s' → s` and the conjugation key), then rotation keys. A typed error when even every key
    /// lean does not fit.
    Budget(usize),
}

/// A bootstrapper for one parameter set: the encoded FFT groups and the EvalMod polynomial.
pub struct Bootstrapper<B: PolyBackend> {
    params: BootParams,
    cts: Vec<EncodedLinearTransform<B>>,
    stc: Vec<EncodedLinearTransform<B>>,
    evalmod: ChebyshevPoly,
    rotations: Vec<i64>,
    levels: BootLevels,
    q0: f64,
}

impl<B: PolyBackend> core::fmt::Debug for Bootstrapper<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Bootstrapper")
            .field("params", &self.params)
            .field("levels", &self.levels)
            .field("rotations", &self.rotations.len())
            .finish()
    }
}

impl<B: PolyBackend> Bootstrapper<B> {
    /// Plans the levels, builds the FFT groups and encodes them at their levels. Fails with a
    /// typed error when the parameter set has too few levels for the settings, when a uniform
    /// ternary secret would be bootstrapped without encapsulation, or (outside `INSECURE_` sets)
    /// when the encapsulation key's modulus `q_0·p_0` exceeds the 128-bit bound of the ephemeral
    /// weight ([`crate::params::max_log_qp_128_sparse`]).
    pub fn new(ck: &Ckks<B>, params: BootParams) -> Result<Self> {
        let p = ck.params();
        params.validate(p)?;
        let n = params.slots;
        let evalmod = evalmod_poly(params.k, params.double_angles, params.degree)?;
        let mod_depth = evalmod.depth() + params.double_angles as usize;
        let top = p.max_level();
        let need = params.cts_levels + mod_depth + params.stc_levels;
        if need > top {
            return Err(Error::InvalidParameters(
                "the parameter set has fewer levels than bootstrapping consumes",
            ));
        }
        // EvalMod rescales by the primes of levels after_cts ..= after_evalmod + 1; they must be
        // near q_0 so that its products come back to scale q_0.
        let q0_bits = libm::log2(p.q()[0].value() as f64);
        let after_cts = top - params.cts_levels;
        if (after_cts - mod_depth + 1..=after_cts)
            .any(|l| (libm::log2(p.q()[l].value() as f64) - q0_bits).abs() > 4.0)
        {
            return Err(Error::InvalidParameters(
                "the EvalMod levels need primes of q_0's size",
            ));
        }
        let levels = BootLevels {
            raised: top,
            after_cts: top - params.cts_levels,
            after_evalmod: top - params.cts_levels - mod_depth,
            output: top - need,
        };
        let q0 = p.q()[0].value() as f64;
        // CoeffToSlot: the slots are gap·decode(M)/q_0 after SubSum (gap = N/2n), so F^{-1} gives
        // gap·(t_lo + i·t_hi); the factor 1/(2K·gap) leaves w = bitrev(t_lo + i·t_hi)/(2K).
        let gap = (p.n() / (2 * n)) as f64;
        let cts_t = fft_groups(
            n,
            params.cts_levels,
            true,
            C64::real(1.0 / (2.0 * params.k * gap)),
        )?;
        // SlotToCoeff on y ≈ sin(2πt) ≈ 2π·2^k·m/q_0 at the EvalMod output scale S_e, relabelled
        // with the input's scale Δ: the factor q_0/(2π·S_e·2^k) makes the result m/Δ.
        let s_e = evalmod_output_scale(ck, &levels, &params, &evalmod, q0);
        let lift = libm::exp2(params.lift_bits(q0) as f64);
        let stc_t = fft_groups(
            n,
            params.stc_levels,
            false,
            C64::real(q0 / (2.0 * PI * s_e * lift)),
        )?;
        let mut rot: BTreeSet<i64> = BTreeSet::new();
        let mut k = n;
        while k < p.max_slots() {
            rot.insert(k as i64);
            k *= 2;
        }
        for t in cts_t.iter().chain(&stc_t) {
            rot.extend(t.rotations());
        }
        let cts = cts_t
            .iter()
            .enumerate()
            .map(|(i, t)| t.encode(ck, levels.raised - i))
            .collect::<Result<Vec<_>>>()?;
        let stc = stc_t
            .iter()
            .enumerate()
            .map(|(i, t)| t.encode(ck, levels.after_evalmod - i))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            params,
            cts,
            stc,
            evalmod,
            rotations: rot.into_iter().collect(),
            levels,
            q0,
        })
    }

    /// The settings.
    pub fn params(&self) -> &BootParams {
        &self.params
    }

    /// The levels a bootstrap passes through.
    pub fn levels(&self) -> BootLevels {
        self.levels
    }

    /// The rotations whose Galois keys a bootstrap needs (it also needs the conjugation key and
    /// the relinearization key).
    pub fn rotations(&self) -> &[i64] {
        &self.rotations
    }

    /// Generates the bootstrapping keys under `sk` (client side): relinearization,
    /// conjugation, a Galois key per rotation of [`Bootstrapper::rotations`] and of `extra`,
    /// and, when encapsulating, a fresh ephemeral sparse secret's two keys (the secret is wiped
    /// when this returns); `lean` chooses which are kept lean ([`Lean::None`]: all whole).
    /// `progress(done, total)` follows the Galois keys.
    pub fn gen_keys(
        &self,
        ck: &Ckks<B>,
        sk: &crate::rlwe::SecretKey,
        extra: &[i64],
        lean: Lean,
        rng: &mut (impl rand_core::RngCore + rand_core::CryptoRng),
        mut progress: impl FnMut(usize, usize),
    ) -> Result<BootKeys<B>> {
        let mut rots = self.rotations.clone();
        rots.extend_from_slice(extra);
        let enc = ck.encoder();
        // The conjugation key first: after the encapsulation's, it is the one used once.
        let mut elts: Vec<u64> = vec![enc.galois_element_conjugate()];
        for &r in &rots {
            let g = enc.galois_element_for_rotation(r);
            if !elts.contains(&g) {
                elts.push(g);
            }
        }
        let total = 1 + elts.len();
        let mut eval = ck.gen_evaluation_keys(sk, &[], false, rng, |_, _| {})?;
        progress(1, total);
        // Keys in shedding order: the encapsulation's `s' → s`, then `elts`.
        let back = usize::from(self.params.ephemeral_weight.is_some());
        let sheddable = back + elts.len();
        let n_lean = match lean {
            Lean::None => 0,
            Lean::All => sheddable,
            Lean::Budget(max) => {
                let be = ck.backend();
                let p = ck.params();
                let whole = eval.relin.as_ref().map_or(0, |k| k.memory_bytes(be));
                let a_bytes = p.dnum() * (p.q().len() + p.p().len()) * p.n() * 8;
                let all = (1 + sheddable) * whole;
                let need = all.saturating_sub(max).div_ceil(a_bytes.max(1));
                if need > sheddable {
                    return Err(Error::InvalidParameters(
                        "the bootstrapping keys do not fit the memory budget even lean",
                    ));
                }
                need
            }
        };
        for (i, g) in elts.into_iter().enumerate() {
            let mut key = ck.gen_galois_key(sk, g, rng)?;
            if back + i < n_lean {
                key.shed_a();
            }
            eval.galois.insert(g, key);
            progress(i + 2, total);
        }
        let encapsulation = match self.params.ephemeral_weight {
            Some(h) => {
                let sparse = ck.rlwe.gen_ephemeral_secret(h as usize, rng);
                let to = ck.rlwe.gen_sparse_switching_key(sk, &sparse, rng)?;
                let mut back = ck.rlwe.gen_switching_key_from(sk, &sparse, rng)?;
                if n_lean > 0 {
                    back.shed_a();
                }
                Some((to, back))
            }
            None => None,
        };
        Ok(BootKeys {
            eval,
            encapsulation,
        })
    }

    /// The number of plaintexts held by the encoded FFT groups.
    pub fn plaintexts(&self) -> usize {
        self.cts
            .iter()
            .chain(&self.stc)
            .map(|t| t.plaintexts())
            .sum()
    }

    /// Their bytes in memory.
    pub fn plaintext_bytes(&self) -> usize {
        self.cts
            .iter()
            .chain(&self.stc)
            .map(|t| t.plaintext_bytes())
            .sum()
    }

    /// Refreshes `ct` (any level, `slots` slots, scale [`BootParams::input_scale`]): the output
    /// sits at [`BootLevels::output`] with the same scale.
    pub fn bootstrap(
        &self,
        ck: &Ckks<B>,
        keys: &BootKeys<B>,
        ct: &Ciphertext<B>,
    ) -> Result<(Ciphertext<B>, BootCost)> {
        self.bootstrap_with(ck, keys, ct, |_| {})
    }

    /// [`Bootstrapper::bootstrap`], calling `step` as each step begins (progress, timing).
    pub fn bootstrap_with(
        &self,
        ck: &Ckks<B>,
        boot_keys: &BootKeys<B>,
        ct: &Ciphertext<B>,
        mut step: impl FnMut(BootStep),
    ) -> Result<(Ciphertext<B>, BootCost)> {
        let keys = &boot_keys.eval;
        if self.params.ephemeral_weight.is_some() != boot_keys.encapsulation.is_some() {
            return Err(Error::InvalidParameters(
                "the bootstrapping keys do not match the settings' encapsulation",
            ));
        }
        let n = self.params.slots;
        if ct.slots() != n {
            return Err(Error::SlotMismatch {
                expected: n,
                found: ct.slots(),
            });
        }
        if ct.degree() != 1 {
            return Err(Error::DegreeMismatch {
                found: ct.degree(),
                expected: 1,
            });
        }
        let delta = self.params.input_scale;
        if (ct.scale() - delta).abs() > 1e-9 * delta {
            return Err(Error::ScaleMismatch {
                left: ct.scale(),
                right: delta,
            });
        }
        let mut cost = BootCost::default();
        step(BootStep::ModRaise);
        let mut low = ck.clone_ct(ct);
        ck.drop_level_assign(&mut low, 0)?;
        ck.mul_int_assign(&mut low, 1i64 << self.params.lift_bits(self.q0))?;
        let mut x = match &boot_keys.encapsulation {
            Some((to, back)) => {
                let sparse = self.switch_level0(ck, &low, to)?;
                let mut raised = self.mod_raise(ck, &sparse)?;
                let [k0, k1] = ck.rlwe.key_switch(&raised.polys[1], raised.level, back)?;
                let top = Basis::q(raised.level + 1);
                ck.backend().add_assign(&mut raised.polys[0], &k0, top);
                raised.polys[1] = k1;
                cost.key_switches_extra += 2;
                raised
            }
            None => self.mod_raise(ck, &low)?,
        };
        let mut k = n;
        while k < ck.params().max_slots() {
            let r = ck.rotate(&x, k as i64, keys)?;
            ck.add_assign(&mut x, &r)?;
            cost.rotations += 1;
            k *= 2;
        }
        step(BootStep::CoeffToSlot);
        for t in &self.cts {
            let (y, c) = t.eval(ck, keys, &x)?;
            cost.rotations += c.baby_rotations + c.giant_rotations;
            x = y;
        }
        // x = w = (t_lo + i·t_hi)/(2K): re = w + w̄ = t_lo/K, im = −i·(w − w̄) = t_hi/K.
        let xc = ck.conjugate(&x, keys)?;
        cost.conjugations += 1;
        let re = ck.add(&x, &xc)?;
        let mut im = ck.sub(&x, &xc)?;
        ck.mul_const_assign(&mut im, C64::new(0.0, -1.0), 1.0)?;
        step(BootStep::EvalMod);
        let target = re.scale();
        let y_re = self.eval_mod(ck, keys, &re, target, &mut cost)?;
        let mut y_im = self.eval_mod(ck, keys, &im, target, &mut cost)?;
        ck.mul_const_assign(&mut y_im, C64::new(0.0, 1.0), 1.0)?;
        let mut y = ck.add(&y_re, &y_im)?;
        // Relabel: the FFT's factor q_0/(2π·S_e) assumed the planned S_e.
        let planned = evalmod_output_scale(ck, &self.levels, &self.params, &self.evalmod, self.q0);
        y.scale = delta * (y.scale / planned);
        step(BootStep::SlotToCoeff);
        for t in &self.stc {
            let (z, c) = t.eval(ck, keys, &y)?;
            cost.rotations += c.baby_rotations + c.giant_rotations;
            y = z;
        }
        step(BootStep::Done);
        Ok((y, cost))
    }

    /// EvalMod: the interpolant, then the double angles (`y ← 2y² − 1`, rescaled).
    fn eval_mod(
        &self,
        ck: &Ckks<B>,
        keys: &EvaluationKeys<B>,
        x: &Ciphertext<B>,
        target: f64,
        cost: &mut BootCost,
    ) -> Result<Ciphertext<B>> {
        let (mut y, c) = self.evalmod.eval(ck, keys, x, target)?;
        cost.ct_mults += c.ct_mults;
        for _ in 0..self.params.double_angles {
            let mut sq = ck.mul_relin(&y, &y, keys)?;
            cost.ct_mults += 1;
            ck.mul_int_assign(&mut sq, 2)?;
            ck.add_const_assign(&mut sq, C64::real(-1.0))?;
            ck.rescale_assign(&mut sq)?;
            y = sq;
        }
        Ok(y)
    }

    /// The level-0 key switch `s → s'` with the one-digit key over `{q_0, p_0}`: `c_1` lifted
    /// to `p_0` (the first digit of the gadget decomposition at level 0), multiplied by the key,
    /// divided by `p_0` with rounding.
    fn switch_level0(
        &self,
        ck: &Ckks<B>,
        ct: &Ciphertext<B>,
        key: &LevelZeroKey<B>,
    ) -> Result<Ciphertext<B>> {
        if key.params_id != ck.params().id() {
            return Err(Error::ParameterMismatch);
        }
        let be = ck.backend();
        let k = ck.params().p().len();
        let mut digits = [be.alloc(1 + k)];
        be.decompose(&ct.polys[1], 0, &mut digits);
        let ext = Basis::qp(1, 1);
        let mut out = Vec::with_capacity(2);
        for part in [&key.b, &key.a] {
            let mut prod = be.alloc(2);
            be.mul(&digits[0], part, &mut prod, ext);
            let mut down = be.alloc(1);
            be.mod_down_p0(&prod, 0, &mut down);
            out.push(down);
        }
        be.add_assign(&mut out[0], &ct.polys[0], Basis::q(1));
        Ok(Ciphertext {
            params_id: ct.params_id,
            polys: out,
            level: 0,
            scale: ct.scale,
            slots: ct.slots,
            seed: None,
        })
    }

    /// ModRaise: the level-0 residues lifted centred to every prime of `Q_L`, labelled with
    /// scale `q_0`.
    fn mod_raise(&self, ck: &Ckks<B>, ct: &Ciphertext<B>) -> Result<Ciphertext<B>> {
        let p = ck.params();
        let be = ck.backend();
        let nn = p.n();
        let q0 = p.q()[0].value();
        let top = p.max_level();
        let mut polys = Vec::with_capacity(2);
        for poly in &ct.polys {
            let mut row = be.alloc(1);
            be.copy_rows(poly, Basis::q(ct.level() + 1), &mut row, Basis::q(1));
            be.intt(&mut row, Basis::q(1));
            let mut host = vec![0u64; nn];
            be.download(&row, &mut host)?;
            let centred: Vec<i64> = host
                .iter()
                .map(|&v| {
                    if v > q0 / 2 {
                        v as i64 - q0 as i64
                    } else {
                        v as i64
                    }
                })
                .collect();
            let mut raised = be.upload_small(&centred, Basis::q(top + 1));
            be.ntt(&mut raised, Basis::q(top + 1));
            polys.push(raised);
        }
        Ok(Ciphertext {
            params_id: p.id(),
            polys,
            level: top,
            scale: q0 as f64,
            slots: ct.slots(),
            seed: None,
        })
    }
}

/// The scale EvalMod leaves: the interpolant lands on its target (the CoeffToSlot output's
/// scale, `q_0`), then each double angle maps `S ↦ S²/q_ℓ` at its level.
fn evalmod_output_scale<B: PolyBackend>(
    ck: &Ckks<B>,
    levels: &BootLevels,
    params: &BootParams,
    evalmod: &ChebyshevPoly,
    q0: f64,
) -> f64 {
    let mut s = q0;
    let mut level = levels.after_cts - evalmod.depth();
    for _ in 0..params.double_angles {
        s = s * s / ck.rescale_prime(level);
        level -= 1;
    }
    s
}
