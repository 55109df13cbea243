//! The weights of a BERT-architecture encoder with a classification head, as plain `f64`
//! matrices. The server holds [`EncoderWeights`] (its secret: `Debug` shows only shapes); the
//! client holds [`Embeddings`], the table published with the architecture (see the crate README's
//! security notes for that threat-model choice).

use crate::error::{Error, Result};
use crate::packing::Mat;
use alloc::vec::Vec;

/// The public architecture of an encoder (what `config.json` says).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EncoderConfig {
    /// Transformer layers.
    pub layers: usize,
    /// Hidden width `d`.
    pub hidden: usize,
    /// Attention heads `H` (`d_h = d/H`).
    pub heads: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// LayerNorm `ε`.
    pub ln_eps: f64,
    /// Output classes of the head.
    pub classes: usize,
}

impl EncoderConfig {
    /// all-MiniLM-L6-v2 with a two-class head.
    pub const MINILM_L6: EncoderConfig = EncoderConfig {
        layers: 6,
        hidden: 384,
        heads: 12,
        ffn: 1536,
        ln_eps: 1e-12,
        classes: 2,
    };

    /// BERT-base (12 layers, hidden 768, 12 heads, FFN 3072) with a two-class head.
    pub const BERT_BASE: EncoderConfig = EncoderConfig {
        layers: 12,
        hidden: 768,
        heads: 12,
        ffn: 3072,
        ln_eps: 1e-12,
        classes: 2,
    };

    /// The architecture a command line names: `minilm` ([`Self::MINILM_L6`]) or `bert-base`
    /// ([`Self::BERT_BASE`]).
    pub fn named(name: &str) -> Option<EncoderConfig> {
        match name {
            "minilm" => Some(Self::MINILM_L6),
            "bert-base" => Some(Self::BERT_BASE),
            _ => None,
        }
    }

    /// Checks the shape is usable: every width non-zero, `heads | hidden`.
    pub fn validate(&self) -> Result<()> {
        if self.layers == 0
            || self.hidden == 0
            || self.heads == 0
            || self.ffn == 0
            || self.classes == 0
            || !self.hidden.is_multiple_of(self.heads)
            || !(self.ln_eps > 0.0 && self.ln_eps < 1.0)
        {
            return Err(Error::InvalidParameters("encoder configuration"));
        }
        Ok(())
    }

    /// Head width `d_h`.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }
}

/// One Transformer layer. Matrices are `in × out` (so `y = x·W + b` on row vectors; a
/// PyTorch `nn.Linear` weight is the transpose).
#[derive(Clone, PartialEq)]
pub struct LayerWeights {
    /// Query projection `d × d`.
    pub wq: Mat,
    /// Query bias `d`.
    pub bq: Vec<f64>,
    /// Key projection `d × d`.
    pub wk: Mat,
    /// Key bias `d`.
    pub bk: Vec<f64>,
    /// Value projection `d × d`.
    pub wv: Mat,
    /// Value bias `d`.
    pub bv: Vec<f64>,
    /// Attention output projection `d × d`.
    pub wo: Mat,
    /// Attention output bias `d`.
    pub bo: Vec<f64>,
    /// LayerNorm after attention: `γ`.
    pub ln1_g: Vec<f64>,
    /// LayerNorm after attention: `β`.
    pub ln1_b: Vec<f64>,
    /// First feed-forward layer `d × ffn`.
    pub w1: Mat,
    /// Its bias `ffn`.
    pub b1: Vec<f64>,
    /// Second feed-forward layer `ffn × d`.
    pub w2: Mat,
    /// Its bias `d`.
    pub b2: Vec<f64>,
    /// LayerNorm after the feed-forward block: `γ`.
    pub ln2_g: Vec<f64>,
    /// LayerNorm after the feed-forward block: `β`.
    pub ln2_b: Vec<f64>,
}

