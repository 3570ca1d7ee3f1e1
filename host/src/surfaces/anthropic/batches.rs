//! Anthropic's Message Batches: `POST /v1/messages/batches`, `GET /v1/messages/batches`,
//! `GET` and `DELETE /v1/messages/batches/{id}`, `POST …/{id}/cancel` and `GET …/{id}/results`,
//! a project's own batches only, run by the same runner and store as OpenAI's batches
//! (`crate::batch`): each request through the flow as `POST /v1/messages` made with the key
//! that created the batch.
//!
//! The requests come in the create's body, `{"requests": [{"custom_id", "params"}, …]}`, read
//! a request at a time as the body arrives (a parser on a blocking thread fed the body's
//! frames), checked and kept in groups: a body of 200 MB is never in memory whole, nor is
//! one request over `max_body_bytes`. A bad request refuses the batch (400, naming
//! `requests.N`) and nothing of it is kept; a request the flow refuses when it runs is an
//! `errored` result, as Anthropic validates `params` as it runs them. The results are one
//! file, every request's line in order (Anthropic's are in any order), kept 29 days.

use std::cell::Cell;
use std::fmt;
use std::io::Read;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::header::HOST;
use hyper::{HeaderMap, Method, Request, Response, Uri};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::error::ApiError;
use crate::http::Body;
use crate::state::AppState;
use crate::store::{BatchPage, BatchStatus, KeyRecord, NewBatch, NewLine, StoredBatch};
use crate::surfaces::batch_lines::{BodyFault, GROUP_BYTES, Kept, Refused, body_text};
use crate::surfaces::checks::page_limit;

/// The endpoint a message batch's requests are made to.
pub const ENDPOINT: &str = "/v1/messages";
/// The most requests a batch may hold, and the most bytes of its create's body beyond
/// `max_file_bytes` (Anthropic's bounds: 100,000 requests, 256 MB).
const MAX_REQUESTS: u32 = 100_000;
/// How long a batch runs before its requests left are `expired`: Anthropic's 24 hours.
const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
/// How long its results are kept: Anthropic's 29 days.
const RESULTS_SECS: i64 = 29 * 24 * 60 * 60;
/// `limit`'s default and maximum, as Anthropic's.
const DEFAULT_PAGE: u32 = 20;
const MAX_PAGE: u32 = 1000;
/// The body's bytes read ahead of the parser.
const READ_AHEAD: usize = 64 * 1024;

/// Answers a request for `/v1/messages/batches` (`rest` empty) or below it.
pub async fn serve(
    state: Arc<AppState>,
    request: Request<Incoming>,
    rest: &str,
    request_id: Uuid,
) -> Response<Body> {
    let method = request.method().clone();
    let answered = match (rest.strip_prefix('/'), method) {
        (None, Method::POST) => Box::pin(create(&state, request)).await.map(Answer::Json),
        (None, Method::GET) => list(&state, &request).await.map(Answer::Json),
        (None, _) => Err(ApiError::MethodNotAllowed("GET, POST")),
        (Some(tail), method) => match (tail.split_once('/'), method) {
            (None, Method::GET) => retrieve(&state, &request, tail).await.map(Answer::Json),
            (None, Method::DELETE) => delete(&state, &request, tail).await.map(Answer::Json),
            (None, _) => Err(ApiError::MethodNotAllowed("GET, DELETE")),
            (Some((id, "cancel")), Method::POST) => {
                cancel(&state, &request, id).await.map(Answer::Json)
            }
            (Some((_, "cancel")), _) => Err(ApiError::MethodNotAllowed("POST")),
            (Some((id, "results")), Method::GET) => results(&state, &request, id, &request_id)
                .await
                .map(Answer::File),
            (Some((_, "results")), _) => Err(ApiError::MethodNotAllowed("GET")),
            (Some(_), _) => Err(ApiError::NotFound(format!(
                "no such endpoint: /v1/messages/batches/{tail}"
            ))),
        },
    };
    match answered {
        Ok(Answer::Json(body)) => {
            crate::http::json_response(hyper::StatusCode::OK, &body, &request_id)
        }
        Ok(Answer::File(response)) => response,
        Err(error) => super::error_response(&error, &request_id),
    }
}

