//! GPT-2 checkpoints: a Hugging Face directory with `config.json` (`model_type: "gpt2"`),
//! `model.safetensors` and, for generation, `tokenizer.json`.
//!
//! GPT-2 stores its projections as `Conv1D` weights, `in × out` (the transpose of `Linear`),
//! and fuses `Q`, `K`, `V` into one `c_attn` of `d × 3d`; they are split and transposed into
//! [`DecoderLayer`]'s `Linear` layout here. Tensor names may carry a `transformer.` prefix;
//! other tensors (the attention's mask buffers, a tied `lm_head` copy) are ignored. Configs
//! that change the architecture are refused: an untied head, another activation, attention
//! not scaled by `1/√d_h` or scaled by the layer index.

use super::{ModelError, Tensors};
use safetensors::SafeTensors;
use serde_json::Value;
use std::path::{Path, PathBuf};
use veil_core::decoder::{DecoderConfig, DecoderLayer, DecoderWeights, Family, LayerBiases};
use veil_core::packing::Mat;

/// Largest dimension accepted from a config (keeps a hostile config from asking for absurd
/// work before a tensor is read).
const MAX_DIM: u64 = 1 << 20;

fn bad(field: &str, reason: impl Into<String>) -> ModelError {
    ModelError::BadConfig {
        field: field.into(),
        reason: reason.into(),
    }
}

fn dim(v: &Value, field: &str) -> Result<Option<usize>, ModelError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => {
            let x = x
                .as_u64()
                .ok_or_else(|| bad(field, "not a non-negative integer"))?;
            if x == 0 || x > MAX_DIM {
                return Err(bad(field, format!("{x} is out of range 1..={MAX_DIM}")));
            }
            Ok(Some(x as usize))
        }
    }
}

fn need(v: &Value, field: &str) -> Result<usize, ModelError> {
    dim(v, field)?.ok_or_else(|| bad(field, "missing"))
}

/// Parses a GPT-2 `config.json`: `model_type` must be `gpt2`, the activation `gelu_new` (the
/// default), the embedding tied (the default); `n_inner` defaults to `4·n_embd`,
/// `layer_norm_epsilon` to `1e-5`.
pub fn parse_config(bytes: &[u8]) -> Result<DecoderConfig, ModelError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad("json", e.to_string()))?;
    if !v.is_object() {
        return Err(bad("json", "not a JSON object"));
    }
    match v.get("model_type").and_then(Value::as_str) {
        Some("gpt2") => {}
        other => {
            return Err(bad(
                "model_type",
                format!("{other:?} is not supported here (only \"gpt2\")"),
            ))
        }
    }
    if let Some(a) = v.get("activation_function") {
        if a.as_str() != Some("gelu_new") {
            return Err(bad(
                "activation_function",
                format!("{a} is not supported (only \"gelu_new\")"),
            ));
        }
    }
    for (field, refused, why) in [
        (
            "tie_word_embeddings",
            false,
            "an untied LM head is not supported",
        ),
        (
            "scale_attn_weights",
            false,
            "attention without the 1/sqrt(d_h) scale is not supported",
        ),
        (
            "scale_attn_by_inverse_layer_idx",
            true,
            "attention scaled by the layer index is not supported",
        ),
    ] {
        if v.get(field).and_then(Value::as_bool) == Some(refused) {
            return Err(bad(field, why));
        }
    }
    let hidden = need(&v, "n_embd")?;
    let heads = need(&v, "n_head")?;
    let context = match dim(&v, "n_positions")? {
        Some(n) => n,
        None => need(&v, "n_ctx")?,
    };
    let eps = match v.get("layer_norm_epsilon") {
        None => 1e-5,
        Some(x) => x
            .as_f64()
            .ok_or_else(|| bad("layer_norm_epsilon", "not a number"))?,
    };
    if !hidden.is_multiple_of(heads) {
        return Err(bad(
            "n_head",
            format!("{heads} does not divide n_embd {hidden}"),
        ));
    }
    let cfg = DecoderConfig {
        family: Family::Gpt2,
        layers: need(&v, "n_layer")?,
        hidden,
        heads,
        kv_heads: heads,
        ffn: dim(&v, "n_inner")?.unwrap_or(4 * hidden),
        vocab: need(&v, "vocab_size")?,
        context,
        rope_base: 0.0,
        norm_eps: eps,
        tied_head: true,
    };
    cfg.validate()
        .map_err(|e| bad("n_embd/n_head/layer_norm_epsilon", e.to_string()))?;
    Ok(cfg)
}

