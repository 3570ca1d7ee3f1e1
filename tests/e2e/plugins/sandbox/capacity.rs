//! Many requests: a flood of upstream requests capped at `max_http_requests` without stalling
//! other routes, and requests beyond `max_plugin_instances` answered 503 with `Retry-After` until a
//! slot frees.

use super::*;

// ---------------------------------------------------------------- many requests

#[test]
fn flood_is_capped_at_max_http_requests() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let started = Instant::now();
    let response = gw.post("/completions", &ask(&gw, HOSTILE, "flood"));
    let took = started.elapsed();
    let cap = Limits::default().max_http_requests;
    expect_failure(
        &gw,
        &response,
        502,
        &[&format!("{cap} of 5000 calls succeeded")],
    );
    assert_eq!(
        upstream.requests_ending_with("/flood"),
        cap,
        "only max_http_requests calls may reach the upstream"
    );
    eprintln!(
        "[sandbox figure] flood of 5000 calls with max_http_requests = {cap}: answered after \
         {took:?}"
    );
    assert_healthy(&gw);
}

#[test]
fn flood_does_not_stall_other_routes() {
    const CALLS: u64 = 5000;
    let upstream = HostileUpstream::start();
    let generous = Limits {
        cpu_time_ms: 60_000,
        timeout_secs: 120,
        max_http_requests: 100_000,
        ..Limits::default()
    };
    let gw = start(
        &upstream,
        vec![hostile_route("flood", &upstream.base_url("/v1"), generous)],
    );
    let body = with_param(ask(&gw, "flood", "flood"), "count", json!(CALLS));
    let (response, took) = alongside(&gw, &format!("flood of {CALLS} calls"), || {
        let started = Instant::now();
        let response = gw.post("/completions", &body);
        (response, started.elapsed())
    });
    let answer = assert_ok(&response);
    assert_eq!(
        answer["choices"][0]["text"],
        json!(format!("flood: {CALLS} calls succeeded")),
        "{answer}"
    );
    assert_eq!(upstream.requests_ending_with("/flood"), CALLS);
    eprintln!(
        "[sandbox figure] flood of {CALLS} calls: {took:?}, {} upstream connections",
        upstream.connections()
    );
    assert_healthy(&gw);
}

// ---------------------------------------------------------------- instance cap

/// A gateway whose `max_plugin_instances` is `cap`, with the echo route `demo`
/// and a hostile route `held` whose endless streams trickle (so a client that
/// leaves is noticed at the next chunk) under limits they never reach.
fn start_capped(upstream: &HostileUpstream, cap: u32) -> Gateway {
    let patient = Limits {
        cpu_time_ms: 60_000,
        idle_timeout_ms: 60_000,
        timeout_secs: 600,
        ..Limits::default()
    };
    Gateway::builder()
        .config_line(&format!("max_plugin_instances = {cap}"))
        .env(KEY_VAR, "hostile-test-key")
        .route(Route::echo(DEMO))
        .route(hostile_route(
            "held",
            &upstream.base_url("/trickle"),
            patient,
        ))
        .start()
}

/// Opens an endless stream on `held`.
fn open_held(gw: &Gateway) -> Connection {
    let body = with(ask(gw, "held", "endless"), "stream", json!(true));
    gw.open_stream("/completions", &body)
}

/// Waits for the first chunk of a stream opened by [`open_held`]: from then on
/// its plugin instance exists until the connection is dropped.
fn started(mut stream: Connection) -> Connection {
    assert_eq!(stream.status, 200, "the held stream did not start");
    let first = stream
        .next_frame()
        .expect("a first frame of the held stream");
    assert!(first["invocationId"].is_string(), "{first}");
    stream
}

/// Asserts a 503 that tells the caller to retry, recorded with an invocation id.
fn expect_busy(gw: &Gateway, response: &Response) {
    assert_eq!(
        response.header("retry-after"),
        Some("1"),
        "a request over the instance cap should carry Retry-After: {:?} {}",
        response.headers,
        response.text()
    );
    expect_failure(gw, response, 503, &["at once", "limit", "busy"]);
}

