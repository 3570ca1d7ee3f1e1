//! A route's sandbox, built from its config: the hosts its plugin may reach and what one call
//! may consume, with the route's own connection pools. Built here, where routes are, so that
//! the config only reads and checks the file.

use std::num::NonZeroU64;
use std::time::Duration;

use crate::config::RouteConfig;
use crate::config::types::{BaseUrl, MemoryMb, Positive};
use crate::plugins::{AllowedHosts, HostsError, KvBounds, Limits, Sandbox, SandboxError};

/// Why a route's sandbox could not be set up. The hosts were checked as the config was read:
/// the sandbox refusing them now would be a change of its rules.
#[derive(Debug, thiserror::Error)]
pub enum RouteSandboxError {
    #[error("base_url: {0}")]
    BaseUrl(HostsError),
    #[error("allowed_hosts[{index}]: {source}")]
    AllowedHost { index: usize, source: HostsError },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// The limits of this route's plugin instances.
fn limits(route: &RouteConfig) -> Limits {
    let defaults = Limits::default();
    let ms = |value: Option<Positive<NonZeroU64>>, default: Duration| {
        value.map_or(default, |ms| Duration::from_millis(ms.get()))
    };
    Limits {
        memory_bytes: route
            .memory_limit_mb
            .map_or(defaults.memory_bytes, MemoryMb::bytes),
        cpu_time: ms(route.cpu_time_ms, defaults.cpu_time),
        connect_timeout: ms(route.connect_timeout_ms, defaults.connect_timeout),
        first_byte_timeout: ms(route.first_byte_timeout_ms, defaults.first_byte_timeout),
        idle_timeout: ms(route.idle_timeout_ms, defaults.idle_timeout),
        max_response_bytes: route
            .max_response_bytes
            .map_or(defaults.max_response_bytes, Positive::get),
        max_http_requests: route
            .max_http_requests
            .map_or(defaults.max_http_requests, Positive::get),
        kv: KvBounds {
            max_entries: route
                .kv_max_entries
                .map_or(defaults.kv.max_entries, |n| n.get() as usize),
            max_bytes: route.kv_max_bytes.map_or(defaults.kv.max_bytes, |n| {
                usize::try_from(n.get()).unwrap_or(usize::MAX)
            }),
        },
    }
}

/// The hosts this route's plugin may reach when its upstream is `base_url` (the route's
/// own or one of its targets').
fn allowed_hosts(
    route: &RouteConfig,
    base_url: Option<&BaseUrl>,
) -> Result<AllowedHosts, RouteSandboxError> {
    let mut allowed = match base_url {
        Some(url) => {
            AllowedHosts::from_base_url(url.as_str()).map_err(RouteSandboxError::BaseUrl)?
        }
        None => AllowedHosts::none(),
    };
    for (index, host) in route.allowed_hosts.iter().enumerate() {
        allowed
            .add(host.as_str())
            .map_err(|source| RouteSandboxError::AllowedHost { index, source })?;
    }
    Ok(allowed)
}

/// The sandbox of this route's plugin instances calling `base_url`.
pub(super) fn sandbox(
    route: &RouteConfig,
    base_url: Option<&BaseUrl>,
) -> Result<Sandbox, RouteSandboxError> {
    Ok(Sandbox::new(
        allowed_hosts(route, base_url)?,
        limits(route),
    )?)
}
