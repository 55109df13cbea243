//! Modular arithmetic on `u64` words for odd moduli below 2^62.
//!
//! Four reductions are provided, each with the invariant it needs:
//! - **Barrett** (`reduce_u128`): a 128-bit value `x < q^2` is reduced with the precomputed
//!   `floor(2^128 / q)`; one conditional subtraction finishes it (SEAL's `barrett_reduce_128`).
//! - **Narrow Barrett** (`reduce_narrow`, behind `mul` and `mul_add`): `x < 2^(63 + bits(q))`
//!   with the one-word `floor(2^(63+k) / q)`, three multiplications and two conditional
//!   subtractions; a larger `x` takes the general path (a branch on the operand's size, never on
//!   a reduced value's).
//! - **Shoup** (`mul_shoup`): multiplication by a *fixed* operand `w` with `w' = floor(w·2^64/q)`;
//!   the quotient estimate is off by at most one, so one conditional subtraction finishes it.
//! - lazy variants return values in `[0, 2q)` where the caller can absorb the final subtraction.
//!
//! All operations are branch-free on reduced operands: the conditional subtraction is a `min`,
//! which compiles to `cmp` + `cmov` (or `vpminuq`) and does not leak through timing (secret keys
//! pass through these routines during key generation).

use serde::{Deserialize, Serialize};

/// The largest admissible modulus bit size. Lazy reductions keep values below `4q < 2^64`.
pub const MAX_MODULUS_BITS: u32 = 61;

/// An odd modulus `q < 2^61` with its Barrett constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "u64", try_from = "u64")]
pub struct Modulus {
    value: u64,
    /// `floor(2^128 / q)` as (low, high) words.
    ratio: [u64; 2],
    /// `floor(2^(63 + k) / q)` for `k = bits(q)` (below `2^64`, since `q > 2^(k-1)`): the
    /// one-word constant of [`Modulus::reduce_narrow`].
    narrow: u64,
    /// `k - 1`: the shift of [`Modulus::reduce_narrow`]'s quotient estimate.
    shift: u32,
}

#[inline(always)]
fn mul_hi(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) >> 64) as u64
}

/// Returns `x - q` when `x >= q`, else `x`, without a data-dependent branch.
#[inline(always)]
pub fn csub(x: u64, q: u64) -> u64 {
    // x < q wraps x - q above x, so the minimum keeps x; otherwise x - q < x. `min` compiles to
    // `cmp` + `cmov` (`vpminuq` in vector code); LLVM turned the equivalent borrow mask into a
    // data-dependent branch where two of them were chained.
    x.min(x.wrapping_sub(q))
}

impl From<Modulus> for u64 {
    fn from(m: Modulus) -> u64 {
        m.value
    }
}

impl TryFrom<u64> for Modulus {
    type Error = &'static str;
    /// Deserialization goes through [`Modulus::new`], so no invalid modulus can be built.
    fn try_from(q: u64) -> Result<Self, Self::Error> {
        Modulus::new(q).ok_or("a modulus is odd, at least 3 and below 2^61")
    }
}

impl Modulus {
    /// Creates a modulus. `q` must be odd, at least 3 and below 2^61; otherwise `None`.
    pub const fn new(q: u64) -> Option<Self> {
        if q < 3 || q & 1 == 0 || q >= (1u64 << MAX_MODULUS_BITS) {
            return None;
        }
        // floor(2^128 / q) = floor((2^128 - 1) / q) since q is odd (does not divide 2^128).
        let r = u128::MAX / q as u128;
        let k = 64 - q.leading_zeros();
        Some(Self {
            value: q,
            ratio: [r as u64, (r >> 64) as u64],
            narrow: ((1u128 << (63 + k)) / q as u128) as u64,
            shift: k - 1,
        })
    }

    /// The modulus value `q`.
    #[inline(always)]
    pub const fn value(&self) -> u64 {
        self.value
    }

    /// Bit length of `q`.
    pub const fn bits(&self) -> u32 {
        64 - self.value.leading_zeros()
    }

    /// `x mod q` for any `u64`.
    #[inline(always)]
    pub fn reduce(&self, x: u64) -> u64 {
        // floor(x * ratio / 2^128) with x < 2^64 only needs the high ratio word plus a carry.
        let q_hat = mul_hi(x, self.ratio[1]);
        let r = x.wrapping_sub(q_hat.wrapping_mul(self.value));
        csub(r, self.value)
    }

