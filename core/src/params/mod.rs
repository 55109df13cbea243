//! CKKS parameters: an unchecked, serializable [`CkksParamsLiteral`] becomes an immutable,
//! validated [`CkksParams`] (shared behind an `Arc`), after Lattigo's `ParametersLiteral`.
//!
//! Validation refuses any set whose `log2(QP)` exceeds the bound for 128-bit classical security
//! of its secret distribution, unless the set's name starts with `INSECURE_`: a uniform ternary
//! secret is checked against the HomomorphicEncryption.org Security Standard ([`max_log_qp_128`]),
//! a sparse ternary secret against its own table by Hamming weight and ring degree
//! ([`SPARSE_BOUNDS_128`], [`max_log_qp_128_sparse`]): sparse secrets are weaker at the same
//! modulus, so the dense bound does not apply to them.

mod named;
pub use named::*;

use crate::error::{Error, Result};
use crate::math::{primes, Modulus, NttTable};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The distribution of the secret key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecretDistribution {
    /// Uniform in `{-1, 0, 1}^N`: the distribution the HE Standard tables assume.
    UniformTernary,
    /// Exactly `h` non-zero entries in `{-1, 1}`. Lower `h` means lower security at the same
    /// modulus: outside `INSECURE_` sets, `log2(QP)` is checked against the sparse-secret table
    /// ([`max_log_qp_128_sparse`]), and a weight or ring degree the table does not cover is
    /// refused.
    SparseTernary {
        /// Hamming weight.
        h: u32,
    },
}

/// The key-switching error `≈ N·α·σ·Q_j/P` may reach at most `2^MAX_KEYSWITCH_NOISE_BITS`
/// (coefficient units) before a set is refused: validation requires
/// `log2 P ≥ max_j log2 Q_j + log2(N·α) − MAX_KEYSWITCH_NOISE_BITS`.
pub const MAX_KEYSWITCH_NOISE_BITS: f64 = 12.0;

/// Headroom, in bits, of a level's special primes over its largest gadget digit beyond
/// `log2(N·α·σ)`: the key-switching error `N·α·σ·Q_j/P_level` stays below `2^-4` coefficient units,
/// under the ModDown's own rounding (at least `1/2`). See [`CkksParams::special_at`].
pub const KEYSWITCH_HEADROOM_BITS: f64 = 4.0;

/// The special-prime count of every level ([`CkksParams::special_at`]): the fewest leading special
/// primes whose product exceeds the level's largest digit by `min(top_margin, log2(N·α·σ) +
/// KEYSWITCH_HEADROOM_BITS)` bits, where `top_margin = log2 P − max_j log2 Q_j` at the top level.
fn special_counts(
    log_n: u32,
    q: &[Modulus],
    p: &[Modulus],
    alpha: usize,
    top_margin: f64,
) -> Vec<usize> {
    let bits = |m: &Modulus| libm::log2(m.value() as f64);
    let margin = top_margin.min(
        log_n as f64
            + libm::log2(alpha as f64)
            + libm::log2(crate::math::sampling::SIGMA)
            + KEYSWITCH_HEADROOM_BITS,
    );
    (0..q.len())
        .map(|level| {
            let digit = (0..=level)
                .step_by(alpha)
                .map(|s| {
                    q[s..(s + alpha).min(level + 1)]
                        .iter()
                        .map(bits)
                        .sum::<f64>()
                })
                .fold(0.0, f64::max);
            let mut log_p = 0.0;
            let mut k = 0;
            while k < p.len() && (k == 0 || log_p < digit + margin) {
                log_p += bits(&p[k]);
                k += 1;
            }
            k
        })
        .collect()
}

