//! The tiled kernel behind [`PolyBackend::small_weight_gemm`](veil_core::backend::PolyBackend):
//! `outs[i] = post · Σ_j w_ij · ins[j]` with small signed weights, one RNS row at a time.
//!
//! Each input word `x < 2^62` is split into 31-bit halves `x = x_l + 2^31·x_h`. A product of a
//! weight `|w| ≤ 2^20` with a half is below `2^51` in magnitude, so `2^10` of them sum exactly in
//! a signed 64-bit lane, and every product is a 32×32→64 multiply that vectorizes (the closure
//! runs under `pulp`'s best instruction set). The sums are reduced modulo the row's prime once
//! every [`FLUSH`] terms.
//!
//! Blocking: a tile is [`tile_words`] words (8 to [`TILE`], so that the tile of every input fits
//! a core's L2) of one row of every input and output, packed contiguously first. Within it,
//! [`PASS`] outputs × [`LANES`] words of both halves are accumulated in registers while the
//! inputs stream past, so each input word is loaded and split once per pass of [`PASS`] outputs.

use veil_core::math::Modulus;

/// The most words of one row per tile.
pub(crate) const TILE: usize = 128;
/// Input words a tile keeps in cache (1 MiB: the L2 of one core, on current x86 servers).
const TILE_BUDGET: usize = 1 << 17;

/// Words per tile for `k` inputs: a power of two from [`LANES`] to [`TILE`] such that the tile
/// of every input fits [`TILE_BUDGET`].
pub(crate) fn tile_words(k: usize) -> usize {
    let fit = (TILE_BUDGET / k.max(1)).max(LANES);
    (1usize << fit.ilog2()).min(TILE)
}
/// Outputs accumulated together.
pub(crate) const GROUP: usize = 8;
/// Outputs accumulated in registers by one pass over the inputs (a divisor of [`GROUP`]).
const PASS: usize = 4;
/// Words accumulated together (one 512-bit vector of 64-bit lanes).
const LANES: usize = 8;
/// Terms summed in 64-bit lanes between reductions (`2^10 · 2^51 < 2^63`).
const FLUSH: usize = 1 << 10;
const LOW: u64 = (1 << 31) - 1;

/// Transposes row-major weights (`rows × k`) into groups of [`GROUP`] rows, term-major within a
/// group (`[g][j][q]`), padded with zeros: the layout [`Tile`] reads.
pub(crate) fn group_weights(w: &[i32], rows: usize, k: usize) -> Vec<i64> {
    let groups = rows.div_ceil(GROUP);
    let mut out = vec![0i64; groups * k * GROUP];
    for r in 0..rows {
        let (g, q) = (r / GROUP, r % GROUP);
        for j in 0..k {
            out[(g * k + j) * GROUP + q] = w[r * k + j] as i64;
        }
    }
    out
}

/// One tile: the same `len ≤ TILE` words of one row of every input and every output.
pub(crate) struct Tile<'a> {
    /// Per input, its words in this tile.
    pub xs: Vec<&'a [u64]>,
    /// Weights from [`group_weights`].
    pub w: &'a [i64],
    /// Per output, its words in this tile (overwritten).
    pub outs: Vec<&'a mut [u64]>,
    /// The row's prime.
    pub m: &'a Modulus,
    /// The scalar applied to every output word, and its Shoup companion.
    pub post: (u64, u64),
}

impl pulp::WithSimd for Tile<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        self.run()
    }
}

impl Tile<'_> {
    #[inline(always)]
    fn run(self) {
        let Tile {
            xs,
            w,
            mut outs,
            m,
            post,
        } = self;
        let k = xs.len();
        let len = outs.first().map_or(0, |o| o.len());
        if k == 0 {
            outs.iter_mut().for_each(|o| o.fill(0));
            return;
        }
        // Pack the tile contiguously (`[c0 block][input][lane]`): the inputs are separate
        // buffers whose same offsets would fall into the same cache sets.
        let blocks = len / LANES;
        let mut packed = vec![[0u64; LANES]; blocks * k];
        for (j, x) in xs.iter().enumerate() {
            for (blk, w) in x[..len].chunks_exact(LANES).enumerate() {
                packed[blk * k + j].copy_from_slice(w);
            }
        }
        let mut acc = [[0u64; TILE]; GROUP];
        for (g, group) in outs.chunks_mut(GROUP).enumerate() {
            let wg = &w[g * k * GROUP..(g + 1) * k * GROUP];
            for (blk, xb) in packed.chunks_exact(k).enumerate() {
                let c0 = blk * LANES;
                // Four outputs per pass over the inputs: eight vector accumulators (low and
                // high halves), reduced once per FLUSH inputs.
                for q in (0..group.len()).step_by(PASS) {
                    let mut fresh = true;
                    for (xc, wc) in xb.chunks(FLUSH).zip(wg.chunks(FLUSH * GROUP)) {
                        let mut a = [[0i64; LANES]; 2 * PASS];
                        for (xw, wj) in xc.iter().zip(wc.chunks_exact(GROUP)) {
                            let (xl, xh) = (split_low(xw), split_high(xw));
                            for d in 0..PASS {
                                let wd = wj[q + d];
                                mac(&mut a[2 * d], wd, &xl);
                                mac(&mut a[2 * d + 1], wd, &xh);
                            }
                        }
                        flush(m, &a, &mut acc, q, c0, fresh);
                        fresh = false;
                    }
                    if fresh {
                        flush(m, &[[0; LANES]; 2 * PASS], &mut acc, q, c0, true);
                    }
                }
            }
            for (q, out) in group.iter_mut().enumerate() {
                for (o, &a) in out.iter_mut().zip(&acc[q][..len]) {
                    *o = m.mul_shoup(a, post.0, post.1);
                }
            }
        }
    }
}

#[inline(always)]
fn split_low(x: &[u64; LANES]) -> [i64; LANES] {
    let mut o = [0i64; LANES];
    for (o, &x) in o.iter_mut().zip(x) {
        *o = (x & LOW) as i64;
    }
    o
}

#[inline(always)]
fn split_high(x: &[u64; LANES]) -> [i64; LANES] {
    let mut o = [0i64; LANES];
    for (o, &x) in o.iter_mut().zip(x) {
        *o = (x >> 31) as i64;
    }
    o
}

/// `a += w·x` lane by lane (a 32×32→64 multiply: `w` is an `i32`, `x` a 31-bit half).
#[inline(always)]
fn mac(a: &mut [i64; LANES], w: i64, x: &[i64; LANES]) {
    let w = w as i32 as i64;
    for (a, &x) in a.iter_mut().zip(x) {
        *a += w * (x as i32 as i64);
    }
}

/// Reduces the lanes of outputs `q..q + PASS` (low and high halves) into their modular
/// accumulators (`acc = …` on the first flush of a block).
#[inline(always)]
fn flush(
    m: &Modulus,
    a: &[[i64; LANES]; 2 * PASS],
    acc: &mut [[u64; TILE]; GROUP],
    q: usize,
    c0: usize,
    fresh: bool,
) {
    for d in 0..PASS {
        for i in 0..LANES {
            let v = m.from_i128(a[2 * d][i] as i128 + ((a[2 * d + 1][i] as i128) << 31));
            let t = &mut acc[q + d][c0 + i];
            *t = if fresh { v } else { m.add(*t, v) };
        }
    }
}
