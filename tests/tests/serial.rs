//! Versioned serialization: round trips, sizes, and refusal of malformed, truncated,
//! wrong-version and wrong-parameter bytes (typed errors, never a panic).

use rand_core::RngCore;
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, Ckks, EvaluationKeys, PrecisionStats, SecretKey, C64};
use veil_core::params::{self, CkksParamsLiteral};
use veil_core::serial::{self, FORMAT_VERSION, HEADER_LEN};
use veil_core::{Basis, CkksParams, Error};
use veil_tests::*;

type Ctx = Ckks<CpuBackend>;

fn ctx(lit: CkksParamsLiteral) -> (CkksParams, Ctx) {
    let p = lit.validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::scalar(&p)));
    (p, ck)
}

/// Bytes of one packed polynomial over `Q_level`, from the primes (the format's promise).
fn poly_bytes(p: &CkksParams, rows: usize) -> usize {
    p.q()[..rows]
        .iter()
        .map(|m| (64 - m.value().leading_zeros()) as usize * p.n() / 8)
        .sum()
}

fn assert_same_values(a: &[C64], b: &[C64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "decryption changed across a round trip");
    }
}

struct Fixture {
    p: CkksParams,
    ck: Ctx,
    sk: SecretKey,
    keys: EvaluationKeys<CpuBackend>,
    x: Vec<C64>,
    ct_sk: Ciphertext<CpuBackend>,
}

fn fixture(lit: CkksParamsLiteral, rotations: &[i64]) -> Fixture {
    let (p, ck) = ctx(lit);
    let mut rng = test_rng(7);
    let sk = ck.gen_secret_key(&mut rng);
    let keys = ck
        .gen_evaluation_keys(&sk, rotations, true, &mut rng, |_, _| {})
        .unwrap();
    let slots = p.max_slots();
    let x = random_values(&mut rng, slots, 1.0);
    let pt = ck
        .encode(&x, slots, p.max_level(), p.default_scale())
        .unwrap();
    let ct_sk = ck.encrypt_sk(&sk, &pt, &mut rng).unwrap();
    Fixture {
        p,
        ck,
        sk,
        keys,
        x,
        ct_sk,
    }
}