/// Unchecked CKKS parameters, as written in a file or in code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CkksParamsLiteral {
    /// Name of the set; `INSECURE_*` lifts the security check.
    pub name: String,
    /// `log2 N`, from 12 to 17 (10 and 11 only for `INSECURE_` sets).
    pub log_n: u32,
    /// Bit sizes of the ciphertext primes `q_0, q_1, …, q_L`. Primes whose size equals
    /// `log_default_scale` are chosen nearest to `2^log_default_scale` (scaling primes).
    pub log_q: Vec<u32>,
    /// Bit sizes of the special primes `p_0, …, p_{k-1}` for hybrid key switching.
    pub log_p: Vec<u32>,
    /// Number of gadget digits `dnum`; `None` picks `ceil((L+1) / k)`.
    pub dnum: Option<usize>,
    /// `log2` of the default scale `Δ`.
    pub log_default_scale: u32,
    /// Secret distribution.
    pub secret: SecretDistribution,
    /// Error standard deviation; must be 3.2 (the HE Standard value).
    pub sigma: f64,
}

/// Validated, immutable CKKS parameters with their NTT tables. Cheap to clone.
#[derive(Clone)]
pub struct CkksParams(Arc<Inner>);

struct Inner {
    literal: CkksParamsLiteral,
    q: Vec<Modulus>,
    p: Vec<Modulus>,
    tables: Vec<NttTable>,
    dnum: usize,
    alpha: usize,
    log_qp: f64,
    special_at: Vec<usize>,
    id: u64,
}

impl core::fmt::Debug for CkksParams {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CkksParams")
            .field("name", &self.0.literal.name)
            .field("log_n", &self.0.literal.log_n)
            .field("levels", &self.max_level())
            .field("special_primes", &self.0.p.len())
            .field("dnum", &self.0.dnum)
            .field("log_qp", &self.0.log_qp)
            .finish()
    }
}

impl PartialEq for CkksParams {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id && self.0.q == other.0.q && self.0.p == other.0.p
    }
}

/// The HE Standard's largest `log2(QP)` for 128-bit classical security, uniform ternary secret,
/// σ = 3.2: Albrecht et al., "Homomorphic Encryption Security Standard", HomomorphicEncryption.org,
/// 2018, Table 1 (N = 2^10 … 2^15). The standard stops at 2^15; for 2^16 and 2^17 we use the
/// common extrapolation (each doubling of N doubles the bound, less one bit: 1761 and 3521), the
/// values used by Lattigo and OpenFHE for those degrees.
pub fn max_log_qp_128(log_n: u32) -> Option<f64> {
    Some(match log_n {
        10 => 27.0,
        11 => 54.0,
        12 => 109.0,
        13 => 218.0,
        14 => 438.0,
        15 => 881.0,
        16 => 1761.0,
        17 => 3521.0,
        _ => return None,
    })
}

/// One row of the sparse-secret table: a ring degree, a Hamming weight and the largest `log2` of
/// the modulus that a published estimate puts at 128-bit classical security for a secret of that
/// weight (error σ = 3.2), with where it comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SparseBound {
    /// `log2 N`.
    pub log_n: u32,
    /// Hamming weight `h` of the secret.
    pub h: u32,
    /// The largest `log2` of the modulus (`QP` for a set's keys, `q_0·p_0` for an encapsulation
    /// key) published as 128-bit for this `N` and `h`.
    pub max_log_qp: f64,
    /// Where the figure is published.
    pub source: &'static str,
}

