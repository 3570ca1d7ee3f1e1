//! The `tool` world (`wit/tool.wit`), on the current line: its bindings, which share the
//! provider world's `types`, `http`, `log` and `kv` (one copy of each, linked once), and the
//! conversions of what a tool plugin lists and answers.

use wasmtime::StoreContextMut;
use wasmtime::component::{Component, ComponentExportIndex, Func, InstancePre, Linker, TypedFunc};

use crate::plugins::imports::PluginState;
use crate::plugins::types as host;

mod bindings {
    wasmtime::component::bindgen!({
        world: "tool",
        path: "../wit",
        imports: { default: async },
        exports: { default: async },
        with: {
            "gateway:provider/types": crate::plugins::wit::v0_2::bindings::gateway::provider::types,
            "gateway:provider/http": crate::plugins::wit::v0_2::bindings::gateway::provider::http,
            "gateway:provider/log": crate::plugins::wit::v0_2::bindings::gateway::provider::log,
            "gateway:provider/kv": crate::plugins::wit::v0_2::bindings::gateway::provider::kv,
        },
    });
}

use bindings::ToolPre;
use bindings::gateway::provider::tool_types as t;

/// The tool world's one interface of its own (types only); the others are the provider
/// world's, linked by it.
pub(super) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.instance("gateway:provider/tool-types@0.2.0")?;
    Ok(())
}

/// Whether a component is a tool plugin: it exports `call-tool`.
pub(super) fn is_tool(component: &Component) -> bool {
    component.get_export_index(None, "call-tool").is_some()
}

/// Checks that every export of the world is there with its type.
pub(super) fn check(pre: &InstancePre<PluginState>) -> wasmtime::Result<()> {
    ToolPre::new(pre.clone()).map(drop)
}

pub(super) async fn info(
    pre: &InstancePre<PluginState>,
    mut store: impl wasmtime::AsContextMut<Data = PluginState>,
) -> wasmtime::Result<wasmtime::Result<host::PluginInfo>> {
    let tool = ToolPre::new(pre.clone())?
        .instantiate_async(&mut store)
        .await?;
    Ok(tool.call_info(&mut store).await.map(Into::into))
}

/// Where a tool plugin's exports are, found once per load.
#[derive(Clone, Copy)]
pub(super) struct ToolExports {
    list_tools: ComponentExportIndex,
    call_tool: ComponentExportIndex,
}

impl ToolExports {
    pub(super) fn find(component: &Component) -> wasmtime::Result<ToolExports> {
        Ok(ToolExports {
            list_tools: super::export_index(component, "list-tools")?,
            call_tool: super::export_index(component, "call-tool")?,
        })
    }

    pub(super) fn list_tools(&self) -> ComponentExportIndex {
        self.list_tools
    }

    pub(super) fn call_tool(&self) -> ComponentExportIndex {
        self.call_tool
    }
}

type ListToolsFunc<'a> = TypedFunc<(&'a t::ToolContext,), (Result<Vec<t::ToolDef>, t::ToolError>,)>;
type CallToolFunc<'a> =
    TypedFunc<(&'a str, &'a str, &'a t::ToolContext), (Result<t::ToolResult, t::ToolError>,)>;

/// What a tool export gives: its answer or its error, or how the instance failed.
pub(super) type ToolCallResult<T> = wasmtime::Result<Result<T, host::ToolError>>;

pub(super) async fn list_tools(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    context: host::ToolContext,
) -> ToolCallResult<Vec<host::ToolDef>> {
    let context = t::ToolContext::from(context);
    // SAFETY: `check` had `ToolPre::new` check this export's type against the world's,
    // which this signature is (bindgen's own for it).
    let typed: ListToolsFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
    let (result,) = typed.call_async(&mut store, (&context,)).await?;
    Ok(result
        .map(|defs| defs.into_iter().map(Into::into).collect())
        .map_err(Into::into))
}

pub(super) async fn call_tool(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    name: &str,
    arguments: &str,
    context: host::ToolContext,
) -> ToolCallResult<host::ToolResult> {
    let context = t::ToolContext::from(context);
    // SAFETY: as in `list_tools`.
    let typed: CallToolFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
    let (result,) = typed
        .call_async(&mut store, (name, arguments, &context))
        .await?;
    Ok(result.map(Into::into).map_err(Into::into))
}

impl From<host::ToolContext> for t::ToolContext {
    fn from(context: host::ToolContext) -> t::ToolContext {
        t::ToolContext {
            server: context.server,
            settings: context.settings,
            secrets: context.secrets,
        }
    }
}

impl From<t::ToolDef> for host::ToolDef {
    fn from(def: t::ToolDef) -> host::ToolDef {
        host::ToolDef {
            name: def.name,
            title: def.title,
            description: def.description,
            input_schema: def.input_schema,
            output_schema: def.output_schema,
            annotations: def.annotations,
        }
    }
}

impl From<t::ToolResult> for host::ToolResult {
    fn from(result: t::ToolResult) -> host::ToolResult {
        host::ToolResult {
            content: result.content.into_iter().map(Into::into).collect(),
            structured_content: result.structured_content,
            is_error: result.is_error,
        }
    }
}

impl From<t::Content> for host::ToolContent {
    fn from(content: t::Content) -> host::ToolContent {
        match content {
            t::Content::Text(text) => host::ToolContent::Text(text),
            t::Content::Image(media) => host::ToolContent::Image {
                data: media.data,
                media_type: media.media_type,
            },
            t::Content::Audio(media) => host::ToolContent::Audio {
                data: media.data,
                media_type: media.media_type,
            },
            t::Content::ResourceLink(link) => host::ToolContent::ResourceLink {
                uri: link.uri,
                name: link.name,
                title: link.title,
                description: link.description,
                media_type: link.media_type,
            },
            t::Content::Embedded(resource) => host::ToolContent::Resource {
                uri: resource.uri,
                media_type: resource.media_type,
                body: match resource.body {
                    t::ResourceBody::Text(text) => host::ResourceBody::Text(text),
                    t::ResourceBody::Blob(blob) => host::ResourceBody::Blob(blob),
                },
            },
        }
    }
}

impl From<t::ToolError> for host::ToolError {
    fn from(error: t::ToolError) -> host::ToolError {
        match error {
            t::ToolError::UnknownTool(name) => host::ToolError::UnknownTool(name),
            t::ToolError::InvalidArguments(message) => host::ToolError::InvalidArguments(message),
            t::ToolError::Failed(message) => host::ToolError::Failed(message),
        }
    }
}
