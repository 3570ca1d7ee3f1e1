//! Mapping between the gateway's types and the Gemini API. Everything here is pure (no I/O), so
//! it is unit-tested natively.

use gateway_plugin_sdk::{
    CompletionRequest, EmbeddingRequest, Embeddings, FinishReason, FunctionChoice, FunctionDef,
    Message, Prompt, ProviderError, Role, Route, UpstreamError, Usage, params_object,
};
use serde_json::{Map, Value, json};

use crate::schema;
use crate::wire::{
    BatchEmbedResponse, Content, FunctionCallOut, FunctionDeclaration, FunctionResponseOut, Part,
    Tool, UsageMetadata,
};

/// The value Google documents for a function call whose thought signature is unknown (history
/// written by the client, or a call whose signature the caller could not keep). Gemini 3 and
/// later refuse replayed function calls without a signature; this one skips the check.
pub const THOUGHT_SIGNATURE_SENTINEL: &str = "skip_thought_signature_validator";

/// `generationConfig` fields with the caller's names for them, first name winning: Gemini's own
/// (camelCase), its snake_case form, then the OpenAI and Commonbase names callers already use.
const GENERATION_ALIASES: &[(&str, &[&str])] = &[
    ("temperature", &["temperature"]),
    ("topP", &["topP", "top_p"]),
    ("topK", &["topK", "top_k"]),
    (
        "maxOutputTokens",
        &[
            "maxOutputTokens",
            "max_output_tokens",
            "max_tokens",
            "max_completion_tokens",
            "max_tokens_to_sample",
        ],
    ),
    (
        "stopSequences",
        &["stopSequences", "stop_sequences", "stop"],
    ),
    (
        "candidateCount",
        &["candidateCount", "candidate_count", "n"],
    ),
    ("presencePenalty", &["presencePenalty", "presence_penalty"]),
    (
        "frequencyPenalty",
        &["frequencyPenalty", "frequency_penalty"],
    ),
    ("seed", &["seed"]),
    (
        "responseMimeType",
        &["responseMimeType", "response_mime_type"],
    ),
];

/// Request fields (outside `generationConfig`) callers may set through params.
const TOP_LEVEL_ALIASES: &[(&str, &[&str])] = &[
    ("safetySettings", &["safetySettings", "safety_settings"]),
    ("cachedContent", &["cachedContent", "cached_content"]),
];

/// Params the plugin decides itself: streaming is chosen by the endpoint, not by a flag.
const IGNORED_PARAMS: &[&str] = &["stream", "stream_options"];

/// `embedContent` request fields with the caller's names for them.
const EMBEDDING_ALIASES: &[(&str, &[&str])] = &[
    ("taskType", &["taskType", "task_type"]),
    ("title", &["title"]),
    (
        "outputDimensionality",
        &[
            "outputDimensionality",
            "output_dimensionality",
            "dimensions",
        ],
    ),
];

/// A request ready to send upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamCall {
    pub url: String,
    pub body: Map<String, Value>,
}

/// The route's base URL without a trailing slash.
pub fn base_url(route: &Route) -> Result<&str, ProviderError> {
    route.checked_base_url("https://generativelanguage.googleapis.com/v1beta")
}

/// The model's resource name: `models/{id}` (a `models/` prefix the caller wrote is kept once),
/// or `tunedModels/{id}` as given.
pub fn model_resource(model: &str) -> Result<String, ProviderError> {
    let model = model.trim();
    let (collection, id) = match model.split_once('/') {
        Some(("tunedModels", id)) => ("tunedModels", id),
        Some(("models", id)) => ("models", id),
        _ => ("models", model),
    };
    if id.is_empty() || id.contains('/') {
        return Err(ProviderError::InvalidRequest(format!(
            "{model:?} is not a Gemini model name (e.g. gemini-2.5-flash)"
        )));
    }
    Ok(format!("{collection}/{id}"))
}

/// `{base}/{resource}:{method}`, the model id percent-encoded so that no character of it can
/// change the URL's meaning.
fn method_url(base: &str, model: &str, method: &str) -> Result<String, ProviderError> {
    let resource = model_resource(model)?;
    let (collection, id) = resource
        .split_once('/')
        .unwrap_or(("models", resource.as_str()));
    Ok(format!(
        "{base}/{collection}/{}:{method}",
        percent_encode(id)
    ))
}

/// Every byte but RFC 3986's unreserved characters is encoded.
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn percent_encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, NOT_UNRESERVED).to_string()
}

