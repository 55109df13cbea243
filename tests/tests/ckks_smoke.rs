//! Smoke test: every CKKS primitive on both CPU backends at N = 2^12, against f64.
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, PrecisionStats, C64};
use veil_core::params;
use veil_tests::*;

#[test]
fn smoke() {
    let p = params::insecure_logn12().validate().unwrap();
    for be in [CpuBackend::scalar(&p), CpuBackend::fast(&p, 2).unwrap()] {
        let ck = Ckks::new(Arc::new(be));
        let mut rng = test_rng(1);
        let sk = ck.gen_secret_key(&mut rng);
        let pk = ck.gen_public_key(&sk, &mut rng).unwrap();
        let keys = ck
            .gen_evaluation_keys(&sk, &[1, 5, -3], true, &mut rng, |_, _| {})
            .unwrap();
        let slots = p.max_slots();
        let x = random_values(&mut rng, slots, 1.0);
        let y = random_values(&mut rng, slots, 1.0);
        let top = p.max_level();
        let ptx = ck.encode(&x, slots, top, p.default_scale()).unwrap();
        let pty = ck.encode(&y, slots, top, p.default_scale()).unwrap();
        let cx = ck.encrypt_pk(&pk, &ptx, &mut rng).unwrap();
        let cy = ck.encrypt_sk(&sk, &pty, &mut rng).unwrap();
        let d = ck.decrypt_decode(&sk, &cx).unwrap();
        println!("enc/dec  {}", PrecisionStats::compute(&x, &d));
        let s = ck.add(&cx, &cy).unwrap();
        let want: Vec<C64> = x.iter().zip(&y).map(|(a, b)| *a + *b).collect();
        println!(
            "add      {}",
            PrecisionStats::compute(&want, &ck.decrypt_decode(&sk, &s).unwrap())
        );
        let mut m = ck.mul_relin(&cx, &cy, &keys).unwrap();
        ck.rescale_assign(&mut m).unwrap();
        let want: Vec<C64> = x.iter().zip(&y).map(|(a, b)| *a * *b).collect();
        let st = PrecisionStats::compute(&want, &ck.decrypt_decode(&sk, &m).unwrap());
        println!("mul      {st}");
        assert!(st.min_bits() > 15.0);
        for k in [1i64, 5, -3] {
            let r = ck.rotate(&cx, k, &keys).unwrap();
            let st =
                PrecisionStats::compute(&rotate_left(&x, k), &ck.decrypt_decode(&sk, &r).unwrap());
            println!("rot {k:3}  {st}");
            assert!(st.min_bits() > 15.0);
        }
        let c = ck.conjugate(&cx, &keys).unwrap();
        let want: Vec<C64> = x.iter().map(|a| a.conj()).collect();
        let st = PrecisionStats::compute(&want, &ck.decrypt_decode(&sk, &c).unwrap());
        println!("conj     {st}");
        assert!(st.min_bits() > 15.0);
        let hs = ck.rotate_hoisted(&cx, &[1, 5, -3], &keys).unwrap();
        for (h, k) in hs.iter().zip([1i64, 5, -3]) {
            let st =
                PrecisionStats::compute(&rotate_left(&x, k), &ck.decrypt_decode(&sk, h).unwrap());
            println!("hoist {k:3} {st}");
            assert!(st.min_bits() > 15.0);
        }
        let lz = ck.rotate_hoisted_lazy(&cx, &[1, 5], &keys).unwrap();
        let mut acc = lz.into_iter();
        let mut a0 = acc.next().unwrap();
        ck.add_ext_assign(&mut a0, &acc.next().unwrap()).unwrap();
        let sum = ck.mod_down_ext(&a0);
        let r1 = rotate_left(&x, 1);
        let r5 = rotate_left(&x, 5);
        let want: Vec<C64> = r1.iter().zip(&r5).map(|(a, b)| *a + *b).collect();
        let st = PrecisionStats::compute(&want, &ck.decrypt_decode(&sk, &sum).unwrap());
        println!("lazy     {st}");
        assert!(st.min_bits() > 15.0);
    }
}
