//! The fake upstream: an OpenAI-compatible `POST .../chat/completions` that
//! answers at once with a fixed small body, as JSON or as Server-Sent Events;
//! Bedrock's `POST /model/MODEL/converse` with the same answer in its shape (the
//! signature is not checked: the gateway's e2e tests do that); an OTLP/HTTP
//! sink (`POST /v1/traces`: read, then 200) for the gateway's spans; a minimal
//! MCP server of the stateless revision at `POST /mcp` (see [`mcp`]); and
//! Open-Meteo's `GET /v1/forecast` with a fixed answer, for the example tool
//! plugin `rust-tool`.
//!
//! The stream's shape travels in the model name, because that is the one
//! request field the gateway's openai plugin passes through unchanged:
//! `bench-f{FRAMES}-g{GAP_US}` streams FRAMES content frames GAP_US
//! microseconds apart. Each content frame's text carries the
//! `CLOCK_MONOTONIC` instant it was written (`@ts=NANOS;`), so the load
//! generator can measure each frame's delivery time through any middle box.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use crate::sys;

pub mod mcp;

/// Frames of a stream when the model name does not say.
const DEFAULT_FRAMES: u32 = 10;
/// Upper bounds that keep a typo from making a stream run for hours.
const MAX_FRAMES: u32 = 100_000;
const MAX_GAP_US: u64 = 10_000_000;

/// The fixed non-streamed answer (about 300 bytes, like a short real one).
const COMPLETION: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18}}"#;

/// The same answer as Bedrock's Converse gives it.
const CONVERSE: &str = r#"{"output":{"message":{"role":"assistant","content":[{"text":"Hello! How can I help you today?"}]}},"stopReason":"end_turn","usage":{"inputTokens":9,"outputTokens":9,"totalTokens":18},"metrics":{"latencyMs":1}}"#;

/// Open-Meteo's answer to `GET /v1/forecast?latitude=..&longitude=..&current=temperature_2m,wind_speed_10m`,
/// in its real shape, whatever the query.
const FORECAST: &str = r#"{"latitude":52.52,"longitude":13.419998,"generationtime_ms":0.0269412994384766,"utc_offset_seconds":0,"timezone":"GMT","timezone_abbreviation":"GMT","elevation":38.0,"current_units":{"time":"iso8601","interval":"seconds","temperature_2m":"°C","wind_speed_10m":"km/h"},"current":{"time":"2026-11-28T12:00","interval":900,"temperature_2m":4.2,"wind_speed_10m":11.3}}"#;

/// The marker before each content frame's timestamp.
pub const TS_MARKER: &[u8] = b"@ts=";

/// The model name that asks for `frames` frames `gap` apart.
pub fn stream_model(frames: u32, gap: Duration) -> String {
    format!("bench-f{frames}-g{}", gap.as_micros())
}

/// Serves on `listen` until the process is terminated. Single-threaded: the
/// upstream should cost as little CPU as possible on a shared machine.
pub fn run(listen: SocketAddr) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(
        async move { crate::serve::serve(listen, "upstream", || service_fn(answer)).await },
    )
}

type AnswerBody = Either<Full<Bytes>, FrameBody>;