/// Builds the upstream request of a completion: `generateContent`, or
/// `streamGenerateContent?alt=sse` when streaming.
pub fn completion_call(
    request: &CompletionRequest,
    stream: bool,
) -> Result<UpstreamCall, ProviderError> {
    let base = base_url(&request.route)?;
    let url = if stream {
        format!(
            "{}?alt=sse",
            method_url(base, &request.model, "streamGenerateContent")?
        )
    } else {
        method_url(base, &request.model, "generateContent")?
    };

    let (system, contents) = match &request.prompt {
        Prompt::Text(text) => (
            Vec::new(),
            push_content(Vec::new(), "user", text_parts(text)),
        ),
        Prompt::Chat(messages) => conversation(messages, &request.model)?,
    };
    if contents.is_empty() {
        return Err(ProviderError::InvalidRequest(
            "Gemini needs at least one user or assistant message with content".into(),
        ));
    }

    let SplitParams {
        generation_config,
        request_fields,
    } = generation_config(&request.params)?;
    let mut body = request_fields;
    body.insert("contents".into(), to_value(&contents)?);
    if !system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            to_value(&Content {
                role: None,
                parts: system,
            })?,
        );
    }
    if !request.functions.is_empty() {
        body.insert("tools".into(), to_value(&tools(&request.functions)?)?);
        // A function choice means nothing without functions to choose from.
        if let Some(choice) = &request.function_choice {
            body.insert("toolConfig".into(), tool_config(choice));
        }
    }
    if !generation_config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation_config));
    }
    Ok(UpstreamCall { url, body })
}

/// Builds the `batchEmbedContents` request: one `embedContent` request per input, in order.
/// (`embedContent` is the single-input form; the batch form serves one input as well and keeps
/// every gateway call to one upstream call.)
pub fn embedding_call(request: &EmbeddingRequest) -> Result<UpstreamCall, ProviderError> {
    let base = base_url(&request.route)?;
    let url = method_url(base, &request.model, "batchEmbedContents")?;
    let resource = model_resource(&request.model)?;
    let mut params = params_object(&request.params)?;
    let mut shared = Map::new();
    for (field, aliases) in EMBEDDING_ALIASES {
        if let Some(value) = take_alias(&mut params, aliases) {
            shared.insert((*field).into(), value);
        }
    }
    // Anything else is an `embedContent` field the plugin does not know yet: passed as is.
    for (key, value) in params {
        if !value.is_null() && !["model", "content"].contains(&key.as_str()) {
            shared.insert(key, value);
        }
    }
    let requests: Vec<Value> = request
        .input
        .iter()
        .map(|input| {
            let mut one = shared.clone();
            one.insert("model".into(), json!(resource));
            one.insert("content".into(), json!({"parts": [{"text": input}]}));
            Value::Object(one)
        })
        .collect();
    let mut body = Map::new();
    body.insert("requests".into(), Value::Array(requests));
    Ok(UpstreamCall { url, body })
}

fn to_value<T: serde::Serialize + ?Sized>(value: &T) -> Result<Value, ProviderError> {
    serde_json::to_value(value)
        .map_err(|e| ProviderError::Failed(format!("cannot encode the upstream request: {e}")))
}

/// A text part, or nothing for empty text: Gemini refuses empty text parts.
fn text_parts(text: &str) -> Vec<Part> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![Part::text(text)]
    }
}

/// Appends `parts` as a `role` turn, merging into the last turn when it has the same role
/// (Gemini wants one turn per speaker change; consecutive function results share one user turn).
fn push_content(mut contents: Vec<Content>, role: &'static str, parts: Vec<Part>) -> Vec<Content> {
    if parts.is_empty() {
        return contents;
    }
    match contents.last_mut() {
        Some(last) if last.role == Some(role) => last.parts.extend(parts),
        _ => contents.push(Content {
            role: Some(role),
            parts,
        }),
    }
    contents
}

