//! GELU in two-party MPC: BOLT's piecewise form (a degree-4 polynomial in `|x|` on
//! `|x| ≤ 2.7`, ReLU outside), higher-degree fits of the exact-erf GELU and of GPT-2's
//! `gelu_new` (tanh form), and EncFormer's split (§IV-B3, Appendix B), in which CKKS
//! evaluates the two candidate polynomials and MPC only compares and multiplexes.
//!
//! # The function
//!
//! `GELU(x) − ReLU(x)` is even and, for `t = |x|`, equals `−t·Φ(−t)` (erf form): it
//! tends to 0 quickly. Each kind fits `Q(t) ≈ GELU(t) − t` on `[0, T]` (coefficients
//! derived here by Lawson's iteratively reweighted least squares, an approximation of
//! the minimax fit, against the exact function) and evaluates
//!
//! `out = ReLU(x) + [|x| ≤ T]·Q(|x|)`.
//!
//! | kind | `T` | fit | max fit error on `[0,T]` | tail `max_{|x|>T} |GELU − ReLU|` |
//! |---|---|---|---|---|
//! | [`GeluKind::Bolt`] | 2.7 | degree 4 in `t` (BOLT's form) | `1.62·10⁻³` | `9.36·10⁻³` |
//! | [`GeluKind::Erf`] | 4 | degree 7 in `u = t/4` | `1.95·10⁻⁴` | `1.27·10⁻⁴` |
//! | [`GeluKind::Tanh`] | 4 | degree 7 in `u = t/4` (fit to `gelu_new`) | `1.87·10⁻⁴` | `7.0·10⁻⁵` |
//!
//! The fixed-point evaluation adds at most [`Gelu::FIXED_ERR`] (argument below), so the
//! asserted bounds against the `f64` reference ([`Gelu::f64_reference`]: exact erf GELU
//! for `Bolt` and `Erf`, `gelu_new` for `Tanh`) are [`Gelu::max_error`]: `9.5·10⁻³`
//! (Bolt, dominated by BOLT's cutoff), `7·10⁻⁴ < 2^{−10}` (Erf, Tanh).
//!
//! # Protocol ([`Gelu::run`], everything in MPC)
//!
//! 1. One batched MSB over `3n` values `[x, x − T⁺, x + T]` (`T⁺ = T + 1 ulp`): the bits
//!    `a = [x < 0]`, `b = [x ≤ T]`, `c = [x < −T]`. As the sets are nested,
//!    `[|x| ≤ T] = b ⊕ c` and the other indicators are local XORs.
//! 2. `m = a·x` (one mux): `ReLU(x) = x − m` and `t = |x| = x − 2m`, both local.
//! 3. `Q(t)`: Bolt by Knuth's preconditioned form with **two** products,
//!    `y = (t + α)² + β'` (one [`Party::square_fx`]) and
//!    `Q = e·((y + t + c)·y + d)` (one exact product, no truncation before the public
//!    factor `e`, then one truncation); Erf/Tanh by a power tree (`u²`; `u³, u⁴` in one
//!    batch; `A(u) + u⁴·B(u)` with `A`, `B` cubic) with four products in three levels.
//!    On the lanes that count (`|x| ≤ T`) every operand has a public bound, so the
//!    squares are [`Party::square_fx`] and the products [`Party::mul_bounded_fx`]
//!    (`|u|, |y| < 2^{18}` at 13 bits for Bolt; `u, u², u⁴ < 2^{21}` at 20 bits and
//!    `|B| < 2^{29}` at 23 bits for the fits): 44–50 COTs per product instead of the
//!    Beaver product's 86, and no triple opening. The other lanes are garbled either
//!    way (below).
//! 4. `out = (x − m) + [|x| ≤ T]·Q(t)` (one mux).
//!
//! Outside `[−T, T]` the polynomial lanes see a huge `t`: their products and truncations
//! overflow, which only garbles those lanes (every step is elementwise; the truncation
//! is secure for any input, it is merely wrong outside its bound), and the final mux
//! multiplies them by the *exact* bit 0, so nothing of them reaches the output.
//!
//! # Split ([`Gelu::run_split`], EncFormer / BLB)
//!
//! CKKS evaluates the candidates `F0(x) = Q(−x)` (used on `[−T, 0)`) and
//! `F1(x) = x + Q(x)` (used on `[0, T]`), polynomials in `x` ([`Gelu::candidates`]); MPC
//! computes the same three bits (one MSB over `3n`) and
//! `out = [−T ≤ x < 0]·F0 + [0 ≤ x ≤ T]·F1 + [x > T]·x` (one batched mux over `3n`):
//! exact selection, `1 + 6` rounds of the comparison plus 2 of the mux.
//!
//! # Range
//!
//! Input and output at the ring's `F = 13`; valid input `|x| < 2^{ℓ−2}` as integers
//! (`2^{28}` reals at `ℓ = 43`), so that `x ± T` does not wrap. Saturation is natural:
//! beyond `T` the output is `ReLU(x)` exactly.
//!
//! # Fixed-point error (Bolt)
//!
//! `t` is exact. The leading coefficient `e` is rounded at 17 bits and the difference
//! is compensated by the monic Chebyshev quartic of `[0, T]` (a change of the
//! polynomial by `< 2^{−19}`); `α` is rounded at 18 bits and the Knuth constants are
//! re-solved for the rounded `α` and `e`, so the polynomial is the fitted one up to the
//! rounding of `c` at 13 bits and `β', d` at 13 and 26 bits (`< 2^{−17}`); `y` carries
//! one faithful truncation (`≤ 1.5` ulps at `2^{−13}`), which moves `Q` by
//! `e·(2y + t + c)·1.5·2^{−13} < 2^{−14}`; the final truncation adds 1.5 ulps. So the
//! protocol is within **2 ulps** of [`Gelu::reference`] (exact rounding), and the
//! reference within `7.1·10⁻⁵` (measured; `≤ Gelu::FIXED_ERR`) of the exact-arithmetic
//! fitted polynomial.
//!
//! # Fixed-point error (Erf, Tanh)
//!
//! Powers of `u = t/4 ∈ [0,1]` at 20 bits (each `≤ 2` ulps off), coefficients at 17 bits
//! (`A`) and 15 bits (`B`), `A` and `B` truncated to 25 and 23 bits, the final product at
//! 43 bits truncated to 13: the power errors times the coefficients
//! (`Σ|c_k|·2 ulps ≈ 2^{−12}`) dominate; against [`Gelu::reference`] the protocol is
//! within **3 ulps**.

