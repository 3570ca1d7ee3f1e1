//! One remote MCP server as the gateway's client of it: the era it speaks (found out once, by
//! the spec's probe: `server/discover` at the stateless revision, else the `initialize`
//! handshake), the session of a session-era server (made again when the server forgets it),
//! its tool list (kept for `tools_list_ttl_secs`, dropped at a `notifications/tools/list_changed`
//! in an answer or on the stream [`super::listen`] keeps open) and the requests themselves,
//! JSON or SSE answers alike, within the server's timeout and the config's byte bound; a
//! call's progress notifications go on to the caller.
//!
//! Its HTTP client is reqwest's, not the plugins' hand-tuned pools: tool calls are few next
//! to model calls, and reqwest brings proxies, timeouts and a no-redirect policy as they are.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde_json::{Map, Value, json};

use super::link::{Link, SseEvents, describe};
use super::listen::{KeptList, Listed, Opens, forget};
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

/// What a request of the gateway adds to its upstream request.
#[derive(Default, Clone)]
pub struct Extra {
    /// The call's `traceparent` (its `execute_tool` span's, or the caller's), as the
    /// upstream request carries it.
    pub traceparent: Option<hyper::header::HeaderValue>,
    /// The `Mcp-Param-*` headers of a tool call to a server of the stateless era (its tool's
    /// `x-mcp-header` arguments).
    pub headers: Vec<(String, String)>,
    /// Where the call's `notifications/progress` go, each as the caller's SSE frame, when
    /// the caller asked for progress (a `progressToken`, which reaches the server with the
    /// rest of its `_meta`).
    pub progress: Option<tokio::sync::mpsc::Sender<Bytes>>,
}

