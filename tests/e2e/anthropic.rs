//! The anthropic plugin through the gateway, against a fake Messages API that replays real
//! recorded Claude traffic (simple, streaming, tool and multi-step tool cases), fails on
//! demand in Anthropic's error shape, and sends broken or cut streams.

use std::collections::HashMap;
use std::time::Duration;

use gateway_test_support::{
    AnthropicUpstream, Gateway, Interaction, ReceivedRequest, Recording, Reply, Response, Route,
    SseResponse, assert_chat_choice, assert_error, assert_ok, assert_provider_error,
    assert_stream_finished, assert_usage, chat_params, chat_request, chat_request_with_params,
    embeddings_request, list_cost, open_stream_with_provider_key, post_stream_with_provider_key,
    post_with_provider_key, recorded_tests, split_stream, streamed_record, streamed_text,
    success_record, text_request, unique, with, with_param,
};
use serde_json::{Value, json};

/// The caller's provider key in most tests.
const PROVIDER_KEY: &str = "sk-ant-test-caller-0123456789";
const ROUTE: &str = "claude";
const MODEL: &str = "claude-sonnet-4-20250514";
/// The plugin's list price of claude-sonnet-4 (USD per million input and output tokens), which
/// the gateway applies to its dated snapshots.
const SONNET_PRICE: (f64, f64) = (3.0, 15.0);

fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    post_with_provider_key(gw, path, PROVIDER_KEY, body)
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, PROVIDER_KEY, body)
}

/// A gateway with route `claude` (anthropic plugin, caller's key) at `upstream`.
fn gateway_for(upstream: &AnthropicUpstream) -> Gateway {
    Gateway::builder()
        .route(Route::new(ROUTE, "anthropic").base_url(&upstream.base_url("/v1")))
        .start()
}

fn hi_request(gw: &Gateway) -> Value {
    chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([{"role": "user", "content": "Say hi in Portuguese"}]),
    )
}

// ---------------------------------------------------------------- recordings

/// How a request expresses functions and their results.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    /// `functions`/`functionCall`, assistant `function_call`, `function` role results.
    Commonbase,
    /// `tools`/`toolChoice`, assistant `tool_calls`, `tool` role results with ids.
    OpenAi,
}