enum Answer {
    Json(Value),
    File(Response<Body>),
}

/// A message batch as Anthropic's `MessageBatch` describes it; `base` is where the caller
/// reached this gateway (its results' URL is under it).
pub fn message_batch(batch: &StoredBatch, base: &str) -> Value {
    let time = |ms: Option<i64>| ms.map(crate::clock::format_time_ms);
    let cancelled = matches!(
        batch.status,
        BatchStatus::Cancelling | BatchStatus::Cancelled
    );
    let processing_status = match batch.status {
        BatchStatus::Validating | BatchStatus::InProgress | BatchStatus::Finalizing => {
            "in_progress"
        }
        BatchStatus::Cancelling => "canceling",
        BatchStatus::Completed
        | BatchStatus::Expired
        | BatchStatus::Cancelled
        | BatchStatus::Failed => "ended",
    };
    let ended = processing_status == "ended";
    let never_run = batch.closed.min(batch.failed);
    let results_url = (ended && batch.output_file_id.is_some())
        .then(|| format!("{base}/v1/messages/batches/{}/results", batch.id));
    json!({
        "id": batch.id,
        "type": "message_batch",
        "processing_status": processing_status,
        "request_counts": {
            "processing": batch.total.saturating_sub(batch.completed + batch.failed),
            "succeeded": batch.completed,
            "errored": batch.failed - never_run,
            "canceled": if cancelled { never_run } else { 0 },
            "expired": if cancelled { 0 } else { never_run },
        },
        "ended_at": if ended { time(batch.ended_at_ms()) } else { None },
        "created_at": crate::clock::format_time_ms(batch.created_at_ms),
        "expires_at": crate::clock::format_time_ms(batch.expires_at_ms),
        "archived_at": null,
        "cancel_initiated_at": time(batch.cancelling_at_ms),
        "results_url": results_url,
    })
}

/// A line of the results: the request's answer (`body`, a message or Anthropic's error).
pub fn result_line(custom_id: &str, ok: bool, body: Value) -> String {
    let result = if ok {
        json!({"type": "succeeded", "message": body})
    } else {
        json!({"type": "errored", "error": body})
    };
    json!({"custom_id": custom_id, "result": result}).to_string()
}

/// A line of the results of a request never answered, for `why`.
pub fn failed_line(custom_id: &str, why: &str) -> String {
    let error = json!({"type": "error", "error": {"type": "api_error", "message": why}});
    result_line(custom_id, false, error)
}

/// A line of the results of a request never run: its batch expired first, or was cancelled.
pub fn never_run_line(custom_id: &str, expired: bool) -> String {
    let kind = if expired { "expired" } else { "canceled" };
    json!({"custom_id": custom_id, "result": {"type": kind}}).to_string()
}

/// Where the caller reached this gateway: the scheme a proxy in front says (`X-Forwarded-Proto`)
/// or `http`, and the host the request names.
fn base_url(headers: &HeaderMap, uri: &Uri) -> String {
    let https = headers
        .get("x-forwarded-proto")
        .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    let host = (headers.get(HOST).and_then(|host| host.to_str().ok()))
        .or_else(|| uri.authority().map(|authority| authority.as_str()))
        .unwrap_or("localhost");
    format!("{}://{host}", if https { "https" } else { "http" })
}

async fn caller(state: &AppState, headers: &HeaderMap) -> Result<KeyRecord, ApiError> {
    let key = crate::auth::api_key(headers)?;
    crate::auth::key_record(&state.store, key).await
}

