//! The decoder's homomorphic kernels in real CKKS against `f64`: the LM head
//! (`veil_core::decoder::head`) and the decode-time attention over an encrypted KV cache
//! (`veil_core::decoder::cache`), the latter against the decoder reference: grouped-query heads read a cache of KV heads only,
//! RoPE is folded into the projection weights at each public position, the cache crosses a
//! block boundary, and the output projection reads the kernel's output layout directly.
//!
//! The softmax, which runs in MPC in the product, is computed here in `f64` on the decrypted
//! scores: these tests check the homomorphic half of a decode step.

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, Ckks, SecretKey, C64};
use veil_core::decoder::cache::{
    head_pairs, kv_map, kv_reads, pair_map, rope_rows, spread_blocks, unpack_qkv, DecodeLayout,
    EncKvCache, HeadPair,
};
use veil_core::decoder::head::{lm_head, matvec, DenseLayout, HeadLayout};
use veil_core::decoder::reference::{linear, rope};
use veil_core::packing::{ChannelMap, Mat};
use veil_core::params;
use veil_core::transformer::projection::{project, ProjConfig, ProjGroup};
use veil_core::transformer::{CkksExec, Exec, SymExec};
use veil_tests::*;

type Be = CpuBackend;

/// The MPC half of a step, simulated: score blocks in, probability blocks out.
type Softmax<'a, C> = dyn FnMut(&[Vec<C>]) -> Vec<Vec<C>> + 'a;

struct Env {
    ck: Ckks<Be>,
    sk: SecretKey,
    top: usize,
}

fn env() -> Env {
    let p = params::insecure_logn12().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let sk = ck.gen_secret_key(&mut test_rng(11));
    Env {
        top: p.max_level(),
        ck,
        sk,
    }
}

fn enc(e: &Env, v: &[C64], rng: &mut impl rand_core::RngCore) -> Ciphertext<Be> {
    let n = e.ck.params().max_slots();
    let pt =
        e.ck.encode(v, n, e.top, e.ck.params().default_scale())
            .unwrap();
    e.ck.encrypt_sk(&e.sk, &pt, &mut test_rng(rng.next_u64()))
        .unwrap()
}

fn dec(e: &Env, c: &Ciphertext<Be>) -> Vec<C64> {
    e.ck.decrypt_decode(&e.sk, c).unwrap()
}

fn uniform(rng: &mut impl rand_core::RngCore, n: usize, b: f64) -> Vec<f64> {
    random_values(rng, n, b).into_iter().map(|z| z.re).collect()
}

fn softmax(s: &[f64]) -> Vec<f64> {
    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = e.iter().sum();
    e.iter().map(|x| x / z).collect()
}

/// The heads `h` (real part) and `h'` (imaginary part) of a pair, each `d_h` values.
fn pair_parts<'a>(p: &HeadPair, q: &'a [f64], dh: usize) -> (&'a [f64], Option<&'a [f64]>) {
    (
        &q[p.re * dh..(p.re + 1) * dh],
        p.im.map(|h| &q[h * dh..(h + 1) * dh]),
    )
}