/// The sparse-secret 128-bit table, separate from the dense HE-Standard one ([`max_log_qp_128`]).
/// Every row is a figure its source publishes as at least 128-bit classical security (σ = 3.2);
/// none is extrapolated. The rows:
///
/// - `h = 192`, `N = 2^16`: 1553, the largest modulus among Lattigo's 128-bit bootstrapping sets
///   with a weight-192 main secret at `N = 2^16` (`N16QP1546H192H32`, `N16QP1547H192H32`,
///   `N16QP1553H192H32`, `DefaultParametersSparse` in Lattigo v5,
///   `he/hefloat/bootstrapping/default_parameter.go`; the sets of Bossuat, Troncoso-Pastoriza and
///   Hubaux, "Bootstrapping for Approximate Homomorphic Encryption with Negligible
///   Failure-Probability by Using Sparse-Secret Encapsulation", ACNS 2022, eprint 2022/024).
/// - `h = 192`, `N = 2^15`: 768, the same source's `N15QP768H192H32`.
/// - `h = 32`, `N = 2^16`: 121, the modulus of the encapsulation key to the weight-32 ephemeral
///   secret that Lattigo v5 documents as over 128-bit (`EphemeralSecretWeight`, "32, which ensure
///   over 128-bit security for an evaluation key of modulus 121 bits", in
///   `he/hefloat/bootstrapping/parameters_literal.go`; the same paper).
///
/// A secret of weight `h` is checked against the row of the largest weight `h' ≤ h` at its `N`
/// (a denser secret is no easier to attack, up to the dense ternary bound, which also caps it).
pub const SPARSE_BOUNDS_128: &[SparseBound] = &[
    SparseBound {
        log_n: 15,
        h: 192,
        max_log_qp: 768.0,
        source: "Lattigo v5 N15QP768H192H32 (Bossuat et al., eprint 2022/024)",
    },
    SparseBound {
        log_n: 16,
        h: 32,
        max_log_qp: 121.0,
        source: "Lattigo v5 EphemeralSecretWeight = 32: 128-bit at a 121-bit modulus \
                 (Bossuat et al., eprint 2022/024)",
    },
    SparseBound {
        log_n: 16,
        h: 192,
        max_log_qp: 1553.0,
        source: "Lattigo v5 N16QP1553H192H32 (Bossuat et al., eprint 2022/024)",
    },
];

/// The largest `log2` of the modulus for 128-bit classical security with a sparse ternary secret
/// of Hamming weight `h` at `N = 2^log_n`: the bound of the [`SPARSE_BOUNDS_128`] row with the
/// largest weight not above `h` at that `N`, never more than the dense bound
/// ([`max_log_qp_128`]). `None` when no row covers `h` and `N` (such a secret is refused outside
/// `INSECURE_` sets).
pub fn max_log_qp_128_sparse(h: u32, log_n: u32) -> Option<f64> {
    let row = SPARSE_BOUNDS_128
        .iter()
        .filter(|r| r.log_n == log_n && r.h <= h)
        .max_by_key(|r| r.h)?;
    let dense = max_log_qp_128(log_n)?;
    Some(row.max_log_qp.min(dense))
}

/// The largest `log2(QP)` for 128-bit classical security with secret distribution `secret` at
/// `N = 2^log_n`: the HE-Standard table for a uniform ternary secret ([`max_log_qp_128`]), the
/// sparse-secret table for a sparse one ([`max_log_qp_128_sparse`]).
pub fn max_log_qp_128_for(secret: SecretDistribution, log_n: u32) -> Option<f64> {
    match secret {
        SecretDistribution::UniformTernary => max_log_qp_128(log_n),
        SecretDistribution::SparseTernary { h } => max_log_qp_128_sparse(h, log_n),
    }
}

/// A 64-bit FNV-1a digest of the ring degree, the primes, the gadget and the secret distribution:
/// a parameter set's identity on the wire (keys made under another `dnum` or secret distribution
/// are refused, not misused).
fn digest(
    log_n: u32,
    q: &[Modulus],
    p: &[Modulus],
    dnum: usize,
    secret: SecretDistribution,
) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut eat = |x: u64| {
        for b in x.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    };
    eat(log_n as u64);
    for m in q.iter().chain(p) {
        eat(m.value());
    }
    eat(q.len() as u64);
    eat(dnum as u64);
    eat(match secret {
        SecretDistribution::UniformTernary => 0,
        SecretDistribution::SparseTernary { h } => 1 + h as u64,
    });
    h
}

impl CkksParamsLiteral {
    /// Whether the name marks the set as insecure.
    pub fn is_insecure(&self) -> bool {
        self.name.starts_with("INSECURE_")
    }

