//! One gateway, its counters in process: a refusal and the rate-limit headers, a tpm limit's
//! estimates, a key's monthly budget, refusals that never reach the upstream, a key's routes,
//! models and expiry, and Redis down (served, limited in process, warned about once).

use super::*;

#[test]
fn a_refusal_and_the_rate_limit_headers_on_one_gateway() {
    let gw = Gateway::demo();
    // No limit: no rate-limit headers.
    let response = gw.post("/completions", &hello(&gw.project_id, "hi"));
    assert_ok(&response);
    assert_no_headers(&response.headers, &REQUEST_HEADERS, "without a limit");
    assert_no_headers(&response.headers, &TOKEN_HEADERS, "without a limit");

    set_limits(&gw, &["project", "limit", &gw.project_id, "--rpm", "10"]);
    let started = Instant::now();
    // The first of the burst streamed: the stream's head carries the headers too.
    let stream = gw.post_stream(
        "/completions",
        &with(
            hello(&gw.project_id, "one two three"),
            "stream",
            json!(true),
        ),
    );
    assert_eq!(stream.status, 200, "{}", stream.raw);
    assert!(stream.is_event_stream(), "{:?}", stream.headers);
    assert_eq!(stream.header("x-ratelimit-limit-requests"), Some("10"));
    assert_eq!(stream.header("x-ratelimit-remaining-requests"), Some("9"));
    let reset = stream
        .header("x-ratelimit-reset-requests")
        .unwrap_or_else(|| panic!("no reset header on the stream: {:?}", stream.headers));
    assert!(go_duration_secs(reset).is_some(), "reset {reset:?}");
    assert_no_headers(&stream.headers, &TOKEN_HEADERS, "with only an rpm limit");

    let mut remaining = Vec::new();
    for _ in 1..10 {
        let response = gw.post("/completions", &hello(&gw.project_id, "hi"));
        assert_ok(&response);
        assert_eq!(header_number(&response, "x-ratelimit-limit-requests"), 10);
        remaining.push(header_number(&response, "x-ratelimit-remaining-requests"));
        assert_reset(
            &response,
            "x-ratelimit-reset-requests",
            Duration::from_secs(60),
        );
        assert_no_headers(&response.headers, &TOKEN_HEADERS, "with only an rpm limit");
    }
    let refused = gw.post("/completions", &hello(&gw.project_id, "hi"));
    let refused_stream = gw.post_stream(
        "/completions",
        &with(hello(&gw.project_id, "hi"), "stream", json!(true)),
    );
    let elapsed = started.elapsed();
    println!("remaining: {remaining:?} in {elapsed:?}");
    if elapsed < Duration::from_secs(6) {
        assert_eq!(remaining, (0..9).rev().collect::<Vec<i64>>());
    }
    assert!(
        remaining.windows(2).all(|w| w[1] <= w[0]),
        "remaining should only go down: {remaining:?}"
    );
    if admissible(10, Duration::from_secs(6), elapsed) == 10 {
        let id = assert_limited(
            &refused,
            "project rate limit of 10 requests per minute reached",
            6,
        );
        assert_rate_limited_record(&gw, &gw.key, &id);
        // A refused stream is refused before it starts: a JSON error, not an event stream.
        assert_eq!(refused_stream.status, 429, "{}", refused_stream.raw);
        assert!(!refused_stream.is_event_stream());
        assert_eq!(
            refused_stream.json()["error"],
            json!("project rate limit of 10 requests per minute reached")
        );
        assert!(refused_stream.header("retry-after").is_some());
    }
}

