//! Mapping the gateway's requests to Bedrock's Converse API, and the route's settings and
//! credentials. Everything but sending is pure (the time to sign at is a parameter), so it is
//! unit-tested natively.

use std::num::NonZeroU64;

use gateway_plugin_sdk::blocks::{
    MIN_THINKING_BUDGET, Thinking, ToolCalls, finish_turns, push_blocks,
};
use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::json::{to_value, with_entry};
use gateway_plugin_sdk::output::{OutputFields, fit_thinking_budget};
use gateway_plugin_sdk::{
    Base64, CompletionRequest, Document, FunctionChoice, FunctionDef, Image, Message, Part, Prompt,
    ProviderError, Reasoning, ReasoningConfig, Role, Route, Source, params_object_except,
    take_default_only_params, take_stop_sequences,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::sigv4::{self, AmzDate, Credentials, Scope};
use crate::wire::{
    Block, DocumentBlock, ImageBlock, InputSchema, MediaSource, ReasoningBlock, Tool, ToolResult,
    ToolSpec, ToolUse, WireMessage,
};

/// The service name in SigV4's credential scope.
pub const SERVICE: &str = "bedrock";

/// The example base URL errors point to.
const EXAMPLE_BASE_URL: &str = "https://bedrock-runtime.us-east-1.amazonaws.com";

/// Body keys the plugin sets itself; a caller's param never overrides them.
const OWNED_KEYS: &[&str] = &["messages", "system", "toolConfig", "stream", "modelId"];

/// `maxTokens` added to a Claude thinking budget when the caller gives no room for the answer.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// A model id as a path segment: everything but the unreserved characters encoded, so that a
/// version suffix `:0` travels as `%3A0` and an ARN's `/` as `%2F`.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The plugin's settings from the route's `[providers.ID.settings]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// The AWS region to sign for; else read from a `bedrock-runtime.REGION.amazonaws.com`
    /// base URL.
    pub region: Option<String>,
    /// Environment variables holding the AWS credentials: the host reads them when routes are
    /// built and hands them over as the route's secrets (`aws_access_key_id`, ...).
    pub aws_access_key_id_env: Option<String>,
    pub aws_secret_access_key_env: Option<String>,
    pub aws_session_token_env: Option<String>,
    /// `maxTokens` added to a Claude thinking budget ([`DEFAULT_MAX_TOKENS`] when unset).
    pub default_max_tokens: Option<NonZeroU64>,
}

impl Settings {
    fn max_tokens(&self) -> u64 {
        self.default_max_tokens
            .map_or(DEFAULT_MAX_TOKENS, NonZeroU64::get)
    }
}

/// How requests of a route prove who sends them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth<'a> {
    /// SigV4 with the route's AWS credentials, for `region`.
    SigV4 {
        credentials: Credentials<'a>,
        region: String,
    },
    /// A Bedrock API key, as `Authorization: Bearer`.
    Bearer(&'a str),
}