/// Keys, values and queries encrypted directly (the projection's output layout), many
/// positions across a block boundary: scores and attention outputs of every head against the
/// plain products.
#[test]
fn cache_scores_and_values_match_f64_across_blocks() {
    let e = env();
    let n = e.ck.params().max_slots();
    let (heads, kv_heads, dh) = (6, 2, 32);
    let lay = DecodeLayout::new(n, dh).unwrap();
    let t = lay.t();
    let pairs = head_pairs(heads, kv_heads).unwrap();
    let positions = t + 5; // two blocks
    let mut rng = test_rng(3);
    let keys_plain: Vec<Vec<f64>> = (0..positions)
        .map(|_| uniform(&mut rng, kv_heads * dh, 1.0))
        .collect();
    let vals_plain: Vec<Vec<f64>> = (0..positions)
        .map(|_| uniform(&mut rng, kv_heads * dh, 1.0))
        .collect();

    // Rotation keys from a dry run of the same calls.
    let dry = SymExec::new(n);
    {
        let mut c = EncKvCache::new(lay, 1, kv_heads, positions).unwrap();
        let f = |_: usize| dry.fresh(e.top);
        c.append(
            &dry,
            0,
            (0..kv_heads).map(f).collect(),
            (0..kv_heads).map(f).collect(),
        )
        .unwrap();
        let p: Vec<Vec<_>> = pairs.iter().map(|_| vec![dry.fresh(e.top)]).collect();
        c.values(&dry, 0, &p, &kv_reads(&pairs)).unwrap();
    }
    let keys =
        e.ck.gen_evaluation_keys(&e.sk, &dry.rotations_used(), true, &mut rng, |_, _| {})
            .unwrap();
    let ex = CkksExec::new(&e.ck, &keys, n);

    let mut cache = EncKvCache::new(lay, 1, kv_heads, positions).unwrap();
    for (k, v) in keys_plain.iter().zip(&vals_plain) {
        let row = |x: &[f64], g: usize| lay.replicated(&x[g * dh..(g + 1) * dh], None);
        let kc = (0..kv_heads)
            .map(|g| enc(&e, &row(k, g), &mut rng))
            .collect();
        let vc = (0..kv_heads)
            .map(|g| enc(&e, &row(v, g), &mut rng))
            .collect();
        cache.append(&ex, 0, kc, vc).unwrap();
    }
    assert_eq!(cache.ciphertexts(), 2 * kv_heads * 2);
    assert_eq!(cache.level(), Some(e.top - 1));

    let q = uniform(&mut rng, heads * dh, 1.0 / (dh as f64).sqrt());
    let qc: Vec<_> = pairs
        .iter()
        .map(|p| {
            let (re, im) = pair_parts(p, &q, dh);
            enc(&e, &lay.replicated(re, im), &mut rng)
        })
        .collect();
    let s = cache.scores(&ex, 0, &qc, &kv_reads(&pairs)).unwrap();
    let mut worst_s: f64 = 0.0;
    let mut probs = vec![vec![0.0; positions]; heads];
    for (i, p) in pairs.iter().enumerate() {
        let mut got: Vec<C64> = Vec::new();
        for b in &s[i] {
            got.extend(lay.fold_scores(&dec(&e, b)));
        }
        for (h, part) in [(Some(p.re), 0), (p.im, 1)] {
            let Some(h) = h else { continue };
            let want: Vec<f64> = (0..positions)
                .map(|pos| {
                    (0..dh)
                        .map(|j| q[h * dh + j] * keys_plain[pos][p.kv * dh + j])
                        .sum()
                })
                .collect();
            for pos in 0..positions {
                let g = if part == 0 { got[pos].re } else { got[pos].im };
                worst_s = worst_s.max((g - want[pos]).abs());
            }
            // Rows past the cache's length fold to zero.
            assert!(got[positions..]
                .iter()
                .all(|z| z.re.abs() < 1e-3 && z.im.abs() < 1e-3));
            probs[h] = softmax(&want);
        }
    }
    println!("scores: worst |err| {worst_s:.2e}");
    assert!(worst_s < 1e-6, "scores off by {worst_s}");

    let blocks = lay.blocks(positions);
    let pc: Vec<Vec<_>> = pairs
        .iter()
        .map(|p| {
            (0..blocks)
                .map(|b| {
                    let range = b * t..((b + 1) * t).min(positions);
                    let re = &probs[p.re][range.clone()];
                    let im = p.im.map(|h| &probs[h][range.clone()]);
                    enc(&e, &lay.rows(re, im), &mut rng)
                })
                .collect()
        })
        .collect();
    let o = cache.values(&ex, 0, &pc, &kv_reads(&pairs)).unwrap();
    let mut worst_o: f64 = 0.0;
    for (i, p) in pairs.iter().enumerate() {
        let got = lay.read_values(&dec(&e, &o[i]));
        for (h, part) in [(Some(p.re), 0), (p.im, 1)] {
            let Some(h) = h else { continue };
            for j in 0..dh {
                let want: f64 = (0..positions)
                    .map(|pos| probs[h][pos] * vals_plain[pos][p.kv * dh + j])
                    .sum();
                let g = if part == 0 { got[j].re } else { got[j].im };
                worst_o = worst_o.max((g - want).abs());
            }
        }
    }
    println!("values: worst |err| {worst_o:.2e}");
    assert!(worst_o < 1e-6, "attention outputs off by {worst_o}");
}

