//! OpenAI's Batch API: `POST /v1/batches`, `GET /v1/batches`, `GET /v1/batches/{id}` and
//! `POST /v1/batches/{id}/cancel`, a project's own batches only (any of its keys; each line
//! runs as the key that created the batch).
//!
//! A batch's input file is read from the store a chunk at a time and checked line by line as it
//! is: JSON, `custom_id` unique, `method` POST, `url` the batch's `endpoint`, a body within
//! `max_body_bytes` that does not ask for a stream. Its lines go into the store as they pass,
//! so that a file of 200 MB is never in memory whole; the first bad line fails the batch
//! (OpenAI's `failed` status, `errors.data` naming the line) and its lines are deleted. What
//! runs the lines is `crate::batch`'s runner, on every replica.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::error::ApiError;
use crate::http::Body;
use crate::state::AppState;
use crate::store::{
    BatchPage, BatchStatus, KeyRecord, MAX_BATCH_LINES, NewBatch, StoredBatch, StoredFile,
};
use crate::surfaces::batch_lines::{BodyFault, Kept, Refused, body_text};
use crate::surfaces::checks::page_limit;

/// The endpoints a batch's lines may call.
pub const ENDPOINTS: [&str; 4] = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/completions",
];
/// The longest completion window: a week.
const MAX_WINDOW_SECS: u64 = 7 * 24 * 60 * 60;
/// How long a batch's output and error files are kept unless `output_expires_after` says.
pub const OUTPUT_FILE_SECS: i64 = 30 * 24 * 60 * 60;
/// The expiries `output_expires_after.seconds` may ask for: as a file's, an hour to 30 days.
const EXPIRY_SECS: std::ops::RangeInclusive<i64> = 3600..=2_592_000;
/// `limit`'s default and maximum, as OpenAI's.
const DEFAULT_PAGE: u32 = 20;
const MAX_PAGE: u32 = 100;
/// Metadata: at most 16 pairs, keys of 64 characters, values of 512 (OpenAI's bounds).
const MAX_METADATA_PAIRS: usize = 16;
const MAX_METADATA_KEY: usize = 64;
const MAX_METADATA_VALUE: usize = 512;
/// The longest `custom_id` kept.
const MAX_CUSTOM_ID_BYTES: usize = 512;

/// Answers a request for `/v1/batches` (`rest` empty) or below it.
pub async fn serve(
    state: Arc<AppState>,
    request: Request<Incoming>,
    rest: &str,
    request_id: Uuid,
) -> Response<Body> {
    let method = request.method().clone();
    let result = match (rest.strip_prefix('/'), method) {
        (None, Method::POST) => create(&state, request).await,
        (None, Method::GET) => list(&state, &request).await,
        (None, _) => Err(ApiError::MethodNotAllowed("GET, POST")),
        (Some(tail), method) => match tail.split_once('/') {
            None if method == Method::GET => retrieve(&state, &request, tail).await,
            None => Err(ApiError::MethodNotAllowed("GET")),
            Some((id, "cancel")) if method == Method::POST => cancel(&state, &request, id).await,
            Some((_, "cancel")) => Err(ApiError::MethodNotAllowed("POST")),
            Some(_) => Err(ApiError::NotFound(format!(
                "no such endpoint: /v1/batches/{tail}"
            ))),
        },
    };
    super::answer(result, &request_id)
}

fn batch_id(id: &str) -> Result<&str, ApiError> {
    super::made_id(id, "batch_", "Batch")
}

