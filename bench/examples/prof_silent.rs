//! Times the two local halves of one Ferret extension at emp-ot's main set: the LPN
//! encodings (sender and receiver) and the GGM trees, one thread.
//! `cargo run --release -p veil-bench --example prof_silent`

use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use veil_core::mpc::ot::silent::ggm::Ggm;
use veil_core::mpc::ot::silent::lpn::Lpn;
use veil_core::mpc::ot::silent::FERRET_EMP_OT;

fn main() {
    let p = FERRET_EMP_OT.main;
    let lpn = Lpn::new(p.k);
    let mut s = 0x9e37_79b9_7f4a_7c15u128;
    let mut next = || {
        s = s.wrapping_mul(0x2545_f491_4f6c_dd1d).wrapping_add(1);
        s ^ (s >> 61)
    };
    let v: Vec<u128> = (0..p.k).map(|_| next()).collect();
    let mut out = vec![0u128; p.n];
    let mut bits = vec![0u8; p.n];
    for _ in 0..3 {
        let t = Instant::now();
        lpn.encode_add(&v, &mut out);
        let a = t.elapsed().as_secs_f64();
        let t = Instant::now();
        // the receiver: its blocks carry the choice bits in their low bits
        lpn.encode_add(&v, &mut out);
        for (u, &o) in bits.iter_mut().zip(out.iter()) {
            *u = (o & 1) as u8;
        }
        let b = t.elapsed().as_secs_f64();
        let g = Ggm::new();
        let l = p.leaves();
        let mut sums = vec![(0u128, 0u128); p.h as usize];
        let mut scratch = vec![0u128; l / 2];
        let t = Instant::now();
        for leaves in out.chunks_exact_mut(l) {
            g.sender_tree(next(), leaves, &mut sums, &mut scratch);
        }
        let c = t.elapsed().as_secs_f64();
        println!(
            "n = {}: LPN sender {a:.3} s, receiver {b:.3} s, GGM sender trees {c:.3} s ({:.1} ns/COT in all, one party's side)",
            p.n,
            (a.max(b) + c) / p.n as f64 * 1e9
        );
    }
    std::hint::black_box((&out, &bits));
}
