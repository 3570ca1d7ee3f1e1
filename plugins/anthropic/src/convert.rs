//! Mapping the gateway's requests to Anthropic's Messages API. Everything but sending is pure (no
//! I/O), so it is unit-tested natively.

use std::borrow::Cow;
use std::num::NonZeroU64;

use gateway_plugin_sdk::blocks::{
    MIN_THINKING_BUDGET, Thinking, ToolCalls, finish_turns, push_blocks,
};
use gateway_plugin_sdk::http::{KeyIn, Request};
use gateway_plugin_sdk::json::{to_value, with_entry};
use gateway_plugin_sdk::output::{OutputFields, fit_thinking_budget};
use gateway_plugin_sdk::{
    Base64, CompletionRequest, Document, FunctionChoice, FunctionDef, Image, Message, Part, Prompt,
    ProviderError, Reasoning, ReasoningConfig, Role, Route, Source, params_object_except,
    take_default_only_params, take_stop_sequences,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::wire::{Block, MediaSource, Tool, WireMessage};

/// The Messages API version the plugin speaks (sent as `anthropic-version`).
const ANTHROPIC_VERSION: &str = "2023-06-01";

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

/// The plugin's settings from the route's `[providers.ID.settings]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `max_tokens` sent when the caller gives none ([`DEFAULT_MAX_TOKENS`] when unset).
    pub default_max_tokens: Option<NonZeroU64>,
}

impl Settings {
    fn max_tokens(&self) -> u64 {
        self.default_max_tokens
            .map_or(DEFAULT_MAX_TOKENS, NonZeroU64::get)
    }
}

/// The HTTP request to the Messages API for `request`, carrying the route's key in `x-api-key`.
/// Without a key Anthropic answers 401, which the caller then sees; a keyless proxy in front of
/// it may not need one.
pub fn upstream_request(
    request: &CompletionRequest,
    stream: bool,
) -> Result<Request, ProviderError> {
    let settings = request.route.settings::<Settings>()?;
    let http = Request::post(messages_url(&request.route)?)
        .streaming(stream)
        .header("anthropic-version", ANTHROPIC_VERSION)
        .api_key(request.route.api_key.as_deref(), KeyIn::Header("x-api-key"));
    with_body(http, request, &settings, stream, |_| {})
}

/// `http` with the Messages API body of `request` as JSON, `adjust` applied to the body's
/// fields before the messages are written into it: Claude on Vertex AI takes the same body but
/// for the model (in its URL) and the API version (in the body).
pub fn with_body(
    http: Request,
    request: &CompletionRequest,
    settings: &Settings,
    stream: bool,
    adjust: impl FnOnce(&mut Map<String, Value>),
) -> Result<Request, ProviderError> {
    let (mut body, messages) = body_and_messages(request, settings, stream)?;
    adjust(&mut body);
    // The conversation is written into the body as it is serialized, not turned into a tree
    // of JSON values first (which would cost many times its text).
    let size = request.params.len() + 256 + request.prompt.json_size_hint();
    http.json_sized(&with_entry(&body, "messages", &messages), size)
}

/// What `POST /messages/count_tokens` takes of a Messages body: it refuses the rest
/// (`max_tokens`, `stream`, sampling, `metadata`), which sizes or shapes an answer it never
/// writes.
const COUNT_KEYS: &[&str] = &[
    "model",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "mcp_servers",
];

/// The token count of `request`'s prompt, asked of Anthropic (`POST /messages/count_tokens`):
/// the Messages body it would be sent as, less what only an answer needs.
pub fn count_request(request: &CompletionRequest) -> Result<Request, ProviderError> {
    let settings = request.route.settings::<Settings>()?;
    let http = Request::post(format!("{}/count_tokens", messages_url(&request.route)?))
        .header("anthropic-version", ANTHROPIC_VERSION)
        .api_key(request.route.api_key.as_deref(), KeyIn::Header("x-api-key"));
    let (mut body, messages) = body_and_messages(request, &settings, false)?;
    body.retain(|key, _| COUNT_KEYS.contains(&key.as_str()));
    let size = request.params.len() + 256 + request.prompt.json_size_hint();
    http.json_sized(&with_entry(&body, "messages", &messages), size)
}

