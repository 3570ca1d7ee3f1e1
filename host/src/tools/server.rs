//! One remote MCP server as the gateway's client of it: the era it speaks (found out once, by
//! the spec's probe: `server/discover` at the stateless revision, else the `initialize`
//! handshake), the session of a session-era server (made again when the server forgets it),
//! its tool list (kept for `tools_list_ttl_secs`, dropped at a `notifications/tools/list_changed`)
//! and the requests themselves, JSON or SSE answers alike, within the server's timeout and the
//! config's byte bound.
//!
//! Its HTTP client is reqwest's, not the plugins' hand-tuned pools: tool calls are few next
//! to model calls, and reqwest brings proxies, timeouts and a no-redirect policy as they are.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use serde_json::{Map, Value, json};

use super::{ServerError, Tool, wire};
use crate::redact::Secrets;

/// Pages of `tools/list` read from one server at most: a server whose cursor never ends does
/// not hold the gateway.
const MAX_LIST_PAGES: usize = 100;
/// Tools of one server at most.
const MAX_TOOLS: usize = 10_000;

/// The era a server speaks, once found out.
#[derive(Debug, Clone)]
enum Era {
    Unknown,
    Modern,
    /// A session-era server: the version it agreed to, and the session it gave (none from a
    /// server without sessions).
    Session {
        version: String,
        session: Option<String>,
    },
}

struct Listed {
    tools: Arc<[Tool]>,
    at: Instant,
}

/// What a request of the gateway adds to its upstream request.
#[derive(Default, Clone)]
pub struct Extra {
    /// The call's `traceparent` (its `execute_tool` span's, or the caller's), as the
    /// upstream request carries it.
    pub traceparent: Option<hyper::header::HeaderValue>,
    /// The `Mcp-Param-*` headers of a tool call to a server of the stateless era (its tool's
    /// `x-mcp-header` arguments).
    pub headers: Vec<(String, String)>,
}

/// One `[mcp_servers.ID]` with a `url`.
pub struct RemoteServer {
    pub id: String,
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    /// The values of `headers_env`, kept out of what the server's answers bring back.
    pub secrets: Secrets,
    timeout: Duration,
    max_answer_bytes: usize,
    list_ttl: Duration,
    client: reqwest::Client,
    era: tokio::sync::Mutex<Era>,
    listed: Mutex<Option<Listed>>,
    /// One refresh of the list at a time; the others wait for its result.
    listing: tokio::sync::Mutex<()>,
    next_id: std::sync::atomic::AtomicU64,
}

/// What a server is built from: its config and the bounds of `[mcp]`.
pub struct Settings<'a> {
    pub id: &'a str,
    pub url: &'a crate::config::types::BaseUrl,
    pub config: &'a crate::config::McpServerConfig,
    pub timeout: Duration,
    pub max_answer_bytes: usize,
    pub list_ttl: Duration,
}

