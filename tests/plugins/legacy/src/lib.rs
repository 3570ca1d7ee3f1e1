//! `legacy`: a provider built directly against the frozen
//! `plugin-sdk/wit/frozen/0.1.0` world, the way a plugin released with gateway 0.1.0 was.
//! The lifecycle tests load it into the current host to prove that plugins
//! built for an earlier compatible WIT version keep serving.
//!
//! It answers `legacy: <prompt>` for text prompts (and the last message's
//! content for chats), streaming the answer as one chunk.

// The generated bindings take every record field as an argument.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    world: "provider",
    path: "../../../plugin-sdk/wit/frozen/0.1.0",
});

use gateway::provider::sink;
// The world's `use` already brought the request and result types into scope.
use gateway::provider::types::{Choice, Chunk, FinishReason, ModelPrice, Prompt, TextDelta};

struct Legacy;

fn answer(request: &CompletionRequest) -> String {
    let input = match &request.prompt {
        Prompt::Text(text) => text.clone(),
        Prompt::Chat(messages) => messages
            .last()
            .and_then(|m| m.content.clone())
            .unwrap_or_default(),
    };
    format!("legacy: {input}")
}

fn completion(request: &CompletionRequest, text: String) -> Completion {
    Completion {
        model: request.model.clone(),
        choices: vec![Choice {
            index: 0,
            text,
            finish_reason: Some(FinishReason::Stop),
            function_call: None,
            tool_calls: Vec::new(),
            logprobs: None,
        }],
        usage: None,
    }
}

impl Guest for Legacy {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "legacy".into(),
            version: "0.1.0".into(),
            models: vec![ModelPrice {
                model: "legacy".into(),
                input_per_mtok: 0.0,
                output_per_mtok: 0.0,
            }],
        }
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let text = answer(&request);
        Ok(completion(&request, text))
    }

    fn complete_stream(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let text = answer(&request);
        let chunk = Chunk {
            deltas: vec![TextDelta {
                index: 0,
                text: text.clone(),
            }],
            usage: None,
        };
        sink::send(&chunk).map_err(|()| ProviderError::Failed("the caller left".into()))?;
        Ok(completion(&request, text))
    }

    fn embed(_request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        Err(ProviderError::InvalidRequest(
            "legacy does not embed".into(),
        ))
    }
}

export!(Legacy);
