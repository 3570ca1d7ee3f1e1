//! The gateway's requests as Gemini API requests. Everything here is pure (no I/O), so it is
//! unit-tested natively.

use gateway_plugin_sdk::http::{KeyIn, Request};
use gateway_plugin_sdk::output::OutputFields;
use gateway_plugin_sdk::{
    Base64, CompletionRequest, EmbeddingRequest, FunctionChoice, FunctionDef, ImageRequest,
    Message, OpenCall, OpenCalls, OutputLimit, Part as MessagePart, Prompt, ProviderError,
    ReasoningConfig, ReasoningEffort, Role, Route, Source, json, params_object_except,
};
use serde_json::{Map, Value, json};

use crate::images::{ImageCall, Service};
use crate::schema;
use crate::wire::{
    Blob, Content, FileData, FunctionCallOut, FunctionDeclaration, FunctionResponseOut, Part, Tool,
};

/// A JSON object: a request body, or a part of one.
type Object = Map<String, Value>;

/// The value Google documents for a function call whose thought signature is unknown (history
/// written by the client, or a call whose signature the caller could not keep). Gemini 3 and
/// later refuse replayed function calls without a signature; this one skips the check.
pub const THOUGHT_SIGNATURE_SENTINEL: &str = "skip_thought_signature_validator";

/// `generationConfig` fields, each with the caller's names for it, first name winning: Gemini's
/// own (camelCase, also the field's name), its snake_case form, then the OpenAI and Commonbase
/// names callers already use.
const GENERATION_ALIASES: &[&[&str]] = &[
    &["temperature"],
    &["topP", "top_p"],
    &["topK", "top_k"],
    &[
        "maxOutputTokens",
        "max_output_tokens",
        "max_tokens",
        "max_completion_tokens",
        "max_tokens_to_sample",
    ],
    &["stopSequences", "stop_sequences", "stop"],
    &["candidateCount", "candidate_count", "n"],
    &["presencePenalty", "presence_penalty"],
    &["frequencyPenalty", "frequency_penalty"],
    &["seed"],
    &["responseMimeType", "response_mime_type"],
    &["responseLogprobs", "response_logprobs"],
];

/// Request fields (outside `generationConfig`) callers may set through params.
const TOP_LEVEL_ALIASES: &[&[&str]] = &[
    &["safetySettings", "safety_settings"],
    &["cachedContent", "cached_content"],
];

/// `embedContent` request fields with the caller's names for them.
const EMBEDDING_ALIASES: &[&[&str]] = &[
    &["taskType", "task_type"],
    &["title"],
    &[
        "outputDimensionality",
        "output_dimensionality",
        "dimensions",
    ],
];

/// The model's resource name: `models/{id}` (a `models/` prefix the caller wrote is kept once),
/// or `tunedModels/{id}` as given.
pub fn model_resource(model: &str) -> Result<String, ProviderError> {
    let (collection, id) = model_parts(model)?;
    Ok(format!("{collection}/{id}"))
}

/// The model's collection and id.
fn model_parts(model: &str) -> Result<(&str, &str), ProviderError> {
    let model = model.trim();
    let (collection, id) = match model.split_once('/') {
        Some((collection @ ("tunedModels" | "models"), id)) => (collection, id),
        _ => ("models", model),
    };
    if id.is_empty() || id.contains('/') {
        return Err(ProviderError::InvalidRequest(format!(
            "{model:?} is not a Gemini model name (e.g. gemini-2.5-flash)"
        )));
    }
    Ok((collection, id))
}

/// Every byte but RFC 3986's unreserved characters is encoded.
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A `POST` to `{base}/{resource}:{method}`, the model id percent-encoded so that no character
/// of it can change the URL's meaning, with the route's key in `x-goog-api-key` when it has one
/// (a keyless route may front a proxy that adds it): never in the URL, which ends up in logs.
/// Gemini routes take no settings: one given (meant for another plugin, or misspelt) is refused
/// rather than ignored.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {}

