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

// ---------------------------------------------------------------- recorded cases

fn check_simple(provider: Provider, case: &str) {
    let recording = provider.recording(case);
    let upstream = Upstream::replay(provider, &recording);
    let gw = gateway_for(provider, &upstream);
    let interaction = recording.interaction(0);
    let expected = expected(provider, interaction);
    let body = request_from(provider, interaction);
    if interaction.is_sse() {
        let stream = post_stream(&gw, "/v1/chat/completions", &body);
        let out = check_stream(&gw, provider, &stream, &expected);
        assert!(out.calls.is_empty());
    } else {
        let response = post(&gw, "/v1/chat/completions", &body);
        check_completion(&gw, provider, &response, &expected);
    }
    assert_eq!(upstream.requests().len(), 1);
}

/// Step one asks for tool calls; step two sends the results back and gets the final answer.
fn check_tool(provider: Provider, case: &str) {
    let recording = provider.recording(case);
    let upstream = Upstream::replay(provider, &recording);
    let gw = gateway_for(provider, &upstream);
    for (step, interaction) in recording.interactions.iter().enumerate().take(2) {
        let expected = expected(provider, interaction);
        if step == 0 {
            assert!(!expected.calls.is_empty(), "{case} has no tool call");
        }
        let body = request_from(provider, interaction);
        if interaction.is_sse() {
            let stream = post_stream(&gw, "/v1/chat/completions", &body);
            let out = check_stream(&gw, provider, &stream, &expected);
            if step == 0 && provider != Gemini {
                // The arguments came in pieces as the model wrote them, not whole at the end.
                assert!(
                    out.argument_pieces > expected.calls.len(),
                    "{} pieces: {}",
                    out.argument_pieces,
                    stream.raw
                );
            }
        } else {
            let response = post(&gw, "/v1/chat/completions", &body);
            check_completion(&gw, provider, &response, &expected);
        }
    }
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
}

recorded_tests! {
    openai_simple => check_simple(OpenAi, "simple");
    openai_simple_streaming => check_simple(OpenAi, "simple_streaming");
    openai_tool => check_tool(OpenAi, "tool");
    openai_tool_streaming => check_tool(OpenAi, "tool_streaming");
    openai_multi_tool => check_tool(OpenAi, "multi_tool");
    openai_multi_tool_streaming => check_tool(OpenAi, "multi_tool_streaming");
    anthropic_simple => check_simple(Anthropic, "simple");
    anthropic_simple_streaming => check_simple(Anthropic, "simple_streaming");
    anthropic_tool => check_tool(Anthropic, "tool");
    anthropic_tool_streaming => check_tool(Anthropic, "tool_streaming");
    anthropic_multi_tool => check_tool(Anthropic, "multi_tool");
    anthropic_multi_tool_streaming => check_tool(Anthropic, "multi_tool_streaming");
    gemini_simple => check_simple(Gemini, "simple");
    gemini_simple_streaming => check_simple(Gemini, "simple_streaming");
    gemini_tool => check_tool(Gemini, "tool");
    gemini_tool_streaming => check_tool(Gemini, "tool_streaming");
    gemini_multi_tool => check_tool(Gemini, "multi_tool");
    gemini_multi_tool_streaming => check_tool(Gemini, "multi_tool_streaming");
}

// ---------------------------------------------------------------- request features

/// What the surface does not read reaches the OpenAI upstream under its own name; `user` is
/// also the record's user; `developer` is a system message.
#[test]
fn parameters_pass_through_and_user_is_recorded() {
    let recording = OpenAi.recording("simple");
    let upstream = Upstream::replay(OpenAi, &recording);
    let gw = gateway_for(OpenAi, &upstream);
    let body = json!({
        "model": OpenAi.target(),
        "messages": [{"role": "developer", "content": "Be brief"}, {"role": "user", "content": "Say hi in Portuguese"}],
        "temperature": 0.25,
        "max_completion_tokens": 77,
        "seed": 7,
        "reasoning_effort": "low",
        "user": "end-user-9",
        "top_p": null,
    });
    let response = post(&gw, "/v1/chat/completions", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["model"], json!("gpt-4o-mini"));
    assert_eq!(sent["temperature"], json!(0.25));
    assert_eq!(sent["max_completion_tokens"], json!(77));
    assert_eq!(sent["seed"], json!(7));
    assert_eq!(sent["reasoning_effort"], json!("low"));
    assert_eq!(sent["user"], json!("end-user-9"));
    assert!(sent.get("top_p").is_none(), "a null is not given: {sent}");
    assert_eq!(sent["messages"][0]["role"], json!("system"), "{sent}");
    let id = response.header("x-invocation-id").expect("id");
    let record = success_record(&gw, id, OpenAi);
    assert_eq!(record["userId"], json!("end-user-9"));
}

