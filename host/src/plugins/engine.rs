//! The wasmtime engines and their instance pools: how plugin code is compiled
//! and where instances live. One thread advances every live engine's epoch
//! (the unit of the CPU budget); [`PluginRuntime::recycle`] swaps the request
//! pool for a fresh one to give a burst's memory back. A second, small pool
//! holds the instances made ahead of calls (`prepared`), whose memory image is
//! copied in when they are made rather than mapped copy-on-write.

use std::sync::{Arc, Mutex, RwLock};

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, EngineWeak, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::PluginRuntime;
use super::imports::{EPOCH_TICK, PluginState};
use super::plugin::Plugin;
use super::policy::MAX_MEMORY_LIMIT_BYTES;
use super::wit::{self, Linked};

/// Plugin instances that may serve requests at once unless the config says
/// otherwise (`max_plugin_instances`).
pub const DEFAULT_MAX_INSTANCES: u32 = 1000;
/// Pool slots beyond the cap, for validating plugins as they load: a reload
/// while every request slot is busy must not reject a good plugin.
const LOAD_SLOTS: u32 = 4;
/// Core module instances a slot's component may hold. A Rust plugin has 3 (its module and the
/// shim and fixup modules that wire its imports); a Python one built with componentize-py has
/// 14 (CPython, libc and the other C libraries are dynamically linked modules, each its own
/// instance). The pool's total is only a counter (nothing is reserved per core instance), so
/// sizing it for Python costs nothing; at 4 per slot the pool held 286 concurrent Python calls
/// (1004 slots x 4 / 14) and the next would fail to instantiate although slots were free.
const CORE_INSTANCES_PER_SLOT: u32 = 16;

/// Bytes of a slot of the pool that copies images kept resident between its instances.
const COPIED_KEEP_RESIDENT: usize = 64 * 1024 * 1024;

/// Why an engine (and its pool) could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Each slot reserves address space for the largest memory a route may
    /// set: a very large `max_plugin_instances` fails here.
    #[error("wasmtime engine with {max_instances} instance slots (max_plugin_instances): {source}")]
    Engine {
        max_instances: u32,
        source: wasmtime::Error,
    },
    #[error("the pool of plugin instances made ahead of calls: {0}")]
    Copying(wasmtime::Error),
    #[error("linking WASI: {0}")]
    Wasi(wasmtime::Error),
    #[error("linking host imports: {0}")]
    Imports(wasmtime::Error),
    #[error("epoch thread: {0}")]
    EpochThread(std::io::Error),
}

/// Why a compiled component cannot serve as a provider plugin.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("does not fit the provider world: {0}")]
    World(wasmtime::Error),
    #[error("does not export the provider world: {0}")]
    Exports(wasmtime::Error),
}

/// Why the pool could not be renewed (the old one keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum RecycleError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("plugin {plugin}: {source}")]
    Move {
        plugin: Arc<str>,
        source: wasmtime::Error,
    },
    #[error("plugin {plugin}: {source}")]
    Link { plugin: Arc<str>, source: LinkError },
}

/// How an instance's memory gets its initial contents.
#[derive(Clone, Copy)]
enum Image {
    /// Mapped from the compiled plugin, each page copied when first written: instantiation
    /// costs next to nothing, and the call that writes a page pays its fault. Right for an
    /// instance made by the call that uses it.
    CopyOnWrite,
    /// Copied whole into the instance's memory as it is made: a Python plugin's image is
    /// megabytes, but an instance made ahead pays that off the call's path, and its call
    /// then takes no copy-on-write fault (46% of a Python call's worker time in step 2's
    /// profile; BENCHMARKS.md, issue 52 steps 2 and 4). wasmtime checks this setting when it
    /// loads compiled code, so a plugin is compiled once more for a pool that copies.
    Copied,
}

/// An engine with its instance pool, and the host imports linked for it.
pub(super) struct Pool {
    pub(super) engine: Engine,
    linker: Linker<PluginState>,
}

