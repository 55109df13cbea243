//! Launch geometry shared by every op family: the grid for `words` units and the row map that
//! tells a kernel which prime each row of a buffer is reduced by.

use cubecl::prelude::*;
use cubecl::server::Handle;

/// Units per cube for the one-unit-per-word kernels.
pub const CUBE_UNITS: u32 = 256;
/// The largest cube count along one axis every runtime accepts (WebGPU's limit).
const MAX_CUBES_PER_AXIS: u32 = 65_535;

/// Cube count and cube dimension covering `units` units (1-D, spilling into a second axis when
/// one is not enough). Kernels guard with `ABSOLUTE_POS < units`.
pub fn grid(units: usize) -> (CubeCount, CubeDim) {
    let cubes = units.div_ceil(CUBE_UNITS as usize).max(1) as u32;
    let count = if cubes <= MAX_CUBES_PER_AXIS {
        CubeCount::Static(cubes, 1, 1)
    } else {
        CubeCount::Static(MAX_CUBES_PER_AXIS, cubes.div_ceil(MAX_CUBES_PER_AXIS), 1)
    };
    (count, CubeDim::new_1d(CUBE_UNITS))
}

/// The rows a kernel runs over and their primes: row `r < bq` is reduced by the Q prime
/// `first + r`, row `r ≥ bq` by the special prime of global index `q_total + r - bq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowMap {
    /// Number of rows.
    pub rows: usize,
    /// `log2 N`.
    pub log_n: u32,
    /// Global index of the prime of row 0 (when `bq > 0`).
    pub first: u32,
    /// Number of leading Q rows.
    pub bq: u32,
    /// Number of Q primes of the parameter set.
    pub q_total: u32,
    /// Number of primes (Q and P) of the parameter set: the length of the modulus table.
    pub primes: usize,
}

impl RowMap {
    /// Number of words the map covers.
    pub fn words(&self) -> usize {
        self.rows << self.log_n
    }

    /// `rows` rows of a buffer as a kernel argument.
    pub fn arg<R: Runtime>(&self, h: &Handle) -> ArrayArg<R> {
        // SAFETY: the length only bounds the kernel's view; callers pass buffers holding at least
        // `rows` rows (the CKKS layer validates shapes at its entry points).
        #[allow(unsafe_code)]
        unsafe {
            ArrayArg::from_raw_parts(h.clone(), self.words().max(1))
        }
    }

    /// The modulus table (three words per prime) as a kernel argument.
    pub fn table<R: Runtime>(&self, h: &Handle) -> ArrayArg<R> {
        // SAFETY: the modulus table holds three words per prime of the parameter set.
        #[allow(unsafe_code)]
        unsafe {
            ArrayArg::from_raw_parts(h.clone(), 3 * self.primes)
        }
    }
}
