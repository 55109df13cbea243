//! Polynomial evaluation in the Chebyshev basis: interpolation of a real function on an interval,
//! and its homomorphic evaluation by baby-step giant-step with exact scale management.
//!
//! `p(x) = Σ_i c_i·T_i(t)`, `t = (2x − a − b)/(b − a)`. The evaluation computes the baby powers
//! `T_i`, `i < m`, that the leaves use (with their factors: an odd polynomial needs no even power
//! above `m/2`) and the giant powers `T_m, T_{2m}, T_{4m}, …` (`m` a power of two near
//! `√(d+1)`) with `T_{2k} = 2T_k² − 1` and `T_{j+k} = 2T_jT_k − T_{k−j}`, then splits `p`
//! recursively: `p = q·T_g + r` with `g` the largest giant power `≤ deg p`, where (from
//! `2T_gT_j = T_{g+j} + T_{g−j}`) `q_0 = c_g`, `q_j = 2c_{g+j}` and `r_i = c_i − c_{2g−i}`.
//! Leaves (`deg < m`) are linear combinations of baby powers.
//!
//! **Scales.** Every sub-result is produced at a *target* scale chosen in advance: a leaf
//! multiplies each `T_i` by its coefficient encoded at `target·q_ℓ / Δ(T_i)` and rescales by
//! `q_ℓ`, so it lands on `target` exactly; the quotient `q` of a split is evaluated at
//! `target·q_ℓ / Δ(T_g)`, so that `q·T_g` rescales onto `target`. Sums therefore never meet
//! mismatched scales, whatever the primes. Levels are planned beforehand by the same recursion
//! ([`ChebyshevPoly::depth`]).
//!
//! **Depth.** `⌈log2(d + 1)⌉` levels, the optimum: the baby-step size is the smallest
//! non-scalar cost among those that reach it. Plus one for the interval map unless the interval
//! is `[−1, 1]`.

use crate::backend::PolyBackend;
use crate::ckks::{Ciphertext, Ckks, EvaluationKeys, C64};
use crate::error::{Error, Result};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;
use core::f64::consts::PI;

/// A real polynomial in the Chebyshev basis of an interval `[a, b]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChebyshevPoly {
    /// `c_0 … c_d`.
    pub coeffs: Vec<f64>,
    /// Lower end of the interval.
    pub a: f64,
    /// Upper end of the interval.
    pub b: f64,
}

/// What one homomorphic evaluation cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolyCost {
    /// Relinearized ciphertext products (the non-scalar multiplications).
    pub ct_mults: u64,
    /// Constant multiplications.
    pub const_mults: u64,
    /// Levels consumed.
    pub depth: usize,
}

impl ChebyshevPoly {
    /// A polynomial from its coefficients on `[a, b]` (`a < b`, finite).
    pub fn new(coeffs: Vec<f64>, a: f64, b: f64) -> Result<Self> {
        if !(a.is_finite() && b.is_finite() && a < b) {
            return Err(Error::InvalidParameters(
                "a Chebyshev interval needs finite a < b",
            ));
        }
        if coeffs.is_empty() || coeffs.iter().any(|c| !c.is_finite()) {
            return Err(Error::InvalidParameters(
                "a Chebyshev polynomial needs finite coefficients",
            ));
        }
        Ok(Self { coeffs, a, b })
    }

    /// Interpolates `f` at the `degree + 1` Chebyshev nodes of `[a, b]`.
    pub fn interpolate(f: impl Fn(f64) -> f64, a: f64, b: f64, degree: usize) -> Result<Self> {
        let n = degree + 1;
        let nodes: Vec<f64> = (0..n)
            .map(|k| libm::cos(PI * (k as f64 + 0.5) / n as f64))
            .collect();
        let vals: Vec<f64> = nodes
            .iter()
            .map(|&t| f(0.5 * (b - a) * t + 0.5 * (a + b)))
            .collect();
        let coeffs = (0..n)
            .map(|j| {
                let s: f64 = (0..n)
                    .map(|k| vals[k] * libm::cos(PI * j as f64 * (k as f64 + 0.5) / n as f64))
                    .sum();
                if j == 0 {
                    s / n as f64
                } else {
                    2.0 * s / n as f64
                }
            })
            .collect();
        Self::new(coeffs, a, b)
    }

    /// The degree (the index of the last coefficient).
    pub fn degree(&self) -> usize {
        self.coeffs.len() - 1
    }

    fn maps_interval(&self) -> bool {
        !(self.a == -1.0 && self.b == 1.0)
    }

    /// `p(x)` in `f64` (Clenshaw's recurrence).
    pub fn eval_f64(&self, x: f64) -> f64 {
        let t = (2.0 * x - self.a - self.b) / (self.b - self.a);
        let (mut b1, mut b2) = (0.0, 0.0);
        for &c in self.coeffs.iter().skip(1).rev() {
            let b0 = 2.0 * t * b1 - b2 + c;
            b2 = b1;
            b1 = b0;
        }
        t * b1 - b2 + self.coeffs[0]
    }

