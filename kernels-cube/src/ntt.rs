//! The canonical negacyclic NTT of `veil_core::math::ntt`, batched over rows.
//!
//! One launch per radix-2 stage, one unit per butterfly (`rows × N/2` units). The forward
//! transform runs Cooley–Tukey butterflies with `twiddle[rev(k)] = ψ^k`, the inverse
//! Gentleman–Sande butterflies with `ψ^{-k}` and a final multiplication by `N^{-1}`: the same
//! transform as `NttTable::forward`/`inverse`, with every intermediate value fully reduced (the
//! host uses lazy reduction; both produce the canonical words).
//!
//! Tables (uploaded once per parameter set): `tw`, `tw_shoup`, `itw`, `itw_shoup` hold
//! `N` words per prime (global prime `g` at `g·N`), `n_inv` two words per prime
//! (`N^{-1} mod q` and its Shoup companion).

// `#[cube]` expands each kernel into undocumented helper modules and functions; every item
// written here is documented.
#![allow(missing_docs)]

use crate::arith::{add_mod, mul_shoup, prime_of_row, sub_mod};
use crate::launch::{grid, RowMap};
use cubecl::prelude::*;
use cubecl::server::Handle;

/// One butterfly stage with half-distance `t = 2^log_t`: butterfly `b` of row `r` pairs
/// `j1 = 2·i·t + (b mod t)` with `j1 + t`, `i = b / t`, and uses twiddle `N/(2t) + i`.
#[cube(launch_unchecked)]
pub fn ntt_stage_kernel(
    a: &mut Array<u64>,
    tw: &Array<u64>,
    tw_shoup: &Array<u64>,
    mods: &Array<u64>,
    units: u32,
    log_n: u32,
    log_t: u32,
    first: u32,
    bq: u32,
    q_total: u32,
    #[comptime] inverse: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < units as usize {
        let log_half = log_n - 1;
        let r = (pos >> log_half as usize) as u32;
        let b = pos - ((r as usize) << log_half as usize);
        let g = prime_of_row(r, first, bq, q_total) as usize;
        let q = mods[3 * g];
        let t = 1usize << log_t as usize;
        let i = b >> log_t as usize;
        let j1 = (r as usize) * (2 * (1usize << log_half as usize)) + 2 * i * t + (b - i * t);
        let j2 = j1 + t;
        let widx = (g << log_n as usize) + ((1usize << log_half as usize) >> log_t as usize) + i;
        let w = tw[widx];
        let ws = tw_shoup[widx];
        let x = a[j1];
        let y = a[j2];
        if comptime!(inverse) {
            a[j1] = add_mod(x, y, q);
            a[j2] = mul_shoup(sub_mod(x, y, q), w, ws, q);
        } else {
            let v = mul_shoup(y, w, ws, q);
            a[j1] = add_mod(x, v, q);
            a[j2] = sub_mod(x, v, q);
        }
    }
}

/// `a = a · N^{-1}` row by row (the end of the inverse transform).
#[cube(launch_unchecked)]
pub fn ntt_scale_kernel(
    a: &mut Array<u64>,
    n_inv: &Array<u64>,
    mods: &Array<u64>,
    units: u32,
    log_n: u32,
    first: u32,
    bq: u32,
    q_total: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < units as usize {
        let r = (pos >> log_n as usize) as u32;
        let g = prime_of_row(r, first, bq, q_total) as usize;
        a[pos] = mul_shoup(a[pos], n_inv[2 * g], n_inv[2 * g + 1], mods[3 * g]);
    }
}

/// The device-side NTT tables of a parameter set.
#[derive(Clone, Debug)]
pub struct NttTables {
    /// `ψ^k` at `rev(k)`, `N` words per prime.
    pub tw: Handle,
    /// Shoup companions of `tw`.
    pub tw_shoup: Handle,
    /// `ψ^{-k}` at `rev(k)`, `N` words per prime.
    pub itw: Handle,
    /// Shoup companions of `itw`.
    pub itw_shoup: Handle,
    /// `N^{-1}` and its Shoup companion per prime.
    pub n_inv: Handle,
}

fn launch_stages<R: Runtime>(
    client: &ComputeClient<R>,
    a: &Handle,
    tw: &Handle,
    tw_shoup: &Handle,
    mods: &Handle,
    map: RowMap,
    inverse: bool,
) {
    let units = map.words() / 2;
    if units == 0 {
        return;
    }
    let table_len = map.primes << map.log_n;
    let stages: Vec<u32> = if inverse {
        (0..map.log_n).collect()
    } else {
        (0..map.log_n).rev().collect()
    };
    for log_t in stages {
        let (count, dim) = grid(units);
        // SAFETY: every index is below `rows · N` in `a` and below `primes · N` in the tables
        // (twiddle index `g·N + N/(2t) + i` with `i < N/(2t)`).
        #[allow(unsafe_code)]
        unsafe {
            ntt_stage_kernel::launch_unchecked::<R>(
                client,
                count,
                dim,
                map.arg(a),
                ArrayArg::from_raw_parts(tw.clone(), table_len),
                ArrayArg::from_raw_parts(tw_shoup.clone(), table_len),
                map.table(mods),
                units as u32,
                map.log_n,
                log_t,
                map.first,
                map.bq,
                map.q_total,
                inverse,
            )
        }
    }
}

/// Forward NTT of every row of `map`.
pub fn launch_ntt<R: Runtime>(
    client: &ComputeClient<R>,
    a: &Handle,
    tables: &NttTables,
    mods: &Handle,
    map: RowMap,
) {
    launch_stages(client, a, &tables.tw, &tables.tw_shoup, mods, map, false);
}

/// Inverse NTT (with the factor `N^{-1}`) of every row of `map`.
pub fn launch_intt<R: Runtime>(
    client: &ComputeClient<R>,
    a: &Handle,
    tables: &NttTables,
    mods: &Handle,
    map: RowMap,
) {
    if map.rows == 0 {
        return;
    }
    launch_stages(client, a, &tables.itw, &tables.itw_shoup, mods, map, true);
    let (count, dim) = grid(map.words());
    // SAFETY: one unit per word of `rows` rows; `n_inv` holds two words per prime.
    #[allow(unsafe_code)]
    unsafe {
        ntt_scale_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(a),
            ArrayArg::from_raw_parts(tables.n_inv.clone(), 2 * map.primes),
            map.table(mods),
            map.words() as u32,
            map.log_n,
            map.first,
            map.bq,
            map.q_total,
        )
    }
}
