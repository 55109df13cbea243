//! The CNN layers on exact slot vectors (a plaintext executor with CKKS's slot semantics) against
//! the `f64` references, and the dry-run counts against FEnc2's Table IX.

use super::*;
use crate::circuits::exec::{Exec, OpCounts, PtValues, SymExec};
use crate::ckks::C64;
use crate::error::Result;
use crate::packing::fragment::FragmentLayout;
use alloc::vec;
use alloc::vec::Vec;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// Slot vectors with exact arithmetic: rotations, products and sums as CKKS defines them on
/// slots, without encryption or noise. Levels are tracked so that depth is checked too.
struct SlotExec {
    n: usize,
}

#[derive(Clone)]
struct SlotCt {
    v: Vec<C64>,
    level: usize,
}

impl SlotExec {
    fn rot(&self, v: &[C64], k: i64) -> Vec<C64> {
        let k = k.rem_euclid(self.n as i64) as usize;
        (0..self.n).map(|i| v[(i + k) % self.n]).collect()
    }
}

impl Exec for SlotExec {
    type Ct = SlotCt;
    fn slots(&self) -> usize {
        self.n
    }
    fn level(&self, ct: &SlotCt) -> usize {
        ct.level
    }
    fn clone_ct(&self, ct: &SlotCt) -> SlotCt {
        ct.clone()
    }
    fn rotate_many(&self, ct: &SlotCt, ks: &[i64]) -> Result<Vec<SlotCt>> {
        Ok(ks
            .iter()
            .map(|&k| SlotCt {
                v: self.rot(&ct.v, k),
                level: ct.level,
            })
            .collect())
    }
    fn rotate_sum_lazy(&self, terms: Vec<(SlotCt, i64)>) -> Result<SlotCt> {
        let level = terms[0].0.level;
        let mut acc = vec![C64::default(); self.n];
        for (ct, k) in terms {
            assert_eq!(ct.level, level);
            for (a, b) in acc.iter_mut().zip(self.rot(&ct.v, k)) {
                *a = *a + b;
            }
        }
        Ok(SlotCt { v: acc, level })
    }
    fn conjugate(&self, ct: &SlotCt) -> Result<SlotCt> {
        Ok(SlotCt {
            v: ct.v.iter().map(|x| x.conj()).collect(),
            level: ct.level,
        })
    }
    fn mul_plain(&self, ct: &SlotCt, _key: Option<u64>, values: PtValues<'_>) -> Result<SlotCt> {
        let p = values();
        assert_eq!(p.len(), self.n);
        Ok(SlotCt {
            v: ct.v.iter().zip(&p).map(|(a, b)| *a * *b).collect(),
            level: ct.level,
        })
    }
    fn mul_plain_at(
        &self,
        ct: &SlotCt,
        key: Option<u64>,
        values: PtValues<'_>,
        _scale: f64,
    ) -> Result<SlotCt> {
        self.mul_plain(ct, key, values)
    }
    fn mul_const_acc(
        &self,
        acc: &mut Option<SlotCt>,
        ct: &SlotCt,
        w: f64,
        _scale: f64,
    ) -> Result<()> {
        let t = SlotCt {
            v: ct.v.iter().map(|x| *x * w).collect(),
            level: ct.level,
        };
        match acc {
            Some(a) => self.add_assign(a, &t),
            None => {
                *acc = Some(t);
                Ok(())
            }
        }
    }
    fn add_plain(&self, ct: &mut SlotCt, values: PtValues<'_>) -> Result<()> {
        for (a, b) in ct.v.iter_mut().zip(values()) {
            *a = *a + b;
        }
        Ok(())
    }
    fn mul_ct(&self, a: &SlotCt, b: &SlotCt) -> Result<SlotCt> {
        assert_eq!(a.level, b.level);
        Ok(SlotCt {
            v: a.v.iter().zip(&b.v).map(|(x, y)| *x * *y).collect(),
            level: a.level,
        })
    }
    fn relin(&self, _ct: &mut SlotCt) -> Result<()> {
        Ok(())
    }
    fn rescale(&self, ct: &mut SlotCt) -> Result<()> {
        assert!(ct.level > 0, "level exhausted");
        ct.level -= 1;
        Ok(())
    }
    fn add_assign(&self, a: &mut SlotCt, b: &SlotCt) -> Result<()> {
        assert_eq!(a.level, b.level);
        for (x, y) in a.v.iter_mut().zip(&b.v) {
            *x = *x + *y;
        }
        Ok(())
    }
    fn sub_assign(&self, a: &mut SlotCt, b: &SlotCt) -> Result<()> {
        for (x, y) in a.v.iter_mut().zip(&b.v) {
            *x = *x - *y;
        }
        Ok(())
    }
    fn mul_i(&self, a: &mut SlotCt) -> Result<()> {
        for x in &mut a.v {
            *x = *x * C64::new(0.0, 1.0);
        }
        Ok(())
    }
    fn drop_to(&self, a: &mut SlotCt, level: usize) -> Result<()> {
        a.level = level;
        Ok(())
    }
    fn note_repack(&self) {}
    fn counts(&self) -> OpCounts {
        OpCounts::default()
    }
}

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn rand_vec(r: &mut ChaCha20Rng, n: usize, amp: f64) -> Vec<f64> {
    (0..n)
        .map(|_| ((r.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * amp)
        .collect()
}

fn random_conv(r: &mut ChaCha20Rng, ci: usize, co: usize, k: usize, s: usize, p: usize) -> Conv2d {
    let w = rand_vec(r, co * ci * k * k, 0.5);
    let b = rand_vec(r, co, 0.5);
    Conv2d::new(ci, co, k, s, p, w, b).unwrap()
}

/// [`random_conv`], or a random depthwise layer over `ci` channels when `dw`.
fn random_layer(
    r: &mut ChaCha20Rng,
    ci: usize,
    co: usize,
    k: usize,
    s: usize,
    p: usize,
    dw: bool,
) -> Conv2d {
    if dw {
        let w = rand_vec(r, ci * k * k, 0.5);
        Conv2d::depthwise(ci, k, s, p, w, rand_vec(r, ci, 0.5)).unwrap()
    } else {
        random_conv(r, ci, co, k, s, p)
    }
}

fn encrypt_plain(l: &FragmentLayout, t: &[f64], level: usize) -> Vec<SlotCt> {
    l.pack(t)
        .unwrap()
        .into_iter()
        .map(|v| SlotCt {
            v: v.into_iter().map(C64::real).collect(),
            level,
        })
        .collect()
}

fn decrypt_plain(cts: &[SlotCt]) -> Vec<Vec<f64>> {
    cts.iter()
        .map(|c| c.v.iter().map(|x| x.re).collect())
        .collect()
}

fn max_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn convolutions_match_the_reference_at_every_block_size() {
    let mut r = rng(1);
    // (batch, c_in, c_out, side, kernel, stride, padding, block, slots)
    let cases = [
        (1, 3, 4, 8, 3, 1, 1, 1, 256),
        (1, 3, 4, 8, 3, 1, 1, 2, 256),
        (2, 3, 5, 8, 3, 1, 1, 4, 512),
        (1, 2, 3, 7, 5, 1, 2, 2, 256),
        (2, 1, 6, 6, 5, 1, 0, 2, 128),
        (1, 4, 4, 8, 3, 2, 1, 2, 256),
        (4, 2, 3, 8, 3, 2, 1, 4, 1024),
        (1, 5, 2, 8, 1, 1, 0, 2, 128),
        (1, 2, 2, 8, 3, 1, 1, 8, 64),
        // One channel per ciphertext (the large-batch, scalar-weight mode), also on a 2 × 2
        // block grid where two block offsets share a rotation amount.
        (16, 2, 3, 8, 3, 1, 1, 2, 256),
        (4, 1, 2, 8, 5, 2, 2, 4, 16),
        (4, 2, 2, 8, 5, 1, 2, 4, 16),
        // 40 channels of 4 ciphertexts, up to 9 masked copies each: the masked inputs are
        // accumulated over several groups (`products_scalar` flushes every 256).
        (16, 40, 3, 8, 3, 1, 1, 2, 256),
    ];
    for &(bs, ci, co, h, k, s, p, blk, n) in &cases {
        let conv = random_conv(&mut r, ci, co, k, s, p);
        let l = FragmentLayout::new(bs, ci, h, h, None, blk, n).unwrap();
        let plan = conv.plan(&l).unwrap();
        let x = rand_vec(&mut r, l.len(), 1.0);
        let ex = SlotExec { n };
        let y = conv
            .run(&ex, &plan, &encrypt_plain(&l, &x, 3), None)
            .unwrap();
        assert!(y.iter().all(|c| c.level == 2), "one level per convolution");
        let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
        let (want, ho, wo) = reference::conv2d(&conv, &x, bs, h, h, None);
        assert_eq!((plan.output.height, plan.output.width), (ho, wo));
        let e = max_err(&got, &want);
        assert!(
            e < 1e-9,
            "case {:?}: error {e}",
            (bs, ci, co, h, k, s, p, blk)
        );
        // The dry run issues exactly the compiled rotations.
        let sym = SymExec::new(n);
        let sx: Vec<_> = (0..l.ciphertexts()).map(|_| sym.fresh(3)).collect();
        conv.run(&sym, &plan, &sx, None).unwrap();
        let c = sym.counts();
        assert_eq!(c.rotations, plan.counts().total());
        if l.channels_per_ct() == 1 {
            // Scalar mode: one constant multiply-accumulate per product, a mask per
            // (input, offset).
            assert_eq!(c.const_mults, plan.counts().pt_mults);
            assert!(c.pt_mults < c.const_mults);
            if ci == 40 {
                assert!(c.pt_mults > 512, "only {} masked copies", c.pt_mults);
            }
        } else {
            assert_eq!(c.pt_mults, plan.counts().pt_mults);
        }
    }
}

#[test]
fn pixelwise_convolutions_match_on_unpadded_maps() {
    // The batch fills the slots: one pixel of one channel per ciphertext, the grid the map
    // itself (odd sides included), strides by discarding positions.
    let mut r = rng(11);
    // (c_in, c_out, side, kernel, stride, padding)
    // The last: an odd side under stride 2 (7 → 4), no divisibility needed.
    for &(ci, co, h, k, s, p) in &[
        (2, 3, 7, 3, 1, 1),
        (3, 2, 6, 5, 2, 2),
        (1, 4, 5, 3, 1, 0),
        (2, 2, 7, 3, 2, 1),
    ] {
        let n = 8;
        let conv = random_conv(&mut r, ci, co, k, s, p);
        let l = FragmentLayout::new(n, ci, h, h, Some(h), h, n).unwrap();
        assert!(l.is_pixelwise());
        let plan = conv.plan(&l).unwrap();
        let x = rand_vec(&mut r, l.len(), 1.0);
        let y = conv
            .run(&SlotExec { n }, &plan, &encrypt_plain(&l, &x, 2), None)
            .unwrap();
        assert!(y.iter().all(|c| c.level == 1));
        let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
        let (want, _, _) = reference::conv2d(&conv, &x, n, h, h, None);
        let e = max_err(&got, &want);
        assert!(e < 1e-9, "{:?}: error {e}", (ci, co, h, k, s, p));
        assert_eq!(plan.counts().total(), 0);
    }
    // A power-of-two grid is still required when blocks tile it.
    assert!(FragmentLayout::new(8, 1, 7, 7, Some(7), 1, 64).is_err());
}

#[test]
fn a_wrong_weight_is_caught() {
    let mut r = rng(2);
    let conv = random_conv(&mut r, 2, 2, 3, 1, 1);
    let l = FragmentLayout::new(1, 2, 8, 8, None, 2, 256).unwrap();
    let plan = conv.plan(&l).unwrap();
    let x = rand_vec(&mut r, l.len(), 1.0);
    let y = conv
        .run(&SlotExec { n: 256 }, &plan, &encrypt_plain(&l, &x, 1), None)
        .unwrap();
    let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
    let mut bad = conv.clone();
    bad.weight[7] += 0.01;
    let (want, _, _) = reference::conv2d(&bad, &x, 1, 8, 8, None);
    assert!(max_err(&got, &want) > 1e-3);
}

#[test]
fn a_small_network_with_folded_activations_matches() {
    // conv(5×5, pad 2) → quadratic → avg-pool 2 → conv(3×3) → quadratic → flatten → FC → FC,
    // LeNet's pattern at toy size.
    let mut r = rng(3);
    let (bs, n) = (2, 1024);
    let c1 = random_conv(&mut r, 1, 3, 5, 1, 2);
    let q = Quadratic::new(0.25, 0.5, 0.1).unwrap();
    let pool = Conv2d::avg_pool(3, 2).unwrap();
    let c2 = random_conv(&mut r, 3, 4, 3, 1, 0);
    let l0 = FragmentLayout::new(bs, 1, 12, 12, None, 4, n).unwrap();
    let p1 = c1.plan(&l0).unwrap();
    let pp = pool.plan(&p1.output).unwrap();
    assert_eq!(
        pp.counts().total(),
        0,
        "pooling inside blocks needs no rotation"
    );
    let p2 = c2.plan(&pp.output).unwrap();
    let fm = FeatureMap::flatten(&p2.output);
    let f1 = Linear::new(
        fm.len(),
        7,
        rand_vec(&mut r, fm.len() * 7, 0.3),
        rand_vec(&mut r, 7, 0.3),
    )
    .unwrap();
    let pf1 = f1.plan(&fm).unwrap();
    let f2 = Linear::new(7, 3, rand_vec(&mut r, 21, 0.3), rand_vec(&mut r, 3, 0.3)).unwrap();
    let pf2 = f2.plan(&pf1.output).unwrap();

    let x = rand_vec(&mut r, l0.len(), 1.0);
    let ex = SlotExec { n };
    let a3 = q.affine(3);
    let a4 = q.affine(4);
    let a7 = q.affine(7);
    let y = c1.run(&ex, &p1, &encrypt_plain(&l0, &x, 9), None).unwrap();
    let y = q.run(&ex, y).unwrap();
    let y = pool.run(&ex, &pp, &y, Some(&a3)).unwrap();
    let y = c2.run(&ex, &p2, &y, None).unwrap();
    let y = q.run(&ex, y).unwrap();
    // Flatten is free: the feature map reads the conv output's slots in place.
    let a4f = InputAffine {
        scale: vec![a4.scale[0]; fm.len()],
        shift: vec![a4.shift[0]; fm.len()],
    };
    let y = f1.run(&ex, &pf1, &y, Some(&a4f)).unwrap();
    let y = q.run(&ex, y).unwrap();
    let y = f2.run(&ex, &pf2, &y, Some(&a7)).unwrap();
    assert_eq!(
        y[0].level, 1,
        "eight levels: five linear layers (pooling included), three activations"
    );
    let got = pf2.output.unpack(&decrypt_plain(&y)).unwrap();

    let act = |v: Vec<f64>| v.into_iter().map(|t| q.eval(t)).collect::<Vec<_>>();
    let (t, h, w) = reference::conv2d(&c1, &x, bs, 12, 12, None);
    let (t, h, w) = reference::conv2d(&pool, &act(t), bs, h, w, None);
    let (t, _, _) = reference::conv2d(&c2, &t, bs, h, w, None);
    let t = reference::linear(&f1, &act(t), bs, None);
    let want = reference::linear(&f2, &act(t), bs, None);
    let e = max_err(&got, &want);
    assert!(e < 1e-9, "network error {e}");
}

#[test]
fn fc_layers_match_on_sparse_and_dense_inputs() {
    let mut r = rng(4);
    for &(bs, n, c, h, blk, outs) in &[
        (1, 256, 3, 4, 1, 10),
        (4, 256, 2, 4, 2, 70),
        (2, 128, 1, 4, 4, 5),
    ] {
        let l = FragmentLayout::new(bs, c, h, h, None, blk, n).unwrap();
        let fm = FeatureMap::flatten(&l);
        let f = Linear::new(
            fm.len(),
            outs,
            rand_vec(&mut r, fm.len() * outs, 0.5),
            rand_vec(&mut r, outs, 0.5),
        )
        .unwrap();
        let p = f.plan(&fm).unwrap();
        let x = rand_vec(&mut r, l.len(), 1.0);
        let ex = SlotExec { n };
        let y = f.run(&ex, &p, &encrypt_plain(&l, &x, 1), None).unwrap();
        let got = p.output.unpack(&decrypt_plain(&y)).unwrap();
        // Reference on the flattened per-sample features.
        let feats = l.len() / bs;
        let want = reference::linear(&f, &x, bs, None);
        assert_eq!(got.len(), bs * outs);
        assert_eq!(feats, fm.len());
        assert!(max_err(&got, &want) < 1e-9);
        let sym = SymExec::new(n);
        let sx: Vec<_> = (0..l.ciphertexts()).map(|_| sym.fresh(1)).collect();
        f.run(&sym, &p, &sx, None).unwrap();
        assert_eq!(sym.counts().rotations, p.counts().total());
    }
}

/// FEnc2 Table IX at `N = 2^15`: the five convolution settings, S ∈ {1, 2, 4, 8}.
#[test]
fn table_ix_block_size_sweep() {
    let slots = 1 << 14;
    // (BS, N_in, N_out, K, paper's #Rot at S = 1, 2, 4, 8 where printed)
    type Setting = (usize, usize, usize, usize, [Option<u64>; 4]);
    let settings: [Setting; 5] = [
        (4, 64, 64, 3, [Some(176), Some(288), Some(1008), None]),
        (8, 64, 64, 3, [Some(288), Some(320), Some(992), None]),
        (8, 128, 32, 9, [None, Some(1648), Some(1008), Some(2224)]),
        (8, 128, 32, 3, [Some(528), Some(304), Some(496), None]),
        (8, 32, 128, 3, [Some(192), Some(496), Some(1984), None]),
    ];
    for &(bs, nin, nout, k, paper) in &settings {
        let conv = Conv2d::new(
            nin,
            nout,
            k,
            1,
            k / 2,
            vec![0.1; nout * nin * k * k],
            vec![0.0; nout],
        )
        .unwrap();
        let ch = choose_block(&conv, bs, 32, 32, slots).unwrap();
        for p in &ch.sweep {
            let i = p.block.trailing_zeros() as usize;
            if let Some(Some(want)) = paper.get(i) {
                // Where the inner term is exact (K > S) and the outputs fill their ciphertexts,
                // the compiled counts are the paper's. For K ≤ S the paper prints the outer
                // rotations alone; with fewer output channels than a ciphertext holds it counts
                // fractional output ciphertexts (N_out·BS/α), which compaction (AAC) would give.
                let per_ct = slots / (bs * (32 / p.block) * (32 / p.block));
                if k > p.block && nout >= per_ct {
                    assert_eq!(
                        p.exact.total(),
                        *want,
                        "{:?} S={}",
                        (bs, nin, nout, k),
                        p.block
                    );
                } else if nout >= per_ct {
                    // K ≤ S: the paper's figure is the outer rotations alone.
                    assert_eq!(
                        p.exact.outer,
                        *want,
                        "{:?} S={}",
                        (bs, nin, nout, k),
                        p.block
                    );
                }
            }
        }
        let best_step = ch.best.trailing_zeros() as i32;
        let star_step = ch.s_star.trailing_zeros() as i32;
        assert!(
            (best_step - star_step).abs() <= 1,
            "S* {} vs best {}",
            ch.s_star,
            ch.best
        );
    }
}

#[test]
fn bad_layers_are_refused() {
    let l = FragmentLayout::new(1, 3, 8, 8, None, 1, 256).unwrap();
    assert!(Conv2d::new(3, 2, 3, 1, 1, vec![0.0; 5], vec![0.0; 2]).is_err());
    assert!(Conv2d::new(3, 2, 3, 1, 1, vec![f64::NAN; 54], vec![0.0; 2]).is_err());
    let c = Conv2d::new(2, 2, 3, 1, 1, vec![0.0; 36], vec![0.0; 2]).unwrap();
    assert!(c.plan(&l).is_err(), "channel mismatch");
    let c = Conv2d::new(3, 2, 3, 2, 1, vec![0.0; 54], vec![0.0; 2]).unwrap();
    assert!(c.plan(&l).is_err(), "stride 2 needs S ≥ 2");
    assert!(Quadratic::new(0.0, 1.0, 0.0).is_err());
    // A plan compiled for another layer is refused, not indexed out of bounds.
    let l2 = FragmentLayout::new(1, 2, 8, 8, None, 1, 256).unwrap();
    let a = Conv2d::new(2, 2, 3, 1, 1, vec![0.1; 36], vec![0.0; 2]).unwrap();
    let b = Conv2d::new(2, 2, 5, 1, 2, vec![0.1; 100], vec![0.0; 2]).unwrap();
    let pb = b.plan(&l2).unwrap();
    let sym = SymExec::new(256);
    let xs: Vec<_> = (0..l2.ciphertexts()).map(|_| sym.fresh(2)).collect();
    assert!(a.run(&sym, &pb, &xs, None).is_err());
    let fm = FeatureMap::flatten(&l2);
    let f1 = Linear::new(fm.len(), 3, vec![0.1; fm.len() * 3], vec![0.0; 3]).unwrap();
    let f2 = Linear::new(fm.len(), 4, vec![0.1; fm.len() * 4], vec![0.0; 4]).unwrap();
    let p2 = f2.plan(&fm).unwrap();
    assert!(f1.run(&sym, &p2, &xs, None).is_err());
    assert!(Linear::new(3, 2, vec![0.0; 5], vec![0.0; 2]).is_err());
}

#[test]
fn an_orion_shaped_lenet_matches_its_reference() {
    // Orion's LeNet at reduced width: conv 5×5 stride 2 pad 2 → quad → conv 5×5 stride 2
    // pad 2 → quad → flatten → FC → quad → FC, on 28×28 inputs padded to 32.
    let mut r = rng(5);
    let net = Network {
        name: "lenet-small".into(),
        channels: 1,
        side: 28,
        layers: vec![
            Layer::Conv(random_conv(&mut r, 1, 4, 5, 2, 2)),
            Layer::Quad(Quadratic::new(0.1, 0.5, 0.2).unwrap()),
            Layer::Conv(random_conv(&mut r, 4, 6, 5, 2, 2)),
            Layer::Quad(Quadratic::new(0.05, 0.4, -0.1).unwrap()),
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    294,
                    12,
                    rand_vec(&mut r, 294 * 12, 0.1),
                    rand_vec(&mut r, 12, 0.2),
                )
                .unwrap(),
            ),
            Layer::Quad(Quadratic::new(0.2, 0.3, 0.0).unwrap()),
            Layer::Linear(
                Linear::new(
                    12,
                    10,
                    rand_vec(&mut r, 120, 0.3),
                    rand_vec(&mut r, 10, 0.2),
                )
                .unwrap(),
            ),
        ],
    };
    for &(bs, blk, n) in &[(1, 4, 4096), (4, 4, 4096), (64, 8, 1024)] {
        let plan = net.plan(bs, blk, n).unwrap();
        assert_eq!(plan.depth, 7);
        let x = rand_vec(&mut r, bs * 28 * 28, 1.0);
        let ex = SlotExec { n };
        let mut names = Vec::new();
        let y = net
            .run(&ex, &plan, encrypt_plain(&plan.input, &x, 7), |c| {
                names.push(c.name.clone())
            })
            .unwrap();
        assert_eq!(names.len(), 8);
        assert_eq!(y[0].level, 0);
        let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
        let want = net.reference(&x, bs).unwrap();
        let e = max_err(&got, &want);
        assert!(e < 1e-9, "bs {bs} S {blk}: error {e}");
    }
    // The batch filling the slots: pixel-wise on the unpadded 28 × 28 map, no rotation at all,
    // one constant multiply-accumulate per nonzero weight and sample-independent counts.
    let n = 16;
    let plan = net.plan(n, 4, n).unwrap();
    assert!(plan.input.is_pixelwise());
    assert_eq!((plan.input.grid, plan.input.ciphertexts()), (28, 784));
    let x = rand_vec(&mut r, n * 28 * 28, 1.0);
    let y = net
        .run(
            &SlotExec { n },
            &plan,
            encrypt_plain(&plan.input, &x, 7),
            |_| {},
        )
        .unwrap();
    let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
    let e = max_err(&got, &net.reference(&x, n).unwrap());
    assert!(e < 1e-9, "pixel-wise: error {e}");
    let sym = SymExec::new(n);
    let sx: Vec<_> = (0..plan.input.ciphertexts())
        .map(|_| sym.fresh(7))
        .collect();
    let out = net.run(&sym, &plan, sx, |_| {}).unwrap();
    assert_eq!(out.len(), 10);
    let c = sym.counts();
    assert_eq!((c.rotations, c.pt_mults), (0, 0));
    // conv1 reads ≤ 25 taps per output pixel (fewer at the borders), and so on.
    assert!(c.const_mults > 0 && c.const_mults <= 4 * 196 * 25 + 6 * 49 * 100 + 12 * 294 + 120);
    // A chain that does not fit is refused with a typed error.
    let mut bad = net.clone();
    bad.layers.swap(4, 5);
    assert!(bad.plan(1, 4, 4096).is_err());
}

