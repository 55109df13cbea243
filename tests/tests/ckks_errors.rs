//! Negative tests: every misuse of the CKKS API returns its typed [`Error`] (no panic).

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, Ckks, EvaluationKeys, PublicKey, SecretKey, C64};
use veil_core::params::{self, CkksParamsLiteral};
use veil_core::{CkksParams, Error};
use veil_tests::*;

/// `unwrap_err` for results whose `Ok` type has no `Debug` (plaintexts, ciphertexts).
trait ErrOf {
    fn err_of(self) -> Error;
}

impl<T> ErrOf for Result<T, Error> {
    fn err_of(self) -> Error {
        match self {
            Ok(_) => panic!("expected an error, got Ok"),
            Err(e) => e,
        }
    }
}

struct Fixture {
    ck: Ckks<CpuBackend>,
    p: CkksParams,
    sk: SecretKey,
    pk: PublicKey<CpuBackend>,
    keys: EvaluationKeys<CpuBackend>,
    ct: Ciphertext<CpuBackend>,
}

fn fixture(lit: CkksParamsLiteral, seed: u64) -> Fixture {
    let p = lit.validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
    let mut rng = test_rng(seed);
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, &[1], false, &mut rng, |_, _| {})
        .unwrap();
    let x = random_values(&mut rng, p.max_slots(), 1.0);
    let pt = ck
        .encode(&x, p.max_slots(), p.max_level(), p.default_scale())
        .unwrap();
    let ct = ck.encrypt_pk(&pk, &pt, &mut rng).unwrap();
    Fixture {
        ck,
        p,
        sk,
        pk,
        keys,
        ct,
    }
}

fn small() -> Fixture {
    fixture(params::insecure_logn10(), 1)
}

/// Same ring degree, different primes: a different parameter set.
fn other() -> Fixture {
    let mut lit = params::insecure_logn10();
    lit.name = "INSECURE_OTHER_LOGN10".into();
    lit.log_q = vec![55, 40, 40];
    lit.log_p = vec![55, 55];
    fixture(lit, 2)
}

#[test]
fn level_mismatch() {
    let f = small();
    let mut low = f.ck.clone_ct(&f.ct);
    f.ck.drop_level_assign(&mut low, f.p.max_level() - 1)
        .unwrap();
    let top = f.p.max_level();
    assert_eq!(
        f.ck.add(&f.ct, &low).err_of(),
        Error::LevelMismatch {
            left: top,
            right: top - 1
        }
    );
    assert!(matches!(
        f.ck.sub(&low, &f.ct),
        Err(Error::LevelMismatch { .. })
    ));
    assert!(matches!(
        f.ck.mul_relin(&f.ct, &low, &f.keys),
        Err(Error::LevelMismatch { .. })
    ));
    // A plaintext below the ciphertext's level.
    let pt =
        f.ck.encode(&[C64::real(1.0)], f.p.max_slots(), 0, f.p.default_scale())
            .unwrap();
    assert!(matches!(
        f.ck.mul_plain(&f.ct, &pt),
        Err(Error::LevelMismatch { .. })
    ));
    let mut c = f.ck.clone_ct(&f.ct);
    assert!(matches!(
        f.ck.add_plain_assign(&mut c, &pt),
        Err(Error::LevelMismatch { .. })
    ));
    // Lazy rotation outputs at different levels.
    let a = f.ck.rotate_hoisted_lazy(&f.ct, &[1], &f.keys).unwrap();
    let b = f.ck.rotate_hoisted_lazy(&low, &[1], &f.keys).unwrap();
    let mut a = a.into_iter().next().unwrap();
    assert!(matches!(
        f.ck.add_ext_assign(&mut a, &b[0]),
        Err(Error::LevelMismatch { .. })
    ));
}

#[test]
fn scale_mismatch() {
    let f = small();
    let mut other = f.ck.clone_ct(&f.ct);
    other.set_scale(f.p.default_scale() * 2.0);
    assert_eq!(
        f.ck.add(&f.ct, &other).err_of(),
        Error::ScaleMismatch {
            left: f.p.default_scale(),
            right: f.p.default_scale() * 2.0
        }
    );
    let pt =
        f.ck.encode(
            &[C64::real(1.0)],
            f.p.max_slots(),
            f.p.max_level(),
            f.p.default_scale() * 4.0,
        )
        .unwrap();
    let mut c = f.ck.clone_ct(&f.ct);
    assert!(matches!(
        f.ck.add_plain_assign(&mut c, &pt),
        Err(Error::ScaleMismatch { .. })
    ));
}