impl<'a> Auth<'a> {
    /// The route's credentials: its AWS keys when its settings name them (both must then be
    /// set in the gateway's environment), else its provider key as a Bedrock API key.
    ///
    /// Errors ([`ProviderError::Failed`], the operator's to fix) name the setting and the
    /// variable, never a value.
    pub fn of(route: &'a Route, settings: &Settings) -> Result<Auth<'a>, ProviderError> {
        let names = [
            ("aws_access_key_id", &settings.aws_access_key_id_env),
            ("aws_secret_access_key", &settings.aws_secret_access_key_env),
            ("aws_session_token", &settings.aws_session_token_env),
        ];
        let secret = |(name, variable): (&str, &Option<String>)| match variable {
            None => Ok(None),
            Some(variable) => match route.secret(name).filter(|value| !value.is_empty()) {
                Some(value) => Ok(Some(value)),
                None => Err(ProviderError::Failed(format!(
                    "route `{}`: setting {name}_env names the environment variable \
                     {variable}, which is not set (or empty) in the gateway's environment",
                    route.id
                ))),
            },
        };
        let access_key_id = secret(names[0])?;
        let secret_access_key = secret(names[1])?;
        let session_token = secret(names[2])?;
        match (access_key_id, secret_access_key) {
            (Some(access_key_id), Some(secret_access_key)) => Ok(Auth::SigV4 {
                credentials: Credentials {
                    access_key_id,
                    secret_access_key,
                    session_token,
                },
                region: region(route, settings)?,
            }),
            (Some(_), None) | (None, Some(_)) => Err(ProviderError::Failed(format!(
                "route `{}`: set both aws_access_key_id_env and aws_secret_access_key_env",
                route.id
            ))),
            (None, None) => match route.api_key.as_deref().filter(|key| !key.is_empty()) {
                Some(key) => Ok(Auth::Bearer(key)),
                None => Err(ProviderError::Failed(format!(
                    "route `{}` has no credentials: set aws_access_key_id_env and \
                     aws_secret_access_key_env (and aws_session_token_env for temporary \
                     credentials) in its settings, or a Bedrock API key (api_key_env)",
                    route.id
                ))),
            },
        }
    }

    /// Signs or authorizes `request` (SigV4 at `date`).
    pub fn apply(&self, request: Request, date: &AmzDate) -> Result<Request, ProviderError> {
        match self {
            Auth::SigV4 {
                credentials,
                region,
            } => sigv4::sign(
                request,
                credentials,
                Scope {
                    region,
                    service: SERVICE,
                },
                date,
            ),
            Auth::Bearer(key) => Ok(request.bearer(key)),
        }
    }
}

/// The region to sign for: the `region` setting, else the one a Bedrock Runtime base URL
/// names (`https://bedrock-runtime[-fips].REGION.amazonaws.com[.cn]`).
pub fn region(route: &Route, settings: &Settings) -> Result<String, ProviderError> {
    if let Some(region) = settings.region.as_deref().map(str::trim)
        && !region.is_empty()
    {
        return Ok(region.to_owned());
    }
    let host = route
        .base_url
        .split_once("://")
        .map_or("", |(_, rest)| rest)
        .split(['/', ':', '?'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut labels = host.split('.');
    if let (Some("bedrock-runtime" | "bedrock-runtime-fips"), Some(region), Some("amazonaws")) =
        (labels.next(), labels.next(), labels.next())
        && !region.is_empty()
    {
        return Ok(region.to_owned());
    }
    Err(ProviderError::Failed(format!(
        "route `{}`: set its region setting (e.g. region = \"us-east-1\"); the base_url does \
         not name one",
        route.id
    )))
}

/// `{base}/model/{modelId}/{operation}`, the model id encoded as one path segment.
pub fn model_url(route: &Route, model: &str, operation: &str) -> Result<String, ProviderError> {
    let base = route.checked_base_url(EXAMPLE_BASE_URL)?;
    let model = model.trim();
    if model.is_empty() {
        return Err(ProviderError::InvalidRequest(
            "no model: name a Bedrock model id or inference profile (e.g. \
             anthropic.claude-3-5-sonnet-20240620-v1:0)"
                .into(),
        ));
    }
    let model = utf8_percent_encode(model, PATH_SEGMENT);
    Ok(format!("{base}/model/{model}/{operation}"))
}

/// The signed request to Converse (`stream`: ConverseStream) for `request`, at `date`.
pub fn upstream_request(
    request: &CompletionRequest,
    stream: bool,
    date: &AmzDate,
) -> Result<Request, ProviderError> {
    let settings = request.route.settings::<Settings>()?;
    let auth = Auth::of(&request.route, &settings)?;
    let (body, messages) = body_and_messages(request, &settings)?;
    let operation = if stream {
        "converse-stream"
    } else {
        "converse"
    };
    let accept = if stream {
        "application/vnd.amazon.eventstream"
    } else {
        "application/json"
    };
    // The conversation is written into the body as it is serialized, not turned into a tree
    // of JSON values first (which would cost many times its text).
    let size = request.params.len() + 256 + request.prompt.json_size_hint();
    let upstream = Request::post(model_url(&request.route, &request.model, operation)?)
        .header("accept", accept)
        .json_sized(&with_entry(&body, "messages", &messages), size)?;
    auth.apply(upstream, date)
}

/// What CountTokens' `converse` input takes of a Converse body: inference settings size an answer
/// it never writes.
const COUNT_KEYS: &[&str] = &["system", "toolConfig", "additionalModelRequestFields"];

/// The signed CountTokens request (`POST /model/{id}/count-tokens`) for `request`'s prompt, at
/// `date`: the Converse body it would be sent as, as `{"input": {"converse": ...}}`, less what
/// only an answer needs.
pub fn count_request(
    request: &CompletionRequest,
    date: &AmzDate,
) -> Result<Request, ProviderError> {
    let settings = request.route.settings::<Settings>()?;
    let auth = Auth::of(&request.route, &settings)?;
    let (mut body, messages) = body_and_messages(request, &settings)?;
    body.retain(|key, _| COUNT_KEYS.contains(&key.as_str()));
    let converse = with_entry(&body, "messages", &messages);
    let size = request.params.len() + 256 + request.prompt.json_size_hint();
    let upstream = Request::post(model_url(&request.route, &request.model, "count-tokens")?)
        .header("accept", "application/json")
        .json_sized(
            &json!({ "input": { "converse": to_value(&converse)? } }),
            size,
        )?;
    auth.apply(upstream, date)
}

/// The JSON body of a Converse request, as a map (for tests: [`upstream_request`] writes the
/// messages into the body without building their tree of values).
#[cfg(test)]
pub fn converse_body(
    request: &CompletionRequest,
    settings: &Settings,
) -> Result<Map<String, Value>, ProviderError> {
    let (mut body, messages) = body_and_messages(request, settings)?;
    body.insert("messages".into(), to_value(&messages)?);
    Ok(body)
}

/// The body of a Converse request without its `messages`, and those messages (borrowing the
/// request's media).
fn body_and_messages<'a>(
    request: &'a CompletionRequest,
    settings: &Settings,
) -> Result<(Map<String, Value>, Vec<WireMessage<'a>>), ProviderError> {
    let conversation = conversation(&request.prompt)?;
    let mut body = caller_params(&request.params, &request.route.id)?;
    if !conversation.system.is_empty() {
        let system: Vec<Value> = (conversation.system.iter())
            .map(|text| json!({ "text": text }))
            .collect();
        body.insert("system".into(), Value::Array(system));
    }
    if let Some(config) = tool_config(request, conversation.has_tool_blocks)? {
        body.insert("toolConfig".into(), config);
    }
    if let Some(reasoning) = &request.reasoning
        && is_claude(&request.model)
    {
        thinking(&mut body, reasoning, settings.max_tokens());
    }
    if let Some(max) = request.output.max_tokens {
        output_limit(&mut body, max, &request.route.id)?;
    }
    Ok((body, conversation.messages))
}

/// Where a Converse body says how long the answer may be: `inferenceConfig.maxTokens`, and
/// the models' own names for it in `additionalModelRequestFields` (Claude's `max_tokens`,
/// Llama's `max_gen_len`, Mistral's and others' `max_new_tokens`), which a caller may pass
/// through. Converse answers with one choice.
pub const OUTPUT: OutputFields = OutputFields {
    max_tokens: &[
        &["inferenceConfig", "maxTokens"],
        &["additionalModelRequestFields", "max_tokens"],
        &["additionalModelRequestFields", "max_gen_len"],
        &["additionalModelRequestFields", "max_new_tokens"],
    ],
    choices: &[],
};

/// Writes the host's output limit, `max`, as `inferenceConfig.maxTokens` and over the models'
/// own names a caller passed through ([`OUTPUT`]); fits a Claude thinking budget inside it
/// ([`fit_thinking_budget`]), or refuses a limit with no room for one.
fn output_limit(body: &mut Map<String, Value>, max: u32, route: &str) -> Result<(), ProviderError> {
    let inference = body
        .entry("inferenceConfig")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(inference) = inference.as_object_mut() else {
        return Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: inferenceConfig must be an object"
        )));
    };
    inference.insert("maxTokens".into(), json!(max));
    let Some(Value::Object(fields)) = body.get_mut("additionalModelRequestFields") else {
        return Ok(());
    };
    for path in &OUTPUT.max_tokens[1..] {
        if let Some(value) = fields.get_mut(path[1]) {
            *value = json!(max);
        }
    }
    fit_thinking_budget(fields, max, MIN_THINKING_BUDGET, route)
}

