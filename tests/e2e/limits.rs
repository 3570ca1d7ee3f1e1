//! Rate limits, budgets and key scopes, end to end: real gateway processes, their CLI, the local
//! PostgreSQL and Redis. The replica tests run two gateways on one PostgreSQL database sharing
//! one Redis prefix (skipped, loudly, when either server is unreachable, unless `CI` is set); the
//! rest run one gateway on its default store with counters in process.
//!
//! GCRA buckets start full and refill one request every `60 / rpm` seconds, so the exact counts
//! below hold while a test's burst takes less than that; the counts allow one more request per
//! refill interval the burst actually took (never the case on a sane machine, but a count that
//! the contract allows is not a failure).

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gateway_test_support::{
    AnthropicUpstream, Gateway, GeminiUpstream, OpenAiUpstream, Recording, Reply, Response, Route,
    TestDatabase, TestRedis, assert_error, assert_error_where, assert_ok, chat_request,
    text_request, with,
};
use serde_json::{Value, json};

/// How long a limit change may take to reach a serving gateway (the contract's 1 s), with room
/// for a slow machine: tests that are not about the propagation wait this long after a change.
const APPLIED: Duration = Duration::from_millis(1500);
/// The contract's bound on a limit change reaching every replica.
const PROPAGATION: Duration = Duration::from_secs(1);
/// How long the propagation test watches for a change before calling it lost.
const GIVE_UP: Duration = Duration::from_secs(15);

const REQUEST_HEADERS: [&str; 3] = [
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
];
const TOKEN_HEADERS: [&str; 3] = [
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
];

// ------------------------------------------------------------------ helpers

/// A replica: an echo route `demo` (priced when `price` is given), on `db`, counting in `redis`.
fn replica(db: &TestDatabase, redis: &TestRedis, price: Option<(f64, f64)>) -> Gateway {
    let mut route = Route::echo("demo");
    if let Some((input, output)) = price {
        route = route.price("echo", input, output);
    }
    let mut builder = Gateway::builder().route(route).database(db);
    for line in redis.config_lines() {
        builder = builder.config_line(&line);
    }
    builder.start()
}

/// Two replicas on one fresh database and one fresh Redis prefix; `None` (the test skips) when
/// either server is unreachable outside CI.
fn two_replicas(price: Option<(f64, f64)>) -> Option<(TestDatabase, TestRedis, Gateway, Gateway)> {
    let db = TestDatabase::create()?;
    let redis = TestRedis::create()?;
    let a = replica(&db, &redis, price);
    let b = replica(&db, &redis, price);
    Some((db, redis, a, b))
}

/// Runs a limit command that must succeed, then waits for it to reach the serving gateways.
fn set_limits(gw: &Gateway, args: &[&str]) -> String {
    let out = gw.cli(args).checked(&args.join(" ")).stdout;
    std::thread::sleep(APPLIED);
    out
}

/// A `type: "text"` request on route `demo` of `project`.
fn hello(project: &str, prompt: &str) -> Value {
    text_request(project, "demo", "echo", prompt)
}

/// `POST /completions` with `key`.
fn post(gw: &Gateway, key: &str, body: &Value) -> Response {
    gw.post_as("/completions", Some(key), body)
}

/// Asserts a refusal by a limit: 429, `Retry-After` a whole number of seconds in
/// `1..=max_retry_after`, the exact message, an invocation id. Returns the id.
fn assert_limited(response: &Response, message: &str, max_retry_after: u64) -> String {
    let id = assert_error_where(response, 429, &format!("exactly {message:?}"), |m| {
        m == message
    });
    let retry_after = response
        .header("retry-after")
        .unwrap_or_else(|| panic!("a 429 without Retry-After: {:?}", response.headers));
    let seconds: u64 = retry_after
        .parse()
        .unwrap_or_else(|e| panic!("Retry-After {retry_after:?} is not whole seconds: {e}"));
    assert!(
        (1..=max_retry_after).contains(&seconds),
        "Retry-After {seconds} is not in 1..={max_retry_after}"
    );
    id
}

