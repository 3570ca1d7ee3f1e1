//! Answers in the Responses API's shape: a `response` object whose `output`
//! lists items (`reasoning`, `message`, `function_call`), or its typed event
//! stream: `response.created`, `response.in_progress`, then each item opened
//! (`response.output_item.added`), filled (`response.content_part.added`,
//! `response.output_text.delta`, `response.reasoning_summary_text.delta`,
//! `response.function_call_arguments.delta`) and closed
//! (`response.output_item.done`) one at a time, and `response.completed` (or
//! `response.incomplete`, `response.failed`). Every event has its
//! `sequence_number`.
//!
//! The Responses API answers with one output, so only choice 0 is written.

use bytes::Bytes;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::super::response::{completion_id, error_body, unix_now};
use super::request::REDACTED;
use crate::error::ApiError;
use crate::flow::{CompletionCodec, Envelope, Kept, Metered, Parent};
use crate::plugins::types;
use crate::store::TokenUsage;
use crate::surfaces::blocks::{Block, BlockEvents, Blocks, Kind, first_choice};

/// Writes one request's answer. A stream's state lives here: its output items
/// ([`Blocks`]) and its events' numbering.
#[derive(Debug)]
pub struct ResponseAnswer {
    /// What the response object repeats of the request (instructions, tools,
    /// settings).
    echo: Map<String, Value>,
    created_at: u64,
    /// This turn's input items to keep, with the response it continues. `None`: `store` is
    /// false.
    keep: Option<ToKeep>,
    /// `response.created` and `response.in_progress` went out.
    started: bool,
    /// The model the stream's response object names.
    model: String,
    blocks: Blocks,
    events: Events,
    /// The last frame went out: the events' items are the whole output.
    finished: bool,
}

/// What a kept answer keeps beside its output: this request's input items (not those of the
/// responses it continues, kept with them), and the response it continues.
#[derive(Debug)]
pub struct ToKeep {
    pub input: Vec<Value>,
    pub parent: Option<Parent>,
}

/// The Responses API's events for output items, numbered, with the items they closed.
#[derive(Debug, Default)]
struct Events {
    /// The next event's `sequence_number`.
    sequence: u64,
    invocation_id: String,
    /// Items closed (`response.output_item.done`), by output index.
    done: Vec<Value>,
}

/// `resp_` and the invocation id's hex digits: a response id leads to its record.
pub fn response_id(invocation_id: &str) -> String {
    completion_id("resp_", invocation_id)
}

/// An output item's id: its kind (`rs`, `msg`, `fc`), the invocation's hex digits and its
/// output index, the same whole or streamed.
fn item_id(kind: &str, invocation_id: &str, index: usize) -> String {
    let mut id = completion_id(&format!("{kind}_"), invocation_id);
    id.push('_');
    id.push_str(&index.to_string());
    id
}

/// A reasoning item. Its text is the summary (providers' thinking is shown
/// as it came); its signature, or the hidden reasoning, is `encrypted_content`,
/// which the next turn sends back.
fn reasoning_item(id: String, text: &str, reasoning: &types::Reasoning) -> Value {
    let summary: Vec<Value> = if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "summary_text", "text": text})]
    };
    let encrypted = match (&reasoning.redacted, &reasoning.signature) {
        (Some(data), _) => Value::String(format!("{REDACTED}{data}")),
        (None, Some(signature)) => Value::String(signature.clone()),
        (None, None) => Value::Null,
    };
    json!({"type": "reasoning", "id": id, "summary": summary, "encrypted_content": encrypted})
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

fn message_item(id: String, status: &str, content: Vec<Value>) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

fn call_item(id: String, status: &str, call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
        "arguments": arguments, "status": status})
}

/// `status` and `incomplete_details` of a finished response.
fn status(choice: Option<&types::Choice>) -> (&'static str, Value) {
    match choice.and_then(|c| c.finish_reason.as_ref()) {
        Some(types::FinishReason::Length) => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some(types::FinishReason::ContentFilter | types::FinishReason::Refusal) => {
            ("incomplete", json!({"reason": "content_filter"}))
        }
        _ => ("completed", Value::Null),
    }
}