/// The text of a `content` that is a string or a list of blocks.
fn block_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == json!("text"))
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// The gateway request that makes the plugin send what `interaction` recorded.
fn request_from(gw: &Gateway, interaction: &Interaction, style: Style) -> Value {
    let recorded = interaction.request_json();
    let params = chat_params(
        &recorded,
        &["messages", "system", "tools", "tool_choice", "stream"],
    );
    let mut messages = Vec::new();
    if recorded.get("system").is_some() {
        messages.push(json!({"role": "system", "content": block_text(&recorded["system"])}));
    }
    // Function names by call id, for `function` role results.
    let mut names: HashMap<String, Value> = HashMap::new();
    for message in recorded["messages"].as_array().expect("recorded messages") {
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        let text = block_text(&message["content"]);
        let content = if text.is_empty() {
            Value::Null
        } else {
            json!(text)
        };
        if message["role"] == json!("assistant") {
            let calls: Vec<&Value> = blocks
                .iter()
                .filter(|b| b["type"] == json!("tool_use"))
                .collect();
            for call in &calls {
                names.insert(
                    call["id"].as_str().unwrap_or_default().to_owned(),
                    call["name"].clone(),
                );
            }
            let mut converted = json!({"role": "assistant", "content": content});
            match style {
                Style::Commonbase if !calls.is_empty() => {
                    assert_eq!(calls.len(), 1, "function_call carries one call");
                    converted["function_call"] = json!({
                        "name": calls[0]["name"],
                        "arguments": calls[0]["input"].to_string()
                    });
                }
                Style::OpenAi if !calls.is_empty() => {
                    converted["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({"id": c["id"], "type": "function",
                                "function": {"name": c["name"], "arguments": c["input"].to_string()}})
                        })
                        .collect();
                }
                _ => {}
            }
            messages.push(converted);
            continue;
        }
        for result in blocks.iter().filter(|b| b["type"] == json!("tool_result")) {
            let id = result["tool_use_id"].as_str().unwrap_or_default();
            let output = block_text(&result["content"]);
            messages.push(match style {
                Style::Commonbase => {
                    json!({"role": "function", "name": names[id], "content": output})
                }
                Style::OpenAi => json!({"role": "tool", "tool_call_id": id, "content": output}),
            });
        }
        if !text.is_empty() {
            messages.push(json!({"role": "user", "content": text}));
        }
    }
    let mut body = chat_request_with_params(&gw.project_id, ROUTE, params, json!(messages));
    if let Some(tools) = recorded["tools"].as_array() {
        match style {
            Style::Commonbase => {
                body["functions"] = tools
                    .iter()
                    .map(|t| json!({"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}))
                    .collect();
                body["functionCall"] = json!("auto");
            }
            Style::OpenAi => {
                body["tools"] = tools
                    .iter()
                    .map(|t| {
                        json!({"type": "function", "function": {"name": t["name"],
                        "description": t["description"], "parameters": t["input_schema"]}})
                    })
                    .collect();
                body["toolChoice"] = json!("auto");
            }
        }
    }
    if recorded["stream"] == json!(true) {
        body["stream"] = json!(true);
    }
    body
}

/// What a recorded answer says, read the way an Anthropic client would, with the stop reason
/// in the gateway's words.
#[derive(Debug, Default)]
struct Expected {
    text: String,
    /// Text of each `text_delta`, in order (streams only).
    pieces: Vec<String>,
    finish_reason: String,
    /// `(id, name, arguments)`.
    tool_calls: Vec<(String, String, String)>,
    /// `(prompt, completion, total)` with cached tokens counted as prompt tokens.
    usage: (u64, u64, u64),
}

fn gateway_reason(stop_reason: &Value) -> String {
    match stop_reason.as_str().unwrap_or_default() {
        "end_turn" | "stop_sequence" => "stop",
        "max_tokens" => "length",
        "tool_use" => "tool_calls",
        other => panic!("unexpected recorded stop reason {other:?}"),
    }
    .to_owned()
}

fn usage_triple(usage: &HashMap<String, u64>) -> (u64, u64, u64) {
    let get = |key: &str| usage.get(key).copied().unwrap_or(0);
    let prompt =
        get("input_tokens") + get("cache_read_input_tokens") + get("cache_creation_input_tokens");
    let completion = get("output_tokens");
    (prompt, completion, prompt + completion)
}

fn merge_usage(into: &mut HashMap<String, u64>, usage: &Value) {
    for (key, value) in usage.as_object().into_iter().flatten() {
        if let Some(n) = value.as_u64() {
            into.insert(key.clone(), n);
        }
    }
}

fn expected(interaction: &Interaction) -> Expected {
    let mut answer = Expected::default();
    let mut usage = HashMap::new();
    if !interaction.is_sse() {
        let body: Value =
            serde_json::from_str(&interaction.response.body).expect("recorded answer is JSON");
        for block in body["content"].as_array().expect("content") {
            match block["type"].as_str() {
                Some("text") => answer.text.push_str(block["text"].as_str().unwrap_or("")),
                Some("tool_use") => answer.tool_calls.push((
                    block["id"].as_str().unwrap_or_default().to_owned(),
                    block["name"].as_str().unwrap_or_default().to_owned(),
                    block["input"].to_string(),
                )),
                _ => {}
            }
        }
        answer.finish_reason = gateway_reason(&body["stop_reason"]);
        merge_usage(&mut usage, &body["usage"]);
        answer.usage = usage_triple(&usage);
        return answer;
    }
    // Tool calls by content block index.
    let mut calls: Vec<(u64, (String, String, String))> = Vec::new();
    for event in interaction.sse_payloads() {
        match event["type"].as_str() {
            Some("message_start") => merge_usage(&mut usage, &event["message"]["usage"]),
            Some("content_block_start") if event["content_block"]["type"] == json!("tool_use") => {
                let block = &event["content_block"];
                calls.push((
                    event["index"].as_u64().unwrap_or(0),
                    (
                        block["id"].as_str().unwrap_or_default().to_owned(),
                        block["name"].as_str().unwrap_or_default().to_owned(),
                        String::new(),
                    ),
                ));
            }
            Some("content_block_delta") => {
                let delta = &event["delta"];
                if let Some(text) = delta["text"].as_str() {
                    answer.text.push_str(text);
                    answer.pieces.push(text.to_owned());
                }
                if let Some(json) = delta["partial_json"].as_str() {
                    let index = event["index"].as_u64().unwrap_or(0);
                    let call = calls
                        .iter_mut()
                        .find(|(i, _)| *i == index)
                        .expect("input for a started tool_use block");
                    call.1.2.push_str(json);
                }
            }
            Some("message_delta") => {
                answer.finish_reason = gateway_reason(&event["delta"]["stop_reason"]);
                merge_usage(&mut usage, &event["usage"]);
            }
            _ => {}
        }
    }
    answer.tool_calls = calls.into_iter().map(|(_, call)| call).collect();
    answer.usage = usage_triple(&usage);
    answer
}

/// Replaces every tool call id by its position of first appearance, so conversations whose ids
/// were made up by different parties compare equal.
fn normalize_ids(messages: &Value) -> Value {
    let mut ids: Vec<String> = Vec::new();
    let mut messages = messages.clone();
    for message in messages.as_array_mut().into_iter().flatten() {
        for block in message["content"].as_array_mut().into_iter().flatten() {
            for key in ["id", "tool_use_id"] {
                if let Some(id) = block.get(key).and_then(Value::as_str).map(str::to_owned) {
                    let position = ids.iter().position(|i| *i == id).unwrap_or_else(|| {
                        ids.push(id);
                        ids.len() - 1
                    });
                    block[key] = json!(format!("id_{position}"));
                }
            }
        }
    }
    messages
}

/// The plugin sent what the recorded client sent, in every part that matters.
fn check_upstream_request(sent: &ReceivedRequest, interaction: &Interaction, style: Style) {
    sent.assert_json_post("/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(PROVIDER_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        sent.header("authorization"),
        None,
        "Anthropic takes x-api-key"
    );
    let body = sent.json();
    let recorded = interaction.request_json();
    assert_eq!(body["model"], recorded["model"]);
    assert_eq!(body["max_tokens"], recorded["max_tokens"]);
    assert_eq!(body["system"], json!(block_text(&recorded["system"])));
    match style {
        Style::OpenAi => assert_eq!(body["messages"], recorded["messages"], "sent: {body}"),
        // Function calls carry no id: the plugin makes up its own, consistently.
        Style::Commonbase => assert_eq!(
            normalize_ids(&body["messages"]),
            normalize_ids(&recorded["messages"]),
            "sent: {body}"
        ),
    }
    assert_eq!(body["tools"], recorded["tools"]);
    if recorded.get("tools").is_some() {
        assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    }
    assert_eq!(body["stream"], recorded["stream"], "{body}");
}

/// Checks `usage` and `usage_cost` of an answer without cached tokens: prompt and completion
/// tokens at their prices.
fn check_usage(body: &Value, usage: (u64, u64, u64), price: (f64, f64)) {
    assert_usage(body, usage, list_cost(usage.0, usage.1, price));
}

fn check_simple(name: &str) {
    let recording = Recording::load(name);
    let upstream = AnthropicUpstream::replay(&recording);
    let gw = gateway_for(&upstream);
    let interaction = recording.interaction(0);
    let expected = expected(interaction);

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["projectId"], json!(gw.project_id));
    let choice = assert_chat_choice(&body, &expected.text, Some(&expected.finish_reason));
    assert!(choice.get("function_call").is_none(), "{body}");
    check_usage(&body, expected.usage, SONNET_PRICE);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    let record = success_record(&gw, &body, ROUTE, "anthropic");
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": expected.usage.0, "completion_tokens": expected.usage.1,
            "total_tokens": expected.usage.2, "cached_prompt_tokens": 0, "cache_creation_tokens": 0}),
        "{record}"
    );
}

