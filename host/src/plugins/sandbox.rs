//! What a plugin instance may do: the host imports it gets (outbound HTTP,
//! the stream sink, logging) and the limits they enforce.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::gateway::provider::{http, log, sink, types};
use crate::redact::Secrets;

/// The largest memory limit a route may set; also the pooling allocator's slot size.
pub const MAX_MEMORY_LIMIT_BYTES: usize = 1024 * 1024 * 1024;
/// Longest log line a plugin may write; the rest is cut so a plugin cannot flood the logs.
const MAX_LOG_LINE: usize = 4096;
/// Most bytes of stdout/stderr one instance may send to the log.
const MAX_STDIO_BYTES: usize = 64 * 1024;

/// What one plugin call may consume. Each route has its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: usize,
    /// CPU time inside the plugin; time spent waiting in host calls does not count.
    pub cpu_time: Duration,
    pub connect_timeout: Duration,
    /// Until the upstream's response headers.
    pub first_byte_timeout: Duration,
    /// Between two chunks of an upstream body.
    pub idle_timeout: Duration,
    pub max_response_bytes: u64,
    /// Outbound requests one call may make.
    pub max_http_requests: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 64 * 1024 * 1024,
            cpu_time: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_response_bytes: 64 * 1024 * 1024,
            max_http_requests: 32,
        }
    }
}

/// Everything a route's plugin instances may reach and use.
#[derive(Debug)]
pub struct Sandbox {
    pub allowed: AllowedHosts,
    pub limits: Limits,
    /// The route's upstream connection pool for threads that are not serving workers.
    shared_client: reqwest::Client,
    /// One pool per serving thread ([`crate::worker`]), built on first use, so a
    /// request's upstream connection lives on the thread that serves it.
    worker_clients: Box<[OnceLock<reqwest::Client>]>,
    recent_urls: RecentUrls,
}

/// The last URLs the route's plugins asked for, parsed: plugins call the same
/// few over and over, and parsing one (host normalization included) cost ~3%
/// of a request's CPU.
#[derive(Default)]
struct RecentUrls(std::sync::Mutex<Vec<(String, reqwest::Url)>>);

impl RecentUrls {
    const KEPT: usize = 8;

    fn parse(&self, text: &str) -> Result<reqwest::Url, String> {
        let mut recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, url)) = recent.iter().find(|(seen, _)| seen == text) {
            return Ok(url.clone());
        }
        let url = reqwest::Url::parse(text).map_err(|e| e.to_string())?;
        if recent.len() == Self::KEPT {
            recent.remove(0);
        }
        recent.push((text.to_owned(), url.clone()));
        Ok(url)
    }
}

impl std::fmt::Debug for RecentUrls {
    // URLs may carry keys in their query: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecentUrls")
    }
}

impl Sandbox {
    pub fn new(allowed: AllowedHosts, limits: Limits) -> Result<Sandbox, String> {
        // reqwest is built without a default TLS provider; this process uses ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Sandbox {
            shared_client: build_client(&limits).map_err(|e| format!("HTTP client: {e}"))?,
            worker_clients: (0..crate::worker::count())
                .map(|_| OnceLock::new())
                .collect(),
            recent_urls: RecentUrls::default(),
            allowed,
            limits,
        })
    }

    /// The calling thread's client.
    fn client(&self) -> &reqwest::Client {
        let slot = crate::worker::current()
            .checked_sub(1)
            .and_then(|index| self.worker_clients.get(index));
        let Some(slot) = slot else {
            return &self.shared_client;
        };
        if let Some(client) = slot.get() {
            return client;
        }
        match build_client(&self.limits) {
            Ok(client) => slot.get_or_init(|| client),
            // The same settings built the shared client; should this fail now, share it.
            Err(_) => &self.shared_client,
        }
    }

    /// No network at all: for validating a plugin at load time.
    pub fn offline() -> Result<Sandbox, String> {
        Sandbox::new(AllowedHosts::none(), Limits::default())
    }
}

/// Idle upstream connections a worker keeps per route (and upstream host).
const MAX_IDLE_CONNECTIONS: usize = 64;

fn build_client(limits: &Limits) -> reqwest::Result<reqwest::Client> {
    // No redirects: a redirect could lead outside the allowed hosts.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(limits.connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        // Kept-alive connections beyond this are closed when a burst ends
        // instead of each holding its buffers (~30 KiB) for the idle timeout.
        .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
        .build()
}

/// The hosts a route's plugin may reach: those of its `base_url`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    origins: Vec<(String, String, u16)>,
}

impl AllowedHosts {
    pub fn none() -> AllowedHosts {
        AllowedHosts::default()
    }