/// Legacy `functions` / `function_call`: the answer carries `function_call`, not `tool_calls`,
/// whole and streamed.
#[test]
fn legacy_functions_answer_with_function_call() {
    let (whole, streamed) = (OpenAi.recording("tool"), OpenAi.recording("tool_streaming"));
    let interactions = [whole.interaction(0), streamed.interaction(0)];
    let upstream = Upstream::OpenAi(OpenAiUpstream::script(
        interactions.iter().map(|i| Reply::recorded(i)).collect(),
    ));
    let gw = gateway_for(OpenAi, &upstream);
    for (n, interaction) in interactions.into_iter().enumerate() {
        let expected = expected(OpenAi, interaction);
        let mut body = request_from(OpenAi, interaction);
        let tools = body
            .as_object_mut()
            .expect("object")
            .remove("tools")
            .expect("tools");
        body.as_object_mut().expect("object").remove("tool_choice");
        body["functions"] = tools
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["function"].clone())
            .collect();
        body["function_call"] = json!("auto");
        let (name, arguments) = (
            &expected.calls[0].1,
            &expected.argument_texts.as_ref().expect("texts")[0],
        );
        if n == 0 {
            let response = post(&gw, "/v1/chat/completions", &body);
            assert_eq!(response.status, 200, "{}", response.text());
            let answer = response.json();
            let choice = &answer["choices"][0];
            assert_eq!(
                choice["message"]["function_call"],
                json!({"name": name, "arguments": arguments}),
                "{answer}"
            );
            assert!(choice["message"].get("tool_calls").is_none(), "{answer}");
            assert_eq!(choice["finish_reason"], json!("function_call"));
        } else {
            let stream = post_stream(&gw, "/v1/chat/completions", &body);
            assert!(stream.done, "{}", stream.raw);
            let calls: Vec<Value> = stream
                .chunks
                .iter()
                .flat_map(|c| c["choices"].as_array().cloned().unwrap_or_default())
                .filter_map(|c| c["delta"].get("function_call").cloned())
                .collect();
            assert_eq!(
                calls,
                [json!({"name": name, "arguments": arguments})],
                "{}",
                stream.raw
            );
            assert!(!stream.raw.contains("tool_calls"), "{}", stream.raw);
            let finish: Vec<&Value> = stream
                .chunks
                .iter()
                .filter_map(|c| c["choices"][0].get("finish_reason"))
                .filter(|r| !r.is_null())
                .collect();
            assert_eq!(finish, [&json!("function_call")]);
        }
    }
}

/// A plugin that does not stream its calls (echo) has them sent whole in the final chunks,
/// with an id; `tool_choice` naming a function makes echo call it.
#[test]
fn calls_not_streamed_by_the_plugin_come_in_the_last_chunks() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let body = json!({
        "model": "demo",
        "messages": [{"role": "user", "content": "weather in Rome"}],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "stream": true,
    });
    let stream = post_stream(&gw, "/v1/chat/completions", &body);
    let out = reassemble(&stream);
    assert_eq!(out.calls.len(), 1, "{}", stream.raw);
    assert_eq!(out.calls[0].1, "weather");
    assert!(!out.calls[0].0.is_empty());
    assert_eq!(
        parse_json(&out.calls[0].2),
        json!({"input": "weather in Rome"})
    );
    assert_eq!(out.finish_reason.as_deref(), Some("tool_calls"));
    assert!(
        out.usage.is_none(),
        "no usage chunk without include_usage: {}",
        stream.raw
    );
    assert_eq!(out.text, "");
    // The opening chunk of a choice that only calls has null content.
    assert_eq!(
        stream.chunks[0]["choices"][0]["delta"]["content"],
        Value::Null
    );
}

