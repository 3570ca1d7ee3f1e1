//! Mapping between the gateway's types and Anthropic's Messages API. Everything here is pure (no
//! I/O), so it is unit-tested natively.

use gateway_plugin_sdk::{
    Choice, Completion, CompletionRequest, FinishReason, FunctionCall, FunctionChoice, FunctionDef,
    Message, Prompt, ProviderError, Role, Route, ToolCall, UpstreamError, Usage, params_object,
    settings_object,
};
use serde_json::{Map, Value, json};

use crate::wire::{
    Block, ContentBlock, ErrorBody, MessageResponse, TextBlock, Tool, WireMessage, WireUsage,
};

/// Body keys the plugin sets itself; a caller's param never overrides them.
const OWNED_KEYS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "stream",
];

/// `max_tokens` when neither the caller nor the route gives one. Anthropic requires the field;
/// 4096 is the largest value every current model accepts (Claude 3 Haiku's output limit).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The plugin's settings from the route's `[providers.ID.settings]` table. Keys it does not
/// know are ignored: the gateway passes the table on without reading it.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSettings {
    /// `max_tokens` sent when the caller gives none.
    pub default_max_tokens: u64,
}

impl Default for RouteSettings {
    fn default() -> Self {
        Self {
            default_max_tokens: DEFAULT_MAX_TOKENS,
        }
    }
}

impl RouteSettings {
    /// Reads and checks the route's settings. A wrong value is the operator's mistake, not the
    /// caller's, hence `Failed` rather than `InvalidRequest`.
    pub fn from_route(route: &Route) -> Result<Self, ProviderError> {
        let settings = settings_object(route)?;
        let default_max_tokens = match settings.get("default_max_tokens") {
            None | Some(Value::Null) => DEFAULT_MAX_TOKENS,
            Some(value) => value.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                ProviderError::Failed(format!(
                    "route `{}`: setting `default_max_tokens` must be a positive integer",
                    route.id
                ))
            })?,
        };
        Ok(Self { default_max_tokens })
    }
}

/// The route's base URL without a trailing slash.
pub fn base_url(route: &Route) -> Result<&str, ProviderError> {
    route.checked_base_url("https://api.anthropic.com/v1")
}

/// The URL of the Messages API on the route.
pub fn messages_url(route: &Route) -> Result<String, ProviderError> {
    Ok(format!("{}/messages", base_url(route)?))
}

/// The JSON body of a Messages API request.
pub fn message_body(
    request: &CompletionRequest,
    settings: &RouteSettings,
    stream: bool,
) -> Result<Map<String, Value>, ProviderError> {
    let conversation = conversation(&request.prompt)?;
    let mut body = caller_params(&request.params, settings.default_max_tokens)?;
    body.insert("model".into(), Value::String(request.model.clone()));
    if let Some(system) = conversation.system {
        body.insert("system".into(), Value::String(system));
    }
    body.insert("messages".into(), to_value(&conversation.messages)?);
    if !request.functions.is_empty() {
        body.insert("tools".into(), to_value(&tools(&request.functions)?)?);
        // Anthropic rejects `tool_choice` without `tools`, so it only travels with them.
        if let Some(choice) = &request.function_choice {
            body.insert("tool_choice".into(), tool_choice(choice));
        }
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    Ok(body)
}

/// The caller's params as the start of the body: without the keys the plugin owns, with the
/// legacy names of the Commonbase SDKs translated (the Messages API rejects unknown fields), and
/// with `max_tokens`, which Anthropic requires, always set.
pub fn caller_params(
    params: &str,
    default_max_tokens: u64,
) -> Result<Map<String, Value>, ProviderError> {
    let mut body = params_object(params)?;
    body.retain(|key, _| !OWNED_KEYS.contains(&key.as_str()));

    let legacy_max = body.remove("max_tokens_to_sample").filter(|v| !v.is_null());
    if body.get("max_tokens").is_none_or(Value::is_null) {
        let max_tokens = legacy_max.unwrap_or_else(|| json!(default_max_tokens));
        body.insert("max_tokens".into(), max_tokens);
    }

    // `stop` is OpenAI's name, `stop_sequences` Anthropic's; both may be a string or a list.
    let mut sequences: Vec<String> = Vec::new();
    for name in ["stop_sequences", "stop"] {
        match body.remove(name) {
            None | Some(Value::Null) => {}
            Some(Value::String(sequence)) => sequences.push(sequence),
            Some(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::String(sequence) => sequences.push(sequence),
                        _ => return Err(stop_error(name)),
                    }
                }
            }
            Some(_) => return Err(stop_error(name)),
        }
    }
    let mut unique: Vec<String> = Vec::with_capacity(sequences.len());
    for sequence in sequences {
        if !unique.contains(&sequence) {
            unique.push(sequence);
        }
    }
    if !unique.is_empty() {
        body.insert("stop_sequences".into(), to_value(&unique)?);
    }
    Ok(body)
}