/// Whether `model` (a model id, an inference profile id such as `us.anthropic.claude-…`, or an
/// ARN naming one) is one of Anthropic's Claude models, which take a thinking budget.
pub fn is_claude(model: &str) -> bool {
    model.contains("anthropic.claude")
}

/// `toolConfig`: the caller's functions as tools, with their choice.
///
/// Converse has no choice "none": with it the tools are left out, unless the conversation
/// already holds tool calls or results (Bedrock then requires `toolConfig`), where they are
/// sent with no `toolChoice` (the model's own choice).
fn tool_config(
    request: &CompletionRequest,
    has_tool_blocks: bool,
) -> Result<Option<Value>, ProviderError> {
    if request.functions.is_empty() {
        return Ok(None);
    }
    let choice = match &request.function_choice {
        None | Some(FunctionChoice::Auto) => Some(json!({"auto": {}})),
        Some(FunctionChoice::Required) => Some(json!({"any": {}})),
        Some(FunctionChoice::Named(name)) => Some(json!({"tool": {"name": name}})),
        Some(FunctionChoice::None) if has_tool_blocks => None,
        Some(FunctionChoice::None) => return Ok(None),
    };
    let mut config = Map::new();
    config.insert("tools".into(), to_value(&tools(&request.functions)?)?);
    if let Some(choice) = choice {
        config.insert("toolChoice".into(), choice);
    }
    Ok(Some(Value::Object(config)))
}