/// The Responses API counts cached tokens within `input_tokens` and reasoning
/// tokens within `output_tokens`, as the gateway does.
fn usage_json(usage: &TokenUsage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_prompt_tokens.unwrap_or(0)},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens.unwrap_or(0)},
        "total_tokens": usage.total_tokens,
    })
}

impl Events {
    /// One event, numbered, with its SSE `event:` line.
    fn event(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Value) {
        if let Value::Object(fields) = &mut data {
            fields.insert("type".into(), json!(kind));
            fields.insert("sequence_number".into(), json!(self.sequence));
        }
        self.sequence += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        out.extend_from_slice(data.to_string().as_bytes());
        out.extend_from_slice(b"\n\n");
    }

    fn id(&self, block: &Block) -> String {
        let kind = match block.kind {
            Kind::Text => "msg",
            Kind::Reasoning { .. } | Kind::Hidden => "rs",
            Kind::Call { .. } => "fc",
        };
        item_id(kind, &self.invocation_id, block.index as usize)
    }

    /// The item a block is, `status` as given.
    fn item(&self, block: &Block, status: &str) -> Value {
        let id = self.id(block);
        match block.kind {
            Kind::Text if status == "completed" => {
                message_item(id, status, vec![text_part(&block.content)])
            }
            Kind::Text => message_item(id, status, Vec::new()),
            Kind::Reasoning { .. } => {
                let signed = types::Reasoning {
                    text: String::new(),
                    signature: block.signature.clone(),
                    redacted: None,
                };
                reasoning_item(id, &block.content, &signed)
            }
            Kind::Hidden => {
                let hidden = types::Reasoning {
                    text: String::new(),
                    signature: None,
                    redacted: Some(block.content.clone()),
                };
                reasoning_item(id, "", &hidden)
            }
            Kind::Call { .. } => {
                let (call_id, name) = block.call.clone().unwrap_or_default();
                call_item(id, status, &call_id, &name, &block.content)
            }
        }
    }
}

impl BlockEvents for Events {
    const AMENDS_CLOSED_CALLS: bool = false;
    const SIGNATURES_ALONE: bool = true;
    const ALWAYS_TEXT: bool = true;

    fn open(&mut self, out: &mut Vec<u8>, block: &Block) {
        let item = self.item(block, "in_progress");
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": block.index, "item": item}),
        );
        if block.kind == Kind::Text {
            let id = self.id(block);
            self.event(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": block.index, "content_index": 0,
                    "part": text_part("")}),
            );
        }
    }

    fn text(&mut self, out: &mut Vec<u8>, block: &Block, piece: &str) {
        let id = self.id(block);
        self.event(
            out,
            "response.output_text.delta",
            json!({"item_id": id, "output_index": block.index, "content_index": 0,
                "delta": piece, "logprobs": []}),
        );
    }

    fn reasoning(&mut self, out: &mut Vec<u8>, block: &Block, piece: &str) {
        let id = self.id(block);
        if block.content.len() == piece.len() {
            // The block's first text: its summary part opens.
            self.event(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": block.index, "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""}}),
            );
        }
        self.event(
            out,
            "response.reasoning_summary_text.delta",
            json!({"item_id": id, "output_index": block.index, "summary_index": 0,
                "delta": piece}),
        );
    }

    /// The signature goes out with the item, as its `encrypted_content`.
    fn signature(&mut self, _: &mut Vec<u8>, _: &Block, _: &str) {}

    fn arguments(&mut self, out: &mut Vec<u8>, index: u32, piece: &str) {
        let id = item_id("fc", &self.invocation_id, index as usize);
        self.event(
            out,
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": piece}),
        );
    }

    fn close(&mut self, out: &mut Vec<u8>, block: Block) {
        let id = self.id(&block);
        let index = block.index;
        match block.kind {
            Kind::Text => {
                let part = text_part(&block.content);
                self.event(
                    out,
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                        "text": block.content, "logprobs": []}),
                );
                self.event(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                        "part": part}),
                );
            }
            Kind::Reasoning { .. } if !block.content.is_empty() => {
                self.event(
                    out,
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0,
                        "text": block.content}),
                );
                self.event(
                    out,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0,
                        "part": {"type": "summary_text", "text": block.content}}),
                );
            }
            Kind::Call { .. } => {
                let name = block.call.as_ref().map(|(_, name)| name.as_str());
                self.event(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "name": name,
                        "arguments": block.content}),
                );
            }
            Kind::Reasoning { .. } | Kind::Hidden => {}
        }
        let item = self.item(&block, "completed");
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": item.clone()}),
        );
        self.done.push(item);
    }
}