/// The classification head on the mean-pooled output: `logits = mean(h)·W + b`.
#[derive(Clone, PartialEq)]
pub struct Head {
    /// `d × classes`.
    pub w: Mat,
    /// `classes`.
    pub b: Vec<f64>,
}

/// Everything the server holds.
#[derive(Clone, PartialEq)]
pub struct EncoderWeights {
    /// The public architecture.
    pub cfg: EncoderConfig,
    /// The layers, bottom up.
    pub layers: Vec<LayerWeights>,
    /// The classification head.
    pub head: Head,
}

/// The published embedding table the client uses to build its input (token + position +
/// token-type embeddings, then the embedding LayerNorm).
#[derive(Clone, PartialEq)]
pub struct Embeddings {
    /// `vocab × d`.
    pub word: Mat,
    /// `max_positions × d`.
    pub position: Mat,
    /// Token-type row 0 (`d`), the only type a single sentence uses.
    pub token_type: Vec<f64>,
    /// Embedding LayerNorm `γ`.
    pub ln_g: Vec<f64>,
    /// Embedding LayerNorm `β`.
    pub ln_b: Vec<f64>,
    /// Its `ε`.
    pub ln_eps: f64,
}

fn shape_of(m: &Mat) -> (usize, usize) {
    (m.rows, m.cols)
}

fn check_mat(what: &'static str, m: &Mat, rows: usize, cols: usize) -> Result<()> {
    if shape_of(m) != (rows, cols) || m.data.len() != rows * cols {
        return Err(Error::Shape {
            what,
            expected: rows * cols,
            found: m.data.len().min(m.rows * m.cols),
        });
    }
    if m.data.iter().any(|v| !v.is_finite()) {
        return Err(Error::InvalidParameters(what));
    }
    Ok(())
}

fn check_vec(what: &'static str, v: &[f64], n: usize) -> Result<()> {
    if v.len() != n {
        return Err(Error::Shape {
            what,
            expected: n,
            found: v.len(),
        });
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::InvalidParameters(what));
    }
    Ok(())
}

impl EncoderWeights {
    /// Checks every tensor against the configuration (shapes, finite values).
    pub fn validate(&self) -> Result<()> {
        let c = &self.cfg;
        c.validate()?;
        if self.layers.len() != c.layers {
            return Err(Error::Shape {
                what: "encoder layers",
                expected: c.layers,
                found: self.layers.len(),
            });
        }
        let (d, f) = (c.hidden, c.ffn);
        for l in &self.layers {
            check_mat("W_Q", &l.wq, d, d)?;
            check_mat("W_K", &l.wk, d, d)?;
            check_mat("W_V", &l.wv, d, d)?;
            check_mat("W_O", &l.wo, d, d)?;
            check_mat("W_1", &l.w1, d, f)?;
            check_mat("W_2", &l.w2, f, d)?;
            for (what, v, n) in [
                ("b_Q", &l.bq, d),
                ("b_K", &l.bk, d),
                ("b_V", &l.bv, d),
                ("b_O", &l.bo, d),
                ("LN1 gamma", &l.ln1_g, d),
                ("LN1 beta", &l.ln1_b, d),
                ("b_1", &l.b1, f),
                ("b_2", &l.b2, d),
                ("LN2 gamma", &l.ln2_g, d),
                ("LN2 beta", &l.ln2_b, d),
            ] {
                check_vec(what, v, n)?;
            }
        }
        check_mat("head W", &self.head.w, d, c.classes)?;
        check_vec("head b", &self.head.b, c.classes)
    }
}

impl Embeddings {
    /// Checks the table's shapes against a hidden width.
    pub fn validate(&self, hidden: usize) -> Result<()> {
        if self.word.cols != hidden
            || self.word.rows == 0
            || self.word.data.len() != self.word.rows * hidden
        {
            return Err(Error::InvalidParameters("word embeddings"));
        }
        if self.position.cols != hidden
            || self.position.rows == 0
            || self.position.data.len() != self.position.rows * hidden
        {
            return Err(Error::InvalidParameters("position embeddings"));
        }
        check_vec("token-type embedding", &self.token_type, hidden)?;
        check_vec("embedding LN gamma", &self.ln_g, hidden)?;
        check_vec("embedding LN beta", &self.ln_b, hidden)
    }
}

