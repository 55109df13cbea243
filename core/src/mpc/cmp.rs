//! Millionaires' comparison (CrypTFlow2, Rathee et al. CCS 2020, §3) and the
//! derived MSB / DReLU / ReLU / less-than.
//!
//! P0 holds `x`, P1 holds `y` (`bits`-bit unsigned); the output is XOR
//! shares of `[x > y]`. Inputs are split into digits of `m` bits
//! (configurable radix). For every digit `j`, a 1-out-of-`2^m` OT lets P1
//! learn `(gt_j ⊕ g_j, eq_j ⊕ e_j)` with `gt_j = [x_j > y_j]`,
//! `eq_j = [x_j = y_j]` and P0's random `(g_j, e_j)`. The 1-of-`2^m` OT is
//! built from `m` random OTs (`K_i^0, K_i^1`): the pad of entry `v` is
//! `⊕_i chunk_v(K_i^{v_i})`, where `chunk_v` takes bits `2v, 2v+1` of the
//! 128-bit key; distinct entries use disjoint key bits, so every entry
//! `v ≠ y_j` is masked by independent unknown bits (needs `2^m·2 ≤ 128`,
//! i.e. `m ≤ 6`). Digits are then combined in a binary tree,
//! `gt = gt_hi ⊕ (eq_hi ∧ gt_lo)`, `eq = eq_hi ∧ eq_lo`, one round per level,
//! with the two ANDs of a node sharing the operand `eq_hi` and thus one
//! *shared-operand bit-triple pair* `(a; b, b'; ab, ab')`. Each pair costs
//! 2 random OTs (one per direction) offline.

use crate::mpc::channel::Phase;
use crate::mpc::error::expect_len;
use crate::mpc::error::{MpcError, Result};
use crate::mpc::msgs::{CmpAnd, CmpLeaf, LeafShape};
use crate::mpc::party::Party;
use crate::mpc::shares::{BoolShares, RingShares};
use alloc::vec;
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

/// `SEL[i]`: entries `v` (2-bit chunks) whose bit `i` is set.
const SEL: [u128; 6] = sel_masks();
/// `GT_MASK[x]`: bit 0 of every entry `v < x` (i.e. `[x > v]`).
const GT_MASK: [u128; 64] = gt_masks();
/// Bit 0 of every entry.
const LO_BITS: u128 = 0x5555_5555_5555_5555_5555_5555_5555_5555;
/// Bit 1 of entry 0 (shifted to entry `x` for `[x = v]`).
const EQ_BIT: u128 = 2;

const fn sel_masks() -> [u128; 6] {
    let mut out = [0u128; 6];
    let mut i = 0;
    while i < 6 {
        let mut v = 0;
        while v < 64 {
            if (v >> i) & 1 == 1 {
                out[i] |= 3u128 << (2 * v);
            }
            v += 1;
        }
        i += 1;
    }
    out
}

const fn gt_masks() -> [u128; 64] {
    let mut out = [0u128; 64];
    let mut x = 0;
    while x < 64 {
        let mut v = 0;
        while v < x {
            out[x] |= 1u128 << (2 * v);
            v += 1;
        }
        x += 1;
    }
    out
}

/// Low `bits ≤ 128` bits set.
fn mask128(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// Shared-operand bit-triple pairs `(a; b, b'; c = ab, c' = ab')`, one bit
/// per byte.
struct BitTriplePairs {
    a: Vec<u8>,
    b: Vec<u8>,
    b2: Vec<u8>,
    c: Vec<u8>,
    c2: Vec<u8>,
}

impl Drop for BitTriplePairs {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.a.zeroize();
        self.b.zeroize();
        self.b2.zeroize();
        self.c.zeroize();
        self.c2.zeroize();
    }
}

impl<R: RngCore + CryptoRng> Party<R> {
    /// Offline: `n` shared-operand bit-triple pairs from one random OT per
    /// direction. With ROT sender keys `(K_0, K_1)` and receiver choice `a`,
    /// `a·(f(K_0) ⊕ f(K_1)) = f(K_a) ⊕ f(K_0)` for any bit function `f`; using
    /// `f ∈ {bit 0, bit 1}` yields two products with the same `a`.
    async fn bit_triple_pairs(&mut self, n: usize) -> Result<BitTriplePairs> {
        let ch = self.ch.clone();
        let prev = ch.set_phase(Phase::Offline);
        let a = self.random_bits(n);
        let rb = self.ot()?.recv(&ch, a.clone()).await?;
        let sb = self.ot()?.send(&ch, n).await?;
        let ot = self.ot()?;
        let kr = rb.rot_keys(&ot.hash);
        let (k0, k1) = sb.rot_keys(&ot.hash);
        let mut t = BitTriplePairs {
            a,
            b: vec![0; n],
            b2: vec![0; n],
            c: vec![0; n],
            c2: vec![0; n],
        };
        for j in 0..n {
            let (s0, s1, r) = (k0[j] as u8, k1[j] as u8, kr[j] as u8);
            t.b[j] = (s0 ^ s1) & 1;
            t.b2[j] = ((s0 ^ s1) >> 1) & 1;
            t.c[j] = (t.a[j] & t.b[j]) ^ (r & 1) ^ (s0 & 1);
            t.c2[j] = (t.a[j] & t.b2[j]) ^ ((r >> 1) & 1) ^ ((s0 >> 1) & 1);
        }
        ch.set_phase(prev);
        Ok(t)
    }

