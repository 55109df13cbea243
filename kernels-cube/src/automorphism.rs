//! The Galois automorphism `X → X^g` in both domains.
//!
//! NTT domain: `out[j] = a[map[j]]` with `veil_core::backend::automorphism_ntt_map`, computed on
//! the device per unit (slot `j` holds `a(ψ^{e_j})`, `e_j = 2·rev(j) + 1`; the source is the slot of
//! exponent `g·e_j mod 2N`). Coefficient domain: `a_i X^i → ± a_i X^{i·g mod N}` with the sign
//! flipped when `i·g mod 2N ≥ N`.

// `#[cube]` expands each kernel into undocumented helper modules and functions; every item
// written here is documented.
#![allow(missing_docs)]

use crate::arith::{neg_mod, prime_of_row};
use crate::launch::{grid, RowMap};
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Reverses the low `bits` bits of `x`.
#[cube]
pub fn bit_rev(x: u32, bits: u32) -> u32 {
    let mut v = x;
    let mut r = 0u32;
    for _i in 0..bits {
        r = (r << 1u32) | (v & 1u32);
        v >>= 1u32;
    }
    r
}

/// Automorphism of every row, `g < 2N` odd. `ntt` selects the domain.
#[cube(launch_unchecked)]
pub fn automorphism_kernel(
    a: &Array<u64>,
    out: &mut Array<u64>,
    mods: &Array<u64>,
    units: u32,
    log_n: u32,
    g: u32,
    first: u32,
    bq: u32,
    q_total: u32,
    #[comptime] ntt: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < units as usize {
        let r = (pos >> log_n as usize) as u32;
        let base = (r as usize) << log_n as usize;
        let j = (pos - base) as u32;
        let n = 1u32 << log_n;
        let two_n_mask = (2u64 * n as u64) - 1u64;
        if comptime!(ntt) {
            let e = 2u64 * bit_rev(j, log_n) as u64 + 1u64;
            let t = (e * g as u64) & two_n_mask;
            let src = bit_rev(((t - 1u64) >> 1u64) as u32, log_n);
            out[pos] = a[base + src as usize];
        } else {
            let t = ((j as u64) * (g as u64)) & two_n_mask;
            let x = a[pos];
            if t < n as u64 {
                out[base + t as usize] = x;
            } else {
                let gi = prime_of_row(r, first, bq, q_total) as usize;
                out[base + (t - n as u64) as usize] = neg_mod(x, mods[3 * gi]);
            }
        }
    }
}

/// Launches `out = σ_g(a)` over the rows of `map` (`g` is reduced modulo `2N` here).
pub(crate) fn launch_automorphism<R: Runtime>(
    client: &ComputeClient<R>,
    a: &Handle,
    g: u64,
    out: &Handle,
    mods: &Handle,
    map: RowMap,
    ntt: bool,
) {
    let units = map.words();
    if units == 0 {
        return;
    }
    let g = (g % (2u64 << map.log_n)) as u32;
    let (count, dim) = grid(units);
    // SAFETY: every index stays inside its row (`t mod 2N` and its reduction below `N`).
    #[allow(unsafe_code)]
    unsafe {
        automorphism_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(a),
            map.arg(out),
            map.table(mods),
            units as u32,
            map.log_n,
            g,
            map.first,
            map.bq,
            map.q_total,
            ntt,
        )
    }
}