    pub fn from_base_url(base_url: &str) -> Result<AllowedHosts, String> {
        let url = reqwest::Url::parse(base_url).map_err(|e| format!("not a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("only http and https URLs are allowed".into());
        }
        let host = url.host_str().ok_or("the URL has no host")?;
        let port = url.port_or_known_default().ok_or("the URL has no port")?;
        Ok(AllowedHosts {
            origins: vec![(url.scheme().to_owned(), host.to_ascii_lowercase(), port)],
        })
    }

    /// Adds `host:port`, or the origin of a URL.
    pub fn add(&mut self, entry: &str) -> Result<(), String> {
        let url = if entry.contains("://") {
            entry.to_owned()
        } else {
            format!("https://{entry}")
        };
        let mut extra = AllowedHosts::from_base_url(&url)?;
        if !entry.contains("://") {
            // A bare host:port allows both schemes.
            let (_, host, port) = extra.origins[0].clone();
            extra.origins.push(("http".to_owned(), host, port));
        }
        self.origins.append(&mut extra.origins);
        Ok(())
    }

    pub fn permits(&self, url: &reqwest::Url) -> bool {
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        self.origins.iter().any(|(scheme, allowed, allowed_port)| {
            scheme == url.scheme() && allowed.eq_ignore_ascii_case(host) && *allowed_port == port
        })
    }
}

/// Per-instance state: everything a host import can touch.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(super) store_limits: StoreLimits,
    sandbox: Arc<Sandbox>,
    http_requests: u32,
    sink: Option<mpsc::Sender<types::Chunk>>,
    pub(super) invocation_id: Uuid,
    pub(super) plugin: Arc<str>,
    /// Epoch ticks spent running plugin code (not waiting on host calls).
    pub(super) cpu_ticks: u64,
    secrets: Secrets,
}

/// A spawned task that ends with whoever awaits it (a cancelled plugin call
/// must not leave its upstream request running).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One upstream response body being read by a plugin.
pub struct IncomingBody {
    response: reqwest::Response,
    read: u64,
}

impl PluginState {
    pub(super) fn new(
        sandbox: Arc<Sandbox>,
        sink: Option<mpsc::Sender<types::Chunk>>,
        invocation_id: Uuid,
        plugin: Arc<str>,
        secrets: Secrets,
    ) -> PluginState {
        let budget = Arc::new(AtomicUsize::new(MAX_STDIO_BYTES));
        let stdio = |stream| LogStream {
            line: Arc::new(LineBuffer {
                invocation_id,
                plugin: plugin.clone(),
                secrets: secrets.clone(),
                stream,
                pending: std::sync::Mutex::new(Vec::new()),
            }),
            budget: budget.clone(),
        };
        // No arguments, environment, preopened directories or sockets: the
        // HTTP import is the only way out. Output goes to the log.
        let wasi = WasiCtx::builder()
            .stdout(stdio("stdout"))
            .stderr(stdio("stderr"))
            .build();
        PluginState {
            wasi,
            table: ResourceTable::new(),
            store_limits: StoreLimitsBuilder::new()
                .memory_size(sandbox.limits.memory_bytes)
                .trap_on_grow_failure(true)
                .build(),
            sandbox,
            http_requests: 0,
            sink,
            invocation_id,
            plugin,
            cpu_ticks: 0,
            secrets,
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

impl types::Host for PluginState {}

/// A reqwest error without its URL: plugin URLs may carry keys in their query.
fn transport_error(e: reqwest::Error) -> http::HttpError {
    let e = e.without_url();
    if e.is_timeout() {
        http::HttpError::Timeout(e.to_string())
    } else {
        http::HttpError::Transport(e.to_string())
    }
}

impl http::Host for PluginState {
    async fn send(&mut self, request: http::Request) -> Result<http::Response, http::HttpError> {
        let url = self
            .sandbox
            .recent_urls
            .parse(&request.url)
            .map_err(|e| http::HttpError::InvalidRequest(format!("bad URL: {e}")))?;
        self.http_requests += 1;
        if self.http_requests > self.sandbox.limits.max_http_requests {
            tracing::warn!(invocation_id = %self.invocation_id, plugin = %self.plugin,
                "plugin exceeded its outbound request limit");
            return Err(http::HttpError::ForbiddenHost(format!(
                "more than {} upstream requests in one call",
                self.sandbox.limits.max_http_requests
            )));
        }
        if !self.sandbox.allowed.permits(&url) {
            let host = url.host_str().unwrap_or("").to_owned();
            tracing::warn!(invocation_id = %self.invocation_id, plugin = %self.plugin, %host,
                "plugin tried to reach a host its route does not allow");
            return Err(http::HttpError::ForbiddenHost(host));
        }
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| http::HttpError::InvalidRequest("bad method".into()))?;
        let mut headers = reqwest::header::HeaderMap::with_capacity(request.headers.len());
        for (name, value) in &request.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| http::HttpError::InvalidRequest(format!("bad header name {name}")))?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                // Never echo the value: it is often a key.
                http::HttpError::InvalidRequest(format!("bad value for header {name}"))
            })?;
            headers.append(name, value);
        }
        let pending = self
            .sandbox
            .client()
            .request(method, url)
            .headers(headers)
            .body(request.body)
            .send();
        // Sending runs as a task of its own rather than on the plugin's fiber:
        // the HTTP client's deep call stack would otherwise stay resident in
        // every pooled fiber stack (1000 streams: 188 MiB instead of 173).
        let sending = AbortOnDrop(tokio::spawn(tokio::time::timeout(
            self.sandbox.limits.first_byte_timeout,
            pending,
        )));
        let response = sending
            .await
            .map_err(|e| http::HttpError::Transport(format!("the request task failed: {e}")))?
            .map_err(|_| http::HttpError::Timeout("no answer from the upstream".into()))?
            .map_err(transport_error)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = self
            .table
            .push(IncomingBody { response, read: 0 })
            .map_err(|e| http::HttpError::Transport(e.to_string()))?;
        Ok(http::Response {
            status,
            headers,
            body,
        })
    }
}

