//! `veil-bench cnn`: FEnc2's block-size study. `--table-ix` compiles the five convolution
//! settings of Table IX at every power-of-two block size (the same plan a real run follows,
//! checked by a dry run through the executor) and sets the rotation counts beside the paper's,
//! Eqs. 3–4 and the planner's `S*` (Eq. 8). `--lenet` runs the built-in LeNet privately (client
//! and server over TCP loopback, real MNIST test images) at each batch of `--batches`, and
//! reports seconds per image, peak memory, bytes and agreement with the plaintext model.
//! `--hybrid` runs the same LeNet trained with ReLU in the hybrid mode (linear layers under CKKS,
//! every ReLU exact in MPC) and reports latency and bytes per image, per step.

use crate::error::core;
use crate::BenchError;
use serde::Serialize;
use veil_core::circuits::{Exec, SymExec};
use veil_core::cnn::{choose_block, plan, Conv2d};
use veil_core::packing::fragment::FragmentLayout;

/// Options of `veil-bench cnn`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchCnnArgs {
    /// The Table IX block-size sweep (rotation counts; no ciphertext is touched).
    #[arg(long)]
    pub table_ix: bool,
    /// Table X: Arch-aware Ct Compression on SqueezeNet's fire modules and ResNet18's
    /// shortcuts, with and without (dry-run counts; `--time` also runs them on ciphertexts).
    #[arg(long)]
    pub table_x: bool,
    /// Table V: SqueezeNet, ResNet18 and MobileNet whole, at batch 1 and FEnc2's largest
    /// batch, with and without AAC (dry-run counts beside the paper's).
    #[arg(long)]
    pub table_v: bool,
    /// VGG5 for CIFAR-10 at its shape: dry-run counts at batches 16, 64 and 256; with `--time`
    /// also a real run of `--vgg5-batch` (tens of minutes on two cores).
    #[arg(long)]
    pub vgg5: bool,
    /// `--vgg5 --time`: the batch to run on ciphertexts.
    #[arg(long, default_value_t = 16)]
    pub vgg5_batch: usize,
    /// Also run on real CKKS ciphertexts: with `--table-x` the modules whose name contains
    /// `--module` (minutes each), with `--vgg5` the batch `--vgg5-batch`.
    #[arg(long)]
    pub time: bool,
    /// `--table-x --time`: the modules to run (a substring of their names; `all` for every one).
    #[arg(long, default_value = "Fire(64,32,128)")]
    pub module: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Private LeNet on MNIST test images at each batch of `--batches`.
    #[arg(long)]
    pub lenet: bool,
    /// Batches for `--lenet` (powers of two; each runs as many images as its batch).
    #[arg(long, value_delimiter = ',', default_value = "16,256,8192")]
    pub batches: Vec<usize>,
    /// CKKS worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Private LeNet-ReLU in the hybrid mode (ReLU in MPC) at each batch of `--batches`.
    #[arg(long)]
    pub hybrid: bool,
    /// `--hybrid`: images run per batch (0: the whole batch). A batch of 8,192 with fewer live
    /// images still converts every ciphertext but runs ReLU on the live slots only.
    #[arg(long, default_value_t = 0)]
    pub hybrid_images: usize,
    /// `--hybrid`: the oblivious transfer, `silent` (Ferret) or `iknp`.
    #[arg(long, default_value = "silent")]
    pub ot: String,
}

