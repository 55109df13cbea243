//! Ferret's local linear code: `A ∈ F_2^{n×k}` with `d = 10` ones per row.
//!
//! Row `r` of `A` has ones at the columns `c_{r,0..d}` (with repetition, so
//! strictly at most `d` ones); the encoding of a vector `x ∈ F^k` (bits or
//! 128-bit blocks) is `(A·x)_r = ⊕_{i<d} x[c_{r,i}]`. The columns are public and
//! pseudorandom: row pair `p = ⌊r/2⌋` takes the AES-128 encryptions of the
//! counters `5p, …, 5p+4` under a fixed public key, read as twenty
//! little-endian `u32` words `w_0..w_19`; row `2p + s` uses `w_{10s..10s+10}`,
//! and `c = ⌊w·k / 2^32⌋` (bias below `k/2^32`, as in emp-ot's `LpnF2`, which
//! reduces `w mod k`). This is the code of Ferret (Yang et al. CCS 2020, §5),
//! instantiated as emp-ot does with `d = 10`.

use crate::mpc::ot::PiKey;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::BlockEncrypt;
use aes::Aes128;

/// Ones per row.
pub const D: usize = 10;

/// Row pairs per AES batch.
const PAIRS: usize = 32;

/// The code for one dimension `k`.
#[derive(Clone)]
pub struct Lpn {
    aes: Aes128,
    k: usize,
}

impl core::fmt::Debug for Lpn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Lpn {{ k: {}, d: {D} }}", self.k)
    }
}

impl Lpn {
    /// The code of dimension `k` (`1 ≤ k < 2^32`).
    pub fn new(k: usize) -> Self {
        debug_assert!(k >= 1 && (k as u64) < (1u64 << 32));
        Lpn {
            aes: PiKey::Lpn.aes(),
            k,
        }
    }

    /// Dimension `k`.
    pub fn k(&self) -> usize {
        self.k
    }

    fn col(&self, w: u32) -> usize {
        ((w as u64 * self.k as u64) >> 32) as usize
    }

    /// The columns of row `r`, from the definition (one AES call per block;
    /// the reference of the tests).
    pub fn row(&self, r: usize) -> [usize; D] {
        let p = r / 2;
        let mut w = [0u32; 4 * 5];
        for b in 0..5 {
            let mut blk = GenericArray::from(((5 * p + b) as u128).to_le_bytes());
            self.aes.encrypt_block(&mut blk);
            for q in 0..4 {
                let mut x = [0u8; 4];
                x.copy_from_slice(&blk[4 * q..4 * q + 4]);
                w[4 * b + q] = u32::from_le_bytes(x);
            }
        }
        let s = (r % 2) * D;
        core::array::from_fn(|i| self.col(w[s + i]))
    }

    /// Calls `f(r, columns)` for every row `r` in `0..n`, generating the
    /// columns in AES batches (all columns of a batch first, so that the
    /// gathers of `f` are independent loads).
    fn for_rows(&self, n: usize, mut f: impl FnMut(usize, &[usize; D])) {
        let mut blk = [GenericArray::from([0u8; 16]); 5 * PAIRS];
        let mut cols = [[0usize; D]; 2 * PAIRS];
        let pairs = n.div_ceil(2);
        let k = self.k as u64;
        for p0 in (0..pairs).step_by(PAIRS) {
            let np = PAIRS.min(pairs - p0);
            for (i, b) in blk[..5 * np].iter_mut().enumerate() {
                *b = GenericArray::from(((5 * p0 + i) as u128).to_le_bytes());
            }
            self.aes.encrypt_blocks(&mut blk[..5 * np]);
            for p in 0..np {
                let mut w = [0u32; 20];
                for b in 0..5 {
                    let x = u128::from_le_bytes(blk[5 * p + b].into());
                    for q in 0..4 {
                        w[4 * b + q] = (x >> (32 * q)) as u32;
                    }
                }
                for s in 0..2 {
                    for i in 0..D {
                        cols[2 * p + s][i] = ((w[D * s + i] as u64 * k) >> 32) as usize;
                    }
                }
            }
            let r0 = 2 * p0;
            for (j, c) in cols[..(2 * np).min(n - r0)].iter().enumerate() {
                f(r0 + j, c);
            }
        }
    }

    /// `out[r] ^= (A·v)_r` for blocks (`v.len() == k`).
    pub fn encode_add(&self, v: &[u128], out: &mut [u128]) {
        debug_assert_eq!(v.len(), self.k);
        self.for_rows(out.len(), |r, c| {
            let mut a = 0u128;
            for &ci in c {
                a ^= v[ci];
            }
            out[r] ^= a;
        });
    }

    /// `out[r] ^= (A·w)_r` and `bits[r] ^= (A·x)_r` in one pass (the
    /// receiver: blocks `w` and their choice bits `x`, both of length `k`).
    pub fn encode_add_with_bits(&self, w: &[u128], x: &[u8], out: &mut [u128], bits: &mut [u8]) {
        debug_assert_eq!(w.len(), self.k);
        debug_assert_eq!(x.len(), self.k);
        debug_assert_eq!(out.len(), bits.len());
        self.for_rows(out.len(), |r, c| {
            let mut a = 0u128;
            let mut b = 0u8;
            for &ci in c {
                a ^= w[ci];
                b ^= x[ci];
            }
            out[r] ^= a;
            bits[r] ^= b & 1;
        });
    }
}
