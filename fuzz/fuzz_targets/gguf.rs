#![no_main]
//! The GGUF reader (decoder checkpoints) on hostile bytes: the header, the metadata, the tensor
//! table, every tensor's decoder and the Llama architecture's checks. Any outcome but a panic,
//! a hang or an unbounded allocation is fine. The body is `veil_fuzz::fuzz_gguf` (also run by
//! the stable driver, `replay --smoke`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| veil_fuzz::fuzz_gguf(data));