pub(crate) fn post(
    route: &Route,
    model: &str,
    method: &str,
    stream: bool,
) -> Result<Request, ProviderError> {
    let Settings {} = route.settings()?;
    let base = route.checked_base_url("https://generativelanguage.googleapis.com/v1beta")?;
    let (collection, id) = model_parts(model)?;
    let id = percent_encoding::utf8_percent_encode(id, NOT_UNRESERVED);
    let request = Request::post(format!("{base}/{collection}/{id}:{method}"));
    Ok(request
        .streaming(stream)
        .api_key(route.api_key.as_deref(), KeyIn::Header("x-goog-api-key")))
}

/// Builds the upstream request of a completion: `generateContent`, or
/// `streamGenerateContent?alt=sse` when streaming.
pub fn completion_call(
    request: &CompletionRequest,
    stream: bool,
) -> Result<Request, ProviderError> {
    let method = if stream {
        "streamGenerateContent?alt=sse"
    } else {
        "generateContent"
    };
    completion_body(
        post(&request.route, &request.model, method, stream)?,
        request,
    )
}

/// `http` (a `POST` to a `generateContent` or `streamGenerateContent` URL, with its
/// credentials) with the body of `request` as JSON. The Gemini API and Vertex AI take the same
/// body; only the URL and the credentials differ.
pub fn completion_body(
    http: Request,
    request: &CompletionRequest,
) -> Result<Request, ProviderError> {
    let (system, contents) = match &request.prompt {
        Prompt::Text(text) => {
            let mut contents = Vec::new();
            push_content(&mut contents, "user", text_parts(text));
            (Vec::new(), contents)
        }
        Prompt::Chat(messages) => conversation(messages, &request.model)?,
    };
    if contents.is_empty() {
        return Err(ProviderError::InvalidRequest(
            "Gemini needs at least one user or assistant message with content".into(),
        ));
    }

    let (mut generation_config, mut body) = generation_config(&request.params, &request.route.id)?;
    if let Some(reasoning) = &request.reasoning {
        thinking_config(
            &mut generation_config,
            reasoning,
            &request.model,
            &request.route.id,
        )?;
    }
    output_limit(&mut generation_config, &request.output);
    // `contents` is written into the body as it is serialized (below), not turned into a tree
    // of JSON values first (which would cost many times its text).
    body.remove("contents");
    if !system.is_empty() {
        let instruction = Content {
            role: None,
            parts: system,
        };
        body.insert("systemInstruction".into(), json::to_value(&instruction)?);
    }
    if !request.functions.is_empty() {
        body.insert("tools".into(), json::to_value(&tools(&request.functions)?)?);
        // A function choice means nothing without functions to choose from.
        if let Some(choice) = &request.function_choice {
            body.insert("toolConfig".into(), tool_config(choice));
        }
    }
    if !generation_config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation_config));
    }
    let size = request.params.len() + 256 + request.prompt.json_size_hint();
    http.json_sized(&json::with_entry(&body, "contents", &contents), size)
}

/// `countTokens` of `request`'s prompt: its `generateContent` body as the
/// `generateContentRequest` (with the model's resource name, which that form requires), so
/// that the system instruction, tools and settings count as they would be sent.
pub fn count_call(request: &CompletionRequest) -> Result<Request, ProviderError> {
    let mut body = completion_fields(request)?;
    body.insert("model".into(), json!(model_resource(&request.model)?));
    post(&request.route, &request.model, "countTokens", false)?
        .json(&json!({ "generateContentRequest": body }))
}

/// The `generateContent` body of `request` as a map, for the requests that hold it or part of
/// it (`countTokens` on the Gemini API and on Vertex AI). Read back from the body
/// [`completion_body`] writes, so that a count's body never drifts from the call it sizes.
pub fn completion_fields(request: &CompletionRequest) -> Result<Map<String, Value>, ProviderError> {
    let generate = completion_body(Request::post(String::new()), request)?;
    serde_json::from_slice(generate.body_bytes())
        .map_err(|e| ProviderError::Failed(format!("the generateContent body: {e}")))
}

