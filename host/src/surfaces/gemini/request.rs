//! Gemini's request bodies as Google's clients send them (`GenerateContentRequest`,
//! `CountTokensRequest`, `EmbedContentRequest`, `BatchEmbedContentsRequest`), and their
//! translation into the plugin's canonical request: `systemInstruction` and `contents` into
//! chat messages, `functionCall`/`functionResponse` parts into tool calls and tool messages,
//! `generationConfig` into the canonical parameter names. Field names are read as Google's
//! JSON mapping writes them (camelCase), and as its parsers also take them (snake_case).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::flow::Prompted;
use crate::plugins::types;
use crate::surfaces::parts;

/// `Content`: a turn's role and its parts. Parts stay JSON values: each one refused is named
/// by its place (`contents[1].parts[0]`).
#[derive(Debug, Deserialize)]
pub struct ContentIn {
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Value>,
}

/// `functionCallingConfig`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallingConfigIn {
    mode: Option<String>,
    #[serde(alias = "allowed_function_names")]
    allowed_function_names: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfigIn {
    #[serde(alias = "function_calling_config")]
    function_calling_config: Option<CallingConfigIn>,
}

/// `GenerateContentRequest`: the body of `generateContent` and `streamGenerateContent`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateBody {
    /// Only in a `countTokens` body's `generateContentRequest`, where Google requires it.
    model: Option<String>,
    contents: Option<Vec<ContentIn>>,
    #[serde(alias = "system_instruction")]
    system_instruction: Option<ContentIn>,
    tools: Option<Vec<Map<String, Value>>>,
    #[serde(alias = "tool_config")]
    tool_config: Option<ToolConfigIn>,
    #[serde(alias = "generation_config")]
    generation_config: Option<Map<String, Value>>,
    /// The rest (`safetySettings`, `cachedContent`, …): the plugin gets them as they are.
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// `CountTokensRequest`: `contents`, or a whole `generateContentRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CountBody {
    contents: Option<Vec<ContentIn>>,
    #[serde(alias = "generate_content_request")]
    generate_content_request: Option<GenerateBody>,
}

/// `EmbedContentRequest`: one content to embed, and how.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EmbedBody {
    model: Option<String>,
    content: Option<ContentIn>,
    #[serde(alias = "task_type")]
    task_type: Option<String>,
    title: Option<String>,
    #[serde(alias = "output_dimensionality")]
    output_dimensionality: Option<u32>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
struct BatchBody {
    requests: Option<Vec<EmbedBody>>,
}

/// A generate request whose fields have been read.
#[derive(Debug)]
pub struct Generate {
    body: GenerateBody,
}

/// An embedding request (one content, or a batch): the texts and the parameters they share.
#[derive(Debug)]
pub struct Embed {
    pub input: Vec<String>,
    params: Map<String, Value>,
}

/// Reads a `generateContent` body; `contents` is required.
pub fn generate(bytes: &[u8]) -> Result<Generate, ApiError> {
    let body: GenerateBody = crate::surfaces::json::parse_object(bytes)?;
    require_contents(body.contents.as_deref(), "contents")?;
    Ok(Generate { body })
}

/// Reads a `countTokens` body: `contents`, or a `generateContentRequest` (not both).
pub fn count(bytes: &[u8]) -> Result<Generate, ApiError> {
    let body: CountBody = crate::surfaces::json::parse_object(bytes)?;
    let body = match (body.contents, body.generate_content_request) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "generateContentRequest",
                "contents and generateContentRequest cannot both be set",
            ));
        }
        (Some(contents), None) => GenerateBody {
            model: None,
            contents: Some(contents),
            system_instruction: None,
            tools: None,
            tool_config: None,
            generation_config: None,
            extra: Map::new(),
        },
        (None, Some(request)) => {
            let place = "generateContentRequest.contents";
            require_contents(request.contents.as_deref(), place)?;
            request
        }
        (None, None) => {
            return Err(ApiError::invalid(
                "contents",
                "contents: either contents or generateContentRequest is required",
            ));
        }
    };
    Ok(Generate { body })
}

fn require_contents(contents: Option<&[ContentIn]>, place: &str) -> Result<(), ApiError> {
    match contents {
        Some([]) | None => Err(ApiError::invalid(
            place,
            format!("{place}: at least one content is required"),
        )),
        Some(_) => Ok(()),
    }
}