/// `model` as an alias of the config, and `x-api-key` instead of `Authorization`.
#[test]
fn aliases_and_x_api_key() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("[models.fast]\nroute = \"demo\"\nmodel = \"echo\"")
        .start();
    let body = json!({"model": "fast", "messages": [{"role": "user", "content": "hola amigo"}]});
    let response = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("x-api-key", &gw.key)],
        body.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        json!("hola amigo")
    );
    assert_eq!(answer["model"], json!("echo"));
    assert_eq!(answer["usage"]["total_tokens"], json!(4));
    let cost = response.header("x-gateway-cost-usd").expect("cost header");
    assert_eq!(cost.parse::<f64>().ok(), Some(0.0));

    let bad = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("x-api-key", "gw_not_a_key")],
        body.to_string().as_bytes(),
    );
    assert_openai_error(
        &bad,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );
}

/// The legacy text endpoint: `text_completion` objects, whole and streamed, with usage.
#[test]
fn legacy_text_completions() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let response = post(
        &gw,
        "/v1/completions",
        &json!({"model": "demo/echo", "prompt": ["one two three"]}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    let id = response.header("x-invocation-id").expect("id");
    assert_eq!(body["id"], json!(format!("cmpl-{}", id.replace('-', ""))));
    assert_eq!(body["object"], json!("text_completion"));
    assert_eq!(
        body["choices"],
        json!([{"text": "one two three", "index": 0, "logprobs": null, "finish_reason": "stop"}])
    );
    assert_eq!(body["usage"]["prompt_tokens"], json!(3));

    let stream = post_stream(
        &gw,
        "/v1/completions",
        &json!({"model": "demo", "prompt": "one two three", "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(stream.status, 200, "{}", stream.raw);
    assert!(stream.done, "{}", stream.raw);
    let mut text = String::new();
    for chunk in &stream.chunks {
        assert_eq!(chunk["object"], json!("text_completion"), "{chunk}");
        for choice in chunk["choices"].as_array().expect("choices") {
            text.push_str(choice["text"].as_str().expect("text"));
        }
    }
    assert_eq!(text, "one two three");
    let pieces = stream
        .chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert!(pieces >= 3, "streamed word by word: {}", stream.raw);
    let last = stream.chunks.last().expect("chunks");
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], json!(3));
    let finish = &stream.chunks[stream.chunks.len() - 2]["choices"][0];
    assert_eq!(finish["finish_reason"], json!("stop"));

    let two = post(
        &gw,
        "/v1/completions",
        &json!({"model": "demo", "prompt": ["a", "b"]}),
    );
    assert_openai_error(
        &two,
        400,
        "invalid_request_error",
        Some("prompt"),
        None,
        "one prompt",
    );
    let tokens = post(
        &gw,
        "/v1/completions",
        &json!({"model": "demo", "prompt": [[1, 2]]}),
    );
    assert_openai_error(
        &tokens,
        400,
        "invalid_request_error",
        Some("prompt"),
        None,
        "token",
    );
}

/// `/v1/completions` through the openai plugin to an upstream's legacy `/completions`.
#[test]
fn legacy_text_completions_reach_the_openai_plugin() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::start());
    let var = unique("OPENAI_SURFACE_KEY_");
    let gw = Gateway::builder()
        .route(route_for(OpenAi, &upstream.base_url(), &var).setting("legacy_completions", "true"))
        .env(&var, PROVIDER_KEY)
        .start();
    let body = json!({"model": "oai/gpt-3.5-turbo-instruct", "prompt": "Once upon a time", "max_tokens": 9});
    let response = post(&gw, "/v1/completions", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(answer["object"], json!("text_completion"));
    assert_eq!(answer["model"], json!("gpt-3.5-turbo-instruct"));
    assert_eq!(
        answer["choices"][0]["text"],
        json!(legacy_text("Once upon a time"))
    );
    assert_eq!(answer["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(answer["usage"]["prompt_tokens"], json!(4));
    assert_eq!(answer["usage"]["completion_tokens"], json!(5));
    let sent = upstream.requests()[0].clone();
    assert_eq!(sent.path, "/v1/completions");
    assert_eq!(sent.json()["max_tokens"], json!(9));
}

// ---------------------------------------------------------------- embeddings

fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not standard base64: {other:?} in {text}"),
        }
    };
    assert_eq!(text.len() % 4, 0, "padded: {text}");
    let mut out = Vec::new();
    for group in text.as_bytes().chunks(4) {
        let pad = group.iter().filter(|c| **c == b'=').count();
        let n = group
            .iter()
            .map(|c| if *c == b'=' { 0 } else { value(*c) })
            .fold(0u32, |n, v| (n << 6) | v);
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}

#[test]
fn embeddings_as_floats_and_base64() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::start());
    let gw = gateway_for(OpenAi, &upstream);
    let inputs = ["hello world", "bye"];
    let model = "oai/text-embedding-3-small";

    let response = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": inputs, "dimensions": 3, "user": "u-e"}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["object"], json!("list"));
    assert_eq!(body["model"], json!("text-embedding-3-small"));
    for (i, input) in inputs.iter().enumerate() {
        let item = &body["data"][i];
        assert_eq!(item["object"], json!("embedding"));
        assert_eq!(item["index"], json!(i));
        assert_eq!(item["embedding"], json!(fake_embedding(i, input)), "{body}");
    }
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 3, "total_tokens": 3}),
        "{body}"
    );
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["dimensions"], json!(3), "{sent}");
    assert_eq!(sent["user"], json!("u-e"), "{sent}");
    assert!(
        sent.get("encoding_format").is_none_or(|f| f == "float"),
        "{sent}"
    );
    let id = response.header("x-invocation-id").expect("id");
    let record = success_record(&gw, id, OpenAi);
    assert_eq!(record["userId"], json!("u-e"));

    // What OpenAI's Python SDK asks for by default.
    let response = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": "hello world", "encoding_format": "base64"}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    let encoded = body["data"][0]["embedding"].as_str().expect("base64 text");
    let floats: Vec<f64> = decode_base64(encoded)
        .chunks(4)
        .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect();
    assert_eq!(floats, fake_embedding(0, "hello world"));

    let hex = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": "x", "encoding_format": "hex"}),
    );
    assert_openai_error(
        &hex,
        400,
        "invalid_request_error",
        Some("encoding_format"),
        None,
        "hex",
    );
    let tokens = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": [[1, 2, 3]]}),
    );
    assert_openai_error(
        &tokens,
        400,
        "invalid_request_error",
        Some("input"),
        None,
        "token",
    );
}

