//! The plaintext `f64` reference of the encoder (owned by the model helper; see the issue).
