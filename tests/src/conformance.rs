//! Backend conformance: every [`PolyBackend`] operation, bit for bit, against the reference.
//!
//! The CPU scalar backend ([`CpuBackend::scalar`]) is the oracle. Each `check_*` function runs one
//! operation on the same random, fully reduced inputs on a reference and a candidate backend
//! (built for the same parameter set), downloads both results and compares every word; the first
//! differing word is returned as a [`Mismatch`]. [`check_ckks_flow`] runs a whole CKKS flow (key
//! generation, encryption, products, rescaling, hoisted and lazy rotations, decryption) on both
//! backends from the same seed and compares every ciphertext and plaintext word.
//!
//! [`check_reference_model`] closes the loop on the oracle itself: it recomputes the NTT, the
//! automorphisms, decomposition, key inner product, ModDown and rescale on the host straight from
//! `veil-core`'s definitions ([`BasisConverter::convert_one`], [`DivRoundPlan`], [`NttTable`],
//! [`automorphism_ntt_map`]) and compares a backend with that model, so an optimization shared by
//! the scalar and the fast CPU paths cannot slip through.
//!
//! A new backend instantiates the whole suite in one line with [`testgen_conformance!`](crate::testgen_conformance):
//!
//! ```ignore
//! veil_tests::testgen_conformance!(cuda, |p: &veil_core::CkksParams| MyCudaBackend::new(p));
//! ```

use crate::{random_values, test_rng};
use rand_core::RngCore;
use std::fmt;
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::backend::{automorphism_ntt_map, Basis, Domain, PolyBackend};
use veil_core::ckks::{Ciphertext, Ckks, Plaintext, C64};
use veil_core::math::rns::{BasisConverter, DivRoundPlan};
use veil_core::math::{Modulus, NttTable};
use veil_core::params::{self, CkksParamsLiteral};
use veil_core::CkksParams;

/// The first differing word between the reference's and the candidate's results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The operation and its arguments.
    pub what: String,
    /// The candidate backend's name.
    pub backend: String,
    /// Row (limb) of the first differing word.
    pub row: usize,
    /// Coefficient index within the row.
    pub col: usize,
    /// The reference's word.
    pub want: u64,
    /// The candidate's word.
    pub got: u64,
    /// How many words differ in all.
    pub differing: usize,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} differs from the reference at row {} col {} (want {}, got {}; {} words differ)",
            self.what, self.backend, self.row, self.col, self.want, self.got, self.differing
        )
    }
}

impl std::error::Error for Mismatch {}

/// The outcome of a conformance check.
pub type Conformance = Result<(), Mismatch>;

/// Compares two word vectors of rows of `n` words; `Err` names the first difference.
/// Vectors of different lengths differ at the first missing word.
pub fn compare_words(
    what: &str,
    backend: &str,
    want: &[u64],
    got: &[u64],
    n: usize,
) -> Conformance {
    let len = want.len().max(got.len());
    let mut first = None;
    let mut differing = 0;
    for i in 0..len {
        let (w, g) = (want.get(i), got.get(i));
        if w != g {
            differing += 1;
            if first.is_none() {
                first = Some((
                    i,
                    w.copied().unwrap_or(u64::MAX),
                    g.copied().unwrap_or(u64::MAX),
                ));
            }
        }
    }
    match first {
        None => Ok(()),
        Some((i, want, got)) => Err(Mismatch {
            what: what.to_string(),
            backend: backend.to_string(),
            row: i / n.max(1),
            col: i % n.max(1),
            want,
            got,
            differing,
        }),
    }
}

/// Downloads the first `rows` rows of a buffer.
pub fn download<B: PolyBackend>(be: &B, buf: &B::Buffer, rows: usize) -> Vec<u64> {
    let mut out = vec![0u64; rows * be.params().n()];
    be.download(buf, &mut out).expect("download");
    out
}

/// The moduli of a basis's rows, in row order.
pub fn basis_moduli(p: &CkksParams, basis: Basis) -> Vec<Modulus> {
    let all: Vec<Modulus> = p.all_moduli().copied().collect();
    (0..basis.rows())
        .map(|r| all[basis.global_index(r, p.q().len())])
        .collect()
}

/// Uniform words, each row fully reduced modulo its prime. The first coefficients of every row
/// are the edge values `0, 1, q-1, (q-1)/2, (q+1)/2`.
pub fn random_words(p: &CkksParams, basis: Basis, rng: &mut impl RngCore) -> Vec<u64> {
    let n = p.n();
    let mut out = vec![0u64; basis.rows() * n];
    for (row, m) in out.chunks_mut(n).zip(basis_moduli(p, basis)) {
        let q = m.value();
        for x in row.iter_mut() {
            // Widening multiply: uniform up to a 2^-64 bias, which a conformance test can ignore.
            *x = ((rng.next_u64() as u128 * q as u128) >> 64) as u64;
        }
        for (x, e) in row
            .iter_mut()
            .zip([0, 1, q - 1, (q - 1) / 2, q.div_ceil(2)])
        {
            *x = e;
        }
    }
    out
}

/// One scalar per row, fully reduced (the last row gets `q - 1`, the first `0` when there are
/// several rows, to exercise the edges).
pub fn random_scalars(p: &CkksParams, basis: Basis, rng: &mut impl RngCore) -> Vec<u64> {
    let mods = basis_moduli(p, basis);
    let mut s: Vec<u64> = mods
        .iter()
        .map(|m| ((rng.next_u64() as u128 * m.value() as u128) >> 64) as u64)
        .collect();
    if s.len() > 1 {
        s[0] = 0;
        let last = s.len() - 1;
        s[last] = mods[last].value() - 1;
    }
    s
}

/// The bases the element-wise checks run over: one prime, half of Q, all of Q, the first prime
/// with P, and all of `Q ∪ P`.
pub fn test_bases(p: &CkksParams) -> Vec<Basis> {
    let (l1, k) = (p.max_level() + 1, p.p().len());
    let mut v = vec![
        Basis::q(1),
        Basis::q(l1.div_ceil(2)),
        Basis::q(l1),
        Basis::qp(1, k),
        Basis::qp(l1, k),
    ];
    v.dedup();
    v
}

/// The levels at which decomposition, key inner products and ModDown are checked.
pub fn test_levels(p: &CkksParams) -> Vec<usize> {
    let top = p.max_level();
    let mut v = vec![0, top / 2, top.saturating_sub(1), top];
    v.sort_unstable();
    v.dedup();
    v
}

/// The levels at which rescale is checked (rescale needs `level ≥ 1`).
pub fn rescale_levels(p: &CkksParams) -> Vec<usize> {
    test_levels(p).into_iter().filter(|&l| l >= 1).collect()
}

/// Galois elements for the automorphism checks: rotations by 1, 2, -1 and N/4 - 3 slots,
/// conjugation, and the non-rotation odd elements 3 and 2N - 3.
pub fn test_galois_elements(p: &CkksParams) -> Vec<u64> {
    let two_n = 2 * p.n() as u64;
    let pow5 = |e: u64| (0..e).fold(1u64, |acc, _| acc * 5 % two_n);
    let half = p.max_slots() as u64;
    vec![
        pow5(1),
        pow5(2),
        pow5(half - 1),
        pow5(half / 2 - 3),
        two_n - 1,
        3,
        two_n - 3,
    ]
}

/// A reference and a candidate backend driven in lockstep.
struct Pair<'a, A: PolyBackend, B: PolyBackend> {
    a: &'a A,
    b: &'a B,
    n: usize,
    name: String,
}

impl<'a, A: PolyBackend, B: PolyBackend> Pair<'a, A, B> {
    fn new(a: &'a A, b: &'a B) -> Self {
        assert!(
            a.params() == b.params(),
            "conformance: both backends must be built for the same parameter set"
        );
        Self {
            a,
            b,
            n: a.params().n(),
            name: b.name(),
        }
    }
    fn p(&self) -> &CkksParams {
        self.a.params()
    }
    fn up(&self, words: &[u64]) -> (A::Buffer, B::Buffer) {
        (self.a.upload(words), self.b.upload(words))
    }
    fn alloc(&self, rows: usize) -> (A::Buffer, B::Buffer) {
        (self.a.alloc(rows), self.b.alloc(rows))
    }
    fn cmp(&self, what: &str, x: &(A::Buffer, B::Buffer), rows: usize) -> Conformance {
        let want = download(self.a, &x.0, rows);
        let got = download(self.b, &x.1, rows);
        compare_words(what, &self.name, &want, &got, self.n).map_err(|mut e| {
            if got.iter().all(|&w| w == 0) {
                // CubeCL can read back zeros for a type the device does not support.
                e.what.push_str(" [the candidate returned only zeros]");
            }
            e
        })
    }
}

/// Upload/download round trips, `alloc` (zeroed), `buffer_rows` and `zeroize`.
pub fn check_memory<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    let full = Basis::qp(pr.p().max_level() + 1, pr.p().p().len());
    let w = random_words(pr.p(), full, rng);
    let mut x = pr.up(&w);
    compare_words(
        "upload/download",
        &pr.name,
        &w,
        &download(pr.b, &x.1, full.rows()),
        pr.n,
    )?;
    pr.cmp("upload", &x, full.rows())?;
    // A partial download returns the leading rows.
    pr.cmp("download of the first row", &x, 1)?;
    for rows in [1, full.rows()] {
        let z = pr.alloc(rows);
        compare_words(
            &format!("alloc({rows}) is zero"),
            &pr.name,
            &vec![0; rows * pr.n],
            &download(pr.b, &z.1, rows),
            pr.n,
        )?;
        let (ra, rb) = (pr.a.buffer_rows(&z.0), pr.b.buffer_rows(&z.1));
        if ra != rb {
            return Err(Mismatch {
                what: format!("buffer_rows(alloc({rows}))"),
                backend: pr.name.clone(),
                row: 0,
                col: 0,
                want: ra as u64,
                got: rb as u64,
                differing: 1,
            });
        }
    }
    pr.a.zeroize(&mut x.0);
    pr.b.zeroize(&mut x.1);
    pr.cmp("zeroize", &x, full.rows())
}

