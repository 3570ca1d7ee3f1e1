//! One plugin instance serving one call: its store (memory limit, CPU
//! budget), and how a failed call is described to the caller.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::{AsContextMut, Store};

use super::failure::Failure;
use super::imports::PluginState;
use super::plugin::Plugin;
use super::types::{AnswerVerdict, CheckedRequest, Completion, RequestVerdict};
use super::wit::{self, Exports};
use super::{CallContext, PluginError};

/// A plugin instance serving one call.
pub(super) struct Instance {
    /// Counts the instance in `gateway_plugin_instances_active` while it lives.
    pub(super) _serving: super::stats::Serving,
    pub(super) store: Store<PluginState>,
    pub(super) exports: Exports,
    /// Declared after `store`, like `_slot`: an instance made ahead in the pool that copies
    /// images counts there until its store has given the slot back.
    pub(super) _copying: Option<super::prepared::CopyingSlot>,
    /// Declared after `store`: fields drop in order, so the permit returns only
    /// once the store has given its pool slot back.
    pub(super) _slot: OwnedSemaphorePermit,
}

impl Instance {
    /// [`Instance::settle`]s the call, then ends the instance.
    pub(super) fn finish<T>(
        self,
        plugin: &Plugin,
        ctx: &CallContext,
        result: wit::CallResult<T>,
    ) -> Result<T, PluginError> {
        let outcome = self.settle(plugin, ctx, result);
        self.retire(plugin);
        outcome
    }

    /// Ends the instance elsewhere than in the call, which is answered first: giving its slot
    /// back resets the pages it wrote (tens of µs; a Python plugin's, hundreds). A plugin
    /// whose instances are made ahead has them ended on the same thread; others once the task
    /// that ran them yields, after the answer is written (BENCHMARKS.md, issue 52).
    fn retire(self, plugin: &Plugin) {
        let Err(instance) = plugin.prepared.end(self) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { drop(instance) });
        }
    }

    /// The call's outcome in host types: its value, the plugin's own error,
    /// or how the instance failed.
    pub(super) fn settle<T>(
        &self,
        plugin: &Plugin,
        ctx: &CallContext,
        result: wit::CallResult<T>,
    ) -> Result<T, PluginError> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(PluginError::Provider(e)),
            Err(e) => {
                let failure = Failure::of(&e, self.store.data());
                // One line: the plugin logged its panic or exception itself (the SDKs do),
                // and the wasm backtrace is the interpreter's for a Python or JavaScript
                // plugin, hundreds of lines that say nothing of its code.
                tracing::error!(invocation_id = %ctx.invocation_id, plugin = %plugin.name,
                    "plugin crashed: {}", ctx.secrets.redact(&failure.to_string()));
                // A panic message may quote what the plugin was sent.
                let detail = format!("{e:?}");
                tracing::debug!(invocation_id = %ctx.invocation_id, plugin = %plugin.name,
                    "the plugin's crash: {}", ctx.secrets.redact(&detail));
                plugin.stats.crashed(&failure);
                Err(PluginError::Crashed(failure))
            }
        }
    }
}

/// A guard's instance for one request ([`super::PluginRuntime::guard`]): the
/// request's check, then the answer's, in the same sandbox.
pub struct GuardInstance {
    pub(super) instance: Instance,
    pub(super) plugin: Arc<Plugin>,
    pub(super) ctx: CallContext,
}

impl GuardInstance {
    /// Each check has the whole CPU budget, counted from when it starts: the
    /// epochs that passed while the instance waited for the provider are not its.
    fn start_check(&mut self) {
        self.instance.store.data_mut().cpu_ticks = 0;
        self.instance.store.set_epoch_deadline(1);
    }

    /// `check-request`. The request comes back whatever the verdict, so that the
    /// answer's check sees it without a copy.
    pub async fn check_request(
        &mut self,
        request: CheckedRequest,
    ) -> (CheckedRequest, Result<RequestVerdict, PluginError>) {
        self.start_check();
        let instance = &mut self.instance;
        let (request, result) = instance
            .exports
            .check_request(instance.store.as_context_mut(), request)
            .await;
        let verdict = instance.settle(&self.plugin, &self.ctx, result.map(Ok));
        (request, verdict)
    }

    /// `check-response`; the request and the answer come back.
    pub async fn check_response(
        &mut self,
        request: CheckedRequest,
        answer: Completion,
    ) -> (
        CheckedRequest,
        Completion,
        Result<AnswerVerdict, PluginError>,
    ) {
        self.start_check();
        let instance = &mut self.instance;
        let (request, answer, result) = instance
            .exports
            .check_response(instance.store.as_context_mut(), request, answer)
            .await;
        let verdict = instance.settle(&self.plugin, &self.ctx, result.map(Ok));
        (request, answer, verdict)
    }
}
