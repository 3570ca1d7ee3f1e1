//! The invocation record of a request, filled in as the request advances.

use std::time::Instant;

use uuid::Uuid;

use crate::clock::now_ms;
use crate::config::{Config, RecordBodies};
use crate::error::ApiError;
use crate::metrics::RequestSample;
use crate::plugins::types;
use crate::redact::Secrets;
use crate::state::AppState;
use crate::store::{
    Attempt, CacheStatus, Invocation, InvocationStatus, KeyRecord, Origin, StoredResponse,
    TokenUsage,
};
use crate::traces::RequestTrace;

/// The status recorded for a caller who left before its answer (nginx's convention).
pub const CLIENT_CLOSED_REQUEST: u16 = 499;
/// Why a record whose caller left is `cancelled`.
pub const CLIENT_LEFT: &str = "the client disconnected";

/// What a record keeps of the bodies (config `record_bodies`, `record_body_max_bytes`).
#[derive(Debug, Clone, Copy)]
pub struct BodyPolicy {
    keep: RecordBodies,
    max_bytes: usize,
}

impl BodyPolicy {
    /// Keep no body: a request's policy until its key is verified.
    pub const NONE: BodyPolicy = BodyPolicy {
        keep: RecordBodies::None,
        max_bytes: 0,
    };

    pub fn of(config: &Config) -> BodyPolicy {
        BodyPolicy {
            keep: config.record_bodies,
            max_bytes: config.record_body_max_bytes,
        }
    }

    /// The part of `body` a record keeps; a cut body ends with a note of its whole size.
    pub fn keep(&self, body: &[u8]) -> Option<String> {
        let limit = match self.keep {
            RecordBodies::None => return None,
            RecordBodies::Full => body.len(),
            RecordBodies::Truncated => self.max_bytes,
        };
        if body.len() <= limit {
            return Some(String::from_utf8_lossy(body).into_owned());
        }
        let kept = String::from_utf8_lossy(&body[..limit]);
        // A character cut in two shows as U+FFFD at the end: drop it.
        let kept = kept.trim_end_matches('\u{FFFD}');
        Some(format!("{kept}…[truncated: {} bytes in all]", body.len()))
    }

    /// Like [`BodyPolicy::keep`], taking an owned text (no copy when it is kept whole).
    pub fn keep_text(&self, body: String) -> Option<String> {
        match self.keep {
            RecordBodies::None => None,
            RecordBodies::Truncated if body.len() > self.max_bytes => self.keep(body.as_bytes()),
            _ => Some(body),
        }
    }
}

/// An invocation record under construction. Every request that enters the
/// flow ends by turning its draft into exactly one record.
#[derive(Clone)]
pub struct Draft {
    record: Invocation,
    /// The API surface the request came through, for the metrics.
    surface: &'static str,
    started: Instant,
    bodies: BodyPolicy,
    /// The request's provider keys, once known: kept out of errors and records.
    secrets: Secrets,
    /// A stream task took over the recording (see [`Draft::give_to_stream`]).
    given_to_stream: bool,
    /// The request's trace; its span ends with the record.
    trace: RequestTrace,
}

impl Draft {
    pub fn new(id: Uuid, surface: &'static str, trace: RequestTrace) -> Draft {
        Draft {
            record: Invocation::begun(id, now_ms()),
            surface,
            started: Instant::now(),
            bodies: BodyPolicy::NONE,
            secrets: Secrets::default(),
            given_to_stream: false,
            trace,
        }
    }

    pub fn request_trace(&self) -> &RequestTrace {
        &self.trace
    }

    pub fn id(&self) -> Uuid {
        self.record.id
    }

    /// What to keep of the bodies from now on: set once the caller's key is
    /// verified, so that an unauthenticated body is never stored.
    pub fn keep_bodies(&mut self, bodies: BodyPolicy) {
        self.bodies = bodies;
    }
    /// Keeps what the policy allows of the request body (of `content_type`); truncated, it never
    /// keeps the bytes of images, audio or documents, and a form's files never, whatever the
    /// policy ([`super::media`]).
    pub fn request(&mut self, content_type: Option<&str>, body: &[u8]) {
        if !matches!(self.bodies.keep, RecordBodies::None)
            && let Some(form) = super::media::form_summary(content_type, body)
        {
            self.record.request = self.bodies.keep_text(form);
            return;
        }
        self.record.request = match self.bodies.keep {
            RecordBodies::Truncated => match super::media::summarized(body) {
                Some(summarized) => self.bodies.keep_text(summarized),
                None => self.bodies.keep(body),
            },
            RecordBodies::Full | RecordBodies::None => self.bodies.keep(body),
        };
    }
    /// The draft for a stream task, which records the invocation itself from now on;
    /// this one is marked so that the request is not recorded twice, however
    /// the flow ends.
    pub fn give_to_stream(&mut self) -> Draft {
        let draft = self.clone();
        self.given_to_stream = true;
        draft
    }
    /// Whether a stream task records the invocation (see [`Draft::give_to_stream`]).
    pub fn recorded_by_stream(&self) -> bool {
        self.given_to_stream
    }
    pub fn secrets(&mut self, secrets: Secrets) {
        self.secrets = secrets;
    }
    pub fn current_secrets(&self) -> &Secrets {
        &self.secrets
    }
    /// `error` without the request's provider keys in it, as it may be shown and recorded.
    pub fn redact(&self, error: ApiError) -> ApiError {
        error.redacted(&self.secrets)
    }
    /// An answer without the request's provider keys in it: an upstream may quote the key
    /// it was sent in a successful answer too.
    pub fn redact_answer(&self, answer: String) -> String {
        self.secrets.redact_owned(answer)
    }
    /// The caller's key is known: the record is its project's, and its
    /// spend is counted against the key too.
    pub fn caller(&mut self, key: &KeyRecord) {
        self.record.project_id = Some(key.project_id.clone());
        self.record.key_prefix = Some(key.prefix.clone());
    }
    /// The batch and line this call runs for.
    pub fn batch(&mut self, batch_id: String, custom_id: String) {
        self.record.batch_id = Some(batch_id);
        self.record.custom_id = Some(custom_id);
    }

