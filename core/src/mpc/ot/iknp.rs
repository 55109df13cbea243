//! IKNP OT extension (Ishai–Kilian–Nissim–Petrank, CRYPTO 2003), semi-honest.
//!
//! Setup: 128 base OTs with roles reversed — the COT *sender* picks
//! `Δ ∈ {0,1}^128` and learns `k_i^{Δ_i}`; the COT *receiver* knows both
//! `k_i^0, k_i^1`. Keys seed AES-CTR PRGs `G`.
//!
//! Extension of `m` COTs with choice vector `r ∈ {0,1}^m`: the receiver sets
//! column `t^i = G(k_i^0)` and sends `u^i = t^i ⊕ G(k_i^1) ⊕ r`
//! (`16·m` bytes). The sender computes `q^i = G(k_i^{Δ_i}) ⊕ Δ_i·u^i
//! = t^i ⊕ Δ_i·r`. Transposing the `128 × m` bit matrices gives rows with
//! `q_j = t_j ⊕ r_j·Δ`. PRG streams continue across batches, so one setup
//! serves any number of extensions.

use super::{base::Key, AesPrg, BlocksFuture, CotReceiver, CotSender};
use crate::mpc::channel::Channel;
use crate::mpc::error::{MpcError, Result};
use crate::mpc::msgs::IknpU;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use zeroize::Zeroize;

/// In-place transpose of a 128×128 bit matrix (row `r` = `a[r]`, bit `c`
/// LSB-first): afterwards bit `c` of `a[r]` is the old bit `r` of `a[c]`.
pub fn transpose128(a: &mut [u128; 128]) {
    let mut j = 64usize;
    let mut m: u128 = (1u128 << 64) - 1;
    while j != 0 {
        let mut k = 0;
        while k < 128 {
            for r in k..k + j {
                let t = ((a[r] >> j) ^ a[r + j]) & m;
                a[r] ^= t << j;
                a[r + j] ^= t;
            }
            k += 2 * j;
        }
        j >>= 1;
        m ^= m << j;
    }
}

/// Columns per chunk of extension, in bytes (8192 OTs): the working set of
/// one chunk (128 columns) stays in L2 instead of materializing the full
/// `128 × m` matrix.
const CHUNK: usize = 1024;

/// Transposes `nb` 128×128 blocks of 128 columns stored with `stride` bytes
/// per column, appending the rows to `out`.
fn transpose_cols(cols: &[u8], stride: usize, nb: usize, out: &mut Vec<u128>) {
    let mut a = [0u128; 128];
    for blk in 0..nb {
        for (i, ai) in a.iter_mut().enumerate() {
            let o = i * stride + blk * 16;
            let mut b = [0u8; 16];
            b.copy_from_slice(&cols[o..o + 16]);
            *ai = u128::from_le_bytes(b);
        }
        transpose128(&mut a);
        out.extend_from_slice(&a);
    }
    a.zeroize();
}

/// IKNP COT sender (holds `Δ` and one PRG per column).
pub struct IknpSender {
    delta: u128,
    prgs: Vec<AesPrg>,
}

impl core::fmt::Debug for IknpSender {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IknpSender(<redacted>)")
    }
}

impl Drop for IknpSender {
    fn drop(&mut self) {
        self.delta.zeroize();
    }
}

impl IknpSender {
    /// From `Δ` and the base-OT keys `k_i^{Δ_i}`.
    pub fn new(delta: u128, keys: &[Key]) -> Result<Self> {
        if keys.len() != 128 {
            return Err(MpcError::InvalidConfig("IKNP needs 128 base OTs"));
        }
        Ok(IknpSender {
            delta,
            prgs: keys.iter().map(|k| AesPrg::new(*k)).collect(),
        })
    }

