//! What the metrics count of each plugin: instances serving now, loads of its file, and the
//! calls it failed by crashing. Kept by plugin name, so that counts go on across hot reloads
//! of the same file.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::failure::Failure;

/// How a plugin call crashed, as `gateway_plugin_traps_total{kind}` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    // In `ALL`'s order: the discriminant indexes the counters.
    /// Over its CPU time budget.
    Cpu,
    /// Over its memory limit.
    Memory,
    /// Any other trap: a panic, a stack overflow, a wasm fault, a failed host call.
    Trap,
}

impl TrapKind {
    pub const ALL: [TrapKind; 3] = [TrapKind::Cpu, TrapKind::Memory, TrapKind::Trap];

    pub fn as_str(self) -> &'static str {
        match self {
            TrapKind::Cpu => "cpu",
            TrapKind::Memory => "memory",
            TrapKind::Trap => "trap",
        }
    }

    fn of(failure: &Failure) -> TrapKind {
        match failure {
            Failure::CpuBudget => TrapKind::Cpu,
            Failure::OutOfMemory { .. } => TrapKind::Memory,
            Failure::StackOverflow | Failure::Panicked | Failure::Trap(_) | Failure::Other(_) => {
                TrapKind::Trap
            }
        }
    }
}

/// One plugin's counters. Atomics: instances of one plugin serve on every worker.
#[derive(Debug, Default)]
pub(super) struct PluginStats {
    active: AtomicI64,
    ready: AtomicI64,
    made_ahead: [AtomicU64; 2],
    loaded: AtomicU64,
    rejected: AtomicU64,
    traps: [AtomicU64; 3],
}

impl PluginStats {
    /// Counts an instance serving a call until the returned guard drops.
    pub(super) fn serving(self: &Arc<Self>) -> Serving {
        self.active.fetch_add(1, Ordering::Relaxed);
        Serving(self.clone())
    }

    /// Counts an instance made ahead of calls until the returned guard drops.
    pub(super) fn ready(self: &Arc<Self>) -> ReadyCount {
        self.ready.fetch_add(1, Ordering::Relaxed);
        ReadyCount(self.clone())
    }

    /// Counts an instance made ahead of calls, by how its memory image got there.
    pub(super) fn made_ahead(&self, image: AheadImage) {
        self.made_ahead[image as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn crashed(&self, failure: &Failure) {
        // The discriminant is the kind's place in `TrapKind::ALL`.
        self.traps[TrapKind::of(failure) as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// How an instance made ahead of calls got its memory image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AheadImage {
    /// Mapped copy-on-write, as every other instance's (its call pays the faults).
    Mapped,
    /// Copied in whole as it was made.
    Copied,
}

impl AheadImage {
    /// In the order of [`PluginCounts::made_ahead`].
    pub const ALL: [AheadImage; 2] = [AheadImage::Mapped, AheadImage::Copied];

    pub fn as_str(self) -> &'static str {
        match self {
            AheadImage::Mapped => "mapped",
            AheadImage::Copied => "copied",
        }
    }
}

/// An instance counted as active while this lives.
pub(super) struct Serving(Arc<PluginStats>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An instance counted as ready while this lives.
pub(super) struct ReadyCount(Arc<PluginStats>);

impl Drop for ReadyCount {
    fn drop(&mut self) {
        self.0.ready.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Every plugin name's counters.
#[derive(Debug, Default)]
pub(super) struct StatsByPlugin(Mutex<HashMap<Arc<str>, Arc<PluginStats>>>);

impl StatsByPlugin {
    /// `name`'s counters (new ones the first time the name is seen).
    pub(super) fn of(&self, name: &Arc<str>) -> Arc<PluginStats> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.entry(name.clone()).or_default().clone()
    }

    /// A load of `name`'s file ended: `ok` when it serves now.
    pub(super) fn loaded(&self, name: &Arc<str>, ok: bool) {
        let stats = self.of(name);
        let counter = if ok { &stats.loaded } else { &stats.rejected };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Every plugin's counts now, by name.
    pub(super) fn snapshot(&self) -> Vec<PluginCounts> {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rows: Vec<PluginCounts> = all
            .iter()
            .map(|(name, stats)| PluginCounts {
                plugin: name.to_string(),
                active: u64::try_from(stats.active.load(Ordering::Relaxed)).unwrap_or(0),
                ready: u64::try_from(stats.ready.load(Ordering::Relaxed)).unwrap_or(0),
                made_ahead: std::array::from_fn(|i| stats.made_ahead[i].load(Ordering::Relaxed)),
                loaded: stats.loaded.load(Ordering::Relaxed),
                rejected: stats.rejected.load(Ordering::Relaxed),
                traps: std::array::from_fn(|i| stats.traps[i].load(Ordering::Relaxed)),
            })
            .collect();
        rows.sort_by(|a, b| a.plugin.cmp(&b.plugin));
        rows
    }
}

/// One plugin's counts, as a scrape reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginCounts {
    /// The plugin's name (its file stem, as routes name it).
    pub plugin: String,
    /// Instances serving calls now.
    pub active: u64,
    /// Instances made ahead of calls, waiting for one.
    pub ready: u64,
    /// Instances made ahead of calls so far, by [`AheadImage::ALL`]'s order.
    pub made_ahead: [u64; 2],
    /// Loads of its file that made it serve (at start and on each change).
    pub loaded: u64,
    /// Loads of its file that were refused (the previous version, if any, kept serving).
    pub rejected: u64,
    /// Calls the plugin crashed, by [`TrapKind::ALL`]'s order.
    pub traps: [u64; 3],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_instances_loads_and_crashes_by_name() {
        let stats = StatsByPlugin::default();
        let name: Arc<str> = Arc::from("openai");
        let plugin = stats.of(&name);
        let first = plugin.serving();
        let second = plugin.serving();
        let ready = plugin.ready();
        plugin.made_ahead(AheadImage::Copied);
        drop(first);
        stats.loaded(&name, true);
        stats.loaded(&name, false);
        plugin.crashed(&Failure::CpuBudget);
        plugin.crashed(&Failure::Panicked);
        plugin.crashed(&Failure::OutOfMemory {
            asked: 1,
            cause: String::new(),
        });
        plugin.crashed(&Failure::StackOverflow);
        let rows = stats.snapshot();
        assert_eq!(
            rows,
            vec![PluginCounts {
                plugin: "openai".into(),
                active: 1,
                ready: 1,
                made_ahead: [0, 1],
                loaded: 1,
                rejected: 1,
                traps: [1, 1, 2],
            }]
        );
        drop(second);
        drop(ready);
        assert_eq!(stats.snapshot()[0].active, 0);
        assert_eq!(stats.snapshot()[0].ready, 0);
        // A reload of the same name keeps counting on the same counters.
        assert!(Arc::ptr_eq(&stats.of(&Arc::from("openai")), &plugin));
    }
}