impl Pool {
    /// A pool with room for `max_instances` request instances (and the load slots).
    fn new(max_instances: u32) -> Result<Pool, EngineError> {
        let slots = max_instances
            .saturating_add(LOAD_SLOTS)
            .saturating_add(super::prepared::MAX_PREPARED.min(max_instances));
        Pool::with(slots, Image::CopyOnWrite, |source| EngineError::Engine {
            max_instances,
            source,
        })
    }

    /// The pool for instances made ahead, whose image is copied: at most
    /// [`super::prepared::COPYING_SLOTS`] live at once.
    fn copying() -> Result<Pool, EngineError> {
        Pool::with(
            super::prepared::COPYING_SLOTS,
            Image::Copied,
            EngineError::Copying,
        )
    }

    fn with(
        slots: u32,
        image: Image,
        failed: impl FnOnce(wasmtime::Error) -> EngineError,
    ) -> Result<Pool, EngineError> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_memories(slots)
            .total_tables(slots.saturating_mul(2))
            .total_stacks(slots)
            .total_core_instances(slots.saturating_mul(CORE_INSTANCES_PER_SLOT))
            // Routes set their own, smaller limits per store.
            .max_memory_size(MAX_MEMORY_LIMIT_BYTES)
            // Keeping memory resident between instances avoids page faults on
            // every request (see shared/notes/wasmtime-48.md). Without
            // PAGEMAP_SCAN (Linux >= 6.7) every kept byte is zeroed when an
            // instance ends, written or not (~1 MiB memset per request); with
            // it, only the pages the instance wrote are reset.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(match image {
                Image::CopyOnWrite => 1024 * 1024,
                // A copied image is one region the slot's next instance copies over again:
                // kept, it is reset with a memset; given back, the copy faults in every page
                // (a Python plugin's c=1 median +8.5 ms kept at 1 MiB, +1.5 ms at 64;
                // BENCHMARKS.md, issue 52 step 4). Larger did not help the request pool,
                // whose written pages lie in more regions than the reset's scan follows (32).
                Image::Copied => COPIED_KEEP_RESIDENT,
            })
            .max_unused_warm_slots(32.min(slots))
            .table_keep_resident(64 * 1024);
        let mut config = wasmtime::Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        if let Image::Copied = image {
            // Its plugins compile while the gateway serves: one core, not both.
            config.memory_init_cow(false).parallel_compilation(false);
        }
        let engine = Engine::new(&config).map_err(failed)?;
        let mut linker = Linker::new(&engine);
        // Rust's std makes every wasip2 component import WASI; the context gives it nothing.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(EngineError::Wasi)?;
        wit::add_to_linker(&mut linker).map_err(EngineError::Imports)?;
        Ok(Pool { engine, linker })
    }

    /// `component` (compiled for this pool's engine) linked to the host imports.
    pub(super) fn link(&self, component: &Component) -> Result<Linked, LinkError> {
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(LinkError::World)?;
        Linked::new(pre).map_err(LinkError::Exports)
    }

    /// `plugin` as this pool serves it: its compiled code moved over from its
    /// own engine (no recompilation).
    fn adopt(&self, plugin: &Plugin) -> Result<Plugin, RecycleError> {
        let moving = |source| RecycleError::Move {
            plugin: plugin.name.clone(),
            source,
        };
        let compiled = plugin
            .linked
            .instance_pre()
            .component()
            .serialize()
            .map_err(moving)?;
        // SAFETY: serialized just now by an engine with the same settings.
        let component =
            unsafe { Component::deserialize(&self.engine, &compiled) }.map_err(moving)?;
        let linked = self.link(&component).map_err(|source| RecycleError::Link {
            plugin: plugin.name.clone(),
            source,
        })?;
        Ok(Plugin {
            name: plugin.name.clone(),
            file: plugin.file.clone(),
            hash: plugin.hash.clone(),
            wit_version: plugin.wit_version.clone(),
            loaded_at_ms: plugin.loaded_at_ms,
            info: plugin.info.clone(),
            prepared: plugin.prepared.moved(&linked),
            linked,
            engine: self.engine.clone(),
            stats: plugin.stats.clone(),
        })
    }
}

