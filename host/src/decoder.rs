//! Private generation sessions with a causal decoder, on the server framework
//! ([`crate::serve`]): the client (MPC party P0) holds the CKKS secret key, the prompt and the
//! published model's embedding table; the server (P1) holds the decoder and public key material
//! only, and keeps every layer's keys and values encrypted under the client's key
//! ([`veil_core::decoder::run::DecodeRun`]). A session runs:
//!
//! 1. **Hello.** The client sends a [`DecodeHello`]: the protocol version, the [`fingerprint`]
//!    of the session's [`DecodePlan`] (the architecture, the maximum context, the activation
//!    bounds and each norm's shift and widening: everything public both parties derive), the id
//!    of the CKKS parameter set, the maximum context it asks for and its OT (silent or IKNP).
//!    The server answers an accept, or a typed [`Refusal`] (another model or plan, other
//!    parameters or OT, a context past the server's limit, busy, malformed) and ends the
//!    session.
//! 2. **Keys** ([`crate::party`]): the public key and the evaluation keys of the plan's
//!    rotations, seed compressed.
//! 3. **Base OT** ([`crate::mpc::setup_party`]).
//! 4. **Steps.** Per position the client sends [`TAG_STEP`] (one byte: whether it wants this
//!    position's logits), then both parties run one decode step
//!    ([`veil_core::decoder::run::DecodeRun::step`]) under [`crate::mpc::drive`]. The client
//!    embeds each token itself, samples each next token from the logits only it learns, and
//!    ends with [`TAG_END`]. The server frees the session's cache when the session ends, however
//!    it ends (an end frame, a disconnect, a timeout, a failed step).
//!
//! What the server learns: the number of steps (the prompt's length plus the tokens generated,
//! so also where the client stopped), which steps asked for logits, and nothing of any value:
//! every value it touches is a CKKS ciphertext under the client's key or an MPC share.
//!
//! # Messages of this module
//!
//! Tags `0x0C01..=0x0C04` (no other protocol uses `0x0Cxx`); refusals are the session
//! framework's ([`crate::bert::TAG_REFUSE`], [`Refusal`]). Every decoder is total over hostile
//! bytes (exact lengths, typed errors):
//!
//! | tag | from | payload |
//! |---|---|---|
//! | [`TAG_DECODE_HELLO`] `0x0C01` | client | `version u16 ‖ fingerprint [u8; 32] ‖ params_id u64 ‖ max_ctx u32 ‖ silent_ot u8` (47 bytes) |
//! | [`TAG_DECODE_ACCEPT`] `0x0C02` | server | `version u16` |
//! | [`TAG_STEP`] `0x0C03` | client | `logits u8` (0 or 1) |
//! | [`TAG_END`] `0x0C04` | client | empty |

use crate::bert::{DecodeError, Refusal, RefuseCode, SessionError, SessionOptions, TAG_REFUSE};
use crate::party::{Client, KeyExchangeStats, KeyRequest, Server};
use crate::serve::{Handler, HelloMessage, ServerOptions, SessionEnd};
use crate::transport::{frame, Transport};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Instant;
use veil_core::ckks::Ckks;
use veil_core::decoder::plan::{session_params, DecodePlan, Ranges, MPC_CONFIG};
use veil_core::decoder::reference::{embed_token, step_tracked, ActRanges, KvCache};
use veil_core::decoder::run::{DecodeRun, ServedDecoder};
use veil_core::decoder::{DecoderWeights, Family};
use veil_core::hybrid::BlockCost;
use veil_core::mpc::PartyId;
use veil_core::PolyBackend;

/// This build's decode session protocol version.
pub const DECODE_VERSION: u16 = 1;
/// The client's hello.
pub const TAG_DECODE_HELLO: u16 = 0x0C01;
/// The server's accept.
pub const TAG_DECODE_ACCEPT: u16 = 0x0C02;
/// One decode step (its payload: whether the client wants the logits).
pub const TAG_STEP: u16 = 0x0C03;
/// The client ends the session.
pub const TAG_END: u16 = 0x0C04;
/// The hello's payload length.
pub const DECODE_HELLO_LEN: usize = 47;
/// The memory a decode session is counted for against a server's budget, bytes, before its
/// cache: the evaluation keys, the plan and one step's ciphertexts and shares. Measured: a
/// SmolLM2 server process (its weights in `f64` included) held 1.7 GB in a session.
pub const DECODER_SESSION_MEMORY: u64 = 2_000_000_000;
/// What each position of a session's maximum context adds (the encrypted cache): SmolLM2 holds
/// about 1.5 MB per position (30 layers, a key and a value ciphertext per 32 positions).
pub const DECODER_POSITION_MEMORY: u64 = 2_000_000;

