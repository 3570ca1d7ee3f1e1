//! The request bodies of OpenAI's `/v1/chat/completions`, `/v1/completions`
//! and `/v1/embeddings`, and their validation into the plugin's typed request.
//!
//! A body's top-level object is read in one pass: the fields this surface
//! consumes are typed (so that a wrong type is refused naming its path, e.g.
//! `messages[1].role`), every other field is kept as it came, to go to the
//! plugin as a parameter. A field given twice is refused, at any depth a typed
//! field reaches, as the Commonbase surface does.

use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeInclusive;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::flow::Kind;
use crate::plugins::types;
use crate::surfaces::checks;
use crate::surfaces::parts::{self, ContentBody};

/// The fields of a body that the surface reads itself.
pub trait Fields: Default {
    /// Reads `key`'s value into `self` if this body consumes `key`; false
    /// leaves the value to the plugin's parameters.
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

/// A body: what the surface reads, and every other top-level field.
#[derive(Debug)]
pub struct Body<F> {
    pub fields: F,
    pub params: Map<String, Value>,
}

impl<'de, F: Fields> Deserialize<'de> for Body<F> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BodyVisitor(PhantomData))
    }
}

/// Hand-written rather than `#[serde(flatten)]` into a typed struct beside a `Map` of the
/// rest: serde buffers a flattened body into its own intermediate tree before either half
/// reads it (every message parsed twice, on every request), and that tree forgets which
/// keys came twice, which this surface refuses.
struct BodyVisitor<F>(PhantomData<F>);

impl<'de, F: Fields> Visitor<'de> for BodyVisitor<F> {
    type Value = Body<F>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Body<F>, A::Error> {
        let mut fields = F::default();
        let mut params = Map::new();
        let mut read: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if params.contains_key(&key) || read.contains(&key) {
                // Through the value, so that the error's path names the field.
                return map.next_value_seed(Duplicate(&key, PhantomData));
            }
            if fields.read(&key, &mut map)? {
                read.push(key);
            } else {
                let value: Value = map.next_value()?;
                params.insert(key, value);
            }
        }
        Ok(Body { fields, params })
    }
}

/// Refuses a field's second value.
struct Duplicate<'a, T>(&'a str, PhantomData<T>);

impl<'de, T> DeserializeSeed<'de> for Duplicate<'_, T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<T, D::Error> {
        Err(de::Error::custom(format_args!(
            "duplicate field `{}`",
            self.0
        )))
    }
}

/// Parses a JSON object body: a wrong value is refused naming its path as
/// `param`; one JSON value and nothing after it (bytes a parser would ignore
/// are a request another reader could understand differently).
pub use crate::surfaces::json::parse_object as parse_body;

/// Reads one typed field, for [`Fields::read`]: true, it was consumed.
pub fn read<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    field: &mut T,
) -> Result<bool, A::Error> {
    *field = map.next_value()?;
    Ok(true)
}

// ------------------------------------------------------------------ shared

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

/// What every completion body (chat and legacy) says about its model and
/// stream.
#[derive(Debug, Default)]
pub struct Common {
    pub model: Option<String>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
}

impl Common {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "model" => read(map, &mut self.model),
            "stream" => read(map, &mut self.stream),
            "stream_options" => read(map, &mut self.stream_options),
            // `user` stays a parameter (the plugin may pass it upstream); the
            // record's user is read from the parameters.
            _ => Ok(false),
        }
    }

    /// The checks every completion body needs before routing.
    fn check(&self) -> Result<(), ApiError> {
        require_model(&self.model)?;
        if self.stream_options.is_some() && self.stream != Some(true) {
            return Err(ApiError::invalid(
                "stream_options",
                "stream_options is only allowed when stream is true",
            ));
        }
        Ok(())
    }

    pub fn include_usage(&self) -> bool {
        self.stream == Some(true)
            && self
                .stream_options
                .as_ref()
                .and_then(|o| o.include_usage)
                .unwrap_or(false)
    }
}

