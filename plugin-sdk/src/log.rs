//! Log lines for the operator, written by the gateway with the call's context.
//!
//! Never log provider API keys or whole request bodies: logs are not secret.
//! Off wasm (in native unit tests) the lines go to stderr.

#[cfg(target_arch = "wasm32")]
use crate::__private::gateway::provider::log::{Level, log};

/// Logs at trace level: step-by-step detail, normally filtered out.
pub fn trace(msg: &str) {
    emit(Severity::Trace, msg);
}

/// Logs at debug level: detail useful when investigating a problem.
pub fn debug(msg: &str) {
    emit(Severity::Debug, msg);
}

/// Logs at info level: notable events of normal operation.
pub fn info(msg: &str) {
    emit(Severity::Info, msg);
}

/// Logs at warn level: something unexpected that the plugin worked around.
pub fn warn(msg: &str) {
    emit(Severity::Warn, msg);
}

/// Logs at error level: a failure the operator should look at.
pub fn error(msg: &str) {
    emit(Severity::Error, msg);
}

#[derive(Debug, Clone, Copy)]
enum Severity {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

#[cfg(target_arch = "wasm32")]
fn emit(severity: Severity, msg: &str) {
    let level = match severity {
        Severity::Trace => Level::Trace,
        Severity::Debug => Level::Debug,
        Severity::Info => Level::Info,
        Severity::Warn => Level::Warn,
        Severity::Error => Level::Error,
    };
    log(level, msg);
}

// Native builds have no host to call; stderr keeps test output readable.
#[cfg(not(target_arch = "wasm32"))]
fn emit(severity: Severity, msg: &str) {
    eprintln!("[plugin {severity:?}] {msg}");
}
