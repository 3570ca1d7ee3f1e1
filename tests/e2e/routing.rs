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

// ------------------------------------------------------------------ retries

#[test]
fn a_500_is_retried_and_the_record_lists_both_attempts() {
    let upstream = OpenAiUpstream::script(vec![server_error("overloaded"), answer("second try")]);
    let gw = start(vec![retries(openai(PRIMARY, &upstream), 2)]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "second try");
    assert_eq!(response.header("x-gateway-route"), Some(PRIMARY));
    assert_eq!(upstream.requests().len(), 2, "one retry, no more");
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, upstream.addr(), Some(500)),
            tried(PRIMARY, upstream.addr(), Some(200)),
        ],
    );
}

#[test]
fn several_retryable_statuses_in_a_row_are_retried_up_to_retries() {
    let upstream = OpenAiUpstream::script(vec![
        Reply::openai_error(503, "unavailable", "server_error", None),
        Reply::openai_error(502, "bad gateway", "server_error", None),
        answer("third try"),
    ]);
    let gw = start(vec![
        retries(openai(PRIMARY, &upstream), 2).key("retry_backoff_ms", "10"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "third try");
    assert_eq!(upstream.requests().len(), 3);
}

#[test]
fn retries_stop_at_retries_and_the_last_error_is_the_answer() {
    let upstream = OpenAiUpstream::always(server_error("still down"));
    let gw = start(vec![
        retries(openai(PRIMARY, &upstream), 2).key("retry_backoff_ms", "10"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    let id = assert_error_where(&response, 502, "(3 attempts)", |m| {
        attempts_named(m) == Some(3)
    });
    assert_eq!(response.json()["providerError"], json!("still down"));
    assert_eq!(upstream.requests().len(), 3, "the first try and 2 retries");
    let record = record(&gw, &id);
    assert_eq!(record["httpStatus"], json!(502), "{record}");
    assert_eq!(record["providerError"], json!("still down"), "{record}");
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, upstream.addr(), Some(500)),
            tried(PRIMARY, upstream.addr(), Some(500)),
            tried(PRIMARY, upstream.addr(), Some(500)),
        ],
    );
}

#[test]
fn a_429_with_retry_after_is_retried_after_it_and_reaches_the_upstream_exactly_twice() {
    let upstream = OpenAiUpstream::script(vec![
        rate_limited("Rate limit reached, try again in 1s.", "1"),
        answer("after waiting"),
    ]);
    let gw = start(vec![retries(openai(PRIMARY, &upstream), 3)]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "after waiting");
    assert_eq!(upstream.requests().len(), 2);
    // Retry-After: 1 is a promise not to call again sooner (a little slack for clocks).
    assert!(
        took >= Duration::from_millis(900),
        "retried after {took:?}, before the upstream's Retry-After"
    );
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, upstream.addr(), Some(429)),
            tried(PRIMARY, upstream.addr(), Some(200)),
        ],
    );
}

// ------------------------------------------------------------------ fallbacks

#[test]
fn a_500_falls_back_with_the_callers_model_and_key_to_a_route_of_its_plugin_forwarding_it() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]),
        forwarded(FALLBACK, &backup).default_model("backup-default-model"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert_eq!(primary.requests().len(), 1, "retries = 0: no retry");
    let sent = backup.single_request();
    assert_eq!(sent.json()["model"], json!(MODEL), "the caller's model");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str()),
        "the caller's key goes to a route of the same plugin that forwards it"
    );
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn a_fallback_is_tried_after_the_routes_own_retries() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 2), &[FALLBACK]).key("retry_backoff_ms", "10"),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(primary.requests().len(), 3, "the try and its 2 retries");
    assert_eq!(backup.requests().len(), 1);
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn fallbacks_are_tried_in_order() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let second = OpenAiUpstream::always(Reply::openai_error(
        503,
        "second is down too",
        "server_error",
        None,
    ));
    let third = OpenAiUpstream::script(vec![answer("from the third")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &["second", "third"]),
        forwarded("second", &second),
        forwarded("third", &third),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the third");
    assert_eq!(response.header("x-gateway-route"), Some("third"));
    assert_eq!((primary.requests().len(), second.requests().len()), (1, 1));
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(500)),
            tried("second", second.addr(), Some(503)),
            tried("third", third.addr(), Some(200)),
        ],
    );
}

