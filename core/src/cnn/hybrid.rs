//! The hybrid mode: a ReLU network, trained as usual, run privately with its linear layers under
//! CKKS at the server and every ReLU exact in two-party MPC, through the complex conversion
//! ([`crate::convert`]). No polynomial approximation, no retraining and no bootstrapping: each
//! ReLU boundary hands the server fresh ciphertexts, so the depth needed is the deepest run of
//! linear layers between two ReLUs (one level for LeNet), whatever the network's depth.
//!
//! # Protocol
//!
//! The client is MPC party P0 and holds the CKKS secret key; the server is P1 and holds the
//! weights, the public key and the evaluation keys the linear layers need (no Galois key in the
//! pixel-wise layout). For a network `L₀ ReLU L₁ ReLU … L_k`, where each `Lᵢ` is a run of linear
//! layers ([`Segment`]):
//!
//! | step | where | in → out |
//! |---|---|---|
//! | M2C of the input | conversion | the client's packed images (its share; the server's is 0) → ciphertexts |
//! | `Lᵢ` | CKKS at the server ([`Network::run_range`]) | ciphertexts at level `c + depthᵢ` → level `c` |
//! | C2M | conversion, two ciphertexts per complex one ([`complexify`]) | → shares |
//! | ReLU | MPC ([`Party::relu`]) | shares → shares |
//! | M2C | conversion | → fresh ciphertexts of `Lᵢ₊₁` |
//!
//! After `L_k` the logits' shares are opened to the client alone: it pads its share with a
//! fresh uniform mask before the exchange, so the server sees a uniform value.
//!
//! Every C2M re-randomizes the server's ciphertexts with a fresh `Enc_pk(0)` and masks them
//! uniformly ([`crate::convert::c2m_mask`]), so the client's decryptions reveal nothing of the
//! weights; the server only ever holds ciphertexts and uniform shares.
//!
//! # Levels and bounds
//!
//! Every linear layer keeps the scale exactly (plaintexts at `q_level`, constants split
//! `Δ₁·Δ₂ = q_level`), so a segment ends at the scale it started with, `Δ` of the parameter set.
//! The C2M level `c` is the shortest admissible one at `Δ` (modulus trimming); each segment's
//! M2C lands at `c + depthᵢ`. Every value at a boundary must stay below `2^`[`LOG_BOUND`] in
//! magnitude (the conversions' correctness argument).
//!
//! # Public information
//!
//! The architecture, the batch size, the layout and the number of real images in a batch are
//! public; the weights, the images, every activation and the logits are not. Only the logits of
//! the real images are opened, to the client alone ([`HybridPlan::opened_slots`]).
//!
//! Both parties derive the plan on their own; the host compares
//! [`HybridPlan::fingerprint`]s before any key is sent, so two parties with different plans
//! stop with a typed error instead of computing garbage.

use super::net::{Layer, LayerCost, LayerPlan, NetPlan, Network};
use crate::circuits::exec::{Exec, OpCounts, SymExec};
use crate::ckks::{Ciphertext, Ckks, SecretKey};
use crate::convert::{complexify, BoundaryCfg, C2mPlan, ComplexShares, M2cPlan, ProtocolError};
use crate::error::Error;
use crate::hybrid::{HybridRun, Role, ServerKeys, Tally};
use crate::mpc::{MpcConfig, Party, PartyId, RingShares};
use crate::params::CkksParams;
use crate::PolyBackend;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;
use rand_core::{CryptoRng, RngCore};

/// The MPC engine configuration of the hybrid mode (EncFormer's ring: `ℓ = 43`, `F = 13`).
pub const MPC_CONFIG: MpcConfig = MpcConfig::ENCFORMER;

/// `log2` of the largest magnitude any boundary carries (real units): the conversions' bit
/// budgets are sized for it. The client's input is checked against it; an intermediate value
/// beyond it is **not detected** (it wraps in the C2M and corrupts that element's logits), so
/// the bound must hold for the model. LeNet's ReLU inputs and logits on MNIST test images stay
/// below 2^6 (`tests/tests/cnn_hybrid.rs` checks the first 2,000), so
/// 2^10 leaves a margin of 16×.
pub const LOG_BOUND: u32 = 10;

/// Upper bound on one conversion frame's ciphertext bytes (each conversion sends its
/// ciphertexts in one frame; the transport refuses frames over 1 GiB).
pub const MAX_FRAME_BYTES: usize = 192 << 20;

