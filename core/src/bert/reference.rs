//! The plaintext `f64` reference of the encoder: what the private pipeline of
//! [`super::run`] must reproduce, and what `veil infer --plaintext` prints.
//!
//! It is the Hugging Face `BertModel` forward pass, post-LN, on one sentence of `m` rows of
//! which the first `valid` are tokens and the rest padding:
//!
//! ```text
//! x₀  = LN_emb(word[id] + position[i] + token_type[0])           (Embeddings::embed)
//! per layer:
//!   Q, K, V = x·W_Q + b_Q, x·W_K + b_K, x·W_V + b_V
//!   A_h     = softmax(Q_h·K_hᵀ / √d_h)   over the keys j < valid (padding keys masked)
//!   h       = LN1(x + concat_h(A_h·V_h)·W_O + b_O)
//!   out     = LN2(h + GELU(h·W_1 + b_1)·W_2 + b_2)                (GELU exact: ½x(1+erf(x/√2)))
//! pooled = mean of the first `valid` rows of the last layer's output
//! logits = pooled·W_head + b_head
//! ```
//!
//! Padding rows are computed like any other row (their queries see only the valid keys), so a
//! row `< valid` never depends on what the padding rows hold.

use super::plan::Blocks;
use super::weights::{EncoderConfig, EncoderWeights, Head, LayerWeights};
use super::Embeddings;
use crate::error::{Error, Result};
use crate::nonlinear::gelu::Gelu;
use crate::nonlinear::layernorm::{LayerNorm, LnAffine};
use crate::nonlinear::softmax::{Mask, Softmax};
use crate::packing::Mat;
use alloc::vec;
use alloc::vec::Vec;

/// The exact GELU, `½·x·(1 + erf(x/√2))` (BERT's `hidden_act = "gelu"`).
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / core::f64::consts::SQRT_2))
}

/// LayerNorm of one row in place: `γ·(x − μ)/√(σ² + ε) + β` with the biased variance (PyTorch's).
pub fn layer_norm_row(row: &mut [f64], gamma: &[f64], beta: &[f64], eps: f64) {
    let n = row.len() as f64;
    let mu = row.iter().sum::<f64>() / n;
    let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n;
    let inv = 1.0 / libm::sqrt(var + eps);
    for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mu) * inv * g + b;
    }
}

fn layer_norm_rows(x: &mut Mat, gamma: &[f64], beta: &[f64], eps: f64) {
    let d = x.cols;
    for row in x.data.chunks_mut(d) {
        layer_norm_row(row, gamma, beta, eps);
    }
}

/// `x·W + b` on row vectors. The loop runs over `W`'s rows outermost, so each row of `W` is
/// read once and reused for every row of `x` (the `m × n` output stays in cache); every output
/// is still summed in the order `b + Σ_k` over increasing `k`.
fn linear(x: &Mat, w: &Mat, b: &[f64]) -> Mat {
    let n = w.cols;
    let mut y = Mat::zeros(x.rows, n);
    for yr in y.data.chunks_mut(n) {
        yr.copy_from_slice(b);
    }
    for (k, wr) in w.data.chunks(n).enumerate() {
        for (i, yr) in y.data.chunks_mut(n).enumerate() {
            let a = x.data[i * x.cols + k];
            for (yv, wv) in yr.iter_mut().zip(wr) {
                *yv += a * wv;
            }
        }
    }
    y
}

/// The masked attention probabilities of one head: `softmax(scale·q·kᵀ)` over the keys
/// `j < valid`, zero on the padding keys. `q`, `k` are `m × d_h`.
fn attention_probs(q: &Mat, k: &Mat, valid: usize, scale: f64) -> Mat {
    let m = q.rows;
    let mut p = Mat::zeros(m, k.rows);
    let mut s = vec![0.0; valid];
    for i in 0..m {
        let qi = &q.data[i * q.cols..(i + 1) * q.cols];
        for (j, sj) in s.iter_mut().enumerate() {
            let kj = &k.data[j * k.cols..(j + 1) * k.cols];
            *sj = scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>();
        }
        let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut z = 0.0;
        for (j, sj) in s.iter().enumerate() {
            let e = libm::exp(sj - mx);
            p.set(i, j, e);
            z += e;
        }
        for j in 0..valid {
            p.set(i, j, p.get(i, j) / z);
        }
    }
    p
}

