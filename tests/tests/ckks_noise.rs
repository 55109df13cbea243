//! Every source of CKKS noise against its expected bound: key switching (relinearization and
//! rotation), public-key encryption, rescale rounding and encoding rounding. The encryption,
//! rescale and encoding bounds are stated where they are tested, below the key-switching ones.
//!
//! # Key switching
//!
//! The noise of one hybrid key switch is measured *exactly*, in coefficient units, as the
//! difference of two decrypted phases that agree except for that key switch:
//!
//! * relinearization: `Dec(relin(d)) − Dec(d)` for a degree-2 product `d = (d_0, d_1, d_2)`
//!   (`Dec` of a degree-2 ciphertext is `d_0 + d_1·s + d_2·s²`);
//! * rotation: `Dec(rotate(ct, 1)) − σ_5(Dec(ct))`.
//!
//! Both differences are computed mod `q_0` (60 bits) and centered, which is exact since the noise
//! is far below `q_0/2`.
//!
//! # The bound (Han–Ki 2020; Kim–Polyakov–Zucca 2021)
//!
//! Switching `c` (level `ℓ`, `Q_ℓ = q_0⋯q_ℓ`) with a key `(b_j, a_j) = (−a_j·s + e_j + P·g_j·s', a_j)`
//! over `β = ⌈(ℓ+1)/α⌉` digits `Q_j` (`α_j ≤ α` primes each) and the level's special modulus
//! `P = p_0⋯p_{k−1}` (`k = special_at(ℓ)`: the key switch at level `ℓ` divides by the first
//! `k` special primes only, and multiplies `c` by `(P_all/P)^{-1}` first): ModUp gives `d̃_j = [c]_{Q_j} + u_j·Q_j`, `0 ≤ d̃_j < α_j·Q_j`; the inner
//! product has phase `P·c·s' + Σ_j d̃_j·e_j (mod P·Q_ℓ)`; ModDown divides both polynomials by
//! `P`, each with an error `r ∈ [−1/2 − (k−1), 1/2)` per coefficient (rounding plus the fast
//! conversion's `−u`, `0 ≤ u < k`). So, exactly,
//!
//! `e_ks = P^{-1}·Σ_j d̃_j·e_j + r_0 + r_1·s`,
//!
//! and with `‖e_j‖_∞ ≤ 6σ` (the sampler's tail cut), `h` = Hamming weight of `s`:
//!
//! * worst case: `‖e_ks‖_∞ ≤ B_wc = N·6σ·Σ_j α_j·Q_j / P + (k − 1/2)·(1 + h)`;
//! * average case (central limit, each coefficient a sum of independent terms; `E[d̃_j²] ≤
//!   (α_j·Q_j)²/3`, `E[r²] ≤ k²/4 + 1/12`): standard deviation
//!   `ς² = N·σ²·Σ_j (α_j·Q_j)²/(3·P²) + (1 + h)·(k²/4 + 1/12)`, and `‖e_ks‖_∞ ≤ B_avg = 6ς`
//!   with overwhelming probability over `N ≤ 2^16` coefficients.
//!
//! For the named sets the key-switch term `N·6σ·Σ α_j·Q_j / P` is below 1 (`P` exceeds every
//! digit by ≥ 20 bits): the noise is the ModDown rounding `r_0 + r_1·s`, of order
//! `sqrt(h)·k/2`. Computed (and printed) for the named sets, at N = 2^14 / 2^15 / 2^16, every
//! level: `log2 B_wc ≈ 14.0 / 15.7 / 17.2`, `log2 B_avg ≈ 9.4 / 10.4 / 11.3`; measured
//! `log2 max|e_ks| ≈ 7.4–7.6 / 8.2–8.5 / 9.0–9.1` (relinearization and rotation alike).
//!
//! ModDown's rounding is centred (`DivRoundPlan` adds `floor(k·P/2)` rather than `floor(P/2)`,
//! which offsets the fast conversion's overshoot `u ∈ [0, k)`), so the coefficient mean of the
//! key-switch noise (printed) is ≈ 0. With the textbook offset it was `≈ −(k−1)/2`, and `r_1·s`
//! then carried a low-frequency polynomial that cost the worst rotated slot 1–3 bits
//! (max|e| was 2^9.6–2^9.8 at 2^16, rms 218; now 2^9.0, rms 121).

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::backend::{Basis, Domain, PolyBackend};
use veil_core::ckks::{Ckks, Plaintext, SecretKey};
use veil_core::math::sampling::{SIGMA, TAIL_SIGMAS};
use veil_core::params;
use veil_core::CkksParams;
use veil_tests::*;

