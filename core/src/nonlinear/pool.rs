//! 2×2 max pooling with stride 2 (the CNN activation of the issue), by a two-level
//! tree of [`Party::max_pair`] over the whole tensor, and its fusion with ReLU.
//!
//! The input is a shared `(C, H, W)` tensor in row-major order, `H` and `W` even; the
//! output is `(C, H/2, W/2)`, each entry the maximum of its 2×2 window. Level one
//! compares the two horizontal pairs of every window in one batch (`C·H·W/2`
//! comparisons), level two the two winners (`C·H·W/4`): every level is one batched
//! [`Party::max_pair`], so a whole tensor takes one message per round.
//!
//! # Exactness and range
//!
//! `max_pair(a, b) = a + [a < b]·(b − a)` is exact when `|a − b| < 2^{ℓ−1}`, which
//! holds for every input in the engine's range `|x| < 2^{ℓ−2}` (as ring integers; the
//! range every product and truncation of [`crate::mpc`] already requires). There is no
//! truncation, so the protocol equals [`MaxPool::reference`] bit for bit (0 ulp).
//! Outside that range the output still never wraps: the multiplexer returns `a` or `b`,
//! so every output is one of its window's four inputs (possibly not the largest).
//!
//! # Cost (per output element, i.e. per window)
//!
//! Three comparisons and three multiplexers (`x < y` is an `(ℓ)`-bit millionaires'
//! protocol), in two sequential levels. [`MaxPool::run_relu`] adds one ReLU per
//! window: `max(a, b, c, d, 0)` for a quarter of the ReLUs of ReLU-then-pool.

use crate::mpc::error::{expect_len, Result};
use crate::mpc::{MpcError, Party, RingCfg, RingShares};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// 2×2 max pooling, stride 2, over a `(channels, height, width)` row-major tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool {
    /// Channels `C`.
    pub channels: usize,
    /// Input height `H` (even).
    pub height: usize,
    /// Input width `W` (even).
    pub width: usize,
}

impl MaxPool {
    /// Elements of the input, `C·H·W` (0 on overflow, which [`MaxPool::validate`] refuses).
    pub fn input_len(&self) -> usize {
        self.checked_len().unwrap_or(0)
    }

    /// `C·H·W`, or `None` on overflow.
    fn checked_len(&self) -> Option<usize> {
        self.channels
            .checked_mul(self.height)
            .and_then(|v| v.checked_mul(self.width))
    }

    /// Elements of the output, `C·(H/2)·(W/2)`.
    pub fn output_len(&self) -> usize {
        self.input_len() / 4
    }

    /// Checks the shape: `H`, `W` even, `C·H·W` without overflow. The ring needs no
    /// condition (no product, no truncation).
    pub fn validate(&self, _ring: RingCfg) -> Result<()> {
        if !self.height.is_multiple_of(2) || !self.width.is_multiple_of(2) {
            return Err(MpcError::InvalidInput(
                "max pool 2x2 needs an even height and width",
            ));
        }
        if self.checked_len().is_none() {
            return Err(MpcError::InvalidInput("max pool shape overflows"));
        }
        Ok(())
    }

    /// Indices of the four inputs of output `k`: top-left, top-right, bottom-left,
    /// bottom-right.
    fn window(&self, k: usize) -> [usize; 4] {
        let (oh, ow) = (self.height / 2, self.width / 2);
        let (c, rem) = (k / (oh * ow), k % (oh * ow));
        let (i, j) = (rem / ow, rem % ow);
        let base = c * self.height * self.width + 2 * i * self.width + 2 * j;
        [base, base + 1, base + self.width, base + self.width + 1]
    }

