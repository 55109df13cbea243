//! M2C's `O(n log n)` encoding map on shares: an integer fixed-point inverse special FFT
//! ([`crate::math::special_fft`]) in the wide share ring `Z_{2^W}` ([`super::wide`]), with a
//! local truncation after every radix-2 stage. The bit budget and the error analysis are at
//! [`M2cPlan`]; the map is [`M2cPlan::encode_shares`], with the direct `O(n²)` reference
//! [`M2cPlan::encode_map`].

use super::budget::{local_trunc, trig_tables, K_BITS, K_MASK};
use super::plan::M2cPlan;
use super::wide::{butterfly, local_trunc_wide, rerandomize, CommonMasks, Wide};
use super::ConvertError;
use crate::math::special_fft;
use alloc::vec::Vec;
use zeroize::Zeroizing;

impl M2cPlan {
    /// The fast encoding map on one party's shares (identical code for both parties; `p0`
    /// selects the role in the local truncations): from shares mod `2^K` of `X = x·2^F` and
    /// `Y = y·2^F` (`n` each; an empty `im` means `y = 0`), returns integer shares of the `2n`
    /// plaintext coefficients `c_k ≈ Δ·σ^{-1}(x + iy)_k` (position `k·N/2n`), within
    /// [`M2cPlan::coeff_error_bound`] except with probability `2^f`, `f =` [`M2cPlan::failure_log2`].
    /// Both parties must draw `masks` from the same common stream.
    pub fn encode_shares(
        &self,
        re: &[u128],
        im: &[u128],
        p0: bool,
        masks: &mut CommonMasks,
    ) -> Result<Zeroizing<Vec<i128>>, ConvertError> {
        let n = self.slots;
        if re.len() != n || !(im.is_empty() || im.len() == n) {
            return Err(ConvertError::Budget(
                "encoding-map input length differs from the plan's slot count",
            ));
        }
        let mk = 1u128 << K_BITS;
        let lift = |x: u128, masks: &mut CommonMasks| -> Wide {
            let r = masks.bits(K_BITS);
            let x = if p0 {
                x.wrapping_add(r) & K_MASK
            } else {
                x.wrapping_sub(r) & K_MASK
            };
            Wide::from_i128(local_trunc(x, mk, p0, 0, self.h_lift))
                .wrapping_mul_i64(self.m0)
                .wrapping_shl(self.m0_shift)
        };
        let mut vr: Zeroizing<Vec<Wide>> = Zeroizing::new(Vec::with_capacity(n));
        let mut vi: Zeroizing<Vec<Wide>> = Zeroizing::new(Vec::with_capacity(n));
        for &x in re {
            vr.push(lift(x & K_MASK, masks));
        }
        if im.is_empty() {
            vi.resize(n, Wide::ZERO);
        } else {
            for &x in im {
                vi.push(lift(x & K_MASK, masks));
            }
        }
        self.stages(&mut vr, &mut vi, p0, masks);
        special_fft::bit_reverse(&mut vr);
        special_fft::bit_reverse(&mut vi);
        let mut out = Zeroizing::new(Vec::with_capacity(2 * n));
        for v in vr.iter().chain(vi.iter()) {
            let r = masks.bits(K_BITS);
            let x = if p0 {
                v.low_u128().wrapping_add(r) & K_MASK
            } else {
                v.low_u128().wrapping_sub(r) & K_MASK
            };
            out.push(local_trunc(x, mk, p0, self.g, self.h_f));
        }
        Ok(out)
    }

    /// The `log2 n` radix-2 stages in place (before the bit reversal).
    fn stages(&self, vr: &mut [Wide], vi: &mut [Wide], p0: bool, masks: &mut CommonMasks) {
        let n = vr.len();
        let (t, h_u, h_v) = (self.t, self.h_u, self.h_v);
        special_fft::for_each_butterfly(n, true, |bf| {
            let (p, q) = (bf.lo, bf.hi);
            let w = self.tw[bf.twiddle];
            let ((ur, ui), (dr, di)) = butterfly((vr[p], vi[p]), (vr[q], vi[q]), w);
            let mut tr = |x: Wide, s: u32, h: u32| {
                local_trunc_wide(rerandomize(x, masks.wide(), p0), p0, s, h)
            };
            vr[p] = tr(ur, 1, h_u);
            vi[p] = tr(ui, 1, h_u);
            vr[q] = tr(dr, t + 1, h_v);
            vi[q] = tr(di, t + 1, h_v);
        });
    }

