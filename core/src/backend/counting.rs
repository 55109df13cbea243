//! A counting wrapper around any [`PolyBackend`]: counts the backend-level operations that make up
//! key switching (gadget decompositions, key inner products, ModDowns), rescales, automorphisms,
//! NTTs and Hadamard products, so the kernel-level counts of [`crate::transformer::OpCounts`] can
//! be cross-checked against what actually ran (one key switch = one `key_inner_product` and two
//! `mod_down`s; hoisted rotations share one `decompose`).

use super::{Basis, Domain, PolyBackend};
use crate::params::CkksParams;
use core::sync::atomic::{AtomicUsize, Ordering};
use serde::{Deserialize, Serialize};

/// Declares [`BackendCounts`], the atomic counters behind it and their read-out from one list.
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Backend operation counts.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct BackendCounts {
            $($(#[$doc])* pub $name: u64,)*
        }

        #[derive(Default)]
        struct Counters {
            $($name: AtomicUsize,)*
        }

        impl Counters {
            fn load(&self) -> BackendCounts {
                BackendCounts {
                    $($name: self.$name.load(Ordering::Relaxed) as u64,)*
                }
            }
        }
    };
}

counters! {
    /// Gadget decompositions with ModUp (one per hoisting group or plain key switch).
    decompose,
    /// Key inner products (one per key switch).
    key_inner_product,
    /// ModDowns (two per non-lazy key switch).
    mod_down,
    /// Rescales (one per polynomial).
    rescale,
    /// Automorphism applications (per buffer).
    automorphism,
    /// Forward NTTs.
    ntt,
    /// Inverse NTTs.
    intt,
    /// Hadamard products (`mul`, `mul_assign`, `mul_add_assign`).
    hadamard,
}

/// `B` with every key-switch-relevant call counted.
pub struct CountingBackend<B: PolyBackend> {
    inner: B,
    c: Counters,
}

impl<B: PolyBackend> CountingBackend<B> {
    /// Wraps `inner`.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            c: Counters::default(),
        }
    }
    /// The counts so far.
    pub fn counts(&self) -> BackendCounts {
        self.c.load()
    }
    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

fn bump(a: &AtomicUsize) {
    bump_by(a, 1);
}

fn bump_by(a: &AtomicUsize, n: usize) {
    a.fetch_add(n, Ordering::Relaxed);
}

impl<B: PolyBackend> PolyBackend for CountingBackend<B> {
    type Buffer = B::Buffer;

