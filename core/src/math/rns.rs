//! RNS bases: fast basis conversion (Bajard et al. / HPS "FastBConv") and exact division by a
//! product of primes with rounding (the common core of CKKS rescaling and hybrid key switching's
//! ModDown, Han–Ki 2020).
//!
//! The plans here hold only public constants. Backends execute them; the CPU backend follows the
//! formulas below literally, and every other backend must produce the same words.

use super::modular::Modulus;
use alloc::vec::Vec;

/// Fast basis conversion from basis `B = {b_0..b_{k-1}}` to primes `{t_0..}`:
///
/// `conv(x)_t = Σ_i [x_i · (B/b_i)^{-1}]_{b_i} · (B/b_i mod t)  mod t`
///
/// which equals `x + u·B (mod t)` for some `0 ≤ u < k`, where `x ∈ [0, B)` is the CRT value of the
/// residues `x_i`.
#[derive(Clone, Debug)]
pub struct BasisConverter {
    /// Source primes.
    pub src: Vec<Modulus>,
    /// Destination primes.
    pub dst: Vec<Modulus>,
    /// `(B/b_i)^{-1} mod b_i`, per source prime.
    pub src_hat_inv: Vec<u64>,
    /// Shoup companions of `src_hat_inv`.
    pub src_hat_inv_shoup: Vec<u64>,
    /// `(B/b_i) mod t_j`, indexed `[j][i]`.
    pub src_hat_mod_dst: Vec<Vec<u64>>,
}

fn prod_mod(primes: &[Modulus], skip: Option<usize>, t: &Modulus) -> u64 {
    let mut acc = 1 % t.value();
    for (i, p) in primes.iter().enumerate() {
        if Some(i) != skip {
            acc = t.mul(acc, t.reduce(p.value()));
        }
    }
    acc
}

impl BasisConverter {
    /// Builds the conversion constants. The source primes must be pairwise coprime.
    pub fn new(src: &[Modulus], dst: &[Modulus]) -> Self {
        let mut src_hat_inv = Vec::with_capacity(src.len());
        for (i, b) in src.iter().enumerate() {
            let hat = prod_mod(src, Some(i), b);
            src_hat_inv.push(b.inv(hat).expect("RNS primes must be pairwise coprime"));
        }
        let src_hat_inv_shoup = src
            .iter()
            .zip(&src_hat_inv)
            .map(|(b, &v)| b.shoup(v))
            .collect();
        let src_hat_mod_dst = dst
            .iter()
            .map(|t| (0..src.len()).map(|i| prod_mod(src, Some(i), t)).collect())
            .collect();
        Self {
            src: src.to_vec(),
            dst: dst.to_vec(),
            src_hat_inv,
            src_hat_inv_shoup,
            src_hat_mod_dst,
        }
    }

    /// Converts one coefficient (its residues over the source basis) to the destination basis.
    /// `tmp` must have the source basis length. Reference form of the row-wise kernels.
    pub fn convert_one(&self, x: &[u64], tmp: &mut [u64], out: &mut [u64]) {
        for i in 0..self.src.len() {
            tmp[i] = self.src[i].mul_shoup(x[i], self.src_hat_inv[i], self.src_hat_inv_shoup[i]);
        }
        for (j, t) in self.dst.iter().enumerate() {
            let mut acc: u128 = 0;
            for i in 0..self.src.len() {
                acc += tmp[i] as u128 * self.src_hat_mod_dst[j][i] as u128;
            }
            out[j] = t.reduce_u128(acc);
        }
    }
}

/// Division with rounding by the product `D` of the `k` primes dropped from a basis
/// `keep ∪ drop`: `y ≈ x / D` over `keep`, computed as
///
/// `y_i = (x_i − (conv([x + h]_drop)_i − h)) · D^{-1} mod keep_i`,  `h = floor(k·D/2)`,
///
/// where `h` is added to *every coefficient* (in the NTT domain, subtract `h` from the converted
/// rows before their forward NTT).
///
/// The fast conversion overshoots by `u·D` with `0 ≤ u < k` (`u` is the integer part of
/// `Σ_i [x_i·(D/d_i)^{-1}]_{d_i} / d_i`), so `y = floor(x/D + k/2) − u`. With `u` spread over
/// `0..k`, `E[u] ≈ (k−1)/2` and the offset `k/2` centres the error: `y = x/D + ε` with
/// `E[ε] ≈ 0` and `|ε| ≤ k/2 + 1/2`. (The textbook `h = floor(D/2)` leaves a bias of `−(k−1)/2`,
/// which multiplied by the secret shows up as a low-frequency error in the slots near the root
/// `1`.) With one dropped prime (CKKS rescale) `u = 0`, `h = floor(D/2)` and the division is exact
/// rounding.
#[derive(Clone, Debug)]
pub struct DivRoundPlan {
    /// Conversion from the dropped primes to the kept primes.
    pub conv: BasisConverter,
    /// `h mod drop_j`.
    pub half_mod_drop: Vec<u64>,
    /// `h mod keep_i`.
    pub half_mod_keep: Vec<u64>,
    /// `D^{-1} mod keep_i`.
    pub d_inv_mod_keep: Vec<u64>,
    /// Shoup companions of `d_inv_mod_keep`.
    pub d_inv_mod_keep_shoup: Vec<u64>,
}

