//! Keys and errors in Anthropic's shape and statuses: `x-api-key` and bearer keys, a missing or
//! wrong key, unknown models, invalid requests naming the field, upstream rate limits and client
//! errors, an error after the stream started.

use super::*;

// ---------------------------------------------------------------- keys

#[test]
fn x_api_key_and_bearer_keys_both_authenticate() {
    let (_upstream, gw) = anthropic_gateway();
    let body = hi("claude/claude-sonnet-4-20250514");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["type"], json!("message"));
    let bearer = format!("Bearer {}", gw.key);
    let response = gw.request(
        "POST",
        MESSAGES_PATH,
        None,
        &[
            ("Authorization", bearer.as_str()),
            ("anthropic-version", ANTHROPIC_VERSION),
            ("Provider-API-Key", PROVIDER_KEY),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["type"], json!("message"));
}

#[test]
fn a_missing_or_wrong_key_is_an_authentication_error() {
    let (upstream, gw) = anthropic_gateway();
    let body = hi("claude/claude-sonnet-4-20250514").to_string();
    let missing = gw.request(
        "POST",
        MESSAGES_PATH,
        None,
        &[("anthropic-version", ANTHROPIC_VERSION)],
        body.as_bytes(),
    );
    assert_anthropic_error(&missing, 401, "authentication_error", "key");
    let wrong = gw.request(
        "POST",
        MESSAGES_PATH,
        None,
        &[("x-api-key", "gw_0000000000000000000000000000000000000000")],
        body.as_bytes(),
    );
    assert_anthropic_error(&wrong, 401, "authentication_error", "key");
    assert!(upstream.requests().is_empty());
}

// ---------------------------------------------------------------- errors

#[test]
fn an_unknown_model_or_route_is_not_found() {
    let (upstream, gw) = anthropic_gateway();
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &hi("claude-opus-9"));
    assert_anthropic_error(&response, 404, "not_found_error", "claude-opus-9");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &hi("nowhere/some-model"));
    assert_anthropic_error(&response, 404, "not_found_error", "nowhere");
    assert!(upstream.requests().is_empty());
}

#[test]
fn invalid_requests_are_refused_naming_the_field() {
    let (upstream, gw) = anthropic_gateway();
    let model = "claude/claude-sonnet-4-20250514";
    let mut no_max = hi(model);
    no_max.as_object_mut().expect("object").remove("max_tokens");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &no_max);
    let id = invocation_id(&response.headers);
    assert_anthropic_error(&response, 400, "invalid_request_error", "max_tokens");
    assert_eq!(gw.get_invocation(&id).json()["httpStatus"], json!(400));

    let image = json!({"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "file", "file_id": "file_011"}},
    ]}]});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &image);
    let body = assert_anthropic_error(&response, 400, "invalid_request_error", "send the bytes");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("messages[0].content[1].source.type"),
        "{body}"
    );

    let mut server_tool = hi(model);
    server_tool["tools"] = json!([{"type": "web_search_20250305", "name": "web_search"}]);
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &server_tool);
    assert_anthropic_error(&response, 400, "invalid_request_error", "tools[0].type");

    let mut bad_type = hi(model);
    bad_type["temperature"] = json!("warm");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &bad_type);
    assert_anthropic_error(&response, 400, "invalid_request_error", "temperature");

    let mut zero = hi(model);
    zero["max_tokens"] = json!(0);
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &zero);
    assert_anthropic_error(&response, 400, "invalid_request_error", "max_tokens");

    // The end user's id is at most 256 bytes: a longer one is refused, not recorded whole.
    let mut long_user = hi(model);
    long_user["metadata"] = json!({"user_id": "u".repeat(257)});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &long_user);
    let id = invocation_id(&response.headers);
    let body = assert_anthropic_error(&response, 400, "invalid_request_error", "metadata.user_id");
    assert!(
        body.to_string().len() < 1024,
        "the message repeats the id: {body}"
    );
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(400), "{record}");
    assert!(record["userId"].is_null(), "{record}");

    assert!(
        upstream.requests().is_empty(),
        "nothing invalid goes upstream"
    );
}

