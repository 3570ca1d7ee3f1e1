//! Retries and fallbacks: which route and upstream a request tries next, when, and what
//! became of each try.
//!
//! A request starts on its route. A try that fails with a retryable error (upstream 429 or
//! 5xx, a connection that failed, a timeout) goes at once to another of the route's targets
//! it has not tried, if one is in rotation; once each has had its try, the route's `retries`
//! follow, after an exponential backoff with full jitter (or the upstream's `Retry-After`,
//! when it fits in the time left), each on a target chosen by weight; then the route's
//! `fallbacks` are tried in order, each in the same way. Anything else (a 4xx, an invalid
//! request) ends the request at once: another try would fail the same way. All tries share
//! one deadline, the route's `timeout_secs` from the first try on. A route whose targets are
//! all ejected is skipped without a try.
//!
//! Only the requested route's `fallbacks` are followed (a fallback's own fallbacks are not),
//! so the order of tries is what that one list says. A fallback outside the caller's key scope
//! is skipped, and the caller's own provider key goes to a fallback only when it is of the
//! requested route's plugin and sets `forward_caller_key` (else its upstream, possibly another
//! party's host, would get it). The requested route's `max_attempts` caps the tries of the
//! whole request, whatever its retries, targets and fallbacks would allow.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::record::Draft;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::plugins::{Plugin, PluginRuntime, UpstreamTrace, types};
use crate::routing::{Pick, Route, Target, Tried, random_u64};
use crate::state::Live;
use crate::store::{Attempt, KeyScope};
use crate::traces::{Answer, AttemptStart, RequestTrace, TrySpan};

/// The longest backoff between two tries of one route.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const DEFAULT_BACKOFF_MS: u64 = 200;

/// One route as a request tries it: its plugin and model, and the caller's provider key
/// when this route may use it.
pub(super) struct Leg {
    pub route: Arc<Route>,
    pub plugin: Arc<Plugin>,
    pub model: String,
    caller_key: Option<String>,
}

impl Leg {
    /// The requested route, where the caller's own provider key (if any) goes.
    pub fn first(
        route: Arc<Route>,
        plugin: Arc<Plugin>,
        model: String,
        caller_key: Option<String>,
    ) -> Leg {
        Leg {
            route,
            plugin,
            model,
            caller_key,
        }
    }
}

/// One try: a route, and which of its targets.
pub(super) struct Try {
    pub leg: Arc<Leg>,
    target: usize,
}

impl Try {
    pub fn target(&self) -> &Target {
        self.leg.route.target(self.target)
    }

    /// Points a request at this try's route, upstream, key and model.
    pub fn aim(&self, route: &mut types::Route, model: &mut String) {
        let leg = &self.leg;
        let target = self.target();
        let key = leg.route.provider_key(target, leg.caller_key.as_deref());
        *route = target.wit_route(&leg.route.id, key);
        if *model != leg.model {
            model.clone_from(&leg.model);
        }
    }
}

/// What follows a failed try.
enum Next {
    /// Another target of the same route, at once.
    Other,
    /// The same route again, after this wait.
    Retry(Duration),
    /// The next fallback.
    Fallback,
    /// Nothing: the error is the answer.
    Stop,
}

/// The tries of one request.
pub(super) struct Failover {
    live: Arc<Live>,
    metrics: Arc<Metrics>,
    current: Arc<Leg>,
    /// The target of the current try.
    target: usize,
    /// The targets of `current` tried so far.
    tried: Tried,
    /// Tries of `current` after each of its targets had one: what its `retries` counts.
    retried: u32,
    /// Tries made, on every route.
    made: usize,
    fallbacks: VecDeque<String>,
    /// The requested route: a fallback of its plugin gets its model (and, if it
    /// forwards it, the caller's provider key); its `max_attempts` caps the tries.
    first: Arc<Leg>,
    /// The caller's key scope, which each fallback must be within (unscoped when the
    /// route has no fallbacks: nothing reads it then).
    scope: KeyScope,
    deadline: Instant,
    attempts: Vec<Attempt>,
    last_error: Option<ApiError>,
    /// The smallest `Retry-After` of the upstream 429s seen.
    smallest_retry_after: Option<u32>,
    /// `None` until the first try.
    next: Option<Next>,
    /// The request's trace, and what the tries' spans say of their kind of call.
    trace: RequestTrace,
    kind: &'static str,
    /// The span of the try under way (or that answered, until [`Failover::end_span`]).
    span: Option<TrySpan>,
}

