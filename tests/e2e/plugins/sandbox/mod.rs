//! The sandbox against a hostile plugin (`tests/plugins/hostile`): each
//! attack costs its own request (the right status, an invocation id, a
//! recorded error) and nothing else: the gateway keeps serving other routes
//! while it runs and afterwards, and its memory comes back to its baseline.
//!
//! Every hostile route gets small limits ([`Limits::default`]) so the suite
//! stays fast. The figures the closing note needs (latency of other
//! routes during an attack, RSS before, at peak and after) are printed to
//! stderr as `[sandbox figure]` lines: run with `--nocapture` to see them.
//! Nothing is asserted about time.

use std::net::TcpListener;
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

use gateway_test_support::probe::{MIB, RssSampler, max, median, mib, rss_bytes, settle_rss};
use gateway_test_support::scrape;
use gateway_test_support::upstream::hostile::{self, HostileUpstream};
use gateway_test_support::upstream::{OpenAiUpstream, fake_embedding};
use gateway_test_support::{
    Connection, Gateway, Response, Route, assert_crash_logged_once, assert_error_where, assert_ok,
    built_plugins_dir, embeddings_request, post_with_provider_key, split_stream, streamed_text,
    text_request, unique, with, with_param,
};
use serde_json::{Value, json};

mod capacity;
mod crashes;
mod network;
mod reporting;
mod resources;

/// The hostile plugin's route with the suite's limits.
const HOSTILE: &str = "hostile";
/// The well-behaved route that must keep working: the echo plugin.
const DEMO: &str = "demo";
/// The environment variable holding the hostile routes' provider key (the
/// gateway requires one for routes with a `base_url`; the plugin ignores it).
const KEY_VAR: &str = "HOSTILE_TEST_PROVIDER_KEY";
/// How far above its baseline the gateway's RSS may stay after an attack.
const RSS_SLACK: u64 = 64 * MIB;
/// How long the RSS may take to come back down (a liveness bound, not a
/// timing assertion).
const RSS_PATIENCE: Duration = Duration::from_secs(10);
/// Longest wait for a record to be written, or a connection to be closed.
const PATIENCE: Duration = Duration::from_secs(60);
/// Longest wait for a log line (logs are written as things happen; the test
/// only waits for the pipe to deliver them).
const LOG_PATIENCE: Duration = Duration::from_secs(10);

/// A route's sandbox limits (the config keys of the same names).
#[derive(Debug, Clone, Copy)]
struct Limits {
    cpu_time_ms: u64,
    memory_limit_mb: u64,
    idle_timeout_ms: u64,
    timeout_secs: u64,
    max_response_bytes: u64,
    max_http_requests: u64,
}

impl Default for Limits {
    /// Small limits: every attack hits one within a second or so.
    fn default() -> Limits {
        Limits {
            cpu_time_ms: 500,
            memory_limit_mb: 32,
            idle_timeout_ms: 1000,
            timeout_secs: 5,
            max_response_bytes: 1024 * 1024,
            max_http_requests: 32,
        }
    }
}

/// A route served by the hostile plugin.
fn hostile_route(id: &str, base_url: &str, limits: Limits) -> Route {
    Route::new(id, "hostile")
        .base_url(base_url)
        .api_key_env(KEY_VAR)
        .timeout_secs(limits.timeout_secs)
        .key("cpu_time_ms", &limits.cpu_time_ms.to_string())
        .key("memory_limit_mb", &limits.memory_limit_mb.to_string())
        .key("idle_timeout_ms", &limits.idle_timeout_ms.to_string())
        .key("max_response_bytes", &limits.max_response_bytes.to_string())
        .key("max_http_requests", &limits.max_http_requests.to_string())
}

/// A gateway with the echo route `demo`, the hostile route `hostile` (default
/// limits) against `upstream`, and `extra` routes.
fn start(upstream: &HostileUpstream, extra: Vec<Route>) -> Gateway {
    let plugin = built_plugins_dir().join("hostile.wasm");
    assert!(
        plugin.is_file(),
        "{} is missing: build the plugins first with `cargo xtask plugins`",
        plugin.display()
    );
    let mut builder = Gateway::builder()
        .env(KEY_VAR, "hostile-test-key")
        .route(Route::echo(DEMO))
        .route(hostile_route(
            HOSTILE,
            &upstream.base_url("/v1"),
            Limits::default(),
        ));
    for route in extra {
        builder = builder.route(route);
    }
    builder.start()
}

/// A text completion of `model` on `route`.
fn ask(gw: &Gateway, route: &str, model: &str) -> Value {
    text_request(&gw.project_id, route, model, "hi")
}

