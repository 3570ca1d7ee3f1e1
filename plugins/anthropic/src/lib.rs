//! The Anthropic provider plugin: Claude through the Messages API (`POST {base_url}/messages`),
//! plain JSON and the SSE event stream, with tools mapped to the gateway's function calls.
//!
//! Route settings (the route's `[providers.ID.settings]` table in the gateway's config; other
//! keys are refused):
//! - `default_max_tokens = N`: the `max_tokens` sent when the caller gives none (default 4096;
//!   Anthropic requires the field).
//!
//! Params arrive named as OpenAI names them. Anthropic refuses fields it does not know, so each
//! is translated (`max_completion_tokens` → `max_tokens`, `stop` → `stop_sequences`, `user` →
//! `metadata.user_id`, `parallel_tool_calls: false` → `tool_choice.disable_parallel_tool_use`),
//! dropped where leaving it out changes nothing (`seed`, which OpenAI treats as best-effort too;
//! `stream_options`; `n: 1`, `response_format: {"type": "text"}`, zero penalties, `logprobs:
//! false` and other defaults), or refused as an invalid request naming the route and the param
//! (`n` > 1, JSON `response_format`, non-zero penalties, `logprobs`, `top_logprobs`,
//! `logit_bias`). Anthropic's own fields (`top_k`, `metadata`, `thinking`, `service_tier`, ...)
//! pass as they are. Details: `convert::caller_params`.
//!
//! Anthropic has no embeddings API, so `embed` keeps the SDK's default (an invalid request).

mod convert;
mod stream;
mod wire;

use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::{
    CompletionRequest, HttpProvider, ModelPrice, PluginInfo, ProviderError, export_provider,
};

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

impl HttpProvider for Anthropic {
    type Decoder = stream::Decoder;

    fn info() -> PluginInfo {
        let models = ModelPrice::table(MODEL_PRICES);
        PluginInfo::new("anthropic", env!("CARGO_PKG_VERSION"), models)
    }

    fn request(request: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
        convert::upstream_request(request, stream)
    }
}

export_provider!(Anthropic);

#[cfg(test)]
mod tests;