/// One `--hybrid` point.
#[derive(Clone, Debug, Serialize)]
pub struct HybridPoint {
    /// Images per batch.
    pub batch: usize,
    /// Images run (live slots).
    pub images: usize,
    /// The CKKS parameter set.
    pub params: String,
    /// Block size.
    pub block: usize,
    /// `silent` or `iknp`.
    pub ot: String,
    /// The whole run (conversions, CKKS and MPC), seconds.
    pub run_s: f64,
    /// Run seconds per image.
    pub seconds_per_image: f64,
    /// Base OT and silent-OT setup, seconds (once per session).
    pub setup_s: f64,
    /// Galois keys.
    pub galois_keys: usize,
    /// Public + evaluation key bytes.
    pub key_bytes: u64,
    /// All bytes between the parties per image, both directions (conversions included).
    pub bytes_per_image: f64,
    /// Of which converted ciphertexts, per image.
    pub converted_bytes_per_image: f64,
    /// ReLUs evaluated in MPC.
    pub relus: usize,
    /// Conversions (M2C, complex C2M).
    pub conversions: (usize, usize),
    /// Peak resident memory, bytes (both parties in one process).
    pub peak_rss: Option<u64>,
    /// Predictions equal to the plaintext model's.
    pub agreement: usize,
    /// Predictions equal to the label.
    pub correct: usize,
    /// Worst `|Δlogit|` against the plaintext model.
    pub worst_logit_error: f64,
    /// Per step: name, converted ciphertexts, bytes, rounds, seconds.
    pub steps: Vec<(String, usize, u64, u64, f64)>,
}

/// One `--lenet` point.
#[derive(Clone, Debug, Serialize)]
pub struct LenetPoint {
    /// Images per batch.
    pub batch: usize,
    /// The CKKS parameter set.
    pub params: String,
    /// Block size.
    pub block: usize,
    /// Images run (one batch).
    pub images: usize,
    /// Server evaluation, seconds.
    pub server_s: f64,
    /// Server seconds per image.
    pub seconds_per_image: f64,
    /// Key generation and transfer, seconds.
    pub keys_s: f64,
    /// Galois keys.
    pub galois_keys: usize,
    /// Public + evaluation key bytes.
    pub key_bytes: u64,
    /// Ciphertext bytes per image, both directions.
    pub ct_bytes_per_image: f64,
    /// Peak resident memory during this point, bytes (both parties in one process).
    pub peak_rss: Option<u64>,
    /// Predictions equal to the plaintext model's.
    pub agreement: usize,
    /// Predictions equal to the label.
    pub correct: usize,
    /// Worst `|Δlogit|` against the plaintext model.
    pub worst_logit_error: f64,
    /// Per layer: name, rotations, relinearizations, plaintext products, constant MACs, seconds.
    pub layers: Vec<(String, u64, u64, u64, u64, f64)>,
}

/// CKKS worker threads: `--threads`, or every core for 0.
fn threads(a: &BenchCnnArgs) -> usize {
    veil_host::backend::cpu_threads(a.threads)
}

/// A batch of `--batches` (a power of two), its parameter set ([`veil_core::cnn::batch_params`]:
/// 8,192 images fill N = 2^14 and run pixel-wise, other batches use N = 2^15) and a CPU context
/// on it with `threads` workers.
fn batch_context(
    batch: usize,
    threads: usize,
) -> Result<
    (
        veil_core::params::CkksParams,
        veil_core::ckks::Ckks<veil_backend_cpu::CpuBackend>,
    ),
    BenchError,
> {
    if !batch.is_power_of_two() {
        return Err(BenchError::InvalidOption {
            option: "--batches",
            value: batch.to_string(),
            expected: "powers of two",
        });
    }
    let p = veil_core::cnn::batch_params(batch)
        .validate()
        .map_err(core("the parameter set"))?;
    let be = crate::cpu_backend(&p, threads)?;
    Ok((p, veil_core::ckks::Ckks::new(std::sync::Arc::new(be))))
}

/// The plaintext model's logits on `imgs` (`classes` per image).
fn plain_logits(
    net: &veil_core::cnn::Network,
    imgs: &veil_host::model::images::Images,
) -> Result<Vec<f64>, BenchError> {
    let x: Vec<f64> = (0..imgs.count).flat_map(|i| imgs.unit(i)).collect();
    net.reference(&x, imgs.count).map_err(core("the reference"))
}

