//! OpenAI's Files API: `POST /v1/files` (a `multipart/form-data` upload), `GET /v1/files`,
//! `GET /v1/files/{id}`, `GET /v1/files/{id}/content` and `DELETE /v1/files/{id}`, a project's
//! own files only (any of its keys: a file has no route or model for a key's scope to hold).
//!
//! An upload is read as it arrives and kept in the store a chunk at a time ([`crate::store`]'s
//! files): it never is in memory whole, and every replica serves it. Before a byte is read it
//! reserves the most it may take of the project's `max_project_file_bytes` (its declared
//! length, else `max_file_bytes`), so that uploads at once cannot pass the quota together; a
//! refused or broken upload is deleted, its reservation with it. A download is read from the
//! store a chunk at a time as the client takes it.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::ApiError;
use crate::form::{FormError, STREAMED_FORM_OVERHEAD, Streamed, StreamedField, StreamedFile};
use crate::http::{Body, BodyCut};
use crate::state::AppState;
use crate::store::{CHUNK_BYTES, FileQuery, FinishedUpload, NewUpload, StoredFile};

/// What a caller may upload a file for: OpenAI's purposes. (`batch_output` and the other
/// `*_output` purposes are the gateway's to give its own files.)
const PURPOSES: [&str; 6] = [
    "assistants",
    "batch",
    "fine-tune",
    "vision",
    "user_data",
    "evals",
];
/// How long a `batch` file is kept when its upload names no expiry: OpenAI's default.
const BATCH_FILE_SECS: i64 = 30 * 24 * 60 * 60;
/// The expiries `expires_after[seconds]` may ask for: OpenAI's range, an hour to 30 days.
const EXPIRY_SECS: std::ops::RangeInclusive<i64> = 3600..=2_592_000;
/// The most files one page lists (`limit`'s default and maximum, as OpenAI's).
const MAX_PAGE: u32 = 10_000;
/// The longest file name kept.
const MAX_FILENAME_BYTES: usize = 1024;

/// Answers a request for `/v1/files` (`rest` empty) or below it (`rest` `/{id}` or
/// `/{id}/content`).
pub async fn serve(
    state: Arc<AppState>,
    request: Request<Incoming>,
    rest: &str,
    request_id: Uuid,
) -> Response<Body> {
    let method = request.method().clone();
    let result = match (rest.strip_prefix('/'), method) {
        (None, Method::POST) => upload(&state, request).await,
        (None, Method::GET) => list(&state, &request).await,
        (None, _) => Err(ApiError::MethodNotAllowed("GET, POST")),
        (Some(tail), method) => match tail.split_once('/') {
            None if method == Method::GET => retrieve(&state, &request, tail).await,
            None if method == Method::DELETE => delete(&state, &request, tail).await,
            None => Err(ApiError::MethodNotAllowed("GET, DELETE")),
            Some((id, "content")) if method == Method::GET => {
                return match content(&state, &request, id, &request_id).await {
                    Ok(response) => response,
                    Err(error) => super::error_response(&error, &request_id),
                };
            }
            Some((_, "content")) => Err(ApiError::MethodNotAllowed("GET")),
            Some(_) => Err(ApiError::NotFound(format!(
                "no such endpoint: /v1/files/{tail}"
            ))),
        },
    };
    super::answer(result, &request_id)
}

fn not_found(id: &str) -> ApiError {
    super::no_such("File", id)
}

fn file_id(id: &str) -> Result<&str, ApiError> {
    super::made_id(id, "file-", "File")
}

/// A file as OpenAI's `File` object describes it.
pub fn file_object(file: &StoredFile) -> Value {
    json!({
        "id": file.id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": file.created_at_ms / 1000,
        "expires_at": file.expires_at_ms.map(|ms| ms / 1000),
        "filename": file.filename,
        "purpose": file.purpose,
        "status": "processed",
        "status_details": null,
    })
}

