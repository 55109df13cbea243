//! `veil-bench decoder`: the homomorphic half of one generated token, per layer, on this
//! machine: the `Q`/`K`/`V` projection with RoPE folded at the position, the append to the KV
//! cache held encrypted at the server, the score products, the attention over the cached
//! values, the output projection, the MLP's projections, and the LM head once per token; at
//! the contexts asked for, with random weights at SmolLM2's or GPT2-base's shape (CKKS on the
//! CPU backend, N = 2^15). The queries, keys and values and the probabilities enter as the
//! product's conversions deliver them, compact, and are unpacked as the product unpacks them
//! (`unpack_qkv`, `spread_blocks`; fresh encryptions stand in for the conversions' outputs).
//! The MPC half (norms, softmax, SiLU/GELU) and the conversions are not in it: it counts the
//! ciphertexts each conversion carries instead.

use crate::BenchError;
use serde::Serialize;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, C64};
use veil_core::decoder::cache::{
    head_pairs, kv_map, kv_reads, pair_map, rope_rows, spread_blocks, unpack_qkv, DecodeLayout,
    EncKvCache,
};
use veil_core::decoder::head::{lm_head, matvec, HeadLayout};
use veil_core::decoder::plan::Dense;
use veil_core::packing::{ChannelMap, Mat};
use veil_core::params;
use veil_core::transformer::projection::{project, ProjConfig, ProjGroup};
use veil_core::transformer::{CkksExec, Exec, SymExec};

/// The shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum DecoderShape {
    /// SmolLM2-135M: d = 576, 9 heads over 3 KV heads, FFN 1536 (SwiGLU), vocabulary 49,152.
    Smollm2,
    /// GPT2-base: d = 768, 12 heads, FFN 3072 (GELU), vocabulary 50,257.
    Gpt2Base,
}

impl DecoderShape {
    /// `(d, heads, kv_heads, ffn, vocab, gated)`.
    pub(crate) fn dims(self) -> (usize, usize, usize, usize, usize, bool) {
        match self {
            DecoderShape::Smollm2 => (576, 9, 3, 1536, 49_152, true),
            DecoderShape::Gpt2Base => (768, 12, 12, 3072, 50_257, false),
        }
    }
}

/// Options of `veil-bench decoder`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchDecoderArgs {
    /// The shape.
    #[arg(long, value_enum, default_value_t = DecoderShape::Smollm2)]
    pub shape: DecoderShape,
    /// Contexts (positions in the cache, the new token's included) to time a step at.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256")]
    pub ctx: Vec<usize>,
    /// Worker threads of the CPU backend.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One timed step at one context.
#[derive(Clone, Debug, Serialize)]
pub struct StepTiming {
    /// Positions attended (the new one included).
    pub ctx: usize,
    /// `(block, seconds)` per layer block, and `head` once per token.
    pub blocks: Vec<(String, f64)>,
    /// Sum over one layer's blocks, seconds (the MLP in the attention's row-replicated
    /// layout).
    pub layer_s: f64,
    /// The same with the MLP densely packed (`dense` blocks: one output ciphertext each).
    pub layer_dense_s: f64,
    /// `layers · layer_s + head`, seconds: the homomorphic work of one token.
    pub token_s: f64,
    /// Ciphertexts the conversions of one layer carry (C2M + M2C) at this context.
    pub conversion_cts: usize,
}

/// `veil-bench decoder` output.
#[derive(Clone, Debug, Serialize)]
pub struct DecoderReport {
    /// The shape.
    pub shape: DecoderShape,
    /// The model's layers (the token estimate multiplies one layer by them).
    pub layers: usize,
    /// The parameter set.
    pub params: String,
    /// Positions per cache block (`t = n / d_h`).
    pub block_positions: usize,
    /// Galois keys generated.
    pub galois_keys: usize,
    /// Key generation, seconds.
    pub keygen_s: f64,
    /// One row per context.
    pub steps: Vec<StepTiming>,
}

type Ct = Ciphertext<CpuBackend>;

/// The maps and projection configurations of a decode step.
struct Maps {
    x: ChannelMap,
    q: ChannelMap,
    k: ChannelMap,
    f: ChannelMap,
    qkv: ProjConfig,
    out: ProjConfig,
    up: ProjConfig,
    down: ProjConfig,
}

/// Wall time per block.
struct Lap(Instant, Vec<(String, f64)>);

