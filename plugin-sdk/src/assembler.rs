//! Builds a [`Completion`] from pieces that arrive over a stream.

use std::collections::BTreeMap;

use crate::{Choice, Completion, FinishReason, FunctionCall, Reasoning, ToolCall, Usage};

/// Assembles streamed choices into the final [`Completion`].
///
/// Text is appended per choice index. Function calls and tool calls, whose
/// name and argument pieces arrive across events, are keyed by choice index
/// (and tool-call index). Choices appear in the result when anything was
/// pushed for them, even only a finish reason.
///
/// It is just as handy for non-streamed answers: push each choice once.
///
/// ```
/// use gateway_plugin_sdk::{FinishReason, StreamAssembler};
///
/// let mut assembler = StreamAssembler::new();
/// assembler.push_text(0, "Hel");
/// assembler.push_text(0, "lo");
/// assembler.push_tool_call(0, 0, Some("call_1"), Some("lookup"), Some("{\"q\":"));
/// assembler.push_tool_call(0, 0, None, None, Some("\"x\"}"));
/// assembler.finish_reason(0, FinishReason::ToolCalls);
/// let completion = assembler.finish("model-1".to_string());
/// let choice = &completion.choices[0];
/// assert_eq!(choice.text, "Hello");
/// assert_eq!(choice.tool_calls[0].arguments, "{\"q\":\"x\"}");
/// // Commonbase clients read `function_call`, so it mirrors the first tool call.
/// assert_eq!(choice.function_call.as_ref().unwrap().name, "lookup");
/// ```
#[derive(Debug, Default)]
pub struct StreamAssembler {
    choices: BTreeMap<u32, PartialChoice>,
    usage: Option<Usage>,
}

#[derive(Debug, Default)]
struct PartialChoice {
    text: String,
    /// By block number.
    reasoning: BTreeMap<u32, Reasoning>,
    finish_reason: Option<FinishReason>,
    function_call: Option<PartialCall>,
    tool_calls: BTreeMap<u32, PartialCall>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl PartialCall {
    fn push(&mut self, id: Option<&str>, name: Option<&str>, arguments: Option<&str>) {
        // Providers send the id and name with the first piece; a repeat must
        // not double them, so the first non-empty value wins.
        set_once(&mut self.id, id);
        set_once(&mut self.name, name);
        if let Some(arguments) = arguments {
            self.arguments.push_str(arguments);
        }
    }
}

fn set_once(field: &mut String, value: Option<&str>) {
    if let Some(value) = value
        && field.is_empty()
    {
        value.clone_into(field);
    }
}

impl StreamAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `text` to choice `choice`.
    pub fn push_text(&mut self, choice: u32, text: &str) {
        self.choices.entry(choice).or_default().text.push_str(text);
    }

    /// Adds a piece of reasoning block `block` of choice `choice`: `text` is
    /// appended, a signature or hidden content replaces the block's.
    pub fn push_reasoning(
        &mut self,
        choice: u32,
        block: u32,
        text: &str,
        signature: Option<&str>,
        redacted: Option<&str>,
    ) {
        let reasoning = (self.choices.entry(choice).or_default().reasoning)
            .entry(block)
            .or_insert_with(|| Reasoning {
                text: String::new(),
                signature: None,
                redacted: None,
            });
        reasoning.text.push_str(text);
        if let Some(signature) = signature {
            reasoning.signature = Some(signature.to_owned());
        }
        if let Some(redacted) = redacted {
            reasoning.redacted = Some(redacted.to_owned());
        }
    }

    /// Adds a piece of tool call `call_index` of choice `choice`.
    ///
    /// Any of `id`/`name` may arrive once (later values are ignored);
    /// `arguments` pieces are appended in order.
    pub fn push_tool_call(
        &mut self,
        choice: u32,
        call_index: u32,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        self.choices
            .entry(choice)
            .or_default()
            .tool_calls
            .entry(call_index)
            .or_default()
            .push(id, name, arguments);
    }

    /// Adds a piece of the (legacy, single) function call of choice `choice`:
    /// the name arrives once, `arguments` pieces are appended in order.
    pub fn push_function_call(&mut self, choice: u32, name: Option<&str>, arguments: Option<&str>) {
        self.choices
            .entry(choice)
            .or_default()
            .function_call
            .get_or_insert_default()
            .push(None, name, arguments);
    }

    /// Sets why choice `choice` ended (the last value wins).
    pub fn finish_reason(&mut self, choice: u32, reason: FinishReason) {
        self.choices.entry(choice).or_default().finish_reason = Some(reason);
    }

    /// Sets the usage (the last value wins: providers report totals).
    pub fn set_usage(&mut self, usage: Usage) {
        self.usage = Some(usage);
    }

