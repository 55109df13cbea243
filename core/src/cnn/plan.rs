//! FEnc2's block-size planner (§IV-B2–3): the analytic rotation counts of Eqs. 3–6, the bound of
//! Eq. 7, the optimal block size of Eq. 8 (Theorem 1), and the exact counts of the compiled layer
//! for every admissible `S`, from which the planner picks.
//!
//! Notation: `α = n / M²` channels per ciphertext at `S = 1`, `BS = 1` (the paper's
//! `N / 2HW`); at block size `S` and batch `BS` a ciphertext holds `α·S²/BS` channels.
//!
//! * inner (Eq. 3): `(N_in·BS/α)·(⌈K/S⌉² − 1)` for `K > S`, `(N_in·BS/α)·4(S − 1)/S²` for
//!   `K ≤ S < M`, and 0 at `S = M`;
//! * outer (Eq. 4): `(N_out·BS/α)·(α·S²/BS − 1)`;
//! * Eq. 7: `S ≤ √(BS·N_in/α)`, beyond which ciphertexts hold more channel capacity than channels;
//! * Eq. 8: the two terms balance at `S⁴ = K²·N_in·BS/(α·N_out)`, so
//!   `S* = ⌈(K²·N_in·BS / (α·N_out))^{1/4}⌉`. (The printed Eq. 8 omits `BS`; the paper's own
//!   example, `S* = 3.57` for Conv(128, 32, 9) at batch 8, includes it.)
//!
//! The counts are per batch (not amortized per sample). The compiled layer's exact counts differ
//! from the analytic ones only at the edges (Eq. 3's `K ≤ S` case is an upper estimate) and when
//! a channel group is partly filled.
//!
//! **A floor under every layout** ([`Floor`]). FEnc2's convolution has the two-stage form of
//! [`super::linear`]: inner rotations of the inputs, one plaintext product per term, outer
//! rotations of each output's sums (Eqs. 3–6; AAC then moves finished outputs). In that form an
//! output slot of ciphertext `j` reads `x_i[s + b + g]` for `b` a baby shift of input `i` and `g`
//! a giant shift of `j`: at most `β·|G_j|` distinct input values, `β = Σ_i |B_i|`. An output
//! whose weights reach `F` inputs (the fan-in: `C_in·K²` for a dense convolution) needs
//! `β·|G_j| ≥ F`, and the shift 0 is the only free one, so a layer with `C_in` input ciphertexts
//! and `C_out` output ciphertexts that each hold such an output issues at least
//!
//! ```text
//! min over β ≥ C_in of  (β − C_in) + C_out·(⌈F / β⌉ − 1)   rotations, and C_out·F products,
//! ```
//!
//! whatever the block size, fold or baby/giant split. (Products: one per term of the form; the
//! pixel-wise mode, which has no terms, multiplies by constants instead.) The rotation floor
//! never rises as `C_in` grows (more inputs unrotated) and never falls as `C_out` grows, so the
//! floor at a layer's own ciphertext counts bounds every layout with those counts, and at the
//! counts of full slot utilization it bounds every layout that reaches full utilization. It
//! assumes one real value per slot and counts each hoisted rotation, as Eqs. 3–6 do. It can be
//! reached: a dense `3 × 3` layer whose 8 channels fill one row-major ciphertext (`S = 1`)
//! issues 8 inner and 7 outer rotations, the floor (tested); with more or fewer channels per
//! ciphertext the compiled layer stays somewhat above it.

use super::conv::Conv2d;
use super::fc::Linear;
use super::linear::RotationCounts;
use crate::error::Result;
use crate::packing::fragment::FragmentLayout;
use alloc::vec::Vec;

/// The analytic inner and outer rotation counts of Eqs. 3–4 (real-valued, per batch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Analytic {
    /// Eq. 3.
    pub inner: f64,
    /// Eq. 4.
    pub outer: f64,
}

impl Analytic {
    /// Eq. 5/6: inner + outer.
    pub fn total(&self) -> f64 {
        self.inner + self.outer
    }
}

