//! Protocol steps shared by the nonlinear blocks: fixed-point products with a chosen
//! truncation (general, squaring, row-broadcast, and by one party's private vector),
//! faithful rounding, elementwise and row maxima, and clamping; plus the local
//! (communication-free) linear steps.
//!
//! Costs per element at `ℓ = 43` with IKNP (16 B per COT), both directions:
//!
//! | step | COTs | correction bits | rounds |
//! |---|---|---|---|
//! | [`Party::mul_fx`] (Beaver, Gilboa triples) | `2ℓ` | `ℓ(ℓ+1) + 4ℓ` | 2 offline + 1, then truncation |
//! | [`Party::square_fx`] (one Gilboa cross term) | `ℓ` | `ℓ(ℓ+1)/2` | 2, then truncation |
//! | [`Party::mul_rows_fx`] (`y` shared per row) | `2ℓ` per row | `ℓ(ℓ+1)` | 2, then truncation |
//! | [`Party::mul_owned_fx`] (`w` private to one party, per column) | `ℓ` per column | `ℓ(ℓ+1)/2` | 2, then truncation |
//! | [`Party::trunc_round`] (`KnownMsb`) | 1 | `s` | 2 |
//! | [`Party::max_pair`] | as `x < y` + mux | | 1 + 6 + 2 |
//!
//! The row-broadcast products let one COT carry the corrections of a whole row
//! ([`crate::mpc::msgs::WideCorr`]), so their COT count is per row or per column,
//! not per element.

use crate::mpc::error::{expect_len, Result};
use crate::mpc::msgs::{CorrWidths, SquareCorr, WideCorr};
use crate::mpc::{Party, PartyId, RingCfg, RingShares};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::{Zeroize, Zeroizing};

/// `x + y` (local).
pub fn add(r: RingCfg, x: &RingShares, y: &RingShares) -> Result<RingShares> {
    expect_len("add operand", x.len(), y.len())?;
    Ok(RingShares::new(
        x.as_slice()
            .iter()
            .zip(y.as_slice())
            .map(|(&a, &b)| r.add(a, b))
            .collect(),
    ))
}

/// `x − y` (local).
pub fn sub(r: RingCfg, x: &RingShares, y: &RingShares) -> Result<RingShares> {
    expect_len("sub operand", x.len(), y.len())?;
    Ok(RingShares::new(
        x.as_slice()
            .iter()
            .zip(y.as_slice())
            .map(|(&a, &b)| r.sub(a, b))
            .collect(),
    ))
}

/// `x + c` for a public signed ring integer `c` (P0 adds it; local).
pub fn add_const(r: RingCfg, p0: bool, x: &RingShares, c: i64) -> RingShares {
    let c = r.from_signed(c);
    RingShares::new(
        x.as_slice()
            .iter()
            .map(|&v| if p0 { r.add(v, c) } else { v })
            .collect(),
    )
}

/// `k·x` for a public signed integer `k` (local, exact in the ring).
pub fn mul_int(r: RingCfg, x: &RingShares, k: i64) -> RingShares {
    let k = r.from_signed(k);
    RingShares::new(x.as_slice().iter().map(|&v| r.mul(v, k)).collect())
}

/// The constant `c` as shares: P0 holds it, P1 holds 0 (local).
pub fn constant(r: RingCfg, p0: bool, c: i64, n: usize) -> RingShares {
    RingShares::new(alloc::vec![if p0 { r.from_signed(c) } else { 0 }; n])
}

/// Sums the Gilboa terms `Σ_i 2^i·v[(i·m + k)]` for `k < m`, `i < ℓ`, with sign.
fn gilboa_sum(r: RingCfg, v: &[u64], m: usize, negate: bool) -> Vec<u64> {
    let e = r.ell as usize;
    (0..m)
        .map(|k| {
            let mut acc = 0u64;
            for i in 0..e {
                acc = acc.wrapping_add(v[i * m + k] << i);
            }
            if negate {
                r.sub(0, acc)
            } else {
                acc & r.mask()
            }
        })
        .collect()
}

/// Bit-major choice bits: bit `i` of `v[k]` at index `i·len + k`.
fn bit_major(v: &[u64], ell: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * ell as usize);
    for i in 0..ell {
        out.extend(v.iter().map(|&x| ((x >> i) & 1) as u8));
    }
    out
}

