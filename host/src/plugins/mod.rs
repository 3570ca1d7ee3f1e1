//! The plugin runtime: provider plugins are WebAssembly components, compiled
//! once at load, instantiated fresh for every request (nothing leaks between
//! requests or projects) from a pooling allocator that makes that cheap.
//!
//! The layers, from the outside in: [`PluginRuntime`] and its call API (this
//! module); the `registry` of plugin files (load, unload, status); the
//! `engine` with its instance pool, epoch ticker and recycling; one
//! `instance` per call, whose store carries the state of the host `imports`
//! (`http`, `sink`, `log`, `kv`: the entries plugins keep between requests, per
//! route, in [`kv`]); the route's `policy` ([`Limits`],
//! [`AllowedHosts`]) and its [`Sandbox`] (the policy with the route's `upstream`
//! connections). The WIT bindings stay behind `wit`: everything else,
//! here and in the rest of the host, uses the host's own [`types`].
//! [`hot_reload`] follows the plugins directory; [`trim`] gives memory back
//! after a burst. A plugin slow to instantiate (a Python one) has its instances made
//! ahead of the calls that take them, each still used once (`prepared`).

mod cache;
mod engine;
mod failure;
pub mod hot_reload;
mod imports;
mod instance;
mod kv;
mod plugin;
mod policy;
mod prepared;
mod registry;
mod sandbox;
mod stats;
pub mod trim;
pub mod types;
mod upstream;
mod wit;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Semaphore, mpsc};
use uuid::Uuid;
use wasmtime::AsContextMut;

pub use engine::{DEFAULT_MAX_INSTANCES, EngineError, LinkError, RecycleError};
pub use failure::Failure;
pub use kv::KvBounds;
pub use plugin::Plugin;
pub use policy::{AllowedHosts, HostsError, Limits, MAX_MEMORY_LIMIT_BYTES};
pub use registry::{LoadError, NotLoaded, PluginReport};
pub use sandbox::{Sandbox, SandboxError};
pub use stats::{AheadImage, PluginCounts, TrapKind};
pub use wit::{VersionError, WIT_LINES, WorldKind};

use engine::Engines;
use imports::{Sink, new_store};
pub use instance::GuardInstance;
use instance::Instance;
use registry::Registry;
use types::{
    Chunk, Completion, CompletionRequest, EmbeddingRequest, Embeddings, ImageRequest, Images,
    ProviderError, RerankRequest, Reranking, Speech, SpeechRequest, TokenCount, ToolContext,
    ToolDef, ToolError, ToolResult, Transcription, TranscriptionRequest,
};

/// Why a plugin call gave no result.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The plugin answered with an error of its own.
    #[error("{0}")]
    Provider(ProviderError),
    /// The plugin crashed (trap, panic), ran out of memory or CPU budget.
    #[error("the plugin failed: {0}")]
    Crashed(Failure),
    /// No instance could be made (the component is unusable).
    #[error("the plugin could not be started: {0}")]
    Unavailable(Failure),
    /// Every instance slot (`max_plugin_instances`) is in use: try again shortly.
    #[error("the gateway is at its limit of concurrent plugin instances ({0})")]
    Busy(u32),
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the load-time sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Preparer(#[from] prepared::PreparerError),
}

/// Where and how a call runs: the request's identity and the route's sandbox.
pub struct CallContext {
    pub invocation_id: Uuid,
    /// The route the call serves: the `kv` import's entries are its own.
    pub route: Arc<str>,
    pub sandbox: Arc<Sandbox>,
    /// The request's provider keys: kept out of the plugin's log lines.
    pub secrets: crate::redact::Secrets,
    /// What the host saw of the call's upstream requests.
    pub trace: Arc<UpstreamTrace>,
    /// The W3C trace context every upstream request of the call carries (set by the host:
    /// plugins need not know of it).
    pub trace_headers: Option<TraceHeaders>,
}

/// `traceparent` and `tracestate`, as an upstream request carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeaders {
    pub traceparent: hyper::header::HeaderValue,
    pub tracestate: Option<hyper::header::HeaderValue>,
}

/// What the host's HTTP import saw of one call's upstream requests. A plugin
/// reports a refused or reset connection as a generic failure (the same as an
/// answer it cannot read); the flow's retry decisions need to tell them apart.
#[derive(Debug, Default)]
pub struct UpstreamTrace {
    transport_failed: std::sync::atomic::AtomicBool,
}

