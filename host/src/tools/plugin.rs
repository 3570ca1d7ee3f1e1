//! One `[mcp_servers.ID] plugin = "NAME"`: a tool plugin as an MCP server. Each listing and
//! each call runs in a fresh instance of the plugin's serving version, in the server's own
//! sandbox (its `allowed_hosts`, memory and CPU limits, within its timeout), so a new version
//! of the file serves the next call while calls already running finish on the old one.
//!
//! What the plugin gives (typed records, `wit/tool.wit`) becomes MCP's JSON here: tool
//! definitions with their schemas parsed, results as content blocks.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{ServerError, Tool};
use crate::config::McpServerConfig;
use crate::config::types::MemoryMb;
use crate::plugins::types::{
    ResourceBody, ToolContent, ToolContext, ToolDef, ToolError, ToolResult,
};
use crate::plugins::{
    AllowedHosts, CallContext, Limits, Plugin, PluginError, PluginRuntime, Sandbox, TraceHeaders,
};
use crate::redact::Secrets;

/// Tools of one plugin at most, as for a remote server.
const MAX_TOOLS: usize = 10_000;
/// The longest tool name MCP allows.
const MAX_TOOL_NAME: usize = 128;

/// A tool plugin serving one server id.
pub struct PluginServer {
    pub id: String,
    plugin: String,
    runtime: Arc<PluginRuntime>,
    sandbox: Arc<Sandbox>,
    /// Its `kv` space, apart from every route's and guard's.
    space: Arc<str>,
    settings: String,
    named_secrets: Vec<(String, String)>,
    /// The values its settings name, and what it declares secret through `kv`.
    pub secrets: Secrets,
    timeout: Duration,
    max_answer_bytes: usize,
    /// The tools of the plugin's version whose hash is kept with them.
    listed: Mutex<Option<(String, Arc<[Tool]>)>>,
}

impl PluginServer {
    pub fn new(
        id: &str,
        plugin: &str,
        config: &McpServerConfig,
        runtime: Arc<PluginRuntime>,
        timeout: Duration,
        max_answer_bytes: usize,
    ) -> Result<PluginServer, ServerError> {
        let mut allowed = AllowedHosts::none();
        for (index, host) in config.allowed_hosts.iter().enumerate() {
            allowed
                .add(host.as_str())
                .map_err(|e| ServerError::Config(format!("allowed_hosts[{index}]: {e}")))?;
        }
        let limits = Limits::default().with(
            config.memory_limit_mb.map(MemoryMb::bytes),
            config.cpu_time_ms.map(|ms| Duration::from_millis(ms.get())),
        );
        let sandbox = Sandbox::new(allowed, limits)
            .map_err(|e| ServerError::Config(format!("sandbox: {e}")))?;
        let space: Arc<str> = Arc::from(format!("tool:{id}"));
        let named_secrets = crate::secrets::read(&format!("mcp_servers.{id}"), &config.settings);
        let secrets = Secrets::new(named_secrets.iter().map(|(_, v)| Some(v.as_str())))
            .minted_by(vec![runtime.minted().of(&space)]);
        Ok(PluginServer {
            id: id.to_owned(),
            plugin: plugin.to_owned(),
            sandbox: Arc::new(sandbox),
            space,
            settings: serde_json::to_string(&config.settings).unwrap_or_else(|_| "{}".into()),
            named_secrets,
            secrets,
            timeout,
            max_answer_bytes,
            listed: Mutex::new(None),
            runtime,
        })
    }

    /// The plugin's tools, listed once per version of its file.
    pub async fn tools(&self, trace: Option<TraceHeaders>) -> Result<Arc<[Tool]>, ServerError> {
        let plugin = self.plugin()?;
        if let Some(tools) = self.kept(&plugin.hash) {
            return Ok(tools);
        }
        let ctx = self.call_context(Uuid::now_v7(), trace);
        let listing = self.runtime.list_tools(&plugin, &ctx, self.context());
        let defs = self
            .within_timeout(listing)
            .await?
            .map_err(|e| self.refusal(e))?;
        let tools: Arc<[Tool]> = self.definitions(defs).into();
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((plugin.hash.clone(), tools.clone()));
        Ok(tools)
    }

    /// Calls tool `name`; the result as MCP's `CallToolResult`.
    pub async fn call(
        &self,
        invocation_id: Uuid,
        name: &str,
        arguments: Option<&Value>,
        trace: Option<TraceHeaders>,
    ) -> Result<Value, ServerError> {
        let plugin = self.plugin()?;
        let arguments = arguments.map_or_else(|| "{}".to_owned(), Value::to_string);
        let ctx = self.call_context(invocation_id, trace);
        let call = self
            .runtime
            .call_tool(&plugin, &ctx, name, &arguments, self.context());
        let result = self
            .within_timeout(call)
            .await?
            .map_err(|e| self.refusal(e))?;
        let result = result_json(result).map_err(ServerError::Garbage)?;
        // Measured as the caller will get it; the plugin's memory limit bounds it already,
        // this bounds what one call may add to an answer and a record. Counted, not written:
        // the caller's flow writes the text once, for the answer and the record.
        if json_len(&result) > self.max_answer_bytes {
            return Err(ServerError::TooLarge(self.max_answer_bytes));
        }
        Ok(result)
    }