/// Reads an `embedContent` body: its `content`'s text.
pub fn embed(bytes: &[u8], model: &str) -> Result<Embed, ApiError> {
    let body: EmbedBody = crate::surfaces::json::parse_object(bytes)?;
    check_model(body.model.as_deref(), model, "model")?;
    let input = embed_text(body.content.as_ref(), "content")?;
    Ok(Embed {
        input: vec![input],
        params: embed_params(&body),
    })
}

/// Reads a `batchEmbedContents` body: each request's text, in order. The requests are one
/// call to the route, so they share one model and one `taskType`, `title` and
/// `outputDimensionality`.
pub fn batch_embed(bytes: &[u8], model: &str) -> Result<Embed, ApiError> {
    let body: BatchBody = crate::surfaces::json::parse_object(bytes)?;
    let requests = match body.requests {
        Some(requests) if !requests.is_empty() => requests,
        _ => {
            return Err(ApiError::invalid(
                "requests",
                "requests: at least one request is required",
            ));
        }
    };
    let params = embed_params(&requests[0]);
    let mut input = Vec::with_capacity(requests.len());
    for (i, request) in requests.iter().enumerate() {
        check_model(
            request.model.as_deref(),
            model,
            &format!("requests[{i}].model"),
        )?;
        if embed_params(request) != params {
            return Err(ApiError::invalid(
                format!("requests[{i}]"),
                format!(
                    "requests[{i}]: taskType, title, outputDimensionality and other settings \
                     must be the same in every request of a batch (they are one call)"
                ),
            ));
        }
        input.push(embed_text(
            request.content.as_ref(),
            &format!("requests[{i}].content"),
        )?);
    }
    Ok(Embed { input, params })
}

/// A request's own `model` (`models/NAME`), if it names one, is the path's.
fn check_model(named: Option<&str>, model: &str, place: &str) -> Result<(), ApiError> {
    match named {
        Some(named) if named.strip_prefix("models/").unwrap_or(named) != model => {
            Err(ApiError::invalid(
                place,
                format!("{place}: {named:?} is not the model of the path (models/{model})"),
            ))
        }
        _ => Ok(()),
    }
}

/// The text of a content to embed: its text parts, one per line.
fn embed_text(content: Option<&ContentIn>, place: &str) -> Result<String, ApiError> {
    let Some(content) = content else {
        return Err(ApiError::invalid(place, format!("{place}: required")));
    };
    let mut texts = Vec::with_capacity(content.parts.len());
    for (j, part) in content.parts.iter().enumerate() {
        match part.get("text").and_then(Value::as_str) {
            Some(text) => texts.push(text),
            None => {
                let place = format!("{place}.parts[{j}]");
                return Err(ApiError::invalid(
                    place.clone(),
                    format!("{place}: only text parts can be embedded"),
                ));
            }
        }
    }
    if texts.is_empty() {
        return Err(ApiError::invalid(
            format!("{place}.parts"),
            format!("{place}.parts: at least one text part is required"),
        ));
    }
    Ok(texts.join("\n"))
}

/// The plugin's parameters of an embedding request: `dimensions` (OpenAI's name, which every
/// plugin reads) for `outputDimensionality`, Gemini's names for the rest.
fn embed_params(body: &EmbedBody) -> Map<String, Value> {
    let mut params = body.extra.clone();
    params.remove("model");
    if let Some(task_type) = &body.task_type {
        params.insert("taskType".into(), json!(task_type));
    }
    if let Some(title) = &body.title {
        params.insert("title".into(), json!(title));
    }
    if let Some(dimensions) = body.output_dimensionality {
        params.insert("dimensions".into(), json!(dimensions));
    }
    params
}

impl Embed {
    pub fn params(&self) -> &Map<String, Value> {
        &self.params
    }
}

/// `generationConfig` fields and the canonical names they take.
const RENAMED: &[(&str, &str, &str)] = &[
    ("temperature", "temperature", "temperature"),
    ("topP", "top_p", "top_p"),
    ("topK", "top_k", "top_k"),
    ("maxOutputTokens", "max_output_tokens", "max_tokens"),
    ("stopSequences", "stop_sequences", "stop"),
    ("candidateCount", "candidate_count", "n"),
    ("presencePenalty", "presence_penalty", "presence_penalty"),
    ("frequencyPenalty", "frequency_penalty", "frequency_penalty"),
    ("seed", "seed", "seed"),
    ("responseLogprobs", "response_logprobs", "logprobs"),
    ("logprobs", "logprobs", "top_logprobs"),
];

