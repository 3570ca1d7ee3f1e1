//! The Anthropic provider plugin: Claude through the Messages API (`POST {base_url}/messages`),
//! plain JSON and the SSE event stream, with tools mapped to the gateway's function calls.
//!
//! Route settings (the route's `[providers.ID.settings]` table in the gateway's config):
//! - `default_max_tokens = N`: the `max_tokens` sent when the caller gives none (default 4096;
//!   Anthropic requires the field).
//!
//! Anthropic has no embeddings API, so `embed` keeps the SDK's default (an invalid request).

mod convert;
mod stream;
mod wire;

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    Completion, CompletionRequest, ModelPrice, PluginInfo, Provider, ProviderError, Route, Sink,
    export_provider,
};
use serde_json::{Map, Value};

use convert::RouteSettings;
use stream::{Step, StreamState};

/// The Messages API version the plugin speaks (sent as `anthropic-version`).
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Default list prices in USD per million tokens: (model, input, output). The gateway matches
/// dated snapshots (`claude-sonnet-4-20250514`) and `-latest` aliases by the longest name here
/// followed by `-`.
const MODEL_PRICES: &[(&str, f64, f64)] = &[
    ("claude-opus-4-1", 15.00, 75.00),
    ("claude-opus-4", 15.00, 75.00),
    ("claude-sonnet-4-5", 3.00, 15.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-3-7-sonnet", 3.00, 15.00),
    ("claude-haiku-4-5", 1.00, 5.00),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("claude-3-haiku", 0.25, 1.25),
];

/// Anthropic's Messages API as a gateway provider.
pub struct Anthropic;

impl Provider for Anthropic {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "anthropic".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            models: ModelPrice::table(MODEL_PRICES),
        }
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let settings = RouteSettings::from_route(&request.route)?;
        let body = convert::message_body(&request, &settings, false)?;
        let response = upstream_request(&request.route, &body, JSON)?.send_logged()?;
        read_completion(response, &request.model)
    }

    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        let settings = RouteSettings::from_route(&request.route)?;
        let body = convert::message_body(&request, &settings, true)?;
        let response = upstream_request(&request.route, &body, EVENT_STREAM)?.send_logged()?;
        read_stream(response, sink, &request.model)
    }
}

export_provider!(Anthropic);

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// The HTTP request to the Messages API, carrying the route's key in `x-api-key`.
fn upstream_request(
    route: &Route,
    body: &Map<String, Value>,
    accept: &str,
) -> Result<Request, ProviderError> {
    let mut request = Request::post(convert::messages_url(route)?)
        .header("Accept", accept)
        .header("anthropic-version", ANTHROPIC_VERSION);
    // Without a key Anthropic answers 401, which the caller then sees; a keyless proxy in front
    // of it may not need one.
    if let Some(key) = route.api_key.as_deref().filter(|k| !k.is_empty()) {
        request = request.header("x-api-key", key);
    }
    request.json(body)
}

/// Reads a non-streamed answer; a non-2xx status becomes `ProviderError::Upstream` with
/// Anthropic's `error.message`.
fn read_completion(response: Response, model: &str) -> Result<Completion, ProviderError> {
    let response = response.error_for_status()?;
    convert::parse_completion(&response.bytes()?, model)
}

/// Reads a streamed answer, forwarding text (and the usage so far) through `sink` as it arrives.
fn read_stream(
    response: Response,
    sink: &mut Sink,
    model: &str,
) -> Result<Completion, ProviderError> {
    let response = response.error_for_status()?;
    if response.is_json() {
        // A proxy in front of Anthropic may ignore `stream` and answer in one piece.
        let completion = convert::parse_completion(&response.bytes()?, model)?;
        sink.completion_text(&completion)?;
        return Ok(completion);
    }
    let mut state = StreamState::new();
    for event in response.sse() {
        match state.event(&event?)? {
            Step::Continue(Some(chunk)) => sink.send(chunk)?,
            Step::Continue(None) => {}
            Step::Done => break,
        }
    }
    state.finish(model)
}

#[cfg(test)]
mod tests;
