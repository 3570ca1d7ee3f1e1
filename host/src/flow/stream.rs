//! Streamed completions: the plugin runs in its own task, its partial results
//! become the surface's frames, and the task records the invocation however
//! it ends.
//!
//! The HTTP status is decided by the first thing the plugin produces: an error
//! before any text may be tried again or on a fallback route (the caller has
//! seen nothing yet), and if no try is left it is a plain error response with
//! its proper status; once text has flowed, a later error is sent as the
//! surface's last error frame.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::HeaderMap;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::cache::Caching;
use super::call::{Call, Served, timeout_error};
use super::guard::Guarded;
use super::record::{self, Draft};
use super::{CompletionCodec, Envelope, Metered, Reply};
use crate::error::ApiError;
use crate::http::sse_response;
use crate::plugins::types;
use crate::redact::{Held, Secrets};
use crate::state::AppState;
use crate::traces::Answer;

/// Frames buffered between the plugin and a slow client before the plugin waits.
const FRAME_BUFFER: usize = 64;
/// Status recorded for a caller that left before any response was sent (nginx's convention).
const CLIENT_CLOSED_REQUEST: u16 = 499;
/// Choice indexes beyond this are a plugin bug; their text is not accumulated.
const MAX_CHOICES: usize = 128;
/// Tool-call positions beyond this are a plugin bug; their streamed pieces are
/// dropped (codecs keep state per call), the final completion still has them.
const MAX_CALLS: usize = 1024;

/// A streamed request, as its task takes it over.
struct Streamed<C> {
    state: Arc<AppState>,
    call: Call,
    codec: C,
    draft: Draft,
    /// Guards that judge the answer once it has been sent (`guard_stream = "observe"`).
    guarded: Option<Guarded>,
    /// Where a complete answer is stored, on a route that caches.
    caching: Option<Caching>,
}

/// Starts the stream; answers once the plugin has produced its first result.
pub(super) async fn start<C: CompletionCodec>(
    state: Arc<AppState>,
    call: Call,
    request: types::CompletionRequest,
    codec: C,
    draft: Draft,
    guarded: Option<Guarded>,
    caching: Option<Caching>,
) -> Result<Reply, ApiError> {
    let id = draft.id();
    let mut headers = HeaderMap::new();
    call.quota.set_headers(&mut headers);
    if let Some(status) = draft.cache_status() {
        super::cache::set_header(status, &mut headers);
    }
    let (frames_tx, frames_rx) = mpsc::channel(FRAME_BUFFER);
    let (started_tx, started_rx) = oneshot::channel();
    let streamed = Streamed {
        state,
        call,
        codec,
        draft,
        guarded,
        caching,
    };
    tokio::spawn(streamed.run(request, frames_tx, started_tx));
    match started_rx.await {
        Ok(Ok(served)) => {
            let mut response = sse_response(frames_rx, &id);
            served.set_headers(&mut headers);
            response.headers_mut().extend(headers);
            Ok(Reply::Stream(response))
        }
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

/// Tells the flow (waiting in [`start`]) whether the stream started (`Ok`,
/// with the route and upstream serving it) or failed before it sent anything (`Err`,
/// answered with the error's own status).
type Started = oneshot::Sender<Result<Served, ApiError>>;

/// What one try of the stream hands to the next when it failed before
/// anything was sent: the caller's side, untouched.
struct Untouched<C> {
    codec: C,
    frames: mpsc::Sender<Bytes>,
    started: Started,
}

/// What the metrics learn when the first frame goes out.
struct FirstFrame<'a> {
    metrics: &'a crate::metrics::Metrics,
    route: &'a str,
    /// When the request arrived.
    arrived: Instant,
}

/// The plugin's chunks on their way to the caller, and what was sent so far.
struct Pump<'a, C> {
    id: Uuid,
    envelope: Envelope<'a>,
    /// The route and upstream of this try, for the response's head.
    served: Served,
    first_frame: FirstFrame<'a>,
    codec: C,
    frames: mpsc::Sender<Bytes>,
    /// `Some` until the first frame (or the error that replaces it) is sent.
    started: Option<Started>,
    /// Each choice's text so far, by index.
    texts: Vec<String>,
    usage: Option<types::Usage>,
    /// The request's provider keys: an upstream may quote one in its answer, cut over
    /// two events.
    secrets: Secrets,
    /// What is held back of each choice's text, by index (see [`Secrets::redact_piece`]).
    held_texts: Vec<Held>,
    /// What is held back of each tool call's arguments, by (choice, call).
    held_arguments: Vec<((u32, u32), Held)>,
}

