//! The OpenAI-compatible surface (`/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`,
//! `/v1/models`) through the real gateway: OpenAI-format requests reach the openai, anthropic
//! and gemini plugins, which replay recorded provider traffic, and the answers, chunks and
//! errors come back in OpenAI's exact shapes.

use gateway_test_support::sse::{event_data, split_events};
use gateway_test_support::upstream::openai::legacy_text;
use gateway_test_support::{
    AnthropicUpstream, Gateway, GeminiUpstream, Interaction, OpenAiUpstream, ReceivedRequest,
    Recording, Reply, Response, Route, assert_uuid_v7, fake_embedding, recorded_tests, unique,
};
use serde_json::{Value, json};

mod chat;
mod completions;
mod embeddings;
mod errors;
mod models;
mod recorded;

/// Every route's provider key, from the gateway's environment.
const PROVIDER_KEY: &str = "sk-provider-test-0123456789";

// ---------------------------------------------------------------- the three providers

#[derive(Clone, Copy, Debug, PartialEq)]
enum Provider {
    OpenAi,
    Anthropic,
    Gemini,
}

use Provider::{Anthropic, Gemini, OpenAi};

impl Provider {
    fn route(self) -> &'static str {
        match self {
            OpenAi => "oai",
            Anthropic => "claude",
            Gemini => "gem",
        }
    }

    fn plugin(self) -> &'static str {
        match self {
            OpenAi => "openai",
            Anthropic => "anthropic",
            Gemini => "gemini",
        }
    }

    fn model(self) -> &'static str {
        match self {
            OpenAi => "gpt-4o-mini",
            Anthropic => "claude-sonnet-4-20250514",
            Gemini => "gemini-2.5-flash",
        }
    }

    /// `ROUTE/MODEL`, as OpenAI-format callers name it.
    fn target(self) -> String {
        format!("{}/{}", self.route(), self.model())
    }

    fn recording(self, case: &str) -> Recording {
        let prefix = match self {
            OpenAi => "OpenAI__openai-gpt-4o-mini",
            Anthropic => "Anthropic__claude-sonnet-4",
            Gemini => "Google__gemini-2.5-flash",
        };
        Recording::load(&format!("{prefix}__{case}"))
    }
}

/// A fake upstream of one of the providers, kept alive for the test.
enum Upstream {
    OpenAi(OpenAiUpstream),
    Anthropic(AnthropicUpstream),
    Gemini(GeminiUpstream),
}

impl Upstream {
    fn replay(provider: Provider, recording: &Recording) -> Upstream {
        match provider {
            OpenAi => Upstream::OpenAi(OpenAiUpstream::replay(recording)),
            Anthropic => Upstream::Anthropic(AnthropicUpstream::replay(recording)),
            Gemini => Upstream::Gemini(GeminiUpstream::replay(recording)),
        }
    }

    fn base_url(&self) -> String {
        match self {
            Upstream::OpenAi(u) => u.base_url("/v1"),
            Upstream::Anthropic(u) => u.base_url("/v1"),
            Upstream::Gemini(u) => u.base_url("/v1beta"),
        }
    }

    fn requests(&self) -> Vec<ReceivedRequest> {
        match self {
            Upstream::OpenAi(u) => u.requests(),
            Upstream::Anthropic(u) => u.requests(),
            Upstream::Gemini(u) => u.requests(),
        }
    }
}

/// A route of `provider` at `base_url`, keyed by the gateway and priced, so that every answer
/// has a cost.
fn route_for(provider: Provider, base_url: &str, key_var: &str) -> Route {
    Route::new(provider.route(), provider.plugin())
        .base_url(base_url)
        .api_key_env(key_var)
        .default_model(provider.model())
        .price(provider.model(), 1.5, 4.0)
}

fn gateway_for(provider: Provider, upstream: &Upstream) -> Gateway {
    let var = unique("OPENAI_SURFACE_KEY_");
    Gateway::builder()
        .route(route_for(provider, &upstream.base_url(), &var))
        .env(&var, PROVIDER_KEY)
        .start()
}

// ---------------------------------------------------------------- talking to the gateway

