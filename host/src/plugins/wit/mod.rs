//! The edge between the host and the WIT bindings: one module per release
//! line of `gateway:provider` the host serves, as Zed's extension host keeps
//! one per version. `v0_2` is the current line (`plugin-sdk/wit/provider.wit`);
//! `v0_1` serves every 0.1.x plugin through the frozen 0.1.2 world, converting
//! its records to the current ones at this edge. Each line's module converts
//! between its generated types and the host's own ([`super::types`]); nothing
//! outside `plugins/` names a generated type, and the host's imports are
//! written once, against the current line (`v0_1` forwards to them).
//!
//! This module finds which line a component was built for, checks its exports
//! once at link time, and calls them.

/// What every line's module does the same way against its own generated
/// types (`bindings`, `types`, `ProviderPre` in scope where it is expanded):
/// linking its imports, checking a component's exports, calling `info`, and
/// calling `complete` / `embed` through the export found at link time.
macro_rules! line_calls {
    () => {
        type CompleteFunc<'a> = wasmtime::component::TypedFunc<
            (&'a types::CompletionRequest,),
            (Result<types::Completion, types::ProviderError>,),
        >;
        type EmbedFunc<'a> = wasmtime::component::TypedFunc<
            (&'a types::EmbeddingRequest,),
            (Result<types::Embeddings, types::ProviderError>,),
        >;

        pub(super) fn add_to_linker(
            linker: &mut wasmtime::component::Linker<PluginState>,
        ) -> wasmtime::Result<()> {
            bindings::Provider::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
                linker,
                |state| state,
            )
        }

        /// Checks that every export of the world is there with its type.
        pub(super) fn check(
            pre: &wasmtime::component::InstancePre<PluginState>,
        ) -> wasmtime::Result<()> {
            ProviderPre::new(pre.clone()).map(drop)
        }

        /// Instantiates the plugin (the outer error) and calls its `info` (the inner one).
        pub(super) async fn info(
            pre: &wasmtime::component::InstancePre<PluginState>,
            mut store: impl wasmtime::AsContextMut<Data = PluginState>,
        ) -> wasmtime::Result<wasmtime::Result<host::PluginInfo>> {
            let provider = ProviderPre::new(pre.clone())?
                .instantiate_async(&mut store)
                .await?;
            Ok(provider.call_info(&mut store).await.map(Into::into))
        }

        async fn call_complete(
            func: wasmtime::component::Func,
            mut store: wasmtime::StoreContextMut<'_, PluginState>,
            request: &types::CompletionRequest,
        ) -> super::CallResult<host::Completion> {
            // SAFETY: `check` had `ProviderPre::new` check this export's type
            // against the world's, which this signature is (bindgen's own for it).
            let typed: CompleteFunc<'_> =
                unsafe { wasmtime::component::TypedFunc::new_unchecked(func) };
            let (result,) = typed.call_async(&mut store, (request,)).await?;
            Ok(result.map(Into::into).map_err(Into::into))
        }

        async fn call_embed(
            func: wasmtime::component::Func,
            mut store: wasmtime::StoreContextMut<'_, PluginState>,
            request: &types::EmbeddingRequest,
        ) -> super::CallResult<host::Embeddings> {
            // SAFETY: as in `call_complete`.
            let typed: EmbedFunc<'_> =
                unsafe { wasmtime::component::TypedFunc::new_unchecked(func) };
            let (result,) = typed.call_async(&mut store, (request,)).await?;
            Ok(result.map(Into::into).map_err(Into::into))
        }
    };
}

/// The conversions of the records every line has the same (role, calls, function
/// definitions and choice, embeddings, errors, plugin info), written once
/// and expanded in each line's module against its own generated `types`.
macro_rules! same_records {
    () => {
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
                    models: info.models.into_iter().map(Into::into).collect(),
                }
            }
        }
    };
}

mod guard;
mod tool;
mod v0_1;
mod v0_2;

pub(super) use v0_2::{http, kv, log, sink, types};

use wasmtime::component::{Component, ComponentExportIndex, Func, Instance, InstancePre, Linker};
use wasmtime::{AsContextMut, Engine, StoreContextMut};

