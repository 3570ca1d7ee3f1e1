//! Usage and cost through the gateway: every token class priced on its own (uncached prompt,
//! uncached audio prompt, cache reads, cache writes, completion with reasoning), prices from
//! the shipped table (host/prices.toml), a route's override, the plugin's own list,
//! long-context tiers, and an unknown model recorded with a null cost and warned about once.
//! Upstreams are fakes that answer with the usage details each provider reports.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gateway_test_support::recording::{RecordedRequest, RecordedResponse};
use gateway_test_support::{
    AnthropicUpstream, Gateway, GeminiUpstream, Interaction, OpenAiUpstream, Recording, Reply,
    Response, Route, SseResponse, assert_ok, chat_request, post_stream_with_provider_key,
    post_with_provider_key, split_stream, streamed_text, text_request, with,
};
use serde_json::{Value, json};

/// The caller's provider key.
const PROVIDER_KEY: &str = "sk-test-cost-0123456789";
const ROUTE: &str = "oai";

/// The shipped table's gpt-4o-mini prices: input, cached input, output (USD per million).
const GPT_4O_MINI: (f64, f64, f64) = (0.15, 0.075, 0.60);

/// The usage every OpenAI answer below reports: 2048 prompt tokens of which 1536 came from the
/// cache, 400 completion tokens of which 256 were reasoning.
const PROMPT: u64 = 2048;
const CACHED: u64 = 1536;
const COMPLETION: u64 = 400;
const REASONING: u64 = 256;

fn openai_usage() -> Value {
    json!({
        "prompt_tokens": PROMPT, "completion_tokens": COMPLETION, "total_tokens": PROMPT + COMPLETION,
        "prompt_tokens_details": {"cached_tokens": CACHED, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": REASONING, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    })
}

/// An interaction whose answer is `body` with `content_type`, for the fake upstream to replay.
fn answer(content_type: &str, body: String) -> Interaction {
    Interaction {
        request: RecordedRequest {
            body: "{}".into(),
            url: "http://upstream.test/v1/chat/completions".into(),
            method: "POST".into(),
        },
        response: RecordedResponse {
            body,
            headers: BTreeMap::from([("Content-Type".to_owned(), vec![content_type.to_owned()])]),
            code: 200,
        },
    }
}

/// A chat completion answering "Cached hello." with [`openai_usage`].
fn openai_answer(model: &str) -> Interaction {
    let body = json!({
        "id": "chatcmpl-cost", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Cached hello."},
            "logprobs": null, "finish_reason": "stop"}],
        "usage": openai_usage()
    });
    answer("application/json", body.to_string())
}

/// The same answer streamed, usage in the last chunk (as with `stream_options.include_usage`).
fn openai_stream_answer(model: &str) -> Interaction {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-cost", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": null,
            "finish_reason": finish}], "usage": null})
    };
    let events = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Cached "}), Value::Null),
        chunk(json!({"content": "hello."}), Value::Null),
        chunk(json!({}), json!("stop")),
        json!({"id": "chatcmpl-cost", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": [], "usage": openai_usage()}),
    ];
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    answer("text/event-stream; charset=utf-8", body)
}

fn upstream_answering(interactions: Vec<Interaction>) -> OpenAiUpstream {
    OpenAiUpstream::replay(&Recording {
        name: "cost".into(),
        interactions,
    })
}

fn post(gw: &Gateway, body: &Value) -> Response {
    post_with_provider_key(gw, "/completions", PROVIDER_KEY, body)
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, PROVIDER_KEY, body)
}

fn hello(gw: &Gateway, route: &str, model: &str) -> Value {
    with(
        chat_request(
            &gw.project_id,
            route,
            model,
            json!([{"role": "user", "content": "hello again"}]),
        ),
        "showUsage",
        json!(true),
    )
}

/// `(input, cached input, cache write, output)` dollars per million tokens.
type Prices = (f64, f64, f64, f64);

/// The cost of `prompt` prompt tokens (`cached` read from and `written` to the cache) and
/// `completion` completion tokens at `prices`, computed independently of the gateway.
fn expected_cost(
    (prompt, cached, written, completion): (u64, u64, u64, u64),
    (input, cached_input, cache_write, output): Prices,
) -> f64 {
    ((prompt - cached - written) as f64 * input
        + cached as f64 * cached_input
        + written as f64 * cache_write
        + completion as f64 * output)
        / 1e6
}

