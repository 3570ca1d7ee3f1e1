//! Answers in the Messages API's shape: a `message` object, or its event
//! stream (`message_start`, `ping`, content blocks opened, filled and
//! closed one at a time, `message_delta`, `message_stop`), and errors as
//! `{"type": "error", "error": {"type", "message"}}`.
//!
//! Anthropic answers with one message, so only choice 0 of a completion is
//! written.

use bytes::Bytes;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::ApiError;
use crate::flow::{CompletionCodec, Envelope, Metered};
use crate::plugins::types;
use crate::store::TokenUsage;
use crate::surfaces::blocks::{Block, BlockEvents, Blocks, Kind, calls, first_choice};

/// Writes one request's answer. A stream's state lives here: whether the
/// opening events went out, and its content blocks ([`Blocks`]).
#[derive(Debug, Default)]
pub struct MessageAnswer {
    /// `message_start` and `ping` were sent.
    started: bool,
    blocks: Blocks,
}

/// Anthropic's content block events.
struct Events;

/// Whether a reasoning block is one an Anthropic client reads: thinking text,
/// or hidden thinking. A signature alone (Gemini signs the parts of its answers
/// that way) is not a thinking block, and could only be sent back to Gemini.
fn shown(reasoning: &types::Reasoning) -> bool {
    !reasoning.text.is_empty() || reasoning.redacted.is_some()
}

/// A reasoning block as a content block: `thinking` with its signature, or
/// `redacted_thinking` with its data.
fn thinking_block(reasoning: &types::Reasoning) -> Value {
    match &reasoning.redacted {
        Some(data) => json!({"type": "redacted_thinking", "data": data}),
        None => json!({"type": "thinking", "thinking": reasoning.text,
            "signature": reasoning.signature.as_deref().unwrap_or("")}),
    }
}

/// `msg_` and the invocation id's hex digits, so a message id leads to its record.
pub fn message_id(invocation_id: &str) -> String {
    let mut id = String::with_capacity(36);
    id.push_str("msg_");
    id.extend(invocation_id.chars().filter(|c| *c != '-'));
    id
}

/// `input` of a `tool_use` block: the arguments when they are a JSON object.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

fn stop_reason(choice: Option<&types::Choice>) -> &'static str {
    let Some(choice) = choice else {
        return "end_turn";
    };
    let called = !choice.tool_calls.is_empty() || choice.function_call.is_some();
    match &choice.finish_reason {
        Some(types::FinishReason::Length) => "max_tokens",
        Some(types::FinishReason::ContentFilter | types::FinishReason::Refusal) => "refusal",
        Some(types::FinishReason::ToolCalls | types::FinishReason::FunctionCall) => "tool_use",
        Some(types::FinishReason::Pause) => "pause_turn",
        // Some providers end a turn that called tools as a plain stop; an
        // Anthropic client runs the tools only on `tool_use`.
        _ if called => "tool_use",
        Some(types::FinishReason::StopSequence(_)) => "stop_sequence",
        Some(types::FinishReason::Stop | types::FinishReason::Other) | None => "end_turn",
    }
}

/// The stop sequence the model wrote, when it stopped at one.
fn stop_sequence(choice: Option<&types::Choice>) -> Value {
    match choice.and_then(|choice| choice.finish_reason.as_ref()) {
        Some(types::FinishReason::StopSequence(sequence)) => Value::String(sequence.clone()),
        _ => Value::Null,
    }
}

/// Anthropic counts `input_tokens` without the cached and cache-written
/// ones; the gateway's prompt tokens include them.
fn usage_json(usage: Option<&TokenUsage>) -> Value {
    let Some(usage) = usage else {
        return json!({
            "input_tokens": 0, "output_tokens": 0,
            "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
        });
    };
    let cached = usage.cached_prompt_tokens.unwrap_or(0);
    let created = usage.cache_creation_tokens.unwrap_or(0);
    json!({
        "input_tokens": usage.prompt_tokens.saturating_sub(cached).saturating_sub(created),
        "output_tokens": usage.completion_tokens,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": created,
    })
}