fn check_streaming(name: &str) {
    let recording = Recording::load(name);
    let upstream = AnthropicUpstream::replay(&recording);
    let gw = gateway_for(&upstream);
    let interaction = recording.interaction(0);
    assert!(interaction.is_sse(), "{name} is not a streaming recording");
    let expected = expected(interaction);

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    // One frame per text delta, in the order Anthropic sent them.
    let pieces: Vec<&str> = partial
        .iter()
        .map(|frame| frame["choices"][0]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(pieces, expected.pieces, "{}", response.raw);
    for frame in &partial {
        assert_eq!(frame["type"], json!("chat"), "{frame}");
        assert!(frame.get("usage").is_none(), "{frame}");
    }
    assert_eq!(streamed_text(&partial, 0), expected.text);
    assert_stream_finished(&last, Some(&expected.finish_reason));
    check_usage(&last, expected.usage, SONNET_PRICE);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    let record = streamed_record(&gw, &last);
    assert_eq!(
        record["usage"]["prompt_tokens"],
        json!(expected.usage.0),
        "{record}"
    );
    assert_eq!(
        record["usage"]["completion_tokens"],
        json!(expected.usage.1),
        "{record}"
    );
    assert_eq!(
        record["response"]["choices"][0]["text"],
        json!(expected.text),
        "{record}"
    );
}

/// `(name, arguments)` of a response choice's calls: `tool_calls`, checked against
/// `function_call` (the first call, for Commonbase clients).
fn calls_of(choice: &Value) -> Vec<(String, String, String)> {
    let calls: Vec<(String, String, String)> = choice["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            assert_eq!(c["type"], json!("function"), "{c}");
            (
                c["id"].as_str().unwrap_or_default().to_owned(),
                c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                c["function"]["arguments"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let first = calls.first().expect("at least one call");
    assert_eq!(
        choice["function_call"],
        json!({"name": first.1, "arguments": first.2}),
        "{choice}"
    );
    calls
}

/// Step one asks for tool calls; step two sends the results back and gets the final answer.
fn check_tool(name: &str, style: Style) {
    let recording = Recording::load(name);
    let upstream = AnthropicUpstream::replay(&recording);
    let gw = gateway_for(&upstream);
    let first = recording.interaction(0);
    let expected_first = expected(first);
    assert!(
        !expected_first.tool_calls.is_empty(),
        "{name} has no tool call"
    );
    let streamed = first.is_sse();

    let request = request_from(&gw, first, style);
    let choice = if streamed {
        let response = post_stream(&gw, &request);
        let (partial, last) = split_stream(&response);
        assert_eq!(streamed_text(&partial, 0), expected_first.text);
        for frame in &partial {
            // Calls arrive whole, in the last frame only.
            assert!(
                frame["choices"][0].get("tool_calls").is_none()
                    && frame["choices"][0].get("function_call").is_none(),
                "partial frame with a call: {frame}"
            );
        }
        last["choices"][0].clone()
    } else {
        let body = assert_ok(&post(&gw, "/completions", &request));
        assert_eq!(body["choices"][0]["text"], json!(expected_first.text));
        body["choices"][0].clone()
    };
    // The arguments are exactly the JSON text the model produced, reassembled from its pieces.
    assert_eq!(calls_of(&choice), expected_first.tool_calls, "{choice}");
    assert_eq!(choice["finish_reason"], json!("tool_calls"), "{choice}");
    check_upstream_request(&upstream.requests()[0], first, style);

    let second = recording.interaction(1);
    let expected_second = expected(second);
    let request = request_from(&gw, second, style);
    let body = if streamed {
        let response = post_stream(&gw, &request);
        let (partial, last) = split_stream(&response);
        assert_eq!(streamed_text(&partial, 0), expected_second.text);
        last
    } else {
        let body = assert_ok(&post(&gw, "/completions", &request));
        assert_eq!(body["choices"][0]["text"], json!(expected_second.text));
        body
    };
    assert_eq!(
        body["choices"][0]["finish_reason"],
        json!(expected_second.finish_reason)
    );
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    // The second request carries the calls and their results as tool_use/tool_result blocks.
    check_upstream_request(&requests[1], second, style);
    let messages = requests[1].json()["messages"].clone();
    let results = messages
        .as_array()
        .and_then(|m| m.last())
        .expect("a last message");
    assert_eq!(results["role"], json!("user"));
    assert_eq!(
        results["content"].as_array().map(Vec::len),
        Some(expected_first.tool_calls.len()),
        "{results}"
    );
}

recorded_tests! {
    simple => check_simple("Anthropic__claude-sonnet-4__simple");
    streaming => check_streaming("Anthropic__claude-sonnet-4__simple_streaming");
    tool => check_tool("Anthropic__claude-sonnet-4__tool", Style::Commonbase);
    tool_openai_shape => check_tool("Anthropic__claude-sonnet-4__tool", Style::OpenAi);
    tool_streaming => check_tool("Anthropic__claude-sonnet-4__tool_streaming", Style::Commonbase);
    multi_tool => check_tool("Anthropic__claude-sonnet-4__multi_tool", Style::OpenAi);
    multi_tool_streaming => check_tool("Anthropic__claude-sonnet-4__multi_tool_streaming", Style::OpenAi);
}

// ---------------------------------------------------------------- the request sent

fn simple_reply() -> Reply {
    Reply::recorded(Recording::load("Anthropic__claude-sonnet-4__simple").interaction(0))
}

#[test]
fn request_has_the_key_version_system_field_and_default_max_tokens() {
    let upstream = AnthropicUpstream::script(vec![simple_reply()]);
    let gw = gateway_for(&upstream);
    let request = chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Say hi"},
            {"role": "user", "content": "in Portuguese"},
            {"role": "system", "content": "Be brief."},
        ]),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert!(
        body["choices"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Olá"))
    );
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(PROVIDER_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        sent.json(),
        json!({
            "model": MODEL,
            "max_tokens": 4096,
            "system": "You are a helpful assistant.\n\nBe brief.",
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Say hi"}, {"type": "text", "text": "in Portuguese"}]}],
        })
    );
}

#[test]
fn text_prompts_are_one_user_message() {
    let upstream = AnthropicUpstream::script(vec![simple_reply()]);
    let gw = gateway_for(&upstream);
    let request = text_request(&gw.project_id, ROUTE, MODEL, "Say hi in Portuguese");
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["type"], json!("text"));
    assert!(body["choices"][0].get("role").is_none(), "{body}");
    let sent = upstream.single_request().json();
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Say hi in Portuguese"}]}])
    );
    assert!(sent.get("system").is_none(), "{sent}");
}

#[test]
fn legacy_parameter_names_are_accepted() {
    let upstream = AnthropicUpstream::script(vec![simple_reply(), simple_reply()]);
    let gw = gateway_for(&upstream);
    let mut request = hi_request(&gw);
    let params = &mut request["providerConfig"]["params"];
    params["max_tokens_to_sample"] = json!(256);
    params["stop_sequences"] = json!(["\n\nHuman:"]);
    params["top_k"] = json!(10);
    params["top_p"] = json!(0.8);
    params["temperature"] = json!(0.3);
    params["metadata"] = json!({"user_id": "user-42"});
    assert_ok(&post(&gw, "/completions", &request));
    let request = with_param(
        with_param(hi_request(&gw), "stop", json!("END")),
        "max_tokens",
        json!(99),
    );
    assert_ok(&post(&gw, "/completions", &request));

    let requests = upstream.requests();
    let first = requests[0].json();
    for (key, value) in [
        ("max_tokens", json!(256)),
        ("stop_sequences", json!(["\n\nHuman:"])),
        ("top_k", json!(10)),
        ("top_p", json!(0.8)),
        ("temperature", json!(0.3)),
        ("metadata", json!({"user_id": "user-42"})),
    ] {
        assert_eq!(first[key], value, "{key} in {first}");
    }
    assert!(first.get("max_tokens_to_sample").is_none(), "{first}");
    let second = requests[1].json();
    assert_eq!(second["max_tokens"], json!(99), "{second}");
    assert_eq!(second["stop_sequences"], json!(["END"]), "{second}");
    assert!(second.get("stop").is_none(), "{second}");
}

#[test]
fn route_key_travels_as_x_api_key_and_the_callers_key_wins() {
    let upstream = AnthropicUpstream::script(vec![simple_reply(), simple_reply()]);
    let var = unique("GATEWAY_TEST_ANTHROPIC_KEY_");
    let route_key = unique("sk-ant-route-");
    let gw = Gateway::builder()
        .route(
            Route::new(ROUTE, "anthropic")
                .base_url(&upstream.base_url("/v1"))
                .api_key_env(&var)
                .default_model("claude-sonnet-4-5"),
        )
        .env(&var, &route_key)
        .start();
    // No model in params: the route's default is sent.
    let request = json!({
        "projectId": gw.project_id,
        "messages": [{"role": "user", "content": "Say hi in Portuguese"}],
        "providerConfig": {"provider": ROUTE, "params": {"type": "chat"}}
    });
    let answer = gw.post("/completions", &request);
    assert_ok(&answer);
    assert!(!answer.text().contains(&route_key));
    assert_ok(&post(&gw, "/completions", &request));
    let requests = upstream.requests();
    assert_eq!(requests[0].header("x-api-key"), Some(route_key.as_str()));
    assert_eq!(requests[1].header("x-api-key"), Some(PROVIDER_KEY));
    assert_eq!(requests[0].json()["model"], json!("claude-sonnet-4-5"));
}

#[test]
fn embeddings_are_refused() {
    let upstream = AnthropicUpstream::script(Vec::new());
    let gw = gateway_for(&upstream);
    let request = embeddings_request(&gw.project_id, ROUTE, MODEL, json!("hello"));
    assert_error(&post(&gw, "/embeddings", &request), 400, "embeddings");
    assert!(upstream.requests().is_empty());
}

// ---------------------------------------------------------------- usage and cost

fn cached_usage() -> Value {
    json!({"input_tokens": 100, "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 1000, "output_tokens": 50})
}

/// The gateway's usage for [`cached_usage`]: cache reads and writes are prompt tokens.
const CACHED_USAGE: (u64, u64, u64) = (1300, 50, 1350);

/// The cost the gateway reports for [`cached_usage`] at the list price `(input, output)` of a
/// model priced by the shipped table: 100 plain input tokens, 1000 cache reads at 0.1x input,
/// 200 five-minute cache writes at 1.25x input, 50 output tokens.
fn cached_cost((input, output): (f64, f64)) -> f64 {
    (100.0 * input + 1000.0 * input * 0.1 + 200.0 * input * 1.25 + 50.0 * output) / 1e6
}

#[test]
fn cache_tokens_are_prompt_tokens_recorded_apart_and_priced() {
    let answer = json!({
        "id": "msg_cached", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "From the cache."}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": cached_usage()
    });
    let upstream = AnthropicUpstream::script(vec![Reply::json(200, &answer)]);
    let gw = gateway_for(&upstream);
    let request = with(
        chat_request(
            &gw.project_id,
            ROUTE,
            "claude-sonnet-4-5-20250929",
            json!([{"role": "user", "content": "again"}]),
        ),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["choices"][0]["text"], json!("From the cache."));
    // claude-sonnet-4-5 list prices.
    assert_usage(&body, CACHED_USAGE, cached_cost((3.0, 15.0)));
    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 1300, "completion_tokens": 50, "total_tokens": 1350,
            "cached_prompt_tokens": 1000, "cache_creation_tokens": 200}),
        "{record}"
    );
    assert_eq!(record["usageCost"], body["usage_cost"], "{record}");
}

