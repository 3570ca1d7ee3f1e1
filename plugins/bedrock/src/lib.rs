//! The Amazon Bedrock provider plugin: chat through the Bedrock Runtime's Converse API (`POST
//! {base_url}/model/{modelId}/converse`, and `/converse-stream`, whose answer is an AWS event
//! stream), embeddings through InvokeModel (`/model/{modelId}/invoke`, Titan Text Embeddings
//! and Cohere Embed), reranking through InvokeModel too (Cohere Rerank 3.5 and Amazon Rerank
//! 1.0: `rerank`), images through InvokeModel too (Amazon Nova Canvas and Titan Image
//! Generator: `images`), token counts of Claude models through CountTokens
//! (`/model/{modelId}/count-tokens`, the Converse body as its `converse` input), every request
//! signed with AWS Signature Version 4 inside the plugin.
//!
//! Route settings (the route's `[providers.ID.settings]` table; other keys are refused):
//! - `region`: the region to sign for; else the one a `https://bedrock-runtime.REGION.
//!   amazonaws.com` base URL names.
//! - `aws_access_key_id_env`, `aws_secret_access_key_env`, optional `aws_session_token_env`:
//!   the environment variables holding the AWS credentials, which the gateway reads when it
//!   builds the route and hands over as the route's secrets. A variable named but unset is an
//!   error naming the setting and the variable (never a value).
//! - Without them, the route's provider key (`api_key_env`, or the caller's `Provider-API-Key`)
//!   is a Bedrock API key, sent as `Authorization: Bearer`.
//! - `default_max_tokens = N`: the room for the answer added to a Claude thinking budget
//!   (4096 when unset).
//!
//! The model is a Bedrock model id (`anthropic.claude-3-5-sonnet-20240620-v1:0`), an inference
//! profile id (`us.anthropic.claude-sonnet-4-20250514-v1:0`) or an ARN; it travels as one path
//! segment (`:` as `%3A`, `/` as `%2F`).
//!
//! Params arrive named as OpenAI names them and are mapped to Converse's fields
//! (`convert::caller_params`): `max_tokens`/`max_completion_tokens`, `temperature`, `top_p`
//! and `stop` go to `inferenceConfig`; `top_k` to `additionalModelRequestFields`; defaults that
//! change nothing are dropped and what Converse cannot do is refused (400); Converse's own
//! fields (`additionalModelRequestFields`, `guardrailConfig`, `performanceConfig`, ...) pass.
//!
//! Message parts (details: `convert::chat`):
//!
//! | part | user / tool result | system | assistant |
//! |---|---|---|---|
//! | text | `text` block (empty text left out) | a `system` block | `text` block |
//! | image, bytes | `image` (png, jpeg, gif, webp), `source.bytes` | 400 | 400 |
//! | image, `s3://` URL | `image`, `source.s3Location` | 400 | 400 |
//! | image, other URL | 400 (Bedrock fetches no URL) | 400 | 400 |
//! | audio | 400 | 400 | 400 |
//! | document | `document` (pdf, csv, doc, docx, xls, xlsx, html, txt, md; other `text/*` as txt) with a `name` from its title | 400 | 400 |
//! | reasoning | dropped | dropped | `reasoningContent`, first |
//!
//! Tools: the caller's functions are `toolConfig.tools[].toolSpec` (`inputSchema.json`); the
//! choice `auto` → `{"auto": {}}`, required → `{"any": {}}`, a name → `{"tool": {"name"}}`,
//! none → no tools (or, when the conversation already holds tool calls, which Bedrock then
//! requires tools for, no `toolChoice`). Calls are `toolUse` blocks, results `toolResult`
//! blocks (`status: "error"` when the tool failed).
//!
//! Reasoning: for Claude models (`anthropic.claude` in the model id), the caller's reasoning
//! config becomes `additionalModelRequestFields.thinking` as in the anthropic plugin (effort
//! none: no thinking; else a budget, by effort when none is given, `maxTokens` raised above
//! it); other models get no reasoning field (send theirs in `additionalModelRequestFields`).
//! Answers' `reasoningContent` (`reasoningText` with its signature, `redactedContent`) is the
//! choice's reasoning, and goes back on later turns as it came.
//!
//! Stop reasons: `end_turn` → stop, `stop_sequence` → stop-sequence (the sequence Claude names
//! in `additionalModelResponseFields.stop_sequence`, else stop), `max_tokens` and
//! `model_context_window_exceeded` → length, `tool_use` → tool calls, `guardrail_intervened`
//! and `content_filtered` → content filter, others → other. Usage: cache reads and writes
//! (`cacheReadInputTokens`, `cacheWriteInputTokens`) count as prompt tokens and are reported
//! apart. Errors: see `errors` (throttling → 429, validation → 400, access denied → 502).
//!
//! The plugin ships no prices: a route prices its models with its `pricing` table (or the
//! gateway's price catalog).

mod convert;
mod embed;
mod errors;
mod images;
mod invoke;
mod rerank;
mod sigv4;
mod stream;
mod wire;

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    Completion, CompletionRequest, EmbeddingRequest, Embeddings, ImageRequest, Images, PluginInfo,
    Provider, ProviderError, RerankRequest, Reranking, Sink, TokenCount, check_output,
    read_completion, read_stream,
};

use crate::sigv4::AmzDate;

/// Amazon Bedrock as a gateway provider.
pub struct Bedrock;

impl Provider for Bedrock {
    fn info() -> PluginInfo {
        PluginInfo::new("bedrock", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let upstream = convert::upstream_request(&request, false, &AmzDate::now())?;
        check_output(&request.output, &convert::OUTPUT, upstream.body_bytes())?;
        read_completion(send(upstream)?, &request.model, stream::Decoder::default())
    }

    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        let upstream = convert::upstream_request(&request, true, &AmzDate::now())?;
        check_output(&request.output, &convert::OUTPUT, upstream.body_bytes())?;
        read_stream(
            send(upstream)?,
            sink,
            &request.model,
            stream::Decoder::default(),
        )
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        embed::embed(request)
    }

    fn rerank(request: RerankRequest) -> Result<Reranking, ProviderError> {
        rerank::rerank(request)
    }

    fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
        images::generate_images(request)
    }

    /// Bedrock's own count (CountTokens, free of charge) for Claude, the family that offers it;
    /// the gateway counts the others.
    fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
        if !convert::is_claude(&request.model) {
            return Ok(None);
        }
        let upstream = convert::count_request(&request, &AmzDate::now())?;
        let counted: wire::CountTokensResponse = send(upstream)?.json()?;
        Ok(Some(TokenCount {
            input_tokens: counted.input_tokens,
            estimated: false,
        }))
    }
}

/// Sends `request`; an error answer is Bedrock's error, mapped (`errors`).
fn send(request: Request) -> Result<Response, ProviderError> {
    let response = request.send_logged()?;
    if response.is_success() {
        Ok(response)
    } else {
        Err(errors::from_response(response))
    }
}

gateway_plugin_sdk::export_provider!(Bedrock);

#[cfg(test)]
mod tests;