/// The record of `id` through `GET /invocations/{id}` with `key`, waiting for it to land (records
/// are written off the request path).
fn record_via_api(gw: &Gateway, key: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = gw.get(&format!("/invocations/{id}"), Some(key));
        if response.status == 200 {
            return response.json();
        }
        assert!(
            Instant::now() < deadline,
            "no record of {id}: {} {}",
            response.status,
            response.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The record of the refused request `id` says it was rate limited with a 429.
fn assert_rate_limited_record(gw: &Gateway, key: &str, id: &str) {
    let record = record_via_api(gw, key, id);
    assert_eq!(record["status"], json!("rate_limited"), "{record}");
    assert_eq!(record["httpStatus"], json!(429), "{record}");
}

/// How many requests a bucket of `burst` refilled every `interval` may admit over `elapsed`.
fn admissible(burst: usize, interval: Duration, elapsed: Duration) -> usize {
    let refills = elapsed.as_millis() / interval.as_millis().max(1);
    burst + usize::try_from(refills).unwrap_or(usize::MAX)
}

/// Header `name` as an integer; panics when absent or not one.
fn header_number(response: &Response, name: &str) -> i64 {
    let value = response
        .header(name)
        .unwrap_or_else(|| panic!("no {name} header: {:?}", response.headers));
    value
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {value:?} is not an integer: {e}"))
}

/// Seconds of a Go-style duration (`6s`, `6m0s`, `1h2m3.5s`, `250ms`); `None` when it is not one.
fn go_duration_secs(text: &str) -> Option<f64> {
    let mut rest = text;
    let mut total = 0.0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&n| n > 0)?;
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let (unit, scale) = [
            ("ns", 1e-9),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("ms", 1e-3),
            ("h", 3600.0),
            ("m", 60.0),
            ("s", 1.0),
        ]
        .into_iter()
        .find(|(unit, _)| rest.starts_with(unit))?;
        total += number * scale;
        rest = &rest[unit.len()..];
    }
    Some(total)
}

/// Header `name` is a Go-style duration of at most `max`.
fn assert_reset(response: &Response, name: &str, max: Duration) {
    let value = response
        .header(name)
        .unwrap_or_else(|| panic!("no {name} header: {:?}", response.headers));
    let secs = go_duration_secs(value)
        .unwrap_or_else(|| panic!("{name}: {value:?} is not a duration like 6s or 6m0s"));
    assert!(
        secs >= 0.0 && secs <= max.as_secs_f64(),
        "{name}: {value:?} is not within {max:?}"
    );
}

fn assert_no_headers(headers: &[(String, String)], names: &[&str], why: &str) {
    for name in names {
        assert!(
            !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)),
            "{name} present {why}: {headers:?}"
        );
    }
}

// ------------------------------------------------------------------ TestRedis itself

#[test]
fn test_redis_gives_each_test_a_prefix_and_deletes_its_keys_on_drop() {
    let Some(first) = TestRedis::create() else {
        return;
    };
    let Some(second) = TestRedis::create() else {
        return;
    };
    assert_ne!(first.prefix(), second.prefix());
    assert!(first.prefix().starts_with("gwtest:"), "{}", first.prefix());
    for i in 0..3 {
        let key = format!("{}k{i}", first.prefix());
        first.command(&["SET", &key, "1"]);
    }
    let other = format!("{}k", second.prefix());
    second.command(&["SET", &other, "1"]);
    assert_eq!(first.keys().len(), 3, "{:?}", first.keys());
    let url = first.url().to_owned();
    let prefix = first.prefix().to_owned();
    drop(first);
    // Another handle on the same server sees that only the dropped prefix was emptied.
    assert_eq!(
        second.command(&["EXISTS", &format!("{prefix}k0")]),
        gateway_test_support::redis::Reply::Integer(0),
        "keys under {prefix} on {url} survived the drop"
    );
    assert_eq!(second.keys(), vec![other]);
}

// ------------------------------------------------------------------ two replicas, one Redis