#[test]
fn requests_beyond_max_plugin_instances_get_503_with_retry_after_until_a_slot_frees() {
    let upstream = HostileUpstream::start();
    let gw = start_capped(&upstream, 2);
    let held = [started(open_held(&gw)), started(open_held(&gw))];

    // The cap counts instances of every plugin: the echo route is refused too.
    let echo = text_request(&gw.project_id, DEMO, "echo", "third");
    expect_busy(&gw, &gw.post("/completions", &echo));
    // A streamed request is refused before its stream starts.
    let streamed = gw.post_stream(
        "/completions",
        &with(ask(&gw, "held", "endless"), "stream", json!(true)),
    );
    assert_eq!(streamed.status, 503, "{}", streamed.raw);
    assert_eq!(streamed.header("retry-after"), Some("1"));
    let id = streamed.json()["invocationId"]
        .as_str()
        .expect("invocationId")
        .to_owned();
    assert_error_recorded(&gw, &id, 503);

    // The held streams end: their slots come back once the gateway sees the
    // clients gone (at the next trickled chunk). Both of them, and no more.
    drop(held);
    let held = [hold_stream_once_free(&gw), hold_stream_once_free(&gw)];
    expect_busy(&gw, &gw.post("/completions", &echo));
    drop(held);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = gw.post("/completions", &echo);
        if response.status == 200 {
            assert_eq!(assert_ok(&response)["choices"][0]["text"], json!("third"));
            break;
        }
        assert_eq!(response.status, 503, "{}", response.text());
        assert!(
            Instant::now() < deadline,
            "no slot came back within {PATIENCE:?} of the held streams ending"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // That 200 needed one slot; the other held stream's may still be held until the gateway sees
    // its client gone, and the 200's own instance ends only after its answer was sent.
    for plugin in [HOSTILE, "echo"] {
        metric_reaches(
            &gw,
            "gateway_plugin_instances_active",
            &[("plugin", plugin)],
            0.0,
        );
    }
    assert_healthy(&gw);
}

/// A started held stream, retrying while the gateway answers 503 (a slot is
/// given back only once the gateway notices its client left).
fn hold_stream_once_free(gw: &Gateway) -> Connection {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stream = open_held(gw);
        if stream.status != 503 {
            return started(stream);
        }
        assert!(
            Instant::now() < deadline,
            "no slot came back within {PATIENCE:?} of the held streams ending"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The cap counts instances, not pools: after [`PluginRuntime::recycle`] the
/// instances still running on the old pool keep their slots until they end.
#[tokio::test]
async fn the_instance_cap_holds_across_a_pool_recycle() {
    use gateway::plugins::{PluginError, PluginRuntime};
    use gateway_test_support::runtime::EchoCalls;
    use std::sync::Arc;

    let runtime = Arc::new(PluginRuntime::with_max_instances(None, 2).expect("runtime"));
    let echo = EchoCalls::load(runtime.clone(), "one two three").await;
    let plugin = echo.plugin();
    let call = |plugin, sink| echo.stream(plugin, sink);
    let busy = |result: &Result<_, PluginError>| matches!(result, Err(PluginError::Busy(2)));

    // Two streams nobody reads past their first word: each holds its instance.
    let mut readers = Vec::new();
    let mut held = Vec::new();
    for _ in 0..2 {
        let (sink, mut reader) = tokio::sync::mpsc::channel(1);
        held.push(call(plugin.clone(), sink));
        reader.recv().await.expect("a first word");
        readers.push(reader);
    }
    let (sink, _reader) = tokio::sync::mpsc::channel(16);
    let third = call(plugin.clone(), sink).await.expect("call task");
    assert!(busy(&third), "a third instance was allowed: {third:?}");

    runtime.recycle().expect("recycle");
    let moved = runtime.get("echo").expect("echo still serving");
    let (sink, _reader) = tokio::sync::mpsc::channel(16);
    let on_new_pool = call(moved.clone(), sink).await.expect("call task");
    assert!(
        busy(&on_new_pool),
        "the fresh pool let a third instance run while two were running on the old one: \
         {on_new_pool:?}"
    );

    drop(readers);
    for call in held {
        // The callers are gone: the plugin is told so and ends.
        let _ = call.await.expect("call task");
    }
    let mut both = Vec::new();
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (sink, reader) = tokio::sync::mpsc::channel(16);
        both.push(call(moved.clone(), sink));
        readers.push(reader);
    }
    for (served, mut reader) in both.into_iter().zip(readers) {
        while reader.recv().await.is_some() {}
        let completion = served
            .await
            .expect("call task")
            .expect("served once the slots came back");
        assert_eq!(completion.choices[0].text, "one two three");
    }
}
