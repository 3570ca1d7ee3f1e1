//! The HTTP pieces both the transport ([`crate::server`]) and the request
//! [`crate::flow`] use: response bodies (JSON, Server-Sent Events), error
//! responses, and reading a request body within its size and time limits
//! (the flow reads it only once the caller's key is checked).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{
    ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, EXPECT, HeaderValue, RETRY_AFTER,
};
use hyper::{HeaderMap, Response, StatusCode};
use tokio::sync::mpsc;
use tokio::time::Instant;
use uuid::Uuid;

use crate::error::ApiError;

pub type Body = BoxBody<Bytes, BodyCut>;

/// Why an answer's body stopped before its end. hyper then cuts the connection (HTTP/1.1
/// sends no last chunk), so that a caller never takes a part of an answer for all of it:
/// audio whose provider failed half way would otherwise end cleanly, and play shorter.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyCut(pub String);

pub const INVOCATION_HEADER: &str = "x-invocation-id";

pub fn json_response(status: StatusCode, body: &serde_json::Value, id: &Uuid) -> Response<Body> {
    json_text_response(status, body.to_string(), id)
}

/// A response whose JSON is already serialized (and kept for the record too).
pub fn json_text_response(status: StatusCode, body: impl Into<Bytes>, id: &Uuid) -> Response<Body> {
    typed_response(status, "application/json", body, id)
}

/// A response of `content_type`.
pub fn typed_response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
    id: &Uuid,
) -> Response<Body> {
    let full = Full::new(body.into()).map_err(|never| match never {});
    let mut response = Response::new(full.boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    set_invocation_header(headers, id);
    response
}

/// `error` in the gateway's own shape ([`ApiError::body`]).
pub fn error_response(error: &ApiError, id: &Uuid) -> Response<Body> {
    error_response_with_body(error, &error.body(id), id)
}

/// `error` as `body` (an API surface's own shape), with the status and the
/// `Retry-After` and `Allow` headers the error calls for.
pub fn error_response_with_body(
    error: &ApiError,
    body: &serde_json::Value,
    id: &Uuid,
) -> Response<Body> {
    let mut response = json_response(error.status(), body, id);
    if let Some(seconds) = error.retry_after() {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    if let ApiError::MethodNotAllowed(allowed) = error {
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static(allowed));
    }
    response
}

fn set_invocation_header(headers: &mut HeaderMap, id: &Uuid) {
    if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
        headers.insert(INVOCATION_HEADER, value);
    }
}

/// A Server-Sent Events response whose frames arrive through `frames`.
pub fn sse_response(frames: mpsc::Receiver<Bytes>, id: &Uuid) -> Response<Body> {
    let mut response = channel_response(frames, "text/event-stream", id);
    let headers = response.headers_mut();
    // Reverse proxies (nginx) would otherwise buffer the stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A 200 response of `content_type` whose body arrives through `chunks`, as they are made;
/// it ends when the sender is dropped.
pub fn channel_response(
    chunks: mpsc::Receiver<Bytes>,
    content_type: &'static str,
    id: &Uuid,
) -> Response<Body> {
    streamed(ChannelBody { frames: chunks }.boxed(), content_type, id)
}

/// A 200 response of `content_type` whose body arrives through `chunks`, as they are made: it
/// ends when the sender is dropped, or is cut when the sender sends a [`BodyCut`].
pub fn cuttable_response(
    chunks: mpsc::Receiver<Result<Bytes, BodyCut>>,
    content_type: &'static str,
    id: &Uuid,
) -> Response<Body> {
    streamed(CuttableBody { chunks }.boxed(), content_type, id)
}

/// A 200 response of `content_type` whose `body` is made as it is sent: never cached.
fn streamed(body: Body, content_type: &'static str, id: &Uuid) -> Response<Body> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    set_invocation_header(headers, id);
    response
}

/// One SSE frame: `data: <json>` and a blank line.
pub fn sse_frame(value: &serde_json::Value) -> Bytes {
    sse_text_frame(&value.to_string())
}

/// One SSE frame of `json`, a JSON text (one line: JSON escapes its line breaks).
pub fn sse_text_frame(json: &str) -> Bytes {
    let mut frame = Vec::with_capacity(json.len() + 8);
    frame.extend_from_slice(b"data: ");
    frame.extend_from_slice(json.as_bytes());
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

struct ChannelBody {
    frames: mpsc::Receiver<Bytes>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = BodyCut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyCut>>> {
        self.frames
            .poll_recv(cx)
            .map(|frame| frame.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// A body of chunks that may end in a cut ([`cuttable_response`]).
struct CuttableBody {
    chunks: mpsc::Receiver<Result<Bytes, BodyCut>>,
}

impl hyper::body::Body for CuttableBody {
    type Data = Bytes;
    type Error = BodyCut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyCut>>> {
        self.chunks
            .poll_recv(cx)
            .map(|chunk| chunk.map(|chunk| chunk.map(Frame::data)))
    }
}

/// The body's length as `Content-Length` declares it (`None`: not declared, or not a
/// length this process can hold).
pub fn declared_length(headers: &HeaderMap) -> Option<usize> {
    declared(headers).and_then(|len| usize::try_from(len).ok())
}

/// `Content-Length`, when it is a number.
fn declared(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// A body declared (`Content-Length`) larger than `limit` is refused before anything is read.
pub fn check_declared_length(headers: &HeaderMap, limit: usize) -> Result<(), ApiError> {
    if declared(headers).is_some_and(|len| len > limit as u64) {
        return Err(ApiError::BodyTooLarge(limit));
    }
    Ok(())
}

/// Reads a request body of at most `limit` bytes, all of it within `timeout`
/// (a client that stops sending mid-body must not hold a connection and its
/// buffers for long). A body over `limit` is a 413 once up to `limit` more
/// bytes are read and dropped within the same time, so that a client still
/// sending reads its answer rather than a connection reset.
pub async fn read_body(
    mut body: Incoming,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError> {
    let deadline = Instant::now() + timeout;
    match tokio::time::timeout_at(deadline, Limited::new(&mut body, limit).collect()).await {
        Err(_) => Err(ApiError::RequestTimeout(timeout.as_secs())),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            drain(body, limit, deadline).await;
            Err(ApiError::BodyTooLarge(limit))
        }
        Ok(Err(e)) => Err(ApiError::BadRequest(format!(
            "could not read the request body: {e}"
        ))),
    }
}

/// Reads and drops the body of a request refused before it was read, up to
/// `limit` bytes and `timeout`: a client still sending then reads its answer
/// instead of a connection reset. Nothing is kept, whatever the client sends.
/// A client waiting for `100 Continue` has sent nothing and is not asked to:
/// it gets its answer without sending the body.
pub async fn discard_body(headers: &HeaderMap, body: Incoming, limit: usize, timeout: Duration) {
    let awaits_continue = headers
        .get(EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if !awaits_continue {
        drain(body, limit, Instant::now() + timeout).await;
    }
}

/// Reads and drops `body` until more than `limit` bytes came, it ends, or `deadline`.
async fn drain(mut body: Incoming, limit: usize, deadline: Instant) {
    let drain = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                seen += data.len();
                if seen > limit {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout_at(deadline, drain).await;
}
