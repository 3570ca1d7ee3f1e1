//! The plugin runtime: provider plugins are WebAssembly components, compiled
//! once at load, instantiated fresh for every request (nothing leaks between
//! requests or projects) from a pooling allocator that makes that cheap.

mod cache;
mod sandbox;
pub mod trim;
pub mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use uuid::Uuid;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{
    Engine, EngineWeak, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
};

use sandbox::PluginState;
pub use sandbox::{AllowedHosts, IncomingBody, Limits, MAX_MEMORY_LIMIT_BYTES, Sandbox};

pub mod bindings {
    wasmtime::component::bindgen!({
        world: "provider",
        path: "../wit",
        imports: { default: async },
        exports: { default: async },
        with: {
            "gateway:provider/http.incoming-body": super::IncomingBody,
        },
    });
}

pub use bindings::gateway::provider::types;
use bindings::{Provider, ProviderPre};

/// Plugin instances that may serve requests at once unless the config says
/// otherwise (`max_plugin_instances`).
pub const DEFAULT_MAX_INSTANCES: u32 = 1000;
/// Pool slots beyond the cap, for validating plugins as they load: a reload
/// while every request slot is busy must not reject a good plugin.
const LOAD_SLOTS: u32 = 4;
/// How often the epoch advances; the unit of the CPU budget.
const EPOCH_TICK: Duration = Duration::from_millis(10);

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The plugin answered with an error of its own.
    #[error("{0:?}")]
    Provider(types::ProviderError),
    /// The plugin crashed (trap, panic), ran out of memory or CPU budget.
    #[error("the plugin failed: {0}")]
    Crashed(String),
    /// No instance could be made (the component is unusable).
    #[error("the plugin could not be started: {0}")]
    Unavailable(String),
    /// Every instance slot (`max_plugin_instances`) is in use: try again shortly.
    #[error("the gateway is at its limit of concurrent plugin instances ({0})")]
    Busy(u32),
}

/// A plugin ready to serve: compiled and linked.
pub struct Plugin {
    /// The file stem routes refer to.
    pub name: Arc<str>,
    pub file: PathBuf,
    /// SHA-256 of the file, hex.
    pub hash: String,
    /// The `gateway:provider` version the plugin was built against.
    pub wit_version: String,
    pub loaded_at_ms: i64,
    pub info: types::PluginInfo,
    pre: ProviderPre<PluginState>,
    /// The engine (and instance pool) `pre` belongs to.
    engine: Engine,
}

/// What the runtime knows of one plugin file.
#[derive(Clone)]
pub enum PluginStatus {
    Serving,
    /// The file could not be loaded; the previous version, if any, keeps serving.
    Rejected(String),
    /// The file is gone; its routes answer 503.
    Removed,
}

struct Slot {
    file: PathBuf,
    status: PluginStatus,
    /// When the last load attempt happened.
    checked_at_ms: i64,
    serving: Option<Arc<Plugin>>,
}

/// A row of `gateway plugins list` and `GET /admin/plugins`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PluginReport {
    pub plugin: String,
    pub name: Option<String>,
    pub version: Option<String>,
    pub wit_version: Option<String>,
    pub file: String,
    pub hash: Option<String>,
    pub loaded_at: Option<String>,
    pub status: String,
    pub reason: Option<String>,
}

/// Where and how a call runs: the request's identity and the route's sandbox.
pub struct CallContext {
    pub invocation_id: Uuid,
    pub sandbox: Arc<Sandbox>,
    /// The request's provider keys: kept out of the plugin's log lines.
    pub secrets: crate::redact::Secrets,
}

pub struct PluginRuntime {
    /// The engine new plugins are compiled for; replaced by [`PluginRuntime::recycle`].
    pool: RwLock<Arc<Pool>>,
    /// Every engine still in use, for the epoch ticker.
    engines: Arc<Mutex<Vec<EngineWeak>>>,
    /// For validating plugins at load: no network.
    offline: Arc<Sandbox>,
    cache: Option<cache::CompiledCache>,
    plugins: RwLock<HashMap<String, Slot>>,
    /// Instances made for requests so far: tells [`trim`] whether anything ran.
    instances_started: std::sync::atomic::AtomicU64,
    /// One permit per request instance allowed at once. Counted here rather
    /// than left to the pooling allocator: its "no free slot" error is not a
    /// stable contract, and it belongs to one engine while the cap must hold
    /// across [`PluginRuntime::recycle`] (old and new pools serve together).
    request_slots: Arc<Semaphore>,
    max_instances: u32,
}

