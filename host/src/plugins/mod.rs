//! The plugin runtime: provider plugins are WebAssembly components, compiled
//! once at load, instantiated fresh for every request (nothing leaks between
//! requests or projects) from a pooling allocator that makes that cheap.

mod sandbox;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};

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

/// Plugin instances that may exist at once (one per in-flight request).
const MAX_INSTANCES: u32 = 1000;
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
    /// No instance could be made (all slots busy, or the component is unusable).
    #[error("the plugin could not be started: {0}")]
    Unavailable(String),
}

/// A plugin ready to serve: compiled and linked.
pub struct Plugin {
    /// The file stem routes refer to.
    pub name: Arc<str>,
    pub file: PathBuf,
    pub info: types::PluginInfo,
    pre: ProviderPre<PluginState>,
}

/// Where and how a call runs: the request's identity and the route's sandbox.
pub struct CallContext {
    pub invocation_id: Uuid,
    pub sandbox: Arc<Sandbox>,
}

pub struct PluginRuntime {
    engine: Engine,
    linker: Linker<PluginState>,
    /// For validating plugins at load: no network.
    offline: Arc<Sandbox>,
    plugins: RwLock<HashMap<String, Arc<Plugin>>>,
}

impl PluginRuntime {
    pub fn new() -> Result<PluginRuntime, String> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(MAX_INSTANCES)
            .total_memories(MAX_INSTANCES)
            .total_tables(MAX_INSTANCES * 2)
            .total_stacks(MAX_INSTANCES)
            .total_core_instances(MAX_INSTANCES * 4)
            // Routes set their own, smaller limits per store.
            .max_memory_size(MAX_MEMORY_LIMIT_BYTES)
            // Keeping a little memory resident between instances avoids page
            // faults on every request (see shared/notes/wasmtime-48.md).
            .linear_memory_keep_resident(2 * 1024 * 1024)
            .table_keep_resident(64 * 1024)
            .async_stack_keep_resident(256 * 1024);
        let mut config = wasmtime::Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| format!("wasmtime engine: {e}"))?;

        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while let Some(engine) = ticker.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| format!("epoch thread: {e}"))?;

        let mut linker = Linker::new(&engine);
        // Rust's std makes every wasip2 component import WASI; the context gives it nothing.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| format!("linking WASI: {e}"))?;
        Provider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|e| format!("linking host imports: {e}"))?;

        Ok(PluginRuntime {
            engine,
            linker,
            offline: Arc::new(Sandbox::offline()?),
            plugins: RwLock::new(HashMap::new()),
        })
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
        (loaded, rejected)
    }

    /// Compiles, links and validates (its `info` must answer) one plugin file.
    pub async fn load(&self, file: &Path) -> Result<Arc<Plugin>, String> {
        let name: Arc<str> = file
            .file_stem()
            .and_then(|stem| stem.to_str())
            .ok_or("the file name is not UTF-8")?
            .into();
        let bytes = std::fs::read(file).map_err(|e| format!("cannot read: {e}"))?;
        let engine = self.engine.clone();
        // Compiling takes milliseconds to seconds of CPU: keep it off the async workers.
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| format!("compilation task failed: {e}"))?
            .map_err(|e| format!("not a valid component: {e}"))?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| format!("does not fit the provider world: {e}"))?;
        let pre = ProviderPre::new(pre)
            .map_err(|e| format!("does not export the provider world: {e}"))?;

        let mut store = self.store(
            &name,
            &CallContext {
                invocation_id: Uuid::nil(),
                sandbox: self.offline.clone(),
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

        let plugin = Arc::new(Plugin {
            name: name.clone(),
            file: file.to_owned(),
            info,
            pre,
        });
        tracing::info!(plugin = %name, name = %plugin.info.name, version = %plugin.info.version,
            file = %file.display(), "plugin loaded");
        self.plugins
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(name.to_string(), plugin.clone());
        Ok(plugin)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Plugin>> {
        self.plugins
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(name)
            .cloned()
    }

    fn store(
        &self,
        plugin: &Arc<str>,
        ctx: &CallContext,
        sink: Option<mpsc::Sender<types::Chunk>>,
    ) -> Store<PluginState> {
        let cpu_budget_ticks =
            (ctx.sandbox.limits.cpu_time.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64;
        let state = PluginState::new(ctx.sandbox.clone(), sink, ctx.invocation_id, plugin.clone());
        let mut store = Store::new(&self.engine, state);
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
                Ok(wasmtime::UpdateDeadline::Yield(1))
            }
        });
        store
    }

    async fn instantiate(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        sink: Option<mpsc::Sender<types::Chunk>>,
    ) -> Result<(Store<PluginState>, Provider), PluginError> {
        let mut store = self.store(&plugin.name, ctx, sink);
        let instance = plugin
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| PluginError::Unavailable(describe_failure(&e)))?;
        Ok((store, instance))
    }

    pub async fn complete(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: &types::CompletionRequest,
    ) -> Result<types::Completion, PluginError> {
        let (mut store, instance) = self.instantiate(plugin, ctx, None).await?;
        let result = instance.call_complete(&mut store, request).await;
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
        let (mut store, instance) = self.instantiate(plugin, ctx, Some(sink)).await?;
        let result = instance.call_complete_stream(&mut store, request).await;
        settle(plugin, ctx, result)
    }

    pub async fn embed(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: &types::EmbeddingRequest,
    ) -> Result<types::Embeddings, PluginError> {
        let (mut store, instance) = self.instantiate(plugin, ctx, None).await?;
        let result = instance.call_embed(&mut store, request).await;
        settle(plugin, ctx, result)
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
            tracing::error!(invocation_id = %ctx.invocation_id, plugin = %plugin.name,
                "plugin crashed: {e:?}");
            Err(PluginError::Crashed(describe_failure(&e)))
        }
    }
}

/// A short, caller-safe description of a wasm failure (the full chain goes to the log).
fn describe_failure(e: &wasmtime::Error) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => "it used up its CPU time budget".to_owned(),
        Some(Trap::UnreachableCodeReached) => "it panicked (wasm trap: unreachable)".to_owned(),
        Some(Trap::StackOverflow) => "stack overflow".to_owned(),
        Some(trap) => trap.to_string(),
        None => {
            let text = e.to_string();
            if text.contains("memory") {
                format!("resource limit: {text}")
            } else {
                text
            }
        }
    }
}
