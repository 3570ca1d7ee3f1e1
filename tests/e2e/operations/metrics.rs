//! `GET /metrics` as Prometheus scrapes it, read with a parser of the text format: counters
//! that move by exactly the requests sent (by surface, route, model and status; tokens by
//! kind; cost; upstream tries by result; rate-limit refusals), histograms with buckets, sum
//! and count, unknown models folded into `other`, `metrics_token` and `metrics = false`.

use std::time::Duration;

use gateway_test_support::scrape::{parsed, scrape, value};
use gateway_test_support::{
    Gateway, OpenAiUpstream, Reply, Route, chat_request, post_stream_with_provider_key,
    post_with_provider_key, split_stream, with,
};
use prometheus_parse::{Sample, Value as Metric};
use serde_json::json;

const PROVIDER_KEY: &str = "sk-test-metrics-caller-0123456789";
const MODEL: &str = "gpt-4o-mini";
const ROUTE: &str = "priced";
const TOKEN: &str = "metrics-token-for-tests";

/// A gateway with an openai route whose model is priced, against `upstream`.
fn gateway(upstream: &OpenAiUpstream, extra: &[&str]) -> Gateway {
    let route =
        Route::openai(ROUTE, &upstream.base_url("/v1")).price(MODEL, 500_000.0, 1_000_000.0);
    extra
        .iter()
        .fold(Gateway::builder().route(route), |builder, line| {
            builder.config_line(line)
        })
        .start()
}

fn ask(gw: &Gateway, model: &str) -> u16 {
    let request = chat_request(
        &gw.project_id,
        ROUTE,
        model,
        json!([{"role": "user", "content": "hi"}]),
    );
    post_with_provider_key(gw, "/completions", PROVIDER_KEY, &request).status
}

fn answer() -> Reply {
    Reply::openai_answer(
        MODEL,
        "hello",
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 1},
            "completion_tokens_details": {"reasoning_tokens": 1}}),
    )
}

#[test]
fn counters_move_by_exactly_the_requests_sent_and_histograms_have_buckets_sum_and_count() {
    let upstream = OpenAiUpstream::script(vec![
        answer(),
        answer(),
        answer(),
        Reply::openai_error(500, "overloaded", "server_error", None),
        answer(),
    ]);
    let gw = gateway(&upstream, &[]);
    let before = scrape(&gw, None);
    let requests = |samples: &[Sample], model: &str, status: &str| {
        value(
            samples,
            "gateway_requests_total",
            &[
                ("surface", "commonbase"),
                ("route", ROUTE),
                ("model", model),
                ("status", status),
            ],
        )
    };
    assert_eq!(requests(&before, MODEL, "200"), 0.0);
    for _ in 0..3 {
        assert_eq!(ask(&gw, MODEL), 200);
    }
    assert_eq!(ask(&gw, MODEL), 502);
    assert_eq!(ask(&gw, "a-model-nobody-configured"), 200);
    let after = scrape(&gw, None);

    assert_eq!(requests(&after, MODEL, "200"), 3.0);
    assert_eq!(requests(&after, MODEL, "502"), 1.0);
    assert_eq!(
        requests(&after, "other", "200"),
        1.0,
        "an unknown model is `other`"
    );
    assert!(
        !after
            .iter()
            .any(|s| s.labels.get("model") == Some("a-model-nobody-configured")),
        "a caller's model name became a label"
    );
    let tokens = |kind| {
        value(
            &after,
            "gateway_tokens_total",
            &[("route", ROUTE), ("model", MODEL), ("kind", kind)],
        )
    };
    assert_eq!(tokens("prompt"), 9.0);
    assert_eq!(tokens("completion"), 6.0);
    assert_eq!(tokens("cached_prompt"), 3.0);
    assert_eq!(tokens("reasoning"), 3.0);
    let cost = value(
        &after,
        "gateway_cost_usd_total",
        &[("route", ROUTE), ("model", MODEL)],
    );
    // The route's price: $0.50 a prompt token and $1 a completion token (cached tokens at the
    // input price; a dollar a token is the most a price may be): 3 calls of 1.5 + 2 dollars.
    assert!((cost - 10.5).abs() < 1e-6, "cost {cost}");
    let attempts = |result| {
        value(
            &after,
            "gateway_attempts_total",
            &[("route", ROUTE), ("result", result)],
        )
    };
    assert_eq!(attempts("success"), 4.0);
    assert_eq!(attempts("500"), 1.0);

    let labels = [("surface", "commonbase"), ("route", ROUTE)];
    let count = value(&after, "gateway_request_duration_seconds_count", &labels);
    assert_eq!(count, 5.0);
    assert!(value(&after, "gateway_request_duration_seconds_sum", &labels) > 0.0);
    let histogram = after
        .iter()
        .find(|s| {
            s.metric == "gateway_request_duration_seconds"
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
        .expect("the request duration histogram");
    let Metric::Histogram(buckets) = &histogram.value else {
        panic!("not a histogram: {histogram:?}");
    };
    assert!(buckets.len() > 5, "{buckets:?}");
    assert!(
        buckets.windows(2).all(|w| w[0].count <= w[1].count),
        "cumulative: {buckets:?}"
    );
    let last = buckets.last().expect("buckets");
    assert!(
        last.less_than.is_infinite() && last.count == 5.0,
        "{buckets:?}"
    );
    let upstream_count = value(
        &after,
        "gateway_upstream_duration_seconds_count",
        &[("route", ROUTE)],
    );
    assert_eq!(upstream_count, 5.0, "one per try");
    assert!(
        after
            .iter()
            .any(|s| s.metric == "gateway_invocation_queue_depth")
    );
    assert_eq!(
        value(&after, "gateway_invocation_write_failures_total", &[]),
        0.0
    );
}

#[test]
fn a_stream_counts_its_time_to_first_token() {
    let upstream =
        OpenAiUpstream::script(vec![Reply::openai_slow_stream(2, Duration::from_millis(2))]);
    let gw = gateway(&upstream, &[]);
    let request = chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([{"role": "user", "content": "hi"}]),
    );
    let response =
        post_stream_with_provider_key(&gw, PROVIDER_KEY, &with(request, "stream", json!(true)));
    split_stream(&response);
    let samples = scrape(&gw, None);
    let first_token = value(
        &samples,
        "gateway_time_to_first_token_seconds_count",
        &[("route", ROUTE)],
    );
    assert_eq!(first_token, 1.0);
}

#[test]
fn rate_limit_refusals_are_counted_by_scope() {
    let upstream = OpenAiUpstream::each_call(answer());
    let gw = gateway(&upstream, &[]);
    gw.cli_ok(&["project", "limit", &gw.project_id, "--rpm", "1"]);
    assert_eq!(ask(&gw, MODEL), 200);
    assert_eq!(ask(&gw, MODEL), 429);
    let samples = scrape(&gw, None);
    assert_eq!(
        value(
            &samples,
            "gateway_rate_limited_total",
            &[("scope", "project")]
        ),
        1.0
    );
    assert_eq!(
        value(&samples, "gateway_rate_limited_total", &[("scope", "key")]),
        0.0
    );
}

#[test]
fn metrics_token_guards_the_scrape() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream, &[&format!("metrics_token = \"{TOKEN}\"")]);
    let refused = gw.get("/metrics", None);
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert!(refused.json()["invocationId"].is_string());
    assert_eq!(gw.get("/metrics", Some("wrong-token")).status, 401);
    scrape(&gw, Some(TOKEN));
}