/// `id` if it is one the gateway makes for a message batch; another is answered as unknown
/// without reading the store.
fn batch_id(id: &str) -> Result<&str, ApiError> {
    let hex = id.strip_prefix("msgbatch_").unwrap_or_default();
    if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id)
    } else {
        Err(not_found(id))
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no such message batch: {id}"))
}

/// The batch `id` of the caller's project.
async fn found(state: &AppState, key: &KeyRecord, id: &str) -> Result<StoredBatch, ApiError> {
    let id = batch_id(id)?;
    let batch = state.store.batch(&key.project_id, id).await?;
    batch.ok_or_else(|| not_found(id))
}

/// `POST /v1/messages/batches`: the batch, in progress, or a 400 naming its first bad
/// request (nothing of it kept).
async fn create(state: &AppState, request: Request<Incoming>) -> Result<Value, ApiError> {
    let live = state.live();
    let config = &live.config;
    let (head, body) = request.into_parts();
    let key = caller(state, &head.headers).await?;
    // Checked just above: the key the batch's requests run as.
    let key_hash = crate::keys::hash_key(crate::auth::api_key(&head.headers)?);
    let max_bytes = config.max_file_bytes.get();
    let declared = crate::http::declared_length(&head.headers).map(|len| len as u64);
    if declared.is_some_and(|len| len > max_bytes) {
        return Err(ApiError::FileTooLarge(max_bytes));
    }
    let stall = Duration::from_secs(config.request_read_timeout_secs.get());
    let max_body = config.max_body_bytes.get();
    // What reading it holds in memory at most: the request being read (its text and parsed
    // value) and the group of requests waiting for the store.
    let limit = config.max_inflight_body_bytes.get();
    let held = GROUP_BYTES.saturating_add(max_body.saturating_mul(3));
    let Some(_held) = state.inflight.reserve(held, limit) else {
        return Err(ApiError::BodiesInFlight(limit));
    };
    let now = crate::clock::now_ms();
    let batch = NewBatch {
        id: format!("msgbatch_{}", Uuid::now_v7().simple()),
        project_id: key.project_id.clone(),
        key_hash,
        endpoint: ENDPOINT.to_owned(),
        input_file_id: String::new(),
        completion_window: "24h".into(),
        metadata: None,
        created_at_ms: now,
        expires_at_ms: now.saturating_add(WINDOW_MS),
        output_expires_secs: Some(RESULTS_SECS),
    };
    state.store.create_batch(&batch).await?;
    let limits = Limits {
        max_bytes,
        max_body,
        stall,
    };
    match read_requests(state, &batch.id, body, limits).await {
        Ok(total) => {
            // False: cancelled while it was read; it stays so.
            (state.store)
                .start_batch(&batch.id, total, crate::clock::now_ms())
                .await?;
            state.batch_wake.notify_one();
        }
        Err(refused) => {
            // Failed first (its lines deleted), then gone: should the gateway stop between
            // the two, the batch reads as ended with nothing run.
            let gone = async {
                (state.store)
                    .fail_batch(&batch.id, "[]", crate::clock::now_ms())
                    .await?;
                state.store.delete_batch(&batch.project_id, &batch.id).await
            };
            if let Err(e) = gone.await {
                tracing::warn!(
                    batch = batch.id,
                    "a refused message batch was not deleted: {e}"
                );
            }
            return Err(refused);
        }
    }
    let stored = found(state, &key, &batch.id).await?;
    Ok(message_batch(&stored, &base_url(&head.headers, &head.uri)))
}

/// What bounds a create's body.
#[derive(Clone, Copy)]
struct Limits {
    /// The whole body (`max_file_bytes`).
    max_bytes: u64,
    /// One request's `params` (`max_body_bytes`).
    max_body: usize,
    /// Between two frames of the body.
    stall: Duration,
}