impl ResponseAnswer {
    pub fn new(echo: Map<String, Value>, keep: Option<ToKeep>) -> ResponseAnswer {
        ResponseAnswer {
            echo,
            created_at: unix_now(),
            keep,
            started: false,
            model: String::new(),
            blocks: Blocks::default(),
            events: Events::default(),
            finished: false,
        }
    }

    /// The response object; `usage`, `incomplete_details` and `error` are null
    /// until set.
    fn object(
        &self,
        invocation_id: &str,
        model: &str,
        status: &str,
        output: Vec<Value>,
    ) -> Map<String, Value> {
        let mut object = Map::new();
        object.insert("id".into(), json!(response_id(invocation_id)));
        object.insert("object".into(), json!("response"));
        object.insert("created_at".into(), json!(self.created_at));
        object.insert("status".into(), json!(status));
        object.insert("error".into(), Value::Null);
        object.insert("incomplete_details".into(), Value::Null);
        object.insert("model".into(), json!(model));
        object.insert("output".into(), Value::Array(output));
        for (field, value) in &self.echo {
            object.insert(field.clone(), value.clone());
        }
        object.insert("usage".into(), Value::Null);
        object
    }

    /// `response.created` and `response.in_progress`, once.
    fn start(&mut self, out: &mut Vec<u8>, invocation_id: &str, model: &str) {
        if self.started {
            return;
        }
        self.started = true;
        self.model = model.to_owned();
        self.events.invocation_id = invocation_id.to_owned();
        let response = Value::Object(self.object(invocation_id, model, "in_progress", Vec::new()));
        let created = json!({"response": response.clone()});
        self.events.event(out, "response.created", created);
        self.events
            .event(out, "response.in_progress", json!({"response": response}));
    }

    /// The output of a finished answer: as streamed, or, whole, the items the same blocks
    /// make of the completion (their events unsent), so that both agree item for item.
    fn output(&self, invocation_id: &str, completion: &types::Completion) -> Vec<Value> {
        if self.finished {
            return self.events.done.clone();
        }
        let mut events = Events {
            invocation_id: invocation_id.to_owned(),
            ..Events::default()
        };
        let choice = first_choice(completion);
        Blocks::default().finish(&mut events, &mut Vec::new(), choice);
        events.done
    }

    fn model<'a>(envelope: &'a Envelope<'_>, completion: &'a types::Completion) -> &'a str {
        if completion.model.is_empty() {
            envelope.model
        } else {
            &completion.model
        }
    }

    fn whole(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> Value {
        let (status, incomplete) = status(first_choice(completion));
        let output = self.output(envelope.invocation_id, completion);
        let model = Self::model(envelope, completion);
        let mut object = self.object(envelope.invocation_id, model, status, output);
        object.insert("incomplete_details".into(), incomplete);
        if let Some(metered) = usage {
            object.insert("usage".into(), usage_json(metered.usage));
        }
        Value::Object(object)
    }
}

