//! Softmax over the rows of a shared matrix with a public additive mask: the accurate
//! block (row max, saturated exponential, row sum, reciprocal, product) and EncFormer's
//! surrogate MBMax, `Y = (X + c)^5 / R_d` (EncFormer §IV-B1, after Powerformer).
//!
//! Inputs and outputs are at the ring's `F = 13` fractional bits, `rows × cols`
//! row-major; `rows = heads × queries` and, for causal masks, the query index of row
//! `r` is `r mod cols` (square attention, `queries = cols`).
//!
//! # Masks
//!
//! Every mask leaves a *prefix* of each row valid: `cols` entries ([`Mask::None`]),
//! `valid` ([`Mask::Padding`]), `q + 1` for query `q` ([`Mask::Causal`]) or
//! `min(q + 1, valid)` ([`Mask::CausalPadding`]). The mask is public, so masked
//! entries are excluded *structurally*: the protocol never feeds them to the max, the
//! exponential or the sum (which also saves their cost), and both parties set their
//! output shares to `0`, so a masked probability is exactly `0`. This replaces the
//! additive `−∞` (or `−BIG`) of a plaintext implementation, with no range condition.
//!
//! # Accurate softmax
//!
//! Per row, over its valid entries `x_i`:
//!
//! 1. `m = max_i x_i` by a tree of [`Party::max_pair`] over all rows at once
//!    (`⌈log2 len⌉` levels, ragged rows in the same batches); exact.
//! 2. `d_i = x_i − m ≤ 0` (local); `e_i = exp_neg(d_i)` at `F' = 20` bits
//!    ([`crate::nonlinear::exp`]: saturation at `T = −16`, a quadratic base tuned for the
//!    relative error, 6 squarings).
//! 3. `s = Σ_i e_i` (local); `s ≥ e_max ≈ 1` because the maximum has `d = 0`
//!    (`exp_neg(0) = 1 + 6·10^{-5}`), and `s ≤ 1.0001·cols < 2^{J+1}`,
//!    `J = ⌈log2 cols⌉`.
//! 4. `1/s` by [`crate::nonlinear::recip`] at `F'` (normalization by `J` public thresholds,
//!    then a product series; per row).
//! 5. `p_i = e_i·(1/s)` by [`Party::mul_rows_fx`] (one COT per bit and row), one
//!    unbiased truncation by `2F' − F = 27` to `F = 13` bits (floor or ceiling, so
//!    `p_i ≥ 0`).
//!
//! **Error.** With `ẽ_j = e^{max(d_j, T)}` and `s̃ = Σ ẽ_j`,
//! `p̂_i − p_i = (ê_i − ẽ_i)/ŝ − ẽ_i(ŝ − s̃)/(ŝ s̃) + (ẽ_i/s̃ − p_i) + ê_i·δ_{1/s} + δ_out`:
//!
//! * own exponential: `|ê_i − ẽ_i|/ŝ ≤ ε_e = 4.2·10^{-4}` ([`crate::nonlinear::exp::EXP_ERR`],
//!   `ŝ ≥ 1`);
//! * the sum: `p_i·|Σ_j (ê_j − ẽ_j)|/ŝ` is governed by the exponential's *relative*
//!   error at the depths where the row's mass lies. Over rows of one maximum and
//!   `n − 1` equal entries at depth `d` (for a single depth the extremal case; worst
//!   at `d ≈ −ln(n − 1)`), the reference exponential gives `≤ 2.3·10^{-4}` for
//!   `n ≤ 128` (`4·10^{-4}` at `n = 512`), and a random search over 20 000 rows
//!   with two depths (`n ≤ 128`) found no worse; the test `accurate_adversarial_rows`
//!   runs such rows;
//! * saturation: `n·e^T ≤ 1.4·10^{-5}` for `n ≤ 128`;
//! * reciprocal: `|δ_{1/s}| ≤ 6·2^{−20} + 7·10^{-10}` ([`crate::nonlinear::recip`]);
//! * output truncation: `|δ_out| < 2^{−13} = 1.2·10^{-4}`.
//!
//! Together `< 8·10^{-4}` for rows of up to 128 entries. Asserted by the tests:
//! [`SOFTMAX_ERR`] `= 10^{-3}` absolute per probability; measured max `2.3·10^{-4}`,
//! mean `≤ 4·10^{-5}` (random rows of ranges ±1 … ±46, edge rows, masks, two-level
//! rows). Against [`Softmax::reference`] (the same integers with round-half-up): at
//! most [`SOFTMAX_REF_ULPS`] `= 2` ulps (measured 1).
//!
//! **Cost** (measured, 1×128×128, both directions, IKNP): 6.2 kB per entry (0.76
//! offline), 321 COTs, 19 offline + 108 online rounds (8.4 kB and 447 COTs with
//! full-ring squarings). Per step and entry: row max 1.08 kB (57 rounds), exponential
//! 4.7 kB (39), reciprocal 0.17 kB (29, per row), product 0.26 kB. The COTs (IKNP,
//! 16 B each) are most of the bytes; the squarings (25 COTs each) dominate.
//! A causal mask halves the max, exponential and sum (5.6 kB per entry of the full
//! matrix at 12×16×16).
//!
//! **Range.** Valid for `|x| < 2^{ℓ−F−2}` (`2^{28} ≈ 2.7·10^8` at `ℓ = 43, F = 13`): then
//! all differences fit the comparisons (`< 2^{ℓ−1}`) and `d > −2^{ℓ−1}` fits the
//! clamp. Entries more than `|T| = 16` below their row's max saturate (probability
//! `< 2^{−14}`, i.e. `0` or `1` ulp). Values outside the range are beyond half the
//! ring's representable range and have already overflowed an earlier layer; they
//! are not detected.
//!
//! # MBMax
//!
//! `Y = (X + c)^5 / R_d` on the valid entries, computed as `b^5` with
//! `b = (X + c)·ρ`, `ρ = R_d^{−1/5}`:
//!
//! 1. `a = x + c` (local), saturated to `|a| ≤ A` ([`Party::clamp`], one batched pair of
//!    ReLUs): `A = ⌊B·2^{F+24}/K⌋` ulps with `B = 7.75` and `K = round(ρ·2^{24})`, so
//!    `|b| ≤ B` and `|Y| ≤ B^5 < 2^{14.8}`.
//! 2. `b = ⌊a·K / 2^{24}⌉` (one truncation; `|a·K| < 2^{40}`).
//! 3. `b² = ⌊b²/2^F⌉`, `b⁴ = ⌊(b²)²/2^F⌉` ([`Party::square_fx`]),
//!    `Y = ⌊b⁴·b/2^F⌉` ([`Party::mul_bounded_fx`] with `|b| < 2^{F+3}`, `|b⁴| < 2^{F+12}`:
//!    40 COTs at `F = 13` instead of 86): every product is `< B^5·2^{2F} < 2^{41}`.
//!
//! Masked entries give `0` (structurally, as above). The saturation makes the block
//! total: every input in the ring's signed range `|x + c| < 2^{ℓ−F−1} − A` gives the
//! formula at the clamped `a`, never a wrapped value. Without it the valid range
//! `|b| < 8` would be the only guard; its cost (two comparisons per entry) is the
//! price of never wrapping. **Rounds:** EncFormer counts 3 (the product depth of
//! `p = 5`); ours are the same 3 products, each followed by its truncation (a COT
//! batch, 2 rounds), plus the normalization truncation and the clamp's comparison
//! and multiplexer: measured 1 offline + 22 online rounds (the clamp 9 of them; the
//! product no longer takes triples offline).
//! **Cost** (measured, both directions, IKNP): 4.0 kB per entry (0.64 offline), 222 COTs;
//! the clamp is about 2.2 kB of it.
//!
//! **Exactness.** The protocol equals the formula on the reference's integers
//! ([`Softmax::reference`]) up to the faithful truncations: with `b` the reference's
//! value (real), `|Y − Y_ref| ≤ 5b⁴ + 2.1|b|³ + |b| + 2` ulps (each truncation within
//! one ulp of round-half-up, propagated through the products), i.e. `≤ 10` ulps for
//! `|b| ≤ 1` (`|Y| ≤ 1`).

