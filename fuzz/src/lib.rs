//! Shared harness of Veil's fuzz targets: one `insecure_logn10` context, and one entry point per
//! target that feeds arbitrary bytes to the decoders. The decoders must return `Ok` or a typed
//! `Err` on every input; any panic is a bug.

use std::sync::{Arc, OnceLock};
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_core::params;
use veil_core::serial;

/// The fuzzing context (`insecure_logn10`, scalar CPU backend), built once.
pub fn context() -> &'static Ckks<CpuBackend> {
    static CTX: OnceLock<Ckks<CpuBackend>> = OnceLock::new();
    CTX.get_or_init(|| {
        let p = params::insecure_logn10()
            .validate()
            .expect("insecure_logn10");
        Ckks::new(Arc::new(CpuBackend::scalar(&p)))
    })
}

/// Target `ciphertext`: the ciphertext and plaintext decoders. A successful decode must
/// re-encode to the same bytes (the formats are canonical).
pub fn fuzz_ciphertext(data: &[u8]) {
    let ck = context();
    if let Ok(ct) = ck.deserialize_ciphertext(data) {
        let again = ck
            .serialize_ciphertext(&ct, ct.is_seeded())
            .expect("a decoded ciphertext re-encodes");
        assert_eq!(again, data, "ciphertext encoding is not canonical");
    }
    if let Ok(pt) = ck.deserialize_plaintext(data) {
        let again = ck.serialize_plaintext(&pt).expect("re-encode");
        assert_eq!(again, data, "plaintext encoding is not canonical");
    }
}

/// Target `keys`: public key, switching key, evaluation keys and parameter decoders.
pub fn fuzz_keys(data: &[u8]) {
    let ck = context();
    let _ = ck.deserialize_public_key(data);
    let _ = ck.deserialize_switching_key(data);
    let _ = ck.deserialize_evaluation_keys(data);
    // Parameters only when they claim the context's id (validation is costly by design).
    let _ = serial::params_from_bytes_expecting(data, ck.params().id());
    let _ = serial::params_literal_from_bytes(data);
}

/// Valid encodings of every object (for a seed corpus and for the stable mutation loop).
pub fn seed_inputs() -> Vec<(&'static str, Vec<u8>)> {
    use rand_core::SeedableRng;
    let ck = context();
    let p = ck.params();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).expect("pk");
    let keys = ck
        .gen_evaluation_keys(&sk, &[1], false, &mut rng, |_, _| {})
        .expect("keys");
    let pt = ck
        .encode_real(&[0.5, -0.25], 2, 0, p.default_scale())
        .expect("encode");
    let ct = ck.encrypt_sk(&sk, &pt, &mut rng).expect("encrypt");
    let d2 = ck.mul_no_relin(&ct, &ct).expect("mul");
    vec![
        (
            "ciphertext",
            ck.serialize_ciphertext(&ct, true).expect("ct"),
        ),
        (
            "ciphertext",
            ck.serialize_ciphertext(&ct, false).expect("ct"),
        ),
        (
            "ciphertext",
            ck.serialize_ciphertext(&d2, false).expect("ct"),
        ),
        ("ciphertext", ck.serialize_plaintext(&pt).expect("pt")),
        ("keys", ck.serialize_public_key(&pk, true).expect("pk")),
        (
            "keys",
            ck.serialize_switching_key(keys.relin.as_ref().expect("rlk"), true)
                .expect("swk"),
        ),
        (
            "keys",
            ck.serialize_evaluation_keys(&keys, true).expect("ek"),
        ),
        ("keys", serial::params_to_bytes(p).expect("params")),
    ]
}

// ------------------------------------------------------------------ MPC messages

use veil_core::mpc::msgs::*;
use veil_core::mpc::Modulus;

/// Names of the MPC message decoders of [`fuzz_mpc_msgs`], indexed by the selector byte.
pub const MPC_DECODERS: [&str; 28] = [
    "SeedShare",
    "SetupHello",
    "BaseOtReply",
    "IknpU",
    "Derand",
    "CmpAnd",
    "BeaverOpen",
    "InputShare",
    "Reveal",
    "TripleCorr",
    "TruncCorr",
    "RoundCorr",
    "B2aCorr",
    "MuxCorr",
    "CmpLeaf",
    "ExtB2aCorr",
    "ExtMsbCorr",
    "C2mCiphertexts",
    "M2cCiphertexts",
    "SquareCorr",
    "WideCorr",
    "SilentSpcot",
    "SquareWrapCorr",
    "SquareCorrBounded",
    "MulCorr",
    "HeKey",
    "HeUpload",
    "HeReply",
];

