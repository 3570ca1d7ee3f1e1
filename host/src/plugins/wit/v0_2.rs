//! The current line, `gateway:provider@0.2.x` (`plugin-sdk/wit/provider.wit`):
//! its bindings, and the conversions between its types and the host's own.
//! They move every string and list (no copies): a request is converted once on
//! its way in, a result or a streamed chunk once on its way out. Guards (which
//! share these types) take the other ways too: an answer in, a prompt back.

use crate::plugins::types as host;

pub(super) mod bindings {
    wasmtime::component::bindgen!({
        world: "provider",
        path: "../wit",
        imports: { default: async },
        exports: { default: async },
        with: {
            "gateway:provider/http.incoming-body": crate::plugins::imports::http::IncomingBody,
        },
    });
}

use bindings::ProviderPre;
pub(in crate::plugins) use bindings::gateway::provider::{http, kv, log, sink, types};

use wasmtime::StoreContextMut;
use wasmtime::component::Func;

use super::CallResult;
use crate::plugins::imports::PluginState;

line_calls!();
same_records!();

pub(super) async fn complete(
    func: Func,
    store: StoreContextMut<'_, PluginState>,
    request: host::CompletionRequest,
) -> CallResult<host::Completion> {
    call_complete(func, store, &types::CompletionRequest::from(request)).await
}

pub(super) async fn embed(
    func: Func,
    store: StoreContextMut<'_, PluginState>,
    request: host::EmbeddingRequest,
) -> CallResult<host::Embeddings> {
    call_embed(func, store, &types::EmbeddingRequest::from(request)).await
}

