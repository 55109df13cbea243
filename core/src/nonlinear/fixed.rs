//! Plain-integer fixed-point arithmetic shared by the blocks' references.
//!
//! Every block of [`crate::nonlinear`] has a reference that computes the same function on the
//! same integers as its protocol, with the protocol's rounding: a product of two values
//! with `a` and `b` fractional bits, truncated by `s`, is `⌊(x·y + 2^{s−1}) / 2^s⌋`
//! ([`round_shift`]). The protocols' truncations are *faithful* (the exact rounded
//! value or one less, [`crate::mpc::TruncMode::KnownMsb`]), so a block's output is
//! within a stated number of units in the last place (ulp) of its reference; the
//! blocks without truncation (MBLN, max pooling) match it exactly.

/// `⌊(v + 2^{s−1}) / 2^s⌋` (round half up); `v` itself for `s = 0`.
#[inline]
pub fn round_shift(v: i128, s: u32) -> i64 {
    if s == 0 {
        return v as i64;
    }
    ((v + (1i128 << (s - 1))) >> s) as i64
}

/// `round(v · 2^frac)` as a signed integer.
#[inline]
pub fn encode(v: f64, frac: u32) -> i64 {
    libm::round(v * libm::ldexp(1.0, frac as i32)) as i64
}

/// `v / 2^frac`.
#[inline]
pub fn decode(v: i64, frac: u32) -> f64 {
    v as f64 / libm::ldexp(1.0, frac as i32)
}

/// Rounded product `⌊(a·b + 2^{s−1}) / 2^s⌋`.
#[inline]
pub fn mul(a: i64, b: i64, s: u32) -> i64 {
    round_shift(a as i128 * b as i128, s)
}

/// Error statistics of a block's output against an `f64` reference.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrStats {
    /// Largest absolute error.
    pub max_abs: f64,
    /// Mean absolute error.
    pub mean_abs: f64,
    /// Number of compared values.
    pub count: usize,
}

impl ErrStats {
    /// Compares `got` against `want` element by element.
    pub fn of(got: &[f64], want: &[f64]) -> ErrStats {
        let n = got.len().min(want.len());
        let mut s = ErrStats {
            count: n,
            ..ErrStats::default()
        };
        for (g, w) in got.iter().zip(want) {
            let e = libm::fabs(g - w);
            if e > s.max_abs || e.is_nan() {
                s.max_abs = if e.is_nan() { f64::INFINITY } else { e };
            }
            s.mean_abs += e;
        }
        if n > 0 {
            s.mean_abs /= n as f64;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_half_up_and_signed() {
        assert_eq!(round_shift(5, 1), 3);
        assert_eq!(round_shift(-5, 1), -2);
        assert_eq!(round_shift(-6, 2), -1);
        assert_eq!(mul(encode(1.5, 13), encode(-2.0, 13), 13), encode(-3.0, 13));
        let e = ErrStats::of(&[1.0, 2.0], &[1.5, 2.0]);
        assert_eq!((e.max_abs, e.mean_abs, e.count), (0.5, 0.25, 2));
    }
}
