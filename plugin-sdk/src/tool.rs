//! Write tool plugins: the tools of an MCP server the gateway serves at `POST /mcp`
//! (`[mcp_servers.ID] plugin = "NAME"`), run in the same sandbox as providers.
//!
//! A tool plugin is a component of the `tool` world (`wit/tool.wit`):
//!
//! 1. implement [`Tools`] for a unit struct: its [`ToolDef`]s (name, description, the JSON
//!    Schema of the arguments) and [`Tools::call`];
//! 2. call [`export_tool!`](crate::export_tool) with that struct;
//! 3. build the crate as a `cdylib` for `wasm32-wasip2`, as a provider.
//!
//! ```no_run,standalone_crate
//! use gateway_plugin_sdk::tool::*;
//! use serde_json::json;
//!
//! struct Calc;
//!
//! impl Tools for Calc {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("calc", env!("CARGO_PKG_VERSION"), Vec::new())
//!     }
//!
//!     fn tools(_context: &Context) -> Vec<ToolDef> {
//!         let pair = json!({"type": "object", "required": ["a", "b"],
//!             "properties": {"a": {"type": "number"}, "b": {"type": "number"}}});
//!         vec![ToolDef::new("add", "Adds two numbers", pair).read_only()]
//!     }
//!
//!     fn call(name: &str, arguments: Arguments, _context: &Context) -> Result<ToolResult, ToolError> {
//!         #[derive(serde::Deserialize)]
//!         struct Pair { a: f64, b: f64 }
//!         match name {
//!             "add" => {
//!                 let Pair { a, b } = arguments.parse()?;
//!                 Ok(ToolResult::text((a + b).to_string()))
//!             }
//!             _ => Err(ToolError::unknown(name)),
//!         }
//!     }
//! }
//!
//! export_tool!(Calc);
//! ```
//!
//! Before [`Tools::call`] runs, the SDK has checked that the tool exists (else
//! `unknown-tool`), that the arguments are a JSON object and that they hold the schema's
//! `required` properties (else `invalid-arguments`, which the caller gets as JSON-RPC -32602).
//!
//! A failure the model should read and correct (a city not found) is a result,
//! [`ToolResult::error`]; a call that cannot be made at all is a [`ToolError`]. A panic is a
//! bug: logged, and the caller gets a gateway error naming nothing of it.
//!
//! HTTP goes through [`crate::http`] as a provider's does, to the server's `allowed_hosts`
//! only; its errors convert into [`ToolError::Failed`] with `?`.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use crate::export_tool;
pub use crate::{PluginInfo, http, kv, log};

pub use __bindings::gateway::provider::tool_types::{
    Content, EmbeddedResource, Media, ResourceBody, ResourceLink, ToolError, ToolResult,
};

use __bindings::gateway::provider::tool_types as wit;

/// A tool plugin: its tools and how each runs. Each call (and each listing) has a fresh
/// instance: keep what must outlive a call in [`kv`].
pub trait Tools {
    /// Its name and version (no models). Called when the gateway loads it.
    fn info() -> PluginInfo;

    /// Its tools. The gateway asks once per version of the plugin and keeps the list.
    fn tools(context: &Context) -> Vec<ToolDef>;

    /// Runs tool `name` (one of [`Tools::tools`]'s) with its checked arguments.
    fn call(name: &str, arguments: Arguments, context: &Context) -> Result<ToolResult, ToolError>;
}

/// A tool, as callers' `tools/list` shows it (the gateway adds the server's prefix).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// Its name within the plugin: ASCII letters, digits, `_`, `-` and `.`, at most 128.
    pub name: String,
    /// A human-readable name for user interfaces.
    pub title: Option<String>,
    /// What it does, for the model that decides to call it.
    pub description: Option<String>,
    /// The JSON Schema of the arguments: an object schema.
    pub input_schema: Value,
    /// The JSON Schema of its structured result, if it gives one.
    pub output_schema: Option<Value>,
    /// MCP's annotations: `readOnlyHint`, `destructiveHint`, `idempotentHint`,
    /// `openWorldHint`.
    pub annotations: Map<String, Value>,
}

impl ToolDef {
    /// A tool named `name` that does `description`, taking arguments of `input_schema`.
    pub fn new(name: &str, description: &str, input_schema: Value) -> ToolDef {
        ToolDef {
            name: name.to_owned(),
            title: None,
            description: Some(description.to_owned()),
            input_schema,
            output_schema: None,
            annotations: Map::new(),
        }
    }