/// Maps the caller's functions to `toolConfig.tools`. A function without parameters takes an
/// empty object (Bedrock requires an input schema).
pub fn tools(functions: &[FunctionDef]) -> Result<Vec<Tool>, ProviderError> {
    let tool = |(i, function): (usize, &FunctionDef)| {
        let json = function.object_schema(i)?;
        Ok(Tool {
            tool_spec: ToolSpec {
                name: function.name.clone(),
                description: function.description(),
                input_schema: InputSchema { json },
            },
        })
    };
    functions.iter().enumerate().map(tool).collect()
}

/// Sets Claude's thinking (`additionalModelRequestFields.thinking`) from the caller's
/// reasoning config, as the anthropic plugin does for Anthropic's own API:
///
/// - effort `none` asks for no thinking: `thinking` is left out;
/// - else `{"type": "enabled", "budget_tokens": N}`, N being the budget when given, else by
///   effort (minimal 1024, low 2048, medium 8192, high 16384, xhigh 32000), at least
///   [`MIN_THINKING_BUDGET`] ([`Thinking::of`]); a config with neither leaves the body as it
///   is;
/// - Claude wants `budget_tokens` below the answer's maximum: a `maxTokens` that is not above
///   the budget, or none, becomes the budget plus `default_max_tokens`.
fn thinking(body: &mut Map<String, Value>, reasoning: &ReasoningConfig, default_max_tokens: u64) {
    let fields = body
        .entry("additionalModelRequestFields")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(fields) = fields.as_object_mut() else {
        // Not an object: Bedrock refuses it, saying so; nothing to add to.
        return;
    };
    let thinking = Thinking::of(reasoning);
    if thinking == Some(Thinking::Off) {
        fields.remove("thinking");
    }
    let Some(Thinking::Budget(budget)) = thinking else {
        if fields.is_empty() {
            body.remove("additionalModelRequestFields");
        }
        return;
    };
    fields.insert("thinking".into(), Thinking::enabled(budget));
    let inference = body
        .entry("inferenceConfig")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(inference) = inference.as_object_mut() {
        let max_tokens = inference.get("maxTokens").and_then(Value::as_u64);
        if max_tokens.is_none_or(|max| max <= u64::from(budget)) {
            let raised = u64::from(budget).saturating_add(default_max_tokens);
            inference.insert("maxTokens".into(), json!(raised));
        }
    }
}

