//! The upstream request of a call: the route's settings, the URL (OpenAI-style or an Azure
//! deployment's), the key's header and the body in the OpenAI wire format. Pure (the request is
//! built, not sent), so it is unit-tested natively.

use std::borrow::Cow;

use gateway_plugin_sdk::form::Form;
use gateway_plugin_sdk::http::{KeyIn, Request};
use gateway_plugin_sdk::output::OutputFields;
use gateway_plugin_sdk::{
    Base64, CompletionRequest, DataUrl, Document, EmbeddingRequest, FunctionChoice, FunctionDef,
    ImageRequest, Message, OpenCall, OpenCalls, OutputLimit, Part, Prompt, ProviderError,
    ReasoningConfig, ReasoningEffort, RerankRequest, Role, Route, Source, SpeechRequest,
    TranscriptionRequest, json, params_object_except,
};
use serde::Deserialize;
use serde::de::{Deserializer, Error as _};
use serde_json::{Map, Value, json};

use crate::wire::{
    ChatMessage, Content, ContentPart, FileData, FunctionCallOut, ImageUrl, InputAudio, Tool,
    ToolCallOut, ToolFunction,
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
/// Body keys of `/images/generations` the plugin sets itself.
const IMAGE_OWNED_KEYS: &[&str] = &["model", "prompt", "n", "size", "quality"];
/// Form fields of `/audio/transcriptions` and `/audio/translations` the plugin sets itself.
const TRANSCRIPTION_OWNED_KEYS: &[&str] = &["model", "file", "response_format", "stream"];

/// Body keys of `/audio/speech` the plugin sets itself.
const SPEECH_OWNED_KEYS: &[&str] = &[
    "model",
    "input",
    "voice",
    "response_format",
    "stream_format",
];
/// Body keys of a Cohere-style `/rerank` the plugin sets itself. `top_k` goes too: the
/// gateway's `top_n` is the one limit, and a second one would make the answer shorter than the
/// caller asked for without saying so.
const COHERE_RERANK_OWNED_KEYS: &[&str] = &["model", "query", "documents", "top_n", "top_k"];
/// Body keys of Voyage's `/rerank` the plugin sets itself (`top_n` as for Cohere's `top_k`).
const VOYAGE_RERANK_OWNED_KEYS: &[&str] = &["model", "query", "documents", "top_k", "top_n"];
/// Body keys of TEI's `/rerank` the plugin sets itself. TEI serves one model and takes no
/// limit, so `model` and `top_n` go too; the answer's texts would only be dropped, so
/// `return_text` is always false. `raw_scores` stays the caller's (see the crate docs).
const TEI_RERANK_OWNED_KEYS: &[&str] = &["model", "query", "texts", "return_text", "top_n"];

/// The plugin's settings from the route's `[providers.ID.settings]` table (see the crate docs).
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Send `type: text` prompts to the legacy `/completions` endpoint.
    #[serde(deserialize_with = "json::null_as_default")]
    pub legacy_completions: bool,
    /// Header that carries the key instead of `Authorization: Bearer` (Azure's `api-key`).
    #[serde(deserialize_with = "header_name")]
    pub api_key_header: Option<String>,
    /// Azure OpenAI deployment mode: the `api-version` of deployment URLs
    /// (`{base_url}/openai/deployments/{model}/chat/completions?api-version=...`).
    #[serde(deserialize_with = "api_version")]
    pub azure_api_version: Option<String>,
    /// The wire format of `POST {base_url}/rerank`.
    #[serde(deserialize_with = "json::null_as_default")]
    pub rerank_api: RerankApi,
}

/// The rerank APIs the plugin speaks (the `rerank_api` setting; see the crate docs).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankApi {
    /// `{model, query, documents, top_n}` answered with `results`: Cohere v2, Jina, vLLM,
    /// Infinity, LocalAI.
    #[default]
    Cohere,
    /// Voyage AI: `top_k` instead of `top_n`, answered with `data`.
    Voyage,
    /// Hugging Face text-embeddings-inference: `{query, texts}` answered with a bare list.
    Tei,
}