#[test]
fn a_project_rpm_is_shared_by_two_replicas_through_redis() {
    let Some((_db, redis, a, b)) = two_replicas(None) else {
        return;
    };
    set_limits(&a, &["project", "limit", &a.project_id, "--rpm", "10"]);
    let body = hello(&a.project_id, "hi");
    let started = Instant::now();
    let responses: Vec<(usize, Response)> = (0..30)
        .map(|i| (i % 2, post([&a, &b][i % 2], &a.key, &body)))
        .collect();
    let elapsed = started.elapsed();

    let passed: Vec<usize> = (0..30).filter(|&i| responses[i].1.status == 200).collect();
    println!(
        "rpm 10 over two replicas: {} of 30 passed in {elapsed:?}: {passed:?}",
        passed.len()
    );
    let most = admissible(10, Duration::from_secs(6), elapsed);
    assert!(
        (10..=most).contains(&passed.len()),
        "{} of 30 requests passed a shared rpm of 10 (expected 10{})",
        passed.len(),
        if most > 10 {
            format!(" to {most}")
        } else {
            String::new()
        }
    );
    // A full bucket admits the burst first: the first ten, from both replicas alike.
    assert_eq!(passed[..10], (0..10).collect::<Vec<_>>());
    let mut refused_by = [0, 0];
    for (replica, response) in &responses {
        if response.status == 200 {
            assert_ok(response);
            continue;
        }
        let id = assert_limited(
            response,
            "project rate limit of 10 requests per minute reached",
            60,
        );
        let gw = [&a, &b][*replica];
        assert_rate_limited_record(gw, &a.key, &id);
        refused_by[*replica] += 1;
    }
    assert!(
        refused_by.iter().all(|&n| n > 0),
        "both replicas should refuse: {refused_by:?}"
    );
    assert!(
        !redis.keys().is_empty(),
        "nothing was counted in Redis under {}",
        redis.prefix()
    );
}

#[test]
fn a_keys_rpm_is_shared_by_two_replicas_and_other_keys_are_unaffected() {
    let Some((_db, _redis, a, b)) = two_replicas(None) else {
        return;
    };
    let limited = a
        .cli(&["key", "create", &a.project_id, "--rpm", "5"])
        .checked("key create --rpm 5")
        .last_line();
    std::thread::sleep(APPLIED);
    let body = hello(&a.project_id, "hi");
    let started = Instant::now();
    let responses: Vec<(usize, Response)> = (0..20)
        .map(|i| (i % 2, post([&a, &b][i % 2], &limited, &body)))
        .collect();
    let elapsed = started.elapsed();
    let passed = responses.iter().filter(|(_, r)| r.status == 200).count();
    println!("key rpm 5 over two replicas: {passed} of 20 passed in {elapsed:?}");
    let most = admissible(5, Duration::from_secs(12), elapsed);
    assert!(
        (5..=most).contains(&passed),
        "{passed} of 20 requests passed a key rpm of 5"
    );
    for (replica, response) in &responses {
        if response.status != 200 {
            let id = assert_limited(
                response,
                "key rate limit of 5 requests per minute reached",
                60,
            );
            assert_rate_limited_record([&a, &b][*replica], &a.key, &id);
        }
    }
    // The project's other key has no limit of its own and the project none at all.
    for gw in [&a, &b, &a, &b, &a, &b] {
        let response = post(gw, &a.key, &body);
        assert_ok(&response);
        assert_no_headers(&response.headers, &REQUEST_HEADERS, "without a limit");
    }
}

#[test]
fn a_daily_budget_shared_by_two_replicas_stops_requests_once_spent() {
    // One word in, one word out at $1500 per million tokens each way: $0.003 a request, so
    // a $0.01 budget is reached by the fourth request (spent $0.012, over by less than one).
    let Some((_db, _redis, a, b)) = two_replicas(Some((1500.0, 1500.0))) else {
        return;
    };
    let budget = 0.01;
    let body = hello(&a.project_id, "hi");
    let first = assert_ok(&post(&a, &a.key, &body));
    let id = first["invocationId"].as_str().expect("invocationId");
    let cost = record_via_api(&a, &a.key, id)["usageCost"]
        .as_f64()
        .expect("a priced route records usageCost");
    assert!((cost - 0.003).abs() < 1e-9, "one request costs {cost}");

    set_limits(
        &a,
        &[
            "project",
            "limit",
            &a.project_id,
            "--daily-budget-usd",
            "0.01",
        ],
    );
    let mut spent = cost;
    let mut refused = Vec::new();
    for i in 0..12 {
        let gw = [&b, &a][i % 2];
        let response = post(gw, &a.key, &body);
        if response.status == 200 {
            assert!(
                refused.is_empty(),
                "request {i} passed after a refusal: the budget cannot have grown"
            );
            let answer = assert_ok(&response);
            let id = answer["invocationId"].as_str().expect("invocationId");
            spent += record_via_api(gw, &a.key, id)["usageCost"]
                .as_f64()
                .expect("usageCost");
        } else {
            let id = assert_limited(&response, "project daily budget of $0.01 reached", 86_400);
            assert_rate_limited_record(gw, &a.key, &id);
            refused.push(i);
        }
    }
    println!("spent ${spent:.4} of a ${budget} daily budget; refused: {refused:?}");
    assert!(!refused.is_empty(), "the budget never stopped a request");
    assert!(
        spent >= budget - 1e-9,
        "refused with ${spent} spent of ${budget}"
    );
    assert!(
        spent < budget + cost + 1e-9,
        "sequential requests overspent the ${budget} budget: ${spent} (one costs ${cost})"
    );
}