/// The private logits scored against the plaintext ones (`classes` per image) and the labels:
/// predictions equal to the plaintext model's, predictions equal to the label, and the worst
/// `|Δlogit|`.
fn score(logits: &[Vec<f64>], plain: &[f64], classes: usize, labels: &[u8]) -> (usize, usize, f64) {
    let (mut agreement, mut correct, mut worst) = (0, 0, 0.0f64);
    for ((l, pl), &label) in logits.iter().zip(plain.chunks(classes)).zip(labels) {
        let pe = veil_host::cnn::argmax(l);
        agreement += (veil_host::cnn::argmax(pl) == pe) as usize;
        correct += (pe == label as usize) as usize;
        for (u, v) in l.iter().zip(pl) {
            worst = worst.max((u - v).abs());
        }
    }
    (agreement, correct, worst)
}

/// A built-in model with the MNIST test images and labels.
fn mnist_model(
    name: &'static str,
) -> Result<
    (
        veil_core::cnn::Network,
        veil_host::model::images::Images,
        Vec<u8>,
    ),
    BenchError,
> {
    use veil_host::model::{cnn, images};
    let model = |e: veil_host::model::ModelError| BenchError::Cnn {
        step: "a built-in model or MNIST",
        reason: format!("{name}: {e}"),
    };
    Ok((
        cnn::load(name).map_err(model)?,
        images::read_images("mnist-test").map_err(model)?,
        images::read_labels("mnist-test").map_err(model)?,
    ))
}

/// Runs `--lenet`.
pub fn lenet(a: &BenchCnnArgs) -> Result<Vec<LenetPoint>, BenchError> {
    let (net, all, labels) = mnist_model("lenet")?;
    let threads = threads(a);
    let mut out = Vec::new();
    for &batch in &a.batches {
        let (p, ck) = batch_context(batch, threads)?;
        let imgs = all.take(batch);
        let plain = plain_logits(&net, &imgs)?;
        eprintln!("lenet: batch {batch} …");
        veil_host::cnn::reset_peak_rss();
        let run = veil_host::cnn::run_loopback(&ck, &net, &imgs, batch, None, |_, c| {
            eprintln!(
                "  {:<8} {:>4} → {:>4} ciphertexts",
                c.name, c.cts_in, c.cts_out
            )
        })
        .map_err(|e| BenchError::Cnn {
            step: "the private LeNet run",
            reason: e.to_string(),
        })?;
        let (agreement, correct, worst) = score(&run.client.logits, &plain, net.classes(), &labels);
        let server_s: f64 = run.batches.iter().map(|b| b.eval_s).sum();
        let back: u64 = run.batches.iter().map(|b| b.bytes_back).sum();
        out.push(LenetPoint {
            batch,
            params: p.name().to_string(),
            block: run.block,
            images: imgs.count,
            server_s,
            seconds_per_image: server_s / imgs.count as f64,
            keys_s: run.client.keys_s,
            galois_keys: run.client.galois_keys,
            key_bytes: run.client.key_bytes,
            ct_bytes_per_image: (run.client.ct_bytes + back) as f64 / imgs.count as f64,
            peak_rss: veil_host::cnn::peak_rss_bytes(),
            agreement,
            correct,
            worst_logit_error: worst,
            layers: run.batches[0]
                .layers
                .iter()
                .map(|(c, s)| {
                    (
                        c.name.clone(),
                        c.ops.rotations,
                        c.ops.relins,
                        c.ops.pt_mults,
                        c.ops.const_mults,
                        *s,
                    )
                })
                .collect(),
        });
    }
    Ok(out)
}