/// The RNS shape of an RLWE-triple fuzz input: `count % 64` residues per row (rows of whole
/// bytes or not), `aux % 4 + 1` blocks, `bits % 3 + 1` rows per block over small primes.
fn rns_shape(count: usize, bits: u32, aux: u8) -> RnsShape {
    const PRIMES: [u64; 3] = [97, 65_537, (1 << 61) - 1];
    RnsShape {
        n: count % 64,
        blocks: (aux % 4) as usize + 1,
        moduli: PRIMES[..(bits % 3) as usize + 1].to_vec(),
    }
}

/// Moduli a fuzz input may pick for the `Z_q` messages.
fn modulus(i: u8) -> Modulus {
    let q = match i % 4 {
        0 => (1u128 << 99) + 1,
        1 => 0xffff_ffff_0000_0001u128 * 1_099_511_627_791,
        2 => 1u128 << 123,
        _ => 3,
    };
    Modulus::new(q).expect("fuzz modulus")
}

/// The shape header of an MPC fuzz input: 4 bytes after the selector.
#[derive(Clone, Copy, Debug)]
struct Header {
    count: usize,
    bits: u32,
    aux: u8,
}

impl Header {
    fn parse(h: &[u8]) -> Header {
        let b = |i: usize| h.get(i).copied().unwrap_or(0);
        Header {
            count: u16::from_le_bytes([b(0), b(1)]) as usize % 4096,
            bits: (b(2) % 64) as u32 + 1,
            aux: b(3),
        }
    }

    fn bytes(count: usize, bits: u32, aux: u8) -> [u8; 4] {
        let c = (count as u16).to_le_bytes();
        [c[0], c[1], (bits - 1) as u8, aux]
    }
}

fn check<M: Message>(payload: &[u8], shape: &M::Shape) -> bool {
    match M::decode(payload, shape) {
        Ok(m) => {
            assert_eq!(
                m.encode(),
                payload,
                "{:?}: a decoded message must re-encode to the same bytes",
                M::KIND
            );
            true
        }
        Err(_) => false,
    }
}

