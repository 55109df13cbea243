//! Serving a CNN over TCP (`veil_host::cnn::serve`, behind `veil serve --cnn` and
//! `veil infer-image --server`), on loopback with small random networks and insecure fast
//! parameters:
//!
//! - an FHE-only network and a ReLU network (hybrid, IKNP OT) served to a remote client: the
//!   logits match the plaintext model's;
//! - a client whose architecture, mode, batch, block or version does not fit is refused with the
//!   matching typed [`CnnRefuseCode`], and a client beyond the limit is told it is busy;
//! - garbage on the port gets a typed refusal, never a panic, and the server goes on serving.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_core::cnn::{Conv2d, Layer, Linear, Network};
use veil_core::mpc::Frame;
use veil_core::params;
use veil_host::cnn::serve::{
    arch_digest, decode_refusal, handshake, infer_remote, serve_cnn, CnnHello, CnnRefuseCode,
    CnnServeOptions, CnnServeSummary, Mode, RemoteOutcome, CNN_VERSION, TAG_CNN_HELLO,
    TAG_CNN_REFUSE,
};
use veil_host::cnn::VisionError;
use veil_host::transport::{TcpTransport, Transport, TransportConfig};
use veil_tests::fixtures::{
    check_against_plaintext, cnn_images as images, cnn_test_params, fhe_net, rand_vec,
};
use veil_tests::*;

/// The FHE-only bound on |encrypted − plaintext| per logit: the output flood's `2^−10` (at 8
/// standard deviations, `veil_host::cnn::FLOOD_TOLERANCE`) and the evaluation's error.
const FHE_BOUND: f64 = 1e-3;
/// The hybrid mode's bound (the one of `cnn_hybrid.rs`).
const HYBRID_BOUND: f64 = 5e-3;

/// N = 2^12 with nine 40-bit levels (as `cnn_layers.rs`): insecure, for fast tests only.
fn fhe_ckks() -> Arc<Ckks<CpuBackend>> {
    let p = cnn_test_params();
    Arc::new(Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap())))
}

/// Conv 1→3 (3×3, stride 2, padding 1), ReLU, flatten, fc 48→10 on 8 × 8 inputs.
fn relu_net(seed: u64) -> Network {
    let mut rng = test_rng(seed);
    let conv = Conv2d::new(
        1,
        3,
        3,
        2,
        1,
        rand_vec(&mut rng, 27, 0.8),
        rand_vec(&mut rng, 3, 0.2),
    )
    .unwrap();
    Network {
        name: "tiny-relu".into(),
        channels: 1,
        side: 8,
        layers: vec![
            Layer::Conv(conv),
            Layer::Relu,
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    48,
                    10,
                    rand_vec(&mut rng, 480, 0.4),
                    rand_vec(&mut rng, 10, 0.1),
                )
                .unwrap(),
            ),
        ],
    }
}

fn cfg(secs: u64) -> TransportConfig {
    TransportConfig {
        timeout: Duration::from_secs(secs),
        ..Default::default()
    }
}

/// `serve_cnn` of `net` on 127.0.0.1:0 in a thread, ending after `connections`; its address.
fn spawn(
    net: &Network,
    ck: &Arc<Ckks<CpuBackend>>,
    connections: u64,
    max_clients: usize,
    timeout: u64,
) -> (String, JoinHandle<CnnServeSummary>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (net, ck) = (Arc::new(net.clone()), ck.clone());
    let h = std::thread::spawn(move || {
        serve_cnn(
            listener,
            net,
            move |_| Ok(ck.clone()),
            CnnServeOptions {
                transport: cfg(timeout),
                max_clients,
                max_connections: Some(connections),
                quiet: false,
                ..Default::default()
            },
        )
    });
    (addr, h)
}

/// A good FHE-only client of `net` (20 images in batches of 16: the second is partly empty).
fn good_fhe_client(addr: &str, net: &Network, ck: &Ckks<CpuBackend>) -> f64 {
    let imgs = images(20);
    let run = infer_remote(ck, addr, net, &imgs, 16, None, Mode::Fhe, cfg(60)).unwrap();
    let RemoteOutcome::Fhe(c) = &run.outcome else {
        panic!("an FHE-only run")
    };
    assert!(c.ct_bytes > 0 && c.key_bytes > 0);
    let worst = check_against_plaintext(net, &imgs, run.logits());
    println!(
        "remote fhe: block {}, {} Galois keys, worst |Δlogit| {worst:.2e}, {:.2} s",
        run.block, c.galois_keys, run.wall_s
    );
    assert!(worst < FHE_BOUND, "worst {worst}");
    worst
}