    /// `x mod q` for a 128-bit `x` (Barrett). Exact for every `x < 2^128`.
    #[inline(always)]
    pub fn reduce_u128(&self, x: u128) -> u64 {
        let lo = x as u64;
        let hi = (x >> 64) as u64;
        // Multiply (hi, lo) by (r1, r0) and keep the 128..192 bit window's low word.
        let carry = mul_hi(lo, self.ratio[0]);
        let t2 = lo as u128 * self.ratio[1] as u128;
        let (t1, c1) = (t2 as u64).overflowing_add(carry);
        let mut t3 = ((t2 >> 64) as u64).wrapping_add(c1 as u64);
        let t4 = hi as u128 * self.ratio[0] as u128;
        let (_, c2) = t1.overflowing_add(t4 as u64);
        t3 = t3.wrapping_add(((t4 >> 64) as u64).wrapping_add(c2 as u64));
        t3 = t3.wrapping_add(hi.wrapping_mul(self.ratio[1]));
        let r = lo.wrapping_sub(t3.wrapping_mul(self.value));
        csub(r, self.value)
    }

    /// `x mod q` for `x < 2^(63 + k)`, `k = bits(q)` (every `x < q^2`, and sums of up to
    /// `2^(63 - k)` such products), with three multiplications where [`Modulus::reduce_u128`]
    /// takes six.
    ///
    /// The quotient estimate `t = floor(floor(x / 2^(k-1)) · floor(2^(63+k) / q) / 2^64)` is at
    /// most `floor(x / q)` and falls short of it by less than 3 (the three truncations each lose
    /// less than one), so `x - t·q < 3q` and two conditional subtractions finish it. A larger
    /// `x` takes the general path, so the answer is exact for every `x`; the branch depends only
    /// on whether the caller kept its own bound, never on a secret's value within it.
    #[inline(always)]
    pub fn reduce_narrow(&self, x: u128) -> u64 {
        let q1 = x >> self.shift;
        if q1 >> 64 != 0 {
            return self.reduce_u128(x);
        }
        let t = mul_hi(q1 as u64, self.narrow);
        let r = (x as u64).wrapping_sub(t.wrapping_mul(self.value));
        csub(csub(r, self.value), self.value)
    }

    /// The exclusive bound `2^(63 + k)` of [`Modulus::reduce_narrow`]'s fast path: a caller
    /// whose worst-case sum is below it never takes the general path.
    pub const fn narrow_limit(&self) -> u128 {
        1u128 << (self.shift + 64)
    }

