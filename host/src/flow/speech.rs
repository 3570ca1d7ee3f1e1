//! Speech: text spoken by the plugin, its audio sent to the caller as the provider sends it.
//!
//! As a streamed completion ([`super::stream`]), the plugin runs in a task of its own, which
//! records the invocation however it ends, and the HTTP status is decided by the first thing
//! the plugin produces: an error before any audio may be tried again or on a fallback route,
//! and with no try left is answered with its own status. Once audio has flowed, a failure cuts
//! the body ([`BodyCut`]): audio has no frame to say it failed, and a clean end would pass a
//! part of it off as all of it. The request's guards see its text; the record keeps the audio
//! as `{kind, media_type, bytes, sha256}`, never its bytes; the cost is the characters the
//! input has (counted here, never by the plugin) and the tokens the plugin reports.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::HeaderMap;
use tokio::sync::{mpsc, oneshot};

use super::call::{Call, Served, timeout_error};
use super::failover::Try;
use super::guard::Guards;
use super::record::{self, CLIENT_CLOSED_REQUEST, CLIENT_LEFT, Draft};
use super::{Reply, Speak};
use crate::encoding::Sha256Hasher;
use crate::error::ApiError;
use crate::http::{BodyCut, cuttable_response};
use crate::plugins::{CallContext, types};
use crate::state::AppState;
use crate::store::TokenUsage;
use crate::traces::Answer;

/// Audio chunks buffered between the plugin and a slow caller before the plugin waits.
const CHUNK_BUFFER: usize = 16;

/// Checks the text with the request's guards, then starts the speech; answers once the plugin
/// has sent its first audio (or failed on every try).
pub(super) async fn start(
    state: &Arc<AppState>,
    draft: &mut Draft,
    call: Call,
    guards: Guards<'_>,
    speak: Speak,
) -> Result<Reply, ApiError> {
    let Speak {
        input,
        voice,
        format,
        media_type,
    } = speak;
    let params = guards.params.to_owned();
    let input = guards.check_embedding(state, draft, vec![input]).await?;
    let input = input.into_iter().next().unwrap_or_default();
    // What the provider is sent, and bills: the text as the guards left it.
    let characters = super::quota::characters(&input);
    let request = types::SpeechRequest {
        // Each try sets the route of its upstream.
        route: types::Route::default(),
        model: call.leg().model.clone(),
        input,
        voice,
        format,
        params,
    };
    let id = draft.id();
    let mut headers = HeaderMap::new();
    call.quota.set_headers(&mut headers);
    let (body, body_rx) = mpsc::channel(CHUNK_BUFFER);
    let (started, started_rx) = oneshot::channel();
    let speaking = Speaking {
        state: state.clone(),
        call,
        draft: draft.give_to_stream(),
        body,
        started: Some(started),
        served: Served::default(),
        audio: Sha256Hasher::default(),
        media_type,
        characters,
    };
    tokio::spawn(speaking.run(request));
    match started_rx.await {
        Ok(Ok(served)) => {
            let mut response = cuttable_response(body_rx, media_type, &id);
            served.set_headers(&mut headers);
            response.headers_mut().extend(headers);
            Ok(Reply::Stream(response))
        }
        Ok(Err(error)) => Ok(Reply::Recorded(error)),
        Err(_) => Err(ApiError::Internal(
            "the speech task ended unannounced".into(),
        )),
    }
}

/// A speech, as its task takes it over.
struct Speaking {
    state: Arc<AppState>,
    call: Call,
    draft: Draft,
    /// The caller's body.
    body: mpsc::Sender<Result<Bytes, BodyCut>>,
    /// `Some` until the first audio (or the error that replaces it) is sent.
    started: Option<oneshot::Sender<Result<Served, ApiError>>>,
    /// The route and upstream of the current try, for the response's head.
    served: Served,
    /// What the caller was sent.
    audio: Sha256Hasher,
    media_type: &'static str,
    /// The input's characters, as sent to the provider.
    characters: u32,
}

/// How a try ended.
enum End {
    Finished(Result<types::Speech, ApiError>),
    ClientGone,
    /// Shutdown's grace period is over.
    ShuttingDown,
}

impl Speaking {
    /// Tries until one speaks, the caller leaves, or none is left, and records how the request
    /// ended.
    async fn run(mut self, request: types::SpeechRequest) {
        let mut template = Some(request);
        loop {
            let aim = |request: &mut types::SpeechRequest, attempt: &Try| {
                attempt.aim(&mut request.route, &mut request.model);
            };
            let next = (self.call).next_try(&self.state, &mut self.draft, &mut template, aim);
            let (attempt, request) = match next.await {
                Ok(next) => next,
                Err(error) => {
                    record::save(&self.state, self.draft.failure(&error)).await;
                    return tell(self.started, &self.body, error).await;
                }
            };
            let ctx = self.call.context(&attempt);
            let try_started = Instant::now();
            self.served = self.call.served();
            let limit = self.call.failover.try_timeout();
            let end = match self.run_try(&attempt, &ctx, request, limit).await {
                End::Finished(Ok(_)) if self.nothing_sent() => End::Finished(Err(
                    ApiError::ProviderFailed("the provider answered without audio".into()),
                )),
                end => end,
            };
            return match end {
                End::Finished(Err(error)) if self.nothing_sent() => {
                    // Nothing reached the caller: another try (or the error with its own
                    // status) may still answer it.
                    self.call.failover.failed(try_started, error, &ctx.trace);
                    continue;
                }
                End::Finished(Ok(speech)) => {
                    self.call.failover.succeeded(try_started);
                    self.answered(speech).await
                }
                End::Finished(Err(error)) => {
                    self.call.failover.failed(try_started, error, &ctx.trace);
                    self.failed().await
                }
                End::ShuttingDown => self.cut_short(false, try_started).await,
                End::ClientGone => self.cut_short(true, try_started).await,
            };
        }
    }