fn bearer(gw: &Gateway) -> String {
    format!("Bearer {}", gw.key)
}

/// POSTs an OpenAI-format body with `Authorization: Bearer KEY`, as OpenAI's SDKs do.
fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    gw.request(
        "POST",
        path,
        None,
        &[
            ("Authorization", &bearer(gw)),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

/// A streamed answer, split as OpenAI's SDKs read it.
struct Streamed {
    status: u16,
    headers: Vec<(String, String)>,
    raw: String,
    /// Every event's data but `[DONE]`, parsed.
    chunks: Vec<Value>,
    /// Whether the last event was `data: [DONE]`.
    done: bool,
}

impl Streamed {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn post_stream(gw: &Gateway, path: &str, body: &Value) -> Streamed {
    let auth = bearer(gw);
    let mut conn = gw.open_stream_with_headers(path, None, &[("Authorization", &auth)], body);
    let raw = String::from_utf8_lossy(&conn.read_to_end()).into_owned();
    let datas: Vec<String> = split_events(&raw)
        .iter()
        .filter_map(|event| event_data(event))
        .collect();
    let done = datas.last().is_some_and(|d| d == "[DONE]");
    let chunks = datas
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d:?} in {raw}")))
        .collect();
    assert_eq!(
        datas.iter().filter(|d| *d == "[DONE]").count(),
        usize::from(done),
        "[DONE] only last: {raw}"
    );
    Streamed {
        status: conn.status,
        headers: conn.headers.clone(),
        raw,
        chunks,
        done,
    }
}

/// Asserts an OpenAI-shape error: `status`, `type`, and `param` / `code` when given; the
/// message mentions `needle`. Returns the error object.
fn assert_openai_error(
    response: &Response,
    status: u16,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
    needle: &str,
) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    let body = response.json();
    let error = &body["error"];
    let keys: Vec<&String> = error.as_object().expect("error object").keys().collect();
    assert_eq!(keys, ["code", "message", "param", "type"], "{body}");
    assert_eq!(error["type"], json!(kind), "{body}");
    assert_eq!(error["param"], json!(param), "{body}");
    assert_eq!(error["code"], json!(code), "{body}");
    let message = error["message"].as_str().expect("message");
    assert!(
        message.contains(needle),
        "{message:?} should mention {needle:?}"
    );
    assert_uuid_v7(response.header("x-invocation-id").expect("x-invocation-id"));
    error.clone()
}

// ---------------------------------------------------------------- requests from recordings

/// The text of an Anthropic `content`: a string or text blocks.
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

/// JSON Schema types as callers write them (Gemini's recordings have upper-case names).
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

fn function_tool(name: &Value, description: &Value, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
}

/// The OpenAI-format chat body that makes `provider`'s plugin send what `interaction`
/// recorded (a stream when it was one, with `include_usage`).
fn request_from(provider: Provider, interaction: &Interaction) -> Value {
    let recorded = interaction.request_json();
    let mut body = match provider {
        OpenAi => {
            let mut body = recorded.clone();
            body.as_object_mut()
                .expect("recorded object")
                .remove("stream_options");
            body
        }
        Anthropic => anthropic_request(&recorded),
        Gemini => gemini_request(&recorded),
    };
    body["model"] = json!(provider.target());
    let stream = match provider {
        Gemini => interaction.request.url.contains(":streamGenerateContent"),
        _ => interaction.requests_stream(),
    };
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    } else {
        body.as_object_mut().expect("object").remove("stream");
    }
    body
}

