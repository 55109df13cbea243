//! Causal decoders — the Llama architecture (SmolLM2 and its kind) and GPT-2: the public
//! architecture, the weights, and the `f64` reference that every private run is checked
//! against.
//!
//! A **Llama** layer is pre-RMSNorm attention with rotary positions and grouped-query heads,
//! then a pre-RMSNorm SwiGLU MLP, each added to the residual stream:
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
//!
//! A **GPT-2** layer has the same skeleton with LayerNorm (gain and bias) for the norms, a
//! bias on every projection, learned absolute positions added to the token embedding instead
//! of RoPE, one KV head per query head, and a `gelu_new` (tanh) MLP:
//! `x += W_down·gelu_tanh(W_up·m + b_up) + b_down` ([`Family::Gpt2`]).

pub mod cache;
pub mod head;
pub mod plan;
pub mod reference;
pub mod run;

use crate::error::Error;
use crate::packing::Mat;
use alloc::vec::Vec;

/// The architecture family of a decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// RMSNorm, RoPE, grouped-query attention, SwiGLU, no biases (Llama, SmolLM2).
    Llama,
    /// LayerNorm, learned positions, multi-head attention, GELU (tanh), biases (GPT-2).
    Gpt2,
}

/// A decoder's public shape.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// The architecture family.
    pub family: Family,
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
    /// RoPE's base `θ` (Llama; unused by GPT-2).
    pub rope_base: f64,
    /// The norms' `ε` (RMSNorm or LayerNorm).
    pub norm_eps: f64,
    /// Whether the LM head is the token embedding.
    pub tied_head: bool,
}

impl DecoderConfig {
    /// A tiny configuration of `family` for tests and examples: 2 layers of width 64, 4 query
    /// heads (over 2 KV heads for Llama), an MLP of 96, a vocabulary of 300, a context of 64.
    pub fn tiny(family: Family) -> Self {
        Self {
            family,
            layers: 2,
            hidden: 64,
            heads: 4,
            kv_heads: if family == Family::Llama { 2 } else { 4 },
            ffn: 96,
            vocab: 300,
            context: 64,
            rope_base: 10_000.0,
            norm_eps: 1e-5,
            tied_head: true,
        }
    }

    /// One head's width, `hidden / heads`.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// The width of the keys (and of the values): `kv_heads · head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim()
    }

    /// Checks the shape: every dimension positive, `heads` divides `hidden` into heads (of even
    /// width for Llama: RoPE rotates pairs), `kv_heads` divides `heads` (equals it for GPT-2),
    /// `ε` (and Llama's `θ`) positive and finite.
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
        let llama = self.family == Family::Llama;
        if !self.hidden.is_multiple_of(self.heads) || (llama && !self.head_dim().is_multiple_of(2))
        {
            return Err(Error::InvalidParameters(
                "the heads must split the width evenly (into heads of even width for RoPE)",
            ));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(Error::InvalidParameters(
                "the key/value heads must divide the query heads",
            ));
        }
        if !llama && self.kv_heads != self.heads {
            return Err(Error::InvalidParameters(
                "GPT-2 has one key/value head per query head",
            ));
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if (llama && !positive(self.rope_base)) || !positive(self.norm_eps) {
            return Err(Error::InvalidParameters(
                "RoPE's base and the norm's epsilon must be positive",
            ));
        }
        Ok(())
    }
}

/// The biases of a GPT-2 layer (each as long as the output it is added to).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerBiases {
    /// The attention LayerNorm's bias (`hidden`).
    pub attn_norm: Vec<f64>,
    /// `b_q` (`hidden`).
    pub q: Vec<f64>,
    /// `b_k` (`kv_dim`).
    pub k: Vec<f64>,
    /// `b_v` (`kv_dim`).
    pub v: Vec<f64>,
    /// `b_o` (`hidden`).
    pub o: Vec<f64>,
    /// The MLP LayerNorm's bias (`hidden`).
    pub mlp_norm: Vec<f64>,
    /// `b_up` (`ffn`).
    pub up: Vec<f64>,
    /// `b_down` (`hidden`).
    pub down: Vec<f64>,
}

