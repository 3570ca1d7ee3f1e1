//! Unit tests of the pure mapping functions, largely against real recorded Gemini traffic.

mod convert;
mod embed;
mod golden;
mod images;
mod info;
mod output;
mod parts;
mod schemas;
mod stream;

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::sse::Event;
use gateway_plugin_sdk::sse::Parser;
use gateway_plugin_sdk::{
    Answer, Audio, Completion, CompletionRequest, Document, EmbeddingRequest, FinishReason,
    FunctionCall, FunctionChoice, FunctionDef, Image, Message, Part, Prompt, Provider,
    ProviderError, Reasoning, ReasoningConfig, ReasoningEffort, Role, Route, Sink, Source,
    StreamDecoder, ToolCall, UpstreamError, Usage, read_completion, read_stream,
};
use gateway_test_support::fixtures::{calling, failed, invalid_request, message, named, upstream};
use gateway_test_support::recording::Interaction;
use serde_json::{Map, Value, json};

use crate::Gemini;
use crate::convert::{
    THOUGHT_SIGNATURE_SENTINEL, completion_call, embedding_call, generation_config, model_resource,
    requires_thought_signatures, tool_config,
};
use crate::schema;
use crate::stream::{Decoder, finish_reason, read_embeddings, usage};
use crate::wire::UsageMetadata;

// ---------------------------------------------------------------------------------------------
// Helpers

const KEY: &str = "AIza-test-key-0123456789";

fn route() -> Route {
    Route {
        id: "test".into(),
        base_url: "http://127.0.0.1:9/v1beta".into(),
        api_key: Some(KEY.into()),
        settings: "{}".into(),
        secrets: Vec::new(),
    }
}

fn request(prompt: Prompt) -> CompletionRequest {
    CompletionRequest {
        route: route(),
        model: "gemini-2.5-flash".into(),
        prompt,
        functions: Vec::new(),
        function_choice: None,
        reasoning: None,
        output: gateway_plugin_sdk::OutputLimit::NONE,
        params: "{}".into(),
    }
}

fn chat(messages: Vec<Message>) -> CompletionRequest {
    request(Prompt::Chat(messages))
}

fn tool_calls(calls: &[(&str, &str, &str)]) -> Message {
    Message {
        parts: Vec::new(),
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        ..message(Role::Assistant, "")
    }
}

fn tool_result(id: &str, content: &str) -> Message {
    Message {
        tool_call_id: Some(id.into()),
        ..message(Role::Tool, content)
    }
}

fn function(name: &str, description: &str, parameters: Value) -> FunctionDef {
    FunctionDef {
        name: name.into(),
        description: Some(description.into()),
        parameters: Some(parameters.to_string()),
    }
}

/// The calculator functions of the multi-tool recordings, as a caller writes them (JSON Schema).
fn calculator_functions() -> Vec<FunctionDef> {
    let numbers = json!({
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "first number"},
            "b": {"type": "integer", "description": "second number"}
        },
        "required": ["a", "b"],
        "additionalProperties": false,
        "$schema": "http://json-schema.org/draft-07/schema#"
    });
    vec![
        function("add", "Add two numbers", numbers.clone()),
        function("multiply", "Multiply two numbers", numbers),
    ]
}

fn weather_function() -> FunctionDef {
    function(
        "weather",
        "Get weather information for a location",
        json!({
            "type": "object",
            "properties": {"location": {"type": "string", "description": "the city"}},
            "required": ["location"]
        }),
    )
}

/// The `generationConfig` object and the request's own fields.
type Split = (Map<String, Value>, Map<String, Value>);

/// The caller's params split by `generation_config` on the route `test`.
fn config(params: &str) -> Result<Split, ProviderError> {
    generation_config(params, "test")
}

/// The body sent for a text prompt with `params`, and with the weather function.
fn body_with_params(params: &str) -> Value {
    let mut req = request(Prompt::Text("Hi".into()));
    req.functions = vec![weather_function()];
    req.params = params.into();
    body(&req)
}

