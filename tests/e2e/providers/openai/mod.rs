//! The OpenAI plugin through the gateway, against a fake upstream that
//! replays real recorded traffic (OpenAI, Azure, Groq, llama.cpp), answers
//! embeddings and legacy completions, and fails on demand. Also the
//! behaviours that need a slow upstream: a client leaving mid-stream and a
//! graceful shutdown during a stream.

use std::time::Duration;

use gateway_test_support::upstream::openai::{legacy_text, slow_word};
use gateway_test_support::{
    Gateway, Interaction, OpenAiUpstream, ReceivedRequest, Recording, Reply, Response, Route,
    SseResponse, assert_chat_choice, assert_error, assert_ok, assert_provider_error,
    assert_stream_finished, assert_usage, chat_params, chat_request, chat_request_with_params,
    contains_bytes, embeddings_request, fake_embedding, list_cost, open_stream_with_provider_key,
    post_stream_with_provider_key, post_with_provider_key, recorded_tests, split_stream,
    streamed_record, streamed_text, success_record, text_request, tool_calls_of, unique, with,
};
use serde_json::{Value, json};

mod completions;
mod embeddings;
mod errors;
mod keys;
mod minimal_example;
mod recorded;
mod requests;
mod streams;

/// The caller's provider key in most tests.
const PROVIDER_KEY: &str = "sk-test-caller-0123456789";
const ROUTE: &str = "oai";

fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    post_with_provider_key(gw, path, PROVIDER_KEY, body)
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, PROVIDER_KEY, body)
}

/// A gateway with route `oai` (openai plugin, caller's key) at `upstream`.
fn gateway_for(upstream: &OpenAiUpstream, prefix: &str) -> Gateway {
    Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url(prefix)))
        .start()
}

/// How a request expresses functions and their results.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    /// `functions`/`functionCall`, assistant `function_call`, `function` role results.
    Commonbase,
    /// `tools`/`toolChoice`, assistant `tool_calls`, `tool` role results.
    OpenAi,
}

/// The gateway request that makes the plugin send what `interaction`
/// recorded.
fn request_from(gw: &Gateway, interaction: &Interaction, style: Style) -> Value {
    let recorded = interaction.request_json();
    let params = chat_params(
        &recorded,
        &[
            "messages",
            "tools",
            "tool_choice",
            "stream",
            "stream_options",
        ],
    );
    let messages = convert_messages(&recorded["messages"], style);
    let mut body = chat_request_with_params(&gw.project_id, ROUTE, params, messages);
    if let Some(tools) = recorded["tools"].as_array() {
        match style {
            Style::Commonbase => {
                body["functions"] = tools
                    .iter()
                    .map(|tool| {
                        let f = &tool["function"];
                        json!({"name": f["name"], "description": f["description"], "parameters": f["parameters"]})
                    })
                    .collect();
                body["functionCall"] = json!("auto");
            }
            Style::OpenAi => {
                body["tools"] = json!(tools);
                body["toolChoice"] = recorded["tool_choice"].clone();
            }
        }
    }
    if recorded["stream"] == json!(true) {
        body["stream"] = json!(true);
    }
    body
}

fn convert_messages(messages: &Value, style: Style) -> Value {
    let messages = messages.as_array().expect("recorded messages");
    // Function names by call id, for `function` role results.
    let mut names = std::collections::HashMap::new();
    let mut out = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap_or_default();
        let calls = message["tool_calls"].as_array();
        for call in calls.into_iter().flatten() {
            names.insert(
                call["id"].as_str().unwrap_or_default().to_owned(),
                call["function"]["name"].clone(),
            );
        }
        let converted = match (style, role) {
            (Style::Commonbase, "assistant") if calls.is_some() => {
                let calls = calls.expect("checked");
                assert_eq!(calls.len(), 1, "function_call carries one call");
                json!({
                    "role": "assistant",
                    "content": message.get("content").cloned().unwrap_or(Value::Null),
                    "function_call": {
                        "name": calls[0]["function"]["name"],
                        "arguments": calls[0]["function"]["arguments"]
                    }
                })
            }
            (Style::Commonbase, "tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                json!({"role": "function", "name": names[id], "content": message["content"]})
            }
            _ => {
                let mut m = message.clone();
                // llama.cpp's reasoning is not part of the gateway's message shape.
                if let Some(object) = m.as_object_mut() {
                    object.remove("reasoning_content");
                }
                m
            }
        };
        out.push(converted);
    }
    Value::Array(out)
}