/// The public model both parties hold: the decoder's weights (the client reads only its
/// embedding table and architecture) and the activation bounds calibrated on it.
#[derive(Debug)]
pub struct DecoderModel {
    /// The weights.
    pub weights: DecoderWeights,
    /// What the calibration text reached ([`calibrate`]).
    pub calibration: ActRanges,
}

/// Runs the `f64` reference over each token sequence of `texts` (fresh caches; each cut to the
/// model's context, an empty one skipped) and records the
/// magnitudes the steps reach: the activation bounds of a session and each norm's input, which
/// plan the conversions and the norms ([`decode_plan`]). Both parties run it on the same public
/// text (never the client's prompt), so they derive the same plan.
pub fn calibrate(w: &DecoderWeights, texts: &[Vec<u32>]) -> Result<ActRanges, veil_core::Error> {
    let mut r = ActRanges::default();
    for ids in texts {
        let ids = &ids[..ids.len().min(w.cfg.context)];
        if ids.is_empty() {
            continue;
        }
        let mut cache = KvCache::new(&w.cfg, ids.len())?;
        for &t in ids {
            step_tracked(w, &mut cache, t, &mut r)?;
        }
    }
    Ok(r)
}

/// The public text both parties calibrate a served decoder on ([`calibration_ids`],
/// [`calibrate`]): a greeting, a sentence of facts, a list of numbers, and a chat turn in the
/// ChatML form `veil generate` wraps prompts in (its control tokens and system prompt are where
/// chat models put large activations); never a client's prompt.
pub const CALIBRATION_TEXT: [&str; 4] = [
    "Hello! How are you today?",
    "Paris is a city in Europe, on the river Seine.",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
     Face<|im_end|>\n<|im_start|>user\nHello! How are you today?<|im_end|>\n\
     <|im_start|>assistant\n",
];

/// [`CALIBRATION_TEXT`] tokenized by the model's own tokenizer, for [`calibrate`].
pub fn calibration_ids(
    tok: &tokenizers::Tokenizer,
) -> Result<Vec<Vec<u32>>, crate::model::ModelError> {
    CALIBRATION_TEXT
        .iter()
        .map(|t| {
            tok.encode(*t, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| crate::model::ModelError::Tokenizer(e.to_string()))
        })
        .collect()
}

/// The session's plan for a maximum context `max_ctx`: the bounds from the calibration, and
/// each norm planned per site when the calibration recorded every norm (see
/// [`DecodePlan::with_norms`]).
pub fn decode_plan(model: &DecoderModel, max_ctx: usize) -> Result<DecodePlan, SessionError> {
    let p = session_params().map_err(SessionError::Params)?;
    let cal = &model.calibration;
    let plan = DecodePlan::with_options(
        &p,
        &model.weights.cfg,
        max_ctx,
        None,
        Ranges::calibrated(cal),
    )
    .map_err(SessionError::Plan)?;
    if cal.norms.is_empty() {
        return Ok(plan);
    }
    plan.with_norms(cal).map_err(SessionError::Plan)
}

/// The fingerprint of a plan: SHA-256 over the protocol's version (v4: the conversions into
/// the dense and compact layouts lift distinct values only), the architecture, the maximum
/// context, the head groups, the activation bounds and every norm's shift and widening.
pub fn fingerprint(plan: &DecodePlan) -> [u8; 32] {
    let cfg = plan.cfg();
    let mut h = Sha256::new();
    h.update(b"veil/decoder/plan/v4");
    h.update([match cfg.family {
        Family::Llama => 1u8,
        Family::Gpt2 => 2u8,
    }]);
    for v in [
        cfg.layers,
        cfg.hidden,
        cfg.heads,
        cfg.kv_heads,
        cfg.ffn,
        cfg.vocab,
        cfg.context,
        plan.max_ctx(),
        plan.layout().groups(),
    ] {
        h.update((v as u64).to_le_bytes());
    }
    h.update(cfg.rope_base.to_bits().to_le_bytes());
    h.update(cfg.norm_eps.to_bits().to_le_bytes());
    h.update([cfg.tied_head as u8]);
    let r = plan.ranges();
    for v in [r.x, r.y, r.g] {
        h.update(v.to_le_bytes());
    }
    for n in plan.norm_shifts() {
        h.update(n.shift.to_le_bytes());
        h.update((n.wide.len() as u64).to_le_bytes());
        h.update(n.wide.iter().map(|&w| w as u8).collect::<Vec<u8>>());
    }
    h.finalize().into()
}