/// Three decode steps of one attention layer from an empty cache, all homomorphic but the
/// softmax: the input row (replicated) → the `Q`, `K`, `V` projections with RoPE folded at
/// the step's position and `1/√d_h` in `Q` → append → scores → (softmax) → values → the
/// output projection, against the `f64` reference's attention (RoPE, grouped-query heads,
/// causal over the cache).
#[test]
fn three_decode_steps_with_rope_gqa_and_output_projection_match_f64() {
    let e = env();
    let n = e.ck.params().max_slots();
    let (heads, kv_heads, dh) = (4, 2, 16);
    let d = heads * dh;
    let kv = kv_heads * dh;
    let base = 10_000.0;
    let lay = DecodeLayout::new(n, dh).unwrap();
    let t = lay.t();
    let pairs = head_pairs(heads, kv_heads).unwrap();
    let mut rng = test_rng(5);
    let ws = 1.0 / (d as f64).sqrt();
    let mk = |rng: &mut _, r: usize, c: usize| Mat {
        rows: r,
        cols: c,
        data: uniform(rng, r * c, 2.0 * ws),
    };
    // Linear layout (out × in).
    let (wq, wk, wv, wo) = (
        mk(&mut rng, d, d),
        mk(&mut rng, kv, d),
        mk(&mut rng, kv, d),
        mk(&mut rng, d, d),
    );
    let xs: Vec<Vec<f64>> = (0..3).map(|_| uniform(&mut rng, d, 1.0)).collect();

    // Maps: the input row (complex pairs of head-wide blocks), the query pairs, the KV heads,
    // and the output projection's output (like the input).
    let x_map = ChannelMap::segment_column(d, t, dh, true, |p| p);
    let q_map = pair_map(&lay, &pairs).unwrap();
    let k_map = kv_map(&lay, kv_heads).unwrap();
    let cfg_in = ProjConfig::auto(t, dh, n, x_map.cts, q_map.cts + 2 * k_map.cts);
    let cfg_out = ProjConfig::auto(t, dh, n, q_map.cts, x_map.cts);

    // One step on any executor; returns the attention output ciphertexts (x-map layout).
    fn step<E: Exec>(
        ex: &E,
        cache: &mut EncKvCache<E::Ct>,
        x: &[E::Ct],
        ms: (&ChannelMap, &ChannelMap, &ChannelMap),
        cfgs: (&ProjConfig, &ProjConfig),
        w: (&Mat, &Mat, &Mat, &Mat),
        pairs: &[HeadPair],
        softmax_then_encrypt: &mut Softmax<'_, E::Ct>,
    ) -> Vec<E::Ct> {
        let (x_map, q_map, k_map) = ms;
        let (wq, wk, wv, wo) = w;
        let fq = |i: usize, o: usize| C64::real(wq.get(o, i));
        let fk = |i: usize, o: usize| C64::real(wk.get(o, i));
        let fv = |i: usize, o: usize| C64::real(wv.get(o, i));
        let groups = [
            ProjGroup {
                out: q_map,
                weight: &fq,
                raw: false,
            },
            ProjGroup {
                out: k_map,
                weight: &fk,
                raw: false,
            },
            ProjGroup {
                out: k_map,
                weight: &fv,
                raw: false,
            },
        ];
        let mut out = project(ex, cfgs.0, x, x_map, &groups).unwrap().into_iter();
        let (q, k, v) = (
            out.next().unwrap(),
            out.next().unwrap(),
            out.next().unwrap(),
        );
        cache.append(ex, 0, k, v).unwrap();
        let s = cache.scores(ex, 0, &q, &kv_reads(pairs)).unwrap();
        let p = softmax_then_encrypt(&s);
        let o = cache.values(ex, 0, &p, &kv_reads(pairs)).unwrap();
        let fo = |i: usize, o: usize| C64::real(wo.get(o, i));
        let g = [ProjGroup {
            out: x_map,
            weight: &fo,
            raw: false,
        }];
        project(ex, cfgs.1, &o, q_map, &g).unwrap().pop().unwrap()
    }

    // Dry run for the rotation keys.
    let dry = SymExec::new(n);
    {
        let mut c = EncKvCache::new(lay, 1, kv_heads, 3).unwrap();
        let x: Vec<_> = (0..x_map.cts).map(|_| dry.fresh(e.top)).collect();
        let z = Mat::zeros(d, d);
        let zk = Mat::zeros(kv, d);
        let mut sm = |s: &[Vec<_>]| -> Vec<Vec<_>> {
            s.iter()
                .map(|b| b.iter().map(|_| dry.fresh(e.top)).collect())
                .collect()
        };
        step(
            &dry,
            &mut c,
            &x,
            (&x_map, &q_map, &k_map),
            (&cfg_in, &cfg_out),
            (&z, &zk, &zk, &z),
            &pairs,
            &mut sm,
        );
    }
    let keys =
        e.ck.gen_evaluation_keys(&e.sk, &dry.rotations_used(), true, &mut rng, |_, _| {})
            .unwrap();
    let ex = CkksExec::new(&e.ck, &keys, n);

    // The f64 reference: keys and values of every past position, RoPE'd.
    let mut ref_k: Vec<Vec<f64>> = Vec::new();
    let mut ref_v: Vec<Vec<f64>> = Vec::new();
    let mut cache = EncKvCache::new(lay, 1, kv_heads, 3).unwrap();
    let mut worst: f64 = 0.0;
    for (pos, x) in xs.iter().enumerate() {
        let mut q = linear(&wq, x);
        let mut k = linear(&wk, x);
        rope(&mut q, pos, dh, base);
        rope(&mut k, pos, dh, base);
        ref_k.push(k);
        ref_v.push(linear(&wv, x));
        let r = heads / kv_heads;
        let mut att = vec![0.0; d];
        for h in 0..heads {
            let g = h / r;
            let sc: Vec<f64> = ref_k
                .iter()
                .map(|k| {
                    (0..dh).map(|j| q[h * dh + j] * k[g * dh + j]).sum::<f64>() / (dh as f64).sqrt()
                })
                .collect();
            let p = softmax(&sc);
            for j in 0..dh {
                att[h * dh + j] = p.iter().zip(&ref_v).map(|(p, v)| p * v[g * dh + j]).sum();
            }
        }
        let want = linear(&wo, &att);

        // Private: the replicated input row, RoPE folded into W_q (with 1/√d_h) and W_k.
        let xm = Mat::from_fn(t, d, |_, c| x[c]);
        let xc: Vec<_> = x_map
            .pack(&xm, n)
            .iter()
            .map(|v| enc(&e, v, &mut rng))
            .collect();
        let wq_p = rope_rows(&wq, pos, dh, base, 1.0 / (dh as f64).sqrt()).unwrap();
        let wk_p = rope_rows(&wk, pos, dh, base, 1.0).unwrap();
        let len = pos + 1;
        let mut sm = |s: &[Vec<Ciphertext<Be>>]| -> Vec<Vec<Ciphertext<Be>>> {
            pairs
                .iter()
                .zip(s)
                .map(|(p, blocks)| {
                    let sc: Vec<C64> = blocks
                        .iter()
                        .flat_map(|b| lay.fold_scores(&dec(&e, b)))
                        .take(len)
                        .collect();
                    let pr: Vec<f64> = softmax(&sc.iter().map(|z| z.re).collect::<Vec<_>>());
                    let pi: Vec<f64> = softmax(&sc.iter().map(|z| z.im).collect::<Vec<_>>());
                    let im = p.im.map(|_| &pi[..]);
                    vec![enc(&e, &lay.rows(&pr, im), &mut test_rng(len as u64))]
                })
                .collect()
        };
        let y = step(
            &ex,
            &mut cache,
            &xc,
            (&x_map, &q_map, &k_map),
            (&cfg_in, &cfg_out),
            (&wq_p, &wk_p, &wv, &wo),
            &pairs,
            &mut sm,
        );
        let dy: Vec<Vec<C64>> = y.iter().map(|c| dec(&e, c)).collect();
        let got = x_map.unpack(&dy, d);
        for c in 0..d {
            worst = worst.max((got.get(0, c) - want[c]).abs());
        }
        println!("step {pos}: worst |err| so far {worst:.2e}");
    }
    assert_eq!(cache.len(0), 3);
    assert!(worst < 1e-6, "decode attention off by {worst}");
}