/// Where a Gemini body says how long the answer may be, under every name Gemini reads (its
/// JSON parser takes the fields' snake_case names too).
pub const OUTPUT: OutputFields = OutputFields {
    max_tokens: &[
        &["generationConfig", "maxOutputTokens"],
        &["generationConfig", "max_output_tokens"],
    ],
    choices: &[
        &["generationConfig", "candidateCount"],
        &["generationConfig", "candidate_count"],
    ],
};

/// Writes the host's output limit into `config` (the `generationConfig`) over every name the
/// caller's params used for it: `maxOutputTokens`, which Gemini counts thoughts in as well,
/// and `candidateCount`; a `thinkingBudget` above it (or dynamic, -1) is brought down to it.
fn output_limit(config: &mut Object, output: &OutputLimit) {
    let Some(max) = output.max_tokens else {
        return;
    };
    for aliases in [&GENERATION_ALIASES[3], &GENERATION_ALIASES[5]] {
        for alias in *aliases {
            config.remove(*alias);
        }
    }
    config.insert("maxOutputTokens".into(), json!(max));
    if output.choices > 1 {
        config.insert("candidateCount".into(), json!(output.choices));
    }
    if let Some(Value::Object(thinking)) = config.get_mut("thinkingConfig") {
        for name in ["thinkingBudget", "thinking_budget"] {
            if let Some(budget) = thinking.get_mut(name)
                && budget.as_i64().is_none_or(|b| b < 0 || b > i64::from(max))
            {
                *budget = json!(max);
            }
        }
    }
}

/// Gemini 2.5's `thinkingBudget` for each effort: Google's own mapping of OpenAI's
/// `reasoning_effort` (its OpenAI-compatible endpoint: low 1,024, medium 8,192, high 24,576,
/// none 0), with `minimal` at 512 (the smallest budget every 2.5 model takes but 0) and `xhigh`
/// at 24,576 (the most 2.5 Flash takes).
fn effort_budget(effort: ReasoningEffort) -> u32 {
    match effort {
        ReasoningEffort::None => 0,
        ReasoningEffort::Minimal => 512,
        ReasoningEffort::Low => 1024,
        ReasoningEffort::Medium => 8192,
        ReasoningEffort::High | ReasoningEffort::Xhigh => 24_576,
    }
}

/// Gemini 3's `thinkingLevel` for each effort: the two levels every Gemini 3 model takes (`low`,
/// `high`; `minimal` and `medium` are Flash's only, and thinking cannot be turned off).
fn effort_level(effort: ReasoningEffort) -> &'static str {
    match effort {
        ReasoningEffort::None | ReasoningEffort::Minimal | ReasoningEffort::Low => "low",
        ReasoningEffort::Medium | ReasoningEffort::High | ReasoningEffort::Xhigh => "high",
    }
}

/// Sets `thinkingConfig` in `config` (the `generationConfig`) from the caller's reasoning
/// settings, over any `thinkingConfig` the params gave:
///
/// - on Gemini 3 models (`gemini-3*` and later) an effort is `thinkingLevel`
///   ([`effort_level`]); elsewhere, or without an effort, a budget is `thinkingBudget` as given
///   and an effort is a budget ([`effort_budget`]). One of the two only: Gemini refuses both.
/// - `includeThoughts: true` (unless the params say otherwise), so that Gemini returns the
///   thought summaries the caller reads as reasoning; not when thinking is turned off (a budget
///   of 0).
fn thinking_config(
    config: &mut Object,
    reasoning: &ReasoningConfig,
    model: &str,
    route: &str,
) -> Result<(), ProviderError> {
    let mut thinking = match config.remove("thinkingConfig") {
        None => Map::new(),
        Some(Value::Object(thinking)) => thinking,
        Some(_) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: thinkingConfig must be an object"
            )));
        }
    };
    let leveled = requires_thought_signatures(model);
    let setting = match (reasoning.effort, reasoning.budget_tokens) {
        (Some(effort), _) if leveled => Some(("thinkingLevel", json!(effort_level(effort)))),
        (_, Some(budget)) => Some(("thinkingBudget", json!(budget))),
        (Some(effort), None) => Some(("thinkingBudget", json!(effort_budget(effort)))),
        (None, None) => None,
    };
    let off = setting
        .as_ref()
        .is_some_and(|(_, value)| *value == json!(0));
    if let Some((key, value)) = setting {
        for named in [
            "thinkingLevel",
            "thinking_level",
            "thinkingBudget",
            "thinking_budget",
        ] {
            thinking.remove(named);
        }
        thinking.insert(key.to_owned(), value);
    }
    if !off && !thinking.contains_key("include_thoughts") {
        thinking
            .entry("includeThoughts")
            .or_insert(Value::Bool(true));
    }
    config.insert("thinkingConfig".into(), Value::Object(thinking));
    Ok(())
}

