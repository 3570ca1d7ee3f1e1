//! Reservations settled by difference: fifty requests at once overshoot a budget or tpm by at most
//! one request (on one gateway and over two replicas), a failed request gives its reservation
//! back, and the output limit reserved is what the upstream is asked for.

use super::*;

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
    greedy_gateway_with(upstreams, redis, &[])
}

/// [`greedy_gateway`] with more lines in its config.
fn greedy_gateway_with(
    upstreams: &(OpenAiUpstream, AnthropicUpstream, GeminiUpstream),
    redis: Option<&TestRedis>,
    lines: &[&str],
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
    for line in lines {
        builder = builder.config_line(line);
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

/// Leases (`limit_leases`) hold the same bound: a lease admits only a request whose whole
/// reservation it holds, and Redis decides the rest.
#[test]
fn fifty_requests_at_once_with_leases_spend_no_more_than_reserved_whatever_the_caller_sends() {
    let Some(redis) = TestRedis::create() else {
        return;
    };
    let upstreams = greedy_upstreams();
    let gw = greedy_gateway_with(&upstreams, Some(&redis), &["limit_leases = true"]);
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
