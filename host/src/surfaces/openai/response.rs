//! Answers, stream chunks and errors in OpenAI's shapes: `chat.completion`
//! and `chat.completion.chunk`, `text_completion`, the embeddings list, and
//! `{"error": {...}}`.

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};
use uuid::Uuid;

use super::request::EncodingFormat;
use crate::error::ApiError;
use crate::flow::{CompletionCodec, EmbeddingCodec, Envelope, Metered};
use crate::http::sse_frame;
use crate::plugins::types;
use crate::store::TokenUsage;
use crate::surfaces::blocks::calls;

/// The end of an OpenAI stream, after the last chunk.
const DONE: &[u8] = b"data: [DONE]\n\n";

/// Which endpoint's shape a completion is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Text,
}

/// Writes a completion of `/v1/chat/completions` or `/v1/completions`, whole
/// or as chunks. Every chunk of a stream has the same `id`, `created` and
/// `model`, as OpenAI's do.
pub struct CompletionAnswer {
    object: Object,
    /// Unix seconds when the request was accepted.
    created: u64,
    /// The caller used `functions`, not `tools`: calls go back as `function_call`.
    legacy_functions: bool,
    /// `stream_options.include_usage`: a last chunk carries the usage.
    include_usage: bool,
    /// Choices whose opening chunk (`role: "assistant"`) went out.
    opened: Vec<u32>,
    /// Tool calls whose pieces went out as they came.
    streamed: Vec<StreamedCall>,
    /// Reasoning went out as it came; else the last frame carries it whole.
    reasoning_streamed: bool,
}

/// What a caller was sent of one tool call.
struct StreamedCall {
    choice: u32,
    call: u32,
    name_sent: bool,
    /// Bytes of the arguments' text sent.
    arguments_sent: usize,
}

impl CompletionAnswer {
    pub fn new(object: Object, legacy_functions: bool, include_usage: bool) -> Self {
        CompletionAnswer {
            object,
            created: unix_now(),
            legacy_functions,
            include_usage,
            opened: Vec::new(),
            streamed: Vec::new(),
            reasoning_streamed: false,
        }
    }

    fn id(&self, envelope: &Envelope<'_>) -> String {
        let prefix = match self.object {
            Object::Chat => "chatcmpl-",
            Object::Text => "cmpl-",
        };
        completion_id(prefix, envelope.invocation_id)
    }

    /// A chunk of the stream with `choices` (`[]` for the usage chunk).
    fn chunk(&self, envelope: &Envelope<'_>, choices: Vec<Value>) -> Value {
        let object = match self.object {
            Object::Chat => "chat.completion.chunk",
            Object::Text => "text_completion",
        };
        json!({
            "id": self.id(envelope),
            "object": object,
            "created": self.created,
            "model": envelope.model,
            "choices": choices,
        })
    }

    /// The opening chunk of choice `index`, if it was not sent yet: OpenAI's
    /// first delta of a choice names its role. `content` is `""` before text
    /// and null before tool calls, as OpenAI sends them.
    fn open(&mut self, index: u32, content: Value) -> Option<Value> {
        if self.object != Object::Chat || self.opened.contains(&index) {
            return None;
        }
        self.opened.push(index);
        Some(chat_delta(
            index,
            json!({"role": "assistant", "content": content, "refusal": null}),
        ))
    }

