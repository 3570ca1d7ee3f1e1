//! The host side of a plugin instance: the state its store carries, and one
//! module per host import it may call ([`http`], [`sink`], [`log`], [`kv`]). WASI is
//! linked too (Rust's std imports it) but gives nothing: no arguments,
//! environment, files or sockets, and stdout/stderr go to the log.

pub(super) mod http;
mod kv;
mod log;
mod sink;

pub use sink::Sink;

use std::sync::Arc;

use uuid::Uuid;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::UpstreamTrace;
use super::kv::{Kv, Space};
use super::sandbox::Sandbox;
use super::wit;
use crate::redact::Secrets;

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
    secrets: Secrets,
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
        ctx: &crate::plugins::CallContext,
        sink: Option<Sink>,
        plugin: Arc<str>,
        kv: Arc<Kv>,
    ) -> PluginState {
        let (invocation_id, secrets) = (ctx.invocation_id, ctx.secrets.clone());
        let (stdout, stderr) = log::stdio(invocation_id, &plugin, &secrets);
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
            secrets,
            trace: ctx.trace.clone(),
            trace_headers: ctx.trace_headers.clone(),
            route: ctx.route.clone(),
            kv,
            kv_space: None,
        }
    }
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
        }
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
        if !matches!(allowed, Ok(true)) {
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
}