/// Maps the caller's params, named as OpenAI names them, to the start of a Converse body.
///
/// Converse refuses fields it does not know, so OpenAI's are translated, dropped when leaving
/// them out changes nothing, or refused ([`ProviderError::InvalidRequest`] naming the route and
/// the param) when Converse cannot do what they ask:
/// - `max_tokens` (else `max_completion_tokens`), `temperature`, `top_p` and `stop` /
///   `stop_sequences` (a string or a list) go to `inferenceConfig` (`maxTokens`,
///   `temperature`, `topP`, `stopSequences`), where a caller's own `inferenceConfig` keeps the
///   values it sets;
/// - `top_k` goes to `additionalModelRequestFields.top_k` (Claude's name for it);
/// - dropped: `seed` (best-effort in OpenAI too), `stream_options` (the plugin owns
///   streaming), `user` and `metadata` (OpenAI's and Anthropic's labels of a call: Converse
///   has no end-user field, and its `requestMetadata` takes only strings), `store` (OpenAI's
///   keeping of the answer, which the gateway does itself), and the values that ask for the
///   default: `n: 1`, `response_format: {"type": "text"}`, zero penalties, `logprobs: false`,
///   `top_logprobs: 0`, `logit_bias: {}`, `parallel_tool_calls: true`, and `null` for any;
/// - refused: any other value of those;
/// - everything else passes as it is: Converse's own fields (`additionalModelRequestFields`,
///   `guardrailConfig`, `performanceConfig`, `requestMetadata`, ...), and anything Bedrock
///   will refuse itself, naming it (a 400 for the caller).
pub fn caller_params(params: &str, route: &str) -> Result<Map<String, Value>, ProviderError> {
    let mut body = params_object_except(params, OWNED_KEYS)?;
    let unsupported = |what: String, why: &str| {
        ProviderError::InvalidRequest(format!(
            "route `{route}`: {what} is not supported by Bedrock's Converse API ({why})"
        ))
    };
    let mut inference = match body.remove("inferenceConfig") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(config)) => config,
        Some(_) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: inferenceConfig must be an object"
            )));
        }
    };

    let max_tokens = ["max_tokens", "max_completion_tokens"]
        .into_iter()
        .filter_map(|name| body.remove(name))
        .find(|value| !value.is_null());
    for (wire, value) in [
        ("maxTokens", max_tokens),
        ("temperature", body.remove("temperature")),
        ("topP", body.remove("top_p")),
    ] {
        if let Some(value) = value.filter(|v| !v.is_null()) {
            inference.entry(wire).or_insert(value);
        }
    }

    let sequences = take_stop_sequences(&mut body, route)?;
    if !sequences.is_empty() {
        inference
            .entry("stopSequences")
            .or_insert(Value::Array(sequences));
    }
    if !inference.is_empty() {
        body.insert("inferenceConfig".into(), Value::Object(inference));
    }

    if let Some(top_k) = body.remove("top_k").filter(|v| !v.is_null()) {
        let fields = body
            .entry("additionalModelRequestFields")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(fields) = fields.as_object_mut() {
            fields.entry("top_k").or_insert(top_k);
        }
    }

    for dropped in ["seed", "stream_options", "user", "metadata", "store"] {
        body.remove(dropped);
    }
    take_default_only_params(&mut body, route, "Bedrock's Converse API")?;
    match body.remove("parallel_tool_calls") {
        None | Some(Value::Null | Value::Bool(true)) => {}
        Some(_) => {
            let why = "the model decides how many tools to call";
            return Err(unsupported("parallel_tool_calls = false".into(), why));
        }
    }
    Ok(body)
}

/// A prompt in Converse's shape: the system prompts apart, then alternating user and assistant
/// messages (borrowing the prompt's media).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation<'a> {
    /// The system messages' texts, one system block each.
    pub system: Vec<String>,
    pub messages: Vec<WireMessage<'a>>,
    /// Whether a message holds a tool call or result (Bedrock then requires `toolConfig`).
    pub has_tool_blocks: bool,
}

/// Maps the caller's prompt: a text prompt is one user message; a chat is mapped by [`chat`].
pub fn conversation(prompt: &Prompt) -> Result<Conversation<'_>, ProviderError> {
    match prompt {
        Prompt::Text(text) => {
            let mut messages = Vec::new();
            push_blocks(
                &mut messages,
                "user",
                text_block(text).into_iter().collect(),
            );
            finish_conversation(Vec::new(), messages, false)
        }
        Prompt::Chat(messages) => chat(messages),
    }
}