    /// Sends what one try's plugin speaks until it ends, the caller leaves, or shutdown's
    /// grace is over.
    async fn run_try(
        &mut self,
        attempt: &Try,
        ctx: &CallContext,
        request: types::SpeechRequest,
        limit: Duration,
    ) -> End {
        let state = self.state.clone();
        let (audio_tx, mut audio) = mpsc::channel::<Bytes>(CHUNK_BUFFER);
        let plugin = &attempt.leg.plugin;
        let plugin_call =
            tokio::time::timeout(limit, state.runtime.speak(plugin, ctx, request, audio_tx));
        tokio::pin!(plugin_call);
        let end = loop {
            tokio::select! {
                // Deliver what the plugin already sent before looking at how it ended.
                biased;
                Some(chunk) = audio.recv() => {
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
                _ = self.body.closed() => break End::ClientGone,
                () = state.aborted() => break End::ShuttingDown,
            }
        };
        if matches!(end, End::ClientGone) {
            return end;
        }
        while let Ok(chunk) = audio.try_recv() {
            if !self.forward(chunk).await {
                return End::ClientGone;
            }
        }
        end
    }

    /// Sends audio to the caller (the first opens the response, status 200); false when the
    /// caller is gone.
    async fn forward(&mut self, chunk: Bytes) -> bool {
        if let Some(started) = self.started.take() {
            let _ = started.send(Ok(std::mem::take(&mut self.served)));
            let route = &self.call.leg().route.id;
            (self.state.metrics).first_token(route, self.draft.started().elapsed());
        }
        self.audio.update(&chunk);
        self.body.send(Ok(chunk)).await.is_ok()
    }

    /// Whether the caller has seen nothing yet (not even the response's head).
    fn nothing_sent(&self) -> bool {
        self.started.is_some()
    }

    /// What the record keeps of the audio sent.
    fn summary(&self) -> String {
        serde_json::json!({
            "kind": "audio",
            "media_type": self.media_type,
            "bytes": self.audio.bytes(),
            "sha256": self.audio.hex(),
        })
        .to_string()
    }

    /// The plugin is done: the call is charged and recorded, then the body ends (the record
    /// is saved first: once the body ends, shutdown may proceed).
    async fn answered(mut self, speech: types::Speech) {
        let mut usage = (speech.usage.as_ref())
            .map(TokenUsage::from)
            .unwrap_or_default();
        usage.characters = Some(self.characters);
        let answer = Answer {
            response_model: Some(&speech.model),
            ..Answer::default()
        };
        (self.call)
            .settle(&mut self.draft, Some(usage), Some(answer))
            .await;
        let summary = self.summary();
        record::save(&self.state, self.draft.success(200, summary)).await;
    }

    /// The try failed after audio had flowed: charged what was reserved (the provider bills
    /// what it made), recorded as failed, and the caller's body cut.
    async fn failed(mut self) {
        let error = self.draft.redact(self.call.failover.take_error());
        self.call.settle_cut(&mut self.draft, None).await;
        record::save(&self.state, self.draft.failure(&error)).await;
        tell(None, &self.body, error).await;
    }

    /// The gateway ended the try (the caller left, or shutdown's grace is over): the record
    /// keeps what was sent; a caller still there has its body cut.
    async fn cut_short(mut self, client_gone: bool, try_started: Instant) {
        let why = if client_gone {
            "client_gone"
        } else {
            "shutdown"
        };
        self.call.failover.cut_short(try_started, why);
        let sent = !self.nothing_sent();
        if sent {
            self.call.settle_cut(&mut self.draft, None).await;
        } else {
            self.call.settle(&mut self.draft, None, None).await;
        }
        let partial = Some(self.summary());
        if client_gone {
            let status = if sent { 200 } else { CLIENT_CLOSED_REQUEST };
            let cancelled = self.draft.cancelled(status, CLIENT_LEFT, partial);
            record::save(&self.state, cancelled).await;
            return;
        }
        let error = ApiError::ShuttingDown;
        let status = if sent { 200 } else { error.status().as_u16() };
        let cancelled = self.draft.cancelled(status, &error.message(), partial);
        record::save(&self.state, cancelled).await;
        tell(self.started, &self.body, error).await;
    }
}

/// Tells the caller how its request ended: with the error's own status when nothing was sent
/// yet (`started`), else by cutting its body.
async fn tell(
    started: Option<oneshot::Sender<Result<Served, ApiError>>>,
    body: &mpsc::Sender<Result<Bytes, BodyCut>>,
    error: ApiError,
) {
    match started {
        Some(started) => {
            let _ = started.send(Err(error));
        }
        None => {
            let _ = body.send(Err(BodyCut(error.message()))).await;
        }
    }
}
