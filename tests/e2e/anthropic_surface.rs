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

// ---------------------------------------------------------------- recorded cases, whole

fn check_whole(provider: Provider, name: &str) {
    let recording = Recording::load(name);
    let (upstream, gw) = start(provider, &recording);
    for (step, interaction) in recording.interactions.iter().enumerate() {
        assert!(!interaction.is_sse(), "{name} is a streaming recording");
        let expected = expected(provider, interaction);
        let response = post_messages(
            &gw,
            WITH_PROVIDER_KEY,
            &anthropic_request(provider, interaction),
        );
        assert_eq!(response.status, 200, "{}", response.text());
        assert_eq!(response.header("content-type"), Some("application/json"));
        let id = invocation_id(&response.headers);
        let body = response.json();
        assert_eq!(body, expected_message(&id, &expected), "step {step}");

        let record = gw.get_invocation(&id).json();
        assert_eq!(record["status"], json!("success"), "{record}");
        assert_eq!(record["route"], json!(provider.route()));
        assert_eq!(record["plugin"], json!(provider.plugin()));
        assert_eq!(record["type"], json!("chat"));
        assert_eq!(record["stream"], json!(false));
        assert_eq!(record["response"], body, "the record keeps the answer");
        check_record_usage(&record, &expected);
        // The cost goes in a header, the Messages API having no field for it.
        let header: f64 = response
            .header("x-gateway-cost-usd")
            .expect("x-gateway-cost-usd")
            .parse()
            .expect("a number");
        let recorded_cost = record["usageCost"].as_f64().expect("usageCost");
        assert!(
            (header - recorded_cost).abs() < 1e-9,
            "{header} != {recorded_cost}"
        );

        let requests = upstream.requests();
        assert_eq!(requests.len(), step + 1, "one upstream call per request");
        check_upstream_request(provider, &requests[step], interaction);
    }
}

