//! Token counts: `POST /v1/messages/count_tokens` (Anthropic's shape) and
//! `POST /v1/responses/input_tokens` (OpenAI's), over any route. The anthropic and gemini plugins
//! ask their providers (the fakes are as strict as they are about what the body may hold); the
//! openai plugin leaves the count to the gateway, which counts OpenAI's models exactly with their
//! own tokenizer and nothing goes upstream; a model no tokenizer here knows is counted and marked
//! `estimated`. Each count is recorded (type `count_tokens`, no usage, no cost).

use gateway_test_support::anthropic_client::ANTHROPIC_VERSION;
use gateway_test_support::upstream::counted_tokens;
use gateway_test_support::{
    AnthropicUpstream, Gateway, GeminiUpstream, OpenAiUpstream, Reply, Response, Route,
};
use serde_json::{Value, json};

const COUNT_PATH: &str = "/v1/messages/count_tokens";
const INPUT_TOKENS_PATH: &str = "/v1/responses/input_tokens";
/// The caller's provider key (`Provider-API-Key`).
const PROVIDER_KEY: &str = "sk-ant-caller-0123456789";

fn count(gw: &Gateway, body: &Value) -> Response {
    count_as(gw, &gw.key, body)
}

fn count_as(gw: &Gateway, key: &str, body: &Value) -> Response {
    let headers = [
        ("x-api-key", key),
        ("anthropic-version", ANTHROPIC_VERSION),
        ("Provider-API-Key", PROVIDER_KEY),
    ];
    gw.request(
        "POST",
        COUNT_PATH,
        None,
        &headers,
        body.to_string().as_bytes(),
    )
}

fn input_tokens(gw: &Gateway, body: &Value) -> Response {
    gw.request(
        "POST",
        INPUT_TOKENS_PATH,
        Some(&format!("Bearer {}", gw.key)),
        &[("Provider-API-Key", PROVIDER_KEY)],
        body.to_string().as_bytes(),
    )
}

/// The invocation id an answer carries in its header.
fn invocation(response: &Response) -> String {
    response
        .header("x-invocation-id")
        .unwrap_or_else(|| panic!("no invocation id: {:?}", response.headers))
        .to_owned()
}

fn gateway() -> (AnthropicUpstream, OpenAiUpstream, GeminiUpstream, Gateway) {
    let anthropic = AnthropicUpstream::each_call(Reply::json(500, &json!({})));
    let openai = OpenAiUpstream::each_call(Reply::json(500, &json!({})));
    let gemini = GeminiUpstream::each_call(Reply::json(500, &json!({})));
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&anthropic.base_url("/v1")))
        .route(Route::openai("oai", &openai.base_url("/v1")))
        .route(Route::new("gem", "gemini").base_url(&gemini.base_url("/v1beta")))
        .route(Route::new("old", "legacy"))
        .route(Route::echo("demo"))
        .start();
    (anthropic, openai, gemini, gw)
}

#[test]
fn an_anthropic_route_asks_anthropic_with_what_count_tokens_takes() {
    let (anthropic, _, _, gw) = gateway();
    let body = json!({
        "model": "claude/claude-sonnet-4-5",
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "What is the weather in Lisbon?"},
            {"role": "assistant", "content": "Let me look."},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [{"name": "weather", "description": "The weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        // A message's fields count_tokens refuses: the gateway leaves them out.
        "max_tokens": 100,
        "temperature": 0.2,
        "stream": true,
    });
    let response = count(&gw, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json(),
        json!({"input_tokens": counted_tokens(3, 1)})
    );
    let sent = anthropic.single_request();
    sent.assert_json_post("/v1/messages/count_tokens");
    assert_eq!(sent.header("x-api-key"), Some(PROVIDER_KEY));
    let sent = sent.json();
    assert_eq!(sent["model"], json!("claude-sonnet-4-5"));
    assert_eq!(sent["system"], json!("Be brief."));
    assert_eq!(sent["tools"][0]["name"], json!("weather"));

    let record = gw.record(&invocation(&response));
    assert_eq!(record["type"], json!("count_tokens"), "{record}");
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["route"], json!("claude"), "{record}");
    assert!(record["usage"].is_null(), "{record}");
    assert!(record["cost"].is_null(), "{record}");
}

