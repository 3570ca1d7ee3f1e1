//! Invocation records: one per call through the gateway, with its tries, its guards'
//! verdicts and how the response cache served it; and what a project's records add up to.

use std::collections::BTreeMap;

use serde::Serialize;
use uuid::Uuid;

use crate::clock::format_time_ms;

/// What a project's calls added up to over a period.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageTotals {
    /// Invocation records (every outcome, refusals by a limit included).
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// The exact cost of the calls whose price is known.
    pub cost_usd: f64,
}

/// Token counts of one call, normalized across providers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_creation_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
    /// Prompt tokens of images (included in `prompt_tokens`), where the provider tells them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_prompt_tokens: Option<u32>,
    /// Prompt tokens of audio (included in `prompt_tokens`), where the provider tells them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio_prompt_tokens: Option<u32>,
    /// The search units a provider billed a rerank by (Cohere's, Bedrock's queries), beside
    /// any tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_units: Option<u32>,
    /// The images a model made, beside any tokens they were billed by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<u32>,
    /// The seconds of audio a provider billed a transcription by (Whisper's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio_seconds: Option<u32>,
    /// The characters of a speech's input, which the providers that bill by them (tts-1) bill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub characters: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvocationStatus {
    Success,
    Error,
    /// The caller went away before the answer was complete.
    Cancelled,
    /// Refused by a rate limit or budget before reaching a plugin.
    RateLimited,
    /// Refused by a guard: the request before it reached the provider, or the answer
    /// before it reached the caller.
    Blocked,
}

impl InvocationStatus {
    pub const ALL: [InvocationStatus; 5] = [
        InvocationStatus::Success,
        InvocationStatus::Error,
        InvocationStatus::Cancelled,
        InvocationStatus::RateLimited,
        InvocationStatus::Blocked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InvocationStatus::Success => "success",
            InvocationStatus::Error => "error",
            InvocationStatus::Cancelled => "cancelled",
            InvocationStatus::RateLimited => "rate_limited",
            InvocationStatus::Blocked => "blocked",
        }
    }

    pub(crate) fn parse(text: &str) -> InvocationStatus {
        match text {
            "success" => InvocationStatus::Success,
            "cancelled" => InvocationStatus::Cancelled,
            "rate_limited" => InvocationStatus::RateLimited,
            "blocked" => InvocationStatus::Blocked,
            _ => InvocationStatus::Error,
        }
    }
}

/// One call through the gateway, successful or not. Serialized as a line of
/// the [`journal`](super::journal) (its field names are that file's format).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Invocation {
    pub id: Uuid,
    pub project_id: Option<String>,
    /// The stored prefix of the caller's key (what its spend is counted by).
    /// Absent from journal lines written before it existed.
    #[serde(default)]
    pub key_prefix: Option<String>,
    pub user_id: Option<String>,
    pub route: Option<String>,
    pub plugin: Option<String>,
    pub model: Option<String>,
    /// "text", "chat", "embeddings", "count_tokens", "rerank", "images", "transcription"
    /// or "tool".
    pub kind: Option<String>,
    pub stream: bool,
    pub status: InvocationStatus,
    pub http_status: u16,
    pub error: Option<String>,
    pub provider_error: Option<String>,
    pub usage: Option<TokenUsage>,
    pub cost_usd: Option<f64>,
    /// Unix time in milliseconds.
    pub created_at_ms: i64,
    pub duration_ms: i64,
    /// The request body as received (JSON text, or the raw text when it was not JSON).
    pub request: Option<String>,
    /// The response body sent (for streams: the assembled final response).
    pub response: Option<String>,
    /// Every upstream attempt, in order, when there was more than one try (retries,
    /// fallbacks); empty for a request answered (or failed) by its one attempt. Absent from
    /// journal lines written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// What each guard that checked the request or its answer decided, in the order they
    /// ran; empty when no guard ran. Absent from journal lines written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<GuardOutcome>,
    /// How the response cache served the request; None when its route has no cache (and in
    /// journal lines written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheStatus>,
    /// On a cache hit, what the answer cost when it was stored: the hit itself costs nothing
    /// (`cost_usd` 0), and this is what it saved. None otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_cost_usd: Option<f64>,
    /// The batch (`/v1/batches`) whose line this call ran, and the line's `custom_id`; None
    /// for a caller's own request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_id: Option<String>,
}

/// How the response cache served a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheStatus {
    /// Answered from the cache, without a plugin call.
    Hit,
    /// Looked up and not found: the answer, if successful, was stored for the next request.
    Miss,
    /// The caller asked the cache not to be read: `no-cache` (whose answer still refreshes the
    /// entry) or `no-store`.
    Skip,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
            CacheStatus::Skip => "skip",
        }
    }

    /// None for what is no status (a hand-edited column, or a status a newer gateway wrote):
    /// the record is still worth reading, and nothing is decided from it.
    pub fn parse(text: &str) -> Option<CacheStatus> {
        match text {
            "hit" => Some(CacheStatus::Hit),
            "miss" => Some(CacheStatus::Miss),
            "skip" => Some(CacheStatus::Skip),
            _ => None,
        }
    }
}