impl<R: RngCore + CryptoRng> Party<R> {
    /// Faithful rounding shift: `⌊(x + 2^{s−1}) / 2^s⌋` or one less, for
    /// `|x| < 2^{ℓ−2}` (the bound of [`crate::mpc::TruncMode::KnownMsb`]). Consumes `x`.
    pub async fn trunc_round(&mut self, mut x: RingShares, s: u32) -> Result<RingShares> {
        if s == 0 {
            return Ok(x);
        }
        let r = self.config().ring;
        // Checked here, before the offset `1 << (s − 1)` (a shift by ≥ 64 would panic).
        if s >= r.ell - 1 {
            return Err(crate::mpc::MpcError::InvalidInput(
                "shift must be < ell - 1",
            ));
        }
        if self.is_p0() {
            for v in x.as_mut_slice() {
                *v = r.add(*v, 1u64 << (s - 1));
            }
        }
        self.trunc(&x, s).await
    }

    /// `⌊x·y / 2^s⌉` (faithful) of shared `x, y`: Beaver product with Gilboa triples,
    /// then [`Party::trunc_round`]. Requires `|x·y| < 2^{ℓ−2}` as integers.
    pub async fn mul_fx(&mut self, x: &RingShares, y: &RingShares, s: u32) -> Result<RingShares> {
        expect_len("mul_fx operand y", x.len(), y.len())?;
        let t = self.triples(x.len()).await?;
        let z = self
            .mul_with_triples(x.as_slice(), y.as_slice(), &t, 0)
            .await?;
        self.trunc_round(z, s).await
    }

    /// `⌊x² / 2^s⌉` (faithful) of shared `x`: `x_0² + x_1² + 2·x_0x_1`, the cross term
    /// by one Gilboa OT multiplication (P1 chooses with the bits of `x_1`, P0 sends
    /// `x_0 mod 2^{ℓ−i}`): `ℓ` COTs per element, half of a general product, and no
    /// opening. Requires `x² < 2^{ℓ−2}` as integers.
    pub async fn square_fx(&mut self, x: &RingShares, s: u32) -> Result<RingShares> {
        let r = self.config().ring;
        let n = x.len();
        let e = r.ell as usize;
        let ch = self.channel();
        let width = CorrWidths::Gilboa { n, ell: r.ell };
        let cross = if self.is_p0() {
            let sb = self.ot()?.send(&ch, n * e).await?;
            let mut corr = Vec::with_capacity(n * e);
            for _ in 0..e {
                corr.extend_from_slice(x.as_slice());
            }
            let p = self.cot_send_corr::<SquareCorr>(&sb, &corr, width)?;
            corr.zeroize();
            gilboa_sum(r, &p, n, true)
        } else {
            let choices = bit_major(x.as_slice(), r.ell);
            let rb = self.ot()?.recv(&ch, choices).await?;
            let t = self.cot_recv_corr::<SquareCorr>(&rb, width).await?;
            gilboa_sum(r, &t, n, false)
        };
        let z = RingShares::new(
            x.as_slice()
                .iter()
                .zip(&cross)
                .map(|(&v, &c)| r.add(r.mul(v, v), c.wrapping_mul(2)))
                .collect(),
        );
        let mut cross = cross;
        cross.zeroize();
        self.trunc_round(z, s).await
    }

    /// Row-broadcast product `⌊x[r,c]·y[r] / 2^s⌉` (faithful) of a shared
    /// `rows × cols` matrix `x` (row-major) and a shared per-row vector `y`. Both cross
    /// terms are Gilboa products whose chooser is the row value, so one COT per bit and
    /// row carries the corrections of the whole row ([`Party::cot_send_wide`]): `2ℓ`
    /// COTs per row and `ℓ(ℓ+1)` correction bits per element. Requires
    /// `|x·y| < 2^{ℓ−2}` as integers.
    pub async fn mul_rows_fx(
        &mut self,
        x: &RingShares,
        y: &RingShares,
        cols: usize,
        s: u32,
    ) -> Result<RingShares> {
        let r = self.config().ring;
        let rows = y.len();
        let n = rows
            .checked_mul(cols)
            .ok_or(crate::mpc::MpcError::InvalidInput(
                "mul_rows_fx shape overflows",
            ))?;
        expect_len("mul_rows_fx matrix (rows·cols)", n, x.len())?;
        let e = r.ell as usize;
        let ch = self.channel();
        let width = CorrWidths::Gilboa {
            n: rows * cols,
            ell: r.ell,
        };
        let rb = self.ot()?.recv(&ch, bit_major(y.as_slice(), r.ell)).await?;
        let sb = self.ot()?.send(&ch, rows * e).await?;
        let mut corr = Vec::with_capacity(rows * cols * e);
        for _ in 0..e {
            corr.extend_from_slice(x.as_slice());
        }
        let p = self.cot_send_wide::<WideCorr>(&sb, &corr, cols, width)?;
        corr.zeroize();
        let t = self.cot_recv_wide::<WideCorr>(&rb, cols, width).await?;
        let (ps, ts) = (
            Zeroizing::new(gilboa_sum(r, &p, rows * cols, true)),
            Zeroizing::new(gilboa_sum(r, &t, rows * cols, false)),
        );
        let (xs, ys) = (x.as_slice(), y.as_slice());
        let z = (0..rows * cols)
            .map(|k| r.add(r.mul(xs[k], ys[k / cols.max(1)]), r.add(ps[k], ts[k])))
            .collect();
        self.trunc_round(RingShares::new(z), s).await
    }

