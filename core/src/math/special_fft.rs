//! The index arithmetic of the CKKS "special FFT" (Cheon–Kim–Kim–Song 2017, HEAAN), shared by the
//! floating-point encoder ([`crate::ckks::Encoder`]) and the integer share maps of the CKKS↔MPC
//! conversion ([`crate::convert`]).
//!
//! With `n` slots over a ring of degree `N`, slot `j` sits at the root `ζ^{5^j}` of `X^N + 1`
//! (`ζ = e^{iπ/N}`). Decoding evaluates the `n`-point "coefficient vector"
//! `v_i = c_i + i·c_{i+n}` at those roots: a bit reversal followed by `log2 n` radix-2
//! decimation-in-time stages of lengths `len = 2, 4, …, n`, whose butterfly `j < len/2` multiplies
//! by the `4len`-th root of unity `e^{2πi·r_j/4len}`, `r_j = 5^j mod 4len`. Encoding runs the
//! inverse: decimation-in-frequency stages `len = n, n/2, …, 2` with the conjugate roots, then the
//! bit reversal (and a `1/n` the caller applies in its own arithmetic).
//!
//! Everything here is exact integer index arithmetic (plus the octant-reduced unit roots and
//! their fixed-point roundings): the callers supply the arithmetic of the butterflies, in `f64`
//! or on secret shares, and visit them in the order fixed here.

use alloc::vec::Vec;
use core::f64::consts::PI;

/// The bit-reversal permutation of a power-of-two-length slice, in place.
pub fn bit_reverse<T>(v: &mut [T]) {
    let n = v.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j ^= bit;
        if i < j {
            v.swap(i, j);
        }
    }
}

/// The rotation group `5^j mod 2N` for `j < count` (`N = n_ring`): slot `j` sits at `ζ^{5^j}`.
pub fn rot_group(n_ring: usize, count: usize) -> Vec<u64> {
    let m = 2 * n_ring as u64;
    let mut g = 1u64;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(g);
        g = (g * 5) % m;
    }
    out
}

/// `(cos, sin)(2π·r/m)` for a power of two `m ≥ 8` and `r < m`, evaluated at an angle reduced to
/// `[0, π/4]` by the symmetries of the circle (the reduction is exact integer arithmetic, so the
/// only error is `libm`'s, within one ulp).
pub fn unit_root(r: u64, m: u64) -> (f64, f64) {
    let quarter = m / 4;
    let (q, rr) = (r / quarter, r % quarter);
    let (c, s) = if 2 * rr <= quarter {
        let th = 2.0 * PI * rr as f64 / m as f64;
        (libm::cos(th), libm::sin(th))
    } else {
        let th = 2.0 * PI * (quarter - rr) as f64 / m as f64;
        (libm::sin(th), libm::cos(th))
    };
    match q {
        0 => (c, s),
        1 => (-s, c),
        2 => (-c, -s),
        _ => (s, -c),
    }
}

/// Appends the fixed-point twiddles of one stage of length `len`: for `j < len/2`,
/// `[round(2^t·cos θ_j), ±round(2^t·sin θ_j)]` with `θ_j = 2π·(5^j mod 4len)/4len` (the sine
/// negated for the inverse transform, i.e. the conjugate root).
pub fn fixed_twiddles(out: &mut Vec<[i64; 2]>, len: usize, t: u32, inverse: bool) {
    let two_t = libm::exp2(t as f64);
    let lenq = 4 * len as u64;
    let mut r = 1u64;
    for _ in 0..len / 2 {
        let (c, si) = unit_root(r, lenq);
        let si = libm::round(si * two_t) as i64;
        out.push([
            libm::round(c * two_t) as i64,
            if inverse { -si } else { si },
        ]);
        r = r * 5 % lenq;
    }
}

