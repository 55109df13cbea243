//! Decode-time attention over a KV cache held encrypted at the server, under the client's key:
//! the homomorphic half of one generated token's attention (the softmax between the two halves
//! runs in MPC).
//!
//! # Layout
//!
//! Every ciphertext of a decode step is segment-column packed with segments of `t = n / d_h`
//! slots (`n` slots, `d_h` the head width), so a ciphertext has exactly `d_h` segments and
//! segment `j` holds dimension `j` of a head:
//!
//! * a **cache block** of KV head `g` holds `t` positions: slot `j·t + r` is `K_g[b·t + r][j]`
//!   (block `b`), likewise for `V`. The cache keeps `kv_heads` heads per layer, never one per
//!   query head: grouped-query attention reads KV head `g = h / (H / H_kv)` for query head `h`.
//! * a **query pair** holds two query heads `h, h'` that read the same KV head, as the real and
//!   imaginary parts, each *replicated* over the rows: slot `j·t + r` is `q_h[j] + i·q_{h'}[j]`
//!   for every `r` (the Q projection of a row-replicated input gives this layout directly;
//!   [`DecodeLayout::replicated`]). Since `K_g` is real, `(q_h + i·q_{h'}) ⊙ K_g` carries both
//!   heads' products at the cost of one.
//! * a new position's `k` and `v` are kept in row `pos mod t` of every segment (one plaintext
//!   mask, one level) and added into their block: [`EncKvCache::append`] masks row-replicated
//!   inputs, [`EncKvCache::append_rows`] takes rows [`unpack_qkv`] has already placed.
//!
//! # Compact conversions
//!
//! The replicated layouts carry each value `t` times (queries) or `d_h` times (probabilities),
//! and an M2C conversion costs a whole ciphertext whatever it carries. So the shares enter
//! compact and the server unpacks them, with the level the masks above spend anyway:
//! * [`unpack_qkv`]: the step's queries, keys and values as one row each of `⌈items / t⌉`
//!   ciphertexts (instead of `items`); per item a mask, a shift to its row (a rotation per set
//!   bit) and, for a query, `log₂ t` shift-and-add steps over the rows;
//! * [`spread_blocks`]: the probabilities' blocks as one segment offset each of
//!   `⌈blocks / d_h⌉` ciphertexts (instead of one per block); per block a mask, a shift to
//!   offset 0 and `log₂ d_h` shift-and-add steps over the group's segments.
//!
//! Each rotation is a shift by `±2^b` rows or `2^b` segments. At GPT2-base's shape (four heads
//! per ciphertext, `t = 32`) a step's q, k, v travel in one ciphertext instead of nine, and at
//! context 256 the probabilities in one instead of 24.
//!
//! With `k` **head groups** per ciphertext ([`DecodeLayout::grouped`]) the segments are
//! `k·d_h` and `t = n / (k·d_h)`: segment `i·d_h + j` holds dimension `j` of the `i`-th head
//! the ciphertext carries, so one key ciphertext holds `k` KV heads and one query ciphertext
//! `k` query pairs (one reading each). Fewer positions per block, but `k` times fewer
//! ciphertexts for the projection to produce and for a short context's conversions to carry:
//! the decode plan picks `k` for its context. The cache's kernels see only ciphertexts and
//! which key ciphertext each query ciphertext reads; every statement above holds per segment.
//!
//! # Kernels
//!
//! * [`EncKvCache::scores`]: per query pair and cache block, one tensor product, one
//!   relinearization and one rescale. The sum over the `d_h` dimensions is **not** done here:
//!   the conversion to MPC shares every slot anyway, so the parties add the `d_h` segments of
//!   their shares locally ([`DecodeLayout::fold_scores`]), which saves `log₂ d_h` rotations per
//!   ciphertext and no conversion traffic.
//! * [`EncKvCache::values`]: the probabilities, replicated over the segments by
//!   [`spread_blocks`] (slot `j·t + r` is `p_h[b·t + r] + i·p_{h'}[b·t + r]`,
//!   [`DecodeLayout::rows`]); per query
//!   pair, one tensor product per block summed before one relinearization and one rescale, then
//!   the sum over the `t` rows of each segment by doubling (`⌈log₂ t⌉` rotations), which leaves
//!   `o_h[j] + i·o_{h'}[j]` in row 0 of segment `j` ([`DecodeLayout::read_values`]): the input
//!   layout of the output projection (the other rows hold sums that run into the next
//!   segment, which the row-wise projection carries along and the conversion after it drops).
//!
//! Per generated token and layer the work is `pairs · blocks` tensor products and
//! relinearizations for the scores and `pairs · (blocks + ⌈log₂ t⌉)` operations for the
//! values, plus the unpackings: a mask and up to `2·log₂ t` rotations per `q`/`k`/`v`
//! ciphertext, a mask and up to `2·log₂ d_h` per probability block. Linear in the context (in
//! blocks of `t` positions), never quadratic, and nothing in the cache is recomputed.

use super::reference::rope;
use crate::circuits::exec::{accumulate, pt_key, Exec};
use crate::ckks::C64;
use crate::error::{Error, Result};
use crate::packing::{ChannelMap, Mat};
use crate::transformer::shift::rotate_sum;
use alloc::vec;
use alloc::vec::Vec;

/// The decode-step packing: `n` slots in `k·d_h` segments of `t = n / (k·d_h)` rows (`k`
/// head groups; one by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLayout {
    slots: usize,
    head_dim: usize,
    groups: usize,
    t: usize,
}