fn assert_cost(actual: &Value, expected: f64, context: &Value) {
    let actual = actual
        .as_f64()
        .unwrap_or_else(|| panic!("cost is not a number: {context}"));
    assert!(
        (actual - expected).abs() <= 1e-12 * expected.max(1.0),
        "cost {actual} != {expected}: {context}"
    );
}

fn openai_expected(prices: Prices) -> f64 {
    expected_cost((PROMPT, CACHED, 0, COMPLETION), prices)
}

fn gpt_4o_mini_prices() -> Prices {
    (GPT_4O_MINI.0, GPT_4O_MINI.1, GPT_4O_MINI.0, GPT_4O_MINI.2)
}

/// `GET /invocations/{id}` of the answer `body`.
fn invocation_of(gw: &Gateway, body: &Value) -> Value {
    let id = body["invocationId"]
        .as_str()
        .unwrap_or_else(|| panic!("no invocationId: {body}"));
    let response = gw.get_invocation(id);
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

// ---------------------------------------------------------------- OpenAI: cache reads, reasoning

#[test]
fn cached_and_reasoning_tokens_are_priced_from_the_shipped_table() {
    let upstream = upstream_answering(vec![openai_answer("gpt-4o-mini-2024-07-18")]);
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")))
        .start();
    // A dated snapshot: priced as gpt-4o-mini.
    let body = assert_ok(&post(&gw, &hello(&gw, ROUTE, "gpt-4o-mini-2024-07-18")));
    assert_eq!(body["choices"][0]["text"], json!("Cached hello."));
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": PROMPT, "completion_tokens": COMPLETION,
            "total_tokens": PROMPT + COMPLETION}),
        "{body}"
    );
    // 512 uncached at 0.15, 1536 cached at 0.075, 400 output (256 of them reasoning) at 0.60.
    let expected = openai_expected(gpt_4o_mini_prices());
    assert_cost(&body["usage_cost"], expected, &body);
    // Not the single-price arithmetic of before: the cached tokens are cheaper.
    assert!(expected < (PROMPT as f64 * 0.15 + COMPLETION as f64 * 0.60) / 1e6);

    let record = invocation_of(&gw, &body);
    // OpenAI tells its audio tokens (none): the record keeps that too.
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": PROMPT, "completion_tokens": COMPLETION,
            "total_tokens": PROMPT + COMPLETION, "cached_prompt_tokens": CACHED,
            "reasoning_tokens": REASONING, "audio_prompt_tokens": 0}),
        "{record}"
    );
    assert_cost(&record["usageCost"], expected, &record);
    assert_eq!(record["model"], json!("gpt-4o-mini-2024-07-18"));
}

#[test]
fn a_streamed_call_is_priced_per_class_too() {
    let upstream = upstream_answering(vec![openai_stream_answer("gpt-4o-mini")]);
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")))
        .start();
    let request = with(hello(&gw, ROUTE, "gpt-4o-mini"), "stream", json!(true));
    let (partial, last) = split_stream(&post_stream(&gw, &request));
    assert_eq!(streamed_text(&partial, 0), "Cached hello.");
    let expected = openai_expected(gpt_4o_mini_prices());
    assert_cost(&last["usage_cost"], expected, &last);

    let record = gw.wait_for_record(last["invocationId"].as_str().expect("id"), |r| {
        r["usage"].is_object()
    });
    assert_eq!(
        record["usage"]["cached_prompt_tokens"],
        json!(CACHED),
        "{record}"
    );
    assert_eq!(
        record["usage"]["reasoning_tokens"],
        json!(REASONING),
        "{record}"
    );
    assert_cost(&record["usageCost"], expected, &record);
}

// ---------------------------------------------------------------- where prices come from

#[test]
fn a_route_price_overrides_the_shipped_table() {
    let upstream = upstream_answering(vec![
        openai_answer("gpt-4o-mini"),
        openai_answer("gpt-4o-mini-2024-07-18"),
        openai_answer("gpt-4o-mini"),
    ]);
    let base = upstream.base_url("/v1");
    let gw = Gateway::builder()
        // Every class priced by the route.
        .route(Route::openai("priced", &base).key(
            "pricing",
            r#"{ "gpt-4o-mini" = { input_per_mtok = 1.0, cached_input_per_mtok = 0.5, output_per_mtok = 4.0 } }"#,
        ))
        // Only input and output: cached tokens cost the route's input price, not the table's
        // cached price (a route entry replaces the whole price).
        .route(Route::openai("flat", &base).price("gpt-4o-mini", 2.0, 8.0))
        .start();

    let body = assert_ok(&post(&gw, &hello(&gw, "priced", "gpt-4o-mini")));
    assert_cost(
        &body["usage_cost"],
        openai_expected((1.0, 0.5, 1.0, 4.0)),
        &body,
    );

    // The override covers the model's dated snapshots as well.
    let body = assert_ok(&post(&gw, &hello(&gw, "priced", "gpt-4o-mini-2024-07-18")));
    assert_cost(
        &body["usage_cost"],
        openai_expected((1.0, 0.5, 1.0, 4.0)),
        &body,
    );

    let body = assert_ok(&post(&gw, &hello(&gw, "flat", "gpt-4o-mini")));
    assert_cost(
        &body["usage_cost"],
        openai_expected((2.0, 2.0, 2.0, 8.0)),
        &body,
    );
    let record = invocation_of(&gw, &body);
    assert_cost(
        &record["usageCost"],
        openai_expected((2.0, 2.0, 2.0, 8.0)),
        &record,
    );
}

