//! The `log` import, and the plugin's stdout and stderr: both end up in the
//! gateway's log (target `plugin`) with the invocation id, redacted of the
//! request's keys and bounded so a plugin cannot flood the log.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use uuid::Uuid;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use super::PluginState;
use crate::plugins::wit::log;
use crate::redact::Secrets;

/// Longest log line a plugin may write; the rest is cut so a plugin cannot flood the logs.
const MAX_LOG_LINE: usize = 4096;
/// Most bytes of stdout/stderr one instance may send to the log.
const MAX_STDIO_BYTES: usize = 64 * 1024;

impl log::Host for PluginState {
    async fn enabled(&mut self, level: log::Level) -> bool {
        match level {
            log::Level::Trace => tracing::enabled!(target: "plugin", tracing::Level::TRACE),
            log::Level::Debug => tracing::enabled!(target: "plugin", tracing::Level::DEBUG),
            log::Level::Info => tracing::enabled!(target: "plugin", tracing::Level::INFO),
            log::Level::Warn => tracing::enabled!(target: "plugin", tracing::Level::WARN),
            log::Level::Error => tracing::enabled!(target: "plugin", tracing::Level::ERROR),
        }
    }

    async fn log(&mut self, level: log::Level, message: String) {
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let message = self.secrets.redact_owned(message);
        let (id, plugin) = (&self.invocation_id, &*self.plugin);
        match level {
            log::Level::Trace => {
                tracing::trace!(target: "plugin", invocation_id = %id, plugin, "{message}")
            }
            log::Level::Debug => {
                tracing::debug!(target: "plugin", invocation_id = %id, plugin, "{message}")
            }
            log::Level::Info => {
                tracing::info!(target: "plugin", invocation_id = %id, plugin, "{message}")
            }
            log::Level::Warn => {
                tracing::warn!(target: "plugin", invocation_id = %id, plugin, "{message}")
            }
            log::Level::Error => {
                tracing::error!(target: "plugin", invocation_id = %id, plugin, "{message}")
            }
        }
    }
}

/// The call an instance's stdout and stderr write for: set when the instance is made, or
/// when a call takes an instance made ahead of it.
pub(super) struct Caller(std::sync::Mutex<(Uuid, Secrets)>);

impl Caller {
    pub(super) fn new(invocation_id: Uuid, secrets: Secrets) -> Caller {
        Caller(std::sync::Mutex::new((invocation_id, secrets)))
    }

    pub(super) fn set(&self, invocation_id: Uuid, secrets: Secrets) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = (invocation_id, secrets);
    }
}

/// An instance's stdout and stderr, sharing one byte budget.
pub(super) fn stdio(caller: &Arc<Caller>, plugin: &Arc<str>) -> (LogStream, LogStream) {
    let budget = Arc::new(AtomicUsize::new(MAX_STDIO_BYTES));
    let stream = |stream| LogStream {
        line: Arc::new(LineBuffer {
            caller: caller.clone(),
            plugin: plugin.clone(),
            stream,
            pending: std::sync::Mutex::new(Vec::new()),
        }),
        budget: budget.clone(),
    };
    (stream("stdout"), stream("stderr"))
}

/// A plugin's stdout or stderr, sent to the log line by line with the
/// invocation id, up to a byte budget per instance.
#[derive(Clone)]
pub(super) struct LogStream {
    line: Arc<LineBuffer>,
    budget: Arc<AtomicUsize>,
}

/// One stream's unfinished line. Shared by every writer the guest opens on
/// the stream (Rust's unbuffered stderr opens one per write), so a line
/// written in pieces is still logged as one.
struct LineBuffer {
    caller: Arc<Caller>,
    plugin: Arc<str>,
    stream: &'static str,
    pending: std::sync::Mutex<Vec<u8>>,
}

impl LineBuffer {
    fn push(&self, bytes: &[u8]) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for &byte in bytes {
            if byte == b'\n' || pending.len() >= MAX_LOG_LINE {
                self.emit(&mut pending);
            }
            if byte != b'\n' {
                pending.push(byte);
            }
        }
    }

    fn emit(&self, pending: &mut Vec<u8>) {
        let text = String::from_utf8_lossy(pending);
        let caller = self.caller.0.lock().unwrap_or_else(|p| p.into_inner());
        let (invocation_id, secrets) = (&caller.0, &caller.1);
        let text = secrets.redact(text.trim_end());
        if !text.is_empty() {
            tracing::info!(target: "plugin", invocation_id = %invocation_id,
                plugin = %self.plugin, stream = self.stream, "{text}");
        }
        pending.clear();
    }
}

impl Drop for LineBuffer {
    /// The instance is gone: log what it left without a newline.
    fn drop(&mut self) {
        let mut pending = std::mem::take(self.pending.get_mut().unwrap_or_else(|p| p.into_inner()));
        self.emit(&mut pending);
    }
}

struct LogWriter(LogStream);

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LogWriter(self.clone()))
    }
}

impl tokio::io::AsyncWrite for LogWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        // Past the budget, output is accepted and dropped: a chatty plugin
        // must neither fail nor flood the log.
        let allowed = self
            .0
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left.saturating_sub(bytes.len()))
            })
            .unwrap_or(0)
            .min(bytes.len());
        self.0.line.push(&bytes[..allowed]);
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