// ---------------------------------------------------------------- models

#[test]
fn models_list_and_retrieve() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::start());
    let var = unique("OPENAI_SURFACE_KEY_");
    let gw = Gateway::builder()
        .route(route_for(OpenAi, &upstream.base_url(), &var))
        .route(Route::echo("demo"))
        .env(&var, PROVIDER_KEY)
        .config_line("[models.fast]\nroute = \"demo\"")
        .start();

    let response = gw.request(
        "GET",
        "/v1/models",
        None,
        &[("Authorization", &bearer(&gw))],
        b"",
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["object"], json!("list"));
    let data = body["data"].as_array().expect("data");
    let entry = |id: &str| data.iter().find(|m| m["id"] == json!(id)).cloned();
    assert_eq!(
        entry("fast"),
        Some(json!({"id": "fast", "object": "model", "created": 0, "owned_by": "demo"}))
    );
    assert_eq!(
        entry("oai/gpt-4o-mini").map(|m| m["owned_by"].clone()),
        Some(json!("oai"))
    );
    assert_eq!(
        entry("demo/echo").map(|m| m["owned_by"].clone()),
        Some(json!("demo"))
    );
    let mut ids: Vec<&str> = data.iter().filter_map(|m| m["id"].as_str()).collect();
    let count = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), count, "each name once: {body}");
    // Every model the openai plugin knows, under its route.
    assert!(
        data.iter()
            .filter(|m| m["owned_by"] == json!("oai"))
            .count()
            > 1,
        "{body}"
    );

    let one = gw.request(
        "GET",
        "/v1/models/oai%2Fgpt-4o-mini",
        None,
        &[("x-api-key", &gw.key)],
        b"",
    );
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.json()["id"], json!("oai/gpt-4o-mini"));
    let none = gw.request(
        "GET",
        "/v1/models/nope",
        None,
        &[("Authorization", &bearer(&gw))],
        b"",
    );
    assert_openai_error(
        &none,
        404,
        "invalid_request_error",
        Some("model"),
        Some("model_not_found"),
        "nope",
    );
    let anonymous = gw.request("GET", "/v1/models", None, &[], b"");
    assert_openai_error(
        &anonymous,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );
    let posted = gw.request(
        "POST",
        "/v1/models",
        None,
        &[("Authorization", &bearer(&gw))],
        b"{}",
    );
    assert_openai_error(&posted, 405, "invalid_request_error", None, None, "GET");
    assert_eq!(posted.header("allow"), Some("GET"));
}