#[test]
fn missing_galois_key() {
    let f = small();
    let g5 = f.ck.encoder().galois_element_for_rotation(5);
    assert_eq!(
        f.ck.rotate(&f.ct, 5, &f.keys).err_of(),
        Error::MissingGaloisKey(g5)
    );
    let conj = f.ck.encoder().galois_element_conjugate();
    assert_eq!(
        f.ck.conjugate(&f.ct, &f.keys).err_of(),
        Error::MissingGaloisKey(conj)
    );
    // One missing amount among present ones fails the whole hoisted batch.
    assert_eq!(
        f.ck.rotate_hoisted(&f.ct, &[1, 5], &f.keys).err_of(),
        Error::MissingGaloisKey(g5)
    );
    assert!(matches!(
        f.ck.rotate_hoisted_lazy(&f.ct, &[5, 1], &f.keys),
        Err(Error::MissingGaloisKey(g)) if g == g5
    ));
}

#[test]
fn missing_relin_key() {
    let f = small();
    let no_keys = EvaluationKeys::default();
    assert_eq!(
        f.ck.mul_relin(&f.ct, &f.ct, &no_keys).err_of(),
        Error::MissingRelinKey
    );
    let mut d = f.ck.mul_no_relin(&f.ct, &f.ct).unwrap();
    assert_eq!(
        f.ck.relinearize_assign(&mut d, &no_keys).err_of(),
        Error::MissingRelinKey
    );
}

#[test]
fn degree_mismatch() {
    let f = small();
    let d = f.ck.mul_no_relin(&f.ct, &f.ct).unwrap();
    assert_eq!(
        f.ck.rotate(&d, 1, &f.keys).err_of(),
        Error::DegreeMismatch {
            found: 2,
            expected: 1
        }
    );
    assert!(matches!(
        f.ck.mul_no_relin(&d, &f.ct),
        Err(Error::DegreeMismatch { .. })
    ));
    let mut c = f.ck.clone_ct(&f.ct);
    assert_eq!(
        f.ck.relinearize_assign(&mut c, &f.keys).err_of(),
        Error::DegreeMismatch {
            found: 1,
            expected: 2
        }
    );
}

#[test]
fn rescale_at_level_zero() {
    let f = small();
    let mut c = f.ck.clone_ct(&f.ct);
    f.ck.drop_level_assign(&mut c, 0).unwrap();
    assert_eq!(f.ck.rescale_assign(&mut c).err_of(), Error::LevelExhausted);
    // The ciphertext is untouched and still decrypts.
    assert_eq!(c.level(), 0);
    assert!(f.ck.decrypt_decode(&f.sk, &c).is_ok());
}

#[test]
fn drop_to_a_higher_level() {
    let f = small();
    let mut c = f.ck.clone_ct(&f.ct);
    f.ck.drop_level_assign(&mut c, 1).unwrap();
    assert_eq!(
        f.ck.drop_level_assign(&mut c, 2).err_of(),
        Error::InvalidLevel {
            level: 2,
            max_level: 1
        }
    );
    // Encoding above the top level.
    let top = f.p.max_level();
    assert_eq!(
        f.ck.encode(&[C64::real(1.0)], 4, top + 1, f.p.default_scale())
            .err_of(),
        Error::InvalidLevel {
            level: top + 1,
            max_level: top
        }
    );
}

#[test]
fn too_many_slots() {
    let f = small();
    let (slots, scale) = (f.p.max_slots(), f.p.default_scale());
    let v = vec![C64::real(0.5); 9];
    assert_eq!(
        f.ck.encode(&v, 8, 0, scale).err_of(),
        Error::SlotCount { given: 9, slots: 8 }
    );
    let v = vec![C64::real(0.5); slots + 1];
    assert_eq!(
        f.ck.encode(&v, slots, 0, scale).err_of(),
        Error::SlotCount {
            given: slots + 1,
            slots
        }
    );
    // More slots than N/2, or a count that is not a power of two.
    assert!(matches!(
        f.ck.encode(&[C64::real(1.0)], 2 * slots, 0, scale),
        Err(Error::InvalidParameters(_))
    ));
    assert!(matches!(
        f.ck.encode(&[C64::real(1.0)], 6, 0, scale),
        Err(Error::InvalidParameters(_))
    ));
    assert!(matches!(
        f.ck.encode(&[C64::real(1.0)], 0, 0, scale),
        Err(Error::InvalidParameters(_))
    ));
}

