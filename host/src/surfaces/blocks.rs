//! An answer streamed as blocks opened one at a time, as Anthropic's content
//! blocks and the Responses API's output items are. The plugin's text,
//! reasoning and tool-call pieces arrive interleaved and cut anywhere;
//! [`Blocks`] decides when a block opens and closes, holds a call's arguments
//! until its name is known, and adds at the end what the pieces did not carry.
//! A surface's [`BlockEvents`] writes the events. These answers have one
//! output: only choice 0 is written.

use std::collections::BTreeMap;

use crate::plugins::types;

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// The plugin's reasoning block `block`.
    Reasoning {
        block: u32,
    },
    /// Reasoning the provider hid: whole when it opens.
    Hidden,
    /// Tool call `position` of the choice.
    Call {
        position: u32,
    },
}

/// A block, and what went into it while it was open.
#[derive(Debug)]
pub struct Block {
    /// Its place among the answer's blocks, from 0 in the order they opened.
    pub index: u32,
    pub kind: Kind,
    /// The text or reasoning so far, the hidden reasoning's data, or the call's
    /// arguments sent while it was open.
    pub content: String,
    /// A reasoning block's signature, once given.
    pub signature: Option<String>,
    /// A call's id and name.
    pub call: Option<(String, String)>,
}

/// How a surface writes a stream of blocks.
pub trait BlockEvents {
    /// Whether a call's arguments that come after its block closed still go out
    /// (Anthropic's clients assemble blocks by index); else they are only in
    /// the whole answer.
    const AMENDS_CLOSED_CALLS: bool;
    /// Whether reasoning that is only a signature (Gemini signs parts of its
    /// answers so) is a block; else it is not shown.
    const SIGNATURES_ALONE: bool;
    /// Whether an answer without text or calls still has a (empty) text block.
    const ALWAYS_TEXT: bool;

    fn open(&mut self, out: &mut Vec<u8>, block: &Block);
    /// New text in the open text block (`block.content` has it already).
    fn text(&mut self, out: &mut Vec<u8>, block: &Block, piece: &str);
    /// New reasoning in the open reasoning block (`block.content` has it already).
    fn reasoning(&mut self, out: &mut Vec<u8>, block: &Block, piece: &str);
    /// The open reasoning block's signature.
    fn signature(&mut self, out: &mut Vec<u8>, block: &Block, signature: &str);
    /// More of the arguments of the call in block `index`.
    fn arguments(&mut self, out: &mut Vec<u8>, index: u32, piece: &str);
    fn close(&mut self, out: &mut Vec<u8>, block: Block);
}

/// What was streamed of one tool call.
#[derive(Debug, Default)]
struct Call {
    id: Option<String>,
    name: Option<String>,
    /// Its block, once it opened (a call opens when its name is known).
    index: Option<u32>,
    /// Arguments that came before the name, sent once the block opens.
    pending: String,
    /// Arguments sent.
    sent: String,
}

/// The blocks of one answer: the one open, how many opened, what was sent.
#[derive(Debug, Default)]
pub struct Blocks {
    open: Option<Block>,
    opened: u32,
    /// Bytes of choice 0's text sent.
    text_sent: usize,
    /// Choice 0's calls, by position.
    calls: BTreeMap<u32, Call>,
    /// Reasoning went out as it came; else [`Blocks::finish`] sends it.
    reasoning_streamed: bool,
}

/// The choice these answers are made of.
pub fn first_choice(completion: &types::Completion) -> Option<&types::Choice> {
    completion
        .choices
        .iter()
        .find(|c| c.index == 0)
        .or(completion.choices.first())
}

/// A call the plugin left without an id gets the id the plugin SDK gives it
/// at the end (`call_{choice}_{position}`), so that streamed and whole answers agree.
pub fn fallback_call_id(choice: u32, position: u32) -> String {
    format!("call_{choice}_{position}")
}

