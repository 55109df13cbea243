//! `veil bench ckks`: per-primitive latency and precision of RNS-CKKS on one parameter set.
//!
//! Result names match the peer scripts in the project's shared peer benchmarks (OpenFHE, DESILO,
//! SEAL), so the JSON of both sides can be compared row by row.

use crate::progress::Progress;
use crate::timing::{time, time_with, Timing};
use crate::BenchError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, PrecisionStats, C64};
use veil_core::params::{self, CkksParamsLiteral};
use veil_core::PolyBackend;

/// Which backend runs the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum BackendChoice {
    /// The optimized CPU backend (SIMD NTT, threads).
    Cpu,
    /// The scalar reference backend (single thread; the oracle).
    CpuScalar,
    /// CubeCL kernels on CUDA (a build with `--features cuda`; device `VEIL_CUDA_DEVICE`,
    /// default 0). Without a usable device the benchmark says so and runs on the CPU.
    Cuda,
    /// CubeCL kernels on wgpu (a build with `--features wgpu`; the device wgpu picks, or
    /// `CUBECL_WGPU_DEFAULT_DEVICE`, e.g. `Cpu` for Mesa lavapipe). Without a usable device the
    /// benchmark says so and runs on the CPU.
    Wgpu,
}

/// Options of `veil bench ckks`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchCkksOptions {
    /// log2 of the ring degree N (12..=17).
    #[arg(long, default_value_t = 14)]
    pub logn: u32,
    /// Number of levels L (rescales available).
    #[arg(long, default_value_t = 6)]
    pub levels: usize,
    /// Gadget digits for key switching (default: the named set's).
    #[arg(long)]
    pub dnum: Option<usize>,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Timed repetitions per primitive.
    #[arg(long, default_value_t = 10)]
    pub reps: usize,
    /// Backend.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One benchmark row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Minimum time, ms.
    pub min_ms: f64,
    /// Median time, ms.
    pub median_ms: f64,
    /// Timed runs.
    pub n: usize,
    /// Precision of the primitive's output (bits), where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<PrecisionJson>,
}

/// Precision statistics in JSON form.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PrecisionJson {
    /// Real part: min, mean, median precision bits.
    pub real_min_avg_median: [f64; 3],
    /// Imaginary part: min, mean, median precision bits.
    pub imag_min_avg_median: [f64; 3],
}

impl From<PrecisionStats> for PrecisionJson {
    fn from(s: PrecisionStats) -> Self {
        Self {
            real_min_avg_median: [s.real.min_bits, s.real.avg_bits, s.real.median_bits],
            imag_min_avg_median: [s.imag.min_bits, s.imag.avg_bits, s.imag.median_bits],
        }
    }
}

/// The report of one run.
#[derive(Clone, Debug, Serialize)]
pub struct BenchCkksReport {
    /// Parameters and environment.
    pub info: BTreeMap<String, serde_json::Value>,
    /// Per-primitive results, by the peers' names.
    pub results: BTreeMap<String, Row>,
}

/// The named set for the peers' settings, or a custom set of the same shape.
pub fn params_for(logn: u32, levels: usize, dnum: Option<usize>) -> CkksParamsLiteral {
    match (logn, levels, dnum) {
        (14, 6, None) => params::ckks_128_logn14(),
        (15, 10, None) => params::ckks_128_logn15(),
        (16, 16, None) => params::ckks_128_logn16(),
        (l, k, d) => params::ckks_128_custom(l, k, d.unwrap_or(4)),
    }
}

fn values(n: usize, seed: u64) -> Vec<C64> {
    // Public benchmark data (not key material): a fixed pattern in [-1, 1].
    (0..n)
        .map(|i| {
            let t = (i as f64 + 1.0) * (seed as f64 + 0.5);
            C64::new((t * 0.618).sin(), (t * 0.377).cos())
        })
        .collect()
}

fn rot(v: &[C64], k: i64) -> Vec<C64> {
    let n = v.len() as i64;
    (0..n)
        .map(|i| v[((i + k).rem_euclid(n)) as usize])
        .collect()
}

