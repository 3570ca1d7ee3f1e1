//! Retries and fallbacks: which route a request tries next, when, and what
//! became of each try.
//!
//! A request starts on its route. A try that fails with a retryable error
//! (upstream 429 or 5xx, a connection that failed, a timeout) is tried again
//! on the same route up to its `retries`, after an exponential backoff with
//! full jitter (or the upstream's `Retry-After`, when it fits in the time
//! left); then the route's `fallbacks` are tried in order, each with its own
//! retries. Anything else (a 4xx, an invalid request) ends the request at
//! once: another try would fail the same way. All tries share one deadline,
//! the route's `timeout_secs` from the first try on.
//!
//! Only the requested route's `fallbacks` are followed (a fallback's own
//! fallbacks are not), so the order of tries is what that one list says.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::record::Draft;
use crate::error::ApiError;
use crate::plugins::{Plugin, PluginRuntime, UpstreamTrace, types};
use crate::routing::Route;
use crate::state::Live;
use crate::store::Attempt;

/// The longest backoff between two tries of one route.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const DEFAULT_BACKOFF_MS: u64 = 200;

/// One route as a request tries it: its plugin, model and provider key.
pub(super) struct Leg {
    pub route: Arc<Route>,
    pub plugin: Arc<Plugin>,
    pub model: String,
    pub api_key: Option<String>,
}

impl Leg {
    /// Points a request built for the first route (its `route` and `model`) at this one.
    pub fn aim(&self, route: &mut types::Route, model: &mut String) {
        if route.id != self.route.id {
            *route = self.route.wit_route(self.api_key.clone());
            *model = self.model.clone();
        }
    }
}

/// What follows a failed try.
enum Next {
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
    current: Arc<Leg>,
    /// Tries made on `current`.
    tries: u32,
    fallbacks: VecDeque<String>,
    /// The requested route: a fallback of its plugin gets its model and the
    /// caller's provider key.
    first: Arc<Leg>,
    caller_key: Option<String>,
    deadline: Instant,
    attempts: Vec<Attempt>,
    last_error: Option<ApiError>,
    /// The smallest `Retry-After` of the upstream 429s seen.
    smallest_retry_after: Option<u32>,
    /// `None` until the first try.
    next: Option<Next>,
}

impl Failover {
    /// The tries of a request to `first`, starting now, with its route's
    /// deadline and fallbacks; `caller_key` is the caller's own provider key.
    pub fn new(live: Arc<Live>, first: Leg, caller_key: Option<String>) -> Failover {
        let first = Arc::new(first);
        let route = &first.route;
        Failover {
            deadline: Instant::now() + route.timeout,
            fallbacks: route.config.fallbacks.iter().cloned().collect(),
            current: first.clone(),
            first,
            live,
            tries: 0,
            caller_key,
            attempts: Vec::new(),
            last_error: None,
            smallest_retry_after: None,
            next: None,
        }
    }

    /// The route the next try goes to (after waiting out its backoff), or
    /// `None` when there is none: the request has failed ([`Failover::take_error`]).
    pub async fn next(&mut self, runtime: &PluginRuntime) -> Option<Arc<Leg>> {
        match self.next.take() {
            None => {}
            Some(Next::Stop) => return None,
            Some(Next::Retry(wait)) if wait < self.remaining() => {
                tokio::time::sleep(wait).await;
            }
            Some(Next::Retry(_) | Next::Fallback) => self.fall_back(runtime)?,
        }
        if self.remaining().is_zero() {
            return None;
        }
        self.tries += 1;
        Some(self.current.clone())
    }

