//! The CKKS encoder: the canonical embedding `σ: R[X]/(X^N+1) → C^{N/2}` restricted to the
//! roots `ζ^{5^j}` (`ζ = e^{iπ/N}`, `j < n`), computed with the "special FFT" of Cheon–Kim–Kim–Song
//! (HEAAN) in `O(n log n)`.
//!
//! With `n < N/2` slots (sparse packing) the message lives in the subring of polynomials in
//! `Y = X^{N/(2n)}`: coefficient `i` of the `n`-point transform lands at `X^{i·gap}`, `gap = N/(2n)`.
//! Slot `j` sits at the root `ζ^{5^j}`, so the Galois element `5^r` rotates the slots left by `r` and
//! `2N - 1` conjugates them.

use crate::error::{Error, Result};
use crate::math::special_fft;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::{Add, Mul, Neg, Sub};

/// A complex number in `f64`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct C64 {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

impl C64 {
    /// `re + i·im`.
    pub const fn new(re: f64, im: f64) -> Self {
        Self { re, im }
    }
    /// A real number.
    pub const fn real(re: f64) -> Self {
        Self { re, im: 0.0 }
    }
    /// The complex conjugate.
    pub fn conj(self) -> Self {
        Self {
            re: self.re,
            im: -self.im,
        }
    }
    /// `|z|`.
    pub fn abs(self) -> f64 {
        libm::hypot(self.re, self.im)
    }
    /// `e^{iθ}`.
    pub fn cis(theta: f64) -> Self {
        Self {
            re: libm::cos(theta),
            im: libm::sin(theta),
        }
    }
}

impl Add for C64 {
    type Output = C64;
    fn add(self, o: C64) -> C64 {
        C64::new(self.re + o.re, self.im + o.im)
    }
}
impl Sub for C64 {
    type Output = C64;
    fn sub(self, o: C64) -> C64 {
        C64::new(self.re - o.re, self.im - o.im)
    }
}
impl Mul for C64 {
    type Output = C64;
    fn mul(self, o: C64) -> C64 {
        C64::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}
impl Mul<f64> for C64 {
    type Output = C64;
    fn mul(self, o: f64) -> C64 {
        C64::new(self.re * o, self.im * o)
    }
}
impl Neg for C64 {
    type Output = C64;
    fn neg(self) -> C64 {
        C64::new(-self.re, -self.im)
    }
}

/// Tables for the special FFT of a ring degree `N`.
#[derive(Clone, Debug)]
pub struct Encoder {
    log_n: u32,
    /// `5^j mod 2N`, `j < N/2`.
    rot_group: Vec<u64>,
    /// `ζ^k = e^{2πik/2N}`, `k ≤ 2N`.
    ksi: Vec<C64>,
}

/// The largest magnitude of an encoded integer coefficient: `2^126` keeps every residue map exact.
const MAX_COEFF: f64 = 8.507_059_173_023_462e37; // 2^126

impl Encoder {
    /// Builds the tables for `N = 2^log_n`.
    pub fn new(log_n: u32) -> Self {
        let n = 1usize << log_n;
        let m = 2 * n;
        let rot_group = special_fft::rot_group(n, n / 2);
        let ksi = (0..=m)
            .map(|k| C64::cis(2.0 * core::f64::consts::PI * k as f64 / m as f64))
            .collect();
        Self {
            log_n,
            rot_group,
            ksi,
        }
    }

    /// The ring degree `N`.
    pub fn n(&self) -> usize {
        1 << self.log_n
    }

    fn check_slots(&self, slots: usize) -> Result<()> {
        if !slots.is_power_of_two() || slots > self.n() / 2 || slots == 0 {
            return Err(Error::InvalidParameters(
                "slot count must be a power of two ≤ N/2",
            ));
        }
        Ok(())
    }