/// Runs the benchmark.
pub fn run(opts: &BenchCkksOptions) -> Result<BenchCkksReport, BenchError> {
    let lit = params_for(opts.logn, opts.levels, opts.dnum);
    let p = lit
        .validate()
        .map_err(crate::error::core("validate the parameter set"))?;
    let cpu = |p: &veil_core::CkksParams| -> Result<BenchCkksReport, BenchError> {
        let be = CpuBackend::fast(p, opts.threads).map_err(|e| BenchError::Backend {
            reason: e.to_string(),
        })?;
        run_on(opts, Arc::new(be))
    };
    match opts.backend {
        BackendChoice::Cpu => cpu(&p),
        BackendChoice::CpuScalar => run_on(opts, Arc::new(CpuBackend::scalar(&p))),
        BackendChoice::Cuda => {
            #[cfg(feature = "cuda")]
            match veil_backend_cuda::new(&p, veil_backend_cuda::default_index()) {
                Ok(be) => return run_on_device(opts, be),
                Err(err) => eprintln!("veil: CUDA backend unavailable ({err}); running on the CPU"),
            }
            #[cfg(not(feature = "cuda"))]
            eprintln!(
                "veil: this build has no CUDA backend (rebuild with --features cuda); running on the CPU"
            );
            cpu(&p)
        }
        BackendChoice::Wgpu => {
            #[cfg(feature = "wgpu")]
            match veil_backend_wgpu::new_default(&p) {
                Ok(be) => return run_on_device(opts, be),
                Err(err) => eprintln!(
                    "veil: wgpu backend unavailable ({err}); running on the CPU \
                     (without a GPU, CUBECL_WGPU_DEFAULT_DEVICE=Cpu selects Mesa lavapipe)"
                ),
            }
            #[cfg(not(feature = "wgpu"))]
            eprintln!(
                "veil: this build has no wgpu backend (rebuild with --features wgpu); running on the CPU"
            );
            cpu(&p)
        }
    }
}

/// Runs the benchmark on a CubeCL backend, waiting for the device at the end of every timed run.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn run_on_device<R: veil_kernels_cube::cubecl::Runtime>(
    opts: &BenchCkksOptions,
    backend: veil_kernels_cube::CubeBackend<R>,
) -> Result<BenchCkksReport, BenchError> {
    let backend = Arc::new(backend);
    let b = backend.clone();
    crate::timing::set_device_sync(Some(Arc::new(move || {
        if let Err(e) = b.sync() {
            eprintln!("veil: {e}");
        }
    })));
    let r = run_on(opts, backend);
    crate::timing::set_device_sync(None);
    r
}

