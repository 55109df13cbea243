//! Arithmetic protocols over `Z_{2^ℓ}`: Beaver multiplication with
//! OT-generated triples (Gilboa), truncation, B2A, multiplexer, public
//! scaling, row sums / broadcasts and polynomial evaluation.

use crate::mpc::channel::Phase;
use crate::mpc::error::{expect_len, MpcError, Result};
use crate::mpc::msgs::{
    B2aCorr, BeaverOpen, CorrWidths, InputShare, MuxCorr, Reveal, RoundCorr, TripleCorr, TruncCorr,
    WordShape,
};
use crate::mpc::party::{Party, TruncMode};
use crate::mpc::ring::mask;
use crate::mpc::shares::{BoolShares, RingShares};
pub use crate::mpc::triples::{TripleSource, Triples};
use alloc::vec::Vec;
use rand_core::{CryptoRng, RngCore};
use zeroize::{Zeroize, Zeroizing};

/// `Π_rowsum`: for a `rows × cols` row-major matrix of shares, the share of
/// each row sum (local, no communication).
pub fn rowsum(x: &RingShares, rows: usize, cols: usize, ell: u32) -> Result<RingShares> {
    expect_len("rowsum input (rows·cols)", rows * cols, x.len())?;
    let m = mask(ell);
    Ok(RingShares::new(
        x.as_slice()
            .chunks(cols.max(1))
            .take(rows)
            .map(|r| r.iter().fold(0u64, |s, &v| s.wrapping_add(v)) & m)
            .collect(),
    ))
}

/// `Π_bcast`: repeats each row value `cols` times (local).
pub fn bcast(v: &RingShares, cols: usize) -> RingShares {
    let mut out = Vec::with_capacity(v.len() * cols);
    for &x in v.as_slice() {
        out.extend(core::iter::repeat_n(x, cols));
    }
    RingShares::new(out)
}

impl<R: RngCore + CryptoRng> Party<R> {
    /// Secret-shares `n` ring elements held by `owner`: the owner passes
    /// `Some(values)`, the other party `None`. The owner samples `r`
    /// uniformly, keeps `x − r` and sends `r` (1 round, `nℓ` bits).
    pub async fn share_input(
        &mut self,
        owner: crate::mpc::PartyId,
        values: Option<&[u64]>,
        n: usize,
    ) -> Result<RingShares> {
        let r = self.cfg.ring;
        if owner == self.id {
            let x = values.ok_or(MpcError::InvalidInput("owner must provide values"))?;
            expect_len("share_input values", n, x.len())?;
            let mut msg = InputShare {
                bits: r.ell,
                words: self.random_ring(n),
            };
            self.ch.send_msg(&msg);
            let out = x
                .iter()
                .zip(&msg.words)
                .map(|(&x, &m)| r.sub(x, m))
                .collect();
            msg.words.zeroize();
            Ok(RingShares::new(out))
        } else {
            let shape = WordShape {
                count: n,
                bits: r.ell,
            };
            let msg = self.ch.recv_msg::<InputShare>(&shape).await?;
            Ok(RingShares::new(msg.words))
        }
    }

    /// Opens shared values to both parties (1 round, `nℓ` bits each way).
    pub async fn reveal(&mut self, x: &RingShares) -> Result<Vec<u64>> {
        let r = self.cfg.ring;
        let n = x.len();
        self.ch.send_msg(&Reveal {
            bits: r.ell,
            words: x.as_slice().to_vec(),
        });
        let shape = WordShape {
            count: n,
            bits: r.ell,
        };
        let peer = self.ch.recv_msg::<Reveal>(&shape).await?;
        Ok(x.as_slice()
            .iter()
            .zip(&peer.words)
            .map(|(&a, &b)| r.add(a, b))
            .collect())
    }

