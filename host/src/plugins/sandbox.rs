//! A route's [`Sandbox`]: its policy (hosts, limits) with the upstream connections its plugin
//! instances send through.

use super::policy::{AllowedHosts, Limits};
use super::upstream::{ClientError, Upstream};

/// Why a route's sandbox could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("HTTP client: {0}")]
    Client(#[from] ClientError),
}

/// Everything a route's plugin instances may reach and use.
#[derive(Debug)]
pub struct Sandbox {
    pub allowed: AllowedHosts,
    pub limits: Limits,
    /// The route's upstream connection pools, one per serving thread.
    pub(super) upstream: Upstream,
}

impl Sandbox {
    pub fn new(allowed: AllowedHosts, limits: Limits) -> Result<Sandbox, SandboxError> {
        Ok(Sandbox {
            upstream: Upstream::new(&limits)?,
            allowed,
            limits,
        })
    }

    /// No network at all: for validating a plugin at load time.
    pub fn offline() -> Result<Sandbox, SandboxError> {
        Sandbox::new(AllowedHosts::none(), Limits::default())
    }
}
