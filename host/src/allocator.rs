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
//!
//! The options must be set before the first allocation: the first reserves mimalloc's first
//! arena (1 GiB), committed or not by the option as it then reads, and Rust's runtime allocates
//! before `main`. Set from `main`, the commit option came too late: the idle gateway held 84 MiB
//! against 50 with it in the environment (BENCHMARKS.md, issue 52's end). So on ELF targets
//! [`configure`] runs from the executable's initialisers (`.init_array`), which the C runtime
//! calls before Rust's; `main` calls it again, which is harmless, for the other targets.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc 3's numbers for two of its options (`mi_option_e` in its `mimalloc.h`), which
/// `libmimalloc-sys` does not name; the crate is pinned to the version they were read from.
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The initialiser that sets the options before anything allocates. `#[used]` keeps it in the
/// object beside [`ALLOCATOR`], which the global allocator's shims reference, so the linker
/// keeps it in every binary that allocates through it (the gateway and its tests).
#[cfg(all(target_os = "linux", not(miri)))]
#[used]
#[unsafe(link_section = ".init_array")]
static CONFIGURE_FIRST: extern "C" fn() = {
    extern "C" fn configure_first() {
        configure();
    }
    configure_first
};

/// Sets the allocator's options for a long-running server, unless the environment sets them.
/// Allocates nothing (it runs before the allocator's first use, see the module's doc).
pub fn configure() {
    set_unless_given(ARENA_EAGER_COMMIT, c"MIMALLOC_ARENA_EAGER_COMMIT", 0);
    set_unless_given(PURGE_DELAY, c"MIMALLOC_PURGE_DELAY", 0);
}

fn set_unless_given(option: libmimalloc_sys::mi_option_t, env: &std::ffi::CStr, value: i32) {
    // SAFETY: getenv reads the environment without allocating; nothing writes it this early
    // (and `main`'s call comes before the gateway starts any thread).
    let given = unsafe { !libc::getenv(env.as_ptr()).is_null() };
    if !given {
        // SAFETY: sets one of mimalloc's own options, which it reads atomically.
        unsafe { libmimalloc_sys::mi_option_set(option, value.into()) };
    }
}

/// Returns the free pages of the allocator's heaps to the system.
pub fn release_heap() {
    // SAFETY: mi_collect only walks mimalloc's own heaps, under its own synchronisation.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary, like the gateway, gets its options from the initialiser: nothing in
    /// it calls `configure` (this fails if the linker dropped it or the options were renumbered).
    #[test]
    fn the_options_are_set_before_main() {
        for (option, env) in [
            (ARENA_EAGER_COMMIT, "MIMALLOC_ARENA_EAGER_COMMIT"),
            (PURGE_DELAY, "MIMALLOC_PURGE_DELAY"),
        ] {
            if std::env::var_os(env).is_some() {
                continue;
            }
            // SAFETY: reads one of mimalloc's own options.
            let value = unsafe { libmimalloc_sys::mi_option_get(option) };
            assert_eq!(value, 0, "{env}");
        }
    }
}
