//! `POST /mcp`: the MCP gateway, a flow of its own beside the model flow. Callers' agents
//! reach the tools of every `[mcp_servers.ID]` their key may use through one endpoint,
//! authenticated with the project's key, as `ID__TOOL`; each `tools/call` is counted by the
//! key's and project's request limits and ends as one invocation record (kind `tool`).
//!
//! Both protocol eras are served on the one path (Streamable HTTP):
//! - the stateless revision (2026-07-28): a request whose `MCP-Protocol-Version` is not a
//!   handshake-era version goes through the spec's checks (the `_meta` envelope, the
//!   mirrored `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers, the version), and its
//!   errors carry the spec's HTTP statuses (400, 404);
//! - the session era (2025-03-26 to 2025-11-25): `initialize` begins a session whose id is
//!   signed, not stored ([`session`]), so that any replica serves it; `DELETE` ends it.
//!
//! Served methods: `initialize`, `ping`, `server/discover`, `tools/list` (paged with
//! `cursor`), `tools/call`; notifications and client responses are accepted (202). Every
//! other method (resources, prompts, completion, logging) answers "method not found": the
//! gateway advertises tools only. Answers are JSON (the spec lets a server choose JSON or
//! SSE per request), but for a `tools/call` whose caller asked for progress (a
//! `progressToken` in `_meta`, and `text/event-stream` accepted): that one is an SSE stream
//! of the server's progress notifications, then the answer. The gateway keeps no stream of
//! its own notifications (no `GET`, 405; no `subscriptions/listen`).

mod call;
mod list;
mod session;

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{ALLOW, HeaderValue};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use serde_json::{Map, Value, json};
use tracing::Instrument;
use uuid::Uuid;

use crate::clock::now_ms;
use crate::error::ApiError;
use crate::http::{Body, json_response, sse_frame, sse_response, typed_response};
use crate::state::AppState;
use crate::store::KeyRecord;
use crate::tools::wire;

/// Answers a request to `/mcp`.
pub async fn serve(state: Arc<AppState>, request: Request<Incoming>, id: Uuid) -> Response<Body> {
    match *request.method() {
        Method::POST => post(state, request, id).await,
        Method::DELETE => delete(state, request, id).await,
        // No server-initiated stream: the spec lets a server answer 405.
        _ => {
            let mut response =
                typed_response(StatusCode::METHOD_NOT_ALLOWED, "application/json", "", &id);
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            response
        }
    }
}

/// A JSON-RPC error to answer with.
#[derive(Debug)]
pub(crate) struct Fault {
    code: i64,
    message: String,
    data: Option<Value>,
    /// The HTTP status, where the transport (not the era's table) decides it.
    status: Option<StatusCode>,
}

impl Fault {
    fn new(code: i64, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
            data: None,
            status: None,
        }
    }

    fn with_data(mut self, data: Value) -> Fault {
        self.data = Some(data);
        self
    }

    fn with_status(mut self, status: StatusCode) -> Fault {
        self.status = Some(status);
        self
    }

    /// A refusal of the gateway's own (a key, a size, a limit), with the status and the
    /// words [`ApiError`] gives it.
    fn gateway(error: &ApiError) -> Fault {
        let code = match error {
            ApiError::BodyTooLarge(_) | ApiError::BadRequest(_) => wire::INVALID_REQUEST,
            _ => wire::GATEWAY_ERROR,
        };
        Fault::new(code, error.message()).with_status(error.status())
    }
}

/// The era of a request, once its envelope is checked.
#[derive(Debug, Clone)]
enum Era {
    Modern,
    /// The session era: the session's version (`initialize`'s is the one it agrees to).
    Session {
        version: String,
    },
}

/// A checked request: whose, in which era, asking what.
struct Exchange {
    era: Era,
    rpc_id: Value,
    method: String,
    params: Map<String, Value>,
    key: KeyRecord,
    /// The caller's API key: `initialize` signs its session id with it.
    api_key: String,
    headers: HeaderMap,
}

