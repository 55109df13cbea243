//! `PolyBackend`: the only door to polynomial compute.
//!
//! A backend is built for one parameter set and owns device buffers. A buffer holds `rows × N`
//! words; row `r` of a polynomial over a [`Basis`] `{q, p}` is reduced modulo
//! `q_r` for `r < q` and modulo `p_{r-q}` for `q ≤ r < q + p` (the Q primes first, then the
//! special primes). Values are always fully reduced.
//!
//! Every operation is exact integer arithmetic whose result is defined by `core`: the canonical
//! NTT ([`crate::math::ntt`]), the basis-conversion and division plans ([`crate::math::rns`]), and
//! the automorphism index maps below. Backends must agree bit for bit; the CPU backend is the
//! oracle. Upload and download are the only host crossings.

pub mod counting;
pub use counting::{BackendCounts, CountingBackend};

use crate::params::CkksParams;
use alloc::vec::Vec;

/// The primes a polynomial's rows run over: `q_0..q_{q-1}` then `p_0..p_{p-1}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Basis {
    /// Number of leading Q primes.
    pub q: usize,
    /// Number of leading special primes.
    pub p: usize,
}

impl Basis {
    /// A basis of the first `q` ciphertext primes (a ciphertext at level `q - 1`).
    pub const fn q(q: usize) -> Self {
        Self { q, p: 0 }
    }
    /// The extended basis `Q_level ∪ P_level` used inside key switching (`p` special primes,
    /// `CkksParams::special_at(level)` of them in a key switch).
    pub const fn qp(q: usize, p: usize) -> Self {
        Self { q, p }
    }
    /// Number of rows.
    pub const fn rows(&self) -> usize {
        self.q + self.p
    }
    /// Global prime index of row `r` (Q primes are `0..=L`, special primes follow at `L + 1`).
    pub fn global_index(&self, r: usize, q_total: usize) -> usize {
        if r < self.q {
            r
        } else {
            q_total + (r - self.q)
        }
    }
    /// Row of global prime index `g` in this basis, if present.
    pub fn row_of(&self, g: usize, q_total: usize) -> Option<usize> {
        if g < q_total {
            (g < self.q).then_some(g)
        } else {
            let j = g - q_total;
            (j < self.p).then_some(self.q + j)
        }
    }
}

/// Whether a polynomial holds coefficients or NTT evaluations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Coefficient representation.
    Coeff,
    /// Evaluation representation in the canonical NTT order.
    Ntt,
}

/// The index map of the automorphism `X → X^g` (`g` odd) in the NTT domain:
/// `out[j] = in[map[j]]`. Slot `j` holds `a(ψ^{e_j})` with `e_j = 2·rev(j)+1`, so
/// `σ_g(a)(ψ^{e_j}) = a(ψ^{g·e_j})` is found at the slot whose exponent is `g·e_j mod 2N`.
pub fn automorphism_ntt_map(log_n: u32, g: u64) -> Vec<u32> {
    let n = 1usize << log_n;
    let two_n = 2 * n as u64;
    let mut map = alloc::vec![0u32; n];
    for (j, m) in map.iter_mut().enumerate() {
        let e = crate::math::NttTable::eval_exponent(log_n, j) as u64;
        let t = (e * (g % two_n)) % two_n; // odd
        let rev = ((t - 1) / 2) as usize;
        *m = crate::math::ntt::bit_rev(rev, log_n) as u32;
    }
    map
}

/// Expands a public seed into residues uniform mod each prime of `basis` (stream `stream`).
///
/// AES-256 keyed by `seed` in counter mode, with row `r`'s counter blocks tagged by `stream` and
/// `global_index(r)` ([`crate::math::sampling::expand_uniform_row`]), so a prefix of rows is the
/// same whatever the number of rows expanded (a key over `Q ∪ P` and a ciphertext over `Q_level`
/// share their leading rows). This is the
/// definition [`PolyBackend::expand_uniform`] must match, and its default.
pub fn expand_uniform(params: &CkksParams, seed: &[u8; 32], stream: u64, basis: Basis) -> Vec<u64> {
    let n = params.n();
    let q_total = params.q().len();
    let moduli: Vec<crate::math::Modulus> = params.all_moduli().copied().collect();
    let mut out = alloc::vec![0u64; basis.rows() * n];
    for (r, row) in out.chunks_mut(n).enumerate() {
        let g = basis.global_index(r, q_total);
        crate::math::sampling::expand_uniform_row(seed, stream, g, &moduli[g], row);
    }
    out
}

