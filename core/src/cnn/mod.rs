//! Encrypted CNN layers on FEnc2's packing (`002_7f21cb2252c146ba.txt`, §IV): the fragment layout
//! ([`crate::packing::fragment`]), convolutions with any kernel, stride and padding, average
//! pooling and fully connected layers compiled to one two-stage rotation form ([`linear`]), the
//! one-level polynomial activation ([`act`]), the block-size planner of Eqs. 3–8 ([`plan`]), and
//! re-blocking between layouts ([`relayout`]), and the network-level choices on the dry run
//! ([`choose`]: the block size and the parameter set of a batch).
//! The hybrid mode ([`hybrid`]) runs ReLU networks instead: the same linear layers under CKKS,
//! every ReLU exact in two-party MPC through the complex conversion.
//!
//! Every layer runs through [`crate::circuits::Exec`], so the dry run that counts rotations for
//! the planner and the tables is the code path of the real run.

pub mod act;
pub mod choose;
pub mod conv;
pub mod fc;
pub mod hybrid;
pub mod linear;
pub mod net;
pub mod plan;
pub mod reference;
pub mod relayout;

pub use act::Quadratic;
pub use choose::{batch_params, cost_proxy, DryRun, PlanMode};
pub use conv::{Conv2d, ConvPlan, InputAffine};
pub use fc::{FcPlan, FeatureMap, Linear};
pub use hybrid::{HybridPlan, Segment, StepCost};
pub use linear::{RotationCounts, TwoStage};
pub use net::{Layer, LayerCost, LayerPlan, NetPlan, Network, PlanOptions};
pub use plan::{choose_block, conv_floor, fc_floor, BlockChoice, BlockPoint, Floor};
pub use relayout::Relayout;

#[cfg(test)]
mod tests;