/// Builds the `batchEmbedContents` request: one `embedContent` request per input, in order.
/// (`embedContent` is the single-input form; the batch form serves one input as well and keeps
/// every gateway call to one upstream call.)
pub fn embedding_call(request: &EmbeddingRequest) -> Result<Request, ProviderError> {
    let http = post(&request.route, &request.model, "batchEmbedContents", false)?;
    let resource = model_resource(&request.model)?;
    let mut params = params_object_except(&request.params, &["model", "content"])?;
    params.retain(|_, value| !value.is_null());
    // Known fields under Gemini's names; anything else is an `embedContent` field the plugin
    // does not know yet: passed as is.
    let mut shared = take_aliases(&mut params, EMBEDDING_ALIASES);
    shared.extend(params);
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
    http.json(&json!({ "requests": requests }))
}

/// Builds the request that makes the images of `request` (Imagen's `predict`, or a Gemini image
/// model's `generateContent`: see `images`), with what reading its answer needs.
pub fn image_call(request: &ImageRequest) -> Result<(Request, ImageCall), ProviderError> {
    let call = ImageCall::of(request, Service::GeminiApi)?;
    let http = post(&request.route, &request.model, call.method(), false)?.json(call.body())?;
    Ok((http, call))
}

/// A text part, or nothing for empty text: Gemini refuses empty text parts.
fn text_parts(text: &str) -> Vec<Part<'static>> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![Part::text(text)]
    }
}

/// Appends `parts` as a `role` turn, merging into the last turn when it has the same role
/// (Gemini wants one turn per speaker change; consecutive function results share one user turn).
fn push_content<'a>(contents: &mut Vec<Content<'a>>, role: &'static str, parts: Vec<Part<'a>>) {
    if parts.is_empty() {
        return;
    }
    match contents.last_mut() {
        Some(last) if last.role == Some(role) => last.parts.extend(parts),
        _ => contents.push(Content {
            role: Some(role),
            parts,
        }),
    }
}

/// Maps a chat conversation to the system instruction's parts and the turns.
///
/// - System messages (wherever they are) make the system instruction: their text only, since
///   Gemini's `systemInstruction` takes text only; an image, audio or document there is refused.
/// - User messages are `user` turns: text, and media as `inlineData` (bytes) or `fileData` (URLs),
///   in the message's order (see [`content_parts`]).
/// - Assistant messages are `model` turns: their reasoning as Gemini wrote it (see
///   [`model_turn`]), their content as a user message's, then their `tool_calls` (or legacy
///   `function_call`) as `functionCall` parts.
/// - `tool` and `function` messages are `functionResponse` parts of a `user` turn, named after
///   the call they answer (see [`result_part`]).
///
/// Reasoning parts on messages other than the assistant's are left out: they say nothing Gemini
/// reads.
pub fn conversation<'a>(
    messages: &'a [Message],
    model: &str,
) -> Result<(Vec<Part<'a>>, Vec<Content<'a>>), ProviderError> {
    let mut system = Vec::new();
    let mut contents = Vec::new();
    let mut open = OpenCalls::new();
    let sentinel = requires_thought_signatures(model).then_some(THOUGHT_SIGNATURE_SENTINEL);
    for (i, message) in messages.iter().enumerate() {
        let (role, parts) = match message.role {
            Role::System => {
                if let Some(part) = message.first_media() {
                    return Err(refused(i, part, "system messages"));
                }
                system.extend(text_parts(&message.text()));
                continue;
            }
            Role::User => ("user", content_parts(i, message)?),
            Role::Assistant => ("model", model_turn(i, message, &mut open, sentinel)?),
            Role::Tool | Role::Function => ("user", vec![result_part(i, message, &mut open)?]),
        };
        push_content(&mut contents, role, parts);
    }
    Ok((system, contents))
}