#[test]
fn a_tpm_limit_reserves_each_requests_estimate_and_reports_token_headers() {
    let gw = Gateway::demo();
    // Five words in, five out: 10 tokens used by each call, which reserves its estimate on
    // admission: 23 bytes of prompt / 4 = 6, plus `max_tokens` 5 = 11 tokens.
    set_limits(&gw, &["project", "limit", &gw.project_id, "--tpm", "25"]);
    let mut body = with(
        hello(&gw.project_id, "one two three four five"),
        "showUsage",
        json!(true),
    );
    body["providerConfig"]["params"]["max_tokens"] = json!(5);
    let first = gw.post("/completions", &body);
    let answer = assert_ok(&first);
    assert_eq!(answer["usage"]["total_tokens"], json!(10), "{answer}");
    assert_eq!(header_number(&first, "x-ratelimit-limit-tokens"), 25);
    // 25 - 11 reserved (a token's refill at most while it ran).
    let first_remaining = header_number(&first, "x-ratelimit-remaining-tokens");
    assert!((14..=15).contains(&first_remaining), "{first_remaining}");
    assert_reset(&first, "x-ratelimit-reset-tokens", Duration::from_secs(60));
    assert_no_headers(&first.headers, &REQUEST_HEADERS, "with only a tpm limit");

    // Settled at 10: 15 left, room for another 11.
    let second = gw.post_stream("/completions", &with(body.clone(), "stream", json!(true)));
    assert_eq!(second.status, 200, "{}", second.raw);
    assert_eq!(second.header("x-ratelimit-limit-tokens"), Some("25"));
    let second_remaining: i64 = second
        .header("x-ratelimit-remaining-tokens")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no remaining tokens on the stream: {:?}", second.headers));
    assert!(
        (4..=5).contains(&second_remaining),
        "25 - 10 used - 11 reserved: {first_remaining} then {second_remaining}"
    );

    // 20 used: 5 left, less than the next request's 11.
    let third = gw.post("/completions", &body);
    let id = assert_limited(
        &third,
        "project rate limit of 25 tokens per minute reached",
        60,
    );
    assert_rate_limited_record(&gw, &gw.key, &id);
    // Without `max_tokens` a request reserves 4,096 completion tokens: more than the whole
    // bucket, so it needs a full one.
    body["providerConfig"]["params"]
        .as_object_mut()
        .expect("params")
        .remove("max_tokens");
    assert_limited(
        &gw.post("/completions", &body),
        "project rate limit of 25 tokens per minute reached",
        60,
    );
}

#[test]
fn a_keys_monthly_budget_stops_that_key_only() {
    let gw = Gateway::builder()
        .route(Route::echo("demo").price("echo", 1500.0, 1500.0))
        .start();
    let key = gw
        .cli(&[
            "key",
            "create",
            &gw.project_id,
            "--monthly-budget-usd",
            "0.01",
        ])
        .checked("key create --monthly-budget-usd")
        .last_line();
    std::thread::sleep(APPLIED);
    let body = hello(&gw.project_id, "hi");
    let statuses: Vec<Response> = (0..6).map(|_| post(&gw, &key, &body)).collect();
    let passed = statuses.iter().take_while(|r| r.status == 200).count();
    // $0.003 a request: the fourth reaches $0.012 and the fifth is refused.
    assert_eq!(
        passed,
        4,
        "{:?}",
        statuses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for response in &statuses[passed..] {
        let id = assert_limited(response, "key monthly budget of $0.01 reached", 31 * 86_400);
        assert_rate_limited_record(&gw, &gw.key, &id);
    }
    assert_ok(&post(&gw, &gw.key, &body));
}

#[test]
fn a_refused_request_never_reaches_the_upstream() {
    let simple = Recording::load("OpenAI__openai-gpt-4o-mini__simple")
        .interaction(0)
        .clone();
    let upstream = OpenAiUpstream::each_call(Reply::recorded(&simple));
    let gw = Gateway::builder()
        .route(Route::openai("oai", &upstream.base_url("/v1")))
        .start();
    set_limits(&gw, &["project", "limit", &gw.project_id, "--rpm", "2"]);
    let body = chat_request(
        &gw.project_id,
        "oai",
        "gpt-4o-mini",
        json!([{"role": "user", "content": "hello"}]),
    );
    let responses: Vec<Response> = (0..5)
        .map(|_| {
            gw.post_with_headers(
                "/completions",
                Some(&gw.key),
                &[("Provider-API-Key", "sk-test")],
                &body,
            )
        })
        .collect();
    let statuses: Vec<u16> = responses.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 429, 429, 429]);
    for response in &responses[2..] {
        assert_limited(
            response,
            "project rate limit of 2 requests per minute reached",
            60,
        );
    }
    assert_eq!(
        upstream.requests().len(),
        2,
        "the upstream saw refused requests"
    );
}