/// Joins a scoped thread, passing its panic on.
fn join<T>(handle: ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// `GET /invocations/{id}`, waiting for the record to be written (records
/// are written in batches, off the request path).
fn recorded(gw: &Gateway, id: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = gw.get_invocation(id);
        if response.status == 200 {
            return response.json();
        }
        assert!(
            response.status == 404 && Instant::now() < deadline,
            "GET /invocations/{id} answered {}: {}",
            response.status,
            response.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts the invocation `id` is recorded as an error with `status`.
fn assert_error_recorded(gw: &Gateway, id: &str, status: u16) -> Value {
    let record = recorded(gw, id);
    assert_eq!(record["id"], json!(id), "{record}");
    assert_eq!(record["status"], json!("error"), "{record}");
    assert_eq!(record["httpStatus"], json!(status), "{record}");
    record
}

/// Asserts an error answer with `status` whose `error` mentions one of
/// `needles` (case-insensitively), with an `invocationId` (also in the
/// `x-invocation-id` header) recorded as an error with that status. Returns
/// the invocation id.
fn expect_failure(gw: &Gateway, response: &Response, status: u16, needles: &[&str]) -> String {
    let id = assert_error_where(
        response,
        status,
        &format!("one of {needles:?}"),
        |message| {
            let lower = message.to_lowercase();
            needles
                .iter()
                .any(|needle| lower.contains(&needle.to_lowercase()))
        },
    );
    assert_error_recorded(gw, &id, status);
    id
}

/// One echo completion on the `demo` route: asserts it answered `prompt`,
/// returns how long it took.
fn echo_once(gw: &Gateway, prompt: &str) -> Duration {
    let body = text_request(&gw.project_id, DEMO, "echo", prompt);
    let started = Instant::now();
    let response = gw.post("/completions", &body);
    let took = started.elapsed();
    let answer = assert_ok(&response);
    assert_eq!(answer["choices"][0]["text"], json!(prompt), "{answer}");
    took
}

/// `name{labels}` in a scrape of `gw`'s `/metrics` (0 when the series is absent).
fn metric(gw: &Gateway, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape::value(&scrape::scrape(gw, None), name, labels)
}

/// Polls until `name{labels}` reads `want` (what it measures happens off the test's thread).
/// A counter (`_total`) past `want` never comes back to it: that fails at once, not after the
/// whole patience.
fn metric_reaches(gw: &Gateway, name: &str, labels: &[(&str, &str)], want: f64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = metric(gw, name, labels);
        if got == want {
            return;
        }
        assert!(
            !(name.ends_with("_total") && got > want),
            "{name}{labels:?} went past {want} to {got}"
        );
        assert!(
            Instant::now() < deadline,
            "{name}{labels:?} stayed at {got}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The gateway still answers: health check, and a completion on another
/// route.
fn assert_healthy(gw: &Gateway) {
    let health = gw.get("/healthz", None);
    assert_eq!(health.status, 200, "{}", health.text());
    echo_once(gw, "still alive");
}

/// Runs `attack` on a thread while sending echo completions on the `demo`
/// route (each checked for correctness), and prints their latency before and
/// during the attack. Returns what `attack` returned.
fn alongside<T: Send>(gw: &Gateway, what: &str, attack: impl FnOnce() -> T + Send) -> T {
    let before: Vec<Duration> = (0..10)
        .map(|i| echo_once(gw, &format!("before {i}")))
        .collect();
    let (result, during) = std::thread::scope(|scope| {
        let attack = scope.spawn(attack);
        let mut during = Vec::new();
        // A few requests however quickly the attack ends; paced so they
        // measure latency, not how many requests fit.
        while during.len() < 3 || !attack.is_finished() {
            during.push(echo_once(gw, &format!("during {}", during.len())));
            std::thread::sleep(Duration::from_millis(10));
        }
        (join(attack), during)
    });
    let (median_before, median_during) = (median(&before), median(&during));
    eprintln!(
        "[sandbox figure] {what}: {} echo completions on another route served correctly during \
         the attack; median latency {median_before:?} before, {median_during:?} during (added \
         {:?}); max {:?} before, {:?} during",
        during.len(),
        median_during.saturating_sub(median_before),
        max(&before),
        max(&during),
    );
    result
}

/// Warms the gateway up (a hostile instance and an echo one), then returns
/// its RSS: the baseline the attacks are compared with.
fn rss_baseline(gw: &Gateway) -> (u32, u64) {
    let pid = gw.pid().expect("the gateway is running");
    let body = assert_ok(&gw.post("/completions", &ask(gw, HOSTILE, "ok")));
    assert_eq!(body["choices"][0]["text"], json!("ok"));
    echo_once(gw, "warm up");
    (pid, rss_bytes(pid))
}

/// Waits for the RSS to come back within [`RSS_SLACK`] of `baseline`,
/// prints the figures, and asserts it did.
fn assert_rss_returns(what: &str, pid: u32, baseline: u64, peak: u64) {
    let bound = baseline + RSS_SLACK;
    let after = settle_rss(pid, bound, RSS_PATIENCE);
    eprintln!(
        "[sandbox figure] {what}: gateway RSS {} before, {} at peak, {} after",
        mib(baseline),
        mib(peak),
        mib(after)
    );
    assert!(
        after <= bound,
        "{what}: the gateway's RSS stayed at {} (baseline {}, peak {}), more than {} above the \
         baseline after {RSS_PATIENCE:?}",
        mib(after),
        mib(baseline),
        mib(peak),
        mib(RSS_SLACK)
    );
}

/// Polls the gateway's log until a line satisfies `matches`; returns it.
fn log_line(gw: &Gateway, what: &str, matches: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + LOG_PATIENCE;
    loop {
        if let Some(line) = gw.logs().lines().find(|line| matches(line)) {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no log line {what}; the log:\n{}",
            gw.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
