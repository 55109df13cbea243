//! The `f64` reference of a decoder ([`super`]): generation one token at a time over a KV
//! cache ([`KvCache`], [`step`], [`greedy`]), and the whole sequence at once with a causal mask
//! ([`forward_all`]), written separately so that each checks the other.

use super::{DecoderConfig, DecoderLayer, DecoderWeights, Family, LayerBiases};
use crate::error::Error;
use crate::packing::Mat;
use alloc::vec;
use alloc::vec::Vec;

/// `W·x` for a `Linear`-layout `W` (`out × in`).
pub fn linear(w: &Mat, x: &[f64]) -> Vec<f64> {
    (0..w.rows)
        .map(|o| {
            let row = &w.data[o * w.cols..(o + 1) * w.cols];
            row.iter().zip(x).map(|(a, b)| a * b).sum()
        })
        .collect()
}

/// `x / sqrt(mean(x²) + ε) ⊙ g`.
pub fn rms_norm(x: &[f64], g: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let r = 1.0 / libm::sqrt(ms + eps);
    x.iter().zip(g).map(|(v, g)| v * r * g).collect()
}

/// `(x − mean(x)) / sqrt(var(x) + ε) ⊙ g + b` (LayerNorm, the biased variance).
pub fn layer_norm(x: &[f64], g: &[f64], b: &[f64], eps: f64) -> Vec<f64> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let r = 1.0 / libm::sqrt(var + eps);
    x.iter()
        .zip(g.iter().zip(b))
        .map(|(v, (g, b))| (v - mean) * r * g + b)
        .collect()
}

/// GPT-2's `gelu_new`: `½z(1 + tanh(√(2/π)(z + 0.044715z³)))`.
pub fn gelu_tanh(z: f64) -> f64 {
    let c = libm::sqrt(2.0 / core::f64::consts::PI);
    0.5 * z * (1.0 + libm::tanh(c * (z + 0.044715 * z * z * z)))
}

/// The family's norm: RMSNorm (Llama) or LayerNorm with the bias `b` (GPT-2).
fn norm(cfg: &DecoderConfig, x: &[f64], g: &[f64], b: Option<&[f64]>) -> Vec<f64> {
    match (cfg.family, b) {
        (Family::Gpt2, Some(b)) => layer_norm(x, g, b, cfg.norm_eps),
        _ => rms_norm(x, g, cfg.norm_eps),
    }
}

/// `W·x + b` (no bias when `b` is `None`).
fn affine(w: &Mat, x: &[f64], b: Option<&Vec<f64>>) -> Vec<f64> {
    let mut y = linear(w, x);
    if let Some(b) = b {
        for (y, b) in y.iter_mut().zip(b) {
            *y += b;
        }
    }
    y
}

/// `silu(z) = z·σ(z)`.
pub fn silu(z: f64) -> f64 {
    z / (1.0 + libm::exp(-z))
}

/// RoPE at position `pos` on every head (width `head_dim`) of `v`: the pair `(2i, 2i+1)` of
/// each head rotated by `pos·base^{-2i/head_dim}`.
pub fn rope(v: &mut [f64], pos: usize, head_dim: usize, base: f64) {
    for head in v.chunks_mut(head_dim) {
        for i in 0..head_dim / 2 {
            let theta = pos as f64 * libm::pow(base, -((2 * i) as f64) / head_dim as f64);
            let (s, c) = (libm::sin(theta), libm::cos(theta));
            let (a, b) = (head[2 * i], head[2 * i + 1]);
            head[2 * i] = a * c - b * s;
            head[2 * i + 1] = a * s + b * c;
        }
    }
}

/// The keys and values of every past position, per layer (`kv_dim` each), up to a bound.
#[derive(Clone, Debug)]
pub struct KvCache {
    k: Vec<Vec<f64>>,
    v: Vec<Vec<f64>>,
    len: usize,
    max: usize,
    kv_dim: usize,
}