/// `POST /v1/files`.
async fn upload(state: &AppState, request: Request<Incoming>) -> Result<Value, ApiError> {
    let live = state.live();
    let config = &live.config;
    let (max_file, quota) = (
        config.max_file_bytes.get(),
        config.max_project_file_bytes.get(),
    );
    let stall = Duration::from_secs(config.request_read_timeout_secs.get());
    let (head, body) = request.into_parts();
    let refused = |error: ApiError, body: Incoming| {
        let limit = config.max_body_bytes.get();
        let headers = &head.headers;
        async move {
            crate::http::discard_body(headers, body, limit, stall).await;
            Err::<Value, ApiError>(error)
        }
    };
    let key = super::caller(state, &head.headers).await;
    let key = match key {
        Ok(key) => key,
        Err(error) => return refused(error, body).await,
    };
    let content_type = head.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if crate::form::boundary(content_type).is_none() {
        let error = FormError::NotMultipart(content_type.unwrap_or("none").to_owned());
        return refused(ApiError::BadRequest(error.to_string()), body).await;
    }
    // The file is at most what the body declares (the form's boundaries and fields around it).
    let declared = crate::http::declared_length(&head.headers).map(|len| len as u64);
    if declared.is_some_and(|len| len > max_file.saturating_add(STREAMED_FORM_OVERHEAD)) {
        return refused(ApiError::FileTooLarge(max_file), body).await;
    }
    let reserved = declared.map_or(max_file, |len| len.min(max_file));
    // What the upload holds in memory at most: the chunk it fills and the one being written.
    let limit = config.max_inflight_body_bytes.get();
    let Some(_held) = state.inflight.reserve(2 * CHUNK_BYTES, limit) else {
        return refused(ApiError::BodiesInFlight(limit), body).await;
    };
    let new = NewUpload {
        id: format!("file-{}", Uuid::now_v7().simple()),
        project_id: key.project_id.clone(),
        created_at_ms: crate::clock::now_ms(),
        reserved,
    };
    match state.store.begin_upload(&new, quota).await {
        Ok(true) => {}
        Ok(false) => return refused(ApiError::FilesFull(quota), body).await,
        Err(error) => return refused(error.into(), body).await,
    }
    let mut pending = Pending {
        store: Some(state.store.clone()),
        id: new.id.clone(),
    };
    let frames = body.into_data_stream();
    let form = Streamed::new(content_type, frames, reserved + STREAMED_FORM_OVERHEAD)
        .map_err(|e| form_error(e, max_file))?;
    let received = Received::read(state, &new, form, max_file, stall).await?;
    let finished = received.finished(new.created_at_ms)?;
    let file = state.store.finish_upload(&new, finished).await?;
    let file = file.ok_or_else(|| {
        ApiError::Internal(format!("the upload {} was deleted before it ended", new.id))
    })?;
    pending.store = None;
    Ok(file_object(&file))
}

/// An upload begun and not yet whole: deleted, with its chunks and reservation, unless it
/// ends whole (however its request ends: refused, the client gone, the gateway stopping).
struct Pending {
    store: Option<crate::store::Store>,
    id: String,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(store) = self.store.take() else {
            return;
        };
        let id = std::mem::take(&mut self.id);
        // From a drop, which cannot wait: a task of its own, on this serving thread. Should it
        // fail, or the runtime be ending, the sweep deletes the upload a day later.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            if let Err(e) = store.abandon_upload(&id).await {
                tracing::warn!(file = id, "an unfinished upload was not deleted: {e}");
            }
        });
    }
}

/// What an upload's form said, its file kept.
#[derive(Default)]
struct Received {
    purpose: Option<String>,
    filename: Option<String>,
    bytes: u64,
    anchor: Option<String>,
    seconds: Option<String>,
}

impl Received {
    /// Reads the form, keeping its file in the store a chunk at a time: at most `max_file`
    /// bytes, each step within `stall`.
    async fn read(
        state: &AppState,
        upload: &NewUpload,
        mut form: Streamed,
        max_file: u64,
        stall: Duration,
    ) -> Result<Received, ApiError> {
        let mut received = Received::default();
        while let Some(field) = within(stall, max_file, form.next()).await? {
            match field {
                StreamedField::Text { name, value } => received.text(name, value)?,
                StreamedField::File {
                    name,
                    file_name,
                    file,
                    ..
                } => {
                    if name != "file" {
                        return Err(ApiError::invalid(
                            name,
                            "unknown parameter: only `file` is a file",
                        ));
                    }
                    if received.filename.is_some() {
                        return Err(ApiError::invalid(
                            "file",
                            "the form holds more than one file",
                        ));
                    }
                    if file_name.len() > MAX_FILENAME_BYTES {
                        let message = format!("the file name is over {MAX_FILENAME_BYTES} bytes");
                        return Err(ApiError::invalid("file", message));
                    }
                    received.filename = Some(file_name);
                    received.bytes = keep(state, upload, file, max_file, stall).await?;
                }
            }
        }
        Ok(received)
    }

