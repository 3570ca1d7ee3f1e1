//! The response cache, as callers meet it: a route with `cache_ttl_secs` answers a request it
//! answered before without calling its upstream (the fake counts every request it gets), on
//! every surface and in both modes, for the right callers only, for its time to live, as the
//! caller's `x-gateway-cache` / `Cache-Control` say; shared by replicas through Redis, and in
//! process when Redis is down.

use std::time::Duration;

use gateway_test_support::scrape::{scrape, value};
use gateway_test_support::sse::{event_data, split_events};
use gateway_test_support::{Gateway, OpenAiUpstream, Reply, Response, Route, TestRedis};
use serde_json::{Value, json};

const MODEL: &str = "gpt-4o-mini";
/// $1 per million tokens each way: the answer's 8 tokens cost $0.000008.
const ANSWER_COST: f64 = 0.000_008;

fn usage() -> Value {
    json!({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8})
}

fn answer(text: &str) -> Reply {
    Reply::openai_answer(MODEL, text, usage())
}

/// A caching route `oai` (and whatever `more` adds to it) on `upstream`.
fn route(id: &str, upstream: &OpenAiUpstream, ttl_secs: u64) -> Route {
    Route::openai(id, &upstream.base_url("/v1"))
        .key("api_key_required", "false")
        .key("cache_ttl_secs", &ttl_secs.to_string())
        .price(MODEL, 1.0, 1.0)
}

fn gateway(routes: Vec<Route>) -> Gateway {
    let mut builder = Gateway::builder();
    for route in routes {
        builder = builder.route(route);
    }
    builder.start()
}

fn openai_chat(route: &str, text: &str) -> Value {
    json!({
        "model": format!("{route}/{MODEL}"),
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 16
    })
}

/// The body of a 200 answer.
fn assert_ok(response: &Response) -> Value {
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

fn cache_header(response: &Response) -> Option<&str> {
    response.header("x-gateway-cache")
}

/// The chat answer's text on the OpenAI surface.
fn openai_text(body: &Value) -> &str {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
}

fn invocation_id(response: &Response) -> String {
    response
        .header("x-invocation-id")
        .expect("x-invocation-id")
        .to_owned()
}

#[test]
fn the_same_request_again_never_reaches_the_upstream_on_any_surface() {
    let upstream = OpenAiUpstream::each_call(answer("cached hello"));
    let gw = gateway(vec![route("oai", &upstream, 60)]);

    let first = gw.post("/v1/chat/completions", &openai_chat("oai", "hi"));
    assert_eq!(openai_text(&assert_ok(&first)), "cached hello");
    assert_eq!(cache_header(&first), Some("miss"));
    assert_eq!(upstream.request_count(), 1);

    let again = gw.post("/v1/chat/completions", &openai_chat("oai", "hi"));
    assert_eq!(openai_text(&assert_ok(&again)), "cached hello");
    assert_eq!(cache_header(&again), Some("hit"));
    assert_eq!(again.header("x-gateway-route"), Some("oai"));
    assert_eq!(assert_ok(&again)["usage"]["total_tokens"], 8);
    assert_eq!(upstream.request_count(), 1, "a hit called the upstream");

    // The same request in Anthropic's format means the same thing to the plugin.
    let anthropic = gw.post_with_headers(
        "/v1/messages",
        None,
        &[("x-api-key", gw.key.as_str())],
        &json!({
            "model": format!("oai/{MODEL}"),
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}]
        }),
    );
    let body = assert_ok(&anthropic);
    assert_eq!(body["content"][0]["text"], "cached hello", "{body}");
    assert_eq!(cache_header(&anthropic), Some("hit"));
    // And in Commonbase's.
    let commonbase = json!({
        "projectId": gw.project_id,
        "messages": [{"role": "user", "content": "hi"}],
        "providerConfig": {"provider": "oai",
            "params": {"type": "chat", "model": MODEL, "max_tokens": 16}}
    });
    let commonbase = gw.post("/completions", &commonbase);
    let body = assert_ok(&commonbase);
    assert_eq!(body["completed"], true, "{body}");
    assert_eq!(body["choices"][0]["text"], "cached hello", "{body}");
    assert_eq!(cache_header(&commonbase), Some("hit"));
    assert_eq!(upstream.request_count(), 1, "a hit called the upstream");

    // The records: the miss paid, each hit cost nothing and saved what the miss paid.
    let miss = gw.record(&invocation_id(&first));
    assert_eq!(miss["cache"], "miss");
    assert!((miss["usageCost"].as_f64().unwrap() - ANSWER_COST).abs() < 1e-12);
    let hit = gw.record(&invocation_id(&again));
    assert_eq!(hit["cache"], "hit", "{hit}");
    assert_eq!(hit["usageCost"], 0.0);
    assert!((hit["savedCost"].as_f64().unwrap() - ANSWER_COST).abs() < 1e-12);
    assert!(hit["attempts"].as_array().is_none_or(Vec::is_empty));

    let samples = scrape(&gw, None);
    let requests = |result| {
        value(
            &samples,
            "gateway_cache_requests_total",
            &[("route", "oai"), ("result", result)],
        )
    };
    assert_eq!(requests("miss"), 1.0);
    assert_eq!(requests("hit"), 3.0);
    let saved = value(
        &samples,
        "gateway_cache_saved_usd_total",
        &[("route", "oai")],
    );
    assert!((saved - 3.0 * ANSWER_COST).abs() < 1e-12, "{saved}");
    assert!(value(&samples, "gateway_cache_bytes", &[]) > 0.0);
    // The providers' tokens are the miss's only.
    let prompt_tokens = value(
        &samples,
        "gateway_tokens_total",
        &[("route", "oai"), ("model", MODEL), ("kind", "prompt")],
    );
    assert_eq!(prompt_tokens, 5.0);
}