/// A batch as OpenAI's `Batch` object describes it.
pub fn batch_object(batch: &StoredBatch) -> Value {
    let secs = |ms: Option<i64>| ms.map(|ms| ms / 1000);
    let errors = batch.errors.as_deref().map(|text| {
        let data = serde_json::from_str::<Value>(text).unwrap_or_else(|_| json!([]));
        json!({"object": "list", "data": data})
    });
    let metadata =
        (batch.metadata.as_deref()).and_then(|text| serde_json::from_str::<Value>(text).ok());
    json!({
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": errors,
        "input_file_id": batch.input_file_id,
        "completion_window": batch.completion_window,
        "status": batch.status.as_str(),
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": batch.created_at_ms / 1000,
        "in_progress_at": secs(batch.in_progress_at_ms),
        "expires_at": batch.expires_at_ms / 1000,
        "finalizing_at": secs(batch.finalizing_at_ms),
        "completed_at": secs(batch.completed_at_ms),
        "failed_at": secs(batch.failed_at_ms),
        "expired_at": secs(batch.expired_at_ms),
        "cancelling_at": secs(batch.cancelling_at_ms),
        "cancelled_at": secs(batch.cancelled_at_ms),
        "request_counts": {
            "total": batch.total,
            "completed": batch.completed,
            "failed": batch.failed,
        },
        "metadata": metadata,
    })
}

/// A line of the output (2xx) or error file: the line's answer, `invocation_id` the record
/// it made.
pub fn output_line(invocation_id: &Uuid, custom_id: &str, status: u16, body: Value) -> String {
    json!({
        "id": format!("batch_req_{}", invocation_id.simple()),
        "custom_id": custom_id,
        "response": {
            "status_code": status,
            "request_id": invocation_id.to_string(),
            "body": body,
        },
        "error": null,
    })
    .to_string()
}

/// The error file's line of a line never answered: `code` and why.
pub fn failed_line(custom_id: &str, code: &str, message: &str) -> String {
    json!({
        "id": format!("batch_req_{}", Uuid::now_v7().simple()),
        "custom_id": custom_id,
        "response": null,
        "error": {"code": code, "message": message},
    })
    .to_string()
}

/// The error file's line of a line never run: its batch expired first, or was cancelled.
pub fn never_run_line(custom_id: &str, expired: bool) -> String {
    if expired {
        let why = "This request could not be executed before the completion window expired.";
        failed_line(custom_id, "batch_expired", why)
    } else {
        let why = "This request was not executed: the batch was cancelled.";
        failed_line(custom_id, "batch_cancelled", why)
    }
}

/// What `POST /v1/batches` asks, checked.
struct Asked {
    input_file_id: String,
    endpoint: &'static str,
    completion_window: String,
    window: Duration,
    metadata: Option<String>,
    output_expires_secs: Option<i64>,
}

impl Asked {
    fn parse(body: &[u8]) -> Result<Asked, ApiError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("the body is not JSON: {e}")))?;
        let Value::Object(mut fields) = value else {
            return Err(ApiError::BadRequest(
                "the body must be a JSON object".into(),
            ));
        };
        let text = |fields: &mut Map<String, Value>, name: &str| match fields.remove(name) {
            Some(Value::String(text)) => Ok(text),
            Some(_) => Err(ApiError::invalid(name, "must be a string")),
            None => Err(ApiError::invalid(name, "missing")),
        };
        let input_file_id = text(&mut fields, "input_file_id")?;
        let endpoint = text(&mut fields, "endpoint")?;
        let endpoint = ENDPOINTS
            .into_iter()
            .find(|known| *known == endpoint)
            .ok_or_else(|| {
                let message = format!("{endpoint:?} is not one of {}", ENDPOINTS.join(", "));
                ApiError::invalid("endpoint", message)
            })?;
        let completion_window = text(&mut fields, "completion_window")?;
        let window = window(&completion_window).ok_or_else(|| {
            ApiError::invalid(
                "completion_window",
                "must be \"24h\", or a duration such as \"90m\" or \"2h\" of at most 168h",
            )
        })?;
        let metadata = match fields.remove("metadata") {
            None | Some(Value::Null) => None,
            Some(value) => Some(metadata(value)?),
        };
        let output_expires_secs = match fields.remove("output_expires_after") {
            None | Some(Value::Null) => None,
            Some(value) => Some(output_expiry(value)?),
        };
        if let Some(name) = fields.keys().next() {
            return Err(ApiError::invalid(name.clone(), "unknown parameter"));
        }
        Ok(Asked {
            input_file_id,
            endpoint,
            completion_window,
            window,
            metadata,
            output_expires_secs,
        })
    }
}

