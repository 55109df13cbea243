//! Samplers for RLWE: uniform ternary and sparse ternary secrets, the rounded Gaussian error, and
//! uniform residues expanded from a public seed.
//!
//! Secret-dependent samplers are constant time: no branch or memory index depends on a sampled
//! value. Rejection sampling is only used on public randomness (seed expansion) or where the
//! rejected draws are independent of the value finally kept.

use super::modular::Modulus;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use subtle::{ConditionallySelectable, ConstantTimeGreater};

/// The error standard deviation fixed by the HE Standard parameter tables.
pub const SIGMA: f64 = 3.2;
/// Tail cut of the error distribution, in standard deviations (outputs satisfy `|e| ≤ 6σ`).
pub const TAIL_SIGMAS: f64 = 6.0;

/// Uniform ternary vector in `{-1, 0, 1}^n`, constant time in the output.
pub fn ternary<R: RngCore + CryptoRng>(rng: &mut R, n: usize) -> Vec<i8> {
    let mut out = vec![0i8; n];
    let mut i = 0;
    let mut buf = [0u8; 64];
    while i < n {
        rng.fill_bytes(&mut buf);
        for &b in buf.iter() {
            // 255 is rejected so that b % 3 is uniform; whether a byte is rejected is independent
            // of the kept values.
            if b == 255 || i == n {
                continue;
            }
            out[i] = (b % 3) as i8 - 1;
            i += 1;
        }
    }
    zeroize::Zeroize::zeroize(&mut buf);
    out
}

/// Sparse ternary vector with exactly `h` non-zero entries, each `±1` uniformly, at uniformly
/// random positions. The positions are fixed by sorting random keys with a constant-time bitonic
/// network, so no memory access depends on the secret.
pub fn sparse_ternary<R: RngCore + CryptoRng>(rng: &mut R, n: usize, h: usize) -> Vec<i8> {
    assert!(n.is_power_of_two() && h <= n);
    // (key, value) pairs; the value is encoded as u64 (0, 1, or 2 for -1).
    let mut keys: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
    let mut vals: Vec<u64> = (0..n)
        .map(|i| {
            let sign = rng.next_u32() & 1;
            if i < h {
                1 + sign as u64
            } else {
                0
            }
        })
        .collect();
    // Bitonic sort by key (constant-time compare-and-swap).
    let mut k = 2;
    while k <= n {
        let mut j = k / 2;
        while j > 0 {
            for i in 0..n {
                let l = i ^ j;
                if l > i {
                    let ascending = (i & k) == 0;
                    let gt = keys[i].ct_gt(&keys[l]);
                    let swap = if ascending { gt } else { !gt };
                    let (a, b) = (keys[i], keys[l]);
                    keys[i] = u64::conditional_select(&a, &b, swap);
                    keys[l] = u64::conditional_select(&b, &a, swap);
                    let (a, b) = (vals[i], vals[l]);
                    vals[i] = u64::conditional_select(&a, &b, swap);
                    vals[l] = u64::conditional_select(&b, &a, swap);
                }
            }
            j /= 2;
        }
        k *= 2;
    }
    let out = vals
        .iter()
        .map(|&v| {
            // 0 -> 0, 1 -> 1, 2 -> -1, branch free.
            let one = (v & 1) as i8;
            let minus = ((v >> 1) & 1) as i8;
            one - minus
        })
        .collect();
    // The sorted values are the secret itself; the keys fix its support.
    zeroize::Zeroize::zeroize(&mut vals);
    zeroize::Zeroize::zeroize(&mut keys);
    out
}

/// A cumulative distribution table for the rounded Gaussian of deviation `σ`, cut at `6σ`.
#[derive(Clone, Debug)]
pub struct GaussianCdt {
    /// `cdt[k] = floor(2^63 · Pr[|x| ≤ k] )` for the folded (absolute value) distribution.
    cdt: Vec<u64>,
}

impl GaussianCdt {
    /// Builds the table for deviation `sigma`.
    pub fn new(sigma: f64) -> Self {
        let bound = libm::ceil(TAIL_SIGMAS * sigma) as i64;
        let rho = |x: f64| libm::exp(-x * x / (2.0 * sigma * sigma));
        let mut total = 0.0;
        for x in -bound..=bound {
            total += rho(x as f64);
        }
        let mut cdt = Vec::with_capacity(bound as usize + 1);
        let mut acc = rho(0.0) / total;
        for k in 0..=bound {
            if k > 0 {
                acc += 2.0 * rho(k as f64) / total;
            }
            let v = libm::fmin(acc, 1.0) * (1u64 << 63) as f64;
            cdt.push(v as u64);
        }
        *cdt.last_mut().unwrap() = 1u64 << 63;
        Self { cdt }
    }

