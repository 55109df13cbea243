//! The calibration run of EncFormer's cost model ([`veil_core::bert::cost`]): the product's own
//! session, [`serve_one`] and [`run_client`] over TCP loopback, on random weights at an
//! architecture's shape (the costs do not depend on the values).

use super::{run_client, serve_one, BlockRow, CkksCache, SessionError, SessionOptions};
use crate::transport::{TcpTransport, TransportConfig, TransportError};
use std::net::TcpListener;
use std::sync::Arc;
use veil_core::bert::cost::{Calibration, Measured};
use veil_core::bert::{EncoderConfig, EncoderWeights};
use veil_core::packing::Mat;
use veil_core::PolyBackend;

/// What a calibration run measures.
#[derive(Clone, Debug)]
pub struct CalibrationRun {
    /// The architecture (its first `cfg.layers` layers are run, with the head).
    pub cfg: EncoderConfig,
    /// The padded sequence length.
    pub m: usize,
    /// The session's settings (the blocks and the OT under calibration).
    pub session: SessionOptions,
    /// Every step's transport (its receive timeout bounds the longest block).
    pub transport: TransportConfig,
}

/// Runs one private session of `run.cfg` at length `run.m` between a server thread and this
/// thread's client over TCP loopback, both on `cache`'s backend, with fresh random weights and
/// input (`m − m/4` valid tokens), and returns its [`Calibration`]: per block the server's wall
/// time and CKKS operations, the client's bytes, rounds and conversions; the client's key
/// generation and upload time and the key bytes. `progress` sees each block as it finishes.
pub fn calibrate<B: PolyBackend>(
    cache: Arc<CkksCache<B>>,
    run: &CalibrationRun,
    progress: &mut dyn FnMut(&BlockRow),
) -> Result<Calibration, SessionError> {
    let cfg = run.cfg;
    let m = run.m;
    let valid = (m - m / 4).max(1);
    let mut rng = super::session_rng()?;
    let weights = Arc::new(EncoderWeights::random(cfg, &mut rng));
    // An m × hidden Gaussian input: the head of a random `m`-class model, transposed.
    let x: Mat = EncoderWeights::random(
        EncoderConfig {
            layers: 0,
            classes: m,
            ..cfg
        },
        &mut rng,
    )
    .head
    .w
    .transpose();
    let io = |e: std::io::Error| SessionError::Transport(TransportError::Io(e.to_string()));
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let (server_cache, server_opts, tcfg) = (cache.clone(), run.session, run.transport);
    let server = std::thread::Builder::new()
        .name("veil-calibration-server".into())
        .spawn(move || {
            let (stream, _) = listener.accept().map_err(io)?;
            let mut t = TcpTransport::new(stream, tcfg)?;
            serve_one(&mut t, &weights, &server_cache, &server_opts)
        })
        .map_err(io)?;
    let mut t = TcpTransport::connect(addr, run.transport)?;
    let r = run_client(&mut t, &cache, &cfg, &x, valid, &run.session, progress);
    drop(t);
    let served = server.join().map_err(|_| {
        SessionError::Transport(TransportError::Io(
            "the calibration's server thread panicked".into(),
        ))
    })?;
    let r = r?;
    served?;
    let blocks = r
        .blocks
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let c = &row.cost;
            Measured {
                layer: c.layer,
                block: c.block.into(),
                compute_s: r.server_blocks.get(i).map_or(row.wall_s, |b| b.wall_s),
                ckks: c.tally.ckks,
                converted_cts: c.tally.converted_cts,
                bytes: c.tally.mpc_bytes,
                sent: c.tally.mpc_bytes_sent,
                rounds: c.tally.mpc_rounds,
            }
        })
        .collect();
    Ok(Calibration {
        m,
        layers: cfg.layers,
        ot: if run.session.silent.is_some() {
            "silent"
        } else {
            "iknp"
        }
        .into(),
        keygen_s: r.key_exchange.seconds,
        key_bytes: r.key_exchange.public_key_bytes + r.key_exchange.evaluation_key_bytes,
        blocks,
    })
}