/// Forward and inverse NTT over every test basis, and `intt(ntt(x)) = x`.
pub fn check_ntt<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    for basis in test_bases(pr.p()) {
        let rows = basis.rows();
        let w = random_words(pr.p(), basis, rng);
        let mut x = pr.up(&w);
        pr.a.ntt(&mut x.0, basis);
        pr.b.ntt(&mut x.1, basis);
        pr.cmp(&format!("ntt {basis:?}"), &x, rows)?;
        pr.a.intt(&mut x.0, basis);
        pr.b.intt(&mut x.1, basis);
        pr.cmp(&format!("intt(ntt(x)) {basis:?}"), &x, rows)?;
        compare_words(
            &format!("intt(ntt(x)) = x {basis:?}"),
            &pr.name,
            &w,
            &download(pr.b, &x.1, rows),
            pr.n,
        )?;
        let mut y = pr.up(&random_words(pr.p(), basis, rng));
        pr.a.intt(&mut y.0, basis);
        pr.b.intt(&mut y.1, basis);
        pr.cmp(&format!("intt {basis:?}"), &y, rows)?;
    }
    Ok(())
}

/// `add_assign`, `sub_assign`, `add_new`, `sub_new`, `neg_assign`, `mul_assign`, `mul`, `mul_add_assign`,
/// `small_weight_gemm`'s definition for one output from plain ops: zero, one scaled term per
/// input (`scalars[j]` holds weight `j` per row), then the post scalars.
fn gemm_definition<'a, X: PolyBackend + 'a>(
    be: &X,
    out: &mut X::Buffer,
    terms: impl Iterator<Item = &'a X::Buffer>,
    scalars: &[Vec<u64>],
    post: &[u64],
    basis: Basis,
) {
    be.mul_scalar_assign(out, &vec![0; basis.rows()], basis);
    for (x, s) in terms.zip(scalars) {
        be.mul_scalar_add_assign(out, x, s, basis);
    }
    be.mul_scalar_assign(out, post, basis);
}

/// `mul_scalar_assign`, `add_scalar_assign` and the fused `mul_scalar_add_assign`, `mul_sum` and
/// `mul_sum_compact` (against their definitions) over every test basis. Over Q-only bases the
/// right operand spans all of Q (operands may have more rows than the basis).
pub fn check_elementwise<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    let all_q = Basis::q(pr.p().max_level() + 1);
    for basis in test_bases(pr.p()) {
        let rows = basis.rows();
        let (a, acc) = (
            random_words(pr.p(), basis, rng),
            random_words(pr.p(), basis, rng),
        );
        let b_basis = if basis.p == 0 { all_q } else { basis };
        let b = pr.up(&random_words(pr.p(), b_basis, rng));

        let mut x = pr.up(&a);
        pr.a.add_assign(&mut x.0, &b.0, basis);
        pr.b.add_assign(&mut x.1, &b.1, basis);
        pr.cmp(&format!("add_assign {basis:?}"), &x, rows)?;

        let mut x = pr.up(&a);
        pr.a.sub_assign(&mut x.0, &b.0, basis);
        pr.b.sub_assign(&mut x.1, &b.1, basis);
        pr.cmp(&format!("sub_assign {basis:?}"), &x, rows)?;

        let x = pr.up(&a);
        let out = (
            pr.a.add_new(&x.0, &b.0, basis),
            pr.b.add_new(&x.1, &b.1, basis),
        );
        pr.cmp(&format!("add_new {basis:?}"), &out, rows)?;
        let out = (
            pr.a.sub_new(&x.0, &b.0, basis),
            pr.b.sub_new(&x.1, &b.1, basis),
        );
        pr.cmp(&format!("sub_new {basis:?}"), &out, rows)?;

        let mut x = pr.up(&a);
        pr.a.neg_assign(&mut x.0, basis);
        pr.b.neg_assign(&mut x.1, basis);
        pr.cmp(&format!("neg_assign {basis:?}"), &x, rows)?;

        let mut x = pr.up(&a);
        pr.a.mul_assign(&mut x.0, &b.0, basis);
        pr.b.mul_assign(&mut x.1, &b.1, basis);
        pr.cmp(&format!("mul_assign {basis:?}"), &x, rows)?;

        let x = pr.up(&a);
        let mut out = pr.alloc(rows);
        pr.a.mul(&x.0, &b.0, &mut out.0, basis);
        pr.b.mul(&x.1, &b.1, &mut out.1, basis);
        pr.cmp(&format!("mul {basis:?}"), &out, rows)?;

        let mut s = pr.up(&acc);
        pr.a.mul_add_assign(&mut s.0, &x.0, &b.0, basis);
        pr.b.mul_add_assign(&mut s.1, &x.1, &b.1, basis);
        pr.cmp(&format!("mul_add_assign {basis:?}"), &s, rows)?;

        let sc = random_scalars(pr.p(), basis, rng);
        let mut x = pr.up(&a);
        pr.a.mul_scalar_assign(&mut x.0, &sc, basis);
        pr.b.mul_scalar_assign(&mut x.1, &sc, basis);
        pr.cmp(&format!("mul_scalar_assign {basis:?}"), &x, rows)?;

        let mut x = pr.up(&a);
        pr.a.add_scalar_assign(&mut x.0, &sc, basis);
        pr.b.add_scalar_assign(&mut x.1, &sc, basis);
        pr.cmp(&format!("add_scalar_assign {basis:?}"), &x, rows)?;

        // The fused ops against their definitions composed of the plain ones, both ways (so a
        // wrong fused path on either side is caught).
        let x = pr.up(&a);
        let mut s = pr.up(&acc);
        let mut t = pr.alloc(rows);
        pr.a.copy_rows(&b.0, basis, &mut t.0, basis);
        pr.a.mul_scalar_assign(&mut t.0, &sc, basis);
        pr.a.add_assign(&mut s.0, &t.0, basis);
        pr.b.mul_scalar_add_assign(&mut s.1, &b.1, &sc, basis);
        pr.cmp(&format!("mul_scalar_add_assign {basis:?}"), &s, rows)?;

        let ys: Vec<_> = (0..3)
            .map(|_| pr.up(&random_words(pr.p(), b_basis, rng)))
            .collect();
        let mut out = pr.alloc(rows);
        pr.a.mul(&x.0, &ys[0].0, &mut out.0, basis);
        for y in &ys[1..] {
            pr.a.mul_add_assign(&mut out.0, &x.0, &y.0, basis);
        }
        let terms: Vec<_> = ys.iter().map(|y| (&x.1, &y.1)).collect();
        pr.b.mul_sum(&terms, &mut out.1, basis);
        pr.cmp(&format!("mul_sum {basis:?}"), &out, rows)?;
        let mut out = pr.alloc(rows);
        let terms: Vec<_> = ys.iter().map(|y| (&x.0, &y.0)).collect();
        pr.a.mul_sum(&terms, &mut out.0, basis);
        pr.b.mul(&x.1, &ys[0].1, &mut out.1, basis);
        for y in &ys[1..] {
            pr.b.mul_add_assign(&mut out.1, &x.1, &y.1, basis);
        }
        pr.cmp(&format!("mul_sum (reference side) {basis:?}"), &out, rows)?;

        // Compact rows: `width` words per row, a random class per position.
        let (n, width) = (pr.p().n(), 64usize);
        let classes: Vec<u32> = (0..n).map(|_| rng.next_u32() % width as u32).collect();
        let compact: Vec<Vec<u64>> = (0..2)
            .map(|_| {
                random_words(pr.p(), basis, rng)
                    .chunks(n)
                    .flat_map(|row| row[..width].to_vec())
                    .collect()
            })
            .collect();
        let full: Vec<_> = compact
            .iter()
            .map(|c| {
                let host: Vec<u64> = c
                    .chunks(width)
                    .flat_map(|row| classes.iter().map(|&k| row[k as usize]).collect::<Vec<_>>())
                    .collect();
                pr.up(&host)
            })
            .collect();
        let mut out = pr.alloc(rows);
        pr.a.mul(&x.0, &full[0].0, &mut out.0, basis);
        pr.a.mul_add_assign(&mut out.0, &x.0, &full[1].0, basis);
        let terms: Vec<_> = compact.iter().map(|c| (&x.1, c.as_slice())).collect();
        pr.b.mul_sum_compact(&terms, width, &classes, &mut out.1, basis);
        pr.cmp(&format!("mul_sum_compact {basis:?}"), &out, rows)?;

        // Subring NTT rows, kept compactly: the reference's full NTT of the expanded rows is
        // constant on runs of g (the layout's premise) and its every g-th word is what the
        // candidate returns. Then sums over them against the expanded definition, several
        // outputs over shared inputs, one output empty, one past a lazy lane's 64 terms.
        for log_gap in [0u32, 1, 2, 3] {
            let (g, w) = (1usize << log_gap, n >> log_gap);
            let coeffs: Vec<u64> = random_words(pr.p(), basis, rng)
                .chunks(n)
                .flat_map(|row| row[..w].to_vec())
                .collect();
            let mut host = vec![0u64; rows * n];
            for (row, src) in host.chunks_mut(n).zip(coeffs.chunks(w)) {
                for (k, &c) in src.iter().enumerate() {
                    row[k * g] = c;
                }
            }
            let mut full = pr.a.upload(&host);
            pr.a.ntt(&mut full, basis);
            let full = download(pr.a, &full, rows);
            let want: Vec<u64> = full.iter().step_by(g).copied().collect();
            let runs: Vec<u64> = full.iter().enumerate().map(|(j, _)| want[j / g]).collect();
            compare_words(
                &format!("ntt_subring premise {basis:?} g = {g}"),
                "reference",
                &full,
                &runs,
                n,
            )?;
            let got = pr.b.ntt_subring(&coeffs, log_gap, basis);
            compare_words(
                &format!("ntt_subring {basis:?} g = {g}"),
                &pr.name,
                &want,
                &got,
                w,
            )?;
            let got_ref = pr.a.ntt_subring(&coeffs, log_gap, basis);
            compare_words(
                &format!("ntt_subring (reference side) {basis:?} g = {g}"),
                &pr.name,
                &want,
                &got_ref,
                w,
            )?;
        }
        for log_gap in [0u32, 1, 2, 3, 9] {
            let w = n >> log_gap;
            let xs: Vec<_> = (0..3)
                .map(|_| pr.up(&random_words(pr.p(), basis, rng)))
                .collect();
            let pts: Vec<Vec<u64>> = (0..70)
                .map(|_| {
                    random_words(pr.p(), basis, rng)
                        .chunks(n)
                        .flat_map(|row| row[..w].to_vec())
                        .collect()
                })
                .collect();
            // Output 0: two terms; 1: none; 2: 70 terms over all inputs; 3: one term.
            let mut terms: Vec<(usize, usize, &[u64])> = vec![(0, 0, &pts[0]), (0, 2, &pts[1])];
            terms.extend((0..70).map(|t| (2, t % 3, pts[t].as_slice())));
            terms.push((3, 1, &pts[5]));
            let mut outs: (Vec<_>, Vec<_>) = (0..4).map(|_| pr.alloc(rows)).unzip();
            let xa: Vec<_> = xs.iter().map(|x| &x.0).collect();
            let xb: Vec<_> = xs.iter().map(|x| &x.1).collect();
            pr.b.mul_sum_subring(&xb, &terms, log_gap, &mut outs.1, basis);
            for (o, (oa, ob)) in outs.0.iter_mut().zip(outs.1).enumerate() {
                // The definition on the reference: expand, then multiply-accumulate.
                pr.a.mul_scalar_assign(oa, &vec![0u64; rows], basis);
                for &(_, x, words) in terms.iter().filter(|t| t.0 == o) {
                    let host: Vec<u64> = words
                        .chunks(w)
                        .flat_map(|row| (0..n).map(move |j| row[j >> log_gap]))
                        .collect();
                    let y = pr.a.upload(&host);
                    pr.a.mul_add_assign(oa, xa[x], &y, basis);
                }
                let pair = (pr.a.upload(&download(pr.a, oa, rows)), ob);
                pr.cmp(
                    &format!("mul_sum_subring {basis:?} out {o} g = {}", 1 << log_gap),
                    &pair,
                    rows,
                )?;
            }
        }

        // The small-weight matrix product against its definition, both ways: random inputs and
        // weights, then the extremes (every word `q − 1`, weights `±2^20`) over more terms than a
        // lazy lane may hold between reductions.
        let mods = basis_moduli(pr.p(), basis);
        let bound = 1i64 << veil_core::backend::SMALL_WEIGHT_BITS;
        let top: Vec<u64> = mods
            .iter()
            .flat_map(|m| core::iter::repeat_n(m.value() - 1, n))
            .collect();
        let top = pr.up(&top);
        let xs: Vec<_> = (0..3)
            .map(|_| pr.up(&random_words(pr.p(), b_basis, rng)))
            .collect();
        // The long case once per parameter set (it is a thousand plain ops on the reference
        // side of a device backend).
        let cases: &[(usize, usize)] = if basis == Basis::q(1) {
            &[(3, 5), (1030, 1), (2, 3)]
        } else {
            &[(3, 5)]
        };
        for &(k, outs) in cases {
            let w: Vec<i32> = (0..k * outs)
                .map(|i| {
                    if k == 2 {
                        // Beyond the contract's bound: a backend must still give the words
                        // of the definition.
                        [i32::MIN, i32::MAX, -(bound as i32) - 1][i % 3]
                    } else if k > 3 {
                        (if i % 3 == 0 { -bound } else { bound }) as i32
                    } else {
                        ((rng.next_u64() % (2 * bound as u64 + 1)) as i64 - bound) as i32
                    }
                })
                .collect();
            let post = random_scalars(pr.p(), basis, rng);
            let idx: Vec<usize> = (0..k).map(|j| if k > 3 { 3 } else { j % 3 }).collect();
            let pick_a = |j: usize| if j == 3 { &top.0 } else { &xs[j].0 };
            let pick_b = |j: usize| if j == 3 { &top.1 } else { &xs[j].1 };
            // The definition: one scalar row per weight, term by term.
            let scal: Vec<Vec<u64>> = w
                .iter()
                .map(|&x| mods.iter().map(|m| m.from_i128(x as i128)).collect())
                .collect();
            let define_a = |out: &mut A::Buffer, o: usize| {
                let terms = idx.iter().map(|&i| pick_a(i));
                gemm_definition(pr.a, out, terms, &scal[o * k..(o + 1) * k], &post, basis)
            };
            let define_b = |out: &mut B::Buffer, o: usize| {
                let terms = idx.iter().map(|&i| pick_b(i));
                gemm_definition(pr.b, out, terms, &scal[o * k..(o + 1) * k], &post, basis)
            };
            let ia: Vec<&A::Buffer> = idx.iter().map(|&i| pick_a(i)).collect();
            let ib: Vec<&B::Buffer> = idx.iter().map(|&i| pick_b(i)).collect();
            let mut ga: Vec<A::Buffer> = (0..outs).map(|_| pr.a.alloc(rows)).collect();
            let mut gb: Vec<B::Buffer> = (0..outs).map(|_| pr.b.alloc(rows)).collect();
            pr.a.small_weight_gemm(&ia, &w, &post, &mut ga, basis);
            pr.b.small_weight_gemm(&ib, &w, &post, &mut gb, basis);
            for o in 0..outs {
                let mut da = pr.a.alloc(rows);
                define_a(&mut da, o);
                let mut db = pr.b.alloc(rows);
                define_b(&mut db, o);
                let (ga_o, gb_o) = (
                    pr.a.upload(&download(pr.a, &ga[o], rows)),
                    pr.b.upload(&download(pr.b, &gb[o], rows)),
                );
                pr.cmp(
                    &format!("small_weight_gemm ({k} terms, output {o}) {basis:?}"),
                    &(da, gb_o),
                    rows,
                )?;
                pr.cmp(
                    &format!("small_weight_gemm (reference side, {k} terms, output {o}) {basis:?}"),
                    &(ga_o, db),
                    rows,
                )?;
            }
        }
    }
    Ok(())
}