    /// Millionaires' protocol: XOR shares of `[x > y]` where P0 inputs `x`
    /// and P1 inputs `y`, both `< 2^bits` (`bits ≤ 64`). Rounds: 1 offline,
    /// `2 + ⌈log2 ⌈bits/m⌉⌉` online.
    pub async fn millionaire(&mut self, v: &[u64], bits: u32) -> Result<BoolShares> {
        if bits == 0 || bits > 64 {
            return Err(MpcError::InvalidInput("millionaire bit width"));
        }
        let n = v.len();
        let m = self.cfg.radix_bits;
        let shape = LeafShape { n, bits, radix: m };
        let nd = shape.digits();
        let width = |j: usize| shape.digit_width(j);
        let digit = |x: u64, j: usize| (x >> (j as u32 * m)) & crate::mpc::ring::mask(width(j));
        let merges = nd - 1;
        let tp = if merges > 0 {
            Some(self.bit_triple_pairs(n * merges).await?)
        } else {
            None
        };
        let ch = self.ch.clone();
        let p0 = self.is_p0();
        let nl = n * nd;
        // Leaf shares, index e·nd + j (j = 0 least significant digit).
        let mut gt = Zeroizing::new(vec![0u8; nl]);
        let mut eq = Zeroizing::new(vec![0u8; nl]);
        if p0 {
            let sb = self.ot()?.send(&ch, n * bits as usize).await?;
            let (k0, k1) = sb.rot_keys(&self.ot()?.hash);
            let mut tables = Vec::with_capacity(n * nd);
            let rnd = Zeroizing::new(self.random_bits(2 * nl));
            let mut idx = 0usize;
            for e in 0..n {
                for j in 0..nd {
                    let mj = width(j);
                    let xj = digit(v[e], j);
                    let (g, q) = (rnd[2 * (e * nd + j)], rnd[2 * (e * nd + j) + 1]);
                    gt[e * nd + j] = g;
                    eq[e * nd + j] = q;
                    // All 2^m entries at once as one word, entry v in bits
                    // 2v, 2v+1: pad = ⊕_i select(K_i^0, K_i^1 by bit i of v).
                    let mut word = 0u128;
                    for i in 0..mj as usize {
                        let sel = SEL[i];
                        word ^= (k0[idx + i] & !sel) | (k1[idx + i] & sel);
                    }
                    word ^= GT_MASK[xj as usize] ^ (EQ_BIT << (2 * xj));
                    if g == 1 {
                        word ^= LO_BITS;
                    }
                    if q == 1 {
                        word ^= LO_BITS << 1;
                    }
                    tables.push(word & mask128(2u32 << mj));
                    idx += mj as usize;
                }
            }
            ch.send_msg(&CmpLeaf { shape, tables });
        } else {
            let mut choices = Vec::with_capacity(n * bits as usize);
            for &x in v {
                for j in 0..nd {
                    let d = digit(x, j);
                    choices.extend((0..width(j)).map(|i| ((d >> i) & 1) as u8));
                }
            }
            let rb = self.ot()?.recv(&ch, choices).await?;
            let kr = rb.rot_keys(&self.ot()?.hash);
            let msg = ch.recv_msg::<CmpLeaf>(&shape).await?;
            let mut idx = 0usize;
            for e in 0..n {
                for j in 0..nd {
                    let mj = width(j);
                    let yj = digit(v[e], j);
                    let mut pad = 0u64;
                    for i in 0..mj as usize {
                        pad ^= (kr[idx + i] >> (2 * yj)) as u64 & 3;
                    }
                    let word = msg.tables[e * nd + j];
                    let entry = (word >> (2 * yj)) as u64 & 3;
                    let s = entry ^ pad;
                    gt[e * nd + j] = (s & 1) as u8;
                    eq[e * nd + j] = ((s >> 1) & 1) as u8;
                    idx += mj as usize;
                }
            }
        }
        // AND tree; `cnt` live nodes per element, stored at positions 0..cnt.
        let mut cnt = nd;
        let mut used = 0usize; // triple pairs used per element so far
        while cnt > 1 {
            let pairs = cnt / 2;
            let tp = tp
                .as_ref()
                .ok_or(MpcError::InvalidInput("missing triples"))?;
            // Open d = eq_hi ⊕ a, e = gt_lo ⊕ b, e' = eq_lo ⊕ b'.
            let mut open = Vec::with_capacity(3 * n * pairs);
            for e in 0..n {
                for k in 0..pairs {
                    let (lo, hi) = (e * nd + 2 * k, e * nd + 2 * k + 1);
                    let t = e * merges + used + k;
                    open.push(eq[hi] ^ tp.a[t]);
                    open.push(gt[lo] ^ tp.b[t]);
                    open.push(eq[lo] ^ tp.b2[t]);
                }
            }
            let count = open.len();
            let open = CmpAnd { bits: open };
            ch.send_msg(&open);
            let open = open.bits;
            let po = ch.recv_msg::<CmpAnd>(&count).await?.bits;
            for e in 0..n {
                for k in 0..pairs {
                    let hi = e * nd + 2 * k + 1;
                    let t = e * merges + used + k;
                    let o = 3 * (e * pairs + k);
                    let d = open[o] ^ po[o];
                    let f1 = open[o + 1] ^ po[o + 1];
                    let f2 = open[o + 2] ^ po[o + 2];
                    let mut and1 = tp.c[t] ^ (d & tp.b[t]) ^ (f1 & tp.a[t]);
                    let mut and2 = tp.c2[t] ^ (d & tp.b2[t]) ^ (f2 & tp.a[t]);
                    if p0 {
                        and1 ^= d & f1;
                        and2 ^= d & f2;
                    }
                    let ng = gt[hi] ^ and1;
                    // Write the parent at position k (k ≤ 2k, so no clobbering
                    // of unread children).
                    gt[e * nd + k] = ng;
                    eq[e * nd + k] = and2;
                }
                if cnt % 2 == 1 {
                    gt[e * nd + pairs] = gt[e * nd + cnt - 1];
                    eq[e * nd + pairs] = eq[e * nd + cnt - 1];
                }
            }
            used += pairs;
            cnt = pairs + cnt % 2;
        }
        Ok(BoolShares::new((0..n).map(|e| gt[e * nd]).collect()))
    }