#[test]
fn only_post_is_allowed() {
    let (_upstream, gw) = anthropic_gateway();
    let response = gw.request(
        "GET",
        MESSAGES_PATH,
        None,
        &[("x-api-key", gw.key.as_str())],
        b"",
    );
    assert_anthropic_error(&response, 405, "invalid_request_error", "POST");
    assert_eq!(response.header("allow"), Some("POST"));
}

#[test]
fn an_upstream_rate_limit_is_a_rate_limit_error_with_retry_after() {
    let upstream = AnthropicUpstream::always(Reply::anthropic_error(
        429,
        "rate_limit_error",
        "Number of requests has exceeded your rate limit",
        Some("7"),
    ));
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_anthropic_error(
        &response,
        429,
        "rate_limit_error",
        "exceeded your rate limit",
    );
    assert_eq!(response.header("retry-after"), Some("7"));

    // Before a stream has started, the status is the error's own.
    body["stream"] = json!(true);
    let streamed = stream_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(streamed.status, 429, "{}", streamed.raw);
    assert_eq!(streamed.header("retry-after"), Some("7"));
    let error = streamed.json();
    assert_eq!(error["error"]["type"], json!("rate_limit_error"), "{error}");
}

/// A request the provider refuses as the caller's own fault is the caller's 4xx with
/// Anthropic's error type for it and the provider's message (never the key), tried once; an
/// upstream 5xx stays a 502 `api_error` (issue 46 item 7).
#[test]
fn an_upstream_client_error_is_the_callers_in_anthropic_shape() {
    let cases = [
        (400, "invalid_request_error", 400, "invalid_request_error"),
        (404, "not_found_error", 404, "not_found_error"),
        (413, "request_too_large", 413, "request_too_large"),
        (422, "invalid_request_error", 422, "invalid_request_error"),
        (500, "api_error", 502, "api_error"),
    ];
    for (status, upstream_kind, status_out, kind) in cases {
        let message = format!("max_tokens: 50000 > 32000 (key {PROVIDER_KEY})");
        let upstream = AnthropicUpstream::always(Reply::anthropic_error(
            status,
            upstream_kind,
            &message,
            None,
        ));
        let gw = Gateway::builder()
            .route(
                Route::new("claude", "anthropic")
                    .base_url(&upstream.base_url("/v1"))
                    .key("retries", "1")
                    .key("retry_backoff_ms", "1"),
            )
            .start();
        let response = post_messages(
            &gw,
            WITH_PROVIDER_KEY,
            &hi("claude/claude-sonnet-4-20250514"),
        );
        let body = assert_anthropic_error(&response, status_out, kind, "max_tokens: 50000 > 32000");
        assert!(!response.text().contains(PROVIDER_KEY), "{body}");
        let tries = if status < 500 { 1 } else { 2 };
        assert_eq!(upstream.requests().len(), tries, "HTTP {status}: {body}");
    }
}

#[test]
fn an_error_after_the_stream_started_is_an_error_event() {
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-sonnet-4-20250514",
            "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Olá"}}),
        ),
    ];
    let upstream = AnthropicUpstream::each_call(Reply::anthropic_cut_events(
        &events,
        "event: content_block_delta\ndata: {\"type\"",
    ));
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    body["stream"] = json!(true);
    let response = stream_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.raw);
    let events = named_events(&response.raw);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "error"
        ],
        "{}",
        response.raw
    );
    assert_eq!(events[3].1["delta"]["text"], json!("Olá"));
    let error = &events[4].1;
    assert_eq!(error["type"], json!("error"));
    assert_eq!(error["error"]["type"], json!("api_error"), "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("reading the answer"),
        "{error}"
    );
    let record = gw.wait_for_record(&invocation_id(&response.headers), |r| {
        r["status"] == json!("error")
    });
    assert_eq!(record["stream"], json!(true));
}
