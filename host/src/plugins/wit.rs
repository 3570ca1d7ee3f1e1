//! The edge between the host and the WIT bindings: the `bindgen!` output, the
//! conversions between its types and the host's own ([`super::types`]), and
//! the check of which `gateway:provider` version a component was built for.
//!
//! Nothing outside `plugins/` names a generated type. Conversions move every
//! string and list (no copies): a request is converted once on its way in, a
//! result or a streamed chunk once on its way out.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::types as host;

mod bindings {
    wasmtime::component::bindgen!({
        world: "provider",
        path: "../plugin-sdk/wit",
        imports: { default: async },
        exports: { default: async },
        with: {
            "gateway:provider/http.incoming-body": super::super::imports::http::IncomingBody,
        },
    });
}

pub(super) use bindings::gateway::provider::{http, log, sink, types};
pub(super) use bindings::{Provider, ProviderPre};

use wasmtime::component::{ComponentExportIndex, Func, Instance, InstancePre, TypedFunc};
use wasmtime::{AsContextMut, StoreContextMut};

use super::imports::PluginState;

type CompleteFunc<'a> =
    TypedFunc<(&'a types::CompletionRequest,), (Result<types::Completion, types::ProviderError>,)>;
type EmbedFunc<'a> =
    TypedFunc<(&'a types::EmbeddingRequest,), (Result<types::Embeddings, types::ProviderError>,)>;

/// A provider linked to the host's imports, its exports found and their
/// types checked once, here. `Provider` (bindgen's) checks every export's
/// type again for each instance; an instance made from this checks none,
/// and calls only the export its request needs (~1.5% of a request's CPU).
pub(super) struct Linked {
    pre: ProviderPre<PluginState>,
    complete: ComponentExportIndex,
    complete_stream: ComponentExportIndex,
    embed: ComponentExportIndex,
}

impl Linked {
    pub(super) fn new(pre: InstancePre<PluginState>) -> wasmtime::Result<Linked> {
        // Checks that every export of the provider world is there with its type.
        let pre = ProviderPre::new(pre)?;
        let component = pre.instance_pre().component();
        let index = |name: &str| {
            component
                .get_export_index(None, name)
                .ok_or_else(|| wasmtime::format_err!("no export `{name}` found"))
        };
        Ok(Linked {
            complete: index("complete")?,
            complete_stream: index("complete-stream")?,
            embed: index("embed")?,
            pre,
        })
    }

    /// With bindgen's checked wrapper, for calls made once per load (`info`).
    pub(super) fn provider_pre(&self) -> &ProviderPre<PluginState> {
        &self.pre
    }

    pub(super) fn instance_pre(&self) -> &InstancePre<PluginState> {
        self.pre.instance_pre()
    }

    pub(super) async fn instantiate(
        &self,
        mut store: impl AsContextMut<Data = PluginState>,
    ) -> wasmtime::Result<Exports> {
        let instance = self.instance_pre().instantiate_async(&mut store).await?;
        Ok(Exports {
            instance,
            complete: self.complete,
            complete_stream: self.complete_stream,
            embed: self.embed,
        })
    }
}

/// One instance's exports, as [`Linked`] found them.
pub(super) struct Exports {
    instance: Instance,
    complete: ComponentExportIndex,
    complete_stream: ComponentExportIndex,
    embed: ComponentExportIndex,
}

impl Exports {
    fn func(
        &self,
        store: &mut StoreContextMut<'_, PluginState>,
        index: ComponentExportIndex,
    ) -> wasmtime::Result<Func> {
        self.instance
            .get_func(&mut *store, index)
            .ok_or_else(|| wasmtime::format_err!("the plugin's export is not a function"))
    }

    pub(super) async fn call_complete(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: &types::CompletionRequest,
        stream: bool,
    ) -> wasmtime::Result<Result<types::Completion, types::ProviderError>> {
        let index = if stream {
            self.complete_stream
        } else {
            self.complete
        };
        let func = self.func(&mut store, index)?;
        // SAFETY: `Linked::new` had `ProviderPre::new` check this export's type
        // against the world's, which this signature is (bindgen's own for it).
        let typed: CompleteFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
        let (result,) = typed.call_async(&mut store, (request,)).await?;
        Ok(result)
    }

    pub(super) async fn call_embed(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: &types::EmbeddingRequest,
    ) -> wasmtime::Result<Result<types::Embeddings, types::ProviderError>> {
        let func = self.func(&mut store, self.embed)?;
        // SAFETY: as in `call_complete`.
        let typed: EmbedFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
        let (result,) = typed.call_async(&mut store, (request,)).await?;
        Ok(result)
    }
}

/// The `gateway:provider` release line this host serves: plugins built
/// against any 0.1.x version (see plugin-sdk/wit/README.md for the policy).
pub const WIT_LINE: &str = "0.1";

/// Why a component is not a plugin this host can serve, by its WIT imports.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    #[error("it imports no gateway:provider interface: not a provider plugin")]
    NotAProvider,
    #[error("it was built for gateway:provider@{0}; this gateway serves {WIT_LINE}.x plugins")]
    OtherLine(String),
}

/// The `gateway:provider` version a component imports, checked against the host's.
pub(super) fn wit_version(component: &Component, engine: &Engine) -> Result<String, VersionError> {
    let ty = component.component_type();
    let version = ty
        .imports(engine)
        .filter_map(|(name, _)| name.strip_prefix("gateway:provider/"))
        .filter_map(|rest| rest.split_once('@').map(|(_, v)| v.to_owned()))
        .next()
        .ok_or(VersionError::NotAProvider)?;
    check_wit_version(&version)?;
    Ok(version)
}

/// Semver compatibility with [`WIT_LINE`]: same major, and for 0.x the same minor.
fn check_wit_version(version: &str) -> Result<(), VersionError> {
    let mut parts = version.split('.');
    let served = match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => WIT_LINE.strip_prefix("0.") == Some(minor),
        (Some(major), _) => major == WIT_LINE,
        (None, _) => false,
    };
    if served {
        Ok(())
    } else {
        Err(VersionError::OtherLine(version.to_owned()))
    }
}

