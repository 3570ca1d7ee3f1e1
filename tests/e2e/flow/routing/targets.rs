//! A route's weighted `targets`: requests spread by weight, a failed target handing the request
//! to another before any fallback, each target's key and settings, and the ejection of a target that
//! keeps failing (its one probe, outliving a reload).

use super::*;

fn ejecting(route: Route, after: u32, secs: u64) -> Route {
    route
        .key("eject_after_failures", &after.to_string())
        .key("eject_secs", &secs.to_string())
}

/// Sends `n` requests to [`POOL`], each answered, and counts them by the `x-gateway-target`
/// that served them, checking the upstreams saw the same.
fn spread(n: usize, a: &OpenAiUpstream, b: &OpenAiUpstream, weights: (u32, u32)) -> (usize, usize) {
    let gw = start(vec![pool(POOL, &[(a, weights.0), (b, weights.1)])]);
    let (mut on_a, mut on_b) = (0, 0);
    for _ in 0..n {
        let response = post(&gw, &hi(&gw, POOL));
        let text = text_of(&response);
        let target = response.header("x-gateway-target").map(str::to_owned);
        assert_eq!(response.header("x-gateway-route"), Some(POOL));
        if target == Some(a.addr().to_string()) {
            assert_eq!(text, "from a");
            on_a += 1;
        } else {
            assert_eq!(target, Some(b.addr().to_string()));
            assert_eq!(text, "from b");
            on_b += 1;
        }
    }
    assert_eq!((a.requests().len(), b.requests().len()), (on_a, on_b));
    (on_a, on_b)
}

#[test]
fn forty_requests_over_two_targets_of_equal_weight_land_on_both() {
    let a = OpenAiUpstream::each_call(answer("from a"));
    let b = OpenAiUpstream::each_call(answer("from b"));
    let (on_a, on_b) = spread(40, &a, &b, (1, 1));
    // Binomial(40, 1/2): outside 8..=32 once in 20,000 runs.
    assert!((8..=32).contains(&on_a), "{on_a} on a, {on_b} on b");
}

#[test]
fn requests_over_targets_weighted_three_to_one_land_three_to_one() {
    let a = OpenAiUpstream::each_call(answer("from a"));
    let b = OpenAiUpstream::each_call(answer("from b"));
    // 200 rather than 40: 40 requests cannot tell 3:1 from 1:1 without failing by chance
    // now and then. Binomial(200, 3/4): 150 ± 6; outside 125..=175 once in 30,000 runs, and
    // a 1:1 split (100 ± 7) never inside.
    let (on_a, on_b) = spread(200, &a, &b, (3, 1));
    assert!(
        (125..=175).contains(&on_a),
        "{on_a} on a (weight 3), {on_b} on b"
    );
}

