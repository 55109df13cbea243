//! Chou–Orlandi "simplest OT" (LATINCRYPT 2015) on the Ristretto255 group.
//!
//! Sender: `y ← Z_ℓ`, `S = y·G`, sends `S`.
//! Receiver with choice `c_i`: `x_i ← Z_ℓ`, `R_i = c_i·S + x_i·G`, sends `R_i`.
//! Keys: sender `k_i^0 = H(i, S, R_i, y·R_i)`, `k_i^1 = H(i, S, R_i, y·R_i − y·S)`;
//! receiver `k_i^{c_i} = H(i, S, R_i, x_i·S)`. Using a prime-order group
//! (Ristretto) avoids the small-subgroup issues of the original Curve25519
//! instantiation; the hash binds the transcript. Used 128 times per direction
//! to seed IKNP.

use crate::mpc::msgs::{BaseOtReply, Point};
use alloc::vec::Vec;
use curve25519_dalek::constants::RISTRETTO_BASEPOINT_TABLE;
use curve25519_dalek::ristretto::RistrettoPoint;
use curve25519_dalek::scalar::Scalar;
use rand_core::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

/// 16-byte OT key.
pub type Key = [u8; 16];

fn random_scalar<R: RngCore + CryptoRng>(rng: &mut R) -> Scalar {
    let mut w = [0u8; 64];
    rng.fill_bytes(&mut w);
    let s = Scalar::from_bytes_mod_order_wide(&w);
    w.zeroize();
    s
}

fn kdf(i: usize, s: &[u8; 32], r: &[u8; 32], p: &RistrettoPoint) -> Key {
    let mut h = Sha256::new();
    h.update(b"veil/co-ot/v1");
    h.update((i as u32).to_le_bytes());
    h.update(s);
    h.update(r);
    h.update(p.compress().as_bytes());
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    k
}

/// Sender state between its two steps.
pub struct BaseSender {
    y: Scalar,
    s: Point,
}

impl Drop for BaseSender {
    fn drop(&mut self) {
        self.y.zeroize();
    }
}

impl core::fmt::Debug for BaseSender {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("BaseSender(<redacted>)")
    }
}

impl BaseSender {
    /// First step: returns the state and the point `S` to send.
    pub fn start<R: RngCore + CryptoRng>(rng: &mut R) -> (Self, Point) {
        let y = random_scalar(rng);
        let s = Point::new(&y * RISTRETTO_BASEPOINT_TABLE);
        (BaseSender { y, s }, s)
    }

    /// Second step: from the receiver's points `R_i` (already validated by
    /// [`BaseOtReply`]'s decoder) derive the key pairs `(k_i^0, k_i^1)`.
    pub fn finish(&self, reply: &BaseOtReply) -> Vec<(Key, Key)> {
        let ys = self.y * self.s.point();
        reply
            .points
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let yr = self.y * r.point();
                (
                    kdf(i, self.s.bytes(), r.bytes(), &yr),
                    kdf(i, self.s.bytes(), r.bytes(), &(yr - ys)),
                )
            })
            .collect()
    }
}

/// Receiver: from the sender's `S` and choice bits, returns its reply (one
/// point per choice) and the keys `k_i^{c_i}`.
pub fn receive<R: RngCore + CryptoRng>(
    rng: &mut R,
    s: &Point,
    choices: &[u8],
) -> (BaseOtReply, Vec<Key>) {
    let mut points = Vec::with_capacity(choices.len());
    let mut keys = Vec::with_capacity(choices.len());
    for (i, &c) in choices.iter().enumerate() {
        let mut x = random_scalar(rng);
        let xg = &x * RISTRETTO_BASEPOINT_TABLE;
        // Constant-time select of c·S.
        let cs = RistrettoPoint::conditional_select(
            &RistrettoPoint::default(),
            s.point(),
            subtle::Choice::from(c & 1),
        );
        let r = Point::new(xg + cs);
        keys.push(kdf(i, s.bytes(), r.bytes(), &(x * s.point())));
        points.push(r);
        x.zeroize();
    }
    (BaseOtReply { points }, keys)
}

use subtle::ConditionallySelectable;

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn keys_match() {
        use crate::mpc::msgs::{Message, MsgKind};
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let (snd, s) = BaseSender::start(&mut rng);
        let ch: Vec<u8> = (0..16).map(|i| (i % 3 == 0) as u8).collect();
        let (msg, kr) = receive(&mut rng, &s, &ch);
        let ks = snd.finish(&msg);
        for i in 0..16 {
            let (k0, k1) = ks[i];
            assert_eq!(kr[i], if ch[i] == 1 { k1 } else { k0 });
            assert_ne!(kr[i], if ch[i] == 1 { k0 } else { k1 });
        }
        assert_eq!(
            BaseOtReply::decode(&[0xffu8; 32 * 16], &16),
            Err(crate::mpc::MpcError::InvalidPoint {
                msg: MsgKind::BaseOtReply,
                index: 0
            })
        );
        assert!(Point::decode(&[0xffu8; 32], MsgKind::SetupHello, 0).is_err());
    }
}