/// `model` must be present and not blank.
pub fn require_model(model: &Option<String>) -> Result<&str, ApiError> {
    match model.as_deref() {
        None => Err(ApiError::invalid(
            "model",
            "you must provide a model parameter",
        )),
        Some(model) if model.trim().is_empty() => {
            Err(ApiError::invalid("model", "model must not be empty"))
        }
        Some(model) => Ok(model),
    }
}

/// The `user` parameter: the record's end user, and a parameter the plugin
/// may pass upstream.
pub fn user(params: &Map<String, Value>) -> Result<Option<&str>, ApiError> {
    match params.get("user") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(user)) => checks::user_id("user", Some(user)),
        Some(_) => Err(ApiError::invalid("user", "user must be a string")),
    }
}

/// The types and ranges OpenAI's API reference gives the parameters this surface passes
/// through to the plugin, checked here so that a bad value is a 400 naming it rather than a
/// call upstream. One pass over the parameters as they were parsed; `null` is "not given".
pub fn check_params(kind: Kind, params: &Map<String, Value>) -> Result<(), ApiError> {
    use Kind::{Chat, Embeddings, Text};
    const ANY: RangeInclusive<i64> = i64::MIN..=i64::MAX;
    const POSITIVE: RangeInclusive<i64> = 1..=i64::MAX;
    for (name, value) in params {
        if value.is_null() {
            continue;
        }
        let param = name.as_str();
        match (kind, param) {
            (Chat | Text, "n") => integer(param, value, 1..=128)?,
            (Chat, "max_tokens" | "max_completion_tokens") => integer(param, value, POSITIVE)?,
            // 0 is allowed here by OpenAI's reference: with `echo`, the prompt alone comes back.
            (Text, "max_tokens") => integer(param, value, 0..=i64::MAX)?,
            (Chat | Text, "temperature") => number(param, value, 0.0..=2.0)?,
            (Chat | Text, "top_p") => number(param, value, 0.0..=1.0)?,
            (Chat | Text, "presence_penalty" | "frequency_penalty") => {
                number(param, value, -2.0..=2.0)?
            }
            (Chat, "logprobs") => boolean(param, value)?,
            (Text, "logprobs") => integer(param, value, 0..=5)?,
            (Chat, "top_logprobs") => integer(param, value, 0..=20)?,
            (Text, "best_of") => integer(param, value, 0..=20)?,
            (Chat | Text, "seed") => integer(param, value, ANY)?,
            (Chat | Text, "stop") => stop(value)?,
            (Embeddings, "dimensions") => integer(param, value, POSITIVE)?,
            _ => {}
        }
    }
    Ok(())
}

/// The most stop sequences a request may give.
const MAX_STOP: usize = 4;

/// What a value is, for an error about its type (not the value: it may be long).
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn integer(param: &str, value: &Value, range: RangeInclusive<i64>) -> Result<(), ApiError> {
    let Some(n) = value.as_number().and_then(serde_json::Number::as_i128) else {
        return Err(ApiError::invalid(
            param,
            format!("{param} must be an integer, got {}", type_of(value)),
        ));
    };
    let (low, high) = range.into_inner();
    checks::in_range(param, n, i128::from(low)..=i128::from(high)).map(drop)
}

fn number(param: &str, value: &Value, range: RangeInclusive<f64>) -> Result<(), ApiError> {
    match value.as_f64() {
        Some(x) => checks::in_range(param, x, range).map(drop),
        None => Err(ApiError::invalid(
            param,
            format!("{param} must be a number, got {}", type_of(value)),
        )),
    }
}

fn boolean(param: &str, value: &Value) -> Result<(), ApiError> {
    if value.is_boolean() {
        return Ok(());
    }
    Err(ApiError::invalid(
        param,
        format!("{param} must be a boolean, got {}", type_of(value)),
    ))
}

