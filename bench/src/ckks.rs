//! `veil-bench ckks`: per-primitive latency and precision of RNS-CKKS on one parameter set.
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

/// Options of `veil-bench ckks`.
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
    /// The primitive's floor on this machine (ms), where it has one: see [`Floor`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_ms: Option<f64>,
    /// `min_ms / floor_ms`: how far the primitive is from its floor (1 = at the floor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_ratio: Option<f64>,
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
                floor_ms: None,
                floor_ratio: None,
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

    let peer = peer_precision(&ck, &sk, &pk, &keys, &mut rng).map_err(e)?;
    let unit = measure_floor_units(&ck, reps.max(10));
    for (name, f) in floors(&p) {
        if let Some(row) = results.get_mut(name) {
            let ms = f.ms(&unit);
            row.floor_ms = Some(ms);
            row.floor_ratio = Some(row.min_ms / ms);
        }
    }

    let mut info = BTreeMap::new();
    let mut note = |k: &str, v: serde_json::Value| {
        info.insert(k.to_string(), v);
    };
    note("fresh_precision_bits", peer.fresh_min.into());
    note("fresh_precision_mean_bits", peer.fresh_mean.into());
    note("mul_rescale_precision_bits", peer.mul_min.into());
    note("mul_rescale_precision_mean_bits", peer.mul_mean.into());
    note("precision_trials", PEER_TRIALS.into());
    note("ntt_row_ms", unit.ntt_row_ms.into());
    note("copy_gb_per_s", unit.copy_gb_per_s.into());
    if let Some(mb) = peak_rss_mb() {
        note("peak_rss_mb", mb.into());
    }
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

/// What bounds a primitive from below on this machine.
///
/// A compute-bound primitive is costed by its number-theoretic transforms: `ntt_rows` forward or
/// inverse NTTs of one `N`-word row, each at the measured single-row time
/// ([`FloorUnits::ntt_row_ms`]). The rest of its work (basis conversion, Hadamard products, the
/// key inner product) is left out, so the floor is a lower bound that an implementation could
/// approach only by hiding that work. A memory-bound primitive (additions, plaintext and tensor
/// products) is costed by the bytes it must read and write, as the time of the backend's copy of
/// that many bytes over a working set of the same size ([`FloorUnits::copy_ms`]): a top-level
/// addition at N = 2^16 touches 53 MB, beyond a 32 MB L3, where a level-0 one fits in it, and the
/// two run at different bandwidths. The copy is one pass on one thread, so on more threads, or
/// with wider stores than the copy's, a memory-bound primitive can run below its floor: there
/// the floor says how close to a plain copy it is, not a bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Floor {
    /// This many single-row NTTs (forward or inverse).
    Ntt(f64),
    /// This many bytes read plus written.
    Bytes(f64),
}

impl Floor {
    /// The floor in milliseconds.
    pub fn ms(&self, u: &FloorUnits) -> f64 {
        match *self {
            Floor::Ntt(rows) => rows * u.ntt_row_ms,
            Floor::Bytes(b) => u
                .copy_ms
                .iter()
                .find(|(v, _)| *v == b)
                .map_or(b / (u.copy_gb_per_s * 1e9) * 1e3, |(_, ms)| *ms),
        }
    }
}

/// The two measured units of [`Floor`].
#[derive(Clone, Debug, PartialEq)]
pub struct FloorUnits {
    /// One forward NTT of one row (ms): the fastest of the runs over a top-level polynomial,
    /// divided by its rows.
    pub ntt_row_ms: f64,
    /// Copy bandwidth (GB/s, bytes read plus written) of a buffer over `Q ∪ P`.
    pub copy_gb_per_s: f64,
    /// For each memory-bound floor's byte count `b` (read plus written): the fastest time (ms)
    /// of copies that read `b/2` and write `b/2` bytes, over distinct buffers of at most
    /// `Q ∪ P` rows each, so that the working set is `b` as in the primitive.
    pub copy_ms: Vec<(f64, f64)>,
}

