//! Reliability of the inference session (`veil_host::bert`) over real TCP on loopback, with a
//! tiny random-weight encoder (1 layer, hidden 64, 2 heads, FFN 128, m = 16):
//!
//! - requests that do not match are refused with the matching typed reason (other model, other
//!   parameters, bad length, other version, malformed, busy), and so are keys under another
//!   parameter set or keys that do not decode;
//! - garbage on the port gives a typed error, never a panic, and the server goes on serving;
//! - a client that disconnects or stalls, before its Hello or in the middle of the inference,
//!   ends its own session with a typed error within the timeout, and `serve` serves the next;
//! - a server killed mid-inference gives the client a typed error within the timeout;
//! - 4 concurrent clients against one `serve` each get their correct logits.
//!
//! Tests named `pipeline_*` run the private pipeline end to end; the others stop at the Hello
//! (the protocol and the refusal paths).

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use veil_backend_cpu::CpuBackend;
use veil_core::bert::{Blocks, EncoderConfig, EncoderWeights};
use veil_core::mpc::Frame;
use veil_core::packing::Mat;
use veil_host::bert::{
    decode_report, fingerprint, gelu_blocks, run_client, serve, serve_one, Accept, CkksCache,
    ClientResult, DecodeError, Hello, Refusal, RefuseCode, ServeOptions, ServeSummary,
    SessionError, SessionOptions, SESSION_VERSION, TAG_ACCEPT, TAG_HELLO, TAG_REFUSE,
};
use veil_host::transport::{
    TcpTransport, Transport, TransportConfig, TransportError, HELLO_LIMITS,
};

use veil_tests::fixtures::{input, plaintext, test_params, tiny_cfg, tiny_weights, LOGIT_BOUND, M};

fn cache() -> CkksCache<CpuBackend> {
    CkksCache::with_params(
        |p| CpuBackend::fast(p, 1).map_err(|e| e.to_string()),
        test_params,
    )
}

fn tcfg(timeout: Duration) -> TransportConfig {
    TransportConfig {
        timeout,
        ..TransportConfig::default()
    }
}

/// Starts `serve` on an ephemeral loopback port.
fn start_serve(
    weights: EncoderWeights,
    opts: ServeOptions,
) -> (SocketAddr, JoinHandle<ServeSummary>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        serve(
            listener,
            Arc::new(weights),
            Arc::new(cache()),
            ServeOptions {
                quiet: false,
                ..opts
            },
        )
    });
    (addr, h)
}

fn serve_opts(timeout: Duration, max_clients: usize, connections: u64) -> ServeOptions {
    ServeOptions {
        transport: tcfg(timeout),
        max_clients,
        max_connections: Some(connections),
        ..ServeOptions::default()
    }
}

fn client(
    t: &mut dyn Transport,
    cfg: &EncoderConfig,
    x: &Mat,
    valid: usize,
) -> Result<ClientResult, SessionError> {
    run_client(
        t,
        &cache(),
        cfg,
        x,
        valid,
        &SessionOptions::default(),
        &mut |_| {},
    )
}

fn connect(addr: SocketAddr, timeout: Duration) -> TcpTransport {
    TcpTransport::connect(addr, tcfg(timeout)).unwrap()
}

/// The Hello a correct client of the tiny model sends.
fn good_hello(valid: u32) -> Hello {
    let cfg = tiny_cfg();
    Hello {
        version: SESSION_VERSION,
        fingerprint: fingerprint(&cfg),
        params_id: test_params(&cfg, M).unwrap().id(),
        m: M as u32,
        valid,
    }
}

/// Sends a raw Hello payload and returns the server's answer frame.
fn raw_hello(addr: SocketAddr, payload: Vec<u8>) -> Result<Frame, TransportError> {
    let mut t = connect(addr, Duration::from_secs(10));
    t.send(vec![Frame {
        tag: TAG_HELLO,
        depth: 0,
        payload,
    }])?;
    t.recv()
}

fn refusal_of(addr: SocketAddr, payload: Vec<u8>) -> Refusal {
    let f = raw_hello(addr, payload).unwrap();
    assert_eq!(f.tag, TAG_REFUSE, "expected a refusal");
    Refusal::decode(&f.payload).unwrap()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: class count");
    let err = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        err <= LOGIT_BOUND,
        "{what}: max |Δlogit| {err:.4} > {LOGIT_BOUND} (got {got:?}, want {want:?})"
    );
}