/// The automorphism `X → X^g` in both domains, for every test Galois element and basis.
pub fn check_automorphism<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    let gs = test_galois_elements(pr.p());
    for basis in test_bases(pr.p()) {
        let rows = basis.rows();
        let x = pr.up(&random_words(pr.p(), basis, rng));
        for &g in &gs {
            for domain in [Domain::Ntt, Domain::Coeff] {
                let mut out = pr.alloc(rows);
                pr.a.automorphism(&x.0, g, &mut out.0, basis, domain);
                pr.b.automorphism(&x.1, g, &mut out.1, basis, domain);
                pr.cmp(
                    &format!("automorphism g={g} {domain:?} {basis:?}"),
                    &out,
                    rows,
                )?;
            }
        }
    }
    Ok(())
}

/// `copy_rows` from a basis to sub-bases (level drops, extraction of Q from `Q ∪ P`, prefixes of
/// `Q ∪ P`, and the identity).
pub fn check_copy_rows<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    let (l1, k) = (pr.p().max_level() + 1, pr.p().p().len());
    let cases = [
        (Basis::q(l1), Basis::q(l1)),
        (Basis::q(l1), Basis::q(1)),
        (Basis::q(l1), Basis::q(l1.div_ceil(2))),
        (Basis::qp(l1, k), Basis::qp(l1, k)),
        (Basis::qp(l1, k), Basis::q(l1)),
        (Basis::qp(l1, k), Basis::qp(1, k)),
        (Basis::qp(l1, k), Basis::qp(l1.div_ceil(2), k)),
        (Basis::qp(l1, k), Basis::q(1)),
    ];
    for (src, dst) in cases {
        let x = pr.up(&random_words(pr.p(), src, rng));
        let mut out = pr.alloc(dst.rows());
        pr.a.copy_rows(&x.0, src, &mut out.0, dst);
        pr.b.copy_rows(&x.1, src, &mut out.1, dst);
        pr.cmp(&format!("copy_rows {src:?} -> {dst:?}"), &out, dst.rows())?;
    }
    Ok(())
}

/// Gadget decomposition with ModUp at every test level.
pub fn check_decompose<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    for level in test_levels(pr.p()) {
        let ext = Basis::qp(level + 1, pr.p().special_at(level));
        let c = pr.up(&random_words(pr.p(), Basis::q(level + 1), rng));
        let digits = pr.p().digits_at(level);
        let mut da: Vec<A::Buffer> = (0..digits).map(|_| pr.a.alloc(ext.rows())).collect();
        let mut db: Vec<B::Buffer> = (0..digits).map(|_| pr.b.alloc(ext.rows())).collect();
        pr.a.decompose(&c.0, level, &mut da);
        pr.b.decompose(&c.1, level, &mut db);
        for (j, (x, y)) in da.into_iter().zip(db).enumerate() {
            pr.cmp(
                &format!("decompose level {level} digit {j}"),
                &(x, y),
                ext.rows(),
            )?;
        }
    }
    Ok(())
}