fn anthropic_request(recorded: &Value) -> Value {
    let mut messages = Vec::new();
    if recorded.get("system").is_some() {
        messages.push(json!({"role": "system", "content": block_text(&recorded["system"])}));
    }
    for message in recorded["messages"].as_array().expect("recorded messages") {
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        let text = block_text(&message["content"]);
        if message["role"] == json!("assistant") {
            let calls: Vec<Value> = blocks
                .iter()
                .filter(|b| b["type"] == json!("tool_use"))
                .map(|c| {
                    json!({"id": c["id"], "type": "function",
                        "function": {"name": c["name"], "arguments": c["input"].to_string()}})
                })
                .collect();
            let content = if text.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            let mut converted = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                converted["tool_calls"] = json!(calls);
            }
            messages.push(converted);
            continue;
        }
        for result in blocks.iter().filter(|b| b["type"] == json!("tool_result")) {
            messages.push(
                json!({"role": "tool", "tool_call_id": result["tool_use_id"],
                "content": block_text(&result["content"])}),
            );
        }
        if !text.is_empty() {
            // As content parts, joined the way the surface joins them.
            messages.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}));
        }
    }
    let mut body = json!({"messages": messages, "max_tokens": recorded["max_tokens"]});
    if let Some(tools) = recorded["tools"].as_array() {
        body["tools"] = tools
            .iter()
            .map(|t| function_tool(&t["name"], &t["description"], t["input_schema"].clone()))
            .collect();
        body["tool_choice"] = json!("auto");
    }
    body
}

fn gemini_request(recorded: &Value) -> Value {
    let mut messages = Vec::new();
    for part in recorded["systemInstruction"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        messages.push(json!({"role": "developer", "content": part["text"]}));
    }
    for content in recorded["contents"].as_array().expect("contents") {
        let parts = content["parts"].as_array().expect("parts");
        if content["role"] == json!("model") {
            let calls: Vec<Value> = parts
                .iter()
                .map(|p| &p["functionCall"])
                .map(|c| {
                    json!({"id": c["id"], "type": "function", "function": {
                        "name": c["name"], "arguments": c["args"].to_string()}})
                })
                .collect();
            messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
            continue;
        }
        for part in parts {
            if let Some(text) = part["text"].as_str() {
                messages.push(json!({"role": "user", "content": text}));
            } else {
                let result = &part["functionResponse"];
                messages.push(json!({"role": "tool", "tool_call_id": result["id"],
                    "content": result["response"].to_string()}));
            }
        }
    }
    let mut body = json!({
        "messages": messages,
        "max_tokens": recorded["generationConfig"]["maxOutputTokens"],
    });
    if let Some(tools) = recorded["tools"].as_array() {
        body["tools"] = tools
            .iter()
            .flat_map(|t| t["functionDeclarations"].as_array().expect("declarations"))
            .map(|f| function_tool(&f["name"], &f["description"], lower_types(&f["parameters"])))
            .collect();
        body["tool_choice"] = json!("auto");
    }
    body
}

// ---------------------------------------------------------------- what was recorded

/// What a recorded answer says, in OpenAI's words.
#[derive(Debug, Default)]
struct Expected {
    text: String,
    finish_reason: String,
    /// `(id, name, arguments)`; Gemini's calls have no ids (`None`).
    calls: Vec<(Option<String>, String, Value)>,
    /// The exact arguments text, where the provider sends text (OpenAI, Anthropic streams).
    argument_texts: Option<Vec<String>>,
    /// `(prompt, completion, total, reasoning)`.
    usage: (u64, u64, u64, u64),
}

fn expected(provider: Provider, interaction: &Interaction) -> Expected {
    match provider {
        OpenAi => {
            let answer = interaction.answer();
            let (prompt, completion, total) = answer.usage.expect("recorded usage");
            Expected {
                text: answer.text,
                finish_reason: answer.finish_reason.expect("finish reason"),
                calls: answer
                    .tool_calls
                    .iter()
                    .map(|(id, name, args)| (Some(id.clone()), name.clone(), parse_json(args)))
                    .collect(),
                argument_texts: Some(answer.tool_calls.into_iter().map(|c| c.2).collect()),
                usage: (prompt, completion, total, 0),
            }
        }
        Anthropic => anthropic_expected(interaction),
        Gemini => gemini_expected(interaction),
    }
}

fn parse_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

fn anthropic_reason(stop_reason: &Value) -> String {
    match stop_reason.as_str().unwrap_or_default() {
        "end_turn" | "stop_sequence" => "stop",
        "max_tokens" => "length",
        "tool_use" => "tool_calls",
        other => panic!("unexpected recorded stop reason {other:?}"),
    }
    .to_owned()
}