impl Failover {
    /// The tries of a request to `first`, starting now, with its route's deadline and
    /// fallbacks, each of which must be within `scope` (what `first` was checked against).
    pub fn new(
        live: Arc<Live>,
        metrics: Arc<Metrics>,
        first: Leg,
        scope: KeyScope,
        trace: RequestTrace,
        kind: &'static str,
    ) -> Failover {
        let first = Arc::new(first);
        let route = &first.route;
        Failover {
            deadline: Instant::now() + route.timeout,
            fallbacks: route.config.fallbacks.iter().cloned().collect(),
            current: first.clone(),
            first,
            scope,
            live,
            metrics,
            target: 0,
            tried: Tried::default(),
            retried: 0,
            made: 0,
            attempts: Vec::new(),
            last_error: None,
            smallest_retry_after: None,
            next: None,
            trace,
            kind,
            span: None,
        }
    }

    /// The next try (after waiting out its backoff), or `None` when there is none: the
    /// request has failed ([`Failover::take_error`]).
    pub async fn next(&mut self, runtime: &PluginRuntime) -> Option<Try> {
        match self.next.take() {
            None => {}
            Some(Next::Stop) => return None,
            Some(next) if self.made >= self.first.route.max_attempts => {
                self.stop_at_cap(next);
                return None;
            }
            Some(Next::Other) => {}
            Some(Next::Retry(wait)) if wait < self.remaining() => {
                tokio::time::sleep(wait).await;
                self.retried += 1;
            }
            Some(Next::Retry(_) | Next::Fallback) => self.fall_back(runtime)?,
        }
        loop {
            if self.remaining().is_zero() {
                return None;
            }
            let route = &self.current.route;
            match route.pick(self.tried, self.current.caller_key.is_some()) {
                Pick::Target(target) => {
                    self.target = target;
                    self.tried = self.tried.with(target);
                    self.made += 1;
                    self.span = Some(self.trace.attempt(AttemptStart {
                        kind: self.kind,
                        route: &route.id,
                        plugin: &route.config.plugin,
                        model: &self.current.model,
                        server: route.target(target).host.as_deref(),
                        number: self.made,
                    }));
                    return Some(Try {
                        leg: self.current.clone(),
                        target,
                    });
                }
                Pick::Ejected(back_in) => {
                    let error = ApiError::Ejected {
                        route: route.id.clone(),
                        // Whole seconds, rounded up: a client retrying on time finds it back.
                        retry_after: u32::try_from(back_in.as_millis().div_ceil(1000))
                            .unwrap_or(u32::MAX)
                            .max(1),
                    };
                    self.skip(route.id.clone(), "ejected", error);
                }
                Pick::NoneLeft => {
                    let error = route
                        .check_key(false)
                        .err()
                        .unwrap_or_else(|| ApiError::Internal("no target to try".into()));
                    self.skip(route.id.clone(), "no_key", error);
                }
            }
            self.fall_back(runtime)?;
        }
    }

    /// Moves on to the first usable fallback; a fallback that cannot be
    /// tried (no model, no key, plugin not loaded) is listed as an attempt.
    fn fall_back(&mut self, runtime: &PluginRuntime) -> Option<()> {
        while let Some(id) = self.fallbacks.pop_front() {
            match self.leg(&id, runtime) {
                Ok(leg) => {
                    self.current = Arc::new(leg);
                    self.tried = Tried::default();
                    self.retried = 0;
                    return Some(());
                }
                Err((kind, error)) => self.skip(id, kind, error),
            }
        }
        None
    }