/// The URL of the Messages API on the route (whose base URL loses a trailing slash).
pub fn messages_url(route: &Route) -> Result<String, ProviderError> {
    let base = route.checked_base_url("https://api.anthropic.com/v1")?;
    Ok(format!("{base}/messages"))
}

/// The JSON body of a Messages API request, as a map (for tests: [`upstream_request`] writes
/// the messages into the body without building their tree of values).
#[cfg(test)]
pub fn message_body(
    request: &CompletionRequest,
    settings: &Settings,
    stream: bool,
) -> Result<Map<String, Value>, ProviderError> {
    let (mut body, messages) = body_and_messages(request, settings, stream)?;
    body.insert("messages".into(), to_value(&messages)?);
    Ok(body)
}

/// The body of a Messages API request without its `messages`, and those messages (borrowing the
/// request's media).
fn body_and_messages<'a>(
    request: &'a CompletionRequest,
    settings: &Settings,
    stream: bool,
) -> Result<(Map<String, Value>, Vec<WireMessage<'a>>), ProviderError> {
    let conversation = conversation(&request.prompt)?;
    let params = caller_params(&request.params, &request.route.id, settings.max_tokens())?;
    let mut body = params.body;
    body.insert("model".into(), Value::String(request.model.clone()));
    if let Some(system) = conversation.system {
        body.insert("system".into(), Value::String(system));
    }
    if !request.functions.is_empty() {
        body.insert("tools".into(), to_value(&tools(&request.functions)?)?);
        // Anthropic rejects `tool_choice` without `tools`, so it only travels with them; so does
        // the switch to one call per answer, which is a field of `tool_choice`.
        let choice = match (&request.function_choice, params.one_tool_call) {
            (Some(choice), one) => Some(single_call(tool_choice(choice), one)),
            (None, true) => Some(single_call(tool_choice(&FunctionChoice::Auto), true)),
            (None, false) => None,
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(reasoning) = &request.reasoning {
        thinking(&mut body, reasoning, settings.max_tokens());
    }
    if let Some(max) = request.output.max_tokens {
        output_limit(&mut body, max, &request.route.id)?;
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    Ok((body, conversation.messages))
}

/// Where a Messages API body says how long the answer may be (one choice only).
pub const OUTPUT: OutputFields = OutputFields {
    max_tokens: &[&["max_tokens"]],
    choices: &[],
};

/// Writes the host's output limit, `max`, as `max_tokens` (over the caller's, its aliases', and
/// the room [`thinking`] added), and fits a thinking budget inside it: Anthropic counts thinking
/// in `max_tokens` and wants the budget below it, so a budget that does not fit becomes half the
/// limit (at least [`MIN_THINKING_BUDGET`]); a limit with no room for that is refused.
fn output_limit(body: &mut Map<String, Value>, max: u32, route: &str) -> Result<(), ProviderError> {
    body.insert("max_tokens".into(), json!(max));
    fit_thinking_budget(body, max, MIN_THINKING_BUDGET, route)
}

/// Sets `thinking` from the caller's reasoning config (replacing a `thinking` of the params):
///
/// - effort `none` asks for no thinking, whatever the budget: `thinking` is left out (Anthropic's
///   default, which every model accepts, unlike `{"type": "disabled"}` on models without
///   extended thinking);
/// - else `{"type": "enabled", "budget_tokens": N}`, N being the budget when given, else the
///   effort's, at least [`MIN_THINKING_BUDGET`] ([`Thinking::of`]); a config with neither leaves
///   the body as it is;
/// - Anthropic wants `budget_tokens` below `max_tokens`: a numeric `max_tokens` not above the
///   budget becomes the budget plus `default_max_tokens` (the answer keeps the room it would
///   have had without thinking).
fn thinking(body: &mut Map<String, Value>, reasoning: &ReasoningConfig, default_max_tokens: u64) {
    let budget = match Thinking::of(reasoning) {
        None => return,
        Some(Thinking::Off) => {
            body.remove("thinking");
            return;
        }
        Some(Thinking::Budget(budget)) => budget,
    };
    body.insert("thinking".into(), Thinking::enabled(budget));
    if let Some(max_tokens) = body.get("max_tokens").and_then(Value::as_u64)
        && max_tokens <= u64::from(budget)
    {
        let raised = u64::from(budget).saturating_add(default_max_tokens);
        body.insert("max_tokens".into(), json!(raised));
    }
}

/// `tool_choice` limited to one tool call per answer when `one` is set. A choice of `none` has
/// no such field (and calls no tool anyway).
fn single_call(mut choice: Value, one: bool) -> Value {
    if let Some(fields) = choice.as_object_mut().filter(|_| one)
        && fields.get("type").and_then(Value::as_str) != Some("none")
    {
        fields.insert("disable_parallel_tool_use".into(), Value::Bool(true));
    }
    choice
}

/// The caller's params mapped for the Messages API: the start of the body, and what they ask of
/// the fields the plugin owns.
#[derive(Debug, Clone, PartialEq)]
pub struct CallerParams {
    pub body: Map<String, Value>,
    /// `parallel_tool_calls: false`: at most one tool call per answer, which Anthropic expresses
    /// as `tool_choice.disable_parallel_tool_use`.
    pub one_tool_call: bool,
}

/// Maps the caller's params, named as OpenAI names them, to the start of a Messages API body.
///
/// Anthropic answers 400 for a field it does not know, which the gateway could only report as
/// an upstream failure; so every OpenAI param is translated, dropped when leaving it out changes
/// nothing, or refused ([`ProviderError::InvalidRequest`] naming the route and the param) when
/// Anthropic cannot do what it asks:
/// - `max_tokens` (required by Anthropic) is `max_tokens`, else `max_completion_tokens`, else
///   the legacy `max_tokens_to_sample`, else `default_max_tokens`;
/// - `stop` and `stop_sequences` (a string or a list) are merged into `stop_sequences`;
/// - `user` becomes `metadata.user_id` unless the params already have one;
/// - `parallel_tool_calls: false` becomes `tool_choice.disable_parallel_tool_use` (see
///   [`CallerParams::one_tool_call`]);
/// - dropped: `seed` (best-effort in OpenAI too: a seed never guarantees the same answer, so an
///   upstream without seeds breaks no promise), `stream_options` (the plugin owns streaming),
///   and the values that ask for the default: `n: 1`, `response_format: {"type": "text"}`,
///   `presence_penalty`/`frequency_penalty: 0`, `logprobs: false`, `top_logprobs: 0`,
///   `logit_bias: {}`, `parallel_tool_calls: true`, and `null` for any of them;
/// - refused: any other value of those (several choices, JSON mode, penalties, logprobs, logit
///   bias), which the Messages API has no field for;
/// - everything else (`temperature`, `top_p`, `top_k`, `metadata`, `thinking`, `service_tier`,
///   fields added later) passes as it is, except the keys the plugin sets itself.
pub fn caller_params(
    params: &str,
    route: &str,
    default_max_tokens: u64,
) -> Result<CallerParams, ProviderError> {
    let mut body = params_object_except(params, OWNED_KEYS)?;

    let max_completion = body
        .remove("max_completion_tokens")
        .filter(|v| !v.is_null());
    let legacy_max = body.remove("max_tokens_to_sample").filter(|v| !v.is_null());
    if body.get("max_tokens").is_none_or(Value::is_null) {
        let max_tokens = max_completion
            .or(legacy_max)
            .unwrap_or_else(|| json!(default_max_tokens));
        body.insert("max_tokens".into(), max_tokens);
    }

    // `stop` is OpenAI's name, `stop_sequences` Anthropic's; both may be a string or a list.
    let sequences = take_stop_sequences(&mut body, route)?;
    if !sequences.is_empty() {
        body.insert("stop_sequences".into(), Value::Array(sequences));
    }

    for dropped in ["seed", "stream_options"] {
        body.remove(dropped);
    }
    take_default_only_params(&mut body, route, "Anthropic's Messages API")?;

    let one_tool_call = match body.remove("parallel_tool_calls") {
        None | Some(Value::Null | Value::Bool(true)) => false,
        Some(Value::Bool(false)) => true,
        Some(other) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: parallel_tool_calls must be true or false, not {other}"
            )));
        }
    };

    match body.remove("user") {
        None | Some(Value::Null) => {}
        Some(Value::String(user)) => set_user_id(&mut body, user),
        Some(other) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: user must be a string, not {other}"
            )));
        }
    }
    Ok(CallerParams {
        body,
        one_tool_call,
    })
}

