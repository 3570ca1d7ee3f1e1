//! Requests the tests send and assertions on what comes back: request bodies, the shapes of
//! answers, streams and error answers, invocation records, costs.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::client::{Connection, Response, SseResponse};
use crate::harness::Gateway;

/// For a test that cannot run on this machine (a tool or a build it needs is missing): said
/// loudly outside CI, after which the test returns; a failure under CI, which must run
/// everything.
pub fn skip_outside_ci(what: &str, why: &str) {
    assert!(std::env::var_os("CI").is_none(), "{what}: {why}");
    eprintln!("*** SKIPPED {what}: {why} ***");
}

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
    assert_error_where(response, status, &format!("{needle:?}"), |message| {
        message.contains(needle)
    })
}

/// Like [`assert_error`], with the `error` message checked by `mentions` (`what` describes what
/// it looks for, in the failure message).
pub fn assert_error_where(
    response: &Response,
    status: u16,
    what: &str,
    mentions: impl Fn(&str) -> bool,
) -> String {
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
        mentions(message),
        "error message {message:?} should mention {what}"
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

/// POSTs `body` to `path` with the gateway key and `provider_key` as the caller's
/// `Provider-API-Key`.
pub fn post_with_provider_key(
    gw: &Gateway,
    path: &str,
    provider_key: &str,
    body: &Value,
) -> Response {
    gw.post_with_headers(
        path,
        Some(&gw.key),
        &[("Provider-API-Key", provider_key)],
        body,
    )
}

/// Streams a `/completions` call with the gateway key and `provider_key` as the caller's
/// `Provider-API-Key`.
pub fn post_stream_with_provider_key(
    gw: &Gateway,
    provider_key: &str,
    body: &Value,
) -> SseResponse {
    gw.post_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &[("Provider-API-Key", provider_key)],
        body,
    )
}

/// Asserts that a provider's error answer reached the caller as `expected_status` with the
/// provider's `message` as `providerError`, that the invocation was recorded that way, and that
/// the upstream got exactly one request (`upstream_requests`: the gateway does not retry).
/// Returns the invocation id.
pub fn assert_provider_error(
    gw: &Gateway,
    response: &Response,
    expected_status: u16,
    message: &str,
    upstream_requests: usize,
) -> String {
    let id = assert_error(response, expected_status, "");
    assert_eq!(
        response.json()["providerError"],
        json!(message),
        "{}",
        response.text()
    );
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["status"], json!("error"), "{record}");
    assert_eq!(record["httpStatus"], json!(expected_status), "{record}");
    assert_eq!(record["providerError"], json!(message), "{record}");
    assert_eq!(upstream_requests, 1, "the gateway must not retry");
    id
}

/// The cost of `prompt` and `completion` tokens at `price` (USD per million input and output
/// tokens), computed the way the gateway does.
pub fn list_cost(prompt: u64, completion: u64, price: (f64, f64)) -> f64 {
    prompt as f64 * price.0 / 1e6 + completion as f64 * price.1 / 1e6
}

/// Asserts an answer's `usage` is `(prompt, completion, total)` tokens and its `usage_cost` is
/// `expected_cost`.
pub fn assert_usage(
    body: &Value,
    (prompt, completion, total): (u64, u64, u64),
    expected_cost: f64,
) {
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}),
        "{body}"
    );
    let cost = body["usage_cost"]
        .as_f64()
        .unwrap_or_else(|| panic!("usage_cost is not a number: {body}"));
    assert!(
        (cost - expected_cost).abs() < 1e-12,
        "usage_cost {cost} != {expected_cost}"
    );
}

/// The gateway's `providerConfig.params` for a recorded chat request: `type: "chat"`, the
/// recorded `model`, and every other recorded field except `handled` (the fields the test turns
/// into messages, tools and the like, or the plugin sets itself).
pub fn chat_params(recorded: &Value, handled: &[&str]) -> Value {
    let mut params = json!({"type": "chat", "model": recorded["model"]});
    for (key, value) in recorded.as_object().expect("recorded request is an object") {
        if key != "model" && !handled.contains(&key.as_str()) {
            params[key] = value.clone();
        }
    }
    params
}

/// Asserts the end of a streamed chat answer: its final frame `last` carries `finish_reason`
/// (`null` for `None`) and no text of its own.
pub fn assert_stream_finished(last: &Value, finish_reason: Option<&str>) {
    assert_eq!(
        last["choices"][0]["finish_reason"],
        json!(finish_reason),
        "{last}"
    );
    assert_eq!(last["choices"][0]["text"], json!(""), "{last}");
}