/// A completion window: `24h` as OpenAI has it, or a whole number of seconds, minutes or hours
/// up to a week.
fn window(text: &str) -> Option<Duration> {
    let unit = match text.as_bytes().last()? {
        b's' => 1,
        b'm' => 60,
        b'h' => 3600,
        _ => return None,
    };
    let count: u64 = text[..text.len() - 1].parse().ok()?;
    let secs = count.checked_mul(unit)?;
    (1..=MAX_WINDOW_SECS)
        .contains(&secs)
        .then(|| Duration::from_secs(secs))
}

/// Metadata: an object of at most 16 strings, as JSON text.
fn metadata(value: Value) -> Result<String, ApiError> {
    let Value::Object(pairs) = value else {
        return Err(ApiError::invalid(
            "metadata",
            "must be an object of strings",
        ));
    };
    if pairs.len() > MAX_METADATA_PAIRS {
        let message = format!("at most {MAX_METADATA_PAIRS} pairs");
        return Err(ApiError::invalid("metadata", message));
    }
    for (key, value) in &pairs {
        if key.chars().count() > MAX_METADATA_KEY {
            let message = format!("a key is over {MAX_METADATA_KEY} characters");
            return Err(ApiError::invalid("metadata", message));
        }
        match value {
            Value::String(text) if text.chars().count() <= MAX_METADATA_VALUE => {}
            Value::String(_) => {
                let message = format!("{key:?} is over {MAX_METADATA_VALUE} characters");
                return Err(ApiError::invalid("metadata", message));
            }
            _ => {
                return Err(ApiError::invalid(
                    "metadata",
                    format!("{key:?} is not a string"),
                ));
            }
        }
    }
    Ok(Value::Object(pairs).to_string())
}

/// `output_expires_after`: `{"anchor": "created_at", "seconds": N}`.
fn output_expiry(value: Value) -> Result<i64, ApiError> {
    let anchor = value.get("anchor").and_then(Value::as_str);
    if anchor != Some("created_at") {
        return Err(ApiError::invalid(
            "output_expires_after.anchor",
            "must be \"created_at\"",
        ));
    }
    value
        .get("seconds")
        .and_then(Value::as_i64)
        .filter(|secs| EXPIRY_SECS.contains(secs))
        .ok_or_else(|| {
            let message = format!(
                "must be a whole number of seconds from {} to {}",
                EXPIRY_SECS.start(),
                EXPIRY_SECS.end()
            );
            ApiError::invalid("output_expires_after.seconds", message)
        })
}

/// `POST /v1/batches`: the batch, checked and in progress, or failed with the first bad line
/// of its input named.
async fn create(state: &AppState, request: Request<Incoming>) -> Result<Value, ApiError> {
    let live = state.live();
    let config = &live.config;
    let (head, body) = request.into_parts();
    let key = super::caller(state, &head.headers).await?;
    // Checked just above: the key the batch's lines run as.
    let key_hash = crate::keys::hash_key(crate::auth::api_key(&head.headers)?);
    let read_timeout = Duration::from_secs(config.request_read_timeout_secs.get());
    let body = crate::http::read_body(body, config.max_body_bytes.get(), read_timeout).await?;
    let asked = Asked::parse(&body)?;
    let now = crate::clock::now_ms();
    let file = state
        .store
        .file(&key.project_id, &asked.input_file_id, now)
        .await?
        .ok_or_else(|| {
            let message = format!("no such file: {}", asked.input_file_id);
            ApiError::invalid("input_file_id", message)
        })?;
    if file.purpose != "batch" {
        let message = format!(
            "the file's purpose is {:?}: a batch's input file must be uploaded with purpose \"batch\"",
            file.purpose
        );
        return Err(ApiError::invalid("input_file_id", message));
    }
    let window_ms = i64::try_from(asked.window.as_millis()).unwrap_or(i64::MAX);
    let batch = NewBatch {
        id: format!("batch_{}", Uuid::now_v7().simple()),
        project_id: key.project_id.clone(),
        key_hash,
        endpoint: asked.endpoint.to_owned(),
        input_file_id: file.id.clone(),
        completion_window: asked.completion_window,
        metadata: asked.metadata,
        created_at_ms: now,
        expires_at_ms: now.saturating_add(window_ms),
        output_expires_secs: asked.output_expires_secs,
    };
    state.store.create_batch(&batch).await?;
    let max_body = config.max_body_bytes.get();
    match read_lines(state, &batch, &file, max_body).await? {
        Ok(total) => {
            // False: cancelled while it was read; it stays so.
            state
                .store
                .start_batch(&batch.id, total, crate::clock::now_ms())
                .await?;
            state.batch_wake.notify_one();
        }
        Err(bad) => {
            let errors = json!([bad.to_json()]).to_string();
            (state.store)
                .fail_batch(&batch.id, &errors, crate::clock::now_ms())
                .await?;
        }
    }
    let stored = state.store.batch(&batch.project_id, &batch.id).await?;
    stored
        .map(|stored| batch_object(&stored))
        .ok_or_else(|| ApiError::Internal(format!("the batch {} is gone", batch.id)))
}

