//! Chou–Orlandi "simplest OT" (LATINCRYPT 2015) on the Ristretto255 group.
//!
//! Sender: `y ← Z_ℓ`, `S = y·G`, sends `S`.
//! Receiver with choice `c_i`: `x_i ← Z_ℓ`, `R_i = c_i·S + x_i·G`, sends `R_i`.
//! Keys: sender `k_i^0 = H(i, S, R_i, y·R_i)`, `k_i^1 = H(i, S, R_i, y·R_i − y·S)`;
//! receiver `k_i^{c_i} = H(i, S, R_i, x_i·S)`. Using a prime-order group
//! (Ristretto) avoids the small-subgroup issues of the original Curve25519
//! instantiation; the hash binds the transcript. Used 128 times per direction
//! to seed IKNP.

use crate::mpc::error::{MpcError, Result};
use alloc::vec::Vec;
use curve25519_dalek::constants::RISTRETTO_BASEPOINT_TABLE;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
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

fn decode_point(b: &[u8]) -> Result<RistrettoPoint> {
    let c = CompressedRistretto::from_slice(b).map_err(|_| MpcError::InvalidPoint)?;
    c.decompress().ok_or(MpcError::InvalidPoint)
}

/// Sender state between its two steps.
pub struct BaseSender {
    y: Scalar,
    s: [u8; 32],
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
    /// First step: returns the state and the 32-byte message `S`.
    pub fn start<R: RngCore + CryptoRng>(rng: &mut R) -> (Self, [u8; 32]) {
        let y = random_scalar(rng);
        let s = (&y * RISTRETTO_BASEPOINT_TABLE).compress().to_bytes();
        (BaseSender { y, s }, s)
    }

    /// Second step: from the receiver's `R_i` (32 bytes each) derive the key
    /// pairs `(k_i^0, k_i^1)`.
    pub fn finish(&self, msg: &[u8], n: usize, tag: u16) -> Result<Vec<(Key, Key)>> {
        if msg.len() != 32 * n {
            return Err(MpcError::Malformed {
                tag,
                what: "base OT receiver message length",
            });
        }
        let s_pt = decode_point(&self.s)?;
        let ys = self.y * s_pt;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let rb: [u8; 32] = msg[32 * i..32 * i + 32]
                .try_into()
                .map_err(|_| MpcError::InvalidPoint)?;
            let r = decode_point(&rb)?;
            let yr = self.y * r;
            out.push((kdf(i, &self.s, &rb, &yr), kdf(i, &self.s, &rb, &(yr - ys))));
        }
        Ok(out)
    }
}

/// Receiver: from the sender's `S` and choice bits, returns its message
/// (`32·n` bytes) and keys `k_i^{c_i}`.
pub fn receive<R: RngCore + CryptoRng>(
    rng: &mut R,
    s_msg: &[u8],
    choices: &[u8],
    tag: u16,
) -> Result<(Vec<u8>, Vec<Key>)> {
    if s_msg.len() != 32 {
        return Err(MpcError::Malformed {
            tag,
            what: "base OT sender message length",
        });
    }
    let s: [u8; 32] = s_msg.try_into().map_err(|_| MpcError::InvalidPoint)?;
    let s_pt = decode_point(&s)?;
    let mut msg = Vec::with_capacity(32 * choices.len());
    let mut keys = Vec::with_capacity(choices.len());
    for (i, &c) in choices.iter().enumerate() {
        let mut x = random_scalar(rng);
        let xg = &x * RISTRETTO_BASEPOINT_TABLE;
        // Constant-time select of c·S.
        let cs = RistrettoPoint::conditional_select(
            &RistrettoPoint::default(),
            &s_pt,
            subtle::Choice::from(c & 1),
        );
        let r = (xg + cs).compress().to_bytes();
        keys.push(kdf(i, &s, &r, &(x * s_pt)));
        msg.extend_from_slice(&r);
        x.zeroize();
    }
    Ok((msg, keys))
}

use subtle::ConditionallySelectable;

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn keys_match() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let (snd, s) = BaseSender::start(&mut rng);
        let ch: Vec<u8> = (0..16).map(|i| (i % 3 == 0) as u8).collect();
        let (msg, kr) = receive(&mut rng, &s, &ch, 0).unwrap();
        let ks = snd.finish(&msg, 16, 0).unwrap();
        for i in 0..16 {
            let (k0, k1) = ks[i];
            assert_eq!(kr[i], if ch[i] == 1 { k1 } else { k0 });
            assert_ne!(kr[i], if ch[i] == 1 { k0 } else { k1 });
        }
        assert!(snd.finish(&[0xffu8; 32 * 16], 16, 0).is_err());
        assert!(receive(&mut rng, &[0xffu8; 32], &ch, 0).is_err());
    }
}
