#![no_main]
//! The session's decoders (`veil_host::session`) over hostile bytes: the first byte picks the
//! decoder (Hello, Accept, Refusal, report), the rest is its payload. Each must return a value
//! or a typed error, never panic, and every value it accepts must re-encode to exactly the bytes
//! it came from (the encodings are canonical).
use libfuzzer_sys::fuzz_target;
use veil_host::session::{decode_report, encode_report, Accept, Hello, Refusal};

fuzz_target!(|data: &[u8]| {
    let Some((&which, b)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(h) = Hello::decode(b) {
                assert_eq!(h.encode(), b);
                let _ = h.check_lengths();
            }
            let _ = Hello::peek_version(b);
        }
        1 => {
            if let Ok(a) = Accept::decode(b) {
                assert_eq!(a.encode(), b);
            }
        }
        2 => {
            if let Ok(r) = Refusal::decode(b) {
                assert_eq!(r.encode(), b);
                let _ = r.to_string();
            }
        }
        _ => {
            if let Ok(blocks) = decode_report(b) {
                assert_eq!(encode_report(&blocks), b);
            }
        }
    }
});