    /// Its human-readable name.
    pub fn title(mut self, title: &str) -> ToolDef {
        self.title = Some(title.to_owned());
        self
    }

    /// The JSON Schema of the tool's [`ToolResult::structured`] value.
    pub fn output_schema(mut self, schema: Value) -> ToolDef {
        self.output_schema = Some(schema);
        self
    }

    /// Sets annotation `name` (`"openWorldHint"`, ...).
    pub fn annotation(mut self, name: &str, value: Value) -> ToolDef {
        self.annotations.insert(name.to_owned(), value);
        self
    }

    /// It changes nothing (`readOnlyHint`).
    pub fn read_only(self) -> ToolDef {
        self.annotation("readOnlyHint", Value::Bool(true))
    }

    /// The names the input schema requires.
    fn required(&self) -> impl Iterator<Item = &str> {
        self.input_schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    fn into_wit(self) -> wit::ToolDef {
        wit::ToolDef {
            name: self.name,
            title: self.title,
            description: self.description,
            input_schema: self.input_schema.to_string(),
            output_schema: self.output_schema.map(|schema| schema.to_string()),
            annotations: (!self.annotations.is_empty())
                .then(|| Value::Object(self.annotations).to_string()),
        }
    }
}

/// A call's arguments: a JSON object holding the schema's required properties.
#[derive(Debug, Clone, PartialEq)]
pub struct Arguments(pub Map<String, Value>);

impl Arguments {
    /// The arguments as `T`; a mismatch is `invalid-arguments` naming the argument.
    pub fn parse<T: DeserializeOwned>(self) -> Result<T, ToolError> {
        serde_path_to_error::deserialize(Value::Object(self.0)).map_err(|e| {
            let path = e.path().to_string();
            let message = e.into_inner().to_string();
            ToolError::InvalidArguments(if path == "." {
                message
            } else {
                format!("argument `{path}`: {message}")
            })
        })
    }

    /// Argument `name`, as the caller sent it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }
}

/// Where a call runs: its server's id, settings and secrets.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// The server's id: `[mcp_servers.ID]`.
    pub server: String,
    settings: String,
    secrets: Vec<(String, String)>,
}

impl Context {
    /// A context for tests: server `server` with `settings` (a JSON object's text).
    pub fn new(server: &str, settings: &str, secrets: Vec<(String, String)>) -> Context {
        Context {
            server: server.to_owned(),
            settings: settings.to_owned(),
            secrets,
        }
    }

    /// `[mcp_servers.ID.settings]` as `T`; a mismatch names the server and the setting.
    pub fn settings<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        // One reader of settings for providers, guards and tools: the route's.
        let route = crate::Route {
            id: self.server.clone(),
            base_url: String::new(),
            api_key: None,
            settings: self.settings.clone(),
            secrets: Vec::new(),
        };
        route.settings().map_err(|error| {
            let message = match error {
                crate::ProviderError::Failed(message) => message,
                other => format!("{other:?}"),
            };
            let problem = message.strip_prefix("route ").unwrap_or(&message);
            ToolError::Failed(format!("server {problem}"))
        })
    }

    /// The secret the settings name `NAME_env` (or `NAME_file_env`, as `NAME_file`).
    pub fn secret(&self, name: &str) -> Option<&str> {
        self.secrets
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }
}

impl ToolResult {
    /// One text block.
    pub fn text(text: impl Into<String>) -> ToolResult {
        ToolResult {
            content: vec![Content::Text(text.into())],
            structured_content: None,
            is_error: false,
        }
    }

    /// `value` as the structured content (matching the tool's output schema) and, for
    /// clients that read only text, as a text block of the same JSON.
    pub fn structured(value: Value) -> ToolResult {
        let text = value.to_string();
        ToolResult {
            content: vec![Content::Text(text.clone())],
            structured_content: Some(text),
            is_error: false,
        }
    }

    /// The tool ran and failed, for the model to read: `message` is the result's text.
    pub fn error(message: impl Into<String>) -> ToolResult {
        ToolResult {
            is_error: true,
            ..ToolResult::text(message)
        }
    }

    /// No blocks yet: add them with [`ToolResult::with`].
    pub fn empty() -> ToolResult {
        ToolResult {
            content: Vec::new(),
            structured_content: None,
            is_error: false,
        }
    }

    /// This result with one more block (an image, a resource link).
    pub fn with(mut self, content: Content) -> ToolResult {
        self.content.push(content);
        self
    }
}