    /// Lists route `id` as passed over without a try, because of `error`.
    fn skip(&mut self, id: String, kind: &str, error: ApiError) {
        tracing::warn!("route skipped: {error}");
        self.pass_over(id, kind);
        if self.last_error.is_none() {
            self.last_error = Some(error);
        }
    }

    /// Lists route `id` in the record's `attempts` and the metrics as not tried, for `kind`.
    fn pass_over(&mut self, id: String, kind: &str) {
        self.metrics.attempt(&id, kind, None);
        self.attempts.push(Attempt {
            route: id,
            target: None,
            status: None,
            error: Some(kind.to_owned()),
            duration_ms: 0,
        });
    }

    /// Ends the request at its `max_attempts`, where `next` would have followed: the route of
    /// the try that is not made is listed as `max_attempts` (nothing when none would have been).
    fn stop_at_cap(&mut self, next: Next) {
        if self.remaining().is_zero() {
            return;
        }
        let route = match next {
            Next::Other => Some(&self.current.route.id),
            Next::Retry(wait) if wait < self.remaining() => Some(&self.current.route.id),
            Next::Retry(_) | Next::Fallback | Next::Stop => self.fallbacks.front(),
        };
        if let Some(id) = route.cloned() {
            tracing::warn!(route = %id, tries = self.made, "request stopped at its max_attempts");
            self.pass_over(id, "max_attempts");
        }
    }

    /// Fallback route `id` as this request would try it.
    fn leg(&self, id: &str, runtime: &PluginRuntime) -> Result<Leg, (&'static str, ApiError)> {
        let route = self
            .live
            .routes
            .get(id)
            .map_err(|error| ("unknown_route", error))?;
        let same_plugin = route.config.plugin == self.first.route.config.plugin;
        let model = if same_plugin {
            Some(self.first.model.clone())
        } else {
            route.config.default_model.clone()
        };
        let model = model.ok_or_else(|| {
            (
                "no_model",
                ApiError::BadRequest(format!("fallback route {id:?} has no default_model")),
            )
        })?;
        if !self.scope.allows(id, &model) {
            return Err((
                "out_of_scope",
                ApiError::OutOfScope(format!(
                    "model {model:?} of fallback route {id:?} is outside the API key's scope"
                )),
            ));
        }
        let forwards = same_plugin && route.config.forward_caller_key;
        let caller_key = self.first.caller_key.clone().filter(|_| forwards);
        route
            .check_key(caller_key.is_some())
            .map_err(|error| ("no_key", error))?;
        let plugin = runtime
            .for_route(&route.id, &route.config.plugin)
            .map_err(|error| ("plugin_unavailable", error.into()))?;
        Ok(Leg {
            route,
            plugin,
            model,
            caller_key,
        })
    }

    /// What is left of the request's time.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// How long the try about to start may take: its route's timeout, within the deadline.
    pub fn try_timeout(&self) -> Duration {
        self.current.route.timeout.min(self.remaining())
    }

    /// The route of the last try (the one that served, once one did).
    pub fn current(&self) -> &Arc<Leg> {
        &self.current
    }

    /// The prices file's table of the config snapshot the request started with.
    pub fn prices(&self) -> &crate::pricing::PriceTable {
        &self.live.prices
    }

    /// The target of the last try.
    pub fn current_target(&self) -> &Target {
        self.current.route.target(self.target)
    }

    /// Whether a failure of the try just begun could be followed by another one.
    fn may_try_again(&self) -> bool {
        self.made < self.first.route.max_attempts
            && (self.retried < self.current.route.config.retries
                || self.current.route.target_count() > 1
                || !self.fallbacks.is_empty())
    }