use super::imports::PluginState;
use super::types as host;

/// The `gateway:provider` release lines this host serves, newest first (see
/// plugin-sdk/wit/README.md for the policy).
pub const WIT_LINES: &str = "0.2.x and 0.1.x";

/// A release line of the plugin interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    V0_1,
    V0_2,
}

impl Line {
    /// The line of `version`: same major, and for 0.x the same minor.
    fn of(version: &str) -> Option<Line> {
        let mut parts = version.split('.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("0"), Some("1"), Some(_)) => Some(Line::V0_1),
            (Some("0"), Some("2"), Some(_)) => Some(Line::V0_2),
            _ => None,
        }
    }
}

/// Why a component is not a plugin this host can serve, by its WIT imports.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    #[error("it imports no gateway:provider interface: not a provider plugin")]
    NotAProvider,
    #[error("it was built for gateway:provider@{0}; this gateway serves {WIT_LINES} plugins")]
    OtherLine(String),
}

/// The `gateway:provider` version a component imports, checked against the
/// lines the host serves.
pub(super) fn wit_version(component: &Component, engine: &Engine) -> Result<String, VersionError> {
    let (version, _) = line_of(component, engine)?;
    Ok(version)
}

fn line_of(component: &Component, engine: &Engine) -> Result<(String, Line), VersionError> {
    let ty = component.component_type();
    let version = ty
        .imports(engine)
        .filter_map(|(name, _)| name.strip_prefix("gateway:provider/"))
        .filter_map(|rest| rest.split_once('@').map(|(_, v)| v.to_owned()))
        .next()
        .ok_or(VersionError::NotAProvider)?;
    match Line::of(&version) {
        Some(line) => Ok((version, line)),
        None => Err(VersionError::OtherLine(version)),
    }
}

/// Adds the imports of every line the host serves to `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    v0_2::add_to_linker(linker)?;
    v0_1::add_to_linker(linker)?;
    guard::add_to_linker(linker)?;
    tool::add_to_linker(linker)
}

/// Where a component's exports are, found once per load.
#[derive(Clone, Copy)]
struct ExportIndexes {
    complete: ComponentExportIndex,
    complete_stream: ComponentExportIndex,
    embed: ComponentExportIndex,
    /// 0.2's; a 0.1 plugin has none.
    count_tokens: Option<ComponentExportIndex>,
    /// 0.2's; a 0.1 plugin has none.
    rerank: Option<ComponentExportIndex>,
    /// 0.2's; a 0.1 plugin has none.
    generate_images: Option<ComponentExportIndex>,
    /// 0.2's; a 0.1 plugin has none.
    transcribe: Option<ComponentExportIndex>,
    /// 0.2's; a 0.1 plugin has none.
    speak: Option<ComponentExportIndex>,
}

impl ExportIndexes {
    fn find(component: &Component, line: Line) -> wasmtime::Result<ExportIndexes> {
        Ok(ExportIndexes {
            complete: export_index(component, "complete")?,
            complete_stream: export_index(component, "complete-stream")?,
            embed: export_index(component, "embed")?,
            count_tokens: match line {
                Line::V0_1 => None,
                Line::V0_2 => Some(export_index(component, "count-tokens")?),
            },
            rerank: match line {
                Line::V0_1 => None,
                Line::V0_2 => Some(export_index(component, "rerank")?),
            },
            generate_images: match line {
                Line::V0_1 => None,
                Line::V0_2 => Some(export_index(component, "generate-images")?),
            },
            transcribe: match line {
                Line::V0_1 => None,
                Line::V0_2 => Some(export_index(component, "transcribe")?),
            },
            speak: match line {
                Line::V0_1 => None,
                Line::V0_2 => Some(export_index(component, "speak")?),
            },
        })
    }
}

/// Where a component's top-level export `name` is, found once per load (both worlds').
fn export_index(component: &Component, name: &str) -> wasmtime::Result<ComponentExportIndex> {
    component
        .get_export_index(None, name)
        .ok_or_else(|| wasmtime::format_err!("no export `{name}` found"))
}