fn stop_error(name: &str) -> ProviderError {
    ProviderError::InvalidRequest(format!("{name} must be a string or a list of strings"))
}

fn to_value<T: serde::Serialize + ?Sized>(value: &T) -> Result<Value, ProviderError> {
    serde_json::to_value(value)
        .map_err(|e| ProviderError::Failed(format!("cannot encode the upstream request: {e}")))
}

/// A prompt in the Messages API's shape: the system prompt apart, then strictly alternating
/// user and assistant messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub system: Option<String>,
    pub messages: Vec<WireMessage>,
}

/// Maps the caller's prompt: a text prompt is one user message; a chat is mapped by [`chat`].
pub fn conversation(prompt: &Prompt) -> Result<Conversation, ProviderError> {
    match prompt {
        Prompt::Text(text) => {
            let mut messages = Vec::new();
            push_blocks(&mut messages, "user", text_block(Some(text)));
            finish_conversation(None, messages)
        }
        Prompt::Chat(messages) => chat(messages),
    }
}

/// Maps a chat conversation.
///
/// - System messages, wherever they are, become the `system` field, joined with blank lines.
/// - An assistant's `tool_calls` (else its `function_call`) become `tool_use` blocks after its
///   text; calls without an id get `toolu_gw_{n}`.
/// - `tool` and `function` messages become `tool_result` blocks of a user message, answering
///   the call named by `tool_call_id`, else the latest open call of that name.
/// - Consecutive messages of one role are merged, since Anthropic requires alternation, with
///   tool results first in a user message, as Anthropic requires.
pub fn chat(messages: &[Message]) -> Result<Conversation, ProviderError> {
    let mut system: Vec<&str> = Vec::new();
    let mut out: Vec<WireMessage> = Vec::with_capacity(messages.len());
    // Calls of the latest assistant message not answered yet, in order: (name, id).
    let mut open_calls: Vec<(String, String)> = Vec::new();
    let mut synthesized = 0usize;
    for (i, message) in messages.iter().enumerate() {
        match message.role {
            Role::System => {
                if let Some(text) = message.content.as_deref().filter(|t| !t.is_empty()) {
                    system.push(text);
                }
            }
            Role::User => push_blocks(&mut out, "user", text_block(message.content.as_deref())),
            Role::Assistant => {
                let mut blocks = text_block(message.content.as_deref());
                open_calls.clear();
                for (j, call) in assistant_calls(message).into_iter().enumerate() {
                    let id = match sanitize_id(&call.id) {
                        Some(id) => id,
                        None => {
                            synthesized += 1;
                            format!("toolu_gw_{}", synthesized - 1)
                        }
                    };
                    let input = arguments_input(i, j, &call.arguments)?;
                    open_calls.push((call.name.clone(), id.clone()));
                    blocks.push(Block::ToolUse {
                        id,
                        name: call.name,
                        input,
                    });
                }
                push_blocks(&mut out, "assistant", blocks);
            }
            Role::Tool => {
                let given = message.tool_call_id.as_deref().and_then(sanitize_id);
                let id = match given {
                    Some(id) => {
                        open_calls.retain(|(_, open)| *open != id);
                        Some(id)
                    }
                    None => take_open_call(&mut open_calls, message.name.as_deref()),
                };
                let Some(id) = id else {
                    return Err(ProviderError::InvalidRequest(format!(
                        "messages[{i}]: a tool message needs tool_call_id (or the name of a call it answers)"
                    )));
                };
                push_blocks(&mut out, "user", vec![tool_result(id, &message.content)]);
            }
            Role::Function => {
                let Some(id) = take_open_call(&mut open_calls, message.name.as_deref()) else {
                    return Err(ProviderError::InvalidRequest(format!(
                        "messages[{i}]: a function message must answer a function call of the assistant message before it"
                    )));
                };
                push_blocks(&mut out, "user", vec![tool_result(id, &message.content)]);
            }
        }
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    finish_conversation(system, out)
}

fn finish_conversation(
    system: Option<String>,
    mut messages: Vec<WireMessage>,
) -> Result<Conversation, ProviderError> {
    if messages.is_empty() {
        return Err(ProviderError::InvalidRequest(
            "the prompt has no user or assistant content; Anthropic needs at least one non-empty message".into(),
        ));
    }
    for message in &mut messages {
        if message.role == "user" {
            // Stable: results keep their order, and so does the text after them.
            message
                .content
                .sort_by_key(|block| !matches!(block, Block::ToolResult { .. }));
        }
    }
    Ok(Conversation { system, messages })
}

/// Appends `blocks` to the conversation, merged into the last message when it has the same role.
/// Nothing is appended for no blocks: Anthropic rejects messages without content.
fn push_blocks(out: &mut Vec<WireMessage>, role: &'static str, blocks: Vec<Block>) {
    if blocks.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => out.push(WireMessage {
            role,
            content: blocks,
        }),
    }
}

