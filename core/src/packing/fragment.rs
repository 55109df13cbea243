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
    /// Intra-block positions sharing one ciphertext (FEnc2's Arch-aware Ct Compression, §IV-C):
    /// `1` is Algorithm 1's layout; `r > 1` packs the channel groups of `r` consecutive
    /// positions `(u, v)` into one ciphertext, each position in its own run of `α / r` chunks,
    /// so a tensor with fewer than `α` channels still fills its ciphertexts.
    pub fold: usize,
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
            fold: 1,
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

    /// The same tensor with `fold` intra-block positions per ciphertext (AAC). `fold` must be a
    /// power of two dividing both `S²` and the chunks per ciphertext `α`; `1` undoes it.
    pub fn with_fold(&self, fold: usize) -> Result<Self> {
        let positions = self.block * self.block;
        if fold == 0
            || !fold.is_power_of_two()
            || !positions.is_multiple_of(fold)
            || !self.channels_per_ct().is_multiple_of(fold)
        {
            return Err(Error::InvalidParameters(
                "fragment layout: the fold must be a power of two dividing S² and the channels per ciphertext",
            ));
        }
        Ok(Self { fold, ..*self })
    }

    /// The largest fold that still keeps every channel of a position in one run of chunks
    /// (`fold·⌈C⌉₂ ≤ α`, `⌈C⌉₂` the next power of two) and divides `S²`: the fold AAC applies
    /// when the channels leave a ciphertext partly empty. `1` when the channels fill it.
    pub fn compact_fold(&self) -> usize {
        let alpha = self.channels_per_ct();
        let need = self.channels.next_power_of_two();
        let positions = self.block * self.block;
        let mut r = 1;
        while r * 2 * need <= alpha && positions.is_multiple_of(r * 2) {
            r *= 2;
        }
        r
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

    /// Channels per group `α / fold`: the channels of one position in one ciphertext.
    pub fn group_width(&self) -> usize {
        self.channels_per_ct() / self.fold
    }

    /// Channel groups `⌈C / (α / fold)⌉`.
    pub fn groups(&self) -> usize {
        self.channels.div_ceil(self.group_width())
    }

    /// Ciphertexts `S²·groups / fold`.
    pub fn ciphertexts(&self) -> usize {
        self.block * self.block * self.groups() / self.fold
    }

    /// The ciphertext of group `g` at intra-block position `(u, v)`: `((g·S + u)·S + v) / fold`.
    pub fn ct_index(&self, group: usize, u: usize, v: usize) -> usize {
        ((group * self.block + u) * self.block + v) / self.fold
    }

    /// The first chunk of position `(u, v)`'s run within its ciphertext:
    /// `((u·S + v) mod fold)·(α / fold)` (0 without a fold).
    pub fn chunk_base(&self, u: usize, v: usize) -> usize {
        ((u * self.block + v) % self.fold) * self.group_width()
    }

    /// `(g, u, v)` of a ciphertext index: its first position when `fold > 1`
    /// ([`FragmentLayout::ct_positions`] lists all).
    pub fn ct_coords(&self, ct: usize) -> (usize, usize, usize) {
        let s = self.block;
        let p = ct * self.fold;
        (p / (s * s), (p / s) % s, p % s)
    }

    /// Every `(g, u, v)` held by ciphertext `ct`, in chunk order.
    pub fn ct_positions(&self, ct: usize) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let s = self.block;
        (ct * self.fold..(ct + 1) * self.fold).map(move |p| (p / (s * s), (p / s) % s, p % s))
    }

    /// The slot of sample `b`, chunk `t` (channel `g·α + t`) and block `(i, j)`.
    pub fn slot(&self, t: usize, i: usize, j: usize, b: usize) -> usize {
        t * self.chunk() + (i * self.blocks() + j) * self.batch + b
    }

    /// Where element `(b, c, y, x)` lives (`y < M`, `x < M`; padding positions included).
    pub fn locate(&self, b: usize, c: usize, y: usize, x: usize) -> SlotRef {
        let (s, a) = (self.block, self.group_width());
        let (u, v) = (y % s, x % s);
        SlotRef {
            ct: self.ct_index(c / a, u, v),
            slot: self.slot(self.chunk_base(u, v) + c % a, y / s, x / s, b),
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
    fn folded_layouts_fill_the_ciphertexts() {
        // Fig. 5's bottleneck: 2 channels in ciphertexts of 8 chunks, S = 2. Unfolded, 4
        // ciphertexts a quarter full; folded by 4, one full ciphertext.
        let l = FragmentLayout::new(1, 2, 4, 4, None, 2, 32).unwrap();
        assert_eq!((l.channels_per_ct(), l.ciphertexts()), (8, 4));
        assert_eq!(l.utilization(), 0.25);
        assert_eq!(l.compact_fold(), 4);
        let f = l.with_fold(4).unwrap();
        assert_eq!((f.ciphertexts(), f.group_width(), f.groups()), (1, 2, 1));
        assert_eq!(f.utilization(), 1.0);
        assert_eq!(f.ct_positions(0).count(), 4);
        // Position (0, 1) holds chunks 2..4, position (1, 1) chunks 6..8.
        assert_eq!(f.locate(0, 1, 0, 1).slot, 3 * f.chunk());
        assert_eq!(f.locate(0, 0, 1, 1).slot, 6 * f.chunk());
        for &(bs, c, h, s, n, r) in &[
            (1, 3, 8, 2, 256, 4),
            (2, 5, 8, 4, 2048, 2),
            (1, 6, 4, 2, 128, 2),
        ] {
            let l = FragmentLayout::new(bs, c, h, h, None, s, n)
                .unwrap()
                .with_fold(r)
                .unwrap();
            let t: Vec<f64> = (0..l.len()).map(|i| i as f64 + 1.0).collect();
            let cts = l.pack(&t).unwrap();
            assert_eq!(cts.len(), l.ciphertexts());
            let nonzero: usize = cts.iter().flatten().filter(|v| **v != 0.0).count();
            assert_eq!(nonzero, l.len(), "no two elements share a slot");
            assert_eq!(l.unpack(&cts).unwrap(), t);
        }
        assert!(l.with_fold(3).is_err() && l.with_fold(16).is_err());
        let full = FragmentLayout::new(1, 8, 4, 4, None, 2, 32).unwrap();
        assert_eq!(full.compact_fold(), 1);
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