/// A key scoped to some routes or models lists only what it may use, and a name outside its
/// scope answers 404 as an unknown one does.
#[test]
fn models_are_those_of_the_keys_scope() {
    let gw = Gateway::builder()
        .route(
            Route::new("oai", "openai")
                .base_url("http://127.0.0.1:9/v1")
                .default_model("gpt-4o-mini"),
        )
        .route(Route::echo("demo"))
        .config_line("[models.fast]\nroute = \"demo\"")
        .config_line("[models.smart]\nroute = \"oai\"\nmodel = \"gpt-4o-mini\"")
        .start();
    let key = |flags: &[&str]| {
        let mut args = vec!["key", "create", gw.project_id.as_str()];
        args.extend_from_slice(flags);
        gw.cli(&args).checked(&args.join(" ")).last_line()
    };
    let get = |key: &str, path: &str| {
        gw.request(
            "GET",
            path,
            None,
            &[("Authorization", &format!("Bearer {key}"))],
            b"",
        )
    };
    let ids = |key: &str| -> Vec<String> {
        let listed = get(key, "/v1/models");
        assert_eq!(listed.status, 200, "{}", listed.text());
        let body = listed.json();
        body["data"]
            .as_array()
            .unwrap_or_else(|| panic!("no data: {body}"))
            .iter()
            .map(|m| m["id"].as_str().expect("an id").to_owned())
            .collect()
    };
    let unknown = |key: &str, path: &str, name: &str| {
        assert_openai_error(
            &get(key, path),
            404,
            "invalid_request_error",
            Some("model"),
            Some("model_not_found"),
            name,
        );
    };

    let everything = ids(&gw.key);
    assert!(
        everything.iter().any(|id| id.starts_with("oai/"))
            && everything.iter().any(|id| id.starts_with("demo/")),
        "an unscoped key sees every route: {everything:?}"
    );

    let demo = key(&["--routes", "demo"]);
    let listed = ids(&demo);
    assert!(listed.contains(&"fast".to_owned()), "{listed:?}");
    assert!(listed.contains(&"demo/echo".to_owned()), "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|id| id == "fast" || id.starts_with("demo/")),
        "names outside --routes demo: {listed:?}"
    );
    assert_eq!(get(&demo, "/v1/models/demo%2Fecho").status, 200);
    unknown(&demo, "/v1/models/oai%2Fgpt-4o-mini", "oai/gpt-4o-mini");
    unknown(&demo, "/v1/models/smart", "smart");

    let one = key(&["--models", "oai/gpt-4o-mini"]);
    assert_eq!(ids(&one), ["smart", "oai/gpt-4o-mini"]);
    assert_eq!(get(&one, "/v1/models/smart").status, 200);
    unknown(&one, "/v1/models/fast", "fast");
    unknown(&one, "/v1/models/demo%2Fecho", "demo/echo");
}

// ---------------------------------------------------------------- errors

