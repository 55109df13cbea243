//! Veil's CPU backend.
//!
//! [`CpuBackend::scalar`] is the **reference**: plain scalar Rust on one thread, following the
//! formulas `veil-core` defines, with `veil-core`'s canonical NTT. It is the oracle every other
//! backend is tested against, bit for bit.
//!
//! [`CpuBackend::fast`] is the optimized path on top of the same element-wise code: the NTT runs
//! on tfhe-ntt (AVX-512 / AVX2 SIMD when the CPU has it; tfhe-ntt computes the same canonical
//! transform — same root, same bit-reversed order — which the tests check), and every operation
//! is split over rows (limbs) and polynomials on a private rayon pool of `threads` threads.

mod gemm;
mod ifma;
mod simd;

use rayon::prelude::*;
use simd::Lin;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use veil_core::backend::{automorphism_ntt_map, Basis, Domain, PolyBackend};
use veil_core::math::modular::csub;
use veil_core::math::rns::{BasisConverter, DivRoundPlan};
use veil_core::math::Modulus;
use veil_core::CkksParams;

/// How the NTT is computed.
/// Which division a cached [`DivRoundPlan`] performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum DivKind {
    /// Drop `q_level` from `Q_level`.
    Rescale,
    /// Drop the level's special primes from `Q_level ∪ P_level` (`CkksParams::special_at`).
    ModDown,
    /// Drop `p_0` from `Q_level ∪ {p_0}`.
    ModDownP0,
}

enum NttEngine {
    /// `veil-core`'s scalar reference transform.
    Reference,
    /// tfhe-ntt plans, one per prime (global index order).
    Tfhe(Vec<tfhe_ntt::prime64::Plan>),
}

/// The CPU backend. See the crate documentation.
pub struct CpuBackend {
    params: CkksParams,
    moduli: Vec<Modulus>,
    q_total: usize,
    engine: NttEngine,
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    /// AVX-512 IFMA for lazy sums over primes below 2^52 (the fast path only; the reference
    /// stays scalar).
    ifma: Option<ifma::Ifma>,
    /// x86-64-v4 (AVX-512) code generation for element-wise passes (the fast path only).
    wide: Option<simd::Wide>,
    auto_maps: Mutex<HashMap<u64, Arc<Vec<u32>>>>,
    decompose_plans: Mutex<HashMap<(usize, usize), Arc<BasisConverter>>>,
    div_plans: Mutex<HashMap<(DivKind, usize), Arc<DivRoundPlan>>>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("name", &self.name())
            .finish()
    }
}

/// Errors constructing a CPU backend.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuBackendError {
    /// tfhe-ntt refused a prime (it needs `q ≡ 1 mod 2N`, prime, `N ≥ 16`).
    NttPlan(u64),
    /// The thread pool could not be built.
    ThreadPool(String),
}

impl std::fmt::Display for CpuBackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuBackendError::NttPlan(q) => write!(f, "no tfhe-ntt plan for prime {q}"),
            CpuBackendError::ThreadPool(e) => write!(f, "thread pool: {e}"),
        }
    }
}