/// The hybrid plan splits at every ReLU, trims each C2M to the shortest admissible level and
/// lands each M2C one level per linear layer above it; its conversion and ReLU counts follow the
/// layout.
#[test]
fn hybrid_plan_splits_at_relus_and_trims_the_conversions() {
    use crate::cnn::hybrid::HybridPlan;
    let net = Network {
        name: "t".into(),
        channels: 1,
        side: 28,
        layers: vec![
            Layer::Conv(Conv2d::new(1, 4, 5, 2, 2, vec![0.1; 100], vec![0.0; 4]).unwrap()),
            Layer::Relu,
            Layer::Flatten,
            Layer::Linear(Linear::new(784, 10, vec![0.1; 7840], vec![0.0; 10]).unwrap()),
        ],
    };
    let p = crate::params::ckks_128_logn14_cnn().validate().unwrap();
    let slots = p.n() / 2;
    let h = HybridPlan::new(&p, &net, slots, 28).unwrap();
    assert_eq!(h.c2m.level(), 2);
    let lv: Vec<_> = h.segments.iter().map(|s| s.m2c.level()).collect();
    assert_eq!(lv, [3, 3]);
    assert_eq!(h.net.depth, 1);
    // 784 input pixels in, 4·14·14 = 784 ReLU ciphertexts, 10 logits.
    assert_eq!(h.conversions(), (784 + 784, 392 + 5));
    assert_eq!(h.relus(slots).unwrap(), 784 * slots);
    assert_eq!(
        h.relus(3).unwrap(),
        784 * 3,
        "only live slots in the pixel-wise layout"
    );
    assert!(h.live_slots(0).is_err() && h.live_slots(slots + 1).is_err());
    assert!(h.relus(0).is_err() && h.opened_slots(slots + 1).is_err());
    // Only the live images' logits are opened: slot j of each of the 10 logit ciphertexts.
    let open = h.opened_slots(3).unwrap();
    assert_eq!(open.len(), 3 * 10);
    for b in 0..3 {
        for c in 0..10 {
            assert_eq!(open[b * 10 + c] % slots, b, "image {b}, class {c}");
        }
    }
    // The fingerprint is the plan's: another block or batch changes it.
    let same = HybridPlan::new(&p, &net, slots, 28).unwrap();
    assert_eq!(h.fingerprint(), same.fingerprint());
    let mut other = same.clone();
    other.m2c_chunk += 1;
    assert_ne!(h.fingerprint(), other.fingerprint());
    // The FHE-only plan refuses the same network.
    assert!(net.plan(slots, 28, slots).is_err());
}

