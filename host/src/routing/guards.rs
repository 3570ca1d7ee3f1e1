//! The guards of the config (`[guards.ID]`), built once per config like the routes: each
//! with its settings as the JSON its plugin reads, and its sandbox (no network at all, the
//! guard's own limits). Which guards a request goes through is its route's chain (the
//! `global_guards`, then the route's `guards`) and then its project's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::types::MemoryMb;
use crate::config::{Config, GuardConfig, GuardStream};
use crate::error::ApiError;
use crate::plugins::{AllowedHosts, Limits, Sandbox, SandboxError};

/// One configured guard.
#[derive(Debug)]
pub struct Guard {
    /// Its id (`[guards.ID]`).
    pub id: Arc<str>,
    /// The file stem of its plugin.
    pub plugin: String,
    /// Its `settings`, as the JSON object its plugin is handed.
    pub settings: String,
    pub stream: GuardStream,
    /// No hosts; its own memory and CPU limits.
    pub sandbox: Arc<Sandbox>,
    /// The name of its `kv` space: its own, apart from every route's.
    pub space: Arc<str>,
}

/// The guards a request goes through, in order.
pub type Chain = Arc<[Arc<Guard>]>;

/// Every guard of the config.
#[derive(Debug, Default)]
pub struct Guards {
    by_id: HashMap<String, Arc<Guard>>,
}

/// A guard of the config that cannot be set up.
#[derive(Debug, thiserror::Error)]
#[error("guards.{id}: {source}")]
pub struct GuardError {
    id: String,
    source: SandboxError,
}

impl Guards {
    /// The guards of a validated config (every id a route names is defined).
    pub fn from_config(config: &Config) -> Result<Guards, GuardError> {
        let by_id = config
            .guards
            .iter()
            .map(|(id, guard)| {
                let built = Guard::new(id, guard).map_err(|source| GuardError {
                    id: id.clone(),
                    source,
                })?;
                Ok((id.clone(), Arc::new(built)))
            })
            .collect::<Result<_, GuardError>>()?;
        Ok(Guards { by_id })
    }

    /// The chain of `ids` (a route's: `global_guards`, then its own), skipping an id
    /// already in it. The config was checked: an unknown id is not there.
    pub(super) fn chain<'a>(&self, ids: impl Iterator<Item = &'a String>) -> Chain {
        let mut chain: Vec<Arc<Guard>> = Vec::new();
        for id in ids {
            if let Some(guard) = self.by_id.get(id)
                && !chain.iter().any(|known| known.id == guard.id)
            {
                chain.push(guard.clone());
            }
        }
        chain.into()
    }

    /// `route`'s chain followed by the project's guards that are not in it yet. A project
    /// guard the config no longer defines fails the request: a project's guards are a
    /// promise, and a request is not let through unguarded.
    pub fn for_request(&self, route: &Chain, project: &[String]) -> Result<Chain, ApiError> {
        if project.is_empty() {
            return Ok(route.clone());
        }
        let mut chain: Vec<Arc<Guard>> = route.to_vec();
        for id in project {
            let guard = self
                .by_id
                .get(id)
                .ok_or_else(|| ApiError::GuardUnavailable {
                    guard: id.clone(),
                    reason: "the project names it, and the config defines no such guard".into(),
                })?;
            if !chain.iter().any(|known| known.id == guard.id) {
                chain.push(guard.clone());
            }
        }
        Ok(chain.into())
    }
}

impl Guard {
    fn new(id: &str, config: &GuardConfig) -> Result<Guard, SandboxError> {
        let limits = Limits {
            max_http_requests: 0,
            ..Limits::default().with(
                config.memory_limit_mb.map(MemoryMb::bytes),
                config.cpu_time_ms.map(|ms| Duration::from_millis(ms.get())),
            )
        };
        Ok(Guard {
            id: Arc::from(id),
            plugin: config.plugin.clone(),
            settings: serde_json::to_string(&config.settings).unwrap_or_else(|_| "{}".into()),
            stream: config.guard_stream,
            sandbox: Arc::new(Sandbox::new(AllowedHosts::none(), limits)?),
            space: Arc::from(format!("guard:{id}")),
        })
    }
}
