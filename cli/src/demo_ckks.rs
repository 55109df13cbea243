//! `veil demo-ckks` (the CKKS smoke demo, formerly `veil demo`): encrypt a vector, compute on it
//! under encryption, decrypt, and print precision and timings. The computation is a weighted sum
//! (ct×pt, then a rotate-and-add reduction over all slots) and a cubic polynomial
//! `0.5·x³ − x² + 0.25` (two ct×ct products with relinearization and rescaling), checked slot by
//! slot against the same computation in `f64`.

use std::sync::Arc;
use std::time::Instant;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, PrecisionStats, C64};
use veil_core::params;

/// Options of `veil demo-ckks`.
#[derive(Clone, Debug, clap::Args)]
pub struct DemoOptions {
    /// log2 N: 14, 15 or 16 (128-bit named sets).
    #[arg(long, default_value_t = 14)]
    pub logn: u32,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// Why the CKKS demo failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoCkksError {
    /// `--logn` is not 14, 15 or 16.
    LogN(u32),
    /// A CKKS call failed.
    Ckks(veil_core::Error),
    /// The CPU backend could not be built.
    Backend(String),
    /// The decrypted result is less precise than the demo requires.
    Precision {
        /// Measured bits.
        bits: f64,
        /// Required bits.
        min_bits: f64,
    },
}

impl std::fmt::Display for DemoCkksError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemoCkksError::LogN(v) => write!(f, "--logn {v}: expected 14, 15 or 16"),
            DemoCkksError::Ckks(e) => write!(f, "CKKS: {e}"),
            DemoCkksError::Backend(e) => write!(f, "CPU backend: {e}"),
            DemoCkksError::Precision { bits, min_bits } => write!(
                f,
                "precision {bits:.1} bits is below the demo's floor of {min_bits} bits"
            ),
        }
    }
}

impl std::error::Error for DemoCkksError {}

fn step(label: &str, t: Instant, prec: Option<PrecisionStats>) {
    let ms = t.elapsed().as_secs_f64() * 1e3;
    match prec {
        Some(p) => println!("  {label:<44} {ms:>9.2} ms   {p}"),
        None => println!("  {label:<44} {ms:>9.2} ms"),
    }
}

/// Runs the demo and returns the worst precision (bits) over the checked outputs.
pub fn run(opts: &DemoOptions) -> Result<f64, DemoCkksError> {
    let e = DemoCkksError::Ckks;
    let lit = match opts.logn {
        14 => params::ckks_128_logn14(),
        15 => params::ckks_128_logn15(),
        16 => params::ckks_128_logn16(),
        v => return Err(DemoCkksError::LogN(v)),
    };
    let p = lit.validate().map_err(e)?;
    let be =
        CpuBackend::fast(&p, opts.threads).map_err(|x| DemoCkksError::Backend(x.to_string()))?;
    println!(
        "Veil CKKS demo — {} (N = 2^{}, {} levels, log2 QP = {:.0}, 128-bit), backend {}",
        p.name(),
        p.log_n(),
        p.max_level(),
        p.log_qp(),
        {
            use veil_core::PolyBackend;
            be.name()
        }
    );
    let ck = Ckks::new(Arc::new(be));
    let mut rng = veil_host::os_rng();
    let slots = p.max_slots();
    let top = p.max_level();
    let scale = p.default_scale();

    let t = Instant::now();
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).map_err(e)?;
    let rotations: Vec<i64> = (0..slots.trailing_zeros()).map(|i| 1i64 << i).collect();
    let bar = indicatif::ProgressBar::new(rotations.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("  keygen [{elapsed_precise}] {pos}/{len} keys")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let keys = ck
        .gen_evaluation_keys(&sk, &rotations, false, &mut rng, |d, n| {
            bar.set_length(n as u64);
            bar.set_position(d as u64);
        })
        .map_err(e)?;
    bar.finish_and_clear();
    step(
        &format!("keygen (sk, pk, relin, {} rotation keys)", rotations.len()),
        t,
        None,
    );

    // A private input: x_i in [-1, 1] (random), public weights w_i.
    let x: Vec<f64> = {
        use rand_core::RngCore;
        (0..slots)
            .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
            .collect()
    };
    let w: Vec<f64> = (0..slots)
        .map(|i| ((i as f64) * 0.001).cos() / slots as f64)
        .collect();
    let xc: Vec<C64> = x.iter().map(|&v| C64::real(v)).collect();

    let t = Instant::now();
    let pt = ck.encode(&xc, slots, top, scale).map_err(e)?;
    let ct = ck.encrypt_pk(&pk, &pt, &mut rng).map_err(e)?;
    step(&format!("encode + encrypt {slots} slots"), t, None);

    // Weighted sum: <x, w> in every slot.
    let t = Instant::now();
    let pw = ck
        .encode_real(&w, slots, top, ck.rescale_prime(top))
        .map_err(e)?;
    let mut acc = ck.mul_plain(&ct, &pw).map_err(e)?;
    ck.rescale_assign(&mut acc).map_err(e)?;
    for &r in &rotations {
        let rotated = ck.rotate(&acc, r, &keys).map_err(e)?;
        ck.add_assign(&mut acc, &rotated).map_err(e)?;
    }
    let dot: f64 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
    let got = ck.decrypt_decode(&sk, &acc).map_err(e)?;
    let p1 = PrecisionStats::compute(&vec![C64::real(dot); slots], &got);
    step(
        &format!("weighted sum (ct*pt, {} rotations)", rotations.len()),
        t,
        Some(p1),
    );
    println!("    <x, w> = {dot:.9}  decrypted slot 0 = {:.9}", got[0].re);

    // Cubic polynomial: 0.5·x³ − x² + 0.25.
    let t = Instant::now();
    let mut x2 = ck.mul_relin(&ct, &ct, &keys).map_err(e)?;
    ck.rescale_assign(&mut x2).map_err(e)?;
    let mut xh = ck.clone_ct(&ct);
    ck.mul_const_assign(&mut xh, C64::real(0.5), ck.rescale_prime(top))
        .map_err(e)?;
    ck.rescale_assign(&mut xh).map_err(e)?;
    let mut x3 = ck.mul_relin(&x2, &xh, &keys).map_err(e)?;
    ck.rescale_assign(&mut x3).map_err(e)?;
    let mut x2l = ck.clone_ct(&x2);
    ck.drop_level_assign(&mut x2l, x3.level()).map_err(e)?;
    x2l.set_scale(x3.scale()); // scales agree to ~2^-20 relative; the bookkeeping is aligned
    ck.sub_assign(&mut x3, &x2l).map_err(e)?;
    ck.add_const_assign(&mut x3, C64::real(0.25)).map_err(e)?;
    let want: Vec<C64> = x
        .iter()
        .map(|&v| C64::real(0.5 * v * v * v - v * v + 0.25))
        .collect();
    let got = ck.decrypt_decode(&sk, &x3).map_err(e)?;
    let p2 = PrecisionStats::compute(&want, &got);
    step("0.5·x³ − x² + 0.25 (2 ct*ct, depth 2)", t, Some(p2));
    println!(
        "    x_0 = {:.6}: f(x_0) = {:.9}, decrypted {:.9}",
        x[0], want[0].re, got[0].re
    );
    let worst = p1.real.min_bits.min(p2.real.min_bits);
    println!("worst precision over all slots: {worst:.1} bits");
    if worst < 10.0 {
        return Err(DemoCkksError::Precision {
            bits: worst,
            min_bits: 10.0,
        });
    }
    Ok(worst)
}