impl<C: CompletionCodec> Streamed<C> {
    async fn run(
        self,
        request: types::CompletionRequest,
        frames: mpsc::Sender<Bytes>,
        started: Started,
    ) {
        let Streamed {
            state,
            mut call,
            codec,
            mut draft,
            mut guarded,
            caching,
        } = self;
        let id = draft.id().to_string();
        let mut template = Some(request);
        let mut untouched = Untouched {
            codec,
            frames,
            started,
        };
        // One pass per try; a try that fails before anything reached the
        // caller hands the caller's side to the next one.
        loop {
            let next = tokio::select! {
                // A first try is ready at once: the abort signal is not even subscribed to.
                biased;
                attempt = call.failover.next(&state.runtime) => attempt,
                // Shutdown's grace is over while waiting out a backoff.
                () = state.aborted() => {
                    call.failover.note(&mut draft);
                    let error = ApiError::ShuttingDown;
                    record::save(&state, draft.failure(&error)).await;
                    let _ = untouched.started.send(Err(error));
                    return;
                }
            };
            let Some(attempt) = next else {
                call.failover.note(&mut draft);
                let error = draft.redact(call.failover.take_error());
                record::save(&state, draft.failure(&error)).await;
                let _ = untouched.started.send(Err(error));
                return;
            };
            let Some(mut request) = call.failover.request(&mut template) else {
                let error = ApiError::Internal("a try without its request".into());
                record::save(&state, draft.failure(&error)).await;
                let _ = untouched.started.send(Err(error));
                return;
            };
            attempt.aim(&mut request.route, &mut request.model);
            let ctx = call.context(&attempt);
            let leg = &attempt.leg;
            let limit = call.failover.try_timeout();
            let try_started = Instant::now();
            let mut pump = Pump {
                id: call.invocation_id,
                envelope: Envelope {
                    invocation_id: &id,
                    project_id: &call.project,
                    kind: call.kind,
                    model: &leg.model,
                },
                served: call.served(),
                first_frame: FirstFrame {
                    metrics: &state.metrics,
                    route: &leg.route.id,
                    arrived: draft.started(),
                },
                codec: untouched.codec,
                frames: untouched.frames,
                started: Some(untouched.started),
                texts: Vec::new(),
                usage: None,
                secrets: call.secrets.clone(),
                held_texts: Vec::new(),
                held_arguments: Vec::new(),
            };

            let (chunks_tx, mut chunks) = mpsc::channel::<types::Chunk>(FRAME_BUFFER);
            let plugin_call = tokio::time::timeout(
                limit,
                state
                    .runtime
                    .complete_stream(&leg.plugin, &ctx, request, chunks_tx),
            );
            tokio::pin!(plugin_call);

            let end = loop {
                tokio::select! {
                    // Deliver what the plugin already sent before looking at how it ended.
                    biased;
                    Some(chunk) = chunks.recv() => {
                        if !pump.forward(chunk).await {
                            break End::ClientGone;
                        }
                    }
                    result = &mut plugin_call => {
                        let result = match result {
                            Ok(result) => result.map_err(ApiError::from),
                            Err(_) => Err(timeout_error(limit)),
                        };
                        break End::Finished(result);
                    }
                    _ = pump.frames.closed() => break End::ClientGone,
                    () = state.aborted() => break End::ShuttingDown,
                }
            };
            // Chunks sent just before the plugin returned are still queued.
            let mut client_gone = matches!(end, End::ClientGone);
            while !client_gone {
                let Ok(chunk) = chunks.try_recv() else { break };
                client_gone = !pump.forward(chunk).await;
            }

            match end {
                End::Finished(Err(error)) if !client_gone && pump.started.is_some() => {
                    // Nothing reached the caller: another try (or the error
                    // with its own status) may still answer it. What this
                    // try reported of its usage is dropped with it.
                    call.failover.failed(try_started, error, &ctx.trace);
                    let Pump {
                        codec,
                        frames,
                        started: Some(started),
                        ..
                    } = pump
                    else {
                        return;
                    };
                    untouched = Untouched {
                        codec,
                        frames,
                        started,
                    };
                    continue;
                }
                End::Finished(Ok(mut completion)) if !client_gone => {
                    call.failover.succeeded(try_started);
                    call.failover.note(&mut draft);
                    let (usage, cost_usd) = call.metered(completion.usage.as_ref());
                    call.failover.answered(&Answer {
                        usage: usage.as_ref(),
                        cost_usd,
                        ..Answer::of(&completion)
                    });
                    call.quota.settle(usage.as_ref(), cost_usd).await;
                    draft.usage(usage, cost_usd);
                    let usage = usage.as_ref().map(|usage| Metered { usage, cost_usd });
                    // Held back in case a key went on: it did not.
                    pump.release_held().await;
                    // Before the last frame: a codec sends what the streamed pieces lack of
                    // the whole texts and arguments, which must be what was streamed.
                    redact_completion(&pump.secrets, &mut completion);
                    let last_frame = pump.codec.last_frame(&pump.envelope, &completion, usage);
                    // The record keeps the whole answer, as if it had not been streamed.
                    pump.fill_texts(&mut completion);
                    // Complete: the next request may have it (stored before the caller
                    // learns the stream ended).
                    if let Some(caching) = &caching {
                        let kept = crate::cache::Answer::Completion(completion.clone());
                        caching.store(&state, kept, cost_usd).await;
                    }
                    let last_frame = match &mut guarded {
                        Some(guarded) => {
                            // Observing guards judge an answer the caller already has: it
                            // gets its end first. The body stays open until the record is
                            // saved, so shutdown still waits for the record.
                            pump.mark_started();
                            let _ = pump.frames.send(last_frame).await;
                            completion =
                                guarded.observe_answer(&state, &mut draft, completion).await;
                            None
                        }
                        None => Some(last_frame),
                    };
                    let mut record = pump.codec.completion(&pump.envelope, &completion, usage);
                    if let Some(kept) = pump.codec.keep(&pump.envelope, &completion) {
                        record = draft.redact_answer(record);
                        record::keep(&state, &draft, &record, kept).await;
                    }
                    // Record before the last frame (after it when guards observe, above, but
                    // still before the body ends): once it ends, shutdown may proceed.
                    record::save(&state, draft.success(200, record)).await;
                    if let Some(last_frame) = last_frame {
                        pump.mark_started();
                        let _ = pump.frames.send(last_frame).await;
                    }
                }
                End::Finished(Err(error)) if !client_gone => {
                    // Text had flowed: the stream cannot be tried again.
                    call.failover.failed(try_started, error, &ctx.trace);
                    call.failover.note(&mut draft);
                    let error = draft.redact(call.failover.take_error());
                    let (usage, cost) = call.metered(pump.usage.as_ref());
                    call.quota.settle(usage.as_ref(), cost).await;
                    draft.usage(usage, cost);
                    record::save(&state, draft.failure(&error)).await;
                    pump.tell_error(error).await;
                }
                End::ShuttingDown if !client_gone => {
                    // The upstream call is dropped with `plugin_call`; the caller
                    // learns why its answer stops here, and the record keeps the
                    // part that was sent and its usage so far.
                    call.failover.cut_short(try_started, "shutdown");
                    call.failover.note(&mut draft);
                    let (usage, cost) = call.metered(pump.usage.as_ref());
                    call.quota.settle(usage.as_ref(), cost).await;
                    draft.usage(usage, cost);
                    let error = ApiError::ShuttingDown;
                    let status = if pump.started.is_some() {
                        error.status().as_u16()
                    } else {
                        200
                    };
                    let partial = pump.partial_text();
                    record::save(
                        &state,
                        draft.cancelled(status, &error.message(), Some(partial)),
                    )
                    .await;
                    pump.tell_error(error).await;
                }
                _ => {
                    // The caller left: dropping the plugin call above cancelled the
                    // upstream request. Keep what was known.
                    call.failover.cut_short(try_started, "client_gone");
                    call.failover.note(&mut draft);
                    let (usage, cost) = call.metered(pump.usage.as_ref());
                    call.quota.settle(usage.as_ref(), cost).await;
                    draft.usage(usage, cost);
                    let status = if pump.started.is_some() {
                        CLIENT_CLOSED_REQUEST
                    } else {
                        200
                    };
                    let partial = pump.partial_text();
                    record::save(
                        &state,
                        draft.cancelled(status, "the client disconnected", Some(partial)),
                    )
                    .await;
                }
            }
            return;
        }
    }
}

