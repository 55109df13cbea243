//! Re-blocking (FEnc2 §V, "rot–mask–add", after HEAR): a tensor moved from one fragment layout
//! to another, so that consecutive layers may run at different block sizes `S` (or folds).
//!
//! Every element `(b, c, y, x)` sits at slot `s` of ciphertext `i` in the source layout and must
//! reach slot `t` of ciphertext `j` in the target. In the two-stage form of [`super::linear`]
//! that is one masked product per `(j, i, s − t)`: the source rotated by `s − t`, multiplied by
//! the 0/1 mask of the target slots it fills, summed into `j`. The batch is innermost in both
//! layouts, so the shift never depends on the sample and the plan is compiled from sample 0.
//! [`Relayout::rebalanced`] then splits the shifts by baby-step giant-step, as for a layer.
//!
//! The cost is the point of the plan: a change of block size changes `m = M / S`, the slot
//! stride of a block row, so the shift of an element depends on its block `(i', j')` and a
//! source/target pair needs up to `m'²` shifts (`m'` the coarser side) before the split. The
//! dry run counts them exactly, which is how a planner (the Table V bench's per-layer path)
//! decides whether a re-block pays. The masks cost one level (one plaintext product and a rescale).

use super::linear::{RotationCounts, TwoStage, TwoStageBuilder};
use crate::circuits::exec::Exec;
use crate::ckks::C64;
use crate::error::{Error, Result};
use crate::packing::fragment::FragmentLayout;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

/// A compiled re-blocking from [`Relayout::from`] to [`Relayout::to`].
#[derive(Clone, Debug, PartialEq)]
pub struct Relayout {
    /// The source layout.
    pub from: FragmentLayout,
    /// The target layout (the same tensor: batch, channels, height, width and slots).
    pub to: FragmentLayout,
    /// The rotations and products.
    pub stages: TwoStage,
    /// The target slots of sample 0 that each product fills, indexed by its
    /// [`super::linear::Term::tag`] (the other samples follow at `+ b`).
    pub masks: Vec<Vec<u32>>,
}

impl Relayout {
    /// Compiles the move of a tensor from `from` to `to`. The two layouts must hold the same
    /// tensor on the same slot count.
    pub fn plan(from: &FragmentLayout, to: &FragmentLayout) -> Result<Self> {
        if (
            from.batch,
            from.channels,
            from.height,
            from.width,
            from.slots,
        ) != (to.batch, to.channels, to.height, to.width, to.slots)
        {
            return Err(Error::InvalidParameters(
                "re-blocking: the two layouts must hold the same tensor on the same slots",
            ));
        }
        let n = from.slots as i64;
        let mut b = TwoStageBuilder::new(from.ciphertexts(), to.ciphertexts(), from.slots);
        let mut index: BTreeMap<(usize, usize, i64), usize> = BTreeMap::new();
        let mut masks: Vec<Vec<u32>> = Vec::new();
        for c in 0..from.channels {
            for y in 0..from.height {
                for x in 0..from.width {
                    let (s, t) = (from.locate(0, c, y, x), to.locate(0, c, y, x));
                    let shift = (s.slot as i64 - t.slot as i64).rem_euclid(n);
                    let tag = *index.entry((t.ct, s.ct, shift)).or_insert_with(|| {
                        masks.push(Vec::new());
                        b.add(t.ct, 0, s.ct, shift, (masks.len() - 1) as u64);
                        masks.len() - 1
                    });
                    masks[tag].push(t.slot as u32);
                }
            }
        }
        // A target ciphertext that holds no element (all padding) still gets a ciphertext:
        // an empty mask on the first source, without a rotation.
        let mut filled = vec![false; to.ciphertexts()];
        for &(j, _, _) in index.keys() {
            filled[j] = true;
        }
        for (j, _) in filled.iter().enumerate().filter(|(_, f)| !**f) {
            masks.push(Vec::new());
            b.add(j, 0, 0, 0, (masks.len() - 1) as u64);
        }
        Ok(Self {
            from: *from,
            to: *to,
            stages: b.finish(),
            masks,
        })
    }

    /// Rotation and product counts.
    pub fn counts(&self) -> RotationCounts {
        self.stages.counts()
    }

    /// The plan with its shifts split by baby-step giant-step ([`TwoStage::rebalance`]): the
    /// same masks and result, far fewer rotations. (Masks are not merged: every compiled
    /// `(target, source, shift)` is distinct, so no two products share a rotated source in a
    /// giant step.)
    pub fn rebalanced(mut self) -> Self {
        self.stages = self.stages.rebalance(self.from.slots);
        self
    }

    /// Moves `cts` (in [`Relayout::from`]) into [`Relayout::to`], and rescales: one level.
    /// Slots of the target outside the tensor are zero.
    pub fn run<E: Exec>(&self, ex: &E, cts: &[E::Ct]) -> Result<Vec<E::Ct>> {
        if ex.slots() != self.from.slots {
            return Err(Error::SlotMismatch {
                expected: self.from.slots,
                found: ex.slots(),
            });
        }
        let (n, bs) = (self.from.slots, self.from.batch);
        let diag = |_: usize, _: usize, t: &super::linear::Term| -> Vec<C64> {
            let mut d = vec![C64::default(); n];
            for &at in self.masks.get(t.tag as usize).map_or(&[][..], |v| &v[..]) {
                // Sample 0's slot and the `BS − 1` after it (a compiled mask's slots are
                // multiples of the batch; a hand-edited one out of range fills nothing).
                for slot in d.iter_mut().skip(at as usize).take(bs) {
                    *slot = C64::real(1.0);
                }
            }
            d
        };
        let layer = crate::circuits::exec::pt_key(
            0x2e_b1,
            // Both layouts whole: the plan, and so every mask, follows from them (the
            // rebalanced form keys its products by `lo` besides).
            &[
                self.from.block as u64,
                self.from.fold as u64,
                self.from.grid as u64,
                self.to.block as u64,
                self.to.fold as u64,
                self.to.grid as u64,
                self.from.height as u64,
                self.from.width as u64,
                self.from.channels as u64,
                self.from.batch as u64,
                self.from.slots as u64,
            ],
        );
        let mut outs = self.stages.run(ex, cts, layer, &diag)?;
        for ct in &mut outs {
            ex.rescale(ct)?;
        }
        Ok(outs)
    }
}
