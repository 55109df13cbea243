//! The shift machinery (Appendix A-A, Algorithms 5–8) and the restricted-`C` projection path on
//! real CKKS, against slot-level references.

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, PrecisionStats, C64};
use veil_core::packing::{ChannelMap, Mat};
use veil_core::params;
use veil_core::transformer::projection::{project, ProjConfig, ProjGroup};
use veil_core::transformer::shift::{align, phi_bank, phi_c, psi, psi_bank, rot_first, rotate_sum};
use veil_core::transformer::{CkksExec, Exec, SymExec};
use veil_tests::*;

const SLOTS: usize = 256;
const M: usize = 8;

fn psi_ref(x: &[C64], m: usize, segs: usize, tau: i64) -> Vec<C64> {
    (0..x.len())
        .map(|i| {
            let (c, r) = (i / m, i % m);
            if c < segs {
                x[c * m + ((r as i64 + tau).rem_euclid(m as i64)) as usize]
            } else {
                C64::default()
            }
        })
        .collect()
}

fn rot_first_ref(x: &[C64], len: usize, tau: i64) -> Vec<C64> {
    (0..x.len())
        .map(|i| {
            if i < len {
                x[((i as i64 + tau).rem_euclid(len as i64)) as usize]
            } else {
                C64::default()
            }
        })
        .collect()
}

#[test]
fn shifts_match_reference() {
    let p = params::insecure_logn12().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(11);
    let sk = ck.gen_secret_key(&mut rng);
    // Collect the rotations with a dry run of the same calls.
    let sym = SymExec::new(SLOTS);
    let sx = sym.fresh(5);
    let taus = [0i64, 1, -3, 5, 7];
    psi_bank(&sym, &sx, M, 20, &taus, C64::new(0.0, 1.0)).unwrap();
    psi(&sym, &sx, M, 32, 4, C64::real(1.0)).unwrap();
    rot_first(&sym, &sx, 20 * M, 13).unwrap();
    phi_c(&sym, &sx, M, 20, 3).unwrap();
    phi_c(&sym, &sx, M, 20, -7).unwrap();
    phi_bank(&sym, &sx, M, &[-2, 0, 5]).unwrap();
    align(&sym, &sx, M, 3, 1).unwrap();
    rotate_sum(&sym, sx, 10, 3 * M as i64).unwrap();
    let rots = sym.rotations_used();
    let keys = ck
        .gen_evaluation_keys(&sk, &rots, true, &mut rng, |_, _| {})
        .unwrap();
    let ex = CkksExec::new(&ck, &keys, SLOTS);
    let x = random_values(&mut rng, SLOTS, 1.0);
    let top = p.max_level();
    let ct = ck
        .encrypt_sk(
            &sk,
            &ck.encode(&x, SLOTS, top, p.default_scale()).unwrap(),
            &mut rng,
        )
        .unwrap();
    let dec = |c: &_| ck.decrypt_decode(&sk, c).unwrap();
    let chk = |name: &str, want: Vec<C64>, got: Vec<C64>| {
        let st = PrecisionStats::compute(&want, &got);
        println!("{name:<24} {st}");
        assert!(st.min_bits() > 20.0, "{name}");
    };
    let bank = psi_bank(&ex, &ct, M, 20, &taus, C64::new(0.0, 1.0)).unwrap();
    for (b, &t) in bank.iter().zip(&taus) {
        let want: Vec<C64> = psi_ref(&x, M, 20, t)
            .into_iter()
            .map(|z| z * C64::new(0.0, 1.0))
            .collect();
        chk(&format!("i*Psi^{t} (20 segs)"), want, dec(b));
    }
    chk(
        "Psi^4 (all segs)",
        psi_ref(&x, M, 32, 4),
        dec(&psi(&ex, &ct, M, 32, 4, C64::real(1.0)).unwrap()),
    );
    chk(
        "RotFirst_160(13)",
        rot_first_ref(&x, 160, 13),
        dec(&rot_first(&ex, &ct, 160, 13).unwrap()),
    );
    chk(
        "Phi_C^3 (C=20)",
        rot_first_ref(&x, 160, 24),
        dec(&phi_c(&ex, &ct, M, 20, 3).unwrap()),
    );
    chk(
        "Phi_C^-7 (C=20)",
        rot_first_ref(&x, 160, -56),
        dec(&phi_c(&ex, &ct, M, 20, -7).unwrap()),
    );
    for (b, d) in phi_bank(&ex, &ct, M, &[-2, 0, 5])
        .unwrap()
        .iter()
        .zip([-2i64, 0, 5])
    {
        chk(&format!("Phi^{d}"), rotate_left(&x, d * M as i64), dec(b));
    }
    chk(
        "Align_1 (H=3)",
        rot_first_ref(&x, 3 * M, 2 * M as i64),
        dec(&align(&ex, &ct, M, 3, 1).unwrap()),
    );
    let sum = rotate_sum(&ex, ck.clone_ct(&ct), 10, 3 * M as i64).unwrap();
    let want: Vec<C64> = (0..SLOTS)
        .map(|i| (0..10).fold(C64::default(), |a, k| a + x[(i + k * 3 * M) % SLOTS]))
        .collect();
    chk("rotate_sum R=10", want, dec(&sum));
    assert_eq!(ex.counts(), sym.counts());
}

