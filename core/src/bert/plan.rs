//! Planning one private inference of a BERT-architecture encoder: the public plan both parties
//! derive on their own ([`SessionPlan`]), its nonlinear blocks ([`Blocks`]), their boundary
//! bounds and the session's parameter set. The run itself is [`super::run`].
//!
//! # Levels and scales
//!
//! [`SessionPlan::new`] dry-runs every FHE block with a symbolic executor that follows levels
//! and exact scales (the `track` module), and picks for every M2C the lowest level from which the
//! block still ends at or above the shortest admissible C2M level of its output (modulus
//! trimming). Both parties derive the same plan from public data only.
//!
//! # Public information
//!
//! The architecture, `m` and the number of real tokens `valid` (the padding mask) are public.

use super::layout::Layout;
use super::weights::EncoderConfig;
use crate::circuits::eval_part_polys;
use crate::ckks::C64;
use crate::convert::{BoundaryCfg, C2mPlan, M2cPlan, ProtocolError};
use crate::error::Error;
use crate::hybrid::plan::{dry, pick_level, Dry};
use crate::hybrid::track::{ScaleExec, Tracked};
use crate::mpc::MpcConfig;
use crate::nonlinear::gelu::{Gelu, GeluKind, GeluSplit};
use crate::nonlinear::layernorm::{LayerNorm, LnKind};
use crate::nonlinear::softmax::{Mask, Softmax, SoftmaxKind, MBMAX_B};
use crate::packing::{ChannelMap, Mat};
use crate::params::CkksParams;
use crate::transformer::pipeline::{output_projection, qkv_projection, score_kernel, value_kernel};
use crate::transformer::plan::ProjConfig;
use crate::transformer::projection::{project, ProjGroup};
use crate::transformer::{AttnPlan, AttnShape, Exec, OpCounts};
use alloc::vec;
use alloc::vec::Vec;

/// Supported (padded) sequence lengths `m`.
pub const SEQ_LENS: [usize; 4] = [16, 32, 64, 128];

/// The MPC engine configuration of a session (EncFormer's ring: `ℓ = 43`, `F = 13`).
pub const MPC_CONFIG: MpcConfig = MpcConfig::ENCFORMER;

/// `log2` of the largest magnitude each boundary carries (real units), with margin over what
/// all-MiniLM-L6-v2 shows on real sentences (softmax inputs ≲ 46, LayerNorm inputs ≲ 224,
/// GELU inputs ≲ 25). Values beyond a bound break the conversion's correctness argument, and
/// a C2M value `2^k` times over its bound takes `k` bits from the mask's statistical margin.
pub mod bounds {
    /// M2C of a layer input `X` (LayerNorm outputs).
    pub const X: u32 = 8;
    /// M2C of the softmax output `P ∈ [0, 1]`.
    pub const P: u32 = 1;
    /// M2C of `H` (LayerNorm 1 output).
    pub const H: u32 = 8;
    /// M2C of the GELU output.
    pub const G: u32 = 7;
    /// C2M of the scores.
    pub const S: u32 = 7;
    /// C2M of the attention output projection.
    pub const Y: u32 = 9;
    /// C2M of FC1's output (GELU input).
    pub const F1: u32 = 7;
    /// C2M of FC2's output.
    pub const F2: u32 = 9;
    /// M2C of MBMax's output (`|Y| ≤ B^5 < 2^{14.8}`, [`crate::nonlinear::softmax::MBMAX_B`]).
    pub const P_MBMAX: u32 = 15;
    /// M2C of an MBLN output (`X` and `H`): MBLN divides by a public constant instead of the
    /// row's deviation, so its range is the model's (EncFormer's distilled models keep it
    /// small); one bit above the accurate LayerNorm's.
    pub const X_MBLN: u32 = 9;
    /// C2M of FC1's output with the GELU split: the candidates grow as `|x|^4`, and the
    /// complex C2M's fixed-point decoding carries about 15 bits above `F` (at `|x| ≤ 2^7` BOLT's
    /// candidates reach `2^{22.5}`, past it), so the split takes GELU inputs `|x| ≤ 32`
    /// (candidates `< 2^{14.8}`). all-MiniLM-L6-v2's GELU inputs stay below 25.
    pub const F1_SPLIT: u32 = 5;
    /// The largest candidate bound the split accepts (what the complex C2M carries).
    pub const CAND_LIMIT: u32 = 15;
}