/// The 400 for `part` of the `i`th message, which Gemini does not take in `place`.
fn refused(i: usize, part: &MessagePart, place: &str) -> ProviderError {
    ProviderError::InvalidRequest(format!(
        "messages[{i}]: gemini does not take {} parts in {place}",
        part.kind()
    ))
}

/// A message's content in order: each run of text parts as one text part (joined with `"\n"`,
/// as a message of one string always was; empty text is left out), each image, audio and
/// document as a media part (see [`media_part`]). Reasoning parts are left out.
fn content_parts(i: usize, message: &Message) -> Result<Vec<Part<'_>>, ProviderError> {
    let mut parts = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    for part in &message.parts {
        match part {
            MessagePart::Text(text) => run.push(text),
            MessagePart::Reasoning(_) => {}
            media => {
                parts.extend(text_parts(&run.join("\n")));
                run.clear();
                parts.push(media_part(i, media)?);
            }
        }
    }
    parts.extend(text_parts(&run.join("\n")));
    Ok(parts)
}

/// An image, audio or document part of the `i`th message:
///
/// - bytes are `inlineData` of the part's media type (an image without one is `image/png`, a
///   document `application/pdf`, as the SDK reads them); audio is `audio/{format}` (`audio/mp3`,
///   `audio/wav`, the names Google lists);
/// - a URL is `fileData` (Gemini fetches `https:` URLs, signed URLs, Files API and `gs://` URIs
///   itself), whose `mimeType` Gemini needs: the part's media type, else one guessed from the
///   URL's extension (`.png`, `.jpg`, `.pdf`, `.txt`, ...). An image URL that gives neither is
///   refused rather than sent as `image/png` (which a JPEG is not); a document URL is
///   `application/pdf`, as a document without a media type always is.
///
/// An image's `detail` and a document's `title` have no field in `generateContent` and are left
/// out.
fn media_part(i: usize, part: &MessagePart) -> Result<Part<'_>, ProviderError> {
    let (source, media_type) = match part {
        MessagePart::Image(image) => match &image.source {
            Source::Bytes(_) => (&image.source, image.media_type().to_owned()),
            Source::Url(url) => {
                let media_type = given_media_type(image.media_type.as_deref())
                    .or_else(|| guess_media_type(url).filter(|t| t.starts_with("image/")))
                    .ok_or_else(|| {
                        ProviderError::InvalidRequest(format!(
                            "messages[{i}]: gemini needs the media type of an image URL; give \
                             one, or a URL ending in .png, .jpg, .jpeg, .webp, .heic or .heif"
                        ))
                    })?;
                (&image.source, media_type.to_owned())
            }
        },
        MessagePart::Document(document) => {
            let media_type = match &document.source {
                Source::Url(url) => given_media_type(document.media_type.as_deref())
                    .or_else(|| guess_media_type(url))
                    .unwrap_or_else(|| document.media_type()),
                Source::Bytes(_) => document.media_type(),
            };
            (&document.source, media_type.to_owned())
        }
        MessagePart::Audio(audio) => {
            let format = audio.format.trim().to_ascii_lowercase();
            let mime_type = match format.contains('/') {
                true => format,
                false => format!("audio/{format}"),
            };
            return Ok(Part {
                inline_data: Some(Blob {
                    mime_type,
                    data: Base64(&audio.data),
                }),
                ..Part::default()
            });
        }
        MessagePart::Text(_) | MessagePart::Reasoning(_) => {
            unreachable!("media_part is called for media parts only")
        }
    };
    Ok(match source {
        Source::Bytes(bytes) => Part {
            inline_data: Some(Blob {
                mime_type: media_type,
                data: Base64(bytes),
            }),
            ..Part::default()
        },
        Source::Url(url) => Part {
            file_data: Some(FileData {
                mime_type: media_type,
                file_uri: url.clone(),
            }),
            ..Part::default()
        },
    })
}