/// Waits for the record of the stream whose final frame is `last` to succeed, asserts it is
/// marked as a stream, and returns it.
pub fn streamed_record(gw: &Gateway, last: &Value) -> Value {
    let id = last["invocationId"].as_str().expect("id");
    let record = gw.wait_for_record(id, |r| r["status"] == json!("success"));
    assert_eq!(record["stream"], json!(true));
    record
}

/// Asserts a non-streamed chat answer: `type: "chat"`, and a first choice from the assistant
/// with `text` and `finish_reason` (`null` for `None`). Returns that choice.
pub fn assert_chat_choice<'a>(
    body: &'a Value,
    text: &str,
    finish_reason: Option<&str>,
) -> &'a Value {
    assert_eq!(body["type"], json!("chat"));
    let choice = &body["choices"][0];
    assert_eq!(choice["text"], json!(text), "{body}");
    assert_eq!(choice["role"], json!("assistant"), "{body}");
    assert_eq!(choice["finish_reason"], json!(finish_reason), "{body}");
    choice
}

/// The record of answer `body`, asserted a success on `route` through `plugin`.
pub fn success_record(gw: &Gateway, body: &Value, route: &str, plugin: &str) -> Value {
    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["route"], json!(route));
    assert_eq!(record["plugin"], json!(plugin));
    record
}

/// A completion request with `messages` and the given `providerConfig.params`.
pub fn chat_request_with_params(
    project: &str,
    route: &str,
    params: Value,
    messages: Value,
) -> Value {
    json!({
        "projectId": project,
        "messages": messages,
        "providerConfig": {"provider": route, "params": params}
    })
}

/// Opens a `/completions` stream with the gateway key and `provider_key` as the caller's
/// `Provider-API-Key`, to read frame by frame.
pub fn open_stream_with_provider_key(gw: &Gateway, provider_key: &str, body: &Value) -> Connection {
    gw.open_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &[("Provider-API-Key", provider_key)],
        body,
    )
}

/// Asserts a plugin's crash as the Commonbase API answers it (issue 46 item 15): 502 with the
/// stable `code` `plugin_error`, a message naming the invocation, and none of `raw` (what the
/// plugin's exception said) in the body or the record's error. Returns the invocation id.
pub fn assert_plugin_error(gw: &Gateway, response: &Response, raw: &[&str]) -> String {
    let id = assert_error_where(response, 502, "the invocation", |_| true);
    let body = response.json();
    assert_eq!(body["code"], json!("plugin_error"), "{body}");
    let message = body["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("plugin_error") && message.contains(&id),
        "{body}"
    );
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(record["httpStatus"], json!(502), "{record}");
    let recorded = format!("{} {}", record["error"], record["providerError"]);
    for text in raw {
        assert!(
            !response.text().contains(text),
            "the body quotes {text:?}: {body}"
        );
        assert!(
            !recorded.contains(text),
            "the record's error quotes {text:?}: {record}"
        );
    }
    id
}

/// Asserts the gateway's log tells invocation `id`'s crash once: one line saying `exception`
/// (the plugin's exception, its type and message) and the invocation, followed by the plugin's
/// frames, `frame` among them when given; and no other line saying `exception` or `also_not`.
pub fn assert_crash_logged_once(
    gw: &Gateway,
    id: &str,
    exception: &str,
    frame: Option<&str>,
    also_not: &[&str],
) {
    // The host's line comes after the plugin's.
    let crashed = format!("plugin crashed: it crashed invocation_id={id}");
    let logs = || gw.logs();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !logs().contains(&crashed) {
        assert!(
            std::time::Instant::now() < deadline,
            "no crash of {id} logged:\n{}",
            logs()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let logs = logs();
    let lines: Vec<&str> = logs.lines().collect();
    let told: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(exception))
        .collect();
    assert_eq!(told.len(), 1, "the exception is logged once:\n{logs}");
    // The frames follow the first line (whose span names the request), up to the line of the
    // fields that end the log record.
    let rest = &lines[told[0] + 1..];
    let end = rest.iter().position(|line| line.contains("invocation_id="));
    let record = lines[told[0]..=told[0] + end.map_or(0, |end| end + 1)].join("\n");
    assert!(record.contains(&format!("invocation_id={id}")), "{record}");
    if let Some(frame) = frame {
        assert!(
            record.contains(frame),
            "the plugin's frame {frame:?} is logged:\n{record}"
        );
    }
    for text in also_not {
        assert!(!logs.contains(text), "the log says {text:?}:\n{logs}");
    }
}
