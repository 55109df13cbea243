//! Private inference of a BERT-architecture encoder (EncFormer Fig. 1, §III–V): the linear
//! layers under CKKS with the SCP kernels of [`crate::transformer`], the nonlinear blocks of
//! [`crate::nonlinear`] in two-party MPC, and the complex conversion of [`crate::convert`] at every
//! boundary. The client is MPC party P0 (it holds the CKKS secret key); the server is P1 (it
//! holds the ciphertexts and the weights).

pub mod cost;
pub mod fixed;
pub mod layout;
pub mod private;
pub mod reference;
mod track;
pub mod weights;

pub use private::{
    client_run, server_run, session_params, BlockCost, Blocks, Bounds, Levels, SessionPlan,
    MPC_CONFIG, SEQ_LENS,
};
pub use weights::{Embeddings, EncoderConfig, EncoderWeights, Head, LayerWeights};