/// A header name, trimmed.
fn header_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    match Option::<String>::deserialize(deserializer)? {
        Some(name) if name.trim().is_empty() => Err(D::Error::custom("must be a header name")),
        name => Ok(name.map(|name| name.trim().to_owned())),
    }
}

/// An `api-version`. It goes into the query string as is, so only the characters versions are
/// made of.
fn api_version<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
    match Option::<String>::deserialize(deserializer)? {
        Some(version) if version.is_empty() || !version.bytes().all(valid) => Err(
            D::Error::custom("must be an Azure OpenAI API version such as \"2024-10-21\""),
        ),
        version => Ok(version),
    }
}

impl Settings {
    /// The header carrying the key, `None` for `Authorization: Bearer`: the configured
    /// `api_key_header`, else Azure's `api-key` in deployment mode.
    fn key_header(&self) -> Option<&str> {
        self.api_key_header
            .as_deref()
            .or(self.azure_api_version.as_ref().map(|_| "api-key"))
    }

    /// The URL of `operation` (`chat/completions`, `completions`, `embeddings`) for `model`:
    /// `{base}/{operation}`, or in Azure deployment mode
    /// `{base}/openai/deployments/{model}/{operation}?api-version={version}`, where `model` is
    /// the deployment's name.
    fn endpoint(
        &self,
        route: &Route,
        model: &str,
        operation: &str,
    ) -> Result<String, ProviderError> {
        let base =
            route.checked_base_url("https://api.openai.com/v1 or an OpenAI-compatible server")?;
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

    /// The request of `operation` for `model` with `body` (about `size` bytes of JSON),
    /// carrying the route's key when it has one.
    fn request<B: serde::Serialize + ?Sized>(
        &self,
        (route, model, stream): (&Route, &str, bool),
        operation: &str,
        body: &B,
        size: usize,
    ) -> Result<Request, ProviderError> {
        Request::post(self.endpoint(route, model, operation)?)
            .streaming(stream)
            .api_key(
                route.api_key.as_deref(),
                KeyIn::header_or_bearer(self.key_header()),
            )
            .json_sized(body, size)
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

/// The upstream request of a completion: chat completions, or legacy completions for a text
/// prompt on a route with `legacy_completions = true`. The prompt's texts are written into the
/// body as it is serialized ([`json::with_entry`]), never copied into a tree of values first.
pub fn completion(request: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
    let settings: Settings = request.route.settings()?;
    let model = Value::String(request.model.clone());
    let legacy = matches!(request.prompt, Prompt::Text(_)) && settings.legacy_completions;
    let mut body;
    if legacy {
        if !request.functions.is_empty() {
            return Err(ProviderError::InvalidRequest(
                "functions need chat completions, but this route sends text prompts to the legacy /completions endpoint".into(),
            ));
        }
        body = params_object_except(&request.params, LEGACY_OWNED_KEYS)?;
        body.insert("model".into(), model);
    } else {
        body = params_object_except(&request.params, CHAT_OWNED_KEYS)?;
        body.insert("model".into(), model);
        if request.functions.is_empty() {
            // OpenAI rejects it without `tools`; without tools it means nothing anyway.
            body.remove("parallel_tool_calls");
        } else {
            body.insert("tools".into(), json::to_value(&tools(&request.functions)?)?);
            // OpenAI rejects `tool_choice` without `tools`, so it only travels with them.
            if let Some(choice) = &request.function_choice {
                body.insert("tool_choice".into(), tool_choice(choice));
            }
        }
        // The typed field wins over a `reasoning_effort` the caller's params still carry.
        if let Some(effort) = request.reasoning.as_ref().and_then(reasoning_effort) {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        if refuses_max_tokens(&request.model)
            && let Some(max) = body.remove("max_tokens").filter(|max| !max.is_null())
            && body.get("max_completion_tokens").is_none_or(Value::is_null)
        {
            body.insert("max_completion_tokens".into(), max);
        }
    }
    output_limit(
        &mut body,
        &request.output,
        legacy,
        &request.model,
        &request.route.id,
    )?;
    if stream {
        body.insert("stream".into(), Value::Bool(true));
        // Without this OpenAI sends no usage at all in a stream.
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    let upstream = (&request.route, request.model.as_str(), stream);
    let overhead = request.params.len() + request.model.len() + 256;
    match &request.prompt {
        Prompt::Text(text) if legacy => settings.request(
            upstream,
            "completions",
            &json::with_entry(&body, "prompt", text),
            text.len() + overhead,
        ),
        prompt => {
            let conversation = prompt.messages();
            let messages = ChatMessages::new(&conversation)?;
            let size = prompt.json_size_hint() + overhead;
            settings.request(
                upstream,
                "chat/completions",
                &json::with_entry(&body, "messages", &messages),
                size,
            )
        }
    }
}

/// Where an OpenAI body says how long the answer may be.
pub const OUTPUT: OutputFields = OutputFields {
    max_tokens: &[&["max_completion_tokens"], &["max_tokens"]],
    choices: &[&["n"], &["best_of"]],
};

/// Writes the host's output limit over the caller's: under the name the caller used
/// (`max_completion_tokens` when it did or the model refuses `max_tokens`, else `max_tokens`,
/// which every OpenAI-compatible server knows; legacy completions know only `max_tokens`), the
/// other name removed, and `n`. `best_of` (legacy completions: the upstream writes and bills
/// that many candidates) is refused above `n`, which is what the host reserved.
fn output_limit(
    body: &mut Map<String, Value>,
    output: &OutputLimit,
    legacy: bool,
    model: &str,
    route: &str,
) -> Result<(), ProviderError> {
    let Some(max) = output.max_tokens else {
        return Ok(());
    };
    let newer = !legacy
        && (body
            .get("max_completion_tokens")
            .is_some_and(|v| !v.is_null())
            || refuses_max_tokens(model));
    body.remove("max_tokens");
    body.remove("max_completion_tokens");
    let name = if newer {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(name.into(), json!(max));
    if output.choices > 1 || body.get("n").is_some_and(|n| !n.is_null()) {
        body.insert("n".into(), json!(output.choices));
    }
    if let Some(best_of) = body.remove("best_of")
        && !best_of.is_null()
        && best_of.as_u64() != Some(u64::from(output.choices))
    {
        return Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: best_of = {best_of} is not served under a token or spend limit: \
             the gateway reserves n = {} choices (leave best_of out, or set it to n)",
            output.choices
        )));
    }
    Ok(())
}

/// The `reasoning_effort` of a reasoning config: its effort under OpenAI's name, else one chosen
/// from its token budget (see the crate docs); `None` when it has neither.
pub fn reasoning_effort(config: &ReasoningConfig) -> Option<&'static str> {
    let effort = match (config.effort, config.budget_tokens) {
        (Some(effort), _) => effort,
        (None, Some(0)) => ReasoningEffort::None,
        (None, Some(budget)) if budget < 4096 => ReasoningEffort::Low,
        (None, Some(budget)) if budget < 16384 => ReasoningEffort::Medium,
        (None, Some(_)) => ReasoningEffort::High,
        (None, None) => return None,
    };
    Some(effort.as_str())
}

/// Whether `model` is one of OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 and their
/// snapshots, also as Azure deployments named after them), which refuse `max_tokens` and take
/// `max_completion_tokens` instead. Only they are told apart: some OpenAI-compatible servers
/// know only `max_tokens`, and would ignore the newer name. Callers of the gateway's Anthropic
/// surface always send `max_tokens`, Anthropic's required name.
fn refuses_max_tokens(model: &str) -> bool {
    let model = model.trim().to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"].iter().any(|family| {
        model
            .strip_prefix(family)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.']))
    })
}

