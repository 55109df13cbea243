//! Profiling harness: minimum latency of one key-switching primitive (for perf and A/B runs).
//!
//! `prof_rotate LOGN [OP] [ITERS] [DNUM|0] [THREADS]`, where OP is `rotate` (default), `hoisted` (8 hoisted
//! rotations), `ctct` (ct×ct + relin + rescale), `add`, `add0`, `rot0` (at level 0), `keygen` (one Galois key)
//! or `parts0` (a level-0 rotation's steps, each timed alone: ModUp, key inner product, one ModDown). The set is
//! the named one for the peers' setting at `LOGN`, or a custom set of the same shape with `DNUM`
//! digits. Setup (key generation) is outside the timed loop; use enough `ITERS` that it is also
//! small in a profile.
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let t0 = std::time::Instant::now();
    let mut args = std::env::args().skip(1);
    let logn: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(14);
    let op = args.next().unwrap_or_else(|| "rotate".into());
    let iters: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let dnum: Option<usize> = args.next().and_then(|s| s.parse().ok()).filter(|&d| d > 0);
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let levels = match logn {
        14 => 6,
        15 => 10,
        _ => 16,
    };
    let p = veil_bench::ckks::params_for(logn, levels, dnum)
        .validate()
        .expect("valid set");
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, threads).expect("backend")));
    let mut rng = veil_host::os_rng();
    let sk = ck.gen_secret_key(&mut rng);
    let rots: Vec<i64> = (1..=8).collect();
    let keys = ck
        .gen_evaluation_keys(&sk, &rots, true, &mut rng, |_, _| {})
        .expect("keys");
    let x = vec![veil_core::ckks::C64::real(0.5); p.max_slots()];
    let pt = ck
        .encode(&x, p.max_slots(), p.max_level(), p.default_scale())
        .expect("encode");
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).expect("encrypt");
    let ct2 = ck.encrypt_sk(&sk, &pt, &mut rng).expect("encrypt");
    let mut low = ck.clone_ct(&ct);
    ck.drop_level_assign(&mut low, 0).expect("drop");
    eprintln!("setup done at {:.1} s", t0.elapsed().as_secs_f64());
    if op == "parts0" {
        let rl = ck.rlwe();
        let g = ck.encoder().galois_element_for_rotation(1);
        let key = &keys.galois[&g];
        let c1 = &low.polys()[1];
        let best = |f: &mut dyn FnMut()| {
            let mut b = f64::MAX;
            for _ in 0..iters {
                let t = std::time::Instant::now();
                f();
                b = b.min(t.elapsed().as_secs_f64() * 1e3);
            }
            b
        };
        let h = rl.decompose(c1, 0).unwrap();
        let acc = rl.gadget_product_lazy(&h, None, key).unwrap();
        let d = best(&mut || drop(std::hint::black_box(rl.decompose(c1, 0).unwrap())));
        let ip = best(&mut || {
            drop(std::hint::black_box(
                rl.gadget_product_lazy(&h, None, key).unwrap(),
            ))
        });
        let md = best(&mut || drop(std::hint::black_box(rl.mod_down(&acc[0], 0).unwrap())));
        let all = best(&mut || drop(std::hint::black_box(ck.rotate(&low, 1, &keys).unwrap())));
        println!("decompose {d:.3} inner {ip:.3} mod_down(1 poly) {md:.3} rotate {all:.3}");
        return;
    }
    let mut best = f64::MAX;
    for _ in 0..iters {
        let t = std::time::Instant::now();
        match op.as_str() {
            "hoisted" => drop(std::hint::black_box(
                ck.rotate_hoisted(&ct, &rots, &keys).expect("hoisted"),
            )),
            "ctct" => drop(std::hint::black_box(
                ck.mul_relin(&ct, &ct, &keys)
                    .and_then(|mut c| ck.rescale_assign(&mut c).map(|()| c))
                    .expect("ctct"),
            )),
            "keygen" => drop(std::hint::black_box(
                ck.gen_galois_key(&sk, 5, &mut rng).expect("keygen"),
            )),
            "add" => drop(std::hint::black_box(ck.add(&ct, &ct2).expect("add"))),
            "add0" => drop(std::hint::black_box(ck.add(&low, &low).expect("add"))),
            "rot0" => drop(std::hint::black_box(
                ck.rotate(&low, 1, &keys).expect("rot"),
            )),
            _ => drop(std::hint::black_box(
                ck.rotate(&ct, 1, &keys).expect("rotate"),
            )),
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if std::env::var_os("PROF_EACH").is_some() {
            eprint!("{ms:.1} ");
        }
        best = best.min(ms);
    }
    println!("{}: {op} min {best:.3} ms", p.name());
}
