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
//! | [`Party::mul_bounded_fx`] (`|x| < 2^{bx}`, `|y| < 2^{by}`, `m = min(bx, by) + 2`) | `2m + 4` | `2Σ_{i<m}(ℓ−i) + 4(ℓ−m)` | 2, then truncation |
//! | [`Party::square_bounded_fx`] (`|x| < 2^b`: one Gilboa cross term on `m = b + 2`-bit shares, two wrap COTs) | `m + 2` | `Σ_{i<m}(ℓ−i) + 2(ℓ−m−1)` | 2, then truncation |
//! | [`Party::square_fx`] (the bounded squaring at `b = ⌊(ℓ−1)/2⌋`, implied by `x² < 2^{ℓ−2}`) | `25` | `774` | 2, then truncation |
//! | [`Party::mul_rows_fx`] (`y` shared per row) | `2ℓ` per row | `ℓ(ℓ+1)` | 2, then truncation |
//! | [`Party::mul_owned_fx`] (`w` private to one party, per column) | `ℓ` per column | `ℓ(ℓ+1)/2` | 2, then truncation |
//! | [`Party::trunc_round`] (`KnownMsb`) | 1 | `s` | 2 |
//! | [`Party::max_pair`] | as `x < y` + mux | | 1 + 6 + 2 |
//!
//! The row-broadcast products let one COT carry the corrections of a whole row
//! ([`crate::mpc::msgs::WideCorr`]), so their COT count is per row or per column,
//! not per element.

use crate::mpc::error::{expect_len, Result};
use crate::mpc::msgs::{CorrWidths, MulCorr, SquareCorr, SquareWrapCorr};
use crate::mpc::ring::mask;
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
    gilboa_sum_bits(r, v, m, r.ell, negate)
}

/// `v·2^k mod 2^64` (zero for `k ≥ 64`).
fn shl(v: u64, k: u32) -> u64 {
    if k < 64 {
        v << k
    } else {
        0
    }
}

/// This party's `m`-bit share of `v + 2^b` (P0 adds the offset): the bounded steps'
/// local reduction, so that the shares add up to the offset value plus a wrap of `2^m`.
fn offset_low_bits(v: &[u64], p0: bool, b: u32, m: u32) -> Zeroizing<Vec<u64>> {
    let mm = mask(m);
    let off = if p0 { 1u64 << b } else { 0 };
    Zeroizing::new(v.iter().map(|&x| x.wrapping_add(off) & mm).collect())
}