/// Which world a component serves, with where its exports are.
#[derive(Clone, Copy)]
enum World {
    Provider { line: Line, exports: ExportIndexes },
    Guard(guard::GuardExports),
    Tool(tool::ToolExports),
}

/// The worlds a plugin may serve, as listings name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorldKind {
    Provider,
    Guard,
    Tool,
}

impl WorldKind {
    pub fn name(self) -> &'static str {
        match self {
            WorldKind::Provider => "provider",
            WorldKind::Guard => "guard",
            WorldKind::Tool => "tool",
        }
    }
}

/// A plugin linked to the host's imports, its world (and a provider's line)
/// known and its exports found and their types checked once, here. bindgen's
/// `Provider` checks every export's type again for each instance; an instance
/// made from this checks none, and calls only the export its request needs
/// (~1.5% of a request's CPU).
#[derive(Clone)]
pub(super) struct Linked {
    pre: InstancePre<PluginState>,
    world: World,
}

impl Linked {
    pub(super) fn new(pre: InstancePre<PluginState>) -> wasmtime::Result<Linked> {
        let component = pre.component();
        let (_, line) = line_of(component, component.engine())?;
        let world = if guard::is_guard(component) {
            if line != Line::V0_2 {
                return Err(wasmtime::format_err!(
                    "a guard is built on gateway:provider 0.2"
                ));
            }
            guard::check(&pre)?;
            World::Guard(guard::GuardExports::find(component)?)
        } else if tool::is_tool(component) {
            if line != Line::V0_2 {
                return Err(wasmtime::format_err!(
                    "a tool plugin is built on gateway:provider 0.2"
                ));
            }
            tool::check(&pre)?;
            World::Tool(tool::ToolExports::find(component)?)
        } else {
            // Checks that every export of the line's world is there with its type.
            match line {
                Line::V0_1 => v0_1::check(&pre)?,
                Line::V0_2 => v0_2::check(&pre)?,
            }
            World::Provider {
                line,
                exports: ExportIndexes::find(component, line)?,
            }
        };
        Ok(Linked { world, pre })
    }

    pub(super) fn instance_pre(&self) -> &InstancePre<PluginState> {
        &self.pre
    }

    /// The world the plugin serves.
    pub(super) fn world(&self) -> WorldKind {
        match self.world {
            World::Provider { .. } => WorldKind::Provider,
            World::Guard(_) => WorldKind::Guard,
            World::Tool(_) => WorldKind::Tool,
        }
    }

    /// An instance (the outer error) and its `info` (the inner one), through
    /// bindgen's checked wrapper: called once per load.
    pub(super) async fn info(
        &self,
        store: impl AsContextMut<Data = PluginState>,
    ) -> wasmtime::Result<wasmtime::Result<host::PluginInfo>> {
        match self.world {
            World::Provider {
                line: Line::V0_1, ..
            } => v0_1::info(&self.pre, store).await,
            World::Provider {
                line: Line::V0_2, ..
            } => v0_2::info(&self.pre, store).await,
            World::Guard(_) => guard::info(&self.pre, store).await,
            World::Tool(_) => tool::info(&self.pre, store).await,
        }
    }

    pub(super) async fn instantiate(
        &self,
        mut store: impl AsContextMut<Data = PluginState>,
    ) -> wasmtime::Result<Exports> {
        let instance = self.pre.instantiate_async(&mut store).await?;
        Ok(Exports {
            instance,
            world: self.world,
        })
    }
}

/// One instance's exports, as [`Linked`] found them.
pub(super) struct Exports {
    instance: Instance,
    world: World,
}

