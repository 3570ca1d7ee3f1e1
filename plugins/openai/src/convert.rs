//! Mapping between the gateway's types and the OpenAI wire format. Everything here is pure (no
//! I/O), so it is unit-tested natively.

use gateway_plugin_sdk::{
    Choice, Completion, CompletionRequest, EmbeddingRequest, Embeddings, FinishReason,
    FunctionCall, FunctionChoice, FunctionDef, Message, Prompt, ProviderError, Role, Route,
    ToolCall, UpstreamError, Usage, params_object, settings_object,
};
use serde_json::{Map, Value, json};

use crate::wire::{
    ChatMessage, CompletionResponse, EmbeddingResponse, EmbeddingVector, FunctionCallIn,
    FunctionCallOut, ResponseChoice, Tool, ToolCallIn, ToolCallOut, ToolFunction, WireUsage,
};

/// Body keys of `/chat/completions` the plugin sets itself; a caller's param never overrides them.
const CHAT_OWNED_KEYS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
];
/// Body keys of legacy `/completions` the plugin sets itself.
const LEGACY_OWNED_KEYS: &[&str] = &["model", "prompt", "stream", "stream_options"];
/// Body keys of `/embeddings` the plugin sets itself.
const EMBEDDING_OWNED_KEYS: &[&str] = &["model", "input"];

/// The plugin's settings from the route's `[providers.ID.settings]` table. Keys it does not
/// know are ignored: the gateway passes the table on without reading it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RouteSettings {
    /// Send `type: text` prompts to the legacy `/completions` endpoint.
    pub legacy_completions: bool,
    /// Header that carries the key instead of `Authorization: Bearer` (Azure's `api-key`).
    pub api_key_header: Option<String>,
    /// Azure OpenAI deployment mode: the `api-version` of deployment URLs
    /// (`{base_url}/openai/deployments/{model}/chat/completions?api-version=...`).
    pub azure_api_version: Option<String>,
}

impl RouteSettings {
    /// Reads and checks the route's settings. A wrong type is the operator's mistake, not the
    /// caller's, hence `Failed` rather than `InvalidRequest`.
    pub fn from_route(route: &Route) -> Result<Self, ProviderError> {
        let settings = settings_object(route)?;
        let legacy_completions = match settings.get("legacy_completions") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ProviderError::Failed(format!(
                    "route `{}`: setting `legacy_completions` must be true or false",
                    route.id
                )));
            }
        };
        let api_key_header = match settings.get("api_key_header") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) if !name.trim().is_empty() => Some(name.trim().to_owned()),
            Some(_) => {
                return Err(ProviderError::Failed(format!(
                    "route `{}`: setting `api_key_header` must be a header name",
                    route.id
                )));
            }
        };
        let azure_api_version = match settings.get("azure_api_version") {
            None | Some(Value::Null) => None,
            // It goes into the query string as is, so only the characters versions are made of.
            Some(Value::String(version))
                if !version.is_empty()
                    && version
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') =>
            {
                Some(version.clone())
            }
            Some(_) => {
                return Err(ProviderError::Failed(format!(
                    "route `{}`: setting `azure_api_version` must be an Azure OpenAI API version such as \"2024-10-21\"",
                    route.id
                )));
            }
        };
        Ok(Self {
            legacy_completions,
            api_key_header,
            azure_api_version,
        })
    }

    /// The header carrying the key, `None` for `Authorization: Bearer`: the configured
    /// `api_key_header`, else Azure's `api-key` in deployment mode.
    pub fn key_header(&self) -> Option<&str> {
        self.api_key_header
            .as_deref()
            .or(self.azure_api_version.as_ref().map(|_| "api-key"))
    }

    /// The URL of `operation` (`chat/completions`, `completions`, `embeddings`) for `model`:
    /// `{base}/{operation}`, or in Azure deployment mode
    /// `{base}/openai/deployments/{model}/{operation}?api-version={version}`, where `model` is
    /// the deployment's name.
    pub fn endpoint(
        &self,
        route: &Route,
        model: &str,
        operation: &str,
    ) -> Result<String, ProviderError> {
        let base = base_url(route)?;
        let Some(version) = &self.azure_api_version else {
            return Ok(format!("{base}/{operation}"));
        };
        // The base is the resource endpoint (https://NAME.openai.azure.com); accept it with the
        // `/openai` path too rather than doubling it.
        let base = base.strip_suffix("/openai").unwrap_or(base);
        Ok(format!(
            "{base}/openai/deployments/{}/{operation}?api-version={version}",
            deployment_name(model)?
        ))
    }
}