/// The boundary bounds of one plan (`log2` of the largest magnitude, real units): the
/// [`bounds`] constants, moved where the plan's [`Blocks`] change a range they fix (MBMax's
/// output, the split's GELU input and candidates). MBLN's outputs and the ranges after MBMax
/// (the attention output) depend on the model's constants: [`bounds::X_MBLN`] assumes a model
/// fitted to them, and a benchmark checks its fit against every bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// M2C of a layer input `X`.
    pub x: u32,
    /// M2C of the softmax output.
    pub p: u32,
    /// M2C of `H`.
    pub h: u32,
    /// M2C of the GELU output.
    pub g: u32,
    /// C2M of the scores.
    pub s: u32,
    /// C2M of the attention output projection.
    pub y: u32,
    /// C2M of FC1's output.
    pub f1: u32,
    /// C2M of FC2's output.
    pub f2: u32,
    /// C2M of the GELU candidates `F0(x)`, `F1(x)` over `|x| ≤ 2^{f1}` (0 without the split;
    /// BOLT's: 15 at `f1 = 5`).
    pub cand: u32,
}

/// The nonlinear blocks of a session. They are part of its public parameters: both parties
/// must plan with the same ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Blocks {
    /// The softmax function.
    pub softmax: SoftmaxKind,
    /// The LayerNorm function.
    pub layernorm: LnKind,
    /// The GELU approximation.
    pub gelu: GeluKind,
    /// Where GELU's candidate polynomials are evaluated.
    pub gelu_split: GeluSplit,
}

impl Default for Blocks {
    fn default() -> Self {
        Self::EXACT
    }
}

impl Blocks {
    /// The checkpoint's own functions: accurate softmax and LayerNorm, the erf GELU, all in MPC.
    pub const EXACT: Blocks = Blocks {
        softmax: SoftmaxKind::Accurate,
        layernorm: LnKind::Accurate,
        gelu: GeluKind::Erf,
        gelu_split: GeluSplit::AllMpc,
    };

    /// EncFormer's configuration (§IV-B): MBMax `(X + c)^5/R_d`, MBLN `(x − μ)/(l·R_d)`, and
    /// BOLT's GELU with the split (CKKS evaluates the two candidates, MPC selects). MBMax and
    /// MBLN are the surrogates of a model distilled for them; on another model they change
    /// the function.
    pub fn encformer(mbmax: (f64, f64), mbln: (f64, f64)) -> Self {
        Blocks {
            softmax: SoftmaxKind::MbMax {
                c: mbmax.0,
                rd: mbmax.1,
            },
            layernorm: LnKind::Mbln {
                l: mbln.0,
                rd: mbln.1,
            },
            gelu: GeluKind::Bolt,
            gelu_split: GeluSplit::CkksCandidates,
        }
    }

    /// Whether CKKS evaluates GELU's candidates.
    pub fn split(&self) -> bool {
        self.gelu_split == GeluSplit::CkksCandidates
    }

    /// GELU's candidate polynomials `[F0, F1]` (ascending coefficients).
    pub fn candidates(&self) -> Vec<Vec<f64>> {
        let (f0, f1) = Gelu { kind: self.gelu }.candidates();
        vec![f0, f1]
    }