/// Why an input file was refused: OpenAI's `errors.data` item.
#[derive(Debug, PartialEq, Eq)]
struct BadLine {
    code: &'static str,
    message: String,
    param: Option<&'static str>,
    /// 1-based; None for the file as a whole.
    line: Option<u64>,
}

impl BadLine {
    fn to_json(&self) -> Value {
        json!({
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "line": self.line,
        })
    }
}

/// Reads the batch's input file a chunk at a time, checking each line and keeping those that
/// pass: how many, or the first bad one.
async fn read_lines(
    state: &AppState,
    batch: &NewBatch,
    file: &StoredFile,
    max_body: usize,
) -> Result<Result<u32, BadLine>, ApiError> {
    let mut checker = Checker {
        endpoint: &batch.endpoint,
        max_body,
        kept: Kept::new(MAX_BATCH_LINES),
        number: 0,
    };
    // A line may cross chunks: its start waits here, at most a body and its envelope.
    let mut partial: Vec<u8> = Vec::new();
    let longest = max_body.saturating_add(64 * 1024);
    let mut seq = 0u32;
    while let Some(chunk) = state.store.file_chunk(&file.id, seq).await? {
        seq += 1;
        let mut rest = &chunk[..];
        while let Some(end) = memchr::memchr(b'\n', rest) {
            let line = if partial.is_empty() {
                &rest[..end]
            } else {
                partial.extend_from_slice(&rest[..end]);
                &partial[..]
            };
            let checked = checker.line(line);
            partial.clear();
            if let Err(bad) = checked {
                return Ok(Err(bad));
            }
            rest = &rest[end + 1..];
            if let Some(group) = checker.kept.full_group() {
                state.store.put_batch_lines(&batch.id, group).await?;
            }
        }
        partial.extend_from_slice(rest);
        if partial.len() > longest {
            return Ok(Err(checker.too_long()));
        }
    }
    if !partial.is_empty()
        && let Err(bad) = checker.line(&std::mem::take(&mut partial))
    {
        return Ok(Err(bad));
    }
    if checker.kept.count() == 0 {
        return Ok(Err(BadLine {
            code: "empty_file",
            message: "the input file holds no request".into(),
            param: None,
            line: None,
        }));
    }
    let count = checker.kept.count();
    let group = checker.kept.rest();
    if !group.is_empty() {
        state.store.put_batch_lines(&batch.id, group).await?;
    }
    Ok(Ok(count))
}

/// The checks of an input file's lines, and the lines kept until they go to the store.
struct Checker<'a> {
    endpoint: &'a str,
    max_body: usize,
    kept: Kept,
    /// Lines so far, blank ones too: what an error names.
    number: u64,
}