/// The upstream request of an embeddings call.
pub fn embedding(request: &EmbeddingRequest) -> Result<Request, ProviderError> {
    let settings: Settings = request.route.settings()?;
    let mut body = params_object_except(&request.params, EMBEDDING_OWNED_KEYS)?;
    body.insert("model".into(), Value::String(request.model.clone()));
    let size: usize = request.input.iter().map(|input| input.len() + 4).sum();
    settings.request(
        (&request.route, request.model.as_str(), false),
        "embeddings",
        &json::with_entry(&body, "input", &request.input),
        size + request.params.len() + 256,
    )
}

/// The upstream request of an image generation: `POST {base_url}/images/generations` (an
/// Azure deployment's on a route in deployment mode), the caller's other keys as they are.
pub fn images(request: &ImageRequest) -> Result<Request, ProviderError> {
    let settings: Settings = request.route.settings()?;
    let mut body = params_object_except(&request.params, IMAGE_OWNED_KEYS)?;
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("prompt".into(), Value::String(request.prompt.clone()));
    // DALL-E 3 takes only 1, and refuses nothing when it is left out.
    if request.n != 1 {
        body.insert("n".into(), json!(request.n));
    }
    for (key, value) in [("size", &request.size), ("quality", &request.quality)] {
        if let Some(value) = value {
            body.insert(key.into(), Value::String(value.clone()));
        }
    }
    settings.request(
        (&request.route, request.model.as_str(), false),
        "images/generations",
        &body,
        request.prompt.len() + request.params.len() + 256,
    )
}