//! # Costs (measured on 512 values, both parties, IKNP at 16 B per COT, `ℓ = 43`)
//!
//! | kind | split | bytes/elem | COTs/elem | rounds (offline + online) |
//! |---|---|---|---|---|
//! | Bolt | all MPC | 4626 | 261 | 1 + 18 |
//! | Tanh, Erf | all MPC | 6797 | 371 | 1 + 24 |
//! | any | CKKS candidates | 3250 | 192 | 1 + 8 |
//!
//! The three comparisons are 186 of the COTs (`3·62`); the split variant is those and
//! the 3-way mux (EncFormer counts 4 rounds for it; ours are the MSB's `1 + 6` and the
//! mux's 2 — the millionaires' tree of radix 4 over 42 bits).

use crate::mpc::error::{expect_len, MpcError, Result};
use crate::mpc::{BoolShares, Party, RingCfg, RingShares};
use crate::nonlinear::fixed;
use crate::nonlinear::ops::{add, sub};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// Which GELU approximation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluKind {
    /// BOLT's piecewise form: degree 4 in `|x|` on `|x| ≤ 2.7`, ReLU outside.
    Bolt,
    /// GPT-2's `gelu_new`, `0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))`: degree 7 on `|x| ≤ 4`.
    Tanh,
    /// The exact erf GELU `0.5x(1 + erf(x/√2))`: degree 7 on `|x| ≤ 4`.
    Erf,
}

/// Where the candidate polynomials are evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluSplit {
    /// Everything in MPC ([`Gelu::run`]).
    AllMpc,
    /// EncFormer's split: CKKS evaluates `F0`, `F1`; MPC compares and multiplexes
    /// ([`Gelu::run_split`]).
    CkksCandidates,
}

/// The GELU block (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gelu {
    /// The approximation.
    pub kind: GeluKind,
}

/// BOLT's cutoff.
const BOLT_T: f64 = 2.7;
/// `Q(t) ≈ GELU(t) − t` on `[0, 2.7]`, ascending powers of `t` (Lawson fit, max error
/// `1.621·10⁻³`).
const BOLT_Q: [f64; 5] = [
    0.001_619_719_680_917_041,
    -0.537_976_346_775_781_4,
    0.541_048_379_520_172_7,
    -0.183_522_152_991_793_8,
    0.020_848_216_884_511_328,
];
/// Cutoff of the degree-7 fits.
const HI_T: f64 = 4.0;
/// `Q(4u) ≈ GELU(4u) − 4u` (erf) on `u ∈ [0, 1]`, ascending powers of `u` (max error
/// `1.952·10⁻⁴`).
const ERF_Q: [f64; 8] = [
    0.000_194_992_120_303_496_96,
    -2.007_064_428_084_537_3,
    6.297_718_320_876_736,
    2.555_078_007_763_585_7,
    -35.424_360_355_313_95,
    58.452_766_543_410_62,
    -40.327_904_781_825_815,
    10.453_640_011_663_42,
];
/// The same for `gelu_new` (max error `1.869·10⁻⁴`).
const TANH_Q: [f64; 8] = [
    0.000_186_754_664_211_201_6,
    -2.007_875_029_403_959,
    6.327_882_956_758_155,
    2.266_010_554_210_976_3,
    -34.403_646_031_747_535,
    56.823_106_763_492_405,
    -39.118_148_958_691_876,
    10.112_599_501_156_476,
];

/// Integer constants of Knuth's form for BOLT's quartic (derived from [`BOLT_Q`]).
#[derive(Clone, Copy, Debug)]
struct Knuth {
    /// `α = a/2` at 18 bits.
    alpha: i64,
    /// `β' = b − a²/4` at 13 bits.
    beta: i64,
    /// `c` at 13 bits.
    c: i64,
    /// `d` at 26 bits.
    d: i64,
    /// `e` (the leading coefficient) at 17 bits.
    e: i64,
}

/// Ascending coefficients of the monic Chebyshev polynomial of degree 4 on `[0, l]`:
/// `(l/2)^4/8 · T4(2t/l − 1)` with `T4(s) = 8s⁴ − 8s² + 1`.
fn monic_chebyshev4(l: f64) -> [f64; 5] {
    let a = 2.0 / l;
    // s = a·t − 1; s² = a²t² − 2at + 1; s⁴ = (s²)².
    let s2 = [1.0, -2.0 * a, a * a];
    let mut s4 = [0.0; 5];
    for (i, &x) in s2.iter().enumerate() {
        for (j, &y) in s2.iter().enumerate() {
            s4[i + j] += x * y;
        }
    }
    let k = libm::pow(l / 2.0, 4.0) / 8.0;
    let mut out = [0.0; 5];
    for i in 0..5 {
        let s2i = if i < 3 { s2[i] } else { 0.0 };
        out[i] = k * (8.0 * s4[i] - 8.0 * s2i + if i == 0 { 1.0 } else { 0.0 });
    }
    out
}

/// Shift of `y = v²` (`v` at 18 bits, `y` at 13).
const KN_SQ_SHIFT: u32 = 23;
/// Shift of the final Knuth product (`e·(u·y + d)` at 13 + 13 + 17 bits, to 13).
const KN_OUT_SHIFT: u32 = 30;

