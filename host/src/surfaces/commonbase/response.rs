//! Response bodies and stream frames in the Commonbase shape.

use bytes::Bytes;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::ApiError;
use crate::flow::{CompletionCodec, EmbeddingCodec, Envelope, Kind, Metered};
use crate::http::sse_frame;
use crate::plugins::types;
use crate::store::TokenUsage;

/// Writes `/completions` answers: a JSON body, or `data:` frames of the same
/// shape with `completed: false` until the last.
pub struct CompletionAnswer {
    /// The body's `showUsage`: usage and its cost go in the answer.
    pub show_usage: bool,
}

impl CompletionAnswer {
    fn shown<'a>(&self, usage: Option<Metered<'a>>) -> Option<Metered<'a>> {
        usage.filter(|_| self.show_usage)
    }
}

impl CompletionCodec for CompletionAnswer {
    fn completion(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> String {
        let choices = completion
            .choices
            .iter()
            .map(|c| choice(envelope, c, &c.text))
            .collect();
        completion_json(envelope, true, choices, self.shown(usage)).to_string()
    }

    fn delta_frame(&mut self, envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Bytes {
        sse_frame(&delta_json(envelope, deltas))
    }

    /// Every choice's end (finish reason, function calls) without its text,
    /// which the delta frames carried.
    fn last_frame(
        &mut self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> Bytes {
        let choices = completion
            .choices
            .iter()
            .map(|c| choice(envelope, c, ""))
            .collect();
        sse_frame(&completion_json(envelope, true, choices, self.shown(usage)))
    }

    fn error_frame(&mut self, error: &ApiError, invocation_id: &Uuid) -> Bytes {
        sse_frame(&error.body(invocation_id))
    }
}

/// Writes `/embeddings` answers.
pub struct EmbeddingAnswer;

impl EmbeddingCodec for EmbeddingAnswer {
    fn embeddings(
        &self,
        envelope: &Envelope<'_>,
        vectors: &[Vec<f32>],
        _: Option<Metered<'_>>,
    ) -> String {
        embeddings_json(envelope, vectors).to_string()
    }
}

fn finish_reason(reason: Option<&types::FinishReason>) -> Value {
    reason.map_or(Value::Null, |reason| {
        Value::String(reason.openai_str().to_owned())
    })
}

/// One choice; `text` is passed separately so stream frames can send only new text.
fn choice(envelope: &Envelope<'_>, choice: &types::Choice, text: &str) -> Value {
    let mut out = json!({
        "text": text,
        "index": choice.index,
        "finish_reason": finish_reason(choice.finish_reason.as_ref()),
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

fn usage_json(usage: &TokenUsage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    })
}

/// A whole (or final streamed) completion response.
fn completion_json(
    envelope: &Envelope<'_>,
    completed: bool,
    choices: Vec<Value>,
    usage: Option<Metered<'_>>,
) -> Value {
    let mut out = json!({
        "completed": completed,
        "invocationId": envelope.invocation_id,
        "projectId": envelope.project_id,
        "type": envelope.kind.as_str(),
        "model": envelope.model,
        "choices": choices,
    });
    if let Some(Metered { usage, cost_usd }) = usage {
        out["usage"] = usage_json(usage);
        out["usage_cost"] = json!(cost_usd);
    }
    out
}

/// A partial stream frame: new text for some choices.
fn delta_json(envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Value {
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
    completion_json(envelope, false, choices, None)
}

fn embeddings_json(envelope: &Envelope<'_>, vectors: &[Vec<f32>]) -> Value {
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
