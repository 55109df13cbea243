//! The circuits layer against `f64`: baby-step giant-step linear transforms (dense and sparse
//! diagonal sets, the rotation keys they name, level and scale kept), and Chebyshev polynomial
//! evaluation (interpolation error, homomorphic precision, the planned depth and scale).
//!
//! N = 2^12 (`INSECURE_LOGN12`, 6 levels of 40 bits, Δ = 2^40), all `N/2` slots, on the scalar
//! reference backend and the 2-thread fast backend.

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::backend::PolyBackend;
use veil_core::circuits::{ChebyshevPoly, LinearTransform};
use veil_core::ckks::{Ckks, PrecisionStats, C64};
use veil_core::params;
use veil_tests::*;

fn engines() -> Vec<Ckks<CpuBackend>> {
    let p = params::insecure_logn12().validate().unwrap();
    vec![
        Ckks::new(Arc::new(CpuBackend::scalar(&p))),
        Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap())),
    ]
}

fn run_transform<B: PolyBackend>(ck: &Ckks<B>, t: &LinearTransform, seed: u64) -> PrecisionStats {
    let p = ck.params().clone();
    let mut rng = test_rng(seed);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, &t.rotations(), false, &mut rng, |_, _| {})
        .unwrap();
    let n = t.slots();
    let x = random_values(&mut rng, n, 1.0);
    let top = p.max_level();
    let ct = ck
        .encrypt_sk(
            &sk,
            &ck.encode(&x, n, top, p.default_scale()).unwrap(),
            &mut rng,
        )
        .unwrap();
    let enc = t.encode(ck, top).unwrap();
    let (out, cost) = enc.eval(ck, &keys, &ct).unwrap();
    assert_eq!(out.level(), top - 1, "a transform consumes one level");
    assert!(
        (out.scale() / ct.scale() - 1.0).abs() < 1e-12,
        "a transform keeps the scale"
    );
    assert_eq!(
        (cost.baby_rotations + cost.giant_rotations) as usize,
        t.rotations().len(),
        "every named rotation key is used once"
    );
    let want = t.apply(&x).unwrap();
    PrecisionStats::compute(&want, &ck.decrypt_decode(&sk, &out).unwrap())
}

/// A dense random matrix with entries in [-1, 1]/√n: the output is O(1), and every diagonal is
/// present, so BSGS runs √n-ish baby and giant steps.
#[test]
fn dense_transform_matches_f64() {
    for ck in engines() {
        let n = 64;
        let mut rng = test_rng(7);
        let rows: Vec<Vec<C64>> = (0..n)
            .map(|_| random_values(&mut rng, n, 1.0 / (n as f64).sqrt()))
            .collect();
        let t = LinearTransform::from_dense(&rows).unwrap();
        assert_eq!(t.baby_step(), 8);
        assert_eq!(t.rotations().len(), 7 + 7);
        let st = run_transform(&ck, &t, 11);
        println!("dense 64×64 ({}): {st}", ck.backend().name());
        // Measured 23.9 bits worst slot, 26.9 mean.
        assert!(st.min_bits() > 21.0, "{st}");
    }
}

/// A sparse set of diagonals (a butterfly-like band at stride 16 over all N/2 slots).
#[test]
fn sparse_transform_matches_f64() {
    let ck = &engines()[1];
    let n = ck.params().max_slots();
    let mut rng = test_rng(3);
    let mut t = LinearTransform::new(n).unwrap();
    for k in [-48i64, -32, -16, 0, 16, 32, 48] {
        t.set_diagonal(k, random_values(&mut rng, n, 0.3)).unwrap();
    }
    let st = run_transform(ck, &t, 5);
    println!(
        "sparse 7-diagonal, {n} slots: {st}, rotations {:?}",
        t.rotations()
    );
    assert!(t.rotations().len() <= 6);
    assert!(st.min_bits() > 21.0, "{st}");
}