    /// The planned levels of the BSGS recursion for baby-step size `m` (`0` for a constant),
    /// and its relinearized products (powers plus the products of the splits).
    fn plan(&self, m: usize) -> (usize, usize) {
        let levels = PowerLevels::new(&self.coeffs, m);
        let out = plan_level(&self.coeffs, &levels, m);
        let depth = if out == i64::MAX { 0 } else { (-out) as usize };
        let mults = levels.0.len() - 1 + plan_products(&self.coeffs, m);
        (depth, mults)
    }

    /// The baby-step size `m`: among the powers of two up to twice `⌈√(d+1)⌉`, the one of least
    /// depth, then fewest products. Near `d = 2^k − 1` only small `m` reach the optimum
    /// `⌈log2(d + 1)⌉` (the leaves' coefficients cost a level), at many more products.
    fn baby(&self) -> usize {
        let d1 = self.degree() + 1;
        let mut top = 2;
        while top * top < d1 {
            top *= 2;
        }
        let mut best = (self.plan(2), 2);
        let mut m = 4;
        while m <= 2 * top {
            let p = self.plan(m);
            if p < best.0 {
                best = (p, m);
            }
            m *= 2;
        }
        best.1
    }

    /// The relinearized products a homomorphic evaluation runs (what
    /// [`PolyCost::ct_mults`] will report).
    pub fn products(&self) -> usize {
        self.plan(self.baby()).1
    }

    /// The levels a homomorphic evaluation consumes: `⌈log2(d + 1)⌉`, plus one for the map of
    /// `[a, b]` onto `[−1, 1]` unless the interval is already `[−1, 1]`.
    pub fn depth(&self) -> usize {
        self.plan(self.baby()).0 + usize::from(self.maps_interval())
    }

    /// Evaluates `p` on the slots of `ct` (whose values must lie in `[a, b]`), producing a
    /// ciphertext at scale `target_scale` exactly, [`ChebyshevPoly::depth`] levels lower.
    pub fn eval<B: PolyBackend>(
        &self,
        ck: &Ckks<B>,
        keys: &EvaluationKeys<B>,
        ct: &Ciphertext<B>,
        target_scale: f64,
    ) -> Result<(Ciphertext<B>, PolyCost)> {
        if !(target_scale.is_finite() && target_scale >= 1.0) {
            return Err(Error::InvalidParameters(
                "target scale must be finite and at least 1",
            ));
        }
        let depth = self.depth();
        if ct.level() < depth {
            return Err(Error::LevelExhausted);
        }
        let mut ev = Evaluator {
            ck,
            keys,
            powers: BTreeMap::new(),
            cost: PolyCost {
                depth,
                ..Default::default()
            },
        };
        let start = ct.level();
        // T_1 = t.
        let t1 = if self.maps_interval() {
            let alpha = 2.0 / (self.b - self.a);
            let beta = -(self.a + self.b) / (self.b - self.a);
            let mut t = ck.clone_ct(ct);
            let q = ck.rescale_prime(t.level());
            ck.mul_const_assign(&mut t, C64::real(alpha), q)?;
            ck.rescale_assign(&mut t)?;
            ck.add_const_assign(&mut t, C64::real(beta))?;
            ev.cost.const_mults += 1;
            t
        } else {
            ck.clone_ct(ct)
        };
        ev.powers.insert(1, t1);
        let m = self.baby();
        // The giant powers the splits use; baby powers are made when a leaf first needs them.
        for g in used_powers(&self.coeffs, m).into_iter().filter(|&g| g >= m) {
            ev.power(g)?;
        }
        let out = ev.eval(&self.coeffs, m, target_scale)?;
        let out = match out {
            Some(c) => c,
            None => {
                // A constant polynomial: c_0 on every slot, at the target scale.
                let mut c = ck.clone_ct(ev.power(1)?);
                ck.mul_const_assign(&mut c, C64::real(0.0), 1.0)?;
                c.scale = target_scale;
                ck.add_const_assign(&mut c, C64::real(self.coeffs[0]))?;
                c
            }
        };
        debug_assert!(start - out.level() <= depth);
        let mut out = out;
        if start - out.level() < depth {
            // Terms that skipped levels (zero coefficients) still land where the plan said.
            ck.drop_level_assign(&mut out, start - depth)?;
        }
        Ok((out, ev.cost))
    }
}

/// The planned level (relative to the input's, so `≤ 0`) of each power `T_i`.
struct PowerLevels(BTreeMap<usize, i64>);

