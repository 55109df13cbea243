//! Message tests: `decode(encode(m)) == m` for every message type (proptest),
//! totality of every decoder on arbitrary bytes, and a typed error for each
//! kind of malformed payload (truncated, over-long, non-zero padding, out of
//! range, bad point, wrong count).

use super::error::Defect;
use super::msgs::*;
use super::zq::Modulus;
use super::MpcError;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Debug;
use curve25519_dalek::constants::RISTRETTO_BASEPOINT_POINT;
use curve25519_dalek::scalar::Scalar;
use proptest::prelude::*;

fn rt<M: Message + PartialEq + Debug>(m: &M) {
    let b = m.encode();
    let d = M::decode(&b, &m.shape()).expect("valid encoding decodes");
    assert_eq!(&d, m);
    assert_eq!(d.encode(), b, "encoding is canonical");
}

fn is_malformed<M: Message>(r: Result<M, MpcError>, f: impl Fn(&Defect) -> bool) -> bool {
    match r {
        Err(MpcError::Malformed { msg, defect }) => msg == M::KIND && f(&defect),
        _ => false,
    }
}

/// Truncated and over-long payloads: `Malformed` naming the kind; a payload
/// with padding bits additionally rejects a set padding bit.
fn check_malformed<M: Message + Debug>(m: &M, padding: bool) {
    let b = m.encode();
    let s = m.shape();
    assert!(!b.is_empty(), "{:?}: sample must be non-empty", M::KIND);
    let short = &b[..b.len() - 1];
    assert!(
        is_malformed(M::decode(short, &s), |d| matches!(
            d,
            Defect::Length { .. } | Defect::Truncated { .. }
        )),
        "{:?} truncated",
        M::KIND
    );
    let mut long = b.clone();
    long.push(0);
    assert!(
        is_malformed(M::decode(&long, &s), |d| matches!(d, Defect::Length { .. })),
        "{:?} over-long",
        M::KIND
    );
    assert!(M::decode(&[], &s).is_err(), "{:?} empty", M::KIND);
    if padding {
        let mut p = b.clone();
        *p.last_mut().unwrap() |= 0x80;
        assert!(
            is_malformed(M::decode(&p, &s), |d| *d == Defect::Padding),
            "{:?} padding",
            M::KIND
        );
    }
}

/// `q = 2^99 + 1`: 100-bit elements, so packed vectors of odd length have padding bits.
fn q_odd() -> Modulus {
    Modulus::new((1u128 << 99) + 1).unwrap()
}

fn point(k: u64) -> Point {
    Point::new(Scalar::from(k) * RISTRETTO_BASEPOINT_POINT)
}

