//! Client-side packings (§III-A, Appendix A): round trips and the structural properties the
//! kernels rely on.

use veil_core::ckks::C64;
use veil_core::packing::{folded_diagonal, k_min, ChannelMap, Mat, ScoreStream};
use veil_core::transformer::{AttnPlan, AttnShape};
use veil_tests::*;

fn rand_mat(seed: u64, r: usize, c: usize) -> Mat {
    let v = random_values(&mut test_rng(seed), r * c, 1.0);
    Mat::from_fn(r, c, |i, j| v[i * c + j].re)
}

#[test]
fn minimal_packing_round_trip_and_count() {
    for (m, d, n) in [
        (8, 64, 256),
        (16, 96, 512),
        (128, 768, 16384),
        (128, 384, 16384),
    ] {
        let map = ChannelMap::minimal(d, m, n);
        assert_eq!(map.cts, k_min(m * d, n), "K_min");
        let x = rand_mat(1, m, d);
        assert_eq!(map.unpack(&map.pack(&x, n), d), x);
    }
}

#[test]
fn score_order_puts_head_c_mod_h_in_segment_c() {
    let (d, h, m) = (768, 12, 128);
    let plan = AttnPlan::new(AttnShape::BERT_BASE).unwrap();
    let map = ChannelMap::score_qk(d, h, m, plan.c_s);
    let dh = d / h;
    let mut seen = vec![false; d];
    for ct in 0..map.cts {
        for seg in 0..map.segs {
            if let Some(col) = map.get(ct, 0, seg) {
                assert_eq!(col / dh, seg % h, "π_S(h,u) = uH + h");
                assert!(!seen[col]);
                seen[col] = true;
            }
        }
    }
    assert!(seen.iter().all(|&s| s));
    let x = rand_mat(2, m, d);
    assert_eq!(map.unpack(&map.pack(&x, 16384), d), x);
}

#[test]
fn head_major_and_paired_round_trip() {
    let (m, d, h) = (16, 96, 6);
    for complex in [false, true] {
        let map = ChannelMap::head_major(d, h, m, 2, complex);
        let x = rand_mat(3, m, d);
        assert_eq!(map.unpack(&map.pack(&x, 512), d), x);
        // Head-major: segment h̃·d_h + u of block ℓ holds channel u of head ℓ·H_blk + h̃.
        assert_eq!(map.get(0, 0, 16 + 3), Some(16 + 3));
    }
}

#[test]
fn score_stream_round_trip_and_folded_diagonals() {
    let (m, h, n) = (16, 6, 512);
    let s: Vec<Mat> = (0..h).map(|i| rand_mat(10 + i as u64, m, m)).collect();
    let st = ScoreStream {
        m,
        heads: h,
        slots: n,
    };
    assert_eq!(st.cts(), k_min(h * m * m, n));
    let packed = st.pack(&s);
    assert_eq!(st.unpack(&packed), s);
    // Slot (t·H + h)·m + j of the stream is s^h_t[j] + i·s^h_{t+m/2}[j].
    let (t, hh, j) = (5, 4, 11);
    let g = (t * h + hh) * m + j;
    let want = C64::new(s[hh].get(j, (j + t) % m), s[hh].get(j, (j + t + m / 2) % m));
    assert_eq!(packed[g / n][g % n], want);
    assert_eq!(folded_diagonal(&s[hh], t)[j], want);
}

#[test]
fn p_layout_is_minimal() {
    for shape in [
        AttnShape::BERT_BASE,
        AttnShape::MINILM,
        AttnShape {
            m: 16,
            d: 96,
            heads: 6,
            slots: 512,
        },
        AttnShape {
            m: 32,
            d: 64,
            heads: 8,
            slots: 2048,
        },
    ] {
        let plan = AttnPlan::new(shape).unwrap();
        let pl = plan.p_layout();
        assert_eq!(
            pl.cts(),
            k_min(shape.heads * shape.m * shape.m, shape.slots)
        );
        assert_eq!(plan.p_cts, pl.cts());
        assert_eq!(plan.h_p % plan.h_blk, 0);
    }
}