    fn name(&self) -> alloc::string::String {
        alloc::format!("counting({})", self.inner.name())
    }
    fn params(&self) -> &CkksParams {
        self.inner.params()
    }
    fn alloc(&self, rows: usize) -> Self::Buffer {
        self.inner.alloc(rows)
    }
    fn buffer_rows(&self, buf: &Self::Buffer) -> usize {
        self.inner.buffer_rows(buf)
    }
    fn upload(&self, data: &[u64]) -> Self::Buffer {
        self.inner.upload(data)
    }
    fn download(&self, buf: &Self::Buffer, out: &mut [u64]) -> crate::error::Result<()> {
        self.inner.download(buf, out)
    }
    fn sync(&self) -> crate::error::Result<()> {
        self.inner.sync()
    }
    fn copy_rows(
        &self,
        src: &Self::Buffer,
        src_basis: Basis,
        dst: &mut Self::Buffer,
        dst_basis: Basis,
    ) {
        self.inner.copy_rows(src, src_basis, dst, dst_basis)
    }
    fn zeroize(&self, buf: &mut Self::Buffer) {
        self.inner.zeroize(buf)
    }
    fn ntt(&self, a: &mut Self::Buffer, basis: Basis) {
        bump(&self.c.ntt);
        self.inner.ntt(a, basis)
    }
    fn intt(&self, a: &mut Self::Buffer, basis: Basis) {
        bump(&self.c.intt);
        self.inner.intt(a, basis)
    }
    fn add_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis) {
        self.inner.add_assign(a, b, basis)
    }
    fn sub_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis) {
        self.inner.sub_assign(a, b, basis)
    }
    fn add_new(&self, a: &Self::Buffer, b: &Self::Buffer, basis: Basis) -> Self::Buffer {
        self.inner.add_new(a, b, basis)
    }
    fn sub_new(&self, a: &Self::Buffer, b: &Self::Buffer, basis: Basis) -> Self::Buffer {
        self.inner.sub_new(a, b, basis)
    }
    fn neg_assign(&self, a: &mut Self::Buffer, basis: Basis) {
        self.inner.neg_assign(a, basis)
    }
    fn mul_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis) {
        bump(&self.c.hadamard);
        self.inner.mul_assign(a, b, basis)
    }
    fn mul(&self, a: &Self::Buffer, b: &Self::Buffer, out: &mut Self::Buffer, basis: Basis) {
        bump(&self.c.hadamard);
        self.inner.mul(a, b, out, basis)
    }
    fn mul_add_assign(
        &self,
        acc: &mut Self::Buffer,
        a: &Self::Buffer,
        b: &Self::Buffer,
        basis: Basis,
    ) {
        bump(&self.c.hadamard);
        self.inner.mul_add_assign(acc, a, b, basis)
    }
    fn mul_sum(
        &self,
        terms: &[(&Self::Buffer, &Self::Buffer)],
        out: &mut Self::Buffer,
        basis: Basis,
    ) {
        bump_by(&self.c.hadamard, terms.len());
        self.inner.mul_sum(terms, out, basis)
    }
    fn mul_sum_compact(
        &self,
        terms: &[(&Self::Buffer, &[u64])],
        width: usize,
        classes: &[u32],
        out: &mut Self::Buffer,
        basis: Basis,
    ) {
        bump_by(&self.c.hadamard, terms.len());
        self.inner
            .mul_sum_compact(terms, width, classes, out, basis)
    }
    fn ntt_subring(&self, coeffs: &[u64], log_gap: u32, basis: Basis) -> alloc::vec::Vec<u64> {
        bump(&self.c.ntt);
        self.inner.ntt_subring(coeffs, log_gap, basis)
    }
    fn mul_sum_subring(
        &self,
        xs: &[&Self::Buffer],
        terms: &[(usize, usize, &[u64])],
        log_gap: u32,
        outs: &mut [Self::Buffer],
        basis: Basis,
    ) {
        bump_by(&self.c.hadamard, terms.len());
        self.inner.mul_sum_subring(xs, terms, log_gap, outs, basis)
    }
    fn native_subring_sums(&self) -> bool {
        self.inner.native_subring_sums()
    }
    fn mul_scalar_assign(&self, a: &mut Self::Buffer, scalars: &[u64], basis: Basis) {
        self.inner.mul_scalar_assign(a, scalars, basis)
    }
    fn add_scalar_assign(&self, a: &mut Self::Buffer, scalars: &[u64], basis: Basis) {
        self.inner.add_scalar_assign(a, scalars, basis)
    }
    fn mul_scalar_add_assign(
        &self,
        acc: &mut Self::Buffer,
        a: &Self::Buffer,
        scalars: &[u64],
        basis: Basis,
    ) {
        self.inner.mul_scalar_add_assign(acc, a, scalars, basis)
    }
    fn small_weight_gemm(
        &self,
        ins: &[&Self::Buffer],
        weights: &[i32],
        post: &[u64],
        outs: &mut [Self::Buffer],
        basis: Basis,
    ) {
        self.inner
            .small_weight_gemm(ins, weights, post, outs, basis)
    }
    fn automorphism(
        &self,
        a: &Self::Buffer,
        g: u64,
        out: &mut Self::Buffer,
        basis: Basis,
        domain: Domain,
    ) {
        bump(&self.c.automorphism);
        self.inner.automorphism(a, g, out, basis, domain)
    }
    fn decompose(&self, c: &Self::Buffer, level: usize, out: &mut [Self::Buffer]) {
        bump(&self.c.decompose);
        self.inner.decompose(c, level, out)
    }
    fn key_inner_product(
        &self,
        digits: &[Self::Buffer],
        key_b: &[Self::Buffer],
        key_a: &[Self::Buffer],
        level: usize,
        acc0: &mut Self::Buffer,
        acc1: &mut Self::Buffer,
    ) {
        bump(&self.c.key_inner_product);
        self.inner
            .key_inner_product(digits, key_b, key_a, level, acc0, acc1)
    }
    fn key_inner_product_seeded(
        &self,
        digits: &[Self::Buffer],
        key_b: &[Self::Buffer],
        seed: &[u8; 32],
        level: usize,
        acc0: &mut Self::Buffer,
        acc1: &mut Self::Buffer,
    ) {
        bump(&self.c.key_inner_product);
        self.inner
            .key_inner_product_seeded(digits, key_b, seed, level, acc0, acc1)
    }
    /// Not counted: a transfer, like `upload`.
    fn upload_small(&self, v: &[i64], basis: Basis) -> Self::Buffer {
        self.inner.upload_small(v, basis)
    }
    /// Not counted: seed expansion belongs to key generation and decoding.
    fn expand_uniform(&self, seed: &[u8; 32], stream: u64, basis: Basis) -> Self::Buffer {
        self.inner.expand_uniform(seed, stream, basis)
    }
    fn mod_down(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer) {
        bump(&self.c.mod_down);
        self.inner.mod_down(x, level, out)
    }
    fn mod_down_pair(&self, x: [&Self::Buffer; 2], level: usize, out: [&mut Self::Buffer; 2]) {
        bump_by(&self.c.mod_down, 2);
        self.inner.mod_down_pair(x, level, out)
    }
    fn rescale(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer) {
        bump(&self.c.rescale);
        self.inner.rescale(x, level, out)
    }
    /// Not counted: it belongs to public-key encryption, not to key switching.
    fn mod_down_p0(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer) {
        self.inner.mod_down_p0(x, level, out)
    }
}
