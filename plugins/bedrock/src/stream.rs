//! Reading Bedrock's answers: the [`StreamDecoder`] for a whole Converse answer and for
//! ConverseStream's event-stream messages, and the mapping of stop reasons and usage.
//!
//! ConverseStream's events (`:event-type`): `messageStart` (the role), per content block an
//! optional `contentBlockStart` (only tool calls announce themselves: id and name),
//! `contentBlockDelta`s (`text`, a `toolUse.input` piece of JSON text, `reasoningContent`
//! text, signature or redacted content) and a `contentBlockStop`; then `messageStop` (the stop
//! reason: the answer is whole) and `metadata` (usage, last). Errors arrive as exception
//! messages (`:message-type: exception`), mapped as answers' errors are (`errors`). The
//! answer has one choice (index 0).

use gateway_plugin_sdk::blocks::{self, ToolBlocks, arguments};
use gateway_plugin_sdk::eventstream::Message;
use gateway_plugin_sdk::{Answer, FinishReason, ProviderError, StreamDecoder};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use gateway_plugin_sdk::blocks::usage;

use crate::errors;
use crate::wire::{
    AnswerReasoning, AnswerToolUse, BlockDelta, BlockStart, BlockStop, ConverseResponse,
    MessageStop, Metadata,
};

/// The name of Converse's tool-call blocks, in errors.
const TOOL_USE: &str = "toolUse";

/// Reads one answer, whole or streamed.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Open `toolUse` blocks: a call whose input never arrives takes no arguments (`{}`).
    tools: ToolBlocks,
}

impl StreamDecoder for Decoder {
    fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
        let response: ConverseResponse =
            serde_json::from_slice(body).map_err(ProviderError::malformed)?;
        let blocks = (response.output)
            .and_then(|output| output.message)
            .map(|message| message.content)
            .unwrap_or_default();
        for (index, block) in (0..).zip(blocks) {
            if let Some(text) = block.text {
                answer.text(0, &text);
            }
            if let Some(call) = block.tool_use {
                self.start_tool(index, &call, answer);
                let input = arguments(call.input);
                (self.tools).input(index, &input, TOOL_USE, answer)?;
            }
            if let Some(reasoning) = block.reasoning_content {
                reasoning_block(index, reasoning, answer);
            }
        }
        if let Some(reason) = response.stop_reason.as_deref() {
            let fields = response.additional_model_response_fields.as_ref();
            answer.finish_reason(0, finish_reason(reason, fields));
        }
        if let Some(wire) = &response.usage {
            answer.usage(usage(wire));
        }
        answer.complete();
        Ok(())
    }

    fn message(&mut self, message: &Message, answer: &mut Answer) -> Result<(), ProviderError> {
        if let Some(exception) = message.exception() {
            return Err(errors::from_exception(&exception.kind, &exception.message));
        }
        match message.str_header(":event-type") {
            Some("contentBlockStart") => {
                let start: BlockStart = payload(message)?;
                if let Some(call) = start.start.and_then(|start| start.tool_use) {
                    self.start_tool(start.content_block_index, &call, answer);
                }
            }
            Some("contentBlockDelta") => {
                let delta: BlockDelta = payload(message)?;
                let index = delta.content_block_index;
                let Some(delta) = delta.delta else {
                    return Ok(());
                };
                if let Some(text) = delta.text {
                    answer.text(0, &text);
                }
                if let Some(piece) = delta.tool_use {
                    (self.tools).input(index, &piece.input, TOOL_USE, answer)?;
                }
                if let Some(reasoning) = delta.reasoning_content {
                    if let Some(text) = reasoning.text {
                        answer.reasoning(0, index, &text);
                    }
                    if let Some(signature) = reasoning.signature.filter(|s| !s.is_empty()) {
                        answer.reasoning_signature(0, index, &signature);
                    }
                    if let Some(data) = reasoning.redacted_content.filter(|d| !d.is_empty()) {
                        answer.redacted_reasoning(0, index, &data);
                    }
                }
            }
            Some("contentBlockStop") => {
                let stop: BlockStop = payload(message)?;
                self.tools.stop(stop.content_block_index, answer);
            }
            Some("messageStop") => {
                let stop: MessageStop = payload(message)?;
                if let Some(reason) = stop.stop_reason.as_deref() {
                    let fields = stop.additional_model_response_fields.as_ref();
                    answer.finish_reason(0, finish_reason(reason, fields));
                }
                answer.complete();
            }
            Some("metadata") => {
                let metadata: Metadata = payload(message)?;
                if let Some(wire) = &metadata.usage {
                    answer.usage(usage(wire));
                }
                // The last event: no need to wait for the body's end.
                if answer.is_complete() {
                    answer.end();
                }
            }
            // `messageStart` (the role) and events added later.
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, answer: &mut Answer) -> Result<(), ProviderError> {
        self.tools.end(answer)
    }
}

impl Decoder {
    fn start_tool(&mut self, index: u32, call: &AnswerToolUse, answer: &mut Answer) {
        let (id, name) = (&call.tool_use_id, &call.name);
        (self.tools).start(index, id, name, "{}".to_owned(), answer);
    }
}

/// An event's JSON payload.
fn payload<T: DeserializeOwned>(message: &Message) -> Result<T, ProviderError> {
    serde_json::from_slice(&message.payload).map_err(ProviderError::malformed)
}

/// A whole answer's reasoning block.
fn reasoning_block(index: u32, reasoning: AnswerReasoning, answer: &mut Answer) {
    if let Some(text) = reasoning.reasoning_text {
        answer.reasoning(0, index, &text.text);
        if let Some(signature) = text.signature.filter(|s| !s.is_empty()) {
            answer.reasoning_signature(0, index, &signature);
        }
    }
    if let Some(data) = reasoning.redacted_content.filter(|d| !d.is_empty()) {
        answer.redacted_reasoning(0, index, &data);
    }
}

/// Maps Converse's `stopReason`. `stop_sequence` is the sequence the model wrote when the
/// answer's model-specific fields name it (Claude's `stop_sequence`), else a plain stop.
pub fn finish_reason(reason: &str, fields: Option<&Value>) -> FinishReason {
    match reason {
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        _ => {
            let written = fields.and_then(|f| f.get("stop_sequence"));
            blocks::finish_reason(reason, written.and_then(Value::as_str))
        }
    }
}
