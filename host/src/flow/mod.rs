//! The one request flow every model endpoint goes through, whatever its wire
//! format and response mode, a module per step: `admit` (declared size, key, body,
//! project) -> `route` (what the body asks, the route, the key's scope, plugin and guards)
//! -> `cache` (a hit is answered from it) -> `quota` (rate limits and budgets) -> `guard`
//! the request -> `call` the plugin (tried again and on fallbacks by `failover`) -> answer,
//! `whole` (one JSON body) or `stream` (SSE) -> `record`. [`flow`] reads in that order.
//! Every request that enters [`serve`] ends as exactly one invocation record, shutdown and
//! callers who hang up included; so does every batch line [`run_line`] runs (a request the
//! gateway makes as a batch's key, its body given rather than read).
//!
//! What differs between API surfaces is how a body reads and how an answer
//! writes: that is a [`Surface`], a codec (see [`crate::surfaces`]). A new
//! surface adds a codec and a path in the server's dispatch, not a flow.

mod admit;
mod apart;
mod cache;
mod call;
mod failover;
mod guard;
mod media;
mod quota;
mod record;
mod route;
mod speech;
mod stream;
mod whole;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, StatusCode};
use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::http::{Body, error_response_with_body, json_text_response};
use crate::plugins::types;
use crate::state::AppState;
use crate::store::TokenUsage;
use call::Call;

/// The response header with the cost of a call answered whole.
pub const COST_HEADER: &str = "x-gateway-cost-usd";
pub use admit::read_counted;
pub use cache::CACHE_HEADER;
pub use record::{BodyPolicy, CLIENT_CLOSED_REQUEST, Draft, save};

/// Counts a request that spends no tokens (a tool call through `/mcp`) against its key's and
/// its project's requests-per-minute limits, as a cache hit is counted; refused, the 429's
/// error.
pub async fn admit_request(state: &AppState, key: crate::store::KeyRecord) -> Result<(), ApiError> {
    quota::Quota::admit_cached(state, key).await.map(drop)
}

/// A request's method, URI and headers, as a surface reads them.
pub type Head = hyper::http::request::Parts;

/// What a request asks the plugin for, as the invocation record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Chat,
    Embeddings,
    /// How many tokens a chat prompt takes, nothing generated.
    CountTokens,
    /// Documents ordered by their relevance to a query.
    Rerank,
    /// Images made from a prompt.
    Images,
    /// Audio written down, in its language or in English.
    Transcription,
    /// Text spoken: audio made from it.
    Speech,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Chat => "chat",
            Kind::Embeddings => "embeddings",
            Kind::CountTokens => "count_tokens",
            Kind::Rerank => "rerank",
            Kind::Images => "images",
            Kind::Transcription => "transcription",
            Kind::Speech => "speech",
        }
    }
}

/// Where a request goes, as its surface's body says it.
pub struct Target {
    /// The route id (`[providers.ID]`).
    pub route: String,
    pub kind: Kind,
    /// The model asked for; the route's default model otherwise.
    pub model: Option<String>,
    /// The plugin's pass-through parameters, as a JSON object text.
    pub params: String,
}

/// A prompt and what comes with it: what a completion and a token count both hand the plugin.
pub struct Prompted {
    pub prompt: types::Prompt,
    pub functions: Vec<types::FunctionDef>,
    pub function_choice: Option<types::FunctionChoice>,
    /// Set when the caller asked for reasoning (or for none).
    pub reasoning: Option<types::ReasoningConfig>,
}

/// What a surface's request asks of the plugin once it is validated, with the
/// codec that writes the answer. A surface that serves only one of these sets
/// the other's codec to [`Infallible`], so that it cannot ask for it.
pub enum Ask<C, E> {
    Complete {
        prompted: Prompted,
        codec: C,
    },
    Embed {
        input: Vec<String>,
        codec: E,
    },
    /// How many tokens the prompt takes for the model: nothing is generated, charged or
    /// cached.
    Count {
        prompted: Prompted,
        codec: CountCodec,
    },
    /// Documents ordered by their relevance to a query: answered whole, never cached.
    Rerank(Rerank),
    /// Images made from a prompt: answered whole, never cached.
    Images(Images),
    /// Audio written down: answered whole, never cached.
    Transcribe(Transcribe),
    /// Text spoken: the audio streamed as the provider sends it, never cached.
    Speak(Speak),
}

