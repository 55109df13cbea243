//! The two sides of one private inference (API; the body is being built by the lead).

use super::weights::{EncoderConfig, EncoderWeights};
use crate::ckks::{Ckks, EvaluationKeys, PublicKey, SecretKey};
use crate::convert::ProtocolError;
use crate::error::Error;
use crate::mpc::Party;
use crate::packing::Mat;
use crate::params::CkksParams;
use crate::transformer::OpCounts;
use crate::PolyBackend;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};

/// Supported (padded) sequence lengths `m`.
pub const SEQ_LENS: [usize; 4] = [16, 32, 64, 128];

/// One block's costs, as one party saw them (the host adds wall time between events).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockCost {
    /// Layer index (`usize::MAX` for the head).
    pub layer: usize,
    /// Block name (`"qkv+score"`, `"softmax"`, `"value+out"`, `"ln1"`, `"fc1"`, `"gelu"`,
    /// `"fc2"`, `"ln2"`, `"head"`, or a conversion `"c2m:…"` / `"m2c:…"`).
    pub block: &'static str,
    /// CKKS operations (server side; zero at the client).
    pub ckks: OpCounts,
    /// Ciphertexts converted.
    pub converted_cts: usize,
    /// Ciphertext bytes carried by the conversion.
    pub converted_bytes: u64,
    /// MPC bytes sent + received in the block.
    pub mpc_bytes: u64,
    /// MPC rounds of the block.
    pub mpc_rounds: u64,
}

/// Everything public both parties derive from `(params, architecture, m)`: the kernel plan, the
/// layouts, the conversion plans per boundary and the Galois steps.
#[derive(Clone, Debug)]
pub struct SessionPlan {
    /// The architecture.
    pub cfg: EncoderConfig,
    /// Padded sequence length.
    pub m: usize,
    rotations: Vec<i64>,
}

impl SessionPlan {
    /// Plans a session; typed error when the shape or parameters do not fit.
    pub fn new(_params: &CkksParams, cfg: &EncoderConfig, m: usize) -> Result<Self, ProtocolError> {
        cfg.validate()?;
        if !SEQ_LENS.contains(&m) {
            return Err(Error::InvalidParameters("sequence length").into());
        }
        Err(Error::InvalidParameters("private pipeline not built yet").into())
    }

    /// Galois steps the client must generate keys for (conjugation is always included).
    pub fn rotations(&self) -> &[i64] {
        &self.rotations
    }
}

/// The client (P0): sends its input `x` (`m × d`, rows `valid..m` are padding) through the
/// conversion into the pipeline, takes part in every MPC block and returns the logits.
/// `progress` is called after every block.
#[allow(clippy::too_many_arguments)]
pub async fn client_run<B: PolyBackend, R: RngCore + CryptoRng>(
    _p: &mut Party<R>,
    _ck: &Ckks<B>,
    _sk: &SecretKey,
    _plan: &SessionPlan,
    _x: &Mat,
    _valid: usize,
    _progress: &mut dyn FnMut(&BlockCost),
) -> Result<Vec<f64>, ProtocolError> {
    Err(Error::InvalidParameters("private pipeline not built yet").into())
}

/// The server (P1): evaluates the linear layers on ciphertexts, takes part in every MPC block,
/// and sends its share of the logits to the client. Takes public key material only.
#[allow(clippy::too_many_arguments)]
pub async fn server_run<B: PolyBackend, R: RngCore + CryptoRng>(
    _p: &mut Party<R>,
    _ck: &Ckks<B>,
    _pk: &PublicKey<B>,
    _keys: &EvaluationKeys<B>,
    _plan: &SessionPlan,
    _w: &EncoderWeights,
    _valid: usize,
    _progress: &mut dyn FnMut(&BlockCost),
) -> Result<(), ProtocolError> {
    Err(Error::InvalidParameters("private pipeline not built yet").into())
}
