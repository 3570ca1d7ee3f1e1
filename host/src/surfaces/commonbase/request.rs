//! The request bodies of `/completions` and `/embeddings` as callers send
//! them (Commonbase's shape, plus OpenAI's `tools`/`toolChoice`), and their
//! validation into the plugin's typed request.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::flow::{Kind, Target};
use crate::plugins::types;
use crate::surfaces::parts::{self, ContentBody};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompletionBody {
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub prompt: Option<String>,
    pub messages: Option<Vec<MessageBody>>,
    pub provider_config: Option<ProviderConfig>,
    pub functions: Option<Vec<FunctionBody>>,
    pub function_call: Option<FunctionCallChoice>,
    pub tools: Option<Vec<ToolBody>>,
    pub tool_choice: Option<ToolChoice>,
    pub variables: Option<HashMap<String, String>>,
    pub stream: Option<bool>,
    pub show_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddingBody {
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub input: Option<EmbeddingInput>,
    pub provider_config: Option<ProviderConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of strings")]
pub enum EmbeddingInput {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
pub struct ProviderConfig {
    pub provider: String,
    #[serde(default)]
    pub params: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleBody {
    System,
    User,
    Assistant,
    Function,
    Tool,
}

#[derive(Debug, Deserialize)]
pub struct MessageBody {
    pub role: RoleBody,
    /// A string, or an array of parts in OpenAI's shape (text, images, audio, files).
    pub content: Option<ContentBody>,
    pub name: Option<String>,
    pub function_call: Option<FunctionCallBody>,
    pub tool_calls: Option<Vec<ToolCallBody>>,
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
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionBody,
}

fn function_type() -> String {
    "function".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "\"none\", \"auto\" or {\"name\": ...}")]
pub enum FunctionCallChoice {
    Mode(String),
    Named { name: String },
}

#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
)]
pub enum ToolChoice {
    Mode(String),
    Named { function: NamedFunction },
}

#[derive(Debug, Deserialize)]
pub struct NamedFunction {
    pub name: String,
}

/// Parses a JSON object body, naming the offending field in the error.
pub use crate::surfaces::json::parse_object as parse_body;

/// `projectId` must be present and non-empty.
pub fn require_project_id(project_id: &Option<String>) -> Result<&str, ApiError> {
    match project_id.as_deref() {
        None => Err(ApiError::BadRequest("projectId is required".into())),
        Some(id) if id.trim().is_empty() => {
            Err(ApiError::BadRequest("projectId must not be empty".into()))
        }
        Some(id) => Ok(id),
    }
}

/// The body's `projectId` (required) is the project of the caller's key.
pub fn check_project(key_project: &str, project_id: &Option<String>) -> Result<(), ApiError> {
    let requested = require_project_id(project_id)?;
    if requested != key_project {
        return Err(ApiError::WrongProject(requested.to_owned()));
    }
    Ok(())
}

/// Where `providerConfig` sends the request: `provider` is the route,
/// `params.type` the kind, `params.model` the model; the other `params` go to
/// the plugin as they are.
pub fn target(config: &Option<ProviderConfig>) -> Result<Target, ApiError> {
    let config = config
        .as_ref()
        .ok_or_else(|| ApiError::BadRequest("providerConfig is required".into()))?;
    if config.provider.trim().is_empty() {
        return Err(ApiError::BadRequest(
            "providerConfig.provider must not be empty".into(),
        ));
    }
    let mut params = config.params.clone();
    let kind = match params.remove("type") {
        None => {
            return Err(ApiError::BadRequest(
                "providerConfig.params.type is required (\"text\", \"chat\" or \"embeddings\")"
                    .into(),
            ));
        }
        Some(Value::String(kind)) => match kind.as_str() {
            "text" => Kind::Text,
            "chat" => Kind::Chat,
            "embeddings" => Kind::Embeddings,
            other => {
                return Err(ApiError::BadRequest(format!(
                    "providerConfig.params.type {other:?} is not one of \"text\", \"chat\", \"embeddings\""
                )));
            }
        },
        Some(_) => {
            return Err(ApiError::BadRequest(
                "providerConfig.params.type must be a string".into(),
            ));
        }
    };
    let model = match params.remove("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(model)) if !model.trim().is_empty() => Some(model),
        Some(_) => {
            return Err(ApiError::BadRequest(
                "providerConfig.params.model must be a non-empty string".into(),
            ));
        }
    };
    Ok(Target {
        route: config.provider.clone(),
        kind,
        model,
        params: Value::Object(params).to_string(),
    })
}

/// The completion request's input, variables filled in: the text of the
/// prompt and every message together at most `max_expanded_bytes`. The texts are moved
/// out of the body (a text without placeholders is not copied).
pub fn prompt(
    body: &mut CompletionBody,
    kind: Kind,
    max_expanded_bytes: usize,
    max_part_bytes: usize,
) -> Result<types::Prompt, ApiError> {
    use super::variables::fill_owned;
    let mut budget = super::variables::Budget::new(max_expanded_bytes);
    let variables = body.variables.as_ref();
    match kind {
        Kind::Text => {
            let prompt = body.prompt.take().ok_or_else(|| {
                ApiError::BadRequest("prompt is required when params.type is \"text\"".into())
            })?;
            let prompt = fill_owned(prompt, variables, || "prompt".into(), &mut budget)?;
            Ok(types::Prompt::Text(prompt))
        }
        // A count's prompt is a chat's (the surface serves none: `serves` refuses it first).
        Kind::Chat | Kind::CountTokens => {
            let messages = body.messages.take().ok_or_else(|| {
                ApiError::BadRequest("messages is required when params.type is \"chat\"".into())
            })?;
            if messages.is_empty() {
                return Err(ApiError::BadRequest("messages must not be empty".into()));
            }
            // Mapped in place: the parsed list's allocation becomes the prompt's.
            let message = |(i, message): (usize, MessageBody)| -> Result<_, ApiError> {
                let content = match message.content {
                    Some(ContentBody::Text(content)) => vec![types::Part::Text(fill_owned(
                        content,
                        variables,
                        || format!("messages[{i}].content"),
                        &mut budget,
                    )?)],
                    Some(ContentBody::Parts(parts)) => parts::read(
                        parts,
                        &|| format!("messages[{i}].content"),
                        max_part_bytes,
                        &mut |text, place| fill_owned(text, variables, place, &mut budget),
                    )?,
                    None => Vec::new(),
                };
                if matches!(message.role, RoleBody::Function) && message.name.is_none() {
                    return Err(ApiError::BadRequest(format!(
                        "messages[{i}].name is required on function messages"
                    )));
                }
                Ok(types::Message {
                    role: match message.role {
                        RoleBody::System => types::Role::System,
                        RoleBody::User => types::Role::User,
                        RoleBody::Assistant => types::Role::Assistant,
                        RoleBody::Function => types::Role::Function,
                        RoleBody::Tool => types::Role::Tool,
                    },
                    parts: content,
                    name: message.name,
                    function_call: message.function_call.map(|call| types::FunctionCall {
                        name: call.name,
                        arguments: call.arguments,
                    }),
                    tool_calls: message
                        .tool_calls
                        .into_iter()
                        .flatten()
                        .map(|call| types::ToolCall {
                            id: call.id,
                            name: call.function.name,
                            arguments: call.function.arguments,
                        })
                        .collect(),
                    tool_call_id: message.tool_call_id,
                    is_error: false,
                })
            };
            let mut messages = (messages.into_iter().enumerate())
                .map(message)
                .collect::<Result<Vec<_>, _>>()?;
            messages.shrink_to_fit();
            Ok(types::Prompt::Chat(messages))
        }
        Kind::Embeddings => Err(ApiError::BadRequest(
            "params.type \"embeddings\" is served by POST /embeddings".into(),
        )),
        // The body has no way to ask it (`serves` refuses it first).
        Kind::Rerank => Err(ApiError::BadRequest(
            "reranks are served by POST /v1/rerank".into(),
        )),
        Kind::Images => Err(ApiError::BadRequest(
            "images are made by POST /v1/images/generations".into(),
        )),
        Kind::Transcription => Err(ApiError::BadRequest(
            "audio is written down by POST /v1/audio/transcriptions".into(),
        )),
        Kind::Speech => Err(ApiError::BadRequest(
            "text is spoken by POST /v1/audio/speech".into(),
        )),
    }
}

/// `functions` (Commonbase) and `tools` (OpenAI) together.
pub fn functions(body: &CompletionBody) -> Result<Vec<types::FunctionDef>, ApiError> {
    let mut out = Vec::new();
    let from_body = |f: &FunctionBody, place: String| {
        if f.name.trim().is_empty() {
            return Err(ApiError::BadRequest(format!(
                "{place}.name must not be empty"
            )));
        }
        Ok(types::FunctionDef {
            name: f.name.clone(),
            description: f.description.clone(),
            parameters: f.parameters.as_ref().map(Value::to_string),
        })
    };
    for (i, f) in body.functions.iter().flatten().enumerate() {
        out.push(from_body(f, format!("functions[{i}]"))?);
    }
    for (i, tool) in body.tools.iter().flatten().enumerate() {
        if tool.kind != "function" {
            return Err(ApiError::BadRequest(format!(
                "tools[{i}].type {:?} is not supported (only \"function\")",
                tool.kind
            )));
        }
        out.push(from_body(&tool.function, format!("tools[{i}].function"))?);
    }
    Ok(out)
}

pub fn function_choice(body: &CompletionBody) -> Result<Option<types::FunctionChoice>, ApiError> {
    let mode = |mode: &str, field: &str| match mode {
        "none" => Ok(types::FunctionChoice::None),
        "auto" => Ok(types::FunctionChoice::Auto),
        "required" => Ok(types::FunctionChoice::Required),
        other => Err(ApiError::BadRequest(format!(
            "{field} {other:?} is not one of \"none\", \"auto\", \"required\""
        ))),
    };
    if let Some(choice) = &body.function_call {
        return match choice {
            FunctionCallChoice::Mode(m) => mode(m, "functionCall").map(Some),
            FunctionCallChoice::Named { name } => {
                Ok(Some(types::FunctionChoice::Named(name.clone())))
            }
        };
    }
    match &body.tool_choice {
        None => Ok(None),
        Some(ToolChoice::Mode(m)) => mode(m, "toolChoice").map(Some),
        Some(ToolChoice::Named { function }) => {
            Ok(Some(types::FunctionChoice::Named(function.name.clone())))
        }
    }
}

impl EmbeddingInput {
    pub fn into_list(self) -> Result<Vec<String>, ApiError> {
        let list = match self {
            EmbeddingInput::One(text) => vec![text],
            EmbeddingInput::Many(list) => list,
        };
        if list.is_empty() {
            return Err(ApiError::BadRequest("input must not be empty".into()));
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<CompletionBody, String> {
        parse_body::<CompletionBody>(json.as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn type_errors_name_the_field() {
        let err = parse(r#"{"projectId": 5}"#).unwrap_err();
        assert!(err.contains("projectId"), "{err}");
        let err = parse(r#"{"messages": [{"role": "robot", "content": "x"}]}"#).unwrap_err();
        assert!(err.contains("messages[0].role"), "{err}");
        let err = parse(r#"{"stream": "yes"}"#).unwrap_err();
        assert!(err.contains("stream"), "{err}");
        assert!(parse("[1]").unwrap_err().contains("JSON object"));
        assert!(parse("{nope").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn trailing_bytes_and_duplicate_fields_are_refused_by_name() {
        let err = parse(r#"{"projectId": "p"} xyz"#).unwrap_err();
        assert!(err.contains("trailing characters"), "{err}");
        assert!(parse("{\"projectId\": \"p\"} \n\t ").is_ok());
        let err = parse(r#"{"prompt": "a", "prompt": "b"}"#).unwrap_err();
        assert!(err.contains("duplicate field `prompt`"), "{err}");
        assert!(!err.contains("invalid field ."), "{err}");
        let err = parse(r#"{"providerConfig": {"provider": "a", "provider": "b"}}"#).unwrap_err();
        assert!(
            err.contains("providerConfig") && err.contains("duplicate field `provider`"),
            "{err}"
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        assert!(parse(r#"{"projectId": "p", "somethingNew": {"a": 1}}"#).is_ok());
    }

    #[test]
    fn target_splits_type_and_model_from_passthrough_params() {
        let body = parse(
            r#"{"providerConfig": {"provider": "x", "params": {"type": "chat", "model": "m", "temperature": 0.5}}}"#,
        )
        .unwrap();
        let target = target(&body.provider_config).unwrap();
        assert_eq!(target.kind, Kind::Chat);
        assert_eq!(target.model.as_deref(), Some("m"));
        assert_eq!(target.params, r#"{"temperature":0.5}"#);
    }

    /// Everything a caller's body goes through before the plugin is called.
    fn validate(bytes: &[u8]) -> Result<(), ApiError> {
        let mut body = parse_body::<CompletionBody>(bytes)?;
        require_project_id(&body.project_id)?;
        let target = target(&body.provider_config)?;
        prompt(&mut body, target.kind, 4096, 4096)?;
        functions(&body)?;
        function_choice(&body)?;
        let embeddings = parse_body::<EmbeddingBody>(bytes)?;
        if let Some(input) = embeddings.input {
            input.into_list()?;
        }
        Ok(())
    }

    fn client_error(
        result: Result<(), ApiError>,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.status().is_client_error() => Ok(()),
            Err(e) => Err(proptest::test_runner::TestCaseError::fail(format!(
                "{e} is not a 4xx"
            ))),
        }
    }

    /// JSON texts shaped like requests, with random values in the places callers fill.
    fn request_like() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let text = prop_oneof![
            Just("\"{{v}}\"".to_owned()),
            Just("\"{{w}} x {{v}}\"".to_owned()),
            Just("null".to_owned()),
            Just("5".to_owned()),
            Just("[]".to_owned()),
            Just("{}".to_owned()),
            "\"[a-z{} ]{0,12}\"",
        ];
        let kind = prop_oneof![
            Just("\"text\""),
            Just("\"chat\""),
            Just("\"embeddings\""),
            Just("\"other\""),
            Just("7"),
        ];
        (
            text.clone(),
            text.clone(),
            text,
            kind,
            any::<bool>(),
            "[ ,x}\\]\\[]{0,3}",
        )
            .prop_map(|(prompt, content, var, kind, stream, tail)| {
                format!(
                    r#"{{"projectId": "p", "prompt": {prompt}, "stream": {stream},
                        "messages": [{{"role": "user", "content": {content}}}],
                        "variables": {{"v": {var}, "w": "ww"}}, "input": {prompt},
                        "providerConfig": {{"provider": "r", "params": {{"type": {kind}}}}}}}{tail}"#
                )
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Any bytes in: a 4xx or a valid request, never a panic.
        #[test]
        fn any_bytes_are_a_client_error_or_a_request(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            client_error(validate(&bytes))?;
        }

        /// Almost-valid requests (wrong types, broken JSON, trailing bytes, variables
        /// missing or not text) take the same paths deeper in.
        #[test]
        fn request_shaped_bodies_are_a_client_error_or_a_request(text in request_like(), cut in 0usize..400) {
            client_error(validate(text.as_bytes()))?;
            let cut = cut.min(text.len());
            client_error(validate(&text.as_bytes()[..cut]))?;
        }
    }

    #[test]
    fn tools_and_tool_choice_are_accepted() {
        let body = parse(
            r#"{"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                "toolChoice": {"type": "function", "function": {"name": "f"}}}"#,
        )
        .unwrap();
        let functions = functions(&body).unwrap();
        assert_eq!(
            functions[0].parameters.as_deref(),
            Some(r#"{"type":"object"}"#)
        );
        assert!(matches!(
            function_choice(&body).unwrap(),
            Some(types::FunctionChoice::Named(name)) if name == "f"
        ));
    }
}