/// Reads the requests of `body` into the batch `batch_id`: how many, or why the body was
/// refused. Three parts run at once: this task passing the body's frames to the parser, the
/// parser (a blocking thread) checking each request and passing groups of them back, and
/// this task writing the groups. Whichever fails first ends the others: each sees its channel
/// closed.
async fn read_requests(
    state: &AppState,
    batch_id: &str,
    body: Incoming,
    limits: Limits,
) -> Result<u32, ApiError> {
    let (frames, frames_read) = mpsc::channel::<Bytes>(4);
    let (groups_sent, mut groups) = mpsc::channel::<Vec<NewLine>>(1);
    let parser = tokio::task::spawn_blocking(move || parse(frames_read, limits, groups_sent));
    let pump = async move {
        let mut body = body;
        let mut read = 0u64;
        loop {
            let frame = match tokio::time::timeout(limits.stall, body.frame()).await {
                Err(_) => return Err(ApiError::RequestTimeout(limits.stall.as_secs())),
                Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => {
                    return Err(ApiError::BadRequest(format!("the body broke off: {e}")));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            read += data.len() as u64;
            if read > limits.max_bytes {
                return Err(ApiError::FileTooLarge(limits.max_bytes));
            }
            if frames.send(data).await.is_err() {
                // The parser ended (a bad request): its error is the answer.
                return Ok(());
            }
        }
    };
    let store = async {
        while let Some(group) = groups.recv().await {
            state.store.put_batch_lines(batch_id, group).await?;
        }
        Ok::<(), ApiError>(())
    };
    let (pumped, stored) = tokio::join!(pump, store);
    let parsed = parser
        .await
        .map_err(|e| ApiError::Internal(format!("the batch's parser failed: {e}")))?;
    pumped?;
    stored?;
    parsed
}

/// The body's frames as a reader for the parser, counting the bytes read so that one
/// request is held to its bound while it is read (not once it is whole in memory).
struct Frames {
    frames: mpsc::Receiver<Bytes>,
    current: Bytes,
    read: Rc<Cell<u64>>,
    /// Where the request being read began, and how many bytes it may take.
    mark: Rc<Cell<u64>>,
    most: u64,
}

impl Read for Frames {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.frames.blocking_recv() {
                Some(frame) => self.current = frame,
                None => return Ok(0),
            }
        }
        let read = self.read.get();
        if read.saturating_sub(self.mark.get()) > self.most {
            return Err(std::io::Error::other(TOO_LONG));
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        self.read.set(read + n as u64);
        Ok(n)
    }
}

const TOO_LONG: &str = "a request is longer than max_body_bytes";

/// Parses the body read from `frames`, passing its requests in groups to `groups`: how many.
fn parse(
    frames: mpsc::Receiver<Bytes>,
    limits: Limits,
    groups: mpsc::Sender<Vec<NewLine>>,
) -> Result<u32, ApiError> {
    let read = Rc::new(Cell::new(0));
    let mark = Rc::new(Cell::new(0));
    let frames = Frames {
        frames,
        current: Bytes::new(),
        read: read.clone(),
        mark: mark.clone(),
        // Its envelope, and what the parser reads ahead.
        most: (limits.max_body as u64).saturating_add(2 * READ_AHEAD as u64),
    };
    let reader = std::io::BufReader::with_capacity(READ_AHEAD, frames);
    let mut sink = Sink {
        kept: Kept::new(MAX_REQUESTS),
        groups,
        max_body: limits.max_body,
        index: 0,
        read,
        mark,
        fault: None,
        requests: false,
    };
    let mut parser = serde_json::Deserializer::from_reader(reader);
    let parsed = Create(&mut sink)
        .deserialize(&mut parser)
        .and_then(|()| parser.end());
    if let Err(e) = parsed {
        return Err(sink.fault.take().unwrap_or_else(|| {
            let message = if e.to_string().contains(TOO_LONG) {
                format!(
                    "requests.{}: over max_body_bytes ({} bytes)",
                    sink.index, limits.max_body
                )
            } else if sink.requests {
                format!("requests.{}: {e}", sink.index)
            } else {
                format!("the body is not a message batch's JSON: {e}")
            };
            ApiError::BadRequest(message)
        }));
    }
    if !sink.requests {
        return Err(ApiError::invalid("requests", "missing"));
    }
    if sink.kept.count() == 0 {
        return Err(ApiError::invalid(
            "requests",
            "must hold at least one request",
        ));
    }
    let rest = sink.kept.rest();
    if !rest.is_empty() && sink.groups.blocking_send(rest).is_err() {
        // The store failed: its error is the answer.
        return Err(ApiError::Internal(
            "the batch's requests were not kept".into(),
        ));
    }
    Ok(sink.kept.count())
}

/// Where the parser puts what it reads: the requests kept, and the first fault.
struct Sink {
    kept: Kept,
    groups: mpsc::Sender<Vec<NewLine>>,
    max_body: usize,
    /// The request being read, from 0.
    index: u32,
    read: Rc<Cell<u64>>,
    mark: Rc<Cell<u64>>,
    /// Why the body was refused, when a check (not the parser) refused it.
    fault: Option<ApiError>,
    /// `requests` was read.
    requests: bool,
}

impl Sink {
    /// Checks and keeps the request `index`.
    fn take(&mut self, request: Map<String, Value>) -> Result<(), ApiError> {
        let index = self.index;
        let at = |field: &str| format!("requests.{index}.{field}");
        let mut request = request;
        let custom_id = match request.remove("custom_id") {
            Some(Value::String(id)) if custom_id_is_valid(&id) => id,
            Some(_) => {
                return Err(ApiError::invalid(
                    at("custom_id"),
                    "must be 1 to 64 letters, digits, '_' or '-'",
                ));
            }
            None => return Err(ApiError::invalid(at("custom_id"), "missing")),
        };
        let params = match request.remove("params") {
            Some(Value::Object(params)) => params,
            Some(_) => return Err(ApiError::invalid(at("params"), "must be an object")),
            None => return Err(ApiError::invalid(at("params"), "missing")),
        };
        if let Some(name) = request.keys().next() {
            return Err(ApiError::invalid(at(name), "unknown parameter"));
        }
        let body = body_text(params, self.max_body).map_err(|fault| match fault {
            BodyFault::Streamed => ApiError::invalid(
                at("params.stream"),
                "a batch's requests are answered whole: stream must not be true",
            ),
            BodyFault::TooLarge => ApiError::invalid(
                at("params"),
                format!("over max_body_bytes ({} bytes)", self.max_body),
            ),
        })?;
        self.kept
            .push(custom_id.clone(), body)
            .map_err(|refused| match refused {
                Refused::Duplicate => ApiError::invalid(
                    at("custom_id"),
                    format!("{custom_id:?} is an earlier request's: each must be unique"),
                ),
                Refused::TooMany => {
                    ApiError::invalid("requests", format!("at most {MAX_REQUESTS} requests"))
                }
            })?;
        if let Some(group) = self.kept.full_group()
            && self.groups.blocking_send(group).is_err()
        {
            return Err(ApiError::Internal(
                "the batch's requests were not kept".into(),
            ));
        }
        self.index += 1;
        self.mark.set(self.read.get());
        Ok(())
    }

    /// Keeps `fault` as the answer and stops the parser.
    fn refuse<E: de::Error>(&mut self, fault: ApiError) -> E {
        let error = E::custom(fault.to_string());
        self.fault = Some(fault);
        error
    }
}

/// Anthropic's `custom_id`: 1 to 64 of `[a-zA-Z0-9_-]`.
fn custom_id_is_valid(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The create's body: `{"requests": [...]}`.
struct Create<'a>(&'a mut Sink);

impl<'de> DeserializeSeed<'de> for Create<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Create<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of requests")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(name) = map.next_key::<String>()? {
            match name.as_str() {
                "requests" if !self.0.requests => {
                    self.0.requests = true;
                    map.next_value_seed(Requests(&mut *self.0))?;
                }
                "requests" => {
                    return Err(self.0.refuse(ApiError::invalid("requests", "given twice")));
                }
                _ => {
                    return Err(self.0.refuse(ApiError::invalid(name, "unknown parameter")));
                }
            }
        }
        Ok(())
    }
}

