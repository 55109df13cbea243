//! The decode session of `veil serve` / `veil generate --server` ([`veil_host::decoder`]) with a
//! small Llama decoder, the client and the server in two threads over the in-memory duplex at
//! the session's 128-bit parameters: the generated tokens must be the reference's greedy ones,
//! and every refusal and failure a typed error that ends the server's session (and with it the
//! session's encrypted cache).

use std::sync::Arc;
use std::time::{Duration, Instant};
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_core::decoder::plan::session_params;
use veil_core::decoder::reference::{argmax, greedy, random_weights};
use veil_core::decoder::{DecoderConfig, Family};
use veil_host::bert::{RefuseCode, SessionError};
use veil_host::decoder::{
    calibrate, run_generate, serve_one, DecodeOptions, DecoderModel, GenerateRequest,
    GenerateResult,
};
use veil_host::transport::{mem_pair, Transport, TransportConfig, TransportError};

fn model() -> DecoderModel {
    let cfg = DecoderConfig {
        layers: 1,
        ..DecoderConfig::tiny(Family::Llama)
    };
    let weights = random_weights(&cfg, 5).unwrap();
    let calibration = calibrate(&weights, &[vec![1, 2, 3, 4], vec![9, 8]]).unwrap();
    DecoderModel {
        weights,
        calibration,
    }
}

fn ckks() -> Ckks<CpuBackend> {
    let p = session_params().unwrap();
    Ckks::new(Arc::new(CpuBackend::fast(&p, 2).unwrap()))
}

fn tcfg() -> TransportConfig {
    TransportConfig {
        timeout: Duration::from_secs(60),
        max_frame: 1 << 30,
    }
}

/// The client's greedy generation of `new` tokens after `prompt` in a session of context
/// `max_ctx`; the result and the tokens streamed.
fn greedy_client(
    t: &mut dyn Transport,
    ck: &Ckks<CpuBackend>,
    m: &DecoderModel,
    prompt: &[u32],
    new: usize,
    max_ctx: usize,
    opts: &DecodeOptions,
) -> Result<(GenerateResult, Vec<u32>), SessionError> {
    let mut streamed = Vec::new();
    let r = run_generate(
        t,
        ck,
        m,
        GenerateRequest {
            prompt,
            max_new_tokens: new,
            max_ctx,
            pick: &mut |l| argmax(l),
            stop: &|_| false,
            on_token: &mut |t, _| streamed.push(t),
            progress: &mut |_| {},
        },
        opts,
    )?;
    Ok((r, streamed))
}

#[test]
fn a_session_generates_the_reference_tokens_and_refuses_what_does_not_fit() {
    let m = model();
    let ck = ckks();
    let opts = DecodeOptions {
        max_ctx: 8,
        ..DecodeOptions::default()
    };
    let prompt = [3u32, 17];
    let (mut a, mut b) = mem_pair(tcfg());
    let (client, server) = std::thread::scope(|s| {
        let h = s.spawn(|| serve_one(&mut b, &m, &ck, &opts));
        let r = greedy_client(&mut a, &ck, &m, &prompt, 3, 8, &opts);
        (r, h.join().unwrap())
    });
    let (got, streamed) = client.unwrap();
    let st = server.unwrap();
    let want = greedy(&m.weights, &prompt, 3).unwrap();
    println!(
        "private {:?}, reference {want:?}; prefill {:.1} s, per token {:?}, {:.1} MB; server: {} steps",
        got.tokens,
        got.prefill_s,
        got.per_token_s,
        got.bytes as f64 / 1e6,
        st.steps
    );
    assert_eq!(got.tokens, want);
    assert_eq!(streamed, want);
    assert_eq!(got.per_token_s.len(), 2);
    assert_eq!(st.steps, 4);

    // A context past the server's limit: refused with the reason, before any key.
    let (mut a, mut b) = mem_pair(tcfg());
    let (client, server) = std::thread::scope(|s| {
        let h = s.spawn(|| serve_one(&mut b, &m, &ck, &opts));
        let r = greedy_client(&mut a, &ck, &m, &prompt, 3, 16, &opts);
        (r, h.join().unwrap())
    });
    match client {
        Err(SessionError::Refused(r)) => assert_eq!(r.code, RefuseCode::BadLength),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(server, Err(SessionError::Rejected(_))));

    // Another OT than the server's: refused with the reason, before any key.
    let iknp = DecodeOptions {
        session: veil_host::bert::SessionOptions {
            silent: None,
            ..opts.session
        },
        ..opts
    };
    let (mut a, mut b) = mem_pair(tcfg());
    let (client, _) = std::thread::scope(|s| {
        let h = s.spawn(|| serve_one(&mut b, &m, &ck, &opts));
        let r = greedy_client(&mut a, &ck, &m, &prompt, 3, 8, &iknp);
        (r, h.join().unwrap())
    });
    match client {
        Err(SessionError::Refused(r)) => assert_eq!(r.code, RefuseCode::OtherParams, "{r}"),
        other => panic!("expected a refusal, got {other:?}"),
    }

    // More tokens than the context holds, or a token past the vocabulary: refused at the client
    // before anything is sent.
    for (p, new) in [(&prompt[..], 8usize), (&[100_000u32][..], 1)] {
        let (mut a, _b) = mem_pair(tcfg());
        let r = greedy_client(&mut a, &ck, &m, p, new, 8, &opts);
        assert!(matches!(r, Err(SessionError::Input(_))), "{r:?}");
    }
}