impl Content {
    /// An image block of `data` (`image/png`, ...).
    pub fn image(data: Vec<u8>, media_type: &str) -> Content {
        Content::Image(Media {
            data,
            media_type: media_type.to_owned(),
        })
    }

    /// A sound block of `data` (`audio/wav`, ...).
    pub fn audio(data: Vec<u8>, media_type: &str) -> Content {
        Content::Audio(Media {
            data,
            media_type: media_type.to_owned(),
        })
    }

    /// A link to a resource the caller may fetch.
    pub fn link(uri: &str, name: &str) -> Content {
        Content::ResourceLink(ResourceLink {
            uri: uri.to_owned(),
            name: name.to_owned(),
            title: None,
            description: None,
            media_type: None,
        })
    }
}

impl ToolError {
    /// No tool is called `name`.
    pub fn unknown(name: &str) -> ToolError {
        ToolError::UnknownTool(name.to_owned())
    }
}

/// An HTTP failure (or a provider helper's error) is the call's failure.
impl From<crate::ProviderError> for ToolError {
    fn from(error: crate::ProviderError) -> ToolError {
        ToolError::Failed(match error {
            crate::ProviderError::Upstream(e) => format!("upstream {}: {}", e.status, e.message),
            crate::ProviderError::InvalidRequest(m)
            | crate::ProviderError::Timeout(m)
            | crate::ProviderError::Failed(m) => m,
        })
    }
}

/// What the SDK checks before [`Tools::call`]: the tool exists, its arguments are an object
/// holding the required properties.
fn checked<T: Tools + ?Sized>(
    name: &str,
    arguments: &str,
    context: &Context,
) -> Result<Arguments, ToolError> {
    let tools = T::tools(context);
    let tool = tools
        .iter()
        .find(|tool| tool.name == name)
        .ok_or_else(|| ToolError::unknown(name))?;
    let arguments = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(arguments)) => arguments,
        Ok(_) => {
            return Err(ToolError::InvalidArguments(
                "the arguments are not a JSON object".into(),
            ));
        }
        Err(e) => {
            return Err(ToolError::InvalidArguments(format!(
                "the arguments are not JSON: {e}"
            )));
        }
    };
    let missing: Vec<&str> = tool
        .required()
        .filter(|required| !arguments.contains_key(*required))
        .collect();
    if !missing.is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "missing required argument(s): {}",
            missing.join(", ")
        )));
    }
    Ok(Arguments(arguments))
}

/// Lists `T`'s tools as the host takes them (for tests: what `list-tools` answers).
pub fn list<T: Tools + ?Sized>(context: &Context) -> Vec<wit::ToolDef> {
    T::tools(context)
        .into_iter()
        .map(ToolDef::into_wit)
        .collect()
}

/// Calls `T`'s tool as the host does, checks included (for tests: what `call-tool` answers).
pub fn call<T: Tools + ?Sized>(
    name: &str,
    arguments: &str,
    context: &Context,
) -> Result<ToolResult, ToolError> {
    let arguments = checked::<T>(name, arguments, context)?;
    T::call(name, arguments, context)
}

/// Exports `$t` (a type implementing [`Tools`]) as the component's `tool` world.
#[macro_export]
macro_rules! export_tool {
    ($t:ty) => {
        const _: () = {
            type __GatewayToolExport = $crate::tool::__bindings::Adapter<$t>;
            $crate::tool::__bindings::export!(
                __GatewayToolExport with_types_in $crate::tool::__bindings
            );
        };
    };
}

/// The `tool` world's bindings, used by [`export_tool!`]; not part of the API. Its imports
/// and shared types are the provider bindings' own.
#[doc(hidden)]
// The generated ABI glue takes one argument per flattened field of a context.
#[allow(clippy::too_many_arguments)]
pub mod __bindings {
    use super::PhantomData;

    wit_bindgen::generate!({
        world: "tool",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "gateway_plugin_sdk::tool::__bindings",
        additional_derives: [PartialEq],
        with: {
            "gateway:provider/types@0.2.0": crate::__private::gateway::provider::types,
            "gateway:provider/http@0.2.0": crate::__private::gateway::provider::http,
            "gateway:provider/log@0.2.0": crate::__private::gateway::provider::log,
            "gateway:provider/kv@0.2.0": crate::__private::gateway::provider::kv,
        },
    });

    /// Bridges a [`super::Tools`] to the generated `Guest` trait.
    pub struct Adapter<T: ?Sized>(PhantomData<fn() -> T>);

    fn context(raw: gateway::provider::tool_types::ToolContext) -> super::Context {
        super::Context {
            server: raw.server,
            settings: raw.settings,
            secrets: raw.secrets,
        }
    }