#[test]
fn non_finite_and_overflowing_values() {
    let f = small();
    let (slots, scale, top) = (f.p.max_slots(), f.p.default_scale(), f.p.max_level());
    for bad in [
        C64::real(f64::NAN),
        C64::new(0.0, f64::NAN),
        C64::real(f64::INFINITY),
        C64::new(0.0, f64::NEG_INFINITY),
    ] {
        let mut v = vec![C64::real(0.25); slots];
        v[slots / 2] = bad;
        assert_eq!(
            f.ck.encode(&v, slots, top, scale).err_of(),
            Error::NonFinite
        );
        let mut c = f.ck.clone_ct(&f.ct);
        assert_eq!(
            f.ck.mul_const_assign(&mut c, bad, scale).err_of(),
            Error::NonFinite
        );
        assert_eq!(
            f.ck.add_const_assign(&mut c, bad).err_of(),
            Error::NonFinite
        );
    }
    assert_eq!(
        f.ck.encode_real(&[1e300], slots, top, scale).err_of(),
        Error::EncodingOverflow
    );
    assert!(matches!(
        f.ck.encode(&[C64::real(1.0)], slots, top, f64::NAN),
        Err(Error::InvalidParameters(_))
    ));
}

#[test]
fn keys_from_another_parameter_set() {
    let f = small();
    let g = other();
    assert_ne!(f.p.id(), g.p.id());
    let pt =
        f.ck.encode(
            &[C64::real(1.0)],
            f.p.max_slots(),
            f.p.max_level(),
            f.p.default_scale(),
        )
        .unwrap();
    let mut rng = test_rng(3);
    assert_eq!(
        f.ck.encrypt_pk(&g.pk, &pt, &mut rng).err_of(),
        Error::ParameterMismatch
    );
    assert_eq!(
        f.ck.encrypt_sk(&g.sk, &pt, &mut rng).err_of(),
        Error::ParameterMismatch
    );
    assert_eq!(
        f.ck.decrypt(&g.sk, &f.ct).err_of(),
        Error::ParameterMismatch
    );
    assert_eq!(
        f.ck.gen_public_key(&g.sk, &mut rng).err_of(),
        Error::ParameterMismatch
    );
    assert!(matches!(
        f.ck.gen_evaluation_keys(&g.sk, &[1], false, &mut rng, |_, _| {}),
        Err(Error::ParameterMismatch)
    ));
    // Evaluation keys of the other set (same N, so the same Galois elements).
    assert_eq!(
        f.ck.mul_relin(&f.ct, &f.ct, &g.keys).err_of(),
        Error::ParameterMismatch
    );
    assert_eq!(
        f.ck.rotate(&f.ct, 1, &g.keys).err_of(),
        Error::ParameterMismatch
    );
    assert!(matches!(
        f.ck.rotate_hoisted(&f.ct, &[1], &g.keys),
        Err(Error::ParameterMismatch)
    ));
    assert!(matches!(
        f.ck.rotate_hoisted_lazy(&f.ct, &[1], &g.keys),
        Err(Error::ParameterMismatch)
    ));
    // Nothing above broke the fixtures.
    assert!(f.ck.decrypt_decode(&f.sk, &f.ct).is_ok());
    assert!(g.ck.decrypt_decode(&g.sk, &g.ct).is_ok());
}

#[test]
fn invalid_galois_element_and_insecure_parameters() {
    let f = small();
    let mut rng = test_rng(4);
    assert!(matches!(
        f.ck.gen_galois_key(&f.sk, 4, &mut rng),
        Err(Error::InvalidParameters(_))
    ));
    let mut lit = params::ckks_128_logn14();
    lit.log_q = vec![60; 9];
    lit.name = "NOT_INSECURE".into();
    assert!(matches!(
        lit.validate(),
        Err(Error::InsecureParameters { .. })
    ));
}