    /// The direct `O(n²)` encoding map (reference only; the protocol uses
    /// [`M2cPlan::encode_shares`]) on one party's share, modulo `2^K`: coefficient `k < 2n` is
    /// `Σ_j x_j·round(cos(π·e_jk/N)·S) + y_j·round(sin(π·e_jk/N)·S)` with `S = Δ·2^{t'}/(n·2^F)`,
    /// `e_jk = 5^j·k·N/2n mod 2N`, `t'` = [`M2cPlan::direct_twiddle_bits`]. A `Z_{2^K}`-module
    /// homomorphism; an empty `im` means zero imaginary parts. A budget error when `t'` does not
    /// exist.
    pub fn encode_map(&self, re: &[u128], im: &[u128]) -> Result<Vec<u128>, ConvertError> {
        let t = self.t_direct.ok_or(ConvertError::Budget(
            "the direct encoding map's 2^K budget does not close",
        ))?;
        let n = self.slots;
        if re.len() != n || !(im.is_empty() || im.len() == n) {
            return Err(ConvertError::Budget(
                "encoding-map input length differs from the plan's slot count",
            ));
        }
        let f = self.cfg.ring.frac as f64;
        let twiddle_log = libm::log2(self.scale) + t as f64 - libm::log2(n as f64) - f;
        let (cos, sin) = trig_tables(self.n_ring, libm::exp2(twiddle_log));
        let rot = special_fft::rot_group(self.n_ring, n);
        let gap = (self.n_ring / (2 * n)) as u64;
        let mask = 2 * self.n_ring as u64 - 1;
        let to_k = |v: i64| (v as i128 as u128) & K_MASK;
        let mut out = Vec::with_capacity(2 * n);
        for k in 0..2 * n as u64 {
            let kg = k * gap;
            let mut acc = 0u128;
            for (j, &g) in rot.iter().enumerate() {
                let e = ((g * kg) & mask) as usize;
                acc = acc.wrapping_add(re[j].wrapping_mul(to_k(cos[e])));
                if !im.is_empty() {
                    acc = acc.wrapping_add(im[j].wrapping_mul(to_k(sin[e])));
                }
            }
            out.push(acc & K_MASK);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{BoundaryCfg, ConvertError};
    use crate::params;

    #[test]
    fn table_vii_budget() {
        let p = params::ckks_128_custom(16, 8, 3).validate().unwrap();
        let m = M2cPlan::new(
            &p,
            8,
            1 << 15,
            (1u64 << 40) as f64,
            BoundaryCfg::encformer(8),
        )
        .unwrap();
        std::println!(
            "g {} t {} bits {:?} err {} ulp coeff err {} failure 2^{}",
            m.guard_bits(),
            m.twiddle_bits(),
            m.value_bits(),
            m.error_bound_ulp(),
            m.coeff_error_bound(),
            m.failure_log2()
        );
        assert_eq!((m.guard_bits(), m.twiddle_bits()), (0, 44));
        assert_eq!(m.value_bits(), (22, 51, 95, 50));
        assert_eq!((m.m0, m.m0_shift), (1 << 27, 0));
        assert!(m.error_bound_ulp() < 0.02, "{}", m.error_bound_ulp());
        assert!(m.failure_log2() < -55.0, "{}", m.failure_log2());
        assert_eq!(m.tw.len(), (1 << 15) - 1);
        // The largest B_max the fast map accepts here (the twiddle precision runs out first).
        let ok = |b: u32| {
            M2cPlan::new(
                &p,
                8,
                1 << 15,
                (1u64 << 40) as f64,
                BoundaryCfg::encformer(b),
            )
        };
        let max_b = (8..28).take_while(|&b| ok(b).is_ok()).last().unwrap();
        let mb = ok(max_b).unwrap();
        std::println!(
            "max log2 B_max {max_b}: t {} bits {:?} err {} failure 2^{}",
            mb.twiddle_bits(),
            mb.value_bits(),
            mb.error_bound_ulp(),
            mb.failure_log2()
        );
        assert_eq!(max_b, 14);
        assert!(matches!(ok(max_b + 1), Err(ConvertError::Budget(_))));
    }
}
