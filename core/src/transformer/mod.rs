//! Packing-co-designed FHE kernels of a Transformer attention block (EncFormer §III, Appendix A):
//! the projection kernel, the score kernel `S = Q·Kᵀ` and the value kernel `O = P·V`, chained under
//! Stage Compatible Patterns (SCP) with zero ciphertext repacks, plus the "w/o SCP" ablation and
//! an operation-count report. Every kernel is written once against [`exec::Exec`] and runs either
//! on real CKKS ([`exec::CkksExec`]) or as a symbolic dry run ([`exec::SymExec`]).

pub mod ablation;
pub mod exec;
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
