#![no_main]
//! The model-directory loader's parsers on hostile bytes: `config.json`, `model.safetensors`
//! (against a tiny fixed configuration, or against a configuration the input itself carries)
//! and the head file. Any outcome but a panic, a hang or an unbounded allocation is fine.
//! The body is `veil_fuzz::fuzz_model_config` (also run by the stable driver, `replay --smoke`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| veil_fuzz::fuzz_model_config(data));