impl Knuth {
    fn new(q: &[f64; 5]) -> Knuth {
        let e = fixed::encode(q[4], 17);
        let eh = e as f64 / (1u64 << 17) as f64;
        // The leading coefficient becomes `eh`: subtract `(q4 − eh)·T̃4(t)`, the monic
        // Chebyshev polynomial of [0, T] (max `(T/2)^4/8`), so the change stays
        // `≤ |q4 − eh|·0.42 < 2^{−19}` instead of `|q4 − eh|·T^4`.
        let cheb = monic_chebyshev4(BOLT_T);
        let mut q = *q;
        for (k, c) in cheb.iter().enumerate() {
            q[k] -= (q[4] - eh) * c;
        }
        let a3 = q[3] / eh;
        let (a2, a1, a0) = (q[2] / eh, q[1] / eh, q[0] / eh);
        let alpha = fixed::encode((a3 - 1.0) / 4.0, 18);
        let a = 2.0 * alpha as f64 / (1u64 << 18) as f64;
        let b = a1 - a * (a2 - a * a - a);
        let c = a2 - a * a - a - 2.0 * b;
        let d = a0 - b * b - b * c;
        Knuth {
            alpha,
            beta: fixed::encode(b - a * a / 4.0, 13),
            c: fixed::encode(c, 13),
            d: fixed::encode(d, 26),
            e,
        }
    }
}

/// Coefficient scales of the degree-7 power tree: `A` at 17 bits, `B` at 15 bits.
const PT_FA: u32 = 17;
const PT_FB: u32 = 15;
/// Powers of `u` at 20 bits.
const PT_FU: u32 = 20;
/// Shift of `A_raw` (37 → 25 bits) and `B_raw` (35 → 23 bits).
const PT_AB_SHIFT: u32 = 12;
/// Shift of the final `u⁴·B + A·2^{18}` (43 bits → 13).
const PT_OUT_SHIFT: u32 = 30;
/// Bound bits of `u`, `u²`, `u⁴` at [`PT_FU`] (`≤ 1 + ε`) for [`Party::mul_bounded_fx`].
const PT_BOUND: u32 = 21;
/// Bound bits of `B(u)` at `23 − h` bits (`|B| ≤ 35.5 < 2^6` on `[0, 1]` for every fit: erf,
/// tanh and SiLU's two pieces).
const PT_B_BOUND: u32 = 29;
/// Bound bits of Knuth's `u` and `y` at 13 bits (`|u| ≤ 4.7`, `|y| ≤ 7.7` on
/// `[0, T⁺]`; `2^{18}` leaves a factor 4).
const KN_BOUND: u32 = 18;

/// Exact-erf GELU.
fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / core::f64::consts::SQRT_2))
}

/// GPT-2's `gelu_new`.
fn gelu_tanh(x: f64) -> f64 {
    let k = libm::sqrt(2.0 / core::f64::consts::PI);
    0.5 * x * (1.0 + libm::tanh(k * (x + 0.044_715 * x * x * x)))
}

/// XOR of two bit-share vectors (local).
fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(&x, &y)| x ^ y).collect()
}

impl Gelu {
    /// Bound of the fixed-point evaluation against the exact-arithmetic polynomial.
    pub const FIXED_ERR: f64 = 3.0e-4;

    /// The cutoff `T`.
    pub fn cutoff(&self) -> f64 {
        match self.kind {
            GeluKind::Bolt => BOLT_T,
            GeluKind::Tanh | GeluKind::Erf => HI_T,
        }
    }

    /// The asserted bound of `|out − f64_reference|` for inputs in the valid range: fit
    /// error, tail beyond the cutoff, fixed point and the input's own rounding.
    pub fn max_error(&self) -> f64 {
        match self.kind {
            GeluKind::Bolt => 9.5e-3,
            GeluKind::Tanh | GeluKind::Erf => 7.0e-4,
        }
    }

    /// Checks the ring: `F = 13` and `ℓ ≥ 43` (the internal scales assume them).
    pub fn validate(&self, ring: RingCfg) -> Result<()> {
        if ring.frac != 13 {
            return Err(MpcError::InvalidConfig("GELU needs F = 13"));
        }
        if ring.ell < 43 {
            return Err(MpcError::InvalidConfig("GELU needs ell >= 43"));
        }
        Ok(())
    }

    /// `T` at 13 bits.
    fn t_int(&self) -> i64 {
        fixed::encode(self.cutoff(), 13)
    }

