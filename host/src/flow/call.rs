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
use super::route::Routed;
use super::{AnswerHeaders, Envelope, Kind, Metered};
use crate::error::ApiError;
use crate::limits::Estimate;
use crate::plugins::{CallContext, Plugin, PluginError, PluginRuntime, UpstreamTrace, types};
use crate::pricing;
use crate::redact::Secrets;
use crate::routing::Route;
use crate::state::{AppState, Live};
use crate::store::{KeyScope, TokenUsage};
use crate::traces::Answer;

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
    pub project: Arc<str>,
    pub kind: Kind,
    /// What the call is charged to once it is over.
    pub quota: Quota,
    /// The request body's bytes in the count of those in flight, given back when the call
    /// (and its stream, which owns it then) ends.
    _inflight: crate::inflight::BodyBytes,
}

/// What a call used and what that cost (`None` when the model's price is unknown).
pub(super) struct Charged {
    pub usage: Option<TokenUsage>,
    pub cost_usd: Option<f64>,
}

impl Charged {
    /// As an answer reports it.
    pub fn metered(&self) -> Option<Metered<'_>> {
        let cost_usd = self.cost_usd;
        (self.usage.as_ref()).map(|usage| Metered { usage, cost_usd })
    }
}

impl Call {
    /// The call of `routed`, once its quota admits it: last before the call, so
    /// that a request refused for anything else takes nothing from its limits. `estimate`
    /// makes what the quota reserves for a call of a model on a route's plugin (only when a
    /// limit counts tokens or cost).
    pub async fn admit(
        state: &AppState,
        live: &Arc<Live>,
        draft: &Draft,
        routed: Routed,
        estimate: impl FnOnce(&Route, &Plugin, &str) -> Estimate,
    ) -> Result<Call, ApiError> {
        let Routed {
            key,
            route,
            plugin,
            model,
            kind,
            caller_key,
            inflight,
        } = routed;
        // Fallbacks are held to the scope too; a route without any needs no copy of it.
        let scope = if route.config.fallbacks.is_empty() {
            KeyScope::default()
        } else {
            key.scope.clone()
        };
        let project = Arc::from(key.project_id.as_str());
        let quota = Quota::admit(state, key, || estimate(&route, &plugin, &model)).await?;
        let failover = Failover::new(
            live.clone(),
            state.metrics.clone(),
            Leg::first(route, plugin, model, caller_key),
            scope,
            draft.request_trace().clone(),
            kind.as_str(),
        );
        Ok(Call {
            failover,
            invocation_id: draft.id(),
            secrets: draft.current_secrets().clone(),
            project,
            kind,
            quota,
            _inflight: inflight,
        })
    }

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

    pub async fn rerank(
        &mut self,
        runtime: &PluginRuntime,
        request: types::RerankRequest,
    ) -> Result<types::Reranking, ApiError> {
        self.tries(
            runtime,
            request,
            |request, attempt| attempt.aim(&mut request.route, &mut request.model),
            |leg, ctx, request| async move { runtime.rerank(&leg.plugin, &ctx, request).await },
        )
        .await
    }

    pub async fn generate_images(
        &mut self,
        runtime: &PluginRuntime,
        request: types::ImageRequest,
    ) -> Result<types::Images, ApiError> {
        self.tries(
            runtime,
            request,
            |request, attempt| attempt.aim(&mut request.route, &mut request.model),
            |leg, ctx, request| async move {
                runtime.generate_images(&leg.plugin, &ctx, request).await
            },
        )
        .await
    }

    pub async fn transcribe(
        &mut self,
        runtime: &PluginRuntime,
        request: types::TranscriptionRequest,
    ) -> Result<types::Transcription, ApiError> {
        self.tries(
            runtime,
            request,
            |request, attempt| attempt.aim(&mut request.route, &mut request.model),
            |leg, ctx, request| async move { runtime.transcribe(&leg.plugin, &ctx, request).await },
        )
        .await
    }