fn message_start(usage: Value) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-haiku-4-5-20251001", "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage}}),
    )
}

fn text_start() -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    )
}

fn text_delta(text: &str) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    )
}

#[test]
fn streamed_cache_usage_reaches_the_final_frame() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(
            json!({"input_tokens": 100, "cache_creation_input_tokens": 200,
            "cache_read_input_tokens": 1000, "output_tokens": 1}),
        ),
        text_start(),
        ("ping", json!({"type": "ping"})),
        text_delta("Cached "),
        text_delta("answer."),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 50}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])]);
    let gw = gateway_for(&upstream);
    let request = with(
        with(
            chat_request(
                &gw.project_id,
                ROUTE,
                "claude-haiku-4-5-20251001",
                json!([{"role": "user", "content": "again"}]),
            ),
            "stream",
            json!(true),
        ),
        "showUsage",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), "Cached answer.");
    assert_eq!(last["choices"][0]["finish_reason"], json!("length"));
    // claude-haiku-4-5 list prices.
    assert_usage(&last, CACHED_USAGE, cached_cost((1.0, 5.0)));
    let id = last["invocationId"].as_str().expect("id");
    let record = gw.wait_for_record(id, |r| r["status"] == json!("success"));
    assert_eq!(record["usage"]["cached_prompt_tokens"], json!(1000));
    assert_eq!(record["usage"]["cache_creation_tokens"], json!(200));
}

