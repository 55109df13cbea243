//! tfhe-ntt must compute `veil-core`'s canonical NTT bit for bit (same root, same order).
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use veil_core::math::{primes::ntt_primes, Modulus, NttTable};

#[test]
fn tfhe_ntt_is_the_canonical_ntt() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    for log_n in [4u32, 10, 12, 14, 16] {
        let n = 1usize << log_n;
        for bits in [30u32, 40, 50, 52, 55, 60, 61] {
            for q in ntt_primes(bits, n, 2, &[]).unwrap() {
                let m = Modulus::new(q).unwrap();
                let table = NttTable::new(m, log_n).unwrap();
                let plan = tfhe_ntt::prime64::Plan::try_new(n, q).unwrap();
                let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % q).collect();
                let mut x = a.clone();
                let mut y = a.clone();
                table.forward(&mut x);
                plan.fwd(&mut y);
                assert_eq!(x, y, "forward, N=2^{log_n}, q={q}");
                table.inverse(&mut x);
                plan.inv(&mut y);
                plan.normalize(&mut y);
                assert_eq!(x, a);
                assert_eq!(y, a, "inverse, N=2^{log_n}, q={q}");
            }
        }
    }
}
