//! Provider routes: which plugin serves a `providerConfig.provider` id, with
//! which upstream, key, sandbox and prices.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, RouteConfig, RouteSandboxError};
use crate::error::ApiError;
use crate::plugins::{Sandbox, types};

pub struct Route {
    pub id: String,
    /// `id` as the `x-gateway-route` response header carries it, made once.
    pub header: Option<hyper::header::HeaderValue>,
    pub config: RouteConfig,
    pub sandbox: Arc<Sandbox>,
    pub timeout: Duration,
    /// The gateway's own provider key, read from `api_key_env` at start.
    configured_key: Option<String>,
    settings: String,
}

pub struct Routes {
    routes: HashMap<String, Arc<Route>>,
}

/// A route of the config that cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("providers.{id}.{source}")]
pub struct RouteError {
    id: String,
    source: RouteSandboxError,
}

impl Routes {
    /// The routes of a validated config (see [`Config::parse`]).
    pub fn from_config(config: &Config) -> Result<Routes, RouteError> {
        let routes = config
            .providers
            .iter()
            .map(|(id, route)| {
                let configured_key = route.api_key_env.as_ref().and_then(|var| {
                    let key = std::env::var(var).ok().filter(|k| !k.trim().is_empty());
                    if key.is_none() {
                        tracing::warn!(route = %id, env = %var,
                            "route key variable is not set: callers must send Provider-API-Key");
                    }
                    key
                });
                let sandbox = route.sandbox().map_err(|source| RouteError {
                    id: id.clone(),
                    source,
                })?;
                let route = Route {
                    id: id.clone(),
                    header: hyper::header::HeaderValue::from_str(id).ok(),
                    sandbox: Arc::new(sandbox),
                    timeout: route.timeout(config),
                    configured_key,
                    settings: route.settings_json(),
                    config: route.clone(),
                };
                Ok((id.clone(), Arc::new(route)))
            })
            .collect::<Result<_, RouteError>>()?;
        Ok(Routes { routes })
    }

    pub fn get(&self, id: &str) -> Result<Arc<Route>, ApiError> {
        self.routes
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::UnknownRoute(id.to_owned()))
    }
}

impl Route {
    /// The caller's `Provider-API-Key` wins; else the route's own key.
    pub fn provider_key(&self, from_caller: Option<String>) -> Result<Option<String>, ApiError> {
        match from_caller.or_else(|| self.configured_key.clone()) {
            Some(key) => Ok(Some(key)),
            None if !self.config.needs_api_key() => Ok(None),
            None => Err(ApiError::BadRequest(format!(
                "provider {:?} needs a provider API key: send yours in the Provider-API-Key header",
                self.id
            ))),
        }
    }

    /// The gateway's own key for this route, if it has one.
    pub fn configured_key(&self) -> Option<&str> {
        self.configured_key.as_deref()
    }

    pub fn model(&self, requested: Option<String>) -> Result<String, ApiError> {
        requested
            .or_else(|| self.config.default_model.clone())
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "a model is required: provider {:?} has no default model (name one in \
                     providerConfig.params.model, or as ROUTE/MODEL on the /v1/ endpoints)",
                    self.id
                ))
            })
    }

    pub fn wit_route(&self, api_key: Option<String>) -> types::Route {
        types::Route {
            id: self.id.clone(),
            base_url: self
                .config
                .base_url
                .as_ref()
                .map_or("", |url| url.as_str())
                .trim_end_matches('/')
                .to_owned(),
            api_key,
            settings: self.settings.clone(),
        }
    }
}
