//! `Π_Ext`: conversion between `Z_{2^ℓ}` and `Z_q` shares (EncFormer §IV /
//! Appendix C boundary between CKKS and MPC). Values are signed,
//! `|x| < 2^{ℓ-1}`, represented centered in `Z_q`.
//!
//! * **Ring2Field** (`Z_{2^ℓ} → Z_q`, exact): with `x' = x + 2^{ℓ-1}` and the
//!   wrap bit `w = [x'_0 + x'_1 ≥ 2^ℓ]` from a millionaires' comparison,
//!   `x' = x'_0 + x'_1 − 2^ℓ·w` over the integers; `w` is converted to `Z_q`
//!   by a B2A with a `Z_q`-valued COT. Requires `q > 2^ℓ`. ≈ 1.09 KB per value with IKNP
//!   (`ℓ = 43`, radix 4), almost all of it the comparison.
//! * **Ring2Field, known MSB** ([`Party::ring_to_field_known_msb`], exact): for
//!   `|x| < 2^{ℓ-2}` (e.g. the conversion boundary, `|x| ≤ B_max·2^F`), `x' = x + 2^{ℓ-2}` has
//!   MSB 0, so `w = msb(x'_0) ∨ msb(x'_1)` and one `Z_q`-valued COT per value replaces the
//!   `ℓ`-bit comparison and the B2A: ≈ `16 + ⌈log2 q⌉/8` bytes per value with IKNP.
//! * **Field2Ring** (`Z_q → Z_{2^ℓ}`, local, statistical): shares are first
//!   re-randomized with a common random `r ∈ Z_q` (from the setup seed), so
//!   `x'_0 = x_0 + r + 2^{ℓ-1}` is uniform. Then `x + 2^{ℓ-1} = x'_0 + x'_1 − q`
//!   unless `x'_0 ≤ x + 2^{ℓ-1}`, which happens with probability
//!   `≤ 2^ℓ/q ≤ 2^{-(σ+1)}` when `log2 q ≥ ℓ + σ + 1`; each party reduces its
//!   share modulo `2^ℓ`. No communication. (EncFormer Appendix C-A instead
//!   invokes `Π_Ext` from `Z_q` to `Z_{2^{ℓ'}}`, which costs a comparison on
//!   `⌈log2 q⌉` bits; with `q ≥ 2^{ℓ+σ+1}` the wrap is predictable except
//!   with the same `2^{-σ}`-order probability, so it can be dropped.)

use crate::mpc::error::{MpcError, Result};
use crate::mpc::msgs::{ExtB2aCorr, ExtMsbCorr};
use crate::mpc::party::Party;
use crate::mpc::shares::{FieldShares, RingShares};
use crate::mpc::zq::Modulus;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

impl<R: RngCore + CryptoRng> Party<R> {
    /// Ring2Field: additive shares mod `2^ℓ` of signed `x` → shares mod `q`
    /// of `x` (centered). Exact; 1 offline + 2 + ⌈log2⌈ℓ/m⌉⌉ + 2 rounds.
    pub async fn ring_to_field(&mut self, x: &RingShares, q: &Modulus) -> Result<FieldShares> {
        let r = self.cfg.ring;
        let ell = r.ell;
        if q.value() <= (1u128 << ell) {
            return Err(MpcError::InvalidConfig("Ring2Field needs q > 2^ell"));
        }
        let p0 = self.is_p0();
        let half = 1u64 << (ell - 1);
        let xp = self.add_public(x, half);
        let inp: Vec<u64> = if p0 {
            xp.to_vec()
        } else {
            xp.iter().map(|&v| r.mask() - v).collect()
        };
        let w = self.millionaire(&inp, ell).await?;
        // B2A of w into Z_q: w = w_0 + w_1 − 2·w_0·w_1.
        let bits: Vec<u128> = w.as_slice().iter().map(|&b| b as u128).collect();
        let pt = self.cot_bit_products_zq::<ExtB2aCorr>(&bits, q).await?;
        let wq: Vec<u128> = bits
            .iter()
            .zip(pt.iter())
            .map(|(&b, &pt)| {
                if p0 {
                    q.add(b, q.add(pt, pt))
                } else {
                    q.sub(b, q.add(pt, pt))
                }
            })
            .collect();
        Ok(lift_shares(q, ell, p0, half, xp.iter().copied(), &wq))
    }