/// Checks that `model` can be an Azure deployment name (letters, digits, `-`, `_`, `.`), so that
/// the caller's model cannot change the URL's path or query.
fn deployment_name(model: &str) -> Result<&str, ProviderError> {
    let valid = model
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        // `.` and `..` would be path segments of their own.
        && model.bytes().any(|b| b != b'.');
    if valid {
        Ok(model)
    } else {
        Err(ProviderError::InvalidRequest(format!(
            "model {model:?} is not an Azure OpenAI deployment name (letters, digits, '-', '_' and '.')"
        )))
    }
}

/// A request ready to send upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamCall {
    pub url: String,
    pub body: Map<String, Value>,
}

/// The route's base URL without a trailing slash.
pub fn base_url(route: &Route) -> Result<&str, ProviderError> {
    route.checked_base_url("https://api.openai.com/v1 or an OpenAI-compatible server")
}

/// Builds the upstream request of a completion: chat completions, or legacy completions for a
/// text prompt on a route with `legacy_completions = true`.
pub fn completion_call(
    request: &CompletionRequest,
    settings: &RouteSettings,
    stream: bool,
) -> Result<UpstreamCall, ProviderError> {
    match &request.prompt {
        Prompt::Text(text) if settings.legacy_completions => {
            if !request.functions.is_empty() {
                return Err(ProviderError::InvalidRequest(
                    "functions need chat completions, but this route sends text prompts to the legacy /completions endpoint".into(),
                ));
            }
            let mut body = caller_params(&request.params, LEGACY_OWNED_KEYS)?;
            body.insert("model".into(), Value::String(request.model.clone()));
            body.insert("prompt".into(), Value::String(text.clone()));
            set_stream(&mut body, stream);
            Ok(UpstreamCall {
                url: settings.endpoint(&request.route, &request.model, "completions")?,
                body,
            })
        }
        prompt => {
            let messages = match prompt {
                Prompt::Text(text) => vec![ChatMessage {
                    role: "user",
                    content: Some(text.clone()),
                    name: None,
                    tool_calls: Vec::new(),
                    tool_call_id: None,
                }],
                Prompt::Chat(messages) => chat_messages(messages)?,
            };
            let mut body = caller_params(&request.params, CHAT_OWNED_KEYS)?;
            body.insert("model".into(), Value::String(request.model.clone()));
            body.insert("messages".into(), to_value(&messages)?);
            if !request.functions.is_empty() {
                body.insert("tools".into(), to_value(&tools(&request.functions)?)?);
                // OpenAI rejects `tool_choice` without `tools`, so it only travels with them.
                if let Some(choice) = &request.function_choice {
                    body.insert("tool_choice".into(), tool_choice(choice));
                }
            }
            set_stream(&mut body, stream);
            Ok(UpstreamCall {
                url: settings.endpoint(&request.route, &request.model, "chat/completions")?,
                body,
            })
        }
    }
}

/// Builds the upstream request of an embeddings call.
pub fn embedding_call(
    request: &EmbeddingRequest,
    settings: &RouteSettings,
) -> Result<UpstreamCall, ProviderError> {
    let url = settings.endpoint(&request.route, &request.model, "embeddings")?;
    let mut body = caller_params(&request.params, EMBEDDING_OWNED_KEYS)?;
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("input".into(), to_value(&request.input)?);
    Ok(UpstreamCall { url, body })
}

