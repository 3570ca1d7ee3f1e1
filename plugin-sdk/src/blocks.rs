//! The message model Anthropic's Messages API and Bedrock's Converse API share (Claude's, which
//! Converse serves for every model): a conversation of alternating user and assistant turns,
//! each a list of content blocks; tool calls and their results as blocks, with ids of a
//! restricted alphabet; reasoning sent back first in a turn, tool results first in theirs; a
//! stream of blocks started, filled by deltas and stopped by their index; a thinking budget
//! (Claude's) chosen from a reasoning effort; token counts that leave the cache's reads and
//! writes out of the input. Each API names its blocks and fields its own way: the plugins keep
//! their wire types, and write their messages through these.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    Answer, FinishReason, Message, OpenCall, OpenCalls, ProviderError, ReasoningConfig,
    ReasoningEffort, Role, TokenCounts, Usage, json,
};

/// The smallest thinking budget Claude accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// Claude's thinking budget for a reasoning effort, `None` for no thinking.
pub fn effort_budget(effort: ReasoningEffort) -> Option<u32> {
    match effort {
        ReasoningEffort::None => None,
        ReasoningEffort::Minimal => Some(MIN_THINKING_BUDGET),
        ReasoningEffort::Low => Some(2048),
        ReasoningEffort::Medium => Some(8192),
        ReasoningEffort::High => Some(16384),
        ReasoningEffort::Xhigh => Some(32000),
    }
}

/// What a caller's reasoning config asks of Claude's thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// No thinking (effort `none`, whatever the budget).
    Off,
    /// Thinking within this budget: the one given, else the effort's ([`effort_budget`]), at
    /// least [`MIN_THINKING_BUDGET`].
    Budget(u32),
}

impl Thinking {
    /// What `reasoning` asks; `None` when it gives neither an effort nor a budget.
    pub fn of(reasoning: &ReasoningConfig) -> Option<Thinking> {
        if reasoning.effort == Some(ReasoningEffort::None) {
            return Some(Thinking::Off);
        }
        let budget = reasoning
            .budget_tokens
            .or_else(|| reasoning.effort.and_then(effort_budget))?;
        Some(Thinking::Budget(budget.max(MIN_THINKING_BUDGET)))
    }

    /// Claude's `thinking` field for a budget.
    pub fn enabled(budget: u32) -> Value {
        json!({"type": "enabled", "budget_tokens": budget})
    }
}

/// One turn of a conversation: its role (`"user"` or `"assistant"`) and its blocks. Content is
/// always a list of blocks, so that consecutive messages of one role can be merged into one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn<B> {
    /// `"user"` or `"assistant"`.
    pub role: &'static str,
    /// The turn's blocks.
    pub content: Vec<B>,
}

/// A content block as the turns' order needs to know it.
pub trait TurnBlock {
    /// Whether the block is a tool's result, which goes first in a user turn.
    fn is_tool_result(&self) -> bool;
    /// Whether the block is the model's reasoning, which goes first in an assistant turn.
    fn is_reasoning(&self) -> bool;
}

/// Appends `blocks` to the conversation, merged into the last turn when it has the same role
/// (both APIs require alternation). Nothing is appended for no blocks: both reject turns
/// without content.
pub fn push_blocks<B>(out: &mut Vec<Turn<B>>, role: &'static str, blocks: Vec<B>) {
    if blocks.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => out.push(Turn {
            role,
            content: blocks,
        }),
    }
}

/// Orders each turn's blocks as the APIs require, tool results first in a user turn and
/// reasoning first in an assistant turn (the other blocks keep their order); refuses a
/// conversation without turns, naming `provider`.
pub fn finish_turns<B: TurnBlock>(
    turns: &mut [Turn<B>],
    provider: &str,
) -> Result<(), ProviderError> {
    if turns.is_empty() {
        return Err(ProviderError::InvalidRequest(format!(
            "the prompt has no user or assistant content; {provider} needs at least one \
             non-empty message"
        )));
    }
    for turn in turns {
        if turn.role == "user" {
            turn.content.sort_by_key(|block| !block.is_tool_result());
        } else {
            turn.content.sort_by_key(|block| !block.is_reasoning());
        }
    }
    Ok(())
}

