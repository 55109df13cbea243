//! **INSECURE — for tests only.** Ideal functionalities whose state both
//! parties derive from one shared test seed: an ideal correlated OT and an
//! ideal source of Beaver triples. Anyone who knows the seed knows every OT
//! offset, every pad and every triple, so these provide **no security at
//! all**; they exist to test the protocols apart from the OT and triple
//! generation (and to show that an injected OT plugs in).
//!
//! This module is compiled only for veil-core's own unit tests and with the
//! cargo feature `insecure-test-support`, which only test crates enable (CI
//! fails if a non-test build of the workspace, the `veil` binary included,
//! has it). Every item is named `Insecure*` / `insecure_*`.

use crate::mpc::channel::Channel;
use crate::mpc::error::Result;
use crate::mpc::ot::{AesPrg, BlocksFuture, BoxFuture, CotReceiver, CotSender};
use crate::mpc::party::{MpcConfig, Party, PartyId};
use crate::mpc::ring::RingCfg;
use crate::mpc::shares::RingShares;
use crate::mpc::triples::{TripleSource, Triples};
use alloc::boxed::Box;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

fn derive(seed: &[u8; 16], label: &[u8]) -> AesPrg {
    let mut h = Sha256::new();
    h.update(b"veil/INSECURE-test-ideal/v1");
    h.update(label);
    h.update(seed);
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    let prg = AesPrg::new(k);
    k.zeroize();
    prg
}

fn next_block(prg: &mut AesPrg) -> u128 {
    let mut b = [0u8; 16];
    prg.fill(&mut b);
    u128::from_le_bytes(b)
}

/// One OT direction (`dir` = the sender's index): `Δ` and the stream of `q_j`.
fn direction(seed: &[u8; 16], dir: u8) -> (u128, AesPrg) {
    let delta = next_block(&mut derive(seed, &[b'D', dir]));
    (delta, derive(seed, &[b'Q', dir]))
}

/// **INSECURE, test-only.** Ideal COT sender: `q_j` from the test seed's
/// stream; sends nothing.
pub struct InsecureIdealCotSender {
    delta: u128,
    prg: AesPrg,
}

/// **INSECURE, test-only.** Ideal COT receiver: `t_j = q_j ⊕ r_j·Δ`
/// computed locally from the same stream; sends nothing.
pub struct InsecureIdealCotReceiver {
    delta: u128,
    prg: AesPrg,
}

impl Drop for InsecureIdealCotSender {
    fn drop(&mut self) {
        self.delta.zeroize();
    }
}

impl Drop for InsecureIdealCotReceiver {
    fn drop(&mut self) {
        self.delta.zeroize();
    }
}

impl core::fmt::Debug for InsecureIdealCotSender {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("InsecureIdealCotSender(<redacted>)")
    }
}

impl core::fmt::Debug for InsecureIdealCotReceiver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("InsecureIdealCotReceiver(<redacted>)")
    }
}

impl CotSender for InsecureIdealCotSender {
    fn delta(&self) -> u128 {
        self.delta
    }
    fn extend<'a>(&'a mut self, _ch: &'a Channel, m: usize) -> BlocksFuture<'a> {
        let q = (0..m).map(|_| next_block(&mut self.prg)).collect();
        Box::pin(async move { Ok(q) })
    }
    fn fill<'a>(&'a mut self, _ch: &'a Channel, _m: usize) -> BoxFuture<'a, Result<()>> {
        // Ideal COTs cost nothing: a pool has nothing to precompute.
        Box::pin(async { Ok(()) })
    }
}

impl CotReceiver for InsecureIdealCotReceiver {
    fn extend<'a>(&'a mut self, _ch: &'a Channel, choices: &'a [u8]) -> BlocksFuture<'a> {
        let d = self.delta;
        let t = choices
            .iter()
            .map(|&r| next_block(&mut self.prg) ^ (d & 0u128.wrapping_sub((r & 1) as u128)))
            .collect();
        Box::pin(async move { Ok(t) })
    }
    fn fill<'a>(
        &'a mut self,
        _ch: &'a Channel,
        _random_choices: Vec<u8>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// **INSECURE, test-only.** Party `id`'s two ideal COT directions derived
/// from `seed` (the peer calls it with the same seed and its own id).
pub fn insecure_ideal_cot(
    seed: [u8; 16],
    id: PartyId,
) -> (InsecureIdealCotSender, InsecureIdealCotReceiver) {
    let (own, peer) = match id {
        PartyId::P0 => (0, 1),
        PartyId::P1 => (1, 0),
    };
    let (sd, sp) = direction(&seed, own);
    let (rd, rp) = direction(&seed, peer);
    (
        InsecureIdealCotSender { delta: sd, prg: sp },
        InsecureIdealCotReceiver { delta: rd, prg: rp },
    )
}

/// **INSECURE, test-only.** Ideal Beaver triples: both parties expand the
/// seed into `a_0, a_1, b_0, b_1, c_0` and take their own shares of
/// `c = (a_0 + a_1)(b_0 + b_1)`; no communication.
pub struct InsecureIdealTriples {
    id: PartyId,
    prg: AesPrg,
}

impl core::fmt::Debug for InsecureIdealTriples {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "InsecureIdealTriples({:?}, <redacted>)", self.id)
    }
}

impl InsecureIdealTriples {
    /// Party `id`'s side of the ideal source keyed by `seed`.
    pub fn new(seed: [u8; 16], id: PartyId) -> Self {
        InsecureIdealTriples {
            id,
            prg: derive(&seed, b"T"),
        }
    }
}

impl TripleSource for InsecureIdealTriples {
    fn triples<'a>(
        &'a mut self,
        _ch: &'a Channel,
        r: RingCfg,
        n: usize,
    ) -> BoxFuture<'a, Result<Triples>> {
        let (mut a, mut b, mut c) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let p0 = self.id == PartyId::P0;
        for _ in 0..n {
            let mut w = [0u8; 48];
            self.prg.fill(&mut w);
            let v = |i: usize| {
                let mut x = [0u8; 8];
                x.copy_from_slice(&w[8 * i..8 * i + 8]);
                u64::from_le_bytes(x) & r.mask()
            };
            let (a0, a1, b0, b1, c0) = (v(0), v(1), v(2), v(3), v(4));
            let cc = r.mul(r.add(a0, a1), r.add(b0, b1));
            if p0 {
                a.push(a0);
                b.push(b0);
                c.push(c0);
            } else {
                a.push(a1);
                b.push(b1);
                c.push(r.sub(cc, c0));
            }
            w.zeroize();
        }
        let t = Triples {
            a: RingShares::new(a),
            b: RingShares::new(b),
            c: RingShares::new(c),
        };
        Box::pin(async move { Ok(t) })
    }
}

/// **INSECURE, test-only.** A party whose OT is the ideal COT and whose
/// triples are the ideal triples, both keyed by `seed`; call
/// [`Party::setup`] (it then only exchanges the common seed).
pub fn insecure_ideal_party<R: RngCore + CryptoRng>(
    id: PartyId,
    cfg: MpcConfig,
    rng: R,
    seed: [u8; 16],
) -> Result<Party<R>> {
    let (s, r) = insecure_ideal_cot(seed, id);
    Ok(Party::with_ot(id, cfg, rng, Box::new(s), Box::new(r))?
        .with_triple_source(Box::new(InsecureIdealTriples::new(seed, id))))
}