fn refused(e: VisionError) -> (CnnRefuseCode, String) {
    match e {
        VisionError::Refused { code, reason } => (code, reason),
        e => panic!("expected a refusal, got {e}"),
    }
}

/// A hello for `net` in `mode`, 16 images in one batch of 16 at block 4.
fn hello(net: &Network, mode: Mode) -> CnnHello {
    CnnHello {
        version: CNN_VERSION,
        mode,
        batch: 16,
        block: 4,
        batches: 1,
        images: 16,
        digest: arch_digest(net),
    }
}

/// Sends `h` on a fresh connection; the server's refusal.
fn refusal_of(addr: &str, h: &CnnHello) -> (CnnRefuseCode, String) {
    let mut t = TcpTransport::connect(addr, cfg(30)).unwrap();
    refused(handshake(&mut t, h).unwrap_err())
}

/// Sends `bytes` raw on a fresh connection; the server's refusal frame, decoded.
fn refusal_of_raw(addr: &str, bytes: Vec<u8>) -> (CnnRefuseCode, String) {
    let mut t = TcpTransport::connect(addr, cfg(30)).unwrap();
    t.send_raw(bytes).unwrap();
    let f = t.recv().unwrap();
    assert_eq!(f.tag, TAG_CNN_REFUSE);
    decode_refusal(&f.payload).unwrap()
}

#[test]
fn fhe_model_served_remotely_matches_the_plaintext() {
    let (net, ck) = (fhe_net(1, 10), fhe_ckks());
    let (addr, server) = spawn(&net, &ck, 1, 4, 60);
    good_fhe_client(&addr, &net, &ck);
    let s = server.join().unwrap();
    assert_eq!(
        s,
        CnnServeSummary {
            connections: 1,
            served: 1,
            refused: 0,
            busy: 0,
            failed: 0
        }
    );
}

#[test]
fn other_model_is_refused_and_the_server_goes_on() {
    let (net, ck) = (fhe_net(2, 10), fhe_ckks());
    let (addr, server) = spawn(&net, &ck, 2, 4, 60);
    // One more output of the last layer: another architecture.
    let other = fhe_net(2, 11);
    let e = infer_remote(&ck, &addr, &other, &images(4), 16, None, Mode::Fhe, cfg(30)).unwrap_err();
    println!("other model: {e}");
    let (code, reason) = refused(e);
    assert_eq!(code, CnnRefuseCode::OtherModel);
    assert!(reason.contains("architecture"), "{reason}");
    good_fhe_client(&addr, &net, &ck);
    let s = server.join().unwrap();
    assert_eq!((s.connections, s.served, s.refused, s.failed), (2, 1, 1, 0));
}

#[test]
fn wrong_mode_batch_block_and_version_are_refused() {
    let (net, ck) = (fhe_net(3, 10), fhe_ckks());
    let (addr, server) = spawn(&net, &ck, 9, 4, 30);
    // A hybrid client of an FHE-only model, through the product's client.
    let e = infer_remote(
        &ck,
        &addr,
        &net,
        &images(4),
        16,
        None,
        Mode::Hybrid { silent: false },
        cfg(30),
    )
    .unwrap_err();
    let (code, reason) = refused(e);
    println!("wrong mode: {reason}");
    assert_eq!(code, CnnRefuseCode::WrongMode);
    let good = hello(&net, Mode::Fhe);
    let cases: [(&str, CnnHello, CnnRefuseCode); 7] = [
        (
            "batch 3",
            CnnHello {
                batch: 3,
                images: 3,
                ..good
            },
            CnnRefuseCode::BadBatch,
        ),
        (
            "batch 8 (below 16)",
            CnnHello {
                batch: 8,
                images: 8,
                ..good
            },
            CnnRefuseCode::BadBatch,
        ),
        (
            "more images than the batches hold",
            CnnHello { images: 17, ..good },
            CnnRefuseCode::BadBatch,
        ),
        (
            "a batch too many",
            CnnHello {
                batches: 2,
                images: 16,
                ..good
            },
            CnnRefuseCode::BadBatch,
        ),
        (
            "no batch",
            CnnHello {
                batches: 0,
                images: 0,
                ..good
            },
            CnnRefuseCode::BadBatch,
        ),
        (
            "block 3",
            CnnHello { block: 3, ..good },
            CnnRefuseCode::BadBlock,
        ),
        (
            "version 2",
            CnnHello { version: 2, ..good },
            CnnRefuseCode::UnsupportedVersion,
        ),
    ];
    for (what, h, want) in cases {
        let (code, reason) = refusal_of(&addr, &h);
        println!("{what}: {code}: {reason}");
        assert_eq!(code, want, "{what}: {reason}");
    }
    // A hello of the wrong length.
    let mut short = good.encode();
    short.truncate(20);
    let bytes = veil_host::transport::encode_frames(&[Frame {
        tag: TAG_CNN_HELLO,
        depth: 0,
        payload: short,
    }]);
    let (code, reason) = refusal_of_raw(&addr, bytes);
    println!("short hello: {reason}");
    assert_eq!(code, CnnRefuseCode::Malformed);
    let s = server.join().unwrap();
    assert_eq!((s.connections, s.served, s.refused, s.failed), (9, 0, 9, 0));
}