/// A call id as both APIs accept it (`^[a-zA-Z0-9_-]+$`, at most `max_len` characters): other
/// providers' ids may hold other characters, which become `_`. The same mapping applies to
/// calls and their results, so they still match. `None` for an empty id.
pub fn sanitize_id(id: &str, max_len: usize) -> Option<String> {
    let id = id.trim();
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    (!id.is_empty()).then(|| {
        id.chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .take(max_len)
            .collect()
    })
}

/// A tool call of an assistant turn, as a `tool_use` block carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Its id ([`sanitize_id`], else made up).
    pub id: String,
    /// The function's name.
    pub name: String,
    /// Its arguments, a JSON object.
    pub input: Value,
}

/// The tool calls of a conversation and the results answering them, with ids the API takes.
#[derive(Debug)]
pub struct ToolCalls {
    open: OpenCalls,
    made_up: usize,
    /// The provider as errors name it (`"Anthropic"`).
    provider: &'static str,
    /// What made-up ids start with (`toolu_gw_`), followed by their number.
    prefix: &'static str,
    max_id: usize,
}

impl ToolCalls {
    /// No calls yet, for `provider` (as errors name it), whose calls without an id get
    /// `{prefix}{n}` and whose ids are at most `max_id` characters long.
    pub fn new(provider: &'static str, prefix: &'static str, max_id: usize) -> Self {
        ToolCalls {
            open: OpenCalls::new(),
            made_up: 0,
            provider,
            prefix,
            max_id,
        }
    }

    /// The calls of assistant message `i` (its `tool_calls`, else its `function_call`), which
    /// the next results answer; refused when a call's arguments are not a JSON object.
    pub fn calls(&mut self, i: usize, message: &Message) -> Result<Vec<Call>, ProviderError> {
        let mut calls = Vec::new();
        for (j, call) in message.calls().into_iter().enumerate() {
            let id = sanitize_id(&call.id, self.max_id).unwrap_or_else(|| {
                self.made_up += 1;
                format!("{}{}", self.prefix, self.made_up - 1)
            });
            let input = call.arguments_object().ok_or_else(|| {
                ProviderError::InvalidRequest(format!(
                    "messages[{i}]: the arguments of call {j} must be a JSON object, as {} \
                     requires",
                    self.provider
                ))
            })?;
            calls.push(Call {
                id,
                name: call.name,
                input,
            });
        }
        let open = calls.iter().map(|call| OpenCall {
            id: call.id.clone(),
            name: call.name.clone(),
        });
        self.open.replace(open);
        Ok(calls)
    }

    /// The call tool or function message `i` answers: a function message's by name only, a
    /// tool message's by its `tool_call_id`, else by name; refused when there is none.
    pub fn answered(&mut self, i: usize, message: &Message) -> Result<OpenCall, ProviderError> {
        let id = match message.role {
            Role::Tool => {
                (message.tool_call_id.as_deref()).and_then(|id| sanitize_id(id, self.max_id))
            }
            _ => None,
        };
        let name = message.name.as_deref();
        self.open.answer(id.as_deref(), name).ok_or_else(|| {
            ProviderError::InvalidRequest(format!(
                "messages[{i}]: {}",
                if message.role == Role::Tool {
                    "a tool message needs tool_call_id (or the name of a call it answers)"
                } else {
                    "a function message must answer a function call of the assistant message \
                     before it"
                }
            ))
        })
    }
}

/// Maps the stop reasons both APIs give alike (`end_turn`, `stop_sequence` with the sequence
/// the model wrote, `max_tokens`, `model_context_window_exceeded`, `tool_use`); any other is
/// `Other`, for the plugin to map its own first.
pub fn finish_reason(reason: &str, stop_sequence: Option<&str>) -> FinishReason {
    match reason {
        "end_turn" => FinishReason::Stop,
        "stop_sequence" => match stop_sequence {
            Some(sequence) => FinishReason::StopSequence(sequence.to_owned()),
            None => FinishReason::Stop,
        },
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        _ => FinishReason::Other,
    }
}

/// The tool-call blocks of an answer not stopped yet, by their index in the answer: a stream
/// starts a block with the call's id and name, sends its input in pieces, and stops it; a
/// whole answer is read as such a stream would be.
#[derive(Debug, Default)]
pub struct ToolBlocks {
    open: BTreeMap<u32, ToolBlock>,
    calls: u32,
}

/// An open tool-call block: the call's position, and the arguments it gets if no input arrives
/// in pieces.
#[derive(Debug)]
struct ToolBlock {
    call: u32,
    pending: Option<String>,
}