    /// Validates the literal, generates its primes and NTT tables.
    pub fn validate(&self) -> Result<CkksParams> {
        let insecure = self.is_insecure();
        let lo = if insecure { 10 } else { 12 };
        if !(lo..=17).contains(&self.log_n) {
            return Err(Error::InvalidParameters("log_n must be in 12..=17"));
        }
        if self.log_q.is_empty() || self.log_q.len() > 64 {
            return Err(Error::InvalidParameters("log_q must hold 1 to 64 primes"));
        }
        if self.log_p.is_empty() || self.log_p.len() > 16 {
            return Err(Error::InvalidParameters(
                "log_p must hold 1 to 16 special primes",
            ));
        }
        if self
            .log_q
            .iter()
            .chain(&self.log_p)
            .any(|&b| !(20..=61).contains(&b))
        {
            return Err(Error::InvalidParameters(
                "prime sizes must be 20 to 61 bits",
            ));
        }
        if !(20..=60).contains(&self.log_default_scale) {
            return Err(Error::InvalidParameters(
                "log_default_scale must be 20 to 60",
            ));
        }
        if self.log_q[0] <= self.log_default_scale {
            return Err(Error::InvalidParameters(
                "q_0 must be larger than the default scale",
            ));
        }
        if !(self.sigma == crate::math::sampling::SIGMA) {
            return Err(Error::InvalidParameters("sigma must be 3.2"));
        }
        let n = 1usize << self.log_n;
        match self.secret {
            SecretDistribution::UniformTernary => {}
            SecretDistribution::SparseTernary { h } => {
                if h == 0 || h as usize > n {
                    return Err(Error::InvalidParameters("Hamming weight must be in 1..=N"));
                }
                if !insecure && max_log_qp_128_sparse(h, self.log_n).is_none() {
                    return Err(Error::InvalidParameters(
                        "no published 128-bit bound for a sparse secret of this weight at this N \
                         (see SPARSE_BOUNDS_128); use a uniform ternary secret or an INSECURE_ name",
                    ));
                }
            }
        }
        let levels = self.log_q.len();
        let k = self.log_p.len();
        let dnum = self.dnum.unwrap_or(levels.div_ceil(k));
        if dnum == 0 || dnum > levels {
            return Err(Error::InvalidParameters("dnum must be in 1..=L+1"));
        }
        let alpha = levels.div_ceil(dnum);
        // Only ceil((L+1)/alpha) digits are non-empty: fewer than asked when dnum does not divide.
        let dnum = levels.div_ceil(alpha);

        // Primes: scaling primes nearest 2^scale; the others as large as their size allows.
        let mut chosen: Vec<u64> = Vec::new();
        let mut q_vals = Vec::with_capacity(levels);
        let scaling = self
            .log_q
            .iter()
            .skip(1)
            .filter(|&&b| b == self.log_default_scale)
            .count();
        let near = primes::ntt_primes_near(self.log_default_scale, n, scaling, &[])
            .ok_or(Error::InvalidParameters("not enough scaling primes"))?;
        let mut near_it = near.iter();
        chosen.extend_from_slice(&near);
        for (i, &b) in self.log_q.iter().enumerate() {
            if i > 0 && b == self.log_default_scale {
                q_vals.push(*near_it.next().unwrap());
            } else {
                let v = primes::ntt_primes(b, n, 1, &chosen)
                    .ok_or(Error::InvalidParameters("not enough primes of that size"))?[0];
                chosen.push(v);
                q_vals.push(v);
            }
        }
        let mut p_vals = Vec::with_capacity(k);
        for &b in &self.log_p {
            let v = primes::ntt_primes(b, n, 1, &chosen).ok_or(Error::InvalidParameters(
                "not enough special primes of that size",
            ))?[0];
            chosen.push(v);
            p_vals.push(v);
        }
        let q: Vec<Modulus> = q_vals.iter().map(|&v| Modulus::new(v).unwrap()).collect();
        let p: Vec<Modulus> = p_vals.iter().map(|&v| Modulus::new(v).unwrap()).collect();
        let log_qp: f64 = q
            .iter()
            .chain(&p)
            .map(|m| libm::log2(m.value() as f64))
            .sum();
        let max = max_log_qp_128_for(self.secret, self.log_n).unwrap_or(0.0);
        if log_qp > max && !insecure {
            return Err(Error::InsecureParameters {
                log_qp,
                max_log_qp: max,
                log_n: self.log_n,
            });
        }
        let tables = q
            .iter()
            .chain(&p)
            .map(|m| NttTable::new(*m, self.log_n).ok_or(Error::InvalidParameters("NTT table")))
            .collect::<Result<Vec<_>>>()?;
        // Key switching divides the digit products by P: a P short of the largest digit
        // (by log2(N·alpha) plus margin) makes every relinearization and rotation garbage.
        let log_p: f64 = p.iter().map(|m| libm::log2(m.value() as f64)).sum();
        let max_digit: f64 = (0..dnum)
            .map(|j| {
                q[j * alpha..((j + 1) * alpha).min(levels)]
                    .iter()
                    .map(|m| libm::log2(m.value() as f64))
                    .sum::<f64>()
            })
            .fold(0.0, f64::max);
        let need =
            max_digit + self.log_n as f64 + libm::log2(alpha as f64) - MAX_KEYSWITCH_NOISE_BITS;
        if log_p < need {
            return Err(Error::InvalidParameters(
                "special primes too small for the gadget digits (raise log_p or dnum)",
            ));
        }
        let special_at = special_counts(self.log_n, &q, &p, alpha, log_p - max_digit);
        let id = digest(self.log_n, &q, &p, dnum, self.secret);
        Ok(CkksParams(Arc::new(Inner {
            literal: self.clone(),
            q,
            p,
            tables,
            dnum,
            alpha,
            log_qp,
            special_at,
            id,
        })))
    }
}

