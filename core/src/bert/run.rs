//! The two sides of one private inference of a BERT-architecture encoder with a
//! classification head (EncFormer Fig. 1).
//!
//! # Protocol
//!
//! The client is MPC party P0 and holds the CKKS secret key; the server is P1 and holds the
//! weights, the public key and the evaluation keys. The client's input is its embedded sentence
//! `X` (`m × d`: token, position and type embeddings from the published table, then the
//! embedding LayerNorm; rows `valid..m` are padding). It enters as MPC shares (the client's share
//! is `X`, the server's is 0), and every layer then runs
//!
//! | block | where | in → out |
//! |---|---|---|
//! | M2C `X` | conversion | shares → minimal packing |
//! | `Q, K, V` projection (+ biases), score `Q·Kᵀ/√d_h` | CKKS, SCP kernels | → folded-diagonal stream |
//! | C2M `S` | conversion | → shares |
//! | softmax, padding keys masked | MPC | |
//! | M2C `P` | conversion | → minimal folded-diagonal `P` |
//! | value `P·V`, output projection | CKKS | → minimal packing |
//! | C2M `Y`; `+ b_O + X`; LayerNorm 1 | conversion, MPC | → `H` |
//! | M2C `H`; FC1 | conversion, CKKS | |
//! | C2M; `+ b_1`; GELU (erf) | conversion, MPC | → `G` |
//! | M2C `G`; FC2 | conversion, CKKS | |
//! | C2M; `+ b_2 + H`; LayerNorm 2 | conversion, MPC | → next `X` |
//!
//! and the head runs on the shares: the mean over the `valid` rows (local), one owner-vector
//! product with the server's `W/valid` (`ℓ` COTs per weight), `+ b`, and an opening to the
//! client alone (the client masks its share first, so the server sees a uniform value).
//!
//! The nonlinear blocks are the plan's [`Blocks`](super::Blocks): by default the checkpoint's own functions
//! ([`Blocks::EXACT`](super::Blocks::EXACT)); [`Blocks::encformer`](super::Blocks::encformer) takes EncFormer's surrogates instead (MBMax,
//! MBLN) and GELU with the split: after FC1 the server adds `b_1` in CKKS and evaluates BOLT's
//! two candidates `F0(x)`, `F1(x)` on both real vectors of every ciphertext
//! ([`crate::circuits::eval_part_polys`]: one conjugation, six products, three levels), the
//! conversion carries `x`, `F0` and `F1` (block `c2m:cand` for the candidates), and MPC only
//! compares and selects ([`Gelu::run_split`](crate::nonlinear::gelu::Gelu::run_split)). The candidates grow as `|x|^4`, so the split
//! bounds GELU's inputs at `|x| ≤ 32` ([`bounds::F1_SPLIT`](super::bounds::F1_SPLIT)).
//!
//! The residual stream never leaves MPC: the shares of `X` and `H` are kept for the residual
//! additions, so each layer costs four conversions each way (six C2M with the GELU split). The
//! server never decrypts and never sees a share unmasked; the client sees only one-time-padded
//! ciphertexts in the conversions and the logits at the end.
//!

use super::layout::Layout;
use super::plan::{SessionPlan, C_F1, C_F2, C_S, C_Y, MPC_CONFIG, M_G, M_H, M_P, M_X};
use super::weights::{EncoderWeights, LayerWeights};
use crate::circuits::eval_part_polys;
use crate::ckks::{Ciphertext, Ckks, SecretKey, C64};
use crate::convert::{C2mPlan, ProtocolError};
use crate::error::Error;
use crate::hybrid::{BlockCost, HybridRun, ServerKeys};
use crate::mpc::{Party, PartyId, RingCfg, RingShares};
use crate::nonlinear::fixed;
use crate::nonlinear::layernorm::LnAffine;
use crate::nonlinear::ops;
use crate::packing::{ChannelMap, Mat};
use crate::transformer::pipeline::{output_projection, qkv_projection, score_kernel, value_kernel};
use crate::transformer::projection::{project, ProjGroup};
use crate::transformer::Exec;
use crate::PolyBackend;
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// A run: the engine's side, the plan and the report.
struct Run<'a, 'p, B: PolyBackend, R: RngCore + CryptoRng> {
    h: HybridRun<'a, 'p, B, R, EncoderWeights>,
    plan: &'a SessionPlan,
    valid: usize,
    progress: &'p mut dyn FnMut(&BlockCost),
    layer: usize,
}