#[test]
fn a_fallback_of_another_plugin_gets_its_own_default_model_and_not_the_callers_key() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let claude = AnthropicUpstream::script(vec![Reply::json(
        200,
        &json!({
            "id": "msg_routing", "type": "message", "role": "assistant",
            "model": "claude-fallback-model",
            "content": [{"type": "text", "text": "from claude"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 2}
        }),
    )]);
    let var = unique("GATEWAY_TEST_ROUTING_ANTHROPIC_KEY_");
    let route_key = unique("sk-ant-route-");
    let gw = Gateway::builder()
        .route(fallbacks(openai(PRIMARY, &primary), &["claude"]))
        .route(
            Route::new("claude", "anthropic")
                .base_url(&claude.base_url("/v1"))
                .api_key_env(&var)
                .default_model("claude-fallback-model"),
        )
        .env(&var, &route_key)
        .start();
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from claude");
    assert_eq!(response.header("x-gateway-route"), Some("claude"));
    let sent = claude.single_request();
    assert_eq!(sent.json()["model"], json!("claude-fallback-model"));
    assert_eq!(sent.header("x-api-key"), Some(route_key.as_str()));
    assert!(
        sent.headers.iter().all(|(_, v)| !v.contains(PROVIDER_KEY)),
        "the caller's key went to another provider: {:?}",
        sent.headers
    );
}

#[test]
fn a_refused_connection_falls_back() {
    let (closed, closed_addr) = closed_url();
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(
            Route::openai(PRIMARY, &closed).timeout_secs(30),
            &[FALLBACK],
        ),
        forwarded(FALLBACK, &backup),
    ]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert!(took < Duration::from_secs(15), "took {took:?} of 30 s");
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, closed_addr, None),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn a_refused_connection_is_retried() {
    let (closed, _) = closed_url();
    let gw = start(vec![
        retries(Route::openai(PRIMARY, &closed), 2).key("retry_backoff_ms", "10"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(response.status, 502, "{}", response.text());
    let message = response.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(attempts_named(&message), Some(3), "{message}");
}

#[test]
fn a_first_byte_timeout_falls_back_well_before_the_deadline() {
    let stuck = OpenAiUpstream::hang();
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &stuck), &[FALLBACK])
            .timeout_secs(30)
            .key("first_byte_timeout_ms", "300"),
        forwarded(FALLBACK, &backup),
    ]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert_eq!(stuck.requests().len(), 1);
    assert!(took < Duration::from_secs(15), "took {took:?} of 30 s");
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, stuck.addr(), None),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn the_openai_surface_falls_back_too() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let body = json!({
        "model": format!("{PRIMARY}/{MODEL}"),
        "messages": [{"role": "user", "content": "Say hi"}]
    });
    let bearer = format!("Bearer {}", gw.key);
    let response = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
            ("Provider-API-Key", PROVIDER_KEY),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json()["choices"][0]["message"]["content"],
        json!("from the backup")
    );
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert_eq!(backup.single_request().json()["model"], json!(MODEL));
}

// ------------------------------------------------------------------ streams

#[test]
fn a_stream_whose_primary_fails_before_its_first_byte_streams_from_the_fallback() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup =
        OpenAiUpstream::script(vec![Reply::openai_slow_stream(3, Duration::from_millis(2))]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post_stream(&gw, &hi(&gw, PRIMARY));
    let (partial, last) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), "w0 w1 w2 ");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert_eq!(primary.requests().len(), 1);
    assert_eq!(backup.single_request().json()["stream"], json!(true));
    let record = record(&gw, &invocation_id(&last));
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["stream"], json!(true), "{record}");
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn a_stream_is_retried_before_its_first_byte() {
    let upstream = OpenAiUpstream::script(vec![
        Reply::openai_error(503, "warming up", "server_error", None),
        Reply::openai_slow_stream(2, Duration::from_millis(2)),
    ]);
    let gw = start(vec![
        retries(openai(PRIMARY, &upstream), 1).key("retry_backoff_ms", "10"),
    ]);
    let response = post_stream(&gw, &hi(&gw, PRIMARY));
    let (partial, _) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), "w0 w1 ");
    assert_eq!(response.header("x-gateway-route"), Some(PRIMARY));
    assert_eq!(upstream.requests().len(), 2);
}

#[test]
fn a_stream_that_already_sent_text_is_not_retried_nor_fallen_back() {
    // Every call would get the same cut stream: a retry would show as a second request.
    let primary = OpenAiUpstream::each_call(stream_cut_after(2, Duration::from_millis(150)));
    let backup =
        OpenAiUpstream::script(vec![Reply::openai_slow_stream(2, Duration::from_millis(2))]);
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 2), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post_stream(&gw, &hi(&gw, PRIMARY));
    assert_eq!(response.status, 200, "{}", response.raw);
    assert_eq!(response.header("x-gateway-route"), Some(PRIMARY));
    let (last, partial) = response.frames.split_last().expect("frames");
    assert_eq!(streamed_text(partial, 0), "w0 w1 ", "{}", response.raw);
    assert!(
        last["error"].as_str().is_some_and(|e| !e.is_empty()),
        "the stream ends with an error frame: {}",
        response.raw
    );
    assert_eq!(primary.requests().len(), 1, "retried after the first byte");
    assert!(
        backup.requests().is_empty(),
        "fell back after the first byte"
    );
    let record = record(&gw, &invocation_id(last));
    assert_eq!(record["status"], json!("error"), "{record}");
    assert_eq!(record["attempts"], json!([]), "one attempt: {record}");
}

