//! Lazy multiply-accumulate of [`PolyBackend::mul_sum_subring`](veil_core::backend::PolyBackend)
//! with AVX-512 IFMA, for rows whose prime is below `2^52`.
//!
//! Both factors are then below `2^52`, and `vpmadd52luq` / `vpmadd52huq` add the low and high
//! 52 bits of each 104-bit product to two 64-bit lanes. A lane takes `2^12` such additions
//! without overflow ([`MAX_TERMS`]); the sum is `hi·2^52 + lo`, reduced once per coefficient by
//! the caller. That is the same integer as the scalar `u128` sum, so the words are identical.
//! The scalar path stays for other primes and for CPUs without IFMA (detected at run time, by
//! `pulp`'s feature tokens: no `unsafe` here).

/// Terms one pair of lanes sums exactly: each adds below `2^52` to the low lane.
pub(crate) const MAX_TERMS: usize = 1 << 12;

#[cfg(target_arch = "x86_64")]
pulp::simd_type! {
    /// AVX-512F with IFMA.
    pub(crate) struct Ifma {
        pub avx512f: "avx512f",
        pub avx512ifma: "avx512ifma",
    }
}

/// The IFMA token, where the CPU has it.
#[cfg(target_arch = "x86_64")]
pub(crate) fn detect() -> Option<Ifma> {
    Ifma::try_new()
}

/// Not x86-64: no IFMA.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn detect() -> Option<Ifma> {
    None
}

/// Uninhabited off x86-64.
#[cfg(not(target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ifma {}

/// One term of a subring sum over a block of coefficients starting at column `col`:
/// `lo[i] + hi[i]·2^52 += x[i] · w[(col + i) >> log_gap]` for `i < x.len()`, where `w` is the
/// term's compact row. `x.len()` and `col` are multiples of 8, and every word is below `2^52`.
#[cfg(target_arch = "x86_64")]
pub(crate) fn accumulate(
    simd: Ifma,
    lo: &mut [u64],
    hi: &mut [u64],
    x: &[u64],
    w: &[u64],
    col: usize,
    log_gap: u32,
) {
    use core::arch::x86_64::__m512i;
    use pulp::cast;
    let len = x.len();
    assert!(len.is_multiple_of(8) && col.is_multiple_of(8));
    simd.vectorize(
        #[inline(always)]
        || {
            let ifma = simd.avx512ifma;
            let xs = pulp::as_arrays::<8, u64>(x).0;
            let los = pulp::as_arrays_mut::<8, u64>(&mut lo[..len]).0;
            let his = pulp::as_arrays_mut::<8, u64>(&mut hi[..len]).0;
            for (j, ((xv, l), h)) in xs.iter().zip(los).zip(his).enumerate() {
                let pos = col + 8 * j;
                let k = pos >> log_gap;
                // The compact words of positions pos..pos+8: runs of g = 2^log_gap.
                let wv: [u64; 8] = match log_gap {
                    0 => *pulp::as_arrays::<8, u64>(&w[k..k + 8]).0.first().unwrap(),
                    1 => [
                        w[k],
                        w[k],
                        w[k + 1],
                        w[k + 1],
                        w[k + 2],
                        w[k + 2],
                        w[k + 3],
                        w[k + 3],
                    ],
                    2 => [
                        w[k],
                        w[k],
                        w[k],
                        w[k],
                        w[k + 1],
                        w[k + 1],
                        w[k + 1],
                        w[k + 1],
                    ],
                    _ => [w[k]; 8],
                };
                let (xv, wv): (__m512i, __m512i) = (cast(*xv), cast(wv));
                *l = cast(ifma._mm512_madd52lo_epu64(cast(*l), xv, wv));
                *h = cast(ifma._mm512_madd52hi_epu64(cast(*h), xv, wv));
            }
        },
    )
}

/// Not x86-64: never called ([`detect`] is `None`).
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn accumulate(
    simd: Ifma,
    _lo: &mut [u64],
    _hi: &mut [u64],
    _x: &[u64],
    _w: &[u64],
    _col: usize,
    _log_gap: u32,
) {
    match simd {}
}