impl Checker<'_> {
    fn bad(&self, code: &'static str, param: Option<&'static str>, message: String) -> BadLine {
        BadLine {
            code,
            message,
            param,
            line: Some(self.number),
        }
    }

    fn too_long(&self) -> BadLine {
        let message = format!(
            "line {} is longer than a request body may be (max_body_bytes, {} bytes)",
            self.number + 1,
            self.max_body
        );
        BadLine {
            code: "request_too_large",
            message,
            param: Some("body"),
            line: Some(self.number + 1),
        }
    }

    /// Checks one line (without its `\n`); a blank line is skipped.
    fn line(&mut self, line: &[u8]) -> Result<(), BadLine> {
        self.number += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let number = self.number;
        let value: Value = serde_json::from_slice(line).map_err(|e| {
            let message = format!("line {number} is not valid JSON: {e}");
            self.bad("invalid_json_line", None, message)
        })?;
        let Value::Object(mut fields) = value else {
            let message = format!("line {number} is not a JSON object");
            return Err(self.bad("invalid_json_line", None, message));
        };
        let missing = |name: &'static str| {
            let message = format!("line {number} has no {name}");
            self.bad("missing_required_parameter", Some(name), message)
        };
        let custom_id = match fields.remove("custom_id") {
            Some(Value::String(id)) if !id.is_empty() => id,
            Some(_) => {
                let message = format!("line {number}: custom_id must be a non-empty string");
                return Err(self.bad("invalid_value", Some("custom_id"), message));
            }
            None => return Err(missing("custom_id")),
        };
        if custom_id.len() > MAX_CUSTOM_ID_BYTES {
            let message = format!("line {number}: custom_id is over {MAX_CUSTOM_ID_BYTES} bytes");
            return Err(self.bad("invalid_value", Some("custom_id"), message));
        }
        match fields.remove("method") {
            Some(Value::String(method)) if method == "POST" => {}
            Some(_) => {
                let message = format!("line {number}: method must be \"POST\"");
                return Err(self.bad("invalid_value", Some("method"), message));
            }
            None => return Err(missing("method")),
        }
        match fields.remove("url") {
            Some(Value::String(url)) if url == self.endpoint => {}
            Some(url) => {
                let message = format!(
                    "line {number}: url {url} is not the batch's endpoint, {:?}",
                    self.endpoint
                );
                return Err(self.bad("mismatched_endpoint", Some("url"), message));
            }
            None => return Err(missing("url")),
        }
        let body = match fields.remove("body") {
            Some(Value::Object(body)) => body,
            Some(_) => {
                let message = format!("line {number}: body must be a JSON object");
                return Err(self.bad("invalid_value", Some("body"), message));
            }
            None => return Err(missing("body")),
        };
        let body = match body_text(body, self.max_body) {
            Ok(body) => body,
            Err(BodyFault::Streamed) => {
                let message = format!(
                    "line {number}: a batch's requests are answered whole: stream must not be true"
                );
                return Err(self.bad("invalid_value", Some("body.stream"), message));
            }
            Err(BodyFault::TooLarge) => {
                let message = format!(
                    "line {number}: its body is over max_body_bytes ({} bytes)",
                    self.max_body
                );
                return Err(self.bad("request_too_large", Some("body"), message));
            }
        };
        let id = format!("{custom_id:?}");
        self.kept
            .push(custom_id, body)
            .map_err(|refused| match refused {
                Refused::Duplicate => {
                    let message = format!("line {number}: custom_id {id} is not unique");
                    self.bad("duplicate_custom_id", Some("custom_id"), message)
                }
                Refused::TooMany => {
                    let message = format!("the file holds more than {MAX_BATCH_LINES} requests");
                    self.bad("too_many_requests", None, message)
                }
            })
    }
}

/// `GET /v1/batches`: `after`, `limit` (1 to 100, default 20), newest first.
async fn list(state: &AppState, request: &Request<Incoming>) -> Result<Value, ApiError> {
    let key = super::caller(state, request.headers()).await?;
    let (mut after, mut limit) = (None, DEFAULT_PAGE);
    let pairs = request.uri().query().unwrap_or_default().as_bytes();
    for (name, value) in url::form_urlencoded::parse(pairs) {
        match name.as_ref() {
            "after" => {
                let id = batch_id(&value)
                    .map_err(|_| ApiError::invalid("after", "must be a batch's id"))?;
                after = Some(id.to_owned());
            }
            "limit" => {
                limit = page_limit(&value, MAX_PAGE).ok_or_else(|| {
                    ApiError::invalid("limit", format!("must be from 1 to {MAX_PAGE}"))
                })?;
            }
            _ => {}
        }
    }
    // One more than the page: whether there are more.
    let page = BatchPage::After(after.as_deref());
    let batches = (state.store)
        .batches(&key.project_id, "batch_", page, limit + 1)
        .await?;
    Ok(super::list_page(batches, limit, |b| &b.id, batch_object))
}