/// A choice's calls: its tool calls, else its legacy function call.
pub fn calls(choice: &types::Choice) -> Vec<types::ToolCall> {
    if !choice.tool_calls.is_empty() {
        return choice.tool_calls.clone();
    }
    (choice.function_call.iter())
        .map(|call| types::ToolCall {
            id: fallback_call_id(choice.index, 0),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .collect()
}

impl Blocks {
    fn open_kind(&self) -> Option<Kind> {
        self.open.as_ref().map(|block| block.kind)
    }

    /// Closes the open block, if any.
    pub fn close<E: BlockEvents>(&mut self, events: &mut E, out: &mut Vec<u8>) {
        if let Some(block) = self.open.take() {
            events.close(out, block);
        }
    }

    /// Opens a block after closing the open one; returns its index.
    fn open<E: BlockEvents>(
        &mut self,
        events: &mut E,
        out: &mut Vec<u8>,
        kind: Kind,
        content: String,
        call: Option<(String, String)>,
    ) -> u32 {
        self.close(events, out);
        let index = self.opened;
        self.opened += 1;
        let block = Block {
            index,
            kind,
            content,
            signature: None,
            call,
        };
        events.open(out, &block);
        self.open = Some(block);
        index
    }

    /// New text of choice 0, in a text block.
    pub fn text<E: BlockEvents>(&mut self, events: &mut E, out: &mut Vec<u8>, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.open_kind() != Some(Kind::Text) {
            self.open(events, out, Kind::Text, String::new(), None);
        }
        if let Some(block) = self.open.as_mut() {
            block.content.push_str(text);
            events.text(out, block, text);
        }
        self.text_sent += text.len();
    }

    /// A piece of choice 0's reasoning: hidden reasoning is a block whole; a
    /// reasoning block opens on its first piece.
    pub fn reasoning<E: BlockEvents>(
        &mut self,
        events: &mut E,
        out: &mut Vec<u8>,
        piece: &types::ReasoningDelta,
    ) {
        self.reasoning_streamed = true;
        if let Some(data) = &piece.redacted {
            self.open(events, out, Kind::Hidden, data.clone(), None);
            return;
        }
        let kind = Kind::Reasoning { block: piece.block };
        if self.open_kind() != Some(kind) {
            if piece.text.is_empty() && !E::SIGNATURES_ALONE {
                return;
            }
            self.open(events, out, kind, String::new(), None);
        }
        let Some(block) = self.open.as_mut() else {
            return;
        };
        if !piece.text.is_empty() {
            block.content.push_str(&piece.text);
            events.reasoning(out, block, &piece.text);
        }
        if let Some(signature) = &piece.signature {
            block.signature = Some(signature.clone());
            events.signature(out, block, signature);
        }
    }

    /// More arguments for the call in block `index`, if they may go out.
    fn arguments<E: BlockEvents>(
        &mut self,
        events: &mut E,
        out: &mut Vec<u8>,
        index: u32,
        piece: &str,
    ) -> bool {
        let open = self.open.as_mut().filter(|block| block.index == index);
        if open.is_none() && !E::AMENDS_CLOSED_CALLS {
            return false;
        }
        if piece.is_empty() {
            return true;
        }
        if let Some(block) = open {
            block.content.push_str(piece);
        }
        events.arguments(out, index, piece);
        true
    }

    /// A piece of one of choice 0's calls: its block opens once its name is
    /// known (closing the open one); its arguments follow.
    pub fn call<E: BlockEvents>(
        &mut self,
        events: &mut E,
        out: &mut Vec<u8>,
        delta: &types::ToolCallDelta,
    ) {
        let mut call = self.calls.remove(&delta.call).unwrap_or_default();
        if let Some(id) = delta.id.as_ref().filter(|id| !id.is_empty()) {
            call.id = Some(id.clone());
        }
        if let Some(name) = delta.name.as_ref().filter(|name| !name.is_empty()) {
            call.name = Some(name.clone());
        }
        match (call.index, call.name.clone()) {
            (Some(index), _) => {
                if self.arguments(events, out, index, &delta.arguments) {
                    call.sent.push_str(&delta.arguments);
                }
            }
            (None, Some(name)) => {
                let id = (call.id.clone()).unwrap_or_else(|| fallback_call_id(0, delta.call));
                let kind = Kind::Call {
                    position: delta.call,
                };
                let index = self.open(events, out, kind, String::new(), Some((id, name)));
                call.index = Some(index);
                let mut arguments = std::mem::take(&mut call.pending);
                arguments.push_str(&delta.arguments);
                self.arguments(events, out, index, &arguments);
                call.sent.push_str(&arguments);
            }
            (None, None) => call.pending.push_str(&delta.arguments),
        }
        self.calls.insert(delta.call, call);
    }

    /// What the pieces did not carry of choice 0 (its reasoning when none was
    /// streamed, the rest of its text, its calls or the rest of their
    /// arguments), then the last block's close.
    pub fn finish<E: BlockEvents>(
        &mut self,
        events: &mut E,
        out: &mut Vec<u8>,
        choice: Option<&types::Choice>,
    ) {
        if let Some(choice) = choice {
            if !self.reasoning_streamed {
                for (position, reasoning) in choice.reasoning.iter().enumerate() {
                    let piece = types::ReasoningDelta {
                        index: 0,
                        block: u32::try_from(position).unwrap_or(u32::MAX),
                        text: reasoning.text.clone(),
                        signature: reasoning.signature.clone(),
                        redacted: reasoning.redacted.clone(),
                    };
                    self.reasoning(events, out, &piece);
                }
            }
            if let Some(rest) = choice.text.get(self.text_sent..) {
                self.text(events, out, rest);
            }
            for (position, call) in calls(choice).into_iter().enumerate() {
                let position = u32::try_from(position).unwrap_or(u32::MAX);
                let streamed = (self.calls.get(&position))
                    .and_then(|streamed| Some((streamed.index?, streamed.sent.clone())));
                match streamed {
                    // A plugin whose final arguments differ from the pieces it sent
                    // leaves the streamed ones: a block cannot be rewritten.
                    Some((index, sent)) => {
                        let rest = call.arguments.strip_prefix(sent.as_str()).unwrap_or("");
                        self.arguments(events, out, index, rest);
                    }
                    None => {
                        let kind = Kind::Call { position };
                        let named = Some((call.id.clone(), call.name.clone()));
                        let index = self.open(events, out, kind, String::new(), named);
                        self.arguments(events, out, index, &call.arguments);
                        let sent = Call {
                            index: Some(index),
                            sent: call.arguments,
                            ..Call::default()
                        };
                        self.calls.insert(position, sent);
                    }
                }
            }
        }
        if E::ALWAYS_TEXT && self.text_sent == 0 && self.calls.is_empty() {
            self.open(events, out, Kind::Text, String::new(), None);
        }
        self.close(events, out);
    }
}
