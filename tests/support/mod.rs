//! Shared helpers of the integration tests: the gateway harness, a fake
//! upstream, the recordings and a small HTTP client.
//!
//! Each test binary uses a different subset.
#![allow(dead_code, unused_imports)]

pub mod client;
pub mod gateway;
pub mod recording;
pub mod upstream;

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

pub use client::{Response, SseResponse};
pub use gateway::{Gateway, Project, Route};
pub use recording::Recording;
pub use upstream::FakeUpstream;

/// A value unique to this test run, e.g. for secrets that must be found (or
/// not) in logs, and for environment variable names.
pub fn unique(tag: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().hash_one((std::process::id(), n));
    format!("{tag}{random:016x}{n}")
}

/// A `type: "text"` completion request.
pub fn text_request(project: &str, route: &str, model: &str, prompt: &str) -> Value {
    json!({
        "projectId": project,
        "prompt": prompt,
        "providerConfig": {"provider": route, "params": {"type": "text", "model": model}}
    })
}

/// A `type: "chat"` completion request.
pub fn chat_request(project: &str, route: &str, model: &str, messages: Value) -> Value {
    json!({
        "projectId": project,
        "messages": messages,
        "providerConfig": {"provider": route, "params": {"type": "chat", "model": model}}
    })
}

/// An embeddings request.
pub fn embeddings_request(project: &str, route: &str, model: &str, input: Value) -> Value {
    json!({
        "projectId": project,
        "input": input,
        "providerConfig": {"provider": route, "params": {"type": "embeddings", "model": model}}
    })
}

/// Sets `body[key] = value` (for top-level fields such as `stream`).
pub fn with(mut body: Value, key: &str, value: Value) -> Value {
    body[key] = value;
    body
}

/// Sets `body.providerConfig.params[key] = value`.
pub fn with_param(mut body: Value, key: &str, value: Value) -> Value {
    body["providerConfig"]["params"][key] = value;
    body
}

/// Asserts `id` is a UUIDv7 in its canonical text form.
pub fn assert_uuid_v7(id: &str) {
    let groups: Vec<&str> = id.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    assert_eq!(lengths, [8, 4, 4, 4, 12], "not a UUID: {id:?}");
    assert!(
        id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
        "not a UUID: {id:?}"
    );
    assert!(groups[2].starts_with('7'), "not a version 7 UUID: {id:?}");
}

/// Asserts an error answer: `status`, a JSON body whose `error` contains
/// `needle`, an `invocationId` (UUIDv7) that matches the `x-invocation-id`
/// header. Returns the invocation id.
pub fn assert_error(response: &Response, status: u16, needle: &str) -> String {
    assert_eq!(
        response.status,
        status,
        "expected {status}, got {}: {}",
        response.status,
        response.text()
    );
    let body = response.json();
    let message = body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("error answer without an `error` string: {body}"));
    assert!(
        message.contains(needle),
        "error message {message:?} should mention {needle:?}"
    );
    let id = body["invocationId"]
        .as_str()
        .unwrap_or_else(|| panic!("error answer without `invocationId`: {body}"))
        .to_owned();
    assert_uuid_v7(&id);
    assert_eq!(
        response.header("x-invocation-id"),
        Some(id.as_str()),
        "x-invocation-id header should repeat the body's invocationId"
    );
    id
}

/// Asserts a successful completion answer and returns its body.
pub fn assert_ok(response: &Response) -> Value {
    assert_eq!(
        response.status,
        200,
        "expected 200, got {}: {}",
        response.status,
        response.text()
    );
    let body = response.json();
    assert_eq!(body["completed"], json!(true), "{body}");
    let id = body["invocationId"]
        .as_str()
        .unwrap_or_else(|| panic!("answer without invocationId: {body}"));
    assert_uuid_v7(id);
    assert_eq!(response.header("x-invocation-id"), Some(id));
    body
}

/// Asserts a streamed answer's framing and returns `(partial frames, final frame)`:
/// status 200, `text/event-stream`, no `[DONE]`, every frame carries the same
/// invocation id, partial frames are `completed: false`, the last one
/// `completed: true`.
pub fn split_stream(response: &SseResponse) -> (Vec<Value>, Value) {
    assert_eq!(
        response.status, 200,
        "stream answered {}: {}",
        response.status, response.raw
    );
    assert!(
        response.is_event_stream(),
        "content type {:?} is not text/event-stream",
        response.header("content-type")
    );
    assert!(
        !response.raw.contains("[DONE]"),
        "the gateway must not send [DONE]: {}",
        response.raw
    );
    let frames = &response.frames;
    assert!(!frames.is_empty(), "no frames: {:?}", response.raw);
    let id = frames[0]["invocationId"]
        .as_str()
        .unwrap_or_else(|| panic!("frame without invocationId: {}", frames[0]))
        .to_owned();
    assert_uuid_v7(&id);
    assert_eq!(
        response.header("x-invocation-id"),
        Some(id.as_str()),
        "x-invocation-id header should name the stream's invocation"
    );
    for frame in frames {
        assert!(frame.get("error").is_none(), "error frame: {frame}");
        assert_eq!(
            frame["invocationId"],
            json!(id),
            "frame of another invocation: {frame}"
        );
    }
    let (last, partial) = frames.split_last().expect("at least one frame");
    for frame in partial {
        assert_eq!(frame["completed"], json!(false), "partial frame: {frame}");
    }
    assert_eq!(last["completed"], json!(true), "last frame: {last}");
    (partial.to_vec(), last.clone())
}

/// Concatenates choice `index`'s text over frames.
pub fn streamed_text(frames: &[Value], index: u64) -> String {
    let mut text = String::new();
    for frame in frames {
        for choice in frame["choices"].as_array().into_iter().flatten() {
            if choice["index"].as_u64().unwrap_or(0) == index
                && let Some(t) = choice["text"].as_str()
            {
                text.push_str(t);
            }
        }
    }
    text
}

/// Whether `haystack` contains `needle` as bytes.
pub fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// `(name, arguments)` of every tool call of a response choice: its
/// `tool_calls`, else its `function_call`.
pub fn tool_calls_of(choice: &Value) -> Vec<(String, String)> {
    let call = |c: &Value| {
        let function = if c.get("function").is_some() {
            &c["function"]
        } else {
            c
        };
        (
            function["name"].as_str().unwrap_or_default().to_owned(),
            function["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    match choice["tool_calls"].as_array() {
        Some(calls) if !calls.is_empty() => calls.iter().map(call).collect(),
        _ if choice["function_call"].is_object() => vec![call(&choice["function_call"])],
        _ => Vec::new(),
    }
}