/// Target `mpc_msgs`: every MPC message decoder. Byte 0 selects the decoder ([`MPC_DECODERS`]),
/// bytes 1..5 the shape the receiver expects (count, width, an auxiliary byte: radix, low width
/// or modulus), the rest is the payload. Decoders must return `Ok` or a typed `Err`; a
/// successful decode must re-encode to the same bytes (the encodings are canonical). Returns
/// whether the payload decoded.
pub fn fuzz_mpc_msgs(data: &[u8]) -> bool {
    let Some((&sel, rest)) = data.split_first() else {
        return false;
    };
    let (h, payload) = rest.split_at(rest.len().min(4));
    let Header { count, bits, aux } = Header::parse(h);
    let ws = WordShape { count, bits };
    let uni = CorrShape {
        count,
        widths: CorrWidths::Uniform(bits),
    };
    let zq = ZqShape {
        count,
        q: modulus(aux),
    };
    match sel as usize % MPC_DECODERS.len() {
        25 => check::<HeKey>(payload, &rns_shape(count, bits, aux)),
        26 => check::<HeUpload>(payload, &rns_shape(count, bits, aux)),
        27 => check::<HeReply>(payload, &rns_shape(count, bits, aux)),
        0 => check::<SeedShare>(payload, &()),
        1 => check::<SetupHello>(payload, &()),
        2 => check::<BaseOtReply>(payload, &(count % 130)),
        3 => check::<IknpU>(payload, &count),
        4 => check::<Derand>(payload, &count),
        5 => check::<CmpAnd>(payload, &count),
        6 => check::<BeaverOpen>(payload, &ws),
        7 => check::<InputShare>(payload, &ws),
        8 => check::<Reveal>(payload, &ws),
        9 => {
            let n = count % 64;
            let s = CorrShape {
                count: n * bits as usize,
                widths: CorrWidths::Gilboa { n, ell: bits },
            };
            check::<TripleCorr>(payload, &s)
        }
        10 => check::<TruncCorr>(payload, &uni),
        11 => {
            let s = CorrShape {
                count,
                widths: CorrWidths::Split {
                    n: count / 2,
                    lo: (aux % 64) as u32 + 1,
                    hi: bits,
                },
            };
            check::<RoundCorr>(payload, &s)
        }
        12 => check::<B2aCorr>(payload, &uni),
        13 => check::<MuxCorr>(payload, &uni),
        14 => {
            let s = LeafShape {
                n: count % 64,
                bits,
                radix: (aux % 6) as u32 + 1,
            };
            check::<CmpLeaf>(payload, &s)
        }
        15 => check::<ExtB2aCorr>(payload, &zq),
        16 => check::<ExtMsbCorr>(payload, &zq),
        17 => check::<C2mCiphertexts>(payload, &(count % 8)),
        18 => check::<M2cCiphertexts>(payload, &(count % 8)),
        21 => {
            // Silent-OT extension: `count % 64` trees of depth `(bits − 1) % 24 + 1`.
            let s = SpcotShape {
                trees: count % 64,
                depth: (bits - 1) % 24 + 1,
            };
            check::<SilentSpcot>(payload, &s)
        }
        22 => check::<SquareWrapCorr>(payload, &uni),
        // The bounded squaring's P0 message (23: one tail of width `ℓ − m − 1`) and the
        // bounded product's (24: two tails of width `ℓ − m`), `m = aux % ℓ + 1` Gilboa
        // blocks before them.
        23 | 24 => {
            let n = count % 64;
            let m = (aux as u32) % bits.max(1) + 1;
            let tails = if sel as usize % MPC_DECODERS.len() == 23 {
                1
            } else {
                2
            };
            let s = CorrShape {
                count: n * (m + tails) as usize,
                widths: CorrWidths::GilboaTail {
                    n,
                    ell: bits,
                    bits: m,
                    tail: bits.saturating_sub(m + 2 - tails).max(1),
                    tails,
                },
            };
            if tails == 1 {
                check::<SquareCorr>(payload, &s)
            } else {
                check::<MulCorr>(payload, &s)
            }
        }
        k => {
            // Squaring (19) and broadcast products (20): Gilboa widths over `n·ℓ`
            // corrections (for WideCorr, `n` = rows·cols and the `m·g` corrections of
            // `m = rows·ℓ` COTs, `g = cols` per COT).
            let n = count % 64;
            let s = CorrShape {
                count: n * bits as usize,
                widths: CorrWidths::Gilboa { n, ell: bits },
            };
            if k == 19 {
                check::<SquareCorr>(payload, &s)
            } else {
                check::<WideCorr>(payload, &s)
            }
        }
    }
}

/// `k` distinct valid Ristretto points (multiples of the base point).
fn point_samples(k: u64) -> Vec<Point> {
    use curve25519_dalek::constants::RISTRETTO_BASEPOINT_POINT;
    use curve25519_dalek::scalar::Scalar;
    (1..=k)
        .map(|i| Point::new(Scalar::from(i) * RISTRETTO_BASEPOINT_POINT))
        .collect()
}