    fn plugin(&self) -> Result<Arc<Plugin>, ServerError> {
        self.runtime.for_tool(&self.plugin).ok_or_else(|| {
            ServerError::Unreachable(format!(
                "the tool plugin `{}` is not loaded (no such file in the plugins directory, \
                 it did not load, or it is not a tool plugin)",
                self.plugin
            ))
        })
    }

    fn kept(&self, hash: &str) -> Option<Arc<[Tool]>> {
        let listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        listed
            .as_ref()
            .filter(|(kept, _)| kept == hash)
            .map(|(_, tools)| tools.clone())
    }

    fn call_context(&self, invocation_id: Uuid, trace: Option<TraceHeaders>) -> CallContext {
        CallContext {
            invocation_id,
            route: self.space.clone(),
            sandbox: self.sandbox.clone(),
            secrets: self.secrets.clone(),
            trace: Default::default(),
            trace_headers: trace,
        }
    }

    fn context(&self) -> ToolContext {
        ToolContext {
            server: self.id.clone(),
            settings: self.settings.clone(),
            secrets: self.named_secrets.clone(),
        }
    }

    async fn within_timeout<T>(
        &self,
        call: impl Future<Output = Result<T, PluginError>>,
    ) -> Result<T, ServerError> {
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(ServerError::Timeout(self.timeout.as_secs())),
            Ok(Ok(value)) => Ok(value),
            // The instance's own failure is logged where it happened; the caller learns
            // what kind, never the plugin's text.
            Ok(Err(PluginError::Provider(_) | PluginError::Crashed(_))) => Err(
                ServerError::Plugin(format!("the tool plugin `{}` crashed", self.plugin)),
            ),
            Ok(Err(PluginError::Unavailable(_))) => Err(ServerError::Plugin(format!(
                "the tool plugin `{}` could not be started",
                self.plugin
            ))),
            Ok(Err(error @ PluginError::Busy(_))) => Err(ServerError::Plugin(error.to_string())),
        }
    }

    /// The plugin's refusal, as the server's JSON-RPC error or a failure.
    fn refusal(&self, error: ToolError) -> ServerError {
        match error {
            ToolError::UnknownTool(name) => ServerError::Rpc {
                code: super::wire::INVALID_PARAMS,
                message: format!("unknown tool: {name}"),
                data: None,
            },
            ToolError::InvalidArguments(message) => ServerError::Rpc {
                code: super::wire::INVALID_PARAMS,
                message: self.secrets.redact_owned(message),
                data: None,
            },
            // The plugin's own words reach the caller and the record: never its secrets.
            ToolError::Failed(message) => ServerError::Plugin(self.secrets.redact_owned(message)),
        }
    }

    /// The plugin's definitions as MCP's, each checked: a tool whose name or JSON is not
    /// valid is left out with a warning, the others served.
    fn definitions(&self, defs: Vec<ToolDef>) -> Vec<Tool> {
        let mut tools: Vec<Tool> = Vec::new();
        for def in defs {
            if tools.len() >= MAX_TOOLS {
                tracing::warn!(server = %self.id, "more than {MAX_TOOLS} tools: the rest are left out");
                break;
            }
            let name = def.name.clone();
            if tools.iter().any(|tool| tool.name == name) {
                tracing::warn!(server = %self.id, tool = %name, "a second tool of the same name is left out");
                continue;
            }
            match definition(def) {
                Ok(definition) => tools.push(Tool { name, definition }),
                Err(problem) => {
                    tracing::warn!(server = %self.id, tool = %name, "tool left out: {problem}");
                }
            }
        }
        tools
    }
}

/// The length of `value` as compact JSON text, without making the text (a `Value` always
/// serializes).
fn json_len(value: &Value) -> usize {
    crate::encoding::json_len(value).unwrap_or(usize::MAX)
}

fn valid_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A JSON object from `text`, named `what` in the problem.
fn object(text: &str, what: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(format!("its {what} is not a JSON object")),
        Err(e) => Err(format!("its {what} is not JSON: {e}")),
    }
}

fn definition(def: ToolDef) -> Result<Value, String> {
    if !valid_name(&def.name) {
        return Err(format!(
            "its name is not 1 to {MAX_TOOL_NAME} of A-Z, a-z, 0-9, '_', '-', '.'"
        ));
    }
    let mut fields = Map::new();
    fields.insert("name".into(), Value::String(def.name));
    if let Some(title) = def.title {
        fields.insert("title".into(), Value::String(title));
    }
    if let Some(description) = def.description {
        fields.insert("description".into(), Value::String(description));
    }
    fields.insert(
        "inputSchema".into(),
        object(&def.input_schema, "input schema")?,
    );
    if let Some(schema) = def.output_schema {
        fields.insert("outputSchema".into(), object(&schema, "output schema")?);
    }
    if let Some(annotations) = def.annotations {
        fields.insert("annotations".into(), object(&annotations, "annotations")?);
    }
    Ok(Value::Object(fields))
}