/// The key inner product at every test level, on random digits and keys, into accumulators
/// that hold garbage beforehand (the result overwrites them).
pub fn check_key_inner_product<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    let p = pr.p().clone();
    let (l1, k) = (p.max_level() + 1, p.p().len());
    let full = Basis::qp(l1, k);
    let kb: Vec<_> = (0..p.dnum())
        .map(|_| pr.up(&random_words(&p, full, rng)))
        .collect();
    let ka: Vec<_> = (0..p.dnum())
        .map(|_| pr.up(&random_words(&p, full, rng)))
        .collect();
    let (kba, kbb): (Vec<_>, Vec<_>) = kb.into_iter().unzip();
    let (kaa, kab): (Vec<_>, Vec<_>) = ka.into_iter().unzip();
    for level in test_levels(&p) {
        let ext = Basis::qp(level + 1, p.special_at(level));
        let ds: Vec<_> = (0..p.digits_at(level))
            .map(|_| pr.up(&random_words(&p, ext, rng)))
            .collect();
        let (dsa, dsb): (Vec<_>, Vec<_>) = ds.into_iter().unzip();
        let mut acc0 = pr.up(&random_words(&p, ext, rng));
        let mut acc1 = pr.up(&random_words(&p, ext, rng));
        pr.a.key_inner_product(&dsa, &kba, &kaa, level, &mut acc0.0, &mut acc1.0);
        pr.b.key_inner_product(&dsb, &kbb, &kab, level, &mut acc0.1, &mut acc1.1);
        pr.cmp(
            &format!("key_inner_product acc0 level {level}"),
            &acc0,
            ext.rows(),
        )?;
        pr.cmp(
            &format!("key_inner_product acc1 level {level}"),
            &acc1,
            ext.rows(),
        )?;
        // A lean key: the reference on the expanded `a_j`, the candidate from the seed.
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let ea: Vec<_> = (0..dsa.len())
            .map(|j| pr.a.expand_uniform(&seed, j as u64, full))
            .collect();
        let mut acc0 = pr.up(&random_words(&p, ext, rng));
        let mut acc1 = pr.up(&random_words(&p, ext, rng));
        pr.a.key_inner_product(&dsa, &kba, &ea, level, &mut acc0.0, &mut acc1.0);
        pr.b.key_inner_product_seeded(&dsb, &kbb, &seed, level, &mut acc0.1, &mut acc1.1);
        pr.cmp(
            &format!("key_inner_product_seeded level {level}"),
            &acc0,
            ext.rows(),
        )?;
        pr.cmp(
            &format!("key_inner_product_seeded acc1 level {level}"),
            &acc1,
            ext.rows(),
        )?;
    }
    Ok(())
}

/// ModDown (division by `P` with rounding) at every test level.
pub fn check_mod_down<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    for level in test_levels(pr.p()) {
        let k = pr.p().special_at(level);
        let x = pr.up(&random_words(pr.p(), Basis::qp(level + 1, k), rng));
        let mut out = pr.up(&random_words(pr.p(), Basis::q(level + 1), rng));
        pr.a.mod_down(&x.0, level, &mut out.0);
        pr.b.mod_down(&x.1, level, &mut out.1);
        pr.cmp(&format!("mod_down level {level}"), &out, level + 1)?;
        // The pair: the reference's two single ModDowns against the candidate's pair.
        let y = pr.up(&random_words(pr.p(), Basis::qp(level + 1, k), rng));
        let mut out = pr.up(&random_words(pr.p(), Basis::q(level + 1), rng));
        let mut out2 = pr.up(&random_words(pr.p(), Basis::q(level + 1), rng));
        pr.a.mod_down(&x.0, level, &mut out.0);
        pr.a.mod_down(&y.0, level, &mut out2.0);
        pr.b.mod_down_pair([&x.1, &y.1], level, [&mut out.1, &mut out2.1]);
        pr.cmp(
            &format!("mod_down_pair level {level} (first)"),
            &out,
            level + 1,
        )?;
        pr.cmp(
            &format!("mod_down_pair level {level} (second)"),
            &out2,
            level + 1,
        )?;
        let x = pr.up(&random_words(pr.p(), Basis::qp(level + 1, 1), rng));
        pr.a.mod_down_p0(&x.0, level, &mut out.0);
        pr.b.mod_down_p0(&x.1, level, &mut out.1);
        pr.cmp(&format!("mod_down_p0 level {level}"), &out, level + 1)?;
    }
    Ok(())
}

/// Rescale (division by `q_level` with rounding) at every test level `≥ 1`.
pub fn check_rescale<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    for level in rescale_levels(pr.p()) {
        let x = pr.up(&random_words(pr.p(), Basis::q(level + 1), rng));
        let mut out = pr.up(&random_words(pr.p(), Basis::q(level), rng));
        pr.a.rescale(&x.0, level, &mut out.0);
        pr.b.rescale(&x.1, level, &mut out.1);
        pr.cmp(&format!("rescale level {level}"), &out, level)?;
    }
    Ok(())
}

/// The candidate's outputs are not all zero: a product and an NTT of random words, each checked
/// to hold nonzero words before any comparison (a device that does not support a type can read
/// back zeros as if the launch had succeeded; the comparisons would catch it too, this names it).
pub fn check_not_all_zero<B: PolyBackend>(candidate: &B, rng: &mut impl RngCore) -> Conformance {
    let p = candidate.params().clone();
    let basis = Basis::q(p.max_level() + 1);
    let rows = basis.rows();
    let a = candidate.upload(&random_words(&p, basis, rng));
    let b = candidate.upload(&random_words(&p, basis, rng));
    let mut out = candidate.alloc(rows);
    candidate.mul(&a, &b, &mut out, basis);
    let mut x = candidate.upload(&random_words(&p, basis, rng));
    candidate.ntt(&mut x, basis);
    for (what, buf) in [("mul", &out), ("ntt", &x)] {
        let words = download(candidate, buf, rows);
        for (r, row) in words.chunks(p.n()).enumerate() {
            if row.iter().all(|&w| w == 0) {
                return Err(Mismatch {
                    what: format!("{what}: row {r} is all zero"),
                    backend: candidate.name(),
                    row: r,
                    col: 0,
                    want: 1,
                    got: 0,
                    differing: p.n(),
                });
            }
        }
    }
    Ok(())
}

/// One check per op family (element-wise, NTT, automorphism, decomposition, key inner product,
/// ModDown, rescale) on the full basis only: the largest-ring tier of a slow device (a software
/// Vulkan driver).
pub fn check_one_per_family<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    let pr = Pair::new(reference, candidate);
    let p = pr.p().clone();
    let (l1, k) = (p.max_level() + 1, p.p().len());
    let full = Basis::qp(l1, k);
    let rows = full.rows();
    let a = pr.up(&random_words(&p, full, rng));
    let b = pr.up(&random_words(&p, full, rng));
    let mut out = pr.alloc(rows);
    pr.a.mul(&a.0, &b.0, &mut out.0, full);
    pr.b.mul(&a.1, &b.1, &mut out.1, full);
    pr.cmp(&format!("mul {full:?}"), &out, rows)?;
    let mut x = pr.up(&random_words(&p, full, rng));
    pr.a.ntt(&mut x.0, full);
    pr.b.ntt(&mut x.1, full);
    pr.cmp(&format!("ntt {full:?}"), &x, rows)?;
    pr.a.intt(&mut x.0, full);
    pr.b.intt(&mut x.1, full);
    pr.cmp(&format!("intt {full:?}"), &x, rows)?;
    let g = test_galois_elements(&p)[0];
    for domain in [Domain::Ntt, Domain::Coeff] {
        let mut out = pr.alloc(rows);
        pr.a.automorphism(&a.0, g, &mut out.0, full, domain);
        pr.b.automorphism(&a.1, g, &mut out.1, full, domain);
        pr.cmp(
            &format!("automorphism g={g} {domain:?} {full:?}"),
            &out,
            rows,
        )?;
    }
    let level = p.max_level();
    let qb = Basis::q(l1);
    let c = pr.up(&random_words(&p, qb, rng));
    let dn = p.digits_at(level);
    let mut da: Vec<A::Buffer> = (0..dn).map(|_| pr.a.alloc(rows)).collect();
    let mut db: Vec<B::Buffer> = (0..dn).map(|_| pr.b.alloc(rows)).collect();
    pr.a.decompose(&c.0, level, &mut da);
    pr.b.decompose(&c.1, level, &mut db);
    for j in 0..dn {
        let (wa, wb) = (download(pr.a, &da[j], rows), download(pr.b, &db[j], rows));
        compare_words(
            &format!("decompose level {level} digit {j}"),
            &pr.name,
            &wa,
            &wb,
            pr.n,
        )?;
    }
    let (kba, kbb): (Vec<A::Buffer>, Vec<B::Buffer>) =
        (0..dn).map(|_| pr.up(&random_words(&p, full, rng))).unzip();
    let (kaa, kab): (Vec<A::Buffer>, Vec<B::Buffer>) =
        (0..dn).map(|_| pr.up(&random_words(&p, full, rng))).unzip();
    let mut acc0 = pr.alloc(rows);
    let mut acc1 = pr.alloc(rows);
    pr.a.key_inner_product(&da, &kba, &kaa, level, &mut acc0.0, &mut acc1.0);
    pr.b.key_inner_product(&db, &kbb, &kab, level, &mut acc0.1, &mut acc1.1);
    pr.cmp(&format!("key_inner_product level {level} (b)"), &acc0, rows)?;
    pr.cmp(&format!("key_inner_product level {level} (a)"), &acc1, rows)?;
    let mut out = pr.alloc(l1);
    pr.a.mod_down(&acc0.0, level, &mut out.0);
    pr.b.mod_down(&acc0.1, level, &mut out.1);
    pr.cmp(&format!("mod_down level {level}"), &out, l1)?;
    pr.a.mod_down_p0(&acc0.0, level, &mut out.0);
    pr.b.mod_down_p0(&acc0.1, level, &mut out.1);
    pr.cmp(&format!("mod_down_p0 level {level}"), &out, l1)?;
    if level >= 1 {
        let mut out = pr.alloc(level);
        pr.a.rescale(&c.0, level, &mut out.0);
        pr.b.rescale(&c.1, level, &mut out.1);
        pr.cmp(&format!("rescale level {level}"), &out, level)?;
    }
    Ok(())
}