/// Valid MPC message encodings, per decoder (selector, header and payload), for the seed corpus
/// and the mutation loop of [`fuzz_mpc_msgs`].
pub fn mpc_seed_inputs() -> Vec<Vec<Vec<u8>>> {
    let input = |sel: usize, count: usize, bits: u32, aux: u8, payload: Vec<u8>| {
        let mut v = vec![sel as u8];
        v.extend_from_slice(&Header::bytes(count, bits, aux));
        v.extend(payload);
        v
    };
    let words = |n: usize, bits: u32| -> Vec<u64> {
        let m = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        (0..n as u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & m)
            .collect()
    };
    let mut out: Vec<Vec<Vec<u8>>> = vec![Vec::new(); MPC_DECODERS.len()];
    out[0].push(input(0, 0, 1, 0, SeedShare { seed: [7; 16] }.encode()));
    for (count, bits, aux) in [(5usize, 3u32, 1u8), (16, 2, 0), (3, 1, 2)] {
        let shape = rns_shape(count, bits, aux);
        let rows: Vec<u64> = (0..shape.words())
            .map(|i| {
                (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    % shape.moduli[(i / shape.n) % shape.moduli.len()]
            })
            .collect();
        let seed = [count as u8; 32];
        let (s1, r1) = (shape.clone(), rows.clone());
        out[25].push(input(
            25,
            count,
            bits,
            aux,
            HeKey {
                seed,
                shape: s1,
                rows: r1,
            }
            .encode(),
        ));
        let (s1, r1) = (shape.clone(), rows.clone());
        out[26].push(input(
            26,
            count,
            bits,
            aux,
            HeUpload {
                seed,
                shape: s1,
                rows: r1,
            }
            .encode(),
        ));
        out[27].push(input(
            27,
            count,
            bits,
            aux,
            HeReply {
                seed: [0; 32],
                shape,
                rows,
            }
            .encode(),
        ));
    }
    for (trees, depth) in [(1usize, 1u32), (3, 5), (2, 9)] {
        let shape = SpcotShape { trees, depth };
        let blocks = (0..shape.blocks() as u128)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835))
            .collect();
        out[21].push(input(
            21,
            trees,
            depth,
            0,
            SilentSpcot { blocks, shape }.encode(),
        ));
    }
    let pts = point_samples(4);
    out[1].push(input(
        1,
        0,
        1,
        0,
        SetupHello {
            s: pts[0],
            seed: SeedShare { seed: [1; 16] },
        }
        .encode(),
    ));
    for k in [1usize, 4] {
        let m = BaseOtReply {
            points: pts[..k].to_vec(),
        };
        out[2].push(input(2, k, 1, 0, m.encode()));
    }
    for m in [1usize, 130] {
        out[3].push(input(3, m, 1, 0, vec![0x5a; IknpU::len_for(m)]));
    }
    for n in [3usize, 16, 45] {
        let bits: Vec<u8> = (0..n).map(|i| (i % 3 == 0) as u8).collect();
        out[4].push(input(4, n, 1, 0, Derand { bits: bits.clone() }.encode()));
        out[5].push(input(5, n, 1, 0, CmpAnd { bits }.encode()));
    }
    for (n, b) in [(3usize, 43u32), (8, 64), (5, 13), (2, 1)] {
        let w = words(n, b);
        out[6].push(input(
            6,
            n,
            b,
            0,
            BeaverOpen {
                bits: b,
                words: w.clone(),
            }
            .encode(),
        ));
        out[7].push(input(
            7,
            n,
            b,
            0,
            InputShare {
                bits: b,
                words: w.clone(),
            }
            .encode(),
        ));
        out[8].push(input(
            8,
            n,
            b,
            0,
            Reveal {
                bits: b,
                words: w.clone(),
            }
            .encode(),
        ));
        let u = CorrWidths::Uniform(b);
        out[10].push(input(
            10,
            n,
            b,
            0,
            TruncCorr::from_parts(u, w.clone()).encode(),
        ));
        out[12].push(input(
            12,
            n,
            b,
            0,
            B2aCorr::from_parts(u, w.clone()).encode(),
        ));
        out[13].push(input(
            13,
            n,
            b,
            0,
            MuxCorr::from_parts(u, w.clone()).encode(),
        ));
        let lo = 4u32.min(b);
        let sp = CorrWidths::Split {
            n: n / 2,
            lo,
            hi: b,
        };
        let d = (0..n)
            .map(|j| w[j] & (u64::MAX >> (64 - sp.width(j))))
            .collect();
        out[11].push(input(
            11,
            n,
            b,
            (lo - 1) as u8,
            RoundCorr::from_parts(sp, d).encode(),
        ));
        let g = CorrWidths::Gilboa { n, ell: b };
        let d: Vec<u64> = (0..n * b as usize)
            .map(|j| {
                let wj = g.width(j);
                let m = if wj == 64 { u64::MAX } else { (1u64 << wj) - 1 };
                (j as u64).wrapping_mul(0x2545_F491_4F6C_DD1D) & m
            })
            .collect();
        out[19].push(input(
            19,
            n,
            b,
            0,
            SquareCorr::from_parts(g, d.clone()).encode(),
        ));
        out[20].push(input(
            20,
            n,
            b,
            0,
            WideCorr::from_parts(g, d.clone()).encode(),
        ));
        out[9].push(input(9, n, b, 0, TripleCorr::from_parts(g, d).encode()));
        if b >= 4 {
            // The bounded squaring: m = b − 3 Gilboa blocks and a tail of width 2, and
            // P1's wrap corrections; the bounded product: two tails of width 3.
            let m = b - 3;
            let tailed = |tail: u32, tails: u32| {
                let w = CorrWidths::GilboaTail {
                    n,
                    ell: b,
                    bits: m,
                    tail,
                    tails,
                };
                let d: Vec<u64> = (0..n * (m + tails) as usize)
                    .map(|j| {
                        (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                            & (u64::MAX >> (64 - w.width(j)))
                    })
                    .collect();
                (w, d)
            };
            let (w, d) = tailed(2, 1);
            let sq = SquareCorr::from_parts(w, d).encode();
            out[23].push(input(23, n, b, (m - 1) as u8, sq));
            let (w, d) = tailed(3, 2);
            out[24].push(input(
                24,
                n,
                b,
                (m - 1) as u8,
                MulCorr::from_parts(w, d).encode(),
            ));
            let w: Vec<u64> = (0..n as u64).map(|j| j & 3).collect();
            out[22].push(input(
                22,
                n,
                b,
                0,
                SquareWrapCorr::from_parts(CorrWidths::Uniform(b), w).encode(),
            ));
        }
    }
    for (n, b, radix) in [(3usize, 41u32, 4u32), (2, 43, 4), (1, 64, 6), (2, 5, 1)] {
        let s = LeafShape { n, bits: b, radix };
        let nd = s.digits();
        let tables = (0..n * nd)
            .map(|i| {
                let tb = s.table_bits(i % nd);
                let v = (i as u128 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835);
                if tb >= 128 {
                    v
                } else {
                    v & ((1u128 << tb) - 1)
                }
            })
            .collect();
        out[14].push(input(
            14,
            n,
            b,
            (radix - 1) as u8,
            CmpLeaf { shape: s, tables }.encode(),
        ));
    }
    for aux in 0..4u8 {
        let q = modulus(aux);
        let d: Vec<u128> = (0..5u128)
            .map(|i| (i * 0x1234_5678_9abc) % q.value())
            .collect();
        out[15].push(input(
            15,
            5,
            1,
            aux,
            ExtB2aCorr::from_parts(q, d.clone()).encode(),
        ));
        out[16].push(input(16, 5, 1, aux, ExtMsbCorr::from_parts(q, d).encode()));
    }
    let items = vec![vec![1u8, 2, 3], vec![], vec![0xee; 40]];
    out[17].push(input(
        17,
        3,
        1,
        0,
        C2mCiphertexts {
            items: items.clone(),
        }
        .encode(),
    ));
    out[18].push(input(18, 3, 1, 0, M2cCiphertexts { items }.encode()));
    out
}