/// How a surface writes a token count: the answer's JSON text.
pub type CountCodec = fn(&Envelope<'_>, types::TokenCount) -> String;

/// What a rerank asks: its query and documents, with how its answer is written.
pub struct Rerank {
    pub query: String,
    /// In the caller's order: a result's index points here.
    pub documents: Vec<String>,
    /// Only this many results, the most relevant (at least 1).
    pub top_n: Option<u32>,
    /// Whether each result carries its document's text back.
    pub return_documents: bool,
    pub codec: RerankCodec,
}

/// How a surface writes a rerank's answer: its JSON text.
pub type RerankCodec = fn(&Envelope<'_>, &Ranked<'_>) -> String;

/// A rerank's answer, checked (each index a document's, the most relevant first, at most
/// `top_n`), as a surface writes it.
pub struct Ranked<'a> {
    pub results: &'a [types::RerankResult],
    /// The request's documents, when the caller asked for them back.
    pub documents: Option<&'a [String]>,
    /// The search units the provider bills, where it bills by them.
    pub search_units: Option<u32>,
    /// The tokens the provider counted, where it counted them.
    pub usage: Option<Metered<'a>>,
}

/// What an image generation asks: its prompt and how many images of what size and quality,
/// with how its answer is written.
pub struct Images {
    pub prompt: String,
    /// 1 to [`MAX_IMAGES`].
    pub n: u32,
    pub size: Option<String>,
    pub quality: Option<String>,
    /// The caller asked for URLs: an image the provider answers as bytes is then written as a
    /// `data:` URL.
    pub urls: bool,
    pub codec: ImagesCodec,
}

/// The most images one request may ask for (OpenAI's bound).
pub const MAX_IMAGES: u32 = 10;

/// How a surface writes an image generation's answer: its JSON text. Called twice, for the
/// caller (the images) and for the record (summaries in their place).
pub type ImagesCodec = fn(&Envelope<'_>, &Drawn<'_>) -> String;

/// An image generation's answer, checked (at least one image, at most the request's `n`, each
/// with a media type or a URL), as a surface writes it.
pub struct Drawn<'a> {
    pub images: Vec<Drawing<'a>>,
    /// When the answer was made, in seconds since the epoch.
    pub created: u64,
    /// The size and quality made and billed, where known.
    pub size: Option<&'a str>,
    pub quality: Option<&'a str>,
    /// The tokens the provider counted, where it bills images by them.
    pub usage: Option<Metered<'a>>,
}

/// One image of a [`Drawn`] answer.
pub struct Drawing<'a> {
    pub picture: Picture,
    pub revised_prompt: Option<&'a str>,
}

/// An image as an answer carries it.
pub enum Picture {
    /// Its bytes, base64-encoded.
    Base64(String),
    /// The provider's URL for it, or a `data:` URL of its bytes when the caller asked for URLs.
    Url(String),
    /// In a record: what the image was (`{kind, media_type, bytes, sha256}`), never its bytes.
    Summary(serde_json::Value),
}

/// What a transcription asks: the uploaded audio, with how its answer is written.
pub struct Transcribe {
    /// The file's bytes, as uploaded.
    pub audio: Vec<u8>,
    pub file_name: String,
    pub media_type: Option<String>,
    /// Into English (a translation).
    pub translate: bool,
    pub codec: Box<dyn TranscriptCodec>,
}

/// What a speech asks: the text, the voice, and the audio's format with its media type.
pub struct Speak {
    pub input: String,
    pub voice: String,
    /// As OpenAI names it (`mp3`, `opus`, ...): the plugin asks its provider for it.
    pub format: String,
    /// The answer's `Content-Type`, the format's.
    pub media_type: &'static str,
}

/// How a surface writes a transcription's answer, in the format its caller asked for.
pub trait TranscriptCodec: Send + Sync + 'static {
    fn answer(&self, envelope: &Envelope<'_>, written: &Written<'_>) -> Rendered;
}

/// A transcription's answer, as a surface writes it.
pub struct Written<'a> {
    pub transcription: &'a types::Transcription,
    /// Into English (a translation).
    pub translate: bool,
    /// The tokens the provider counted, where it bills by them.
    pub usage: Option<Metered<'a>>,
    /// The seconds of audio the provider bills, where it bills by them.
    pub seconds: Option<u32>,
}