/// Runs `--hybrid`.
pub fn hybrid(a: &BenchCnnArgs) -> Result<Vec<HybridPoint>, BenchError> {
    let silent = match a.ot.as_str() {
        "silent" => true,
        "iknp" => false,
        other => {
            return Err(BenchError::InvalidOption {
                option: "--ot",
                value: other.into(),
                expected: "silent or iknp",
            })
        }
    };
    let (net, all, labels) = mnist_model("lenet-relu")?;
    let threads = threads(a);
    let mut out = Vec::new();
    for &batch in &a.batches {
        let (p, ck) = batch_context(batch, threads)?;
        let live = if a.hybrid_images == 0 {
            batch
        } else {
            a.hybrid_images.min(batch)
        };
        let imgs = all.take(live);
        let plain = plain_logits(&net, &imgs)?;
        eprintln!("lenet-relu hybrid: batch {batch}, {live} images …");
        veil_host::cnn::reset_peak_rss();
        let opts = veil_host::cnn::hybrid::HybridOptions { silent_ot: silent };
        let run =
            veil_host::cnn::hybrid::run_loopback(&ck, &net, &imgs, batch, None, &opts, |_, r| {
                eprintln!("  {:<12} {:>8.2} s", r.cost.name, r.wall_s)
            })
            .map_err(|e| BenchError::Cnn {
                step: "the hybrid LeNet-ReLU run",
                reason: e.to_string(),
            })?;
        let (agreement, correct, worst) = score(&run.client.logits, &plain, net.classes(), &labels);
        let n = imgs.count as f64;
        out.push(HybridPoint {
            batch,
            images: imgs.count,
            params: p.name().to_string(),
            block: run.block,
            ot: a.ot.clone(),
            run_s: run.server.run_s,
            seconds_per_image: run.server.run_s / n,
            setup_s: run.client.setup_s,
            galois_keys: run.client.galois_keys,
            key_bytes: run.client.key_bytes,
            bytes_per_image: run.server.mpc_bytes as f64 / n,
            converted_bytes_per_image: run.server.converted_bytes as f64 / n,
            relus: run.relus,
            conversions: run.conversions,
            peak_rss: veil_host::cnn::peak_rss_bytes(),
            agreement,
            correct,
            worst_logit_error: worst,
            steps: run
                .server
                .steps
                .iter()
                .map(|r| {
                    let c = &r.cost;
                    (
                        c.name.clone(),
                        c.tally.converted_cts,
                        c.tally.mpc_bytes,
                        c.tally.mpc_rounds,
                        r.wall_s,
                    )
                })
                .collect(),
        });
    }
    Ok(out)
}

/// A text table: the `headings`, then each row's cells, right-aligned to the column's width
/// (`widths`) and separated by one space.
fn table(headings: &[&str], widths: &[usize], rows: impl Iterator<Item = Vec<String>>) -> String {
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let cells: Vec<String> = cells
            .zip(widths)
            .map(|(c, &w)| format!("{c:>w$}"))
            .collect();
        cells.join(" ") + "\n"
    };
    let mut s = line(&mut headings.iter().copied());
    for r in rows {
        s += &line(&mut r.iter().map(String::as_str));
    }
    s
}

/// Peak memory in GB for a table (`?` where it was not measured).
fn peak_gb(bytes: Option<u64>) -> String {
    bytes.map_or("?".into(), |b| format!("{:.2}", b as f64 / 1e9))
}

/// A text rendering of `--hybrid`.
pub fn render_hybrid(pts: &[HybridPoint]) -> String {
    let mut s = String::from(
        "Private LeNet-ReLU, hybrid mode (linear layers under CKKS, ReLU exact in MPC), MNIST test images, client and server over TCP loopback\n(batch 8192: pixel-wise at N = 2^14; others: blocked at N = 2^15)\n\n",
    );
    s += &table(
        &[
            "batch",
            "images",
            "S",
            "OT",
            "run s",
            "s/image",
            "keys",
            "MB/image",
            "conv MB/im",
            "peak GB",
            "agree",
            "worst Δ",
        ],
        &[6, 6, 3, 6, 9, 9, 6, 10, 10, 9, 10, 10],
        pts.iter().map(|p| {
            vec![
                p.batch.to_string(),
                p.images.to_string(),
                p.block.to_string(),
                p.ot.clone(),
                format!("{:.2}", p.run_s),
                format!("{:.3}", p.seconds_per_image),
                p.galois_keys.to_string(),
                format!("{:.2}", p.bytes_per_image / 1e6),
                format!("{:.2}", p.converted_bytes_per_image / 1e6),
                peak_gb(p.peak_rss),
                format!("{:>6}/{:<3}", p.agreement, p.images),
                format!("{:.2e}", p.worst_logit_error),
            ]
        }),
    );
    for p in pts {
        s += &format!(
            "\nbatch {} ({} ReLUs, {} M2C + {} complex C2M) per step:\n",
            p.batch, p.relus, p.conversions.0, p.conversions.1
        );
        s += &format!(
            "  {:<12} {:>7} {:>10} {:>7} {:>8}\n",
            "step", "conv", "wire MB", "rounds", "seconds"
        );
        for (n, c, b, r, t) in &p.steps {
            s += &format!(
                "  {n:<12} {c:>7} {:>10.1} {r:>7} {t:>8.2}\n",
                *b as f64 / 1e6
            );
        }
    }
    s
}

