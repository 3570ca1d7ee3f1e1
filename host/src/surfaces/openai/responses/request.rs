//! The body of `POST /v1/responses` and its reading into the plugin's request.
//!
//! `input` (a string, or a list of items) is kept as parsed JSON and read by
//! reference: a kept response (`store`) stores its items as the caller sent
//! them, while media is decoded once for the plugin. Items of a
//! `previous_response_id` come first, as they were stored.

use serde::Deserialize;
use serde::de::MapAccess;
use serde_json::{Map, Value, json};

use super::super::request::{self as chat, Fields, read};
use crate::error::ApiError;
use crate::plugins::types;
use crate::surfaces::parts;

/// The prefix of a reasoning item's `encrypted_content` that holds reasoning the
/// provider hid (Anthropic's `redacted_thinking`), not a signature. Signatures are
/// base64, which has no `:`.
pub const REDACTED: &str = "redacted:";

/// The fields of the body this surface reads; any other goes to the plugin,
/// under the name the chat API gives it.
#[derive(Debug, Default)]
pub struct ResponsesFields {
    pub model: Option<String>,
    pub stream: Option<bool>,
    pub input: Option<Value>,
    pub instructions: Option<String>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub max_output_tokens: Option<Value>,
    pub text: Option<TextBody>,
    pub reasoning: Option<ReasoningBody>,
    pub store: Option<bool>,
    pub previous_response_id: Option<String>,
    pub metadata: Option<Value>,
    pub safety_identifier: Option<String>,
    pub truncation: Option<String>,
    /// What this gateway does not do, refused when set (`background`, `conversation`,
    /// `prompt`), by name.
    pub refused: Vec<(&'static str, Value)>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct TextBody {
    pub format: Option<Value>,
    pub verbosity: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct ReasoningBody {
    pub effort: Option<String>,
    pub summary: Option<String>,
    /// The older name of `summary`.
    pub generate_summary: Option<String>,
}

impl Fields for ResponsesFields {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "model" => read(map, &mut self.model),
            "stream" => read(map, &mut self.stream),
            "input" => read(map, &mut self.input),
            "instructions" => read(map, &mut self.instructions),
            "tools" => read(map, &mut self.tools),
            "tool_choice" => read(map, &mut self.tool_choice),
            "max_output_tokens" => read(map, &mut self.max_output_tokens),
            "text" => read(map, &mut self.text),
            "reasoning" => read(map, &mut self.reasoning),
            "store" => read(map, &mut self.store),
            "previous_response_id" => read(map, &mut self.previous_response_id),
            "metadata" => read(map, &mut self.metadata),
            "safety_identifier" => read(map, &mut self.safety_identifier),
            "truncation" => read(map, &mut self.truncation),
            "background" | "conversation" | "prompt" => {
                let name = match key {
                    "background" => "background",
                    "conversation" => "conversation",
                    _ => "prompt",
                };
                let value: Value = map.next_value()?;
                self.refused.push((name, value));
                Ok(true)
            }
            // The answer carries every part these ask for (`include`), or they concern
            // what the gateway does not do (`max_tool_calls` limits hosted tools; the
            // stream is never obfuscated): read, and not passed on to a chat API.
            "include" | "stream_options" | "max_tool_calls" | "top_logprobs" => {
                let _: Value = map.next_value()?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The checks of a body that need no config.
pub fn check(body: &ResponsesFields, params: &Map<String, Value>) -> Result<(), ApiError> {
    chat::require_model(&body.model)?;
    for (name, value) in &body.refused {
        if !matches!(value, Value::Null | Value::Bool(false)) {
            let why = match *name {
                "background" => {
                    "background responses are not supported: the gateway answers while the request waits"
                }
                "conversation" => {
                    "conversations are not supported: continue with previous_response_id"
                }
                _ => "prompt templates are not supported: send instructions and input",
            };
            return Err(ApiError::invalid(*name, why));
        }
    }
    if body.input.as_ref().is_none_or(Value::is_null) {
        return Err(ApiError::invalid(
            "input",
            "you must provide an input parameter",
        ));
    }
    if let Some(truncation) = body.truncation.as_deref()
        && !matches!(truncation, "auto" | "disabled")
    {
        return Err(ApiError::invalid(
            "truncation",
            format!("truncation must be \"auto\" or \"disabled\", got {truncation:?}"),
        ));
    }
    if let Some(max) = &body.max_output_tokens
        && !max.is_null()
        && max.as_u64().is_none_or(|max| max == 0)
    {
        return Err(ApiError::invalid(
            "max_output_tokens",
            "max_output_tokens must be a positive integer",
        ));
    }
    if let Some(previous) = body.previous_response_id.as_deref()
        && previous.trim().is_empty()
    {
        return Err(ApiError::invalid(
            "previous_response_id",
            "previous_response_id must not be empty",
        ));
    }
    reasoning(body)?;
    response_format(body)?;
    chat::check_params(crate::flow::Kind::Chat, params)?;
    chat::user(params)?;
    if let Some(id) = body.safety_identifier.as_deref() {
        crate::surfaces::checks::user_id("safety_identifier", Some(id))?;
    }
    Ok(())
}

/// `reasoning.effort`, as the plugin's typed reasoning.
pub fn reasoning(body: &ResponsesFields) -> Result<Option<types::ReasoningConfig>, ApiError> {
    let effort = body.reasoning.as_ref().and_then(|r| r.effort.as_deref());
    chat::effort(effort, "reasoning.effort")
}

/// `text.format` as the chat API's `response_format` (`None` for plain text).
pub fn response_format(body: &ResponsesFields) -> Result<Option<Value>, ApiError> {
    let Some(format) = body.text.as_ref().and_then(|t| t.format.as_ref()) else {
        return Ok(None);
    };
    if format.is_null() {
        return Ok(None);
    }
    let kind = format.get("type").and_then(Value::as_str);
    match kind {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let Some(name) = format.get("name").and_then(Value::as_str) else {
                return Err(ApiError::invalid(
                    "text.format.name",
                    "a json_schema format needs its name",
                ));
            };
            let Some(schema) = format.get("schema").filter(|s| s.is_object()) else {
                return Err(ApiError::invalid(
                    "text.format.schema",
                    "a json_schema format needs its schema, a JSON Schema object",
                ));
            };
            let mut json_schema = Map::new();
            json_schema.insert("name".into(), json!(name));
            json_schema.insert("schema".into(), schema.clone());
            for field in ["strict", "description"] {
                if let Some(value) = format.get(field).filter(|v| !v.is_null()) {
                    json_schema.insert(field.into(), value.clone());
                }
            }
            Ok(Some(
                json!({"type": "json_schema", "json_schema": json_schema}),
            ))
        }
        _ => Err(ApiError::invalid(
            "text.format.type",
            "text.format.type must be \"text\", \"json_object\" or \"json_schema\"",
        )),
    }
}

/// The plugin's parameters: the body's other fields, with the chat API's names for
/// what the Responses API names differently.
pub fn params(body: &ResponsesFields, params: &Map<String, Value>) -> Result<String, ApiError> {
    let mut params = params.clone();
    if let Some(max) = body.max_output_tokens.as_ref().filter(|m| !m.is_null()) {
        params.insert("max_tokens".into(), max.clone());
    }
    if let Some(format) = response_format(body)? {
        params.insert("response_format".into(), format);
    }
    if let Some(verbosity) = body.text.as_ref().and_then(|t| t.verbosity.as_ref()) {
        params.insert("verbosity".into(), json!(verbosity));
    }
    Ok(chat::params_text(&params))
}

/// Hosted tools OpenAI runs itself, which no route here can.
fn hosted(kind: &str) -> String {
    format!(
        "tool type {kind:?} is a tool OpenAI hosts; the gateway serves function tools only \
         (type \"function\")"
    )
}

/// `tools`: function tools, in the plugin's terms.
pub fn functions(body: &ResponsesFields) -> Result<Vec<types::FunctionDef>, ApiError> {
    let mut out = Vec::new();
    for (i, tool) in body.tools.iter().flatten().enumerate() {
        let place = format!("tools[{i}]");
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "function" {
            return Err(ApiError::invalid(format!("{place}.type"), hosted(kind)));
        }
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
        if name.trim().is_empty() {
            return Err(ApiError::invalid(
                format!("{place}.name"),
                "a function needs a name",
            ));
        }
        let parameters = tool.get("parameters").filter(|p| !p.is_null());
        if parameters.is_some_and(|p| !p.is_object()) {
            return Err(ApiError::invalid(
                format!("{place}.parameters"),
                "parameters must be a JSON Schema object",
            ));
        }
        out.push(types::FunctionDef {
            name: name.to_owned(),
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            parameters: parameters.map(Value::to_string),
        });
    }
    Ok(out)
}

/// `tool_choice`.
pub fn function_choice(body: &ResponsesFields) -> Result<Option<types::FunctionChoice>, ApiError> {
    let Some(choice) = body.tool_choice.as_ref().filter(|c| !c.is_null()) else {
        return Ok(None);
    };
    if let Some(mode) = choice.as_str() {
        return match mode {
            "none" => Ok(Some(types::FunctionChoice::None)),
            "auto" => Ok(Some(types::FunctionChoice::Auto)),
            "required" => Ok(Some(types::FunctionChoice::Required)),
            other => Err(ApiError::invalid(
                "tool_choice",
                format!("{other:?} is not one of \"none\", \"auto\", \"required\""),
            )),
        };
    }
    match choice.get("type").and_then(Value::as_str) {
        Some("function") => match choice.get("name").and_then(Value::as_str) {
            Some(name) => Ok(Some(types::FunctionChoice::Named(name.to_owned()))),
            None => Err(ApiError::invalid(
                "tool_choice.name",
                "tool_choice needs the function's name",
            )),
        },
        Some("allowed_tools") => Err(ApiError::invalid(
            "tool_choice.type",
            "allowed_tools is not supported: send the tools the model may call",
        )),
        Some(kind) => Err(ApiError::invalid("tool_choice.type", hosted(kind))),
        None => Err(ApiError::invalid(
            "tool_choice",
            "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": ...}",
        )),
    }
}

/// `input` as a list of items: a string is one user message.
pub fn input_items(input: Value) -> Vec<Value> {
    match input {
        Value::Array(items) => items,
        Value::String(text) => vec![json!({"type": "message", "role": "user", "content": text})],
        other => vec![other],
    }
}

/// Where an item is, for errors: its place in `input`, or in the kept conversation
/// `previous_response_id` continues.
fn place(i: usize, earlier: usize) -> String {
    match i.checked_sub(earlier) {
        Some(i) => format!("input[{i}]"),
        None => format!("previous_response_id (item {i})"),
    }
}

/// The conversation, in the plugin's terms: `instructions` as the system
/// message, then the items (the first `earlier` of them from a kept response).
/// An assistant's consecutive reasoning, text and calls make one message.
pub fn prompt(
    instructions: Option<&str>,
    items: &[Value],
    earlier: usize,
    max_part_bytes: usize,
) -> Result<types::Prompt, ApiError> {
    if items.is_empty() {
        return Err(ApiError::invalid(
            "input",
            "input must hold at least one item",
        ));
    }
    let mut messages = Vec::with_capacity(items.len() + 1);
    if let Some(instructions) = instructions {
        messages.push(message(
            types::Role::System,
            vec![types::Part::Text(instructions.to_owned())],
        ));
    }
    // The assistant message being assembled from consecutive items.
    let mut assistant: Option<types::Message> = None;
    for (i, item) in items.iter().enumerate() {
        let place = || place(i, earlier);
        let field = |name: &str| format!("{}.{name}", place());
        if !item.is_object() {
            return Err(ApiError::invalid(
                place(),
                "an input item must be an object",
            ));
        }
        // An item without `type` with a `role` is a message (the "easy input message").
        let kind = match item.get("type").and_then(Value::as_str) {
            Some(kind) => kind,
            None if item.get("role").is_some() => "message",
            None => {
                return Err(ApiError::invalid(
                    field("type"),
                    "an input item needs its type",
                ));
            }
        };
        let text = |name: &str| -> Result<String, ApiError> {
            match item.get(name).and_then(Value::as_str) {
                Some(text) => Ok(text.to_owned()),
                None => Err(ApiError::invalid(
                    field(name),
                    format!("a {kind} item needs {name}, a string"),
                )),
            }
        };
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("");
                let role = match role {
                    "user" => types::Role::User,
                    "system" | "developer" => types::Role::System,
                    "assistant" => types::Role::Assistant,
                    other => {
                        return Err(ApiError::invalid(
                            field("role"),
                            format!(
                                "role {other:?} is not one of \"user\", \"assistant\", \
                                 \"system\", \"developer\""
                            ),
                        ));
                    }
                };
                let content = item.get("content").unwrap_or(&Value::Null);
                let parts = content_parts(content, &field("content"), max_part_bytes)?;
                if role == types::Role::Assistant {
                    let open = assistant
                        .get_or_insert_with(|| message(types::Role::Assistant, Vec::new()));
                    if !open.tool_calls.is_empty() {
                        // Text after calls starts the next turn's message.
                        messages.extend(assistant.take());
                        assistant = Some(message(types::Role::Assistant, parts));
                    } else {
                        open.parts.extend(parts);
                    }
                } else {
                    messages.extend(assistant.take());
                    messages.push(message(role, parts));
                }
            }
            "reasoning" => {
                let reasoning = reasoning_item(item, &place())?;
                let open =
                    assistant.get_or_insert_with(|| message(types::Role::Assistant, Vec::new()));
                open.parts.push(types::Part::Reasoning(reasoning));
            }
            "function_call" => {
                let call = types::ToolCall {
                    id: text("call_id")?,
                    name: text("name")?,
                    arguments: item
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                };
                assistant
                    .get_or_insert_with(|| message(types::Role::Assistant, Vec::new()))
                    .tool_calls
                    .push(call);
            }
            "function_call_output" => {
                messages.extend(assistant.take());
                let call_id = text("call_id")?;
                let output = item.get("output").unwrap_or(&Value::Null);
                let parts = content_parts(output, &field("output"), max_part_bytes)?;
                let mut answer = message(types::Role::Tool, parts);
                answer.tool_call_id = Some(call_id);
                messages.push(answer);
            }
            "item_reference" => {
                return Err(ApiError::invalid(
                    field("type"),
                    "item_reference is not supported: send the item itself, or continue \
                     with previous_response_id",
                ));
            }
            other => {
                return Err(ApiError::invalid(
                    field("type"),
                    format!(
                        "input item type {other:?} is not supported (\"message\", \
                         \"function_call\", \"function_call_output\", \"reasoning\"); hosted \
                         tools' items are OpenAI's own"
                    ),
                ));
            }
        }
    }
    messages.extend(assistant);
    Ok(types::Prompt::Chat(messages))
}