/// A transport that closes itself after `left` sends (a client process that dies).
struct Cut<T: Transport> {
    inner: Option<T>,
    left: usize,
}

impl<T: Transport> Transport for Cut<T> {
    fn send(&mut self, frames: Vec<veil_core::mpc::Frame>) -> Result<(), TransportError> {
        if self.left == 0 {
            self.inner = None;
        }
        self.left = self.left.saturating_sub(1);
        match &mut self.inner {
            Some(t) => t.send(frames),
            None => Err(TransportError::Disconnected),
        }
    }
    fn recv(&mut self) -> Result<veil_core::mpc::Frame, TransportError> {
        match &mut self.inner {
            Some(t) => t.recv(),
            None => Err(TransportError::Disconnected),
        }
    }
    fn recv_limited(
        &mut self,
        limits: TransportConfig,
    ) -> Result<veil_core::mpc::Frame, TransportError> {
        match &mut self.inner {
            Some(t) => t.recv_limited(limits),
            None => Err(TransportError::Disconnected),
        }
    }
    fn abort(&mut self, reason: &str) {
        if let Some(t) = &mut self.inner {
            t.abort(reason)
        }
    }
}

/// A client that dies mid-generation (its connection closes inside a step): the server's
/// session fails at once with the transport error (no hang until a timeout) and returns,
/// dropping the session's encrypted cache.
#[test]
fn a_client_that_leaves_mid_generation_ends_the_servers_session() {
    let m = model();
    let ck = ckks();
    let opts = DecodeOptions {
        max_ctx: 8,
        ..DecodeOptions::default()
    };
    // Count a whole session's sends first, then cut one at two thirds of them.
    let mut sends = 0;
    for cut in [None, Some(0usize)] {
        let (a, mut b) = mem_pair(tcfg());
        let left = cut.map_or(usize::MAX, |_| 2 * sends / 3);
        let mut a = Cut {
            inner: Some(a),
            left,
        };
        let t0 = Instant::now();
        let (client, server) = std::thread::scope(|s| {
            let h = s.spawn(|| serve_one(&mut b, &m, &ck, &opts));
            let r = greedy_client(&mut a, &ck, &m, &[3, 17], 3, 8, &opts);
            (r, h.join().unwrap())
        });
        if cut.is_none() {
            assert!(client.is_ok() && server.is_ok());
            sends = usize::MAX - a.left;
            continue;
        }
        let e = server.expect_err("the server's session must fail");
        println!(
            "cut after {} of {sends} sends: server {e}; client {:?}",
            2 * sends / 3,
            client.err()
        );
        assert!(
            matches!(e.transport(), Some(TransportError::Disconnected))
                || matches!(e.transport(), Some(TransportError::PeerAborted(_))),
            "{e}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the server waited for a timeout"
        );
    }
}