impl PowerLevels {
    /// The powers the evaluation of `c` computes (those of [`used_powers`] and their factors).
    fn new(c: &[f64], m: usize) -> Self {
        let mut lv = BTreeMap::new();
        lv.insert(1usize, 0i64);
        for i in used_powers(c, m) {
            power_level(i, &mut lv);
        }
        Self(lv)
    }
}

/// The powers the recursion on `c` reads: the giant power of each split and the baby powers of
/// the leaves' nonzero coefficients (an odd polynomial never reads an even baby power).
fn used_powers(c: &[f64], m: usize) -> BTreeSet<usize> {
    fn walk(c: &[f64], m: usize, out: &mut BTreeSet<usize>) {
        let d = c.len() - 1;
        if d < m {
            out.extend((1..=d).filter(|&i| c[i] != 0.0));
            return;
        }
        let g = giant_for(d, m);
        out.insert(g);
        let (q, r) = split(c, g);
        walk(&q, m, out);
        walk(&r, m, out);
    }
    let mut out = BTreeSet::new();
    walk(c, m, &mut out);
    out
}

/// The factors `T_i = 2·T_j·T_k − T_{|j−k|}` (`j = ⌈i/2⌉`, `k = ⌊i/2⌋`) and the level of `T_i`.
fn power_level(i: usize, lv: &mut BTreeMap<usize, i64>) -> i64 {
    if let Some(&l) = lv.get(&i) {
        return l;
    }
    let (j, k) = (i.div_ceil(2), i / 2);
    let lj = power_level(j, lv);
    let lk = power_level(k, lv);
    // T_{j−k} (T_1, or T_0 = 1) sits above the product's level.
    let l = lj.min(lk) - 1;
    lv.insert(i, l);
    l
}

/// Splits `c` (degree `≥ g`) by `T_g`: `(q, r)` with `p = q·T_g + r`.
fn split(c: &[f64], g: usize) -> (Vec<f64>, Vec<f64>) {
    let d = c.len() - 1;
    let mut q = vec![0.0; d - g + 1];
    q[0] = c[g];
    for j in 1..=d - g {
        q[j] = 2.0 * c[g + j];
    }
    let mut r: Vec<f64> = c[..g].to_vec();
    for (i, ri) in r.iter_mut().enumerate().skip(1) {
        let k = 2 * g - i;
        if k <= d {
            *ri -= c[k];
        }
    }
    // r_0 = c_0: g is the largest giant power ≤ d, so d < 2g and no q_j reaches T_0.
    (q, r)
}

/// The largest giant power `g = m·2^k ≤ d`.
fn giant_for(d: usize, m: usize) -> usize {
    let mut g = m;
    while 2 * g <= d {
        g *= 2;
    }
    g
}

/// The products of the splits of `eval` on `c` (one per split whose quotient is not constant).
fn plan_products(c: &[f64], m: usize) -> usize {
    let d = c.len() - 1;
    if d < m {
        return 0;
    }
    let (q, r) = split(c, giant_for(d, m));
    // Only a leaf quotient with no nonconstant term comes back empty (a scalar multiple of T_g).
    let q_const = q.len() - 1 < m && q[1..].iter().all(|&x| x == 0.0);
    usize::from(!q_const) + plan_products(&q, m) + plan_products(&r, m)
}

/// The planned output level of `eval` on `c` (relative), or `i64::MAX` for a constant.
fn plan_level(c: &[f64], lv: &PowerLevels, m: usize) -> i64 {
    let d = c.len() - 1;
    if d < m {
        let used = (1..=d).filter(|&i| c[i] != 0.0).map(|i| lv.0[&i]).min();
        return used.map_or(i64::MAX, |l| l - 1);
    }
    let g = giant_for(d, m);
    let (q, r) = split(c, g);
    let lq = plan_level(&q, lv, m);
    let lg = lv.0[&g];
    let lprod = if lq == i64::MAX { lg } else { lq.min(lg) } - 1;
    lprod.min(plan_level(&r, lv, m))
}

/// A copy of `ct` at `level` when it sits higher, `None` when it is already there (borrow it).
fn lower<B: PolyBackend>(
    ck: &Ckks<B>,
    ct: &Ciphertext<B>,
    level: usize,
) -> Result<Option<Ciphertext<B>>> {
    if ct.level() == level {
        Ok(None)
    } else {
        ck.copy_at_level(ct, level).map(Some)
    }
}

struct Evaluator<'a, B: PolyBackend> {
    ck: &'a Ckks<B>,
    keys: &'a EvaluationKeys<B>,
    powers: BTreeMap<usize, Ciphertext<B>>,
    cost: PolyCost,
}

