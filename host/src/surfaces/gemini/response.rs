//! Answers in Gemini's shapes: a `GenerateContentResponse` (`candidates`, `usageMetadata`,
//! `modelVersion`, `responseId`), the same cut into chunks for `streamGenerateContent`'s
//! server-sent events, embeddings (`embedding` or `embeddings`), token counts
//! (`totalTokens`), and errors as Google writes them (`{"error": {"code", "message",
//! "status", "details"}}`).

use bytes::Bytes;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::error::ApiError;
use crate::flow::{CompletionCodec, EmbeddingCodec, Envelope, Metered};
use crate::plugins::types;
use crate::store::TokenUsage;
use crate::surfaces::blocks::calls;

/// Writes one request's answer, whole or streamed.
#[derive(Debug)]
pub struct GenerateAnswer {
    /// The caller asked for thoughts (`thinkingConfig.includeThoughts`): reasoning text is
    /// written as `thought` parts; otherwise only its signatures go out.
    pub include_thoughts: bool,
}

/// Gemini's `finishReason` for a choice's.
fn finish_reason(reason: Option<&types::FinishReason>) -> &'static str {
    match reason {
        Some(types::FinishReason::Length) => "MAX_TOKENS",
        Some(types::FinishReason::ContentFilter | types::FinishReason::Refusal) => "SAFETY",
        Some(types::FinishReason::Pause | types::FinishReason::Other) => "OTHER",
        // Gemini ends a turn that called functions as a plain stop.
        Some(
            types::FinishReason::Stop
            | types::FinishReason::StopSequence(_)
            | types::FinishReason::ToolCalls
            | types::FinishReason::FunctionCall,
        )
        | None => "STOP",
    }
}

/// `usageMetadata`: Gemini counts thoughts apart from the candidates' tokens, and includes
/// cached tokens in the prompt's, as the gateway does.
fn usage_metadata(usage: &TokenUsage) -> Value {
    let thoughts = usage.reasoning_tokens.unwrap_or(0);
    let mut metadata = json!({
        "promptTokenCount": usage.prompt_tokens,
        "candidatesTokenCount": usage.completion_tokens.saturating_sub(thoughts),
        "totalTokenCount": usage.total_tokens,
    });
    if let Some(cached) = usage.cached_prompt_tokens.filter(|c| *c > 0) {
        metadata["cachedContentTokenCount"] = json!(cached);
    }
    if thoughts > 0 {
        metadata["thoughtsTokenCount"] = json!(thoughts);
    }
    metadata
}