/// An OpenAI-format stream: its `x-gateway-cache` header and its chunks (`[DONE]` checked
/// last and left out).
fn post_stream(gw: &Gateway, body: &Value) -> (Option<String>, Vec<Value>) {
    let mut conn = gw.open_stream_with_headers("/v1/chat/completions", Some(&gw.key), &[], body);
    let raw = String::from_utf8_lossy(&conn.read_to_end()).into_owned();
    assert_eq!(conn.status, 200, "{raw}");
    let mut datas: Vec<String> = (split_events(&raw).iter())
        .filter_map(|event| event_data(event))
        .collect();
    assert_eq!(datas.pop().as_deref(), Some("[DONE]"), "{raw}");
    let chunks = (datas.iter())
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d:?} in {raw}")))
        .collect();
    let cache = conn.header("x-gateway-cache").map(str::to_owned);
    (cache, chunks)
}

/// The text of an OpenAI-format stream's chunks, and whether one carried the usage.
fn streamed(frames: &[Value]) -> (String, bool) {
    let mut text = String::new();
    let mut usage = false;
    for chunk in frames {
        if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(piece);
        }
        usage |= chunk["usage"]["total_tokens"].is_number();
    }
    (text, usage)
}

#[test]
fn a_streamed_request_gets_the_cached_answer_as_the_same_stream() {
    let upstream = OpenAiUpstream::script(vec![Reply::openai_slow_stream(3, Duration::ZERO)]);
    let gw = gateway(vec![route("oai", &upstream, 60)]);
    let mut body = openai_chat("oai", "stream me");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});

    let (cache, live) = post_stream(&gw, &body);
    let (live_text, live_usage) = streamed(&live);
    assert_eq!(live_text, "w0 w1 w2 ");
    assert!(live_usage);
    assert_eq!(cache.as_deref(), Some("miss"));
    assert_eq!(upstream.request_count(), 1);

    let (cache, replayed) = post_stream(&gw, &body);
    assert_eq!(cache.as_deref(), Some("hit"));
    assert_eq!(streamed(&replayed), (live_text.clone(), true));
    // The text comes in one piece; how the stream ends is the live one's.
    let last_usage = |frames: &[Value]| frames.last().map(|f| f["usage"].clone());
    assert_eq!(last_usage(&replayed), last_usage(&live));
    let finish = |frames: &[Value]| {
        (frames.iter()).find_map(|f| f["choices"][0]["finish_reason"].as_str().map(str::to_owned))
    };
    assert_eq!(finish(&replayed), finish(&live));
    assert_eq!(upstream.request_count(), 1, "a hit called the upstream");

    // The same request unstreamed is the same entry, answered whole.
    body.as_object_mut().unwrap().remove("stream");
    body.as_object_mut().unwrap().remove("stream_options");
    let whole = gw.post("/v1/chat/completions", &body);
    assert_eq!(openai_text(&assert_ok(&whole)), live_text);
    assert_eq!(cache_header(&whole), Some("hit"));
    assert_eq!(upstream.request_count(), 1);
}