/// Parses `model.safetensors` against a configuration into the decoder's weights.
pub fn parse_weights(bytes: &[u8], cfg: &DecoderConfig) -> Result<DecoderWeights, ModelError> {
    let st =
        SafeTensors::deserialize(bytes).map_err(|e| ModelError::BadSafetensors(e.to_string()))?;
    let t = Tensors(st);
    let (d, f) = (cfg.hidden, cfg.ffn);
    // A Conv1D weight (`in × out`) as a `Linear` one (`out × in`).
    let conv = |name: &str, inp: usize, out: usize| -> Result<Mat, ModelError> {
        Ok(Mat {
            rows: inp,
            cols: out,
            data: t.get(name, &[inp, out])?,
        }
        .transpose())
    };
    let vector = |name: &str, n: usize| t.get(name, &[n]);
    let mut layers = Vec::with_capacity(cfg.layers);
    for i in 0..cfg.layers {
        let n = |s: &str| format!("h.{i}.{s}");
        // c_attn: `d × 3d`, columns `[Q | K | V]`.
        let qkv = conv(&n("attn.c_attn.weight"), d, 3 * d)?;
        let part = |k: usize| Mat::from_fn(d, d, |o, c| qkv.get(k * d + o, c));
        let b = vector(&n("attn.c_attn.bias"), 3 * d)?;
        layers.push(DecoderLayer {
            attn_norm: vector(&n("ln_1.weight"), d)?,
            wq: part(0),
            wk: part(1),
            wv: part(2),
            wo: conv(&n("attn.c_proj.weight"), d, d)?,
            mlp_norm: vector(&n("ln_2.weight"), d)?,
            w_gate: None,
            w_up: conv(&n("mlp.c_fc.weight"), d, f)?,
            w_down: conv(&n("mlp.c_proj.weight"), f, d)?,
            biases: Some(LayerBiases {
                attn_norm: vector(&n("ln_1.bias"), d)?,
                q: b[..d].to_vec(),
                k: b[d..2 * d].to_vec(),
                v: b[2 * d..].to_vec(),
                o: vector(&n("attn.c_proj.bias"), d)?,
                mlp_norm: vector(&n("ln_2.bias"), d)?,
                up: vector(&n("mlp.c_fc.bias"), f)?,
                down: vector(&n("mlp.c_proj.bias"), d)?,
            }),
        });
    }
    let mat = |name: &str, rows: usize| -> Result<Mat, ModelError> {
        Ok(Mat {
            rows,
            cols: d,
            data: t.get(name, &[rows, d])?,
        })
    };
    let w = DecoderWeights {
        cfg: cfg.clone(),
        embed: mat("wte.weight", cfg.vocab)?,
        layers,
        final_norm: vector("ln_f.weight", d)?,
        final_norm_bias: Some(vector("ln_f.bias", d)?),
        positions: Some(mat("wpe.weight", cfg.context)?),
        head: None,
    };
    w.validate()?;
    Ok(w)
}

