//! Additions and subtractions whose output is large enough to be written with streaming stores
//! (and, with two threads, on the pool into uninitialized capacity) give the scalar reference's
//! words. The conformance suite's sets are smaller than the streaming threshold, so this test
//! covers that path: 16 and 20 rows at N = 2^16 (8 and 10 MiB a polynomial).
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use veil_backend_cpu::CpuBackend;
use veil_core::backend::{Basis, PolyBackend};
use veil_core::params;

#[test]
fn streamed_add_and_sub_match_the_reference() {
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("avx512f") {
        eprintln!("no AVX-512 here: only the uninitialized-capacity path is exercised");
    }
    let p = params::ckks_128_custom(16, 15, 4).validate().unwrap();
    let (n, q_total) = (p.n(), p.q().len());
    let moduli: Vec<_> = p.all_moduli().copied().collect();
    let mut rng = ChaCha20Rng::seed_from_u64(0x5EA5);
    let reference = CpuBackend::scalar(&p);
    let fast = [
        CpuBackend::fast(&p, 1).unwrap(),
        CpuBackend::fast(&p, 2).unwrap(),
    ];
    let k = p.p().len();
    for basis in [Basis::q(q_total), Basis::qp(q_total, k)] {
        let rows = basis.rows();
        let mut words = || -> Vec<u64> {
            (0..rows * n)
                .map(|i| {
                    let q = moduli[basis.global_index(i / n, q_total)].value();
                    // Edges included: 0 and q − 1 at fixed places, the rest uniform.
                    match i % 1000 {
                        0 => 0,
                        1 => q - 1,
                        _ => rng.next_u64() % q,
                    }
                })
                .collect()
        };
        let (a, b) = (words(), words());
        let want_add = reference.add_new(&a, &b, basis);
        let want_sub = reference.sub_new(&a, &b, basis);
        for be in &fast {
            assert_eq!(
                be.add_new(&a, &b, basis),
                want_add,
                "add {basis:?} {}",
                be.name()
            );
            assert_eq!(
                be.sub_new(&a, &b, basis),
                want_sub,
                "sub {basis:?} {}",
                be.name()
            );
            assert_eq!(be.sub_new(&b, &a, basis), reference.sub_new(&b, &a, basis));
        }
    }
}
