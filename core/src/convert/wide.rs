//! The wide share ring `Z_{2^W}`, `W = 192`, of the fast conversion maps (M2C's encoding map,
//! [`super::M2cPlan`], and C2M's decoding map, [`super::C2mPlan::decode_shares`]), its local
//! truncation and the common masks that re-randomize shares before each truncation.
//!
//! Every operation here is a wrapping operation modulo `2^W` (additions, negation, products by
//! a public signed 64-bit integer, left shifts), hence a `Z`-module homomorphism of the share
//! ring: applying it to two additive shares and adding the results gives the operation on the
//! shared value, exactly. The only non-linear step is [`local_trunc_wide`], whose error and
//! failure probability are stated there.

use crate::mpc::ot::AesPrg;
use alloc::vec;
use alloc::vec::Vec;

/// Bit width `W` of the wide share ring `Z_{2^W}`.
pub const W_BITS: u32 = 192;

/// An element of `Z_{2^192}`: three little-endian 64-bit limbs. Read as a signed integer in
/// `[-2^191, 2^191)` where a signed view is needed. Its values are shares of secrets: `Debug`
/// prints none of the limbs.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Wide(pub [u64; 3]);

impl core::fmt::Debug for Wide {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Wide(<redacted>)")
    }
}

impl zeroize::DefaultIsZeroes for Wide {}

impl Wide {
    /// Zero.
    pub const ZERO: Wide = Wide([0; 3]);

    /// The signed integer `v` modulo `2^W` (sign extension).
    #[inline]
    pub fn from_i128(v: i128) -> Self {
        let u = v as u128;
        let top = if v < 0 { u64::MAX } else { 0 };
        Wide([u as u64, (u >> 64) as u64, top])
    }

    /// `2^e mod 2^W` (zero for `e ≥ W`).
    #[inline]
    pub fn pow2(e: u32) -> Self {
        let mut w = [0u64; 3];
        if e < W_BITS {
            w[(e / 64) as usize] = 1u64 << (e % 64);
        }
        Wide(w)
    }

    /// `self + o mod 2^W`.
    #[inline]
    pub fn wrapping_add(self, o: Wide) -> Self {
        let (a, c0) = self.0[0].overflowing_add(o.0[0]);
        let (b, c1) = self.0[1].overflowing_add(o.0[1]);
        let (b, c2) = b.overflowing_add(c0 as u64);
        let c = self.0[2]
            .wrapping_add(o.0[2])
            .wrapping_add((c1 | c2) as u64);
        Wide([a, b, c])
    }

    /// `self − o mod 2^W`.
    #[inline]
    pub fn wrapping_sub(self, o: Wide) -> Self {
        let (a, b0) = self.0[0].overflowing_sub(o.0[0]);
        let (b, b1) = self.0[1].overflowing_sub(o.0[1]);
        let (b, b2) = b.overflowing_sub(b0 as u64);
        let c = self.0[2]
            .wrapping_sub(o.0[2])
            .wrapping_sub((b1 | b2) as u64);
        Wide([a, b, c])
    }

    /// `−self mod 2^W`.
    #[inline]
    pub fn wrapping_neg(self) -> Self {
        Wide::ZERO.wrapping_sub(self)
    }

    /// `self · w mod 2^W` for a public signed `w`.
    #[inline]
    pub fn wrapping_mul_i64(self, w: i64) -> Self {
        let m = w.unsigned_abs() as u128;
        let p0 = self.0[0] as u128 * m;
        // ≤ (2^64−1)² + 2^64 − 1 < 2^128: no overflow.
        let p1 = self.0[1] as u128 * m + (p0 >> 64);
        let p2 = self.0[2]
            .wrapping_mul(m as u64)
            .wrapping_add((p1 >> 64) as u64);
        let r = Wide([p0 as u64, p1 as u64, p2]);
        if w < 0 {
            r.wrapping_neg()
        } else {
            r
        }
    }

    /// `self · 2^s mod 2^W` (zero for `s ≥ W`).
    #[inline]
    pub fn wrapping_shl(self, s: u32) -> Self {
        if s >= W_BITS {
            return Wide::ZERO;
        }
        let (q, r) = ((s / 64) as usize, s % 64);
        let mut out = [0u64; 3];
        for i in q..3 {
            let lo = self.0[i - q];
            let carry = if r > 0 && i > q {
                self.0[i - q - 1] >> (64 - r)
            } else {
                0
            };
            out[i] = (lo << r) | carry;
        }
        Wide(out)
    }

