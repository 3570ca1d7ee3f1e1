//! Unit tests of the request mapping and the answer decoder, partly against real recorded
//! provider traffic.

mod azure;
mod convert;
mod embed;
mod golden;
mod http;
mod images;
mod info;
mod output;
mod parts;
mod rerank;
mod speech;
mod stream;
mod transcribe;

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    Audio, Completion, CompletionRequest, Document, EmbeddingRequest, FinishReason, FunctionCall,
    FunctionChoice, FunctionDef, Image, Message, Part, Prompt, Provider, ProviderError, Reasoning,
    ReasoningConfig, ReasoningEffort, Role, Route, Sink, Source, ToolCall, read_completion,
    read_stream,
};
use gateway_test_support::fixtures::{calling, failed, invalid_request, message, named};
use gateway_test_support::recording::recording;
use serde_json::{Value, json};

use crate::OpenAi;
use crate::convert::{Settings, chat_messages, completion, embedding, tool_choice, tools};
use crate::stream::{Decoder, parse_embeddings, usage};
use crate::wire::WireUsage;

// ---------------------------------------------------------------------------------------------
// Helpers

fn route(settings: &str) -> Route {
    Route {
        id: "test".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: Some("sk-test".into()),
        settings: settings.into(),
        secrets: Vec::new(),
    }
}

fn request(prompt: Prompt) -> CompletionRequest {
    CompletionRequest {
        route: route("{}"),
        model: "gpt-4o-mini".into(),
        prompt,
        functions: Vec::new(),
        function_choice: None,
        reasoning: None,
        output: gateway_plugin_sdk::OutputLimit::NONE,
        params: "{}".into(),
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

fn messages_json(messages: &[Message]) -> Value {
    serde_json::to_value(chat_messages(messages).expect("messages map")).expect("serializes")
}

/// The JSON body of an upstream request.
fn sent(http: &Request) -> Value {
    serde_json::from_slice(http.body_bytes()).expect("JSON body")
}

fn body(request: &CompletionRequest, stream: bool) -> Value {
    sent(&completion(request, stream).expect("request builds"))
}

fn url(request: &CompletionRequest) -> String {
    completion(request, false)
        .expect("request builds")
        .url()
        .to_owned()
}

fn settings(route: &Route) -> Result<Settings, ProviderError> {
    route.settings::<Settings>()
}

/// Reads a whole answer with the plugin's decoder.
fn parse_completion(body: &[u8], requested_model: &str) -> Result<Completion, ProviderError> {
    read_completion(
        Response::from_chunks(200, Vec::new(), vec![body.to_vec()]),
        requested_model,
        Decoder,
    )
}

/// Feeds an SSE body through the SDK's stream driver in small pieces (to cross chunk boundaries
/// the way a network does), returning the forwarded text per choice and the final completion.
fn replay_stream(body: &str) -> Result<(Vec<(u32, String)>, Completion), ProviderError> {
    let mut sink = Sink::buffered();
    let response = response(200, "text/event-stream", body, 7);
    let completion = read_stream(response, &mut sink, "requested-model", Decoder)?;
    let mut forwarded: Vec<(u32, String)> = Vec::new();
    for delta in sink.sent().iter().flat_map(|chunk| &chunk.deltas) {
        match forwarded.iter_mut().find(|(i, _)| *i == delta.index) {
            Some((_, text)) => text.push_str(&delta.text),
            None => forwarded.push((delta.index, delta.text.clone())),
        }
    }
    Ok((forwarded, completion))
}

// ---------------------------------------------------------------------------------------------
// Recorded traffic (go-vcr YAML, read by `gateway_test_support`)

const OPENAI_FAMILY: &[&str] = &[
    "OpenAI__openai-gpt-4o-mini__simple",
    "OpenAI__openai-gpt-4o-mini__simple_streaming",
    "OpenAI__openai-gpt-4o-mini__tool",
    "OpenAI__openai-gpt-4o-mini__tool_streaming",
    "OpenAI__openai-gpt-4o-mini__multi_tool",
    "OpenAI__openai-gpt-4o-mini__multi_tool_streaming",
    "Azure__azure-gpt-5-mini__simple",
    "Azure__azure-gpt-5-mini__simple_streaming",
    "Azure__azure-gpt-5-mini__tool",
    "Azure__azure-gpt-5-mini__tool_streaming",
    "OpenAICompatible__groq-kimi-k2__simple",
    "OpenAICompatible__groq-kimi-k2__simple_streaming",
    "OpenAICompatible__groq-kimi-k2__tool",
    "OpenAICompatible__groq-kimi-k2__tool_streaming",
    "OpenAICompatible__groq-kimi-k2__multi_tool",
    "OpenAICompatible__groq-kimi-k2__multi_tool_streaming",
    "OpenAICompatible__llama-cpp-gpt-oss__simple",
    "OpenAICompatible__llama-cpp-gpt-oss__simple_streaming",
    "OpenAICompatible__llama-cpp-gpt-oss__tool",
    "OpenAICompatible__llama-cpp-gpt-oss__tool_streaming",
];

fn stream_of(events: &[&str]) -> String {
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

fn response(status: u16, content_type: &str, body: &str, chunk_size: usize) -> Response {
    Response::from_chunks(
        status,
        vec![("Content-Type".into(), content_type.into())],
        body.as_bytes()
            .chunks(chunk_size.max(1))
            .map(<[u8]>::to_vec)
            .collect(),
    )
}
