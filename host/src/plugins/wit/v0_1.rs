//! The 0.1 line, `gateway:provider@0.1.x`, served through the frozen 0.1.2
//! world (every 0.1.x plugin links against it: the line only ever added
//! imports). Its requests are the current line's converted down: text parts
//! joined as 0.1 surfaces joined them, reasoning history left out, a reasoning
//! effort passed as the `reasoning_effort` param 0.1 plugins read; a request
//! with an image, audio or a document is refused naming the plugin and the
//! part kind. Its answers and its imports are converted up, and the imports
//! forward to the current line's implementations.

use crate::plugins::types as host;

mod bindings {
    wasmtime::component::bindgen!({
        world: "provider",
        path: "../wit/frozen/0.1.2",
        imports: { default: async },
        exports: { default: async },
        with: {
            "gateway:provider/http.incoming-body": crate::plugins::imports::http::IncomingBody,
        },
    });
}

use bindings::ProviderPre;
use bindings::gateway::provider::{http, log, sink, types};

use wasmtime::StoreContextMut;
use wasmtime::component::{Func, Resource};

use super::{CallResult, v0_2};
use crate::plugins::imports::PluginState;
use crate::plugins::imports::http::IncomingBody;

line_calls!();
same_records!();

pub(super) async fn complete(
    func: Func,
    store: StoreContextMut<'_, PluginState>,
    request: host::CompletionRequest,
    plugin: &str,
) -> CallResult<host::Completion> {
    match down(request, plugin) {
        Ok(request) => call_complete(func, store, &request).await,
        Err(refused) => Ok(Err(refused)),
    }
}

pub(super) async fn embed(
    func: Func,
    store: StoreContextMut<'_, PluginState>,
    request: host::EmbeddingRequest,
) -> CallResult<host::Embeddings> {
    call_embed(func, store, &request.into()).await
}

// ---------------------------------------------------------------- into the plugin

impl From<host::Route> for types::Route {
    /// 0.1 has no `secrets`: its plugins never asked for any.
    fn from(route: host::Route) -> types::Route {
        types::Route {
            id: route.id,
            base_url: route.base_url,
            api_key: route.api_key,
            settings: route.settings,
        }
    }
}

/// The request as a 0.1 plugin takes it, or why it cannot.
fn down(
    request: host::CompletionRequest,
    plugin: &str,
) -> Result<types::CompletionRequest, host::ProviderError> {
    let prompt = match request.prompt {
        host::Prompt::Text(text) => types::Prompt::Text(text),
        host::Prompt::Chat(messages) => types::Prompt::Chat(
            messages
                .into_iter()
                .map(|message| message_down(message, plugin))
                .collect::<Result<_, _>>()?,
        ),
    };
    let effort = request.reasoning.and_then(|reasoning| reasoning.effort);
    Ok(types::CompletionRequest {
        route: request.route.into(),
        model: request.model,
        prompt,
        functions: request.functions.into_iter().map(Into::into).collect(),
        function_choice: request.function_choice.map(Into::into),
        params: params_down(request.params, effort, request.output),
    })
}

fn message_down(
    message: host::Message,
    plugin: &str,
) -> Result<types::Message, host::ProviderError> {
    if let Some(part) = (message.parts.iter())
        .find(|part| !matches!(part, host::Part::Text(_) | host::Part::Reasoning(_)))
    {
        return Err(host::ProviderError::InvalidRequest(format!(
            "plugin `{plugin}` (built for gateway:provider@0.1) cannot take {} parts; \
             it takes text only",
            part.kind().as_str()
        )));
    }
    Ok(types::Message {
        role: message.role.into(),
        content: content(message.parts),
        name: message.name,
        function_call: message.function_call.map(Into::into),
        tool_calls: message.tool_calls.into_iter().map(Into::into).collect(),
        tool_call_id: message.tool_call_id,
    })
}

/// Text parts joined with `"\n"` (as the surfaces joined an array of text
/// parts before 0.2), the one text moved rather than copied; `None` without text.
fn content(parts: Vec<host::Part>) -> Option<String> {
    let mut texts = parts.into_iter().filter_map(|part| match part {
        host::Part::Text(text) => Some(text),
        _ => None,
    });
    let mut content = texts.next()?;
    for text in texts {
        content.push('\n');
        content.push_str(&text);
    }
    Some(content)
}