/// A media type the caller gave, unless blank.
fn given_media_type(media_type: Option<&str>) -> Option<&str> {
    media_type.map(str::trim).filter(|t| !t.is_empty())
}

/// The media type of a file Gemini takes, from the extension of `url`'s path.
fn guess_media_type(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let name = path.rsplit('/').next().unwrap_or(path);
    let (_, extension) = name.rsplit_once('.')?;
    Some(match extension.to_ascii_lowercase().as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "gif" => "image/gif",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "xml" => "text/xml",
        "mp3" => "audio/mp3",
        "wav" => "audio/wav",
        _ => return None,
    })
}

/// An assistant message (the `i`th) as the parts of a `model` turn, and the calls it made
/// registered in `open` for the results that follow.
///
/// Reasoning goes back as Gemini wrote it, signatures on the parts they came on (Google: "return
/// the signature in the exact part it was received in"; see `stream` for how answers are read):
///
/// - a signed reasoning part with text (a thought summary) is a `{"thought": true, "text",
///   "thoughtSignature"}` part, first in the turn, as thoughts come first in Gemini's answers;
/// - a signed reasoning part without text is the signature of an answer part: on a message with
///   calls, signatures go onto the calls in order (the first call's, the one Gemini 3 requires,
///   first); one more than there are calls (or the only one of a message without calls) goes on
///   the message's last content part, where Gemini puts it on answers without calls;
/// - reasoning without a signature is left out: it is a summary Gemini does not read back, and
///   so is redacted reasoning (Gemini has none).
///
/// Calls still without a signature go as they are, except on models that refuse that (Gemini 3,
/// see [`requires_thought_signatures`]) when no call of the message has a signature: those get
/// `sentinel`.
fn model_turn<'a>(
    i: usize,
    message: &'a Message,
    open: &mut OpenCalls,
    sentinel: Option<&str>,
) -> Result<Vec<Part<'a>>, ProviderError> {
    let calls = message.calls();
    open.replace(calls.iter().map(|call| OpenCall {
        id: call.id.clone(),
        name: call.name.clone(),
    }));
    let mut parts = Vec::new();
    let mut answer_signatures = Vec::new();
    for reasoning in message.reasoning() {
        let Some(signature) = reasoning.signature.as_deref().filter(|s| !s.is_empty()) else {
            continue;
        };
        if reasoning.text.is_empty() {
            answer_signatures.push(signature);
        } else {
            parts.push(Part {
                text: Some(reasoning.text.clone()),
                thought: Some(true),
                thought_signature: Some(signature.to_owned()),
                ..Part::default()
            });
        }
    }
    let thoughts = parts.len();
    parts.extend(content_parts(i, message)?);
    let surplus = answer_signatures.len().saturating_sub(calls.len());
    let (content_signatures, call_signatures) = answer_signatures.split_at(surplus);
    if let Some(signature) = content_signatures.last()
        && parts.len() > thoughts
        && let Some(last) = parts.last_mut()
    {
        last.thought_signature = Some((*signature).to_owned());
    }
    for (j, call) in calls.into_iter().enumerate() {
        let args = call.arguments_object().ok_or_else(|| {
            let field = match message.tool_calls.is_empty() {
                true => "function_call".to_owned(),
                false => format!("tool_calls[{j}]"),
            };
            ProviderError::InvalidRequest(format!(
                "messages[{i}].{field}.arguments must be a JSON object"
            ))
        })?;
        let signature = match call_signatures.get(j) {
            Some(signature) => Some(*signature),
            None if call_signatures.is_empty() => sentinel,
            None => None,
        };
        let id = Some(call.id).filter(|id| !id.is_empty());
        parts.push(Part {
            function_call: Some(FunctionCallOut {
                id,
                name: call.name,
                args,
            }),
            thought_signature: signature.map(str::to_owned),
            ..Part::default()
        });
    }
    Ok(parts)
}