/// Objects from another parameter set (another N, or the same N with other primes) are refused
/// with `ParameterMismatch` at every entry point, never indexed out of bounds.
#[test]
fn foreign_ciphertexts_and_plaintexts_are_refused() {
    let f = fixture(params::insecure_logn12(), 31);
    let g = fixture(params::insecure_logn10(), 32);
    let mut lit = params::insecure_logn12();
    lit.log_p = vec![59, 60];
    let h = fixture(lit, 33);
    for other in [&g, &h] {
        let foreign = &other.ct;
        assert_eq!(f.ck.add(&f.ct, foreign).err_of(), Error::ParameterMismatch);
        assert_eq!(f.ck.sub(foreign, &f.ct).err_of(), Error::ParameterMismatch);
        assert_eq!(
            f.ck.mul_relin(&f.ct, foreign, &f.keys).err_of(),
            Error::ParameterMismatch
        );
        assert_eq!(
            f.ck.rotate(foreign, 1, &f.keys).err_of(),
            Error::ParameterMismatch
        );
        assert_eq!(
            f.ck.decrypt(&f.sk, foreign).err_of(),
            Error::ParameterMismatch
        );
        let mut c = other.ck.clone_ct(foreign);
        assert_eq!(
            f.ck.rescale_assign(&mut c).err_of(),
            Error::ParameterMismatch
        );
        assert_eq!(f.ck.neg_assign(&mut c).err_of(), Error::ParameterMismatch);
        let pt = other
            .ck
            .encode_real(&[0.5], 4, 0, other.p.default_scale())
            .unwrap();
        assert_eq!(f.ck.decode(&pt).err_of(), Error::ParameterMismatch);
        assert_eq!(
            f.ck.encrypt_pk(&f.pk, &pt, &mut test_rng(1)).err_of(),
            Error::ParameterMismatch
        );
        let mut mine = f.ck.clone_ct(&f.ct);
        assert_eq!(
            f.ck.mul_plain_assign(&mut mine, &pt).err_of(),
            Error::ParameterMismatch
        );
    }
}

/// A value whose integer encoding would wrap modulo `Q_level` is refused, not wrapped.
#[test]
fn encoding_beyond_the_modulus_is_refused() {
    let f = fixture(params::insecure_logn12(), 34);
    // At level 0 (q_0 ≈ 2^60) with scale 2^40, 2^21 needs 61 bits + sign.
    assert_eq!(
        f.ck.encode_real(&[2f64.powi(21)], 4, 0, f.p.default_scale())
            .err_of(),
        Error::EncodingOverflow
    );
    // The same value fits at the top level (Q ≈ 2^300).
    assert!(f
        .ck
        .encode_real(&[2f64.powi(21)], 4, f.p.max_level(), f.p.default_scale())
        .is_ok());
    // A constant scale that would zero or negate the ciphertext's scale.
    let mut c = f.ck.clone_ct(&f.ct);
    for bad in [0.0, -1.0, f64::NAN] {
        assert!(matches!(
            f.ck.mul_const_assign(&mut c, C64::real(1.0), bad).err_of(),
            Error::InvalidParameters(_)
        ));
    }
}

/// Special primes too small for the gadget digits make key switching useless: refused.
#[test]
fn special_primes_must_cover_the_digits() {
    let mut lit = params::insecure_logn12();
    lit.log_p = vec![30];
    lit.dnum = Some(1);
    assert!(matches!(lit.validate(), Err(Error::InvalidParameters(_))));
    // dnum larger than the digits needed is normalized (no empty digits in keys).
    let mut lit = params::insecure_logn12();
    lit.dnum = Some(5); // 7 primes: alpha = 2 gives 4 non-empty digits
    assert_eq!(lit.validate().unwrap().dnum(), 4);
}

/// Galois elements must be odd and below 2N.
#[test]
fn even_galois_elements_are_refused() {
    let f = fixture(params::insecure_logn12(), 35);
    assert!(matches!(
        f.ck.automorphism(&f.ct, 2, &f.keys).err_of(),
        Error::InvalidParameters(_)
    ));
    let big = 2 * f.p.n() as u64 + 1;
    assert!(matches!(
        f.ck.automorphism(&f.ct, big, &f.keys).err_of(),
        Error::InvalidParameters(_)
    ));
}