/// An answer's body and its media type.
pub struct Rendered {
    pub body: String,
    pub content_type: &'static str,
}

/// An API surface's reading of one endpoint's request. The flow calls these
/// in its order (which is the order of the errors a caller can get), so a
/// surface decides what its body means, never when it is checked. A request's flow moves to a
/// task of its own when its caller leaves ([`serve`]), its body with it.
pub trait Surface: Sized + Send + 'static {
    /// The API's name, as the metrics label requests: `commonbase`, `openai`, `anthropic`,
    /// `gemini`.
    const NAME: &'static str;
    type Completion: CompletionCodec;
    type Embeddings: EmbeddingCodec;

    /// The project key the request carries. Commonbase's clients send it in
    /// `Authorization`; a surface whose clients put it elsewhere (another header, the
    /// query) says so here.
    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::bearer_key(&head.headers)
    }
    /// The body, checked for shape (types, duplicate keys, trailing bytes), with what its
    /// path says where the path names more than the endpoint (Gemini's model and method).
    fn parse(head: &Head, body: &[u8]) -> Result<Self, ApiError>;
    /// The caller's end user, for the record.
    fn user_id(&self) -> Option<&str>;
    /// Whatever project the body names agrees with the key's.
    fn check_project(&self, key_project: &str) -> Result<(), ApiError>;
    fn target(&self, config: &Config) -> Result<Target, ApiError>;
    /// Whether this endpoint serves `kind` (checked once the route is known).
    fn serves(kind: Kind) -> Result<(), ApiError>;
    /// Whether the caller wants the answer as a stream.
    fn stream(&self) -> bool;
    /// The plugin's input, validated (variables filled in, functions checked).
    fn ask(
        self,
        kind: Kind,
        config: &Config,
    ) -> Result<Ask<Self::Completion, Self::Embeddings>, ApiError>;
    /// An error, as this surface's clients expect to read it.
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value;
    /// The id of a kept answer this request continues (the Responses API's
    /// `previous_response_id`): the flow reads it for the key's project, before
    /// [`Surface::ask`], and hands it to [`Surface::continue_from`].
    fn previous(&self) -> Option<&str> {
        None
    }
    /// The conversation of the kept answer [`Surface::previous`] named: each turn's
    /// [`Kept::context`], the first turn first.
    fn continue_from(&mut self, turns: Vec<String>) -> Result<(), ApiError> {
        let _ = turns;
        Ok(())
    }
}

/// What a surface keeps of an answer for later requests, beside its record (the
/// Responses API's `store`): the answer's id and this turn of the conversation (JSON).
/// The flow stores it, with the answer as the caller got it, before the caller
/// has all of it, so that the next request finds it on any replica.
pub struct Kept {
    pub id: String,
    /// This turn's items: the request's own and the answer's, not those it continues.
    pub context: String,
    /// What it continues, if it continues a kept answer.
    pub parent: Option<Parent>,
}

/// The kept answer a [`Kept`] one continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    pub id: String,
    /// The bytes of its whole conversation, as loaded.
    pub conversation_bytes: u64,
}

/// What every answer of one request shares.
pub struct Envelope<'a> {
    pub invocation_id: &'a str,
    /// The project of the caller's key.
    pub project_id: &'a str,
    pub kind: Kind,
    pub model: &'a str,
}

/// A call's token usage and what it cost (`None` when the model's price is unknown).
#[derive(Debug, Clone, Copy)]
pub struct Metered<'a> {
    pub usage: &'a TokenUsage,
    pub cost_usd: Option<f64>,
}

