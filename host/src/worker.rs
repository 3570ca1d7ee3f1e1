//! Which serving thread the current code runs on.
//!
//! The gateway serves on one single-threaded runtime per worker thread: a
//! request never changes threads between accept, plugin and upstream call,
//! which is what keeps its added latency low (BENCHMARKS.md). Per-worker
//! resources, such as a route's upstream connection pool, are picked by the
//! worker kept here.
//!
//! A worker thread learns its index and how many workers there are when it
//! starts ([`enter`]); nothing needs setting up before, so a route built
//! before, during or after the workers start sees the same thing.

use std::cell::Cell;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// One serving thread, as the thread itself knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    /// 0-based, below `count`.
    pub index: usize,
    /// How many serving threads there are.
    pub count: usize,
}

thread_local! {
    static CURRENT: Cell<Option<Worker>> = const { Cell::new(None) };
}

/// Marks the calling thread as worker `index` (1-based) of `count`.
pub fn enter(index: usize, count: usize) {
    let worker = index.checked_sub(1).map(|index| Worker { index, count });
    CURRENT.with(|current| current.set(worker));
}

/// The worker the calling thread is, if it is one.
pub fn current() -> Option<Worker> {
    CURRENT.with(Cell::get)
}

/// The default worker count: one per CPU this process may use.
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How busy the serving threads are, as their runtimes count it: each registers its runtime
/// when it starts. Read by the batch runner, which holds its lines back while the serving
/// threads have little time to spare.
#[derive(Default)]
pub struct Load {
    runtimes: Mutex<Vec<tokio::runtime::RuntimeMetrics>>,
}

impl Load {
    /// Counts the calling serving thread's runtime in.
    pub fn register(&self, runtime: tokio::runtime::RuntimeMetrics) {
        let mut runtimes = self.runtimes.lock().unwrap_or_else(PoisonError::into_inner);
        runtimes.push(runtime);
    }

    /// The time the serving threads have spent busy so far (all of them together), and how
    /// many there are.
    pub fn busy(&self) -> (Duration, usize) {
        let runtimes = self.runtimes.lock().unwrap_or_else(PoisonError::into_inner);
        let busy = runtimes
            .iter()
            .map(|runtime| runtime.worker_total_busy_duration(0))
            .sum();
        (busy, runtimes.len())
    }
}
