//! Scalar and optimized CPU paths are bit-identical: the conformance suite for
//! `CpuBackend::fast(p, 1)` and `CpuBackend::fast(p, 2)` against `CpuBackend::scalar(p)`, the
//! scalar reference against `veil-core`'s definitions, and sanity checks that the comparison can
//! fail (a deliberately perturbed backend is caught).

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::backend::{Basis, Domain, PolyBackend};
use veil_core::params;
use veil_core::CkksParams;
use veil_tests::conformance::{self, compare_words, Mismatch};
use veil_tests::test_rng;

veil_tests::testgen_conformance!(fast_1t, |p: &CkksParams| CpuBackend::fast(p, 1).unwrap());
veil_tests::testgen_conformance!(fast_2t, |p: &CkksParams| CpuBackend::fast(p, 2).unwrap());

/// The oracle itself against `veil-core`'s formulas (2^12 is in the macro; 2^13 adds the
/// one-prime-per-digit and one-special-prime shapes).
#[test]
fn scalar_reference_matches_core_definitions() {
    conformance::run_model(12, CpuBackend::scalar);
    conformance::run_model(13, CpuBackend::scalar);
}

// ---- the comparison can fail --------------------------------------------------------------

/// Which operation a [`Faulty`] backend corrupts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Ntt,
    Intt,
    Mul,
    MulScalar,
    AutomorphismCoeff,
    CopyRows,
    Decompose,
    KeyInnerProduct,
    ModDown,
    ModDownP0,
    Rescale,
    /// Not a wrong word but a device fault: every download and sync fails.
    Device,
}

/// The scalar CPU backend with one operation's output perturbed by one in a single word (the
/// last coefficient of the last row it wrote), kept fully reduced so only the comparison can
/// tell.
struct Faulty {
    inner: CpuBackend,
    fault: Fault,
}

impl Faulty {
    fn new(p: &CkksParams, fault: Fault) -> Self {
        Self {
            inner: CpuBackend::scalar(p),
            fault,
        }
    }
    fn poke(&self, f: Fault, buf: &mut [u64], basis: Basis) {
        if f != self.fault {
            return;
        }
        let p = self.inner.params();
        let n = p.n();
        let r = basis.rows() - 1;
        let q = p
            .all_moduli()
            .nth(basis.global_index(r, p.q().len()))
            .unwrap()
            .value();
        let w = &mut buf[r * n + n - 1];
        *w = (*w + 1) % q;
    }
}

