//! Measurements of the gateway process for the sandbox tests: its resident
//! memory, and the latency figures the suite reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const MIB: u64 = 1024 * 1024;

/// How often the sampler and `settle_rss` read `/proc`.
const POLL: Duration = Duration::from_millis(20);

/// The resident set size of process `pid` in bytes (`VmRSS` of
/// `/proc/PID/status`).
pub fn rss_bytes(pid: u32) -> u64 {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {path} (is the gateway running?): {e}"));
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .unwrap_or_else(|| panic!("no VmRSS line in {path}:\n{status}"));
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("bad VmRSS line {line:?}: {e}"));
    kib * 1024
}

/// Polls the RSS of `pid` until it is at most `bound` or `patience` has
/// passed; returns the last reading (the caller asserts on it). A liveness
/// bound: how fast the memory comes back is not asserted.
pub fn settle_rss(pid: u32, bound: u64, patience: Duration) -> u64 {
    let deadline = Instant::now() + patience;
    loop {
        let rss = rss_bytes(pid);
        if rss <= bound || Instant::now() >= deadline {
            return rss;
        }
        std::thread::sleep(POLL);
    }
}

/// Records the highest RSS of a process while it runs.
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
        let peak = Arc::new(AtomicU64::new(rss_bytes(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_bytes(pid), Ordering::Relaxed);
                    std::thread::sleep(POLL);
                }
            })
        };
        RssSampler {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; returns the peak seen.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.peak.load(Ordering::Relaxed)
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // A panic in the sampler (the process is gone) is reported by
            // the test's own checks of the gateway.
            let _ = thread.join();
        }
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.halt();
    }
}

/// `bytes` in MiB with one decimal, for the figures the suite prints.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// The median of `samples` (zero when empty).
pub fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// The largest of `samples` (zero when empty).
pub fn max(samples: &[Duration]) -> Duration {
    samples.iter().copied().max().unwrap_or_default()
}
