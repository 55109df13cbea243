//! Tests of the silent OT against its definition (INSECURE test parameters).

use super::ggm::Ggm;
use super::lpn::{Lpn, D};
use super::*;
use crate::mpc::channel::{run_pair, Frame, Session};
use crate::mpc::msgs::{Message, MsgKind};
use crate::mpc::ot::iknp::{IknpReceiver, IknpSender};
use crate::mpc::{Defect, MpcError};
use alloc::vec::Vec;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

fn block(rng: &mut ChaCha20Rng) -> u128 {
    ((rng.next_u64() as u128) << 64) | rng.next_u64() as u128
}

/// The GGM tree by its definition: leaf `i` is `G_{α_h}(…G_{α_1}(seed))`.
fn reference_leaf(g: &Ggm, seed: u128, h: usize, i: usize) -> u128 {
    let mut x = seed;
    for j in 0..h {
        let (l, r) = g.expand_one(x);
        x = if (i >> (h - 1 - j)) & 1 == 0 { l } else { r };
    }
    x
}

#[test]
fn ggm_punctured_tree_reveals_all_leaves_but_one() {
    let g = Ggm::new();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for h in [1usize, 2, 5, 8] {
        let l = 1 << h;
        for _ in 0..8 {
            let seed = block(&mut rng);
            let mut leaves = vec![0u128; l];
            let mut sums = vec![(0, 0); h];
            let mut scratch = vec![0u128; l / 2];
            g.sender_tree(seed, &mut leaves, &mut sums, &mut scratch);
            for (i, &v) in leaves.iter().enumerate() {
                assert_eq!(v, reference_leaf(&g, seed, h, i), "leaf {i}");
            }
            let alpha = (rng.next_u32() as usize) % l;
            let known: Vec<u128> = (0..h)
                .map(|j| {
                    let a = (alpha >> (h - 1 - j)) & 1;
                    if a == 0 {
                        sums[j].1
                    } else {
                        sums[j].0
                    }
                })
                .collect();
            let mut rl = vec![0u128; l];
            g.receiver_tree(alpha, &known, &mut rl, &mut scratch);
            for i in 0..l {
                if i == alpha {
                    assert_eq!(rl[i], 0, "the punctured leaf stays unknown");
                    assert_ne!(rl[i], leaves[i]);
                } else {
                    assert_eq!(rl[i], leaves[i], "h {h} leaf {i} (α = {alpha})");
                }
            }
        }
    }
}

#[test]
fn lpn_encoding_matches_the_definition() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    for (k, n) in [(1usize, 5usize), (97, 333), (4096, 1001)] {
        let lpn = Lpn::new(k);
        let v: Vec<u128> = (0..k).map(|_| block(&mut rng)).collect();
        let x: Vec<u8> = (0..k).map(|_| (rng.next_u32() & 1) as u8).collect();
        let base: Vec<u128> = (0..n).map(|_| block(&mut rng)).collect();
        let bb: Vec<u8> = (0..n).map(|_| (rng.next_u32() & 1) as u8).collect();
        let mut out = base.clone();
        lpn.encode_add(&v, &mut out);
        let (mut o2, mut b2) = (base.clone(), bb.clone());
        lpn.encode_add_with_bits(&v, &x, &mut o2, &mut b2);
        assert_eq!(out, o2);
        for r in 0..n {
            let cols = lpn.row(r);
            assert!(cols.iter().all(|&c| c < k));
            let a = cols.iter().fold(base[r], |a, &c| a ^ v[c]);
            let b = cols.iter().fold(bb[r], |a, &c| a ^ x[c]);
            assert_eq!(out[r], a, "k {k} row {r}");
            assert_eq!(b2[r], b, "k {k} row {r} (bits)");
        }
        // Columns are spread over the whole range.
        if k == 4096 {
            let mut hit = vec![false; k];
            for r in 0..n {
                for c in lpn.row(r) {
                    hit[c] = true;
                }
            }
            let frac = hit.iter().filter(|&&h| h).count() as f64 / k as f64;
            // 10·1001 draws into 4096 bins: expected coverage 1 − e^{−2.44} ≈ 0.91.
            assert!(frac > 0.85, "{frac}");
        }
    }
    assert_eq!(D, 10);
}

