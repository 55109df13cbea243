//! The canonical negacyclic NTT of `veil_core::math::ntt`, batched over rows.
//!
//! The first radix-2 stages (forward; the last ones for the inverse) run one launch per stage, one
//! unit per butterfly (`rows × N/2` units); the 9 stages whose butterflies stay inside aligned
//! blocks of 512 words run fused in one launch, a block per cube in shared memory. The forward
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

/// The stages with half-distance `t < block` fused in one launch: one cube per aligned block of
/// `block = 2^log_b` words of a row (the butterflies of those stages never leave it), held in
/// shared memory, `block / 2` units each doing one butterfly per stage. Forward runs
/// `t = block/2 … 1` (the last stages), inverse `t = 1 … block/2` (the first ones). Launched with
/// exactly `rows · N / block` cubes (the barriers need every unit of a cube).
#[cube(launch_unchecked)]
pub fn ntt_block_kernel(
    a: &mut Array<u64>,
    tw: &Array<u64>,
    tw_shoup: &Array<u64>,
    mods: &Array<u64>,
    log_n: u32,
    first: u32,
    bq: u32,
    q_total: u32,
    #[comptime] block: usize,
    #[comptime] log_b: u32,
    #[comptime] inverse: bool,
) {
    let cube = CUBE_POS;
    let per_row_log = (log_n - log_b) as usize;
    let r = cube >> per_row_log;
    let k = cube - (r << per_row_log);
    let g = prime_of_row(r as u32, first, bq, q_total) as usize;
    let q = mods[3 * g];
    let half = comptime!(block / 2);
    let row_start = k << log_b as usize;
    let base = (r << log_n as usize) + row_start;
    let tw_row = g << log_n as usize;
    let n_half = 1usize << (log_n - 1) as usize;
    let u = UNIT_POS as usize;
    let mut sh = SharedMemory::<u64>::new(block);
    sh[u] = a[base + u];
    sh[u + half] = a[base + u + half];
    sync_cube();
    for s in 0..log_b {
        let mut log_t = log_b - 1 - s;
        if comptime!(inverse) {
            log_t = s;
        }
        let t = 1usize << log_t as usize;
        let i = u >> log_t as usize;
        let j1 = 2 * i * t + (u - i * t);
        let j2 = j1 + t;
        let widx = tw_row + (n_half >> log_t as usize) + ((row_start + j1) >> (log_t + 1) as usize);
        let w = tw[widx];
        let ws = tw_shoup[widx];
        let x = sh[j1];
        let y = sh[j2];
        if comptime!(inverse) {
            sh[j1] = add_mod(x, y, q);
            sh[j2] = mul_shoup(sub_mod(x, y, q), w, ws, q);
        } else {
            let v = mul_shoup(y, w, ws, q);
            sh[j1] = add_mod(x, v, q);
            sh[j2] = sub_mod(x, v, q);
        }
        sync_cube();
    }
    a[base + u] = sh[u];
    a[base + u + half] = sh[u + half];
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
    // The stages with t < block run fused in shared memory when the launch fits in one axis.
    let log_b = map.log_n.min(LOG_BLOCK);
    let blocks = map.rows << (map.log_n - log_b);
    let fused = log_b >= 1 && blocks <= MAX_BLOCKS;
    let first_global = if fused { log_b } else { 0 };
    let stages: Vec<u32> = if inverse {
        (first_global..map.log_n).collect()
    } else {
        (first_global..map.log_n).rev().collect()
    };
    if fused && inverse {
        launch_block(
            client, a, tw, tw_shoup, mods, map, log_b, blocks, table_len, true,
        );
    }
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
    if fused && !inverse {
        launch_block(
            client, a, tw, tw_shoup, mods, map, log_b, blocks, table_len, false,
        );
    }
}

/// `log2` of the block the fused stages work on (512 words: 256 units, 4 KiB of shared memory,
/// inside WebGPU's default limits).
const LOG_BLOCK: u32 = 9;
/// The most cubes the fused launch uses (one axis; otherwise every stage runs on its own).
const MAX_BLOCKS: usize = 65_535;

fn launch_block<R: Runtime>(
    client: &ComputeClient<R>,
    a: &Handle,
    tw: &Handle,
    tw_shoup: &Handle,
    mods: &Handle,
    map: RowMap,
    log_b: u32,
    blocks: usize,
    table_len: usize,
    inverse: bool,
) {
    let block = 1usize << log_b;
    // SAFETY: cube `c` covers words `c·block .. (c+1)·block` of `rows · N`; twiddle indices are
    // `g·N + N/(2t) + j/(2t)` with `j < N`, below `primes · N`.
    #[allow(unsafe_code)]
    unsafe {
        ntt_block_kernel::launch_unchecked::<R>(
            client,
            CubeCount::Static(blocks as u32, 1, 1),
            CubeDim::new_1d((block / 2) as u32),
            map.arg(a),
            ArrayArg::from_raw_parts(tw.clone(), table_len),
            ArrayArg::from_raw_parts(tw_shoup.clone(), table_len),
            map.table(mods),
            map.log_n,
            map.first,
            map.bq,
            map.q_total,
            block,
            log_b,
            inverse,
        )
    }
}

/// Forward NTT of every row of `map`.
pub(crate) fn launch_ntt<R: Runtime>(
    client: &ComputeClient<R>,
    a: &Handle,
    tables: &NttTables,
    mods: &Handle,
    map: RowMap,
) {
    launch_stages(client, a, &tables.tw, &tables.tw_shoup, mods, map, false);
}

/// Inverse NTT (with the factor `N^{-1}`) of every row of `map`.
pub(crate) fn launch_intt<R: Runtime>(
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