/// `x + b[c]` over a row-major `rows × cols` tensor, the bias held by the server (P1).
fn add_bias(r: RingCfg, server: bool, x: RingShares, b: Option<&[f64]>, cols: usize) -> RingShares {
    match (server, b) {
        (true, Some(b)) => {
            let mut v = x.into_vec();
            for (e, s) in v.iter_mut().enumerate() {
                *s = r.add(*s, r.from_signed(fixed::encode(b[e % cols], r.frac)));
            }
            RingShares::new(v)
        }
        _ => x,
    }
}

/// Slot values of a bias laid out by a channel map (each channel's value on its segment).
fn bias_slots(map: &ChannelMap, b: &[f64], ct: usize, slots: usize) -> Vec<C64> {
    let mut v = vec![C64::default(); slots];
    for seg in 0..map.segs {
        let re = map.get(ct, 0, seg).map_or(0.0, |c| b[c]);
        let im = map.get(ct, 1, seg).map_or(0.0, |c| b[c]);
        for r in 0..map.m {
            v[seg * map.m + r] = C64::new(re, im);
        }
    }
    v
}

impl<'a, 'p, B: PolyBackend, R: RngCore + CryptoRng> Run<'a, 'p, B, R> {
    fn done(&mut self, block: &'static str) {
        let cost = BlockCost {
            layer: self.layer,
            block,
            tally: self.h.tally(),
        };
        (self.progress)(&cost);
    }

    /// C2M of the server's ciphertexts (`cts` at the server, `None` at the client), gathered
    /// into a row-major tensor by `lay`.
    async fn c2m(
        &mut self,
        which: usize,
        cts: Option<Vec<Ciphertext<B>>>,
        lay: &Layout,
        name: &'static str,
    ) -> Result<RingShares, ProtocolError> {
        let plan = &self.plan.c2m[which];
        self.c2m_with(plan, cts, lay, name).await
    }

    /// [`Run::c2m`] under an explicit plan.
    async fn c2m_with(
        &mut self,
        plan: &'a C2mPlan,
        cts: Option<Vec<Ciphertext<B>>>,
        lay: &Layout,
        name: &'static str,
    ) -> Result<RingShares, ProtocolError> {
        let sh = self.h.c2m(plan, cts.as_deref(), lay.cts).await?;
        let out = lay.gather(&sh)?;
        self.done(name);
        Ok(out)
    }

    /// M2C of a shared tensor laid out by `lay`: the server gets the ciphertexts.
    async fn m2c(
        &mut self,
        which: usize,
        x: &RingShares,
        lay: &Layout,
        name: &'static str,
    ) -> Result<Option<Vec<Ciphertext<B>>>, ProtocolError> {
        let inputs = lay.scatter(x)?;
        let out = self.h.m2c(&self.plan.m2c[which], &inputs).await?;
        self.done(name);
        Ok(out)
    }

