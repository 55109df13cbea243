//! EncFormer's cost model (§V-A): `T = T_conv + T_ckks + T_mpc`, each block's time its measured
//! compute plus what the network adds ([`Network::transfer_s`]): the busier direction's bytes
//! over the bandwidth (the link is full duplex) plus one one-way latency per round (the channel
//! counts rounds as the causal depth of its frames, i.e. one-way flights on the critical path).
//!
//! The model is calibrated on the machine at hand ([`Calibration`]): the blocks of a short
//! private run on loopback (their compute time, CKKS operation counts, bytes and rounds), from
//! which [`fit_op_latency`] also fits per-operation CKKS latencies (a key switch, a plaintext
//! product, a rescale) by least squares over the FHE blocks. [`predict`] then extends the
//! calibrated layers to the whole model on any [`Network`]:
//! layer 0 as calibrated, every later layer as the last calibrated one (with the silent OT only
//! layer 0 extends COTs with IKNP; later layers run on silently preprocessed pools), the head
//! once, and the key upload.
//!
//! Decisions. Each alternative is calibrated by a run of its own, so the model compares
//! predictions of whole runs: the OT mode (IKNP or silent), and [`decide_gelu`]: GELU fully in
//! MPC against EncFormer's split (CKKS pre-evaluates the candidate polynomials `F0`, `F1`; two
//! more conversions carry them, `ΔT_conv`; MPC only compares and selects). The split is
//! *feasible* only when the candidates stay inside the boundary's bound over the block's input
//! range; [`candidate_peak`] gives their peak. [`candidate_counts`] gives the split's CKKS
//! operations from the dry run, for the report.

use crate::circuits::{eval_part_polys, part_poly_depth, Exec, SymExec};
use crate::transformer::OpCounts;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// A network profile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Network {
    /// Name.
    pub name: &'static str,
    /// Bandwidth, bits per second (`f64::INFINITY` for none).
    pub bandwidth_bps: f64,
    /// One-way latency, seconds.
    pub one_way_s: f64,
}

impl Network {
    /// What the link adds to a block that moved `bytes` in `rounds` rounds, `sent` of them in
    /// one direction and the rest in the other: `max(sent, bytes − sent)·8/BW + rounds·one_way`.
    /// The link is full duplex, so the busier direction bounds it; a round is one one-way flight
    /// on the critical path (the channel's causal depth). `sent = bytes` prices the bytes as
    /// if they all went one way.
    pub fn transfer_s(&self, bytes: u64, sent: u64, rounds: u64) -> f64 {
        let sent = sent.min(bytes);
        let busier = sent.max(bytes - sent);
        busier as f64 * 8.0 / self.bandwidth_bps + rounds as f64 * self.one_way_s
    }

    /// What the link adds to a whole run: the key upload (`key_bytes`, all one way, one flight)
    /// plus [`Network::transfer_s`] of every block's `(bytes, sent, rounds)`.
    pub fn run_link_s(
        &self,
        blocks: impl IntoIterator<Item = (u64, u64, u64)>,
        key_bytes: u64,
    ) -> f64 {
        let link: f64 = blocks
            .into_iter()
            .map(|(bytes, sent, rounds)| self.transfer_s(bytes, sent, rounds))
            .sum();
        self.transfer_s(key_bytes, key_bytes, 1) + link
    }
}

/// Loopback: no network term (the calibration's own link).
pub const LOOPBACK: Network = Network {
    name: "loopback",
    bandwidth_bps: f64::INFINITY,
    one_way_s: 0.0,
};

