//! AVX-512 code generation for the fast path's element-wise passes.
//!
//! A loop run through [`vectorize`] is compiled with the x86-64-v4 features enabled, so LLVM
//! emits 512-bit lanes for it (`vpaddq`, `vpminuq`, masked moves) instead of the baseline's
//! scalar or SSE2 code. Detection is at run time by `pulp`'s feature tokens (no `unsafe` here);
//! without AVX-512 the same loop runs as compiled for the baseline. The arithmetic is unchanged,
//! so the words are the reference's.

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