    pub fn user(&mut self, user_id: Option<&str>) {
        self.record.user_id = user_id.map(str::to_owned);
    }
    pub fn route(&mut self, route: &str, plugin: &str) {
        if self.record.route.as_deref() != Some(route) {
            self.record.route = Some(route.to_owned());
        }
        if self.record.plugin.as_deref() != Some(plugin) {
            self.record.plugin = Some(plugin.to_owned());
        }
    }
    /// A tool call through `/mcp`: its server stands as the route (none while it is not
    /// known: a name that names no server), its tool as the model.
    pub fn tool(&mut self, server: Option<&str>, tool: &str) {
        self.record.route = server.map(str::to_owned);
        self.record.model = Some(tool.to_owned());
        self.record.kind = Some("tool".to_owned());
    }
    pub fn model(&mut self, model: &str, kind: &str, stream: bool) {
        self.record.model = Some(model.to_owned());
        self.record.kind = Some(kind.to_owned());
        self.record.stream = stream;
    }
    /// The model that served (a fallback route's may differ from the one asked for).
    pub fn served_model(&mut self, model: &str) {
        if self.record.model.as_deref() != Some(model) {
            self.record.model = Some(model.to_owned());
        }
    }
    /// What a guard decided of the request or its answer.
    pub fn guarded(&mut self, outcome: crate::store::GuardOutcome) {
        self.record.guards.push(outcome);
    }
    /// The tries of a request that had more than one.
    pub fn attempts(&mut self, attempts: Vec<Attempt>) {
        self.record.attempts = attempts;
    }
    /// The call's cost, once [`Draft::usage`] set it.
    pub fn cost_usd(&self) -> Option<f64> {
        self.record.cost_usd
    }
    pub fn usage(&mut self, usage: Option<TokenUsage>, cost: Option<f64>) {
        self.record.usage = usage;
        self.record.cost_usd = cost;
    }
    /// How the response cache served the request; on a hit, what its answer cost when it
    /// was stored.
    pub fn cache(&mut self, status: CacheStatus, saved_cost_usd: Option<f64>) {
        self.record.cache = Some(status);
        self.record.saved_cost_usd = saved_cost_usd;
    }
    pub fn cache_status(&self) -> Option<CacheStatus> {
        self.record.cache
    }

    pub fn success(mut self, http_status: u16, response: String) -> Finished {
        self.record.status = InvocationStatus::Success;
        self.record.http_status = http_status;
        self.record.response = self.bodies.keep_text(response);
        self.done()
    }

    /// A whole answer made: a success, or, when its caller `left` before it, `cancelled` with
    /// the answer it did not get (its usage and cost are the call's all the same).
    pub fn answered(self, left: bool, response: String) -> Finished {
        if left {
            self.cancelled(CLIENT_CLOSED_REQUEST, CLIENT_LEFT, Some(response))
        } else {
            self.success(200, response)
        }
    }

    pub fn failure(mut self, error: &ApiError) -> Finished {
        if let ApiError::Internal(detail) = error {
            tracing::error!(invocation_id = %self.record.id, "internal error: {detail}");
        }
        self.record.status = match error {
            // Not the request's fault: it was cut short, like a client leaving.
            ApiError::ShuttingDown => InvocationStatus::Cancelled,
            ApiError::RateLimited(_) => InvocationStatus::RateLimited,
            ApiError::GuardDenied { .. } => InvocationStatus::Blocked,
            _ => InvocationStatus::Error,
        };
        self.record.http_status = error.status().as_u16();
        // Whoever built `error` should have redacted it; a record is the last
        // place a key could slip through, so check again.
        self.record.error = Some(self.secrets.redact_owned(error.message()));
        self.record.provider_error = error
            .provider_error()
            .map(|text| self.secrets.redact(text).into_owned());
        self.done()
    }

