//! [`SecretRng`]: the ChaCha20 CSPRNG that draws secrets (CKKS secret keys, a party's shares,
//! masks and OT choices), wiped when dropped.
//!
//! A ChaCha20 generator's state is its 32-byte key plus a buffer of its last 64 output words:
//! whoever reads it after use can regenerate every secret it drew. `rand_chacha` 0.3 neither
//! zeroizes it nor offers a way to, so the wrapper overwrites the whole generator, buffer
//! included, with the all-zero-seeded one (whose key, counter and buffer are all zero) when it
//! is dropped, and keeps the compiler from eliding that store.

use core::fmt;
use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRng, RngCore, SeedableRng};
use zeroize::Zeroize;

/// A ChaCha20 CSPRNG that wipes its key and output buffer on drop. Seed it from a source of
/// entropy ([`SeedableRng::from_rng`] with the OS generator); fixed seeds
/// ([`SeedableRng::from_seed`], [`SeedableRng::seed_from_u64`]) are for tests. It is neither
/// `Clone` (a copy would outlive the wipe) nor printable beyond its type name.
pub struct SecretRng {
    inner: ChaCha20Rng,
}

impl SecretRng {
    /// Overwrites the generator with the all-zero-seeded one: key, counter and output buffer
    /// all zero. [`Drop`] calls it.
    fn wipe(&mut self) {
        self.inner = ChaCha20Rng::from_seed([0u8; 32]);
        // The store is dead to the optimizer (the value is dropped next); make it observable.
        core::hint::black_box(&mut self.inner);
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    }
}

impl SeedableRng for SecretRng {
    type Seed = [u8; 32];

    fn from_seed(mut seed: [u8; 32]) -> Self {
        let inner = ChaCha20Rng::from_seed(seed);
        seed.zeroize();
        SecretRng { inner }
    }

    /// A generator keyed by 32 bytes drawn from `src` (e.g. `rand_core::OsRng`); the seed's
    /// stack copy is zeroized.
    fn from_rng<R: RngCore>(mut src: R) -> Result<Self, rand_core::Error> {
        let mut seed = [0u8; 32];
        let r = src.try_fill_bytes(&mut seed);
        let out = r.map(|()| Self::from_seed(seed));
        seed.zeroize();
        out
    }
}

impl RngCore for SecretRng {
    fn next_u32(&mut self) -> u32 {
        self.inner.next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.inner.fill_bytes(dest)
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.inner.try_fill_bytes(dest)
    }
}

impl CryptoRng for SecretRng {}

impl Drop for SecretRng {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl zeroize::ZeroizeOnDrop for SecretRng {}

impl fmt::Debug for SecretRng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretRng { <state redacted> }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec::Vec;
    use core::mem::{size_of, MaybeUninit};

    const SEED: [u8; 32] = [
        0x5a, 0x17, 0xc3, 0x9e, 0x42, 0xd8, 0x6b, 0xf1, 0x0c, 0x77, 0xa4, 0x3d, 0xe9, 0x28, 0x95,
        0x61, 0xb2, 0x4f, 0x86, 0x1a, 0xcd, 0x53, 0x3e, 0x7b, 0xf4, 0x09, 0x90, 0x6e, 0x25, 0xda,
        0x48, 0xbf,
    ];

    /// The 64 words ChaCha20 keyed by [`SEED`] puts in its buffer first (rand_chacha 0.3 fills
    /// four blocks at a time).
    fn first_words() -> Vec<u32> {
        let mut g = ChaCha20Rng::from_seed(SEED);
        (0..64).map(|_| g.next_u32()).collect()
    }

    /// How many of `words` and of the seed's eight 4-byte pieces appear 4-byte aligned in `mem`.
    fn secrets_in(mem: &[u8], words: &[u32]) -> (usize, usize) {
        let found: Vec<u32> = mem
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let outs = words.iter().filter(|w| found.contains(w)).count();
        let keys = SEED
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .filter(|w| found.contains(w))
            .count();
        (outs, keys)
    }

    /// A copy of the bytes of the value at `p`.
    #[allow(unsafe_code)]
    fn bytes_of(p: *const SecretRng) -> Vec<u8> {
        // SAFETY (test only): reads the `size_of::<SecretRng>()` bytes of a slot this test owns
        // and zero-filled before use, so every byte, padding included, is initialized.
        unsafe { core::slice::from_raw_parts(p as *const u8, size_of::<SecretRng>()).to_vec() }
    }

    /// After drop, neither the key nor any output word the generator drew (the secret key's
    /// randomness, say) is left in its memory; before drop, both are there (the check sees them).
    #[test]
    #[allow(unsafe_code)]
    fn drop_wipes_key_and_buffer() {
        let words = first_words();
        let mut slot = MaybeUninit::<SecretRng>::zeroed();
        let g = slot.write(SecretRng::from_seed(SEED));
        let drawn: Vec<u32> = (0..3).map(|_| g.next_u32()).collect();
        assert_eq!(drawn, words[..3]);

        let before = bytes_of(slot.as_ptr());
        let (outs, keys) = secrets_in(&before, &words);
        assert_eq!(outs, 64, "the live buffer holds the 64 words");
        assert_eq!(keys, 8, "the live state holds the key");

        // SAFETY (test only): the slot holds an initialized `SecretRng`, dropped once here and
        // never used again; its memory stays this test's to read.
        unsafe { slot.as_mut_ptr().drop_in_place() };
        let after = bytes_of(slot.as_ptr());
        assert_eq!(
            secrets_in(&after, &words),
            (0, 0),
            "key or output words survive the drop"
        );
        let nonzero = after.iter().filter(|&&b| b != 0).count();
        assert!(
            nonzero <= 8,
            "{nonzero} non-zero bytes after drop (at most the buffer index may be)"
        );
    }

    /// `from_rng` draws a fresh key (two generators from one stream differ) and the wrapper
    /// yields ChaCha20's stream for its seed.
    #[test]
    fn streams() {
        let mut a = SecretRng::from_seed(SEED);
        let words = first_words();
        for w in &words[..8] {
            assert_eq!(a.next_u32(), *w);
        }
        let mut x = SecretRng::from_rng(&mut a).unwrap();
        let mut y = SecretRng::from_rng(&mut a).unwrap();
        assert_ne!(x.next_u64(), y.next_u64());
    }

    /// `Debug` names the type and nothing of its state.
    #[test]
    fn debug_redacted() {
        let s = format!("{:?}", SecretRng::from_seed(SEED));
        assert_eq!(s, "SecretRng { <state redacted> }");
    }
}