/// Operands with different slot counts are `SlotMismatch { expected, found }` (before the `rlwe`
/// split they were `InvalidParameters("slot counts differ")`).
#[test]
fn slot_count_mismatch_is_typed() {
    let f = small();
    let (slots, top, scale) = (f.p.max_slots(), f.p.max_level(), f.p.default_scale());
    let pt = f.ck.encode_real(&[0.5], slots / 4, top, scale).unwrap();
    let ct = f.ck.encrypt_pk(&f.pk, &pt, &mut test_rng(8)).unwrap();
    let want = Error::SlotMismatch {
        expected: slots,
        found: slots / 4,
    };
    assert_eq!(f.ck.add(&f.ct, &ct).err_of(), want);
    assert_eq!(f.ck.mul_relin(&f.ct, &ct, &f.keys).err_of(), want);
    let mut c = f.ck.clone_ct(&f.ct);
    assert_eq!(f.ck.sub_assign(&mut c, &ct).err_of(), want);
    assert_eq!(f.ck.mul_plain_assign(&mut c, &pt).err_of(), want);
}

/// `Ckks::mul_const_matrix` refuses what it cannot compute, each with its typed error.
#[test]
fn constant_matrix_misuse() {
    let f = small();
    let mut low = f.ck.clone_ct(&f.ct);
    f.ck.drop_level_assign(&mut low, f.p.max_level() - 1)
        .unwrap();
    let q = f.ck.rescale_prime(f.p.max_level());
    assert!(matches!(
        f.ck.mul_const_matrix(&[], &[], 0, q),
        Err(Error::InvalidParameters(_))
    ));
    assert!(matches!(
        f.ck.mul_const_matrix(&[&f.ct, &f.ct], &[1.0; 3], 2, q),
        Err(Error::Shape { .. })
    ));
    assert_eq!(
        f.ck.mul_const_matrix(&[&f.ct], &[f64::NAN], 1, q).err_of(),
        Error::NonFinite
    );
    assert!(matches!(
        f.ck.mul_const_matrix(&[&f.ct, &low], &[1.0, 1.0], 1, q),
        Err(Error::LevelMismatch { .. })
    ));
    assert!(matches!(
        f.ck.mul_const_matrix(&[&f.ct], &[1.0], 1, 0.5),
        Err(Error::InvalidParameters(_))
    ));
    assert!(matches!(
        f.ck.mul_const_matrix(&[&f.ct], &[1e300], 1, q),
        Err(Error::InvalidParameters(_))
    ));
    let o = other();
    assert!(f
        .ck
        .mul_const_matrix(&[&f.ct, &o.ct], &[1.0, 1.0], 1, q)
        .is_err());
}

/// A matrix of constants over ciphertexts, rescaled, against `f64` (weights of mixed sign and
/// magnitude, a zero row, and more inputs than a lazy lane holds between reductions).
#[test]
fn constant_matrix_matches_f64() {
    let f = fixture(params::insecure_logn12(), 9);
    let n = f.p.max_slots();
    let top = f.p.max_level();
    let mut rng = test_rng(10);
    let k = 1100;
    let base: Vec<Vec<C64>> = (0..4).map(|_| random_values(&mut rng, n, 1.0)).collect();
    let cts: Vec<_> = base
        .iter()
        .map(|v| {
            let pt = f.ck.encode(v, n, top, f.p.default_scale()).unwrap();
            f.ck.encrypt_sk(&f.sk, &pt, &mut rng).unwrap()
        })
        .collect();
    let ins: Vec<_> = (0..k).map(|j| &cts[j % 4]).collect();
    let rows = 3;
    let w: Vec<f64> = (0..rows * k)
        .map(|i| {
            if i / k == 1 {
                0.0
            } else {
                let u = (i as f64 * 0.618_033_988_7).fract() - 0.5;
                u * if i % 7 == 0 { 3.0 } else { 0.01 }
            }
        })
        .collect();
    let q = f.ck.rescale_prime(top);
    let mut outs = f.ck.mul_const_matrix(&ins, &w, rows, q).unwrap();
    let mut worst = 0.0f64;
    for (r, ct) in outs.iter_mut().enumerate() {
        f.ck.rescale_assign(ct).unwrap();
        assert_eq!(ct.level(), top - 1);
        let got = f.ck.decrypt_decode(&f.sk, ct).unwrap();
        for s in 0..n {
            let want: f64 = (0..k).map(|j| w[r * k + j] * base[j % 4][s].re).sum();
            worst = worst.max((got[s].re - want).abs());
        }
    }
    // Each weight is exact to 2^-21 of the largest (1.5): 1100 terms of |x| ≤ 1 give at most
    // 1100·1.5·2^-21 ≈ 8e-4 in the worst case, about 2.5e-5 typically; CKKS noise is far below.
    assert!(worst < 1e-4, "worst error {worst}");
}