    /// The largest magnitude the sampler can output.
    pub fn bound(&self) -> i64 {
        self.cdt.len() as i64 - 1
    }

    /// One sample, constant time: the whole table is scanned with branch-free arithmetic.
    pub fn sample<R: RngCore + CryptoRng>(&self, rng: &mut R) -> i64 {
        let r = rng.next_u64();
        self.sample_word(r)
    }

    /// The sample for one uniform 64-bit word: bit 0 is the sign, bits 1..64 the uniform `u` that
    /// is compared with every table entry. `|x| = #{k : u ≥ cdt[k]}`.
    ///
    /// Every entry `c` satisfies `1 ≤ c ≤ 2^63` and `u < 2^63`, so `c − 1 − u` lies in
    /// `(−2^63, 2^63)`: its top bit (as a wrapping `u64`) is set exactly when `u ≥ c`. The scan has
    /// no branch and no table index that depends on `u`, and the sign is applied as
    /// `(m ⊕ −s) + s`; the loop is plain integer arithmetic that the compiler vectorizes.
    #[inline]
    fn sample_word(&self, r: u64) -> i64 {
        let u = r >> 1; // 63 bits
        let s = (r & 1) as i64;
        let mag: u64 = self
            .cdt
            .iter()
            .map(|&c| (c - 1).wrapping_sub(u) >> 63)
            .sum();
        // A zero magnitude gets no sign bias: -0 == 0.
        ((mag as i64) ^ -s) + s
    }

    /// `n` samples.
    pub fn sample_vec<R: RngCore + CryptoRng>(&self, rng: &mut R, n: usize) -> Vec<i64> {
        (0..n).map(|_| self.sample(rng)).collect()
    }
}

/// Fills `out` with residues uniform in `[0, q)`, drawn from `rng` by rejection (public randomness).
pub fn uniform_mod<R: RngCore>(rng: &mut R, q: &Modulus, out: &mut [u64]) {
    let mask = if q.bits() == 64 {
        u64::MAX
    } else {
        (1u64 << q.bits()) - 1
    };
    // Words are drawn in bulk (one `fill_bytes` per 256 words instead of a call per word) and
    // consumed in stream order, so the output is the same as drawing them one by one (the
    // generator is left past the last batch, whose unused tail is discarded).
    const BATCH: usize = 256;
    let mut bytes = [0u8; BATCH * 8];
    let mut next = BATCH;
    for x in out.iter_mut() {
        loop {
            if next == BATCH {
                rng.fill_bytes(&mut bytes);
                next = 0;
            }
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[next * 8..next * 8 + 8]);
            next += 1;
            let v = u64::from_le_bytes(w) & mask;
            if v < q.value() {
                *x = v;
                break;
            }
        }
    }
}

/// One row of the public seed expansion: residues uniform mod `q`, from AES-256 keyed by `seed`
/// in counter mode. Block `i` of the row is `AES_seed(stream ‖ prime_index ‖ i)` (8, 4 and 4
/// bytes, little-endian); its two 64-bit words, masked to `bits(q)` bits, are kept when below
/// `q` (rejection on public randomness). `prime_index` is the prime's global index (`Q` primes
/// then special primes). Rows are independent, so a backend may expand them in any order or in
/// parallel ([`crate::backend::PolyBackend::expand_uniform`]).
///
/// AES with the CPU's instructions expands about three times faster than the ChaCha20 stream
/// of format version 2, and key generation spends a third of its time here. A row takes
/// at most `2^32` blocks, far above the `2N` words a row needs with overwhelming probability
/// (each word is kept with probability above 1/2); past that the counter wraps.
pub fn expand_uniform_row(
    seed: &[u8; 32],
    stream: u64,
    prime_index: usize,
    q: &Modulus,
    out: &mut [u64],
) {
    use aes::cipher::generic_array::GenericArray;
    use aes::cipher::{BlockEncrypt, KeyInit};
    const BATCH: usize = 64;
    let cipher = aes::Aes256::new(GenericArray::from_slice(seed));
    let (qv, mask) = (q.value(), u64::MAX >> (64 - q.bits()));
    // The block's first 12 bytes, as the low 96 bits of a little-endian u128.
    let tag = stream as u128 | (prime_index as u32 as u128) << 64;
    let mut blocks = [GenericArray::<u8, aes::cipher::consts::U16>::default(); BATCH];
    let mut counter = 0u32;
    let mut filled = 0;
    while filled < out.len() {
        for b in blocks.iter_mut() {
            *b = GenericArray::from((tag | (counter as u128) << 96).to_le_bytes());
            counter = counter.wrapping_add(1);
        }
        cipher.encrypt_blocks(&mut blocks);
        for b in &blocks {
            let x = u128::from_le_bytes((*b).into());
            for v in [x as u64 & mask, (x >> 64) as u64 & mask] {
                if v < qv {
                    if let Some(slot) = out.get_mut(filled) {
                        *slot = v;
                        filled += 1;
                    }
                }
            }
        }
    }
}