fn anthropic_expected(interaction: &Interaction) -> Expected {
    let mut answer = Expected::default();
    let mut usage = serde_json::Map::new();
    let mut merge = |value: &Value| {
        for (key, value) in value.as_object().into_iter().flatten() {
            if value.is_u64() {
                usage.insert(key.clone(), value.clone());
            }
        }
    };
    // (block index, id, name, arguments text)
    let mut calls: Vec<(u64, String, String, String)> = Vec::new();
    if interaction.is_sse() {
        for event in interaction.sse_payloads() {
            match event["type"].as_str() {
                Some("message_start") => merge(&event["message"]["usage"]),
                Some("content_block_start")
                    if event["content_block"]["type"] == json!("tool_use") =>
                {
                    let block = &event["content_block"];
                    calls.push((
                        event["index"].as_u64().expect("index"),
                        block["id"].as_str().expect("id").to_owned(),
                        block["name"].as_str().expect("name").to_owned(),
                        String::new(),
                    ));
                }
                Some("content_block_delta") => {
                    let delta = &event["delta"];
                    if let Some(text) = delta["text"].as_str() {
                        answer.text.push_str(text);
                    }
                    if let Some(piece) = delta["partial_json"].as_str() {
                        let index = event["index"].as_u64().expect("index");
                        let call = calls
                            .iter_mut()
                            .find(|c| c.0 == index)
                            .expect("a started tool_use block");
                        call.3.push_str(piece);
                    }
                }
                Some("message_delta") => {
                    answer.finish_reason = anthropic_reason(&event["delta"]["stop_reason"]);
                    merge(&event["usage"]);
                }
                _ => {}
            }
        }
        answer.argument_texts = Some(calls.iter().map(|c| c.3.clone()).collect());
    } else {
        let body: Value = parse_json(&interaction.response.body);
        for block in body["content"].as_array().expect("content") {
            match block["type"].as_str() {
                Some("text") => answer.text.push_str(block["text"].as_str().unwrap_or("")),
                Some("tool_use") => calls.push((
                    0,
                    block["id"].as_str().expect("id").to_owned(),
                    block["name"].as_str().expect("name").to_owned(),
                    block["input"].to_string(),
                )),
                _ => {}
            }
        }
        answer.finish_reason = anthropic_reason(&body["stop_reason"]);
        merge(&body["usage"]);
    }
    answer.calls = calls
        .into_iter()
        .map(|(_, id, name, args)| (Some(id), name, parse_json(&args)))
        .collect();
    let get = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt =
        get("input_tokens") + get("cache_read_input_tokens") + get("cache_creation_input_tokens");
    let completion = get("output_tokens");
    answer.usage = (prompt, completion, prompt + completion, 0);
    answer
}

fn gemini_expected(interaction: &Interaction) -> Expected {
    let payloads: Vec<Value> = if interaction.request.url.contains(":streamGenerateContent") {
        split_events(&interaction.response.body)
            .iter()
            .filter_map(|event| event_data(event))
            .map(|data| parse_json(&data))
            .collect()
    } else {
        vec![parse_json(&interaction.response.body)]
    };
    let mut answer = Expected::default();
    let mut reason = String::new();
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
                answer.text.push_str(text);
            }
            if part["functionCall"].is_object() {
                let call = &part["functionCall"];
                answer.calls.push((
                    None,
                    call["name"].as_str().expect("name").to_owned(),
                    call["args"].clone(),
                ));
            }
        }
        if let Some(r) = candidate["finishReason"].as_str() {
            reason = r.to_owned();
        }
        let usage = &payload["usageMetadata"];
        if usage.is_object() {
            let count = |key: &str| usage[key].as_u64().unwrap_or(0);
            let thoughts = count("thoughtsTokenCount");
            answer.usage = (
                count("promptTokenCount"),
                count("candidatesTokenCount") + thoughts,
                count("totalTokenCount"),
                thoughts,
            );
        }
    }
    assert_eq!(reason, "STOP", "unexpected recorded finish reason");
    answer.finish_reason = if answer.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
    .to_owned();
    answer
}

// ---------------------------------------------------------------- checking answers

