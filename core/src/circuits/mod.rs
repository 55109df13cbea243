//! Circuits over the CKKS layer: the executor interface every homomorphic kernel is written
//! against ([`exec`]: a real RNS-CKKS executor and a symbolic dry run that count operations in
//! one place), shared by the Transformer kernels and the CNN layers; baby-step giant-step linear
//! transforms on the slots ([`lintrans`]); real polynomials of the two real vectors of a
//! complex-packed ciphertext ([`parts`]); Chebyshev polynomial evaluation at optimal depth with
//! exact scales ([`poly`]); and bootstrapping built on both ([`boot`]).

pub mod boot;
pub mod exec;
pub mod lintrans;
pub mod parts;
pub mod poly;

pub use boot::{BootCost, BootKeys, BootLevels, BootParams, BootStep, Bootstrapper, Lean};
pub use exec::{CkksExec, Exec, OpCounts, PlainTerm, PtValues, SymCt, SymExec};
pub use lintrans::{EncodedLinearTransform, LinearTransform, TransformCost};
pub use parts::{eval_part_polys, part_poly_depth};
pub use poly::{ChebyshevPoly, PolyCost};