/// The caller's params as the start of the body, without the keys the plugin owns.
fn caller_params(params: &str, owned: &[&str]) -> Result<Map<String, Value>, ProviderError> {
    let mut body = params_object(params)?;
    body.retain(|key, _| !owned.contains(&key.as_str()));
    Ok(body)
}

fn set_stream(body: &mut Map<String, Value>, stream: bool) {
    if stream {
        body.insert("stream".into(), Value::Bool(true));
        // Without this OpenAI sends no usage at all in a stream.
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
}

fn to_value<T: serde::Serialize + ?Sized>(value: &T) -> Result<Value, ProviderError> {
    serde_json::to_value(value)
        .map_err(|e| ProviderError::Failed(format!("cannot encode the upstream request: {e}")))
}

/// Maps a conversation to chat messages.
///
/// OpenAI has deprecated `functions`, so legacy function calling is expressed with tools: an
/// assistant `function_call` becomes a tool call with a synthesized id, and a `function` message
/// becomes the `tool` message answering the latest open call of that name.
pub fn chat_messages(messages: &[Message]) -> Result<Vec<ChatMessage>, ProviderError> {
    let mut out = Vec::with_capacity(messages.len());
    // Calls of the latest assistant message not answered yet, in order: (name, id).
    let mut open_calls: Vec<(String, String)> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let content = message.content.clone();
        match message.role {
            Role::System | Role::User => out.push(ChatMessage {
                role: message.role.as_str(),
                content: Some(content.unwrap_or_default()),
                name: message.name.clone(),
                tool_calls: Vec::new(),
                tool_call_id: None,
            }),
            Role::Assistant => {
                let tool_calls = assistant_tool_calls(i, message);
                open_calls.clear();
                open_calls.extend(
                    tool_calls
                        .iter()
                        .map(|c| (c.function.name.clone(), c.id.clone())),
                );
                // OpenAI wants content on an assistant message unless it calls tools.
                let content = match content {
                    None if tool_calls.is_empty() => Some(String::new()),
                    content => content,
                };
                out.push(ChatMessage {
                    role: "assistant",
                    content,
                    name: message.name.clone(),
                    tool_calls,
                    tool_call_id: None,
                });
            }
            Role::Tool => {
                let id = match message.tool_call_id.as_deref().filter(|id| !id.is_empty()) {
                    Some(id) => {
                        open_calls.retain(|(_, open)| open != id);
                        Some(id.to_owned())
                    }
                    None => take_open_call(&mut open_calls, message.name.as_deref()),
                };
                let Some(id) = id else {
                    return Err(ProviderError::InvalidRequest(format!(
                        "messages[{i}]: a tool message needs tool_call_id (or the name of a call it answers)"
                    )));
                };
                out.push(tool_message(id, content));
            }
            Role::Function => match take_open_call(&mut open_calls, message.name.as_deref()) {
                Some(id) => out.push(tool_message(id, content)),
                // Nothing to answer: keep the deprecated shape, which OpenAI still accepts.
                None => out.push(ChatMessage {
                    role: "function",
                    content: Some(content.unwrap_or_default()),
                    name: message.name.clone(),
                    tool_calls: Vec::new(),
                    tool_call_id: None,
                }),
            },
        }
    }
    Ok(out)
}

