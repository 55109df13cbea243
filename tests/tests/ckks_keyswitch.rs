//! The public key-switching steps of the RLWE layer, composed by hand, against the evaluator's
//! rotations word for word; and the typed shape errors of the steps and of the evaluator.

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, Ckks, EvaluationKeys, SecretKey, C64};
use veil_core::params;
use veil_core::{Basis, Domain, Error, PolyBackend};
use veil_tests::conformance::download;
use veil_tests::*;

struct Fixture {
    ck: Ckks<CpuBackend>,
    sk: SecretKey,
    keys: EvaluationKeys<CpuBackend>,
    ct: Ciphertext<CpuBackend>,
    x: Vec<C64>,
}

fn fixture(be: CpuBackend) -> Fixture {
    let ck = Ckks::new(Arc::new(be));
    let p = ck.params().clone();
    let mut rng = test_rng(11);
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, &[1, 3, -2], true, &mut rng, |_, _| {})
        .unwrap();
    let x = random_values(&mut rng, p.max_slots(), 1.0);
    let pt = ck
        .encode(&x, p.max_slots(), p.max_level(), p.default_scale())
        .unwrap();
    let ct = ck.encrypt_pk(&pk, &pt, &mut rng).unwrap();
    Fixture {
        ck,
        sk,
        keys,
        ct,
        x,
    }
}

fn backends() -> Vec<CpuBackend> {
    backends_for(&params::insecure_logn12().validate().unwrap())
}

fn backends_for(p: &veil_core::CkksParams) -> Vec<CpuBackend> {
    vec![CpuBackend::scalar(p), CpuBackend::fast(p, 2).unwrap()]
}

/// N = 2^12, 3 Q primes in one digit and 3 special primes: key switches at levels 0 and 1 use two
/// of the special primes ([`veil_core::CkksParams::special_at`]), at level 2 all three.
fn narrowing_set() -> veil_core::CkksParams {
    let mut lit = params::ckks_128_custom(12, 2, 1);
    lit.name = format!("INSECURE_{}", lit.name);
    lit.validate().unwrap()
}

/// The largest `|a − b|` over the coefficients (centred mod every prime of `Q_level`, in the
/// coefficient domain), `0` when the two are the same words; `i64::MAX` when the difference is
/// not the same small integer on every prime.
fn max_diff(ck: &Ckks<CpuBackend>, a: &Vec<u64>, b: &Vec<u64>, level: usize) -> i64 {
    let be = ck.backend();
    let (n, rows) = (ck.params().n(), level + 1);
    let (x, y) = (download(be, a, rows), download(be, b, rows));
    let qs = &ck.params().q()[..rows];
    let d: Vec<u64> = x
        .iter()
        .zip(&y)
        .enumerate()
        .map(|(i, (&u, &v))| qs[i / n].sub(u, v))
        .collect();
    let mut buf = be.upload(&d);
    be.intt(&mut buf, Basis::q(rows));
    let c = download(be, &buf, rows);
    let mut worst = 0i64;
    for col in 0..n {
        let v = qs[0].center(c[col]);
        if (1..rows).any(|r| qs[r].center(c[r * n + col]) != v) {
            return i64::MAX;
        }
        worst = worst.max(v.abs());
    }
    worst
}

fn words(ck: &Ckks<CpuBackend>, ct: &Ciphertext<CpuBackend>) -> Vec<Vec<u64>> {
    ct.polys()
        .iter()
        .map(|p| download(ck.backend(), p, ct.level() + 1))
        .collect()
}