/// Measures [`FloorUnits`] on `ck`'s backend.
pub fn measure_floor_units<B: PolyBackend>(ck: &Ckks<B>, reps: usize) -> FloorUnits {
    use veil_core::backend::Basis;
    let p = ck.params();
    let be = ck.backend();
    let (r, full) = (p.max_level() + 1, Basis::qp(p.max_level() + 1, p.p().len()));
    let words_for = |rows: usize| -> Vec<u64> {
        (0..rows * p.n())
            .map(|i| (i as u64).wrapping_mul(0x9E37_79B9) % p.q()[(i / p.n()) % r].value())
            .collect()
    };
    let words = words_for(r);
    let t = time_with(
        reps,
        2,
        1,
        || be.upload(&words),
        |mut b| be.ntt(&mut b, Basis::q(r)),
    );
    let src = be.upload(&words_for(full.rows()));
    let mut dst = be.alloc(full.rows());
    let c = time(reps, 2, || be.copy_rows(&src, full, &mut dst, full));
    let bytes = 2.0 * (full.rows() * p.n() * 8) as f64;
    let (q_rows, row_bytes) = (p.q().len(), (p.n() * 8) as f64);
    let basis = |rows: usize| {
        if rows <= q_rows {
            Basis::q(rows)
        } else {
            Basis::qp(q_rows, rows - q_rows)
        }
    };
    let mut copy_ms = Vec::new();
    for (_, f) in floors(p) {
        let Floor::Bytes(b) = f else { continue };
        if copy_ms.iter().any(|(v, _)| *v == b) {
            continue;
        }
        // Rows to read (as many are written), in chunks of at most one Q ∪ P buffer.
        // Sources hold real words (a zeroed allocation could be read from the kernel's zero
        // page, which no primitive's operand is).
        let mut left = ((b / 2.0 / row_bytes).round() as usize).max(1);
        let mut chunks = Vec::new();
        while left > 0 {
            let rows = left.min(full.rows());
            let src = be.upload(&words_for(rows));
            chunks.push((rows, src, be.alloc(rows)));
            left -= rows;
        }
        let m = time(reps, 2, || {
            for (rows, src, dst) in chunks.iter_mut() {
                be.copy_rows(src, basis(*rows), dst, basis(*rows));
            }
        });
        copy_ms.push((b, m.min_ms));
    }
    FloorUnits {
        ntt_row_ms: t.min_ms / r as f64,
        copy_gb_per_s: bytes / (c.min_ms * 1e-3) / 1e9,
        copy_ms,
    }
}

