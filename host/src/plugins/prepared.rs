//! Instances made ahead of the calls that take them, for plugins whose instantiation is slow.
//!
//! A Python plugin carries its interpreter: every instance runs the component's start functions,
//! which fill CPython's tables, and maps its memory image (over a millisecond, against ~20 µs for
//! a Rust plugin and ~0.2 ms for a JavaScript one; BENCHMARKS.md, issue 52 step 2). Once a plugin's
//! instantiations have been slow [`SLOW_IN_A_ROW`] times in a row, a thread of its own
//! ([`Preparer`]) keeps [`DEPTH`] instances of it ready, and a call takes one and binds it to
//! itself ([`super::imports::PluginState::bind`]): each instance still serves one call only,
//! and nothing of a call reaches an instance before the call takes it. The same thread ends
//! those instances after their calls ([`Prepared::end`]): a slow plugin's teardown is slow too.
//!
//! With `plugin_copy_ahead` (off by default), an instance made ahead copies its memory image in
//! whole rather than mapping it copy-on-write, so that its call does not fault on every page it
//! first writes: once [`COPY_AFTER`] calls have been served by instances made ahead, the plugin
//! is compiled once more, on a thread of its own, for the engine whose pool does that
//! ([`Prepared::copying`]); until then, or when that pool's [`COPYING_SLOTS`] are taken, they
//! are made in the request pool.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use uuid::Uuid;
use wasmtime::Store;

use super::CallContext;
use super::imports::{PluginState, new_store};
use super::kv::Kv;
use super::policy::{AllowedHosts, Limits, MAX_MEMORY_LIMIT_BYTES};
use super::sandbox::{Sandbox, SandboxError};
use super::stats::{AheadImage, PluginStats, ReadyCount};
use super::wit::{Exports, Linked};

/// An instantiation slower than this counts as slow. A Rust plugin's takes ~20 µs, and made
/// ahead its calls were no faster and cost more CPU; a JavaScript one's ~0.2 ms.
const SLOW: Duration = Duration::from_micros(300);
/// Slow instantiations in a row after which a plugin's instances are made ahead: one slow
/// instantiation may be a cold one, or a worker the system preempted.
const SLOW_IN_A_ROW: u32 = 3;
/// Instances kept ready per plugin: one call at a time finds one ready; a burst takes them
/// all and the rest instantiate as before.
const DEPTH: usize = 2;
/// Instances kept ready across all plugins (and never more than `max_plugin_instances`):
/// they hold pool slots of their own and their memory.
pub(super) const MAX_PREPARED: u32 = 8;
/// Instances waiting for the thread to end them, across plugins: past this, a call's worker
/// ends its own, as for any plugin (at saturation the thread is behind, and an instance
/// waiting holds its pool slot and memory).
const MAX_ENDING: u32 = 4;
/// Instances alive at once in the pool whose instances copy their image (ready, serving or
/// waiting to end), across plugins: each holds its whole image (megabytes for Python) where
/// the request pool's share the clean pages. Past this, instances are made in the request pool.
pub(super) const COPYING_SLOTS: u32 = 16;
/// Calls served by instances made ahead after which the plugin is compiled for the pool that
/// copies images: that takes seconds of a core (tens for a Python plugin), worth it for a
/// plugin that keeps being called, not for one called a few times.
const COPY_AFTER: u32 = 64;

/// An instance made ahead, not yet bound to a call.
pub(super) struct Ready {
    pub(super) store: Store<PluginState>,
    pub(super) exports: Exports,
    /// Counted among the instances ready until a call takes this one.
    pub(super) held: Held,
    /// Its slot in the pool that copies images, if made there: to be dropped after `store`.
    pub(super) copying: Option<CopyingSlot>,
}

/// An instance's slot in the pool whose instances copy their image, counted until dropped.
pub(super) struct CopyingSlot {
    _counted: Counted,
}

/// One of the [`Preparer`]'s instances, counted (across plugins, and in its plugin's
/// metrics) until dropped.
pub(super) struct Held {
    _all: Counted,
    _plugin: ReadyCount,
}

