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

fn bump_by(a: &AtomicUsize, n: usize) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// Implements the listed [`PolyBackend`] methods by forwarding each call to `self.inner`, first
/// bumping the counter named after `=>` by one (or by the amount after `+=`); a method without
/// `=>` is not counted.
macro_rules! forward {
    ($(
        $(#[$doc:meta])*
        fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) $(-> $ret:ty)?
            $(=> $counter:ident $(+= $n:expr)?)?;
    )*) => {$(
        $(#[$doc])*
        fn $name(&self $(, $arg: $ty)*) $(-> $ret)? {
            $(bump_by(&self.c.$counter, forward!(@by $($n)?));)?
            self.inner.$name($($arg),*)
        }
    )*};
    (@by) => { 1 };
    (@by $n:expr) => { $n };
}

impl<B: PolyBackend> PolyBackend for CountingBackend<B> {
    type Buffer = B::Buffer;

    fn name(&self) -> alloc::string::String {
        alloc::format!("counting({})", self.inner.name())
    }

    forward! {
        fn params(&self) -> &CkksParams;
        fn alloc(&self, rows: usize) -> Self::Buffer;
        fn buffer_rows(&self, buf: &Self::Buffer) -> usize;
        fn upload(&self, data: &[u64]) -> Self::Buffer;
        fn download(&self, buf: &Self::Buffer, out: &mut [u64]) -> crate::error::Result<()>;
        fn sync(&self) -> crate::error::Result<()>;
        fn copy_rows(&self, src: &Self::Buffer, src_basis: Basis, dst: &mut Self::Buffer,
            dst_basis: Basis);
        fn zeroize(&self, buf: &mut Self::Buffer);
        fn ntt(&self, a: &mut Self::Buffer, basis: Basis) => ntt;
        fn intt(&self, a: &mut Self::Buffer, basis: Basis) => intt;
        fn add_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis);
        fn sub_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis);
        fn add_new(&self, a: &Self::Buffer, b: &Self::Buffer, basis: Basis) -> Self::Buffer;
        fn sub_new(&self, a: &Self::Buffer, b: &Self::Buffer, basis: Basis) -> Self::Buffer;
        fn neg_assign(&self, a: &mut Self::Buffer, basis: Basis);
        fn mul_assign(&self, a: &mut Self::Buffer, b: &Self::Buffer, basis: Basis) => hadamard;
        fn mul(&self, a: &Self::Buffer, b: &Self::Buffer, out: &mut Self::Buffer, basis: Basis)
            => hadamard;
        fn mul_add_assign(&self, acc: &mut Self::Buffer, a: &Self::Buffer, b: &Self::Buffer,
            basis: Basis) => hadamard;
        fn mul_sum(&self, terms: &[(&Self::Buffer, &Self::Buffer)], out: &mut Self::Buffer,
            basis: Basis) => hadamard += terms.len();
        fn mul_sum_compact(&self, terms: &[(&Self::Buffer, &[u64])], width: usize,
            classes: &[u32], out: &mut Self::Buffer, basis: Basis) => hadamard += terms.len();
        fn ntt_subring(&self, coeffs: &[u64], log_gap: u32, basis: Basis)
            -> alloc::vec::Vec<u64> => ntt;
        fn mul_sum_subring(&self, xs: &[&Self::Buffer], terms: &[(usize, usize, &[u64])],
            log_gap: u32, outs: &mut [Self::Buffer], basis: Basis) => hadamard += terms.len();
        fn native_subring_sums(&self) -> bool;
        fn mul_scalar_assign(&self, a: &mut Self::Buffer, scalars: &[u64], basis: Basis);
        fn add_scalar_assign(&self, a: &mut Self::Buffer, scalars: &[u64], basis: Basis);
        fn mul_scalar_add_assign(&self, acc: &mut Self::Buffer, a: &Self::Buffer,
            scalars: &[u64], basis: Basis);
        fn small_weight_gemm(&self, ins: &[&Self::Buffer], weights: &[i32], post: &[u64],
            outs: &mut [Self::Buffer], basis: Basis);
        fn automorphism(&self, a: &Self::Buffer, g: u64, out: &mut Self::Buffer, basis: Basis,
            domain: Domain) => automorphism;
        fn decompose(&self, c: &Self::Buffer, level: usize, out: &mut [Self::Buffer])
            => decompose;
        fn key_inner_product(&self, digits: &[Self::Buffer], key_b: &[Self::Buffer],
            key_a: &[Self::Buffer], level: usize, acc0: &mut Self::Buffer,
            acc1: &mut Self::Buffer) => key_inner_product;
        fn key_inner_product_seeded(&self, digits: &[Self::Buffer], key_b: &[Self::Buffer],
            seed: &[u8; 32], level: usize, acc0: &mut Self::Buffer,
            acc1: &mut Self::Buffer) => key_inner_product;
        /// Not counted: a transfer, like `upload`.
        fn upload_small(&self, v: &[i64], basis: Basis) -> Self::Buffer;
        /// Not counted: seed expansion belongs to key generation and decoding.
        fn expand_uniform(&self, seed: &[u8; 32], stream: u64, basis: Basis) -> Self::Buffer;
        fn mod_down(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer) => mod_down;
        fn mod_down_pair(&self, x: [&Self::Buffer; 2], level: usize,
            out: [&mut Self::Buffer; 2]) => mod_down += 2;
        fn rescale(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer) => rescale;
        /// Not counted: it belongs to public-key encryption, not to key switching.
        fn mod_down_p0(&self, x: &Self::Buffer, level: usize, out: &mut Self::Buffer);
    }
}
