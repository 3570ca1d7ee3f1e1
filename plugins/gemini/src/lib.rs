//! The Google Gemini provider plugin: the Gemini API's `generateContent` (chat and text),
//! `streamGenerateContent?alt=sse` (streaming) and `batchEmbedContents` (embeddings).
//!
//! Route: `base_url = "https://generativelanguage.googleapis.com/v1beta"`. The key travels in the
//! `x-goog-api-key` header, as Google documents, never in the URL (URLs end up in logs).
//!
//! What callers send maps as follows (details on the functions of `convert`):
//! - system messages become `systemInstruction`; user and assistant messages `user` and `model`
//!   turns; assistant function calls `functionCall` parts; `function`/`tool` results
//!   `functionResponse` parts of a `user` turn (a JSON-object result is sent as it is, other text
//!   as `{"output": text}`); consecutive messages of one role share a turn;
//! - `functions` become `functionDeclarations` (their JSON Schema rewritten to Gemini's OpenAPI
//!   subset, see `schema`), `functionCall` becomes `toolConfig.functionCallingConfig`;
//! - params: `temperature`, `top_p`, `top_k`, `max_tokens`, `stop`, `n`, `presence_penalty`,
//!   `frequency_penalty`, `seed` and `response_format` map to their `generationConfig` fields
//!   (Gemini's own camelCase names work too); `safetySettings` and `cachedContent` are request
//!   fields; **any other param is put into `generationConfig` as is** (e.g. `thinkingConfig`).
//!
//! Answers: each candidate is a choice; text parts are its text (thought summaries are not);
//! `functionCall` parts are its tool calls (ids `call_0`, `call_1`, ... when Google gives none)
//! and its `function_call` is the first one. Usage: completion tokens include thinking tokens,
//! which are also reported as reasoning tokens; cached content tokens are cached prompt tokens.
//! Google reports no usage for embeddings.
//!
//! Thought signatures: the gateway's API has no place for the signatures Gemini attaches to
//! function calls, so replayed calls go back without theirs. Gemini 2.x accepts that; Gemini 3
//! and later refuse it, so for them the plugin sends the placeholder Google documents for calls
//! whose signature is unknown.

mod convert;
mod schema;
mod stream;
mod wire;

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    Chunk, Completion, CompletionRequest, EmbeddingRequest, Embeddings, ModelPrice, PluginInfo,
    Provider, ProviderError, Route, Sink, export_provider,
};
use serde_json::Value;

use convert::{UpstreamCall, malformed};
use stream::{Accumulator, Step};

/// Default list prices in USD per million tokens (paid tier, prompts up to 200k tokens):
/// (model, input, output).
const MODEL_PRICES: &[(&str, f64, f64)] = &[
    ("gemini-2.5-pro", 1.25, 10.00),
    ("gemini-2.5-flash", 0.30, 2.50),
    ("gemini-2.5-flash-lite", 0.10, 0.40),
    ("gemini-2.0-flash", 0.10, 0.40),
    ("gemini-2.0-flash-lite", 0.075, 0.30),
    ("text-embedding-004", 0.0, 0.0),
    ("gemini-embedding-001", 0.15, 0.0),
];

/// The Gemini API as a gateway provider.
pub struct Gemini;

impl Provider for Gemini {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "gemini".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            models: ModelPrice::table(MODEL_PRICES),
        }
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let call = convert::completion_call(&request, false)?;
        let response = upstream_request(&request.route, call, JSON)?.send_logged()?;
        read_completion(response, &request.model)
    }

    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        let call = convert::completion_call(&request, true)?;
        let response = upstream_request(&request.route, call, EVENT_STREAM)?.send_logged()?;
        read_stream(response, sink, &request.model)
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        let call = convert::embedding_call(&request)?;
        let response = upstream_request(&request.route, call, JSON)?
            .send_logged()?
            .error_for_status()?;
        convert::parse_embeddings(&response.bytes()?, &request.model, request.input.len())
    }
}

export_provider!(Gemini);

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// The HTTP request of `call`, with the route's key in `x-goog-api-key` when it has one (a
/// keyless route may front a proxy that adds it).
fn upstream_request(
    route: &Route,
    call: UpstreamCall,
    accept: &str,
) -> Result<Request, ProviderError> {
    let mut request = Request::post(call.url).header("Accept", accept);
    if let Some(key) = route.api_key.as_deref().filter(|k| !k.is_empty()) {
        request = request.header("x-goog-api-key", key);
    }
    request.json(&call.body)
}

/// Reads a `generateContent` answer; a non-2xx status becomes `ProviderError::Upstream`.
fn read_completion(response: Response, model: &str) -> Result<Completion, ProviderError> {
    let response = response.error_for_status()?;
    let body = response.bytes()?;
    let mut accumulator = Accumulator::new();
    accumulator.push(serde_json::from_slice(&body).map_err(malformed)?)?;
    Ok(accumulator.finish(model))
}

/// Reads a `streamGenerateContent` answer, forwarding text (and the usage so far) through
/// `sink` as it arrives.
fn read_stream(
    response: Response,
    sink: &mut Sink,
    model: &str,
) -> Result<Completion, ProviderError> {
    let response = response.error_for_status()?;
    let mut accumulator = Accumulator::new();
    if response.is_json() {
        // Without `alt=sse` (a proxy may drop it) the stream is one JSON array of responses.
        let body: Value = serde_json::from_slice(&response.bytes()?).map_err(malformed)?;
        let responses = match body {
            Value::Array(responses) => responses,
            single => vec![single],
        };
        for response in responses {
            let step = accumulator.push(serde_json::from_value(response).map_err(malformed)?)?;
            forward(sink, step)?;
        }
    } else {
        for event in response.sse() {
            let step = accumulator.event(&event?.data)?;
            forward(sink, step)?;
        }
    }
    if !accumulator.finished() {
        return Err(ProviderError::Failed("stream ended early".into()));
    }
    Ok(accumulator.finish(model))
}

/// Sends a step's text and usage; nothing when it has neither.
fn forward(sink: &mut Sink, step: Step) -> Result<(), ProviderError> {
    if step.deltas.is_empty() && step.usage.is_none() {
        return Ok(());
    }
    sink.send(Chunk {
        deltas: step.deltas,
        usage: step.usage,
    })
}

#[cfg(test)]
mod tests;
