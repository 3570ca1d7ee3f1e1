//! The plugin call of a routed request: which plugin, with which provider key
//! and sandbox, within the route's timeout (tried again and on fallback
//! routes as the [`Failover`] decides), and what its usage cost.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use hyper::HeaderMap;
use uuid::Uuid;

use super::failover::{Failover, Leg, Try};
use super::quota::Quota;
use super::record::Draft;
use super::{Envelope, Kind};
use crate::error::ApiError;
use crate::plugins::{CallContext, PluginError, PluginRuntime, UpstreamTrace, types};
use crate::pricing;
use crate::redact::Secrets;
use crate::routing::Route;
use crate::store::TokenUsage;

const PROVIDER_KEY_HEADER: &str = "provider-api-key";
/// The response header naming the route that served the request.
pub const ROUTE_HEADER: &str = "x-gateway-route";
/// The response header naming the upstream host that served the request.
pub const TARGET_HEADER: &str = "x-gateway-target";

/// A request that is routed: everything its plugin calls and its answer
/// need, in whichever mode it is answered.
pub(super) struct Call {
    /// Which route is tried, and what became of the tries.
    pub failover: Failover,
    pub invocation_id: Uuid,
    /// The request's provider keys, kept out of plugin logs.
    pub secrets: Secrets,
    /// The project of the caller's key.
    pub project: String,
    pub kind: Kind,
    /// What the call is charged to once it is over.
    pub quota: Quota,
    /// The request body's bytes in the count of those in flight, given back when the call
    /// (and its stream, which owns it then) ends.
    pub _inflight: crate::inflight::BodyBytes,
}

impl Call {
    /// The route of the current try (the one that served, once one did).
    pub fn leg(&self) -> &Arc<Leg> {
        self.failover.current()
    }

    pub fn envelope<'a>(&'a self, invocation_id: &'a str) -> Envelope<'a> {
        Envelope {
            invocation_id,
            project_id: &self.project,
            kind: self.kind,
            model: &self.leg().model,
        }
    }

    /// A try's context: its target's sandbox, a fresh trace of its upstream requests, and
    /// the trace context they carry.
    pub fn context(&self, attempt: &Try) -> CallContext {
        CallContext {
            invocation_id: self.invocation_id,
            route: Arc::from(attempt.leg.route.id.as_str()),
            sandbox: attempt.target().sandbox.clone(),
            secrets: self.secrets.clone(),
            trace: Arc::new(UpstreamTrace::default()),
            trace_headers: self.failover.trace_headers(),
        }
    }

    pub async fn complete(
        &mut self,
        runtime: &PluginRuntime,
        request: types::CompletionRequest,
    ) -> Result<types::Completion, ApiError> {
        self.tries(
            runtime,
            request,
            |request, attempt| attempt.aim(&mut request.route, &mut request.model),
            |leg, ctx, request| async move { runtime.complete(&leg.plugin, &ctx, request).await },
        )
        .await
    }

    pub async fn embed(
        &mut self,
        runtime: &PluginRuntime,
        request: types::EmbeddingRequest,
    ) -> Result<types::Embeddings, ApiError> {
        self.tries(
            runtime,
            request,
            |request, attempt| attempt.aim(&mut request.route, &mut request.model),
            |leg, ctx, request| async move { runtime.embed(&leg.plugin, &ctx, request).await },
        )
        .await
    }

    /// Tries `call` until one try succeeds or the failover has none left.
    /// The request is cloned only while another try may follow.
    async fn tries<R, T, F, Fut>(
        &mut self,
        runtime: &PluginRuntime,
        request: R,
        aim: impl Fn(&mut R, &Try),
        call: F,
    ) -> Result<T, ApiError>
    where
        R: Clone,
        F: Fn(Arc<Leg>, CallContext, R) -> Fut,
        Fut: Future<Output = Result<T, PluginError>>,
    {
        let mut template = Some(request);
        while let Some(attempt) = self.failover.next(runtime).await {
            let mut request = self
                .failover
                .request(&mut template)
                .ok_or_else(|| ApiError::Internal("a try without its request".into()))?;
            aim(&mut request, &attempt);
            let ctx = self.context(&attempt);
            let trace = ctx.trace.clone();
            let limit = self.failover.try_timeout();
            let started = Instant::now();
            let result = match tokio::time::timeout(limit, call(attempt.leg, ctx, request)).await {
                Ok(result) => result.map_err(ApiError::from),
                Err(_) => Err(timeout_error(limit)),
            };
            match result {
                Ok(answer) => {
                    self.failover.succeeded(started);
                    return Ok(answer);
                }
                Err(error) => self.failover.failed(started, error, &trace),
            }
        }
        Err(self.failover.take_error())
    }

    /// Puts the route that served (or failed last) and the tries in the record.
    pub fn note(&mut self, draft: &mut Draft) {
        self.failover.note(draft);
    }

    /// The answer's headers: the serving route and upstream, the rate limits.
    pub fn answered(&self) -> super::Answered {
        let mut limits = HeaderMap::new();
        self.quota.set_headers(&mut limits);
        super::Answered {
            served: self.served(),
            limits,
        }
    }

    /// The route and upstream of the last try, for the answer's head.
    pub fn served(&self) -> Served {
        Served {
            route: self.leg().route.header.clone(),
            target: self.failover.current_target().header.clone(),
        }
    }

    /// Usage and its cost (`None` when the model's price is unknown).
    pub fn metered(&self, usage: Option<&types::Usage>) -> (Option<TokenUsage>, Option<f64>) {
        let Some(usage) = usage.map(TokenUsage::from) else {
            return (None, None);
        };
        let leg = self.leg();
        let route = &leg.route;
        let cost = match pricing::price_for(
            &route.config.pricing,
            self.failover.prices(),
            &route.config.plugin,
            &leg.plugin.info.models,
            &leg.model,
        ) {
            Some(price) => Some(pricing::cost(&usage, price)),
            None => {
                pricing::warn_unpriced(&route.id, &leg.model);
                None
            }
        };
        (Some(usage), cost)
    }
}

/// A try that ran out of its time.
pub(super) fn timeout_error(limit: std::time::Duration) -> ApiError {
    let limit = std::time::Duration::from_millis(limit.as_millis() as u64);
    ApiError::Timeout(format!(
        "no complete answer within {}",
        humantime::format_duration(limit)
    ))
}

/// The caller's own provider key, after noting every key the request may carry to an
/// upstream (each target's of its route and of its fallbacks, and the caller's) in the draft
/// so that none shows in answers, errors or records.
pub(super) fn caller_key(
    draft: &mut Draft,
    route: &Route,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    let from_caller = caller_provider_key(headers)?;
    draft.secrets(match &from_caller {
        Some(key) => route.secrets.with(key),
        None => route.secrets.clone(),
    });
    Ok(from_caller)
}

/// The route and upstream that served, as the answer's head names them.
#[derive(Clone, Default)]
pub(super) struct Served {
    pub route: Option<hyper::header::HeaderValue>,
    pub target: Option<hyper::header::HeaderValue>,
}

impl Served {
    pub fn set_headers(self, headers: &mut HeaderMap) {
        if let Some(route) = self.route {
            headers.insert(ROUTE_HEADER, route);
        }
        if let Some(target) = self.target {
            headers.insert(TARGET_HEADER, target);
        }
    }
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
