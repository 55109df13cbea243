//! Profiling harness: minimum latency of a rotation (for perf and A/B comparisons).
//!
//! `prof_rotate LOGN [DNUM]`: the named set for the peers' setting at `LOGN`, or a custom set of
//! the same shape with `DNUM` digits.
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let logn: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(14);
    let dnum: Option<usize> = args.next().and_then(|s| s.parse().ok());
    let levels = match logn {
        14 => 6,
        15 => 10,
        _ => 16,
    };
    let p = veil_bench::ckks::params_for(logn, levels, dnum)
        .validate()
        .expect("valid set");
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 1).expect("backend")));
    let mut rng = veil_host::os_rng();
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, &[1], false, &mut rng, |_, _| {})
        .expect("keys");
    let x = vec![veil_core::ckks::C64::real(0.5); p.max_slots()];
    let pt = ck
        .encode(&x, p.max_slots(), p.max_level(), p.default_scale())
        .expect("encode");
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).expect("encrypt");
    let mut best = f64::MAX;
    for _ in 0..20 {
        let t = std::time::Instant::now();
        std::hint::black_box(ck.rotate(&ct, 1, &keys).expect("rotate"));
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("{}: rotate min {best:.2} ms", p.name());
}