/// A text rendering of `--lenet`.
pub fn render_lenet(pts: &[LenetPoint]) -> String {
    let mut s = String::from(
        "Private LeNet (Orion's architecture, trained quadratics) on MNIST test images, client and server over TCP loopback\n(batch 8192: pixel-wise at N = 2^14; others: blocked at N = 2^15)\n\n",
    );
    s += &table(
        &[
            "batch", "S", "server s", "s/image", "keys", "key MB", "MB/image", "peak GB", "agree",
            "worst Δ",
        ],
        &[6, 3, 9, 9, 6, 9, 10, 9, 10, 10],
        pts.iter().map(|p| {
            vec![
                p.batch.to_string(),
                p.block.to_string(),
                format!("{:.2}", p.server_s),
                format!("{:.3}", p.seconds_per_image),
                p.galois_keys.to_string(),
                format!("{:.1}", p.key_bytes as f64 / 1e6),
                format!("{:.2}", p.ct_bytes_per_image / 1e6),
                peak_gb(p.peak_rss),
                format!("{:>6}/{:<3}", p.agreement, p.images),
                format!("{:.2e}", p.worst_logit_error),
            ]
        }),
    );
    for p in pts {
        s += &format!("\nbatch {} per layer:\n", p.batch);
        s += &format!(
            "  {:<14} {:>6} {:>6} {:>7} {:>8} {:>8}\n",
            "layer", "rot", "relin", "ptmul", "constMAC", "seconds"
        );
        for (n, r, rl, pm, cm, t) in &p.layers {
            s += &format!("  {n:<14} {r:>6} {rl:>6} {pm:>7} {cm:>8} {t:>8.2}\n");
        }
    }
    s
}

/// One block size of one Table IX setting.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// `Conv(N_in, N_out, K)` on `(BS, N_in, 32, 32)`.
    pub setting: String,
    /// `S`.
    pub block: usize,
    /// Inner rotations issued (dry run).
    pub inner: u64,
    /// Outer rotations issued (dry run).
    pub outer: u64,
    /// Inner + outer.
    pub total: u64,
    /// Eqs. 3 + 4.
    pub analytic: f64,
    /// Table IX's `#Rot`, where printed.
    pub paper: Option<u64>,
    /// Input and output ciphertexts.
    pub cts: (usize, usize),
    /// Within Eq. 7's bound.
    pub within_eq7: bool,
}

/// One Table IX setting's decision.
#[derive(Clone, Debug, Serialize)]
pub struct SweepDecision {
    /// The setting.
    pub setting: String,
    /// Eq. 8 before rounding.
    pub s_star_real: f64,
    /// Eq. 8 rounded to a power of two.
    pub s_star: usize,
    /// The measured minimum.
    pub best: usize,
    /// The paper's minimum.
    pub paper_best: usize,
}

/// The `--table-ix` report.
#[derive(Clone, Debug, Serialize)]
pub struct TableIx {
    /// Slots per ciphertext (`N = 2^15`).
    pub slots: usize,
    /// Every row.
    pub rows: Vec<SweepRow>,
    /// Per setting.
    pub decisions: Vec<SweepDecision>,
}

/// `(BS, N_in, N_out, K)` and the paper's `#Rot` at S = 1, 2, 4, 8 (where printed).
type Setting = (usize, usize, usize, usize, [Option<u64>; 4]);