    /// `⌊self / 2^s⌋` of the *unsigned* representative in `[0, 2^W)` (logical shift).
    #[inline]
    pub fn logical_shr(self, s: u32) -> Self {
        if s >= W_BITS {
            return Wide::ZERO;
        }
        let (q, r) = ((s / 64) as usize, s % 64);
        let mut out = [0u64; 3];
        for i in 0..3 - q {
            let hi = self.0[i + q];
            let carry = if r > 0 && i + q + 1 < 3 {
                self.0[i + q + 1] << (64 - r)
            } else {
                0
            };
            out[i] = (hi >> r) | carry;
        }
        Wide(out)
    }

    /// Whether this is zero.
    #[inline]
    pub fn is_zero(self) -> bool {
        self.0 == [0; 3]
    }

    /// `self mod 2^128` (the reduction `Z_{2^W} → Z_{2^128}` is a ring homomorphism).
    #[inline]
    pub fn low_u128(self) -> u128 {
        self.0[0] as u128 | (self.0[1] as u128) << 64
    }

    /// The signed representative in `[-2^191, 2^191)` if it fits an `i128`.
    pub fn to_i128(self) -> Option<i128> {
        let lo = self.low_u128() as i128;
        let top = if lo < 0 { u64::MAX } else { 0 };
        (self.0[2] == top).then_some(lo)
    }

    /// The signed representative in `[-2^191, 2^191)`, rounded to `f64`.
    pub fn to_f64(self) -> f64 {
        let neg = self.0[2] >> 63 == 1;
        let m = if neg { self.wrapping_neg() } else { self };
        let v =
            m.0[0] as f64 + m.0[1] as f64 * libm::exp2(64.0) + m.0[2] as f64 * libm::exp2(128.0);
        if neg {
            -v
        } else {
            v
        }
    }
}

/// Local truncation in `Z_{2^W}` (the wide-ring form of [`super::local_trunc`]): from an additive
/// share of `x` with `|x| < 2^h`, `s ≤ h ≤ W − 2`, returns a share in `Z_{2^W}` of `⌊x/2^s⌋` or
/// `⌊x/2^s⌋ + 1`.
///
/// P0 outputs `⌊a/2^s⌋ − 2^{h−s}` with `a = x_0 + 2^h mod 2^W`, P1 outputs `−⌊(2^W − x_1)/2^s⌋`
/// (`x_1 ≠ 0`; the output for `x_1 = 0` is irrelevant: that share always fails the condition
/// below). If `a + x_1 ≥ 2^W` then `x + 2^h = a − (2^W − x_1)` over the integers and the two outputs add to `⌊(x + 2^h)/2^s⌋ − 2^{h−s} + {0, 1}` over the integers,
/// hence modulo `2^W`. With P0's share uniform (a fresh common mask, [`CommonMasks`]) the
/// condition fails with probability `(x + 2^h + 1)/2^W ≤ 2^{h+1−W}`, and the `+1` is a
/// stochastic rounding (probability `(x mod 2^s)/2^s`: the output is unbiased).
#[inline]
pub fn local_trunc_wide(share: Wide, p0: bool, s: u32, h: u32) -> Wide {
    debug_assert!(s <= h && h + 2 <= W_BITS);
    if p0 {
        let a = share.wrapping_add(Wide::pow2(h));
        a.logical_shr(s).wrapping_sub(Wide::pow2(h - s))
    } else {
        share.wrapping_neg().logical_shr(s).wrapping_neg()
    }
}

/// Re-randomization of one party's share by a common mask `r` (P0 adds it, P1 subtracts it):
/// the shared value is unchanged and P0's share becomes uniform.
#[inline]
pub fn rerandomize(share: Wide, r: Wide, p0: bool) -> Wide {
    if p0 {
        share.wrapping_add(r)
    } else {
        share.wrapping_sub(r)
    }
}

/// Common uniform masks: the same stream on both parties (AES-128 in counter mode keyed by a
/// common seed). The masks are public to both parties; they only make P0's share uniform for
/// the wrap arguments of the local truncations.
pub struct CommonMasks {
    prg: AesPrg,
    buf: Vec<u8>,
    at: usize,
}

impl core::fmt::Debug for CommonMasks {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CommonMasks(<common stream>)")
    }
}

/// Bytes drawn from the PRG at a time (a multiple of 16 and of 24).
const MASK_BUF: usize = 16 * 3 * 256;

impl CommonMasks {
    /// The stream keyed by `seed` (both parties must use the same seed, drawn from their common
    /// randomness).
    pub fn from_seed(seed: [u8; 16]) -> Self {
        CommonMasks {
            prg: AesPrg::new(seed),
            buf: vec![0u8; MASK_BUF],
            at: MASK_BUF,
        }
    }

