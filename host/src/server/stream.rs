//! Streamed completions: the plugin runs in its own task, its partial results
//! become SSE frames, and the task records the invocation however it ends.
//!
//! The HTTP status is decided by the first thing the plugin produces: an error
//! before any text is a plain JSON error with its proper status; once text has
//! flowed, a later error is sent as a last `data: {"error": ...}` frame.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::AppState;
use super::body::{sse_frame, sse_response};
use super::handlers::{Reply, timeout_error, usage_and_cost};
use super::record::Draft;
use crate::api::request::Kind;
use crate::api::response::{self, Envelope};
use crate::error::ApiError;
use crate::plugins::{CallContext, Plugin, types};
use crate::routing::Route;

/// Frames buffered between the plugin and a slow client before the plugin waits.
const FRAME_BUFFER: usize = 64;
/// Status recorded for a caller that left before any response was sent (nginx's convention).
const CLIENT_CLOSED_REQUEST: u16 = 499;
/// Choice indexes beyond this are a plugin bug; their text is not accumulated.
const MAX_CHOICES: usize = 128;

pub(super) struct StreamCall {
    pub state: Arc<AppState>,
    pub route: Arc<Route>,
    pub plugin: Arc<Plugin>,
    pub ctx: CallContext,
    pub request: types::CompletionRequest,
    /// The request's model (the request itself moves into the plugin call).
    pub model: String,
    pub project_id: String,
    pub kind: Kind,
    pub show_usage: bool,
    pub draft: Draft,
}

/// Starts the stream; answers once the plugin has produced its first result.
pub(super) async fn start(call: StreamCall) -> Result<Reply, ApiError> {
    let id = call.draft.id();
    let (frames_tx, frames_rx) = mpsc::channel(FRAME_BUFFER);
    let (started_tx, started_rx) = oneshot::channel();
    tokio::spawn(run(call, frames_tx, started_tx));
    match started_rx.await {
        Ok(Ok(())) => Ok(Reply::Stream(sse_response(frames_rx, &id))),
        Ok(Err(error)) => Ok(Reply::Recorded(error)),
        Err(_) => Err(ApiError::Internal(
            "the stream task ended unannounced".into(),
        )),
    }
}

enum End {
    Finished(Result<types::Completion, ApiError>),
    ClientGone,
    /// Shutdown's grace period is over.
    ShuttingDown,
}

