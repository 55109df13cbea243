//! The `f64` reference of a decoder ([`super`]): generation one token at a time over a KV
//! cache ([`KvCache`], [`step`], [`greedy`]), and the whole sequence at once with a causal mask
//! ([`forward_all`]), written separately so that each checks the other.

use super::{DecoderConfig, DecoderLayer, DecoderWeights};
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

fn mlp(l: &DecoderLayer, cfg: &DecoderConfig, x: &mut [f64]) {
    let m = rms_norm(x, &l.mlp_norm, cfg.rms_eps);
    let gate = linear(&l.w_gate, &m);
    let up = linear(&l.w_up, &m);
    let h: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
    for (x, d) in x.iter_mut().zip(linear(&l.w_down, &h)) {
        *x += d;
    }
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
    w.check_shapes()?;
    let cfg = &w.cfg;
    let t = check_token(cfg, token)?;
    if cache.len >= cache.max {
        return Err(Error::InvalidParameters("the KV cache is full"));
    }
    if cache.k.len() != cfg.layers || cache.kv_dim != cfg.kv_dim() {
        return Err(Error::InvalidParameters(
            "the KV cache is for another model",
        ));
    }
    let (hd, kv_dim, pos) = (cfg.head_dim(), cfg.kv_dim(), cache.len);
    let group = cfg.heads / cfg.kv_heads;
    let mut x = w.embed.data[t * cfg.hidden..(t + 1) * cfg.hidden].to_vec();
    for (i, l) in w.layers.iter().enumerate() {
        let a = rms_norm(&x, &l.attn_norm, cfg.rms_eps);
        let mut q = linear(&l.wq, &a);
        let mut k = linear(&l.wk, &a);
        rope(&mut q, pos, hd, cfg.rope_base);
        rope(&mut k, pos, hd, cfg.rope_base);
        cache.k[i].extend_from_slice(&k);
        cache.v[i].extend_from_slice(&linear(&l.wv, &a));
        let ctx: Vec<f64> = (0..cfg.heads)
            .flat_map(|h| {
                let qh = &q[h * hd..(h + 1) * hd];
                attend(qh, &cache.k[i], &cache.v[i], pos + 1, h / group, hd, kv_dim)
            })
            .collect();
        for (x, o) in x.iter_mut().zip(linear(&l.wo, &ctx)) {
            *x += o;
        }
        mlp(l, cfg, &mut x);
    }
    cache.len += 1;
    let h = rms_norm(&x, &w.final_norm, cfg.rms_eps);
    Ok(linear(w.lm_head(), &h))
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
/// except for the shared primitives ([`linear`], [`rms_norm`], [`rope`], [`silu`]).
pub fn forward_all(w: &DecoderWeights, tokens: &[u32]) -> Result<Vec<Vec<f64>>, Error> {
    w.check_shapes()?;
    let cfg = &w.cfg;
    let m = tokens.len();
    if m == 0 || m > cfg.context {
        return Err(Error::InvalidParameters(
            "a sequence must hold from 1 to the model's context tokens",
        ));
    }
    let (d, hd) = (cfg.hidden, cfg.head_dim());
    let group = cfg.heads / cfg.kv_heads;
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| check_token(cfg, t).map(|t| w.embed.data[t * d..(t + 1) * d].to_vec()))
        .collect::<Result<_, _>>()?;
    for l in &w.layers {
        let a: Vec<Vec<f64>> = xs
            .iter()
            .map(|x| rms_norm(x, &l.attn_norm, cfg.rms_eps))
            .collect();
        let proj = |wm: &Mat, rotate: bool| -> Vec<Vec<f64>> {
            a.iter()
                .enumerate()
                .map(|(p, ap)| {
                    let mut y = linear(wm, ap);
                    if rotate {
                        rope(&mut y, p, hd, cfg.rope_base);
                    }
                    y
                })
                .collect()
        };
        let (q, k, v) = (proj(&l.wq, true), proj(&l.wk, true), proj(&l.wv, false));
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
                // This head's share of W_o·ctx: the columns of W_o that read head h.
                for (o, xo) in x.iter_mut().enumerate() {
                    *xo += (0..hd)
                        .map(|c| l.wo.get(o, h * hd + c) * ctx[c])
                        .sum::<f64>();
                }
            }
        }
        for x in xs.iter_mut() {
            mlp(l, cfg, x);
        }
    }
    Ok(xs
        .iter()
        .map(|x| linear(w.lm_head(), &rms_norm(x, &w.final_norm, cfg.rms_eps)))
        .collect())
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
    let mut layers = Vec::with_capacity(cfg.layers);
    for _ in 0..cfg.layers {
        layers.push(DecoderLayer {
            attn_norm: Vec::new(),
            wq: mat(d, d),
            wk: mat(kv, d),
            wv: mat(kv, d),
            wo: mat(d, d),
            mlp_norm: Vec::new(),
            w_gate: mat(f, d),
            w_up: mat(f, d),
            w_down: mat(d, f),
        });
    }
    let gains = |m: &mut dyn FnMut(usize, usize) -> Mat| -> Vec<f64> {
        m(1, d).data.iter().map(|x| 1.0 + 0.5 * x).collect()
    };
    for l in layers.iter_mut() {
        l.attn_norm = gains(&mut mat);
        l.mlp_norm = gains(&mut mat);
    }
    let final_norm = gains(&mut mat);
    let w = DecoderWeights {
        cfg: cfg.clone(),
        embed,
        layers,
        final_norm,
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
            layers: 2,
            hidden: 16,
            heads: 4,
            kv_heads,
            ffn: 24,
            vocab: 40,
            context: 32,
            rope_base: 10000.0,
            rms_eps: 1e-5,
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