impl CkksParams {
    /// The literal this set was validated from.
    pub fn literal(&self) -> &CkksParamsLiteral {
        &self.0.literal
    }
    /// The set's name.
    pub fn name(&self) -> &str {
        &self.0.literal.name
    }
    /// `log2 N`.
    pub fn log_n(&self) -> u32 {
        self.0.literal.log_n
    }
    /// The ring degree `N`.
    pub fn n(&self) -> usize {
        1 << self.0.literal.log_n
    }
    /// The maximum number of complex slots, `N/2`.
    pub fn max_slots(&self) -> usize {
        self.n() / 2
    }
    /// The top level `L` (a fresh ciphertext has `L + 1` primes).
    pub fn max_level(&self) -> usize {
        self.0.q.len() - 1
    }
    /// The ciphertext primes `q_0..q_L`.
    pub fn q(&self) -> &[Modulus] {
        &self.0.q
    }
    /// The special primes `p_0..p_{k-1}`.
    pub fn p(&self) -> &[Modulus] {
        &self.0.p
    }
    /// All primes in row order: `q_0..q_L, p_0..p_{k-1}`.
    pub fn all_moduli(&self) -> impl Iterator<Item = &Modulus> {
        self.0.q.iter().chain(self.0.p.iter())
    }
    /// The canonical NTT table of the prime with global index `i` (Q first, then P).
    pub fn ntt_table(&self, i: usize) -> &NttTable {
        &self.0.tables[i]
    }
    /// The number of gadget digits.
    pub fn dnum(&self) -> usize {
        self.0.dnum
    }
    /// Primes per gadget digit (`alpha = ceil((L+1)/dnum)`).
    pub fn alpha(&self) -> usize {
        self.0.alpha
    }
    /// How many special primes key switching uses at `level`: the first `special_at(level)` of
    /// `p_0..p_{k-1}` (`P_level`, their product). It is the fewest primes that keep the
    /// key-switching error of the level's largest digit at most `2^-4` of a coefficient unit, or,
    /// for a set whose top level has less margin than that, no smaller a margin than the top's
    /// ([`KEYSWITCH_HEADROOM_BITS`]). Low levels have small digits and need fewer: a level-0 key
    /// switch at N = 2^16 with four special primes uses two; a set whose `P` is much larger than
    /// its digits (the bootstrapping sets) narrows at most levels, the top included if its margin
    /// exceeds the headroom. Keys are made over all of `P`; the gadget digits are multiplied by
    /// `(P/P_level)^{-1}` so that the key's `P` factor becomes `P_level`.
    pub fn special_at(&self, level: usize) -> usize {
        self.0.special_at[level.min(self.0.special_at.len() - 1)]
    }
    /// Number of digits covering a ciphertext at `level`.
    pub fn digits_at(&self, level: usize) -> usize {
        (level + 1).div_ceil(self.0.alpha)
    }
    /// The default scale `2^log_default_scale`.
    pub fn default_scale(&self) -> f64 {
        libm::ldexp(1.0, self.0.literal.log_default_scale as i32)
    }
    /// The secret distribution.
    pub fn secret_distribution(&self) -> SecretDistribution {
        self.0.literal.secret
    }
    /// `log2(QP)`.
    pub fn log_qp(&self) -> f64 {
        self.0.log_qp
    }
    /// A digest identifying the ring and primes (carried by serialized objects).
    pub fn id(&self) -> u64 {
        self.0.id
    }
    /// `log2(Q_level)`.
    pub fn log_q_at(&self, level: usize) -> f64 {
        self.0.q[..=level]
            .iter()
            .map(|m| libm::log2(m.value() as f64))
            .sum()
    }
    /// `log2(P)`.
    pub fn log_p(&self) -> f64 {
        self.0.p.iter().map(|m| libm::log2(m.value() as f64)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The named 128-bit sets.
    fn secure_sets() -> [CkksParamsLiteral; 6] {
        [
            ckks_128_logn14(),
            ckks_128_logn14_cnn(),
            ckks_128_logn15(),
            ckks_128_logn16(),
            ckks_128_logn16_deep(),
            ckks_128_logn16_boot(),
        ]
    }

    #[test]
    fn named_sets_validate() {
        for lit in secure_sets() {
            let p = lit.validate().unwrap();
            assert!(p.log_qp() <= max_log_qp_128_for(p.secret_distribution(), p.log_n()).unwrap());
            assert!(p.name().contains(&alloc::format!("LOGN{}", p.log_n())));
        }
    }

    #[test]
    fn insecure_is_refused_unless_named() {
        let mut lit = ckks_128_logn14();
        lit.log_q = alloc::vec![60, 50, 50, 50, 50, 50, 50, 50];
        lit.name = "TOO_BIG".into();
        assert!(matches!(
            lit.validate(),
            Err(Error::InsecureParameters { .. })
        ));
        lit.name = "INSECURE_TOO_BIG".into();
        assert!(lit.validate().is_ok());
        let mut sparse = ckks_128_logn14();
        sparse.secret = SecretDistribution::SparseTernary { h: 64 };
        assert!(matches!(
            sparse.validate(),
            Err(Error::InvalidParameters(_))
        ));
    }

    /// The sparse-secret table is its own: the old bootstrapping set (weight 192 at
    /// `log2(QP) = 1720`, under the dense bound 1761 but over the sparse one) is refused, the
    /// dense set that replaces it validates, a weight the table does not cover is refused, and
    /// `INSECURE_` sets still pass.
    #[test]
    fn sparse_secrets_are_checked_against_their_own_table() {
        // The table's lookups: the row of the largest weight not above h, capped by the dense
        // bound; nothing for a weight or N without a row.
        assert_eq!(max_log_qp_128_sparse(192, 16), Some(1553.0));
        assert_eq!(max_log_qp_128_sparse(32768, 16), Some(1553.0));
        assert_eq!(max_log_qp_128_sparse(64, 16), Some(121.0));
        assert_eq!(max_log_qp_128_sparse(32, 16), Some(121.0));
        assert_eq!(max_log_qp_128_sparse(31, 16), None);
        assert_eq!(max_log_qp_128_sparse(192, 15), Some(768.0));
        assert_eq!(max_log_qp_128_sparse(192, 14), None);
        for r in SPARSE_BOUNDS_128 {
            assert!(r.max_log_qp <= max_log_qp_128(r.log_n).unwrap());
            assert!(!r.source.is_empty());
        }
        assert_eq!(
            max_log_qp_128_for(SecretDistribution::UniformTernary, 16),
            Some(1761.0)
        );

        // The old set: h = 192 with the bootstrapping chain of log2(QP) = 1720 (q_0 60 bits, 13
        // primes of 40 bits, 10 of 60, nine 60-bit special primes, 3 digits).
        let mut old_q = alloc::vec![60u32];
        old_q.extend(core::iter::repeat_n(40, 13));
        old_q.extend(core::iter::repeat_n(60, 10));
        let mut old = CkksParamsLiteral {
            name: "CKKS_128_LOGN16_BOOT_H192_LOGQP1720".into(),
            log_n: 16,
            log_q: old_q,
            log_p: alloc::vec![60; 9],
            dnum: Some(3),
            log_default_scale: 40,
            secret: SecretDistribution::SparseTernary { h: 192 },
            sigma: crate::math::sampling::SIGMA,
        };
        match old.validate() {
            Err(Error::InsecureParameters {
                log_qp,
                max_log_qp,
                log_n,
            }) => {
                assert_eq!((max_log_qp, log_n), (1553.0, 16));
                assert!(log_qp > 1719.0 && log_qp <= 1720.0, "{log_qp}");
            }
            other => panic!("the h = 192, 1720-bit set must be refused: {other:?}"),
        }
        // With a dense secret the same chain is within the HE-Standard bound, and so is the
        // named set that replaces it (the same chain with 61-bit q_0, CoeffToSlot and EvalMod
        // primes).
        let mut dense_old = old.clone();
        dense_old.secret = SecretDistribution::UniformTernary;
        dense_old.name = "CKKS_128_LOGN16_BOOT_LOGQP1720".into();
        assert!(dense_old.validate().is_ok());
        let new = ckks_128_logn16_boot().validate().unwrap();
        assert_eq!(
            new.secret_distribution(),
            SecretDistribution::UniformTernary
        );
        assert_eq!(new.name(), "CKKS_128_LOGN16_BOOT_LOGQP1731");
        assert!(new.log_qp() > 1730.0 && new.log_qp() <= 1731.0);
        assert!(new.log_qp() <= max_log_qp_128(16).unwrap());
        // Its sparse twin (weight 192) is refused, like the old set.
        let mut sparse_new = ckks_128_logn16_boot();
        sparse_new.secret = SecretDistribution::SparseTernary { h: 192 };
        assert!(matches!(
            sparse_new.validate(),
            Err(Error::InsecureParameters { .. })
        ));
        // Named INSECURE_, the old set passes.
        old.name = "INSECURE_LOGN16_BOOT_H192_LOGQP1720".into();
        assert!(old.validate().is_ok());

        // A weight-192 set within the sparse bound (Lattigo's N16QP1546H192H32 chain: 60 + 9·40
        // ciphertext bits, five 61-bit special primes) validates.
        let within = CkksParamsLiteral {
            name: "CKKS_128_LOGN16_H192_LOGQP725".into(),
            log_n: 16,
            log_q: alloc::vec![60, 40, 40, 40, 40, 40, 40, 40, 40, 40],
            log_p: alloc::vec![61; 5],
            dnum: None,
            log_default_scale: 40,
            secret: SecretDistribution::SparseTernary { h: 192 },
            sigma: crate::math::sampling::SIGMA,
        };
        assert!(within.validate().is_ok());
        // A weight below every row at this N is refused, whatever the modulus.
        let mut sparser = within.clone();
        sparser.secret = SecretDistribution::SparseTernary { h: 16 };
        assert!(matches!(
            sparser.validate(),
            Err(Error::InvalidParameters(_))
        ));
        // Weight 64 falls under the h = 32 row: 121 bits, far below this chain.
        sparser.secret = SecretDistribution::SparseTernary { h: 64 };
        assert!(matches!(
            sparser.validate(),
            Err(Error::InsecureParameters { max_log_qp, .. }) if max_log_qp == 121.0
        ));
        // The INSECURE_ test sets, sparse (h = 64 at N = 2^12, which no row covers) or dense.
        for lit in [insecure_logn12_boot(), insecure_logn12(), insecure_logn10()] {
            assert!(lit.is_insecure());
            assert!(lit.validate().is_ok(), "{}", lit.name);
        }
    }

    #[test]
    fn bad_literals_are_refused() {
        let base = ckks_128_logn14();
        let mut l = base.clone();
        l.log_n = 18;
        assert!(l.validate().is_err());
        let mut l = base.clone();
        l.log_q = alloc::vec![];
        assert!(l.validate().is_err());
        let mut l = base.clone();
        l.log_q[1] = 62;
        assert!(l.validate().is_err());
        let mut l = base.clone();
        l.sigma = 1.0;
        assert!(l.validate().is_err());
        let mut l = base.clone();
        l.dnum = Some(0);
        assert!(l.validate().is_err());
        let mut l = base;
        l.log_q[0] = 30;
        assert!(l.validate().is_err());
    }

    #[test]
    fn special_primes_per_level_are_the_fewest_that_keep_the_margin() {
        // N = 2^16, L = 16, four 60-bit special primes, α = 4: a level-0 digit is q_0 (60 bits),
        // so two special primes clear it by more than log2(N·α·σ) + 4 ≈ 23.7 bits; level 1 needs
        // three (100 + 23.7 > 120), level 2 three (140 + 23.7 ≤ 180), and from level 3 the first
        // digit is full and every level uses all four.
        let p = ckks_128_logn16().validate().unwrap();
        let got: Vec<usize> = (0..=p.max_level()).map(|l| p.special_at(l)).collect();
        let mut want = alloc::vec![2, 3, 3];
        want.resize(p.max_level() + 1, 4);
        assert_eq!(got, want);
        // Every named set: within 1..=k, never decreasing with the level, and each level's margin
        // at least the smaller of the top's and the stated headroom, with no prime to spare (a set
        // whose `P` clears its largest digit by more than the headroom narrows even at the top).
        let insecure = [insecure_logn12(), insecure_logn10(), insecure_logn12_boot()];
        for lit in secure_sets().into_iter().chain(insecure) {
            let p = lit.validate().unwrap();
            let k = p.p().len();
            let bits = |m: &Modulus| libm::log2(m.value() as f64);
            let digit = |l: usize| {
                (0..=l)
                    .step_by(p.alpha())
                    .map(|s| p.q()[s..(s + p.alpha()).min(l + 1)].iter().map(bits).sum())
                    .fold(0.0, f64::max)
            };
            let log_p = |kl: usize| p.p()[..kl].iter().map(bits).sum::<f64>();
            let top = log_p(k) - digit(p.max_level());
            let headroom = p.log_n() as f64
                + libm::log2(p.alpha() as f64 * crate::math::sampling::SIGMA)
                + KEYSWITCH_HEADROOM_BITS;
            for l in 0..=p.max_level() {
                let kl = p.special_at(l);
                assert!((1..=k).contains(&kl));
                assert!(l == 0 || kl >= p.special_at(l - 1));
                assert!(
                    log_p(kl) - digit(l) >= top.min(headroom) - 1e-9,
                    "level {l}"
                );
                // And no fewer primes would do.
                assert!(
                    kl == 1 || log_p(kl - 1) - digit(l) < top.min(headroom),
                    "level {l}"
                );
            }
        }
    }
}