async fn answer(request: Request<Incoming>) -> Result<Response<AnswerBody>, Infallible> {
    let path = request.uri().path();
    let is_chat = path.ends_with("/chat/completions");
    let is_converse = path.ends_with("/converse");
    let is_traces = path == "/v1/traces";
    let is_mcp = path == "/mcp";
    let is_forecast = path == "/v1/forecast";
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Ok(plain(StatusCode::BAD_REQUEST, "unreadable body")),
    };
    if is_mcp {
        let (status, answer) = mcp::answer(&parts.headers, &body);
        return Ok(json(status, answer));
    }
    if is_forecast {
        return Ok(json(
            StatusCode::OK,
            Bytes::from_static(FORECAST.as_bytes()),
        ));
    }
    if is_traces {
        // An empty ExportTraceServiceResponse: everything accepted.
        let mut response = plain(StatusCode::OK, "");
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        return Ok(response);
    }
    if is_converse {
        let mut response = Response::new(Either::Left(Full::new(Bytes::from_static(
            CONVERSE.as_bytes(),
        ))));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        return Ok(response);
    }
    if !is_chat {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            "only /chat/completions, /model/MODEL/converse, /v1/traces, /mcp and /v1/forecast",
        ));
    }
    if !contains(&body, b"\"stream\":true") {
        let mut response = Response::new(Either::Left(Full::new(Bytes::from_static(
            COMPLETION.as_bytes(),
        ))));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        return Ok(response);
    }
    let (frames, gap) = stream_shape(&body);
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(stream_frames(tx, frames, gap));
    let mut response = Response::new(Either::Right(FrameBody(rx)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    Ok(response)
}

fn json(status: StatusCode, body: Bytes) -> Response<AnswerBody> {
    let mut response = Response::new(Either::Left(Full::new(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<AnswerBody> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from_static(text.as_bytes()))));
    *response.status_mut() = status;
    response
}

/// Writes the frames on their schedule; stops early when the reader leaves.
async fn stream_frames(tx: mpsc::Sender<Bytes>, frames: u32, gap: Duration) {
    let start = tokio::time::Instant::now();
    for i in 0..frames {
        if i > 0 && !gap.is_zero() {
            // Absolute deadlines: a late wake-up does not push every later frame back.
            tokio::time::sleep_until(start + gap * i).await;
        }
        let frame = format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"@ts={};\"}},\"finish_reason\":null}}]}}\n\n",
            sys::now_ns()
        );
        if tx.send(Bytes::from(frame)).await.is_err() {
            return;
        }
    }
    let tail: [&'static str; 3] = [
        "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":9,\"total_tokens\":18}}\n\n",
        "data: [DONE]\n\n",
    ];
    for frame in tail {
        if tx.send(Bytes::from_static(frame.as_bytes())).await.is_err() {
            return;
        }
    }
}

/// Frames and gap from the request's `"model":"bench-fN-gUS"`.
fn stream_shape(body: &[u8]) -> (u32, Duration) {
    let model = find_after(body, b"\"model\":\"")
        .and_then(|rest| rest.split(|&b| b == b'"').next())
        .and_then(|name| std::str::from_utf8(name).ok())
        .unwrap_or("");
    let mut frames = DEFAULT_FRAMES;
    let mut gap_us = 0u64;
    for part in model.split('-') {
        if let Some(n) = part.strip_prefix('f').and_then(|n| n.parse().ok()) {
            frames = n;
        } else if let Some(n) = part.strip_prefix('g').and_then(|n| n.parse().ok()) {
            gap_us = n;
        }
    }
    (
        frames.min(MAX_FRAMES),
        Duration::from_micros(gap_us.min(MAX_GAP_US)),
    )
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find_after(haystack, needle).is_some()
}

/// The bytes after the first `needle`.
fn find_after<'a>(haystack: &'a [u8], needle: &[u8]) -> Option<&'a [u8]> {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| &haystack[at + needle.len()..])
}

/// A response body fed frame by frame from a channel.
pub struct FrameBody(mpsc::Receiver<Bytes>);

impl Body for FrameBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|next| next.map(|b| Ok(Frame::data(b))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_name_shapes_the_stream() {
        let body = br#"{"model":"bench-f25-g1500","stream":true}"#;
        assert_eq!(stream_shape(body), (25, Duration::from_micros(1500)));
        assert_eq!(
            stream_shape(br#"{"model":"gpt-4o"}"#),
            (DEFAULT_FRAMES, Duration::ZERO)
        );
        assert_eq!(
            stream_model(25, Duration::from_micros(1500)),
            "bench-f25-g1500"
        );
    }
}