/// `args` of a `functionCall` part: the arguments when they are a JSON object.
fn call_args(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

/// A thought part.
fn thought(reasoning: &types::Reasoning) -> Value {
    let mut part = json!({"text": reasoning.text, "thought": true});
    if let Some(signature) = reasoning.signature.as_deref().filter(|s| !s.is_empty()) {
        part["thoughtSignature"] = json!(signature);
    }
    part
}

impl GenerateAnswer {
    /// A choice's parts: `with_text` (false once a stream has sent it) its thoughts and text,
    /// then its calls, with the signatures of answer parts where Gemini puts them (on the
    /// calls in order, one more on the last text part: the gemini plugin's reading, reversed).
    fn parts(&self, choice: &types::Choice, with_text: bool) -> Vec<Value> {
        let mut parts = Vec::new();
        let mut signatures = Vec::new();
        for reasoning in &choice.reasoning {
            match reasoning.signature.as_deref().filter(|s| !s.is_empty()) {
                Some(signature) if reasoning.text.is_empty() => signatures.push(signature),
                _ if reasoning.text.is_empty() => {}
                _ if with_text && self.include_thoughts => parts.push(thought(reasoning)),
                _ => {}
            }
        }
        let made = calls(choice);
        let surplus = signatures.len().saturating_sub(made.len());
        let (text_signatures, call_signatures) = signatures.split_at(surplus);
        let text_signature = text_signatures.last();
        if with_text && !choice.text.is_empty() {
            let mut part = json!({"text": choice.text});
            if let Some(signature) = text_signature {
                part["thoughtSignature"] = json!(signature);
            }
            parts.push(part);
        } else if let Some(signature) = text_signature {
            // Streamed, the text went out before its signature was known: Gemini sends it so
            // too, on an empty text part.
            parts.push(json!({"text": "", "thoughtSignature": signature}));
        }
        for (j, call) in made.iter().enumerate() {
            let mut part = json!({"functionCall": {"id": call.id, "name": call.name,
                "args": call_args(&call.arguments)}});
            if let Some(signature) = call_signatures.get(j) {
                part["thoughtSignature"] = json!(signature);
            }
            parts.push(part);
        }
        parts
    }

    fn candidate(&self, choice: &types::Choice, with_text: bool) -> Value {
        json!({
            "content": {"role": "model", "parts": self.parts(choice, with_text)},
            "finishReason": finish_reason(choice.finish_reason.as_ref()),
            "index": choice.index,
        })
    }

    /// The whole answer (`with_text`), or a stream's last chunk (its text went out before):
    /// every choice as a candidate, and the usage when it is known.
    fn answer(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
        with_text: bool,
    ) -> Value {
        let candidates = (completion.choices.iter())
            .map(|choice| self.candidate(choice, with_text))
            .collect();
        let mut answer = response(envelope, &completion.model, candidates);
        if let Some(usage) = usage {
            answer.insert("usageMetadata".into(), usage_metadata(usage.usage));
        }
        Value::Object(answer)
    }
}

/// What every answer and chunk carries beside its candidates.
fn response(envelope: &Envelope<'_>, model: &str, candidates: Vec<Value>) -> Map<String, Value> {
    let mut answer = Map::new();
    answer.insert("candidates".into(), Value::Array(candidates));
    let model = if model.is_empty() {
        envelope.model
    } else {
        model
    };
    answer.insert("modelVersion".into(), json!(model));
    answer.insert("responseId".into(), json!(envelope.invocation_id));
    answer
}

/// One server-sent event of a stream, as Google writes them.
fn event(data: &Value) -> Bytes {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    Bytes::from(out)
}

/// A chunk carrying `parts` of choice `index`.
fn chunk(envelope: &Envelope<'_>, pieces: Vec<(u32, Value)>) -> Bytes {
    let candidates = pieces
        .into_iter()
        .map(|(index, part)| json!({"content": {"role": "model", "parts": [part]}, "index": index}))
        .collect();
    event(&Value::Object(response(envelope, "", candidates)))
}

impl CompletionCodec for GenerateAnswer {
    fn completion(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> String {
        self.answer(envelope, completion, usage, true).to_string()
    }

    fn delta_frame(&mut self, envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Bytes {
        let pieces = deltas
            .iter()
            .map(|delta| (delta.index, json!({"text": delta.text})))
            .collect();
        chunk(envelope, pieces)
    }

    fn reasoning_frame(
        &mut self,
        envelope: &Envelope<'_>,
        pieces: &[types::ReasoningDelta],
    ) -> Option<Bytes> {
        if !self.include_thoughts {
            return None;
        }
        let pieces: Vec<(u32, Value)> = pieces
            .iter()
            .filter(|piece| !piece.text.is_empty())
            .map(|piece| (piece.index, json!({"text": piece.text, "thought": true})))
            .collect();
        (!pieces.is_empty()).then(|| chunk(envelope, pieces))
    }

    fn last_frame(
        &mut self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> Bytes {
        event(&self.answer(envelope, completion, usage, false))
    }

    fn error_frame(&mut self, error: &ApiError, invocation_id: &Uuid) -> Bytes {
        event(&error_body(error, invocation_id))
    }
}

/// `embedContent`'s answer (`embedding`) or `batchEmbedContents`' (`embeddings`).
#[derive(Debug)]
pub struct EmbedAnswer {
    pub batch: bool,
}

impl EmbeddingCodec for EmbedAnswer {
    fn embeddings(&self, _: &Envelope<'_>, vectors: &[Vec<f32>], _: Option<Metered<'_>>) -> String {
        if self.batch {
            let embeddings: Vec<Value> = vectors.iter().map(|v| json!({"values": v})).collect();
            json!({"embeddings": embeddings}).to_string()
        } else {
            let values = vectors.first().map(Vec::as_slice).unwrap_or_default();
            json!({"embedding": {"values": values}}).to_string()
        }
    }
}

/// `countTokens`' answer.
pub fn token_count(_: &Envelope<'_>, count: types::TokenCount) -> String {
    crate::surfaces::json::count_answer(json!({"totalTokens": count.input_tokens}), count)
}

/// Google's canonical code (`google.rpc.Code`) for the status the gateway gives `error`.
fn status_name(error: &ApiError) -> &'static str {
    match error.status().as_u16() {
        400 | 405 | 411 | 413 | 415 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        502 | 503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

/// `{"error": {"code", "message", "status", "details"}}`: the message names the parameter at
/// fault and quotes the provider; `details` holds the invocation id as a `RequestInfo` (where
/// Google puts a request's id) and the gateway's stable code, if any, as an `ErrorInfo`.
pub fn error_body(error: &ApiError, invocation_id: &Uuid) -> Value {
    let mut details = vec![json!({
        "@type": "type.googleapis.com/google.rpc.RequestInfo",
        "requestId": invocation_id.to_string(),
    })];
    if let Some(code) = error.code() {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": code,
            "domain": "gateway",
        }));
    }
    json!({"error": {
        "code": error.status().as_u16(),
        "message": error.described_for(invocation_id),
        "status": status_name(error),
        "details": details,
    }})
}
