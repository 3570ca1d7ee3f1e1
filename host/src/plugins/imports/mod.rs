//! The host side of a plugin instance: its store (`new_store`: the memory limiter and the
//! CPU budget counted in epoch ticks), the state the store carries, and one
//! module per host import it may call ([`http`], [`sink`], [`log`], [`kv`]). WASI is
//! linked too (Rust's std imports it) but gives nothing: no arguments,
//! environment, files or sockets, and stdout/stderr go to the log.

pub(super) mod http;
mod kv;
mod log;
mod sink;

pub use sink::Sink;

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::kv::{Kv, Space};
use super::sandbox::Sandbox;
use super::wit;
use super::{CallContext, UpstreamTrace};
use crate::redact::Secrets;

/// How often the epoch advances; the unit of the CPU budget.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A store for one instance of `plugin`, with the limits of `ctx`'s sandbox.
pub(super) fn new_store(
    engine: &Engine,
    plugin: &Arc<str>,
    ctx: &CallContext,
    sink: Option<Sink>,
    kv: &Arc<Kv>,
) -> Store<PluginState> {
    let state = PluginState::new(ctx, sink, plugin.clone(), kv.clone());
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    // Count only ticks that land while plugin code runs (waiting in a host
    // call does not fire the callback), and yield so one busy plugin
    // cannot hold an async worker.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let state = ctx.data_mut();
        state.cpu_ticks += 1;
        if state.cpu_ticks > state.cpu_budget_ticks {
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

/// Per-instance state: everything a host import can touch.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(super) limiter: MemoryLimiter,
    sandbox: Arc<Sandbox>,
    http_requests: u32,
    /// Where `complete_stream`'s partial results, or `speak`'s audio, go; `None` for other
    /// calls.
    sink: Option<Sink>,
    pub(super) invocation_id: Uuid,
    pub(super) plugin: Arc<str>,
    /// Epoch ticks spent running plugin code (not waiting on host calls).
    pub(super) cpu_ticks: u64,
    /// The ticks the call may spend: the route's CPU budget.
    pub(super) cpu_budget_ticks: u64,
    secrets: Secrets,
    /// Who stdout's and stderr's lines are logged for (an instance made ahead learns it
    /// when a call takes it).
    stdio_caller: Arc<log::Caller>,
    trace: Arc<UpstreamTrace>,
    /// Added to every upstream request of the call.
    trace_headers: Option<crate::plugins::TraceHeaders>,
    /// The route of the call: the `kv` import's entries are its (and the plugin's).
    route: Arc<str>,
    kv: Arc<Kv>,
    /// The route's space, once a `kv` call looked it up.
    kv_space: Option<Arc<std::sync::Mutex<Space>>>,
}

impl PluginState {
    pub(super) fn new(
        ctx: &CallContext,
        sink: Option<Sink>,
        plugin: Arc<str>,
        kv: Arc<Kv>,
    ) -> PluginState {
        let (invocation_id, secrets) = (ctx.invocation_id, ctx.secrets.clone());
        let stdio_caller = Arc::new(log::Caller::new(invocation_id, secrets.clone()));
        let (stdout, stderr) = log::stdio(&stdio_caller, &plugin);
        // No arguments, environment, preopened directories or sockets: the
        // HTTP import is the only way out. Output goes to the log.
        let wasi = WasiCtx::builder().stdout(stdout).stderr(stderr).build();
        PluginState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(ctx.sandbox.limits.memory_bytes),
            sandbox: ctx.sandbox.clone(),
            http_requests: 0,
            sink,
            invocation_id,
            plugin,
            cpu_ticks: 0,
            cpu_budget_ticks: cpu_budget_ticks(ctx),
            secrets,
            stdio_caller,
            trace: ctx.trace.clone(),
            trace_headers: ctx.trace_headers.clone(),
            route: ctx.route.clone(),
            kv,
            kv_space: None,
        }
    }

    /// Whether an instance made ahead (with no call's limits) may serve `ctx`'s call: its
    /// memory is no larger than the route allows.
    pub(super) fn fits(&self, ctx: &CallContext) -> bool {
        self.limiter.largest <= ctx.sandbox.limits.memory_bytes
    }

    /// Gives an instance made ahead the call it serves: its route's limits and sandbox,
    /// the request's identity, keys and trace, and where partial results go. What its
    /// instantiation consumed of the CPU budget is forgotten; nothing else it did differs
    /// from an instance made for the call (no host import but WASI's is reached before a
    /// call).
    pub(super) fn bind(&mut self, ctx: &CallContext, sink: Option<Sink>) {
        self.limiter.limit_to(ctx.sandbox.limits.memory_bytes);
        self.cpu_ticks = 0;
        self.cpu_budget_ticks = cpu_budget_ticks(ctx);
        self.sandbox = ctx.sandbox.clone();
        self.sink = sink;
        self.invocation_id = ctx.invocation_id;
        self.secrets = ctx.secrets.clone();
        self.stdio_caller
            .set(ctx.invocation_id, ctx.secrets.clone());
        self.trace = ctx.trace.clone();
        self.trace_headers = ctx.trace_headers.clone();
        self.route = ctx.route.clone();
    }
}