    /// Product `⌊x[r,c]·w[c] / 2^s⌉` (faithful) of a shared `rows × cols` matrix and a
    /// per-column vector `w` that only `owner` holds (e.g. the server's LayerNorm `γ`):
    /// the owner passes `Some(w)` (ring integers), the other party `None`. The only
    /// cross term, `x_other·w`, is a Gilboa product whose chooser is `w[c]`, so one COT
    /// per bit and column carries the whole column: `ℓ` COTs per column and
    /// `ℓ(ℓ+1)/2` correction bits per element. Requires `|x·w| < 2^{ℓ−2}`.
    pub async fn mul_owned_fx(
        &mut self,
        x: &RingShares,
        w: Option<&[u64]>,
        owner: PartyId,
        cols: usize,
        s: u32,
    ) -> Result<RingShares> {
        let r = self.config().ring;
        if cols == 0 {
            expect_len("mul_owned_fx matrix", 0, x.len())?;
            return Ok(RingShares::new(Vec::new()));
        }
        if !x.len().is_multiple_of(cols) {
            return Err(crate::mpc::MpcError::LengthMismatch {
                what: "mul_owned_fx matrix (a multiple of cols)",
                expected: x.len().div_ceil(cols) * cols,
                found: x.len(),
            });
        }
        let rows = x.len() / cols;
        let e = r.ell as usize;
        let ch = self.channel();
        let width = CorrWidths::Gilboa {
            n: rows * cols,
            ell: r.ell,
        };
        let xs = x.as_slice();
        let z: Vec<u64> = if owner == self.id() {
            let w = w.ok_or(crate::mpc::MpcError::InvalidInput(
                "the owner of w must provide it",
            ))?;
            expect_len("mul_owned_fx vector w", cols, w.len())?;
            let w: Zeroizing<Vec<u64>> = Zeroizing::new(w.iter().map(|&v| v & r.mask()).collect());
            let rb = self.ot()?.recv(&ch, bit_major(&w, r.ell)).await?;
            let t = self.cot_recv_wide::<WideCorr>(&rb, rows, width).await?;
            // t is indexed (i·cols + c)·rows + row: column-major within each bit.
            let ts = Zeroizing::new(gilboa_sum(r, &t, rows * cols, false));
            (0..rows * cols)
                .map(|k| {
                    let (row, c) = (k / cols, k % cols);
                    r.add(r.mul(xs[k], w[c]), ts[c * rows + row])
                })
                .collect()
        } else {
            let sb = self.ot()?.send(&ch, cols * e).await?;
            let mut corr = Vec::with_capacity(rows * cols * e);
            for _ in 0..e {
                for c in 0..cols {
                    corr.extend((0..rows).map(|row| xs[row * cols + c]));
                }
            }
            let p = self.cot_send_wide::<WideCorr>(&sb, &corr, rows, width)?;
            corr.zeroize();
            let ps = Zeroizing::new(gilboa_sum(r, &p, rows * cols, true));
            (0..rows * cols)
                .map(|k| ps[(k % cols) * rows + k / cols])
                .collect()
        };
        self.trunc_round(RingShares::new(z), s).await
    }