// ------------------------------------------------------------------ transport frames

use veil_host::transport::{encode_frames, FrameDecoder, HEADER_LEN};

/// Target `frames`: the transport's frame reader. Byte 0 picks the frame limit (`2^(b mod 24)`
/// bytes) and the size of the pieces the rest arrives in (`1 + b/8`), so headers and payloads are
/// split at every kind of boundary. Invariants checked on every input:
/// * a frame is returned only when all its bytes have arrived, never above the limit;
/// * the frames returned re-encode to exactly the bytes they were read from;
/// * the decoder holds at most about twice the bytes pushed, whatever the headers declare.
///
/// Returns the number of frames decoded.
pub fn fuzz_frames(data: &[u8]) -> usize {
    let Some((&sel, rest)) = data.split_first() else {
        return 0;
    };
    let max = 1usize << (sel % 24);
    let piece = 1 + (sel as usize >> 3);
    let mut dec = FrameDecoder::new();
    let (mut pushed, mut consumed) = (0usize, 0usize);
    let mut frames = Vec::new();
    'feed: for chunk in rest.chunks(piece) {
        dec.push(chunk);
        pushed += chunk.len();
        loop {
            match dec.next_frame(max) {
                Ok(Some(f)) => {
                    assert!(f.payload.len() <= max, "frame above the limit");
                    consumed += HEADER_LEN + f.payload.len();
                    assert!(consumed <= pushed, "a frame before its bytes arrived");
                    frames.push(f);
                }
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
        assert_eq!(dec.buffered(), pushed - consumed, "bytes lost or invented");
        assert!(
            dec.capacity() <= 2 * pushed + 64,
            "decoder holds {} bytes after {pushed} arrived",
            dec.capacity()
        );
    }
    assert_eq!(
        encode_frames(&frames),
        &rest[..consumed],
        "decoded frames do not re-encode to their bytes"
    );
    frames.len()
}

/// Valid frame streams (and one lying header) for the seed corpus and the mutation loop of
/// [`fuzz_frames`].
pub fn frame_seed_inputs() -> Vec<Vec<u8>> {
    use veil_core::mpc::Frame;
    let f = |tag: u16, depth: u32, n: usize| Frame {
        tag,
        depth,
        payload: (0..n).map(|i| (i * 31 + tag as usize) as u8).collect(),
    };
    let streams = [
        vec![f(0x0201, 1, 5)],
        vec![f(0x0101, 3, 300), f(0x0301, 4, 0), f(0x0402, 9, 17)],
        vec![f(0xFFFF, 0, 6)],
        vec![f(0x0A06, 2, 1000), f(0x0A05, 2, 4)],
    ];
    let mut out = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        for sel in [11u8 + 8 * i as u8, 0x5F, 0xF7] {
            let mut v = vec![sel];
            v.extend(encode_frames(s));
            out.push(v);
        }
    }
    let mut liar = vec![
        30u8,
        0x56,
        veil_host::transport::WIRE_VERSION,
        1,
        2,
        0,
        0,
        0,
        0,
    ];
    liar.extend_from_slice(&(1u32 << 30).to_le_bytes());
    liar.extend_from_slice(&[0xAA; 64]);
    out.push(liar);
    out
}