/// The refusal of `params` by the whole request's mapping, checked to name the route and
/// `param`.
fn refusal(params: &str, param: &str) -> String {
    let mut req = request(Prompt::Text("Hi".into()));
    req.params = params.into();
    let message = invalid_request(completion_call(&req, false));
    assert!(
        message.starts_with(&format!("route `test`: {param}")),
        "{params}: {message}"
    );
    message
}

fn body(request: &CompletionRequest) -> Value {
    json_body(&completion_call(request, false).expect("request builds"))
}

fn json_body(request: &gateway_plugin_sdk::http::Request) -> Value {
    serde_json::from_slice(request.body_bytes()).expect("the body is JSON")
}

fn response(status: u16, content_type: &str, chunks: &[&str]) -> Response {
    Response::from_chunks(
        status,
        vec![("Content-Type".into(), content_type.into())],
        chunks.iter().map(|c| c.as_bytes().to_vec()).collect(),
    )
}

fn parse(body: &str) -> Result<Completion, ProviderError> {
    read_completion(
        response(200, "application/json", &[body]),
        "asked-model",
        Decoder::default(),
    )
}

/// Streams `body` through `read_stream` in 7-byte pieces (crossing event boundaries the way a
/// network does); returns the chunks sent and the completion.
fn stream(
    body: &str,
) -> (
    Vec<gateway_plugin_sdk::Chunk>,
    Result<Completion, ProviderError>,
) {
    let pieces: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
    let response = Response::from_chunks(
        200,
        vec![("Content-Type".into(), "text/event-stream".into())],
        pieces.into_iter().map(<[u8]>::to_vec).collect(),
    );
    let mut sink = Sink::buffered();
    let result = read_stream(response, &mut sink, "asked-model", Decoder::default());
    (sink.sent().to_vec(), result)
}

/// The text sent through the sink, per chunk, for choice 0.
fn sent_texts(chunks: &[gateway_plugin_sdk::Chunk]) -> Vec<String> {
    chunks
        .iter()
        .flat_map(|c| &c.deltas)
        .filter(|d| d.index == 0)
        .map(|d| d.text.clone())
        .collect()
}

fn stream_of(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("data: {e}\r\n\r\n"))
        .collect()
}

fn usage_of(prompt: u32, completion: u32, total: u32, reasoning: Option<u32>) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: total,
        cached_prompt_tokens: None,
        cache_creation_tokens: None,
        reasoning_tokens: reasoning,
        image_prompt_tokens: None,
        audio_prompt_tokens: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Recorded traffic (go-vcr YAML)

/// Whether the recorded call was `streamGenerateContent` (Gemini says so in the URL).
fn is_stream(interaction: &Interaction) -> bool {
    interaction.request.url.contains(":streamGenerateContent")
}

/// The `data:` payloads of a recorded stream.
fn events(interaction: &Interaction) -> Vec<Value> {
    let mut parser = Parser::new();
    let mut events = parser.push(interaction.response.body.as_bytes());
    events.extend(parser.finish());
    events
        .iter()
        .map(|e| serde_json::from_str(&e.data).expect("recorded event is JSON"))
        .collect()
}

fn recording(case: &str) -> Vec<Interaction> {
    gateway_test_support::recording::recording(&format!("Google__gemini-2.5-flash__{case}"))
}

const CASES: &[&str] = &[
    "simple",
    "simple_streaming",
    "tool",
    "tool_streaming",
    "multi_tool",
    "multi_tool_streaming",
];

/// The recorded answer read through the plugin: (chunks sent, completion).
fn replay(interaction: &Interaction) -> (Vec<gateway_plugin_sdk::Chunk>, Completion) {
    if is_stream(interaction) {
        let (chunks, completion) = stream(&interaction.response.body);
        (chunks, completion.expect("recorded stream reads"))
    } else {
        (
            Vec::new(),
            parse(&interaction.response.body).expect("recorded answer reads"),
        )
    }
}
