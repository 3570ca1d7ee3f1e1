//! Routing around failures: a route's `retries` (with backoff, or the upstream's `Retry-After`
//! when it fits), its `fallbacks` in order, its weighted `targets` (a failed one handing the
//! request to another), the ejection of an upstream that keeps failing (and its one probe), the one deadline of the whole request (the first
//! route's `timeout_secs`), streams retried or fallen back only before their first byte, the
//! `x-gateway-route` header naming the route that served, and the record's `attempts`.
//!
//! Every upstream is a fake on 127.0.0.1 scripted per request; the gateways are real processes.
//! Durations are asserted loosely (lower bounds where a wait is promised, generous upper bounds
//! where a deadline is), never as measures of speed.

use std::time::{Duration, Instant};

use gateway_test_support::refused::refused_start;
use gateway_test_support::scrape::{scrape, value};
use gateway_test_support::upstream::openai::slow_word;
use gateway_test_support::{
    AnthropicUpstream, Gateway, OpenAiUpstream, Reply, Response, Route, SseResponse, assert_error,
    assert_error_where, assert_ok, chat_request, post_stream_with_provider_key,
    post_with_provider_key, split_stream, streamed_text, unique, with,
};
use serde_json::{Value, json};

mod config;
mod deadline;
mod fallbacks;
mod reach;
mod retries;
mod streams;
mod targets;

/// The caller's provider key.
const PROVIDER_KEY: &str = "sk-test-routing-caller-0123456789";
/// The model callers ask for.
const MODEL: &str = "gpt-4o-mini";
const PRIMARY: &str = "primary";
const FALLBACK: &str = "backup";
/// A liveness bound for what the gateway does in the background (records, a refused start).
const PATIENCE: Duration = Duration::from_secs(60);

// ------------------------------------------------------------------ helpers

/// An openai route at `upstream` (`/v1`).
fn openai(id: &str, upstream: &OpenAiUpstream) -> Route {
    Route::openai(id, &upstream.base_url("/v1"))
}

/// An openai route at `upstream` without a key of its own: as a fallback of an openai route it
/// takes the caller's `Provider-API-Key` (`forward_caller_key`).
fn forwarded(id: &str, upstream: &OpenAiUpstream) -> Route {
    openai(id, upstream).key("forward_caller_key", "true")
}

fn retries(route: Route, n: u32) -> Route {
    route.key("retries", &n.to_string())
}

fn fallbacks(route: Route, ids: &[&str]) -> Route {
    let list = ids
        .iter()
        .map(|id| format!("{id:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    route.key("fallbacks", &format!("[{list}]"))
}

fn start(routes: Vec<Route>) -> Gateway {
    routes
        .into_iter()
        .fold(Gateway::builder(), |builder, route| builder.route(route))
        .start()
}

/// A chat request to `route` for [`MODEL`].
fn hi(gw: &Gateway, route: &str) -> Value {
    chat_request(
        &gw.project_id,
        route,
        MODEL,
        json!([{"role": "user", "content": "Say hi"}]),
    )
}

/// POSTs `body` to `/completions` with the caller's provider key; returns the answer and how
/// long it took.
fn timed_post(gw: &Gateway, body: &Value) -> (Response, Duration) {
    let started = Instant::now();
    let response = post_with_provider_key(gw, "/completions", PROVIDER_KEY, body);
    (response, started.elapsed())
}

fn post(gw: &Gateway, body: &Value) -> Response {
    timed_post(gw, body).0
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, PROVIDER_KEY, &with(body.clone(), "stream", json!(true)))
}

/// A successful chat completion saying `text`.
fn answer(text: &str) -> Reply {
    Reply::openai_answer(
        MODEL,
        text,
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    )
}

fn server_error(message: &str) -> Reply {
    Reply::openai_error(500, message, "server_error", None)
}

fn rate_limited(message: &str, retry_after: &str) -> Reply {
    Reply::openai_error(429, message, "rate_limit_exceeded", Some(retry_after))
}

/// A chat stream that sends `words` words ([`slow_word`]), `gap` apart, then drops the
/// connection without finishing.
fn stream_cut_after(words: usize, gap: Duration) -> Reply {
    let chunk = |delta: Value| {
        let payload = json!({
            "id": "chatcmpl-cut", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]
        });
        format!("data: {payload}\n\n")
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}))];
    events.extend((0..words).map(|i| chunk(json!({"content": slow_word(i)}))));
    Reply::events(events).gap(gap).cut()
}

/// The first choice's text of a successful `/completions` answer.
fn text_of(response: &Response) -> String {
    let body = assert_ok(response);
    body["choices"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {body}"))
        .to_owned()
}

fn invocation_id(body: &Value) -> String {
    body["invocationId"]
        .as_str()
        .unwrap_or_else(|| panic!("no invocationId: {body}"))
        .to_owned()
}

/// `GET /invocations/{id}` once the record is there and finished (streams are recorded after
/// their answer ends).
fn record(gw: &Gateway, id: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = gw.get_invocation(id);
        if response.status == 200 {
            let record = response.json();
            if record["status"] == json!("success") || record["status"] == json!("error") {
                return record;
            }
        }
        assert!(
            Instant::now() < deadline,
            "invocation {id} never finished: {} {}",
            response.status,
            response.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An attempt the record should list: its route, its target (`host:port`) and the upstream's
/// status when it answered (200 for the one that served).
struct Expected<'a> {
    route: &'a str,
    target: String,
    status: Option<u16>,
}

fn tried(route: &str, target: impl ToString, status: Option<u16>) -> Expected<'_> {
    Expected {
        route,
        target: target.to_string(),
        status,
    }
}

/// Asserts the record's `attempts`: one entry per try, in order, each with its route, target,
/// status, an `error` exactly when it failed, and a duration.
fn assert_attempts(record: &Value, expected: &[Expected<'_>]) {
    let attempts = record["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempts list: {record}"));
    assert_eq!(
        attempts.len(),
        expected.len(),
        "attempts: {}",
        json!(attempts)
    );
    for (attempt, expected) in attempts.iter().zip(expected) {
        assert_eq!(attempt["route"], json!(expected.route), "{attempt}");
        assert_eq!(attempt["target"], json!(expected.target), "{attempt}");
        assert_eq!(attempt["status"], json!(expected.status), "{attempt}");
        if expected.status == Some(200) {
            assert_eq!(attempt["error"], Value::Null, "{attempt}");
        } else {
            assert!(
                attempt["error"].as_str().is_some_and(|e| !e.is_empty()),
                "a failed attempt says how it failed: {attempt}"
            );
        }
        assert!(attempt["durationMs"].is_u64(), "{attempt}");
    }
}

/// The `N` of an error message's `(N attempts)`.
fn attempts_named(message: &str) -> Option<usize> {
    let (before, _) = message.rsplit_once(" attempts)")?;
    let (_, count) = before.rsplit_once('(')?;
    count.parse().ok()
}

/// A URL on 127.0.0.1 where nothing listens: a port bound and released.
fn closed_url() -> (String, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = listener.local_addr().expect("its address").to_string();
    drop(listener);
    (format!("http://{addr}/v1"), addr)
}

// ------------------------------------------------------------------ targets

/// A route `id` of the openai plugin over `targets` (each an upstream and its weight).
fn pool(id: &str, targets: &[(&OpenAiUpstream, u32)]) -> Route {
    let list = targets
        .iter()
        .map(|(upstream, weight)| {
            format!(
                "{{ base_url = {:?}, weight = {weight} }}",
                upstream.base_url("/v1")
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Route::new(id, "openai").key("targets", &format!("[{list}]"))
}

const POOL: &str = "pool";