/// The evaluation's profiles (EncFormer's LAN and WAN settings): 1 Gbps / 0.3 ms,
/// 400 Mbps / 4 ms, 100 Mbps / 4 ms and 100 Mbps / 80 ms (one-way).
pub const NETWORKS: [Network; 4] = [
    Network {
        name: "LAN",
        bandwidth_bps: 1e9,
        one_way_s: 0.3e-3,
    },
    Network {
        name: "WAN1",
        bandwidth_bps: 400e6,
        one_way_s: 4e-3,
    },
    Network {
        name: "WAN2",
        bandwidth_bps: 100e6,
        one_way_s: 4e-3,
    },
    Network {
        name: "WAN3",
        bandwidth_bps: 100e6,
        one_way_s: 80e-3,
    },
];

/// The profile named `name` (case-insensitive; `loopback` too).
pub fn network(name: &str) -> Option<Network> {
    if name.eq_ignore_ascii_case(LOOPBACK.name) {
        return Some(LOOPBACK);
    }
    NETWORKS
        .iter()
        .copied()
        .find(|n| n.name.eq_ignore_ascii_case(name))
}

/// The term of `T = T_conv + T_ckks + T_mpc` a block belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Term {
    /// A CKKS↔MPC conversion (`m2c:*`, `c2m:*`).
    Conv,
    /// An FHE block (projections, attention kernels, FFN, head).
    Ckks,
    /// An MPC block (softmax, LayerNorm, GELU, the silent-OT pool fill).
    Mpc,
}

/// The term of the block named `block` (see [`crate::bert::BlockCost::block`]).
pub fn term_of(block: &str) -> Term {
    if block.starts_with("m2c") || block.starts_with("c2m") {
        Term::Conv
    } else if matches!(block, "qkv+score" | "value+out" | "fc1" | "fc2" | "head") {
        Term::Ckks
    } else {
        Term::Mpc
    }
}

/// One block of one layer, measured on loopback.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Layer (`usize::MAX` for the head).
    pub layer: usize,
    /// Block name.
    pub block: String,
    /// Wall seconds (the server's clock, between its progress events).
    pub compute_s: f64,
    /// CKKS operations (zero outside FHE blocks).
    pub ckks: OpCounts,
    /// Ciphertexts converted.
    pub converted_cts: usize,
    /// Bytes on the link, both directions.
    pub bytes: u64,
    /// Of `bytes`, those the measuring party sent. Calibrations saved before this field read
    /// it as `bytes` (all one way, the conservative price).
    #[serde(default = "u64_max")]
    pub sent: u64,
    /// Rounds.
    pub rounds: u64,
}

fn u64_max() -> u64 {
    u64::MAX
}

/// A calibration: the blocks of a private run of the first `layers` layers (and the head) on
/// loopback, with the key generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Sequence length.
    pub m: usize,
    /// Layers run.
    pub layers: usize,
    /// OT of the run (`iknp` or `silent`).
    pub ot: String,
    /// Client key generation, seconds.
    pub keygen_s: f64,
    /// Key upload, bytes.
    pub key_bytes: u64,
    /// Every block event of the run, in order.
    pub blocks: Vec<Measured>,
}

/// Per-operation CKKS latencies fitted to the FHE blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct OpLatency {
    /// One key switch (rotation, conjugation or relinearization), seconds.
    pub key_switch_s: f64,
    /// One ciphertext × plaintext product, seconds.
    pub pt_mult_s: f64,
    /// One rescale, seconds.
    pub rescale_s: f64,
    /// Root-mean-square relative residual of the fit over the blocks it used.
    pub rel_rms: f64,
}

impl OpLatency {
    /// The fitted time of `c`.
    pub fn time(&self, c: &OpCounts) -> f64 {
        c.key_switches() as f64 * self.key_switch_s
            + (c.pt_mults + c.ct_mults) as f64 * self.pt_mult_s
            + c.rescales as f64 * self.rescale_s
    }
}

fn features(c: &OpCounts) -> [f64; 3] {
    [
        c.key_switches() as f64,
        (c.pt_mults + c.ct_mults) as f64,
        c.rescales as f64,
    ]
}

