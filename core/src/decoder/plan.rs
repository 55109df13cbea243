//! The public plan of a private decode step: what both parties derive from
//! `(params, architecture, maximum context)` before the first token — the packings, the level
//! each CKKS block starts at, the conversion plan of every boundary, the Galois steps the
//! client makes keys for, and the nonlinear blocks.
//!
//! Every CKKS block of a decode step is shallow ([`super::run`] lists them): the projections
//! are one dense product each ([`super::head::matvec`], one level); the attention is the
//! unpacking of `q`, `k`, `v` converted in compact (a mask) and the score product: two levels;
//! the values are the spread of the compact probabilities (a mask) and one product: two
//! levels. Each block starts at the lowest level from which its output still reaches an
//! admissible C2M (the planning helpers shared with the encoder), so the conversions carry the
//! fewest primes.

use super::cache::{head_pairs, spread_blocks, unpack_qkv, DecodeLayout, EncKvCache, HeadPair};
use super::head::{matvec, DenseLayout, HeadLayout};
use super::{DecoderConfig, Family};
use crate::convert::{BoundaryCfg, C2mPlan, M2cPlan, ProtocolError};
use crate::error::Error;
use crate::hybrid::plan::{dry, pick_level, Dry};
use crate::hybrid::track::Tracked;
use crate::mpc::MpcConfig;
use crate::nonlinear::gelu::{Gelu, GeluKind};
use crate::nonlinear::layernorm::{LayerNorm, LnKind};
use crate::nonlinear::silu::Silu;
use crate::nonlinear::softmax::{Mask, Softmax, SoftmaxKind};
use crate::params::CkksParams;
use crate::transformer::OpCounts;
use alloc::vec::Vec;

/// The MPC parameters of a decode session (`ℓ = 43`, `F = 13`, as the encoder's).
pub const MPC_CONFIG: MpcConfig = MpcConfig::ENCFORMER;

/// `log2` of the largest magnitude each boundary of a decode step carries (real units). A value
/// past its bound breaks the conversion's correctness argument, so these are generous: the
/// norms' outputs are at most `√d` in magnitude (the gains are folded into the next
/// projection), the probabilities at most 1.
pub mod bounds {
    /// The layer input `x` (the residual stream) as the client shares it in.
    pub const X: u32 = 9;
    /// A norm's output `n` (at most `√d ≤ 64` for `d ≤ 4096`).
    pub const N: u32 = 6;
    /// The scores `q·k/√d_h`.
    pub const S: u32 = 6;
    /// The probabilities.
    pub const P: u32 = 1;
    /// The attention output (a convex combination of values).
    pub const O: u32 = 6;
    /// A projection's output: `W_o`'s, the MLP's up and gate, `W_down`'s, the logits.
    pub const Y: u32 = 8;
    /// The MLP's activation (SwiGLU or GELU output).
    pub const G: u32 = 8;
}

/// The decode sessions' CKKS parameter set: `N = 2^14`, `q_0` of 60 bits and three 40-bit
/// levels (the attention's two above its trimmed C2M level 1), one key-switching digit,
/// 128-bit secure by the HE standard (420 bits of `QP`; the bound at `N = 2^14` is 438). A
/// decode step carries one position, so `2^13` slots hold the cache's heads and blocks and the
/// product widths of both shapes.
pub fn session_params() -> crate::Result<CkksParams> {
    crate::params::ckks_128_custom(14, 3, 1).validate()
}

/// `log2` bounds of the magnitudes a model's activations reach, which the conversions and the
/// norms must cover: the defaults ([`bounds`]) suit models with activations of a few hundred
/// at most; a real checkpoint's are calibrated on the plaintext model ([`Ranges::calibrated`]):
/// SmolLM2's residual stream reaches `2.3·10⁴` on a short prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ranges {
    /// The residual stream and what is added to it (`W_o`'s and `W_down`'s outputs); also the
    /// input the client shares in and the norms' inputs.
    pub x: u32,
    /// The other products' outputs (`q`, `k`, `v`, the MLP's gate and up, the logits).
    pub y: u32,
    /// The MLP's activation.
    pub g: u32,
}

impl Ranges {
    /// The defaults: [`bounds::X`], [`bounds::Y`], [`bounds::G`].
    pub const DEFAULT: Ranges = Ranges {
        x: bounds::X,
        y: bounds::Y,
        g: bounds::G,
    };

    /// Bounds covering twice the magnitudes `r` records (at least the defaults).
    pub fn calibrated(r: &super::reference::ActRanges) -> Self {
        let b = |v: f64, min: u32| {
            let need = libm::ceil(libm::log2(2.0 * v.max(1.0)));
            (need as u32).max(min)
        };
        Ranges {
            x: b(r.residual, bounds::X),
            y: b(r.products, bounds::Y),
            g: b(r.activation, bounds::G),
        }
    }
}

/// One norm site's public input shift and per-column widening (`LayerNorm::run_wide`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NormShift {
    /// The input shift `k`.
    pub shift: u32,
    /// The widening of each column's square (empty: none).
    pub wide: Vec<u32>,
}

