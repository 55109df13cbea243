//! Precision statistics, after Lattigo's `PrecisionStats`: the `log2` of the absolute error per
//! slot, summarized by minimum, mean and median precision (in bits), for the real and imaginary
//! parts separately. Higher is better: 20 bits means an error of about 10^-6.

use super::encoder::C64;
use alloc::vec::Vec;

/// Precision of one part (real or imaginary).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PartStats {
    /// Worst slot: `-log2(max |err|)`.
    pub min_bits: f64,
    /// `-log2` of the mean absolute error.
    pub avg_bits: f64,
    /// `-log2` of the median absolute error.
    pub median_bits: f64,
    /// The largest absolute error.
    pub max_err: f64,
}

/// Precision of a decrypted vector against its reference.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PrecisionStats {
    /// Real parts.
    pub real: PartStats,
    /// Imaginary parts.
    pub imag: PartStats,
}

fn bits(err: f64) -> f64 {
    // Precision is capped at 64 bits (an exact slot).
    -libm::log2(err.max(libm::ldexp(1.0, -64)))
}

fn part(mut errs: Vec<f64>) -> PartStats {
    if errs.is_empty() {
        return PartStats::default();
    }
    errs.sort_by(|a, b| a.partial_cmp(b).unwrap_or(core::cmp::Ordering::Equal));
    let max = *errs.last().unwrap();
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    let median = errs[errs.len() / 2];
    PartStats {
        min_bits: bits(max),
        avg_bits: bits(mean),
        median_bits: bits(median),
        max_err: max,
    }
}

impl PrecisionStats {
    /// Compares `got` with `want` slot by slot (over the shorter of the two).
    pub fn compute(want: &[C64], got: &[C64]) -> Self {
        let re = want
            .iter()
            .zip(got)
            .map(|(a, b)| libm::fabs(a.re - b.re))
            .collect();
        let im = want
            .iter()
            .zip(got)
            .map(|(a, b)| libm::fabs(a.im - b.im))
            .collect();
        Self {
            real: part(re),
            imag: part(im),
        }
    }

    /// The worst of the real and imaginary minimum precisions.
    pub fn min_bits(&self) -> f64 {
        self.real.min_bits.min(self.imag.min_bits)
    }
}

impl core::fmt::Display for PrecisionStats {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "re min/avg/med {:.1}/{:.1}/{:.1} bits, im {:.1}/{:.1}/{:.1} bits",
            self.real.min_bits,
            self.real.avg_bits,
            self.real.median_bits,
            self.imag.min_bits,
            self.imag.avg_bits,
            self.imag.median_bits
        )
    }
}
