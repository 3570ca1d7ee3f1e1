//! What an instance may use: ordinary models answer, an endless loop ends at its CPU budget and a
//! memory bomb at its memory limit (the memory coming back), a huge answer is cut at
//! `max_response_bytes`, endless streams end at the idle or total timeout; other routes keep
//! serving throughout.

use super::*;

// ---------------------------------------------------------------- baseline

#[test]
fn ordinary_models_answer_ok() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let body = assert_ok(&gw.post("/completions", &ask(&gw, HOSTILE, "anything")));
    assert_eq!(body["choices"][0]["text"], json!("ok"), "{body}");

    let streamed = gw.post_stream(
        "/completions",
        &with(ask(&gw, HOSTILE, "anything"), "stream", json!(true)),
    );
    let (partial, _last) = split_stream(&streamed);
    assert_eq!(streamed_text(&partial, 0), "ok");
    assert_eq!(upstream.total_requests(), 0);
}

// ---------------------------------------------------------------- CPU

#[test]
fn infinite_loop_ends_with_502_while_other_routes_keep_serving() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    // One loop at a time, then two at once (as many as the test machine has
    // cores); three rounds each, so the other route is measured over a few
    // seconds of spinning.
    let mut took = Vec::new();
    for at_once in [1, 2] {
        let what = format!("infinite loop ({at_once} at once, 3 rounds)");
        let outcomes = alongside(&gw, &what, || {
            let mut outcomes = Vec::new();
            for _ in 0..3 {
                std::thread::scope(|scope| {
                    let loops: Vec<_> = (0..at_once)
                        .map(|_| {
                            scope.spawn(|| {
                                let started = Instant::now();
                                let response = gw.post("/completions", &ask(&gw, HOSTILE, "loop"));
                                (response, started.elapsed())
                            })
                        })
                        .collect();
                    outcomes.extend(loops.into_iter().map(join));
                });
            }
            outcomes
        });
        for (response, elapsed) in &outcomes {
            expect_failure(&gw, response, 502, &["CPU"]);
            took.push(*elapsed);
        }
    }
    eprintln!(
        "[sandbox figure] infinite loop with cpu_time_ms = {}: each request ended after {:?} \
         (median), {:?} (max)",
        Limits::default().cpu_time_ms,
        median(&took),
        max(&took)
    );
    assert_healthy(&gw);
    assert_eq!(upstream.total_requests(), 0);
}

// ---------------------------------------------------------------- memory

#[test]
fn memory_bomb_fails_its_request_and_the_memory_comes_back() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let (pid, baseline) = rss_baseline(&gw);
    let sampler = RssSampler::start(pid);
    // Four bombs at once: 4 x 32 MiB, more than the RSS slack, so memory that
    // is not given back fails the test.
    let responses: Vec<Response> = std::thread::scope(|scope| {
        let bombs: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| gw.post("/completions", &ask(&gw, HOSTILE, "memory"))))
            .collect();
        bombs.into_iter().map(join).collect()
    });
    let peak = sampler.stop();
    for response in &responses {
        expect_failure(&gw, response, 502, &["memory"]);
    }
    assert_rss_returns("memory bomb (4 at once, 32 MiB limit)", pid, baseline, peak);
    assert_healthy(&gw);
}

// ---------------------------------------------------------------- big answers

