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
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::HeaderMap;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::cache::Caching;
use super::call::{Call, Served, timeout_error};
use super::failover::{Leg, Try};
use super::guard::Guarded;
use super::record::{self, CLIENT_CLOSED_REQUEST, CLIENT_LEFT, Draft};
use super::{Answering, CompletionCodec, Envelope, Kind, Metered, Reply};
use crate::error::ApiError;
use crate::http::sse_response;
use crate::metrics::Metrics;
use crate::plugins::{CallContext, types};
use crate::redact::{Held, Secrets};
use crate::state::AppState;
use crate::store::TokenUsage;
use crate::traces::Answer;

/// Frames buffered between the plugin and a slow client before the plugin waits.
const FRAME_BUFFER: usize = 64;
/// Choice indexes beyond this are a plugin bug; their text is not accumulated.
const MAX_CHOICES: usize = 128;
/// Tool-call positions beyond this are a plugin bug; their streamed pieces are
/// dropped (codecs keep state per call), the final completion still has them.
const MAX_CALLS: usize = 1024;

/// A streamed request, as its task takes it over.
struct Streamed {
    state: Arc<AppState>,
    call: Call,
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
    answering: Answering<C>,
    draft: Draft,
) -> Result<Reply, ApiError> {
    let id = draft.id();
    let mut headers = HeaderMap::new();
    call.quota.set_headers(&mut headers);
    if let Some(status) = draft.cache_status() {
        super::cache::set_header(status, &mut headers);
    }
    let (frames_tx, frames_rx) = mpsc::channel(FRAME_BUFFER);
    let (started_tx, started_rx) = oneshot::channel();
    let pump = Pump {
        id,
        who: Who {
            invocation_id: id.to_string(),
            project: call.project.clone(),
            kind: call.kind,
            leg: call.leg().clone(),
        },
        served: Served::default(),
        metrics: state.metrics.clone(),
        arrived: draft.started(),
        codec: answering.codec,
        frames: frames_tx,
        started: Some(started_tx),
        texts: Vec::new(),
        usage: None,
        secrets: call.secrets.clone(),
        held_texts: Vec::new(),
        held_arguments: Vec::new(),
        generated: false,
    };
    let streamed = Streamed {
        state,
        call,
        draft,
        guarded: answering.guarded,
        caching: answering.caching,
    };
    tokio::spawn(streamed.run(request, pump));
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

/// How a try of the stream ended.
enum End {
    Finished(Result<types::Completion, ApiError>),
    ClientGone,
    /// Shutdown's grace period is over.
    ShuttingDown,
}

/// Why the gateway cut a stream short.
#[derive(Clone, Copy)]
enum Cut {
    ClientGone,
    ShuttingDown,
}

/// Tells the flow (waiting in [`start`]) whether the stream started (`Ok`,
/// with the route and upstream serving it) or failed before it sent anything (`Err`,
/// answered with the error's own status).
type Started = oneshot::Sender<Result<Served, ApiError>>;

/// What every frame of the stream says of the request.
struct Who {
    invocation_id: String,
    project: Arc<str>,
    kind: Kind,
    /// The route and model of the current try.
    leg: Arc<Leg>,
}

impl Who {
    fn envelope(&self) -> Envelope<'_> {
        Envelope {
            invocation_id: &self.invocation_id,
            project_id: &self.project,
            kind: self.kind,
            model: &self.leg.model,
        }
    }
}

/// The plugin's chunks on their way to the caller, and what was sent so far. The caller's
/// side (codec, frames, the response's head) goes from a try that sent nothing to the next.
struct Pump<C> {
    id: Uuid,
    who: Who,
    /// The route and upstream of this try, for the response's head.
    served: Served,
    /// Told when the first frame goes out.
    metrics: Arc<Metrics>,
    /// When the request arrived.
    arrived: Instant,
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
    /// Whether the plugin streamed anything (its provider generated output, which it bills
    /// whether or not the caller saw it: a guard may hold the stream back).
    generated: bool,
}