/// What a call of an export gives: the plugin's answer or its error (in host
/// types), or how the instance failed.
pub(super) type CallResult<T> = wasmtime::Result<Result<T, host::ProviderError>>;

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

    /// A provider's line and exports; a guard or a tool is refused (the registry
    /// hands routes providers only: this is the last line of that defence).
    fn provider(&self) -> wasmtime::Result<(Line, &ExportIndexes)> {
        match &self.world {
            World::Provider { line, exports } => Ok((*line, exports)),
            World::Guard(_) | World::Tool(_) => Err(wasmtime::format_err!(
                "only a provider plugin serves model calls"
            )),
        }
    }

    fn guard(&self) -> wasmtime::Result<&guard::GuardExports> {
        match &self.world {
            World::Guard(exports) => Ok(exports),
            World::Provider { .. } | World::Tool(_) => {
                Err(wasmtime::format_err!("the plugin is not a guard"))
            }
        }
    }

    fn tool(&self) -> wasmtime::Result<&tool::ToolExports> {
        match &self.world {
            World::Tool(exports) => Ok(exports),
            World::Provider { .. } | World::Guard(_) => {
                Err(wasmtime::format_err!("the plugin is not a tool plugin"))
            }
        }
    }

    /// A tool plugin's `list-tools`.
    pub(super) async fn list_tools(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        context: host::ToolContext,
    ) -> tool::ToolCallResult<Vec<host::ToolDef>> {
        let func = self.func(&mut store, self.tool()?.list_tools())?;
        tool::list_tools(func, store, context).await
    }

    /// A tool plugin's `call-tool`.
    pub(super) async fn call_tool(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        name: &str,
        arguments: &str,
        context: host::ToolContext,
    ) -> tool::ToolCallResult<host::ToolResult> {
        let func = self.func(&mut store, self.tool()?.call_tool())?;
        tool::call_tool(func, store, name, arguments, context).await
    }

    /// `complete`, or `complete-stream` when `stream`. `plugin` names the
    /// plugin in the refusal of what its line cannot take.
    pub(super) async fn call_complete(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::CompletionRequest,
        stream: bool,
        plugin: &str,
    ) -> CallResult<host::Completion> {
        let (line, exports) = self.provider()?;
        let index = if stream {
            exports.complete_stream
        } else {
            exports.complete
        };
        let func = self.func(&mut store, index)?;
        match line {
            Line::V0_1 => v0_1::complete(func, store, request, plugin).await,
            Line::V0_2 => v0_2::complete(func, store, request).await,
        }
    }

    pub(super) async fn call_embed(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::EmbeddingRequest,
    ) -> CallResult<host::Embeddings> {
        let (line, exports) = self.provider()?;
        let func = self.func(&mut store, exports.embed)?;
        match line {
            Line::V0_1 => v0_1::embed(func, store, request).await,
            Line::V0_2 => v0_2::embed(func, store, request).await,
        }
    }

    /// `count-tokens`: `None` when the plugin cannot say (a 0.1 plugin never can).
    pub(super) async fn call_count_tokens(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::CompletionRequest,
    ) -> CallResult<Option<host::TokenCount>> {
        let (_, exports) = self.provider()?;
        let Some(index) = exports.count_tokens else {
            return Ok(Ok(None));
        };
        let func = self.func(&mut store, index)?;
        v0_2::count_tokens(func, store, request).await
    }

    /// `rerank`; a 0.1 plugin's answer is that it cannot (its world has no such export).
    pub(super) async fn call_rerank(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::RerankRequest,
        plugin: &str,
    ) -> CallResult<host::Reranking> {
        let (_, exports) = self.provider()?;
        let Some(index) = exports.rerank else {
            return Ok(Err(host::ProviderError::InvalidRequest(format!(
                "{plugin} does not support rerank (it is built for gateway:provider 0.1)"
            ))));
        };
        let func = self.func(&mut store, index)?;
        v0_2::rerank(func, store, request).await
    }

    /// `generate-images`; a 0.1 plugin's answer is that it cannot.
    pub(super) async fn call_generate_images(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::ImageRequest,
        plugin: &str,
    ) -> CallResult<host::Images> {
        let (_, exports) = self.provider()?;
        let Some(index) = exports.generate_images else {
            return Ok(Err(host::ProviderError::InvalidRequest(format!(
                "{plugin} does not support image generation (it is built for gateway:provider 0.1)"
            ))));
        };
        let func = self.func(&mut store, index)?;
        v0_2::generate_images(func, store, request).await
    }

    /// `transcribe`; a 0.1 plugin's answer is that it cannot.
    pub(super) async fn call_transcribe(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::TranscriptionRequest,
        plugin: &str,
    ) -> CallResult<host::Transcription> {
        let (_, exports) = self.provider()?;
        let Some(index) = exports.transcribe else {
            return Ok(Err(host::ProviderError::InvalidRequest(format!(
                "{plugin} does not support transcription (it is built for gateway:provider 0.1)"
            ))));
        };
        let func = self.func(&mut store, index)?;
        v0_2::transcribe(func, store, request).await
    }

    /// `speak`; a 0.1 plugin's answer is that it cannot.
    pub(super) async fn call_speak(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::SpeechRequest,
        plugin: &str,
    ) -> CallResult<host::Speech> {
        let (_, exports) = self.provider()?;
        let Some(index) = exports.speak else {
            return Ok(Err(host::ProviderError::InvalidRequest(format!(
                "{plugin} does not support speech (it is built for gateway:provider 0.1)"
            ))));
        };
        let func = self.func(&mut store, index)?;
        v0_2::speak(func, store, request).await
    }

    /// A guard's `check-request`; the request comes back whatever happened.
    pub(super) async fn check_request(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::CheckedRequest,
    ) -> (host::CheckedRequest, wasmtime::Result<host::RequestVerdict>) {
        let func = match self
            .guard()
            .and_then(|exports| self.func(&mut store, exports.check_request()))
        {
            Ok(func) => func,
            Err(e) => return (request, Err(e)),
        };
        guard::check_request(func, store, request).await
    }

    /// A guard's `check-response`; the request and the answer come back whatever happened.
    pub(super) async fn check_response(
        &self,
        mut store: StoreContextMut<'_, PluginState>,
        request: host::CheckedRequest,
        answer: host::Completion,
    ) -> (
        host::CheckedRequest,
        host::Completion,
        wasmtime::Result<host::AnswerVerdict>,
    ) {
        let func = match self
            .guard()
            .and_then(|exports| self.func(&mut store, exports.check_response()))
        {
            Ok(func) => func,
            Err(e) => return (request, answer, Err(e)),
        };
        guard::check_response(func, store, request, answer).await
    }
}

