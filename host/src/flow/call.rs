//! The plugin call of a routed request: which plugin, with which provider key
//! and sandbox, within the route's timeout, and what its usage cost.

use std::sync::Arc;

use hyper::HeaderMap;

use super::quota::Quota;
use super::record::Draft;
use super::{Envelope, Kind};
use crate::error::ApiError;
use crate::plugins::{CallContext, Plugin, PluginRuntime, types};
use crate::pricing;
use crate::redact::Secrets;
use crate::routing::Route;
use crate::state::AppState;
use crate::store::TokenUsage;

const PROVIDER_KEY_HEADER: &str = "provider-api-key";

/// A request that is routed: everything its plugin call and its answer need,
/// in whichever mode it is answered.
pub(super) struct Call {
    pub route: Arc<Route>,
    pub plugin: Arc<Plugin>,
    pub ctx: CallContext,
    /// The model asked for (the request itself moves into the plugin call).
    pub model: String,
    /// The project of the caller's key.
    pub project: String,
    pub kind: Kind,
    /// What the call is charged to once it is over.
    pub quota: Quota,
}

impl Call {
    pub fn envelope<'a>(&'a self, invocation_id: &'a str) -> Envelope<'a> {
        Envelope {
            invocation_id,
            project_id: &self.project,
            kind: self.kind,
            model: &self.model,
        }
    }

    pub async fn complete(
        &self,
        runtime: &PluginRuntime,
        request: types::CompletionRequest,
    ) -> Result<types::Completion, ApiError> {
        let call = runtime.complete(&self.plugin, &self.ctx, request);
        Ok(tokio::time::timeout(self.route.timeout, call)
            .await
            .map_err(|_| self.timeout_error())??)
    }

    pub async fn embed(
        &self,
        runtime: &PluginRuntime,
        request: types::EmbeddingRequest,
    ) -> Result<types::Embeddings, ApiError> {
        let call = runtime.embed(&self.plugin, &self.ctx, request);
        Ok(tokio::time::timeout(self.route.timeout, call)
            .await
            .map_err(|_| self.timeout_error())??)
    }

    pub fn timeout_error(&self) -> ApiError {
        ApiError::Timeout(format!(
            "no complete answer within {} s",
            self.route.timeout.as_secs()
        ))
    }

    /// Usage and its cost (`None` when the model's price is unknown).
    pub fn metered(&self, usage: Option<&types::Usage>) -> (Option<TokenUsage>, Option<f64>) {
        let Some(usage) = usage.map(TokenUsage::from) else {
            return (None, None);
        };
        let route = &self.route;
        let cost = match pricing::price_for(
            &route.config.pricing,
            &route.config.plugin,
            &self.plugin.info.models,
            &self.model,
        ) {
            Some(price) => Some(pricing::cost(&usage, price)),
            None => {
                pricing::warn_unpriced(&route.id, &self.model);
                None
            }
        };
        (Some(usage), cost)
    }
}

pub(super) fn plugin_for(state: &AppState, route: &Route) -> Result<Arc<Plugin>, ApiError> {
    state
        .runtime
        .get(&route.config.plugin)
        .ok_or_else(|| ApiError::PluginNotLoaded {
            route: route.id.clone(),
            plugin: route.config.plugin.clone(),
        })
}

pub(super) fn context(draft: &Draft, route: &Route) -> CallContext {
    CallContext {
        invocation_id: draft.id(),
        sandbox: route.sandbox.clone(),
        secrets: draft.current_secrets().clone(),
    }
}

/// The provider key a call uses (the caller's wins), after noting every key
/// the request carries in the draft so that none shows in errors or records.
pub(super) fn provider_key(
    draft: &mut Draft,
    route: &Route,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    let from_caller = caller_provider_key(headers)?;
    draft.secrets(Secrets::new([
        route.configured_key(),
        from_caller.as_deref(),
    ]));
    route.provider_key(from_caller)
}

/// The caller's own provider key: `KEY` or `Bearer KEY` (any case of the
/// scheme; the plugin adds the scheme its upstream wants).
fn caller_provider_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get(PROVIDER_KEY_HEADER) {
        None => Ok(None),
        Some(value) => {
            let key = value
                .to_str()
                .map_err(|_| ApiError::BadRequest("Provider-API-Key is not valid text".into()))?
                .trim();
            let key = match key.split_once(char::is_whitespace) {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
                _ => key,
            };
            Ok((!key.is_empty()).then(|| key.to_owned()))
        }
    }
}