/// IKNP pairs for tests without base OT: the sender holds `k_i^{Δ_i}`.
fn iknp_pair(rng: &mut ChaCha20Rng) -> (IknpSender, IknpReceiver, u128) {
    let delta = block(rng) | 1;
    let mut pairs = Vec::new();
    let mut keys = Vec::new();
    for i in 0..128 {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        rng.fill_bytes(&mut a);
        rng.fill_bytes(&mut b);
        pairs.push((a, b));
        keys.push(if (delta >> i) & 1 == 1 { b } else { a });
    }
    (
        IknpSender::new(delta, &keys).unwrap(),
        IknpReceiver::new(&pairs).unwrap(),
        delta,
    )
}

#[test]
fn a_delta_without_its_low_bit_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let (s, _, delta) = iknp_pair(&mut rng);
    assert_eq!(delta & 1, 1);
    assert!(SilentSender::new(s, INSECURE_SILENT_TEST, [3; 16]).is_ok());
    let keys: Vec<[u8; 16]> = (0..128).map(|i| [i as u8; 16]).collect();
    let even = IknpSender::new(delta & !1, &keys).unwrap();
    assert!(matches!(
        SilentSender::new(even, INSECURE_SILENT_TEST, [3; 16]),
        Err(MpcError::InvalidConfig(_))
    ));
}

fn generators(params: SilentParams, seed: u64) -> (SilentSender, SilentReceiver, u128) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (s, r, delta) = iknp_pair(&mut rng);
    (
        SilentSender::new(s, params, [3; 16]).unwrap(),
        SilentReceiver::new(r, params, [4; 16]).unwrap(),
        delta,
    )
}

#[test]
fn every_output_satisfies_the_correlation_and_bootstraps_without_iknp() {
    for params in [INSECURE_SILENT_TEST, INSECURE_SILENT_TEST_NO_PRE] {
        let (mut s, mut r, delta) = generators(params, 7);
        let (cs, cr) = (Channel::new(), Channel::new());
        // First run: bootstrap from IKNP, then a bit more than one extension.
        let m1 = params.main.usable() + 1000;
        let (q, tu) = run_pair(
            Session::new(cs.clone(), async {
                s.bootstrap(&cs).await?;
                s.extend_random(&cs, m1).await
            }),
            Session::new(cr.clone(), async {
                r.bootstrap(&cr).await?;
                r.extend_random(&cr, vec![0; m1]).await
            }),
        );
        let (q, (t, u)) = (q.unwrap(), tu.unwrap());
        assert_eq!((q.len(), t.len(), u.len()), (m1, m1, m1));
        let check = |q: &[u128], t: &[u128], u: &[u8]| {
            for j in 0..q.len() {
                assert!(u[j] <= 1);
                // the low-bit convention: the sender's low bit is 0, the receiver's is u
                assert_eq!((q[j] & 1, t[j] & 1), (0, u[j] as u128), "COT {j} low bits");
                assert_eq!(
                    t[j],
                    q[j] ^ (delta & 0u128.wrapping_sub(u[j] as u128)),
                    "COT {j}"
                );
            }
            let ones = u.iter().filter(|&&b| b == 1).count() as f64 / u.len() as f64;
            assert!((0.47..0.53).contains(&ones), "choice bits balanced: {ones}");
            // Outputs are distinct (no repeated block, as a uniform one would be).
            let mut v = q.to_vec();
            v.sort_unstable();
            v.dedup();
            assert_eq!(v.len(), q.len());
        };
        check(&q, &t, &u);
        let first = s.stats().extensions;
        assert_eq!(first, 2, "{m1} COTs take two extensions");
        let before_r = cr.stats().online.frames_sent;
        assert_eq!(before_r, 1, "the receiver sent the IKNP bootstrap only");
        // Second run: several more extensions, all seeded by the previous ones.
        let m2 = 3 * params.main.usable();
        let (q2, tu2) = run_pair(
            Session::new(cs.clone(), s.extend_random(&cs, m2)),
            Session::new(cr.clone(), r.extend_random(&cr, vec![0; m2])),
        );
        let (q2, (t2, u2)) = (q2.unwrap(), tu2.unwrap());
        check(&q2, &t2, &u2);
        assert_eq!(
            cr.stats().online.frames_sent,
            before_r,
            "no IKNP after the bootstrap: the receiver sends nothing"
        );
        assert!(s.stats().extensions >= first + 2);
        assert_eq!(
            cs.stats().online.bytes_sent - cs.stats().online.frames_sent * 10,
            s.stats().message_bytes
        );
        assert_eq!(r.stats(), s.stats());
        // one message went ahead for the extension after the last
        assert_eq!(s.stats().messages, s.stats().extensions + 1);
    }
}