impl<C: CompletionCodec> Pump<'_, C> {
    /// Sends one chunk's reasoning, text and tool-call pieces to the caller (the
    /// model reasons before it answers); false when the caller is gone.
    async fn forward(&mut self, chunk: types::Chunk) -> bool {
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        let reasoning: Vec<types::ReasoningDelta> = (chunk.reasoning.into_iter())
            .filter(|piece| (piece.index as usize) < MAX_CHOICES)
            .map(|mut piece| {
                piece.text = self.secrets.redact_owned(std::mem::take(&mut piece.text));
                piece
            })
            .collect();
        if !self.forward_reasoning(reasoning).await {
            return false;
        }
        let deltas = chunk
            .deltas
            .into_iter()
            .map(|mut delta| {
                delta.text = self.redact_text(delta.index, delta.text);
                delta
            })
            .collect();
        if !self.forward_text(deltas).await {
            return false;
        }
        let calls: Vec<types::ToolCallDelta> = chunk
            .tool_calls
            .into_iter()
            .filter(|call| (call.index as usize) < MAX_CHOICES && (call.call as usize) < MAX_CALLS)
            .map(|mut call| {
                call.arguments = self.redact_arguments(call.index, call.call, call.arguments);
                for text in [&mut call.id, &mut call.name].into_iter().flatten() {
                    *text = self.secrets.redact_owned(std::mem::take(text));
                }
                call
            })
            .collect();
        self.forward_calls(calls).await
    }

    /// Sends reasoning pieces (an empty list sends nothing); false when the caller is gone.
    async fn forward_reasoning(&mut self, pieces: Vec<types::ReasoningDelta>) -> bool {
        if pieces.is_empty() {
            return true;
        }
        match self.codec.reasoning_frame(&self.envelope, &pieces) {
            Some(frame) => {
                self.mark_started();
                self.frames.send(frame).await.is_ok()
            }
            None => true,
        }
    }

    /// Sends tool-call pieces (an empty list sends nothing); false when the caller is gone.
    async fn forward_calls(&mut self, calls: Vec<types::ToolCallDelta>) -> bool {
        if calls.is_empty() {
            return true;
        }
        match self.codec.tool_call_frame(&self.envelope, &calls) {
            Some(frame) => {
                self.mark_started();
                self.frames.send(frame).await.is_ok()
            }
            None => true,
        }
    }

    /// Sends text (already redacted); false when the caller is gone.
    async fn forward_text(&mut self, deltas: Vec<types::TextDelta>) -> bool {
        let deltas: Vec<types::TextDelta> = deltas
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
            if self.texts.len() <= index {
                self.texts.resize(index + 1, String::new());
            }
            self.texts[index].push_str(&delta.text);
        }
        self.mark_started();
        let frame = self.codec.delta_frame(&self.envelope, &deltas);
        self.frames.send(frame).await.is_ok()
    }

    /// A choice's next text, redacted, as far as it can be sent now.
    fn redact_text(&mut self, index: u32, text: String) -> String {
        let index = index as usize;
        if self.secrets.is_empty() || index >= MAX_CHOICES {
            // Nothing to look for; or not accumulated either: redacted whole.
            return self.secrets.redact_owned(text);
        }
        if self.held_texts.len() <= index {
            self.held_texts.resize_with(index + 1, Held::default);
        }
        self.secrets.redact_piece(&mut self.held_texts[index], text)
    }

    /// A tool call's next arguments piece, redacted, as far as it can be sent now.
    fn redact_arguments(&mut self, index: u32, call: u32, arguments: String) -> String {
        if self.secrets.is_empty() {
            return arguments;
        }
        let at = match self
            .held_arguments
            .iter()
            .position(|(of, _)| *of == (index, call))
        {
            Some(at) => at,
            None => {
                self.held_arguments.push(((index, call), Held::default()));
                self.held_arguments.len() - 1
            }
        };
        self.secrets
            .redact_piece(&mut self.held_arguments[at].1, arguments)
    }

    /// Sends what was held back (the stream ended without the rest of a key); false when
    /// the caller is gone.
    async fn release_held(&mut self) -> bool {
        let deltas: Vec<types::TextDelta> = self
            .held_texts
            .iter_mut()
            .enumerate()
            .filter(|(_, held)| !held.is_empty())
            .map(|(index, held)| types::TextDelta {
                index: index as u32,
                text: held.release(),
            })
            .collect();
        let calls: Vec<types::ToolCallDelta> = self
            .held_arguments
            .iter_mut()
            .filter(|(_, held)| !held.is_empty())
            .map(|((index, call), held)| types::ToolCallDelta {
                index: *index,
                call: *call,
                id: None,
                name: None,
                arguments: held.release(),
            })
            .collect();
        // Sent as it is: redacted already, and nothing of it is held again.
        self.forward_text(deltas).await && self.forward_calls(calls).await
    }

    /// The response's head goes out now, with status 200.
    fn mark_started(&mut self) {
        if let Some(started) = self.started.take() {
            let _ = started.send(Ok(std::mem::take(&mut self.served)));
            let first = &self.first_frame;
            first
                .metrics
                .first_token(first.route, first.arrived.elapsed());
        }
    }

    /// Tells the caller how its request ended: with the error's own status
    /// when nothing was sent yet, else as a last error frame.
    async fn tell_error(&mut self, error: ApiError) {
        match self.started.take() {
            Some(started) => {
                let _ = started.send(Err(error));
            }
            None => {
                let frame = self.codec.error_frame(&error, &self.id);
                let _ = self.frames.send(frame).await;
            }
        }
    }

    /// Moves the streamed text into the choices the plugin's result left
    /// without one (a plugin may send text only as deltas). The stream is over:
    /// the texts are not needed after this.
    fn fill_texts(&mut self, completion: &mut types::Completion) {
        for choice in &mut completion.choices {
            if choice.text.is_empty()
                && let Some(streamed) = self.texts.get_mut(choice.index as usize)
            {
                choice.text = std::mem::take(streamed);
            }
        }
    }

    /// What the record keeps of an answer cut short: the text sent so far.
    fn partial_text(&self) -> String {
        serde_json::json!({"partialText": self.texts}).to_string()
    }
}

