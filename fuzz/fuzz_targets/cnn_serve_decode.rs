#![no_main]
//! The CNN serving handshake's decoders (`veil_host::cnn::serve`) over hostile bytes: the
//! first byte picks the decoder (hello, acceptance, refusal), the rest is its payload. Each must
//! return a value or a typed error, never panic, and every value it accepts must re-encode to
//! exactly the bytes it came from (the encodings are canonical).
//! The body is `veil_fuzz::fuzz_cnn_serve_decode` (also run by the stable driver, `replay --smoke`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| veil_fuzz::fuzz_cnn_serve_decode(data));