/// Elements per [`Party::relu`] call: bounds the protocol's working memory and its largest
/// frame (IKNP ReLU moves ≈ 1.1 KB per element over its rounds; 2^17 elements keep every frame
/// far below a 256 MiB limit).
pub const RELU_CHUNK: usize = 1 << 17;

/// Correlated OTs one ReLU element consumes at P0 under [`MPC_CONFIG`], as (sender, receiver);
/// P1's are swapped. With the silent OT the pools are filled with exactly this much before each
/// ReLU call (`tests/tests/cnn_hybrid.rs` checks the figures against the engine).
pub const RELU_COTS_P0: (usize, usize) = (53, 11);

/// One run of linear layers between two boundaries.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Indices of its layers in the network (empty when two ReLUs are adjacent).
    pub layers: Range<usize>,
    /// Levels it consumes.
    pub depth: usize,
    /// Ciphertexts in.
    pub cts_in: usize,
    /// Ciphertexts out.
    pub cts_out: usize,
    /// Whether a ReLU follows (otherwise the segment ends with the logits).
    pub relu_after: bool,
    /// The conversion that brings its input in (at level `c + depth`).
    pub m2c: M2cPlan,
}

/// A hybrid-mode plan: the network's layout, its segments and the conversion plans. Both parties
/// derive it from public data (the architecture, the batch, the block size and the parameters).
#[derive(Clone, Debug)]
pub struct HybridPlan {
    /// The compiled network ([`Network::plan_hybrid`]).
    pub net: NetPlan,
    /// The runs of linear layers, in order.
    pub segments: Vec<Segment>,
    /// The C2M plan of every boundary (the same scale everywhere), complex.
    pub c2m: C2mPlan,
    /// Slots per ciphertext.
    pub slots: usize,
    /// Images per batch.
    pub batch: usize,
    /// The scale `Δ` at every boundary.
    pub scale: f64,
    /// Ciphertexts per M2C frame.
    pub m2c_chunk: usize,
    /// Complex ciphertexts per C2M frame.
    pub c2m_chunk: usize,
}

fn cfg() -> BoundaryCfg {
    BoundaryCfg {
        ring: MPC_CONFIG.ring,
        sigma: MPC_CONFIG.sigma,
        log_bmax: LOG_BOUND,
    }
}

impl HybridPlan {
    /// Plans `net` (its architecture: weights are not read) for `batch` images with input block
    /// size `block` on `params`; a typed error when a layer, a level or a conversion does not
    /// fit.
    pub fn new(
        params: &CkksParams,
        net: &Network,
        batch: usize,
        block: usize,
    ) -> Result<Self, ProtocolError> {
        let slots = params.n() / 2;
        let plan = net.plan_hybrid(batch, block, slots)?;
        let scale = params.default_scale();
        let c2m = C2mPlan::shortest_admissible(params, slots, scale, cfg())?.local_rounding();
        let c = c2m.level();
        let mut segments = Vec::new();
        let mut start = 0;
        let mut cts_in = plan.input.ciphertexts();
        let n = net.layers.len();
        for i in 0..=n {
            let boundary = i == n || matches!(net.layers[i], Layer::Relu);
            if !boundary {
                continue;
            }
            let depth = net.layers[start..i]
                .iter()
                .filter(|l| matches!(l, Layer::Conv(_) | Layer::Linear(_)))
                .count();
            let cts_out = if i == n {
                plan.output.cts
            } else {
                match plan.layers[i] {
                    LayerPlan::Relu { cts } => cts,
                    _ => return Err(Error::InvalidParameters("hybrid plan: ReLU layer").into()),
                }
            };
            if c + depth > params.max_level() {
                return Err(Error::InvalidParameters(
                    "hybrid plan: a run of linear layers needs more levels than the parameter set has above the conversion level",
                )
                .into());
            }
            let m2c = M2cPlan::new(params, c + depth, slots, scale, cfg())?;
            segments.push(Segment {
                layers: start..i,
                depth,
                cts_in,
                cts_out,
                relu_after: i < n,
                m2c,
            });
            cts_in = cts_out;
            start = i + 1;
        }
        let n_ring = params.n();
        let m2c_bytes = segments
            .iter()
            .map(|s| n_ring * (s.m2c.level() + 1) * 8)
            .max()
            .unwrap_or(1);
        let c2m_bytes = 2 * n_ring * (c + 1) * 8;
        Ok(HybridPlan {
            net: plan,
            segments,
            c2m,
            slots,
            batch,
            scale,
            m2c_chunk: (MAX_FRAME_BYTES / m2c_bytes).max(1),
            c2m_chunk: (MAX_FRAME_BYTES / c2m_bytes).max(1),
        })
    }