fn message(role: types::Role, parts: Vec<types::Part>) -> types::Message {
    types::Message {
        role,
        parts,
        name: None,
        function_call: None,
        tool_calls: Vec::new(),
        tool_call_id: None,
        is_error: false,
    }
}

/// A `reasoning` item: its summary's (else its content's) text, and its
/// `encrypted_content`, a signature or hidden reasoning ([`REDACTED`]).
fn reasoning_item(item: &Value, place: &str) -> Result<types::Reasoning, ApiError> {
    let texts = |name: &str| -> Vec<&str> {
        (item
            .get(name)
            .and_then(Value::as_array)
            .into_iter()
            .flatten())
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect()
    };
    let mut text = texts("summary");
    if text.is_empty() {
        text = texts("content");
    }
    let encrypted = match item.get("encrypted_content") {
        None | Some(Value::Null) => None,
        Some(Value::String(encrypted)) => Some(encrypted.as_str()),
        Some(_) => {
            return Err(ApiError::invalid(
                format!("{place}.encrypted_content"),
                "encrypted_content must be a string",
            ));
        }
    };
    let (signature, redacted) = match encrypted {
        Some(data) if data.starts_with(REDACTED) => (None, Some(data[REDACTED.len()..].to_owned())),
        Some(signature) => (Some(signature.to_owned()), None),
        None => (None, None),
    };
    Ok(types::Reasoning {
        text: text.join("\n\n"),
        signature,
        redacted,
    })
}