/// The client's first frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeHello {
    /// The client's protocol version.
    pub version: u16,
    /// The client's plan's [`fingerprint`].
    pub fingerprint: [u8; 32],
    /// The id of the client's CKKS parameter set.
    pub params_id: u64,
    /// The most positions the session holds (prompt and generated tokens).
    pub max_ctx: u32,
    /// Whether the client runs silent OT (Ferret) behind its COT pools; both parties must.
    pub silent_ot: bool,
}

impl DecodeHello {
    /// The payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(DECODE_HELLO_LEN);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&self.fingerprint);
        b.extend_from_slice(&self.params_id.to_le_bytes());
        b.extend_from_slice(&self.max_ctx.to_le_bytes());
        b.push(self.silent_ot as u8);
        b
    }

    /// Decodes a payload of exactly [`DECODE_HELLO_LEN`] bytes.
    pub fn decode(p: &[u8]) -> Result<Self, DecodeError> {
        if p.len() != DECODE_HELLO_LEN {
            return Err(DecodeError::Length {
                expected: DECODE_HELLO_LEN,
                found: p.len(),
            });
        }
        if p[46] > 1 {
            return Err(DecodeError::BadValue("the OT byte must be 0 or 1"));
        }
        let mut fp = [0u8; 32];
        fp.copy_from_slice(&p[2..34]);
        Ok(DecodeHello {
            version: u16::from_le_bytes([p[0], p[1]]),
            fingerprint: fp,
            params_id: u64::from_le_bytes(p[34..42].try_into().unwrap_or_default()),
            max_ctx: u32::from_le_bytes(p[42..46].try_into().unwrap_or_default()),
            silent_ot: p[46] == 1,
        })
    }
}

impl HelloMessage for DecodeHello {
    const TAG: u16 = TAG_DECODE_HELLO;
    const VERSION: u16 = DECODE_VERSION;
    const NAME: &'static str = "decode hello";
    type Error = DecodeError;
    fn peek_version(payload: &[u8]) -> Option<u16> {
        (payload.len() >= 2).then(|| u16::from_le_bytes([payload[0], payload[1]]))
    }
    fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        DecodeHello::decode(payload)
    }
}

/// Settings of a decode session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeOptions {
    /// The MPC settings (the decoder's [`MPC_CONFIG`], silent OT, how long the server waits
    /// for the client's keys).
    pub session: SessionOptions,
    /// (Server) the largest maximum context a client may ask for: it bounds the encrypted
    /// cache the server holds for one session.
    pub max_ctx: usize,
    /// (Server) bytes of encoded weights one session keeps between steps
    /// ([`DecodeRun::with_weight_cache`]; 0: encoded at each use). It adds to the session's
    /// memory.
    pub weight_cache: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            session: SessionOptions {
                mpc: MPC_CONFIG,
                ..SessionOptions::default()
            },
            max_ctx: 128,
            weight_cache: 0,
        }
    }
}

/// What the server saw of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeServerStats {
    /// The session's maximum context.
    pub max_ctx: usize,
    /// Steps run (positions).
    pub steps: usize,
    /// The key exchange.
    pub key_exchange: KeyExchangeStats,
    /// Base-OT setup, seconds.
    pub setup_s: f64,
    /// The whole session, seconds.
    pub total_s: f64,
    /// MPC bytes both ways over the session.
    pub mpc_bytes: u64,
}

