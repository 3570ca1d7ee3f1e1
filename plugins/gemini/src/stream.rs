//! Reading answers: a `generateContent` answer is one [`GenerateContentResponse`], a stream is a
//! sequence of them (each event carries the new parts, the last one the finish reason and the
//! final usage). [`Accumulator`] serves both, so streamed and whole answers are read alike.
//! Pure: the caller feeds parsed responses and forwards the returned deltas.

use std::collections::BTreeMap;

use gateway_plugin_sdk::{
    Completion, FinishReason, ProviderError, StreamAssembler, TextDelta, Usage,
};
use serde_json::Value;

use crate::convert::{embedded_error, finish_reason, malformed, usage};
use crate::wire::{GenerateContentResponse, PartIn};

/// What one response added.
#[derive(Debug, Default, PartialEq)]
pub struct Step {
    /// New answer text, at most one delta per choice.
    pub deltas: Vec<TextDelta>,
    /// The usage so far, when the response reported it.
    pub usage: Option<Usage>,
}

/// Per-choice state the assembler does not keep.
#[derive(Debug, Default)]
struct ChoiceState {
    /// Function calls seen so far.
    calls: u32,
    /// Gemini's finish reason, mapped when the answer is over.
    finish_reason: Option<String>,
    /// The prompt was refused: no candidate at all.
    blocked: bool,
}

/// Builds a completion from one or more `GenerateContentResponse`s.
#[derive(Debug, Default)]
pub struct Accumulator {
    assembler: StreamAssembler,
    choices: BTreeMap<u32, ChoiceState>,
    /// The last `modelVersion` seen.
    model: Option<String>,
    /// A finish reason or a prompt block arrived: the answer is complete.
    finished: bool,
}

impl Accumulator {
    /// An accumulator before the first response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses and takes one streamed event's data.
    pub fn event(&mut self, data: &str) -> Result<Step, ProviderError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Step::default());
        }
        let response: GenerateContentResponse = serde_json::from_str(data).map_err(malformed)?;
        self.push(response)
    }

    /// Takes one response (a whole answer, or a streamed event).
    pub fn push(&mut self, response: GenerateContentResponse) -> Result<Step, ProviderError> {
        if let Some(error) = response.error.as_ref().filter(|e| !e.is_null()) {
            return Err(embedded_error(error));
        }
        if let Some(model) = response.model_version.filter(|m| !m.is_empty()) {
            self.model = Some(model);
        }
        let mut step = Step::default();
        if let Some(wire) = &response.usage_metadata {
            let usage = usage(wire);
            self.assembler.set_usage(usage);
            step.usage = Some(usage);
        }
        let blocked = response
            .prompt_feedback
            .and_then(|feedback| feedback.block_reason)
            .is_some();
        if response.candidates.is_empty() && blocked {
            // The prompt was refused: one empty, filtered choice says so.
            self.assembler.push_text(0, "");
            self.choices.entry(0).or_default().blocked = true;
            self.finished = true;
        }
        for (position, candidate) in response.candidates.into_iter().enumerate() {
            let index = candidate
                .index
                .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
            // Registers the choice even if it never says anything.
            self.assembler.push_text(index, "");
            let state = self.choices.entry(index).or_default();
            let mut text = String::new();
            let parts = candidate.content.map(|c| c.parts).unwrap_or_default();
            for part in parts {
                let PartIn {
                    text: part_text,
                    thought,
                    function_call,
                } = part;
                if let Some(call) = function_call {
                    let arguments = match call.args {
                        None | Some(Value::Null) => "{}".to_owned(),
                        Some(args) => args.to_string(),
                    };
                    let id = call
                        .id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| format!("call_{}", state.calls));
                    self.assembler.push_tool_call(
                        index,
                        state.calls,
                        Some(&id),
                        Some(call.name.as_deref().unwrap_or_default()),
                        Some(&arguments),
                    );
                    state.calls += 1;
                } else if let Some(part_text) = part_text
                    && thought != Some(true)
                {
                    text.push_str(&part_text);
                }
            }
            if !text.is_empty() {
                self.assembler.push_text(index, &text);
                step.deltas.push(TextDelta { index, text });
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                state.finish_reason = Some(reason);
                self.finished = true;
            }
        }
        Ok(step)
    }

    /// Whether a finish reason (or a refused prompt) arrived; a stream that ends before is cut.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The whole completion. `STOP` on a choice that called functions becomes `ToolCalls`.
    pub fn finish(mut self, requested_model: &str) -> Completion {
        for (index, state) in &self.choices {
            let reason = if state.blocked {
                Some(FinishReason::ContentFilter)
            } else {
                state
                    .finish_reason
                    .as_deref()
                    .map(|reason| match finish_reason(reason) {
                        FinishReason::Stop if state.calls > 0 => FinishReason::ToolCalls,
                        reason => reason,
                    })
            };
            if let Some(reason) = reason {
                self.assembler.finish_reason(*index, reason);
            }
        }
        let model = self
            .model
            .take()
            .unwrap_or_else(|| requested_model.to_owned());
        self.assembler.finish(model)
    }
}
