//! Modular arithmetic on `u64` words inside `#[cube]` kernels.
//!
//! CubeCL 0.10 has no 64×64→128 high product, so [`mul_hi`] builds it from four 32×32→64 partial
//! products. On top of it: Shoup multiplication by a fixed operand ([`mul_shoup`]), and the
//! Barrett reduction of a full 128-bit product with the constant `floor(2^128 / q)` — the same
//! reduction `veil_core::math::Modulus::reduce_u128` performs on the host ([`mul_mod`]).
//!
//! Every function returns fully reduced words in `[0, q)` for fully reduced inputs, so each kernel
//! computes exactly the value `veil-core` defines, whatever the order of its operations.

// `#[cube]` expands each kernel into undocumented helper modules and functions; every item
// written here is documented.
#![allow(missing_docs)]

use cubecl::prelude::*;

/// The high word of the 128-bit product `a·b`.
#[cube]
pub fn mul_hi(a: u64, b: u64) -> u64 {
    let mask = 0xFFFF_FFFFu64;
    let a0 = a & mask;
    let a1 = a >> 32u64;
    let b0 = b & mask;
    let b1 = b >> 32u64;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // Sum of the middle column; at most 3·(2^32 - 1), no overflow.
    let mid = (p00 >> 32u64) + (p01 & mask) + (p10 & mask);
    p11 + (p01 >> 32u64) + (p10 >> 32u64) + (mid >> 32u64)
}

/// `x - q` when `x ≥ q`, else `x`.
#[cube]
pub fn csub(x: u64, q: u64) -> u64 {
    let mut r = x;
    if r >= q {
        r -= q;
    }
    r
}

/// `(a + b) mod q` for `a, b < q < 2^63`.
#[cube]
pub fn add_mod(a: u64, b: u64, q: u64) -> u64 {
    csub(a + b, q)
}

/// `(a - b) mod q` for `a, b < q < 2^63`.
#[cube]
pub fn sub_mod(a: u64, b: u64, q: u64) -> u64 {
    csub(a + q - b, q)
}

/// `-a mod q` for `a < q` (zero maps to zero).
#[cube]
pub fn neg_mod(a: u64, q: u64) -> u64 {
    let mut r = 0u64;
    if a != 0u64 {
        r = q - a;
    }
    r
}

/// `a·w mod q` with the Shoup companion `ws = floor(w·2^64 / q)` of a fixed `w < q`; `a` may be
/// any word. The quotient estimate is off by at most one.
#[cube]
pub fn mul_shoup(a: u64, w: u64, ws: u64, q: u64) -> u64 {
    let qh = mul_hi(a, ws);
    csub(a * w - qh * q, q)
}

/// `(a·b + c) mod q` for any words `a, b` with `a·b + c < 2^128`, by Barrett reduction with
/// `floor(2^128 / q) = r1·2^64 + r0`.
#[cube]
pub fn mul_add_mod(a: u64, b: u64, c: u64, q: u64, r0: u64, r1: u64) -> u64 {
    // x = a·b + c as (hi, lo).
    let p_lo = a * b;
    let lo = p_lo + c;
    let mut hi = mul_hi(a, b);
    if lo < p_lo {
        hi += 1u64;
    }
    // The 128..192-bit window of x·ratio, low word only.
    let carry = mul_hi(lo, r0);
    let t2_lo = lo * r1;
    let t2_hi = mul_hi(lo, r1);
    let t1 = t2_lo + carry;
    let mut t3 = t2_hi;
    if t1 < carry {
        t3 += 1u64;
    }
    let t4_lo = hi * r0;
    let t4_hi = mul_hi(hi, r0);
    let s = t1 + t4_lo;
    if s < t1 {
        t3 += 1u64;
    }
    t3 = t3 + t4_hi + hi * r1;
    csub(lo - t3 * q, q)
}

/// `a·b mod q` (Barrett, see [`mul_add_mod`]).
#[cube]
pub fn mul_mod(a: u64, b: u64, q: u64, r0: u64, r1: u64) -> u64 {
    mul_add_mod(a, b, 0u64, q, r0, r1)
}

/// Global prime index of row `r` for a row map `(first, bq, q_total)`: rows below `bq` are the
/// Q primes `first, first + 1, …`; the following rows are the special primes (global indices
/// `q_total, q_total + 1, …`). A `Basis {q, p}` is the map `(0, q, q_total)`.
#[cube]
pub fn prime_of_row(r: u32, first: u32, bq: u32, q_total: u32) -> u32 {
    let mut g = first + r;
    if r >= bq {
        g = q_total + (r - bq);
    }
    g
}
