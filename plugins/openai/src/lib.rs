//! The OpenAI provider plugin: chat completions (JSON and SSE), legacy text completions and
//! embeddings against OpenAI or any OpenAI-compatible server (Groq, Mistral, Together,
//! DeepSeek, Fireworks, OpenRouter, vLLM, llama.cpp server, Ollama's `/v1`) and Azure OpenAI;
//! rerank against the rerank servers that sit next to them (below).
//!
//! Route settings (the route's `[providers.ID.settings]` table in the gateway's config):
//! - `legacy_completions = true`: `type: text` prompts go to `POST /completions` with `prompt`
//!   instead of being sent to `POST /chat/completions` as one user message.
//! - `api_key_header = "api-key"`: send the key in this header instead of
//!   `Authorization: Bearer` (Azure OpenAI's key header).
//! - `azure_api_version = "2024-10-21"`: Azure OpenAI deployment mode (below).
//! - `rerank_api = "cohere"` (the default), `"voyage"` or `"tei"`: the wire format of
//!   `POST {base_url}/rerank` (below). Another value is refused.
//!
//! Any other key is refused, so that a misspelt setting is not silently ignored.
//!
//! Params are OpenAI's and pass as they are, with two exceptions that spare callers an upstream
//! 400 for a request OpenAI's own SDKs would word differently: `parallel_tool_calls` is left out
//! when there are no functions (OpenAI allows it only with `tools`), and `max_tokens` is sent as
//! `max_completion_tokens` to OpenAI's reasoning models (o1, o3, o4, gpt-5), which refuse the
//! older name.
//!
//! # Content parts
//!
//! A message whose parts are all text is sent with `content` as one string, its texts joined
//! with `"\n"`, as before content parts existed (text-only requests are unchanged). A user
//! message with media is sent with `content` as OpenAI's content parts, in order:
//! - text: `{"type": "text", "text"}`;
//! - an image: `{"type": "image_url", "image_url": {"url", "detail"?}}`, the URL as given or
//!   the bytes as a `data:` URL of the image's media type;
//! - audio: `{"type": "input_audio", "input_audio": {"data": base64, "format"}}`;
//! - a document's bytes: `{"type": "file", "file": {"file_data": data: URL, "filename"}}`, the
//!   filename the document's title, else `document.pdf` / `document.txt` / ... by media type
//!   (OpenAI refuses inline files without one). A document by URL is refused (400): chat
//!   completions take no file URLs.
//!
//! Media on system, assistant, tool and function messages is refused (400): OpenAI takes it on
//! user messages only. A failed tool result (`is_error`) is sent as its text: OpenAI has no
//! field for it. Reasoning parts are dropped on every message: chat completions have no way to
//! send reasoning back.
//!
//! # Reasoning
//!
//! The request's reasoning config becomes `reasoning_effort`: its effort under OpenAI's name
//! (`none`, `minimal`, `low`, `medium`, `high`, `xhigh`), else one chosen from its token budget
//! (0: `none`; under 4096: `low`; under 16384: `medium`; more: `high`). It wins over a
//! `reasoning_effort` among the params; without a config, params pass as they are. Legacy
//! `/completions` take no reasoning: the config is not sent there.
//!
//! Reasoning in answers is read from `reasoning_content` (DeepSeek, vLLM, llama.cpp) or
//! `reasoning` (Groq, OpenRouter, Ollama) of the message or of a stream's deltas (one of them,
//! should a server send both), as the choice's one reasoning block. OpenAI itself returns no
//! reasoning text in chat completions, nor signatures or encrypted reasoning.
//!
//! Usage: `prompt_tokens_details.cached_tokens` (or DeepSeek's `prompt_cache_hit_tokens`),
//! `prompt_tokens_details.audio_tokens` and `completion_tokens_details.reasoning_tokens` are
//! reported. Finish reasons are OpenAI's (`stop`, `length`, `tool_calls`, `function_call`,
//! `content_filter`; anything else is `other`).
//!
//! # Azure OpenAI
//!
//! Azure OpenAI is a mode of this plugin rather than a plugin of its own because it speaks the
//! same wire format — the same request bodies, answers, stream chunks, usage details and error
//! objects — and only the URL and the key's header differ; a second plugin would duplicate all
//! of the mapping for two lines of difference. Two ways to reach it:
//! - Azure's v1 API: `base_url = "https://NAME.openai.azure.com/openai/v1"` and the setting
//!   `api_key_header = "api-key"`. It is a plain OpenAI-compatible route; the model is the
//!   deployment name.
//! - Deployment URLs: `base_url = "https://NAME.openai.azure.com"` and the setting
//!   `azure_api_version`. Calls go to
//!   `{base_url}/openai/deployments/{model}/chat/completions?api-version=...` (likewise
//!   `/completions` and `/embeddings`) with the key in the `api-key` header (unless
//!   `api_key_header` names another); the model is the deployment name, which must consist of
//!   letters, digits, `-`, `_` and `.`.
//!
//! # Rerank
//!
//! `POST /v1/rerank` is one `POST {base_url}/rerank` with the route's key as for the other
//! calls (`Authorization: Bearer`, or the `api_key_header`). The caller's other body keys pass
//! as they are, except those the plugin sets itself. `return_documents` is not sent: Cohere v2
//! does not take it, and the gateway answers the texts itself (a server that echoes them, as
//! Jina does by default, has them ignored). Upstream error statuses map as for embeddings.
//! The results are read in the server's order, as given, and an answer that is not the
//! format's JSON is refused; the gateway checks every provider's results against the
//! documents sent, sorts them most relevant first and cuts them to `top_n`
//! (host/src/flow/whole.rs). `top_n` is sent no larger than the number of documents. Three
//! formats, by the setting `rerank_api`, as their servers' published schemas give them:
//! - `cohere`: `{"model", "query", "documents": [texts], "top_n"?, ...params}` answered with
//!   `{"results": [{"index", "relevance_score", "document"?}], "model"?, "usage"?:
//!   {"total_tokens" | "prompt_tokens"}, "meta"?: {"billed_units"?: {"search_units"?}}}`. One
//!   shape serves Cohere v2 (`base_url = "https://api.cohere.com/v2"`; the v2 request takes
//!   `model, query, documents, top_n, max_tokens_per_doc`, and bills `search_units`), Jina
//!   (`https://api.jina.ai/v1`; its answer's `document`s are ignored), vLLM (`http://HOST/v1`; also `truncate_prompt_tokens`, `priority`; a `top_n` of
//!   0 there means all, so an absent one is not sent), Infinity and LocalAI (`prompt_tokens`).
//!   Tokens (`total_tokens`, else `prompt_tokens`) are reported as prompt tokens; Cohere's
//!   `search_units` as the reranking's search units.
//! - `voyage`: Voyage AI (`https://api.voyageai.com/v1`): `top_k` instead of `top_n` (and
//!   `truncation` as a param), answered with `{"object": "list", "data":
//!   [{"index", "relevance_score"}], "model", "usage": {"total_tokens"}}`.
//! - `tei`: Hugging Face text-embeddings-inference (`base_url` its root):
//!   `{"query", "texts": [texts], "raw_scores": false, "return_text": false, ...params}`
//!   (`truncate`, `truncation_direction` as params; `raw_scores: true` for logits instead of
//!   0-to-1 scores), answered with `[{"index", "score"}]`, which scores every text (TEI takes
//!   no limit; the gateway cuts to `top_n`). TEI serves one model and counts no tokens, so the
//!   reranking names the requested model and has no usage.
//!
//! Azure OpenAI has no rerank: in deployment mode (`azure_api_version`) rerank is refused
//! (400). A rerank model Azure hosts (Cohere's, in Azure AI Foundry) has an endpoint of its
//! own, served by a route of its own with `rerank_api = "cohere"`.