/// The pool new plugins are compiled for, every engine still in use, and the pool of
/// instances made ahead.
pub(super) struct Engines {
    current: RwLock<Arc<Pool>>,
    /// Never recycled (a recycle moves only the request pool's plugins): its slots keep the
    /// pages their instances wrote, up to [`COPIED_KEEP_RESIDENT`] each, only once
    /// `plugin_copy_ahead` has put instances there.
    copying: Arc<Pool>,
    /// For the epoch ticker, which ends once this is dropped.
    ticking: Arc<Mutex<Vec<EngineWeak>>>,
    max_instances: u32,
}

impl Engines {
    /// A first pool, and the thread that advances the epochs.
    pub(super) fn start(max_instances: u32) -> Result<Engines, EngineError> {
        let pool = Pool::new(max_instances)?;
        let copying = Arc::new(Pool::copying()?);
        let ticking = Arc::new(Mutex::new(vec![pool.engine.weak(), copying.engine.weak()]));
        let engines = Arc::downgrade(&ticking);
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                // Ends with the runtime.
                while let Some(engines) = engines.upgrade() {
                    let mut engines = engines.lock().unwrap_or_else(|p| p.into_inner());
                    engines.retain(|engine| match engine.upgrade() {
                        Some(engine) => {
                            engine.increment_epoch();
                            true
                        }
                        None => false,
                    });
                    drop(engines);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(EngineError::EpochThread)?;
        Ok(Engines {
            current: RwLock::new(Arc::new(pool)),
            copying,
            ticking,
            max_instances,
        })
    }

    pub(super) fn current(&self) -> Arc<Pool> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The pool of instances made ahead whose image is copied.
    pub(super) fn copying(&self) -> &Arc<Pool> {
        &self.copying
    }

    pub(super) fn max_instances(&self) -> u32 {
        self.max_instances
    }

    /// A new pool, ticking but not yet current.
    fn fresh(&self) -> Result<Arc<Pool>, EngineError> {
        let fresh = Arc::new(Pool::new(self.max_instances)?);
        self.ticking
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(fresh.engine.weak());
        Ok(fresh)
    }

    fn make_current(&self, pool: Arc<Pool>) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = pool;
    }
}

impl PluginRuntime {
    /// Gives the memory the instance pool kept after a burst back to the
    /// system: every serving plugin moves to a fresh engine (from its compiled
    /// code, no recompilation), and the old pool is unmapped once the requests
    /// still running on it end.
    ///
    /// A pool keeps every slot's written pages (linear memory and async stack)
    /// resident after use, so that the next instance in it does not page-fault;
    /// after 1000 concurrent streams that is ~100 MiB, which wasmtime offers no
    /// other way to release.
    pub fn recycle(&self) -> Result<(), RecycleError> {
        let fresh = self.engines.fresh()?;
        let moved = self
            .registry
            .serving()
            .iter()
            .map(|plugin| fresh.adopt(plugin).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        self.engines.make_current(fresh);
        self.registry.replace_moved(moved);
        Ok(())
    }

    /// Instances running now (not those made ahead of calls), and pool slots that ran one
    /// and keep its pages.
    pub fn pool_usage(&self) -> (u64, u32) {
        let instances = |pool: &Pool| {
            pool.engine
                .pooling_allocator_metrics()
                .map_or(0, |metrics| metrics.component_instances())
        };
        let current = self.engines.current();
        let warm = current
            .engine
            .pooling_allocator_metrics()
            .map_or(0, |metrics| metrics.unused_warm_memories());
        let live = instances(&current) + instances(self.engines.copying());
        (live.saturating_sub(u64::from(self.preparer.ready())), warm)
    }
}