/// Runs one extension and hands the sender's frames (the extension's message,
/// changed by `f`, and the next one's, sent ahead) to the receiver; returns the
/// receiver's result.
fn corrupted_extension(f: impl Fn(&mut Frame)) -> Result<(Vec<u128>, Vec<u8>)> {
    let params = INSECURE_SILENT_TEST_NO_PRE;
    let (mut s, mut r, _) = generators(params, 9);
    let (cs, cr) = (Channel::new(), Channel::new());
    let (a, b) = run_pair(
        Session::new(cs.clone(), s.bootstrap(&cs)),
        Session::new(cr.clone(), r.bootstrap(&cr)),
    );
    a.unwrap();
    b.unwrap();
    let mut ss = Session::new(cs.clone(), s.extend_random(&cs, 10));
    assert!(matches!(ss.poll(), core::task::Poll::Ready(Ok(_))));
    let mut sr = Session::new(cr.clone(), r.extend_random(&cr, vec![0; 10]));
    assert!(sr.poll().is_pending(), "the receiver waits for the sender");
    let mut frames = ss.take_outgoing();
    assert_eq!(
        frames.len(),
        2,
        "this extension's message and the next one's"
    );
    assert!(frames.iter().all(|f| f.tag == MsgKind::SilentSpcot.tag()));
    f(&mut frames[0]);
    for fr in frames {
        sr.deliver(fr);
    }
    match sr.poll() {
        core::task::Poll::Ready(res) => res,
        core::task::Poll::Pending => panic!("the receiver must finish"),
    }
}

#[test]
fn malformed_or_truncated_extension_messages_are_typed_errors() {
    let len = INSECURE_SILENT_TEST_NO_PRE.main.message_bytes();
    assert!(corrupted_extension(|_| {}).is_ok());
    let e = corrupted_extension(|f| {
        f.payload.pop();
    })
    .unwrap_err();
    assert_eq!(
        e,
        MpcError::Malformed {
            msg: MsgKind::SilentSpcot,
            defect: Defect::Length {
                expected: len,
                found: len - 1
            }
        }
    );
    let e = corrupted_extension(|f| f.payload.push(0)).unwrap_err();
    assert!(matches!(
        e,
        MpcError::Malformed {
            msg: MsgKind::SilentSpcot,
            defect: Defect::Length { .. }
        }
    ));
    let e = corrupted_extension(|f| f.payload.clear()).unwrap_err();
    assert!(matches!(e, MpcError::Malformed { .. }));
    let e = corrupted_extension(|f| f.tag = MsgKind::IknpU.tag()).unwrap_err();
    assert_eq!(
        e,
        MpcError::UnexpectedMessage {
            expected: MsgKind::SilentSpcot,
            got: MsgKind::IknpU.tag()
        }
    );
    // Decoding is total on arbitrary lengths.
    let shape = INSECURE_SILENT_TEST.main.shape();
    for n in [0usize, 1, 15, 16, 17, len - 16, len + 16] {
        assert!(SilentSpcot::decode(&vec![0xa5; n], &shape).is_err());
    }
    assert!(SilentSpcot::decode(&[], &SpcotShape { trees: 1, depth: 0 }).is_err());
}

