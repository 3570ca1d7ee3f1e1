//! A caller who hangs up before a whole answer: the call runs on apart from the connection, is
//! charged what its upstream reports (a provider bills an answer it began, whoever reads it),
//! and is recorded `cancelled` with status 499; shutdown waits for it.

use super::*;

/// An upstream that takes `hold` to answer, and reports more tokens than the caller's
/// `max_tokens` reserved: 20,000 completion tokens, $20 at the route's price.
fn slow_answer(hold: Duration) -> OpenAiUpstream {
    let usage = json!({"prompt_tokens": 5, "completion_tokens": 20_000, "total_tokens": 20_005});
    OpenAiUpstream::each_call(
        Reply::openai_answer("gpt-4o-mini", "late answer", usage).slowly(hold),
    )
}

fn gateway(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        .route(Route::openai("slow", &upstream.base_url("/v1")).price(
            "gpt-4o-mini",
            1000.0,
            1000.0,
        ))
        .start()
}

/// A chat request of one token's answer (a reservation of a few millionths of a dollar).
fn ask(gw: &Gateway) -> Value {
    let body = chat_request(
        &gw.project_id,
        "slow",
        "gpt-4o-mini",
        json!([{"role": "user", "content": "hi"}]),
    );
    gateway_test_support::with_param(body, "max_tokens", json!(1))
}

/// Sends `body` to `/completions` with `key` on a connection of its own, waits until the
/// upstream has the call, and hangs up without reading a byte of the answer.
fn send_and_leave(gw: &Gateway, upstream: &OpenAiUpstream, key: &str, body: &Value) {
    let seen = upstream.requests().len();
    let stream = gw.send(
        "POST",
        "/completions",
        Some(key),
        &[("Provider-API-Key", "sk-test-0123456789")],
        body.to_string().as_bytes(),
    );
    upstream.wait_until("the call to reach the upstream", |u| {
        u.requests().len() > seen
    });
    drop(stream);
}

/// The record of `gw`'s one call, once it is written.
fn the_only_record(gw: &Gateway) -> Value {
    let deadline = Instant::now() + GENEROUS;
    loop {
        if let [line] = &gw.list_invocations(&[])[..] {
            let id = line.split_whitespace().next().expect("an id");
            return gw.record(id);
        }
        assert!(
            Instant::now() < deadline,
            "no record of the call whose caller left"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_charged_and_cancelled(record: &Value) {
    assert_eq!(record["status"], json!("cancelled"), "{record}");
    assert_eq!(record["httpStatus"], json!(499), "{record}");
    assert_eq!(
        record["error"],
        json!("the client disconnected"),
        "{record}"
    );
    assert_eq!(
        record["usage"]["completion_tokens"],
        json!(20_000),
        "{record}"
    );
    assert!(
        record["usageCost"].as_f64().is_some_and(|cost| cost > 19.0),
        "the call's cost is not in its record: {record}"
    );
    assert!(
        record["response"].to_string().contains("late answer"),
        "the answer the caller did not get is not in its record: {record}"
    );
}

#[test]
fn a_caller_who_leaves_before_a_whole_answer_is_charged_and_recorded() {
    let upstream = slow_answer(Duration::from_millis(800));
    let gw = gateway(&upstream);
    let key = gw
        .cli(&[
            "key",
            "create",
            &gw.project_id,
            "--daily-budget-usd",
            "0.01",
        ])
        .checked("key create --daily-budget-usd")
        .last_line();
    let body = ask(&gw);

    send_and_leave(&gw, &upstream, &key, &body);
    let record = the_only_record(&gw);
    assert_charged_and_cancelled(&record);
    gw.wait_for_log("the caller left before the answer", 1);
    let logged = gw.logs();
    let line = logged
        .lines()
        .find(|l| l.contains("the caller left before the answer"))
        .unwrap_or_default();
    assert!(line.contains(record["id"].as_str().expect("id")), "{line}");
    assert!(line.contains("499"), "{line}");

    // Its $20 went against the key's budget: the next request is refused before the upstream.
    let calls = upstream.requests().len();
    let refused = gw.post_with_headers(
        "/completions",
        Some(&key),
        &[("Provider-API-Key", "sk-test-0123456789")],
        &body,
    );
    assert_error(&refused, 429, "key daily budget of $0.01 reached");
    assert_eq!(upstream.requests().len(), calls);
}

#[test]
fn shutdown_waits_for_a_call_whose_caller_left() {
    let upstream = slow_answer(Duration::from_millis(1500));
    let mut gw = gateway(&upstream);
    let body = ask(&gw);
    let key = gw.key.clone();

    send_and_leave(&gw, &upstream, &key, &body);
    // No connection is left open: only the call itself keeps the gateway from exiting.
    gw.terminate();
    assert!(gw.wait_exit().success());
    assert_charged_and_cancelled(&the_only_record(&gw));
}

/// A stream whose caller hangs up after its first words, before the chunk that reports its
/// usage: the provider bills what it generated, so the call keeps what it reserved (here the
/// key's whole tokens-per-minute limit, less a few tokens), and the next request is refused
/// before the upstream. Before, the reservation went back and a caller could stream past every
/// limit by leaving before each stream's last chunk.
#[test]
fn a_stream_cut_before_its_usage_keeps_its_reservation() {
    let upstream =
        OpenAiUpstream::each_call(Reply::openai_slow_stream(50, Duration::from_millis(100)));
    let gw = gateway(&upstream);
    let key = gw
        .cli(&["key", "create", &gw.project_id, "--tpm", "100"])
        .checked("key create --tpm")
        .last_line();
    let body = {
        let body = chat_request(
            &gw.project_id,
            "slow",
            "gpt-4o-mini",
            json!([{"role": "user", "content": "hi"}]),
        );
        let body = gateway_test_support::with_param(body, "max_tokens", json!(60));
        gateway_test_support::with(body, "stream", json!(true))
    };
    let mut stream = gw.open_stream_with_headers(
        "/completions",
        Some(&key),
        &[("Provider-API-Key", "sk-test-0123456789")],
        &body,
    );
    assert_eq!(stream.status, 200);
    assert!(stream.next_frame().is_some(), "no first frame");
    drop(stream);
    let record = the_only_record(&gw);
    assert_eq!(record["status"], json!("cancelled"), "{record}");

    // 61 tokens kept of 100: another 61 do not fit.
    let calls = upstream.requests().len();
    let refused = gw.post_with_headers(
        "/completions",
        Some(&key),
        &[("Provider-API-Key", "sk-test-0123456789")],
        &gateway_test_support::with(body, "stream", json!(false)),
    );
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(upstream.requests().len(), calls);
}
