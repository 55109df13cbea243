//! The two sides of private generation with a causal decoder: one token at a time through every
//! layer, the keys and values kept encrypted at the server ([`EncKvCache`]), the logits opened
//! to the client alone.
//!
//! # Who holds what
//!
//! The client (MPC party P0) holds the CKKS secret key, its prompt and the tokens it samples,
//! and the token (and GPT-2 position) embedding table: it embeds each token itself and shares
//! the embedding in, as the encoder's client does. The table is the published checkpoint's
//! (for a tied head it is also the LM head's weights), so the client learns no weight it could
//! not download; the server's layers stay its own. The server (P1) holds the layers, the
//! public key and the evaluation keys, and the cache: `2 · layers · ⌈kv_heads / groups⌉ ·
//! ⌈len / t⌉` ciphertexts under the client's key (`groups` heads per ciphertext, `t` positions
//! per block: [`DecodePlan::layout`]), at most [`DecodePlan::max_ctx`] positions
//! ([`Error::ContextFull`] past it). The client stores nothing between tokens but the position.
//!
//! # One step
//!
//! A step takes the shares of one position's input `x` (the client's share is the embedding,
//! the server's 0) through every layer, each
//!
//! | block | where | in → out |
//! |---|---|---|
//! | `norm1`: RMSNorm / LayerNorm without its affine map | MPC | `x → n` |
//! | `m2c:a` | conversion | `n` → the staggered packing at the product's period |
//! | `qkv`: `[W_q; W_k; W_v]` with the norm's gain (and GPT-2's bias) folded in, RoPE at the public position folded into the `q`, `k` rows, `1/√d_h` into `q` | CKKS | → one dense ciphertext |
//! | `c2m:qkv`, `m2c:qkv`: `q`, `k`, `v` back in, compact (one row each) | conversions | |
//! | `scores`: unpack (`q` replicated over the rows, `k`, `v` to the position's row: [`unpack_qkv`]), append `k`, `v` to the cache; `q ⊙ K` per cached block | CKKS | → score products |
//! | `c2m:s` (each party folds the `d_h` segments of its shares) | conversion | → scores |
//! | `softmax` over the `len` cached positions | MPC | → probabilities |
//! | `m2c:p` (compact: one segment offset per block), `values` (spread over the segments, [`spread_blocks`]; `P·V` per query ciphertext over the cache) | conversion, CKKS | → attention output |
//! | `c2m:o`, `m2c:o`, `out` (`W_o`, `+ b_o`), `c2m:y`; `x += y` | conversions, CKKS | |
//! | `norm2`, `m2c:m`, `up` (`[W_gate; W_up]`, gate and up in one ciphertext's two parts) | MPC, conversion, CKKS | |
//! | `c2m:u`, `act` (SwiGLU, or GPT-2's `gelu_new`) | conversion, MPC | → `g` |
//! | `m2c:g`, `down` (`W_down`, `+ b_down`), `c2m:d`; `x += ·` | conversion, CKKS | |
//!
//! and, when the step's logits are wanted (the last prompt token and every generated one):
//! `norm-f` (the final norm), `m2c:h`, `lm-head` (the LM head with the final gain folded in),
//! `c2m:l`, and `head`, the opening to the client alone. The residual stream never leaves MPC.
//!
//! A step that fails leaves the session unusable (some layers may have appended to the cache):
//! every later step is refused, and the session must end.
//!
//! RoPE is folded into the projection rather than applied to shares: on shares it is a
//! product by public reals, which costs a truncation (and its error) per element; in the
//! projection it is free (the server encodes every weight plaintext per step anyway).
//!
//! The projection is dense (one output ciphertext for `q`, `k` and `v` together) and its
//! output goes through the conversions once more to reach the cache's layout: the M2C lays
//! the shares out compact at no cost (one row per query, key and value ciphertext) and the
//! server unpacks them with the mask level the cache spends anyway, where a projection
//! straight into the cache's layout would encode `D` plaintext diagonals for every one of its
//! ciphertexts. The probabilities likewise enter compact and are spread by the server: the
//! conversions carry `⌈items / t⌉` and `⌈blocks / d_h⌉` ciphertexts, not one per item and
//! block ([`super::cache`]'s "Compact conversions").
//!
//! Every M2C of the step gives its input as distinct values and the slots that take them
//! ([`SlotShares`], [`HybridRun::m2c_slots`]): a dense product's input repeats its vector
//! `n / P` times and has no imaginary part, the compact layouts leave most slots zero, and the
//! lift's correlated OTs (123 bits each) are paid per distinct value, not per slot.
//!
//! With the silent OT behind the parties' COT pools, each layer's pools are topped up to its
//! demand at its last run before it runs (the `ot-fill` block), so every layer but the first
//! step's first runs on silently made COTs.
//!
//! Every dense product's input is laid out by its own M2C in blocks of the product's period
//! ([`super::head`]'s staggered packing, [`DecodePlan`]'s `Dense`), so each product encodes
//! `⌈rows/2P⌉·D·P/n` plaintexts per token, `P` the least power of two ≥ `rows/2` (SmolLM2: 64
//! for `q`, `k`, `v`, 256 for gate and up,
//! 64 for `W_o`, 128 for `W_down`), not `D` per output ciphertext. By default the server
//! encodes them at every step; [`DecodeRun::with_weight_cache`] keeps the fixed ones (all but a
//! Llama's `[W_q; W_k; W_v]`, whose `q` and `k` rows RoPE moves with the position) within a
//! memory budget.