// ------------------------------------------------------------------ never retried

/// An upstream answering `status` to every call, behind a route with retries and a fallback:
/// one call, no fallback, and the status the gateway gives that answer today.
/// An upstream `status` ends the request at once, with `caller_status` (the upstream's own for
/// the caller's faults: 400, 404, 413, 422; 502 for the route's key).
fn check_not_retried(status: u16, message: &str, code: &str, caller_status: u16) {
    let primary = OpenAiUpstream::always(Reply::openai_error(status, message, code, None));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 3), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    let id = assert_error(&response, caller_status, "");
    assert_eq!(response.json()["providerError"], json!(message));
    let error = response.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(attempts_named(&error), None, "one attempt: {error}");
    assert_eq!(primary.requests().len(), 1, "a {status} was retried");
    assert!(backup.requests().is_empty(), "a {status} fell back");
    let record = record(&gw, &id);
    assert_eq!(record["httpStatus"], json!(caller_status), "{record}");
    assert_eq!(record["providerError"], json!(message), "{record}");
    assert_eq!(record["attempts"], json!([]), "{record}");
}

#[test]
fn an_upstream_400_is_never_retried() {
    check_not_retried(
        400,
        "Invalid value for 'temperature': must be at most 2.",
        "invalid_value",
        400,
    );
}

#[test]
fn an_upstream_401_is_never_retried() {
    check_not_retried(401, "Incorrect API key provided.", "invalid_api_key", 502);
}

#[test]
fn an_upstream_404_is_never_retried() {
    check_not_retried(
        404,
        "The model `gpt-9` does not exist.",
        "model_not_found",
        404,
    );
}

#[test]
fn an_invalid_request_is_never_retried() {
    let primary = OpenAiUpstream::script(vec![answer("never")]);
    let backup = OpenAiUpstream::script(vec![answer("never")]);
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 3), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    // A tool result answering no call: the plugin refuses it before any upstream request.
    let request = chat_request(
        &gw.project_id,
        PRIMARY,
        MODEL,
        json!([{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}]),
    );
    let response = post(&gw, &request);
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(primary.requests().is_empty());
    assert!(backup.requests().is_empty(), "an invalid request fell back");
}

// ------------------------------------------------------------------ the deadline

#[test]
fn retries_and_fallbacks_share_the_first_routes_deadline() {
    let stuck = OpenAiUpstream::hang();
    let also_stuck = OpenAiUpstream::hang();
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &stuck), 3), &[FALLBACK])
            .timeout_secs(2)
            .key("first_byte_timeout_ms", "600"),
        forwarded(FALLBACK, &also_stuck)
            .timeout_secs(30)
            .key("first_byte_timeout_ms", "600"),
    ]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    let id = assert_error(&response, 504, "");
    let message = response.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let named = attempts_named(&message)
        .unwrap_or_else(|| panic!("the message does not count the attempts: {message:?}"));
    assert!(named >= 2, "{message}");
    // 2 s of deadline and a generous margin; without the one deadline, 4 tries of 600 ms,
    // their backoffs and a fallback with 30 s of its own would take longer.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // A try the deadline ends just as it starts may not have reached its upstream yet.
    let sent = stuck.requests().len() + also_stuck.requests().len();
    assert!(
        (named.saturating_sub(1)..=named).contains(&sent),
        "{sent} upstream requests for {named} attempts"
    );
    let record = record(&gw, &id);
    assert_eq!(record["httpStatus"], json!(504), "{record}");
    assert_eq!(
        record["attempts"].as_array().map(Vec::len),
        Some(named),
        "{record}"
    );
}

#[test]
fn a_fallback_gets_only_what_is_left_of_the_deadline() {
    let stuck = OpenAiUpstream::hang();
    let also_stuck = OpenAiUpstream::hang();
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &stuck), &[FALLBACK])
            .timeout_secs(2)
            .key("first_byte_timeout_ms", "500"),
        // Its own timeout would let it hang for half a minute.
        forwarded(FALLBACK, &also_stuck).timeout_secs(30),
    ]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    assert_error_where(&response, 504, "(2 attempts)", |m| {
        attempts_named(m) == Some(2)
    });
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(
        (stuck.requests().len(), also_stuck.requests().len()),
        (1, 1)
    );
}

#[test]
fn retry_afters_longer_than_the_deadline_are_not_waited_for_and_the_smallest_is_answered() {
    let primary = OpenAiUpstream::always(rate_limited("primary: slow down", "3"));
    let backup = OpenAiUpstream::always(rate_limited("backup: slow down", "7"));
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 2), &[FALLBACK]).timeout_secs(2),
        retries(forwarded(FALLBACK, &backup), 2),
    ]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    let id = assert_error_where(&response, 429, "(2 attempts)", |m| {
        attempts_named(m) == Some(2)
    });
    assert_eq!(
        response.header("retry-after"),
        Some("3"),
        "the smallest seen"
    );
    assert_eq!(
        response.json()["providerError"],
        json!("backup: slow down"),
        "the last attempt's"
    );
    // Neither Retry-After fits in 2 s: no route is retried, and nothing waits.
    assert_eq!((primary.requests().len(), backup.requests().len()), (1, 1));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let record = record(&gw, &id);
    assert_eq!(record["httpStatus"], json!(429), "{record}");
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(429)),
            tried(FALLBACK, backup.addr(), Some(429)),
        ],
    );
}