impl Streamed {
    /// Tries until one answers, the caller leaves, or none is left, and records how the
    /// request ended.
    async fn run<C: CompletionCodec>(
        mut self,
        request: types::CompletionRequest,
        mut pump: Pump<C>,
    ) {
        let mut template = Some(request);
        loop {
            let aim = |request: &mut types::CompletionRequest, attempt: &Try| {
                attempt.aim(&mut request.route, &mut request.model);
            };
            let next = (self.call).next_try(&self.state, &mut self.draft, &mut template, aim);
            let (attempt, request) = match next.await {
                Ok(next) => next,
                Err(error) => return self.refused(pump, error).await,
            };
            let ctx = self.call.context(&attempt);
            let try_started = Instant::now();
            pump.begin_try(attempt.leg.clone(), self.call.served());
            let limit = self.call.failover.try_timeout();
            let end = pump
                .run_try(&self.state, &attempt, &ctx, request, limit)
                .await;
            return match end {
                End::Finished(Err(error)) if pump.nothing_sent() => {
                    // Nothing reached the caller: another try (or the error with its own
                    // status) may still answer it. What this try reported of its usage is
                    // dropped with it.
                    self.call.failover.failed(try_started, error, &ctx.trace);
                    continue;
                }
                End::Finished(Ok(completion)) => {
                    self.call.failover.succeeded(try_started);
                    self.answered(pump, completion).await
                }
                End::Finished(Err(error)) => {
                    // Text had flowed: the stream cannot be tried again.
                    self.call.failover.failed(try_started, error, &ctx.trace);
                    self.failed(pump).await
                }
                End::ShuttingDown => self.cut_short(pump, Cut::ShuttingDown, try_started).await,
                End::ClientGone => self.cut_short(pump, Cut::ClientGone, try_started).await,
            };
        }
    }

    /// No try is left (or shutdown came between tries) and nothing was sent: the caller
    /// gets the error with its own status.
    async fn refused<C: CompletionCodec>(self, mut pump: Pump<C>, error: ApiError) {
        record::save(&self.state, self.draft.failure(&error)).await;
        pump.tell_error(error).await;
    }

    /// The plugin's answer is whole: the caller gets its end, the record all of it.
    async fn answered<C: CompletionCodec>(
        self,
        mut pump: Pump<C>,
        mut completion: types::Completion,
    ) {
        let Streamed {
            state,
            mut call,
            mut draft,
            mut guarded,
            caching,
        } = self;
        let answer = Some(Answer::of(&completion));
        let charged = call
            .settle(
                &mut draft,
                completion.usage.as_ref().map(TokenUsage::from),
                answer,
            )
            .await;
        let usage = charged.metered();
        // Held back in case a key went on: it did not.
        pump.release_held().await;
        // Before the last frame: a codec sends what the streamed pieces lack of the whole
        // texts and arguments, which must be what was streamed.
        redact_completion(&pump.secrets, &mut completion);
        let envelope = pump.who.envelope();
        let last_frame = pump.codec.last_frame(&envelope, &completion, usage);
        // The record keeps the whole answer, as if it had not been streamed.
        pump.fill_texts(&mut completion);
        // Complete: the next request may have it (stored before the caller learns the
        // stream ended).
        if let Some(caching) = &caching {
            let kept = crate::cache::Answer::Completion(completion.clone());
            caching.store(&state, kept, charged.cost_usd).await;
        }
        let last_frame = match &mut guarded {
            Some(guarded) => {
                // Observing guards judge an answer the caller already has: it gets its end
                // first. The body stays open until the record is saved, so shutdown still
                // waits for the record.
                pump.send_last(last_frame).await;
                completion = guarded.observe_answer(&state, &mut draft, completion).await;
                None
            }
            None => Some(last_frame),
        };
        let envelope = pump.who.envelope();
        let mut record = pump.codec.completion(&envelope, &completion, usage);
        if let Some(kept) = pump.codec.keep(&envelope, &completion) {
            record = draft.redact_answer(record);
            record::keep(&state, &draft, &record, kept).await;
        }
        // Record before the last frame (after it when guards observe, above, but still
        // before the body ends): once it ends, shutdown may proceed.
        record::save(&state, draft.success(200, record)).await;
        if let Some(last_frame) = last_frame {
            pump.send_last(last_frame).await;
        }
    }

    /// The try failed after text had flowed: the caller's stream ends with an error frame.
    async fn failed<C: CompletionCodec>(mut self, mut pump: Pump<C>) {
        let error = self.draft.redact(self.call.failover.take_error());
        (self.call)
            .settle_cut(&mut self.draft, pump.usage.as_ref())
            .await;
        record::save(&self.state, self.draft.failure(&error)).await;
        pump.tell_error(error).await;
    }

