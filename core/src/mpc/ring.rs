//! The ring `Z_{2^ℓ}` and its fixed-point encoding.
//!
//! Elements are stored in the low `ℓ` bits of a `u64`. A real number `v` is
//! encoded as `round(v · 2^F) mod 2^ℓ` (two's complement in `ℓ` bits), as in
//! EncFormer (`ℓ = 43`, `F = 13`) and CrypTFlow2.

use crate::mpc::error::{MpcError, Result};

/// Ring and fixed-point parameters: `ℓ` bits, `F` fractional bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RingCfg {
    /// Bit width `ℓ` of the ring `Z_{2^ℓ}`, `2 ≤ ℓ ≤ 64`.
    pub ell: u32,
    /// Fractional bits `F < ℓ - 1` of the fixed-point encoding.
    pub frac: u32,
}

impl RingCfg {
    /// EncFormer parameters: `ℓ = 43`, `F = 13`.
    pub const ENCFORMER: RingCfg = RingCfg { ell: 43, frac: 13 };

    /// Validated constructor.
    pub fn new(ell: u32, frac: u32) -> Result<Self> {
        if !(2..=64).contains(&ell) {
            return Err(MpcError::InvalidConfig("ring bit width must be in 2..=64"));
        }
        if frac + 2 > ell {
            return Err(MpcError::InvalidConfig("need F + 2 <= ell"));
        }
        Ok(RingCfg { ell, frac })
    }

    /// `2^ℓ - 1`.
    #[inline]
    pub fn mask(&self) -> u64 {
        mask(self.ell)
    }

    /// `a + b mod 2^ℓ`.
    #[inline]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        a.wrapping_add(b) & self.mask()
    }

    /// `a - b mod 2^ℓ`.
    #[inline]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        a.wrapping_sub(b) & self.mask()
    }

    /// `a · b mod 2^ℓ`.
    #[inline]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        a.wrapping_mul(b) & self.mask()
    }

    /// Reduces a signed integer into the ring.
    #[inline]
    pub fn from_signed(&self, v: i64) -> u64 {
        (v as u64) & self.mask()
    }

    /// Interprets a ring element as a signed integer in `[-2^{ℓ-1}, 2^{ℓ-1})`.
    #[inline]
    pub fn to_signed(&self, a: u64) -> i64 {
        let a = a & self.mask();
        if self.ell == 64 {
            return a as i64;
        }
        if a >> (self.ell - 1) == 1 {
            (a as i64) - (1i64 << (self.ell - 1)) * 2
        } else {
            a as i64
        }
    }

    /// Fixed-point encoding `round(v·2^F) mod 2^ℓ`.
    pub fn encode(&self, v: f64) -> u64 {
        let s = libm::round(v * libm::ldexp(1.0, self.frac as i32));
        self.from_signed(s as i64)
    }

    /// Fixed-point decoding of a ring element.
    pub fn decode(&self, a: u64) -> f64 {
        self.to_signed(a) as f64 / libm::ldexp(1.0, self.frac as i32)
    }
}

/// `2^bits - 1` for `bits ≤ 64`.
#[inline]
pub fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_roundtrip() {
        let r = RingCfg::ENCFORMER;
        for v in [0i64, 1, -1, (1 << 42) - 1, -(1 << 42), 12345, -98765] {
            assert_eq!(r.to_signed(r.from_signed(v)), v);
        }
        assert!((r.decode(r.encode(-3.25)) + 3.25).abs() < 1e-9);
        assert!(RingCfg::new(65, 13).is_err());
        assert!(RingCfg::new(14, 13).is_err());
    }
}
