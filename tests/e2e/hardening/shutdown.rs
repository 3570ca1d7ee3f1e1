//! Shutdown: requests still running when the grace ends are ended and recorded.

use super::*;

// ------------------------------------------------------------------ 4: shutdown

#[test]
fn requests_still_running_when_the_grace_ends_are_ended_and_recorded() {
    let slow =
        OpenAiUpstream::each_call(Reply::openai_slow_stream(600, Duration::from_millis(100)));
    let stuck = OpenAiUpstream::hang();
    let mut gw = Gateway::builder()
        .route(Route::openai("slow", &slow.base_url("/v1")))
        .route(Route::openai("stuck", &stuck.base_url("/v1")))
        .config_line("shutdown_grace_secs = 1")
        .start();
    let provider_key = [("Provider-API-Key", "sk-test-0123456789")];
    let chat = |route: &str| {
        chat_request(
            &gw.project_id,
            route,
            "gpt-4o-mini",
            json!([{"role": "user", "content": "hi"}]),
        )
    };
    let mut streams = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..5 {
        let mut stream = gw.open_stream_with_headers(
            "/completions",
            Some(&gw.key),
            &provider_key,
            &with(chat("slow"), "stream", json!(true)),
        );
        assert_eq!(stream.status, 200);
        let first = stream.next_frame().expect("a first frame");
        ids.push(first["invocationId"].as_str().expect("id").to_owned());
        streams.push(stream);
    }
    let (addr, key, body) = (gw.addr, gw.key.clone(), chat("stuck").to_string());
    let plain = std::thread::spawn(move || {
        client::request(
            addr,
            "POST",
            "/completions",
            &[
                ("Authorization", key.as_str()),
                ("Content-Type", "application/json"),
                ("Provider-API-Key", "sk-test-0123456789"),
            ],
            body.as_bytes(),
        )
    });
    stuck.wait_until("the stuck request to reach the upstream", |u| {
        !u.requests().is_empty()
    });

    gw.terminate();
    for stream in &mut streams {
        let mut last = None;
        while let Some(frame) = stream.next_frame() {
            last = Some(frame);
        }
        let last = last.expect("frames after the first");
        assert!(
            last["error"]
                .as_str()
                .is_some_and(|e| e.contains("shutting down")),
            "the stream did not end with an error frame: {last}"
        );
    }
    let plain = plain.join().expect("the plain request's thread");
    let plain_id = assert_error(&plain, 503, "shutting down");
    assert!(gw.wait_exit().success());

    // Every one is in the database of the stopped gateway.
    for id in &ids {
        let record = gw.record(id);
        assert_eq!(record["status"], json!("cancelled"), "{record}");
        assert!(
            record["error"].as_str().unwrap().contains("shutting down"),
            "{record}"
        );
        let partial = record["response"]["partialText"][0].as_str().unwrap_or("");
        assert!(partial.starts_with("w0 "), "{record}");
    }
    let record = gw.record(&plain_id);
    assert_eq!(record["status"], json!("cancelled"), "{record}");
    assert_eq!(record["httpStatus"], json!(503), "{record}");
}
