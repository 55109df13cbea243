//! Llama-architecture decoder checkpoints in GGUF (SmolLM2 and its kind): the public
//! architecture read from the file's metadata, and the check that every tensor the architecture
//! needs is there with its shape and a type [`super::gguf`] decodes.
//!
//! The architecture (GGUF keys `llama.*`): `block_count` layers of pre-RMSNorm attention with
//! rotary positions (RoPE, `rope.freq_base`) and grouped-query heads (`attention.head_count`
//! query heads share `attention.head_count_kv` key/value heads), then a pre-RMSNorm SwiGLU MLP
//! (`down(silu(gate(x)) · up(x))`, width `feed_forward_length`); a final RMSNorm; and the LM
//! head, which is the token embedding itself (tied) when the file has no `output.weight`.

use std::path::{Path, PathBuf};

use super::fetch::SMOLLM2;
use super::gguf::{Array, Gguf, GgufError};
use super::ModelError;
use veil_core::decoder::{DecoderConfig, DecoderLayer, DecoderWeights, Family};
use veil_core::packing::Mat;

/// The largest dimension accepted from a file's metadata (far above any checkpoint Veil runs;
/// it keeps a hostile file's products inside `usize`).
const MAX_DIM: u64 = 1 << 24;
/// The most layers accepted (Llama-3 405B has 126).
pub const MAX_LAYERS: usize = 1024;

/// The architecture from a GGUF file's metadata, validated: `general.architecture` is
/// `llama`, every dimension is positive (and below 2^24), at most [`MAX_LAYERS`] layers,
/// `heads` divides `hidden` into an even head width (RoPE rotates pairs), and `kv_heads`
/// divides `heads`.
pub fn read_config(g: &Gguf) -> Result<DecoderConfig, GgufError> {
    let arch = g.get_str("general.architecture")?;
    if arch != "llama" {
        return Err(GgufError::BadValue {
            key: "general.architecture".into(),
            expected: "`llama`",
        });
    }
    let dim = |key: &str| -> Result<usize, GgufError> {
        let v = g.get_u64(key)?;
        if v == 0 || v > MAX_DIM {
            return Err(GgufError::BadValue {
                key: key.into(),
                expected: "a dimension from 1 to 2^24",
            });
        }
        Ok(v as usize)
    };
    let vocab = match g.get_array("tokenizer.ggml.tokens") {
        Ok(Array::Str(t)) if !t.is_empty() => t.len(),
        Ok(_) => {
            return Err(GgufError::BadValue {
                key: "tokenizer.ggml.tokens".into(),
                expected: "a non-empty array of strings",
            })
        }
        Err(GgufError::MissingKey(_)) => dim("llama.vocab_size")?,
        Err(e) => return Err(e),
    };
    let positive = |key: &str| -> Result<f64, GgufError> {
        let v = g.get_f64(key)?;
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(GgufError::BadValue {
                key: key.into(),
                expected: "a positive number",
            })
        }
    };
    let cfg = DecoderConfig {
        family: Family::Llama,
        layers: dim("llama.block_count")?,
        hidden: dim("llama.embedding_length")?,
        heads: dim("llama.attention.head_count")?,
        kv_heads: dim("llama.attention.head_count_kv")?,
        ffn: dim("llama.feed_forward_length")?,
        vocab,
        context: dim("llama.context_length")?,
        rope_base: positive("llama.rope.freq_base")?,
        norm_eps: positive("llama.attention.layer_norm_rms_epsilon")?,
        tied_head: g.tensor_info("output.weight").is_err(),
    };
    if cfg.layers > MAX_LAYERS {
        return Err(GgufError::BadValue {
            key: "llama.block_count".into(),
            expected: "at most 1024 layers",
        });
    }
    // The shape's rules live in one place, the core type's validation.
    cfg.validate().map_err(|e| GgufError::BadValue {
        key: "llama.attention.head_count / head_count_kv".into(),
        expected: match e {
            veil_core::Error::InvalidParameters(m) => m,
            _ => "a valid decoder shape",
        },
    })?;
    if let Ok(v) = g.get_u64("llama.rope.dimension_count") {
        if v != cfg.head_dim() as u64 {
            return Err(GgufError::BadValue {
                key: "llama.rope.dimension_count".into(),
                expected: "the head width (partial rotary embeddings are not supported)",
            });
        }
    }
    Ok(cfg)
}

