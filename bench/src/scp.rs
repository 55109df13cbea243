//! `veil-bench scp`: key-switching counts of the SCP attention kernels at BERT-base shape (from
//! the symbolic dry run, which runs the same kernel code as the real engine) against EncFormer
//! Table II, the "w/o SCP" ablation, FHE–MPC boundary ciphertext counts, and optionally a timed,
//! precision-checked real CKKS run of the whole attention chain at a chosen shape (MiniLM by
//! default: `m = 128`, `d = 384`, `H = 12`, `n = 16384`).

use crate::BenchError;
use serde::Serialize;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, PrecisionStats, C64};
use veil_core::packing::{k_min, Mat};
use veil_core::params;
use veil_core::transformer::pipeline::{
    output_projection, qkv_projection, score_kernel, value_kernel,
};
use veil_core::transformer::{
    scp_counts_report, AttnPlan, AttnShape, CkksExec, Exec, OpCounts, ScpCountsReport, SymExec,
};

/// Shapes `veil-bench scp` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum ShapeChoice {
    /// MiniLM: m = 128, d = 384, H = 12 (n = 16384, N = 2^15).
    Minilm,
    /// BERT-base: m = 128, d = 768, H = 12 (n = 16384, N = 2^15).
    Bert,
    /// A small shape for smoke runs: m = 16, d = 128, H = 4 (n = 2048, N = 2^12).
    Small,
}

impl ShapeChoice {
    /// The attention shape and `log2 N`.
    pub fn shape(self) -> (AttnShape, u32) {
        match self {
            ShapeChoice::Minilm => (AttnShape::MINILM, 15),
            ShapeChoice::Bert => (AttnShape::BERT_BASE, 15),
            ShapeChoice::Small => (
                AttnShape {
                    m: 16,
                    d: 128,
                    heads: 4,
                    slots: 2048,
                },
                12,
            ),
        }
    }
}

/// Options of `veil-bench scp`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchScpOptions {
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Skip the timed run: print only the dry-run counts (by default the real CKKS attention chain
    /// is also run and timed — MiniLM at N = 2^15: ~4 GB, ~2 minutes on 2 cores).
    #[arg(long)]
    pub counts_only: bool,
    /// Shape of the timed run.
    #[arg(long, value_enum, default_value_t = ShapeChoice::Minilm)]
    pub shape: ShapeChoice,
    /// Score-kernel baby size β (default: the count-minimizing one).
    #[arg(long)]
    pub beta: Option<usize>,
    /// Worker threads of the CPU backend for the timed run.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Gadget digits for key switching in the timed run.
    #[arg(long, default_value_t = 1)]
    pub dnum: usize,
}

/// One timed kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KernelTiming {
    /// Kernel.
    pub name: String,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Operation counts of this run.
    pub counts: OpCounts,
    /// Worst-slot precision of the decrypted output against the `f64` reference (bits).
    pub min_bits: f64,
    /// Mean precision (bits).
    pub avg_bits: f64,
}

/// The timed real run.
#[derive(Clone, Debug, Serialize)]
pub struct TimingReport {
    /// Shape.
    pub shape: AttnShape,
    /// Parameter set name.
    pub params: String,
    /// Backend threads.
    pub threads: usize,
    /// Galois keys generated.
    pub galois_keys: usize,
    /// Key generation, seconds.
    pub keygen_s: f64,
    /// Per-kernel timings.
    pub kernels: Vec<KernelTiming>,
    /// Whether the real counts equal the dry-run counts.
    pub counts_match_dry_run: bool,
}

/// `veil-bench scp` output.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Counts at BERT-base (Table II shape) and MiniLM.
    pub counts: Vec<ScpCountsReport>,
    /// The timed run, when asked.
    pub timing: Option<TimingReport>,
}

/// Runs the benchmark.
pub fn run(opts: &BenchScpOptions) -> Result<Report, BenchError> {
    let e = |source: veil_core::Error| BenchError::Core {
        step: "bench scp",
        source,
    };
    let counts = vec![
        scp_counts_report(AttnShape::BERT_BASE, opts.beta).map_err(e)?,
        scp_counts_report(AttnShape::MINILM, opts.beta).map_err(e)?,
    ];
    let timing = if !opts.counts_only {
        Some(time_chain(opts)?)
    } else {
        None
    };
    Ok(Report { counts, timing })
}

