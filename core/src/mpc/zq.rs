//! The prime-product ring `Z_q` used at the CKKS↔MPC boundary.
//!
//! `q` is a product of a few RNS primes of the CKKS chain and must satisfy
//! `log2 q ≥ ℓ + σ + 1` (σ = 40 statistical security) for the statistical
//! Field2Ring conversion of [`crate::mpc::ext`]. Elements are stored in a
//! `u128`; the supported range is `2 ≤ q < 2^124`, which covers `ℓ = 43`
//! (`ℓ + σ + 1 = 84`) with room to spare. Larger moduli give
//! [`MpcError::ModulusTooLarge`].

use crate::mpc::error::{MpcError, Result};
use rand_core::RngCore;

/// Largest supported bit length of `q` (exclusive bound `q < 2^124`).
pub const MAX_MODULUS_BITS: u32 = 124;

/// A modulus `q < 2^124`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Modulus {
    q: u128,
}

impl Modulus {
    /// Validated constructor.
    pub fn new(q: u128) -> Result<Self> {
        if !(2..(1u128 << MAX_MODULUS_BITS)).contains(&q) {
            return Err(MpcError::ModulusTooLarge);
        }
        Ok(Modulus { q })
    }

    /// `q = ∏ primes`; fails if the product reaches `2^124`.
    pub fn from_primes(primes: &[u64]) -> Result<Self> {
        let mut q: u128 = 1;
        for &p in primes {
            if p < 2 {
                return Err(MpcError::InvalidConfig("RNS prime < 2"));
            }
            q = q.checked_mul(p as u128).ok_or(MpcError::ModulusTooLarge)?;
        }
        Self::new(q)
    }

    /// The value `q`.
    #[inline]
    pub fn value(&self) -> u128 {
        self.q
    }

    /// `⌈log2 q⌉`, the bit length of elements on the wire.
    #[inline]
    pub fn bits(&self) -> u32 {
        128 - (self.q - 1).leading_zeros()
    }

    /// `a + b mod q` for `a, b < q`.
    #[inline]
    pub fn add(&self, a: u128, b: u128) -> u128 {
        let s = a + b; // < 2^125, no overflow
        if s >= self.q {
            s - self.q
        } else {
            s
        }
    }

    /// `a - b mod q` for `a, b < q`.
    #[inline]
    pub fn sub(&self, a: u128, b: u128) -> u128 {
        if a >= b {
            a - b
        } else {
            a + self.q - b
        }
    }

    /// `-a mod q`.
    #[inline]
    pub fn neg(&self, a: u128) -> u128 {
        if a == 0 {
            0
        } else {
            self.q - a
        }
    }

    /// `x mod q` for any `u128`.
    #[inline]
    pub fn reduce(&self, x: u128) -> u128 {
        x % self.q
    }

    /// `(hi·2^128 + lo) mod q`, used to map 256 hash bits to a
    /// statistically uniform element (bias ≤ q/2^256).
    pub fn reduce_wide(&self, hi: u128, lo: u128) -> u128 {
        let mut r = hi % self.q;
        for i in (0..128).rev() {
            r = (r << 1) | ((lo >> i) & 1); // r < 2^125
            if r >= self.q {
                r -= self.q;
            }
        }
        r
    }

    /// `a · b mod q` (double-and-add; not on hot paths).
    pub fn mul(&self, a: u128, b: u128) -> u128 {
        let (a, mut b) = (a % self.q, b % self.q);
        let mut r = 0u128;
        let mut base = a;
        while b != 0 {
            if b & 1 == 1 {
                r = self.add(r, base);
            }
            base = self.add(base, base);
            b >>= 1;
        }
        r
    }

    /// Embeds a signed integer.
    pub fn from_signed(&self, v: i128) -> u128 {
        let r = v.rem_euclid(self.q as i128);
        r as u128
    }

    /// Centered representative in `(-q/2, q/2]`.
    pub fn to_signed(&self, a: u128) -> i128 {
        if a > self.q / 2 {
            a as i128 - self.q as i128
        } else {
            a as i128
        }
    }

    /// Exactly uniform element by rejection sampling.
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> u128 {
        let bits = self.bits();
        let m = if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        loop {
            let mut b = [0u8; 16];
            rng.fill_bytes(&mut b);
            let v = u128::from_le_bytes(b) & m;
            if v < self.q {
                return v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        let m = Modulus::from_primes(&[(1 << 61) - 1, 1_152_921_504_606_830_593]).unwrap();
        let q = m.value();
        assert_eq!(m.add(q - 1, 1), 0);
        assert_eq!(m.sub(0, 1), q - 1);
        assert_eq!(m.mul(q - 1, q - 1), 1);
        assert_eq!(m.reduce_wide(0, q + 5), 5);
        assert_eq!(m.reduce_wide(1, 0), (u128::MAX % q + 1) % q);
        assert_eq!(m.to_signed(m.from_signed(-7)), -7);
        assert_eq!(Modulus::new(1u128 << 124), Err(MpcError::ModulusTooLarge));
        assert!(Modulus::from_primes(&[u64::MAX, u64::MAX]).is_err());
    }
}
