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
//! - params (named as OpenAI names them): `temperature`, `top_p`, `top_k`, `max_tokens` (or
//!   `max_completion_tokens`), `stop`, `n`, `presence_penalty`, `frequency_penalty`, `seed` and
//!   `response_format` map to their `generationConfig` fields, `logprobs: true` to
//!   `responseLogprobs` and `top_logprobs` to `logprobs` (Gemini's own camelCase names work
//!   too); `parallel_tool_calls` (Gemini has no such switch: it may always call several
//!   functions in one turn) and `user` are dropped, `logit_bias` is refused unless empty;
//!   `safetySettings` and `cachedContent` are request fields; **any other param is put into
//!   `generationConfig` as is** (e.g. `thinkingConfig`). Refusals are invalid requests naming
//!   the route and the param.
//!
//! Answers: each candidate is a choice; text parts are its text (thought summaries are not);
//! `functionCall` parts are its tool calls (ids `call_{choice}_{position}` when Google gives none)
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

use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::{
    CompletionRequest, EmbeddingRequest, Embeddings, HttpProvider, ModelPrice, PluginInfo,
    ProviderError, export_provider,
};

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

impl HttpProvider for Gemini {
    type Decoder = stream::Decoder;

    fn info() -> PluginInfo {
        let models = ModelPrice::table(MODEL_PRICES);
        PluginInfo::new("gemini", env!("CARGO_PKG_VERSION"), models)
    }

    fn request(request: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
        convert::completion_call(request, stream)
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        let response = convert::embedding_call(&request)?
            .send_logged()?
            .error_for_status()?;
        stream::read_embeddings(&response.bytes()?, &request.model, request.input.len())
    }
}

export_provider!(Gemini);

#[cfg(test)]
mod tests;