/// Table IX's settings.
const TABLE_IX: [Setting; 5] = [
    (4, 64, 64, 3, [Some(176), Some(288), Some(1008), None]),
    (8, 64, 64, 3, [Some(288), Some(320), Some(992), None]),
    (8, 128, 32, 9, [None, Some(1648), Some(1008), Some(2224)]),
    (8, 128, 32, 3, [Some(528), Some(304), Some(496), None]),
    (8, 32, 128, 3, [Some(192), Some(496), Some(1984), None]),
];

/// Runs the sweep at `N = 2^15`.
pub fn table_ix() -> Result<TableIx, BenchError> {
    let slots = 1 << 14;
    let mut rows = Vec::new();
    let mut decisions = Vec::new();
    for &(bs, nin, nout, k, paper) in &TABLE_IX {
        let setting = format!("Conv({nin},{nout},{k}) on ({bs},{nin},32,32)");
        let conv = Conv2d::new(
            nin,
            nout,
            k,
            1,
            k / 2,
            vec![0.01; nout * nin * k * k],
            vec![0.0; nout],
        )
        .map_err(core("the Table IX convolution"))?;
        let ch = choose_block(&conv, bs, 32, 32, slots).map_err(core("the block planner"))?;
        for p in ch.sweep.iter().filter(|p| p.block <= 8) {
            // Confirm the compiled counts with a dry run through the executor.
            let l = FragmentLayout::new(bs, nin, 32, 32, Some(32), p.block, slots)
                .map_err(core("the fragment layout"))?;
            let cp = conv.plan(&l).map_err(core("the convolution plan"))?;
            let sym = SymExec::new(slots);
            let xs: Vec<_> = (0..l.ciphertexts()).map(|_| sym.fresh(2)).collect();
            conv.run(&sym, &cp, &xs, None)
                .map_err(core("the dry run"))?;
            let issued = sym.counts().rotations;
            if issued != p.exact.total() {
                return Err(BenchError::Mismatch {
                    what: "rotations of the dry run against the compiled plan",
                    expected: p.exact.total(),
                    found: issued,
                });
            }
            rows.push(SweepRow {
                setting: setting.clone(),
                block: p.block,
                inner: p.exact.inner,
                outer: p.exact.outer,
                total: issued,
                analytic: plan::analytic(&conv, bs, 32, p.block, slots).total(),
                paper: paper[p.block.trailing_zeros() as usize],
                cts: (p.in_cts, p.out_cts),
                within_eq7: p.within_eq7,
            });
        }
        let paper_best = (0..4)
            .filter_map(|i| paper[i].map(|r| (r, 1usize << i)))
            .min()
            .map_or(0, |x| x.1);
        let best = ch
            .sweep
            .iter()
            .filter(|p| p.block <= 8)
            .min_by_key(|p| (p.exact.total(), p.block))
            .map_or(0, |p| p.block);
        decisions.push(SweepDecision {
            setting,
            s_star_real: ch.s_star_real,
            s_star: ch.s_star,
            best,
            paper_best,
        });
    }
    Ok(TableIx {
        slots,
        rows,
        decisions,
    })
}

/// A text rendering.
pub fn render(t: &TableIx) -> String {
    let mut s = format!(
        "FEnc2 Table IX at n = {} slots (N = 2^15): rotations per batch, dry run of the compiled layer\n\n",
        t.slots
    );
    s += &format!(
        "{:<34} {:>2} {:>6} {:>6} {:>6} {:>8} {:>6} {:>9} {:>4}\n",
        "setting", "S", "inner", "outer", "total", "Eqs.3+4", "paper", "cts in/out", "Eq7"
    );
    for r in &t.rows {
        s += &format!(
            "{:<34} {:>2} {:>6} {:>6} {:>6} {:>8.0} {:>6} {:>4}/{:<4} {:>4}\n",
            r.setting,
            r.block,
            r.inner,
            r.outer,
            r.total,
            r.analytic,
            r.paper.map_or("-".into(), |p| p.to_string()),
            r.cts.0,
            r.cts.1,
            if r.within_eq7 { "ok" } else { "over" }
        );
    }
    s += "\nplanner: Eq. 8 against the measured minimum over S in {1, 2, 4, 8}\n";
    s += &format!(
        "{:<34} {:>8} {:>4} {:>9} {:>11}\n",
        "setting", "Eq.8", "S*", "measured", "paper's min"
    );
    for d in &t.decisions {
        s += &format!(
            "{:<34} {:>8.2} {:>4} {:>9} {:>11}\n",
            d.setting, d.s_star_real, d.s_star, d.best, d.paper_best
        );
    }
    s
}

