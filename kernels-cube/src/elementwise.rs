//! Element-wise kernels: modular add, sub, neg, multiply, multiply-accumulate, per-row scalars,
//! fills and row copies. One unit per word of a `rows × N` buffer.

// `#[cube]` expands each kernel into undocumented helper modules and functions; every item
// written here is documented.
#![allow(missing_docs)]

use crate::arith::{add_mod, mul_add_mod, mul_mod, neg_mod, prime_of_row, sub_mod};
use crate::launch::{grid, RowMap};
use cubecl::prelude::*;
use cubecl::server::Handle;

/// `x + y` (`op = 0`), `x - y` (`op = 1`) or `x · y` (`op = 2`) modulo prime `g` of `mods`.
#[cube]
fn binary_word(x: u64, y: u64, mods: &Array<u64>, g: usize, #[comptime] op: u32) -> u64 {
    let q = mods[3 * g];
    if comptime!(op == 0) {
        add_mod(x, y, q)
    } else if comptime!(op == 1) {
        sub_mod(x, y, q)
    } else {
        mul_mod(x, y, q, mods[3 * g + 1], mods[3 * g + 2])
    }
}

/// `a += b` (`op = 0`), `a -= b` (`op = 1`) or `a = a ∘ b` (`op = 2`) over the first `total` words.
#[cube(launch_unchecked)]
pub fn binary_assign_kernel(
    a: &mut Array<u64>,
    b: &Array<u64>,
    mods: &Array<u64>,
    total: u32,
    log_n: u32,
    first: u32,
    bq: u32,
    q_total: u32,
    #[comptime] op: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < total as usize {
        let r = (pos >> log_n as usize) as u32;
        let g = prime_of_row(r, first, bq, q_total) as usize;
        a[pos] = binary_word(a[pos], b[pos], mods, g, op);
    }
}

/// `out = a + b` (`op = 0`), `a - b` (`op = 1`) or `a ∘ b` (`op = 2`).
#[cube(launch_unchecked)]
pub fn binary_new_kernel(
    a: &Array<u64>,
    b: &Array<u64>,
    out: &mut Array<u64>,
    mods: &Array<u64>,
    total: u32,
    log_n: u32,
    first: u32,
    bq: u32,
    q_total: u32,
    #[comptime] op: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < total as usize {
        let r = (pos >> log_n as usize) as u32;
        let g = prime_of_row(r, first, bq, q_total) as usize;
        out[pos] = binary_word(a[pos], b[pos], mods, g, op);
    }
}

/// `acc += a ∘ b`.
#[cube(launch_unchecked)]
pub fn mul_add_kernel(
    acc: &mut Array<u64>,
    a: &Array<u64>,
    b: &Array<u64>,
    mods: &Array<u64>,
    total: u32,
    log_n: u32,
    first: u32,
    bq: u32,
    q_total: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < total as usize {
        let r = (pos >> log_n as usize) as u32;
        let g = prime_of_row(r, first, bq, q_total) as usize;
        acc[pos] = mul_add_mod(
            a[pos],
            b[pos],
            acc[pos],
            mods[3 * g],
            mods[3 * g + 1],
            mods[3 * g + 2],
        );
    }
}

/// `a = -a`.
#[cube(launch_unchecked)]
pub fn neg_kernel(
    a: &mut Array<u64>,
    mods: &Array<u64>,
    total: u32,
    log_n: u32,
    first: u32,
    bq: u32,
    q_total: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < total as usize {
        let r = (pos >> log_n as usize) as u32;
        let g = prime_of_row(r, first, bq, q_total) as usize;
        a[pos] = neg_mod(a[pos], mods[3 * g]);
    }
}

/// `a = a · s_r` (`op = 2`) or `a = a + s_r` (`op = 0`), with one scalar per row.
#[cube(launch_unchecked)]
pub fn scalar_assign_kernel(
    a: &mut Array<u64>,
    scalars: &Array<u64>,
    mods: &Array<u64>,
    total: u32,
    log_n: u32,
    first: u32,
    bq: u32,
    q_total: u32,
    #[comptime] op: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < total as usize {
        let r = (pos >> log_n as usize) as u32;
        let g = prime_of_row(r, first, bq, q_total) as usize;
        let s = scalars[r as usize];
        if comptime!(op == 0) {
            a[pos] = add_mod(a[pos], s, mods[3 * g]);
        } else {
            a[pos] = mul_mod(a[pos], s, mods[3 * g], mods[3 * g + 1], mods[3 * g + 2]);
        }
    }
}

/// `a = 0` over the first `total` words.
#[cube(launch_unchecked)]
pub fn fill_zero_kernel(a: &mut Array<u64>, total: u32) {
    let pos = ABSOLUTE_POS;
    if pos < total as usize {
        a[pos] = 0u64;
    }
}

/// Row copy: destination row `r < dst_q` reads source row `src_first + r`, destination row
/// `r ≥ dst_q` reads source row `src_q + (r - dst_q)` (a sub-basis `dst ⊆ src`, or a block of
/// rows starting at `src_first` when `dst_q` covers every row).
#[cube(launch_unchecked)]
pub fn copy_rows_kernel(
    src: &Array<u64>,
    dst: &mut Array<u64>,
    total: u32,
    log_n: u32,
    src_first: u32,
    dst_q: u32,
    src_q: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < total as usize {
        let r = (pos >> log_n as usize) as u32;
        let c = pos - ((r as usize) << log_n as usize);
        let s = prime_of_row(r, src_first, dst_q, src_q) as usize;
        dst[pos] = src[(s << log_n as usize) + c];
    }
}