    /// Moves on to the first usable fallback; a fallback that cannot be
    /// tried (no model, no key, plugin not loaded) is listed as an attempt.
    fn fall_back(&mut self, runtime: &PluginRuntime) -> Option<()> {
        while let Some(id) = self.fallbacks.pop_front() {
            match self.leg(&id, runtime) {
                Ok(leg) => {
                    self.current = Arc::new(leg);
                    self.tries = 0;
                    return Some(());
                }
                Err((kind, error)) => {
                    self.attempts.push(Attempt {
                        route: id,
                        target: None,
                        status: None,
                        error: Some(kind.to_owned()),
                        duration_ms: 0,
                    });
                    tracing::warn!("fallback route skipped: {error}");
                    if self.last_error.is_none() {
                        self.last_error = Some(error);
                    }
                }
            }
        }
        None
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
        let caller_key = self.caller_key.clone().filter(|_| same_plugin);
        let api_key = route
            .provider_key(caller_key)
            .map_err(|error| ("no_key", error))?;
        let plugin = super::call::plugin_for(runtime, &route)
            .map_err(|error| ("plugin_unavailable", error))?;
        Ok(Leg {
            route,
            plugin,
            model,
            api_key,
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

    /// Whether a failure of the next try could be followed by another one.
    pub fn may_try_again(&self) -> bool {
        self.tries <= self.current.route.config.retries || !self.fallbacks.is_empty()
    }

    /// The try that started at `started` succeeded.
    pub fn succeeded(&mut self, started: Instant) {
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
        let attempt = self.attempt(started, status, Some(kind));
        self.attempts.push(attempt);
        self.next = Some(match retryable(&error, trace) {
            None => Next::Stop,
            Some(retry_after) => {
                if let (Some(secs), Some(429)) = (retry_after, status) {
                    self.smallest_retry_after =
                        Some(self.smallest_retry_after.map_or(secs, |s| s.min(secs)));
                }
                let retries = self.current.route.config.retries;
                match retry_after {
                    _ if self.tries > retries => Next::Fallback,
                    // Honored when it fits in the time left; else not on this route.
                    Some(secs) => Next::Retry(Duration::from_secs(u64::from(secs))),
                    None => Next::Retry(self.backoff()),
                }
            }
        });
        self.last_error = Some(error);
    }

    /// A random wait up to `retry_backoff_ms * 2^(tries - 1)`, capped ("full jitter").
    fn backoff(&self) -> Duration {
        let base = self
            .current
            .route
            .config
            .retry_backoff_ms
            .map_or(DEFAULT_BACKOFF_MS, |ms| ms.get());
        let shift = self.tries.saturating_sub(1).min(16);
        let ceiling = Duration::from_millis(base.saturating_mul(1 << shift)).min(MAX_BACKOFF);
        let mut bytes = [0u8; 8];
        // Without randomness every replica would retry in step; a fixed half is still a wait.
        let fraction = match getrandom::fill(&mut bytes) {
            Ok(()) => (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64,
            Err(_) => 0.5,
        };
        ceiling.mul_f64(fraction)
    }

    fn attempt(&self, started: Instant, status: Option<u16>, error: Option<&str>) -> Attempt {
        Attempt {
            route: self.current.route.id.clone(),
            target: self
                .current
                .route
                .config
                .base_url
                .as_ref()
                .map(|url| host_of(url.as_str())),
            status,
            error: error.map(str::to_owned),
            duration_ms: started.elapsed().as_millis() as i64,
        }
    }

    /// The try that started at `started` was ended by the gateway (`why`:
    /// the client left, shutdown), not by the upstream.
    pub fn cut_short(&mut self, started: Instant, why: &str) {
        let attempt = self.attempt(started, None, Some(why));
        self.attempts.push(attempt);
    }

    /// Puts the route of the last try (the one that served, if one did) and
    /// the tries, when there was more than one, in the record.
    pub fn note(&mut self, draft: &mut Draft) {
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
        let attempts = self.attempts.len();
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
        if attempts > 1 {
            ApiError::Exhausted {
                last: Box::new(last),
                attempts,
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

/// `base_url`'s host, with its port when it has one: `api.openai.com`, `127.0.0.1:8081`.
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    // Credentials in a URL are not the host's business (nor the record's).
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_keep_their_port_and_drop_credentials() {
        assert_eq!(host_of("https://api.openai.com/v1"), "api.openai.com");
        assert_eq!(host_of("http://127.0.0.1:8081/v1?x=1"), "127.0.0.1:8081");
        assert_eq!(host_of("https://user:pw@h.example:8443"), "h.example:8443");
    }

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
        for status in [400, 401, 403, 404, 409, 422, 501] {
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