/// Target `model_config`: the model-directory loader's parsers (`config.json`,
/// `model.safetensors` against a tiny fixed configuration or one the input carries, the head
/// file). Byte 0 picks the parser. Any outcome but a panic is fine.
pub fn fuzz_model_config(data: &[u8]) {
    use veil_host::model::{head, parse_config, parse_weights, CheckpointConfig};
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            let _ = parse_config(rest);
        }
        1 => {
            let cfg: CheckpointConfig = parse_config(TINY_CONFIG).expect("the fixed config parses");
            let _ = parse_weights(rest, &cfg);
        }
        2 => {
            // config.json, a NUL byte, then model.safetensors.
            let cut = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            if let Ok(cfg) = parse_config(&rest[..cut]) {
                let _ = parse_weights(rest.get(cut + 1..).unwrap_or(&[]), &cfg);
            }
        }
        _ => {
            let _ = head::parse_head(rest, 4);
        }
    }
}

/// The fixed configuration of [`fuzz_model_config`]'s mode 1 (a 1-layer BERT of width 4).
pub const TINY_CONFIG: &[u8] = br#"{"model_type": "bert", "hidden_act": "gelu", "hidden_size": 4,
    "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 6,
    "max_position_embeddings": 8, "vocab_size": 10}"#;

/// Target `cnn_inputs`: the CNN checkpoint parser, the IDX image and label parsers (raw or
/// gzip, decompression bounded), the CIFAR-10 batch parser and the PNG decoder. Byte 0 picks the
/// parser; a parsed value must have consistent sizes.
pub fn fuzz_cnn_inputs(data: &[u8]) {
    use std::path::Path;
    use veil_host::model::{cnn, images};
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let p = Path::new("fuzz");
    match mode % 5 {
        0 => {
            let _ = cnn::parse_cnn(rest, "fuzz");
        }
        1 => {
            if let Ok(im) = images::parse_idx_images(p, rest) {
                assert_eq!(im.pixels.len(), im.count * im.height * im.width);
            }
        }
        2 => {
            let _ = images::parse_idx_labels(p, rest);
        }
        3 => {
            if let Ok((im, labels)) = images::parse_cifar_batch(p, rest) {
                assert_eq!(labels.len(), im.count);
                assert_eq!(im.pixels.len(), im.count * 3 * 32 * 32);
            }
        }
        _ => {
            if let Ok(im) = images::parse_png(p, rest) {
                assert_eq!(im.pixels.len(), im.channels * im.height * im.width);
            }
        }
    }
}

