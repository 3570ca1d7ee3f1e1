//! Reading a streamed answer event by event. Pure: the caller feeds parsed SSE events and
//! forwards the chunks returned.
//!
//! Anthropic's stream: `message_start` (model, prompt usage), then per content block a
//! `content_block_start`, `content_block_delta`s (`text_delta` text, `input_json_delta` pieces of
//! a tool call's input) and a `content_block_stop`, then `message_delta` (stop reason, final
//! usage) and `message_stop`. `ping`s may come anywhere; an `error` event ends the stream.

use std::collections::BTreeMap;

use gateway_plugin_sdk::sse::Event;
use gateway_plugin_sdk::{Chunk, Completion, ProviderError, StreamAssembler, TextDelta};

use crate::convert::{
    answered_call_id, embedded_error, finish_reason, input_arguments, malformed, usage,
};
use crate::wire::{BlockDelta, ContentBlock, StreamEvent, WireUsage};

/// What to do after an event.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Send this chunk (new text, or the usage so far), if any, and keep reading.
    Continue(Option<Chunk>),
    /// `message_stop` arrived: the answer is complete.
    Done,
}

/// A content block of the answer being streamed.
#[derive(Debug)]
enum Block {
    Text,
    /// A `tool_use` block: the tool call's position, the `input` given at its start, and whether
    /// any argument text arrived in deltas.
    Tool {
        call: u32,
        initial: Option<String>,
        has_arguments: bool,
    },
    /// Thinking and other blocks that are not answer text.
    Other,
}

/// State of one streamed answer. The answer has one choice (index 0): the Messages API has no `n`.
#[derive(Debug, Default)]
pub struct StreamState {
    assembler: StreamAssembler,
    model: Option<String>,
    /// The counts reported so far; later events override earlier ones field by field.
    usage: Option<WireUsage>,
    /// Open content blocks by their index in the answer.
    blocks: BTreeMap<u32, Block>,
    tool_calls: u32,
    saw_stop: bool,
}

impl StreamState {
    /// A state before the first event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one SSE event.
    pub fn event(&mut self, event: &Event) -> Result<Step, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Step::Continue(None));
        }
        let parsed: StreamEvent = serde_json::from_str(data).map_err(malformed)?;
        match parsed {
            StreamEvent::MessageStart { message } => {
                if let Some(model) = message.model.filter(|m| !m.is_empty()) {
                    self.model = Some(model);
                }
                // Register the choice even if the model never says anything.
                self.assembler.push_text(0, "");
                if let Some(wire) = &message.usage {
                    return Ok(Step::Continue(Some(self.add_usage(wire))));
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                ContentBlock::Text { text } => {
                    self.blocks.insert(index, Block::Text);
                    return Ok(Step::Continue(self.text(&text)));
                }
                ContentBlock::ToolUse { id, name, input } => {
                    let call = self.tool_calls;
                    self.tool_calls += 1;
                    self.assembler.push_tool_call(
                        0,
                        call,
                        Some(id.as_str()).filter(|id| !id.is_empty()),
                        Some(name.as_str()).filter(|name| !name.is_empty()),
                        None,
                    );
                    // Anthropic starts with `"input": {}` and streams the input as deltas; an
                    // input given whole at the start is only used when no delta follows.
                    let initial = match &input {
                        serde_json::Value::Object(map) if map.is_empty() => None,
                        serde_json::Value::Null => None,
                        input => Some(input_arguments(input)),
                    };
                    self.blocks.insert(
                        index,
                        Block::Tool {
                            call,
                            initial,
                            has_arguments: false,
                        },
                    );
                }
                ContentBlock::Other => {
                    self.blocks.insert(index, Block::Other);
                }
            },
            StreamEvent::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => return Ok(Step::Continue(self.text(&text))),
                BlockDelta::InputJsonDelta { partial_json } => match self.blocks.get_mut(&index) {
                    Some(Block::Tool {
                        call,
                        has_arguments,
                        ..
                    }) => {
                        if !partial_json.is_empty() {
                            self.assembler.push_tool_call(
                                0,
                                *call,
                                None,
                                None,
                                Some(&partial_json),
                            );
                            *has_arguments = true;
                        }
                    }
                    _ => {
                        return Err(malformed(format!(
                            "tool input for content block {index}, which is not an open tool_use block"
                        )));
                    }
                },
                BlockDelta::Other => {}
            },
            StreamEvent::ContentBlockStop { index } => self.close_block(index),
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason.as_deref() {
                    self.assembler.finish_reason(0, finish_reason(reason));
                }
                if let Some(wire) = &usage {
                    return Ok(Step::Continue(Some(self.add_usage(wire))));
                }
            }
            StreamEvent::MessageStop => {
                self.saw_stop = true;
                return Ok(Step::Done);
            }
            StreamEvent::Error { error } => return Err(embedded_error(&error)),
            StreamEvent::Ping | StreamEvent::Other => {}
        }
        Ok(Step::Continue(None))
    }

    /// Appends answer text; the chunk that sends it, if there is any.
    fn text(&mut self, text: &str) -> Option<Chunk> {
        self.assembler.push_text(0, text);
        (!text.is_empty()).then(|| Chunk {
            deltas: vec![TextDelta {
                index: 0,
                text: text.to_owned(),
            }],
            usage: None,
        })
    }

    /// Merges reported counts; the chunk that tells the gateway the usage so far, so that a
    /// stream cut short or cancelled is still recorded with what it used.
    fn add_usage(&mut self, wire: &WireUsage) -> Chunk {
        let merged = self.usage.get_or_insert_default();
        merged.update(wire);
        let usage = usage(merged);
        self.assembler.set_usage(usage);
        Chunk {
            deltas: Vec::new(),
            usage: Some(usage),
        }
    }

    /// Ends a content block. A tool call whose input never arrived in pieces gets its initial
    /// input, or `{}` (a tool without parameters).
    fn close_block(&mut self, index: u32) {
        if let Some(Block::Tool {
            call,
            initial,
            has_arguments: false,
        }) = self.blocks.remove(&index)
        {
            let arguments = initial.unwrap_or_else(|| "{}".to_owned());
            self.assembler
                .push_tool_call(0, call, None, None, Some(&arguments));
        }
    }

    /// The whole completion once the stream is over. A stream without `message_stop` was cut
    /// off: its text may be incomplete.
    pub fn finish(mut self, requested_model: &str) -> Result<Completion, ProviderError> {
        if !self.saw_stop {
            return Err(ProviderError::Failed("stream ended early".into()));
        }
        let open: Vec<u32> = self.blocks.keys().copied().collect();
        for index in open {
            self.close_block(index);
        }
        self.assembler.push_text(0, "");
        let model = self
            .model
            .take()
            .unwrap_or_else(|| requested_model.to_owned());
        let mut completion = self.assembler.finish(model);
        for choice in &mut completion.choices {
            for (position, call) in choice.tool_calls.iter_mut().enumerate() {
                if call.id.is_empty() {
                    call.id = answered_call_id(position);
                }
            }
        }
        Ok(completion)
    }
}