impl KvCache {
    /// An empty cache for `cfg` holding at most `max` positions (at most the model's context).
    pub fn new(cfg: &DecoderConfig, max: usize) -> Result<Self, Error> {
        cfg.validate()?;
        if max == 0 || max > cfg.context {
            return Err(Error::InvalidParameters(
                "the cache must hold from 1 to the model's context positions",
            ));
        }
        Ok(KvCache {
            k: vec![Vec::new(); cfg.layers],
            v: vec![Vec::new(); cfg.layers],
            len: 0,
            max,
            kv_dim: cfg.kv_dim(),
        })
    }

    /// The positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most positions it holds.
    pub fn capacity(&self) -> usize {
        self.max
    }
}

fn check_token(cfg: &DecoderConfig, t: u32) -> Result<usize, Error> {
    let t = t as usize;
    if t >= cfg.vocab {
        return Err(Error::InvalidParameters(
            "a token id is past the vocabulary",
        ));
    }
    Ok(t)
}

fn mlp(
    l: &DecoderLayer,
    cfg: &DecoderConfig,
    x: &mut [f64],
    site: usize,
    mut r: Option<&mut ActRanges>,
) {
    let b = l.biases.as_ref();
    if let Some(r) = r.as_deref_mut() {
        r.see_norm(site, x);
    }
    let m = norm(cfg, x, &l.mlp_norm, b.map(|b| &b.mlp_norm[..]));
    let up = affine(&l.w_up, &m, b.map(|b| &b.up));
    let h: Vec<f64> = match &l.w_gate {
        Some(wg) => {
            let gate = linear(wg, &m);
            if let Some(r) = r.as_deref_mut() {
                see(&mut r.products, &gate);
            }
            gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect()
        }
        None => up.iter().map(|u| gelu_tanh(*u)).collect(),
    };
    let down = affine(&l.w_down, &h, b.map(|b| &b.down));
    if let Some(r) = r {
        see(&mut r.products, &up);
        see(&mut r.activation, &h);
        see(&mut r.residual, &down);
    }
    for (x, d) in x.iter_mut().zip(down) {
        *x += d;
    }
}

/// The largest magnitudes a run reached, by kind: what a private session's conversion bounds
/// must cover ([`step_tracked`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ActRanges {
    /// The residual stream and what is added to it (`W_o`'s and `W_down`'s outputs).
    pub residual: f64,
    /// The other products' outputs: `q/√d_h`, `k`, `v`, the MLP's gate and up, the logits.
    pub products: f64,
    /// The MLP's activation (SwiGLU's product, or GELU's output).
    pub activation: f64,
    /// Each norm's input, by site: layer `i`'s attention norm at `2i`, its MLP norm at
    /// `2i + 1`, the final norm at `2·layers` (empty until a step records them).
    pub norms: Vec<NormSite>,
}

/// What one norm's input reached ([`ActRanges::norms`]): the per-column bound and the row's sum
/// of squares. Real checkpoints put most of it in a few columns (SmolLM2's residual stream
/// carries `2.4·10⁴` in one column of the first position from layer 12 on, and tens elsewhere),
/// which is what a private session's norms are planned from
/// ([`super::plan::DecodePlan::with_norms`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NormSite {
    /// The largest `|x_c|` of each column.
    pub col_max: Vec<f64>,
    /// The largest `Σ_c x_c²` of a row.
    pub sq_max: f64,
}

impl ActRanges {
    /// Records norm site `site`'s input `x`.
    fn see_norm(&mut self, site: usize, x: &[f64]) {
        if self.norms.len() <= site {
            self.norms.resize(site + 1, NormSite::default());
        }
        let n = &mut self.norms[site];
        if n.col_max.len() < x.len() {
            n.col_max.resize(x.len(), 0.0);
        }
        for (m, v) in n.col_max.iter_mut().zip(x) {
            *m = m.max(v.abs());
        }
        n.sq_max = n.sq_max.max(x.iter().map(|v| v * v).sum());
    }
}

fn see(slot: &mut f64, v: &[f64]) {
    *slot = v.iter().fold(*slot, |a, b| a.max(b.abs()));
}