#[test]
fn use_before_bootstrap_and_bad_params_are_refused() {
    let (mut s, mut r, _) = generators(INSECURE_SILENT_TEST, 5);
    let ch = Channel::new();
    let (a, b) = run_pair(
        Session::new(ch.clone(), s.extend_random(&ch, 5)),
        Session::new(Channel::new(), async { Ok::<_, MpcError>(()) }),
    );
    assert_eq!(a.unwrap_err(), MpcError::NotSetUp);
    b.unwrap();
    let ch = Channel::new();
    let s2 = Session::new(ch.clone(), r.extend_random(&ch, vec![0; 5]));
    let (a, _) = run_pair(s2, Session::new(Channel::new(), async { Ok(()) }));
    assert_eq!(a.unwrap_err(), MpcError::NotSetUp);
    let bad = |main: LpnParams| SilentParams { main, pre: None }.validate().is_err();
    let ok = INSECURE_SILENT_TEST.main;
    assert!(bad(LpnParams { n: ok.n + 1, ..ok }));
    assert!(bad(LpnParams { h: 0, ..ok }));
    assert!(bad(LpnParams { k: 0, ..ok }));
    assert!(bad(LpnParams { k: ok.n, ..ok }));
    assert!(SilentParams {
        main: FERRET_EMP_OT.main,
        pre: INSECURE_SILENT_TEST.pre
    }
    .validate()
    .is_err());
    for p in [FERRET_EMP_OT, FERRET_CCS20, INSECURE_SILENT_TEST] {
        p.validate().unwrap();
    }
    // The published sizes.
    assert_eq!(FERRET_CCS20.main.seed_cots(), 468_640);
    assert_eq!(FERRET_CCS20.main.message_bytes(), 552_960);
    assert_eq!(FERRET_EMP_OT.bootstrap_cots(), 47_709);
    assert_eq!(FERRET_EMP_OT.main.usable(), 10_001_981);
}

/// The receiver's view of one SPCOT (its base COTs and the tree message) for a
/// fixed puncture index, and a byte of the punctured leaf above its low bit (which
/// the low-bit convention clears).
fn spcot_view(rng: &mut ChaCha20Rng, h: usize, leak: bool) -> (Vec<u8>, u8) {
    let c = Core::new(SilentParams {
        main: LpnParams {
            n: 1 << h,
            k: 1,
            t: 1,
            h: h as u32,
        },
        pre: None,
    })
    .unwrap();
    let delta = block(rng) | 1;
    let b: Vec<u8> = (0..h).map(|j| (j % 2) as u8).collect(); // fixed α
                                                              // the sender's base COTs with their low bits cleared (the convention)
    let q: Vec<u128> = (0..=h).map(|_| block(rng) & !1).collect();
    let mut prg = AesPrg::new({
        let mut k = [0u8; 16];
        rng.fill_bytes(&mut k);
        k
    });
    let mut out = vec![0u128; 1 << h];
    let mut msg = sender_extension(&c, delta, &mut prg, &q, &mut out);
    let t: Vec<u128> = q[1..]
        .iter()
        .zip(&b)
        .map(|(&q, &b)| q ^ (delta & 0u128.wrapping_sub(b as u128)))
        .collect();
    let alpha = b.iter().fold(0usize, |a, &bj| (a << 1) | (1 ^ bj as usize));
    // The LPN part adds A·v to every output alike; remove it for the leaf.
    let lpn = Lpn::new(1);
    let mut zero = vec![0u128; 1 << h];
    lpn.encode_add(&q[..1], &mut zero);
    let leaf = out[alpha] ^ zero[alpha];
    if leak {
        // Negative control: the correction without Δ reveals the leaf.
        let last = msg.blocks.len() - 1;
        msg.blocks[last] ^= delta;
    }
    // Everything the receiver holds or computes: the message, its base COTs
    // and every output it derives (the punctured one is `v_α ⊕ Δ`).
    let mut st = vec![q[0]];
    st.extend_from_slice(&t);
    let mut sb = vec![0u8];
    sb.extend_from_slice(&b);
    let mut r = vec![0u128; 1 << h];
    let mut u = vec![0u8; 1 << h];
    receiver_extension(&c, &st, &sb, &msg, &mut r, &mut u);
    assert_eq!(u[alpha], 1);
    let mut view = msg.encode();
    for x in t.iter().chain(&r) {
        view.extend_from_slice(&x.to_le_bytes());
    }
    (view, (leaf >> 1) as u8)
}