// ---------------------------------------------------------------- upstream errors

fn check_failure(reply: Reply, expected_status: u16, provider_error: &str) -> Response {
    let upstream = AnthropicUpstream::script(vec![reply]);
    let gw = gateway_for(&upstream);
    let response = post(&gw, "/completions", &hi_request(&gw));
    assert_provider_error(
        &gw,
        &response,
        expected_status,
        provider_error,
        upstream.requests().len(),
    );
    response
}

#[test]
fn upstream_401_is_502_with_anthropics_message() {
    let response = check_failure(
        Reply::anthropic_error(401, "authentication_error", "invalid x-api-key", None),
        502,
        "invalid x-api-key",
    );
    assert!(!response.text().contains(PROVIDER_KEY));
}

#[test]
fn upstream_429_is_429_with_retry_after() {
    let message = "Number of request tokens has exceeded your per-minute rate limit";
    let response = check_failure(
        Reply::anthropic_error(429, "rate_limit_error", message, Some("17")),
        429,
        message,
    );
    assert_eq!(response.header("retry-after"), Some("17"));
}

#[test]
fn upstream_500_is_502_with_anthropics_message() {
    check_failure(
        Reply::anthropic_error(500, "api_error", "Internal server error", None),
        502,
        "Internal server error",
    );
}