/// The tool calls of an assistant message: its `tool_calls`, else its `function_call`.
fn assistant_tool_calls(position: usize, message: &Message) -> Vec<ToolCallOut> {
    if !message.tool_calls.is_empty() {
        return message
            .tool_calls
            .iter()
            .enumerate()
            .map(|(j, call)| ToolCallOut {
                id: if call.id.is_empty() {
                    synthesized_id(position, j)
                } else {
                    call.id.clone()
                },
                kind: "function",
                function: FunctionCallOut {
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            })
            .collect();
    }
    message
        .function_call
        .iter()
        .map(|call| ToolCallOut {
            id: synthesized_id(position, 0),
            kind: "function",
            function: FunctionCallOut {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        })
        .collect()
}

/// An id for a call that came without one; unique within the conversation.
fn synthesized_id(message: usize, call: usize) -> String {
    format!("call_{message}_{call}")
}

/// Takes the first open call named `name` (any open call when the message names none).
fn take_open_call(open_calls: &mut Vec<(String, String)>, name: Option<&str>) -> Option<String> {
    let position = match name {
        Some(name) => open_calls.iter().position(|(open, _)| open == name)?,
        None if open_calls.is_empty() => return None,
        None => 0,
    };
    Some(open_calls.remove(position).1)
}

fn tool_message(id: String, content: Option<String>) -> ChatMessage {
    ChatMessage {
        role: "tool",
        content: Some(content.unwrap_or_default()),
        name: None,
        tool_calls: Vec::new(),
        tool_call_id: Some(id),
    }
}

/// Maps function definitions to `tools`.
pub fn tools(functions: &[FunctionDef]) -> Result<Vec<Tool>, ProviderError> {
    functions
        .iter()
        .enumerate()
        .map(|(i, function)| {
            let parameters = match function.parameters.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(text) => Some(serde_json::from_str::<Value>(text).map_err(|e| {
                    ProviderError::InvalidRequest(format!(
                        "functions[{i}].parameters is not valid JSON: {e}"
                    ))
                })?),
            };
            Ok(Tool {
                kind: "function",
                function: ToolFunction {
                    name: function.name.clone(),
                    description: function.description.clone(),
                    parameters,
                },
            })
        })
        .collect()
}

/// Maps a function choice to `tool_choice`.
pub fn tool_choice(choice: &FunctionChoice) -> Value {
    match choice {
        FunctionChoice::None => json!("none"),
        FunctionChoice::Auto => json!("auto"),
        FunctionChoice::Required => json!("required"),
        FunctionChoice::Named(name) => json!({ "type": "function", "function": { "name": name } }),
    }
}

/// Maps an OpenAI `finish_reason`.
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" => FinishReason::ToolCalls,
        "function_call" => FinishReason::FunctionCall,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Maps OpenAI's usage; a missing total is the sum of the parts.
pub fn usage(wire: &WireUsage) -> Usage {
    let prompt_tokens = wire.prompt_tokens.unwrap_or(0);
    let completion_tokens = wire.completion_tokens.unwrap_or(0);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: wire
            .total_tokens
            .unwrap_or(prompt_tokens.saturating_add(completion_tokens)),
        // Included in `prompt_tokens`, as the gateway's usage wants it.
        cached_prompt_tokens: wire
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .or(wire.prompt_cache_hit_tokens),
        // OpenAI-compatible APIs report no cache writes (OpenAI's are free).
        cache_creation_tokens: None,
        reasoning_tokens: wire
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens),
    }
}

/// The error for an answer the plugin cannot read. Never quotes the body: it may be huge.
pub fn malformed(error: impl std::fmt::Display) -> ProviderError {
    ProviderError::Failed(format!("malformed response from upstream: {error}"))
}

/// An error the upstream reported inside a successful answer (mid-stream, or status 200 with an
/// `error` object). Its status is the error's numeric `code` when that is an HTTP error status,
/// else 500: the upstream failed after accepting the request.
pub fn embedded_error(error: &Value) -> ProviderError {
    let message = match error {
        Value::String(message) => message.clone(),
        Value::Object(object) => match object.get("message") {
            Some(Value::String(message)) => message.clone(),
            _ => error.to_string(),
        },
        other => other.to_string(),
    };
    let status = error
        .get("code")
        .and_then(|code| match code {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        })
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..=599).contains(code))
        .unwrap_or(500);
    ProviderError::Upstream(UpstreamError {
        status,
        message,
        retry_after: None,
    })
}