#[test]
fn an_openai_model_is_counted_exactly_by_the_gateway_and_nothing_goes_upstream() {
    let (_, openai, _, gw) = gateway();
    // "user" is 1 token and "Hello!" 2 in o200k_base; 3 framing a message and 3 priming.
    let response = input_tokens(&gw, &json!({"model": "oai/gpt-4o-mini", "input": "Hello!"}));
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json(),
        json!({"object": "response.input_tokens", "input_tokens": 9})
    );
    let body = json!({"model": "oai/gpt-4o-mini", "max_tokens": 10,
        "messages": [{"role": "user", "content": "Hello!"}]});
    let response = count(&gw, &body);
    assert_eq!(response.json(), json!({"input_tokens": 9}));
    assert!(openai.requests().is_empty());
    let record = gw.record(&invocation(&response));
    assert_eq!(record["type"], json!("count_tokens"), "{record}");
    assert_eq!(record["plugin"], json!("openai"), "{record}");

    // `instructions` is the system message; the count grows by its message.
    let response = input_tokens(
        &gw,
        &json!({"model": "oai/gpt-4o-mini", "instructions": "Be brief.", "input": "Hello!"}),
    );
    let counted = response.json()["input_tokens"].as_u64().expect("a count");
    assert!(counted > 9 + 3, "{counted}");
}

#[test]
fn a_gemini_route_asks_count_tokens_with_the_generate_content_request() {
    let (_, _, gemini, gw) = gateway();
    let body = json!({"model": "gem/gemini-2.5-flash", "instructions": "Be brief.",
        "input": [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": "Bye."}],
        "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]});
    let response = input_tokens(&gw, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(
        answer["input_tokens"],
        json!(counted_tokens(3, 1)),
        "{answer}"
    );
    assert!(answer.get("estimated").is_none(), "{answer}");
    let sent = gemini.single_request();
    assert!(
        sent.path.ends_with("/models/gemini-2.5-flash:countTokens"),
        "{}",
        sent.path
    );
    let sent = sent.json();
    let generate = &sent["generateContentRequest"];
    assert_eq!(
        generate["model"],
        json!("models/gemini-2.5-flash"),
        "{sent}"
    );
    assert_eq!(
        generate["systemInstruction"]["parts"][0]["text"],
        json!("Be brief.")
    );
}

#[test]
fn a_model_no_tokenizer_here_knows_is_an_estimate() {
    let (_, _, _, gw) = gateway();
    let body = json!({"model": "demo/echo", "messages": [{"role": "user", "content": "Hello!"}]});
    let answer = count(&gw, &body).json();
    assert_eq!(answer["estimated"], json!(true), "{answer}");
    assert_eq!(answer["input_tokens"], json!(9), "{answer}");
    // A plugin of the 0.1 line has no `count-tokens`: the gateway counts for it too.
    let body = json!({"model": "old/gpt-4o", "messages": [{"role": "user", "content": "Hello!"}]});
    assert_eq!(count(&gw, &body).json(), json!({"input_tokens": 9}));
}

#[test]
fn bad_counts_get_their_surfaces_errors_with_an_invocation_id() {
    let (anthropic, _, _, gw) = gateway();
    let response = count(&gw, &json!({"model": "claude/claude-sonnet-4-5"}));
    assert_eq!(response.status, 400, "{}", response.text());
    let error = response.json();
    assert_eq!(error["type"], json!("error"), "{error}");
    assert_eq!(
        error["error"]["type"],
        json!("invalid_request_error"),
        "{error}"
    );
    let id = invocation(&response);
    assert_eq!(gw.record(&id)["status"], json!("error"));

    let response = input_tokens(&gw, &json!({"model": "nowhere/x", "input": "Hello!"}));
    assert_eq!(response.status, 404, "{}", response.text());
    assert!(response.json()["error"]["message"].is_string());

    let response = gw.request("GET", INPUT_TOKENS_PATH, Some(&gw.key), &[], b"");
    assert_eq!(response.status, 405, "{}", response.text());
    assert!(anthropic.requests().is_empty());
}

#[test]
fn a_count_is_held_to_the_keys_scope() {
    let (anthropic, _, _, gw) = gateway();
    let args = ["key", "create", gw.project_id.as_str(), "--routes", "oai"];
    let scoped = gw.cli(&args).checked(&args.join(" ")).last_line();
    let hello =
        |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "Hello!"}]});
    let response = count_as(&gw, &scoped, &hello("claude/claude-sonnet-4-5"));
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(
        count_as(&gw, &scoped, &hello("oai/gpt-4o-mini")).status,
        200
    );
    assert!(anthropic.requests().is_empty());
}

#[test]
fn a_count_takes_a_request_from_the_request_limits() {
    let (_, _, _, gw) = gateway();
    let hello =
        json!({"model": "oai/gpt-4o-mini", "messages": [{"role": "user", "content": "Hello!"}]});
    let args = ["project", "limit", gw.project_id.as_str(), "--rpm", "2"];
    gw.cli(&args).checked(&args.join(" "));
    // The limit reaches the serving gateway within its refresh.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let statuses: Vec<u16> = (0..3).map(|_| count(&gw, &hello).status).collect();
    assert_eq!(statuses, [200, 200, 429]);
}