/// Maps a chat conversation to the system instruction's parts and the turns.
///
/// System messages (wherever they are) make the system instruction; user messages are `user`
/// turns; assistant messages are `model` turns whose `tool_calls` (or legacy `function_call`)
/// become `functionCall` parts; `tool` and `function` messages are `functionResponse` parts of a
/// `user` turn, named after the call they answer.
pub fn conversation(
    messages: &[Message],
    model: &str,
) -> Result<(Vec<Part>, Vec<Content>), ProviderError> {
    let mut system = Vec::new();
    let mut contents = Vec::new();
    // Calls of the latest assistant message not answered yet, in order: (id, name).
    let mut open_calls: Vec<(String, String)> = Vec::new();
    let signature = requires_thought_signatures(model).then_some(THOUGHT_SIGNATURE_SENTINEL);
    for (i, message) in messages.iter().enumerate() {
        let content = message.content.as_deref().unwrap_or("");
        match message.role {
            Role::System => system.extend(text_parts(content)),
            Role::User => contents = push_content(contents, "user", text_parts(content)),
            Role::Assistant => {
                let calls = assistant_calls(i, message)?;
                open_calls = calls
                    .iter()
                    .map(|call| (call.id.clone().unwrap_or_default(), call.name.clone()))
                    .collect();
                let mut parts = text_parts(content);
                parts.extend(calls.into_iter().map(|call| Part {
                    function_call: Some(call),
                    thought_signature: signature.map(str::to_owned),
                    ..Part::default()
                }));
                contents = push_content(contents, "model", parts);
            }
            Role::Tool => {
                let id = message.tool_call_id.as_deref().filter(|id| !id.is_empty());
                let answered = match id {
                    Some(id) => open_calls
                        .iter()
                        .position(|(open, _)| open == id)
                        .map(|p| open_calls.remove(p)),
                    None => take_open_call(&mut open_calls, message.name.as_deref()),
                };
                let name = message
                    .name
                    .clone()
                    .filter(|n| !n.is_empty())
                    .or_else(|| answered.as_ref().map(|(_, name)| name.clone()))
                    .ok_or_else(|| {
                        ProviderError::InvalidRequest(format!(
                            "messages[{i}]: Gemini needs the function's name for a tool result; \
                             give the message a name or a tool_call_id of an earlier call"
                        ))
                    })?;
                let id = id
                    .map(str::to_owned)
                    .or_else(|| answered.map(|(id, _)| id))
                    .filter(|id| !id.is_empty());
                contents = push_content(contents, "user", vec![response_part(id, name, content)]);
            }
            Role::Function => {
                let answered = take_open_call(&mut open_calls, message.name.as_deref());
                let name = message
                    .name
                    .clone()
                    .filter(|n| !n.is_empty())
                    .or_else(|| answered.as_ref().map(|(_, name)| name.clone()))
                    .ok_or_else(|| {
                        ProviderError::InvalidRequest(format!(
                            "messages[{i}]: a function message needs the function's name"
                        ))
                    })?;
                let id = answered.map(|(id, _)| id).filter(|id| !id.is_empty());
                contents = push_content(contents, "user", vec![response_part(id, name, content)]);
            }
        }
    }
    Ok((system, contents))
}

/// The function calls of an assistant message: its `tool_calls`, else its `function_call`.
fn assistant_calls(
    position: usize,
    message: &Message,
) -> Result<Vec<FunctionCallOut>, ProviderError> {
    if !message.tool_calls.is_empty() {
        return message
            .tool_calls
            .iter()
            .enumerate()
            .map(|(j, call)| {
                Ok(FunctionCallOut {
                    id: Some(call.id.clone()).filter(|id| !id.is_empty()),
                    name: call.name.clone(),
                    args: arguments_object(&call.arguments).ok_or_else(|| {
                        ProviderError::InvalidRequest(format!(
                            "messages[{position}].tool_calls[{j}].arguments must be a JSON object"
                        ))
                    })?,
                })
            })
            .collect();
    }
    message
        .function_call
        .iter()
        .map(|call| {
            Ok(FunctionCallOut {
                id: None,
                name: call.name.clone(),
                args: arguments_object(&call.arguments).ok_or_else(|| {
                    ProviderError::InvalidRequest(format!(
                        "messages[{position}].function_call.arguments must be a JSON object"
                    ))
                })?,
            })
        })
        .collect()
}

/// A call's arguments as the JSON object Gemini wants; empty text is no arguments.
fn arguments_object(arguments: &str) -> Option<Value> {
    if arguments.trim().is_empty() {
        return Some(json!({}));
    }
    match serde_json::from_str(arguments) {
        Ok(object @ Value::Object(_)) => Some(object),
        _ => None,
    }
}

/// Takes the first open call named `name` (any open call when the message names none).
fn take_open_call(
    open_calls: &mut Vec<(String, String)>,
    name: Option<&str>,
) -> Option<(String, String)> {
    let position = match name.filter(|n| !n.is_empty()) {
        Some(name) => open_calls.iter().position(|(_, open)| open == name)?,
        None if open_calls.is_empty() => return None,
        None => 0,
    };
    Some(open_calls.remove(position))
}

