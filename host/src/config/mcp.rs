//! `[mcp]` and `[mcp_servers.ID]`: the MCP gateway's bounds and the servers whose tools it
//! serves at `POST /mcp` ([`crate::mcp`]).

use std::collections::BTreeMap;
use std::num::{NonZeroU64, NonZeroUsize};

use serde::{Deserialize, Serialize};

use super::types::{BaseUrl, HostEntry, MemoryMb, Positive};

/// What joins a server's id and its tool's name in the tools `/mcp` lists (`github__search`).
/// Two underscores: tool names commonly hold one, rarely two, and a server id may hold none.
pub const TOOL_SEPARATOR: &str = "__";

/// `[mcp]`: bounds of every tool call through `/mcp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// A `tools/call`'s `arguments`, as JSON text, at most; over it the call is refused
    /// (JSON-RPC `-32602`) before any server sees it.
    pub max_tool_argument_bytes: Positive<NonZeroUsize>,
    /// A server's answer to one call at most; over it the call ends as an error (the server's
    /// answer is not read further).
    pub max_tool_result_bytes: Positive<NonZeroUsize>,
    /// How long a server's tool list is kept before it is asked again (a server's
    /// `notifications/tools/list_changed` drops it sooner).
    pub tools_list_ttl_secs: Positive<NonZeroU64>,
}

const MAX_TOOL_ARGUMENT_BYTES: Positive<NonZeroUsize> =
    Positive::new(NonZeroUsize::new(1024 * 1024).expect("not zero"));
const MAX_TOOL_RESULT_BYTES: Positive<NonZeroUsize> =
    Positive::new(NonZeroUsize::new(4 * 1024 * 1024).expect("not zero"));
const TOOLS_LIST_TTL_SECS: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(300).expect("not zero"));

impl Default for McpConfig {
    fn default() -> McpConfig {
        McpConfig {
            max_tool_argument_bytes: MAX_TOOL_ARGUMENT_BYTES,
            max_tool_result_bytes: MAX_TOOL_RESULT_BYTES,
            tools_list_ttl_secs: TOOLS_LIST_TTL_SECS,
        }
    }
}

/// `[mcp_servers.ID]`: an MCP server whose tools `/mcp` serves as `ID__TOOL`: a remote one
/// (Streamable HTTP, `url`), or a tool plugin (`plugin`) run in the gateway's sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's MCP endpoint. The only place the gateway connects to for this server:
    /// nothing a caller sends names a host, and redirects are not followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<BaseUrl>,
    /// File stem of the tool plugin that is this server (instead of a `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// Headers sent with every request to the server, each from an environment variable of the
    /// gateway (`{ Authorization = "GITHUB_MCP_TOKEN" }`): the values are never shown, and are
    /// redacted from what the server answers, as provider keys are.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers_env: BTreeMap<String, String>,
    /// One request to the server at most (a tool call included); default: the top-level
    /// `request_timeout_secs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<Positive<NonZeroU64>>,
    /// The server's tools `/mcp` serves, as globs (`*` matches any run of characters) of the
    /// server's own names; empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// A tool plugin's: the hosts (`host:port`, or URLs) its HTTP requests may reach; none by
    /// default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<HostEntry>,
    /// A tool plugin's: memory of one instance (default: a route's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_mb: Option<MemoryMb>,
    /// A tool plugin's: CPU time of one call (default: a route's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time_ms: Option<Positive<NonZeroU64>>,
    /// `[mcp_servers.ID.settings]`: a tool plugin's own settings, handed to it as JSON with
    /// every call; `NAME_env` / `NAME_file_env` name its secrets, as a route's settings do.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub settings: toml::Table,
}

impl McpServerConfig {
    /// Whether the config lets callers use the server's tool `name` (its own name).
    pub fn allows_tool(&self, name: &str) -> bool {
        self.allowed_tools.is_empty()
            || self
                .allowed_tools
                .iter()
                .any(|g| crate::glob::matches(g, name))
    }
}

/// Why a server cannot be used, if it cannot: its id (see [`server_id_problem`]), or keys
/// that do not go together.
pub(super) fn server_problem(id: &str, server: &McpServerConfig) -> Option<&'static str> {
    let plugin_keys = !server.allowed_hosts.is_empty()
        || server.memory_limit_mb.is_some()
        || server.cpu_time_ms.is_some()
        || !server.settings.is_empty();
    server_id_problem(id).or(match (&server.url, &server.plugin) {
        (None, None) => Some("a server needs a `url` (a remote server) or a `plugin` (a tool plugin)"),
        (Some(_), Some(_)) => Some("a server has a `url` or a `plugin`, not both"),
        (Some(_), None) if plugin_keys => Some(
            "allowed_hosts, memory_limit_mb, cpu_time_ms and settings are a tool plugin's: a server with a `url` has none",
        ),
        (None, Some(_)) if !server.headers_env.is_empty() => {
            Some("headers_env is sent to a remote server: a tool plugin reads its secrets from `settings` (`NAME_env`)")
        }
        (None, Some(plugin)) if plugin.is_empty() => Some("`plugin` is empty"),
        _ => None,
    })
}

/// Why a server's id cannot be used, if it cannot: `/mcp` names tools `ID__TOOL` and finds the
/// server again by the text before the first separator.
fn server_id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("a server id is empty")
    } else if id.contains(TOOL_SEPARATOR) {
        Some("a server id cannot contain \"__\", which separates it from a tool's name")
    } else if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Some("a server id is made of ASCII letters, digits, '-' and '_'")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ids() {
        assert_eq!(server_id_problem("github"), None);
        assert_eq!(server_id_problem("my-server_2"), None);
        assert!(server_id_problem("").is_some());
        assert!(server_id_problem("a__b").is_some());
        assert!(server_id_problem("a.b").is_some());
    }

    #[test]
    fn a_server_is_remote_or_a_plugin() {
        let server = |text: &str| -> McpServerConfig { toml::from_str(text).expect("parses") };
        assert_eq!(
            server_problem("a", &server("url = \"http://h:1/mcp\"")),
            None
        );
        assert_eq!(server_problem("a", &server("plugin = \"calc\"")), None);
        for bad in [
            "",
            "url = \"http://h:1/mcp\"\nplugin = \"calc\"",
            "url = \"http://h:1/mcp\"\ncpu_time_ms = 5",
            "plugin = \"calc\"\nheaders_env = { Authorization = \"X\" }",
            "plugin = \"\"",
        ] {
            assert!(server_problem("a", &server(bad)).is_some(), "{bad}");
        }
    }
}