/// Every tensor the architecture reads, with its GGUF dimensions (innermost first: a
/// projection from `a` to `b` features is `[a, b]`, a vector of `d` is `[d]`), in file order:
/// the embedding, the final norm, the untied head if any, then each layer's nine. They are
/// made as they are read, so a check stops at the first tensor missing.
pub fn tensor_names(cfg: &DecoderConfig) -> impl Iterator<Item = (String, Vec<u64>)> + '_ {
    let (d, kv, f) = (cfg.hidden as u64, cfg.kv_dim() as u64, cfg.ffn as u64);
    let vocab = cfg.vocab as u64;
    let mut top = vec![
        ("token_embd.weight".to_string(), vec![d, vocab]),
        ("output_norm.weight".to_string(), vec![d]),
    ];
    if !cfg.tied_head {
        top.push(("output.weight".into(), vec![d, vocab]));
    }
    let layer: [(&str, &[u64]); 9] = [
        ("attn_norm", &[d]),
        ("attn_q", &[d, d]),
        ("attn_k", &[d, kv]),
        ("attn_v", &[d, kv]),
        ("attn_output", &[d, d]),
        ("ffn_norm", &[d]),
        ("ffn_gate", &[d, f]),
        ("ffn_up", &[d, f]),
        ("ffn_down", &[f, d]),
    ];
    let layer: Vec<(&'static str, Vec<u64>)> =
        layer.iter().map(|(s, dims)| (*s, dims.to_vec())).collect();
    top.into_iter().chain((0..cfg.layers).flat_map(move |i| {
        layer
            .clone()
            .into_iter()
            .map(move |(s, dims)| (format!("blk.{i}.{s}.weight"), dims))
    }))
}

/// Checks that `g` holds every tensor of [`tensor_names`] with its dimensions and a type the
/// reader decodes.
pub fn check_tensors(cfg: &DecoderConfig, g: &Gguf) -> Result<(), GgufError> {
    for (name, dims) in tensor_names(cfg) {
        g.expect_dims(&name, &dims)?;
    }
    Ok(())
}

/// A decoder checkpoint opened and checked: its architecture, and the file its tensors are
/// decoded from.
#[derive(Debug)]
pub struct LlamaFile {
    /// The path it was read from.
    pub path: PathBuf,
    /// The architecture.
    pub config: DecoderConfig,
    /// The parsed file.
    pub gguf: Gguf,
}

impl LlamaFile {
    /// Reads `path`, reads its architecture and checks every tensor it needs
    /// ([`check_tensors`]); any problem is [`ModelError::Gguf`] naming the file.
    pub fn open(path: &Path) -> Result<Self, ModelError> {
        let err = |source| ModelError::Gguf {
            path: path.to_path_buf(),
            source,
        };
        let gguf = Gguf::read(path).map_err(err)?;
        let config = read_config(&gguf).map_err(err)?;
        check_tensors(&config, &gguf).map_err(err)?;
        Ok(LlamaFile {
            path: path.to_path_buf(),
            config,
            gguf,
        })
    }