/// Runs the benchmark on a given backend.
pub fn run_on<B: PolyBackend>(
    opts: &BenchCkksOptions,
    backend: Arc<B>,
) -> Result<BenchCkksReport, BenchError> {
    let e = |source: veil_core::Error| BenchError::Core {
        step: "bench ckks",
        source,
    };
    let ck = Ckks::new(backend);
    let p = ck.params().clone();
    let reps = opts.reps.max(1);
    let kreps = reps.clamp(1, 3);
    let mut rng = veil_host::os_rng();
    let mut results = BTreeMap::new();
    let mut put = |name: &str, t: Timing, prec: Option<PrecisionStats>| {
        results.insert(
            name.to_string(),
            Row {
                min_ms: t.min_ms,
                median_ms: t.median_ms,
                n: t.n,
                precision: prec.map(Into::into),
            },
        );
    };
    let mut progress = Progress::new("bench ckks", opts.json);
    let steps = 22;
    let mut step = 0;
    let mut tick = |progress: &mut Progress| {
        step += 1;
        progress.update(step, steps);
    };

    // Key generation.
    let t = time(kreps, 1, || {
        let sk = ck.gen_secret_key(&mut rng);
        ck.gen_public_key(&sk, &mut rng).map(|pk| (sk, pk))
    });
    put("keygen_sk_pk", t, None);
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).map_err(e)?;
    tick(&mut progress);
    put(
        "keygen_relin",
        time(kreps, 1, || ck.gen_relin_key(&sk, &mut rng)),
        None,
    );
    tick(&mut progress);
    let rots: Vec<i64> = (1..=8).collect();
    let gs: Vec<u64> = rots
        .iter()
        .map(|&r| ck.encoder().galois_element_for_rotation(r))
        .collect();
    put(
        "keygen_rot_x8",
        time(kreps, 0, || {
            gs.iter()
                .map(|&g| ck.gen_galois_key(&sk, g, &mut rng))
                .collect::<Vec<_>>()
        }),
        None,
    );
    tick(&mut progress);
    let conj_g = ck.encoder().galois_element_conjugate();
    put(
        "keygen_conj",
        time(kreps, 1, || ck.gen_galois_key(&sk, conj_g, &mut rng)),
        None,
    );
    tick(&mut progress);
    let mut kp = Progress::new("keygen (relin + 8 rotations + conjugation)", opts.json);
    let keys = ck
        .gen_evaluation_keys(&sk, &rots, true, &mut rng, |d, t| kp.update(d, t))
        .map_err(e)?;

    // Encoding and encryption.
    let slots = p.max_slots();
    let top = p.max_level();
    let scale = p.default_scale();
    let x = values(slots, 1);
    let y = values(slots, 2);
    let t = time(reps, 2, || ck.encode(&x, slots, top, scale));
    let ptx = ck.encode(&x, slots, top, scale).map_err(e)?;
    let prec = PrecisionStats::compute(&x, &ck.decode(&ptx).map_err(e)?);
    put("encode", t, Some(prec));
    tick(&mut progress);
    let t = time(reps, 2, || ck.encrypt_pk(&pk, &ptx, &mut rng));
    let cx = ck.encrypt_pk(&pk, &ptx, &mut rng).map_err(e)?;
    put("encrypt_pk", t, None);
    tick(&mut progress);
    let t = time(reps, 2, || ck.encrypt_sk(&sk, &ptx, &mut rng));
    put("encrypt_sk", t, None);
    let t = time(reps, 2, || ck.decrypt_decode(&sk, &cx));
    let prec = PrecisionStats::compute(&x, &ck.decrypt_decode(&sk, &cx).map_err(e)?);
    put("decrypt_decode", t, Some(prec));
    tick(&mut progress);
    let pty = ck.encode(&y, slots, top, scale).map_err(e)?;
    let cy = ck.encrypt_pk(&pk, &pty, &mut rng).map_err(e)?;

    // Arithmetic.
    let t = time(reps, 2, || ck.add(&cx, &cy));
    let sum: Vec<C64> = x.iter().zip(&y).map(|(a, b)| *a + *b).collect();
    put(
        "add_ct_ct",
        t,
        Some(PrecisionStats::compute(
            &sum,
            &ck.decrypt_decode(&sk, &ck.add(&cx, &cy).map_err(e)?)
                .map_err(e)?,
        )),
    );
    tick(&mut progress);
    // ct × pt: the plaintext is encoded at scale q_top so the rescale returns to Δ exactly.
    let pt_w = ck
        .encode(&y, slots, top, ck.rescale_prime(top))
        .map_err(e)?;
    put(
        "mul_ct_pt",
        time(reps, 2, || ck.mul_plain(&cx, &pt_w)),
        None,
    );
    tick(&mut progress);
    let cxp = ck.mul_plain(&cx, &pt_w).map_err(e)?;
    put(
        "rescale_after_ct_pt",
        time_with(
            reps,
            2,
            1,
            || ck.clone_ct(&cxp),
            |mut c| ck.rescale_assign(&mut c),
        ),
        None,
    );
    tick(&mut progress);
    let prod: Vec<C64> = x.iter().zip(&y).map(|(a, b)| *a * *b).collect();
    let ctpt = |c: &_| -> Result<_, veil_core::Error> {
        let mut o = ck.mul_plain(c, &pt_w)?;
        ck.rescale_assign(&mut o)?;
        Ok(o)
    };
    let t = time(reps, 2, || ctpt(&cx));
    let out = ctpt(&cx).map_err(e)?;
    put(
        "mul_ct_pt+rescale",
        t,
        Some(PrecisionStats::compute(
            &prod,
            &ck.decrypt_decode(&sk, &out).map_err(e)?,
        )),
    );
    tick(&mut progress);
    put(
        "mul_ct_ct_norelin",
        time(reps, 2, || ck.mul_no_relin(&cx, &cy)),
        None,
    );
    tick(&mut progress);
    let c3 = ck.mul_no_relin(&cx, &cy).map_err(e)?;
    put(
        "relinearize",
        time_with(
            reps,
            2,
            1,
            || ck.clone_ct(&c3),
            |mut c| ck.relinearize_assign(&mut c, &keys),
        ),
        None,
    );
    tick(&mut progress);
    put(
        "mul_ct_ct+relin",
        time(reps, 2, || ck.mul_relin(&cx, &cy, &keys)),
        None,
    );
    tick(&mut progress);
    let cxy = ck.mul_relin(&cx, &cy, &keys).map_err(e)?;
    put(
        "rescale",
        time_with(
            reps,
            2,
            1,
            || ck.clone_ct(&cxy),
            |mut c| ck.rescale_assign(&mut c),
        ),
        None,
    );
    tick(&mut progress);
    let ctct = |a: &_, b: &_| -> Result<_, veil_core::Error> {
        let mut o = ck.mul_relin(a, b, &keys)?;
        ck.rescale_assign(&mut o)?;
        Ok(o)
    };
    let t = time(reps, 2, || ctct(&cx, &cy));
    let out = ctct(&cx, &cy).map_err(e)?;
    put(
        "mul_ct_ct+relin+rescale",
        t,
        Some(PrecisionStats::compute(
            &prod,
            &ck.decrypt_decode(&sk, &out).map_err(e)?,
        )),
    );
    tick(&mut progress);

    // Rotations.
    let t = time(reps, 2, || ck.rotate(&cx, 1, &keys));
    let r1 = ck.rotate(&cx, 1, &keys).map_err(e)?;
    put(
        "rotate_1",
        t,
        Some(PrecisionStats::compute(
            &rot(&x, 1),
            &ck.decrypt_decode(&sk, &r1).map_err(e)?,
        )),
    );
    tick(&mut progress);
    let t = time_with(
        reps,
        1,
        rots.len(),
        || (),
        |_| ck.rotate_hoisted(&cx, &rots, &keys),
    );
    let hs = ck.rotate_hoisted(&cx, &rots, &keys).map_err(e)?;
    let mut worst: Option<PrecisionStats> = None;
    for (h, &k) in hs.iter().zip(&rots) {
        let s = PrecisionStats::compute(&rot(&x, k), &ck.decrypt_decode(&sk, h).map_err(e)?);
        if worst.is_none_or(|w| s.min_bits() < w.min_bits()) {
            worst = Some(s);
        }
    }
    put("hoisted_rot_x8_per_rot", t, worst);
    tick(&mut progress);
    let t = time_with(
        reps.min(5),
        1,
        rots.len(),
        || (),
        |_| {
            rots.iter()
                .map(|&k| ck.rotate(&cx, k, &keys))
                .collect::<Vec<_>>()
        },
    );
    put("rot_x8_unhoisted_per_rot", t, None);
    tick(&mut progress);
    let t = time(reps, 2, || ck.conjugate(&cx, &keys));
    let cj = ck.conjugate(&cx, &keys).map_err(e)?;
    let xc: Vec<C64> = x.iter().map(|v| v.conj()).collect();
    put(
        "conjugate",
        t,
        Some(PrecisionStats::compute(
            &xc,
            &ck.decrypt_decode(&sk, &cj).map_err(e)?,
        )),
    );
    tick(&mut progress);

    // Lowest level.
    let mut low = ck.clone_ct(&cx);
    ck.drop_level_assign(&mut low, 0).map_err(e)?;
    put(
        "add_ct_ct_lowest",
        time(reps, 2, || ck.add(&low, &low)),
        None,
    );
    tick(&mut progress);
    let t = time(reps, 2, || ck.rotate(&low, 1, &keys));
    let rl = ck.rotate(&low, 1, &keys).map_err(e)?;
    put(
        "rotate_1_lowest",
        t,
        Some(PrecisionStats::compute(
            &rot(&x, 1),
            &ck.decrypt_decode(&sk, &rl).map_err(e)?,
        )),
    );
    tick(&mut progress);

    let mut info = BTreeMap::new();
    let mut note = |k: &str, v: serde_json::Value| {
        info.insert(k.to_string(), v);
    };
    note("lib", "veil".into());
    note("backend", ck.backend().name().into());
    note("params", p.name().into());
    note("log_n", p.log_n().into());
    note("levels", p.max_level().into());
    note("dnum", p.dnum().into());
    note("special_primes", p.p().len().into());
    note("log2_QP", ((p.log_qp() * 100.0).round() / 100.0).into());
    note("threads", opts.threads.into());
    note("reps", reps.into());
    // Sizes of the real serialized objects (bit-packed rows, versioned header).
    let ser = |c: &veil_core::ckks::Ciphertext<B>, compressed: bool| {
        ck.serialize_ciphertext(c, compressed)
            .map(|b| b.len())
            .map_err(e)
    };
    let fresh_sk = ck.encrypt_sk(&sk, &ptx, &mut rng).map_err(e)?;
    note("ciphertext_bytes_top", ser(&cx, false)?.into());
    note("ciphertext_bytes_top_seeded", ser(&fresh_sk, true)?.into());
    note("ciphertext_bytes_lowest", ser(&low, false)?.into());
    let sk_bytes = ck
        .serialize_switching_key(keys.relin.as_ref().expect("generated above"), true)
        .map_err(e)?
        .len();
    note("relin_key_bytes_seeded", sk_bytes.into());
    Ok(BenchCkksReport { info, results })
}