/// How a surface writes a completion: whole, or as stream frames. The frame
/// methods take `&mut self` because a stream's format may depend on what was
/// sent before it (which content blocks are open, whether the opening event
/// went out): one codec value serves one request.
pub trait CompletionCodec: Send + Sync + 'static {
    /// The whole answer: the response body, and what a record keeps of a stream.
    fn completion(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> String;
    /// A stream frame carrying new text (never empty) for some choices.
    fn delta_frame(&mut self, envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Bytes;
    /// A stream frame carrying pieces of tool calls (never empty), if this
    /// surface streams them; otherwise the calls go out whole with the last
    /// frame (and a plugin built before WIT 0.1.2 sends none of these).
    fn tool_call_frame(
        &mut self,
        envelope: &Envelope<'_>,
        calls: &[types::ToolCallDelta],
    ) -> Option<Bytes> {
        let _ = (envelope, calls);
        None
    }
    /// A stream frame carrying pieces of the model's reasoning (never empty),
    /// if this surface shows reasoning; otherwise it goes out whole with the
    /// last frame, or not at all.
    fn reasoning_frame(
        &mut self,
        envelope: &Envelope<'_>,
        pieces: &[types::ReasoningDelta],
    ) -> Option<Bytes> {
        let _ = (envelope, pieces);
        None
    }
    /// The stream's last frame(s), once the plugin is done: every text was
    /// sent before, in delta frames.
    fn last_frame(
        &mut self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> Bytes;
    /// A frame telling a caller whose stream had started how it failed.
    fn error_frame(&mut self, error: &ApiError, invocation_id: &Uuid) -> Bytes;
    /// What to keep of the answer once it is whole (after [`CompletionCodec::completion`]
    /// or, streamed, [`CompletionCodec::last_frame`]); nothing by default.
    fn keep(&self, envelope: &Envelope<'_>, completion: &types::Completion) -> Option<Kept> {
        let _ = (envelope, completion);
        None
    }
}

/// How a surface writes embeddings, with the call's usage when the plugin
/// reported it (OpenAI's answer has a field for it).
pub trait EmbeddingCodec: Send + Sync + 'static {
    fn embeddings(
        &self,
        envelope: &Envelope<'_>,
        vectors: &[Vec<f32>],
        usage: Option<Metered<'_>>,
    ) -> String;
}

impl CompletionCodec for Infallible {
    fn completion(
        &self,
        _: &Envelope<'_>,
        _: &types::Completion,
        _: Option<Metered<'_>>,
    ) -> String {
        match *self {}
    }
    fn delta_frame(&mut self, _: &Envelope<'_>, _: &[types::TextDelta]) -> Bytes {
        match *self {}
    }
    fn last_frame(
        &mut self,
        _: &Envelope<'_>,
        _: &types::Completion,
        _: Option<Metered<'_>>,
    ) -> Bytes {
        match *self {}
    }
    fn error_frame(&mut self, _: &ApiError, _: &Uuid) -> Bytes {
        match *self {}
    }
}

impl EmbeddingCodec for Infallible {
    fn embeddings(&self, _: &Envelope<'_>, _: &[Vec<f32>], _: Option<Metered<'_>>) -> String {
        match *self {}
    }
}

/// What the flow produced.
enum Reply {
    /// A complete JSON answer, still to be recorded, with its headers.
    Json(String, AnswerHeaders),
    /// A complete answer of `content_type` whose record keeps `record` in its place (generated
    /// images' summaries instead of their bytes; a transcript in any format).
    Whole {
        body: String,
        content_type: &'static str,
        record: String,
        headers: AnswerHeaders,
    },
    /// A stream whose task records the invocation itself.
    Stream(Response<Body>),
    /// A stream answered whole (held for its guards), its frames made: still to be
    /// recorded (`record`: the answer as a record keeps a stream's).
    Replay {
        frames: Vec<Bytes>,
        record: String,
        headers: AnswerHeaders,
    },
    /// A failure the stream task has already recorded.
    Recorded(ApiError),
}

/// Serves one request of surface `S`, from its head to its record. A caller who hangs up does
/// not take the call with it: it runs to its end apart, and is recorded ([`apart`]).
pub async fn serve<S: Surface>(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: Uuid,
) -> Response<Body> {
    let work = {
        let state = state.clone();
        // Boxed, it is copied once, into its box (~12 KB: ~12k instructions of memcpy a request
        // under callgrind, 2%; written into `Box::new_uninit`, it is copied all the same).
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let mut draft = draft::<S>(&state, &parts, id);
            // Until its end, or until shutdown's grace period is over (then the request ends
            // as [`ApiError::ShuttingDown`], still recorded).
            let result = tokio::select! {
                result = flow::<S>(&state, &mut draft, &parts, admit::Source::Http(body)) => result,
                () = state.aborted() => Err(ApiError::ShuttingDown),
            };
            (draft, result)
        })
    };
    let (draft, result) = apart::Flowing::<S, _>::new(state.clone(), work).await;
    finish::<S>(&state, draft, result, false).await
}