/// Token `t`'s input at position `pos`: its embedding, plus the learned position (GPT-2). What
/// a private session's client computes itself from the published table. A token past the
/// vocabulary or a position past the context is refused.
pub fn embed_token(w: &DecoderWeights, t: u32, pos: usize) -> Result<Vec<f64>, Error> {
    let t = check_token(&w.cfg, t)?;
    if pos >= w.cfg.context {
        return Err(Error::ContextFull { max: w.cfg.context });
    }
    if w.embed.data.len() < (t + 1) * w.cfg.hidden {
        return Err(Error::InvalidParameters("the embedding table is short"));
    }
    if let Some(p) = &w.positions {
        if p.data.len() < (pos + 1) * w.cfg.hidden {
            return Err(Error::InvalidParameters("the position table is short"));
        }
    }
    Ok(embed(w, t, pos))
}

/// [`embed_token`] on checked arguments.
fn embed(w: &DecoderWeights, t: usize, pos: usize) -> Vec<f64> {
    let d = w.cfg.hidden;
    let mut x = w.embed.data[t * d..(t + 1) * d].to_vec();
    if let Some(p) = &w.positions {
        for (x, p) in x.iter_mut().zip(&p.data[pos * d..(pos + 1) * d]) {
            *x += p;
        }
    }
    x
}

/// The attention input of one position, and its query, key and value (biases added; RoPE at
/// `pos` for Llama).
fn qkv(
    w: &DecoderWeights,
    l: &DecoderLayer,
    x: &[f64],
    pos: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let cfg = &w.cfg;
    let b = l.biases.as_ref();
    let a = norm(cfg, x, &l.attn_norm, b.map(|b| &b.attn_norm[..]));
    let mut q = affine(&l.wq, &a, b.map(|b| &b.q));
    let mut k = affine(&l.wk, &a, b.map(|b| &b.k));
    if cfg.family == Family::Llama {
        rope(&mut q, pos, cfg.head_dim(), cfg.rope_base);
        rope(&mut k, pos, cfg.head_dim(), cfg.rope_base);
    }
    (q, k, affine(&l.wv, &a, b.map(|b| &b.v)))
}

/// Query head `q` (width `hd`) against the keys and values `k`, `v` of positions `0..n` of
/// KV head `g` (rows of `kv_dim`): `softmax(q·kᵀ/√hd)·v`.
fn attend(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    n: usize,
    g: usize,
    hd: usize,
    kv_dim: usize,
) -> Vec<f64> {
    let scale = 1.0 / libm::sqrt(hd as f64);
    let s: Vec<f64> = (0..n)
        .map(|p| {
            let kp = &k[p * kv_dim + g * hd..p * kv_dim + (g + 1) * hd];
            q.iter().zip(kp).map(|(a, b)| a * b).sum::<f64>() * scale
        })
        .collect();
    let mx = s.iter().copied().fold(f64::MIN, f64::max);
    let e: Vec<f64> = s.iter().map(|x| libm::exp(x - mx)).collect();
    let z: f64 = e.iter().sum();
    let mut out = vec![0.0; hd];
    for (p, ep) in e.iter().enumerate() {
        let vp = &v[p * kv_dim + g * hd..p * kv_dim + (g + 1) * hd];
        for (o, x) in out.iter_mut().zip(vp) {
            *o += ep / z * x;
        }
    }
    out
}

/// One token at the cache's next position through every layer; returns its logits and appends
/// its keys and values to the cache. A full cache or a token past the vocabulary is an error
/// (the cache is unchanged).
pub fn step(w: &DecoderWeights, cache: &mut KvCache, token: u32) -> Result<Vec<f64>, Error> {
    step_with(w, cache, token, None)
}

/// [`step`], recording the magnitudes the step reaches into `r` (a calibration pass for a
/// private session's bounds).
pub fn step_tracked(
    w: &DecoderWeights,
    cache: &mut KvCache,
    token: u32,
    r: &mut ActRanges,
) -> Result<Vec<f64>, Error> {
    step_with(w, cache, token, Some(r))
}