/// The widest model the norms' conversion bound [`bounds::N`] covers (`√4096 = 2^6`).
const MAX_HIDDEN: usize = 4096;

/// The boundary configuration for bound `b`.
fn boundary(b: u32) -> BoundaryCfg {
    BoundaryCfg {
        ring: MPC_CONFIG.ring,
        sigma: MPC_CONFIG.sigma,
        log_bmax: b,
    }
}

/// Where a dense product's output rows land, at the product's period `P` (`slots`): block `2u`
/// of `rows` (`P` rows each) in the real parts of ciphertext `u`'s slots `t < P`, block `2u + 1`
/// in the imaginary parts; or, `paired`, rows `i` and `rows/2 + i` in the real and imaginary
/// parts of slot `i mod P` of ciphertext `⌊i/P⌋` (Llama's gate and up, which SwiGLU multiplies
/// element by element).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseRows {
    /// Output rows.
    pub rows: usize,
    /// Rows per part of a ciphertext: the product's period.
    pub slots: usize,
    /// Whether row `i` and row `rows/2 + i` share a slot.
    pub paired: bool,
}

impl DenseRows {
    /// `rows` rows in blocks of `slots`.
    pub fn new(rows: usize, slots: usize) -> Self {
        Self {
            rows,
            slots,
            paired: false,
        }
    }

    /// `2·half` rows, row `i` beside row `half + i`.
    pub fn pairs(half: usize, slots: usize) -> Self {
        Self {
            rows: 2 * half,
            slots,
            paired: true,
        }
    }

    /// Output ciphertexts: `⌈rows / 2P⌉` (paired: `⌈(rows/2) / P⌉`).
    pub fn cts(&self) -> usize {
        if self.paired {
            (self.rows / 2).div_ceil(self.slots)
        } else {
            self.rows.div_ceil(2 * self.slots)
        }
    }

    /// The rows slot `s` of ciphertext `u` carries (real, imaginary).
    pub fn at(&self, u: usize, s: usize) -> (Option<usize>, Option<usize>) {
        if s >= self.slots {
            return (None, None);
        }
        if self.paired {
            let h = self.rows / 2;
            let i = u * self.slots + s;
            return if i < h {
                (Some(i), Some(h + i))
            } else {
                (None, None)
            };
        }
        let row = |b: usize| Some(b * self.slots + s).filter(|&r| r < self.rows);
        (row(2 * u), row(2 * u + 1))
    }

    /// The home of row `e`: ciphertext, part (0 real, 1 imaginary), slot.
    pub fn home(&self, e: usize) -> (usize, usize, usize) {
        if self.paired {
            let h = self.rows / 2;
            let (part, i) = if e < h { (0, e) } else { (1, e - h) };
            return (i / self.slots, part, i % self.slots);
        }
        let b = e / self.slots;
        (b / 2, b % 2, e % self.slots)
    }
}

/// One dense product's packing: its input's layout and its output rows, at one period (the
/// least that holds the rows in one ciphertext, or the slot count for more rows,
/// [`DenseLayout::for_rows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dense {
    /// The input's layout.
    pub lay: DenseLayout,
    /// Where the output rows land.
    pub rows: DenseRows,
}

impl Dense {
    /// A product of `rows` rows (paired: `2·rows`, row `i` beside row `rows + i`) from an
    /// input of width `d`, at the least period that holds them ([`DenseLayout::for_rows`]); a
    /// typed error for a width or slot count the packing cannot take.
    pub fn new(slots: usize, d: usize, rows: usize, paired: bool) -> Result<Self, Error> {
        let all = if paired { 2 * rows } else { rows };
        let lay = DenseLayout::for_rows(slots, d, all)?;
        let p = lay.period();
        let rows = if paired {
            DenseRows::pairs(rows, p)
        } else {
            DenseRows::new(rows, p)
        };
        Ok(Self { lay, rows })
    }
}

/// One query ciphertext of the attention: the key ciphertext it reads, and in head group `i`
/// the query pair that reads KV head `kv·groups + i` (`None` past the last KV head).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryCt {
    /// The key (and value) ciphertext it reads.
    pub kv: usize,
    /// The query pair of each head group.
    pub pairs: Vec<Option<HeadPair>>,
}

