//! Private inference of a BERT-architecture encoder (EncFormer Fig. 1, §III–V): the linear
//! layers under CKKS with the SCP kernels of [`crate::transformer`], the nonlinear blocks of
//! [`crate::nonlinear`] in two-party MPC, and the complex conversion of [`crate::convert`] at every
//! boundary, on the run engine of [`crate::hybrid`]. The client is MPC party P0 (it holds the CKKS
//! secret key); the server is P1 (it holds the ciphertexts and the weights).
//!
//! [`plan`] derives the public plan both parties share; [`run`] holds the model's steps.

pub mod cost;
pub mod fixed;
pub mod layout;
pub mod plan;
pub mod reference;
pub mod run;
pub mod weights;

pub use crate::hybrid::BlockCost;
pub use plan::{bounds, session_params, Blocks, Bounds, Levels, SessionPlan, MPC_CONFIG, SEQ_LENS};
pub use run::{client_run, server_run};
pub use weights::{Embeddings, EncoderConfig, EncoderWeights, Head, LayerWeights};