/// The upstream request of a transcription (or a translation): a form of the model, the
/// caller's other fields as they are (a list as `NAME[]` fields), the file, and the
/// `response_format` the plugin reads: `verbose_json` (segments and words, with their times)
/// when the caller's format is written from them (`verbose_json`, `srt`, `vtt`), else `json`.
pub fn transcription(request: TranscriptionRequest) -> Result<Request, ProviderError> {
    let settings: Settings = request.route.settings()?;
    let asked: Map<String, Value> = serde_json::from_str(&request.params).unwrap_or_default();
    let format = match asked.get("response_format").and_then(Value::as_str) {
        Some("verbose_json" | "srt" | "vtt") => "verbose_json",
        _ => "json",
    };
    let params = params_object_except(&request.params, TRANSCRIPTION_OWNED_KEYS)?;
    let mut form = Form::new().text("model", &request.model);
    for (key, value) in &params {
        match value {
            Value::Null => {}
            Value::String(text) => form = form.text(key, text),
            Value::Array(items) => {
                for item in items {
                    let text = item
                        .as_str()
                        .map_or_else(|| item.to_string(), str::to_owned);
                    form = form.text(&format!("{key}[]"), &text);
                }
            }
            other => form = form.text(key, &other.to_string()),
        }
    }
    let media_type = (request.media_type.as_deref()).unwrap_or("application/octet-stream");
    let form = form.text("response_format", format).file(
        "file",
        &request.file_name,
        media_type,
        request.audio,
    );
    let operation = if request.translate {
        "audio/translations"
    } else {
        "audio/transcriptions"
    };
    let url = settings.endpoint(&request.route, &request.model, operation)?;
    Ok(Request::post(url)
        .streaming(false)
        .api_key(
            request.route.api_key.as_deref(),
            KeyIn::header_or_bearer(settings.key_header()),
        )
        .form(form))
}

/// How `/audio/speech` answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeechAnswer {
    /// The audio's bytes (`stream_format: "audio"`, the API's default).
    Bytes,
    /// An event stream of the audio as base64 pieces, its last event with the tokens billed
    /// (`stream_format: "sse"`).
    Events,
}

