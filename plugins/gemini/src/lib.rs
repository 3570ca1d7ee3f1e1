//! The Google Gemini provider plugin: the Gemini API's `generateContent` (chat and text),
//! `streamGenerateContent?alt=sse` (streaming), `batchEmbedContents` (embeddings) and
//! `countTokens` (token counts, of the `generateContent` body the request would be sent as), and
//! images: `predict` of the Imagen models (see `imagen`) and `generateContent` of Gemini's image
//! models (`gemini-2.5-flash-image`, `gemini-3-pro-image-preview`, any model whose id holds
//! `-image`: see `image_output`), what they share in `images`.
//!
//! Route: `base_url = "https://generativelanguage.googleapis.com/v1beta"`. The key travels in the
//! `x-goog-api-key` header, as Google documents, never in the URL (URLs end up in logs).
//!
//! What callers send maps as follows (details on the functions of `convert`):
//! - system messages become `systemInstruction` (text only: Gemini takes nothing else there, so
//!   an image, audio or document on a system message is refused with 400); user and assistant
//!   messages `user` and `model` turns; assistant function calls `functionCall` parts;
//!   `function`/`tool` results `functionResponse` parts of a `user` turn (a JSON-object result is
//!   sent as it is, other text as `{"output": text}`, a failed tool's (`is_error`) as
//!   `{"error": content}`; media in a tool result is refused with 400); consecutive messages of
//!   one role share a turn;
//! - content parts, in order: each run of text parts is one text part (joined with `"\n"`);
//!   image and document bytes are `inlineData {mimeType, data}` (base64) of their media type;
//!   audio is `inlineData` of `audio/{format}` (`audio/mp3`, `audio/wav`); image and document
//!   URLs are `fileData {mimeType, fileUri}` (Gemini fetches `https:`/signed URLs, Files API and
//!   `gs://` URIs itself), the media type being the part's, else guessed from the URL's
//!   extension; an image URL with neither is refused with 400 (never guessed as PNG), a document
//!   URL with neither is `application/pdf`. An image's `detail` and a document's `title` have no
//!   Gemini field and are dropped;
//! - reasoning in history (assistant messages' reasoning parts) goes back as Gemini wrote it,
//!   each signature on the kind of part it came on: a signed summary as `{"thought": true,
//!   "text", "thoughtSignature"}`, a signature without text (one Gemini put on a function call or
//!   on answer text) on the message's function calls in order, else on its last content part.
//!   Unsigned summaries and redacted reasoning (which Gemini never sends) are dropped: Gemini
//!   reads nothing from them. Reasoning parts on other messages are dropped;
//! - `functions` become `functionDeclarations` (their JSON Schema rewritten to Gemini's OpenAPI
//!   subset, see `schema`), `functionCall` becomes `toolConfig.functionCallingConfig`;
//! - `reasoning` becomes `generationConfig.thinkingConfig`: on Gemini 3 (`gemini-3*` and later)
//!   an effort is `thinkingLevel` (none, minimal, low: `"low"`; medium, high, xhigh: `"high"`,
//!   the two levels every Gemini 3 model takes); otherwise a budget is `thinkingBudget` as given
//!   and an effort a budget (none 0, minimal 512, low 1024, medium 8192, high and xhigh 24576:
//!   Google's own mapping of OpenAI's efforts, extended). Only one of the two is sent (Gemini
//!   refuses both); `includeThoughts: true` is added unless thinking is off (budget 0) or the
//!   params set it, so that thought summaries come back as reasoning;
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
//! Answers: each candidate is a choice; text parts are its text; `functionCall` parts are its
//! tool calls (ids `call_{choice}_{position}` when Google gives none) and its `function_call` is
//! the first one. Thought summaries (`"thought": true` parts) are reasoning, whole and streamed:
//! a run of them is one reasoning block, ended by an answer part or by a signed thought part
//! (whose signature is the block's). A `thoughtSignature` on an answer part (a function call,
//! text, or the empty text part a stream ends with) is a reasoning block of its own, without
//! text, which is how the request side knows to put it back on an answer part. Finish reasons:
//! `STOP` is stop (tool calls after calls), `MAX_TOKENS` length, the safety reasons (`SAFETY`,
//! `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, image ones) content filter, any other
//! other; Gemini reports a stop sequence as `STOP` without saying which, and has no pause or
//! refusal reason. Usage: completion tokens include thinking tokens, which are also reported as
//! reasoning tokens; cached content tokens are cached prompt tokens; `promptTokensDetails`'
//! `IMAGE` and `AUDIO` counts are the image and audio prompt tokens. Google reports no usage for
//! embeddings.
//!
//! Thought signatures: Gemini 3 and later refuse replayed function calls without theirs. Calls
//! replayed with the signature Gemini gave (through the reasoning the caller kept) go as they
//! came: Gemini signs the first of parallel calls only. When none of a message's calls has a
//! signature (history written by the client, or reasoning the caller dropped), Gemini 3 models
//! are sent the placeholder Google documents on each call; earlier models accept calls without
//! one and get none.
//!
//! Errors: Google's answer to a wrong API key is a 400 (`INVALID_ARGUMENT`, reason
//! `API_KEY_INVALID`); it is read as the 401 it means, the route's key at fault, which the
//! gateway answers as 502 like any provider's refused key. Every other error status is the
//! SDK's reading of it.

