//! `faulty`: a test-only plugin that misbehaves on request, so the gateway's
//! handling of broken plugins can be tested.
//!
//! Model `trap` panics, which traps the instance (plugins build with
//! `panic = "abort"`); any other model answers the text `fine`.

use gateway_plugin_sdk::{
    Choice, Completion, CompletionRequest, EmbeddingRequest, Embeddings, FinishReason, ModelPrice,
    PluginInfo, Provider, ProviderError, export_provider,
};

struct Faulty;

impl Provider for Faulty {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "faulty".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            models: ["fine", "trap"]
                .into_iter()
                .map(|model| ModelPrice {
                    model: model.into(),
                    input_per_mtok: 0.0,
                    output_per_mtok: 0.0,
                })
                .collect(),
        }
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        trap_if_asked(&request.model);
        Ok(Completion {
            model: request.model,
            choices: vec![Choice {
                index: 0,
                text: "fine".into(),
                reasoning: Vec::new(),
                finish_reason: Some(FinishReason::Stop),
                function_call: None,
                tool_calls: Vec::new(),
                logprobs: None,
            }],
            usage: None,
        })
    }

    // `complete_stream` keeps the SDK's default: it calls `complete`, so model
    // `trap` traps there too.

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        trap_if_asked(&request.model);
        Ok(Embeddings {
            model: request.model,
            vectors: request.input.iter().map(|_| vec![1.0]).collect(),
            usage: None,
        })
    }
}

export_provider!(Faulty);

fn trap_if_asked(model: &str) {
    if model == "trap" {
        panic!("faulty: asked to trap");
    }
}
