//! AVX-512 code generation for the fast path's element-wise passes.
//!
//! A loop run through [`vectorize`] is compiled with the x86-64-v4 features enabled, so LLVM
//! emits 512-bit lanes for it (`vpaddq`, `vpminuq`, masked moves) instead of the baseline's
//! scalar or SSE2 code. Detection is at run time by `pulp`'s feature tokens; without AVX-512 the
//! same loop runs as compiled for the baseline. The arithmetic is unchanged, so the words are the
//! reference's.
//!
//! [`stream`] is the one hand-written kernel: additions and subtractions with streaming stores,
//! for outputs much larger than the caches. Its 512-bit loop is unsafe code (the intrinsics take
//! raw pointers; the backend's only other unsafe code is `set_len_written`, after the loops that
//! fill a new buffer); it runs only with the token as proof of the features.

/// The x86-64-v4 token (AVX-512F/BW/CD/DQ/VL on top of AVX2).
#[cfg(target_arch = "x86_64")]
pub(crate) type Wide = pulp::x86::V4;

/// Uninhabited off x86-64.
#[cfg(not(target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wide {}

/// The token, where the CPU has the features.
#[cfg(target_arch = "x86_64")]
pub(crate) fn detect() -> Option<Wide> {
    Wide::try_new()
}

/// Not x86-64: none.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn detect() -> Option<Wide> {
    None
}

/// Runs `f` with the token's features enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn vectorize<R>(w: Wide, f: impl FnOnce() -> R) -> R {
    w.vectorize(f)
}

/// Not x86-64: never called ([`detect`] is `None`).
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn vectorize<R>(w: Wide, _f: impl FnOnce() -> R) -> R {
    match w {}
}

/// An element-wise modular pass that [`stream`] runs with non-temporal stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lin {
    /// `(a + b) mod q`, as [`veil_core::math::Modulus::add`].
    Add,
    /// `(a − b) mod q`, as [`veil_core::math::Modulus::sub`].
    Sub,
}

impl Lin {
    /// One word: [`veil_core::math::Modulus::add`] or `sub`, the scalar form of the 512-bit lanes.
    #[inline(always)]
    pub(crate) fn apply(self, m: &veil_core::math::Modulus, a: u64, b: u64) -> u64 {
        match self {
            Lin::Add => m.add(a, b),
            Lin::Sub => m.sub(a, b),
        }
    }
}

/// `out[i] = op(a[i], b[i]) mod q`, written with non-temporal (streaming) stores: the output
/// bypasses the caches and is not read before it is written, which saves the write-allocate read
/// of every output line. For outputs far larger than the caches (a top-level ciphertext at
/// N = 2^16 is 8.9 MB a polynomial) that is a quarter of a memory-bound pass's traffic; for small
/// ones it would evict data the next operation reads, so the caller decides. Every word of `out`
/// is written (the head up to the first 64-byte boundary and the tail in scalar code); the words
/// are those of the scalar `Modulus::add` / `sub` (the same three operations on each lane).
#[cfg(target_arch = "x86_64")]
pub(crate) fn stream(
    w: Wide,
    op: Lin,
    m: &veil_core::math::Modulus,
    a: &[u64],
    b: &[u64],
    out: &mut [core::mem::MaybeUninit<u64>],
) {
    let n = out.len();
    assert!(a.len() >= n && b.len() >= n, "stream: short inputs");
    // Scalar head: up to the first 64-byte-aligned output word (a streaming store needs it).
    let head = out.as_ptr().align_offset(64).min(n);
    for i in 0..head {
        out[i].write(op.apply(m, a[i], b[i]));
    }
    let body = (n - head) / 8 * 8;
    let _ = w; // The token proves AVX-512F is present, which `stream_body` requires.
    #[allow(unsafe_code)]
    // SAFETY: the token `w` exists only where the CPU has AVX-512F (`detect`); `stream_body`
    // reads `a`, `b` and writes `out` at `head..head + body` only, within their lengths (checked
    // above: `head + body ≤ n ≤ len`), with `out[head]` 64-byte aligned.
    unsafe {
        stream_body(
            op,
            m.value(),
            &a[head..head + body],
            &b[head..head + body],
            &mut out[head..head + body],
        )
    };
    for i in head + body..n {
        out[i].write(op.apply(m, a[i], b[i]));
    }
}