    /// The pooled tensor `(C, H/2, W/2)` of shared `x` (exact, 0 ulp; two levels of
    /// [`Party::max_pair`]).
    pub async fn run<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
    ) -> Result<RingShares> {
        self.validate(p.config().ring)?;
        expect_len("max pool input (C·H·W)", self.input_len(), x.len())?;
        let m = self.output_len();
        let xs = x.as_slice();
        // Level one: [top-left | bottom-left] against [top-right | bottom-right].
        let mut a = Vec::with_capacity(2 * m);
        let mut b = Vec::with_capacity(2 * m);
        for row in 0..2 {
            for k in 0..m {
                let w = self.window(k);
                a.push(xs[w[2 * row]]);
                b.push(xs[w[2 * row + 1]]);
            }
        }
        let l1 = p.max_pair(&RingShares::new(a), &RingShares::new(b)).await?;
        let (top, bottom) = l1.as_slice().split_at(m);
        p.max_pair(
            &RingShares::new(top.to_vec()),
            &RingShares::new(bottom.to_vec()),
        )
        .await
    }

    /// `max(maxpool(x), 0)`, i.e. ReLU then pooling (they commute), with the ReLU on the
    /// pooled tensor: one ReLU per window instead of four. Exact.
    pub async fn run_relu<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
    ) -> Result<RingShares> {
        let m = self.run(p, x).await?;
        p.relu(&m).await
    }

    /// The same function on plain signed ring integers (the protocol equals it exactly
    /// for `|x| < 2^{ℓ−2}`). A wrong length gives an empty vector.
    pub fn reference(&self, _ring: RingCfg, x: &[i64]) -> Vec<i64> {
        self.window_max(x, Ord::max)
    }

    /// The reference of [`MaxPool::run_relu`].
    pub fn reference_relu(&self, ring: RingCfg, x: &[i64]) -> Vec<i64> {
        self.reference(ring, x)
            .into_iter()
            .map(|v| v.max(0))
            .collect()
    }

    /// The real function (max over each window). A wrong length gives an empty vector.
    pub fn f64_reference(&self, x: &[f64]) -> Vec<f64> {
        self.window_max(x, f64::max)
    }

    /// `max` over each window of `x` (the references), as
    /// `max(max(top-left, top-right), max(bottom-left, bottom-right))`; empty for an odd
    /// side or a wrong length (a shape that overflows has `input_len() = 0`, so its output
    /// is empty as well).
    fn window_max<T: Copy>(&self, x: &[T], max: fn(T, T) -> T) -> Vec<T> {
        if !self.height.is_multiple_of(2)
            || !self.width.is_multiple_of(2)
            || x.len() != self.input_len()
        {
            return Vec::new();
        }
        (0..self.output_len())
            .map(|k| {
                let w = self.window(k);
                max(max(x[w[0]], x[w[1]]), max(x[w[2]], x[w[3]]))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::fixed;
    use crate::nonlinear::testkit::*;
    use std::eprintln;

    /// A `channels × height × width` pooling.
    fn pool(channels: usize, height: usize, width: usize) -> MaxPool {
        MaxPool {
            channels,
            height,
            width,
        }
    }

    /// Runs `mp` on the shares `x0` (P0) and `x1` (P1); both output shares.
    fn run_pool(
        p0: &mut P,
        p1: &mut P,
        mp: &MaxPool,
        x0: &RingShares,
        x1: &RingShares,
    ) -> (RingShares, RingShares) {
        both!(p0, p1, mp.run(p0, x0).await, mp.run(p1, x1).await)
    }

    #[test]
    fn max_pool_is_exact_with_ties_and_negatives() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(7);
        let mp = pool(3, 6, 8);
        let n = mp.input_len();
        let mut xs = uniform(&mut g, n, 40.0, r.frac);
        // Channel 1: all negative; channel 2: ties (four equal, two equal maxima).
        for v in &mut xs[48..96] {
            *v = -v.abs() - 1;
        }
        for v in &mut xs[96..] {
            *v = (*v % 3) * (1 << r.frac);
        }
        xs[0] = 5;
        xs[1] = 5;
        xs[8] = 5;
        xs[9] = 5;
        let (x0, x1) = share(r, &xs, &mut g);
        let (m0, m1) = run_pool(&mut p0, &mut p1, &mp, &x0, &x1);
        let got = open(r, &m0, &m1);
        assert_eq!(got, mp.reference(r, &xs));
        let xf: Vec<f64> = xs.iter().map(|&v| fixed::decode(v, r.frac)).collect();
        let gf: Vec<f64> = got.iter().map(|&v| fixed::decode(v, r.frac)).collect();
        let e = fixed::ErrStats::of(&gf, &mp.f64_reference(&xf));
        eprintln!(
            "max pool: max abs err {:e}, mean {:e}",
            e.max_abs, e.mean_abs
        );
        assert_eq!(e.max_abs, 0.0);
        assert!(got[12..24].iter().all(|&v| v < 0), "all-negative channel");
        let (f0, f1) = both!(
            p0,
            p1,
            mp.run_relu(&mut p0, &x0).await,
            mp.run_relu(&mut p1, &x1).await
        );
        assert_eq!(open(r, &f0, &f1), mp.reference_relu(r, &xs));
    }

    #[test]
    fn max_pool_range_ends_are_exact_and_beyond_never_wrap() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(8);
        let mp = pool(1, 2, 4);
        let big = (1i64 << (r.ell - 2)) - 1;
        // In range: the extremes of |x| < 2^{ℓ−2}.
        let xs = [big, -big, -big, 0, -big, -big, 1, big];
        let (x0, x1) = share(r, &xs, &mut g);
        let (m0, m1) = run_pool(&mut p0, &mut p1, &mp, &x0, &x1);
        assert_eq!(open(r, &m0, &m1), alloc::vec![big, big]);
        // Beyond it: the output is one of the window's inputs.
        let top = (1i64 << (r.ell - 1)) - 1;
        let xs = [top, -top - 1, 3, -top, -top - 1, top, top, 0];
        let (x0, x1) = share(r, &xs, &mut g);
        let (m0, m1) = run_pool(&mut p0, &mut p1, &mp, &x0, &x1);
        let got = open(r, &m0, &m1);
        for (k, v) in got.iter().enumerate() {
            assert!(
                mp.window(k).iter().any(|&i| xs[i] == *v),
                "{v} not in window {k}"
            );
        }
    }

    #[test]
    fn max_pool_refuses_bad_shapes() {
        let (mut p0, mut p1, r) = pair();
        let odd = pool(1, 3, 4);
        assert!(matches!(odd.validate(r), Err(MpcError::InvalidInput(_))));
        assert!(odd.reference(r, &[0; 12]).is_empty());
        let mp = pool(2, 2, 2);
        let x = RingShares::new(alloc::vec![0; 7]);
        let (a, b) = {
            let (c0, c1) = (p0.channel(), p1.channel());
            let s0 = crate::mpc::Session::new(c0, async { mp.run(&mut p0, &x).await });
            let s1 = crate::mpc::Session::new(c1, async { mp.run(&mut p1, &x).await });
            crate::mpc::channel::run_pair(s0, s1)
        };
        assert!(matches!(a, Err(MpcError::LengthMismatch { .. })));
        assert!(matches!(b, Err(MpcError::LengthMismatch { .. })));
        let huge = pool(usize::MAX, 2, 2);
        assert!(huge.validate(r).is_err());
    }
}