/// `α = n / M²`.
pub fn alpha(slots: usize, grid: usize) -> f64 {
    slots as f64 / (grid * grid) as f64
}

/// Eqs. 3–4 for a convolution `(N_in, N_out, K)` at block size `s`.
pub fn analytic(conv: &Conv2d, batch: usize, grid: usize, block: usize, slots: usize) -> Analytic {
    let a = alpha(slots, grid);
    let (bs, s, k) = (batch as f64, block as f64, conv.kernel);
    let nin = conv.in_channels as f64;
    let nout = conv.out_channels as f64;
    let in_cts = nin * bs / a;
    let inner = if block == grid {
        0.0
    } else if k > block {
        let c = k.div_ceil(block) as f64;
        in_cts * (c * c - 1.0)
    } else {
        in_cts * 4.0 * (s - 1.0) / (s * s)
    };
    let outer = nout * bs / a * (a * s * s / bs - 1.0).max(0.0);
    Analytic { inner, outer }
}

/// Eq. 7: the largest useful block size `√(BS·N_in/α)`.
pub fn eq7_bound(conv: &Conv2d, batch: usize, grid: usize, slots: usize) -> f64 {
    libm::sqrt(batch as f64 * conv.in_channels as f64 / alpha(slots, grid))
}

/// Eq. 8 before rounding: `(K²·N_in·BS / (α·N_out))^{1/4}`.
pub fn eq8_real(conv: &Conv2d, batch: usize, grid: usize, slots: usize) -> f64 {
    let k2 = (conv.kernel * conv.kernel) as f64;
    let v = k2 * conv.in_channels as f64 * batch as f64
        / (alpha(slots, grid) * conv.out_channels as f64);
    libm::sqrt(libm::sqrt(v))
}

/// One block size of a sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockPoint {
    /// `S`.
    pub block: usize,
    /// The compiled layer's exact counts (what a run issues).
    pub exact: RotationCounts,
    /// Eqs. 3–4.
    pub analytic: Analytic,
    /// Input ciphertexts.
    pub in_cts: usize,
    /// Output ciphertexts.
    pub out_cts: usize,
    /// Whether `S` is within Eq. 7's bound.
    pub within_eq7: bool,
}

/// The planner's decision for one convolution.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockChoice {
    /// Eq. 8 before rounding.
    pub s_star_real: f64,
    /// Eq. 8 rounded up to the next admissible power of two.
    pub s_star: usize,
    /// The admissible `S` with the fewest exact rotations (ties: the smaller `S`).
    pub best: usize,
    /// Every admissible power-of-two `S`, ascending.
    pub sweep: Vec<BlockPoint>,
}

