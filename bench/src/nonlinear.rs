//! `veil-bench nonlinear`: the nonlinear MPC blocks of [`veil_core::nonlinear`] at BERT-base shapes
//! (softmax 12×128×128, GELU 128×3072, LayerNorm 128×768) and the CNN activations (max pool
//! 64×32×32, FEnc2's quadratic on 65,536 elements), both parties as threads of this process over
//! TCP on 127.0.0.1 (or the in-memory duplex), `ℓ = 43`, `F = 13`, IKNP OT.
//!
//! Per block and variant: wall time (the slower party), thread CPU time (the busier party),
//! bytes per element (both directions; offline, online and their sum), rounds (offline, online,
//! and the whole run: exact, from the session depth), COTs per element, the bytes per element a
//! silent OT at 1 bit per COT would give, and the max and mean absolute error of the
//! reconstructed output against the block's `f64` reference (reconstructed after the timed run,
//! outside the timing). Each party seeds ChaCha20 from OS entropy; the one-time base-OT setup is
//! excluded and reported apart. The SPU columns come from [`crate::peers`]: measured in this run
//! (`--peers`; then, and only then, the ratio columns `t/spu`, `B/spu`, ... divide by them), and
//! the figures recorded on [`crate::peers::SPU_REFERENCE_DATE`] in
//! `../shared/peers/mpc/README.md`, printed in their own columns under their date and never
//! divided into.
//!
//! The report also counts the rounds of one Transformer layer on EncFormer's surrogate path,
//! `MBMax + GELU (split) + 2·MBLN`, against the paper's 7 (3 + 4 + 0).

use crate::error::{invalid, mpc};
use crate::mpc::{
    amortize, est_silent_bytes, measure, new_party, steady_bytes_per_cot, timed_setup,
    AmortizedRow, Measured, OtMode, TransportKind,
};
use crate::peers::{live_or_note, opt_cell, opt_u_cell, PeerFigures, SpuColumns, SpuSources};
use crate::progress::Progress;
use crate::BenchError;
use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, RngCore, SeedableRng};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::Duration;
use veil_core::mpc::ot::silent::SilentParams;
use veil_core::mpc::{MpcConfig, Party, PartyId, RingCfg, RingShares, Stats};
use veil_core::nonlinear::fixed::{self, ErrStats};
use veil_core::nonlinear::gelu::{Gelu, GeluKind};
use veil_core::nonlinear::layernorm::{LayerNorm, LnAffine, LnKind};
use veil_core::nonlinear::pool::MaxPool;
use veil_core::nonlinear::quad::{Quad, QuadKind};
use veil_core::nonlinear::silu::Silu;
use veil_core::nonlinear::softmax::{Mask, Softmax, SoftmaxKind};
use veil_host::harness::run_pair;
use veil_host::mpc::{drive, DriverError};
use veil_host::transport::{Transport, TransportConfig};

/// The tensor shapes of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shapes {
    /// Softmax: heads × rows × cols (softmax over the last axis).
    pub softmax: (usize, usize, usize),
    /// GELU: rows × cols.
    pub gelu: (usize, usize),
    /// LayerNorm: rows × cols (normalized over the last axis).
    pub layernorm: (usize, usize),
    /// Max pool: channels × height × width.
    pub maxpool: (usize, usize, usize),
    /// FEnc2's quadratic: elements.
    pub quad: usize,
}

impl Shapes {
    /// BERT-base: softmax 12×128×128, GELU 128×3072, LayerNorm 128×768; max pool 64×32×32 and
    /// the quadratic on as many elements (65,536).
    pub const BERT: Shapes = Shapes {
        softmax: (12, 128, 128),
        gelu: (128, 3072),
        layernorm: (128, 768),
        maxpool: (64, 32, 32),
        quad: 65536,
    };
    /// A quick run for CI smoke: softmax 2×16×16, GELU 16×64, LayerNorm 16×64, max pool
    /// 4×8×8, the quadratic on 256 elements.
    pub const SMALL: Shapes = Shapes {
        softmax: (2, 16, 16),
        gelu: (16, 64),
        layernorm: (16, 64),
        maxpool: (4, 8, 8),
        quad: 256,
    };
}

/// The blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Block {
    /// Softmax over rows.
    Softmax,
    /// GELU.
    Gelu,
    /// LayerNorm over rows (no affine: SPU's script has none).
    LayerNorm,
    /// 2×2 max pooling.
    MaxPool,
    /// FEnc2's `a·x² + b·x + c`.
    Quad,
    /// SiLU `x·σ(x)` (Llama-architecture MLPs).
    Silu,
}

impl Block {
    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Block::Softmax => "softmax",
            Block::Gelu => "gelu",
            Block::LayerNorm => "layernorm",
            Block::MaxPool => "maxpool",
            Block::Quad => "quad",
            Block::Silu => "silu",
        }
    }
}

/// The variants benchmarked, by block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Variant {
    /// Softmax: row max, saturated exponential, sum, reciprocal, product.
    SoftmaxAccurate,
    /// EncFormer's MBMax surrogate `(X + c)^5 / R_d` ([`MBMAX_PARAMS`]).
    SoftmaxMbMax,
    /// GELU, BOLT's piecewise quartic, everything in MPC.
    GeluBolt,
    /// GELU, BOLT's form with EncFormer's split: CKKS evaluates the candidates (here they
    /// are shared in plaintext as the CKKS side would hand them over), MPC compares and
    /// multiplexes.
    GeluBoltSplit,
    /// GELU, GPT-2's tanh form (degree-7 fit), everything in MPC.
    GeluTanh,
    /// GELU, exact-erf form (degree-7 fit), everything in MPC.
    GeluErf,
    /// LayerNorm: mean, variance, reciprocal square root, one product (no elementwise
    /// affine, as in SPU's script).
    LnAccurate,
    /// The accurate LayerNorm with a checkpoint's `γ`, `β` held by P0 (the owner product).
    LnAccurateAffine,
    /// MBLN `(x − μ)/(l·R_d)` by `LayerNorm::run` without affine: a truncation and a
    /// public product.
    LnMbln,
    /// MBLN in EncFormer's 0-round form (`LayerNorm::mbln_local`: `D` and the public `κ`
    /// folded into the next CKKS layer; the error is of `κ·D`).
    LnMblnLocal,
    /// Max pooling by a two-level tree of `max_pair`.
    MaxPool,
    /// Max pooling, then ReLU on the pooled tensor (ReLU + pool fused).
    MaxPoolRelu,
    /// The quadratic with the square by one Gilboa cross term.
    QuadSquare,
    /// The quadratic with the square by a Beaver product.
    QuadBeaver,
    /// RMSNorm `x/√(mean(x²) + ε)` (Llama-architecture decoders), no affine.
    LnRms,
    /// SiLU as ReLU plus two degree-7 pieces of `SiLU − ReLU` on GELU's power tree.
    Silu,
}

/// Every variant, in report order.
pub const ALL_VARIANTS: [Variant; 16] = [
    Variant::SoftmaxAccurate,
    Variant::SoftmaxMbMax,
    Variant::GeluBolt,
    Variant::GeluBoltSplit,
    Variant::GeluTanh,
    Variant::GeluErf,
    Variant::LnAccurate,
    Variant::LnAccurateAffine,
    Variant::LnMbln,
    Variant::LnMblnLocal,
    Variant::MaxPool,
    Variant::MaxPoolRelu,
    Variant::QuadSquare,
    Variant::QuadBeaver,
    Variant::LnRms,
    Variant::Silu,
];