/// MCP's `CallToolResult` of a plugin's result.
fn result_json(result: ToolResult) -> Result<Value, String> {
    let content: Vec<Value> = result.content.into_iter().map(content_json).collect();
    let mut fields = Map::new();
    fields.insert("content".into(), Value::Array(content));
    if let Some(structured) = result.structured_content {
        let value: Value = serde_json::from_str(&structured)
            .map_err(|e| format!("the tool plugin's structured content is not JSON: {e}"))?;
        fields.insert("structuredContent".into(), value);
    }
    if result.is_error {
        fields.insert("isError".into(), Value::Bool(true));
    }
    Ok(Value::Object(fields))
}

fn content_json(content: ToolContent) -> Value {
    let base64 = |bytes: &[u8]| crate::encoding::base64_encode(bytes);
    match content {
        ToolContent::Text(text) => json!({"type": "text", "text": text}),
        ToolContent::Image { data, media_type } => {
            json!({"type": "image", "data": base64(&data), "mimeType": media_type})
        }
        ToolContent::Audio { data, media_type } => {
            json!({"type": "audio", "data": base64(&data), "mimeType": media_type})
        }
        ToolContent::ResourceLink {
            uri,
            name,
            title,
            description,
            media_type,
        } => {
            let mut link = json!({"type": "resource_link", "uri": uri, "name": name});
            for (key, value) in [
                ("title", title),
                ("description", description),
                ("mimeType", media_type),
            ] {
                if let (Some(value), Value::Object(fields)) = (value, &mut link) {
                    fields.insert(key.into(), Value::String(value));
                }
            }
            link
        }
        ToolContent::Resource {
            uri,
            media_type,
            body,
        } => {
            let mut resource = json!({"uri": uri});
            if let (Some(media_type), Value::Object(fields)) = (media_type, &mut resource) {
                fields.insert("mimeType".into(), Value::String(media_type));
            }
            if let Value::Object(fields) = &mut resource {
                match body {
                    ResourceBody::Text(text) => fields.insert("text".into(), Value::String(text)),
                    ResourceBody::Blob(blob) => {
                        fields.insert("blob".into(), Value::String(base64(&blob)))
                    }
                };
            }
            json!({"type": "resource", "resource": resource})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, schema: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            title: Some("Add".into()),
            description: Some("Adds".into()),
            input_schema: schema.into(),
            output_schema: None,
            annotations: Some(r#"{"readOnlyHint":true}"#.into()),
        }
    }

    #[test]
    fn definitions_are_mcp_tools_with_their_json_parsed() {
        let value = definition(def("add", r#"{"type":"object"}"#)).expect("valid");
        assert_eq!(
            value,
            json!({"name": "add", "title": "Add", "description": "Adds",
                   "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}})
        );
        assert!(definition(def("add", "[1]")).is_err());
        assert!(definition(def("add", "{")).is_err());
        assert!(definition(def("a b", "{}")).is_err());
        assert!(definition(def("", "{}")).is_err());
        assert!(definition(def(&"x".repeat(129), "{}")).is_err());
    }

    #[test]
    fn a_result_is_measured_as_its_text() {
        let value = json!({"content": [{"type": "text", "text": "héllo \"q\""}], "n": [1, 2.5]});
        assert_eq!(json_len(&value), value.to_string().len());
    }

    #[test]
    fn results_are_content_blocks() {
        let result = ToolResult {
            content: vec![
                ToolContent::Text("hi".into()),
                ToolContent::Image {
                    data: vec![1, 2, 3],
                    media_type: "image/png".into(),
                },
                ToolContent::ResourceLink {
                    uri: "file:///a".into(),
                    name: "a".into(),
                    title: None,
                    description: Some("d".into()),
                    media_type: None,
                },
                ToolContent::Resource {
                    uri: "mem://b".into(),
                    media_type: Some("text/plain".into()),
                    body: ResourceBody::Blob(vec![0xff]),
                },
            ],
            structured_content: Some(r#"{"n":1}"#.into()),
            is_error: true,
        };
        assert_eq!(
            result_json(result).expect("valid"),
            json!({"content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "AQID", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "description": "d"},
                {"type": "resource", "resource": {"uri": "mem://b", "mimeType": "text/plain", "blob": "/w=="}},
            ], "structuredContent": {"n": 1}, "isError": true})
        );
        let garbage = ToolResult {
            content: Vec::new(),
            structured_content: Some("{".into()),
            is_error: false,
        };
        assert!(result_json(garbage).is_err());
    }
}