/// The cost model that picks the head groups: `(seconds, MiB)` per query ciphertext times the
/// cache blocks it reads (`PER_BLOCK`: the score product, its C2M, the probabilities' spread and
/// the value product), per query ciphertext (`PER_QUERY`: its unpacking and replication over
/// the `t` rows, its share of the key and value ciphertexts' unpacking and append, the values'
/// row sums and its output's C2M), and per compact ciphertext that a conversion carries in
/// (`PER_COMPACT`: `q`, `k`, `v` and the probabilities); a MiB weighs [`MIB_S`] seconds.
///
/// Fitted on 2026-12-07 on the 2-core machine at `N = 2^14` (`veil-bench generate --shape
/// gpt2-base --groups K`, one layer, weights kept, each run alone): the least-squares fit of a
/// constant plus the block and query counts (the blocks at contexts 64, 128 and 256) to the mean
/// step at contexts 57–64, 113–127 and 241–255, 19 windows of 8 runs (`K` = 1, 2, 4, 8, 16 to
/// context 128; 4, 8, 16 to 256; residuals within 0.29 s and 0.75 MiB; two runs of one `K`
/// differ by up to 0.19 s at one context, with the silent OT's extensions falling in some steps
/// and not others), and the conversions' own blocks for `PER_COMPACT`. GPT-2 has as many key
/// ciphertexts as query ciphertexts, so `PER_QUERY` carries both: for a grouped-query model it
/// is a little high.
const PER_BLOCK: (f64, f64) = (0.039, 0.49);
const PER_QUERY: (f64, f64) = (0.070, 0.40);
const PER_COMPACT: (f64, f64) = (0.023, 0.39);
/// Seconds a MiB weighs in the cost model: SPU's decode layer spends about 4 s and 40 MiB, and
/// the goal bounds both, so 0.1 s.
const MIB_S: f64 = 0.1;

/// Everything public both parties derive before a decode session. Built only by
/// [`DecodePlan::new`] (the run trusts its layouts); read it through its methods.
#[derive(Clone, Debug)]
pub struct DecodePlan {
    /// The architecture.
    pub(super) cfg: DecoderConfig,
    /// The most positions a session holds (prompt and generated tokens).
    pub(super) max_ctx: usize,
    /// Slots per ciphertext.
    pub(super) slots: usize,
    /// The attention's packing.
    pub(super) lay: DecodeLayout,
    /// The attention's query ciphertexts (with [`DecodeLayout::groups`] heads each).
    pub(super) qcts: Vec<QueryCt>,
    /// `[W_q; W_k; W_v]`'s packing (its rows dense, before they are converted into the
    /// cache's layout).
    pub(super) qkv: Dense,
    /// `W_o`'s packing.
    pub(super) o: Dense,
    /// The MLP's first product's (Llama: `[W_gate; W_up]` paired; GPT-2: `W_up`).
    pub(super) up: Dense,
    /// `W_down`'s packing.
    pub(super) down: Dense,
    /// The LM head's packing (the plain replication: its rows fill every slot).
    pub(super) head: Dense,
    /// M2C levels: `q`, `k`, `v` (compact), the probabilities (compact, the same level), the
    /// attention output, the MLP input, the activation, the head's input, the attention input.
    pub(super) levels: [usize; 7],
    /// The activation bounds.
    pub(super) ranges: Ranges,
    /// Each norm site's input shift and widening (`LayerNorm::run_wide`): layer `i`'s
    /// attention norm at `2i`, its MLP norm at `2i + 1`, the final norm at `2·layers`. From
    /// the residual bound ([`DecodePlan::with_options`]) or per site from calibration
    /// ([`DecodePlan::with_norms`]).
    pub(super) norms: Vec<NormShift>,
    /// Per-step CKKS operations of one layer at one cached block, from the dry runs: the
    /// unpacking, the append and the scores, the spread and the values, `W_o`, the MLP's up
    /// (and gate), `W_down`, the LM head, and the `Q`/`K`/`V` projection.
    pub(super) dry_counts: [OpCounts; 7],
    pub(super) m2c: [M2cPlan; 7],
    pub(super) c2m: [C2mPlan; 7],
    rotations: Vec<i64>,
}

/// Indices of the plans (M2C and C2M share them): attention (`q`, `k`, `v` in, scores out),
/// values (probabilities in, attention output out), `W_o`, the MLP's up, `W_down`, the head,
/// the projection (`a` in, dense `q`, `k`, `v` out).
pub(super) const B_ATTN: usize = 0;
pub(super) const B_VAL: usize = 1;
pub(super) const B_OUT: usize = 2;
pub(super) const B_UP: usize = 3;
pub(super) const B_DOWN: usize = 4;
pub(super) const B_HEAD: usize = 5;
pub(super) const B_QKV: usize = 6;

impl DecodePlan {
    /// Plans decode sessions of `cfg` holding at most `max_ctx` positions on `params`; a typed
    /// error when the shape does not fit the slots, the context exceeds the model's, or the
    /// parameters have too few levels.
    pub fn new(
        params: &CkksParams,
        cfg: &DecoderConfig,
        max_ctx: usize,
    ) -> Result<Self, ProtocolError> {
        Self::with_groups(params, cfg, max_ctx, None)
    }

    /// [`DecodePlan::new`] with `groups` heads per ciphertext in the cache's layout instead of
    /// the cost model's choice (`None`: the cost model's); a typed error when they do not fit.
    pub fn with_groups(
        params: &CkksParams,
        cfg: &DecoderConfig,
        max_ctx: usize,
        groups: Option<usize>,
    ) -> Result<Self, ProtocolError> {
        Self::with_options(params, cfg, max_ctx, groups, Ranges::DEFAULT)
    }