/// Decompose `c_1` once, gadget-product it with two different Galois keys: the results are the
/// hoisted rotations word for word, and so is `rotate` (a key switch to `σ_g^{-1}(s)`, then
/// `σ_g` of the two polynomials, done by hand here). Both decrypt to the rotated slots.
#[test]
fn decompose_once_gadget_product_many() {
    for be in backends() {
        let f = fixture(be);
        let (ck, r) = (&f.ck, f.ck.rlwe());
        let level = f.ct.level();
        let basis = Basis::q(level + 1);
        let h = r.decompose(&f.ct.polys()[1], level).unwrap();
        assert_eq!(h.level(), level);
        assert_eq!(h.digits().len(), ck.params().digits_at(level));
        let hoisted = ck.rotate_hoisted(&f.ct, &[1, 3], &f.keys).unwrap();
        for (k, want_hoisted) in [1i64, 3].into_iter().zip(&hoisted) {
            let g = ck.encoder().galois_element_for_rotation(k);
            let key = &f.keys.galois[&g];
            // Hoisted: σ_g on the shared digits.
            let [k0, k1] = r.gadget_product(&h, Some(g), key).unwrap();
            let mut c0 = ck.backend().alloc(basis.rows());
            ck.backend()
                .automorphism(&f.ct.polys()[0], g, &mut c0, basis, Domain::Ntt);
            ck.backend().add_assign(&mut c0, &k0, basis);
            let by_hand = vec![
                download(ck.backend(), &c0, level + 1),
                download(ck.backend(), &k1, level + 1),
            ];
            assert!(
                by_hand == words(ck, want_hoisted),
                "hoisted rotation by {k}"
            );
            // The same step through the RLWE ciphertext API.
            let via_rlwe = r.automorphism_hoisted(&f.ct, &h, g, key).unwrap();
            assert!(words(ck, &via_rlwe) == words(ck, want_hoisted));

            // By hand the other way: the key switch without σ_g, c_0 added, then σ_g of the two
            // polynomials. `rotate` is the same computation on its own decomposition.
            let [m0, m1] = r.gadget_product(&h, None, key).unwrap();
            let mut s0 = ck.backend().alloc(basis.rows());
            let mut s1 = ck.backend().alloc(basis.rows());
            let mut sum = ck.backend().alloc(basis.rows());
            ck.backend()
                .copy_rows(&f.ct.polys()[0], basis, &mut sum, basis);
            ck.backend().add_assign(&mut sum, &m0, basis);
            ck.backend()
                .automorphism(&sum, g, &mut s0, basis, Domain::Ntt);
            ck.backend()
                .automorphism(&m1, g, &mut s1, basis, Domain::Ntt);
            let rotated = ck.rotate(&f.ct, k, &f.keys).unwrap();
            let by_hand = vec![
                download(ck.backend(), &s0, level + 1),
                download(ck.backend(), &s1, level + 1),
            ];
            assert!(by_hand == words(ck, &rotated), "rotation by {k}");
            assert!(
                words(ck, &rotated) == words(ck, want_hoisted),
                "rotate = hoisted, {k}"
            );
            // Both decrypt to the rotated slots.
            let want = rotate_left(&f.x, k);
            for ct in [&rotated, want_hoisted] {
                let got = ck.decrypt_decode(&f.sk, ct).unwrap();
                let st = veil_core::ckks::PrecisionStats::compute(&want, &got);
                assert!(st.min_bits() > 15.0, "rotation by {k}: {st}");
            }
        }
    }
}

/// The lazy gadget product followed by ModDown equals the gadget product, and lazy hoisted
/// rotations followed by `mod_down_ext` equal the hoisted rotations: word for word where the
/// level's special-prime count is even (ModDown's centred rounding is then odd-symmetric, so it
/// commutes with the automorphism's sign flips), within `k` units per coefficient where it is odd
/// (the order of ModDown and `σ_g` changes the rounding; both are correct key switches). A lazy
/// sum with one ModDown decrypts to the sum of the rotations.
#[test]
fn lazy_then_mod_down_is_the_non_lazy_result() {
    let narrow = narrowing_set();
    assert_eq!(
        (0..=2).map(|l| narrow.special_at(l)).collect::<Vec<_>>(),
        [2, 2, 3],
        "the set should narrow below the top"
    );
    let cases = backends()
        .into_iter()
        .map(|be| (be, None))
        .chain([0, 1, 2].into_iter().flat_map(|l| {
            backends_for(&narrow)
                .into_iter()
                .map(move |be| (be, Some(l)))
        }));
    for (be, at) in cases {
        let mut f = fixture(be);
        if let Some(l) = at {
            f.ck.drop_level_assign(&mut f.ct, l).unwrap();
        }
        let (ck, r) = (&f.ck, f.ck.rlwe());
        let level = f.ct.level();
        let kl = ck.params().special_at(level);
        // Word for word (0) or within the ModDown's overshoot (k units) on every coefficient.
        let allowed = if kl % 2 == 0 { 0 } else { kl as i64 };
        let agree = |a: &Vec<u64>, b: &Vec<u64>, what: &str| {
            let d = max_diff(ck, a, b, level);
            assert!(
                d <= allowed,
                "{what}: differs by {d} > {allowed} (level {level}, {} of {} special primes, {})",
                kl,
                ck.params().p().len(),
                ck.params().name()
            );
        };
        let h = r.decompose(&f.ct.polys()[1], level).unwrap();
        let relin = f.keys.relin.as_ref().unwrap();
        for (g, key) in [(None, relin), {
            let g = ck.encoder().galois_element_for_rotation(-2);
            (Some(g), &f.keys.galois[&g])
        }] {
            let eager = r.gadget_product(&h, g, key).unwrap();
            let lazy = r.gadget_product_lazy(&h, g, key).unwrap();
            for (e, l) in eager.iter().zip(&lazy) {
                let down = r.mod_down(l, level).unwrap();
                agree(
                    &down,
                    e,
                    &format!("lazy gadget product + ModDown (g = {g:?})"),
                );
            }
        }
        let ks = [1i64, 3, -2];
        let eager = ck.rotate_hoisted(&f.ct, &ks, &f.keys).unwrap();
        let lazy = ck.rotate_hoisted_lazy(&f.ct, &ks, &f.keys).unwrap();
        for (e, l) in eager.iter().zip(&lazy) {
            let down = ck.mod_down_ext(l);
            for (x, y) in down.polys().iter().zip(e.polys()) {
                agree(x, y, "lazy hoisted rotation + ModDown");
            }
        }
        // A lazy sum with one ModDown is not the sum of the ModDowns word for word (the rounding
        // of each is skipped), but it decrypts to the same sum of rotations.
        let mut lazy = lazy.into_iter();
        let mut acc = lazy.next().unwrap();
        for l in lazy {
            ck.add_ext_assign(&mut acc, &l).unwrap();
        }
        let mut want = vec![C64::default(); f.x.len()];
        for k in ks {
            for (w, v) in want.iter_mut().zip(rotate_left(&f.x, k)) {
                *w = *w + v;
            }
        }
        let got = ck.decrypt_decode(&f.sk, &ck.mod_down_ext(&acc)).unwrap();
        let st = veil_core::ckks::PrecisionStats::compute(&want, &got);
        assert!(st.min_bits() > 15.0, "lazy sum: {st}");
    }
}

