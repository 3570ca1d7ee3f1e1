//! The Messages API's request body as Anthropic's clients send it, and its
//! translation into the plugin's canonical request: `system` and content
//! blocks into chat messages, `tool_use`/`tool_result` blocks into tool calls
//! and tool messages, Anthropic's parameter names into the canonical ones.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::error::ApiError;
use crate::flow::{Kind, Prompted, Target};
use crate::plugins::types;
use crate::surfaces::{checks, parts};

/// The body as it reads, before the required fields are checked. One struct
/// with one flattened map: a field read through a nested flatten would lose
/// its name in the error.
#[derive(Debug, Deserialize)]
pub struct MessagesBody {
    model: Option<String>,
    max_tokens: Option<u64>,
    messages: Option<Vec<MessageIn>>,
    system: Option<SystemIn>,
    tools: Option<Vec<ToolIn>>,
    tool_choice: Option<ToolChoiceIn>,
    stop_sequences: Option<Vec<String>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u64>,
    metadata: Option<MetadataIn>,
    stream: Option<bool>,
    /// Fields the surface does not read (`service_tier`, …): the plugin gets
    /// them as they are. `thinking` is read from here into the request's
    /// typed reasoning (and left here when it has a shape this surface does
    /// not know, for the plugin to read).
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// A body whose required fields are there.
#[derive(Debug)]
pub struct MessagesRequest {
    model: String,
    /// Required of a message; a token count has none.
    max_tokens: Option<u64>,
    messages: Vec<MessageIn>,
    body: MessagesBody,
    /// A message (`Kind::Chat`) or a token count of one (`Kind::CountTokens`).
    kind: Kind,
}

#[derive(Debug, Deserialize)]
struct MessageIn {
    role: RoleIn,
    content: ContentIn,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RoleIn {
    User,
    Assistant,
}

/// Content blocks stay JSON values: their types are many and growing, and
/// each one refused is named by its place (`messages[1].content[0]`).
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of content blocks")]
enum ContentIn {
    Text(String),
    Blocks(Vec<Value>),
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of text blocks")]
enum SystemIn {
    Text(String),
    Blocks(Vec<Value>),
}

#[derive(Debug, Deserialize)]
struct ToolIn {
    /// Absent or `custom` for the caller's own tools; Anthropic's server
    /// tools (`web_search_20250305`, …) name their version here.
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    description: Option<String>,
    input_schema: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ToolChoiceIn {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    disable_parallel_tool_use: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct MetadataIn {
    user_id: Option<String>,
}

/// Parses a body: one JSON object and nothing after it, with `model`,
/// `max_tokens` and `messages` (Anthropic requires all three).
pub fn parse(bytes: &[u8]) -> Result<MessagesRequest, ApiError> {
    read(bytes, Kind::Chat)
}

/// Parses a `count_tokens` body: a message's, without `max_tokens` (ignored if sent) and
/// never streamed.
pub fn parse_count(bytes: &[u8]) -> Result<MessagesRequest, ApiError> {
    read(bytes, Kind::CountTokens)
}

fn read(bytes: &[u8], kind: Kind) -> Result<MessagesRequest, ApiError> {
    let mut body: MessagesBody = crate::surfaces::json::parse_object(bytes)?;
    let model = match body.model.take() {
        Some(model) if !model.trim().is_empty() => model,
        Some(_) => return Err(ApiError::invalid("model", "model: must not be empty")),
        None => return Err(ApiError::invalid("model", "model: Field required")),
    };
    let max_tokens = match body.max_tokens {
        _ if kind == Kind::CountTokens => None,
        Some(max_tokens) => Some(checks::in_range("max_tokens", max_tokens, 1..=u64::MAX)?),
        None => {
            return Err(ApiError::invalid(
                "max_tokens",
                "max_tokens: Field required",
            ));
        }
    };
    let messages = match body.messages.take() {
        Some(messages) if !messages.is_empty() => messages,
        Some(_) => {
            return Err(ApiError::invalid(
                "messages",
                "messages: at least one message is required",
            ));
        }
        None => return Err(ApiError::invalid("messages", "messages: Field required")),
    };
    let user_id = body.metadata.as_ref().and_then(|m| m.user_id.as_deref());
    checks::user_id("metadata.user_id", user_id)?;
    if kind == Kind::CountTokens {
        body.stream = None;
    }
    Ok(MessagesRequest {
        model,
        max_tokens,
        messages,
        body,
        kind,
    })
}

impl MessagesRequest {
    /// `metadata.user_id`: the record's user.
    pub fn user_id(&self) -> Option<&str> {
        self.body.metadata.as_ref()?.user_id.as_deref()
    }

    pub fn stream(&self) -> bool {
        self.body.stream.unwrap_or(false)
    }

    /// The route and model of `model` (an alias, `ROUTE/MODEL` or a route
    /// id), and the plugin's parameters under their canonical names.
    pub fn target(&self, config: &Config) -> Result<Target, ApiError> {
        let target = config
            .model_target(&self.model)
            .ok_or_else(|| ApiError::UnknownModel(self.model.clone()))?;
        Ok(Target {
            route: target.route.to_owned(),
            kind: self.kind,
            model: target.model.map(str::to_owned),
            params: Value::Object(self.params()).to_string(),
        })
    }

    fn params(&self) -> Map<String, Value> {
        let body = &self.body;
        let mut params = body.extra.clone();
        if matches!(self.reasoning(), Ok(Some(_))) {
            params.remove("thinking");
        }
        if let Some(max_tokens) = self.max_tokens {
            params.insert("max_tokens".into(), json!(max_tokens));
        }
        if let Some(stop) = body.stop_sequences.as_ref().filter(|s| !s.is_empty()) {
            params.insert("stop".into(), json!(stop));
        }
        if let Some(temperature) = body.temperature {
            params.insert("temperature".into(), json!(temperature));
        }
        if let Some(top_p) = body.top_p {
            params.insert("top_p".into(), json!(top_p));
        }
        if let Some(top_k) = body.top_k {
            params.insert("top_k".into(), json!(top_k));
        }
        if let Some(user) = self.user_id() {
            params.insert("user".into(), json!(user));
        }
        let choice = body.tool_choice.as_ref();
        if choice.and_then(|c| c.disable_parallel_tool_use) == Some(true) {
            params.insert("parallel_tool_calls".into(), json!(false));
        }
        params
    }

    /// `thinking` as the request's reasoning: `{"type": "enabled",
    /// "budget_tokens": N}` is a budget, `{"type": "disabled"}` an effort of
    /// none; any other type is left to the plugin as a parameter.
    pub fn reasoning(&self) -> Result<Option<types::ReasoningConfig>, ApiError> {
        let Some(thinking) = self.body.extra.get("thinking").filter(|t| !t.is_null()) else {
            return Ok(None);
        };
        let kind = thinking.get("type").and_then(Value::as_str);
        match kind {
            Some("enabled") => {
                let budget = thinking.get("budget_tokens").and_then(Value::as_u64);
                let Some(budget) = budget.and_then(|b| u32::try_from(b).ok()) else {
                    return Err(ApiError::invalid(
                        "thinking.budget_tokens",
                        "thinking.budget_tokens: Field required (a positive integer)",
                    ));
                };
                Ok(Some(types::ReasoningConfig {
                    effort: None,
                    budget_tokens: Some(budget),
                }))
            }
            Some("disabled") => Ok(Some(types::ReasoningConfig {
                effort: Some(types::ReasoningEffort::None),
                budget_tokens: None,
            })),
            Some(_) => Ok(None),
            None => Err(ApiError::invalid(
                "thinking.type",
                "thinking.type: Field required (\"enabled\" or \"disabled\")",
            )),
        }
    }

    /// The prompt, tools and reasoning, in the order of the errors a caller gets.
    pub fn prompted(&self, max_part_bytes: usize) -> Result<Prompted, ApiError> {
        Ok(Prompted {
            prompt: self.prompt(max_part_bytes)?,
            functions: self.functions()?,
            function_choice: self.function_choice()?,
            reasoning: self.reasoning()?,
        })
    }

    /// The conversation: `system` first, then each message; a user
    /// message's tool results become tool messages ahead of its other
    /// content. Images and documents are decoded, each at most
    /// `max_part_bytes`.
    pub fn prompt(&self, max_part_bytes: usize) -> Result<types::Prompt, ApiError> {
        let mut out = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = &self.body.system {
            let text = system_text(system)?;
            if !text.is_empty() {
                out.push(message(types::Role::System, Some(text)));
            }
        }
        // Tool results carry only the call's id; some providers (Gemini)
        // answer a call by its function's name.
        let mut names: HashMap<String, String> = HashMap::new();
        for (i, m) in self.messages.iter().enumerate() {
            match m.role {
                RoleIn::User => user_messages(i, &m.content, &names, max_part_bytes, &mut out)?,
                RoleIn::Assistant => out.push(assistant_message(i, &m.content, &mut names)?),
            }
        }
        Ok(types::Prompt::Chat(out))
    }

    /// The caller's custom tools; Anthropic's server tools run at Anthropic
    /// and cannot be served through another provider.
    pub fn functions(&self) -> Result<Vec<types::FunctionDef>, ApiError> {
        let mut out = Vec::new();
        for (i, tool) in self.body.tools.iter().flatten().enumerate() {
            match tool.kind.as_deref() {
                None | Some("custom") => {}
                Some(other) => {
                    return Err(ApiError::invalid(
                        format!("tools[{i}].type"),
                        format!(
                            "tools[{i}].type: {other:?} is not supported: only custom tools \
                             (name, description, input_schema) can be served"
                        ),
                    ));
                }
            }
            let name = match tool.name.as_deref() {
                Some(name) if !name.trim().is_empty() => name,
                _ => {
                    return Err(ApiError::invalid(
                        format!("tools[{i}].name"),
                        format!("tools[{i}].name: a non-empty name is required"),
                    ));
                }
            };
            out.push(types::FunctionDef {
                name: name.to_owned(),
                description: tool.description.clone(),
                parameters: tool.input_schema.as_ref().map(Value::to_string),
            });
        }
        Ok(out)
    }

    pub fn function_choice(&self) -> Result<Option<types::FunctionChoice>, ApiError> {
        let Some(choice) = &self.body.tool_choice else {
            return Ok(None);
        };
        let choice = match choice.kind.as_str() {
            "auto" => types::FunctionChoice::Auto,
            "any" => types::FunctionChoice::Required,
            "none" => types::FunctionChoice::None,
            "tool" => match choice.name.as_deref() {
                Some(name) if !name.trim().is_empty() => {
                    types::FunctionChoice::Named(name.to_owned())
                }
                _ => {
                    return Err(ApiError::invalid(
                        "tool_choice.name",
                        "tool_choice.name: required when tool_choice.type is \"tool\"",
                    ));
                }
            },
            other => {
                return Err(ApiError::invalid(
                    "tool_choice.type",
                    format!(
                        "tool_choice.type: {other:?} is not one of \"auto\", \"any\", \"tool\", \"none\""
                    ),
                ));
            }
        };
        Ok(Some(choice))
    }
}

fn message(role: types::Role, content: Option<String>) -> types::Message {
    types::Message::new(role, content.map(types::Part::Text).into_iter().collect())
}

fn block_type<'a>(block: &'a Value, place: &str) -> Result<&'a str, ApiError> {
    block.get("type").and_then(Value::as_str).ok_or_else(|| {
        ApiError::invalid(place, format!("{place}.type: a content block needs a type"))
    })
}

fn block_text<'a>(block: &'a Value, place: &str) -> Result<&'a str, ApiError> {
    block
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(place, format!("{place}.text: must be a string")))
}