/// The batch `id` of the caller's project.
async fn found(state: &AppState, key: &KeyRecord, id: &str) -> Result<StoredBatch, ApiError> {
    let id = batch_id(id)?;
    let batch = state.store.batch(&key.project_id, id).await?;
    batch.ok_or_else(|| super::no_such("Batch", id))
}

/// `GET /v1/batches/{id}`.
async fn retrieve(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<Value, ApiError> {
    let key = super::caller(state, request.headers()).await?;
    Ok(batch_object(&found(state, &key, id).await?))
}

/// `POST /v1/batches/{id}/cancel`: `cancelling` until its lines in flight end (then
/// `cancelled`, with the files of what was answered). A batch cancelled already is answered as
/// it is; one that ended otherwise is a 409.
async fn cancel(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<Value, ApiError> {
    let key = super::caller(state, request.headers()).await?;
    let batch = found(state, &key, id).await?;
    let now = crate::clock::now_ms();
    if state
        .store
        .cancel_batch(&key.project_id, &batch.id, now)
        .await?
    {
        state.batch_wake.notify_one();
    }
    let batch = found(state, &key, id).await?;
    match batch.status {
        BatchStatus::Cancelling | BatchStatus::Cancelled => Ok(batch_object(&batch)),
        status => Err(ApiError::Conflict(format!(
            "the batch is {}: only a validating or in-progress batch can be cancelled",
            status.as_str()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker() -> Checker<'static> {
        Checker {
            endpoint: "/v1/chat/completions",
            max_body: 200,
            kept: Kept::new(MAX_BATCH_LINES),
            number: 0,
        }
    }

    #[test]
    fn each_bad_line_is_named_with_its_number_and_code() {
        let good = br#"{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}"#;
        let cases: [(&[u8], &str, Option<&str>); 8] = [
            (b"{not json", "invalid_json_line", None),
            (b"[1]", "invalid_json_line", None),
            (
                br#"{"method":"POST","url":"/v1/chat/completions","body":{}}"#,
                "missing_required_parameter",
                Some("custom_id"),
            ),
            (
                br#"{"custom_id":"b","method":"GET","url":"/v1/chat/completions","body":{}}"#,
                "invalid_value",
                Some("method"),
            ),
            (
                br#"{"custom_id":"b","method":"POST","url":"/v1/embeddings","body":{}}"#,
                "mismatched_endpoint",
                Some("url"),
            ),
            (
                br#"{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"stream":true}}"#,
                "invalid_value",
                Some("body.stream"),
            ),
            (good, "duplicate_custom_id", Some("custom_id")),
            (
                format!(
                    r#"{{"custom_id":"c","method":"POST","url":"/v1/chat/completions","body":{{"x":"{}"}}}}"#,
                    "y".repeat(300)
                )
                .leak()
                .as_bytes(),
                "request_too_large",
                Some("body"),
            ),
        ];
        for (line, code, param) in cases {
            let mut checker = checker();
            checker.line(good).unwrap();
            checker.line(b"  ").unwrap();
            let bad = checker.line(line).unwrap_err();
            assert_eq!((bad.code, bad.param, bad.line), (code, param, Some(3)));
            assert!(bad.message.starts_with("line 3"), "{}", bad.message);
        }
        let mut checker = checker();
        checker.line(good).unwrap();
        checker.line(b"\r").unwrap();
        assert_eq!(checker.kept.count(), 1);
        assert_eq!(checker.kept.rest()[0].body, r#"{"model":"m"}"#);
    }

    #[test]
    fn windows() {
        assert_eq!(window("24h"), Some(Duration::from_secs(86_400)));
        assert_eq!(window("90m"), Some(Duration::from_secs(5400)));
        assert_eq!(window("2s"), Some(Duration::from_secs(2)));
        for bad in [
            "",
            "h",
            "0h",
            "169h",
            "24",
            "-1h",
            "1d",
            "99999999999999999999h",
        ] {
            assert_eq!(window(bad), None, "{bad}");
        }
    }
}
