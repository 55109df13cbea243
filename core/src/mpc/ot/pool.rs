//! Pools of precomputed random COTs with Beaver derandomization.
//!
//! [`PooledSender`]/[`PooledReceiver`] wrap any COT generator. `fill` runs the
//! inner generator with *random* choice bits `r'` in the offline phase. A
//! later `extend` with chosen bits `r` is served from the pool when it holds
//! enough COTs: the receiver sends `d = r ⊕ r'` (1 bit per OT, message
//! [`Derand`]) and outputs `t_j = t'_j`; the sender outputs
//! `q_j = q'_j ⊕ d_j·Δ`, so `t_j = q_j ⊕ r_j·Δ`. Since `r'` is uniform and
//! unknown to the sender, `d` reveals nothing about `r`. If the pool is too
//! small the call goes to the inner generator unchanged (both parties decide
//! identically, since paired pools always have equal sizes). This is also the
//! shape in which a silent OT (Ferret, [`super::silent`]) plugs in: it only
//! has to fill pools (`fill` calls the inner generator's `extend_random`).

use super::{BlocksFuture, BoxFuture, CotReceiver, CotSender};
use crate::mpc::channel::Channel;
use crate::mpc::error::Result;
use crate::mpc::msgs::Derand;
use alloc::boxed::Box;
use alloc::vec::Vec;
use zeroize::Zeroize;

/// Sender side of a COT pool.
pub struct PooledSender {
    inner: Box<dyn CotSender>,
    pool: Vec<u128>,
    pos: usize,
}

impl core::fmt::Debug for PooledSender {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PooledSender {{ available: {} }}", self.available())
    }
}

impl PooledSender {
    /// Wraps a COT sender with an (initially empty) pool.
    pub fn new(inner: Box<dyn CotSender>) -> Self {
        PooledSender {
            inner,
            pool: Vec::new(),
            pos: 0,
        }
    }

    /// Precomputed COTs not yet used.
    pub fn available(&self) -> usize {
        self.pool.len() - self.pos
    }

    fn compact(&mut self) {
        self.pool[..self.pos].zeroize();
        self.pool.drain(..self.pos);
        self.pos = 0;
    }
}

impl Drop for PooledSender {
    fn drop(&mut self) {
        self.pool.zeroize();
    }
}

impl CotSender for PooledSender {
    fn delta(&self) -> u128 {
        self.inner.delta()
    }

    fn extend<'a>(&'a mut self, ch: &'a Channel, m: usize) -> BlocksFuture<'a> {
        Box::pin(async move {
            if m == 0 || self.available() < m {
                return self.inner.extend(ch, m).await;
            }
            let d = ch.recv_msg::<Derand>(&m).await?.bits;
            let delta = self.inner.delta();
            let out = (0..m)
                .map(|j| self.pool[self.pos + j] ^ (delta & 0u128.wrapping_sub(d[j] as u128)))
                .collect();
            self.pool[self.pos..self.pos + m].zeroize();
            self.pos += m;
            Ok(out)
        })
    }

    fn random_sender_sends(&self) -> bool {
        self.inner.random_sender_sends()
    }

    fn silent_stats(&self) -> Option<super::silent::SilentStats> {
        self.inner.silent_stats()
    }

    fn pooled(&self) -> usize {
        self.available()
    }

    fn fill<'a>(&'a mut self, ch: &'a Channel, m: usize) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.compact();
            self.inner.extend_random_into(ch, m, &mut self.pool).await
        })
    }
}

/// Receiver side of a COT pool.
pub struct PooledReceiver {
    inner: Box<dyn CotReceiver>,
    t: Vec<u128>,
    r: Vec<u8>,
    pos: usize,
}

impl core::fmt::Debug for PooledReceiver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PooledReceiver {{ available: {} }}", self.available())
    }
}

impl PooledReceiver {
    /// Wraps a COT receiver with an (initially empty) pool.
    pub fn new(inner: Box<dyn CotReceiver>) -> Self {
        PooledReceiver {
            inner,
            t: Vec::new(),
            r: Vec::new(),
            pos: 0,
        }
    }

    /// Precomputed COTs not yet used.
    pub fn available(&self) -> usize {
        self.t.len() - self.pos
    }
}

impl Drop for PooledReceiver {
    fn drop(&mut self) {
        self.t.zeroize();
        self.r.zeroize();
    }
}

impl CotReceiver for PooledReceiver {
    fn extend<'a>(&'a mut self, ch: &'a Channel, choices: &'a [u8]) -> BlocksFuture<'a> {
        Box::pin(async move {
            let m = choices.len();
            if m == 0 || self.available() < m {
                return self.inner.extend(ch, choices).await;
            }
            let d = Derand {
                bits: choices
                    .iter()
                    .zip(&self.r[self.pos..self.pos + m])
                    .map(|(&c, &r)| (c ^ r) & 1)
                    .collect(),
            };
            ch.send_msg(&d);
            let out = self.t[self.pos..self.pos + m].to_vec();
            self.t[self.pos..self.pos + m].zeroize();
            self.r[self.pos..self.pos + m].zeroize();
            self.pos += m;
            Ok(out)
        })
    }

    fn pooled(&self) -> usize {
        self.available()
    }

    fn fill<'a>(
        &'a mut self,
        ch: &'a Channel,
        random_choices: Vec<u8>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.t[..self.pos].zeroize();
            self.r[..self.pos].zeroize();
            self.t.drain(..self.pos);
            self.r.drain(..self.pos);
            self.pos = 0;
            self.inner
                .extend_random_into(ch, random_choices, &mut self.t, &mut self.r)
                .await
        })
    }
}
