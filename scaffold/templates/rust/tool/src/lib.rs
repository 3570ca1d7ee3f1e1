//! {{name}}: an MCP tool, `lookup`, that fetches an item by its id from an HTTP API (the
//! server's `base_url` setting, whose host its `allowed_hosts` must name).
use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::tool::*;
use serde::Deserialize;
use serde_json::{Value, json};

/// `[mcp_servers.ID] settings`: a misspelt key is refused rather than ignored.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    base_url: String,
}

#[derive(Deserialize)]
struct Lookup {
    id: String,
}

struct Plugin;

impl Tools for Plugin {
    fn info() -> PluginInfo {
        PluginInfo::new("{{name}}", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    fn tools(_context: &Context) -> Vec<ToolDef> {
        let id = json!({"type": "string", "description": "The item's id"});
        let input = json!({"type": "object", "required": ["id"], "properties": {"id": id}});
        vec![ToolDef::new("lookup", "Looks up an item by its id", input).read_only()]
    }

    fn call(name: &str, arguments: Arguments, context: &Context) -> Result<ToolResult, ToolError> {
        if name != "lookup" {
            return Err(ToolError::unknown(name));
        }
        let Lookup { id } = arguments.parse()?;
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if id.is_empty() || id.len() > 64 || !id.chars().all(valid) {
            // A result, not an error: the model reads it and can try again.
            return Ok(ToolResult::error("id is 1 to 64 letters, digits, - or _"));
        }
        let settings: Settings = context.settings()?;
        let base = settings.base_url.trim_end_matches('/');
        let response = Request::get(format!("{base}/items/{id}")).send()?;
        match response.status {
            200 => Ok(ToolResult::structured(response.json::<Value>()?)),
            404 => Ok(ToolResult::error(format!("no item {id}"))),
            status => Err(ToolError::Failed(format!("the items API answered {status}"))),
        }
    }
}

export_tool!(Plugin);

#[cfg(test)]
mod tests;