/// Which element-wise binary operation a kernel performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// Modular addition.
    Add,
    /// Modular subtraction.
    Sub,
    /// Modular (Hadamard) multiplication.
    Mul,
}

impl BinaryOp {
    fn code(self) -> u32 {
        match self {
            BinaryOp::Add => 0,
            BinaryOp::Sub => 1,
            BinaryOp::Mul => 2,
        }
    }
}

/// Launches `a = a op b` over the rows of `map`.
pub(crate) fn launch_binary_assign<R: Runtime>(
    client: &ComputeClient<R>,
    op: BinaryOp,
    a: &Handle,
    b: &Handle,
    mods: &Handle,
    map: RowMap,
) {
    let (count, dim) = grid(map.words());
    // SAFETY: `map.words()` words are in bounds of `a` and `b` (the caller's buffers hold at least
    // `map.rows` rows) and `mods` holds three words per prime of the parameter set.
    unsafe {
        binary_assign_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(a),
            map.arg(b),
            map.table(mods),
            map.words() as u32,
            map.log_n,
            map.first,
            map.bq,
            map.q_total,
            op.code(),
        )
    }
}

/// Launches `out = a op b` over the rows of `map`.
pub(crate) fn launch_binary_new<R: Runtime>(
    client: &ComputeClient<R>,
    op: BinaryOp,
    a: &Handle,
    b: &Handle,
    out: &Handle,
    mods: &Handle,
    map: RowMap,
) {
    let (count, dim) = grid(map.words());
    // SAFETY: as in `launch_binary_assign`; `out` holds at least `map.rows` rows.
    unsafe {
        binary_new_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(a),
            map.arg(b),
            map.arg(out),
            map.table(mods),
            map.words() as u32,
            map.log_n,
            map.first,
            map.bq,
            map.q_total,
            op.code(),
        )
    }
}

/// Launches `acc += a ∘ b` over the rows of `map`.
pub(crate) fn launch_mul_add<R: Runtime>(
    client: &ComputeClient<R>,
    acc: &Handle,
    a: &Handle,
    b: &Handle,
    mods: &Handle,
    map: RowMap,
) {
    let (count, dim) = grid(map.words());
    // SAFETY: as in `launch_binary_assign`.
    unsafe {
        mul_add_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(acc),
            map.arg(a),
            map.arg(b),
            map.table(mods),
            map.words() as u32,
            map.log_n,
            map.first,
            map.bq,
            map.q_total,
        )
    }
}

/// Launches `a = -a` over the rows of `map`.
pub(crate) fn launch_neg<R: Runtime>(
    client: &ComputeClient<R>,
    a: &Handle,
    mods: &Handle,
    map: RowMap,
) {
    let (count, dim) = grid(map.words());
    // SAFETY: as in `launch_binary_assign`.
    unsafe {
        neg_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(a),
            map.table(mods),
            map.words() as u32,
            map.log_n,
            map.first,
            map.bq,
            map.q_total,
        )
    }
}

/// Launches `a = a · s_r` (`mul = true`) or `a = a + s_r` with `scalars` holding one word per
/// row of `map`.
pub(crate) fn launch_scalar_assign<R: Runtime>(
    client: &ComputeClient<R>,
    mul: bool,
    a: &Handle,
    scalars: &Handle,
    mods: &Handle,
    map: RowMap,
) {
    let (count, dim) = grid(map.words());
    // SAFETY: as in `launch_binary_assign`; `scalars` holds `map.rows` words.
    unsafe {
        scalar_assign_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            map.arg(a),
            ArrayArg::from_raw_parts(scalars.clone(), map.rows),
            map.table(mods),
            map.words() as u32,
            map.log_n,
            map.first,
            map.bq,
            map.q_total,
            if mul { 2 } else { 0 },
        )
    }
}

/// Launches `a = 0` over its first `words` words.
pub(crate) fn launch_fill_zero<R: Runtime>(client: &ComputeClient<R>, a: &Handle, words: usize) {
    if words == 0 {
        return;
    }
    let (count, dim) = grid(words);
    // SAFETY: the caller's buffer holds at least `words` words.
    unsafe {
        fill_zero_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            ArrayArg::from_raw_parts(a.clone(), words),
            words as u32,
        )
    }
}

/// Launches a row copy of `rows` rows of `2^log_n` words (see [`copy_rows_kernel`]).
pub(crate) fn launch_copy_rows<R: Runtime>(
    client: &ComputeClient<R>,
    src: &Handle,
    src_rows: usize,
    dst: &Handle,
    rows: usize,
    log_n: u32,
    src_first: usize,
    dst_q: usize,
    src_q: usize,
) {
    let words = rows << log_n;
    if words == 0 {
        return;
    }
    let (count, dim) = grid(words);
    // SAFETY: every source row read is below `src_rows` (the caller checks the row map) and the
    // destination holds `rows` rows.
    unsafe {
        copy_rows_kernel::launch_unchecked::<R>(
            client,
            count,
            dim,
            ArrayArg::from_raw_parts(src.clone(), src_rows << log_n),
            ArrayArg::from_raw_parts(dst.clone(), words),
            words as u32,
            log_n,
            src_first as u32,
            dst_q as u32,
            src_q as u32,
        )
    }
}