mod convert;
mod image_output;
mod imagen;
pub mod images;
mod schema;
mod stream;
mod wire;

// What the vertex plugin shares: the same request bodies and answers under other URLs.
pub use convert::{OUTPUT, completion_body, completion_fields};
pub use stream::Decoder;
pub use wire::CountTokensResponse;

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::output::OutputFields;
use gateway_plugin_sdk::{
    Completion, CompletionRequest, EmbeddingRequest, Embeddings, HttpProvider, ImageRequest,
    Images, ModelPrice, PluginInfo, ProviderError, Sink, TokenCount, read_completion,
    read_stream_framed,
};

/// Default list prices in USD per million tokens (paid tier, prompts up to 200k tokens):
/// (model, input, output). Gemini 2.5 Flash Image's output is its images' tokens, $30 a million
/// (<https://ai.google.dev/gemini-api/docs/image-generation>): listed by its own name, since
/// `gemini-2.5-flash`'s price would otherwise cover it (the vertex plugin's list takes it too).
pub const MODEL_PRICES: &[(&str, f64, f64)] = &[
    ("gemini-2.5-pro", 1.25, 10.00),
    ("gemini-2.5-flash", 0.30, 2.50),
    ("gemini-2.5-flash-image", 0.30, 30.00),
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
    const OUTPUT: OutputFields = convert::OUTPUT;

    fn info() -> PluginInfo {
        let models = ModelPrice::table(MODEL_PRICES);
        PluginInfo::new("gemini", env!("CARGO_PKG_VERSION"), models)
    }

    fn request(request: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
        convert::completion_call(request, stream)
    }

    fn read_whole(
        response: Response,
        request: &CompletionRequest,
    ) -> Result<Completion, ProviderError> {
        let response = wire::key_refused(response)?;
        read_completion(response, &request.model, stream::Decoder::default())
    }

    fn read_streamed(
        response: Response,
        sink: &mut Sink,
        request: &CompletionRequest,
    ) -> Result<Completion, ProviderError> {
        let response = wire::key_refused(response)?;
        let decoder = stream::Decoder::default();
        read_stream_framed(response, sink, &request.model, decoder, Self::FRAMING)
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        let response = convert::embedding_call(&request)?.send_logged()?;
        let response = wire::key_refused(response)?.error_for_status()?;
        stream::read_embeddings(&response.bytes()?, &request.model, request.input.len())
    }

    /// Imagen's images (`predict`), and those of Gemini's image models (`generateContent`):
    /// see `images`.
    fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
        let (http, call) = convert::image_call(&request)?;
        let response = wire::key_refused(http.send_logged()?)?.error_for_status()?;
        call.read(&response.bytes()?, &request)
    }

    /// Gemini's own count (`countTokens`, free of charge).
    fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
        let response = convert::count_call(&request)?.send_logged()?;
        let response = wire::key_refused(response)?;
        let counted: wire::CountTokensResponse = response.error_for_status()?.json()?;
        Ok(Some(TokenCount {
            input_tokens: counted.total_tokens,
            estimated: false,
        }))
    }
}

// Only the wasm component exports: natively (unit tests, and other plugins' tests linking this
// crate) two plugins' exports of the same names would clash at link time.
#[cfg(all(feature = "component", target_arch = "wasm32"))]
gateway_plugin_sdk::export_provider!(Gemini);

#[cfg(test)]
mod tests;
