//! `veil-bench cnn --table-x`: FEnc2's Arch-aware Ct Compression (§IV-C) on the modules of its
//! Table X, with and without AAC. A fire module `(N_in, 32, N_out)` (SqueezeNet: squeeze 1×1 to
//! 32 channels, quadratic, then the two expansions — 1×1 and 3×3 to `N_out / 2` each — run as
//! one 3×3 convolution whose first half uses the centre tap only, so their concatenation is the
//! layer's output) on `(8, N_in, 16, 16)` at `S = 4`, and a residual shortcut
//! `(N_in, 8, N_out)` (ResNet18's bottleneck: 1×1 to 8, quadratic, 3×3, quadratic, 1×1 to
//! `N_out`) on `(1, N_in, 56, 56)` at `S = 8`, both at `N = 2^15`. Every count is the dry run of
//! the compiled layers (the real run's code path); `--time` also runs the modules `--module`
//! names on real CKKS ciphertexts and checks them against the `f64` reference.

use crate::error::core;
use crate::{max_abs_diff, BenchError};
use rand_chacha::ChaCha20Rng;
use rand_core::{OsRng, SeedableRng};
use serde::Serialize;
use veil_backend_cpu::CpuBackend;
use veil_core::circuits::{Exec, OpCounts, SymExec};
use veil_core::ckks::{Ciphertext, Ckks, SecretKey};
use veil_core::cnn::{reference, Conv2d, ConvPlan, Quadratic};
use veil_core::packing::fragment::FragmentLayout;

/// A CKKS context on the CPU backend.
pub(crate) type CpuCkks = Ckks<CpuBackend>;

/// One module with or without AAC.
#[derive(Clone, Debug, Serialize)]
pub struct AacRow {
    /// `Fire(64,32,128)`, `Residual(64,8,128)`, …
    pub module: String,
    /// Whether AAC compacted the reduced tensors.
    pub aac: bool,
    /// Ciphertexts after each layer.
    pub cts: Vec<usize>,
    /// Slot utilization of the reduced tensor (after the first layer).
    pub utilization: f64,
    /// Levels the module consumes.
    pub depth: usize,
    /// Every operation of the dry run.
    pub ops: OpCounts,
    /// `--time`: the module on real ciphertexts, seconds (key generation excluded).
    pub seconds: Option<f64>,
    /// `--time`: worst absolute error against the `f64` reference.
    pub worst_error: Option<f64>,
    /// `--time`: Galois keys the run needed.
    pub galois_keys: Option<usize>,
}

/// The `--table-x` report.
#[derive(Clone, Debug, Serialize)]
pub struct TableX {
    /// Slots per ciphertext.
    pub slots: usize,
    /// Two rows per module: without, then with AAC.
    pub rows: Vec<AacRow>,
}

/// One layer of a module: the convolution and whether a quadratic follows.
struct Step {
    conv: Conv2d,
    quad: bool,
}

struct Module {
    name: String,
    batch: usize,
    channels: usize,
    side: usize,
    block: usize,
    steps: Vec<Step>,
}

/// Deterministic weights for a shape study (fixed here: the bench measures cost and checks
/// the encrypted result against the same weights in `f64`).
pub(crate) fn weights(n: usize, seed: u64, amp: f64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * amp
        })
        .collect()
}

fn conv(ci: usize, co: usize, k: usize, seed: u64) -> Result<Conv2d, BenchError> {
    conv_strided(ci, co, k, 1, k / 2, seed)
}

/// A layer with weights of a trained net's scale, `±1/√(N_in·K²)` (they change no count).
pub(crate) fn conv_strided(
    ci: usize,
    co: usize,
    k: usize,
    s: usize,
    p: usize,
    seed: u64,
) -> Result<Conv2d, BenchError> {
    let amp = 1.0 / ((ci * k * k) as f64).sqrt();
    Conv2d::new(
        ci,
        co,
        k,
        s,
        p,
        weights(co * ci * k * k, seed, amp),
        weights(co, seed + 1, 0.1),
    )
    .map_err(core("a network layer"))
}