/// Rows in print order, with the peers' labels.
pub const ROWS: &[(&str, &str)] = &[
    ("keygen_sk_pk", "keygen sk + pk"),
    ("keygen_relin", "keygen relin"),
    ("keygen_rot_x8", "keygen 8 rotation keys"),
    ("keygen_conj", "keygen conjugation key"),
    ("encode", "encode"),
    ("encrypt_pk", "encrypt (pk)"),
    ("encrypt_sk", "encrypt (sk, seeded)"),
    ("decrypt_decode", "decrypt + decode"),
    ("add_ct_ct", "add ct+ct"),
    ("mul_ct_pt", "mul ct*pt"),
    ("rescale_after_ct_pt", "rescale (after ct*pt)"),
    ("mul_ct_pt+rescale", "mul ct*pt + rescale"),
    ("mul_ct_ct_norelin", "mul ct*ct (no relin)"),
    ("relinearize", "relinearize"),
    ("mul_ct_ct+relin", "mul ct*ct + relin"),
    ("rescale", "rescale (after ct*ct)"),
    ("mul_ct_ct+relin+rescale", "mul ct*ct + relin + rescale"),
    ("rotate_1", "rotate by 1"),
    ("hoisted_rot_x8_per_rot", "8 hoisted rotations (per rot)"),
    (
        "rot_x8_unhoisted_per_rot",
        "8 rotations, not hoisted (per rot)",
    ),
    ("conjugate", "conjugate"),
    ("add_ct_ct_lowest", "add ct+ct @ level 0"),
    ("rotate_1_lowest", "rotate by 1 @ level 0"),
];