/// `params` with `reasoning_effort` set, unless the caller's params set it.
fn params_down(
    params: String,
    effort: Option<host::ReasoningEffort>,
    output: host::OutputLimit,
) -> String {
    if effort.is_none() && output.max_tokens.is_none() && output.choices <= 1 {
        return params;
    }
    let mut object = match serde_json::from_str::<serde_json::Value>(&params) {
        Ok(serde_json::Value::Object(object)) => object,
        _ if params.trim().is_empty() => serde_json::Map::new(),
        // Not an object: the plugin will say so; leave it as the caller sent it.
        _ => return params,
    };
    if let Some(effort) = effort {
        object
            .entry("reasoning_effort")
            .or_insert_with(|| effort.as_str().into());
    }
    // 0.1 has no output limit: its plugins read OpenAI's names, so the limit is written
    // over them (an upstream asked by another name is beyond the host's reach).
    if let Some(max) = output.max_tokens {
        object.insert("max_tokens".into(), max.into());
        if object.contains_key("max_completion_tokens") {
            object.insert("max_completion_tokens".into(), max.into());
        }
    }
    if object.contains_key("n") || output.choices > 1 {
        object.insert("n".into(), output.choices.into());
    }
    serde_json::Value::Object(object).to_string()
}

// ---------------------------------------------------------------- out of the plugin

impl From<types::Usage> for host::Usage {
    fn from(usage: types::Usage) -> host::Usage {
        host::Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
            cached_prompt_tokens: usage.cached_prompt_tokens,
            cache_creation_tokens: usage.cache_creation_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    }
}

impl From<types::Completion> for host::Completion {
    fn from(completion: types::Completion) -> host::Completion {
        host::Completion {
            model: completion.model,
            choices: (completion.choices.into_iter())
                .map(|choice| host::Choice {
                    index: choice.index,
                    text: choice.text,
                    reasoning: Vec::new(),
                    finish_reason: choice.finish_reason.map(|reason| match reason {
                        types::FinishReason::Stop => host::FinishReason::Stop,
                        types::FinishReason::Length => host::FinishReason::Length,
                        types::FinishReason::FunctionCall => host::FinishReason::FunctionCall,
                        types::FinishReason::ToolCalls => host::FinishReason::ToolCalls,
                        types::FinishReason::ContentFilter => host::FinishReason::ContentFilter,
                        types::FinishReason::Other => host::FinishReason::Other,
                    }),
                    function_call: choice.function_call.map(Into::into),
                    tool_calls: choice.tool_calls.into_iter().map(Into::into).collect(),
                    logprobs: choice.logprobs,
                })
                .collect(),
            usage: completion.usage.map(Into::into),
        }
    }
}

// ---------------------------------------------------------------- the imports, forwarded

impl types::Host for PluginState {}

impl sink::Host for PluginState {
    async fn send(&mut self, chunk: types::Chunk) -> Result<(), ()> {
        let chunk = host::Chunk {
            deltas: (chunk.deltas.into_iter())
                .map(|delta| host::TextDelta {
                    index: delta.index,
                    text: delta.text,
                })
                .collect(),
            usage: chunk.usage.map(Into::into),
            ..host::Chunk::default()
        };
        self.send_chunk(chunk).await
    }

    async fn send_tool_calls(&mut self, deltas: Vec<sink::ToolCallDelta>) -> Result<(), ()> {
        let chunk = host::Chunk {
            tool_calls: (deltas.into_iter())
                .map(|delta| host::ToolCallDelta {
                    index: delta.index,
                    call: delta.call,
                    id: delta.id,
                    name: delta.name,
                    arguments: delta.arguments,
                })
                .collect(),
            ..host::Chunk::default()
        };
        self.send_chunk(chunk).await
    }
}

fn http_error(error: v0_2::http::HttpError) -> http::HttpError {
    use v0_2::http::HttpError as Current;
    match error {
        Current::ForbiddenHost(host) => http::HttpError::ForbiddenHost(host),
        Current::Timeout(message) => http::HttpError::Timeout(message),
        Current::TooLarge(limit) => http::HttpError::TooLarge(limit),
        Current::Transport(message) => http::HttpError::Transport(message),
        Current::InvalidRequest(message) => http::HttpError::InvalidRequest(message),
    }
}

impl http::Host for PluginState {
    async fn send(&mut self, request: http::Request) -> Result<http::Response, http::HttpError> {
        let request = v0_2::http::Request {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
        };
        let response = v0_2::http::Host::send(self, request)
            .await
            .map_err(http_error)?;
        Ok(http::Response {
            status: response.status,
            headers: response.headers,
            body: response.body,
        })
    }
}

