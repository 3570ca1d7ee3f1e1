//! Which serving thread the current code runs on.
//!
//! The gateway serves on one single-threaded runtime per worker thread: a
//! request never changes threads between accept, plugin and upstream call,
//! which is what keeps its added latency low (BENCHMARKS.md). Per-worker
//! resources, such as a route's upstream connection pool, are picked by the
//! index kept here.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

static COUNT: AtomicUsize = AtomicUsize::new(0);

/// How many serving threads there are (or will be): set once at startup.
pub fn set_count(workers: usize) {
    COUNT.store(workers, Ordering::Relaxed);
}

/// How many serving threads there are (0 before the server starts).
pub fn count() -> usize {
    COUNT.load(Ordering::Relaxed)
}

/// Marks the calling thread as worker `index` (1-based).
pub fn enter(index: usize) {
    CURRENT.with(|current| current.set(index));
}

/// The current worker's index, 0 outside the workers.
pub fn current() -> usize {
    CURRENT.with(Cell::get)
}

/// The default worker count: one per CPU this process may use.
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