/// The floor of every benchmarked primitive that has one, from the parameter set's shape
/// (`r = L + 1` ciphertext rows at the top level, `k` special primes, `β` digits, `dnum` key
/// digits, `F = r + k` rows in the extended basis; at level 0, `r = β = 1` and `k` is the level's
/// own count, [`veil_core::CkksParams::special_at`]):
///
/// * key switch: `β·F` (ModUp: `r` inverse NTTs, then the other `F − α_j` rows of each digit) plus
///   `2·(k + r)` (two ModDowns, each `k` inverse and `r` forward);
/// * rescale: `2·r` (per polynomial one inverse and `r − 1` forward);
/// * public-key encryption: `5·(r + 1)` (`u`, `e_0`, `e_1` over `Q ∪ {p_0}`, two ModDowns by
///   `p_0`); secret-key encryption `r`; encoding `r`;
/// * key generation: `dnum·F` per switching key (its errors);
/// * addition `3·2·r·N·8` bytes; ct×pt `5·r·N·8`; the ct×ct tensor `7·r·N·8`.
///
/// Decryption with decoding has no entry: its cost is the decoder's FFT and CRT, not NTTs.
pub fn floors(p: &veil_core::CkksParams) -> Vec<(&'static str, Floor)> {
    let (r, k) = ((p.max_level() + 1) as f64, p.p().len() as f64);
    let beta = p.digits_at(p.max_level()) as f64;
    let f = r + k;
    // A key switch at a level with `r` rows, `beta` digits and `k` special primes.
    let ks_k = |r: f64, beta: f64, k: f64| beta * (r + k) + 2.0 * (k + r);
    let ks = |r: f64, beta: f64| ks_k(r, beta, k);
    // Level 0 divides by its own, smaller `P_0` (`CkksParams::special_at`).
    let k0 = p.special_at(0) as f64;
    let poly = |rows: f64| rows * p.n() as f64 * 8.0;
    let key = p.dnum() as f64 * f;
    vec![
        ("keygen_relin", Floor::Ntt(key)),
        ("keygen_rot_x8", Floor::Ntt(8.0 * key)),
        ("keygen_conj", Floor::Ntt(key)),
        ("encode", Floor::Ntt(r)),
        ("encrypt_pk", Floor::Ntt(5.0 * (r + 1.0))),
        ("encrypt_sk", Floor::Ntt(r)),
        ("add_ct_ct", Floor::Bytes(3.0 * poly(2.0 * r))),
        ("mul_ct_pt", Floor::Bytes(poly(5.0 * r))),
        ("rescale_after_ct_pt", Floor::Ntt(2.0 * r)),
        ("mul_ct_pt+rescale", Floor::Ntt(2.0 * r)),
        ("mul_ct_ct_norelin", Floor::Bytes(poly(7.0 * r))),
        ("relinearize", Floor::Ntt(ks(r, beta))),
        ("mul_ct_ct+relin", Floor::Ntt(ks(r, beta))),
        ("rescale", Floor::Ntt(2.0 * r)),
        ("mul_ct_ct+relin+rescale", Floor::Ntt(ks(r, beta) + 2.0 * r)),
        ("rotate_1", Floor::Ntt(ks(r, beta))),
        (
            "hoisted_rot_x8_per_rot",
            Floor::Ntt((beta * (r + k) + 8.0 * 2.0 * (k + r)) / 8.0),
        ),
        ("rot_x8_unhoisted_per_rot", Floor::Ntt(ks(r, beta))),
        ("conjugate", Floor::Ntt(ks(r, beta))),
        ("add_ct_ct_lowest", Floor::Bytes(3.0 * poly(2.0))),
        ("rotate_1_lowest", Floor::Ntt(ks_k(1.0, 1.0, k0))),
    ]
}

/// The process's peak resident memory (MB), where the OS reports it (`VmHWM` on Linux).
pub fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Trials of the peers' precision measure (fresh encryption, and ct×ct + relin + rescale).
pub const PEER_TRIALS: usize = 3;

/// The peers' precision measure: real inputs uniform in `[-1, 1]` in every slot, at the top level
/// and the default scale. For each of [`PEER_TRIALS`] trials, fresh public-key encryptions of `x`
/// and `y` are decrypted (fresh), and `x·y` by ct×ct + relinearization + rescale is decrypted
/// (mul). `*_min` is `-log2` of the largest absolute error of the real parts over every slot of
/// every trial (the peer scripts' `fresh_precision_bits` and `mul_rescale_precision_bits`);
/// `*_mean` is `-log2` of the mean absolute error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerPrecision {
    /// Fresh encryption, worst slot (bits).
    pub fresh_min: f64,
    /// Fresh encryption, mean error (bits).
    pub fresh_mean: f64,
    /// ct×ct + relin + rescale, worst slot (bits).
    pub mul_min: f64,
    /// ct×ct + relin + rescale, mean error (bits).
    pub mul_mean: f64,
}