use crate::mpc::error::{expect_len, MpcError, Result};
use crate::mpc::{Party, RingCfg, RingShares};
use crate::nonlinear::exp::{exp_check, exp_neg_reference_with, exp_neg_with, ExpCoeffs, EXP_FRAC};
use crate::nonlinear::fixed::round_shift;
use crate::nonlinear::ops::{add_const, mul_int, sub};
use crate::nonlinear::recip::{recip_check, recip_reference_with, recip_with, RECIP_Y0};
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// Asserted bound of the accurate softmax against the exact softmax (absolute, per
/// probability).
pub const SOFTMAX_ERR: f64 = 1.0e-3;

/// Maximum difference of the accurate softmax to [`Softmax::reference`], in output ulps.
pub const SOFTMAX_REF_ULPS: i64 = 2;

/// Saturation bound `B` of `|b| = |X + c|·R_d^{−1/5}` in MBMax.
pub const MBMAX_B: f64 = 7.75;

/// Fractional bits of `K = round(R_d^{−1/5}·2^{24})` in MBMax.
const MBMAX_KBITS: u32 = 24;

/// Public additive mask over the key axis (cols); rows = heads × queries, and for
/// causal masks the query index of row `r` is `r % queries`, where `queries = cols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// No mask: every entry is valid.
    None,
    /// Causal: query `q` attends to keys `0..=q`.
    Causal,
    /// Padding: only the first `valid` keys are real tokens.
    Padding {
        /// Number of real tokens (`1..=cols`).
        valid: usize,
    },
    /// Causal and padding: keys `0..=min(q, valid − 1)`.
    CausalPadding {
        /// Number of real tokens (`1..=cols`).
        valid: usize,
    },
}

/// Which softmax function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SoftmaxKind {
    /// Max, saturated exponential, sum, reciprocal (error ≤ [`SOFTMAX_ERR`]).
    Accurate,
    /// EncFormer's MBMax surrogate `Y = (X + c)^5 / R_d` (EncFormer §IV-B1).
    MbMax {
        /// Additive shift `c` (model parameter).
        c: f64,
        /// Divisor `R_d > 0` (model parameter).
        rd: f64,
    },
}

/// Softmax over the rows of a `rows × cols` shared matrix (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Softmax {
    /// Number of rows (`heads × queries`).
    pub rows: usize,
    /// Row length (keys).
    pub cols: usize,
    /// Public mask.
    pub mask: Mask,
    /// Function.
    pub kind: SoftmaxKind,
}

/// Public constants of MBMax at the ring's `F`: `(C, K, A)` (see the module doc).
#[derive(Clone, Copy, Debug)]
struct MbConsts {
    c: i64,
    k: i64,
    a: i64,
}

