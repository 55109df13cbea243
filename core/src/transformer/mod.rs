//! Packing-co-designed FHE kernels of a Transformer attention block (EncFormer §III, Appendix A):
//! the projection kernel, the score kernel `S = Q·Kᵀ` and the value kernel `O = P·V`, chained under
//! Stage Compatible Patterns (SCP) with zero ciphertext repacks, plus the "w/o SCP" ablation and
//! an operation-count report. Every kernel is written once against [`exec::Exec`] and runs either
//! on real CKKS ([`exec::CkksExec`]) or as a symbolic dry run ([`exec::SymExec`]).

pub mod ablation;
/// The executors, now in [`crate::circuits::exec`] (re-exported under their old path).
pub use crate::circuits::exec;
pub mod pipeline;
pub mod plan;
pub mod projection;
pub mod report;
pub mod score;
pub mod shift;
pub mod value;

pub use exec::{CkksExec, Exec, OpCounts, SymCt, SymExec};
pub use plan::{AttnPlan, AttnShape};
pub use report::{scp_counts_report, ScpCountsReport};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use alloc::vec::Vec;

    /// A kernel given the wrong number of ciphertexts, or an executor with the wrong slot count,
    /// says which count and by how much.
    #[test]
    fn kernel_inputs_are_checked_with_typed_errors() {
        let plan = AttnPlan::new(AttnShape::MINILM).unwrap();
        let ex = SymExec::new(plan.shape.slots);
        let q: Vec<SymCt> = (0..plan.b_s).map(|_| ex.fresh(10)).collect();
        let short = &q[..plan.b_s - 1];
        assert_eq!(
            score::score(&ex, &plan, &q, short).unwrap_err(),
            Error::Shape {
                what: "score kernel: K blocks",
                expected: plan.b_s,
                found: plan.b_s - 1
            }
        );
        let other = SymExec::new(plan.shape.slots / 2);
        assert_eq!(
            score::score(&other, &plan, &q, &q).unwrap_err(),
            Error::SlotMismatch {
                expected: plan.shape.slots,
                found: plan.shape.slots / 2
            }
        );
        let p: Vec<SymCt> = (0..plan.p_cts + 1).map(|_| ex.fresh(10)).collect();
        let v: Vec<SymCt> = (0..plan.b_v).map(|_| ex.fresh(10)).collect();
        assert_eq!(
            value::value(&ex, &plan, &p, &v).unwrap_err(),
            Error::Shape {
                what: "value kernel: P ciphertexts",
                expected: plan.p_cts,
                found: plan.p_cts + 1
            }
        );
    }
}