    /// Elementwise `max(a, b)` for `|a − b| < 2^{ℓ−1}`: `a + [a < b]·(b − a)` (one
    /// comparison and one multiplexer; exact).
    pub async fn max_pair(&mut self, a: &RingShares, b: &RingShares) -> Result<RingShares> {
        let r = self.config().ring;
        let lt = self.less_than(a, b).await?;
        let d = sub(r, b, a)?;
        let m = self.mux(&lt, &d).await?;
        add(r, a, &m)
    }

    /// Maximum of each row of a shared `rows × cols` matrix (row-major): a binary
    /// tree of [`Party::max_pair`] over all rows at once, `⌈log2 cols⌉` levels,
    /// `cols − 1` comparisons per row. Exact for entries with pairwise differences
    /// below `2^{ℓ−1}`.
    pub async fn max_rows(&mut self, x: &RingShares, cols: usize) -> Result<RingShares> {
        if cols == 0 {
            return Err(crate::mpc::MpcError::InvalidInput("max over empty rows"));
        }
        if !x.len().is_multiple_of(cols) {
            return Err(crate::mpc::MpcError::LengthMismatch {
                what: "max_rows matrix (a multiple of cols)",
                expected: x.len().div_ceil(cols) * cols,
                found: x.len(),
            });
        }
        let rows = x.len() / cols;
        let mut cur = x.clone();
        let mut w = cols;
        while w > 1 {
            let half = w / 2;
            let s = cur.as_slice();
            let mut a = Vec::with_capacity(rows * half);
            let mut b = Vec::with_capacity(rows * half);
            for row in s.chunks(w) {
                for j in 0..half {
                    a.push(row[2 * j]);
                    b.push(row[2 * j + 1]);
                }
            }
            let m = self
                .max_pair(&RingShares::new(a), &RingShares::new(b))
                .await?;
            let nw = half + w % 2;
            let mut next = Vec::with_capacity(rows * nw);
            for (k, row) in s.chunks(w).enumerate() {
                next.extend_from_slice(&m.as_slice()[k * half..(k + 1) * half]);
                if w % 2 == 1 {
                    next.push(row[w - 1]);
                }
            }
            cur = RingShares::new(next);
            w = nw;
        }
        Ok(cur)
    }

