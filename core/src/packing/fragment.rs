//! FEnc2's fragment encoding (Conv-aware Encoding, §IV-B, Algorithm 1): a 4-D tensor
//! `X ∈ R^{BS×C×H×W}` ↔ CKKS slot vectors.
//!
//! The feature map is zero-padded to an `M × M` grid (`M` a power of two, or any side when one
//! block covers the grid, `S = M`) and cut into an
//! `m × m` grid of `S × S` blocks, `m = M / S`. Ciphertext `(g, u, v)` holds the pixel at
//! intra-block position `(u, v)` of every block, for every sample and for the channels of group
//! `g`. Within a ciphertext, slot
//!
//! ```text
//! l = t·(BS·m²) + (i·m + j)·BS + b
//! ```
//!
//! holds sample `b`, block `(i, j)` (pixel `(i·S + u, j·S + v)`) and channel `c = g·α + t`, where
//! `α = n / (BS·m²)` channels share one ciphertext (Algorithm 1's `i = ⌊l / BS·m²⌋`,
//! `j = l mod BS`, `k = ⌊l / BS⌋ mod m²`). The batch is innermost, then the block, then the
//! channel. Because `BS`, `m` and `n` are powers of two, a rotation by a multiple of the chunk
//! `BS·m²` permutes whole channels cyclically, and a rotation by `(q·m + r)·BS` moves every block
//! by `(q, r)` — the two kinds of rotation a convolution needs (outer and inner).
//!
//! `S = 1`, `BS = 1` is row-major packing (CHET, Orion); `S = M` is pixel-wise packing
//! (CryptoNets). A large batch that fills a ciphertext with one channel (`α = 1`) is FEnc2's
//! large-batch mode, where outer rotations vanish.

use crate::error::{Error, Result};
use alloc::vec;
use alloc::vec::Vec;

/// The fragment layout of one tensor: its shape, the padded grid, the block size and the slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentLayout {
    /// Samples `BS` (a power of two).
    pub batch: usize,
    /// Channels `C`.
    pub channels: usize,
    /// Feature-map height `H` (the valid rows; the rest of the grid is padding).
    pub height: usize,
    /// Feature-map width `W`.
    pub width: usize,
    /// The padded grid side `M` (`M ≥ max(H, W)`; a power of two unless `S = M`).
    pub grid: usize,
    /// The block side `S` (a power of two dividing `M`, or `M` itself).
    pub block: usize,
    /// Slots per ciphertext `n` (a power of two).
    pub slots: usize,
}

/// Where one tensor element lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRef {
    /// The ciphertext index ([`FragmentLayout::ct_index`]).
    pub ct: usize,
    /// The slot within it.
    pub slot: usize,
}

impl FragmentLayout {
    /// A validated layout. `grid` is the padded side `M`; pass `None` for FEnc2's default
    /// `M = pad(max(H, W))`, the next power of two.
    pub fn new(
        batch: usize,
        channels: usize,
        height: usize,
        width: usize,
        grid: Option<usize>,
        block: usize,
        slots: usize,
    ) -> Result<Self> {
        if batch == 0 || channels == 0 || height == 0 || width == 0 {
            return Err(Error::InvalidParameters(
                "fragment layout: batch, channels, height and width must be positive",
            ));
        }
        let grid = grid.unwrap_or_else(|| height.max(width).next_power_of_two());
        if !batch.is_power_of_two() {
            return Err(Error::InvalidParameters(
                "fragment layout: the batch must be a power of two",
            ));
        }
        // One block covering the whole grid (`m = 1`) needs no power of two: no rotation ever
        // moves a block, so the grid may be the feature map itself.
        let whole = block == grid;
        if (!whole && !grid.is_power_of_two()) || grid < height.max(width) {
            return Err(Error::InvalidParameters(
                "fragment layout: the grid must cover the feature map, and be a power of two unless one block covers it",
            ));
        }
        if (!whole && !block.is_power_of_two()) || block > grid {
            return Err(Error::InvalidParameters(
                "fragment layout: the block size must be a power of two no larger than the grid",
            ));
        }
        if !slots.is_power_of_two() {
            return Err(Error::InvalidParameters(
                "fragment layout: the slot count must be a power of two",
            ));
        }
        let l = Self {
            batch,
            channels,
            height,
            width,
            grid,
            block,
            slots,
        };
        if l.chunk() > slots {
            return Err(Error::Shape {
                what: "slots of one channel chunk (batch × blocks) against the ciphertext's",
                expected: slots,
                found: l.chunk(),
            });
        }
        Ok(l)
    }