/// Bound on the integer weights of [`PolyBackend::small_weight_gemm`]: `|w| ≤ 2^20`. Small
/// weights let a backend accumulate many products in 64-bit lanes before one reduction.
pub const SMALL_WEIGHT_BITS: u32 = 20;

/// Polynomial compute over a parameter set's RNS primes.
///
/// Same-basis operations take one `basis`; every operand must have at least `basis.rows()`
/// rows laid out as that basis. The CKKS layer validates shapes once at its entry points;
/// backends may assume them.
pub trait PolyBackend: Send + Sync + Sized + 'static {
    /// An opaque device buffer of `rows × N` words.
    type Buffer: Send + Sync;

    /// A human-readable name (e.g. `cpu-scalar`, `cpu-fast/4 threads`).
    fn name(&self) -> alloc::string::String;
    /// The parameter set this backend was built for.
    fn params(&self) -> &CkksParams;

    // ---- memory -----------------------------------------------------------------------------
    /// A zeroed buffer of `rows × N` words.
    fn alloc(&self, rows: usize) -> Self::Buffer;
    /// Number of rows a buffer holds.
    fn buffer_rows(&self, buf: &Self::Buffer) -> usize;
    /// Copies host words into a buffer (`data.len() = rows × N`). A host crossing.
    fn upload(&self, data: &[u64]) -> Self::Buffer;
    /// Copies a buffer's first `out.len() / N` rows to the host. A host crossing.
    ///
    /// Fails with [`crate::error::Error::Device`] when the device faults (the read-back, or a launch
    /// queued before it, failed); `out` is then unspecified. The CPU backend never fails.
    fn download(&self, buf: &Self::Buffer, out: &mut [u64]) -> crate::error::Result<()>;
    /// Waits until every queued operation has finished, reporting a device fault as
    /// [`crate::error::Error::Device`]. Synchronous backends keep the default, which returns `Ok(())`.
    fn sync(&self) -> crate::error::Result<()> {
        Ok(())
    }
    /// Copies rows `src_basis ⊇ dst_basis` into `dst` (drops rows: level drop, extraction).
    fn copy_rows(
        &self,
        src: &Self::Buffer,
        src_basis: Basis,
        dst: &mut Self::Buffer,
        dst_basis: Basis,
    );
    /// Overwrites a buffer with zeros (used on secret-bearing buffers before they are dropped).
    fn zeroize(&self, buf: &mut Self::Buffer);
    /// Residues of small signed integers (`|v_i| < 2^62`, e.g. an error or a secret) over
    /// `basis`, coefficient domain: row `r` holds `v mod q_r`. The default reduces on the host
    /// (in a buffer wiped afterwards) and uploads; a backend may reduce on its own side.
    fn upload_small(&self, v: &[i64], basis: Basis) -> Self::Buffer {
        let p = self.params();
        let n = p.n();
        let q_total = p.q().len();
        let moduli: Vec<crate::math::Modulus> = p.all_moduli().copied().collect();
        let mut host = zeroize::Zeroizing::new(alloc::vec![0u64; basis.rows() * n]);
        for (r, row) in host.chunks_mut(n).enumerate() {
            let m = &moduli[basis.global_index(r, q_total)];
            for (o, &x) in row.iter_mut().zip(v) {
                *o = m.from_i64(x);
            }
        }
        self.upload(&host)
    }
    /// The public expansion of a seed over `basis`, the words of [`expand_uniform`] (the residues
    /// the serialized forms regenerate `a` and `c_1` from). The default expands on the host and
    /// uploads; a backend may expand its rows in parallel or on the device, with the same words.
    fn expand_uniform(&self, seed: &[u8; 32], stream: u64, basis: Basis) -> Self::Buffer {
        self.upload(&expand_uniform(self.params(), seed, stream, basis))
    }

    // ---- transforms -------------------------------------------------------------------------
    /// Forward canonical NTT of every row, batched over rows.
    fn ntt(&self, a: &mut Self::Buffer, basis: Basis);
    /// Inverse canonical NTT of every row.
    fn intt(&self, a: &mut Self::Buffer, basis: Basis);

    // ---- element-wise -----------------------------------------------------------------------
    /// `a += b`.
    fn add_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis);
    /// `a -= b`.
    fn sub_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis);
    /// A new buffer holding `a + b` over `basis` (one pass, no zero-fill).
    fn add_new(&self, a: &Self::Buffer, b: &Self::Buffer, basis: Basis) -> Self::Buffer;
    /// A new buffer holding `a - b` over `basis`.
    fn sub_new(&self, a: &Self::Buffer, b: &Self::Buffer, basis: Basis) -> Self::Buffer;
    /// `a = -a`.
    fn neg_assign(&self, a: &mut Self::Buffer, basis: Basis);
    /// `a = a ∘ b` (Hadamard product; both in the NTT domain for ring multiplication).
    fn mul_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis);
    /// `out = a ∘ b`.
    fn mul(&self, a: &Self::Buffer, b: &Self::Buffer, out: &mut Self::Buffer, basis: Basis);
    /// `acc += a ∘ b`.
    fn mul_add_assign(
        &self,
        acc: &mut Self::Buffer,
        a: &Self::Buffer,
        b: &Self::Buffer,
        basis: Basis,
    );
    /// `a = a · s_r` row by row, with one scalar `s_r < modulus_r` per row.
    fn mul_scalar_assign(&self, a: &mut Self::Buffer, scalars: &[u64], basis: Basis);
    /// `out = Σ_j a_j ∘ b_j` over `basis`, for a nonempty list of terms (a linear transform's
    /// baby-step sum). The default multiplies and accumulates term by term; a backend may
    /// accumulate lazily and reduce once per coefficient (same words).
    fn mul_sum(
        &self,
        terms: &[(&Self::Buffer, &Self::Buffer)],
        out: &mut Self::Buffer,
        basis: Basis,
    ) {
        if let Some(((a, b), rest)) = terms.split_first() {
            self.mul(a, b, out, basis);
            for (a, b) in rest {
                self.mul_add_assign(out, a, b, basis);
            }
        }
    }
    /// `out = Σ_j a_j ∘ b_j` where each `b_j` is compact and on the host: `width` words per row,
    /// word `classes[i]` of a row standing for position `i` (the NTT rows of a periodic
    /// plaintext, [`crate::ckks::PeriodicPlaintext`]). The default expands each `b_j`, uploads it
    /// and calls [`PolyBackend::mul_sum`]; a backend may gather from the compact rows instead.
    fn mul_sum_compact(
        &self,
        terms: &[(&Self::Buffer, &[u64])],
        width: usize,
        classes: &[u32],
        out: &mut Self::Buffer,
        basis: Basis,
    ) {
        let n = self.params().n();
        let full: Vec<Self::Buffer> = terms
            .iter()
            .map(|(_, b)| {
                let mut host = alloc::vec![0u64; basis.rows() * n];
                for (row, src) in host.chunks_mut(n).zip(b.chunks(width)) {
                    for (o, &c) in row.iter_mut().zip(classes) {
                        *o = src[c as usize];
                    }
                }
                self.upload(&host)
            })
            .collect();
        let pairs: Vec<(&Self::Buffer, &Self::Buffer)> =
            terms.iter().map(|(a, _)| *a).zip(&full).collect();
        self.mul_sum(&pairs, out, basis);
    }
    /// The NTT rows over `basis` of a polynomial in the subring `Z[X^g]`, `g = 2^log_gap`, given
    /// by its coefficients at positions `k·g` (`N/g` reduced words per row), kept compactly.
    /// The canonical NTT puts `a(ψ^{2·bitrev(j)+1})` at position `j`, which for such a polynomial
    /// depends only on `j >> log_gap`: each NTT row is constant on runs of `g` consecutive
    /// positions, and word `i` of a compact row stands for positions `i·g..(i+1)·g`. Returns
    /// `basis.rows() × N/g` words on the host. The default expands, transforms on the backend
    /// and keeps every `g`-th word.
    ///
    /// # Panics
    /// If `coeffs` holds fewer than `basis.rows() · N/g` words.
    fn ntt_subring(&self, coeffs: &[u64], log_gap: u32, basis: Basis) -> Vec<u64> {
        let n = self.params().n();
        let (g, w) = (1usize << log_gap, n >> log_gap);
        assert!(
            coeffs.len() >= basis.rows() * w,
            "ntt_subring: too few coefficients"
        );
        let mut host = alloc::vec![0u64; basis.rows() * n];
        for (row, src) in host.chunks_mut(n).zip(coeffs.chunks(w)) {
            for (k, &c) in src.iter().enumerate() {
                row[k * g] = c;
            }
        }
        let mut buf = self.upload(&host);
        self.ntt(&mut buf, basis);
        self.download(&buf, &mut host)
            .expect("a buffer of the backend's own making downloads");
        host.chunks(n)
            .flat_map(|row| row.iter().step_by(g).copied())
            .collect()
    }
    /// `outs[o] = Σ_{(o, x, w) ∈ terms} xs[x] ∘ expand(w)` over `basis`, where each `w` holds
    /// compact NTT rows of [`PolyBackend::ntt_subring`]'s layout (`N/g` words per row, word `i`
    /// for positions `i·g..(i+1)·g`): several plaintext sums over one set of ciphertext
    /// polynomials at once (the giant steps of a linear transform), so that a backend can read
    /// each `xs[x]` once for all of them. Every `outs[o]` holds at least `basis.rows()` rows and
    /// is overwritten; one without terms is zero. The default expands one term at a time and
    /// multiplies and accumulates it (same words).
    ///
    /// # Panics
    /// If a term names an output or input out of range, or its `w` is shorter than
    /// `basis.rows() · N/g` words.
    fn mul_sum_subring(
        &self,
        xs: &[&Self::Buffer],
        terms: &[(usize, usize, &[u64])],
        log_gap: u32,
        outs: &mut [Self::Buffer],
        basis: Basis,
    ) {
        let n = self.params().n();
        let w = n >> log_gap;
        let zero = alloc::vec![0u64; basis.rows()];
        let mut host = alloc::vec![0u64; basis.rows() * n];
        for out in outs.iter_mut() {
            self.mul_scalar_assign(out, &zero, basis);
        }
        for &(o, x, words) in terms {
            assert!(
                o < outs.len() && x < xs.len() && words.len() >= basis.rows() * w,
                "mul_sum_subring: a term out of range"
            );
            for (row, src) in host.chunks_mut(n).zip(words.chunks(w)) {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = src[j >> log_gap];
                }
            }
            let y = self.upload(&host);
            self.mul_add_assign(&mut outs[o], xs[x], &y, basis);
        }
    }
    /// Whether [`PolyBackend::mul_sum_subring`] is this backend's own pass (and so worth batching
    /// plaintexts for) rather than the default's expansion term by term. Executors batch sums
    /// over compact plaintexts only when it is; otherwise they keep full plaintexts where the
    /// backend holds them (a device cache).
    fn native_subring_sums(&self) -> bool {
        false
    }
    /// `acc += a · s_r` row by row, with one scalar `s_r < modulus_r` per row (a term of a linear
    /// combination). `a` may hold more rows than `basis` (its first ones are read). The default
    /// scales a copy of `a` and adds it; a backend may fuse the two passes (same words).
    fn mul_scalar_add_assign(
        &self,
        acc: &mut Self::Buffer,
        a: &Self::Buffer,
        scalars: &[u64],
        basis: Basis,
    ) {
        let mut t = self.alloc(basis.rows());
        self.copy_rows(a, basis, &mut t, basis);
        self.mul_scalar_assign(&mut t, scalars, basis);
        self.add_assign(acc, &t, basis);
    }
    /// `outs[i] = post_r · Σ_j w[i·k + j] · ins[j]` row by row over `basis` (`k = ins.len()`,
    /// `w` row-major with `outs.len()` rows): a matrix of small signed integer constants,
    /// `|w| ≤ 2^`[`SMALL_WEIGHT_BITS`], applied to a list of polynomials, then one scalar
    /// `post_r < modulus_r` per row. This is a CNN layer at full batch (one neuron per
    /// ciphertext). Every `ins[j]` may hold more rows than `basis` (its first ones are read); each
    /// `outs[i]` holds at least `basis.rows()` rows and is overwritten. The default accumulates
    /// term by term; a backend may tile it as a matrix product and reduce lazily (same words).
    fn small_weight_gemm(
        &self,
        ins: &[&Self::Buffer],
        weights: &[i32],
        post: &[u64],
        outs: &mut [Self::Buffer],
        basis: Basis,
    ) {
        let k = ins.len();
        let q_total = self.params().q().len();
        let mods: Vec<crate::math::modular::Modulus> = (0..basis.rows())
            .map(|r| {
                let g = basis.global_index(r, q_total);
                *self
                    .params()
                    .all_moduli()
                    .nth(g)
                    .expect("a basis row names a prime of the set")
            })
            .collect();
        let zero = alloc::vec![0u64; basis.rows()];
        for (i, out) in outs.iter_mut().enumerate() {
            self.mul_scalar_assign(out, &zero, basis);
            for (j, x) in ins.iter().enumerate() {
                let w = weights[i * k + j];
                if w != 0 {
                    let s: Vec<u64> = mods.iter().map(|m| m.from_i128(w as i128)).collect();
                    self.mul_scalar_add_assign(out, x, &s, basis);
                }
            }
            self.mul_scalar_assign(out, post, basis);
        }
    }
    /// `a = a + s_r` on every coefficient of row `r` (adds a constant polynomial in the NTT domain).
    fn add_scalar_assign(&self, a: &mut Self::Buffer, scalars: &[u64], basis: Basis);

    // ---- permutations -----------------------------------------------------------------------
    /// `out = σ_g(a)` for odd `g` (the Galois automorphism `X → X^g`).
    fn automorphism(
        &self,
        a: &Self::Buffer,
        g: u64,
        out: &mut Self::Buffer,
        basis: Basis,
        domain: Domain,
    );

    // ---- key switching ----------------------------------------------------------------------
    /// Gadget decomposition with ModUp (hybrid key switching, Han–Ki 2020).
    ///
    /// `c` is in the NTT domain over `Q_level = Basis::q(level + 1)`. For each digit
    /// `j < digits_at(level)` (primes `[j·α, min((j+1)·α, level+1))`), `out[j]` receives, over
    /// `Basis::qp(level + 1, kl)` in the NTT domain (`kl = params.special_at(level)`, the level's
    /// special primes), the rows of `c` on the digit's primes and the fast basis conversion
    /// ([`crate::math::rns::BasisConverter`]) of the digit's coefficients on every other prime.
    fn decompose(&self, c: &Self::Buffer, level: usize, out: &mut [Self::Buffer]);
    /// Inner product with a switching key: `acc0 = Σ_j d_j ∘ b_j`, `acc1 = Σ_j d_j ∘ a_j` over
    /// `Basis::qp(level + 1, params.special_at(level))`, reading the keys' rows (which span
    /// `Basis::qp(L + 1, k)`) by prime.
    fn key_inner_product(
        &self,
        digits: &[Self::Buffer],
        key_b: &[Self::Buffer],
        key_a: &[Self::Buffer],
        level: usize,
        acc0: &mut Self::Buffer,
        acc1: &mut Self::Buffer,
    );
    /// [`PolyBackend::key_inner_product`] for a lean key, whose `a_j` are the seed's expansion
    /// over `Basis::qp(L + 1, k)` on stream `j` ([`expand_uniform`]). The default expands the
    /// digits' `a_j` and calls `key_inner_product`; a backend may expand only the rows it reads.
    fn key_inner_product_seeded(
        &self,
        digits: &[Self::Buffer],
        key_b: &[Self::Buffer],
        seed: &[u8; 32],
        level: usize,
        acc0: &mut Self::Buffer,
        acc1: &mut Self::Buffer,
    ) {
        let p = self.params();
        let full = Basis::qp(p.max_level() + 1, p.p().len());
        let a: Vec<Self::Buffer> = (0..digits.len())
            .map(|j| self.expand_uniform(seed, j as u64, full))
            .collect();
        self.key_inner_product(digits, key_b, &a, level, acc0, acc1);
    }
    /// ModDown: `out = round(x / P_level)` over `Q_level`, for `x` in the NTT domain over
    /// `Basis::qp(level + 1, kl)`, `kl = params.special_at(level)` and `P_level` the product of those
    /// special primes ([`crate::math::rns::DivRoundPlan`] with them dropped).
    fn mod_down(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer);
    /// [`PolyBackend::mod_down`] of the two polynomials of a key switch, `x0 → out0` and
    /// `x1 → out1`, word for word the two single calls. The default makes them in turn; a backend
    /// with threads may run them side by side (at low levels a single ModDown has too few rows
    /// to keep two threads busy).
    fn mod_down_pair(&self, x: [&Self::Buffer; 2], level: usize, out: [&mut Self::Buffer; 2]) {
        let [o0, o1] = out;
        self.mod_down(x[0], level, o0);
        self.mod_down(x[1], level, o1);
    }
    /// Rescale: `out = round(x / q_level)` over `Q_{level-1}`, for `x` in the NTT domain over
    /// `Basis::q(level + 1)` ([`crate::math::rns::DivRoundPlan`] with `q_level` dropped).
    fn rescale(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer);
    /// ModDown by the first special prime alone: `out = round(x / p_0)` over `Q_level`, for `x` in
    /// the NTT domain over `Basis::qp(level + 1, 1)` ([`crate::math::rns::DivRoundPlan`] with `p_0`
    /// dropped). With one dropped prime the basis conversion is exact, so the result is the
    /// correctly rounded quotient (error at most 1/2 per coefficient); public-key encryption in the
    /// extended basis relies on this.
    fn mod_down_p0(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer);
}