#[test]
fn the_smallest_retry_after_is_answered_whichever_attempt_saw_it() {
    let primary = OpenAiUpstream::always(rate_limited("primary: slow down", "7"));
    let backup = OpenAiUpstream::always(rate_limited("backup: slow down", "3"));
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]).timeout_secs(2),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_error_where(&response, 429, "(2 attempts)", |m| {
        attempts_named(m) == Some(2)
    });
    assert_eq!(response.header("retry-after"), Some("3"));
    assert_eq!(response.json()["providerError"], json!("backup: slow down"));
}

// ------------------------------------------------------------------ the happy path

#[test]
fn a_plain_success_names_its_route_and_lists_no_attempts() {
    let upstream = OpenAiUpstream::script(vec![answer("first try")]);
    let backup = OpenAiUpstream::start();
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &upstream), 2), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "first try");
    assert_eq!(response.header("x-gateway-route"), Some(PRIMARY));
    assert_eq!(upstream.requests().len(), 1);
    assert!(backup.requests().is_empty());
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["route"], json!(PRIMARY), "{record}");
    assert_eq!(record["attempts"], json!([]), "{record}");
}

#[test]
fn a_plain_stream_names_its_route_and_lists_no_attempts() {
    let upstream =
        OpenAiUpstream::script(vec![Reply::openai_slow_stream(2, Duration::from_millis(2))]);
    let gw = start(vec![retries(openai(PRIMARY, &upstream), 2)]);
    let response = post_stream(&gw, &hi(&gw, PRIMARY));
    let (_, last) = split_stream(&response);
    assert_eq!(response.header("x-gateway-route"), Some(PRIMARY));
    let record = record(&gw, &invocation_id(&last));
    assert_eq!(record["attempts"], json!([]), "{record}");
}

// ------------------------------------------------------------------ targets and ejection

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

fn ejecting(route: Route, after: u32, secs: u64) -> Route {
    route
        .key("eject_after_failures", &after.to_string())
        .key("eject_secs", &secs.to_string())
}

const POOL: &str = "pool";

/// Sends `n` requests to [`POOL`], each answered, and counts them by the `x-gateway-target`
/// that served them, checking the upstreams saw the same.
fn spread(n: usize, a: &OpenAiUpstream, b: &OpenAiUpstream, weights: (u32, u32)) -> (usize, usize) {
    let gw = start(vec![pool(POOL, &[(a, weights.0), (b, weights.1)])]);
    let (mut on_a, mut on_b) = (0, 0);
    for _ in 0..n {
        let response = post(&gw, &hi(&gw, POOL));
        let text = text_of(&response);
        let target = response.header("x-gateway-target").map(str::to_owned);
        assert_eq!(response.header("x-gateway-route"), Some(POOL));
        if target == Some(a.addr().to_string()) {
            assert_eq!(text, "from a");
            on_a += 1;
        } else {
            assert_eq!(target, Some(b.addr().to_string()));
            assert_eq!(text, "from b");
            on_b += 1;
        }
    }
    assert_eq!((a.requests().len(), b.requests().len()), (on_a, on_b));
    (on_a, on_b)
}

#[test]
fn forty_requests_over_two_targets_of_equal_weight_land_on_both() {
    let a = OpenAiUpstream::each_call(answer("from a"));
    let b = OpenAiUpstream::each_call(answer("from b"));
    let (on_a, on_b) = spread(40, &a, &b, (1, 1));
    // Binomial(40, 1/2): outside 8..=32 once in 20,000 runs.
    assert!((8..=32).contains(&on_a), "{on_a} on a, {on_b} on b");
}

#[test]
fn requests_over_targets_weighted_three_to_one_land_three_to_one() {
    let a = OpenAiUpstream::each_call(answer("from a"));
    let b = OpenAiUpstream::each_call(answer("from b"));
    // 200 rather than 40: 40 requests cannot tell 3:1 from 1:1 without failing by chance
    // now and then. Binomial(200, 3/4): 150 ± 6; outside 125..=175 once in 30,000 runs, and
    // a 1:1 split (100 ± 7) never inside.
    let (on_a, on_b) = spread(200, &a, &b, (3, 1));
    assert!(
        (125..=175).contains(&on_a),
        "{on_a} on a (weight 3), {on_b} on b"
    );
}