    /// The same layout with another channel count (a convolution's output).
    pub fn with_channels(&self, channels: usize) -> Result<Self> {
        Self::new(
            self.batch,
            channels,
            self.height,
            self.width,
            Some(self.grid),
            self.block,
            self.slots,
        )
    }

    /// Whether the batch fills the slots with one pixel of one channel per ciphertext
    /// (`S = M` and `BS = n`): FEnc2's large-batch mode at its limit, where no layer rotates.
    pub fn is_pixelwise(&self) -> bool {
        self.blocks() == 1 && self.chunk() == self.slots
    }

    /// Blocks per side `m = M / S`.
    pub fn blocks(&self) -> usize {
        self.grid / self.block
    }

    /// Slots of one channel: `BS·m²`.
    pub fn chunk(&self) -> usize {
        self.batch * self.blocks() * self.blocks()
    }

    /// Channels per ciphertext `α = n / (BS·m²)` (the capacity; the last group may hold fewer).
    pub fn channels_per_ct(&self) -> usize {
        self.slots / self.chunk()
    }

    /// Channel groups `⌈C / α⌉`.
    pub fn groups(&self) -> usize {
        self.channels.div_ceil(self.channels_per_ct())
    }

    /// Ciphertexts `S²·⌈C / α⌉`.
    pub fn ciphertexts(&self) -> usize {
        self.block * self.block * self.groups()
    }

    /// The index of ciphertext `(g, u, v)`: `(g·S + u)·S + v`.
    pub fn ct_index(&self, group: usize, u: usize, v: usize) -> usize {
        (group * self.block + u) * self.block + v
    }

    /// `(g, u, v)` of a ciphertext index.
    pub fn ct_coords(&self, ct: usize) -> (usize, usize, usize) {
        let s = self.block;
        (ct / (s * s), (ct / s) % s, ct % s)
    }

    /// The slot of sample `b`, chunk `t` (channel `g·α + t`) and block `(i, j)`.
    pub fn slot(&self, t: usize, i: usize, j: usize, b: usize) -> usize {
        t * self.chunk() + (i * self.blocks() + j) * self.batch + b
    }

    /// Where element `(b, c, y, x)` lives (`y < M`, `x < M`; padding positions included).
    pub fn locate(&self, b: usize, c: usize, y: usize, x: usize) -> SlotRef {
        let (s, a) = (self.block, self.channels_per_ct());
        SlotRef {
            ct: self.ct_index(c / a, y % s, x % s),
            slot: self.slot(c % a, y / s, x / s, b),
        }
    }

    /// The fraction of all slots that hold a valid element, `BS·C·H·W / (cts·n)`.
    pub fn utilization(&self) -> f64 {
        (self.batch * self.channels * self.height * self.width) as f64
            / (self.ciphertexts() * self.slots) as f64
    }

    /// The elements of a tensor in this layout: `BS·C·H·W`.
    pub fn len(&self) -> usize {
        self.batch * self.channels * self.height * self.width
    }

    /// Whether the tensor is empty (never, for a validated layout).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Packs a tensor given in `(b, c, y, x)` row-major order into slot vectors, zero elsewhere.
    pub fn pack(&self, tensor: &[f64]) -> Result<Vec<Vec<f64>>> {
        if tensor.len() != self.len() {
            return Err(Error::Shape {
                what: "elements of the tensor to pack (batch × channels × height × width)",
                expected: self.len(),
                found: tensor.len(),
            });
        }
        let mut cts = vec![vec![0.0; self.slots]; self.ciphertexts()];
        let (c_, h, w) = (self.channels, self.height, self.width);
        for b in 0..self.batch {
            for c in 0..c_ {
                for y in 0..h {
                    for x in 0..w {
                        let r = self.locate(b, c, y, x);
                        cts[r.ct][r.slot] = tensor[((b * c_ + c) * h + y) * w + x];
                    }
                }
            }
        }
        Ok(cts)
    }