/// `stop`: a string, or an array of at most [`MAX_STOP`] strings.
fn stop(value: &Value) -> Result<(), ApiError> {
    let items = match value {
        Value::String(_) => return Ok(()),
        Value::Array(items) => items,
        other => {
            return Err(ApiError::invalid(
                "stop",
                format!(
                    "stop must be a string or an array of strings, got {}",
                    type_of(other)
                ),
            ));
        }
    };
    if items.len() > MAX_STOP {
        return Err(ApiError::invalid(
            "stop",
            format!(
                "stop may hold at most {MAX_STOP} sequences, got {}",
                items.len()
            ),
        ));
    }
    match items.iter().position(|item| !item.is_string()) {
        Some(i) => Err(ApiError::invalid(
            "stop",
            format!("stop[{i}] must be a string, got {}", type_of(&items[i])),
        )),
        None => Ok(()),
    }
}

/// The plugin's parameters: what is left of the body. A `null` means "not
/// given" in OpenAI's API; plugins of other providers need not know that.
pub fn params_text(params: &Map<String, Value>) -> String {
    let kept: Map<String, Value> = params
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Value::Object(kept).to_string()
}

// -------------------------------------------------------- chat completions

/// `POST /v1/chat/completions`.
#[derive(Debug, Default)]
pub struct ChatFields {
    pub common: Common,
    pub messages: Option<Vec<MessageBody>>,
    pub tools: Option<Vec<ToolBody>>,
    pub tool_choice: Option<ToolChoice>,
    pub functions: Option<Vec<FunctionBody>>,
    pub function_call: Option<FunctionCallChoice>,
    /// Read here, not passed through: every plugin gets it as the typed
    /// `reasoning` of the request, which it maps to what its provider takes.
    pub reasoning_effort: Option<String>,
}