    /// Slots → "coefficient vector" of the `n`-point transform (in place, `n = vals.len()`).
    fn fft_special_inv(&self, vals: &mut [C64]) {
        let n = vals.len();
        let m = 2 * self.n();
        special_fft::for_each_butterfly(n, true, |b| {
            // lenq = 4·len and m = 2N are powers of two: mask and shift, no division.
            let lq = b.len.trailing_zeros() + 2;
            let lenq = 1usize << lq;
            let idx = (lenq - (self.rot_group[b.j] as usize & (lenq - 1))) * (m >> lq);
            let u = vals[b.lo] + vals[b.hi];
            let v = (vals[b.lo] - vals[b.hi]) * self.ksi[idx];
            vals[b.lo] = u;
            vals[b.hi] = v;
        });
        special_fft::bit_reverse(vals);
        let inv = 1.0 / n as f64;
        for v in vals.iter_mut() {
            *v = *v * inv;
        }
    }

    /// "Coefficient vector" → slots (in place).
    fn fft_special(&self, vals: &mut [C64]) {
        let n = vals.len();
        let m = 2 * self.n();
        special_fft::bit_reverse(vals);
        special_fft::for_each_butterfly(n, false, |b| {
            let lq = b.len.trailing_zeros() + 2;
            let idx = (self.rot_group[b.j] as usize & ((1usize << lq) - 1)) * (m >> lq);
            let u = vals[b.lo];
            let v = vals[b.hi] * self.ksi[idx];
            vals[b.lo] = u + v;
            vals[b.hi] = u - v;
        });
    }

    /// Encodes `values` (at most `slots`, zero-padded) into integer coefficients `round(Δ·σ^{-1}(z))`.
    pub fn encode(&self, values: &[C64], slots: usize, scale: f64) -> Result<Vec<i128>> {
        let n = self.n();
        let gap = n / (2 * slots);
        let sub = self.encode_subring(values, slots, scale)?;
        let mut coeffs = vec![0i128; n];
        for (k, c) in sub.into_iter().enumerate() {
            coeffs[k * gap] = c;
        }
        Ok(coeffs)
    }

    /// [`Encoder::encode`] restricted to the slot subring: the `2·slots` coefficients at the
    /// positions `k·N/(2·slots)` (every other coefficient is zero), in that order.
    pub fn encode_subring(&self, values: &[C64], slots: usize, scale: f64) -> Result<Vec<i128>> {
        self.check_slots(slots)?;
        if values.len() > slots {
            return Err(Error::SlotCount {
                given: values.len(),
                slots,
            });
        }
        if !(scale.is_finite() && scale >= 1.0) {
            return Err(Error::InvalidParameters(
                "scale must be finite and at least 1",
            ));
        }
        let mut z = vec![C64::default(); slots];
        for (d, v) in z.iter_mut().zip(values) {
            if !(v.re.is_finite() && v.im.is_finite()) {
                return Err(Error::NonFinite);
            }
            *d = *v;
        }
        self.fft_special_inv(&mut z);
        let mut coeffs = vec![0i128; 2 * slots];
        for (i, v) in z.iter().enumerate() {
            let (re, im) = (libm::round(v.re * scale), libm::round(v.im * scale));
            if !(re.abs() < MAX_COEFF && im.abs() < MAX_COEFF) {
                return Err(Error::EncodingOverflow);
            }
            coeffs[i] = re as i128;
            coeffs[i + slots] = im as i128;
        }
        Ok(coeffs)
    }

    /// Encodes a single complex constant `c` as the polynomial `round(Δ·re) + round(Δ·im)·X^{N/2}`,
    /// whose every slot is `Δ·c` (`X^{N/2}` evaluates to `i` at every root `ζ^{5^j}`).
    pub fn encode_constant(&self, c: C64, scale: f64) -> Result<(i128, i128)> {
        if !(c.re.is_finite() && c.im.is_finite() && scale.is_finite()) {
            return Err(Error::NonFinite);
        }
        let (re, im) = (libm::round(c.re * scale), libm::round(c.im * scale));
        if !(re.abs() < MAX_COEFF && im.abs() < MAX_COEFF) {
            return Err(Error::EncodingOverflow);
        }
        Ok((re as i128, im as i128))
    }