#[test]
fn projection_restricted_c() {
    // C = 20 < N_seg = 32: Φ_C in two-rotation form with masks folded into the weights; complex
    // packed input (two blocks per ciphertext), paired output and real output in one call.
    let p = params::insecure_logn12().validate().unwrap();
    let ck = Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()));
    let mut rng = test_rng(12);
    let sk = ck.gen_secret_key(&mut rng);
    let (d_in, d_out, c) = (70usize, 45usize, 20usize);
    let in_map = ChannelMap::segment_column(d_in, M, c, true, |p| (p * 3) % d_in);
    let out_real = ChannelMap::segment_column(d_out, M, c, false, |p| d_out - 1 - p);
    let out_pair = ChannelMap::segment_column(d_out, M, c, true, |p| p);
    let vals = random_values(&mut rng, M * d_in + d_in * d_out, 1.0);
    let x = Mat::from_fn(M, d_in, |i, j| vals[i * d_in + j].re);
    let w = Mat::from_fn(d_in, d_out, |i, j| vals[M * d_in + i * d_out + j].im * 0.2);
    let wf = |i: usize, o: usize| C64::real(w.get(i, o));
    let groups = [
        ProjGroup {
            out: &out_real,
            weight: &wf,
            raw: false,
        },
        ProjGroup {
            out: &out_pair,
            weight: &wf,
            raw: false,
        },
    ];
    for n1 in [1usize, 4, 5, 20] {
        let cfg = ProjConfig { m: M, c, n1 };
        let sym = SymExec::new(SLOTS);
        let sx: Vec<_> = (0..in_map.cts).map(|_| sym.fresh(p.max_level())).collect();
        project(&sym, &cfg, &sx, &in_map, &groups).unwrap();
        let keys = ck
            .gen_evaluation_keys(&sk, &sym.rotations_used(), true, &mut rng, |_, _| {})
            .unwrap();
        let ex = CkksExec::new(&ck, &keys, SLOTS);
        let xc: Vec<_> = in_map
            .pack(&x, SLOTS)
            .iter()
            .map(|v| {
                let pt = ck
                    .encode(v, SLOTS, p.max_level(), p.default_scale())
                    .unwrap();
                ck.encrypt_sk(&sk, &pt, &mut rng).unwrap()
            })
            .collect();
        let outs = project(&ex, &cfg, &xc, &in_map, &groups).unwrap();
        let want = x.matmul(&w);
        for (g, map) in outs.iter().zip([&out_real, &out_pair]) {
            let dec: Vec<_> = g
                .iter()
                .map(|c| ck.decrypt_decode(&sk, c).unwrap())
                .collect();
            let got = map.unpack(&dec, d_out);
            let st = PrecisionStats::compute(
                &want.data.iter().map(|&v| C64::real(v)).collect::<Vec<_>>(),
                &got.data.iter().map(|&v| C64::real(v)).collect::<Vec<_>>(),
            );
            println!("n1={n1:<3} out cts {}  {st}", g.len());
            assert!(st.real.min_bits > 18.0);
        }
        assert_eq!(ex.counts(), sym.counts());
        println!("  counts {:?}", ex.counts());
    }
}