#[test]
fn ciphertext_and_plaintext_round_trips_and_sizes() {
    let f = fixture(params::insecure_logn12(), &[1]);
    let (p, ck, sk) = (&f.p, &f.ck, &f.sk);
    let mut rng = test_rng(8);
    let top = p.max_level();
    let before = ck.decrypt_decode(sk, &f.ct_sk).unwrap();
    assert!(f.ct_sk.is_seeded());

    // Seeded ciphertext, compressed and not.
    let comp = ck.serialize_ciphertext(&f.ct_sk, true).unwrap();
    let full = ck.serialize_ciphertext(&f.ct_sk, false).unwrap();
    let poly = poly_bytes(p, top + 1);
    assert_eq!(full.len(), HEADER_LEN + 12 + 2 * poly);
    assert_eq!(comp.len(), HEADER_LEN + 12 + 32 + poly);
    assert_eq!(full.len(), serial::ciphertext_len(p, top, 1, false));
    assert_eq!(comp.len(), serial::ciphertext_len(p, top, 1, true));
    assert!(
        poly * 4 < (top + 1) * p.n() * 8 * 3,
        "rows are not bit-packed"
    );
    let ratio = comp.len() as f64 / full.len() as f64;
    assert!((0.49..0.51).contains(&ratio), "ratio {ratio}");
    for bytes in [&comp, &full] {
        let back = ck.deserialize_ciphertext(bytes).unwrap();
        assert_eq!(back.level(), f.ct_sk.level());
        assert_eq!(back.scale(), f.ct_sk.scale());
        assert_eq!(back.slots(), f.ct_sk.slots());
        assert_eq!(back.degree(), 1);
        assert_same_values(&before, &ck.decrypt_decode(sk, &back).unwrap());
        // Re-encoding the decoded ciphertext gives the very same bytes.
        assert_eq!(&ck.serialize_ciphertext(&back, false).unwrap(), &full);
    }
    // The compressed form keeps the seed, the full form drops it.
    let back_c = ck.deserialize_ciphertext(&comp).unwrap();
    assert!(back_c.is_seeded());
    assert_eq!(ck.serialize_ciphertext(&back_c, true).unwrap(), comp);
    assert!(!ck.deserialize_ciphertext(&full).unwrap().is_seeded());

    // Lowest level.
    let mut low = ck.clone_ct(&f.ct_sk);
    ck.drop_level_assign(&mut low, 0).unwrap();
    let low_bytes = ck.serialize_ciphertext(&low, true).unwrap();
    assert_eq!(low_bytes.len(), serial::ciphertext_len(p, 0, 1, false));
    let low_back = ck.deserialize_ciphertext(&low_bytes).unwrap();
    assert_same_values(
        &ck.decrypt_decode(sk, &low).unwrap(),
        &ck.decrypt_decode(sk, &low_back).unwrap(),
    );

    // A public-key ciphertext has no seed: compressed asks fall back to the full form.
    let pk = ck.gen_public_key(sk, &mut rng).unwrap();
    let pt = ck
        .encode(&f.x, p.max_slots(), top, p.default_scale())
        .unwrap();
    let ct_pk = ck.encrypt_pk(&pk, &pt, &mut rng).unwrap();
    let b = ck.serialize_ciphertext(&ct_pk, true).unwrap();
    assert_eq!(b.len(), full.len());
    assert_same_values(
        &ck.decrypt_decode(sk, &ct_pk).unwrap(),
        &ck.decrypt_decode(sk, &ck.deserialize_ciphertext(&b).unwrap())
            .unwrap(),
    );

    // Degree 2, then relinearize after the round trip.
    let d2 = ck.mul_no_relin(&f.ct_sk, &ct_pk).unwrap();
    let d2_bytes = ck.serialize_ciphertext(&d2, true).unwrap();
    assert_eq!(d2_bytes.len(), HEADER_LEN + 12 + 3 * poly);
    let mut d2_back = ck.deserialize_ciphertext(&d2_bytes).unwrap();
    assert_eq!(d2_back.degree(), 2);
    assert_same_values(
        &ck.decrypt_decode(sk, &d2).unwrap(),
        &ck.decrypt_decode(sk, &d2_back).unwrap(),
    );
    ck.relinearize_assign(&mut d2_back, &f.keys).unwrap();
    ck.rescale_assign(&mut d2_back).unwrap();
    let want: Vec<C64> = f.x.iter().map(|a| *a * *a).collect();
    let st = PrecisionStats::compute(&want, &ck.decrypt_decode(sk, &d2_back).unwrap());
    assert!(st.min_bits() > 15.0, "{st}");

    // Plaintext.
    let pt_bytes = ck.serialize_plaintext(&pt).unwrap();
    assert_eq!(pt_bytes.len(), HEADER_LEN + 10 + poly);
    let pt_back = ck.deserialize_plaintext(&pt_bytes).unwrap();
    assert_eq!(
        (pt_back.level(), pt_back.scale(), pt_back.slots()),
        (pt.level(), pt.scale(), pt.slots())
    );
    assert_same_values(&ck.decode(&pt).unwrap(), &ck.decode(&pt_back).unwrap());
    // Sparse slots and a lower level.
    let pt8 = ck.encode(&f.x[..8], 8, 2, p.default_scale()).unwrap();
    let pt8_back = ck
        .deserialize_plaintext(&ck.serialize_plaintext(&pt8).unwrap())
        .unwrap();
    assert_eq!(pt8_back.slots(), 8);
    assert_same_values(&ck.decode(&pt8).unwrap(), &ck.decode(&pt8_back).unwrap());

    // Parameters.
    let pb = serial::params_to_bytes(p).unwrap();
    // An INSECURE_ set from bytes is refused unless asked for explicitly.
    assert!(p.literal().is_insecure());
    assert!(matches!(
        serial::params_from_bytes(&pb),
        Err(Error::InvalidParameters(_))
    ));
    let p_back = serial::params_from_bytes_allowing_insecure(&pb).unwrap();
    assert_eq!(&p_back, p);
    assert_eq!(p_back.literal(), p.literal());
    assert_eq!(
        serial::params_from_bytes_expecting(&pb, p.id()).unwrap(),
        *p
    );

    println!(
        "insecure_logn12 (N = {}, L = {}): ciphertext top level {} B uncompressed, {} B seeded; \
         level 0 {} B; degree 2 {} B; plaintext {} B; params {} B; \
         (8 B/word would be {} B)",
        p.n(),
        top,
        full.len(),
        comp.len(),
        low_bytes.len(),
        d2_bytes.len(),
        pt_bytes.len(),
        pb.len(),
        2 * (top + 1) * p.n() * 8,
    );
    let big = params::ckks_128_logn16().validate().unwrap();
    let l = big.max_level();
    println!(
        "ckks_128_logn16 (N = {}, L = {l}): ciphertext top {} B full, {} B seeded; level 0 {} B; \
         switching key {} B full, {} B compressed (8 B/word ct would be {} B)",
        big.n(),
        serial::ciphertext_len(&big, l, 1, false),
        serial::ciphertext_len(&big, l, 1, true),
        serial::ciphertext_len(&big, 0, 1, false),
        serial::switching_key_len(&big, false),
        serial::switching_key_len(&big, true),
        2 * (l + 1) * big.n() * 8,
    );
    assert_eq!(
        serial::packed_poly_len(&big, Basis::q(l + 1)),
        poly_bytes(&big, l + 1)
    );
}