    impl<T: super::Tools + ?Sized> Guest for Adapter<T> {
        fn info() -> crate::PluginInfo {
            crate::__private::report_panics();
            T::info()
        }

        fn list_tools(
            raw: gateway::provider::tool_types::ToolContext,
        ) -> Result<Vec<ToolDef>, ToolError> {
            crate::__private::report_panics();
            Ok(super::list::<T>(&context(raw)))
        }

        fn call_tool(
            name: String,
            arguments: String,
            raw: gateway::provider::tool_types::ToolContext,
        ) -> Result<ToolResult, ToolError> {
            crate::__private::report_panics();
            super::call::<T>(&name, &arguments, &context(raw))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Calc;

    impl Tools for Calc {
        fn info() -> PluginInfo {
            PluginInfo::new("calc", "1", Vec::new())
        }

        fn tools(_context: &Context) -> Vec<ToolDef> {
            let pair = json!({"type": "object", "required": ["a", "b"],
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}}});
            vec![
                ToolDef::new("add", "Adds", pair.clone())
                    .read_only()
                    .output_schema(json!({"type": "object"})),
                ToolDef::new("div", "Divides", pair),
            ]
        }

        fn call(
            name: &str,
            arguments: Arguments,
            context: &Context,
        ) -> Result<ToolResult, ToolError> {
            #[derive(serde::Deserialize)]
            struct Pair {
                a: f64,
                b: f64,
            }
            #[derive(serde::Deserialize, Default)]
            #[serde(default)]
            struct Settings {
                places: u32,
            }
            let Pair { a, b } = arguments.parse()?;
            let settings: Settings = context.settings()?;
            match name {
                "add" => Ok(ToolResult::structured(
                    json!({"sum": a + b, "places": settings.places}),
                )),
                "div" if b == 0.0 => Ok(ToolResult::error("division by zero")),
                "div" => Ok(ToolResult::text((a / b).to_string())),
                _ => Err(ToolError::unknown(name)),
            }
        }
    }

    fn ctx(settings: &str) -> Context {
        Context::new("calc", settings, vec![("token".into(), "s3cret".into())])
    }

    #[test]
    fn listing_gives_schemas_as_json_text() {
        let listed = list::<Calc>(&ctx("{}"));
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].name, "add");
        let schema: Value = serde_json::from_str(&listed[0].input_schema).expect("JSON");
        assert_eq!(schema["required"], json!(["a", "b"]));
        assert_eq!(
            listed[0].annotations.as_deref(),
            Some(r#"{"readOnlyHint":true}"#)
        );
        assert_eq!(
            listed[0].output_schema.as_deref(),
            Some(r#"{"type":"object"}"#)
        );
        assert_eq!(listed[1].annotations, None);
    }

    #[test]
    fn calls_are_checked_then_run() {
        let context = ctx(r#"{"places": 2}"#);
        let added = call::<Calc>("add", r#"{"a": 1, "b": 2}"#, &context).expect("adds");
        assert_eq!(
            added.structured_content.as_deref(),
            Some(r#"{"places":2,"sum":3.0}"#)
        );
        assert_eq!(
            added.content,
            vec![Content::Text(r#"{"places":2,"sum":3.0}"#.into())]
        );
        let failed = call::<Calc>("div", r#"{"a": 1, "b": 0}"#, &context).expect("a result");
        assert!(failed.is_error);
        assert_eq!(
            call::<Calc>("nope", "{}", &context),
            Err(ToolError::UnknownTool("nope".into()))
        );
        for (arguments, problem) in [
            ("[1]", "the arguments are not a JSON object"),
            ("{", "the arguments are not JSON"),
            (r#"{"a": 1}"#, "missing required argument(s): b"),
            (r#"{"a": 1, "b": "x"}"#, "argument `b`: invalid type"),
        ] {
            match call::<Calc>("add", arguments, &context) {
                Err(ToolError::InvalidArguments(message)) => {
                    assert!(message.starts_with(problem), "{arguments}: {message}")
                }
                other => panic!("{arguments}: {other:?}"),
            }
        }
        assert_eq!(context.secret("token"), Some("s3cret"));
    }

    #[test]
    fn bad_settings_name_the_server_and_the_setting() {
        match call::<Calc>("add", r#"{"a": 1, "b": 2}"#, &ctx(r#"{"places": "x"}"#)) {
            Err(ToolError::Failed(message)) => assert!(
                message.starts_with("server `calc`: setting `places`"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
