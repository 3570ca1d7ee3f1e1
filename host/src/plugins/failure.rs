//! How a plugin instance's failure is told: the words the caller, the records and the metrics
//! see.

use wasmtime::Trap;

use super::imports::PluginState;

/// Why a plugin instance stopped, in words safe to show the caller (the full
/// chain, with the wasm backtrace, goes to the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    #[error("it used up its CPU time budget")]
    CpuBudget,
    #[error("stack overflow")]
    StackOverflow,
    /// A Rust panic, or an exception the plugin did not catch (the SDKs end the instance
    /// with this trap once they have logged it): what it said is in the log, not here, since
    /// it may quote anything the plugin was sent.
    #[error("it crashed")]
    Panicked,
    /// The store's limiter refused to grow its memory to `asked` bytes.
    #[error("it went over its memory limit ({cause})")]
    OutOfMemory { asked: usize, cause: String },
    #[error("{0}")]
    Trap(Trap),
    #[error("{0}")]
    Other(String),
}

impl Failure {
    /// What `e`, returned by a call into the instance whose state is `state`, means.
    pub(super) fn of(e: &wasmtime::Error, state: &PluginState) -> Failure {
        // The outer messages are context ("error while executing at wasm
        // backtrace ..."); the cause says what happened.
        let cause = || e.root_cause().to_string();
        if let Some(asked) = state.limiter.refused() {
            return Failure::OutOfMemory {
                asked,
                cause: cause(),
            };
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => Failure::CpuBudget,
            Some(Trap::StackOverflow) => Failure::StackOverflow,
            Some(Trap::UnreachableCodeReached) => Failure::Panicked,
            Some(trap) => Failure::Trap(*trap),
            None => Failure::Other(cause()),
        }
    }
}