mod convert;
mod stream;
mod wire;

use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::output::OutputFields;
use gateway_plugin_sdk::{
    AudioSink, CompletionRequest, EmbeddingRequest, Embeddings, HttpProvider, ImageRequest, Images,
    ModelPrice, PluginInfo, ProviderError, RerankRequest, Reranking, Speech, SpeechRequest,
    Transcription, TranscriptionRequest, export_provider,
};

/// Default list prices in USD per million tokens: (model, input, output).
const MODEL_PRICES: &[(&str, f64, f64)] = &[
    ("gpt-5", 1.25, 10.00),
    ("gpt-5-mini", 0.25, 2.00),
    ("gpt-5-nano", 0.05, 0.40),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4o-mini", 0.15, 0.60),
    ("o3", 2.00, 8.00),
    ("o3-mini", 1.10, 4.40),
    ("o4-mini", 1.10, 4.40),
    ("gpt-3.5-turbo", 0.50, 1.50),
    ("gpt-3.5-turbo-instruct", 1.50, 2.00),
    ("text-embedding-3-small", 0.02, 0.0),
    ("text-embedding-3-large", 0.13, 0.0),
    ("text-embedding-ada-002", 0.10, 0.0),
];

/// The OpenAI wire protocol as a gateway provider.
pub struct OpenAi;

impl HttpProvider for OpenAi {
    type Decoder = stream::Decoder;
    const OUTPUT: OutputFields = convert::OUTPUT;

    fn info() -> PluginInfo {
        let models = ModelPrice::table(MODEL_PRICES);
        PluginInfo::new("openai", env!("CARGO_PKG_VERSION"), models)
    }

    fn request(request: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
        convert::completion(request, stream)
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        let response = convert::embedding(&request)?.send_logged()?;
        let response = response.error_for_status()?;
        stream::parse_embeddings(&response.bytes()?, &request.model, request.input.len())
    }

    fn rerank(request: RerankRequest) -> Result<Reranking, ProviderError> {
        let (api, http) = convert::rerank(&request)?;
        let response = http.send_logged()?.error_for_status()?;
        stream::parse_rerank(api, &response.bytes()?, &request.model)
    }

    fn transcribe(request: TranscriptionRequest) -> Result<Transcription, ProviderError> {
        let model = request.model.clone();
        let response = convert::transcription(request)?.send_logged()?;
        let response = response.error_for_status()?;
        stream::parse_transcription(&response.bytes()?, &model)
    }

    fn speak(request: SpeechRequest, audio: &mut AudioSink) -> Result<Speech, ProviderError> {
        let (answer, upstream) = convert::speech(&request)?;
        let response = upstream.send_logged()?.error_for_status()?;
        match answer {
            convert::SpeechAnswer::Events => {
                stream::read_speech_events(response, audio, &request.model)
            }
            convert::SpeechAnswer::Bytes => {
                audio.copy(response)?;
                Ok(Speech {
                    model: request.model,
                    usage: None,
                })
            }
        }
    }

    fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
        let response = convert::images(&request)?.send_logged()?;
        let response = response.error_for_status()?;
        let format = convert::output_format(&request.params);
        stream::parse_images(&response.bytes()?, &request, format.as_deref())
    }
}

export_provider!(OpenAi);

#[cfg(test)]
mod tests;