/// 50 requests at once under `limit` (a CLI flag and its value, set on a fresh key), spread
/// over `gateways`: each costs 10 tokens and $0.01 (5 in, 5 out at $1,000 per million each
/// way), and its estimate says so (20 bytes of prompt, `max_tokens` 5); the upstream takes
/// a second to answer, so all 50 are in flight together. Returns how many were served.
fn fifty_at_once(gateways: &[&Gateway], upstream_url_route: &str, limit: [&str; 2]) -> usize {
    let gw = gateways[0];
    let key = gw
        .cli(&["key", "create", &gw.project_id, limit[0], limit[1]])
        .checked("key create")
        .last_line();
    std::thread::sleep(APPLIED);
    let body = json!({
        "model": format!("{upstream_url_route}/gpt-x"),
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "abcd efgh ijkl mnopq"}],
    });
    let responses: Vec<Response> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..50)
            .map(|i| {
                let (gw, key, body) = (gateways[i % gateways.len()], &key, &body);
                scope.spawn(move || {
                    gw.post_with_headers(
                        "/v1/chat/completions",
                        Some(key),
                        &[("Provider-API-Key", "sk-test")],
                        body,
                    )
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|call| call.join().expect("a request thread"))
            .collect()
    });
    let served = responses.iter().filter(|r| r.status == 200).count();
    let message = match limit[0] {
        "--daily-budget-usd" => "key daily budget of $0.015 reached",
        _ => "key rate limit of 25 tokens per minute reached",
    };
    for response in responses.iter().filter(|r| r.status != 200) {
        assert_eq!(response.status, 429, "{}", response.text());
        assert_eq!(response.json()["error"]["message"], json!(message));
        assert!(response.header("retry-after").is_some());
    }
    println!("{limit:?}: {served} of 50 served");
    served
}

/// The route of [`fifty_at_once`]: OpenAI's API on `upstream`, answering each call after a
/// second with 5 + 5 tokens.
fn slow_priced_route(upstream: &OpenAiUpstream) -> Route {
    Route::openai("oai", &upstream.base_url("/v1")).price("gpt-x", 1000.0, 1000.0)
}

fn slow_upstream() -> OpenAiUpstream {
    let usage = json!({"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10});
    OpenAiUpstream::each_call(
        Reply::openai_answer("gpt-x", "one two three four five", usage)
            .slowly(Duration::from_secs(1)),
    )
}

#[test]
fn fifty_requests_at_once_overshoot_a_budget_or_tpm_by_at_most_one_request() {
    // The case: $0.015 at $0.01 a call, 25 tokens a minute at 10 a call. Without
    // reservations all 50 passed the same check; with them, two fit.
    let upstream = slow_upstream();
    let gw = Gateway::builder()
        .route(slow_priced_route(&upstream))
        .start();
    for limit in [["--daily-budget-usd", "0.015"], ["--tpm", "25"]] {
        let served = fifty_at_once(&[&gw], "oai", limit);
        assert!(
            (1..=2).contains(&served),
            "{limit:?}: {served} of 50 served"
        );
    }
}

#[test]
fn fifty_requests_at_once_over_two_replicas_overshoot_by_at_most_one_request() {
    let upstream = slow_upstream();
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let Some(redis) = TestRedis::create() else {
        return;
    };
    let start = || {
        let mut builder = Gateway::builder()
            .route(slow_priced_route(&upstream))
            .database(&db);
        for line in redis.config_lines() {
            builder = builder.config_line(&line);
        }
        builder.start()
    };
    let (a, b) = (start(), start());
    for limit in [["--daily-budget-usd", "0.015"], ["--tpm", "25"]] {
        let served = fifty_at_once(&[&a, &b], "oai", limit);
        assert!(
            (1..=2).contains(&served),
            "{limit:?}: {served} of 50 served"
        );
    }
}

#[test]
fn a_failed_request_gives_its_reservation_back() {
    // Each request reserves $0.01 of a $0.015 budget; failing, it uses nothing. If failures
    // kept their reservations the second request would be refused.
    let upstream =
        OpenAiUpstream::each_call(Reply::openai_error(500, "down", "server_error", None));
    let gw = Gateway::builder()
        .route(Route::openai("oai", &upstream.base_url("/v1")).price("gpt-x", 1000.0, 1000.0))
        .start();
    set_limits(
        &gw,
        &[
            "project",
            "limit",
            &gw.project_id,
            "--daily-budget-usd",
            "0.015",
        ],
    );
    let body = json!({
        "model": "oai/gpt-x",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "abcd efgh ijkl mnopq"}],
    });
    for i in 0..5 {
        let response = gw.post_with_headers(
            "/v1/chat/completions",
            Some(&gw.key),
            &[("Provider-API-Key", "sk-test")],
            &body,
        );
        assert_ne!(response.status, 429, "request {i}: {}", response.text());
        assert!(response.status >= 500, "request {i}: {}", response.text());
    }
    assert_eq!(upstream.requests().len(), 5);
}