    /// [`DecodePlan::with_groups`] with the activation bounds `ranges` (a real checkpoint's,
    /// [`Ranges::calibrated`]); a typed error when a conversion cannot carry them.
    pub fn with_options(
        params: &CkksParams,
        cfg: &DecoderConfig,
        max_ctx: usize,
        groups: Option<usize>,
        ranges: Ranges,
    ) -> Result<Self, ProtocolError> {
        cfg.validate()?;
        if cfg.hidden > MAX_HIDDEN {
            return Err(Error::InvalidParameters(
                "decode plan: the width is past 4096 (the norms' conversion bound)",
            )
            .into());
        }
        if max_ctx == 0 || max_ctx > cfg.context {
            return Err(Error::InvalidParameters(
                "decode plan: the context must be positive and within the model's",
            )
            .into());
        }
        let slots = params.n() / 2;
        let (d, kv) = (cfg.hidden, cfg.kv_heads);
        let pairs = head_pairs(cfg.heads, kv)?;
        let lay = match groups {
            Some(k) => DecodeLayout::grouped(slots, cfg.head_dim(), k)?,
            None => Self::pick_groups(slots, cfg, max_ctx)?,
        };
        let qcts = Self::build_query_cts(cfg, &pairs, lay.groups());
        let reads: Vec<usize> = qcts.iter().map(|q| q.kv).collect();
        let kv_cts = kv.div_ceil(lay.groups());
        // The LM head's packing must fit.
        HeadLayout::new(slots, d, cfg.vocab)?;
        let primes: Vec<f64> = params.q().iter().map(|q| q.value() as f64).collect();
        let delta = params.default_scale();
        let zero = |_: usize, _: usize| 0.0;
        let nq = qcts.len();
        let qkv_cts = nq + 2 * kv_cts;

        // Attention: q, k, v (converted in compact) → unpacked (row masks) → cache → scores; and the
        // values from a cache at the level the first half leaves it.
        let attn = |l: usize| -> Option<(Dry, Dry)> {
            let first = dry::<()>(slots, &primes, |ex| {
                // q, k and v arrive compact and are unpacked (at position 0 here: the keys'
                // and values' shifts at other positions use the same `±2^b` keys, which the
                // queries' copies and the values' row sums already need).
                let compact: Vec<Tracked> = (0..qkv_cts.div_ceil(lay.t()))
                    .map(|_| ex.fresh(l, delta))
                    .collect();
                let (q, rows) = unpack_qkv(ex, &lay, &compact, nq, kv_cts, 0)?;
                let mut c = EncKvCache::<Tracked>::new(lay, 1, kv_cts, 1)?;
                c.append_rows(ex, 0, rows)?;
                Ok(c.scores(ex, 0, &q, &reads)?.concat())
            })?
            .0;
            let second = dry::<()>(slots, &primes, |ex| {
                let z = ex.fresh(l, delta);
                let mut c = EncKvCache::<Tracked>::new(lay, 1, kv_cts, 1)?;
                c.append(ex, 0, vec_of(kv_cts, z), vec_of(kv_cts, z))?;
                // The probabilities arrive compact (one block per query ciphertext here) and
                // are spread over the segments first.
                let compact: Vec<Tracked> = (0..nq.div_ceil(lay.head_dim()))
                    .map(|_| ex.fresh(l, delta))
                    .collect();
                let p: Vec<Vec<Tracked>> = spread_blocks(ex, &lay, &compact, nq)?
                    .into_iter()
                    .map(|z| alloc::vec![z])
                    .collect();
                c.values(ex, 0, &p, &reads)
            })?
            .0;
            Some((first, second))
        };
        let mut found = None;
        let mut last = None;
        for l in 2..=params.max_level() {
            let Some((a, v)) = attn(l) else { continue };
            let c2m = |dr: &Dry, b: u32| -> Result<Option<C2mPlan>, ProtocolError> {
                let c = C2mPlan::shortest_admissible(params, slots, dr.scale, boundary(b))?
                    .local_rounding();
                Ok((c.level() <= dr.level).then_some(c))
            };
            match (c2m(&a, bounds::S), c2m(&v, bounds::O)) {
                (Ok(Some(cs)), Ok(Some(co))) => {
                    found = Some((l, a, v, cs, co));
                    break;
                }
                (Err(e), _) | (_, Err(e)) => last = Some(e),
                _ => {}
            }
        }
        let (la, dry_a, dry_v, c2m_s, c2m_o) = found.ok_or_else(|| {
            last.unwrap_or(ProtocolError::Ckks(Error::InvalidParameters(
                "the parameter set has too few levels for the decode attention",
            )))
        })?;

        // The dense products, each one level.
        let dense = |p: Dense, b: u32| {
            pick_level(params, slots, boundary(b), |l| {
                dry::<()>(slots, &primes, |ex| {
                    let x = ex.fresh(l, delta);
                    let at = move |u: usize, s: usize| p.rows.at(u, s);
                    matvec(ex, &p.lay, &x, p.rows.cts(), &at, &zero)
                })
                .map(|r| r.0)
            })
        };
        let qkv = Dense::new(slots, d, d + 2 * cfg.kv_dim(), false)?;
        let o = Dense::new(slots, d, d, false)?;
        let up = match cfg.family {
            Family::Llama => Dense::new(slots, d, cfg.ffn, true)?,
            Family::Gpt2 => Dense::new(slots, d, cfg.ffn, false)?,
        };
        let down = Dense::new(slots, cfg.ffn, d, false)?;
        let head = Dense {
            lay: DenseLayout::new(slots, d)?,
            rows: DenseRows::new(cfg.vocab, slots),
        };
        let (lq, c2m_q, dry_q) = dense(qkv, ranges.y)?;
        let (lo, c2m_y, dry_o) = dense(o, ranges.x)?;
        let (lm, c2m_u, dry_u) = dense(up, ranges.y)?;
        let (lg, c2m_d, dry_d) = dense(down, ranges.x)?;
        let (lh, c2m_h, dry_h) = dense(head, ranges.y)?;

        let levels = [la, la, lo, lm, lg, lh, lq];
        let m2c_bounds = [
            ranges.y,
            bounds::P,
            bounds::O,
            bounds::N,
            ranges.g,
            bounds::N,
            bounds::N,
        ];
        let mut m2c = Vec::with_capacity(7);
        for (l, b) in levels.iter().zip(m2c_bounds) {
            m2c.push(M2cPlan::new(params, *l, slots, delta, boundary(b))?);
        }
        let m2c: [M2cPlan; 7] = m2c
            .try_into()
            .map_err(|_| Error::InvalidParameters("decode plan: M2C plans"))?;
        let dries = [&dry_a, &dry_v, &dry_o, &dry_u, &dry_d, &dry_h, &dry_q];
        let mut rotations: Vec<i64> = dries
            .iter()
            .flat_map(|d| d.rotations.iter().copied())
            .collect();
        rotations.sort_unstable();
        rotations.dedup();
        let plan = Self {
            cfg: cfg.clone(),
            max_ctx,
            slots,
            lay,
            qcts,
            qkv,
            o,
            up,
            down,
            head,
            levels,
            ranges,
            norms: alloc::vec![
                NormShift {
                    shift: LayerNorm::shift_for(libm::exp2(ranges.x as f64)),
                    wide: Vec::new(),
                };
                2 * cfg.layers + 1
            ],
            dry_counts: dries.map(|d| d.counts),
            m2c,
            c2m: [c2m_s, c2m_o, c2m_y, c2m_u, c2m_d, c2m_h, c2m_q],
            rotations,
        };
        plan.softmax(max_ctx).validate(MPC_CONFIG.ring)?;
        let shift = plan.norms[0].shift;
        plan.norm().validate_scaled(MPC_CONFIG.ring, shift)?;
        if libm::exp2(ranges.x as f64)
            > crate::nonlinear::layernorm::X_MAX * libm::exp2(shift as f64)
        {
            return Err(Error::InvalidParameters(
                "decode plan: the residual bound is past the norms' largest input",
            )
            .into());
        }
        match cfg.family {
            Family::Llama => Silu.validate(MPC_CONFIG.ring)?,
            Family::Gpt2 => Self::gelu().validate(MPC_CONFIG.ring)?,
        }
        Ok(plan)
    }

