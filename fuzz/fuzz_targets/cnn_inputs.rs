#![no_main]
//! The CNN inputs on hostile bytes: the checkpoint parser (`veil_host::model::cnn::parse_cnn`,
//! safetensors with the `orion-lenet` metadata), the IDX image and label parsers (raw or gzip,
//! with the decompression bound), the CIFAR-10 batch parser and the PNG decoder. Any outcome but a panic, a hang or an unbounded
//! allocation is fine.
//! The body is `veil_fuzz::fuzz_cnn_inputs` (also run by the stable driver, `replay --smoke`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| veil_fuzz::fuzz_cnn_inputs(data));