/// Arch-aware Ct Compression written by the convolution (a folded output layout) and read by the
/// next one (a folded input), also through a depthwise pooling and a stride: every case matches
/// the reference, costs one level, and the dry run issues exactly the compiled rotations.
#[test]
fn aac_folded_convolutions_match_the_reference() {
    let mut r = rng(21);
    // (batch, c_in, c_out, side, kernel, stride, padding, block, slots, fold in, fold out)
    let cases = [
        (1, 8, 2, 8, 1, 1, 0, 2, 128, 1, 4),
        (1, 2, 8, 8, 3, 1, 1, 2, 128, 4, 1),
        (1, 2, 2, 8, 3, 1, 1, 2, 128, 4, 4),
        (1, 3, 2, 8, 3, 1, 1, 2, 128, 2, 4),
        (2, 2, 3, 8, 3, 1, 1, 4, 1024, 8, 2),
        (1, 4, 2, 8, 3, 2, 1, 4, 256, 2, 4),
        (1, 5, 2, 8, 5, 1, 2, 2, 256, 1, 4),
    ];
    for &(bs, ci, co, h, k, s, p, blk, n, fi, fo) in &cases {
        let conv = random_conv(&mut r, ci, co, k, s, p);
        let l = FragmentLayout::new(bs, ci, h, h, None, blk, n)
            .unwrap()
            .with_fold(fi)
            .unwrap();
        let out = conv.out_layout(&l).unwrap().with_fold(fo).unwrap();
        let plan = conv.plan_to(&l, out).unwrap();
        let x = rand_vec(&mut r, l.len(), 1.0);
        let ex = SlotExec { n };
        let y = conv
            .run(&ex, &plan, &encrypt_plain(&l, &x, 3), None)
            .unwrap();
        assert_eq!(y.len(), out.ciphertexts());
        assert!(y.iter().all(|c| c.level == 2), "one level, fold or not");
        let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
        let (want, _, _) = reference::conv2d(&conv, &x, bs, h, h, None);
        let e = max_err(&got, &want);
        let case = (bs, ci, co, h, k, s, p, blk, fi, fo);
        assert!(e < 1e-9, "case {case:?}: error {e}");
        // Nothing lands outside the valid elements (the diagonals are the masks).
        let valid: usize = decrypt_plain(&y)
            .iter()
            .flatten()
            .filter(|v| v.abs() > 1e-12)
            .count();
        assert!(valid <= out.len(), "case {case:?}: {valid} nonzero slots");
        let sym = SymExec::new(n);
        let sx: Vec<_> = (0..l.ciphertexts()).map(|_| sym.fresh(3)).collect();
        conv.run(&sym, &plan, &sx, None).unwrap();
        let c = sym.counts();
        assert_eq!(c.rotations, plan.counts().total(), "case {case:?}");
        assert_eq!(c.pt_mults, plan.counts().pt_mults, "case {case:?}");
    }
    // Average pooling on a folded tensor keeps the fold (depthwise: channel to itself).
    let pool = Conv2d::avg_pool(2, 2).unwrap();
    let l = FragmentLayout::new(1, 2, 8, 8, None, 2, 128)
        .unwrap()
        .with_fold(4)
        .unwrap();
    let out = pool.out_layout(&l).unwrap();
    assert!(out.with_fold(4).is_err(), "S = 1 after the pooling");
    let plan = pool.plan_to(&l, out).unwrap();
    let x = rand_vec(&mut r, l.len(), 1.0);
    let y = pool
        .run(&SlotExec { n: 128 }, &plan, &encrypt_plain(&l, &x, 2), None)
        .unwrap();
    let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
    let (want, _, _) = reference::conv2d(&pool, &x, 1, 8, 8, None);
    assert!(max_err(&got, &want) < 1e-9);
    // An output layout that is not the layer's is refused.
    let conv = random_conv(&mut r, 2, 3, 3, 1, 1);
    let wrong = FragmentLayout::new(1, 4, 8, 8, None, 2, 128).unwrap();
    assert!(conv.plan_to(&l, wrong).is_err());
}

