#![no_main]
//! The session's decoders (`veil_host::bert`) over hostile bytes: the first byte picks the
//! decoder (Hello, Accept, Refusal, report), the rest is its payload. Each must return a value
//! or a typed error, never panic, and every value it accepts must re-encode to exactly the bytes
//! it came from (the encodings are canonical).
//! The body is `veil_fuzz::fuzz_session_decode` (also run by the stable driver, `replay --smoke`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| veil_fuzz::fuzz_session_decode(data));