    /// The usage set so far.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// The completion: choices sorted by index, tool calls sorted by call
    /// index. A choice with tool calls and no function call also gets
    /// `function_call` = its first tool call, because Commonbase clients read
    /// `function_call`.
    pub fn finish(self, model: String) -> Completion {
        let choices = self
            .choices
            .into_iter()
            .map(|(index, partial)| {
                let tool_calls: Vec<ToolCall> = partial
                    .tool_calls
                    .into_values()
                    .map(|call| ToolCall {
                        id: call.id,
                        name: call.name,
                        arguments: call.arguments,
                    })
                    .collect();
                let function_call = partial
                    .function_call
                    .map(|call| FunctionCall {
                        name: call.name,
                        arguments: call.arguments,
                    })
                    .or_else(|| {
                        tool_calls.first().map(|call| FunctionCall {
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        })
                    });
                Choice {
                    index,
                    text: partial.text,
                    reasoning: partial.reasoning.into_values().collect(),
                    finish_reason: partial.finish_reason,
                    function_call,
                    tool_calls,
                    logprobs: None,
                }
            })
            .collect();
        Completion {
            model,
            choices,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u32, completion: u32) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cached_prompt_tokens: None,
            cache_creation_tokens: None,
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    }

    #[test]
    fn empty() {
        let completion = StreamAssembler::new().finish("m".into());
        assert_eq!(completion.model, "m");
        assert!(completion.choices.is_empty());
        assert_eq!(completion.usage, None);
    }

    #[test]
    fn text_per_choice_sorted_by_index() {
        let mut a = StreamAssembler::new();
        a.push_text(1, "b1");
        a.push_text(0, "a1");
        a.push_text(1, "b2");
        a.push_text(0, "");
        a.finish_reason(1, FinishReason::Length);
        a.finish_reason(0, FinishReason::Other);
        a.finish_reason(0, FinishReason::Stop);
        let c = a.finish("m".into());
        assert_eq!(c.choices.len(), 2);
        assert_eq!((c.choices[0].index, c.choices[0].text.as_str()), (0, "a1"));
        assert_eq!(
            (c.choices[1].index, c.choices[1].text.as_str()),
            (1, "b1b2")
        );
        assert_eq!(c.choices[0].finish_reason, Some(FinishReason::Stop));
        assert_eq!(c.choices[1].finish_reason, Some(FinishReason::Length));
        assert_eq!(c.choices[0].function_call, None);
        assert!(c.choices[0].tool_calls.is_empty());
        assert_eq!(c.choices[0].logprobs, None);
    }

    #[test]
    fn finish_reason_alone_makes_a_choice() {
        let mut a = StreamAssembler::new();
        a.finish_reason(2, FinishReason::ContentFilter);
        let c = a.finish("m".into());
        assert_eq!(c.choices[0].index, 2);
        assert_eq!(c.choices[0].text, "");
    }

    #[test]
    fn tool_calls_assemble_across_events() {
        let mut a = StreamAssembler::new();
        a.push_tool_call(0, 1, Some("call_b"), Some("second"), Some(""));
        a.push_tool_call(0, 0, Some("call_a"), Some("first"), None);
        a.push_tool_call(0, 0, None, None, Some("{\"x\""));
        a.push_tool_call(0, 1, None, None, Some("{}"));
        a.push_tool_call(0, 0, Some("call_a"), Some("first"), Some(":1}"));
        a.finish_reason(0, FinishReason::ToolCalls);
        let c = a.finish("m".into());
        let choice = &c.choices[0];
        assert_eq!(
            choice.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "first".into(),
                    arguments: "{\"x\":1}".into(),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "second".into(),
                    arguments: "{}".into(),
                },
            ]
        );
        assert_eq!(
            choice.function_call,
            Some(FunctionCall {
                name: "first".into(),
                arguments: "{\"x\":1}".into(),
            })
        );
    }

    #[test]
    fn function_call_assembles_and_wins_over_tool_calls() {
        let mut a = StreamAssembler::new();
        a.push_function_call(0, Some("f"), Some("{\"a\":"));
        a.push_function_call(0, None, Some("2}"));
        a.push_tool_call(0, 0, Some("id"), Some("g"), Some("{}"));
        let c = a.finish("m".into());
        assert_eq!(
            c.choices[0].function_call,
            Some(FunctionCall {
                name: "f".into(),
                arguments: "{\"a\":2}".into(),
            })
        );
        assert_eq!(c.choices[0].tool_calls.len(), 1);
    }

    #[test]
    fn usage_last_value_wins() {
        let mut a = StreamAssembler::new();
        assert_eq!(a.usage(), None);
        a.set_usage(usage(1, 1));
        a.set_usage(usage(3, 4));
        assert_eq!(a.usage(), Some(usage(3, 4)));
        assert_eq!(a.finish("m".into()).usage, Some(usage(3, 4)));
    }
}