/// A `tool` or `function` message (the `i`th) as a `functionResponse` part: named after the
/// message's name, else after the call it answers (by `tool_call_id`, else the first open call).
///
/// The response is the content when it is a JSON object, else its text under `output`, the key
/// Google documents for a function's output. A failed tool's (`is_error`) is `{"error": ...}`
/// (the content, as an object when it is one), the key Google documents for error details.
/// Gemini's function responses take no media here (only Gemini 3 takes media, in a separate
/// list), so an image, audio or document is refused.
fn result_part(
    i: usize,
    message: &Message,
    open: &mut OpenCalls,
) -> Result<Part<'static>, ProviderError> {
    if let Some(part) = message.first_media() {
        return Err(refused(i, part, "tool results"));
    }
    let content = message.text();
    let tool = message.role == Role::Tool;
    let id = message.tool_call_id.as_deref().filter(|_| tool);
    let answered = open.answer(id, message.name.as_deref());
    let name = message
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| answered.as_ref().map(|call| call.name.clone()))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ProviderError::InvalidRequest(match tool {
                true => format!(
                    "messages[{i}]: Gemini needs the function's name for a tool result; give \
                     the message a name or a tool_call_id of an earlier call"
                ),
                false => format!("messages[{i}]: a function message needs the function's name"),
            })
        })?;
    let response = match (serde_json::from_str::<Value>(&content), message.is_error) {
        (Ok(object @ Value::Object(_)), false) => object,
        (Ok(object @ Value::Object(_)), true) => json!({ "error": object }),
        (_, false) => json!({ "output": content }),
        (_, true) => json!({ "error": content }),
    };
    let id = answered.map(|call| call.id).filter(|id| !id.is_empty());
    Ok(Part {
        function_response: Some(FunctionResponseOut { id, name, response }),
        ..Part::default()
    })
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
            Ok(FunctionDeclaration {
                name: function.name.clone(),
                description: function.description.clone(),
                parameters: function.schema(i)?.and_then(|s| schema::parameters(&s)),
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

/// Splits the caller's params into the `generationConfig` object and the request's own fields
/// (`safetySettings`, `cachedContent`). `route` (the route's id) names the route in refusals.
///
/// - Known parameters are renamed (see [`GENERATION_ALIASES`]): `max_tokens` (or
///   `max_completion_tokens`) becomes `maxOutputTokens`, `stop` (a string or a list)
///   `stopSequences`, `n` `candidateCount`, ...
/// - `response_format: {"type": "json_object"}` asks for `application/json`;
///   `{"type": "json_schema", "json_schema": {"schema": S}}` also sets `responseSchema`.
/// - OpenAI's `logprobs: true` is Gemini's `responseLogprobs: true` and `top_logprobs: N` its
///   `logprobs: N` (a number in `logprobs` is already Gemini's count).
/// - OpenAI params Gemini has no field for are dropped where leaving them out changes nothing:
///   `parallel_tool_calls` (Gemini has no switch for it: it may always call several functions in
///   one turn, and the caller reads every call either way), `user` (the Gemini API keeps no end
///   user id), `logprobs: false`, `logit_bias: {}`; `logit_bias` with entries is refused (an
///   invalid request naming the route and the param), since Gemini cannot bias tokens.
/// - A `generationConfig` object is the starting point; flat params override its fields.
/// - Every other param goes into `generationConfig` as is (`thinkingConfig`,
///   `responseModalities`, ...), so new Gemini settings work without a plugin update; Gemini
///   answers 400 for names it does not know.
/// - `null` values are left out: they mean "not set"; so are `stream` and `stream_options`:
///   streaming is chosen by the endpoint, not by a flag.
pub fn generation_config(params: &str, route: &str) -> Result<(Object, Object), ProviderError> {
    let params = params_object_except(params, &["stream", "stream_options"])?;
    generation_config_of(params, route)
}

/// [`generation_config`] of params already read (and stripped of what the caller's request
/// holds otherwise): the images of Gemini's image models take their params as completions do.
pub(crate) fn generation_config_of(
    mut params: Object,
    route: &str,
) -> Result<(Object, Object), ProviderError> {
    params.retain(|_, value| !value.is_null());
    let request_fields = take_aliases(&mut params, TOP_LEVEL_ALIASES);
    let mut config = match take_alias(&mut params, &["generationConfig", "generation_config"]) {
        None => Map::new(),
        Some(Value::Object(config)) => config,
        Some(_) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: generationConfig must be an object"
            )));
        }
    };
    if let Some(format) = params.remove("response_format") {
        response_format(&format, &mut config, route)?;
    }
    for dropped in ["parallel_tool_calls", "user"] {
        params.remove(dropped);
    }
    if let Some(bias) = params.remove("logit_bias")
        && bias.as_object().is_none_or(|bias| !bias.is_empty())
    {
        return Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: logit_bias is not supported by the Gemini API (it has no logit bias)"
        )));
    }
    let logprobs = openai_logprobs(&mut params, route)?;
    let mut renamed = take_aliases(&mut params, GENERATION_ALIASES);
    if let Some(stop @ Value::String(_)) = renamed.get_mut("stopSequences") {
        *stop = json!([stop.take()]);
    }
    config.extend(renamed);
    config.extend(params);
    if logprobs.response {
        config
            .entry("responseLogprobs")
            .or_insert(Value::Bool(true));
    }
    if let Some(top) = logprobs.top {
        // Gemini returns top candidates only along with the chosen tokens' logprobs, as OpenAI
        // does; OpenAI refuses `top_logprobs` without `logprobs: true`, so the plugin does too,
        // rather than let Gemini refuse it as an upstream error.
        if config.get("responseLogprobs") != Some(&Value::Bool(true)) {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: top_logprobs needs logprobs: true"
            )));
        }
        config.insert("logprobs".into(), top);
    }
    Ok((config, request_fields))
}

