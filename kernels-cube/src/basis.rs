//! RNS basis conversion kernels: gadget decomposition with ModUp, ModDown and rescale
//! (`veil_core::math::rns`), and the fused key-switching inner product.
//!
//! A conversion plan is a block of words in one device table (uploaded once per parameter set):
//!
//! ```text
//! [hat_inv; k] [hat_inv_shoup; k] [hat_mod_dst; m × k]            (BasisConverter, src k → dst m)
//! [h_drop; k] [h_keep; m] [d_inv; m] [d_inv_shoup; m]             (DivRoundPlan only)
//! ```
//!
//! The fast conversion of one coefficient is `Σ_i [x_i · hat_inv_i]_{b_i} · hat_mod_dst[t][i] mod t`
//! — computed here with a Barrett multiply-add per term, which yields the same canonical word as
//! the host's lazy Shoup accumulation.

// `#[cube]` expands each kernel into undocumented helper modules and functions; every item
// written here is documented.
#![allow(missing_docs)]

use crate::arith::{add_mod, mul_add_mod, mul_shoup, prime_of_row, sub_mod};
use crate::launch::{grid, RowMap};
use cubecl::prelude::*;
use cubecl::server::Handle;

/// Fast basis conversion of `k` coefficient rows of `src` (rows `src_row0..src_row0 + k`, primes
/// from the map `(src_first, src_bq)`) into the rows of `out` (primes from `(first, bq)`).
///
/// Output rows `skip_s ≤ r < skip_e` are copied from `src` row `r` instead (the digit's own
/// primes in a decomposition); the others use destination index `t = r` below the skipped block
/// and `r - (skip_e - skip_s)` above it. With `div`, `h_drop` is added to the source words first
/// and `h_keep` subtracted from the result (the division with rounding of a `DivRoundPlan`).
#[cube(launch_unchecked)]
pub fn base_convert_kernel(
    src: &Array<u64>,
    out: &mut Array<u64>,
    plan: &Array<u64>,
    mods: &Array<u64>,
    units: u32,
    log_n: u32,
    src_row0: u32,
    k: u32,
    src_first: u32,
    src_bq: u32,
    skip_s: u32,
    skip_e: u32,
    first: u32,
    bq: u32,
    q_total: u32,
    plan_off: u32,
    m: u32,
    #[comptime] div: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < units as usize {
        let r = (pos >> log_n as usize) as u32;
        let c = pos - ((r as usize) << log_n as usize);
        if r >= skip_s && r < skip_e {
            out[pos] = src[((r as usize) << log_n as usize) + c];
        } else {
            let mut t = r;
            if r >= skip_e {
                t = r - (skip_e - skip_s);
            }
            let g = prime_of_row(r, first, bq, q_total) as usize;
            let q = mods[3 * g];
            let r0 = mods[3 * g + 1];
            let r1 = mods[3 * g + 2];
            let off = plan_off as usize;
            let ku = k as usize;
            let w_off = off + 2 * ku + (t as usize) * ku;
            let mut acc = 0u64;
            for i in 0..ku {
                let gi = prime_of_row(i as u32, src_first, src_bq, q_total) as usize;
                let qi = mods[3 * gi];
                let mut x = src[((src_row0 as usize + i) << log_n as usize) + c];
                if comptime!(div) {
                    x = add_mod(x, plan[off + 2 * ku + (m as usize) * ku + i], qi);
                }
                let y = mul_shoup(x, plan[off + i], plan[off + ku + i], qi);
                acc = mul_add_mod(y, plan[w_off + i], acc, q, r0, r1);
            }
            if comptime!(div) {
                let h_keep = plan[off + 3 * ku + (m as usize) * ku + t as usize];
                acc = sub_mod(acc, h_keep, q);
            }
            out[pos] = acc;
        }
    }
}

/// The end of a division with rounding: `out_i = (x_i - out_i) · D^{-1} mod keep_i`.
#[cube(launch_unchecked)]
pub fn div_finish_kernel(
    x: &Array<u64>,
    out: &mut Array<u64>,
    plan: &Array<u64>,
    mods: &Array<u64>,
    units: u32,
    log_n: u32,
    keep: u32,
    q_total: u32,
    d_inv_off: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < units as usize {
        let r = (pos >> log_n as usize) as u32;
        let g = prime_of_row(r, 0u32, keep, q_total) as usize;
        let q = mods[3 * g];
        let off = d_inv_off as usize;
        let w = plan[off + r as usize];
        let ws = plan[off + keep as usize + r as usize];
        out[pos] = mul_shoup(sub_mod(x[pos], out[pos], q), w, ws, q);
    }
}