/// The two bounds of the module documentation for one key switch at `level`.
struct KsBound {
    worst: f64,
    avg: f64,
    ks_term: f64,
}

fn ks_bound(p: &CkksParams, level: usize, h: usize) -> KsBound {
    let n = p.n() as f64;
    // The level's special primes (`P_level`, fewer than k below the first full digit).
    let kl = p.special_at(level);
    let k = kl as f64;
    let alpha = p.alpha();
    let pp: f64 = p.p()[..kl].iter().map(|m| m.value() as f64).product();
    let (mut ks_wc, mut ks_var) = (0.0, 0.0);
    for j in 0..p.digits_at(level) {
        let (s, e) = (j * alpha, ((j + 1) * alpha).min(level + 1));
        let qj: f64 = p.q()[s..e].iter().map(|m| m.value() as f64).product();
        let aq = (e - s) as f64 * qj / pp;
        ks_wc += n * TAIL_SIGMAS * SIGMA * aq;
        ks_var += n * SIGMA * SIGMA * aq * aq / 3.0;
    }
    let h = h as f64;
    let rd_wc = (k - 0.5) * (1.0 + h);
    let rd_var = (1.0 + h) * (k * k / 4.0 + 1.0 / 12.0);
    KsBound {
        worst: ks_wc + rd_wc,
        avg: 6.0 * (ks_var + rd_var).sqrt(),
        ks_term: ks_wc,
    }
}

/// `a − b` over `q_0`, back in the coefficient domain, centered: exact small integers.
fn centered_diff<B: PolyBackend>(ck: &Ckks<B>, a: &B::Buffer, b: &B::Buffer) -> Vec<i64> {
    let be = ck.backend();
    let n = ck.params().n();
    let q0 = ck.params().q()[0];
    let (mut x, mut y) = (vec![0u64; n], vec![0u64; n]);
    be.download(a, &mut x).unwrap();
    be.download(b, &mut y).unwrap();
    let d: Vec<u64> = x.iter().zip(&y).map(|(&u, &v)| q0.sub(u, v)).collect();
    let mut buf = be.upload(&d);
    be.intt(&mut buf, Basis::q(1));
    be.download(&buf, &mut x).unwrap();
    x.iter().map(|&v| q0.center(v)).collect()
}

struct Measured {
    max: f64,
    rms: f64,
    mean: f64,
}

fn stats(e: &[i64]) -> Measured {
    stats_f64(&e.iter().map(|&v| v as f64).collect::<Vec<_>>())
}

fn stats_f64(e: &[f64]) -> Measured {
    let n = e.len() as f64;
    Measured {
        max: e.iter().fold(0.0, |a, &v| a.max(v.abs())),
        rms: (e.iter().map(|v| v * v).sum::<f64>() / n).sqrt(),
        mean: e.iter().sum::<f64>() / n,
    }
}

fn report(p: &CkksParams, what: &str, level: usize, m: &Measured, bd: &KsBound) {
    println!(
        "[logN={} {:<6} level {:>2}] max|e| = {:>6} (log2 {:>5.2}), rms {:>7.2}, mean {:>6.2} | \
         B_avg = {:>8.1} (log2 {:>5.2}), B_wc = {:>9.1} (log2 {:>5.2}), key-switch term {:.2e}",
        p.log_n(),
        what,
        level,
        m.max,
        m.max.log2(),
        m.rms,
        m.mean,
        bd.avg,
        bd.avg.log2(),
        bd.worst,
        bd.worst.log2(),
        bd.ks_term
    );
    assert!(
        m.max > 0.0,
        "{what}: a key switch without noise is not a key switch"
    );
    assert!(
        m.max <= bd.avg,
        "{what} at level {level}: measured {} above the average-case bound {}",
        m.max,
        bd.avg
    );
    assert!(m.max <= bd.worst);
}