/// Renders the report as a text table.
pub fn render(r: &BenchCkksReport) -> String {
    let mut s = String::new();
    let i = &r.info;
    s += &format!(
        "veil bench ckks — {} on {} (N = 2^{}, L = {}, dnum = {}, k = {}, log2 QP = {}, threads = {})\n",
        i["params"], i["backend"], i["log_n"], i["levels"], i["dnum"], i["special_primes"], i["log2_QP"], i["threads"]
    );
    s += &format!(
        "{:<38} {:>11} {:>11}   precision bits re min/avg/med | im min/avg/med\n",
        "primitive", "min ms", "median ms"
    );
    for (key, label) in ROWS {
        if let Some(row) = r.results.get(*key) {
            let prec = row
                .precision
                .map(|p| {
                    format!(
                        "{:5.1} {:5.1} {:5.1} | {:5.1} {:5.1} {:5.1}",
                        p.real_min_avg_median[0],
                        p.real_min_avg_median[1],
                        p.real_min_avg_median[2],
                        p.imag_min_avg_median[0],
                        p.imag_min_avg_median[1],
                        p.imag_min_avg_median[2]
                    )
                })
                .unwrap_or_default();
            s += &format!(
                "{label:<38} {:>11.3} {:>11.3}   {prec}\n",
                row.min_ms, row.median_ms
            );
        }
    }
    s += &format!(
        "serialized bytes: ciphertext at the top level {} ({} seeded), at level 0 {}; relinearization key {} (seeded)\n",
        i["ciphertext_bytes_top"], i["ciphertext_bytes_top_seeded"], i["ciphertext_bytes_lowest"], i["relin_key_bytes_seeded"]
    );
    s
}