    /// The architecture.
    pub fn cfg(&self) -> &DecoderConfig {
        &self.cfg
    }

    /// The activation bounds the plan's conversions and norms cover.
    pub fn ranges(&self) -> Ranges {
        self.ranges
    }

    /// Each norm site's shift and widening (see [`DecodePlan::with_norms`]).
    pub fn norm_shifts(&self) -> &[NormShift] {
        &self.norms
    }

    /// The plan with each norm planned from its calibrated input (`r.norms`, one site per
    /// norm: [`super::reference::step_tracked`] records them) instead of one shift from the
    /// residual bound: `LayerNorm::shifts_for` of twice each column's bound and four times the
    /// row's sum of squares. A single shift must cover the largest column, which costs every
    /// other column its low bits: on SmolLM2 (one column of `2.4·10⁴` at the first position,
    /// tens elsewhere) shift 7 leaves rows of RMS below `≈ 7` at the clamped floor of the
    /// variance, and the private tokens leave the plaintext model's at the first position. Per
    /// site with widening, the large columns are squared at their own shift and the rest keep
    /// theirs. A typed error when `r` does not have one site per norm of the right width, or
    /// when a site's bounds are past the norm's range.
    pub fn with_norms(mut self, r: &super::reference::ActRanges) -> Result<Self, ProtocolError> {
        let (d, sites) = (self.cfg.hidden, 2 * self.cfg.layers + 1);
        if r.norms.len() != sites || r.norms.iter().any(|n| n.col_max.len() != d) {
            return Err(Error::InvalidParameters(
                "decode plan: the calibration does not record every norm's input",
            )
            .into());
        }
        let ln = self.norm();
        let mut norms = Vec::with_capacity(sites);
        for n in &r.norms {
            if !(n.sq_max.is_finite() && n.col_max.iter().all(|m| m.is_finite())) {
                return Err(Error::InvalidParameters(
                    "decode plan: a norm's calibrated bound is not finite",
                )
                .into());
            }
            let cols: Vec<f64> = n.col_max.iter().map(|m| 2.0 * m).collect();
            let (shift, wide) = ln.shifts_for(&cols, 4.0 * n.sq_max);
            ln.validate_wide(MPC_CONFIG.ring, shift, &wide)?;
            let top = cols
                .iter()
                .zip(wide.iter().chain(core::iter::repeat(&0)))
                .any(|(m, &w)| {
                    *m > crate::nonlinear::layernorm::X_MAX * libm::exp2((shift + w) as f64)
                });
            if top {
                return Err(Error::InvalidParameters(
                    "decode plan: a norm's calibrated input is past its largest input",
                )
                .into());
            }
            norms.push(NormShift { shift, wide });
        }
        self.norms = norms;
        Ok(self)
    }