/// A function's result: the content when it is a JSON object, else the content as text under
/// `output`, the key Google documents for a function's output.
fn response_part(id: Option<String>, name: String, content: &str) -> Part {
    let response = match serde_json::from_str::<Value>(content) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({ "output": content }),
    };
    Part {
        function_response: Some(FunctionResponseOut { id, name, response }),
        ..Part::default()
    }
}

/// Whether the model refuses replayed function calls without a thought signature: Gemini 3 and
/// later. Earlier models accept calls without one, and are not sent the sentinel they might not
/// know.
pub fn requires_thought_signatures(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    let Some(version) = name.strip_prefix("gemini-") else {
        return false;
    };
    let major: String = version.chars().take_while(char::is_ascii_digit).collect();
    major.parse::<u32>().is_ok_and(|major| major >= 3)
}

/// Maps function definitions to one `tools` entry of function declarations.
pub fn tools(functions: &[FunctionDef]) -> Result<Vec<Tool>, ProviderError> {
    let declarations = functions
        .iter()
        .enumerate()
        .map(|(i, function)| {
            let parameters = match function.parameters.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(text) => {
                    let schema: Value = serde_json::from_str(text).map_err(|e| {
                        ProviderError::InvalidRequest(format!(
                            "functions[{i}].parameters is not valid JSON: {e}"
                        ))
                    })?;
                    schema::parameters(&schema)
                }
            };
            Ok(FunctionDeclaration {
                name: function.name.clone(),
                description: function.description.clone(),
                parameters,
            })
        })
        .collect::<Result<Vec<_>, ProviderError>>()?;
    Ok(vec![Tool {
        function_declarations: declarations,
    }])
}

/// Maps a function choice to `toolConfig`.
pub fn tool_config(choice: &FunctionChoice) -> Value {
    let config = match choice {
        FunctionChoice::None => json!({"mode": "NONE"}),
        FunctionChoice::Auto => json!({"mode": "AUTO"}),
        FunctionChoice::Required => json!({"mode": "ANY"}),
        FunctionChoice::Named(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    };
    json!({ "functionCallingConfig": config })
}

/// The caller's params, split by where they go in the request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SplitParams {
    /// The `generationConfig` object.
    pub generation_config: Map<String, Value>,
    /// Fields of the request itself (`safetySettings`, `cachedContent`).
    pub request_fields: Map<String, Value>,
}

/// Splits the caller's params into `generationConfig` and top-level request fields.
///
/// - Known parameters are renamed (see [`GENERATION_ALIASES`]): `max_tokens` becomes
///   `maxOutputTokens`, `stop` (a string or a list) `stopSequences`, `n` `candidateCount`, ...
/// - `response_format: {"type": "json_object"}` asks for `application/json`;
///   `{"type": "json_schema", "json_schema": {"schema": S}}` also sets `responseSchema`.
/// - `safetySettings` and `cachedContent` are request fields, not generation settings.
/// - A `generationConfig` object is the starting point; flat params override its fields.
/// - Every other param goes into `generationConfig` as is (`thinkingConfig`,
///   `responseModalities`, ...), so new Gemini settings work without a plugin update; Gemini
///   answers 400 for names it does not know.
/// - `null` values are left out: they mean "not set".
pub fn generation_config(params: &str) -> Result<SplitParams, ProviderError> {
    let mut params = params_object(params)?;
    params.retain(|key, value| !value.is_null() && !IGNORED_PARAMS.contains(&key.as_str()));

    let mut top_level = Map::new();
    for (field, aliases) in TOP_LEVEL_ALIASES {
        if let Some(value) = take_alias(&mut params, aliases) {
            top_level.insert((*field).into(), value);
        }
    }

    let mut config = match take_alias(&mut params, &["generationConfig", "generation_config"]) {
        None => Map::new(),
        Some(Value::Object(config)) => config,
        Some(_) => {
            return Err(ProviderError::InvalidRequest(
                "params.generationConfig must be an object".into(),
            ));
        }
    };
    if let Some(format) = params.remove("response_format") {
        response_format(&format, &mut config)?;
    }
    for (field, aliases) in GENERATION_ALIASES {
        if let Some(mut value) = take_alias(&mut params, aliases) {
            if *field == "stopSequences"
                && let Value::String(stop) = value
            {
                value = json!([stop]);
            }
            config.insert((*field).into(), value);
        }
    }
    config.extend(params);
    Ok(SplitParams {
        generation_config: config,
        request_fields: top_level,
    })
}