/// SqueezeNet's fire expansions `(N_DS → N_out)` as one layer: outputs `0..N_out/2` are the
/// `1 × 1` branch (the centre tap only, [`Conv2d::with_point_outputs`]), the rest the `3 × 3`
/// branch, concatenated in that order.
pub(crate) fn fire_expand(ds: usize, nout: usize, seed: u64) -> Result<Conv2d, BenchError> {
    let mut e = conv(ds, nout, 3, seed)?;
    for o in 0..nout / 2 {
        for c in 0..ds {
            for t in 0..9 {
                if t != 4 {
                    e.weight[(o * ds + c) * 9 + t] = 0.0;
                }
            }
        }
    }
    e.with_point_outputs(nout / 2)
        .map_err(core("a fire module's expansions"))
}

/// A CPU context on `params` with `threads` workers, a fresh secret key and the generator that
/// made it (seeded from the OS): what a timed run on real ciphertexts starts from.
pub(crate) fn secret_context(
    params: &veil_core::params::CkksParams,
    threads: usize,
) -> Result<(CpuCkks, SecretKey, ChaCha20Rng), BenchError> {
    let ck = Ckks::new(std::sync::Arc::new(crate::cpu_backend(params, threads)?));
    let mut rng = ChaCha20Rng::from_rng(OsRng).map_err(|e| BenchError::Backend {
        reason: e.to_string(),
    })?;
    let sk = ck.gen_secret_key(&mut rng);
    Ok((ck, sk, rng))
}

