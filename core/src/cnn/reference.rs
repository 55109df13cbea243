//! `f64` references of the CNN layers on plain tensors (`[b][c][y][x]` row-major), the oracle the
//! encrypted layers are tested against.

use super::conv::{Conv2d, InputAffine};
use super::fc::Linear;
use alloc::vec;
use alloc::vec::Vec;

/// `conv(α ⊙ x + β)` on a `batch × C × h × w` tensor; returns the output and its side lengths.
pub fn conv2d(
    c: &Conv2d,
    x: &[f64],
    batch: usize,
    h: usize,
    w: usize,
    affine: Option<&InputAffine>,
) -> (Vec<f64>, usize, usize) {
    let ho = (h + 2 * c.padding - c.kernel) / c.stride + 1;
    let wo = (w + 2 * c.padding - c.kernel) / c.stride + 1;
    let (ci, co, k) = (c.in_channels, c.out_channels, c.kernel);
    let mut y = vec![0.0; batch * co * ho * wo];
    for b in 0..batch {
        for o in 0..co {
            for yo in 0..ho {
                for xo in 0..wo {
                    let mut acc = c.bias[o];
                    for ch in 0..ci {
                        for di in 0..k {
                            let yi = (yo * c.stride + di) as i64 - c.padding as i64;
                            if yi < 0 || yi >= h as i64 {
                                continue;
                            }
                            for dj in 0..k {
                                let xi = (xo * c.stride + dj) as i64 - c.padding as i64;
                                if xi < 0 || xi >= w as i64 {
                                    continue;
                                }
                                let mut v = x[((b * ci + ch) * h + yi as usize) * w + xi as usize];
                                if let Some(a) = affine {
                                    v = a.scale[ch] * v + a.shift[ch];
                                }
                                acc += c.w(o, ch, di, dj) * v;
                            }
                        }
                    }
                    y[((b * co + o) * ho + yo) * wo + xo] = acc;
                }
            }
        }
    }
    (y, ho, wo)
}

/// `W·(α ⊙ x + β) + b` on `batch` feature vectors (`[b][f]`).
pub fn linear(l: &Linear, x: &[f64], batch: usize, affine: Option<&InputAffine>) -> Vec<f64> {
    let mut y = vec![0.0; batch * l.outputs];
    for b in 0..batch {
        for o in 0..l.outputs {
            let mut acc = l.bias[o];
            for f in 0..l.inputs {
                let mut v = x[b * l.inputs + f];
                if let Some(a) = affine {
                    v = a.scale[f] * v + a.shift[f];
                }
                acc += l.weight[o * l.inputs + f] * v;
            }
            y[b * l.outputs + o] = acc;
        }
    }
    y
}
