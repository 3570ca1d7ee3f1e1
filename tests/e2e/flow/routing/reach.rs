//! What a request may reach: fallbacks outside the key's scope skipped (and listed so), the
//! caller's key kept from a fallback on another host, `max_attempts` over the whole chain.

use super::*;

/// A key of the test project made with `flags` (`--routes`, `--models`).
fn scoped_key(gw: &Gateway, flags: &[&str]) -> String {
    let mut args = vec!["key", "create", gw.project_id.as_str()];
    args.extend_from_slice(flags);
    gw.cli(&args).checked(&args.join(" ")).last_line()
}

/// The record's `attempts` as (route, error) pairs: what each try or skip became.
fn outcomes(record: &Value) -> Vec<(String, String)> {
    record["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempts list: {record}"))
        .iter()
        .map(|attempt| {
            let outcome = match attempt["status"].as_u64() {
                Some(status) => status.to_string(),
                None => attempt["error"].as_str().unwrap_or("?").to_owned(),
            };
            (attempt["route"].as_str().unwrap_or("?").to_owned(), outcome)
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(route, outcome)| (route.to_string(), outcome.to_string()))
        .collect()
}

#[test]
fn a_fallback_outside_the_keys_scope_is_skipped_and_listed_as_out_of_scope() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::each_call(answer("from the backup"));
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]),
        // Keyless, so that only the scope can keep it from serving.
        openai(FALLBACK, &backup).key("api_key_required", "false"),
    ]);
    for flags in [
        &["--routes", PRIMARY][..],
        &["--models", &format!("{PRIMARY}/{MODEL}")],
        // The fallback's route is in scope, but not with the model it would be asked for.
        &[
            "--routes",
            PRIMARY,
            "--models",
            &format!("{FALLBACK}/other"),
        ],
    ] {
        let key = scoped_key(&gw, flags);
        let response = gw.post_with_headers(
            "/completions",
            Some(&key),
            &[("Provider-API-Key", PROVIDER_KEY)],
            &hi(&gw, PRIMARY),
        );
        assert_eq!(response.status, 502, "{flags:?}: {}", response.text());
        assert_eq!(response.header("x-gateway-route"), None, "{flags:?}");
        let record = record(&gw, &invocation_id(&response.json()));
        assert_eq!(record["route"], json!(PRIMARY), "{flags:?}: {record}");
        assert_eq!(
            outcomes(&record),
            pairs(&[(PRIMARY, "500"), (FALLBACK, "out_of_scope")]),
            "{flags:?}: {record}"
        );
    }
    assert!(
        backup.requests().is_empty(),
        "a fallback outside the key's scope was called"
    );
    // A key whose scope holds both routes falls back as before.
    let both = scoped_key(&gw, &["--routes", &format!("{PRIMARY},{FALLBACK}")]);
    let response = gw.post_with_headers(
        "/completions",
        Some(&both),
        &[("Provider-API-Key", PROVIDER_KEY)],
        &hi(&gw, PRIMARY),
    );
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
}

#[test]
fn the_callers_key_does_not_reach_a_fallback_on_another_host() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let keyless = OpenAiUpstream::each_call(answer("from the keyless fallback"));
    let own = OpenAiUpstream::each_call(answer("from the fallback with its own key"));
    let var = unique("GATEWAY_TEST_ROUTING_OWN_KEY_");
    let own_key = unique("sk-own-route-");
    let gw = Gateway::builder()
        .route(fallbacks(openai(PRIMARY, &primary), &["keyless", "own"]))
        .route(openai("keyless", &keyless))
        .route(openai("own", &own).api_key_env(&var))
        .env(&var, &own_key)
        .start();
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the fallback with its own key");
    assert!(
        keyless.requests().is_empty(),
        "a fallback without a key of its own got the caller's"
    );
    let sent = own.single_request();
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {own_key}").as_str()),
        "the fallback's own key, not the caller's"
    );
    assert_eq!(
        primary.requests()[0].header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str()),
        "the requested route gets the caller's key"
    );
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(
        outcomes(&record),
        pairs(&[(PRIMARY, "500"), ("keyless", "no_key"), ("own", "200")]),
        "{record}"
    );
}

/// The worst case of issue 23: `retries = 10` on two targets, a fallback of two targets, every
/// upstream answering 500. Each request stops at `max_attempts` (6 by default).
#[test]
fn a_request_makes_at_most_max_attempts_tries_and_the_metric_counts_them() {
    let upstreams: Vec<OpenAiUpstream> = (0..4)
        .map(|_| OpenAiUpstream::always(server_error("down")))
        .collect();
    let calls = || upstreams.iter().map(|u| u.requests().len()).sum::<usize>();
    let gw = start(vec![
        fallbacks(
            retries(pool(POOL, &[(&upstreams[0], 1), (&upstreams[1], 1)]), 10)
                .key("retry_backoff_ms", "1"),
            &[FALLBACK],
        ),
        retries(
            pool(FALLBACK, &[(&upstreams[2], 1), (&upstreams[3], 1)]),
            10,
        )
        .key("retry_backoff_ms", "1")
        .key("api_key_required", "false"),
    ]);
    const REQUESTS: usize = 3;
    for n in 1..=REQUESTS {
        let response = post(&gw, &hi(&gw, POOL));
        assert_eq!(response.status, 502, "{}", response.text());
        assert_eq!(calls(), 6 * n, "upstream calls after {n} requests");
        let body = response.json();
        let message = body["error"].as_str().unwrap_or_default();
        assert_eq!(attempts_named(message), Some(6), "{message}");
        let record = record(&gw, &invocation_id(&body));
        let mut expected = vec![(POOL, "500"); 6];
        expected.push((POOL, "max_attempts"));
        assert_eq!(outcomes(&record), pairs(&expected), "{record}");
    }
    let samples = scrape(&gw, None);
    let attempts = |route, result| {
        value(
            &samples,
            "gateway_attempts_total",
            &[("route", route), ("result", result)],
        )
    };
    assert_eq!(
        attempts(POOL, "500") + attempts(FALLBACK, "500"),
        calls() as f64,
        "every upstream call is counted"
    );
    assert_eq!(attempts(POOL, "max_attempts"), REQUESTS as f64);
}

#[test]
fn the_requested_routes_max_attempts_holds_for_its_fallbacks_too() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let (a, b) = (
        OpenAiUpstream::always(server_error("a is down")),
        OpenAiUpstream::always(server_error("b is down")),
    );
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 1), &[FALLBACK])
            .key("retry_backoff_ms", "1")
            .key("max_attempts", "3"),
        // A fallback's own cap does not count: only the requested route's.
        pool(FALLBACK, &[(&a, 1), (&b, 1)])
            .key("api_key_required", "false")
            .key("max_attempts", "1"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(response.status, 502, "{}", response.text());
    assert_eq!(primary.requests().len(), 2, "the try and its retry");
    assert_eq!(a.requests().len() + b.requests().len(), 1, "the third try");
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(
        outcomes(&record),
        pairs(&[
            (PRIMARY, "500"),
            (PRIMARY, "500"),
            (FALLBACK, "500"),
            (FALLBACK, "max_attempts")
        ]),
        "{record}"
    );
}