/// Sweeps every power-of-two block size for which a channel fits a ciphertext (`BS·m² ≤ n`),
/// compiling the layer at each (no ciphertext is touched).
pub fn choose_block(
    conv: &Conv2d,
    batch: usize,
    height: usize,
    width: usize,
    slots: usize,
) -> Result<BlockChoice> {
    let grid = height.max(width).next_power_of_two();
    let bound = eq7_bound(conv, batch, grid, slots);
    let mut sweep = Vec::new();
    let mut s = 1;
    let mut first_err = None;
    while s <= grid {
        if s.is_multiple_of(conv.stride) {
            match FragmentLayout::new(batch, conv.in_channels, height, width, Some(grid), s, slots)
                .and_then(|l| conv.plan(&l))
            {
                Ok(p) => sweep.push(BlockPoint {
                    block: s,
                    exact: p.counts(),
                    analytic: analytic(conv, batch, grid, s, slots),
                    in_cts: p.input.ciphertexts(),
                    out_cts: p.output.ciphertexts(),
                    within_eq7: s as f64 <= bound + 1e-9,
                }),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        s *= 2;
    }
    if sweep.is_empty() {
        return Err(first_err.unwrap_or(crate::error::Error::InvalidParameters(
            "block planner: no admissible block size",
        )));
    }
    let s_star_real = eq8_real(conv, batch, grid, slots);
    let target = libm::ceil(s_star_real - 1e-9).max(1.0) as usize;
    let s_star = sweep
        .iter()
        .map(|p| p.block)
        .find(|&b| b >= target)
        .unwrap_or(sweep[sweep.len() - 1].block);
    let best = sweep
        .iter()
        .min_by_key(|p| (p.exact.total(), p.block))
        .map(|p| p.block)
        .unwrap_or(1);
    Ok(BlockChoice {
        s_star_real,
        s_star,
        best,
        sweep,
    })
}

/// The fewest rotations and plaintext products a linear layer in the two-stage form can issue
/// (the module docs derive it): a lower bound under every fragment layout, block size, fold and
/// baby/giant split, which the tests check every compiled plan against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Floor {
    /// Rotations (inner and outer together).
    pub rotations: u64,
    /// Plaintext products.
    pub products: u64,
}

impl Floor {
    /// The floor for outputs of fan-in `fan_in` held by at least `out_cts` ciphertexts, read from
    /// at most `in_cts` input ciphertexts.
    pub fn new(fan_in: usize, in_cts: usize, out_cts: usize) -> Self {
        if fan_in == 0 || out_cts == 0 {
            return Self::default();
        }
        let (f, ci, co) = (fan_in as u64, in_cts.max(1) as u64, out_cts as u64);
        let rotations = (ci..=f.max(ci))
            .map(|beta| beta - ci + co * (f.div_ceil(beta) - 1))
            .min()
            .unwrap_or(0);
        Self {
            rotations,
            products: co * f,
        }
    }

    /// Two floors summed (a network's layers).
    pub fn plus(self, other: Self) -> Self {
        Self {
            rotations: self.rotations + other.rotations,
            products: self.products + other.products,
        }
    }
}

/// Output pixels per channel whose every tap lies inside an `height × width` input: the outputs
/// that read the layer's whole fan-in.
pub fn interior_outputs(conv: &Conv2d, height: usize, width: usize) -> Result<usize> {
    let axis = |side: usize| -> Result<usize> {
        let n = conv.out_side(side)?;
        let (s, p, k) = (conv.stride, conv.padding, conv.kernel);
        Ok((0..n)
            .filter(|&y| y * s >= p && y * s + k <= side + p)
            .count())
    };
    Ok(axis(height)? * axis(width)?)
}

/// [`Floor`] for a convolution on a `batch × C_in × height × width` input held by `in_cts`
/// ciphertexts of `slots` slots. The fan-in is the fewest nonzero weights of an output channel
/// (of the `K × K` branch when the layer has [`Conv2d::point_outputs`]), and the output count
/// is the ciphertexts the interior outputs of those channels fill at the least.
pub fn conv_floor(
    conv: &Conv2d,
    batch: usize,
    height: usize,
    width: usize,
    in_cts: usize,
    slots: usize,
) -> Result<Floor> {
    let k = conv.kernel;
    let first = if conv.point_outputs < conv.out_channels {
        conv.point_outputs
    } else {
        0
    };
    let inputs = |o: usize| -> core::ops::Range<usize> {
        if conv.depthwise {
            o..o + 1
        } else {
            0..conv.in_channels
        }
    };
    let fan_in = (first..conv.out_channels)
        .map(|o| {
            inputs(o)
                .flat_map(|c| (0..k * k).map(move |t| (c, t / k, t % k)))
                .filter(|&(c, di, dj)| conv.w(o, c, di, dj) != 0.0)
                .count()
        })
        .min()
        .unwrap_or(0);
    let interior = batch * (conv.out_channels - first) * interior_outputs(conv, height, width)?;
    Ok(Floor::new(fan_in, in_cts, interior.div_ceil(slots)))
}

/// [`Floor`] for a fully connected layer on `batch` samples whose features are held by
/// `in_cts` ciphertexts of `slots` slots.
pub fn fc_floor(fc: &Linear, batch: usize, in_cts: usize, slots: usize) -> Floor {
    let fan_in = fc
        .weight
        .chunks(fc.inputs.max(1))
        .map(|row| row.iter().filter(|&&w| w != 0.0).count())
        .min()
        .unwrap_or(0);
    Floor::new(fan_in, in_cts, (batch * fc.outputs).div_ceil(slots))
}
