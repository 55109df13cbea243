//! The kernel plan of one attention block: its shape, and everything the kernels derive from it
//! (segment counts, the score baby size `β`, head blocks, the BSGS splits of the projections and
//! the layouts between the stages). Plain data below every kernel: the projection, score and value
//! kernels read it, nothing here runs a ciphertext operation.

use crate::error::{Error, Result};
use crate::packing::{k_min, ChannelMap, PLayout, ScoreStream};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The shape of one attention block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttnShape {
    /// Tokens `m` (segment length; even).
    pub m: usize,
    /// Model width `d`.
    pub d: usize,
    /// Heads `H` (`d_h = d/H`).
    pub heads: usize,
    /// Slots per ciphertext `n`.
    pub slots: usize,
}

impl AttnShape {
    /// BERT-base attention at `n = 16384` slots (Table II): `m = 128`, `d = 768`, `H = 12`.
    pub const BERT_BASE: AttnShape = AttnShape {
        m: 128,
        d: 768,
        heads: 12,
        slots: 16384,
    };
    /// MiniLM (`m = 128`, `d = 384`, `H = 12`) at `n = 16384` slots.
    pub const MINILM: AttnShape = AttnShape {
        m: 128,
        d: 384,
        heads: 12,
        slots: 16384,
    };
}

/// Everything the kernels derive from a shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttnPlan {
    /// The shape.
    pub shape: AttnShape,
    /// Head width `d_h`.
    pub d_h: usize,
    /// Segments per ciphertext `N_seg = n/m`.
    pub n_seg: usize,
    /// Active segments of `Q`/`K` blocks: the largest multiple of `H` not above `N_seg`.
    pub c_s: usize,
    /// `Q`/`K` blocks `B = ⌈d/C⌉`.
    pub b_s: usize,
    /// Score baby size `β | m`.
    pub beta: usize,
    /// `g = m/β` (even).
    pub g: usize,
    /// Heads per value block `H_blk` (a divisor of `H_P` with `H_blk·d_h ≤ N_seg`).
    pub h_blk: usize,
    /// Segment stride of a head in the minimal `P` packing, `S_P = m/2`.
    pub s_p: usize,
    /// Heads per `P` ciphertext `H_P = N_seg/(m/2)`.
    pub h_p: usize,
    /// `P` ciphertexts `⌈H/H_P⌉ = K_min(P)`.
    pub p_cts: usize,
    /// Value blocks `B_V = ⌈H/H_blk⌉`.
    pub b_v: usize,
    /// BSGS of the `Q/K/V` projection.
    pub proj_qkv: ProjConfig,
    /// BSGS of the fused `Q/K` projection.
    pub proj_fused: ProjConfig,
    /// BSGS of the output projection.
    pub proj_out: ProjConfig,
    /// The value kernel's `Φ` bank: `0` rotates `P` once per distinct shift (the paper's
    /// hoisted bank, Table II's counts); `G > 0` splits each shift `δ = G·a + b` into a
    /// hoisted baby step `b < G` and a lazy giant step per `(block, t, a)`, with the masks
    /// pre-rotated, so that only `G` baby and `⌈span/G⌉` giant Galois keys are needed instead of
    /// one per shift ([`AttnPlan::with_phi_bsgs`]).
    pub phi_bsgs: usize,
}

impl AttnPlan {
    /// The plan with automatic `β` (minimizing score-kernel rotations).
    pub fn new(shape: AttnShape) -> Result<Self> {
        Self::with_beta(shape, None)
    }

