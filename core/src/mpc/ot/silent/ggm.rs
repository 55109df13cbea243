//! GGM trees: the punctured PRF of the single-point COT.
//!
//! The length-doubling PRG is `G(x) = (π_0(x) ⊕ x, π_1(x) ⊕ x)` with `π_0, π_1`
//! AES-128 under two fixed public keys (the "two-key PRP" expansion of emp-ot's
//! Ferret; Guo et al. S&P 2020 for the fixed-key model). Node `i` of level `j`
//! has the children `2i` (left, `π_0`) and `2i + 1` (right, `π_1`) at level
//! `j + 1`; level `0` is the root seed, level `h` the `2^h` leaves.
//!
//! The sender expands the whole tree and records, per level `j ≥ 1`, the sums
//! `K_0^j = ⊕ even nodes`, `K_1^j = ⊕ odd nodes`. A receiver that knows
//! `K_{¬α_j}^j` for every level (`α_j` the `j`-th bit of the punctured index `α`,
//! MSB first) rebuilds every node off the path to `α`: at level `j` the sibling
//! of the path node is `K_{¬α_j}^j ⊕` the other known nodes of its parity
//! (Boyle et al. CCS 2019; Ferret, Yang et al. CCS 2020, Fig. 4). The leaf `α`
//! stays unknown to it.
//!
//! The receiver's loops index memory by `α` (variable time in its own secret
//! noise position, as in emp-ot and libOTe).

use crate::mpc::ot::PiKey;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::BlockEncrypt;
use aes::Aes128;
use zeroize::Zeroize;

/// Parents encrypted per AES batch.
const BATCH: usize = 64;

/// The length-doubling PRG `G` of the GGM tree.
#[derive(Clone)]
pub struct Ggm {
    left: Aes128,
    right: Aes128,
}

impl core::fmt::Debug for Ggm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Ggm")
    }
}

impl Default for Ggm {
    fn default() -> Self {
        Self::new()
    }
}

impl Ggm {
    /// Instantiates `π_0, π_1`.
    pub fn new() -> Self {
        Ggm {
            left: PiKey::GgmLeft.aes(),
            right: PiKey::GgmRight.aes(),
        }
    }

    /// `G(x) = (π_0(x) ⊕ x, π_1(x) ⊕ x)` of one node (the definition, for tests).
    pub fn expand_one(&self, x: u128) -> (u128, u128) {
        let mut l = GenericArray::from(x.to_le_bytes());
        let mut r = l;
        self.left.encrypt_block(&mut l);
        self.right.encrypt_block(&mut r);
        (
            u128::from_le_bytes(l.into()) ^ x,
            u128::from_le_bytes(r.into()) ^ x,
        )
    }

    /// Children of every parent: `next[2i], next[2i+1] = G(prev[i])`
    /// (`next.len() == 2·prev.len()`).
    fn expand_level(&self, prev: &[u128], next: &mut [u128]) {
        debug_assert_eq!(next.len(), 2 * prev.len());
        let mut bl = [GenericArray::from([0u8; 16]); BATCH];
        let mut br = [GenericArray::from([0u8; 16]); BATCH];
        for (pc, nc) in prev.chunks(BATCH).zip(next.chunks_mut(2 * BATCH)) {
            let n = pc.len();
            for k in 0..n {
                bl[k] = GenericArray::from(pc[k].to_le_bytes());
                br[k] = bl[k];
            }
            self.left.encrypt_blocks(&mut bl[..n]);
            self.right.encrypt_blocks(&mut br[..n]);
            for k in 0..n {
                nc[2 * k] = u128::from_le_bytes(bl[k].into()) ^ pc[k];
                nc[2 * k + 1] = u128::from_le_bytes(br[k].into()) ^ pc[k];
            }
        }
        for b in bl.iter_mut().chain(br.iter_mut()) {
            b.as_mut_slice().zeroize();
        }
    }

    /// Sender: expands `seed` into `leaves` (`2^h` of them, `h = sums.len()`),
    /// writing `(K_0^j, K_1^j)` into `sums[j − 1]`. `scratch` holds at least
    /// `2^{h−1}` blocks.
    pub fn sender_tree(
        &self,
        seed: u128,
        leaves: &mut [u128],
        sums: &mut [(u128, u128)],
        scratch: &mut [u128],
    ) {
        let h = sums.len();
        debug_assert_eq!(leaves.len(), 1 << h);
        leaves[0] = seed;
        let mut len = 1;
        for s in sums.iter_mut() {
            scratch[..len].copy_from_slice(&leaves[..len]);
            self.expand_level(&scratch[..len], &mut leaves[..2 * len]);
            len *= 2;
            let (mut k0, mut k1) = (0u128, 0u128);
            for p in leaves[..len].chunks_exact(2) {
                k0 ^= p[0];
                k1 ^= p[1];
            }
            *s = (k0, k1);
        }
        scratch[..len / 2].zeroize();
    }

    /// Receiver: rebuilds every leaf but `alpha` from the level sums
    /// `known[j − 1] = K_{¬α_j}^j` (`h = known.len()`); `leaves[alpha]` is
    /// left at zero. `scratch` holds at least `2^{h−1}` blocks.
    pub fn receiver_tree(
        &self,
        alpha: usize,
        known: &[u128],
        leaves: &mut [u128],
        scratch: &mut [u128],
    ) {
        let h = known.len();
        debug_assert_eq!(leaves.len(), 1 << h);
        debug_assert!(alpha < leaves.len());
        leaves[0] = 0;
        let mut len = 1;
        for (j, &kn) in known.iter().enumerate() {
            scratch[..len].copy_from_slice(&leaves[..len]);
            self.expand_level(&scratch[..len], &mut leaves[..2 * len]);
            len *= 2;
            // Path node of level j + 1 and its sibling (children of the
            // unknown parent: both computed from garbage, both overwritten).
            let p = alpha >> (h - 1 - j);
            let sib = p ^ 1;
            leaves[p] = 0;
            leaves[sib] = 0;
            let mut s = kn;
            let mut i = sib & 1;
            while i < len {
                s ^= leaves[i];
                i += 2;
            }
            leaves[sib] = s;
        }
        scratch[..len / 2].zeroize();
    }
}