/// Composition is the matrix product (checked in f64 on a vector).
#[test]
fn compose_is_the_product() {
    let n = 32;
    let mut rng = test_rng(9);
    let a = LinearTransform::from_dense(
        &(0..n)
            .map(|_| random_values(&mut rng, n, 1.0))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let mut b = LinearTransform::new(n).unwrap();
    b.set_diagonal(3, random_values(&mut rng, n, 1.0)).unwrap();
    b.set_diagonal(-1, random_values(&mut rng, n, 1.0)).unwrap();
    let x = random_values(&mut rng, n, 1.0);
    let want = a.apply(&b.apply(&x).unwrap()).unwrap();
    let got = a.compose(&b).unwrap().apply(&x).unwrap();
    for (w, g) in want.iter().zip(&got) {
        assert!((*w - *g).abs() < 1e-12);
    }
}

#[test]
fn transform_refuses_wrong_inputs() {
    let ck = &engines()[0];
    let n = ck.params().max_slots();
    assert!(LinearTransform::new(48).is_err());
    let mut t = LinearTransform::new(n).unwrap();
    assert!(t.set_diagonal(1, vec![C64::real(1.0); n - 1]).is_err());
    assert!(t.set_diagonal(1, vec![C64::real(f64::NAN); n]).is_err());
    assert!(t.encode(ck, 2).is_err(), "no diagonal");
    t.set_diagonal(1, vec![C64::real(1.0); n]).unwrap();
    let enc = t.encode(ck, 3).unwrap();
    let mut rng = test_rng(1);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, &t.rotations(), false, &mut rng, |_, _| {})
        .unwrap();
    let pt = ck
        .encode_real(&[0.5], n, 4, ck.params().default_scale())
        .unwrap();
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).unwrap();
    assert!(enc.eval(ck, &keys, &ct).is_err(), "level mismatch");
    let empty = ck
        .gen_evaluation_keys(&sk, &[], false, &mut rng, |_, _| {})
        .unwrap();
    let mut ct3 = ck.clone_ct(&ct);
    ck.drop_level_assign(&mut ct3, 3).unwrap();
    assert!(enc.eval(ck, &empty, &ct3).is_err(), "missing rotation key");
}

/// Interpolation error of the Chebyshev fit itself (no encryption).
#[test]
fn chebyshev_interpolation_converges() {
    let f = |x: f64| (x * 3.0).sin() / (1.0 + x * x);
    let mut last = f64::MAX;
    for d in [7usize, 15, 31, 63] {
        let p = ChebyshevPoly::interpolate(f, -2.0, 2.0, d).unwrap();
        let err = (0..=1000)
            .map(|i| -2.0 + 4.0 * i as f64 / 1000.0)
            .map(|x| (p.eval_f64(x) - f(x)).abs())
            .fold(0.0, f64::max);
        println!("degree {d}: max error {err:.3e}");
        assert!(err < last);
        last = err;
    }
    assert!(last < 1e-8);
    assert!(ChebyshevPoly::new(vec![], -1.0, 1.0).is_err());
    assert!(ChebyshevPoly::new(vec![1.0], 1.0, -1.0).is_err());
}