    /// `(a + b) mod q` for `a, b < q`.
    #[inline(always)]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        csub(a + b, self.value)
    }

    /// `(a - b) mod q` for `a, b < q`.
    #[inline(always)]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        csub(a + self.value - b, self.value)
    }

    /// `-a mod q` for `a < q`.
    #[inline(always)]
    pub fn neg(&self, a: u64) -> u64 {
        // (q - a) mod q, with a == 0 mapping to 0.
        let nz = ((a != 0) as u64).wrapping_neg();
        (self.value - a) & nz
    }

    /// `a·b mod q` for `a, b < q` (Barrett on the 128-bit product).
    #[inline(always)]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce_narrow(a as u128 * b as u128)
    }

    /// `acc + a·b mod q` for `acc, a, b < q`.
    #[inline(always)]
    pub fn mul_add(&self, acc: u64, a: u64, b: u64) -> u64 {
        self.reduce_narrow(a as u128 * b as u128 + acc as u128)
    }

    /// The Shoup companion `floor(w·2^64 / q)` of a fixed operand `w < q`.
    #[inline(always)]
    pub fn shoup(&self, w: u64) -> u64 {
        (((w as u128) << 64) / self.value as u128) as u64
    }

    /// `a·w mod q` where `w_shoup = self.shoup(w)`; `a` may be any `u64`.
    #[inline(always)]
    pub fn mul_shoup(&self, a: u64, w: u64, w_shoup: u64) -> u64 {
        csub(self.mul_shoup_lazy(a, w, w_shoup), self.value)
    }

    /// `a·w mod q` in `[0, 2q)`.
    #[inline(always)]
    pub fn mul_shoup_lazy(&self, a: u64, w: u64, w_shoup: u64) -> u64 {
        let q_hat = mul_hi(a, w_shoup);
        a.wrapping_mul(w)
            .wrapping_sub(q_hat.wrapping_mul(self.value))
    }

    /// `a^e mod q` (square and multiply; `e` is public).
    pub fn pow(&self, mut a: u64, mut e: u64) -> u64 {
        let mut r = 1 % self.value;
        a = self.reduce(a);
        while e > 0 {
            if e & 1 == 1 {
                r = self.mul(r, a);
            }
            a = self.mul(a, a);
            e >>= 1;
        }
        r
    }

    /// `a^{-1} mod q` for prime `q` (Fermat). Returns `None` for `a ≡ 0`.
    pub fn inv(&self, a: u64) -> Option<u64> {
        let a = self.reduce(a);
        if a == 0 {
            None
        } else {
            Some(self.pow(a, self.value - 2))
        }
    }

    /// Maps a signed value to its residue mod `q`.
    #[inline(always)]
    pub fn from_i64(&self, x: i64) -> u64 {
        let r = self.reduce(x.unsigned_abs());
        let neg_mask = ((x < 0) as u64).wrapping_neg();
        (self.neg(r) & neg_mask) | (r & !neg_mask)
    }

    /// Maps a signed 128-bit value to its residue mod `q`.
    #[inline(always)]
    pub fn from_i128(&self, x: i128) -> u64 {
        let r = self.reduce_u128(x.unsigned_abs());
        let neg_mask = ((x < 0) as u64).wrapping_neg();
        (self.neg(r) & neg_mask) | (r & !neg_mask)
    }

    /// The centered representative of `a < q` in `(-q/2, q/2]`.
    #[inline(always)]
    pub fn center(&self, a: u64) -> i64 {
        if a > self.value / 2 {
            a as i64 - self.value as i64
        } else {
            a as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn moduli() -> impl Strategy<Value = Modulus> {
        (3u64..(1u64 << 61)).prop_filter_map("odd", |q| Modulus::new(q | 1))
    }

    proptest! {
        #[test]
        fn reduce_matches(q in moduli(), x: u64) {
            prop_assert_eq!(q.reduce(x), x % q.value());
        }

        #[test]
        fn reduce_u128_matches(q in moduli(), x: u128) {
            prop_assert_eq!(q.reduce_u128(x), (x % q.value() as u128) as u64);
        }

        /// Every size of modulus, and values on both sides of the narrow domain's edge.
        #[test]
        fn reduce_narrow_matches(bits in 2u32..=61, q: u64, x: u128, down in 0u32..128) {
            let q = Modulus::new((q >> (64 - bits)) | (1 << (bits - 1)) | 1).unwrap();
            let x = x >> down;
            prop_assert_eq!(q.reduce_narrow(x), (x % q.value() as u128) as u64);
            let edge = (1u128 << (63 + q.bits())) - 1;
            for y in [edge, edge + 1, edge - x.min(edge)] {
                prop_assert_eq!(q.reduce_narrow(y), (y % q.value() as u128) as u64);
            }
        }

        #[test]
        fn add_sub_neg_mul_match(q in moduli(), a: u64, b: u64) {
            let (a, b) = (a % q.value(), b % q.value());
            let qq = q.value() as u128;
            prop_assert_eq!(q.add(a, b) as u128, (a as u128 + b as u128) % qq);
            prop_assert_eq!(q.sub(a, b) as u128, (a as u128 + qq - b as u128) % qq);
            prop_assert_eq!(q.neg(a) as u128, (qq - a as u128) % qq);
            prop_assert_eq!(q.mul(a, b) as u128, (a as u128 * b as u128) % qq);
            prop_assert_eq!(q.mul_add(b, a, b) as u128, (a as u128 * b as u128 + b as u128) % qq);
        }

        #[test]
        fn shoup_matches(q in moduli(), a: u64, w: u64) {
            let w = w % q.value();
            let ws = q.shoup(w);
            prop_assert_eq!(q.mul_shoup(a, w, ws) as u128, (a as u128 * w as u128) % q.value() as u128);
            prop_assert!(q.mul_shoup_lazy(a, w, ws) < 2 * q.value());
        }

        #[test]
        fn signed_maps(q in moduli(), x: i64, y: i128) {
            let qq = q.value() as i128;
            prop_assert_eq!(q.from_i64(x) as i128, (x as i128).rem_euclid(qq));
            prop_assert_eq!(q.from_i128(y) as i128, y.rem_euclid(qq));
            let r = q.from_i64(x);
            prop_assert_eq!((q.center(r) as i128).rem_euclid(qq), r as i128);
        }
    }

    #[test]
    fn narrow_products_at_the_largest_operands() {
        for q in [3u64, 5, (1 << 40) + 1, (1 << 60) - 93, (1 << 61) - 1] {
            let m = Modulus::new(q).unwrap();
            let qq = q as u128;
            let top = q - 1;
            assert_eq!(m.mul(top, top) as u128, (top as u128 * top as u128) % qq);
            assert_eq!(
                m.mul_add(top, top, top) as u128,
                (top as u128 * top as u128 + top as u128) % qq
            );
        }
    }

    #[test]
    fn rejects_bad_moduli() {
        assert!(Modulus::new(0).is_none());
        assert!(Modulus::new(4).is_none());
        assert!(Modulus::new(1 << 61).is_none());
        assert!(Modulus::new((1 << 61) - 1).is_some());
    }

    #[test]
    fn pow_inv() {
        let q = Modulus::new(0x1fffffffffe00001).unwrap();
        for a in [1u64, 2, 12345, q.value() - 1] {
            let i = q.inv(a).unwrap();
            assert_eq!(q.mul(a, i), 1);
        }
        assert!(q.inv(0).is_none());
    }
}
