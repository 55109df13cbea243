//! Veil host.