impl PolyBackend for Faulty {
    type Buffer = Vec<u64>;
    fn name(&self) -> String {
        format!("faulty({:?})", self.fault)
    }
    fn params(&self) -> &CkksParams {
        self.inner.params()
    }
    fn alloc(&self, rows: usize) -> Vec<u64> {
        self.inner.alloc(rows)
    }
    fn buffer_rows(&self, buf: &Vec<u64>) -> usize {
        self.inner.buffer_rows(buf)
    }
    fn upload(&self, data: &[u64]) -> Vec<u64> {
        self.inner.upload(data)
    }
    fn download(&self, buf: &Vec<u64>, out: &mut [u64]) -> veil_core::Result<()> {
        if self.fault == Fault::Device {
            return Err(veil_core::Error::Device { what: "download" });
        }
        self.inner.download(buf, out)
    }
    fn sync(&self) -> veil_core::Result<()> {
        if self.fault == Fault::Device {
            return Err(veil_core::Error::Device { what: "sync" });
        }
        self.inner.sync()
    }
    fn copy_rows(&self, src: &Vec<u64>, sb: Basis, dst: &mut Vec<u64>, db: Basis) {
        self.inner.copy_rows(src, sb, dst, db);
        self.poke(Fault::CopyRows, dst, db);
    }
    fn zeroize(&self, buf: &mut Vec<u64>) {
        self.inner.zeroize(buf)
    }
    fn ntt(&self, a: &mut Vec<u64>, basis: Basis) {
        self.inner.ntt(a, basis);
        self.poke(Fault::Ntt, a, basis);
    }
    fn intt(&self, a: &mut Vec<u64>, basis: Basis) {
        self.inner.intt(a, basis);
        self.poke(Fault::Intt, a, basis);
    }
    fn add_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: Basis) {
        self.inner.add_assign(a, b, basis)
    }
    fn sub_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: Basis) {
        self.inner.sub_assign(a, b, basis)
    }
    fn add_new(&self, a: &Vec<u64>, b: &Vec<u64>, basis: Basis) -> Vec<u64> {
        self.inner.add_new(a, b, basis)
    }
    fn sub_new(&self, a: &Vec<u64>, b: &Vec<u64>, basis: Basis) -> Vec<u64> {
        self.inner.sub_new(a, b, basis)
    }
    fn neg_assign(&self, a: &mut Vec<u64>, basis: Basis) {
        self.inner.neg_assign(a, basis)
    }
    fn mul_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: Basis) {
        self.inner.mul_assign(a, b, basis);
        self.poke(Fault::Mul, a, basis);
    }
    fn mul(&self, a: &Vec<u64>, b: &Vec<u64>, out: &mut Vec<u64>, basis: Basis) {
        self.inner.mul(a, b, out, basis);
        self.poke(Fault::Mul, out, basis);
    }
    fn mul_add_assign(&self, acc: &mut Vec<u64>, a: &Vec<u64>, b: &Vec<u64>, basis: Basis) {
        self.inner.mul_add_assign(acc, a, b, basis)
    }
    fn mul_scalar_assign(&self, a: &mut Vec<u64>, s: &[u64], basis: Basis) {
        self.inner.mul_scalar_assign(a, s, basis);
        self.poke(Fault::MulScalar, a, basis);
    }
    fn add_scalar_assign(&self, a: &mut Vec<u64>, s: &[u64], basis: Basis) {
        self.inner.add_scalar_assign(a, s, basis)
    }
    fn automorphism(&self, a: &Vec<u64>, g: u64, out: &mut Vec<u64>, basis: Basis, d: Domain) {
        self.inner.automorphism(a, g, out, basis, d);
        if d == Domain::Coeff {
            self.poke(Fault::AutomorphismCoeff, out, basis);
        }
    }
    fn decompose(&self, c: &Vec<u64>, level: usize, out: &mut [Vec<u64>]) {
        self.inner.decompose(c, level, out);
        let ext = Basis::qp(level + 1, self.params().special_at(level));
        self.poke(Fault::Decompose, &mut out[0], ext);
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
        self.inner
            .key_inner_product(digits, key_b, key_a, level, acc0, acc1);
        let ext = Basis::qp(level + 1, self.params().special_at(level));
        self.poke(Fault::KeyInnerProduct, acc1, ext);
    }
    fn mod_down(&self, x: &Vec<u64>, level: usize, out: &mut Vec<u64>) {
        self.inner.mod_down(x, level, out);
        self.poke(Fault::ModDown, out, Basis::q(level + 1));
    }
    fn rescale(&self, x: &Vec<u64>, level: usize, out: &mut Vec<u64>) {
        self.inner.rescale(x, level, out);
        self.poke(Fault::Rescale, out, Basis::q(level));
    }
    fn mod_down_p0(&self, x: &Vec<u64>, level: usize, out: &mut Vec<u64>) {
        self.inner.mod_down_p0(x, level, out);
        self.poke(Fault::ModDownP0, out, Basis::q(level + 1));
    }
}

const ALL_FAULTS: [Fault; 11] = [
    Fault::Ntt,
    Fault::Intt,
    Fault::Mul,
    Fault::MulScalar,
    Fault::AutomorphismCoeff,
    Fault::CopyRows,
    Fault::Decompose,
    Fault::KeyInnerProduct,
    Fault::ModDown,
    Fault::ModDownP0,
    Fault::Rescale,
];

#[test]
fn compare_words_reports_the_first_difference() {
    let want: Vec<u64> = (0..64).collect();
    assert_eq!(compare_words("same", "x", &want, &want, 16), Ok(()));
    let mut got = want.clone();
    got[37] ^= 1;
    got[50] += 3;
    let e = compare_words("flip", "x", &want, &got, 16).unwrap_err();
    assert_eq!(
        (e.row, e.col, e.want, e.got, e.differing),
        (2, 5, 37, 36, 2)
    );
    // A short download is a mismatch too.
    assert!(compare_words("short", "x", &want, &want[..63], 16).is_err());
}

