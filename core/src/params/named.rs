//! Named parameter sets. Each name states the security level, `log2 N` and `log2(QP)`;
//! test-only sets start with `INSECURE_`.

use super::{CkksParamsLiteral, SecretDistribution};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// A set with 60-bit special primes and scale `2^40`, from its ciphertext prime sizes.
fn set(
    name: &str,
    log_n: u32,
    log_q: Vec<u32>,
    special: usize,
    dnum: usize,
    secret: SecretDistribution,
) -> CkksParamsLiteral {
    CkksParamsLiteral {
        name: String::from(name),
        log_n,
        log_q,
        log_p: vec![60; special],
        dnum: Some(dnum),
        log_default_scale: 40,
        secret,
        sigma: crate::math::sampling::SIGMA,
    }
}

/// A uniform-ternary set: `q_0` 60 bits, then `levels` 40-bit scaling primes.
fn literal(
    name: &str,
    log_n: u32,
    levels: usize,
    special: usize,
    dnum: usize,
) -> CkksParamsLiteral {
    let mut log_q: Vec<u32> = vec![60];
    log_q.extend(core::iter::repeat_n(40, levels));
    set(
        name,
        log_n,
        log_q,
        special,
        dnum,
        SecretDistribution::UniformTernary,
    )
}

/// N = 2^14, 6 levels (q_0 60 bits, six 40-bit scaling primes), two 60-bit special primes,
/// 4 digits, scale 2^40: log2(QP) = 420 ≤ 438.
pub fn ckks_128_logn14() -> CkksParamsLiteral {
    literal("CKKS_128_LOGN14_LOGQP420", 14, 6, 2, 4)
}

/// N = 2^14 for CNNs at full batch (8,192 images per ciphertext): `q_0` 50 bits, seven 36-bit
/// scaling primes (LeNet's depth), two 58-bit special primes, 4 digits, scale 2^36:
/// log2(QP) = 418 ≤ 438. The 36-bit scale keeps about 28 bits of precision, enough for
/// logits, and makes room for the seventh level under N = 2^14's 128-bit bound.
pub fn ckks_128_logn14_cnn() -> CkksParamsLiteral {
    let mut log_q: Vec<u32> = vec![50];
    log_q.extend(core::iter::repeat_n(36, 7));
    CkksParamsLiteral {
        name: String::from("CKKS_128_LOGN14_LOGQP418_CNN"),
        log_n: 14,
        log_q,
        log_p: vec![58, 58],
        dnum: Some(4),
        log_default_scale: 36,
        secret: SecretDistribution::UniformTernary,
        sigma: crate::math::sampling::SIGMA,
    }
}

/// N = 2^15, 10 levels, three 60-bit special primes, 4 digits: log2(QP) = 640 ≤ 881.
pub fn ckks_128_logn15() -> CkksParamsLiteral {
    literal("CKKS_128_LOGN15_LOGQP640", 15, 10, 3, 4)
}

/// N = 2^16, 16 levels, four 60-bit special primes, 5 digits: log2(QP) = 940 ≤ 1761.
pub fn ckks_128_logn16() -> CkksParamsLiteral {
    literal("CKKS_128_LOGN16_LOGQP940", 16, 16, 4, 5)
}

/// N = 2^16 at the full 128-bit budget: q_0 60 bits, 34 scaling primes of 40 bits, eight 60-bit
/// special primes, 5 digits (log2(QP) = 1840 would exceed; this set uses 28 levels: 60 + 28·40 +
/// 8·60 = 1660 ≤ 1761).
pub fn ckks_128_logn16_deep() -> CkksParamsLiteral {
    literal("CKKS_128_LOGN16_LOGQP1660", 16, 28, 8, 4)
}

/// A named set for `log2 N`, a level count and a digit count, for the benchmark CLI: 60-bit q_0,
/// 40-bit scaling primes, and enough 60-bit special primes to exceed the largest digit of
/// `ceil((L+1)/dnum)` primes by 24 bits. The name carries `log2 N`, `log2(QP)` and `dnum`.
/// It is validated like any other set, so an insecure combination is refused.
pub fn ckks_128_custom(log_n: u32, levels: usize, dnum: usize) -> CkksParamsLiteral {
    let dnum = dnum.clamp(1, levels + 1);
    let alpha = (levels + 1).div_ceil(dnum);
    // A digit holds at most 60 + 40·(alpha-1) bits. The key-switching error is about
    // N·σ·α·Q_j/P, so P must exceed the largest digit by log2(N·σ·α) + a few bits: 24 bits of
    // headroom keep that term below the ModDown rounding (a P of exactly the digit's size costs
    // ~5 bits of precision at N = 2^16).
    let digit_bits = 60 + 40 * (alpha as u32 - 1);
    let special = (digit_bits + 24).div_ceil(60) as usize;
    let log_qp = 60 + 40 * levels as u32 + 60 * special as u32;
    let name = alloc::format!("CKKS_128_LOGN{log_n}_LOGQP{log_qp}_DNUM{dnum}");
    literal(&name, log_n, levels, special, dnum)
}