    /// The three comparison bits `[x < 0], [x ≤ T], [x < −T]` as XOR shares.
    async fn bits<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
    ) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        let r = p.ring();
        let n = x.len();
        let t = self.t_int();
        let p0 = p.is_p0();
        let mut arg = Vec::with_capacity(3 * n);
        arg.extend_from_slice(x.as_slice());
        for off in [-(t + 1), t] {
            let c = r.from_signed(off);
            arg.extend(
                x.as_slice()
                    .iter()
                    .map(|&v| if p0 { r.add(v, c) } else { v }),
            );
        }
        let m = p.msb(&RingShares::new(arg)).await?;
        let m = m.as_slice();
        Ok((
            m[..n].to_vec(),
            m[n..2 * n].to_vec(),
            m[2 * n..3 * n].to_vec(),
        ))
    }

    /// Everything in MPC (see the module documentation for the steps and costs).
    pub async fn run<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
    ) -> Result<RingShares> {
        self.validate(p.ring())?;
        let r = p.ring();
        let (a, b, c) = self.bits(p, x).await?;
        let m = p.mux(&BoolShares::new(a), x).await?;
        let relu = sub(r, x, &m)?;
        let t = sub(r, &relu, &m)?;
        let q = match self.kind {
            GeluKind::Bolt => knuth_eval(p, &Knuth::new(&BOLT_Q), &t).await?,
            GeluKind::Erf => power_tree_eval(p, &ERF_Q, &t).await?,
            GeluKind::Tanh => power_tree_eval(p, &TANH_Q, &t).await?,
        };
        let sel = p.mux(&BoolShares::new(xor(&b, &c)), &q).await?;
        add(r, &relu, &sel)
    }

    /// EncFormer's split: `f0`, `f1` are shares of `F0(x)`, `F1(x)` (at `F = 13`) from
    /// the CKKS side; MPC computes the comparison bits and selects among
    /// `{0, F0, F1, x}` exactly.
    pub async fn run_split<R: RngCore + CryptoRng>(
        &self,
        p: &mut Party<R>,
        x: &RingShares,
        f0: &RingShares,
        f1: &RingShares,
    ) -> Result<RingShares> {
        self.validate(p.ring())?;
        let n = x.len();
        expect_len("GELU candidate F0", n, f0.len())?;
        expect_len("GELU candidate F1", n, f1.len())?;
        let r = p.ring();
        let (a, b, c) = self.bits(p, x).await?;
        let mut sel = xor(&a, &c);
        sel.extend(xor(&a, &b));
        let p0 = p.is_p0();
        sel.extend(b.iter().map(|&v| if p0 { v ^ 1 } else { v }));
        let mut vals = Vec::with_capacity(3 * n);
        vals.extend_from_slice(f0.as_slice());
        vals.extend_from_slice(f1.as_slice());
        vals.extend_from_slice(x.as_slice());
        let o = p.mux(&BoolShares::new(sel), &RingShares::new(vals)).await?;
        let o = o.as_slice();
        Ok(RingShares::new(
            (0..n)
                .map(|k| r.add(r.add(o[k], o[n + k]), o[2 * n + k]))
                .collect(),
        ))
    }

    /// `Q(t)` as ascending coefficients in `t`.
    fn q_in_t(&self) -> Vec<f64> {
        match self.kind {
            GeluKind::Bolt => BOLT_Q.to_vec(),
            GeluKind::Erf | GeluKind::Tanh => {
                let q = if self.kind == GeluKind::Erf {
                    &ERF_Q
                } else {
                    &TANH_Q
                };
                let mut s = 1.0;
                q.iter()
                    .map(|&c| {
                        let v = c * s;
                        s /= HI_T;
                        v
                    })
                    .collect()
            }
        }
    }

    /// The candidates' plaintext polynomials, ascending coefficients in `x`:
    /// `F0(x) = Q(−x)` (selected on `[−T, 0)`) and `F1(x) = x + Q(x)` (on `[0, T]`).
    pub fn candidates(&self) -> (Vec<f64>, Vec<f64>) {
        let q = self.q_in_t();
        let f0 = q
            .iter()
            .enumerate()
            .map(|(k, &c)| if k % 2 == 1 { -c } else { c })
            .collect();
        let mut f1 = q;
        if let Some(c1) = f1.get_mut(1) {
            *c1 += 1.0;
        }
        (f0, f1)
    }

    /// `f64` values of the candidates at `x` (test inputs for [`Gelu::run_split`]).
    pub fn candidate_values(&self, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (c0, c1) = self.candidates();
        let ev = |c: &[f64], v: f64| c.iter().rev().fold(0.0, |acc, &k| acc * v + k);
        (
            x.iter().map(|&v| ev(&c0, v)).collect(),
            x.iter().map(|&v| ev(&c1, v)).collect(),
        )
    }

    /// Plain-integer reference of [`Gelu::run`]: the same steps with exact rounding
    /// (empty for a ring [`Gelu::validate`] rejects).
    pub fn reference(&self, ring: RingCfg, x: &[i64]) -> Vec<i64> {
        if self.validate(ring).is_err() {
            return Vec::new();
        }
        let t_cut = self.t_int();
        let kn = Knuth::new(&BOLT_Q);
        x.iter()
            .map(|&v| {
                let relu = v.max(0);
                if v < -t_cut || v > t_cut {
                    return relu;
                }
                let t = v.abs();
                relu + match self.kind {
                    GeluKind::Bolt => knuth_ref(&kn, t),
                    GeluKind::Erf => power_tree_ref(&ERF_Q, t),
                    GeluKind::Tanh => power_tree_ref(&TANH_Q, t),
                }
            })
            .collect()
    }

    /// Plain-integer reference of [`Gelu::run_split`]: exact selection (empty if the
    /// three lengths differ, where [`Gelu::run_split`] fails).
    pub fn reference_split(&self, x: &[i64], f0: &[i64], f1: &[i64]) -> Vec<i64> {
        if f0.len() != x.len() || f1.len() != x.len() {
            return Vec::new();
        }
        let t = self.t_int();
        x.iter()
            .zip(f0.iter().zip(f1))
            .map(|(&v, (&a, &b))| {
                if v < -t {
                    0
                } else if v < 0 {
                    a
                } else if v <= t {
                    b
                } else {
                    v
                }
            })
            .collect()
    }

    /// The exact function: erf GELU for [`GeluKind::Bolt`] and [`GeluKind::Erf`],
    /// `gelu_new` for [`GeluKind::Tanh`].
    pub fn f64_reference(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .map(|&v| match self.kind {
                GeluKind::Tanh => gelu_tanh(v),
                GeluKind::Bolt | GeluKind::Erf => gelu_erf(v),
            })
            .collect()
    }
}