/// The upstream request of a speech, and how it will be answered. OpenAI's GPT speech models
/// (`gpt-4o-mini-tts`) bill by tokens, which the API reports only in its event stream: they
/// are asked for events, turned back into bytes for the caller. Other models (`tts-1`, which
/// bills by characters, and compatible servers' voices) send bytes, as do Azure deployments.
/// A custom voice (`voice_...`) is sent as OpenAI's object for it.
pub fn speech(request: &SpeechRequest) -> Result<(SpeechAnswer, Request), ProviderError> {
    let settings: Settings = request.route.settings()?;
    let mut body = params_object_except(&request.params, SPEECH_OWNED_KEYS)?;
    body.insert("model".into(), json!(request.model));
    body.insert("input".into(), json!(request.input));
    let voice = if request.voice.starts_with("voice_") {
        json!({ "id": request.voice })
    } else {
        json!(request.voice)
    };
    body.insert("voice".into(), voice);
    body.insert("response_format".into(), json!(request.format));
    let answer = if settings.azure_api_version.is_none() && request.model.starts_with("gpt-") {
        body.insert("stream_format".into(), json!("sse"));
        SpeechAnswer::Events
    } else {
        SpeechAnswer::Bytes
    };
    let size = request.input.len() + request.params.len() + 256;
    let events = answer == SpeechAnswer::Events;
    let route = (&request.route, request.model.as_str(), events);
    let upstream = settings.request(route, "audio/speech", &body, size)?;
    let upstream = if events {
        upstream
    } else {
        upstream.accept("audio/*")
    };
    Ok((answer, upstream))
}

/// The `output_format` the caller asked GPT Image for (`png`, `jpeg`, `webp`), which answers
/// that do not name theirs are in.
pub fn output_format(params: &str) -> Option<String> {
    let params: Map<String, Value> = serde_json::from_str(params).ok()?;
    params.get("output_format")?.as_str().map(str::to_owned)
}

/// The upstream request of a rerank call, and the API that will answer it.
pub fn rerank(request: &RerankRequest) -> Result<(RerankApi, Request), ProviderError> {
    let settings: Settings = request.route.settings()?;
    if settings.azure_api_version.is_some() {
        // Deployment URLs have no rerank operation; a rerank model hosted on Azure (Cohere's,
        // in Azure AI Foundry) has an endpoint of its own, which is a route of its own.
        return Err(ProviderError::InvalidRequest(format!(
            "route `{}`: Azure OpenAI has no rerank API; serve rerank from a route whose \
             base_url is a rerank server (without azure_api_version)",
            request.route.id
        )));
    }
    if request.documents.is_empty() {
        // The gateway refuses this before the plugin; an upstream call would only fail.
        return Err(ProviderError::InvalidRequest(
            "rerank needs at least one document".into(),
        ));
    }
    let api = settings.rerank_api;
    let model = Value::String(request.model.clone());
    let query = Value::String(request.query.clone());
    // Some servers refuse a limit above the number of documents; the answer is the same.
    let count = u32::try_from(request.documents.len()).unwrap_or(u32::MAX);
    let top_n = request.top_n.map(|n| json!(n.min(count)));
    let (owned, documents_key) = match api {
        RerankApi::Cohere => (COHERE_RERANK_OWNED_KEYS, "documents"),
        RerankApi::Voyage => (VOYAGE_RERANK_OWNED_KEYS, "documents"),
        RerankApi::Tei => (TEI_RERANK_OWNED_KEYS, "texts"),
    };
    let mut body = params_object_except(&request.params, owned)?;
    match api {
        RerankApi::Cohere | RerankApi::Voyage => {
            body.insert("model".into(), model);
            body.insert("query".into(), query);
            let limit = if api == RerankApi::Voyage {
                "top_k"
            } else {
                "top_n"
            };
            if let Some(top_n) = top_n {
                body.insert(limit.into(), top_n);
            }
        }
        RerankApi::Tei => {
            body.insert("query".into(), query);
            // Normalized scores (0 to 1, like the others'), unless the caller asks for logits.
            if body.get("raw_scores").is_none_or(Value::is_null) {
                body.insert("raw_scores".into(), Value::Bool(false));
            }
            body.insert("return_text".into(), Value::Bool(false));
        }
    }
    let size: usize = request.documents.iter().map(|d| d.len() + 4).sum();
    let http = settings.request(
        (&request.route, request.model.as_str(), false),
        "rerank",
        &json::with_entry(&body, documents_key, &request.documents),
        size + request.query.len() + request.params.len() + 256,
    )?;
    Ok((api, http))
}