#[cfg(test)]
mod tests {
    use super::Line;

    #[test]
    fn the_served_release_lines_are_known_by_their_versions() {
        for (version, line) in [
            ("0.1.0", Line::V0_1),
            ("0.1.2", Line::V0_1),
            ("0.1.9", Line::V0_1),
            ("0.2.0", Line::V0_2),
            ("0.2.7", Line::V0_2),
        ] {
            assert_eq!(Line::of(version), Some(line), "{version}");
        }
        for refused in ["0.3.0", "1.0.0", "2.1.0", "0.0.9", "0.1", ""] {
            assert_eq!(Line::of(refused), None, "{refused}");
        }
    }

    /// A released version is never edited: while the package's files declare a version that
    /// is frozen, they are its frozen copies (a change needs a new version first), and the
    /// 0.2.0 release stays whole.
    #[test]
    fn the_current_version_is_the_frozen_one() {
        let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let read = |path: std::path::PathBuf| {
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let files = ["provider.wit", "guard.wit", "tool.wit"];
        let declared = |text: &str| {
            (text.lines().next())
                .and_then(|line| line.strip_prefix("package gateway:provider@"))
                .and_then(|line| line.strip_suffix(';'))
                .map(str::to_owned)
        };
        let version = declared(&read(wit.join("provider.wit"))).expect("a package line");
        for file in files {
            assert_eq!(
                declared(&read(wit.join(file))).as_deref(),
                Some(version.as_str()),
                "{file} declares another version"
            );
            let released = read(wit.join("frozen/0.2.0").join(file));
            assert_eq!(
                declared(&released).as_deref(),
                Some("0.2.0"),
                "frozen {file}"
            );
        }
        let frozen = wit.join("frozen").join(&version);
        if !frozen.exists() {
            // Not released yet: it may still change.
            return;
        }
        for file in files {
            assert!(
                read(wit.join(file)) == read(frozen.join(file)),
                "wit/{file} differs from its frozen copy of {version}: released versions are \
                 never edited; bump the version in wit/*.wit first (wit/README.md)"
            );
        }
    }
}