impl DecodeLayout {
    /// The layout for `slots` slots and heads of width `head_dim`, which must divide `slots`
    /// into at least two rows: one head per ciphertext.
    pub fn new(slots: usize, head_dim: usize) -> Result<Self> {
        Self::grouped(slots, head_dim, 1)
    }

    /// The layout with `groups` heads per ciphertext: `groups·head_dim` must divide `slots`
    /// into at least two rows.
    pub fn grouped(slots: usize, head_dim: usize, groups: usize) -> Result<Self> {
        let segs = head_dim.checked_mul(groups).unwrap_or(0);
        if segs == 0 || slots == 0 || !slots.is_multiple_of(segs) || slots / segs < 2 {
            return Err(Error::InvalidParameters(
                "decode layout: the heads' widths must divide the slots into at least two rows",
            ));
        }
        Ok(Self {
            slots,
            head_dim,
            groups,
            t: slots / segs,
        })
    }

    /// Heads per ciphertext.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Segments per ciphertext, `groups · d_h`.
    pub fn segments(&self) -> usize {
        self.groups * self.head_dim
    }

    /// Slots per ciphertext.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The head width `d_h`.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Rows per segment: the positions one cache block holds.
    pub fn t(&self) -> usize {
        self.t
    }

    /// Cache blocks holding `positions` positions.
    pub fn blocks(&self, positions: usize) -> usize {
        positions.div_ceil(self.t)
    }

    /// Slot values of a query ciphertext (or of a new key or value): `re[s] + i·im[s]` in every
    /// row of segment `s` (`re`, `im`: at most [`DecodeLayout::segments`] values; missing
    /// segments are zero). With one group, a head's `d_h` values.
    pub fn replicated(&self, re: &[f64], im: Option<&[f64]>) -> Vec<C64> {
        let mut v = vec![C64::default(); self.slots];
        for s in 0..self.segments().min(re.len()) {
            let z = C64::new(re[s], im.and_then(|x| x.get(s)).copied().unwrap_or(0.0));
            v[s * self.t..(s + 1) * self.t].fill(z);
        }
        v
    }

    /// Slot values of one block of probabilities: `re[r] + i·im[r]` in row `r` of every
    /// segment (`re`, `im`: at most `t` values; missing rows are zero).
    pub fn rows(&self, re: &[f64], im: Option<&[f64]>) -> Vec<C64> {
        let parts: Vec<_> = (0..self.groups).map(|_| (re, im)).collect();
        self.rows_grouped(&parts)
    }

    /// [`DecodeLayout::rows`] with each head group's own probabilities: `parts[i]` in the rows
    /// of group `i`'s segments (missing groups are zero).
    pub fn rows_grouped(&self, parts: &[(&[f64], Option<&[f64]>)]) -> Vec<C64> {
        let mut v = vec![C64::default(); self.slots];
        for (i, (re, im)) in parts.iter().enumerate().take(self.groups) {
            for r in 0..self.t.min(re.len()) {
                let z = C64::new(re[r], im.and_then(|x| x.get(r)).copied().unwrap_or(0.0));
                for j in 0..self.head_dim {
                    v[(i * self.head_dim + j) * self.t + r] = z;
                }
            }
        }
        v
    }

    /// The scores of one block from the slots of [`EncKvCache::scores`]' output (or from each
    /// party's shares of them): `Σ_j slot[(i·d_h + j)·t + r]` for group `i` and row `r`, at
    /// index `i·t + r`.
    pub fn fold_scores<T: Copy + core::ops::Add<Output = T>>(&self, slots: &[T]) -> Vec<T> {
        let (t, dh) = (self.t, self.head_dim);
        (0..self.groups * t)
            .map(|e| {
                let (i, r) = (e / t, e % t);
                (1..dh).fold(slots[i * dh * t + r], |a, j| {
                    a + slots[(i * dh + j) * t + r]
                })
            })
            .collect()
    }

    /// The attention outputs from the slots of [`EncKvCache::values`]' output: row 0 of each
    /// segment (group `i`'s dimension `j` at index `i·d_h + j`).
    pub fn read_values<T: Copy>(&self, slots: &[T]) -> Vec<T> {
        (0..self.segments()).map(|s| slots[s * self.t]).collect()
    }

    /// Where the probabilities of block `c` (a query ciphertext's cache block, counted over
    /// all of them) travel in the **compact** layout of [`spread_blocks`]: `(ciphertext,
    /// slot)` of head group `i`'s row `r`. Compact ciphertext `c / d_h` carries `d_h` blocks,
    /// block `c` in segment offset `o = (d_h − c mod d_h) mod d_h` of every group; for `o ≠ 0`
    /// each group carries the *next* group's rows, so that the right shift by `(c mod d_h)`
    /// segments which brings offset `o` to offset 0 lands every group's rows in their own group.
    pub fn compact_slot(&self, c: usize, i: usize, r: usize) -> (usize, usize) {
        let (dh, k) = (self.head_dim, self.groups);
        let cl = c % dh;
        let o = (dh - cl) % dh;
        let src = if cl == 0 { i } else { (i + k - 1) % k };
        (c / dh, (src * dh + o) * self.t + r)
    }

    /// Where item `w` of a step's compact queries, keys and values ([`unpack_qkv`]) carries
    /// segment `seg`: `(ciphertext, slot)`, row `w mod t` of ciphertext `w / t`.
    pub fn compact_item_slot(&self, w: usize, seg: usize) -> (usize, usize) {
        (w / self.t, seg * self.t + w % self.t)
    }