impl http::HostIncomingBody for PluginState {
    async fn read(
        &mut self,
        body: Resource<IncomingBody>,
    ) -> Result<Option<Vec<u8>>, http::HttpError> {
        let limits = self.sandbox.limits;
        let body = self
            .table
            .get_mut(&body)
            .map_err(|e| http::HttpError::InvalidRequest(e.to_string()))?;
        let chunk = tokio::time::timeout(limits.idle_timeout, body.response.chunk())
            .await
            .map_err(|_| http::HttpError::Timeout("the upstream stopped sending".into()))?
            .map_err(transport_error)?;
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        body.read += chunk.len() as u64;
        if body.read > limits.max_response_bytes {
            return Err(http::HttpError::TooLarge(limits.max_response_bytes));
        }
        Ok(Some(chunk.to_vec()))
    }

    async fn drop(&mut self, body: Resource<IncomingBody>) -> wasmtime::Result<()> {
        self.table.delete(body)?;
        Ok(())
    }
}

impl sink::Host for PluginState {
    async fn send(&mut self, chunk: types::Chunk) -> Result<(), ()> {
        match &self.sink {
            Some(sink) => sink.send(chunk).await.map_err(|_| ()),
            // `complete` (not streaming) has no caller to send to; the text is in its result.
            None => Ok(()),
        }
    }
}

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

/// A plugin's stdout or stderr, sent to the log line by line with the
/// invocation id, up to a byte budget per instance.
#[derive(Clone)]
struct LogStream {
    line: Arc<LineBuffer>,
    budget: Arc<AtomicUsize>,
}

/// One stream's unfinished line. Shared by every writer the guest opens on
/// the stream (Rust's unbuffered stderr opens one per write), so a line
/// written in pieces is still logged as one.
struct LineBuffer {
    invocation_id: Uuid,
    plugin: Arc<str>,
    secrets: Secrets,
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
        let text = self.secrets.redact(text.trim_end());
        if !text.is_empty() {
            tracing::info!(target: "plugin", invocation_id = %self.invocation_id,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_urls_are_parsed_once_and_bounded() {
        let recent = RecentUrls::default();
        let url = recent
            .parse("http://127.0.0.1:9/v1/chat/completions")
            .unwrap();
        assert_eq!(url.path(), "/v1/chat/completions");
        assert_eq!(recent.parse(url.as_str()).unwrap(), url);
        for port in 0..20 {
            recent.parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        }
        assert_eq!(recent.0.lock().unwrap().len(), RecentUrls::KEPT);
        assert!(recent.parse("not a url").is_err());
    }

    #[test]
    fn only_the_base_url_origin_is_allowed() {
        let allowed = AllowedHosts::from_base_url("https://api.openai.com/v1").unwrap();
        let ok = |u: &str| allowed.permits(&reqwest::Url::parse(u).unwrap());
        assert!(ok("https://api.openai.com/v1/chat/completions"));
        assert!(ok("https://API.openai.com:443/v1/embeddings"));
        assert!(!ok("http://api.openai.com/v1/chat/completions"));
        assert!(!ok("https://api.openai.com:8443/v1"));
        assert!(!ok("https://evil.example/v1"));
        assert!(!ok("https://api.openai.com.evil.example/v1"));
        assert!(!AllowedHosts::none().permits(&reqwest::Url::parse("http://127.0.0.1/").unwrap()));
        assert!(AllowedHosts::from_base_url("ftp://x/").is_err());
    }
}
