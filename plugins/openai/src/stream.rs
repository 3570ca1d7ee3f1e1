//! Reading a streamed answer (chat or legacy completions) event by event. Pure: the caller feeds
//! parsed SSE events and forwards the returned text deltas.

use std::collections::BTreeMap;

use gateway_plugin_sdk::sse::Event;
use gateway_plugin_sdk::{Completion, ProviderError, StreamAssembler, TextDelta};
use serde_json::Value;

use crate::convert::{complete_tool_calls, embedded_error, finish_reason, malformed, usage};
use crate::wire::StreamChunk;

/// What to do after an event.
#[derive(Debug)]
pub enum Step {
    /// Forward these deltas (possibly none) and keep reading.
    Continue(Vec<TextDelta>),
    /// The upstream sent `[DONE]`: stop reading.
    Done,
}

/// State of one streamed answer.
#[derive(Default)]
pub struct StreamState {
    assembler: StreamAssembler,
    /// The last non-empty `model` seen (Azure's first chunk has `"model": ""`).
    model: Option<String>,
    /// Logprobs per choice, merged across chunks.
    logprobs: BTreeMap<u32, Value>,
    saw_finish_reason: bool,
    saw_done: bool,
}

impl StreamState {
    /// A state before the first event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one SSE event.
    pub fn event(&mut self, event: &Event) -> Result<Step, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.saw_done = true;
            return Ok(Step::Done);
        }
        if data.is_empty() {
            return Ok(Step::Continue(Vec::new()));
        }
        if event.event.as_deref() == Some("error") {
            let error = serde_json::from_str::<Value>(data)
                .map(|v| v.get("error").cloned().unwrap_or(v))
                .unwrap_or_else(|_| Value::String(data.to_owned()));
            return Err(embedded_error(&error));
        }
        let chunk: StreamChunk = serde_json::from_str(data).map_err(malformed)?;
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            return Err(embedded_error(error));
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = Some(model);
        }
        // Groq repeats usage on the finishing chunk and the usage-only chunk; the last one wins.
        if let Some(wire) = &chunk.usage {
            self.assembler.set_usage(usage(wire));
        }
        let mut deltas = Vec::new();
        for choice in chunk.choices {
            let index = choice.index;
            let delta = choice.delta.unwrap_or_default();
            let text = delta.content.or(choice.text).unwrap_or_default();
            // Also for empty text: registers the choice even if it never says anything.
            self.assembler.push_text(index, &text);
            if !text.is_empty() {
                deltas.push(TextDelta { index, text });
            }
            for (position, call) in delta.tool_calls.into_iter().enumerate() {
                let function = call.function.unwrap_or_default();
                // Servers that omit the call index send one call per delta entry in order.
                let call_index = call
                    .index
                    .unwrap_or(u32::try_from(position).unwrap_or(u32::MAX));
                self.assembler.push_tool_call(
                    index,
                    call_index,
                    call.id.as_deref().filter(|id| !id.is_empty()),
                    function.name.as_deref().filter(|name| !name.is_empty()),
                    function.arguments.as_deref(),
                );
            }
            if let Some(call) = delta.function_call {
                self.assembler.push_function_call(
                    index,
                    call.name.as_deref().filter(|name| !name.is_empty()),
                    call.arguments.as_deref(),
                );
            }
            if let Some(piece) = choice.logprobs.filter(|l| !l.is_null()) {
                merge_logprobs(self.logprobs.entry(index).or_insert(Value::Null), piece);
            }
            if let Some(reason) = choice.finish_reason.as_deref() {
                self.assembler.finish_reason(index, finish_reason(reason));
                self.saw_finish_reason = true;
            }
        }
        Ok(Step::Continue(deltas))
    }

    /// The whole completion once the stream is over. A stream that stopped before any choice
    /// finished and without `[DONE]` was cut off.
    pub fn finish(mut self, requested_model: &str) -> Result<Completion, ProviderError> {
        if !self.saw_done && !self.saw_finish_reason {
            return Err(ProviderError::Failed("stream ended early".into()));
        }
        let model = self
            .model
            .take()
            .unwrap_or_else(|| requested_model.to_owned());
        let mut completion = self.assembler.finish(model);
        for choice in &mut completion.choices {
            if let Some(logprobs) = self.logprobs.remove(&choice.index) {
                choice.logprobs = Some(logprobs.to_string());
            }
            complete_tool_calls(choice);
        }
        Ok(completion)
    }
}

/// Merges a chunk's logprobs into the choice's so far: arrays are concatenated (chat's `content`,
/// legacy `tokens`/`token_logprobs`/...), other fields keep their first non-null value.
fn merge_logprobs(into: &mut Value, piece: Value) {
    match (into, piece) {
        (Value::Object(acc), Value::Object(piece)) => {
            for (key, value) in piece {
                match (acc.get_mut(&key), value) {
                    (Some(Value::Array(existing)), Value::Array(more)) => existing.extend(more),
                    (Some(existing), value) if existing.is_null() => *existing = value,
                    (None, value) => {
                        acc.insert(key, value);
                    }
                    _ => {}
                }
            }
        }
        (slot, piece) if slot.is_null() => *slot = piece,
        _ => {}
    }
}
