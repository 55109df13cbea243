//! The in-memory measurements of `veil-bench convert`: one C2M → M2C round trip per packing, and
//! the Ring2Field comparison, both parties in this process on [`harness::run_pair`].

use super::R2fReport;
use crate::error::{core, mpc, protocol};
use crate::BenchError;
use rand_core::RngCore;
use std::time::{Duration, Instant};
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ciphertext, Ckks, EvaluationKeys, PublicKey, SecretKey};
use veil_core::convert::{
    c2m_p0, c2m_p1, complexify, decomplexify, m2c_p0, m2c_p1, C2mPlan, ComplexShares, M2cPlan,
    RunStats, K_BITS,
};
use veil_core::mpc::{Modulus, MpcConfig, Party, PartyId, RingShares};
use veil_host::harness::{self, Link};
use veil_host::mpc::drive;
use veil_host::transport::{Transport, TransportConfig};

/// The transport settings of every conversion run: long receives (key generation and the
/// N = 2^16 maps take seconds) and frames up to 1 GiB.
pub(super) const CONVERT_TRANSPORT: TransportConfig = TransportConfig {
    timeout: Duration::from_secs(600),
    max_frame: 1 << 30,
};

/// An MPC party with the EncFormer ring, seeded from the OS.
pub(super) fn party(id: PartyId) -> Result<Party<veil_host::SecretRng>, BenchError> {
    Party::new(id, MpcConfig::ENCFORMER, veil_host::os_rng()).map_err(mpc("build a party"))
}

/// The keys of an in-memory run: P0's secret key, P1's public key and evaluation keys.
pub(super) struct Roles<'a> {
    pub(super) ck: &'a Ckks<CpuBackend>,
    pub(super) sk: &'a SecretKey,
    pub(super) pk: &'a PublicKey<CpuBackend>,
    pub(super) keys: &'a EvaluationKeys<CpuBackend>,
}

/// What one in-memory round trip measured.
pub(super) struct Measured {
    pub(super) c2m: RunStats,
    pub(super) m2c: RunStats,
    /// P1's wall time of C2M and of M2C (in memory).
    pub(super) c2m_s: f64,
    pub(super) m2c_s: f64,
    pub(super) c2m_cts: usize,
    pub(super) compute_s: f64,
    pub(super) wrapper_s: f64,
    pub(super) max_err_ulp: f64,
}

/// Real mode: C2M (a real-only plan) yields one `[[x]]` per ciphertext, M2C gets
/// real-only inputs. Complex mode: unchanged.
fn reshape(sh: Vec<ComplexShares>, complex: bool) -> Vec<ComplexShares> {
    if complex {
        sh
    } else {
        sh.into_iter()
            .map(|c| ComplexShares {
                re: c.re,
                im: RingShares::default(),
            })
            .collect()
    }
}