/// Every operation check above, in turn.
pub fn check_all_ops<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    check_memory(reference, candidate, rng)?;
    check_ntt(reference, candidate, rng)?;
    check_elementwise(reference, candidate, rng)?;
    check_automorphism(reference, candidate, rng)?;
    check_copy_rows(reference, candidate, rng)?;
    check_decompose(reference, candidate, rng)?;
    check_key_inner_product(reference, candidate, rng)?;
    check_mod_down(reference, candidate, rng)?;
    check_rescale(reference, candidate, rng)
}

/// The few operations checked at the largest ring degree (to bound the run time): the NTTs and
/// the key-switching kernels.
pub fn check_core_ops<A: PolyBackend, B: PolyBackend>(
    reference: &A,
    candidate: &B,
    rng: &mut impl RngCore,
) -> Conformance {
    check_ntt(reference, candidate, rng)?;
    check_decompose(reference, candidate, rng)?;
    check_key_inner_product(reference, candidate, rng)?;
    check_mod_down(reference, candidate, rng)?;
    check_rescale(reference, candidate, rng)
}

// ---- whole CKKS flows ---------------------------------------------------------------------

fn cmp_ct<A: PolyBackend, B: PolyBackend>(
    what: &str,
    ca: &Ckks<A>,
    cb: &Ckks<B>,
    x: &Ciphertext<A>,
    y: &Ciphertext<B>,
) -> Conformance {
    let name = cb.backend().name();
    let meta = |want: u64, got: u64, field: &str| Mismatch {
        what: format!("{what} ({field})"),
        backend: name.clone(),
        row: 0,
        col: 0,
        want,
        got,
        differing: 1,
    };
    if x.degree() != y.degree() {
        return Err(meta(x.degree() as u64, y.degree() as u64, "degree"));
    }
    if x.level() != y.level() {
        return Err(meta(x.level() as u64, y.level() as u64, "level"));
    }
    if x.scale().to_bits() != y.scale().to_bits() {
        return Err(meta(x.scale().to_bits(), y.scale().to_bits(), "scale bits"));
    }
    let rows = x.level() + 1;
    for (i, (pa, pb)) in x.polys().iter().zip(y.polys()).enumerate() {
        compare_words(
            &format!("{what} c_{i}"),
            &name,
            &download(ca.backend(), pa, rows),
            &download(cb.backend(), pb, rows),
            ca.params().n(),
        )?;
    }
    Ok(())
}

fn cmp_pt<A: PolyBackend, B: PolyBackend>(
    what: &str,
    ca: &Ckks<A>,
    cb: &Ckks<B>,
    x: &Plaintext<A>,
    y: &Plaintext<B>,
) -> Conformance {
    let rows = x.level() + 1;
    compare_words(
        what,
        &cb.backend().name(),
        &download(ca.backend(), x.poly(), rows),
        &download(cb.backend(), y.poly(), rows.min(y.level() + 1)),
        ca.params().n(),
    )
}

fn cmp_decoded(what: &str, name: &str, x: &[C64], y: &[C64]) -> Conformance {
    let bits = |v: &[C64]| -> Vec<u64> {
        v.iter()
            .flat_map(|c| [c.re.to_bits(), c.im.to_bits()])
            .collect()
    };
    compare_words(what, name, &bits(x), &bits(y), 2 * x.len().max(1))
}

/// A whole CKKS flow on both backends from the same seed: key generation (secret, public,
/// relinearization, Galois keys for rotations and conjugation), encoding, public- and
/// secret-key encryption, ct×ct with relinearization, rescale, plaintext and constant
/// products, additions, single and hoisted rotations, conjugation, lazy hoisted rotations with
/// one ModDown, level drop, decryption and decoding. Every ciphertext and plaintext word, every
/// scale and every decoded `f64` must be identical.
pub fn check_ckks_flow<A: PolyBackend, B: PolyBackend>(
    reference: Arc<A>,
    candidate: Arc<B>,
    seed: u64,
) -> Conformance {
    let ca = Ckks::new(reference);
    let cb = Ckks::new(candidate);
    let name = cb.backend().name();
    let p = ca.params().clone();
    let (top, slots) = (p.max_level(), p.max_slots());
    let (mut ra, mut rb) = (test_rng(seed), test_rng(seed));
    let mut values = test_rng(seed ^ 0x5eed_5eed);
    let rots = [1i64, -3, 5];

    let ska = ca.gen_secret_key(&mut ra);
    let skb = cb.gen_secret_key(&mut rb);
    let pka = ca.gen_public_key(&ska, &mut ra).unwrap();
    let pkb = cb.gen_public_key(&skb, &mut rb).unwrap();
    let ka = ca
        .gen_evaluation_keys(&ska, &rots, true, &mut ra, |_, _| {})
        .unwrap();
    let kb = cb
        .gen_evaluation_keys(&skb, &rots, true, &mut rb, |_, _| {})
        .unwrap();

    let x = random_values(&mut values, slots, 1.0);
    let y = random_values(&mut values, slots, 1.0);
    let scale = p.default_scale();
    let (pxa, pxb) = (
        ca.encode(&x, slots, top, scale).unwrap(),
        cb.encode(&x, slots, top, scale).unwrap(),
    );
    cmp_pt("encode x", &ca, &cb, &pxa, &pxb)?;
    let (pya, pyb) = (
        ca.encode(&y, slots, top, scale).unwrap(),
        cb.encode(&y, slots, top, scale).unwrap(),
    );
    cmp_pt("encode y", &ca, &cb, &pya, &pyb)?;

    let xa = ca.encrypt_pk(&pka, &pxa, &mut ra).unwrap();
    let xb = cb.encrypt_pk(&pkb, &pxb, &mut rb).unwrap();
    cmp_ct("encrypt_pk", &ca, &cb, &xa, &xb)?;
    if top >= 1 {
        // Below the top level the public key's rows are gathered first.
        let (pla, plb) = (
            ca.encode(&x, slots, top - 1, scale).unwrap(),
            cb.encode(&x, slots, top - 1, scale).unwrap(),
        );
        let la = ca.encrypt_pk(&pka, &pla, &mut ra).unwrap();
        let lb = cb.encrypt_pk(&pkb, &plb, &mut rb).unwrap();
        cmp_ct("encrypt_pk below the top level", &ca, &cb, &la, &lb)?;
    }
    let ya = ca.encrypt_sk(&ska, &pya, &mut ra).unwrap();
    let yb = cb.encrypt_sk(&skb, &pyb, &mut rb).unwrap();
    cmp_ct("encrypt_sk", &ca, &cb, &ya, &yb)?;

    let (sa, sb) = (ca.add(&xa, &ya).unwrap(), cb.add(&xb, &yb).unwrap());
    cmp_ct("add", &ca, &cb, &sa, &sb)?;
    let (da, db) = (ca.sub(&xa, &ya).unwrap(), cb.sub(&xb, &yb).unwrap());
    cmp_ct("sub", &ca, &cb, &da, &db)?;

    let mut ma = ca.mul_relin(&xa, &ya, &ka).unwrap();
    let mut mb = cb.mul_relin(&xb, &yb, &kb).unwrap();
    cmp_ct("mul_relin", &ca, &cb, &ma, &mb)?;
    ca.rescale_assign(&mut ma).unwrap();
    cb.rescale_assign(&mut mb).unwrap();
    cmp_ct("mul_relin + rescale", &ca, &cb, &ma, &mb)?;

    let mut pa = ca.mul_plain(&xa, &pya).unwrap();
    let mut pb = cb.mul_plain(&xb, &pyb).unwrap();
    ca.rescale_assign(&mut pa).unwrap();
    cb.rescale_assign(&mut pb).unwrap();
    cmp_ct("mul_plain + rescale", &ca, &cb, &pa, &pb)?;

    let c = C64::new(0.75, -1.25);
    let (mut qa, mut qb) = (ca.clone_ct(&xa), cb.clone_ct(&xb));
    ca.mul_const_assign(&mut qa, c, scale).unwrap();
    cb.mul_const_assign(&mut qb, c, scale).unwrap();
    ca.add_const_assign(&mut qa, c).unwrap();
    cb.add_const_assign(&mut qb, c).unwrap();
    cmp_ct("mul_const + add_const", &ca, &cb, &qa, &qb)?;

    let ha = ca.rotate_hoisted(&ma, &rots, &ka).unwrap();
    let hb = cb.rotate_hoisted(&mb, &rots, &kb).unwrap();
    for ((u, v), r) in ha.iter().zip(&hb).zip(rots) {
        cmp_ct(&format!("rotate_hoisted {r}"), &ca, &cb, u, v)?;
    }
    let (ra_, rb_) = (
        ca.rotate(&xa, -3, &ka).unwrap(),
        cb.rotate(&xb, -3, &kb).unwrap(),
    );
    cmp_ct("rotate -3", &ca, &cb, &ra_, &rb_)?;
    let (ja, jb) = (
        ca.conjugate(&ma, &ka).unwrap(),
        cb.conjugate(&mb, &kb).unwrap(),
    );
    cmp_ct("conjugate", &ca, &cb, &ja, &jb)?;

    let la = ca.rotate_hoisted_lazy(&xa, &rots, &ka).unwrap();
    let lb = cb.rotate_hoisted_lazy(&xb, &rots, &kb).unwrap();
    let (mut la, mut lb) = (la.into_iter(), lb.into_iter());
    let (mut acc_a, mut acc_b) = (la.next().unwrap(), lb.next().unwrap());
    for (u, v) in la.zip(lb) {
        ca.add_ext_assign(&mut acc_a, &u).unwrap();
        cb.add_ext_assign(&mut acc_b, &v).unwrap();
    }
    let (za, zb) = (ca.mod_down_ext(&acc_a), cb.mod_down_ext(&acc_b));
    cmp_ct("rotate_hoisted_lazy + mod_down_ext", &ca, &cb, &za, &zb)?;

    let (mut ea, mut eb) = (ca.clone_ct(&ha[0]), cb.clone_ct(&hb[0]));
    ca.drop_level_assign(&mut ea, 0).unwrap();
    cb.drop_level_assign(&mut eb, 0).unwrap();
    cmp_ct("drop_level to 0", &ca, &cb, &ea, &eb)?;

    for (what, u, v) in [
        ("decrypt rotate_hoisted", &ha[1], &hb[1]),
        ("decrypt lazy", &za, &zb),
        ("decrypt dropped", &ea, &eb),
    ] {
        let (pa, pb) = (ca.decrypt(&ska, u).unwrap(), cb.decrypt(&skb, v).unwrap());
        cmp_pt(what, &ca, &cb, &pa, &pb)?;
        cmp_decoded(
            &format!("{what}, decoded"),
            &name,
            &ca.decode(&pa).unwrap(),
            &cb.decode(&pb).unwrap(),
        )?;
    }
    Ok(())
}