impl Lap {
    /// Records the time since the last mark under `name`.
    fn tick(&mut self, name: &str) {
        self.1.push((name.into(), self.0.elapsed().as_secs_f64()));
        self.0 = Instant::now();
    }
    /// Restarts the clock (after work that is not timed).
    fn reset(&mut self) {
        self.0 = Instant::now();
    }
}

/// The `Q`/`K`/`V` projection of one step on any executor (the dry run and the timing).
fn projections<E: Exec>(
    ex: &E,
    mp: &Maps,
    x: &[E::Ct],
    w: [&Mat; 3],
) -> Result<[Vec<E::Ct>; 3], veil_core::Error> {
    let [wq, wk, wv] = w;
    let fq = |i: usize, o: usize| C64::real(wq.get(o, i));
    let fk = |i: usize, o: usize| C64::real(wk.get(o, i));
    let fv = |i: usize, o: usize| C64::real(wv.get(o, i));
    let g = [
        ProjGroup {
            out: &mp.q,
            weight: &fq,
            raw: false,
        },
        ProjGroup {
            out: &mp.k,
            weight: &fk,
            raw: false,
        },
        ProjGroup {
            out: &mp.k,
            weight: &fv,
            raw: false,
        },
    ];
    let mut it = project(ex, &mp.qkv, x, &mp.x, &g)?.into_iter();
    let (q, k, v) = (
        it.next().unwrap_or_default(),
        it.next().unwrap_or_default(),
        it.next().unwrap_or_default(),
    );
    Ok([q, k, v])
}

/// A projection with one output group (finalized, not raw).
fn project_one<E: Exec>(
    ex: &E,
    cfg: &ProjConfig,
    x: &[E::Ct],
    in_map: &ChannelMap,
    out: &ChannelMap,
    weight: &dyn Fn(usize, usize) -> C64,
) -> Result<Vec<E::Ct>, veil_core::Error> {
    let g = [ProjGroup {
        out,
        weight,
        raw: false,
    }];
    Ok(project(ex, cfg, x, in_map, &g)?.pop().unwrap_or_default())
}