fn step_with(
    w: &DecoderWeights,
    cache: &mut KvCache,
    token: u32,
    mut r: Option<&mut ActRanges>,
) -> Result<Vec<f64>, Error> {
    w.check_shapes()?;
    let cfg = &w.cfg;
    let t = check_token(cfg, token)?;
    if cache.len >= cache.max {
        return Err(Error::InvalidParameters("the KV cache is full"));
    }
    if cache.k.len() != cfg.layers || cache.kv_dim != cfg.kv_dim() || cache.max > cfg.context {
        return Err(Error::InvalidParameters(
            "the KV cache is for another model",
        ));
    }
    let (hd, kv_dim, pos) = (cfg.head_dim(), cfg.kv_dim(), cache.len);
    let group = cfg.heads / cfg.kv_heads;
    let mut x = embed(w, t, pos);
    let inv = 1.0 / libm::sqrt(hd as f64);
    for (i, l) in w.layers.iter().enumerate() {
        let (q, k, v) = qkv(w, l, &x, pos);
        if let Some(r) = r.as_deref_mut() {
            r.see_norm(2 * i, &x);
            see(&mut r.residual, &x);
            let qs: Vec<f64> = q.iter().map(|a| a * inv).collect();
            for part in [&qs, &k, &v] {
                see(&mut r.products, part);
            }
        }
        cache.k[i].extend_from_slice(&k);
        cache.v[i].extend_from_slice(&v);
        let ctx: Vec<f64> = (0..cfg.heads)
            .flat_map(|h| {
                let qh = &q[h * hd..(h + 1) * hd];
                attend(qh, &cache.k[i], &cache.v[i], pos + 1, h / group, hd, kv_dim)
            })
            .collect();
        let y = affine(&l.wo, &ctx, l.biases.as_ref().map(|b| &b.o));
        if let Some(r) = r.as_deref_mut() {
            see(&mut r.residual, &y);
        }
        for (x, o) in x.iter_mut().zip(y) {
            *x += o;
        }
        if let Some(r) = r.as_deref_mut() {
            see(&mut r.residual, &x);
        }
        mlp(l, cfg, &mut x, 2 * i + 1, r.as_deref_mut());
    }
    cache.len += 1;
    let logits = head(w, &x);
    if let Some(r) = r {
        r.see_norm(2 * cfg.layers, &x);
        see(&mut r.residual, &x);
        see(&mut r.products, &logits);
    }
    Ok(logits)
}

/// The logits of a final residual `x`: the final norm, then the LM head.
fn head(w: &DecoderWeights, x: &[f64]) -> Vec<f64> {
    let h = norm(&w.cfg, x, &w.final_norm, w.final_norm_bias.as_deref());
    linear(w.lm_head(), &h)
}

/// Greedy generation: the prompt through [`step`], then `n` tokens, each the argmax of the
/// last logits (the lowest id on a tie). Returns the generated ids.
pub fn greedy(w: &DecoderWeights, prompt: &[u32], n: usize) -> Result<Vec<u32>, Error> {
    if prompt.is_empty() {
        return Err(Error::InvalidParameters("an empty prompt"));
    }
    let mut cache = KvCache::new(&w.cfg, prompt.len().saturating_add(n).min(w.cfg.context))?;
    let mut logits = Vec::new();
    for &t in prompt {
        logits = step(w, &mut cache, t)?;
    }
    let mut out = Vec::with_capacity(n.min(w.cfg.context));
    for i in 0..n {
        let next = argmax(&logits);
        out.push(next);
        if i + 1 < n {
            logits = step(w, &mut cache, next)?;
        }
    }
    Ok(out)
}