recorded_tests! {
    anthropic_simple => check_whole(Provider::Anthropic, "Anthropic__claude-sonnet-4__simple");
    anthropic_tool => check_whole(Provider::Anthropic, "Anthropic__claude-sonnet-4__tool");
    anthropic_multi_tool => check_whole(Provider::Anthropic, "Anthropic__claude-sonnet-4__multi_tool");
    openai_simple => check_whole(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__simple");
    openai_tool => check_whole(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__tool");
    openai_multi_tool => check_whole(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__multi_tool");
    gemini_simple => check_whole(Provider::Gemini, "Google__gemini-2.5-flash__simple");
    gemini_tool => check_whole(Provider::Gemini, "Google__gemini-2.5-flash__tool");
    gemini_multi_tool => check_whole(Provider::Gemini, "Google__gemini-2.5-flash__multi_tool");
}

// ---------------------------------------------------------------- recorded cases, streamed

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

fn check_stream(provider: Provider, name: &str) {
    let recording = Recording::load(name);
    let (upstream, gw) = start(provider, &recording);
    for (step, interaction) in recording.interactions.iter().enumerate() {
        let expected = expected(provider, interaction);
        let request = anthropic_request(provider, interaction);
        assert_eq!(
            request["stream"],
            json!(true),
            "{name} is not a streaming recording"
        );
        let response = stream_messages(&gw, WITH_PROVIDER_KEY, &request);
        let id = invocation_id(&response.headers);
        let (message, blocks, delta) = read_stream(&response);

        // The opening: no content, no usage known yet, the model asked for.
        assert_eq!(
            message,
            json!({"id": message_id(&id), "type": "message", "role": "assistant",
                "model": recorded_model(provider, interaction), "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": usage_object(0, 0, 0, 0)}),
        );
        // The blocks: the text first (when there is any), then each call.
        let mut blocks = blocks.into_iter();
        if !expected.text.is_empty() {
            let Some(Block::Text(pieces)) = blocks.next() else {
                panic!("no text block first: {}", response.raw)
            };
            assert_eq!(pieces.concat(), expected.text);
            if let Some(recorded) = &expected.text_pieces {
                assert_eq!(&pieces, recorded, "one text_delta per recorded delta");
            }
        }
        let calls: Vec<(Value, Vec<String>)> = blocks
            .map(|block| match block {
                Block::Tool(start, pieces) => (start, pieces),
                Block::Text(_) => panic!("a text block after the calls: {}", response.raw),
            })
            .collect();
        assert_eq!(calls.len(), expected.calls.len(), "{}", response.raw);
        for (position, ((start, pieces), call)) in calls.iter().zip(&expected.calls).enumerate() {
            assert_eq!(
                start,
                &json!({"type": "tool_use", "id": call_id(call, position), "name": call.1, "input": {}})
            );
            assert!(pieces.iter().all(|p| !p.is_empty()), "{pieces:?}");
            let input: Value =
                serde_json::from_str(&pieces.concat()).expect("the pieces make JSON");
            assert_eq!(
                input, call.2,
                "the partial_json pieces reassemble the input"
            );
            if let Some(recorded) = &expected.json_pieces {
                assert_eq!(
                    pieces, &recorded[position],
                    "one input_json_delta per recorded one"
                );
            }
        }
        assert_eq!(
            delta,
            json!({"type": "message_delta",
                "delta": {"stop_reason": expected.stop_reason, "stop_sequence": null},
                "usage": expected.usage}),
        );

        let record = gw.wait_for_record(&id, |r| r["status"] == json!("success"));
        assert_eq!(record["stream"], json!(true));
        assert_eq!(record["route"], json!(provider.route()));
        assert_eq!(record["plugin"], json!(provider.plugin()));
        assert_eq!(
            record["response"],
            expected_message(&id, &expected),
            "the record keeps the whole message"
        );
        check_record_usage(&record, &expected);

        let requests = upstream.requests();
        assert_eq!(requests.len(), step + 1, "one upstream call per request");
        check_upstream_request(provider, &requests[step], interaction);
    }
}

recorded_tests! {
    anthropic_simple_streaming => check_stream(Provider::Anthropic, "Anthropic__claude-sonnet-4__simple_streaming");
    anthropic_tool_streaming => check_stream(Provider::Anthropic, "Anthropic__claude-sonnet-4__tool_streaming");
    anthropic_multi_tool_streaming => check_stream(Provider::Anthropic, "Anthropic__claude-sonnet-4__multi_tool_streaming");
    openai_simple_streaming => check_stream(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__simple_streaming");
    openai_tool_streaming => check_stream(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__tool_streaming");
    openai_multi_tool_streaming => check_stream(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__multi_tool_streaming");
    gemini_simple_streaming => check_stream(Provider::Gemini, "Google__gemini-2.5-flash__simple_streaming");
    gemini_tool_streaming => check_stream(Provider::Gemini, "Google__gemini-2.5-flash__tool_streaming");
    gemini_multi_tool_streaming => check_stream(Provider::Gemini, "Google__gemini-2.5-flash__multi_tool_streaming");
}

// ---------------------------------------------------------------- requests and parameters

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

#[test]
fn system_as_a_string_or_as_blocks_reaches_the_upstream() {
    let (upstream, gw) = anthropic_gateway();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    body["system"] = json!("Be brief.");
    assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
    body["system"] = json!([
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Answer in Portuguese."},
    ]);
    assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
    let sent: Vec<Value> = upstream
        .requests()
        .iter()
        .map(ReceivedRequest::json)
        .collect();
    assert_eq!(sent[0]["system"], json!("Be brief."));
    assert_eq!(sent[1]["system"], json!("Be brief.\nAnswer in Portuguese."));
    for body in &sent {
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "Say hi in Portuguese"}]}])
        );
        assert_eq!(body["max_tokens"], json!(50));
    }

    // To an OpenAI route, the system prompt is the first message.
    let (upstream, gw) = openai_gateway(Reply::recorded(&simple(
        "OpenAI__openai-gpt-4o-mini__simple",
    )));
    let mut body = hi("oai/gpt-4o-mini");
    body["system"] = json!([{"type": "text", "text": "Be brief."}]);
    assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
    assert_eq!(
        upstream.single_request().json()["messages"],
        json!([{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hi in Portuguese"}])
    );
}

#[test]
fn parameters_take_their_canonical_names_and_unknown_ones_pass_through() {
    let (upstream, gw) =
        openai_gateway(Reply::recorded(&simple("OpenAI__openai-gpt-4o-mini__tool")));
    let mut body = hi("oai/gpt-4o-mini");
    body["stop_sequences"] = json!(["END", "STOP"]);
    body["temperature"] = json!(0.25);
    body["top_p"] = json!(0.5);
    body["metadata"] = json!({"user_id": "user-7"});
    body["service_tier"] = json!("flex");
    body["tools"] = json!([{"name": "weather", "description": "Get the weather",
        "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}]);
    body["tool_choice"] =
        json!({"type": "tool", "name": "weather", "disable_parallel_tool_use": true});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.single_request().json();
    assert_eq!(sent["max_tokens"], json!(50));
    assert_eq!(sent["stop"], json!(["END", "STOP"]));
    assert_eq!(sent["temperature"], json!(0.25));
    assert_eq!(sent["top_p"], json!(0.5));
    assert_eq!(sent["user"], json!("user-7"));
    assert_eq!(sent["service_tier"], json!("flex"));
    assert_eq!(sent["parallel_tool_calls"], json!(false));
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    assert_eq!(
        sent["tools"][0]["function"]["parameters"],
        body["tools"][0]["input_schema"]
    );
    for anthropic_name in ["stop_sequences", "metadata"] {
        assert!(sent.get(anthropic_name).is_none(), "{sent}");
    }
    let record = gw.get_invocation(&invocation_id(&response.headers)).json();
    assert_eq!(record["userId"], json!("user-7"));

    // `any` is "some tool"; `none` is none.
    let (upstream, gw) =
        openai_gateway(Reply::recorded(&simple("OpenAI__openai-gpt-4o-mini__tool")));
    for (choice, sent_choice) in [("any", "required"), ("none", "none"), ("auto", "auto")] {
        body["tool_choice"] = json!({"type": choice});
        assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
        let sent = upstream.requests().last().expect("sent").json();
        assert_eq!(sent["tool_choice"], json!(sent_choice));
        assert!(sent.get("parallel_tool_calls").is_none(), "{sent}");
    }
}

/// A whole OpenAI answer with `finish_reason` and usage.
fn openai_answer(finish_reason: &str, text: &str, usage: Value) -> Reply {
    Reply::json(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason}],
            "usage": usage,
        }),
    )
}

#[test]
fn stop_reasons_map_to_anthropic_words() {
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    for (finish, stop) in [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
    ] {
        let (_upstream, gw) = openai_gateway(openai_answer(finish, "Olá", usage.clone()));
        let body = post_messages(&gw, WITH_PROVIDER_KEY, &hi("oai/gpt-4o-mini")).json();
        assert_eq!(body["stop_reason"], json!(stop), "{finish}: {body}");
        let mut streamed = hi("oai/gpt-4o-mini");
        streamed["stream"] = json!(true);
        // A server that answers whole to a stream request still streams to the caller.
        let (_, _, delta) = read_stream(&stream_messages(&gw, WITH_PROVIDER_KEY, &streamed));
        assert_eq!(
            delta["delta"]["stop_reason"],
            json!(stop),
            "{finish}: {delta}"
        );
    }
}

#[test]
fn cached_prompt_tokens_are_not_input_tokens() {
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
        "prompt_tokens_details": {"cached_tokens": 30}});
    let (_upstream, gw) = openai_gateway(openai_answer("stop", "Olá", usage));
    let body = post_messages(&gw, WITH_PROVIDER_KEY, &hi("oai/gpt-4o-mini")).json();
    assert_eq!(body["usage"], usage_object(70, 5, 30, 0), "{body}");
}

