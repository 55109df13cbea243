//! The client–server key exchange: a server built from the client's serialized public,
//! relinearization and Galois keys evaluates correctly (the client decrypts and checks against
//! `f64`), over both in-process links of the harness; malformed key bytes are typed errors on
//! both sides.

use std::sync::Arc;
use std::time::Duration;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::{Ckks, C64};
use veil_core::mpc::Frame;
use veil_core::params;
use veil_host::harness::{run_pair, Link};
use veil_host::party::{
    CiphertextLink, Client, KeyRequest, PartyError, Payload, Server, TAG_EVAL_KEYS, TAG_PARAMS,
    TAG_PUBLIC_KEY,
};
use veil_host::transport::{Transport, TransportConfig, TransportError};

fn ckks(lit: params::CkksParamsLiteral) -> Ckks<CpuBackend> {
    let p = lit.validate().unwrap();
    Ckks::new(Arc::new(CpuBackend::scalar(&p)))
}

fn cfg() -> TransportConfig {
    TransportConfig {
        timeout: Duration::from_secs(30),
        ..TransportConfig::default()
    }
}

/// Server: `rotate(x·x, 1)` and `conj(x)`; client: decrypts both and compares with `f64`.
fn exchange_and_evaluate(link: Link) {
    let ck = ckks(params::insecure_logn12());
    let p = ck.params().clone();
    let slots = p.max_slots();
    let x: Vec<f64> = (0..slots).map(|i| ((i as f64) * 0.37).sin()).collect();
    let (client_side, server_side) = run_pair(
        link,
        cfg(),
        |t: &mut dyn Transport| -> Result<(Vec<C64>, Vec<C64>), PartyError> {
            let mut rng = veil_host::os_rng();
            let client = Client::new(&ck, &mut rng)?;
            let req = KeyRequest {
                rotations: vec![1],
                conjugation: true,
            };
            let st = client.send_keys(t, &req, &mut rng)?;
            assert_eq!(st.galois_keys, 2);
            let ct = client.encrypt_real(&x, slots, p.default_scale(), &mut rng)?;
            client.send_ciphertexts(t, &[ct])?;
            let back = client.recv_ciphertexts(t)?;
            assert_eq!(back.len(), 2);
            Ok((client.decrypt(&back[0])?, client.decrypt(&back[1])?))
        },
        |t: &mut dyn Transport| -> Result<(), PartyError> {
            // One rotation and the conjugation.
            let (server, st) = Server::receive_keys(&ck, t, 2)?;
            assert!(st.public_key_bytes > 0 && st.evaluation_key_bytes > 0);
            let cts = server.recv_ciphertexts(t)?;
            let keys = server.evaluation_keys();
            let e = |source| PartyError::Ckks {
                step: "evaluate",
                source,
            };
            let mut sq = ck.mul_relin(&cts[0], &cts[0], keys).map_err(e)?;
            ck.rescale_assign(&mut sq).map_err(e)?;
            let rot = ck.rotate(&sq, 1, keys).map_err(e)?;
            let conj = ck.conjugate(&cts[0], keys).map_err(e)?;
            server.send_ciphertexts(t, &[rot, conj])?;
            Ok(())
        },
    )
    .unwrap();
    server_side.unwrap();
    let (rot, conj) = client_side.unwrap();
    // Bound: CKKS at this set keeps well over 15 bits on these operations.
    let bound = 2f64.powi(-15);
    for i in 0..slots {
        let want = x[(i + 1) % slots] * x[(i + 1) % slots];
        assert!(
            (rot[i].re - want).abs() < bound,
            "slot {i}: {} vs {want}",
            rot[i].re
        );
        assert!(rot[i].im.abs() < bound);
        assert!((conj[i].re - x[i]).abs() < bound && conj[i].im.abs() < bound);
    }
}

#[test]
fn server_evaluates_with_the_clients_keys_in_memory() {
    exchange_and_evaluate(Link::Memory);
}

#[test]
fn server_evaluates_with_the_clients_keys_over_tcp() {
    exchange_and_evaluate(Link::Tcp);
}

/// The client side sends `frames` as its "keys" to a server expecting one Galois key; returns
/// the server's error and what the client then receives.
fn server_refuses(frames: Vec<Frame>) -> (PartyError, Result<Frame, TransportError>) {
    let ck = ckks(params::insecure_logn10());
    let (client_saw, server) = run_pair(
        Link::Memory,
        cfg(),
        |t: &mut dyn Transport| {
            t.send(frames).unwrap();
            t.recv()
        },
        |t: &mut dyn Transport| Server::receive_keys(&ck, t, 1).map(|_| ()),
    )
    .unwrap();
    (server.unwrap_err(), client_saw)
}

fn frame(tag: u16, payload: Vec<u8>) -> Frame {
    Frame {
        tag,
        depth: 1,
        payload,
    }
}