/// `requests`: each read, checked and kept before the next is read.
struct Requests<'a>(&'a mut Sink);

impl<'de> DeserializeSeed<'de> for Requests<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Requests<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of requests")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(request) = seq.next_element::<Value>()? {
            let Value::Object(request) = request else {
                let at = format!("requests.{}", self.0.index);
                return Err(self.0.refuse(ApiError::invalid(at, "must be an object")));
            };
            if let Err(fault) = self.0.take(request) {
                return Err(self.0.refuse(fault));
            }
        }
        Ok(())
    }
}

/// `GET /v1/messages/batches`: `before_id`, `after_id`, `limit` (1 to 1000, default 20),
/// newest first.
async fn list(state: &AppState, request: &Request<Incoming>) -> Result<Value, ApiError> {
    let key = caller(state, request.headers()).await?;
    let (mut after, mut before, mut limit) = (None, None, DEFAULT_PAGE);
    let pairs = request.uri().query().unwrap_or_default().as_bytes();
    for (name, value) in url::form_urlencoded::parse(pairs) {
        match name.as_ref() {
            "after_id" | "before_id" => {
                let id = batch_id(&value)
                    .map_err(|_| ApiError::invalid(name.clone(), "must be a message batch's id"))?
                    .to_owned();
                if name == "after_id" {
                    after = Some(id);
                } else {
                    before = Some(id);
                }
            }
            "limit" => {
                limit = page_limit(&value, MAX_PAGE).ok_or_else(|| {
                    ApiError::invalid("limit", format!("must be from 1 to {MAX_PAGE}"))
                })?;
            }
            _ => {}
        }
    }
    let page = match (&after, &before) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "give after_id or before_id, not both".into(),
            ));
        }
        (_, Some(before)) => BatchPage::Before(before),
        (after, None) => BatchPage::After(after.as_deref()),
    };
    // One more than the page: whether there are more (before: the newest is the one past it).
    let mut batches = (state.store)
        .batches(&key.project_id, "msgbatch_", page, limit + 1)
        .await?;
    let has_more = batches.len() > limit as usize;
    if has_more {
        match page {
            BatchPage::Before(_) => drop(batches.remove(0)),
            BatchPage::After(_) => batches.truncate(limit as usize),
        }
    }
    let base = base_url(request.headers(), request.uri());
    Ok(json!({
        "data": batches.iter().map(|batch| message_batch(batch, &base)).collect::<Vec<_>>(),
        "has_more": has_more,
        "first_id": batches.first().map(|batch| &batch.id),
        "last_id": batches.last().map(|batch| &batch.id),
    }))
}