impl ToolBlocks {
    /// Starts block `index`, the answer's next tool call; `arguments` are its arguments unless
    /// input arrives in pieces.
    pub fn start(
        &mut self,
        index: u32,
        id: &str,
        name: &str,
        arguments: String,
        answer: &mut Answer,
    ) {
        let call = self.calls;
        self.calls += 1;
        answer.tool_call(0, call, Some(id), Some(name), None);
        let pending = Some(arguments);
        self.open.insert(index, ToolBlock { call, pending });
    }

    /// A piece of block `index`'s input, as JSON text; malformed when no such block is open
    /// (`kind` names the API's tool-call block in that error).
    pub fn input(
        &mut self,
        index: u32,
        piece: &str,
        kind: &str,
        answer: &mut Answer,
    ) -> Result<(), ProviderError> {
        let Some(block) = self.open.get_mut(&index) else {
            return Err(ProviderError::malformed(format!(
                "tool input for content block {index}, which is not an open {kind} block"
            )));
        };
        if !piece.is_empty() {
            answer.tool_call(0, block.call, None, None, Some(piece));
            block.pending = None;
        }
        Ok(())
    }

    /// Stops block `index`, if it is an open tool-call block: a call whose input never arrived
    /// in pieces gets the arguments given at its start.
    pub fn stop(&mut self, index: u32, answer: &mut Answer) {
        if let Some(ToolBlock {
            call,
            pending: Some(arguments),
        }) = self.open.remove(&index)
        {
            answer.tool_call(0, call, None, None, Some(&arguments));
        }
    }

    /// Ends the answer: stops every open block, in order, and reports the choice even if the
    /// model never said anything.
    /// (What a [`StreamDecoder::end`](crate::StreamDecoder::end) of these APIs does.)
    pub fn end(&mut self, answer: &mut Answer) -> Result<(), ProviderError> {
        for index in self.open.keys().copied().collect::<Vec<_>>() {
            self.stop(index, answer);
        }
        answer.text(0, "");
        Ok(())
    }
}

/// A tool call's arguments given whole, as JSON text: `{}` for none.
pub fn arguments(input: Value) -> String {
    match input {
        Value::Null => "{}".to_owned(),
        input => input.to_string(),
    }
}

/// Token counts as both APIs report them (Anthropic's names; Converse's are aliases): the input
/// leaves the cache's reads and writes out, which are counted apart.
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
pub struct WireUsage {
    /// The input not read from nor written to the cache.
    #[serde(default, alias = "inputTokens", deserialize_with = "json::count")]
    pub input_tokens: Option<u32>,
    /// The answer.
    #[serde(default, alias = "outputTokens", deserialize_with = "json::count")]
    pub output_tokens: Option<u32>,
    /// The input written to the cache.
    #[serde(
        default,
        alias = "cacheWriteInputTokens",
        deserialize_with = "json::count"
    )]
    pub cache_creation_input_tokens: Option<u32>,
    /// The input read from the cache.
    #[serde(
        default,
        alias = "cacheReadInputTokens",
        deserialize_with = "json::count"
    )]
    pub cache_read_input_tokens: Option<u32>,
}

impl WireUsage {
    /// Takes every count `newer` reports; the others keep their value. Anthropic's stream
    /// events report cumulative counts, so the latest value of each field is the right one.
    pub fn update(&mut self, newer: &WireUsage) {
        let take = |ours: &mut Option<u32>, theirs: Option<u32>| {
            if theirs.is_some() {
                *ours = theirs;
            }
        };
        take(&mut self.input_tokens, newer.input_tokens);
        take(&mut self.output_tokens, newer.output_tokens);
        take(
            &mut self.cache_creation_input_tokens,
            newer.cache_creation_input_tokens,
        );
        take(
            &mut self.cache_read_input_tokens,
            newer.cache_read_input_tokens,
        );
    }
}

/// The gateway's usage of `wire`: its prompt count includes the cache's reads and writes (with
/// them reported apart too).
pub fn usage(wire: &WireUsage) -> Usage {
    Usage::counted(TokenCounts {
        prompt: wire.input_tokens,
        completion: wire.output_tokens,
        cache_read: wire.cache_read_input_tokens,
        cache_write: wire.cache_creation_input_tokens,
        cache_apart: true,
        ..TokenCounts::default()
    })
}