/// Target `session_decode`: the session's decoders (Hello, Accept, Refusal, report); byte 0
/// picks the decoder. A decoded value must re-encode to the same bytes.
pub fn fuzz_session_decode(data: &[u8]) {
    use veil_host::bert::{decode_report, encode_report, Accept, Hello, Refusal};
    let Some((&which, b)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(h) = Hello::decode(b) {
                assert_eq!(h.encode(), b);
                let _ = h.check_lengths();
            }
            let _ = Hello::peek_version(b);
        }
        1 => {
            if let Ok(a) = Accept::decode(b) {
                assert_eq!(a.encode(), b);
            }
        }
        2 => {
            if let Ok(r) = Refusal::decode(b) {
                assert_eq!(r.encode(), b);
                let _ = r.to_string();
            }
        }
        _ => {
            if let Ok(blocks) = decode_report(b) {
                assert_eq!(encode_report(&blocks), b);
            }
        }
    }
}

/// Target `cnn_serve_decode`: the CNN serving handshake's decoders (hello, acceptance,
/// refusal); byte 0 picks the decoder. A decoded value must re-encode to the same bytes.
pub fn fuzz_cnn_serve_decode(data: &[u8]) {
    use veil_host::cnn::serve::{
        decode_accept, decode_refusal, encode_accept, encode_refusal, CnnHello,
    };
    let Some((&which, b)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(h) = CnnHello::decode(b) {
                assert_eq!(h.encode(), b);
            }
            let _ = CnnHello::peek_version(b);
        }
        1 => {
            if let Ok(v) = decode_accept(b) {
                assert_eq!(encode_accept(v), b);
            }
        }
        _ => {
            if let Ok((code, reason)) = decode_refusal(b) {
                assert_eq!(encode_refusal(code, &reason), b);
                let _ = code.to_string();
            }
        }
    }
}

/// Target `gguf`: the GGUF reader on hostile bytes, then every tensor's decoder and the Llama
/// architecture's checks on whatever parses. A decoded tensor must have as many elements as its
/// dimensions say.
pub fn fuzz_gguf(data: &[u8]) {
    use veil_host::model::gguf::Gguf;
    use veil_host::model::llama;
    let Ok(g) = Gguf::parse(data.to_vec()) else {
        return;
    };
    for name in g.tensor_names() {
        if let Ok(v) = g.tensor_f32(name) {
            let t = g
                .tensor_info(name)
                .expect("a listed tensor has a description");
            assert_eq!(v.len() as u64, t.elements, "{name}: decoded length");
        }
    }
    if let Ok(cfg) = llama::read_config(&g) {
        let _ = llama::check_tensors(&cfg, &g);
    }
}

/// A small Llama-architecture GGUF file with a tensor of every decoded type (the `gguf` seed).
pub fn gguf_seed() -> Vec<u8> {
    use veil_host::model::gguf::Writer;
    let mut w = Writer::new();
    w.kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 1)
        .kv_u32("llama.embedding_length", 32)
        .kv_u32("llama.attention.head_count", 2)
        .kv_u32("llama.attention.head_count_kv", 1)
        .kv_u32("llama.feed_forward_length", 32)
        .kv_u32("llama.context_length", 16)
        .kv_f32("llama.rope.freq_base", 10000.0)
        .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
        .kv_strs("tokenizer.ggml.tokens", &["a", "b"])
        .tensor("token_embd.weight", &[32, 2], 8, vec![0x3c; 68])
        .tensor_f32("output_norm.weight", &[32], &[1.0; 32])
        .tensor("blk.0.attn_q.weight", &[32, 32], 3, vec![0x11; 640])
        .tensor("blk.0.attn_k.weight", &[32, 16], 2, vec![0x22; 288])
        .tensor("blk.0.attn_norm.weight", &[32], 1, vec![0x3c; 64])
        .tensor("blk.0.ffn_norm.weight", &[32], 30, vec![0x3f; 64]);
    w.finish()
}

