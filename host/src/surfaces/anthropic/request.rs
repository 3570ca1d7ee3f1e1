//! The Messages API's request body as Anthropic's clients send it, and its
//! translation into the plugin's canonical request: `system` and content
//! blocks into chat messages, `tool_use`/`tool_result` blocks into tool calls
//! and tool messages, Anthropic's parameter names into the canonical ones.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::error::ApiError;
use crate::flow::{Kind, Target};
use crate::plugins::types;
use crate::surfaces::checks;

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
    /// Fields the surface does not read (`thinking`, `service_tier`, …): the
    /// plugin gets them as they are.
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// A body whose required fields are there.
#[derive(Debug)]
pub struct MessagesRequest {
    model: String,
    max_tokens: u64,
    messages: Vec<MessageIn>,
    body: MessagesBody,
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

fn invalid(param: impl Into<String>, message: impl Into<String>) -> ApiError {
    ApiError::InvalidParam {
        param: param.into(),
        message: message.into(),
    }
}

/// Parses a body: one JSON object and nothing after it, with `model`,
/// `max_tokens` and `messages` (Anthropic requires all three).
pub fn parse(bytes: &[u8]) -> Result<MessagesRequest, ApiError> {
    let mut body: MessagesBody = crate::surfaces::json::parse_object(bytes)?;
    let model = match body.model.take() {
        Some(model) if !model.trim().is_empty() => model,
        Some(_) => return Err(invalid("model", "model: must not be empty")),
        None => return Err(invalid("model", "model: Field required")),
    };
    let max_tokens = match body.max_tokens {
        Some(max_tokens) => checks::in_range("max_tokens", max_tokens, 1..=u64::MAX)?,
        None => return Err(invalid("max_tokens", "max_tokens: Field required")),
    };
    let messages = match body.messages.take() {
        Some(messages) if !messages.is_empty() => messages,
        Some(_) => {
            return Err(invalid(
                "messages",
                "messages: at least one message is required",
            ));
        }
        None => return Err(invalid("messages", "messages: Field required")),
    };
    let user_id = body.metadata.as_ref().and_then(|m| m.user_id.as_deref());
    checks::user_id("metadata.user_id", user_id)?;
    Ok(MessagesRequest {
        model,
        max_tokens,
        messages,
        body,
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
            kind: Kind::Chat,
            model: target.model.map(str::to_owned),
            params: Value::Object(self.params()).to_string(),
        })
    }