async fn post(state: Arc<AppState>, request: Request<Incoming>, id: Uuid) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let live = state.live();
    let refuse = |fault: Fault| answer(&Value::Null, Err(fault), None, &id);
    let (api_key, key) = match caller(&state, &parts.headers).await {
        Ok(caller) => caller,
        Err(fault) => return refuse(fault),
    };
    // Counted with every request's body in flight, each JSON object's parsed cost too, as the
    // model flow counts them; held until the answer is made.
    let (body, mut inflight) =
        match crate::flow::read_counted(&state, &live.config, &parts.headers, body).await {
            Ok(read) => read,
            Err(error) => return refuse(Fault::gateway(&error)),
        };
    let limit = live.config.max_inflight_body_bytes.get();
    let objects = memchr::memchr_iter(b'{', &body).count();
    if !inflight.grow(objects.saturating_mul(crate::inflight::ITEM_BYTES), limit) {
        return refuse(Fault::gateway(&ApiError::BodiesInFlight(limit)));
    }
    let message: Value = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(e) => {
            let fault = Fault::new(wire::PARSE_ERROR, format!("the body is not JSON: {e}"));
            return refuse(fault.with_status(StatusCode::BAD_REQUEST));
        }
    };
    // The raw body goes once parsed: the request holds only its parsed form.
    drop(body);
    let Value::Object(mut message) = message else {
        let fault = Fault::new(
            wire::INVALID_REQUEST,
            "the body must be one JSON-RPC request or notification (batches are not served)",
        );
        return refuse(fault.with_status(StatusCode::BAD_REQUEST));
    };
    let Some(method) = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        // A client's answer to a server request: the gateway sends none, so nothing waits
        // for it.
        return accepted(&id);
    };
    let Some(rpc_id) = message.remove("id") else {
        // A notification (`notifications/initialized`, `notifications/cancelled`): nothing
        // of the gateway's depends on it.
        return accepted(&id);
    };
    if !(rpc_id.is_string() || rpc_id.is_i64() || rpc_id.is_u64()) {
        let fault = Fault::new(
            wire::INVALID_REQUEST,
            "a request id is a string or an integer",
        );
        return refuse(fault.with_status(StatusCode::BAD_REQUEST));
    }
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            let fault = Fault::new(wire::INVALID_PARAMS, "params must be an object");
            return answer(
                &rpc_id,
                Err(fault.with_status(StatusCode::BAD_REQUEST)),
                None,
                &id,
            );
        }
    };
    let era = match era_of(&api_key, &method, &params, &parts.headers) {
        Ok(era) => era,
        Err(fault) => return answer(&rpc_id, Err(fault), None, &id),
    };
    let exchange = Exchange {
        era,
        rpc_id,
        method,
        params,
        key,
        api_key,
        headers: parts.headers,
    };
    if exchange.method == "tools/call" {
        return call_apart(state, live, exchange, id, inflight).await;
    }
    let mut session = None;
    let outcome = match exchange.method.as_str() {
        "initialize" => Ok(initialize(&exchange, &mut session)),
        "ping" => Ok(json!({})),
        "server/discover" if matches!(exchange.era, Era::Modern) => Ok(discover()),
        "tools/list" => list::list(&live, &exchange).await,
        method => Err(Fault::new(
            wire::METHOD_NOT_FOUND,
            format!("method not found: {method} (this gateway serves tools)"),
        )),
    };
    let outcome = finish(&exchange.era, outcome);
    let mut response = answer(&exchange.rpc_id, outcome, session, &id);
    version_header(&exchange.era, &mut response);
    drop(inflight);
    response
}

/// Whether the caller of a `tools/call` asked for its progress on an event stream: a
/// `progressToken` in `_meta`, and an `Accept` that takes `text/event-stream` (the spec's
/// clients send both types on every request; one that sends only JSON gets JSON).
fn wants_progress(exchange: &Exchange) -> bool {
    let token = exchange
        .params
        .get("_meta")
        .and_then(|meta| meta.get("progressToken"));
    let accepts = exchange
        .headers
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    accepts && token.is_some_and(|t| t.is_string() || t.is_i64() || t.is_u64())
}