/// A plugin instance serving one call.
struct Instance {
    store: Store<PluginState>,
    provider: Provider,
    /// Declared after `store`: fields drop in order, so the permit returns only
    /// once the store has given its pool slot back.
    _slot: OwnedSemaphorePermit,
}

impl PluginRuntime {
    /// `cache_dir` keeps compiled plugins across restarts (None: compile every
    /// time). At most [`DEFAULT_MAX_INSTANCES`] requests run at once.
    pub fn new(cache_dir: Option<&Path>) -> Result<PluginRuntime, String> {
        PluginRuntime::with_max_instances(cache_dir, DEFAULT_MAX_INSTANCES)
    }

    /// Like [`PluginRuntime::new`], with at most `max_instances` plugin
    /// instances serving requests at once; a call beyond that fails with
    /// [`PluginError::Busy`] at once rather than wait.
    pub fn with_max_instances(
        cache_dir: Option<&Path>,
        max_instances: u32,
    ) -> Result<PluginRuntime, String> {
        let pool = Pool::new(max_instances)?;
        let engines = Arc::new(Mutex::new(vec![pool.engine.weak()]));
        let ticking = Arc::downgrade(&engines);
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                // Ends with the runtime.
                while let Some(engines) = ticking.upgrade() {
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
            .map_err(|e| format!("epoch thread: {e}"))?;

        Ok(PluginRuntime {
            cache: cache_dir.map(|dir| cache::CompiledCache::new(dir, &pool.engine)),
            pool: RwLock::new(Arc::new(pool)),
            engines,
            offline: Arc::new(Sandbox::offline()?),
            plugins: RwLock::new(HashMap::new()),
            instances_started: std::sync::atomic::AtomicU64::new(0),
            request_slots: Arc::new(Semaphore::new(max_instances as usize)),
            max_instances,
        })
    }

    /// The most plugin instances that serve requests at once.
    pub fn max_instances(&self) -> u32 {
        self.max_instances
    }

    fn pool(&self) -> Arc<Pool> {
        self.pool.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Gives the memory the instance pool kept after a burst back to the
    /// system: every serving plugin moves to a fresh engine (from its compiled
    /// code, no recompilation), and the old pool is unmapped once the requests
    /// still running on it end.
    ///
    /// A pool keeps every slot's written pages (linear memory and async stack)
    /// resident after use, so that the next instance in it does not page-fault;
    /// after 1000 concurrent streams that is ~100 MiB, which wasmtime offers no
    /// other way to release.
    pub fn recycle(&self) -> Result<(), String> {
        let fresh = Arc::new(Pool::new(self.max_instances)?);
        self.engines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(fresh.engine.weak());
        let serving: Vec<Arc<Plugin>> = {
            let plugins = self.plugins.read().unwrap_or_else(|p| p.into_inner());
            plugins
                .values()
                .filter_map(|slot| slot.serving.clone())
                .collect()
        };
        let mut moved = Vec::with_capacity(serving.len());
        for plugin in serving {
            let component = plugin.pre.instance_pre().component();
            let compiled = component
                .serialize()
                .map_err(|e| format!("plugin {}: {e}", plugin.name))?;
            // SAFETY: serialized just now by an engine with the same settings.
            let component = unsafe { Component::deserialize(&fresh.engine, &compiled) }
                .map_err(|e| format!("plugin {}: {e}", plugin.name))?;
            let pre = fresh.link(&component)?;
            moved.push(Arc::new(Plugin {
                name: plugin.name.clone(),
                file: plugin.file.clone(),
                hash: plugin.hash.clone(),
                wit_version: plugin.wit_version.clone(),
                loaded_at_ms: plugin.loaded_at_ms,
                info: plugin.info.clone(),
                pre,
                engine: fresh.engine.clone(),
            }));
        }
        *self.pool.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        let mut plugins = self.plugins.write().unwrap_or_else(|p| p.into_inner());
        for plugin in moved {
            // A plugin (re)loaded meanwhile stays: it is newer.
            if let Some(slot) = plugins.get_mut(&*plugin.name)
                && slot.serving.as_ref().is_some_and(|s| s.hash == plugin.hash)
            {
                slot.serving = Some(plugin);
            }
        }
        Ok(())
    }

    /// Instances running now, and pool slots that ran one and keep its pages.
    pub fn pool_usage(&self) -> (u64, u32) {
        match self.pool().engine.pooling_allocator_metrics() {
            Some(metrics) => (
                metrics.component_instances(),
                metrics.unused_warm_memories(),
            ),
            None => (0, 0),
        }
    }

    /// Loads every `*.wasm` in `dir`; returns the names loaded and the files rejected with why.
    pub async fn load_dir(&self, dir: &Path) -> (Vec<String>, Vec<(PathBuf, String)>) {
        let mut loaded = Vec::new();
        let mut rejected = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                rejected.push((
                    dir.to_owned(),
                    format!("cannot read the plugins directory: {e}"),
                ));
                return (loaded, rejected);
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
            .collect();
        files.sort();
        for file in files {
            match self.load(&file).await {
                Ok(plugin) => loaded.push(plugin.name.to_string()),
                Err(reason) => rejected.push((file, reason)),
            }
        }
        // Compiling leaves tens of MiB of freed heap behind.
        trim::release_heap();
        (loaded, rejected)
    }

    /// Loads (or reloads) one plugin file: compiles, links and validates it
    /// (its `info` must answer), then swaps it in. Requests already running
    /// finish on the version they started with. On failure the previous
    /// version keeps serving and the reason is kept in the plugin's status.
    pub async fn load(&self, file: &Path) -> Result<Arc<Plugin>, String> {
        let name = plugin_name(file)?;
        let result = self.prepare(&name, file).await;
        let mut plugins = self.plugins.write().unwrap_or_else(|p| p.into_inner());
        let slot = plugins.entry(name.to_string()).or_insert_with(|| Slot {
            file: file.to_owned(),
            status: PluginStatus::Removed,
            checked_at_ms: 0,
            serving: None,
        });
        slot.file = file.to_owned();
        slot.checked_at_ms = crate::store::now_ms();
        match result {
            Ok(plugin) => {
                tracing::info!(plugin = %name, name = %plugin.info.name,
                    version = %plugin.info.version, wit = %plugin.wit_version,
                    file = %file.display(), "plugin loaded");
                slot.status = PluginStatus::Serving;
                slot.serving = Some(plugin.clone());
                Ok(plugin)
            }
            Err(reason) => {
                tracing::error!(plugin = %name, file = %file.display(),
                    serving_previous = slot.serving.is_some(), "plugin rejected: {reason}");
                slot.status = PluginStatus::Rejected(reason.clone());
                Err(reason)
            }
        }
    }

    /// The plugin's file is gone: stop serving it.
    pub fn unload(&self, file: &Path) {
        let Ok(name) = plugin_name(file) else { return };
        let mut plugins = self.plugins.write().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = plugins.get_mut(&*name)
            && slot.file == file
        {
            tracing::warn!(plugin = %name, file = %file.display(), "plugin removed: its routes answer 503");
            slot.status = PluginStatus::Removed;
            slot.serving = None;
            slot.checked_at_ms = crate::store::now_ms();
        }
    }

    /// The serving version of a file, if its bytes are unchanged (a no-op reload).
    fn unchanged(&self, name: &str, hash: &str) -> Option<Arc<Plugin>> {
        let plugins = self.plugins.read().unwrap_or_else(|p| p.into_inner());
        let slot = plugins.get(name)?;
        let plugin = slot.serving.as_ref()?;
        (matches!(slot.status, PluginStatus::Serving) && plugin.hash == hash)
            .then(|| plugin.clone())
    }

    async fn prepare(&self, name: &Arc<str>, file: &Path) -> Result<Arc<Plugin>, String> {
        let bytes = std::fs::read(file).map_err(|e| format!("cannot read: {e}"))?;
        let hash = cache::sha256_hex(&bytes);
        if let Some(plugin) = self.unchanged(name, &hash) {
            return Ok(plugin);
        }
        let pool = self.pool();
        let engine = pool.engine.clone();
        let cache = self.cache.clone();
        let key = hash.clone();
        // Compiling takes milliseconds to seconds of CPU: keep it off the async workers.
        let component = tokio::task::spawn_blocking(move || match &cache {
            Some(cache) => cache.load_or_compile(&engine, &key, &bytes),
            None => {
                Component::new(&engine, &bytes).map_err(|e| format!("not a valid component: {e}"))
            }
        })
        .await
        .map_err(|e| format!("compilation task failed: {e}"))??;
        let wit_version = wit_version(&component, &pool.engine)?;
        let pre = pool.link(&component)?;

        let mut store = self.store(
            &pool.engine,
            name,
            &CallContext {
                invocation_id: Uuid::nil(),
                sandbox: self.offline.clone(),
                secrets: Default::default(),
            },
            None,
        );
        let instance = pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| format!("cannot be instantiated: {e}"))?;
        let info = instance
            .call_info(&mut store)
            .await
            .map_err(|e| format!("its info call failed: {}", describe_failure(&e)))?;
        Ok(Arc::new(Plugin {
            name: name.clone(),
            file: file.to_owned(),
            hash,
            wit_version,
            loaded_at_ms: crate::store::now_ms(),
            info,
            pre,
            engine: pool.engine.clone(),
        }))
    }

    pub fn get(&self, name: &str) -> Option<Arc<Plugin>> {
        self.plugins
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(name)
            .and_then(|slot| slot.serving.clone())
    }

    /// Every plugin file the runtime has seen, by name.
    pub fn report(&self) -> Vec<PluginReport> {
        let plugins = self.plugins.read().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<PluginReport> = plugins
            .iter()
            .map(|(name, slot)| {
                let serving = slot.serving.as_ref();
                let (status, reason) = match &slot.status {
                    PluginStatus::Serving => ("serving", None),
                    PluginStatus::Rejected(reason) => ("rejected", Some(reason.clone())),
                    PluginStatus::Removed => ("removed", None),
                };
                PluginReport {
                    plugin: name.clone(),
                    name: serving.map(|p| p.info.name.clone()),
                    version: serving.map(|p| p.info.version.clone()),
                    wit_version: serving.map(|p| p.wit_version.clone()),
                    file: slot.file.display().to_string(),
                    hash: serving.map(|p| p.hash.clone()),
                    loaded_at: serving.map(|p| crate::store::format_time_ms(p.loaded_at_ms)),
                    status: status.to_owned(),
                    reason,
                }
            })
            .collect();
        rows.sort_by(|a, b| a.plugin.cmp(&b.plugin));
        rows
    }

    fn store(
        &self,
        engine: &Engine,
        plugin: &Arc<str>,
        ctx: &CallContext,
        sink: Option<mpsc::Sender<types::Chunk>>,
    ) -> Store<PluginState> {
        let cpu_budget_ticks =
            (ctx.sandbox.limits.cpu_time.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64;
        let state = PluginState::new(
            ctx.sandbox.clone(),
            sink,
            ctx.invocation_id,
            plugin.clone(),
            ctx.secrets.clone(),
        );
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.store_limits);
        // Count only ticks that land while plugin code runs (waiting in a host
        // call does not fire the callback), and yield so one busy plugin
        // cannot hold an async worker.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            state.cpu_ticks += 1;
            if state.cpu_ticks > cpu_budget_ticks {
                Ok(wasmtime::UpdateDeadline::Interrupt)
            } else {
                // tokio's own yield puts the task behind the others waiting;
                // a plain self-wake could run it again at once and starve them.
                Ok(wasmtime::UpdateDeadline::YieldCustom(
                    1,
                    Box::pin(tokio::task::yield_now()),
                ))
            }
        });
        store
    }

    async fn instantiate(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        sink: Option<mpsc::Sender<types::Chunk>>,
    ) -> Result<Instance, PluginError> {
        // The semaphore is never closed: no permit left is the only failure.
        let slot = self
            .request_slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| PluginError::Busy(self.max_instances))?;
        self.instances_started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut store = self.store(&plugin.engine, &plugin.name, ctx, sink);
        let provider = plugin
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| PluginError::Unavailable(describe_failure(&e)))?;
        Ok(Instance {
            store,
            provider,
            _slot: slot,
        })
    }

    pub async fn complete(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: &types::CompletionRequest,
    ) -> Result<types::Completion, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .provider
            .call_complete(&mut instance.store, request)
            .await;
        settle(plugin, ctx, result)
    }

    /// Streams partial results into `sink` as the plugin produces them. When
    /// the receiver is dropped the plugin is told the caller is gone.
    pub async fn complete_stream(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: &types::CompletionRequest,
        sink: mpsc::Sender<types::Chunk>,
    ) -> Result<types::Completion, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, Some(sink)).await?;
        let result = instance
            .provider
            .call_complete_stream(&mut instance.store, request)
            .await;
        settle(plugin, ctx, result)
    }

    pub async fn embed(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: &types::EmbeddingRequest,
    ) -> Result<types::Embeddings, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .provider
            .call_embed(&mut instance.store, request)
            .await;
        settle(plugin, ctx, result)
    }
}