impl DivRoundPlan {
    /// Builds the plan for dividing by the product of `drop`, keeping `keep`.
    pub fn new(keep: &[Modulus], drop: &[Modulus]) -> Self {
        let conv = BasisConverter::new(drop, keep);
        // h = floor(k·D/2): for even k it is (k/2)·D; for odd k, k·D is odd and
        // h = (k·D - 1)/2, i.e. (k·D - 1)·2^{-1} mod m.
        let k = drop.len() as u64;
        let half = |m: &Modulus| {
            let kd = m.mul(m.reduce(k), prod_mod(drop, None, m));
            if k.is_multiple_of(2) {
                m.mul(m.reduce(k / 2), prod_mod(drop, None, m))
            } else {
                let two_inv = m.inv(2).expect("odd modulus");
                m.mul(m.sub(kd, 1 % m.value()), two_inv)
            }
        };
        let half_mod_drop = drop.iter().map(half).collect();
        let half_mod_keep = keep.iter().map(half).collect();
        let d_inv_mod_keep: Vec<u64> = keep
            .iter()
            .map(|m| m.inv(prod_mod(drop, None, m)).expect("coprime bases"))
            .collect();
        let d_inv_mod_keep_shoup = keep
            .iter()
            .zip(&d_inv_mod_keep)
            .map(|(m, &v)| m.shoup(v))
            .collect();
        Self {
            conv,
            half_mod_drop,
            half_mod_keep,
            d_inv_mod_keep,
            d_inv_mod_keep_shoup,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::primes::ntt_primes;

    fn moduli(bits: u32, k: usize) -> Vec<Modulus> {
        ntt_primes(bits, 1 << 10, k, &[])
            .unwrap()
            .into_iter()
            .map(|q| Modulus::new(q).unwrap())
            .collect()
    }

    #[test]
    fn conversion_is_x_plus_small_multiple() {
        let src = moduli(30, 3);
        let dst = moduli(40, 2);
        let conv = BasisConverter::new(&src, &dst);
        let big: u128 = src.iter().map(|m| m.value() as u128).product();
        for x in [0u128, 1, 12345678901234567, big - 1, big / 2, big / 3] {
            let res: Vec<u64> = src.iter().map(|m| (x % m.value() as u128) as u64).collect();
            let mut tmp = [0u64; 3];
            let mut out = [0u64; 2];
            conv.convert_one(&res, &mut tmp, &mut out);
            for (j, t) in dst.iter().enumerate() {
                let ok = (0..3u128).any(|u| ((x + u * big) % t.value() as u128) as u64 == out[j]);
                assert!(ok, "x={x} t={}", t.value());
            }
        }
    }

    #[test]
    fn div_round_single_prime_is_exact_rounding() {
        let keep = moduli(30, 2);
        let drop = moduli(20, 1);
        let plan = DivRoundPlan::new(&keep, &drop);
        let d = drop[0].value() as u128;
        let q: u128 = keep.iter().map(|m| m.value() as u128).product::<u128>() * d;
        for x in [0u128, 1, d / 2, d / 2 + 1, d * 7 + 3, q - 1, q / 2 + 12345] {
            let xd = (x % d) as u64;
            let xd_h = drop[0].add(xd, plan.half_mod_drop[0]);
            let mut tmp = [0u64; 1];
            let mut conv = [0u64; 2];
            plan.conv.convert_one(&[xd_h], &mut tmp, &mut conv);
            let expect = (x + d / 2) / d; // round half up
            for (i, m) in keep.iter().enumerate() {
                let xi = (x % m.value() as u128) as u64;
                let t = m.sub(m.add(xi, plan.half_mod_keep[i]), conv[i]);
                let y = m.mul(t, plan.d_inv_mod_keep[i]);
                assert_eq!(y as u128, expect % m.value() as u128);
            }
        }
    }
}