/// Maps a conversation to chat messages, as a list (for tests: [`ChatMessages`] writes them
/// without building it).
#[cfg(test)]
pub fn chat_messages(messages: &[Message]) -> Result<Vec<ChatMessage<'_>>, ProviderError> {
    let mut out = Vec::with_capacity(messages.len());
    convert_messages(messages, |message| {
        out.push(message);
        Ok::<(), std::convert::Infallible>(())
    })
    .map_err(|stop| match stop {
        Stop::Invalid(error) => error,
        Stop::Emit(never) => match never {},
    })?;
    Ok(out)
}

/// A conversation as OpenAI's `messages`, each message mapped as it is serialized: no list
/// of mapped messages, nor a tree of JSON values, is built (for a conversation of many short
/// messages either would cost several times its text).
pub struct ChatMessages<'a>(&'a [Message]);

impl<'a> ChatMessages<'a> {
    /// `messages`, once checked to map (the errors of [`chat_messages`]).
    pub fn new(messages: &'a [Message]) -> Result<Self, ProviderError> {
        convert_messages(messages, |_| Ok::<(), std::convert::Infallible>(())).map_err(|stop| {
            match stop {
                Stop::Invalid(error) => error,
                Stop::Emit(never) => match never {},
            }
        })?;
        Ok(ChatMessages(messages))
    }
}

impl serde::Serialize for ChatMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        convert_messages(self.0, |message| seq.serialize_element(&message)).map_err(|stop| {
            match stop {
                // Checked by `new`.
                Stop::Invalid(error) => S::Error::custom(format_args!("{error:?}")),
                Stop::Emit(error) => error,
            }
        })?;
        seq.end()
    }
}

/// Why [`convert_messages`] stopped.
enum Stop<E> {
    /// A message that does not map.
    Invalid(ProviderError),
    /// What `emit` failed with.
    Emit(E),
}

/// Maps a conversation to chat messages, handing each to `emit` in order.
///
/// OpenAI has deprecated `functions`, so legacy function calling is expressed with tools: an
/// assistant `function_call` becomes a tool call with a synthesized id, and a `function` message
/// becomes the `tool` message answering the latest open call of that name.
fn convert_messages<'a, E>(
    messages: &'a [Message],
    mut emit: impl FnMut(ChatMessage<'a>) -> Result<(), E>,
) -> Result<(), Stop<E>> {
    let mut open_calls = OpenCalls::new();
    let tool_message = |call: OpenCall, content: Cow<'a, str>| ChatMessage {
        role: "tool",
        content: Some(Content::Text(content)),
        tool_call_id: Some(call.id),
        ..ChatMessage::default()
    };
    for (i, message) in messages.iter().enumerate() {
        let name = message.name.as_deref();
        let mapped = match message.role {
            Role::User => ChatMessage {
                role: "user",
                content: Some(user_content(i, message).map_err(Stop::Invalid)?),
                name,
                ..ChatMessage::default()
            },
            Role::System => ChatMessage {
                role: "system",
                content: Some(Content::Text(text(i, message).map_err(Stop::Invalid)?)),
                name,
                ..ChatMessage::default()
            },
            Role::Assistant => {
                let text = text(i, message).map_err(Stop::Invalid)?;
                let tool_calls: Vec<ToolCallOut> = message
                    .calls()
                    .into_iter()
                    .enumerate()
                    .map(|(j, call)| ToolCallOut {
                        // A synthesized id is unique within the conversation.
                        id: if call.id.is_empty() {
                            format!("call_{i}_{j}")
                        } else {
                            call.id
                        },
                        kind: "function",
                        function: FunctionCallOut {
                            name: call.name,
                            arguments: call.arguments,
                        },
                    })
                    .collect();
                open_calls.replace(tool_calls.iter().map(|call| OpenCall {
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                }));
                // OpenAI wants content on an assistant message unless it calls tools. Its
                // reasoning parts are dropped: chat completions take no reasoning back.
                let content = if message.has_text() || tool_calls.is_empty() {
                    Some(Content::Text(text))
                } else {
                    None
                };
                ChatMessage {
                    role: "assistant",
                    content,
                    name,
                    tool_calls,
                    tool_call_id: None,
                }
            }
            Role::Tool => {
                let content = text(i, message).map_err(Stop::Invalid)?;
                let id = message.tool_call_id.as_deref();
                let Some(call) = open_calls.answer(id, name) else {
                    return Err(Stop::Invalid(ProviderError::InvalidRequest(format!(
                        "messages[{i}]: a tool message needs tool_call_id (or the name of a call it answers)"
                    ))));
                };
                tool_message(call, content)
            }
            Role::Function => {
                let content = text(i, message).map_err(Stop::Invalid)?;
                match open_calls.answer(None, name) {
                    Some(call) => tool_message(call, content),
                    // Nothing to answer: keep the deprecated shape, which OpenAI still accepts.
                    None => ChatMessage {
                        role: "function",
                        content: Some(Content::Text(content)),
                        name,
                        ..ChatMessage::default()
                    },
                }
            }
        };
        emit(mapped).map_err(Stop::Emit)?;
    }
    Ok(())
}

