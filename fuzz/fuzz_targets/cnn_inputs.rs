#![no_main]
//! The CNN inputs on hostile bytes: the checkpoint parser (`veil_host::model::cnn::parse_cnn`,
//! safetensors with the `orion-lenet` metadata) and the IDX image and label parsers (raw or
//! gzip, with the decompression bound). Any outcome but a panic, a hang or an unbounded
//! allocation is fine.
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use veil_host::model::{cnn, images};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let p = Path::new("fuzz");
    match mode % 3 {
        0 => {
            let _ = cnn::parse_cnn(rest, "fuzz");
        }
        1 => {
            if let Ok(im) = images::parse_idx_images(p, rest) {
                assert_eq!(im.pixels.len(), im.count * im.height * im.width);
            }
        }
        _ => {
            let _ = images::parse_idx_labels(p, rest);
        }
    }
});