/// The multi-head self-attention block without its residual: `concat_h(A_h·V_h)·W_O + b_O`.
fn attention(cfg: &EncoderConfig, l: &LayerWeights, x: &Mat, valid: usize) -> Mat {
    let (heads, dh) = (cfg.heads, cfg.head_dim());
    let q = linear(x, &l.wq, &l.bq);
    let k = linear(x, &l.wk, &l.bk);
    let v = linear(x, &l.wv, &l.bv);
    let scale = 1.0 / libm::sqrt(dh as f64);
    let mut ctx = Mat::zeros(x.rows, cfg.hidden);
    for h in 0..heads {
        let (qh, kh, vh) = (
            q.cols_range(h * dh, dh),
            k.cols_range(h * dh, dh),
            v.cols_range(h * dh, dh),
        );
        let a = attention_probs(&qh, &kh, valid, scale).matmul(&vh);
        for i in 0..x.rows {
            for c in 0..dh {
                ctx.set(i, h * dh + c, a.get(i, c));
            }
        }
    }
    linear(&ctx, &l.wo, &l.bo)
}

fn check_input(cfg: &EncoderConfig, x: &Mat, valid: usize) -> Result<()> {
    if x.cols != cfg.hidden || x.data.len() != x.rows * x.cols {
        return Err(Error::Shape {
            what: "encoder input columns",
            expected: cfg.hidden,
            found: x.cols,
        });
    }
    if x.rows == 0 || valid == 0 || valid > x.rows {
        return Err(Error::Shape {
            what: "valid rows of the encoder input",
            expected: x.rows,
            found: valid,
        });
    }
    if x.data.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite);
    }
    Ok(())
}

/// One post-LN Transformer layer: `h = LN1(x + attn(x))`, `out = LN2(h + FFN(h))`. `x` is
/// `m × d`; keys `≥ valid` are masked. Weights (through a copy checked by
/// [`EncoderWeights::validate`]) and input are checked.
pub fn layer(cfg: &EncoderConfig, l: &LayerWeights, x: &Mat, valid: usize) -> Result<Mat> {
    let probe = EncoderWeights {
        cfg: EncoderConfig { layers: 1, ..*cfg },
        layers: vec![l.clone()],
        head: Head {
            w: Mat::zeros(cfg.hidden, cfg.classes),
            b: vec![0.0; cfg.classes],
        },
    };
    probe.validate()?;
    check_input(cfg, x, valid)?;
    Ok(layer_unchecked(cfg, l, x, valid))
}

fn layer_unchecked(cfg: &EncoderConfig, l: &LayerWeights, x: &Mat, valid: usize) -> Mat {
    layer_exact(cfg, l, x, valid)
}

/// The layer with the functions of `blocks`: the checkpoint's where they are exact, the
/// surrogates' `f64` functions where they are not (MBMax, MBLN). GELU is the checkpoint's for
/// every kind but Tanh (`gelu_new`): a fit is measured against it, not modelled.
fn layer_with(
    cfg: &EncoderConfig,
    l: &LayerWeights,
    x: &Mat,
    valid: usize,
    b: &Blocks,
) -> Result<Mat> {
    if *b == Blocks::EXACT {
        return Ok(layer_exact(cfg, l, x, valid));
    }
    layer_traced(cfg, l, x, valid, b, &mut Ranges::default())
}

/// Every head's `Q_h·K_hᵀ` (unscaled), row-major: entry `(h·m + query)·m + key`, for `m × d`
/// projections split into `heads` heads of `d/heads` columns.
pub(crate) fn head_scores(q: &Mat, k: &Mat, heads: usize) -> Vec<f64> {
    let (m, dh) = (q.rows, q.cols / heads.max(1));
    let mut s = Vec::with_capacity(heads * m * m);
    for h in 0..heads {
        for i in 0..m {
            for j in 0..m {
                let dot: f64 = (0..dh)
                    .map(|u| q.get(i, h * dh + u) * k.get(j, h * dh + u))
                    .sum();
                s.push(dot);
            }
        }
    }
    s
}

/// Every head's `P_h·V_h`, the heads side by side (`m × d`), for probabilities `p(e)` laid out as
/// [`head_scores`] lays out the scores.
pub(crate) fn head_context(p: impl Fn(usize) -> f64, v: &Mat, heads: usize) -> Mat {
    let (m, d) = (v.rows, v.cols);
    let dh = d / heads.max(1);
    let mut ctx = Mat::zeros(m, d);
    for h in 0..heads {
        for i in 0..m {
            for u in 0..dh {
                let acc: f64 = (0..m)
                    .map(|j| p((h * m + i) * m + j) * v.get(j, h * dh + u))
                    .sum();
                ctx.set(i, h * dh + u, acc);
            }
        }
    }
    ctx
}