use super::cache::{spread_blocks, unpack_qkv, EncKvCache};
use super::head::matvec_keyed;
use super::plan::{
    DecodePlan, Dense, DenseRows, B_ATTN, B_DOWN, B_HEAD, B_OUT, B_QKV, B_UP, B_VAL, MPC_CONFIG,
};
use super::{DecoderWeights, Family};
use crate::circuits::exec::Exec;
use crate::ckks::{Ciphertext, Ckks, SecretKey, C64};
use crate::convert::{ComplexShares, ProtocolError, SlotShares};
use crate::error::Error;
use crate::hybrid::{BlockCost, HybridRun, ServerKeys};
use crate::mpc::{Party, RingShares};
use crate::nonlinear::ops;
use crate::nonlinear::silu::Silu;
use crate::packing::Mat;
use crate::PolyBackend;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// The biases a GPT-2 layer's products add once its norm's bias is folded in (`W·β + b`).
struct LayerBias {
    qkv: Vec<f64>,
    o: Vec<f64>,
    up: Vec<f64>,
    down: Vec<f64>,
}

/// The server's model for decode sessions: the weights, and the biases with the norms' biases
/// folded in (GPT-2). Holds the checkpoint: `Debug` shows only its shape.
pub struct ServedDecoder<'w> {
    w: &'w DecoderWeights,
    bias: Option<Vec<LayerBias>>,
    head_bias: Option<Vec<f64>>,
}

impl core::fmt::Debug for ServedDecoder<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "ServedDecoder {{ cfg: {:?}, weights: <redacted> }}",
            self.w.cfg
        )
    }
}

fn mat_vec(w: &Mat, x: &[f64]) -> Vec<f64> {
    super::reference::linear(w, x)
}

fn plus(mut a: Vec<f64>, b: &[f64], scale: f64) -> Vec<f64> {
    for (a, b) in a.iter_mut().zip(b) {
        *a = (*a + b) * scale;
    }
    a
}

impl<'w> ServedDecoder<'w> {
    /// Checks the weights' shapes and values, and folds GPT-2's norm biases into the biases of
    /// the products after them.
    pub fn new(w: &'w DecoderWeights) -> Result<Self, Error> {
        w.validate()?;
        let cfg = &w.cfg;
        let inv = 1.0 / libm::sqrt(cfg.head_dim() as f64);
        let bias = match cfg.family {
            Family::Llama => None,
            Family::Gpt2 => Some(
                w.layers
                    .iter()
                    .map(|l| {
                        let b = l
                            .biases
                            .as_ref()
                            .ok_or(Error::InvalidParameters("a GPT-2 layer without biases"))?;
                        let mut qkv = plus(mat_vec(&l.wq, &b.attn_norm), &b.q, inv);
                        qkv.extend(plus(mat_vec(&l.wk, &b.attn_norm), &b.k, 1.0));
                        qkv.extend(plus(mat_vec(&l.wv, &b.attn_norm), &b.v, 1.0));
                        Ok(LayerBias {
                            qkv,
                            o: b.o.clone(),
                            up: plus(mat_vec(&l.w_up, &b.mlp_norm), &b.up, 1.0),
                            down: b.down.clone(),
                        })
                    })
                    .collect::<Result<Vec<_>, Error>>()?,
            ),
        };
        let head_bias = w.final_norm_bias.as_ref().map(|b| mat_vec(w.lm_head(), b));
        Ok(Self { w, bias, head_bias })
    }

