//! NTT-friendly prime generation: primes `q ≡ 1 (mod 2N)` so that `Z_q` holds a primitive
//! `2N`-th root of unity and the negacyclic NTT of length `N` exists.

use alloc::vec::Vec;

fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    ((a as u128 * b as u128) % m as u128) as u64
}

fn pow_mod(mut a: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1 % m;
    a %= m;
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, a, m);
        }
        a = mul_mod(a, a, m);
        e >>= 1;
    }
    r
}

/// Deterministic Miller–Rabin for all `u64` (the first twelve prime bases suffice below 2^64).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    for p in BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let mut d = n - 1;
    let mut s = 0;
    while d.is_multiple_of(2) {
        d /= 2;
        s += 1;
    }
    'outer: for a in BASES {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'outer;
            }
        }
        return false;
    }
    true
}

/// Generates `count` distinct primes `q ≡ 1 (mod 2n)` of exactly `bits` bits, the largest first
/// (walking down from `2^bits`). Primes in `exclude` are skipped. Returns `None` when the range is
/// exhausted or `bits` is outside `10..=61`.
pub fn ntt_primes(bits: u32, n: usize, count: usize, exclude: &[u64]) -> Option<Vec<u64>> {
    if !(10..=61).contains(&bits) {
        return None;
    }
    let m = 2 * n as u64;
    let lo_bound = 1u64 << (bits - 1);
    // The largest candidate k·2n + 1 below 2^bits.
    let mut cand = (1u64 << bits) - m + 1;
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        if cand <= lo_bound {
            return None;
        }
        if is_prime(cand) && !exclude.contains(&cand) {
            out.push(cand);
        }
        cand -= m;
    }
    Some(out)
}

/// Generates `count` primes `q ≡ 1 (mod 2n)` nearest to `2^bits` on either side, alternating
/// (`2^bits - k·2n + 1` and `2^bits + k·2n + 1`), so that their product stays close to
/// `2^(count·bits)`. Used for the scaling primes of CKKS, whose ratio to the scale `2^bits`
/// should be as close to one as possible. Primes in `exclude` are skipped.
pub fn ntt_primes_near(bits: u32, n: usize, count: usize, exclude: &[u64]) -> Option<Vec<u64>> {
    if !(10..=60).contains(&bits) {
        return None;
    }
    let m = 2 * n as u64;
    let center = 1u64 << bits;
    let mut below = center + 1 - m; // k = 1 below
    let mut above = center + 1; // k = 0 above (2^bits + 1 is prime only for Fermat primes)
    let mut out = Vec::with_capacity(count);
    let mut guard = 0u64;
    while out.len() < count {
        guard += 1;
        if guard > (1 << 22) || below < (1u64 << (bits - 1)) {
            return None;
        }
        // Prefer the side whose next candidate is closer to 2^bits.
        let take_above = (above - center) <= (center - below);
        let cand = if take_above { above } else { below };
        if take_above {
            above += m;
        } else {
            below -= m;
        }
        if is_prime(cand) && !exclude.contains(&cand) && !out.contains(&cand) {
            out.push(cand);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miller_rabin_small() {
        let naive = |n: u64| {
            n >= 2
                && (2..n)
                    .take_while(|d| d * d <= n)
                    .all(|d| !n.is_multiple_of(d))
        };
        for n in 0..5000u64 {
            assert_eq!(is_prime(n), naive(n), "{n}");
        }
        assert!(is_prime(0x1fffffffffe00001));
        assert!(!is_prime(0x1fffffffffe00001u64 * 3));
        // Carmichael numbers
        for c in [561u64, 1105, 1729, 2465, 2821, 6601, 8911, 3_215_031_751] {
            assert!(!is_prime(c));
        }
    }

    #[test]
    fn ntt_primes_have_the_form() {
        for (bits, logn) in [(60u32, 16u32), (40, 14), (50, 15), (61, 17)] {
            let n = 1usize << logn;
            let ps = ntt_primes(bits, n, 5, &[]).unwrap();
            for p in &ps {
                assert!(is_prime(*p));
                assert_eq!(p % (2 * n as u64), 1);
                assert_eq!(64 - p.leading_zeros(), bits);
            }
            let mut d = ps.clone();
            d.dedup();
            assert_eq!(d.len(), 5);
        }
        let near = ntt_primes_near(40, 1 << 15, 10, &[]).unwrap();
        for p in &near {
            assert!(is_prime(*p));
            assert_eq!(p % (1 << 16), 1);
            let r = *p as f64 / (1u64 << 40) as f64;
            assert!((r - 1.0).abs() < 1e-3);
        }
    }
}