/// The plugin's whole answer without the request's provider keys, in every text a caller
/// or a record gets of it.
pub(super) fn redact_completion(secrets: &Secrets, completion: &mut types::Completion) {
    if secrets.is_empty() {
        return;
    }
    let redact = |text: &mut String| *text = secrets.redact_owned(std::mem::take(text));
    redact(&mut completion.model);
    for choice in &mut completion.choices {
        redact(&mut choice.text);
        if let Some(call) = &mut choice.function_call {
            redact(&mut call.name);
            redact(&mut call.arguments);
        }
        for call in &mut choice.tool_calls {
            redact(&mut call.id);
            redact(&mut call.name);
            redact(&mut call.arguments);
        }
        if let Some(logprobs) = &mut choice.logprobs {
            redact(logprobs);
        }
    }
}

/// The frames a stream of `completion` would have been, made at once: what a stream
/// request answered whole (held for its guards) sends.
pub(super) fn replay<C: CompletionCodec>(
    codec: &mut C,
    envelope: &Envelope<'_>,
    completion: &types::Completion,
    usage: Option<Metered<'_>>,
) -> Vec<Bytes> {
    let mut frames = Vec::new();
    for choice in &completion.choices {
        let index = choice.index;
        let reasoning: Vec<types::ReasoningDelta> = (choice.reasoning.iter().enumerate())
            .map(|(block, reasoning)| types::ReasoningDelta {
                index,
                block: u32::try_from(block).unwrap_or(u32::MAX),
                text: reasoning.text.clone(),
                signature: reasoning.signature.clone(),
                redacted: reasoning.redacted.clone(),
            })
            .collect();
        if !reasoning.is_empty()
            && let Some(frame) = codec.reasoning_frame(envelope, &reasoning)
        {
            frames.push(frame);
        }
        if !choice.text.is_empty() {
            let delta = types::TextDelta {
                index,
                text: choice.text.clone(),
            };
            frames.push(codec.delta_frame(envelope, &[delta]));
        }
        let calls: Vec<types::ToolCallDelta> = (choice.tool_calls.iter().enumerate())
            .map(|(call, tool)| types::ToolCallDelta {
                index,
                call: u32::try_from(call).unwrap_or(u32::MAX),
                id: Some(tool.id.clone()),
                name: Some(tool.name.clone()),
                arguments: tool.arguments.clone(),
            })
            .collect();
        if !calls.is_empty()
            && let Some(frame) = codec.tool_call_frame(envelope, &calls)
        {
            frames.push(frame);
        }
    }
    frames.push(codec.last_frame(envelope, completion, usage));
    frames
}
