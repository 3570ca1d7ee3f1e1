//! Anthropic's errors and broken streams: upstream statuses in Anthropic's error shape (401,
//! 429 with `Retry-After`, 500, 529), a malformed answer, a stream cut mid-event or ended early,
//! error events, and a client leaving mid-stream.

use super::*;

fn check_failure(reply: Reply, expected_status: u16, provider_error: &str) -> Response {
    let upstream = AnthropicUpstream::script(vec![reply]);
    let gw = gateway_for(&upstream);
    let response = post(&gw, "/completions", &hi_request(&gw));
    assert_provider_error(
        &gw,
        &response,
        expected_status,
        provider_error,
        upstream.requests().len(),
    );
    response
}

#[test]
fn upstream_401_is_502_with_anthropics_message() {
    let response = check_failure(
        Reply::anthropic_error(401, "authentication_error", "invalid x-api-key", None),
        502,
        "invalid x-api-key",
    );
    assert!(!response.text().contains(PROVIDER_KEY));
}

#[test]
fn upstream_429_is_429_with_retry_after() {
    let message = "Number of request tokens has exceeded your per-minute rate limit";
    let response = check_failure(
        Reply::anthropic_error(429, "rate_limit_error", message, Some("17")),
        429,
        message,
    );
    assert_eq!(response.header("retry-after"), Some("17"));
}

#[test]
fn upstream_500_is_502_with_anthropics_message() {
    check_failure(
        Reply::anthropic_error(500, "api_error", "Internal server error", None),
        502,
        "Internal server error",
    );
}

#[test]
fn upstream_529_overloaded_is_502() {
    check_failure(
        Reply::anthropic_error(529, "overloaded_error", "Overloaded", None),
        502,
        "Overloaded",
    );
}

#[test]
fn malformed_json_answer_is_502() {
    let upstream = AnthropicUpstream::script(vec![Reply::raw(
        200,
        "application/json",
        r#"{"type":"message","content":[{"type":"text","te"#,
    )]);
    let gw = gateway_for(&upstream);
    let response = post(&gw, "/completions", &hi_request(&gw));
    let id = assert_error(&response, 502, "");
    let provider_error = response.json()["providerError"].clone();
    assert!(
        provider_error
            .as_str()
            .is_some_and(|e| e.starts_with("malformed response from upstream")),
        "{provider_error}"
    );
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["status"], json!("error"), "{record}");
}

fn stream_request(gw: &Gateway) -> Value {
    with(hi_request(gw), "stream", json!(true))
}

/// A stream that failed after text went out: the text frames, then an error frame. Returns the
/// text and the invocation id.
fn failed_stream(response: &SseResponse) -> (String, String) {
    assert_eq!(response.status, 200, "{}", response.raw);
    let (last, partial) = response.frames.split_last().expect("frames");
    assert!(
        last["error"].is_string(),
        "no error frame: {}",
        response.raw
    );
    assert_eq!(last.get("completed"), None, "{last}");
    let id = last["invocationId"].as_str().expect("id").to_owned();
    for frame in partial {
        assert_eq!(frame["invocationId"], json!(id));
        assert_eq!(frame["completed"], json!(false));
    }
    (streamed_text(partial, 0), id)
}

#[test]
fn stream_cut_mid_event_fails_and_keeps_the_usage_so_far() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_cut_events(
        &[
            message_start(json!({"input_tokens": 25, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 0, "output_tokens": 1})),
            text_start(),
            text_delta("Hel"),
            text_delta("lo"),
        ],
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_del",
    )]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    let (text, id) = failed_stream(&response);
    assert_eq!(text, "Hello");
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(record["httpStatus"], json!(502), "{record}");
    // The connection dropped: the plugin saw a transport failure, not a finished answer.
    assert!(
        record["providerError"]
            .as_str()
            .is_some_and(|e| e.contains("reading the answer")),
        "{record}"
    );
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 125, "completion_tokens": 1, "total_tokens": 126,
            "cached_prompt_tokens": 100, "cache_creation_tokens": 0}),
        "{record}"
    );
    assert!(record["usageCost"].is_number(), "{record}");
}

#[test]
fn stream_that_ends_before_message_stop_fails() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(json!({"input_tokens": 5, "output_tokens": 1})),
        text_start(),
        text_delta("Partial"),
    ])]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    let (text, id) = failed_stream(&response);
    assert_eq!(text, "Partial");
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(
        record["providerError"],
        json!("stream ended early"),
        "{record}"
    );
    assert_eq!(record["usage"]["prompt_tokens"], json!(5), "{record}");
}

#[test]
fn error_event_mid_stream_is_reported() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(json!({"input_tokens": 5, "output_tokens": 1})),
        text_start(),
        text_delta("Ol"),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ])]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    let (text, id) = failed_stream(&response);
    assert_eq!(text, "Ol");
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(record["providerError"], json!("Overloaded"), "{record}");
    assert_eq!(record["httpStatus"], json!(502), "{record}");
}

#[test]
fn rate_limit_event_before_any_text_is_429() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(json!({"input_tokens": 5, "output_tokens": 1})),
        (
            "error",
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}),
        ),
    ])]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    assert_eq!(response.status, 429, "{}", response.raw);
    assert_eq!(response.json()["providerError"], json!("Slow down"));
}

#[test]
fn streaming_error_status_is_reported_before_the_stream_starts() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_error(
        529,
        "overloaded_error",
        "Overloaded",
        None,
    )]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    assert_eq!(response.status, 502, "{}", response.raw);
    assert_eq!(response.json()["providerError"], json!("Overloaded"));
    assert_eq!(upstream.single_request().json()["stream"], json!(true));
}

#[test]
fn client_leaving_mid_stream_is_recorded_cancelled_with_its_usage() {
    let recording = Recording::load("Anthropic__claude-sonnet-4__simple_streaming");
    let upstream = AnthropicUpstream::script(vec![
        Reply::recorded(recording.interaction(0)).gap(Duration::from_millis(200)),
    ]);
    let gw = gateway_for(&upstream);
    let mut stream = open_stream_with_provider_key(&gw, PROVIDER_KEY, &stream_request(&gw));
    assert_eq!(stream.status, 200);
    let first = stream.next_frame().expect("a first frame");
    assert_eq!(first["choices"][0]["text"], json!("Olá! ("));
    let id = first["invocationId"].as_str().expect("id").to_owned();
    drop(stream);

    upstream.wait_until("the upstream stream to be dropped", |u| {
        u.aborted_streams() == 1
    });
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("cancelled"));
    // message_start's counts, sent before the first text.
    assert_eq!(record["usage"]["prompt_tokens"], json!(16), "{record}");
    assert!(record["usageCost"].is_number(), "{record}");
}