/// Two-sample test on every bit of the views (as the view tests of the
/// primitives): `Σ z² ≤ k + 6√(2k)` and `max |z| ≤ 6`.
fn indistinguishable(a: &[Vec<u8>], b: &[Vec<u8>]) -> bool {
    let bits = a[0].len() * 8;
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut stat, mut k, mut max_z) = (0.0f64, 0usize, 0.0f64);
    for i in 0..bits {
        let ones = |s: &[Vec<u8>]| s.iter().filter(|v| (v[i / 8] >> (i % 8)) & 1 == 1).count();
        let (ca, cb) = (ones(a) as f64, ones(b) as f64);
        let p = (ca + cb) / (na + nb);
        if p == 0.0 || p == 1.0 {
            continue;
        }
        let z = (ca / na - cb / nb) / libm::sqrt(p * (1.0 - p) * (1.0 / na + 1.0 / nb));
        stat += z * z;
        max_z = max_z.max(libm::fabs(z));
        k += 1;
    }
    let kf = k as f64;
    k > 0 && stat <= kf + 6.0 * libm::sqrt(2.0 * kf) && max_z <= 6.0
}

#[test]
fn the_receivers_view_is_independent_of_the_punctured_leaf() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let h = 4;
    for leak in [false, true] {
        let (mut zero, mut one) = (Vec::new(), Vec::new());
        while zero.len() < 600 || one.len() < 600 {
            let (v, leaf) = spcot_view(&mut rng, h, leak);
            if leaf & 1 == 0 {
                zero.push(v);
            } else {
                one.push(v);
            }
        }
        let same = indistinguishable(&zero, &one);
        assert_eq!(same, !leak, "leak = {leak}");
    }
}