    /// The boundary bounds these blocks need; a typed error when the GELU candidates over
    /// `|x| ≤ 2^{F1_SPLIT}` exceed what the conversion carries ([`bounds::CAND_LIMIT`]: the
    /// erf fit's degree-7 candidates do); RMSNorm, which no encoder uses, is refused.
    pub fn bounds(&self) -> Result<Bounds, Error> {
        if self.layernorm == LnKind::Rms {
            return Err(Error::InvalidParameters(
                "RMSNorm is a decoder block, not a BERT encoder's LayerNorm",
            ));
        }
        let mbln = matches!(self.layernorm, LnKind::Mbln { .. });
        let x = if mbln { bounds::X_MBLN } else { bounds::X };
        let p = match self.softmax {
            SoftmaxKind::Accurate => bounds::P,
            SoftmaxKind::MbMax { .. } => {
                debug_assert!(libm::log2(libm::pow(MBMAX_B, 5.0)) < bounds::P_MBMAX as f64);
                bounds::P_MBMAX
            }
        };
        let f1 = if self.split() {
            bounds::F1_SPLIT
        } else {
            bounds::F1
        };
        let cand = if self.split() {
            // Σ|c_k|·R^k bounds |F(x)| on |x| ≤ R.
            let r = libm::exp2(f1 as f64);
            let peak = self
                .candidates()
                .iter()
                .map(|c| c.iter().rev().fold(0.0, |a, k| a * r + k.abs()))
                .fold(0.0, f64::max);
            let b = libm::ceil(libm::log2(peak.max(1.0))) as u32;
            if b > bounds::CAND_LIMIT {
                return Err(Error::InvalidParameters(
                    "the GELU split's candidates exceed what the conversion carries over the FC1 bound",
                ));
            }
            b
        } else {
            0
        };
        Ok(Bounds {
            x,
            p,
            h: x,
            g: bounds::G,
            s: bounds::S,
            y: bounds::Y,
            f1,
            f2: bounds::F2,
            cand,
        })
    }
}

/// Levels at which the M2C conversions encrypt (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Levels {
    /// Layer input `X`.
    pub x: usize,
    /// Softmax output `P`.
    pub p: usize,
    /// LayerNorm-1 output `H`.
    pub h: usize,
    /// GELU output `G`.
    pub g: usize,
}

/// Everything public both parties derive from `(params, architecture, m)`: the kernel plan, the
/// layouts, the conversion plans per boundary and the Galois steps.
#[derive(Clone, Debug)]
pub struct SessionPlan {
    /// The architecture.
    pub cfg: EncoderConfig,
    /// Padded sequence length.
    pub m: usize,
    /// Slots per ciphertext (sparse packing when below `N/2`).
    pub slots: usize,
    /// The attention kernels' plan.
    pub attn: AttnPlan,
    /// M2C levels.
    pub levels: Levels,
    /// FHE operations of one layer's blocks, from the dry run: `qkv+score`, `value+out`,
    /// `fc1`, `fc2`.
    pub dry_counts: [OpCounts; 4],
    /// The nonlinear blocks (both parties must agree; part of the session's public
    /// parameters): [`Blocks::EXACT`] by default (the checkpoint's GELU within `7·10⁻⁴`);
    /// `Blocks { gelu: GeluKind::Bolt, ..Blocks::EXACT }` for a third fewer bytes at
    /// `9.5·10⁻³`; [`Blocks::encformer`].
    pub blocks: Blocks,
    /// The boundary bounds of these blocks.
    pub bounds: Bounds,
    pub(super) f_map: ChannelMap,
    pub(super) fc1: ProjConfig,
    pub(super) fc2: ProjConfig,
    pub(super) m2c: [M2cPlan; 4],
    pub(super) c2m: [C2mPlan; 4],
    /// The GELU candidates' C2M (with the split).
    pub(super) c2m_cand: Option<C2mPlan>,
    pub(super) lay_x: Layout,
    pub(super) lay_f: Layout,
    pub(super) lay_s: Layout,
    pub(super) lay_p: Layout,
    rotations: Vec<i64>,
}

/// Indices of the M2C plans.
pub(super) const M_X: usize = 0;
pub(super) const M_P: usize = 1;
pub(super) const M_H: usize = 2;
pub(super) const M_G: usize = 3;
/// Indices of the C2M plans.
pub(super) const C_S: usize = 0;
pub(super) const C_Y: usize = 1;
pub(super) const C_F1: usize = 2;
pub(super) const C_F2: usize = 3;

fn cfg_b(b: u32) -> BoundaryCfg {
    BoundaryCfg {
        ring: MPC_CONFIG.ring,
        sigma: MPC_CONFIG.sigma,
        log_bmax: b,
    }
}

fn zero_fn(_: usize, _: usize) -> C64 {
    C64::default()
}

impl SessionPlan {
    /// Plans a session with the checkpoint's own functions ([`Blocks::EXACT`]); typed error
    /// when the shape or parameters do not fit.
    pub fn new(params: &CkksParams, cfg: &EncoderConfig, m: usize) -> Result<Self, ProtocolError> {
        Self::with_blocks(params, cfg, m, Blocks::EXACT)
    }

