//! The one deadline of the whole request (the first route's `timeout_secs`), shared by retries and
//! fallbacks; `Retry-After`s longer than what is left are not waited for, the smallest answered.

use super::*;

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