/// A request the gateway makes for a batch's line: its endpoint and body, the key it runs as,
/// and what its record names it by.
pub struct Line {
    /// `POST` to the batch's endpoint, as a caller's request would have been.
    pub head: Head,
    pub body: Bytes,
    /// The hash of the key that made the batch.
    pub key_hash: [u8; 32],
    pub batch_id: String,
    pub custom_id: String,
}

/// How a batch's line was answered.
pub struct LineAnswer {
    /// Its invocation's id.
    pub invocation_id: Uuid,
    pub response: Response<Body>,
    /// Set when the line should be run again after this long instead (a rate limit with a
    /// short wait, an upstream's 429, a gateway too busy or shutting down): the answer is not
    /// the line's.
    pub again_after: Option<std::time::Duration>,
}

/// Runs a batch's line through the flow as surface `S`'s request made with the batch's key,
/// recorded like any other (with its batch and custom id). Answered whole: a batch's line
/// cannot ask for a stream.
pub async fn run_line<S: Surface>(state: &Arc<AppState>, line: Line) -> LineAnswer {
    let id = Uuid::now_v7();
    let mut draft = draft::<S>(state, &line.head, id);
    draft.batch(line.batch_id, line.custom_id);
    let source = admit::Source::Given(Box::new(admit::Given {
        key_hash: line.key_hash,
        body: line.body,
    }));
    let result = tokio::select! {
        result = flow::<S>(state, &mut draft, &line.head, source) => result,
        () = state.aborted() => Err(ApiError::ShuttingDown),
    };
    let again_after = match &result {
        Err(error) => again_after(error),
        Ok(_) => None,
    };
    let response = finish::<S>(state, draft, result, false).await;
    LineAnswer {
        invocation_id: id,
        response,
        again_after,
    }
}

/// How long a batch's line waits before it runs again, when `error` is no answer to it but a
/// wait: a limit that frees within a minute (a budget's period is no such wait: its lines
/// fail), an upstream's 429, a gateway too busy or stopping.
fn again_after(error: &ApiError) -> Option<std::time::Duration> {
    const LONGEST: u32 = 60;
    if matches!(error, ApiError::ShuttingDown) {
        return Some(std::time::Duration::ZERO);
    }
    let status = error.status();
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let wait = error.retry_after()?;
    (wait <= LONGEST).then(|| std::time::Duration::from_secs(u64::from(wait.max(1))))
}

/// Answers a request of surface `S` refused before its flow starts (a method other than
/// the endpoint's), recorded like any other.
pub async fn refuse<S: Surface>(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: Uuid,
    error: ApiError,
) -> Response<Body> {
    let (parts, _) = request.into_parts();
    let draft = draft::<S>(&state, &parts, id);
    finish::<S>(&state, draft, Err(error), false).await
}

/// The record of a request that just arrived, with its trace.
fn draft<S: Surface>(state: &AppState, parts: &hyper::http::request::Parts, id: Uuid) -> Draft {
    let trace = state
        .traces
        .request(&parts.headers, S::NAME, &id, parts.uri.path());
    if let Some(trace_id) = trace.trace_id() {
        tracing::Span::current().record("trace_id", tracing::field::display(trace_id));
    }
    Draft::new(id, S::NAME, trace)
}

/// What the headers of a JSON answer say: the route and upstream that served it, its
/// rate limits (an empty map, which allocates nothing, without limits).
struct AnswerHeaders {
    served: call::Served,
    limits: HeaderMap,
}

impl AnswerHeaders {
    fn set_headers(self, headers: &mut HeaderMap) {
        self.served.set_headers(headers);
        if !self.limits.is_empty() {
            headers.extend(self.limits);
        }
    }
}

/// A whole completion to answer with: as JSON, or (a stream held for its guards, or a cached
/// answer) as the frames its stream would have sent.
struct Whole<'a, C> {
    codec: C,
    envelope: Envelope<'a>,
    completion: types::Completion,
    usage: Option<Metered<'a>>,
    /// Whether the caller asked for a stream.
    stream: bool,
}