#[test]
fn the_plugins_own_list_prices_models_the_table_lacks() {
    // The echo plugin is not in the shipped table; its info() prices `echo` at zero, which is a
    // known price (0), not an unknown one (null).
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let request = with(
        text_request(&gw.project_id, "demo", "echo", "two words"),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["usage_cost"], json!(0.0), "{body}");
}

#[test]
fn an_unknown_model_is_served_with_a_null_cost_and_one_warning() {
    const UNKNOWN: &str = "a-model-nobody-prices";
    const OTHER: &str = "another-unpriced-model";
    let upstream = upstream_answering(vec![
        openai_answer(UNKNOWN),
        openai_answer(UNKNOWN),
        openai_stream_answer(UNKNOWN),
        openai_answer(OTHER),
    ]);
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")))
        .start();

    for _ in 0..2 {
        let body = assert_ok(&post(&gw, &hello(&gw, ROUTE, UNKNOWN)));
        assert_eq!(body["choices"][0]["text"], json!("Cached hello."));
        assert!(
            body.get("usage_cost").is_some_and(Value::is_null),
            "an unknown price must be usage_cost: null, never 0: {body}"
        );
        assert_eq!(body["usage"]["prompt_tokens"], json!(PROMPT), "{body}");
        let record = invocation_of(&gw, &body);
        assert!(record["usageCost"].is_null(), "{record}");
        assert_eq!(record["usage"]["cached_prompt_tokens"], json!(CACHED));
    }
    let streamed = with(hello(&gw, ROUTE, UNKNOWN), "stream", json!(true));
    let (_, last) = split_stream(&post_stream(&gw, &streamed));
    assert!(last["usage_cost"].is_null(), "{last}");

    // Another model warns in turn. The log is one ordered stream, so once its warning is in,
    // any second warning about the first model would be too.
    assert_ok(&post(&gw, &hello(&gw, ROUTE, OTHER)));
    let warnings = |model: &str| {
        gw.logs()
            .lines()
            .filter(|line| line.contains("no price known") && line.contains(model))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while warnings(OTHER) == 0 {
        assert!(
            Instant::now() < deadline,
            "no warning about {OTHER}: {}",
            gw.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(warnings(UNKNOWN), 1, "{}", gw.logs());
    assert_eq!(warnings(OTHER), 1, "{}", gw.logs());
    let line = gw
        .logs()
        .lines()
        .find(|line| line.contains("no price known") && line.contains(UNKNOWN))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(line.contains("WARN") && line.contains(ROUTE), "{line}");
}

// ---------------------------------------------------------------- Anthropic: cache writes, long context

fn anthropic_answer(usage: Value) -> Reply {
    Reply::json(
        200,
        &json!({"id": "msg_cost", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Long read."}],
            "stop_reason": "end_turn", "stop_sequence": null, "usage": usage}),
    )
}

#[test]
fn anthropic_cache_reads_and_writes_and_long_prompts_have_their_own_prices() {
    let upstream = AnthropicUpstream::script(vec![
        anthropic_answer(
            json!({"input_tokens": 100, "cache_creation_input_tokens": 200,
            "cache_read_input_tokens": 1000, "output_tokens": 50}),
        ),
        anthropic_answer(
            json!({"input_tokens": 150_000, "cache_creation_input_tokens": 1000,
            "cache_read_input_tokens": 60_000, "output_tokens": 100}),
        ),
    ]);
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    let request = hello(&gw, "claude", "claude-sonnet-4-5-20250929");

    // claude-sonnet-4-5 from the shipped table: input 3, cache read 0.30 (0.1x), 5-minute cache
    // write 3.75 (1.25x), output 15.
    let body = assert_ok(&post(&gw, &request));
    assert_cost(
        &body["usage_cost"],
        expected_cost((1300, 1000, 200, 50), (3.0, 0.30, 3.75, 15.0)),
        &body,
    );
    let record = invocation_of(&gw, &body);
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 1300, "completion_tokens": 50, "total_tokens": 1350,
            "cached_prompt_tokens": 1000, "cache_creation_tokens": 200}),
        "{record}"
    );

    // 211,000 prompt tokens (cache reads and writes count) is over the 200k threshold: every
    // token at the long-context prices, output included.
    let body = assert_ok(&post(&gw, &request));
    assert_eq!(body["usage"]["prompt_tokens"], json!(211_000), "{body}");
    assert_cost(
        &body["usage_cost"],
        expected_cost((211_000, 60_000, 1000, 100), (6.0, 0.60, 7.50, 22.50)),
        &body,
    );
}