/// Sums the first `bits` Gilboa blocks `Σ_{i<bits} 2^i·v[(i·m + k)]`, with sign
/// (the bounded squaring's cross term; its tail block is read separately).
fn gilboa_sum_bits(r: RingCfg, v: &[u64], m: usize, bits: u32, negate: bool) -> Vec<u64> {
    (0..m)
        .map(|k| {
            let mut acc = 0u64;
            for i in 0..bits as usize {
                acc = acc.wrapping_add(v[i * m + k] << i);
            }
            if negate {
                r.sub(0, acc & r.mask())
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

    /// `⌊x² / 2^s⌉` (faithful) of shared `x`. Requires `x² < 2^{ℓ−2}` as integers,
    /// which implies `|x| < 2^b` with `b = ⌊(ℓ−1)/2⌋` (21 at `ℓ = 43`), so it runs
    /// [`Party::square_bounded_fx`] with that bound: `b + 4` COTs per element (25 at
    /// `ℓ = 43`) instead of the full ring's `ℓ`, no opening, and the same rounds.
    pub async fn square_fx(&mut self, x: &RingShares, s: u32) -> Result<RingShares> {
        let b = (self.config().ring.ell - 1) / 2;
        self.square_bounded_fx(x, b, s).await
    }

    /// `⌊x² / 2^s⌉` of shared `x` over the whole ring: `x_0² + x_1² + 2·x_0x_1`, the
    /// cross term by one Gilboa OT multiplication (P1 chooses with the bits of `x_1`,
    /// P0 sends `x_0 mod 2^{ℓ−i}`): `ℓ` COTs per element, half of a general product.
    /// The bounded squaring's fallback for rings too narrow for its wrap bits.
    async fn square_full_fx(&mut self, x: &RingShares, s: u32) -> Result<RingShares> {
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

    /// `⌊x² / 2^s⌉` (faithful) of a shared `x` known to satisfy `|x| < 2^b` (as a
    /// signed ring integer; `b` is public): the Gilboa squaring on `m = b + 2`-bit
    /// shares, so the cross term takes `m` COTs instead of `ℓ` (`m + 2` in all, with
    /// the two wrap COTs). Falls back to the full ring's Gilboa squaring (`ℓ` COTs)
    /// when `m > ℓ − 2`. The truncation by `s > 0` also requires `x² < 2^{ℓ−2}`.
    ///
    /// # Protocol
    ///
    /// `z = x + 2^b ∈ [0, 2^{b+1})` has its top bit (bit `m − 1`) clear. P0 holds
    /// `a = (x_0 + 2^b) mod 2^m`, P1 `c = x_1 mod 2^m` (local), so `a + c = z + w·2^m`
    /// over the integers with the wrap `w = α ∨ γ`, `α`, `γ` the top bits of `a`, `c`
    /// (both clear: no wrap; both set: a wrap; one set: `a + c ≥ 2^{m−1}` while
    /// `z < 2^{m−1}`, a wrap). Then, modulo `2^ℓ`,
    ///
    /// `z² = a² + c² + 2ac + 2^{2m}w − 2^{m+1}w(a + c)`, and with
    /// `w = α + γ(1 − α) = γ + α(1 − γ)`:
    ///
    /// `2^{2m}w − 2^{m+1}w(a + c) = [2^{2m}α − 2^{m+1}αa]₀ − [2^{m+1}γc]₁`
    /// `+ 2^{m+1}·γ·(1 − α)(2^{m−1} − a) − 2^{m+1}·α·(1 − γ)c`.
    ///
    /// The bracketed terms are local. `ac` is a Gilboa product on P1's `m` bits of
    /// `c` (P0 sends `a mod 2^{ℓ−i}`); the last two products are one COT each, needed
    /// only modulo `2^{ℓ−m−1}`: P1 chooses with `γ` and P0 sends
    /// `(1 − α)(2^{m−1} − a)` (in the same [`SquareCorr`] message, after the Gilboa
    /// blocks: [`CorrWidths::GilboaTail`]), and P0 chooses with `α` while P1 sends
    /// `(1 − γ)c` ([`SquareWrapCorr`]). Finally `x² = z² − 2^{b+1}x − 2^{2b}` (local).
    /// Both correction messages go in the same flight, so the rounds are those of the
    /// full-ring squaring (2, then the truncation).
    ///
    /// Outside `|x| < 2^b` the result is wrong (the wrap is misread), so a caller
    /// passes a bound its block guarantees (a clamp, or the block's stated input
    /// range).
    pub async fn square_bounded_fx(
        &mut self,
        x: &RingShares,
        b: u32,
        s: u32,
    ) -> Result<RingShares> {
        let r = self.config().ring;
        if b > r.ell.saturating_sub(4) {
            return self.square_full_fx(x, s).await;
        }
        let m = b + 2;
        let n = x.len();
        let tail = r.ell - m - 1;
        let ch = self.channel();
        let gilboa = CorrWidths::GilboaTail {
            n,
            ell: r.ell,
            bits: m,
            tail,
            tails: 1,
        };
        let wrap = CorrWidths::Uniform(tail);
        let top = |v: u64| ((v >> (m - 1)) & 1) as u8;
        let p0 = self.is_p0();
        // This party's `m`-bit share (`a` at P0, `c` at P1) and its top bit.
        let own = offset_low_bits(x.as_slice(), p0, b, m);
        // `cross` = this party's share of `ac` (mod 2^ℓ), `mixed` its share of the
        // two wrap products (`γ(1−α)(2^{m−1}−a) − α(1−γ)c`, mod 2^{ℓ−m−1}).
        let (cross, mixed) = if p0 {
            let rb = self
                .ot()?
                .recv(&ch, own.iter().map(|&a| top(a)).collect())
                .await?;
            let sb = self.ot()?.send(&ch, n * (m as usize + 1)).await?;
            let mut corr = Zeroizing::new(Vec::with_capacity(n * (m as usize + 1)));
            for _ in 0..m {
                corr.extend_from_slice(&own);
            }
            corr.extend(own.iter().map(|&a| {
                let na = 1 - top(a) as u64;
                na.wrapping_mul((1u64 << (m - 1)).wrapping_sub(a))
            }));
            let p = self.cot_send_corr::<SquareCorr>(&sb, &corr, gilboa)?;
            let t = self.cot_recv_corr::<SquareWrapCorr>(&rb, wrap).await?;
            let cross = Zeroizing::new(gilboa_sum_bits(r, &p, n, m, true));
            let tm = mask(tail);
            let mixed: Zeroizing<Vec<u64>> = Zeroizing::new(
                (0..n)
                    .map(|k| p[m as usize * n + k].wrapping_neg().wrapping_sub(t[k]) & tm)
                    .collect(),
            );
            (cross, mixed)
        } else {
            let mut choices = Vec::with_capacity(n * (m as usize + 1));
            for i in 0..m {
                choices.extend(own.iter().map(|&c| ((c >> i) & 1) as u8));
            }
            choices.extend(own.iter().map(|&c| top(c)));
            let rb = self.ot()?.recv(&ch, choices).await?;
            let sb = self.ot()?.send(&ch, n).await?;
            let corr: Zeroizing<Vec<u64>> =
                Zeroizing::new(own.iter().map(|&c| (1 - top(c) as u64) * c).collect());
            let p = self.cot_send_corr::<SquareWrapCorr>(&sb, &corr, wrap)?;
            let t = self.cot_recv_corr::<SquareCorr>(&rb, gilboa).await?;
            let cross = Zeroizing::new(gilboa_sum_bits(r, &t, n, m, false));
            let tm = mask(tail);
            let mixed: Zeroizing<Vec<u64>> = Zeroizing::new(
                (0..n)
                    .map(|k| t[m as usize * n + k].wrapping_add(p[k]) & tm)
                    .collect(),
            );
            (cross, mixed)
        };
        let (hi, two_b) = (m + 1, 2 * b);
        let z = RingShares::new(
            (0..n)
                .map(|k| {
                    let (v, o) = (x.as_slice()[k], own[k]);
                    let t = top(o) as u64;
                    // Local terms: o² and, at P0, 2^{2m}α − 2^{m+1}αa; at P1, −2^{m+1}γc.
                    let mut acc = o.wrapping_mul(o);
                    acc = acc.wrapping_add(cross[k].wrapping_mul(2));
                    acc = acc.wrapping_add(mixed[k] << hi);
                    if p0 {
                        acc = acc.wrapping_add(shl(t, 2 * m)).wrapping_sub((t * o) << hi);
                        // x² = z² − 2^{b+1}x − 2^{2b}.
                        acc = acc.wrapping_sub(shl(1, two_b));
                    } else {
                        acc = acc.wrapping_sub((t * o) << hi);
                    }
                    acc = acc.wrapping_sub(v << (b + 1));
                    acc & r.mask()
                })
                .collect(),
        );
        self.trunc_round(z, s).await
    }

    /// `⌊x·y / 2^s⌉` (faithful) of shared `x`, `y` known to satisfy `|x| < 2^{bx}` and
    /// `|y| < 2^{by}` (signed ring integers; the bounds are public): two Gilboa cross
    /// terms on the narrower operand's `m = min(bx, by) + 2` bits and four wrap COTs,
    /// `2m + 4` COTs per element (50 at `bx = by = 21`) against the Beaver product's
    /// `2ℓ` (86 at `ℓ = 43`), no triple opening, and 2 rounds before the truncation.
    /// With `s = 0` it is the exact product modulo `2^ℓ` (which may wrap: only the
    /// truncation by `s > 0` requires `|x·y| < 2^{ℓ−2}`). Falls back to
    /// [`Party::mul_fx`] when `max(bx, by) + 2 > ℓ` or `m + 1 > ℓ`.
    ///
    /// # Protocol
    ///
    /// Write `X = x + 2^{bx} ∈ [0, 2^{mx−1})`, `Y = y + 2^{by} ∈ [0, 2^{m−1})` with
    /// `mx = bx + 2` and `m = by + 2` (the operands are swapped so that `by ≤ bx`).
    /// Party `j` holds `a_j = X_j mod 2^{mx}`, `c_j = Y_j mod 2^m` with top bits `α_j`,
    /// `γ_j`, so `X = a_0 + a_1 − 2^{mx}w_x`, `Y = c_0 + c_1 − 2^m w_y` with the wraps
    /// `w_x = α_0 ∨ α_1`, `w_y = γ_0 ∨ γ_1` (as in [`Party::square_bounded_fx`]). Then
    /// `XY = X(c_0 + c_1) − 2^m w_y X` and, modulo `2^ℓ`,
    ///
    /// `XY = Σ_j a_j c_j + a_0c_1 + a_1c_0 − 2^{mx}·Σ_j (α_j c_j + α_{j̄}(1 − α_j)c_j)`
    /// `− 2^m·Σ_j (γ_j X_j + γ_{j̄}(1 − γ_j)X_j)`,
    ///
    /// using `w_x = α_j + α_{j̄}(1 − α_j)` for either `j` (likewise `w_y`). Each party
    /// `j` sends one [`MulCorr`] to its peer `j̄`, who chooses with the bits of `c_{j̄}`
    /// (the Gilboa blocks, correlation `a_j`), then `α_{j̄}` (correlation
    /// `(1 − α_j)c_j`) and `γ_{j̄}` (correlation `(1 − γ_j)X_j`), the two tails needed
    /// only modulo `2^{ℓ−m}`. Finally `xy = XY − 2^{by}x − 2^{bx}y − 2^{bx+by}`
    /// (local). The protocol is symmetric: both messages go in one flight.
    ///
    /// Outside its bounds the result is wrong (a wrap is misread).
    pub async fn mul_bounded_fx(
        &mut self,
        x: &RingShares,
        bx: u32,
        y: &RingShares,
        by: u32,
        s: u32,
    ) -> Result<RingShares> {
        expect_len("mul_bounded_fx operand y", x.len(), y.len())?;
        let r = self.config().ring;
        // The chooser operand is the narrower one.
        let (x, bx, y, by) = if by <= bx {
            (x, bx, y, by)
        } else {
            (y, by, x, bx)
        };
        if bx > r.ell.saturating_sub(2) || by > r.ell.saturating_sub(3) {
            return self.mul_fx(x, y, s).await;
        }
        let (mx, m) = (bx + 2, by + 2);
        let tail = r.ell - m;
        let n = x.len();
        let mxm = mask(mx);
        let p0 = self.is_p0();
        let (xs, ys) = (x.as_slice(), y.as_slice());
        // This party's X_j, a_j, c_j (the offsets at P0).
        let big_x: Zeroizing<Vec<u64>> = Zeroizing::new(
            xs.iter()
                .map(|&v| if p0 { r.add(v, 1u64 << bx) } else { v })
                .collect(),
        );
        let a: Zeroizing<Vec<u64>> = Zeroizing::new(big_x.iter().map(|&v| v & mxm).collect());
        let c = offset_low_bits(ys, p0, by, m);
        let alpha = |k: usize| (a[k] >> (mx - 1)) & 1;
        let gamma = |k: usize| (c[k] >> (m - 1)) & 1;
        let widths = CorrWidths::GilboaTail {
            n,
            ell: r.ell,
            bits: m,
            tail,
            tails: 2,
        };
        let cots = n * (m as usize + 2);
        let mut choices = Vec::with_capacity(cots);
        for i in 0..m {
            choices.extend(c.iter().map(|&v| ((v >> i) & 1) as u8));
        }
        choices.extend((0..n).map(|k| alpha(k) as u8));
        choices.extend((0..n).map(|k| gamma(k) as u8));
        let mut corr = Zeroizing::new(Vec::with_capacity(cots));
        for _ in 0..m {
            corr.extend_from_slice(&a);
        }
        corr.extend((0..n).map(|k| (1 - alpha(k)) * c[k]));
        corr.extend((0..n).map(|k| (1 - gamma(k)).wrapping_mul(big_x[k])));
        let ch = self.channel();
        let rb = self.ot()?.recv(&ch, choices).await?;
        let sb = self.ot()?.send(&ch, cots).await?;
        let p = self.cot_send_corr::<MulCorr>(&sb, &corr, widths)?;
        let t = self.cot_recv_corr::<MulCorr>(&rb, widths).await?;
        drop(corr);
        let tm = mask(tail);
        let z = RingShares::new(
            (0..n)
                .map(|k| {
                    let mut g = 0u64;
                    for i in 0..m as usize {
                        g = g.wrapping_add(t[i * n + k].wrapping_sub(p[i * n + k]) << i);
                    }
                    let (t1, t2) = (m as usize * n + k, (m as usize + 1) * n + k);
                    let wx = (t[t1].wrapping_sub(p[t1]) & tm).wrapping_add(alpha(k) * c[k]);
                    let wy = (t[t2].wrapping_sub(p[t2]) & tm)
                        .wrapping_add(gamma(k).wrapping_mul(big_x[k]));
                    let mut acc = a[k].wrapping_mul(c[k]).wrapping_add(g);
                    acc = acc.wrapping_sub(shl(wx, mx)).wrapping_sub(wy << m);
                    // xy = XY − 2^{by}x − 2^{bx}y − 2^{bx+by}.
                    acc = acc.wrapping_sub(xs[k] << by).wrapping_sub(ys[k] << bx);
                    if p0 {
                        acc = acc.wrapping_sub(shl(1, bx + by));
                    }
                    acc & r.mask()
                })
                .collect(),
        );
        self.trunc_round(z, s).await
    }

    /// Row-broadcast product `⌊x[r,c]·y[r] / 2^s⌉` (faithful) of a shared
    /// `rows × cols` matrix `x` (row-major) and a shared per-row vector `y`. Both cross
    /// terms are Gilboa products whose chooser is the row value, so one COT per bit and
    /// row carries the corrections of the whole row (the wide COTs of `Party::cot_send_wide`): `2ℓ`
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
        let rb = self.ot()?.recv(&ch, bit_major(y.as_slice(), r.ell)).await?;
        let sb = self.ot()?.send(&ch, rows * e).await?;
        let ps = self.cot_send_wide_gilboa(&sb, x.as_slice(), cols, r.ell)?;
        let ts = self.cot_recv_wide_gilboa(&rb, cols, r.ell).await?;
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
        let xs = x.as_slice();
        let z: Vec<u64> = if owner == self.id() {
            let w = w.ok_or(crate::mpc::MpcError::InvalidInput(
                "the owner of w must provide it",
            ))?;
            expect_len("mul_owned_fx vector w", cols, w.len())?;
            let w: Zeroizing<Vec<u64>> = Zeroizing::new(w.iter().map(|&v| v & r.mask()).collect());
            let rb = self.ot()?.recv(&ch, bit_major(&w, r.ell)).await?;
            // The sums are indexed c·rows + row: column-major.
            let ts = self.cot_recv_wide_gilboa(&rb, rows, r.ell).await?;
            (0..rows * cols)
                .map(|k| {
                    let (row, c) = (k / cols, k % cols);
                    r.add(r.mul(xs[k], w[c]), ts[c * rows + row])
                })
                .collect()
        } else {
            let sb = self.ot()?.send(&ch, cols * e).await?;
            let mut corr = Zeroizing::new(Vec::with_capacity(rows * cols));
            for c in 0..cols {
                corr.extend((0..rows).map(|row| xs[row * cols + c]));
            }
            let ps = self.cot_send_wide_gilboa(&sb, &corr, rows, r.ell)?;
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
    use crate::nonlinear::fixed;
    use crate::nonlinear::testkit::*;

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

    /// The bounded squaring is exact (`s = 0`) on every value inside its bound, at
    /// the bound's edges, for bounds that make `2m` or `2b` reach 64 bits, and it
    /// falls back to the full squaring when `m > ℓ − 2`; its COTs are `m + 2` per
    /// element, not `ℓ`. A value beyond the bound is squared wrongly (the wrap is
    /// misread), which shows the bound is really used.
    #[test]
    fn bounded_square_is_exact_inside_its_bound() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(21);
        for b in [1u32, 5, 13, 20, 21, 30, 36, 39, 40, 41] {
            let lim = 1i64 << b;
            let mut xs: Vec<i64> = (0..40)
                .map(|_| (g.next_u64() % (2 * lim as u64 - 1)) as i64 - (lim - 1))
                .collect();
            xs.extend([0, 1, -1, lim - 1, -(lim - 1)]);
            let (x0, x1) = share(r, &xs, &mut g);
            let before = p0.ot_counts();
            let (s0, s1) = both!(
                p0,
                p1,
                p0.square_bounded_fx(&x0, b, 0).await,
                p1.square_bounded_fx(&x1, b, 0).await
            );
            let after = p0.ot_counts();
            let cots = (after.0 - before.0) + (after.1 - before.1);
            let got = open(r, &s0, &s1);
            for (k, &x) in xs.iter().enumerate() {
                let want = r.to_signed(r.from_signed((x as i128 * x as i128) as i64));
                assert_eq!(got[k], want, "b = {b}, x = {x}");
            }
            let m = (b + 2) as u64;
            let per = if m + 2 > r.ell as u64 {
                r.ell as u64
            } else {
                m + 2
            };
            assert_eq!(cots, per * xs.len() as u64, "COTs at b = {b}");
        }
        // Beyond the bound: 2^20 squared with b = 18 is not 2^40.
        let xs = [1i64 << 20, -(1i64 << 20) + 3];
        let (x0, x1) = share(r, &xs, &mut g);
        let (s0, s1) = both!(
            p0,
            p1,
            p0.square_bounded_fx(&x0, 18, 0).await,
            p1.square_bounded_fx(&x1, 18, 0).await
        );
        let got = open(r, &s0, &s1);
        assert!(
            got.iter().zip(&xs).any(|(&v, &x)| v != x * x),
            "a value beyond the bound squared right: the bound is unused"
        );
    }

    /// The bounded product is exact (`s = 0`, modulo `2^ℓ`) inside its bounds, for
    /// equal and unequal bounds in either order, at the bounds' edges and for bounds
    /// that make `bx + by ≥ 64`; it takes `2m + 4` COTs with `m = min(bx, by) + 2`,
    /// falls back to the Beaver product beyond `ℓ`, and truncates faithfully; a value
    /// beyond its bound is multiplied wrongly (the bound is really used).
    #[test]
    fn bounded_product_is_exact_inside_its_bounds() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(22);
        let draw = |g: &mut rand_chacha::ChaCha20Rng, b: u32, n: usize| -> Vec<i64> {
            let lim = 1i64 << b;
            let mut v: Vec<i64> = (0..n)
                .map(|_| (g.next_u64() % (2 * lim as u64 - 1)) as i64 - (lim - 1))
                .collect();
            v.extend([0, 1, -1, lim - 1, -(lim - 1), lim - 1, -(lim - 1)]);
            v
        };
        for (bx, by) in [
            (21u32, 21u32),
            (31, 21),
            (21, 31),
            (1, 1),
            (40, 33),
            (5, 39),
            (41, 2),
            (42, 10),
        ] {
            let xs = draw(&mut g, bx, 40);
            let mut ys = draw(&mut g, by, 40);
            ys.swap(44, 45); // pair the edges both ways: (max, min) and (min, max)
            let (x0, x1) = share(r, &xs, &mut g);
            let (y0, y1) = share(r, &ys, &mut g);
            let before = p0.ot_counts();
            let (s0, s1) = both!(
                p0,
                p1,
                p0.mul_bounded_fx(&x0, bx, &y0, by, 0).await,
                p1.mul_bounded_fx(&x1, bx, &y1, by, 0).await
            );
            let after = p0.ot_counts();
            let cots = (after.0 - before.0) + (after.1 - before.1);
            let got = open(r, &s0, &s1);
            for k in 0..xs.len() {
                let want = r.to_signed(r.from_signed((xs[k] as i128 * ys[k] as i128) as i64));
                assert_eq!(got[k], want, "({bx}, {by}): {} · {}", xs[k], ys[k]);
            }
            let (hi, lo) = (bx.max(by), bx.min(by));
            if hi + 2 <= r.ell && lo + 3 <= r.ell {
                assert_eq!(
                    cots,
                    (2 * (lo as u64 + 2) + 4) * xs.len() as u64,
                    "COTs ({bx}, {by})"
                );
            }
        }
        // Faithful truncation at F: within one ulp of the rounded product.
        let f = r.frac;
        let xs = uniform(&mut g, 64, 200.0, f);
        let ys = uniform(&mut g, 64, 200.0, f);
        let (x0, x1) = share(r, &xs, &mut g);
        let (y0, y1) = share(r, &ys, &mut g);
        let (s0, s1) = both!(
            p0,
            p1,
            p0.mul_bounded_fx(&x0, 21, &y0, 21, f).await,
            p1.mul_bounded_fx(&x1, 21, &y1, 21, f).await
        );
        let want: Vec<i64> = xs
            .iter()
            .zip(&ys)
            .map(|(&a, &b)| fixed::mul(a, b, f))
            .collect();
        assert_within(&open(r, &s0, &s1), &want, 1, "mul_bounded_fx");
        // Beyond a bound: x = 2^20 with bx = 18.
        let xs = [1i64 << 20, -(1i64 << 20) + 5];
        let ys = [3i64, 7];
        let (x0, x1) = share(r, &xs, &mut g);
        let (y0, y1) = share(r, &ys, &mut g);
        let (s0, s1) = both!(
            p0,
            p1,
            p0.mul_bounded_fx(&x0, 18, &y0, 4, 0).await,
            p1.mul_bounded_fx(&x1, 18, &y1, 4, 0).await
        );
        let got = open(r, &s0, &s1);
        assert!(
            got.iter()
                .zip(xs.iter().zip(&ys))
                .any(|(&v, (&a, &b))| v != a * b),
            "a value beyond its bound multiplied right: the bound is unused"
        );
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