/// Slot-count mismatches are `SlotMismatch`, and the key-switching steps refuse short buffers
/// and short keys with `Shape`.
#[test]
fn slot_and_shape_mismatches_are_typed() {
    let p = params::insecure_logn12().validate().unwrap();
    let f = fixture(CpuBackend::scalar(&p));
    let ck = &f.ck;
    let (slots, top, scale) = (p.max_slots(), p.max_level(), p.default_scale());
    let half = slots / 2;
    let pt_half = ck.encode_real(&[0.5], half, top, scale).unwrap();
    let ct_half = ck.encrypt_sk(&f.sk, &pt_half, &mut test_rng(3)).unwrap();
    let want = Error::SlotMismatch {
        expected: slots,
        found: half,
    };
    let err = |r: Result<(), Error>| r.unwrap_err();
    assert_eq!(ck.add(&f.ct, &ct_half).map(|_| ()).unwrap_err(), want);
    assert_eq!(ck.sub(&f.ct, &ct_half).map(|_| ()).unwrap_err(), want);
    let mut c = ck.clone_ct(&f.ct);
    assert_eq!(err(ck.add_assign(&mut c, &ct_half)), want);
    assert_eq!(err(ck.add_plain_assign(&mut c, &pt_half)), want);
    assert_eq!(err(ck.sub_plain_assign(&mut c, &pt_half)), want);
    assert_eq!(err(ck.mul_plain_assign(&mut c, &pt_half)), want);
    assert_eq!(
        ck.mul_no_relin(&f.ct, &ct_half).map(|_| ()).unwrap_err(),
        want
    );
    let mut a = ck.rotate_hoisted_lazy(&f.ct, &[1], &f.keys).unwrap();
    let b = ck.rotate_hoisted_lazy(&ct_half, &[1], &f.keys).unwrap();
    assert_eq!(err(ck.add_ext_assign(&mut a[0], &b[0])), want);

    let r = ck.rlwe();
    let short = ck.backend().alloc(1);
    assert_eq!(
        r.decompose(&short, top).map(|_| ()).unwrap_err(),
        Error::Shape {
            what: "rows of the polynomial to decompose",
            expected: top + 1,
            found: 1,
        }
    );
    let q_only = ck.backend().alloc(top + 1);
    assert!(matches!(
        r.mod_down(&q_only, top).map(|_| ()).unwrap_err(),
        Error::Shape { expected, found, .. } if expected == top + 1 + p.p().len() && found == top + 1
    ));
    assert!(matches!(
        r.decompose(&q_only, top + 1).map(|_| ()).unwrap_err(),
        Error::InvalidLevel { .. }
    ));
    let h = r.decompose(&f.ct.polys()[1], top).unwrap();
    let g = ck.encoder().galois_element_for_rotation(1);
    assert!(matches!(
        r.gadget_product(&h, Some(2), &f.keys.galois[&g])
            .map(|_| ())
            .unwrap_err(),
        Error::InvalidParameters(_)
    ));
    let low = {
        let mut c = ck.clone_ct(&f.ct);
        ck.drop_level_assign(&mut c, top - 1).unwrap();
        c
    };
    assert_eq!(
        r.automorphism_hoisted(&low, &h, g, &f.keys.galois[&g])
            .map(|_| ())
            .unwrap_err(),
        Error::LevelMismatch {
            left: top - 1,
            right: top
        }
    );
}