// ---------------------------------------------------------------- Gemini: context-cache reads

#[test]
fn gemini_context_cache_reads_have_their_own_price() {
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "From the cache."}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10_000, "cachedContentTokenCount": 8_000,
            "candidatesTokenCount": 120, "thoughtsTokenCount": 80, "totalTokenCount": 10_200},
        "modelVersion": "gemini-2.5-flash"
    });
    let upstream = GeminiUpstream::script(vec![Reply::gemini_json(200, &answer.to_string())]);
    let gw = Gateway::builder()
        .route(Route::new("gem", "gemini").base_url(&upstream.base_url("/v1beta")))
        .start();
    let body = assert_ok(&post(&gw, &hello(&gw, "gem", "gemini-2.5-flash")));
    assert_eq!(body["choices"][0]["text"], json!("From the cache."));
    // gemini-2.5-flash: input 0.30, context-cache read 0.03, output (thoughts included) 2.50.
    assert_cost(
        &body["usage_cost"],
        expected_cost((10_000, 8_000, 0, 200), (0.30, 0.03, 0.30, 2.50)),
        &body,
    );
    let record = invocation_of(&gw, &body);
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 10_000, "completion_tokens": 200, "total_tokens": 10_200,
            "cached_prompt_tokens": 8_000, "reasoning_tokens": 80}),
        "{record}"
    );
}

// ---------------------------------------------------------------- Gemini: audio input

#[test]
fn gemini_audio_prompt_tokens_are_priced_at_the_audio_price() {
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "A beep."}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 10,
            "totalTokenCount": 1010,
            "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 600},
                {"modality": "TEXT", "tokenCount": 400}]},
        "modelVersion": "gemini-2.5-flash"
    });
    let upstream = GeminiUpstream::script(vec![Reply::gemini_json(200, &answer.to_string())]);
    let gw = Gateway::builder()
        .route(Route::new("gem", "gemini").base_url(&upstream.base_url("/v1beta")))
        .start();
    let request = json!({"model": "gem/gemini-2.5-flash", "messages": [{"role": "user",
        "content": [{"type": "text", "text": "What is this sound?"},
            {"type": "input_audio", "input_audio": {"data": "aGk=", "format": "wav"}}]}]});
    let response = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[
            ("Authorization", &format!("Bearer {}", gw.key)),
            ("Provider-API-Key", "AIza-test-cost"),
            ("Content-Type", "application/json"),
        ],
        request.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["choices"][0]["message"]["content"], json!("A beep."));
    let sent = upstream.single_request().json();
    assert_eq!(
        sent["contents"][0]["parts"][1],
        json!({"inlineData": {"mimeType": "audio/wav", "data": "aGk="}}),
        "{sent}"
    );

    // gemini-2.5-flash: text 0.30, audio 1.00, output 2.50 (USD per million tokens).
    let expected = (400.0 * 0.30 + 600.0 * 1.00 + 10.0 * 2.50) / 1e6;
    assert_eq!(
        response.header("x-gateway-cost-usd"),
        Some(format!("{expected:.10}").as_str()),
        "{body}"
    );
    assert_eq!(response.header("x-gateway-cost-usd"), Some("0.0007450000"));

    let id = response.header("x-invocation-id").expect("x-invocation-id");
    let record = gw.record(id);
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010,
            "audio_prompt_tokens": 600}),
        "{record}"
    );
    assert_cost(&record["usageCost"], expected, &record);
    // Not the input price for every prompt token.
    assert!(expected > (1000.0 * 0.30 + 10.0 * 2.50) / 1e6);
}