#[test]
fn a_limit_change_reaches_both_replicas_within_1s() {
    let Some((_db, _redis, a, b)) = two_replicas(None) else {
        return;
    };
    set_limits(&a, &["project", "limit", &a.project_id, "--rpm", "1000"]);
    let load = Load::start([&a, &b], &a.key, hello(&a.project_id, "hi"));
    load.wait_for("both replicas serving under rpm 1000", |events| {
        (0..2).all(|r| {
            events
                .iter()
                .any(|e| e.replica == r && e.status == 200 && e.limit.as_deref() == Some("1000"))
        })
    });
    assert!(
        load.events().iter().all(|e| e.status == 200),
        "refusals under rpm 1000: {:?}",
        load.events().iter().find(|e| e.status != 200)
    );

    // From the moment the change is committed (the CLI has returned).
    b.cli(&["project", "limit", &a.project_id, "--rpm", "1"])
        .checked("project limit --rpm 1");
    let limited_at = Instant::now();
    let refused = load.first_after(limited_at, |e| e.status == 429);
    b.cli(&["project", "limit", &a.project_id, "--rpm", "0"])
        .checked("project limit --rpm 0");
    let cleared_at = Instant::now();
    let served = load.first_after(cleared_at, |e| e.status == 200 && e.limit.is_none());
    let events = load.stop();
    println!(
        "rpm 1 refused after: A {:?}, B {:?}; rpm 0 served again after: A {:?}, B {:?} \
         ({} requests)",
        refused[0],
        refused[1],
        served[0],
        served[1],
        events.len()
    );
    for (what, times) in [("rpm 1 refused", refused), ("rpm 0 served", served)] {
        for (name, after) in ["A", "B"].into_iter().zip(times) {
            let after = after.unwrap_or_else(|| {
                panic!("{what}: replica {name} did not change within {GIVE_UP:?}")
            });
            assert!(
                after < PROPAGATION,
                "{what}: replica {name} changed only after {after:?}"
            );
        }
    }
    // Once cleared, no limit applies: the last answers carry no rate-limit headers.
    let last = events.last().expect("events");
    assert_eq!(last.status, 200);
    assert_eq!(last.limit, None, "a cleared limit still reported");
}

// ------------------------------------------------------------------ one gateway, in process

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

// ------------------------------------------------------------------ load for the propagation test

/// One answer the load saw.
#[derive(Debug, Clone)]
struct Event {
    at: Instant,
    replica: usize,
    status: u16,
    /// `x-ratelimit-limit-requests`, when present.
    limit: Option<String>,
}

