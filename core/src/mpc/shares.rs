//! Containers for secret shares: zeroized on drop, redacted in `Debug`.

use crate::mpc::zq::Modulus;
use alloc::vec::Vec;
use core::fmt;
use zeroize::Zeroize;

macro_rules! share_type {
    ($(#[$m:meta])* $name:ident, $t:ty) => {
        $(#[$m])*
        #[derive(Clone, Default, PartialEq, Eq)]
        pub struct $name(Vec<$t>);

        impl $name {
            /// Wraps share values (takes ownership; zeroized on drop).
            pub fn new(v: Vec<$t>) -> Self {
                $name(v)
            }
            /// Number of shared elements.
            pub fn len(&self) -> usize {
                self.0.len()
            }
            /// True if empty.
            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }
            /// Read access to the local share values.
            pub fn as_slice(&self) -> &[$t] {
                &self.0
            }
            /// Write access to the local share values.
            pub fn as_mut_slice(&mut self) -> &mut [$t] {
                &mut self.0
            }
            /// Moves the values out (the caller becomes responsible for them).
            pub fn into_vec(mut self) -> Vec<$t> {
                core::mem::take(&mut self.0)
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                self.0.zeroize();
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}(<{} secret shares redacted>)", stringify!($name), self.0.len())
            }
        }
    };
}

share_type!(
    /// Additive shares over `Z_{2^ℓ}`: `x = x_0 + x_1 mod 2^ℓ`.
    RingShares, u64
);
share_type!(
    /// XOR shares of bits (one bit per byte, values 0/1): `b = b_0 ⊕ b_1`.
    BoolShares, u8
);
share_type!(
    /// Additive shares over `Z_q`: `x = x_0 + x_1 mod q`.
    FieldShares, u128
);

impl FieldShares {
    /// Checks that every share is reduced modulo `q`.
    pub fn is_reduced(&self, q: &Modulus) -> bool {
        self.0.iter().all(|&v| v < q.value())
    }
}