impl<C: CompletionCodec> Whole<'_, C> {
    async fn reply(self, state: &AppState, draft: &Draft, headers: AnswerHeaders) -> Reply {
        let Whole {
            mut codec,
            envelope,
            mut completion,
            usage,
            stream,
        } = self;
        if stream {
            stream::redact_completion(draft.current_secrets(), &mut completion);
            let frames = stream::replay(&mut codec, &envelope, &completion, usage);
            let mut record = codec.completion(&envelope, &completion, usage);
            if let Some(kept) = codec.keep(&envelope, &completion) {
                record = draft.redact_answer(record);
                record::keep(state, draft, &record, kept).await;
            }
            return Reply::Replay {
                frames,
                record,
                headers,
            };
        }
        let mut text = codec.completion(&envelope, &completion, usage);
        if let Some(kept) = codec.keep(&envelope, &completion) {
            text = draft.redact_answer(text);
            record::keep(state, draft, &text, kept).await;
        }
        Reply::Json(text, headers)
    }
}

/// Records the flow's outcome and turns it into the response. An answer whose caller `left`
/// is recorded `cancelled` (status 499), with what it would have been and what it cost.
async fn finish<S: Surface>(
    state: &AppState,
    draft: Draft,
    result: Result<Reply, ApiError>,
    left: bool,
) -> Response<Body> {
    let id = draft.id();
    let error_response =
        |error: &ApiError| error_response_with_body(error, &S::error_body(error, &id), &id);
    // Errors say it too: a hit its guards refused is still a hit.
    let cache = draft.cache_status();
    let mut response = match result {
        Ok(Reply::Json(text, headers)) => {
            let text = draft.redact_answer(text);
            let mut response = json_text_response(StatusCode::OK, Bytes::from(text.clone()), &id);
            headers.set_headers(response.headers_mut());
            // Neither OpenAI's nor Anthropic's answer has a field for it.
            if let Some(cost) = draft.cost_usd() {
                set_cost_header(response.headers_mut(), cost);
            }
            record::save(state, draft.answered(left, text)).await;
            response
        }
        Ok(Reply::Whole {
            body,
            content_type,
            record,
            headers,
        }) => {
            let body = draft.redact_answer(body);
            let record = draft.redact_answer(record);
            let mut response =
                crate::http::typed_response(StatusCode::OK, content_type, Bytes::from(body), &id);
            headers.set_headers(response.headers_mut());
            if let Some(cost) = draft.cost_usd() {
                set_cost_header(response.headers_mut(), cost);
            }
            record::save(state, draft.answered(left, record)).await;
            response
        }
        Ok(Reply::Stream(response)) => response,
        Ok(Reply::Replay {
            frames,
            record,
            headers,
        }) => {
            let record = draft.redact_answer(record);
            let (sender, frames_rx) = tokio::sync::mpsc::channel(frames.len().max(1));
            for frame in frames {
                // The channel has room for every frame.
                let _ = sender.try_send(frame);
            }
            drop(sender);
            let mut response = crate::http::sse_response(frames_rx, &id);
            headers.set_headers(response.headers_mut());
            record::save(state, draft.answered(left, record)).await;
            response
        }
        Ok(Reply::Recorded(error)) => error_response(&error),
        // Cut short by shutdown after the stream task took over the record:
        // the task records it (a task that vanished is recorded below).
        Err(error @ ApiError::ShuttingDown) if draft.recorded_by_stream() => error_response(&error),
        Err(error) => {
            let error = draft.redact(error);
            let response = error_response(&error);
            record::save(state, draft.failure(&error)).await;
            response
        }
    };
    if let Some(status) = cache {
        cache::set_header(status, response.headers_mut());
    }
    response
}

/// The call's cost in USD, in the `x-gateway-cost-usd` header.
fn set_cost_header(headers: &mut HeaderMap, cost: f64) {
    if let Ok(value) = hyper::header::HeaderValue::from_str(&format!("{cost:.10}")) {
        headers.insert(COST_HEADER, value);
    }
}