/// Fills `out` with integers drawn uniformly from `[−width, width]` (`width < 2^62`), by
/// rejection from the smallest power-of-two range covering `2·width + 1` values: the number of
/// draws depends only on the rejected words, never on the accepted value.
///
/// This is the noise of a flood ([`crate::ckks::sanitize`]); `width = 0` gives zeros.
pub fn uniform_signed<R: RngCore + CryptoRng>(rng: &mut R, width: u64, out: &mut [i64]) {
    let width = width.min((1u64 << 62) - 1);
    let span = 2 * width + 1;
    let bits = 64 - (span - 1).leading_zeros();
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    for x in out.iter_mut() {
        loop {
            let v = rng.next_u64() & mask;
            if v < span {
                *x = v as i64 - width as i64;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    /// The expansion follows its documented layout, rebuilt here block by block with the `aes`
    /// crate: block `i` of a row is `AES-256_seed(stream ‖ prime_index ‖ i)`, whose two masked
    /// little-endian words are kept when below `q`. Pins format version 3.
    #[test]
    fn expansion_follows_the_documented_aes_layout() {
        use aes::cipher::generic_array::GenericArray;
        use aes::cipher::{BlockEncrypt, KeyInit};
        let seed: [u8; 32] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        let (stream, prime_index) = (3u64, 5usize);
        let cipher = aes::Aes256::new(GenericArray::from_slice(&seed));
        for bits in [20u32, 40, 60] {
            let q = crate::math::primes::ntt_primes(bits, 1 << 12, 1, &[]).unwrap()[0];
            let m = Modulus::new(q).unwrap();
            let mut out = vec![0u64; 300];
            expand_uniform_row(&seed, stream, prime_index, &m, &mut out);
            let mask = (1u64 << m.bits()) - 1;
            let mut want = Vec::new();
            let mut i = 0u32;
            while want.len() < out.len() {
                let mut block = [0u8; 16];
                block[..8].copy_from_slice(&stream.to_le_bytes());
                block[8..12].copy_from_slice(&(prime_index as u32).to_le_bytes());
                block[12..].copy_from_slice(&i.to_le_bytes());
                let mut b = GenericArray::from(block);
                cipher.encrypt_block(&mut b);
                for h in b.chunks_exact(8) {
                    let v = u64::from_le_bytes(h.try_into().unwrap()) & mask;
                    if v < q && want.len() < out.len() {
                        want.push(v);
                    }
                }
                i += 1;
            }
            assert_eq!(out, want);
            // Another stream or prime index is another row.
            let mut other = vec![0u64; 300];
            expand_uniform_row(&seed, stream + 1, prime_index, &m, &mut other);
            assert_ne!(out, other);
            expand_uniform_row(&seed, stream, prime_index + 1, &m, &mut other);
            assert_ne!(out, other);
        }
    }

    /// The bulk draw gives the words a one-by-one draw of the same stream would accept.
    #[test]
    fn uniform_mod_matches_word_by_word_rejection() {
        for bits in [20u32, 40, 60] {
            let q = crate::math::primes::ntt_primes(bits, 1 << 12, 1, &[]).unwrap()[0];
            let m = Modulus::new(q).unwrap();
            let mut a = ChaCha20Rng::seed_from_u64(bits as u64);
            let mut out = vec![0u64; 1000];
            uniform_mod(&mut a, &m, &mut out);
            let mut b = ChaCha20Rng::seed_from_u64(bits as u64);
            let mask = (1u64 << m.bits()) - 1;
            for &x in &out {
                let want = loop {
                    let v = b.next_u64() & mask;
                    if v < q {
                        break v;
                    }
                };
                assert_eq!(x, want);
            }
        }
    }

    /// The flood's sampler stays in `[−W, W]`, reaches both ends, and is uniform: every value of
    /// a small width appears within 5 standard deviations of its expected count, the mean and
    /// the variance `W(W+1)/3` of a wide one within 5 standard errors; width 0 gives zeros.
    #[test]
    fn uniform_signed_is_uniform_on_its_range() {
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        let mut v = vec![0i64; 1 << 16];
        uniform_signed(&mut rng, 5, &mut v);
        let expect = v.len() as f64 / 11.0;
        let sd = (expect * (1.0 - 1.0 / 11.0)).sqrt();
        for x in -5i64..=5 {
            let c = v.iter().filter(|&&y| y == x).count() as f64;
            assert!((c - expect).abs() < 5.0 * sd, "{x}: {c} vs {expect}");
        }
        assert!(v.iter().all(|x| x.abs() <= 5));
        let w = (1u64 << 40) + 12345;
        uniform_signed(&mut rng, w, &mut v);
        assert!(v.iter().all(|x| x.unsigned_abs() <= w));
        let n = v.len() as f64;
        let wf = w as f64;
        let var = wf * (wf + 1.0) / 3.0;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        assert!(mean.abs() < 5.0 * (var / n).sqrt(), "mean {mean}");
        let m2 = v.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>() / n;
        // Var(x²) = E[x⁴] − var² = var²·(9/5 − 1) for a uniform law.
        assert!(
            (m2 / var - 1.0).abs() < 5.0 * (0.8f64 / n).sqrt(),
            "{m2} vs {var}"
        );
        uniform_signed(&mut rng, 0, &mut v);
        assert!(v.iter().all(|&x| x == 0));
    }

    #[test]
    fn ternary_is_balanced() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let v = ternary(&mut rng, 1 << 16);
        let c: [usize; 3] = [-1i8, 0, 1].map(|t| v.iter().filter(|&&x| x == t).count());
        for k in c {
            assert!((k as f64 - 65536.0 / 3.0).abs() < 600.0, "{c:?}");
        }
    }

    #[test]
    fn sparse_has_weight_h() {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let v = sparse_ternary(&mut rng, 1 << 12, 192);
        assert_eq!(v.iter().filter(|&&x| x != 0).count(), 192);
        assert!(v.iter().all(|&x| (-1..=1).contains(&x)));
        let pos = v.iter().filter(|&&x| x == 1).count();
        assert!(pos > 60 && pos < 132);
        // Positions spread over the whole vector.
        assert!(v[..2048].iter().any(|&x| x != 0) && v[2048..].iter().any(|&x| x != 0));
    }

    #[test]
    fn gaussian_moments() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let g = GaussianCdt::new(SIGMA);
        assert_eq!(g.bound(), 20);
        let s = g.sample_vec(&mut rng, 200_000);
        let mean = s.iter().sum::<i64>() as f64 / s.len() as f64;
        let var = s.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / s.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!(
            (libm::sqrt(var) - SIGMA).abs() < 0.05,
            "sd {}",
            libm::sqrt(var)
        );
        assert!(s.iter().all(|x| x.abs() <= 20));
    }

    /// The branch-free scan equals the definition `#{k : u ≥ cdt[k]}` with the sign of bit 0, at
    /// every table edge (`u = c − 1`, `c`, `c + 1`), at 0 and at the top, and on random words.
    #[test]
    fn gaussian_matches_the_table_definition() {
        let g = GaussianCdt::new(SIGMA);
        let reference = |r: u64| {
            let u = r >> 1;
            let m = g.cdt.iter().filter(|&&c| u >= c).count() as i64;
            if r & 1 == 1 {
                -m
            } else {
                m
            }
        };
        let mut words: Vec<u64> = vec![0, 1, u64::MAX, u64::MAX - 1];
        for &c in &g.cdt {
            for u in [c.saturating_sub(1), c, c + 1] {
                let u = u.min((1u64 << 63) - 1);
                words.extend([u << 1, (u << 1) | 1]);
            }
        }
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        words.extend((0..100_000).map(|_| rng.next_u64()));
        for r in words {
            assert_eq!(g.sample_word(r), reference(r), "word {r:#x}");
        }
    }
}