/// The largest magnitudes a forward pass shows at each boundary of the private pipeline, over
/// every row (the conversions carry the padding rows too, and one slot past its bound spoils a
/// whole ciphertext): what [`super::plan::Bounds`] must cover. Two statistics over the real
/// rows only serve to fit a surrogate's constants: `score_valid` and `ln_std`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ranges {
    /// Largest `|x|` of a layer input (LayerNorm output, and the encoder input).
    pub x: f64,
    /// Largest `|score|` (softmax input), every row and key.
    pub score: f64,
    /// Largest `|score|` of a real query over the real keys (what the softmax block sees).
    pub score_valid: f64,
    /// Largest softmax output.
    pub p: f64,
    /// Largest `|o·W_O|` (the attention output projection's C2M, before its bias).
    pub y: f64,
    /// Largest `|h|` (LayerNorm-1 output).
    pub h: f64,
    /// Largest `|x|` at GELU's input (FC1 output plus bias).
    pub gelu_in: f64,
    /// Largest `|GELU output|`.
    pub g: f64,
    /// Largest `|g·W_2|` (FC2's C2M, before its bias).
    pub f2: f64,
    /// Mean standard deviation of a LayerNorm input row (real rows).
    pub ln_std: f64,
    /// Rows seen by `ln_std`.
    rows: usize,
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |a, x| a.max(x.abs()))
}

impl Ranges {
    fn ln(&mut self, y: &[f64], cols: usize, valid: usize) {
        for row in y.chunks(cols.max(1)).take(valid) {
            let n = row.len() as f64;
            let mu = row.iter().sum::<f64>() / n;
            let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n;
            let k = self.rows as f64;
            self.ln_std = (self.ln_std * k + libm::sqrt(var)) / (k + 1.0);
            self.rows += 1;
        }
    }
}

/// [`Ranges`] of the forward pass with the functions of `blocks` (typed errors as [`logits`]).
pub fn ranges(w: &EncoderWeights, x: &Mat, valid: usize, blocks: &Blocks) -> Result<Ranges> {
    w.validate()?;
    check_input(&w.cfg, x, valid)?;
    let mut r = Ranges::default();
    let mut h = x.clone();
    for l in &w.layers {
        r.x = r.x.max(max_abs(&h.data));
        h = layer_traced(&w.cfg, l, &h, valid, blocks, &mut r)?;
    }
    r.x = r.x.max(max_abs(&h.data));
    Ok(r)
}

