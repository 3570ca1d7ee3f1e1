//! `POST /v1/messages`, Anthropic's Messages API, in front of the anthropic, openai and gemini
//! plugins. Each recorded case (simple, tool, multi-step tools; whole and streamed) is sent the
//! way an Anthropic client sends it, the fake provider replays what was recorded, and the answer
//! must read the way Anthropic's own does: content blocks, stop reason, usage, and a stream's
//! events in their exact order. What each plugin sent upstream is checked against the recorded
//! request; errors against Anthropic's shape and statuses.

use std::collections::HashMap;

use gateway_test_support::anthropic_client::{
    ANTHROPIC_VERSION, MESSAGES_PATH, named_events, post_messages, stream_messages,
};
use gateway_test_support::{
    AnthropicUpstream, Gateway, GeminiUpstream, Interaction, OpenAiUpstream, ReceivedRequest,
    Recording, Reply, Response, Route, SseResponse, assert_uuid_v7, recorded_tests,
};
use serde_json::{Value, json};

mod errors;
mod models;
mod recorded;
mod requests;

/// The caller's provider key (`Provider-API-Key`), whichever the provider.
const PROVIDER_KEY: &str = "sk-provider-test-caller-0123456789";
const WITH_PROVIDER_KEY: &[(&str, &str)] = &[("Provider-API-Key", PROVIDER_KEY)];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Provider {
    Anthropic,
    OpenAi,
    Gemini,
}

impl Provider {
    fn route(self) -> &'static str {
        match self {
            Provider::Anthropic => "claude",
            Provider::OpenAi => "oai",
            Provider::Gemini => "gem",
        }
    }

    fn plugin(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Gemini => "gemini",
        }
    }
}

/// The fake provider behind a route.
enum Upstream {
    Anthropic(AnthropicUpstream),
    OpenAi(OpenAiUpstream),
    Gemini(GeminiUpstream),
}

impl Upstream {
    fn requests(&self) -> Vec<ReceivedRequest> {
        match self {
            Upstream::Anthropic(u) => u.requests(),
            Upstream::OpenAi(u) => u.requests(),
            Upstream::Gemini(u) => u.requests(),
        }
    }
}

/// A fake replaying `recording` and a gateway whose route of `provider` calls it.
fn start(provider: Provider, recording: &Recording) -> (Upstream, Gateway) {
    let first = recording.interaction(0);
    let route = provider.route();
    match provider {
        Provider::Anthropic => {
            let upstream = AnthropicUpstream::replay(recording);
            let gw = Gateway::builder()
                .route(Route::new(route, "anthropic").base_url(&upstream.base_url("/v1")))
                .start();
            (Upstream::Anthropic(upstream), gw)
        }
        Provider::OpenAi => {
            let upstream = OpenAiUpstream::replay(recording);
            let model = first.request_json()["model"]
                .as_str()
                .expect("recorded model")
                .to_owned();
            let gw = Gateway::builder()
                .route(
                    Route::openai(route, &upstream.base_url(&first.base_path()))
                        .price(&model, 0.15, 0.60),
                )
                .start();
            (Upstream::OpenAi(upstream), gw)
        }
        Provider::Gemini => {
            let upstream = GeminiUpstream::replay(recording);
            let gw = Gateway::builder()
                .route(Route::new(route, "gemini").base_url(&upstream.base_url("/v1beta")))
                .start();
            (Upstream::Gemini(upstream), gw)
        }
    }
}

// ---------------------------------------------------------------- requests from recordings

/// The model a recorded request asked for.
fn recorded_model(provider: Provider, interaction: &Interaction) -> String {
    match provider {
        Provider::Gemini => "gemini-2.5-flash".to_owned(),
        _ => interaction.request_json()["model"]
            .as_str()
            .expect("recorded model")
            .to_owned(),
    }
}