/// The blocks `--blocks` accepts.
pub const ALL_BLOCKS: [&str; 6] = ["softmax", "gelu", "layernorm", "maxpool", "quad", "silu"];

/// MBMax's `(c, R_d)` in the benchmark: scores are `2·N(0, 1)` with large ones up to 40, so
/// `c = 8` keeps `X + c ≥ 0` for all but the far left tail, and `R_d = 9200` puts the
/// saturation bound `A = 7.75·R_d^{1/5} ≈ 48` (the block's `|X + c|·R_d^{−1/5} ≤ 7.75`) just
/// above the largest score plus `c`.
pub const MBMAX_PARAMS: (f64, f64) = (8.0, 9200.0);

/// MBLN's `(l, R_d)` in the benchmark: `l·R_d = 1`, the standard deviation of the unscaled
/// rows (so `|y| ≤ ~140` on the ×30 rows, below the block's `2^8`).
pub const MBLN_PARAMS: (f64, f64) = (1.0, 1.0);

/// LayerNorm's `ε` in the benchmark (SPU's script uses the same).
pub const LN_EPS: f64 = 1e-5;

/// FEnc2's coefficients used by the benchmark: `x²/8 + x/2 + 1/4`.
pub const QUAD_COEFFS: (f64, f64, f64) = (0.125, 0.5, 0.25);

impl Variant {
    /// Its block.
    pub fn block(self) -> Block {
        match self {
            Variant::SoftmaxAccurate | Variant::SoftmaxMbMax => Block::Softmax,
            Variant::GeluBolt | Variant::GeluBoltSplit | Variant::GeluTanh | Variant::GeluErf => {
                Block::Gelu
            }
            Variant::LnAccurate
            | Variant::LnAccurateAffine
            | Variant::LnMbln
            | Variant::LnMblnLocal
            | Variant::LnRms => Block::LayerNorm,
            Variant::MaxPool | Variant::MaxPoolRelu => Block::MaxPool,
            Variant::QuadSquare | Variant::QuadBeaver => Block::Quad,
            Variant::Silu => Block::Silu,
        }
    }

