//! Response bodies in the Commonbase shape.

use serde_json::{Value, json};

use super::request::Kind;
use crate::plugins::types;
use crate::store::TokenUsage;

/// What every response of one request shares.
pub struct Envelope<'a> {
    pub invocation_id: &'a str,
    pub project_id: &'a str,
    pub kind: Kind,
    pub model: &'a str,
}

pub fn finish_reason(reason: Option<types::FinishReason>) -> Value {
    let text = match reason {
        None => return Value::Null,
        Some(types::FinishReason::Stop) => "stop",
        Some(types::FinishReason::Length) => "length",
        Some(types::FinishReason::FunctionCall) => "function_call",
        Some(types::FinishReason::ToolCalls) => "tool_calls",
        Some(types::FinishReason::ContentFilter) => "content_filter",
        Some(types::FinishReason::Other) => "other",
    };
    Value::String(text.to_owned())
}

/// One choice; `text` is passed separately so stream frames can send only new text.
pub fn choice(envelope: &Envelope<'_>, choice: &types::Choice, text: &str) -> Value {
    let mut out = json!({
        "text": text,
        "index": choice.index,
        "finish_reason": finish_reason(choice.finish_reason),
        "logprobs": choice.logprobs.as_deref().and_then(|l| serde_json::from_str::<Value>(l).ok()),
    });
    if envelope.kind == Kind::Chat {
        out["role"] = json!("assistant");
    }
    if let Some(call) = &choice.function_call {
        out["function_call"] = json!({"name": call.name, "arguments": call.arguments});
    }
    if !choice.tool_calls.is_empty() {
        out["tool_calls"] = choice
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })
            })
            .collect();
    }
    out
}

pub fn usage_json(usage: &TokenUsage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    })
}

/// A whole (or final streamed) completion response.
pub fn completion(
    envelope: &Envelope<'_>,
    completed: bool,
    choices: Vec<Value>,
    usage: Option<(&TokenUsage, Option<f64>)>,
) -> Value {
    let mut out = json!({
        "completed": completed,
        "invocationId": envelope.invocation_id,
        "projectId": envelope.project_id,
        "type": envelope.kind.as_str(),
        "model": envelope.model,
        "choices": choices,
    });
    if let Some((usage, cost)) = usage {
        out["usage"] = usage_json(usage);
        out["usage_cost"] = json!(cost);
    }
    out
}

/// A partial stream frame: new text for some choices.
pub fn delta_frame(envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Value {
    let choices = deltas
        .iter()
        .map(|delta| {
            let mut choice = json!({
                "text": delta.text,
                "index": delta.index,
                "finish_reason": Value::Null,
                "logprobs": Value::Null,
            });
            if envelope.kind == Kind::Chat {
                choice["role"] = json!("assistant");
            }
            choice
        })
        .collect();
    completion(envelope, false, choices, None)
}

pub fn embeddings(envelope: &Envelope<'_>, vectors: &[Vec<f32>]) -> Value {
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(index, embedding)| json!({"object": "embedding", "index": index, "embedding": embedding}))
        .collect();
    json!({
        "completed": true,
        "invocationId": envelope.invocation_id,
        "projectId": envelope.project_id,
        "type": "embeddings",
        "model": envelope.model,
        "data": data,
    })
}

impl From<&types::Usage> for TokenUsage {
    fn from(u: &types::Usage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            // Some providers leave the total out (0); it is the sum by definition.
            total_tokens: if u.total_tokens == 0 {
                u.prompt_tokens.saturating_add(u.completion_tokens)
            } else {
                u.total_tokens
            },
            cached_prompt_tokens: u.cached_prompt_tokens,
            cache_creation_tokens: u.cache_creation_tokens,
            reasoning_tokens: u.reasoning_tokens,
        }
    }
}
