//! Real recorded Claude traffic replayed through the anthropic plugin (simple, streaming, tool and
//! multi-step tool cases, in the Commonbase and OpenAI shapes): the answer and usage, and what
//! the plugin sent upstream, checked against the recording.

use super::*;

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