    /// The most positions a session holds (prompt and generated tokens).
    pub fn max_ctx(&self) -> usize {
        self.max_ctx
    }

    /// Slots per ciphertext.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The attention's packing (its head groups and positions per cache block).
    pub fn layout(&self) -> &DecodeLayout {
        &self.lay
    }

    /// The attention's query ciphertexts.
    pub fn query_cts(&self) -> &[QueryCt] {
        &self.qcts
    }

    /// M2C levels: `q`, `k`, `v` (compact), the probabilities (compact, the same level), the
    /// attention output, the MLP input, the activation, the head's input, the attention input.
    pub fn levels(&self) -> [usize; 7] {
        self.levels
    }

    /// Per-step CKKS operations of one layer at one cached block, from the dry runs (in the
    /// order of [`DecodePlan::levels`]).
    pub fn dry_counts(&self) -> &[OpCounts; 7] {
        &self.dry_counts
    }

    /// Output ciphertexts of the MLP's first product.
    pub fn up_cts(&self) -> usize {
        self.up.rows.cts()
    }

    /// The rows slot `s` of the MLP's first output ciphertext `u` carries, as rows of
    /// `[W_gate; W_up]` (Llama: gate row `i` in the real part, up row `i` in the imaginary part,
    /// paired) or of `W_up` (GPT-2): [`DenseRows::at`].
    pub fn up_at(&self, u: usize, s: usize) -> (Option<usize>, Option<usize>) {
        self.up.rows.at(u, s)
    }

    /// The head groups per ciphertext that minimize the cost model's estimate of the token at
    /// the full context (time and bytes, [`PER_BLOCK`]): the query ciphertexts times the cache
    /// blocks they read, the query ciphertexts, and the compact ciphertexts converted in.
    fn pick_groups(
        slots: usize,
        cfg: &DecoderConfig,
        max_ctx: usize,
    ) -> Result<DecodeLayout, Error> {
        let (dh, kv) = (cfg.head_dim(), cfg.kv_heads);
        let per_group = (cfg.heads / kv).div_ceil(2);
        let mut best: Option<(f64, DecodeLayout)> = None;
        let mut k = 1;
        while k <= kv.next_power_of_two() {
            if let Ok(lay) = DecodeLayout::grouped(slots, dh, k) {
                let c = kv.div_ceil(k);
                let q = c * per_group;
                let w = |(t, b): (f64, f64)| t + MIB_S * b;
                let blocks = q * lay.blocks(max_ctx);
                let compact = (q + 2 * c).div_ceil(lay.t()) + blocks.div_ceil(dh);
                let est = w(PER_BLOCK) * blocks as f64
                    + w(PER_QUERY) * q as f64
                    + w(PER_COMPACT) * compact as f64;
                if best.as_ref().is_none_or(|b| est < b.0) {
                    best = Some((est, lay));
                }
            }
            k *= 2;
        }
        match best {
            Some((_, lay)) => Ok(lay),
            None => DecodeLayout::new(slots, dh),
        }
    }

    /// The query ciphertexts for `groups` heads per ciphertext: for each key ciphertext `c`
    /// and each pair index `p` of a KV group, the `p`-th pair of KV heads `c·groups + i`.
    fn build_query_cts(cfg: &DecoderConfig, pairs: &[HeadPair], groups: usize) -> Vec<QueryCt> {
        let kv = cfg.kv_heads;
        let per_group = (cfg.heads / kv).div_ceil(2);
        let mut out = Vec::new();
        for c in 0..kv.div_ceil(groups) {
            for p in 0..per_group {
                let slots = (0..groups)
                    .map(|i| {
                        let g = c * groups + i;
                        (g < kv).then(|| pairs[g * per_group + p])
                    })
                    .collect();
                out.push(QueryCt {
                    kv: c,
                    pairs: slots,
                });
            }
        }
        out
    }

    /// The key ciphertext each query ciphertext reads.
    pub fn reads(&self) -> Vec<usize> {
        self.qcts.iter().map(|q| q.kv).collect()
    }

    /// Key (and value) ciphertexts per cache block: `⌈kv_heads / groups⌉`.
    pub fn kv_cts(&self) -> usize {
        self.cfg.kv_heads.div_ceil(self.lay.groups())
    }