impl<B: PolyBackend> Evaluator<'_, B> {
    /// `T_i`, computing it (and its factors) if needed: `2·T_j·T_k − T_{j−k}`.
    fn power(&mut self, i: usize) -> Result<&Ciphertext<B>> {
        if !self.powers.contains_key(&i) {
            let (j, k) = (i.div_ceil(2), i / 2);
            self.power(j)?;
            self.power(k)?;
            if j != k {
                self.power(j - k)?;
            }
            let ck = self.ck;
            let (pj, pk) = (&self.powers[&j], &self.powers[&k]);
            let l = pj.level().min(pk.level());
            // Only a factor above the product's level is copied (its lower rows).
            let (cj, ck_) = (lower(ck, pj, l)?, lower(ck, pk, l)?);
            let a = cj.as_ref().unwrap_or(pj);
            let b = ck_.as_ref().unwrap_or(pk);
            let mut p = ck.mul_relin(a, b, self.keys)?;
            self.cost.ct_mults += 1;
            ck.mul_int_assign(&mut p, 2)?;
            if j == k {
                ck.add_const_assign(&mut p, C64::real(-1.0))?;
            } else {
                let c = &self.powers[&(j - k)];
                let s = p.scale() / c.scale();
                ck.mul_const_acc(&mut p, c, C64::real(-1.0), s)?;
            }
            ck.rescale_assign(&mut p)?;
            self.powers.insert(i, p);
        }
        Ok(&self.powers[&i])
    }

    /// `Σ_i c_i·T_i` at exactly `target` (one level below the lowest power used), or `None`
    /// when every coefficient but `c_0` is zero.
    fn leaf(&mut self, c: &[f64], target: f64) -> Result<Option<Ciphertext<B>>> {
        let ck = self.ck;
        let used: Vec<usize> = (1..c.len()).filter(|&i| c[i] != 0.0).collect();
        for &i in &used {
            self.power(i)?;
        }
        let Some(level) = used.iter().map(|i| self.powers[i].level()).min() else {
            return Ok(None);
        };
        let q = ck.rescale_prime(level);
        // The first term is a copy at the leaf's level; the others accumulate in one pass each.
        let mut acc = ck.copy_at_level(&self.powers[&used[0]], level)?;
        let s = target * q / acc.scale();
        ck.mul_const_assign(&mut acc, C64::real(c[used[0]]), s)?;
        acc.scale = target * q;
        for &i in &used[1..] {
            let t = &self.powers[&i];
            ck.mul_const_acc(&mut acc, t, C64::real(c[i]), target * q / t.scale())?;
        }
        self.cost.const_mults += used.len() as u64;
        if c[0] != 0.0 {
            ck.add_const_assign(&mut acc, C64::real(c[0]))?;
        }
        ck.rescale_assign(&mut acc)?;
        acc.scale = target;
        Ok(Some(acc))
    }

    /// Evaluates `c` at exactly `target` (the recursion of the module docs).
    fn eval(&mut self, c: &[f64], m: usize, target: f64) -> Result<Option<Ciphertext<B>>> {
        let d = c.len() - 1;
        if d < m {
            return self.leaf(c, target);
        }
        let ck = self.ck;
        let g = giant_for(d, m);
        let (q, r) = split(c, g);
        for i in used_powers(&q, m) {
            self.power(i)?;
        }
        let lv = PowerLevels(
            self.powers
                .iter()
                .map(|(&i, ct)| (i, ct.level() as i64))
                .collect(),
        );
        let lq = plan_level(&q, &lv, m);
        let tg_level = self.powers[&g].level();
        let tg_scale = self.powers[&g].scale();
        let prod_level = if lq == i64::MAX {
            tg_level
        } else {
            (lq as usize).min(tg_level)
        };
        let qp = ck.rescale_prime(prod_level);
        let mut prod = match self.eval(&q, m, target * qp / tg_scale)? {
            Some(mut qc) => {
                ck.drop_level_assign(&mut qc, prod_level)?;
                let pg = &self.powers[&g];
                let cg = lower(ck, pg, prod_level)?;
                let p = ck.mul_relin(&qc, cg.as_ref().unwrap_or(pg), self.keys)?;
                self.cost.ct_mults += 1;
                p
            }
            None => {
                // q is the constant q_0: a scalar multiple of T_g.
                let mut tg = ck.copy_at_level(&self.powers[&g], prod_level)?;
                ck.mul_const_assign(&mut tg, C64::real(q[0]), target * qp / tg_scale)?;
                self.cost.const_mults += 1;
                tg
            }
        };
        prod.scale = target * qp;
        ck.rescale_assign(&mut prod)?;
        prod.scale = target;
        if let Some(mut rc) = self.eval(&r, m, target)? {
            let l = rc.level().min(prod.level());
            ck.drop_level_assign(&mut rc, l)?;
            ck.drop_level_assign(&mut prod, l)?;
            ck.add_assign(&mut prod, &rc)?;
        } else if r[0] != 0.0 {
            ck.add_const_assign(&mut prod, C64::real(r[0]))?;
        }
        Ok(Some(prod))
    }
}