/// The index of the largest value (the lowest on a tie).
pub fn argmax(v: &[f64]) -> u32 {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// Every position's logits for the whole sequence at once: each layer on the `m × hidden`
/// stream, attention as one masked score matrix per head (no cache). Independent of [`step`]
/// except for the per-position primitives (embedding, norms, projections, RoPE, MLP).
pub fn forward_all(w: &DecoderWeights, tokens: &[u32]) -> Result<Vec<Vec<f64>>, Error> {
    w.check_shapes()?;
    let cfg = &w.cfg;
    let m = tokens.len();
    if m == 0 || m > cfg.context {
        return Err(Error::InvalidParameters(
            "a sequence must hold from 1 to the model's context tokens",
        ));
    }
    let hd = cfg.head_dim();
    let group = cfg.heads / cfg.kv_heads;
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .enumerate()
        .map(|(p, &t)| check_token(cfg, t).map(|t| embed(w, t, p)))
        .collect::<Result<_, _>>()?;
    for l in &w.layers {
        let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for (p, x) in xs.iter().enumerate() {
            let (a, b, c) = qkv(w, l, x, p);
            q.push(a);
            k.push(b);
            v.push(c);
        }
        for h in 0..cfg.heads {
            let g = h / group;
            // Scores of head h: m × m, positions after the query masked out.
            let mut s = Mat::from_fn(m, m, |i, j| {
                if j > i {
                    f64::NEG_INFINITY
                } else {
                    (0..hd)
                        .map(|c| q[i][h * hd + c] * k[j][g * hd + c])
                        .sum::<f64>()
                }
            });
            for x in s.data.iter_mut() {
                *x /= libm::sqrt(hd as f64);
            }
            let p = s.softmax_rows(1.0);
            for (i, x) in xs.iter_mut().enumerate() {
                let ctx: Vec<f64> = (0..hd)
                    .map(|c| (0..m).map(|j| p.get(i, j) * v[j][g * hd + c]).sum())
                    .collect();
                // This head's share of W_o·ctx: the columns of W_o that read head h (the
                // bias once, with head 0).
                for (o, xo) in x.iter_mut().enumerate() {
                    *xo += (0..hd)
                        .map(|c| l.wo.get(o, h * hd + c) * ctx[c])
                        .sum::<f64>();
                    if let (0, Some(b)) = (h, &l.biases) {
                        *xo += b.o[o];
                    }
                }
            }
        }
        for x in xs.iter_mut() {
            mlp(l, cfg, x, 0, None);
        }
    }
    Ok(xs.iter().map(|x| head(w, x)).collect())
}

/// Seeded random weights of `cfg` (a test model: normal-ish entries of scale `1/√fan_in`,
/// norm gains near 1).
pub fn random_weights(cfg: &DecoderConfig, seed: u64) -> Result<DecoderWeights, Error> {
    cfg.validate()?;
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        // xorshift64*, mapped to [-1, 1).
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    };
    let mut mat = |rows: usize, cols: usize| {
        let a = libm::sqrt(3.0 / cols as f64);
        let data = (0..rows * cols).map(|_| next() * a).collect();
        Mat { rows, cols, data }
    };
    let (d, kv, f) = (cfg.hidden, cfg.kv_dim(), cfg.ffn);
    let embed = mat(cfg.vocab, d);
    let head = (!cfg.tied_head).then(|| mat(cfg.vocab, d));
    let gpt2 = cfg.family == Family::Gpt2;
    let positions = gpt2.then(|| mat(cfg.context, d));
    let mut layers = Vec::with_capacity(cfg.layers);
    for _ in 0..cfg.layers {
        layers.push(DecoderLayer {
            attn_norm: Vec::new(),
            wq: mat(d, d),
            wk: mat(kv, d),
            wv: mat(kv, d),
            wo: mat(d, d),
            mlp_norm: Vec::new(),
            w_gate: (!gpt2).then(|| mat(f, d)),
            w_up: mat(f, d),
            w_down: mat(d, f),
            biases: None,
        });
    }
    let gains = |m: &mut dyn FnMut(usize, usize) -> Mat| -> Vec<f64> {
        m(1, d).data.iter().map(|x| 1.0 + 0.5 * x).collect()
    };
    // Biases of scale 0.1 (so that a dropped one shows in the outputs).
    let bias = |m: &mut dyn FnMut(usize, usize) -> Mat, n: usize| -> Vec<f64> {
        m(1, n)
            .data
            .iter()
            .map(|x| 0.1 * x * libm::sqrt(n as f64 / 3.0))
            .collect()
    };
    for l in layers.iter_mut() {
        l.attn_norm = gains(&mut mat);
        l.mlp_norm = gains(&mut mat);
        if gpt2 {
            l.biases = Some(LayerBiases {
                attn_norm: bias(&mut mat, d),
                q: bias(&mut mat, d),
                k: bias(&mut mat, kv),
                v: bias(&mut mat, kv),
                o: bias(&mut mat, d),
                mlp_norm: bias(&mut mat, d),
                up: bias(&mut mat, f),
                down: bias(&mut mat, d),
            });
        }
    }
    let final_norm = gains(&mut mat);
    let final_norm_bias = gpt2.then(|| bias(&mut mat, d));
    let w = DecoderWeights {
        cfg: cfg.clone(),
        embed,
        layers,
        final_norm,
        final_norm_bias,
        positions,
        head,
    };
    w.validate()?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kv_heads: usize, tied: bool) -> DecoderConfig {
        DecoderConfig {
            family: Family::Llama,
            layers: 2,
            hidden: 16,
            heads: 4,
            kv_heads,
            ffn: 24,
            vocab: 40,
            context: 32,
            rope_base: 10000.0,
            norm_eps: 1e-5,
            tied_head: tied,
        }
    }

    const TOKENS: [u32; 9] = [3, 17, 0, 39, 5, 5, 22, 8, 1];

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn the_cached_steps_equal_the_whole_sequence() {
        for (kv, tied) in [(2, true), (1, false), (4, true)] {
            let w = random_weights(&cfg(kv, tied), 11).unwrap();
            let all = forward_all(&w, &TOKENS).unwrap();
            let mut cache = KvCache::new(&w.cfg, 16).unwrap();
            for (i, &t) in TOKENS.iter().enumerate() {
                let l = step(&w, &mut cache, t).unwrap();
                assert!(max_diff(&l, &all[i]) < 1e-10, "kv {kv} position {i}");
            }
            assert_eq!(cache.len(), TOKENS.len());
            // Causal: a prefix's logits do not see what follows it.
            let prefix = forward_all(&w, &TOKENS[..4]).unwrap();
            assert!(max_diff(&prefix[3], &all[3]) < 1e-12);
            // And the logits vary with the context (the test would not see a broken mask
            // otherwise).
            assert!(max_diff(&all[4], &all[5]) > 1e-3);
        }
    }

    fn gpt2_cfg() -> DecoderConfig {
        DecoderConfig {
            family: Family::Gpt2,
            kv_heads: 4,
            rope_base: 0.0,
            tied_head: true,
            ..cfg(4, true)
        }
    }

    #[test]
    fn gpt2_cached_steps_equal_the_whole_sequence_and_every_part_counts() {
        let w = random_weights(&gpt2_cfg(), 21).unwrap();
        let all = forward_all(&w, &TOKENS).unwrap();
        let mut cache = KvCache::new(&w.cfg, 16).unwrap();
        for (i, &t) in TOKENS.iter().enumerate() {
            let l = step(&w, &mut cache, t).unwrap();
            assert!(max_diff(&l, &all[i]) < 1e-10, "position {i}");
        }
        // The learned positions, the biases and the LayerNorm's centring each change the
        // logits (so none is silently dropped by either path).
        let last = |w: &DecoderWeights| forward_all(w, &TOKENS).unwrap().pop().unwrap();
        let base = last(&w);
        let mut v = w.clone();
        v.positions
            .as_mut()
            .unwrap()
            .data
            .iter_mut()
            .for_each(|x| *x = 0.0);
        assert!(max_diff(&last(&v), &base) > 1e-3, "positions");
        let mut v = w.clone();
        v.layers[0]
            .biases
            .as_mut()
            .unwrap()
            .v
            .iter_mut()
            .for_each(|x| *x = 0.0);
        assert!(max_diff(&last(&v), &base) > 1e-3, "b_v");
        let mut v = w.clone();
        v.layers[1]
            .biases
            .as_mut()
            .unwrap()
            .up
            .iter_mut()
            .for_each(|x| *x = 0.0);
        assert!(max_diff(&last(&v), &base) > 1e-3, "b_up");
        // Causal, as for Llama.
        let prefix = forward_all(&w, &TOKENS[..4]).unwrap();
        assert!(max_diff(&prefix[3], &all[3]) < 1e-12);
    }

    #[test]
    fn layer_norm_and_gelu_tanh_values() {
        let y = layer_norm(
            &[1.0, 2.0, 3.0, 6.0],
            &[1.0, 2.0, 1.0, 1.0],
            &[0.0, 0.0, 0.5, 0.0],
            0.0,
        );
        // mean 3, var 3.5.
        let r = 1.0 / 3.5f64.sqrt();
        for (a, b) in y.iter().zip([-2.0 * r, -2.0 * r, 0.5, 3.0 * r]) {
            assert!((a - b).abs() < 1e-15);
        }
        // gelu_new at 1, −2 and 0.5 (the formula evaluated in Python).
        for (x, want) in [
            (1.0, 0.841_191_990_608_276_8),
            (-2.0, -0.045_402_305_912_224_94),
            (0.5, 0.345_714_009_825_143_94),
        ] {
            assert!((gelu_tanh(x) - want).abs() < 1e-12, "gelu_tanh({x})");
        }
    }

    #[test]
    fn family_rules_are_checked() {
        let mut c = gpt2_cfg();
        c.kv_heads = 2;
        assert!(c.validate().is_err(), "GPT-2 has no grouped heads");
        let mut c = gpt2_cfg();
        c.heads = 8; // head width 2, odd widths would be allowed too
        c.kv_heads = 8;
        c.validate().unwrap();
        let g = random_weights(&gpt2_cfg(), 2).unwrap();
        let l = random_weights(&cfg(4, true), 2).unwrap();
        let mut bad = g.clone();
        bad.positions = None;
        assert!(bad.validate().is_err());
        let mut bad = g.clone();
        bad.layers[0].w_gate = l.layers[0].w_gate.clone();
        assert!(bad.validate().is_err());
        let mut bad = g.clone();
        bad.layers[1].biases.as_mut().unwrap().k.pop();
        assert!(bad.validate().is_err());
        let mut bad = l.clone();
        bad.final_norm_bias = g.final_norm_bias.clone();
        assert!(bad.validate().is_err());
        let mut bad = l;
        bad.layers[0].biases = g.layers[0].biases.clone();
        assert!(bad.validate().is_err());
    }

    #[test]
    fn grouped_heads_equal_repeated_heads() {
        // GQA with 2 KV heads against MHA whose 4 KV heads repeat them: same logits.
        let w = random_weights(&cfg(2, true), 5).unwrap();
        let mut mha = w.clone();
        mha.cfg.kv_heads = 4;
        let hd = w.cfg.head_dim();
        for l in mha.layers.iter_mut() {
            let rep =
                |m: &Mat| Mat::from_fn(4 * hd, m.cols, |r, c| m.get((r / hd / 2) * hd + r % hd, c));
            l.wk = rep(&l.wk);
            l.wv = rep(&l.wv);
        }
        mha.validate().unwrap();
        let a = forward_all(&w, &TOKENS).unwrap();
        let b = forward_all(&mha, &TOKENS).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!(max_diff(x, y) < 1e-12);
        }
    }

    #[test]
    fn rope_is_a_rotation_by_relative_position() {
        let q: Vec<f64> = (0..8).map(|i| (i as f64 * 0.7).sin()).collect();
        let k: Vec<f64> = (0..8).map(|i| (i as f64 * 1.3).cos()).collect();
        let dot = |a: usize, b: usize| {
            let (mut x, mut y) = (q.clone(), k.clone());
            rope(&mut x, a, 8, 100.0);
            rope(&mut y, b, 8, 100.0);
            x.iter().zip(&y).map(|(u, v)| u * v).sum::<f64>()
        };
        let mut at0 = q.clone();
        rope(&mut at0, 0, 8, 100.0);
        assert_eq!(at0, q);
        assert!((dot(7, 3) - dot(4, 0)).abs() < 1e-12);
        assert!((dot(2, 9) - dot(0, 7)).abs() < 1e-12);
        assert!(
            (dot(2, 9) - dot(9, 2)).abs() > 1e-6,
            "the rotation is not symmetric"
        );
        // The pair (0, 1) at position 1 turns by exactly 1 radian (θ^0 = 1).
        let mut e = vec![1.0, 0.0, 0.0, 0.0];
        rope(&mut e, 1, 4, 100.0);
        assert!((e[0] - 1f64.cos()).abs() < 1e-15 && (e[1] - 1f64.sin()).abs() < 1e-15);
    }

    /// The tracked step is the step (same logits) and records every kind of magnitude, at
    /// least the logits' and the embedding's.
    #[test]
    fn tracked_steps_record_the_ranges() {
        for fam in [Family::Llama, Family::Gpt2] {
            let w = random_weights(&DecoderConfig::tiny(fam), 5).unwrap();
            let (mut a, mut b) = (
                KvCache::new(&w.cfg, 4).unwrap(),
                KvCache::new(&w.cfg, 4).unwrap(),
            );
            let mut r = ActRanges::default();
            for t in [3, 9, 200] {
                let l = step(&w, &mut a, t).unwrap();
                let lt = step_tracked(&w, &mut b, t, &mut r).unwrap();
                assert_eq!(l, lt);
                let top = l.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                assert!(r.products >= top && top > 0.0);
            }
            let e = embed_token(&w, 3, 0).unwrap();
            assert!(r.residual >= e.iter().fold(0.0f64, |m, v| m.max(v.abs())));
            assert!(r.activation > 0.0);
        }
    }

    #[test]
    fn greedy_follows_the_argmax() {
        let w = random_weights(&cfg(2, false), 3).unwrap();
        let out = greedy(&w, &TOKENS[..3], 5).unwrap();
        let mut seq = TOKENS[..3].to_vec();
        for &t in &out {
            let l = forward_all(&w, &seq).unwrap();
            assert_eq!(argmax(l.last().unwrap()), t);
            seq.push(t);
        }
    }

    #[test]
    fn bad_input_is_refused() {
        let w = random_weights(&cfg(2, true), 1).unwrap();
        let mut cache = KvCache::new(&w.cfg, 2).unwrap();
        assert!(step(&w, &mut cache, 40).is_err());
        step(&w, &mut cache, 1).unwrap();
        step(&w, &mut cache, 2).unwrap();
        assert!(step(&w, &mut cache, 3).is_err(), "a full cache");
        assert_eq!(cache.len(), 2);
        assert!(KvCache::new(&w.cfg, 33).is_err());
        // A cache made for a longer context than the weights' is refused (GPT-2's learned
        // positions end at the context).
        let mut longer = w.cfg.clone();
        longer.context = 64;
        let mut c = KvCache::new(&longer, 40).unwrap();
        assert!(step(&w, &mut c, 1).is_err());
        assert!(greedy(&w, &[], 3).is_err());
        assert!(forward_all(&w, &[0; 33]).is_err());
        let mut c = cfg(3, true);
        assert!(c.validate().is_err());
        c.kv_heads = 2;
        c.heads = 3;
        assert!(c.validate().is_err());
        let mut bad = w.clone();
        bad.layers[1].wk = Mat::zeros(16, 16);
        assert!(bad.validate().is_err());
        let mut bad = w;
        bad.head = Some(bad.embed.clone());
        assert!(bad.validate().is_err());
    }
}