async fn run(
    call: StreamCall,
    frames: mpsc::Sender<Bytes>,
    started: oneshot::Sender<Result<(), ApiError>>,
) {
    let StreamCall {
        state,
        route,
        plugin,
        ctx,
        request,
        model,
        project_id,
        kind,
        show_usage,
        draft,
    } = call;
    let id = draft.id().to_string();
    let envelope = Envelope {
        invocation_id: &id,
        project_id: &project_id,
        kind,
        model: &model,
    };
    let mut started = Some(started);
    let mut texts: Vec<String> = Vec::new();
    let mut usage_so_far: Option<types::Usage> = None;

    let (chunks_tx, mut chunks) = mpsc::channel::<types::Chunk>(FRAME_BUFFER);
    let plugin_call = tokio::time::timeout(
        route.timeout,
        state
            .runtime
            .complete_stream(&plugin, &ctx, request, chunks_tx),
    );
    tokio::pin!(plugin_call);

    let end = loop {
        tokio::select! {
            // Deliver what the plugin already sent before looking at how it ended.
            biased;
            Some(chunk) = chunks.recv() => {
                if !forward(&envelope, chunk, &mut texts, &mut usage_so_far, &frames, &mut started).await {
                    break End::ClientGone;
                }
            }
            result = &mut plugin_call => {
                let result = match result {
                    Ok(result) => result.map_err(ApiError::from),
                    Err(_) => Err(timeout_error(&route)),
                };
                break End::Finished(result);
            }
            _ = frames.closed() => break End::ClientGone,
            () = state.aborted() => break End::ShuttingDown,
        }
    };
    // Chunks sent just before the plugin returned are still queued.
    let mut client_gone = matches!(end, End::ClientGone);
    while !client_gone {
        let Ok(chunk) = chunks.try_recv() else { break };
        client_gone = !forward(
            &envelope,
            chunk,
            &mut texts,
            &mut usage_so_far,
            &frames,
            &mut started,
        )
        .await;
    }

    let mut draft = draft;
    match end {
        End::Finished(Ok(completion)) if !client_gone => {
            let (usage, cost) = usage_and_cost(&route, &plugin, &model, completion.usage.as_ref());
            draft.usage(usage, cost);
            let shown_usage = usage.as_ref().filter(|_| show_usage).map(|u| (u, cost));
            let last: Vec<_> = completion
                .choices
                .iter()
                .map(|choice| response::choice(&envelope, choice, ""))
                .collect();
            let last_frame = response::completion(&envelope, true, last, shown_usage);
            let whole: Vec<_> = completion
                .choices
                .iter()
                .map(|choice| {
                    let streamed = texts.get(choice.index as usize).map(String::as_str);
                    let text = if choice.text.is_empty() {
                        streamed.unwrap_or("")
                    } else {
                        &choice.text
                    };
                    response::choice(&envelope, choice, text)
                })
                .collect();
            let record = response::completion(&envelope, true, whole, shown_usage);
            // Record before the last frame: once the body ends, shutdown may proceed.
            state
                .log
                .record(draft.success(200, record.to_string()))
                .await;
            if let Some(started) = started.take() {
                let _ = started.send(Ok(()));
            }
            let _ = frames.send(sse_frame(&last_frame)).await;
        }
        End::Finished(Err(error)) if !client_gone => {
            let error = draft.redact(error);
            let (usage, cost) = usage_and_cost(&route, &plugin, &model, usage_so_far.as_ref());
            draft.usage(usage, cost);
            state.log.record(draft.failure(&error)).await;
            tell_error(started.take(), &frames, error, &ctx).await;
        }
        End::ShuttingDown if !client_gone => {
            // The upstream call is dropped with `plugin_call`; the caller
            // learns why its answer stops here, and the record keeps the part
            // that was sent and its usage so far.
            let (usage, cost) = usage_and_cost(&route, &plugin, &model, usage_so_far.as_ref());
            draft.usage(usage, cost);
            let error = ApiError::ShuttingDown;
            let status = if started.is_some() {
                error.status().as_u16()
            } else {
                200
            };
            let partial = serde_json::json!({"partialText": texts}).to_string();
            state
                .log
                .record(draft.cancelled(status, &error.message(), Some(partial)))
                .await;
            tell_error(started.take(), &frames, error, &ctx).await;
        }
        _ => {
            // The caller left: dropping the plugin call above cancelled the
            // upstream request. Keep what was known.
            let (usage, cost) = usage_and_cost(&route, &plugin, &model, usage_so_far.as_ref());
            draft.usage(usage, cost);
            let status = if started.is_some() {
                CLIENT_CLOSED_REQUEST
            } else {
                200
            };
            let partial = serde_json::json!({"partialText": texts}).to_string();
            state
                .log
                .record(draft.cancelled(status, "the client disconnected", Some(partial)))
                .await;
        }
    }
}

/// Tells the caller how its request ended: with the error's own status
/// when nothing was sent yet, else as a last `data: {"error": ...}` frame.
async fn tell_error(
    started: Option<oneshot::Sender<Result<(), ApiError>>>,
    frames: &mpsc::Sender<Bytes>,
    error: ApiError,
    ctx: &CallContext,
) {
    match started {
        Some(started) => {
            let _ = started.send(Err(error));
        }
        None => {
            let _ = frames
                .send(sse_frame(&error.body(&ctx.invocation_id)))
                .await;
        }
    }
}

/// Sends one chunk's text to the caller; false when the caller is gone.
async fn forward(
    envelope: &Envelope<'_>,
    chunk: types::Chunk,
    texts: &mut Vec<String>,
    usage_so_far: &mut Option<types::Usage>,
    frames: &mpsc::Sender<Bytes>,
    started: &mut Option<oneshot::Sender<Result<(), ApiError>>>,
) -> bool {
    if let Some(usage) = chunk.usage {
        *usage_so_far = Some(usage);
    }
    let deltas: Vec<types::TextDelta> = chunk
        .deltas
        .into_iter()
        .filter(|delta| !delta.text.is_empty())
        .collect();
    if deltas.is_empty() {
        return true;
    }
    for delta in &deltas {
        let index = delta.index as usize;
        if index >= MAX_CHOICES {
            continue;
        }
        if texts.len() <= index {
            texts.resize(index + 1, String::new());
        }
        texts[index].push_str(&delta.text);
    }
    if let Some(started) = started.take() {
        let _ = started.send(Ok(()));
    }
    frames
        .send(sse_frame(&response::delta_frame(envelope, &deltas)))
        .await
        .is_ok()
}