/// Parses a non-streamed answer of `/chat/completions` or `/completions`.
pub fn parse_completion(body: &[u8], requested_model: &str) -> Result<Completion, ProviderError> {
    let response: CompletionResponse = serde_json::from_slice(body).map_err(malformed)?;
    if response.choices.is_empty()
        && let Some(error) = response.error.as_ref().filter(|e| !e.is_null())
    {
        return Err(embedded_error(error));
    }
    let mut choices: Vec<Choice> = response.choices.into_iter().map(response_choice).collect();
    choices.sort_by_key(|c| c.index);
    Ok(Completion {
        model: response
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        choices,
        usage: response.usage.as_ref().map(usage),
    })
}

fn response_choice(choice: ResponseChoice) -> Choice {
    let index = choice.index;
    let (text, tool_calls, function_call) = match choice.message {
        Some(message) => {
            let tool_calls = message
                .tool_calls
                .into_iter()
                .enumerate()
                .filter_map(|(j, call)| tool_call(index, j, call))
                .collect();
            (
                message.content.unwrap_or_default(),
                tool_calls,
                message.function_call.map(function_call),
            )
        }
        None => (choice.text.unwrap_or_default(), Vec::new(), None),
    };
    let mut choice = Choice {
        index,
        text,
        finish_reason: choice.finish_reason.as_deref().map(finish_reason),
        function_call,
        tool_calls,
        logprobs: choice
            .logprobs
            .filter(|l| !l.is_null())
            .map(|l| l.to_string()),
    };
    complete_tool_calls(&mut choice);
    choice
}

fn tool_call(choice: u32, position: usize, call: ToolCallIn) -> Option<ToolCall> {
    let function = call.function?;
    Some(ToolCall {
        id: call
            .id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| stream_call_id(choice, position)),
        name: function.name.unwrap_or_default(),
        arguments: function.arguments.unwrap_or_default(),
    })
}

fn function_call(call: FunctionCallIn) -> FunctionCall {
    FunctionCall {
        name: call.name.unwrap_or_default(),
        arguments: call.arguments.unwrap_or_default(),
    }
}

/// An id for an answered tool call that came without one (some compatible servers omit it), so
/// the caller can answer it.
fn stream_call_id(choice: u32, position: usize) -> String {
    format!("call_{choice}_{position}")
}

/// Gives every tool call an id and sets `function_call` to the first tool call when the choice
/// has none (Commonbase clients read `function_call`).
pub fn complete_tool_calls(choice: &mut Choice) {
    for (position, call) in choice.tool_calls.iter_mut().enumerate() {
        if call.id.is_empty() {
            call.id = stream_call_id(choice.index, position);
        }
    }
    if choice.function_call.is_none()
        && let Some(first) = choice.tool_calls.first()
    {
        choice.function_call = Some(FunctionCall {
            name: first.name.clone(),
            arguments: first.arguments.clone(),
        });
    }
}

/// Parses an answer of `/embeddings`: one vector per input, in input order.
pub fn parse_embeddings(
    body: &[u8],
    requested_model: &str,
    inputs: usize,
) -> Result<Embeddings, ProviderError> {
    let response: EmbeddingResponse = serde_json::from_slice(body).map_err(malformed)?;
    let mut data = response.data;
    if data.len() != inputs {
        return Err(malformed(format!(
            "{} embeddings for {inputs} inputs",
            data.len()
        )));
    }
    data.sort_by_key(|d| d.index);
    let vectors = data
        .into_iter()
        .map(|d| match d.embedding {
            EmbeddingVector::Floats(vector) => Ok(vector),
            EmbeddingVector::Base64(text) => decode_base64_f32(&text),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Embeddings {
        model: response
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        vectors,
        usage: response.usage.as_ref().map(usage),
    })
}

/// Decodes a base64 embedding (`encoding_format: "base64"`): little-endian f32s. Padding is
/// optional, and the URL-safe alphabet is accepted too (some OpenAI-compatible servers use it).
fn decode_base64_f32(text: &str) -> Result<Vec<f32>, ProviderError> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    let bytes = STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|_| malformed("an embedding is neither floats nor base64"))?;
    if bytes.len() % 4 != 0 {
        return Err(malformed(
            "a base64 embedding is not a whole number of f32s",
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}