    /// Every weight, dequantized to `f64` (exactly: each `f32` the file decodes to), in the
    /// `Linear` layout of [`DecoderWeights`]. A GGUF matrix `[in, out]` (innermost first) is
    /// `out` rows of `in` entries, which is that layout already. SmolLM2's 135 M weights take
    /// 1.1 GB.
    pub fn weights(&self) -> Result<DecoderWeights, ModelError> {
        let err = |source| ModelError::Gguf {
            path: self.path.clone(),
            source,
        };
        let g = &self.gguf;
        let c = &self.config;
        let mat = |name: &str, rows: usize, cols: usize| -> Result<Mat, ModelError> {
            let v = g.matrix_f32(name, rows, cols).map_err(err)?;
            Ok(Mat {
                rows,
                cols,
                data: v.into_iter().map(f64::from).collect(),
            })
        };
        let vector = |name: &str| -> Result<Vec<f64>, ModelError> {
            g.expect_dims(name, &[c.hidden as u64]).map_err(err)?;
            let v = g.tensor_f32(name).map_err(err)?;
            Ok(v.into_iter().map(f64::from).collect())
        };
        let (d, kv, f) = (c.hidden, c.kv_dim(), c.ffn);
        let mut layers = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            layers.push(DecoderLayer {
                attn_norm: vector(&n("attn_norm"))?,
                wq: mat(&n("attn_q"), d, d)?,
                wk: mat(&n("attn_k"), kv, d)?,
                wv: mat(&n("attn_v"), kv, d)?,
                wo: mat(&n("attn_output"), d, d)?,
                mlp_norm: vector(&n("ffn_norm"))?,
                w_gate: Some(mat(&n("ffn_gate"), f, d)?),
                w_up: mat(&n("ffn_up"), f, d)?,
                w_down: mat(&n("ffn_down"), d, f)?,
                biases: None,
            });
        }
        let w = DecoderWeights {
            cfg: c.clone(),
            embed: mat("token_embd.weight", c.vocab, d)?,
            layers,
            final_norm: vector("output_norm.weight")?,
            final_norm_bias: None,
            positions: None,
            head: if c.tied_head {
                None
            } else {
                Some(mat("output.weight", c.vocab, d)?)
            },
        };
        w.validate()?;
        Ok(w)
    }

    /// The file's tokenizer ([`tokenizer`]).
    pub fn tokenizer(&self) -> Result<tokenizers::Tokenizer, ModelError> {
        tokenizer(&self.gguf).map_err(|source| ModelError::Gguf {
            path: self.path.clone(),
            source,
        })
    }

    /// The end-of-sequence token (`tokenizer.ggml.eos_token_id`), if the file names one.
    pub fn eos(&self) -> Option<u32> {
        let id = self.gguf.get_u64("tokenizer.ggml.eos_token_id").ok()?;
        u32::try_from(id)
            .ok()
            .filter(|&i| (i as usize) < self.config.vocab)
    }

    /// SmolLM2-135M-Instruct ([`SMOLLM2`]), fetched into the cache on first use and checked
    /// against its pin before each.
    pub fn smollm2() -> Result<Self, ModelError> {
        let dir = SMOLLM2.dir()?;
        Self::open(&dir.join(SMOLLM2.pins[0].name))
    }
}