/// `⌈log2 n⌉` (`0` for `n ≤ 1`).
fn ceil_log2(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

impl Softmax {
    /// Checks shapes, mask and parameters against the ring.
    pub fn validate(&self, ring: RingCfg) -> Result<()> {
        if self.rows == 0 || self.cols == 0 {
            return Err(MpcError::InvalidInput("softmax needs rows, cols >= 1"));
        }
        if self.rows.checked_mul(self.cols).is_none() {
            return Err(MpcError::InvalidInput("softmax shape overflows"));
        }
        match self.mask {
            Mask::None => {}
            Mask::Causal | Mask::CausalPadding { .. } if !self.rows.is_multiple_of(self.cols) => {
                return Err(MpcError::InvalidInput(
                    "causal softmax needs rows = heads x cols",
                ));
            }
            Mask::Causal => {}
            Mask::Padding { valid } | Mask::CausalPadding { valid } => {
                if valid == 0 || valid > self.cols {
                    return Err(MpcError::InvalidInput(
                        "padding mask needs 1 <= valid <= cols",
                    ));
                }
            }
        }
        match self.kind {
            SoftmaxKind::Accurate => {
                exp_check(ring, ring.frac)?;
                recip_check(ring, EXP_FRAC, ceil_log2(self.cols))?;
            }
            SoftmaxKind::MbMax { .. } => {
                if 2 * ring.frac + 15 > ring.ell.saturating_sub(2) || ring.frac + 30 > ring.ell {
                    return Err(MpcError::InvalidConfig(
                        "MBMax needs 2F + 15 <= ell - 2 and F + 30 <= ell (ring F = 13, ell = 43)",
                    ));
                }
                self.mb_consts(ring)?;
            }
        }
        Ok(())
    }

    /// MBMax constants, checked.
    fn mb_consts(&self, ring: RingCfg) -> Result<MbConsts> {
        let SoftmaxKind::MbMax { c, rd } = self.kind else {
            return Err(MpcError::InvalidConfig("not MBMax"));
        };
        let lim = libm::ldexp(1.0, ring.ell as i32 - 3);
        if !c.is_finite() || !rd.is_finite() || rd <= 0.0 {
            return Err(MpcError::InvalidInput("MBMax needs finite c and R_d > 0"));
        }
        let rho = libm::pow(rd, -0.2);
        let kf = libm::round(rho * libm::ldexp(1.0, MBMAX_KBITS as i32));
        let cf = libm::round(c * libm::ldexp(1.0, ring.frac as i32));
        if !(1.0..lim).contains(&kf) || cf.abs() >= lim {
            return Err(MpcError::InvalidInput(
                "MBMax parameters out of the ring's range (R_d^(-1/5)·2^24, c·2^F)",
            ));
        }
        let af = libm::floor(MBMAX_B * libm::ldexp(1.0, (ring.frac + MBMAX_KBITS) as i32) / kf);
        if af >= lim {
            return Err(MpcError::InvalidInput(
                "MBMax saturation bound out of range",
            ));
        }
        Ok(MbConsts {
            c: cf as i64,
            k: kf as i64,
            a: af as i64,
        })
    }

    /// Valid prefix length of each row.
    fn lens(&self) -> Vec<usize> {
        (0..self.rows)
            .map(|r| {
                let q = r % self.cols;
                match self.mask {
                    Mask::None => self.cols,
                    Mask::Padding { valid } => valid,
                    Mask::Causal => q + 1,
                    Mask::CausalPadding { valid } => (q + 1).min(valid),
                }
            })
            .collect()
    }

    /// The valid entries of `x`, row by row.
    fn compact<T: Copy>(&self, x: &[T], lens: &[usize]) -> Vec<T> {
        x.chunks(self.cols)
            .zip(lens)
            .flat_map(|(row, &l)| row[..l].iter().copied())
            .collect()
    }

    /// Scatters compact row values back to `rows × width` rows with `0` elsewhere.
    fn scatter(&self, v: &[u64], lens: &[usize], width: usize) -> Vec<u64> {
        let mut out = vec![0u64; self.rows * width];
        let mut k = 0;
        for (row, &l) in out.chunks_mut(width).zip(lens) {
            row[..l].copy_from_slice(&v[k..k + l]);
            k += l;
        }
        out
    }

    /// Runs the block on shares of `x` (`rows × cols` at the ring's `F`), both parties
    /// with the same public parameters; the output has the same shape and scale.
    pub async fn run<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
    ) -> Result<RingShares> {
        self.run_with(p, x, ExpCoeffs::BLOCK, RECIP_Y0).await
    }

    /// [`Softmax::run`] with the given exponential and reciprocal constants.
    pub(crate) async fn run_with<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
        co: ExpCoeffs,
        y0: f64,
    ) -> Result<RingShares> {
        let ring = p.config().ring;
        self.validate(ring)?;
        expect_len("softmax input (rows·cols)", self.rows * self.cols, x.len())?;
        let lens = self.lens();
        let xv = RingShares::new(self.compact(x.as_slice(), &lens));
        match self.kind {
            SoftmaxKind::Accurate => self.accurate(p, &xv, &lens, co, y0).await,
            SoftmaxKind::MbMax { .. } => self.mbmax(p, &xv, &lens).await,
        }
    }

    async fn accurate<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        xv: &RingShares,
        lens: &[usize],
        co: ExpCoeffs,
        y0: f64,
    ) -> Result<RingShares> {
        let r = p.config().ring;
        let m = max_ragged(p, xv, lens).await?;
        let mb: Vec<u64> = m
            .as_slice()
            .iter()
            .zip(lens)
            .flat_map(|(&v, &l)| core::iter::repeat_n(v, l))
            .collect();
        let d = sub(r, xv, &RingShares::new(mb))?;
        let e = exp_neg_with(p, &d, r.frac, co).await?;
        let mut s = Vec::with_capacity(self.rows);
        let mut k = 0;
        for &l in lens {
            s.push(
                e.as_slice()[k..k + l]
                    .iter()
                    .fold(0u64, |a, &v| r.add(a, v)),
            );
            k += l;
        }
        let inv = recip_with(p, &RingShares::new(s), EXP_FRAC, ceil_log2(self.cols), y0).await?;
        let width = lens.iter().copied().max().unwrap_or(0);
        let full = RingShares::new(self.scatter(e.as_slice(), lens, width));
        let z = p.mul_rows_fx(&full, &inv, width, 0).await?;
        let out = p.trunc_near(z, 2 * EXP_FRAC - r.frac).await?;
        Ok(self.mask_out(out.as_slice(), lens, width))
    }

    /// Keeps the valid prefix of each `width`-row and zeros the rest, at `cols`.
    fn mask_out(&self, v: &[u64], lens: &[usize], width: usize) -> RingShares {
        let mut out = vec![0u64; self.rows * self.cols];
        for ((o, row), &l) in out.chunks_mut(self.cols).zip(v.chunks(width)).zip(lens) {
            o[..l].copy_from_slice(&row[..l]);
        }
        RingShares::new(out)
    }

    async fn mbmax<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        xv: &RingShares,
        lens: &[usize],
    ) -> Result<RingShares> {
        let r = p.config().ring;
        let f = r.frac;
        let k = self.mb_consts(r)?;
        let a = add_const(r, p.is_p0(), xv, k.c);
        let a = p.clamp(&a, Some(-k.a), Some(k.a)).await?;
        let b = p.trunc_near(mul_int(r, &a, k.k), MBMAX_KBITS).await?;
        let b2 = p.square_fx(&b, 0).await?;
        let b2 = p.trunc_near(b2, f).await?;
        let b4 = p.square_fx(&b2, 0).await?;
        let b4 = p.trunc_near(b4, f).await?;
        // |b| ≤ B = 7.75 < 2^3 and b⁴ ≤ B⁴ < 2^12 (at F bits: 2^{F+3}, 2^{F+12}).
        let y = p.mul_bounded_fx(&b4, f + 12, &b, f + 3, 0).await?;
        let y = p.trunc_near(y, f).await?;
        Ok(RingShares::new(self.scatter(y.as_slice(), lens, self.cols)))
    }

    /// Plain-integer reference: the same steps on the same signed integers (at the
    /// ring's `F`) with round-half-up truncations and exact comparisons. Returns an
    /// empty vector when the block or the input length is invalid.
    pub fn reference(&self, ring: RingCfg, x: &[i64]) -> Vec<i64> {
        self.reference_with(ring, x, ExpCoeffs::BLOCK, RECIP_Y0)
    }

    fn reference_with(&self, ring: RingCfg, x: &[i64], co: ExpCoeffs, y0: f64) -> Vec<i64> {
        if self.validate(ring).is_err() || x.len() != self.rows * self.cols {
            return Vec::new();
        }
        let f = ring.frac;
        let lens = self.lens();
        let mut out = vec![0i64; x.len()];
        let mb = self.mb_consts(ring).ok();
        for ((row, o), &l) in x
            .chunks(self.cols)
            .zip(out.chunks_mut(self.cols))
            .zip(&lens)
        {
            let v = &row[..l];
            match (self.kind, mb) {
                (SoftmaxKind::MbMax { .. }, Some(k)) => {
                    for (o, &xi) in o.iter_mut().zip(v) {
                        let a = xi.saturating_add(k.c).clamp(-k.a, k.a);
                        let b = round_shift(a as i128 * k.k as i128, MBMAX_KBITS);
                        let b2 = round_shift(b as i128 * b as i128, f);
                        let b4 = round_shift(b2 as i128 * b2 as i128, f);
                        *o = round_shift(b4 as i128 * b as i128, f);
                    }
                }
                _ => {
                    let m = v.iter().copied().max().unwrap_or(0);
                    let e: Vec<i64> = v
                        .iter()
                        .map(|&xi| exp_neg_reference_with(xi.saturating_sub(m), f, co))
                        .collect();
                    let s: i64 = e.iter().sum();
                    let inv = recip_reference_with(s, EXP_FRAC, ceil_log2(self.cols), y0);
                    for (o, &ei) in o.iter_mut().zip(&e) {
                        *o = round_shift(ei as i128 * inv as i128, 2 * EXP_FRAC - f);
                    }
                }
            }
        }
        out
    }

    /// The exact real function: masked softmax (`0` at masked entries), or for MBMax
    /// `(clamp(x + c, ±A) )^5 / R_d` (the formula with the block's saturation, `A`
    /// from the ring [`RingCfg::ENCFORMER`]'s constants); empty on invalid input.
    pub fn f64_reference(&self, x: &[f64]) -> Vec<f64> {
        if self.rows.checked_mul(self.cols) != Some(x.len()) || self.rows == 0 || self.cols == 0 {
            return Vec::new();
        }
        let lens = if self.validate(RingCfg::ENCFORMER).is_ok() {
            self.lens()
        } else {
            return Vec::new();
        };
        let mut out = vec![0f64; x.len()];
        for ((row, o), &l) in x
            .chunks(self.cols)
            .zip(out.chunks_mut(self.cols))
            .zip(&lens)
        {
            let v = &row[..l];
            match self.kind {
                SoftmaxKind::Accurate => {
                    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = v.iter().map(|&xi| libm::exp(xi - m)).collect();
                    let s: f64 = e.iter().sum();
                    for (o, &ei) in o.iter_mut().zip(&e) {
                        *o = ei / s;
                    }
                }
                SoftmaxKind::MbMax { c, rd } => {
                    let a = match self.mb_consts(RingCfg::ENCFORMER) {
                        Ok(k) => libm::ldexp(k.a as f64, -(RingCfg::ENCFORMER.frac as i32)),
                        Err(_) => return Vec::new(),
                    };
                    for (o, &xi) in o.iter_mut().zip(v) {
                        *o = libm::pow((xi + c).clamp(-a, a), 5.0) / rd;
                    }
                }
            }
        }
        out
    }

    /// Bound of the valid inputs of the accurate softmax, `2^{ℓ−F−2}` (exclusive, real).
    pub fn input_bound(ring: RingCfg) -> f64 {
        libm::ldexp(1.0, ring.ell as i32 - ring.frac as i32 - 2)
    }

    /// MBMax's saturation bound `A` on `|X + c|` (real), or an error for invalid
    /// parameters.
    pub fn mbmax_bound(&self, ring: RingCfg) -> Result<f64> {
        Ok(libm::ldexp(
            self.mb_consts(ring)?.a as f64,
            -(ring.frac as i32),
        ))
    }
}

