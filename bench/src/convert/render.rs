//! The text tables of `veil-bench convert`.

use super::{ModeReport, NetLatency, Report};

/// Human-readable tables.
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "CKKS<->MPC conversion of two real vectors  {}  N=2^{} slots={} depth={} threads={} boundary level={} (C2M twiddles {:.0} bits, failure 2^{:.1}/ct)",
        r.params, r.log_n, r.slots, r.depth, r.threads, r.boundary_level, r.c2m_twiddle_bits, r.c2m_failure_log2
    );
    let _ = writeln!(
        s,
        "  {:<13} {:>4} {:>5} {:>10} {:>10} {:>7} {:>9} {:>9} {:>8}  latency LAN/WAN1/WAN2/WAN3 (s)",
        "mode",
        "run",
        "cts",
        "ct MB",
        "MPC MB",
        "rounds",
        "compute",
        "wrappers",
        "err ulp",
    );
    for m in &r.modes {
        let lat: Vec<String> = m
            .latency
            .iter()
            .map(|l| format!("{:.2}", l.total_s))
            .collect();
        let _ = writeln!(
            s,
            "  {:<13} {:>4} {:>2}+{:<2} {:>10.2} {:>10.2} {:>7} {:>8.2}s {:>8.3}s {:>8.3}  {}",
            m.mode,
            if m.measured { "yes" } else { "est" },
            m.c2m_ciphertexts,
            m.m2c_ciphertexts,
            m.ciphertext_bytes as f64 / 1e6,
            m.mpc_bytes as f64 / 1e6,
            m.rounds,
            m.compute_s,
            m.wrapper_s,
            m.max_err_ulp,
            lat.join(" / ")
        );
    }
    let _ = writeln!(
        s,
        "  paper (Table VII) ciphertext MB per pair: real {:.2}, complex {:.2}, complex+trim {:.2}",
        r.paper_mb[0], r.paper_mb[1], r.paper_mb[2]
    );
    for m in &r.modes {
        let _ = writeln!(
            s,
            "  {:<13} MPC MB: C2M exact rounding {:.2} ({} rounds incl. the ciphertext), M2C Ring2Field {:.2}",
            m.mode,
            m.c2m_mpc_bytes as f64 / 1e6,
            m.c2m_rounds,
            m.m2c_mpc_bytes as f64 / 1e6
        );
    }
    if let (Some(re), Some(cx), Some(ct)) = (
        r.modes.iter().find(|m| m.mode == "real"),
        r.modes.iter().find(|m| m.mode == "complex"),
        r.modes.iter().find(|m| m.mode == "complex+trim"),
    ) {
        for (what, pick) in [
            (
                "boundary (wrappers + ciphertexts, Table VII accounting)",
                (|m: &ModeReport| m.boundary_latency.clone()) as fn(&ModeReport) -> Vec<NetLatency>,
            ),
            (
                "total (compute + ciphertexts + MPC traffic)",
                |m: &ModeReport| m.latency.clone(),
            ),
        ] {
            let (a, b, c) = (pick(re), pick(cx), pick(ct));
            let cols: Vec<String> = a
                .iter()
                .zip(b.iter().zip(c.iter()))
                .map(|(a, (b, c))| {
                    format!(
                        "{} {:.3}/{:.3}/{:.3} s = {:.2}x/{:.2}x",
                        a.network,
                        a.total_s,
                        b.total_s,
                        c.total_s,
                        a.total_s / b.total_s,
                        a.total_s / c.total_s
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "  speedup over real, {what}: real/complex/complex+trim  {}",
                cols.join("  ")
            );
        }
    }
    let f = &r.ring2field;
    let _ = writeln!(
        s,
        "  Ring2Field of {} values into Z_2^123: comparison-based {:.2} MB ({:.1} B/value, {} rounds), known-MSB {:.2} MB ({:.1} B/value, {} rounds)",
        f.values,
        f.comparison_bytes as f64 / 1e6,
        f.comparison_bytes as f64 / f.values.max(1) as f64,
        f.comparison_rounds,
        f.known_msb_bytes as f64 / 1e6,
        f.known_msb_bytes as f64 / f.values.max(1) as f64,
        f.known_msb_rounds
    );
    if let Some(why) = &r.netem_skipped {
        let _ = writeln!(s, "  netem run skipped: {why}");
    }
    if let Some(n) = &r.netem {
        let _ = writeln!(
            s,
            "  emulated link {} ({:.0} Mbit/s, {:.1} ms one-way; {:?}: {})",
            n.network,
            n.bandwidth_bps / 1e6,
            n.one_way_s * 1e3,
            n.shaping,
            n.qdisc
        );
        let _ = writeln!(
            s,
            "    {:<5} {:>10} {:>10} {:>10} {:>7} {:>14} {:>7} {:>10} {:>7}",
            "", "measured", "compute", "model", "ratio", "model(lat=0)", "ratio", "MB", "rounds"
        );
        for (name, meas, comp, model, m0, b, rd) in [
            (
                "C2M",
                n.c2m_measured_s,
                n.c2m_compute_s,
                n.c2m_model_s,
                n.c2m_model_rate_only_s,
                n.c2m_bytes,
                n.c2m_rounds,
            ),
            (
                "M2C",
                n.m2c_measured_s,
                n.m2c_compute_s,
                n.m2c_model_s,
                n.m2c_model_rate_only_s,
                n.m2c_bytes,
                n.m2c_rounds,
            ),
            (
                "pair",
                n.c2m_measured_s + n.m2c_measured_s,
                n.c2m_compute_s + n.m2c_compute_s,
                n.c2m_model_s + n.m2c_model_s,
                n.c2m_model_rate_only_s + n.m2c_model_rate_only_s,
                n.c2m_bytes + n.m2c_bytes,
                n.c2m_rounds + n.m2c_rounds,
            ),
        ] {
            let _ = writeln!(
                s,
                "    {:<5} {:>9.3}s {:>9.3}s {:>9.3}s {:>7.2} {:>13.3}s {:>7.2} {:>10.2} {:>7}",
                name,
                meas,
                comp,
                model,
                meas / model,
                m0,
                meas / m0,
                b as f64 / 1e6,
                rd
            );
        }
        let _ = writeln!(
            s,
            "    round-trip max error over the link: {:.3} ulp",
            n.max_err_ulp
        );
    }
    s
}
