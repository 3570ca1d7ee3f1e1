//! The MCP servers the gateway fronts (`[mcp_servers.ID]`), as clients of them: each server's
//! era, session and tool list ([`server`]), and the protocol both sides of the gateway speak
//! ([`wire`]). The endpoint callers use, `POST /mcp`, is [`crate::mcp`]'s; this module knows
//! nothing of callers, keys or records.

mod server;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use server::{Extra, ServerError, Tool};
use server::{Server, Settings};

use crate::config::{Config, McpServerConfig, TOOL_SEPARATOR};

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
    pub server: Result<Arc<Server>, String>,
    /// The `[mcp]` and timeout it was built with besides `config`, to keep it (its session,
    /// its list) across a reload that changes none of them.
    bounds: (Duration, usize, Duration),
}

pub use server::Server as McpServer;

impl Servers {
    /// The servers of `config`; those of `previous` whose settings did not change are kept as
    /// they are, with their sessions and tool lists.
    pub fn build(config: &Config, previous: Option<&Servers>) -> Servers {
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
            let built = Server::new(Settings {
                id,
                config: server,
                timeout,
                max_answer_bytes: bounds.1,
                list_ttl: bounds.2,
            })
            .map(Arc::new)
            .map_err(|e| {
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