/// Maximum of each ragged row (row `r` has `lens[r] ≥ 1` entries, concatenated): a
/// tree of [`Party::max_pair`], all rows' pairs of a level in one batch,
/// `⌈log2 max len⌉` levels. Exact for pairwise differences below `2^{ℓ−1}`.
async fn max_ragged<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    x: &RingShares,
    lens: &[usize],
) -> Result<RingShares> {
    let mut cur = x.as_slice().to_vec();
    let mut w: Vec<usize> = lens.to_vec();
    while w.iter().any(|&l| l > 1) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut k = 0;
        for &l in &w {
            for j in 0..l / 2 {
                a.push(cur[k + 2 * j]);
                b.push(cur[k + 2 * j + 1]);
            }
            k += l;
        }
        let m = p.max_pair(&RingShares::new(a), &RingShares::new(b)).await?;
        let ms = m.as_slice();
        let mut next = Vec::with_capacity(w.len());
        let (mut k, mut t) = (0, 0);
        for l in w.iter_mut() {
            next.extend_from_slice(&ms[t..t + *l / 2]);
            t += *l / 2;
            if *l % 2 == 1 {
                next.push(cur[k + *l - 1]);
            }
            k += *l;
            *l = *l / 2 + *l % 2;
        }
        cur = next;
    }
    Ok(RingShares::new(cur))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::cost::Meter;
    use crate::nonlinear::fixed::{decode, encode, ErrStats};
    use crate::nonlinear::testkit::*;
    use rand_core::RngCore;
    use std::eprintln;

    #[test]
    fn references_are_total_and_huge_rows_are_rejected() {
        let r = RingCfg::ENCFORMER;
        let wild = [
            i64::MIN,
            i64::MAX,
            0,
            -1,
            i64::MAX,
            i64::MIN + 1,
            1 << 50,
            -(1 << 50),
        ];
        for kind in [
            SoftmaxKind::Accurate,
            SoftmaxKind::MbMax { c: 3.0, rd: 2.0 },
        ] {
            for mask in [Mask::None, Mask::Causal, Mask::Padding { valid: 1 }] {
                let sm = Softmax {
                    kind,
                    ..acc(4, 2, mask)
                };
                assert_eq!(sm.reference(r, &wild).len(), 8);
            }
        }
        // The reciprocal's normalization needs ⌈log2 cols⌉ + 20 + 2 ≤ ℓ − 2.
        let big = |cols| acc(1, cols, Mask::None);
        assert!(big(1 << 19).validate(r).is_ok());
        assert!(big((1 << 19) + 1).validate(r).is_err());
        assert!(big(1 << 20).validate(r).is_err());
        // A shape whose size overflows: empty, no panic.
        let huge = Softmax {
            rows: usize::MAX,
            ..big(2)
        };
        assert!(huge.f64_reference(&[0.0; 2]).is_empty());
        assert!(huge.reference(r, &[0; 2]).is_empty());
    }

    /// Opens the protocol's output on `xs` (signed at `F`).
    fn run(sm: &Softmax, xs: &[i64], co: ExpCoeffs, y0: f64) -> Vec<i64> {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(21);
        let (x0, x1) = share(r, xs, &mut g);
        let (y0s, y1s) = both!(
            p0,
            p1,
            sm.run_with(&mut p0, &x0, co, y0).await,
            sm.run_with(&mut p1, &x1, co, y0).await
        );
        open(r, &y0s, &y1s)
    }

    fn errors(sm: &Softmax, xs: &[i64], got: &[i64]) -> ErrStats {
        let f = RingCfg::ENCFORMER.frac;
        let xr: Vec<f64> = xs.iter().map(|&v| decode(v, f)).collect();
        let g: Vec<f64> = got.iter().map(|&v| decode(v, f)).collect();
        ErrStats::of(&g, &sm.f64_reference(&xr))
    }

    /// Runs, checks the bound against f64, the reference within `ulps`, exact zeros at
    /// masked entries and non-negative outputs; returns the error.
    fn check(name: &str, sm: &Softmax, xs: &[i64], bound: f64, ulps: i64) -> ErrStats {
        let r = RingCfg::ENCFORMER;
        let got = run(sm, xs, ExpCoeffs::BLOCK, RECIP_Y0);
        let e = errors(sm, xs, &got);
        let want = sm.reference(r, xs);
        let d = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).max();
        eprintln!(
            "{name}: max {:.3e}, mean {:.3e} over {} (vs reference: max {d:?} ulp)",
            e.max_abs, e.mean_abs, e.count
        );
        assert!(e.max_abs <= bound, "{name}: {e:?}");
        assert_within(&got, &want, ulps, name);
        let lens = sm.lens();
        for (row, &l) in got.chunks(sm.cols).zip(&lens) {
            assert!(
                row[l..].iter().all(|&v| v == 0),
                "{name}: masked entry not 0"
            );
            if sm.kind == SoftmaxKind::Accurate {
                assert!(row.iter().all(|&v| v >= 0), "{name}: negative probability");
            }
        }
        e
    }

    /// The accurate form, `rows × cols` under `mask`.
    fn acc(rows: usize, cols: usize, mask: Mask) -> Softmax {
        Softmax {
            rows,
            cols,
            mask,
            kind: SoftmaxKind::Accurate,
        }
    }

    fn random_rows() -> Vec<i64> {
        let f = RingCfg::ENCFORMER.frac;
        let mut g = rng(4);
        let mut xs = Vec::new();
        for bound in [46.0, 20.0, 8.0, 3.0, 1.0, 46.0] {
            xs.extend(uniform(&mut g, 64, bound, f));
        }
        xs
    }

    #[test]
    fn accurate_random_rows_are_within_the_bound() {
        let sm = acc(6, 64, Mask::None);
        let xs = random_rows();
        check(
            "softmax random 6x64",
            &sm,
            &xs,
            SOFTMAX_ERR,
            SOFTMAX_REF_ULPS,
        );
        // Rows sum to 1 within the bound times the row length.
        let got = run(&sm, &xs, ExpCoeffs::BLOCK, RECIP_Y0);
        for row in got.chunks(64) {
            let s: f64 = row.iter().map(|&v| decode(v, 13)).sum();
            assert!((s - 1.0).abs() < 64.0 * 1.3e-4, "row sum {s}");
        }
    }

    #[test]
    fn accurate_edge_rows() {
        let f = RingCfg::ENCFORMER.frac;
        let c = 16;
        let e = |v: f64| encode(v, f);
        let mut xs = Vec::new();
        // All equal (twice), one dominant, two dominant, one dominant far beyond the
        // saturation, and entries far apart within the valid range (saturate).
        xs.extend(vec![e(3.0); c]);
        xs.extend(vec![e(-46.0); c]);
        let mut row = vec![e(-46.0); c];
        row[5] = e(46.0);
        xs.extend(row);
        let mut row = vec![e(0.0); c];
        row[0] = e(10.0);
        row[15] = e(10.0);
        xs.extend(row);
        let mut row = vec![e(-1.0e6); c];
        row[7] = e(1.0e6);
        xs.extend(row);
        let b = Softmax::input_bound(RingCfg::ENCFORMER) * 0.99;
        let mut row: Vec<i64> = (0..c).map(|i| e(-b + i as f64)).collect();
        row[3] = e(b);
        xs.extend(row);
        let sm = acc(6, c, Mask::None);
        check("softmax edge rows", &sm, &xs, SOFTMAX_ERR, SOFTMAX_REF_ULPS);
        let got = run(&sm, &xs, ExpCoeffs::BLOCK, RECIP_Y0);
        // The dominant entries are 1 within the bound, the saturated ones 0 or 1 ulp.
        for (k, &v) in got[2 * c..3 * c].iter().enumerate() {
            let want = if k == 5 { 1 << f } else { 0 };
            assert!((v - want).abs() <= 2, "dominant row {k}: {v}");
        }
        assert!(got[4 * c..].iter().all(|&v| v <= 1 || v >= (1 << f) - 2));
    }

    #[test]
    fn accurate_adversarial_rows() {
        // One entry at the max and all others at the same depth d: the sum's error is
        // the exponential's *relative* error at d, largest for d ≈ −ln(n − 1).
        let f = RingCfg::ENCFORMER.frac;
        let c = 128;
        let depths = [-0.5, -1.5, -2.2, -3.0, -4.0, -4.85, -5.5, -7.0, -9.5, -12.0];
        let mut xs = Vec::new();
        for &d in &depths {
            let mut row = vec![encode(d + 5.0, f); c];
            row[c / 3] = encode(5.0, f);
            xs.extend(row);
        }
        let sm = acc(depths.len(), c, Mask::None);
        check(
            "softmax two-level rows",
            &sm,
            &xs,
            SOFTMAX_ERR,
            SOFTMAX_REF_ULPS,
        );
    }

    #[test]
    fn accurate_masks() {
        let f = RingCfg::ENCFORMER.frac;
        let mut g = rng(8);
        let (heads, c) = (2, 16);
        let xs = uniform(&mut g, heads * c * c, 46.0, f);
        for mask in [
            Mask::Causal,
            Mask::Padding { valid: 1 },
            Mask::Padding { valid: 9 },
            Mask::CausalPadding { valid: 5 },
            Mask::Padding { valid: 16 },
        ] {
            let sm = acc(heads * c, c, mask);
            check(
                &alloc::format!("softmax {mask:?}"),
                &sm,
                &xs,
                SOFTMAX_ERR,
                SOFTMAX_REF_ULPS,
            );
        }
        // Every entry masked but one: the probability is exactly-ish 1.
        let sm = acc(heads * c, c, Mask::Padding { valid: 1 });
        let got = run(&sm, &xs, ExpCoeffs::BLOCK, RECIP_Y0);
        for row in got.chunks(c) {
            assert!((row[0] - (1 << f)).abs() <= 2 && row[1..].iter().all(|&v| v == 0));
        }
    }

    #[test]
    fn wrong_constants_violate_the_softmax_bound() {
        let sm = acc(6, 64, Mask::None);
        let mut xs = random_rows();
        // Rows of narrow range, where the exponential's constant term matters most.
        let f = RingCfg::ENCFORMER.frac;
        let mut g = rng(9);
        xs.extend(uniform(&mut g, 2 * 64, 0.5, f));
        let sm8 = Softmax { rows: 8, ..sm };
        // The linear coefficient of the base 2 % too large: e^{1.02·d}, a softmax at
        // temperature 1/1.02.
        let bad = ExpCoeffs {
            c1: ExpCoeffs::BLOCK.c1 * 1.02,
            ..ExpCoeffs::BLOCK
        };
        let e = errors(&sm8, &xs, &run(&sm8, &xs, bad, RECIP_Y0));
        eprintln!("softmax with c_1 2 % off: max {:.3e}", e.max_abs);
        assert!(e.max_abs > SOFTMAX_ERR);
        let e = errors(&sm8, &xs, &run(&sm8, &xs, ExpCoeffs::BLOCK, 1.1));
        eprintln!(
            "softmax with the Newton constant 1.1: max {:.3e}",
            e.max_abs
        );
        assert!(e.max_abs > SOFTMAX_ERR);
    }

    /// The ulp bound of MBMax against its reference, from the reference's `b` (real).
    fn mb_ulps(b: f64) -> i64 {
        let b = b.abs();
        libm::ceil(5.0 * b * b * b * b + 2.1 * b * b * b + b + 2.0) as i64
    }

    /// The bound of MBMax against its real formula: the ulp bound at `B` plus the rounding
    /// of `K` (relative `2^{-25}/ρ`, times 5).
    fn mb_f64_bound(rd: f64) -> f64 {
        let ymax = libm::pow(MBMAX_B, 5.0);
        let rho = libm::pow(rd, -0.2);
        (mb_ulps(MBMAX_B) as f64 + 1.0) * decode(1, RingCfg::ENCFORMER.frac)
            + ymax * 5.0 * libm::ldexp(1.0, -25) / rho
    }

    #[test]
    fn mbmax_matches_its_formula() {
        let r = RingCfg::ENCFORMER;
        let f = r.frac;
        let mut g = rng(12);
        let (c, rd) = (3.0, 40.0);
        let kind = SoftmaxKind::MbMax { c, rd };
        let cols = 32;
        let mut xs = uniform(&mut g, 3 * cols, 4.0, f);
        // Saturating inputs: beyond A on both sides.
        xs.extend((0..cols).map(|i| encode(if i % 2 == 0 { 1.0e5 } else { -1.0e5 }, f)));
        for mask in [Mask::None, Mask::Padding { valid: 20 }] {
            let sm = Softmax {
                kind,
                ..acc(4, cols, mask)
            };
            let got = run(&sm, &xs, ExpCoeffs::BLOCK, RECIP_Y0);
            let want = sm.reference(r, &xs);
            let k = sm.mb_consts(r).unwrap();
            let mut worst = 0;
            for (i, (&gv, &wv)) in got.iter().zip(&want).enumerate() {
                let (row, col) = (i / cols, i % cols);
                let l = sm.lens()[row];
                if col >= l {
                    assert_eq!(gv, 0);
                    continue;
                }
                let a = (xs[i] + k.c).clamp(-k.a, k.a);
                let b = decode(round_shift(a as i128 * k.k as i128, MBMAX_KBITS), f);
                assert!(
                    (gv - wv).abs() <= mb_ulps(b),
                    "MBMax {i}: {gv} vs {wv} (b {b})"
                );
                worst = worst.max((gv - wv).abs());
            }
            // Against the real formula: the ulp bound plus the rounding of K
            // (relative 2^-25/ρ, times 5).
            let e = errors(&sm, &xs, &got);
            let ymax = libm::pow(MBMAX_B, 5.0);
            let bound = mb_f64_bound(rd);
            let e_in = ErrStats::of(
                &got[..3 * cols]
                    .iter()
                    .map(|&v| decode(v, f))
                    .collect::<Vec<_>>(),
                &sm.f64_reference(&xs.iter().map(|&v| decode(v, f)).collect::<Vec<_>>())
                    [..3 * cols],
            );
            eprintln!(
                "MBMax {mask:?}: vs reference max {worst} ulp; vs formula max {:.3e} \
                 (in-range rows {:.3e}), mean {:.3e}",
                e.max_abs, e_in.max_abs, e.mean_abs
            );
            assert!(e.max_abs <= bound);
            // Saturated entries are ±B^5 within the bound.
            for &v in &got[3 * cols..3 * cols + sm.lens()[3]] {
                assert!((decode(v, f).abs() - ymax).abs() <= bound, "saturated {v}");
            }
        }
    }

    #[test]
    fn invalid_blocks_and_inputs_are_errors() {
        let r = RingCfg::ENCFORMER;
        let ok = acc(4, 4, Mask::None);
        assert!(ok.validate(r).is_ok());
        for bad in [
            acc(0, 4, Mask::None),
            acc(4, 0, Mask::None),
            acc(6, 4, Mask::Causal),
            acc(4, 4, Mask::Padding { valid: 0 }),
            acc(4, 4, Mask::Padding { valid: 5 }),
            acc(6, 4, Mask::CausalPadding { valid: 2 }),
        ] {
            assert!(bad.validate(r).is_err(), "{bad:?}");
            assert!(bad.reference(r, &[0; 16]).is_empty());
        }
        for (c, rd) in [
            (0.0, 0.0),
            (0.0, -1.0),
            (f64::NAN, 1.0),
            (0.0, f64::INFINITY),
            (1.0e12, 1.0),
        ] {
            let sm = Softmax {
                kind: SoftmaxKind::MbMax { c, rd },
                ..ok
            };
            assert!(sm.validate(r).is_err(), "{c} {rd}");
        }
        assert!(ok.validate(RingCfg::new(40, 13).unwrap()).is_err());
        // A wrong input length is an error on both parties, not a panic.
        let (mut p0, mut p1, _) = pair();
        let x = RingShares::new(vec![0; 15]);
        let (a, b) = {
            let (c0, c1) = (p0.channel(), p1.channel());
            let s0 = crate::mpc::Session::new(c0, async { ok.run(&mut p0, &x).await });
            let s1 = crate::mpc::Session::new(c1, async { ok.run(&mut p1, &x).await });
            crate::mpc::channel::run_pair(s0, s1)
        };
        assert!(a.is_err() && b.is_err());
    }

    #[test]
    fn cost_per_element() {
        let f = RingCfg::ENCFORMER.frac;
        let mut g = rng(30);
        for (name, kind, mask, h, c) in [
            ("accurate", SoftmaxKind::Accurate, Mask::None, 12, 16),
            (
                "accurate causal",
                SoftmaxKind::Accurate,
                Mask::Causal,
                12,
                16,
            ),
            (
                "MBMax",
                SoftmaxKind::MbMax { c: 3.0, rd: 40.0 },
                Mask::None,
                12,
                16,
            ),
            ("accurate", SoftmaxKind::Accurate, Mask::None, 1, 128),
            (
                "MBMax",
                SoftmaxKind::MbMax { c: 3.0, rd: 40.0 },
                Mask::None,
                1,
                128,
            ),
        ] {
            let xs = uniform(&mut g, h * c * c, 46.0, f);
            let sm = Softmax {
                kind,
                ..acc(h * c, c, mask)
            };
            let (mut p0, mut p1, r) = pair();
            let (x0, x1) = share(r, &xs, &mut g);
            let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
            let (o0, o1) = (p0.ot_counts(), p1.ot_counts());
            let t = std::time::Instant::now();
            let (y0, y1) = both!(
                p0,
                p1,
                sm.run(&mut p0, &x0).await,
                sm.run(&mut p1, &x1).await
            );
            let ms = t.elapsed().as_millis();
            // The metered run is also a correctness run: its opened output against the f64
            // softmax and against the integer reference.
            let got = open(r, &y0, &y1);
            let what = alloc::format!("cost {name} {h}x{c}x{c}");
            let (bound, ulps) = match kind {
                SoftmaxKind::Accurate => (SOFTMAX_ERR, SOFTMAX_REF_ULPS),
                SoftmaxKind::MbMax { rd, .. } => (mb_f64_bound(rd), mb_ulps(MBMAX_B)),
            };
            let e = errors(&sm, &xs, &got);
            assert!(e.max_abs <= bound, "{what}: {e:?} (bound {bound:.3e})");
            assert_within(&got, &sm.reference(r, &xs), ulps, &what);
            let (s0, s1) = (m0.read(), m1.read());
            let n = (h * c * c) as f64;
            let off = s0.offline.bytes_sent + s1.offline.bytes_sent;
            let on = s0.online.bytes_sent + s1.online.bytes_sent;
            let (n0, n1) = (p0.ot_counts(), p1.ot_counts());
            let cots = (n0.0 - o0.0) + (n1.0 - o1.0);
            eprintln!(
                "cost {name} {h}x{c}x{c}: {:.0} B/elem ({:.0} offline + {:.0} online), \
                 {:.1} COTs/elem, rounds offline {} online {} (P0) / {} {} (P1), {ms} ms",
                (off + on) as f64 / n,
                off as f64 / n,
                on as f64 / n,
                cots as f64 / n,
                s0.offline.rounds,
                s0.online.rounds,
                s1.offline.rounds,
                s1.online.rounds,
            );
        }
    }

    #[test]
    fn cost_breakdown() {
        // Bytes (both directions) per input of each step, at 128-entry rows.
        let f = RingCfg::ENCFORMER.frac;
        let mut g = rng(31);
        let n = 32 * 128;
        let xs = uniform(&mut g, n, 46.0, f);
        let ds: Vec<i64> = xs.iter().map(|v| -v.abs()).collect();
        let (mut p0, mut p1, r) = pair();
        let (x0, x1) = share(r, &xs, &mut g);
        let (d0, d1) = share(r, &ds, &mut g);
        let lens = vec![128; 32];
        let bytes = |m0: &Meter, m1: &Meter| {
            let (a, b) = (m0.read(), m1.read());
            let t = a.offline_online().bytes_sent + b.offline_online().bytes_sent;
            (t, a.offline_online().rounds)
        };
        // Each metered step is also checked: its opened output against the plaintext.
        let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
        let (y0, y1) = both!(
            p0,
            p1,
            max_ragged(&mut p0, &x0, &lens).await,
            max_ragged(&mut p1, &x1, &lens).await
        );
        let (b, rd) = bytes(&m0, &m1);
        let want: Vec<i64> = xs
            .chunks(128)
            .map(|row| *row.iter().max().unwrap())
            .collect();
        assert_eq!(open(r, &y0, &y1), want, "row max is exact");
        eprintln!(
            "step row max (128): {:.0} B/elem, {rd} rounds",
            b as f64 / n as f64
        );
        let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
        let (y0, y1) = both!(
            p0,
            p1,
            p0.clamp(&d0, Some(-16 << 13), None).await,
            p1.clamp(&d1, Some(-16 << 13), None).await
        );
        let (b, rd) = bytes(&m0, &m1);
        let want: Vec<i64> = ds.iter().map(|&d| d.max(-16 << 13)).collect();
        assert_eq!(open(r, &y0, &y1), want, "clamp is exact");
        eprintln!(
            "step clamp (one ReLU): {:.0} B/elem, {rd} rounds",
            b as f64 / n as f64
        );
        let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
        let (y0, y1) = both!(
            p0,
            p1,
            crate::nonlinear::exp::exp_neg(&mut p0, &d0, f).await,
            crate::nonlinear::exp::exp_neg(&mut p1, &d1, f).await
        );
        let (b, rd) = bytes(&m0, &m1);
        {
            use crate::nonlinear::exp::{exp_neg_f64, exp_neg_reference, EXP_ERR, EXP_REF_ULPS};
            let got = open(r, &y0, &y1);
            let want: Vec<i64> = ds.iter().map(|&d| exp_neg_reference(d, f)).collect();
            assert_within(&got, &want, EXP_REF_ULPS, "exp_neg vs its reference");
            for (&g, &d) in got.iter().zip(&ds) {
                let e = (decode(g, EXP_FRAC) - exp_neg_f64(decode(d, f))).abs();
                assert!(e <= EXP_ERR, "exp_neg at {d}: error {e:.3e}");
            }
        }
        eprintln!(
            "step exp_neg (clamp + 6 squarings): {:.0} B/elem, {rd} rounds",
            b as f64 / n as f64
        );
        let ss: Vec<i64> = (0..32)
            .map(|i| encode(1.0 + 3.7 * i as f64, EXP_FRAC))
            .collect();
        let (s0, s1) = share(r, &ss, &mut g);
        let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
        let (y0, y1) = both!(
            p0,
            p1,
            crate::nonlinear::recip::recip(&mut p0, &s0, EXP_FRAC, 7).await,
            crate::nonlinear::recip::recip(&mut p1, &s1, EXP_FRAC, 7).await
        );
        let (b, rd) = bytes(&m0, &m1);
        {
            use crate::nonlinear::recip::{recip_reference, RECIP_REF_ULPS, RECIP_ULPS};
            let got = open(r, &y0, &y1);
            let want: Vec<i64> = ss
                .iter()
                .map(|&s| recip_reference(s, EXP_FRAC, 7))
                .collect();
            assert_within(&got, &want, RECIP_REF_ULPS, "recip vs its reference");
            for (&g, &s) in got.iter().zip(&ss) {
                let exact = 1.0 / decode(s, EXP_FRAC);
                let e = (decode(g, EXP_FRAC) - exact).abs();
                let bound = RECIP_ULPS as f64 * decode(1, EXP_FRAC) + 7.1e-10;
                assert!(e <= bound, "recip at {s}: error {e:.3e} > {bound:.3e}");
            }
        }
        eprintln!(
            "step recip (J = 7): {:.0} B/row = {:.0} B/elem at 128 cols, {rd} rounds",
            b as f64 / 32.0,
            b as f64 / n as f64
        );
    }

    /// Runs both sessions in memory and returns the payload bytes the observer
    /// receives (as `channel::run_pair`, plus the recording).
    fn recorded<A, B>(
        mut s0: crate::mpc::Session<'_, A>,
        mut s1: crate::mpc::Session<'_, B>,
        observer_p1: bool,
    ) -> Vec<u8> {
        use core::task::Poll;
        let (mut d0, mut d1) = (false, false);
        let mut view = Vec::new();
        while !(d0 && d1) {
            let mut moved = false;
            if !d0 && matches!(s0.poll(), Poll::Ready(_)) {
                d0 = true;
                moved = true;
            }
            if !d1 && matches!(s1.poll(), Poll::Ready(_)) {
                d1 = true;
                moved = true;
            }
            for f in s0.take_outgoing() {
                if observer_p1 {
                    view.extend_from_slice(&f.payload);
                }
                s1.deliver(f);
                moved = true;
            }
            for f in s1.take_outgoing() {
                if !observer_p1 {
                    view.extend_from_slice(&f.payload);
                }
                s0.deliver(f);
                moved = true;
            }
            assert!(moved, "deadlock");
        }
        view
    }

    /// Per-bit two-proportion z test of two samples of views: `(Σ z², k, max |z|,
    /// constant positions that differ)`.
    fn compare_views(a: &[Vec<u8>], b: &[Vec<u8>]) -> (f64, usize, f64, bool) {
        let len = a[0].len();
        assert!(
            a.iter().chain(b).all(|v| v.len() == len),
            "view lengths differ"
        );
        let count = |s: &[Vec<u8>]| {
            let mut c = vec![0u32; len * 8];
            for v in s {
                for (i, x) in c.iter_mut().enumerate() {
                    *x += ((v[i / 8] >> (i % 8)) & 1) as u32;
                }
            }
            c
        };
        let (ca, cb) = (count(a), count(b));
        let (ra, rb) = (a.len() as f64, b.len() as f64);
        let (mut stat, mut k, mut max_z, mut mismatch) = (0.0, 0, 0.0f64, false);
        for (&x, &y) in ca.iter().zip(&cb) {
            let (x, y) = (x as f64, y as f64);
            let p = (x + y) / (ra + rb);
            if p == 0.0 || p == 1.0 {
                continue;
            }
            if (x == 0.0 || x == ra) && (y == 0.0 || y == rb) {
                mismatch = true;
            }
            let z = (x / ra - y / rb) / libm::sqrt(p * (1.0 - p) * (1.0 / ra + 1.0 / rb));
            stat += z * z;
            k += 1;
            max_z = max_z.max(z.abs());
        }
        (stat, k, max_z, mismatch)
    }

    fn indistinguishable(v: (f64, usize, f64, bool)) -> bool {
        let k = v.1 as f64;
        !v.3 && v.0 <= k + 6.0 * libm::sqrt(2.0 * k) && v.2 <= 6.0
    }

    #[test]
    fn views_do_not_depend_on_the_other_input() {
        // Changing one party's input (two valid score rows) keeps the distribution
        // of the messages the other party receives; a planted input bit is caught.
        const RUNS: usize = 120;
        let f = RingCfg::ENCFORMER.frac;
        let xa: Vec<i64> = vec![0; 4];
        let xb: Vec<i64> = [46.0, -46.0, 3.0, 10.0]
            .iter()
            .map(|&v| encode(v, f))
            .collect();
        for kind in [
            SoftmaxKind::Accurate,
            SoftmaxKind::MbMax { c: 3.0, rd: 40.0 },
        ] {
            let sm = Softmax {
                kind,
                ..acc(1, 4, Mask::None)
            };
            for observer_p1 in [true, false] {
                let (mut p0, mut p1, r) = pair();
                let mut g = rng(40);
                let other: Vec<u64> = (0..4).map(|_| g.next_u64() & r.mask()).collect();
                let (mut va, mut vb) = (Vec::new(), Vec::new());
                for run in 0..2 * RUNS {
                    let x = if run % 2 == 0 { &xa } else { &xb };
                    let vary = RingShares::new(
                        x.iter()
                            .zip(&other)
                            .map(|(&v, &o)| r.sub(r.from_signed(v), o))
                            .collect(),
                    );
                    let obs = RingShares::new(other.clone());
                    let (x0, x1) = if observer_p1 {
                        (vary, obs)
                    } else {
                        (obs, vary)
                    };
                    let s0 = crate::mpc::Session::new(p0.channel(), sm.run(&mut p0, &x0));
                    let s1 = crate::mpc::Session::new(p1.channel(), sm.run(&mut p1, &x1));
                    let v = recorded(s0, s1, observer_p1);
                    if run % 2 == 0 {
                        va.push(v)
                    } else {
                        vb.push(v)
                    }
                }
                let v = compare_views(&va, &vb);
                eprintln!(
                    "views {kind:?}, observer P{}: {} bytes, stat {:.0} over k {} (max |z| {:.2})",
                    observer_p1 as u8,
                    va[0].len(),
                    v.0,
                    v.1,
                    v.2
                );
                assert!(v.1 > 1000 && indistinguishable(v), "{kind:?}: views differ");
                // Negative control: one bit of the view set to the input.
                let pos = va[0].len() * 4 + 3;
                for x in va.iter_mut() {
                    x[pos / 8] &= !(1 << (pos % 8));
                }
                for x in vb.iter_mut() {
                    x[pos / 8] |= 1 << (pos % 8);
                }
                assert!(!indistinguishable(compare_views(&va, &vb)));
            }
        }
    }
}