/// Puts OpenAI's `user` where Anthropic keeps it, `metadata.user_id`, unless the caller's
/// `metadata` already names a user (Anthropic's own field is the more specific ask). A
/// `metadata` that is no object is left for Anthropic to refuse.
fn set_user_id(body: &mut Map<String, Value>, user: String) {
    if user.is_empty() {
        return;
    }
    let metadata = body
        .entry("metadata")
        .and_modify(|m| {
            if m.is_null() {
                *m = Value::Object(Map::new());
            }
        })
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(metadata) = metadata.as_object_mut()
        && metadata.get("user_id").is_none_or(Value::is_null)
    {
        metadata.insert("user_id".into(), Value::String(user));
    }
}

/// A prompt in the Messages API's shape: the system prompt apart, then strictly alternating
/// user and assistant messages (borrowing the prompt's media).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation<'a> {
    pub system: Option<String>,
    pub messages: Vec<WireMessage<'a>>,
}

/// Maps the caller's prompt: a text prompt is one user message; a chat is mapped by [`chat`].
pub fn conversation(prompt: &Prompt) -> Result<Conversation<'_>, ProviderError> {
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
/// - System messages, wherever they are, become the `system` field (their text parts joined
///   with blank lines); an image, audio or document on one is refused, as `system` takes only
///   text, and reasoning on one is dropped.
/// - User messages' parts become blocks in order ([`user_blocks`]); reasoning on them is
///   dropped.
/// - An assistant's reasoning parts become `thinking` / `redacted_thinking` blocks first
///   ([`thinking_block`]), then its text, then its `tool_calls` (else its `function_call`) as
///   `tool_use` blocks; calls without an id get `toolu_gw_{n}`. Media on an assistant message is
///   refused: Anthropic takes none there.
/// - `tool` and `function` messages become `tool_result` blocks of a user message, answering
///   the call named by `tool_call_id`, else the latest open call of that name, with their
///   parts as content ([`tool_result`]) and `is_error` when the tool failed.
/// - Consecutive messages of one role are merged, since Anthropic requires alternation, with
///   tool results first in a user message and reasoning first in an assistant message, as
///   Anthropic requires.
pub fn chat(messages: &[Message]) -> Result<Conversation<'_>, ProviderError> {
    let mut system: Vec<Cow<'_, str>> = Vec::new();
    let mut out: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len());
    let mut calls = ToolCalls::new("Anthropic", "toolu_gw_", usize::MAX);
    for (i, message) in messages.iter().enumerate() {
        match message.role {
            Role::System => {
                let text = message.text_only_at(i, "anthropic")?;
                if !text.is_empty() {
                    system.push(text);
                }
            }
            Role::User => push_blocks(&mut out, "user", user_blocks(i, &message.parts)?),
            Role::Assistant => {
                let mut blocks = Vec::new();
                for part in &message.parts {
                    match part {
                        Part::Reasoning(reasoning) => blocks.extend(thinking_block(reasoning)),
                        Part::Text(text) => blocks.extend(text_block(Some(text))),
                        media => return Err(refused(i, media, "assistant")),
                    }
                }
                for call in calls.calls(i, message)? {
                    let (id, name, input) = (call.id, call.name, call.input);
                    blocks.push(Block::ToolUse { id, name, input });
                }
                push_blocks(&mut out, "assistant", blocks);
            }
            Role::Tool | Role::Function => {
                let call = calls.answered(i, message)?;
                let result = tool_result(i, call.id, message)?;
                push_blocks(&mut out, "user", vec![result]);
            }
        }
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    finish_conversation(system, out)
}