#[test]
fn backend_counts_confirm_kernel_counts() {
    // The score and value kernels on Ckks<CountingBackend<CpuBackend>>: every key switch the
    // executor counted is one key inner product at the backend, every hoisting group or plain key
    // switch one gadget decomposition, every non-lazy key switch two ModDowns (lazy giant steps
    // two per group), every rescale two.
    use veil_core::backend::CountingBackend;
    use veil_core::transformer::pipeline::{qkv_projection, score_kernel, value_kernel};
    use veil_core::transformer::{AttnPlan, AttnShape};
    let p = params::insecure_logn12().validate().unwrap();
    let be = Arc::new(CountingBackend::new(CpuBackend::fast(&p, 2).unwrap()));
    let ck = Ckks::new(be.clone());
    let mut rng = test_rng(13);
    let sk = ck.gen_secret_key(&mut rng);
    let shape = AttnShape {
        m: 8,
        d: 32,
        heads: 2,
        slots: 256,
    };
    let plan = AttnPlan::new(shape).unwrap();
    let z = Mat::zeros(32, 32);
    let top = p.max_level();
    let sym = SymExec::new(256);
    let sx: Vec<_> = (0..plan.x_map().cts).map(|_| sym.fresh(top)).collect();
    let (q, k, v) = qkv_projection(&sym, &plan, &sx, &z, &z, &z).unwrap();
    score_kernel(&sym, &plan, &q, &k).unwrap();
    let sp: Vec<_> = (0..plan.p_cts).map(|_| sym.fresh(top)).collect();
    value_kernel(&sym, &plan, &sp, &v).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, &sym.rotations_used(), true, &mut rng, |_, _| {})
        .unwrap();
    let enc = |n: usize, rng: &mut _| -> Vec<_> {
        (0..n)
            .map(|_| {
                let v = random_values(rng, 256, 0.5);
                let pt = ck.encode(&v, 256, top, p.default_scale()).unwrap();
                ck.encrypt_sk(&sk, &pt, rng).unwrap()
            })
            .collect()
    };
    let x = enc(plan.x_map().cts, &mut rng);
    let pc = enc(plan.p_cts, &mut rng);
    let ex = CkksExec::new(&ck, &keys, 256);
    let b0 = be.counts();
    let (q, k, v) = qkv_projection(&ex, &plan, &x, &z, &z, &z).unwrap();
    score_kernel(&ex, &plan, &q, &k).unwrap();
    value_kernel(&ex, &plan, &pc, &v).unwrap();
    let b = be.counts();
    let c = ex.counts();
    assert_eq!(c, sym.counts());
    println!("kernel {c:?}\nbackend {b:?} (before: {b0:?})");
    let ks = c.key_switches();
    assert_eq!(b.key_inner_product - b0.key_inner_product, ks);
    assert_eq!(
        b.decompose - b0.decompose,
        c.hoists + c.conjugations + c.relins
    );
    // Lazy giant-step rotations share one ModDown pair per group.
    assert!(c.lazy_rotations > c.lazy_groups);
    assert_eq!(
        b.mod_down - b0.mod_down,
        2 * (ks - c.lazy_rotations + c.lazy_groups)
    );
    assert_eq!(b.rescale - b0.rescale, 2 * c.rescales);
}