fn is_gemini_stream(interaction: &Interaction) -> bool {
    interaction.request.url.contains(":streamGenerateContent")
}

/// JSON Schema types as callers write them (Gemini's recording has upper-case names).
fn lower_types(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| match (key.as_str(), value) {
                    ("type", Value::String(t)) => (key.clone(), json!(t.to_ascii_lowercase())),
                    _ => (key.clone(), lower_types(value)),
                })
                .collect(),
        ),
        Value::Array(items) => items.iter().map(lower_types).collect(),
        other => other.clone(),
    }
}

/// The Anthropic request that makes the route's plugin send what `interaction` recorded.
fn anthropic_request(provider: Provider, interaction: &Interaction) -> Value {
    let recorded = interaction.request_json();
    let model = format!(
        "{}/{}",
        provider.route(),
        recorded_model(provider, interaction)
    );
    match provider {
        // Recorded from Anthropic's own client: it is already one.
        Provider::Anthropic => {
            let mut body = recorded;
            body["model"] = json!(model);
            body
        }
        Provider::OpenAi => from_openai(&recorded, model),
        Provider::Gemini => from_gemini(&recorded, model, is_gemini_stream(interaction)),
    }
}

fn from_openai(recorded: &Value, model: String) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for message in recorded["messages"].as_array().expect("messages") {
        match message["role"].as_str().expect("role") {
            "system" => system.push(message["content"].as_str().expect("text").to_owned()),
            "user" => messages.push(json!({"role": "user", "content": message["content"]})),
            "assistant" => {
                let mut blocks = Vec::new();
                if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let arguments = call["function"]["arguments"].as_str().expect("arguments");
                    let input: Value = serde_json::from_str(arguments).expect("JSON arguments");
                    blocks.push(json!({"type": "tool_use", "id": call["id"],
                        "name": call["function"]["name"], "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            "tool" => {
                let result = json!({"type": "tool_result", "tool_use_id": message["tool_call_id"],
                    "content": message["content"]});
                // Anthropic wants one user turn with every result of the step.
                match messages.last_mut() {
                    Some(last) if last["role"] == json!("user") && last["content"].is_array() => {
                        last["content"].as_array_mut().expect("blocks").push(result);
                    }
                    _ => messages.push(json!({"role": "user", "content": [result]})),
                }
            }
            other => panic!("unexpected recorded role {other}"),
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": recorded["max_tokens"],
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n"));
    }
    if let Some(tools) = recorded["tools"].as_array() {
        body["tools"] = tools
            .iter()
            .map(|t| {
                let f = &t["function"];
                json!({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
            })
            .collect();
        assert_eq!(recorded["tool_choice"], json!("auto"));
        body["tool_choice"] = json!({"type": "auto"});
    }
    if recorded["stream"] == json!(true) {
        body["stream"] = json!(true);
    }
    body
}

fn from_gemini(recorded: &Value, model: String, stream: bool) -> Value {
    let system: Vec<&str> = recorded["systemInstruction"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|part| part["text"].as_str().expect("text"))
        .collect();
    let mut messages = Vec::new();
    for content in recorded["contents"].as_array().expect("contents") {
        let model_turn = content["role"] == json!("model");
        let blocks: Vec<Value> = content["parts"]
            .as_array()
            .expect("parts")
            .iter()
            .map(|part| {
                if let Some(text) = part["text"].as_str() {
                    json!({"type": "text", "text": text})
                } else if model_turn {
                    let call = &part["functionCall"];
                    json!({"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]})
                } else {
                    let result = &part["functionResponse"];
                    json!({"type": "tool_result", "tool_use_id": result["id"],
                        "content": result["response"].to_string()})
                }
            })
            .collect();
        let role = if model_turn { "assistant" } else { "user" };
        messages.push(json!({"role": role, "content": blocks}));
    }
    let mut body = json!({
        "model": model,
        "max_tokens": recorded["generationConfig"]["maxOutputTokens"],
        "system": system.join("\n"),
        "messages": messages,
    });
    if let Some(tools) = recorded["tools"].as_array() {
        body["tools"] = tools
            .iter()
            .flat_map(|t| t["functionDeclarations"].as_array().expect("declarations"))
            .map(|f| {
                json!({"name": f["name"], "description": f["description"],
                "input_schema": lower_types(&f["parameters"])})
            })
            .collect();
        assert_eq!(
            recorded["toolConfig"]["functionCallingConfig"]["mode"],
            json!("AUTO")
        );
        body["tool_choice"] = json!({"type": "auto"});
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

// ---------------------------------------------------------------- what the plugin sent

/// The comparable parts of an OpenAI chat message. Arguments compare as JSON: an Anthropic
/// client holds them as an object (`input`), so the spacing the model wrote them with is gone.
fn openai_message_summary(message: &Value) -> Value {
    let calls: Vec<Value> = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let arguments = c["function"]["arguments"].as_str().expect("arguments");
            let arguments: Value = serde_json::from_str(arguments).expect("JSON arguments");
            json!([c["id"], c["function"]["name"], arguments])
        })
        .collect();
    json!({
        "role": message["role"],
        "content": message.get("content").cloned().unwrap_or(Value::Null),
        "tool_call_id": message.get("tool_call_id").cloned().unwrap_or(Value::Null),
        "tool_calls": calls,
    })
}

/// The text of a `content` that is a string or a list of blocks, as the anthropic plugin joins
/// system blocks.
fn block_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The plugin sent what the recorded client sent, in every part the Messages API carries.
fn check_upstream_request(provider: Provider, sent: &ReceivedRequest, interaction: &Interaction) {
    let body = sent.json();
    let recorded = interaction.request_json();
    match provider {
        Provider::Anthropic => {
            sent.assert_json_post("/v1/messages");
            assert_eq!(sent.header("x-api-key"), Some(PROVIDER_KEY));
            assert_eq!(body["model"], recorded["model"]);
            assert_eq!(body["max_tokens"], recorded["max_tokens"]);
            assert_eq!(body["system"], json!(block_text(&recorded["system"])));
            assert_eq!(body["messages"], recorded["messages"], "sent: {body}");
            assert_eq!(body["tools"], recorded["tools"]);
            if recorded.get("tools").is_some() {
                assert_eq!(body["tool_choice"], json!({"type": "auto"}), "{body}");
            }
            assert_eq!(body["stream"], recorded["stream"], "{body}");
        }
        Provider::OpenAi => {
            sent.assert_json_post(&interaction.path());
            let bearer = format!("Bearer {PROVIDER_KEY}");
            assert_eq!(sent.header("authorization"), Some(bearer.as_str()));
            assert_eq!(body["model"], recorded["model"]);
            assert_eq!(body["max_tokens"], recorded["max_tokens"], "{body}");
            let summaries = |v: &Value| -> Vec<Value> {
                v["messages"]
                    .as_array()
                    .expect("messages")
                    .iter()
                    .map(openai_message_summary)
                    .collect()
            };
            assert_eq!(summaries(&body), summaries(&recorded), "sent: {body}");
            if let Some(tools) = recorded["tools"].as_array() {
                let sent_tools = body["tools"].as_array().expect("tools sent");
                assert_eq!(sent_tools.len(), tools.len(), "{body}");
                for (s, r) in sent_tools.iter().zip(tools) {
                    assert_eq!(s["type"], json!("function"));
                    assert_eq!(s["function"]["name"], r["function"]["name"]);
                    assert_eq!(s["function"]["description"], r["function"]["description"]);
                    assert_eq!(s["function"]["parameters"], r["function"]["parameters"]);
                }
                assert_eq!(body["tool_choice"], json!("auto"), "{body}");
            }
            assert_eq!(
                body["stream"] == json!(true),
                recorded["stream"] == json!(true)
            );
            if recorded["stream"] == json!(true) {
                assert_eq!(body["stream_options"]["include_usage"], json!(true));
            }
        }
        Provider::Gemini => {
            sent.assert_json_post(&interaction.path());
            assert_eq!(sent.header("x-goog-api-key"), Some(PROVIDER_KEY));
            let mut expected = recorded;
            if let Some(instruction) = expected["systemInstruction"].as_object_mut() {
                instruction.remove("role");
            }
            for content in expected["contents"].as_array_mut().expect("contents") {
                for part in content["parts"].as_array_mut().expect("parts") {
                    part.as_object_mut()
                        .expect("part")
                        .remove("thoughtSignature");
                }
            }
            assert_eq!(body, expected);
        }
    }
}

// ---------------------------------------------------------------- what was recorded

/// What a recorded answer says, in the Messages API's terms.
#[derive(Debug, Default)]
struct Expected {
    /// The model the provider says answered.
    model: String,
    text: String,
    /// Every text piece of a recorded stream, in order (not known for Gemini's).
    text_pieces: Option<Vec<String>>,
    /// `(id, name, input)`; the id `None` when the provider gave none.
    calls: Vec<(Option<String>, String, Value)>,
    /// Every non-empty piece of each call's arguments in a recorded stream (not known for
    /// Gemini's, whose calls come whole).
    json_pieces: Option<Vec<Vec<String>>>,
    stop_reason: &'static str,
    /// The usage object the gateway must answer.
    usage: Value,
}

fn anthropic_stop_reason(reason: &str) -> &'static str {
    match reason {
        "end_turn" => "end_turn",
        "tool_use" => "tool_use",
        "max_tokens" => "max_tokens",
        other => panic!("unexpected recorded stop reason {other:?}"),
    }
}

fn usage_object(input: u64, output: u64, cache_read: u64, cache_creation: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output,
        "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_creation})
}

fn expected(provider: Provider, interaction: &Interaction) -> Expected {
    match provider {
        Provider::Anthropic => expected_from_anthropic(interaction),
        Provider::OpenAi => expected_from_openai(interaction),
        Provider::Gemini => expected_from_gemini(interaction),
    }
}

fn expected_from_anthropic(interaction: &Interaction) -> Expected {
    let mut expected = Expected::default();
    let mut usage: HashMap<String, u64> = HashMap::new();
    let mut merge = |value: &Value| {
        for (key, n) in value.as_object().into_iter().flatten() {
            if let Some(n) = n.as_u64() {
                usage.insert(key.clone(), n);
            }
        }
    };
    if !interaction.is_sse() {
        let body: Value = serde_json::from_str(&interaction.response.body).expect("JSON");
        expected.model = body["model"].as_str().expect("model").to_owned();
        for block in body["content"].as_array().expect("content") {
            match block["type"].as_str() {
                Some("text") => expected
                    .text
                    .push_str(block["text"].as_str().expect("text")),
                Some("tool_use") => expected.calls.push((
                    block["id"].as_str().map(str::to_owned),
                    block["name"].as_str().expect("name").to_owned(),
                    block["input"].clone(),
                )),
                other => panic!("unexpected recorded block {other:?}"),
            }
        }
        expected.stop_reason = anthropic_stop_reason(body["stop_reason"].as_str().expect("stop"));
        merge(&body["usage"]);
    } else {
        let mut pieces = Vec::new();
        let mut json_pieces: Vec<Vec<String>> = Vec::new();
        let mut inputs: Vec<String> = Vec::new();
        for event in interaction.sse_payloads() {
            match event["type"].as_str() {
                Some("message_start") => {
                    expected.model = event["message"]["model"].as_str().expect("model").into();
                    merge(&event["message"]["usage"]);
                }
                Some("content_block_start") if event["content_block"]["type"] == "tool_use" => {
                    let block = &event["content_block"];
                    expected.calls.push((
                        block["id"].as_str().map(str::to_owned),
                        block["name"].as_str().expect("name").to_owned(),
                        Value::Null,
                    ));
                    json_pieces.push(Vec::new());
                    inputs.push(String::new());
                }
                Some("content_block_delta") => {
                    if let Some(text) = event["delta"]["text"].as_str() {
                        expected.text.push_str(text);
                        pieces.push(text.to_owned());
                    }
                    if let Some(piece) = event["delta"]["partial_json"].as_str() {
                        inputs.last_mut().expect("a tool_use block").push_str(piece);
                        if !piece.is_empty() {
                            json_pieces
                                .last_mut()
                                .expect("a tool_use block")
                                .push(piece.into());
                        }
                    }
                }
                Some("message_delta") => {
                    expected.stop_reason = anthropic_stop_reason(
                        event["delta"]["stop_reason"].as_str().expect("stop"),
                    );
                    merge(&event["usage"]);
                }
                _ => {}
            }
        }
        for (call, input) in expected.calls.iter_mut().zip(inputs) {
            call.2 = serde_json::from_str(&input).expect("recorded input is JSON");
        }
        expected.text_pieces = Some(pieces);
        expected.json_pieces = Some(json_pieces);
    }
    let get = |key: &str| usage.get(key).copied().unwrap_or(0);
    expected.usage = usage_object(
        get("input_tokens"),
        get("output_tokens"),
        get("cache_read_input_tokens"),
        get("cache_creation_input_tokens"),
    );
    expected
}

fn expected_from_openai(interaction: &Interaction) -> Expected {
    let answer = interaction.answer();
    let model = if interaction.is_sse() {
        interaction.sse_payloads()[0]["model"].clone()
    } else {
        serde_json::from_str::<Value>(&interaction.response.body).expect("JSON")["model"].clone()
    };
    let (prompt, completion, _) = answer.usage.expect("recorded usage");
    // A stream's pieces, each of which the gateway passes on as one delta.
    let (mut text_pieces, mut json_pieces) = (None, None);
    if interaction.is_sse() {
        let (mut texts, mut calls) = (Vec::new(), Vec::<Vec<String>>::new());
        for payload in interaction.sse_payloads() {
            let delta = &payload["choices"][0]["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                texts.push(text.to_owned());
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = call["index"].as_u64().expect("call index") as usize;
                if calls.len() <= index {
                    calls.resize(index + 1, Vec::new());
                }
                if let Some(piece) = call["function"]["arguments"]
                    .as_str()
                    .filter(|p| !p.is_empty())
                {
                    calls[index].push(piece.to_owned());
                }
            }
        }
        (text_pieces, json_pieces) = (Some(texts), Some(calls));
    }
    Expected {
        text_pieces,
        json_pieces,
        model: model.as_str().expect("model").to_owned(),
        text: answer.text,
        calls: answer
            .tool_calls
            .into_iter()
            .map(|(id, name, arguments)| {
                let input = serde_json::from_str(&arguments).expect("JSON arguments");
                (Some(id), name, input)
            })
            .collect(),
        stop_reason: match answer.finish_reason.as_deref() {
            Some("stop") => "end_turn",
            Some("tool_calls") => "tool_use",
            Some("length") => "max_tokens",
            other => panic!("unexpected recorded finish reason {other:?}"),
        },
        usage: usage_object(prompt, completion, 0, 0),
    }
}

fn expected_from_gemini(interaction: &Interaction) -> Expected {
    let payloads: Vec<Value> = if is_gemini_stream(interaction) {
        interaction.sse_payloads()
    } else {
        vec![serde_json::from_str(&interaction.response.body).expect("JSON")]
    };
    let mut expected = Expected::default();
    let mut finish = None;
    for payload in payloads {
        let candidate = &payload["candidates"][0];
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(text) = part["text"].as_str()
                && part["thought"] != json!(true)
            {
                expected.text.push_str(text);
            }
            let call = &part["functionCall"];
            if call.is_object() {
                expected.calls.push((
                    call["id"].as_str().map(str::to_owned),
                    call["name"].as_str().expect("name").to_owned(),
                    call["args"].clone(),
                ));
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            finish = Some(reason.to_owned());
        }
        let usage = &payload["usageMetadata"];
        if usage.is_object() {
            let count = |key: &str| usage[key].as_u64().unwrap_or(0);
            expected.usage = usage_object(
                count("promptTokenCount"),
                count("candidatesTokenCount") + count("thoughtsTokenCount"),
                0,
                0,
            );
        }
        if let Some(version) = payload["modelVersion"].as_str() {
            expected.model = version.to_owned();
        }
    }
    assert_eq!(finish.as_deref(), Some("STOP"));
    expected.stop_reason = if expected.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    expected
}

/// The tool call id the gateway answers: the provider's, else the one the plugin SDK gives.
fn call_id(call: &(Option<String>, String, Value), position: usize) -> String {
    call.0
        .clone()
        .unwrap_or_else(|| format!("call_0_{position}"))
}

/// The content blocks of the whole answer.
fn expected_content(expected: &Expected) -> Vec<Value> {
    let mut content = Vec::new();
    if !expected.text.is_empty() {
        content.push(json!({"type": "text", "text": expected.text}));
    }
    for (position, call) in expected.calls.iter().enumerate() {
        content.push(json!({"type": "tool_use", "id": call_id(call, position),
            "name": call.1, "input": call.2}));
    }
    content
}

/// `msg_` and the invocation id without its dashes.
fn message_id(invocation_id: &str) -> String {
    format!("msg_{}", invocation_id.replace('-', ""))
}

/// The whole message the gateway must answer (and record, for a stream).
fn expected_message(invocation_id: &str, expected: &Expected) -> Value {
    json!({
        "id": message_id(invocation_id),
        "type": "message",
        "role": "assistant",
        "model": expected.model,
        "content": expected_content(expected),
        "stop_reason": expected.stop_reason,
        "stop_sequence": null,
        "usage": expected.usage,
    })
}

/// The invocation id of an answer, from its header.
fn invocation_id(headers: &[(String, String)]) -> String {
    let id = headers
        .iter()
        .find(|(name, _)| name == "x-invocation-id")
        .map(|(_, value)| value.clone())
        .expect("x-invocation-id header");
    assert_uuid_v7(&id);
    id
}

/// The record keeps the usage as the gateway counts it: cached tokens are prompt tokens.
fn check_record_usage(record: &Value, expected: &Expected) {
    let usage = &expected.usage;
    let count = |key: &str| usage[key].as_u64().expect("count");
    let prompt = count("input_tokens")
        + count("cache_read_input_tokens")
        + count("cache_creation_input_tokens");
    assert_eq!(record["usage"]["prompt_tokens"], json!(prompt), "{record}");
    assert_eq!(
        record["usage"]["completion_tokens"],
        json!(count("output_tokens")),
        "{record}"
    );
    let cost = record["usageCost"].as_f64().expect("usageCost");
    assert!(cost > 0.0, "{record}");
}

// ---------------------------------------------------------------- reading answers

/// One content block of a stream, as a client assembles it.
#[derive(Debug)]
enum Block {
    Text(Vec<String>),
    /// The `tool_use` block as it started, and its `partial_json` pieces.
    Tool(Value, Vec<String>),
}

/// Checks a stream's grammar event by event (`message_start`, `ping`, blocks opened, filled
/// and closed one at a time with consecutive indexes, `message_delta`, `message_stop`, each
/// data's `type` its event's name) and returns `message_start`'s message, the blocks and
/// `message_delta`.
fn read_stream(response: &SseResponse) -> (Value, Vec<Block>, Value) {
    assert_eq!(response.status, 200, "{}", response.raw);
    assert!(response.is_event_stream(), "{:?}", response.headers);
    let events = named_events(&response.raw);
    for (name, data) in &events {
        assert_eq!(data["type"], json!(name), "{data}");
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.len() >= 4, "{names:?}");
    assert_eq!(names[..2], ["message_start", "ping"], "{names:?}");
    assert_eq!(
        names[names.len() - 2..],
        ["message_delta", "message_stop"],
        "{names:?}"
    );
    let mut blocks = Vec::new();
    let mut rest = events[2..events.len() - 2].iter();
    while let Some((name, start)) = rest.next() {
        let index = blocks.len();
        assert_eq!(name, "content_block_start", "{names:?}");
        assert_eq!(start["index"], json!(index), "{start}");
        let content_block = start["content_block"].clone();
        let mut pieces = Vec::new();
        loop {
            let (name, event) = rest
                .next()
                .unwrap_or_else(|| panic!("block {index} never closed: {names:?}"));
            assert_eq!(event["index"], json!(index), "{event}");
            match name.as_str() {
                "content_block_delta" => {
                    let delta = &event["delta"];
                    let (kind, key) = match content_block["type"].as_str() {
                        Some("text") => ("text_delta", "text"),
                        Some("tool_use") => ("input_json_delta", "partial_json"),
                        other => panic!("unexpected block type {other:?}"),
                    };
                    assert_eq!(delta["type"], json!(kind), "{event}");
                    pieces.push(delta[key].as_str().expect("delta text").to_owned());
                }
                "content_block_stop" => break,
                other => panic!("{other} inside block {index}: {names:?}"),
            }
        }
        blocks.push(match content_block["type"].as_str() {
            Some("text") => {
                assert_eq!(content_block, json!({"type": "text", "text": ""}));
                Block::Text(pieces)
            }
            _ => Block::Tool(content_block, pieces),
        });
    }
    let start = events[0].1["message"].clone();
    let delta = events[events.len() - 2].1.clone();
    assert_eq!(events[events.len() - 1].1, json!({"type": "message_stop"}));
    (start, blocks, delta)
}

// ---------------------------------------------------------------- gateways and requests

fn simple(name: &str) -> Interaction {
    Recording::load(name).interaction(0).clone()
}

/// A gateway whose `claude` route answers every call with the simple recorded answer.
fn anthropic_gateway() -> (AnthropicUpstream, Gateway) {
    let upstream = AnthropicUpstream::each_call(Reply::recorded(&simple(
        "Anthropic__claude-sonnet-4__simple",
    )));
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    (upstream, gw)
}

/// A gateway whose `oai` route answers every call with `reply`.
fn openai_gateway(reply: Reply) -> (OpenAiUpstream, Gateway) {
    let upstream = OpenAiUpstream::each_call(reply);
    let gw = Gateway::builder()
        .route(Route::openai("oai", &upstream.base_url("/v1")))
        .start();
    (upstream, gw)
}

fn hi(model: &str) -> Value {
    json!({"model": model, "max_tokens": 50,
        "messages": [{"role": "user", "content": "Say hi in Portuguese"}]})
}

/// Asserts an error answer in Anthropic's shape: `status`, `error.type` `kind`, a message that
/// mentions `needle`, and the invocation as `request_id`. Returns the body.
fn assert_anthropic_error(response: &Response, status: u16, kind: &str, needle: &str) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body = response.json();
    assert_eq!(body["type"], json!("error"), "{body}");
    assert_eq!(body["error"]["type"], json!(kind), "{body}");
    let message = body["error"]["message"].as_str().expect("error.message");
    assert!(
        message.contains(needle),
        "{message:?} should mention {needle:?}"
    );
    let id = invocation_id(&response.headers);
    assert_eq!(body["request_id"], json!(id));
    body
}