/// The route's CPU budget in epoch ticks.
fn cpu_budget_ticks(ctx: &CallContext) -> u64 {
    (ctx.sandbox.limits.cpu_time.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit::types::Host for PluginState {}

/// The store's resource limiter: the route's memory limit, and a record of
/// the growth it refused, so that a failed call can say it ran out of memory
/// by what happened rather than by the wording of an error.
pub(super) struct MemoryLimiter {
    limits: StoreLimits,
    /// The size a growth of linear memory asked for, last time one was asked.
    asked: usize,
    /// The size of the first growth refused (or that failed), in bytes.
    refused: Option<usize>,
    /// The largest memory allowed so far, in bytes.
    largest: usize,
}

impl MemoryLimiter {
    fn new(memory_bytes: usize) -> MemoryLimiter {
        MemoryLimiter {
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .trap_on_grow_failure(true)
                .build(),
            asked: 0,
            refused: None,
            largest: 0,
        }
    }

    /// The route's limit, for an instance made ahead of its call.
    fn limit_to(&mut self, memory_bytes: usize) {
        self.limits = StoreLimitsBuilder::new()
            .memory_size(memory_bytes)
            .trap_on_grow_failure(true)
            .build();
    }

    /// The memory size the instance was refused, if it was.
    pub(super) fn refused(&self) -> Option<usize> {
        self.refused
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.asked = desired;
        let allowed = self.limits.memory_growing(current, desired, maximum);
        if matches!(allowed, Ok(true)) {
            self.largest = self.largest.max(desired);
        } else {
            self.refused.get_or_insert(desired);
        }
        allowed
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        // Allowed by the limit, refused by the pool (its slot is smaller).
        self.refused.get_or_insert(self.asked);
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::ResourceLimiter;

    use super::MemoryLimiter;

    #[test]
    fn a_refused_memory_growth_is_recorded() {
        let mut limiter = MemoryLimiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 1 << 19, None).unwrap());
        assert_eq!(limiter.refused(), None);
        // Refused as a trap, and remembered: the call's failure says why.
        assert!(limiter.memory_growing(1 << 19, 2 << 20, None).is_err());
        assert_eq!(limiter.refused(), Some(2 << 20));
        assert!(limiter.memory_growing(1 << 19, 3 << 20, None).is_err());
        assert_eq!(
            limiter.refused(),
            Some(2 << 20),
            "the first refusal is kept"
        );
    }

    #[test]
    fn an_instance_made_ahead_takes_its_calls_memory_limit() {
        // Made with a large limit, as instances made ahead are.
        let mut limiter = MemoryLimiter::new(1 << 30);
        assert!(limiter.memory_growing(0, 3 << 20, None).unwrap());
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        assert_eq!(limiter.largest, 3 << 20, "the largest memory, not the last");
        limiter.limit_to(4 << 20);
        assert!(limiter.memory_growing(3 << 20, 4 << 20, None).unwrap());
        assert!(limiter.memory_growing(4 << 20, 5 << 20, None).is_err());
        assert_eq!(limiter.refused(), Some(5 << 20));
    }
}