#[test]
fn a_changed_model_param_or_message_misses() {
    let upstream = OpenAiUpstream::each_call(answer("fresh"));
    let gw = gateway(vec![route("oai", &upstream, 60).default_model(MODEL)]);
    let base = openai_chat("oai", "hi");
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &base)),
        Some("miss")
    );

    let mut other_model = base.clone();
    other_model["model"] = json!("oai/gpt-4o");
    let mut other_param = base.clone();
    other_param["temperature"] = json!(0.5);
    let other_message = openai_chat("oai", "hi there");
    let mut more_messages = base.clone();
    more_messages["messages"] = json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"}
    ]);
    for changed in [other_model, other_param, other_message, more_messages] {
        let response = gw.post("/v1/chat/completions", &changed);
        assert_ok(&response);
        assert_eq!(cache_header(&response), Some("miss"), "{changed}");
    }
    assert_eq!(upstream.request_count(), 5);
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &base)),
        Some("hit")
    );
    assert_eq!(upstream.request_count(), 5);
}

#[test]
fn another_project_misses_unless_the_route_shares_its_answers() {
    let upstream = OpenAiUpstream::each_call(answer("mine"));
    let gw = gateway(vec![
        route("oai", &upstream, 60),
        route("shared", &upstream, 60).key("cache_scope", "\"route\""),
    ]);
    let other = gw.create_project("other");
    for (route, other_gets) in [("oai", "miss"), ("shared", "hit")] {
        let body = openai_chat(route, "same question");
        assert_eq!(
            cache_header(&gw.post("/v1/chat/completions", &body)),
            Some("miss")
        );
        let theirs = gw.post_as("/v1/chat/completions", Some(&other.key), &body);
        assert_ok(&theirs);
        assert_eq!(cache_header(&theirs), Some(other_gets), "route {route}");
    }
    // oai: both projects called it; shared: only the first.
    assert_eq!(upstream.request_count(), 3);
}

#[test]
fn an_entry_lives_its_ttl() {
    let upstream = OpenAiUpstream::each_call(answer("short-lived"));
    let gw = gateway(vec![route("oai", &upstream, 1)]);
    let body = openai_chat("oai", "hi");
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &body)),
        Some("miss")
    );
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &body)),
        Some("hit")
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &body)),
        Some("miss")
    );
    assert_eq!(upstream.request_count(), 2);
}

#[test]
fn no_cache_refreshes_the_entry_and_no_store_leaves_it_alone() {
    let upstream = OpenAiUpstream::script(vec![answer("one"), answer("two"), answer("three")]);
    let gw = gateway(vec![route("oai", &upstream, 60)]);
    let body = openai_chat("oai", "hi");
    let post = |headers: &[(&str, &str)]| {
        let response = gw.post_with_headers("/v1/chat/completions", Some(&gw.key), headers, &body);
        let text = openai_text(&assert_ok(&response)).to_owned();
        (text, cache_header(&response).map(str::to_owned))
    };
    let answered = |text: &str, cache: &str| (text.to_owned(), Some(cache.to_owned()));
    assert_eq!(post(&[]), answered("one", "miss"));
    assert_eq!(
        post(&[("x-gateway-cache", "no-cache")]),
        answered("two", "skip")
    );
    assert_eq!(post(&[]), answered("two", "hit"));
    assert_eq!(
        post(&[("cache-control", "no-store")]),
        answered("three", "skip")
    );
    assert_eq!(post(&[]), answered("two", "hit"));
    assert_eq!(upstream.request_count(), 3);

    let refused = gw.post_with_headers(
        "/v1/chat/completions",
        Some(&gw.key),
        &[("x-gateway-cache", "maybe")],
        &body,
    );
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        refused.text().contains("x-gateway-cache"),
        "{}",
        refused.text()
    );
    assert!(refused.header("x-invocation-id").is_some());
}