/// A `tools/call`, run in a task of its own so that it ends and is recorded whatever the
/// caller does (hyper drops a request's future when its caller disconnects): at the stateless
/// revision a caller that leaves cancels it, in the session era it runs on ([`call::call`]).
/// Answered as JSON, or, when the caller asked for progress, as an SSE stream: the server's
/// progress notifications as they come, then the answer.
async fn call_apart(
    state: Arc<AppState>,
    live: Arc<crate::state::Live>,
    exchange: Exchange,
    id: Uuid,
    inflight: crate::inflight::BodyBytes,
) -> Response<Body> {
    let (era, rpc_id) = (exchange.era.clone(), exchange.rpc_id.clone());
    if wants_progress(&exchange) {
        // A few frames ahead of a slow caller; then the server's stream waits for it.
        let (frames, receiver) = tokio::sync::mpsc::channel(8);
        let apart = state.apart();
        tokio::spawn(
            async move {
                let caller = call::Caller::Streaming(&frames);
                let outcome = call::call(&state, &live, &exchange, id, caller).await;
                let outcome = finish(&exchange.era, outcome);
                let _ = frames
                    .send(sse_frame(&message(&exchange.rpc_id, outcome, &id).1))
                    .await;
                drop((inflight, apart));
            }
            .instrument(tracing::Span::current()),
        );
        let mut response = sse_response(receiver, &id);
        version_header(&era, &mut response);
        return response;
    }
    let (mut reply, replied) = tokio::sync::oneshot::channel();
    let apart = state.apart();
    tokio::spawn(
        async move {
            let outcome = call::call(
                &state,
                &live,
                &exchange,
                id,
                call::Caller::Waiting(&mut reply),
            )
            .await;
            let _ = reply.send(outcome);
            drop((inflight, apart));
        }
        .instrument(tracing::Span::current()),
    );
    // The task always answers; a panic in it is the one way it would not.
    let outcome = replied.await.unwrap_or_else(|_| {
        Err(Fault::new(
            wire::INTERNAL_ERROR,
            "the call ended without an answer",
        ))
    });
    let mut response = answer(&rpc_id, finish(&era, outcome), None, &id);
    version_header(&era, &mut response);
    response
}

/// An outcome as the era answers it: the stateless revision's result fields, and its
/// statuses for errors.
fn finish(era: &Era, outcome: Result<Value, Fault>) -> Result<Value, Fault> {
    let modern = matches!(era, Era::Modern);
    outcome
        .map(|result| finish_result(era, result))
        .map_err(|f| era_status(f, modern))
}

fn version_header(era: &Era, response: &mut Response<Body>) {
    if matches!(era, Era::Modern) {
        response.headers_mut().insert(
            wire::PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static(wire::MODERN_VERSION),
        );
    }
}

/// A fault of the stateless era carries the spec's status for its code.
fn era_status(fault: Fault, modern: bool) -> Fault {
    match (fault.status, modern) {
        (None, true) => {
            let status =
                StatusCode::from_u16(wire::modern_status(fault.code)).unwrap_or(StatusCode::OK);
            fault.with_status(status)
        }
        _ => fault,
    }
}

