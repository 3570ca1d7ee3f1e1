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
//! Message parts (details: `convert::chat`):
//!
//! | part | user / tool result | system | assistant |
//! |---|---|---|---|
//! | text | `text` block (empty text left out) | joined into `system` | `text` block |
//! | image, bytes | `image`, `{"type": "base64", media_type, data}` source | 400 | 400 |
//! | image, URL | `image`, `{"type": "url", url}` source (`detail` is dropped) | 400 | 400 |
//! | audio | 400 (Anthropic takes no audio) | 400 | 400 |
//! | document, PDF bytes | `document`, base64 `application/pdf` source, `title` | 400 | 400 |
//! | document, `text/*` bytes | `document`, `{"type": "text", "media_type": "text/plain", data}` (UTF-8, else 400), `title` | 400 | 400 |
//! | document, other bytes | 400 (Anthropic reads PDFs and plain text only) | 400 | 400 |
//! | document, URL | `document`, `{"type": "url", url}` source, `title` | 400 | 400 |
//! | reasoning | dropped | dropped | `thinking` / `redacted_thinking`, first |
//!
//! A `tool` (or `function`) message's parts are its `tool_result`'s content blocks, with
//! `"is_error": true` when the tool failed. An assistant's reasoning goes back as it came:
//! `redacted_thinking` with its `redacted` data, else `thinking` with its text and `signature`;
//! reasoning with neither (another provider's, a summary) is dropped, since Anthropic refuses
//! thinking it cannot verify. Reasoning blocks go first in the assistant message, as Anthropic
//! requires.
//!
//! Reasoning (`CompletionRequest::reasoning`, which replaces a `thinking` of the params):
//! - effort `none`: no `thinking` (Anthropic's default, which every model accepts);
//! - otherwise `"thinking": {"type": "enabled", "budget_tokens": N}`, N being the budget when
//!   given, else by effort: minimal 1024, low 2048, medium 8192, high 16384, xhigh 32000; a
//!   budget below 1024 (Anthropic's minimum) becomes 1024;
//! - Anthropic wants `budget_tokens` below `max_tokens`: when `max_tokens` (the caller's, or the
//!   default above) is not above the budget, it becomes the budget plus `default_max_tokens`.
//!
//! Answers: `thinking` blocks (whole, or streamed as `thinking_delta`s) are the choice's
//! reasoning, one block per content block, with their `signature` (whole, or the streamed
//! `signature_delta`); `redacted_thinking` blocks are reasoning with `redacted` = their data.
//! Stop reasons: `end_turn` → stop, `stop_sequence` → stop-sequence(the answer's
//! `stop_sequence`), `max_tokens` and `model_context_window_exceeded` → length, `tool_use` →
//! tool calls, `pause_turn` → pause, `refusal` → refusal, others → other. Usage: cache reads and
//! writes are reported (and counted in the prompt tokens); Anthropic reports no image, audio or
//! thinking token counts apart.
//!
//! Anthropic has no embeddings API, so `embed` keeps the SDK's default (an invalid request).
//! `count-tokens` asks Anthropic (`POST /messages/count_tokens`) with the body the request would
//! be sent as, less what only an answer needs (`max_tokens`, `stream`, sampling, `metadata`).

mod convert;
mod stream;
mod wire;

// What the vertex plugin shares: the same request bodies and answers under other URLs.
pub use convert::{OUTPUT, Settings, with_body};
pub use stream::Decoder;

use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::output::OutputFields;
use gateway_plugin_sdk::{
    CompletionRequest, HttpProvider, ModelPrice, PluginInfo, ProviderError, TokenCount,
};

/// Default list prices in USD per million tokens: (model, input, output). The gateway matches
/// dated snapshots (`claude-sonnet-4-20250514`) and `-latest` aliases by the longest name here
/// followed by `-`.
pub const MODEL_PRICES: &[(&str, f64, f64)] = &[
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
    const OUTPUT: OutputFields = convert::OUTPUT;

    fn info() -> PluginInfo {
        let models = ModelPrice::table(MODEL_PRICES);
        PluginInfo::new("anthropic", env!("CARGO_PKG_VERSION"), models)
    }

    fn request(request: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
        convert::upstream_request(request, stream)
    }

    /// Anthropic's own count (`POST /messages/count_tokens`, free of charge).
    fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
        let response = convert::count_request(&request)?.send_logged()?;
        let counted: wire::TokenCount = response.error_for_status()?.json()?;
        Ok(Some(TokenCount {
            input_tokens: counted.input_tokens,
            estimated: false,
        }))
    }
}

// Only the wasm component exports: natively (unit tests, and other plugins' tests linking this
// crate) two plugins' exports of the same names would clash at link time.
#[cfg(all(feature = "component", target_arch = "wasm32"))]
gateway_plugin_sdk::export_provider!(Anthropic);

#[cfg(test)]
mod tests;
