//! Veil CPU backend.
