//! Streams retried or fallen back only before their first byte.

use super::*;

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