    /// Plans a session with the nonlinear blocks `blocks`; typed error when the shape, the
    /// parameters or the blocks' ranges do not fit.
    pub fn with_blocks(
        params: &CkksParams,
        cfg: &EncoderConfig,
        m: usize,
        blocks: Blocks,
    ) -> Result<Self, ProtocolError> {
        cfg.validate()?;
        let bnd = blocks.bounds()?;
        // The surrogates' constants are checked here, before any key is made.
        Gelu { kind: blocks.gelu }.validate(MPC_CONFIG.ring)?;
        if !SEQ_LENS.contains(&m) {
            return Err(Error::InvalidParameters("sequence length (16, 32, 64 or 128)").into());
        }
        let (d, heads) = (cfg.hidden, cfg.heads);
        let n_max = params.n() / 2;
        let mut slots = (m * d / 2).next_power_of_two().clamp(2 * m, n_max);
        let attn = loop {
            let shape = AttnShape { m, d, heads, slots };
            match AttnPlan::new(shape) {
                Ok(p) => break p,
                Err(_) if slots < n_max => slots *= 2,
                Err(e) => return Err(e.into()),
            }
        };
        // One baby-step grid for every projection and for the value kernel's Φ bank, so that
        // they share their Galois keys; the grid that minimizes key switches plus twice the keys
        // (a key costs its generation and ~N·(L+1+K)·8 bytes on the wire once per session).
        let n_seg = slots / m;
        let mut best: Option<(u64, Self)> = None;
        let mut last = None;
        for g in [8usize, 16, 32, 64].into_iter().filter(|&g| g <= n_seg) {
            match Self::build(params, cfg, m, slots, attn.clone(), g, blocks, bnd) {
                Ok(p) => {
                    let cost = p.dry_counts.iter().map(|c| c.key_switches()).sum::<u64>()
                        + 2 * p.rotations.len() as u64;
                    if best.as_ref().is_none_or(|b| cost < b.0) {
                        best = Some((cost, p));
                    }
                }
                Err(e) => last = Some(e),
            }
        }
        match (best, last) {
            (Some((_, p)), _) => {
                p.softmax(m).validate(MPC_CONFIG.ring)?;
                p.layernorm().validate(MPC_CONFIG.ring)?;
                Ok(p)
            }
            (None, Some(e)) => Err(e),
            (None, None) => Err(Error::InvalidParameters("no baby-step grid fits").into()),
        }
    }