    fn text(&mut self, name: String, value: String) -> Result<(), ApiError> {
        let slot = match name.as_str() {
            "purpose" => &mut self.purpose,
            "expires_after[anchor]" => &mut self.anchor,
            "expires_after[seconds]" => &mut self.seconds,
            "file" => {
                return Err(ApiError::invalid(
                    "file",
                    "must be a file, not a text field",
                ));
            }
            _ => return Err(ApiError::invalid(name, "unknown parameter")),
        };
        if slot.replace(value).is_some() {
            return Err(ApiError::invalid(name, "given twice"));
        }
        Ok(())
    }

    /// The upload as kept: its purpose and expiry checked.
    fn finished(self, created_at_ms: i64) -> Result<FinishedUpload, ApiError> {
        let filename = self
            .filename
            .ok_or_else(|| ApiError::invalid("file", "missing: the form has no file"))?;
        let purpose = self
            .purpose
            .ok_or_else(|| ApiError::invalid("purpose", "missing"))?;
        if !PURPOSES.contains(&purpose.as_str()) {
            let message = format!("{purpose:?} is not one of {}", PURPOSES.join(", "));
            return Err(ApiError::invalid("purpose", message));
        }
        let secs = match (self.anchor.as_deref(), self.seconds) {
            (None, None) => (purpose == "batch").then_some(BATCH_FILE_SECS),
            (Some("created_at"), Some(seconds)) => Some(
                seconds
                    .parse::<i64>()
                    .ok()
                    .filter(|secs| EXPIRY_SECS.contains(secs))
                    .ok_or_else(|| {
                        ApiError::invalid(
                            "expires_after.seconds",
                            format!(
                                "must be a whole number of seconds from {} to {}",
                                EXPIRY_SECS.start(),
                                EXPIRY_SECS.end()
                            ),
                        )
                    })?,
            ),
            (Some("created_at"), None) => {
                return Err(ApiError::invalid("expires_after.seconds", "missing"));
            }
            (None, Some(_)) => return Err(ApiError::invalid("expires_after.anchor", "missing")),
            (Some(_), _) => {
                return Err(ApiError::invalid(
                    "expires_after.anchor",
                    "must be \"created_at\"",
                ));
            }
        };
        Ok(FinishedUpload {
            filename,
            purpose,
            bytes: self.bytes,
            expires_at_ms: secs.map(|secs| created_at_ms.saturating_add(secs * 1000)),
        })
    }
}

/// Keeps `file` as the upload's chunks; its size. Over what the upload reserved (at most
/// `max_file`): refused.
async fn keep(
    state: &AppState,
    upload: &NewUpload,
    mut file: StreamedFile,
    max_file: u64,
    stall: Duration,
) -> Result<u64, ApiError> {
    let mut chunk = BytesMut::with_capacity(CHUNK_BYTES);
    let (mut bytes, mut seq) = (0u64, 0u32);
    while let Some(mut data) = within(stall, max_file, file.chunk()).await? {
        bytes += data.len() as u64;
        if bytes > upload.reserved {
            // A body that declared less than it sends is cut by hyper; this is a file over
            // max_file_bytes sent without a declared length.
            return Err(ApiError::FileTooLarge(max_file));
        }
        while !data.is_empty() {
            let room = CHUNK_BYTES - chunk.len();
            chunk.extend_from_slice(&data.split_to(room.min(data.len())));
            if chunk.len() == CHUNK_BYTES {
                let full = std::mem::replace(&mut chunk, BytesMut::with_capacity(CHUNK_BYTES));
                state
                    .store
                    .put_file_chunk(&upload.id, seq, full.freeze())
                    .await?;
                seq += 1;
            }
        }
    }
    if !chunk.is_empty() {
        state
            .store
            .put_file_chunk(&upload.id, seq, chunk.freeze())
            .await?;
    }
    Ok(bytes)
}

/// One step of reading the form, which must come within `stall` of asking.
async fn within<T>(
    stall: Duration,
    max_file: u64,
    step: impl std::future::Future<Output = Result<T, FormError>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(stall, step).await {
        Ok(read) => read.map_err(|e| form_error(e, max_file)),
        Err(_) => Err(ApiError::RequestTimeout(stall.as_secs())),
    }
}