/// An engine with its instance pool, and the host imports linked for it.
struct Pool {
    engine: Engine,
    linker: Linker<PluginState>,
}

impl Pool {
    /// A pool with room for `max_instances` request instances (and the load slots).
    fn new(max_instances: u32) -> Result<Pool, String> {
        let slots = max_instances.saturating_add(LOAD_SLOTS);
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_memories(slots)
            .total_tables(slots.saturating_mul(2))
            .total_stacks(slots)
            .total_core_instances(slots.saturating_mul(4))
            // Routes set their own, smaller limits per store.
            .max_memory_size(MAX_MEMORY_LIMIT_BYTES)
            // Keeping memory resident between instances avoids page faults on
            // every request (see shared/notes/wasmtime-48.md). Without
            // PAGEMAP_SCAN (Linux >= 6.7) every kept byte is zeroed when an
            // instance ends, written or not (~1 MiB memset per request); with
            // it, only the pages the instance wrote are reset.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(1024 * 1024)
            .max_unused_warm_slots(32)
            .table_keep_resident(64 * 1024);
        let mut config = wasmtime::Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // Each slot reserves address space for the largest memory a route may
        // set: a very large max_plugin_instances fails here.
        let engine = Engine::new(&config).map_err(|e| {
            format!(
                "wasmtime engine with {max_instances} instance slots (max_plugin_instances): {e}"
            )
        })?;
        let mut linker = Linker::new(&engine);
        // Rust's std makes every wasip2 component import WASI; the context gives it nothing.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| format!("linking WASI: {e}"))?;
        Provider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|e| format!("linking host imports: {e}"))?;
        Ok(Pool { engine, linker })
    }

    fn link(&self, component: &Component) -> Result<ProviderPre<PluginState>, String> {
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| format!("does not fit the provider world: {e}"))?;
        ProviderPre::new(pre).map_err(|e| format!("does not export the provider world: {e}"))
    }
}