#[test]
fn upstream_529_overloaded_is_502() {
    check_failure(
        Reply::anthropic_error(529, "overloaded_error", "Overloaded", None),
        502,
        "Overloaded",
    );
}

#[test]
fn malformed_json_answer_is_502() {
    let upstream = AnthropicUpstream::script(vec![Reply::raw(
        200,
        "application/json",
        r#"{"type":"message","content":[{"type":"text","te"#,
    )]);
    let gw = gateway_for(&upstream);
    let response = post(&gw, "/completions", &hi_request(&gw));
    let id = assert_error(&response, 502, "");
    let provider_error = response.json()["providerError"].clone();
    assert!(
        provider_error
            .as_str()
            .is_some_and(|e| e.starts_with("malformed response from upstream")),
        "{provider_error}"
    );
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["status"], json!("error"), "{record}");
}

fn stream_request(gw: &Gateway) -> Value {
    with(hi_request(gw), "stream", json!(true))
}

/// A stream that failed after text went out: the text frames, then an error frame. Returns the
/// text and the invocation id.
fn failed_stream(response: &SseResponse) -> (String, String) {
    assert_eq!(response.status, 200, "{}", response.raw);
    let (last, partial) = response.frames.split_last().expect("frames");
    assert!(
        last["error"].is_string(),
        "no error frame: {}",
        response.raw
    );
    assert_eq!(last.get("completed"), None, "{last}");
    let id = last["invocationId"].as_str().expect("id").to_owned();
    for frame in partial {
        assert_eq!(frame["invocationId"], json!(id));
        assert_eq!(frame["completed"], json!(false));
    }
    (streamed_text(partial, 0), id)
}

