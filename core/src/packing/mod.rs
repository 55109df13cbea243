//! Client-side packings of EncFormer's canonical family (§III-A, Appendix A): plain `f64`
//! matrices ↔ CKKS slot vectors.
//!
//! A ciphertext has `n` slots viewed as `N_seg = n/m` contiguous segments of length `m`
//! (`mat(x)_{r,c} = x[c·m + r]`, §III-B). Layouts used by the kernels:
//!
//! * **segment-column** ([`ChannelMap::segment_column`]): segment `c` of block `b` holds column
//!   `order(b·C + c)` of an `m × d` matrix, `C ≤ N_seg` active segments. With `complex = true`
//!   two consecutive blocks share one ciphertext as real and imaginary parts
//!   (`x̃^{(u)} = x^{(2u)} + i·x^{(2u+1)}`), which at `C = N_seg` is the **minimal packing** with
//!   `K_min = ⌈m·d / 2n⌉` ciphertexts (§III-A, SCP Rules 2 and 3).
//! * **score order** `π_S(h, u) = u·H + h` ([`ChannelMap::score_qk`], Appendix A-B1): column
//!   position `p = u·H + h` holds channel `u` of head `h`; with `C` a multiple of `H`, segment
//!   `c` of every block belongs to head `c mod H`.
//! * **head-major** ([`ChannelMap::head_major`], Appendix A-B4): `H_blk` heads per block, segment
//!   `h̃·d_h + u` holds channel `u` of head `ℓ·H_blk + h̃` (the natural column order, `π_V = id`).
//! * **folded-diagonal** ([`folded_diagonal`]): the pair of diagonals `(t, t + m/2)` of an
//!   `m × m` matrix as one complex vector `s_t[j] + i·s_{t+m/2}[j]`, `s_Δ[j] = S_{j,(j+Δ) mod m}`.
//! * the **score stream** ([`ScoreStream`], Appendix A-C1): `cut(S_0) ‖ … ‖ cut(S_{m/2-1})`, chunk
//!   `t` holding head `h` at offset `t·H·m + h·m`, packed sequentially into
//!   `K_min(S) = ⌈H·m²/2n⌉` ciphertexts.
//! * the **minimal folded-diagonal `P`** ([`PLayout`], Appendix A-C2): block `ℓ` holds, for each
//!   head `h̃` of the block and each `t < m/2`, the folded pair in segment `h̃·S_P + t`.
//!
//! FEnc2's fragment encoding of CNN feature maps is in [`fragment`].

pub mod fragment;

use crate::ckks::C64;
use alloc::vec;
use alloc::vec::Vec;

/// `K_min(x) = ⌈N(x) / 2n⌉`: the fewest complex ciphertexts holding `values` reals (§III-A).
pub fn k_min(values: usize, slots: usize) -> usize {
    values.div_ceil(2 * slots)
}

/// A dense row-major `f64` matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Mat {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row-major entries.
    pub data: Vec<f64>,
}

impl Mat {
    /// The zero matrix.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }
    /// A matrix from a function of `(row, col)`.
    pub fn from_fn(rows: usize, cols: usize, f: impl Fn(usize, usize) -> f64) -> Self {
        let mut data = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            for c in 0..cols {
                data.push(f(r, c));
            }
        }
        Self { rows, cols, data }
    }
    /// Entry `(r, c)`.
    pub fn get(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }
    /// Sets entry `(r, c)`.
    pub fn set(&mut self, r: usize, c: usize, v: f64) {
        self.data[r * self.cols + c] = v;
    }
    /// `self · other`.
    pub fn matmul(&self, other: &Mat) -> Mat {
        assert_eq!(self.cols, other.rows);
        let mut out = Mat::zeros(self.rows, other.cols);
        for i in 0..self.rows {
            for k in 0..self.cols {
                let a = self.get(i, k);
                if a == 0.0 {
                    continue;
                }
                for j in 0..other.cols {
                    out.data[i * other.cols + j] += a * other.get(k, j);
                }
            }
        }
        out
    }
    /// The transpose.
    pub fn transpose(&self) -> Mat {
        Mat::from_fn(self.cols, self.rows, |r, c| self.get(c, r))
    }
    /// The plaintext reference of the attention softmax: row-wise `softmax(scale·s)`, computed
    /// stably (the row maximum is subtracted first).
    pub fn softmax_rows(&self, scale: f64) -> Mat {
        let mut p = Mat::zeros(self.rows, self.cols);
        for r in 0..self.rows {
            let mx = (0..self.cols)
                .map(|c| self.get(r, c))
                .fold(f64::MIN, f64::max);
            let e: Vec<f64> = (0..self.cols)
                .map(|c| libm::exp((self.get(r, c) - mx) * scale))
                .collect();
            let z: f64 = e.iter().sum();
            for c in 0..self.cols {
                p.set(r, c, e[c] / z);
            }
        }
        p
    }
    /// Columns `[c0, c0 + w)`.
    pub fn cols_range(&self, c0: usize, w: usize) -> Mat {
        Mat::from_fn(self.rows, w, |r, c| self.get(r, c0 + c))
    }
}