impl UpstreamTrace {
    /// Whether an upstream request of the call failed to connect, or its
    /// connection failed before an answer (timeouts are reported as such).
    pub fn transport_failed(&self) -> bool {
        self.transport_failed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn note_transport_failure(&self) {
        self.transport_failed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

pub struct PluginRuntime {
    engines: Engines,
    registry: Registry,
    /// For validating plugins at load: no network.
    offline: Arc<Sandbox>,
    cache: Option<cache::CompiledCache>,
    /// Instances made for requests so far: tells [`trim`] whether anything ran.
    instances_started: AtomicU64,
    /// One permit per request instance allowed at once. Counted here rather
    /// than left to the pooling allocator: its "no free slot" error is not a
    /// stable contract, and it belongs to one engine while the cap must hold
    /// across [`PluginRuntime::recycle`] (old and new pools serve together).
    request_slots: Arc<Semaphore>,
    /// What plugins keep between requests, per route and plugin.
    kv: Arc<kv::Kv>,
    /// Makes instances of slow-to-instantiate plugins ahead of their calls.
    preparer: prepared::Preparer,
    /// `plugin_copy_ahead`: such plugins are compiled for the pool whose instances copy their
    /// image, and their instances made ahead are made there.
    copy_ahead: bool,
}

impl PluginRuntime {
    /// `cache_dir` keeps compiled plugins across restarts (None: compile every
    /// time). At most [`DEFAULT_MAX_INSTANCES`] requests run at once.
    pub fn new(cache_dir: Option<&Path>) -> Result<PluginRuntime, RuntimeError> {
        PluginRuntime::with_max_instances(cache_dir, DEFAULT_MAX_INSTANCES)
    }

    /// Like [`PluginRuntime::new`], with at most `max_instances` plugin
    /// instances serving requests at once; a call beyond that fails with
    /// [`PluginError::Busy`] at once rather than wait.
    pub fn with_max_instances(
        cache_dir: Option<&Path>,
        max_instances: u32,
    ) -> Result<PluginRuntime, RuntimeError> {
        let engines = Engines::start(max_instances)?;
        let kv = Arc::<kv::Kv>::default();
        Ok(PluginRuntime {
            cache: cache_dir.map(cache::CompiledCache::new),
            engines,
            registry: Registry::default(),
            offline: Arc::new(Sandbox::offline()?),
            instances_started: AtomicU64::new(0),
            request_slots: Arc::new(Semaphore::new(max_instances as usize)),
            preparer: prepared::Preparer::start(
                prepared::MAX_PREPARED.min(max_instances),
                kv.clone(),
            )?,
            kv,
            copy_ahead: false,
        })
    }

    /// With `on` (`plugin_copy_ahead`), the instances made ahead of a slow plugin's calls
    /// copy its memory image in as they are made, once it has been compiled again for that
    /// (after 64 such calls): their calls take no copy-on-write fault, for the image's memory
    /// in each instance alive and a thread that works harder (docs/plugins.md).
    pub fn with_copy_ahead(mut self, on: bool) -> PluginRuntime {
        self.copy_ahead = on;
        self
    }

    /// What each route's plugins declared secret (`kv.secret`): a route's requests redact it.
    pub fn minted(&self) -> &crate::redact::MintedByRoute {
        self.kv.minted()
    }

    /// Every plugin name's counts for the metrics: instances serving, loads, crashes.
    pub fn counts(&self) -> Vec<PluginCounts> {
        self.registry.stats.snapshot()
    }

    /// The most plugin instances that serve requests at once.
    pub fn max_instances(&self) -> u32 {
        self.engines.max_instances()
    }

    /// Whether at least half the instance slots are free: a guard's instance is kept
    /// for the answer's check only then, so that guards never take the slots that
    /// requests would be served with (a request with a kept guard holds two).
    pub fn has_room(&self) -> bool {
        self.request_slots.available_permits() as u64 * 2 >= u64::from(self.max_instances())
    }

    /// Drops the instances made ahead of calls: a quiet gateway keeps no memory it does not
    /// need, and the next call makes them again.
    pub fn drop_prepared(&self) {
        for plugin in self.registry.serving() {
            plugin.prepared.clear();
        }
    }

    async fn instantiate(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        sink: Option<Sink>,
    ) -> Result<Instance, PluginError> {
        // The semaphore is never closed: no permit left is the only failure.
        let slot = match self.request_slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                // An instance that ended a moment ago gives its slot back once the task that
                // ran it yields (`Instance::retire`), e.g. this request's own provider call
                // before its guard checks the answer in a fresh instance: let it, then look
                // again.
                tokio::task::yield_now().await;
                self.request_slots
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| PluginError::Busy(self.max_instances()))?
            }
        };
        self.instances_started.fetch_add(1, Ordering::Relaxed);
        let serving = plugin.stats.serving();
        let ready = plugin.prepared.take();
        self.preparer.refill(&plugin.prepared);
        if let Some(ready) = ready {
            if self.copy_ahead && plugin.prepared.copying_due() {
                self.compile_copying(plugin);
            }
            let prepared::Ready {
                mut store,
                exports,
                held,
                copying,
            } = ready;
            // Its pool slot is the call's now, counted by `slot`.
            drop(held);
            if store.data().fits(ctx) {
                store.data_mut().bind(ctx, sink);
                store.set_epoch_deadline(1);
                return Ok(Instance {
                    _serving: serving,
                    store,
                    exports,
                    _copying: copying,
                    _slot: slot,
                });
            }
            // Its memory is already more than this route allows: made for the call, the
            // instance fails (or not) by the route's own limit.
            drop(store);
            drop(copying);
        }
        let mut store = new_store(&plugin.engine, &plugin.name, ctx, sink, &self.kv);
        let started = std::time::Instant::now();
        let exports = match plugin.linked.instantiate(&mut store).await {
            Ok(exports) => exports,
            Err(e) => {
                let failure = Failure::of(&e, store.data());
                plugin.stats.crashed(&failure);
                return Err(PluginError::Unavailable(failure));
            }
        };
        plugin.prepared.timed(started.elapsed());
        Ok(Instance {
            _serving: serving,
            store,
            exports,
            _copying: None,
            _slot: slot,
        })
    }