/// Each packed vector of `vectors` encrypted under `sk` (`slots` real slots, at `level`, the
/// default scale).
pub(crate) fn encrypt_real(
    ck: &CpuCkks,
    sk: &SecretKey,
    vectors: &[Vec<f64>],
    slots: usize,
    level: usize,
    rng: &mut ChaCha20Rng,
) -> Result<Vec<Ciphertext<CpuBackend>>, BenchError> {
    vectors
        .iter()
        .map(|v| {
            let pt = ck.encode_real(v, slots, level, ck.params().default_scale())?;
            ck.encrypt_sk(sk, &pt, rng)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(core("encryption"))
}

/// The real parts of `cts` decrypted under `sk`.
pub(crate) fn decrypt_real(
    ck: &CpuCkks,
    sk: &SecretKey,
    cts: &[Ciphertext<CpuBackend>],
) -> Result<Vec<Vec<f64>>, BenchError> {
    cts.iter()
        .map(|c| Ok(ck.decrypt_decode(sk, c)?.iter().map(|z| z.re).collect()))
        .collect::<Result<_, veil_core::Error>>()
        .map_err(core("decryption"))
}

/// Table X's fire modules and residual shortcuts.
fn modules() -> Result<Vec<Module>, BenchError> {
    let mut out = Vec::new();
    for (i, &(nin, nout)) in [(64, 128), (128, 128), (128, 256), (256, 256)]
        .iter()
        .enumerate()
    {
        let squeeze = conv(nin, 32, 1, 10 + i as u64)?;
        let expand = fire_expand(32, nout, 20 + i as u64)?;
        out.push(Module {
            name: format!("Fire({nin},32,{nout})"),
            batch: 8,
            channels: nin,
            side: 16,
            block: 4,
            steps: vec![
                Step {
                    conv: squeeze,
                    quad: true,
                },
                Step {
                    conv: expand,
                    quad: false,
                },
            ],
        });
    }
    for (i, &(nin, nout)) in [(64, 128), (128, 256), (256, 512), (512, 512)]
        .iter()
        .enumerate()
    {
        out.push(Module {
            name: format!("Residual({nin},8,{nout})"),
            batch: 1,
            channels: nin,
            side: 56,
            block: 8,
            steps: vec![
                Step {
                    conv: conv(nin, 8, 1, 30 + i as u64)?,
                    quad: true,
                },
                Step {
                    conv: conv(8, 8, 3, 40 + i as u64)?,
                    quad: true,
                },
                Step {
                    conv: conv(8, nout, 1, 50 + i as u64)?,
                    quad: false,
                },
            ],
        });
    }
    Ok(out)
}

/// The module's input layout and each layer's plan.
fn compile(
    m: &Module,
    slots: usize,
    aac: bool,
) -> Result<(FragmentLayout, Vec<ConvPlan>), BenchError> {
    let l0 = FragmentLayout::new(m.batch, m.channels, m.side, m.side, None, m.block, slots)
        .map_err(core("the module's input layout"))?;
    let mut t = l0;
    let mut plans = Vec::new();
    for s in &m.steps {
        let mut out = s.conv.out_layout(&t).map_err(core("an output layout"))?;
        if aac {
            out = out
                .with_fold(out.compact_fold())
                .map_err(core("the AAC fold"))?;
        }
        let p = s.conv.plan_to(&t, out).map_err(core("a layer plan"))?;
        t = p.output;
        plans.push(p);
    }
    Ok((l0, plans))
}

pub(crate) const QUAD: (f64, f64, f64) = (0.25, 0.5, 0.0);

/// Runs the module on `cts` (any executor).
fn run_module<E: Exec>(
    ex: &E,
    m: &Module,
    plans: &[ConvPlan],
    mut cts: Vec<E::Ct>,
) -> Result<Vec<E::Ct>, BenchError> {
    let q = Quadratic::new(QUAD.0, QUAD.1, QUAD.2).map_err(core("the activation"))?;
    // The activation squares `(x + β)` in one level; the next layer's weights and bias absorb
    // its affine part.
    let mut affine = None;
    for (s, p) in m.steps.iter().zip(plans) {
        cts = s
            .conv
            .run(ex, p, &cts, affine.as_ref())
            .map_err(core("a layer"))?;
        affine = None;
        if s.quad {
            cts = q.run(ex, cts).map_err(core("an activation"))?;
            affine = Some(q.affine(s.conv.out_channels));
        }
    }
    if affine.is_some() {
        return Err(BenchError::InvalidOption {
            option: "--table-x",
            value: m.name.clone(),
            expected: "modules that end with a convolution",
        });
    }
    Ok(cts)
}

fn reference_module(m: &Module, x: &[f64]) -> Vec<f64> {
    let q = |v: f64| QUAD.0 * v * v + QUAD.1 * v + QUAD.2;
    let mut t = x.to_vec();
    let (mut h, mut w) = (m.side, m.side);
    for s in &m.steps {
        (t, h, w) = reference::conv2d(&s.conv, &t, m.batch, h, w, None);
        if s.quad {
            t.iter_mut().for_each(|v| *v = q(*v));
        }
    }
    t
}

/// Runs the table; the modules whose name contains `time` (every one for `all`) also run on
/// real ciphertexts with `threads` CKKS workers.
pub fn table_x(time: Option<&str>, threads: usize) -> Result<TableX, BenchError> {
    let params = veil_core::cnn::batch_params(16)
        .validate()
        .map_err(core("the parameter set"))?;
    let slots = params.n() / 2;
    let mut rows = Vec::new();
    for m in modules()? {
        for aac in [false, true] {
            let (l0, plans) = compile(&m, slots, aac)?;
            let depth = m.steps.iter().map(|s| 1 + s.quad as usize).sum::<usize>();
            let sym = SymExec::new(slots);
            let xs = (0..l0.ciphertexts()).map(|_| sym.fresh(depth)).collect();
            run_module(&sym, &m, &plans, xs)?;
            let mut row = AacRow {
                module: m.name.clone(),
                aac,
                cts: plans.iter().map(|p| p.output.ciphertexts()).collect(),
                utilization: plans[0].output.utilization(),
                depth,
                ops: sym.counts(),
                seconds: None,
                worst_error: None,
                galois_keys: None,
            };
            eprintln!(
                "{} {}: {:?} ciphertexts, {} rotations, {} products",
                m.name,
                if aac { "with AAC" } else { "without" },
                row.cts,
                row.ops.rotations,
                row.ops.pt_mults
            );
            if time.is_some_and(|t| t == "all" || m.name.contains(t)) {
                let rotations = sym.rotations_used();
                let (s, e) = timed(&params, threads, &m, &l0, &plans, depth, &rotations)?;
                row.seconds = Some(s);
                row.worst_error = Some(e);
                row.galois_keys = Some(rotations.len());
                eprintln!("  {s:.2} s, worst error {e:.2e}");
            }
            rows.push(row);
        }
    }
    Ok(TableX { slots, rows })
}

/// The module on real CKKS ciphertexts: seconds and worst error against the reference.
fn timed(
    params: &veil_core::params::CkksParams,
    threads: usize,
    m: &Module,
    l0: &FragmentLayout,
    plans: &[ConvPlan],
    depth: usize,
    rotations: &[i64],
) -> Result<(f64, f64), BenchError> {
    let (ck, sk, mut rng) = secret_context(params, threads)?;
    let keys = ck
        .gen_evaluation_keys(&sk, rotations, false, &mut rng, |_, _| {})
        .map_err(core("the evaluation keys"))?;
    let x = weights(l0.len(), 99, 1.0);
    let level = depth;
    let packed = l0.pack(&x).map_err(core("packing"))?;
    let cts = encrypt_real(&ck, &sk, &packed, l0.slots, level, &mut rng)?;
    // One pass: each diagonal is used once, so none is cached (an unbounded cache held them all).
    let ex = veil_core::circuits::CkksExec::new(&ck, &keys, l0.slots).with_cache_budget(0);
    let t0 = std::time::Instant::now();
    let out = run_module(&ex, m, plans, cts)?;
    let secs = t0.elapsed().as_secs_f64();
    let last = plans.last().map(|p| p.output).unwrap_or(*l0);
    let dec = decrypt_real(&ck, &sk, &out)?;
    let got = last.unpack(&dec).map_err(core("unpacking"))?;
    let want = reference_module(m, &x);
    Ok((secs, max_abs_diff(&got, &want)))
}

/// A text rendering.
pub fn render(t: &TableX) -> String {
    let mut s = format!(
        "FEnc2 Table X: Arch-aware Ct Compression at n = {} slots (N = 2^15), dry-run counts{}\n\n",
        t.slots,
        if t.rows.iter().any(|r| r.seconds.is_some()) {
            " and real CKKS runs"
        } else {
            ""
        }
    );
    s += &format!(
        "{:<20} {:>4} {:>14} {:>6} {:>5} {:>6} {:>8} {:>6} {:>9} {:>9}\n",
        "module",
        "AAC",
        "cts per layer",
        "util",
        "depth",
        "rot",
        "products",
        "relin",
        "seconds",
        "worst Δ"
    );
    for r in &t.rows {
        let cts = r
            .cts
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join("/");
        s += &format!(
            "{:<20} {:>4} {:>14} {:>5.0}% {:>5} {:>6} {:>8} {:>6} {:>9} {:>9}\n",
            r.module,
            if r.aac { "yes" } else { "no" },
            cts,
            100.0 * r.utilization,
            r.depth,
            r.ops.rotations,
            r.ops.pt_mults,
            r.ops.relins,
            r.seconds.map_or("-".into(), |x| format!("{x:.2}")),
            r.worst_error.map_or("-".into(), |x| format!("{x:.1e}"))
        );
    }
    s += "\nspeed-up from AAC (operations: rotations + products + relinearizations; time with --time):\n";
    for pair in t.rows.chunks(2) {
        if let [a, b] = pair {
            let w = |r: &AacRow| (r.ops.rotations + r.ops.pt_mults + r.ops.relins) as f64;
            let time = match (a.seconds, b.seconds) {
                (Some(x), Some(y)) if y > 0.0 => format!(", time {:.2}×", x / y),
                _ => String::new(),
            };
            s += &format!(
                "  {:<20} ops {:.2}×{time}\n",
                a.module,
                w(a) / w(b).max(1.0)
            );
        }
    }
    s
}