    fn finish_reason(&self, choice: &types::Choice) -> &'static str {
        let has_calls = !choice.tool_calls.is_empty() || choice.function_call.is_some();
        let call_reason = if self.legacy_functions {
            "function_call"
        } else {
            "tool_calls"
        };
        match &choice.finish_reason {
            Some(types::FinishReason::ToolCalls | types::FinishReason::FunctionCall) => call_reason,
            Some(
                reason @ (types::FinishReason::Length
                | types::FinishReason::Pause
                | types::FinishReason::ContentFilter
                | types::FinishReason::Refusal),
            ) => reason.openai_str(),
            // OpenAI's reasons have no "other"; and an answer must end with one.
            _ if has_calls => call_reason,
            _ => "stop",
        }
    }

    /// The choice's message (chat) as a whole answer has it.
    fn message(&self, choice: &types::Choice) -> Value {
        let calls = calls(choice);
        let has_calls = !calls.is_empty();
        let content = if choice.text.is_empty() && has_calls {
            Value::Null
        } else {
            json!(choice.text)
        };
        let mut message = json!({"role": "assistant", "content": content, "refusal": null});
        if let Some(reasoning) = reasoning_text(choice) {
            message["reasoning_content"] = json!(reasoning);
        }
        if self.legacy_functions {
            if let Some(call) = calls.first() {
                message["function_call"] = json!({"name": call.name, "arguments": call.arguments});
            }
        } else if has_calls {
            message["tool_calls"] = calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
        }
        message
    }

    /// Chunks with the parts of choice `choice`'s calls not streamed yet.
    fn unsent_calls(&mut self, choice: &types::Choice, chunks: &mut Vec<Value>) {
        let calls = calls(choice);
        if self.legacy_functions {
            if let Some(call) = calls.first() {
                chunks.push(chat_delta(
                    choice.index,
                    json!({"function_call": {"name": call.name, "arguments": call.arguments}}),
                ));
            }
            return;
        }
        for (position, call) in calls.iter().enumerate() {
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            let sent = self
                .streamed
                .iter()
                .find(|s| s.choice == choice.index && s.call == position);
            let Some(sent) = sent else {
                chunks.push(call_piece(
                    choice.index,
                    json!({"index": position, "id": call.id, "type": "function",
                        "function": {"name": call.name, "arguments": ""}}),
                ));
                if !call.arguments.is_empty() {
                    chunks.push(arguments_piece(choice.index, position, &call.arguments));
                }
                continue;
            };
            let mut function = serde_json::Map::new();
            if !sent.name_sent {
                function.insert("name".into(), json!(call.name));
            }
            // What the plugin streamed is a prefix of its final arguments;
            // anything else cannot be completed by appending.
            if let Some(rest) = call.arguments.get(sent.arguments_sent..)
                && !rest.is_empty()
            {
                function.insert("arguments".into(), json!(rest));
            }
            if !function.is_empty() {
                chunks.push(call_piece(
                    choice.index,
                    json!({"index": position, "function": function}),
                ));
            }
        }
    }
}