/// Solves the 3×3 system `a·x = b` by Gaussian elimination with partial pivoting.
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    for c in 0..3 {
        let p = (c..3).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-12 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        for r in c + 1..3 {
            let f = a[r][c] / a[c][c];
            for k in c..3 {
                a[r][k] -= f * a[c][k];
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = [0.0; 3];
    for c in (0..3).rev() {
        let s: f64 = (c + 1..3).map(|k| a[c][k] * x[k]).sum();
        x[c] = (b[c] - s) / a[c][c];
    }
    Some(x)
}

/// Least-squares per-operation latencies over the FHE blocks of `blocks`, each row weighted by
/// `1/time` (so that the fit minimizes relative error). Coordinates that come out negative are
/// dropped and the rest refitted. `None` without at least one FHE block with operations.
pub fn fit_op_latency(blocks: &[Measured]) -> Option<OpLatency> {
    let rows: Vec<([f64; 3], f64)> = blocks
        .iter()
        .filter(|b| term_of(&b.block) == Term::Ckks && b.compute_s > 0.0)
        .map(|b| (features(&b.ckks), b.compute_s))
        .filter(|(f, _)| f.iter().any(|&v| v > 0.0))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut active = [true; 3];
    for _ in 0..3 {
        let mut a = [[0.0; 3]; 3];
        let mut b = [0.0; 3];
        for (f, t) in &rows {
            let w = 1.0 / (t * t);
            for i in 0..3 {
                for j in 0..3 {
                    a[i][j] += w * f[i] * f[j];
                }
                b[i] += w * f[i] * t;
            }
        }
        for i in 0..3 {
            if !active[i] {
                a[i] = [0.0; 3];
                for row in a.iter_mut() {
                    row[i] = 0.0;
                }
                a[i][i] = 1.0;
                b[i] = 0.0;
            }
        }
        let x = solve3(a, b).or_else(|| {
            // Collinear features (e.g. one block only): one latency per key switch.
            let ks: f64 = rows.iter().map(|(f, _)| f[0]).sum();
            let t: f64 = rows.iter().map(|(_, t)| t).sum();
            (ks > 0.0).then_some([t / ks, 0.0, 0.0])
        })?;
        if let Some(i) = (0..3).find(|&i| active[i] && x[i] < 0.0) {
            active[i] = false;
            continue;
        }
        let lat = OpLatency {
            key_switch_s: x[0],
            pt_mult_s: x[1],
            rescale_s: x[2],
            rel_rms: 0.0,
        };
        let ss: f64 = rows
            .iter()
            .map(|(f, t)| {
                let p = f[0] * x[0] + f[1] * x[1] + f[2] * x[2];
                let r = (p - t) / t;
                r * r
            })
            .sum();
        return Some(OpLatency {
            rel_rms: libm::sqrt(ss / rows.len() as f64),
            ..lat
        });
    }
    None
}

/// One block's estimate, summed over the layers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockEstimate {
    /// Block name.
    pub block: String,
    /// Its term.
    pub term: Term,
    /// Compute seconds (from the calibration).
    pub compute_s: f64,
    /// Bytes.
    pub bytes: u64,
    /// Rounds.
    pub rounds: u64,
    /// Compute plus the network's term.
    pub total_s: f64,
}

/// A whole-model estimate on one network.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// The network.
    pub network: Network,
    /// Layers of the model.
    pub layers: usize,
    /// Key generation and upload.
    pub keys_s: f64,
    /// `T_conv`.
    pub conv_s: f64,
    /// `T_ckks`.
    pub ckks_s: f64,
    /// `T_mpc`.
    pub mpc_s: f64,
    /// Keys + the three terms.
    pub total_s: f64,
    /// Bytes of the run (keys excluded).
    pub run_bytes: u64,
    /// Key bytes.
    pub key_bytes: u64,
    /// Rounds of the run.
    pub rounds: u64,
    /// Per block (summed over the layers), in first-seen order.
    pub blocks: Vec<BlockEstimate>,
}