// ---- the reference against veil-core's definitions ----------------------------------------

fn model_ntt(p: &CkksParams, basis: Basis, x: &mut [u64], forward: bool) {
    let n = p.n();
    for (r, row) in x.chunks_mut(n).take(basis.rows()).enumerate() {
        let t = p.ntt_table(basis.global_index(r, p.q().len()));
        if forward {
            t.forward(row)
        } else {
            t.inverse(row)
        }
    }
}

/// Direct evaluation of slot `j` of the canonical NTT: `a(ψ^{e_j})`, `e_j = 2·rev(j) + 1`.
fn eval_slot(t: &NttTable, log_n: u32, a: &[u64], j: usize) -> u64 {
    let q = t.modulus();
    let e = NttTable::eval_exponent(log_n, j) as u64;
    let w = q.pow(t.psi(), e);
    // Horner from the top coefficient.
    a.iter().rev().fold(0u64, |acc, &c| q.add(q.mul(acc, w), c))
}

/// `round(x / D)` by `DivRoundPlan`'s formula, coefficient by coefficient with
/// [`BasisConverter::convert_one`]; `x` in the NTT domain over `keep ∪ drop` (keep rows first).
fn model_div_round(
    p: &CkksParams,
    x: &[u64],
    keep_basis: Basis,
    drop_g: &[usize],
    plan: &DivRoundPlan,
) -> Vec<u64> {
    let n = p.n();
    let keep = keep_basis.rows();
    let all: Vec<Modulus> = p.all_moduli().copied().collect();
    let mut dropped = x[keep * n..(keep + drop_g.len()) * n].to_vec();
    for (j, row) in dropped.chunks_mut(n).enumerate() {
        p.ntt_table(drop_g[j]).inverse(row);
        let m = &plan.conv.src[j];
        row.iter_mut()
            .for_each(|v| *v = m.add(*v, plan.half_mod_drop[j]));
    }
    let mut conv = vec![0u64; keep * n];
    let (mut src, mut tmp, mut dst) = (
        vec![0u64; drop_g.len()],
        vec![0u64; drop_g.len()],
        vec![0u64; keep],
    );
    for c in 0..n {
        for j in 0..drop_g.len() {
            src[j] = dropped[j * n + c];
        }
        plan.conv.convert_one(&src, &mut tmp, &mut dst);
        for i in 0..keep {
            conv[i * n + c] = dst[i];
        }
    }
    for (i, row) in conv.chunks_mut(n).enumerate() {
        let m = &all[keep_basis.global_index(i, p.q().len())];
        row.iter_mut()
            .for_each(|v| *v = m.sub(*v, plan.half_mod_keep[i]));
        p.ntt_table(keep_basis.global_index(i, p.q().len()))
            .forward(row);
        for (o, &xi) in row.iter_mut().zip(&x[i * n..(i + 1) * n]) {
            *o = m.mul(m.sub(xi, *o), plan.d_inv_mod_keep[i]);
        }
    }
    conv
}

fn model_decompose(p: &CkksParams, c: &[u64], level: usize) -> Vec<Vec<u64>> {
    let n = p.n();
    let k = p.special_at(level);
    let alpha = p.alpha();
    let all: Vec<Modulus> = p.all_moduli().copied().collect();
    let q_total = p.q().len();
    let qb = Basis::q(level + 1);
    let ext = Basis::qp(level + 1, k);
    let mut coeff = c[..qb.rows() * n].to_vec();
    model_ntt(p, qb, &mut coeff, false);
    (0..p.digits_at(level))
        .map(|j| {
            let (s, e) = (j * alpha, ((j + 1) * alpha).min(level + 1));
            let dst_g: Vec<usize> = (0..ext.rows())
                .map(|r| ext.global_index(r, q_total))
                .filter(|g| !(s..e).contains(g))
                .collect();
            let dst: Vec<Modulus> = dst_g.iter().map(|&g| all[g]).collect();
            let conv = BasisConverter::new(&all[s..e], &dst);
            let mut out = vec![0u64; ext.rows() * n];
            out[s * n..e * n].copy_from_slice(&c[s * n..e * n]);
            let (mut src, mut tmp, mut d) =
                (vec![0u64; e - s], vec![0u64; e - s], vec![0u64; dst.len()]);
            for col in 0..n {
                for i in s..e {
                    src[i - s] = coeff[i * n + col];
                }
                conv.convert_one(&src, &mut tmp, &mut d);
                for (t, &g) in dst_g.iter().enumerate() {
                    let r = ext.row_of(g, q_total).unwrap();
                    out[r * n + col] = d[t];
                }
            }
            for &g in &dst_g {
                let r = ext.row_of(g, q_total).unwrap();
                p.ntt_table(g).forward(&mut out[r * n..(r + 1) * n]);
            }
            out
        })
        .collect()
}