/// Runs the benchmark.
pub fn run(a: &BenchDecoderArgs) -> Result<DecoderReport, BenchError> {
    let e = |source: veil_core::Error| BenchError::Core {
        step: "bench decoder",
        source,
    };
    let (d, heads, kv_heads, ffn, vocab, gated) = a.shape.dims();
    let layers = match a.shape {
        DecoderShape::Smollm2 => 30,
        DecoderShape::Gpt2Base => 12,
    };
    let dh = d / heads;
    let kv = kv_heads * dh;
    let lit = params::ckks_128_custom(15, 6, 1);
    let p = lit.validate().map_err(e)?;
    let n = p.max_slots();
    let lay = DecodeLayout::new(n, dh).map_err(e)?;
    let t = lay.t();
    let max_ctx = a.ctx.iter().copied().max().unwrap_or(1);
    if a.ctx.is_empty() || a.ctx.contains(&0) {
        return Err(BenchError::InvalidOption {
            option: "--ctx",
            value: format!("{:?}", a.ctx),
            expected: "positive contexts",
        });
    }
    let pairs = head_pairs(heads, kv_heads).map_err(e)?;
    let x_map = ChannelMap::segment_column(d, t, dh, true, |c| c);
    // The MLP's output in the row-replicated layout: gate then up (SwiGLU; 2·ffn channels)
    // or FC1 alone, complex pairs of consecutive blocks.
    let f_out = if gated { 2 * ffn } else { ffn };
    let f_map = ChannelMap::segment_column(f_out, t, dh, true, |c| c);
    let fd_map = ChannelMap::segment_column(ffn, t, dh, true, |c| c);
    let q_map = pair_map(&lay, &pairs).map_err(e)?;
    let k_map = kv_map(&lay, kv_heads).map_err(e)?;
    let mp = Maps {
        // Accumulators: two per paired (complex) output ciphertext, one per real one.
        qkv: ProjConfig::auto(
            t,
            dh,
            n,
            x_map.cts,
            pairs
                .iter()
                .map(|p| 1 + p.im.is_some() as usize)
                .sum::<usize>()
                + 2 * k_map.cts,
        ),
        out: ProjConfig::auto(t, dh, n, q_map.cts, 2 * x_map.cts),
        up: ProjConfig::auto(t, dh, n, x_map.cts, 2 * f_map.cts),
        down: ProjConfig::auto(t, dh, n, fd_map.cts, 2 * x_map.cts),
        x: x_map,
        q: q_map,
        k: k_map,
        f: f_map,
    };
    let head_lay = HeadLayout::new(n, d, vocab).map_err(e)?;
    // The MLP densely packed as the decode plan packs it (`decoder::plan::Dense`): each
    // product's input in blocks of the least period that holds its rows (gate and up as real
    // and imaginary parts for SwiGLU), then the down projection from the FFN's width.
    let dense_up = Dense::new(n, d, ffn, gated).map_err(e)?;
    let dense_down = Dense::new(n, ffn, d, false).map_err(e)?;
    let up_rows = move |u: usize, s: usize| dense_up.rows.at(u, s);
    let down_rows = move |u: usize, s: usize| dense_down.rows.at(u, s);
    // Levels: the input of the attention at 4 (projection 3, cache 2, scores 1), the
    // probabilities and the MLP inputs at 3 and 2, the head's input at 1.
    let (lx, lp, lm, lh) = (4usize, 3usize, 2usize, 1usize);

    let mut seed = 0x5eed_u64;
    let mut rnd = |rows: usize, cols: usize, s: f64| {
        let data = (0..rows * cols)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                ((seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * s
            })
            .collect();
        Mat { rows, cols, data }
    };
    let ws = 1.0 / (d as f64).sqrt();
    let (wq, wk, wv, wo) = (rnd(d, d, ws), rnd(kv, d, ws), rnd(kv, d, ws), rnd(d, d, ws));
    let w_up = rnd(f_out, d, ws);
    let w_down = rnd(d, ffn, 1.0 / (ffn as f64).sqrt());
    let w_head = rnd(vocab, d, ws);
    let fu_dense = |r: usize, c: usize| w_up.get(r, c);
    let fd_dense = |r: usize, c: usize| w_down.get(r, c);

    // Dry run of every block: the Galois keys.
    let dry = SymExec::new(n);
    {
        let x: Vec<_> = (0..mp.x.cts).map(|_| dry.fresh(lx)).collect();
        let [q, k, v] = projections(&dry, &mp, &x, [&wq, &wk, &wv]).map_err(e)?;
        let qkv_items = (q.len(), k.len() + v.len());
        let compact: Vec<_> = (0..(qkv_items.0 + qkv_items.1).div_ceil(t))
            .map(|_| dry.fresh(lx))
            .collect();
        // Every row a key or value can land in: every shift the unpacking can take.
        let mut c = EncKvCache::new(lay, 1, kv_heads, max_ctx).map_err(e)?;
        let mut q = Vec::new();
        for r0 in 0..t.min(max_ctx) {
            let (qu, rows) =
                unpack_qkv(&dry, &lay, &compact, qkv_items.0, qkv_items.1 / 2, r0).map_err(e)?;
            c.append_rows(&dry, 0, rows).map_err(e)?;
            q = qu;
        }
        c.scores(&dry, 0, &q, &kv_reads(&pairs)).map_err(e)?;
        let combos = pairs.len() * lay.blocks(max_ctx);
        let pc: Vec<_> = (0..combos.div_ceil(dh))
            .map(|_| dry.fresh(lp + 1))
            .collect();
        let mut it = spread_blocks(&dry, &lay, &pc, combos)
            .map_err(e)?
            .into_iter();
        let nbm = lay.blocks(max_ctx);
        let pr: Vec<Vec<_>> = pairs
            .iter()
            .map(|_| it.by_ref().take(nbm).collect())
            .collect();
        let o = c.values(&dry, 0, &pr, &kv_reads(&pairs)).map_err(e)?;
        let z = |_: usize, _: usize| C64::default();
        project_one(&dry, &mp.out, &o, &mp.q, &mp.x, &z).map_err(e)?;
        let xm: Vec<_> = (0..mp.x.cts).map(|_| dry.fresh(lm)).collect();
        project_one(&dry, &mp.up, &xm, &mp.x, &mp.f, &z).map_err(e)?;
        let fm: Vec<_> = (0..fd_map.cts).map(|_| dry.fresh(lm)).collect();
        project_one(&dry, &mp.down, &fm, &fd_map, &mp.x, &z).map_err(e)?;
        let wz = |_: usize, _: usize| 0.0;
        lm_head(&dry, &head_lay, &dry.fresh(lh), &wz).map_err(e)?;
        matvec(
            &dry,
            &dense_up.lay,
            &dry.fresh(lm),
            dense_up.rows.cts(),
            &up_rows,
            &wz,
        )
        .map_err(e)?;
        matvec(
            &dry,
            &dense_down.lay,
            &dry.fresh(lm),
            dense_down.rows.cts(),
            &down_rows,
            &wz,
        )
        .map_err(e)?;
    }
    let rots = dry.rotations_used();
    let crate::CpuKeys {
        ck,
        sk,
        keys,
        mut rng,
        keygen_s,
    } = crate::cpu_keys(&p, a.threads, &rots, "bench decoder")?;
    let ex = CkksExec::new(&ck, &keys, n);
    let enc = |v: &[C64], level: usize, rng: &mut veil_host::SecretRng| -> Result<Ct, BenchError> {
        let pt = ck.encode(v, n, level, p.default_scale()).map_err(e)?;
        ck.encrypt_sk(&sk, &pt, rng).map_err(e)
    };
    let ones = vec![C64::real(0.5); n];
    // A filler key/value for the positions before a timed step (its values do not matter).
    let filler = enc(&ones, lx - 1, &mut rng)?;

    let mut cache = EncKvCache::new(lay, 1, kv_heads, max_ctx).map_err(e)?;
    let mut ctxs = a.ctx.clone();
    ctxs.sort_unstable();
    ctxs.dedup();
    let mut steps = Vec::new();
    for &ctx in &ctxs {
        while cache.len(0) + 1 < ctx {
            let copies = || {
                (0..kv_heads)
                    .map(|_| ex.clone_ct(&filler))
                    .collect::<Vec<Ct>>()
            };
            cache.append(&ex, 0, copies(), copies()).map_err(e)?;
        }
        let pos = ctx - 1;
        let xc: Vec<Ct> = (0..mp.x.cts)
            .map(|_| enc(&ones, lx, &mut rng))
            .collect::<Result<_, _>>()?;
        let mut lap = Lap(Instant::now(), Vec::new());
        // RoPE folded at the position (SmolLM2); GPT-2's learned positions enter with the
        // embedding, so its weights are used as they are (1/√d_h folded into W_q either way).
        let inv = 1.0 / (dh as f64).sqrt();
        let (wq_p, wk_p) = if a.shape == DecoderShape::Smollm2 {
            let q = rope_rows(&wq, pos, dh, 1e5, inv).map_err(e)?;
            (q, rope_rows(&wk, pos, dh, 1e5, 1.0).map_err(e)?)
        } else {
            let q = Mat::from_fn(wq.rows, wq.cols, |r, c| wq.get(r, c) * inv);
            (q, wk.clone())
        };
        lap.tick(if gated { "rope fold" } else { "scale W_q" });
        let [q, k, v] = projections(&ex, &mp, &xc, [&wq_p, &wk_p, &wv]).map_err(e)?;
        lap.tick("qkv");
        // The product converts q, k and v to shares and back in the compact layout (`t` items
        // per ciphertext); fresh encryptions at the projection's input level stand in for
        // that conversion's output.
        let (nq, nkv) = (q.len(), k.len() + v.len());
        drop((q, k, v));
        let compact: Vec<Ct> = (0..(nq + nkv).div_ceil(t))
            .map(|_| enc(&ones, lx, &mut rng))
            .collect::<Result<_, _>>()?;
        lap.reset();
        let (q, rows) = unpack_qkv(&ex, &lay, &compact, nq, nkv / 2, pos % t).map_err(e)?;
        cache.append_rows(&ex, 0, rows).map_err(e)?;
        lap.tick("unpack+append");
        let s = cache.scores(&ex, 0, &q, &kv_reads(&pairs)).map_err(e)?;
        lap.tick("scores");
        // The probabilities, compact (`d_h` blocks per ciphertext), spread as the product
        // spreads them.
        let nb = lay.blocks(ctx);
        let combos = pairs.len() * nb;
        let pc: Vec<Ct> = (0..combos.div_ceil(dh))
            .map(|_| enc(&ones, lp + 1, &mut rng))
            .collect::<Result<_, _>>()?;
        lap.reset();
        let mut it = spread_blocks(&ex, &lay, &pc, combos)
            .map_err(e)?
            .into_iter();
        let pr: Vec<Vec<Ct>> = pairs
            .iter()
            .map(|_| it.by_ref().take(nb).collect())
            .collect();
        lap.tick("spread");
        let o = cache.values(&ex, 0, &pr, &kv_reads(&pairs)).map_err(e)?;
        lap.tick("values");
        let conv_qkv = (nq + nkv, (nq + nkv).div_ceil(t));
        let fo = |i: usize, o: usize| C64::real(wo.get(o, i));
        project_one(&ex, &mp.out, &o, &mp.q, &mp.x, &fo).map_err(e)?;
        lap.tick("out proj");
        let xm: Vec<Ct> = (0..mp.x.cts)
            .map(|_| enc(&ones, lm, &mut rng))
            .collect::<Result<_, _>>()?;
        let fm: Vec<Ct> = (0..fd_map.cts)
            .map(|_| enc(&ones, lm, &mut rng))
            .collect::<Result<_, _>>()?;
        let hc = enc(&head_lay.input(&vec![0.5; d]), lh, &mut rng)?;
        lap.reset();
        let fu = |i: usize, o: usize| C64::real(w_up.get(o, i));
        project_one(&ex, &mp.up, &xm, &mp.x, &mp.f, &fu).map_err(e)?;
        lap.tick(if gated { "gate+up" } else { "fc1" });
        let fdn = |i: usize, o: usize| C64::real(w_down.get(o, i));
        project_one(&ex, &mp.down, &fm, &fd_map, &mp.x, &fdn).map_err(e)?;
        lap.tick(if gated { "down" } else { "fc2" });
        let xd = enc(&dense_up.lay.input(&vec![0.5; d]), lm, &mut rng)?;
        let fdense = enc(&dense_down.lay.input(&vec![0.5; ffn]), lm, &mut rng)?;
        lap.reset();
        matvec(
            &ex,
            &dense_up.lay,
            &xd,
            dense_up.rows.cts(),
            &up_rows,
            &fu_dense,
        )
        .map_err(e)?;
        lap.tick(if gated { "gate+up dense" } else { "fc1 dense" });
        matvec(
            &ex,
            &dense_down.lay,
            &fdense,
            dense_down.rows.cts(),
            &down_rows,
            &fd_dense,
        )
        .map_err(e)?;
        lap.tick(if gated { "down dense" } else { "fc2 dense" });
        let wh = |r: usize, c: usize| w_head.get(r, c);
        lm_head(&ex, &head_lay, &hc, &wh).map_err(e)?;
        lap.tick("head");
        let blocks = lap.1;
        drop(s);
        let is_dense = |b: &str| b.ends_with(" dense");
        let is_mlp = |b: &str| ["gate+up", "down", "fc1", "fc2"].contains(&b);
        let layer_s: f64 = blocks
            .iter()
            .filter(|b| b.0 != "head" && !is_dense(&b.0))
            .map(|b| b.1)
            .sum();
        let layer_dense_s: f64 = blocks
            .iter()
            .filter(|b| b.0 != "head" && !is_mlp(&b.0))
            .map(|b| b.1)
            .sum();
        let head_s = blocks.iter().find(|b| b.0 == "head").map_or(0.0, |b| b.1);
        // C2M: q/k/v, scores (pairs·blocks), the attention output, the MLP's first and
        // second projections; M2C: the attention input, q/k/v compact, the probabilities
        // (compact, `d_h` blocks per ciphertext), the MLP's two inputs.
        let conversion_cts = conv_qkv.0
            + conv_qkv.1
            + pairs.len() * nb
            + mp.x.cts
            + mp.f.cts
            + mp.x.cts
            + mp.x.cts
            + (pairs.len() * nb).div_ceil(dh)
            + mp.x.cts
            + fd_map.cts;
        steps.push(StepTiming {
            ctx,
            blocks,
            layer_s,
            layer_dense_s,
            token_s: layers as f64 * layer_s + head_s,
            conversion_cts,
        });
    }
    Ok(DecoderReport {
        shape: a.shape,
        layers,
        params: p.name().to_string(),
        block_positions: t,
        galois_keys: rots.len(),
        keygen_s,
        steps,
    })
}

/// The report as a table.
pub fn render(r: &DecoderReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "decode step, homomorphic half ({:?}, {} layers, {}, {} positions per cache block; {} \
         Galois keys in {:.1} s)",
        r.shape, r.layers, r.params, r.block_positions, r.galois_keys, r.keygen_s
    );
    for st in &r.steps {
        let _ = writeln!(
            s,
            "ctx {:>4}: one layer {:.3} s ({:.3} s with the dense MLP), token {:.1} s, {} \
             ciphertexts converted per layer",
            st.ctx, st.layer_s, st.layer_dense_s, st.token_s, st.conversion_cts
        );
        for (b, t) in &st.blocks {
            let _ = writeln!(s, "    {b:<10} {:>8.1} ms", t * 1e3);
        }
    }
    s
}