#[test]
fn garbage_gets_no_panic_and_the_server_goes_on() {
    let (net, ck) = (fhe_net(4, 10), fhe_ckks());
    let (addr, server) = spawn(&net, &ck, 6, 4, 30);
    // Not a Veil frame at all, a header announcing 4 GiB, one announcing 1 MiB (within the
    // session's frame limit, past a hello's: refused at once, not awaited), a frame of the
    // BERT session.
    let mut huge = vec![
        0x56,
        veil_host::transport::WIRE_VERSION,
        0x02,
        0x0C,
        0,
        0,
        0,
        0,
    ];
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    let mut mib = huge.clone();
    mib[8..12].copy_from_slice(&(1u32 << 20).to_le_bytes());
    let bert = veil_host::transport::encode_frames(&[Frame {
        tag: 0x0B01,
        depth: 0,
        payload: vec![0; 50],
    }]);
    for (what, bytes) in [
        (
            "an HTTP request",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        ("a 4 GiB header", huge),
        ("a 1 MiB header", mib),
        ("a BERT hello", bert),
    ] {
        let (code, reason) = refusal_of_raw(&addr, bytes);
        println!("{what}: {code}: {reason}");
        assert_eq!(code, CnnRefuseCode::Malformed, "{what}");
    }
    // A client that connects and leaves without a word.
    drop(TcpStream::connect(&addr).unwrap());
    good_fhe_client(&addr, &net, &ck);
    let s = server.join().unwrap();
    assert_eq!((s.connections, s.served, s.refused, s.failed), (6, 1, 4, 1));
}

#[test]
fn a_client_beyond_the_limit_is_told_busy() {
    let (net, ck) = (fhe_net(5, 10), fhe_ckks());
    let (addr, server) = spawn(&net, &ck, 2, 1, 3);
    // The first client holds the only session (silent until the server's 3 s timeout).
    let first = TcpStream::connect(&addr).unwrap();
    let (code, reason) = refusal_of(&addr, &hello(&net, Mode::Fhe));
    println!("busy: {reason}");
    assert_eq!(code, CnnRefuseCode::Busy);
    drop(first);
    let s = server.join().unwrap();
    assert_eq!((s.connections, s.served, s.refused, s.failed), (2, 0, 1, 1));
}

#[test]
fn relu_model_served_remotely_in_hybrid_mode_with_iknp() {
    let p = params::insecure_logn10().validate().unwrap();
    let ck = Arc::new(Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap())));
    let net = relu_net(6);
    let (addr, server) = spawn(&net, &ck, 2, 4, 60);
    // The FHE-only mode is refused for a ReLU network.
    let e = infer_remote(
        &ck,
        &addr,
        &net,
        &images(5),
        512,
        Some(8),
        Mode::Fhe,
        cfg(30),
    )
    .unwrap_err();
    assert_eq!(refused(e).0, CnnRefuseCode::WrongMode);
    // Pixel-wise: 5 live images in the 512 slots.
    let imgs = images(5);
    let run = infer_remote(
        &ck,
        &addr,
        &net,
        &imgs,
        512,
        None,
        Mode::Hybrid { silent: false },
        cfg(60),
    )
    .unwrap();
    let RemoteOutcome::Hybrid(c) = &run.outcome else {
        panic!("a hybrid run")
    };
    assert_eq!(run.block, 8, "pixel-wise: one block covers the map");
    assert!(c.mpc_bytes > 0);
    let worst = check_against_plaintext(&net, &imgs, run.logits());
    println!(
        "remote hybrid: {:.1} MB MPC, worst |Δlogit| {worst:.2e}, {:.2} s",
        c.mpc_bytes as f64 / 1e6,
        run.wall_s
    );
    assert!(worst < HYBRID_BOUND, "worst {worst}");
    let s = server.join().unwrap();
    assert_eq!((s.connections, s.served, s.refused, s.failed), (2, 1, 1, 0));
}