#[test]
fn errors_in_openai_shape() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let chat = |model: &str, messages: Value| json!({"model": model, "messages": messages});
    let hi = json!([{"role": "user", "content": "hi"}]);

    let missing = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[],
        chat("demo", hi.clone()).to_string().as_bytes(),
    );
    assert_openai_error(
        &missing,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );
    let bad = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("Authorization", "Bearer gw_wrong")],
        chat("demo", hi.clone()).to_string().as_bytes(),
    );
    assert_openai_error(
        &bad,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );

    let unknown = post(
        &gw,
        "/v1/chat/completions",
        &chat("nothing-like-it", hi.clone()),
    );
    assert_openai_error(
        &unknown,
        404,
        "invalid_request_error",
        Some("model"),
        Some("model_not_found"),
        "nothing-like-it",
    );
    let route = post(
        &gw,
        "/v1/chat/completions",
        &chat("nope/gpt-4o", hi.clone()),
    );
    assert_openai_error(
        &route,
        404,
        "invalid_request_error",
        Some("model"),
        Some("model_not_found"),
        "nope",
    );

    let no_messages = post(&gw, "/v1/chat/completions", &json!({"model": "demo"}));
    assert_openai_error(
        &no_messages,
        400,
        "invalid_request_error",
        Some("messages"),
        None,
        "messages",
    );
    let no_model = post(&gw, "/v1/chat/completions", &json!({"messages": hi}));
    assert_openai_error(
        &no_model,
        400,
        "invalid_request_error",
        Some("model"),
        None,
        "model",
    );
    let empty = post(&gw, "/v1/chat/completions", &chat("demo", json!([])));
    assert_openai_error(
        &empty,
        400,
        "invalid_request_error",
        Some("messages"),
        None,
        "at least one",
    );
    let role = post(
        &gw,
        "/v1/chat/completions",
        &chat("demo", json!([{"role": "robot", "content": "x"}])),
    );
    assert_openai_error(
        &role,
        400,
        "invalid_request_error",
        Some("messages[0].role"),
        None,
        "robot",
    );
    let image = post(
        &gw,
        "/v1/chat/completions",
        &chat(
            "demo",
            json!([{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}}]}]),
        ),
    );
    assert_openai_error(
        &image,
        400,
        "invalid_request_error",
        Some("messages[0].content[1].image_url.url"),
        None,
        "must be https:",
    );
    let tool = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "demo", "messages": hi, "tools": [{"type": "web_search"}]}),
    );
    assert_openai_error(
        &tool,
        400,
        "invalid_request_error",
        Some("tools[0].type"),
        None,
        "web_search",
    );
    let options = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "demo", "messages": hi, "stream_options": {"include_usage": true}}),
    );
    assert_openai_error(
        &options,
        400,
        "invalid_request_error",
        Some("stream_options"),
        None,
        "stream",
    );
    let twice = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("Authorization", &bearer(&gw))],
        br#"{"model": "demo", "model": "demo", "messages": []}"#,
    );
    assert_openai_error(
        &twice,
        400,
        "invalid_request_error",
        Some("model"),
        None,
        "duplicate",
    );
    let trailing = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("Authorization", &bearer(&gw))],
        format!("{} x", chat("demo", hi.clone())).as_bytes(),
    );
    assert_openai_error(
        &trailing,
        400,
        "invalid_request_error",
        None,
        None,
        "trailing",
    );

    let get = gw.request(
        "GET",
        "/v1/chat/completions",
        None,
        &[("Authorization", &bearer(&gw))],
        b"",
    );
    assert_openai_error(&get, 405, "invalid_request_error", None, None, "POST");
    assert_eq!(get.header("allow"), Some("POST"));
}

/// An upstream 429 reaches the caller as a 429 with its Retry-After, in OpenAI's shape.
#[test]
fn upstream_rate_limit_passes_through() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::each_call(Reply::openai_error(
        429,
        "Rate limit reached for gpt-4o-mini",
        "rate_limit_exceeded",
        Some("7"),
    )));
    let gw = gateway_for(OpenAi, &upstream);
    let body = json!({"model": OpenAi.target(), "messages": [{"role": "user", "content": "hi"}]});
    let response = post(&gw, "/v1/chat/completions", &body);
    assert_openai_error(
        &response,
        429,
        "rate_limit_error",
        None,
        Some("rate_limit_exceeded"),
        "Rate limit reached",
    );
    assert_eq!(response.header("retry-after"), Some("7"));

    let streamed = post_stream(&gw, "/v1/chat/completions", &with_stream(body));
    assert_eq!(streamed.status, 429, "{}", streamed.raw);
    assert_eq!(streamed.header("retry-after"), Some("7"));
    let error: Value = parse_json(&streamed.raw);
    assert_eq!(error["error"]["type"], json!("rate_limit_error"));
}