/// One digit of the key-switching inner product over `Q_level ∪ P_level`:
/// `acc0 (+)= d ∘ key_b`, `acc1 (+)= d ∘ key_a`, reading the key rows by global prime (the keys
/// span every prime, so key row = global prime index). `first_digit` overwrites the accumulators.
#[cube(launch_unchecked)]
pub fn key_inner_product_kernel(
    d: &Array<u64>,
    key_b: &Array<u64>,
    key_a: &Array<u64>,
    acc0: &mut Array<u64>,
    acc1: &mut Array<u64>,
    mods: &Array<u64>,
    units: u32,
    log_n: u32,
    bq: u32,
    q_total: u32,
    #[comptime] first_digit: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < units as usize {
        let r = (pos >> log_n as usize) as u32;
        let c = pos - ((r as usize) << log_n as usize);
        let g = prime_of_row(r, 0u32, bq, q_total) as usize;
        let q = mods[3 * g];
        let r0 = mods[3 * g + 1];
        let r1 = mods[3 * g + 2];
        let kpos = (g << log_n as usize) + c;
        let dv = d[pos];
        let mut s0 = 0u64;
        let mut s1 = 0u64;
        if comptime!(!first_digit) {
            s0 = acc0[pos];
            s1 = acc1[pos];
        }
        acc0[pos] = mul_add_mod(dv, key_b[kpos], s0, q, r0, r1);
        acc1[pos] = mul_add_mod(dv, key_a[kpos], s1, q, r0, r1);
    }
}

/// Where a conversion reads its sources and writes its destinations.
#[derive(Clone, Copy, Debug)]
pub struct Conversion {
    /// First source row in the source buffer.
    pub src_row0: usize,
    /// Number of source rows (`k`).
    pub k: usize,
    /// Prime map of the source rows: first Q prime.
    pub src_first: usize,
    /// Prime map of the source rows: number of Q rows.
    pub src_bq: usize,
    /// Output rows copied from the source buffer instead of converted (`s..e`).
    pub skip: (usize, usize),
    /// Offset of the plan in the plan table.
    pub plan_off: usize,
    /// Number of destination primes of the plan (`m`).
    pub m: usize,
    /// Whether the plan is a division with rounding (adds and removes `h`).
    pub div: bool,
}

/// Launches a basis conversion into the rows of `out_map`.
pub(crate) fn launch_base_convert<R: Runtime>(
    client: &ComputeClient<R>,
    src: &Handle,
    src_rows: usize,
    out: &Handle,
    plans: &Handle,
    plans_len: usize,
    mods: &Handle,
    out_map: RowMap,
    conv: Conversion,
) {
    let units = out_map.words();
    if units == 0 {
        return;
    }
    let (count, dim) = grid(units);
    // SAFETY: source rows read are below `src_rows`, plan indices below `plans_len` (the plan
    // table built by `CubeBackend::new`), and one unit writes one word of `out`.
    #[allow(unsafe_code)]
    unsafe {
        base_convert_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            ArrayArg::from_raw_parts(src.clone(), (src_rows << out_map.log_n).max(1)),
            out_map.arg(out),
            ArrayArg::from_raw_parts(plans.clone(), plans_len.max(1)),
            out_map.table(mods),
            units as u32,
            out_map.log_n,
            conv.src_row0 as u32,
            conv.k as u32,
            conv.src_first as u32,
            conv.src_bq as u32,
            conv.skip.0 as u32,
            conv.skip.1 as u32,
            out_map.first,
            out_map.bq,
            out_map.q_total,
            conv.plan_off as u32,
            conv.m as u32,
            conv.div,
        )
    }
}

/// Launches the end of a division with rounding over the Q rows of `map` (`map.first = 0`).
pub(crate) fn launch_div_finish<R: Runtime>(
    client: &ComputeClient<R>,
    x: &Handle,
    out: &Handle,
    plans: &Handle,
    plans_len: usize,
    mods: &Handle,
    map: RowMap,
    d_inv_off: usize,
) {
    let units = map.words();
    if units == 0 {
        return;
    }
    let (count, dim) = grid(units);
    // SAFETY: one unit per word of `map.rows` rows of `x` and `out`; plan indices in bounds.
    #[allow(unsafe_code)]
    unsafe {
        div_finish_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(x),
            map.arg(out),
            ArrayArg::from_raw_parts(plans.clone(), plans_len.max(1)),
            map.table(mods),
            units as u32,
            map.log_n,
            map.rows as u32,
            map.q_total,
            d_inv_off as u32,
        )
    }
}

/// Launches one digit of the key inner product over the rows of `map` (`Q_level ∪ P_level`); the
/// keys hold `primes` rows.
pub(crate) fn launch_key_inner_product<R: Runtime>(
    client: &ComputeClient<R>,
    d: &Handle,
    key_b: &Handle,
    key_a: &Handle,
    acc0: &Handle,
    acc1: &Handle,
    mods: &Handle,
    map: RowMap,
    first_digit: bool,
) {
    let units = map.words();
    if units == 0 {
        return;
    }
    let key_words = map.primes << map.log_n;
    let (count, dim) = grid(units);
    // SAFETY: key rows are read at the global prime index, below `primes`.
    #[allow(unsafe_code)]
    unsafe {
        key_inner_product_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(d),
            ArrayArg::from_raw_parts(key_b.clone(), key_words),
            ArrayArg::from_raw_parts(key_a.clone(), key_words),
            map.arg(acc0),
            map.arg(acc1),
            map.table(mods),
            units as u32,
            map.log_n,
            map.bq,
            map.q_total,
            first_digit,
        )
    }
}
