//! The canonical negacyclic NTT over `Z_q[X]/(X^N + 1)`.
//!
//! Every backend must reproduce this transform bit for bit. It is defined as follows.
//!
//! - **Root.** `ψ` is the primitive `2N`-th root of unity obtained from `-1` by `log2(N)` successive
//!   Tonelli–Shanks square roots, each computed with `z` = the least quadratic non-residue mod `q`
//!   (see [`canonical_root`]). This is the same deterministic choice tfhe-ntt makes, so its SIMD
//!   transform can serve as an optimized implementation of this one.
//! - **Order.** Output slot `j` holds `a(ψ^(2·rev(j)+1))`, where `rev` reverses `log2 N` bits
//!   ("bit-reversed order"). [`NttTable::eval_exponent`] gives that exponent.
//! - **Values** are fully reduced in `[0, q)` on input and output.
//! - The inverse transform includes the factor `N^{-1}`.

use super::modular::Modulus;
use alloc::vec;
use alloc::vec::Vec;

/// Reverses the low `bits` bits of `i`.
#[inline(always)]
pub fn bit_rev(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

fn tonelli_shanks(q: &Modulus, n: u64, z: u64) -> Option<u64> {
    let p = q.value();
    let mut odd = p - 1;
    let mut s = 0u32;
    while odd.is_multiple_of(2) {
        odd /= 2;
        s += 1;
    }
    let mut m = s;
    let mut c = q.pow(z, odd);
    let mut t = q.pow(n, odd);
    let mut r = q.pow(n, odd.div_ceil(2));
    loop {
        if t == 0 {
            return Some(0);
        }
        if t == 1 {
            return Some(r);
        }
        let mut i = 0;
        let mut t_pow = t;
        while i < m {
            t_pow = q.mul(t_pow, t_pow);
            i += 1;
            if t_pow == 1 {
                break;
            }
        }
        if i == m {
            return None;
        }
        let b = q.pow(c, 1u64 << (m - i - 1));
        m = i;
        c = q.mul(b, b);
        t = q.mul(t, c);
        r = q.mul(r, b);
    }
}

/// The canonical primitive `order`-th root of unity mod prime `q` (`order` a power of two ≥ 2
/// dividing `q - 1`): start from `-1` and take `log2(order) - 1` canonical square roots.
pub fn canonical_root(q: &Modulus, order: u64) -> Option<u64> {
    if !order.is_power_of_two() || order < 2 || !(q.value() - 1).is_multiple_of(order) {
        return None;
    }
    let p = q.value();
    let mut z = 2;
    while q.pow(z, (p - 1) / 2) != p - 1 {
        z += 1;
        if z > 1 << 20 {
            return None;
        }
    }
    let mut root = p - 1;
    for _ in 0..order.trailing_zeros() - 1 {
        root = tonelli_shanks(q, root, z)?;
    }
    // Check primitivity: root^(order/2) = -1.
    if q.pow(root, order / 2) != p - 1 {
        return None;
    }
    Some(root)
}

/// Precomputed tables of the canonical NTT for one prime.
#[derive(Clone, Debug)]
pub struct NttTable {
    q: Modulus,
    log_n: u32,
    psi: u64,
    /// `twiddle[rev(k)] = ψ^k`, with Shoup companions.
    twiddle: Vec<u64>,
    twiddle_shoup: Vec<u64>,
    /// `inv_twiddle[rev(k)] = ψ^{-k}`, with Shoup companions.
    inv_twiddle: Vec<u64>,
    inv_twiddle_shoup: Vec<u64>,
    n_inv: u64,
    n_inv_shoup: u64,
}

impl NttTable {
    /// Builds the tables for `N = 2^log_n`. Returns `None` if `q ≢ 1 (mod 2N)` or not prime.
    pub fn new(q: Modulus, log_n: u32) -> Option<Self> {
        let n = 1usize << log_n;
        if !super::primes::is_prime(q.value()) {
            return None;
        }
        let psi = canonical_root(&q, 2 * n as u64)?;
        let psi_inv = q.inv(psi)?;
        let mut twiddle = vec![0u64; n];
        let mut inv_twiddle = vec![0u64; n];
        let (mut w, mut wi) = (1u64, 1u64);
        for k in 0..n {
            twiddle[bit_rev(k, log_n)] = w;
            inv_twiddle[bit_rev(k, log_n)] = wi;
            w = q.mul(w, psi);
            wi = q.mul(wi, psi_inv);
        }
        let twiddle_shoup = twiddle.iter().map(|&w| q.shoup(w)).collect();
        let inv_twiddle_shoup = inv_twiddle.iter().map(|&w| q.shoup(w)).collect();
        let n_inv = q.inv(n as u64)?;
        Some(Self {
            q,
            log_n,
            psi,
            twiddle,
            twiddle_shoup,
            inv_twiddle,
            inv_twiddle_shoup,
            n_inv,
            n_inv_shoup: q.shoup(n_inv),
        })
    }

    /// The modulus.
    pub fn modulus(&self) -> &Modulus {
        &self.q
    }

    /// The ring degree `N`.
    pub fn n(&self) -> usize {
        1 << self.log_n
    }

    /// The canonical root `ψ`.
    pub fn psi(&self) -> u64 {
        self.psi
    }

    /// `twiddle[rev(k)] = ψ^k` (forward), as used by Cooley–Tukey butterflies.
    pub fn twiddles(&self) -> (&[u64], &[u64]) {
        (&self.twiddle, &self.twiddle_shoup)
    }

    /// `inv_twiddle[rev(k)] = ψ^{-k}` (inverse), as used by Gentleman–Sande butterflies.
    pub fn inv_twiddles(&self) -> (&[u64], &[u64]) {
        (&self.inv_twiddle, &self.inv_twiddle_shoup)
    }

    /// `N^{-1} mod q` and its Shoup companion.
    pub fn n_inv(&self) -> (u64, u64) {
        (self.n_inv, self.n_inv_shoup)
    }

    /// The odd exponent `e` such that output slot `j` of the forward transform is `a(ψ^e)`.
    #[inline]
    pub fn eval_exponent(log_n: u32, j: usize) -> usize {
        2 * bit_rev(j, log_n) + 1
    }

    /// Forward transform in place: coefficients → evaluations (bit-reversed order).
    pub fn forward(&self, a: &mut [u64]) {
        let n = self.n();
        assert_eq!(a.len(), n, "NTT length");
        let q = &self.q;
        let two_q = 2 * q.value();
        // Harvey's lazy butterflies: values stay in [0, 4q) between stages.
        let mut t = n;
        let mut m = 1;
        while m < n {
            t >>= 1;
            for i in 0..m {
                let w = self.twiddle[m + i];
                let ws = self.twiddle_shoup[m + i];
                let j1 = 2 * i * t;
                let (lo, hi) = a[j1..j1 + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let u = super::modular::csub(*x, two_q);
                    let v = q.mul_shoup_lazy(*y, w, ws);
                    *x = u + v;
                    *y = u + two_q - v;
                }
            }
            m <<= 1;
        }
        for x in a.iter_mut() {
            *x = super::modular::csub(super::modular::csub(*x, two_q), q.value());
        }
    }

    /// Inverse transform in place: evaluations (bit-reversed order) → coefficients, times `N^{-1}`.
    pub fn inverse(&self, a: &mut [u64]) {
        let n = self.n();
        assert_eq!(a.len(), n, "NTT length");
        let q = &self.q;
        let two_q = 2 * q.value();
        let mut t = 1;
        let mut m = n;
        while m > 1 {
            let h = m >> 1;
            let mut j1 = 0;
            for i in 0..h {
                let w = self.inv_twiddle[h + i];
                let ws = self.inv_twiddle_shoup[h + i];
                let (lo, hi) = a[j1..j1 + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let u = *x;
                    let v = *y;
                    *x = super::modular::csub(u + v, two_q);
                    *y = q.mul_shoup_lazy(u + two_q - v, w, ws);
                }
                j1 += 2 * t;
            }
            t <<= 1;
            m = h;
        }
        for x in a.iter_mut() {
            *x = q.mul_shoup(*x, self.n_inv, self.n_inv_shoup);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::primes::ntt_primes;
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    fn schoolbook(a: &[u64], b: &[u64], q: &Modulus) -> Vec<u64> {
        let n = a.len();
        let mut c = vec![0u64; n];
        for i in 0..n {
            for j in 0..n {
                let p = q.mul(a[i], b[j]);
                if i + j < n {
                    c[i + j] = q.add(c[i + j], p);
                } else {
                    c[i + j - n] = q.sub(c[i + j - n], p);
                }
            }
        }
        c
    }

    #[test]
    fn round_trip_and_convolution() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for (bits, log_n) in [(60u32, 4u32), (50, 7), (61, 8), (40, 10)] {
            let n = 1 << log_n;
            for q in ntt_primes(bits, n, 2, &[]).unwrap() {
                let q = Modulus::new(q).unwrap();
                let t = NttTable::new(q, log_n).unwrap();
                let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % q.value()).collect();
                let b: Vec<u64> = (0..n).map(|_| rng.next_u64() % q.value()).collect();
                let mut fa = a.clone();
                t.forward(&mut fa);
                let mut back = fa.clone();
                t.inverse(&mut back);
                assert_eq!(back, a);
                let mut fb = b.clone();
                t.forward(&mut fb);
                let mut fc: Vec<u64> = fa.iter().zip(&fb).map(|(x, y)| q.mul(*x, *y)).collect();
                t.inverse(&mut fc);
                assert_eq!(fc, schoolbook(&a, &b, &q));
            }
        }
    }

    #[test]
    fn slot_j_is_evaluation_at_psi_power() {
        let log_n = 6;
        let n = 1 << log_n;
        let q = Modulus::new(ntt_primes(50, n, 1, &[]).unwrap()[0]).unwrap();
        let t = NttTable::new(q, log_n).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % q.value()).collect();
        let mut fa = a.clone();
        t.forward(&mut fa);
        for j in 0..n {
            let x = q.pow(t.psi(), NttTable::eval_exponent(log_n, j) as u64);
            let mut acc = 0;
            for c in a.iter().rev() {
                acc = q.add(q.mul(acc, x), *c);
            }
            assert_eq!(fa[j], acc, "slot {j}");
        }
        assert_eq!(q.pow(t.psi(), n as u64), q.value() - 1);
    }
}