impl CompletionCodec for CompletionAnswer {
    fn completion(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> String {
        let choices: Vec<Value> = completion
            .choices
            .iter()
            .map(|choice| {
                let logprobs = logprobs(choice);
                let finish_reason = self.finish_reason(choice);
                match self.object {
                    Object::Chat => json!({
                        "index": choice.index,
                        "message": self.message(choice),
                        "logprobs": logprobs,
                        "finish_reason": finish_reason,
                    }),
                    Object::Text => json!({
                        "text": choice.text,
                        "index": choice.index,
                        "logprobs": logprobs,
                        "finish_reason": finish_reason,
                    }),
                }
            })
            .collect();
        let model = if completion.model.is_empty() {
            envelope.model
        } else {
            completion.model.as_str()
        };
        let object = match self.object {
            Object::Chat => "chat.completion",
            Object::Text => "text_completion",
        };
        let mut body = json!({
            "id": self.id(envelope),
            "object": object,
            "created": self.created,
            "model": model,
            "choices": choices,
        });
        if let Some(Metered { usage, .. }) = usage {
            body["usage"] = usage_json(usage);
        }
        body.to_string()
    }

    fn delta_frame(&mut self, envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Bytes {
        let mut opening = Vec::new();
        for delta in deltas {
            opening.extend(self.open(delta.index, json!("")));
        }
        let pieces = deltas
            .iter()
            .map(|delta| match self.object {
                Object::Chat => chat_delta(delta.index, json!({"content": delta.text})),
                Object::Text => json!({
                    "text": delta.text,
                    "index": delta.index,
                    "logprobs": null,
                    "finish_reason": null,
                }),
            })
            .collect();
        let mut frame = BytesMut::new();
        if !opening.is_empty() {
            frame.extend_from_slice(&sse_frame(&self.chunk(envelope, opening)));
        }
        frame.extend_from_slice(&sse_frame(&self.chunk(envelope, pieces)));
        frame.freeze()
    }

    /// Reasoning as `reasoning_content` deltas, the field DeepSeek's API and
    /// the OpenAI-compatible servers that show reasoning (vLLM, SGLang) use,
    /// which their clients read.
    fn reasoning_frame(
        &mut self,
        envelope: &Envelope<'_>,
        pieces: &[types::ReasoningDelta],
    ) -> Option<Bytes> {
        if self.object != Object::Chat {
            return None;
        }
        let mut chunks = Vec::new();
        for piece in pieces.iter().filter(|piece| !piece.text.is_empty()) {
            chunks.extend(self.open(piece.index, json!("")));
            chunks.push(chat_delta(
                piece.index,
                json!({"reasoning_content": piece.text}),
            ));
            self.reasoning_streamed = true;
        }
        if chunks.is_empty() {
            return None;
        }
        Some(frames(
            chunks.into_iter().map(|c| self.chunk(envelope, vec![c])),
        ))
    }

    fn tool_call_frame(
        &mut self,
        envelope: &Envelope<'_>,
        calls: &[types::ToolCallDelta],
    ) -> Option<Bytes> {
        // Legacy `function_call` answers go out whole, in the last frame.
        if self.object != Object::Chat || self.legacy_functions {
            return None;
        }
        let mut chunks = Vec::new();
        for delta in calls {
            chunks.extend(self.open(delta.index, Value::Null));
            let known = self
                .streamed
                .iter_mut()
                .find(|s| s.choice == delta.index && s.call == delta.call);
            match known {
                None => {
                    // Pieces without an id get the one the plugin SDK gives
                    // such calls in the final completion.
                    let id = delta
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("call_{}_{}", delta.index, delta.call));
                    let mut function = json!({"arguments": ""});
                    if let Some(name) = &delta.name {
                        function["name"] = json!(name);
                    }
                    chunks.push(call_piece(
                        delta.index,
                        json!({"index": delta.call, "id": id, "type": "function", "function": function}),
                    ));
                    if !delta.arguments.is_empty() {
                        chunks.push(arguments_piece(delta.index, delta.call, &delta.arguments));
                    }
                    self.streamed.push(StreamedCall {
                        choice: delta.index,
                        call: delta.call,
                        name_sent: delta.name.is_some(),
                        arguments_sent: delta.arguments.len(),
                    });
                }
                Some(sent) => {
                    let mut function = serde_json::Map::new();
                    if let Some(name) = delta.name.as_ref().filter(|_| !sent.name_sent) {
                        function.insert("name".into(), json!(name));
                        sent.name_sent = true;
                    }
                    if !delta.arguments.is_empty() {
                        function.insert("arguments".into(), json!(delta.arguments));
                        sent.arguments_sent += delta.arguments.len();
                    }
                    if !function.is_empty() {
                        chunks.push(call_piece(
                            delta.index,
                            json!({"index": delta.call, "function": function}),
                        ));
                    }
                }
            }
        }
        if chunks.is_empty() {
            return None;
        }
        Some(frames(
            chunks.into_iter().map(|c| self.chunk(envelope, vec![c])),
        ))
    }

    fn last_frame(
        &mut self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> Bytes {
        let mut chunks = Vec::new();
        for choice in &completion.choices {
            let opening = if calls(choice).is_empty() || !choice.text.is_empty() {
                json!("")
            } else {
                Value::Null
            };
            chunks.extend(self.open(choice.index, opening));
            if self.object == Object::Chat {
                if let Some(reasoning) = reasoning_text(choice).filter(|_| !self.reasoning_streamed)
                {
                    chunks.push(chat_delta(
                        choice.index,
                        json!({"reasoning_content": reasoning}),
                    ));
                }
                self.unsent_calls(choice, &mut chunks);
            }
            let finish_reason = self.finish_reason(choice);
            chunks.push(match self.object {
                Object::Chat => json!({
                    "index": choice.index,
                    "delta": {},
                    "logprobs": logprobs(choice),
                    "finish_reason": finish_reason,
                }),
                Object::Text => json!({
                    "text": "",
                    "index": choice.index,
                    "logprobs": logprobs(choice),
                    "finish_reason": finish_reason,
                }),
            });
        }
        let mut values: Vec<Value> = chunks
            .into_iter()
            .map(|choice| self.chunk(envelope, vec![choice]))
            .collect();
        if self.include_usage {
            let mut last = self.chunk(envelope, Vec::new());
            last["usage"] = usage.map_or(Value::Null, |m| usage_json(m.usage));
            values.push(last);
        }
        let mut frame = BytesMut::new();
        for value in &values {
            frame.extend_from_slice(&sse_frame(value));
        }
        frame.extend_from_slice(DONE);
        frame.freeze()
    }

    fn error_frame(&mut self, error: &ApiError, invocation_id: &Uuid) -> Bytes {
        sse_frame(&error_body(error, invocation_id))
    }
}

/// Writes `/v1/embeddings` answers.
pub struct EmbeddingAnswer {
    pub format: EncodingFormat,
}

impl EmbeddingAnswer {
    /// The answer, with the call's usage when the plugin reported it (OpenAI's
    /// clients expect the field; unknown counts are zero).
    pub fn with_usage(
        &self,
        envelope: &Envelope<'_>,
        vectors: &[Vec<f32>],
        usage: Option<&TokenUsage>,
    ) -> String {
        let data: Vec<Value> = vectors
            .iter()
            .enumerate()
            .map(|(index, vector)| {
                let embedding = match self.format {
                    EncodingFormat::Float => json!(vector),
                    EncodingFormat::Base64 => json!(base64_f32(vector)),
                };
                json!({"object": "embedding", "index": index, "embedding": embedding})
            })
            .collect();
        let (prompt, total) = usage.map_or((0, 0), |u| (u.prompt_tokens, u.total_tokens));
        json!({
            "object": "list",
            "data": data,
            "model": envelope.model,
            "usage": {"prompt_tokens": prompt, "total_tokens": total},
        })
        .to_string()
    }
}

impl EmbeddingCodec for EmbeddingAnswer {
    fn embeddings(
        &self,
        envelope: &Envelope<'_>,
        vectors: &[Vec<f32>],
        usage: Option<Metered<'_>>,
    ) -> String {
        self.with_usage(envelope, vectors, usage.map(|m| m.usage))
    }
}

/// An error as OpenAI writes it, of invocation `invocation_id`. The status is the error's own
/// ([`ApiError::status`]); `type` and `code` follow it so that OpenAI's clients raise their
/// typed exceptions.
pub fn error_body(error: &ApiError, invocation_id: &Uuid) -> Value {
    let status = error.status().as_u16();
    let (kind, code) = match (error, status) {
        (ApiError::UnknownModel(_) | ApiError::UnknownRoute(_), _) => {
            ("invalid_request_error", Some("model_not_found"))
        }
        (ApiError::MissingKey | ApiError::InvalidKey, _) => {
            ("authentication_error", Some("invalid_api_key"))
        }
        (ApiError::GuardDenied { .. }, _) => ("invalid_request_error", Some("guard_blocked")),
        (_, 401) => ("authentication_error", None),
        (_, 403) => ("permission_error", None),
        (_, 429) => ("rate_limit_error", Some("rate_limit_exceeded")),
        (_, 503) => ("server_error", None),
        (_, 504) => ("api_error", Some("timeout")),
        (_, 500..) => ("api_error", error.code()),
        _ => ("invalid_request_error", None),
    };
    let param = match error {
        ApiError::InvalidParam { param, .. } | ApiError::PartTooLarge { param, .. } => {
            json!(param)
        }
        ApiError::UnknownModel(_) | ApiError::UnknownRoute(_) => json!("model"),
        _ => Value::Null,
    };
    let mut message = error.message_for(invocation_id);
    if let Some(provider) = error.provider_error()
        && !message.contains(provider)
    {
        message = format!("{message}: {provider}");
    }
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

/// A choice's readable reasoning, its blocks joined with a blank line; `None`
/// when it has none (hidden reasoning has no text to show).
fn reasoning_text(choice: &types::Choice) -> Option<String> {
    let texts: Vec<&str> = (choice.reasoning.iter())
        .map(|reasoning| reasoning.text.as_str())
        .filter(|text| !text.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// `PREFIX` and the invocation id without its dashes (OpenAI's ids are one token).
pub fn completion_id(prefix: &str, invocation_id: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + invocation_id.len());
    id.push_str(prefix);
    id.extend(invocation_id.chars().filter(|c| *c != '-'));
    id
}

pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn logprobs(choice: &types::Choice) -> Value {
    choice
        .logprobs
        .as_deref()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or(Value::Null)
}

fn chat_delta(index: u32, delta: Value) -> Value {
    json!({"index": index, "delta": delta, "logprobs": null, "finish_reason": null})
}

fn call_piece(index: u32, call: Value) -> Value {
    chat_delta(index, json!({"tool_calls": [call]}))
}

fn arguments_piece(index: u32, call: u32, arguments: &str) -> Value {
    call_piece(
        index,
        json!({"index": call, "function": {"arguments": arguments}}),
    )
}

/// Several chunks as one frame.
fn frames(chunks: impl IntoIterator<Item = Value>) -> Bytes {
    let mut frame = BytesMut::new();
    for chunk in chunks {
        frame.extend_from_slice(&sse_frame(&chunk));
    }
    frame.freeze()
}

fn usage_json(usage: &TokenUsage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens.unwrap_or(0)},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens.unwrap_or(0)},
    })
}