    /// The rows of the attention's projection, `[W_q; W_k; W_v]` laid out for the cache: in
    /// segment `i·d_h + j` (every row of it), query ciphertext `u < Q` holds dimension `j` of
    /// its group-`i` pair (`q` rows `h·d_h + j`, real and imaginary); ciphertext `Q + c` holds
    /// key head `c·groups + i`, `Q + C + c` value head `c·groups + i`.
    pub fn qkv_at(&self, u: usize, s: usize) -> (Option<usize>, Option<usize>) {
        let (d, dh, kv) = (self.cfg.hidden, self.cfg.head_dim(), self.cfg.kv_heads);
        let kvd = self.cfg.kv_dim();
        let seg = s / self.lay.t();
        let (i, j) = (seg / dh, seg % dh);
        let (nq, nc) = (self.qcts.len(), self.kv_cts());
        if u < nq {
            match self.qcts[u].pairs.get(i).copied().flatten() {
                Some(pr) => (Some(pr.re * dh + j), pr.im.map(|h| h * dh + j)),
                None => (None, None),
            }
        } else {
            let (base, c) = if u < nq + nc {
                (d, u - nq)
            } else {
                (d + kvd, u - nq - nc)
            };
            let g = c * self.lay.groups() + i;
            ((g < kv).then_some(base + g * dh + j), None)
        }
    }

    /// The attention projection's output ciphertexts: the query ciphertexts, then the keys and
    /// the values.
    pub fn qkv_cts(&self) -> usize {
        self.qcts.len() + 2 * self.kv_cts()
    }

    /// Galois steps the client must generate keys for.
    pub fn rotations(&self) -> &[i64] {
        &self.rotations
    }

    /// The C2M levels: scores, attention output, `W_o`, up, `W_down`, logits, the projection.
    pub fn c2m_levels(&self) -> [usize; 7] {
        [0, 1, 2, 3, 4, 5, 6].map(|i| self.c2m[i].level())
    }

    /// The norms (RMSNorm for Llama, LayerNorm for GPT-2), without their affine map: the gain
    /// (and GPT-2's bias) are folded into the projection that follows.
    pub fn norm(&self) -> LayerNorm {
        LayerNorm {
            rows: 1,
            cols: self.cfg.hidden,
            eps: self.cfg.norm_eps,
            kind: match self.cfg.family {
                Family::Llama => LnKind::Rms,
                Family::Gpt2 => LnKind::Accurate,
            },
            affine: false,
        }
    }

    /// The softmax over `len` cached positions, one row per query head (no mask: the new
    /// token attends to every cached position, itself included).
    pub fn softmax(&self, len: usize) -> Softmax {
        Softmax {
            rows: self.cfg.heads,
            cols: len,
            mask: Mask::None,
            kind: SoftmaxKind::Accurate,
        }
    }

    /// GPT-2's `gelu_new`.
    pub fn gelu() -> Gelu {
        Gelu {
            kind: GeluKind::Tanh,
        }
    }
}