#[test]
fn a_failed_target_hands_the_request_to_the_other_target_before_any_fallback() {
    let sick = OpenAiUpstream::each_call(server_error("this deployment is down"));
    let well = OpenAiUpstream::each_call(answer("from the well one"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(pool(POOL, &[(&sick, 1), (&well, 1)]), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let mut listed = 0;
    for _ in 0..10 {
        let response = post(&gw, &hi(&gw, POOL));
        assert_eq!(text_of(&response), "from the well one");
        assert_eq!(response.header("x-gateway-route"), Some(POOL));
        let well_addr = well.addr().to_string();
        assert_eq!(
            response.header("x-gateway-target"),
            Some(well_addr.as_str())
        );
        let record = record(&gw, &invocation_id(&response.json()));
        if record["attempts"] != json!([]) {
            listed += 1;
            assert_attempts(
                &record,
                &[
                    tried(POOL, sick.addr(), Some(500)),
                    tried(POOL, well.addr(), Some(200)),
                ],
            );
        }
    }
    assert_eq!(
        sick.requests().len(),
        listed,
        "the sick target is tried once per request at most"
    );
    assert_eq!(well.requests().len(), 10);
    assert!(
        backup.requests().is_empty(),
        "a request fell back with a target left"
    );
}

#[test]
fn a_route_falls_back_once_each_target_had_its_try_and_its_retries() {
    let a = OpenAiUpstream::each_call(server_error("a is down"));
    let b = OpenAiUpstream::each_call(server_error("b is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(
            retries(pool(POOL, &[(&a, 1), (&b, 1)]), 1).key("retry_backoff_ms", "10"),
            &[FALLBACK],
        ),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post(&gw, &hi(&gw, POOL));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    // Each target once, then the one retry on either.
    assert_eq!(a.requests().len() + b.requests().len(), 3);
    assert!(!a.requests().is_empty() && !b.requests().is_empty());
    let record = record(&gw, &invocation_id(&response.json()));
    let attempts = record["attempts"].as_array().expect("attempts").clone();
    assert_eq!(attempts.len(), 4, "{record}");
    let first_two: Vec<&Value> = attempts[..2].iter().map(|a| &a["target"]).collect();
    assert_ne!(
        first_two[0], first_two[1],
        "the second try went to the other target: {record}"
    );
    assert_eq!(attempts[3]["route"], json!(FALLBACK), "{record}");
}

#[test]
fn each_target_takes_its_own_key_or_the_routes_and_settings_laid_over_the_routes() {
    let own = OpenAiUpstream::each_call(answer("own key"));
    let shared = OpenAiUpstream::each_call(answer("route key"));
    let targets = format!(
        "[{{ base_url = {:?}, api_key_env = \"TARGET_KEY\", settings = {{ api_key_header = \"api-key\" }} }}, {{ base_url = {:?} }}]",
        own.base_url("/v1"),
        shared.base_url("/v1"),
    );
    let route = Route::new(POOL, "openai")
        .api_key_env("ROUTE_KEY")
        .key("targets", &targets);
    let gw = Gateway::builder()
        .route(route)
        .env("TARGET_KEY", "sk-target-own-0123456789")
        .env("ROUTE_KEY", "sk-route-shared-0123456789")
        .start();
    for _ in 0..20 {
        assert_ok(&gw.post("/completions", &hi(&gw, POOL)));
    }
    assert!(!own.requests().is_empty() && !shared.requests().is_empty());
    for request in own.requests() {
        assert_eq!(request.header("api-key"), Some("sk-target-own-0123456789"));
        assert_eq!(request.header("authorization"), None);
    }
    for request in shared.requests() {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-route-shared-0123456789")
        );
    }
}

#[test]
fn a_targets_key_quoted_by_its_upstream_never_reaches_the_caller_or_the_record() {
    let key = "sk-target-secret-9876543210";
    let leaky = OpenAiUpstream::always(Reply::openai_error(
        401,
        &format!("Incorrect API key provided: {key}."),
        "invalid_api_key",
        None,
    ));
    let targets = format!(
        "[{{ base_url = {:?}, api_key_env = \"LEAKY_KEY\" }}]",
        leaky.base_url("/v1")
    );
    let gw = Gateway::builder()
        .route(Route::new(POOL, "openai").key("targets", &targets))
        .env("LEAKY_KEY", key)
        .start();
    let response = gw.post("/completions", &hi(&gw, POOL));
    let id = assert_error(&response, 502, "");
    assert!(!response.text().contains(key), "{}", response.text());
    let record = record(&gw, &id);
    assert!(!record.to_string().contains(key), "{record}");
    assert!(!gw.logs().contains(key), "the key is in the log");
}

#[test]
fn a_target_failing_n_times_in_a_row_is_ejected_and_the_fallback_serves_without_trying_it() {
    let sick = OpenAiUpstream::each_call(server_error("down for good"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &sick), 3, 600), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let mut last = None;
    for _ in 0..20 {
        let response = post(&gw, &hi(&gw, PRIMARY));
        assert_eq!(text_of(&response), "from the backup");
        assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
        last = Some(response);
    }
    // Three failures eject it; eject_secs outlasts the test, so there is no probe.
    assert_eq!(
        sick.requests().len(),
        3,
        "the ejected upstream was still called"
    );
    assert_eq!(backup.requests().len(), 20);
    let record = record(&gw, &invocation_id(&last.expect("answered").json()));
    let attempts = record["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{record}");
    assert_eq!(attempts[0]["route"], json!(PRIMARY), "{record}");
    assert_eq!(attempts[0]["error"], json!("ejected"), "{record}");
    assert_eq!(
        attempts[0]["target"],
        Value::Null,
        "skipped without a try: {record}"
    );
    assert_eq!(attempts[1]["route"], json!(FALLBACK), "{record}");
    assert_eq!(attempts[1]["status"], json!(200), "{record}");
    gw.wait_for_log("upstream ejected", 1);
}

#[test]
fn an_ejected_target_gets_one_probe_after_eject_secs_and_is_back_when_it_answers() {
    let flaky = OpenAiUpstream::script(vec![
        server_error("one"),
        server_error("two"),
        answer("well again"),
        answer("still well"),
    ]);
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &flaky), 2, 1), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    for _ in 0..3 {
        assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    }
    assert_eq!(
        flaky.requests().len(),
        2,
        "the third request went past the ejected upstream"
    );
    std::thread::sleep(Duration::from_millis(1200));
    let probe = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&probe), "well again");
    assert_eq!(probe.header("x-gateway-route"), Some(PRIMARY));
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "still well");
    assert_eq!(flaky.requests().len(), 4);
    gw.wait_for_log("back in rotation", 1);
}

