//! Reasoning across surfaces and providers: the caller's wish (Anthropic's `thinking`,
//! OpenAI's `reasoning_effort`) reaches each provider in its own terms; the model's reasoning
//! comes back as Anthropic `thinking` blocks (with their signatures, whole and streamed) or
//! OpenAI-compatible `reasoning_content`, and goes back upstream on the next turn.

use gateway_test_support::anthropic_client::{post_messages, stream_messages};
use gateway_test_support::{AnthropicUpstream, Gateway, OpenAiUpstream, Reply, Response, Route};
use serde_json::{Value, json};

const WITH_PROVIDER_KEY: &[(&str, &str)] = &[("Provider-API-Key", "sk-test")];

/// A conversation whose assistant turn thought before calling a tool, as Anthropic's SDKs
/// send it back.
fn with_history(model: &str) -> Value {
    json!({"model": model, "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [
            {"role": "user", "content": "Weather in Lisbon?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should look.", "signature": "sig-0"},
                {"type": "redacted_thinking", "data": "hidden-0"},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Lisbon"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                    "content": [{"type": "text", "text": "service down"}]}]}],
        "tools": [{"name": "weather", "input_schema": {"type": "object"}}]})
}

#[test]
fn anthropic_thinking_goes_upstream_and_comes_back_whole_and_streamed_with_signatures() {
    let upstream = AnthropicUpstream::script(vec![
        Reply::anthropic_thinking(),
        Reply::anthropic_thinking_stream(),
    ]);
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    let body = with_history("claude/claude-sonnet-4-5");
    let answer = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let answer = answer.json();
    assert_eq!(
        answer["content"],
        json!([{"type": "thinking", "thinking": "Let me think.", "signature": "sig-abc"},
            {"type": "text", "text": "Olá"}])
    );

    let sent = upstream.requests()[0].json();
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048}),
        "{sent}"
    );
    let turn = &sent["messages"][1]["content"];
    assert_eq!(
        turn[0],
        json!({"type": "thinking", "thinking": "I should look.", "signature": "sig-0"}),
        "{sent}"
    );
    assert_eq!(
        turn[1],
        json!({"type": "redacted_thinking", "data": "hidden-0"}),
        "{sent}"
    );
    let result = &sent["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{sent}");
    assert_eq!(result["is_error"], true, "{sent}");

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let stream = stream_messages(&gw, WITH_PROVIDER_KEY, &streamed);
    assert_eq!(stream.status, 200, "{}", stream.raw);
    let deltas: Vec<&Value> = (stream.frames.iter())
        .filter(|f| f["type"] == "content_block_delta")
        .map(|f| &f["delta"])
        .collect();
    assert_eq!(
        deltas[0],
        &json!({"type": "thinking_delta", "thinking": "Let me "})
    );
    assert_eq!(
        deltas[1],
        &json!({"type": "thinking_delta", "thinking": "think."})
    );
    assert_eq!(
        deltas[2],
        &json!({"type": "signature_delta", "signature": "sig-abc"})
    );
    let starts: Vec<&Value> = (stream.frames.iter())
        .filter(|f| f["type"] == "content_block_start")
        .map(|f| &f["content_block"])
        .collect();
    assert_eq!(starts[0]["type"], "thinking");
    assert_eq!(
        starts[1],
        &json!({"type": "redacted_thinking", "data": "opaque"})
    );
    assert_eq!(starts[2]["type"], "text");
    let end = (stream.frames.iter())
        .find(|f| f["type"] == "message_delta")
        .expect("message_delta");
    assert_eq!(
        end["delta"],
        json!({"stop_reason": "stop_sequence", "stop_sequence": "END"})
    );
}

fn post_chat(gw: &Gateway, body: &Value) -> Response {
    gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[
            ("Authorization", &format!("Bearer {}", gw.key)),
            ("Provider-API-Key", "sk-test"),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

#[test]
fn reasoning_effort_reaches_each_provider_and_reasoning_content_comes_back() {
    let reply = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "deepseek-reasoner",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "Hello!", "reasoning_content": "Thinking it over."}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}});
    let openai = OpenAiUpstream::each_call(Reply::json(200, &reply));
    let anthropic = AnthropicUpstream::each_call(Reply::anthropic_thinking());
    let gw = Gateway::builder()
        .route(Route::openai("oai", &openai.base_url("/v1")))
        .route(Route::new("claude", "anthropic").base_url(&anthropic.base_url("/v1")))
        .start();

    let body = json!({"model": "oai/deepseek-reasoner", "reasoning_effort": "low",
        "messages": [{"role": "user", "content": "Hi"}]});
    let answer = post_chat(&gw, &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json()["choices"][0]["message"]["reasoning_content"],
        "Thinking it over."
    );
    assert_eq!(openai.single_request().json()["reasoning_effort"], "low");

    // The same wish to an Anthropic route is a thinking budget; its thinking comes back.
    let mut body = body.clone();
    body["model"] = json!("claude/claude-sonnet-4-5");
    body["reasoning_effort"] = json!("medium");
    let answer = post_chat(&gw, &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json()["choices"][0]["message"]["reasoning_content"],
        "Let me think."
    );
    let sent = anthropic.single_request().json();
    assert_eq!(sent["thinking"]["type"], "enabled", "{sent}");
    assert!(
        sent["thinking"]["budget_tokens"].as_u64() >= Some(1024),
        "{sent}"
    );

    let refused = post_chat(
        &gw,
        &json!({"model": "oai/x", "reasoning_effort": "max",
        "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(refused.json()["error"]["param"], "reasoning_effort");
}

#[test]
fn streamed_reasoning_content_reaches_an_openai_caller_before_the_text() {
    let anthropic = AnthropicUpstream::each_call(Reply::anthropic_thinking_stream());
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&anthropic.base_url("/v1")))
        .start();
    let body = json!({"model": "claude/claude-sonnet-4-5", "stream": true,
        "reasoning_effort": "low", "messages": [{"role": "user", "content": "Hi"}]});
    let answer = post_chat(&gw, &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let text = answer.text();
    let frames: Vec<Value> = (text.lines())
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).expect("a JSON chunk"))
        .collect();
    let pieces: Vec<(&str, &str)> = (frames.iter())
        .filter_map(|f| {
            let delta = &f["choices"][0]["delta"];
            if let Some(text) = delta["reasoning_content"].as_str() {
                return Some(("reasoning", text));
            }
            delta["content"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(|t| ("text", t))
        })
        .collect();
    assert_eq!(
        pieces,
        [
            ("reasoning", "Let me "),
            ("reasoning", "think."),
            ("text", "Olá")
        ]
    );
}