    /// The variant's name (what `--variants` takes).
    pub fn name(self) -> &'static str {
        match self {
            Variant::SoftmaxAccurate => "accurate",
            Variant::SoftmaxMbMax => "mbmax",
            Variant::GeluBolt => "bolt",
            Variant::GeluBoltSplit => "bolt-split",
            Variant::GeluTanh => "tanh",
            Variant::GeluErf => "erf",
            Variant::LnAccurate => "accurate",
            Variant::LnAccurateAffine => "accurate-affine",
            Variant::LnMbln => "mbln",
            Variant::LnMblnLocal => "mbln-local",
            Variant::MaxPool => "maxpool",
            Variant::MaxPoolRelu => "maxpool-relu",
            Variant::QuadSquare => "square",
            Variant::QuadBeaver => "beaver",
            Variant::LnRms => "rms",
            Variant::Silu => "silu",
        }
    }

    /// Input elements at `s`.
    pub fn input_len(self, s: &Shapes) -> usize {
        match self.block() {
            Block::Softmax => s.softmax.0 * s.softmax.1 * s.softmax.2,
            Block::Gelu | Block::Silu => s.gelu.0 * s.gelu.1,
            Block::LayerNorm => s.layernorm.0 * s.layernorm.1,
            Block::MaxPool => s.maxpool.0 * s.maxpool.1 * s.maxpool.2,
            Block::Quad => s.quad,
        }
    }

    /// The shape as the report prints it.
    pub fn shape(self, s: &Shapes) -> String {
        match self.block() {
            Block::Softmax => format!("{}x{}x{}", s.softmax.0, s.softmax.1, s.softmax.2),
            Block::Gelu | Block::Silu => format!("{}x{}", s.gelu.0, s.gelu.1),
            Block::LayerNorm => format!("{}x{}", s.layernorm.0, s.layernorm.1),
            Block::MaxPool => format!("{}x{}x{}", s.maxpool.0, s.maxpool.1, s.maxpool.2),
            Block::Quad => format!("{}", s.quad),
        }
    }

    /// The name of the same computation in `bench_spu.py`, if it has one.
    pub fn spu_op(self, s: &Shapes) -> Option<String> {
        if matches!(self, Variant::LnAccurateAffine | Variant::LnRms) {
            // SPU's script has no affine and no RMSNorm: not the same function
            return None;
        }
        match self.block() {
            Block::Softmax | Block::Gelu | Block::LayerNorm => {
                Some(format!("{}_{}", self.block().name(), self.shape(s)))
            }
            Block::MaxPool | Block::Quad | Block::Silu => None,
        }
    }

    fn pool(s: &Shapes) -> MaxPool {
        MaxPool {
            channels: s.maxpool.0,
            height: s.maxpool.1,
            width: s.maxpool.2,
        }
    }

    fn softmax(self, s: &Shapes) -> Softmax {
        Softmax {
            rows: s.softmax.0 * s.softmax.1,
            cols: s.softmax.2,
            mask: Mask::None,
            kind: if self == Variant::SoftmaxMbMax {
                SoftmaxKind::MbMax {
                    c: MBMAX_PARAMS.0,
                    rd: MBMAX_PARAMS.1,
                }
            } else {
                SoftmaxKind::Accurate
            },
        }
    }

    fn gelu(self) -> Gelu {
        Gelu {
            kind: match self {
                Variant::GeluTanh => GeluKind::Tanh,
                Variant::GeluErf => GeluKind::Erf,
                _ => GeluKind::Bolt,
            },
        }
    }

    fn layernorm(self, s: &Shapes) -> LayerNorm {
        LayerNorm {
            rows: s.layernorm.0,
            cols: s.layernorm.1,
            eps: LN_EPS,
            kind: if matches!(self, Variant::LnAccurate | Variant::LnAccurateAffine) {
                LnKind::Accurate
            } else if self == Variant::LnRms {
                LnKind::Rms
            } else {
                LnKind::Mbln {
                    l: MBLN_PARAMS.0,
                    rd: MBLN_PARAMS.1,
                }
            },
            // SPU's script normalizes only: no γ, β
            affine: self == Variant::LnAccurateAffine,
        }
    }

    fn quad(self) -> Quad {
        Quad {
            a: QUAD_COEFFS.0,
            b: QUAD_COEFFS.1,
            c: QUAD_COEFFS.2,
            kind: if self == Variant::QuadBeaver {
                QuadKind::Beaver
            } else {
                QuadKind::Square
            },
        }
    }

    /// Checks the block's parameters against the ring.
    fn validate(self, s: &Shapes, ring: RingCfg) -> Result<(), BenchError> {
        let r = match self.block() {
            Block::MaxPool => Self::pool(s).validate(ring),
            Block::Quad => self.quad().validate(ring),
            Block::Softmax => self.softmax(s).validate(ring),
            Block::Gelu => self.gelu().validate(ring),
            Block::LayerNorm => self.layernorm(s).validate(ring),
            Block::Silu => Silu.validate(ring),
        };
        r.map_err(mpc("the block's parameters"))
    }

    /// Real inputs from the block's realistic range (see [`draw_inputs`]).
    fn inputs(self, s: &Shapes, g: &mut ChaCha20Rng) -> Vec<f64> {
        let n = self.input_len(s);
        match self.block() {
            // Scores ~ N(0, 2²) like SPU's script, plus one large score per 16 rows.
            Block::Softmax => {
                let cols = s.softmax.2.max(1);
                let mut v: Vec<f64> = (0..n).map(|_| 2.0 * normal(g)).collect();
                for (k, row) in v.chunks_mut(cols).enumerate() {
                    if k % 16 == 0 {
                        let j = (g.next_u32() as usize) % cols;
                        row[j] = 8.0 + 32.0 * unit(g);
                    }
                }
                v
            }
            // 2·N(0, 1) like SPU's script, plus one in 1024 out to ±25.
            Block::Gelu | Block::Silu => (0..n)
                .map(|k| {
                    if k % 1024 == 7 {
                        (5.0 + 20.0 * unit(g)) * if g.next_u32() & 1 == 1 { 1.0 } else { -1.0 }
                    } else {
                        2.0 * normal(g)
                    }
                })
                .collect(),
            // N(0, 1), every 16th row scaled by 30 (residual-stream outliers).
            Block::LayerNorm => {
                let cols = s.layernorm.1.max(1);
                (0..n)
                    .map(|k| {
                        normal(g)
                            * if (k / cols).is_multiple_of(16) {
                                30.0
                            } else {
                                1.0
                            }
                    })
                    .collect()
            }
            Block::MaxPool => (0..n).map(|_| 4.0 * normal(g)).collect(),
            Block::Quad => (0..n).map(|_| 2.0 * normal(g)).collect(),
        }
    }

    /// The block's real function.
    fn f64_reference(self, s: &Shapes, x: &[f64]) -> Vec<f64> {
        match self {
            Variant::SoftmaxAccurate | Variant::SoftmaxMbMax => self.softmax(s).f64_reference(x),
            Variant::GeluBolt | Variant::GeluBoltSplit | Variant::GeluTanh | Variant::GeluErf => {
                self.gelu().f64_reference(x)
            }
            Variant::LnAccurate | Variant::LnMbln | Variant::LnMblnLocal | Variant::LnRms => {
                self.layernorm(s).f64_reference(x, None)
            }
            Variant::Silu => Silu.f64_reference(x),
            Variant::LnAccurateAffine => {
                let (gamma, beta) = ln_affine(s.layernorm.1);
                let aff = LnAffine {
                    gamma: &gamma,
                    beta: &beta,
                };
                self.layernorm(s).f64_reference(x, Some(&aff))
            }
            Variant::MaxPool => Self::pool(s).f64_reference(x),
            Variant::MaxPoolRelu => Self::pool(s)
                .f64_reference(x)
                .into_iter()
                .map(|v| v.max(0.0))
                .collect(),
            Variant::QuadSquare | Variant::QuadBeaver => self.quad().f64_reference(x),
        }
    }

    /// Runs the block on this party's share.
    fn run<R: RngCore + rand_core::CryptoRng>(
        self,
        s: &Shapes,
        p: &mut Party<R>,
        t: &mut dyn Transport,
        inp: &PartyInput,
    ) -> Result<(RingShares, f64), DriverError> {
        let ch = p.channel();
        let y = match self {
            Variant::SoftmaxAccurate | Variant::SoftmaxMbMax => {
                drive(ch, self.softmax(s).run(p, &inp.x), t)
            }
            Variant::GeluBolt | Variant::GeluTanh | Variant::GeluErf => {
                drive(ch, self.gelu().run(p, &inp.x), t)
            }
            Variant::GeluBoltSplit => match inp.extra.as_slice() {
                [f0, f1] => drive(ch, self.gelu().run_split(p, &inp.x, f0, f1), t),
                _ => Err(DriverError::Protocol(
                    veil_core::mpc::MpcError::InvalidInput("GELU split needs F0 and F1"),
                )),
            },
            Variant::LnAccurate | Variant::LnMbln | Variant::LnRms => {
                drive(ch, self.layernorm(s).run(p, &inp.x, None), t)
            }
            Variant::Silu => drive(ch, Silu.run(p, &inp.x), t),
            Variant::LnAccurateAffine => {
                let (gamma, beta) = ln_affine(s.layernorm.1);
                let aff = LnAffine {
                    gamma: &gamma,
                    beta: &beta,
                };
                let mine = p.is_p0().then_some(&aff);
                drive(ch, self.layernorm(s).run(p, &inp.x, mine), t)
            }
            // Local: wrapped in a session so that its counters and depth are accounted
            // like the others (0 bytes, 0 rounds). The output is `D` with the public `κ`
            // (the consumer folds κ into its weights); the error is of `κ·D`.
            Variant::LnMblnLocal => {
                let ring = p.config().ring;
                let ln = self.layernorm(s);
                return drive(ch, async { ln.mbln_local(ring, &inp.x) }, t);
            }
            Variant::MaxPool => drive(ch, Self::pool(s).run(p, &inp.x), t),
            Variant::MaxPoolRelu => drive(ch, Self::pool(s).run_relu(p, &inp.x), t),
            Variant::QuadSquare | Variant::QuadBeaver => drive(ch, self.quad().run(p, &inp.x), t),
        }?;
        Ok((y, 1.0))
    }
}

/// The benchmark's LayerNorm `γ ∈ [0.5, 2]` and `β ∈ [−0.5, 0.5]` (deterministic: the
/// cost does not depend on the values).
fn ln_affine(cols: usize) -> (Vec<f64>, Vec<f64>) {
    let gamma = (0..cols).map(|c| 0.5 + 0.25 * (c % 7) as f64).collect();
    let beta = (0..cols).map(|c| 0.25 * (c % 5) as f64 - 0.5).collect();
    (gamma, beta)
}