    /// The request ended before its answer was complete (`reason`: the
    /// client left, or the gateway shut down); `response` holds what was sent.
    pub fn cancelled(
        mut self,
        http_status: u16,
        reason: &str,
        response: Option<String>,
    ) -> Finished {
        self.record.status = InvocationStatus::Cancelled;
        self.record.http_status = http_status;
        self.record.error = Some(reason.to_owned());
        self.record.response = response.and_then(|text| self.bodies.keep_text(text));
        self.done()
    }

    fn done(mut self) -> Finished {
        let elapsed = self.started.elapsed();
        self.record.duration_ms = elapsed.as_millis() as i64;
        Finished {
            invocation: self.record,
            surface: self.surface,
            elapsed,
            trace: self.trace,
        }
    }

    /// When the request arrived.
    pub fn started(&self) -> Instant {
        self.started
    }
}

/// A request's record, once it ended, with what the metrics count of it.
pub struct Finished {
    pub invocation: Invocation,
    surface: &'static str,
    elapsed: std::time::Duration,
    trace: RequestTrace,
}

/// Counts a finished request in the metrics, ends its span and hands its record to the writer.
pub async fn save(state: &AppState, finished: Finished) {
    let Finished {
        invocation,
        surface,
        elapsed,
        trace,
    } = finished;
    let hit = invocation.cache == Some(CacheStatus::Hit);
    let sample = RequestSample {
        surface,
        route: invocation.route.as_deref(),
        model: invocation.model.as_deref(),
        status: invocation.http_status,
        duration: elapsed,
        // A hit's tokens were the provider's once, when its answer was stored.
        usage: invocation.usage.as_ref().filter(|_| !hit),
        cost_usd: invocation.cost_usd,
        cache: invocation.cache.map(CacheStatus::as_str),
        saved_usd: invocation.saved_cost_usd,
    };
    state
        .metrics
        .request(&sample, |model| knows_model(state, sample.route, model));
    trace.end(&invocation);
    state.log.record(invocation).await;
}

/// Stores what a surface keeps of an answer (the Responses API's `store`), before the
/// caller has the whole answer, so that its next request finds it on any replica. A
/// database that fails here does not take the answer from the caller: it is logged, and a
/// later `previous_response_id` naming it is refused as unknown.
pub async fn keep(state: &AppState, draft: &Draft, answer: &str, kept: super::Kept) {
    let project_id = draft.record.project_id.clone().unwrap_or_default();
    let context = draft.redact_answer(kept.context);
    let (parent, earlier) = match kept.parent {
        Some(parent) => (Some(parent.id), parent.conversation_bytes),
        None => (None, 0),
    };
    let stored = StoredResponse {
        id: kept.id,
        project_id,
        invocation_id: draft.id(),
        created_at_ms: draft.record.created_at_ms,
        body: answer.to_owned(),
        conversation_bytes: earlier.saturating_add(context.len() as u64),
        context,
        parent,
        // The route and model that served it (a fallback's, which the key's scope allowed).
        origin: Origin {
            route: draft.record.route.clone(),
            model: draft.record.model.clone(),
        },
    };
    let id = stored.id.clone();
    if let Err(error) = state.store.put_response(stored).await {
        tracing::error!(response_id = %id, "the response could not be stored: {error}");
    }
}

/// Whether `model` is one of `route`'s: its default model, a model it prices, one a
/// `[models]` alias names on it, or one its plugin lists.
fn knows_model(state: &AppState, route: Option<&str>, model: &str) -> bool {
    let Some(route) = route else {
        return false;
    };
    let live = state.live();
    let Ok(route) = live.routes.get(route) else {
        return false;
    };
    let config = &route.config;
    config.default_model.as_deref() == Some(model)
        || config.pricing.contains_key(model)
        || live
            .config
            .models
            .values()
            .any(|alias| alias.route == route.id && alias.model.as_deref() == Some(model))
        || state
            .runtime
            .get(&config.plugin)
            .is_some_and(|plugin| plugin.info.models.iter().any(|known| known.model == model))
}

impl From<&types::Usage> for TokenUsage {
    fn from(u: &types::Usage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            // Some providers leave the total out (0); it is the sum by definition.
            total_tokens: if u.total_tokens == 0 {
                u.prompt_tokens.saturating_add(u.completion_tokens)
            } else {
                u.total_tokens
            },
            cached_prompt_tokens: u.cached_prompt_tokens,
            cache_creation_tokens: u.cache_creation_tokens,
            reasoning_tokens: u.reasoning_tokens,
            image_prompt_tokens: u.image_prompt_tokens,
            audio_prompt_tokens: u.audio_prompt_tokens,
            // A rerank's and an image generation's, set by the flow from the plugin's answer.
            search_units: None,
            images: None,
            audio_seconds: None,
            characters: None,
        }
    }
}
