//! Allocator settings of the binaries (`veil`, `veil-bench`), which both use mimalloc as their
//! global allocator: large polynomial buffers are allocated and freed at a high rate, and
//! mimalloc keeps them in reused pages instead of fresh zero-filled mappings (page faults were
//! about 15% of a rotation's time).

/// mimalloc v3's `mi_option_purge_delay` and `mi_option_allow_thp` (`include/mimalloc.h`; the
/// Rust bindings name no constants for them).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Tunes mimalloc for large polynomial buffers (call first in `main`):
/// - freed pages stay in the process instead of going back to the OS after mimalloc's purge
///   delay: a bootstrap frees and reallocates buffers of 10–20 MB at a high rate, and every
///   purged page came back as a zero-filled page fault (a third of a bootstrap's time went to
///   the kernel's page clearing); freed pages are reused, not added;
/// - no transparent huge pages: a 2 MB page is backed whole as soon as one byte of it is
///   touched, and the tails of the buffers' size classes cost about 12% more resident memory
///   (0.45 GB of a bootstrap's peak at `N = 2^16`).
///
/// Harmless in a binary whose global allocator is not mimalloc (the options only steer it).
#[allow(unsafe_code)]
pub fn tune_mimalloc() {
    // SAFETY: sets integer options of the linked allocator; no pointer crosses.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
    }
}
