//! Where each element of a shared tensor sits in the slots of the ciphertexts of a layout, so
//! that the MPC side can read the shares a C2M conversion returns (gather) and lay out the
//! shares an M2C conversion consumes (scatter). The tables are built from the same layouts the
//! FHE kernels use ([`ChannelMap`], [`ScoreStream`], [`PLayout`]); every element has exactly one
//! home slot (checked at construction).

use crate::convert::ComplexShares;
use crate::error::{Error, Result};
use crate::mpc::{MpcError, RingShares};
#[cfg(test)]
use crate::packing::Mat;
use crate::packing::{ChannelMap, PLayout, ScoreStream};
use alloc::vec;
use alloc::vec::Vec;

/// One element's home: ciphertext, slot and part (0 = real, 1 = imaginary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Home {
    ct: u32,
    slot: u32,
    part: u8,
}

/// The homes of the `len` elements of a row-major tensor in `cts` ciphertexts of `slots`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Ciphertexts.
    pub cts: usize,
    /// Slots per ciphertext.
    pub slots: usize,
    homes: Vec<Home>,
}

impl Layout {
    fn build(
        cts: usize,
        slots: usize,
        len: usize,
        mut place: impl FnMut(&mut dyn FnMut(usize, usize, usize, u8)),
    ) -> Result<Self> {
        const NONE: Home = Home {
            ct: u32::MAX,
            slot: 0,
            part: 0,
        };
        let mut homes = vec![NONE; len];
        let mut taken = vec![0u8; cts * slots];
        let mut bad = false;
        place(&mut |e, ct, slot, part| {
            if e >= len || ct >= cts || slot >= slots || homes[e] != NONE {
                bad = true;
                return;
            }
            let bit = 1u8 << part;
            if taken[ct * slots + slot] & bit != 0 {
                bad = true;
                return;
            }
            taken[ct * slots + slot] |= bit;
            homes[e] = Home {
                ct: ct as u32,
                slot: slot as u32,
                part,
            };
        });
        if bad || homes.contains(&NONE) {
            return Err(Error::InvalidParameters(
                "layout does not place every element exactly once",
            ));
        }
        Ok(Self { cts, slots, homes })
    }

    /// An `m × cols` activation in a segment-column [`ChannelMap`]: element `(r, c)` in the
    /// segment holding channel `c`, row `r`.
    pub fn channels(map: &ChannelMap, cols: usize, slots: usize) -> Result<Self> {
        let m = map.m;
        Self::build(map.cts, slots, m * cols, |put| {
            for ct in 0..map.cts {
                for part in 0..2u8 {
                    for seg in 0..map.segs {
                        if let Some(c) = map.get(ct, part as usize, seg) {
                            for r in 0..m {
                                put(r * cols + c, ct, seg * m + r, part);
                            }
                        }
                    }
                }
            }
        })
    }

    /// The score stream: element `((h·m + q)·m + k)` is head `h`, query `q`, key `k` (the
    /// softmax block's row-major rows).
    pub fn scores(s: &ScoreStream) -> Result<Self> {
        let (m, heads, slots) = (s.m, s.heads, s.slots);
        Self::build(s.cts(), slots, heads * m * m, |put| {
            for t in 0..m / 2 {
                for h in 0..heads {
                    for j in 0..m {
                        let g = (t * heads + h) * m + j;
                        let row = (h * m + j) * m;
                        put(row + (j + t) % m, g / slots, g % slots, 0);
                        put(row + (j + t + m / 2) % m, g / slots, g % slots, 1);
                    }
                }
            }
        })
    }

    /// The softmax output in the value kernel's minimal folded-diagonal packing, same element
    /// order as [`Layout::scores`].
    pub fn probs(p: &PLayout) -> Result<Self> {
        let m = p.m;
        Self::build(p.cts(), p.slots, p.heads * m * m, |put| {
            for h in 0..p.heads {
                let (l, hb) = (h / p.h_blk, h % p.h_blk);
                for t in 0..m / 2 {
                    let seg = hb * p.s_p + t;
                    for j in 0..m {
                        let row = (h * m + j) * m;
                        put(row + (j + t) % m, l, seg * m + j, 0);
                        put(row + (j + t + m / 2) % m, l, seg * m + j, 1);
                    }
                }
            }
        })
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.homes.len()
    }

    /// Whether the layout has no element.
    pub fn is_empty(&self) -> bool {
        self.homes.is_empty()
    }