/// A GPT-2 directory, loaded.
pub struct Gpt2Dir {
    /// The directory.
    pub path: PathBuf,
    /// The weights.
    pub weights: DecoderWeights,
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    if !path.is_file() {
        return Err(ModelError::MissingFile {
            path: path.to_path_buf(),
        });
    }
    std::fs::read(path).map_err(|e| ModelError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

impl Gpt2Dir {
    /// Whether `dir` looks like a GPT-2 directory (a `config.json` whose `model_type` is
    /// `gpt2`); any read or parse failure says no.
    pub fn is_gpt2(dir: &Path) -> bool {
        std::fs::read(dir.join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|v| v.get("model_type").and_then(Value::as_str) == Some("gpt2"))
    }

    /// Loads `config.json` and `model.safetensors` from `dir`.
    pub fn open(dir: &Path) -> Result<Self, ModelError> {
        let cfg = parse_config(&read(&dir.join("config.json"))?)?;
        let weights = parse_weights(&read(&dir.join("model.safetensors"))?, &cfg)?;
        Ok(Self {
            path: dir.to_path_buf(),
            weights,
        })
    }

    /// The directory's `tokenizer.json`.
    pub fn tokenizer(&self) -> Result<tokenizers::Tokenizer, ModelError> {
        let p = self.path.join("tokenizer.json");
        if !p.is_file() {
            return Err(ModelError::MissingFile { path: p });
        }
        tokenizers::Tokenizer::from_file(&p).map_err(|e| ModelError::Tokenizer(e.to_string()))
    }
}

/// Writes a GPT-2 directory (`config.json`, `model.safetensors` in F32, Conv1D layout) for
/// `w`: the tests' small checkpoints, and the inverse of [`Gpt2Dir::open`].
pub fn write_dir(dir: &Path, w: &DecoderWeights) -> Result<(), ModelError> {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let c = &w.cfg;
    if c.family != Family::Gpt2 || w.head.is_some() {
        return Err(ModelError::BadConfig {
            field: "model_type".into(),
            reason: "not a GPT-2 model with a tied head".into(),
        });
    }
    w.validate()?;
    let io = |e: std::io::Error| ModelError::Io {
        path: dir.to_path_buf(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let config = serde_json::json!({
        "model_type": "gpt2",
        "n_layer": c.layers, "n_embd": c.hidden, "n_head": c.heads, "n_inner": c.ffn,
        "vocab_size": c.vocab, "n_positions": c.context, "layer_norm_epsilon": c.norm_eps,
        "activation_function": "gelu_new",
    });
    std::fs::write(dir.join("config.json"), config.to_string()).map_err(io)?;
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut put = |name: String, shape: Vec<usize>, v: &[f64]| {
        let bytes = v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
        tensors.push((name, shape, bytes));
    };
    let d = c.hidden;
    for (i, l) in w.layers.iter().enumerate() {
        let b = l
            .biases
            .as_ref()
            .ok_or(veil_core::Error::InvalidParameters(
                "a GPT-2 layer without biases",
            ))?;
        let n = |s: &str| format!("h.{i}.{s}");
        let qkv = Mat::from_fn(d, 3 * d, |c_in, o| {
            let m = [&l.wq, &l.wk, &l.wv][o / d];
            m.get(o % d, c_in)
        });
        put(n("attn.c_attn.weight"), vec![d, 3 * d], &qkv.data);
        let bqkv: Vec<f64> = b.q.iter().chain(&b.k).chain(&b.v).copied().collect();
        put(n("attn.c_attn.bias"), vec![3 * d], &bqkv);
        put(n("attn.c_proj.weight"), vec![d, d], &l.wo.transpose().data);
        put(n("attn.c_proj.bias"), vec![d], &b.o);
        put(n("ln_1.weight"), vec![d], &l.attn_norm);
        put(n("ln_1.bias"), vec![d], &b.attn_norm);
        put(n("ln_2.weight"), vec![d], &l.mlp_norm);
        put(n("ln_2.bias"), vec![d], &b.mlp_norm);
        put(
            n("mlp.c_fc.weight"),
            vec![d, c.ffn],
            &l.w_up.transpose().data,
        );
        put(n("mlp.c_fc.bias"), vec![c.ffn], &b.up);
        put(
            n("mlp.c_proj.weight"),
            vec![c.ffn, d],
            &l.w_down.transpose().data,
        );
        put(n("mlp.c_proj.bias"), vec![d], &b.down);
    }
    put("wte.weight".into(), vec![c.vocab, d], &w.embed.data);
    if let Some(p) = &w.positions {
        put("wpe.weight".into(), vec![c.context, d], &p.data);
    }
    put("ln_f.weight".into(), vec![d], &w.final_norm);
    if let Some(b) = &w.final_norm_bias {
        put("ln_f.bias".into(), vec![d], b);
    }
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, b)| {
            TensorView::new(Dtype::F32, s.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| ModelError::BadSafetensors(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    let bytes = safetensors::serialize(views, None)
        .map_err(|e| ModelError::BadSafetensors(e.to_string()))?;
    std::fs::write(dir.join("model.safetensors"), bytes).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use veil_core::decoder::reference::{forward_all, random_weights};

    fn small() -> DecoderConfig {
        DecoderConfig {
            family: Family::Gpt2,
            layers: 2,
            hidden: 16,
            heads: 4,
            kv_heads: 4,
            ffn: 24,
            vocab: 50,
            context: 20,
            rope_base: 0.0,
            norm_eps: 1e-5,
            tied_head: true,
        }
    }

    /// Weights rounded to f32, as the file stores them.
    fn as_f32(w: &DecoderWeights) -> DecoderWeights {
        let mut w = w.clone();
        let r = |v: &mut Vec<f64>| v.iter_mut().for_each(|x| *x = *x as f32 as f64);
        r(&mut w.embed.data);
        r(&mut w.final_norm);
        if let Some(b) = w.final_norm_bias.as_mut() {
            r(b);
        }
        if let Some(p) = w.positions.as_mut() {
            r(&mut p.data);
        }
        for l in w.layers.iter_mut() {
            for m in [
                &mut l.wq,
                &mut l.wk,
                &mut l.wv,
                &mut l.wo,
                &mut l.w_up,
                &mut l.w_down,
            ] {
                r(&mut m.data);
            }
            r(&mut l.attn_norm);
            r(&mut l.mlp_norm);
            let b = l.biases.as_mut().unwrap();
            for v in [
                &mut b.attn_norm,
                &mut b.q,
                &mut b.k,
                &mut b.v,
                &mut b.o,
                &mut b.mlp_norm,
                &mut b.up,
                &mut b.down,
            ] {
                r(v);
            }
        }
        w
    }

    #[test]
    fn a_written_directory_loads_back_and_runs_as_the_reference() {
        let w = random_weights(&small(), 9).unwrap();
        let dir = std::env::temp_dir().join(format!("veil-gpt2-{}", std::process::id()));
        write_dir(&dir, &w).unwrap();
        assert!(Gpt2Dir::is_gpt2(&dir));
        let got = Gpt2Dir::open(&dir).unwrap();
        assert_eq!(got.weights, as_f32(&w));
        let toks = [1, 7, 49, 3, 3, 20];
        let a = forward_all(&got.weights, &toks).unwrap();
        let b = forward_all(&as_f32(&w), &toks).unwrap();
        assert_eq!(a, b);
        assert!(matches!(
            got.tokenizer(),
            Err(ModelError::MissingFile { .. })
        ));

        // A missing tensor and a mis-shaped one are named.
        let st_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&st_path).unwrap();
        let mut cfg = small();
        cfg.layers = 3;
        match parse_weights(&bytes, &cfg) {
            Err(ModelError::MissingTensor { name }) => assert!(name.starts_with("h.2."), "{name}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a missing layer"),
        }
        let mut cfg = small();
        cfg.ffn = 32;
        assert!(matches!(
            parse_weights(&bytes, &cfg),
            Err(ModelError::BadTensor { .. })
        ));
        assert!(parse_weights(&bytes[..bytes.len() / 2], &small()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn configs_are_checked() {
        let ok = br#"{"model_type":"gpt2","n_layer":12,"n_embd":768,"n_head":12,"vocab_size":50257,"n_positions":1024}"#;
        let c = parse_config(ok).unwrap();
        assert_eq!(
            (c.ffn, c.kv_heads, c.norm_eps, c.family),
            (3072, 12, 1e-5, Family::Gpt2)
        );
        for (bad_json, field) in [
            (&br#"{"model_type":"llama","n_layer":1}"#[..], "model_type"),
            (br#"{"model_type":"gpt2","n_layer":1,"n_embd":10,"n_head":3,"vocab_size":5,"n_positions":4}"#, "n_head"),
            (br#"{"model_type":"gpt2","n_layer":1,"n_embd":8,"n_head":2,"vocab_size":5,"n_positions":4,"activation_function":"relu"}"#, "activation_function"),
            (br#"{"model_type":"gpt2","n_embd":8,"n_head":2,"vocab_size":5,"n_positions":4}"#, "n_layer"),
            (br#"{"model_type":"gpt2","n_layer":1,"n_embd":8,"n_head":2,"vocab_size":5,"n_positions":4,"layer_norm_epsilon":-1}"#, "n_embd/n_head/layer_norm_epsilon"),
            (br#"{"model_type":"gpt2","n_layer":1,"n_embd":8,"n_head":2,"vocab_size":5,"n_positions":4,"scale_attn_weights":false}"#, "scale_attn_weights"),
            (br#"{"model_type":"gpt2","n_layer":1,"n_embd":8,"n_head":2,"vocab_size":5,"n_positions":4,"scale_attn_by_inverse_layer_idx":true}"#, "scale_attn_by_inverse_layer_idx"),
            (br#"{"model_type":"gpt2","n_layer":1,"n_embd":8,"n_head":2,"vocab_size":5,"n_positions":4,"tie_word_embeddings":false}"#, "tie_word_embeddings"),
            (br#"{"model_type":"gpt2","n_layer":99999999,"n_embd":8,"n_head":2,"vocab_size":5,"n_positions":4}"#, "n_layer"),
            (b"[1, 2]", "json"),
            (b"not json", "json"),
        ] {
            match parse_config(bad_json) {
                Err(ModelError::BadConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {:?}", other.map(|_| ())),
            }
        }
    }
}
