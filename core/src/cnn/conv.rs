//! Convolution, average pooling and fully connected layers on FEnc2's fragment layout, compiled to
//! the two-stage rotation form of [`super::linear`] and run through an [`Exec`] (real CKKS or the
//! counting dry run: one code path).
//!
//! **Convolution** (`N_in → N_out`, kernel `K`, stride `s`, padding `p`). Output pixel
//! `(y_o, x_o)` at intra-block position `(u_o, v_o)` of block `(i, j)` reads input pixel
//! `y_o·s + d_i − p = (i + q)·S + u'` for tap `d_i`: the input ciphertext at position `(u', v')`,
//! rotated by the block offset `(q, r)`, i.e. by `(q·m + r)·BS` slots (an inner rotation). For a
//! fixed output position, input position and offset the tap is unique, so each product carries one
//! weight per channel pair. Channel `c` in chunk `t_i` reaches output channel `o` in chunk `t_o` by
//! the outer rotation `((t_i − t_o) mod α)·BS·m²`, applied once per output ciphertext to the sum
//! over all inputs. Taps that fall on padding, and blocks that a rotation wraps around, get zero
//! weight in the diagonal, so padding slots may hold anything.
//!
//! **Stride** `s` (dividing `S`): only output positions `u_o < S/s` are computed — the others are
//! the discarded ciphertexts of FEnc2 — and the output layout has block `S/s` on a grid `M/s`, with
//! the same `m`, batch and chunk. **Average pooling** is a depthwise convolution (weight
//! `1/K²`, stride `K`); at `S ≥ K` it needs no rotation at all.
//!
//! **Fully connected** layers use the diagonal method with baby-step giant-step over feature
//! groups of `BS` slots (the batch stays innermost): feature `f` at slot group `γ_f` of input `t`
//! reaches output `o` at group `o mod G` (`G = n / BS`) through the shift `δ = γ_f − o (mod G)`,
//! split as `δ = a + n₁·b` into a baby and a giant step.
//!
//! Every layer may take an *input affine* `x ↦ α_c·x + β_c` per input channel (or feature): the
//! scale and offset that a polynomial activation `a·x² + b·x + c = a·(x + b/2a)² + (c − b²/4a)`
//! leaves after its single squaring. The weights absorb `α`, the bias absorbs `β` exactly over
//! the taps that are valid at each output position, so the activation costs one level.

use super::linear::{RotationCounts, Term, TwoStage, TwoStageBuilder};
use crate::circuits::exec::Exec;
use crate::ckks::C64;
use crate::error::{Error, Result};
use crate::packing::fragment::FragmentLayout;
use alloc::collections::btree_map::{BTreeMap, Entry};
use alloc::vec;
use alloc::vec::Vec;

/// A map applied to each finished output `(index, ciphertext)` of a pixel-wise convolution.
type PostFn<'a, C> = &'a dyn Fn(usize, C) -> Result<C>;

/// The arguments of one run of a layer, as the product paths take them: the executor, the
/// compiled plan, the input ciphertexts (in `plan.input`'s layout) and the input affine.
struct ConvRun<'a, E: Exec>(&'a E, &'a ConvPlan, &'a [E::Ct], Option<&'a InputAffine>);

/// A per-channel affine map `x ↦ scale·x + shift` applied to a layer's input before its weights.
#[derive(Clone, Debug, PartialEq)]
pub struct InputAffine {
    /// `α_c`.
    pub scale: Vec<f64>,
    /// `β_c`.
    pub shift: Vec<f64>,
}

/// A 2-D convolution's weights and geometry.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2d {
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel side `K`.
    pub kernel: usize,
    /// Stride `s`.
    pub stride: usize,
    /// Zero padding `p` on each side.
    pub padding: usize,
    /// Depthwise (`groups = channels`): output channel `o` reads input channel `o` only, and
    /// `weight` holds `C·K·K` values.
    pub depthwise: bool,
    /// Weights `[o][c][d_i][d_j]` row-major (`[c][d_i][d_j]` when depthwise).
    pub weight: Vec<f64>,
    /// Bias per output channel.
    pub bias: Vec<f64>,
    /// The first `point_outputs` output channels read the centre tap only: a `1 × 1` branch
    /// concatenated before a `K × K` one in a single layer (SqueezeNet's fire expansions,
    /// [`Conv2d::with_point_outputs`]). Public architecture, so the plan skips those products
    /// and the rotations only they need. `0` for an ordinary layer.
    pub point_outputs: usize,
}

