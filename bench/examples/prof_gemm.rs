//! Times `PolyBackend::small_weight_gemm` at a CNN layer's shape (N = 2^14): `prof_gemm K OUTS
//! ROWS THREADS`, e.g. `prof_gemm 800 64 6 2` for LeNet's conv2 at one output position.

use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::backend::{Basis, PolyBackend};

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("numbers"))
        .collect();
    let (k, outs, rows, threads) = (a[0], a[1], a[2], a[3]);
    let p = veil_core::params::ckks_128_logn14_cnn().validate().unwrap();
    let be = CpuBackend::fast(&p, threads).unwrap();
    let n = p.n();
    let basis = Basis::q(rows);
    let ins: Vec<Vec<u64>> = (0..k)
        .map(|j| {
            let words: Vec<u64> = (0..rows * n)
                .map(|i| (i as u64 * 2654435761 + j as u64 * 97) % p.q()[i / n].value())
                .collect();
            be.upload(&words)
        })
        .collect();
    let refs: Vec<&Vec<u64>> = ins.iter().collect();
    let w: Vec<i32> = (0..k * outs)
        .map(|i| ((i as i64 * 7919) % 2_000_001 - 1_000_000) as i32)
        .collect();
    let post = vec![1u64; rows];
    let mut out: Vec<Vec<u64>> = (0..outs).map(|_| be.alloc(rows)).collect();
    for it in 0..3 {
        let t = Instant::now();
        be.small_weight_gemm(&refs, &w, &post, &mut out, basis);
        let s = t.elapsed().as_secs_f64();
        let macs = (k * outs * rows * n) as f64;
        println!("iter {it}: {:.3} s, {:.2} G word-MAC/s", s, macs / s / 1e9);
    }
}
