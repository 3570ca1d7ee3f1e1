//! Log lines for the operator, written by the gateway with the call's context.
//!
//! Never log provider API keys or whole request bodies: logs are not secret.
//! Off wasm (in native unit tests) the lines go to stderr.

#[cfg(target_arch = "wasm32")]
use crate::__private::gateway::provider::log as host;

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

/// How important a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Step-by-step detail.
    Trace,
    /// Detail for investigating a problem.
    Debug,
    /// Notable events of normal operation.
    Info,
    /// Something unexpected that the plugin worked around.
    Warn,
    /// A failure the operator should look at.
    Error,
}

/// Whether the gateway keeps lines of this severity. Check it before
/// building an expensive message:
///
/// ```no_run
/// use gateway_plugin_sdk::log;
/// # let body = vec![0u8; 3];
/// if log::enabled(log::Severity::Debug) {
///     log::debug(&format!("upstream answered {} bytes", body.len()));
/// }
/// ```
pub fn enabled(severity: Severity) -> bool {
    host_enabled(severity)
}

#[cfg(target_arch = "wasm32")]
fn host_level(severity: Severity) -> host::Level {
    match severity {
        Severity::Trace => host::Level::Trace,
        Severity::Debug => host::Level::Debug,
        Severity::Info => host::Level::Info,
        Severity::Warn => host::Level::Warn,
        Severity::Error => host::Level::Error,
    }
}

#[cfg(target_arch = "wasm32")]
fn emit(severity: Severity, msg: &str) {
    host::log(host_level(severity), msg);
}

#[cfg(target_arch = "wasm32")]
fn host_enabled(severity: Severity) -> bool {
    host::enabled(host_level(severity))
}

// Native builds have no host to call; stderr keeps test output readable.
#[cfg(not(target_arch = "wasm32"))]
fn emit(severity: Severity, msg: &str) {
    eprintln!("[plugin {severity:?}] {msg}");
}

#[cfg(not(target_arch = "wasm32"))]
fn host_enabled(_severity: Severity) -> bool {
    true
}