/// The record of invocation `id` once it has succeeded.
fn success_record(gw: &Gateway, id: &str, provider: Provider) -> Value {
    let record = gw.wait_for_record(id, |r| r["status"] == json!("success"));
    assert_eq!(record["route"], json!(provider.route()), "{record}");
    assert_eq!(record["plugin"], json!(provider.plugin()), "{record}");
    record
}

/// `usage` in OpenAI's shape with the recorded counts.
fn check_usage(usage: &Value, expected: &Expected) {
    let (prompt, completion, total, reasoning) = expected.usage;
    assert_eq!(usage["prompt_tokens"], json!(prompt), "{usage}");
    assert_eq!(usage["completion_tokens"], json!(completion), "{usage}");
    assert_eq!(usage["total_tokens"], json!(total), "{usage}");
    assert!(
        usage["prompt_tokens_details"]["cached_tokens"].is_u64(),
        "{usage}"
    );
    assert_eq!(
        usage["completion_tokens_details"]["reasoning_tokens"],
        json!(reasoning),
        "{usage}"
    );
}

/// `(id, name, arguments)` of calls in OpenAI's `tool_calls` shape, checked against the
/// recording: ids where the provider has them, names, arguments as JSON (and as exact text
/// where the provider sent text).
fn check_calls(calls: &[(String, String, String)], expected: &Expected) {
    assert_eq!(calls.len(), expected.calls.len(), "{calls:?}");
    for (call, (id, name, args)) in calls.iter().zip(&expected.calls) {
        match id {
            Some(id) => assert_eq!(&call.0, id),
            None => assert!(!call.0.is_empty(), "a call without an id: {call:?}"),
        }
        assert_eq!(&call.1, name);
        assert_eq!(&parse_json(&call.2), args, "{call:?}");
    }
    if let Some(texts) = &expected.argument_texts {
        let sent: Vec<&String> = calls.iter().map(|c| &c.2).collect();
        assert_eq!(sent, texts.iter().collect::<Vec<_>>());
    }
}

/// The cost header is the record's cost.
fn check_cost(header: Option<&str>, record: &Value) {
    let header: f64 = header
        .expect("x-gateway-cost-usd header")
        .parse()
        .expect("a number");
    let recorded = record["usageCost"].as_f64().expect("usageCost");
    assert!(recorded > 0.0, "{record}");
    assert!((header - recorded).abs() < 1e-9, "{header} != {recorded}");
}

/// A whole `chat.completion` of `expected`; returns its first choice.
fn check_completion(
    gw: &Gateway,
    provider: Provider,
    response: &Response,
    expected: &Expected,
) -> Value {
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    let id = response.header("x-invocation-id").expect("x-invocation-id");
    assert_uuid_v7(id);
    assert_eq!(
        body["id"],
        json!(format!("chatcmpl-{}", id.replace('-', "")))
    );
    assert_eq!(body["object"], json!("chat.completion"));
    assert!(
        body["created"].as_u64().is_some_and(|t| t > 1_700_000_000),
        "{body}"
    );
    assert!(
        body["model"]
            .as_str()
            .is_some_and(|m| m.starts_with(provider.model())),
        "{body}"
    );
    let choice = body["choices"][0].clone();
    assert_eq!(choice["index"], json!(0));
    let message = &choice["message"];
    assert_eq!(message["role"], json!("assistant"));
    assert_eq!(message["refusal"], Value::Null);
    if expected.text.is_empty() && !expected.calls.is_empty() {
        assert_eq!(message["content"], Value::Null, "{body}");
    } else {
        assert_eq!(message["content"], json!(expected.text), "{body}");
    }
    assert!(message.get("function_call").is_none(), "{body}");
    if expected.calls.is_empty() {
        assert!(message.get("tool_calls").is_none(), "{body}");
    } else {
        let calls: Vec<(String, String, String)> = message["tool_calls"]
            .as_array()
            .expect("tool_calls")
            .iter()
            .map(|c| {
                assert_eq!(c["type"], json!("function"), "{c}");
                (
                    c["id"].as_str().expect("id").to_owned(),
                    c["function"]["name"].as_str().expect("name").to_owned(),
                    c["function"]["arguments"]
                        .as_str()
                        .expect("arguments")
                        .to_owned(),
                )
            })
            .collect();
        check_calls(&calls, expected);
    }
    assert_eq!(choice["finish_reason"], json!(expected.finish_reason));
    assert!(choice.get("logprobs").is_some(), "{body}");
    check_usage(&body["usage"], expected);

    let record = success_record(gw, id, provider);
    check_cost(response.header("x-gateway-cost-usd"), &record);
    assert_eq!(record["response"], body, "the record keeps the answer");
    choice
}