// ---- (c) refusals -------------------------------------------------------------------------

/// Another architecture, another parameter set, a bad length, another version and a malformed
/// Hello are each refused with their typed reason, and the client's side reads the refusal as
/// [`SessionError::Refused`].
#[test]
fn refuses_mismatched_requests_with_typed_reasons() {
    let (addr, h) = start_serve(tiny_weights(1), serve_opts(Duration::from_secs(10), 4, 8));

    // Another model, through the real client.
    let other = EncoderConfig {
        layers: 2,
        ..tiny_cfg()
    };
    let mut t = connect(addr, Duration::from_secs(10));
    match client(&mut t, &other, &input(1), 5) {
        Err(SessionError::Refused(r)) => assert_eq!(r.code, RefuseCode::OtherModel, "{r}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    drop(t);

    let cases = [
        (
            Hello {
                params_id: good_hello(5).params_id ^ 1,
                ..good_hello(5)
            }
            .encode(),
            RefuseCode::OtherParams,
        ),
        (
            Hello {
                m: 17,
                ..good_hello(5)
            }
            .encode(),
            RefuseCode::BadLength,
        ),
        (good_hello(0).encode(), RefuseCode::BadLength),
        (good_hello(M as u32 + 1).encode(), RefuseCode::BadLength),
        (
            Hello {
                version: SESSION_VERSION + 1,
                ..good_hello(5)
            }
            .encode(),
            RefuseCode::UnsupportedVersion,
        ),
        (good_hello(5).encode()[..20].to_vec(), RefuseCode::Malformed),
        (vec![], RefuseCode::Malformed),
    ];
    for (payload, code) in cases {
        let r = refusal_of(addr, payload);
        assert_eq!(r.code, code, "{r}");
        assert!(!r.text.is_empty());
    }
    let s = h.join().unwrap();
    assert_eq!((s.connections, s.served, s.refused, s.failed), (8, 0, 8, 0));
}

/// A client beyond `max_clients` is refused as busy; once the slot frees, the next is served.
#[test]
fn busy_beyond_max_clients_then_served() {
    let timeout = Duration::from_millis(1500);
    let (addr, h) = start_serve(tiny_weights(2), serve_opts(timeout, 1, 3));
    // Holds the only slot: connects and says nothing.
    let holder = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let r = refusal_of(addr, good_hello(5).encode());
    assert_eq!(r.code, RefuseCode::Busy, "{r}");
    // The holder's session times out; the next client is not refused as busy.
    std::thread::sleep(timeout + Duration::from_millis(500));
    let f = raw_hello(addr, good_hello(5).encode()).unwrap();
    match f.tag {
        TAG_ACCEPT => assert_eq!(Accept::decode(&f.payload).unwrap().version, SESSION_VERSION),
        TAG_REFUSE => {
            let r = Refusal::decode(&f.payload).unwrap();
            assert_ne!(r.code, RefuseCode::Busy, "{r}");
        }
        t => panic!("unexpected tag {t:#06x}"),
    }
    drop(holder);
    let s = h.join().unwrap();
    assert_eq!((s.connections, s.busy), (3, 1));
}

/// After the Accept: keys under another parameter set, and a public key of junk, are refused
/// by the server with a typed key-exchange error, and the client is told (an abort frame).
#[test]
fn mismatched_keys_are_refused() {
    use veil_host::party::{PartyError, Payload, TAG_PARAMS, TAG_PUBLIC_KEY};
    let timeout = Duration::from_secs(5);
    let ours = test_params(&tiny_cfg(), M).unwrap();
    let other = veil_core::params::insecure_logn10().validate().unwrap();
    let cases = [
        (veil_core::serial::params_to_bytes(&other).unwrap(), false),
        (veil_core::serial::params_to_bytes(&ours).unwrap(), true),
    ];
    for (params, junk_key) in cases {
        let (tx, rx) = std::sync::mpsc::channel();
        let (e, _) = serve_one_error(timeout, |addr| {
            let mut t = connect(addr, timeout);
            t.send(vec![Frame {
                tag: TAG_HELLO,
                depth: 0,
                payload: good_hello(5).encode(),
            }])
            .unwrap();
            assert_eq!(t.recv().unwrap().tag, TAG_ACCEPT);
            let mut frames = vec![Frame {
                tag: TAG_PARAMS,
                depth: 1,
                payload: params,
            }];
            if junk_key {
                frames.push(Frame {
                    tag: TAG_PUBLIC_KEY,
                    depth: 1,
                    payload: vec![0xAB; 100],
                });
            }
            t.send(frames).unwrap();
            tx.send(t.recv()).unwrap();
        });
        match (&e, junk_key) {
            (SessionError::Keys(PartyError::ParamsMismatch { .. }), false) => {}
            (
                SessionError::Keys(PartyError::Decode {
                    what: Payload::PublicKey,
                    ..
                }),
                true,
            ) => {}
            _ => panic!("unexpected server error {e}"),
        }
        assert!(
            matches!(rx.recv().unwrap(), Err(TransportError::PeerAborted(_))),
            "the client is told"
        );
    }
}

/// A client that stalls after the Accept (where it generates its keys) is waited for
/// `keys_timeout`, longer than the receive timeout, and no longer: then a typed timeout.
#[test]
fn keys_wait_is_bounded_by_keys_timeout() {
    let timeout = Duration::from_millis(300);
    let keys = Duration::from_millis(1500);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut t = TcpTransport::accept(&listener, tcfg(timeout)).unwrap();
        let t0 = Instant::now();
        let opts = SessionOptions {
            keys_timeout: Some(keys),
            ..SessionOptions::default()
        };
        let e = serve_one(&mut t, &tiny_weights(3), &cache(), &opts).map(|_| ());
        (e.unwrap_err(), t0.elapsed())
    });
    let mut t = connect(addr, Duration::from_secs(5));
    t.send(vec![Frame {
        tag: TAG_HELLO,
        depth: 0,
        payload: good_hello(5).encode(),
    }])
    .unwrap();
    assert_eq!(t.recv().unwrap().tag, TAG_ACCEPT);
    let (e, took) = h.join().unwrap();
    assert_eq!(e.transport(), Some(&TransportError::Timeout), "{e}");
    assert!(
        matches!(e, SessionError::Keys(_)),
        "the wait was the key exchange's: {e}"
    );
    assert!(took >= keys && took < keys + timeout * 3, "{took:?}");
}

