//! The MCP servers the gateway fronts (`[mcp_servers.ID]`), as clients of them: a remote
//! server's era, session and tool list ([`server`]), the stream of its tool list's changes
//! ([`listen`]) and how both reach it ([`link`]), a tool plugin run in the sandbox
//! ([`plugin`]), and the protocol both sides of the gateway speak ([`wire`]). The endpoint
//! callers use, `POST /mcp`, is [`crate::mcp`]'s; this module knows nothing of callers, keys
//! or records.

mod link;
mod listen;
mod plugin;
mod server;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use uuid::Uuid;

use plugin::PluginServer;
pub use server::Extra;
use server::{RemoteServer, Settings};

use crate::config::{Config, McpServerConfig, TOOL_SEPARATOR};
use crate::plugins::{PluginRuntime, TraceHeaders};
use crate::redact::Secrets;

/// Why a request to a server failed. `Rpc` is the server's own JSON-RPC error, passed on to
/// the caller; the others are the gateway's view of a server that did not answer properly.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServerError {
    #[error("the server could not be reached: {0}")]
    Unreachable(String),
    #[error("the server did not answer within {0} s")]
    Timeout(u64),
    #[error("the server answered HTTP {0} without a JSON-RPC answer")]
    Http(u16),
    #[error("the server's answer is not MCP: {0}")]
    Garbage(String),
    #[error("the server's answer is over {0} bytes (max_tool_result_bytes)")]
    TooLarge(usize),
    #[error("the server refused: {message}")]
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// A tool plugin's failure: crashed, not loaded, busy, or its own `failed`.
    #[error("{0}")]
    Plugin(String),
    #[error("{0}")]
    Config(String),
}

/// A tool as a server lists it: its own name, and the whole definition as the server sent it
/// (description, schemas, annotations), passed on with the name changed.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub definition: Value,
}

/// One server `/mcp` fronts: remote, or a tool plugin. Both list tools and call them, with the
/// same errors; the caller's side does not tell them apart.
pub enum McpServer {
    Remote(RemoteServer),
    Plugin(PluginServer),
}

impl McpServer {
    pub fn id(&self) -> &str {
        match self {
            McpServer::Remote(server) => &server.id,
            McpServer::Plugin(server) => &server.id,
        }
    }

    /// What is redacted from what the server answers: its credentials.
    pub fn secrets(&self) -> &Secrets {
        match self {
            McpServer::Remote(server) => &server.secrets,
            McpServer::Plugin(server) => &server.secrets,
        }
    }

    /// Its tools, from the kept list while it holds.
    pub async fn tools(&self, extra: &Extra) -> Result<Arc<[Tool]>, ServerError> {
        match self {
            McpServer::Remote(server) => server.tools(extra).await,
            McpServer::Plugin(server) => server.tools(trace_headers(extra)).await,
        }
    }

    /// Drops the kept list: the next one asks again. A plugin's list is its file's: only a
    /// new version of the file changes it, and that drops it already.
    pub fn forget_tools(&self) {
        match self {
            McpServer::Remote(server) => server.forget_tools(),
            McpServer::Plugin(_) => {}
        }
    }

    /// Calls its tool `name` (its own name); the result object as the server gave it.
    /// `meta` goes to a remote server; a plugin has no `_meta`.
    pub async fn call(
        &self,
        invocation_id: Uuid,
        name: &str,
        arguments: Option<Value>,
        meta: Option<&Map<String, Value>>,
        extra: &Extra,
    ) -> Result<Value, ServerError> {
        match self {
            McpServer::Remote(server) => server.call(name, arguments, meta, extra).await,
            McpServer::Plugin(server) => {
                server
                    .call(
                        invocation_id,
                        name,
                        arguments.as_ref(),
                        trace_headers(extra),
                    )
                    .await
            }
        }
    }
}

/// The call's trace as a plugin's upstream requests carry it.
fn trace_headers(extra: &Extra) -> Option<TraceHeaders> {
    Some(TraceHeaders {
        traceparent: extra.traceparent.clone()?,
        tracestate: None,
    })
}

/// Every `[mcp_servers.ID]` of a config, ready or not, by id.
#[derive(Default)]
pub struct Servers {
    servers: BTreeMap<String, Entry>,
}

/// One configured server.
pub struct Entry {
    pub config: McpServerConfig,
    /// The server, or why it cannot be used (a `headers_env` variable that is not set): a
    /// broken server is left out of tool lists and named in the log, as a down one is.
    pub server: Result<Arc<McpServer>, String>,
    /// The `[mcp]` and timeout it was built with besides `config`, to keep it (its session,
    /// its list) across a reload that changes none of them.
    bounds: (Duration, usize, Duration),
}

impl Servers {
    /// The servers of `config`; those of `previous` whose settings did not change are kept as
    /// they are, with their sessions and tool lists. A tool plugin runs in `runtime`.
    pub fn build(
        config: &Config,
        previous: Option<&Servers>,
        runtime: &Arc<PluginRuntime>,
    ) -> Servers {
        let mut servers = BTreeMap::new();
        for (id, server) in &config.mcp_servers {
            let timeout = Duration::from_secs(
                server
                    .timeout_secs
                    .unwrap_or(config.request_timeout_secs)
                    .get(),
            );
            let bounds = (
                timeout,
                config.mcp.max_tool_result_bytes.get(),
                Duration::from_secs(config.mcp.tools_list_ttl_secs.get()),
            );
            if let Some(kept) = previous
                .and_then(|p| p.servers.get(id))
                .filter(|kept| kept.config == *server && kept.bounds == bounds)
            {
                servers.insert(
                    id.clone(),
                    Entry {
                        config: server.clone(),
                        server: kept.server.clone(),
                        bounds,
                    },
                );
                continue;
            }
            let built = match (&server.url, &server.plugin) {
                (Some(url), _) => RemoteServer::new(Settings {
                    id,
                    url,
                    config: server,
                    timeout,
                    max_answer_bytes: bounds.1,
                    list_ttl: bounds.2,
                })
                .map(McpServer::Remote),
                (None, Some(plugin)) => {
                    PluginServer::new(id, plugin, server, runtime.clone(), timeout, bounds.1)
                        .map(McpServer::Plugin)
                }
                // The config was checked: a server has one or the other.
                (None, None) => Err(ServerError::Config(
                    "a server needs a `url` or a `plugin`".into(),
                )),
            };
            let built = built.map(Arc::new).map_err(|e| {
                tracing::error!(server = %id, "mcp_servers.{id}: {e}: its tools are not served");
                e.to_string()
            });
            servers.insert(
                id.clone(),
                Entry {
                    config: server.clone(),
                    server: built,
                    bounds,
                },
            );
        }
        Servers { servers }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.servers.iter().map(|(id, entry)| (id.as_str(), entry))
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The server and its own name of the tool `/mcp` calls `name` (`ID__TOOL`).
    pub fn find<'n>(&self, name: &'n str) -> Option<(&str, &Entry, &'n str)> {
        let (id, tool) = name.split_once(TOOL_SEPARATOR)?;
        let (id, entry) = self.servers.get_key_value(id)?;
        Some((id.as_str(), entry, tool))
    }
}

/// The name `/mcp` gives the tool `tool` of server `id`.
pub fn exposed_name(id: &str, tool: &str) -> String {
    format!("{id}{TOOL_SEPARATOR}{tool}")
}