/// Request fields that only Gemini's plugins can serve, and that mean nothing to another
/// provider (its own safety filters cannot be set): left out on other routes.
const GEMINI_ONLY: &[&str] = &["safetySettings", "safety_settings"];

/// The plugins that speak Gemini's API upstream.
fn speaks_gemini(plugin: &str) -> bool {
    matches!(plugin, "gemini" | "vertex")
}

impl Generate {
    /// A `countTokens` body's `generateContentRequest.model`, which names the path's model.
    pub fn check_model(&self, model: &str) -> Result<(), ApiError> {
        check_model(
            self.body.model.as_deref(),
            model,
            "generateContentRequest.model",
        )
    }

    fn config(&self) -> Option<&Map<String, Value>> {
        self.body.generation_config.as_ref()
    }

    fn config_field(&self, camel: &str, snake: &str) -> Option<&Value> {
        let config = self.config()?;
        config
            .get(camel)
            .or_else(|| config.get(snake))
            .filter(|v| !v.is_null())
    }

    /// Whether the caller asked for the model's thoughts (`thinkingConfig.includeThoughts`).
    pub fn include_thoughts(&self) -> bool {
        self.thinking()
            .and_then(|t| {
                t.get("includeThoughts")
                    .or_else(|| t.get("include_thoughts"))
            })
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    fn thinking(&self) -> Option<&Map<String, Value>> {
        self.config_field("thinkingConfig", "thinking_config")?
            .as_object()
    }

    /// The plugin's parameters: `generationConfig`'s fields under their canonical names
    /// (`responseMimeType` and a schema as `response_format`), the rest of it and of the body
    /// as they are; `plugin` is the route's, which decides whether Gemini-only fields go.
    pub fn params(&self, plugin: &str) -> Result<Map<String, Value>, ApiError> {
        let mut params = self.body.extra.clone();
        if !speaks_gemini(plugin) {
            for name in GEMINI_ONLY {
                params.remove(*name);
            }
        }
        let Some(config) = self.config() else {
            return Ok(params);
        };
        let mut rest = config.clone();
        for (camel, snake, canonical) in RENAMED {
            let value = rest.remove(*camel);
            let value = value.or(rest.remove(*snake)).filter(|v| !v.is_null());
            if let Some(value) = value {
                params.insert((*canonical).into(), value);
            }
        }
        rest.remove("thinkingConfig");
        rest.remove("thinking_config");
        let mime = take(&mut rest, "responseMimeType", "response_mime_type");
        let json_schema = take(&mut rest, "responseJsonSchema", "response_json_schema");
        let schema = take(&mut rest, "responseSchema", "response_schema");
        let schema = json_schema.or(schema.map(lowercase_types));
        match (mime.as_ref().and_then(Value::as_str), schema) {
            (Some("application/json"), Some(schema)) => {
                params.insert(
                    "response_format".into(),
                    json!({"type": "json_schema",
                        "json_schema": {"name": "response", "schema": schema}}),
                );
            }
            (Some("application/json"), None) => {
                params.insert("response_format".into(), json!({"type": "json_object"}));
            }
            (_, Some(_)) => {
                return Err(ApiError::invalid(
                    "generationConfig.responseSchema",
                    "generationConfig.responseSchema: a schema needs responseMimeType \
                     \"application/json\"",
                ));
            }
            (None | Some("text/plain"), None) => {}
            (Some(_), None) => {
                if let Some(mime) = mime {
                    params.insert("responseMimeType".into(), mime);
                }
            }
        }
        params.extend(rest);
        Ok(params)
    }

    /// `thinkingConfig` as the request's reasoning: a `thinkingBudget` (0: none), or a
    /// `thinkingLevel` as an effort. A dynamic budget (-1) leaves it to the model.
    pub fn reasoning(&self) -> Result<Option<types::ReasoningConfig>, ApiError> {
        let Some(thinking) = self.thinking() else {
            return Ok(None);
        };
        let budget = thinking
            .get("thinkingBudget")
            .or_else(|| thinking.get("thinking_budget"))
            .filter(|v| !v.is_null());
        let level = thinking
            .get("thinkingLevel")
            .or_else(|| thinking.get("thinking_level"))
            .filter(|v| !v.is_null());
        if let Some(level) = level {
            let effort = level
                .as_str()
                .map(str::to_ascii_lowercase)
                .and_then(|level| types::ReasoningEffort::parse(&level));
            let Some(effort) = effort else {
                return Err(ApiError::invalid(
                    "generationConfig.thinkingConfig.thinkingLevel",
                    "generationConfig.thinkingConfig.thinkingLevel: must be one of \"minimal\", \
                     \"low\", \"medium\", \"high\"",
                ));
            };
            return Ok(Some(types::ReasoningConfig {
                effort: Some(effort),
                budget_tokens: None,
            }));
        }
        match budget.map(Value::as_i64) {
            None | Some(Some(-1)) => Ok(None),
            Some(Some(0)) => Ok(Some(types::ReasoningConfig {
                effort: Some(types::ReasoningEffort::None),
                budget_tokens: None,
            })),
            Some(Some(budget)) if budget > 0 => Ok(Some(types::ReasoningConfig {
                effort: None,
                budget_tokens: Some(u32::try_from(budget).unwrap_or(u32::MAX)),
            })),
            Some(_) => Err(ApiError::invalid(
                "generationConfig.thinkingConfig.thinkingBudget",
                "generationConfig.thinkingConfig.thinkingBudget: must be -1 (dynamic), 0 \
                 (off) or a positive number of tokens",
            )),
        }
    }

    /// The caller's function declarations; Google's own tools (search, code execution, …)
    /// run at Google and cannot be served through another provider.
    pub fn functions(&self) -> Result<Vec<types::FunctionDef>, ApiError> {
        let mut out = Vec::new();
        for (i, tool) in self.body.tools.iter().flatten().enumerate() {
            for key in tool.keys() {
                if !matches!(
                    key.as_str(),
                    "functionDeclarations" | "function_declarations"
                ) {
                    return Err(ApiError::invalid(
                        format!("tools[{i}].{key}"),
                        format!(
                            "tools[{i}].{key}: only functionDeclarations can be served; \
                             Google's own tools run at Google"
                        ),
                    ));
                }
            }
            let declarations = tool
                .get("functionDeclarations")
                .or_else(|| tool.get("function_declarations"));
            let declarations = match declarations {
                None | Some(Value::Null) => continue,
                Some(Value::Array(declarations)) => declarations,
                Some(_) => {
                    return Err(ApiError::invalid(
                        format!("tools[{i}].functionDeclarations"),
                        format!("tools[{i}].functionDeclarations: must be an array"),
                    ));
                }
            };
            for (j, declaration) in declarations.iter().enumerate() {
                let place = format!("tools[{i}].functionDeclarations[{j}]");
                let name = match declaration.get("name").and_then(Value::as_str) {
                    Some(name) if !name.trim().is_empty() => name,
                    _ => {
                        return Err(ApiError::invalid(
                            format!("{place}.name"),
                            format!("{place}.name: a non-empty name is required"),
                        ));
                    }
                };
                let json_schema = declaration
                    .get("parametersJsonSchema")
                    .or_else(|| declaration.get("parameters_json_schema"));
                let parameters = match json_schema.filter(|v| !v.is_null()) {
                    Some(schema) => Some(schema.to_string()),
                    None => declaration
                        .get("parameters")
                        .filter(|v| !v.is_null())
                        .map(|schema| lowercase_types(schema.clone()).to_string()),
                };
                out.push(types::FunctionDef {
                    name: name.to_owned(),
                    description: declaration
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    parameters,
                });
            }
        }
        Ok(out)
    }

    /// `toolConfig.functionCallingConfig`: `AUTO`, `ANY` (one allowed name: that function),
    /// `NONE`; `VALIDATED` as `AUTO`, its checking is Gemini's own.
    pub fn function_choice(&self) -> Result<Option<types::FunctionChoice>, ApiError> {
        let config = self.body.tool_config.as_ref();
        let Some(config) = config.and_then(|c| c.function_calling_config.as_ref()) else {
            return Ok(None);
        };
        let place = "toolConfig.functionCallingConfig";
        let names = config.allowed_function_names.as_deref().unwrap_or_default();
        let mode = config.mode.as_deref().map(str::to_ascii_uppercase);
        let choice = match mode.as_deref() {
            None | Some("MODE_UNSPECIFIED" | "AUTO" | "VALIDATED") => types::FunctionChoice::Auto,
            Some("NONE") => types::FunctionChoice::None,
            Some("ANY") => match names {
                [] => types::FunctionChoice::Required,
                [name] => types::FunctionChoice::Named(name.clone()),
                _ => {
                    return Err(ApiError::invalid(
                        format!("{place}.allowedFunctionNames"),
                        format!(
                            "{place}.allowedFunctionNames: at most one name can be served \
                             (every provider forces one function or any)"
                        ),
                    ));
                }
            },
            Some(other) => {
                return Err(ApiError::invalid(
                    format!("{place}.mode"),
                    format!(
                        "{place}.mode: {other:?} is not one of \"AUTO\", \"ANY\", \"NONE\", \
                         \"VALIDATED\""
                    ),
                ));
            }
        };
        Ok(Some(choice))
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

    /// The conversation: `systemInstruction` first, then each content; a user turn's
    /// function responses become tool messages ahead of its other parts. Media are decoded,
    /// each at most `max_part_bytes`.
    pub fn prompt(&self, max_part_bytes: usize) -> Result<types::Prompt, ApiError> {
        let contents = self.body.contents.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(contents.len() + 1);
        if let Some(system) = &self.body.system_instruction {
            let mut texts = Vec::with_capacity(system.parts.len());
            for (j, part) in system.parts.iter().enumerate() {
                let place = format!("systemInstruction.parts[{j}]");
                match part.get("text").and_then(Value::as_str) {
                    Some(text) => texts.push(text),
                    None => {
                        return Err(ApiError::invalid(
                            place.clone(),
                            format!("{place}: only text parts are served in systemInstruction"),
                        ));
                    }
                }
            }
            if !texts.is_empty() {
                out.push(types::Message::new(
                    types::Role::System,
                    vec![types::Part::Text(texts.join("\n"))],
                ));
            }
        }
        let mut calls = Calls::default();
        for (i, content) in contents.iter().enumerate() {
            match content.role.as_deref() {
                None | Some("user" | "function" | "tool") => {
                    user_turn(i, content, &mut calls, max_part_bytes, &mut out)?
                }
                Some("model") => out.push(model_turn(i, content, &mut calls)?),
                Some(other) => {
                    return Err(ApiError::invalid(
                        format!("contents[{i}].role"),
                        format!("contents[{i}].role: {other:?} is not \"user\" or \"model\""),
                    ));
                }
            }
        }
        Ok(types::Prompt::Chat(out))
    }
}

/// Removes a field named either way, and returns its value if it was set.
fn take(map: &mut Map<String, Value>, camel: &str, snake: &str) -> Option<Value> {
    let camel = map.remove(camel);
    let snake = map.remove(snake);
    camel.or(snake).filter(|v| !v.is_null())
}

/// Gemini's schema (an OpenAPI subset) with its type names in JSON Schema's case
/// (`OBJECT` → `object`): every provider reads the lower case, Gemini both.
fn lowercase_types(mut schema: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    match value {
                        Value::String(name) if key == "type" => {
                            *name = name.to_ascii_lowercase();
                        }
                        _ => walk(value),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}

/// The function calls of the conversation so far, for the responses that answer them. Gemini's
/// calls and responses may carry no id (they match by name and order), while every other
/// provider needs one: a call without one gets `call_{n}`, and a response without one answers
/// the earliest open call of its name.
#[derive(Default)]
struct Calls {
    made: usize,
    open: Vec<(String, String)>,
    /// Ids given to calls, by the id the caller sent (for responses that repeat it).
    ids: HashMap<String, String>,
}

impl Calls {
    fn call(&mut self, id: Option<&str>, name: &str) -> String {
        self.made += 1;
        let id = match id.filter(|id| !id.is_empty()) {
            Some(id) => id.to_owned(),
            None => format!("call_{}", self.made),
        };
        self.open.push((id.clone(), name.to_owned()));
        self.ids.insert(id.clone(), name.to_owned());
        id
    }

    /// The id of the call a response answers.
    fn answer(&mut self, id: Option<&str>, name: &str) -> Option<String> {
        let position = match id.filter(|id| !id.is_empty()) {
            Some(id) => self.open.iter().position(|(open, _)| open == id),
            None => self.open.iter().position(|(_, open)| open == name),
        };
        match (position, id) {
            (Some(position), _) => Some(self.open.remove(position).0),
            (None, Some(id)) if !id.is_empty() => Some(id.to_owned()),
            (None, _) => None,
        }
    }
}

/// A part's field, named either way.
fn field<'a>(part: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    part.get(camel)
        .or_else(|| part.get(snake))
        .filter(|v| !v.is_null())
}

fn required_str<'a>(value: &'a Value, name: &str, place: &str) -> Result<&'a str, ApiError> {
    value.get(name).and_then(Value::as_str).ok_or_else(|| {
        ApiError::invalid(
            format!("{place}.{name}"),
            format!("{place}.{name}: required"),
        )
    })
}