/// What a stream of chat chunks adds up to, checking every chunk's framing on the way.
#[derive(Debug, Default)]
struct Reassembled {
    text: String,
    /// `(id, name, arguments)` by call index.
    calls: Vec<(String, String, String)>,
    /// How many chunks carried a piece of some call's arguments.
    argument_pieces: usize,
    finish_reason: Option<String>,
    usage: Option<Value>,
}

fn reassemble(stream: &Streamed) -> Reassembled {
    assert_eq!(stream.status, 200, "{}", stream.raw);
    assert!(
        stream
            .header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream")),
        "{:?}",
        stream.headers
    );
    assert!(stream.done, "no [DONE] at the end: {}", stream.raw);
    let id = stream.header("x-invocation-id").expect("x-invocation-id");
    let first = &stream.chunks[0];
    assert_eq!(
        first["id"],
        json!(format!("chatcmpl-{}", id.replace('-', "")))
    );
    assert_eq!(
        first["choices"][0]["delta"]["role"],
        json!("assistant"),
        "the first delta names the role: {first}"
    );
    let mut out = Reassembled::default();
    for (n, chunk) in stream.chunks.iter().enumerate() {
        assert_eq!(chunk["object"], json!("chat.completion.chunk"), "{chunk}");
        for key in ["id", "created", "model"] {
            assert_eq!(chunk[key], first[key], "every chunk has the same {key}");
        }
        let choices = chunk["choices"].as_array().expect("choices");
        if choices.is_empty() {
            assert_eq!(n, stream.chunks.len() - 1, "the usage chunk is the last");
            out.usage = Some(chunk["usage"].clone());
            continue;
        }
        for choice in choices {
            assert_eq!(choice["index"], json!(0));
            assert!(
                out.finish_reason.is_none(),
                "a chunk after the finish: {chunk}"
            );
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str() {
                out.text.push_str(text);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = call["index"].as_u64().expect("index") as usize;
                if call.get("id").is_some() {
                    assert_eq!(index, out.calls.len(), "calls start in order: {chunk}");
                    assert_eq!(call["type"], json!("function"));
                    out.calls.push((
                        call["id"].as_str().expect("id").to_owned(),
                        String::new(),
                        String::new(),
                    ));
                }
                let entry = out.calls.get_mut(index).expect("a started call");
                if let Some(name) = call["function"]["name"].as_str() {
                    entry.1.push_str(name);
                }
                if let Some(args) = call["function"]["arguments"].as_str()
                    && !args.is_empty()
                {
                    entry.2.push_str(args);
                    out.argument_pieces += 1;
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                assert_eq!(delta, &json!({}), "the finishing chunk has an empty delta");
                out.finish_reason = Some(reason.to_owned());
            }
        }
    }
    out
}

fn check_stream(
    gw: &Gateway,
    provider: Provider,
    stream: &Streamed,
    expected: &Expected,
) -> Reassembled {
    let out = reassemble(stream);
    assert_eq!(out.text, expected.text, "{}", stream.raw);
    check_calls(&out.calls, expected);
    assert_eq!(
        out.finish_reason.as_deref(),
        Some(expected.finish_reason.as_str())
    );
    check_usage(out.usage.as_ref().expect("a usage chunk"), expected);

    let id = stream.header("x-invocation-id").expect("x-invocation-id");
    let record = success_record(gw, id, provider);
    assert_eq!(record["stream"], json!(true));
    assert!(
        record["usageCost"].as_f64().is_some_and(|c| c > 0.0),
        "{record}"
    );
    // The record keeps the whole answer, as a chat.completion.
    let message = &record["response"]["choices"][0]["message"];
    if !expected.text.is_empty() {
        assert_eq!(message["content"], json!(expected.text), "{record}");
    }
    out
}
