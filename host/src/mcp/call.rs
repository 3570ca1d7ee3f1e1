//! `tools/call`: which server's tool, whether the config and the caller's key allow it, the
//! key's and project's request limits, the call within the server's timeout and the byte
//! bounds, and its invocation record (kind `tool`: the server as the route, the tool as the
//! model, the arguments and the result as the bodies). A caller that asked for progress has it
//! on its answer's event stream; at the stateless revision, a caller that leaves (closes that
//! stream, or its connection) cancels the call (recorded as cancelled, status 499).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::{Era, Exchange, Fault};
use crate::error::ApiError;
use crate::flow::{BodyPolicy, CLIENT_CLOSED_REQUEST, Draft};
use crate::state::{AppState, Live};
use crate::tools::{Extra, McpServer, ServerError, Tool, wire};
use crate::traces::RequestTrace;

/// What a failed call answers, what its record says, and its outcome in the metrics.
struct Failure {
    fault: Fault,
    error: ApiError,
    outcome: &'static str,
}

impl Failure {
    fn invalid(message: String) -> Failure {
        Failure {
            fault: Fault::new(wire::INVALID_PARAMS, message.clone()),
            error: ApiError::BadRequest(message),
            outcome: "invalid",
        }
    }

    fn unknown_tool(name: &str) -> Failure {
        Failure::invalid(format!("unknown tool: {name}"))
    }
}

/// Who waits for a call's answer, and how the call knows that they left.
pub(super) enum Caller<'c> {
    /// A caller waiting for a JSON answer, gone once the answer's receiver is dropped.
    Waiting(&'c mut oneshot::Sender<Result<Value, Fault>>),
    /// A caller reading its event stream, which also carries the server's progress.
    Streaming(&'c mpsc::Sender<Bytes>),
}

impl Caller<'_> {
    /// Resolves once the caller is gone.
    async fn left(&mut self) {
        match self {
            Caller::Waiting(answer) => answer.closed().await,
            Caller::Streaming(frames) => frames.closed().await,
        }
    }
}

/// Calls the tool `exchange` names and records the call.
pub(super) async fn call(
    state: &Arc<AppState>,
    live: &Live,
    exchange: &Exchange,
    id: Uuid,
    mut caller: Caller<'_>,
) -> Result<Value, Fault> {
    let progress = match &caller {
        Caller::Streaming(frames) => Some((*frames).clone()),
        Caller::Waiting(_) => None,
    };
    let started = std::time::Instant::now();
    let trace = state.traces.request(&exchange.headers, "mcp", &id, "/mcp");
    let mut draft = Draft::new(id, "mcp", trace.clone());
    draft.caller(&exchange.key);
    draft.keep_bodies(BodyPolicy::of(&live.config));
    let mut labels = Labels::default();
    let running = run(
        state,
        live,
        exchange,
        &mut draft,
        &trace,
        &mut labels,
        progress,
    );
    let caller_left = async {
        if matches!(exchange.era, Era::Modern) {
            // The stateless revision: "closing the SSE response stream MUST be treated by
            // the server as cancellation of that request" (and a JSON answer's connection
            // likewise); the server's own request is dropped with it, which is the same
            // signal to the server.
            caller.left().await;
        } else {
            // The session era: a disconnection is not a cancellation; the call ends and is
            // recorded, its answer sent to no one.
            std::future::pending::<()>().await;
        }
    };
    let (status, reason) = tokio::select! {
        outcome = running => return finish(state, exchange, draft, outcome, &labels, started).await,
        () = caller_left => (CLIENT_CLOSED_REQUEST, "the caller closed the stream"),
        // Shutdown's grace is over: the call ends as the model flow's requests do.
        () = state.aborted() => (ApiError::ShuttingDown.status().as_u16(), "the gateway shut down"),
    };
    state
        .metrics
        .tool_call(labels.server, &labels.tool, "cancelled", started.elapsed());
    crate::flow::save(state, draft.cancelled(status, reason, None)).await;
    Err(Fault::new(wire::GATEWAY_ERROR, reason))
}