    async fn extend_impl(&mut self, ch: &Channel, m: usize) -> Result<Vec<u128>> {
        let cb = m.div_ceil(128) * 16;
        let u = ch.recv_msg::<IknpU>(&m).await?.matrix;
        let mut cols = vec![0u8; 128 * CHUNK];
        let mut q = Vec::with_capacity(cb * 8);
        for off in (0..cb).step_by(CHUNK) {
            let len = CHUNK.min(cb - off);
            for i in 0..128 {
                let c = &mut cols[i * CHUNK..i * CHUNK + len];
                self.prgs[i].fill(c);
                if (self.delta >> i) & 1 == 1 {
                    for (x, y) in c.iter_mut().zip(&u[i * cb + off..i * cb + off + len]) {
                        *x ^= *y;
                    }
                }
            }
            transpose_cols(&cols, CHUNK, len / 16, &mut q);
        }
        q.truncate(m);
        cols.zeroize();
        Ok(q)
    }
}

impl CotSender for IknpSender {
    fn delta(&self) -> u128 {
        self.delta
    }
    fn extend<'a>(&'a mut self, ch: &'a Channel, m: usize) -> BlocksFuture<'a> {
        Box::pin(self.extend_impl(ch, m))
    }
}

/// IKNP COT receiver (holds both PRGs per column).
pub struct IknpReceiver {
    prgs: Vec<(AesPrg, AesPrg)>,
}

impl core::fmt::Debug for IknpReceiver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IknpReceiver(<redacted>)")
    }
}

impl IknpReceiver {
    /// From the base-OT key pairs `(k_i^0, k_i^1)`.
    pub fn new(keys: &[(Key, Key)]) -> Result<Self> {
        if keys.len() != 128 {
            return Err(MpcError::InvalidConfig("IKNP needs 128 base OTs"));
        }
        Ok(IknpReceiver {
            prgs: keys
                .iter()
                .map(|(a, b)| (AesPrg::new(*a), AesPrg::new(*b)))
                .collect(),
        })
    }

    fn extend_impl(&mut self, ch: &Channel, choices: &[u8]) -> Result<Vec<u128>> {
        let m = choices.len();
        let cb = m.div_ceil(128) * 16;
        let mut r = vec![0u8; cb];
        for (j, &c) in choices.iter().enumerate() {
            r[j >> 3] |= (c & 1) << (j & 7);
        }
        let mut cols = vec![0u8; 128 * CHUNK];
        let mut g = vec![0u8; CHUNK];
        let mut u = vec![0u8; 128 * cb];
        let mut t = Vec::with_capacity(cb * 8);
        for off in (0..cb).step_by(CHUNK) {
            let len = CHUNK.min(cb - off);
            for i in 0..128 {
                let ti = &mut cols[i * CHUNK..i * CHUNK + len];
                self.prgs[i].0.fill(ti);
                self.prgs[i].1.fill(&mut g[..len]);
                let ui = &mut u[i * cb + off..i * cb + off + len];
                for k in 0..len {
                    ui[k] = ti[k] ^ g[k] ^ r[off + k];
                }
            }
            transpose_cols(&cols, CHUNK, len / 16, &mut t);
        }
        t.truncate(m);
        g.zeroize();
        ch.send_owned(IknpU { matrix: u });
        cols.zeroize();
        r.zeroize();
        Ok(t)
    }
}

impl CotReceiver for IknpReceiver {
    fn extend<'a>(&'a mut self, ch: &'a Channel, choices: &'a [u8]) -> BlocksFuture<'a> {
        let r = self.extend_impl(ch, choices);
        Box::pin(async move { r })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_is_transpose() {
        let mut a = [0u128; 128];
        for (i, x) in a.iter_mut().enumerate() {
            *x = (i as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835) ^ (1u128 << i);
        }
        let orig = a;
        transpose128(&mut a);
        for r in 0..128 {
            for c in 0..128 {
                assert_eq!((a[r] >> c) & 1, (orig[c] >> r) & 1);
            }
        }
    }
}