#[test]
fn stream_cut_mid_event_fails_and_keeps_the_usage_so_far() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_cut_events(
        &[
            message_start(json!({"input_tokens": 25, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 0, "output_tokens": 1})),
            text_start(),
            text_delta("Hel"),
            text_delta("lo"),
        ],
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_del",
    )]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    let (text, id) = failed_stream(&response);
    assert_eq!(text, "Hello");
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(record["httpStatus"], json!(502), "{record}");
    // The connection dropped: the plugin saw a transport failure, not a finished answer.
    assert!(
        record["providerError"]
            .as_str()
            .is_some_and(|e| e.contains("reading the answer")),
        "{record}"
    );
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 125, "completion_tokens": 1, "total_tokens": 126,
            "cached_prompt_tokens": 100, "cache_creation_tokens": 0}),
        "{record}"
    );
    assert!(record["usageCost"].is_number(), "{record}");
}

#[test]
fn stream_that_ends_before_message_stop_fails() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(json!({"input_tokens": 5, "output_tokens": 1})),
        text_start(),
        text_delta("Partial"),
    ])]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    let (text, id) = failed_stream(&response);
    assert_eq!(text, "Partial");
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(
        record["providerError"],
        json!("stream ended early"),
        "{record}"
    );
    assert_eq!(record["usage"]["prompt_tokens"], json!(5), "{record}");
}