/// The LM head on a replicated hidden state: a vocabulary of three output blocks (two
/// ciphertexts, the second half empty) against `W·h`.
#[test]
fn lm_head_matches_f64() {
    let e = env();
    let n = e.ck.params().max_slots();
    let (d, vocab) = (40, 2 * n + 900);
    let lay = HeadLayout::new(n, d, vocab).unwrap();
    assert_eq!(lay.cts(), 2);
    let mut rng = test_rng(8);
    let w = Mat {
        rows: vocab,
        cols: d,
        data: uniform(&mut rng, vocab * d, 0.2),
    };
    let h = uniform(&mut rng, d, 1.0);
    let wf = |r: usize, c: usize| w.get(r, c);
    let dry = SymExec::new(n);
    lm_head(&dry, &lay, &dry.fresh(e.top), &wf).unwrap();
    let keys =
        e.ck.gen_evaluation_keys(&e.sk, &dry.rotations_used(), false, &mut rng, |_, _| {})
            .unwrap();
    let ex = CkksExec::new(&e.ck, &keys, n);
    let hc = enc(&e, &lay.input(&h), &mut rng);
    let out = lm_head(&ex, &lay, &hc, &wf).unwrap();
    let got = lay.logits(&out.iter().map(|c| dec(&e, c)).collect::<Vec<_>>());
    let want = linear(&w, &h);
    let worst = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!("LM head ({vocab} × {d}): worst |err| {worst:.2e}");
    assert!(worst < 1e-6, "logits off by {worst}");
}