/// A form's fault as the caller is told it. The form's own bound is the file's with room for
/// the rest: passing it (seen as multer reads ahead, before the file's own count) is a file
/// over `max_file`.
fn form_error(error: FormError, max_file: u64) -> ApiError {
    match error {
        FormError::TextTooLong(ref field) => ApiError::invalid(field.clone(), error.to_string()),
        FormError::TooLarge(_) => ApiError::FileTooLarge(max_file),
        other => ApiError::BadRequest(other.to_string()),
    }
}

/// `GET /v1/files`: `after`, `limit` (1 to 10,000, default 10,000), `order` (`asc` or `desc`,
/// the default) and `purpose`.
async fn list(state: &AppState, request: &Request<Incoming>) -> Result<Value, ApiError> {
    let key = super::caller(state, request.headers()).await?;
    let mut query = FileQuery {
        purpose: None,
        after: None,
        limit: MAX_PAGE,
        newest_first: true,
        now_ms: crate::clock::now_ms(),
    };
    let pairs = request.uri().query().unwrap_or_default().as_bytes();
    for (name, value) in url::form_urlencoded::parse(pairs) {
        match name.as_ref() {
            "after" => query.after = Some(value.into_owned()),
            "purpose" => query.purpose = Some(value.into_owned()),
            "limit" => {
                query.limit =
                    crate::surfaces::checks::page_limit(&value, MAX_PAGE).ok_or_else(|| {
                        ApiError::invalid("limit", format!("must be from 1 to {MAX_PAGE}"))
                    })?;
            }
            "order" => {
                query.newest_first = match value.as_ref() {
                    "desc" => true,
                    "asc" => false,
                    _ => return Err(ApiError::invalid("order", "must be \"asc\" or \"desc\"")),
                }
            }
            _ => {}
        }
    }
    let page = query.limit;
    // One more than the page: whether there are more.
    query.limit += 1;
    let files = state.store.files(&key.project_id, &query).await?;
    Ok(super::list_page(files, page, |f| &f.id, file_object))
}

/// The file `id` of the caller's project.
async fn found(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<StoredFile, ApiError> {
    let key = super::caller(state, request.headers()).await?;
    let id = file_id(id)?;
    let now = crate::clock::now_ms();
    let file = state.store.file(&key.project_id, id, now).await?;
    file.ok_or_else(|| not_found(id))
}

/// `GET /v1/files/{id}`.
async fn retrieve(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<Value, ApiError> {
    Ok(file_object(&found(state, request, id).await?))
}

/// `DELETE /v1/files/{id}`.
async fn delete(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
) -> Result<Value, ApiError> {
    let file = found(state, request, id).await?;
    if !state.store.delete_file(&file.project_id, &file.id).await? {
        return Err(not_found(id));
    }
    Ok(json!({"id": file.id, "object": "file", "deleted": true}))
}

/// `GET /v1/files/{id}/content`: the bytes as uploaded, read from the store a chunk at a time
/// as the client takes them. A store failure half way cuts the body (its declared length
/// then tells the client it is not whole).
async fn content(
    state: &AppState,
    request: &Request<Incoming>,
    id: &str,
    request_id: &Uuid,
) -> Result<Response<Body>, ApiError> {
    let file = found(state, request, id).await?;
    content_response(state, file, request_id).await
}

/// `file`'s bytes as the answer, read from the store a chunk at a time (Anthropic's batch
/// results too).
pub(crate) async fn content_response(
    state: &AppState,
    file: StoredFile,
    request_id: &Uuid,
) -> Result<Response<Body>, ApiError> {
    // The first chunk before the answer: a store that fails now is an error status.
    let first = state.store.file_chunk(&file.id, 0).await?;
    let (sender, chunks) = tokio::sync::mpsc::channel(1);
    let store = state.store.clone();
    let length = file.bytes;
    tokio::spawn(async move {
        let mut next = first;
        let mut seq = 0u32;
        while let Some(chunk) = next {
            if sender.send(Ok(chunk)).await.is_err() {
                return;
            }
            seq += 1;
            next = match store.file_chunk(&file.id, seq).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(file = file.id, "reading a file's bytes failed: {e}");
                    let _ = sender.send(Err(BodyCut(e.to_string()))).await;
                    return;
                }
            };
        }
    });
    let mut response =
        crate::http::cuttable_response(chunks, "application/octet-stream", request_id);
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(length));
    Ok(response)
}