/// Serves one decode session over `t` (see the module documentation); public key material
/// only. The session's cache lives inside this call, so it is freed when the call returns,
/// whatever ended the session.
pub fn serve_one<B: PolyBackend>(
    t: &mut dyn Transport,
    model: &DecoderModel,
    ck: &Ckks<B>,
    opts: &DecodeOptions,
) -> Result<DecodeServerStats, SessionError> {
    let t0 = Instant::now();
    let hello = crate::bert::read_hello_or_refuse::<DecodeHello>(t)?;
    let max_ctx = hello.max_ctx as usize;
    let limit = opts.max_ctx.min(model.weights.cfg.context);
    if max_ctx == 0 || max_ctx > limit {
        return crate::bert::reject(
            t,
            Refusal::new(
                RefuseCode::BadLength,
                format!("a context of {max_ctx}: this server holds 1..={limit} positions"),
            ),
        );
    }
    if hello.params_id != ck.params().id() {
        return crate::bert::reject(
            t,
            Refusal::new(
                RefuseCode::OtherParams,
                format!(
                    "this server uses {} (id {:#018x}), the client {:#018x}",
                    ck.params().name(),
                    ck.params().id(),
                    hello.params_id
                ),
            ),
        );
    }
    if hello.silent_ot != opts.session.silent.is_some() {
        let name = |s: bool| if s { "silent OT" } else { "IKNP" };
        return crate::bert::reject(
            t,
            Refusal::new(
                RefuseCode::OtherParams,
                format!(
                    "this server runs {}, the client {} (veil generate --ot)",
                    name(opts.session.silent.is_some()),
                    name(hello.silent_ot)
                ),
            ),
        );
    }
    let plan = match decode_plan(model, max_ctx) {
        Ok(p) => p,
        Err(e) => {
            return crate::bert::reject(t, Refusal::new(RefuseCode::Unavailable, e.to_string()))
        }
    };
    if hello.fingerprint != fingerprint(&plan) {
        let c = &model.weights.cfg;
        return crate::bert::reject(
            t,
            Refusal::new(
                RefuseCode::OtherModel,
                format!(
                    "this server's decoder ({:?}, {} layers, hidden {}, vocabulary {}) plans \
                     otherwise at a context of {max_ctx}",
                    c.family, c.layers, c.hidden, c.vocab
                ),
            ),
        );
    }
    t.send(vec![frame(
        TAG_DECODE_ACCEPT,
        DECODE_VERSION.to_le_bytes().to_vec(),
    )])?;

    let galois = plan.rotations().len() + 1;
    let (server, key_exchange) = match opts.session.keys_timeout {
        Some(d) => Server::receive_keys(
            ck,
            &mut crate::bert::Patient {
                t: &mut *t,
                until: crate::transport::deadline_after(d),
            },
            galois,
        ),
        None => Server::receive_keys(ck, t, galois),
    }
    .map_err(SessionError::Keys)?;
    let (mut p, setup_s) = crate::bert::setup_party(PartyId::P1, &opts.session, t)?;
    let ch = p.channel();
    let served = ServedDecoder::new(&model.weights).map_err(SessionError::Params)?;
    let mut run = DecodeRun::server(&mut p, server.keys(), &plan, &served)
        .map_err(SessionError::Plan)?
        .with_weight_cache(opts.weight_cache);
    let mut steps = 0usize;
    // Step and end frames are 0 or 1 bytes: nothing larger is buffered.
    let small = crate::transport::TransportConfig::frame_limit(64);
    loop {
        let f = t
            .recv_limited(small)
            .map_err(|e| crate::bert::transport_failed(t, e))?;
        match f.tag {
            TAG_END if f.payload.is_empty() => break,
            TAG_STEP if f.payload.len() == 1 && f.payload[0] <= 1 => {
                let logits = f.payload[0] == 1;
                crate::mpc::drive(ch.clone(), run.step(None, logits, &mut |_| {}), t)
                    .map_err(SessionError::inference)?;
                steps += 1;
            }
            found => {
                t.abort("expected a step or the end");
                return Err(SessionError::UnexpectedMessage {
                    expected: "0x0c03 (step) or 0x0c04 (end)",
                    found,
                });
            }
        }
    }
    let s = ch.stats();
    Ok(DecodeServerStats {
        max_ctx,
        steps,
        key_exchange,
        setup_s,
        total_s: t0.elapsed().as_secs_f64(),
        mpc_bytes: [s.setup, s.offline, s.online]
            .iter()
            .map(|p| p.bytes_sent + p.bytes_recv)
            .sum(),
    })
}

