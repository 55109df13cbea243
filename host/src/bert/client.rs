//! The client's side of a session.

use super::messages::{
    decode_report, fingerprint, Accept, DecodeError, Hello, ReportBlock, SESSION_VERSION,
    TAG_ACCEPT, TAG_HELLO, TAG_REFUSE, TAG_REPORT,
};
use super::{
    frame, plan, recv, session_rng, setup_party, BlockRow, CkksCache, SessionError, SessionOptions,
};
use crate::mpc::Clock;
use crate::party::{Client, KeyExchangeStats, KeyRequest};
use crate::transport::Transport;
use std::time::Instant;
use veil_core::bert::{client_run, Blocks, EncoderConfig, SEQ_LENS};
use veil_core::mpc::{PartyId, Stats};
use veil_core::packing::Mat;
use veil_core::PolyBackend;

/// What the client learns from a session.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientResult {
    /// The decrypted logits (one per class).
    pub logits: Vec<f64>,
    /// Per block: the client's wall time and MPC traffic, the server's CKKS operation counts.
    pub blocks: Vec<BlockRow>,
    /// The server's own per-block report (its wall times and MPC traffic).
    pub server_blocks: Vec<ReportBlock>,
    /// Padded sequence length.
    pub m: usize,
    /// Non-padding tokens.
    pub valid: usize,
    /// The CKKS parameter set's name.
    pub params: String,
    /// The nonlinear blocks the server served (from its Accept).
    pub nonlinear: Blocks,
    /// Each FHE block's CKKS modulus in this session: `(block, level in, log2 Q in, level out,
    /// log2 Q out)` ([`veil_core::bert::SessionPlan::fhe_block_levels`]), in the ring of
    /// [`ClientResult::params`].
    pub fhe_blocks: Vec<(&'static str, usize, f64, usize, f64)>,
    /// The key exchange (bytes, Galois keys, time including key generation).
    pub key_exchange: KeyExchangeStats,
    /// Base-OT setup wall time, seconds.
    pub setup_s: f64,
    /// Inference wall time (after the setup), seconds.
    pub run_s: f64,
    /// Whole session, seconds.
    pub total_s: f64,
    /// The client's MPC channel counters (setup, offline, online).
    pub mpc: Stats,
}

fn refuse_input(s: String) -> SessionError {
    SessionError::Input(s)
}

/// Runs one private inference as the client (MPC party P0) over `t`.
///
/// `x` is the `m × d` input (the published embeddings of the tokens, padded with rows
/// `valid..m`); `m` must be one of [`SEQ_LENS`]. The client generates its CKKS keys here from the
/// OS-seeded CSPRNG, sends only public key material, and returns the decrypted logits with the
/// per-block table. `progress` is called after every block.
pub fn run_client<B: PolyBackend>(
    t: &mut dyn Transport,
    ckks: &CkksCache<B>,
    cfg: &EncoderConfig,
    x: &Mat,
    valid: usize,
    opts: &SessionOptions,
    progress: &mut dyn FnMut(&BlockRow),
) -> Result<ClientResult, SessionError> {
    let t0 = Instant::now();
    cfg.validate()
        .map_err(|e| refuse_input(format!("architecture: {e}")))?;
    let m = x.rows;
    if !SEQ_LENS.contains(&m) {
        return Err(refuse_input(format!(
            "{m} rows: the padded length must be one of {SEQ_LENS:?}"
        )));
    }
    if x.cols != cfg.hidden || x.data.len() != m * cfg.hidden {
        return Err(refuse_input(format!(
            "input is {} x {}, the model's width is {}",
            x.rows, x.cols, cfg.hidden
        )));
    }
    if valid == 0 || valid > m {
        return Err(refuse_input(format!(
            "{valid} valid tokens do not fit 1..={m}"
        )));
    }
    let ck = ckks.get(cfg, m)?;

    // 1. Hello.
    let hello = Hello {
        version: SESSION_VERSION,
        fingerprint: fingerprint(cfg),
        params_id: ck.params().id(),
        m: m as u32,
        valid: valid as u32,
    };
    t.send(vec![frame(TAG_HELLO, hello.encode())])?;
    let f = recv(t)?;
    let nonlinear = match f.tag {
        TAG_ACCEPT => {
            let a = Accept::decode(&f.payload).and_then(|a| {
                if a.version == SESSION_VERSION {
                    Ok(a)
                } else {
                    Err(DecodeError::OtherVersion(a.version))
                }
            });
            a.map_err(|source| {
                t.abort("malformed accept");
                SessionError::Decode {
                    what: "accept",
                    source,
                }
            })?
            .blocks
        }
        TAG_REFUSE => return Err(super::refused(&f.payload)),
        found => {
            t.abort("expected an accept or a refusal");
            return Err(SessionError::UnexpectedMessage {
                expected: "0x0b02 (accept) or 0x0b03 (refuse)",
                found,
            });
        }
    };

    // The plan, with the server's blocks (after the Accept, so that a refusal reads as one even
    // where this build cannot plan the shape); a failure here tells the server why.
    let plan = plan(&ck, cfg, m, nonlinear).inspect_err(|e| t.abort(&e.to_string()))?;

    let fhe_blocks = plan
        .fhe_block_levels()
        .iter()
        .map(|&(b, i, o)| (b, i, ck.params().log_q_at(i), o, ck.params().log_q_at(o)))
        .collect();

    // 2. Keys: the secret key is generated here and stays in `client`.
    let mut rng = session_rng()?;
    let client = Client::new(&ck, &mut rng).map_err(SessionError::Keys)?;
    let req = KeyRequest {
        rotations: plan.rotations().to_vec(),
        conjugation: true,
    };
    let key_exchange = client
        .send_keys(t, &req, &mut rng)
        .map_err(SessionError::Keys)?;

    // 3. Base OT.
    let (mut p, setup_s) = setup_party(PartyId::P0, opts, t)?;

    // 4. Inference.
    let tr = Instant::now();
    let mut blocks = Vec::new();
    let mut clock = Clock::new();
    let mut on_block = |c: &veil_core::bert::BlockCost| {
        let row = clock.row(c);
        progress(&row);
        blocks.push(row);
    };
    let logits = crate::mpc::drive(
        p.channel(),
        client_run(
            &mut p,
            &ck,
            client.secret_key(),
            &plan,
            x,
            valid,
            &mut on_block,
        ),
        t,
    )
    .map_err(SessionError::inference)?;
    let run_s = tr.elapsed().as_secs_f64();

    // 5. The server's report.
    let f = recv(t)?;
    if f.tag != TAG_REPORT {
        t.abort("expected the report");
        return Err(SessionError::UnexpectedMessage {
            expected: "0x0b04 (report)",
            found: f.tag,
        });
    }
    let server_blocks = decode_report(&f.payload).map_err(|source| SessionError::Decode {
        what: "report",
        source,
    })?;
    if server_blocks.len() != blocks.len()
        || server_blocks
            .iter()
            .zip(&blocks)
            .any(|(s, c)| s.block != c.cost.block)
    {
        return Err(SessionError::ReportMismatch {
            client: blocks.len(),
            server: server_blocks.len(),
        });
    }
    for (row, s) in blocks.iter_mut().zip(&server_blocks) {
        row.cost.tally.ckks = s.ckks;
    }
    Ok(ClientResult {
        logits,
        blocks,
        server_blocks,
        m,
        valid,
        params: ck.params().name().to_string(),
        nonlinear,
        fhe_blocks,
        key_exchange,
        setup_s,
        run_s,
        total_s: t0.elapsed().as_secs_f64(),
        mpc: p.channel().stats(),
    })
}