#[test]
fn an_error_is_never_cached() {
    let upstream = OpenAiUpstream::script(vec![
        Reply::openai_error(500, "boom", "server_error", None),
        answer("recovered"),
    ]);
    let gw = gateway(vec![route("oai", &upstream, 60)]);
    let body = openai_chat("oai", "hi");
    let failed = gw.post("/v1/chat/completions", &body);
    assert_eq!(failed.status, 502, "{}", failed.text());
    let ok = gw.post("/v1/chat/completions", &body);
    assert_eq!(openai_text(&assert_ok(&ok)), "recovered");
    assert_eq!(cache_header(&ok), Some("miss"));
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &body)),
        Some("hit")
    );
    assert_eq!(upstream.request_count(), 2);
}

#[test]
fn embeddings_are_cached_too() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(vec![route("oai", &upstream, 60)]);
    let body = json!({"model": "oai/text-embedding-3-small", "input": ["a b", "c"]});
    let first = gw.post("/v1/embeddings", &body);
    let second = gw.post("/v1/embeddings", &body);
    assert_eq!(cache_header(&first), Some("miss"));
    assert_eq!(cache_header(&second), Some("hit"));
    assert_eq!(assert_ok(&first)["data"], assert_ok(&second)["data"]);
    assert_eq!(upstream.request_count(), 1);
}

#[test]
fn hits_count_toward_requests_per_minute_but_not_budgets() {
    let upstream = OpenAiUpstream::each_call(answer("counted"));
    let gw = gateway(vec![route("oai", &upstream, 60)]);
    // A budget the first answer uses up: a request that calls the upstream is refused after it.
    gw.cli_ok(&[
        "project",
        "limit",
        &gw.project_id,
        "--daily-budget-usd",
        "0.000001",
    ]);
    let body = openai_chat("oai", "hi");
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &body)),
        Some("miss")
    );
    let uncached = gw.post(
        "/v1/chat/completions",
        &openai_chat("oai", "something else"),
    );
    assert_eq!(uncached.status, 429, "{}", uncached.text());
    for _ in 0..3 {
        let hit = gw.post("/v1/chat/completions", &body);
        assert_ok(&hit);
        assert_eq!(cache_header(&hit), Some("hit"));
    }
    assert_eq!(upstream.request_count(), 1);

    // Requests per minute count hits.
    let key = gw.cli_ok(&["key", "create", &gw.project_id, "--rpm", "2"]);
    let key = key.lines().last().unwrap_or_default().trim().to_owned();
    let statuses: Vec<u16> = (0..3)
        .map(|_| gw.post_as("/v1/chat/completions", Some(&key), &body).status)
        .collect();
    assert_eq!(statuses, [200, 200, 429]);
}

#[test]
fn two_replicas_on_one_redis_share_an_entry() {
    let Some(redis) = TestRedis::create() else {
        return;
    };
    let upstream = OpenAiUpstream::each_call(answer("shared"));
    let replica = || {
        let mut builder =
            Gateway::builder().route(route("oai", &upstream, 60).key("cache_scope", "\"route\""));
        for line in redis.config_lines() {
            builder = builder.config_line(&line);
        }
        builder.start()
    };
    let (a, b) = (replica(), replica());
    let body = openai_chat("oai", "hi");
    assert_eq!(
        cache_header(&a.post("/v1/chat/completions", &body)),
        Some("miss")
    );
    let from_b = b.post("/v1/chat/completions", &body);
    assert_eq!(openai_text(&assert_ok(&from_b)), "shared");
    assert_eq!(cache_header(&from_b), Some("hit"));
    assert_eq!(upstream.request_count(), 1);
    let keys = redis.keys();
    let prefix = format!("{}cache:", redis.prefix());
    assert_eq!(
        keys.iter().filter(|k| k.starts_with(&prefix)).count(),
        1,
        "{keys:?}"
    );
}