/// `inlineData` or `fileData` as a part: by its media type, an image, audio (inline) or a
/// document.
fn media(
    part: &Value,
    place: &str,
    max_part_bytes: usize,
) -> Result<Option<types::Part>, ApiError> {
    let (source, media_type) = if let Some(inline) = field(part, "inlineData", "inline_data") {
        let place = format!("{place}.inlineData");
        let media_type = field(inline, "mimeType", "mime_type").and_then(Value::as_str);
        let Some(media_type) = media_type.map(|m| m.trim().to_ascii_lowercase()) else {
            return Err(ApiError::invalid(
                format!("{place}.mimeType"),
                format!("{place}.mimeType: required"),
            ));
        };
        let data = required_str(inline, "data", &place)?;
        let bytes = parts::decode_base64(data, &format!("{place}.data"), max_part_bytes)?;
        (types::Source::Bytes(bytes), media_type)
    } else if let Some(file) = field(part, "fileData", "file_data") {
        let place = format!("{place}.fileData");
        let uri = field(file, "fileUri", "file_uri").and_then(Value::as_str);
        let Some(uri) = uri else {
            return Err(ApiError::invalid(
                format!("{place}.fileUri"),
                format!("{place}.fileUri: required"),
            ));
        };
        let url = parts::remote_url(uri.to_owned(), &format!("{place}.fileUri"))?;
        let media_type = field(file, "mimeType", "mime_type").and_then(Value::as_str);
        let media_type = media_type.map(|m| m.trim().to_ascii_lowercase());
        (types::Source::Url(url), media_type.unwrap_or_default())
    } else {
        return Ok(None);
    };
    let known = |m: &str| (!m.is_empty()).then(|| m.to_owned());
    Ok(Some(match media_type.split_once('/') {
        Some(("image", _)) => types::Part::Image(types::Image {
            source,
            media_type: known(&media_type),
            detail: None,
        }),
        Some(("audio", subtype)) => match source {
            types::Source::Bytes(data) => types::Part::Audio(types::Audio {
                data,
                format: audio_format(subtype).to_owned(),
            }),
            types::Source::Url(_) => {
                return Err(ApiError::invalid(
                    format!("{place}.fileData"),
                    format!("{place}.fileData: audio can only be sent inline (inlineData)"),
                ));
            }
        },
        _ => types::Part::Document(types::Document {
            source,
            media_type: known(&media_type),
            title: None,
        }),
    }))
}