/// Every fuzz target by its cargo-fuzz name, with the function its `fuzz_targets/` file calls.
pub const TARGETS: [(&str, fn(&[u8])); 9] = [
    ("ciphertext", fuzz_ciphertext),
    ("keys", fuzz_keys),
    ("mpc_msgs", |d| {
        fuzz_mpc_msgs(d);
    }),
    ("frames", |d| {
        fuzz_frames(d);
    }),
    ("model_config", fuzz_model_config),
    ("cnn_inputs", fuzz_cnn_inputs),
    ("session_decode", fuzz_session_decode),
    ("cnn_serve_decode", fuzz_cnn_serve_decode),
    ("gguf", fuzz_gguf),
];

/// Valid (or nearly valid) inputs for each target of [`TARGETS`], the starting points of the
/// stable driver's mutations: the `serial` seeds, the frame streams, every MPC decoder's seeds,
/// and for the loaders and handshakes their selector byte in front of a well-formed payload.
pub fn target_seeds(target: &str) -> Vec<Vec<u8>> {
    use veil_host::bert::{encode_report, Accept, Hello, Refusal, RefuseCode, SESSION_VERSION};
    use veil_host::cnn::serve::{encode_accept, CNN_VERSION};
    let with = |sel: u8, body: &[u8]| {
        let mut v = vec![sel];
        v.extend_from_slice(body);
        v
    };
    match target {
        "ciphertext" | "keys" => seed_inputs()
            .into_iter()
            .filter(|(t, _)| *t == target)
            .map(|(_, b)| b)
            .collect(),
        "mpc_msgs" => mpc_seed_inputs().into_iter().flatten().collect(),
        "gguf" => vec![gguf_seed()],
        "frames" => frame_seed_inputs(),
        "model_config" => vec![
            with(0, TINY_CONFIG),
            with(
                2,
                &[TINY_CONFIG, &[0u8], b"\x08\0\0\0\0\0\0\0{}      "].concat(),
            ),
            with(1, b"\x02\0\0\0\0\0\0\0{}"),
            with(
                3,
                br#"{"w": [[1, -1], [0.5, 0], [0, 0.5], [-1, 1]], "b": [0.1, -0.1]}"#,
            ),
        ],
        "cnn_inputs" => {
            let be = |v: u32| v.to_be_bytes();
            let idx_images = [&be(0x803)[..], &be(1), &be(2), &be(2), &[0, 64, 128, 255]].concat();
            let idx_labels = [&be(0x801)[..], &be(2), &[3, 7]].concat();
            let mut cifar = vec![4u8];
            cifar.extend((0..3 * 32 * 32).map(|i| i as u8));
            vec![
                with(0, b"\x02\0\0\0\0\0\0\0{}"),
                with(1, &idx_images),
                with(2, &idx_labels),
                with(3, &cifar),
                with(4, b"\x89PNG\r\n\x1a\n"),
            ]
        }
        "session_decode" => {
            let hello = Hello {
                version: SESSION_VERSION,
                fingerprint: [7; 32],
                params_id: 1,
                m: 16,
                valid: 3,
            };
            let accept = Accept {
                version: SESSION_VERSION,
                blocks: veil_core::bert::Blocks::EXACT,
            };
            vec![
                with(0, &hello.encode()),
                with(1, &accept.encode()),
                with(2, &Refusal::new(RefuseCode::Busy, "busy").encode()),
                with(3, &encode_report(&[])),
            ]
        }
        "cnn_serve_decode" => {
            let mut hello = CNN_VERSION.to_le_bytes().to_vec();
            hello.extend_from_slice(&[0, 0]);
            for v in [16u32, 16, 1, 16] {
                hello.extend_from_slice(&v.to_le_bytes());
            }
            hello.extend_from_slice(&[9; 32]);
            let mut refusal = 1u16.to_le_bytes().to_vec();
            refusal.extend_from_slice(&4u16.to_le_bytes());
            refusal.extend_from_slice(b"busy");
            vec![
                with(0, &hello),
                with(1, &encode_accept(CNN_VERSION)),
                with(2, &refusal),
            ]
        }
        _ => Vec::new(),
    }
}