/// `GET /v1/messages/batches/{id}`.
async fn retrieve(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<Value, ApiError> {
    let key = caller(state, request.headers()).await?;
    let batch = found(state, &key, id).await?;
    Ok(message_batch(
        &batch,
        &base_url(request.headers(), request.uri()),
    ))
}

/// `POST /v1/messages/batches/{id}/cancel`: `canceling` until its requests in flight end
/// (then `ended`, their results kept). One that ended is answered as it is, as Anthropic's.
async fn cancel(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<Value, ApiError> {
    let key = caller(state, request.headers()).await?;
    let batch = found(state, &key, id).await?;
    let now = crate::clock::now_ms();
    if (state.store)
        .cancel_batch(&key.project_id, &batch.id, now)
        .await?
    {
        state.batch_wake.notify_one();
    }
    let batch = found(state, &key, id).await?;
    Ok(message_batch(
        &batch,
        &base_url(request.headers(), request.uri()),
    ))
}

/// `DELETE /v1/messages/batches/{id}`: an ended batch, with its results; one still running
/// must be cancelled first (409).
async fn delete(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<Value, ApiError> {
    let key = caller(state, request.headers()).await?;
    let batch = found(state, &key, id).await?;
    if !state.store.delete_batch(&key.project_id, &batch.id).await? {
        return Err(ApiError::Conflict(format!(
            "the batch {} is still processing: cancel it, and delete it once it has ended",
            batch.id
        )));
    }
    if let Some(file) = &batch.output_file_id
        && let Err(e) = state.store.delete_file(&key.project_id, file).await
    {
        // Its expiry deletes it later.
        tracing::warn!(
            batch = batch.id,
            file,
            "a deleted batch's results were kept: {e}"
        );
    }
    Ok(json!({"id": batch.id, "type": "message_batch_deleted"}))
}

/// `GET /v1/messages/batches/{id}/results`: every request's result, one JSON line each, once
/// the batch ended.
async fn results(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
    request_id: &Uuid,
) -> Result<Response<Body>, ApiError> {
    let key = caller(state, request.headers()).await?;
    let batch = found(state, &key, id).await?;
    let Some(file_id) = batch.output_file_id.as_deref() else {
        let status = message_batch(&batch, "")["processing_status"].clone();
        return Err(ApiError::NotFound(format!(
            "the batch {} has no results: its processing_status is {status}",
            batch.id
        )));
    };
    let now = crate::clock::now_ms();
    let file = (state.store)
        .file(&key.project_id, file_id, now)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("the results of {} have expired", batch.id)))?;
    let mut response =
        crate::surfaces::openai::files::content_response(state, file, request_id).await?;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/binary"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `body` as a create's, with requests of at most `max_body` bytes: the requests
    /// kept, or the error.
    fn parsed(body: &str, max_body: usize) -> Result<Vec<NewLine>, String> {
        // Small frames: a request crosses many.
        let chunks = body.as_bytes().chunks(7);
        let (frames, frames_read) = mpsc::channel(chunks.len() + 1);
        for chunk in chunks {
            frames
                .try_send(Bytes::copy_from_slice(chunk))
                .expect("room for the body");
        }
        drop(frames);
        let (groups_sent, mut groups) = mpsc::channel(64);
        let limits = Limits {
            max_bytes: u64::MAX,
            max_body,
            stall: Duration::from_secs(1),
        };
        let parsed = std::thread::spawn(move || parse(frames_read, limits, groups_sent))
            .join()
            .expect("the parser");
        let mut kept = Vec::new();
        while let Ok(group) = groups.try_recv() {
            kept.extend(group);
        }
        parsed
            .map(|count| {
                assert_eq!(count as usize, kept.len());
                kept
            })
            .map_err(|e| e.described_for(&Uuid::nil()))
    }

    fn request(id: &str, params: &str) -> String {
        format!(r#"{{"custom_id":"{id}","params":{params}}}"#)
    }

    #[test]
    fn requests_are_read_one_at_a_time_and_the_first_bad_one_named() {
        let good = r#"{"model":"m","max_tokens":5,"messages":[]}"#;
        let body = format!(
            r#"{{"requests":[{},{}]}}"#,
            request("a", good),
            request("b-2_X", good)
        );
        let kept = parsed(&body, 1000).unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!((kept[1].seq, kept[1].custom_id.as_str()), (1, "b-2_X"));
        let body: Value = serde_json::from_str(&kept[0].body).unwrap();
        assert_eq!(body, serde_json::from_str::<Value>(good).unwrap());

        let bad = |requests: String, max_body: usize| {
            parsed(&format!(r#"{{"requests":[{requests}]}}"#), max_body).unwrap_err()
        };
        let first = request("a", good);
        for (second, said) in [
            (request("a", good), "requests.1.custom_id"),
            (request("no spaces", good), "requests.1.custom_id"),
            (request(&"x".repeat(65), good), "requests.1.custom_id"),
            (request("b", "[1]"), "requests.1.params"),
            (
                request("b", r#"{"stream":true}"#),
                "requests.1.params.stream",
            ),
            (r#"{"params":{}}"#.into(), "requests.1.custom_id"),
            (
                r#"{"custom_id":"b","params":{},"x":1}"#.into(),
                "requests.1.x",
            ),
            ("7".into(), "requests.1"),
            ("{bad json".into(), "requests.1"),
        ] {
            let error = bad(format!("{first},{second}"), 1000);
            assert!(error.contains(said), "{second}: {error}");
        }
        // One request over max_body_bytes is refused as it is read, whole or not.
        let long = format!(r#"{{"text":"{}"}}"#, "y".repeat(200_000));
        let error = bad(format!("{first},{}", request("b", &long)), 100);
        assert!(
            error.contains("requests.1") && error.contains("max_body_bytes"),
            "{error}"
        );
        let small = request("a", "{}");
        let error = bad(
            format!("{small},{}", request("b", r#"{"text":"0123456789"}"#)),
            10,
        );
        assert!(
            error.contains("requests.1.params") && error.contains("max_body_bytes"),
            "{error}"
        );

        for (body, said) in [
            ("[]", "not a message batch's JSON"),
            (r#"{"requests":[]}"#, "at least one"),
            ("{}", "requests"),
            (r#"{"requests":[],"other":1}"#, "other"),
        ] {
            let error = parsed(body, 1000).unwrap_err();
            assert!(error.contains(said), "{body}: {error}");
        }
    }

    #[test]
    fn a_batch_reads_as_anthropic_describes_it() {
        let mut batch = StoredBatch {
            id: "msgbatch_0123".into(),
            project_id: "p".into(),
            endpoint: ENDPOINT.into(),
            input_file_id: String::new(),
            completion_window: "24h".into(),
            metadata: None,
            status: BatchStatus::InProgress,
            created_at_ms: 1_800_000_000_000,
            in_progress_at_ms: Some(1_800_000_000_000),
            expires_at_ms: 1_800_086_400_000,
            finalizing_at_ms: None,
            completed_at_ms: None,
            failed_at_ms: None,
            expired_at_ms: None,
            cancelling_at_ms: None,
            cancelled_at_ms: None,
            output_file_id: None,
            error_file_id: None,
            errors: None,
            total: 10,
            completed: 3,
            failed: 2,
            output_expires_secs: None,
            closed: 0,
        };
        let running = message_batch(&batch, "http://gw");
        assert_eq!(running["processing_status"], "in_progress");
        assert_eq!(
            running["request_counts"],
            json!({"processing": 5, "succeeded": 3, "errored": 2, "canceled": 0, "expired": 0})
        );
        assert_eq!(running["created_at"], "2027-01-15T08:00:00.000Z");
        assert_eq!(running["results_url"], Value::Null);
        assert_eq!(running["ended_at"], Value::Null);

        batch.status = BatchStatus::Cancelled;
        batch.cancelling_at_ms = Some(1_800_000_001_000);
        batch.cancelled_at_ms = Some(1_800_000_002_000);
        batch.output_file_id = Some("file-x".into());
        (batch.failed, batch.closed) = (7, 5);
        let ended = message_batch(&batch, "http://gw");
        assert_eq!(ended["processing_status"], "ended");
        assert_eq!(
            ended["request_counts"],
            json!({"processing": 0, "succeeded": 3, "errored": 2, "canceled": 5, "expired": 0})
        );
        assert_eq!(ended["ended_at"], "2027-01-15T08:00:02.000Z");
        assert_eq!(
            ended["results_url"],
            "http://gw/v1/messages/batches/msgbatch_0123/results"
        );
    }
}