/// The canonical audio format of an `audio/*` media type.
fn audio_format(subtype: &str) -> &str {
    match subtype {
        "mpeg" | "mp3" | "mpeg3" | "x-mp3" => "mp3",
        "wav" | "x-wav" | "wave" | "vnd.wave" => "wav",
        other => other,
    }
}

/// A user turn: its function responses as tool messages, then its text and media.
fn user_turn(
    i: usize,
    content: &ContentIn,
    calls: &mut Calls,
    max_part_bytes: usize,
    out: &mut Vec<types::Message>,
) -> Result<(), ApiError> {
    let mut parts_out = Vec::new();
    let mut results = Vec::new();
    for (j, part) in content.parts.iter().enumerate() {
        let place = format!("contents[{i}].parts[{j}]");
        if let Some(text) = part.get("text") {
            let Some(text) = text.as_str() else {
                return Err(ApiError::invalid(
                    format!("{place}.text"),
                    format!("{place}.text: must be a string"),
                ));
            };
            parts_out.push(types::Part::Text(text.to_owned()));
        } else if let Some(response) = field(part, "functionResponse", "function_response") {
            results.push(function_response(response, &place, calls)?);
        } else if let Some(media) = media(part, &place, max_part_bytes)? {
            parts_out.push(media);
        } else {
            return Err(unserved(part, &place, "a user turn"));
        }
    }
    let content_too = !parts_out.is_empty() || results.is_empty();
    out.extend(results);
    if content_too {
        if parts_out.is_empty() {
            parts_out.push(types::Part::Text(String::new()));
        }
        out.push(types::Message::new(types::Role::User, parts_out));
    }
    Ok(())
}