    /// The plaintext keeping segment offset `o` of every group (segments `i·d_h + o`).
    fn segment_mask(&self, o: usize) -> Vec<C64> {
        let mut v = vec![C64::default(); self.slots];
        for i in 0..self.groups {
            let s = i * self.head_dim + o;
            v[s * self.t..(s + 1) * self.t].fill(C64::real(1.0));
        }
        v
    }

    /// The plaintext keeping row `r` of every segment.
    fn row_mask(&self, r: usize) -> Vec<C64> {
        let mut v = vec![C64::default(); self.slots];
        for s in 0..self.segments() {
            v[s * self.t + r] = C64::real(1.0);
        }
        v
    }
}

/// The probabilities' blocks in the layout [`EncKvCache::values`] reads ([`DecodeLayout::rows`]:
/// every row replicated over the `d_h` segments of its group) from their **compact** layout
/// ([`DecodeLayout::compact_slot`]: `d_h` blocks per ciphertext, one segment offset each), so
/// the conversion carries `⌈blocks / d_h⌉` ciphertexts instead of one per block. Per block: one
/// plaintext mask (one level) keeps its offset, a right shift by `c mod d_h` segments brings it
/// to offset 0 (one rotation per set bit), and `log₂ d_h` shift-and-add steps by
/// `t, 2t, …, (d_h/2)·t` slots copy it over the group's `d_h` segments. Every rotation is a
/// right shift by `2^m·t` slots, the same `log₂ d_h` Galois keys. `d_h` must be a power of two
/// (it divides the power-of-two slot count). Returns `blocks` ciphertexts one level below the
/// compact ones.
pub fn spread_blocks<E: Exec>(
    ex: &E,
    lay: &DecodeLayout,
    compact: &[E::Ct],
    blocks: usize,
) -> Result<Vec<E::Ct>> {
    let (n, dh, t) = (lay.slots, lay.head_dim, lay.t);
    check_unpack(ex, lay)?;
    if compact.len() != blocks.div_ceil(dh) {
        return Err(Error::Shape {
            what: "decode probabilities: compact ciphertexts",
            expected: blocks.div_ceil(dh),
            found: compact.len(),
        });
    }
    let right = |m: u32| (n - (t << m)) as i64;
    let mut out = Vec::with_capacity(blocks);
    for c in 0..blocks {
        let cl = c % dh;
        let o = (dh - cl) % dh;
        let key = pt_key(
            0xdec1,
            &[n as u64, lay.segments() as u64, dh as u64, o as u64],
        );
        let mask = move || lay.segment_mask(o);
        let mut z = ex.mul_plain(&compact[c / dh], Some(key), &mask)?;
        ex.rescale(&mut z)?;
        for m in 0..dh.trailing_zeros() {
            if (cl >> m) & 1 == 1 {
                z = ex.rotate(&z, right(m))?;
            }
        }
        for m in 0..dh.trailing_zeros() {
            let r = ex.rotate(&z, right(m))?;
            ex.add_assign(&mut z, &r)?;
        }
        out.push(z);
    }
    Ok(out)
}

/// The executor's slots are the layout's, and the rows and the head width are powers of two
/// (the unpackings shift and copy by doubling).
fn check_unpack<E: Exec>(ex: &E, lay: &DecodeLayout) -> Result<()> {
    if ex.slots() != lay.slots {
        return Err(Error::SlotMismatch {
            expected: lay.slots,
            found: ex.slots(),
        });
    }
    if !lay.t.is_power_of_two() || !lay.head_dim.is_power_of_two() {
        return Err(Error::InvalidParameters(
            "decode layout: compact conversions need power-of-two rows and head width",
        ));
    }
    Ok(())
}

/// `z` shifted by `k` rows within its segments (`k > 0`: row `r + k` to row `r`; `k < 0`: row
/// `r` to row `r − k`), one rotation per set bit of `|k|` by `±2^b` slots. The caller keeps
/// every nonzero slot's row and its shifted row inside the segment (`t` rows).
fn shift_rows<E: Exec>(ex: &E, mut z: E::Ct, k: i64, n: usize) -> Result<E::Ct> {
    let a = k.unsigned_abs();
    for b in 0..64 - a.leading_zeros() {
        if (a >> b) & 1 == 1 {
            let step = if k > 0 {
                1i64 << b
            } else {
                n as i64 - (1i64 << b)
            };
            z = ex.rotate(&z, step)?;
        }
    }
    Ok(z)
}

/// [`unpack_qkv`]'s output: the replicated queries, then the keys' and values' rows.
pub type QkvRows<C> = (Vec<C>, Vec<C>);