// ---- (d) garbage --------------------------------------------------------------------------

/// Serves one connection with `serve_one` and returns its error.
fn serve_one_error(timeout: Duration, peer: impl FnOnce(SocketAddr)) -> (SessionError, Duration) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut t = TcpTransport::accept(&listener, tcfg(timeout)).unwrap();
        let t0 = Instant::now();
        let r = serve_one(
            &mut t,
            &tiny_weights(3),
            &cache(),
            &SessionOptions::default(),
        );
        (r.map(|_| ()).unwrap_err(), t0.elapsed())
    });
    peer(addr);
    h.join().unwrap()
}

fn send_raw(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    use std::io::Write;
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(bytes).unwrap();
    s
}

fn frame_bytes(tag: u16, payload: &[u8]) -> Vec<u8> {
    veil_host::transport::encode_frames(&[Frame {
        tag,
        depth: 0,
        payload: payload.to_vec(),
    }])
}

/// Bytes that are not frames, a frame of another protocol, a Hello of garbage and a frame that
/// declares more than the limit: each a typed error at the server, no panic.
#[test]
fn garbage_on_the_port_is_a_typed_error() {
    let timeout = Duration::from_secs(2);
    let mut keep = Vec::new();
    let (e, _) = serve_one_error(timeout, |a| {
        keep.push(send_raw(a, b"GET / HTTP/1.1\r\n\r\n"))
    });
    assert_eq!(
        e,
        SessionError::Transport(TransportError::Malformed("bad magic"))
    );
    let mut header = frame_bytes(TAG_HELLO, &[]);
    header[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let (e, _) = serve_one_error(timeout, |a| keep.push(send_raw(a, &header)));
    assert!(
        matches!(e, SessionError::Transport(TransportError::TooLarge { .. })),
        "{e}"
    );
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let mut junk = vec![0u8; 300];
    rng.fill_bytes(&mut junk);
    // A Hello of junk reads as another version (its first two bytes) ...
    let (e, _) = serve_one_error(timeout, |a| {
        keep.push(send_raw(a, &frame_bytes(TAG_HELLO, &junk)))
    });
    assert!(
        matches!(&e, SessionError::Rejected(r) if r.code == RefuseCode::UnsupportedVersion),
        "{e}"
    );
    // ... and, with this version in front, as malformed.
    junk[..2].copy_from_slice(&SESSION_VERSION.to_le_bytes());
    let (e, _) = serve_one_error(timeout, |a| {
        keep.push(send_raw(a, &frame_bytes(TAG_HELLO, &junk)))
    });
    assert!(
        matches!(&e, SessionError::Rejected(r) if r.code == RefuseCode::Malformed),
        "{e}"
    );
    let (e, _) = serve_one_error(timeout, |a| {
        keep.push(send_raw(a, &frame_bytes(0x0201, &junk)))
    });
    assert!(
        matches!(&e, SessionError::Rejected(r) if r.code == RefuseCode::Malformed),
        "{e}"
    );
    // Random streams: any typed error, within the timeout.
    for i in 0..8 {
        let mut junk = vec![0u8; 1 + (rng.next_u32() % 200) as usize];
        rng.fill_bytes(&mut junk);
        if i % 2 == 0 {
            junk[0] = veil_host::transport::MAGIC;
            junk.insert(1, veil_host::transport::WIRE_VERSION);
        }
        let (e, took) = serve_one_error(timeout, |a| keep.push(send_raw(a, &junk)));
        assert!(
            took < timeout + Duration::from_secs(1),
            "{e} after {took:?}"
        );
    }
}

/// A "server" that answers a Hello with garbage, or with a well-formed Accept of another
/// protocol version: the client gets a typed error.
#[test]
fn client_reads_garbage_as_a_typed_error() {
    let old = Accept {
        version: SESSION_VERSION - 1,
        blocks: Blocks::EXACT,
    }
    .encode();
    let mut bad_blocks = Accept {
        version: SESSION_VERSION,
        blocks: Blocks::EXACT,
    }
    .encode();
    bad_blocks[2 + 34] = 9;
    let answers: [&[u8]; 6] = [
        b"\x00\x01garbage-garbage",
        &frame_bytes(TAG_ACCEPT, &[1, 2, 3]),
        &frame_bytes(TAG_REFUSE, &[0xff, 0xff, 0, 0]),
        &frame_bytes(0x0A04, &[]),
        &frame_bytes(TAG_ACCEPT, &old),
        &frame_bytes(TAG_ACCEPT, &bad_blocks),
    ];
    for (i, ans) in answers.into_iter().enumerate() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ans = ans.to_vec();
        let h = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut s, _) = listener.accept().unwrap();
            let mut hello = vec![0u8; 12 + veil_host::bert::HELLO_LEN];
            s.read_exact(&mut hello).unwrap();
            s.write_all(&ans).unwrap();
            std::thread::sleep(Duration::from_millis(300));
        });
        let mut t = connect(addr, Duration::from_secs(2));
        let e = client(&mut t, &tiny_cfg(), &input(5), 5).unwrap_err();
        // The well-formed Accepts fail for their own reasons, not their length.
        match (i, &e) {
            (4, SessionError::Decode { source, .. }) => {
                assert_eq!(*source, DecodeError::OtherVersion(SESSION_VERSION - 1))
            }
            (5, SessionError::Decode { source, .. }) => {
                assert!(matches!(source, DecodeError::BadBlocks(_)), "{source}")
            }
            (4 | 5, e) => panic!("answer {i}: {e}"),
            _ => {}
        }
        match &e {
            SessionError::Transport(TransportError::Malformed(_))
            | SessionError::Decode {
                source:
                    DecodeError::Length { .. }
                    | DecodeError::UnknownReason(_)
                    | DecodeError::OtherVersion(_)
                    | DecodeError::BadBlocks(_),
                ..
            }
            | SessionError::UnexpectedMessage { .. } => {}
            e => panic!("unexpected error {e}"),
        }
        h.join().unwrap();
    }
    // The client's own input checks, before any byte is sent.
    let (mut t, _peer) = veil_host::transport::mem_pair(tcfg(Duration::from_millis(300)));
    let bad = Mat::zeros(17, 64);
    assert!(matches!(
        client(&mut t, &tiny_cfg(), &bad, 5),
        Err(SessionError::Input(_))
    ));
    assert!(matches!(
        client(&mut t, &tiny_cfg(), &input(1), 0),
        Err(SessionError::Input(_))
    ));
}