/// A plugin's name: its file stem.
fn plugin_name(file: &Path) -> Result<Arc<str>, String> {
    file.file_stem()
        .and_then(|stem| stem.to_str())
        .map(Arc::from)
        .ok_or_else(|| "the file name is not UTF-8".to_owned())
}

/// The `gateway:provider` release line this host serves: plugins built
/// against any 0.1.x version (see wit/README.md for the policy).
pub const WIT_LINE: &str = "0.1";

/// The `gateway:provider` version a component imports, checked against the host's.
fn wit_version(component: &Component, engine: &Engine) -> Result<String, String> {
    let ty = component.component_type();
    let version = ty
        .imports(engine)
        .filter_map(|(name, _)| name.strip_prefix("gateway:provider/"))
        .filter_map(|rest| rest.split_once('@').map(|(_, v)| v.to_owned()))
        .next()
        .ok_or("it imports no gateway:provider interface: not a provider plugin")?;
    check_wit_version(&version)?;
    Ok(version)
}

/// Semver compatibility with [`WIT_LINE`]: same major, and for 0.x the same minor.
fn check_wit_version(version: &str) -> Result<(), String> {
    let parts: Vec<&str> = version.split('.').collect();
    let line = match parts.as_slice() {
        ["0", minor, ..] => format!("0.{minor}"),
        [major, ..] => (*major).to_owned(),
        [] => String::new(),
    };
    if line == WIT_LINE {
        Ok(())
    } else {
        Err(format!(
            "it was built for gateway:provider@{version}; this gateway serves {WIT_LINE}.x plugins"
        ))
    }
}