/// A study's report as JSON (`null` if it does not encode).
fn json_value<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// Runs `veil-bench cnn`.
pub fn run(a: &BenchCnnArgs) -> Result<String, BenchError> {
    if !a.table_ix && !a.table_x && !a.table_v && !a.vgg5 && !a.lenet && !a.hybrid {
        return Err(BenchError::InvalidOption {
            option: "--table-ix / --table-x / --table-v / --vgg5 / --lenet / --hybrid",
            value: "absent".into(),
            expected: "--table-ix (the block-size sweep), --table-x (AAC), --table-v (whole networks), --vgg5 (VGG5 at its shape), --lenet (private LeNet on MNIST) or --hybrid (LeNet-ReLU with ReLU in MPC)",
        });
    }
    let mut text = String::new();
    let mut json = serde_json::Map::new();
    // One study's report: its text after the others', its JSON under `key`.
    let mut add = |key: &str, value: serde_json::Value, rendered: String| {
        text += &rendered;
        json.insert(key.into(), value);
    };
    if a.table_ix {
        let t = table_ix()?;
        add("table_ix", json_value(&t), render(&t));
    }
    if a.table_x {
        let only = a.time.then_some(a.module.as_str());
        let t = crate::cnn_aac::table_x(only, threads(a))?;
        add("table_x", json_value(&t), crate::cnn_aac::render(&t));
    }
    if a.table_v {
        let t = crate::cnn_table_v::table_v()?;
        add("table_v", json_value(&t), crate::cnn_table_v::render(&t));
    }
    if a.vgg5 {
        let pts = crate::cnn_vgg::vgg5(a.time, a.vgg5_batch, threads(a))?;
        add("vgg5", json_value(&pts), crate::cnn_vgg::render(&pts));
    }
    if a.lenet {
        let pts = lenet(a)?;
        add("lenet", json_value(&pts), render_lenet(&pts));
    }
    if a.hybrid {
        let pts = hybrid(a)?;
        add("hybrid", json_value(&pts), render_hybrid(&pts));
    }
    if a.json {
        crate::to_json("the bench cnn report", &json)
    } else {
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `--lenet` table lays its columns out as one format string did: headings and cells
    /// right-aligned to their widths, the agreement as `agree/images`.
    #[test]
    fn the_lenet_table_keeps_its_layout() {
        let p = LenetPoint {
            batch: 8192,
            params: "p".into(),
            block: 4,
            images: 8192,
            server_s: 12.345,
            seconds_per_image: 0.0015,
            keys_s: 1.0,
            galois_keys: 37,
            key_bytes: 123_456_789,
            ct_bytes_per_image: 98_765.4,
            peak_rss: Some(18_500_000_000),
            agreement: 8190,
            correct: 8000,
            worst_logit_error: 3.2e-4,
            layers: vec![],
        };
        let want = format!(
            "{:>6} {:>3} {:>9} {:>9} {:>6} {:>9} {:>10} {:>9} {:>10} {:>10}\n\
             {:>6} {:>3} {:>9.2} {:>9.3} {:>6} {:>9.1} {:>10.2} {:>9} {:>6}/{:<3} {:>10.2e}\n",
            "batch",
            "S",
            "server s",
            "s/image",
            "keys",
            "key MB",
            "MB/image",
            "peak GB",
            "agree",
            "worst Δ",
            p.batch,
            p.block,
            p.server_s,
            p.seconds_per_image,
            p.galois_keys,
            p.key_bytes as f64 / 1e6,
            p.ct_bytes_per_image / 1e6,
            "18.50",
            p.agreement,
            p.images,
            p.worst_logit_error
        );
        let got = render_lenet(&[p]);
        assert!(got.contains(&want), "{got}\n---\n{want}");
    }
}