    #[inline]
    fn word(&mut self) -> u64 {
        if self.at == self.buf.len() {
            self.prg.fill(&mut self.buf);
            self.at = 0;
        }
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buf[self.at..self.at + 8]);
        self.at += 8;
        u64::from_le_bytes(b)
    }

    /// A uniform element of `Z_{2^W}`.
    #[inline]
    pub fn wide(&mut self) -> Wide {
        Wide([self.word(), self.word(), self.word()])
    }

    /// A uniform element of `Z_{2^k}`, `k ≤ 128`.
    #[inline]
    pub fn bits(&mut self, k: u32) -> u128 {
        let v = self.word() as u128 | (self.word() as u128) << 64;
        if k >= 128 {
            v
        } else {
            v & ((1u128 << k) - 1)
        }
    }
}

/// The linear part of one butterfly on shares (wrapping, exact mod `2^W`): `(a + b, (a − b)·w)`
/// for complex `a = (re, im)`, `b`, and the integer twiddle `w = [cos, sin]`.
#[inline]
pub(crate) fn butterfly(
    a: (Wide, Wide),
    b: (Wide, Wide),
    w: [i64; 2],
) -> ((Wide, Wide), (Wide, Wide)) {
    let u = (a.0.wrapping_add(b.0), a.1.wrapping_add(b.1));
    let v = cmul((a.0.wrapping_sub(b.0), a.1.wrapping_sub(b.1)), w);
    (u, v)
}

