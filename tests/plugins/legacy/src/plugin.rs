// The plugin itself, shared by `legacy` (built against 0.1.0) and `legacy012` (0.1.2):
// each crate generates its world's bindings, defines `NAME` and `stream_extra`, then
// includes this file.

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
    format!("{NAME}: {input}")
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
            name: NAME.into(),
            version: VERSION.into(),
            models: vec![ModelPrice {
                model: NAME.into(),
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
        stream_extra(&request)?;
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
            format!("{NAME} does not embed"),
        ))
    }
}

export!(Legacy);
