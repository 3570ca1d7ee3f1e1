//! A route's `retries`: with backoff, or after the upstream's `Retry-After` when it fits, up to
//! `retries`; what is never retried (an upstream 400, 401, 404, an invalid request); and a plain
//! success, which names its route and lists no attempts.

use super::*;

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