    /// Decodes real coefficients (already divided by the scale) into `slots` values.
    pub fn decode(&self, coeffs: &[f64], slots: usize) -> Result<Vec<C64>> {
        self.check_slots(slots)?;
        let n = self.n();
        if coeffs.len() != n {
            return Err(Error::InvalidParameters("coefficient count must be N"));
        }
        let gap = n / (2 * slots);
        let mut z: Vec<C64> = (0..slots)
            .map(|i| C64::new(coeffs[i * gap], coeffs[(i + slots) * gap]))
            .collect();
        self.fft_special(&mut z);
        Ok(z)
    }

    /// The Galois element rotating slots left by `k` (negative `k` rotates right).
    pub fn galois_element_for_rotation(&self, k: i64) -> u64 {
        let half = (self.n() / 2) as i64;
        self.rot_group[k.rem_euclid(half) as usize]
    }

    /// The Galois element of complex conjugation, `2N - 1`.
    pub fn galois_element_conjugate(&self) -> u64 {
        2 * self.n() as u64 - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_eval(coeffs: &[i128], scale: f64, log_n: u32, slots: usize) -> Vec<C64> {
        // Evaluate m(X) at ζ^{5^j} directly.
        let n = 1usize << log_n;
        let m = 2 * n as u64;
        let mut g = 1u64;
        let mut out = Vec::new();
        for _ in 0..slots {
            let mut acc = C64::default();
            for (k, &c) in coeffs.iter().enumerate() {
                if c != 0 {
                    let e = (g * k as u64) % m;
                    acc = acc
                        + C64::cis(core::f64::consts::PI * e as f64 / n as f64)
                            * (c as f64 / scale);
                }
            }
            out.push(acc);
            g = (g * 5) % m;
        }
        out
    }

    #[test]
    fn encode_is_the_canonical_embedding() {
        for (log_n, slots) in [(6u32, 32usize), (6, 8), (8, 64)] {
            let enc = Encoder::new(log_n);
            let vals: Vec<C64> = (0..slots)
                .map(|i| C64::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
                .collect();
            let scale = (1u64 << 40) as f64;
            let coeffs = enc.encode(&vals, slots, scale).unwrap();
            let back = naive_eval(&coeffs, scale, log_n, slots);
            for (a, b) in vals.iter().zip(&back) {
                assert!((*a - *b).abs() < 1e-9, "{a:?} {b:?}");
            }
            let f: Vec<f64> = coeffs.iter().map(|&c| c as f64 / scale).collect();
            let dec = enc.decode(&f, slots).unwrap();
            for (a, b) in vals.iter().zip(&dec) {
                assert!((*a - *b).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn constant_lands_in_every_slot() {
        let enc = Encoder::new(5);
        let (re, im) = enc.encode_constant(C64::new(0.5, -0.25), 1024.0).unwrap();
        let mut coeffs = vec![0i128; 32];
        coeffs[0] = re;
        coeffs[16] = im;
        for v in naive_eval(&coeffs, 1024.0, 5, 16) {
            assert!((v - C64::new(0.5, -0.25)).abs() < 1e-12);
        }
    }

    #[test]
    fn refuses_bad_input() {
        let enc = Encoder::new(6);
        assert_eq!(
            enc.encode(&[C64::real(1.0); 33], 32, 2.0),
            Err(Error::SlotCount {
                given: 33,
                slots: 32
            })
        );
        assert_eq!(
            enc.encode(&[C64::real(f64::NAN)], 32, 2.0),
            Err(Error::NonFinite)
        );
        assert_eq!(
            enc.encode(&[C64::real(1e300)], 32, 1e10),
            Err(Error::EncodingOverflow)
        );
        assert!(enc.encode(&[C64::real(1.0)], 12, 2.0).is_err());
    }
}