/// Extends `cal` to a model of `layers` layers on `net` (see the module documentation).
/// `None` when the calibration has no layer.
pub fn predict(cal: &Calibration, layers: usize, net: &Network) -> Option<Estimate> {
    let last = cal
        .blocks
        .iter()
        .filter(|b| b.layer != usize::MAX)
        .map(|b| b.layer)
        .max()?;
    let mut blocks: Vec<BlockEstimate> = Vec::new();
    let mut add = |b: &Measured, times: usize| {
        if times == 0 {
            return;
        }
        let k = times as u64;
        let i = match blocks.iter().position(|e| e.block == b.block) {
            Some(i) => i,
            None => {
                blocks.push(BlockEstimate {
                    block: b.block.clone(),
                    term: term_of(&b.block),
                    compute_s: 0.0,
                    bytes: 0,
                    rounds: 0,
                    total_s: 0.0,
                });
                blocks.len() - 1
            }
        };
        let e = &mut blocks[i];
        e.compute_s += b.compute_s * times as f64;
        e.bytes += b.bytes * k;
        e.rounds += b.rounds * k;
        e.total_s += (b.compute_s + net.transfer_s(b.bytes, b.sent, b.rounds)) * times as f64;
    };
    for b in &cal.blocks {
        let times = if b.layer == usize::MAX {
            1
        } else if b.layer < last {
            usize::from(b.layer < layers)
        } else {
            layers.saturating_sub(last)
        };
        add(b, times);
    }
    let sum = |t: Term| -> f64 {
        blocks
            .iter()
            .filter(|b| b.term == t)
            .map(|b| b.total_s)
            .sum()
    };
    let (conv_s, ckks_s, mpc_s) = (sum(Term::Conv), sum(Term::Ckks), sum(Term::Mpc));
    let keys_s = cal.keygen_s + net.transfer_s(cal.key_bytes, cal.key_bytes, 1);
    Some(Estimate {
        network: *net,
        layers,
        keys_s,
        conv_s,
        ckks_s,
        mpc_s,
        total_s: keys_s + conv_s + ckks_s + mpc_s,
        run_bytes: blocks.iter().map(|b| b.bytes).sum(),
        key_bytes: cal.key_bytes,
        rounds: blocks.iter().map(|b| b.rounds).sum(),
        blocks,
    })
}

/// CKKS operations of the GELU split's candidates on `cts` ciphertexts: two polynomials of
/// degree `degree` on both real vectors of each ([`crate::circuits::eval_part_polys`], counted
/// by its dry run on [`SymExec`], so the estimate is the real run's count).
pub fn candidate_counts(degree: usize, cts: usize) -> OpCounts {
    let ex = SymExec::new(2);
    let poly: Vec<f64> = vec![1.0; degree.max(1) + 1];
    for _ in 0..cts {
        let z = ex.fresh(part_poly_depth(degree.max(1)));
        // A dry run cannot fail at its own depth with finite coefficients.
        let r = eval_part_polys(&ex, &z, 1.0, 1.0, &[poly.clone(), poly.clone()]);
        debug_assert!(r.is_ok());
    }
    // The latency fit prices plaintext products; a constant multiply is one such pass.
    let mut c = ex.counts();
    c.pt_mults += c.const_mults;
    c
}

/// The largest `|F0(x)|`, `|F1(x)|` over `|x| ≤ bound` (ascending coefficients), sampled on a
/// grid of 4097 points.
pub fn candidate_peak(f0: &[f64], f1: &[f64], bound: f64) -> f64 {
    let ev = |c: &[f64], v: f64| c.iter().rev().fold(0.0, |acc, &k| acc * v + k);
    (0..=4096)
        .map(|i| -bound + 2.0 * bound * i as f64 / 4096.0)
        .map(|x| ev(f0, x).abs().max(ev(f1, x).abs()))
        .fold(0.0, f64::max)
}