    fn weights(&self) -> Option<&'a LayerWeights> {
        self.h.model().and_then(|w| w.layers.get(self.layer))
    }

    /// One Transformer layer on the shares of its input; returns the shares of its output.
    async fn layer(&mut self, x: RingShares) -> Result<RingShares, ProtocolError> {
        let plan = self.plan;
        let (d, ffn) = (plan.cfg.hidden, plan.cfg.ffn);
        let r = self.h.party.ring();
        let server = self.h.is_server();
        let w = self.weights();
        if server && w.is_none() {
            return Err(
                Error::InvalidParameters("the weights have fewer layers than the plan").into(),
            );
        }

        // Attention.
        let xc = self.m2c(M_X, &x, &plan.lay_x, "m2c:x").await?;
        let mut v_keep = None;
        let s_cts = match (self.h.exec(), xc, w) {
            (Some(ex), Some(xc), Some(w)) => {
                let a = &plan.attn;
                let inv = 1.0 / libm::sqrt(plan.cfg.head_dim() as f64);
                let wq = Mat::from_fn(d, d, |i, o| w.wq.get(i, o) * inv);
                let bq: Vec<f64> = w.bq.iter().map(|b| b * inv).collect();
                let (mut q, mut k, mut v) = qkv_projection(ex, a, &xc, &wq, &w.wk, &w.wv)?;
                let (qm, vm) = (a.qk_map(), a.v_map());
                for (cts, map, b) in [
                    (&mut q, &qm, &bq),
                    (&mut k, &qm, &w.bk),
                    (&mut v, &vm, &w.bv),
                ] {
                    for (u, ct) in cts.iter_mut().enumerate() {
                        ex.add_plain(ct, &|| bias_slots(map, b, u, plan.slots))?;
                    }
                }
                let s = score_kernel(ex, a, &q, &k)?;
                v_keep = Some(v);
                Some(s)
            }
            _ => None,
        };
        self.done("qkv+score");
        let s = self.c2m(C_S, s_cts, &plan.lay_s, "c2m:s").await?;
        let pr = plan.softmax(self.valid).run(self.h.party, &s).await?;
        self.done("softmax");
        let pc = self.m2c(M_P, &pr, &plan.lay_p, "m2c:p").await?;
        let y_cts = match (self.h.exec(), pc, v_keep, w) {
            (Some(ex), Some(pc), Some(v), Some(w)) => {
                let o = value_kernel(ex, &plan.attn, &pc, &v)?;
                Some(output_projection(ex, &plan.attn, &o, &w.wo)?)
            }
            _ => None,
        };
        self.done("value+out");
        let y = self.c2m(C_Y, y_cts, &plan.lay_x, "c2m:y").await?;
        let h = self
            .residual_ln(
                y,
                &x,
                w.map(|w| (&w.bo[..], &w.ln1_g[..], &w.ln1_b[..])),
                "ln1",
            )
            .await?;

        // Feed-forward.
        let split = plan.blocks.split();
        let hc = self.m2c(M_H, &h, &plan.lay_x, "m2c:h").await?;
        let f1 = match (self.h.exec(), hc, w) {
            (Some(ex), Some(hc), Some(w)) => {
                let wf = |i: usize, o: usize| C64::real(w.w1.get(i, o));
                let g = [ProjGroup {
                    out: &plan.f_map,
                    weight: &wf,
                    raw: false,
                }];
                let mut f = project(ex, &plan.fc1, &hc, &plan.attn.x_map(), &g)?
                    .pop()
                    .ok_or(Error::InvalidParameters("FC1 produced no output group"))?;
                // With the split the bias enters in CKKS, before the candidates
                // `F0(x)`, `F1(x)` (EncFormer §IV-B3).
                let cands = if split {
                    let polys = plan.blocks.candidates();
                    let (mut c0, mut c1) = (Vec::new(), Vec::new());
                    for (u, ct) in f.iter_mut().enumerate() {
                        ex.add_plain(ct, &|| bias_slots(&plan.f_map, &w.b1, u, plan.slots))?;
                        let sc = ct.scale();
                        let mut c = eval_part_polys(ex, ct, sc, sc, &polys)?.into_iter();
                        c0.extend(c.next());
                        c1.extend(c.next());
                    }
                    Some((c0, c1))
                } else {
                    None
                };
                Some((f, cands))
            }
            _ => None,
        };
        self.done("fc1");
        let (f1, cands) = match f1 {
            Some((f, c)) => (Some(f), c),
            None => (None, None),
        };
        let f = self.c2m(C_F1, f1, &plan.lay_f, "c2m:f1").await?;
        let g = match &plan.c2m_cand {
            Some(cp) if split => {
                let (c0, c1) = match cands {
                    Some((c0, c1)) => (Some(c0), Some(c1)),
                    None => (None, None),
                };
                let f0 = self.c2m_with(cp, c0, &plan.lay_f, "c2m:cand").await?;
                let f1 = self.c2m_with(cp, c1, &plan.lay_f, "c2m:cand").await?;
                plan.gelu().run_split(self.h.party, &f, &f0, &f1).await?
            }
            _ => {
                let f = add_bias(r, server, f, w.map(|w| &w.b1[..]), ffn);
                plan.gelu().run(self.h.party, &f).await?
            }
        };
        self.done("gelu");
        let gc = self.m2c(M_G, &g, &plan.lay_f, "m2c:g").await?;
        let f2 = match (self.h.exec(), gc, w) {
            (Some(ex), Some(gc), Some(w)) => {
                let wf = |i: usize, o: usize| C64::real(w.w2.get(i, o));
                let x_map = plan.attn.x_map();
                let g = [ProjGroup {
                    out: &x_map,
                    weight: &wf,
                    raw: false,
                }];
                project(ex, &plan.fc2, &gc, &plan.f_map, &g)?.pop()
            }
            _ => None,
        };
        self.done("fc2");
        let o = self.c2m(C_F2, f2, &plan.lay_x, "c2m:f2").await?;
        self.residual_ln(
            o,
            &h,
            w.map(|w| (&w.b2[..], &w.ln2_g[..], &w.ln2_b[..])),
            "ln2",
        )
        .await
    }

    /// `LayerNorm(y + b + res)`: the bias and the affine map are the server's (`None` at the
    /// client), the residual is shared.
    async fn residual_ln(
        &mut self,
        y: RingShares,
        res: &RingShares,
        bias_affine: Option<(&[f64], &[f64], &[f64])>,
        name: &'static str,
    ) -> Result<RingShares, ProtocolError> {
        let r = self.h.party.ring();
        let d = self.plan.cfg.hidden;
        let y = add_bias(r, self.h.is_server(), y, bias_affine.map(|b| b.0), d);
        let y = ops::add(r, &y, res)?;
        let aff = bias_affine.map(|(_, gamma, beta)| LnAffine { gamma, beta });
        let out = self
            .plan
            .layernorm()
            .run_owned(self.h.party, &y, aff.as_ref(), 0, PartyId::P1)
            .await?;
        self.done(name);
        Ok(out)
    }

    /// Mean pooling over the real tokens and the head; the client alone learns the logits.
    async fn head(&mut self, h: &RingShares) -> Result<Option<Vec<f64>>, ProtocolError> {
        self.layer = usize::MAX;
        let plan = self.plan;
        let (d, classes, valid) = (plan.cfg.hidden, plan.cfg.classes, self.valid);
        let r = self.h.party.ring();
        let f = r.frac;
        // Σ over the real rows (local), repeated once per class: one row of classes·d.
        let hs = h.as_slice();
        let mut sum = vec![0u64; d];
        for row in 0..valid {
            for (c, s) in sum.iter_mut().enumerate() {
                *s = r.add(*s, hs[row * d + c]);
            }
        }
        let rep: Vec<u64> = (0..classes).flat_map(|_| sum.iter().copied()).collect();
        let head = self.h.model().map(|w| &w.head);
        let wv: Option<Vec<u64>> = head.map(|hd| {
            (0..classes)
                .flat_map(|k| {
                    (0..d).map(move |c| {
                        r.from_signed(fixed::encode(hd.w.get(c, k) / valid as f64, f))
                    })
                })
                .collect()
        });
        let prod = self
            .h
            .party
            .mul_owned_fx(
                &RingShares::new(rep),
                wv.as_deref(),
                PartyId::P1,
                classes * d,
                f,
            )
            .await?;
        let ps = prod.as_slice();
        let mut logits: Vec<u64> = (0..classes)
            .map(|k| {
                ps[k * d..(k + 1) * d]
                    .iter()
                    .fold(0u64, |a, &b| r.add(a, b))
            })
            .collect();
        if let Some(hd) = head {
            for (l, b) in logits.iter_mut().zip(&hd.b) {
                *l = r.add(*l, r.from_signed(fixed::encode(*b, f)));
            }
        }
        let out = self.h.open_to_client(RingShares::new(logits)).await?;
        self.done("head");
        Ok(out)
    }

    async fn run(&mut self, x: RingShares) -> Result<Option<Vec<f64>>, ProtocolError> {
        // Base OTs unless the party has an OT already, and a fresh common seed.
        self.h.party.setup().await?;
        self.h.mark();
        // With the silent OT, every layer after the first runs on COTs preprocessed silently
        // (≈ 0.45 bit each instead of IKNP's 16 bytes): the demand of a layer is the first
        // layer's, which each party measures on its own (its sender count is the peer's
        // receiver count), so the two pool fills pair up.
        let silent = self.h.party.silent_stats().is_some();
        let mut demand = None;
        let mut h = x;
        for l in 0..self.plan.cfg.layers {
            self.layer = l;
            if let (true, Some((s, r))) = (silent, demand) {
                self.h.party.preprocess_ot(s, r).await?;
                self.done("ot-fill");
            }
            let before = self.h.party.ot_counts();
            h = self.layer(h).await?;
            if demand.is_none() {
                let after = self.h.party.ot_counts();
                demand = Some(((after.0 - before.0) as usize, (after.1 - before.1) as usize));
            }
        }
        self.head(&h).await
    }
}

