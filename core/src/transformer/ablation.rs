//! The "w/o SCP" ablation (Appendix G-A): a generic Halevi–Shoup style slot-permutation repack
//! inserted at every direct FHE→FHE edge of the attention block, so the saving of Stage
//! Compatible Patterns is measured by the same engine and the same counters.
//!
//! `Repack(v) = Σ_{k < log₂ m} ρ(v; 2^k) ⊙ m_k` — `⌈log₂ m⌉` hoisted rotations, `⌈log₂ m⌉` masks and
//! one level per block. The three edges per layer are: (1) `QKV → Score` on the `Q` and `K`
//! blocks, (2) `QKV → Value` on the `V` blocks, (3) `Value → Out` on the value output blocks.
//!
//! This is a cost model: the masks `m_k` (slots whose index has bit `k` set) do not realize a
//! meaningful permutation, so the ablation chain is only run for counting (on any executor) and its
//! outputs are not checked for correctness.

use super::exec::{pt_key, Exec};
use super::shift::{masked_rot_sum, SlotFn};
use crate::ckks::C64;
use crate::error::Result;
use alloc::vec::Vec;

/// `⌈log₂ m⌉`.
pub fn log2_ceil(m: usize) -> usize {
    (usize::BITS - (m.max(1) - 1).leading_zeros()) as usize
}

/// One generic repack of a block (counted in [`super::OpCounts::repacks`]).
pub fn repack_generic<E: Exec>(ex: &E, v: &E::Ct, m: usize) -> Result<E::Ct> {
    ex.note_repack();
    let steps = log2_ceil(m);
    let masks: Vec<_> = (0..steps)
        .map(|k| move |i: usize| C64::real(((i >> k) & 1) as f64))
        .collect();
    let terms: Vec<(i64, SlotFn<'_>)> = masks
        .iter()
        .enumerate()
        .map(|(k, f)| {
            (
                1i64 << k,
                (pt_key(6, &[k as u64]), f as &dyn Fn(usize) -> C64),
            )
        })
        .collect();
    masked_rot_sum(ex, v, &terms)
}

/// Repacks every block of an edge.
pub fn repack_edge<E: Exec>(ex: &E, blocks: &[E::Ct], m: usize) -> Result<Vec<E::Ct>> {
    blocks.iter().map(|b| repack_generic(ex, b, m)).collect()
}