#[test]
fn key_round_trips() {
    let f = fixture(params::insecure_logn12(), &[1, -3]);
    let (p, ck, sk) = (&f.p, &f.ck, &f.sk);
    let slots = p.max_slots();
    let top = p.max_level();
    let mut rng = test_rng(9);

    // Public key: the decoded key encrypts exactly like the original.
    let pk = ck.gen_public_key(sk, &mut rng).unwrap();
    let pt = ck.encode(&f.x, slots, top, p.default_scale()).unwrap();
    let reference = ck
        .serialize_ciphertext(&ck.encrypt_pk(&pk, &pt, &mut test_rng(99)).unwrap(), false)
        .unwrap();
    let pk_c = ck.serialize_public_key(&pk, true).unwrap();
    let pk_f = ck.serialize_public_key(&pk, false).unwrap();
    println!(
        "public key: {} B compressed, {} B full",
        pk_c.len(),
        pk_f.len()
    );
    // The key spans Q ∪ {p_0}: every ciphertext prime and the first special prime.
    let p0 = p.p()[0].value();
    let pk_poly = poly_bytes(p, top + 1) + (64 - p0.leading_zeros()) as usize * p.n() / 8;
    assert_eq!(pk_c.len(), HEADER_LEN + 33 + pk_poly);
    assert_eq!(pk_f.len(), HEADER_LEN + 33 + 2 * pk_poly);
    assert_eq!(pk_c.len(), serial::public_key_len(p, true));
    assert_eq!(pk_f.len(), serial::public_key_len(p, false));
    for bytes in [&pk_c, &pk_f] {
        let back = ck.deserialize_public_key(bytes).unwrap();
        let ct = ck.encrypt_pk(&back, &pt, &mut test_rng(99)).unwrap();
        assert_eq!(ck.serialize_ciphertext(&ct, false).unwrap(), reference);
        assert_eq!(ck.serialize_public_key(&back, true).unwrap(), pk_c);
        assert_eq!(ck.serialize_public_key(&back, false).unwrap(), pk_f);
    }

    // Evaluation keys: relinearization and rotations work after the round trip.
    let ek_c = ck.serialize_evaluation_keys(&f.keys, true).unwrap();
    let ek_f = ck.serialize_evaluation_keys(&f.keys, false).unwrap();
    let per_key_c = serial::switching_key_len(p, true) - HEADER_LEN;
    let per_key_f = serial::switching_key_len(p, false) - HEADER_LEN;
    assert_eq!(ek_c.len(), HEADER_LEN + 5 + 4 * per_key_c + 3 * 8);
    assert_eq!(ek_f.len(), HEADER_LEN + 5 + 4 * per_key_f + 3 * 8);
    assert_eq!(ek_c.len(), serial::evaluation_keys_len(p, 3, true, true));
    assert_eq!(ek_f.len(), serial::evaluation_keys_len(p, 3, true, false));
    println!(
        "evaluation keys (relin + 3 Galois): {} B compressed, {} B full",
        ek_c.len(),
        ek_f.len()
    );
    for bytes in [&ek_c, &ek_f] {
        let keys = ck.deserialize_evaluation_keys(bytes).unwrap();
        assert!(keys.relin.is_some());
        assert_eq!(
            keys.galois.keys().collect::<Vec<_>>(),
            f.keys.galois.keys().collect::<Vec<_>>()
        );
        assert_eq!(&ck.serialize_evaluation_keys(&keys, true).unwrap(), &ek_c);
        assert_eq!(&ck.serialize_evaluation_keys(&keys, false).unwrap(), &ek_f);
        let mut m = ck.mul_relin(&f.ct_sk, &f.ct_sk, &keys).unwrap();
        ck.rescale_assign(&mut m).unwrap();
        let want: Vec<C64> = f.x.iter().map(|a| *a * *a).collect();
        let st = PrecisionStats::compute(&want, &ck.decrypt_decode(sk, &m).unwrap());
        assert!(st.min_bits() > 15.0, "relin {st}");
        for k in [1i64, -3] {
            let r = ck.rotate(&f.ct_sk, k, &keys).unwrap();
            let st =
                PrecisionStats::compute(&rotate_left(&f.x, k), &ck.decrypt_decode(sk, &r).unwrap());
            assert!(st.min_bits() > 15.0, "rot {k} {st}");
        }
        let c = ck.conjugate(&f.ct_sk, &keys).unwrap();
        let want: Vec<C64> = f.x.iter().map(|a| a.conj()).collect();
        let st = PrecisionStats::compute(&want, &ck.decrypt_decode(sk, &c).unwrap());
        assert!(st.min_bits() > 15.0, "conj {st}");
    }

    // A lone switching key, and a key set without a relinearization key.
    let rlk = f.keys.relin.as_ref().unwrap();
    for compressed in [true, false] {
        let b = ck.serialize_switching_key(rlk, compressed).unwrap();
        assert_eq!(b.len(), serial::switching_key_len(p, compressed));
        let back = ck.deserialize_switching_key(&b).unwrap();
        let keys = EvaluationKeys {
            relin: Some(back),
            ..Default::default()
        };
        let m = ck.mul_relin(&f.ct_sk, &f.ct_sk, &keys).unwrap();
        assert_eq!(m.degree(), 1);
        let e = EvaluationKeys::<CpuBackend>::default();
        let eb = ck.serialize_evaluation_keys(&e, compressed).unwrap();
        assert_eq!(eb.len(), HEADER_LEN + 5);
        assert_eq!(
            eb.len(),
            serial::evaluation_keys_len(p, 0, false, compressed)
        );
        let eback = ck.deserialize_evaluation_keys(&eb).unwrap();
        assert!(eback.relin.is_none() && eback.galois.is_empty());
    }
}