/// The GELU decision on one network.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GeluDecision {
    /// The whole model with GELU in MPC, predicted seconds.
    pub mpc_s: f64,
    /// The whole model with the split, predicted seconds (`f64::INFINITY` where it was not
    /// calibrated).
    pub split_s: f64,
    /// Whether the split's candidates fit the boundary over the input range.
    pub split_feasible: bool,
    /// True when the split is chosen (feasible and predicted faster).
    pub split_chosen: bool,
}

/// Decides GELU's split from the predictions of a run with GELU in MPC and one with the split
/// (the same network and OT), and whether the split is feasible.
pub fn decide_gelu(mpc: &Estimate, split: Option<&Estimate>, feasible: bool) -> GeluDecision {
    let split_s = split.map_or(f64::INFINITY, |e| e.total_s);
    GeluDecision {
        mpc_s: mpc.total_s,
        split_s,
        split_feasible: feasible,
        split_chosen: feasible && split_s < mpc.total_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn blk(layer: usize, name: &str, s: f64, bytes: u64, rounds: u64) -> Measured {
        Measured {
            layer,
            block: name.to_string(),
            compute_s: s,
            bytes,
            sent: bytes,
            rounds,
            ..Measured::default()
        }
    }

    #[test]
    fn network_terms() {
        let n = network("wan2").unwrap();
        assert_eq!(n.name, "WAN2");
        // 100 Mbps: 12.5 MB per second; 4 ms per round (one way).
        let t = n.transfer_s(12_500_000, 12_500_000, 10);
        assert!((t - 1.04).abs() < 1e-9, "{t}");
        // Full duplex: 12.5 MB each way take as long as 12.5 MB one way.
        let both = n.transfer_s(25_000_000, 12_500_000, 10);
        assert!((both - t).abs() < 1e-9, "{both}");
        let lopsided = n.transfer_s(25_000_000, 20_000_000, 0);
        assert!((lopsided - 1.6).abs() < 1e-9, "{lopsided}");
        // A sent count beyond the total (an old calibration's marker) is the total.
        assert!((n.transfer_s(12_500_000, u64::MAX, 0) - 1.0).abs() < 1e-9);
        assert_eq!(LOOPBACK.transfer_s(1 << 30, 0, 1000), 0.0);
        assert!(network("nope").is_none());
        assert_eq!(term_of("c2m:f1"), Term::Conv);
        assert_eq!(term_of("fc1"), Term::Ckks);
        assert_eq!(term_of("gelu"), Term::Mpc);
    }

    #[test]
    fn prediction_extends_the_last_layer() {
        let cal = Calibration {
            m: 16,
            layers: 2,
            ot: "silent".into(),
            keygen_s: 1.0,
            key_bytes: 1000,
            blocks: vec![
                blk(0, "softmax", 2.0, 100, 10),
                blk(1, "ot-fill", 0.5, 10, 2),
                blk(1, "softmax", 1.0, 20, 10),
                blk(usize::MAX, "head", 0.25, 5, 1),
            ],
        };
        let e = predict(&cal, 6, &LOOPBACK).unwrap();
        // Layer 0 once, layer 1 five times, the head once.
        assert!((e.mpc_s - (2.0 + 5.0 * 1.5)).abs() < 1e-12);
        assert!((e.ckks_s - 0.25).abs() < 1e-12);
        assert_eq!(e.run_bytes, 100 + 5 * 30 + 5);
        assert_eq!(e.rounds, 10 + 5 * 12 + 1);
        assert!((e.total_s - (1.0 + 2.0 + 7.5 + 0.25)).abs() < 1e-12);
        // One layer: layer 0 alone, nothing of layer 1.
        let one = predict(&cal, 1, &LOOPBACK).unwrap();
        assert!((one.mpc_s - 2.0).abs() < 1e-12);
        let w = predict(&cal, 6, &NETWORKS[3]).unwrap();
        assert!(w.total_s > e.total_s + e.rounds as f64 * 0.08 - 1e-9);
    }

    #[test]
    fn the_fit_recovers_planted_latencies() {
        let (ks, pt, rs) = (2e-3, 1e-4, 5e-5);
        let mk = |r: u64, p: u64, s: u64| {
            let c = OpCounts {
                rotations: r,
                pt_mults: p,
                rescales: s,
                ..OpCounts::default()
            };
            Measured {
                layer: 0,
                block: "fc1".to_string(),
                compute_s: r as f64 * ks + p as f64 * pt + s as f64 * rs,
                ckks: c,
                ..Measured::default()
            }
        };
        let rows = vec![
            mk(100, 2000, 50),
            mk(30, 500, 200),
            mk(64, 4000, 10),
            mk(10, 100, 100),
        ];
        let lat = fit_op_latency(&rows).unwrap();
        assert!((lat.key_switch_s - ks).abs() / ks < 1e-6, "{lat:?}");
        assert!((lat.pt_mult_s - pt).abs() / pt < 1e-6, "{lat:?}");
        assert!((lat.rescale_s - rs).abs() / rs < 1e-6, "{lat:?}");
        assert!(lat.rel_rms < 1e-9);
        // A wrong latency would be visible: the fitted time of a block is its measured time.
        assert!((lat.time(&rows[0].ckks) - rows[0].compute_s).abs() < 1e-9);
        assert!(fit_op_latency(&[blk(0, "softmax", 1.0, 0, 0)]).is_none());
    }

    #[test]
    fn gelu_decision_weighs_both_sides() {
        let c = candidate_counts(4, 4);
        // Degree 4 on both real vectors: one conjugation, 2·3 products, 2·2·4 constants.
        assert_eq!(c.conjugations, 4);
        assert_eq!(c.ct_mults, 6 * 4);
        assert_eq!(c.const_mults, 16 * 4);
        assert_eq!(c.pt_mults, 16 * 4, "priced as plaintext products");
        let cal = |gelu_s: f64, gelu_bytes: u64, extra: Option<(f64, u64)>| {
            let mut blocks = vec![
                blk(0, "fc1", 2.0, 0, 0),
                blk(0, "gelu", gelu_s, gelu_bytes, 20),
            ];
            if let Some((s, b)) = extra {
                blocks.push(blk(0, "c2m:cand", s, b, 0));
            }
            Calibration {
                m: 16,
                layers: 1,
                ot: "silent".into(),
                blocks,
                ..Calibration::default()
            }
        };
        // GELU in MPC: 1 s and 100 MB; the split: 0.5 s and 10 MB, plus a 1 s, 20 MB
        // conversion of its candidates. Loopback: the split is 0.5 s slower; at 100 Mbps its
        // 70 MB fewer bytes save 5.6 s.
        let mpc = cal(1.0, 100_000_000, None);
        let split = cal(0.5, 10_000_000, Some((1.0, 20_000_000)));
        let wan2 = network("wan2").unwrap();
        for (net, chosen) in [(LOOPBACK, false), (wan2, true)] {
            let (a, b) = (
                predict(&mpc, 1, &net).unwrap(),
                predict(&split, 1, &net).unwrap(),
            );
            let d = decide_gelu(&a, Some(&b), true);
            assert_eq!(d.split_chosen, chosen, "{}: {d:?}", net.name);
            assert!((d.mpc_s - a.total_s).abs() < 1e-12 && (d.split_s - b.total_s).abs() < 1e-12);
            // Infeasible or uncalibrated: never chosen, whatever the times.
            assert!(!decide_gelu(&a, Some(&b), false).split_chosen);
            assert!(!decide_gelu(&a, None, true).split_chosen);
        }
        // The peak of x + x^2 on [-2, 2] is 6.
        assert!((candidate_peak(&[0.0, 1.0, 1.0], &[0.0], 2.0) - 6.0).abs() < 1e-9);
    }
}