/// One client thread sending to two replicas in turn until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    events: Arc<Mutex<Vec<Event>>>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    fn start(replicas: [&Gateway; 2], key: &str, body: Value) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(Mutex::new(Vec::new()));
        let addrs = [replicas[0].addr, replicas[1].addr];
        let key = key.to_owned();
        let body = body.to_string();
        let thread = {
            let stop = stop.clone();
            let events = events.clone();
            std::thread::spawn(move || {
                let mut turn = 0;
                while !stop.load(Ordering::SeqCst) {
                    let replica = turn % 2;
                    turn += 1;
                    let response = gateway_test_support::client::request(
                        addrs[replica],
                        "POST",
                        "/completions",
                        &[
                            ("Content-Type", "application/json"),
                            ("Authorization", key.as_str()),
                        ],
                        body.as_bytes(),
                    );
                    let event = Event {
                        at: Instant::now(),
                        replica,
                        status: response.status,
                        limit: response
                            .header("x-ratelimit-limit-requests")
                            .map(str::to_owned),
                    };
                    events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
                }
            })
        };
        Load {
            stop,
            events,
            thread: Some(thread),
        }
    }

    fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits (up to [`GIVE_UP`]) until `condition` holds of the events so far.
    fn wait_for(&self, what: &str, condition: impl Fn(&[Event]) -> bool) {
        let deadline = Instant::now() + GIVE_UP;
        while !condition(&self.events()) {
            assert!(Instant::now() < deadline, "gave up waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// For each replica, how long after `since` it first answered as `wanted` (answered, not
    /// sent: a request sent before `since` may show the change too, which is fine); `None` when
    /// it did not within [`GIVE_UP`].
    fn first_after(
        &self,
        since: Instant,
        wanted: impl Fn(&Event) -> bool,
    ) -> [Option<Duration>; 2] {
        let deadline = since + GIVE_UP;
        loop {
            let events = self.events();
            let found = [0, 1].map(|replica| {
                events
                    .iter()
                    .find(|e| e.replica == replica && e.at >= since && wanted(e))
                    .map(|e| e.at - since)
            });
            if found.iter().all(Option::is_some) || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stop(mut self) -> Vec<Event> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the load thread");
        }
        self.events()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn go_durations_parse() {
    assert_eq!(go_duration_secs("6s"), Some(6.0));
    assert_eq!(go_duration_secs("6m0s"), Some(360.0));
    assert_eq!(go_duration_secs("1h2m3.5s"), Some(3723.5));
    assert_eq!(go_duration_secs("250ms"), Some(0.25));
    for bad in ["", "6", "s", "6x", "six seconds"] {
        assert_eq!(go_duration_secs(bad), None, "{bad:?}");
    }
}

// ------------------------------------------- the output limit: what is reserved is what is sent

/// What a model's default may let it write when a request sets no bound.
const UNBOUNDED: u64 = 100_000;

/// The largest of the counts at `paths` of `body` (a number each), `default` when none is set.
fn largest(body: &Value, paths: &[&[&str]], default: u64) -> u64 {
    let values = paths.iter().filter_map(|path| {
        let at = path.iter().try_fold(body, |v, key| v.get(key))?;
        at.as_u64()
    });
    values.max().unwrap_or(default)
}

/// A model that writes all it is allowed, slowly (so that 50 calls are in flight together): the
/// completion tokens of its answer are every token the upstream body allows, under any name the
/// provider reads, for each choice it asks for.
fn greedy(provider: &str, request: &gateway_test_support::ReceivedRequest) -> Reply {
    let body = request.json();
    let reply = match provider {
        "openai" => {
            let each = largest(
                &body,
                &[&["max_completion_tokens"], &["max_tokens"]],
                UNBOUNDED,
            );
            let tokens = each * largest(&body, &[&["n"], &["best_of"]], 1);
            Reply::openai_answer(
                "gpt-x",
                "all I could",
                json!({"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": tokens + 5}),
            )
        }
        "anthropic" => {
            let tokens = largest(
                &body,
                &[&["max_tokens"], &["max_tokens_to_sample"]],
                UNBOUNDED,
            );
            Reply::json(
                200,
                &json!({"id": "msg_1", "type": "message", "role": "assistant",
                    "model": "claude-x", "content": [{"type": "text", "text": "all I could"}],
                    "stop_reason": "max_tokens", "stop_sequence": null,
                    "usage": {"input_tokens": 5, "output_tokens": tokens}}),
            )
        }
        _ => {
            let config = &body["generationConfig"];
            let each = largest(
                config,
                &[&["maxOutputTokens"], &["max_output_tokens"]],
                UNBOUNDED,
            );
            let tokens = each * largest(config, &[&["candidateCount"], &["candidate_count"]], 1);
            Reply::json(
                200,
                &json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "all I could"}]},
                        "finishReason": "MAX_TOKENS", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": tokens,
                        "totalTokenCount": tokens + 5},
                    "modelVersion": "gemini-x"}),
            )
        }
    };
    reply.slowly(Duration::from_secs(1))
}