/// Which era `method` comes in, by its headers, and whether its envelope (the stateless
/// revision's) or its session (the handshake era's) is in order.
fn era_of(
    api_key: &str,
    method: &str,
    params: &Map<String, Value>,
    headers: &HeaderMap,
) -> Result<Era, Fault> {
    let header = |name: &str| -> Result<Option<&str>, Fault> {
        let mut values = headers.get_all(name).iter();
        let (first, second) = (values.next(), values.next());
        if second.is_some() {
            return Err(mismatch(format!("{name} appears more than once")));
        }
        first
            .map(|v| {
                v.to_str()
                    .map_err(|_| mismatch(format!("{name} is not ASCII")))
            })
            .transpose()
    };
    let version = header(wire::PROTOCOL_VERSION_HEADER)?;
    if method == "initialize" {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let agreed = asked
            .filter(|v| wire::is_handshake_version(v))
            .unwrap_or(wire::HANDSHAKE_VERSIONS[0]);
        return Ok(Era::Session {
            version: agreed.to_owned(),
        });
    }
    if let Some(version) = version.filter(|v| !wire::is_handshake_version(v) && *v != "2024-11-05")
    {
        check_envelope(version, method, params, &header).map_err(|f| era_status(f, true))?;
        return Ok(Era::Modern);
    }
    let Some(session_id) = header(wire::SESSION_HEADER)? else {
        return Err(Fault::new(
            wire::INVALID_REQUEST,
            "no Mcp-Session-Id: begin a session with initialize, or send MCP-Protocol-Version: 2026-07-28 with the request's _meta envelope",
        )
        .with_status(StatusCode::BAD_REQUEST));
    };
    match session::check(api_key, session_id, now_ms()) {
        Ok(version) => Ok(Era::Session { version }),
        // The spec's answer to a session the server does not know: 404, and the client
        // begins a new one.
        Err(refused) => Err(Fault::new(
            wire::INVALID_REQUEST,
            match refused {
                session::Refused::Unknown => "unknown session: begin a new one with initialize",
                session::Refused::Expired => "the session expired: begin a new one with initialize",
                session::Refused::Ended => "the session was ended: begin a new one with initialize",
            },
        )
        .with_status(StatusCode::NOT_FOUND)),
    }
}

/// The stateless revision's checks, in the spec's order: the `_meta` envelope, the mirrored
/// headers against the body, then the version.
fn check_envelope<'h>(
    version_header: &str,
    method: &str,
    params: &Map<String, Value>,
    header: &impl Fn(&str) -> Result<Option<&'h str>, Fault>,
) -> Result<(), Fault> {
    let meta = params.get("_meta").and_then(Value::as_object);
    let Some(meta) = meta.filter(|meta| {
        meta.contains_key(wire::PROTOCOL_VERSION_META)
            && meta.contains_key(wire::CLIENT_CAPABILITIES_META)
    }) else {
        return Err(Fault::new(
            wire::INVALID_PARAMS,
            format!(
                "params._meta must carry {:?} and {:?}",
                wire::PROTOCOL_VERSION_META,
                wire::CLIENT_CAPABILITIES_META
            ),
        ));
    };
    let body_version = meta.get(wire::PROTOCOL_VERSION_META);
    if body_version.and_then(Value::as_str) != Some(version_header) {
        return Err(mismatch(
            "MCP-Protocol-Version does not match the request's _meta protocol version",
        ));
    }
    if header(wire::METHOD_HEADER)? != Some(method) {
        return Err(mismatch("Mcp-Method does not match the request's method"));
    }
    if method == "tools/call"
        && let Some(name) = params.get("name").and_then(Value::as_str)
    {
        let sent = header(wire::NAME_HEADER)?.and_then(wire::decode_header_value);
        if sent.as_deref() != Some(name) {
            return Err(mismatch("Mcp-Name does not match the request's tool name"));
        }
    }
    if version_header != wire::MODERN_VERSION {
        return Err(Fault::new(
            wire::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({"supported": [wire::MODERN_VERSION], "requested": version_header})));
    }
    Ok(())
}

fn mismatch(message: impl Into<String>) -> Fault {
    Fault::new(wire::HEADER_MISMATCH, message).with_status(StatusCode::BAD_REQUEST)
}

fn server_info() -> Value {
    json!({"name": "gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// What the gateway offers as a server: tools, and no change notifications (it has no
/// stream to send them on).
fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}})
}