/// A text block, or none for empty text (Anthropic rejects empty text blocks).
fn text_block(text: Option<&str>) -> Vec<Block> {
    match text {
        Some(text) if !text.is_empty() => vec![Block::Text {
            text: text.to_owned(),
        }],
        _ => Vec::new(),
    }
}

fn tool_result(tool_use_id: String, content: &Option<String>) -> Block {
    Block::ToolResult {
        tool_use_id,
        content: content
            .as_deref()
            .filter(|text| !text.is_empty())
            .map(|text| {
                vec![TextBlock {
                    kind: "text",
                    text: text.to_owned(),
                }]
            }),
    }
}

/// The calls of an assistant message: its `tool_calls`, else its `function_call`. Commonbase
/// clients echo `function_call` = the first tool call, so tool calls win when both are there.
fn assistant_calls(message: &Message) -> Vec<ToolCall> {
    if !message.tool_calls.is_empty() {
        return message.tool_calls.clone();
    }
    message
        .function_call
        .iter()
        .map(|call| ToolCall {
            id: String::new(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .collect()
}

/// A call's arguments as the `input` object of a `tool_use` block; no arguments are `{}`.
fn arguments_input(message: usize, call: usize, arguments: &str) -> Result<Value, ProviderError> {
    let arguments = arguments.trim();
    if arguments.is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(input @ Value::Object(_)) => Ok(input),
        _ => Err(ProviderError::InvalidRequest(format!(
            "messages[{message}]: the arguments of call {call} must be a JSON object, as Anthropic requires"
        ))),
    }
}

/// A call id as Anthropic accepts it (`^[a-zA-Z0-9_-]+$`): other providers' ids may hold other
/// characters, which become `_`. The same mapping applies to calls and their results, so they
/// still match. `None` for an empty id.
fn sanitize_id(id: &str) -> Option<String> {
    let id = id.trim();
    (!id.is_empty()).then(|| {
        id.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    })
}

/// Takes the first open call named `name` (any open call when the message names none).
fn take_open_call(open_calls: &mut Vec<(String, String)>, name: Option<&str>) -> Option<String> {
    let position = match name.filter(|n| !n.is_empty()) {
        Some(name) => open_calls.iter().position(|(open, _)| open == name)?,
        None if open_calls.is_empty() => return None,
        None => 0,
    };
    Some(open_calls.remove(position).1)
}

/// Maps the caller's functions to `tools`. A function without parameters takes an empty object
/// (Anthropic requires an `input_schema` of type object).
pub fn tools(functions: &[FunctionDef]) -> Result<Vec<Tool>, ProviderError> {
    functions
        .iter()
        .enumerate()
        .map(|(i, function)| {
            let input_schema = match function.parameters.as_deref().map(str::trim) {
                None | Some("") => json!({"type": "object"}),
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(mut schema)) => {
                        schema
                            .entry("type")
                            .or_insert_with(|| Value::String("object".into()));
                        Value::Object(schema)
                    }
                    Ok(_) => {
                        return Err(ProviderError::InvalidRequest(format!(
                            "functions[{i}].parameters must be a JSON Schema object"
                        )));
                    }
                    Err(e) => {
                        return Err(ProviderError::InvalidRequest(format!(
                            "functions[{i}].parameters is not valid JSON: {e}"
                        )));
                    }
                },
            };
            Ok(Tool {
                name: function.name.clone(),
                description: function.description.clone().filter(|d| !d.is_empty()),
                input_schema,
            })
        })
        .collect()
}