/// What a client asks of a session.
pub struct GenerateRequest<'a> {
    /// The prompt's token ids (at least one).
    pub prompt: &'a [u32],
    /// The most tokens to generate (at least one); `prompt.len() + max_new_tokens − 1`
    /// positions must fit the session's maximum context.
    pub max_new_tokens: usize,
    /// The session's maximum context (the server's limit bounds it).
    pub max_ctx: usize,
    /// Picks the next token from the logits (greedy or sampled, at the client).
    pub pick: &'a mut dyn FnMut(&[f64]) -> u32,
    /// Whether a token ends the generation (the model's end of turn).
    pub stop: &'a dyn Fn(u32) -> bool,
    /// Called with each generated token as it arrives, and the step's seconds.
    pub on_token: &'a mut dyn FnMut(u32, f64),
    /// Called after every block of every step.
    pub progress: &'a mut dyn FnMut(&BlockCost),
}

impl std::fmt::Debug for GenerateRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GenerateRequest {{ prompt: <{} tokens>, max_new_tokens: {}, max_ctx: {} }}",
            self.prompt.len(),
            self.max_new_tokens,
            self.max_ctx
        )
    }
}

/// What the client learns from a session.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateResult {
    /// The generated ids.
    pub tokens: Vec<u32>,
    /// The prompt's steps (prefill, one position per step) up to the first token, seconds.
    pub prefill_s: f64,
    /// Each later token's step, seconds.
    pub per_token_s: Vec<f64>,
    /// MPC bytes both ways over the session (the base OT included).
    pub bytes: u64,
    /// The key exchange.
    pub key_exchange: KeyExchangeStats,
    /// Base-OT setup, seconds.
    pub setup_s: f64,
}

/// Runs one private generation as the client (MPC party P0) over `t`: the hello, the keys
/// (generated here from the OS-seeded CSPRNG; only public material leaves), the base OT, the
/// prompt's steps and one step per generated token, then the end frame. A prompt or request
/// that cannot fit is refused before anything is sent.
pub fn run_generate<B: PolyBackend>(
    t: &mut dyn Transport,
    ck: &Ckks<B>,
    model: &DecoderModel,
    req: GenerateRequest<'_>,
    opts: &DecodeOptions,
) -> Result<GenerateResult, SessionError> {
    let w = &model.weights;
    let n = req.prompt.len();
    if n == 0 || req.max_new_tokens == 0 {
        return Err(SessionError::Input(
            "an empty prompt, or no token to generate".into(),
        ));
    }
    if let Some(&bad) = req.prompt.iter().find(|&&id| id as usize >= w.cfg.vocab) {
        return Err(SessionError::Input(format!(
            "token {bad} is past the vocabulary ({})",
            w.cfg.vocab
        )));
    }
    let steps = n.saturating_add(req.max_new_tokens - 1);
    if req.max_ctx == 0 || steps > req.max_ctx || req.max_ctx > w.cfg.context {
        return Err(SessionError::Input(format!(
            "{n} prompt tokens and {} new ones need {steps} positions; the session holds {} \
             (the model {})",
            req.max_new_tokens, req.max_ctx, w.cfg.context
        )));
    }
    let plan = decode_plan(model, req.max_ctx)?;
    let hello = DecodeHello {
        version: DECODE_VERSION,
        fingerprint: fingerprint(&plan),
        params_id: ck.params().id(),
        max_ctx: req.max_ctx as u32,
        silent_ot: opts.session.silent.is_some(),
    };
    t.send(vec![frame(TAG_DECODE_HELLO, hello.encode())])?;
    let f = crate::bert::recv(t)?;
    match f.tag {
        TAG_DECODE_ACCEPT if f.payload == DECODE_VERSION.to_le_bytes() => {}
        TAG_DECODE_ACCEPT => {
            t.abort("malformed accept");
            return Err(SessionError::Decode {
                what: "decode accept",
                source: DecodeError::Length {
                    expected: 2,
                    found: f.payload.len(),
                },
            });
        }
        TAG_REFUSE => return Err(crate::bert::refused(&f.payload)),
        found => {
            t.abort("expected an accept or a refusal");
            return Err(SessionError::UnexpectedMessage {
                expected: "0x0c02 (accept) or 0x0b03 (refuse)",
                found,
            });
        }
    }
    let mut rng = crate::bert::session_rng()?;
    let client = Client::new(ck, &mut rng).map_err(SessionError::Keys)?;
    let key_exchange = client
        .send_keys(
            t,
            &KeyRequest {
                rotations: plan.rotations().to_vec(),
                conjugation: true,
            },
            &mut rng,
        )
        .map_err(SessionError::Keys)?;
    let (mut p, setup_s) = crate::bert::setup_party(PartyId::P0, &opts.session, t)?;
    let ch = p.channel();
    let mut run =
        DecodeRun::client(&mut p, ck, client.secret_key(), &plan).map_err(SessionError::Plan)?;
    let (mut tokens, mut per_token_s) = (Vec::new(), Vec::new());
    let mut prefill_s = 0.0;
    let tp = Instant::now();
    let mut next = req.prompt[0];
    for i in 0..steps {
        let ts = Instant::now();
        let tok = if i < n { req.prompt[i] } else { next };
        let want = i + 1 >= n;
        let x = embed_token(w, tok, i).map_err(SessionError::Params)?;
        t.send(vec![frame(TAG_STEP, vec![want as u8])])?;
        let out = crate::mpc::drive(ch.clone(), run.step(Some(&x), want, &mut *req.progress), t)
            .map_err(SessionError::inference)?;
        if let Some(l) = out {
            next = (req.pick)(&l);
            tokens.push(next);
            let s = ts.elapsed().as_secs_f64();
            if i + 1 == n {
                prefill_s = tp.elapsed().as_secs_f64();
            } else {
                per_token_s.push(s);
            }
            (req.on_token)(next, s);
            if (req.stop)(next) {
                break;
            }
        }
    }
    t.send(vec![frame(TAG_END, Vec::new())])?;
    let s = ch.stats();
    Ok(GenerateResult {
        tokens,
        prefill_s,
        per_token_s,
        bytes: [s.setup, s.offline, s.online]
            .iter()
            .map(|p| p.bytes_sent + p.bytes_recv)
            .sum(),
        key_exchange,
        setup_s,
    })
}