// ---------------------------------------------------------------- into the plugin

fn list<T, U: From<T>>(items: Vec<T>) -> Vec<U> {
    // Same-layout element types: collected in place, no new allocation.
    items.into_iter().map(U::from).collect()
}

impl From<host::Role> for types::Role {
    fn from(role: host::Role) -> types::Role {
        match role {
            host::Role::System => types::Role::System,
            host::Role::User => types::Role::User,
            host::Role::Assistant => types::Role::Assistant,
            host::Role::Function => types::Role::Function,
            host::Role::Tool => types::Role::Tool,
        }
    }
}

impl From<host::FunctionCall> for types::FunctionCall {
    fn from(call: host::FunctionCall) -> types::FunctionCall {
        types::FunctionCall {
            name: call.name,
            arguments: call.arguments,
        }
    }
}

impl From<host::ToolCall> for types::ToolCall {
    fn from(call: host::ToolCall) -> types::ToolCall {
        types::ToolCall {
            id: call.id,
            name: call.name,
            arguments: call.arguments,
        }
    }
}

impl From<host::Message> for types::Message {
    fn from(message: host::Message) -> types::Message {
        types::Message {
            role: message.role.into(),
            content: message.content,
            name: message.name,
            function_call: message.function_call.map(Into::into),
            tool_calls: list(message.tool_calls),
            tool_call_id: message.tool_call_id,
        }
    }
}

impl From<host::FunctionDef> for types::FunctionDef {
    fn from(def: host::FunctionDef) -> types::FunctionDef {
        types::FunctionDef {
            name: def.name,
            description: def.description,
            parameters: def.parameters,
        }
    }
}