    fn params(&self) -> Map<String, Value> {
        let body = &self.body;
        let mut params = body.extra.clone();
        params.insert("max_tokens".into(), json!(self.max_tokens));
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

    /// The conversation: `system` first, then each message; a user
    /// message's tool results become tool messages ahead of its text.
    pub fn prompt(&self) -> Result<types::Prompt, ApiError> {
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
                RoleIn::User => user_messages(i, &m.content, &names, &mut out)?,
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
                    return Err(invalid(
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
                    return Err(invalid(
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
                    return Err(invalid(
                        "tool_choice.name",
                        "tool_choice.name: required when tool_choice.type is \"tool\"",
                    ));
                }
            },
            other => {
                return Err(invalid(
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
    block
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(place, format!("{place}.type: a content block needs a type")))
}

fn block_text<'a>(block: &'a Value, place: &str) -> Result<&'a str, ApiError> {
    block
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(place, format!("{place}.text: must be a string")))
}

fn unsupported_media(kind: &str, place: &str) -> ApiError {
    let what = if kind == "image" {
        "images"
    } else {
        "documents"
    };
    invalid(place, format!("{place}: {what} are not supported yet"))
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
                        return Err(invalid(
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

/// A user message: its `tool_result` blocks as tool messages, then its text.
fn user_messages(
    i: usize,
    content: &ContentIn,
    names: &HashMap<String, String>,
    out: &mut Vec<types::Message>,
) -> Result<(), ApiError> {
    let blocks = match content {
        ContentIn::Text(text) => {
            out.push(message(types::Role::User, Some(text.clone())));
            return Ok(());
        }
        ContentIn::Blocks(blocks) => blocks,
    };
    let mut texts = Vec::new();
    let mut results = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let place = format!("messages[{i}].content[{j}]");
        match block_type(block, &place)? {
            "text" => texts.push(block_text(block, &place)?),
            kind @ ("image" | "document") => return Err(unsupported_media(kind, &place)),
            "tool_result" => results.push(tool_result(block, &place, names)?),
            other => {
                return Err(invalid(
                    place.clone(),
                    format!("{place}.type: {other:?} is not supported in a user message"),
                ));
            }
        }
    }
    let text_too = !texts.is_empty() || results.is_empty();
    out.extend(results);
    if text_too {
        out.push(message(types::Role::User, Some(texts.join("\n"))));
    }
    Ok(())
}

/// A `tool_result` block as a tool message. The canonical message has no
/// error flag, so `is_error` is read (for its type) but not passed on: the
/// result's text is what the model reads either way.
fn tool_result(
    block: &Value,
    place: &str,
    names: &HashMap<String, String>,
) -> Result<types::Message, ApiError> {
    let id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            invalid(
                format!("{place}.tool_use_id"),
                format!("{place}.tool_use_id: required"),
            )
        })?;
    if block
        .get("is_error")
        .is_some_and(|e| !e.is_boolean() && !e.is_null())
    {
        return Err(invalid(
            format!("{place}.is_error"),
            format!("{place}.is_error: must be a boolean"),
        ));
    }
    let text = match block.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (k, inner) in blocks.iter().enumerate() {
                let place = format!("{place}.content[{k}]");
                match block_type(inner, &place)? {
                    "text" => texts.push(block_text(inner, &place)?),
                    kind @ ("image" | "document") => return Err(unsupported_media(kind, &place)),
                    other => {
                        return Err(invalid(
                            place.clone(),
                            format!("{place}.type: {other:?} is not supported in a tool result"),
                        ));
                    }
                }
            }
            texts.join("\n")
        }
        Some(_) => {
            return Err(invalid(
                format!("{place}.content"),
                format!("{place}.content: must be a string or an array of text blocks"),
            ));
        }
    };
    Ok(types::Message {
        name: names.get(id).cloned(),
        tool_call_id: Some(id.to_owned()),
        ..message(types::Role::Tool, Some(text))
    })
}

/// An assistant message: its text, and its `tool_use` blocks as tool calls.
/// Thinking blocks are the model's own notes, which no other provider reads.
fn assistant_message(
    i: usize,
    content: &ContentIn,
    names: &mut HashMap<String, String>,
) -> Result<types::Message, ApiError> {
    let blocks = match content {
        ContentIn::Text(text) => return Ok(message(types::Role::Assistant, Some(text.clone()))),
        ContentIn::Blocks(blocks) => blocks,
    };
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let place = format!("messages[{i}].content[{j}]");
        match block_type(block, &place)? {
            "text" => texts.push(block_text(block, &place)?),
            "tool_use" => {
                let field = |name: &str| {
                    block
                        .get(name)
                        .and_then(Value::as_str)
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| {
                            invalid(
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
            "thinking" | "redacted_thinking" => {}
            kind @ ("image" | "document") => return Err(unsupported_media(kind, &place)),
            other => {
                return Err(invalid(
                    place.clone(),
                    format!("{place}.type: {other:?} is not supported in an assistant message"),
                ));
            }
        }
    }
    let content = (!texts.is_empty() || calls.is_empty()).then(|| texts.join("\n"));
    Ok(types::Message {
        tool_calls: calls,
        ..message(types::Role::Assistant, content)
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
                "top_k": 5, "user": "u1", "parallel_tool_calls": false,
                "thinking": {"type": "enabled", "budget_tokens": 1024}})
        );
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
        let types::Prompt::Chat(messages) = body.prompt().unwrap() else {
            panic!("chat")
        };
        let summary: Vec<_> = messages
            .iter()
            .map(|m| {
                (
                    m.role,
                    m.text().map(|text| text.into_owned()),
                    m.tool_call_id.clone(),
                    m.name.clone(),
                )
            })
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
    }

    #[test]
    fn images_server_tools_and_bad_choices_are_refused_by_place() {
        let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}});
        let body = request(base(json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "y"},
            {"role": "user", "content": [{"type": "text", "text": "see"}, image]},
        ]})))
        .unwrap();
        let err = body.prompt().unwrap_err();
        assert!(
            err.to_string().contains("images are not supported yet"),
            "{err}"
        );
        assert_eq!(param_of(err), "messages[2].content[1]");

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
        request.prompt()?;
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