/// A step's queries, keys and values from their **compact** layout: item `w` (query
/// ciphertexts first, then the key ciphertexts, then the value ciphertexts, as
/// [`EncKvCache::append`] and [`EncKvCache::scores`] take them) sits in row `w mod t` of every
/// segment of compact ciphertext `w / t` ([`DecodeLayout::compact_item_slot`]), so the
/// conversion carries `⌈items / t⌉` ciphertexts instead of one per item. Each item costs one
/// plaintext mask (the level the cache's row mask and the query's drop to the cache level
/// spend anyway):
/// * a query goes to row 0 (one rotation per set bit of its row) and is copied over the `t`
///   rows (`log₂ t` shift-and-add steps): the replicated layout of the score product;
/// * a key or a value goes to row `r0 = position mod t`, the only row its cache block keeps
///   ([`EncKvCache::append_rows`]).
///
/// Every rotation is by `±2^b` slots, `b < log₂ t`. Returns the queries and the keys and values
/// (in that order), one level below the compact ciphertexts.
pub fn unpack_qkv<E: Exec>(
    ex: &E,
    lay: &DecodeLayout,
    compact: &[E::Ct],
    queries: usize,
    kv: usize,
    r0: usize,
) -> Result<QkvRows<E::Ct>> {
    let (n, t) = (lay.slots, lay.t);
    check_unpack(ex, lay)?;
    let items = queries + 2 * kv;
    if r0 >= t {
        return Err(Error::InvalidParameters(
            "decode q, k, v: the cache row is past the block's rows",
        ));
    }
    if compact.len() != items.div_ceil(t) {
        return Err(Error::Shape {
            what: "decode q, k, v: compact ciphertexts",
            expected: items.div_ceil(t),
            found: compact.len(),
        });
    }
    let (mut q, mut rows) = (Vec::with_capacity(queries), Vec::with_capacity(2 * kv));
    for w in 0..items {
        let r = w % t;
        let key = pt_key(0xdec0, &[n as u64, lay.segments() as u64, r as u64]);
        let mask = move || lay.row_mask(r);
        let mut z = ex.mul_plain(&compact[w / t], Some(key), &mask)?;
        ex.rescale(&mut z)?;
        if w < queries {
            z = shift_rows(ex, z, r as i64, n)?;
            for m in 0..t.trailing_zeros() {
                let s = ex.rotate(&z, (n - (1 << m)) as i64)?;
                ex.add_assign(&mut z, &s)?;
            }
            q.push(z);
        } else {
            rows.push(shift_rows(ex, z, r as i64 - r0 as i64, n)?);
        }
    }
    Ok((q, rows))
}

/// Two query heads that read the same KV head, carried by one ciphertext as its real and
/// imaginary parts (a lone head when the group has an odd size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadPair {
    /// The query head in the real part.
    pub re: usize,
    /// The query head in the imaginary part, if any.
    pub im: Option<usize>,
    /// The KV head both read.
    pub kv: usize,
}

/// The query heads in pairs: group `g` (query heads `g·r .. (g+1)·r`, `r = heads / kv_heads`)
/// split into `⌈r/2⌉` pairs. With `r = 1` (multi-head attention) every head is alone.
pub fn head_pairs(heads: usize, kv_heads: usize) -> Result<Vec<HeadPair>> {
    if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(Error::InvalidParameters(
            "head pairs: the key/value heads must divide the query heads",
        ));
    }
    let r = heads / kv_heads;
    let mut out = Vec::with_capacity(kv_heads * r.div_ceil(2));
    for g in 0..kv_heads {
        let mut h = g * r;
        while h < (g + 1) * r {
            let im = (h + 1 < (g + 1) * r).then_some(h + 1);
            out.push(HeadPair { re: h, im, kv: g });
            h += 2;
        }
    }
    Ok(out)
}

/// The key ciphertext each query pair reads with one head group per ciphertext: its KV head.
pub fn kv_reads(pairs: &[HeadPair]) -> Vec<usize> {
    pairs.iter().map(|p| p.kv).collect()
}

/// The channel map of the query pairs (`heads · d_h` channels, head-major): pair `i`'s
/// ciphertext holds channel `h·d_h + j` of its heads in segment `j`, with segments of `t` rows.
/// For a layout of one head group ([`DecodeLayout::new`]); refused for more.
pub fn pair_map(lay: &DecodeLayout, pairs: &[HeadPair]) -> Result<ChannelMap> {
    one_group(lay)?;
    let dh = lay.head_dim;
    Ok(ChannelMap::from_fn(
        pairs.len(),
        dh,
        lay.t,
        |ct, part, seg| {
            let p = pairs[ct];
            match part {
                0 => Some(p.re * dh + seg),
                _ => p.im.map(|h| h * dh + seg),
            }
        },
    ))
}

fn one_group(lay: &DecodeLayout) -> Result<()> {
    if lay.groups != 1 {
        return Err(Error::InvalidParameters(
            "channel maps of the decode layout are for one head group per ciphertext",
        ));
    }
    Ok(())
}

/// The channel map of the keys (or values) of `kv_heads` heads: ciphertext `g` holds channel
/// `g·d_h + j` in segment `j` (real). For a layout of one head group; refused for more.
pub fn kv_map(lay: &DecodeLayout, kv_heads: usize) -> Result<ChannelMap> {
    one_group(lay)?;
    let dh = lay.head_dim;
    Ok(ChannelMap::from_fn(kv_heads, dh, lay.t, |ct, part, seg| {
        (part == 0).then_some(ct * dh + seg)
    }))
}