/// Compares one backend with `veil-core`'s definitions, computed on the host: the NTT against
/// direct evaluation at a few slots and against [`NttTable`], the automorphism maps in both
/// domains, decomposition ([`BasisConverter::convert_one`]), the key inner product, ModDown and
/// rescale ([`DivRoundPlan`]'s formula). Slow (per-coefficient host code): meant for small `N`.
pub fn check_reference_model<B: PolyBackend>(be: &B, rng: &mut impl RngCore) -> Conformance {
    let p = be.params().clone();
    let (n, log_n, name) = (p.n(), p.log_n(), be.name());
    let (l1, k) = (p.max_level() + 1, p.p().len());
    let q_total = l1;
    let all: Vec<Modulus> = p.all_moduli().copied().collect();
    let full = Basis::qp(l1, k);

    // NTT: the definition at a few slots, then NttTable on every row.
    let w = random_words(&p, full, rng);
    let mut x = be.upload(&w);
    be.ntt(&mut x, full);
    let got = download(be, &x, full.rows());
    for r in [0, l1 - 1, l1] {
        let t = p.ntt_table(full.global_index(r, q_total));
        for j in [0, 1, n / 2, n - 1, (rng.next_u64() as usize) % n] {
            let want = eval_slot(t, log_n, &w[r * n..(r + 1) * n], j);
            if got[r * n + j] != want {
                return Err(Mismatch {
                    what: "ntt vs a(ψ^e_j)".into(),
                    backend: name,
                    row: r,
                    col: j,
                    want,
                    got: got[r * n + j],
                    differing: 1,
                });
            }
        }
    }
    let mut want = w.clone();
    model_ntt(&p, full, &mut want, true);
    compare_words("ntt vs NttTable", &name, &want, &got, n)?;
    be.intt(&mut x, full);
    compare_words(
        "intt vs NttTable",
        &name,
        &w,
        &download(be, &x, full.rows()),
        n,
    )?;

    // Seed expansion and small-integer upload: the definitions row by row.
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    let stream = rng.next_u64() % 8;
    let mut want = vec![0u64; full.rows() * n];
    for (r, row) in want.chunks_mut(n).enumerate() {
        let g = full.global_index(r, q_total);
        veil_core::math::sampling::expand_uniform_row(&seed, stream, g, &all[g], row);
    }
    let got = download(be, &be.expand_uniform(&seed, stream, full), full.rows());
    compare_words(
        "expand_uniform vs expand_uniform_row",
        &name,
        &want,
        &got,
        n,
    )?;
    let small: Vec<i64> = (0..n)
        .map(|_| (rng.next_u64() % 2001) as i64 - 1000)
        .collect();
    for (r, row) in want.chunks_mut(n).enumerate() {
        let m = &all[full.global_index(r, q_total)];
        for (o, &v) in row.iter_mut().zip(&small) {
            *o = m.from_i64(v);
        }
    }
    let got = download(be, &be.upload_small(&small, full), full.rows());
    compare_words("upload_small vs v mod q", &name, &want, &got, n)?;

    // Automorphisms.
    let x = be.upload(&w);
    for g in test_galois_elements(&p) {
        let map = automorphism_ntt_map(log_n, g);
        let mut want = vec![0u64; w.len()];
        for r in 0..full.rows() {
            let (src, dst) = (&w[r * n..(r + 1) * n], &mut want[r * n..(r + 1) * n]);
            for (o, &i) in dst.iter_mut().zip(&map) {
                *o = src[i as usize];
            }
        }
        let mut out = be.alloc(full.rows());
        be.automorphism(&x, g, &mut out, full, Domain::Ntt);
        compare_words(
            &format!("automorphism g={g} Ntt vs map"),
            &name,
            &want,
            &download(be, &out, full.rows()),
            n,
        )?;
        let two_n = 2 * n;
        for r in 0..full.rows() {
            let m = &all[full.global_index(r, q_total)];
            for i in 0..n {
                let t = (i * g as usize) % two_n;
                let v = w[r * n + i];
                if t < n {
                    want[r * n + t] = v;
                } else {
                    want[r * n + t - n] = m.neg(v);
                }
            }
        }
        be.automorphism(&x, g, &mut out, full, Domain::Coeff);
        compare_words(
            &format!("automorphism g={g} Coeff vs X→X^g"),
            &name,
            &want,
            &download(be, &out, full.rows()),
            n,
        )?;
    }

    // Key switching kernels and rescale.
    let key_b: Vec<Vec<u64>> = (0..p.dnum()).map(|_| random_words(&p, full, rng)).collect();
    let key_a: Vec<Vec<u64>> = (0..p.dnum()).map(|_| random_words(&p, full, rng)).collect();
    let (kb, ka): (Vec<_>, Vec<_>) = (
        key_b.iter().map(|w| be.upload(w)).collect(),
        key_a.iter().map(|w| be.upload(w)).collect(),
    );
    for level in test_levels(&p) {
        let qb = Basis::q(level + 1);
        let kl = p.special_at(level);
        let ext = Basis::qp(level + 1, kl);
        let c = random_words(&p, qb, rng);
        let want = model_decompose(&p, &c, level);
        let mut digits: Vec<B::Buffer> = (0..want.len()).map(|_| be.alloc(ext.rows())).collect();
        be.decompose(&be.upload(&c), level, &mut digits);
        for (j, (d, wd)) in digits.iter().zip(&want).enumerate() {
            compare_words(
                &format!("decompose level {level} digit {j} vs BasisConverter"),
                &name,
                wd,
                &download(be, d, ext.rows()),
                n,
            )?;
        }

        let (mut acc0, mut acc1) = (be.alloc(ext.rows()), be.alloc(ext.rows()));
        be.key_inner_product(&digits, &kb, &ka, level, &mut acc0, &mut acc1);
        for (acc, key, what) in [(&acc0, &key_b, "acc0"), (&acc1, &key_a, "acc1")] {
            let mut want_acc = vec![0u64; ext.rows() * n];
            for r in 0..ext.rows() {
                let g = ext.global_index(r, q_total);
                let kr = full.row_of(g, q_total).unwrap();
                let m = &all[g];
                for col in 0..n {
                    want_acc[r * n + col] = (0..want.len()).fold(0u64, |s, j| {
                        m.mul_add(s, want[j][r * n + col], key[j][kr * n + col])
                    });
                }
            }
            compare_words(
                &format!("key_inner_product {what} level {level} vs Σ d_j·k_j"),
                &name,
                &want_acc,
                &download(be, acc, ext.rows()),
                n,
            )?;
        }

        let xw = random_words(&p, ext, rng);
        let drop_g: Vec<usize> = (0..kl).map(|j| q_total + j).collect();
        let plan = DivRoundPlan::new(&all[..=level], &p.p()[..kl]);
        let want = model_div_round(&p, &xw, qb, &drop_g, &plan);
        let mut out = be.alloc(level + 1);
        be.mod_down(&be.upload(&xw), level, &mut out);
        compare_words(
            &format!("mod_down level {level} vs DivRoundPlan"),
            &name,
            &want,
            &download(be, &out, level + 1),
            n,
        )?;
        // ModDown by p_0 alone (public-key encryption): x over Q_level ∪ {p_0}.
        let xw = random_words(&p, Basis::qp(level + 1, 1), rng);
        let plan = DivRoundPlan::new(&all[..=level], &p.p()[..1]);
        let want = model_div_round(&p, &xw, qb, &[q_total], &plan);
        be.mod_down_p0(&be.upload(&xw), level, &mut out);
        compare_words(
            &format!("mod_down_p0 level {level} vs DivRoundPlan"),
            &name,
            &want,
            &download(be, &out, level + 1),
            n,
        )?;

        if level >= 1 {
            let plan = DivRoundPlan::new(&all[..level], &all[level..=level]);
            let want = model_div_round(&p, &c, Basis::q(level), &[level], &plan);
            let mut out = be.alloc(level);
            be.rescale(&be.upload(&c), level, &mut out);
            compare_words(
                &format!("rescale level {level} vs DivRoundPlan"),
                &name,
                &want,
                &download(be, &out, level),
                n,
            )?;
        }
    }
    Ok(())
}

// ---- parameter sets and runners -------------------------------------------------------------

fn insecure(mut lit: CkksParamsLiteral) -> CkksParamsLiteral {
    lit.name = format!("INSECURE_CONFORMANCE_{}", lit.name);
    lit
}

/// The parameter sets of the conformance suite for a ring degree `2^log_n` (12 to 16), with
/// different limb counts and digit shapes. Sets at 2^12 and 2^13 are insecure by design (they
/// exist to be fast); 2^14 and 2^15 use the named 128-bit sets; 2^16 uses a small 128-bit set
/// (4 Q primes, 2 special primes) to bound the run time.
pub fn conformance_params(log_n: u32) -> Vec<CkksParams> {
    let lits = match log_n {
        12 => vec![
            params::insecure_logn12(),                   // 7 Q, 2 P, dnum 4 (α = 2)
            insecure(params::ckks_128_custom(12, 2, 1)), // 3 Q, 3 P, dnum 1 (α = 3)
        ],
        13 => vec![
            insecure(params::ckks_128_custom(13, 4, 2)), // 5 Q, 3 P, dnum 2 (α = 3)
            insecure(params::ckks_128_custom(13, 9, 10)), // 10 Q, 1 P, dnum 10 (α = 1)
        ],
        14 => vec![params::ckks_128_logn14()], // 7 Q, 2 P, dnum 4
        15 => vec![params::ckks_128_logn15()], // 11 Q, 3 P, dnum 4
        16 => vec![params::ckks_128_custom(16, 3, 2)], // 4 Q, 2 P, dnum 2
        _ => panic!("conformance covers log_n 12..=16"),
    };
    lits.into_iter()
        .map(|l| l.validate().expect("conformance parameter set"))
        .collect()
}

fn report(params: &CkksParams, r: Conformance) {
    if let Err(e) = r {
        panic!("[{}] {e}", params.name());
    }
}

/// Runs [`check_all_ops`] (or [`check_core_ops`] when `full` is false) for the candidate made by
/// `make` against [`CpuBackend::scalar`], on every set of [`conformance_params`]`(log_n)`.
/// Panics with the first mismatch.
pub fn run_ops<B: PolyBackend>(log_n: u32, full: bool, make: impl Fn(&CkksParams) -> B) {
    for p in conformance_params(log_n) {
        let reference = CpuBackend::scalar(&p);
        let candidate = make(&p);
        let mut rng = test_rng(0xC0F0 + log_n as u64);
        let r = if full {
            check_all_ops(&reference, &candidate, &mut rng)
        } else {
            check_core_ops(&reference, &candidate, &mut rng)
        };
        report(&p, r);
    }
}

/// Runs [`check_one_per_family`] (after [`check_not_all_zero`]) for the candidate made by `make`
/// against [`CpuBackend::scalar`], on every set of [`conformance_params`]`(log_n)`.
pub fn run_one_per_family<B: PolyBackend>(log_n: u32, make: impl Fn(&CkksParams) -> B) {
    for p in conformance_params(log_n) {
        let reference = CpuBackend::scalar(&p);
        let candidate = make(&p);
        let mut rng = test_rng(0xFA0 + log_n as u64);
        report(&p, check_not_all_zero(&candidate, &mut rng));
        report(&p, check_one_per_family(&reference, &candidate, &mut rng));
    }
}

/// Whether a device test of package `backend` should run: `available` is `Ok` when the device is
/// usable, `Err(reason)` when not. Without a device the test is skipped with the reason printed,
/// unless `VEIL_REQUIRE_DEVICE` requires this backend (CI sets it where a device, possibly a
/// software one, must be there), which turns the skip into a failure. `VEIL_REQUIRE_DEVICE` is
/// `1` (every backend) or a comma-separated list of backends (`wgpu`, `cuda`, or package names
/// such as `veil-backend-wgpu`).
pub fn device_gate(backend: &str, available: Result<(), String>) -> bool {
    match available {
        Ok(()) => true,
        Err(reason) => {
            let required = std::env::var("VEIL_REQUIRE_DEVICE").is_ok_and(|v| {
                v.trim() == "1"
                    || v.split(',').map(str::trim).any(|b| {
                        !b.is_empty()
                            && (backend == b || backend.strip_prefix("veil-backend-") == Some(b))
                    })
            });
            if required {
                panic!("VEIL_REQUIRE_DEVICE requires {backend}, but no usable device: {reason}");
            }
            // Written to the process's stderr, not through `eprintln!`, so the test harness's
            // output capture does not hide it; once per test binary.
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED (every device test of this binary): no usable device: {reason}"
                );
            });
            false
        }
    }
}

/// Runs [`check_ckks_flow`] for the candidate made by `make` against [`CpuBackend::scalar`], on
/// the first set of [`conformance_params`]`(log_n)`. Panics with the first mismatch.
pub fn run_flow<B: PolyBackend>(log_n: u32, make: impl Fn(&CkksParams) -> B) {
    let p = conformance_params(log_n).remove(0);
    let r = check_ckks_flow(
        Arc::new(CpuBackend::scalar(&p)),
        Arc::new(make(&p)),
        0xF10 + log_n as u64,
    );
    report(&p, r);
}