#[test]
fn a_failed_probe_ejects_the_target_again() {
    let sick = OpenAiUpstream::each_call(server_error("still down"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &sick), 1, 1), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    std::thread::sleep(Duration::from_millis(1200));
    for _ in 0..5 {
        assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    }
    // The first failure, then one probe; the other requests found it out again.
    assert_eq!(sick.requests().len(), 2);
}

#[test]
fn a_route_whose_targets_are_all_ejected_and_without_fallbacks_answers_503_with_retry_after() {
    let a = OpenAiUpstream::each_call(server_error("a is down"));
    let b = OpenAiUpstream::each_call(server_error("b is down"));
    let gw = start(vec![ejecting(pool(POOL, &[(&a, 1), (&b, 1)]), 1, 30)]);
    let first = post(&gw, &hi(&gw, POOL));
    assert_error(&first, 502, "2 attempts");
    let response = post(&gw, &hi(&gw, POOL));
    let id = assert_error(&response, 503, "out of rotation");
    let retry_after: u64 = response
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", response.headers));
    assert!((1..=30).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!((a.requests().len(), b.requests().len()), (1, 1));
    let record = record(&gw, &id);
    assert_eq!(record["httpStatus"], json!(503), "{record}");
}

#[test]
fn ejection_outlives_a_config_reload_that_keeps_the_target() {
    let sick = OpenAiUpstream::each_call(server_error("down"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &sick), 1, 600), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    let original = std::fs::read_to_string(gw.config_path()).expect("read the config");
    let added_route = format!(
        "[providers.added]\nplugin = \"openai\"\nbase_url = {:?}\n",
        backup.base_url("/v1")
    );
    gw.rewrite_config(&format!("{original}\n{added_route}"));
    let deadline = Instant::now() + PATIENCE;
    let added = hi(&gw, "added");
    while post(&gw, &added).status != 200 {
        assert!(
            Instant::now() < deadline,
            "the reload never applied: {}",
            gw.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    assert_eq!(
        sick.requests().len(),
        1,
        "the reload put the ejected upstream back"
    );
}

#[test]
fn a_stream_over_targets_moves_to_the_other_target_before_its_first_byte() {
    let sick = OpenAiUpstream::each_call(server_error("this deployment is down"));
    let well = OpenAiUpstream::each_call(Reply::openai_slow_stream(2, Duration::from_millis(2)));
    let gw = start(vec![pool(POOL, &[(&sick, 1), (&well, 1)])]);
    for _ in 0..6 {
        let response = post_stream(&gw, &hi(&gw, POOL));
        let (frames, last) = split_stream(&response);
        assert_eq!(streamed_text(&frames, 0), "w0 w1 ", "{last}");
        let well_addr = well.addr().to_string();
        assert_eq!(
            response.header("x-gateway-target"),
            Some(well_addr.as_str())
        );
    }
    assert_eq!(well.requests().len(), 6);
}

// ------------------------------------------------------------------ what a request may reach

/// A key of the test project made with `flags` (`--routes`, `--models`).
fn scoped_key(gw: &Gateway, flags: &[&str]) -> String {
    let mut args = vec!["key", "create", gw.project_id.as_str()];
    args.extend_from_slice(flags);
    gw.cli(&args).checked(&args.join(" ")).last_line()
}

/// The record's `attempts` as (route, error) pairs: what each try or skip became.
fn outcomes(record: &Value) -> Vec<(String, String)> {
    record["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempts list: {record}"))
        .iter()
        .map(|attempt| {
            let outcome = match attempt["status"].as_u64() {
                Some(status) => status.to_string(),
                None => attempt["error"].as_str().unwrap_or("?").to_owned(),
            };
            (attempt["route"].as_str().unwrap_or("?").to_owned(), outcome)
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(route, outcome)| (route.to_string(), outcome.to_string()))
        .collect()
}

#[test]
fn a_fallback_outside_the_keys_scope_is_skipped_and_listed_as_out_of_scope() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]),
        // Keyless, so that only the scope can keep it from serving.
        openai(FALLBACK, &backup).key("api_key_required", "false"),
    ]);
    for flags in [
        &["--routes", PRIMARY][..],
        &["--models", &format!("{PRIMARY}/{MODEL}")],
        // The fallback's route is in scope, but not with the model it would be asked for.
        &[
            "--routes",
            PRIMARY,
            "--models",
            &format!("{FALLBACK}/other"),
        ],
    ] {
        let key = scoped_key(&gw, flags);
        let response = gw.post_with_headers(
            "/completions",
            Some(&key),
            &[("Provider-API-Key", PROVIDER_KEY)],
            &hi(&gw, PRIMARY),
        );
        assert_eq!(response.status, 502, "{flags:?}: {}", response.text());
        assert_eq!(response.header("x-gateway-route"), None, "{flags:?}");
        let record = record(&gw, &invocation_id(&response.json()));
        assert_eq!(record["route"], json!(PRIMARY), "{flags:?}: {record}");
        assert_eq!(
            outcomes(&record),
            pairs(&[(PRIMARY, "500"), (FALLBACK, "out_of_scope")]),
            "{flags:?}: {record}"
        );
    }
    assert!(
        backup.requests().is_empty(),
        "a fallback outside the key's scope was called"
    );
    // A key whose scope holds both routes falls back as before.
    let both = scoped_key(&gw, &["--routes", &format!("{PRIMARY},{FALLBACK}")]);
    let response = gw.post_with_headers(
        "/completions",
        Some(&both),
        &[("Provider-API-Key", PROVIDER_KEY)],
        &hi(&gw, PRIMARY),
    );
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
}