/// The text of message `i`, which must have no media: OpenAI takes images, audio and files
/// on user messages only. Reasoning parts are left out.
fn text(i: usize, message: &Message) -> Result<Cow<'_, str>, ProviderError> {
    message.text_only_at(i, "openai")
}

/// The content of user message `i`: its text as one string when it has no media, else its
/// parts in order as OpenAI's content parts (reasoning parts left out).
fn user_content(i: usize, message: &Message) -> Result<Content<'_>, ProviderError> {
    if message.first_media().is_none() {
        return Ok(Content::Text(message.text()));
    }
    let mut parts = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        parts.push(match part {
            Part::Text(text) => ContentPart::Text { text },
            Part::Image(image) => ContentPart::ImageUrl {
                image_url: ImageUrl {
                    url: DataUrl {
                        source: &image.source,
                        media_type: image.media_type(),
                    },
                    detail: image.detail.as_deref(),
                },
            },
            Part::Audio(audio) => ContentPart::InputAudio {
                input_audio: InputAudio {
                    data: Base64(&audio.data),
                    format: &audio.format,
                },
            },
            Part::Document(document) => ContentPart::File {
                file: file(i, document)?,
            },
            Part::Reasoning(_) => continue,
        });
    }
    Ok(Content::Parts(parts))
}

/// A document as a file part: its bytes as a `data:` URL and its file name (the title, else
/// `document` with the media type's extension: OpenAI refuses inline files without a name).
/// Chat completions take no file URLs.
fn file(i: usize, document: &Document) -> Result<FileData<'_>, ProviderError> {
    if let Source::Url(_) = document.source {
        return Err(ProviderError::InvalidRequest(format!(
            "messages[{i}]: openai does not take document parts by URL; send the document's bytes"
        )));
    }
    let media_type = document.media_type();
    let filename = match &document.title {
        Some(title) if !title.trim().is_empty() => title,
        _ => default_filename(media_type),
    };
    Ok(FileData {
        file_data: DataUrl {
            source: &document.source,
            media_type,
        },
        filename,
    })
}

/// The name of a document without a title, by its media type.
fn default_filename(media_type: &str) -> &'static str {
    let essence = media_type.split(';').next().unwrap_or_default().trim();
    match essence.to_ascii_lowercase().as_str() {
        "application/pdf" => "document.pdf",
        "text/plain" => "document.txt",
        "text/markdown" => "document.md",
        "text/html" => "document.html",
        "text/csv" => "document.csv",
        "application/json" => "document.json",
        _ => "document",
    }
}

/// Maps function definitions to `tools`.
pub fn tools(functions: &[FunctionDef]) -> Result<Vec<Tool>, ProviderError> {
    functions
        .iter()
        .enumerate()
        .map(|(i, function)| {
            Ok(Tool {
                kind: "function",
                function: ToolFunction {
                    name: function.name.clone(),
                    description: function.description.clone(),
                    parameters: function.schema(i)?,
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