/// The file's tokenizer, built from its metadata (`tokenizer.ggml.*`) with the `tokenizers`
/// crate: byte-level BPE over `tokens` and `merges` (`tokenizer.ggml.model` = `gpt2`), the
/// control tokens (`token_type` 3, such as `<|im_start|>`) matched whole, and the
/// pre-tokenization of the file's `tokenizer.ggml.pre`: `smollm` splits every digit on its own
/// before the GPT-2 split (llama.cpp's rule for it), `gpt2` or `default` does not. Another
/// model or pre-tokenizer is [`GgufError::BadValue`].
pub fn tokenizer(g: &Gguf) -> Result<tokenizers::Tokenizer, GgufError> {
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::pre_tokenizers::digits::Digits;
    use tokenizers::pre_tokenizers::sequence::Sequence;
    use tokenizers::{AddedToken, PreTokenizerWrapper};
    let bad = |key: &str, expected: &'static str| GgufError::BadValue {
        key: key.into(),
        expected,
    };
    if g.get_str("tokenizer.ggml.model")? != "gpt2" {
        return Err(bad("tokenizer.ggml.model", "`gpt2` (byte-level BPE)"));
    }
    let digits = match g.get_str("tokenizer.ggml.pre").unwrap_or("default") {
        "smollm" => true,
        "gpt2" | "default" => false,
        _ => return Err(bad("tokenizer.ggml.pre", "`smollm`, `gpt2` or `default`")),
    };
    let Array::Str(tokens) = g.get_array("tokenizer.ggml.tokens")? else {
        return Err(bad("tokenizer.ggml.tokens", "an array of strings"));
    };
    let Array::Str(merges) = g.get_array("tokenizer.ggml.merges")? else {
        return Err(bad("tokenizer.ggml.merges", "an array of strings"));
    };
    let vocab: tokenizers::models::bpe::Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    if vocab.len() != tokens.len() {
        return Err(bad("tokenizer.ggml.tokens", "distinct tokens"));
    }
    let merges = merges
        .iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| bad("tokenizer.ggml.merges", "pairs `a b`"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|_| {
            bad(
                "tokenizer.ggml.merges",
                "merges of tokens in the vocabulary",
            )
        })?;
    let mut t = tokenizers::Tokenizer::new(bpe);
    let byte_level = ByteLevel::new(false, true, true);
    let pre: PreTokenizerWrapper = if digits {
        Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
    } else {
        byte_level.into()
    };
    t.with_pre_tokenizer(Some(pre));
    t.with_decoder(Some(ByteLevel::default()));
    // Control tokens (type 3) are matched whole, never split by the BPE.
    let types: Vec<i64> = match g.get_array("tokenizer.ggml.token_type") {
        Ok(Array::Int(v)) => v.clone(),
        Ok(Array::Uint(v)) => v.iter().map(|&x| x as i64).collect(),
        Ok(_) => return Err(bad("tokenizer.ggml.token_type", "an array of integers")),
        Err(_) => Vec::new(),
    };
    let control: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &ty)| ty == 3)
        .map(|(tok, _)| AddedToken::from(tok.clone(), true))
        .collect();
    t.add_special_tokens(&control);
    Ok(t)
}

/// The ChatML turn markers a chat template must use for [`chat_prompt`].
const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";