/// Where each channel (matrix column) sits: `(ciphertext, part, segment) → column`, part 0 the
/// real and part 1 the imaginary part of the slots.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelMap {
    /// Number of ciphertexts.
    pub cts: usize,
    /// Segments per ciphertext addressed by the map (the active segments `C`).
    pub segs: usize,
    /// Segment length `m` (matrix rows).
    pub m: usize,
    map: Vec<Option<usize>>,
}

impl ChannelMap {
    /// Segment-column packing of `d` columns, `c` active segments per block, column position `p`
    /// holding column `order(p)`; `complex` pairs blocks `(2u, 2u+1)` in one ciphertext.
    pub fn segment_column(
        d: usize,
        m: usize,
        c: usize,
        complex: bool,
        order: impl Fn(usize) -> usize,
    ) -> Self {
        let blocks = d.div_ceil(c);
        let cts = if complex { blocks.div_ceil(2) } else { blocks };
        let mut map = vec![None; cts * 2 * c];
        for p in 0..d {
            let (b, seg) = (p / c, p % c);
            let (ct, part) = if complex { (b / 2, b % 2) } else { (b, 0) };
            map[(ct * 2 + part) * c + seg] = Some(order(p));
        }
        Self {
            cts,
            segs: c,
            m,
            map,
        }
    }
    /// The minimal input packing (`C = N_seg`, complex pairs, natural order): `K_min(m·d)`
    /// ciphertexts (SCP Rule 2).
    pub fn minimal(d: usize, m: usize, slots: usize) -> Self {
        Self::segment_column(d, m, slots / m, true, |p| p)
    }
    /// `Q`/`K` in score order `π_S(h, u) = u·H + h` with `c` segments per block (real).
    pub fn score_qk(d: usize, heads: usize, m: usize, c: usize) -> Self {
        let dh = d / heads;
        Self::segment_column(d, m, c, false, |p| (p % heads) * dh + p / heads)
    }
    /// Head-major order: `h_blk` heads of `d_h` channels per block; `complex` pairs blocks.
    pub fn head_major(d: usize, heads: usize, m: usize, h_blk: usize, complex: bool) -> Self {
        Self::segment_column(d, m, h_blk * (d / heads), complex, |p| p)
    }
    /// A map given cell by cell: `f(ct, part, seg)` is the column at that place (`part` 0 is the
    /// real part, 1 the imaginary part).
    pub fn from_fn(
        cts: usize,
        segs: usize,
        m: usize,
        f: impl Fn(usize, usize, usize) -> Option<usize>,
    ) -> Self {
        let mut map = vec![None; cts * 2 * segs];
        for ct in 0..cts {
            for part in 0..2 {
                for seg in 0..segs {
                    map[(ct * 2 + part) * segs + seg] = f(ct, part, seg);
                }
            }
        }
        Self { cts, segs, m, map }
    }
    /// The column at `(ct, part, seg)`.
    pub fn get(&self, ct: usize, part: usize, seg: usize) -> Option<usize> {
        if ct >= self.cts || seg >= self.segs {
            return None;
        }
        self.map[(ct * 2 + part) * self.segs + seg]
    }
    /// Whether any part of `(ct, seg)` holds a column.
    pub fn active(&self, ct: usize, seg: usize) -> bool {
        self.get(ct, 0, seg).is_some() || self.get(ct, 1, seg).is_some()
    }
    /// Packs the columns of `x` (`m` rows) into `cts` slot vectors of `slots` slots.
    pub fn pack(&self, x: &Mat, slots: usize) -> Vec<Vec<C64>> {
        assert_eq!(x.rows, self.m);
        (0..self.cts)
            .map(|ct| {
                let mut v = vec![C64::default(); slots];
                for seg in 0..self.segs {
                    for r in 0..self.m {
                        let re = self.get(ct, 0, seg).map_or(0.0, |c| x.get(r, c));
                        let im = self.get(ct, 1, seg).map_or(0.0, |c| x.get(r, c));
                        v[seg * self.m + r] = C64::new(re, im);
                    }
                }
                v
            })
            .collect()
    }
    /// Unpacks `cols` columns from slot vectors.
    pub fn unpack(&self, cts: &[Vec<C64>], cols: usize) -> Mat {
        let mut x = Mat::zeros(self.m, cols);
        for (ct, v) in cts.iter().enumerate().take(self.cts) {
            for seg in 0..self.segs {
                for r in 0..self.m {
                    let z = v[seg * self.m + r];
                    if let Some(c) = self.get(ct, 0, seg) {
                        x.set(r, c, z.re);
                    }
                    if let Some(c) = self.get(ct, 1, seg) {
                        x.set(r, c, z.im);
                    }
                }
            }
        }
        x
    }
}