    /// Ciphertexts converted each way in one batch: (M2C, C2M complex).
    pub fn conversions(&self) -> (usize, usize) {
        let m2c = self.segments.iter().map(|s| s.cts_in).sum();
        let c2m = self.segments.iter().map(|s| s.cts_out.div_ceil(2)).sum();
        (m2c, c2m)
    }

    /// ReLUs evaluated in MPC for a batch of `valid` images: every live slot of every boundary
    /// ciphertext ([`HybridPlan::live_slots`]). A typed error when `valid` is 0 or exceeds the
    /// batch.
    pub fn relus(&self, valid: usize) -> Result<usize, ProtocolError> {
        let live = self.live_slots(valid)?;
        Ok(self
            .segments
            .iter()
            .filter(|s| s.relu_after)
            .map(|s| s.cts_out * live)
            .sum())
    }

    /// A digest of everything both parties must agree on: the ring, the batch, the layouts,
    /// every layer's compiled shape and rotation counts, the segments and their conversion
    /// levels, and the frame sizes. Two parties whose digests differ would run different
    /// protocols; the host compares them before any key is sent.
    pub fn fingerprint(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut put = |s: String| {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        };
        put(alloc::format!(
            "veil-hybrid-plan/1 {} {} {} {} {} {} {} {:?}",
            self.slots,
            self.batch,
            self.scale.to_bits(),
            self.m2c_chunk,
            self.c2m_chunk,
            self.c2m.level(),
            self.net.depth,
            self.net.input
        ));
        for l in &self.net.layers {
            put(match l {
                LayerPlan::Conv(c) => {
                    alloc::format!("conv {:?} {:?} {:?}", c.input, c.output, c.counts())
                }
                LayerPlan::Quad { cts } => alloc::format!("quad {cts}"),
                LayerPlan::Relu { cts } => alloc::format!("relu {cts}"),
                LayerPlan::Flatten(f) => alloc::format!("flatten {} {:?}", f.cts, f.pos),
                LayerPlan::Linear(f) => alloc::format!("fc {:?}", f.counts()),
            });
        }
        put(alloc::format!(
            "out {} {} {:?}",
            self.net.output.cts,
            self.net.output.batch,
            self.net.output.pos
        ));
        for g in &self.segments {
            put(alloc::format!(
                "seg {:?} {} {} {} {} {}",
                g.layers,
                g.depth,
                g.cts_in,
                g.cts_out,
                g.relu_after,
                g.m2c.level()
            ));
        }
        h.finalize().into()
    }

    /// The positions `ct·slots + slot` of the logits of images `0..valid`, in `[image][class]`
    /// order: the only slots opened at the end of a batch.
    pub fn opened_slots(&self, valid: usize) -> Result<Vec<usize>, ProtocolError> {
        self.live_slots(valid)?;
        let n = self.slots;
        let iota: Vec<Vec<f64>> = (0..self.net.output.cts)
            .map(|c| (0..n).map(|j| (c * n + j) as f64).collect())
            .collect();
        let at = self.net.output.unpack(&iota)?;
        let take = valid * self.net.output.len();
        Ok(at
            .get(..take)
            .ok_or(Error::Shape {
                what: "logits of the valid images",
                expected: take,
                found: at.len(),
            })?
            .iter()
            .map(|&v| v as usize)
            .collect())
    }

    /// Checks what a run relies on: non-empty frames and the ring.
    fn check(&self, slots: usize) -> Result<(), ProtocolError> {
        if self.m2c_chunk == 0 || self.c2m_chunk == 0 {
            return Err(
                Error::InvalidParameters("hybrid plan: frame sizes must be positive").into(),
            );
        }
        if slots != self.slots {
            return Err(Error::InvalidParameters("the plan was made for another ring").into());
        }
        Ok(())
    }

    /// Slots that go through ReLU for a batch of `valid` images: the first `valid` in the
    /// pixel-wise layout (slot `j` is image `j`), all of them otherwise. A typed error when
    /// `valid` is 0 or exceeds the batch.
    pub fn live_slots(&self, valid: usize) -> Result<usize, ProtocolError> {
        if valid == 0 || valid > self.batch {
            return Err(Error::InvalidParameters("valid images must be in 1..=batch").into());
        }
        Ok(if self.net.input.is_pixelwise() {
            valid
        } else {
            self.slots
        })
    }
}