fn rand_mat(seed: &mut u64, r: usize, c: usize, bound: f64) -> Mat {
    let mut data = Vec::with_capacity(r * c);
    for _ in 0..r * c {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        data.push(((*seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * bound);
    }
    Mat {
        rows: r,
        cols: c,
        data,
    }
}

fn stats(want: &Mat, got: &Mat) -> PrecisionStats {
    let c = |m: &Mat| m.data.iter().map(|&x| C64::real(x)).collect::<Vec<_>>();
    PrecisionStats::compute(&c(want), &c(got))
}

/// The timed, checked real run of projection → score → softmax (plaintext stand-in for MPC) →
/// value → output projection.
pub fn time_chain(opts: &BenchScpOptions) -> Result<TimingReport, BenchError> {
    let e = |source: veil_core::Error| BenchError::Core {
        step: "bench scp",
        source,
    };
    let (shape, logn) = opts.shape.shape();
    let AttnShape { m, d, heads, slots } = shape;
    let dh = d / heads;
    let plan = AttnPlan::with_beta(shape, opts.beta).map_err(e)?;
    let lit = if logn == 12 {
        params::insecure_logn12()
    } else {
        params::ckks_128_custom(logn, 6, opts.dnum)
    };
    let p = lit.validate().map_err(e)?;
    let top = p.max_level();
    // Dry run: rotation keys and expected counts.
    let dry = SymExec::new(slots);
    {
        let z = Mat::zeros(d, d);
        let x: Vec<_> = (0..plan.x_map().cts).map(|_| dry.fresh(top)).collect();
        let (q, k, v) = qkv_projection(&dry, &plan, &x, &z, &z, &z).map_err(e)?;
        score_kernel(&dry, &plan, &q, &k).map_err(e)?;
        let pc: Vec<_> = (0..plan.p_cts).map(|_| dry.fresh(top)).collect();
        let o = value_kernel(&dry, &plan, &pc, &v).map_err(e)?;
        output_projection(&dry, &plan, &o, &z).map_err(e)?;
    }
    let rots = dry.rotations_used();
    let crate::CpuKeys {
        ck,
        sk,
        keys,
        mut rng,
        keygen_s,
    } = crate::cpu_keys(&p, opts.threads, &rots, "bench scp")?;
    let ex = CkksExec::new(&ck, &keys, slots);
    let mut seed = 7u64;
    let x = rand_mat(&mut seed, m, d, 1.0);
    let ws = 1.0 / (d as f64).sqrt();
    let w: Vec<Mat> = (0..4)
        .map(|_| rand_mat(&mut seed, d, d, 2.0 * ws))
        .collect();
    let (q_ref, k_ref, v_ref) = (x.matmul(&w[0]), x.matmul(&w[1]), x.matmul(&w[2]));
    let enc = |vals: &[Vec<C64>],
               rng: &mut veil_host::SecretRng|
     -> Result<Vec<Ciphertext<CpuBackend>>, BenchError> {
        vals.iter()
            .map(|v| {
                let pt = ck.encode(v, slots, top, p.default_scale()).map_err(e)?;
                ck.encrypt_sk(&sk, &pt, rng).map_err(e)
            })
            .collect()
    };
    let dec = |cts: &[Ciphertext<CpuBackend>]| -> Result<Vec<Vec<C64>>, BenchError> {
        cts.iter()
            .map(|c| ck.decrypt_decode(&sk, c).map_err(e))
            .collect()
    };
    let mut kernels = Vec::new();
    let mut record =
        |name: &str, secs: f64, before: OpCounts, after: OpCounts, st: PrecisionStats| {
            kernels.push(KernelTiming {
                name: name.into(),
                seconds: secs,
                counts: after.since(&before),
                min_bits: st.real.min_bits,
                avg_bits: st.real.avg_bits,
            });
        };
    let xm = plan.x_map();
    let xc = enc(&xm.pack(&x, slots), &mut rng)?;
    let (c0, t) = (ex.counts(), Instant::now());
    let (q, k, v) = qkv_projection(&ex, &plan, &xc, &w[0], &w[1], &w[2]).map_err(e)?;
    let secs = t.elapsed().as_secs_f64();
    let qm = plan.qk_map();
    let sq = stats(&q_ref, &qm.unpack(&dec(&q)?, d));
    let sk_ = stats(&k_ref, &qm.unpack(&dec(&k)?, d));
    let sv = stats(&v_ref, &plan.v_map().unpack(&dec(&v)?, d));
    let worst = [sq, sk_, sv]
        .into_iter()
        .min_by(|a, b| a.real.min_bits.total_cmp(&b.real.min_bits))
        .unwrap();
    let c1 = ex.counts();
    record("projection QKV", secs, c0, c1, worst);
    let t = Instant::now();
    let s = score_kernel(&ex, &plan, &q, &k).map_err(e)?;
    let secs = t.elapsed().as_secs_f64();
    let s_got = plan.score_stream().unpack(&dec(&s)?);
    let mut sw_all = Mat::zeros(m, heads * m);
    let mut sg_all = Mat::zeros(m, heads * m);
    for h in 0..heads {
        let sw = q_ref
            .cols_range(h * dh, dh)
            .matmul(&k_ref.cols_range(h * dh, dh).transpose());
        for r in 0..m {
            for c in 0..m {
                sw_all.set(r, h * m + c, sw.get(r, c));
                sg_all.set(r, h * m + c, s_got[h].get(r, c));
            }
        }
    }
    let c2 = ex.counts();
    record("score QK^T", secs, c1, c2, stats(&sw_all, &sg_all));
    let pm: Vec<Mat> = s_got
        .iter()
        .map(|sh| sh.softmax_rows(1.0 / (dh as f64).sqrt()))
        .collect();
    let pc = enc(&plan.p_layout().pack(&pm), &mut rng)?;
    let t = Instant::now();
    let o = value_kernel(&ex, &plan, &pc, &v).map_err(e)?;
    let secs = t.elapsed().as_secs_f64();
    let mut o_ref = Mat::zeros(m, d);
    for h in 0..heads {
        let oh = pm[h].matmul(&v_ref.cols_range(h * dh, dh));
        for r in 0..m {
            for c in 0..dh {
                o_ref.set(r, h * dh + c, oh.get(r, c));
            }
        }
    }
    let c3 = ex.counts();
    record(
        "value PV",
        secs,
        c2,
        c3,
        stats(&o_ref, &plan.o_map().unpack(&dec(&o)?, d)),
    );
    let t = Instant::now();
    let y = output_projection(&ex, &plan, &o, &w[3]).map_err(e)?;
    let secs = t.elapsed().as_secs_f64();
    let c4 = ex.counts();
    if y.len() != k_min(m * d, slots) {
        return Err(BenchError::Mismatch {
            what: "output projection ciphertexts (minimal packing)",
            expected: k_min(m * d, slots) as u64,
            found: y.len() as u64,
        });
    }
    record(
        "projection out",
        secs,
        c3,
        c4,
        stats(&o_ref.matmul(&w[3]), &xm.unpack(&dec(&y)?, d)),
    );
    Ok(TimingReport {
        shape,
        params: p.name().to_string(),
        threads: opts.threads,
        galois_keys: rots.len(),
        keygen_s,
        kernels,
        counts_match_dry_run: c4 == dry.counts(),
    })
}

/// Human-readable tables.
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for c in &r.counts {
        let sh = c.shape;
        let _ = writeln!(
            s,
            "SCP attention counts  m={} d={} H={} n={}  (C={} B={} β={} g={} H_blk={} B_V={} K_min(P)={})",
            sh.m, sh.d, sh.heads, sh.slots, c.plan.c_s, c.plan.b_s, c.plan.beta, c.plan.g,
            c.plan.h_blk, c.plan.b_v, c.plan.p_cts
        );
        let _ = writeln!(
            s,
            "  {:<28} {:>6} {:>5} {:>6} {:>6} {:>7} {:>6} {:>5} {:>9}  Table II",
            "kernel", "rot", "conj", "ctmul", "relin", "ptmul", "KS", "depth", "proxy(s)"
        );
        for k in &c.kernels {
            let x = &k.counts;
            let paper = match (k.paper_rot, k.paper_mul) {
                (Some(a), Some(b)) => format!("{a} rot / {b} mul"),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "  {:<28} {:>6} {:>5} {:>6} {:>6} {:>7} {:>6} {:>5} {:>9.2}  {}",
                k.name,
                x.rotations,
                x.conjugations,
                x.ct_mults,
                x.relins,
                x.pt_mults,
                x.key_switches(),
                k.depth,
                k.proxy_s,
                paper
            );
        }
        let a = &c.ablation;
        let _ = writeln!(
            s,
            "  w/o SCP: +{} rotations (Q/K edge {}, V edge {}, O edge {}; paper formula {}), +{} ptmul, {} repacks (SCP chain: {})",
            a.extra.rotations,
            a.qk_edge.rotations,
            a.v_edge.rotations,
            a.o_edge.rotations,
            a.paper_formula_rotations,
            a.extra.pt_mults,
            a.extra.repacks,
            c.scp_repacks
        );
        for b in &c.boundaries {
            let _ = writeln!(
                s,
                "  boundary {:<18} {:>3} ciphertexts (K_min {:>3}; w/o SCP {:>4})",
                b.name, b.cts, b.k_min, b.wo_scp_cts
            );
        }
        if let Some(w) = c.within_table_ii {
            let _ = writeln!(s, "  within Table II: {w}");
        }
        let _ = writeln!(s);
    }
    if let Some(t) = &r.timing {
        let _ = writeln!(
            s,
            "Timed CKKS chain m={} d={} H={} n={}  params {}  threads {}  {} Galois keys (keygen {:.1}s)",
            t.shape.m, t.shape.d, t.shape.heads, t.shape.slots, t.params, t.threads, t.galois_keys, t.keygen_s
        );
        for k in &t.kernels {
            let _ = writeln!(
                s,
                "  {:<16} {:>8.2}s  rot {:>5} conj {:>3} ctmul {:>4} ptmul {:>6}  precision min/avg {:.1}/{:.1} bits",
                k.name,
                k.seconds,
                k.counts.rotations,
                k.counts.conjugations,
                k.counts.ct_mults,
                k.counts.pt_mults,
                k.min_bits,
                k.avg_bits
            );
        }
        let _ = writeln!(s, "  counts match dry run: {}", t.counts_match_dry_run);
    }
    s
}