/// Every decoder on `bytes`; returns the errors (none may panic).
fn decode_all(ck: &Ctx, bytes: &[u8]) -> Vec<Result<(), Error>> {
    vec![
        ck.deserialize_ciphertext(bytes).map(drop),
        ck.deserialize_plaintext(bytes).map(drop),
        ck.deserialize_public_key(bytes).map(drop),
        ck.deserialize_switching_key(bytes).map(drop),
        ck.deserialize_evaluation_keys(bytes).map(drop),
        serial::params_from_bytes_expecting(bytes, ck.params().id()).map(drop),
        serial::params_literal_from_bytes(bytes).map(drop),
    ]
}

/// Small encodings of every object under `insecure_logn10`, with the decoder for each.
struct Small {
    ck: Ctx,
    objects: Vec<(&'static str, Vec<u8>)>,
}

fn small() -> Small {
    let f = fixture(params::insecure_logn10(), &[1]);
    let ck = f.ck;
    let mut rng = test_rng(11);
    let pk = ck.gen_public_key(&f.sk, &mut rng).unwrap();
    let mut low = ck.clone_ct(&f.ct_sk);
    ck.drop_level_assign(&mut low, 0).unwrap();
    let pt = ck.encode(&f.x[..4], 4, 0, f.p.default_scale()).unwrap();
    let d2 = ck.mul_no_relin(&low, &low).unwrap();
    let objects = vec![
        (
            "ct-seeded",
            ck.serialize_ciphertext(&f.ct_sk, true).unwrap(),
        ),
        ("ct-full", ck.serialize_ciphertext(&low, false).unwrap()),
        ("ct-deg2", ck.serialize_ciphertext(&d2, false).unwrap()),
        ("pt", ck.serialize_plaintext(&pt).unwrap()),
        ("pk-c", ck.serialize_public_key(&pk, true).unwrap()),
        ("pk-f", ck.serialize_public_key(&pk, false).unwrap()),
        (
            "swk-c",
            ck.serialize_switching_key(f.keys.relin.as_ref().unwrap(), true)
                .unwrap(),
        ),
        ("ek-c", ck.serialize_evaluation_keys(&f.keys, true).unwrap()),
        (
            "ek-f",
            ck.serialize_evaluation_keys(&f.keys, false).unwrap(),
        ),
        ("params", serial::params_to_bytes(&f.p).unwrap()),
    ];
    Small { ck, objects }
}

fn decode_kind(ck: &Ctx, name: &str, bytes: &[u8]) -> Result<(), Error> {
    match name.split('-').next().unwrap() {
        "ct" => ck.deserialize_ciphertext(bytes).map(drop),
        "pt" => ck.deserialize_plaintext(bytes).map(drop),
        "pk" => ck.deserialize_public_key(bytes).map(drop),
        "swk" => ck.deserialize_switching_key(bytes).map(drop),
        "ek" => ck.deserialize_evaluation_keys(bytes).map(drop),
        "params" => serial::params_from_bytes_allowing_insecure(bytes).map(drop),
        _ => unreachable!(),
    }
}

#[test]
fn truncated_and_extended_bytes_are_refused() {
    let s = small();
    let mut rng = test_rng(12);
    for (name, bytes) in &s.objects {
        decode_kind(&s.ck, name, bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Every truncation of small objects, a sample (plus the edges) of large ones.
        let lens: Vec<usize> = if bytes.len() <= 40_000 {
            (0..bytes.len()).collect()
        } else {
            let mut v: Vec<usize> = (0..64).chain(bytes.len() - 64..bytes.len()).collect();
            v.extend((0..400).map(|_| rng.next_u64() as usize % bytes.len()));
            v
        };
        for l in lens {
            let e = decode_kind(&s.ck, name, &bytes[..l]).expect_err(name);
            assert!(matches!(e, Error::Malformed(_)), "{name} at {l}: {e:?}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            matches!(decode_kind(&s.ck, name, &longer), Err(Error::Malformed(_))),
            "{name}: trailing byte accepted"
        );
        println!("{name}: {} B, every truncation refused", bytes.len());
    }
}

#[test]
fn header_corruption_is_a_typed_error() {
    let s = small();
    for (name, bytes) in &s.objects {
        for i in 0..HEADER_LEN {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let e = decode_kind(&s.ck, name, &b).expect_err(name);
                match i {
                    0..=4 => assert!(matches!(e, Error::Malformed(_)), "{name} byte {i}: {e:?}"),
                    5 | 6 => assert!(
                        matches!(
                            e,
                            Error::UnsupportedVersion {
                                expected: FORMAT_VERSION,
                                ..
                            }
                        ),
                        "{name} byte {i}: {e:?}"
                    ),
                    _ => assert_eq!(e, Error::ParameterMismatch, "{name} byte {i}"),
                }
            }
        }
        // Version 2 of the same object.
        let mut b = bytes.clone();
        b[5..7].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        assert_eq!(
            decode_kind(&s.ck, name, &b).unwrap_err(),
            Error::UnsupportedVersion {
                found: FORMAT_VERSION + 1,
                expected: FORMAT_VERSION
            }
        );
        // The right object through the wrong decoder is refused too.
        let errs = decode_all(&s.ck, bytes);
        assert!(errs.iter().filter(|r| r.is_ok()).count() <= 2, "{name}");
    }
    assert!(matches!(
        serial::read_header(b"VEIL"),
        Err(Error::Malformed(_))
    ));
}

#[test]
fn body_corruption_is_refused() {
    let s = small();
    let ck = &s.ck;
    let p = ck.params().clone();
    let get = |n: &str| s.objects.iter().find(|o| o.0 == n).unwrap().1.clone();
    let ct = get("ct-full");
    let h = HEADER_LEN;
    // flags, degree, level, log_slots, scale.
    let bad = |off: usize, v: &[u8]| {
        let mut b = ct.clone();
        b[h + off..h + off + v.len()].copy_from_slice(v);
        ck.deserialize_ciphertext(&b).unwrap_err()
    };
    for (off, v) in [
        (0usize, vec![2u8]),
        (0, vec![0x80]),
        (1, vec![0]),
        (1, vec![3]),
        (2, vec![p.max_level() as u8 + 1]),
        (2, vec![255]),
        (3, vec![p.log_n() as u8]),
        (4, f64::NAN.to_le_bytes().to_vec()),
        (4, f64::INFINITY.to_le_bytes().to_vec()),
        (4, (-1.0f64).to_le_bytes().to_vec()),
        (4, 0.0f64.to_le_bytes().to_vec()),
    ] {
        assert!(matches!(bad(off, &v), Error::Malformed(_)), "{off} {v:?}");
    }
    // Seeded flag on an unseeded body: the lengths no longer add up.
    assert!(matches!(bad(0, &[1]), Error::Malformed(_)));
    // Degree 2 claimed on a degree-1 body.
    assert!(matches!(bad(1, &[2]), Error::Malformed(_)));

    // Residues ≥ q_i: the first coefficient of row 0 set to q_0, then to all ones.
    let q0 = p.q()[0].value();
    let w = (64 - q0.leading_zeros()) as usize;
    let start = h + 12;
    let mut b = ct.clone();
    let mut bits = q0;
    for i in 0..w {
        let (byte, bit) = ((start * 8 + i) / 8, (start * 8 + i) % 8);
        b[byte] = (b[byte] & !(1 << bit)) | (((bits & 1) as u8) << bit);
        bits >>= 1;
    }
    assert!(matches!(
        ck.deserialize_ciphertext(&b),
        Err(Error::Malformed(_))
    ));
    // The same in the last row (the row of q_level), and in a key.
    for name in ["ct-full", "pk-f", "swk-c", "pt"] {
        let mut b = get(name);
        let len = b.len();
        for x in &mut b[len - 16..len] {
            *x = 0xff;
        }
        assert!(
            matches!(decode_kind(ck, name, &b), Err(Error::Malformed(_))),
            "{name}"
        );
    }

    // Switching key: unknown flags and a wrong digit count.
    let swk = get("swk-c");
    for (off, v) in [(0usize, 0x82u8), (1, 0), (1, p.dnum() as u8 + 1)] {
        let mut b = swk.clone();
        b[h + off] = v;
        assert!(matches!(
            ck.deserialize_switching_key(&b),
            Err(Error::Malformed(_))
        ));
    }
    // Evaluation keys: bad flags, absurd counts (no allocation follows), even or unordered
    // Galois elements.
    let ek = get("ek-c");
    let mut b = ek.clone();
    b[h] = 2;
    assert!(matches!(
        ck.deserialize_evaluation_keys(&b),
        Err(Error::Malformed(_))
    ));
    for count in [u32::MAX, 1 << 20, 3] {
        let mut b = ek.clone();
        b[h + 1..h + 5].copy_from_slice(&count.to_le_bytes());
        assert!(matches!(
            ck.deserialize_evaluation_keys(&b),
            Err(Error::Malformed(_))
        ));
    }
    let first_g = h + 5 + (serial::switching_key_len(&p, true) - HEADER_LEN);
    for g in [0u64, 2, 2 * p.n() as u64 + 1, u64::MAX] {
        let mut b = ek.clone();
        b[first_g..first_g + 8].copy_from_slice(&g.to_le_bytes());
        assert!(
            matches!(ck.deserialize_evaluation_keys(&b), Err(Error::Malformed(_))),
            "g = {g}"
        );
    }

    // Parameters: a literal that does not validate, and one whose id is not the header's.
    let pb = get("params");
    let mut body_flip = pb.clone();
    body_flip[HEADER_LEN + 1] ^= 0x40; // inside the name or the next field
    assert!(serial::params_from_bytes(&body_flip).is_err());
    let other = params::insecure_logn12().validate().unwrap();
    let mut swapped = serial::params_to_bytes(&other).unwrap();
    swapped[7..15].copy_from_slice(&p.id().to_le_bytes());
    assert_eq!(
        serial::params_from_bytes_allowing_insecure(&swapped).unwrap_err(),
        Error::ParameterMismatch
    );
    assert_eq!(
        serial::params_from_bytes_expecting(&serial::params_to_bytes(&other).unwrap(), p.id())
            .unwrap_err(),
        Error::ParameterMismatch
    );
}

#[test]
fn wrong_parameters_are_refused() {
    let s = small();
    let (_, big) = ctx(params::insecure_logn12());
    let mut lit = params::insecure_logn10();
    lit.log_q.pop();
    let (_, fewer) = ctx(lit);
    let mut lit = params::insecure_logn10();
    lit.log_p[0] = 59;
    let (_, other_p) = ctx(lit);
    for (name, bytes) in &s.objects {
        if *name == "params" {
            continue;
        }
        for c in [&big, &fewer, &other_p] {
            assert_eq!(
                decode_kind(c, name, bytes).unwrap_err(),
                Error::ParameterMismatch,
                "{name}"
            );
        }
    }
    // And the other way: bytes made under insecure_logn12, decoded under insecure_logn10.
    let f = fixture(params::insecure_logn12(), &[]);
    let ct = f.ck.serialize_ciphertext(&f.ct_sk, true).unwrap();
    assert_eq!(
        s.ck.deserialize_ciphertext(&ct).unwrap_err(),
        Error::ParameterMismatch
    );
    let ek = f.ck.serialize_evaluation_keys(&f.keys, true).unwrap();
    assert_eq!(
        s.ck.deserialize_evaluation_keys(&ek).unwrap_err(),
        Error::ParameterMismatch
    );
    // Keys made under other parameters are refused at serialization too.
    let rlk = f.keys.relin.as_ref().unwrap();
    assert_eq!(
        s.ck.serialize_switching_key(rlk, true).unwrap_err(),
        Error::ParameterMismatch
    );
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let s = small();
    let mut rng = test_rng(13);
    let id = s.ck.params().id();
    let mut oks = 0usize;
    // Pure noise, and noise behind a valid header of every kind (to reach the body parsers).
    for i in 0..3000 {
        let len = (rng.next_u32() % 512) as usize;
        let mut b = vec![0u8; len];
        rng.fill_bytes(&mut b);
        if i % 2 == 1 && len >= HEADER_LEN {
            b[..4].copy_from_slice(b"VEIL");
            b[4] = 1 + (i / 2 % 6) as u8;
            b[5..7].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
            b[7..15].copy_from_slice(&id.to_le_bytes());
        }
        oks += decode_all(&s.ck, &b).iter().filter(|r| r.is_ok()).count();
    }
    // Mutations of valid encodings: byte flips, truncations, splices.
    for (name, bytes) in &s.objects {
        let rounds = if bytes.len() > 100_000 { 60 } else { 300 };
        for _ in 0..rounds {
            let mut b = bytes.clone();
            match rng.next_u32() % 4 {
                0 => {
                    for _ in 0..1 + rng.next_u32() % 4 {
                        let i = rng.next_u64() as usize % b.len();
                        b[i] = rng.next_u32() as u8;
                    }
                }
                1 => {
                    // Flip a byte in the first 64 (header and small fields).
                    let i = rng.next_u64() as usize % b.len().min(64);
                    b[i] ^= 1 + (rng.next_u32() % 255) as u8;
                }
                2 => {
                    let i = rng.next_u64() as usize % b.len();
                    b.truncate(i);
                }
                _ => {
                    let i = rng.next_u64() as usize % b.len();
                    let extra: Vec<u8> = (0..rng.next_u32() % 40)
                        .map(|_| rng.next_u32() as u8)
                        .collect();
                    b.splice(i..i, extra);
                }
            }
            for r in decode_all(&s.ck, &b) {
                oks += r.is_ok() as usize;
            }
            let _ = decode_kind(&s.ck, name, &b);
        }
    }
    println!("random/mutated inputs decoded without panic ({oks} happened to be valid)");
}