    /// The plan with baby-step grid `g` (every projection's `N₁` and the `Φ` bank's `G`).
    #[allow(clippy::too_many_arguments)]
    fn build(
        params: &CkksParams,
        cfg: &EncoderConfig,
        m: usize,
        slots: usize,
        attn: AttnPlan,
        g: usize,
        blocks: Blocks,
        bnd: Bounds,
    ) -> Result<Self, ProtocolError> {
        let (d, ffn) = (cfg.hidden, cfg.ffn);
        let mut attn = attn.with_phi_bsgs(g);
        for pc in [&mut attn.proj_qkv, &mut attn.proj_fused, &mut attn.proj_out] {
            pc.n1 = g.min(pc.c);
        }
        let x_map = attn.x_map();
        let f_map = ChannelMap::minimal(ffn, m, slots);
        let n_seg = slots / m;
        let fc1 = ProjConfig {
            m,
            c: n_seg,
            n1: g.min(n_seg),
        };
        let fc2 = fc1;
        let primes: Vec<f64> = params.q().iter().map(|q| q.value() as f64).collect();
        let delta = params.default_scale();
        let z = Mat::zeros(d, d);

        // Attention, first half: X → Q, K, V (+ biases) → S.
        let block_a = |lx: usize| -> Option<Dry> {
            dry::<()>(slots, &primes, |ex| {
                let x: Vec<_> = (0..x_map.cts).map(|_| ex.fresh(lx, delta)).collect();
                let (q, k, _v) = qkv_projection(ex, &attn, &x, &z, &z, &z)?;
                score_kernel(ex, &attn, &q, &k)
            })
            .map(|r| r.0)
        };
        let (lx, c2m_s, dry_a) = pick_level(params, slots, cfg_b(bnd.s), block_a)?;
        // Attention, second half: P, V → O → Y, with the lowest P level that loses nothing.
        let v_at = |ex: &ScaleExec| -> crate::Result<Vec<Tracked>> {
            let x: Vec<_> = (0..x_map.cts).map(|_| ex.fresh(lx, delta)).collect();
            Ok(qkv_projection(ex, &attn, &x, &z, &z, &z)?.2)
        };
        let block_b = |lp: usize| -> Option<Dry> {
            dry::<()>(slots, &primes, |ex| {
                let v = v_at(ex)?;
                let before = ex.counts();
                let p: Vec<_> = (0..attn.p_cts).map(|_| ex.fresh(lp, delta)).collect();
                let o = value_kernel(ex, &attn, &p, &v)?;
                let y = output_projection(ex, &attn, &o, &z)?;
                let _ = before;
                Ok(y)
            })
            .map(|r| r.0)
        };
        let (lp, c2m_y, mut dry_b) = pick_level(params, slots, cfg_b(bnd.y), block_b)?;
        // The value block's own counts (without V's projection, counted in block A).
        let v_counts = dry::<()>(slots, &primes, v_at)
            .map(|r| r.0.counts)
            .unwrap_or_default();
        dry_b.counts = dry_b.counts.since(&v_counts);
        let fc = |in_map: &ChannelMap, out_map: &ChannelMap, cfg: &ProjConfig, l: usize| {
            dry::<()>(slots, &primes, |ex| {
                let x: Vec<_> = (0..in_map.cts).map(|_| ex.fresh(l, delta)).collect();
                let g = [ProjGroup {
                    out: out_map,
                    weight: &zero_fn,
                    raw: false,
                }];
                Ok(project(ex, cfg, &x, in_map, &g)?.pop().unwrap_or_default())
            })
            .map(|r| r.0)
        };
        // With the split, FC1 is followed by its bias and the candidates `F0`, `F1` (at the
        // input's scale, `part_poly_depth` levels down); they bound the level of `H`.
        let polys = blocks.candidates();
        let fc1_split = |l: usize| {
            dry::<()>(slots, &primes, |ex| {
                let x: Vec<_> = (0..x_map.cts).map(|_| ex.fresh(l, delta)).collect();
                let g = [ProjGroup {
                    out: &f_map,
                    weight: &zero_fn,
                    raw: false,
                }];
                let mut f = project(ex, &fc1, &x, &x_map, &g)?.pop().unwrap_or_default();
                let mut first = None;
                for ct in f.iter_mut() {
                    ex.add_plain(ct, &|| vec![C64::default(); slots])?;
                    let c = eval_part_polys(ex, ct, ct.scale, ct.scale, &polys)?;
                    first = first.or(c.first().copied());
                }
                Ok(first.into_iter().collect())
            })
            .map(|r| r.0)
        };
        let (lh, c2m_fc1, dry_f1) = if blocks.split() {
            pick_level(params, slots, cfg_b(bnd.cand), fc1_split)?
        } else {
            pick_level(params, slots, cfg_b(bnd.f1), |l| {
                fc(&x_map, &f_map, &fc1, l)
            })?
        };
        let (c2m_f1, c2m_cand) = if blocks.split() {
            // The candidates keep FC1's output scale.
            let x = C2mPlan::shortest_admissible(params, slots, dry_f1.scale, cfg_b(bnd.f1))
                .map(C2mPlan::local_rounding)?;
            (x, Some(c2m_fc1))
        } else {
            (c2m_fc1, None)
        };
        let (lg, c2m_f2, dry_f2) = pick_level(params, slots, cfg_b(bnd.f2), |l| {
            fc(&f_map, &x_map, &fc2, l)
        })?;
        let m2c = |l: usize, b: u32| M2cPlan::new(params, l, slots, delta, cfg_b(b));
        let m2c = [
            m2c(lx, bnd.x)?,
            m2c(lp, bnd.p)?,
            m2c(lh, bnd.h)?,
            m2c(lg, bnd.g)?,
        ];
        let mut rotations: Vec<i64> = [&dry_a, &dry_b, &dry_f1, &dry_f2]
            .iter()
            .flat_map(|d| d.rotations.iter().copied())
            .collect();
        rotations.sort_unstable();
        rotations.dedup();
        Ok(Self {
            cfg: *cfg,
            m,
            slots,
            levels: Levels {
                x: lx,
                p: lp,
                h: lh,
                g: lg,
            },
            dry_counts: [dry_a.counts, dry_b.counts, dry_f1.counts, dry_f2.counts],
            blocks,
            bounds: bnd,
            lay_x: Layout::channels(&x_map, d, slots)?,
            lay_f: Layout::channels(&f_map, ffn, slots)?,
            lay_s: Layout::scores(&attn.score_stream())?,
            lay_p: Layout::probs(&attn.p_layout())?,
            attn,
            f_map,
            fc1,
            fc2,
            m2c,
            c2m: [c2m_s, c2m_y, c2m_f1, c2m_f2],
            c2m_cand,
            rotations,
        })
    }