/// A valid sample of every message kind (odd sizes, so that packed payloads
/// have padding bits).
#[test]
fn every_kind_rejects_malformed_payloads() {
    let seed = SeedShare { seed: [7; 16] };
    check_malformed(&seed, false);
    let hello = SetupHello {
        s: point(5),
        seed: seed.clone(),
    };
    check_malformed(&hello, false);
    let reply = BaseOtReply {
        points: (1..=4).map(point).collect(),
    };
    check_malformed(&reply, false);
    check_malformed(
        &IknpU {
            matrix: vec![3; IknpU::len_for(5)],
        },
        false,
    );
    check_malformed(&Derand { bits: vec![1; 13] }, true);
    let sp = SpcotShape { trees: 3, depth: 2 };
    check_malformed(
        &SilentSpcot {
            blocks: (0..sp.blocks() as u128).map(|i| i << 100 | i).collect(),
            shape: sp,
        },
        false,
    );
    check_malformed(&CmpAnd { bits: vec![1; 9] }, true);
    let w = |bits: u32, n: usize| {
        (0..n as u64)
            .map(|i| (i * 977) & ((1u64 << bits) - 1))
            .collect()
    };
    check_malformed(
        &BeaverOpen {
            bits: 43,
            words: w(43, 6),
        },
        true,
    );
    check_malformed(
        &InputShare {
            bits: 43,
            words: w(43, 3),
        },
        true,
    );
    check_malformed(
        &Reveal {
            bits: 43,
            words: w(43, 3),
        },
        true,
    );
    let u = CorrWidths::Uniform(13);
    check_malformed(
        &TripleCorr::from_parts(CorrWidths::Gilboa { n: 3, ell: 43 }, w(1, 129)),
        true,
    );
    check_malformed(&TruncCorr::from_parts(u, w(13, 3)), true);
    check_malformed(
        &RoundCorr::from_parts(
            CorrWidths::Split {
                n: 2,
                lo: 5,
                hi: 43,
            },
            w(5, 3),
        ),
        true,
    );
    check_malformed(&B2aCorr::from_parts(u, w(13, 5)), true);
    check_malformed(
        &MuxCorr::from_parts(CorrWidths::Uniform(43), w(43, 3)),
        true,
    );
    let leaf = LeafShape {
        n: 3,
        bits: 43,
        radix: 4,
    };
    // 43 bits in radix 4: ten 32-bit tables and one 16-bit table per input.
    let tables = (0..3 * 11)
        .map(|i| i as u128 & if i % 11 == 10 { 0xffff } else { 0xffff_ffff })
        .collect();
    check_malformed(
        &CmpLeaf {
            shape: leaf,
            tables,
        },
        false,
    );
    // Radix 3 on 5 bits: tables of 16 and 8 bits — 24 bits, no padding; radix 1 on 3 bits: 12.
    let l3 = LeafShape {
        n: 1,
        bits: 3,
        radix: 1,
    };
    check_malformed(
        &CmpLeaf {
            shape: l3,
            tables: vec![1, 2, 3],
        },
        true,
    );
    let q = q_odd();
    let zq = |n: usize| (0..n as u128).map(|i| i * 12345).collect();
    check_malformed(&ExtB2aCorr::from_parts(q, zq(3)), true);
    check_malformed(&ExtMsbCorr::from_parts(q, zq(3)), true);
    let items = vec![vec![1u8, 2, 3], vec![], vec![9; 5]];
    check_malformed(
        &C2mCiphertexts {
            items: items.clone(),
        },
        false,
    );
    check_malformed(&M2cCiphertexts { items }, false);
}

