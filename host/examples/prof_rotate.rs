//! Profiling harness: repeated rotations at a given N (for perf).
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let logn: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(14);
    let lit = veil_host::bench_ckks::params_for(
        logn,
        match logn {
            14 => 6,
            15 => 10,
            _ => 16,
        },
        None,
    );
    let p = lit.validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 1).unwrap()));
    let mut rng = veil_host::os_rng();
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, &[1], false, &mut rng, |_, _| {})
        .unwrap();
    let x = vec![veil_core::ckks::C64::real(0.5); p.max_slots()];
    let pt = ck
        .encode(&x, p.max_slots(), p.max_level(), p.default_scale())
        .unwrap();
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..50 {
        std::hint::black_box(ck.rotate(&ct, 1, &keys).unwrap());
    }
    println!("rotate: {:.3} ms", t.elapsed().as_secs_f64() * 1e3 / 50.0);
}