#[test]
fn error_event_mid_stream_is_reported() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(json!({"input_tokens": 5, "output_tokens": 1})),
        text_start(),
        text_delta("Ol"),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ])]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    let (text, id) = failed_stream(&response);
    assert_eq!(text, "Ol");
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(record["providerError"], json!("Overloaded"), "{record}");
    assert_eq!(record["httpStatus"], json!(502), "{record}");
}

#[test]
fn rate_limit_event_before_any_text_is_429() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(json!({"input_tokens": 5, "output_tokens": 1})),
        (
            "error",
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}),
        ),
    ])]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    assert_eq!(response.status, 429, "{}", response.raw);
    assert_eq!(response.json()["providerError"], json!("Slow down"));
}

#[test]
fn streaming_error_status_is_reported_before_the_stream_starts() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_error(
        529,
        "overloaded_error",
        "Overloaded",
        None,
    )]);
    let gw = gateway_for(&upstream);
    let response = post_stream(&gw, &stream_request(&gw));
    assert_eq!(response.status, 502, "{}", response.raw);
    assert_eq!(response.json()["providerError"], json!("Overloaded"));
    assert_eq!(upstream.single_request().json()["stream"], json!(true));
}

#[test]
fn client_leaving_mid_stream_is_recorded_cancelled_with_its_usage() {
    let recording = Recording::load("Anthropic__claude-sonnet-4__simple_streaming");
    let upstream = AnthropicUpstream::script(vec![
        Reply::recorded(recording.interaction(0)).gap(Duration::from_millis(200)),
    ]);
    let gw = gateway_for(&upstream);
    let mut stream = open_stream_with_provider_key(&gw, PROVIDER_KEY, &stream_request(&gw));
    assert_eq!(stream.status, 200);
    let first = stream.next_frame().expect("a first frame");
    assert_eq!(first["choices"][0]["text"], json!("Olá! ("));
    let id = first["invocationId"].as_str().expect("id").to_owned();
    drop(stream);

    upstream.wait_until("the upstream stream to be dropped", |u| {
        u.aborted_streams() == 1
    });
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("cancelled"));
    // message_start's counts, sent before the first text.
    assert_eq!(record["usage"]["prompt_tokens"], json!(16), "{record}");
    assert!(record["usageCost"].is_number(), "{record}");
}