/// One way a caller may ask for more than it names in `max_tokens`: a request to `path` of
/// `body`, which the gateway must reserve (and the upstream be asked for) `reserved` completion
/// tokens for.
struct Asking {
    what: &'static str,
    path: &'static str,
    body: Value,
    reserved: u64,
}

fn askings() -> Vec<Asking> {
    let messages = json!([{"role": "user", "content": "abcd efgh ijkl mnopq"}]);
    vec![
        Asking {
            // Anthropic's plugin raised `max_tokens` above the budget: 34,096 sent, 1 reserved.
            what: "a thinking budget over max_tokens (Anthropic's surface)",
            path: "/v1/messages",
            body: json!({"model": "ant/claude-x", "max_tokens": 1, "messages": messages,
                "thinking": {"type": "enabled", "budget_tokens": 30000}}),
            reserved: 30_000 + 4096,
        },
        Asking {
            what: "reasoning_effort (OpenAI's surface, an Anthropic route)",
            path: "/v1/chat/completions",
            body: json!({"model": "ant/claude-x", "max_tokens": 3000, "messages": messages,
                "reasoning_effort": "high"}),
            reserved: 3000,
        },
        Asking {
            what: "reasoning.effort (the Responses API, an Anthropic route)",
            path: "/v1/responses",
            body: json!({"model": "ant/claude-x", "max_output_tokens": 3000, "store": false,
                "input": "abcd efgh ijkl mnopq", "reasoning": {"effort": "high"}}),
            reserved: 3000,
        },
        Asking {
            what: "max_tokens_to_sample (Anthropic's legacy name)",
            path: "/v1/chat/completions",
            body: json!({"model": "ant/claude-x", "messages": messages,
                "max_tokens_to_sample": 100000}),
            reserved: 4096,
        },
        Asking {
            what: "Gemini's own generationConfig (maxOutputTokens, candidateCount)",
            path: "/v1/chat/completions",
            body: json!({"model": "gem/gemini-x", "max_tokens": 100, "messages": messages,
                "generationConfig": {"max_output_tokens": 50000, "candidateCount": 8}}),
            reserved: 100,
        },
        Asking {
            what: "no max_tokens at all (an OpenAI route)",
            path: "/v1/chat/completions",
            body: json!({"model": "oai/gpt-x", "messages": messages}),
            reserved: 4096,
        },
    ]
}

/// A gateway with a greedy upstream of each plugin, priced at $1 per million tokens each way.
fn greedy_gateway(
    upstreams: &(OpenAiUpstream, AnthropicUpstream, GeminiUpstream),
    redis: Option<&TestRedis>,
) -> Gateway {
    let (openai, anthropic, gemini) = upstreams;
    let mut builder = Gateway::builder()
        .route(Route::openai("oai", &openai.base_url("/v1")).price("gpt-x", 1.0, 1.0))
        .route(
            Route::new("ant", "anthropic")
                .base_url(&anthropic.base_url("/v1"))
                .price("claude-x", 1.0, 1.0),
        )
        .route(
            Route::new("gem", "gemini")
                .base_url(&gemini.base_url("/v1beta"))
                .price("gemini-x", 1.0, 1.0),
        );
    for line in redis.map(TestRedis::config_lines).into_iter().flatten() {
        builder = builder.config_line(&line);
    }
    builder.start()
}

fn greedy_upstreams() -> (OpenAiUpstream, AnthropicUpstream, GeminiUpstream) {
    (
        OpenAiUpstream::computing(|r| greedy("openai", r)),
        AnthropicUpstream::computing(|r| greedy("anthropic", r)),
        GeminiUpstream::computing(|r| greedy("gemini", r)),
    )
}