/// A request the provider refuses as the caller's own fault (400, 404, 413, 422: issue 46 item
/// 7) is the caller's 4xx in OpenAI's shape, with the provider's message (never the key it was
/// sent), and it is tried once: no retry, no fallback, so that a client sees at once what to
/// fix and does not send it again as it does after a 502. An upstream 5xx stays a 502.
#[test]
fn upstream_client_errors_are_the_callers_and_tried_once() {
    let var = unique("OPENAI_SURFACE_KEY_");
    let spare = OpenAiUpstream::each_call(Reply::openai_answer(
        OpenAi.model(),
        "served by the fallback",
        json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}),
    ));
    let message = format!("limit must be <= 4096 (key {PROVIDER_KEY})");
    let statuses = [400, 404, 413, 422, 500];
    let refusing: Vec<OpenAiUpstream> = (statuses.iter())
        .map(|&status| {
            let reply = Reply::openai_error(status, &message, "invalid_value", None);
            OpenAiUpstream::always(reply)
        })
        .collect();
    let mut builder = Gateway::builder()
        .route(
            Route::new("spare", "openai")
                .base_url(&spare.base_url("/v1"))
                .api_key_env(&var),
        )
        .env(&var, PROVIDER_KEY);
    for (status, upstream) in statuses.iter().zip(&refusing) {
        let route = Route::new(&format!("r{status}"), "openai")
            .base_url(&upstream.base_url("/v1"))
            .api_key_env(&var)
            .key("retries", "2")
            .key("retry_backoff_ms", "1");
        // The 5xx route has no fallback: what reaches the caller is the 502 itself.
        let route = if *status < 500 {
            route.key("fallbacks", "[\"spare\"]")
        } else {
            route
        };
        builder = builder.route(route);
    }
    let gw = builder.start();
    let chat = |status: u16| {
        json!({"model": format!("r{status}/{}", OpenAi.model()),
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000})
    };
    for (status, upstream) in statuses.iter().zip(&refusing) {
        let response = post(&gw, "/v1/chat/completions", &chat(*status));
        let (status_out, kind) = match status {
            500 => (502, "api_error"),
            client => (*client, "invalid_request_error"),
        };
        let error = assert_openai_error(
            &response,
            status_out,
            kind,
            None,
            None,
            "limit must be <= 4096",
        );
        assert!(!response.text().contains(PROVIDER_KEY), "{error}");
        let tries = if *status == 500 { 3 } else { 1 };
        assert_eq!(upstream.requests().len(), tries, "HTTP {status}: {error}");
        let id = response.header("x-invocation-id").expect("id");
        let record = gw.wait_for_record(id, |r| r["status"] == json!("error"));
        assert_eq!(record["httpStatus"], json!(status_out), "{record}");
        assert!(!record.to_string().contains(PROVIDER_KEY), "{record}");
    }
    assert!(spare.requests().is_empty(), "no fallback was tried");
    // Before a stream has started, its status is the error's own too.
    let streamed = post_stream(&gw, "/v1/chat/completions", &with_stream(chat(400)));
    assert_eq!(streamed.status, 400, "{}", streamed.raw);
    let error: Value = parse_json(&streamed.raw);
    assert_eq!(
        error["error"]["type"],
        json!("invalid_request_error"),
        "{error}"
    );
    assert_eq!(refusing[0].requests().len(), 2);
}