impl CompletionCodec for ResponseAnswer {
    fn completion(
        &self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> String {
        self.whole(envelope, completion, usage).to_string()
    }

    fn delta_frame(&mut self, envelope: &Envelope<'_>, deltas: &[types::TextDelta]) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out, envelope.invocation_id, envelope.model);
        for delta in deltas.iter().filter(|d| d.index == 0) {
            self.blocks.text(&mut self.events, &mut out, &delta.text);
        }
        Bytes::from(out)
    }

    fn reasoning_frame(
        &mut self,
        envelope: &Envelope<'_>,
        pieces: &[types::ReasoningDelta],
    ) -> Option<Bytes> {
        let mut out = Vec::new();
        self.start(&mut out, envelope.invocation_id, envelope.model);
        for piece in pieces.iter().filter(|p| p.index == 0) {
            self.blocks.reasoning(&mut self.events, &mut out, piece);
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    fn tool_call_frame(
        &mut self,
        envelope: &Envelope<'_>,
        calls: &[types::ToolCallDelta],
    ) -> Option<Bytes> {
        let mut out = Vec::new();
        self.start(&mut out, envelope.invocation_id, envelope.model);
        for call in calls.iter().filter(|c| c.index == 0) {
            self.blocks.call(&mut self.events, &mut out, call);
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    fn last_frame(
        &mut self,
        envelope: &Envelope<'_>,
        completion: &types::Completion,
        usage: Option<Metered<'_>>,
    ) -> Bytes {
        let mut out = Vec::new();
        let model = Self::model(envelope, completion);
        self.start(&mut out, envelope.invocation_id, model);
        let choice = first_choice(completion);
        self.blocks.finish(&mut self.events, &mut out, choice);
        self.finished = true;
        let response = self.whole(envelope, completion, usage);
        let kind = match status(choice).0 {
            "incomplete" => "response.incomplete",
            _ => "response.completed",
        };
        self.events
            .event(&mut out, kind, json!({"response": response}));
        Bytes::from(out)
    }

    fn error_frame(&mut self, error: &ApiError, invocation_id: &Uuid) -> Bytes {
        let id = invocation_id.to_string();
        let mut out = Vec::new();
        let model = self.model.clone();
        self.start(&mut out, &id, &model);
        let body = error_body(error, invocation_id);
        let detail = body.get("error").cloned().unwrap_or(Value::Null);
        let code = detail
            .get("code")
            .filter(|c| !c.is_null())
            .or_else(|| detail.get("type"))
            .cloned()
            .unwrap_or(Value::Null);
        let message = detail.get("message").cloned().unwrap_or(Value::Null);
        let mut response = self.object(&id, &model, "failed", self.events.done.clone());
        response.insert("error".into(), json!({"code": code, "message": message}));
        self.events
            .event(&mut out, "response.failed", json!({"response": response}));
        Bytes::from(out)
    }

    fn keep(&self, envelope: &Envelope<'_>, completion: &types::Completion) -> Option<Kept> {
        let keep = self.keep.as_ref()?;
        let output = self.output(envelope.invocation_id, completion);
        let mut items = Vec::with_capacity(keep.input.len() + output.len());
        items.extend(keep.input.iter());
        items.extend(output.iter());
        Some(Kept {
            id: response_id(envelope.invocation_id),
            context: serde_json::to_string(&items).unwrap_or_else(|_| "[]".into()),
            parent: keep.parent.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Kind as FlowKind;

    const ID: &str = "0190b6a2-7c1e-7d2a-9b3c-0123456789ab";

    fn envelope() -> Envelope<'static> {
        Envelope {
            invocation_id: ID,
            project_id: "p",
            kind: FlowKind::Chat,
            model: "asked-model",
        }
    }

    /// `(type, data)` of every event, checking the SSE `event:` line names it and
    /// the numbering runs on from `first`.
    fn events(bytes: &[u8], first: u64) -> Vec<Value> {
        let text = std::str::from_utf8(bytes).unwrap();
        let events: Vec<Value> = text
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|event| {
                let (name, data) = event.split_once("\ndata: ").unwrap();
                let data: Value = serde_json::from_str(data).unwrap();
                assert_eq!(name.strip_prefix("event: "), data["type"].as_str());
                data
            })
            .collect();
        for (n, event) in events.iter().enumerate() {
            assert_eq!(event["sequence_number"], first + n as u64, "{event}");
        }
        events
    }

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().filter_map(|e| e["type"].as_str()).collect()
    }

    fn call_delta(
        call: u32,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) -> types::ToolCallDelta {
        types::ToolCallDelta {
            index: 0,
            call,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn streamed_calls_are_function_call_items_whose_arguments_wait_for_the_name() {
        let mut codec = ResponseAnswer::new(Map::new(), None);
        let env = envelope();
        let first = codec
            .tool_call_frame(&env, &[call_delta(0, Some("call_1"), None, "{\"ci")])
            .unwrap();
        let first = events(&first, 0);
        assert_eq!(types(&first), ["response.created", "response.in_progress"]);
        let second = codec
            .tool_call_frame(&env, &[call_delta(0, None, Some("weather"), "ty\":1}")])
            .unwrap();
        let second = events(&second, 2);
        assert_eq!(
            types(&second),
            [
                "response.output_item.added",
                "response.function_call_arguments.delta"
            ]
        );
        assert_eq!(second[0]["item"]["call_id"], "call_1");
        assert_eq!(second[0]["item"]["status"], "in_progress");
        assert_eq!(second[1]["delta"], "{\"city\":1}");
        let completion = types::Completion {
            model: "m".into(),
            choices: vec![types::Choice {
                index: 0,
                text: String::new(),
                reasoning: Vec::new(),
                finish_reason: Some(types::FinishReason::ToolCalls),
                function_call: None,
                tool_calls: vec![
                    types::ToolCall {
                        id: "call_1".into(),
                        name: "weather".into(),
                        arguments: "{\"city\":1}".into(),
                    },
                    types::ToolCall {
                        id: "call_2".into(),
                        name: "time".into(),
                        arguments: "{}".into(),
                    },
                ],
                logprobs: None,
            }],
            usage: None,
        };
        let last = codec.last_frame(&env, &completion, None);
        let last = events(&last, 4);
        assert_eq!(
            types(&last),
            [
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let output = &last[6]["response"]["output"];
        assert_eq!(output[0]["id"], second[0]["item"]["id"]);
        assert_eq!(output[0]["arguments"], "{\"city\":1}");
        assert_eq!(output[1]["call_id"], "call_2");
        assert_eq!(output[1]["status"], "completed");
        // The record and a kept response read the streamed items.
        let whole: Value =
            serde_json::from_str(&codec.completion(&env, &completion, None)).unwrap();
        assert_eq!(&whole["output"], output);
    }

    #[test]
    fn a_length_stop_is_incomplete_and_a_failure_is_response_failed() {
        let mut codec = ResponseAnswer::new(Map::new(), None);
        let env = envelope();
        let text = [types::TextDelta {
            index: 0,
            text: "Hel".into(),
        }];
        events(&codec.delta_frame(&env, &text), 0);
        let completion = types::Completion {
            model: String::new(),
            choices: vec![types::Choice {
                index: 0,
                text: "Hello".into(),
                reasoning: Vec::new(),
                finish_reason: Some(types::FinishReason::Length),
                function_call: None,
                tool_calls: Vec::new(),
                logprobs: None,
            }],
            usage: None,
        };
        let whole: Value =
            serde_json::from_str(&codec.completion(&env, &completion, None)).unwrap();
        assert_eq!(whole["status"], "incomplete");
        assert_eq!(whole["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(whole["model"], "asked-model");

        let mut failing = ResponseAnswer::new(Map::new(), None);
        events(&failing.delta_frame(&env, &text), 0);
        let id = Uuid::parse_str(ID).unwrap();
        let failed = failing.error_frame(&ApiError::Timeout("upstream".into()), &id);
        let failed = events(&failed, 5);
        let last = failed.last().unwrap();
        assert_eq!(last["type"], "response.failed");
        assert_eq!(last["response"]["status"], "failed");
        assert_eq!(last["response"]["id"], response_id(ID));
        assert!(last["response"]["error"]["message"].is_string(), "{last}");
    }
}