/// The fixed-point twiddles of a whole `n`-point transform, stage after stage in the order the
/// transform visits them (forward: `len = 2, 4, …, n`; inverse: `len = n, …, 2`): `n − 1`
/// entries, indexed by [`Butterfly::twiddle`].
pub fn fixed_twiddle_table(n: usize, t: u32, inverse: bool) -> Vec<[i64; 2]> {
    let mut tw = Vec::with_capacity(n.saturating_sub(1));
    for len in stage_lengths(n, inverse) {
        fixed_twiddles(&mut tw, len, t, inverse);
    }
    tw
}

/// The stage lengths of an `n`-point transform: `2, 4, …, n` forward, `n, …, 2` inverse.
pub fn stage_lengths(n: usize, inverse: bool) -> impl Iterator<Item = usize> {
    let stages = if n >= 2 { n.trailing_zeros() } else { 0 };
    (0..stages).map(move |s| if inverse { n >> s } else { 2 << s })
}

/// One butterfly of a special FFT: it combines `v[lo]` and `v[hi]` (`hi = lo + len/2`) with the
/// root `e^{±2πi·(5^j mod 4len)/4len}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Butterfly {
    /// Stage number in visiting order (`0` first).
    pub stage: usize,
    /// Stage length `len`.
    pub len: usize,
    /// Butterfly index within its block, `j < len/2` (selects the root).
    pub j: usize,
    /// Lower index.
    pub lo: usize,
    /// Upper index `lo + len/2`.
    pub hi: usize,
    /// Index of this butterfly's root in a table laid out stage after stage in visiting order
    /// ([`fixed_twiddle_table`]): the stage's offset plus `j`.
    pub twiddle: usize,
}

/// Visits the butterflies of an `n`-point transform in order: stage by stage
/// ([`stage_lengths`]), block by block, `j` ascending. The forward transform expects its input
/// bit-reversed first; the inverse one leaves its output to be bit-reversed after.
#[inline]
pub fn for_each_butterfly(n: usize, inverse: bool, mut f: impl FnMut(Butterfly)) {
    let mut offset = 0;
    for (stage, len) in stage_lengths(n, inverse).enumerate() {
        let lenh = len / 2;
        for i in (0..n).step_by(len) {
            for j in 0..lenh {
                f(Butterfly {
                    stage,
                    len,
                    j,
                    lo: i + j,
                    hi: i + j + lenh,
                    twiddle: offset + j,
                });
            }
        }
        offset += lenh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn bit_reverse_is_the_index_permutation() {
        let mut v: Vec<usize> = (0..16).collect();
        bit_reverse(&mut v);
        for (i, &x) in v.iter().enumerate() {
            assert_eq!(x, (i as u32).reverse_bits() as usize >> 28);
        }
    }

    #[test]
    fn rot_group_powers_of_five() {
        assert_eq!(rot_group(16, 5), vec![1, 5, 25, 125 % 32, 625 % 32]);
    }

    #[test]
    fn unit_roots_match_cis() {
        for m in [8u64, 64, 1 << 12] {
            for r in 0..m {
                let (c, s) = unit_root(r, m);
                let th = 2.0 * PI * r as f64 / m as f64;
                assert!((c - libm::cos(th)).abs() < 1e-15 && (s - libm::sin(th)).abs() < 1e-15);
            }
        }
    }

    /// The visitor covers every pair once per stage, and the twiddle index runs through the table
    /// in the order the stages are laid out.
    #[test]
    fn butterflies_cover_each_stage_and_index_the_table() {
        for inverse in [false, true] {
            let n = 32;
            let tw = fixed_twiddle_table(n, 20, inverse);
            assert_eq!(tw.len(), n - 1);
            let mut seen = vec![0usize; n.trailing_zeros() as usize];
            let mut last_stage = 0;
            for_each_butterfly(n, inverse, |b| {
                assert!(b.stage >= last_stage);
                last_stage = b.stage;
                assert_eq!(b.hi, b.lo + b.len / 2);
                let mut one = Vec::new();
                fixed_twiddles(&mut one, b.len, 20, inverse);
                assert_eq!(tw[b.twiddle], one[b.j]);
                seen[b.stage] += 1;
            });
            assert!(seen.iter().all(|&c| c == n / 2));
        }
    }
}