fn layer_traced(
    cfg: &EncoderConfig,
    l: &LayerWeights,
    x: &Mat,
    valid: usize,
    b: &Blocks,
    r: &mut Ranges,
) -> Result<Mat> {
    // A block's f64 function returns nothing for constants outside its range.
    let full = |v: Vec<f64>, n: usize, what: &'static str| -> Result<Vec<f64>> {
        if v.len() == n {
            Ok(v)
        } else {
            Err(Error::InvalidParameters(what))
        }
    };
    let (m, d, heads, dh) = (x.rows, cfg.hidden, cfg.heads, cfg.head_dim());
    let (q, k, v) = (
        linear(x, &l.wq, &l.bq),
        linear(x, &l.wk, &l.bk),
        linear(x, &l.wv, &l.bv),
    );
    let inv = 1.0 / libm::sqrt(dh as f64);
    let s: Vec<f64> = head_scores(&q, &k, heads).iter().map(|v| v * inv).collect();
    let sm = Softmax {
        rows: heads * m,
        cols: m,
        mask: if valid >= m {
            Mask::None
        } else {
            Mask::Padding { valid }
        },
        kind: b.softmax,
    };
    let p = full(
        sm.f64_reference(&s),
        s.len(),
        "softmax constants out of range",
    )?;
    r.score = r.score.max(max_abs(&s));
    r.p = r.p.max(max_abs(&p));
    for h in 0..heads {
        for i in 0..valid {
            let row = &s[(h * m + i) * m..(h * m + i) * m + valid];
            r.score_valid = r.score_valid.max(max_abs(row));
        }
    }
    let ctx = head_context(|e| p[e], &v, heads);
    let ln = LayerNorm {
        rows: m,
        cols: d,
        eps: cfg.ln_eps,
        kind: b.layernorm,
        affine: true,
    };
    let mut y = ctx.matmul(&l.wo);
    r.y = r.y.max(max_abs(&y.data));
    for (e, (a, xv)) in y.data.iter_mut().zip(&x.data).enumerate() {
        *a += l.bo[e % d] + xv;
    }
    r.ln(&y.data, d, valid);
    let aff1 = LnAffine {
        gamma: &l.ln1_g,
        beta: &l.ln1_b,
    };
    let bad_ln = "LayerNorm constants out of range";
    let h = Mat {
        rows: m,
        cols: d,
        data: full(ln.f64_reference(&y.data, Some(&aff1)), m * d, bad_ln)?,
    };
    r.h = r.h.max(max_abs(&h.data));
    let f1 = linear(&h, &l.w1, &l.b1);
    r.gelu_in = r.gelu_in.max(max_abs(&f1.data));
    // The checkpoint's GELU (exact erf) for Bolt and Erf, `gelu_new` for Tanh: each fit is
    // asserted against these ([`Gelu::max_error`]: BOLT's within 9.5·10⁻³).
    let g = Mat {
        rows: m,
        cols: cfg.ffn,
        data: full(
            Gelu { kind: b.gelu }.f64_reference(&f1.data),
            f1.data.len(),
            "GELU out of range",
        )?,
    };
    r.g = r.g.max(max_abs(&g.data));
    let mut o = g.matmul(&l.w2);
    r.f2 = r.f2.max(max_abs(&o.data));
    for (e, (a, hv)) in o.data.iter_mut().zip(&h.data).enumerate() {
        *a += l.b2[e % d] + hv;
    }
    r.ln(&o.data, d, valid);
    let aff2 = LnAffine {
        gamma: &l.ln2_g,
        beta: &l.ln2_b,
    };
    Ok(Mat {
        rows: m,
        cols: d,
        data: full(ln.f64_reference(&o.data, Some(&aff2)), m * d, bad_ln)?,
    })
}

fn layer_exact(cfg: &EncoderConfig, l: &LayerWeights, x: &Mat, valid: usize) -> Mat {
    let mut h = attention(cfg, l, x, valid);
    for (hv, xv) in h.data.iter_mut().zip(&x.data) {
        *hv += xv;
    }
    layer_norm_rows(&mut h, &l.ln1_g, &l.ln1_b, cfg.ln_eps);
    let mut f = linear(&h, &l.w1, &l.b1);
    for v in f.data.iter_mut() {
        *v = gelu(*v);
    }
    let mut out = linear(&f, &l.w2, &l.b2);
    for (ov, hv) in out.data.iter_mut().zip(&h.data) {
        *ov += hv;
    }
    layer_norm_rows(&mut out, &l.ln2_g, &l.ln2_b, cfg.ln_eps);
    out
}

/// The encoder's last hidden state (`m × d`) for the input `x` (`m × d`, after the embedding
/// LayerNorm; rows `valid..m` are padding). Typed errors on malformed weights or input.
pub fn hidden(w: &EncoderWeights, x: &Mat, valid: usize) -> Result<Mat> {
    w.validate()?;
    check_input(&w.cfg, x, valid)?;
    let mut h = x.clone();
    for l in &w.layers {
        h = layer_unchecked(&w.cfg, l, &h, valid);
    }
    Ok(h)
}

/// Mean pooling over the first `valid` rows of `h` (the non-padding tokens; `valid` is clamped
/// to `1..=h.rows`).
pub fn pooled(h: &Mat, valid: usize) -> Vec<f64> {
    let valid = valid.clamp(1, h.rows.max(1)).min(h.rows);
    let mut p = vec![0.0; h.cols];
    for row in h.data.chunks(h.cols.max(1)).take(valid) {
        for (pv, v) in p.iter_mut().zip(row) {
            *pv += v;
        }
    }
    if valid > 0 {
        for v in p.iter_mut() {
            *v /= valid as f64;
        }
    }
    p
}