fn phase<B: PolyBackend>(
    ck: &Ckks<B>,
    sk: &SecretKey,
    ct: &veil_core::ckks::Ciphertext<B>,
) -> Plaintext<B> {
    ck.decrypt(sk, ct).unwrap()
}

fn run(p: CkksParams) {
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(0x4015E + p.log_n() as u64);
    let sk = ck.gen_secret_key(&mut rng);
    let h = sk.hamming_weight();
    let keys = ck
        .gen_evaluation_keys(&sk, &[1], false, &mut rng, |_, _| {})
        .unwrap();
    let g = ck.encoder().galois_element_for_rotation(1);
    let (top, slots, scale) = (p.max_level(), p.max_slots(), p.default_scale());
    println!(
        "[{}] N = 2^{}, k = {} special primes (log2 P = {:.1}), dnum = {}, alpha = {}, h = {h}",
        p.name(),
        p.log_n(),
        p.p().len(),
        p.log_p(),
        p.dnum(),
        p.alpha()
    );
    let x = random_values(&mut rng, slots, 1.0);
    let y = random_values(&mut rng, slots, 1.0);
    let cx0 = ck
        .encrypt_sk(&sk, &ck.encode(&x, slots, top, scale).unwrap(), &mut rng)
        .unwrap();
    let cy0 = ck
        .encrypt_sk(&sk, &ck.encode(&y, slots, top, scale).unwrap(), &mut rng)
        .unwrap();
    // Level 1 and 0 run with fewer special primes than the top on the sets at 2^15 and 2^16.
    let mut levels = vec![top, top / 2, 1, 0];
    levels.dedup();
    for level in levels {
        let (mut cx, mut cy) = (ck.clone_ct(&cx0), ck.clone_ct(&cy0));
        ck.drop_level_assign(&mut cx, level).unwrap();
        ck.drop_level_assign(&mut cy, level).unwrap();
        let bd = ks_bound(&p, level, h);
        println!(
            "[logN={} level {level:>2}] {} of {} special primes",
            p.log_n(),
            p.special_at(level),
            p.p().len()
        );

        // Relinearization.
        let d = ck.mul_no_relin(&cx, &cy).unwrap();
        let mut r = ck.clone_ct(&d);
        ck.relinearize_assign(&mut r, &keys).unwrap();
        let e = centered_diff(&ck, phase(&ck, &sk, &r).poly(), phase(&ck, &sk, &d).poly());
        report(&p, "relin", level, &stats(&e), &bd);

        // Rotation by one slot.
        let rot = ck.rotate(&cx, 1, &keys).unwrap();
        let px = phase(&ck, &sk, &cx);
        let mut sx = ck.backend().alloc(level + 1);
        ck.backend()
            .automorphism(px.poly(), g, &mut sx, Basis::q(level + 1), Domain::Ntt);
        let e = centered_diff(&ck, phase(&ck, &sk, &rot).poly(), &sx);
        report(&p, "rotate", level, &stats(&e), &bd);
    }
}

/// The phase of `buf` (NTT over at least `q_0`) on `q_0`, in the coefficient domain, centered.
fn centered<B: PolyBackend>(ck: &Ckks<B>, buf: &B::Buffer) -> Vec<i64> {
    let zero = ck.backend().alloc(ck.backend().buffer_rows(buf));
    centered_diff(ck, buf, &zero)
}

/// Asserts a measured noise `m` (coefficient units) against a worst-case bound and an average-case
/// standard deviation `sd` (`max ≤ 6·sd`, and `rms` within 20 % of `sd`, so that a noise larger or
/// smaller than the model, such as an encryption that skips the extended basis, fails).
fn check_model(p: &CkksParams, what: &str, m: &Measured, worst: f64, sd: f64) {
    println!(
        "[logN={} {what:<22}] max|e| = {:>8.2} (log2 {:>5.2}), rms {:>7.2}, mean {:>6.2} | \
         model sd {:>7.2}, 6·sd = {:>8.1} (log2 {:>5.2}), worst case {:>9.1} (log2 {:>5.2})",
        p.log_n(),
        m.max,
        m.max.log2(),
        m.rms,
        m.mean,
        sd,
        6.0 * sd,
        (6.0 * sd).log2(),
        worst,
        worst.log2()
    );
    assert!(m.max > 0.0, "{what}: no noise at all");
    assert!(
        m.max <= 6.0 * sd,
        "{what}: max {} above 6·sd = {}",
        m.max,
        6.0 * sd
    );
    assert!(
        m.max <= worst,
        "{what}: max {} above the worst case {worst}",
        m.max
    );
    assert!(
        (0.8 * sd..=1.2 * sd).contains(&m.rms),
        "{what}: rms {} is not the model's {sd} (±20 %)",
        m.rms
    );
}