impl Fields for ChatFields {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "messages" => read(map, &mut self.messages),
            "tools" => read(map, &mut self.tools),
            "tool_choice" => read(map, &mut self.tool_choice),
            "functions" => read(map, &mut self.functions),
            "function_call" => read(map, &mut self.function_call),
            "reasoning_effort" => read(map, &mut self.reasoning_effort),
            _ => self.common.read(key, map),
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleBody {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
}

#[derive(Debug, Deserialize)]
pub struct MessageBody {
    pub role: RoleBody,
    #[serde(default)]
    pub content: Option<ContentBody>,
    pub name: Option<String>,
    pub tool_calls: Option<Vec<ToolCallBody>>,
    pub function_call: Option<FunctionCallBody>,
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct FunctionCallBody {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

#[derive(Debug, Deserialize)]
pub struct ToolCallBody {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub function: FunctionCallBody,
}

#[derive(Debug, Deserialize)]
pub struct FunctionBody {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub struct ToolBody {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: Option<FunctionBody>,
}

#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
)]
pub enum ToolChoice {
    Mode(String),
    Named {
        #[serde(rename = "type")]
        kind: String,
        function: Option<NamedFunction>,
    },
}

#[derive(Debug, Deserialize)]
pub struct NamedFunction {
    pub name: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "\"none\", \"auto\" or {\"name\": ...}")]
pub enum FunctionCallChoice {
    Mode(String),
    Named { name: String },
}

/// Checks of a chat body that need no config: the model, and that there is a
/// conversation.
pub fn check_chat(body: &ChatFields) -> Result<(), ApiError> {
    body.common.check()?;
    reasoning(body)?;
    match &body.messages {
        None => Err(ApiError::invalid(
            "messages",
            "you must provide a messages parameter",
        )),
        Some(messages) if messages.is_empty() => Err(ApiError::invalid(
            "messages",
            "messages must contain at least one message",
        )),
        Some(_) => Ok(()),
    }
}

/// `reasoning_effort`, as the plugin's typed reasoning.
pub fn reasoning(body: &ChatFields) -> Result<Option<types::ReasoningConfig>, ApiError> {
    effort(body.reasoning_effort.as_deref(), "reasoning_effort")
}

/// A reasoning effort the body gives at `param`, as the plugin's typed reasoning.
pub fn effort(
    effort: Option<&str>,
    param: &str,
) -> Result<Option<types::ReasoningConfig>, ApiError> {
    let Some(effort) = effort else {
        return Ok(None);
    };
    match types::ReasoningEffort::parse(effort) {
        Some(effort) => Ok(Some(types::ReasoningConfig {
            effort: Some(effort),
            budget_tokens: None,
        })),
        None => Err(ApiError::invalid(
            param,
            format!(
                "{param} must be one of \"none\", \"minimal\", \"low\", \"medium\", \"high\", \
                 \"xhigh\", got {effort:?}"
            ),
        )),
    }
}

/// The conversation, in the plugin's terms. Its texts are moved out of the body (which
/// keeps its other fields): a large conversation is never held twice.
pub fn chat_prompt(
    body: &mut ChatFields,
    max_part_bytes: usize,
) -> Result<types::Prompt, ApiError> {
    let messages = body.messages.take().unwrap_or_default();
    // Mapped in place: the parsed list's allocation becomes the prompt's.
    let mut messages = (messages.into_iter().enumerate())
        .map(|(i, message)| chat_message(i, message, max_part_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    messages.shrink_to_fit();
    Ok(types::Prompt::Chat(messages))
}

/// Message `i` of the conversation, in the plugin's terms.
fn chat_message(
    i: usize,
    message: MessageBody,
    max_part_bytes: usize,
) -> Result<types::Message, ApiError> {
    let place = || format!("messages[{i}]");
    let content = match message.content {
        Some(ContentBody::Text(text)) => Some(vec![types::Part::Text(text)]),
        Some(ContentBody::Parts(parts)) => Some(parts::read(
            parts,
            &|| format!("{}.content", place()),
            max_part_bytes,
            &mut |text, _| Ok(text),
        )?),
        None => None,
    };
    let role = match message.role {
        // OpenAI's newer name for the system prompt of reasoning models.
        RoleBody::System | RoleBody::Developer => types::Role::System,
        RoleBody::User => types::Role::User,
        RoleBody::Assistant => types::Role::Assistant,
        RoleBody::Tool => types::Role::Tool,
        RoleBody::Function => types::Role::Function,
    };
    // OpenAI's assistant and function messages may have null content.
    let needs_content = !matches!(role, types::Role::Assistant | types::Role::Function);
    if needs_content && content.is_none() {
        let place = place();
        return Err(ApiError::invalid(
            format!("{place}.content"),
            format!("{place}.content is required on this role's messages"),
        ));
    }
    if role == types::Role::Tool && message.tool_call_id.is_none() {
        return Err(ApiError::invalid(
            format!("{}.tool_call_id", place()),
            "tool messages need the tool_call_id of the call they answer",
        ));
    }
    if role == types::Role::Function && message.name.is_none() {
        return Err(ApiError::invalid(
            format!("{}.name", place()),
            "function messages need the name of the function",
        ));
    }
    let mut tool_calls = Vec::new();
    for (j, call) in message.tool_calls.into_iter().flatten().enumerate() {
        if call.kind.as_deref().is_some_and(|kind| kind != "function") {
            return Err(ApiError::invalid(
                format!("{}.tool_calls[{j}].type", place()),
                "only \"function\" tool calls are supported",
            ));
        }
        tool_calls.push(types::ToolCall {
            id: call.id,
            name: call.function.name,
            arguments: call.function.arguments,
        });
    }
    Ok(types::Message {
        role,
        parts: content.unwrap_or_default(),
        name: message.name,
        function_call: message.function_call.map(|call| types::FunctionCall {
            name: call.name,
            arguments: call.arguments,
        }),
        tool_calls,
        tool_call_id: message.tool_call_id,
        is_error: false,
    })
}

fn function_def(f: &FunctionBody, place: &str) -> Result<types::FunctionDef, ApiError> {
    if f.name.trim().is_empty() {
        return Err(ApiError::invalid(
            format!("{place}.name"),
            "a function needs a name",
        ));
    }
    if let Some(parameters) = &f.parameters
        && !parameters.is_object()
    {
        return Err(ApiError::invalid(
            format!("{place}.parameters"),
            "parameters must be a JSON Schema object",
        ));
    }
    Ok(types::FunctionDef {
        name: f.name.clone(),
        description: f.description.clone(),
        parameters: f.parameters.as_ref().map(Value::to_string),
    })
}

/// `tools` and the legacy `functions`, together.
pub fn functions(body: &ChatFields) -> Result<Vec<types::FunctionDef>, ApiError> {
    let mut out = Vec::new();
    for (i, tool) in body.tools.iter().flatten().enumerate() {
        if tool.kind != "function" {
            return Err(ApiError::invalid(
                format!("tools[{i}].type"),
                format!(
                    "tool type {:?} is not supported (only \"function\")",
                    tool.kind
                ),
            ));
        }
        let function = tool.function.as_ref().ok_or_else(|| {
            ApiError::invalid(
                format!("tools[{i}].function"),
                "a function tool needs its function",
            )
        })?;
        out.push(function_def(function, &format!("tools[{i}].function"))?);
    }
    for (i, function) in body.functions.iter().flatten().enumerate() {
        out.push(function_def(function, &format!("functions[{i}]"))?);
    }
    Ok(out)
}

fn choice_mode(mode: &str, param: &str) -> Result<types::FunctionChoice, ApiError> {
    match mode {
        "none" => Ok(types::FunctionChoice::None),
        "auto" => Ok(types::FunctionChoice::Auto),
        "required" => Ok(types::FunctionChoice::Required),
        other => Err(ApiError::invalid(
            param,
            format!("{other:?} is not one of \"none\", \"auto\", \"required\""),
        )),
    }
}

/// `tool_choice`, else the legacy `function_call`.
pub fn function_choice(body: &ChatFields) -> Result<Option<types::FunctionChoice>, ApiError> {
    match &body.tool_choice {
        Some(ToolChoice::Mode(mode)) => return choice_mode(mode, "tool_choice").map(Some),
        Some(ToolChoice::Named { kind, function }) => {
            if kind != "function" {
                return Err(ApiError::invalid(
                    "tool_choice.type",
                    format!("tool_choice type {kind:?} is not supported (only \"function\")"),
                ));
            }
            let function = function.as_ref().ok_or_else(|| {
                ApiError::invalid(
                    "tool_choice.function",
                    "tool_choice needs the function's name",
                )
            })?;
            return Ok(Some(types::FunctionChoice::Named(function.name.clone())));
        }
        None => {}
    }
    match &body.function_call {
        None => Ok(None),
        Some(FunctionCallChoice::Mode(mode)) if mode == "required" => Err(ApiError::invalid(
            "function_call",
            "\"required\" is not one of \"none\", \"auto\"",
        )),
        Some(FunctionCallChoice::Mode(mode)) => choice_mode(mode, "function_call").map(Some),
        Some(FunctionCallChoice::Named { name }) => {
            Ok(Some(types::FunctionChoice::Named(name.clone())))
        }
    }
}

/// Whether the caller speaks the legacy functions API (`functions` without
/// `tools`): its answers carry `function_call`, not `tool_calls`.
pub fn legacy_functions(body: &ChatFields) -> bool {
    body.functions.as_ref().is_some_and(|f| !f.is_empty())
        && body.tools.as_ref().is_none_or(Vec::is_empty)
}

// ------------------------------------------------------- legacy completions

/// `POST /v1/completions`.
#[derive(Debug, Default)]
pub struct TextFields {
    pub common: Common,
    pub prompt: Option<PromptBody>,
}

impl Fields for TextFields {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "prompt" => read(map, &mut self.prompt),
            _ => self.common.read(key, map),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of strings")]
pub enum PromptBody {
    One(String),
    Many(Vec<Value>),
}

pub fn check_text(body: &TextFields) -> Result<(), ApiError> {
    body.common.check()?;
    if body.prompt.is_none() {
        return Err(ApiError::invalid(
            "prompt",
            "you must provide a prompt parameter",
        ));
    }
    Ok(())
}

/// The one prompt: a string, or a list of one string (moved out of the body).
pub fn text_prompt(body: &mut TextFields) -> Result<types::Prompt, ApiError> {
    match body.prompt.take() {
        None => Err(ApiError::invalid(
            "prompt",
            "you must provide a prompt parameter",
        )),
        Some(PromptBody::One(text)) => Ok(types::Prompt::Text(text)),
        Some(PromptBody::Many(mut list)) => match list.as_mut_slice() {
            [Value::String(text)] => Ok(types::Prompt::Text(std::mem::take(text))),
            [] => Err(ApiError::invalid(
                "prompt",
                "prompt must not be an empty list",
            )),
            [_] => Err(ApiError::invalid(
                "prompt",
                "token arrays are not supported: send the prompt as text",
            )),
            _ => Err(ApiError::invalid(
                "prompt",
                "only one prompt per request is supported",
            )),
        },
    }
}

// --------------------------------------------------------------- embeddings

/// `POST /v1/embeddings`.
#[derive(Debug, Default)]
pub struct EmbeddingFields {
    pub model: Option<String>,
    pub input: Option<Value>,
    pub encoding_format: Option<EncodingFormat>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    #[default]
    Float,
    Base64,
}

impl Fields for EmbeddingFields {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "model" => read(map, &mut self.model),
            "input" => read(map, &mut self.input),
            "encoding_format" => read(map, &mut self.encoding_format),
            _ => Ok(false),
        }
    }
}

pub fn check_embeddings(body: &EmbeddingFields) -> Result<(), ApiError> {
    require_model(&body.model)?;
    if body.input.as_ref().is_none_or(Value::is_null) {
        return Err(ApiError::invalid(
            "input",
            "you must provide an input parameter",
        ));
    }
    Ok(())
}

/// The texts to embed: a string or a list of strings (moved out of the body).
pub fn embedding_input(body: &mut EmbeddingFields) -> Result<Vec<String>, ApiError> {
    let tokens = || {
        ApiError::invalid(
            "input",
            "token arrays are not supported: send the input as text",
        )
    };
    match body.input.take() {
        Some(Value::String(text)) => Ok(vec![text]),
        Some(Value::Array(list)) if list.is_empty() => Err(ApiError::invalid(
            "input",
            "input must not be an empty list",
        )),
        Some(Value::Array(list)) => list
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(text) => Ok(text),
                Value::Number(_) | Value::Array(_) => Err(tokens()),
                _ => Err(ApiError::invalid(
                    format!("input[{i}]"),
                    "input must be a string or an array of strings",
                )),
            })
            .collect(),
        _ => Err(ApiError::invalid(
            "input",
            "input must be a string or an array of strings",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(json: &str) -> Result<Body<ChatFields>, ApiError> {
        parse_body::<Body<ChatFields>>(json.as_bytes())
    }

    fn param_of(error: ApiError) -> String {
        match error {
            ApiError::InvalidParam { param, .. } => param,
            other => panic!("not an InvalidParam: {other:?}"),
        }
    }

    #[test]
    fn consumed_fields_are_typed_and_the_rest_are_params() {
        let body = chat(
            r#"{"model": "r/m", "messages": [{"role": "user", "content": "hi"}],
                "temperature": 0.5, "user": "u1", "stream": true, "stream_options": {"include_usage": true},
                "reasoning_effort": "low", "n": null}"#,
        )
        .unwrap();
        assert_eq!(body.fields.common.model.as_deref(), Some("r/m"));
        assert!(body.fields.common.include_usage());
        assert_eq!(user(&body.params).unwrap(), Some("u1"));
        assert_eq!(
            params_text(&body.params),
            r#"{"temperature":0.5,"user":"u1"}"#
        );
        assert_eq!(
            reasoning(&body.fields).unwrap(),
            Some(types::ReasoningConfig {
                effort: Some(types::ReasoningEffort::Low),
                budget_tokens: None,
            })
        );
        let body = chat(r#"{"model": "m", "messages": [], "reasoning_effort": "max"}"#).unwrap();
        assert_eq!(
            param_of(check_chat(&body.fields).unwrap_err()),
            "reasoning_effort"
        );
    }

    #[test]
    fn wrong_types_name_their_path() {
        let err = chat(r#"{"messages": [{"role": "robot", "content": "x"}]}"#).unwrap_err();
        assert_eq!(param_of(err), "messages[0].role");
        let err = chat(r#"{"model": 5}"#).unwrap_err();
        assert_eq!(param_of(err), "model");
        let err = chat(r#"{"stream": "yes"}"#).unwrap_err();
        assert_eq!(param_of(err), "stream");
    }

    #[test]
    fn duplicates_and_trailing_bytes_are_refused() {
        let err = chat(r#"{"model": "a", "model": "b"}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate field `model`"), "{err}");
        assert_eq!(param_of(err), "model");
        let err = chat(r#"{"top_p": 1, "top_p": 2}"#).unwrap_err();
        assert_eq!(param_of(err), "top_p");
        let err = chat(r#"{"messages": [{"role": "user", "role": "system", "content": "x"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("duplicate field `role`"), "{err}");
        let err = chat(r#"{"model": "a"} x"#).unwrap_err();
        assert!(err.to_string().contains("trailing characters"), "{err}");
        assert!(chat("[1]").unwrap_err().to_string().contains("JSON object"));
    }

    #[test]
    fn content_parts_are_read_and_bad_images_refused_by_place() {
        let mut body = chat(
            r#"{"model": "m", "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "u"}}]}]}"#,
        )
        .unwrap();
        let err = chat_prompt(&mut body.fields, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("must be https:"), "{err}");
        assert_eq!(param_of(err), "messages[1].content[1].image_url.url");

        let mut body = chat(
            r#"{"model": "m", "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}"#,
        )
        .unwrap();
        let types::Prompt::Chat(messages) = chat_prompt(&mut body.fields, 1 << 20).unwrap() else {
            panic!("a chat prompt");
        };
        assert_eq!(messages[0].role, types::Role::System);
        assert_eq!(
            messages[0].parts,
            [types::Part::Text("a".into()), types::Part::Text("b".into())]
        );
    }

    #[test]
    fn tools_and_legacy_functions() {
        let body = chat(
            r#"{"model": "m", "messages": [{"role": "user", "content": "x"}],
                "functions": [{"name": "f", "parameters": {"type": "object"}}], "function_call": {"name": "f"}}"#,
        )
        .unwrap();
        assert!(legacy_functions(&body.fields));
        assert_eq!(functions(&body.fields).unwrap()[0].name, "f");
        assert_eq!(
            function_choice(&body.fields).unwrap(),
            Some(types::FunctionChoice::Named("f".into()))
        );
        let body = chat(r#"{"tools": [{"type": "web_search"}]}"#).unwrap();
        assert_eq!(
            param_of(functions(&body.fields).unwrap_err()),
            "tools[0].type"
        );
        let body = chat(r#"{"tool_choice": "sometimes"}"#).unwrap();
        assert_eq!(
            param_of(function_choice(&body.fields).unwrap_err()),
            "tool_choice"
        );
    }

    #[test]
    fn legacy_prompt_and_embedding_inputs() {
        let text = |json: &str| {
            let mut body = parse_body::<Body<TextFields>>(json.as_bytes()).unwrap();
            text_prompt(&mut body.fields)
        };
        assert_eq!(
            text(r#"{"prompt": ["one"]}"#).unwrap(),
            types::Prompt::Text("one".into())
        );
        assert_eq!(
            param_of(text(r#"{"prompt": ["a", "b"]}"#).unwrap_err()),
            "prompt"
        );
        assert_eq!(
            param_of(text(r#"{"prompt": [[1, 2]]}"#).unwrap_err()),
            "prompt"
        );
        let input = |json: &str| {
            let mut body = parse_body::<Body<EmbeddingFields>>(json.as_bytes()).unwrap();
            embedding_input(&mut body.fields)
        };
        assert_eq!(input(r#"{"input": ["a", "b"]}"#).unwrap(), ["a", "b"]);
        assert!(
            input(r#"{"input": [1, 2]}"#)
                .unwrap_err()
                .to_string()
                .contains("token")
        );
        let err = parse_body::<Body<EmbeddingFields>>(br#"{"encoding_format": "hex"}"#)
            .err()
            .unwrap();
        assert_eq!(param_of(err), "encoding_format");
    }

    #[test]
    fn sampling_parameters_are_checked_by_kind() {
        let check = |kind: Kind, json: &str| {
            let body = parse_body::<Body<TextFields>>(json.as_bytes()).unwrap();
            check_params(kind, &body.params)
        };
        let fine = r#"{"n": 128, "temperature": 2, "top_p": 0, "presence_penalty": -2,
            "frequency_penalty": 1.5, "stop": ["a", "b", "c", "d"], "seed": -9223372036854775808,
            "max_completion_tokens": 1, "best_of": null, "user": "u", "reasoning_effort": "low"}"#;
        check(Kind::Chat, fine).unwrap();
        check(Kind::Chat, r#"{"logprobs": true, "top_logprobs": 20}"#).unwrap();
        check(
            Kind::Text,
            r#"{"logprobs": 5, "max_tokens": 0, "best_of": 20}"#,
        )
        .unwrap();
        // Names a kind does not document are the plugin's.
        check(Kind::Embeddings, r#"{"n": -1, "dimensions": 3}"#).unwrap();
        for (kind, json, param) in [
            (Kind::Chat, r#"{"n": 129}"#, "n"),
            (Kind::Text, r#"{"n": 0}"#, "n"),
            (Kind::Chat, r#"{"max_tokens": 0}"#, "max_tokens"),
            (Kind::Text, r#"{"max_tokens": -1}"#, "max_tokens"),
            (
                Kind::Chat,
                r#"{"max_completion_tokens": 1.0}"#,
                "max_completion_tokens",
            ),
            (Kind::Chat, r#"{"temperature": "NaN"}"#, "temperature"),
            (Kind::Text, r#"{"top_p": 1.01}"#, "top_p"),
            (
                Kind::Chat,
                r#"{"frequency_penalty": -2.5}"#,
                "frequency_penalty",
            ),
            (Kind::Chat, r#"{"logprobs": 2}"#, "logprobs"),
            (Kind::Text, r#"{"logprobs": false}"#, "logprobs"),
            (Kind::Chat, r#"{"top_logprobs": 21}"#, "top_logprobs"),
            (Kind::Text, r#"{"best_of": 21}"#, "best_of"),
            (Kind::Chat, r#"{"seed": 9223372036854775808}"#, "seed"),
            (Kind::Chat, r#"{"stop": ["a", "b", "c", "d", "e"]}"#, "stop"),
            (Kind::Text, r#"{"stop": [null]}"#, "stop"),
            (Kind::Chat, r#"{"stop": {}}"#, "stop"),
            (Kind::Embeddings, r#"{"dimensions": 0}"#, "dimensions"),
        ] {
            let err = check(kind, json).unwrap_err();
            assert_eq!(param_of(err), param, "{json}");
        }
        let err = check(Kind::Chat, r#"{"seed": "42"}"#).unwrap_err();
        assert_eq!(err.to_string(), "seed must be an integer, got a string");
        let err = check(Kind::Chat, r#"{"n": 1000000}"#).unwrap_err();
        assert_eq!(err.to_string(), "n must be at most 128, got 1000000");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any bytes in: a 4xx or a valid request, never a panic.
        #[test]
        fn any_bytes_are_a_client_error_or_a_request(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let checked = parse_body::<Body<ChatFields>>(&bytes).and_then(|mut body| {
                check_chat(&body.fields)?;
                check_params(Kind::Chat, &body.params)?;
                chat_prompt(&mut body.fields, 1 << 10)?;
                functions(&body.fields)?;
                function_choice(&body.fields)?;
                Ok(())
            });
            if let Err(e) = checked {
                proptest::prop_assert!(e.status().is_client_error(), "{e}");
            }
        }
    }
}