/// The head on a pooled vector: `pooled·W + b`.
pub fn head_logits(head: &Head, pooled: &[f64]) -> Result<Vec<f64>> {
    if pooled.len() != head.w.rows || head.b.len() != head.w.cols {
        return Err(Error::Shape {
            what: "pooled vector for the head",
            expected: head.w.rows,
            found: pooled.len(),
        });
    }
    let mut out = head.b.clone();
    for (r, pv) in pooled.iter().enumerate() {
        for (c, o) in out.iter_mut().enumerate() {
            *o += pv * head.w.get(r, c);
        }
    }
    Ok(out)
}

/// The logits of the classification head on the mean-pooled encoder output.
pub fn logits(w: &EncoderWeights, x: &Mat, valid: usize) -> Result<Vec<f64>> {
    let h = hidden(w, x, valid)?;
    head_logits(&w.head, &pooled(&h, valid))
}

/// [`logits`] with the nonlinear functions of `blocks` (the `f64` reference of a plan built
/// with [`super::plan::SessionPlan::with_blocks`]). With [`Blocks::EXACT`] it is [`logits`].
pub fn logits_with(w: &EncoderWeights, x: &Mat, valid: usize, blocks: &Blocks) -> Result<Vec<f64>> {
    w.validate()?;
    check_input(&w.cfg, x, valid)?;
    let mut h = x.clone();
    for l in &w.layers {
        h = layer_with(&w.cfg, l, &h, valid, blocks)?;
    }
    head_logits(&w.head, &pooled(&h, valid))
}