// ---------------------------------------------------------------- keys

#[test]
fn x_api_key_and_bearer_keys_both_authenticate() {
    let (_upstream, gw) = anthropic_gateway();
    let body = hi("claude/claude-sonnet-4-20250514");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["type"], json!("message"));
    let bearer = format!("Bearer {}", gw.key);
    let response = gw.request(
        "POST",
        MESSAGES_PATH,
        None,
        &[
            ("Authorization", bearer.as_str()),
            ("anthropic-version", ANTHROPIC_VERSION),
            ("Provider-API-Key", PROVIDER_KEY),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["type"], json!("message"));
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

#[test]
fn a_missing_or_wrong_key_is_an_authentication_error() {
    let (upstream, gw) = anthropic_gateway();
    let body = hi("claude/claude-sonnet-4-20250514").to_string();
    let missing = gw.request(
        "POST",
        MESSAGES_PATH,
        None,
        &[("anthropic-version", ANTHROPIC_VERSION)],
        body.as_bytes(),
    );
    assert_anthropic_error(&missing, 401, "authentication_error", "key");
    let wrong = gw.request(
        "POST",
        MESSAGES_PATH,
        None,
        &[("x-api-key", "gw_0000000000000000000000000000000000000000")],
        body.as_bytes(),
    );
    assert_anthropic_error(&wrong, 401, "authentication_error", "key");
    assert!(upstream.requests().is_empty());
}

// ---------------------------------------------------------------- errors

#[test]
fn an_unknown_model_or_route_is_not_found() {
    let (upstream, gw) = anthropic_gateway();
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &hi("claude-opus-9"));
    assert_anthropic_error(&response, 404, "not_found_error", "claude-opus-9");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &hi("nowhere/some-model"));
    assert_anthropic_error(&response, 404, "not_found_error", "nowhere");
    assert!(upstream.requests().is_empty());
}