/// Diagonal `s_Δ[j] = S_{j, (j+Δ) mod m}` of a square matrix (§III-C1).
pub fn diagonal(s: &Mat, delta: usize) -> Vec<f64> {
    let m = s.rows;
    (0..m).map(|j| s.get(j, (j + delta) % m)).collect()
}

/// The folded pair `s_t + i·s_{t+m/2}` (`t < m/2`).
pub fn folded_diagonal(s: &Mat, t: usize) -> Vec<C64> {
    let m = s.rows;
    let (a, b) = (diagonal(s, t), diagonal(s, t + m / 2));
    a.iter().zip(&b).map(|(&x, &y)| C64::new(x, y)).collect()
}

/// The exported score stream `cut(S_0) ‖ … ‖ cut(S_{m/2-1})` (Appendix A-C1): global position
/// `t·H·m + h·m + j` holds `s^h_t[j] + i·s^h_{t+m/2}[j]`, in `⌈H·m²/2n⌉` ciphertexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScoreStream {
    /// Tokens `m`.
    pub m: usize,
    /// Heads `H`.
    pub heads: usize,
    /// Slots `n`.
    pub slots: usize,
}

impl ScoreStream {
    /// Number of ciphertexts, `K_min(S)`.
    pub fn cts(&self) -> usize {
        k_min(self.heads * self.m * self.m, self.slots)
    }
    /// Packs per-head `m × m` score matrices (reference for tests).
    pub fn pack(&self, s: &[Mat]) -> Vec<Vec<C64>> {
        let mut out = vec![vec![C64::default(); self.slots]; self.cts()];
        for t in 0..self.m / 2 {
            for (h, sh) in s.iter().enumerate() {
                for (j, z) in folded_diagonal(sh, t).into_iter().enumerate() {
                    let g = (t * self.heads + h) * self.m + j;
                    out[g / self.slots][g % self.slots] = z;
                }
            }
        }
        out
    }
    /// Unpacks the `H` score matrices.
    pub fn unpack(&self, cts: &[Vec<C64>]) -> Vec<Mat> {
        let m = self.m;
        let mut s = vec![Mat::zeros(m, m); self.heads];
        for t in 0..m / 2 {
            for (h, sh) in s.iter_mut().enumerate() {
                for j in 0..m {
                    let g = (t * self.heads + h) * m + j;
                    let z = cts[g / self.slots][g % self.slots];
                    sh.set(j, (j + t) % m, z.re);
                    sh.set(j, (j + t + m / 2) % m, z.im);
                }
            }
        }
        s
    }
}

/// Minimal folded-diagonal packing of the softmax output `P` consumed by the value kernel
/// (Appendix A-C2): ciphertext `e` holds heads `e·H_P .. (e+1)·H_P`, head `h̃` and folded pair `t`
/// in segment `h̃·S_P + t`; with `S_P = m/2` and `H_P = 2n/m²` this is `K_min(P) = ⌈H·m²/2n⌉`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PLayout {
    /// Tokens `m`.
    pub m: usize,
    /// Heads `H`.
    pub heads: usize,
    /// Heads per ciphertext `H_P`.
    pub h_blk: usize,
    /// Segment stride per head `S_P ≥ m/2`.
    pub s_p: usize,
    /// Slots `n`.
    pub slots: usize,
}

impl PLayout {
    /// Number of ciphertexts `⌈H / H_P⌉`.
    pub fn cts(&self) -> usize {
        self.heads.div_ceil(self.h_blk)
    }
    /// Packs per-head `m × m` matrices.
    pub fn pack(&self, p: &[Mat]) -> Vec<Vec<C64>> {
        let m = self.m;
        let mut out = vec![vec![C64::default(); self.slots]; self.cts()];
        for (h, ph) in p.iter().enumerate() {
            let (l, hb) = (h / self.h_blk, h % self.h_blk);
            for t in 0..m / 2 {
                let seg = hb * self.s_p + t;
                for (j, z) in folded_diagonal(ph, t).into_iter().enumerate() {
                    out[l][seg * m + j] = z;
                }
            }
        }
        out
    }
}

impl ChannelMap {
    /// The real map of the split ciphertexts `(Re x̃_u, Im x̃_u)` → ciphertexts `(2u, 2u+1)`.
    pub fn split_parts(&self) -> ChannelMap {
        let cts = 2 * self.cts;
        let mut map = vec![None; cts * 2 * self.segs];
        for ct in 0..self.cts {
            for part in 0..2 {
                for seg in 0..self.segs {
                    map[((2 * ct + part) * 2) * self.segs + seg] = self.get(ct, part, seg);
                }
            }
        }
        ChannelMap {
            cts,
            segs: self.segs,
            m: self.m,
            map,
        }
    }
}
