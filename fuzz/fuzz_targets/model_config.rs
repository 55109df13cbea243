#![no_main]
//! The model-directory loader's parsers on hostile bytes: `config.json`, `model.safetensors`
//! (against a tiny fixed configuration, or against a configuration the input itself carries)
//! and the head file. Any outcome but a panic, a hang or an unbounded allocation is fine.
use libfuzzer_sys::fuzz_target;
use veil_host::model::{head, parse_config, parse_weights, CheckpointConfig};

const TINY: &[u8] = br#"{"model_type": "bert", "hidden_act": "gelu", "hidden_size": 4,
    "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 6,
    "max_position_embeddings": 8, "vocab_size": 10}"#;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            let _ = parse_config(rest);
        }
        1 => {
            let cfg: CheckpointConfig = parse_config(TINY).expect("the fixed config parses");
            let _ = parse_weights(rest, &cfg);
        }
        2 => {
            // config.json, a NUL byte, then model.safetensors.
            let cut = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            if let Ok(cfg) = parse_config(&rest[..cut]) {
                let _ = parse_weights(rest.get(cut + 1..).unwrap_or(&[]), &cfg);
            }
        }
        _ => {
            let _ = head::parse_head(rest, 4);
        }
    }
});