/// A part of a kind the gateway does not serve, named by its first field.
fn unserved(part: &Value, place: &str, turn: &str) -> ApiError {
    let kind = part
        .as_object()
        .and_then(|p| {
            p.keys()
                .find(|k| !matches!(k.as_str(), "thought" | "thoughtSignature"))
        })
        .cloned()
        .unwrap_or_else(|| "an empty part".to_owned());
    ApiError::invalid(
        place.to_owned(),
        format!("{place}: {kind:?} parts are not supported in {turn}"),
    )
}

/// A `functionResponse` as a tool message: its `response` object as JSON text; `{"error": …}`
/// alone marks a failed call, as Google documents.
fn function_response(
    response: &Value,
    place: &str,
    calls: &mut Calls,
) -> Result<types::Message, ApiError> {
    let place = format!("{place}.functionResponse");
    let name = required_str(response, "name", &place)?;
    let id = response.get("id").and_then(Value::as_str);
    let Some(id) = calls.answer(id, name) else {
        return Err(ApiError::invalid(
            place.clone(),
            format!("{place}: answers no earlier functionCall of {name:?}"),
        ));
    };
    let body = response.get("response").cloned().unwrap_or(json!({}));
    let is_error = body
        .as_object()
        .is_some_and(|b| b.len() == 1 && b.contains_key("error"));
    Ok(types::Message {
        name: Some(name.to_owned()),
        tool_call_id: Some(id),
        is_error,
        ..types::Message::new(types::Role::Tool, vec![types::Part::Text(body.to_string())])
    })
}

