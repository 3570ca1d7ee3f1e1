//! The process's allocator: mimalloc, set to hold about the memory glibc's malloc held.
//!
//! A request allocates and frees a few hundred small blocks (headers, JSON values, the
//! plugin's records, futures). On glibc's malloc that was ~14% of the gateway's CPU at
//! saturation (`_int_malloc`, `_int_free`, `malloc_consolidate`); on mimalloc the gateway
//! answers ~19% more requests a second on the same cores (BENCHMARKS.md, issue 52). Declared in
//! the library, not in `main.rs`, so that the tests run on the allocator the gateway ships with.
//!
//! mimalloc's defaults keep more memory than glibc's malloc did: it commits a whole arena when
//! it reserves one, and hands a freed page back a second later, and only once the thread that
//! freed it allocates again. With 1000 streams open that was ~20% more memory, twice as much
//! idle and after a burst, and a large request in flight held its body's reallocated buffers
//! twice. [`configure`] commits pages as they are used and purges freed ones at once, which
//! brings those back within a few percent of glibc's figures for ~2-3% of the CPU it saved
//! (BENCHMARKS.md). The operator's `MIMALLOC_*` variables still apply.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc 3's numbers for two of its options (`mi_option_e` in its `mimalloc.h`), which
/// `libmimalloc-sys` does not name; the crate is pinned to the version they were read from.
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator's options for a long-running server, unless the environment sets them.
/// Call first thing in `main`, before other threads start.
pub fn configure() {
    set_unless_given(ARENA_EAGER_COMMIT, "MIMALLOC_ARENA_EAGER_COMMIT", 0);
    set_unless_given(PURGE_DELAY, "MIMALLOC_PURGE_DELAY", 0);
}

fn set_unless_given(option: libmimalloc_sys::mi_option_t, env: &str, value: i32) {
    if std::env::var_os(env).is_none() {
        // SAFETY: sets one of mimalloc's own options, which it reads atomically.
        unsafe { libmimalloc_sys::mi_option_set(option, value.into()) };
    }
}

/// Returns the free pages of the allocator's heaps to the system.
pub fn release_heap() {
    // SAFETY: mi_collect only walks mimalloc's own heaps, under its own synchronisation.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
