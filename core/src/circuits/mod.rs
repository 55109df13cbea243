//! Circuits over the CKKS layer: the executor interface every homomorphic kernel is written
//! against ([`exec`]: a real RNS-CKKS executor and a symbolic dry run that count operations in
//! one place), shared by the Transformer kernels and the CNN layers.

pub mod exec;

pub use exec::{CkksExec, Exec, OpCounts, PtValues, SymCt, SymExec};