#[test]
fn invalid_requests_are_refused_naming_the_field() {
    let (upstream, gw) = anthropic_gateway();
    let model = "claude/claude-sonnet-4-20250514";
    let mut no_max = hi(model);
    no_max.as_object_mut().expect("object").remove("max_tokens");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &no_max);
    let id = invocation_id(&response.headers);
    assert_anthropic_error(&response, 400, "invalid_request_error", "max_tokens");
    assert_eq!(gw.get_invocation(&id).json()["httpStatus"], json!(400));

    let image = json!({"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "file", "file_id": "file_011"}},
    ]}]});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &image);
    let body = assert_anthropic_error(&response, 400, "invalid_request_error", "send the bytes");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("messages[0].content[1].source.type"),
        "{body}"
    );

    let mut server_tool = hi(model);
    server_tool["tools"] = json!([{"type": "web_search_20250305", "name": "web_search"}]);
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &server_tool);
    assert_anthropic_error(&response, 400, "invalid_request_error", "tools[0].type");

    let mut bad_type = hi(model);
    bad_type["temperature"] = json!("warm");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &bad_type);
    assert_anthropic_error(&response, 400, "invalid_request_error", "temperature");

    let mut zero = hi(model);
    zero["max_tokens"] = json!(0);
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &zero);
    assert_anthropic_error(&response, 400, "invalid_request_error", "max_tokens");

    // The end user's id is at most 256 bytes: a longer one is refused, not recorded whole.
    let mut long_user = hi(model);
    long_user["metadata"] = json!({"user_id": "u".repeat(257)});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &long_user);
    let id = invocation_id(&response.headers);
    let body = assert_anthropic_error(&response, 400, "invalid_request_error", "metadata.user_id");
    assert!(
        body.to_string().len() < 1024,
        "the message repeats the id: {body}"
    );
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(400), "{record}");
    assert!(record["userId"].is_null(), "{record}");

    assert!(
        upstream.requests().is_empty(),
        "nothing invalid goes upstream"
    );
}

#[test]
fn only_post_is_allowed() {
    let (_upstream, gw) = anthropic_gateway();
    let response = gw.request(
        "GET",
        MESSAGES_PATH,
        None,
        &[("x-api-key", gw.key.as_str())],
        b"",
    );
    assert_anthropic_error(&response, 405, "invalid_request_error", "POST");
    assert_eq!(response.header("allow"), Some("POST"));
}

#[test]
fn an_upstream_rate_limit_is_a_rate_limit_error_with_retry_after() {
    let upstream = AnthropicUpstream::always(Reply::anthropic_error(
        429,
        "rate_limit_error",
        "Number of requests has exceeded your rate limit",
        Some("7"),
    ));
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_anthropic_error(
        &response,
        429,
        "rate_limit_error",
        "exceeded your rate limit",
    );
    assert_eq!(response.header("retry-after"), Some("7"));

    // Before a stream has started, the status is the error's own.
    body["stream"] = json!(true);
    let streamed = stream_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(streamed.status, 429, "{}", streamed.raw);
    assert_eq!(streamed.header("retry-after"), Some("7"));
    let error = streamed.json();
    assert_eq!(error["error"]["type"], json!("rate_limit_error"), "{error}");
}

