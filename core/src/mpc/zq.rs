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

    /// Whether `q` is a power of two (`2^128 ≡ 0 mod q`: the low 128 bits decide every
    /// reduction, and they alone are uniform mod `q`).
    #[inline]
    pub fn is_power_of_two(&self) -> bool {
        self.q.is_power_of_two()
    }

    /// `(hi·2^128 + lo) mod q`, used to map 256 hash bits to a
    /// statistically uniform element (bias ≤ q/2^256; none for a power of two, where it is
    /// `lo mod q` and `hi` is not read).
    pub fn reduce_wide(&self, hi: u128, lo: u128) -> u128 {
        if self.is_power_of_two() {
            return lo & (self.q - 1);
        }
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
        self.sample_from(|b| rng.fill_bytes(b))
    }

    /// Exactly uniform element by rejection sampling from a byte stream `fill` (16 bytes per
    /// draw, masked to `⌈log2 q⌉` bits; on average fewer than two draws).
    pub fn sample_from(&self, mut fill: impl FnMut(&mut [u8])) -> u128 {
        let bits = self.bits();
        let m = if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        loop {
            let mut b = [0u8; 16];
            fill(&mut b);
            let v = u128::from_le_bytes(b) & m;
            if v < self.q {
                return v;
            }
        }
    }
}

/// An RNS basis `q = ∏ p_i` (pairwise coprime `p_i < 2^64`, `q < 2^124`) with
/// CRT conversion between residues (the CKKS side) and `Z_q` elements (the
/// MPC side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RnsBasis {
    primes: alloc::vec::Vec<u64>,
    q: Modulus,
    /// `q/p_i`.
    cofactor: alloc::vec::Vec<u128>,
    /// `(q/p_i)^{-1} mod p_i`.
    inv: alloc::vec::Vec<u64>,
}

fn inv_mod(a: u128, m: u128) -> Option<u128> {
    // Extended Euclid on signed 128-bit (m < 2^64 here).
    let (mut r0, mut r1) = (m as i128, (a % m) as i128);
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let qt = r0 / r1;
        (r0, r1) = (r1, r0 - qt * r1);
        (t0, t1) = (t1, t0 - qt * t1);
    }
    if r0 != 1 {
        return None;
    }
    Some(t0.rem_euclid(m as i128) as u128)
}

impl RnsBasis {
    /// Basis from pairwise coprime moduli.
    pub fn new(primes: &[u64]) -> Result<Self> {
        let q = Modulus::from_primes(primes)?;
        let mut cofactor = alloc::vec::Vec::with_capacity(primes.len());
        let mut inv = alloc::vec::Vec::with_capacity(primes.len());
        for &p in primes {
            let qi = q.value() / p as u128;
            let v = inv_mod(qi % p as u128, p as u128)
                .ok_or(MpcError::InvalidConfig("RNS moduli not coprime"))?;
            cofactor.push(qi);
            inv.push(v as u64);
        }
        Ok(RnsBasis {
            primes: primes.to_vec(),
            q,
            cofactor,
            inv,
        })
    }

    /// The modulus `q`.
    pub fn modulus(&self) -> Modulus {
        self.q
    }

    /// The moduli `p_i`.
    pub fn primes(&self) -> &[u64] {
        &self.primes
    }

    /// CRT composition: the `x ∈ Z_q` with `x ≡ r_i (mod p_i)`.
    pub fn compose(&self, residues: &[u64]) -> Result<u128> {
        if residues.len() != self.primes.len() {
            return Err(MpcError::InvalidInput("residue count"));
        }
        // x = Σ (q/p_i)·(r_i·(q/p_i)^{-1} mod p_i) mod q: each term is below q (its second
        // factor is below p_i), so no product needs reducing mod q.
        let mut x = 0u128;
        for (((&r, &p), &qi), &v) in residues
            .iter()
            .zip(&self.primes)
            .zip(&self.cofactor)
            .zip(&self.inv)
        {
            if r >= p {
                return Err(MpcError::InvalidInput("residue not reduced"));
            }
            let y = (r as u128 * v as u128) % p as u128;
            x = self.q.add(x, qi * y);
        }
        Ok(x)
    }

    /// Residues `x mod p_i`.
    pub fn decompose(&self, x: u128) -> alloc::vec::Vec<u64> {
        self.primes
            .iter()
            .map(|&p| (x % p as u128) as u64)
            .collect()
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
        // A power of two: the shortcut equals the bitwise reduction it skips.
        let k = Modulus::new(1u128 << 123).unwrap();
        for (hi, lo) in [
            (0, 0),
            (1, 0),
            (u128::MAX, u128::MAX),
            (0x1234 << 90, 7 << 122 | 99),
        ] {
            let mut r = hi % k.value();
            for i in (0..128).rev() {
                r = (r << 1) | ((lo >> i) & 1);
                if r >= k.value() {
                    r -= k.value();
                }
            }
            assert_eq!(k.reduce_wide(hi, lo), r);
        }
        assert_eq!(m.to_signed(m.from_signed(-7)), -7);
        assert_eq!(Modulus::new(1u128 << 124), Err(MpcError::ModulusTooLarge));
        assert!(Modulus::from_primes(&[u64::MAX, u64::MAX]).is_err());
    }

    #[test]
    fn rns_crt_roundtrip() {
        let primes: &[u64] = &[0xffff_ffff_0000_0001, 1_099_511_627_791];
        let b = RnsBasis::new(primes).unwrap();
        let q = b.modulus();
        for x in [
            0u128,
            1,
            12345,
            q.value() - 1,
            q.value() / 3,
            q.from_signed(-77),
        ] {
            let r = b.decompose(x);
            assert_eq!(b.compose(&r).unwrap(), x);
        }
        // Many elements across Z_q, and a three-prime basis (the CRT sum of three terms).
        let b3 = RnsBasis::new(&[1_099_511_627_791, 1_152_921_504_606_830_593, 65_537]).unwrap();
        let mut z = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834u128;
        for _ in 0..2000 {
            z = z
                .wrapping_mul(0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645)
                .wrapping_add(1);
            for bb in [&b, &b3] {
                let x = z % bb.modulus().value();
                assert_eq!(bb.compose(&bb.decompose(x)).unwrap(), x);
            }
        }
        assert!(RnsBasis::new(&[6, 9]).is_err());
        assert!(b.compose(&[1]).is_err());
        assert!(b.compose(&[u64::MAX, 0]).is_err());
    }
}