fn initialize(exchange: &Exchange, session: &mut Option<String>) -> Value {
    let Era::Session { version } = &exchange.era else {
        return json!({});
    };
    *session = Some(session::mint(&exchange.api_key, version, now_ms()));
    json!({
        "protocolVersion": version,
        "capabilities": capabilities(),
        "serverInfo": server_info(),
        "instructions": "Tools of the MCP servers this API key may use, named SERVER__TOOL.",
    })
}

fn discover() -> Value {
    json!({
        "supportedVersions": [wire::MODERN_VERSION],
        "capabilities": capabilities(),
        "instructions": "Tools of the MCP servers this API key may use, named SERVER__TOOL.",
        // What a key may use is the key's: no shared cache may keep this for another.
        "ttlMs": 0,
        "cacheScope": "private",
    })
}

/// The stateless revision's result fields: `resultType`, and the server's identity.
fn finish_result(era: &Era, mut result: Value) -> Value {
    if let (Era::Modern, Value::Object(fields)) = (era, &mut result) {
        fields
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
        let meta = fields
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(wire::SERVER_INFO_META.into(), server_info());
        }
    }
    result
}

/// `DELETE /mcp`: ends the caller's session.
async fn delete(state: Arc<AppState>, request: Request<Incoming>, id: Uuid) -> Response<Body> {
    let headers = request.headers();
    let refuse = |fault: Fault| answer(&Value::Null, Err(fault), None, &id);
    let api_key = match caller(&state, headers).await {
        Ok((api_key, _)) => api_key,
        Err(fault) => return refuse(fault),
    };
    let Some(session_id) = headers
        .get(wire::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    else {
        let fault = Fault::new(wire::INVALID_REQUEST, "no Mcp-Session-Id to end");
        return refuse(fault.with_status(StatusCode::BAD_REQUEST));
    };
    match session::check(&api_key, session_id, now_ms()) {
        Ok(_) => {
            session::end(session_id, now_ms());
            typed_response(StatusCode::NO_CONTENT, "application/json", "", &id)
        }
        Err(_) => {
            let fault = Fault::new(wire::INVALID_REQUEST, "unknown session");
            refuse(fault.with_status(StatusCode::NOT_FOUND))
        }
    }
}

/// The caller's API key and what the store holds of it; a missing, unknown, revoked or
/// expired key is refused.
async fn caller(state: &AppState, headers: &HeaderMap) -> Result<(String, KeyRecord), Fault> {
    let api_key = crate::auth::bearer_key(headers).map_err(|e| Fault::gateway(&e))?;
    let key = crate::auth::key_record(&state.store, api_key)
        .await
        .map_err(|e| Fault::gateway(&e))?;
    Ok((api_key.to_owned(), key))
}

fn accepted(id: &Uuid) -> Response<Body> {
    typed_response(StatusCode::ACCEPTED, "application/json", "", id)
}

/// The JSON-RPC answer to the request of `rpc_id`; an error's `data` names the invocation.
fn answer(
    rpc_id: &Value,
    outcome: Result<Value, Fault>,
    session: Option<String>,
    id: &Uuid,
) -> Response<Body> {
    let (status, body) = message(rpc_id, outcome, id);
    let mut response = json_response(status, &body, id);
    if let Some(session) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        response.headers_mut().insert(wire::SESSION_HEADER, session);
    }
    response
}

/// The JSON-RPC message answering the request of `rpc_id`, and the HTTP status it goes with
/// when it is the whole answer.
fn message(rpc_id: &Value, outcome: Result<Value, Fault>, id: &Uuid) -> (StatusCode, Value) {
    match outcome {
        Ok(result) => (
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": rpc_id, "result": result}),
        ),
        Err(fault) => {
            let mut data = match fault.data {
                Some(Value::Object(data)) => data,
                Some(other) => Map::from_iter([("detail".to_owned(), other)]),
                None => Map::new(),
            };
            data.insert("invocationId".into(), Value::String(id.to_string()));
            (
                fault.status.unwrap_or(StatusCode::OK),
                json!({"jsonrpc": "2.0", "id": rpc_id, "error": {
                    "code": fault.code, "message": fault.message, "data": data}}),
            )
        }
    }
}