/// A request the provider refuses as the caller's own fault is the caller's 4xx with
/// Anthropic's error type for it and the provider's message (never the key), tried once; an
/// upstream 5xx stays a 502 `api_error` (issue 46 item 7).
#[test]
fn an_upstream_client_error_is_the_callers_in_anthropic_shape() {
    let cases = [
        (400, "invalid_request_error", 400, "invalid_request_error"),
        (404, "not_found_error", 404, "not_found_error"),
        (413, "request_too_large", 413, "request_too_large"),
        (422, "invalid_request_error", 422, "invalid_request_error"),
        (500, "api_error", 502, "api_error"),
    ];
    for (status, upstream_kind, status_out, kind) in cases {
        let message = format!("max_tokens: 50000 > 32000 (key {PROVIDER_KEY})");
        let upstream = AnthropicUpstream::always(Reply::anthropic_error(
            status,
            upstream_kind,
            &message,
            None,
        ));
        let gw = Gateway::builder()
            .route(
                Route::new("claude", "anthropic")
                    .base_url(&upstream.base_url("/v1"))
                    .key("retries", "1")
                    .key("retry_backoff_ms", "1"),
            )
            .start();
        let response = post_messages(
            &gw,
            WITH_PROVIDER_KEY,
            &hi("claude/claude-sonnet-4-20250514"),
        );
        let body = assert_anthropic_error(&response, status_out, kind, "max_tokens: 50000 > 32000");
        assert!(!response.text().contains(PROVIDER_KEY), "{body}");
        let tries = if status < 500 { 1 } else { 2 };
        assert_eq!(upstream.requests().len(), tries, "HTTP {status}: {body}");
    }
}

#[test]
fn an_error_after_the_stream_started_is_an_error_event() {
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-sonnet-4-20250514",
            "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Olá"}}),
        ),
    ];
    let upstream = AnthropicUpstream::each_call(Reply::anthropic_cut_events(
        &events,
        "event: content_block_delta\ndata: {\"type\"",
    ));
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    body["stream"] = json!(true);
    let response = stream_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.raw);
    let events = named_events(&response.raw);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "error"
        ],
        "{}",
        response.raw
    );
    assert_eq!(events[3].1["delta"]["text"], json!("Olá"));
    let error = &events[4].1;
    assert_eq!(error["type"], json!("error"));
    assert_eq!(error["error"]["type"], json!("api_error"), "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("reading the answer"),
        "{error}"
    );
    let record = gw.wait_for_record(&invocation_id(&response.headers), |r| {
        r["status"] == json!("error")
    });
    assert_eq!(record["stream"], json!(true));
}

/// A plugin built against WIT 0.1.0 (no streamed tool calls) streams through the same events.
#[test]
fn a_plugin_of_an_earlier_wit_version_streams_messages_too() {
    let gw = Gateway::builder()
        .route(Route::new("old", "legacy"))
        .start();
    let mut body = hi("old/legacy");
    body["stream"] = json!(true);
    let response = stream_messages(&gw, &[], &body);
    let (message, blocks, delta) = read_stream(&response);
    assert_eq!(message["model"], json!("legacy"));
    let [Block::Text(pieces)] = &blocks[..] else {
        panic!("one text block: {}", response.raw)
    };
    assert_eq!(pieces.concat(), "legacy: Say hi in Portuguese");
    assert_eq!(delta["delta"]["stop_reason"], json!("end_turn"));
    assert_eq!(delta["usage"], usage_object(0, 0, 0, 0));

    body["stream"] = json!(false);
    let whole = post_messages(&gw, &[], &body);
    assert_eq!(whole.status, 200, "{}", whole.text());
    assert_eq!(
        whole.json()["content"],
        json!([{"type": "text", "text": "legacy: Say hi in Portuguese"}])
    );
}