    /// Ring2Field for values with a known MSB: shares mod `2^ℓ` of signed `x` with
    /// `−2^{bound_bits} ≤ x < 2^{bound_bits}` → shares mod `q` of `x` (centered). Exact for every
    /// input within the bound; the bound cannot be checked on shares, the caller proves it.
    ///
    /// With `x' = x + 2^{ℓ-2} ∈ [0, 2^{ℓ-1})` the wrap bit is `w = msb(x'_0) ∨ msb(x'_1) =
    /// a + b − a·b`; the `Z_q` shares of `a·b` come from one correlated OT with correlation `a`
    /// over `Z_q` (P0 sender, P1 chooses with `b`). Cost per value: one COT carrying
    /// `⌈log2 q⌉` bits (plus the OT extension); 2 rounds (OT extension + correction).
    ///
    /// Errors: [`MpcError::InvalidConfig`] if `q ≤ 2^ℓ` or `bound_bits > ℓ − 2` (the
    /// known-MSB precondition `|x| < 2^{ℓ-2}` would not hold; use [`Party::ring_to_field`]).
    pub async fn ring_to_field_known_msb(
        &mut self,
        x: &RingShares,
        q: &Modulus,
        bound_bits: u32,
    ) -> Result<FieldShares> {
        let r = self.cfg.ring;
        let ell = r.ell;
        if q.value() <= (1u128 << ell) {
            return Err(MpcError::InvalidConfig("Ring2Field needs q > 2^ell"));
        }
        if bound_bits + 2 > ell {
            return Err(MpcError::InvalidConfig(
                "known-MSB Ring2Field needs |x| < 2^(ell-2)",
            ));
        }
        let p0 = self.is_p0();
        let off = 1u64 << (ell - 2);
        let xp = self.add_public(x, off);
        let bits: Zeroizing<Vec<u128>> =
            Zeroizing::new(xp.iter().map(|&v| ((v >> (ell - 1)) & 1) as u128).collect());
        // w = a + b − a·b; P0 holds a + p, P1 holds b − t with t = p + a·b.
        let pt = self.cot_bit_products_zq::<ExtMsbCorr>(&bits, q).await?;
        let wq: Zeroizing<Vec<u128>> = Zeroizing::new(
            bits.iter()
                .zip(pt.iter())
                .map(|(&b, &pt)| if p0 { q.add(b, pt) } else { q.sub(b, pt) })
                .collect(),
        );
        Ok(lift_shares(q, ell, p0, off, xp.iter().copied(), &wq))
    }

    /// Field2Ring: shares mod `q` of signed `|x| < 2^{ℓ-1}` → shares mod
    /// `2^ℓ`. Local; error probability `≤ 2^ℓ/q` per element. Requires
    /// `log2 q ≥ ℓ + σ + 1`.
    pub fn field_to_ring(&mut self, x: &FieldShares, q: &Modulus) -> Result<RingShares> {
        let r = self.cfg.ring;
        let ell = r.ell;
        if q.bits() < ell + self.cfg.sigma + 1 {
            return Err(MpcError::InvalidConfig(
                "Field2Ring needs log2 q >= ell + sigma + 1",
            ));
        }
        if !x.is_reduced(q) {
            return Err(MpcError::InvalidInput("Z_q share not reduced"));
        }
        let p0 = self.is_p0();
        let half = q.reduce(1u128 << (ell - 1));
        let qm = (q.value() as u64) & r.mask();
        let mut out = Vec::with_capacity(x.len());
        for &v in x.as_slice() {
            let rnd = self.common_zq(q)?;
            let y = if p0 {
                let xp = q.add(q.add(v, rnd), half);
                r.sub(r.sub(xp as u64 & r.mask(), qm), half as u64)
            } else {
                q.sub(v, rnd) as u64 & r.mask()
            };
            out.push(y);
        }
        Ok(RingShares::new(out))
    }
}

/// The last, local step of both Ring2Field variants: from shares `v` mod `2^ℓ` of `x + off`
/// and shares `w` mod `q` of the wrap bit of `v_0 + v_1 ≥ 2^ℓ`, the shares mod `q` of
/// `x = v_0 + v_1 − 2^ℓ·w − off` (P0 subtracts the public offset).
fn lift_shares(
    q: &Modulus,
    ell: u32,
    p0: bool,
    off: u64,
    v: impl Iterator<Item = u64>,
    w: &[u128],
) -> FieldShares {
    let two_l = q.reduce(1u128 << ell);
    let off_q = q.reduce(off as u128);
    let out = v
        .zip(w.iter())
        .map(|(v, &w)| {
            let mut y = q.sub(q.reduce(v as u128), q.mul(two_l, w));
            if p0 {
                y = q.sub(y, off_q);
            }
            y
        })
        .collect();
    FieldShares::new(out)
}