    /// The weights.
    pub fn weights(&self) -> &DecoderWeights {
        self.w
    }
}

/// `(sin, cos)` of RoPE's angles at `pos`, one per pair of a head.
fn rope_table(pos: usize, dh: usize, base: f64) -> Vec<(f64, f64)> {
    (0..dh / 2)
        .map(|i| {
            let theta = pos as f64 * libm::pow(base, -((2 * i) as f64) / dh as f64);
            (libm::sin(theta), libm::cos(theta))
        })
        .collect()
}

/// Row `r`, column `c` of `R_pos·W` (RoPE on the rows of `W`, heads of `dh` rows).
fn roped(w: &Mat, rope: &[(f64, f64)], dh: usize, r: usize, c: usize) -> f64 {
    let (s, co) = rope[(r % dh) / 2];
    if r.is_multiple_of(2) {
        co * w.get(r, c) - s * w.get(r + 1, c)
    } else {
        s * w.get(r - 1, c) + co * w.get(r, c)
    }
}

/// One party's side of a decode session: the engine's run, the plan, the position, and (at the
/// server) the encrypted KV cache.
pub struct DecodeRun<'a, 'p, 'w, B: PolyBackend, R: RngCore + CryptoRng> {
    h: HybridRun<'a, 'p, B, R, ServedDecoder<'w>>,
    plan: &'a DecodePlan,
    cache: Option<EncKvCache<Ciphertext<B>>>,
    pos: usize,
    layer: usize,
    ready: bool,
    broken: bool,
    /// Each layer's COT demand at its last run, `(as sender, as receiver)`: with the silent OT
    /// the pools are topped up to it (and half again) before the layer runs.
    demand: Vec<Option<(usize, usize)>>,
    /// Whether the server keys its fixed weights' plaintexts for the executor's cache
    /// ([`DecodeRun::with_weight_cache`]).
    weight_cache: bool,
}

/// Adds `b[row]` to the slots of `cts` laid out by `at` (the server's bias, in CKKS).
fn add_rows<E: Exec>(
    ex: &E,
    cts: &mut [E::Ct],
    at: &dyn Fn(usize, usize) -> (Option<usize>, Option<usize>),
    b: &[f64],
) -> Result<(), Error> {
    let n = ex.slots();
    for (u, ct) in cts.iter_mut().enumerate() {
        let vals = || -> Vec<C64> {
            (0..n)
                .map(|s| {
                    let (re, im) = at(u, s);
                    C64::new(re.map_or(0.0, |r| b[r]), im.map_or(0.0, |r| b[r]))
                })
                .collect()
        };
        ex.add_plain(ct, &vals)?;
    }
    Ok(())
}

impl<'a, 'p, 'w, B: PolyBackend, R: RngCore + CryptoRng> DecodeRun<'a, 'p, 'w, B, R> {
    /// The client's side (P0 with [`MPC_CONFIG`]).
    pub fn client(
        party: &'p mut Party<R>,
        ck: &'a Ckks<B>,
        sk: &'a SecretKey,
        plan: &'a DecodePlan,
    ) -> Result<Self, ProtocolError> {
        Ok(Self {
            h: HybridRun::client(party, ck, sk, &MPC_CONFIG)?,
            plan,
            cache: None,
            pos: 0,
            layer: 0,
            ready: false,
            broken: false,
            demand: vec![None; plan.cfg.layers],
            weight_cache: false,
        })
    }

    /// The server's side (P1 with [`MPC_CONFIG`]): public key material only, an empty cache
    /// of [`DecodePlan::max_ctx`] positions. The model must have the plan's architecture.
    pub fn server(
        party: &'p mut Party<R>,
        keys: ServerKeys<'a, B>,
        plan: &'a DecodePlan,
        model: &'a ServedDecoder<'w>,
    ) -> Result<Self, ProtocolError> {
        if model.w.cfg != plan.cfg {
            return Err(
                Error::InvalidParameters("the weights' architecture is not the plan's").into(),
            );
        }
        let cache = EncKvCache::new(plan.lay, plan.cfg.layers, plan.kv_cts(), plan.max_ctx)?;
        Ok(Self {
            h: HybridRun::server(party, keys, plan.slots, model, &MPC_CONFIG)?,
            plan,
            cache: Some(cache),
            pos: 0,
            layer: 0,
            ready: false,
            broken: false,
            demand: vec![None; plan.cfg.layers],
            weight_cache: false,
        })
    }