    pub async fn complete(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: CompletionRequest,
    ) -> Result<Completion, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .call_complete(
                instance.store.as_context_mut(),
                request,
                false,
                &plugin.name,
            )
            .await;
        instance.finish(plugin, ctx, result)
    }

    /// Streams partial results into `sink` as the plugin produces them. When
    /// the receiver is dropped the plugin is told the caller is gone.
    pub async fn complete_stream(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: CompletionRequest,
        sink: mpsc::Sender<Chunk>,
    ) -> Result<Completion, PluginError> {
        let mut instance = self
            .instantiate(plugin, ctx, Some(Sink::Chunks(sink)))
            .await?;
        let result = instance
            .exports
            .call_complete(instance.store.as_context_mut(), request, true, &plugin.name)
            .await;
        instance.finish(plugin, ctx, result)
    }

    pub async fn embed(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: EmbeddingRequest,
    ) -> Result<Embeddings, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .call_embed(instance.store.as_context_mut(), request)
            .await;
        instance.finish(plugin, ctx, result)
    }

    /// How many tokens `request`'s prompt takes, as the plugin (or its provider) counts them;
    /// `None` when it cannot say.
    pub async fn count_tokens(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: CompletionRequest,
    ) -> Result<Option<TokenCount>, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .call_count_tokens(instance.store.as_context_mut(), request)
            .await;
        instance.finish(plugin, ctx, result)
    }

    /// `request`'s documents ordered by their relevance to its query.
    pub async fn rerank(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: RerankRequest,
    ) -> Result<Reranking, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .call_rerank(instance.store.as_context_mut(), request, &plugin.name)
            .await;
        instance.finish(plugin, ctx, result)
    }

    /// Images made from `request`'s prompt.
    pub async fn generate_images(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: ImageRequest,
    ) -> Result<Images, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .call_generate_images(instance.store.as_context_mut(), request, &plugin.name)
            .await;
        instance.finish(plugin, ctx, result)
    }

    /// `request`'s audio written down.
    pub async fn transcribe(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: TranscriptionRequest,
    ) -> Result<Transcription, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .call_transcribe(instance.store.as_context_mut(), request, &plugin.name)
            .await;
        instance.finish(plugin, ctx, result)
    }

    /// `request`'s text spoken: its audio goes into `audio` as the plugin sends it. When the
    /// receiver is dropped the plugin is told the caller is gone.
    pub async fn speak(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        request: SpeechRequest,
        audio: mpsc::Sender<bytes::Bytes>,
    ) -> Result<Speech, PluginError> {
        let mut instance = self
            .instantiate(plugin, ctx, Some(Sink::Audio(audio)))
            .await?;
        let result = instance
            .exports
            .call_speak(instance.store.as_context_mut(), request, &plugin.name)
            .await;
        instance.finish(plugin, ctx, result)
    }

    /// A tool plugin's tools, from a fresh instance; the outer error is the instance's,
    /// the inner one the plugin's.
    pub async fn list_tools(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        context: ToolContext,
    ) -> Result<Result<Vec<ToolDef>, ToolError>, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .list_tools(instance.store.as_context_mut(), context)
            .await;
        instance.finish(plugin, ctx, result.map(Ok))
    }

    /// Calls a tool plugin's tool `name` with `arguments` (a JSON object's text) in a fresh
    /// instance.
    pub async fn call_tool(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        name: &str,
        arguments: &str,
        context: ToolContext,
    ) -> Result<Result<ToolResult, ToolError>, PluginError> {
        let mut instance = self.instantiate(plugin, ctx, None).await?;
        let result = instance
            .exports
            .call_tool(instance.store.as_context_mut(), name, arguments, context)
            .await;
        instance.finish(plugin, ctx, result.map(Ok))
    }

    /// An instance of guard `plugin` for one request: it checks the request and, kept
    /// through the provider's call (holding its slot and its memory), the answer too.
    pub async fn guard(
        &self,
        plugin: Arc<Plugin>,
        ctx: CallContext,
    ) -> Result<GuardInstance, PluginError> {
        let instance = self.instantiate(&plugin, &ctx, None).await?;
        Ok(GuardInstance {
            instance,
            plugin,
            ctx,
        })
    }
}