/// One step's cost as one party saw it: the engine's [`Tally`] under the step's name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepCost {
    /// `m2c:input`, `conv1`, `c2m:conv1`, `relu1`, `m2c:relu1`, …, `open`.
    pub name: String,
    /// The layer's cost (CKKS steps: the server's real run, the client's dry run of the public
    /// architecture, which counts the same operations).
    pub layer: Option<LayerCost>,
    /// What the step cost on the channel and in the conversions.
    pub tally: Tally,
}

/// A batch's run: the engine's side (the server's model is the network), the plan and the
/// report.
struct Run<'a, 'p, B: PolyBackend, R: RngCore + CryptoRng> {
    h: HybridRun<'a, 'p, B, R, Network>,
    plan: &'a HybridPlan,
    arch: &'a Network,
    progress: &'p mut dyn FnMut(&StepCost),
    /// Slots that hold an image (all of them outside the pixel-wise layout).
    live: usize,
    /// Real images in the batch.
    valid: usize,
}

impl<'a, 'p, B: PolyBackend, R: RngCore + CryptoRng> Run<'a, 'p, B, R> {
    /// A run of `plan` for a batch of `valid` real images; a typed error when the plan does not
    /// fit the ring or `valid` the batch.
    fn new(
        h: HybridRun<'a, 'p, B, R, Network>,
        plan: &'a HybridPlan,
        arch: &'a Network,
        valid: usize,
        progress: &'p mut dyn FnMut(&StepCost),
    ) -> Result<Self, ProtocolError> {
        plan.check(h.ck.params().n() / 2)?;
        Ok(Run {
            live: plan.live_slots(valid)?,
            valid,
            h,
            plan,
            arch,
            progress,
        })
    }

    /// The batch from the input's shares to the logits of the `valid` images, opened to the
    /// client alone (the client gets them, the server `None`).
    async fn batch(&mut self, input: Vec<RingShares>) -> Result<Option<Vec<f64>>, ProtocolError> {
        let opened = self.plan.opened_slots(self.valid)?;
        let out = self.run(input).await?;
        let flat = pick(&out, &opened, self.plan.slots)?;
        let logits = self.h.open_to_client(RingShares::new(flat)).await?;
        self.done(String::from("open"));
        Ok(logits)
    }

    fn done(&mut self, name: String) {
        let cost = StepCost {
            name,
            layer: None,
            tally: self.h.tally(),
        };
        (self.progress)(&cost);
    }

    /// M2C of one share vector per ciphertext (real only), [`HybridPlan::m2c_chunk`] per
    /// frame: the server gets the ciphertexts.
    async fn m2c(
        &mut self,
        seg: usize,
        shares: Vec<RingShares>,
    ) -> Result<Option<Vec<Ciphertext<B>>>, ProtocolError> {
        let plan = &self.plan.segments[seg].m2c;
        let mut out = Vec::new();
        let mut it = shares.into_iter().peekable();
        while it.peek().is_some() {
            let inputs: Vec<ComplexShares> = it
                .by_ref()
                .take(self.plan.m2c_chunk)
                .map(|re| ComplexShares {
                    re,
                    im: RingShares::default(),
                })
                .collect();
            out.extend(self.h.m2c(plan, &inputs).await?.into_iter().flatten());
        }
        Ok(self.h.is_server().then_some(out))
    }

    /// C2M of `count` ciphertexts (the server's, `None` at the client), two per complex
    /// ciphertext: one share vector per ciphertext.
    async fn c2m(
        &mut self,
        count: usize,
        cts: Option<Vec<Ciphertext<B>>>,
    ) -> Result<Vec<RingShares>, ProtocolError> {
        let plan = &self.plan.c2m;
        let real = plan.clone().real_only();
        let mut out = Vec::with_capacity(count);
        let mut cts = cts.map(|c| c.into_iter());
        let mut left = count;
        while left > 0 {
            let pairs = (left / 2).min(self.plan.c2m_chunk);
            let (n_in, plan_now) = if pairs == 0 {
                (1, &real)
            } else {
                (2 * pairs, plan)
            };
            // The server packs two real ciphertexts into one complex one.
            let z: Option<Vec<Ciphertext<B>>> = match cts.as_mut() {
                Some(it) => {
                    let batch: Vec<Ciphertext<B>> = it.by_ref().take(n_in).collect();
                    Some(if pairs == 0 {
                        batch
                    } else {
                        batch
                            .chunks(2)
                            .map(|p| complexify(self.h.ck, &p[0], &p[1]))
                            .collect::<crate::Result<_>>()?
                    })
                }
                None => None,
            };
            let sh = self.h.c2m(plan_now, z.as_deref(), n_in.div_ceil(2)).await?;
            for s in sh {
                out.push(s.re);
                if pairs > 0 {
                    out.push(s.im);
                }
            }
            left -= n_in;
        }
        Ok(out)
    }