fn settle<T>(
    plugin: &Plugin,
    ctx: &CallContext,
    result: wasmtime::Result<Result<T, types::ProviderError>>,
) -> Result<T, PluginError> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(PluginError::Provider(e)),
        Err(e) => {
            // A panic message may quote what the plugin was sent.
            let detail = format!("{e:?}");
            tracing::error!(invocation_id = %ctx.invocation_id, plugin = %plugin.name,
                "plugin crashed: {}", ctx.secrets.redact(&detail));
            Err(PluginError::Crashed(describe_failure(&e)))
        }
    }
}

/// A short, caller-safe description of a wasm failure (the full chain, with
/// the wasm backtrace, goes to the log).
fn describe_failure(e: &wasmtime::Error) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => "it used up its CPU time budget".to_owned(),
        Some(Trap::StackOverflow) => "stack overflow".to_owned(),
        Some(Trap::UnreachableCodeReached) => "it panicked (wasm trap: unreachable)".to_owned(),
        Some(trap) => trap.to_string(),
        None => {
            // The outer messages are context ("error while executing at wasm
            // backtrace ..."); the cause says what happened.
            let cause = e.root_cause().to_string();
            if cause.contains("memory") {
                format!("it went over its memory limit ({cause})")
            } else {
                cause
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_wit_version;

    #[test]
    fn only_the_served_release_line_is_accepted() {
        for ok in ["0.1.0", "0.1.1", "0.1.9"] {
            assert!(check_wit_version(ok).is_ok(), "{ok}");
        }
        for refused in ["0.2.0", "1.0.0", "2.1.0", "0.0.9"] {
            let err = check_wit_version(refused).unwrap_err();
            assert!(err.contains(refused) && err.contains("0.1.x"), "{err}");
        }
    }
}