    /// Reads a tensor back from slot vectors (the inverse of [`FragmentLayout::pack`] on the
    /// valid elements).
    pub fn unpack(&self, cts: &[Vec<f64>]) -> Result<Vec<f64>> {
        if cts.len() != self.ciphertexts() {
            return Err(Error::Shape {
                what: "ciphertexts of the fragment layout",
                expected: self.ciphertexts(),
                found: cts.len(),
            });
        }
        if let Some(bad) = cts.iter().find(|c| c.len() != self.slots) {
            return Err(Error::SlotCount {
                given: bad.len(),
                slots: self.slots,
            });
        }
        let (c_, h, w) = (self.channels, self.height, self.width);
        let mut out = vec![0.0; self.len()];
        for b in 0..self.batch {
            for c in 0..c_ {
                for y in 0..h {
                    for x in 0..w {
                        let r = self.locate(b, c, y, x);
                        out[((b * c_ + c) * h + y) * w + x] = cts[r.ct][r.slot];
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_1_mapping() {
        // Fig. 4 (b): 1×16×4×4, S = 2, 16 slots: four ciphertexts, four channels each.
        let l = FragmentLayout::new(1, 16, 4, 4, None, 2, 16).unwrap();
        assert_eq!((l.blocks(), l.chunk(), l.channels_per_ct()), (2, 4, 4));
        assert_eq!(l.ciphertexts(), 16);
        assert_eq!(l.utilization(), 1.0);
        // Pixels a, b, e, f of Fig. 4 (block (0,0)) go to the same slot of four ciphertexts.
        let slots: Vec<SlotRef> = [(0, 0), (0, 1), (1, 0), (1, 1)]
            .iter()
            .map(|&(y, x)| l.locate(0, 0, y, x))
            .collect();
        assert!(slots.iter().all(|r| r.slot == 0));
        let mut cts: Vec<usize> = slots.iter().map(|r| r.ct).collect();
        cts.sort_unstable();
        cts.dedup();
        assert_eq!(cts.len(), 4);
        // Batch innermost, then block, then channel.
        let l = FragmentLayout::new(4, 3, 8, 8, None, 2, 256).unwrap();
        assert_eq!(l.locate(1, 0, 0, 0).slot, 1);
        assert_eq!(l.locate(0, 0, 0, 2).slot, 4);
        assert_eq!(l.locate(0, 0, 2, 0).slot, 4 * 4);
        assert_eq!(l.locate(0, 1, 0, 0).slot, 64);
    }

    #[test]
    fn pack_unpack_round_trip() {
        for &(bs, c, h, s, n) in &[(1, 3, 5, 1, 64), (2, 5, 7, 2, 128), (4, 2, 4, 4, 64)] {
            let l = FragmentLayout::new(bs, c, h, h, None, s, n).unwrap();
            let t: Vec<f64> = (0..l.len()).map(|i| i as f64 * 0.5 - 3.0).collect();
            let cts = l.pack(&t).unwrap();
            assert_eq!(cts.len(), l.ciphertexts());
            // Every slot holds at most one element and the rest are zero.
            let nonzero: usize = cts.iter().flatten().filter(|v| **v != 0.0).count();
            assert!(nonzero <= l.len());
            assert_eq!(l.unpack(&cts).unwrap(), t);
        }
    }

    #[test]
    fn bad_layouts_are_refused() {
        assert!(FragmentLayout::new(3, 1, 4, 4, None, 1, 64).is_err());
        assert!(FragmentLayout::new(1, 1, 4, 4, None, 3, 64).is_err());
        assert!(FragmentLayout::new(1, 1, 4, 4, Some(2), 1, 64).is_err());
        assert!(FragmentLayout::new(1, 1, 32, 32, None, 1, 512).is_err());
        assert!(FragmentLayout::new(1, 0, 4, 4, None, 1, 64).is_err());
        let l = FragmentLayout::new(1, 2, 4, 4, None, 1, 64).unwrap();
        assert_eq!(l.ciphertexts(), 1);
        assert!(l.pack(&[0.0; 3]).is_err());
        assert!(l.unpack(&[vec![0.0; 64], vec![0.0; 64]]).is_err());
        assert!(l.unpack(&[vec![0.0; 32]]).is_err());
        assert!(l.unpack(&[vec![0.0; 64]]).is_ok());
    }
}
