//! The process's allocator: mimalloc, set to hold about the memory glibc's malloc held.
//!
//! A request allocates and frees a few hundred small blocks (headers, JSON values, the
//! plugin's records, futures). On glibc's malloc that was ~14% of the gateway's CPU at
//! saturation (`_int_malloc`, `_int_free`, `malloc_consolidate`); on mimalloc the gateway
//! answers ~19% more requests a second on the same cores (BENCHMARKS.md, issue 52). Declared in
//! the library, not in `main.rs`, so that the tests run on the allocator the gateway ships with.
//!
//! mimalloc's default commits a whole arena when it reserves one, which left the gateway
//! holding ~20% more memory than on glibc's malloc with 1000 streams open and twice as much
//! after a burst; committing pages as they are used ([`configure`]) brings it back within a
//! few percent, for part of what the allocator gained at concurrency 1 (BENCHMARKS.md). The operator's
//! `MIMALLOC_ARENA_EAGER_COMMIT` (and every other `MIMALLOC_*` variable) still applies.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc 3's number for its `arena_eager_commit` option (`mi_option_e` in its
/// `mimalloc.h`), which `libmimalloc-sys` does not name; the crate is pinned to the version it
/// was read from.
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Sets the allocator's options for a long-running server, unless the environment sets them.
/// Call first thing in `main`, before other threads start.
pub fn configure() {
    if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() {
        // SAFETY: sets one of mimalloc's own options, which it reads atomically.
        unsafe { libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0) };
    }
}

/// Returns the free pages of the allocator's heaps to the system.
pub fn release_heap() {
    // SAFETY: mi_collect only walks mimalloc's own heaps, under its own synchronisation.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
