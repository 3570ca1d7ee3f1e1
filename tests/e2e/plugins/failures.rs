//! A provider plugin that fails: a provider error is 502 (`provider_error`, whole and streamed), a
//! plugin that traps is 502 and the next request is served, a route whose plugin is not loaded
//! is 503; each recorded.

use gateway_test_support::{
    Gateway, Route, SseResponse, assert_error, assert_ok, split_stream, streamed_text,
    text_request, with,
};
use serde_json::json;

use crate::common::{assert_error_record, hello};

#[test]
fn provider_failure_is_502_with_provider_error_and_recorded() {
    let gw = Gateway::demo();
    let request = text_request(&gw.project_id, "demo", "fail", "please fail");
    let response = gw.post("/completions", &request);
    let id = assert_error(&response, 502, "");
    assert_eq!(
        response.json()["providerError"],
        json!("echo: asked to fail"),
        "{}",
        response.text()
    );
    let record = assert_error_record(&gw, &id, 502);
    assert_eq!(record["providerError"], json!("echo: asked to fail"));
    assert_eq!(record["model"], json!("fail"));
}

#[test]
fn provider_failure_while_streaming_is_reported() {
    let gw = Gateway::demo();
    let request = with(
        text_request(&gw.project_id, "demo", "fail", "please fail"),
        "stream",
        json!(true),
    );
    let response = gw.post_stream("/completions", &request);
    let id = stream_failure_id(&response, 502);
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(
        record["providerError"],
        json!("echo: asked to fail"),
        "{record}"
    );
}

/// A failed streaming request either fails before the stream starts (plain
/// JSON error, `status`) or sends an error frame and ends. Returns the
/// invocation id.
fn stream_failure_id(response: &SseResponse, status: u16) -> String {
    if response.is_event_stream() {
        assert_eq!(response.status, 200);
        let last = response.frames.last().expect("an error frame");
        assert!(
            last["error"].is_string(),
            "last frame is not an error: {last}"
        );
        last["invocationId"]
            .as_str()
            .expect("invocationId")
            .to_owned()
    } else {
        assert_eq!(response.status, status, "{}", response.raw);
        let body = response.json();
        assert!(body["error"].is_string(), "{body}");
        body["invocationId"]
            .as_str()
            .expect("invocationId")
            .to_owned()
    }
}

fn faulty_gateway() -> Gateway {
    Gateway::builder()
        .route(Route::new("faulty", "faulty").default_model("ok"))
        .start()
}

#[test]
fn trapping_plugin_is_502_and_the_next_request_succeeds() {
    let gw = faulty_gateway();
    let trap = text_request(&gw.project_id, "faulty", "trap", "boom");
    let response = gw.post("/completions", &trap);
    let id = assert_error(&response, 502, "");
    assert_error_record(&gw, &id, 502);

    let fine = text_request(&gw.project_id, "faulty", "ok", "hello");
    let body = assert_ok(&gw.post("/completions", &fine));
    assert_eq!(body["choices"][0]["text"], json!("fine"));

    // And again: one trap does not poison the plugin.
    assert_error(&gw.post("/completions", &trap), 502, "");
    assert_ok(&gw.post("/completions", &fine));
}

#[test]
fn trapping_plugin_while_streaming_fails_cleanly() {
    let gw = faulty_gateway();
    let trap = with(
        text_request(&gw.project_id, "faulty", "trap", "boom"),
        "stream",
        json!(true),
    );
    let response = gw.post_stream("/completions", &trap);
    let id = stream_failure_id(&response, 502);
    gw.wait_for_record(&id, |r| r["status"] == json!("error"));

    let fine = with(
        text_request(&gw.project_id, "faulty", "ok", "hello"),
        "stream",
        json!(true),
    );
    let response = gw.post_stream("/completions", &fine);
    let (partial, _) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), "fine");
}

#[test]
fn route_whose_plugin_is_not_loaded_is_503() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .route(Route::new("ghost", "missing"))
        .start();
    let request = text_request(&gw.project_id, "ghost", "any", "hello");
    let response = gw.post("/completions", &request);
    let id = assert_error(&response, 503, "");
    assert_error_record(&gw, &id, 503);
    // Other routes are unaffected.
    assert_ok(&gw.post("/completions", &hello(&gw)));
}
