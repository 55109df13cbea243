//! Modular arithmetic on `u64` words inside `#[cube]` kernels.
//!
//! CubeCL 0.10 has no 64×64→128 high product, so [`mul_hi()`] builds it from four 32×32→64 partial
//! products. On top of it: Shoup multiplication by a fixed operand ([`mul_shoup()`]), and the
//! Barrett reduction of a full 128-bit product with the constant `floor(2^128 / q)` — the same
//! reduction `veil_core::math::Modulus::reduce_u128` performs on the host ([`mul_mod()`]).
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

/// `a·b mod q` (Barrett, see [`mul_add_mod()`]).
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

/// Test kernel: for unit `i` with inputs `x[4i..4i+4] = [a, b, w, c]` (`w, c < q`) and `ws` the
/// Shoup companion of `w`: `out[4i..4i+4] = [mul_hi(a, b), a·b mod q, a·w mod q (Shoup),
/// (a·b + c) mod q]`.
#[cube(launch_unchecked)]
pub fn arith_probe_kernel(
    x: &Array<u64>,
    shoup: &Array<u64>,
    out: &mut Array<u64>,
    units: u32,
    q: u64,
    r0: u64,
    r1: u64,
) {
    let i = ABSOLUTE_POS;
    if i < units as usize {
        let a = x[4 * i];
        let b = x[4 * i + 1];
        out[4 * i] = mul_hi(a, b);
        out[4 * i + 1] = mul_mod(a, b, q, r0, r1);
        out[4 * i + 2] = mul_shoup(a, x[4 * i + 2], shoup[i], q);
        out[4 * i + 3] = mul_add_mod(a, b, x[4 * i + 3], q, r0, r1);
    }
}

/// Runs [`arith_probe_kernel()`] on `client`'s device over `units` pseudo-random pairs of words
/// (full 64-bit range, with the edges `0, 1, q - 1, q, 2^63, 2^64 - 1`) for a modulus
/// `q < 2^61`, and compares every word with `u128` arithmetic on the host. `Err` names the first
/// difference.
pub fn check_arith<R: Runtime>(
    client: &ComputeClient<R>,
    q: u64,
    units: usize,
) -> Result<(), String> {
    let mut s = q ^ 0x0123_4567_89AB_CDEF;
    let mut next = || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let q128 = q as u128;
    let edges = [0, 1, u64::MAX, q - 1, q, 1 << 63, (1 << 61) - 1];
    let mut x = Vec::with_capacity(4 * units);
    let mut shoup = Vec::with_capacity(units);
    for i in 0..units {
        let (mut a, mut b) = (next(), next());
        if i < edges.len() {
            a = edges[i];
        }
        if i + edges.len() >= units {
            b = edges[units - 1 - i];
        }
        let w = next() % q;
        x.extend_from_slice(&[a, b, w, next() % q]);
        shoup.push((((w as u128) << 64) / q128) as u64);
    }
    let ratio = u128::MAX / q128;
    let xh = client.create_from_slice(u64::as_bytes(&x));
    let sh = client.create_from_slice(u64::as_bytes(&shoup));
    let oh = client.empty(4 * units * std::mem::size_of::<u64>());
    let (count, dim) = crate::launch::grid(units);
    // SAFETY: unit `i < units` reads `x[4i..4i+4]`, `shoup[i]` and writes `out[4i..4i+4]`.
    #[allow(unsafe_code)]
    unsafe {
        arith_probe_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            ArrayArg::from_raw_parts(xh, 4 * units),
            ArrayArg::from_raw_parts(sh, units),
            ArrayArg::from_raw_parts(oh.clone(), 4 * units),
            units as u32,
            q,
            ratio as u64,
            (ratio >> 64) as u64,
        )
    }
    let bytes = client.read_one(oh).map_err(|e| format!("{e:?}"))?;
    let got = u64::from_bytes(&bytes);
    if got.iter().all(|&w| w == 0) {
        return Err("the device returned only zeros".into());
    }
    for i in 0..units {
        let [a, b, w, c] = [0, 1, 2, 3].map(|j| x[4 * i + j] as u128);
        let want = [
            ((a * b) >> 64) as u64,
            ((a * b) % q128) as u64,
            ((a * w) % q128) as u64,
            ((a * b + c) % q128) as u64,
        ];
        for (j, name) in ["mul_hi", "mul_mod", "mul_shoup", "mul_add_mod"]
            .iter()
            .enumerate()
        {
            if got[4 * i + j] != want[j] {
                return Err(format!(
                    "{name}({a}, {b}) mod {q}: device {} host {}",
                    got[4 * i + j],
                    want[j]
                ));
            }
        }
    }
    Ok(())
}
