//! Veil cross-crate tests.