/// Maps a chat conversation.
///
/// - System messages, wherever they are, become `system` blocks (their text parts joined);
///   an image, audio or document on one is refused, reasoning dropped.
/// - User messages' parts become blocks in order ([`user_blocks`]).
/// - An assistant's reasoning parts become `reasoningContent` blocks first
///   ([`reasoning_block`]), then its text, then its `tool_calls` (else its `function_call`) as
///   `toolUse` blocks; calls without an id get `tooluse_gw_{n}`. Media on an assistant message
///   is refused.
/// - `tool` and `function` messages become `toolResult` blocks of a user message, answering
///   the call named by `tool_call_id`, else the latest open call of that name, with their parts
///   as content and `status: "error"` when the tool failed.
/// - Consecutive messages of one role are merged (Converse requires alternation), with tool
///   results first in a user message and reasoning first in an assistant message.
pub fn chat(messages: &[Message]) -> Result<Conversation<'_>, ProviderError> {
    let mut system: Vec<String> = Vec::new();
    let mut out: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len());
    let mut calls = ToolCalls::new("Bedrock", "tooluse_gw_", 64);
    let mut has_tool_blocks = false;
    let mut documents = DocumentNames::default();
    for (i, message) in messages.iter().enumerate() {
        match message.role {
            Role::System => {
                let text = message.text_only_at(i, "bedrock")?;
                if !text.is_empty() {
                    system.push(text.into_owned());
                }
            }
            Role::User => {
                let blocks = user_blocks(i, &message.parts, &mut documents)?;
                push_blocks(&mut out, "user", blocks);
            }
            Role::Assistant => {
                let mut blocks = Vec::new();
                for part in &message.parts {
                    match part {
                        Part::Reasoning(reasoning) => blocks.extend(reasoning_block(reasoning)),
                        Part::Text(text) => blocks.extend(text_block(text)),
                        media => return Err(refused(i, media, "assistant")),
                    }
                }
                for call in calls.calls(i, message)? {
                    has_tool_blocks = true;
                    blocks.push(Block::ToolUse(ToolUse {
                        tool_use_id: call.id,
                        name: call.name,
                        input: call.input,
                    }));
                }
                push_blocks(&mut out, "assistant", blocks);
            }
            Role::Tool | Role::Function => {
                let call = calls.answered(i, message)?;
                has_tool_blocks = true;
                let content = user_blocks(i, &message.parts, &mut documents)?;
                let result = Block::ToolResult(ToolResult {
                    tool_use_id: call.id,
                    content,
                    status: message.is_error.then_some("error"),
                });
                push_blocks(&mut out, "user", vec![result]);
            }
        }
    }
    finish_conversation(system, out, has_tool_blocks)
}

fn finish_conversation(
    system: Vec<String>,
    mut messages: Vec<WireMessage<'_>>,
    has_tool_blocks: bool,
) -> Result<Conversation<'_>, ProviderError> {
    finish_turns(&mut messages, "Bedrock")?;
    Ok(Conversation {
        system,
        messages,
        has_tool_blocks,
    })
}

/// A text block, or none for empty text (Bedrock rejects blank text blocks).
fn text_block(text: &str) -> Option<Block<'static>> {
    (!text.is_empty()).then(|| Block::Text(text.to_owned()))
}

/// The 400 for a part Bedrock does not take on a message of `role`.
fn refused(i: usize, part: &Part, role: &str) -> ProviderError {
    part.unsupported_on(i, "bedrock", role)
}

/// The 400 for message `i` saying `message`.
fn at(i: usize, message: impl std::fmt::Display) -> ProviderError {
    ProviderError::InvalidRequest(message.to_string()).at_message(i)
}

/// The blocks of a user message's (or a tool result's) parts, in order: text (empty text left
/// out), images and documents. Audio is refused (Converse takes none); reasoning is dropped.
fn user_blocks<'a>(
    i: usize,
    parts: &'a [Part],
    documents: &mut DocumentNames,
) -> Result<Vec<Block<'a>>, ProviderError> {
    let mut blocks = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            Part::Text(text) => blocks.extend(text_block(text)),
            Part::Image(image) => blocks.push(image_block(i, image)?),
            Part::Document(document) => blocks.push(document_block(i, document, documents)?),
            Part::Audio(_) => return Err(at(i, "bedrock's Converse API takes no audio parts")),
            Part::Reasoning(_) => {}
        }
    }
    Ok(blocks)
}

/// The media type's essence, lowercase: `image/png` of `Image/PNG; charset=x`.
fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Where Bedrock reads a part's bytes: in the request, or an `s3://` object. Bedrock fetches
/// no other URL.
fn media_source<'a>(
    i: usize,
    source: &'a Source,
    what: &str,
) -> Result<MediaSource<'a>, ProviderError> {
    match source {
        Source::Bytes(bytes) => Ok(MediaSource::Bytes(Base64(bytes))),
        Source::Url(url) if url.starts_with("s3://") => Ok(MediaSource::S3Location { uri: url }),
        Source::Url(_) => Err(at(
            i,
            format_args!(
                "bedrock reads {what}s from the request's bytes or from s3:// URLs only; send the \
                 {what} itself (base64 or a data: URL)"
            ),
        )),
    }
}