macro_rules! redacted_debug {
    ($t:ty, $name:literal, |$s:ident| $body:expr) => {
        impl core::fmt::Debug for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                let $s = self;
                write!(f, concat!($name, " {{ {} (values redacted) }}"), $body)
            }
        }
    };
}

redacted_debug!(LayerWeights, "LayerWeights", |s| alloc::format!(
    "d = {}, ffn = {}",
    s.wq.rows,
    s.w1.cols
));
redacted_debug!(Head, "Head", |s| alloc::format!(
    "{} x {}", s.w.rows, s.w.cols
));
redacted_debug!(EncoderWeights, "EncoderWeights", |s| alloc::format!(
    "{:?}, {} layers",
    s.cfg,
    s.layers.len()
));
redacted_debug!(Embeddings, "Embeddings", |s| alloc::format!(
    "vocab = {}, positions = {}, d = {}",
    s.word.rows,
    s.position.rows,
    s.word.cols
));

/// Normal deviates (Irwin–Hall of 12 uniforms) from a generator.
struct Gauss<'a, R: rand_core::RngCore>(&'a mut R);

impl<R: rand_core::RngCore> Gauss<'_, R> {
    fn next(&mut self) -> f64 {
        (0..12)
            .map(|_| (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
            .sum::<f64>()
            - 6.0
    }
    fn mat(&mut self, r: usize, c: usize, s: f64) -> Mat {
        let data = (0..r * c).map(|_| self.next() * s).collect();
        Mat {
            rows: r,
            cols: c,
            data,
        }
    }
    fn vec(&mut self, n: usize, mean: f64, s: f64) -> Vec<f64> {
        (0..n).map(|_| mean + self.next() * s).collect()
    }
}

impl EncoderWeights {
    /// Random weights of a BERT-like scale for benchmarks and tests (matrices `N(0, σ²)` with
    /// `σ = 1/√fan_in`, twice that for `W_Q`, `W_K` and `W_1`; biases `N(0, 0.01)`; LayerNorm
    /// `γ ~ N(1, 0.01)`, `β ~ N(0, 0.01)`). Not a model: the costs of a private run do not
    /// depend on the values.
    pub fn random(cfg: EncoderConfig, rng: &mut impl rand_core::RngCore) -> Self {
        let mut g = Gauss(rng);
        let (d, f) = (cfg.hidden, cfg.ffn);
        let sd = 1.0 / libm::sqrt(d as f64);
        let sf = 1.0 / libm::sqrt(f as f64);
        let layers = (0..cfg.layers)
            .map(|_| LayerWeights {
                wq: g.mat(d, d, 2.0 * sd),
                bq: g.vec(d, 0.0, 0.1),
                wk: g.mat(d, d, 2.0 * sd),
                bk: g.vec(d, 0.0, 0.1),
                wv: g.mat(d, d, sd),
                bv: g.vec(d, 0.0, 0.1),
                wo: g.mat(d, d, sd),
                bo: g.vec(d, 0.0, 0.1),
                ln1_g: g.vec(d, 1.0, 0.1),
                ln1_b: g.vec(d, 0.0, 0.1),
                w1: g.mat(d, f, 2.0 * sd),
                b1: g.vec(f, 0.0, 0.1),
                w2: g.mat(f, d, sf),
                b2: g.vec(d, 0.0, 0.1),
                ln2_g: g.vec(d, 1.0, 0.1),
                ln2_b: g.vec(d, 0.0, 0.1),
            })
            .collect();
        EncoderWeights {
            cfg,
            layers,
            head: Head {
                w: g.mat(d, cfg.classes, 1.0),
                b: g.vec(cfg.classes, 0.0, 0.1),
            },
        }
    }
}