    /// The gateway ended the try (`cut`): the record keeps the part that was sent and its
    /// usage so far; a caller still there learns why its answer stops here.
    async fn cut_short<C: CompletionCodec>(
        mut self,
        mut pump: Pump<C>,
        cut: Cut,
        try_started: Instant,
    ) {
        let why = match cut {
            Cut::ClientGone => "client_gone",
            Cut::ShuttingDown => "shutdown",
        };
        self.call.failover.cut_short(try_started, why);
        let sent = !pump.nothing_sent();
        if pump.generated {
            (self.call)
                .settle_cut(&mut self.draft, pump.usage.as_ref())
                .await;
        } else {
            (self.call)
                .settle(
                    &mut self.draft,
                    pump.usage.as_ref().map(TokenUsage::from),
                    None,
                )
                .await;
        }
        let partial = Some(pump.partial_text());
        match cut {
            Cut::ClientGone => {
                let status = if sent { 200 } else { CLIENT_CLOSED_REQUEST };
                let cancelled = self.draft.cancelled(status, CLIENT_LEFT, partial);
                record::save(&self.state, cancelled).await;
            }
            Cut::ShuttingDown => {
                let error = ApiError::ShuttingDown;
                let status = if sent { 200 } else { error.status().as_u16() };
                let cancelled = self.draft.cancelled(status, &error.message(), partial);
                record::save(&self.state, cancelled).await;
                pump.tell_error(error).await;
            }
        }
    }
}

impl<C: CompletionCodec> Pump<C> {
    /// Sends what one try's plugin streams until it ends, the caller leaves, or shutdown's
    /// grace is over.
    async fn run_try(
        &mut self,
        state: &AppState,
        attempt: &Try,
        ctx: &CallContext,
        request: types::CompletionRequest,
        limit: Duration,
    ) -> End {
        let (chunks_tx, mut chunks) = mpsc::channel::<types::Chunk>(FRAME_BUFFER);
        let plugin = &attempt.leg.plugin;
        let plugin_call = tokio::time::timeout(
            limit,
            (state.runtime).complete_stream(plugin, ctx, request, chunks_tx),
        );
        tokio::pin!(plugin_call);
        let end = loop {
            tokio::select! {
                // Deliver what the plugin already sent before looking at how it ended.
                biased;
                Some(chunk) = chunks.recv() => {
                    if !self.forward(chunk).await {
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
                _ = self.frames.closed() => break End::ClientGone,
                () = state.aborted() => break End::ShuttingDown,
            }
        };
        if matches!(end, End::ClientGone) {
            return end;
        }
        // Chunks sent just before the plugin returned are still queued. The upstream call
        // is dropped with `plugin_call` when the caller left.
        while let Ok(chunk) = chunks.try_recv() {
            if !self.forward(chunk).await {
                return End::ClientGone;
            }
        }
        end
    }

    /// Sends one chunk's reasoning, text and tool-call pieces to the caller (the
    /// model reasons before it answers); false when the caller is gone.
    async fn forward(&mut self, chunk: types::Chunk) -> bool {
        self.generated = true;
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
        match self.codec.reasoning_frame(&self.who.envelope(), &pieces) {
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
        match self.codec.tool_call_frame(&self.who.envelope(), &calls) {
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
        let frame = self.codec.delta_frame(&self.who.envelope(), &deltas);
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
            let route = &self.who.leg.route.id;
            self.metrics.first_token(route, self.arrived.elapsed());
        }
    }

    /// Whether the caller has seen nothing yet (not even the response's head).
    fn nothing_sent(&self) -> bool {
        self.started.is_some()
    }

    /// Sends the stream's last frame(s).
    async fn send_last(&mut self, frame: Bytes) {
        self.mark_started();
        let _ = self.frames.send(frame).await;
    }

    /// A new try on `leg`, served by `served`, begins: nothing of the last one counts.
    fn begin_try(&mut self, leg: Arc<Leg>, served: Served) {
        self.who.leg = leg;
        self.served = served;
        self.texts.clear();
        self.usage = None;
        self.held_texts.clear();
        self.held_arguments.clear();
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