#[test]
fn perturbed_backend_is_detected_by_every_op_check() {
    let p = params::insecure_logn10().validate().unwrap();
    let reference = CpuBackend::scalar(&p);
    // The same checks pass on an unperturbed backend (so a failure below is the perturbation).
    let mut rng = test_rng(7);
    let clean: Result<(), Mismatch> =
        conformance::check_all_ops(&reference, &CpuBackend::scalar(&p), &mut rng);
    assert_eq!(clean, Ok(()));
    for fault in ALL_FAULTS {
        let bad = Faulty::new(&p, fault);
        let r = conformance::check_all_ops(&reference, &bad, &mut rng);
        let e = r.expect_err(&format!("a perturbed {fault:?} must be caught"));
        println!("{fault:?}: caught: {e}");
        assert_eq!(e.differing, 1, "{e}");
    }
}

#[test]
fn perturbed_backend_is_detected_by_the_flow_and_the_model() {
    let p = params::insecure_logn10().validate().unwrap();
    let ok = conformance::check_ckks_flow(
        Arc::new(CpuBackend::scalar(&p)),
        Arc::new(Faulty {
            inner: CpuBackend::fast(&p, 1).unwrap(),
            fault: Fault::Ntt,
        }),
        3,
    );
    assert!(ok.is_err(), "the flow catches a perturbed NTT");
    for fault in [
        Fault::ModDown,
        Fault::ModDownP0,
        Fault::Rescale,
        Fault::KeyInnerProduct,
    ] {
        let r = conformance::check_ckks_flow(
            Arc::new(CpuBackend::scalar(&p)),
            Arc::new(Faulty::new(&p, fault)),
            3,
        );
        let e = r.expect_err(&format!("the flow catches a perturbed {fault:?}"));
        println!("flow, {fault:?}: caught: {e}");
    }
    for fault in [
        Fault::Ntt,
        Fault::Decompose,
        Fault::ModDown,
        Fault::ModDownP0,
        Fault::Rescale,
    ] {
        let mut rng = test_rng(9);
        let e = conformance::check_reference_model(&Faulty::new(&p, fault), &mut rng)
            .expect_err(&format!("the model catches a perturbed {fault:?}"));
        println!("model, {fault:?}: caught: {e}");
    }
    let mut rng = test_rng(9);
    assert_eq!(
        conformance::check_reference_model(&CpuBackend::scalar(&p), &mut rng),
        Ok(())
    );
}

/// A device fault after construction reaches the caller as `Error::Device`, never a panic:
/// decoding, decrypt-and-decode and serialization all read back through `download`.
#[test]
fn device_faults_reach_the_caller_as_errors() {
    use veil_core::ckks::Ckks;
    use veil_core::Error;
    let p = params::insecure_logn10().validate().unwrap();
    let ck = Ckks::new(Arc::new(Faulty::new(&p, Fault::Device)));
    let mut rng = test_rng(5);
    // Secret-key generation reads the key's NTT back; on a fault it computes the same words on
    // the host instead. Encryption needs no read-back.
    let sk = ck.gen_secret_key(&mut rng);
    {
        // The fallback key is the healthy backend's key: from the same RNG stream, both give the
        // same public key word for word.
        let healthy = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
        let sk_ok = healthy.gen_secret_key(&mut test_rng(5));
        let pk = |k: &veil_core::ckks::SecretKey| {
            let pk = healthy.gen_public_key(k, &mut test_rng(6)).unwrap();
            healthy.serialize_public_key(&pk, true).unwrap()
        };
        assert_eq!(pk(&sk), pk(&sk_ok));
    }
    let pt = ck
        .encode_real(
            &[0.25, -0.5],
            p.max_slots(),
            p.max_level(),
            p.default_scale(),
        )
        .unwrap();
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).unwrap();
    let fault = Error::Device { what: "download" };
    assert_eq!(ck.decode(&pt).unwrap_err(), fault);
    assert_eq!(ck.decrypt_decode(&sk, &ct).unwrap_err(), fault);
    assert_eq!(ck.serialize_ciphertext(&ct, true).unwrap_err(), fault);
    assert_eq!(ck.serialize_plaintext(&pt).unwrap_err(), fault);
    assert_eq!(
        ck.backend().sync().unwrap_err(),
        Error::Device { what: "sync" }
    );
    // The healthy backend's sync is the default `Ok`.
    assert_eq!(CpuBackend::scalar(&p).sync(), Ok(()));
}
