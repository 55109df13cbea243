//! Frames of the client–server exchange (see the table in [`super`]).

use super::{PartyError, Payload};
use crate::transport::{Transport, TransportError};
use veil_core::ckks::{Ciphertext, Ckks};
use veil_core::mpc::kind::HostKind;
use veil_core::mpc::Frame;
use veil_core::PolyBackend;

/// The client's parameter set.
pub const TAG_PARAMS: u16 = HostKind::Params.tag();
/// The client's public key.
pub const TAG_PUBLIC_KEY: u16 = HostKind::PublicKey.tag();
/// The client's evaluation keys.
pub const TAG_EVAL_KEYS: u16 = HostKind::EvalKeys.tag();
/// The server's acknowledgement that the keys decoded.
pub const TAG_KEYS_ACK: u16 = HostKind::KeysAck.tag();
/// The count of a ciphertext batch.
pub const TAG_CIPHERTEXTS: u16 = HostKind::Ciphertexts.tag();
/// One ciphertext of a batch.
pub const TAG_CIPHERTEXT: u16 = HostKind::Ciphertext.tag();
/// The largest ciphertext batch a receiver accepts.
pub const MAX_CIPHERTEXTS: u64 = 1 << 16;

pub(crate) fn frame(tag: u16, depth: u32, payload: Vec<u8>) -> Frame {
    Frame {
        tag,
        depth,
        payload,
    }
}

/// Tells the peer why, then fails with `e`.
pub(crate) fn refuse<T>(t: &mut dyn Transport, e: PartyError) -> Result<T, PartyError> {
    t.abort(&e.to_string());
    Err(e)
}

/// Receives the next frame and checks its tag.
pub(crate) fn expect(t: &mut dyn Transport, tag: u16) -> Result<Vec<u8>, PartyError> {
    let r = t.recv();
    check_tag(t, tag, r)
}

/// [`expect`] with the frame's payload bounded by `max_frame` bytes, where that is tighter than
/// the transport's own limit: a frame declared larger is refused at its header
/// ([`TransportError::TooLarge`]) before any of it is buffered.
pub(crate) fn expect_within(
    t: &mut dyn Transport,
    tag: u16,
    max_frame: usize,
) -> Result<Vec<u8>, PartyError> {
    let r = t.recv_limited(crate::transport::TransportConfig::frame_limit(max_frame));
    check_tag(t, tag, r)
}

/// The payload of `r` if it is a frame tagged `tag`; otherwise the peer is told why and the
/// error returned.
fn check_tag(
    t: &mut dyn Transport,
    tag: u16,
    r: Result<Frame, TransportError>,
) -> Result<Vec<u8>, PartyError> {
    match r {
        Ok(f) if f.tag == tag => Ok(f.payload),
        Ok(f) => refuse(
            t,
            PartyError::UnexpectedMessage {
                expected: tag,
                found: f.tag,
            },
        ),
        Err(e) => {
            if !matches!(
                e,
                TransportError::PeerAborted(_) | TransportError::Disconnected
            ) {
                t.abort(&e.to_string());
            }
            Err(PartyError::Transport(e))
        }
    }
}

/// Sends `cts` as one batch (seed-compressed where a ciphertext still has its seed). Returns the
/// ciphertext bytes sent.
pub fn send_ciphertexts<B: PolyBackend>(
    ck: &Ckks<B>,
    t: &mut dyn Transport,
    cts: &[Ciphertext<B>],
) -> Result<u64, PartyError> {
    let mut frames = Vec::with_capacity(cts.len() + 1);
    frames.push(frame(
        TAG_CIPHERTEXTS,
        1,
        (cts.len() as u32).to_le_bytes().to_vec(),
    ));
    let mut bytes = 0u64;
    for c in cts {
        let b = ck
            .serialize_ciphertext(c, true)
            .map_err(|source| PartyError::Ckks {
                step: "serialize a ciphertext",
                source,
            })?;
        bytes += b.len() as u64;
        frames.push(frame(TAG_CIPHERTEXT, 1, b));
    }
    t.send(frames)?;
    Ok(bytes)
}

/// Receives one batch of ciphertexts made under `ck`'s parameters.
pub fn recv_ciphertexts<B: PolyBackend>(
    ck: &Ckks<B>,
    t: &mut dyn Transport,
) -> Result<Vec<Ciphertext<B>>, PartyError> {
    let head = expect(t, TAG_CIPHERTEXTS)?;
    let count = match <[u8; 4]>::try_from(head.as_slice()) {
        Ok(b) => u32::from_le_bytes(b) as u64,
        Err(_) => {
            return refuse(
                t,
                PartyError::Decode {
                    what: Payload::CiphertextCount,
                    source: veil_core::Error::Malformed("ciphertext count is 4 bytes"),
                },
            )
        }
    };
    if count > MAX_CIPHERTEXTS {
        return refuse(
            t,
            PartyError::TooManyCiphertexts {
                count,
                max: MAX_CIPHERTEXTS,
            },
        );
    }
    let mut out = Vec::with_capacity(count as usize);
    // No ciphertext of these parameters encodes to more than a degree-2 one at the top level.
    let params = ck.params();
    let max_frame = veil_core::serial::ciphertext_len(params, params.max_level(), 2, false);
    for index in 0..count as usize {
        let b = expect_within(t, TAG_CIPHERTEXT, max_frame)?;
        match ck.deserialize_ciphertext(&b) {
            Ok(c) => out.push(c),
            Err(source) => {
                return refuse(
                    t,
                    PartyError::Decode {
                        what: Payload::Ciphertext { index },
                        source,
                    },
                )
            }
        }
    }
    Ok(out)
}