impl Embeddings {
    /// The encoder input for the token ids `ids` padded to `m` rows: row `i` is
    /// `LN_emb(word[ids[i]] + position[i] + token_type[0])`. Rows `ids.len()..m` are padding and
    /// hold the `[PAD]` (id 0) embedding at their position, as Hugging Face's padded batches do
    /// (they never reach a valid row: attention masks them and pooling skips them).
    ///
    /// Typed errors: more ids than `m`, `m` above the position table, an id outside the
    /// vocabulary, or a malformed table.
    pub fn embed(&self, ids: &[u32], m: usize) -> Result<Mat> {
        let d = self.word.cols;
        self.validate(d)?;
        if ids.len() > m {
            return Err(Error::Shape {
                what: "token ids for the padded length",
                expected: m,
                found: ids.len(),
            });
        }
        if m > self.position.rows {
            return Err(Error::Shape {
                what: "sequence length against the position table",
                expected: self.position.rows,
                found: m,
            });
        }
        if ids.iter().any(|&id| id as usize >= self.word.rows) {
            return Err(Error::InvalidParameters("token id outside the vocabulary"));
        }
        let mut x = Mat::zeros(m, d);
        for i in 0..m {
            let id = ids.get(i).copied().unwrap_or(0) as usize;
            let row = &mut x.data[i * d..(i + 1) * d];
            let (wr, pr) = (
                &self.word.data[id * d..(id + 1) * d],
                &self.position.data[i * d..(i + 1) * d],
            );
            for c in 0..d {
                row[c] = wr[c] + pr[c] + self.token_type[c];
            }
            layer_norm_row(row, &self.ln_g, &self.ln_b, self.ln_eps);
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    fn uni(rng: &mut ChaCha20Rng, s: f64) -> f64 {
        s * ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
    }

    fn rmat(rng: &mut ChaCha20Rng, r: usize, c: usize, s: f64) -> Mat {
        let mut m = Mat::zeros(r, c);
        for v in m.data.iter_mut() {
            *v = uni(rng, s);
        }
        m
    }

    fn rvec(rng: &mut ChaCha20Rng, n: usize, s: f64, off: f64) -> Vec<f64> {
        (0..n).map(|_| off + uni(rng, s)).collect()
    }

    fn cfg(layers: usize) -> EncoderConfig {
        EncoderConfig {
            layers,
            hidden: 4,
            heads: 2,
            ffn: 6,
            ln_eps: 1e-12,
            classes: 2,
        }
    }

    fn rlayer(rng: &mut ChaCha20Rng, c: &EncoderConfig) -> LayerWeights {
        let (d, f) = (c.hidden, c.ffn);
        LayerWeights {
            wq: rmat(rng, d, d, 1.0),
            bq: rvec(rng, d, 0.3, 0.0),
            wk: rmat(rng, d, d, 1.0),
            bk: rvec(rng, d, 0.3, 0.0),
            wv: rmat(rng, d, d, 1.0),
            bv: rvec(rng, d, 0.3, 0.0),
            wo: rmat(rng, d, d, 1.0),
            bo: rvec(rng, d, 0.3, 0.0),
            ln1_g: rvec(rng, d, 0.5, 1.0),
            ln1_b: rvec(rng, d, 0.3, 0.0),
            w1: rmat(rng, d, f, 1.0),
            b1: rvec(rng, f, 0.3, 0.0),
            w2: rmat(rng, f, d, 1.0),
            b2: rvec(rng, d, 0.3, 0.0),
            ln2_g: rvec(rng, d, 0.5, 1.0),
            ln2_b: rvec(rng, d, 0.3, 0.0),
        }
    }

    fn rweights(rng: &mut ChaCha20Rng, layers: usize) -> EncoderWeights {
        let c = cfg(layers);
        EncoderWeights {
            cfg: c,
            layers: (0..layers).map(|_| rlayer(rng, &c)).collect(),
            head: Head {
                w: rmat(rng, c.hidden, c.classes, 1.0),
                b: rvec(rng, c.classes, 0.3, 0.0),
            },
        }
    }

    /// The layer written out element by element, independently of the matrix helpers.
    fn layer_by_hand(
        c: &EncoderConfig,
        l: &LayerWeights,
        x: &[Vec<f64>],
        valid: usize,
    ) -> Vec<Vec<f64>> {
        let (d, f, heads) = (c.hidden, c.ffn, c.heads);
        let dh = d / heads;
        let m = x.len();
        let lin = |row: &[f64], w: &Mat, b: &[f64]| -> Vec<f64> {
            (0..w.cols)
                .map(|j| {
                    b[j] + (0..w.rows)
                        .map(|i| row[i] * w.data[i * w.cols + j])
                        .sum::<f64>()
                })
                .collect()
        };
        let ln = |v: &[f64], g: &[f64], b: &[f64]| -> Vec<f64> {
            let n = v.len() as f64;
            let mu = v.iter().sum::<f64>() / n;
            let var = v.iter().map(|a| (a - mu).powi(2)).sum::<f64>() / n;
            v.iter()
                .enumerate()
                .map(|(i, a)| (a - mu) / (var + c.ln_eps).sqrt() * g[i] + b[i])
                .collect()
        };
        let q: Vec<_> = x.iter().map(|r| lin(r, &l.wq, &l.bq)).collect();
        let k: Vec<_> = x.iter().map(|r| lin(r, &l.wk, &l.bk)).collect();
        let v: Vec<_> = x.iter().map(|r| lin(r, &l.wv, &l.bv)).collect();
        let mut out = Vec::new();
        for i in 0..m {
            let mut ctx = vec![0.0; d];
            for h in 0..heads {
                let s: Vec<f64> = (0..valid)
                    .map(|j| {
                        (0..dh)
                            .map(|t| q[i][h * dh + t] * k[j][h * dh + t])
                            .sum::<f64>()
                            / (dh as f64).sqrt()
                    })
                    .collect();
                let e: Vec<f64> = s.iter().map(|a| a.exp()).collect();
                let z: f64 = e.iter().sum();
                for t in 0..dh {
                    ctx[h * dh + t] = (0..valid).map(|j| e[j] / z * v[j][h * dh + t]).sum();
                }
            }
            let a = lin(&ctx, &l.wo, &l.bo);
            let r1: Vec<f64> = (0..d).map(|t| x[i][t] + a[t]).collect();
            let h1 = ln(&r1, &l.ln1_g, &l.ln1_b);
            let g: Vec<f64> = lin(&h1, &l.w1, &l.b1)
                .iter()
                .map(|&z| 0.5 * z * (1.0 + libm::erf(z / 2f64.sqrt())))
                .collect();
            assert_eq!(g.len(), f);
            let o = lin(&g, &l.w2, &l.b2);
            let r2: Vec<f64> = (0..d).map(|t| h1[t] + o[t]).collect();
            out.push(ln(&r2, &l.ln2_g, &l.ln2_b));
        }
        out
    }

    fn rows(x: &Mat) -> Vec<Vec<f64>> {
        x.data.chunks(x.cols).map(|r| r.to_vec()).collect()
    }

    #[test]
    fn softmax_rows_sum_to_one_and_mask_padding() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let (q, k) = (rmat(&mut rng, 5, 3, 2.0), rmat(&mut rng, 5, 3, 2.0));
        let p = attention_probs(&q, &k, 3, 0.5);
        for i in 0..5 {
            let s: f64 = (0..5).map(|j| p.get(i, j)).sum();
            assert!((s - 1.0).abs() < 1e-14);
            assert_eq!(p.get(i, 3), 0.0);
            assert_eq!(p.get(i, 4), 0.0);
            assert!((0..3).all(|j| p.get(i, j) > 0.0));
        }
        // Large scores do not overflow (the maximum is subtracted).
        let p = attention_probs(&q, &k, 5, 1e3);
        assert!(p.data.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn layer_matches_a_hand_computation() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let c = cfg(1);
        let l = rlayer(&mut rng, &c);
        let x = rmat(&mut rng, 5, 4, 1.5);
        for valid in [1, 3, 5] {
            let got = layer(&c, &l, &x, valid).unwrap();
            let want = layer_by_hand(&c, &l, &rows(&x), valid);
            for (g, w) in rows(&got).iter().zip(&want) {
                for (a, b) in g.iter().zip(w) {
                    assert!((a - b).abs() < 1e-12, "{a} vs {b}");
                }
            }
        }
    }

    /// The blocks' path with the checkpoint's functions (the split changes where GELU runs, not
    /// what it is) is the exact layer; surrogate constants out of range are a typed error, not a
    /// panic.
    #[test]
    fn traced_layer_is_the_exact_layer() {
        use crate::nonlinear::gelu::GeluSplit;
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let c = cfg(1);
        let l = rlayer(&mut rng, &c);
        let x = rmat(&mut rng, 5, 4, 1.5);
        let same = Blocks {
            gelu_split: GeluSplit::CkksCandidates,
            ..Blocks::EXACT
        };
        for valid in [1, 3, 5] {
            let want = layer_exact(&c, &l, &x, valid);
            let got = layer_with(&c, &l, &x, valid, &same).unwrap();
            for (a, b) in got.data.iter().zip(&want.data) {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
        }
        let w = EncoderWeights {
            cfg: c,
            layers: vec![l],
            head: Head {
                w: Mat::zeros(c.hidden, c.classes),
                b: vec![0.0; c.classes],
            },
        };
        let bad = Blocks::encformer((f64::NAN, 1.0), (1.0, 1.0));
        assert!(ranges(&w, &x, 3, &bad).is_err());
        assert!(logits_with(&w, &x, 3, &bad).is_err());
        let r = ranges(&w, &x, 3, &same).unwrap();
        assert!(r.score >= r.score_valid && r.score_valid > 0.0 && r.p <= 1.0 + 1e-12);
    }

    #[test]
    fn identity_layer_averages_the_valid_rows() {
        // W_Q = W_K = 0: uniform attention over the valid keys; W_V = W_O = I; FFN = 0; LN γ=1, β=0.
        let c = cfg(1);
        let (d, f) = (c.hidden, c.ffn);
        let eye = Mat::from_fn(d, d, |r, s| if r == s { 1.0 } else { 0.0 });
        let z = vec![0.0; d];
        let l = LayerWeights {
            wq: Mat::zeros(d, d),
            bq: z.clone(),
            wk: Mat::zeros(d, d),
            bk: z.clone(),
            wv: eye.clone(),
            bv: z.clone(),
            wo: eye,
            bo: z.clone(),
            ln1_g: vec![1.0; d],
            ln1_b: z.clone(),
            w1: Mat::zeros(d, f),
            b1: vec![0.0; f],
            w2: Mat::zeros(f, d),
            b2: z.clone(),
            ln2_g: vec![1.0; d],
            ln2_b: z,
        };
        let x = Mat::from_fn(4, d, |r, s| {
            (r * d + s) as f64 * 0.37 - (s * s) as f64 * 0.1
        });
        let valid = 2;
        let got = layer(&c, &l, &x, valid).unwrap();
        for i in 0..4 {
            let mut row: Vec<f64> = (0..d)
                .map(|s| x.get(i, s) + (x.get(0, s) + x.get(1, s)) / 2.0)
                .collect();
            let mu = row.iter().sum::<f64>() / d as f64;
            let sd = (row.iter().map(|a| (a - mu).powi(2)).sum::<f64>() / d as f64).sqrt();
            row.iter_mut().for_each(|a| *a = (*a - mu) / sd);
            for s in 0..d {
                assert!((got.get(i, s) - row[s]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn padding_rows_do_not_reach_valid_rows_or_the_pool() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let w = rweights(&mut rng, 2);
        let x = rmat(&mut rng, 6, 4, 1.0);
        let mut y = x.clone();
        for i in 3..6 {
            for s in 0..4 {
                y.set(i, s, uni(&mut rng, 9.0));
            }
        }
        let (hx, hy) = (hidden(&w, &x, 3).unwrap(), hidden(&w, &y, 3).unwrap());
        assert_eq!(hx.data[..12], hy.data[..12]);
        assert_eq!(logits(&w, &x, 3).unwrap(), logits(&w, &y, 3).unwrap());
        // Two layers are the one-layer function applied twice.
        let c1 = cfg(1);
        let h1 = layer(&c1, &w.layers[0], &x, 3).unwrap();
        let h2 = layer(&c1, &w.layers[1], &h1, 3).unwrap();
        assert_eq!(h2, hx);
    }

    #[test]
    fn pooled_and_logits_by_hand() {
        let h = Mat::from_fn(3, 2, |r, c| (r * 2 + c) as f64);
        assert_eq!(pooled(&h, 2), vec![1.0, 2.0]);
        assert_eq!(pooled(&h, 3), vec![2.0, 3.0]);
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let w = rweights(&mut rng, 1);
        let x = rmat(&mut rng, 4, 4, 1.0);
        let p = pooled(&hidden(&w, &x, 3).unwrap(), 3);
        let lg = logits(&w, &x, 3).unwrap();
        for c in 0..2 {
            let want = w.head.b[c] + (0..4).map(|r| p[r] * w.head.w.get(r, c)).sum::<f64>();
            assert!((lg[c] - want).abs() < 1e-14);
        }
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let w = rweights(&mut rng, 1);
        let x = rmat(&mut rng, 4, 4, 1.0);
        assert!(matches!(hidden(&w, &x, 0), Err(Error::Shape { .. })));
        assert!(matches!(hidden(&w, &x, 5), Err(Error::Shape { .. })));
        assert!(matches!(
            hidden(&w, &rmat(&mut rng, 4, 3, 1.0), 2),
            Err(Error::Shape { .. })
        ));
        let mut nan = x.clone();
        nan.data[0] = f64::NAN;
        assert_eq!(hidden(&w, &nan, 2), Err(Error::NonFinite));
        let mut bad = w.clone();
        bad.layers[0].w1 = Mat::zeros(4, 5);
        assert!(matches!(hidden(&bad, &x, 2), Err(Error::Shape { .. })));
        assert!(matches!(
            head_logits(&w.head, &[0.0; 3]),
            Err(Error::Shape { .. })
        ));
    }

    fn emb(rng: &mut ChaCha20Rng) -> Embeddings {
        Embeddings {
            word: rmat(rng, 7, 4, 1.0),
            position: rmat(rng, 5, 4, 1.0),
            token_type: rvec(rng, 4, 0.2, 0.0),
            ln_g: rvec(rng, 4, 0.5, 1.0),
            ln_b: rvec(rng, 4, 0.2, 0.0),
            ln_eps: 1e-12,
        }
    }

    #[test]
    fn embed_by_hand_with_pad_rows() {
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        let e = emb(&mut rng);
        let x = e.embed(&[3, 6], 4).unwrap();
        assert_eq!((x.rows, x.cols), (4, 4));
        for (i, id) in [3usize, 6, 0, 0].into_iter().enumerate() {
            let mut row: Vec<f64> = (0..4)
                .map(|c| e.word.get(id, c) + e.position.get(i, c) + e.token_type[c])
                .collect();
            let mu = row.iter().sum::<f64>() / 4.0;
            let var = row.iter().map(|a| (a - mu).powi(2)).sum::<f64>() / 4.0;
            for c in 0..4 {
                row[c] = (row[c] - mu) / (var + 1e-12).sqrt() * e.ln_g[c] + e.ln_b[c];
                assert!((x.get(i, c) - row[c]).abs() < 1e-13);
            }
        }
    }

    #[test]
    fn embed_rejects_bad_ids_and_lengths() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let e = emb(&mut rng);
        assert!(matches!(e.embed(&[1, 2, 3], 2), Err(Error::Shape { .. })));
        assert!(matches!(e.embed(&[1], 6), Err(Error::Shape { .. })));
        assert!(matches!(e.embed(&[7], 4), Err(Error::InvalidParameters(_))));
        let mut bad = e.clone();
        bad.ln_g.pop();
        assert!(bad.embed(&[1], 2).is_err());
    }
}