fn eval_poly<B: PolyBackend>(
    ck: &Ckks<B>,
    poly: &ChebyshevPoly,
    lo: f64,
    hi: f64,
    seed: u64,
) -> PrecisionStats {
    let p = ck.params().clone();
    let mut rng = test_rng(seed);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, &[], false, &mut rng, |_, _| {})
        .unwrap();
    let n = p.max_slots();
    let x: Vec<f64> = random_values(&mut rng, n, 1.0)
        .iter()
        .map(|v| lo + (hi - lo) * 0.5 * (v.re + 1.0))
        .collect();
    let top = p.max_level();
    let ct = ck
        .encrypt_sk(
            &sk,
            &ck.encode_real(&x, n, top, p.default_scale()).unwrap(),
            &mut rng,
        )
        .unwrap();
    let target = p.default_scale();
    let (out, cost) = poly.eval(ck, &keys, &ct, target).unwrap();
    assert_eq!(out.level(), top - poly.depth(), "the planned depth");
    assert_eq!(out.scale(), target, "the target scale, exactly");
    println!("degree {}: depth {}, {cost:?}", poly.degree(), poly.depth());
    assert_eq!(
        cost.ct_mults as usize,
        poly.products(),
        "the planned products"
    );
    let want: Vec<C64> = x.iter().map(|&v| C64::real(poly.eval_f64(v))).collect();
    PrecisionStats::compute(&want, &ck.decrypt_decode(&sk, &out).unwrap())
}

/// Polynomials of degree 3 to 15 on [-1, 1] and on a mapped interval, every coefficient nonzero.
#[test]
fn chebyshev_eval_matches_f64() {
    for ck in engines() {
        for (d, lo, hi) in [
            (3usize, -1.0, 1.0),
            (7, -1.0, 1.0),
            (12, -4.0, 4.0),
            (15, -1.0, 1.0),
        ] {
            let f = |x: f64| 1.0 / (1.0 + (-x).exp());
            let poly = ChebyshevPoly::interpolate(f, lo, hi, d).unwrap();
            let depth = poly.depth();
            let log = (d + 1).next_power_of_two().trailing_zeros() as usize;
            assert_eq!(depth, log + usize::from(lo != -1.0), "degree {d}");
            let st = eval_poly(&ck, &poly, lo, hi, 21 + d as u64);
            println!(
                "sigmoid degree {d} on [{lo}, {hi}] ({}): {st}",
                ck.backend().name()
            );
            // Measured 24–26 bits worst slot.
            assert!(st.min_bits() > 21.0, "{st}");
        }
    }
}

/// Sparse coefficients (an odd polynomial: every even coefficient zero) and the level check.
#[test]
fn chebyshev_odd_and_errors() {
    let ck = &engines()[1];
    let poly =
        ChebyshevPoly::new(vec![0.0, 0.6, 0.0, -0.2, 0.0, 0.05, 0.0, 0.01], -1.0, 1.0).unwrap();
    let st = eval_poly(ck, &poly, -1.0, 1.0, 4);
    println!("odd degree 7: {st}");
    assert!(st.min_bits() > 21.0, "{st}");
    // An odd interpolant with giant steps (sin(3x): only odd baby powers feed its leaves; the
    // even ones are made only as factors).
    let mut c = ChebyshevPoly::interpolate(|x| (3.0 * x).sin(), -1.0, 1.0, 31)
        .unwrap()
        .coeffs;
    c.iter_mut().step_by(2).for_each(|x| *x = 0.0);
    let odd = ChebyshevPoly::new(c, -1.0, 1.0).unwrap();
    let dense =
        ChebyshevPoly::interpolate(|x| (3.0 * x).sin() + (2.0 * x).cos(), -1.0, 1.0, 31).unwrap();
    assert!(
        odd.products() <= dense.products(),
        "odd powers never cost more"
    );
    let st = eval_poly(ck, &odd, -1.0, 1.0, 5);
    println!("odd degree 31: {st}");
    assert!(st.min_bits() > 18.0, "{st}");
    // Too few levels for the depth.
    let deep = ChebyshevPoly::interpolate(f64::sin, -1.0, 1.0, 127).unwrap();
    let mut rng = test_rng(2);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, &[], false, &mut rng, |_, _| {})
        .unwrap();
    let p = ck.params();
    let ct = ck
        .encrypt_sk(
            &sk,
            &ck.encode_real(&[0.5], p.max_slots(), p.max_level(), p.default_scale())
                .unwrap(),
            &mut rng,
        )
        .unwrap();
    assert!(deep.eval(ck, &keys, &ct, p.default_scale()).is_err());
    assert!(poly.eval(ck, &keys, &ct, f64::NAN).is_err());
}

