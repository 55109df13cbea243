#![no_main]
//! The CNN inputs on hostile bytes: the checkpoint parser (`veil_host::model::cnn::parse_cnn`,
//! safetensors with the `orion-lenet` metadata), the IDX image and label parsers (raw or gzip,
//! with the decompression bound), the CIFAR-10 batch parser and the PNG decoder. Any outcome but a panic, a hang or an unbounded
//! allocation is fine.
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use veil_host::model::{cnn, images};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let p = Path::new("fuzz");
    match mode % 5 {
        0 => {
            let _ = cnn::parse_cnn(rest, "fuzz");
        }
        1 => {
            if let Ok(im) = images::parse_idx_images(p, rest) {
                assert_eq!(im.pixels.len(), im.count * im.height * im.width);
            }
        }
        2 => {
            let _ = images::parse_idx_labels(p, rest);
        }
        3 => {
            if let Ok((im, labels)) = images::parse_cifar_batch(p, rest) {
                assert_eq!(labels.len(), im.count);
                assert_eq!(im.pixels.len(), im.count * 3 * 32 * 32);
            }
        }
        _ => {
            if let Ok(im) = images::parse_png(p, rest) {
                assert_eq!(im.pixels.len(), im.channels * im.height * im.width);
            }
        }
    }
});
