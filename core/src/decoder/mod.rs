//! Causal decoders (Llama architecture: SmolLM2 and its kind): the public architecture, the
//! weights, and the `f64` reference that every private run is checked against.
//!
//! One layer is pre-RMSNorm attention with rotary positions and grouped-query heads, then a
//! pre-RMSNorm SwiGLU MLP, each added to the residual stream:
//!
//! ```text
//! a = RMSNorm(x)·g_attn;  q = a·W_qᵀ, k = a·W_kᵀ, v = a·W_vᵀ;  RoPE(q, k) at each position
//! x += W_o·concat_h softmax_causal(q_h·k_{h/r}ᵀ/√d_h)·v_{h/r}        (r = heads / kv_heads)
//! m = RMSNorm(x)·g_mlp;   x += W_down·(silu(W_gate·m) ⊙ W_up·m)
//! ```
//!
//! then a final RMSNorm and the LM head (the token embedding itself when tied). RoPE rotates
//! the adjacent pairs `(2i, 2i+1)` of each head by `pos·θ^{-2i/d_h}` (the layout of GGUF files,
//! whose converter permutes Hugging Face's `q`/`k` rows into it).

pub mod cache;
pub mod reference;

use crate::error::Error;
use crate::packing::Mat;
use alloc::vec::Vec;

/// A Llama-architecture decoder's public shape.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// Decoder layers.
    pub layers: usize,
    /// Model width `d`.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention: `heads / kv_heads` query heads share one).
    pub kv_heads: usize,
    /// The MLP's inner width.
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// The longest context the model was trained for.
    pub context: usize,
    /// RoPE's base `θ`.
    pub rope_base: f64,
    /// RMSNorm's `ε`.
    pub rms_eps: f64,
    /// Whether the LM head is the token embedding.
    pub tied_head: bool,
}

impl DecoderConfig {
    /// One head's width, `hidden / heads`.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// The width of the keys (and of the values): `kv_heads · head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim()
    }

    /// Checks the shape: every dimension positive, `heads` divides `hidden` into heads of even
    /// width (RoPE rotates pairs), `kv_heads` divides `heads`, `θ` and `ε` positive and finite.
    pub fn validate(&self) -> Result<(), Error> {
        let dims = [
            self.layers,
            self.hidden,
            self.heads,
            self.kv_heads,
            self.ffn,
            self.vocab,
            self.context,
        ];
        if dims.contains(&0) {
            return Err(Error::InvalidParameters("a decoder dimension is zero"));
        }
        if !self.hidden.is_multiple_of(self.heads) || !self.head_dim().is_multiple_of(2) {
            return Err(Error::InvalidParameters(
                "the heads must split the width into heads of even width",
            ));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(Error::InvalidParameters(
                "the key/value heads must divide the query heads",
            ));
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.rope_base) || !positive(self.rms_eps) {
            return Err(Error::InvalidParameters(
                "RoPE's base and RMSNorm's epsilon must be positive",
            ));
        }
        Ok(())
    }
}

/// One decoder layer's weights. Every projection is stored as PyTorch's `Linear` stores it,
/// `out × in` (row `o` holds the weights of output `o`).
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderLayer {
    /// The attention RMSNorm's gain (`hidden`).
    pub attn_norm: Vec<f64>,
    /// `W_q`: `hidden × hidden`.
    pub wq: Mat,
    /// `W_k`: `kv_dim × hidden`.
    pub wk: Mat,
    /// `W_v`: `kv_dim × hidden`.
    pub wv: Mat,
    /// `W_o`: `hidden × hidden`.
    pub wo: Mat,
    /// The MLP RMSNorm's gain (`hidden`).
    pub mlp_norm: Vec<f64>,
    /// `W_gate`: `ffn × hidden`.
    pub w_gate: Mat,
    /// `W_up`: `ffn × hidden`.
    pub w_up: Mat,
    /// `W_down`: `hidden × ffn`.
    pub w_down: Mat,
}

/// A decoder's weights.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderWeights {
    /// The architecture.
    pub cfg: DecoderConfig,
    /// The token embedding, `vocab × hidden` (row `t` is token `t`).
    pub embed: Mat,
    /// The layers.
    pub layers: Vec<DecoderLayer>,
    /// The final RMSNorm's gain (`hidden`).
    pub final_norm: Vec<f64>,
    /// The LM head, `vocab × hidden`; `None` when it is the embedding (tied).
    pub head: Option<Mat>,
}

impl DecoderWeights {
    /// Checks every shape against the configuration (and the configuration itself), and that
    /// every weight is finite.
    pub fn validate(&self) -> Result<(), Error> {
        self.shapes(true)
    }

    /// Checks every shape against the configuration and the configuration itself, without
    /// reading the weights (what each reference step checks before it slices them).
    pub fn check_shapes(&self) -> Result<(), Error> {
        self.shapes(false)
    }

    fn shapes(&self, values: bool) -> Result<(), Error> {
        let c = &self.cfg;
        c.validate()?;
        let (d, kv, f) = (c.hidden, c.kv_dim(), c.ffn);
        let mat = |m: &Mat, what: &'static str, rows: usize, cols: usize| {
            if m.rows != rows || m.cols != cols || m.data.len() != rows * cols {
                return Err(Error::Shape {
                    what,
                    expected: rows * cols,
                    found: m.data.len(),
                });
            }
            if values && m.data.iter().any(|x| !x.is_finite()) {
                return Err(Error::InvalidParameters("a decoder weight is not finite"));
            }
            Ok(())
        };
        let vector = |v: &[f64], what: &'static str| {
            if v.len() != d {
                return Err(Error::Shape {
                    what,
                    expected: d,
                    found: v.len(),
                });
            }
            if values && v.iter().any(|x| !x.is_finite()) {
                return Err(Error::InvalidParameters("a decoder weight is not finite"));
            }
            Ok(())
        };
        if self.layers.len() != c.layers {
            return Err(Error::Shape {
                what: "decoder layers",
                expected: c.layers,
                found: self.layers.len(),
            });
        }
        if c.tied_head != self.head.is_none() {
            return Err(Error::InvalidParameters(
                "the LM head must be absent exactly when the configuration ties it",
            ));
        }
        mat(&self.embed, "token embedding (vocab × hidden)", c.vocab, d)?;
        if let Some(h) = &self.head {
            mat(h, "LM head (vocab × hidden)", c.vocab, d)?;
        }
        vector(&self.final_norm, "final norm")?;
        for l in &self.layers {
            vector(&l.attn_norm, "attention norm")?;
            vector(&l.mlp_norm, "MLP norm")?;
            mat(&l.wq, "W_q (hidden × hidden)", d, d)?;
            mat(&l.wk, "W_k (kv_dim × hidden)", kv, d)?;
            mat(&l.wv, "W_v (kv_dim × hidden)", kv, d)?;
            mat(&l.wo, "W_o (hidden × hidden)", d, d)?;
            mat(&l.w_gate, "W_gate (ffn × hidden)", f, d)?;
            mat(&l.w_up, "W_up (ffn × hidden)", f, d)?;
            mat(&l.w_down, "W_down (hidden × ffn)", d, f)?;
        }
        Ok(())
    }

    /// The LM head (`vocab × hidden`): the embedding when tied.
    pub fn lm_head(&self) -> &Mat {
        self.head.as_ref().unwrap_or(&self.embed)
    }
}