    /// The request of the try just begun, from `template`: a copy while another try may
    /// follow, else the template itself (no copy on the happy path). `None` only if a try
    /// followed the one that took it, which [`Failover::may_try_again`] rules out.
    pub fn request<R: Clone>(&self, template: &mut Option<R>) -> Option<R> {
        if self.may_try_again() {
            template.clone()
        } else {
            template.take()
        }
    }

    /// The `traceparent` (and `tracestate`) the current try's upstream requests carry.
    pub fn trace_headers(&self) -> Option<crate::plugins::TraceHeaders> {
        self.span.as_ref().and_then(TrySpan::headers)
    }

    /// Ends the span of the try that succeeded with what it answered.
    pub fn end_span(&mut self, answer: &Answer<'_>) {
        if let Some(span) = self.span.take() {
            span.answered(answer);
        }
    }

    /// The try that started at `started` succeeded (its span ends with
    /// [`Failover::end_span`]).
    pub fn succeeded(&mut self, started: Instant) {
        self.current.route.report(self.current_target(), Some(true));
        let route = &self.current.route.id;
        self.metrics
            .attempt(route, "success", Some(started.elapsed()));
        // A first try is listed only with others: not on the happy path.
        if !self.attempts.is_empty() {
            let attempt = self.attempt(started, Some(200), None);
            self.attempts.push(attempt);
        }
    }

    /// The try that started at `started` failed with `error`; `trace` is
    /// what the host saw of its upstream requests.
    pub fn failed(&mut self, started: Instant, error: ApiError, trace: &UpstreamTrace) {
        let (kind, status) = kind_of(&error, trace);
        let result = status.map(|status| status.to_string());
        let result = result.as_deref().unwrap_or(kind);
        let route_id = &self.current.route.id;
        self.metrics
            .attempt(route_id, result, Some(started.elapsed()));
        if let Some(span) = self.span.take() {
            span.failed(status, kind);
        }
        let attempt = self.attempt(started, status, Some(kind));
        self.attempts.push(attempt);
        let retryable = retryable(&error, trace);
        // An upstream that answered a 4xx is well; a plugin's refusal says nothing of it.
        let health = match retryable {
            Some(_) => Some(false),
            None => status.map(|_| true),
        };
        let route = &self.current.route;
        route.report(self.current_target(), health);
        self.next = Some(match retryable {
            None => Next::Stop,
            Some(retry_after) => {
                if let (Some(secs), Some(429)) = (retry_after, status) {
                    self.smallest_retry_after =
                        Some(self.smallest_retry_after.map_or(secs, |s| s.min(secs)));
                }
                if route.has_untried(self.tried, self.current.caller_key.is_some()) {
                    Next::Other
                } else if self.retried >= route.config.retries {
                    Next::Fallback
                } else {
                    // Honored when it fits in the time left; else not on this route.
                    match retry_after {
                        Some(secs) => Next::Retry(Duration::from_secs(u64::from(secs))),
                        None => Next::Retry(self.backoff()),
                    }
                }
            }
        });
        self.last_error = Some(error);
    }

    /// A random wait up to `retry_backoff_ms * 2^retries so far`, capped ("full jitter").
    fn backoff(&self) -> Duration {
        let base = self
            .current
            .route
            .config
            .retry_backoff_ms
            .map_or(DEFAULT_BACKOFF_MS, |ms| ms.get());
        let ceiling =
            Duration::from_millis(base.saturating_mul(1 << self.retried.min(16))).min(MAX_BACKOFF);
        // Random so that replicas and requests do not retry in step.
        let fraction = (random_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction)
    }

    fn attempt(&self, started: Instant, status: Option<u16>, error: Option<&str>) -> Attempt {
        Attempt {
            route: self.current.route.id.clone(),
            target: self.current_target().host.clone(),
            status,
            error: error.map(str::to_owned),
            duration_ms: started.elapsed().as_millis() as i64,
        }
    }