/// The decoder family's [`Handler`] on the server framework: [`serve_one`] per client.
pub struct DecoderHandler<B: PolyBackend> {
    /// The served model.
    pub model: Arc<DecoderModel>,
    /// The CKKS context of [`session_params`], shared by every session.
    pub ckks: Arc<Ckks<B>>,
    /// The session settings.
    pub opts: DecodeOptions,
}

impl<B: PolyBackend> Handler for DecoderHandler<B> {
    fn name(&self) -> &str {
        "veil serve (decoder)"
    }

    fn serve(&self, t: &mut dyn Transport) -> SessionEnd {
        crate::bert::session_end(serve_one(t, &self.model, &self.ckks, &self.opts), |st| {
            format!(
                "{} steps (context {}), {:.1} MB MPC, {:.1} MB keys",
                st.steps,
                st.max_ctx,
                st.mpc_bytes as f64 / 1e6,
                (st.key_exchange.public_key_bytes + st.key_exchange.evaluation_key_bytes) as f64
                    / 1e6
            )
        })
    }

    fn refuse_busy(&self, t: &mut dyn Transport, reason: &str) {
        let _ = crate::bert::reject::<()>(t, Refusal::new(RefuseCode::Busy, reason));
    }

    fn session_memory(&self) -> u64 {
        DECODER_SESSION_MEMORY + DECODER_POSITION_MEMORY * self.opts.max_ctx as u64
    }
}

/// Accepts clients on `listener` and serves `model` to each on its own thread
/// ([`crate::serve::serve`]).
pub fn serve<B: PolyBackend>(
    listener: std::net::TcpListener,
    model: Arc<DecoderModel>,
    ckks: Arc<Ckks<B>>,
    opts: DecodeOptions,
    server: ServerOptions,
) -> crate::serve::ServeSummary {
    crate::serve::serve(
        listener,
        Arc::new(DecoderHandler { model, ckks, opts }),
        server,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_refuses_bad_lengths() {
        let h = DecodeHello {
            version: DECODE_VERSION,
            fingerprint: [7; 32],
            params_id: 0x0123_4567_89ab_cdef,
            max_ctx: 64,
            silent_ot: true,
        };
        let b = h.encode();
        assert_eq!(b.len(), DECODE_HELLO_LEN);
        assert_eq!(DecodeHello::decode(&b), Ok(h));
        let mut bad = b.clone();
        bad[46] = 2;
        assert!(DecodeHello::decode(&bad).is_err());
        for n in [0, 1, 46, 48] {
            let mut c = b.clone();
            c.resize(n, 0);
            assert!(DecodeHello::decode(&c).is_err());
        }
        assert_eq!(
            <DecodeHello as HelloMessage>::peek_version(&b),
            Some(DECODE_VERSION)
        );
    }
}