/// A standard normal sample (Box–Muller).
fn normal(g: &mut ChaCha20Rng) -> f64 {
    let u1 = (1.0 - unit(g)).max(f64::MIN_POSITIVE);
    let u2 = unit(g);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Uniform in `[0, 1)`.
fn unit(g: &mut ChaCha20Rng) -> f64 {
    (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// One party's inputs of one variant.
struct PartyInput {
    /// Its share of the block's input.
    x: RingShares,
    /// Its shares of further inputs (GELU split: the candidates `F0(x)`, `F1(x)`).
    extra: Vec<RingShares>,
}

/// Both parties' inputs of one variant and the plaintext the f64 reference takes.
struct Drawn {
    /// The input, as the ring holds it (decoded back to reals).
    x: Vec<f64>,
    /// P0's and P1's inputs.
    parts: (PartyInput, PartyInput),
}

/// Draws a variant's input, encodes it at `F` bits and shares it (OS-seeded ChaCha20).
fn draw_inputs(v: Variant, s: &Shapes, ring: RingCfg) -> Result<Drawn, BenchError> {
    let mut g = ChaCha20Rng::from_rng(OsRng)?;
    let real = v.inputs(s, &mut g);
    let ints: Vec<i64> = real.iter().map(|&x| fixed::encode(x, ring.frac)).collect();
    let x: Vec<f64> = ints.iter().map(|&x| fixed::decode(x, ring.frac)).collect();
    let mut share = |vals: &[i64]| {
        let a: Vec<u64> = vals.iter().map(|_| g.next_u64() & ring.mask()).collect();
        let b: Vec<u64> = vals
            .iter()
            .zip(&a)
            .map(|(&x, &a)| ring.sub(ring.from_signed(x), a))
            .collect();
        (RingShares::new(a), RingShares::new(b))
    };
    let (x0, x1) = share(&ints);
    let (mut e0, mut e1) = (Vec::new(), Vec::new());
    if v == Variant::GeluBoltSplit {
        // What the CKKS side hands over: F0(x), F1(x) at F bits (clamped into the ring's
        // signed range; beyond the cutoff they are never selected).
        let (f0, f1) = v.gelu().candidate_values(&x);
        let lim = (1i64 << (ring.ell - 2)) - 1;
        for f in [f0, f1] {
            let fi: Vec<i64> = f
                .iter()
                .map(|&y| fixed::encode(y.clamp(-1e12, 1e12), ring.frac).clamp(-lim, lim))
                .collect();
            let (a, b) = share(&fi);
            e0.push(a);
            e1.push(b);
        }
    }
    Ok(Drawn {
        x,
        parts: (
            PartyInput { x: x0, extra: e0 },
            PartyInput { x: x1, extra: e1 },
        ),
    })
}

/// One party's run: setup wall time and statistics, then one [`Measured`] per variant.
/// Each [`Measured`] holds the party's output share and its public factor (MBLN's 0-round
/// form: `κ`; else 1).
type PartyOut = (f64, Stats, Vec<Measured<(RingShares, f64)>>);

#[allow(clippy::too_many_arguments)]
fn party_main(
    id: PartyId,
    cfg: MpcConfig,
    t: &mut dyn Transport,
    variants: &[Variant],
    shapes: &Shapes,
    inputs: &[&PartyInput],
    bar: &Barrier,
    progress: Option<(&str, bool)>,
    mode: OtMode,
    silent: SilentParams,
) -> Result<PartyOut, BenchError> {
    let rng = ChaCha20Rng::from_rng(OsRng)?;
    let mut p = new_party(id, cfg, rng, mode, silent)?;
    let (setup_s, setup) = timed_setup(&mut p, t, bar)?;
    let mut out = Vec::with_capacity(variants.len());
    let mut bar_progress = progress
        .map(|(transport, quiet)| Progress::new(&format!("bench nonlinear {transport}"), quiet));
    for (k, (&v, inp)) in variants.iter().zip(inputs).enumerate() {
        let what = format!("{}/{}", v.block().name(), v.name());
        let m = measure(&mut p, t, bar, mode.preprocessed(), &what, |p, t| {
            v.run(shapes, p, t, inp)
        })?;
        if let Some((transport, quiet)) = progress {
            if !quiet {
                eprintln!(
                    "bench nonlinear {transport}: {what} {} done in {:.2} s",
                    v.shape(shapes),
                    m.wall_s
                );
            }
        }
        if let Some(pr) = bar_progress.as_mut() {
            pr.update(k + 1, variants.len());
        }
        out.push(m);
    }
    Ok((setup_s, setup, out))
}

/// Benchmark options.
#[derive(Clone, Debug)]
pub struct BenchNonlinearOptions {
    /// Tensor shapes.
    pub shapes: Shapes,
    /// Variants to run, in order.
    pub variants: Vec<Variant>,
    /// Transports.
    pub transports: Vec<TransportKind>,
    /// Engine configuration.
    pub cfg: MpcConfig,
    /// Receive timeout.
    pub timeout: Duration,
    /// SPU measured in this process tree ([`PeerFigures::spu_live_shaped`]): the only figures
    /// the ratio columns divide by. `None` (or figures that are not live): no ratio columns.
    pub spu_live: Option<PeerFigures>,
    /// SPU figures recorded elsewhere, printed in their own columns with their date, never
    /// divided into.
    pub spu_recorded: PeerFigures,
    /// No progress lines.
    pub quiet: bool,
    /// OT modes: IKNP on demand, random-COT pools preprocessed offline
    /// (`Party::preprocess_ot`, sized by a warm-up run) and derandomized online, filled by
    /// IKNP (`Pool`) or by the silent OT (`Silent`).
    pub ot_modes: Vec<OtMode>,
    /// Silent-OT parameters of [`OtMode::Silent`].
    pub silent: SilentParams,
}

impl Default for BenchNonlinearOptions {
    fn default() -> Self {
        BenchNonlinearOptions {
            shapes: Shapes::BERT,
            variants: ALL_VARIANTS.to_vec(),
            transports: vec![TransportKind::Tcp],
            cfg: MpcConfig::ENCFORMER,
            timeout: Duration::from_secs(600),
            spu_live: None,
            spu_recorded: PeerFigures::spu_nonlinear_reference(),
            quiet: false,
            ot_modes: vec![OtMode::Iknp],
            silent: veil_core::mpc::ot::silent::FERRET_EMP_OT,
        }
    }
}

/// One row: one variant of one block over one transport.
#[derive(Clone, Debug, Serialize)]
pub struct NonlinearRow {
    /// Transport.
    pub transport: TransportKind,
    /// Whether the COTs came from a pool preprocessed offline (then `offline_*` holds the
    /// whole OT extension and `online_*` what depends on the input).
    pub ot_pool: bool,
    /// The OT mode.
    pub ot: OtMode,
    /// Part of `time_s` spent preprocessing the pool, s (0 without a pool).
    pub pre_s: f64,
    /// Block.
    pub block: Block,
    /// Variant.
    pub variant: String,
    /// Input shape.
    pub shape: String,
    /// Input elements (per-element figures divide by this).
    pub elements: usize,
    /// Wall time of the slower party, s (setup excluded).
    pub time_s: f64,
    /// Thread CPU time of the busier party, s.
    pub cpu_s: f64,
    /// Bytes per element, both directions, offline + online.
    pub bytes_per_elem: f64,
    /// Offline part of `bytes_per_elem`.
    pub offline_bytes_per_elem: f64,
    /// Online part of `bytes_per_elem`.
    pub online_bytes_per_elem: f64,
    /// Rounds of the whole run, exact: the larger session depth of the two parties.
    pub rounds: u32,
    /// Offline rounds (the larger of the two parties' offline round counts).
    pub offline_rounds: u32,
    /// Online rounds (likewise).
    pub online_rounds: u32,
    /// Correlated OTs per element (each counted once).
    pub cots_per_elem: f64,
    /// Estimated bytes per element with IKNP (16 B per COT) replaced by a silent OT at 1 bit per
    /// COT, every other message unchanged; silent rows: the measured bytes with the silent
    /// extensions the run triggered replaced by its COTs at the generator's steady-state cost.
    pub est_silent_bytes_per_elem: f64,
    /// Max absolute error of the reconstructed output against the f64 reference.
    pub max_abs_err: f64,
    /// Mean absolute error.
    pub mean_abs_err: f64,
    /// SPU's computation of the same block, if it has one (`bench_spu.py` name).
    pub spu_op: Option<String>,
    /// SPU Cheetah's figures of `spu_op`, measured in this run and recorded.
    #[serde(flatten)]
    pub spu: SpuColumns,
    /// `time_s / spu_time_s` (live SPU only).
    pub time_ratio: Option<f64>,
    /// `bytes_per_elem / spu_bytes_per_elem`.
    pub bytes_ratio: Option<f64>,
    /// `rounds / spu_rounds`.
    pub rounds_ratio: Option<f64>,
    /// Pool and silent rows: the online time (`time_s − pre_s`) plus this row's COTs at
    /// the run's average fill cost per COT (Σ `pre_s` / Σ COTs over the rows of the same
    /// link and OT), so that each block carries its share of the OT generation instead of
    /// the extensions that happened to fall in it.
    pub amortized_s: Option<f64>,
    /// `amortized_s / spu_time_s` (live SPU only).
    pub amortized_ratio: Option<f64>,
}

/// Rounds per Transformer layer on EncFormer's surrogate path.
#[derive(Clone, Debug, Serialize)]
pub struct LayerRounds {
    /// Rounds of MBMax (softmax surrogate), if it ran.
    pub mbmax: Option<u32>,
    /// Rounds of GELU with EncFormer's split (CKKS pre-evaluates the candidates), if it ran.
    pub gelu_split: Option<u32>,
    /// Rounds of MBLN, if it ran (two per layer).
    pub mbln: Option<u32>,
    /// `mbmax + gelu_split + 2·mbln`, when all three ran.
    pub total: Option<u32>,
    /// Rounds of MBLN in EncFormer's 0-round form (`mbln_local`), if it ran.
    pub mbln_local: Option<u32>,
    /// `mbmax + gelu_split + 2·mbln_local` (EncFormer's accounting, γ folded into CKKS).
    pub total_local: Option<u32>,
    /// EncFormer's count: 3 (MBMax) + 4 (GELU) + 0 (MBLN) = 7.
    pub encformer: u32,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct BenchNonlinearReport {
    /// Ring bits ℓ.
    pub ell: u32,
    /// Fractional bits F.
    pub frac: u32,
    /// Shapes.
    pub shapes: Shapes,
    /// One-time setup (base OTs, both directions), seconds per transport.
    pub setup_s: Vec<(TransportKind, f64)>,
    /// One-time setup bytes, both directions.
    pub setup_bytes: u64,
    /// Where the SPU columns come from; without SPU live, no ratio columns.
    #[serde(flatten)]
    pub spu: SpuSources,
    /// Setup bytes of the silent mode (base OT + the IKNP bootstrap, both directions), if it ran.
    pub silent_setup_bytes: Option<u64>,
    /// Rows.
    pub rows: Vec<NonlinearRow>,
    /// Rounds per Transformer layer of the surrogate path (first transport).
    pub layer_rounds: LayerRounds,
    /// Notes printed under the table.
    pub notes: Vec<String>,
}

/// Runs the benchmark.
pub fn bench_nonlinear(opts: &BenchNonlinearOptions) -> Result<BenchNonlinearReport, BenchError> {
    let ring = opts.cfg.ring;
    for v in &opts.variants {
        v.validate(&opts.shapes, ring)?;
    }
    let tcfg = TransportConfig {
        timeout: opts.timeout,
        ..TransportConfig::default()
    };
    let (mut rows, mut setup_s, mut setup_bytes) = (Vec::new(), Vec::new(), 0);
    let mut silent_setup_bytes = None;
    // Only a peer run in this process tree is divided into.
    let live = opts.spu_live.as_ref().filter(|l| l.live);
    for (&kind, &mode) in opts
        .transports
        .iter()
        .flat_map(|k| opts.ot_modes.iter().map(move |m| (k, m)))
    {
        let pool = mode.preprocessed();
        let sp = opts.silent;
        let steady = steady_bytes_per_cot(sp);
        let tname = kind.short_name();
        let drawn = opts
            .variants
            .iter()
            .map(|&v| draw_inputs(v, &opts.shapes, ring))
            .collect::<Result<Vec<_>, _>>()?;
        let i0: Vec<&PartyInput> = drawn.iter().map(|d| &d.parts.0).collect();
        let i1: Vec<&PartyInput> = drawn.iter().map(|d| &d.parts.1).collect();
        let bar = Barrier::new(2);
        let (cfg, vs, sh) = (opts.cfg, &opts.variants, &opts.shapes);
        let (r0, r1) = run_pair(
            kind.link(),
            tcfg,
            |t| {
                party_main(
                    PartyId::P0,
                    cfg,
                    t,
                    vs,
                    sh,
                    &i0,
                    &bar,
                    Some((tname, opts.quiet)),
                    mode,
                    sp,
                )
            },
            |t| party_main(PartyId::P1, cfg, t, vs, sh, &i1, &bar, None, mode, sp),
        )?;
        let (s0, st0, o0) = r0?;
        let (s1, st1, o1) = r1?;
        if mode != OtMode::Silent && (!pool || !opts.ot_modes.contains(&OtMode::Iknp)) {
            setup_s.push((kind, s0.max(s1)));
            setup_bytes = st0.setup.bytes_sent + st1.setup.bytes_sent;
        }
        if mode == OtMode::Silent {
            silent_setup_bytes = Some(st0.setup.bytes_sent + st1.setup.bytes_sent);
        }
        for (k, &v) in opts.variants.iter().enumerate() {
            let (a, b, d) = (&o0[k], &o1[k], &drawn[k]);
            let n = v.input_len(&opts.shapes).max(1) as f64;
            let off = (a.stats.offline.bytes_sent + b.stats.offline.bytes_sent) as f64 / n;
            let on = (a.stats.online.bytes_sent + b.stats.online.bytes_sent) as f64 / n;
            let cots = a.cots as f64 / n;
            // Reconstruction, outside the timing.
            let ((ya, scale), (yb, _)) = (&a.out, &b.out);
            let got: Vec<f64> = ya
                .as_slice()
                .iter()
                .zip(yb.as_slice())
                .map(|(&u, &w)| fixed::decode(ring.to_signed(ring.add(u, w)), ring.frac) * scale)
                .collect();
            let want = v.f64_reference(&opts.shapes, &d.x);
            let err = if got.len() == want.len() {
                ErrStats::of(&got, &want)
            } else {
                return Err(BenchError::Mismatch {
                    what: "output elements against the f64 reference",
                    expected: want.len() as u64,
                    found: got.len() as u64,
                });
            };
            let spu_op = v.spu_op(&opts.shapes);
            let spu = SpuColumns::new(
                spu_op.as_deref().and_then(|o| live.and_then(|l| l.get(o))),
                spu_op.as_deref().and_then(|o| opts.spu_recorded.get(o)),
            );
            let rounds = (a.pre_depth + a.depth).max(b.pre_depth + b.depth);
            let (st, sb, sr) = (spu.time_s, spu.bytes_per_elem, spu.rounds);
            let time_s = a.wall_s.max(b.wall_s);
            rows.push(NonlinearRow {
                transport: kind,
                ot_pool: pool,
                ot: mode,
                pre_s: a.pre_s.max(b.pre_s),
                block: v.block(),
                variant: v.name().into(),
                shape: v.shape(&opts.shapes),
                elements: v.input_len(&opts.shapes),
                time_s,
                cpu_s: a.cpu_s.max(b.cpu_s),
                bytes_per_elem: off + on,
                offline_bytes_per_elem: off,
                online_bytes_per_elem: on,
                rounds,
                offline_rounds: a.stats.offline.rounds.max(b.stats.offline.rounds),
                online_rounds: a.stats.online.rounds.max(b.stats.online.rounds),
                cots_per_elem: cots,
                // Silent rows: the extensions this run triggered, replaced by its COTs at the
                // generator's steady-state cost.
                est_silent_bytes_per_elem: est_silent_bytes(
                    mode,
                    off,
                    on,
                    (a.silent_bytes + b.silent_bytes) as f64 / n,
                    cots,
                    steady,
                ),
                max_abs_err: err.max_abs,
                mean_abs_err: err.mean_abs,
                spu_op,
                spu,
                time_ratio: st.map(|t| time_s / t),
                bytes_ratio: sb.map(|b| (off + on) / b),
                rounds_ratio: sr.map(|r| rounds as f64 / r as f64),
                amortized_s: None,
                amortized_ratio: None,
            });
        }
    }
    amortize(&mut rows);
    let layer_rounds = layer_rounds(&rows, opts.transports.first().copied());
    let notes = vec![
        "bytes/elem: both directions, offline + online, per input element; setup (base OT) \
         excluded and shown apart."
            .into(),
        "silent*: bytes/elem with IKNP (16 B/COT) replaced by a silent OT at 1 bit/COT; silent rows: the extensions the run triggered replaced by its COTs at the steady-state cost.".into(),
        "rounds: exact (session depth, larger of the two parties); off/on: per phase.".into(),
        "time s: the measured run, its OT fill included (pool/silent: the extensions that fell in it); amort s: its online time plus its COTs at the run's average fill cost per COT (sum of fill times / sum of COTs, per link and OT).".into(),
        if live.is_some() {
            "ratios (t/spu, ta/spu = amort s / spu s, B/spu, r/spu): against SPU measured in this run only; the recorded SPU figures are never divided into.".into()
        } else {
            "no ratio columns: SPU did not run in this process tree (--peers runs it); its recorded figures are shown for reference only.".into()
        },
        "err: max and mean abs error of the reconstructed output against the f64 reference.".into(),
        format!(
            "softmax: no mask; mbmax (c, R_d) = {MBMAX_PARAMS:?}, |X + c| saturated at {:.1}.",
            Variant::SoftmaxMbMax
                .softmax(&opts.shapes)
                .mbmax_bound(ring)
                .unwrap_or(f64::NAN)
        ),
        format!(
            "layernorm: eps {LN_EPS:e}, no affine; mbln (l, R_d) = {MBLN_PARAMS:?}; mbln-local = \
             EncFormer's 0-round form (D and kappa folded into the next layer); rms = RMSNorm \
             (Llama decoders), the accurate protocol without the mean."
        ),
        "silu: x·sigmoid(x) (Llama MLPs) as ReLU(x) plus two degree-7 pieces of SiLU − ReLU, \
         on [0, 4] and (4, 12] of |x|, zero beyond; SPU's jax.nn.silu is timed by \
         scripts/bench_spu_gpt2.py --blocks (no SPU row here)."
            .into(),
        "gelu: bolt-split = EncFormer's split, the candidates F0(x), F1(x) handed over as \
         shares (CKKS's cost not included)."
            .into(),
        format!(
            "quad: FEnc2's a·x²+b·x+c with (a, b, c) = {QUAD_COEFFS:?}, x clamped to ±{:.1}.",
            Variant::QuadSquare.quad().range(ring)
        ),
        "SPU: bench_spu.py has no max pool, quadratic, RMSNorm or SiLU (scripts/bench_spu_gpt2.py \
         --blocks times SPU's RMSNorm and SiLU); its GELU is the tanh form and its \
         LayerNorm has no affine (ours run without affine too)."
            .into(),
    ];
    Ok(BenchNonlinearReport {
        ell: ring.ell,
        frac: ring.frac,
        shapes: opts.shapes,
        setup_s,
        setup_bytes,
        spu: SpuSources::new(live, &opts.spu_recorded),
        silent_setup_bytes,
        rows,
        layer_rounds,
        notes,
    })
}

impl AmortizedRow for NonlinearRow {
    fn group(&self) -> (TransportKind, OtMode) {
        (self.transport, self.ot)
    }
    fn fill(&self) -> (f64, f64, f64) {
        (
            self.time_s,
            self.pre_s,
            self.cots_per_elem * self.elements as f64,
        )
    }
    fn peer_time(&self) -> Option<f64> {
        self.spu.time_s
    }
    fn set_amortized(&mut self, t: f64, ratio: Option<f64>) {
        self.amortized_s = Some(t);
        self.amortized_ratio = ratio;
    }
}

/// The surrogate path's rounds per Transformer layer from the rows of `transport`.
fn layer_rounds(rows: &[NonlinearRow], transport: Option<TransportKind>) -> LayerRounds {
    let find = |block: Block, variant: &str| {
        rows.iter()
            .find(|r| Some(r.transport) == transport && r.block == block && r.variant == variant)
            .map(|r| r.rounds)
    };
    let (mbmax, gelu_split, mbln, mbln_local) = (
        find(Block::Softmax, "mbmax"),
        find(Block::Gelu, "bolt-split"),
        find(Block::LayerNorm, "mbln"),
        find(Block::LayerNorm, "mbln-local"),
    );
    let sum = |c: Option<u32>| match (mbmax, gelu_split, c) {
        (Some(a), Some(b), Some(c)) => Some(a + b + 2 * c),
        _ => None,
    };
    LayerRounds {
        mbmax,
        gelu_split,
        mbln,
        total: sum(mbln),
        mbln_local,
        total_local: sum(mbln_local),
        encformer: 7,
    }
}

impl BenchNonlinearReport {
    /// Human-readable table: ratios to SPU Cheetah only when it ran in this process tree; the
    /// recorded SPU figures in their own columns, headed by their date.
    pub fn to_table(&self) -> String {
        let mut s = format!(
            "veil-bench nonlinear: l = {}, F = {}, OT iknp: IKNP on demand; pool: IKNP preprocessed offline; silent: pools filled by the Ferret silent OT; setup (base OT) {} bytes, {}\n",
            self.ell,
            self.frac,
            self.setup_bytes,
            self.setup_s
                .iter()
                .map(|(k, t)| format!("{k:?} {t:.3} s"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        s += &self.spu.lines();
        if let Some(b) = self.silent_setup_bytes {
            s += &format!("silent setup (base OT + IKNP bootstrap, both directions): {b} bytes\n");
        }
        s += &format!(
            "{:<5} {:<6} {:<10} {:<13} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>4} {:>4} {:>7} {:>8} {:>9} {:>9}",
            "link", "ot", "block", "variant", "shape", "time s", "amort s", "cpu s", "B/elem", "off B/e", "on B/e",
            "rounds", "off", "on", "COT/e", "silent*", "max err", "mean err"
        );
        if self.spu.live {
            s += &format!(
                " | {:>7} {:>7} {:>5} | {:>6} {:>6} {:>6} {:>6}",
                "spu s", "spu B/e", "spu r", "t/spu", "ta/spu", "B/spu", "r/spu"
            );
        }
        s += &self.spu.recorded_header();
        let (opt, o) = (opt_cell, opt_u_cell);
        for r in &self.rows {
            s += &format!(
                "{:<5} {:<6} {:<10} {:<13} {:>10} {:>8.3} {:>8} {:>8.3} {:>8.1} {:>8.1} {:>8.1} {:>6} {:>4} {:>4} {:>7.1} {:>8.1} {:>9.2e} {:>9.2e}",
                r.transport.short_name(),
                r.ot.name(),
                r.block.name(),
                r.variant,
                r.shape,
                r.time_s,
                opt(r.amortized_s, 3),
                r.cpu_s,
                r.bytes_per_elem,
                r.offline_bytes_per_elem,
                r.online_bytes_per_elem,
                r.rounds,
                r.offline_rounds,
                r.online_rounds,
                r.cots_per_elem,
                r.est_silent_bytes_per_elem,
                r.max_abs_err,
                r.mean_abs_err,
            );
            if self.spu.live {
                s += &r.spu.live_cells(0);
                s += &format!(
                    " | {:>6} {:>6} {:>6} {:>6}",
                    opt(r.time_ratio, 3),
                    opt(r.amortized_ratio, 3),
                    opt(r.bytes_ratio, 3),
                    opt(r.rounds_ratio, 2),
                );
            }
            s += &r.spu.recorded_cells(&self.spu, 0);
        }
        let l = &self.layer_rounds;
        s += &format!(
            "rounds per Transformer layer, surrogate path: MBMax {} + GELU split {} + 2 x MBLN {} = {} (EncFormer: 3 + 4 + 0 = {})\n",
            o(l.mbmax),
            o(l.gelu_split),
            o(l.mbln),
            o(l.total),
            l.encformer
        );
        s += &format!(
            "  with MBLN's 0-round form (gamma, kappa folded into the next CKKS layer): {} + {} + 2 x {} = {}\n",
            o(l.mbmax),
            o(l.gelu_split),
            o(l.mbln_local),
            o(l.total_local)
        );
        for n in &self.notes {
            s += n;
            s.push('\n');
        }
        s
    }
}

/// Arguments of `veil-bench nonlinear`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchNonlinearArgs {
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Shapes: bert (softmax 12x128x128, GELU 128x3072, LayerNorm 128x768, max pool 64x32x32)
    /// or small (a quick run for CI smoke).
    #[arg(long, default_value = "bert")]
    pub shapes: String,
    /// Comma-separated blocks: softmax, gelu, layernorm, maxpool, quad (default: all).
    #[arg(long)]
    pub blocks: Option<String>,
    /// Comma-separated variants, by name or block/name (default: all of the chosen blocks).
    #[arg(long)]
    pub variants: Option<String>,
    /// Transport(s): tcp, mem or both.
    #[arg(long, default_value = "tcp")]
    pub transport: String,
    /// Also run SecretFlow SPU (Cheetah) on softmax, GELU and LayerNorm at the same shapes in
    /// this run (`--peers-dir`, Python from `VEIL_SPU_PYTHON`, default
    /// /tmp/veil-peers/spu/bin/python) and print the ratios to it. Without it there are no ratio
    /// columns: only SPU's recorded figures, in their own columns under their date.
    #[arg(long)]
    pub peers: bool,
    /// The shared peer benchmarks (holds mpc/bench_spu.py).
    #[arg(long, default_value = "../shared/peers")]
    pub peers_dir: PathBuf,
    /// Receive timeout, seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
    /// OT mode(s), comma-separated: iknp (extension on demand), pool (random COTs preprocessed
    /// offline by IKNP, sized by a warm-up run; the online columns then carry only what depends
    /// on the input), silent (the same pools filled by the Ferret silent OT); `both` =
    /// iknp,pool; `all` = iknp,pool,silent.
    #[arg(long, default_value = "iknp")]
    pub ot: String,
}

/// The variants `--blocks` and `--variants` select, in report order.
pub fn select_variants(
    blocks: Option<&str>,
    variants: Option<&str>,
) -> Result<Vec<Variant>, BenchError> {
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    };
    let blocks = blocks.map(list);
    if let Some(bs) = &blocks {
        for b in bs {
            if !ALL_BLOCKS.contains(&b.as_str()) {
                return Err(invalid(
                    "--blocks",
                    b,
                    "softmax, gelu, layernorm, maxpool, quad",
                ));
            }
        }
    }
    let names = variants.map(list);
    if let Some(ns) = &names {
        for n in ns {
            if !ALL_VARIANTS
                .iter()
                .any(|v| v.name() == n || format!("{}/{}", v.block().name(), v.name()) == *n)
            {
                return Err(invalid(
                    "--variants",
                    n,
                    "accurate, accurate-affine, mbmax, bolt, bolt-split, tanh, erf, mbln, \
                     mbln-local, maxpool, maxpool-relu, \
                     square, beaver (or block/variant); the transformer blocks only once merged",
                ));
            }
        }
    }
    let out: Vec<Variant> = ALL_VARIANTS
        .iter()
        .copied()
        .filter(|v| {
            blocks
                .as_ref()
                .is_none_or(|bs| bs.iter().any(|b| b == v.block().name()))
        })
        .filter(|v| {
            names.as_ref().is_none_or(|ns| {
                ns.iter()
                    .any(|n| n == v.name() || *n == format!("{}/{}", v.block().name(), v.name()))
            })
        })
        .collect();
    if out.is_empty() {
        return Err(invalid(
            "--blocks/--variants",
            format!("{blocks:?} / {names:?}"),
            "a selection with at least one variant",
        ));
    }
    Ok(out)
}

/// Runs the benchmark and prints the report.
pub fn run(args: &BenchNonlinearArgs) -> Result<(), BenchError> {
    let shapes = match args.shapes.as_str() {
        "bert" => Shapes::BERT,
        "small" => Shapes::SMALL,
        v => return Err(invalid("--shapes", v, "bert or small")),
    };
    let transports = match args.transport.as_str() {
        "mem" => vec![TransportKind::Memory],
        "tcp" => vec![TransportKind::Tcp],
        "both" => vec![TransportKind::Tcp, TransportKind::Memory],
        v => return Err(invalid("--transport", v, "tcp, mem or both")),
    };
    let variants = select_variants(args.blocks.as_deref(), args.variants.as_deref())?;
    let ot_modes = OtMode::parse_list(&args.ot)?;
    let mut opts = BenchNonlinearOptions {
        ot_modes,
        shapes,
        variants,
        transports,
        timeout: Duration::from_secs(args.timeout_s.max(1)),
        quiet: false,
        ..BenchNonlinearOptions::default()
    };
    if args.peers {
        let mut ops: Vec<String> = opts
            .variants
            .iter()
            .filter_map(|v| v.spu_op(&shapes))
            .collect();
        ops.dedup();
        let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
        opts.spu_live = live_or_note(PeerFigures::spu_live_shaped(&args.peers_dir, &ops));
    }
    let rep = bench_nonlinear(&opts)?;
    if args.json {
        println!("{}", crate::to_json("the bench nonlinear report", &rep)?);
    } else {
        print!("{}", rep.to_table());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_by_block_and_variant() {
        let all = select_variants(None, None).unwrap();
        assert_eq!(all, ALL_VARIANTS.to_vec());
        let q = select_variants(Some("quad"), None).unwrap();
        assert!(q.iter().all(|v| v.block() == Block::Quad));
        let one = select_variants(None, Some("maxpool/maxpool")).unwrap();
        assert_eq!(one, vec![Variant::MaxPool]);
        assert!(select_variants(Some("conv"), None).is_err());
        assert!(select_variants(None, Some("nope")).is_err());
    }

    /// Without SPU run in this process tree the table has no ratio column and shows SPU's
    /// recorded figure in its own column under its date; nothing divides by it. With a live SPU
    /// the ratios are there and divide by the live figure only.
    #[test]
    fn ratios_only_against_a_peer_run_live() {
        let op = Variant::SoftmaxAccurate.spu_op(&Shapes::SMALL).unwrap();
        let recorded = PeerFigures::for_test(false, "2026-11-30", 0, &[(&op, 174.6, 4047.0, 308)]);
        let opts = BenchNonlinearOptions {
            shapes: Shapes::SMALL,
            variants: vec![Variant::SoftmaxAccurate],
            transports: vec![TransportKind::Memory],
            quiet: true,
            spu_recorded: recorded.clone(),
            // Figures that are not live are never divided into, even passed as live.
            spu_live: Some(recorded),
            ..BenchNonlinearOptions::default()
        };
        let rep = bench_nonlinear(&opts).unwrap();
        let t = rep.to_table();
        eprintln!("{t}");
        assert!(!rep.spu.live);
        let r = &rep.rows[0];
        assert_eq!(
            (r.spu.time_s, r.time_ratio, r.amortized_ratio),
            (None, None, None)
        );
        assert_eq!((r.bytes_ratio, r.rounds_ratio), (None, None));
        assert_eq!(r.spu.recorded_time_s, Some(174.6));
        for ratio in ["/spu", "spu s", "spu B/e"] {
            assert!(!t.contains(ratio), "{ratio} without a live peer:\n{t}");
        }
        let header = t.lines().find(|l| l.starts_with("link")).unwrap();
        assert!(header.contains("SPU 2026-11-30"), "{header}");
        let line = t.lines().find(|l| l.contains("accurate")).unwrap();
        assert!(line.contains("174.60") && line.contains("4047"), "{line}");
        assert!(t.contains("recorded 2026-11-30 (not this run"), "{t}");

        let live = PeerFigures::for_test(true, "", 0, &[(&op, 2.0, 1000.0, 30)]);
        let rep = bench_nonlinear(&BenchNonlinearOptions {
            spu_live: Some(live),
            ..opts
        })
        .unwrap();
        let t = rep.to_table();
        let r = &rep.rows[0];
        assert!(
            rep.spu.live && t.contains("t/spu") && t.contains("B/spu"),
            "{t}"
        );
        assert_eq!(r.time_ratio, Some(r.time_s / 2.0));
        assert_eq!(r.bytes_ratio, Some(r.bytes_per_elem / 1000.0));
        assert_eq!(
            r.spu.recorded_time_s,
            Some(174.6),
            "recorded column kept beside"
        );
    }

    #[test]
    fn small_run_over_memory_reports_exact_max_pool() {
        let opts = BenchNonlinearOptions {
            shapes: Shapes::SMALL,
            transports: vec![TransportKind::Memory],
            quiet: true,
            ..BenchNonlinearOptions::default()
        };
        let rep = bench_nonlinear(&opts).unwrap();
        assert_eq!(rep.rows.len(), ALL_VARIANTS.len());
        eprintln!("{}", rep.to_table());
        for r in &rep.rows {
            if r.variant == "mbln-local" {
                assert!(r.bytes_per_elem == 0.0 && r.rounds == 0, "{r:?}");
            } else {
                assert!(r.bytes_per_elem > 0.0 && r.rounds > 0, "{r:?}");
                assert!(r.online_rounds + r.offline_rounds >= 1);
            }
        }
        assert_eq!(rep.layer_rounds.total_local.map(|_| ()), Some(()));
        let row = |b: Block, v: &str| {
            rep.rows
                .iter()
                .find(|r| r.block == b && r.variant == v)
                .unwrap()
        };
        assert_eq!(
            row(Block::MaxPool, "maxpool").max_abs_err,
            0.0,
            "max pool is exact"
        );
        let q = row(Block::Quad, "square").max_abs_err;
        assert!(q < 1e-3, "quad: {q}");
        let sm = row(Block::Softmax, "accurate").max_abs_err;
        assert!(
            sm < veil_core::nonlinear::softmax::SOFTMAX_ERR,
            "softmax: {sm}"
        );
        assert!(rep.to_table().contains("EncFormer: 3 + 4 + 0 = 7"));
    }

    #[test]
    fn pool_mode_moves_the_ot_extension_offline() {
        let opts = BenchNonlinearOptions {
            shapes: Shapes::SMALL,
            variants: vec![Variant::SoftmaxAccurate, Variant::GeluBolt],
            transports: vec![TransportKind::Memory],
            quiet: true,
            ot_modes: vec![OtMode::Iknp, OtMode::Pool, OtMode::Silent],
            silent: veil_core::mpc::ot::silent::INSECURE_SILENT_TEST,
            ..BenchNonlinearOptions::default()
        };
        let rep = bench_nonlinear(&opts).unwrap();
        assert_eq!(rep.rows.len(), 6);
        for v in ["accurate", "bolt"] {
            let row = |m: OtMode| {
                rep.rows
                    .iter()
                    .find(|r| r.variant == v && r.ot == m)
                    .unwrap()
            };
            let (pool, silent) = (row(OtMode::Pool), row(OtMode::Silent));
            // Same online traffic; the silent pool's offline part is a fraction of IKNP's.
            assert!((silent.online_bytes_per_elem - pool.online_bytes_per_elem).abs() < 1.0);
            assert!(
                silent.offline_bytes_per_elem < 0.25 * pool.offline_bytes_per_elem,
                "{v}: offline {} (silent) vs {} (pool)",
                silent.offline_bytes_per_elem,
                pool.offline_bytes_per_elem
            );
            assert!(silent.max_abs_err <= 2.0 * pool.max_abs_err + 1e-3);
        }
        eprintln!("{}", rep.to_table());
        for v in ["accurate", "bolt"] {
            let find = |pool: bool| {
                rep.rows
                    .iter()
                    .find(|r| {
                        r.variant == v && r.ot == if pool { OtMode::Pool } else { OtMode::Iknp }
                    })
                    .unwrap()
            };
            let (iknp, pool) = (find(false), find(true));
            // The IKNP matrices (16 B per COT) go offline; online only derandomization
            // bits and corrections remain.
            assert!(
                pool.online_bytes_per_elem < 0.5 * iknp.online_bytes_per_elem,
                "{v}: online {} (pool) vs {} (iknp)",
                pool.online_bytes_per_elem,
                iknp.online_bytes_per_elem
            );
            assert!(pool.offline_bytes_per_elem > iknp.offline_bytes_per_elem);
            assert!(pool.pre_s > 0.0 && iknp.pre_s == 0.0);
        }
        let sm = rep
            .rows
            .iter()
            .find(|r| r.variant == "accurate" && r.ot == OtMode::Pool)
            .unwrap()
            .max_abs_err;
        assert!(
            sm < veil_core::nonlinear::softmax::SOFTMAX_ERR,
            "softmax (pool): {sm}"
        );
    }
}