impl RemoteServer {
    /// The server of `settings`; its `headers_env` read from the environment now. A variable
    /// that is not set is a config error, as a route's `api_key_env` is.
    pub fn new(settings: Settings<'_>) -> Result<RemoteServer, ServerError> {
        let config = settings.config;
        let url = reqwest::Url::parse(settings.url.as_str())
            .map_err(|e| ServerError::Config(format!("url: {e}")))?;
        let mut headers = reqwest::header::HeaderMap::new();
        let mut secrets = Vec::new();
        for (name, var) in &config.headers_env {
            let value = std::env::var(var).map_err(|_| {
                ServerError::Config(format!(
                    "headers_env.{name}: the environment variable {var} is not set"
                ))
            })?;
            let header =
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    ServerError::Config(format!("headers_env: {name:?} is not a header name"))
                })?;
            let mut value_header =
                reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                    ServerError::Config(format!("headers_env.{name}: {var} is not a header value"))
                })?;
            value_header.set_sensitive(true);
            headers.insert(header, value_header);
            // A bearer token is also redacted on its own, as it would be echoed.
            if let Some((_, token)) = value.split_once(' ') {
                secrets.push(token.trim().to_owned());
            }
            secrets.push(value);
        }
        let client = reqwest::Client::builder()
            // Server URLs come from the config alone: a redirect could point anywhere.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| ServerError::Config(format!("HTTP client: {e}")))?;
        Ok(RemoteServer {
            id: settings.id.to_owned(),
            url,
            headers,
            secrets: Secrets::new(secrets.iter().map(|s| Some(s.as_str()))),
            timeout: settings.timeout,
            max_answer_bytes: settings.max_answer_bytes,
            list_ttl: settings.list_ttl,
            client,
            era: tokio::sync::Mutex::new(Era::Unknown),
            listed: Mutex::new(None),
            listing: tokio::sync::Mutex::new(()),
            next_id: std::sync::atomic::AtomicU64::new(1),
        })
    }

    /// The server's tools, from the kept list while it is fresh.
    pub async fn tools(&self, extra: &Extra) -> Result<Arc<[Tool]>, ServerError> {
        if let Some(tools) = self.fresh_list() {
            return Ok(tools);
        }
        let _one = self.listing.lock().await;
        // Another request may have listed them while this one waited.
        if let Some(tools) = self.fresh_list() {
            return Ok(tools);
        }
        let tools: Arc<[Tool]> = self.list(extra).await?.into();
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) = Some(Listed {
            tools: tools.clone(),
            at: Instant::now(),
        });
        Ok(tools)
    }

    fn fresh_list(&self) -> Option<Arc<[Tool]>> {
        let listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        listed
            .as_ref()
            .filter(|listed| listed.at.elapsed() < self.list_ttl)
            .map(|listed| listed.tools.clone())
    }

    /// Drops the kept tool list: the server said it changed, or named a tool unknown.
    pub fn forget_tools(&self) {
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    async fn list(&self, extra: &Extra) -> Result<Vec<Tool>, ServerError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let mut params = Map::new();
            if let Some(cursor) = cursor.take() {
                params.insert("cursor".into(), Value::String(cursor));
            }
            let result = self.request("tools/list", params, extra).await?;
            let page = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| ServerError::Garbage("tools/list has no tools".into()))?;
            for definition in page {
                let Some(name) = definition.get("name").and_then(Value::as_str) else {
                    tracing::warn!(server = %self.id, "a tool without a name is left out");
                    continue;
                };
                if tools.len() >= MAX_TOOLS {
                    tracing::warn!(server = %self.id, "more than {MAX_TOOLS} tools: the rest are left out");
                    return Ok(tools);
                }
                tools.push(Tool {
                    name: name.to_owned(),
                    definition: definition.clone(),
                });
            }
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => return Ok(tools),
            }
        }
        tracing::warn!(server = %self.id, "tools/list went on for {MAX_LIST_PAGES} pages: the rest are left out");
        Ok(tools)
    }

    /// Calls the server's tool `name`; the result object as the server sent it.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<Value>,
        meta: Option<&Map<String, Value>>,
        extra: &Extra,
    ) -> Result<Value, ServerError> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.to_owned()));
        if let Some(arguments) = arguments {
            params.insert("arguments".into(), arguments);
        }
        if let Some(meta) = meta {
            params.insert("_meta".into(), Value::Object(meta.clone()));
        }
        self.request("tools/call", params, extra).await
    }

    /// Sends `method` in the era the server speaks, finding it out first; again once, in a
    /// new session or era, when the server forgot the session or changed its version.
    async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        extra: &Extra,
    ) -> Result<Value, ServerError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let attempt = async {
            let mut again = true;
            loop {
                let era = self.era(extra).await?;
                let outcome = match &era {
                    Era::Modern => self.modern(method, params.clone(), extra).await,
                    Era::Session { version, session } => {
                        self.in_session(method, params.clone(), version, session.as_deref(), extra)
                            .await
                    }
                    Era::Unknown => Err(Retry::Renegotiate),
                };
                match outcome {
                    Err(Retry::Renegotiate) if again => {
                        again = false;
                        *self.era.lock().await = Era::Unknown;
                    }
                    Err(Retry::Renegotiate) => {
                        return Err(ServerError::Garbage(
                            "the server refused the session or version it had agreed to".into(),
                        ));
                    }
                    Err(Retry::Failed(error)) => return Err(error),
                    Ok(result) => return Ok(result),
                }
            }
        };
        tokio::time::timeout_at(deadline, attempt)
            .await
            .map_err(|_| ServerError::Timeout(self.timeout.as_secs()))?
    }

    async fn era(&self, extra: &Extra) -> Result<Era, ServerError> {
        let mut era = self.era.lock().await;
        if matches!(*era, Era::Unknown) {
            *era = self.negotiate(extra).await?;
            tracing::info!(server = %self.id, era = ?*era, "MCP server era found");
        }
        Ok(era.clone())
    }

    /// The spec's probe: `server/discover` at the stateless revision; a server that does not
    /// answer it as one of that revision gets the `initialize` handshake.
    async fn negotiate(&self, extra: &Extra) -> Result<Era, ServerError> {
        match self.modern("server/discover", Map::new(), extra).await {
            Ok(result) => {
                let versions = result.get("supportedVersions").and_then(Value::as_array);
                if versions.is_some_and(|v| v.iter().any(|v| v == wire::MODERN_VERSION)) {
                    return Ok(Era::Modern);
                }
            }
            Err(Retry::Failed(ServerError::Unreachable(e))) => {
                return Err(ServerError::Unreachable(e));
            }
            Err(Retry::Failed(ServerError::Rpc { code, message, .. }))
                if code == wire::UNSUPPORTED_PROTOCOL_VERSION =>
            {
                // A server of the stateless era that does not speak its one revision the
                // gateway knows; the handshake will tell whether it speaks an older one.
                tracing::info!(server = %self.id, "server/discover refused the version: {message}");
            }
            Err(_) => {}
        }
        self.initialize(extra).await
    }

    async fn initialize(&self, extra: &Extra) -> Result<Era, ServerError> {
        let params = json!({
            "protocolVersion": wire::HANDSHAKE_VERSIONS[0],
            "capabilities": {},
            "clientInfo": {"name": "gateway", "version": env!("CARGO_PKG_VERSION")},
        });
        let body = self.envelope("initialize", params);
        let request = self.post(&body, extra, None, None);
        let (result, session) = match self.send(request, body_id(&body)).await {
            Ok(answer) => (answer.result?, answer.session),
            Err(error) => return Err(error),
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|v| wire::is_handshake_version(v) || *v == "2024-11-05")
            .ok_or_else(|| {
                ServerError::Garbage(format!(
                    "initialize answered no protocol version the gateway speaks ({})",
                    result.get("protocolVersion").unwrap_or(&Value::Null)
                ))
            })?
            .to_owned();
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let request = self.post(&notification, extra, Some(&version), session.as_deref());
        let response = request
            .send()
            .await
            .map_err(|e| ServerError::Unreachable(describe(&e)))?;
        if !response.status().is_success() {
            return Err(ServerError::Http(response.status().as_u16()));
        }
        Ok(Era::Session { version, session })
    }

    async fn modern(
        &self,
        method: &str,
        mut params: Map<String, Value>,
        extra: &Extra,
    ) -> Result<Value, Retry> {
        let meta = params.remove("_meta").and_then(|meta| match meta {
            Value::Object(meta) => Some(meta),
            _ => None,
        });
        params.insert("_meta".into(), wire::modern_meta(meta.as_ref()));
        let name = (method == "tools/call")
            .then(|| params.get("name").and_then(Value::as_str))
            .flatten()
            .map(wire::encode_header_value);
        let body = self.envelope(method, Value::Object(params));
        let mut request = self
            .post(&body, extra, Some(wire::MODERN_VERSION), None)
            .header(wire::METHOD_HEADER, method);
        if let Some(name) = name {
            request = request.header(wire::NAME_HEADER, name);
            for (header, value) in &extra.headers {
                request = request.header(header.as_str(), value.as_str());
            }
        }
        let answer = self.send(request, body_id(&body)).await?;
        match answer.result {
            Err(ServerError::Rpc { code, .. })
                if code == wire::UNSUPPORTED_PROTOCOL_VERSION && method != "server/discover" =>
            {
                Err(Retry::Renegotiate)
            }
            result => result.map_err(Retry::Failed),
        }
    }

    async fn in_session(
        &self,
        method: &str,
        params: Map<String, Value>,
        version: &str,
        session: Option<&str>,
        extra: &Extra,
    ) -> Result<Value, Retry> {
        let body = self.envelope(method, Value::Object(params));
        let request = self.post(&body, extra, Some(version), session);
        match self.send(request, body_id(&body)).await {
            // The server forgot the session (it restarted, or ended it): a new one.
            Err(ServerError::Http(404)) if session.is_some() => Err(Retry::Renegotiate),
            Err(error) => Err(Retry::Failed(error)),
            Ok(answer) => answer.result.map_err(Retry::Failed),
        }
    }

    fn envelope(&self, method: &str, params: Value) -> Value {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    fn post(
        &self,
        body: &Value,
        extra: &Extra,
        version: Option<&str>,
        session: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(version) = version {
            request = request.header(wire::PROTOCOL_VERSION_HEADER, version);
        }
        if let Some(session) = session {
            request = request.header(wire::SESSION_HEADER, session);
        }
        if let Some(traceparent) = &extra.traceparent {
            request = request.header("traceparent", traceparent.clone());
        }
        request
    }

    /// Sends `request` and reads the answer to the request of `id`: a JSON body, or the SSE
    /// stream's event that answers it (the notifications before it are read past; a tool
    /// list change among them drops the kept list).
    async fn send(&self, request: reqwest::RequestBuilder, id: u64) -> Result<Answer, ServerError> {
        let mut response = request
            .send()
            .await
            .map_err(|e| ServerError::Unreachable(describe(&e)))?;
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get(wire::SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_sse && status == 200 {
            return self.read_stream(&mut response, id, session).await;
        }
        let body = self.read_body(&mut response).await?;
        let message: Option<Value> = serde_json::from_slice(&body).ok();
        match message.as_ref().and_then(|m| reply_to(m, id)) {
            Some(result) => Ok(Answer { result, session }),
            None if !(200..300).contains(&status) => Err(ServerError::Http(status)),
            None => Err(ServerError::Garbage(format!(
                "HTTP {status} with no JSON-RPC answer to the request"
            ))),
        }
    }

    async fn read_body(&self, response: &mut reqwest::Response) -> Result<Bytes, ServerError> {
        let mut body = BytesMut::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ServerError::Unreachable(describe(&e)))?
        {
            if body.len() + chunk.len() > self.max_answer_bytes {
                return Err(ServerError::TooLarge(self.max_answer_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }

    async fn read_stream(
        &self,
        response: &mut reqwest::Response,
        id: u64,
        session: Option<String>,
    ) -> Result<Answer, ServerError> {
        let mut events = SseEvents::default();
        let mut read = 0usize;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ServerError::Unreachable(describe(&e)))?
        {
            read += chunk.len();
            if read > self.max_answer_bytes {
                return Err(ServerError::TooLarge(self.max_answer_bytes));
            }
            for data in events.push(&chunk) {
                let Ok(message) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if message.get("method").and_then(Value::as_str)
                    == Some("notifications/tools/list_changed")
                {
                    self.forget_tools();
                }
                if let Some(result) = reply_to(&message, id) {
                    return Ok(Answer { result, session });
                }
            }
        }
        Err(ServerError::Garbage(
            "the event stream ended without an answer".into(),
        ))
    }
}

/// A request that should be sent again in a new session or era, or the error it ended with.
enum Retry {
    Renegotiate,
    Failed(ServerError),
}

impl From<ServerError> for Retry {
    fn from(error: ServerError) -> Retry {
        Retry::Failed(error)
    }
}

struct Answer {
    result: Result<Value, ServerError>,
    session: Option<String>,
}

fn body_id(body: &Value) -> u64 {
    body.get("id").and_then(Value::as_u64).unwrap_or(0)
}

/// The answer `message` gives to the request of `id`, if it is that answer.
fn reply_to(message: &Value, id: u64) -> Option<Result<Value, ServerError>> {
    if message.get("id").and_then(Value::as_u64) != Some(id) {
        return None;
    }
    if let Some(result) = message.get("result") {
        return Some(match result {
            Value::Object(_) => Ok(result.clone()),
            _ => Err(ServerError::Garbage(
                "a result that is not an object".into(),
            )),
        });
    }
    let error = message.get("error")?;
    Some(Err(ServerError::Rpc {
        code: error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(wire::INTERNAL_ERROR),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        data: error.get("data").cloned(),
    }))
}

/// reqwest's error with its cause: "error sending request" alone does not say
/// "connection refused".
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Server-Sent Events cut from a byte stream: each event's `data` lines joined.
#[derive(Default)]
struct SseEvents {
    pending: Vec<u8>,
}

impl SseEvents {
    fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some((end, skip)) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end + skip).take(end).collect();
            let text = String::from_utf8_lossy(&event);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| data.strip_prefix(' ').unwrap_or(data))
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        events
    }
}

/// Where the first event in `bytes` ends, and the length of the blank line that ends it.
fn event_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = bytes
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| (at, 2));
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_across_chunks() {
        let mut events = SseEvents::default();
        assert!(events.push(b"event: message\r\ndata: {\"a\"").is_empty());
        assert_eq!(
            events.push(b":1}\r\n\r\n: ping\n\ndata: x\n"),
            ["{\"a\":1}"]
        );
        assert_eq!(events.push(b"data: y\n\n"), ["x\ny"]);
    }

    #[test]
    fn replies() {
        let ok = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}});
        assert!(matches!(reply_to(&ok, 3), Some(Ok(_))));
        assert!(reply_to(&ok, 4).is_none());
        let error = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "no"}});
        assert!(matches!(
            reply_to(&error, 3),
            Some(Err(ServerError::Rpc { code: -32602, .. }))
        ));
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/progress"});
        assert!(reply_to(&notification, 3).is_none());
    }
}