/// Test set: N = 2^12, 6 levels. Far below 128-bit security: for fast tests only.
pub fn insecure_logn12() -> CkksParamsLiteral {
    literal("INSECURE_LOGN12_LOGQP420", 12, 6, 2, 4)
}

/// Test set: N = 2^10, 3 levels. Far below 128-bit security: for fast tests only.
pub fn insecure_logn10() -> CkksParamsLiteral {
    literal("INSECURE_LOGN10_LOGQP300", 10, 3, 2, 2)
}

/// A bootstrapping set: `q_0` of `top_bits` bits, `comp + stc` 40-bit scaling primes
/// (computation, then SlotToCoeff), `evalmod + cts` primes of `top_bits` bits (EvalMod, then
/// CoeffToSlot: the scale `q_0` there), `special` 60-bit special primes, `dnum` digits, the main
/// secret's distribution `secret`.
#[allow(clippy::too_many_arguments)]
fn boot_literal(
    name: &str,
    log_n: u32,
    top_bits: u32,
    comp_stc: usize,
    evalmod_cts: usize,
    special: usize,
    dnum: usize,
    secret: SecretDistribution,
) -> CkksParamsLiteral {
    let mut log_q: Vec<u32> = vec![top_bits];
    log_q.extend(core::iter::repeat_n(40, comp_stc));
    log_q.extend(core::iter::repeat_n(top_bits, evalmod_cts));
    set(name, log_n, log_q, special, dnum, secret)
}

/// Test set for bootstrapping: N = 2^12 with a sparse secret of Hamming weight 64. Far below
/// 128-bit security: for fast tests only. `q_0` and the EvalMod and CoeffToSlot primes are 60
/// bits (the CoeffToSlot/EvalMod scale is `q_0`); three computation levels and the SlotToCoeff
/// levels are 40-bit scaling primes. 3 + 3 FFT levels and EvalMod depth 7 (`BootParams::for_params`:
/// encapsulation to weight 32, K = 13, degree 122) leave 3 levels: an MLP layer (linear, square,
/// back to `Δ`) between bootstraps.
pub fn insecure_logn12_boot() -> CkksParamsLiteral {
    boot_literal(
        "INSECURE_LOGN12_BOOT_H64",
        12,
        60,
        3 + 3,
        7 + 3,
        4,
        6,
        SecretDistribution::SparseTernary { h: 64 },
    )
}

/// N = 2^16 for bootstrapping, 128-bit, with a **dense** (uniform ternary) main secret: `q_0` 61
/// bits, 10 computation levels of 40 bits, then 3 SlotToCoeff levels of 40 bits, 7 EvalMod levels
/// and 3 CoeffToSlot levels of 61 bits (24 primes, `log2 Q = 1191`), nine 60-bit special primes
/// and 3 digits: `log2(QP) = 1731`.
///
/// Security: the main secret is uniform ternary, so the HomomorphicEncryption.org Security
/// Standard's dense-secret bound applies (Albrecht et al. 2018, Table 1, extended to `N = 2^16`
/// as Lattigo and OpenFHE do: 1761 ≥ 1731; [`super::max_log_qp_128`]). The only sparse secret is
/// bootstrapping's ephemeral one (weight [`crate::circuits::boot::EPHEMERAL_WEIGHT`] = 32), used
/// by a single key modulo `q_0·p_0` (61 + 60 bits, under 121); Lattigo v5 documents weight 32 as
/// over 128-bit for a key modulus of 121 bits (`EphemeralSecretWeight`; Bossuat,
/// Troncoso-Pastoriza and Hubaux, ACNS 2022, eprint 2022/024), the `h = 32` row of
/// [`super::SPARSE_BOUNDS_128`], which [`crate::circuits::Bootstrapper::new`] checks. The
/// previous set, `CKKS_128_LOGN16_BOOT_H192_LOGQP1720`, had a weight-192 main secret at
/// `log2(QP) = 1720`: over the sparse bound (1553, the largest of Lattigo's 128-bit weight-192
/// sets at this `N`), so it is now refused.
///
/// A bootstrap with `BootParams::for_params` (sparse-secret encapsulation to weight 32, so
/// ModRaise's `K = 13` and the degree-121 EvalMod of depth 7 do not depend on the main secret)
/// leaves the 10 computation levels. The dense secret's rounding errors (`ε·s`, `‖s‖² ≈ 2N/3`
/// instead of 192) are about 16 times larger; CoeffToSlot's, multiplied by `2K` and by the
/// message ratio on the way out, dominate the output error, so `q_0` and the CoeffToSlot and
/// EvalMod primes are 61 bits (one bit more scale there) and `for_params` lifts the input one bit
/// further for a dense secret (`log_message_ratio` 11).
pub fn ckks_128_logn16_boot() -> CkksParamsLiteral {
    boot_literal(
        "CKKS_128_LOGN16_BOOT_LOGQP1731",
        16,
        61,
        10 + 3,
        7 + 3,
        9,
        3,
        SecretDistribution::UniformTernary,
    )
}