/// What one guard decided of a request or of its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GuardOutcome {
    /// Its id in the config (`[guards.ID]`).
    pub guard: String,
    pub stage: GuardStage,
    pub verdict: GuardVerdictKind,
    /// Why it denied, or what went wrong with it (`error`).
    #[serde(default)]
    pub reason: Option<String>,
    /// What a rewrite changed, counted by kind (`email` → 2); empty unless `rewrite`. Never
    /// the text removed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub changes: BTreeMap<String, u32>,
    /// Whether the verdict took effect: false when it came after the stream it judged had
    /// been sent (a guard with `guard_stream = "observe"`).
    pub applied: bool,
}

/// Which side of a call a guard checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardStage {
    /// The request, before the provider.
    Request,
    /// The answer, before the caller (for a stream: once it has ended).
    Response,
}

impl GuardStage {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardStage::Request => "request",
            GuardStage::Response => "response",
        }
    }
}

/// A guard's verdict, as recorded (without what it carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardVerdictKind {
    Allow,
    Deny,
    Rewrite,
    /// The guard failed (crashed, timed out, answered what cannot be used).
    Error,
}

impl GuardVerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardVerdictKind::Allow => "allow",
            GuardVerdictKind::Deny => "deny",
            GuardVerdictKind::Rewrite => "rewrite",
            GuardVerdictKind::Error => "error",
        }
    }
}

/// One try of a request at an upstream: which route and host, how it ended, how long it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Attempt {
    pub route: String,
    /// The upstream's host (`base_url`'s host, with its port when not the default).
    pub target: Option<String>,
    /// The upstream's HTTP status, when it answered (200 for the attempt that succeeded).
    pub status: Option<u16>,
    /// Why the attempt failed, when it did: `upstream` (an error status), `timeout`,
    /// `connection`, `plugin`, `no_key`, ...
    pub error: Option<String>,
    pub duration_ms: i64,
}

impl Invocation {
    /// The record of request `id`, begun at `created_at_ms` (Unix ms), before
    /// anything is known of it: an error until the request says otherwise.
    pub fn begun(id: Uuid, created_at_ms: i64) -> Invocation {
        Invocation {
            id,
            project_id: None,
            key_prefix: None,
            user_id: None,
            route: None,
            plugin: None,
            model: None,
            kind: None,
            stream: false,
            status: InvocationStatus::Error,
            http_status: 0,
            error: None,
            provider_error: None,
            usage: None,
            cost_usd: None,
            created_at_ms,
            duration_ms: 0,
            request: None,
            response: None,
            attempts: Vec::new(),
            guards: Vec::new(),
            cache: None,
            saved_cost_usd: None,
            batch_id: None,
            custom_id: None,
        }
    }

    /// The record as `GET /invocations/{id}` and `gateway invocations show` present it.
    pub fn to_json(&self) -> serde_json::Value {
        let embed = |text: &Option<String>| match text {
            None => serde_json::Value::Null,
            Some(text) => serde_json::from_str(text)
                .unwrap_or_else(|_| serde_json::Value::String(text.clone())),
        };
        serde_json::json!({
            "id": self.id.to_string(),
            "projectId": self.project_id,
            "userId": self.user_id,
            "route": self.route,
            "plugin": self.plugin,
            "model": self.model,
            "type": self.kind,
            "stream": self.stream,
            "status": self.status.as_str(),
            "httpStatus": self.http_status,
            "error": self.error,
            "providerError": self.provider_error,
            "usage": self.usage,
            "usageCost": self.cost_usd,
            "createdAt": format_time_ms(self.created_at_ms),
            "durationMs": self.duration_ms,
            "request": embed(&self.request),
            "response": embed(&self.response),
            "attempts": self.attempts.iter().map(|a| serde_json::json!({
                "route": a.route,
                "target": a.target,
                "status": a.status,
                "error": a.error,
                "durationMs": a.duration_ms,
            })).collect::<Vec<_>>(),
            "guards": self.guards.iter().map(GuardOutcome::to_json).collect::<Vec<_>>(),
            "cache": self.cache.map(CacheStatus::as_str),
            "savedCost": self.saved_cost_usd,
            "batchId": self.batch_id,
            "customId": self.custom_id,
        })
    }
}

impl GuardOutcome {
    /// The outcome as a record's `guards` shows it (`GET /invocations/{id}`, exports).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "guard": self.guard,
            "stage": self.stage.as_str(),
            "verdict": self.verdict.as_str(),
            "reason": self.reason,
            "changes": self.changes,
            "applied": self.applied,
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct InvocationFilter {
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub limit: u32,
}