/// A model turn: its thoughts, its text and its function calls; the signatures Gemini put on
/// answer parts kept as signed reasoning without text, as the gemini plugin reads them back
/// (those of text parts first, then the calls' in order).
fn model_turn(
    i: usize,
    content: &ContentIn,
    calls: &mut Calls,
) -> Result<types::Message, ApiError> {
    let mut thoughts = Vec::new();
    let mut texts = Vec::new();
    let mut made = Vec::new();
    let mut text_signatures = Vec::new();
    let mut call_signatures = Vec::new();
    for (j, part) in content.parts.iter().enumerate() {
        let place = format!("contents[{i}].parts[{j}]");
        let signature = field(part, "thoughtSignature", "thought_signature")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        if let Some(text) = part.get("text") {
            let Some(text) = text.as_str() else {
                return Err(ApiError::invalid(
                    format!("{place}.text"),
                    format!("{place}.text: must be a string"),
                ));
            };
            if thought {
                thoughts.push(types::Part::Reasoning(types::Reasoning {
                    text: text.to_owned(),
                    signature,
                    redacted: None,
                }));
                continue;
            }
            if !text.is_empty() {
                texts.push(types::Part::Text(text.to_owned()));
            }
            text_signatures.extend(signature);
        } else if let Some(call) = field(part, "functionCall", "function_call") {
            let place = format!("{place}.functionCall");
            let name = required_str(call, "name", &place)?;
            let arguments = match call.get("args") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(args @ Value::Object(_)) => args.to_string(),
                Some(_) => {
                    return Err(ApiError::invalid(
                        format!("{place}.args"),
                        format!("{place}.args: must be an object"),
                    ));
                }
            };
            let id = calls.call(call.get("id").and_then(Value::as_str), name);
            made.push(types::ToolCall {
                id,
                name: name.to_owned(),
                arguments,
            });
            call_signatures.extend(signature);
        } else {
            return Err(unserved(part, &place, "a model turn"));
        }
    }
    let signed = |signature| {
        types::Part::Reasoning(types::Reasoning {
            text: String::new(),
            signature: Some(signature),
            redacted: None,
        })
    };
    let mut parts_out = thoughts;
    parts_out.extend(text_signatures.into_iter().map(signed));
    parts_out.extend(call_signatures.into_iter().map(signed));
    if texts.is_empty() && made.is_empty() {
        texts.push(types::Part::Text(String::new()));
    }
    parts_out.extend(texts);
    Ok(types::Message {
        tool_calls: made,
        ..types::Message::new(types::Role::Assistant, parts_out)
    })
}