/// The comparable parts of a chat message: role, content, tool call id and
/// tool calls as `(id, name, arguments)`.
fn message_summary(message: &Value) -> Value {
    let calls: Vec<Value> = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["id"], c["function"]["name"], c["function"]["arguments"]]))
        .collect();
    json!({
        "role": message["role"],
        "content": message.get("content").cloned().unwrap_or(Value::Null),
        "tool_call_id": message.get("tool_call_id").cloned().unwrap_or(Value::Null),
        "tool_calls": calls,
    })
}

/// The plugin sent what the recorded client sent, in the parts that matter.
fn check_upstream_request(sent: &ReceivedRequest, interaction: &Interaction, style: Style) {
    sent.assert_json_post(&interaction.path());
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    let body = sent.json();
    let recorded = interaction.request_json();
    assert_eq!(body["model"], recorded["model"]);
    for key in ["max_tokens", "max_completion_tokens"] {
        if recorded.get(key).is_some() {
            assert_eq!(body[key], recorded[key], "{key} should pass through");
        }
    }
    let sent_messages = body["messages"].as_array().expect("messages");
    let recorded_messages = recorded["messages"].as_array().expect("messages");
    assert_eq!(sent_messages.len(), recorded_messages.len(), "{body}");
    match style {
        Style::OpenAi => {
            for (s, r) in sent_messages.iter().zip(recorded_messages) {
                assert_eq!(message_summary(s), message_summary(r), "sent: {body}");
            }
        }
        Style::Commonbase => {
            // System and user messages are sent as they are.
            for (s, r) in sent_messages.iter().zip(recorded_messages).take(2) {
                assert_eq!(message_summary(s), message_summary(r), "sent: {body}");
            }
        }
    }
    if let Some(tools) = recorded["tools"].as_array() {
        let names = |tools: &[Value]| -> Vec<Value> {
            tools
                .iter()
                .map(|t| t["function"]["name"].clone())
                .collect()
        };
        let sent_tools = body["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools sent: {body}"));
        assert_eq!(names(sent_tools), names(tools));
        for (s, r) in sent_tools.iter().zip(tools) {
            assert_eq!(s["type"], json!("function"));
            assert_eq!(s["function"]["parameters"], r["function"]["parameters"]);
        }
        assert_eq!(body["tool_choice"], json!("auto"), "{body}");
    }
    if recorded["stream"] == json!(true) {
        assert_eq!(body["stream"], json!(true), "{body}");
        assert_eq!(
            body["stream_options"]["include_usage"],
            json!(true),
            "{body}"
        );
    } else {
        assert_ne!(body["stream"], json!(true), "{body}");
    }
}

/// In a function-style second step, the result reached the upstream after
/// the assistant's call.
fn check_function_result_sent(sent: &ReceivedRequest, step: &Interaction) {
    let body = sent.json();
    let recorded = step.request_json();
    let results: Vec<&Value> = recorded["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == json!("tool"))
        .collect();
    let messages = body["messages"].as_array().expect("messages");
    for result in results {
        let position = messages
            .iter()
            .position(|m| {
                m["content"] == result["content"]
                    && (m["role"] == json!("tool") || m["role"] == json!("function"))
            })
            .unwrap_or_else(|| panic!("result {} not sent: {body}", result["content"]));
        let call = messages[..position]
            .iter()
            .rev()
            .find(|m| m["role"] == json!("assistant"))
            .unwrap_or_else(|| panic!("no assistant call before the result: {body}"));
        let named = call["tool_calls"][0]["function"]["name"].as_str().is_some()
            || call["function_call"]["name"].as_str().is_some();
        assert!(named, "the assistant message lost its call: {call}");
    }
}

fn check_usage(body: &Value, expected: Option<(u64, u64, u64)>, price: (f64, f64)) {
    if let Some(usage) = expected {
        assert_usage(body, usage, list_cost(usage.0, usage.1, price));
    }
}

/// Prices set on the route for the recorded model (not the plugin's).
const PRICE: (f64, f64) = (0.15, 0.60);

fn recorded_gateway(recording: &Recording, upstream: &OpenAiUpstream) -> Gateway {
    let first = recording.interaction(0);
    let model = first.request_json()["model"]
        .as_str()
        .expect("recorded model")
        .to_owned();
    Gateway::builder()
        .route(
            Route::openai(ROUTE, &upstream.base_url(&first.base_path()))
                .price(&model, PRICE.0, PRICE.1),
        )
        .start()
}

fn simple_recording() -> Recording {
    Recording::load("OpenAI__openai-gpt-4o-mini__simple")
}

fn hi_request(gw: &Gateway) -> Value {
    chat_request(
        &gw.project_id,
        ROUTE,
        "gpt-4o-mini",
        json!([{"role": "user", "content": "Say hi in Portuguese"}]),
    )
}