/// Measures [`PeerPrecision`] (fresh randomness for the inputs on every call).
pub fn peer_precision<B: PolyBackend>(
    ck: &Ckks<B>,
    sk: &veil_core::ckks::SecretKey,
    pk: &veil_core::ckks::PublicKey<B>,
    keys: &veil_core::ckks::EvaluationKeys<B>,
    rng: &mut (impl rand_core::RngCore + rand_core::CryptoRng),
) -> Result<PeerPrecision, veil_core::Error> {
    let p = ck.params();
    let (slots, top, scale) = (p.max_slots(), p.max_level(), p.default_scale());
    let uniform = |rng: &mut dyn rand_core::RngCore| -> Vec<C64> {
        (0..slots)
            .map(|_| {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                C64::new(2.0 * u - 1.0, 0.0)
            })
            .collect()
    };
    let (mut fresh, mut mul) = (Vec::new(), Vec::new());
    for _ in 0..PEER_TRIALS {
        let (x, y) = (uniform(rng), uniform(rng));
        let cx = ck.encrypt_pk(pk, &ck.encode(&x, slots, top, scale)?, rng)?;
        let cy = ck.encrypt_pk(pk, &ck.encode(&y, slots, top, scale)?, rng)?;
        for (c, v) in [(&cx, &x), (&cy, &y)] {
            let d = ck.decrypt_decode(sk, c)?;
            fresh.extend(v.iter().zip(&d).map(|(a, b)| (a.re - b.re).abs()));
        }
        let mut m = ck.mul_relin(&cx, &cy, keys)?;
        ck.rescale_assign(&mut m)?;
        let d = ck.decrypt_decode(sk, &m)?;
        mul.extend(
            x.iter()
                .zip(&y)
                .zip(&d)
                .map(|((a, b), g)| (a.re * b.re - g.re).abs()),
        );
    }
    let bits = |e: f64| -e.max(f64::MIN_POSITIVE).log2();
    let worst = |v: &[f64]| bits(v.iter().copied().fold(0.0, f64::max));
    let mean = |v: &[f64]| bits(v.iter().sum::<f64>() / v.len() as f64);
    Ok(PeerPrecision {
        fresh_min: worst(&fresh),
        fresh_mean: mean(&fresh),
        mul_min: worst(&mul),
        mul_mean: mean(&mul),
    })
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
        "veil-bench ckks — {} on {} (N = 2^{}, L = {}, dnum = {}, k = {}, log2 QP = {}, threads = {})\n",
        i["params"], i["backend"], i["log_n"], i["levels"], i["dnum"], i["special_primes"], i["log2_QP"], i["threads"]
    );
    s += &format!(
        "{:<38} {:>11} {:>11} {:>9} {:>7}   precision bits re min/avg/med | im min/avg/med\n",
        "primitive", "min ms", "median ms", "floor ms", "×floor"
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
            let (fl, fr) = match (row.floor_ms, row.floor_ratio) {
                (Some(f), Some(r)) => (format!("{f:.3}"), format!("{r:.2}")),
                _ => ("–".to_string(), "–".to_string()),
            };
            s += &format!(
                "{label:<38} {:>11.3} {:>11.3} {fl:>9} {fr:>7}   {prec}\n",
                row.min_ms, row.median_ms
            );
        }
    }
    s += &format!(
        "precision, the peers' measure (real inputs uniform in [-1, 1], {} trials), bits worst/mean: \
         fresh pk encryption {:.2}/{:.2}, ct*ct + relin + rescale {:.2}/{:.2}\n",
        i["precision_trials"],
        i["fresh_precision_bits"].as_f64().unwrap_or(f64::NAN),
        i["fresh_precision_mean_bits"].as_f64().unwrap_or(f64::NAN),
        i["mul_rescale_precision_bits"].as_f64().unwrap_or(f64::NAN),
        i["mul_rescale_precision_mean_bits"].as_f64().unwrap_or(f64::NAN),
    );
    s += &format!(
        "floor units: one {}-word NTT row {:.4} ms, in-cache copy bandwidth (one Q ∪ P buffer) {:.1} GB/s; peak memory {} MB\n",
        1u64 << i["log_n"].as_u64().unwrap_or(0),
        i["ntt_row_ms"].as_f64().unwrap_or(f64::NAN),
        i["copy_gb_per_s"].as_f64().unwrap_or(f64::NAN),
        i.get("peak_rss_mb")
            .and_then(|v| v.as_f64())
            .map_or("–".to_string(), |m| format!("{m:.0}")),
    );
    s += &format!(
        "serialized bytes: ciphertext at the top level {} ({} seeded), at level 0 {}; relinearization key {} (seeded)\n",
        i["ciphertext_bytes_top"], i["ciphertext_bytes_top_seeded"], i["ciphertext_bytes_lowest"], i["relin_key_bytes_seeded"]
    );
    s
}
