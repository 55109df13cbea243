//! Two-party MPC engine (semi-honest, dealer-free), sans-IO.
//!
//! This module implements the MPC half of the hybrid CKKS + 2PC design of
//! EncFormer (§IV, Table III, Appendix C) with the nonlinear building blocks of
//! CrypTFlow2/SCI (Rathee et al., CCS 2020) and Cheetah (Huang et al., USENIX
//! Security 2022):
//!
//! * additive secret shares over `Z_{2^ℓ}` (`ℓ ≤ 64`, fixed point with `F`
//!   fractional bits, EncFormer uses `ℓ = 43, F = 13`) — [`ring`];
//! * additive shares over `Z_q`, `q < 2^124` a product of RNS primes, used by
//!   the CKKS↔MPC conversion — [`zq`];
//! * oblivious transfer: Chou–Orlandi base OT on Ristretto255, IKNP OT
//!   extension and the Ferret silent OT ([`ot::silent`], random-COT pools at
//!   ≈ 0.45 bit per COT plus 1 derandomization bit online, via
//!   [`Party::with_silent_ot`]) behind the [`ot::CotSender`]/[`ot::CotReceiver`]
//!   traits — [`ot`];
//! * batched protocols (multiplication, truncation, millionaires' comparison,
//!   MSB/DReLU/ReLU, B2A, multiplexer, ring↔field extension, polynomials) —
//!   [`party`], [`arith`], [`cmp`], [`ext`];
//! * Beaver triples by Gilboa's OT multiplication, or by RLWE oblivious linear
//!   evaluation ([`he_triples`], Cheetah-style, about half the bytes);
//! * typed messages, one per protocol step, and the table of frame tags —
//!   [`msgs`]. Every decoder returns a typed [`MpcError`] on malformed bytes.
//!
//! # Construction
//!
//! [`Party::new`] + [`Party::setup`] gives the default engine (base OT, IKNP
//! with random-COT pools, common seed). [`Party::with_ot`] injects another
//! correlated OT (the contract it must meet is in [`ot`]), and
//! [`Party::with_triple_source`] another source of Beaver triples
//! ([`arith::TripleSource`]). The ideal OT and ideal triples of the tests
//! live in `insecure`, compiled only for this crate's unit tests and with the
//! test-only feature `insecure-test-support` (never enabled by the `veil`
//! binary; CI checks it).
//!
//! # Sans-IO execution model
//!
//! Every protocol is an `async fn` over a [`channel::Channel`]; the compiler
//! turns it into a state machine. A [`channel::Session`] owns that state
//! machine: the caller (the host driver) polls it, ships the
//! [`channel::Frame`]s it produced, and delivers the peer's frames. No I/O,
//! threads or clocks are used in this crate. Every frame carries a Lamport
//! style *depth* so that both parties can count communication rounds exactly
//! (the length of the longest causal chain of messages), and bytes and rounds
//! are accounted per [`channel::Phase`] (setup / offline / online).
//!
//! # Costs (ℓ = 43, F = 13, radix m = 4, IKNP; measured by `veil-bench mpc`)
//!
//! Bytes per element count both directions, offline + online, 10-byte frame
//! headers included; rounds are causal depth (offline + online).
//!
//! | protocol | COTs/elem | bytes/elem | rounds |
//! |---|---|---|---|
//! | Π× fixed point (Gilboa triples + Beaver + `KnownMsb` trunc) | 87 | 1652 | 2 + 3 |
//! | Π× with `TruncMode::Exact` (exactly `⌊x·y/2^F⌉`) | 214 | 3792 | 12 |
//! | truncation (`KnownMsb`) | 1 | 17.6 | 2 |
//! | truncation (`FullRange` / `Exact`) | 64 / 128 | 1075 / 2158 | 9 / 9 |
//! | x < y (MSB of x − y, ℓ−1-bit millionaires) | 62 | 1040 | 1 + 6 |
//! | ReLU (DReLU + mux) | 64 | 1083 | 1 + 8 |
//! | mux / select | 2 | 42.8 | 2 |
//! | B2A | 1 | 21.4 | 2 |
//! | Ring2Field (Z_{2^ℓ} → Z_q, q ≈ 2^104) | 64 | 1087 | 1 + 8 |
//! | Ring2Field, known MSB (`|x| < 2^{ℓ-2}`, q = 2^123) | 1 | 31.4 | 2 |
//! | exact rounding `round(x/2^k)`, `k = 16` (`|x| < 2^{ℓ-2}`) | ≈ 24 | ≈ 410 | 1 + 6 |
//! | Field2Ring (Z_q → Z_{2^ℓ}) | 0 | 0 | 0 |
//!
//! IKNP spends 16 bytes per COT, which dominates every nonlinear protocol.
//! [`Party::preprocess_ot`] moves all OT extension traffic offline
//! (random-COT pools, 1 derandomization bit per COT online). With the pools
//! filled by the silent OT ([`Party::with_silent_ot`], [`ot::silent`],
//! 0.447 bit per COT in steady state) `veil-bench mpc --ot silent` measured
//! at n = 2^16 over TCP: Π× 299 B/elem (220 of them the Gilboa triple
//! corrections; the first extension of the session is charged to it),
//! truncation 1.8, x < y 56.3, ReLU 67.3, mux 11.0, B2A 5.5, Ring2Field 79.0.
//!
//! With the triples of [`he_triples::HeTriples`] (RLWE oblivious linear evaluation, `N = 2^14`,
//! 126.5 B per triple instead of Gilboa's ≈ 241) injected by
//! [`Party::with_triple_source`], Π× is 150 B/elem in the same setting (`veil-bench mpc
//! --triples rlwe`, the benchmark's default); its 735 KB key travels once, in the setup. A call
//! pays whole batches of `N` triples, so the source fits long runs of products, not single
//! small ones; the default engine keeps Gilboa's triples.
//!
//! # Security model
//!
//! Semi-honest two-party security; all correlations (Beaver triples, bit
//! triples, OT) are generated between the two parties by OT or, with
//! [`he_triples::HeTriples`], by RLWE encryption under P0's key; there is no
//! trusted dealer. Randomness comes from a caller supplied
//! `CryptoRng + RngCore`. Secret shares zeroize on drop and are redacted in
//! `Debug` output.

pub mod arith;
pub mod channel;
pub mod cmp;
pub mod error;
pub mod ext;
pub mod he_triples;
#[cfg(any(test, feature = "insecure-test-support"))]
pub mod insecure;
pub mod kind;
pub mod msgs;
pub mod ot;
pub mod pack;
pub mod party;
pub mod ring;
pub mod shares;
pub mod triples;
pub mod zq;

pub use channel::{Channel, Frame, Phase, PhaseStats, Session, Stats};
pub use error::{Defect, MpcError};
pub use he_triples::{HeTripleParams, HeTriples};
pub use msgs::{Message, MsgKind};
pub use ot::{CotReceiver, CotSender};
pub use party::{MpcConfig, Party, PartyId, TruncMode};
pub use ring::RingCfg;
pub use shares::{BoolShares, FieldShares, RingShares};
pub use triples::{TripleSource, Triples};
pub use zq::{Modulus, RnsBasis};
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_msgs;
