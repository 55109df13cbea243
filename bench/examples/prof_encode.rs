//! Times one plaintext encoding and one plaintext product at N = 2^15 (diagnostics).
use std::sync::Arc;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, C64};
use veil_core::params;

fn main() {
    let p = params::ckks_128_logn15().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let slots = 1 << 14;
    let v: Vec<C64> = (0..slots)
        .map(|i| C64::real((i % 7) as f64 * 0.01))
        .collect();
    for level in [2usize, 5, 9] {
        let t = Instant::now();
        let reps = 50;
        let mut pt = None;
        for _ in 0..reps {
            pt = Some(
                ck.encode(&v, slots, level, ck.rescale_prime(level))
                    .unwrap(),
            );
        }
        let enc = t.elapsed().as_secs_f64() / reps as f64;
        let t = Instant::now();
        for _ in 0..reps {
            let _ = ck.encoder().encode_subring(&v, slots, 1e12).unwrap();
        }
        let sub = t.elapsed().as_secs_f64() / reps as f64;
        println!("  encode_subring (FFT + rounding) {:.3} ms", sub * 1e3);
        let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
        let sk = ck.gen_secret_key(&mut rng);
        let ct = ck
            .encrypt_sk(
                &sk,
                &ck.encode(&v, slots, level, p.default_scale()).unwrap(),
                &mut rng,
            )
            .unwrap();
        let t = Instant::now();
        for _ in 0..reps {
            let _ = ck.mul_plain(&ct, pt.as_ref().unwrap()).unwrap();
        }
        let mul = t.elapsed().as_secs_f64() / reps as f64;
        let t = Instant::now();
        for _ in 0..reps {
            let mut c2 = ck.clone_ct(&ct);
            ck.mul_const_assign(&mut c2, C64::real(0.37), 1e6).unwrap();
        }
        let cm = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "level {level}: encode {:.3} ms, ptmul {:.3} ms, clone+const {:.3} ms",
            enc * 1e3,
            mul * 1e3,
            cm * 1e3
        );
    }
}
use rand_core::SeedableRng;