/// An `image` block: PNG, JPEG, GIF or WebP (the formats Converse takes).
fn image_block<'a>(i: usize, image: &'a Image) -> Result<Block<'a>, ProviderError> {
    // An s3:// image may come without a media type: its name's extension tells it.
    let extension = (image.source.url())
        .and_then(|url| url.rsplit_once('.'))
        .map(|(_, extension)| format!("image/{}", extension.to_ascii_lowercase()));
    let given = (image.media_type.as_deref().map(essence)).filter(|given| !given.is_empty());
    let media_type = given
        .or(extension)
        .unwrap_or_else(|| image.media_type().to_owned());
    let format = match media_type.as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        other => {
            return Err(at(
                i,
                format_args!("bedrock takes PNG, JPEG, GIF and WebP images, not {other}"),
            ));
        }
    };
    Ok(Block::Image(ImageBlock {
        format,
        source: media_source(i, &image.source, "image")?,
    }))
}

/// A `document` block: its format from the media type (PDF, CSV, Word, Excel, HTML, plain
/// text, Markdown; any other `text/*` as plain text), its name from the title (made to fit
/// Bedrock's rules: letters, digits, single spaces, hyphens, parentheses and square brackets;
/// unique in the request), else `document-N`.
fn document_block<'a>(
    i: usize,
    document: &'a Document,
    names: &mut DocumentNames,
) -> Result<Block<'a>, ProviderError> {
    let media_type = essence(document.media_type());
    let format = match media_type.as_str() {
        "application/pdf" => "pdf",
        "text/csv" => "csv",
        "application/msword" => "doc",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "application/vnd.ms-excel" => "xls",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "text/html" => "html",
        "text/markdown" => "md",
        other if other.starts_with("text/") => "txt",
        other => {
            return Err(at(
                i,
                format_args!(
                    "bedrock takes PDF, CSV, Word, Excel, HTML, text and Markdown documents, not \
                     {}",
                    if other.is_empty() {
                        "a document without a media type"
                    } else {
                        other
                    }
                ),
            ));
        }
    };
    Ok(Block::Document(DocumentBlock {
        format,
        name: names.next(document.title.as_deref()),
        source: media_source(i, &document.source, "document")?,
    }))
}

/// The document names of one request, kept unique.
#[derive(Debug, Default)]
struct DocumentNames {
    used: Vec<String>,
}

impl DocumentNames {
    fn next(&mut self, title: Option<&str>) -> String {
        let allowed = |c: char| c.is_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']');
        let mut name = String::new();
        let mut space = false;
        for c in title.unwrap_or("").chars() {
            if allowed(c) {
                if space && !name.is_empty() {
                    name.push(' ');
                }
                space = false;
                name.push(c);
            } else {
                // Whitespace and every other character (`.`, `_`, `/`) become one space.
                space = true;
            }
        }
        let name: String = name.chars().take(180).collect();
        let base = if name.is_empty() {
            format!("document-{}", self.used.len() + 1)
        } else {
            name
        };
        let mut unique = base.clone();
        let mut n = 2;
        while self.used.contains(&unique) {
            unique = format!("{base} ({n})");
            n += 1;
        }
        self.used.push(unique.clone());
        unique
    }
}

/// An assistant's reasoning of an earlier turn as Bedrock gave it: `redactedContent` with its
/// data, else `reasoningText` with its signature. Reasoning with neither (another provider's,
/// a summary) is dropped: Claude refuses thinking it cannot verify.
fn reasoning_block(reasoning: &Reasoning) -> Option<Block<'static>> {
    if let Some(data) = reasoning.redacted.as_ref().filter(|data| !data.is_empty()) {
        return Some(Block::ReasoningContent(ReasoningBlock::RedactedContent(
            data.clone(),
        )));
    }
    let signature = reasoning.signature.as_ref().filter(|sig| !sig.is_empty())?;
    Some(Block::ReasoningContent(ReasoningBlock::ReasoningText {
        text: reasoning.text.clone(),
        signature: Some(signature.clone()),
    }))
}