/// The complex product `d·w` of a share `d = (re, im)` by a public integer twiddle
/// `w = [cos, sin]` (wrapping, exact mod `2^W`): four products of a wide share by an `i64`.
#[inline]
pub(super) fn cmul(d: (Wide, Wide), w: [i64; 2]) -> (Wide, Wide) {
    (
        d.0.wrapping_mul_i64(w[0])
            .wrapping_sub(d.1.wrapping_mul_i64(w[1])),
        d.0.wrapping_mul_i64(w[1])
            .wrapping_add(d.1.wrapping_mul_i64(w[0])),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    fn rnd(rng: &mut ChaCha20Rng) -> Wide {
        Wide([rng.next_u64(), rng.next_u64(), rng.next_u64()])
    }

    /// `Debug` of a share, alone or in a vector, shows no limb in any radix.
    #[test]
    fn debug_redacts_limbs() {
        use alloc::format;
        let w = Wide([
            0x0123_4567_89ab_cdef,
            0xfedc_ba98_7654_3210,
            0x1357_9bdf_2468_ace0,
        ]);
        for s in [
            format!("{w:?}"),
            format!("{:?}", alloc::vec![w, w]),
            format!("{w:#?}"),
        ] {
            assert!(s.contains("redacted"), "{s}");
            for l in w.0 {
                for shown in [
                    format!("{l}"),
                    format!("{l:x}"),
                    format!("{l:X}"),
                    format!("{l:#x}"),
                ] {
                    assert!(!s.contains(&shown), "limb {shown} printed in {s}");
                }
            }
            assert!(
                !s.chars().any(|c| c.is_ascii_digit()),
                "digits printed in {s}"
            );
        }
    }

    /// Reference arithmetic on the low 128 bits (a ring homomorphism of `Z_{2^192}`) and on
    /// values small enough for `i128`.
    #[test]
    fn wide_arithmetic_matches_references() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for _ in 0..20_000 {
            let (a, b) = (rnd(&mut rng), rnd(&mut rng));
            let w = rng.next_u64() as i64 >> (rng.next_u64() % 64);
            assert_eq!(
                a.wrapping_add(b).low_u128(),
                a.low_u128().wrapping_add(b.low_u128())
            );
            assert_eq!(
                a.wrapping_sub(b).low_u128(),
                a.low_u128().wrapping_sub(b.low_u128())
            );
            assert_eq!(a.wrapping_add(b).wrapping_sub(b), a);
            assert_eq!(a.wrapping_add(a.wrapping_neg()), Wide::ZERO);
            assert_eq!(
                a.wrapping_mul_i64(w).low_u128(),
                a.low_u128().wrapping_mul(w as i128 as u128)
            );
            // Distributivity mod 2^W (the homomorphism the map relies on).
            assert_eq!(
                a.wrapping_add(b).wrapping_mul_i64(w),
                a.wrapping_mul_i64(w).wrapping_add(b.wrapping_mul_i64(w))
            );
            let s = (rng.next_u64() % 192) as u32;
            assert_eq!(a.wrapping_shl(s), {
                let mut r = a;
                for _ in 0..s {
                    r = r.wrapping_add(r);
                }
                r
            });
            // shr then shl clears the low s bits.
            let back = a.logical_shr(s).wrapping_shl(s);
            assert_eq!(a.wrapping_sub(back).logical_shr(s), Wide::ZERO);
            // Small signed values: exact i128 arithmetic.
            let x = (rng.next_u64() as i64) as i128;
            let y = (rng.next_u64() as i32) as i128;
            let wx = Wide::from_i128(x);
            assert_eq!(wx.wrapping_mul_i64(y as i64).to_i128(), Some(x * y));
            assert_eq!(wx.wrapping_sub(Wide::from_i128(y)).to_i128(), Some(x - y));
            assert_eq!(Wide::from_i128(x).to_f64(), x as f64);
        }
        assert_eq!(Wide::pow2(191).to_i128(), None);
        assert_eq!(Wide::pow2(192), Wide::ZERO);
        assert_eq!(Wide::from_i128(-1), Wide([u64::MAX; 3]));
    }

    /// The wide local truncation reconstructs `⌊x/2^s⌋ + {0, 1}` for uniform P0 shares, and its
    /// wrap condition is the one stated (checked with an artificially large `h`).
    #[test]
    fn wide_local_trunc() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        for &(s, h) in &[
            (0u32, 100u32),
            (1, 95),
            (44, 94),
            (60, 150),
            (64, 120),
            (130, 180),
        ] {
            for _ in 0..5000 {
                let x = Wide::from_i128(rng.next_u64() as i64 as i128).wrapping_shl(h - 64);
                let x = x.wrapping_add(Wide::from_i128(rng.next_u64() as i64 as i128));
                let x0 = rnd(&mut rng);
                let x1 = x.wrapping_sub(x0);
                let got = local_trunc_wide(x0, true, s, h)
                    .wrapping_add(local_trunc_wide(x1, false, s, h));
                // ⌊x/2^s⌋ as the arithmetic shift of the signed value.
                let neg = x.0[2] >> 63 == 1;
                let fl = if neg {
                    x.wrapping_neg()
                        .wrapping_sub(Wide::from_i128(1))
                        .logical_shr(s)
                        .wrapping_neg()
                        .wrapping_sub(Wide::from_i128(1))
                } else {
                    x.logical_shr(s)
                };
                let wrap_ok = {
                    // a + x_1 ≥ 2^W ⟺ a > x + 2^h (as unsigned residues; x + 2^h ∈ [0, 2^{h+1})).
                    let a = x0.wrapping_add(Wide::pow2(h));
                    let v = x.wrapping_add(Wide::pow2(h));
                    a.0.iter().rev().cmp(v.0.iter().rev()) == core::cmp::Ordering::Greater
                };
                if wrap_ok {
                    let d = got.wrapping_sub(fl);
                    assert!(d == Wide::ZERO || d == Wide::from_i128(1), "s {s} h {h}");
                }
            }
        }
    }

    /// The butterfly is exactly homomorphic mod `2^W`; with re-randomization and local
    /// truncation the reconstructed outputs are the truncated exact outputs `+{0, 1}`.
    #[test]
    fn butterfly_commutes_with_sharing() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut m0 = CommonMasks::from_seed([7; 16]);
        let mut m1 = CommonMasks::from_seed([7; 16]);
        let (t, h_u, h_v) = (43u32, 51u32, 94u32);
        for _ in 0..2000 {
            let val =
                |rng: &mut ChaCha20Rng| Wide::from_i128((rng.next_u64() as i64 >> 15) as i128);
            let (a, b) = (
                (val(&mut rng), val(&mut rng)),
                (val(&mut rng), val(&mut rng)),
            );
            let (a0, b0) = (
                (rnd(&mut rng), rnd(&mut rng)),
                (rnd(&mut rng), rnd(&mut rng)),
            );
            let a1 = (a.0.wrapping_sub(a0.0), a.1.wrapping_sub(a0.1));
            let b1 = (b.0.wrapping_sub(b0.0), b.1.wrapping_sub(b0.1));
            let w = [
                (rng.next_u64() >> 20) as i64 - (1 << 43),
                (rng.next_u64() >> 20) as i64 - (1 << 43),
            ];
            let (u, v) = butterfly(a, b, w);
            let (u0, v0) = butterfly(a0, b0, w);
            let (u1, v1) = butterfly(a1, b1, w);
            for (x, (x0, x1)) in [
                (u.0, (u0.0, u1.0)),
                (u.1, (u0.1, u1.1)),
                (v.0, (v0.0, v1.0)),
                (v.1, (v0.1, v1.1)),
            ] {
                assert_eq!(x0.wrapping_add(x1), x);
            }
            for (x, (x0, x1), s, h) in
                [(u.0, (u0.0, u1.0), 1, h_u), (v.1, (v0.1, v1.1), t + 1, h_v)]
            {
                let y0 = local_trunc_wide(rerandomize(x0, m0.wide(), true), true, s, h);
                let y1 = local_trunc_wide(rerandomize(x1, m1.wide(), false), false, s, h);
                let got = y0.wrapping_add(y1).to_i128().unwrap();
                let want = x.to_i128().unwrap().div_euclid(1i128 << s);
                assert!(got == want || got == want + 1);
            }
        }
    }
}
