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