#[test]
fn metrics_off_record_nothing_and_answer_404() {
    let upstream = OpenAiUpstream::each_call(answer());
    let gw = gateway(&upstream, &["metrics = false"]);
    assert_eq!(ask(&gw, MODEL), 200);
    let response = gw.get("/metrics", None);
    assert_eq!(response.status, 404, "{}", response.text());
    assert_eq!(gw.get("/healthz", None).status, 200);
}

#[test]
fn metrics_listen_serves_the_scrape_apart_from_the_api() {
    let upstream = OpenAiUpstream::each_call(answer());
    let mut gw = gateway(
        &upstream,
        &[
            "metrics_listen = \"127.0.0.1:0\"",
            &format!("metrics_token = \"{TOKEN}\""),
        ],
    );
    assert_eq!(ask(&gw, MODEL), 200);
    let on_main = gw.get("/metrics", Some(TOKEN));
    assert_eq!(on_main.status, 404, "{}", on_main.text());
    assert!(on_main.json()["invocationId"].is_string());

    let printed = gw.printed("metrics on http://");
    let address = printed
        .strip_suffix("/metrics")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not an address: {printed}"));
    let auth = format!("Bearer {TOKEN}");
    let apart = gateway_test_support::client::request(
        address,
        "GET",
        "/metrics",
        &[("Authorization", &auth)],
        b"",
    );
    let served = value(
        &parsed(&apart),
        "gateway_requests_total",
        &[("route", ROUTE), ("model", MODEL), ("status", "200")],
    );
    assert_eq!(served, 1.0);
    let unauthorized = gateway_test_support::client::request(address, "GET", "/metrics", &[], b"");
    assert_eq!(unauthorized.status, 401);
    let elsewhere = gateway_test_support::client::request(address, "GET", "/v1/models", &[], b"");
    assert_eq!(
        elsewhere.status, 404,
        "only /metrics and /healthz are served there"
    );

    // A scraper's connection left open must not hold the shutdown (the record writer waits
    // for every handle of the gateway's state).
    let _kept_alive = gateway_test_support::Connection::open(
        address,
        "GET",
        "/metrics",
        &[("Authorization", &auth)],
        b"",
    );
    assert!(gw.shutdown().success());
    let logs = gw.logs();
    assert!(!logs.contains("could not be flushed"), "{logs}");
}