/// The session decoders over random bytes and mutated valid encodings: a typed error or a value,
/// never a panic, and every accepted value re-encodes to exactly its bytes (as the fuzz target
/// `session_decode` checks at scale).
#[test]
fn session_decoders_are_total_and_canonical() {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let report = veil_host::bert::encode_report(&[veil_host::bert::ReportBlock {
        layer: 3,
        block: "softmax".into(),
        wall_s: 0.5,
        ..Default::default()
    }]);
    let seeds = [
        good_hello(5).encode(),
        Accept {
            version: SESSION_VERSION,
            blocks: gelu_blocks("bolt-split").unwrap(),
        }
        .encode(),
        Refusal::new(RefuseCode::Busy, "4 sessions running").encode(),
        report,
    ];
    for n in 0..20_000usize {
        let mut b = if n % 2 == 0 {
            let mut b = vec![0u8; n % 97];
            rng.fill_bytes(&mut b);
            b
        } else {
            seeds[n % seeds.len()].clone()
        };
        if n % 2 == 1 && !b.is_empty() {
            for _ in 0..1 + rng.next_u32() % 3 {
                let i = rng.next_u32() as usize % b.len();
                match rng.next_u32() % 3 {
                    0 => b[i] ^= 1 << (rng.next_u32() % 8),
                    1 => b.truncate(i),
                    _ => b.insert(i, rng.next_u32() as u8),
                }
                if b.is_empty() {
                    break;
                }
            }
        }
        if let Ok(h) = Hello::decode(&b) {
            assert_eq!(h.encode(), b);
        }
        if let Ok(a) = Accept::decode(&b) {
            assert_eq!(a.encode(), b);
        }
        if let Ok(r) = Refusal::decode(&b) {
            assert_eq!(r.encode(), b);
        }
        if let Ok(r) = decode_report(&b) {
            assert_eq!(veil_host::bert::encode_report(&r), b);
        }
    }
}