/// Encrypts `xs`, `ys` (one ciphertext each; complexified into one in complex mode) and runs
/// C2M then M2C between P0 (secret key) and P1 (public key), in memory.
pub(super) fn measure(
    roles: &Roles<'_>,
    c2m: &C2mPlan,
    m2c: &M2cPlan,
    xs: &[f64],
    ys: &[f64],
    complex: bool,
) -> Result<Measured, BenchError> {
    let Roles { ck, sk, pk, keys } = *roles;
    let p = ck.params();
    let (n, top) = (c2m.slots(), p.max_level());
    let mut r = veil_host::os_rng();
    let mut enc = |v: &[f64]| -> Result<Ciphertext<CpuBackend>, BenchError> {
        let pt = ck
            .encode_real(v, n, top, c2m.scale())
            .map_err(core("encode"))?;
        ck.encrypt_sk(sk, &pt, &mut r).map_err(core("encrypt"))
    };
    let cx = enc(xs)?;
    let cy = enc(ys)?;
    let t0 = Instant::now();
    let mut wrapper = Duration::ZERO;
    let cts = if complex {
        let w = Instant::now();
        let z = complexify(ck, &cx, &cy).map_err(core("complexify"))?;
        wrapper += w.elapsed();
        vec![z]
    } else {
        vec![cx, cy]
    };
    let count = cts.len();
    type Out1 = (Vec<Ciphertext<CpuBackend>>, RunStats, RunStats, f64, f64);
    let (o0, o1) = harness::run_pair(
        Link::Memory,
        CONVERT_TRANSPORT,
        |t: &mut dyn Transport| -> Result<(), BenchError> {
            let mut p0 = party(PartyId::P0)?;
            drive(p0.channel(), p0.setup(), t).map_err(protocol("setup"))?;
            let (sh, _) = drive(p0.channel(), c2m_p0(&mut p0, ck, sk, c2m, count), t)
                .map_err(protocol("C2M"))?;
            let sh = reshape(sh, complex);
            drive(p0.channel(), m2c_p0(&mut p0, ck, sk, m2c, &sh), t).map_err(protocol("M2C"))?;
            Ok(())
        },
        |t: &mut dyn Transport| -> Result<Out1, BenchError> {
            let mut p1 = party(PartyId::P1)?;
            drive(p1.channel(), p1.setup(), t).map_err(protocol("setup"))?;
            let c = Instant::now();
            let (sh, a) = drive(p1.channel(), c2m_p1(&mut p1, ck, pk, c2m, &cts), t)
                .map_err(protocol("C2M"))?;
            let c2m_s = c.elapsed().as_secs_f64();
            let c = Instant::now();
            let sh = reshape(sh, complex);
            let (out, b) =
                drive(p1.channel(), m2c_p1(&mut p1, ck, m2c, &sh), t).map_err(protocol("M2C"))?;
            Ok((out, a, b, c2m_s, c.elapsed().as_secs_f64()))
        },
    )?;
    o0?;
    let (out, c2m_st, m2c_st, c2m_s, m2c_s) = o1?;
    let (ox, oy) = if complex {
        let w = Instant::now();
        let pair = decomplexify(ck, &out[0], keys).map_err(core("decomplexify"))?;
        wrapper += w.elapsed();
        pair
    } else {
        let mut it = out.into_iter();
        match (it.next(), it.next()) {
            (Some(a), Some(b)) => (a, b),
            _ => {
                return Err(BenchError::Mismatch {
                    what: "M2C output ciphertexts",
                    expected: 2,
                    found: 0,
                })
            }
        }
    };
    let compute_s = t0.elapsed().as_secs_f64();
    let f = (1u64 << MpcConfig::ENCFORMER.ring.frac) as f64;
    let dx = ck.decrypt_decode(sk, &ox).map_err(core("decrypt"))?;
    let dy = ck.decrypt_decode(sk, &oy).map_err(core("decrypt"))?;
    let mut worst = 0f64;
    for k in 0..n {
        worst = worst
            .max((dx[k].re - xs[k]).abs() * f)
            .max((dy[k].re - ys[k]).abs() * f);
    }
    Ok(Measured {
        c2m: c2m_st,
        m2c: m2c_st,
        c2m_s,
        m2c_s,
        c2m_cts: count,
        compute_s,
        wrapper_s: wrapper.as_secs_f64(),
        max_err_ulp: worst,
    })
}

/// Ring2Field of `values` elements into `Z_{2^K}` with both protocols (in memory).
pub(super) fn r2f_costs(values: usize, log_bound: u32) -> Result<R2fReport, BenchError> {
    let q = Modulus::new(1u128 << K_BITS).map_err(mpc("the Z_2^K modulus"))?;
    let ring = MpcConfig::ENCFORMER.ring;
    let mut r = veil_host::os_rng();
    // Shares of zero: the cost does not depend on the values.
    let x0: Vec<u64> = (0..values).map(|_| r.next_u64() & ring.mask()).collect();
    let x1: Vec<u64> = x0.iter().map(|&v| ring.sub(0, v)).collect();
    let one =
        |id: PartyId, x: Vec<u64>, t: &mut dyn Transport| -> Result<[(u64, u32); 2], BenchError> {
            let mut p = party(id)?;
            drive(p.channel(), p.setup(), t).map_err(protocol("setup"))?;
            let ch = p.channel();
            let x = RingShares::new(x);
            // Depths restart with every session: each run's depth is its round count.
            let s0 = ch.stats();
            drive(ch.clone(), p.ring_to_field(&x, &q), t).map_err(protocol("Ring2Field"))?;
            let (s1, d1) = (ch.stats(), ch.depth());
            drive(ch.clone(), p.ring_to_field_known_msb(&x, &q, log_bound), t)
                .map_err(protocol("Ring2Field (known MSB)"))?;
            let (s2, d2) = (ch.stats(), ch.depth());
            let b = |a: &veil_core::mpc::Stats, e: &veil_core::mpc::Stats| {
                let d = a.since(e).offline_online();
                d.bytes_sent + d.bytes_recv
            };
            Ok([(b(&s1, &s0), d1), (b(&s2, &s1), d2)])
        };
    let (_, a) = harness::run_pair(
        Link::Memory,
        CONVERT_TRANSPORT,
        |t| one(PartyId::P0, x0, t),
        |t| one(PartyId::P1, x1, t),
    )?;
    let [(cb, cr), (kb, kr)] = a?;
    Ok(R2fReport {
        values,
        comparison_bytes: cb,
        comparison_rounds: cr,
        known_msb_bytes: kb,
        known_msb_rounds: kr,
    })
}