#[test]
fn the_callers_key_does_not_reach_a_fallback_on_another_host() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let keyless = OpenAiUpstream::each_call(answer("from the keyless fallback"));
    let own = OpenAiUpstream::each_call(answer("from the fallback with its own key"));
    let var = unique("GATEWAY_TEST_ROUTING_OWN_KEY_");
    let own_key = unique("sk-own-route-");
    let gw = Gateway::builder()
        .route(fallbacks(openai(PRIMARY, &primary), &["keyless", "own"]))
        .route(openai("keyless", &keyless))
        .route(openai("own", &own).api_key_env(&var))
        .env(&var, &own_key)
        .start();
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the fallback with its own key");
    assert!(
        keyless.requests().is_empty(),
        "a fallback without a key of its own got the caller's"
    );
    let sent = own.single_request();
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {own_key}").as_str()),
        "the fallback's own key, not the caller's"
    );
    assert_eq!(
        primary.requests()[0].header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str()),
        "the requested route gets the caller's key"
    );
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(
        outcomes(&record),
        pairs(&[(PRIMARY, "500"), ("keyless", "no_key"), ("own", "200")]),
        "{record}"
    );
}

/// The worst case of issue 23: `retries = 10` on two targets, a fallback of two targets, every
/// upstream answering 500. Each request stops at `max_attempts` (6 by default).
#[test]
fn a_request_makes_at_most_max_attempts_tries_and_the_metric_counts_them() {
    let upstreams: Vec<OpenAiUpstream> = (0..4)
        .map(|_| OpenAiUpstream::always(server_error("down")))
        .collect();
    let calls = || upstreams.iter().map(|u| u.requests().len()).sum::<usize>();
    let gw = start(vec![
        fallbacks(
            retries(pool(POOL, &[(&upstreams[0], 1), (&upstreams[1], 1)]), 10)
                .key("retry_backoff_ms", "1"),
            &[FALLBACK],
        ),
        retries(
            pool(FALLBACK, &[(&upstreams[2], 1), (&upstreams[3], 1)]),
            10,
        )
        .key("retry_backoff_ms", "1")
        .key("api_key_required", "false"),
    ]);
    const REQUESTS: usize = 3;
    for n in 1..=REQUESTS {
        let response = post(&gw, &hi(&gw, POOL));
        assert_eq!(response.status, 502, "{}", response.text());
        assert_eq!(calls(), 6 * n, "upstream calls after {n} requests");
        let body = response.json();
        let message = body["error"].as_str().unwrap_or_default();
        assert_eq!(attempts_named(message), Some(6), "{message}");
        let record = record(&gw, &invocation_id(&body));
        let mut expected = vec![(POOL, "500"); 6];
        expected.push((POOL, "max_attempts"));
        assert_eq!(outcomes(&record), pairs(&expected), "{record}");
    }
    let samples = scrape(&gw, None);
    let attempts = |route, result| {
        value(
            &samples,
            "gateway_attempts_total",
            &[("route", route), ("result", result)],
        )
    };
    assert_eq!(
        attempts(POOL, "500") + attempts(FALLBACK, "500"),
        calls() as f64,
        "every upstream call is counted"
    );
    assert_eq!(attempts(POOL, "max_attempts"), REQUESTS as f64);
}