#[test]
fn a_keys_routes_models_and_expiry_scope_it() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .route(Route::echo("other"))
        .start();
    let pid = gw.project_id.clone();
    let create = |flags: &[&str]| {
        let mut args = vec!["key", "create", pid.as_str()];
        args.extend_from_slice(flags);
        gw.cli(&args).checked(&args.join(" ")).last_line()
    };
    let on = |route: &str, model: &str| text_request(&pid, route, model, "hi");

    let routes_key = create(&["--routes", "demo"]);
    assert_ok(&post(&gw, &routes_key, &on("demo", "echo")));
    assert_ok(&post(&gw, &routes_key, &on("demo", "echo-x")));
    let message = assert_error_message(&post(&gw, &routes_key, &on("other", "echo")), 403);
    assert!(
        message.contains("demo"),
        "{message:?} does not name the scope"
    );

    let models_key = create(&["--models", "demo/echo-x"]);
    assert_ok(&post(&gw, &models_key, &on("demo", "echo-x")));
    for (route, model) in [("demo", "echo"), ("other", "echo-x")] {
        let message = assert_error_message(&post(&gw, &models_key, &on(route, model)), 403);
        assert!(
            message.contains("demo/echo-x"),
            "{route}/{model}: {message:?} does not name the scope"
        );
    }

    // Unscoped keys of the project keep every route.
    assert_ok(&post(&gw, &gw.key, &on("other", "echo")));

    let expiring = create(&["--expires", "2s"]);
    let created = Instant::now();
    assert_ok(&post(&gw, &expiring, &on("demo", "echo")));
    std::thread::sleep(Duration::from_millis(3000).saturating_sub(created.elapsed()));
    assert_error(&post(&gw, &expiring, &on("demo", "echo")), 401, "expired");
}

/// Asserts an error answer of `status` and returns its message.
fn assert_error_message(response: &Response, status: u16) -> String {
    assert_error(response, status, "");
    response.json()["error"]
        .as_str()
        .expect("an error message")
        .to_owned()
}

#[test]
fn redis_down_the_gateway_serves_and_limits_in_process_with_one_warning() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a port");
        listener.local_addr().expect("its address").port()
    };
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("redis_url = \"redis://127.0.0.1:{closed}/0\""))
        .config_line("redis_key_prefix = \"gwtest:down:\"")
        .start();
    set_limits(&gw, &["project", "limit", &gw.project_id, "--rpm", "3"]);
    let body = hello(&gw.project_id, "hi");
    let started = Instant::now();
    let first: Vec<Response> = (0..4).map(|_| gw.post("/completions", &body)).collect();
    let elapsed = started.elapsed();
    for response in &first[..3] {
        assert_ok(response);
    }
    if admissible(3, Duration::from_secs(20), elapsed) == 3 {
        let id = assert_limited(
            &first[3],
            "project rate limit of 3 requests per minute reached",
            20,
        );
        assert_rate_limited_record(&gw, &gw.key, &id);
    }
    let mentions = |logs: &str| {
        logs.lines()
            .filter(|l| l.to_ascii_lowercase().contains("redis"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // The logs arrive through a pipe: give what was written time to be read.
    std::thread::sleep(Duration::from_millis(300));
    let after_first = mentions(&gw.logs());
    for _ in 0..8 {
        gw.post("/completions", &body);
    }
    std::thread::sleep(Duration::from_millis(300));
    let logs = gw.logs();
    let after_more = mentions(&logs);
    println!("log lines about Redis: {after_more:#?}");
    let warnings: Vec<&String> = after_more
        .iter()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one warning per outage, not per request: {warnings:#?}"
    );
    assert_eq!(
        after_first, after_more,
        "more requests logged more about Redis"
    );
}