/// `Q(t)` by Knuth's form (see the module documentation), `t` at 13 bits.
async fn knuth_eval<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    k: &Knuth,
    t: &RingShares,
) -> Result<RingShares> {
    let r = p.ring();
    let p0 = p.is_p0();
    let cst = |c: i64| if p0 { r.from_signed(c) } else { 0 };
    let ts = t.as_slice();
    let v = RingShares::new(ts.iter().map(|&x| r.add(x << 5, cst(k.alpha))).collect());
    let y0 = p.square_fx(&v, KN_SQ_SHIFT).await?;
    let y: Vec<u64> = y0
        .as_slice()
        .iter()
        .map(|&s| r.add(s, cst(k.beta)))
        .collect();
    let u: Vec<u64> = y
        .iter()
        .zip(ts)
        .map(|(&yv, &tv)| r.add(r.add(yv, tv), cst(k.c)))
        .collect();
    let (u, y) = (RingShares::new(u), RingShares::new(y));
    // |u| ≤ 4.7 and |y| ≤ 7.7 at 13 bits (< 2^16) for t ∈ [0, T⁺]: the bounded
    // product at 2^18 (lanes beyond T are garbled either way and muxed away).
    let uy = p.mul_bounded_fx(&u, KN_BOUND, &y, KN_BOUND, 0).await?;
    let e = r.from_signed(k.e);
    let raw = RingShares::new(
        uy.as_slice()
            .iter()
            .map(|&z| r.mul(r.add(z, cst(k.d)), e))
            .collect(),
    );
    p.trunc_round(raw, KN_OUT_SHIFT).await
}

/// Reference of [`knuth_eval`] with exact rounding.
fn knuth_ref(k: &Knuth, t: i64) -> i64 {
    let v = (t << 5) + k.alpha;
    let y = fixed::round_shift(v as i128 * v as i128, KN_SQ_SHIFT) + k.beta;
    let u = y + t + k.c;
    let raw = (u as i128 * y as i128 + k.d as i128) * k.e as i128;
    fixed::round_shift(raw, KN_OUT_SHIFT)
}

/// Encodes the power-tree coefficients: `A` (`c_0..c_3`) at [`PT_FA`] bits, `B`
/// (`c_4..c_7`) at [`PT_FB`] bits.
fn pt_coeffs(q: &[f64; 8]) -> ([i64; 4], [i64; 4]) {
    let mut a = [0i64; 4];
    let mut b = [0i64; 4];
    for k in 0..4 {
        a[k] = fixed::encode(q[k], PT_FA);
        b[k] = fixed::encode(q[k + 4], PT_FB);
    }
    (a, b)
}

/// `Q(t)` for the degree-7 fits in `u = t/4` by the power tree, `t` at 13 bits.
async fn power_tree_eval<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    q: &[f64; 8],
    t: &RingShares,
) -> Result<RingShares> {
    let r = p.ring();
    // u = t/4 at 20 bits: t·2^{20−15}.
    let u = RingShares::new(t.as_slice().iter().map(|&v| r.mul(v, 1 << 5)).collect());
    power_tree_lanes(p, &[q], 0, &u).await
}

/// Degree-7 polynomials `Σ c_k u^k` at 13 bits by the power tree, for `u` at 20 bits (`|u| ≤ 1`
/// on the lanes that count; the others come out garbled, see the module docs): `u` holds
/// `pieces.len()` blocks of equal length, block `i` evaluated with `pieces[i]` (one batch: the
/// same products and rounds as one polynomial). Each piece's cubic `B = c_4 + … + c_7·u³` must
/// stay below `2^6` on `[0, 1]`, and the value below `2^{h−2}·2^{ℓ−43}` for `h` bits of
/// `headroom`: the last sum is held at `43 − h` fractional bits (`A` at `25 − h`, `B` at
/// `23 − h`), and its truncation needs it within `2^{ℓ−2}` (GELU's `|Q| ≤ 0.17` takes `h = 0`,
/// SiLU's `0.28` takes `h = 1`).
pub(crate) async fn power_tree_lanes<R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    pieces: &[&[f64; 8]],
    headroom: u32,
    u: &RingShares,
) -> Result<RingShares> {
    let r = p.ring();
    let p0 = p.is_p0();
    let all = u.len();
    if pieces.is_empty() || !all.is_multiple_of(pieces.len()) {
        return Err(MpcError::InvalidConfig(
            "power tree: the lanes must split evenly over the pieces",
        ));
    }
    if headroom > 2 {
        return Err(MpcError::InvalidConfig(
            "power tree: at most 2 bits of headroom (the sums' fractional bits)",
        ));
    }
    let block = all / pieces.len();
    let coeffs: Vec<([i64; 4], [i64; 4])> = pieces.iter().map(|q| pt_coeffs(q)).collect();
    let u2 = p.square_fx(u, PT_FU).await?;
    let mut lhs = u.as_slice().to_vec();
    lhs.extend_from_slice(u2.as_slice());
    let mut rhs = u2.as_slice().to_vec();
    rhs.extend_from_slice(u2.as_slice());
    // u, u² ≤ 1 at 20 bits (< 2^21) on the lanes that count.
    let u34 = p
        .mul_bounded_fx(
            &RingShares::new(lhs),
            PT_BOUND,
            &RingShares::new(rhs),
            PT_BOUND,
            PT_FU,
        )
        .await?;
    let (us, u2s, u34s) = (u.as_slice(), u2.as_slice(), u34.as_slice());
    let one = |c: i64, f: u32| {
        if p0 {
            r.from_signed(c).wrapping_shl(f) & r.mask()
        } else {
            0
        }
    };
    let lin = |c: &[i64; 4], f: u32, k: usize| {
        let mut s = one(c[0], f);
        s = r.add(s, r.mul(r.from_signed(c[1]), us[k]));
        s = r.add(s, r.mul(r.from_signed(c[2]), u2s[k]));
        r.add(s, r.mul(r.from_signed(c[3]), u34s[k]))
    };
    let mut ab = Vec::with_capacity(2 * all);
    ab.extend((0..all).map(|k| lin(&coeffs[k / block].0, PT_FU, k)));
    ab.extend((0..all).map(|k| lin(&coeffs[k / block].1, PT_FU, k)));
    let ab = p
        .trunc_round(RingShares::new(ab), PT_AB_SHIFT + headroom)
        .await?;
    let (a, b) = ab.as_slice().split_at(all);
    let u4 = RingShares::new(u34s[all..].to_vec());
    // |B(u)| < 2^6 at 23 − h bits (< 2^29) for u ∈ [0, 1] (every fit here: B rises from c₄).
    let prod = p
        .mul_bounded_fx(&RingShares::new(b.to_vec()), PT_B_BOUND, &u4, PT_BOUND, 0)
        .await?;
    let raw = RingShares::new(
        prod.as_slice()
            .iter()
            .zip(a)
            .map(|(&z, &av)| r.add(z, (av << 18) & r.mask()))
            .collect(),
    );
    p.trunc_round(raw, PT_OUT_SHIFT - headroom).await
}