#[test]
fn the_requested_routes_max_attempts_holds_for_its_fallbacks_too() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let (a, b) = (
        OpenAiUpstream::always(server_error("a is down")),
        OpenAiUpstream::always(server_error("b is down")),
    );
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 1), &[FALLBACK])
            .key("retry_backoff_ms", "1")
            .key("max_attempts", "3"),
        // A fallback's own cap does not count: only the requested route's.
        pool(FALLBACK, &[(&a, 1), (&b, 1)])
            .key("api_key_required", "false")
            .key("max_attempts", "1"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(response.status, 502, "{}", response.text());
    assert_eq!(primary.requests().len(), 2, "the try and its retry");
    assert_eq!(a.requests().len() + b.requests().len(), 1, "the third try");
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(
        outcomes(&record),
        pairs(&[
            (PRIMARY, "500"),
            (PRIMARY, "500"),
            (FALLBACK, "500"),
            (FALLBACK, "max_attempts")
        ]),
        "{record}"
    );
}

// ------------------------------------------------------------------ config refused at start

/// An echo route `id` with `extra` lines.
fn echo_route(id: &str, extra: &str) -> String {
    format!("[providers.{id}]\nplugin = \"echo\"\ndefault_model = \"echo\"\n{extra}\n")
}

#[test]
fn a_fallback_to_an_unknown_route_is_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "fallbacks = [\"nowhere\"]"));
    assert!(
        stderr.contains("providers.a.fallbacks") && stderr.contains("nowhere"),
        "the key and the unknown route are not named:\n{stderr}"
    );
}

#[test]
fn a_fallback_cycle_is_refused_at_start() {
    let stderr = refused_start(&format!(
        "{}{}{}",
        echo_route("a", "fallbacks = [\"b\"]"),
        echo_route("b", "fallbacks = [\"c\"]"),
        echo_route("c", "fallbacks = [\"a\"]"),
    ));
    assert!(
        stderr.contains("fallbacks") && stderr.contains("cycle"),
        "the cycle is not named:\n{stderr}"
    );
}

#[test]
fn a_route_falling_back_to_itself_is_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "fallbacks = [\"a\"]"));
    assert!(
        stderr.contains("providers.a.fallbacks"),
        "the key is not named:\n{stderr}"
    );
}

#[test]
fn more_than_ten_retries_are_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "retries = 11"));
    assert!(
        stderr.contains("providers.a.retries"),
        "the key is not named:\n{stderr}"
    );
}

#[test]
fn fallbacks_through_a_chain_without_a_cycle_start() {
    // The control of the refusals above: the same shape without the closing edge serves.
    let gw = Gateway::builder()
        .route(fallbacks(Route::echo("a"), &["b"]))
        .route(fallbacks(Route::echo("b"), &["c"]))
        .route(Route::echo("c"))
        .start();
    let response = gw.post(
        "/completions",
        &chat_request(
            &gw.project_id,
            "a",
            "echo",
            json!([{"role": "user", "content": "hi"}]),
        ),
    );
    assert_ok(&response);
    assert_eq!(response.header("x-gateway-route"), Some("a"));
}

#[test]
fn a_route_with_both_base_url_and_targets_is_refused_at_start() {
    let stderr = refused_start(&echo_route(
        "a",
        "base_url = \"http://127.0.0.1:9/v1\"\n[[providers.a.targets]]\nbase_url = \"http://127.0.0.1:10/v1\"",
    ));
    assert!(
        stderr.contains("providers.a.targets") && stderr.contains("not both"),
        "the key and the reason are not named:\n{stderr}"
    );
}

#[test]
fn a_target_of_weight_zero_or_with_an_unknown_key_is_refused_at_start() {
    for (extra, named) in [("weight = 0", "weight"), ("wieght = 2", "wieght")] {
        let stderr = refused_start(&echo_route(
            "a",
            &format!("[[providers.a.targets]]\nbase_url = \"http://127.0.0.1:10/v1\"\n{extra}"),
        ));
        assert!(
            stderr.contains("providers.a.targets") && stderr.contains(named),
            "{extra}: the key is not named:\n{stderr}"
        );
    }
}

#[test]
fn eject_secs_without_eject_after_failures_is_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "eject_secs = 5"));
    assert!(
        stderr.contains("providers.a.eject_secs") && stderr.contains("eject_after_failures"),
        "the key is not named:\n{stderr}"
    );
}