/// A string field of a block, or a 400 naming it.
fn required_str<'a>(block: &'a Value, field: &str, place: &str) -> Result<&'a str, ApiError> {
    block.get(field).and_then(Value::as_str).ok_or_else(|| {
        ApiError::invalid(
            format!("{place}.{field}"),
            format!("{place}.{field}: required"),
        )
    })
}

/// An `image` or `document` block as a part: a `base64` or `url` source (and
/// for documents a `text` one), with the document's `title`.
fn media_block(
    kind: &str,
    block: &Value,
    place: &str,
    max_part_bytes: usize,
) -> Result<types::Part, ApiError> {
    let place = format!("{place}.source");
    let Some(source) = block.get("source").filter(|s| s.is_object()) else {
        return Err(ApiError::invalid(
            place.clone(),
            format!("{place}: required"),
        ));
    };
    let media_type = (source.get("media_type").and_then(Value::as_str))
        .map(|media_type| media_type.trim().to_ascii_lowercase());
    let (source, media_type) = match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let data = required_str(source, "data", &place)?;
            let Some(media_type) = media_type else {
                return Err(ApiError::invalid(
                    format!("{place}.media_type"),
                    format!("{place}.media_type: required"),
                ));
            };
            let param = format!("{place}.data");
            let bytes = parts::decode_base64(data, &param, max_part_bytes)?;
            (types::Source::Bytes(bytes), Some(media_type))
        }
        Some("url") => {
            let url = required_str(source, "url", &place)?.to_owned();
            let url = parts::remote_url(url, &format!("{place}.url"))?;
            (types::Source::Url(url), media_type)
        }
        Some("text") if kind == "document" => {
            let data = required_str(source, "data", &place)?;
            if data.len() > max_part_bytes {
                return Err(ApiError::PartTooLarge {
                    param: format!("{place}.data"),
                    limit: max_part_bytes,
                });
            }
            let media_type = media_type.unwrap_or_else(|| "text/plain".to_owned());
            (
                types::Source::Bytes(data.as_bytes().to_vec()),
                Some(media_type),
            )
        }
        other => {
            return Err(ApiError::invalid(
                format!("{place}.type"),
                format!(
                    "{place}.type: {:?} is not supported (\"base64\", \"url\"{}); files of \
                     Anthropic's Files API cannot reach other providers: send the bytes",
                    other.unwrap_or(""),
                    if kind == "document" { ", \"text\"" } else { "" }
                ),
            ));
        }
    };
    Ok(if kind == "image" {
        types::Part::Image(types::Image {
            source,
            media_type,
            detail: None,
        })
    } else {
        types::Part::Document(types::Document {
            source,
            media_type,
            title: block
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    })
}

fn system_text(system: &SystemIn) -> Result<String, ApiError> {
    match system {
        SystemIn::Text(text) => Ok(text.clone()),
        SystemIn::Blocks(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.iter().enumerate() {
                let place = format!("system[{j}]");
                match block_type(block, &place)? {
                    "text" => texts.push(block_text(block, &place)?),
                    other => {
                        return Err(ApiError::invalid(
                            place.clone(),
                            format!(
                                "{place}.type: {other:?} is not supported in system (only text)"
                            ),
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
    }
}

/// A user message: its `tool_result` blocks as tool messages, then its text,
/// images and documents.
fn user_messages(
    i: usize,
    content: &ContentIn,
    names: &HashMap<String, String>,
    max_part_bytes: usize,
    out: &mut Vec<types::Message>,
) -> Result<(), ApiError> {
    let blocks = match content {
        ContentIn::Text(text) => {
            out.push(message(types::Role::User, Some(text.clone())));
            return Ok(());
        }
        ContentIn::Blocks(blocks) => blocks,
    };
    let mut content = Vec::new();
    let mut results = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let place = format!("messages[{i}].content[{j}]");
        match block_type(block, &place)? {
            "text" => content.push(types::Part::Text(block_text(block, &place)?.to_owned())),
            kind @ ("image" | "document") => {
                content.push(media_block(kind, block, &place, max_part_bytes)?)
            }
            "tool_result" => results.push(tool_result(block, &place, names, max_part_bytes)?),
            other => {
                return Err(ApiError::invalid(
                    place.clone(),
                    format!("{place}.type: {other:?} is not supported in a user message"),
                ));
            }
        }
    }
    let content_too = !content.is_empty() || results.is_empty();
    out.extend(results);
    if content.is_empty() && content_too {
        // An empty message stays one, as the caller sent it.
        content.push(types::Part::Text(String::new()));
    }
    if content_too {
        out.push(types::Message::new(types::Role::User, content));
    }
    Ok(())
}

/// A `tool_result` block as a tool message: its text, images and documents,
/// and whether the tool failed (`is_error`).
fn tool_result(
    block: &Value,
    place: &str,
    names: &HashMap<String, String>,
    max_part_bytes: usize,
) -> Result<types::Message, ApiError> {
    let id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                format!("{place}.tool_use_id"),
                format!("{place}.tool_use_id: required"),
            )
        })?;
    let is_error = match block.get("is_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(is_error)) => *is_error,
        Some(_) => {
            return Err(ApiError::invalid(
                format!("{place}.is_error"),
                format!("{place}.is_error: must be a boolean"),
            ));
        }
    };
    let content = match block.get("content") {
        None | Some(Value::Null) => vec![types::Part::Text(String::new())],
        Some(Value::String(text)) => vec![types::Part::Text(text.clone())],
        Some(Value::Array(blocks)) => {
            let mut content = Vec::with_capacity(blocks.len());
            for (k, inner) in blocks.iter().enumerate() {
                let place = format!("{place}.content[{k}]");
                match block_type(inner, &place)? {
                    "text" => {
                        content.push(types::Part::Text(block_text(inner, &place)?.to_owned()))
                    }
                    kind @ ("image" | "document") => {
                        content.push(media_block(kind, inner, &place, max_part_bytes)?)
                    }
                    other => {
                        return Err(ApiError::invalid(
                            place.clone(),
                            format!("{place}.type: {other:?} is not supported in a tool result"),
                        ));
                    }
                }
            }
            content
        }
        Some(_) => {
            return Err(ApiError::invalid(
                format!("{place}.content"),
                format!("{place}.content: must be a string or an array of content blocks"),
            ));
        }
    };
    Ok(types::Message {
        name: names.get(id).cloned(),
        tool_call_id: Some(id.to_owned()),
        is_error,
        ..types::Message::new(types::Role::Tool, content)
    })
}

/// An assistant message: its thinking (sent back first, as Anthropic wants
/// it), its text, and its `tool_use` blocks as tool calls.
fn assistant_message(
    i: usize,
    content: &ContentIn,
    names: &mut HashMap<String, String>,
) -> Result<types::Message, ApiError> {
    let blocks = match content {
        ContentIn::Text(text) => return Ok(message(types::Role::Assistant, Some(text.clone()))),
        ContentIn::Blocks(blocks) => blocks,
    };
    let mut reasoning = Vec::new();
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let place = format!("messages[{i}].content[{j}]");
        match block_type(block, &place)? {
            "text" => texts.push(types::Part::Text(block_text(block, &place)?.to_owned())),
            "thinking" => reasoning.push(types::Part::Reasoning(types::Reasoning {
                text: required_str(block, "thinking", &place)?.to_owned(),
                signature: block
                    .get("signature")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                redacted: None,
            })),
            "redacted_thinking" => reasoning.push(types::Part::Reasoning(types::Reasoning {
                redacted: Some(required_str(block, "data", &place)?.to_owned()),
                ..types::Reasoning::default()
            })),
            "tool_use" => {
                let field = |name: &str| {
                    block
                        .get(name)
                        .and_then(Value::as_str)
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| {
                            ApiError::invalid(
                                format!("{place}.{name}"),
                                format!("{place}.{name}: required"),
                            )
                        })
                };
                let (id, name) = (field("id")?, field("name")?);
                let arguments = match block.get("input") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(input) => input.to_string(),
                };
                names.insert(id.to_owned(), name.to_owned());
                calls.push(types::ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments,
                });
            }
            other => {
                return Err(ApiError::invalid(
                    place.clone(),
                    format!("{place}.type: {other:?} is not supported in an assistant message"),
                ));
            }
        }
    }
    if texts.is_empty() && calls.is_empty() {
        texts.push(types::Part::Text(String::new()));
    }
    reasoning.extend(texts);
    Ok(types::Message {
        tool_calls: calls,
        ..types::Message::new(types::Role::Assistant, reasoning)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: Value) -> Result<MessagesRequest, ApiError> {
        parse(json.to_string().as_bytes())
    }

    fn base(extra: Value) -> Value {
        let mut body = json!({
            "model": "r/m",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}],
        });
        for (key, value) in extra.as_object().into_iter().flatten() {
            body[key] = value.clone();
        }
        body
    }

    fn param_of(error: ApiError) -> String {
        match error {
            ApiError::InvalidParam { param, .. } => param,
            other => panic!("not an InvalidParam: {other:?}"),
        }
    }

    #[test]
    fn required_fields_are_named() {
        let missing = |field: &str| {
            let mut body = base(json!({}));
            body.as_object_mut().unwrap().remove(field);
            param_of(request(body).unwrap_err())
        };
        assert_eq!(missing("model"), "model");
        assert_eq!(missing("max_tokens"), "max_tokens");
        assert_eq!(missing("messages"), "messages");
        let err = request(base(json!({"max_tokens": "many"}))).unwrap_err();
        assert_eq!(param_of(err), "max_tokens");
        let err = request(base(json!({"max_tokens": 0}))).unwrap_err();
        assert_eq!(param_of(err), "max_tokens");
        let err = request(base(json!({"metadata": {"user_id": "u".repeat(257)}}))).unwrap_err();
        assert_eq!(param_of(err), "metadata.user_id");
        let err = request(base(
            json!({"messages": [{"role": "robot", "content": "x"}]}),
        ));
        assert_eq!(param_of(err.unwrap_err()), "messages[0].role");
        assert!(matches!(
            parse(b"[1]").unwrap_err(),
            ApiError::BadRequest(m) if m.contains("JSON object")
        ));
        assert!(parse(b"{\"model\": \"a\"} x").is_err());
    }

    #[test]
    fn params_take_canonical_names_and_unknown_fields_pass() {
        let body = request(base(json!({
            "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 5,
            "metadata": {"user_id": "u1"}, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
        })))
        .unwrap();
        assert_eq!(body.user_id(), Some("u1"));
        assert_eq!(
            Value::Object(body.params()),
            json!({"max_tokens": 100, "stop": ["END"], "temperature": 0.5, "top_p": 0.9,
                "top_k": 5, "user": "u1", "parallel_tool_calls": false})
        );
        assert_eq!(
            body.reasoning().unwrap(),
            Some(types::ReasoningConfig {
                effort: None,
                budget_tokens: Some(1024)
            })
        );
    }

    /// A message's text parts joined with new lines; `None` without any.
    fn texts(message: &types::Message) -> Option<String> {
        let texts: Vec<&str> = (message.parts.iter())
            .filter_map(|part| match part {
                types::Part::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        (!texts.is_empty()).then(|| texts.join("\n"))
    }

    #[test]
    fn blocks_become_messages_tool_calls_and_results() {
        let body = request(base(json!({
            "system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "b"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "q1"}, {"type": "text", "text": "q2"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "after"},
                    {"type": "tool_result", "tool_use_id": "t1", "is_error": true,
                        "content": [{"type": "text", "text": "r1"}, {"type": "text", "text": "r2"}]}]},
            ],
        })))
        .unwrap();
        let types::Prompt::Chat(messages) = body.prompt(1 << 20).unwrap() else {
            panic!("chat")
        };
        let summary: Vec<_> = messages
            .iter()
            .map(|m| (m.role, texts(m), m.tool_call_id.clone(), m.name.clone()))
            .collect();
        assert_eq!(
            summary,
            [
                (types::Role::System, Some("a\nb".into()), None, None),
                (types::Role::User, Some("q1\nq2".into()), None, None),
                (types::Role::Assistant, Some("calling".into()), None, None),
                (
                    types::Role::Tool,
                    Some("r1\nr2".into()),
                    Some("t1".into()),
                    Some("f".into())
                ),
                (types::Role::User, Some("after".into()), None, None),
            ]
        );
        assert_eq!(
            messages[2].tool_calls,
            [types::ToolCall {
                id: "t1".into(),
                name: "f".into(),
                arguments: r#"{"x":1}"#.into()
            }]
        );
        assert_eq!(
            messages[2].parts[0],
            types::Part::Reasoning(types::Reasoning {
                text: "hmm".into(),
                signature: Some("s".into()),
                redacted: None,
            })
        );
        assert!(messages[3].is_error);
        assert!(!messages[4].is_error);
    }

    #[test]
    fn unservable_sources_server_tools_and_bad_choices_are_refused_by_place() {
        let image = json!({"type": "image", "source": {"type": "file", "file_id": "file_1"}});
        let body = request(base(json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "y"},
            {"role": "user", "content": [{"type": "text", "text": "see"}, image]},
        ]})))
        .unwrap();
        let err = body.prompt(1 << 20).unwrap_err();
        assert!(err.to_string().contains("send the bytes"), "{err}");
        assert_eq!(param_of(err), "messages[2].content[1].source.type");

        let body = request(base(json!({"tools": [
            {"name": "f", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"},
        ]})))
        .unwrap();
        assert_eq!(param_of(body.functions().unwrap_err()), "tools[1].type");

        let choice = |choice: Value| {
            request(base(json!({"tool_choice": choice})))
                .unwrap()
                .function_choice()
        };
        assert_eq!(
            choice(json!({"type": "any"})).unwrap(),
            Some(types::FunctionChoice::Required)
        );
        assert_eq!(
            choice(json!({"type": "tool", "name": "f"})).unwrap(),
            Some(types::FunctionChoice::Named("f".into()))
        );
        assert_eq!(
            choice(json!({"type": "none"})).unwrap(),
            Some(types::FunctionChoice::None)
        );
        assert_eq!(
            param_of(choice(json!({"type": "tool"})).unwrap_err()),
            "tool_choice.name"
        );
        assert_eq!(
            param_of(choice(json!({"type": "some"})).unwrap_err()),
            "tool_choice.type"
        );
    }

    /// Everything a body goes through before the plugin is called.
    fn validate(bytes: &[u8]) -> Result<(), ApiError> {
        let request = parse(bytes)?;
        request.target(&Config::default())?;
        request.prompt(1 << 10)?;
        request.functions()?;
        request.function_choice()?;
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any bytes in, and request-shaped bodies with odd blocks: a 4xx or a valid
        /// request, never a panic.
        #[test]
        fn any_body_is_a_client_error_or_a_request(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            block in "\\{\"type\": \"(text|image|tool_use|tool_result|thinking|x)\"(, \"(text|id|name|tool_use_id|content|input)\": (\"a\"|5|null|\\[\\]|\\{\\}))?\\}",
            role in "(user|assistant|system)",
        ) {
            for bytes in [
                bytes,
                format!(r#"{{"model": "r/m", "max_tokens": 5, "system": [{block}],
                    "messages": [{{"role": "{role}", "content": [{block}]}}]}}"#).into_bytes(),
            ] {
                if let Err(e) = validate(&bytes) {
                    proptest::prop_assert!(e.status().is_client_error(), "{e} is not a 4xx");
                }
            }
        }
    }
}