#[test]
fn a_failed_target_hands_the_request_to_the_other_target_before_any_fallback() {
    let sick = OpenAiUpstream::each_call(server_error("this deployment is down"));
    let well = OpenAiUpstream::each_call(answer("from the well one"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(pool(POOL, &[(&sick, 1), (&well, 1)]), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let mut listed = 0;
    for _ in 0..10 {
        let response = post(&gw, &hi(&gw, POOL));
        assert_eq!(text_of(&response), "from the well one");
        assert_eq!(response.header("x-gateway-route"), Some(POOL));
        let well_addr = well.addr().to_string();
        assert_eq!(
            response.header("x-gateway-target"),
            Some(well_addr.as_str())
        );
        let record = record(&gw, &invocation_id(&response.json()));
        if record["attempts"] != json!([]) {
            listed += 1;
            assert_attempts(
                &record,
                &[
                    tried(POOL, sick.addr(), Some(500)),
                    tried(POOL, well.addr(), Some(200)),
                ],
            );
        }
    }
    assert_eq!(
        sick.requests().len(),
        listed,
        "the sick target is tried once per request at most"
    );
    assert_eq!(well.requests().len(), 10);
    assert!(
        backup.requests().is_empty(),
        "a request fell back with a target left"
    );
}

#[test]
fn a_route_falls_back_once_each_target_had_its_try_and_its_retries() {
    let a = OpenAiUpstream::each_call(server_error("a is down"));
    let b = OpenAiUpstream::each_call(server_error("b is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(
            retries(pool(POOL, &[(&a, 1), (&b, 1)]), 1).key("retry_backoff_ms", "10"),
            &[FALLBACK],
        ),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post(&gw, &hi(&gw, POOL));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    // Each target once, then the one retry on either.
    assert_eq!(a.requests().len() + b.requests().len(), 3);
    assert!(!a.requests().is_empty() && !b.requests().is_empty());
    let record = record(&gw, &invocation_id(&response.json()));
    let attempts = record["attempts"].as_array().expect("attempts").clone();
    assert_eq!(attempts.len(), 4, "{record}");
    let first_two: Vec<&Value> = attempts[..2].iter().map(|a| &a["target"]).collect();
    assert_ne!(
        first_two[0], first_two[1],
        "the second try went to the other target: {record}"
    );
    assert_eq!(attempts[3]["route"], json!(FALLBACK), "{record}");
}

#[test]
fn each_target_takes_its_own_key_or_the_routes_and_settings_laid_over_the_routes() {
    let own = OpenAiUpstream::each_call(answer("own key"));
    let shared = OpenAiUpstream::each_call(answer("route key"));
    let targets = format!(
        "[{{ base_url = {:?}, api_key_env = \"TARGET_KEY\", settings = {{ api_key_header = \"api-key\" }} }}, {{ base_url = {:?} }}]",
        own.base_url("/v1"),
        shared.base_url("/v1"),
    );
    let route = Route::new(POOL, "openai")
        .api_key_env("ROUTE_KEY")
        .key("targets", &targets);
    let gw = Gateway::builder()
        .route(route)
        .env("TARGET_KEY", "sk-target-own-0123456789")
        .env("ROUTE_KEY", "sk-route-shared-0123456789")
        .start();
    for _ in 0..20 {
        assert_ok(&gw.post("/completions", &hi(&gw, POOL)));
    }
    assert!(!own.requests().is_empty() && !shared.requests().is_empty());
    for request in own.requests() {
        assert_eq!(request.header("api-key"), Some("sk-target-own-0123456789"));
        assert_eq!(request.header("authorization"), None);
    }
    for request in shared.requests() {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-route-shared-0123456789")
        );
    }
}

#[test]
fn a_targets_key_quoted_by_its_upstream_never_reaches_the_caller_or_the_record() {
    let key = "sk-target-secret-9876543210";
    let leaky = OpenAiUpstream::always(Reply::openai_error(
        401,
        &format!("Incorrect API key provided: {key}."),
        "invalid_api_key",
        None,
    ));
    let targets = format!(
        "[{{ base_url = {:?}, api_key_env = \"LEAKY_KEY\" }}]",
        leaky.base_url("/v1")
    );
    let gw = Gateway::builder()
        .route(Route::new(POOL, "openai").key("targets", &targets))
        .env("LEAKY_KEY", key)
        .start();
    let response = gw.post("/completions", &hi(&gw, POOL));
    let id = assert_error(&response, 502, "");
    assert!(!response.text().contains(key), "{}", response.text());
    let record = record(&gw, &id);
    assert!(!record.to_string().contains(key), "{record}");
    assert!(!gw.logs().contains(key), "the key is in the log");
}

#[test]
fn a_target_failing_n_times_in_a_row_is_ejected_and_the_fallback_serves_without_trying_it() {
    let sick = OpenAiUpstream::each_call(server_error("down for good"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &sick), 3, 600), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let mut last = None;
    for _ in 0..20 {
        let response = post(&gw, &hi(&gw, PRIMARY));
        assert_eq!(text_of(&response), "from the backup");
        assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
        last = Some(response);
    }
    // Three failures eject it; eject_secs outlasts the test, so there is no probe.
    assert_eq!(
        sick.requests().len(),
        3,
        "the ejected upstream was still called"
    );
    assert_eq!(backup.requests().len(), 20);
    let record = record(&gw, &invocation_id(&last.expect("answered").json()));
    let attempts = record["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{record}");
    assert_eq!(attempts[0]["route"], json!(PRIMARY), "{record}");
    assert_eq!(attempts[0]["error"], json!("ejected"), "{record}");
    assert_eq!(
        attempts[0]["target"],
        Value::Null,
        "skipped without a try: {record}"
    );
    assert_eq!(attempts[1]["route"], json!(FALLBACK), "{record}");
    assert_eq!(attempts[1]["status"], json!(200), "{record}");
    gw.wait_for_log("upstream ejected", 1);
}

#[test]
fn an_ejected_target_gets_one_probe_after_eject_secs_and_is_back_when_it_answers() {
    let flaky = OpenAiUpstream::script(vec![
        server_error("one"),
        server_error("two"),
        answer("well again"),
        answer("still well"),
    ]);
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &flaky), 2, 1), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    for _ in 0..3 {
        assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    }
    assert_eq!(
        flaky.requests().len(),
        2,
        "the third request went past the ejected upstream"
    );
    std::thread::sleep(Duration::from_millis(1200));
    let probe = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&probe), "well again");
    assert_eq!(probe.header("x-gateway-route"), Some(PRIMARY));
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "still well");
    assert_eq!(flaky.requests().len(), 4);
    gw.wait_for_log("back in rotation", 1);
}