/// A message's `content` or a call output's `output`: a string, or a list of parts.
fn content_parts(
    content: &Value,
    place: &str,
    max_part_bytes: usize,
) -> Result<Vec<types::Part>, ApiError> {
    let parts = match content {
        Value::String(text) => return Ok(vec![types::Part::Text(text.clone())]),
        Value::Array(parts) => parts,
        _ => {
            return Err(ApiError::invalid(
                place,
                format!("{place} must be a string or an array of content parts"),
            ));
        }
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let place = format!("{place}[{j}]");
        let string = |name: &str| part.get(name).and_then(Value::as_str);
        let kind = string("type").unwrap_or("");
        let missing = |name: &str| {
            ApiError::invalid(
                format!("{place}.{name}"),
                format!("a {kind} part needs {name}"),
            )
        };
        out.push(match kind {
            "input_text" | "output_text" | "text" | "summary_text" | "reasoning_text" => {
                types::Part::Text(string("text").ok_or_else(|| missing("text"))?.to_owned())
            }
            "refusal" => types::Part::Text(
                string("refusal")
                    .ok_or_else(|| missing("refusal"))?
                    .to_owned(),
            ),
            "input_image" => {
                let param = format!("{place}.image_url");
                let Some(url) = string("image_url") else {
                    let why = match string("file_id") {
                        Some(_) => "file_id is not supported (the gateway keeps no files): send image_url",
                        None => "an input_image part needs image_url",
                    };
                    return Err(ApiError::invalid(param, why));
                };
                let (source, media_type) = match parts::data_url(url, &param, max_part_bytes)? {
                    Some((media_type, bytes)) => (types::Source::Bytes(bytes), Some(media_type)),
                    None => (
                        types::Source::Url(parts::remote_url(url.to_owned(), &param)?),
                        None,
                    ),
                };
                types::Part::Image(types::Image {
                    source,
                    media_type,
                    detail: string("detail").filter(|d| *d != "auto").map(str::to_owned),
                })
            }
            "input_file" => {
                let title = string("filename").map(str::to_owned);
                if let Some(data) = string("file_data") {
                    let param = format!("{place}.file_data");
                    let (media_type, bytes) = match parts::data_url(data, &param, max_part_bytes)? {
                        Some(decoded) => decoded,
                        // Bare base64 is taken as a PDF, as on the chat API.
                        None => (
                            "application/pdf".to_owned(),
                            parts::decode_base64(data, &param, max_part_bytes)?,
                        ),
                    };
                    types::Part::Document(types::Document {
                        source: types::Source::Bytes(bytes),
                        media_type: Some(media_type),
                        title,
                    })
                } else if let Some(url) = string("file_url") {
                    let param = format!("{place}.file_url");
                    types::Part::Document(types::Document {
                        source: types::Source::Url(parts::remote_url(url.to_owned(), &param)?),
                        media_type: None,
                        title,
                    })
                } else {
                    let why = match string("file_id") {
                        Some(_) => {
                            "file_id is not supported (the gateway keeps no files): send file_data or file_url"
                        }
                        None => "an input_file part needs file_data or file_url",
                    };
                    return Err(ApiError::invalid(format!("{place}.file_data"), why));
                }
            }
            "input_audio" => {
                let audio = part.get("input_audio");
                let field = |name: &str| audio.and_then(|a| a.get(name)).and_then(Value::as_str);
                let param = format!("{place}.input_audio.data");
                let (Some(data), Some(format)) = (field("data"), field("format")) else {
                    return Err(ApiError::invalid(
                        format!("{place}.input_audio"),
                        "an input_audio part needs input_audio.data and input_audio.format",
                    ));
                };
                types::Part::Audio(types::Audio {
                    data: parts::decode_base64(data, &param, max_part_bytes)?,
                    format: format.to_ascii_lowercase(),
                })
            }
            other => {
                return Err(ApiError::invalid(
                    format!("{place}.type"),
                    format!(
                        "content part type {other:?} is not supported (\"input_text\", \
                         \"input_image\", \"input_file\", \"input_audio\", \"output_text\", \
                         \"refusal\")"
                    ),
                ));
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(items: Value) -> Result<Vec<types::Message>, ApiError> {
        let items = input_items(items);
        match prompt(Some("be brief"), &items, 0, 1 << 20)? {
            types::Prompt::Chat(messages) => Ok(messages),
            types::Prompt::Text(_) => unreachable!(),
        }
    }

    fn param_of(error: ApiError) -> String {
        match error {
            ApiError::InvalidParam { param, .. } | ApiError::PartTooLarge { param, .. } => param,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_string_is_one_user_message_after_the_instructions() {
        let messages = chat(json!("hi")).unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].role, types::Role::System);
        assert_eq!(messages[0].parts, [types::Part::Text("be brief".into())]);
        assert_eq!(messages[1].role, types::Role::User);
        assert_eq!(messages[1].parts, [types::Part::Text("hi".into())]);
    }

    #[test]
    fn an_assistant_turn_is_one_message_and_outputs_answer_their_calls() {
        let messages = chat(json!([
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"},
                {"type": "input_image", "image_url": "data:image/png;base64,aGkh", "detail": "low"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}],
                "encrypted_content": "c2ln"},
            {"type": "function_call", "call_id": "call_1", "name": "get", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
            {"type": "reasoning", "summary": [], "encrypted_content": "redacted:abc"},
        ]))
        .unwrap();
        assert_eq!(messages.len(), 5);
        assert_eq!(
            messages[1].parts[1],
            types::Part::Image(types::Image {
                source: types::Source::Bytes(b"hi!".to_vec()),
                media_type: Some("image/png".into()),
                detail: Some("low".into()),
            })
        );
        let turn = &messages[2];
        assert_eq!(turn.role, types::Role::Assistant);
        assert_eq!(
            turn.parts,
            [types::Part::Reasoning(types::Reasoning {
                text: "think".into(),
                signature: Some("c2ln".into()),
                redacted: None,
            })]
        );
        assert_eq!(turn.tool_calls[0].id, "call_1");
        assert_eq!(messages[3].role, types::Role::Tool);
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(messages[4].parts[0], types::Part::Text("Sunny.".into()));
        assert_eq!(
            messages[4].parts[1],
            types::Part::Reasoning(types::Reasoning {
                text: String::new(),
                signature: None,
                redacted: Some("abc".into()),
            })
        );
    }

    #[test]
    fn bad_items_are_refused_by_their_place() {
        let cases = [
            (
                json!([{"type": "web_search_call", "id": "ws_1"}]),
                "input[0].type",
            ),
            (
                json!([{"type": "item_reference", "id": "msg_1"}]),
                "input[0].type",
            ),
            (json!([{"role": "robot", "content": "x"}]), "input[0].role"),
            (json!([{"role": "user", "content": 3}]), "input[0].content"),
            (
                json!([{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]),
                "input[0].content[0].image_url",
            ),
            (
                json!([{"role": "user", "content": "a"}, {"type": "function_call", "name": "f"}]),
                "input[1].call_id",
            ),
            (json!([]), "input"),
        ];
        for (items, param) in cases {
            assert_eq!(param_of(chat(items.clone()).unwrap_err()), param, "{items}");
        }
    }

    #[test]
    fn hosted_tools_are_refused_naming_them() {
        let fields = ResponsesFields {
            tools: Some(vec![
                json!({"type": "function", "name": "f", "parameters": {"type": "object"}}),
                json!({"type": "web_search_preview"}),
            ]),
            ..Default::default()
        };
        let error = functions(&fields).unwrap_err();
        assert!(error.message().contains("web_search_preview"));
        assert_eq!(param_of(error), "tools[1].type");
        let fields = ResponsesFields {
            tool_choice: Some(json!({"type": "file_search"})),
            ..Default::default()
        };
        assert!(
            function_choice(&fields)
                .unwrap_err()
                .message()
                .contains("file_search")
        );
    }

    #[test]
    fn a_json_schema_format_is_the_chat_apis_response_format() {
        let fields = ResponsesFields {
            text: Some(TextBody {
                format: Some(json!({"type": "json_schema", "name": "w", "strict": true,
                    "schema": {"type": "object"}})),
                verbosity: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            response_format(&fields).unwrap(),
            Some(
                json!({"type": "json_schema", "json_schema": {"name": "w", "strict": true,
                "schema": {"type": "object"}}})
            )
        );
    }
}