/// Admit -> route -> cache -> quota -> call -> answer. The record is the caller's
/// ([`finish`]) unless a stream task takes it over ([`Draft::give_to_stream`]).
async fn flow<S: Surface>(
    state: &Arc<AppState>,
    draft: &mut Draft,
    head: &Head,
    source: admit::Source,
) -> Result<Reply, ApiError> {
    let live = state.live();
    let admitted = admit::admit::<S>(state, &live.config, draft, head, source).await?;
    let headers = &head.headers;
    let request = route::route(state, &live, draft, headers, admitted).await?;
    let output = request.output_limit();
    let caching = cache::Caching::of(&request, headers, output)?;
    if let Some(caching) = &caching
        && let Some(hit) = caching.lookup(state, draft, request.routed.kind).await
    {
        // Boxed: inline, its state (the guards' checks, the answer's rendering) enlarges every
        // request's future, which is copied as it starts (callgrind: ~5k instructions of
        // memcpy on each request, cached or not).
        return Box::pin(hit.answer(state, draft, request)).await;
    }
    let prices = &live.prices;
    let ask = &request.ask;
    let estimate = |route: &_, plugin: &_, model: &_| {
        quota::estimate(ask, output, route, plugin, model, prices)
    };
    let call = Call::admit(state, &live, draft, request.routed, estimate).await?;
    let leg = call.leg().clone();
    let (params, stream) = (request.params, request.stream);
    let guards = guard::Guards {
        chain: request.chain,
        route: &leg.route.id,
        model: &leg.model,
        params: &params,
    };
    // Each step's future is awaited here, not in a function of its own: every layer of
    // async fn keeps its arguments for its whole life, and the request's future is copied
    // whole as it starts (callgrind: a layer cost ~50k instructions of memcpy a request).
    let (prompted, asked) = match request.ask {
        Ask::Embed { input, codec } => {
            let input = guards.check_embedding(state, draft, input).await?;
            let request = types::EmbeddingRequest {
                route: types::Route::default(),
                model: leg.model.clone(),
                input,
                params,
            };
            return whole::embed(state, draft, call, request, codec, caching).await;
        }
        Ask::Complete { prompted, codec } => (prompted, Asked::Completion(codec)),
        Ask::Count { prompted, codec } => (prompted, Asked::Count(codec)),
        // Boxed, as a count is: inline, it would enlarge every request's future.
        Ask::Rerank(rerank) => {
            return Box::pin(whole::rerank(state, draft, call, guards, rerank)).await;
        }
        Ask::Images(images) => {
            return Box::pin(whole::images(state, draft, call, guards, images)).await;
        }
        Ask::Transcribe(transcribe) => {
            return Box::pin(whole::transcribe(state, draft, call, params, transcribe)).await;
        }
        Ask::Speak(speak) => {
            return Box::pin(speech::start(state, draft, call, guards, speak)).await;
        }
    };
    let Prompted {
        prompt,
        functions,
        function_choice,
        reasoning,
    } = prompted;
    let (prompt, guarded) = guards
        .check_prompt(state, draft, prompt, &functions)
        .await?;
    let request = types::CompletionRequest {
        // Each try sets the route of its upstream (`Try::aim`).
        route: types::Route::default(),
        model: leg.model.clone(),
        prompt,
        functions,
        function_choice,
        reasoning,
        output,
        params,
    };
    match asked {
        Asked::Completion(codec) => {
            let answering = Answering {
                codec,
                guarded,
                caching,
                stream,
            };
            // A stream whose guards judge the whole answer first is answered whole, then
            // sent as the stream it would have been.
            if stream && !answering.buffers_stream() {
                let draft = draft.give_to_stream();
                return stream::start(state.clone(), call, request, answering, draft).await;
            }
            whole::complete(state, draft, call, request, answering).await
        }
        // Boxed, as a cache hit is: inline, its state (the plugin's count, the tokenizer's
        // task) enlarged every request's future, which is copied as it starts.
        Asked::Count(codec) => Box::pin(whole::count(state, draft, call, request, codec)).await,
    }
}

/// What a prompt asks for: a completion, written by the surface's codec, or its token count.
enum Asked<C> {
    Completion(C),
    Count(CountCodec),
}

/// How a completion's answer is made, beside the call.
struct Answering<C> {
    /// The surface's writer of the answer.
    codec: C,
    /// The guards that judge the answer, with what they saw of the request.
    guarded: Option<guard::Guarded>,
    /// Where the whole answer is stored, on a route that caches.
    caching: Option<cache::Caching>,
    /// Whether the caller asked for a stream.
    stream: bool,
}

impl<C> Answering<C> {
    /// Whether its guards judge the whole answer before the caller gets any of it.
    fn buffers_stream(&self) -> bool {
        (self.guarded.as_ref()).is_some_and(guard::Guarded::buffers_streams)
    }
}