/// One token's SwiGLU inputs densely packed: `gate = W_g·x` in the real parts and `up = W_u·x`
/// in the imaginary parts of one ciphertext (the row map of `veil-bench decoder`), against `f64`.
#[test]
fn dense_gate_and_up_in_one_ciphertext_match_f64() {
    let e = env();
    let n = e.ck.params().max_slots();
    let (d, ffn) = (40, 300);
    let lay = DenseLayout::new(n, d).unwrap();
    let mut rng = test_rng(9);
    let w = Mat {
        rows: 2 * ffn,
        cols: d,
        data: uniform(&mut rng, 2 * ffn * d, 0.2),
    };
    let x = uniform(&mut rng, d, 1.0);
    let wf = |r: usize, c: usize| w.get(r, c);
    let rows = |_: usize, s: usize| -> (Option<usize>, Option<usize>) {
        if s < ffn {
            (Some(s), Some(ffn + s))
        } else {
            (None, None)
        }
    };
    let dry = SymExec::new(n);
    matvec(&dry, &lay, &dry.fresh(e.top), 1, &rows, &wf).unwrap();
    let keys =
        e.ck.gen_evaluation_keys(&e.sk, &dry.rotations_used(), false, &mut rng, |_, _| {})
            .unwrap();
    let ex = CkksExec::new(&e.ck, &keys, n);
    let xc = enc(&e, &lay.input(&x), &mut rng);
    let out = matvec(&ex, &lay, &xc, 1, &rows, &wf).unwrap();
    let got = dec(&e, &out[0]);
    let want = linear(&w, &x);
    let mut worst: f64 = 0.0;
    for s in 0..ffn {
        worst = worst.max((got[s].re - want[s]).abs());
        worst = worst.max((got[s].im - want[ffn + s]).abs());
    }
    // Slots past the rows hold nothing.
    assert!(got[ffn..]
        .iter()
        .all(|z| z.re.abs() < 1e-6 && z.im.abs() < 1e-6));
    println!("dense gate+up ({ffn} + {ffn} × {d}): worst |err| {worst:.2e}");
    assert!(worst < 1e-6, "off by {worst}");
}