/// Primitives over two parties whose pools are filled by the silent OT
/// (INSECURE test set): each op is preprocessed to its exact demand (learnt
/// in a warm-up run, which goes to the IKNP fallback), runs from the pool, and
/// reconstructs to the plaintext answer.
#[test]
fn primitives_over_the_silent_pool_match_plaintext() {
    use crate::mpc::{BoolShares, MpcConfig, Party, PartyId, RingShares};
    let cfg = MpcConfig::ENCFORMER;
    let r = cfg.ring;
    let mk = |id, s| {
        Party::with_silent_ot(id, cfg, ChaCha20Rng::seed_from_u64(s), INSECURE_SILENT_TEST).unwrap()
    };
    let (mut p0, mut p1) = (mk(PartyId::P0, 20), mk(PartyId::P1, 21));
    macro_rules! both {
        ($b0:expr, $b1:expr) => {{
            let (c0, c1) = (p0.channel(), p1.channel());
            let (r0, r1) = run_pair(
                Session::new(c0, async { $b0 }),
                Session::new(c1, async { $b1 }),
            );
            (r0.unwrap(), r1.unwrap())
        }};
    }
    both!(p0.setup().await, p1.setup().await);
    let mut rng = ChaCha20Rng::seed_from_u64(22);
    let n = 300;
    let xs: Vec<i64> = (0..n)
        .map(|_| (rng.next_u64() % (1 << 24)) as i64 - (1 << 23))
        .collect();
    let ys: Vec<i64> = (0..n)
        .map(|_| (rng.next_u64() % (1 << 12)) as i64 - (1 << 11))
        .collect();
    let bs: Vec<u8> = (0..n).map(|_| (rng.next_u32() & 1) as u8).collect();
    let share = |v: &[i64], rng: &mut ChaCha20Rng| {
        let a: Vec<u64> = v.iter().map(|_| rng.next_u64() & r.mask()).collect();
        let b: Vec<u64> = v
            .iter()
            .zip(&a)
            .map(|(&x, &a)| r.sub(r.from_signed(x), a))
            .collect();
        (RingShares::new(a), RingShares::new(b))
    };
    let (x0, x1) = share(&xs, &mut rng);
    let (y0, y1) = share(&ys, &mut rng);
    let b0: Vec<u8> = (0..n).map(|_| (rng.next_u32() & 1) as u8).collect();
    let b1: Vec<u8> = b0.iter().zip(&bs).map(|(a, b)| a ^ b).collect();
    let (b0, b1) = (BoolShares::new(b0), BoolShares::new(b1));
    let open = |a: &RingShares, b: &RingShares| -> Vec<i64> {
        a.as_slice()
            .iter()
            .zip(b.as_slice())
            .map(|(&x, &y)| r.to_signed(r.add(x, y)))
            .collect()
    };
    let mut spcot_frames = 0u64;
    for op in ["mul", "less", "relu", "b2a"] {
        // Warm-up (IKNP fallback) to learn the demand, then preprocess it.
        let d0 = p0.ot_counts();
        let d1 = p1.ot_counts();
        macro_rules! run {
            () => {
                match op {
                    "mul" => both!(p0.mul(&x0, &y0).await, p1.mul(&x1, &y1).await),
                    "less" => {
                        let (a, b) =
                            both!(p0.less_than(&x0, &y0).await, p1.less_than(&x1, &y1).await);
                        let a = a.as_slice().iter().map(|&v| v as u64).collect();
                        let b = b.as_slice().iter().map(|&v| v as u64).collect();
                        (RingShares::new(a), RingShares::new(b))
                    }
                    "relu" => both!(p0.relu(&x0).await, p1.relu(&x1).await),
                    _ => both!(p0.b2a(&b0).await, p1.b2a(&b1).await),
                }
            };
        }
        let _ = run!();
        let (e0, e1) = (p0.ot_counts(), p1.ot_counts());
        let (s0, r0) = ((e0.0 - d0.0) as usize, (e0.1 - d0.1) as usize);
        let (s1, r1) = ((e1.0 - d1.0) as usize, (e1.1 - d1.1) as usize);
        let before = p1.channel().stats();
        both!(
            p0.preprocess_ot(s0, r0).await,
            p1.preprocess_ot(s1, r1).await
        );
        let mid = p1.channel().stats();
        let off = mid.since(&before).offline;
        spcot_frames += off.frames_sent;
        let (a, b) = run!();
        let online = p1.channel().stats().since(&mid).online;
        // Served from the pool: no IKNP matrix online (≤ 2 bytes per COT
        // from P1, the derandomization bits and the protocol's own messages).
        assert!(
            (online.bytes_sent as f64) < 2.0 * (s1 + r1) as f64 + 64.0 * n as f64,
            "{op}: online {} bytes for {} COTs",
            online.bytes_sent,
            s1 + r1
        );
        let z = open(&a, &b);
        for k in 0..n {
            let (x, y) = (xs[k], ys[k]);
            match op {
                "mul" => {
                    let e = ((x as i128 * y as i128 + (1 << (r.frac - 1))) >> r.frac) as i64;
                    assert!(z[k] == e || z[k] == e - 1, "mul {k}");
                }
                "less" => assert_eq!(
                    (a.as_slice()[k] ^ b.as_slice()[k]) & 1,
                    (x < y) as u64,
                    "less {k}"
                ),
                "relu" => assert_eq!(z[k], x.max(0), "relu {k}"),
                _ => assert_eq!(z[k], bs[k] as i64, "b2a {k}"),
            }
        }
    }
    assert!(
        spcot_frames > 0,
        "the pools were filled by silent extensions"
    );
}
