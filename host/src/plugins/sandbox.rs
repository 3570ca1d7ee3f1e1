//! What a plugin instance may do: the host imports it gets (outbound HTTP,
//! the stream sink, logging) and the limits they enforce.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::gateway::provider::{http, log, sink, types};

/// Most bytes one plugin may read from one upstream response.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;
/// Longest wait for the upstream's headers, or for the next chunk of its body.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest log line a plugin may write; the rest is cut so a plugin cannot flood the logs.
const MAX_LOG_LINE: usize = 4096;
/// Memory one instance may use.
pub const MAX_MEMORY_BYTES: usize = 64 * 1024 * 1024;

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
    pub(super) limits: StoreLimits,
    client: reqwest::Client,
    allowed: Arc<AllowedHosts>,
    sink: Option<mpsc::Sender<types::Chunk>>,
    pub(super) invocation_id: Uuid,
    pub(super) plugin: Arc<str>,
    /// Epoch ticks spent running plugin code (not waiting on host calls).
    pub(super) cpu_ticks: u64,
}

/// One upstream response body being read by a plugin.
pub struct IncomingBody {
    response: reqwest::Response,
    read: u64,
}

impl PluginState {
    pub(super) fn new(
        client: reqwest::Client,
        allowed: Arc<AllowedHosts>,
        sink: Option<mpsc::Sender<types::Chunk>>,
        invocation_id: Uuid,
        plugin: Arc<str>,
    ) -> PluginState {
        PluginState {
            // No arguments, environment, preopened directories or sockets: the
            // HTTP import is the only way out.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(MAX_MEMORY_BYTES)
                .trap_on_grow_failure(true)
                .build(),
            client,
            allowed,
            sink,
            invocation_id,
            plugin,
            cpu_ticks: 0,
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
        let url = reqwest::Url::parse(&request.url)
            .map_err(|e| http::HttpError::InvalidRequest(format!("bad URL: {e}")))?;
        if !self.allowed.permits(&url) {
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
            .client
            .request(method, url)
            .headers(headers)
            .body(request.body)
            .send();
        let response = tokio::time::timeout(IDLE_TIMEOUT, pending)
            .await
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
        let body = self
            .table
            .get_mut(&body)
            .map_err(|e| http::HttpError::InvalidRequest(e.to_string()))?;
        let chunk = tokio::time::timeout(IDLE_TIMEOUT, body.response.chunk())
            .await
            .map_err(|_| http::HttpError::Timeout("the upstream stopped sending".into()))?
            .map_err(transport_error)?;
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        body.read += chunk.len() as u64;
        if body.read > MAX_RESPONSE_BYTES {
            return Err(http::HttpError::TooLarge(MAX_RESPONSE_BYTES));
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
    async fn log(&mut self, level: log::Level, message: String) {
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