    /// Exact ReLU on the first `live` slots of every share vector (the rest become 0),
    /// [`RELU_CHUNK`] elements per call.
    async fn relu(&mut self, shares: Vec<RingShares>) -> Result<Vec<RingShares>, ProtocolError> {
        let (slots, live) = (self.plan.slots, self.live);
        let p = &mut *self.h.party;
        let per = (RELU_CHUNK / live).max(1);
        let mut out = Vec::with_capacity(shares.len());
        for group in shares.chunks(per) {
            let flat: Vec<u64> = group
                .iter()
                .flat_map(|s| s.as_slice()[..live].iter().copied())
                .collect();
            if p.silent_stats().is_some() {
                // Fill the silent pools for exactly this call (otherwise it would fall back to
                // IKNP on demand: 16× the bytes).
                let n = flat.len();
                let (s, r) = (RELU_COTS_P0.0 * n, RELU_COTS_P0.1 * n);
                match p.id() {
                    PartyId::P0 => p.preprocess_ot(s, r).await?,
                    PartyId::P1 => p.preprocess_ot(r, s).await?,
                }
            }
            let y = p.relu(&RingShares::new(flat)).await?.into_vec();
            for part in y.chunks(live) {
                let mut v = vec![0u64; slots];
                v[..live].copy_from_slice(part);
                out.push(RingShares::new(v));
            }
        }
        Ok(out)
    }

    /// The server's run of segment `seg` (real), or the client's dry run of the public
    /// architecture (the same steps and counts); one report row per layer.
    fn segment(
        &mut self,
        seg: usize,
        cts: Option<Vec<Ciphertext<B>>>,
    ) -> Result<Option<Vec<Ciphertext<B>>>, ProtocolError> {
        let s = &self.plan.segments[seg];
        let (range, level) = (s.layers.clone(), s.m2c.level());
        let progress = &mut *self.progress;
        let HybridRun {
            party, role, meter, ..
        } = &mut self.h;
        let (party, role) = (&**party, &*role);
        let ops = || match role {
            Role::Server { ex, .. } => ex.counts(),
            Role::Client { .. } => OpCounts::default(),
        };
        let mut emit = |c: &LayerCost| {
            progress(&StepCost {
                name: c.name.clone(),
                layer: Some(c.clone()),
                tally: meter.take(party, ops()),
            });
        };
        let out = match (role, cts) {
            (Role::Server { ex, model, .. }, Some(cts)) => {
                Some(model.run_range(ex, &self.plan.net, range, cts, |c| emit(c))?)
            }
            (Role::Client { .. }, None) => {
                let sym = SymExec::new(self.plan.slots);
                let xs = (0..s.cts_in).map(|_| sym.fresh(level)).collect();
                self.arch
                    .run_range(&sym, &self.plan.net, range, xs, |c| emit(c))?;
                None
            }
            _ => return Err(Error::InvalidParameters("segment run on the wrong side").into()),
        };
        Ok(out)
    }

    /// The whole batch: the input's shares in, the logits' shares out (per output ciphertext).
    async fn run(&mut self, input: Vec<RingShares>) -> Result<Vec<RingShares>, ProtocolError> {
        let mut shares = input;
        let mut relus = 0;
        for i in 0..self.plan.segments.len() {
            let cts = self.m2c(i, shares).await?;
            let name = if i == 0 {
                String::from("m2c:input")
            } else {
                alloc::format!("m2c:relu{relus}")
            };
            self.done(name);
            let y = self.segment(i, cts)?;
            let seg = &self.plan.segments[i];
            let (count, relu_after) = (seg.cts_out, seg.relu_after);
            shares = self.c2m(count, y).await?;
            let what = self.last_name(i);
            self.done(alloc::format!("c2m:{what}"));
            if relu_after {
                shares = self.relu(shares).await?;
                relus += 1;
                self.done(alloc::format!("relu{relus}"));
            }
        }
        Ok(shares)
    }

