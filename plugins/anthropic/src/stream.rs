//! Reading Anthropic's answers: the [`StreamDecoder`] for a whole `/messages` answer and for its
//! event stream, and the mapping of stop reasons, usage and errors.
//!
//! Anthropic's stream: `message_start` (model, prompt usage), then per content block a
//! `content_block_start`, `content_block_delta`s (`text_delta` text, `input_json_delta` pieces of
//! a tool call's input, `thinking_delta` reasoning and the `signature_delta` that ends it) and a
//! `content_block_stop`, then `message_delta` (stop reason, final
//! usage) and `message_stop`, the only sign that the answer is whole. `ping`s may come anywhere;
//! an `error` event ends the stream. The answer has one choice (index 0): there is no `n`.

use gateway_plugin_sdk::blocks::{self, ToolBlocks, arguments};
use gateway_plugin_sdk::sse::Event;
use gateway_plugin_sdk::{Answer, FinishReason, ProviderError, StreamDecoder, UpstreamError};

pub use gateway_plugin_sdk::blocks::usage;

use crate::wire::{BlockDelta, ContentBlock, ErrorBody, MessageResponse, StreamEvent, WireUsage};

/// Reads one answer, whole or streamed.
#[derive(Debug, Default)]
pub struct Decoder {
    /// The counts reported so far: `message_delta` reports only some of them.
    usage: WireUsage,
    /// Open `tool_use` blocks.
    tools: ToolBlocks,
}

impl StreamDecoder for Decoder {
    fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
        let response: MessageResponse =
            serde_json::from_slice(body).map_err(ProviderError::malformed)?;
        if response.kind.as_deref() == Some("error") {
            return Err(embedded_error(&response.error.unwrap_or_default()));
        }
        self.message(&response, answer);
        // Read as a stream's blocks would be; `end` closes them.
        for (index, block) in (0..).zip(response.content) {
            self.start_block(index, block, answer);
        }
        if let Some(reason) = response.stop_reason.as_deref() {
            let reason = finish_reason(reason, response.stop_sequence.as_deref());
            answer.finish_reason(0, reason);
        }
        answer.complete();
        Ok(())
    }

    fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        match serde_json::from_str(data).map_err(ProviderError::malformed)? {
            StreamEvent::MessageStart { message } => self.message(&message, answer),
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, answer),
            StreamEvent::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => answer.text(0, &text),
                BlockDelta::InputJsonDelta { partial_json } => {
                    (self.tools).input(index, &partial_json, "tool_use", answer)?;
                }
                BlockDelta::ThinkingDelta { thinking } => answer.reasoning(0, index, &thinking),
                BlockDelta::SignatureDelta { signature } => {
                    if !signature.is_empty() {
                        answer.reasoning_signature(0, index, &signature);
                    }
                }
                BlockDelta::Other => {}
            },
            StreamEvent::ContentBlockStop { index } => self.tools.stop(index, answer),
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason.as_deref() {
                    let reason = finish_reason(reason, delta.stop_sequence.as_deref());
                    answer.finish_reason(0, reason);
                }
                self.add_usage(usage.as_ref(), answer);
            }
            StreamEvent::MessageStop => answer.end(),
            StreamEvent::Error { error } => return Err(embedded_error(&error)),
            StreamEvent::Ping | StreamEvent::Other => {}
        }
        Ok(())
    }

    fn end(&mut self, answer: &mut Answer) -> Result<(), ProviderError> {
        self.tools.end(answer)
    }
}

impl Decoder {
    /// Takes what a whole answer and a stream's `message_start` share: the model and usage.
    fn message(&mut self, message: &MessageResponse, answer: &mut Answer) {
        answer.model(message.model.as_deref().unwrap_or(""));
        self.add_usage(message.usage.as_ref(), answer);
    }

    fn start_block(&mut self, index: u32, block: ContentBlock, answer: &mut Answer) {
        match block {
            ContentBlock::Text { text } => answer.text(0, &text),
            // A stream starts with `"input": {}` and sends the input in deltas; an input given
            // whole at the start is only used when no delta follows.
            ContentBlock::ToolUse { id, name, input } => {
                (self.tools).start(index, &id, &name, arguments(input), answer);
            }
            // Reasoning is kept by its block index, so that blocks stay apart and in order.
            ContentBlock::Thinking {
                thinking,
                signature,
            } => {
                answer.reasoning(0, index, &thinking);
                if !signature.is_empty() {
                    answer.reasoning_signature(0, index, &signature);
                }
            }
            ContentBlock::RedactedThinking { data } => answer.redacted_reasoning(0, index, &data),
            ContentBlock::Other => {}
        }
    }

    /// Merges reported counts: each event reports cumulative counts, but not all of them.
    fn add_usage(&mut self, wire: Option<&WireUsage>, answer: &mut Answer) {
        if let Some(wire) = wire {
            self.usage.update(wire);
            answer.usage(usage(&self.usage));
        }
    }
}

/// Maps Anthropic's `stop_reason`, with the answer's `stop_sequence` (the sequence the model
/// wrote) for `"stop_sequence"`: an answer that names none ended as `Stop`.
pub fn finish_reason(reason: &str, stop_sequence: Option<&str>) -> FinishReason {
    match reason {
        "pause_turn" => FinishReason::Pause,
        "refusal" => FinishReason::Refusal,
        _ => blocks::finish_reason(reason, stop_sequence),
    }
}

/// An error Anthropic reported inside a successful answer (an `error` event mid-stream, or an
/// error body with status 200). Its status is the one Anthropic documents for the error type, so
/// that the gateway tells rate limits (429) apart; overloads are Anthropic's own 529. (The SDK's
/// `embedded_error` reads `code`/`status`, which Anthropic's errors do not have.)
fn embedded_error(error: &ErrorBody) -> ProviderError {
    let kind = error.kind.as_deref().unwrap_or("");
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 500,
    };
    let message = match error.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ if !kind.is_empty() => format!("the provider reported {kind}"),
        _ => "the provider reported an error without a message".to_owned(),
    };
    ProviderError::Upstream(UpstreamError {
        status,
        message,
        retry_after: None,
    })
}