impl http::HostIncomingBody for PluginState {
    async fn read(
        &mut self,
        body: Resource<IncomingBody>,
    ) -> Result<Option<Vec<u8>>, http::HttpError> {
        v0_2::http::HostIncomingBody::read(self, body)
            .await
            .map_err(http_error)
    }

    async fn drop(&mut self, body: Resource<IncomingBody>) -> wasmtime::Result<()> {
        v0_2::http::HostIncomingBody::drop(self, body).await
    }
}

fn level(level: log::Level) -> v0_2::log::Level {
    match level {
        log::Level::Trace => v0_2::log::Level::Trace,
        log::Level::Debug => v0_2::log::Level::Debug,
        log::Level::Info => v0_2::log::Level::Info,
        log::Level::Warn => v0_2::log::Level::Warn,
        log::Level::Error => v0_2::log::Level::Error,
    }
}

impl log::Host for PluginState {
    async fn enabled(&mut self, at: log::Level) -> bool {
        v0_2::log::Host::enabled(self, level(at)).await
    }

    async fn log(&mut self, at: log::Level, message: String) {
        v0_2::log::Host::log(self, level(at), message).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(parts: Vec<host::Part>) -> host::CompletionRequest {
        host::CompletionRequest {
            route: host::Route::default(),
            model: "m".into(),
            prompt: host::Prompt::Chat(vec![host::Message::new(host::Role::User, parts)]),
            functions: Vec::new(),
            function_choice: None,
            reasoning: None,
            output: host::OutputLimit::default(),
            params: r#"{"temperature":0}"#.into(),
        }
    }

    fn content_of(request: &types::CompletionRequest) -> Option<&str> {
        match &request.prompt {
            types::Prompt::Chat(messages) => messages[0].content.as_deref(),
            types::Prompt::Text(_) => None,
        }
    }

    #[test]
    fn text_parts_are_joined_and_reasoning_is_left_out() {
        let parts = vec![
            host::Part::Reasoning(host::Reasoning::default()),
            host::Part::Text("a".into()),
            host::Part::Text("b".into()),
        ];
        let down = down(request(parts), "p").unwrap();
        assert_eq!(content_of(&down), Some("a\nb"));
        assert_eq!(down.params, r#"{"temperature":0}"#);
        let none = super::down(request(Vec::new()), "p").unwrap();
        assert_eq!(content_of(&none), None);
    }

    #[test]
    fn media_is_refused_naming_the_plugin_and_the_kind() {
        let image = host::Part::Image(host::Image {
            source: host::Source::Url("https://x/y.png".into()),
            media_type: None,
            detail: None,
        });
        let err = down(request(vec![host::Part::Text("a".into()), image]), "legacy").unwrap_err();
        let host::ProviderError::InvalidRequest(message) = err else {
            panic!("{err:?}")
        };
        assert!(
            message.contains("`legacy`") && message.contains("image parts"),
            "{message}"
        );
    }

    #[test]
    fn a_reasoning_effort_becomes_the_param_unless_the_caller_set_it() {
        let mut with_effort = request(vec![host::Part::Text("a".into())]);
        with_effort.reasoning = Some(host::ReasoningConfig {
            effort: Some(host::ReasoningEffort::Low),
            budget_tokens: None,
        });
        let down_params = down(with_effort.clone(), "p").unwrap().params;
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&down_params).unwrap(),
            serde_json::json!({"temperature": 0, "reasoning_effort": "low"})
        );
        with_effort.params = r#"{"reasoning_effort":"high"}"#.into();
        assert_eq!(
            down(with_effort, "p").unwrap().params,
            r#"{"reasoning_effort":"high"}"#
        );
    }

    #[test]
    fn the_output_limit_is_written_over_openais_names() {
        let mut capped = request(vec![host::Part::Text("a".into())]);
        capped.params = r#"{"max_completion_tokens":90000,"max_tokens":90000,"n":7}"#.into();
        capped.output = host::OutputLimit {
            max_tokens: Some(5),
            choices: 2,
        };
        let down_params = down(capped, "p").unwrap().params;
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&down_params).unwrap(),
            serde_json::json!({"max_completion_tokens": 5, "max_tokens": 5, "n": 2})
        );
    }
}