impl std::error::Error for CpuBackendError {}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned cache only means another thread panicked while inserting an entry we can rebuild.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CpuBackend {
    fn build(
        params: &CkksParams,
        engine: NttEngine,
        threads: usize,
    ) -> Result<Self, CpuBackendError> {
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("veil-cpu-{i}"))
                    .build()
                    .map_err(|e| CpuBackendError::ThreadPool(e.to_string()))?,
            )
        } else {
            None
        };
        Ok(Self {
            params: params.clone(),
            moduli: params.all_moduli().copied().collect(),
            q_total: params.q().len(),
            ifma: if matches!(engine, NttEngine::Tfhe(_)) {
                ifma::detect()
            } else {
                None
            },
            wide: if matches!(engine, NttEngine::Tfhe(_)) {
                simd::detect()
            } else {
                None
            },
            engine,
            pool,
            threads: threads.max(1),
            auto_maps: Mutex::new(HashMap::new()),
            decompose_plans: Mutex::new(HashMap::new()),
            div_plans: Mutex::new(HashMap::new()),
        })
    }

    /// The scalar, single-threaded reference backend (the oracle).
    pub fn scalar(params: &CkksParams) -> Self {
        Self::build(params, NttEngine::Reference, 1)
            .expect("a one-thread backend has no pool to fail")
    }

    /// The optimized backend: tfhe-ntt SIMD NTTs, `threads` worker threads (1 = no pool).
    pub fn fast(params: &CkksParams, threads: usize) -> Result<Self, CpuBackendError> {
        let n = params.n();
        let plans = params
            .all_moduli()
            .map(|m| {
                tfhe_ntt::prime64::Plan::try_new(n, m.value())
                    .ok_or(CpuBackendError::NttPlan(m.value()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::build(params, NttEngine::Tfhe(plans), threads)
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    fn n(&self) -> usize {
        self.params.n()
    }

    /// Runs `f` inside the pool when there is one.
    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    /// Applies `f(row, global_prime_index, row_slice)` to every row.
    fn rows_mut(
        &self,
        a: &mut [u64],
        basis: Basis,
        f: impl Fn(usize, usize, &mut [u64]) + Sync + Send,
    ) {
        let n = self.n();
        let rows = basis.rows();
        let q_total = self.q_total;
        let a = &mut a[..rows * n];
        if self.pool.is_some() {
            self.run(|| {
                a.par_chunks_mut(n)
                    .enumerate()
                    .for_each(|(r, row)| f(r, basis.global_index(r, q_total), row))
            });
        } else {
            a.chunks_mut(n)
                .enumerate()
                .for_each(|(r, row)| f(r, basis.global_index(r, q_total), row));
        }
    }

    /// The key inner product of `key_inner_product`, reading each `a_j` row from the key or, for
    /// a lean key, expanding it from the seed into a row scratch (only the rows `Q_level ∪ P_level`
    /// read, each once, in the row-parallel loop).
    fn inner_product(
        &self,
        digits: &[Vec<u64>],
        key_b: &[Vec<u64>],
        key_a: KeyA<'_>,
        level: usize,
        acc0: &mut [u64],
        acc1: &mut [u64],
    ) {
        // Both halves in one pass over the digits, in blocks of BLK coefficients whose
        // accumulators stay in L1 (no per-row scratch: at N = 2^16 that was 2 MB allocated and
        // zeroed per row). Lazy accumulation in u128: each product < 2^122 and dnum ≤ 64 keep
        // the sum below 2^128; one Barrett reduction per coefficient.
        const BLK: usize = 256;
        let n = self.n();
        let k = self.params.p().len();
        let ext = Basis::qp(level + 1, self.params.special_at(level));
        let key_basis = Basis::qp(self.q_total, k);
        let dn = self.params.digits_at(level);
        let q_total = self.q_total;
        let body = |(r, (row0, row1)): (usize, (&mut [u64], &mut [u64]))| {
            let g = ext.global_index(r, q_total);
            let kr = key_basis.row_of(g, q_total).expect("key spans Q ∪ P");
            let m = &self.moduli[g];
            let scratch: Vec<u64> = match key_a {
                KeyA::Held(_) => Vec::new(),
                KeyA::Seeded(seed) => {
                    let mut v = vec![0u64; dn * n];
                    for (j, row) in v.chunks_mut(n).enumerate() {
                        veil_core::math::sampling::expand_uniform_row(seed, j as u64, g, m, row);
                    }
                    v
                }
            };
            // The sum of `dn` products of words below q stays in the narrow reduction's domain
            // for dn ≤ 2^(63 - bits(q)) (8 digits at 60 bits): three multiplications a word
            // instead of six.
            let top = (m.value() - 1) as u128;
            let narrow = (dn as u128).saturating_mul(top * top) < m.narrow_limit();
            let mut s0 = [0u128; BLK];
            let mut s1 = [0u128; BLK];
            let mut b = 0;
            while b < n {
                let e = (b + BLK).min(n);
                let len = e - b;
                if dn == 0 {
                    s0[..len].fill(0);
                    s1[..len].fill(0);
                }
                for j in 0..dn {
                    let dj = &digits[j][r * n..(r + 1) * n];
                    let bj = &key_b[j][kr * n + b..kr * n + e];
                    let aj = match key_a {
                        KeyA::Held(a) => &a[j][kr * n + b..kr * n + e],
                        KeyA::Seeded(_) => &scratch[j * n + b..j * n + e],
                    };
                    let dj = &dj[b..e];
                    // The first digit writes the sums (no zero-fill pass), the others add.
                    if j == 0 {
                        for c in 0..len {
                            let d = dj[c] as u128;
                            s0[c] = d * bj[c] as u128;
                            s1[c] = d * aj[c] as u128;
                        }
                    } else {
                        for c in 0..len {
                            let d = dj[c] as u128;
                            s0[c] += d * bj[c] as u128;
                            s1[c] += d * aj[c] as u128;
                        }
                    }
                }
                reduce_sums(m, narrow, &s0[..len], &mut row0[b..e]);
                reduce_sums(m, narrow, &s1[..len], &mut row1[b..e]);
                b = e;
            }
        };
        let rows = ext.rows() * n;
        if self.pool.is_some() {
            self.run(|| {
                acc0[..rows]
                    .par_chunks_mut(n)
                    .zip(acc1[..rows].par_chunks_mut(n))
                    .enumerate()
                    .for_each(body)
            });
        } else {
            acc0[..rows]
                .chunks_mut(n)
                .zip(acc1[..rows].chunks_mut(n))
                .enumerate()
                .for_each(body);
        }
    }

    /// `out[r][c] = Σ_t term_t(r, c) mod q_r`, where `term(t, r, b, s)` adds term `t`'s products
    /// for row `r`'s coefficients `b..b + s.len()` into the u128 accumulators `s`. Lazy: blocks
    /// of BLK coefficients stay in L1, each product is below 2^122, so LAZY terms fit before a
    /// reduction; one Barrett reduction per coefficient otherwise.
    fn lazy_sums(
        &self,
        out: &mut [u64],
        basis: Basis,
        count: usize,
        term: impl Fn(usize, usize, usize, &mut [u128]) + Sync + Send,
    ) {
        const BLK: usize = 256;
        const LAZY: usize = 64;
        self.row_parts_mut(out, basis, BLK, |r, g, start, part| {
            let m = &self.moduli[g];
            let mut acc = [0u128; BLK];
            let mut b = 0;
            while b < part.len() {
                let s = &mut acc[..(part.len() - b).min(BLK)];
                s.fill(0);
                for t in 0..count {
                    if t > 0 && t % LAZY == 0 {
                        s.iter_mut().for_each(|v| *v = m.reduce_u128(*v) as u128);
                    }
                    term(t, r, start + b, s);
                }
                for (o, v) in part[b..].iter_mut().zip(s.iter()) {
                    *o = m.reduce_u128(*v);
                }
                b += s.len();
            }
        });
    }

    /// Applies `f(row, global_prime_index, first_column, part)` to every row, each row cut into
    /// equal parts (multiples of `align` words) so that the pool's threads share a few rows
    /// evenly: with 7 rows on 2 threads, one task per row would leave a thread idle for a
    /// seventh of the time. Without a pool, one part per row.
    fn row_parts_mut(
        &self,
        a: &mut [u64],
        basis: Basis,
        align: usize,
        f: impl Fn(usize, usize, usize, &mut [u64]) + Sync + Send,
    ) {
        let n = self.n();
        let rows = basis.rows();
        let q_total = self.q_total;
        let a = &mut a[..rows * n];
        if self.pool.is_none() || rows == 0 {
            a.chunks_mut(n)
                .enumerate()
                .for_each(|(r, row)| f(r, basis.global_index(r, q_total), 0, row));
            return;
        }
        // At least 8 tasks per thread, parts of at least 2^12 words (and of `align`).
        let want = (8 * self.threads).div_ceil(rows).next_power_of_two();
        let parts = want.min((n / align.max(1)).max(1)).min((n >> 12).max(1));
        let width = n / parts;
        self.run(|| {
            a.par_chunks_mut(width).enumerate().for_each(|(k, part)| {
                let r = k / parts;
                f(r, basis.global_index(r, q_total), (k % parts) * width, part)
            })
        });
    }

    fn ntt_row(&self, g: usize, row: &mut [u64]) {
        match &self.engine {
            NttEngine::Reference => self.params.ntt_table(g).forward(row),
            NttEngine::Tfhe(plans) => plans[g].fwd(row),
        }
    }

    fn intt_row(&self, g: usize, row: &mut [u64]) {
        match &self.engine {
            NttEngine::Reference => self.params.ntt_table(g).inverse(row),
            NttEngine::Tfhe(plans) => {
                plans[g].inv(row);
                plans[g].normalize(row);
            }
        }
    }

    fn auto_map(&self, g: u64) -> Arc<Vec<u32>> {
        let two_n = 2 * self.n() as u64;
        let g = g % two_n;
        if let Some(m) = lock(&self.auto_maps).get(&g) {
            return m.clone();
        }
        let m = Arc::new(automorphism_ntt_map(self.params.log_n(), g));
        lock(&self.auto_maps).insert(g, m.clone());
        m
    }

    fn decompose_plan(&self, level: usize, j: usize) -> Arc<BasisConverter> {
        if let Some(p) = lock(&self.decompose_plans).get(&(level, j)) {
            return p.clone();
        }
        let alpha = self.params.alpha();
        let (s, e) = (j * alpha, ((j + 1) * alpha).min(level + 1));
        let src = &self.moduli[s..e];
        let dst: Vec<Modulus> = (0..=level)
            .filter(|i| !(s..e).contains(i))
            .map(|i| self.moduli[i])
            .chain(
                self.params.p()[..self.params.special_at(level)]
                    .iter()
                    .copied(),
            )
            .collect();
        let p = Arc::new(BasisConverter::new(src, &dst));
        lock(&self.decompose_plans).insert((level, j), p.clone());
        p
    }

    fn div_plan(&self, kind: DivKind, level: usize) -> Arc<DivRoundPlan> {
        if let Some(p) = lock(&self.div_plans).get(&(kind, level)) {
            return p.clone();
        }
        let p = Arc::new(match kind {
            DivKind::Rescale => {
                DivRoundPlan::new(&self.moduli[..level], &self.moduli[level..=level])
            }
            DivKind::ModDown => DivRoundPlan::new(
                &self.moduli[..=level],
                &self.params.p()[..self.params.special_at(level)],
            ),
            DivKind::ModDownP0 => DivRoundPlan::new(&self.moduli[..=level], &self.params.p()[..1]),
        });
        lock(&self.div_plans).insert((kind, level), p.clone());
        p
    }

    /// Fast basis conversion of `src` rows (coefficient domain, primes `conv.src`) into `out`
    /// rows (primes `conv.dst`). `out_rows[t]` is the output row for destination `t`.
    ///
    /// Cache-blocked: for each block of coefficients the source terms
    /// `[x_i · (B/b_i)^{-1}]_{b_i}` are computed once into an L1-resident buffer, then every
    /// destination row of the block is their sum of products with the constants `(B/b_i) mod t`:
    /// from three source primes on, summed exactly in u128 (one multiplication per term) and
    /// reduced once per word (Barrett); below that, Shoup products with lazy reduction. With a pool, the
    /// coefficient range is split between threads.
    fn base_convert(&self, conv: &BasisConverter, src: &[&[u64]], out_rows: Vec<&mut [u64]>) {
        const BLK: usize = 512;
        let n = self.n();
        let k = conv.src.len();
        let dsts = conv.dst.len();
        // The constant matrix, row-major [t][i], and its Shoup companions. Every prime is below
        // 2^61, so a term is below 2^122 and fewer than 64 terms cannot overflow the u128 sum.
        assert!(k < 64, "basis conversion from {k} primes");
        let w: Vec<u64> = (0..dsts)
            .flat_map(|j| conv.src_hat_mod_dst[j].iter().copied())
            .collect();
        let ws: Vec<u64> = (0..dsts * k).map(|x| conv.dst[x / k].shoup(w[x])).collect();
        let (w, ws) = (&w, &ws);
        // A u128 sum costs one multiplication per term plus a Barrett reduction (about five) per
        // word; a Shoup product costs three per term. The sum wins from three terms on.
        let wide = k >= 3;
        // Per destination: whether the worst-case sum, Σ_i (q_i - 1)·(t - 1), stays in the
        // narrow reduction's domain.
        let narrow: Vec<bool> = conv
            .dst
            .iter()
            .map(|t| {
                let worst = conv.src.iter().fold(0u128, |s, q| {
                    s.saturating_add((q.value() - 1) as u128 * (t.value() - 1) as u128)
                });
                worst < t.narrow_limit()
            })
            .collect();
        let narrow = &narrow;
        // From one prime (a level-0 ModUp, the top level's last digit, a rescale, the ModDown by
        // `p_0`), `q̂ = 1`: both constants are 1 and every output word is the source word reduced
        // mod the destination, with no products. Source words are reduced (below their prime:
        // every caller converts the output of an inverse NTT), so a smaller source prime is a copy.
        let single = k == 1 && conv.src_hat_inv[0] == 1 && w.iter().all(|&x| x == 1);
        let work = |c0: usize, outs: Vec<&mut [u64]>| {
            let len = outs.first().map_or(0, |o| o.len());
            if len == 0 {
                return;
            }
            let mut outs = outs;
            if single {
                let s = &src[0][c0..c0 + len];
                for (j, out) in outs.iter_mut().enumerate() {
                    let t = &conv.dst[j];
                    if conv.src[0].value() <= t.value() {
                        out.copy_from_slice(s);
                    } else {
                        for (o, &x) in out.iter_mut().zip(s) {
                            *o = t.reduce(x);
                        }
                    }
                }
                return;
            }
            let mut tmp = vec![0u64; k * BLK];
            let mut b = 0;
            while b < len {
                let e = (b + BLK).min(len);
                let m = e - b;
                for i in 0..k {
                    let (q, hi, his) =
                        (&conv.src[i], conv.src_hat_inv[i], conv.src_hat_inv_shoup[i]);
                    let s = &src[i][c0 + b..c0 + e];
                    for (t, &x) in tmp[i * BLK..i * BLK + m].iter_mut().zip(s) {
                        *t = q.mul_shoup(x, hi, his);
                    }
                }
                if !wide {
                    // Shoup products with lazy reduction (partial sums stay below 2t).
                    for (j, out) in outs.iter_mut().enumerate() {
                        let t = &conv.dst[j];
                        let (tv, two_t) = (t.value(), 2 * t.value());
                        let (wj, wsj) = (&w[j * k..(j + 1) * k], &ws[j * k..(j + 1) * k]);
                        let o = &mut out[b..e];
                        for (oc, &x) in o.iter_mut().zip(&tmp[..m]) {
                            *oc = t.mul_shoup_lazy(x, wj[0], wsj[0]);
                        }
                        for i in 1..k {
                            let (wi, wsi) = (wj[i], wsj[i]);
                            for (oc, &x) in o.iter_mut().zip(&tmp[i * BLK..i * BLK + m]) {
                                *oc = csub(*oc + t.mul_shoup_lazy(x, wi, wsi), two_t);
                            }
                        }
                        for oc in o.iter_mut() {
                            *oc = csub(*oc, tv);
                        }
                    }
                    b = e;
                    continue;
                }
                // One 64×64 → 128 product per term, summed exactly, and one Barrett reduction
                // per output word.
                for (j, out) in outs.iter_mut().enumerate() {
                    let (t, narrow) = (&conv.dst[j], narrow[j]);
                    let wj = &w[j * k..(j + 1) * k];
                    let o = &mut out[b..e];
                    let mut acc = [0u128; BLK];
                    let acc = &mut acc[..m];
                    for (a, &x) in acc.iter_mut().zip(&tmp[..m]) {
                        *a = x as u128 * wj[0] as u128;
                    }
                    for (i, &wi) in wj.iter().enumerate().skip(1) {
                        for (a, &x) in acc.iter_mut().zip(&tmp[i * BLK..i * BLK + m]) {
                            *a += x as u128 * wi as u128;
                        }
                    }
                    reduce_sums(t, narrow, acc, o);
                }
                b = e;
            }
        };
        let chunks = if self.pool.is_some() {
            (self.threads * 2).min(n / BLK).max(1)
        } else {
            1
        };
        if chunks == 1 {
            work(0, out_rows);
            return;
        }
        let csize = n.div_ceil(chunks);
        let mut per: Vec<Vec<&mut [u64]>> = (0..chunks).map(|_| Vec::with_capacity(dsts)).collect();
        for row in out_rows {
            for (ci, piece) in row.chunks_mut(csize).enumerate() {
                per[ci].push(piece);
            }
        }
        self.run(|| {
            per.into_par_iter()
                .enumerate()
                .for_each(|(ci, outs)| work(ci * csize, outs))
        });
    }

    /// `out = round(x / D)` where `x`'s first `keep` rows are kept and the next `drop` rows
    /// (global prime indices `drop_g`) are divided out. `x` and `out` are in the NTT domain.
    fn div_round(
        &self,
        x: &[u64],
        keep: usize,
        drop_g: &[usize],
        plan: &DivRoundPlan,
        out: &mut [u64],
    ) {
        let n = self.n();
        let d = drop_g.len();
        // Dropped rows to the coefficient domain, plus h.
        let mut dropped = x[keep * n..(keep + d) * n].to_vec();
        for (j, row) in dropped.chunks_mut(n).enumerate() {
            self.intt_row(drop_g[j], row);
            let m = &plan.conv.src[j];
            let h = plan.half_mod_drop[j];
            for v in row.iter_mut() {
                *v = m.add(*v, h);
            }
        }
        let src: Vec<&[u64]> = dropped.chunks(n).collect();
        let out = &mut out[..keep * n];
        self.base_convert(&plan.conv, &src, out.chunks_mut(n).collect());
        // out_i = (x_i - NTT(conv_i - h_i)) · D^{-1}; h was added to every coefficient, so it
        // is removed in the coefficient domain, before the NTT.
        self.rows_mut(out, Basis::q(keep), |r, g, row| {
            let m = &self.moduli[g];
            let h = plan.half_mod_keep[r];
            row.iter_mut().for_each(|o| *o = m.sub(*o, h));
            self.ntt_row(g, row);
            let (w, ws) = (plan.d_inv_mod_keep[r], plan.d_inv_mod_keep_shoup[r]);
            for (o, &xi) in row.iter_mut().zip(&x[r * n..(r + 1) * n]) {
                *o = m.mul_shoup(m.sub(xi, *o), w, ws);
            }
        });
    }

    /// A new buffer `op(a, b)` element-wise, built without a
    /// zero-fill pass: on the pool when it pays ([`CpuBackend::parallel_elementwise`]), and with
    /// streaming stores ([`simd::stream`]) when the output is far larger than the caches.
    fn zip_new(&self, a: &[u64], b: &[u64], basis: Basis, op: Lin) -> Vec<u64> {
        // Outputs from 8 MiB on (a polynomial of 16 rows at N = 2^16) are streamed: with their
        // two operands they fill a 32 MB L3 (24 MiB and more), so the next operation would read
        // them from memory anyway. Smaller outputs stay cached for the operation that reads them.
        const STREAM_MIN_WORDS: usize = 1 << 20;
        let n = self.n();
        let rows = basis.rows();
        let row = |r: usize| {
            let m = &self.moduli[basis.global_index(r, self.q_total)];
            let (ar, br) = (&a[r * n..(r + 1) * n], &b[r * n..(r + 1) * n]);
            ar.iter().zip(br).map(move |(&x, &y)| op.apply(m, x, y))
        };
        let len = rows * n;
        let stream = self.wide.filter(|_| len >= STREAM_MIN_WORDS);
        let parallel = self.parallel_elementwise(basis);
        if parallel || stream.is_some() {
            // Written in place, into the buffer's uninitialized capacity: zeroing it first
            // (serially, or even on the pool) is a third more traffic for this memory-bound pass,
            // and per-row vectors would need a concatenating copy. A top-level addition at
            // N = 2^16 on two threads, same session: 1.34–1.67 ms with the serial zero-fill,
            // 1.06–1.22 with the pool's, 0.59–1.2 without (the machine drifts), 0.67 streamed
            // (0.9 not, in that run).
            // Rows cut in parts, so that the threads' shares are even (17 rows on two threads).
            let parts = (n / 4096).clamp(1, 8);
            let part = n / parts;
            let mut out: Vec<u64> = Vec::with_capacity(len);
            let each = |(i, o): (usize, &mut [core::mem::MaybeUninit<u64>])| {
                let (r, c) = (i / parts, (i % parts) * part);
                let m = &self.moduli[basis.global_index(r, self.q_total)];
                let at = r * n + c;
                let (ap, bp) = (&a[at..at + part], &b[at..at + part]);
                match stream {
                    Some(w) => simd::stream(w, op, m, ap, bp, o),
                    None => self.wide(
                        #[inline(always)]
                        || {
                            for ((o, &x), &y) in o.iter_mut().zip(ap).zip(bp) {
                                o.write(op.apply(m, x, y));
                            }
                        },
                    ),
                }
            };
            let spare = &mut out.spare_capacity_mut()[..len];
            if parallel {
                self.run(|| spare.par_chunks_mut(part).enumerate().for_each(each));
            } else {
                spare.chunks_mut(part).enumerate().for_each(each);
            }
            #[allow(unsafe_code)]
            // SAFETY: the loop above wrote every one of the `len` words (see `set_len_written`).
            unsafe {
                set_len_written(&mut out, len)
            };
            out
        } else {
            let mut out = Vec::with_capacity(rows * n);
            self.wide(
                #[inline(always)]
                || {
                    for r in 0..rows {
                        out.extend(row(r));
                    }
                },
            );
            out
        }
    }

    /// `f(a, b)` into `a`, row by row. `linear` marks an addition-like `f` (no product):
    /// those loops are compiled for AVX-512 ([`Self::wide`]). Loops of 64×64 → 128-bit products
    /// gained nothing measurable under it (AVX-512 has no 64-bit high product; ct×ct + relin +
    /// rescale 128 against 130 ms, basis conversion and ModDown slightly slower), so products stay
    /// on the baseline's code.
    fn zip_rows(
        &self,
        a: &mut [u64],
        b: &[u64],
        basis: Basis,
        linear: bool,
        f: impl Fn(&Modulus, &mut u64, u64) + Sync + Send,
    ) {
        let n = self.n();
        let each = |r: usize, g: usize, row: &mut [u64]| {
            let m = &self.moduli[g];
            let b = &b[r * n..(r + 1) * n];
            if linear {
                self.wide(
                    #[inline(always)]
                    || {
                        for (x, &y) in row.iter_mut().zip(b) {
                            f(m, x, y);
                        }
                    },
                )
            } else {
                for (x, &y) in row.iter_mut().zip(b) {
                    f(m, x, y);
                }
            }
        };
        if self.parallel_elementwise(basis) {
            self.rows_mut(a, basis, each);
        } else {
            for (r, row) in a[..basis.rows() * n].chunks_mut(n).enumerate() {
                each(r, basis.global_index(r, self.q_total), row);
            }
        }
    }

    /// Runs `f` compiled for AVX-512 where the fast path has it (the loops inside vectorize to
    /// 512-bit lanes; the arithmetic, and so every word, is the same as the scalar code's).
    #[inline(always)]
    fn wide<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.wide {
            Some(w) => simd::vectorize(w, f),
            None => f(),
        }
    }

    /// Whether an element-wise pass over `basis` is worth the pool: below `PAR_MIN_WORDS` words
    /// (1 MiB) the hand-off costs more than the second thread saves (at N = 2^16 one row is
    /// 64 Ki words: a level-0 addition ran 1.8× slower on two threads than on one).
    fn parallel_elementwise(&self, basis: Basis) -> bool {
        const PAR_MIN_WORDS: usize = 1 << 17;
        self.pool.is_some() && basis.rows() > 1 && basis.rows() * self.n() >= PAR_MIN_WORDS
    }
}

/// Sets the length of `v` to `len` after its first `len` slots of spare capacity were all
/// written (through `MaybeUninit::write`).
///
/// # Safety
///
/// Every one of the slots `0..len` of `v`'s buffer must have been initialized. Its one caller is
/// [`CpuBackend::zip_new`], whose `chunks_mut(part)` / `par_chunks_mut(part)` over
/// `spare_capacity_mut()[..len]` (`part` divides `n`, which divides `len`) visits every chunk once
/// and writes each of its words (the zipped input slices have the chunk's length, and slicing them
/// out of range panics before anything is written; [`simd::stream`] writes all of its `out`); a
/// panic inside the loop unwinds before the call, so no uninitialized word is ever exposed, and
/// `u64` has no destructor to run.
#[allow(unsafe_code)]
unsafe fn set_len_written(v: &mut Vec<u64>, len: usize) {
    assert!(len <= v.capacity());
    // SAFETY: `len ≤ capacity` (checked); slots `0..len` are initialized (the caller's contract).
    unsafe { v.set_len(len) }
}

/// `out[i] = sums[i] mod m`: by [`Modulus::reduce_narrow`] when `narrow` (the caller's worst-case
/// sum is below [`Modulus::narrow_limit`]), else by the general [`Modulus::reduce_u128`]. The
/// choice is made once per block, outside the loop.
#[inline(always)]
fn reduce_sums(m: &Modulus, narrow: bool, sums: &[u128], out: &mut [u64]) {
    if narrow {
        for (o, &x) in out.iter_mut().zip(sums) {
            *o = m.reduce_narrow(x);
        }
    } else {
        for (o, &x) in out.iter_mut().zip(sums) {
            *o = m.reduce_u128(x);
        }
    }
}

/// Where a key inner product reads the keys' `a_j`: held in memory, or regenerated from the
/// seed (a lean key).
#[derive(Clone, Copy)]
enum KeyA<'a> {
    Held(&'a [Vec<u64>]),
    Seeded(&'a [u8; 32]),
}

impl PolyBackend for CpuBackend {
    type Buffer = Vec<u64>;

    fn name(&self) -> String {
        match (&self.engine, self.threads) {
            (NttEngine::Reference, _) => "cpu-scalar".into(),
            (NttEngine::Tfhe(_), t) => format!("cpu-fast/{t}t"),
        }
    }

    fn params(&self) -> &CkksParams {
        &self.params
    }

    fn alloc(&self, rows: usize) -> Vec<u64> {
        let len = rows * self.n();
        if self.pool.is_some() && rows > 1 {
            // Zeroed by the pool's threads: the allocator reuses freed pages, whose zeroing was
            // a serial memset on the calling thread.
            let mut v = Vec::with_capacity(len);
            self.run(|| v.par_extend(rayon::iter::repeat_n(0u64, len)));
            v
        } else {
            vec![0u64; len]
        }
    }

    fn upload_small(&self, v: &[i64], basis: Basis) -> Vec<u64> {
        // Reduced straight into the backend's buffer, row by row on the pool if any (no host
        // staging copy to wipe).
        let mut out = vec![0u64; basis.rows() * self.n()];
        self.rows_mut(&mut out, basis, |_, g, row| {
            let m = &self.moduli[g];
            for (o, &x) in row.iter_mut().zip(v) {
                *o = m.from_i64(x);
            }
        });
        out
    }

    fn expand_uniform(&self, seed: &[u8; 32], stream: u64, basis: Basis) -> Vec<u64> {
        // Rows are independent streams of the seed: expanded in place, on the pool if any.
        let mut out = vec![0u64; basis.rows() * self.n()];
        self.rows_mut(&mut out, basis, |_, g, row| {
            veil_core::math::sampling::expand_uniform_row(seed, stream, g, &self.moduli[g], row)
        });
        out
    }

    fn buffer_rows(&self, buf: &Vec<u64>) -> usize {
        buf.len() / self.n()
    }

    fn upload(&self, data: &[u64]) -> Vec<u64> {
        data.to_vec()
    }

    fn download(&self, buf: &Vec<u64>, out: &mut [u64]) -> veil_core::Result<()> {
        // Host memory: a read cannot fault. A buffer shorter than asked is a caller's shape error.
        let src = buf.get(..out.len()).ok_or(veil_core::Error::Shape {
            what: "download length",
            expected: out.len(),
            found: buf.len(),
        })?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn copy_rows(&self, src: &Vec<u64>, src_basis: Basis, dst: &mut Vec<u64>, dst_basis: Basis) {
        let n = self.n();
        for r in 0..dst_basis.rows() {
            let g = dst_basis.global_index(r, self.q_total);
            let s = src_basis
                .row_of(g, self.q_total)
                .expect("copy_rows: destination basis must be a subset");
            dst[r * n..(r + 1) * n].copy_from_slice(&src[s * n..(s + 1) * n]);
        }
    }

    fn zeroize(&self, buf: &mut Vec<u64>) {
        zeroize::Zeroize::zeroize(buf.as_mut_slice());
    }

    fn ntt(&self, a: &mut Vec<u64>, basis: Basis) {
        self.rows_mut(a, basis, |_, g, row| self.ntt_row(g, row));
    }

    fn ntt_subring(&self, coeffs: &[u64], log_gap: u32, basis: Basis) -> Vec<u64> {
        // Each row is expanded into a scratch row that stays in cache, transformed, and sampled
        // every g-th word: the full NTT row never reaches memory.
        let n = self.n();
        let (g, w) = (1usize << log_gap, n >> log_gap);
        assert!(
            coeffs.len() >= basis.rows() * w,
            "ntt_subring: too few coefficients"
        );
        let q_total = self.q_total;
        let mut out = vec![0u64; basis.rows() * w];
        let row = |r: usize, dst: &mut [u64]| {
            let mut scratch = vec![0u64; n];
            for (k, &c) in coeffs[r * w..(r + 1) * w].iter().enumerate() {
                scratch[k * g] = c;
            }
            self.ntt_row(basis.global_index(r, q_total), &mut scratch);
            for (d, &v) in dst.iter_mut().zip(scratch.iter().step_by(g)) {
                *d = v;
            }
        };
        if self.pool.is_some() {
            self.run(|| {
                out.par_chunks_mut(w)
                    .enumerate()
                    .for_each(|(r, dst)| row(r, dst))
            });
        } else {
            out.chunks_mut(w)
                .enumerate()
                .for_each(|(r, dst)| row(r, dst));
        }
        out
    }

    fn native_subring_sums(&self) -> bool {
        true
    }

    fn mul_sum_subring(
        &self,
        xs: &[&Vec<u64>],
        terms: &[(usize, usize, &[u64])],
        log_gap: u32,
        outs: &mut [Vec<u64>],
        basis: Basis,
    ) {
        // Blocks of 256 coefficients: for each block, every output's terms are summed in u128
        // (reduced every 64 terms), so the inputs' blocks are read from cache by all outputs
        // and each compact plaintext word serves its g positions.
        const BLK: usize = 256;
        const LAZY: usize = 64;
        let n = self.n();
        let rows = basis.rows();
        let w = n >> log_gap;
        let run = (1usize << log_gap).min(BLK);
        let q_total = self.q_total;
        let mut by_out: Vec<Vec<(usize, &[u64])>> = vec![Vec::new(); outs.len()];
        for &(o, x, words) in terms {
            assert!(
                o < outs.len() && x < xs.len() && words.len() >= rows * w,
                "mul_sum_subring: a term out of range"
            );
            by_out[o].push((x, words));
        }
        // Row parts, so that a few rows still spread evenly over the pool's threads.
        let parts = if self.pool.is_some() {
            (8 * self.threads)
                .div_ceil(rows.max(1))
                .next_power_of_two()
                .min((n >> 12).max(1))
        } else {
            1
        };
        let width = n / parts;
        let mut tasks: Vec<Vec<&mut [u64]>> = (0..rows * parts)
            .map(|_| Vec::with_capacity(outs.len()))
            .collect();
        for out in outs.iter_mut() {
            for (k, part) in out[..rows * n].chunks_mut(width).enumerate() {
                tasks[k].push(part);
            }
        }
        let work = |k: usize, mut slices: Vec<&mut [u64]>| {
            let (r, start) = (k / parts, (k % parts) * width);
            let m = &self.moduli[basis.global_index(r, q_total)];
            let vector = self.ifma.filter(|_| m.value() < 1 << 52);
            let mut acc = [0u128; BLK];
            let (mut lo, mut hi) = ([0u64; BLK], [0u64; BLK]);
            let mut b = 0;
            while b < width {
                let len = BLK.min(width - b);
                let col = start + b;
                for (list, dst) in by_out.iter().zip(slices.iter_mut()) {
                    if let Some(simd) = vector.filter(|_| list.len() <= ifma::MAX_TERMS) {
                        lo[..len].fill(0);
                        hi[..len].fill(0);
                        for &(x, words) in list {
                            let xr = &xs[x][r * n + col..r * n + col + len];
                            let wr = &words[r * w..(r + 1) * w];
                            ifma::accumulate(simd, &mut lo, &mut hi, xr, wr, col, log_gap);
                        }
                        for ((d, &l), &h) in dst[b..b + len].iter_mut().zip(&lo).zip(&hi) {
                            *d = m.reduce_u128(((h as u128) << 52) + l as u128);
                        }
                        continue;
                    }
                    let s = &mut acc[..len];
                    s.fill(0);
                    for (t, &(x, words)) in list.iter().enumerate() {
                        if t > 0 && t % LAZY == 0 {
                            s.iter_mut().for_each(|v| *v = m.reduce_u128(*v) as u128);
                        }
                        let xr = &xs[x][r * n + col..r * n + col + len];
                        let wr = &words[r * w..(r + 1) * w];
                        for (i, (sc, xc)) in s.chunks_mut(run).zip(xr.chunks(run)).enumerate() {
                            let wv = wr[(col + i * run) >> log_gap] as u128;
                            for (v, &xv) in sc.iter_mut().zip(xc) {
                                *v += xv as u128 * wv;
                            }
                        }
                    }
                    for (d, v) in dst[b..b + len].iter_mut().zip(s.iter()) {
                        *d = m.reduce_u128(*v);
                    }
                }
                b += len;
            }
        };
        if self.pool.is_some() {
            self.run(|| {
                tasks
                    .into_par_iter()
                    .enumerate()
                    .for_each(|(k, slices)| work(k, slices))
            });
        } else {
            tasks
                .into_iter()
                .enumerate()
                .for_each(|(k, slices)| work(k, slices));
        }
    }

    fn intt(&self, a: &mut Vec<u64>, basis: Basis) {
        self.rows_mut(a, basis, |_, g, row| self.intt_row(g, row));
    }

    fn add_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: Basis) {
        self.zip_rows(a, b, basis, true, |m, x, y| *x = m.add(*x, y));
    }

    fn sub_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: Basis) {
        self.zip_rows(a, b, basis, true, |m, x, y| *x = m.sub(*x, y));
    }

    fn add_new(&self, a: &Vec<u64>, b: &Vec<u64>, basis: Basis) -> Vec<u64> {
        self.zip_new(a, b, basis, Lin::Add)
    }

    fn sub_new(&self, a: &Vec<u64>, b: &Vec<u64>, basis: Basis) -> Vec<u64> {
        self.zip_new(a, b, basis, Lin::Sub)
    }

    fn neg_assign(&self, a: &mut Vec<u64>, basis: Basis) {
        self.rows_mut(a, basis, |_, g, row| {
            let m = &self.moduli[g];
            row.iter_mut().for_each(|x| *x = m.neg(*x));
        });
    }

    fn mul_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: Basis) {
        self.zip_rows(a, b, basis, false, |m, x, y| *x = m.mul(*x, y));
    }

    fn mul(&self, a: &Vec<u64>, b: &Vec<u64>, out: &mut Vec<u64>, basis: Basis) {
        let n = self.n();
        self.rows_mut(out, basis, |r, g, row| {
            let m = &self.moduli[g];
            let (ar, br) = (&a[r * n..(r + 1) * n], &b[r * n..(r + 1) * n]);
            for ((o, &x), &y) in row.iter_mut().zip(ar).zip(br) {
                *o = m.mul(x, y);
            }
        });
    }

    fn mul_add_assign(&self, acc: &mut Vec<u64>, a: &Vec<u64>, b: &Vec<u64>, basis: Basis) {
        let n = self.n();
        self.rows_mut(acc, basis, |r, g, row| {
            let m = &self.moduli[g];
            let (ar, br) = (&a[r * n..(r + 1) * n], &b[r * n..(r + 1) * n]);
            for ((o, &x), &y) in row.iter_mut().zip(ar).zip(br) {
                *o = m.mul_add(*o, x, y);
            }
        });
    }

    fn mul_scalar_assign(&self, a: &mut Vec<u64>, scalars: &[u64], basis: Basis) {
        self.rows_mut(a, basis, |r, g, row| {
            let m = &self.moduli[g];
            let (w, ws) = (scalars[r], m.shoup(scalars[r]));
            row.iter_mut().for_each(|x| *x = m.mul_shoup(*x, w, ws));
        });
    }

    fn mul_sum(&self, terms: &[(&Vec<u64>, &Vec<u64>)], out: &mut Vec<u64>, basis: Basis) {
        let n = self.n();
        self.lazy_sums(out, basis, terms.len(), |t, r, b, s| {
            let (x, y) = terms[t];
            let (xs, ys) = (&x[r * n + b..], &y[r * n + b..]);
            for (c, v) in s.iter_mut().enumerate() {
                *v += xs[c] as u128 * ys[c] as u128;
            }
        });
    }

    fn mul_sum_compact(
        &self,
        terms: &[(&Vec<u64>, &[u64])],
        width: usize,
        classes: &[u32],
        out: &mut Vec<u64>,
        basis: Basis,
    ) {
        // Each plaintext word is gathered from its compact row (which stays in cache).
        let n = self.n();
        self.lazy_sums(out, basis, terms.len(), |t, r, b, s| {
            let (x, y) = terms[t];
            let (xs, ys, cls) = (
                &x[r * n + b..],
                &y[r * width..(r + 1) * width],
                &classes[b..],
            );
            for (c, v) in s.iter_mut().enumerate() {
                *v += xs[c] as u128 * ys[cls[c] as usize] as u128;
            }
        });
    }

    fn mul_scalar_add_assign(
        &self,
        acc: &mut Vec<u64>,
        a: &Vec<u64>,
        scalars: &[u64],
        basis: Basis,
    ) {
        let n = self.n();
        self.rows_mut(acc, basis, |r, g, row| {
            let m = &self.moduli[g];
            let (w, ws) = (scalars[r], m.shoup(scalars[r]));
            for (o, &x) in row.iter_mut().zip(&a[r * n..(r + 1) * n]) {
                *o = m.add(*o, m.mul_shoup(x, w, ws));
            }
        });
    }

    fn small_weight_gemm(
        &self,
        ins: &[&Vec<u64>],
        weights: &[i32],
        post: &[u64],
        outs: &mut [Vec<u64>],
        basis: Basis,
    ) {
        // Tiles of one row: every output's words of that tile, filled by one task that reads
        // the same tile of every input (disjoint writes, so the tasks run in parallel).
        let (n, rows) = (self.n(), basis.rows());
        if outs.is_empty() || rows == 0 {
            return;
        }
        assert_eq!(
            weights.len(),
            outs.len() * ins.len(),
            "small_weight_gemm: one weight per output and input"
        );
        assert!(
            n.is_multiple_of(gemm::TILE),
            "the ring degree is a power of two of at least 2^7"
        );
        let bound = 1i64 << veil_core::backend::SMALL_WEIGHT_BITS;
        if weights.iter().any(|&w| (w as i64).abs() > bound) {
            // Outside the lanes' bound: the definition, term by term (same words).
            let k = ins.len();
            for (i, out) in outs.iter_mut().enumerate() {
                self.rows_mut(out, basis, |r, g, row| {
                    let m = &self.moduli[g];
                    row.fill(0);
                    for (j, x) in ins.iter().enumerate() {
                        let w = m.from_i128(weights[i * k + j] as i128);
                        let ws = m.shoup(w);
                        for (o, &v) in row.iter_mut().zip(&x[r * n..(r + 1) * n]) {
                            *o = m.add(*o, m.mul_shoup(v, w, ws));
                        }
                    }
                    let ps = m.shoup(post[r]);
                    row.iter_mut()
                        .for_each(|o| *o = m.mul_shoup(*o, post[r], ps));
                });
            }
            return;
        }
        let tile = gemm::tile_words(ins.len());
        let per_row = n / tile;
        let wg = gemm::group_weights(weights, outs.len(), ins.len());
        let mut tiles: Vec<Vec<&mut [u64]>> = (0..rows * per_row)
            .map(|_| Vec::with_capacity(outs.len()))
            .collect();
        for out in outs.iter_mut() {
            let chunks = out[..rows * n]
                .chunks_mut(n)
                .flat_map(|row| row.chunks_mut(tile));
            for (t, ch) in chunks.enumerate() {
                tiles[t].push(ch);
            }
        }
        let arch = pulp::Arch::new();
        let q_total = self.q_total;
        let work = |(t, outs): (usize, Vec<&mut [u64]>)| {
            let (r, b) = (t / per_row, (t % per_row) * tile);
            let len = outs[0].len();
            let m = &self.moduli[basis.global_index(r, q_total)];
            let xs = ins.iter().map(|x| &x[r * n + b..r * n + b + len]).collect();
            arch.dispatch(gemm::Tile {
                xs,
                w: &wg,
                outs,
                m,
                post: (post[r], m.shoup(post[r])),
            });
        };
        if self.pool.is_some() {
            self.run(|| tiles.into_par_iter().enumerate().for_each(work));
        } else {
            tiles.into_iter().enumerate().for_each(work);
        }
    }

    fn add_scalar_assign(&self, a: &mut Vec<u64>, scalars: &[u64], basis: Basis) {
        self.rows_mut(a, basis, |r, g, row| {
            let m = &self.moduli[g];
            row.iter_mut().for_each(|x| *x = m.add(*x, scalars[r]));
        });
    }

    fn automorphism(&self, a: &Vec<u64>, g: u64, out: &mut Vec<u64>, basis: Basis, domain: Domain) {
        let n = self.n();
        match domain {
            Domain::Ntt => {
                let map = self.auto_map(g);
                self.rows_mut(out, basis, |r, _, row| {
                    let src = &a[r * n..(r + 1) * n];
                    for (o, &i) in row.iter_mut().zip(map.iter()) {
                        *o = src[i as usize];
                    }
                });
            }
            Domain::Coeff => {
                let two_n = 2 * n;
                let g = (g % two_n as u64) as usize;
                self.rows_mut(out, basis, |r, gi, row| {
                    let m = &self.moduli[gi];
                    let src = &a[r * n..(r + 1) * n];
                    for (i, &x) in src.iter().enumerate() {
                        let t = (i * g) % two_n;
                        if t < n {
                            row[t] = x;
                        } else {
                            row[t - n] = m.neg(x);
                        }
                    }
                });
            }
        }
    }

    fn decompose(&self, c: &Vec<u64>, level: usize, out: &mut [Vec<u64>]) {
        let n = self.n();
        let alpha = self.params.alpha();
        let k = self.params.special_at(level);
        let qb = Basis::q(level + 1);
        let mut coeff = c[..qb.rows() * n].to_vec();
        self.intt(&mut coeff, qb);
        let ext = Basis::qp(level + 1, k);
        for (j, d) in out
            .iter_mut()
            .enumerate()
            .take(self.params.digits_at(level))
        {
            let (s, e) = (j * alpha, ((j + 1) * alpha).min(level + 1));
            let plan = self.decompose_plan(level, j);
            let src: Vec<&[u64]> = (s..e).map(|i| &coeff[i * n..(i + 1) * n]).collect();
            // Digit rows are the input's own NTT rows.
            d[s * n..e * n].copy_from_slice(&c[s * n..e * n]);
            {
                let mut outs: Vec<&mut [u64]> = Vec::with_capacity(ext.rows());
                let (head, rest) = d[..ext.rows() * n].split_at_mut(s * n);
                let (_, tail) = rest.split_at_mut((e - s) * n);
                outs.extend(head.chunks_mut(n));
                outs.extend(tail.chunks_mut(n));
                self.base_convert(&plan, &src, outs);
            }
            // NTT every converted row.
            let q_total = self.q_total;
            let body = |(r, row): (usize, &mut [u64])| {
                if !(s..e).contains(&r) {
                    self.ntt_row(ext.global_index(r, q_total), row);
                }
            };
            if self.pool.is_some() {
                self.run(|| {
                    d[..ext.rows() * n]
                        .par_chunks_mut(n)
                        .enumerate()
                        .for_each(body)
                });
            } else {
                d[..ext.rows() * n].chunks_mut(n).enumerate().for_each(body);
            }
        }
    }

    fn key_inner_product(
        &self,
        digits: &[Vec<u64>],
        key_b: &[Vec<u64>],
        key_a: &[Vec<u64>],
        level: usize,
        acc0: &mut Vec<u64>,
        acc1: &mut Vec<u64>,
    ) {
        self.inner_product(digits, key_b, KeyA::Held(key_a), level, acc0, acc1);
    }

    fn key_inner_product_seeded(
        &self,
        digits: &[Vec<u64>],
        key_b: &[Vec<u64>],
        seed: &[u8; 32],
        level: usize,
        acc0: &mut Vec<u64>,
        acc1: &mut Vec<u64>,
    ) {
        self.inner_product(digits, key_b, KeyA::Seeded(seed), level, acc0, acc1);
    }

    fn mod_down(&self, x: &Vec<u64>, level: usize, out: &mut Vec<u64>) {
        let plan = self.div_plan(DivKind::ModDown, level);
        let drop_g: Vec<usize> = (0..self.params.special_at(level))
            .map(|j| self.q_total + j)
            .collect();
        self.div_round(x, level + 1, &drop_g, &plan, out);
    }

    fn mod_down_pair(&self, x: [&Vec<u64>; 2], level: usize, out: [&mut Vec<u64>; 2]) {
        let [o0, o1] = out;
        match &self.pool {
            // Side by side, each on the pool (whose row loops then share its threads).
            Some(p) => {
                p.install(|| {
                    rayon::join(
                        || self.mod_down(x[0], level, o0),
                        || self.mod_down(x[1], level, o1),
                    )
                });
            }
            None => {
                self.mod_down(x[0], level, o0);
                self.mod_down(x[1], level, o1);
            }
        }
    }

    fn rescale(&self, x: &Vec<u64>, level: usize, out: &mut Vec<u64>) {
        assert!(level >= 1, "rescale needs a prime to drop");
        let plan = self.div_plan(DivKind::Rescale, level);
        self.div_round(x, level, &[level], &plan, out);
    }

    fn mod_down_p0(&self, x: &Vec<u64>, level: usize, out: &mut Vec<u64>) {
        let plan = self.div_plan(DivKind::ModDownP0, level);
        self.div_round(x, level + 1, &[self.q_total], &plan, out);
    }
}