/// `R_pos·W` for a `Linear`-layout projection `W` (`out × in`, heads of `head_dim` rows): RoPE
/// at a public position is a linear map, so a decode step folds it into the `Q` and `K`
/// weights it projects with (no level, no rotation; the price is that these two weights are
/// encoded for each position instead of once). `scale` multiplies the result (`1/√d_h` for
/// `Q`).
pub fn rope_rows(w: &Mat, pos: usize, head_dim: usize, base: f64, scale: f64) -> Result<Mat> {
    if head_dim == 0 || !head_dim.is_multiple_of(2) || !w.rows.is_multiple_of(head_dim) {
        return Err(Error::InvalidParameters(
            "RoPE: the rows must split into heads of even width",
        ));
    }
    if w.data.len() != w.rows * w.cols {
        return Err(Error::Shape {
            what: "RoPE: projection weights",
            expected: w.rows * w.cols,
            found: w.data.len(),
        });
    }
    let mut out = Mat::zeros(w.rows, w.cols);
    let mut col = vec![0.0; w.rows];
    for i in 0..w.cols {
        for (o, c) in col.iter_mut().enumerate() {
            *c = w.get(o, i) * scale;
        }
        rope(&mut col, pos, head_dim, base);
        for (o, c) in col.iter().enumerate() {
            out.set(o, i, *c);
        }
    }
    Ok(out)
}

/// One layer's cache: per key ciphertext (a KV head, or a group of them), its blocks of keys
/// and of values.
struct LayerCache<C> {
    k: Vec<Vec<C>>,
    v: Vec<Vec<C>>,
    len: usize,
}

/// The KV cache of a decoder, held by the server as ciphertexts under the client's key: every
/// layer's keys and values for every past position, at most `max` positions.
///
/// What it stores: `2 · layers · kv_cts · ⌈len / t⌉` ciphertexts ([`EncKvCache::ciphertexts`]),
/// all at one level, where `kv_cts` is the key ciphertexts per block (the KV heads with one head
/// group per ciphertext, `⌈kv_heads / groups⌉` with more). Appending past `max` is refused with
/// [`Error::ContextFull`].
pub struct EncKvCache<C> {
    lay: DecodeLayout,
    kv_heads: usize,
    max: usize,
    level: Option<usize>,
    /// A copy of the first cached row: every later row must add to it (same level and scale).
    probe: Option<C>,
    layers: Vec<LayerCache<C>>,
}

impl<C> EncKvCache<C> {
    /// An empty cache for `layers` layers of `kv_heads` key ciphertexts per block (KV heads, or
    /// groups of them), holding at most `max` positions.
    pub fn new(lay: DecodeLayout, layers: usize, kv_heads: usize, max: usize) -> Result<Self> {
        if layers == 0 || kv_heads == 0 || max == 0 {
            return Err(Error::InvalidParameters(
                "KV cache: layers, heads and capacity must be positive",
            ));
        }
        Ok(Self {
            lay,
            kv_heads,
            max,
            level: None,
            probe: None,
            layers: (0..layers)
                .map(|_| LayerCache {
                    k: (0..kv_heads).map(|_| Vec::new()).collect(),
                    v: (0..kv_heads).map(|_| Vec::new()).collect(),
                    len: 0,
                })
                .collect(),
        })
    }

    /// The layout.
    pub fn layout(&self) -> &DecodeLayout {
        &self.lay
    }

    /// The positions layer `layer` holds (0 for a layer that does not exist).
    pub fn len(&self, layer: usize) -> usize {
        self.layers.get(layer).map_or(0, |l| l.len)
    }

    /// Whether no layer holds a position.
    pub fn is_empty(&self) -> bool {
        self.layers.iter().all(|l| l.len == 0)
    }

    /// The most positions the cache holds.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// The level every cached ciphertext is at (`None` before the first append).
    pub fn level(&self) -> Option<usize> {
        self.level
    }

