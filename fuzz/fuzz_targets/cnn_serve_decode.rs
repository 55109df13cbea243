#![no_main]
//! The CNN serving handshake's decoders (`veil_host::vision::serve`) over hostile bytes: the
//! first byte picks the decoder (hello, acceptance, refusal), the rest is its payload. Each must
//! return a value or a typed error, never panic, and every value it accepts must re-encode to
//! exactly the bytes it came from (the encodings are canonical).
use libfuzzer_sys::fuzz_target;
use veil_host::vision::serve::{
    decode_accept, decode_refusal, encode_accept, encode_refusal, CnnHello,
};

fuzz_target!(|data: &[u8]| {
    let Some((&which, b)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(h) = CnnHello::decode(b) {
                assert_eq!(h.encode(), b);
            }
            let _ = CnnHello::peek_version(b);
        }
        1 => {
            if let Ok(v) = decode_accept(b) {
                assert_eq!(encode_accept(v), b);
            }
        }
        _ => {
            if let Ok((code, reason)) = decode_refusal(b) {
                assert_eq!(encode_refusal(code, &reason), b);
                let _ = code.to_string();
            }
        }
    }
});