/// The 400 for a part Anthropic does not take on a message of `role`.
fn refused(i: usize, part: &Part, role: &str) -> ProviderError {
    part.unsupported_on(i, "anthropic", role)
}

/// The blocks of a user message's parts, in order: text (empty text left out), images and
/// documents. Audio is refused (Anthropic takes none); reasoning is dropped (only an assistant
/// turn carries it).
fn user_blocks(i: usize, parts: &[Part]) -> Result<Vec<Block<'_>>, ProviderError> {
    let mut blocks = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            Part::Text(text) => blocks.extend(text_block(Some(text))),
            Part::Image(image) => blocks.push(image_block(image)),
            Part::Document(document) => blocks.push(document_block(i, document)?),
            Part::Audio(_) => return Err(part.unsupported("anthropic").at_message(i)),
            Part::Reasoning(_) => {}
        }
    }
    Ok(blocks)
}

/// An `image` block: bytes as a base64 source with their media type, a URL as a URL source.
/// OpenAI's `detail` has no Anthropic counterpart and is left out.
fn image_block(image: &Image) -> Block<'_> {
    let source = match &image.source {
        Source::Bytes(bytes) => MediaSource::Base64 {
            media_type: image.media_type(),
            data: Base64(bytes),
        },
        Source::Url(url) => MediaSource::Url { url },
    };
    Block::Image { source }
}