fn with_stream(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

/// A stream that fails after it started ends with an `error` event (which OpenAI's SDKs raise)
/// and no `[DONE]`.
#[test]
fn error_after_the_stream_started_is_an_error_event() {
    let recording = OpenAi.recording("simple_streaming");
    let events = recording.interaction(0).sse_events();
    let upstream = Upstream::OpenAi(OpenAiUpstream::script(vec![
        Reply::events(events[..3].to_vec()).cut(),
    ]));
    let gw = gateway_for(OpenAi, &upstream);
    let body = json!({"model": OpenAi.target(), "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let stream = post_stream(&gw, "/v1/chat/completions", &body);
    assert_eq!(stream.status, 200, "{}", stream.raw);
    assert!(!stream.done, "{}", stream.raw);
    let last = stream.chunks.last().expect("chunks");
    let error = &last["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{last}"
    );
    assert_eq!(error["type"], json!("api_error"), "{last}");
    assert!(
        stream.chunks.len() > 1,
        "text went out first: {}",
        stream.raw
    );
}

/// A body of `path` on the echo route `demo`, with `param` set to `value`.
fn with_param_on(path: &str, param: &str, value: &Value) -> Value {
    let mut body = match path {
        "/v1/chat/completions" => {
            json!({"model": "demo", "messages": [{"role": "user", "content": "hi"}]})
        }
        "/v1/completions" => json!({"model": "demo", "prompt": "hi"}),
        _ => json!({"model": "demo", "input": "hi"}),
    };
    body[param] = value.clone();
    body
}

/// The ranges and types OpenAI's API reference gives its parameters are checked here: a value
/// outside them is a 400 naming it (never a call upstream), recorded as any other 400; the
/// values at the edges of the ranges, and nulls, are requests like any other.
#[test]
fn sampling_parameters_outside_their_ranges_are_refused_naming_them() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    const CHAT: &str = "/v1/chat/completions";
    const TEXT: &str = "/v1/completions";
    const EMBED: &str = "/v1/embeddings";
    let long_user = "u".repeat(257);
    let refused = [
        (CHAT, "n", json!(1_000_000)),
        (CHAT, "n", json!(0)),
        (CHAT, "n", json!(2.5)),
        (CHAT, "n", json!("2")),
        (TEXT, "n", json!(129)),
        (CHAT, "max_tokens", json!(-5)),
        (CHAT, "max_tokens", json!(0)),
        (CHAT, "max_tokens", json!(10.5)),
        (CHAT, "max_completion_tokens", json!(0)),
        (CHAT, "max_completion_tokens", json!("100")),
        (TEXT, "max_tokens", json!(-1)),
        (CHAT, "temperature", json!("NaN")),
        (CHAT, "temperature", json!(2.01)),
        (TEXT, "temperature", json!(-0.5)),
        (CHAT, "top_p", json!(1.5)),
        (TEXT, "top_p", json!(-0.1)),
        (CHAT, "presence_penalty", json!(2.5)),
        (CHAT, "frequency_penalty", json!(-3)),
        (TEXT, "presence_penalty", json!("high")),
        (CHAT, "logprobs", json!(1)),
        (TEXT, "logprobs", json!(6)),
        (TEXT, "logprobs", json!(true)),
        (CHAT, "top_logprobs", json!(21)),
        (CHAT, "top_logprobs", json!(-1)),
        (TEXT, "best_of", json!(21)),
        (CHAT, "seed", json!(1.5)),
        (CHAT, "seed", json!("42")),
        (CHAT, "seed", json!(u64::MAX)),
        (CHAT, "stop", json!(5)),
        (CHAT, "stop", json!(["a", "b", "c", "d", "e"])),
        (TEXT, "stop", json!(["a", 1])),
        (CHAT, "user", json!(long_user)),
        (TEXT, "user", json!(long_user)),
        (EMBED, "user", json!(long_user)),
        (EMBED, "dimensions", json!(0)),
        (EMBED, "dimensions", json!("256")),
    ];
    for (path, param, value) in &refused {
        let response = post(&gw, path, &with_param_on(path, param, value));
        let what = format!("{path} {param} = {value}");
        assert_eq!(response.status, 400, "{what}: {}", response.text());
        assert_openai_error(
            &response,
            400,
            "invalid_request_error",
            Some(param),
            None,
            param,
        );
        let message = response.json()["error"]["message"].to_string();
        assert!(
            message.len() < 400,
            "{what}: the message repeats the value: {message}"
        );
        let id = response.header("x-invocation-id").expect("x-invocation-id");
        let record = gw.get_invocation(id).json();
        assert_eq!(record["httpStatus"], json!(400), "{what}: {record}");
        assert_eq!(record["status"], json!("error"), "{what}: {record}");
    }

    let user = "é".repeat(128);
    let accepted = [
        (CHAT, "n", json!(128)),
        (CHAT, "n", json!(1)),
        (TEXT, "n", json!(null)),
        (CHAT, "max_tokens", json!(1)),
        (CHAT, "max_completion_tokens", json!(4096)),
        (TEXT, "max_tokens", json!(0)),
        (CHAT, "temperature", json!(0)),
        (CHAT, "temperature", json!(2)),
        (TEXT, "temperature", json!(0.7)),
        (CHAT, "temperature", json!(null)),
        (CHAT, "top_p", json!(1)),
        (CHAT, "presence_penalty", json!(-2)),
        (TEXT, "frequency_penalty", json!(2.0)),
        (CHAT, "logprobs", json!(true)),
        (TEXT, "logprobs", json!(5)),
        (CHAT, "top_logprobs", json!(20)),
        (TEXT, "best_of", json!(20)),
        (CHAT, "seed", json!(i64::MIN)),
        (CHAT, "stop", json!("END")),
        (CHAT, "stop", json!(["a", "b", "c", "d"])),
        (TEXT, "stop", json!(null)),
        (CHAT, "user", json!(user)),
        (EMBED, "user", json!(user)),
        (EMBED, "dimensions", json!(256)),
    ];
    for (path, param, value) in &accepted {
        let response = post(&gw, path, &with_param_on(path, param, value));
        assert_eq!(
            response.status,
            200,
            "{path} {param} = {value}: {}",
            response.text()
        );
    }
}