    /// The ciphertexts held.
    pub fn ciphertexts(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.k.iter().chain(&l.v).map(Vec::len).sum::<usize>())
            .sum()
    }

    fn layer(&self, layer: usize) -> Result<&LayerCache<C>> {
        self.layers
            .get(layer)
            .ok_or(Error::InvalidParameters("KV cache: no such layer"))
    }

    /// Appends the next position of `layer`: `k[g]` and `v[g]` are KV head `g`'s new key and
    /// value, row-replicated ([`DecodeLayout::replicated`]), all at one level and scale. Row
    /// `len mod t` is kept (one plaintext product and a rescale each) and added into its
    /// block. Refused with [`Error::ContextFull`] when the layer holds `max` positions, and
    /// with the executor's level or scale error when a row does not match the cache (every
    /// row is checked before anything is stored: a refused append leaves the cache as it
    /// was).
    pub fn append<E: Exec<Ct = C>>(
        &mut self,
        ex: &E,
        layer: usize,
        k: Vec<C>,
        v: Vec<C>,
    ) -> Result<()> {
        if ex.slots() != self.lay.slots {
            return Err(Error::SlotMismatch {
                expected: self.lay.slots,
                found: ex.slots(),
            });
        }
        for (what, x) in [("KV cache: new keys", &k), ("KV cache: new values", &v)] {
            if x.len() != self.kv_heads {
                return Err(Error::Shape {
                    what,
                    expected: self.kv_heads,
                    found: x.len(),
                });
            }
        }
        let (max, lay) = (self.max, self.lay);
        let len = self.layer(layer)?.len;
        if len >= max {
            return Err(Error::ContextFull { max });
        }
        let r = len % lay.t;
        let key = pt_key(0xdec0, &[lay.slots as u64, lay.segments() as u64, r as u64]);
        let mask = move || lay.row_mask(r);
        let mut rows = Vec::with_capacity(2 * self.kv_heads);
        for ct in k.iter().chain(&v) {
            let mut z = ex.mul_plain(ct, Some(key), &mask)?;
            ex.rescale(&mut z)?;
            rows.push(z);
        }
        self.append_rows(ex, layer, rows)
    }

    /// [`EncKvCache::append`] of keys and values already reduced to their row: `rows` are the
    /// `kv_heads` key ciphertexts then the value ciphertexts, each zero but in row
    /// `len mod t` of its segments ([`unpack_qkv`] makes them). Nothing checks the zeros: a row
    /// elsewhere would corrupt the block's other positions, so only the protocol's own
    /// unpacking feeds this.
    pub fn append_rows<E: Exec<Ct = C>>(
        &mut self,
        ex: &E,
        layer: usize,
        mut rows: Vec<C>,
    ) -> Result<()> {
        if ex.slots() != self.lay.slots {
            return Err(Error::SlotMismatch {
                expected: self.lay.slots,
                found: ex.slots(),
            });
        }
        if rows.len() != 2 * self.kv_heads {
            return Err(Error::Shape {
                what: "KV cache: new key and value rows",
                expected: 2 * self.kv_heads,
                found: rows.len(),
            });
        }
        let (max, lay) = (self.max, self.lay);
        let len = self.layer(layer)?.len;
        if len >= max {
            return Err(Error::ContextFull { max });
        }
        let (b, r) = (len / lay.t, len % lay.t);
        // Every cached ciphertext sits at one level and scale: the first append fixes them; a
        // later input above the level is dropped to it, one below it is refused, and a scale
        // that differs is refused by a trial addition to the probe (a copy of the first row).
        let target = match self.level {
            Some(l) => l,
            None => rows.iter().map(|z| ex.level(z)).min().unwrap_or(0),
        };
        for z in rows.iter_mut() {
            let l = ex.level(z);
            if l < target {
                return Err(Error::LevelMismatch {
                    left: l,
                    right: target,
                });
            }
            ex.drop_to(z, target)?;
        }
        let probe = match &self.probe {
            Some(p) => ex.clone_ct(p),
            None => ex.clone_ct(&rows[0]),
        };
        for z in &rows {
            let mut t = ex.clone_ct(&probe);
            ex.add_assign(&mut t, z)?;
        }
        self.level = Some(target);
        self.probe = Some(probe);
        let lc = &mut self.layers[layer];
        let mut it = rows.into_iter();
        for blocks in lc.k.iter_mut().chain(lc.v.iter_mut()) {
            let z = it
                .next()
                .ok_or(Error::InvalidParameters("KV cache: missing row"))?;
            if r == 0 {
                debug_assert_eq!(blocks.len(), b);
                blocks.push(z);
            } else {
                ex.add_assign(&mut blocks[b], &z)?;
            }
        }
        lc.len += 1;
        Ok(())
    }

    /// The score products of `layer` for the query ciphertexts `q` (row-replicated; `q[i]`
    /// reads key ciphertext `reads[i]`, the KV head `g` of its pair with one group, see
    /// [`kv_reads`]): per query ciphertext and block, `q ⊙ K_g` relinearized and rescaled. Fold each
    /// block's slots with [`DecodeLayout::fold_scores`] (after the conversion, on shares) to
    /// get `q_h·k_p + i·q_{h'}·k_p` for the block's positions `p` (rows past
    /// [`EncKvCache::len`] are zero).
    pub fn scores<E: Exec<Ct = C>>(
        &self,
        ex: &E,
        layer: usize,
        q: &[C],
        reads: &[usize],
    ) -> Result<Vec<Vec<C>>> {
        let lc = self.check(ex, layer, q.len(), reads)?;
        let level = self.level.unwrap_or(0);
        let mut out = Vec::with_capacity(q.len());
        for (qi, &g) in q.iter().zip(reads) {
            let mut qd = ex.clone_ct(qi);
            Self::lower(ex, &mut qd, level)?;
            let mut per = Vec::with_capacity(lc.k[g].len());
            for kb in &lc.k[g] {
                let mut z = ex.mul_ct(&qd, kb)?;
                ex.relin(&mut z)?;
                ex.rescale(&mut z)?;
                per.push(z);
            }
            out.push(per);
        }
        Ok(out)
    }

    /// The attention outputs of `layer`: `p[i][b]` is block `b` of query ciphertext `i`'s
    /// probabilities ([`DecodeLayout::rows`]), one ciphertext per block the layer holds, read
    /// against value ciphertext `reads[i]`. Per query ciphertext, the
    /// block products are summed before one relinearization and rescale, then each segment's
    /// rows are summed (`⌈log₂ t⌉`-ish rotations by doubling); row 0 of segment `j` holds
    /// `o_h[j] + i·o_{h'}[j]` ([`DecodeLayout::read_values`]).
    pub fn values<E: Exec<Ct = C>>(
        &self,
        ex: &E,
        layer: usize,
        p: &[Vec<C>],
        reads: &[usize],
    ) -> Result<Vec<C>> {
        let lc = self.check(ex, layer, p.len(), reads)?;
        let level = self.level.unwrap_or(0);
        let blocks = self.lay.blocks(lc.len);
        let mut out = Vec::with_capacity(p.len());
        for (pi, &g) in p.iter().zip(reads) {
            if pi.len() != blocks {
                return Err(Error::Shape {
                    what: "decode values: probability blocks",
                    expected: blocks,
                    found: pi.len(),
                });
            }
            let mut acc = None;
            for (pb, vb) in pi.iter().zip(&lc.v[g]) {
                let mut pd = ex.clone_ct(pb);
                Self::lower(ex, &mut pd, level)?;
                accumulate(ex, &mut acc, ex.mul_ct(&pd, vb)?)?;
            }
            let mut z = acc.ok_or(Error::InvalidParameters("decode values: empty cache"))?;
            ex.relin(&mut z)?;
            ex.rescale(&mut z)?;
            out.push(rotate_sum(ex, z, self.lay.t, 1)?);
        }
        Ok(out)
    }

    /// Drops `x` to `level`; refuses an input below it.
    fn lower<E: Exec<Ct = C>>(ex: &E, x: &mut C, level: usize) -> Result<()> {
        let l = ex.level(x);
        if l < level {
            return Err(Error::LevelMismatch {
                left: l,
                right: level,
            });
        }
        ex.drop_to(x, level)
    }

    fn check<E: Exec<Ct = C>>(
        &self,
        ex: &E,
        layer: usize,
        n: usize,
        reads: &[usize],
    ) -> Result<&LayerCache<C>> {
        if ex.slots() != self.lay.slots {
            return Err(Error::SlotMismatch {
                expected: self.lay.slots,
                found: ex.slots(),
            });
        }
        let lc = self.layer(layer)?;
        if lc.len == 0 {
            return Err(Error::InvalidParameters(
                "KV cache: the layer holds no position",
            ));
        }
        if n != reads.len() {
            return Err(Error::Shape {
                what: "decode attention: query ciphertexts",
                expected: reads.len(),
                found: n,
            });
        }
        if reads.iter().any(|&g| g >= self.kv_heads) {
            return Err(Error::InvalidParameters(
                "decode attention: a query reads a key ciphertext the cache does not hold",
            ));
        }
        Ok(lc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::exec::SymExec;

    #[test]
    fn layout_checks_and_helpers() {
        assert!(DecodeLayout::new(64, 48).is_err());
        assert!(DecodeLayout::new(64, 64).is_err());
        let lay = DecodeLayout::new(64, 8).unwrap();
        assert_eq!(
            (lay.t(), lay.blocks(0), lay.blocks(8), lay.blocks(9)),
            (8, 0, 1, 2)
        );
        let q: Vec<f64> = (0..8).map(|j| j as f64).collect();
        let v = lay.replicated(&q, Some(&q));
        assert_eq!(v[3 * 8 + 5], C64::new(3.0, 3.0));
        let p = lay.rows(&[1.0, 2.0], None);
        assert_eq!(p[7 * 8 + 1], C64::real(2.0));
        assert_eq!(p[7 * 8 + 2], C64::real(0.0));
        let s: Vec<f64> = (0..64).map(|i| i as f64).collect();
        // Row r: Σ_j (8j + r) = 8·28 + 8r.
        assert_eq!(lay.fold_scores(&s)[3], 224.0 + 24.0);
        assert_eq!(lay.read_values(&s)[2], 16.0);
    }

    /// Two head groups: 16 segments of 4 rows; group 1's dimension j is segment 8 + j.
    #[test]
    fn grouped_layout_helpers() {
        assert!(DecodeLayout::grouped(64, 8, 8).is_err());
        let lay = DecodeLayout::grouped(64, 8, 2).unwrap();
        assert_eq!((lay.t(), lay.segments(), lay.blocks(9)), (4, 16, 3));
        let q: Vec<f64> = (0..16).map(|s| s as f64).collect();
        let v = lay.replicated(&q, None);
        assert_eq!(v[(8 + 3) * 4 + 2], C64::real(11.0));
        let (a, b) = ([1.0, 2.0], [5.0, 6.0, 7.0]);
        let p = lay.rows_grouped(&[(&a, None), (&b, Some(&a))]);
        assert_eq!(p[3 * 4 + 1], C64::real(2.0));
        assert_eq!(p[(8 + 3) * 4 + 1], C64::new(6.0, 2.0));
        assert_eq!(p[(8 + 3) * 4 + 2], C64::real(7.0));
        let s: Vec<f64> = (0..64).map(|i| i as f64).collect();
        let f = lay.fold_scores(&s);
        // Group 1, row 2: Σ_j ((8 + j)·4 + 2) = 8·(32 + 2) + 4·28.
        assert_eq!((f.len(), f[4 + 2]), (8, 8.0 * 34.0 + 112.0));
        let o = lay.read_values(&s);
        assert_eq!((o.len(), o[9]), (16, 36.0));
    }

    #[test]
    fn pairs_share_a_kv_head() {
        let p = head_pairs(9, 3).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(
            p[0],
            HeadPair {
                re: 0,
                im: Some(1),
                kv: 0
            }
        );
        assert_eq!(
            p[1],
            HeadPair {
                re: 2,
                im: None,
                kv: 0
            }
        );
        assert_eq!(
            p[5],
            HeadPair {
                re: 8,
                im: None,
                kv: 2
            }
        );
        assert!(p
            .iter()
            .all(|x| x.re / 3 == x.kv && x.im.is_none_or(|h| h / 3 == x.kv)));
        assert_eq!(head_pairs(12, 12).unwrap().len(), 12);
        assert_eq!(head_pairs(8, 2).unwrap().len(), 4);
        assert!(head_pairs(9, 2).is_err());
        let lay = DecodeLayout::new(1024, 16).unwrap();
        let m = pair_map(&lay, &p).unwrap();
        assert_eq!((m.cts, m.segs, m.m), (6, 16, 64));
        assert_eq!(m.get(0, 1, 5), Some(16 + 5));
        assert_eq!(m.get(1, 1, 5), None);
        assert_eq!(kv_map(&lay, 3).unwrap().get(2, 0, 15), Some(47));
        let grouped = DecodeLayout::grouped(1024, 16, 2).unwrap();
        assert!(pair_map(&grouped, &p).is_err() && kv_map(&grouped, 3).is_err());
    }

    /// A row at another scale is refused before anything is stored (the cache is unchanged),
    /// as is one below the cache's level.
    #[test]
    fn a_mismatched_append_leaves_the_cache_unchanged() {
        use crate::hybrid::track::ScaleExec;
        let lay = DecodeLayout::new(64, 8).unwrap();
        let primes = vec![(1u64 << 40) as f64; 6];
        let ex = ScaleExec::new(64, primes);
        let mut c = EncKvCache::new(lay, 1, 2, 4).unwrap();
        let at = |scale: f64| (0..2).map(|_| ex.fresh(4, scale)).collect::<Vec<_>>();
        c.append(&ex, 0, at(2f64.powi(40)), at(2f64.powi(40)))
            .unwrap();
        let r = c.append(&ex, 0, at(2f64.powi(40)), at(2f64.powi(41)));
        assert!(matches!(r, Err(Error::ScaleMismatch { .. })), "{r:?}");
        assert_eq!((c.len(0), c.ciphertexts()), (1, 4));
        c.append(&ex, 0, at(2f64.powi(40)), at(2f64.powi(40)))
            .unwrap();
        assert_eq!(c.len(0), 2);
    }

    #[test]
    fn rope_rows_is_rope_of_the_projection() {
        let (rows, cols) = (8, 5);
        let w = Mat::from_fn(rows, cols, |o, i| (o * cols + i) as f64 * 0.1 - 1.5);
        let x: Vec<f64> = (0..cols).map(|i| 0.3 * i as f64 - 0.4).collect();
        let mut want = crate::decoder::reference::linear(&w, &x);
        rope(&mut want, 7, 4, 100.0);
        let r = rope_rows(&w, 7, 4, 100.0, 0.5).unwrap();
        let got = crate::decoder::reference::linear(&r, &x);
        for (a, b) in want.iter().zip(&got) {
            assert!((a * 0.5 - b).abs() < 1e-12);
        }
        assert!(rope_rows(&w, 1, 3, 100.0, 1.0).is_err());
    }

    /// The cache's counts per token grow with the blocks, the bound is enforced, and the
    /// levels are checked (a dry run: the values are checked with real CKKS in
    /// `tests/tests/decoder_ckks.rs`).
    #[test]
    fn dry_run_counts_bound_and_levels() {
        let lay = DecodeLayout::new(256, 16).unwrap(); // t = 16
        let pairs = head_pairs(4, 2).unwrap();
        let ex = SymExec::new(256);
        let mut cache = EncKvCache::new(lay, 1, 2, 40).unwrap();
        let top = 6;
        let mut per_token = Vec::new();
        for pos in 0..40 {
            let kv: Vec<_> = (0..2).map(|_| ex.fresh(top)).collect();
            cache.append(&ex, 0, kv.clone(), kv).unwrap();
            let before = ex.counts();
            let q: Vec<_> = pairs.iter().map(|_| ex.fresh(top)).collect();
            let s = cache.scores(&ex, 0, &q, &kv_reads(&pairs)).unwrap();
            let blocks = lay.blocks(pos + 1);
            assert!(s.iter().all(|x| x.len() == blocks));
            assert_eq!(s[0][0].level, top - 2);
            let p: Vec<Vec<_>> = pairs
                .iter()
                .map(|_| (0..blocks).map(|_| ex.fresh(top)).collect())
                .collect();
            let o = cache.values(&ex, 0, &p, &kv_reads(&pairs)).unwrap();
            assert_eq!(o[0].level, top - 2);
            per_token.push(ex.counts().since(&before));
        }
        // Per pair: `blocks` products for the scores and `blocks` for the values.
        for (pos, c) in per_token.iter().enumerate() {
            assert_eq!(c.ct_mults as usize, 2 * pairs.len() * lay.blocks(pos + 1));
            assert_eq!(c.rotations as usize, pairs.len() * 4); // log2(16)
        }
        assert_eq!(cache.ciphertexts(), 2 * 2 * 3);
        let kv: Vec<_> = (0..2).map(|_| ex.fresh(top)).collect();
        assert_eq!(
            cache.append(&ex, 0, kv.clone(), kv),
            Err(Error::ContextFull { max: 40 })
        );
        // A key below the cache's level is refused; a wrong head count is a shape error.
        let mut c2 = EncKvCache::new(lay, 2, 2, 8).unwrap();
        let hi: Vec<_> = (0..2).map(|_| ex.fresh(top)).collect();
        c2.append(&ex, 0, hi.clone(), hi).unwrap();
        let lo: Vec<_> = (0..2).map(|_| ex.fresh(top - 3)).collect();
        assert!(matches!(
            c2.append(&ex, 1, lo.clone(), lo),
            Err(Error::LevelMismatch { .. })
        ));
        let one = vec![ex.fresh(top)];
        assert!(matches!(
            c2.append(&ex, 1, one.clone(), one),
            Err(Error::Shape { .. })
        ));
        assert!(c2
            .scores(&ex, 1, &[ex.fresh(top)], &kv_reads(&pairs[..1]))
            .is_err());
        assert!(c2
            .scores(&ex, 5, &[ex.fresh(top)], &kv_reads(&pairs[..1]))
            .is_err());
    }
}
