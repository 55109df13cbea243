//! Network-level planning, on the dry run: the counts of a whole network at a batch and block
//! size ([`Network::dry_run`]), a cost proxy to compare them ([`cost_proxy`]), the block size of
//! a batch ([`Network::choose_block`]), the architecture both parties plan with
//! ([`Network::public_architecture`]) and the parameter set of a batch ([`batch_params`]).
//! The host's client and server and the benchmarks all plan through these.

use super::net::{Layer, NetPlan, Network, PlanOptions};
use crate::circuits::{Exec, OpCounts, SymExec};
use crate::params::{self, CkksParamsLiteral};
use crate::Result;
use alloc::vec::Vec;

/// What a dry run of a whole network gives: the plan, its operation counts and the rotations
/// (Galois elements as slot shifts) it uses.
#[derive(Clone, Debug)]
pub struct DryRun {
    /// The compiled plan.
    pub plan: NetPlan,
    /// Its operation counts for one batch.
    pub counts: OpCounts,
    /// The rotations it uses (the Galois keys a client must send).
    pub rotations: Vec<i64>,
}

/// How a network runs, for [`Network::choose_block`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanMode {
    /// Every layer under CKKS (polynomial activations).
    Fhe,
    /// Linear layers under CKKS, each ReLU in two-party MPC: the block is chosen on the network
    /// without its ReLUs (the linear layers' counts do not depend on the activations).
    Hybrid,
}

/// A whole-network cost proxy for choosing the block size, in key-switch units: a key switch
/// (rotation or relinearization) 1, a plaintext product with its encoding 1/25, a constant
/// multiply-accumulate 1/100. These are coarse weights, not a calibration: on two cores at
/// `N = 2^15` a key switch takes tens of milliseconds, a plaintext product with its encoding
/// about 5 ms and a constant multiply-accumulate about 1 ms.
pub fn cost_proxy(c: &OpCounts) -> f64 {
    (c.rotations + c.relins) as f64 + c.pt_mults as f64 / 25.0 + c.const_mults as f64 / 100.0
}

/// The CKKS set for a CNN batch: a batch of 8,192 fills `N = 2^14`'s slots and runs pixel-wise
/// on [`params::ckks_128_logn14_cnn`] (seven levels, LeNet's depth); every other batch runs on
/// [`params::ckks_128_logn15`] (ten levels, 16,384 slots).
pub fn batch_params(batch: usize) -> CkksParamsLiteral {
    if batch == 1 << 13 {
        params::ckks_128_logn14_cnn()
    } else {
        params::ckks_128_logn15()
    }
}

impl Network {
    /// The dry run of this network at `batch` and block `block` on `slots` slots, with the
    /// default plan options: the plan and its counts, by the real run's code path.
    pub fn dry_run(&self, batch: usize, block: usize, slots: usize) -> Result<DryRun> {
        self.dry_run_with(batch, block, slots, PlanOptions::default())
    }

    /// [`Self::dry_run`] with plan options (BSGS, AAC).
    pub fn dry_run_with(
        &self,
        batch: usize,
        block: usize,
        slots: usize,
        opts: PlanOptions,
    ) -> Result<DryRun> {
        let plan = self.plan_with(batch, block, slots, opts)?;
        let sym = SymExec::new(slots);
        let xs: Vec<_> = (0..plan.input.ciphertexts())
            .map(|_| sym.fresh(plan.depth))
            .collect();
        self.run(&sym, &plan, xs, |_| {})?;
        Ok(DryRun {
            plan,
            counts: sym.counts(),
            rotations: sym.rotations_used(),
        })
    }

    /// The block size with the lowest [`cost_proxy`] among the admissible ones, `None` when no
    /// block size admits `batch`. A batch that fills the slots is planned pixel-wise (one
    /// block covers the map), so the block is the map's side and nothing is swept.
    pub fn choose_block(
        &self,
        batch: usize,
        slots: usize,
        mode: PlanMode,
    ) -> Result<Option<usize>> {
        if batch == slots {
            if mode == PlanMode::Fhe {
                self.dry_run(batch, self.side, slots)?;
            }
            return Ok(Some(self.side));
        }
        let linear = match mode {
            PlanMode::Fhe => None,
            PlanMode::Hybrid => {
                let mut a = self.clone();
                a.layers.retain(|l| !matches!(l, Layer::Relu));
                Some(a)
            }
        };
        let net = linear.as_ref().unwrap_or(self);
        let mut best: Option<(f64, usize)> = None;
        let mut s = 1;
        while s <= self.side.next_power_of_two() {
            if let Ok(d) = net.dry_run(batch, s, slots) {
                let v = cost_proxy(&d.counts);
                if best.is_none_or(|(b, _)| v < b) {
                    best = Some((v, s));
                }
            }
            s *= 2;
        }
        Ok(best.map(|b| b.1))
    }

    /// The network with every weight and bias replaced by 1: the public architecture both
    /// parties plan with (the plan and the rotations depend on the geometry only), except the
    /// off-centre taps of a convolution's `1 × 1` branch
    /// ([`super::Conv2d::point_outputs`]), which the architecture fixes at 0. A dry run of it
    /// counts the operations of a dense model with biases: the server's run counts the same
    /// unless some weights are exactly zero (the executor skips those products).
    pub fn public_architecture(&self) -> Network {
        let mut a = self.clone();
        for l in &mut a.layers {
            match l {
                Layer::Conv(c) => {
                    c.weight.iter_mut().for_each(|w| *w = 1.0);
                    c.bias.iter_mut().for_each(|w| *w = 1.0);
                    if !c.depthwise {
                        let (k, ci) = (c.kernel, c.in_channels);
                        let per_output = ci * k * k;
                        for o in 0..c.point_outputs.min(c.out_channels) {
                            for (t, w) in c.weight[o * per_output..(o + 1) * per_output]
                                .iter_mut()
                                .enumerate()
                            {
                                if t % (k * k) != (k / 2) * k + k / 2 {
                                    *w = 0.0;
                                }
                            }
                        }
                    }
                }
                Layer::Linear(f) => {
                    f.weight.iter_mut().for_each(|w| *w = 1.0);
                    f.bias.iter_mut().for_each(|w| *w = 1.0);
                }
                _ => {}
            }
        }
        a
    }
}