impl Conv2d {
    /// A validated convolution.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        weight: Vec<f64>,
        bias: Vec<f64>,
    ) -> Result<Self> {
        let c = Self {
            in_channels,
            out_channels,
            kernel,
            stride,
            padding,
            depthwise: false,
            weight,
            bias,
            point_outputs: 0,
        };
        c.validate()?;
        Ok(c)
    }

    /// The same layer with its first `n` output channels restricted to the centre tap: a
    /// `1 × 1` convolution and a `K × K` one over the same input, concatenated in that order
    /// (SqueezeNet's fire module). Their weights off the centre must be zero; `K` must be odd
    /// and the padding `(K − 1)/2`, so both branches see the same map.
    pub fn with_point_outputs(mut self, n: usize) -> Result<Self> {
        self.point_outputs = n;
        self.validate()?;
        Ok(self)
    }

    /// Average pooling `K × K` with stride `K` over `channels`, as a depthwise convolution.
    pub fn avg_pool(channels: usize, kernel: usize) -> Result<Self> {
        Self::avg_pool_with(channels, kernel, kernel, 0)
    }

    /// Average pooling `K × K` with any stride and zero padding (the padded taps count in the
    /// mean, as PyTorch's `count_include_pad`): the stand-in for a max pooling in the FHE-only
    /// mode, such as ResNet's `3 × 3`, stride 2, padding 1.
    pub fn avg_pool_with(
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
    ) -> Result<Self> {
        let k2 = kernel * kernel;
        let w = if k2 == 0 { 0.0 } else { 1.0 / k2 as f64 };
        Self::depthwise(
            channels,
            kernel,
            stride,
            padding,
            vec![w; channels * k2],
            vec![0.0; channels],
        )
    }

    /// A validated depthwise convolution (`groups = channels`, MobileNet's `3 × 3` layers):
    /// `weight` holds `[c][d_i][d_j]`, `C·K·K` values.
    pub fn depthwise(
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        weight: Vec<f64>,
        bias: Vec<f64>,
    ) -> Result<Self> {
        let c = Self {
            in_channels: channels,
            out_channels: channels,
            kernel,
            stride,
            padding,
            depthwise: true,
            weight,
            bias,
            point_outputs: 0,
        };
        c.validate()?;
        Ok(c)
    }

    /// Checks the fields: what the constructors check, for a layer built or changed field by
    /// field ([`crate::cnn::Network::validate`] calls it for every layer).
    pub fn validate(&self) -> Result<()> {
        if self.in_channels == 0 || self.out_channels == 0 || self.kernel == 0 || self.stride == 0 {
            return Err(Error::InvalidParameters(
                "convolution: channels, kernel and stride must be positive",
            ));
        }
        if self.depthwise && self.in_channels != self.out_channels {
            return Err(Error::InvalidParameters(
                "convolution: a depthwise layer keeps its channel count",
            ));
        }
        let k2 = self.kernel * self.kernel;
        let want = if self.depthwise {
            self.in_channels * k2
        } else {
            self.out_channels * self.in_channels * k2
        };
        if self.weight.len() != want {
            return Err(Error::Shape {
                what: "convolution weights",
                expected: want,
                found: self.weight.len(),
            });
        }
        if self.bias.len() != self.out_channels {
            return Err(Error::Shape {
                what: "convolution bias",
                expected: self.out_channels,
                found: self.bias.len(),
            });
        }
        if self.weight.iter().chain(&self.bias).any(|v| !v.is_finite()) {
            return Err(Error::NonFinite);
        }
        self.check_point_outputs()
    }

    /// [`Conv2d::point_outputs`]: a `1 × 1` branch needs the shape under which the centre tap
    /// is a `1 × 1` convolution of the same map, and weights only there.
    fn check_point_outputs(&self) -> Result<()> {
        let (n, k) = (self.point_outputs, self.kernel);
        if n == 0 {
            return Ok(());
        }
        if n > self.out_channels
            || self.depthwise
            || k.is_multiple_of(2)
            || self.padding != k / 2
            || self.stride != 1
        {
            return Err(Error::InvalidParameters(
                "convolution: a 1×1 branch needs an odd kernel, padding (K-1)/2, stride 1, no depthwise, and at most N_out channels",
            ));
        }
        for o in 0..n {
            for c in 0..self.in_channels {
                for di in 0..k {
                    for dj in 0..k {
                        if (di, dj) != (k / 2, k / 2) && self.w(o, c, di, dj) != 0.0 {
                            return Err(Error::InvalidParameters(
                                "convolution: a 1×1 branch channel has a weight off the centre tap",
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// `W[o][c][d_i][d_j]` (zero off the diagonal of a depthwise layer).
    pub fn w(&self, o: usize, c: usize, di: usize, dj: usize) -> f64 {
        let k = self.kernel;
        if self.depthwise {
            if o != c {
                return 0.0;
            }
            self.weight[(c * k + di) * k + dj]
        } else {
            self.weight[((o * self.in_channels + c) * k + di) * k + dj]
        }
    }

    /// The output side for an input side `h`: `⌊(h + 2p − K)/s⌋ + 1`.
    pub fn out_side(&self, h: usize) -> Result<usize> {
        let span = h + 2 * self.padding;
        if span < self.kernel {
            return Err(Error::Shape {
                what: "input side (with padding) against the kernel",
                expected: self.kernel,
                found: span,
            });
        }
        Ok((span - self.kernel) / self.stride + 1)
    }

    /// The output layout for `input`.
    pub fn out_layout(&self, input: &FragmentLayout) -> Result<FragmentLayout> {
        if input.channels != self.in_channels {
            return Err(Error::Shape {
                what: "input channels of the convolution",
                expected: self.in_channels,
                found: input.channels,
            });
        }
        let (ho, wo) = (self.out_side(input.height)?, self.out_side(input.width)?);
        if input.is_pixelwise() {
            // One pixel per ciphertext: the output map is its own grid, whatever the stride.
            let side = ho.max(wo);
            return FragmentLayout::new(
                input.batch,
                self.out_channels,
                ho,
                wo,
                Some(side),
                side,
                input.slots,
            );
        }
        if !input.block.is_multiple_of(self.stride) || !input.grid.is_multiple_of(self.stride) {
            return Err(Error::InvalidParameters(
                "convolution: the stride must divide the block size (FEnc2 discards the other positions)",
            ));
        }
        let grid = input.grid / self.stride;
        if ho > grid || wo > grid {
            return Err(Error::InvalidParameters(
                "convolution: the output does not fit the grid (padding larger than (K-1)/2)",
            ));
        }
        FragmentLayout::new(
            input.batch,
            self.out_channels,
            ho,
            wo,
            Some(grid),
            input.block / self.stride,
            input.slots,
        )
    }

    /// Compiles the layer for `input` (the plan every run and dry run follows).
    pub fn plan(&self, input: &FragmentLayout) -> Result<ConvPlan> {
        let out = self.out_layout(input)?;
        self.plan_to(input, out)
    }

    /// Compiles the layer for `input` into `out`: [`Conv2d::out_layout`]'s layout up to its
    /// fold. A folded output is FEnc2's Arch-aware Ct Compression written by the layer itself:
    /// each output position's outer rotation lands its channels in that position's run of
    /// chunks and its weight diagonals are zero elsewhere (they are the mask), so compaction
    /// costs no extra rotation, no extra plaintext product and no level.
    pub fn plan_to(&self, input: &FragmentLayout, out: FragmentLayout) -> Result<ConvPlan> {
        self.validate()?;
        let want = self.out_layout(input)?;
        if (FragmentLayout { fold: 1, ..out }) != (FragmentLayout { fold: 1, ..want }) {
            return Err(Error::InvalidParameters(
                "convolution: the output layout is not the layer's (only the fold may differ)",
            ));
        }
        let (s, so, m, bs) = (input.block, out.block, input.blocks(), input.batch);
        let alpha = input.channels_per_ct();
        let (ai, ao) = (input.group_width(), out.group_width());
        let chunk = input.chunk() as i64;
        let mut b = TwoStageBuilder::new(input.ciphertexts(), out.ciphertexts(), input.slots);
        let k = self.kernel;
        let gin = input.groups();
        // Pixel-wise layers never rotate and run from the weights alone: no stage list.
        let groups = if input.is_pixelwise() {
            0
        } else {
            out.groups()
        };
        let mut shifts: Vec<usize> = Vec::new();
        let folded = input.fold > 1 || out.fold > 1;
        let mut merged: BTreeMap<(usize, usize, usize, i64, u64), u64> = BTreeMap::new();
        let mut taps: Vec<Vec<u64>> = Vec::new();
        for go in 0..groups {
            // Valid output chunks of this group.
            let to_valid = (self.out_channels - go * ao).min(ao);
            for uo in 0..so {
                for vo in 0..so {
                    let oct = out.ct_index(go, uo, vo);
                    let bo = out.chunk_base(uo, vo);
                    let pos = uo * so + vo;
                    for gi in 0..gin {
                        let ti_valid = (self.in_channels - gi * ai).min(ai);
                        // A depthwise layer links channel c to itself only.
                        let (lo, hi) = (
                            (gi * ai).max(go * ao),
                            ((gi + 1) * ai).min((go + 1) * ao).min(self.in_channels),
                        );
                        if self.depthwise && lo >= hi {
                            continue;
                        }
                        for di in 0..k {
                            let ey = self.input_coord(uo, di);
                            let (q, u1) = (ey.div_euclid(s as i64), ey.rem_euclid(s as i64));
                            for dj in 0..k {
                                // Off the centre, a 1×1 branch's outputs take no product.
                                let t_lo = if (di, dj) == (k / 2, k / 2) {
                                    0
                                } else {
                                    self.point_outputs.saturating_sub(go * ao).min(to_valid)
                                };
                                let to_eff = to_valid - t_lo;
                                if to_eff == 0 {
                                    continue;
                                }
                                let ex = self.input_coord(vo, dj);
                                let (r, v1) = (ex.div_euclid(s as i64), ex.rem_euclid(s as i64));
                                let (u1, v1) = (u1 as usize, v1 as usize);
                                let ict = input.ct_index(gi, u1, v1);
                                let bi = input.chunk_base(u1, v1);
                                // Outer shifts: input chunk bi + t_i → output chunk bo + t_o,
                                // over the valid pairs.
                                shifts.clear();
                                if self.depthwise {
                                    shifts.extend((lo..hi).map(|c| {
                                        (bi + c - gi * ai + alpha - bo - (c - go * ao)) % alpha
                                    }));
                                    shifts.sort_unstable();
                                    shifts.dedup();
                                } else if ti_valid + to_eff > alpha {
                                    shifts.extend(0..alpha);
                                } else {
                                    // t_i − t_o runs over −(to_valid − 1) ..= ti_valid − 1 − t_lo.
                                    shifts.extend((0..ti_valid + to_eff - 1).map(|d| {
                                        (bi + d + 2 * alpha - bo - (to_valid - 1)) % alpha
                                    }));
                                }
                                let baby = (q * m as i64 + r) * bs as i64;
                                let code = (((pos * gin + gi) * k + di) * k + dj) as u64;
                                for &kk in &shifts {
                                    // Unfolded, every product stands alone (as Algorithm 1
                                    // counts them); folded, products that share everything
                                    // but the position merge into one diagonal.
                                    let key = (oct, kk, ict, baby, if folded { 0 } else { code });
                                    let next = taps.len() as u64;
                                    match merged.entry(key) {
                                        Entry::Vacant(e) => {
                                            e.insert(next);
                                            taps.push(vec![code]);
                                            b.add(oct, kk as i64 * chunk, ict, baby, next);
                                        }
                                        Entry::Occupied(e) => taps[*e.get() as usize].push(code),
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(ConvPlan {
            input: *input,
            output: out,
            geometry: self.geometry(),
            stages: b.finish(),
            taps,
        })
    }

    /// `(N_in, N_out, K, stride, padding, depthwise, point outputs)`.
    fn geometry(&self) -> [usize; 7] {
        [
            self.in_channels,
            self.out_channels,
            self.kernel,
            self.stride,
            self.padding,
            self.depthwise as usize,
            self.point_outputs,
        ]
    }

    /// Runs the layer on `cts` (in `plan.input`'s layout), with an optional input affine, and
    /// rescales. The result is in `plan.output`'s layout. A plan compiled for another layer
    /// geometry is refused.
    pub fn run<E: Exec>(
        &self,
        ex: &E,
        plan: &ConvPlan,
        cts: &[E::Ct],
        affine: Option<&InputAffine>,
    ) -> Result<Vec<E::Ct>> {
        self.check_run(ex, plan, affine)?;
        let inl = &plan.input;
        let r = ConvRun(ex, plan, cts, affine);
        let mut outs = if inl.is_pixelwise() {
            self.products_pixel(r, None)?
        } else if inl.channels_per_ct() == 1 {
            self.products_scalar(r)?
        } else {
            self.products_diagonal(r)?
        };
        self.finish(ex, plan, &mut outs, affine)?;
        Ok(outs)
    }

    /// The checks of a run: the input affine's width, the plan's layer and the slot count.
    fn check_run<E: Exec>(
        &self,
        ex: &E,
        plan: &ConvPlan,
        affine: Option<&InputAffine>,
    ) -> Result<()> {
        if let Some(a) = affine {
            check_affine(a, self.in_channels, "channels of the input affine")?;
        }
        if plan.geometry != self.geometry() {
            return Err(Error::InvalidParameters(
                "convolution: the plan was compiled for another layer",
            ));
        }
        if ex.slots() != plan.input.slots {
            return Err(Error::SlotMismatch {
                expected: plan.input.slots,
                found: ex.slots(),
            });
        }
        Ok(())
    }

    /// [`Conv2d::run`] followed by `then` on every output (an activation). In the pixel-wise
    /// mode each output position is finished and handed to `then` as soon as it is computed, so
    /// the layer's raw outputs never all exist at once (peak memory is the activation's
    /// outputs, not both); otherwise `then` maps the finished outputs.
    pub fn run_then<E: Exec>(
        &self,
        ex: &E,
        plan: &ConvPlan,
        cts: &[E::Ct],
        affine: Option<&InputAffine>,
        then: &dyn Fn(E::Ct) -> Result<E::Ct>,
    ) -> Result<Vec<E::Ct>> {
        if !plan.input.is_pixelwise() {
            return self
                .run(ex, plan, cts, affine)?
                .into_iter()
                .map(then)
                .collect();
        }
        self.check_run(ex, plan, affine)?;
        let post = |o: usize, mut ct: E::Ct| -> Result<E::Ct> {
            self.finish_one(ex, plan, o, &mut ct, affine)?;
            then(ct)
        };
        let r = ConvRun(ex, plan, cts, affine);
        self.products_pixel(r, Some(&post))
    }

    /// The general path: one plaintext diagonal per product (weights vary across the channel
    /// chunks of a ciphertext).
    fn products_diagonal<E: Exec>(&self, r: ConvRun<'_, E>) -> Result<Vec<E::Ct>> {
        let ConvRun(ex, plan, cts, affine) = r;
        let (inl, outl) = (&plan.input, &plan.output);
        let alpha = inl.channels_per_ct();
        let (ai, ao) = (inl.group_width(), outl.group_width());
        let chunk = inl.chunk();
        let (k, so, s) = (self.kernel, outl.block, inl.block);
        let gin_n = inl.groups();
        let n = inl.slots;
        let diag = |o: usize, gi: usize, t: &Term| -> Vec<C64> {
            let kk = (t.giant(plan.stages.outputs[o][gi].shift, n) as usize / chunk) % alpha;
            // All positions of one ciphertext share its group.
            let go = o * outl.fold / (so * so);
            let mut d = vec![C64::default(); n];
            let codes = plan.taps.get(t.tag as usize).map_or(&[][..], |v| &v[..]);
            for &code in codes {
                let code = code as usize;
                let (di, dj) = ((code / k) % k, code % k);
                let (pos, gin) = (code / (k * k) / gin_n, (code / (k * k)) % gin_n);
                let (uo, vo) = (pos / so, pos % so);
                let bo = outl.chunk_base(uo, vo);
                let ey = self.input_coord(uo, di);
                let ex_ = self.input_coord(vo, dj);
                let bi = inl.chunk_base(
                    ey.rem_euclid(s as i64) as usize,
                    ex_.rem_euclid(s as i64) as usize,
                );
                for ti in 0..ai {
                    let c = gin * ai + ti;
                    if c >= self.in_channels {
                        break;
                    }
                    // The chunk this product lands in after the outer rotation.
                    let target = (bi + ti + alpha - kk) % alpha;
                    if target < bo || target >= bo + ao {
                        continue;
                    }
                    let o_ch = go * ao + target - bo;
                    if o_ch >= self.out_channels {
                        continue;
                    }
                    let w = self.scaled_w(o_ch, c, di, dj, affine);
                    if w == 0.0 {
                        continue;
                    }
                    self.for_valid(inl, outl, uo, vo, di, dj, |i, j| {
                        for b in 0..inl.batch {
                            let at = inl.slot(bi + ti, i, j, b);
                            d[at] = d[at] + C64::real(w);
                        }
                    });
                }
            }
            d
        };
        plan.stages
            .run(ex, cts, layer_tag(self, plan, affine), &diag)
    }

    /// FEnc2's large-batch mode at its limit: the batch fills the slots and one ciphertext holds
    /// one pixel of one channel (`S = M`, `α = 1`). No rotation and no mask is needed: the
    /// outputs at one position are a matrix of constants (output channel × valid tap) applied to
    /// the input ciphertexts of those taps, one [`Exec::mul_const_matrix`] per position at scale
    /// `q_level` (one level).
    fn products_pixel<E: Exec>(
        &self,
        r: ConvRun<'_, E>,
        post: Option<PostFn<'_, E::Ct>>,
    ) -> Result<Vec<E::Ct>> {
        let ConvRun(ex, plan, cts, affine) = r;
        let (inl, outl) = (&plan.input, &plan.output);
        let q = input_prime(ex, cts, inl.ciphertexts())?;
        let so = outl.block;
        let mut outs: Vec<Option<E::Ct>> = (0..outl.ciphertexts()).map(|_| None).collect();
        for uo in 0..so {
            for vo in 0..so {
                // The valid taps (c, d_i, d_j) at this output position, and their inputs.
                let at = self.valid_taps(inl, uo, vo);
                let taps: Vec<(usize, usize, usize)> = (0..self.in_channels)
                    .flat_map(|c| at.iter().map(move |&(di, dj, _, _)| (c, di, dj)))
                    .collect();
                let inputs: Vec<&E::Ct> = if taps.is_empty() {
                    alloc::vec![&cts[0]]
                } else {
                    (0..self.in_channels)
                        .flat_map(|c| at.iter().map(move |&(_, _, yi, xi)| (c, yi, xi)))
                        .map(|(c, yi, xi)| &cts[inl.ct_index(c, yi, xi)])
                        .collect()
                };
                let width = inputs.len();
                let mut w = vec![0.0; self.out_channels * width];
                for o in 0..self.out_channels {
                    for (t, &(c, di, dj)) in taps.iter().enumerate() {
                        w[o * width + t] = self.scaled_w(o, c, di, dj, affine);
                    }
                }
                let res = ex.mul_const_matrix(&inputs, &w, self.out_channels, q)?;
                for (o, ct) in res.into_iter().enumerate() {
                    let i = outl.ct_index(o, uo, vo);
                    outs[i] = Some(match post {
                        Some(f) => f(i, ct)?,
                        None => ct,
                    });
                }
            }
        }
        outs.into_iter()
            .map(|c| {
                c.ok_or(Error::InvalidParameters(
                    "convolution: an output was not made",
                ))
            })
            .collect()
    }

    /// FEnc2's large-batch mode (one channel per ciphertext): every product's diagonal is a
    /// scalar weight times a 0/1 validity mask that depends only on the input ciphertext and the
    /// block shift. Each rotated input is masked once, with the mask encoded at `Δ₁` (no
    /// rescale), and every output accumulates `⌊w·Δ₂⌉ ⊙ masked` with `Δ₁·Δ₂ = q_level`: one
    /// level, one plaintext per (input, shift) instead of one per product, and no NTT per weight.
    /// The accumulation runs as one [`Exec::mul_const_matrix`] per group of masked inputs, so
    /// only one group's masked copies (and its partial sums) are alive at a time. The matrix
    /// rounds `w·Δ₂` to integers of at most 20 bits: for weights up to `(2^20 − 1)/Δ₂` (about 4
    /// under a 40-bit prime) that is exactly `⌊w·Δ₂⌉`; a group with larger weights is rounded to
    /// `2^-20` of its largest instead.
    fn products_scalar<E: Exec>(&self, r: ConvRun<'_, E>) -> Result<Vec<E::Ct>> {
        let ConvRun(ex, plan, cts, affine) = r;
        use alloc::collections::BTreeMap;
        let (inl, outl) = (&plan.input, &plan.output);
        let (k, s, m, n) = (self.kernel, inl.block as i64, inl.blocks(), inl.slots);
        let q = input_prime(ex, cts, plan.stages.babies.len())?;
        let d1 = mask_scale(q);
        let d2 = q / d1;
        let tag = layer_tag(self, plan, None);
        // The block offset (q_y, q_x) and input position (u', v') of a product. Two offsets may
        // share a rotation amount on small grids; their masks differ, so masks are keyed by the
        // offset.
        let geometry = |uo: usize, vo: usize, di: usize, dj: usize| {
            let ey = self.input_coord(uo, di);
            let ex_ = self.input_coord(vo, dj);
            (
                ey.div_euclid(s),
                ey.rem_euclid(s),
                ex_.div_euclid(s),
                ex_.rem_euclid(s),
            )
        };
        // Pass 1: the masks each input needs: (input, q_y, q_x) → (baby, u', v').
        let mut need: BTreeMap<(usize, i64, i64), (usize, i64, i64)> = BTreeMap::new();
        for (o, giants) in plan.stages.outputs.iter().enumerate() {
            let (_, uo, vo) = outl.ct_coords(o);
            for g in giants {
                if g.shift != 0 {
                    return Err(Error::InvalidParameters(
                        "convolution: an outer rotation in the one-channel mode",
                    ));
                }
                for t in &g.terms {
                    let tg = plan.taps.get(t.tag as usize).map_or(0, |v| v[0]) as usize;
                    let (qy, u1, qx, v1) = geometry(uo, vo, (tg / k) % k, tg % k);
                    need.entry((t.input, qy, qx)).or_insert((t.baby, u1, v1));
                }
            }
        }
        // Every output's nonzero scalar weights, keyed by the masked input they multiply, as
        // (output, weight) lists: the transpose of the outputs' terms.
        let mut uses: BTreeMap<(usize, i64, i64), Vec<(usize, f64)>> = BTreeMap::new();
        for (o, giants) in plan.stages.outputs.iter().enumerate() {
            let (o_ch, uo, vo) = outl.ct_coords(o);
            for t in giants.iter().flat_map(|g| &g.terms) {
                let tg = plan.taps.get(t.tag as usize).map_or(0, |v| v[0]) as usize;
                let (c, di, dj) = ((tg / (k * k)) % inl.groups(), (tg / k) % k, tg % k);
                let (qy, _, qx, _) = geometry(uo, vo, di, dj);
                let w = self.scaled_w(o_ch, c, di, dj, affine);
                if w == 0.0 {
                    continue;
                }
                uses.entry((t.input, qy, qx)).or_default().push((o, w));
            }
        }
        // Passes 2 and 3, streamed over groups of inputs: each input's hoisted rotations are
        // masked once and dropped; once a group holds `MASKED_GROUP` masked copies, every
        // output with a weight on them accumulates them in one constant matrix product, and the
        // copies are dropped. Peak memory is one group of masked copies beside the outputs, not
        // every masked copy of the layer at once (4,096 of them in VGG5's second layer at batch
        // 256).
        const MASKED_GROUP: usize = 256;
        let outputs = plan.stages.outputs.len();
        let mut live = vec![false; outputs];
        for &(o, _) in uses.values().flatten() {
            live[o] = true;
        }
        let mut accs: Vec<Option<E::Ct>> = (0..outputs).map(|_| None).collect();
        // Masked inputs with a weight that were made and summed: all of `uses` by the end.
        let mut summed = 0usize;
        type Key = (usize, i64, i64);
        let mut group: Vec<(Key, E::Ct)> = Vec::new();
        let mut flush = |group: &mut Vec<(Key, E::Ct)>| -> Result<()> {
            let mut rows: Vec<usize> = group
                .iter()
                .filter_map(|(key, _)| uses.get(key))
                .flatten()
                .map(|&(o, _)| o)
                .collect();
            rows.sort_unstable();
            rows.dedup();
            summed += group
                .iter()
                .filter(|(key, _)| uses.contains_key(key))
                .count();
            if !rows.is_empty() {
                let cols = group.len();
                let mut w = vec![0.0; rows.len() * cols];
                for (j, (key, _)) in group.iter().enumerate() {
                    for &(o, wt) in uses.get(key).into_iter().flatten() {
                        let r = rows.binary_search(&o).map_err(|_| {
                            Error::InvalidParameters("convolution: an output was not made")
                        })?;
                        w[r * cols + j] += wt;
                    }
                }
                let ins: Vec<&E::Ct> = group.iter().map(|(_, c)| c).collect();
                let parts = ex.mul_const_matrix(&ins, &w, rows.len(), d2)?;
                for (o, p) in rows.into_iter().zip(parts) {
                    match &mut accs[o] {
                        Some(a) => ex.add_assign(a, &p)?,
                        slot @ None => *slot = Some(p),
                    }
                }
            }
            // An output with no nonzero weight at all is a masked input times zero.
            if let Some((_, src)) = group.first() {
                for (acc, _) in accs
                    .iter_mut()
                    .zip(&live)
                    .filter(|(a, l)| a.is_none() && !**l)
                {
                    ex.mul_const_acc(acc, src, 0.0, d2)?;
                }
            }
            group.clear();
            Ok(())
        };
        for (input, ct) in cts.iter().enumerate() {
            let babies = &plan.stages.babies[input];
            if babies.is_empty() {
                continue;
            }
            let rotated = ex.rotate_many(ct, babies)?;
            for (&(i_, qy, qx), &(baby, u1, v1)) in need.range((input, i64::MIN, i64::MIN)..) {
                if i_ != input {
                    break;
                }
                let mask = || {
                    let mut v = vec![C64::default(); n];
                    for i in 0..m {
                        let yi = (i as i64 + qy) * s + u1;
                        if yi < 0 || yi >= inl.height as i64 {
                            continue;
                        }
                        for j in 0..m {
                            let xi = (j as i64 + qx) * s + v1;
                            if xi < 0 || xi >= inl.width as i64 {
                                continue;
                            }
                            for b in 0..inl.batch {
                                v[inl.slot(0, i, j, b)] = C64::real(1.0);
                            }
                        }
                    }
                    v
                };
                let key = crate::circuits::exec::pt_key(
                    tag,
                    &[input as u64, qy as u64, qx as u64, 0x6d61_736b],
                );
                let src = rotated.get(baby).ok_or(Error::InvalidParameters(
                    "convolution: a baby step outside the input's rotations",
                ))?;
                let mc = ex.mul_plain_at(src, Some(key), &mask, d1)?;
                group.push(((input, qy, qx), mc));
            }
            drop(rotated);
            if group.len() >= MASKED_GROUP {
                flush(&mut group)?;
            }
        }
        if !group.is_empty() {
            flush(&mut group)?;
        }
        // A term on an input that has no rotations (a plan not compiled here) was never made.
        if summed != uses.len() {
            return Err(Error::InvalidParameters("convolution: a mask was not made"));
        }
        accs.into_iter()
            .map(|c| c.ok_or(Error::InvalidParameters("convolution: no input")))
            .collect()
    }

    /// Rescales the products and adds the bias (with the input affine's shift, exact at the
    /// borders).
    fn finish<E: Exec>(
        &self,
        ex: &E,
        plan: &ConvPlan,
        outs: &mut [E::Ct],
        affine: Option<&InputAffine>,
    ) -> Result<()> {
        for (o, ct) in outs.iter_mut().enumerate() {
            self.finish_one(ex, plan, o, ct, affine)?;
        }
        Ok(())
    }

    /// Rescales output ciphertext `o` and adds its bias.
    fn finish_one<E: Exec>(
        &self,
        ex: &E,
        plan: &ConvPlan,
        o: usize,
        ct: &mut E::Ct,
        affine: Option<&InputAffine>,
    ) -> Result<()> {
        let (inl, outl) = (&plan.input, &plan.output);
        let ao = outl.group_width();
        let n = inl.slots;
        ex.rescale(ct)?;
        let (go, uo, vo) = outl.ct_coords(o);
        let bias = || -> Vec<C64> {
            let mut v = vec![C64::default(); n];
            for (go, uo, vo) in outl.ct_positions(o) {
                let base = outl.chunk_base(uo, vo);
                for to in 0..ao {
                    let o_ch = go * ao + to;
                    if o_ch >= self.out_channels {
                        break;
                    }
                    for i in 0..outl.blocks() {
                        for j in 0..outl.blocks() {
                            let (yo, xo) = (i * outl.block + uo, j * outl.block + vo);
                            if yo >= outl.height || xo >= outl.width {
                                continue;
                            }
                            let mut val = self.bias[o_ch];
                            if let Some(a) = affine {
                                val += self.shifted_bias(inl, a, o_ch, yo, xo);
                            }
                            for b in 0..outl.batch {
                                v[outl.slot(base + to, i, j, b)] = C64::real(val);
                            }
                        }
                    }
                }
            }
            v
        };
        let any_bias = self.bias.iter().any(|&b| b != 0.0)
            || affine.is_some_and(|a| a.shift.iter().any(|&s| s != 0.0));
        if any_bias && inl.is_pixelwise() {
            // One channel and one pixel per ciphertext: the bias is one constant.
            if uo < outl.height && vo < outl.width {
                let mut val = self.bias[go];
                if let Some(a) = affine {
                    val += self.shifted_bias(inl, a, go, uo, vo);
                }
                ex.add_const(ct, val)?;
            }
        } else if any_bias {
            ex.add_plain(ct, &bias)?;
        }
        Ok(())
    }

    /// The input coordinate that tap `d` of output coordinate `o` reads along one axis,
    /// `o·s + d − p`: negative or past the input's side in the padding.
    fn input_coord(&self, o: usize, d: usize) -> i64 {
        (o * self.stride + d) as i64 - self.padding as i64
    }

    /// [`Conv2d::input_coord`] when it lies on an input axis of `side` pixels.
    fn input_pixel(&self, o: usize, d: usize, side: usize) -> Option<usize> {
        let i = self.input_coord(o, d);
        (i >= 0 && i < side as i64).then_some(i as usize)
    }

    /// `W[o][c][d_i][d_j]` times the input affine's scale `α_c` (if any).
    fn scaled_w(
        &self,
        o: usize,
        c: usize,
        di: usize,
        dj: usize,
        affine: Option<&InputAffine>,
    ) -> f64 {
        let w = self.w(o, c, di, dj);
        match affine {
            Some(a) => w * a.scale[c],
            None => w,
        }
    }

    /// `Σ_{c, valid taps} W[o][c][d]·β_c` at output pixel `(y_o, x_o)`.
    fn shifted_bias(
        &self,
        inl: &FragmentLayout,
        a: &InputAffine,
        o: usize,
        yo: usize,
        xo: usize,
    ) -> f64 {
        let mut acc = 0.0;
        for (di, dj, _, _) in self.valid_taps(inl, yo, xo) {
            for c in 0..self.in_channels {
                acc += self.w(o, c, di, dj) * a.shift[c];
            }
        }
        acc
    }

    /// The taps `(d_i, d_j)` of output pixel `(y_o, x_o)` that land on the input map, with the
    /// input pixel `(y_i, x_i)` each reads.
    fn valid_taps(
        &self,
        inl: &FragmentLayout,
        yo: usize,
        xo: usize,
    ) -> Vec<(usize, usize, usize, usize)> {
        let k = self.kernel;
        let mut v = Vec::with_capacity(k * k);
        for di in 0..k {
            let Some(yi) = self.input_pixel(yo, di, inl.height) else {
                continue;
            };
            for dj in 0..k {
                if let Some(xi) = self.input_pixel(xo, dj, inl.width) {
                    v.push((di, dj, yi, xi));
                }
            }
        }
        v
    }

    /// Calls `f(i, j)` for every output block `(i, j)` at position `(u_o, v_o)` whose tap
    /// `(d_i, d_j)` lands on a valid input pixel.
    #[allow(clippy::too_many_arguments)]
    fn for_valid(
        &self,
        inl: &FragmentLayout,
        outl: &FragmentLayout,
        uo: usize,
        vo: usize,
        di: usize,
        dj: usize,
        mut f: impl FnMut(usize, usize),
    ) {
        for i in 0..outl.blocks() {
            let yo = i * outl.block + uo;
            if yo >= outl.height || self.input_pixel(yo, di, inl.height).is_none() {
                continue;
            }
            for j in 0..outl.blocks() {
                let xo = j * outl.block + vo;
                if xo < outl.width && self.input_pixel(xo, dj, inl.width).is_some() {
                    f(i, j);
                }
            }
        }
    }
}

/// Checks that there are `expected` input ciphertexts and returns the rescale prime at the
/// first one's level (`q_level`, the scale of a one-level constant product).
fn input_prime<E: Exec>(ex: &E, cts: &[E::Ct], expected: usize) -> Result<f64> {
    if cts.len() != expected {
        return Err(Error::Shape {
            what: "input ciphertexts of a convolution",
            expected,
            found: cts.len(),
        });
    }
    let level = cts.first().map_or(0, |c| ex.level(c));
    Ok(ex.rescale_prime(level))
}

/// `Δ₁` of a split-scale product under the prime `q`: `2^⌈0.55·log₂ q⌉` (`2^22` for a 40-bit
/// prime). The mask's encoding error is about `√N/Δ₁` relative; the weights are rounded to
/// `1/Δ₂ = Δ₁/q`.
fn mask_scale(q: f64) -> f64 {
    libm::exp2(libm::ceil(0.55 * libm::log2(q)))
}

/// Checks that the input affine `a` has `n` scales and `n` shifts (`what`: the error's name of
/// them, e.g. "channels of the input affine").
pub(super) fn check_affine(a: &InputAffine, n: usize, what: &'static str) -> Result<()> {
    if a.scale.len() != n || a.shift.len() != n {
        return Err(Error::Shape {
            what,
            expected: n,
            found: a.scale.len().min(a.shift.len()),
        });
    }
    Ok(())
}

/// A cache-key seed for a layer's plaintexts (its geometry, weights and input affine).
fn layer_tag(c: &Conv2d, plan: &ConvPlan, affine: Option<&InputAffine>) -> u64 {
    let l = &plan.input;
    let mut parts = vec![
        l.fold as u64,
        plan.output.fold as u64,
        l.batch as u64,
        l.height as u64,
        l.width as u64,
        l.grid as u64,
        l.block as u64,
        l.slots as u64,
        c.in_channels as u64,
        c.out_channels as u64,
        c.kernel as u64,
        c.stride as u64,
        c.padding as u64,
        c.depthwise as u64,
        c.point_outputs as u64,
    ];
    parts.extend(c.weight.iter().map(|w| w.to_bits()));
    if let Some(a) = affine {
        parts.extend(a.scale.iter().map(|w| w.to_bits()));
    }
    crate::circuits::exec::pt_key(0xc0_47, &parts)
}

/// A compiled convolution: input and output layouts and the rotation structure.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvPlan {
    /// The input layout.
    pub input: FragmentLayout,
    /// The output layout.
    pub output: FragmentLayout,
    /// The layer it was compiled for: `(N_in, N_out, K, stride, padding, depthwise, point
    /// outputs)`.
    pub geometry: [usize; 7],
    /// Baby (inner) and giant (outer) rotations.
    pub stages: TwoStage,
    /// The `(output position, input group, tap)` codes each product sums, indexed by its
    /// [`super::linear::Term::tag`]: one per product, except on folded layouts (AAC), where the
    /// positions sharing a ciphertext, a rotation and an input share one product.
    pub taps: Vec<Vec<u64>>,
}

impl ConvPlan {
    /// Inner and outer rotation counts of the layer.
    pub fn counts(&self) -> RotationCounts {
        self.stages.counts()
    }

    /// The plan with its shifts split anew by baby-step giant-step ([`TwoStage::rebalance`]):
    /// the same products and result, fewer rotations when the channel shifts or the taps are
    /// many. The one-channel and pixel-wise modes, whose products are masks and constants
    /// without outer rotations, are kept as compiled.
    pub fn rebalanced(mut self) -> Self {
        if self.input.is_pixelwise() || self.input.channels_per_ct() == 1 {
            return self;
        }
        self.stages = self.stages.rebalance(self.input.slots);
        self
    }
}