/// A vector as OpenAI's `encoding_format: "base64"` has it: the little-endian
/// bytes of its f32s, in standard base64 with padding.
fn base64_f32(vector: &[f32]) -> String {
    use base64::Engine;
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Kind;

    const ENVELOPE: Envelope<'static> = Envelope {
        invocation_id: "0190b5a2-7c1e-7000-8000-000000000001",
        project_id: "p",
        kind: Kind::Chat,
        model: "m",
    };

    fn choice(text: &str, reason: Option<types::FinishReason>) -> types::Choice {
        types::Choice {
            index: 0,
            text: text.into(),
            reasoning: Vec::new(),
            finish_reason: reason,
            function_call: None,
            tool_calls: Vec::new(),
            logprobs: None,
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> types::ToolCall {
        types::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn completion(choices: Vec<types::Choice>) -> types::Completion {
        types::Completion {
            model: "m-1".into(),
            choices,
            usage: None,
        }
    }

    /// The `data:` payloads of a frame, `[DONE]` as a string.
    fn events(frame: &[u8]) -> Vec<Value> {
        let text = std::str::from_utf8(frame).unwrap();
        assert!(text.ends_with("\n\n"), "{text:?}");
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let data = e.strip_prefix("data: ").unwrap();
                serde_json::from_str(data).unwrap_or_else(|_| json!(data))
            })
            .collect()
    }

    #[test]
    fn finish_reasons_are_openai_words() {
        use types::FinishReason::*;
        let chat = CompletionAnswer::new(Object::Chat, false, false);
        let legacy = CompletionAnswer::new(Object::Chat, true, false);
        let reason = |codec: &CompletionAnswer, reason, calls: bool| {
            let mut c = choice("", reason);
            if calls {
                c.tool_calls.push(call("c", "f", "{}"));
            }
            codec.finish_reason(&c)
        };
        assert_eq!(reason(&chat, Some(Stop), false), "stop");
        assert_eq!(reason(&chat, Some(Length), false), "length");
        assert_eq!(reason(&chat, Some(ContentFilter), false), "content_filter");
        assert_eq!(reason(&chat, Some(Other), false), "stop");
        assert_eq!(reason(&chat, None, false), "stop");
        assert_eq!(reason(&chat, Some(ToolCalls), true), "tool_calls");
        assert_eq!(reason(&chat, Some(FunctionCall), true), "tool_calls");
        assert_eq!(reason(&chat, None, true), "tool_calls");
        assert_eq!(reason(&legacy, Some(ToolCalls), true), "function_call");
    }

    #[test]
    fn calls_streamed_in_part_are_completed_by_the_last_frame() {
        let mut codec = CompletionAnswer::new(Object::Chat, false, true);
        let first = codec
            .tool_call_frame(
                &ENVELOPE,
                &[types::ToolCallDelta {
                    index: 0,
                    call: 0,
                    id: Some("c1".into()),
                    name: Some("f".into()),
                    arguments: "{\"a\"".into(),
                }],
            )
            .unwrap();
        let first = events(&first);
        assert_eq!(
            first[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": null, "refusal": null})
        );
        assert_eq!(
            first[1]["choices"][0]["delta"]["tool_calls"],
            json!([{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}])
        );
        assert_eq!(
            first[2]["choices"][0]["delta"]["tool_calls"],
            json!([{"index": 0, "function": {"arguments": "{\"a\""}}])
        );
        let mut done = choice("", Some(types::FinishReason::ToolCalls));
        done.tool_calls = vec![call("c1", "f", "{\"a\":1}"), call("c2", "g", "{}")];
        let usage = TokenUsage {
            prompt_tokens: 3,
            completion_tokens: 4,
            total_tokens: 7,
            cached_prompt_tokens: Some(1),
            cache_creation_tokens: None,
            reasoning_tokens: Some(2),
            ..TokenUsage::default()
        };
        let metered = Metered {
            usage: &usage,
            cost_usd: None,
        };
        let last = events(&codec.last_frame(&ENVELOPE, &completion(vec![done]), Some(metered)));
        let deltas: Vec<&Value> = last.iter().map(|e| &e["choices"][0]["delta"]).collect();
        assert_eq!(
            deltas[0]["tool_calls"],
            json!([{"index": 0, "function": {"arguments": ":1}"}}])
        );
        assert_eq!(
            deltas[1]["tool_calls"],
            json!([{"index": 1, "id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}}])
        );
        assert_eq!(
            deltas[2]["tool_calls"],
            json!([{"index": 1, "function": {"arguments": "{}"}}])
        );
        assert_eq!(last[3]["choices"][0]["finish_reason"], json!("tool_calls"));
        assert_eq!(last[4]["choices"], json!([]));
        assert_eq!(
            last[4]["usage"],
            json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 1},
                "completion_tokens_details": {"reasoning_tokens": 2}})
        );
        assert_eq!(last[5], json!("[DONE]"));
        assert_eq!(last.len(), 6);
        for event in &last[..5] {
            assert_eq!(event["id"], first[0]["id"]);
            assert_eq!(event["created"], first[0]["created"]);
            assert_eq!(event["model"], json!("m"));
        }
    }

    #[test]
    fn text_streams_open_each_choice_once_and_errors_are_events() {
        let mut codec = CompletionAnswer::new(Object::Chat, false, false);
        let delta = |index: u32, text: &str| types::TextDelta {
            index,
            text: text.into(),
        };
        let frame = events(&codec.delta_frame(&ENVELOPE, &[delta(0, "a"), delta(1, "b")]));
        assert_eq!(frame.len(), 2);
        assert_eq!(frame[0]["choices"][1]["delta"]["role"], json!("assistant"));
        assert_eq!(frame[1]["choices"][1]["delta"], json!({"content": "b"}));
        let frame = events(&codec.delta_frame(&ENVELOPE, &[delta(0, "c")]));
        assert_eq!(frame.len(), 1, "opened once");
        let last = events(&codec.last_frame(
            &ENVELOPE,
            &completion(vec![choice("ac", Some(types::FinishReason::Length))]),
            None,
        ));
        assert_eq!(last.len(), 2, "no usage chunk unless asked: {last:?}");
        assert_eq!(last[0]["choices"][0]["finish_reason"], json!("length"));
        let error = events(&codec.error_frame(&ApiError::Timeout("slow".into()), &Uuid::nil()));
        assert_eq!(error[0]["error"]["code"], json!("timeout"));
    }

    #[test]
    fn whole_answers_leave_content_null_only_for_calls() {
        let codec = CompletionAnswer::new(Object::Chat, false, false);
        let mut called = choice("", Some(types::FinishReason::ToolCalls));
        called.function_call = Some(types::FunctionCall {
            name: "f".into(),
            arguments: "{}".into(),
        });
        let body: Value = serde_json::from_str(&codec.completion(
            &ENVELOPE,
            &completion(vec![called, choice("", Some(types::FinishReason::Stop))]),
            None,
        ))
        .unwrap();
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], Value::Null);
        assert_eq!(message["tool_calls"][0]["id"], json!("call_0_0"));
        assert!(message.get("function_call").is_none());
        assert_eq!(body["choices"][1]["message"]["content"], json!(""));
        assert_eq!(body["model"], json!("m-1"));
        assert!(body.get("usage").is_none());
    }

    #[test]
    fn base64_vectors_are_little_endian_f32_with_padding() {
        assert_eq!(base64_f32(&[]), "");
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.5]), "AACAPwAAIMA=");
    }

    #[test]
    fn ids_drop_the_dashes() {
        assert_eq!(
            completion_id("chatcmpl-", "0190b5a2-7c1e-7000-8000-000000000001"),
            "chatcmpl-0190b5a27c1e70008000000000000001"
        );
    }

    #[test]
    fn errors_take_openai_types_and_codes() {
        let body = error_body(&ApiError::UnknownModel("x".into()), &Uuid::nil());
        assert_eq!(body["error"]["code"], json!("model_not_found"));
        assert_eq!(body["error"]["param"], json!("model"));
        let body = error_body(
            &ApiError::Upstream {
                status: 429,
                message: "slow down".into(),
                retry_after: Some(3),
            },
            &Uuid::nil(),
        );
        assert_eq!(body["error"]["type"], json!("rate_limit_error"));
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("slow down"))
        );
        let body = error_body(&ApiError::InvalidKey, &Uuid::nil());
        assert_eq!(body["error"]["type"], json!("authentication_error"));
    }
}