    /// `min(max(x, lo), hi)` for public signed ring integers (either bound optional,
    /// `lo ≤ hi`, both in `[−2^{ℓ−1}, 2^{ℓ−1})`, else `InvalidInput`): `x + ReLU(lo − x) − ReLU(x − hi)`, both ReLUs in one batch. Exact for
    /// `|x − lo|, |x − hi| < 2^{ℓ−1}`.
    pub async fn clamp(
        &mut self,
        x: &RingShares,
        lo: Option<i64>,
        hi: Option<i64>,
    ) -> Result<RingShares> {
        let r = self.config().ring;
        if let (Some(l), Some(h)) = (lo, hi) {
            if l > h {
                return Err(crate::mpc::MpcError::InvalidInput("clamp needs lo <= hi"));
            }
        }
        // Bounds beyond the ring's signed range would wrap (and `−i64::MIN` overflow).
        let half = 1i128 << (r.ell - 1);
        if [lo, hi]
            .into_iter()
            .flatten()
            .any(|b| !(-half..half).contains(&(b as i128)))
        {
            return Err(crate::mpc::MpcError::InvalidInput(
                "clamp bounds must lie in the ring's signed range",
            ));
        }
        let p0 = self.is_p0();
        let n = x.len();
        let mut arg = Vec::with_capacity(2 * n);
        if let Some(l) = lo {
            arg.extend(add_const(r, p0, &mul_int(r, x, -1), l).into_vec());
        }
        if let Some(h) = hi {
            arg.extend(add_const(r, p0, x, -h).into_vec());
        }
        if arg.is_empty() {
            return Ok(x.clone());
        }
        let relu = self.relu(&RingShares::new(arg)).await?;
        let rs = relu.as_slice();
        let mut out = x.clone();
        let mut off = 0;
        if lo.is_some() {
            for (v, &a) in out.as_mut_slice().iter_mut().zip(&rs[..n]) {
                *v = r.add(*v, a);
            }
            off = n;
        }
        if hi.is_some() {
            for (v, &a) in out.as_mut_slice().iter_mut().zip(&rs[off..off + n]) {
                *v = r.sub(*v, a);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::fixed;
    use crate::nn::testkit::*;

    #[test]
    fn products_match_the_rounded_reference() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(1);
        let (rows, cols) = (5, 7);
        let xs = uniform(&mut g, rows * cols, 6.0, r.frac);
        let ys = uniform(&mut g, rows * cols, 6.0, r.frac);
        let yr = uniform(&mut g, rows, 6.0, r.frac);
        let w = uniform(&mut g, cols, 3.0, r.frac);
        let (x0, x1) = share(r, &xs, &mut g);
        let (y0, y1) = share(r, &ys, &mut g);
        let (r0, r1) = share(r, &yr, &mut g);
        let f = r.frac;
        let (a0, a1) = both!(
            p0,
            p1,
            p0.mul_fx(&x0, &y0, f).await,
            p1.mul_fx(&x1, &y1, f).await
        );
        let want: Vec<i64> = xs
            .iter()
            .zip(&ys)
            .map(|(&a, &b)| fixed::mul(a, b, f))
            .collect();
        assert_within(&open(r, &a0, &a1), &want, 1, "mul_fx");
        let (s0, s1) = both!(
            p0,
            p1,
            p0.square_fx(&x0, f).await,
            p1.square_fx(&x1, f).await
        );
        let want: Vec<i64> = xs.iter().map(|&a| fixed::mul(a, a, f)).collect();
        assert_within(&open(r, &s0, &s1), &want, 1, "square_fx");
        let (m0, m1) = both!(
            p0,
            p1,
            p0.mul_rows_fx(&x0, &r0, cols, f).await,
            p1.mul_rows_fx(&x1, &r1, cols, f).await
        );
        let want: Vec<i64> = (0..rows * cols)
            .map(|k| fixed::mul(xs[k], yr[k / cols], f))
            .collect();
        assert_within(&open(r, &m0, &m1), &want, 1, "mul_rows_fx");
        let wr: Vec<u64> = w.iter().map(|&v| r.from_signed(v)).collect();
        for owner in [PartyId::P0, PartyId::P1] {
            let (w0, w1) = match owner {
                PartyId::P0 => (Some(&wr[..]), None),
                PartyId::P1 => (None, Some(&wr[..])),
            };
            let (o0, o1) = both!(
                p0,
                p1,
                p0.mul_owned_fx(&x0, w0, owner, cols, f).await,
                p1.mul_owned_fx(&x1, w1, owner, cols, f).await
            );
            let want: Vec<i64> = (0..rows * cols)
                .map(|k| fixed::mul(xs[k], w[k % cols], f))
                .collect();
            assert_within(&open(r, &o0, &o1), &want, 1, "mul_owned_fx");
        }
    }

    /// Polls one party's step once: it must fail at once with a typed error.
    fn fails_at_once<T: core::fmt::Debug>(
        ch: crate::mpc::Channel,
        fut: impl core::future::Future<Output = Result<T>>,
    ) -> crate::mpc::MpcError {
        let mut s = crate::mpc::Session::new(ch, fut);
        match s.poll() {
            core::task::Poll::Ready(Err(e)) => e,
            other => panic!("expected an immediate error, got {other:?}"),
        }
    }

    #[test]
    fn bad_shifts_and_shapes_are_typed_errors() {
        // A failed step poisons its channel: a fresh (not set up) party per case; the
        // checks come before any OT.
        let fresh = |id| Party::new(id, crate::mpc::MpcConfig::ENCFORMER, rng(9)).unwrap();
        let r = RingCfg::ENCFORMER;
        let x = RingShares::new(alloc::vec![0; 4]);
        // Shifts the truncation rejects, including ones at or beyond 64 bits (the
        // rounding offset 1 << (s − 1) used to panic before the check).
        for s in [r.ell - 1, 64, 65, 200] {
            for id in [PartyId::P0, PartyId::P1] {
                let mut p = fresh(id);
                let e = fails_at_once(p.channel(), p.trunc_round(x.clone(), s));
                assert!(matches!(e, crate::mpc::MpcError::InvalidInput(_)), "{e:?}");
            }
        }
        // rows·cols overflowing usize, and a plain mismatch.
        let y = RingShares::new(alloc::vec![0; 2]);
        let mut p = fresh(PartyId::P0);
        let e = fails_at_once(p.channel(), p.mul_rows_fx(&x, &y, usize::MAX, 13));
        assert!(matches!(e, crate::mpc::MpcError::InvalidInput(_)), "{e:?}");
        let mut p = fresh(PartyId::P1);
        let e = fails_at_once(p.channel(), p.mul_rows_fx(&x, &y, 3, 13));
        assert!(
            matches!(e, crate::mpc::MpcError::LengthMismatch { .. }),
            "{e:?}"
        );
    }

    #[test]
    fn clamp_rejects_bounds_outside_the_ring() {
        let fresh = |id| Party::new(id, crate::mpc::MpcConfig::ENCFORMER, rng(9)).unwrap();
        let x = RingShares::new(alloc::vec![0; 4]);
        let big = 1i64 << (RingCfg::ENCFORMER.ell - 1);
        for (lo, hi) in [
            (None, Some(i64::MIN)),
            (Some(i64::MIN), None),
            (Some(-big - 1), Some(0)),
            (Some(0), Some(big)),
        ] {
            let mut p = fresh(PartyId::P0);
            let e = fails_at_once(p.channel(), p.clamp(&x, lo, hi));
            assert!(matches!(e, crate::mpc::MpcError::InvalidInput(_)), "{e:?}");
        }
    }

    #[test]
    fn empty_inputs_and_single_columns() {
        let (mut p0, mut p1, r) = pair();
        let e = RingShares::new(Vec::new());
        let (a, b) = both!(
            p0,
            p1,
            p0.square_fx(&e, 13).await,
            p1.square_fx(&e, 13).await
        );
        assert!(a.is_empty() && b.is_empty());
        let (a, _) = both!(
            p0,
            p1,
            p0.mul_rows_fx(&e, &e, 5, 13).await,
            p1.mul_rows_fx(&e, &e, 5, 13).await
        );
        assert!(a.is_empty());
        let w = [r.from_signed(8192); 3];
        let (a, _) = both!(
            p0,
            p1,
            p0.mul_owned_fx(&e, Some(&w), PartyId::P0, 3, 13).await,
            p1.mul_owned_fx(&e, None, PartyId::P0, 3, 13).await
        );
        assert!(a.is_empty());
        let (a, _) = both!(p0, p1, p0.max_rows(&e, 4).await, p1.max_rows(&e, 4).await);
        assert!(a.is_empty());
        let (a, _) = both!(
            p0,
            p1,
            p0.clamp(&e, Some(-1), Some(1)).await,
            p1.clamp(&e, Some(-1), Some(1)).await
        );
        assert!(a.is_empty());
        // cols = 1: a column vector times its row values.
        let mut g = rng(4);
        let xs = uniform(&mut g, 6, 4.0, r.frac);
        let ys = uniform(&mut g, 6, 4.0, r.frac);
        let (x0, x1) = share(r, &xs, &mut g);
        let (y0, y1) = share(r, &ys, &mut g);
        let (m0, m1) = both!(
            p0,
            p1,
            p0.mul_rows_fx(&x0, &y0, 1, r.frac).await,
            p1.mul_rows_fx(&x1, &y1, 1, r.frac).await
        );
        let want: Vec<i64> = xs
            .iter()
            .zip(&ys)
            .map(|(&a, &b)| fixed::mul(a, b, r.frac))
            .collect();
        assert_within(&open(r, &m0, &m1), &want, 1, "mul_rows_fx cols = 1");
    }

    #[test]
    fn maxima_and_clamp_are_exact() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(2);
        for cols in [1usize, 2, 5, 8, 13] {
            let rows = 4;
            let xs = uniform(&mut g, rows * cols, 50.0, r.frac);
            let (x0, x1) = share(r, &xs, &mut g);
            let (m0, m1) = both!(
                p0,
                p1,
                p0.max_rows(&x0, cols).await,
                p1.max_rows(&x1, cols).await
            );
            let want: Vec<i64> = xs.chunks(cols).map(|c| *c.iter().max().unwrap()).collect();
            assert_eq!(open(r, &m0, &m1), want, "max_rows cols {cols}");
        }
        let xs = uniform(&mut g, 64, 20.0, r.frac);
        let (x0, x1) = share(r, &xs, &mut g);
        let (lo, hi) = (fixed::encode(-3.0, r.frac), fixed::encode(4.5, r.frac));
        for (l, h) in [(Some(lo), Some(hi)), (Some(lo), None), (None, Some(hi))] {
            let (c0, c1) = both!(p0, p1, p0.clamp(&x0, l, h).await, p1.clamp(&x1, l, h).await);
            let want: Vec<i64> = xs
                .iter()
                .map(|&v| v.max(l.unwrap_or(i64::MIN)).min(h.unwrap_or(i64::MAX)))
                .collect();
            assert_eq!(open(r, &c0, &c1), want);
        }
    }
}