    /// Offline: `n` Beaver triples from the injected [`TripleSource`] if
    /// there is one, otherwise by Gilboa's OT multiplication (below).
    pub async fn triples(&mut self, n: usize) -> Result<Triples> {
        if self.triple_src.is_none() {
            return self.gilboa_triples(n).await;
        }
        if self.ch.is_poisoned() {
            return Err(MpcError::Poisoned);
        }
        let ch = self.ch.clone();
        let ring = self.cfg.ring;
        let prev = ch.set_phase(Phase::Offline);
        let src = self.triple_src.as_mut().ok_or(MpcError::NotSetUp)?;
        let t = src.triples(&ch, ring, n).await?;
        for len in [t.a.len(), t.b.len(), t.c.len()] {
            expect_len("triples from the injected source", n, len)?;
        }
        ch.set_phase(prev);
        Ok(t)
    }

    /// Offline: `n` Beaver triples by Gilboa's OT multiplication. For the
    /// cross term `a_0·b_1`, P1 is COT receiver with the `ℓ` bits of `b_1`
    /// and P0 sends, for bit `i`, the correlation `a_0 mod 2^{ℓ-i}`; then
    /// `a_0 b_1 = Σ_i 2^i (t_i − p_i)`. Symmetrically for `a_1·b_0`.
    /// Cost per triple: `2ℓ` COTs and `ℓ(ℓ+1)` correction bits; 2 rounds.
    pub async fn gilboa_triples(&mut self, n: usize) -> Result<Triples> {
        let ch = self.ch.clone();
        let prev = ch.set_phase(Phase::Offline);
        let ell = self.cfg.ring.ell;
        let r = self.cfg.ring;
        let a = self.random_ring(n);
        let b = self.random_ring(n);
        let e = ell as usize;
        // OT index j = i·n + k (bit-major so widths are grouped).
        let mut choices = Vec::with_capacity(n * e);
        for i in 0..e {
            choices.extend(b.iter().map(|&v| ((v >> i) & 1) as u8));
        }
        let mut corr = Vec::with_capacity(n * e);
        for _ in 0..e {
            corr.extend_from_slice(&a);
        }
        let width = CorrWidths::Gilboa { n, ell };
        let rb = self.ot()?.recv(&ch, choices).await?;
        let sb = self.ot()?.send(&ch, n * e).await?;
        let p = self.cot_send_corr::<TripleCorr>(&sb, &corr, width)?;
        corr.zeroize();
        let t = self.cot_recv_corr::<TripleCorr>(&rb, width).await?;
        let mut c: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| r.mul(x, y)).collect();
        for i in 0..e {
            for k in 0..n {
                let j = i * n + k;
                c[k] = r.add(c[k], r.sub(t[j], p[j]) << i);
            }
        }
        ch.set_phase(prev);
        Ok(Triples {
            a: RingShares::new(a),
            b: RingShares::new(b),
            c: RingShares::new(c),
        })
    }

    /// Online Beaver product without truncation (1 round): opens
    /// `e = x − a`, `f = y − b`, then `z = c + e·b + f·a (+ e·f at P0)`.
    pub async fn mul_with_triples(
        &mut self,
        x: &[u64],
        y: &[u64],
        t: &Triples,
        off: usize,
    ) -> Result<RingShares> {
        let n = x.len();
        expect_len("mul operand y", n, y.len())?;
        if t.a.len() < off + n {
            return Err(MpcError::LengthMismatch {
                what: "triples (at least offset + n)",
                expected: off + n,
                found: t.a.len(),
            });
        }
        let r = self.cfg.ring;
        let (a, b, c) = (
            &t.a.as_slice()[off..off + n],
            &t.b.as_slice()[off..off + n],
            &t.c.as_slice()[off..off + n],
        );
        let mut ef: Vec<u64> = x.iter().zip(a).map(|(&x, &a)| r.sub(x, a)).collect();
        ef.extend(y.iter().zip(b).map(|(&y, &b)| r.sub(y, b)));
        let open = BeaverOpen {
            bits: r.ell,
            words: ef,
        };
        self.ch.send_msg(&open);
        let ef = open.words;
        let shape = WordShape {
            count: 2 * n,
            bits: r.ell,
        };
        let pe = self.ch.recv_msg::<BeaverOpen>(&shape).await?.words;
        let p0 = self.is_p0();
        let z = (0..n)
            .map(|k| {
                let e = r.add(ef[k], pe[k]);
                let f = r.add(ef[n + k], pe[n + k]);
                let mut z = r.add(c[k], r.add(r.mul(e, b[k]), r.mul(f, a[k])));
                if p0 {
                    z = r.add(z, r.mul(e, f));
                }
                z
            })
            .collect();
        Ok(RingShares::new(z))
    }

    /// `Π×` (EncFormer Table III): fixed-point product `⌊x·y / 2^F⌉` of
    /// shared tensors, faithfully: the result is the rounded product or one
    /// less. Offline: Beaver triples; online: one opening round and a
    /// truncation by `F` ([`MpcConfig::trunc`](crate::mpc::MpcConfig)).
    pub async fn mul(&mut self, x: &RingShares, y: &RingShares) -> Result<RingShares> {
        let t = self.triples(x.len()).await?;
        let z = self
            .mul_with_triples(x.as_slice(), y.as_slice(), &t, 0)
            .await?;
        self.round_trunc(z).await
    }

    /// Truncation by `F` with round-to-nearest offset: P0 adds `2^{F-1}`
    /// first, so the result is `⌊z/2^F⌉` or one less (the dropped carry of
    /// [`Party::trunc`]): mean bias about −½ ulp instead of −1 ulp.
    async fn round_trunc(&mut self, mut z: RingShares) -> Result<RingShares> {
        let r = self.cfg.ring;
        if self.is_p0() && r.frac > 0 {
            for v in z.as_mut_slice() {
                *v = r.add(*v, 1u64 << (r.frac - 1));
            }
        }
        self.trunc(&z, r.frac).await
    }

    /// Multiplication by a public fixed-point constant `c` (ring encoding at
    /// scale `2^F`), then rounding truncation by `F` (result `⌊x·c/2^F⌉` or
    /// one less).
    pub async fn mul_public(&mut self, x: &RingShares, c: u64) -> Result<RingShares> {
        let r = self.cfg.ring;
        let z = RingShares::new(x.as_slice().iter().map(|&v| r.mul(v, c)).collect());
        self.round_trunc(z).await
    }

    /// Truncation `⌊x / 2^s⌋` (arithmetic shift) of shared `x`. With
    /// `x' = x + 2^{ℓ-1}` (or `2^{ℓ-2}` in [`TruncMode::KnownMsb`]) and
    /// `w = [x'_0 + x'_1 ≥ 2^ℓ]`, each party outputs
    /// `(x'_i >> s) − w_i·2^{ℓ-s}` (P0 also subtracts the offset `>> s`),
    /// where `w_i` are shares of `w` modulo `2^s`. This equals
    /// `⌊x/2^s⌋ − c` with `c = [x'_0 mod 2^s + x'_1 mod 2^s ≥ 2^s]`; the
    /// faithful modes (`KnownMsb`, `FullRange`) drop `c`, [`TruncMode::Exact`]
    /// adds shares of it back. `KnownMsb` requires `|x| < 2^{ℓ-2}`, the others
    /// any `|x| < 2^{ℓ-1}`.
    pub async fn trunc(&mut self, x: &RingShares, s: u32) -> Result<RingShares> {
        let r = self.cfg.ring;
        let ell = r.ell;
        if s == 0 {
            return Ok(x.clone());
        }
        if s >= ell - 1 {
            return Err(MpcError::InvalidInput("shift must be < ell - 1"));
        }
        let mode = self.cfg.trunc;
        let off_bits = match mode {
            TruncMode::KnownMsb => ell - 2,
            TruncMode::FullRange | TruncMode::Exact => ell - 1,
        };
        let mut carry: Option<Vec<u64>> = None;
        let p0 = self.is_p0();
        let xp = self.add_public(x, 1u64 << off_bits);
        let w: Vec<u64> = match mode {
            TruncMode::KnownMsb => {
                // w = a0 ∨ a1 = a0 + a1 − a0·a1; a0·a1 by one COT (P0 sends a0).
                let a: Vec<u64> = xp.iter().map(|&v| (v >> (ell - 1)) & 1).collect();
                let pt = self
                    .cot_bit_products::<TruncCorr>(&a, CorrWidths::Uniform(s))
                    .await?;
                a.iter()
                    .zip(pt.iter())
                    .map(|(&a, &pt)| {
                        if p0 {
                            a.wrapping_add(pt) & mask(s)
                        } else {
                            a.wrapping_sub(pt) & mask(s)
                        }
                    })
                    .collect()
            }
            TruncMode::FullRange => {
                let m = r.mask();
                let inp: Vec<u64> = if p0 {
                    xp.to_vec()
                } else {
                    xp.iter().map(|&v| m - v).collect()
                };
                let wb = self.millionaire(&inp, ell).await?;
                self.b2a_bits(&wb, s).await?
            }
            TruncMode::Exact => {
                // Wrap (ℓ bits) and low carry (s bits, compared as ℓ-bit
                // numbers) in one batched comparison.
                let (m, ms) = (r.mask(), mask(s));
                let n = xp.len();
                let mut inp = Zeroizing::new(Vec::with_capacity(2 * n));
                if p0 {
                    inp.extend(xp.iter().copied());
                    inp.extend(xp.iter().map(|&v| v & ms));
                } else {
                    inp.extend(xp.iter().map(|&v| m - v));
                    inp.extend(xp.iter().map(|&v| ms - (v & ms)));
                }
                let b = self.millionaire(&inp, ell).await?;
                let mut a = self.b2a_bits(&b, ell).await?;
                carry = Some(a.split_off(n));
                a
            }
        };
        let hi = ell - s;
        let out = xp
            .iter()
            .zip(w.iter())
            .enumerate()
            .map(|(k, (&v, &wi))| {
                let mut y = r.sub(v >> s, wi << hi);
                if let Some(c) = &carry {
                    y = r.add(y, c[k]);
                }
                if p0 {
                    y = r.sub(y, 1u64 << (off_bits - s));
                }
                y
            })
            .collect();
        Ok(RingShares::new(out))
    }

    /// Exact round-to-nearest truncation: shares of `round(x/2^k) = ⌊(x + 2^{k-1})/2^k⌋`
    /// (ties round up) of shared signed `x`, independent of [`MpcConfig::trunc`](crate::mpc::MpcConfig).
    ///
    /// **Precondition:** `−2^{ℓ-2} ≤ x < 2^{ℓ-2}` and `1 ≤ k ≤ ℓ − 2`. For every input within
    /// that bound the result is exact (no probabilistic failure, no off-by-one). Outside the
    /// bound the result is wrong; the bound cannot be checked on shares, so callers must prove
    /// it (e.g. from a plan's bit budget).
    ///
    /// With `y = x + 2^{ℓ-2} ∈ [0, 2^{ℓ-1})` (P0 adds the offset), the wrap bit
    /// `w = [y_0 + y_1 ≥ 2^ℓ]` equals `msb(y_0) ∨ msb(y_1)` (known-MSB trick), i.e.
    /// `a_0 + a_1 − a_0·a_1` with one COT for the product. P0 folds the rounding offset into its
    /// share (`T_0 = y_0 + 2^{k-1}` as an integer), so
    /// `⌊(y + 2^{k-1})/2^k⌋ = ⌊T_0/2^k⌋ + ⌊y_1/2^k⌋ − w·2^{ℓ-k} + c` with the low carry
    /// `c = [T_0 mod 2^k + y_1 mod 2^k ≥ 2^k]`, obtained by a `k`-bit millionaires' comparison.
    /// The AND for `w` (width `k`) and the B2A of `c` (width `ℓ`) share one COT batch.
    ///
    /// Cost per element: a `k`-bit millionaire (`⌈k/m⌉` leaves, `⌈k/m⌉ − 1` AND merges) plus 2
    /// COTs; rounds: 1 offline + `2 + ⌈log2⌈k/m⌉⌉` online for the comparison, 2 for the COTs.
    pub async fn trunc_round_exact(&mut self, x: &RingShares, k: u32) -> Result<RingShares> {
        let r = self.cfg.ring;
        let ell = r.ell;
        if k == 0 {
            return Ok(x.clone());
        }
        if k + 2 > ell {
            return Err(MpcError::InvalidInput("round shift must be <= ell - 2"));
        }
        let p0 = self.is_p0();
        let n = x.len();
        let mk = mask(k);
        let half_k = 1u64 << (k - 1);
        let y = self.add_public(x, 1u64 << (ell - 2));
        // Per element: high part ⌊T_i/2^k⌋, low part T_i mod 2^k, MSB a_i.
        let mut hi = Zeroizing::new(Vec::with_capacity(n));
        let mut inp = Zeroizing::new(Vec::with_capacity(n));
        for &v in y.iter() {
            if p0 {
                let lo = (v & mk) + half_k;
                hi.push((v >> k) + (lo >> k));
                inp.push(lo & mk);
            } else {
                hi.push(v >> k);
                // c = [lo_0 > 2^k − 1 − lo_1].
                inp.push(mk - (v & mk));
            }
        }
        let c = self.millionaire(&inp, k).await?;
        let mut bits: Zeroizing<Vec<u64>> = Zeroizing::new(Vec::with_capacity(2 * n));
        bits.extend(y.iter().map(|&v| (v >> (ell - 1)) & 1));
        bits.extend(c.as_slice().iter().map(|&b| (b & 1) as u64));
        let width = CorrWidths::Split { n, lo: k, hi: ell };
        // P0 gets p_j, P1 gets t_j = p_j + b_1·b_0 (widths k | ℓ).
        let mut prod = self.cot_bit_products::<RoundCorr>(&bits, width).await?;
        if p0 {
            prod.iter_mut().for_each(|p| *p = p.wrapping_neg());
        }
        // Shares of b_0·b_1: P0 holds −p, P1 holds t.
        let out = (0..n)
            .map(|j| {
                // w = a_0 + a_1 − a_0·a_1 (mod 2^k); c = c_0 + c_1 − 2·c_0·c_1 (mod 2^ℓ).
                let w = bits[j].wrapping_sub(prod[j]) & mk;
                let cj = bits[n + j].wrapping_sub(prod[n + j].wrapping_mul(2));
                let mut v = r.add(r.sub(hi[j], w << (ell - k)), cj);
                if p0 {
                    v = r.sub(v, 1u64 << (ell - 2 - k));
                }
                v
            })
            .collect();
        Ok(RingShares::new(out))
    }

    /// B2A into `Z_{2^k}`: from XOR shares `b_0 ⊕ b_1` to additive shares of
    /// `b = b_0 + b_1 − 2·b_0 b_1`; `b_0 b_1` by one COT (P0 sends
    /// correlation `b_0`, P1 chooses with `b_1`). 2 rounds, `k` bits + 1 COT.
    pub async fn b2a_bits(&mut self, b: &BoolShares, k: u32) -> Result<Vec<u64>> {
        let bits: Zeroizing<Vec<u64>> =
            Zeroizing::new(b.as_slice().iter().map(|&v| (v & 1) as u64).collect());
        let m = mask(k);
        let p0 = self.is_p0();
        let pt = self
            .cot_bit_products::<B2aCorr>(&bits, CorrWidths::Uniform(k))
            .await?;
        Ok(bits
            .iter()
            .zip(pt.iter())
            .map(|(&b, &pt)| {
                if p0 {
                    b.wrapping_add(pt.wrapping_mul(2)) & m
                } else {
                    b.wrapping_sub(pt.wrapping_mul(2)) & m
                }
            })
            .collect())
    }

    /// B2A into the ring `Z_{2^ℓ}`.
    pub async fn b2a(&mut self, b: &BoolShares) -> Result<RingShares> {
        let ell = self.cfg.ring.ell;
        Ok(RingShares::new(self.b2a_bits(b, ell).await?))
    }

    /// `Π_mux`: `b·x` for shared bit `b` and shared `x` (CrypTFlow2 mux with
    /// COT): each party `i` sends, as COT sender, the correlation
    /// `(1 − 2b_i)·x_i` so the peer with choice `b_{1-i}` gets
    /// `(b_i ⊕ b_{1-i})·x_i − r_i`; `r_i = b_i x_i − p_i`. Both directions in
    /// parallel: 2 rounds, 2 COTs and `2ℓ` bits per element.
    pub async fn mux(&mut self, b: &BoolShares, x: &RingShares) -> Result<RingShares> {
        let n = x.len();
        expect_len("mux selector", n, b.len())?;
        let r = self.cfg.ring;
        let ch = self.ch.clone();
        let bits: Zeroizing<Vec<u8>> =
            Zeroizing::new(b.as_slice().iter().map(|&v| v & 1).collect());
        let corr: Vec<u64> = bits
            .iter()
            .zip(x.as_slice())
            .map(|(&bi, &xi)| if bi == 1 { r.sub(0, xi) } else { xi })
            .collect();
        let rb = self.ot()?.recv(&ch, bits.to_vec()).await?;
        let sb = self.ot()?.send(&ch, n).await?;
        let ell = r.ell;
        let p = self.cot_send_corr::<MuxCorr>(&sb, &corr, CorrWidths::Uniform(ell))?;
        let t = self
            .cot_recv_corr::<MuxCorr>(&rb, CorrWidths::Uniform(ell))
            .await?;
        let out = (0..n)
            .map(|k| {
                let own = r.sub(r.mul(bits[k] as u64, x.as_slice()[k]), p[k]);
                r.add(own, t[k])
            })
            .collect();
        Ok(RingShares::new(out))
    }

    /// Polynomial `Σ_k c_k x^k` on shared fixed-point `x` by Horner's rule;
    /// coefficients are public reals, encoded at scale `2^F`. Uses
    /// `deg − 1` secret products (triples generated in one offline batch)
    /// and one public product. Error grows by ≤ 1 ulp per step plus the
    /// coefficient rounding.
    pub async fn poly_eval(&mut self, x: &RingShares, coeffs: &[f64]) -> Result<RingShares> {
        let r = self.cfg.ring;
        let n = x.len();
        let d = coeffs.len();
        if d == 0 {
            return Err(MpcError::InvalidInput("empty polynomial"));
        }
        let p0 = self.is_p0();
        let cst = |v: u64| if p0 { v } else { 0 };
        if d == 1 {
            return Ok(RingShares::new(alloc::vec![cst(r.encode(coeffs[0])); n]));
        }
        let t = self.triples(n * (d - 2)).await?;
        let mut acc = self.mul_public(x, r.encode(coeffs[d - 1])).await?;
        for v in acc.as_mut_slice() {
            *v = r.add(*v, cst(r.encode(coeffs[d - 2])));
        }
        for (step, k) in (0..d - 2).rev().enumerate() {
            let z = self
                .mul_with_triples(acc.as_slice(), x.as_slice(), &t, step * n)
                .await?;
            acc = self.round_trunc(z).await?;
            for v in acc.as_mut_slice() {
                *v = r.add(*v, cst(r.encode(coeffs[k])));
            }
        }
        Ok(acc)
    }
}