/// The 512-bit loop of [`stream`]: eight words a step, `out` 64-byte aligned, every length a
/// multiple of 8 and equal.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx512f")]
unsafe fn stream_body(
    op: Lin,
    q: u64,
    a: &[u64],
    b: &[u64],
    out: &mut [core::mem::MaybeUninit<u64>],
) {
    use core::arch::x86_64::*;
    let n = out.len();
    debug_assert!(a.len() == n && b.len() == n && n.is_multiple_of(8));
    debug_assert!(out.as_ptr().align_offset(64) == 0 || n == 0);
    let qv = _mm512_set1_epi64(q as i64);
    let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr() as *mut u64);
    let mut i = 0;
    while i < n {
        // SAFETY: `i + 8 ≤ n` words of each slice; unaligned loads; `po + i` is 64-byte aligned
        // (`po` is and `i` is a multiple of 8 words).
        unsafe {
            let x = _mm512_loadu_si512(pa.add(i) as *const _);
            let y = _mm512_loadu_si512(pb.add(i) as *const _);
            let s = match op {
                Lin::Add => _mm512_add_epi64(x, y),
                Lin::Sub => _mm512_sub_epi64(_mm512_add_epi64(x, qv), y),
            };
            let r = _mm512_min_epu64(s, _mm512_sub_epi64(s, qv));
            _mm512_stream_si512(po.add(i) as *mut _, r);
        }
        i += 8;
    }
    // Streaming stores are weakly ordered: fence before the buffer is handed on.
    _mm_sfence();
}

/// Not x86-64: never called ([`detect`] is `None`).
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn stream(
    w: Wide,
    _op: Lin,
    _m: &veil_core::math::Modulus,
    _a: &[u64],
    _b: &[u64],
    _out: &mut [core::mem::MaybeUninit<u64>],
) {
    match w {}
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use core::mem::MaybeUninit;

    /// Every offset and length around the 64-byte alignment and the 8-word steps: the scalar
    /// head and tail and the streamed body together write each word (a word left at the
    /// sentinel `u64::MAX` fails), and the words are the scalar ones.
    #[test]
    #[allow(unsafe_code)]
    fn stream_writes_every_word_as_the_scalar_code() {
        use veil_core::math::{primes::ntt_primes, Modulus};
        let Some(w) = detect() else {
            eprintln!("no AVX-512 here: the streaming kernel is not exercised");
            return;
        };
        let q = ntt_primes(60, 1 << 10, 1, &[]).unwrap()[0];
        let m = Modulus::new(q).unwrap();
        // Uniform words with the edges 0 and q − 1 spread over head, body and tail lanes.
        let word = |i: u64, k: u64| match (i % 13, i % 17) {
            (0, _) => q - 1,
            (_, 0) => 0,
            _ => i.wrapping_mul(k) % q,
        };
        let a: Vec<u64> = (0..300u64)
            .map(|i| word(i, 0x9E37_79B9_7F4A_7C15))
            .collect();
        let b: Vec<u64> = (0..300u64)
            .map(|i| word(i + 5, 0xC2B2_AE3D_27D4_EB4F))
            .collect();
        for op in [Lin::Add, Lin::Sub] {
            for start in 0..9 {
                for len in [0, 1, 7, 8, 9, 63, 64, 65, 200] {
                    let mut buf = vec![MaybeUninit::new(u64::MAX); 300];
                    stream(
                        w,
                        op,
                        &m,
                        &a[..len],
                        &b[..len],
                        &mut buf[start..start + len],
                    );
                    for i in 0..len {
                        // SAFETY: every slot was initialized when `buf` was made.
                        let got = unsafe { buf[start + i].assume_init() };
                        let want = op.apply(&m, a[i], b[i]);
                        assert_eq!(got, want, "{op:?} start {start} len {len} word {i}");
                    }
                }
            }
        }
    }
}