// ---- (b) clients that disconnect or stall before the Hello ------------------------------

/// A client that connects and leaves, and one that connects and says nothing: the server's
/// session ends with `Disconnected` at once and `Timeout` at the deadline.
#[test]
fn client_disconnect_and_stall_before_hello() {
    let timeout = Duration::from_millis(800);
    let (e, took) = serve_one_error(timeout, |a| drop(TcpStream::connect(a).unwrap()));
    assert_eq!(e, SessionError::Transport(TransportError::Disconnected));
    assert!(took < timeout, "{took:?}");
    let mut keep = None;
    let (e, took) = serve_one_error(timeout, |a| keep = Some(TcpStream::connect(a).unwrap()));
    assert_eq!(e, SessionError::Transport(TransportError::Timeout));
    assert!(took >= timeout && took < timeout * 2, "{took:?}");
}

/// A first frame larger than any hello is refused when its header arrives, under
/// `HELLO_LIMITS`: the server neither buffers it up to the session's frame limit (1 GiB) nor
/// waits for it until the session's timeout.
#[test]
fn oversized_first_frame_is_refused_at_its_header() {
    let timeout = Duration::from_secs(60);
    let mut keep = None;
    let (e, took) = serve_one_error(timeout, |a| {
        let mut b = frame_bytes(TAG_HELLO, &[]);
        b[8..12].copy_from_slice(&(1u32 << 20).to_le_bytes());
        keep = Some(send_raw(a, &b));
    });
    assert_eq!(
        e,
        SessionError::Transport(TransportError::TooLarge {
            len: 1 << 20,
            max: HELLO_LIMITS.max_frame
        })
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// After the Accept, a key frame larger than the session's keys can be is refused when its
/// header arrives: the server neither buffers it up to the session's frame limit (1 GiB) nor
/// waits for it until the key timeout.
#[test]
fn oversized_key_frame_is_refused_at_its_header() {
    use veil_host::party::{PartyError, TAG_PARAMS, TAG_PUBLIC_KEY};
    let timeout = Duration::from_secs(60);
    let ours = test_params(&tiny_cfg(), M).unwrap();
    let mut keep = None;
    let (e, took) = serve_one_error(timeout, |a| {
        let mut b = frame_bytes(TAG_HELLO, &good_hello(5).encode());
        let params = veil_core::serial::params_to_bytes(&ours).unwrap();
        b.extend(frame_bytes(TAG_PARAMS, &params));
        let mut pk = frame_bytes(TAG_PUBLIC_KEY, &[]);
        pk[8..12].copy_from_slice(&(512u32 << 20).to_le_bytes());
        b.extend(pk);
        keep = Some(send_raw(a, &b));
    });
    assert_eq!(
        e,
        SessionError::Keys(PartyError::Transport(TransportError::TooLarge {
            len: 512 << 20,
            max: veil_core::serial::public_key_len(&ours, false)
        }))
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

// ---- the private pipeline end to end ------------------------------------------------------

/// One session: the logits match the plaintext reference, the table is complete (the server's
/// CKKS counts merged into the client's rows), traffic and keys are counted.
#[test]
fn pipeline_one_session_matches_reference() {
    let w = tiny_weights(7);
    let (addr, h) = start_serve(w.clone(), serve_opts(Duration::from_secs(120), 1, 1));
    let x = input(7);
    let mut t = connect(addr, Duration::from_secs(120));
    let mut events = 0;
    let r = run_client(
        &mut t,
        &cache(),
        &tiny_cfg(),
        &x,
        9,
        &SessionOptions::default(),
        &mut |_| events += 1,
    )
    .unwrap();
    drop(t);
    assert_close(&r.logits, &plaintext(&w, &x, 9), "one session");
    assert_eq!(events, r.blocks.len());
    assert!(!r.blocks.is_empty());
    assert!(r.blocks.iter().any(|b| b.cost.tally.ckks.pt_mults > 0));
    assert!(r.blocks.iter().any(|b| b.cost.tally.mpc_bytes > 0));
    assert!(r.key_exchange.evaluation_key_bytes > 0);
    assert_eq!((r.m, r.valid), (M, 9));
    // Each FHE block's modulus: entered at its depth, left trimmed, smaller on the way out.
    assert_eq!(r.fhe_blocks.len(), 4);
    assert!(
        r.fhe_blocks.iter().all(|b| b.1 > b.3 && b.2 > b.4),
        "{:?}",
        r.fhe_blocks
    );
    let s = h.join().unwrap();
    assert_eq!((s.served, s.failed), (1, 0));
}

/// The server's blocks reach the client in the Accept: a server of BOLT's GELU with the split
/// (candidates in CKKS, select in MPC) serves a client that asked for nothing, the client plans
/// with the server's blocks (else the two parties' protocols would not match: the candidate
/// conversions are in its table), and its logits match the `f64` reference of those blocks.
/// A server whose blocks do not plan refuses as unavailable; an Accept of another version is
/// a typed error at the client.
#[test]
fn pipeline_server_blocks_reach_the_client() {
    let w = tiny_weights(11);
    let split = gelu_blocks("bolt-split").unwrap();
    let mut opts = serve_opts(Duration::from_secs(120), 1, 1);
    opts.session.blocks = split;
    let (addr, h) = start_serve(w.clone(), opts);
    let x = input(11);
    let mut t = connect(addr, Duration::from_secs(120));
    let r = client(&mut t, &tiny_cfg(), &x, 12).unwrap();
    drop(t);
    assert_eq!(r.nonlinear, split);
    let want = veil_core::bert::reference::logits_with(&w, &x, 12, &split).unwrap();
    assert_close(&r.logits, &want, "served split");
    // The split's conversions are in the table.
    assert!(r.blocks.iter().any(|b| b.cost.block.contains("cand")));

    // The erf fit's degree-7 candidates do not fit the conversion: a server configured with
    // them refuses the client as unavailable, before any key is made.
    let bad = Blocks {
        gelu_split: veil_core::nonlinear::gelu::GeluSplit::CkksCandidates,
        ..Blocks::EXACT
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let a2 = listener.local_addr().unwrap();
    let w2 = w.clone();
    let srv = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut t = TcpTransport::new(s, tcfg(Duration::from_secs(30))).unwrap();
        let opts = SessionOptions {
            blocks: bad,
            ..SessionOptions::default()
        };
        serve_one(&mut t, &w2, &cache(), &opts).map(|_| ())
    });
    let mut t = connect(a2, Duration::from_secs(30));
    match client(&mut t, &tiny_cfg(), &x, 12) {
        Err(SessionError::Refused(r)) => assert_eq!(r.code, RefuseCode::Unavailable, "{r}"),
        other => panic!("expected an unavailable refusal, got {other:?}"),
    }
    assert!(matches!(
        srv.join().unwrap(),
        Err(SessionError::Rejected(_))
    ));
    let s = h.join().unwrap();
    assert_eq!((s.served, s.failed), (1, 0));
}

/// Cuts or stalls a TCP transport on its `after`-th batch of inference frames (tags outside the
/// setup `0x00xx`, key exchange `0x0Axx` and session `0x0Bxx` ranges), on send or on receive.
struct Faulty {
    inner: TcpTransport,
    after: usize,
    seen: usize,
    stall: Option<Duration>,
    on_recv: bool,
}

fn inference_tag(tag: u16) -> bool {
    !matches!(tag >> 8, 0x00 | 0x0A | 0x0B | 0xFF)
}

impl Faulty {
    fn new(inner: TcpTransport, after: usize, stall: Option<Duration>, on_recv: bool) -> Self {
        Faulty {
            inner,
            after,
            seen: 0,
            stall,
            on_recv,
        }
    }

    /// Closes the connection; a stall first sleeps, then reads what the peer said meanwhile
    /// (a peer that gave up at its timeout has sent an abort: the error returned).
    fn trip(&mut self) -> TransportError {
        let mut e = TransportError::Disconnected;
        if let Some(d) = self.stall {
            std::thread::sleep(d);
            e = loop {
                if let Err(e) = self.inner.recv() {
                    break e;
                }
            };
        }
        self.inner.close();
        e
    }
}

impl Transport for Faulty {
    fn send(&mut self, frames: Vec<Frame>) -> Result<(), TransportError> {
        if !self.on_recv && frames.iter().any(|f| inference_tag(f.tag)) {
            self.seen += 1;
            if self.seen > self.after {
                return Err(self.trip());
            }
        }
        self.inner.send(frames)
    }
    fn recv(&mut self) -> Result<Frame, TransportError> {
        let f = self.inner.recv()?;
        if self.on_recv && inference_tag(f.tag) {
            self.seen += 1;
            if self.seen > self.after {
                return Err(self.trip());
            }
        }
        Ok(f)
    }
}

/// (a) A server killed mid-inference: the client gets a typed transport error within its
/// timeout.
#[test]
fn pipeline_server_killed_mid_inference() {
    let timeout = Duration::from_secs(20);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let srv = std::thread::spawn(move || {
        let t = TcpTransport::accept(&listener, tcfg(timeout)).unwrap();
        let mut t = Faulty::new(t, 2, None, true);
        serve_one(
            &mut t,
            &tiny_weights(8),
            &cache(),
            &SessionOptions::default(),
        )
        .map(|_| ())
    });
    let mut t = connect(addr, timeout);
    let t0 = Instant::now();
    let e = client(&mut t, &tiny_cfg(), &input(8), 6).unwrap_err();
    let took = t0.elapsed();
    assert!(
        matches!(
            e,
            SessionError::Mpc {
                step: "inference",
                ..
            }
        ),
        "the kill came mid-inference: {e}"
    );
    assert!(
        matches!(
            e.transport(),
            Some(TransportError::Disconnected | TransportError::PeerAborted(_))
        ),
        "{e}"
    );
    assert!(took < timeout, "{took:?}");
    assert!(srv.join().unwrap().is_err());
}

/// (b) A client that disconnects mid-inference, then one that stalls mid-inference: the server
/// ends each session with a typed error within its timeout, and `serve` serves the next client
/// correctly.
#[test]
fn pipeline_client_disconnect_and_stall_mid_inference_then_served() {
    // The server's receive timeout bounds the stalled client's session (the next client's key
    // generation has its own allowance, `SessionOptions::keys_timeout`).
    let timeout = Duration::from_secs(6);
    let w = tiny_weights(9);
    // Three slots: the server may still be computing the first client's block when that client
    // is gone (it notices at its next receive), so no session waits on another.
    let (addr, h) = start_serve(w.clone(), serve_opts(timeout, 3, 3));
    // Disconnects on its third inference batch.
    let t = connect(addr, timeout);
    let mut t = Faulty::new(t, 2, None, false);
    let e = client(&mut t, &tiny_cfg(), &input(9), 4).unwrap_err();
    assert!(e.transport().is_some(), "{e}");
    // Stalls past the server's timeout on its third inference batch.
    let t = connect(addr, timeout * 3);
    let stall = std::thread::spawn(move || {
        let mut t = Faulty::new(t, 2, Some(timeout + Duration::from_secs(2)), false);
        client(&mut t, &tiny_cfg(), &input(10), 4).map(|_| ())
    });
    let x = input(11);
    let mut t = connect(addr, timeout * 4);
    let r = client(&mut t, &tiny_cfg(), &x, 11).unwrap();
    drop(t);
    assert_close(&r.logits, &plaintext(&w, &x, 11), "after the faults");
    // The server gave up on the stalled client at its timeout, before the client woke up.
    match stall.join().unwrap() {
        Err(e) => assert!(
            matches!(e.transport(), Some(TransportError::PeerAborted(r)) if r.contains("timed out")),
            "{e}"
        ),
        Ok(()) => panic!("the stalled client succeeded"),
    }
    let s = h.join().unwrap();
    assert_eq!((s.connections, s.served, s.failed), (3, 1, 2));
}

/// (e) Four concurrent clients against one `serve`: each gets its own correct logits.
#[test]
fn pipeline_four_concurrent_clients() {
    let w = tiny_weights(12);
    let (addr, h) = start_serve(w.clone(), serve_opts(Duration::from_secs(300), 4, 4));
    let clients: Vec<_> = [3usize, 8, 13, 16]
        .into_iter()
        .enumerate()
        .map(|(i, valid)| {
            std::thread::spawn(move || {
                let x = input(100 + i as u64);
                let mut t = connect(addr, Duration::from_secs(300));
                let r = client(&mut t, &tiny_cfg(), &x, valid);
                (x, valid, r)
            })
        })
        .collect();
    for c in clients {
        let (x, valid, r) = c.join().unwrap();
        let r = r.unwrap();
        assert_close(
            &r.logits,
            &plaintext(&w, &x, valid),
            &format!("client with {valid} tokens"),
        );
    }
    let s = h.join().unwrap();
    assert_eq!((s.served, s.failed, s.busy), (4, 0, 0));
}

/// A memory budget for three sessions: three clients hold theirs (connected, before their
/// Hello), a fourth is refused as busy with the budget's figures, and once the three are gone a
/// client is served its correct logits.
#[test]
fn memory_budget_admits_three_of_four_then_serves() {
    let w = tiny_weights(13);
    let mut opts = serve_opts(Duration::from_secs(30), 8, 5);
    opts.memory_budget = Some(3_000_000_000);
    opts.session_memory = Some(1_000_000_000);
    let (addr, h) = start_serve(w.clone(), opts);
    let held: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // The accept loop takes connections in order: the three hold the budget when the fourth comes.
    let r = refusal_of(addr, good_hello(9).encode());
    assert_eq!(r.code, RefuseCode::Busy, "{r}");
    assert!(
        r.text.contains("memory budget") && r.text.contains("1.00 GB"),
        "{r}"
    );
    drop(held);
    // The three sessions end at their peers' disconnect, and give their memory back.
    std::thread::sleep(Duration::from_secs(1));
    let x = input(13);
    let mut t = connect(addr, Duration::from_secs(120));
    let got = client(&mut t, &tiny_cfg(), &x, 9).unwrap();
    drop(t);
    assert_close(
        &got.logits,
        &plaintext(&w, &x, 9),
        "after the budget was freed",
    );
    let s = h.join().unwrap();
    assert_eq!(
        (s.connections, s.served, s.refused, s.busy, s.failed),
        (5, 1, 1, 1, 3)
    );
}