/// One SSE event: its name (the SDKs dispatch on it) and its data.
fn push_event(out: &mut Vec<u8>, name: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

fn block_delta(out: &mut Vec<u8>, index: u32, delta: Value) {
    push_event(
        out,
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    );
}

impl BlockEvents for Events {
    const AMENDS_CLOSED_CALLS: bool = true;
    const SIGNATURES_ALONE: bool = false;
    const ALWAYS_TEXT: bool = false;

    fn open(&mut self, out: &mut Vec<u8>, block: &Block) {
        let content_block = match (block.kind, &block.call) {
            (Kind::Text, _) => json!({"type": "text", "text": ""}),
            (Kind::Reasoning { .. }, _) => {
                json!({"type": "thinking", "thinking": "", "signature": ""})
            }
            (Kind::Hidden, _) => json!({"type": "redacted_thinking", "data": block.content}),
            (Kind::Call { .. }, call) => {
                let (id, name) = call.clone().unwrap_or_default();
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
        };
        push_event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": block.index,
                "content_block": content_block}),
        );
    }

    fn text(&mut self, out: &mut Vec<u8>, block: &Block, piece: &str) {
        block_delta(
            out,
            block.index,
            json!({"type": "text_delta", "text": piece}),
        );
    }

    fn reasoning(&mut self, out: &mut Vec<u8>, block: &Block, piece: &str) {
        block_delta(
            out,
            block.index,
            json!({"type": "thinking_delta", "thinking": piece}),
        );
    }

    fn signature(&mut self, out: &mut Vec<u8>, block: &Block, signature: &str) {
        let delta = json!({"type": "signature_delta", "signature": signature});
        block_delta(out, block.index, delta);
    }

    fn arguments(&mut self, out: &mut Vec<u8>, index: u32, piece: &str) {
        let delta = json!({"type": "input_json_delta", "partial_json": piece});
        block_delta(out, index, delta);
    }

    fn close(&mut self, out: &mut Vec<u8>, block: Block) {
        push_event(
            out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": block.index}),
        );
    }
}

impl MessageAnswer {
    /// `message_start` (no content, usage not known yet) and a `ping`, once.
    fn start(&mut self, out: &mut Vec<u8>, envelope: &Envelope<'_>) {
        if self.started {
            return;
        }
        self.started = true;
        let message = json!({
            "id": message_id(envelope.invocation_id),
            "type": "message",
            "role": "assistant",
            "model": envelope.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage_json(None),
        });
        push_event(
            out,
            "message_start",
            &json!({"type": "message_start", "message": message}),
        );
        push_event(out, "ping", &json!({"type": "ping"}));
    }
}

impl CompletionCodec for MessageAnswer {
    fn completion(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> String {
        let choice = first_choice(completion);
        let mut content = Vec::new();
        if let Some(choice) = choice {
            content.extend(
                choice
                    .reasoning
                    .iter()
                    .filter(|r| shown(r))
                    .map(thinking_block),
            );
            if !choice.text.is_empty() {
                content.push(json!({"type": "text", "text": choice.text}));
            }
            for call in calls(choice) {
                content.push(json!({"type": "tool_use", "id": call.id, "name": call.name,
                    "input": tool_input(&call.arguments)}));
            }
        }
        let model = if completion.model.is_empty() {
            envelope.model
        } else {
            &completion.model
        };
        json!({
            "id": message_id(envelope.invocation_id),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason(choice),
            "stop_sequence": stop_sequence(choice),
            "usage": usage_json(usage.map(|m| m.usage)),
        })
        .to_string()
    }

    fn delta_frame(&mut self, envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out, envelope);
        for delta in deltas.iter().filter(|d| d.index == 0) {
            self.blocks.text(&mut Events, &mut out, &delta.text);
        }
        Bytes::from(out)
    }

    fn reasoning_frame(
        &mut self,
        envelope: &Envelope<'_>,
        pieces: &[types::ReasoningDelta],
    ) -> Option<Bytes> {
        let mut out = Vec::new();
        self.start(&mut out, envelope);
        for piece in pieces.iter().filter(|p| p.index == 0) {
            self.blocks.reasoning(&mut Events, &mut out, piece);
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    fn tool_call_frame(
        &mut self,
        envelope: &Envelope<'_>,
        calls: &[types::ToolCallDelta],
    ) -> Option<Bytes> {
        let mut out = Vec::new();
        self.start(&mut out, envelope);
        for call in calls.iter().filter(|c| c.index == 0) {
            self.blocks.call(&mut Events, &mut out, call);
        }
        // Pieces of other choices only, once started: nothing to send.
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    fn last_frame(
        &mut self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out, envelope);
        let choice = first_choice(completion);
        self.blocks.finish(&mut Events, &mut out, choice);
        push_event(
            &mut out,
            "message_delta",
            &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(choice), "stop_sequence": stop_sequence(choice)},
                "usage": usage_json(usage.map(|m| m.usage))}),
        );
        push_event(&mut out, "message_stop", &json!({"type": "message_stop"}));
        Bytes::from(out)
    }

    fn error_frame(&mut self, error: &ApiError, invocation_id: &Uuid) -> Bytes {
        let mut out = Vec::new();
        push_event(&mut out, "error", &error_body(error, invocation_id));
        Bytes::from(out)
    }
}