/// Removes every alias from `params` and returns the value of the first one present.
fn take_alias(params: &mut Map<String, Value>, aliases: &[&str]) -> Option<Value> {
    let mut found = None;
    for alias in aliases {
        if let Some(value) = params.remove(*alias)
            && found.is_none()
        {
            found = Some(value);
        }
    }
    found
}

/// Maps OpenAI's `response_format` into `config`.
fn response_format(format: &Value, config: &mut Map<String, Value>) -> Result<(), ProviderError> {
    let invalid = || {
        ProviderError::InvalidRequest(
            "params.response_format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or \
             {\"type\": \"json_schema\", \"json_schema\": {\"schema\": ...}}"
                .into(),
        )
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => {}
        Some("json_object") => {
            config.insert("responseMimeType".into(), json!("application/json"));
        }
        Some("json_schema") => {
            let schema = format
                .get("json_schema")
                .and_then(|s| s.get("schema"))
                .ok_or_else(invalid)?;
            config.insert("responseMimeType".into(), json!("application/json"));
            config.insert("responseSchema".into(), schema::convert(schema));
        }
        _ => return Err(invalid()),
    }
    Ok(())
}

/// Maps a Gemini `finishReason`. `STOP` on a candidate that called functions is decided by the
/// caller (it becomes `ToolCalls`).
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Maps `usageMetadata`.
///
/// Thoughts are billed as output, so they count as completion tokens (and are reported as
/// reasoning tokens); tool-use prompt tokens (results of built-in tools fed back to the model)
/// are billed as input, so they count as prompt tokens. A missing total is the sum of the parts.
pub fn usage(wire: &UsageMetadata) -> Usage {
    let prompt_tokens = wire
        .prompt_token_count
        .unwrap_or(0)
        .saturating_add(wire.tool_use_prompt_token_count.unwrap_or(0));
    let completion_tokens = wire
        .candidates_token_count
        .unwrap_or(0)
        .saturating_add(wire.thoughts_token_count.unwrap_or(0));
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: wire
            .total_token_count
            .unwrap_or(prompt_tokens.saturating_add(completion_tokens)),
        cached_prompt_tokens: wire.cached_content_token_count,
        cache_creation_tokens: None,
        reasoning_tokens: wire.thoughts_token_count,
    }
}

/// The error for an answer the plugin cannot read. Never quotes the body: it may be huge.
pub fn malformed(error: impl std::fmt::Display) -> ProviderError {
    ProviderError::Failed(format!("malformed response from upstream: {error}"))
}

/// An error Google reported inside a successful answer (`{"error": {"code", "message",
/// "status"}}`, e.g. mid-stream). Its status is the error's `code` when that is an HTTP error
/// status, else the HTTP status of its canonical `status` name, else 500.
pub fn embedded_error(error: &Value) -> ProviderError {
    let message = match error {
        Value::String(message) => message.clone(),
        Value::Object(object) => match object.get("message") {
            Some(Value::String(message)) if !message.trim().is_empty() => message.clone(),
            _ => error.to_string(),
        },
        other => other.to_string(),
    };
    let from_code = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..=599).contains(code));
    let from_status = error
        .get("status")
        .and_then(Value::as_str)
        .and_then(|status| match status {
            "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => Some(400),
            "UNAUTHENTICATED" => Some(401),
            "PERMISSION_DENIED" => Some(403),
            "NOT_FOUND" => Some(404),
            "RESOURCE_EXHAUSTED" => Some(429),
            "UNAVAILABLE" => Some(503),
            "DEADLINE_EXCEEDED" => Some(504),
            _ => None,
        });
    ProviderError::Upstream(UpstreamError {
        status: from_code.or(from_status).unwrap_or(500),
        message,
        retry_after: None,
    })
}

/// Parses an answer of `batchEmbedContents`: one vector per input, in input order.
pub fn parse_embeddings(
    body: &[u8],
    requested_model: &str,
    inputs: usize,
) -> Result<Embeddings, ProviderError> {
    let response: BatchEmbedResponse = serde_json::from_slice(body).map_err(malformed)?;
    if response.embeddings.len() != inputs {
        return Err(malformed(format!(
            "{} embeddings for {inputs} inputs",
            response.embeddings.len()
        )));
    }
    Ok(Embeddings {
        model: requested_model.to_owned(),
        vectors: response.embeddings.into_iter().map(|e| e.values).collect(),
        // Google reports no token counts for embeddings.
        usage: None,
    })
}