/// One `[mcp_servers.ID]` with a `url`.
pub struct RemoteServer {
    pub id: String,
    link: Arc<Link>,
    /// The values of `headers_env`, kept out of what the server's answers bring back.
    pub secrets: Secrets,
    timeout: Duration,
    list_ttl: Duration,
    era: tokio::sync::Mutex<Era>,
    listed: Arc<KeptList>,
    /// One refresh of the list at a time; the others wait for its result.
    listing: tokio::sync::Mutex<()>,
    next_id: std::sync::atomic::AtomicU64,
    /// The task that holds the server's notification stream open, for the era and session
    /// found last; ended with the server.
    listener: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.get_mut().ok().and_then(Option::take) {
            listener.abort();
        }
    }
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
            link: Arc::new(Link::new(
                settings.id.to_owned(),
                url,
                headers,
                client,
                settings.max_answer_bytes,
            )),
            secrets: Secrets::new(secrets.iter().map(|s| Some(s.as_str()))),
            timeout: settings.timeout,
            list_ttl: settings.list_ttl,
            era: tokio::sync::Mutex::new(Era::Unknown),
            listed: Arc::new(Mutex::new(None)),
            listing: tokio::sync::Mutex::new(()),
            next_id: std::sync::atomic::AtomicU64::new(1),
            listener: Mutex::new(None),
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
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Listed::now(tools.clone()));
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
        forget(&self.listed);
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
            let (found, announces) = self.negotiate(extra).await?;
            tracing::info!(server = %self.id, era = ?found, announces, "MCP server era found");
            *era = found;
            self.listen(&era, announces);
        }
        Ok(era.clone())
    }

    /// Holds the notification stream of the era and session just found open (and ends the
    /// one of the last), when the server said it announces tool list changes.
    fn listen(&self, era: &Era, announces: bool) {
        let opens = match era {
            Era::Modern => Some(Opens::Subscription),
            Era::Session {
                version,
                session: Some(session),
            } => Some(Opens::SessionStream {
                version: version.clone(),
                session: session.clone(),
            }),
            // A server without sessions has no stream to name.
            Era::Session { session: None, .. } | Era::Unknown => None,
        };
        let listener = opens
            .filter(|_| announces)
            .map(|opens| super::listen::spawn(self.link.clone(), opens, &self.listed));
        let mut slot = self.listener.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = std::mem::replace(&mut *slot, listener) {
            previous.abort();
        }
    }

    /// The spec's probe: `server/discover` at the stateless revision; a server that does not
    /// answer it as one of that revision gets the `initialize` handshake. With the era,
    /// whether the server announces tool list changes (`tools.listChanged`).
    async fn negotiate(&self, extra: &Extra) -> Result<(Era, bool), ServerError> {
        match self.modern("server/discover", Map::new(), extra).await {
            Ok(result) => {
                let versions = result.get("supportedVersions").and_then(Value::as_array);
                if versions.is_some_and(|v| v.iter().any(|v| v == wire::MODERN_VERSION)) {
                    return Ok((Era::Modern, announces_changes(&result)));
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

    async fn initialize(&self, extra: &Extra) -> Result<(Era, bool), ServerError> {
        let params = json!({
            "protocolVersion": wire::HANDSHAKE_VERSIONS[0],
            "capabilities": {},
            "clientInfo": {"name": "gateway", "version": env!("CARGO_PKG_VERSION")},
        });
        let body = self.envelope("initialize", params);
        let request = self.post(&body, extra, None, None);
        let (result, session) = match self.send(request, body_id(&body), extra).await {
            Ok(answer) => (answer.result?, answer.session),
            // Not a Streamable HTTP server: most likely one of the 2024-11-05 HTTP+SSE
            // transport (a GET endpoint), which the gateway does not speak.
            Err(ServerError::Http(status @ (404 | 405))) => {
                return Err(ServerError::Garbage(format!(
                    "initialize answered HTTP {status}: the url is not a Streamable HTTP MCP endpoint (the deprecated 2024-11-05 HTTP+SSE transport is not served)"
                )));
            }
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
        Ok((
            Era::Session { version, session },
            announces_changes(&result),
        ))
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
        let answer = self.send(request, body_id(&body), extra).await?;
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
        match self.send(request, body_id(&body), extra).await {
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
        self.link
            .post(body, extra.traceparent.as_ref(), version, session)
    }

    /// Sends `request` and reads the answer to the request of `id`: a JSON body, or the SSE
    /// stream's event that answers it (the notifications before it are read past; a tool
    /// list change among them drops the kept list, and progress goes to `extra.progress`).
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        id: u64,
        extra: &Extra,
    ) -> Result<Answer, ServerError> {
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
            return self.read_stream(&mut response, id, session, extra).await;
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
            if body.len() + chunk.len() > self.link.max_answer_bytes {
                return Err(ServerError::TooLarge(self.link.max_answer_bytes));
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
        extra: &Extra,
    ) -> Result<Answer, ServerError> {
        let mut events = SseEvents::default();
        let mut read = 0usize;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ServerError::Unreachable(describe(&e)))?
        {
            read += chunk.len();
            if read > self.link.max_answer_bytes {
                return Err(ServerError::TooLarge(self.link.max_answer_bytes));
            }
            for data in events.push(&chunk) {
                let Ok(message) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                match message.get("method").and_then(Value::as_str) {
                    Some(wire::TOOLS_CHANGED) => self.forget_tools(),
                    Some(wire::PROGRESS) => {
                        if let Some(progress) = &extra.progress {
                            // The caller's frame, with the server's credentials kept out. A
                            // caller that left is not waited for.
                            // Written again: the server's event may span lines.
                            let text = self.secrets.redact_owned(message.to_string());
                            let _ = progress.send(crate::http::sse_text_frame(&text)).await;
                        }
                    }
                    _ => {}
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

/// Whether a `server/discover` or `initialize` result says the server announces changes of
/// its tool list.
fn announces_changes(result: &Value) -> bool {
    result
        .pointer("/capabilities/tools/listChanged")
        .and_then(Value::as_bool)
        == Some(true)
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

#[cfg(test)]
mod tests {
    use super::*;

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