/// The client (P0): sends its input `x` (`m × d`, rows `valid..m` are padding) through the
/// conversion into the pipeline, takes part in every MPC block and returns the logits. It runs
/// [`Party::setup`] first (base OTs unless `p` already has an OT, and a fresh common seed).
/// `progress` is called after every block.
pub async fn client_run<B: PolyBackend, R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    ck: &Ckks<B>,
    sk: &SecretKey,
    plan: &SessionPlan,
    x: &Mat,
    valid: usize,
    progress: &mut dyn FnMut(&BlockCost),
) -> Result<Vec<f64>, ProtocolError> {
    let h = HybridRun::client(p, ck, sk, &MPC_CONFIG)?;
    plan.check_valid(valid)?;
    if x.rows != plan.m || x.cols != plan.cfg.hidden || x.data.len() != x.rows * x.cols {
        return Err(Error::Shape {
            what: "client input (m × hidden)",
            expected: plan.m * plan.cfg.hidden,
            found: x.data.len(),
        }
        .into());
    }
    let sh = h.share_input(&x.data, plan.bounds.x)?;
    let mut run = Run {
        h,
        plan,
        valid,
        progress,
        layer: 0,
    };
    run.run(sh)
        .await?
        .ok_or(Error::InvalidParameters("no logits").into())
}

/// The server (P1): evaluates the linear layers on ciphertexts, takes part in every MPC block,
/// and opens the logits to the client. Takes public key material only. Runs [`Party::setup`]
/// first, as [`client_run`] does.
pub async fn server_run<B: PolyBackend, R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    keys: ServerKeys<'_, B>,
    plan: &SessionPlan,
    w: &EncoderWeights,
    valid: usize,
    progress: &mut dyn FnMut(&BlockCost),
) -> Result<(), ProtocolError> {
    let h = HybridRun::server(p, keys, plan.slots, w, &MPC_CONFIG)?;
    plan.check_valid(valid)?;
    w.validate()?;
    if w.cfg != plan.cfg {
        return Err(Error::InvalidParameters("the weights' architecture is not the plan's").into());
    }
    let n = plan.m * plan.cfg.hidden;
    let mut run = Run {
        h,
        plan,
        valid,
        progress,
        layer: 0,
    };
    run.run(RingShares::new(vec![0u64; n])).await?;
    Ok(())
}
