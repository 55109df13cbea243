//! Operation counts of the SCP attention kernels from the symbolic dry run (the same kernel code
//! as the real CKKS run), against EncFormer Table II at BERT-base shape.

use veil_core::transformer::report::{
    TABLE_II_SCORE_MUL, TABLE_II_SCORE_ROT, TABLE_II_VALUE_MUL, TABLE_II_VALUE_ROT,
};
use veil_core::transformer::{scp_counts_report, AttnShape};

fn print(r: &veil_core::transformer::ScpCountsReport) {
    println!(
        "shape m={} d={} H={} n={}  C_s={} B={} beta={} g={} H_blk={} B_V={} S_P={}",
        r.shape.m,
        r.shape.d,
        r.shape.heads,
        r.shape.slots,
        r.plan.c_s,
        r.plan.b_s,
        r.plan.beta,
        r.plan.g,
        r.plan.h_blk,
        r.plan.b_v,
        r.plan.s_p
    );
    println!(
        "{:<28} {:>6} {:>5} {:>6} {:>6} {:>7} {:>6} {:>5}  paper",
        "kernel", "rot", "conj", "ctmul", "relin", "ptmul", "KS", "depth"
    );
    for k in &r.kernels {
        let c = &k.counts;
        println!(
            "{:<28} {:>6} {:>5} {:>6} {:>6} {:>7} {:>6} {:>5}  {}",
            k.name,
            c.rotations,
            c.conjugations,
            c.ct_mults,
            c.relins,
            c.pt_mults,
            c.key_switches(),
            k.depth,
            match (k.paper_rot, k.paper_mul) {
                (Some(a), Some(b)) => format!("{a} rot / {b} mul"),
                _ => String::new(),
            }
        );
    }
    let a = &r.ablation;
    println!(
        "w/o SCP extra: rot {} (QK edge {}, V edge {}, O edge {}), ptmul {}, repacks {}",
        a.extra.rotations,
        a.qk_edge.rotations,
        a.v_edge.rotations,
        a.o_edge.rotations,
        a.extra.pt_mults,
        a.extra.repacks
    );
    for b in &r.boundaries {
        println!(
            "boundary {:<18} cts {:>3}  K_min {:>3}  w/o SCP {:>4}",
            b.name, b.cts, b.k_min, b.wo_scp_cts
        );
    }
    println!("galois keys {}", r.galois_keys);
}

#[test]
fn bert_base_within_table_ii() {
    let r = scp_counts_report(AttnShape::BERT_BASE, None).unwrap();
    print(&r);
    let s = &r.kernels[1].counts;
    let v = &r.kernels[2].counts;
    assert!(
        s.rotations <= TABLE_II_SCORE_ROT,
        "score rot {}",
        s.rotations
    );
    assert!(s.ct_mults <= TABLE_II_SCORE_MUL, "score mul {}", s.ct_mults);
    assert!(
        v.rotations <= TABLE_II_VALUE_ROT,
        "value rot {}",
        v.rotations
    );
    assert!(v.ct_mults <= TABLE_II_VALUE_MUL, "value mul {}", v.ct_mults);
    assert_eq!(r.within_table_ii, Some(true));
    // Regression pins of the measured BERT-base counts (Table II: 630/448 and 1524/384).
    assert_eq!((s.rotations, s.ct_mults), (584, 448));
    assert_eq!((v.rotations, v.ct_mults), (1524, 384));
    // Score closed form: banks B·(2(β−1) + g) + head reduction (m/2)·(⌊log₂R⌋ + popcount(R) − 1)
    // (R = C/H = 10: 4 rotations) + export (2 per t with s ≠ 0, 1 per t with s = 0 whose offset
    // t·H·m is not a multiple of n — t = 0 and t = 32 rotate by 0; chunks
    // straddling two of the 6 stream ciphertexts cost no extra rotation).
    let (b, beta, g) = (r.plan.b_s as u64, r.plan.beta as u64, r.plan.g as u64);
    let banks = b * (2 * (beta - 1) + g);
    let reduce = 64 * 4;
    let export = 56 * 2 + 6;
    assert_eq!((b, beta, g), (7, 8, 16));
    assert!(s.rotations >= banks + reduce + export);
    assert!(
        s.rotations - (banks + reduce + export) <= 2 * 5,
        "straddle extras"
    );
    assert_eq!(r.scp_repacks, 0);
    // Closed forms (module docs): ctmul = B·m/2 (score), B_V·m/2 (value).
    assert_eq!(s.ct_mults as usize, r.plan.b_s * 64);
    assert_eq!(v.ct_mults as usize, r.plan.b_v * 64);
    assert_eq!(s.relins, 64);
    assert_eq!(v.relins as usize, r.plan.b_v);
    // Value: B_V·(|D|−1 + 2 + 2(m/2−1)) with |D| = m/2 + d_h − 1.
    assert_eq!(v.rotations as usize, r.plan.b_v * (126 + 2 + 126));
    // Every FHE–MPC boundary at K_min.
    for b in &r.boundaries {
        assert_eq!(b.cts, b.k_min, "{}", b.name);
    }
    // The ablation costs log2(m) rotations per repacked block, at 4 edges' worth of blocks.
    let blocks = 2 * r.plan.b_s + r.plan.b_v + r.plan.b_v.div_ceil(2);
    assert_eq!(r.ablation.extra.repacks as usize, blocks);
    assert_eq!(r.ablation.extra.rotations as usize, 7 * blocks);
}

#[test]
fn other_shapes() {
    for shape in [
        AttnShape::MINILM,
        AttnShape {
            m: 128,
            d: 1024,
            heads: 16,
            slots: 16384,
        },
        AttnShape {
            m: 16,
            d: 128,
            heads: 4,
            slots: 2048,
        },
    ] {
        let r = scp_counts_report(shape, None).unwrap();
        print(&r);
        assert_eq!(r.scp_repacks, 0);
        for b in &r.boundaries {
            assert_eq!(b.cts, b.k_min, "{}", b.name);
        }
    }
}