/// A short output by the staggered packing (`DenseLayout::with_period`): 48 rows of a
/// 300-wide product, at period 32 (32 rows in the real parts, 16 in the imaginary parts) and at
/// period 128 (all in the real parts), from `w = 512·P/n` diagonals and a sum over the `n/P`
/// windows, against `f64`.
#[test]
fn a_short_dense_product_by_the_staggered_packing_matches_f64() {
    let e = env();
    let n = e.ck.params().max_slots();
    let (d, out) = (300, 48);
    let mut rng = test_rng(10);
    let w = Mat {
        rows: out,
        cols: d,
        data: uniform(&mut rng, out * d, 0.1),
    };
    let x = uniform(&mut rng, d, 1.0);
    let wf = |r: usize, c: usize| w.get(r, c);
    let want = linear(&w, &x);
    for period in [32, 128] {
        let lay = DenseLayout::with_period(n, d, period).unwrap();
        let rows = |_: usize, s: usize| {
            (
                Some(s).filter(|&r| r < out),
                Some(period + s).filter(|&r| r < out),
            )
        };
        let dry = SymExec::new(n);
        matvec(&dry, &lay, &dry.fresh(e.top), 1, &rows, &wf).unwrap();
        assert_eq!(dry.counts().pt_mults, lay.diagonals() as u64);
        let keys =
            e.ck.gen_evaluation_keys(&e.sk, &dry.rotations_used(), false, &mut rng, |_, _| {})
                .unwrap();
        let ex = CkksExec::new(&e.ck, &keys, n);
        let xc = enc(&e, &lay.input(&x), &mut rng);
        let y = matvec(&ex, &lay, &xc, 1, &rows, &wf).unwrap();
        let got = dec(&e, &y[0]);
        let mut worst: f64 = 0.0;
        for s in 0..period {
            let (re, im) = rows(0, s);
            worst = worst.max((got[s].re - re.map_or(0.0, |r| want[r])).abs());
            worst = worst.max((got[s].im - im.map_or(0.0, |r| want[r])).abs());
        }
        println!(
            "staggered product ({out} × {d}, period {period}, {} diagonals): worst |err| {worst:.2e}",
            lay.diagonals()
        );
        assert!(worst < 1e-6, "period {period}: off by {worst}");
    }
}

/// The probabilities' compact layout, spread by the server: blocks packed `d_h` to a ciphertext
/// at their segment offsets ([`DecodeLayout::compact_slot`]) come out of [`spread_blocks`] as
/// [`DecodeLayout::rows_grouped`] would have laid them (every row replicated over its group's
/// segments, each group its own rows), for one and for several head groups, more blocks than
/// one compact ciphertext holds included; one level down, with the dry run's rotations.
#[test]
fn compact_probability_blocks_spread_to_the_replicated_layout() {
    let e = env();
    let n = e.ck.params().max_slots();
    let mut rng = test_rng(12);
    for (dh, groups, blocks) in [(16usize, 1usize, 5usize), (8, 4, 11), (16, 2, 3)] {
        let lay = DecodeLayout::grouped(n, dh, groups).unwrap();
        let t = lay.t();
        // Block c, group i, row r: re and im parts.
        let vals: Vec<Vec<(Vec<f64>, Vec<f64>)>> = (0..blocks)
            .map(|_| {
                (0..groups)
                    .map(|_| (uniform(&mut rng, t, 1.0), uniform(&mut rng, t, 1.0)))
                    .collect()
            })
            .collect();
        let mut compact = vec![vec![C64::default(); n]; blocks.div_ceil(dh)];
        for (c, per) in vals.iter().enumerate() {
            for (i, (re, im)) in per.iter().enumerate() {
                for r in 0..t {
                    let (k, slot) = lay.compact_slot(c, i, r);
                    assert_eq!(compact[k][slot], C64::default(), "slot {slot} used twice");
                    compact[k][slot] = C64::new(re[r], im[r]);
                }
            }
        }
        let dry = SymExec::new(n);
        let fresh: Vec<_> = compact.iter().map(|_| dry.fresh(e.top)).collect();
        spread_blocks(&dry, &lay, &fresh, blocks).unwrap();
        let keys =
            e.ck.gen_evaluation_keys(&e.sk, &dry.rotations_used(), false, &mut rng, |_, _| {})
                .unwrap();
        let ex = CkksExec::new(&e.ck, &keys, n);
        let cts: Vec<_> = compact.iter().map(|v| enc(&e, v, &mut rng)).collect();
        let out = spread_blocks(&ex, &lay, &cts, blocks).unwrap();
        assert_eq!(out.len(), blocks);
        let mut worst: f64 = 0.0;
        for (c, z) in out.iter().enumerate() {
            assert_eq!(ex.level(z), e.top - 1);
            let parts: Vec<(&[f64], Option<&[f64]>)> = vals[c]
                .iter()
                .map(|(re, im)| (&re[..], Some(&im[..])))
                .collect();
            let want = lay.rows_grouped(&parts);
            for (g, w) in dec(&e, z).iter().zip(&want) {
                worst = worst.max((g.re - w.re).abs()).max((g.im - w.im).abs());
            }
        }
        println!(
            "spread d_h {dh}, {groups} group(s), {blocks} blocks from {} ciphertext(s): worst |err| {worst:.2e}",
            cts.len()
        );
        assert!(worst < 1e-6, "d_h {dh}, groups {groups}: off by {worst}");
    }
}