/// Counts and records a call that ran to its end, and answers it.
async fn finish(
    state: &AppState,
    exchange: &Exchange,
    draft: Draft,
    outcome: Result<(Value, String), Failure>,
    labels: &Labels<'_>,
    started: std::time::Instant,
) -> Result<Value, Fault> {
    let word = match &outcome {
        Ok((result, _)) if result.get("isError").and_then(Value::as_bool) == Some(true) => {
            "tool_error"
        }
        Ok(_) => "success",
        Err(failure) => failure.outcome,
    };
    state
        .metrics
        .tool_call(labels.server, &labels.tool, word, started.elapsed());
    let finished = match &outcome {
        Ok((result, text)) => {
            let mut finished = draft.success(200, text.clone());
            if result.get("isError").and_then(Value::as_bool) == Some(true) {
                finished.invocation.status = crate::store::InvocationStatus::Error;
                finished.invocation.error = Some("the tool reported an error (isError)".into());
            }
            finished
        }
        Err(failure) => {
            let mut finished = draft.failure(&failure.error);
            // What the caller got: a JSON-RPC error, on the status its era gives it.
            let modern = matches!(exchange.era, Era::Modern);
            finished.invocation.http_status = match failure.fault.status {
                Some(status) => status.as_u16(),
                None if modern => wire::modern_status(failure.fault.code),
                None => 200,
            };
            finished
        }
    };
    crate::flow::save(state, finished).await;
    outcome
        .map(|(result, _)| result)
        .map_err(|failure| failure.fault)
}

/// The metrics' labels of a call: bounded by what the config and the servers named, not by
/// what the caller sent.
struct Labels<'a> {
    server: &'a str,
    /// The tool's own name once its server listed it.
    tool: String,
}

impl Default for Labels<'_> {
    fn default() -> Self {
        Labels {
            server: "none",
            tool: "none".to_owned(),
        }
    }
}

/// The call, up to the server's result (and its text, as recorded).
async fn run<'l>(
    state: &AppState,
    live: &'l Live,
    exchange: &Exchange,
    draft: &mut Draft,
    trace: &RequestTrace,
    labels: &mut Labels<'l>,
    progress: Option<mpsc::Sender<Bytes>>,
) -> Result<(Value, String), Failure> {
    let params = &exchange.params;
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Failure::invalid("params.name (the tool to call) is missing".into()))?;
    draft.tool(None, name);
    let Some((server_id, entry, tool)) = live.tools.find(name) else {
        return Err(Failure::unknown_tool(name));
    };
    draft.tool(Some(server_id), tool);
    labels.server = server_id;
    "other".clone_into(&mut labels.tool);
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(arguments @ Value::Object(_)) => Some(arguments.clone()),
        Some(_) => {
            return Err(Failure::invalid(
                "params.arguments must be an object".into(),
            ));
        }
    };
    let text = arguments
        .as_ref()
        .map_or_else(|| "{}".to_owned(), Value::to_string);
    draft.request(None, text.as_bytes());
    let max = live.config.mcp.max_tool_argument_bytes.get();
    if text.len() > max {
        return Err(Failure::invalid(format!(
            "the arguments are {} bytes, over the gateway's max_tool_argument_bytes ({max})",
            text.len()
        )));
    }
    // A tool the config leaves out does not exist for callers.
    if !entry.config.allows_tool(tool) {
        return Err(Failure::unknown_tool(name));
    }
    if !exchange.key.allows_tool(name) {
        let message = format!("this API key may not call tool {name}");
        return Err(Failure {
            fault: Fault::new(wire::GATEWAY_ERROR, message.clone()),
            error: ApiError::OutOfScope(message),
            outcome: "denied",
        });
    }
    crate::flow::admit_request(state, exchange.key.clone())
        .await
        .map_err(|error| Failure {
            fault: Fault::new(wire::GATEWAY_ERROR, error.message())
                .with_data(serde_json::json!({"retryAfterSecs": error.retry_after()})),
            error,
            outcome: "rate_limited",
        })?;
    let server = entry
        .server
        .as_ref()
        .map_err(|reason| server_failure(server_id, &ServerError::Config(reason.clone())))?;
    let span = trace.execute_tool(server_id, tool);
    let extra = Extra {
        traceparent: span.headers().map(|h| h.traceparent),
        headers: Vec::new(),
        progress,
    };
    let outcome = call_server(server, exchange, draft.id(), tool, arguments, extra, labels).await;
    RequestTrace::end_tool(
        span,
        outcome.as_ref().err().map(|f| f.error.message()).as_deref(),
    );
    let result = outcome?;
    let text = result.to_string();
    let redacted = server.secrets().redact(&text);
    if redacted != text {
        let redacted = redacted.into_owned();
        let result = serde_json::from_str(&redacted).unwrap_or(Value::Null);
        return Ok((result, redacted));
    }
    Ok((result, text))
}