#[test]
fn values_points_and_counts_are_checked() {
    // Z_q element ≥ q.
    let q = q_odd();
    let mut b = ExtB2aCorr::from_parts(q, vec![1, 2, 3]).encode();
    let bits = q.bits() as usize;
    for i in bits..2 * bits {
        b[i / 8] |= 1 << (i % 8); // element 1 becomes 2^bits − 1 ≥ q
    }
    assert_eq!(
        ExtB2aCorr::decode(&b, &ZqShape { count: 3, q }),
        Err(MpcError::Malformed {
            msg: MsgKind::ExtB2aCorr,
            defect: Defect::OutOfRange { index: 1 }
        })
    );
    // Not a point.
    let mut h = SetupHello {
        s: point(3),
        seed: SeedShare { seed: [0; 16] },
    }
    .encode();
    h[..32].fill(0xff);
    assert_eq!(
        SetupHello::decode(&h, &()),
        Err(MpcError::InvalidPoint {
            msg: MsgKind::SetupHello,
            index: 0
        })
    );
    let mut r = BaseOtReply {
        points: (1..=3).map(point).collect(),
    }
    .encode();
    r[64] ^= 1; // the third point's encoding is no longer canonical or valid
    assert!(matches!(
        BaseOtReply::decode(&r, &3),
        Err(MpcError::InvalidPoint {
            msg: MsgKind::BaseOtReply,
            index: 2
        })
    ));
    // Count and length fields of ciphertext batches.
    let c = C2mCiphertexts {
        items: vec![vec![1, 2], vec![3]],
    }
    .encode();
    assert_eq!(
        C2mCiphertexts::decode(&c, &1),
        Err(MpcError::Malformed {
            msg: MsgKind::C2mCiphertexts,
            defect: Defect::Count {
                expected: 1,
                found: 2
            }
        })
    );
    let mut c2 = c.clone();
    c2[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(is_malformed(C2mCiphertexts::decode(&c2, &2), |d| matches!(
        d,
        Defect::Truncated { .. }
    )));
    // Shapes the receiver could not have produced are configuration errors, not panics.
    assert!(matches!(
        BeaverOpen::decode(&[], &WordShape { count: 0, bits: 65 }),
        Err(MpcError::InvalidConfig(_))
    ));
    assert!(matches!(
        CmpLeaf::decode(
            &[],
            &LeafShape {
                n: 1,
                bits: 8,
                radix: 7
            }
        ),
        Err(MpcError::InvalidConfig(_))
    ));
}

#[test]
fn tags_are_unique_and_round_trip() {
    for (i, k) in MsgKind::ALL.iter().enumerate() {
        assert_eq!(MsgKind::from_tag(k.tag()), Some(*k));
        for o in &MsgKind::ALL[i + 1..] {
            assert_ne!(k.tag(), o.tag());
        }
    }
    assert_eq!(MsgKind::from_tag(0x7777), None);
}

fn masked(v: Vec<u64>, bits: u32) -> Vec<u64> {
    v.into_iter().map(|x| x & super::ring::mask(bits)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn word_messages_round_trip(bits in 1u32..=64, v in proptest::collection::vec(any::<u64>(), 0..40)) {
        let words = masked(v, bits);
        rt(&BeaverOpen { bits, words: words.clone() });
        rt(&InputShare { bits, words: words.clone() });
        rt(&Reveal { bits, words });
    }

    #[test]
    fn corr_messages_round_trip(
        n in 0usize..12,
        ell in 1u32..=64,
        lo in 1u32..=64,
        v in proptest::collection::vec(any::<u64>(), 0..800),
    ) {
        let g = CorrWidths::Gilboa { n, ell };
        let count = n * ell as usize;
        if v.len() >= count {
            let d: Vec<u64> = (0..count).map(|j| v[j] & super::ring::mask(g.width(j))).collect();
            rt(&TripleCorr::from_parts(g, d.clone()));
            rt(&SquareCorr::from_parts(g, d.clone()));
            rt(&WideCorr::from_parts(g, d));
        }
        let m = lo.min(ell);
        let gt = CorrWidths::GilboaTail { n, ell, bits: m, tail: lo, tails: 1 };
        let count = n * (m as usize + 1);
        if v.len() >= count {
            let d: Vec<u64> = (0..count).map(|j| v[j] & super::ring::mask(gt.width(j))).collect();
            prop_assert_eq!(gt.total_bits(count), (0..count).map(|j| gt.width(j) as usize).sum::<usize>());
            rt(&SquareCorr::from_parts(gt, d));
        }
        let g2 = CorrWidths::GilboaTail { n, ell, bits: m, tail: lo, tails: 2 };
        let count = n * (m as usize + 2);
        if v.len() >= count {
            let d: Vec<u64> = (0..count).map(|j| v[j] & super::ring::mask(g2.width(j))).collect();
            prop_assert_eq!(g2.total_bits(count), (0..count).map(|j| g2.width(j) as usize).sum::<usize>());
            rt(&MulCorr::from_parts(g2, d));
        }
        let c = v.len().min(40);
        let u = CorrWidths::Uniform(lo);
        let d = masked(v[..c].to_vec(), lo);
        rt(&SquareWrapCorr::from_parts(u, d.clone()));
        rt(&TruncCorr::from_parts(u, d.clone()));
        rt(&B2aCorr::from_parts(u, d.clone()));
        rt(&MuxCorr::from_parts(u, d));
        let sp = CorrWidths::Split { n: n.min(c), lo, hi: ell };
        let d: Vec<u64> = (0..c).map(|j| v[j] & super::ring::mask(sp.width(j))).collect();
        rt(&RoundCorr::from_parts(sp, d));
    }

    #[test]
    fn bit_and_byte_messages_round_trip(
        bits in proptest::collection::vec(0u8..2, 0..100),
        m in 0usize..400,
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..5),
        seed in any::<[u8; 16]>(),
        trees in 0usize..5,
        depth in 1u32..6,
        blk in any::<u128>(),
    ) {
        let sp = SpcotShape { trees, depth };
        rt(&SilentSpcot { blocks: (0..sp.blocks() as u128).map(|i| blk.rotate_left(i as u32) ^ i).collect(), shape: sp });
        rt(&Derand { bits: bits.clone() });
        rt(&CmpAnd { bits });
        rt(&IknpU { matrix: vec![0xa5; IknpU::len_for(m)] });
        rt(&C2mCiphertexts { items: items.clone() });
        rt(&M2cCiphertexts { items });
        rt(&SeedShare { seed });
        rt(&SetupHello { s: point(m as u64 + 1), seed: SeedShare { seed } });
        rt(&BaseOtReply { points: (0..(m % 5) as u64).map(|k| point(k + 2)).collect() });
    }

    #[test]
    fn leaf_and_zq_messages_round_trip(
        n in 0usize..6,
        bits in 1u32..=64,
        radix in 1u32..=6,
        v in proptest::collection::vec(any::<u128>(), 0..400),
        qv in 2u128..(1u128 << 124),
    ) {
        let shape = LeafShape { n, bits, radix };
        let nd = shape.digits();
        if v.len() >= n * nd {
            let tables = (0..n * nd)
                .map(|i| {
                    let b = shape.table_bits(i % nd);
                    if b >= 128 { v[i] } else { v[i] & ((1u128 << b) - 1) }
                })
                .collect();
            rt(&CmpLeaf { shape, tables });
        }
        let q = Modulus::new(qv).unwrap();
        let d: Vec<u128> = v.iter().take(30).map(|&x| x % qv).collect();
        rt(&ExtB2aCorr::from_parts(q, d.clone()));
        rt(&ExtMsbCorr::from_parts(q, d));
    }

    /// Every decoder is total: arbitrary bytes give `Ok` (which re-encodes to
    /// the same bytes) or a typed error, never a panic.
    #[test]
    fn decoders_are_total(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        count in 0usize..64,
        bits in 1u32..=64,
        radix in 1u32..=6,
        qv in 2u128..(1u128 << 124),
    ) {
        fn total<M: Message>(b: &[u8], s: &M::Shape) {
            if let Ok(m) = M::decode(b, s) {
                assert_eq!(m.encode(), b, "{:?}", M::KIND);
            }
        }
        let b = &bytes[..];
        let ws = WordShape { count, bits };
        let cs = CorrShape { count, widths: CorrWidths::Uniform(bits) };
        let zs = ZqShape { count, q: Modulus::new(qv).unwrap() };
        total::<SeedShare>(b, &());
        total::<SetupHello>(b, &());
        total::<BaseOtReply>(b, &(count % 7));
        total::<IknpU>(b, &count);
        total::<Derand>(b, &count);
        total::<SilentSpcot>(b, &SpcotShape { trees: count % 4, depth: radix });
        total::<CmpAnd>(b, &count);
        total::<BeaverOpen>(b, &ws);
        total::<InputShare>(b, &ws);
        total::<Reveal>(b, &ws);
        total::<TruncCorr>(b, &cs);
        total::<B2aCorr>(b, &cs);
        total::<MuxCorr>(b, &cs);
        total::<TripleCorr>(b, &CorrShape { count: (count % 5) * bits as usize, widths: CorrWidths::Gilboa { n: count % 5, ell: bits } });
        total::<SquareCorr>(b, &CorrShape { count: (count % 5) * bits as usize, widths: CorrWidths::Gilboa { n: count % 5, ell: bits } });
        total::<SquareWrapCorr>(b, &cs);
        total::<SquareCorr>(b, &CorrShape { count: (count % 5) * (radix.min(bits) as usize + 1), widths: CorrWidths::GilboaTail { n: count % 5, ell: bits, bits: radix.min(bits), tail: radix, tails: 1 } });
        total::<MulCorr>(b, &CorrShape { count: (count % 5) * (radix.min(bits) as usize + 2), widths: CorrWidths::GilboaTail { n: count % 5, ell: bits, bits: radix.min(bits), tail: radix, tails: 2 } });
        total::<WideCorr>(b, &CorrShape { count: (count % 7) * bits as usize, widths: CorrWidths::Gilboa { n: count % 7, ell: bits } });
        total::<RoundCorr>(b, &CorrShape { count, widths: CorrWidths::Split { n: count / 2, lo: radix, hi: bits } });
        total::<CmpLeaf>(b, &LeafShape { n: count % 4, bits, radix });
        total::<ExtB2aCorr>(b, &zs);
        total::<ExtMsbCorr>(b, &zs);
        total::<C2mCiphertexts>(b, &(count % 3));
        total::<M2cCiphertexts>(b, &(count % 3));
    }
}