/// Maps a function choice to `tool_choice`.
pub fn tool_choice(choice: &FunctionChoice) -> Value {
    match choice {
        FunctionChoice::None => json!({"type": "none"}),
        FunctionChoice::Auto => json!({"type": "auto"}),
        FunctionChoice::Required => json!({"type": "any"}),
        FunctionChoice::Named(name) => json!({"type": "tool", "name": name}),
    }
}

/// Maps Anthropic's `stop_reason`.
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Maps Anthropic's usage. Its `input_tokens` excludes cached tokens, while the gateway's
/// `prompt_tokens` includes them (with the cached and cache-written parts reported apart).
pub fn usage(wire: &WireUsage) -> Usage {
    let cache_read = wire.cache_read_input_tokens;
    let cache_creation = wire.cache_creation_input_tokens;
    let prompt_tokens = wire
        .input_tokens
        .unwrap_or(0)
        .saturating_add(cache_read.unwrap_or(0))
        .saturating_add(cache_creation.unwrap_or(0));
    let completion_tokens = wire.output_tokens.unwrap_or(0);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens.saturating_add(completion_tokens),
        cached_prompt_tokens: cache_read,
        cache_creation_tokens: cache_creation,
        reasoning_tokens: None,
    }
}

/// The error for an answer the plugin cannot read. Never quotes the body: it may be huge.
pub fn malformed(error: impl std::fmt::Display) -> ProviderError {
    ProviderError::Failed(format!("malformed response from upstream: {error}"))
}

/// An error Anthropic reported inside a successful answer (an `error` event mid-stream). Its
/// status is the one Anthropic documents for the error type, so that the gateway tells rate
/// limits (429) apart; overloads are Anthropic's own 529.
pub fn embedded_error(error: &ErrorBody) -> ProviderError {
    let kind = error.kind.as_deref().unwrap_or("");
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 500,
    };
    let message = match error.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ if !kind.is_empty() => format!("the provider reported {kind}"),
        _ => "the provider reported an error without a message".to_owned(),
    };
    ProviderError::Upstream(UpstreamError {
        status,
        message,
        retry_after: None,
    })
}

/// The `arguments` text of a `tool_use` block's `input`.
pub fn input_arguments(input: &Value) -> String {
    match input {
        Value::Null => "{}".to_owned(),
        input => input.to_string(),
    }
}

/// An id for an answered call that came without one, so the caller can answer it.
pub fn answered_call_id(position: usize) -> String {
    format!("toolu_gw_{position}")
}

/// Parses a non-streamed answer of `/messages`: one choice, its text blocks concatenated, its
/// `tool_use` blocks as tool calls (and the first as `function_call`).
pub fn parse_completion(body: &[u8], requested_model: &str) -> Result<Completion, ProviderError> {
    let response: MessageResponse = serde_json::from_slice(body).map_err(malformed)?;
    if response.kind.as_deref() == Some("error") {
        return Err(embedded_error(&response.error.unwrap_or_default()));
    }
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in response.content {
        match block {
            ContentBlock::Text { text: piece } => text.push_str(&piece),
            ContentBlock::ToolUse { id, name, input } => {
                let id = if id.is_empty() {
                    answered_call_id(tool_calls.len())
                } else {
                    id
                };
                tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: input_arguments(&input),
                });
            }
            ContentBlock::Other => {}
        }
    }
    let function_call = tool_calls.first().map(|call| FunctionCall {
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    });
    Ok(Completion {
        model: response
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        choices: vec![Choice {
            index: 0,
            text,
            finish_reason: response.stop_reason.as_deref().map(finish_reason),
            function_call,
            tool_calls,
            logprobs: None,
        }],
        usage: response.usage.as_ref().map(usage),
    })
}
