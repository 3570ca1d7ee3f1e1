//! `[mcp]` and `[mcp_servers.ID]`: the MCP gateway's bounds and the servers whose tools it
//! serves at `POST /mcp` ([`crate::mcp`]).

use std::collections::BTreeMap;
use std::num::{NonZeroU64, NonZeroUsize};

use serde::{Deserialize, Serialize};

use super::types::{BaseUrl, Positive};

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

/// `[mcp_servers.ID]`: a remote MCP server (Streamable HTTP) whose tools `/mcp` serves as
/// `ID__TOOL`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's MCP endpoint. The only place the gateway connects to for this server:
    /// nothing a caller sends names a host, and redirects are not followed.
    pub url: BaseUrl,
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

/// Why a server's id cannot be used, if it cannot: `/mcp` names tools `ID__TOOL` and finds the
/// server again by the text before the first separator.
pub(super) fn server_id_problem(id: &str) -> Option<&'static str> {
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
}