/// Fig. 5's bottleneck (8 → 2 → 8 channels): with AAC the reduced tensor is compacted into one
/// ciphertext instead of four quarter-full ones, at no extra level (the level count is the
/// same with and without AAC), with fewer ciphertexts and operations after it, and the same
/// outputs.
#[test]
fn aac_compacts_a_bottleneck_at_no_level() {
    let mut r = rng(22);
    let net = Network {
        name: "bottleneck".into(),
        channels: 8,
        side: 8,
        layers: vec![
            Layer::Conv(random_conv(&mut r, 8, 2, 1, 1, 0)),
            Layer::Quad(Quadratic::new(0.1, 0.5, 0.2).unwrap()),
            Layer::Conv(random_conv(&mut r, 2, 2, 3, 1, 1)),
            Layer::Quad(Quadratic::new(0.1, 0.4, -0.1).unwrap()),
            Layer::Conv(random_conv(&mut r, 2, 8, 1, 1, 0)),
            Layer::Flatten,
            Layer::Linear(
                Linear::new(
                    512,
                    4,
                    rand_vec(&mut r, 2048, 0.1),
                    rand_vec(&mut r, 4, 0.1),
                )
                .unwrap(),
            ),
        ],
    };
    let (bs, blk, n) = (1, 2, 128);
    let plain = net.plan(bs, blk, n).unwrap();
    let aac = net
        .plan_with(
            bs,
            blk,
            n,
            PlanOptions {
                aac: true,
                ..PlanOptions::default()
            },
        )
        .unwrap();
    assert_eq!(plain.depth, aac.depth, "AAC costs no level");
    let cts = |p: &NetPlan| -> Vec<usize> {
        p.layers
            .iter()
            .filter_map(|l| match l {
                LayerPlan::Conv(c) => Some(c.output.ciphertexts()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(cts(&plain), [4, 4, 4]);
    assert_eq!(
        cts(&aac),
        [1, 1, 4],
        "the two-channel tensors fill one ciphertext"
    );
    let x = rand_vec(&mut r, bs * 8 * 64, 1.0);
    let want = net.reference(&x, bs).unwrap();
    let mut ops = Vec::new();
    for plan in [&plain, &aac] {
        let ex = SlotExec { n };
        let y = net
            .run(
                &ex,
                plan,
                encrypt_plain(&plan.input, &x, plan.depth),
                |_| {},
            )
            .unwrap();
        assert_eq!(y[0].level, 0, "the same levels with and without AAC");
        let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
        let e = max_err(&got, &want);
        assert!(e < 1e-9, "error {e}");
        let sym = SymExec::new(n);
        let sx: Vec<_> = (0..plan.input.ciphertexts())
            .map(|_| sym.fresh(plan.depth))
            .collect();
        net.run(&sym, plan, sx, |_| {}).unwrap();
        ops.push(sym.counts());
    }
    let (p, a) = (ops[0], ops[1]);
    assert!(a.relins < p.relins, "fewer squarings: {a:?} vs {p:?}");
    assert!(a.pt_mults < p.pt_mults, "fewer products: {a:?} vs {p:?}");
}

/// A fire module's expansions in one layer (`Conv2d::with_point_outputs`): the 1×1 branch's
/// outputs take the centre tap only, so the plan has fewer products and rotations than the
/// full `K × K` layer, and the result still equals the reference, on plain, folded (AAC) and
/// one-channel-per-ciphertext layouts.
#[test]
fn point_outputs_skip_the_off_centre_taps() {
    let mut r = rng(31);
    // (batch, c_in, point, c_out, side, block, slots, fold in, fold out)
    let cases = [
        (1, 4, 3, 6, 8, 2, 256, 1, 1),
        (1, 4, 4, 8, 8, 4, 512, 1, 1),
        (2, 2, 2, 4, 8, 2, 256, 2, 2),
        (1, 3, 5, 6, 8, 2, 64, 1, 1),
        (8, 2, 1, 3, 8, 8, 512, 1, 1),
        // α = 1: the large-batch mode's scalar products.
        (8, 2, 1, 3, 8, 2, 128, 1, 1),
    ];
    for &(bs, ci, pt, co, h, blk, n, fi, fo) in &cases {
        let mut conv = random_conv(&mut r, ci, co, 3, 1, 1);
        // A conv with nonzero off-centre weights on a point channel is refused.
        assert!(conv.clone().with_point_outputs(pt).is_err());
        for o in 0..pt {
            for c in 0..ci {
                for t in 0..9 {
                    if t != 4 {
                        conv.weight[(o * ci + c) * 9 + t] = 0.0;
                    }
                }
            }
        }
        let full = conv.clone();
        let conv = conv.with_point_outputs(pt).unwrap();
        let l = FragmentLayout::new(bs, ci, h, h, None, blk, n)
            .unwrap()
            .with_fold(fi)
            .unwrap();
        let out = conv.out_layout(&l).unwrap().with_fold(fo).unwrap();
        let plan = conv.plan_to(&l, out).unwrap();
        let plan_full = full.plan_to(&l, out).unwrap();
        let case = (bs, ci, pt, co, blk, n, fi, fo);
        assert!(
            plan.counts().pt_mults < plan_full.counts().pt_mults,
            "case {case:?}: no product saved"
        );
        assert!(plan.counts().total() <= plan_full.counts().total());
        let x = rand_vec(&mut r, l.len(), 1.0);
        let y = conv
            .run(&SlotExec { n }, &plan, &encrypt_plain(&l, &x, 3), None)
            .unwrap();
        let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
        let (want, _, _) = reference::conv2d(&conv, &x, bs, h, h, None);
        let e = max_err(&got, &want);
        assert!(e < 1e-9, "case {case:?}: error {e}");
    }
    // Geometry that cannot hold a 1×1 branch is refused.
    let c = random_conv(&mut r, 2, 4, 3, 2, 1);
    assert!(c.with_point_outputs(1).is_err(), "stride 2");
    let c = random_conv(&mut r, 2, 4, 3, 1, 1);
    assert!(c.clone().with_point_outputs(5).is_err(), "more than N_out");
    // The same checks hold for a layer changed field by field: planning it, or validating a
    // network that holds it, refuses it (a plan would otherwise skip real products).
    let l = FragmentLayout::new(1, 2, 8, 8, None, 2, 256).unwrap();
    for pt in [1, 5] {
        let mut bad = c.clone();
        bad.point_outputs = pt;
        assert!(bad.validate().is_err(), "{pt}");
        assert!(bad.plan(&l).is_err(), "{pt}");
        let net = Network {
            name: "bad".into(),
            channels: 2,
            side: 8,
            layers: vec![
                Layer::Conv(bad),
                Layer::Flatten,
                Layer::Linear(Linear::new(4 * 64, 2, vec![0.5; 4 * 64 * 2], vec![0.0; 2]).unwrap()),
            ],
        };
        assert!(net.validate().is_err(), "{pt}");
        let mut ok = net.clone();
        if let Layer::Conv(c0) = &mut ok.layers[0] {
            c0.point_outputs = 0;
        }
        assert!(ok.validate().is_ok());
        let mut nan = ok.clone();
        if let Layer::Linear(f) = &mut nan.layers[2] {
            f.bias[1] = f64::NAN;
        }
        assert!(nan.validate().is_err(), "a NaN bias");
    }
}

/// A layer's products as a sorted list of `(output, giant shift, input, baby shift, tag,
/// lo)`: equal for two forms that issue the same rotations and products.
fn products(t: &linear::TwoStage) -> Vec<(usize, i64, usize, i64, u64, i64)> {
    let mut v: Vec<_> = t
        .outputs
        .iter()
        .enumerate()
        .flat_map(|(o, giants)| {
            giants.iter().flat_map(move |g| {
                g.terms
                    .iter()
                    .map(move |x| (o, g.shift, x.input, t.babies[x.input][x.baby], x.tag, x.lo))
            })
        })
        .collect();
    v.sort_unstable();
    v
}

/// Baby-step giant-step over the outer rotations (`ConvPlan::rebalanced`,
/// `FcPlan::rebalanced`): the same products and the same result as the compiled layer, never
/// more rotations, and far fewer where a ciphertext holds many channels; the dry run issues
/// exactly the rebalanced counts.
#[test]
fn rebalanced_plans_match_the_reference_with_fewer_rotations() {
    let mut r = rng(41);
    // (batch, c_in, c_out, side, kernel, stride, padding, block, slots, fold in, fold out, depthwise)
    let cases = [
        (1, 16, 16, 8, 3, 1, 1, 2, 1024, 1, 1, false),
        (1, 12, 20, 8, 3, 1, 1, 1, 2048, 1, 1, false),
        (2, 8, 8, 8, 3, 2, 1, 4, 2048, 1, 1, false),
        (1, 8, 4, 8, 1, 1, 0, 2, 512, 1, 2, false),
        (1, 4, 8, 8, 3, 1, 1, 2, 512, 4, 2, false),
        (1, 16, 16, 8, 3, 1, 1, 2, 1024, 1, 1, true),
        // One channel per ciphertext: kept as compiled (its products are masks and constants,
        // with no outer rotation to split), and still run by the scalar path.
        (16, 2, 3, 8, 3, 1, 1, 2, 256, 1, 1, false),
    ];
    let mut saved = 0;
    for &(bs, ci, co, h, k, s, p, blk, n, fi, fo, dw) in &cases {
        let conv = random_layer(&mut r, ci, co, k, s, p, dw);
        let l = FragmentLayout::new(bs, ci, h, h, None, blk, n)
            .unwrap()
            .with_fold(fi)
            .unwrap();
        let out = conv.out_layout(&l).unwrap().with_fold(fo).unwrap();
        let plain = conv.plan_to(&l, out).unwrap();
        let plan = plain.clone().rebalanced();
        let case = (bs, ci, co, k, s, blk, n, fi, fo, dw);
        // Rebalancing again changes nothing: it starts from the compiled form.
        let twice = plan.clone().rebalanced();
        assert_eq!(
            products(&twice.stages),
            products(&plan.stages),
            "case {case:?}: rebalanced twice"
        );
        assert_eq!(twice.counts(), plan.counts(), "case {case:?}");
        let (a, b) = (plain.counts(), plan.counts());
        assert_eq!(a.pt_mults, b.pt_mults, "case {case:?}: products changed");
        assert!(b.total() <= a.total(), "case {case:?}: {b:?} against {a:?}");
        if b.total() < a.total() {
            saved += 1;
        }
        let x = rand_vec(&mut r, l.len(), 1.0);
        let y = conv
            .run(&SlotExec { n }, &plan, &encrypt_plain(&l, &x, 3), None)
            .unwrap();
        let got = plan.output.unpack(&decrypt_plain(&y)).unwrap();
        let (want, _, _) = reference::conv2d(&conv, &x, bs, h, h, None);
        let e = max_err(&got, &want);
        assert!(e < 1e-9, "case {case:?}: error {e}");
        let sym = SymExec::new(n);
        let sx: Vec<_> = (0..l.ciphertexts()).map(|_| sym.fresh(3)).collect();
        conv.run(&sym, &plan, &sx, None).unwrap();
        assert_eq!(sym.counts().rotations, b.total(), "case {case:?}");
    }
    assert!(saved >= 3, "BSGS saved rotations in only {saved} cases");
    // A fully connected layer.
    let l = FragmentLayout::new(2, 4, 4, 4, None, 2, 512).unwrap();
    let fm = FeatureMap::flatten(&l);
    let f = Linear::new(
        fm.len(),
        40,
        rand_vec(&mut r, fm.len() * 40, 0.5),
        rand_vec(&mut r, 40, 0.5),
    )
    .unwrap();
    let p0 = f.plan(&fm).unwrap();
    let p = p0.clone().rebalanced();
    assert!(p.counts().total() <= p0.counts().total());
    assert_eq!(
        products(&p.clone().rebalanced().stages),
        products(&p.stages)
    );
    let x = rand_vec(&mut r, l.len(), 1.0);
    let y = f
        .run(&SlotExec { n: 512 }, &p, &encrypt_plain(&l, &x, 1), None)
        .unwrap();
    let got = p.output.unpack(&decrypt_plain(&y)).unwrap();
    assert!(max_err(&got, &reference::linear(&f, &x, 2, None)) < 1e-9);
}

/// [`plan::Floor`]: no compiled plan, at any block size, fold or baby/giant split, issues fewer
/// rotations or products than the two-stage form's floor; and the floor is reached by a dense
/// `3 × 3` layer whose channels fill one row-major ciphertext (so it is not a loose bound).
#[test]
fn no_plan_beats_the_rotation_floor() {
    let mut r = rng(43);
    // (batch, c_in, c_out, side, kernel, stride, padding, slots, depthwise)
    let cases = [
        (1, 16, 16, 8, 3, 1, 1, 1024, false),
        (1, 12, 20, 8, 3, 1, 1, 2048, false),
        (2, 8, 8, 8, 3, 2, 1, 2048, false),
        (1, 8, 4, 8, 1, 1, 0, 512, false),
        (1, 3, 8, 8, 5, 1, 2, 256, false),
        (4, 4, 6, 8, 3, 1, 1, 1024, false),
        (16, 2, 3, 8, 3, 1, 1, 256, false),
        (1, 16, 16, 8, 3, 1, 1, 1024, true),
    ];
    let mut checked = 0;
    for &(bs, ci, co, h, k, s, p, n, dw) in &cases {
        let conv = random_layer(&mut r, ci, co, k, s, p, dw);
        let mut blk = 1;
        while blk <= h {
            let Ok(l) = FragmentLayout::new(bs, ci, h, h, None, blk, n) else {
                blk *= 2;
                continue;
            };
            for fold in [1, l.compact_fold()] {
                let Ok(li) = l.with_fold(fold) else { continue };
                let Ok(plain) = conv.plan(&li) else { continue };
                let floor = plan::conv_floor(&conv, bs, h, h, li.ciphertexts(), n).unwrap();
                for p in [plain.clone(), plain.rebalanced()] {
                    let c = p.counts();
                    let case = (bs, ci, co, k, s, blk, fold, dw);
                    assert!(
                        c.total() >= floor.rotations,
                        "case {case:?}: {} rotations under the floor {}",
                        c.total(),
                        floor.rotations
                    );
                    assert!(c.pt_mults >= floor.products, "case {case:?}: products");
                    checked += 1;
                }
            }
            blk *= 2;
        }
    }
    assert!(checked >= 30, "only {checked} plans checked");
    // Reached: 8 channels of an 8 × 8 map fill 512 slots row-major (chunk 64, α = 8).
    let conv = random_conv(&mut r, 8, 8, 3, 1, 1);
    let l = FragmentLayout::new(1, 8, 8, 8, None, 1, 512).unwrap();
    let c = conv.plan(&l).unwrap().counts();
    let floor = plan::conv_floor(&conv, 1, 8, 8, 1, 512).unwrap();
    assert_eq!((c.inner, c.outer), (8, 7));
    assert_eq!(c.total(), floor.rotations);
    // The closed form against a search over every split of the shifts: babies `b_i ∈ [1, F]`
    // per input and giants `g_j ∈ [1, F]` per output (more is never needed) with
    // `Σ_i b_i · g_j ≥ F` for every output.
    for f in 1..=12usize {
        for ci in 1..=3u32 {
            for co in 1..=3u32 {
                let digits = move |v: usize, n: u32| (0..n).map(move |i| (v / f.pow(i)) % f + 1);
                let mut best = usize::MAX;
                for bv in 0..f.pow(ci) {
                    let beta: usize = digits(bv, ci).sum();
                    for gv in 0..f.pow(co) {
                        if digits(gv, co).all(|g| beta * g >= f) {
                            let giants: usize = digits(gv, co).map(|g| g - 1).sum();
                            best = best.min(beta - ci as usize + giants);
                        }
                    }
                }
                let got = plan::Floor::new(f, ci as usize, co as usize).rotations;
                assert_eq!(got, best as u64, "F {f}, {ci} → {co}");
            }
        }
    }
    // The floor itself: F = 4 from one ciphertext into one takes 2 rotations (2 × 2 shifts).
    assert_eq!(plan::Floor::new(4, 1, 1).rotations, 2);
    assert_eq!(plan::Floor::new(4, 4, 1).rotations, 0);
    // A fully connected layer.
    let fm = FeatureMap::dense(64, 1, 256).unwrap();
    let f = Linear::new(
        64,
        10,
        rand_vec(&mut r, 640, 0.5),
        rand_vec(&mut r, 10, 0.5),
    )
    .unwrap();
    let p = f.plan(&fm).unwrap();
    let floor = plan::fc_floor(&f, 1, fm.cts, 256);
    assert!(p.counts().total() >= floor.rotations && floor.rotations > 0);
}

/// Re-blocking ([`Relayout`]): a tensor moved between block sizes and folds arrives exactly
/// (every element, zeros elsewhere), in one level, with the dry run counting the plan; the
/// rebalanced plan never rotates more; a round trip returns the tensor; layouts of different
/// tensors are refused.
#[test]
fn relayouts_move_tensors_exactly_between_block_sizes() {
    let mut r = rng(47);
    // (batch, channels, side, slots, (block, fold) from, (block, fold) to)
    let cases = [
        (1, 4, 8, 256, (1, 1), (2, 1)),
        (1, 4, 8, 256, (2, 1), (1, 1)),
        (2, 3, 8, 512, (4, 1), (1, 1)),
        (1, 2, 7, 256, (1, 1), (4, 4)),
        (2, 5, 8, 1024, (2, 2), (8, 1)),
        (1, 8, 8, 512, (2, 1), (2, 2)),
    ];
    for &(bs, c, h, n, (s0, f0), (s1, f1)) in &cases {
        let from = FragmentLayout::new(bs, c, h, h, None, s0, n)
            .unwrap()
            .with_fold(f0)
            .unwrap();
        let to = FragmentLayout::new(bs, c, h, h, None, s1, n)
            .unwrap()
            .with_fold(f1)
            .unwrap();
        let plain = Relayout::plan(&from, &to).unwrap();
        let plan = plain.clone().rebalanced();
        let case = (bs, c, h, n, s0, f0, s1, f1);
        assert!(plan.counts().total() <= plain.counts().total(), "{case:?}");
        assert_eq!(plan.counts().pt_mults, plain.counts().pt_mults);
        let x = rand_vec(&mut r, from.len(), 1.0);
        let ex = SlotExec { n };
        for p in [&plain, &plan] {
            let y = p.run(&ex, &encrypt_plain(&from, &x, 2)).unwrap();
            assert!(y.iter().all(|c| c.level == 1), "{case:?}: one level");
            let got = decrypt_plain(&y);
            assert_eq!(got, to.pack(&x).unwrap(), "{case:?}: slot for slot");
            let sym = SymExec::new(n);
            let sx: Vec<_> = (0..from.ciphertexts()).map(|_| sym.fresh(2)).collect();
            p.run(&sym, &sx).unwrap();
            assert_eq!(sym.counts().rotations, p.counts().total(), "{case:?}");
        }
        let back = Relayout::plan(&to, &from).unwrap().rebalanced();
        let y = back
            .run(&ex, &plan.run(&ex, &encrypt_plain(&from, &x, 2)).unwrap())
            .unwrap();
        assert_eq!(from.unpack(&decrypt_plain(&y)).unwrap(), x, "{case:?}");
    }
    // The same layout moves nothing: no rotation, one mask per ciphertext.
    let l = FragmentLayout::new(1, 4, 8, 8, None, 2, 256).unwrap();
    let same = Relayout::plan(&l, &l).unwrap();
    assert_eq!(same.counts().total(), 0);
    assert_eq!(same.counts().pt_mults as usize, l.ciphertexts());
    // Another tensor is refused.
    let other = FragmentLayout::new(1, 5, 8, 8, None, 2, 256).unwrap();
    assert!(Relayout::plan(&l, &other).is_err());
}