    /// XOR shares of the most significant bit of shared `x ∈ Z_{2^ℓ}`:
    /// `msb(x) = msb(x_0) ⊕ msb(x_1) ⊕ carry`, with the carry of the low
    /// `ℓ−1` bits from a millionaires' comparison
    /// `[low_0 > 2^{ℓ-1} − 1 − low_1]`.
    pub async fn msb(&mut self, x: &RingShares) -> Result<BoolShares> {
        let ell = self.cfg.ring.ell;
        let lm = crate::mpc::ring::mask(ell - 1);
        let p0 = self.is_p0();
        let inp: Vec<u64> = x
            .as_slice()
            .iter()
            .map(|&v| if p0 { v & lm } else { lm - (v & lm) })
            .collect();
        let c = self.millionaire(&inp, ell - 1).await?;
        Ok(BoolShares::new(
            x.as_slice()
                .iter()
                .zip(c.as_slice())
                .map(|(&v, &c)| c ^ ((v >> (ell - 1)) & 1) as u8)
                .collect(),
        ))
    }

    /// `DReLU(x) = [x ≥ 0] = 1 ⊕ msb(x)` (XOR shares).
    pub async fn drelu(&mut self, x: &RingShares) -> Result<BoolShares> {
        let mut b = self.msb(x).await?;
        if self.is_p0() {
            for v in b.as_mut_slice() {
                *v ^= 1;
            }
        }
        Ok(b)
    }

    /// `ReLU(x) = DReLU(x)·x` via [`Party::mux`].
    pub async fn relu(&mut self, x: &RingShares) -> Result<RingShares> {
        let b = self.drelu(x).await?;
        self.mux(&b, x).await
    }

    /// XOR shares of `[x < y]` for shared `x, y` with `|x − y| < 2^{ℓ-1}`
    /// (`msb(x − y)`).
    pub async fn less_than(&mut self, x: &RingShares, y: &RingShares) -> Result<BoolShares> {
        expect_len("less_than operand y", x.len(), y.len())?;
        let r = self.cfg.ring;
        let d = RingShares::new(
            x.as_slice()
                .iter()
                .zip(y.as_slice())
                .map(|(&a, &b)| r.sub(a, b))
                .collect(),
        );
        self.msb(&d).await
    }

    /// `Π_cmp` of EncFormer Table III: arithmetic shares (mod `2^ℓ`) of
    /// `b = [x < τ]` for shared `x` and public fixed-point `τ` (ring
    /// encoding), valid for `|x − τ| < 2^{ℓ-1}`: `b = msb(x − τ)`, then B2A.
    pub async fn cmp_public(&mut self, x: &RingShares, tau: u64) -> Result<RingShares> {
        let r = self.cfg.ring;
        let p0 = self.is_p0();
        let d = RingShares::new(
            x.as_slice()
                .iter()
                .map(|&v| if p0 { r.sub(v, tau) } else { v })
                .collect(),
        );
        let b = self.msb(&d).await?;
        self.b2a(&b).await
    }

    /// `Π_mux` of EncFormer Table III with the selector as arithmetic shares
    /// of a bit (`b ∈ {0,1}`, shares mod `2^ℓ`): XOR shares are the share
    /// LSBs (`lsb(b_0) ⊕ lsb(b_1) = lsb(b_0 + b_1)`), then [`Party::mux`].
    pub async fn mux_arith(&mut self, b: &RingShares, u: &RingShares) -> Result<RingShares> {
        let bits = BoolShares::new(b.as_slice().iter().map(|&v| (v & 1) as u8).collect());
        self.mux(&bits, u).await
    }
}
