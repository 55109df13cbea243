//! `Π_Ext`: conversion between `Z_{2^ℓ}` and `Z_q` shares (EncFormer §IV /
//! Appendix C boundary between CKKS and MPC). Values are signed,
//! `|x| < 2^{ℓ-1}`, represented centered in `Z_q`.
//!
//! * **Ring2Field** (`Z_{2^ℓ} → Z_q`, exact): with `x' = x + 2^{ℓ-1}` and the
//!   wrap bit `w = [x'_0 + x'_1 ≥ 2^ℓ]` from a millionaires' comparison,
//!   `x' = x'_0 + x'_1 − 2^ℓ·w` over the integers; `w` is converted to `Z_q`
//!   by a B2A with a `Z_q`-valued COT. Requires `q > 2^ℓ`.
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
        let xp: Zeroizing<Vec<u64>> = Zeroizing::new(
            x.as_slice()
                .iter()
                .map(|&v| if p0 { r.add(v, half) } else { v })
                .collect::<Vec<u64>>(),
        );
        let inp: Vec<u64> = if p0 {
            xp.to_vec()
        } else {
            xp.iter().map(|&v| r.mask() - v).collect()
        };
        let w = self.millionaire(&inp, ell).await?;
        // B2A of w into Z_q.
        let ch = self.ch.clone();
        let bits: Vec<u128> = w.as_slice().iter().map(|&b| b as u128).collect();
        let wq: Vec<u128> = if p0 {
            let sb = self.ot()?.send(&ch, bits.len()).await?;
            let p = self.cot_send_corr_zq(&sb, &bits, q)?;
            bits.iter()
                .zip(p.iter())
                .map(|(&b, &p)| q.add(b, q.add(p, p)))
                .collect()
        } else {
            let rb = self.ot()?.recv(&ch, w.as_slice().to_vec()).await?;
            let t = self.cot_recv_corr_zq(&rb, q).await?;
            bits.iter()
                .zip(t.iter())
                .map(|(&b, &t)| q.sub(b, q.add(t, t)))
                .collect()
        };
        let two_l = q.reduce(1u128 << ell);
        let half_q = q.reduce(half as u128);
        let out = xp
            .iter()
            .zip(wq.iter())
            .map(|(&v, &w)| {
                let mut y = q.sub(q.reduce(v as u128), q.mul(two_l, w));
                if p0 {
                    y = q.sub(y, half_q);
                }
                y
            })
            .collect();
        Ok(FieldShares::new(out))
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
