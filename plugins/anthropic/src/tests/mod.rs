//! Unit tests of the pure mapping functions, partly against real recorded Anthropic traffic.

mod convert;
mod golden;
mod http;
mod info;
mod output;
mod parts;
mod stream;

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{
    Audio, Chunk, Completion, CompletionRequest, Document, EmbeddingRequest, FinishReason,
    FunctionCall, FunctionChoice, FunctionDef, Image, Message, Part, Prompt, Provider,
    ProviderError, Reasoning, ReasoningConfig, ReasoningEffort, Role, Route, Sink, Source,
    ToolCall, Usage, read_completion, read_stream,
};
use gateway_test_support::fixtures::{
    calling, failed, invalid_request, message as msg, named, upstream,
};
use gateway_test_support::recording::recording;
use serde_json::{Value, json};

use crate::Anthropic;
use crate::convert::{
    DEFAULT_MAX_TOKENS, Settings, caller_params, chat, message_body, messages_url, tool_choice,
    tools, upstream_request,
};
use crate::stream::{Decoder, finish_reason, usage};
use crate::wire::WireUsage;

// ---------------------------------------------------------------------------------------------
// Helpers

fn route(settings: &str) -> Route {
    Route {
        id: "claude".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: Some("sk-ant-test".into()),
        settings: settings.into(),
        secrets: Vec::new(),
    }
}

fn request(prompt: Prompt) -> CompletionRequest {
    CompletionRequest {
        route: route("{}"),
        model: "claude-sonnet-4-20250514".into(),
        prompt,
        functions: Vec::new(),
        function_choice: None,
        reasoning: None,
        output: gateway_plugin_sdk::OutputLimit::NONE,
        params: "{}".into(),
    }
}

fn tool_call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn weather_function() -> FunctionDef {
    FunctionDef {
        name: "weather".into(),
        description: Some("Get weather information for a location".into()),
        parameters: Some(
            r#"{"properties":{"location":{"description":"the city","type":"string"}},"required":["location"],"type":"object"}"#
                .into(),
        ),
    }
}

fn body(request: &CompletionRequest, stream: bool) -> Value {
    Value::Object(message_body(request, &Settings::default(), stream).expect("body builds"))
}

/// The `messages` and `system` of a chat, as JSON.
fn chat_json(messages: &[Message]) -> (Value, Option<String>) {
    let conversation = chat(messages).expect("conversation maps");
    (
        serde_json::to_value(&conversation.messages).expect("serializes"),
        conversation.system,
    )
}

/// What a stream replay produced: the chunks to send, in order, and the final completion.
struct Replayed {
    chunks: Vec<Chunk>,
    completion: Completion,
}

impl Replayed {
    fn text(&self) -> String {
        self.chunks
            .iter()
            .flat_map(|c| &c.deltas)
            .map(|d| d.text.as_str())
            .collect()
    }

    fn usages(&self) -> Vec<Usage> {
        self.chunks.iter().filter_map(|c| c.usage).collect()
    }
}

/// Reads an SSE body through the SDK's stream driver, arriving in small pieces (to cross chunk
/// boundaries the way a network does).
fn replay_stream(body: &str) -> Result<Replayed, ProviderError> {
    let mut sink = Sink::buffered();
    let response = http_response(200, "text/event-stream", body, 7);
    let completion = read_stream(response, &mut sink, "requested-model", Decoder::default())?;
    Ok(Replayed {
        chunks: sink.sent().to_vec(),
        completion,
    })
}

/// Reads a non-streamed answer through the SDK's driver.
fn parse_completion(body: &[u8], requested_model: &str) -> Result<Completion, ProviderError> {
    let response = Response::from_chunks(200, Vec::new(), vec![body.to_vec()]);
    read_completion(response, requested_model, Decoder::default())
}

/// An SSE body of `(event name, data)` pairs.
fn stream_of(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn message_start(usage: Value) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage}}),
    )
}

fn text_events(index: u32, pieces: &[&str]) -> Vec<(&'static str, Value)> {
    let mut events = vec![(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    for piece in pieces {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
    events
}

fn message_end(stop_reason: &str, usage: Value) -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn http_response(status: u16, content_type: &str, body: &str, chunk_size: usize) -> Response {
    Response::from_chunks(
        status,
        vec![("Content-Type".into(), content_type.into())],
        body.as_bytes()
            .chunks(chunk_size.max(1))
            .map(<[u8]>::to_vec)
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------------
// Recorded traffic (go-vcr YAML, read by `gateway_test_support`)

const RECORDINGS: &[&str] = &[
    "Anthropic__claude-sonnet-4__simple",
    "Anthropic__claude-sonnet-4__simple_streaming",
    "Anthropic__claude-sonnet-4__tool",
    "Anthropic__claude-sonnet-4__tool_streaming",
    "Anthropic__claude-sonnet-4__multi_tool",
    "Anthropic__claude-sonnet-4__multi_tool_streaming",
];