    /// The report name of segment `i`'s last linear layer (`conv2`, `fc1`, …).
    fn last_name(&self, i: usize) -> String {
        let end = self.plan.segments[i].layers.end;
        let ls = &self.arch.layers[..end];
        let k = |f: fn(&Layer) -> bool| ls.iter().filter(|l| f(l)).count();
        match ls.iter().rev().find(|l| !matches!(l, Layer::Flatten)) {
            Some(Layer::Conv(_)) => alloc::format!("conv{}", k(|l| matches!(l, Layer::Conv(_)))),
            Some(Layer::Linear(_)) => alloc::format!("fc{}", k(|l| matches!(l, Layer::Linear(_)))),
            // An empty segment (two adjacent ReLUs, or a ReLU first): name it by the ReLUs
            // before its end.
            _ => match k(|l| matches!(l, Layer::Relu)) {
                0 => String::from("input"),
                r => alloc::format!("relu{r}"),
            },
        }
    }
}

/// The client (P0) on one batch: `x` holds `plan.batch` images (`[b][c][y][x]`), of which the
/// first `valid` are real (public; the rest must be zero). The images are packed and brought in
/// through M2C; the client takes part in every conversion and ReLU and returns the logits
/// `[b][class]` of the `valid` images alone (no other slot is opened). In the pixel-wise layout
/// only the `valid` slots go through ReLU. `arch` is the public architecture the plan was made
/// from. The party must have run [`Party::setup`].
#[allow(clippy::too_many_arguments)]
pub async fn client_run<B: PolyBackend, R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    ck: &Ckks<B>,
    sk: &SecretKey,
    plan: &HybridPlan,
    arch: &Network,
    x: &[f64],
    valid: usize,
    progress: &mut dyn FnMut(&StepCost),
) -> Result<Vec<f64>, ProtocolError> {
    let h = HybridRun::client(p, ck, sk, &MPC_CONFIG)?;
    let packed = plan.net.input.pack(x)?;
    let shares = packed
        .iter()
        .map(|v| h.share_input(v, LOG_BOUND))
        .collect::<Result<_, _>>()?;
    Run::new(h, plan, arch, valid, progress)?
        .batch(shares)
        .await?
        .ok_or(Error::InvalidParameters("no logits").into())
}

/// The words at `at` (positions `ct·slots + slot`) of the per-ciphertext share vectors.
fn pick(out: &[RingShares], at: &[usize], slots: usize) -> Result<Vec<u64>, ProtocolError> {
    at.iter()
        .map(|&i| {
            out.get(i / slots)
                .and_then(|s| s.as_slice().get(i % slots).copied())
                .ok_or_else(|| {
                    Error::Shape {
                        what: "logit shares at the opening",
                        expected: at.len(),
                        found: out.len() * slots,
                    }
                    .into()
                })
        })
        .collect()
}

/// The server (P1) on one batch of `valid` real images (public): evaluates `net`'s linear layers
/// on ciphertexts and takes part in every conversion and ReLU; the logits are opened to the
/// client only. Takes public key material only. The party must have run [`Party::setup`].
pub async fn server_run<B: PolyBackend, R: RngCore + CryptoRng>(
    p: &mut Party<R>,
    keys: ServerKeys<'_, B>,
    plan: &HybridPlan,
    net: &Network,
    valid: usize,
    progress: &mut dyn FnMut(&StepCost),
) -> Result<(), ProtocolError> {
    let h = HybridRun::server(p, keys, plan.slots, net, &MPC_CONFIG)?;
    let input = vec![RingShares::new(vec![0u64; plan.slots]); plan.net.input.ciphertexts()];
    Run::new(h, plan, net, valid, progress)?
        .batch(input)
        .await?;
    Ok(())
}

/// The ops a segment's dry run counts, summed over the plan (the server's CKKS work per batch).
pub fn dry_counts(plan: &HybridPlan, arch: &Network) -> crate::Result<(OpCounts, Vec<i64>)> {
    let sym = SymExec::new(plan.slots);
    for s in &plan.segments {
        let xs = (0..s.cts_in).map(|_| sym.fresh(s.m2c.level())).collect();
        arch.run_range(&sym, &plan.net, s.layers.clone(), xs, |_| {})?;
    }
    Ok((sym.counts(), sym.rotations_used()))
}