/// A `document` block, with its title when given: a PDF's bytes as a base64 source, a text
/// document's (any `text/*` type, as UTF-8) as a `text/plain` text source, a URL as a URL source
/// (Anthropic fetches PDFs only). Other media types are refused: Anthropic reads PDFs and plain
/// text only.
fn document_block(i: usize, document: &Document) -> Result<Block<'_>, ProviderError> {
    let source = match &document.source {
        Source::Url(url) => MediaSource::Url { url },
        Source::Bytes(bytes) => {
            let media_type = document.media_type();
            let essence = media_type.split(';').next().unwrap_or("").trim();
            if essence.eq_ignore_ascii_case("application/pdf") {
                MediaSource::Base64 {
                    media_type: "application/pdf",
                    data: Base64(bytes),
                }
            } else if essence
                .get(..5)
                .is_some_and(|kind| kind.eq_ignore_ascii_case("text/"))
            {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    ProviderError::InvalidRequest(format!(
                        "messages[{i}]: a {media_type} document must be UTF-8 text"
                    ))
                })?;
                MediaSource::Text {
                    media_type: "text/plain",
                    data: text,
                }
            } else {
                return Err(ProviderError::InvalidRequest(format!(
                    "messages[{i}]: anthropic does not take {media_type} documents (only \
                     application/pdf and text)"
                )));
            }
        }
    };
    Ok(Block::Document {
        source,
        title: document.title.clone().filter(|title| !title.is_empty()),
    })
}

/// An assistant's reasoning of an earlier turn as Anthropic gave it: `redacted_thinking` with
/// its data, else `thinking` with its signature. Reasoning with neither (another provider's, or
/// a summary) cannot be checked by Anthropic, which refuses unsigned thinking: it is dropped.
fn thinking_block(reasoning: &Reasoning) -> Option<Block<'static>> {
    if let Some(data) = reasoning.redacted.as_ref().filter(|data| !data.is_empty()) {
        return Some(Block::RedactedThinking { data: data.clone() });
    }
    let signature = reasoning.signature.as_ref().filter(|sig| !sig.is_empty())?;
    Some(Block::Thinking {
        thinking: reasoning.text.clone(),
        signature: signature.clone(),
    })
}

fn finish_conversation(
    system: Option<String>,
    mut messages: Vec<WireMessage<'_>>,
) -> Result<Conversation<'_>, ProviderError> {
    finish_turns(&mut messages, "Anthropic")?;
    Ok(Conversation { system, messages })
}

/// A text block, or none for empty text (Anthropic rejects empty text blocks).
fn text_block(text: Option<&str>) -> Vec<Block<'static>> {
    match text {
        Some(text) if !text.is_empty() => vec![Block::Text {
            text: text.to_owned(),
        }],
        _ => Vec::new(),
    }
}

/// A `tool_result` answering `tool_use_id` with the message's parts as blocks (as a user
/// message's: text, images, documents; audio refused, reasoning dropped), no content when there
/// are none, and `is_error` when the tool failed.
fn tool_result(
    i: usize,
    tool_use_id: String,
    message: &Message,
) -> Result<Block<'_>, ProviderError> {
    let blocks = user_blocks(i, &message.parts)?;
    Ok(Block::ToolResult {
        tool_use_id,
        content: (!blocks.is_empty()).then_some(blocks),
        is_error: message.is_error,
    })
}

/// Maps the caller's functions to `tools`. A function without parameters takes an empty object
/// (Anthropic requires an `input_schema` of type object).
pub fn tools(functions: &[FunctionDef]) -> Result<Vec<Tool>, ProviderError> {
    let tool = |(i, function): (usize, &FunctionDef)| {
        Ok(Tool {
            name: function.name.clone(),
            description: function.description(),
            input_schema: function.object_schema(i)?,
        })
    };
    functions.iter().enumerate().map(tool).collect()
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