/// One of at most `cap` things counted by a shared count, until dropped.
struct Counted(Arc<AtomicU32>);

impl Counted {
    /// One more in `count`, unless it holds `cap` already.
    fn under(count: &Arc<AtomicU32>, cap: u32) -> Option<Counted> {
        count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < cap).then_some(n + 1)
            })
            .ok()
            .map(|_| Counted(count.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

const LEARNING: u8 = 0;
const ON: u8 = 1;
/// Making one ahead failed: calls instantiate their own, and report why.
const OFF: u8 = 2;

/// Where instances go to be ended by the [`Preparer`]'s thread.
#[derive(Clone)]
pub(super) struct Ends {
    queue: tokio::sync::mpsc::UnboundedSender<Box<dyn Send>>,
    waiting: Arc<AtomicU32>,
}

/// What the thread drops: `done`, then (fields drop in order) the count of those waiting.
struct Ending<T> {
    _done: T,
    _counted: Counted,
}

/// The plugin compiled for the pool whose instances copy their image, once it is; shared by
/// the versions [`Prepared::moved`] makes (that pool is never recycled).
#[derive(Default)]
pub(super) struct Copying {
    linked: OnceLock<Linked>,
    /// Calls served by instances made ahead, up to [`COPY_AFTER`].
    taken: AtomicU32,
}

impl Copying {
    /// Counts a call served by an instance made ahead: true at the [`COPY_AFTER`]th, only.
    fn due(&self) -> bool {
        // Read first: past the count, calls only load the line.
        self.taken.load(Ordering::Relaxed) < COPY_AFTER
            && self.taken.fetch_add(1, Ordering::Relaxed) + 1 == COPY_AFTER
    }

    /// Compiled and linked: instances made ahead are made with it from now on.
    pub(super) fn compiled(&self, linked: Linked) {
        // Asked once per plugin version (`Prepared::copying_due`), so never set twice.
        let _ = self.linked.set(linked);
    }
}

/// What a plugin version's [`Prepared`] passes on when the plugin moves to a fresh engine.
struct Learnt {
    copying: Arc<Copying>,
    mode: u8,
}

/// A plugin's instances made ahead, and whether it needs them.
pub(super) struct Prepared {
    linked: Linked,
    copying: Arc<Copying>,
    name: Arc<str>,
    stats: Arc<PluginStats>,
    ends: Ends,
    ready: Mutex<Vec<Ready>>,
    mode: AtomicU8,
    slow_in_a_row: AtomicU32,
    /// A refill is queued or running.
    refilling: AtomicBool,
}

impl Prepared {
    pub(super) fn new(
        linked: &Linked,
        name: &Arc<str>,
        stats: &Arc<PluginStats>,
        ends: &Ends,
    ) -> Arc<Prepared> {
        let learnt = Learnt {
            copying: Arc::default(),
            mode: LEARNING,
        };
        Prepared::with(linked, name, stats, ends, learnt)
    }

    /// The same plugin moved to another engine: what was learnt of it and its compilation for
    /// the pool that copies images, none of its instances.
    pub(super) fn moved(&self, linked: &Linked) -> Arc<Prepared> {
        let learnt = Learnt {
            copying: self.copying.clone(),
            mode: self.mode.load(Ordering::Relaxed),
        };
        Prepared::with(linked, &self.name, &self.stats, &self.ends, learnt)
    }

    fn with(
        linked: &Linked,
        name: &Arc<str>,
        stats: &Arc<PluginStats>,
        ends: &Ends,
        learnt: Learnt,
    ) -> Arc<Prepared> {
        Arc::new(Prepared {
            linked: linked.clone(),
            name: name.clone(),
            stats: stats.clone(),
            ends: ends.clone(),
            copying: learnt.copying,
            ready: Mutex::new(Vec::new()),
            mode: AtomicU8::new(learnt.mode),
            slow_in_a_row: AtomicU32::new(0),
            refilling: AtomicBool::new(false),
        })
    }

    /// Where the plugin compiled for the pool that copies images goes, once it is.
    pub(super) fn copying(&self) -> &Arc<Copying> {
        &self.copying
    }

    /// Counts a call served by an instance made ahead; true (once per plugin version) when
    /// the plugin has served enough of them that the caller should have it compiled for the
    /// pool that copies images ([`Prepared::copying`]).
    pub(super) fn copying_due(&self) -> bool {
        self.copying.due()
    }

    /// An instance ready for a call, if one is.
    pub(super) fn take(&self) -> Option<Ready> {
        if self.mode.load(Ordering::Relaxed) != ON {
            return None;
        }
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    /// Hands an instance whose call is over to the thread that makes this plugin's instances,
    /// if they are made ahead: its teardown (the slot's reset, its pages given back) then
    /// leaves the worker, where at one call at a time the next request would wait for it.
    /// Gives it back otherwise, or when too many wait already.
    pub(super) fn end<T: Send + 'static>(&self, done: T) -> Result<(), T> {
        if self.mode.load(Ordering::Relaxed) != ON {
            return Err(done);
        }
        let Some(counted) = Counted::under(&self.ends.waiting, MAX_ENDING) else {
            return Err(done);
        };
        // Sent or not (the thread is gone only as the runtime shuts down), it is dropped once,
        // and the count with it.
        let _ = self.ends.queue.send(Box::new(Ending {
            _done: done,
            _counted: counted,
        }));
        Ok(())
    }

    /// Notes how long a call's own instantiation took.
    pub(super) fn timed(&self, took: Duration) {
        if self.mode.load(Ordering::Relaxed) != LEARNING {
            return;
        }
        if took < SLOW {
            // Read first: a store on every call would bounce the line between the workers.
            if self.slow_in_a_row.load(Ordering::Relaxed) != 0 {
                self.slow_in_a_row.store(0, Ordering::Relaxed);
            }
        } else if self.slow_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 >= SLOW_IN_A_ROW {
            // Logged once: calls racing past the count find the mode already set.
            if self
                .mode
                .compare_exchange(LEARNING, ON, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                tracing::info!(plugin = %self.name,
                    "plugin instantiation is slow: instances are made ahead of calls");
            }
        }
    }

    /// Drops the instances ready (a quiet gateway keeps no memory it does not need).
    pub(super) fn clear(&self) {
        let ready = std::mem::take(&mut *self.ready.lock().unwrap_or_else(|p| p.into_inner()));
        drop(ready);
    }

    fn short(&self) -> bool {
        self.mode.load(Ordering::Relaxed) == ON
            && self.ready.lock().unwrap_or_else(|p| p.into_inner()).len() < DEPTH
    }
}

/// The thread that makes instances ahead, one plugin's refill at a time, and ends them.
pub(super) struct Preparer {
    jobs: tokio::sync::mpsc::UnboundedSender<Arc<Prepared>>,
    ends: Ends,
    ready: Arc<AtomicU32>,
}

/// What the thread counts: instances ready (at most `cap`), and those alive in the pool that
/// copies images (at most [`COPYING_SLOTS`]).
struct Counts {
    ready: Arc<AtomicU32>,
    cap: u32,
    copying: Arc<AtomicU32>,
}

impl Preparer {
    /// At most `cap` instances ready at once, across plugins.
    pub(super) fn start(cap: u32, kv: Arc<Kv>) -> Result<Preparer, PreparerError> {
        let (jobs, mut queued) = tokio::sync::mpsc::unbounded_channel::<Arc<Prepared>>();
        let (ends, mut ending) = tokio::sync::mpsc::unbounded_channel::<Box<dyn Send>>();
        let ready = Arc::new(AtomicU32::new(0));
        // What an instance is made with before a call binds it: no network, the largest
        // memory a route may allow (a call whose route allows less takes it only if it fits),
        // the default CPU budget for its start functions.
        let ahead = Arc::new(Sandbox::new(
            AllowedHosts::none(),
            Limits {
                memory_bytes: MAX_MEMORY_LIMIT_BYTES,
                ..Limits::default()
            },
        )?);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(PreparerError::Thread)?;
        let counts = Counts {
            ready: ready.clone(),
            cap,
            copying: Arc::default(),
        };
        std::thread::Builder::new()
            .name("plugin-prepare".into())
            .spawn(move || {
                runtime.block_on(async move {
                    // Ends when the runtime's senders and every plugin's are dropped.
                    loop {
                        tokio::select! {
                            // An instance waiting to end holds its pool slot: first.
                            biased;
                            Some(done) = ending.recv() => drop(done),
                            Some(prepared) = queued.recv() => {
                                refill(&prepared, &ahead, &kv, &counts, &mut ending).await;
                                prepared.refilling.store(false, Ordering::Release);
                            }
                            else => break,
                        }
                    }
                })
            })
            .map_err(PreparerError::Thread)?;
        Ok(Preparer {
            jobs,
            ends: Ends {
                queue: ends,
                waiting: Arc::default(),
            },
            ready,
        })
    }

    /// Where a plugin's instances are ended, once they are made ahead.
    pub(super) fn ends(&self) -> &Ends {
        &self.ends
    }

    /// Asks for `prepared`'s instances to be topped up, unless they are, or are being.
    pub(super) fn refill(&self, prepared: &Arc<Prepared>) {
        if prepared.short()
            && !prepared.refilling.swap(true, Ordering::AcqRel)
            && self.jobs.send(prepared.clone()).is_err()
        {
            prepared.refilling.store(false, Ordering::Release);
        }
    }

    /// Instances ready now, across plugins: they live in the pool without serving.
    pub(super) fn ready(&self) -> u32 {
        self.ready.load(Ordering::Relaxed)
    }
}

async fn refill(
    prepared: &Arc<Prepared>,
    ahead: &Arc<Sandbox>,
    kv: &Arc<Kv>,
    counts: &Counts,
    ending: &mut tokio::sync::mpsc::UnboundedReceiver<Box<dyn Send>>,
) {
    // Not for a plugin unloaded or moved meanwhile: this job holds its last reference.
    while Arc::strong_count(prepared) > 1 && prepared.short() {
        // Those that ended their calls while the last one was made give their slots back.
        while let Ok(done) = ending.try_recv() {
            drop(done);
        }
        let Some(all) = Counted::under(&counts.ready, counts.cap) else {
            return;
        };
        let held = Held {
            _all: all,
            _plugin: prepared.stats.ready(),
        };
        let ctx = CallContext {
            invocation_id: Uuid::nil(),
            route: Arc::from(""),
            sandbox: ahead.clone(),
            secrets: Default::default(),
            trace: Default::default(),
            trace_headers: None,
        };
        let copying = prepared.copying.linked.get().and_then(|linked| {
            Counted::under(&counts.copying, COPYING_SLOTS)
                .map(|counted| (linked, CopyingSlot { _counted: counted }))
        });
        let linked = copying
            .as_ref()
            .map_or(&prepared.linked, |(linked, _)| *linked);
        let engine = linked.instance_pre().engine();
        let mut store = new_store(engine, &prepared.name, &ctx, None, kv);
        match linked.instantiate(&mut store).await {
            Ok(exports) => {
                prepared.stats.made_ahead(match copying {
                    Some(_) => AheadImage::Copied,
                    None => AheadImage::Mapped,
                });
                prepared
                    .ready
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(Ready {
                        store,
                        exports,
                        held,
                        copying: copying.map(|(_, slot)| slot),
                    })
            }
            Err(e) => {
                // A call's own instantiation fails the same way, and says so to its caller.
                tracing::warn!(plugin = %prepared.name,
                    "could not make an instance ahead of calls: {e}");
                prepared.mode.store(OFF, Ordering::Relaxed);
                return;
            }
        }
    }
}

/// Why the thread that makes instances ahead could not start.
#[derive(Debug, thiserror::Error)]
pub enum PreparerError {
    #[error("the thread that makes plugin instances ahead: {0}")]
    Thread(std::io::Error),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_is_due_for_the_copying_pool_once_after_its_calls() {
        let copying = Copying::default();
        let due: Vec<usize> = (1..=COPY_AFTER as usize * 3)
            .filter(|_| copying.due())
            .collect();
        assert_eq!(due, vec![COPY_AFTER as usize]);
    }
}