/// Anthropic's error type for the status the gateway gives `error`.
fn error_type(error: &ApiError) -> &'static str {
    match error.status().as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 => "overloaded_error",
        504 => "timeout_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// `{"type": "error", "error": {"type", "message"}, "request_id"}`; the
/// request id is the invocation's. Anthropic's error has no `code`; the gateway's stable
/// code (a plugin's crash) is added as one, which Anthropic's clients pass over.
pub fn error_body(error: &ApiError, invocation_id: &Uuid) -> Value {
    let mut detail =
        json!({"type": error_type(error), "message": error.described_for(invocation_id)});
    if let Some(code) = error.code() {
        detail["code"] = json!(code);
    }
    json!({
        "type": "error",
        "error": detail,
        "request_id": invocation_id.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Kind;

    const ID: &str = "0190b6a2-7c1e-7d2a-9b3c-0123456789ab";

    fn envelope() -> Envelope<'static> {
        Envelope {
            invocation_id: ID,
            project_id: "p",
            kind: Kind::Chat,
            model: "asked-model",
        }
    }

    fn completion(
        text: &str,
        calls: &[(&str, &str, &str)],
        reason: types::FinishReason,
    ) -> types::Completion {
        types::Completion {
            model: "answered-model".into(),
            choices: vec![types::Choice {
                index: 0,
                text: text.into(),
                reasoning: Vec::new(),
                finish_reason: Some(reason),
                function_call: None,
                tool_calls: calls
                    .iter()
                    .map(|(id, name, arguments)| types::ToolCall {
                        id: (*id).into(),
                        name: (*name).into(),
                        arguments: (*arguments).into(),
                    })
                    .collect(),
                logprobs: None,
            }],
            usage: None,
        }
    }

    /// `(event name, data)` of every event in `bytes`.
    fn events(bytes: &[u8]) -> Vec<(String, Value)> {
        let text = std::str::from_utf8(bytes).unwrap();
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|event| {
                let (name, data) = event.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_owned();
                let data: Value =
                    serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(data["type"], json!(name), "{event}");
                (name, data)
            })
            .collect()
    }

    fn names(events: &[(String, Value)]) -> Vec<&str> {
        events.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn whole_message_with_text_tools_and_cached_usage() {
        let usage = TokenUsage {
            prompt_tokens: 100,
            completion_tokens: 7,
            total_tokens: 107,
            cached_prompt_tokens: Some(30),
            cache_creation_tokens: Some(20),
            reasoning_tokens: None,
            ..TokenUsage::default()
        };
        let answer = MessageAnswer::default().completion(
            &envelope(),
            &completion(
                "hi",
                &[("t1", "f", r#"{"a":1}"#), ("t2", "g", "not json")],
                types::FinishReason::ToolCalls,
            ),
            Some(Metered {
                usage: &usage,
                cost_usd: Some(0.1),
            }),
        );
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            answer,
            json!({
                "id": "msg_0190b6a27c1e7d2a9b3c0123456789ab", "type": "message", "role": "assistant",
                "model": "answered-model",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                    {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 50, "output_tokens": 7,
                    "cache_read_input_tokens": 30, "cache_creation_input_tokens": 20},
            })
        );
    }

    #[test]
    fn stop_reasons_map_to_anthropic_words() {
        let reason =
            |r, calls: &[(&str, &str, &str)]| stop_reason(first_choice(&completion("", calls, r)));
        assert_eq!(reason(types::FinishReason::Stop, &[]), "end_turn");
        assert_eq!(reason(types::FinishReason::Length, &[]), "max_tokens");
        assert_eq!(reason(types::FinishReason::ToolCalls, &[]), "tool_use");
        assert_eq!(reason(types::FinishReason::FunctionCall, &[]), "tool_use");
        assert_eq!(reason(types::FinishReason::ContentFilter, &[]), "refusal");
        assert_eq!(reason(types::FinishReason::Other, &[]), "end_turn");
        assert_eq!(
            reason(types::FinishReason::Stop, &[("t", "f", "{}")]),
            "tool_use"
        );
    }

    #[test]
    fn a_stream_opens_fills_and_closes_blocks_in_order() {
        let mut codec = MessageAnswer::default();
        let env = envelope();
        let mut out = Vec::new();
        let text = |t: &str| {
            [types::TextDelta {
                index: 0,
                text: t.into(),
            }]
        };
        let piece =
            |call, id: Option<&str>, name: Option<&str>, arguments: &str| types::ToolCallDelta {
                index: 0,
                call,
                id: id.map(Into::into),
                name: name.map(Into::into),
                arguments: arguments.into(),
            };
        out.extend_from_slice(&codec.delta_frame(&env, &text("Hel")));
        out.extend_from_slice(&codec.delta_frame(&env, &text("lo")));
        let frame = codec.tool_call_frame(&env, &[piece(0, Some("t1"), Some("f"), "{\"a\"")]);
        out.extend_from_slice(&frame.unwrap());
        let frame = codec.tool_call_frame(
            &env,
            &[piece(0, None, None, ":1}"), piece(1, None, Some("g"), "")],
        );
        out.extend_from_slice(&frame.unwrap());
        // Call 1's arguments were never streamed: the last frame sends them.
        let whole = completion(
            "Hello",
            &[("t1", "f", "{\"a\":1}"), ("call_0_1", "g", "{}")],
            types::FinishReason::ToolCalls,
        );
        out.extend_from_slice(&codec.last_frame(&env, &whole, None));
        let events = events(&out);
        assert_eq!(
            names(&events),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(
            events[0].1["message"]["id"],
            json!("msg_0190b6a27c1e7d2a9b3c0123456789ab")
        );
        assert_eq!(events[0].1["message"]["content"], json!([]));
        assert_eq!(
            events[6].1["content_block"],
            json!({"type": "tool_use", "id": "t1", "name": "f", "input": {}})
        );
        assert_eq!(events[6].1["index"], json!(1));
        assert_eq!(
            events[7].1["delta"],
            json!({"type": "input_json_delta", "partial_json": "{\"a\""})
        );
        assert_eq!(events[10].1["content_block"]["id"], json!("call_0_1"));
        assert_eq!(events[11].1["delta"]["partial_json"], json!("{}"));
        assert_eq!(
            events[13].1["delta"],
            json!({"stop_reason": "tool_use", "stop_sequence": null})
        );
    }

    #[test]
    fn a_stream_with_nothing_streamed_sends_everything_last() {
        let mut codec = MessageAnswer::default();
        let whole = completion(
            "all",
            &[("t1", "f", "{\"x\":2}")],
            types::FinishReason::ToolCalls,
        );
        let events = events(&codec.last_frame(&envelope(), &whole, None));
        assert_eq!(
            names(&events),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(
            events[3].1["delta"],
            json!({"type": "text_delta", "text": "all"})
        );
        assert_eq!(events[6].1["delta"]["partial_json"], json!("{\"x\":2}"));
    }

    #[test]
    fn errors_take_anthropic_types_and_name_what_failed() {
        let id = Uuid::nil();
        let body = |e: ApiError| error_body(&e, &id);
        assert_eq!(
            body(ApiError::InvalidKey)["error"]["type"],
            json!("authentication_error")
        );
        assert_eq!(
            body(ApiError::UnknownModel("x".into()))["error"]["type"],
            json!("not_found_error")
        );
        assert_eq!(
            body(ApiError::BodyTooLarge(1))["error"]["type"],
            json!("request_too_large")
        );
        assert_eq!(
            body(ApiError::Busy(1))["error"]["type"],
            json!("overloaded_error")
        );
        assert_eq!(
            body(ApiError::Timeout("slow".into()))["error"]["type"],
            json!("timeout_error")
        );
        assert_eq!(
            body(ApiError::PluginFailed("x".into()))["error"]["type"],
            json!("api_error")
        );
        let limited = body(ApiError::Upstream {
            status: 429,
            message: "slow down".into(),
            retry_after: Some(3),
        });
        assert_eq!(limited["type"], json!("error"));
        assert_eq!(limited["error"]["type"], json!("rate_limit_error"));
        assert!(
            limited["error"]["message"]
                .as_str()
                .unwrap()
                .ends_with(": slow down"),
            "{limited}"
        );
        let param = body(ApiError::InvalidParam {
            param: "top_k".into(),
            message: "too big".into(),
        });
        assert_eq!(
            param["error"],
            json!({"type": "invalid_request_error", "message": "top_k: too big"})
        );
        let frame = MessageAnswer::default().error_frame(&ApiError::Busy(1), &id);
        assert!(frame.starts_with(b"event: error\ndata: {"), "{frame:?}");
    }
}