#[test]
fn huge_response_is_cut_at_max_response_bytes() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let (pid, baseline) = rss_baseline(&gw);
    let sampler = RssSampler::start(pid);
    let response = gw.post("/completions", &ask(&gw, HOSTILE, "huge"));
    let peak = sampler.stop();
    expect_failure(&gw, &response, 502, &["larger", "too large", "too-large"]);

    // The gateway stops reading and hangs up: the upstream's body is
    // dropped long before its end (what it sent is at most the limit plus
    // what the sockets buffer).
    let deadline = Instant::now() + PATIENCE;
    while upstream.bodies_dropped() == 0 {
        assert!(
            Instant::now() < deadline,
            "the gateway never closed the huge response"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = upstream.huge_bytes_sent();
    eprintln!(
        "[sandbox figure] huge response ({} offered, max_response_bytes = {}): the upstream got \
         to send {} before the gateway hung up",
        mib(upstream.huge_bytes()),
        mib(Limits::default().max_response_bytes),
        mib(sent)
    );
    assert!(
        sent < 64 * MIB,
        "the upstream sent {} of a huge body before the gateway hung up",
        mib(sent)
    );
    assert_rss_returns("huge response, cut", pid, baseline, peak);
    assert_healthy(&gw);
}

#[test]
fn huge_response_within_the_cap_streams_through_without_being_held() {
    const BODY: u64 = 1 << 30;
    let upstream = HostileUpstream::with_huge_bytes(BODY);
    let bulk = Limits {
        cpu_time_ms: 60_000,
        timeout_secs: 120,
        max_response_bytes: 4 * BODY,
        ..Limits::default()
    };
    let gw = start(
        &upstream,
        vec![hostile_route("bulk", &upstream.base_url("/v1"), bulk)],
    );
    let (pid, baseline) = rss_baseline(&gw);
    let sampler = RssSampler::start(pid);
    let started = Instant::now();
    let answer = assert_ok(&gw.post("/completions", &ask(&gw, "bulk", "huge")));
    let took = started.elapsed();
    let peak = sampler.stop();
    assert_eq!(
        answer["choices"][0]["text"],
        json!(format!("read {BODY} bytes")),
        "{answer}"
    );
    eprintln!(
        "[sandbox figure] a {} response read to its end by the plugin in {took:?} ({:.0} MiB/s)",
        mib(BODY),
        (BODY / MIB) as f64 / took.as_secs_f64()
    );
    // Holding even a quarter of the body would show.
    assert!(
        peak < baseline + BODY / 4,
        "the gateway's RSS peaked at {} (baseline {}) while a {} body went through",
        mib(peak),
        mib(baseline),
        mib(BODY)
    );
    assert_rss_returns("huge response, read through", pid, baseline, peak);
    assert_healthy(&gw);
}

// ---------------------------------------------------------------- endless streams

#[test]
fn endless_stream_that_stalls_hits_the_idle_timeout() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let started = Instant::now();
    let response = gw.post("/completions", &ask(&gw, HOSTILE, "endless"));
    let took = started.elapsed();
    expect_failure(&gw, &response, 504, &["time"]);
    eprintln!(
        "[sandbox figure] stalled stream with idle_timeout_ms = {}: answered 504 after {took:?}",
        Limits::default().idle_timeout_ms
    );
    assert_eq!(upstream.requests_ending_with("/endless"), 1);
    assert_healthy(&gw);
}

#[test]
fn endless_stream_streamed_ends_with_an_error_frame() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let streamed = gw.post_stream(
        "/completions",
        &with(ask(&gw, HOSTILE, "endless"), "stream", json!(true)),
    );
    // Text flowed before the stall, so the stream had started: 200, and the
    // error comes as the last frame.
    assert_eq!(streamed.status, 200, "{}", streamed.raw);
    assert!(streamed.is_event_stream(), "{:?}", streamed.headers);
    let id = streamed
        .header("x-invocation-id")
        .unwrap_or_else(|| panic!("no x-invocation-id header: {:?}", streamed.headers))
        .to_owned();
    let (last, partial) = streamed
        .frames
        .split_last()
        .unwrap_or_else(|| panic!("no frames: {}", streamed.raw));
    let text = streamed_text(partial, 0);
    assert!(
        text.starts_with("tick 1 "),
        "the chunks before the stall should have been streamed: {text:?}"
    );
    assert!(
        last["error"].as_str().is_some_and(|e| !e.is_empty()),
        "the last frame should be an error: {last}"
    );
    assert_eq!(last["invocationId"], json!(id), "{last}");
    assert_error_recorded(&gw, &id, 504);
    assert_healthy(&gw);
}

#[test]
fn endless_trickle_hits_the_total_timeout() {
    let upstream = HostileUpstream::start();
    let gw = start(
        &upstream,
        vec![hostile_route(
            "trickle",
            &upstream.base_url("/trickle"),
            // The total timeout is under test, not the CPU budget, which is
            // counted in epoch ticks while the plugin runs: on a loaded
            // machine (this file's other tests run beside it) 50 chunks were
            // seen to exceed the default 500 ms.
            Limits {
                cpu_time_ms: 4000,
                ..Limits::default()
            },
        )],
    );
    let started = Instant::now();
    let response = gw.post("/completions", &ask(&gw, "trickle", "endless"));
    let took = started.elapsed();
    expect_failure(&gw, &response, 504, &["time"]);
    eprintln!(
        "[sandbox figure] trickling stream (a chunk every {:?}) with timeout_secs = {}: answered \
         504 after {took:?}, {} chunks sent",
        hostile::TRICKLE_GAP,
        Limits::default().timeout_secs,
        upstream.endless_chunks()
    );
    assert_healthy(&gw);
}