/// A whole bootstrap (`INSECURE_LOGN12_BOOT_H64`, 256 sparse slots: ModRaise, SubSum,
/// CoeffToSlot, EvalMod, SlotToCoeff) on both backends from the same seeds: the keys, the input
/// and every output word must agree.
pub fn check_bootstrap<A: PolyBackend, B: PolyBackend>(
    reference: Arc<A>,
    candidate: Arc<B>,
    seed: u64,
) -> Conformance {
    use veil_core::circuits::{BootParams, Bootstrapper, Lean};
    let ca = Ckks::new(reference);
    let cb = Ckks::new(candidate);
    let p = ca.params().clone();
    let mut bp = BootParams::for_params(&p).expect("a sparse-secret set");
    bp.slots = 256;
    let ba = Bootstrapper::new(&ca, bp.clone()).expect("enough levels");
    let bb = Bootstrapper::new(&cb, bp).expect("enough levels");
    let (mut ra, mut rb) = (test_rng(seed), test_rng(seed));
    let ska = ca.gen_secret_key(&mut ra);
    let skb = cb.gen_secret_key(&mut rb);
    let ka = ba
        .gen_keys(&ca, &ska, &[], Lean::None, &mut ra, |_, _| {})
        .unwrap();
    let kb = bb
        .gen_keys(&cb, &skb, &[], Lean::None, &mut rb, |_, _| {})
        .unwrap();
    let x = random_values(&mut test_rng(seed ^ 0xB007), 256, 1.0);
    let (pa, pb) = (
        ca.encode(&x, 256, 0, p.default_scale()).unwrap(),
        cb.encode(&x, 256, 0, p.default_scale()).unwrap(),
    );
    let xa = ca.encrypt_sk(&ska, &pa, &mut ra).unwrap();
    let xb = cb.encrypt_sk(&skb, &pb, &mut rb).unwrap();
    cmp_ct("bootstrap input", &ca, &cb, &xa, &xb)?;
    let (oa, _) = ba.bootstrap(&ca, &ka, &xa).unwrap();
    let (ob, _) = bb.bootstrap(&cb, &kb, &xb).unwrap();
    cmp_ct("bootstrap output", &ca, &cb, &oa, &ob)
}

/// Runs [`check_bootstrap`] for the backend made by `make` against [`CpuBackend::scalar`].
pub fn run_boot<B: PolyBackend>(make: impl Fn(&CkksParams) -> B) {
    let p = params::insecure_logn12_boot().validate().unwrap();
    let r = check_bootstrap(
        Arc::new(CpuBackend::scalar(&p)),
        Arc::new(make(&p)),
        0xB0075,
    );
    report(&p, r);
}

/// Runs [`check_reference_model`] for the backend made by `make`, on the sets of
/// [`conformance_params`]`(log_n)`. Panics with the first mismatch.
pub fn run_model<B: PolyBackend>(log_n: u32, make: impl Fn(&CkksParams) -> B) {
    for p in conformance_params(log_n) {
        let mut rng = test_rng(0x30DE1 + log_n as u64);
        report(&p, check_reference_model(&make(&p), &mut rng));
    }
}

/// Expands to the conformance tests of a candidate backend against [`CpuBackend::scalar`]:
/// every operation at N = 2^12, 2^13, 2^14 and 2^15 (several limb counts and digit shapes), the
/// NTT and key-switching kernels at 2^16, a whole CKKS flow at every N, and the comparison with
/// `veil-core`'s definitions at 2^12.
///
/// The argument is an expression of type `Fn(&CkksParams) -> impl PolyBackend`; an optional
/// leading identifier wraps the tests in a module of that name (to instantiate several backends
/// in one file):
///
/// ```ignore
/// veil_tests::testgen_conformance!(fast_2t, |p: &CkksParams| CpuBackend::fast(p, 2).unwrap());
/// ```
#[macro_export]
macro_rules! testgen_conformance {
    ($name:ident, $make:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $crate::testgen_conformance!($make);
        }
    };
    ($make:expr) => {
        #[test]
        fn conformance_ops_logn12() {
            $crate::conformance::run_ops(12, true, $make);
        }
        #[test]
        fn conformance_ops_logn13() {
            $crate::conformance::run_ops(13, true, $make);
        }
        #[test]
        fn conformance_ops_logn14() {
            $crate::conformance::run_ops(14, true, $make);
        }
        #[test]
        fn conformance_ops_logn15() {
            $crate::conformance::run_ops(15, true, $make);
        }
        #[test]
        fn conformance_ops_logn16() {
            $crate::conformance::run_ops(16, false, $make);
        }
        #[test]
        fn conformance_flow_logn12() {
            $crate::conformance::run_flow(12, $make);
        }
        #[test]
        fn conformance_flow_logn13() {
            $crate::conformance::run_flow(13, $make);
        }
        #[test]
        fn conformance_flow_logn14() {
            $crate::conformance::run_flow(14, $make);
        }
        #[test]
        fn conformance_flow_logn15() {
            $crate::conformance::run_flow(15, $make);
        }
        #[test]
        fn conformance_flow_logn16() {
            $crate::conformance::run_flow(16, $make);
        }
        #[test]
        fn conformance_model_logn12() {
            $crate::conformance::run_model(12, $make);
        }
        #[test]
        fn conformance_boot_logn12() {
            $crate::conformance::run_boot($make);
        }
    };
}

/// The conformance tests of a device backend, each gated by [`device_gate`]: `$available` is an
/// expression of type `Fn() -> Result<(), String>` (is the device usable?), `$make` as in
/// [`testgen_conformance!`](crate::testgen_conformance).
///
/// Two tiers:
/// - `full`: every op at N = 2^12 … 2^16 (several limb counts and digit shapes), one check per op
///   family after a not-all-zero check at 2^16, whole CKKS flows at every N, and the comparison
///   with `veil-core`'s definitions at 2^12 (about 25 s on Mesa lavapipe on 2 cores),
/// - `light`: every op at N = 2^12, 2^13 and 2^14, one op per family at 2^15 and 2^16, whole CKKS
///   flows at 2^12 and 2^13, and the comparison with `veil-core`'s definitions at 2^12 (for a
///   device much slower than the CPU reference).
///
/// ```ignore
/// veil_tests::testgen_conformance_device!(light, || probe(), |p: &CkksParams| make(p));
/// ```
#[macro_export]
macro_rules! testgen_conformance_device {
    (@test $name:ident, $available:expr, $body:expr) => {
        #[test]
        fn $name() {
            if $crate::conformance::device_gate(env!("CARGO_PKG_NAME"), ($available)()) {
                $body;
            }
        }
    };
    (light, $available:expr, $make:expr) => {
        $crate::testgen_conformance_device!(@test conformance_ops_logn12, $available,
            $crate::conformance::run_ops(12, true, $make));
        $crate::testgen_conformance_device!(@test conformance_ops_logn13, $available,
            $crate::conformance::run_ops(13, true, $make));
        $crate::testgen_conformance_device!(@test conformance_ops_logn14, $available,
            $crate::conformance::run_ops(14, true, $make));
        $crate::testgen_conformance_device!(@test conformance_families_logn15, $available,
            $crate::conformance::run_one_per_family(15, $make));
        $crate::testgen_conformance_device!(@test conformance_families_logn16, $available,
            $crate::conformance::run_one_per_family(16, $make));
        $crate::testgen_conformance_device!(@test conformance_flow_logn12, $available,
            $crate::conformance::run_flow(12, $make));
        $crate::testgen_conformance_device!(@test conformance_flow_logn13, $available,
            $crate::conformance::run_flow(13, $make));
        $crate::testgen_conformance_device!(@test conformance_model_logn12, $available,
            $crate::conformance::run_model(12, $make));
        $crate::testgen_conformance_device!(@test conformance_boot_logn12, $available,
            $crate::conformance::run_boot($make));
    };
    (full, $available:expr, $make:expr) => {
        $crate::testgen_conformance_device!(@test conformance_ops_logn12, $available,
            $crate::conformance::run_ops(12, true, $make));
        $crate::testgen_conformance_device!(@test conformance_ops_logn13, $available,
            $crate::conformance::run_ops(13, true, $make));
        $crate::testgen_conformance_device!(@test conformance_ops_logn14, $available,
            $crate::conformance::run_ops(14, true, $make));
        $crate::testgen_conformance_device!(@test conformance_ops_logn15, $available,
            $crate::conformance::run_ops(15, true, $make));
        $crate::testgen_conformance_device!(@test conformance_ops_logn16, $available,
            $crate::conformance::run_ops(16, true, $make));
        $crate::testgen_conformance_device!(@test conformance_families_logn16, $available,
            $crate::conformance::run_one_per_family(16, $make));
        $crate::testgen_conformance_device!(@test conformance_flow_logn12, $available,
            $crate::conformance::run_flow(12, $make));
        $crate::testgen_conformance_device!(@test conformance_flow_logn13, $available,
            $crate::conformance::run_flow(13, $make));
        $crate::testgen_conformance_device!(@test conformance_flow_logn14, $available,
            $crate::conformance::run_flow(14, $make));
        $crate::testgen_conformance_device!(@test conformance_flow_logn15, $available,
            $crate::conformance::run_flow(15, $make));
        $crate::testgen_conformance_device!(@test conformance_flow_logn16, $available,
            $crate::conformance::run_flow(16, $make));
        $crate::testgen_conformance_device!(@test conformance_model_logn12, $available,
            $crate::conformance::run_model(12, $make));
        $crate::testgen_conformance_device!(@test conformance_boot_logn12, $available,
            $crate::conformance::run_boot($make));
    };
}