    /// The try that started at `started` was ended by the gateway (`why`:
    /// the client left, shutdown), not by the upstream.
    pub fn cut_short(&mut self, started: Instant, why: &str) {
        self.current.route.report(self.current_target(), None);
        self.metrics
            .attempt(&self.current.route.id, why, Some(started.elapsed()));
        if let Some(span) = self.span.take() {
            span.failed(None, why);
        }
        let attempt = self.attempt(started, None, Some(why));
        self.attempts.push(attempt);
    }

    /// Puts the route of the last try (the one that served, if one did) and
    /// the tries, when there was more than one, in the record.
    pub fn record_tries(&mut self, draft: &mut Draft) {
        let leg = &self.current;
        draft.route(&leg.route.id, &leg.route.config.plugin);
        draft.served_model(&leg.model);
        if self.attempts.len() > 1 {
            draft.attempts(self.attempts.clone());
        }
    }

    /// The request's error once no try is left: the last try's, with the
    /// number of tries when there was more than one.
    pub fn take_error(&mut self) -> ApiError {
        let last = match self.last_error.take() {
            Some(error) => error,
            None => ApiError::Timeout("the request's time ran out before a try".into()),
        };
        let last = match last {
            ApiError::Upstream {
                status: 429,
                message,
                retry_after,
            } => ApiError::Upstream {
                status: 429,
                message,
                retry_after: self.smallest_retry_after.or(retry_after),
            },
            other => other,
        };
        if self.made > 1 {
            ApiError::Exhausted {
                last: Box::new(last),
                attempts: self.made,
            }
        } else {
            last
        }
    }
}

/// `Some(Retry-After)` when another try may succeed where this one failed.
fn retryable(error: &ApiError, trace: &UpstreamTrace) -> Option<Option<u32>> {
    match error {
        ApiError::Upstream {
            status: 429 | 500 | 502 | 503 | 504,
            retry_after,
            ..
        } => Some(*retry_after),
        ApiError::Timeout(_) => Some(None),
        ApiError::ProviderFailed(_) if trace.transport_failed() => Some(None),
        _ => None,
    }
}

/// How a try failed, as the record lists it, and the upstream's status if it answered.
fn kind_of(error: &ApiError, trace: &UpstreamTrace) -> (&'static str, Option<u16>) {
    match error {
        ApiError::Upstream { status, .. } => ("upstream", Some(*status)),
        ApiError::Timeout(_) => ("timeout", None),
        ApiError::ProviderFailed(_) if trace.transport_failed() => ("connection", None),
        ApiError::ProviderFailed(_) => ("provider", None),
        ApiError::BadRequest(_) | ApiError::InvalidParam { .. } => ("invalid_request", None),
        ApiError::PluginFailed(_) | ApiError::PluginUnavailable(_) => ("plugin", None),
        ApiError::Busy(_) => ("busy", None),
        _ => ("other", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_retried() {
        let trace = UpstreamTrace::default();
        let upstream = |status, retry_after| ApiError::Upstream {
            status,
            message: String::new(),
            retry_after,
        };
        for status in [429, 500, 502, 503, 504] {
            assert_eq!(retryable(&upstream(status, Some(3)), &trace), Some(Some(3)));
        }
        for status in [400, 401, 403, 404, 409, 413, 422, 501] {
            assert_eq!(retryable(&upstream(status, None), &trace), None);
        }
        assert_eq!(
            retryable(&ApiError::Timeout("t".into()), &trace),
            Some(None)
        );
        let failed = ApiError::ProviderFailed("cannot read the answer".into());
        assert_eq!(retryable(&failed, &trace), None);
        trace.note_transport_failure();
        assert_eq!(retryable(&failed, &trace), Some(None));
        assert_eq!(retryable(&ApiError::BadRequest("x".into()), &trace), None);
    }
}