/// The depth is the optimum `⌈log2(d + 1)⌉` for every degree up to 130, dense or odd.
#[test]
fn chebyshev_depth_is_optimal() {
    for d in 1..=130usize {
        let log = (d + 1).next_power_of_two().trailing_zeros() as usize;
        let dense = ChebyshevPoly::new(vec![0.5; d + 1], -1.0, 1.0).unwrap();
        assert_eq!(dense.depth(), log, "degree {d}");
        let odd: Vec<f64> = (0..=d)
            .map(|i| if i % 2 == 1 { 0.5 } else { 0.0 })
            .collect();
        assert!(ChebyshevPoly::new(odd, -1.0, 1.0).unwrap().depth() <= log);
        let mapped = ChebyshevPoly::new(vec![0.5; d + 1], 0.0, 3.0).unwrap();
        assert_eq!(mapped.depth(), log + 1);
    }
}

/// Sums of plaintext products over compact subring plaintexts (`Ckks::mul_subring_sums`, the
/// executor's `mul_plain_sums`) give exactly the words of term-by-term `mul_plain` + `add`, at
/// full slots (`g = 1`) and at an eighth of them (`g = 4`), with an empty sum among them and
/// ciphertexts shared across sums; the executor counts what the sequential form counts, and the
/// decryption matches the `f64` products.
#[test]
fn subring_sums_equal_term_by_term_products() {
    use veil_core::circuits::{CkksExec, Exec, PlainTerm, PtValues, SymExec};
    for (e, ck) in engines().iter().enumerate() {
        let p = ck.params().clone();
        let mut rng = test_rng(90 + e as u64);
        let sk = ck.gen_secret_key(&mut rng);
        let keys = ck
            .gen_evaluation_keys(&sk, &[], false, &mut rng, |_, _| {})
            .unwrap();
        let top = p.max_level();
        for slots in [p.n() / 2, p.n() / 8] {
            let xs: Vec<Vec<C64>> = (0..3)
                .map(|_| random_values(&mut rng, slots, 1.0))
                .collect();
            let cts: Vec<_> = xs
                .iter()
                .map(|x| {
                    let pt = ck.encode(x, slots, top, p.default_scale()).unwrap();
                    ck.encrypt_sk(&sk, &pt, &mut rng).unwrap()
                })
                .collect();
            let ws: Vec<Vec<C64>> = (0..5)
                .map(|_| random_values(&mut rng, slots, 1.0))
                .collect();
            let plan: [&[(usize, usize)]; 3] = [&[(0, 0), (1, 1), (2, 2)], &[], &[(0, 3), (2, 4)]];
            let vals: Vec<_> = ws.iter().map(|w| move || w.clone()).collect();
            let groups: Vec<Vec<PlainTerm<'_, _>>> = plan
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&(c, w)| (&cts[c], None, &vals[w] as PtValues<'_>))
                        .collect()
                })
                .collect();
            let ex = CkksExec::new(ck, &keys, slots);
            let got = ex.mul_plain_sums(&groups).unwrap();
            // The dry run counts the default (sequential) form.
            let sym = SymExec::new(slots);
            let sct = sym.fresh(top);
            let sym_groups: Vec<Vec<PlainTerm<'_, _>>> = plan
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&(_, w)| (&sct, None, &vals[w] as PtValues<'_>))
                        .collect()
                })
                .collect();
            sym.mul_plain_sums(&sym_groups).unwrap();
            let scale = ck.rescale_prime(top);
            for (g, out) in plan.iter().zip(&got) {
                let Some(out) = out else {
                    assert!(g.is_empty(), "only the empty sum is None");
                    continue;
                };
                let mut want = None;
                for &(c, w) in g.iter() {
                    let pt = ck.encode(&ws[w], slots, top, scale).unwrap();
                    let t = ck.mul_plain(&cts[c], &pt).unwrap();
                    match &mut want {
                        None => want = Some(t),
                        Some(a) => ck.add_assign(a, &t).unwrap(),
                    }
                }
                let want = want.unwrap();
                for (a, b) in want.polys().iter().zip(out.polys()) {
                    let rows = top + 1;
                    assert_eq!(
                        veil_tests::conformance::download(ck.backend(), a, rows),
                        veil_tests::conformance::download(ck.backend(), b, rows),
                        "engine {e}, {slots} slots: words differ"
                    );
                }
                let f: Vec<C64> = (0..slots)
                    .map(|i| {
                        g.iter()
                            .map(|&(c, w)| xs[c][i] * ws[w][i])
                            .fold(C64::default(), |s, v| s + v)
                    })
                    .collect();
                let mut dec = ck.clone_ct(out);
                ck.rescale_assign(&mut dec).unwrap();
                let st = PrecisionStats::compute(&f, &ck.decrypt_decode(&sk, &dec).unwrap());
                assert!(
                    st.real.max_err.max(st.imag.max_err) < 1e-6,
                    "engine {e}, {slots} slots"
                );
            }
            let c = ex.counts();
            assert_eq!(
                (c.pt_mults, c.adds),
                (5, 3),
                "five products, three additions"
            );
            assert_eq!(c, sym.counts(), "counted as the dry run counts");

            // Keyed plaintexts under a budget that cuts every sum into parts of two terms, run
            // twice (the second time from the compact cache), then a sum of five added into an
            // existing accumulator: the same words, counted as the dry run counts.
            let ex2 = CkksExec::new(ck, &keys, slots).with_sum_budget(1);
            let keyed: Vec<Vec<PlainTerm<'_, _>>> = plan
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&(c, w)| (&cts[c], Some(100 + w as u64), &vals[w] as PtValues<'_>))
                        .collect()
                })
                .collect();
            let words = |ct: &veil_core::ckks::Ciphertext<_>| -> Vec<Vec<u64>> {
                ct.polys()
                    .iter()
                    .map(|p| veil_tests::conformance::download(ck.backend(), p, ct.level() + 1))
                    .collect()
            };
            for _ in 0..2 {
                for (a, b) in ex2.mul_plain_sums(&keyed).unwrap().iter().zip(&got) {
                    assert_eq!(
                        a.as_ref().map(words),
                        b.as_ref().map(words),
                        "keyed, in parts"
                    );
                }
            }
            let five: Vec<PlainTerm<'_, _>> = (0..5)
                .map(|w| (&cts[w % 3], Some(100 + w as u64), &vals[w] as PtValues<'_>))
                .collect();
            let mut acc = got[0].as_ref().map(|c| ck.clone_ct(c));
            ex2.mul_plain_sum_acc(&mut acc, &five).unwrap();
            let mut want = ck.clone_ct(got[0].as_ref().unwrap());
            for w in 0..5 {
                let pt = ck.encode(&ws[w], slots, top, scale).unwrap();
                ck.add_assign(&mut want, &ck.mul_plain(&cts[w % 3], &pt).unwrap())
                    .unwrap();
            }
            assert_eq!(
                words(acc.as_ref().unwrap()),
                words(&want),
                "added into an accumulator"
            );
            let sym2 = SymExec::new(slots);
            let sym_keyed: Vec<Vec<PlainTerm<'_, _>>> = plan
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&(_, w)| (&sct, Some(100 + w as u64), &vals[w] as PtValues<'_>))
                        .collect()
                })
                .collect();
            sym2.mul_plain_sums(&sym_keyed).unwrap();
            sym2.mul_plain_sums(&sym_keyed).unwrap();
            let mut sacc = Some(sct);
            let sfive: Vec<PlainTerm<'_, _>> = (0..5)
                .map(|w| (&sct, Some(100 + w as u64), &vals[w] as PtValues<'_>))
                .collect();
            sym2.mul_plain_sum_acc(&mut sacc, &sfive).unwrap();
            assert_eq!(
                ex2.counts(),
                sym2.counts(),
                "parts and accumulators counted alike"
            );
        }
    }
}