fn vec_of(n: usize, z: Tracked) -> Vec<Tracked> {
    alloc::vec![z; n]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::Family;

    fn small(family: Family) -> DecoderConfig {
        DecoderConfig::tiny(family)
    }

    /// Both families plan on the small parameters: the attention enters two levels above
    /// the scores' conversion, each dense product one above its own, and every output row of
    /// every product has exactly one home.
    #[test]
    fn plans_and_layouts() {
        let p = crate::params::insecure_logn12().validate().unwrap();
        for fam in [Family::Llama, Family::Gpt2] {
            let cfg = small(fam);
            let plan = DecodePlan::new(&p, &cfg, 40).unwrap();
            let c = plan.c2m_levels();
            assert!(
                plan.levels[B_ATTN] >= c[B_ATTN] + 2,
                "{:?} {c:?}",
                plan.levels
            );
            for b in [B_OUT, B_UP, B_DOWN, B_HEAD, B_QKV] {
                assert!(plan.levels[b] > c[b]);
            }
            // qkv rows: each q/k/v row is replicated over its segment's t rows.
            let n = plan.slots;
            let mut seen = alloc::vec![0usize; cfg.hidden + 2 * cfg.kv_dim()];
            for u in 0..plan.qkv_cts() {
                for s in 0..n {
                    let (a, b) = plan.qkv_at(u, s);
                    for r in a.into_iter().chain(b) {
                        seen[r] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&k| k == plan.lay.t()), "{fam:?}");
            let mut up = alloc::vec![0usize; 2 * cfg.ffn];
            for u in 0..plan.up_cts() {
                for s in 0..n {
                    let (a, b) = plan.up_at(u, s);
                    for r in a.into_iter().chain(b) {
                        up[r] += 1;
                    }
                }
            }
            let want = if fam == Family::Llama {
                2 * cfg.ffn
            } else {
                cfg.ffn
            };
            assert_eq!(up.iter().filter(|&&k| k == 1).count(), want);
        }
        assert!(DecodePlan::new(&p, &small(Family::Llama), 65).is_err());
    }

    /// SmolLM2's and GPT2-base's shapes plan at the session parameters.
    #[test]
    fn real_shapes_plan_at_the_session_parameters() {
        let p = session_params().unwrap();
        let smol = DecoderConfig {
            family: Family::Llama,
            layers: 30,
            hidden: 576,
            heads: 9,
            kv_heads: 3,
            ffn: 1536,
            vocab: 49_152,
            context: 8192,
            rope_base: 1e5,
            norm_eps: 1e-5,
            tied_head: true,
        };
        let gpt2 = DecoderConfig {
            family: Family::Gpt2,
            layers: 12,
            hidden: 768,
            heads: 12,
            kv_heads: 12,
            ffn: 3072,
            vocab: 50_257,
            context: 1024,
            ..smol.clone()
        };
        for cfg in [&smol, &gpt2] {
            let plan = DecodePlan::new(&p, cfg, 256).unwrap();
            std::println!(
                "{:?}: levels {:?} c2m {:?} keys {} t {} groups {} qkv cts {}",
                cfg.family,
                plan.levels,
                plan.c2m_levels(),
                plan.rotations().len(),
                plan.lay.t(),
                plan.lay.groups(),
                plan.qkv_cts()
            );
            assert_eq!(plan.levels[B_ATTN], 3);
        }
        // The head groups the cost model picks, against the measurements (time + MIB_S·MiB per
        // step, one layer, PER_BLOCK's runs): GPT2-base 4 at contexts 128 and 256 (at 256 the
        // best of 4, 8 and 16: 4.04 against 4.38 and 4.71; at 128 within 0.1 of 16, ahead of
        // 1, 2 and 8), 16 at 64 (within 0.1 of 4: the runs' spread); SmolLM2's shape 4 at 128
        // (one layer: 2.30 against 2.42 for 2 and 2.49 for 1) and, not measured, at 256.
        let slots = p.n() / 2;
        for (cfg, ctx, want) in [
            (&gpt2, 64, 16),
            (&gpt2, 128, 4),
            (&gpt2, 256, 4),
            (&smol, 128, 4),
            (&smol, 256, 4),
        ] {
            let lay = DecodePlan::pick_groups(slots, cfg, ctx).unwrap();
            assert_eq!(lay.groups(), want, "{:?} at context {ctx}", cfg.family);
        }
    }

    /// Calibrated bounds (SmolLM2's magnitudes on the benchmark's calibration text) plan at the
    /// session parameters, with the norms' shift that covers the residual; a residual past
    /// the norms' largest input is refused.
    #[test]
    fn calibrated_ranges_plan() {
        use crate::decoder::reference::ActRanges;
        let r = Ranges::calibrated(&ActRanges {
            residual: 27_347.0,
            products: 78.3,
            activation: 3_346.7,
            norms: Vec::new(),
        });
        assert_eq!(r, Ranges { x: 16, y: 8, g: 13 });
        assert_eq!(Ranges::calibrated(&ActRanges::default()), Ranges::DEFAULT);
        let p = session_params().unwrap();
        let cfg = DecoderConfig {
            hidden: 576,
            heads: 9,
            kv_heads: 3,
            ffn: 1536,
            vocab: 49_152,
            ..DecoderConfig::tiny(Family::Llama)
        };
        let plan = DecodePlan::with_options(&p, &cfg, 16, None, r).unwrap();
        assert_eq!(plan.ranges(), r);
        assert!(plan
            .norm_shifts()
            .iter()
            .all(|n| n.shift == 7 && n.wide.is_empty()));
        let wide = Ranges { x: 30, ..r };
        assert!(DecodePlan::with_options(&p, &cfg, 16, None, wide).is_err());

        // Per site: SmolLM2's massive column (2.4·10⁴ in column 507, tens elsewhere) is
        // widened alone, and the other columns keep a small shift.
        use crate::decoder::reference::NormSite;
        let site = |big: f64| {
            let mut col_max = alloc::vec![60.0; 576];
            col_max[507] = big;
            NormSite {
                col_max,
                sq_max: big * big + 575.0 * 30.0 * 30.0,
            }
        };
        let cal = ActRanges {
            norms: (0..2 * cfg.layers + 1)
                .map(|i| site(if i == 0 { 0.5 } else { 24_000.0 }))
                .collect(),
            ..ActRanges::default()
        };
        let planned = plan.clone().with_norms(&cal).unwrap();
        let ns = planned.norm_shifts();
        assert_eq!((ns[0].shift, ns[0].wide.is_empty()), (0, true));
        for n in &ns[1..] {
            assert_eq!(n.shift, 2);
            assert_eq!(n.wide[507], 5);
            assert_eq!(n.wide.iter().filter(|&&w| w > 0).count(), 1);
        }
        // one site short, a wrong width, a bound past the norm's range: typed refusals
        let mut short = cal.clone();
        short.norms.pop();
        assert!(plan.clone().with_norms(&short).is_err());
        let mut narrow = cal.clone();
        narrow.norms[1].col_max.pop();
        assert!(plan.clone().with_norms(&narrow).is_err());
        let mut huge = cal.clone();
        huge.norms[1] = site(1e9);
        assert!(plan.clone().with_norms(&huge).is_err());
    }
}