/// Reference of [`power_tree_eval`] with exact rounding.
fn power_tree_ref(q: &[f64; 8], t: i64) -> i64 {
    power_tree_ref_u(q, 0, t << 5)
}

/// Reference of [`power_tree_lanes`] on one lane with exact rounding (`u` at 20 bits).
pub(crate) fn power_tree_ref_u(q: &[f64; 8], headroom: u32, u: i64) -> i64 {
    let (ca, cb) = pt_coeffs(q);
    let u = u as i128;
    let u2 = fixed::round_shift(u * u, PT_FU) as i128;
    let u3 = fixed::round_shift(u * u2, PT_FU) as i128;
    let u4 = fixed::round_shift(u2 * u2, PT_FU) as i128;
    let lin = |c: &[i64; 4]| {
        ((c[0] as i128) << PT_FU) + c[1] as i128 * u + c[2] as i128 * u2 + c[3] as i128 * u3
    };
    let a = fixed::round_shift(lin(&ca), PT_AB_SHIFT + headroom) as i128;
    let b = fixed::round_shift(lin(&cb), PT_AB_SHIFT + headroom) as i128;
    fixed::round_shift(u4 * b + (a << 18), PT_OUT_SHIFT - headroom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nonlinear::cost::Meter;
    use crate::nonlinear::fixed::ErrStats;
    use crate::nonlinear::testkit::*;
    use rand_core::RngCore;
    use std::eprintln;

    const KINDS: [GeluKind; 3] = [GeluKind::Bolt, GeluKind::Tanh, GeluKind::Erf];

    fn ulps(kind: GeluKind) -> i64 {
        match kind {
            GeluKind::Bolt => 2,
            _ => 3,
        }
    }

    /// Inputs: uniform in [−25, 25] plus the edges around ±T and 0 and huge values.
    fn inputs(g: &mut rand_chacha::ChaCha20Rng, gl: &Gelu, f: u32) -> Vec<i64> {
        let mut xs = uniform(g, 400, 25.0, f);
        xs.extend(uniform(g, 96, gl.cutoff() + 0.5, f));
        let t = gl.t_int();
        xs.extend([0, 1, -1, t, t + 1, -t, -t - 1, t - 1, -t + 1]);
        xs.extend([
            1 << 30,
            -(1 << 30),
            (1 << 40) - 5,
            -(1 << 40) + 5,
            1 << 20,
            -(1 << 20),
        ]);
        xs.push(fixed::encode(25.0, f));
        xs
    }

    #[test]
    fn gelu_all_mpc_is_within_bounds() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(7);
        for kind in KINDS {
            let gl = Gelu { kind };
            let xs = inputs(&mut g, &gl, r.frac);
            let (x0, x1) = share(r, &xs, &mut g);
            let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
            let c0 = p0.ot_counts();
            let (o0, o1) = both!(
                p0,
                p1,
                gl.run(&mut p0, &x0).await,
                gl.run(&mut p1, &x1).await
            );
            let (s0, s1) = (m0.read(), m1.read());
            let c1 = p0.ot_counts();
            let cots = ((c1.0 - c0.0) + (c1.1 - c0.1)) as f64 / xs.len() as f64;
            let got = open(r, &o0, &o1);
            assert_within(&got, &gl.reference(r, &xs), ulps(kind), "gelu vs reference");
            let xf: Vec<f64> = xs.iter().map(|&v| fixed::decode(v, r.frac)).collect();
            let gf: Vec<f64> = got.iter().map(|&v| fixed::decode(v, r.frac)).collect();
            let e = ErrStats::of(&gf, &gl.f64_reference(&xf));
            let (a, b) = (s0.offline_online(), s1.offline_online());
            let bytes = (a.bytes_sent + b.bytes_sent) as f64 / xs.len() as f64;
            eprintln!(
                "GELU {kind:?} all-MPC: max err {:.3e} mean {:.3e}; {:.0} B/elem, {cots:.0} COT/elem, rounds offline {} online {}",
                e.max_abs, e.mean_abs, bytes, s0.offline.rounds, s0.online.rounds
            );
            assert!(e.max_abs <= gl.max_error(), "{kind:?}: {e:?}");
            // beyond the cutoff the output is ReLU exactly (saturation)
            for (k, &v) in xs.iter().enumerate() {
                if v.abs() > gl.t_int() {
                    assert_eq!(got[k], v.max(0), "ReLU branch at {v}");
                }
            }
        }
    }

    #[test]
    fn gelu_split_selects_exactly() {
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(8);
        for kind in KINDS {
            let gl = Gelu { kind };
            let xs = inputs(&mut g, &gl, r.frac);
            let xf: Vec<f64> = xs.iter().map(|&v| fixed::decode(v, r.frac)).collect();
            // CKKS's candidates (plaintext here), clipped where the polynomial is huge
            let (c0, c1) = gl.candidate_values(&xf);
            let enc = |v: &[f64]| -> Vec<i64> {
                v.iter()
                    .map(|&y| fixed::encode(y.clamp(-1e6, 1e6), r.frac))
                    .collect()
            };
            let (f0, f1) = (enc(&c0), enc(&c1));
            let (x0, x1) = share(r, &xs, &mut g);
            let (a0, a1) = share(r, &f0, &mut g);
            let (b0, b1) = share(r, &f1, &mut g);
            let (m0, m1) = (Meter::start(&p0.channel()), Meter::start(&p1.channel()));
            let c0 = p0.ot_counts();
            let (o0, o1) = both!(
                p0,
                p1,
                gl.run_split(&mut p0, &x0, &a0, &b0).await,
                gl.run_split(&mut p1, &x1, &a1, &b1).await
            );
            let (s0, s1) = (m0.read(), m1.read());
            let c1 = p0.ot_counts();
            let cots = ((c1.0 - c0.0) + (c1.1 - c0.1)) as f64 / xs.len() as f64;
            let got = open(r, &o0, &o1);
            assert_eq!(got, gl.reference_split(&xs, &f0, &f1), "{kind:?} split");
            let gf: Vec<f64> = got.iter().map(|&v| fixed::decode(v, r.frac)).collect();
            let e = ErrStats::of(&gf, &gl.f64_reference(&xf));
            let (a, b) = (s0.offline_online(), s1.offline_online());
            let bytes = (a.bytes_sent + b.bytes_sent) as f64 / xs.len() as f64;
            eprintln!(
                "GELU {kind:?} split: max err {:.3e} mean {:.3e}; {:.0} B/elem, {cots:.0} COT/elem, rounds offline {} online {}",
                e.max_abs, e.mean_abs, bytes, s0.offline.rounds, s0.online.rounds
            );
            assert!(e.max_abs <= gl.max_error(), "{kind:?} split: {e:?}");
        }
    }

    #[test]
    fn fits_meet_their_stated_errors_and_a_wrong_coefficient_fails() {
        let r = RingCfg::ENCFORMER;
        for kind in KINDS {
            let gl = Gelu { kind };
            let xs: Vec<i64> = (-60_000..60_000).step_by(7).map(|v| v as i64 * 4).collect();
            let xf: Vec<f64> = xs.iter().map(|&v| fixed::decode(v, r.frac)).collect();
            let got: Vec<f64> = gl
                .reference(r, &xs)
                .iter()
                .map(|&v| fixed::decode(v, r.frac))
                .collect();
            let e = ErrStats::of(&got, &gl.f64_reference(&xf));
            eprintln!(
                "GELU {kind:?} reference: max {:.3e} mean {:.3e}",
                e.max_abs, e.mean_abs
            );
            assert!(e.max_abs <= gl.max_error(), "{kind:?}: {e:?}");
        }
        // The integer evaluation against the exact-arithmetic fitted polynomial.
        for kind in KINDS {
            let gl = Gelu { kind };
            let q = gl.q_in_t();
            let t_int = gl.t_int();
            let mut worst = 0.0f64;
            for v in (0..=t_int).step_by(3) {
                let t = fixed::decode(v, 13);
                let exact = q.iter().rev().fold(0.0, |acc, &c| acc * t + c);
                let got = fixed::decode(gl.reference(r, &[v])[0] - v, 13);
                worst = worst.max((got - exact).abs());
            }
            eprintln!("GELU {kind:?}: integer vs exact polynomial {worst:.3e}");
            assert!(worst <= Gelu::FIXED_ERR, "{kind:?}: {worst}");
        }
        // BOLT's quartic with its t² coefficient off by 1%: the bound must fail.
        let mut bad = BOLT_Q;
        bad[2] *= 1.01;
        let kb = Knuth::new(&bad);
        let gl = Gelu {
            kind: GeluKind::Bolt,
        };
        let t = gl.t_int();
        let mut worst = 0.0f64;
        for v in (-t..=t).step_by(13) {
            let y = v.max(0) + knuth_ref(&kb, v.abs());
            let want = gelu_erf(fixed::decode(v, 13));
            worst = worst.max((fixed::decode(y, 13) - want).abs());
        }
        assert!(
            worst > gl.max_error(),
            "a wrong coefficient must break the bound ({worst})"
        );
        let mut bad = ERF_Q;
        bad[5] += 0.01;
        let mut worst = 0.0f64;
        for v in (0..fixed::encode(HI_T, 13)).step_by(17) {
            let y = v + power_tree_ref(&bad, v);
            worst = worst.max((fixed::decode(y, 13) - gelu_erf(fixed::decode(v, 13))).abs());
        }
        assert!(
            worst
                > Gelu {
                    kind: GeluKind::Erf
                }
                .max_error(),
            "{worst}"
        );
    }

    /// One run of both parties; returns the payload bytes the observer received.
    fn view_of_run(
        gl: &Gelu,
        p0: &mut P,
        p1: &mut P,
        x: (&RingShares, &RingShares),
        split: bool,
        observer_p1: bool,
    ) -> Vec<u8> {
        let (c0, c1) = (p0.channel(), p1.channel());
        let (x0, x1) = x;
        let mut s0 = crate::mpc::Session::new(c0, async move {
            if split {
                gl.run_split(p0, x0, x0, x0).await
            } else {
                gl.run(p0, x0).await
            }
        });
        let mut s1 = crate::mpc::Session::new(c1, async move {
            if split {
                gl.run_split(p1, x1, x1, x1).await
            } else {
                gl.run(p1, x1).await
            }
        });
        let (mut d0, mut d1, mut view) = (false, false, Vec::new());
        while !(d0 && d1) {
            if !d0 {
                d0 = s0.poll().is_ready();
            }
            if !d1 {
                d1 = s1.poll().is_ready();
            }
            for f in s0.take_outgoing() {
                if observer_p1 {
                    view.extend_from_slice(&f.payload);
                }
                s1.deliver(f);
            }
            for f in s1.take_outgoing() {
                if !observer_p1 {
                    view.extend_from_slice(&f.payload);
                }
                s0.deliver(f);
            }
        }
        view
    }

    /// Two-proportion z statistics per bit (and per XOR of bits 1 and 8 apart) of two
    /// samples of views: `(Σ z², k, max |z|)`.
    fn view_stat(a: &[Vec<u8>], b: &[Vec<u8>]) -> (f64, usize, f64) {
        let len = a[0].len() * 8;
        assert!(
            a.iter().chain(b).all(|v| v.len() * 8 == len),
            "view lengths differ"
        );
        let bit = |v: &[u8], i: usize| (v[i / 8] >> (i % 8)) & 1;
        let (mut stat, mut k, mut zmax) = (0.0, 0usize, 0.0f64);
        for d in [0usize, 1, 8] {
            for i in 0..len - d {
                let cnt = |s: &[Vec<u8>]| {
                    s.iter()
                        .map(|v| (bit(v, i) ^ if d > 0 { bit(v, i + d) } else { 0 }) as f64)
                        .sum::<f64>()
                };
                let (ca, cb) = (cnt(a), cnt(b));
                let (ra, rb) = (a.len() as f64, b.len() as f64);
                let p = (ca + cb) / (ra + rb);
                if p == 0.0 || p == 1.0 {
                    continue;
                }
                let z = (ca / ra - cb / rb) / libm::sqrt(p * (1.0 - p) * (1.0 / ra + 1.0 / rb));
                stat += z * z;
                k += 1;
                zmax = zmax.max(z.abs());
            }
        }
        (stat, k, zmax)
    }

    #[test]
    fn gelu_views_do_not_depend_on_the_other_input() {
        // Change one party's input (its share, the other share fixed): the messages the
        // other party receives keep their distribution (χ² over bit positions), and a
        // planted one-bit leak is detected.
        const RUNS: usize = 200;
        let (mut p0, mut p1, r) = pair();
        let mut g = rng(31);
        let gl = Gelu {
            kind: GeluKind::Bolt,
        };
        let fixed_share = RingShares::new((0..2).map(|_| g.next_u64() & r.mask()).collect());
        let inputs = [[0.5, -1.0], [30.0, -2.9]];
        for split in [false, true] {
            for observer_p1 in [true, false] {
                let (mut va, mut vb) = (Vec::new(), Vec::new());
                for i in 0..2 * RUNS {
                    let xs = &inputs[i % 2];
                    let varying = RingShares::new(
                        xs.iter()
                            .zip(fixed_share.as_slice())
                            .map(|(&v, &o)| r.sub(r.encode(v), o))
                            .collect(),
                    );
                    let x = if observer_p1 {
                        (&varying, &fixed_share)
                    } else {
                        (&fixed_share, &varying)
                    };
                    let v = view_of_run(&gl, &mut p0, &mut p1, x, split, observer_p1);
                    if i % 2 == 0 {
                        va.push(v)
                    } else {
                        vb.push(v)
                    }
                }
                let (stat, k, zmax) = view_stat(&va, &vb);
                let kf = k as f64;
                eprintln!("GELU view (split {split}, observer P1 {observer_p1}): Σz² {stat:.0} over {k}, max |z| {zmax:.2}");
                assert!(k > 1000);
                assert!(
                    stat <= kf + 6.0 * libm::sqrt(2.0 * kf) && zmax <= 6.5,
                    "views differ"
                );
                let pos = va[0].len() * 4 + 3;
                for v in va.iter_mut() {
                    v[pos / 8] &= !(1 << (pos % 8));
                }
                for v in vb.iter_mut() {
                    v[pos / 8] |= 1 << (pos % 8);
                }
                let (stat, k, zmax) = view_stat(&va, &vb);
                let kf = k as f64;
                assert!(
                    stat > kf + 6.0 * libm::sqrt(2.0 * kf) || zmax > 6.5,
                    "control not detected"
                );
            }
        }
    }

    #[test]
    fn gelu_references_are_total() {
        let r = RingCfg::ENCFORMER;
        let wild = [i64::MIN, i64::MIN + 1, -1, 0, 1, 1 << 50, i64::MAX];
        for kind in KINDS {
            let gl = Gelu { kind };
            assert_eq!(gl.reference(r, &wild).len(), wild.len());
            assert_eq!(gl.reference_split(&wild, &wild, &wild).len(), wild.len());
            assert!(gl.reference_split(&wild, &wild[1..], &wild).is_empty());
            assert_eq!(
                gl.f64_reference(&[f64::NAN, f64::INFINITY, -1e300]).len(),
                3
            );
        }
    }

    #[test]
    fn gelu_rejects_bad_rings_and_lengths() {
        let gl = Gelu {
            kind: GeluKind::Bolt,
        };
        assert!(gl.validate(RingCfg::new(43, 12).unwrap()).is_err());
        assert!(gl.validate(RingCfg::new(40, 13).unwrap()).is_err());
        assert!(gl.validate(RingCfg::ENCFORMER).is_ok());
        for kind in KINDS {
            let w = Gelu { kind }.reference(RingCfg::ENCFORMER, &[i64::MIN, i64::MAX]);
            assert_eq!(w, [0, i64::MAX]);
        }
        let (_p0, mut p1, r) = pair();
        let mut g = rng(3);
        let xs = uniform(&mut g, 8, 3.0, r.frac);
        let (_x0, x1) = share(r, &xs, &mut g);
        let (_f0, f1) = share(r, &xs[..7], &mut g);
        let mut s = crate::mpc::Session::new(p1.channel(), gl.run_split(&mut p1, &x1, &f1, &x1));
        let e = s.poll();
        assert!(matches!(
            e,
            core::task::Poll::Ready(Err(MpcError::LengthMismatch { .. }))
        ));
    }
}