#[test]
fn malformed_key_bytes_are_typed_errors_on_both_sides() {
    let ck = ckks(params::insecure_logn10());
    let mut rng = veil_host::os_rng();
    let sk = ck.gen_secret_key(&mut rng);
    let pk = ck.gen_public_key(&sk, &mut rng).unwrap();
    let keys = ck
        .gen_evaluation_keys(&sk, &[1], false, &mut rng, |_, _| {})
        .unwrap();
    let params = veil_core::serial::params_to_bytes(ck.params()).unwrap();
    let pk_bytes = ck.serialize_public_key(&pk, true).unwrap();
    let evk_bytes = ck.serialize_evaluation_keys(&keys, true).unwrap();

    // A truncated public key.
    let (e, c) = server_refuses(vec![
        frame(TAG_PARAMS, params.clone()),
        frame(TAG_PUBLIC_KEY, pk_bytes[..pk_bytes.len() - 1].to_vec()),
    ]);
    assert!(
        matches!(
            e,
            PartyError::Decode {
                what: Payload::PublicKey,
                source: veil_core::Error::Malformed(_)
            }
        ),
        "{e:?}"
    );
    assert!(matches!(c, Err(TransportError::PeerAborted(_))), "{c:?}");

    // Evaluation keys with unknown flags.
    let mut bad = evk_bytes.clone();
    bad[veil_core::serial::HEADER_LEN] = 0xEE;
    let (e, c) = server_refuses(vec![
        frame(TAG_PARAMS, params.clone()),
        frame(TAG_PUBLIC_KEY, pk_bytes.clone()),
        frame(TAG_EVAL_KEYS, bad),
    ]);
    assert!(
        matches!(
            e,
            PartyError::Decode {
                what: Payload::EvaluationKeys,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(matches!(c, Err(TransportError::PeerAborted(_))));

    // Frames larger than the session's keys are refused at their header: a public key with a
    // byte beyond its uncompressed size, and more Galois keys than the one the session needs
    // (five, seed-compressed, outweigh one uncompressed beside the relinearization key).
    let pk_full = ck.serialize_public_key(&pk, false).unwrap();
    let mut long_pk = pk_full.clone();
    long_pk.push(0);
    let more = ck
        .gen_evaluation_keys(&sk, &[1, 2, 3, 4, 5], false, &mut rng, |_, _| {})
        .unwrap();
    let more = ck.serialize_evaluation_keys(&more, true).unwrap();
    for frames in [
        vec![
            frame(TAG_PARAMS, params.clone()),
            frame(TAG_PUBLIC_KEY, long_pk),
        ],
        vec![
            frame(TAG_PARAMS, params.clone()),
            frame(TAG_PUBLIC_KEY, pk_full.clone()),
            frame(TAG_EVAL_KEYS, more.clone()),
        ],
    ] {
        let (e, c) = server_refuses(frames);
        assert!(
            matches!(e, PartyError::Transport(TransportError::TooLarge { .. })),
            "{e:?}"
        );
        assert!(matches!(c, Err(TransportError::PeerAborted(_))), "{c:?}");
    }
    // The uncompressed keys of the session itself fit the bound.
    let full = ck.serialize_evaluation_keys(&keys, false).unwrap();
    assert_eq!(
        full.len(),
        veil_core::serial::evaluation_keys_len(ck.params(), 1, true, false)
    );
    assert!(more.len() > full.len());

    // Another parameter set.
    let other = params::insecure_logn12().validate().unwrap();
    let (e, _) = server_refuses(vec![frame(
        TAG_PARAMS,
        veil_core::serial::params_to_bytes(&other).unwrap(),
    )]);
    assert_eq!(
        e,
        PartyError::ParamsMismatch {
            expected: ck.params().id(),
            found: other.id()
        }
    );

    // Keys in the wrong order.
    let (e, _) = server_refuses(vec![frame(TAG_PUBLIC_KEY, pk_bytes)]);
    assert_eq!(
        e,
        PartyError::UnexpectedMessage {
            expected: TAG_PARAMS,
            found: TAG_PUBLIC_KEY
        }
    );
}

/// A ciphertext frame longer than any ciphertext of the parameters (a degree-2 one at the top
/// level) is refused at its header, and the peer is told; one that fits is decoded as usual.
#[test]
fn oversized_ciphertext_frames_are_refused() {
    use veil_host::party::{recv_ciphertexts, TAG_CIPHERTEXT, TAG_CIPHERTEXTS};
    let ck = ckks(params::insecure_logn10());
    let p = ck.params().clone();
    let max = veil_core::serial::ciphertext_len(&p, p.max_level(), 2, false);
    let (client_saw, server) = run_pair(
        Link::Memory,
        cfg(),
        |t: &mut dyn Transport| {
            t.send(vec![
                frame(TAG_CIPHERTEXTS, 1u32.to_le_bytes().to_vec()),
                frame(TAG_CIPHERTEXT, vec![0; max + 1]),
            ])
            .unwrap();
            t.recv()
        },
        |t: &mut dyn Transport| recv_ciphertexts(&ck, t).map(|_| ()),
    )
    .unwrap();
    assert_eq!(
        server.unwrap_err(),
        PartyError::Transport(TransportError::TooLarge { len: max + 1, max })
    );
    assert!(
        matches!(client_saw, Err(TransportError::PeerAborted(_))),
        "{client_saw:?}"
    );
}