#[test]
fn with_redis_on_a_closed_port_the_cache_keeps_answers_in_process() {
    let upstream = OpenAiUpstream::each_call(answer("local"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let gw = Gateway::builder()
        .route(route("oai", &upstream, 60))
        .config_line(&format!("redis_url = \"redis://127.0.0.1:{port}\""))
        .start();
    let body = openai_chat("oai", "hi");
    assert_eq!(
        cache_header(&gw.post("/v1/chat/completions", &body)),
        Some("miss")
    );
    let hit = gw.post("/v1/chat/completions", &body);
    assert_eq!(openai_text(&assert_ok(&hit)), "local");
    assert_eq!(cache_header(&hit), Some("hit"));
    assert_eq!(upstream.request_count(), 1);
    gw.wait_for_log("cache: Redis unreachable", 1);
}

#[test]
fn a_route_without_a_ttl_does_not_cache_or_say_so() {
    let upstream = OpenAiUpstream::each_call(answer("plain"));
    let gw = gateway(vec![
        Route::openai("oai", &upstream.base_url("/v1")).key("api_key_required", "false"),
    ]);
    let body = openai_chat("oai", "hi");
    for _ in 0..2 {
        let response = gw.post("/v1/chat/completions", &body);
        assert_ok(&response);
        assert_eq!(cache_header(&response), None);
    }
    assert_eq!(upstream.request_count(), 2);
}

#[test]
fn guards_check_every_hit_as_they_check_a_call() {
    let upstream = OpenAiUpstream::each_call(answer("write to jane.doe@example.com today"));
    let gw = Gateway::builder()
        .route(route("oai", &upstream, 60).key("guards", r#"["pii"]"#))
        .guard("pii", "pii-guard", "")
        .start();
    let body = openai_chat("oai", "where do I write?");
    for expected in ["miss", "hit"] {
        let response = gw.post("/v1/chat/completions", &body);
        assert_eq!(openai_text(&assert_ok(&response)), "write to [EMAIL] today");
        assert_eq!(cache_header(&response), Some(expected));
        let record = gw.record(&invocation_id(&response));
        let verdicts: Vec<&Value> = record["guards"].as_array().into_iter().flatten().collect();
        assert_eq!(verdicts.len(), 2, "request and answer checked: {record}");
        assert!(!record.to_string().contains("jane.doe"), "{record}");
    }
    assert_eq!(upstream.request_count(), 1);

    // A request its guard denies is denied, cached answer or not.
    let denying = Gateway::builder()
        .route(route("oai", &upstream, 60).key("guards", r#"["pii"]"#))
        .guard("pii", "pii-guard", r#"settings = { mode = "deny" }"#)
        .start();
    let body = openai_chat("oai", "hello");
    assert_eq!(
        cache_header(&denying.post("/v1/chat/completions", &body)),
        Some("miss")
    );
    let denied = denying.post(
        "/v1/chat/completions",
        &openai_chat("oai", "mail jane.doe@example.com"),
    );
    assert_eq!(denied.status, 400, "{}", denied.text());
    // Answers are judged again on a hit: the cached answer holds an address, so it is refused.
    let hit = denying.post("/v1/chat/completions", &body);
    assert_eq!(cache_header(&hit), Some("hit"));
    assert_eq!(hit.status, 400, "{}", hit.text());
    assert!(!hit.text().contains("jane.doe"), "{}", hit.text());
}

#[test]
fn a_callers_own_provider_key_never_reads_an_answer_another_key_paid_for() {
    let upstream = OpenAiUpstream::each_call(answer("paid for"));
    // A route that takes the caller's key, its answers shared by every project.
    let gw = gateway(vec![
        Route::openai("byok", &upstream.base_url("/v1"))
            .key("cache_ttl_secs", "60")
            .key("cache_scope", "\"route\"")
            .price(MODEL, 1.0, 1.0),
    ]);
    let other = gw.create_project("other");
    let body = openai_chat("byok", "same question");
    let ask = |key: &str, provider_key: &str| {
        let bearer = format!("Bearer {key}");
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Provider-API-Key", provider_key),
        ];
        let response = gw.post_with_headers("/v1/chat/completions", None, &headers, &body);
        assert_ok(&response);
        cache_header(&response).map(str::to_owned)
    };
    assert_eq!(ask(&gw.key, "sk-payer").as_deref(), Some("miss"));
    // Another key (made up, say), in the same project or another: its own entry.
    assert_eq!(ask(&gw.key, "garbage").as_deref(), Some("miss"));
    assert_eq!(ask(&other.key, "sk-other").as_deref(), Some("miss"));
    // The same key, from any project: the answer it paid for.
    assert_eq!(ask(&other.key, "sk-payer").as_deref(), Some("hit"));
    assert_eq!(upstream.request_count(), 3);
    let keys: Vec<Option<String>> = upstream
        .requests()
        .iter()
        .map(|r| r.header("authorization").map(str::to_owned))
        .collect();
    assert_eq!(
        keys,
        ["Bearer sk-payer", "Bearer garbage", "Bearer sk-other"].map(|k| Some(k.to_owned()))
    );
}