/// GELU's split candidates (EncFormer §IV-B3) on both real vectors of a complex-packed
/// ciphertext: `p(a) + i·p(b)` for `z = a + i·b`, against `f64`, at the planned depth and the
/// input's scale, for BOLT's degree-4 pair and the erf fit's degree-7 pair. The dry run on
/// `SymExec` counts what the real run counted.
#[test]
fn part_polynomials_match_f64() {
    use veil_core::circuits::{eval_part_polys, part_poly_depth, CkksExec, Exec, SymExec};
    use veil_core::nonlinear::gelu::{Gelu, GeluKind};
    let ck = &engines()[1];
    let p = ck.params().clone();
    let mut rng = test_rng(41);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, &[], true, &mut rng, |_, _| {})
        .unwrap();
    let n = p.max_slots();
    // Real and imaginary parts over GELU's working range, and a few far out (|x| up to 32),
    // where the candidates are large but are never selected.
    let mut z: Vec<C64> = random_values(&mut rng, n, 4.0);
    for (k, v) in z.iter_mut().enumerate().take(16) {
        *v = C64::new(32.0 * (k as f64 / 8.0 - 1.0), -2.0 * (k as f64 / 8.0 - 1.0));
    }
    let top = p.max_level();
    let scale = p.default_scale();
    let ct = ck
        .encrypt_sk(&sk, &ck.encode(&z, n, top, scale).unwrap(), &mut rng)
        .unwrap();
    for kind in [GeluKind::Bolt, GeluKind::Erf] {
        let (f0, f1) = Gelu { kind }.candidates();
        let d = f0.len().max(f1.len()) - 1;
        let polys = vec![f0.clone(), f1.clone()];
        let ex = CkksExec::new(ck, &keys, n);
        // The outputs at half the input's scale (any target scale is exact).
        let target = scale / 2.0;
        let out = eval_part_polys(&ex, &ct, scale, target, &polys).unwrap();
        let sym = SymExec::new(n);
        eval_part_polys(&sym, &sym.fresh(top), scale, target, &polys).unwrap();
        assert_eq!(ex.counts(), sym.counts(), "{kind:?}: dry run = real run");
        let ev = |c: &[f64], x: f64| c.iter().rev().fold(0.0, |a, &k| a * x + k);
        for (o, c) in out.iter().zip([&f0, &f1]) {
            assert_eq!(o.level(), top - part_poly_depth(d), "{kind:?}: depth");
            assert!(
                (o.scale() / target - 1.0).abs() < 1e-9,
                "{kind:?}: the target scale"
            );
            let got = ck.decrypt_decode(&sk, o).unwrap();
            let mut worst: f64 = 0.0;
            let mut worst_far: f64 = 0.0;
            for (k, (g, x)) in got.iter().zip(&z).enumerate() {
                let (wr, wi) = (ev(c, x.re), ev(c, x.im));
                let e = (g.re - wr).abs().max((g.im - wi).abs());
                if k < 16 {
                    worst_far = worst_far.max(e / wr.abs().max(wi.abs()).max(1.0));
                } else {
                    worst = worst.max(e);
                }
            }
            println!(
                "{kind:?} degree {d}: worst {worst:.2e} on |x| ≤ 4, far relative {worst_far:.2e}"
            );
            // Measured: BOLT 3·10⁻⁸, erf 8·10⁻⁷; far out, relative ≤ 6·10⁻⁷.
            assert!(worst < 1e-5, "{kind:?}: {worst}");
            assert!(worst_far < 1e-5, "{kind:?}: {worst_far}");
        }
    }
}
