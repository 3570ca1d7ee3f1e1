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

mod in_process;
mod replicas;
mod reservations;

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
    replica_with(db, redis, price, &[])
}

/// [`replica`] with more lines in its config.
fn replica_with(
    db: &TestDatabase,
    redis: &TestRedis,
    price: Option<(f64, f64)>,
    lines: &[&str],
) -> Gateway {
    let mut route = Route::echo("demo");
    if let Some((input, output)) = price {
        route = route.price("echo", input, output);
    }
    let mut builder = Gateway::builder().route(route).database(db);
    for line in redis.config_lines() {
        builder = builder.config_line(&line);
    }
    for line in lines {
        builder = builder.config_line(line);
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