/// Public-key encryption, rescale and encoding against their bounds.
///
/// * **Public-key encryption** (in `Q_ℓ ∪ {p_0}`, then ModDown by `p_0`): `Dec(ct) − m =
///   (e·u + e_0 + e_1·s)/p_0 + r_0 + r_1·s`, `|r_i| ≤ 1/2` (one dropped prime: exact rounding).
///   The first term is below `N·6σ·(1 + 2·h)/p_0 ≪ 1`. Worst case `(1 + h)/2 + 1`; average case
///   `ς² = (1 + h)/12`. Encrypting over `Q` directly would give `ς ≈ σ·√(2h + 1)`, about 30× more.
/// * **Rescale** by `q_ℓ`: `Dec(rescale(ct)) − Dec(ct)/q_ℓ = r_0 + r_1·s` with the same
///   rounding bounds (`DivRoundPlan` with one dropped prime is exact).
/// * **Encoding**: each coefficient is rounded to an integer (`|ε_i| ≤ 1/2`), so the real part
///   of each slot's error is `Σ_i ε_i·cos(θ_ij)/Δ`: worst case `N/(2Δ)`, average case
///   `ς² = N/(24·Δ²)`.
fn run_fresh(p: CkksParams) {
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(0xF7E5 + p.log_n() as u64);
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).unwrap();
    let h = sk.hamming_weight() as f64;
    let (top, slots, scale) = (p.max_level(), p.max_slots(), p.default_scale());
    let n = p.n() as f64;
    let x = random_values(&mut rng, slots, 1.0);
    let rounding_sd = ((1.0 + h) / 12.0).sqrt();
    let rounding_worst = (1.0 + h) / 2.0 + 1.0;

    for level in [top, top / 2] {
        let pt = ck.encode(&x, slots, level, scale).unwrap();
        let ct = ck.encrypt_pk(&pk, &pt, &mut rng).unwrap();
        let e = centered_diff(&ck, phase(&ck, &sk, &ct).poly(), pt.poly());
        check_model(
            &p,
            &format!("encrypt_pk level {level}"),
            &stats(&e),
            rounding_worst,
            rounding_sd,
        );
        if level >= 1 {
            let before = centered(&ck, phase(&ck, &sk, &ct).poly());
            let mut r = ck.clone_ct(&ct);
            ck.rescale_assign(&mut r).unwrap();
            let after = centered(&ck, phase(&ck, &sk, &r).poly());
            let ql = p.q()[level].value() as f64;
            let err: Vec<f64> = after
                .iter()
                .zip(&before)
                .map(|(&w, &v)| w as f64 - v as f64 / ql)
                .collect();
            check_model(
                &p,
                &format!("rescale level {level}"),
                &stats_f64(&err),
                rounding_worst,
                rounding_sd,
            );
        }
    }

    let got = ck
        .decode(&ck.encode(&x, slots, top, scale).unwrap())
        .unwrap();
    let err: Vec<f64> = got
        .iter()
        .zip(&x)
        .map(|(g, w)| (g.re - w.re) * scale)
        .collect();
    check_model(
        &p,
        "encode (slots × Δ)",
        &stats_f64(&err),
        n / 2.0,
        (n / 24.0).sqrt(),
    );
}

#[test]
fn fresh_rescale_encode_noise_logn14() {
    run_fresh(params::ckks_128_logn14().validate().unwrap());
}

#[test]
fn fresh_rescale_encode_noise_logn16() {
    run_fresh(params::ckks_128_logn16().validate().unwrap());
}

#[test]
fn key_switch_noise_logn14() {
    run(params::ckks_128_logn14().validate().unwrap());
}

#[test]
fn key_switch_noise_logn15() {
    run(params::ckks_128_logn15().validate().unwrap());
}

#[test]
fn key_switch_noise_logn16() {
    run(params::ckks_128_logn16().validate().unwrap());
}