type CountFunc<'a> = wasmtime::component::TypedFunc<
    (&'a types::CompletionRequest,),
    (Result<Option<types::TokenCount>, types::ProviderError>,),
>;

pub(super) async fn count_tokens(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    request: host::CompletionRequest,
) -> CallResult<Option<host::TokenCount>> {
    // SAFETY: as in `call_complete`: `check` had `ProviderPre::new` check this export's type.
    let typed: CountFunc<'_> = unsafe { wasmtime::component::TypedFunc::new_unchecked(func) };
    let request = types::CompletionRequest::from(request);
    let (result,) = typed.call_async(&mut store, (&request,)).await?;
    Ok(result
        .map(|count| {
            count.map(|count| host::TokenCount {
                input_tokens: count.input_tokens,
                estimated: count.estimated,
            })
        })
        .map_err(Into::into))
}

type RerankFunc<'a> = wasmtime::component::TypedFunc<
    (&'a types::RerankRequest,),
    (Result<types::Reranking, types::ProviderError>,),
>;

pub(super) async fn rerank(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    request: host::RerankRequest,
) -> CallResult<host::Reranking> {
    // SAFETY: as in `call_complete`: `check` had `ProviderPre::new` check this export's type.
    let typed: RerankFunc<'_> = unsafe { wasmtime::component::TypedFunc::new_unchecked(func) };
    let request = types::RerankRequest {
        route: request.route.into(),
        model: request.model,
        query: request.query,
        documents: request.documents,
        top_n: request.top_n,
        params: request.params,
    };
    let (result,) = typed.call_async(&mut store, (&request,)).await?;
    Ok(result
        .map(|reranking| host::Reranking {
            model: reranking.model,
            results: (reranking.results.into_iter())
                .map(|result| host::RerankResult {
                    index: result.index,
                    relevance_score: result.relevance_score,
                })
                .collect(),
            usage: reranking.usage.map(Into::into),
            search_units: reranking.search_units,
        })
        .map_err(Into::into))
}

type ImagesFunc<'a> = wasmtime::component::TypedFunc<
    (&'a types::ImageRequest,),
    (Result<types::Images, types::ProviderError>,),
>;

pub(super) async fn generate_images(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    request: host::ImageRequest,
) -> CallResult<host::Images> {
    // SAFETY: as in `call_complete`: `check` had `ProviderPre::new` check this export's type.
    let typed: ImagesFunc<'_> = unsafe { wasmtime::component::TypedFunc::new_unchecked(func) };
    let request = types::ImageRequest {
        route: request.route.into(),
        model: request.model,
        prompt: request.prompt,
        n: request.n,
        size: request.size,
        quality: request.quality,
        params: request.params,
    };
    let (result,) = typed.call_async(&mut store, (&request,)).await?;
    Ok(result
        .map(|images| host::Images {
            model: images.model,
            images: (images.images.into_iter())
                .map(|image| host::GeneratedImage {
                    source: image.source.into(),
                    media_type: image.media_type,
                    revised_prompt: image.revised_prompt,
                })
                .collect(),
            usage: images.usage.map(Into::into),
            size: images.size,
            quality: images.quality,
        })
        .map_err(Into::into))
}

type TranscribeFunc<'a> = wasmtime::component::TypedFunc<
    (&'a types::TranscriptionRequest,),
    (Result<types::Transcription, types::ProviderError>,),
>;

pub(super) async fn transcribe(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    request: host::TranscriptionRequest,
) -> CallResult<host::Transcription> {
    // SAFETY: as in `call_complete`: `check` had `ProviderPre::new` check this export's type.
    let typed: TranscribeFunc<'_> = unsafe { wasmtime::component::TypedFunc::new_unchecked(func) };
    let request = types::TranscriptionRequest {
        route: request.route.into(),
        model: request.model,
        audio: request.audio,
        file_name: request.file_name,
        media_type: request.media_type,
        translate: request.translate,
        params: request.params,
    };
    let (result,) = typed.call_async(&mut store, (&request,)).await?;
    let segments = |segments: Vec<types::TranscriptSegment>| {
        (segments.into_iter())
            .map(|segment| host::TranscriptSegment {
                start: segment.start,
                end: segment.end,
                text: segment.text,
            })
            .collect()
    };
    Ok(result
        .map(|transcription| host::Transcription {
            model: transcription.model,
            text: transcription.text,
            language: transcription.language,
            duration: transcription.duration,
            segments: segments(transcription.segments),
            words: segments(transcription.words),
            usage: transcription.usage.map(Into::into),
            seconds: transcription.seconds,
        })
        .map_err(Into::into))
}

type SpeakFunc<'a> = wasmtime::component::TypedFunc<
    (&'a types::SpeechRequest,),
    (Result<types::Speech, types::ProviderError>,),
>;

pub(super) async fn speak(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    request: host::SpeechRequest,
) -> CallResult<host::Speech> {
    // SAFETY: as in `call_complete`: `check` had `ProviderPre::new` check this export's type.
    let typed: SpeakFunc<'_> = unsafe { wasmtime::component::TypedFunc::new_unchecked(func) };
    let request = types::SpeechRequest {
        route: request.route.into(),
        model: request.model,
        input: request.input,
        voice: request.voice,
        format: request.format,
        params: request.params,
    };
    let (result,) = typed.call_async(&mut store, (&request,)).await?;
    Ok(result
        .map(|speech| host::Speech {
            model: speech.model,
            usage: speech.usage.map(Into::into),
        })
        .map_err(Into::into))
}

// ---------------------------------------------------------------- into the plugin

fn list<T, U: From<T>>(items: Vec<T>) -> Vec<U> {
    // Same-layout element types: collected in place, no new allocation.
    items.into_iter().map(U::from).collect()
}

impl From<host::Route> for types::Route {
    fn from(route: host::Route) -> types::Route {
        types::Route {
            id: route.id,
            base_url: route.base_url,
            api_key: route.api_key,
            settings: route.settings,
            secrets: route.secrets,
        }
    }
}

impl From<host::Source> for types::Source {
    fn from(source: host::Source) -> types::Source {
        match source {
            host::Source::Bytes(bytes) => types::Source::Bytes(bytes),
            host::Source::Url(url) => types::Source::Url(url),
        }
    }
}

impl From<host::Reasoning> for types::Reasoning {
    fn from(reasoning: host::Reasoning) -> types::Reasoning {
        types::Reasoning {
            text: reasoning.text,
            signature: reasoning.signature,
            redacted: reasoning.redacted,
        }
    }
}

impl From<host::Part> for types::Part {
    fn from(part: host::Part) -> types::Part {
        match part {
            host::Part::Text(text) => types::Part::Text(text),
            host::Part::Image(image) => types::Part::Image(types::Image {
                source: image.source.into(),
                media_type: image.media_type,
                detail: image.detail,
            }),
            host::Part::Audio(audio) => types::Part::Audio(types::Audio {
                data: audio.data,
                format: audio.format,
            }),
            host::Part::Document(document) => types::Part::Document(types::Document {
                source: document.source.into(),
                media_type: document.media_type,
                title: document.title,
            }),
            host::Part::Reasoning(reasoning) => types::Part::Reasoning(reasoning.into()),
        }
    }
}

impl From<host::Message> for types::Message {
    fn from(message: host::Message) -> types::Message {
        types::Message {
            role: message.role.into(),
            parts: list(message.parts),
            name: message.name,
            function_call: message.function_call.map(Into::into),
            tool_calls: list(message.tool_calls),
            tool_call_id: message.tool_call_id,
            is_error: message.is_error,
        }
    }
}

impl From<host::Prompt> for types::Prompt {
    fn from(prompt: host::Prompt) -> types::Prompt {
        match prompt {
            host::Prompt::Text(text) => types::Prompt::Text(text),
            host::Prompt::Chat(messages) => types::Prompt::Chat(list(messages)),
        }
    }
}

impl From<host::ReasoningEffort> for types::ReasoningEffort {
    fn from(effort: host::ReasoningEffort) -> types::ReasoningEffort {
        match effort {
            host::ReasoningEffort::None => types::ReasoningEffort::None,
            host::ReasoningEffort::Minimal => types::ReasoningEffort::Minimal,
            host::ReasoningEffort::Low => types::ReasoningEffort::Low,
            host::ReasoningEffort::Medium => types::ReasoningEffort::Medium,
            host::ReasoningEffort::High => types::ReasoningEffort::High,
            host::ReasoningEffort::Xhigh => types::ReasoningEffort::Xhigh,
        }
    }
}

impl From<host::CompletionRequest> for types::CompletionRequest {
    fn from(request: host::CompletionRequest) -> types::CompletionRequest {
        types::CompletionRequest {
            route: request.route.into(),
            model: request.model,
            prompt: request.prompt.into(),
            functions: list(request.functions),
            function_choice: request.function_choice.map(Into::into),
            reasoning: request.reasoning.map(|reasoning| types::ReasoningConfig {
                effort: reasoning.effort.map(Into::into),
                budget_tokens: reasoning.budget_tokens,
            }),
            output: types::OutputLimit {
                max_tokens: request.output.max_tokens,
                choices: request.output.choices,
            },
            params: request.params,
        }
    }
}

// What a guard is shown of an answer: the way back of a plugin's result.

impl From<host::Completion> for types::Completion {
    fn from(completion: host::Completion) -> types::Completion {
        types::Completion {
            model: completion.model,
            choices: list(completion.choices),
            usage: completion.usage.map(Into::into),
        }
    }
}

impl From<host::Choice> for types::Choice {
    fn from(choice: host::Choice) -> types::Choice {
        types::Choice {
            index: choice.index,
            text: choice.text,
            reasoning: list(choice.reasoning),
            finish_reason: choice.finish_reason.map(Into::into),
            function_call: choice.function_call.map(Into::into),
            tool_calls: list(choice.tool_calls),
            logprobs: choice.logprobs,
        }
    }
}

impl From<host::Usage> for types::Usage {
    fn from(usage: host::Usage) -> types::Usage {
        types::Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
            cached_prompt_tokens: usage.cached_prompt_tokens,
            cache_creation_tokens: usage.cache_creation_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            image_prompt_tokens: usage.image_prompt_tokens,
            audio_prompt_tokens: usage.audio_prompt_tokens,
        }
    }
}

impl From<host::FinishReason> for types::FinishReason {
    fn from(reason: host::FinishReason) -> types::FinishReason {
        match reason {
            host::FinishReason::Stop => types::FinishReason::Stop,
            host::FinishReason::Length => types::FinishReason::Length,
            host::FinishReason::FunctionCall => types::FinishReason::FunctionCall,
            host::FinishReason::ToolCalls => types::FinishReason::ToolCalls,
            host::FinishReason::ContentFilter => types::FinishReason::ContentFilter,
            host::FinishReason::StopSequence(sequence) => {
                types::FinishReason::StopSequence(sequence)
            }
            host::FinishReason::Pause => types::FinishReason::Pause,
            host::FinishReason::Refusal => types::FinishReason::Refusal,
            host::FinishReason::Other => types::FinishReason::Other,
        }
    }
}

// ---------------------------------------------------------------- out of the plugin

impl From<types::FinishReason> for host::FinishReason {
    fn from(reason: types::FinishReason) -> host::FinishReason {
        match reason {
            types::FinishReason::Stop => host::FinishReason::Stop,
            types::FinishReason::Length => host::FinishReason::Length,
            types::FinishReason::FunctionCall => host::FinishReason::FunctionCall,
            types::FinishReason::ToolCalls => host::FinishReason::ToolCalls,
            types::FinishReason::ContentFilter => host::FinishReason::ContentFilter,
            types::FinishReason::StopSequence(sequence) => {
                host::FinishReason::StopSequence(sequence)
            }
            types::FinishReason::Pause => host::FinishReason::Pause,
            types::FinishReason::Refusal => host::FinishReason::Refusal,
            types::FinishReason::Other => host::FinishReason::Other,
        }
    }
}

impl From<types::Usage> for host::Usage {
    fn from(usage: types::Usage) -> host::Usage {
        host::Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
            cached_prompt_tokens: usage.cached_prompt_tokens,
            cache_creation_tokens: usage.cache_creation_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            image_prompt_tokens: usage.image_prompt_tokens,
            audio_prompt_tokens: usage.audio_prompt_tokens,
        }
    }
}

impl From<types::Choice> for host::Choice {
    fn from(choice: types::Choice) -> host::Choice {
        host::Choice {
            index: choice.index,
            text: choice.text,
            reasoning: list(choice.reasoning),
            finish_reason: choice.finish_reason.map(Into::into),
            function_call: choice.function_call.map(Into::into),
            tool_calls: list(choice.tool_calls),
            logprobs: choice.logprobs,
        }
    }
}

impl From<types::Completion> for host::Completion {
    fn from(completion: types::Completion) -> host::Completion {
        host::Completion {
            model: completion.model,
            choices: list(completion.choices),
            usage: completion.usage.map(Into::into),
        }
    }
}

impl From<types::TextDelta> for host::TextDelta {
    fn from(delta: types::TextDelta) -> host::TextDelta {
        host::TextDelta {
            index: delta.index,
            text: delta.text,
        }
    }
}

impl From<types::Reasoning> for host::Reasoning {
    fn from(reasoning: types::Reasoning) -> host::Reasoning {
        host::Reasoning {
            text: reasoning.text,
            signature: reasoning.signature,
            redacted: reasoning.redacted,
        }
    }
}

impl From<types::ReasoningDelta> for host::ReasoningDelta {
    fn from(delta: types::ReasoningDelta) -> host::ReasoningDelta {
        host::ReasoningDelta {
            index: delta.index,
            block: delta.block,
            text: delta.text,
            signature: delta.signature,
            redacted: delta.redacted,
        }
    }
}

impl From<types::Chunk> for host::Chunk {
    fn from(chunk: types::Chunk) -> host::Chunk {
        host::Chunk {
            deltas: list(chunk.deltas),
            reasoning: list(chunk.reasoning),
            tool_calls: list(chunk.tool_calls),
            usage: chunk.usage.map(Into::into),
        }
    }
}

impl From<types::ToolCallDelta> for host::ToolCallDelta {
    fn from(delta: types::ToolCallDelta) -> host::ToolCallDelta {
        host::ToolCallDelta {
            index: delta.index,
            call: delta.call,
            id: delta.id,
            name: delta.name,
            arguments: delta.arguments,
        }
    }
}

// What a guard hands back of a request: the way back of what a plugin is sent.

impl From<types::FunctionDef> for host::FunctionDef {
    fn from(def: types::FunctionDef) -> host::FunctionDef {
        host::FunctionDef {
            name: def.name,
            description: def.description,
            parameters: def.parameters,
        }
    }
}

impl From<types::Prompt> for host::Prompt {
    fn from(prompt: types::Prompt) -> host::Prompt {
        match prompt {
            types::Prompt::Text(text) => host::Prompt::Text(text),
            types::Prompt::Chat(messages) => host::Prompt::Chat(list(messages)),
        }
    }
}

impl From<types::Message> for host::Message {
    fn from(message: types::Message) -> host::Message {
        host::Message {
            role: message.role.into(),
            parts: list(message.parts),
            name: message.name,
            function_call: message.function_call.map(Into::into),
            tool_calls: list(message.tool_calls),
            tool_call_id: message.tool_call_id,
            is_error: message.is_error,
        }
    }
}

impl From<types::Role> for host::Role {
    fn from(role: types::Role) -> host::Role {
        match role {
            types::Role::System => host::Role::System,
            types::Role::User => host::Role::User,
            types::Role::Assistant => host::Role::Assistant,
            types::Role::Function => host::Role::Function,
            types::Role::Tool => host::Role::Tool,
        }
    }
}

impl From<types::Source> for host::Source {
    fn from(source: types::Source) -> host::Source {
        match source {
            types::Source::Bytes(bytes) => host::Source::Bytes(bytes),
            types::Source::Url(url) => host::Source::Url(url),
        }
    }
}

impl From<types::Part> for host::Part {
    fn from(part: types::Part) -> host::Part {
        match part {
            types::Part::Text(text) => host::Part::Text(text),
            types::Part::Image(image) => host::Part::Image(host::Image {
                source: image.source.into(),
                media_type: image.media_type,
                detail: image.detail,
            }),
            types::Part::Audio(audio) => host::Part::Audio(host::Audio {
                data: audio.data,
                format: audio.format,
            }),
            types::Part::Document(document) => host::Part::Document(host::Document {
                source: document.source.into(),
                media_type: document.media_type,
                title: document.title,
            }),
            types::Part::Reasoning(reasoning) => host::Part::Reasoning(reasoning.into()),
        }
    }
}