#[test]
fn a_failed_probe_ejects_the_target_again() {
    let sick = OpenAiUpstream::each_call(server_error("still down"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &sick), 1, 1), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    std::thread::sleep(Duration::from_millis(1200));
    for _ in 0..5 {
        assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    }
    // The first failure, then one probe; the other requests found it out again.
    assert_eq!(sick.requests().len(), 2);
}

#[test]
fn a_route_whose_targets_are_all_ejected_and_without_fallbacks_answers_503_with_retry_after() {
    let a = OpenAiUpstream::each_call(server_error("a is down"));
    let b = OpenAiUpstream::each_call(server_error("b is down"));
    let gw = start(vec![ejecting(pool(POOL, &[(&a, 1), (&b, 1)]), 1, 30)]);
    let first = post(&gw, &hi(&gw, POOL));
    assert_error(&first, 502, "2 attempts");
    let response = post(&gw, &hi(&gw, POOL));
    let id = assert_error(&response, 503, "out of rotation");
    let retry_after: u64 = response
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", response.headers));
    assert!((1..=30).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!((a.requests().len(), b.requests().len()), (1, 1));
    let record = record(&gw, &id);
    assert_eq!(record["httpStatus"], json!(503), "{record}");
}

#[test]
fn ejection_outlives_a_config_reload_that_keeps_the_target() {
    let sick = OpenAiUpstream::each_call(server_error("down"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(ejecting(openai(PRIMARY, &sick), 1, 600), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    let original = std::fs::read_to_string(gw.config_path()).expect("read the config");
    let added_route = format!(
        "[providers.added]\nplugin = \"openai\"\nbase_url = {:?}\n",
        backup.base_url("/v1")
    );
    gw.rewrite_config(&format!("{original}\n{added_route}"));
    let deadline = Instant::now() + PATIENCE;
    let added = hi(&gw, "added");
    while post(&gw, &added).status != 200 {
        assert!(
            Instant::now() < deadline,
            "the reload never applied: {}",
            gw.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(text_of(&post(&gw, &hi(&gw, PRIMARY))), "from the backup");
    assert_eq!(
        sick.requests().len(),
        1,
        "the reload put the ejected upstream back"
    );
}

#[test]
fn a_stream_over_targets_moves_to_the_other_target_before_its_first_byte() {
    let sick = OpenAiUpstream::each_call(server_error("this deployment is down"));
    let well = OpenAiUpstream::each_call(Reply::openai_slow_stream(2, Duration::from_millis(2)));
    let gw = start(vec![pool(POOL, &[(&sick, 1), (&well, 1)])]);
    for _ in 0..6 {
        let response = post_stream(&gw, &hi(&gw, POOL));
        let (frames, last) = split_stream(&response);
        assert_eq!(streamed_text(&frames, 0), "w0 w1 ", "{last}");
        let well_addr = well.addr().to_string();
        assert_eq!(
            response.header("x-gateway-target"),
            Some(well_addr.as_str())
        );
    }
    assert_eq!(well.requests().len(), 6);
}
