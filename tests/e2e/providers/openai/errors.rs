//! The upstream's errors as the caller meets them: statuses mapped (401, 404, 500 are 502 or
//! 404 with `provider_error`; 429 with its `Retry-After`), plain-text bodies, a streaming
//! request's error, an upstream that never answers (504).

use super::*;

fn failing_call(upstream: &OpenAiUpstream) -> (Gateway, Response) {
    let gw = gateway_for(upstream, "/v1");
    let response = post(&gw, "/completions", &hi_request(&gw));
    (gw, response)
}

fn check_upstream_failure(status: u16, message: &str, code: &str, expected_status: u16) {
    let upstream = OpenAiUpstream::always(Reply::openai_error(status, message, code, None));
    let (gw, response) = failing_call(&upstream);
    assert_provider_error(
        &gw,
        &response,
        expected_status,
        message,
        upstream.requests().len(),
    );
}

#[test]
fn upstream_401_is_502_with_provider_error() {
    check_upstream_failure(
        401,
        "Incorrect API key provided: sk-test-****6789.",
        "invalid_api_key",
        502,
    );
}

/// The caller asked for a model the provider does not have: the caller's 404 (issue 46 item 7).
#[test]
fn upstream_404_is_404_with_provider_error() {
    check_upstream_failure(
        404,
        "The model `gpt-9` does not exist or you do not have access to it.",
        "model_not_found",
        404,
    );
}

#[test]
fn upstream_500_is_502_with_provider_error() {
    check_upstream_failure(
        500,
        "The server had an error while processing your request.",
        "server_error",
        502,
    );
}

#[test]
fn upstream_429_is_429_with_retry_after() {
    let message = "Rate limit reached for gpt-4o-mini. Please try again in 7s.";
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        429,
        message,
        "rate_limit_exceeded",
        Some("7"),
    ));
    let (gw, response) = failing_call(&upstream);
    let id = assert_error(&response, 429, "");
    assert_eq!(response.header("retry-after"), Some("7"));
    assert_eq!(response.json()["providerError"], json!(message));
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(429), "{record}");
    assert_eq!(record["status"], json!("error"), "{record}");
}

#[test]
fn upstream_429_without_retry_after_is_429() {
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        429,
        "Slow down",
        "rate_limit_exceeded",
        None,
    ));
    let (_gw, response) = failing_call(&upstream);
    assert_error(&response, 429, "");
    assert!(response.header("retry-after").is_none());
}

#[test]
fn upstream_error_with_a_plain_text_body_is_502() {
    let upstream =
        OpenAiUpstream::always(Reply::raw(503, "application/json", "upstream overloaded\n"));
    let (_gw, response) = failing_call(&upstream);
    assert_error(&response, 502, "");
    assert_eq!(
        response.json()["providerError"],
        json!("upstream overloaded")
    );
}

#[test]
fn upstream_error_on_a_streaming_request_is_reported() {
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        500,
        "The server had an error",
        "server_error",
        None,
    ));
    let gw = gateway_for(&upstream, "/v1");
    let response = post_stream(&gw, &with(hi_request(&gw), "stream", json!(true)));
    let id = if response.is_event_stream() {
        let last = response.frames.last().expect("an error frame");
        assert!(last["error"].is_string(), "{last}");
        last["invocationId"].as_str().expect("id").to_owned()
    } else {
        assert_eq!(response.status, 502, "{}", response.raw);
        let body = response.json();
        assert_eq!(body["providerError"], json!("The server had an error"));
        body["invocationId"].as_str().expect("id").to_owned()
    };
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(
        record["providerError"],
        json!("The server had an error"),
        "{record}"
    );
}

#[test]
fn upstream_that_never_answers_is_504() {
    let upstream = OpenAiUpstream::hang();
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).timeout_secs(1))
        .start();
    let response = post(&gw, "/completions", &hi_request(&gw));
    let id = assert_error(&response, 504, "");
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(504), "{record}");
    assert_eq!(record["status"], json!("error"), "{record}");
}