/// 50 requests of `asking` at once on a fresh key with room for 1.5 of its reservations (a
/// daily budget, or tokens a minute): at most two may be served, and what they spent passes the
/// limit by at most one reservation (a budget admits a request while it is not reached; each
/// reservation covers all its answer may hold, and only the prompt's estimate may miss by a few
/// tokens).
fn fifty_greedy_at_once(gw: &Gateway, asking: &Asking, tpm: bool) {
    let room = asking.reserved * 3 / 2;
    let (flag, value) = if tpm {
        ("--tpm", room.to_string())
    } else {
        ("--daily-budget-usd", format!("{}", room as f64 / 1e6))
    };
    let key = gw
        .cli(&["key", "create", &gw.project_id, flag, &value])
        .checked("key create")
        .last_line();
    std::thread::sleep(APPLIED);
    let responses: Vec<Response> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..50)
            .map(|_| {
                let (key, asking) = (&key, &asking);
                scope.spawn(move || {
                    let auth = format!("Bearer {key}");
                    let headers = [
                        ("Authorization", auth.as_str()),
                        ("Provider-API-Key", "sk-test"),
                    ];
                    gw.post_with_headers(asking.path, None, &headers, &asking.body)
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|call| call.join().expect("a request thread"))
            .collect()
    });
    let served: Vec<&Response> = responses.iter().filter(|r| r.status == 200).collect();
    for refused in responses.iter().filter(|r| r.status != 200) {
        assert_eq!(refused.status, 429, "{}: {}", asking.what, refused.text());
    }
    let spent_usd: f64 = served
        .iter()
        .map(|r| {
            r.header("x-gateway-cost-usd")
                .and_then(|cost| cost.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("{}: no cost header", asking.what))
        })
        .sum();
    // $1 per million each way: dollars x 1e6 are the tokens spent, prompt and answer.
    let spent_tokens = spent_usd * 1e6;
    println!(
        "{} ({}): {} of 50 served, ~{spent_tokens:.0} tokens spent under a limit of {room}",
        asking.what,
        if tpm { "tpm" } else { "budget" },
        served.len()
    );
    assert!(
        served.len() <= 2,
        "{}: {} served",
        asking.what,
        served.len()
    );
    assert!(
        spent_tokens <= (room + asking.reserved) as f64 + 100.0,
        "{}: {spent_tokens:.0} tokens spent under a limit of {room}, {} a request",
        asking.what,
        asking.reserved
    );
}

#[test]
fn fifty_requests_at_once_spend_no_more_than_reserved_whatever_the_caller_sends() {
    let upstreams = greedy_upstreams();
    let gw = greedy_gateway(&upstreams, None);
    for asking in askings() {
        fifty_greedy_at_once(&gw, &asking, false);
        fifty_greedy_at_once(&gw, &asking, true);
    }
}

#[test]
fn fifty_requests_at_once_with_redis_spend_no_more_than_reserved_whatever_the_caller_sends() {
    let Some(redis) = TestRedis::create() else {
        return;
    };
    let upstreams = greedy_upstreams();
    let gw = greedy_gateway(&upstreams, Some(&redis));
    for asking in askings() {
        fifty_greedy_at_once(&gw, &asking, false);
        fifty_greedy_at_once(&gw, &asking, true);
    }
}

/// What the upstream was asked for is what the limit's reservation took: the tokens-a-minute
/// headers of one request tell its reservation, the upstream's body what it was allowed.
#[test]
fn the_upstream_is_asked_for_exactly_what_was_reserved() {
    let upstreams = greedy_upstreams();
    let gw = greedy_gateway(&upstreams, None);
    for asking in askings() {
        let key = gw
            .cli(&["key", "create", &gw.project_id, "--tpm", "10000000"])
            .checked("key create")
            .last_line();
        std::thread::sleep(APPLIED);
        let auth = format!("Bearer {key}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("Provider-API-Key", "sk-test"),
        ];
        let response = gw.post_with_headers(asking.path, None, &headers, &asking.body);
        assert_eq!(response.status, 200, "{}: {}", asking.what, response.text());
        let cost = response.header("x-gateway-cost-usd").unwrap_or_default();
        let spent = (cost.parse::<f64>().unwrap_or(0.0) * 1e6).round() as u64;
        // 5 prompt tokens (the fake's) and the answer the upstream was allowed.
        assert_eq!(spent, 5 + asking.reserved, "{}", asking.what);
        // The reservation: that answer, and the prompt's estimate (its bytes / 4).
        let reserved = 10_000_000 - header_number(&response, "x-ratelimit-remaining-tokens");
        let prompt_estimate = reserved - asking.reserved as i64;
        assert!(
            (1..50).contains(&prompt_estimate),
            "{}: reserved {reserved} for an answer of {}",
            asking.what,
            asking.reserved
        );
    }
}