impl From<host::FunctionChoice> for types::FunctionChoice {
    fn from(choice: host::FunctionChoice) -> types::FunctionChoice {
        match choice {
            host::FunctionChoice::None => types::FunctionChoice::None,
            host::FunctionChoice::Auto => types::FunctionChoice::Auto,
            host::FunctionChoice::Required => types::FunctionChoice::Required,
            host::FunctionChoice::Named(name) => types::FunctionChoice::Named(name),
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

impl From<host::Route> for types::Route {
    fn from(route: host::Route) -> types::Route {
        types::Route {
            id: route.id,
            base_url: route.base_url,
            api_key: route.api_key,
            settings: route.settings,
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
            params: request.params,
        }
    }
}

impl From<host::EmbeddingRequest> for types::EmbeddingRequest {
    fn from(request: host::EmbeddingRequest) -> types::EmbeddingRequest {
        types::EmbeddingRequest {
            route: request.route.into(),
            model: request.model,
            input: request.input,
            params: request.params,
        }
    }
}

// ---------------------------------------------------------------- out of the plugin

impl From<types::FunctionCall> for host::FunctionCall {
    fn from(call: types::FunctionCall) -> host::FunctionCall {
        host::FunctionCall {
            name: call.name,
            arguments: call.arguments,
        }
    }
}

impl From<types::ToolCall> for host::ToolCall {
    fn from(call: types::ToolCall) -> host::ToolCall {
        host::ToolCall {
            id: call.id,
            name: call.name,
            arguments: call.arguments,
        }
    }
}

impl From<types::FinishReason> for host::FinishReason {
    fn from(reason: types::FinishReason) -> host::FinishReason {
        match reason {
            types::FinishReason::Stop => host::FinishReason::Stop,
            types::FinishReason::Length => host::FinishReason::Length,
            types::FinishReason::FunctionCall => host::FinishReason::FunctionCall,
            types::FinishReason::ToolCalls => host::FinishReason::ToolCalls,
            types::FinishReason::ContentFilter => host::FinishReason::ContentFilter,
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
        }
    }
}

impl From<types::Choice> for host::Choice {
    fn from(choice: types::Choice) -> host::Choice {
        host::Choice {
            index: choice.index,
            text: choice.text,
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

impl From<types::Chunk> for host::Chunk {
    fn from(chunk: types::Chunk) -> host::Chunk {
        host::Chunk {
            deltas: list(chunk.deltas),
            usage: chunk.usage.map(Into::into),
            tool_calls: Vec::new(),
        }
    }
}

impl From<sink::ToolCallDelta> for host::ToolCallDelta {
    fn from(delta: sink::ToolCallDelta) -> host::ToolCallDelta {
        host::ToolCallDelta {
            index: delta.index,
            call: delta.call,
            id: delta.id,
            name: delta.name,
            arguments: delta.arguments,
        }
    }
}

impl From<types::Embeddings> for host::Embeddings {
    fn from(embeddings: types::Embeddings) -> host::Embeddings {
        host::Embeddings {
            model: embeddings.model,
            vectors: embeddings.vectors,
            usage: embeddings.usage.map(Into::into),
        }
    }
}

impl From<types::ProviderError> for host::ProviderError {
    fn from(error: types::ProviderError) -> host::ProviderError {
        match error {
            types::ProviderError::InvalidRequest(message) => {
                host::ProviderError::InvalidRequest(message)
            }
            types::ProviderError::Upstream(e) => {
                host::ProviderError::Upstream(host::UpstreamError {
                    status: e.status,
                    message: e.message,
                    retry_after: e.retry_after,
                })
            }
            types::ProviderError::Timeout(message) => host::ProviderError::Timeout(message),
            types::ProviderError::Failed(message) => host::ProviderError::Failed(message),
        }
    }
}

impl From<types::ModelPrice> for host::ModelPrice {
    fn from(price: types::ModelPrice) -> host::ModelPrice {
        host::ModelPrice {
            model: price.model,
            input_per_mtok: price.input_per_mtok,
            output_per_mtok: price.output_per_mtok,
        }
    }
}

impl From<types::PluginInfo> for host::PluginInfo {
    fn from(info: types::PluginInfo) -> host::PluginInfo {
        host::PluginInfo {
            name: info.name,
            version: info.version,
            models: list(info.models),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_wit_version;

    #[test]
    fn only_the_served_release_line_is_accepted() {
        for ok in ["0.1.0", "0.1.1", "0.1.2", "0.1.9"] {
            assert!(check_wit_version(ok).is_ok(), "{ok}");
        }
        for refused in ["0.2.0", "1.0.0", "2.1.0", "0.0.9"] {
            let err = check_wit_version(refused).unwrap_err().to_string();
            assert!(err.contains(refused) && err.contains("0.1.x"), "{err}");
        }
    }
}