    /// Keeps the server's encoded weights between steps within `bytes` (the executor's cache
    /// of keyed plaintexts; its masks count too): every product's plaintexts but a Llama's
    /// `[W_q; W_k; W_v]` (its `q`, `k` rows carry RoPE at the position, and every diagonal
    /// mixes them with the `v` rows) are encoded at their first step and
    /// reused while they fit, the layers first, the LM head last; past the budget the rest are
    /// encoded at each use as without it. At the client it does nothing. 1 GiB holds a
    /// GPT2-base layer's products, 8 GiB all of SmolLM2's with its LM head.
    pub fn with_weight_cache(mut self, bytes: usize) -> Self {
        if bytes > 0 {
            self.h.set_cache_budget(bytes);
            self.weight_cache = self.h.is_server();
        }
        self
    }

    /// Positions processed so far (the next step's position).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The server's cache (`None` at the client).
    pub fn cache(&self) -> Option<&EncKvCache<Ciphertext<B>>> {
        self.cache.as_ref()
    }

    /// One position through every layer. The client gives its input `x` (the token's
    /// embedding, `hidden` values), the server `None`; both give the same `logits` flag
    /// (public). With it the client gets the position's logits; otherwise (and at the server)
    /// the result is `None`. `progress` is called after every block. Refused with
    /// [`Error::ContextFull`] when the session holds [`DecodePlan::max_ctx`] positions.
    pub async fn step(
        &mut self,
        x: Option<&[f64]>,
        logits: bool,
        progress: &mut dyn FnMut(&BlockCost),
    ) -> Result<Option<Vec<f64>>, ProtocolError> {
        if self.broken {
            return Err(Error::InvalidParameters(
                "a decode step failed earlier: the session must end",
            )
            .into());
        }
        let r = self.step_inner(x, logits, progress).await;
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    async fn step_inner(
        &mut self,
        x: Option<&[f64]>,
        logits: bool,
        progress: &mut dyn FnMut(&BlockCost),
    ) -> Result<Option<Vec<f64>>, ProtocolError> {
        let plan = self.plan;
        let d = plan.cfg.hidden;
        if self.pos >= plan.max_ctx {
            return Err(Error::ContextFull { max: plan.max_ctx }.into());
        }
        let xs = match (self.h.is_server(), x) {
            (true, None) => RingShares::new(vec![0u64; d]),
            (false, Some(x)) => {
                if x.len() != d {
                    return Err(Error::Shape {
                        what: "a decode step's input (hidden)",
                        expected: d,
                        found: x.len(),
                    }
                    .into());
                }
                self.h.share_input(x, plan.ranges.x)?
            }
            _ => {
                return Err(
                    Error::InvalidParameters("a decode step's input is the client's alone").into(),
                )
            }
        };
        if !self.ready {
            // Base OTs unless the party has an OT already, and a fresh common seed.
            self.h.party.setup().await?;
            self.ready = true;
        }
        self.h.mark();
        let silent = self.h.party.silent_stats().is_some();
        let mut x = xs;
        for l in 0..plan.cfg.layers {
            self.layer = l;
            if silent {
                self.top_up_ots(progress).await?;
            }
            let before = self.h.party.ot_counts();
            x = self.layer(x, progress).await?;
            let after = self.h.party.ot_counts();
            self.demand[l] = Some(((after.0 - before.0) as usize, (after.1 - before.1) as usize));
        }
        let out = if logits {
            self.head(&x, progress).await?
        } else {
            None
        };
        self.pos += 1;
        Ok(out)
    }

    /// With the silent OT, fills the COT pools before layer `self.layer` runs so that they hold
    /// its demand (at its last run, or the last layer run's when it has not run yet) and half
    /// again for the context's growth (the softmax's share grows with it): the layer then runs
    /// on silently made COTs (1 derandomization bit each) instead of IKNP's 16 bytes. A call the
    /// pool cannot cover goes to IKNP whole, so the margin matters; what a layer leaves in the
    /// pools serves the next, so the margin is made once, not per layer. The first layer of the
    /// first step has no measure and runs on IKNP. Both parties count the same COTs (one's
    /// sender count is the other's receiver count) and hold the same pools, so their fills pair
    /// up.
    async fn top_up_ots(
        &mut self,
        progress: &mut dyn FnMut(&BlockCost),
    ) -> Result<(), ProtocolError> {
        let l = self.layer;
        let known = self.demand[l].or_else(|| self.demand[..l].iter().rev().find_map(|d| *d));
        let Some((s, r)) = known else {
            return Ok(());
        };
        let (ps, pr) = self.h.party.pooled_ots();
        let want = |d: usize, have: usize| (d + d / 2).saturating_sub(have);
        let (fs, fr) = (want(s, ps), want(r, pr));
        if fs > 0 || fr > 0 {
            self.h.party.preprocess_ot(fs, fr).await?;
            self.done("ot-fill", progress);
        }
        Ok(())
    }

    fn done(&mut self, block: &'static str, progress: &mut dyn FnMut(&BlockCost)) {
        let cost = BlockCost {
            layer: self.layer,
            block,
            tally: self.h.tally(),
        };
        progress(&cost);
    }

    /// Norm site `site`'s norm without its affine map (folded into the next product), at the
    /// site's planned shift and widening.
    async fn norm(&mut self, site: usize, x: &RingShares) -> Result<RingShares, ProtocolError> {
        let plan = self.plan;
        let ns = plan.norms.get(site).ok_or(Error::InvalidParameters(
            "decode: a norm site past the plan",
        ))?;
        Ok(plan
            .norm()
            .run_wide(self.h.party, x, ns.shift, &ns.wide)
            .await?)
    }

    /// M2C of a vector into a dense product's input layout.
    async fn m2c_dense(
        &mut self,
        which: usize,
        x: &RingShares,
        lay: &super::head::DenseLayout,
    ) -> Result<Option<Ciphertext<B>>, ProtocolError> {
        let n = self.plan.slots;
        // The vector's elements once each (the layout repeats them `n / P` times), the
        // imaginary parts zero.
        let re = (0..n)
            .map(|s| {
                lay.input_home(s)
                    .filter(|&c| c < x.len())
                    .map_or(SlotShares::ZERO, |c| c as u32)
            })
            .collect();
        let input = [SlotShares::gather(x, re, Vec::new())];
        let out = self.h.m2c_slots(&self.plan.m2c[which], &input).await?;
        Ok(out.and_then(|mut v| v.pop()))
    }

    /// C2M of `count` ciphertexts (the server's `cts`).
    async fn c2m(
        &mut self,
        which: usize,
        cts: Option<Vec<Ciphertext<B>>>,
        count: usize,
    ) -> Result<Vec<ComplexShares>, ProtocolError> {
        self.h
            .c2m(&self.plan.c2m[which], cts.as_deref(), count)
            .await
    }

    /// C2M of a dense product's output, gathered into its `rows` values.
    async fn c2m_dense(
        &mut self,
        which: usize,
        cts: Option<Vec<Ciphertext<B>>>,
        rows: DenseRows,
    ) -> Result<RingShares, ProtocolError> {
        let sh = self.c2m(which, cts, rows.cts()).await?;
        Ok(RingShares::new(
            (0..rows.rows)
                .map(|e| {
                    let (u, part, s) = rows.home(e);
                    let c = &sh[u];
                    if part == 0 {
                        c.re.as_slice()[s]
                    } else {
                        c.im.as_slice()[s]
                    }
                })
                .collect(),
        ))
    }

    /// `x + W·input (+ b)` for a product into the residual stream (`W_o`, `W_down`): the
    /// dense product at the server (`W` is `None` at the client), then the C2M into `x`'s
    /// shares; the two are reported as the blocks `names`.
    #[allow(clippy::too_many_arguments)]
    async fn add_product(
        &mut self,
        which: usize,
        input: Option<Ciphertext<B>>,
        p: Dense,
        w: Option<&Mat>,
        b: Option<&[f64]>,
        x: &RingShares,
        names: [&'static str; 2],
        progress: &mut dyn FnMut(&BlockCost),
    ) -> Result<RingShares, ProtocolError> {
        let cts = match w {
            Some(w) => {
                let wf = |r: usize, c: usize| w.get(r, c);
                self.dense(which, input, p, &wf, b)?
            }
            None => None,
        };
        self.done(names[0], progress);
        let y = self.c2m_dense(which, cts, p.rows).await?;
        let x = ops::add(self.h.party.ring(), x, &y)?;
        self.done(names[1], progress);
        Ok(x)
    }

    /// A dense product `W·x (+ b)` at the server on the input `x` in `p`'s layout.
    fn dense(
        &self,
        which: usize,
        x: Option<Ciphertext<B>>,
        p: Dense,
        w: &dyn Fn(usize, usize) -> f64,
        b: Option<&[f64]>,
    ) -> Result<Option<Vec<Ciphertext<B>>>, ProtocolError> {
        let (Some(ex), Some(x)) = (self.h.exec(), x) else {
            return Ok(None);
        };
        let at = move |u: usize, s: usize| p.rows.at(u, s);
        // Weights the same at every step (all but a Llama's q/k/v product: its q and k rows
        // carry RoPE at the position) are keyed, so the executor keeps their plaintexts while
        // its budget lasts.
        let fixed = which != B_QKV || self.plan.cfg.family == Family::Gpt2;
        let key = (self.weight_cache && fixed)
            .then(|| crate::circuits::exec::pt_key(0xdec2, &[self.layer as u64, which as u64]));
        let mut out = matvec_keyed(ex, &p.lay, &x, p.rows.cts(), &at, w, key)?;
        if let Some(b) = b {
            add_rows(ex, &mut out, &at, b)?;
        }
        Ok(Some(out))
    }

    /// One decoder layer on the shares of its input.
    async fn layer(
        &mut self,
        x: RingShares,
        progress: &mut dyn FnMut(&BlockCost),
    ) -> Result<RingShares, ProtocolError> {
        let plan = self.plan;
        let cfg = &plan.cfg;
        let (d, dh, kv, f) = (cfg.hidden, cfg.head_dim(), cfg.kv_heads, cfg.ffn);
        let (n, t) = (plan.slots, plan.lay.t());
        let (nq, nc) = (plan.qcts.len(), plan.kv_cts());
        let reads = plan.reads();
        let len = self.pos + 1;
        let blocks = plan.lay.blocks(len);
        let r = self.h.party.ring();
        let li = self.layer;
        let model = self.h.model();
        let w = model.map(|m| &m.w.layers[li]);
        let bias = model.and_then(|m| m.bias.as_ref()).map(|b| &b[li]);

        // Attention.
        let a = self.norm(2 * li, &x).await?;
        self.done("norm1", progress);
        let ac = self.m2c_dense(B_QKV, &a, &plan.qkv.lay).await?;
        self.done("m2c:a", progress);
        let qkv_cts = match w {
            Some(w) => {
                let rope = match cfg.family {
                    Family::Llama => Some(rope_table(self.pos, dh, cfg.rope_base)),
                    Family::Gpt2 => None,
                };
                let inv = 1.0 / libm::sqrt(dh as f64);
                let g = &w.attn_norm;
                let proj = |m: &Mat, r: usize, c: usize| match &rope {
                    Some(t) => roped(m, t, dh, r, c),
                    None => m.get(r, c),
                };
                let wf = |r: usize, c: usize| -> f64 {
                    let v = if r < d {
                        proj(&w.wq, r, c) * inv
                    } else if r < d + kv * dh {
                        proj(&w.wk, r - d, c)
                    } else {
                        w.wv.get(r - d - kv * dh, c)
                    };
                    v * g[c]
                };
                self.dense(B_QKV, ac, plan.qkv, &wf, bias.map(|b| &b.qkv[..]))?
            }
            None => None,
        };
        self.done("qkv", progress);
        // q, k and v as shares, then converted back in compact.
        let qkv = self.c2m_dense(B_QKV, qkv_cts, plan.qkv.rows).await?;
        self.done("c2m:qkv", progress);
        // q, k and v compact (row `w mod t` of every segment for item `w`); the server unpacks
        // them into the replicated queries and the new cache rows (`unpack_qkv`).
        let items = plan.qkv_cts();
        let ncompact = items.div_ceil(t);
        let z = SlotShares::ZERO;
        let (mut cre, mut cim) = (vec![vec![z; n]; ncompact], vec![vec![z; n]; ncompact]);
        for w in 0..items {
            for seg in 0..plan.lay.segments() {
                let (k, slot) = plan.lay.compact_item_slot(w, seg);
                let (a, b) = plan.qkv_at(w, seg * t);
                if let Some(a) = a {
                    cre[k][slot] = a as u32;
                }
                if let Some(b) = b {
                    cim[k][slot] = b as u32;
                }
            }
        }
        let lay_in = SlotShares::gather_all(&qkv, cre, cim);
        let rc = self.h.m2c_slots(&plan.m2c[B_ATTN], &lay_in).await?;
        self.done("m2c:qkv", progress);
        let s_cts = match (rc, self.h.exec(), self.cache.as_mut()) {
            (Some(c), Some(ex), Some(cache)) => {
                if cache.len(li) != self.pos {
                    return Err(Error::InvalidParameters(
                        "the KV cache is out of step with the session",
                    )
                    .into());
                }
                let (q, rows) = unpack_qkv(ex, &plan.lay, &c, nq, nc, self.pos % t)?;
                cache.append_rows(ex, li, rows)?;
                Some(
                    cache
                        .scores(ex, li, &q, &reads)?
                        .into_iter()
                        .flatten()
                        .collect(),
                )
            }
            _ => None,
        };
        self.done("scores", progress);
        let sh = self.c2m(B_ATTN, s_cts, nq * blocks).await?;
        // Each party folds the d_h segments of each head group of its shares: head h's scores,
        // row-major.
        let mut s = vec![0u64; cfg.heads * len];
        for (u, qc) in plan.qcts.iter().enumerate() {
            for b in 0..blocks {
                let c = &sh[u * blocks + b];
                for (i, pr) in qc.pairs.iter().enumerate() {
                    let Some(pr) = pr else { continue };
                    for (h, part) in [(Some(pr.re), &c.re), (pr.im, &c.im)] {
                        let Some(h) = h else { continue };
                        let v = part.as_slice();
                        for row in 0..t.min(len - b * t) {
                            s[h * len + b * t + row] =
                                (0..dh).fold(0, |acc, j| r.add(acc, v[(i * dh + j) * t + row]));
                        }
                    }
                }
            }
        }
        self.done("c2m:s", progress);
        let p = plan
            .softmax(len)
            .run(self.h.party, &RingShares::new(s))
            .await?;
        self.done("softmax", progress);
        // The probabilities in the compact layout: `d_h` blocks per ciphertext, each at its own
        // segment offset; the server spreads them over the segments (`spread_blocks`).
        let combos = nq * blocks;
        let ncompact = combos.div_ceil(dh);
        let z = SlotShares::ZERO;
        let mut re = vec![vec![z; n]; ncompact];
        let mut im = vec![vec![z; n]; ncompact];
        for (u, qc) in plan.qcts.iter().enumerate() {
            for b in 0..blocks {
                let c = u * blocks + b;
                for (i, pr) in qc.pairs.iter().enumerate() {
                    let Some(pr) = pr else { continue };
                    for row in 0..t.min(len - b * t) {
                        let (k, slot) = plan.lay.compact_slot(c, i, row);
                        re[k][slot] = (pr.re * len + b * t + row) as u32;
                        if let Some(h) = pr.im {
                            im[k][slot] = (h * len + b * t + row) as u32;
                        }
                    }
                }
            }
        }
        let pin = SlotShares::gather_all(&p, re, im);
        let pc = self.h.m2c_slots(&plan.m2c[B_VAL], &pin).await?;
        self.done("m2c:p", progress);
        let o_cts = match (pc, self.h.exec(), self.cache.as_ref()) {
            (Some(pc), Some(ex), Some(cache)) => {
                let mut it = spread_blocks(ex, &plan.lay, &pc, combos)?.into_iter();
                let per: Vec<Vec<Ciphertext<B>>> = (0..nq)
                    .map(|_| it.by_ref().take(blocks).collect())
                    .collect();
                Some(cache.values(ex, li, &per, &reads)?)
            }
            _ => None,
        };
        self.done("values", progress);
        let osh = self.c2m(B_VAL, o_cts, nq).await?;
        let mut o = vec![0u64; d];
        for (qc, c) in plan.qcts.iter().zip(&osh) {
            for (i, pr) in qc.pairs.iter().enumerate() {
                let Some(pr) = pr else { continue };
                for j in 0..dh {
                    let at = (i * dh + j) * t;
                    o[pr.re * dh + j] = c.re.as_slice()[at];
                    if let Some(h) = pr.im {
                        o[h * dh + j] = c.im.as_slice()[at];
                    }
                }
            }
        }
        self.done("c2m:o", progress);
        let oc = self
            .m2c_dense(B_OUT, &RingShares::new(o), &plan.o.lay)
            .await?;
        self.done("m2c:o", progress);
        let x = self
            .add_product(
                B_OUT,
                oc,
                plan.o,
                w.map(|w| &w.wo),
                bias.map(|b| &b.o[..]),
                &x,
                ["out", "c2m:y"],
                progress,
            )
            .await?;

        // MLP.
        let m = self.norm(2 * li + 1, &x).await?;
        self.done("norm2", progress);
        let mc = self.m2c_dense(B_UP, &m, &plan.up.lay).await?;
        self.done("m2c:m", progress);
        let u_cts = match w {
            Some(w) => {
                let g = &w.mlp_norm;
                let wf = |r: usize, c: usize| -> f64 {
                    let v = match &w.w_gate {
                        Some(wg) if r < f => wg.get(r, c),
                        Some(_) => w.w_up.get(r - f, c),
                        None => w.w_up.get(r, c),
                    };
                    v * g[c]
                };
                self.dense(B_UP, mc, plan.up, &wf, bias.map(|b| &b.up[..]))?
            }
            None => None,
        };
        self.done("up", progress);
        let ush = self.c2m(B_UP, u_cts, plan.up_cts()).await?;
        let pick_at = |(u, part, s): (usize, usize, usize)| {
            let c = &ush[u];
            if part == 0 {
                c.re.as_slice()[s]
            } else {
                c.im.as_slice()[s]
            }
        };
        self.done("c2m:u", progress);
        let rows = plan.up.rows;
        let g = match cfg.family {
            Family::Llama => {
                let gate: Vec<u64> = (0..f).map(|e| pick_at(rows.home(e))).collect();
                let up: Vec<u64> = (f..2 * f).map(|e| pick_at(rows.home(e))).collect();
                Silu.swiglu(self.h.party, &RingShares::new(gate), &RingShares::new(up))
                    .await?
            }
            Family::Gpt2 => {
                let up: Vec<u64> = (0..f).map(|e| pick_at(rows.home(e))).collect();
                DecodePlan::gelu()
                    .run(self.h.party, &RingShares::new(up))
                    .await?
            }
        };
        self.done("act", progress);
        let gc = self.m2c_dense(B_DOWN, &g, &plan.down.lay).await?;
        self.done("m2c:g", progress);
        let x = self
            .add_product(
                B_DOWN,
                gc,
                plan.down,
                w.map(|w| &w.w_down),
                bias.map(|b| &b.down[..]),
                &x,
                ["down", "c2m:d"],
                progress,
            )
            .await?;
        Ok(x)
    }

    /// The final norm and the LM head; the client alone learns the logits.
    async fn head(
        &mut self,
        x: &RingShares,
        progress: &mut dyn FnMut(&BlockCost),
    ) -> Result<Option<Vec<f64>>, ProtocolError> {
        self.layer = usize::MAX;
        let plan = self.plan;
        let h = self.norm(2 * self.plan.cfg.layers, x).await?;
        self.done("norm-f", progress);
        let hc = self.m2c_dense(B_HEAD, &h, &plan.head.lay).await?;
        self.done("m2c:h", progress);
        let l_cts = match self.h.model() {
            Some(m) => {
                let (hw, g) = (m.w.lm_head(), &m.w.final_norm);
                let wf = |r: usize, c: usize| hw.get(r, c) * g[c];
                self.dense(B_HEAD, hc, plan.head, &wf, m.head_bias.as_deref())?
            }
            None => None,
        };
        self.done("lm-head", progress);
        let l = self.c2m_dense(B_HEAD, l_cts, plan.head.rows).await?;
        self.done("c2m:l", progress);
        let out = self.h.open_to_client(l).await?;
        self.done("head", progress);
        Ok(out)
    }
}