    /// The tensor's shares from the shares of its ciphertexts' slots.
    pub fn gather(&self, cts: &[ComplexShares]) -> core::result::Result<RingShares, MpcError> {
        if cts.len() != self.cts
            || cts
                .iter()
                .any(|c| c.re.len() != self.slots || c.im.len() != self.slots)
        {
            return Err(MpcError::LengthMismatch {
                what: "converted ciphertext shares",
                expected: self.cts * self.slots,
                found: cts.iter().map(|c| c.re.len()).sum(),
            });
        }
        Ok(RingShares::new(
            self.homes
                .iter()
                .map(|h| {
                    let c = &cts[h.ct as usize];
                    let v = if h.part == 0 { &c.re } else { &c.im };
                    v.as_slice()[h.slot as usize]
                })
                .collect(),
        ))
    }

    /// The shares of the ciphertexts' slots (zero where no element lives) from the tensor's.
    pub fn scatter(&self, x: &RingShares) -> core::result::Result<Vec<ComplexShares>, MpcError> {
        if x.len() != self.homes.len() {
            return Err(MpcError::LengthMismatch {
                what: "tensor shares",
                expected: self.homes.len(),
                found: x.len(),
            });
        }
        let mut re = vec![vec![0u64; self.slots]; self.cts];
        let mut im = vec![vec![0u64; self.slots]; self.cts];
        for (h, &v) in self.homes.iter().zip(x.as_slice()) {
            let t = if h.part == 0 { &mut re } else { &mut im };
            t[h.ct as usize][h.slot as usize] = v;
        }
        Ok(ComplexShares::zip(re, im))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transformer::{AttnPlan, AttnShape};

    fn roundtrip(lay: &Layout) {
        let x = RingShares::new((0..lay.len() as u64).map(|v| v + 1).collect());
        let cts = lay.scatter(&x).unwrap();
        assert_eq!(cts.len(), lay.cts);
        // Every element once, every other slot zero.
        let nonzero: usize = cts
            .iter()
            .map(|c| {
                c.re.as_slice().iter().filter(|&&v| v != 0).count()
                    + c.im.as_slice().iter().filter(|&&v| v != 0).count()
            })
            .sum();
        assert_eq!(nonzero, lay.len());
        assert_eq!(lay.gather(&cts).unwrap(), x);
    }

    /// The layouts agree with the packings the FHE kernels and their tests use: a matrix packed
    /// by `ChannelMap::pack` / `ScoreStream::pack` / `PLayout::pack` puts element `e` exactly
    /// where the table says.
    #[test]
    fn layouts_match_the_kernels_packings() {
        let shape = AttnShape {
            m: 16,
            d: 64,
            heads: 2,
            slots: 512,
        };
        let plan = AttnPlan::new(shape).unwrap();
        let (m, d, h) = (16, 64, 2);
        let lx = Layout::channels(&plan.x_map(), d, 512).unwrap();
        let ls = Layout::scores(&plan.score_stream()).unwrap();
        let lp = Layout::probs(&plan.p_layout()).unwrap();
        for lay in [&lx, &ls, &lp] {
            roundtrip(lay);
        }
        let id = |e: usize| (e + 1) as f64;
        let x = Mat::from_fn(m, d, |r, c| id(r * d + c));
        let heads: Vec<Mat> = (0..h)
            .map(|hh| Mat::from_fn(m, m, |q, k| id((hh * m + q) * m + k)))
            .collect();
        for (lay, packed) in [
            (&lx, plan.x_map().pack(&x, 512)),
            (&ls, plan.score_stream().pack(&heads)),
            (&lp, plan.p_layout().pack(&heads)),
        ] {
            let shares: Vec<ComplexShares> = packed
                .iter()
                .map(|v| ComplexShares {
                    re: RingShares::new(v.iter().map(|z| z.re as u64).collect()),
                    im: RingShares::new(v.iter().map(|z| z.im as u64).collect()),
                })
                .collect();
            let got = lay.gather(&shares).unwrap();
            let want: Vec<u64> = (1..=lay.len() as u64).collect();
            assert_eq!(got.as_slice(), &want[..]);
        }
    }

    /// Wrong share counts are typed errors.
    #[test]
    fn wrong_lengths_are_refused() {
        let plan = AttnPlan::new(AttnShape {
            m: 16,
            d: 64,
            heads: 2,
            slots: 512,
        })
        .unwrap();
        let lx = Layout::channels(&plan.x_map(), 64, 512).unwrap();
        assert!(lx.scatter(&RingShares::new(vec![0; 5])).is_err());
        assert!(lx.gather(&[]).is_err());
    }
}