    /// How many tokens the prompt takes: the plugin's count (its provider's), else the
    /// gateway's own ([`crate::tokenize`]), off the serving thread (a long prompt, or the
    /// tokenizer's first load, takes milliseconds).
    pub async fn count_tokens(
        &mut self,
        runtime: &PluginRuntime,
        request: types::CompletionRequest,
    ) -> Result<types::TokenCount, ApiError> {
        self.tries(
            runtime,
            request,
            |request, attempt| attempt.aim(&mut request.route, &mut request.model),
            |leg, ctx, request| async move {
                if let Some(count) = runtime
                    .count_tokens(&leg.plugin, &ctx, request.clone())
                    .await?
                {
                    return Ok(count);
                }
                tokio::task::spawn_blocking(move || crate::tokenize::count(&request))
                    .await
                    .map_err(|e| {
                        let failed = format!("the gateway's token count failed: {e}");
                        PluginError::Provider(types::ProviderError::Failed(failed))
                    })
            },
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

    /// The next try of a call whose answer streams (its tries are run by its stream's task),
    /// with its request aimed at it; once none is left, or shutdown's grace ended while
    /// waiting out a backoff, the error to answer with, the tries recorded.
    pub async fn next_try<R: Clone>(
        &mut self,
        state: &AppState,
        draft: &mut Draft,
        template: &mut Option<R>,
        aim: impl Fn(&mut R, &Try),
    ) -> Result<(Try, R), ApiError> {
        let next = tokio::select! {
            // A first try is ready at once: the abort signal is not even subscribed to.
            biased;
            attempt = self.failover.next(&state.runtime) => attempt.ok_or(None),
            () = state.aborted() => Err(Some(ApiError::ShuttingDown)),
        };
        let attempt = match next {
            Ok(attempt) => attempt,
            Err(error) => {
                self.record_tries(draft);
                let error = error.unwrap_or_else(|| self.failover.take_error());
                return Err(draft.redact(error));
            }
        };
        let Some(mut request) = self.failover.request(template) else {
            return Err(ApiError::Internal("a try without its request".into()));
        };
        aim(&mut request, &attempt);
        Ok((attempt, request))
    }

    /// Puts the route that served (or failed last) and the tries in the record.
    pub fn record_tries(&mut self, draft: &mut Draft) {
        self.failover.record_tries(draft);
    }

    /// The call is over, however it ended: the record gets the route and tries that served
    /// and what the call used, priced, and the quota is charged with it. `answer` is what a
    /// try that succeeded answered (it ends that try's span); `None` when the call failed
    /// or was cut short (its span ended then).
    pub async fn settle(
        &mut self,
        draft: &mut Draft,
        usage: Option<TokenUsage>,
        answer: Option<Answer<'_>>,
    ) -> Charged {
        self.settle_as(draft, usage, answer, PricedAs::Model).await
    }

    /// [`Call::settle`], with the usage priced as `price` says (images at their size and
    /// quality).
    pub async fn settle_as(
        &mut self,
        draft: &mut Draft,
        usage: Option<TokenUsage>,
        answer: Option<Answer<'_>>,
        price: PricedAs<'_>,
    ) -> Charged {
        self.record_tries(draft);
        let (usage, cost_usd) = self.metered(usage, price);
        if let Some(answer) = answer {
            self.failover.end_span(&Answer {
                usage: usage.as_ref(),
                cost_usd,
                ..answer
            });
        }
        self.quota.settle(usage.as_ref(), cost_usd).await;
        draft.usage(usage, cost_usd);
        Charged { usage, cost_usd }
    }

    /// [`Call::settle`] for an answer cut short after output had flowed: without the
    /// provider's usage, what was reserved for the call is charged rather than given back
    /// ([`super::quota::Quota::settle_unreported`]); the record has no usage, as none is known.
    pub async fn settle_cut(&mut self, draft: &mut Draft, usage: Option<&types::Usage>) {
        if usage.is_some() {
            self.settle(draft, usage.map(TokenUsage::from), None).await;
            return;
        }
        self.record_tries(draft);
        self.quota.settle_unreported().await;
        draft.usage(None, None);
    }

    /// The headers of an answer sent whole: the serving route and upstream, the rate limits.
    pub fn answer_headers(&self) -> AnswerHeaders {
        let mut limits = HeaderMap::new();
        self.quota.set_headers(&mut limits);
        AnswerHeaders {
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
    fn metered(
        &self,
        usage: Option<TokenUsage>,
        price: PricedAs<'_>,
    ) -> (Option<TokenUsage>, Option<f64>) {
        let Some(usage) = usage else {
            return (None, None);
        };
        let leg = self.leg();
        let route = &leg.route;
        let (pricing, prices) = (&route.config.pricing, self.failover.prices());
        let (plugin, models) = (&route.config.plugin, &leg.plugin.info.models);
        let found = match price {
            PricedAs::Model => pricing::price_for(pricing, prices, plugin, models, &leg.model),
            PricedAs::Image { size, quality } => {
                let model = &leg.model;
                pricing::image_price_for(pricing, prices, plugin, models, model, size, quality)
            }
        };
        let cost = match found {
            Some(price) => Some(pricing::cost(&usage, price)),
            None => {
                pricing::warn_unpriced(&route.id, &leg.model);
                None
            }
        };
        (Some(usage), cost)
    }
}

/// Which of its model's prices a call's usage is priced at.
#[derive(Debug, Clone, Copy)]
pub enum PricedAs<'a> {
    /// The model's own.
    Model,
    /// Its images' at the size and quality made ([`pricing::image_price_for`]).
    Image {
        size: Option<&'a str>,
        quality: Option<&'a str>,
    },
}

/// A try that ran out of its time.
pub(super) fn timeout_error(limit: std::time::Duration) -> ApiError {
    let limit = std::time::Duration::from_millis(limit.as_millis() as u64);
    ApiError::Timeout(format!(
        "no complete answer within {}",
        humantime::format_duration(limit)
    ))
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