async fn call_server(
    server: &McpServer,
    exchange: &Exchange,
    id: Uuid,
    tool: &str,
    arguments: Option<Value>,
    mut extra: Extra,
    labels: &mut Labels<'_>,
) -> Result<Value, Failure> {
    let definition = definition(server, tool, &extra).await?;
    tool.clone_into(&mut labels.tool);
    let schema = definition
        .definition
        .get("inputSchema")
        .cloned()
        .unwrap_or(Value::Null);
    let args = arguments
        .clone()
        .unwrap_or_else(|| Value::Object(Map::new()));
    if matches!(exchange.era, Era::Modern) {
        let given: Vec<(String, String)> = exchange
            .headers
            .iter()
            .filter(|(name, _)| name.as_str().starts_with(wire::PARAM_HEADER_PREFIX))
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect();
        if let Some(problem) = wire::param_mismatch(&schema, &args, &given) {
            return Err(Failure {
                fault: Fault::new(wire::HEADER_MISMATCH, problem.clone())
                    .with_status(hyper::StatusCode::BAD_REQUEST),
                error: ApiError::BadRequest(problem),
                outcome: "invalid",
            });
        }
    }
    extra.headers = wire::param_headers(&schema, &args);
    let meta = exchange
        .params
        .get("_meta")
        .and_then(Value::as_object)
        .map(|meta| {
            meta.iter()
                .filter(|(key, _)| !key.starts_with("io.modelcontextprotocol/"))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect::<Map<String, Value>>()
        });
    let meta = meta.filter(|meta| !meta.is_empty());
    match server
        .call(id, tool, arguments, meta.as_ref(), &extra)
        .await
    {
        Ok(result) => Ok(result),
        Err(ServerError::Rpc {
            code,
            message,
            data,
        }) => {
            if code == wire::INVALID_PARAMS {
                // The tool may be gone: the next list asks the server again.
                server.forget_tools();
            }
            let message = server.secrets().redact_owned(message);
            let mut fault = Fault::new(code, message.clone());
            if let Some(data) = data {
                let data = server.secrets().redact_owned(data.to_string());
                fault = fault.with_data(serde_json::from_str(&data).unwrap_or(Value::Null));
            }
            Err(Failure {
                fault,
                error: ApiError::BadRequest(format!("the server refused the call: {message}")),
                outcome: if code == wire::INVALID_PARAMS {
                    "invalid"
                } else {
                    "refused"
                },
            })
        }
        Err(error) => Err(server_failure(server.id(), &error)),
    }
}

/// The server's definition of `tool`, from its kept list, or from a new one when the kept
/// one does not have it (a tool added since).
async fn definition(server: &McpServer, tool: &str, extra: &Extra) -> Result<Tool, Failure> {
    for fresh in [false, true] {
        if fresh {
            server.forget_tools();
        }
        let tools = server
            .tools(extra)
            .await
            .map_err(|error| server_failure(server.id(), &error))?;
        if let Some(found) = tools.iter().find(|t| t.name == tool) {
            return Ok(found.clone());
        }
    }
    Err(Failure::unknown_tool(&crate::tools::exposed_name(
        server.id(),
        tool,
    )))
}

/// A server that did not answer properly: the caller learns which and how, the record too.
fn server_failure(server: &str, error: &ServerError) -> Failure {
    let message = format!("MCP server {server}: {error}");
    let record = match error {
        ServerError::Timeout(_) => ApiError::Timeout(message.clone()),
        ServerError::Http(status) => ApiError::Upstream {
            status: *status,
            message: message.clone(),
            retry_after: None,
        },
        _ => ApiError::ProviderFailed(message.clone()),
    };
    Failure {
        fault: Fault::new(wire::GATEWAY_ERROR, message),
        error: record,
        outcome: match error {
            ServerError::Timeout(_) => "timeout",
            _ => "failed",
        },
    }
}