/// One decoder layer's weights. Every projection is stored as PyTorch's `Linear` stores it,
/// `out × in` (row `o` holds the weights of output `o`).
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderLayer {
    /// The attention norm's gain (`hidden`).
    pub attn_norm: Vec<f64>,
    /// `W_q`: `hidden × hidden`.
    pub wq: Mat,
    /// `W_k`: `kv_dim × hidden`.
    pub wk: Mat,
    /// `W_v`: `kv_dim × hidden`.
    pub wv: Mat,
    /// `W_o`: `hidden × hidden`.
    pub wo: Mat,
    /// The MLP norm's gain (`hidden`).
    pub mlp_norm: Vec<f64>,
    /// `W_gate`: `ffn × hidden` (Llama's SwiGLU; `None` for GPT-2).
    pub w_gate: Option<Mat>,
    /// `W_up`: `ffn × hidden` (GPT-2's `c_fc`).
    pub w_up: Mat,
    /// `W_down`: `hidden × ffn`.
    pub w_down: Mat,
    /// The biases (GPT-2; `None` for Llama).
    pub biases: Option<LayerBiases>,
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
    /// The final norm's gain (`hidden`).
    pub final_norm: Vec<f64>,
    /// The final LayerNorm's bias (GPT-2; `None` for Llama).
    pub final_norm_bias: Option<Vec<f64>>,
    /// The learned position embedding, `context × hidden` (GPT-2; `None` for Llama).
    pub positions: Option<Mat>,
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
        let sized = |v: &[f64], n: usize, what: &'static str| {
            if v.len() != n {
                return Err(Error::Shape {
                    what,
                    expected: n,
                    found: v.len(),
                });
            }
            if values && v.iter().any(|x| !x.is_finite()) {
                return Err(Error::InvalidParameters("a decoder weight is not finite"));
            }
            Ok(())
        };
        let vector = |v: &[f64], what: &'static str| sized(v, d, what);
        let gpt2 = c.family == Family::Gpt2;
        let family = |present: bool, what: &'static str| {
            if present != gpt2 {
                return Err(Error::InvalidParameters(what));
            }
            Ok(())
        };
        family(
            self.positions.is_some(),
            "learned positions must be present exactly for GPT-2",
        )?;
        family(
            self.final_norm_bias.is_some(),
            "the final norm's bias must be present exactly for GPT-2",
        )?;
        if let Some(p) = &self.positions {
            mat(p, "position embedding (context × hidden)", c.context, d)?;
        }
        if let Some(b) = &self.final_norm_bias {
            vector(b, "final norm bias")?;
        }
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
            family(
                l.biases.is_some(),
                "a layer's biases must be present exactly for GPT-2",
            )?;
            family(
                l.w_gate.is_none(),
                "a gate projection must be present exactly for Llama",
            )?;
            if let Some(g) = &l.w_gate {
                mat(g, "W_gate (ffn × hidden)", f, d)?;
            }
            mat(&l.w_up, "W_up (ffn × hidden)", f, d)?;
            mat(&l.w_down, "W_down (hidden × ffn)", d, f)?;
            if let Some(b) = &l.biases {
                vector(&b.attn_norm, "attention norm bias")?;
                vector(&b.q, "b_q")?;
                sized(&b.k, kv, "b_k")?;
                sized(&b.v, kv, "b_v")?;
                vector(&b.o, "b_o")?;
                vector(&b.mlp_norm, "MLP norm bias")?;
                sized(&b.up, f, "b_up")?;
                vector(&b.down, "b_down")?;
            }
        }
        Ok(())
    }

    /// The LM head (`vocab × hidden`): the embedding when tied.
    pub fn lm_head(&self) -> &Mat {
        self.head.as_ref().unwrap_or(&self.embed)
    }
}