/// Anthropic to Anthropic, the parameters arrive under their own names again.
#[test]
fn parameters_round_trip_to_an_anthropic_route() {
    let (upstream, gw) = anthropic_gateway();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    body["stop_sequences"] = json!(["END"]);
    body["temperature"] = json!(0.5);
    body["top_p"] = json!(0.75);
    body["top_k"] = json!(20);
    body["metadata"] = json!({"user_id": "user-9"});
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    body["tools"] = json!([{"name": "weather", "input_schema": {"type": "object"}}]);
    body["tool_choice"] = json!({"type": "any", "disable_parallel_tool_use": true});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.single_request().json();
    for key in [
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "thinking",
    ] {
        assert_eq!(sent[key], body[key], "{key}: {sent}");
    }
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true}),
        "{sent}"
    );
    for canonical in ["stop", "user", "parallel_tool_calls"] {
        assert!(sent.get(canonical).is_none(), "{canonical}: {sent}");
    }
    let record = gw.get_invocation(&invocation_id(&response.headers)).json();
    assert_eq!(record["userId"], json!("user-9"));
}

/// Anthropic's SDKs list models at the same `GET /v1/models` as OpenAI's; their
/// `anthropic-version` header gets Anthropic's shape (one page), errors included.
#[test]
fn models_are_listed_in_anthropic_shape_for_anthropic_clients() {
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url("http://127.0.0.1:9/v1"))
        .config_line("[models.smart]\nroute = \"claude\"\nmodel = \"claude-sonnet-4-5\"")
        .start();
    let headers = [
        ("x-api-key", gw.key.as_str()),
        ("anthropic-version", ANTHROPIC_VERSION),
    ];
    let listed = gw.request("GET", "/v1/models", None, &headers, b"");
    assert_eq!(listed.status, 200, "{}", listed.text());
    let body = listed.json();
    let data = body["data"].as_array().expect("data");
    let ids: Vec<&str> = data.iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids.first(), Some(&"smart"), "{body}");
    assert!(ids.contains(&"claude/claude-sonnet-4-5"), "{body}");
    assert_eq!(
        data[0],
        json!({"type": "model", "id": "smart", "display_name": "smart",
            "created_at": "1970-01-01T00:00:00Z"})
    );
    assert_eq!(body["has_more"], json!(false));
    assert_eq!(body["first_id"], json!("smart"));
    assert_eq!(body["last_id"], json!(ids.last()));

    let one = gw.request(
        "GET",
        "/v1/models/claude%2Fclaude-sonnet-4-5",
        None,
        &headers,
        b"",
    );
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.json()["id"], json!("claude/claude-sonnet-4-5"));
    let unknown = gw.request("GET", "/v1/models/nope", None, &headers, b"");
    assert_anthropic_error(&unknown, 404, "not_found_error", "nope");
    let bad_key = gw.request(
        "GET",
        "/v1/models",
        None,
        &[
            ("x-api-key", "gw_wrong"),
            ("anthropic-version", ANTHROPIC_VERSION),
        ],
        b"",
    );
    assert_anthropic_error(&bad_key, 401, "authentication_error", "key");
}

/// A key scoped to one route sees only that route's models; another's answers 404 in
/// Anthropic's shape, as an unknown model does.
#[test]
fn models_outside_the_keys_scope_are_not_found_in_anthropic_shape() {
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url("http://127.0.0.1:9/v1"))
        .route(Route::echo("demo"))
        .config_line("[models.smart]\nroute = \"claude\"\nmodel = \"claude-sonnet-4-5\"")
        .start();
    let args = ["key", "create", gw.project_id.as_str(), "--routes", "demo"];
    let key = gw
        .cli(&args)
        .checked("key create --routes demo")
        .last_line();
    let headers = [
        ("x-api-key", key.as_str()),
        ("anthropic-version", ANTHROPIC_VERSION),
    ];
    let listed = gw.request("GET", "/v1/models", None, &headers, b"");
    assert_eq!(listed.status, 200, "{}", listed.text());
    let body = listed.json();
    let ids: Vec<&str> = body["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&"demo/echo"), "{body}");
    assert!(
        ids.iter().all(|id| id.starts_with("demo/")),
        "names outside --routes demo: {body}"
    );
    assert_eq!(body["first_id"], json!(ids.first()), "{body}");
    for (path, name) in [
        (
            "/v1/models/claude%2Fclaude-sonnet-4-5",
            "claude/claude-sonnet-4-5",
        ),
        ("/v1/models/smart", "smart"),
    ] {
        let refused = gw.request("GET", path, None, &headers, b"");
        assert_anthropic_error(&refused, 404, "not_found_error", name);
    }
}