/// OpenAI's logprobs params, taken out of the caller's params.
#[derive(Debug, Default)]
struct Logprobs {
    /// `logprobs: true`: the chosen tokens' logprobs (Gemini's `responseLogprobs`).
    response: bool,
    /// `top_logprobs`: how many top candidates per token (Gemini's `logprobs`).
    top: Option<Value>,
}

/// Takes OpenAI's `logprobs` (a boolean) and `top_logprobs` out of `params`. A number in
/// `logprobs` is Gemini's own field of that name (the count of top candidates) and stays.
fn openai_logprobs(params: &mut Object, route: &str) -> Result<Logprobs, ProviderError> {
    let mut logprobs = Logprobs::default();
    match params.get("logprobs") {
        Some(Value::Bool(response)) => {
            logprobs.response = *response;
            params.remove("logprobs");
        }
        None | Some(Value::Number(_)) => {}
        Some(other) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: logprobs must be true or false, not {other}"
            )));
        }
    }
    if let Some(top) = params.remove("top_logprobs") {
        if !top.is_u64() {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: top_logprobs must be a whole number, not {top}"
            )));
        }
        logprobs.top = Some(top);
    }
    Ok(logprobs)
}

/// Takes each field of `table` out of `params` (see [`take_alias`]), under its first name.
pub(crate) fn take_aliases(params: &mut Object, table: &[&[&str]]) -> Object {
    let fields = table.iter().filter_map(|aliases| {
        let value = take_alias(params, aliases)?;
        Some((aliases[0].to_owned(), value))
    });
    fields.collect()
}

/// Removes every alias from `params` and returns the value of the first one present.
pub(crate) fn take_alias(params: &mut Object, aliases: &[&str]) -> Option<Value> {
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
fn response_format(format: &Value, config: &mut Object, route: &str) -> Result<(), ProviderError> {
    let invalid = || {
        ProviderError::InvalidRequest(format!(
            "route `{route}`: response_format must be {{\"type\": \"text\"}}, \
             {{\"type\": \"json_object\"}} or {{\"type\": \"json_schema\", \"json_schema\": \
             {{\"schema\": ...}}}}"
        ))
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