/// `user` as one user turn of the file's chat template, ready for the assistant's reply. Only
/// ChatML templates are rendered (SmolLM2's): the system turn is the template's default one
/// (the text it puts between `<|im_start|>system` and `<|im_end|>`), if it has one. A template
/// in another form is [`GgufError::BadValue`] (the Jinja language is not interpreted). The
/// user's text goes in as it is: a control token typed in it (`<|im_start|>`) is matched as
/// one by the tokenizer, which is harmless when the user runs the model itself.
pub fn chat_prompt(g: &Gguf, user: &str) -> Result<String, GgufError> {
    let template = g.get_str("tokenizer.chat_template")?;
    if !template.contains(IM_START) || !template.contains(IM_END) {
        return Err(GgufError::BadValue {
            key: "tokenizer.chat_template".into(),
            expected: "a ChatML template (<|im_start|> … <|im_end|>)",
        });
    }
    let system = template
        .split_once("<|im_start|>system\n")
        .and_then(|(_, rest)| rest.split_once(IM_END))
        .map(|(s, _)| s);
    let mut p = String::new();
    if let Some(sys) = system {
        p += &format!("{IM_START}system\n{sys}{IM_END}\n");
    }
    p += &format!("{IM_START}user\n{user}{IM_END}\n{IM_START}assistant\n");
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::super::gguf::Writer;
    use super::*;

    /// A tiny Llama file's metadata and tensors (zeros), built to `cfg`.
    fn file(cfg: &DecoderConfig, skip: Option<&str>, tokens: bool) -> Vec<u8> {
        let mut w = Writer::new();
        w.kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", cfg.layers as u32)
            .kv_u32("llama.embedding_length", cfg.hidden as u32)
            .kv_u32("llama.attention.head_count", cfg.heads as u32)
            .kv_u32("llama.attention.head_count_kv", cfg.kv_heads as u32)
            .kv_u32("llama.feed_forward_length", cfg.ffn as u32)
            .kv_u32("llama.context_length", cfg.context as u32)
            .kv_u32("llama.rope.dimension_count", cfg.head_dim() as u32)
            .kv_f32("llama.rope.freq_base", cfg.rope_base as f32)
            .kv_f32(
                "llama.attention.layer_norm_rms_epsilon",
                cfg.norm_eps as f32,
            );
        if tokens {
            let names: Vec<String> = (0..cfg.vocab).map(|i| format!("t{i}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            w.kv_strs("tokenizer.ggml.tokens", &refs);
        } else {
            w.kv_u32("llama.vocab_size", cfg.vocab as u32);
        }
        let all = if skip == Some("*") { 0 } else { usize::MAX };
        for (name, dims) in tensor_names(cfg).take(all) {
            if Some(name.as_str()) == skip {
                continue;
            }
            let n = dims.iter().product::<u64>() as usize;
            w.tensor_f32(&name, &dims, &vec![0.0; n]);
        }
        w.finish()
    }

    fn small() -> DecoderConfig {
        DecoderConfig {
            family: Family::Llama,
            layers: 2,
            hidden: 8,
            heads: 4,
            kv_heads: 2,
            ffn: 12,
            vocab: 10,
            context: 64,
            rope_base: 10000.0,
            norm_eps: 1e-5,
            tied_head: true,
        }
    }

    #[test]
    fn reads_the_architecture_and_checks_every_tensor() {
        let cfg = small();
        for tokens in [true, false] {
            let g = Gguf::parse(file(&cfg, None, tokens)).unwrap();
            let got = read_config(&g).unwrap();
            assert_eq!(got.norm_eps as f32, 1e-5);
            assert_eq!(
                DecoderConfig {
                    norm_eps: cfg.norm_eps,
                    ..got.clone()
                },
                cfg
            );
            assert_eq!((got.head_dim(), got.kv_dim()), (2, 4));
            check_tensors(&got, &g).unwrap();
        }
    }

    #[test]
    fn a_missing_or_misshaped_tensor_is_named() {
        let cfg = small();
        let g = Gguf::parse(file(&cfg, Some("blk.1.ffn_up.weight"), true)).unwrap();
        assert_eq!(
            check_tensors(&cfg, &g),
            Err(GgufError::MissingTensor("blk.1.ffn_up.weight".into()))
        );
        // A file whose K projection is as wide as Q: the configuration says 2 KV heads.
        let wide = DecoderConfig {
            kv_heads: 4,
            ..small()
        };
        let g = Gguf::parse(file(&wide, None, true)).unwrap();
        match check_tensors(&cfg, &g) {
            Err(GgufError::BadTensor { name, .. }) => assert_eq!(name, "blk.0.attn_k.weight"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        let bad = |c: DecoderConfig| {
            let g = Gguf::parse(file(&c, None, true)).unwrap();
            read_config(&g).unwrap_err()
        };
        assert!(matches!(
            bad(DecoderConfig {
                heads: 3,
                ..small()
            }),
            GgufError::BadValue { .. }
        ));
        assert!(matches!(
            bad(DecoderConfig {
                kv_heads: 3,
                heads: 4,
                ..small()
            }),
            GgufError::BadValue { .. }
        ));
        // 2^24 layers claimed in the metadata: refused before any tensor is looked for (the
        // fuzz target found the unbounded walk over their names).
        let g = Gguf::parse(file(
            &DecoderConfig {
                layers: 1 << 24,
                ..small()
            },
            Some("*"),
            true,
        ))
        .unwrap();
        assert!(matches!(
            read_config(&g),
            Err(GgufError::BadValue { key, .. }) if key == "llama.block_count"
        ));
        let mut w = Writer::new();
        w.kv_str("general.architecture", "gpt2");
        let g = Gguf::parse(w.finish()).unwrap();
        assert!(matches!(read_config(&g), Err(GgufError::BadValue { .. })));
        let mut w = Writer::new();
        w.kv_str("general.architecture", "llama");
        let g = Gguf::parse(w.finish()).unwrap();
        assert!(matches!(read_config(&g), Err(GgufError::MissingKey(_))));
    }
}