    /// Galois steps the client must generate keys for (conjugation is always needed too).
    pub fn rotations(&self) -> &[i64] {
        &self.rotations
    }

    /// The C2M levels after trimming: scores, attention output, FC1, FC2.
    pub fn c2m_levels(&self) -> [usize; 4] {
        [0, 1, 2, 3].map(|i| self.c2m[i].level())
    }

    /// Each FHE block of a layer with the level its input is encrypted at (M2C, exactly the
    /// block's depth above its output) and the level its output is converted at (C2M, after
    /// trimming): `(block, level in, level out)` for `qkv+score`, `value+out`, `fc1`, `fc2`.
    /// Every block's ciphertexts live in the modulus of its own levels only, EncFormer's
    /// near-minimal parameters per block within one ring dimension.
    pub fn fhe_block_levels(&self) -> [(&'static str, usize, usize); 4] {
        let out = self.c2m_levels();
        let l = &self.levels;
        [
            ("qkv+score", l.x, out[0]),
            ("value+out", l.p, out[1]),
            ("fc1", l.h, out[2]),
            ("fc2", l.g, out[3]),
        ]
    }

    /// The softmax block of a sentence with `valid` real tokens.
    pub fn softmax(&self, valid: usize) -> Softmax {
        let m = self.m;
        Softmax {
            rows: self.cfg.heads * m,
            cols: m,
            mask: if valid >= m {
                Mask::None
            } else {
                Mask::Padding { valid }
            },
            kind: self.blocks.softmax,
        }
    }

    /// The LayerNorm blocks.
    pub fn layernorm(&self) -> LayerNorm {
        LayerNorm {
            rows: self.m,
            cols: self.cfg.hidden,
            eps: self.cfg.ln_eps,
            kind: self.blocks.layernorm,
            affine: true,
        }
    }

    /// The GELU block.
    pub fn gelu(&self) -> Gelu {
        Gelu {
            kind: self.blocks.gelu,
        }
    }

    /// The C2M level of the GELU candidates, with the split.
    pub fn c2m_cand_level(&self) -> Option<usize> {
        self.c2m_cand.as_ref().map(C2mPlan::level)
    }

    pub(super) fn check_valid(&self, valid: usize) -> Result<(), ProtocolError> {
        if valid == 0 || valid > self.m {
            return Err(Error::InvalidParameters("valid tokens must be in 1..=m").into());
        }
        Ok(())
    }
}

/// The session's CKKS parameter set: `N = 2^15`, `q_0` of 60 bits and six 40-bit levels (the
/// attention half needs five levels above the trimmed C2M level 1), one key-switching digit
/// (the smallest Galois keys at this depth), 128-bit secure by the HE standard (660 bits of
/// `QP`, the bound at `N = 2^15` is 881).
pub fn session_params() -> crate::Result<CkksParams> {
    crate::params::ckks_128_custom(15, 6, 1).validate()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every supported length plans at the session parameters for MiniLM: the attention half
    /// fits the levels, every conversion trims to level 1, and the dry run's key switches are
    /// what the report will print.
    #[test]
    fn minilm_plans_at_every_length() {
        let p = session_params().unwrap();
        for m in SEQ_LENS {
            let plan = SessionPlan::new(&p, &EncoderConfig::MINILM_L6, m).unwrap();
            assert!(plan.levels.x <= p.max_level() && plan.levels.p <= plan.levels.x);
            assert_eq!(plan.c2m_levels(), [1; 4], "m = {m}");
            // Each block enters above its output by at least its depth: the attention half
            // (QKᵀ after the projections) needs the most.
            let b = plan.fhe_block_levels();
            assert_eq!(b.map(|x| x.0), ["qkv+score", "value+out", "fc1", "fc2"]);
            assert!(
                b.iter().all(|&(_, i, o)| i > o && i <= p.max_level()),
                "{b:?}"
            );
            assert!(b[0].1 > b[2].1 && b[0].1 > b[3].1, "{b:?}");
            assert!(!plan.rotations().is_empty());
            std::println!(
                "m={m} keys {} rot {:?} grid {}",
                plan.rotations().len(),
                plan.dry_counts
                    .iter()
                    .map(|c| c.rotations)
                    .collect::<Vec<_>>(),
                plan.attn.phi_bsgs
            );
            assert!(plan.dry_counts.iter().all(|c| c.pt_mults > 0));
            // Block A holds the score products (H·m/2 folded diagonals per pair of heads).
            assert!(plan.dry_counts[0].ct_mults > 0 && plan.dry_counts[2].ct_mults == 0);
        }
    }

    /// EncFormer's blocks plan at every length: the GELU candidates take `part_poly_depth(4)`
    /// more levels below `H`, their conversion trims to the same level as FC1's own, and the
    /// surrogates move the bounds they own. The erf fit's degree-7 candidates do not fit the
    /// conversion over `|x| ≤ 32` and are refused with a typed error.
    #[test]
    fn encformer_blocks_plan_at_every_length() {
        let p = session_params().unwrap();
        let enc = Blocks::encformer((8.0, 9200.0), (1.0, 1.0));
        let b = enc.bounds().unwrap();
        assert_eq!((b.p, b.x, b.h, b.f1, b.cand), (15, 9, 9, 5, 15));
        for m in SEQ_LENS {
            let exact = SessionPlan::new(&p, &EncoderConfig::MINILM_L6, m).unwrap();
            let plan = SessionPlan::with_blocks(&p, &EncoderConfig::MINILM_L6, m, enc).unwrap();
            assert_eq!(plan.c2m_cand_level(), Some(1), "m = {m}");
            assert_eq!(plan.c2m_levels(), [1; 4], "m = {m}");
            assert_eq!(
                plan.levels.h,
                exact.levels.h + crate::circuits::part_poly_depth(4),
                "m = {m}"
            );
            // One conjugation and 6 products per FC1 output ciphertext.
            let fc1 = plan.dry_counts[2];
            assert_eq!(exact.dry_counts[2].ct_mults, 0);
            let conj = fc1
                .conjugations
                .saturating_sub(exact.dry_counts[2].conjugations);
            assert_eq!(fc1.ct_mults, 6 * conj, "m = {m}");
            assert!(conj > 0);
        }
        let erf = Blocks {
            gelu: GeluKind::Erf,
            ..enc
        };
        assert!(erf.bounds().is_err());
        assert!(SessionPlan::with_blocks(&p, &EncoderConfig::MINILM_L6, 16, erf).is_err());
        // RMSNorm is a decoder's block: no encoder plan takes it.
        let rms = Blocks {
            layernorm: LnKind::Rms,
            ..Blocks::EXACT
        };
        assert!(SessionPlan::with_blocks(&p, &EncoderConfig::MINILM_L6, 16, rms).is_err());
        // Surrogate constants outside their blocks' ranges are refused at planning, before
        // any key is made.
        for bad in [
            Blocks::encformer((8.0, 0.0), (1.0, 1.0)),
            Blocks::encformer((8.0, 9200.0), (0.0, 1.0)),
            Blocks::encformer((f64::NAN, 9200.0), (1.0, 1.0)),
        ] {
            assert!(
                SessionPlan::with_blocks(&p, &EncoderConfig::MINILM_L6, 16, bad).is_err(),
                "{bad:?}"
            );
        }
    }

    /// Lengths outside the supported set and a non-dividing head count are refused.
    #[test]
    fn bad_shapes_are_refused() {
        let p = session_params().unwrap();
        assert!(SessionPlan::new(&p, &EncoderConfig::MINILM_L6, 24).is_err());
        let bad = EncoderConfig {
            heads: 7,
            ..EncoderConfig::MINILM_L6
        };
        assert!(SessionPlan::new(&p, &bad, 16).is_err());
    }
}