/// A step's q, k and v in their compact layout (row `w mod t` of every segment for item `w`,
/// [`DecodeLayout::compact_item_slot`]) come out of [`unpack_qkv`] as the queries replicated
/// over the rows ([`DecodeLayout::replicated`]) and the keys and values in row `r0` alone, for
/// several positions' rows `r0` (shifts both ways) and more items than one ciphertext's rows.
#[test]
fn compact_queries_keys_and_values_unpack_to_the_cache_layouts() {
    let e = env();
    let n = e.ck.params().max_slots();
    let mut rng = test_rng(13);
    for (dh, groups, queries, kv, r0s) in [
        (16usize, 2usize, 3usize, 2usize, vec![0usize, 5, 31]),
        (64, 1, 20, 8, vec![0, 17]),
    ] {
        let lay = DecodeLayout::grouped(n, dh, groups).unwrap();
        let (t, segs) = (lay.t(), lay.segments());
        let items = queries + 2 * kv;
        let vals: Vec<(Vec<f64>, Vec<f64>)> = (0..items)
            .map(|_| (uniform(&mut rng, segs, 1.0), uniform(&mut rng, segs, 1.0)))
            .collect();
        let mut compact = vec![vec![C64::default(); n]; items.div_ceil(t)];
        for (w, (re, im)) in vals.iter().enumerate() {
            for seg in 0..segs {
                let (k, slot) = lay.compact_item_slot(w, seg);
                compact[k][slot] = C64::new(re[seg], im[seg]);
            }
        }
        let dry = SymExec::new(n);
        let fresh: Vec<_> = compact.iter().map(|_| dry.fresh(e.top)).collect();
        for &r0 in &r0s {
            unpack_qkv(&dry, &lay, &fresh, queries, kv, r0).unwrap();
        }
        let keys =
            e.ck.gen_evaluation_keys(&e.sk, &dry.rotations_used(), false, &mut rng, |_, _| {})
                .unwrap();
        let ex = CkksExec::new(&e.ck, &keys, n);
        let cts: Vec<_> = compact.iter().map(|v| enc(&e, v, &mut rng)).collect();
        for &r0 in &r0s {
            let (q, rows) = unpack_qkv(&ex, &lay, &cts, queries, kv, r0).unwrap();
            assert_eq!((q.len(), rows.len()), (queries, 2 * kv));
            let mut worst: f64 = 0.0;
            for (w, z) in q.iter().chain(&rows).enumerate() {
                assert_eq!(ex.level(z), e.top - 1);
                let (re, im) = &vals[w];
                let mut want = lay.replicated(re, Some(im));
                if w >= queries {
                    // Only row r0 of each segment.
                    for (s, v) in want.iter_mut().enumerate() {
                        if s % t != r0 {
                            *v = C64::default();
                        }
                    }
                }
                for (g, w) in dec(&e, z).iter().zip(&want) {
                    worst = worst.max((g.re - w.re).abs()).max((g.im - w.im).abs());
                }
            }
            println!(
                "unpack d_h {dh}, {groups} group(s), {queries} + 2·{kv} items from {} ciphertext(s), r0 = {r0}: worst |err| {worst:.2e}",
                cts.len()
            );
            assert!(worst < 1e-6, "d_h {dh}, r0 {r0}: off by {worst}");
        }
    }
}