    /// The plan with a given `β` (or automatic).
    pub fn with_beta(shape: AttnShape, beta: Option<usize>) -> Result<Self> {
        let AttnShape { m, d, heads, slots } = shape;
        if m < 2 || m % 2 != 0 || slots % m != 0 || heads == 0 || d % heads != 0 {
            return Err(Error::InvalidParameters("attention shape"));
        }
        let n_seg = slots / m;
        let d_h = d / heads;
        let c_s = (n_seg / heads) * heads;
        if c_s == 0 {
            return Err(Error::InvalidParameters("fewer segments than heads"));
        }
        let b_s = d.div_ceil(c_s);
        let divisors: Vec<usize> = (1..=m)
            .filter(|&b| m % b == 0 && (m / b) % 2 == 0)
            .collect();
        let beta = match beta {
            Some(b) if divisors.contains(&b) => b,
            Some(_) => {
                return Err(Error::InvalidParameters(
                    "beta must divide m with m/beta even",
                ))
            }
            None => *divisors
                .iter()
                .min_by_key(|&&b| {
                    let g = m / b;
                    // m × (banks + export: 2 rotations per t with s ≠ 0, 1 otherwise)
                    m * b_s * (2 * (b - 1) + g) + (m / 2) * (2 * m - g)
                })
                .unwrap(),
        };
        // Minimal P: H_P = N_seg/(m/2) heads per ciphertext, head h̃ pair t in segment h̃·m/2 + t.
        let s_p = m / 2;
        let h_p = n_seg / s_p;
        if h_p == 0 || d_h > n_seg {
            return Err(Error::InvalidParameters("a head does not fit a ciphertext"));
        }
        // V blocks: the largest divisor of H_P whose heads fit one ciphertext, so that every
        // value block reads a single P ciphertext.
        let h_blk = (1..=h_p.min(heads))
            .rev()
            .find(|&hb| h_p % hb == 0 && hb * d_h <= n_seg)
            .unwrap_or(1);
        let b_v = heads.div_ceil(h_blk);
        let x_cts = k_min(m * d, slots);
        let proj_qkv = ProjConfig::auto(m, n_seg, slots, x_cts, 2 * b_s + b_v);
        let proj_fused = ProjConfig::auto(m, n_seg, slots, 2 * x_cts, b_s);
        let o_cts = b_v.div_ceil(2);
        let out_cts = k_min(m * d, slots);
        let proj_out = ProjConfig::auto(m, n_seg, slots, o_cts, 2 * out_cts);
        Ok(Self {
            shape,
            d_h,
            n_seg,
            c_s,
            b_s,
            beta,
            g: m / beta,
            h_blk,
            s_p,
            h_p,
            p_cts: heads.div_ceil(h_p),
            b_v,
            proj_qkv,
            proj_fused,
            proj_out,
            phi_bsgs: 0,
        })
    }

    /// The same plan with the value kernel's `Φ` bank split into `g` baby steps and lazy giant
    /// steps (see [`AttnPlan::phi_bsgs`]; `0` restores the per-shift bank).
    pub fn with_phi_bsgs(mut self, g: usize) -> Self {
        self.phi_bsgs = g;
        self
    }

    /// Minimal input/output packing of an `m × d` activation (SCP Rules 2 and 3).
    pub fn x_map(&self) -> ChannelMap {
        ChannelMap::minimal(self.shape.d, self.shape.m, self.shape.slots)
    }
    /// `Q`/`K` layout: segment-column in score order `π_S`.
    pub fn qk_map(&self) -> ChannelMap {
        ChannelMap::score_qk(self.shape.d, self.shape.heads, self.shape.m, self.c_s)
    }
    /// `V` layout: head-major, `H_blk` heads per ciphertext.
    pub fn v_map(&self) -> ChannelMap {
        ChannelMap::head_major(
            self.shape.d,
            self.shape.heads,
            self.shape.m,
            self.h_blk,
            false,
        )
    }
    /// Value-kernel output layout: head-major, blocks paired as real/imaginary parts.
    pub fn o_map(&self) -> ChannelMap {
        ChannelMap::head_major(
            self.shape.d,
            self.shape.heads,
            self.shape.m,
            self.h_blk,
            true,
        )
    }
    /// The score stream exported to MPC.
    pub fn score_stream(&self) -> ScoreStream {
        ScoreStream {
            m: self.shape.m,
            heads: self.shape.heads,
            slots: self.shape.slots,
        }
    }
    /// The minimal folded-diagonal `P` imported from MPC.
    pub fn p_layout(&self) -> PLayout {
        PLayout {
            m: self.shape.m,
            heads: self.shape.heads,
            h_blk: self.h_p,
            s_p: self.s_p,
            slots: self.shape.slots,
        }
    }
}

/// Baby-step giant-step geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjConfig {
    /// Segment length `m`.
    pub m: usize,
    /// Diagonal block size `C` in segments (`C ≤ N_seg`; `C = N_seg` makes `Φ_C` a rotation).
    pub c: usize,
    /// Baby steps `N₁` (`N₂ = ⌈C/N₁⌉`).
    pub n1: usize,
}

impl ProjConfig {
    /// The `N₁` minimizing `inputs·(baby rotations) + accumulators·(giant rotations)`.
    pub fn auto(m: usize, c: usize, slots: usize, inputs: usize, accumulators: usize) -> Self {
        let full = c == slots / m;
        let per = if full { 1 } else { 2 };
        let best = (1..=c)
            .min_by_key(|&n1| {
                let n2 = c.div_ceil(n1);
                per * (inputs * (n1 - 1) + accumulators * (n2 - 1))
            })
            .unwrap_or(1);
        Self { m, c, n1: best }
    }
}
