//! Persistent state: projects, API keys, invocation records, and the Responses API's answers
//! kept for later requests ([`StoredResponse`]).
//!
//! [`Store`] is the one interface the rest of the gateway uses, over two
//! backends: SQLite (embedded, the default: one process, or several on one
//! machine) and PostgreSQL (several replicas). Invocation records are written
//! off the request path by [`writer`], through the local [`journal`] so that
//! no answered request goes unrecorded. Kept responses are written when asked
//! ([`Store::put_response`]), so that any replica can continue them at once;
//! [`retention`] deletes both when they are old.
//!
//! The backends run the same statements ([`sql`], with each one's placeholders) and read
//! their rows into the same types the same way ([`rows`]): what they keep apart is what their
//! dialects or drivers really do differently, each saying why. Their tests are likewise
//! written once (`tests`) and run on both.

pub mod journal;
mod key_cache;
mod postgres;
pub mod report;
pub mod retention;
mod rows;
mod sql;
mod sqlite;
pub mod writer;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use uuid::Uuid;

use crate::clock::format_time_ms;
use crate::limits::{LimitSet, Subject};
use report::{Cursor, GroupBy, Order, Page, RecordRange, UsageRow};
pub use writer::InvocationLog;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("PostgreSQL: {}", postgres_message(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// No connection could be had from the pool (the server is down, or the URL is wrong).
    #[error("PostgreSQL: {0}")]
    Pool(String),
    #[error(
        "the {backend} database's schema is at version {found}, newer than this gateway knows \
         ({known}): run a gateway at least as new as the one that migrated it"
    )]
    SchemaTooNew {
        backend: &'static str,
        found: i64,
        known: i64,
    },
    #[error("cannot create the database directory {0}: {1}")]
    Directory(String, std::io::Error),
    #[error("no project with id {0}")]
    UnknownProject(String),
    #[error("no live key starts with {0:?}")]
    UnknownKey(String),
    #[error("{count} live keys start with {prefix:?}: give more of the key")]
    AmbiguousKey { prefix: String, count: usize },
    #[error(
        "unsupported database {0:?}: give a SQLite file path, a sqlite:// URL or a postgres:// URL"
    )]
    Unsupported(String),
    /// A blocking database task panicked or was cancelled.
    #[error("database task failed: {0}")]
    Task(String),
    /// A value the store does not keep as given (a name too long or with control characters,
    /// a limit beyond its column): refused before anything is written. `field` is as the CLI
    /// and the admin API name it.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

/// tokio-postgres's own Display is only the error's kind ("db error"): the
/// server's message, or the cause of an I/O error, is what tells an operator why.
fn postgres_message(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return db.to_string();
    }
    match std::error::Error::source(error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    }
}

impl StoreError {
    /// The database could not be reached (down, unreachable, connection
    /// lost), as opposed to refusing what was asked of it.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Pool(_) => true,
            // Classes 08 (connection exception) and 57 (operator
            // intervention: the server shutting down, the session terminated)
            // are the server going away, not a refusal.
            StoreError::Postgres(error) => match error.as_db_error() {
                None => true,
                Some(db) => matches!(&db.code().code()[..2], "08" | "57"),
            },
            _ => false,
        }
    }
}

/// A live project API key as the request path sees it (only its hash is
/// stored): whose it is, what it may do, and the limits it and its project
/// are held to. Cached with the key, so a change of any of these goes through
/// the same invalidation as a revocation.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    pub project_id: String,
    /// The key's first [`crate::keys::PREFIX_LEN`] characters, as stored: how
    /// operators name it, and the subject of its own limits.
    pub prefix: String,
    /// The key's own limits.
    pub limits: LimitSet,
    /// Its project's limits (shared by all the project's keys).
    pub project_limits: LimitSet,
    pub scope: KeyScope,
    /// Its project's guards (ids of `[guards.ID]`), in the order they run after the
    /// top-level and the route's. Shared, not copied: the flow reads them on every request
    /// and a cache hit clones the record.
    pub project_guards: Arc<[String]>,
}

/// A key as operators see it: never the key itself (only its hash is stored).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyInfo {
    pub prefix: String,
    /// Unix ms.
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
    pub limits: LimitSet,
    pub scope: KeyScope,
}

/// What a key may be used for. Empty `routes` and `models`: every route and
/// model. Otherwise a request is in scope when its route is one of `routes`
/// or its `ROUTE/MODEL` one of `models`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyScope {
    /// Route ids (`[providers.ID]`) the key may use with any model.
    pub routes: Vec<String>,
    /// `ROUTE/MODEL` pairs the key may use.
    pub models: Vec<String>,
    /// Unix ms after which the key is refused (401).
    pub expires_at_ms: Option<i64>,
}

impl KeyScope {
    /// Whether a request for `model` on `route` is within the scope.
    pub fn allows(&self, route: &str, model: &str) -> bool {
        (self.routes.is_empty() && self.models.is_empty())
            || self.routes.iter().any(|r| r == route)
            || self
                .models
                .iter()
                .any(|m| m.split_once('/') == Some((route, model)))
    }

    /// Whether a key of this scope may see a kept response made with `origin`: as it may use
    /// that route and model ([`KeyScope::allows`]). One of unknown origin is only for keys
    /// of every route and model.
    pub fn allows_origin(&self, origin: &Origin) -> bool {
        match (&origin.route, &origin.model) {
            (Some(route), Some(model)) => self.allows(route, model),
            _ => self.routes.is_empty() && self.models.is_empty(),
        }
    }

    /// When the key expired, if it had by `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Option<i64> {
        self.expires_at_ms.filter(|at| now_ms >= *at)
    }
}

/// The longest name the store keeps (a project's name, a route id or `ROUTE/MODEL` of a key's
/// scope), in bytes: names are shown in tables, logs and answers.
const MAX_NAME_BYTES: usize = 256;

/// The largest tokens-per-minute limit the databases hold (a signed 64-bit column).
const MAX_TPM: u64 = i64::MAX as u64;

/// Refuses a name longer than [`MAX_NAME_BYTES`] or with a control character (NUL, which
/// PostgreSQL's text refuses; CR and LF, which would forge lines in the CLI's tables and logs).
fn check_name(field: &'static str, name: &str) -> Result<(), StoreError> {
    let refused = |message: String| Err(StoreError::Invalid { field, message });
    if name.len() > MAX_NAME_BYTES {
        return refused(format!(
            "{} bytes is longer than a name may be ({MAX_NAME_BYTES} bytes)",
            name.len()
        ));
    }
    match name.chars().find(|c| c.is_control()) {
        Some(c) => refused(format!(
            "control characters ({}) are not allowed in a name",
            c.escape_unicode()
        )),
        None => Ok(()),
    }
}

/// What a new key is created with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeySpec {
    pub limits: LimitSet,
    pub scope: KeyScope,
}

impl KeySpec {
    /// Refuses what the store would not keep as given: limits beyond their columns, names
    /// that [`check_name`] refuses.
    fn check(&self) -> Result<(), StoreError> {
        LimitUpdate::replace(self.limits).check()?;
        for route in &self.scope.routes {
            check_name("routes", route)?;
        }
        for model in &self.scope.models {
            check_name("models", model)?;
        }
        Ok(())
    }
}

/// A change of some limits: `None` leaves a limit as it is, `Some(0)` (or a
/// non-positive budget) clears it, anything else sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitUpdate {
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub daily_budget_usd: Option<f64>,
    pub monthly_budget_usd: Option<f64>,
}

impl LimitUpdate {
    /// The update that makes a subject's limits exactly `limits` (what a
    /// `PUT` of the admin API means).
    pub fn replace(limits: LimitSet) -> LimitUpdate {
        LimitUpdate {
            rpm: Some(limits.rpm.unwrap_or(0)),
            tpm: Some(limits.tpm.unwrap_or(0)),
            daily_budget_usd: Some(limits.daily_budget_usd.unwrap_or(0.0)),
            monthly_budget_usd: Some(limits.monthly_budget_usd.unwrap_or(0.0)),
        }
    }

    /// Refuses a limit the databases cannot hold as given, rather than storing another one.
    pub fn check(&self) -> Result<(), StoreError> {
        match self.tpm {
            Some(tpm) if tpm > MAX_TPM => Err(StoreError::Invalid {
                field: "tpm",
                message: format!("{tpm} is more than the largest limit stored ({MAX_TPM})"),
            }),
            _ => Ok(()),
        }
    }

    /// `limits` with this update applied; cleared limits are `None`, so a
    /// stored set never holds a zero.
    pub fn apply(&self, limits: LimitSet) -> LimitSet {
        let budget = |new: Option<f64>, old: Option<f64>| match new {
            None => old,
            Some(usd) if usd.is_finite() && usd > 0.0 => Some(usd),
            Some(_) => None,
        };
        LimitSet {
            rpm: match self.rpm {
                None => limits.rpm,
                Some(n) => (n > 0).then_some(n),
            },
            tpm: match self.tpm {
                None => limits.tpm,
                Some(n) => (n > 0).then_some(n),
            },
            daily_budget_usd: budget(self.daily_budget_usd, limits.daily_budget_usd),
            monthly_budget_usd: budget(self.monthly_budget_usd, limits.monthly_budget_usd),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub id: String,
    pub name: String,
    /// Unix ms.
    pub created_at_ms: i64,
    pub limits: LimitSet,
    /// The guards (ids of `[guards.ID]`) its requests go through after the top-level and
    /// the route's, in order.
    pub guards: Vec<String>,
}

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
/// the [`journal`] (its field names are that file's format).
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
    /// "text", "chat" or "embeddings".
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

/// A Responses API answer kept for later requests (`store: true`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    /// `resp_` and 32 hex digits.
    pub id: String,
    pub project_id: String,
    /// The invocation that answered it.
    pub invocation_id: Uuid,
    /// Unix ms, as an invocation's `created_at_ms`.
    pub created_at_ms: i64,
    /// The response object as the caller got it (JSON text), for `GET /v1/responses/{id}`.
    pub body: String,
    /// This turn of the conversation a `previous_response_id` continues: the request's own
    /// input items followed by the output items, as a JSON array text. The turns before it
    /// are its `parent`'s (and theirs), each kept once however many turns continue it.
    pub context: String,
    /// The kept response this one continued (its `previous_response_id`), if any.
    pub parent: Option<String>,
    /// The bytes of the whole conversation up to and with this turn: its `context` and its
    /// parents'. What a continuation would load, told before loading it.
    pub conversation_bytes: u64,
    /// What it was made with, which a key's scope is held to.
    pub origin: Origin,
}

/// The most turns a conversation is read back through: the parents of a response are older
/// ones, so they end; this only bounds a walk through rows written by hand.
pub const CONVERSATION_TURNS: i32 = 1_000_000;

/// What a continuation checks of the kept response it names before loading its conversation
/// ([`Store::response_head`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHead {
    pub origin: Origin,
    /// [`StoredResponse::conversation_bytes`].
    pub conversation_bytes: u64,
}

/// A kept response's conversation, read from its turn back through its parents
/// ([`Store::conversation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversation {
    /// Every turn's items (a JSON array text each), the first turn first.
    Whole(Vec<String>),
    /// A response it continues was deleted (by `DELETE /v1/responses/{id}` or retention):
    /// the turns before it are gone, so the conversation cannot be continued.
    Broken {
        /// The id of the deleted response.
        deleted: String,
    },
}

/// The route and model that served a kept response (its record's `route` and `model`): a key
/// limited to some routes or models reads, deletes and continues only the kept responses it
/// could have made. `None` for one kept before they were stored whose record was gone when
/// the schema gained them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub route: Option<String>,
    pub model: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct InvocationFilter {
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub limit: u32,
}

/// Which key(s) an operator's argument names: a whole key (by its hash), or
/// the keys whose stored prefix starts with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyMatch {
    Hash([u8; 32]),
    /// A `LIKE` pattern, its `\`, `%` and `_` escaped (with `ESCAPE '\'`).
    Pattern(String),
}

impl KeyMatch {
    pub(crate) fn of(prefix: &str) -> KeyMatch {
        if crate::keys::looks_like_whole_key(prefix) {
            return KeyMatch::Hash(crate::keys::hash_key(prefix));
        }
        // Only the first PREFIX_LEN characters are stored.
        let stored: String = prefix.chars().take(crate::keys::PREFIX_LEN).collect();
        let escaped = stored
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        KeyMatch::Pattern(format!("{escaped}%"))
    }

    /// What an error may say the operator asked for: the prefix as given
    /// (unescaped), never a whole key (a hash stands for one: the caller
    /// knows its prefix, see [`Store::update_key_limits`]).
    fn shown(&self) -> String {
        match self {
            KeyMatch::Hash(_) => String::new(),
            KeyMatch::Pattern(pattern) => {
                let mut shown = String::with_capacity(pattern.len());
                let mut chars = pattern.strip_suffix('%').unwrap_or(pattern).chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => shown.extend(chars.next()),
                        c => shown.push(c),
                    }
                }
                shown
            }
        }
    }
}

/// How a database's schema was brought up to date when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The schema version found.
    pub from: i64,
    /// The version it is at now (the newest this gateway knows).
    pub to: i64,
}

/// The gateway's state store.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    migrated: Migrated,
}

#[derive(Clone)]
enum Backend {
    Sqlite(Arc<sqlite::Sqlite>),
    Postgres(Arc<postgres::Postgres>),
}

/// Which backend a config's `database` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database<'a> {
    Sqlite(&'a Path),
    /// A `postgres://` or `postgresql://` URL, as given.
    Postgres(&'a str),
}

impl<'a> Database<'a> {
    /// A file path or `sqlite://PATH` is SQLite; `postgres://` and
    /// `postgresql://` URLs are PostgreSQL.
    pub fn parse(database: &'a str) -> Result<Database<'a>, StoreError> {
        match database.split_once("://") {
            None => Ok(Database::Sqlite(Path::new(database))),
            Some(("sqlite", path)) => Ok(Database::Sqlite(Path::new(path))),
            Some(("postgres" | "postgresql", _)) => Ok(Database::Postgres(database)),
            Some(_) => Err(StoreError::Unsupported(database.to_owned())),
        }
    }
}

impl Store {
    /// Opens the database named by the config's `database` (see
    /// [`Database::parse`]), applying the schema migrations it lacks.
    pub async fn open(database: &str) -> Result<Store, StoreError> {
        match Database::parse(database)? {
            Database::Sqlite(path) => Store::open_sqlite(path),
            Database::Postgres(url) => {
                let (db, migrated) = postgres::Postgres::open(url).await?;
                Ok(Store {
                    backend: Backend::Postgres(Arc::new(db)),
                    migrated,
                })
            }
        }
    }

    /// Opens (creating and migrating as needed) the SQLite database at `path`.
    pub fn open_sqlite(path: &Path) -> Result<Store, StoreError> {
        let (db, migrated) = sqlite::Sqlite::open(path)?;
        Ok(Store {
            backend: Backend::Sqlite(Arc::new(db)),
            migrated,
        })
    }

    /// What opening did to the schema.
    pub fn migrated(&self) -> Migrated {
        self.migrated
    }

    /// "SQLite" or "PostgreSQL", for messages.
    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backend::Sqlite(_) => "SQLite",
            Backend::Postgres(_) => "PostgreSQL",
        }
    }

    pub async fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        check_name("name", name)?;
        match &self.backend {
            Backend::Sqlite(db) => db.create_project(name),
            Backend::Postgres(db) => db.create_project(name).await,
        }
    }

    pub async fn project_count(&self) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.project_count(),
            Backend::Postgres(db) => db.project_count().await,
        }
    }

    /// Every project, oldest first.
    pub async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.projects(),
            Backend::Postgres(db) => db.projects().await,
        }
    }

    pub async fn project(&self, id: &str) -> Result<Option<Project>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.project(id),
            Backend::Postgres(db) => db.project(id).await,
        }
    }

    /// Changes a project's limits; returns them as they are now. Every
    /// replica applies them from its next request (they travel with the
    /// cached keys, invalidated as a revocation invalidates them).
    pub async fn update_project_limits(
        &self,
        project_id: &str,
        update: &LimitUpdate,
    ) -> Result<LimitSet, StoreError> {
        update.check()?;
        match &self.backend {
            Backend::Sqlite(db) => db.update_project_limits(project_id, update),
            Backend::Postgres(db) => db.update_project_limits(project_id, update).await,
        }
    }

    /// Replaces a project's guards (ids of `[guards.ID]`, in the order they run; empty: none).
    /// Whether the config has them is the caller's to check (the store has no config); names
    /// the store would not keep, and an id given twice, are refused. Like its limits, every
    /// replica applies them from its next request: they travel with the cached keys.
    pub async fn set_project_guards(
        &self,
        project_id: &str,
        guards: &[String],
    ) -> Result<(), StoreError> {
        for (n, guard) in guards.iter().enumerate() {
            check_name("guards", guard)?;
            if guard.is_empty() {
                return Err(StoreError::Invalid {
                    field: "guards",
                    message: "a guard id is empty".into(),
                });
            }
            if guards[..n].contains(guard) {
                return Err(StoreError::Invalid {
                    field: "guards",
                    message: format!("{guard:?} is named twice"),
                });
            }
        }
        match &self.backend {
            Backend::Sqlite(db) => db.set_project_guards(project_id, guards),
            Backend::Postgres(db) => db.set_project_guards(project_id, guards).await,
        }
    }

    /// The keys of `project_id`, revoked ones too, newest first.
    pub async fn project_keys(&self, project_id: &str) -> Result<Vec<KeyInfo>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.project_keys(project_id),
            Backend::Postgres(db) => db.project_keys(project_id).await,
        }
    }

    /// Creates a key for `project_id` and returns it; only its hash is stored.
    pub async fn create_key(&self, project_id: &str, spec: &KeySpec) -> Result<String, StoreError> {
        spec.check()?;
        let key = crate::keys::generate_key();
        let (prefix, hash) = (crate::keys::key_prefix(&key), crate::keys::hash_key(&key));
        match &self.backend {
            Backend::Sqlite(db) => db.insert_key(project_id, prefix, &hash, spec)?,
            Backend::Postgres(db) => db.insert_key(project_id, prefix, &hash, spec).await?,
        }
        Ok(key)
    }

    /// Changes the limits of the one live key `prefix` names (a prefix of
    /// at least 8 characters, or the whole key); returns its stored prefix
    /// and its limits as they are now.
    pub async fn update_key_limits(
        &self,
        prefix: &str,
        update: &LimitUpdate,
    ) -> Result<(String, LimitSet), StoreError> {
        update.check()?;
        let which = KeyMatch::of(prefix);
        let updated = match &self.backend {
            Backend::Sqlite(db) => db.update_key_limits(&which, update),
            Backend::Postgres(db) => db.update_key_limits(&which, update).await,
        };
        match updated {
            // A whole key is never repeated in an error (errors get logged):
            // its stored prefix names it.
            Err(StoreError::UnknownKey(_)) if matches!(which, KeyMatch::Hash(_)) => Err(
                StoreError::UnknownKey(crate::keys::key_prefix(prefix).to_owned()),
            ),
            other => other,
        }
    }

    /// Revokes the keys matching `prefix` (or the one whole key); returns how many.
    pub async fn revoke_keys(&self, prefix: &str) -> Result<usize, StoreError> {
        let which = KeyMatch::of(prefix);
        match &self.backend {
            Backend::Sqlite(db) => db.revoke(&which),
            Backend::Postgres(db) => db.revoke(&which).await,
        }
    }

    /// The cost recorded for `subject` (a project, or a key by its stored
    /// prefix) in invocations created at or after `since_ms`. Records still
    /// on their way to the database (the writer's queue, the journal) are
    /// not counted.
    pub async fn spent_since(
        &self,
        subject: &Subject<'_>,
        since_ms: i64,
    ) -> Result<f64, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.spent_since(subject, since_ms),
            Backend::Postgres(db) => db.spent_since(subject, since_ms).await,
        }
    }

    /// What `project_id`'s invocations created at or after `since_ms` add up to.
    pub async fn usage_since(
        &self,
        project_id: &str,
        since_ms: i64,
    ) -> Result<UsageTotals, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.usage_since(project_id, since_ms),
            Backend::Postgres(db) => db.usage_since(project_id, since_ms).await,
        }
    }

    /// The live (not revoked) key with this hash.
    pub async fn find_key(&self, hash: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.find_key(hash),
            Backend::Postgres(db) => db.find_key(hash).await,
        }
    }

    /// Commits `batch` in one transaction; a record whose id is already
    /// stored is skipped (the journal may hand the same record over twice).
    /// Blocking, for the writer thread.
    pub fn insert_invocations(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.insert_invocations(batch),
            Backend::Postgres(db) => db.insert_invocations(batch),
        }
    }

    /// Deletes at most `limit` invocation records created before `cutoff_ms`
    /// (Unix ms); returns how many. For [`retention`].
    pub async fn delete_invocations_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let db = db.clone();
                blocking(move || db.delete_invocations_before(cutoff_ms, limit)).await
            }
            Backend::Postgres(db) => db.delete_invocations_before(cutoff_ms, limit).await,
        }
    }

    pub async fn invocation(&self, id: &Uuid) -> Result<Option<Invocation>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.invocation(id),
            Backend::Postgres(db) => db.invocation(id).await,
        }
    }

    pub async fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.list_invocations(filter),
            Backend::Postgres(db) => db.list_invocations(filter).await,
        }
    }

    /// What the invocations of `range` add up to, one row per distinct combination of `by`'s
    /// values (ordered by them), or, without `by`, one row (over no records, of zeros). Both
    /// of its queries read one snapshot, so records landing meanwhile count in all of a row's
    /// numbers or in none.
    pub async fn usage(
        &self,
        range: &RecordRange,
        by: &[GroupBy],
    ) -> Result<Vec<UsageRow>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (db, range, by) = (db.clone(), range.clone(), by.to_vec());
                // A long range reads many rows: off the runtime's threads.
                blocking(move || db.usage(&range, &by)).await
            }
            Backend::Postgres(db) => db.usage(range, by).await,
        }
    }

    /// At most `limit` invocation records of `range`, oldest first (by `created_at`, then
    /// id), after `after` (from the first when `None`): an export reads one page at a time.
    /// Without `bodies`, the records' `request` and `response` are left out (not even read).
    pub async fn invocations_page(
        &self,
        range: &RecordRange,
        after: Option<&Cursor>,
        bodies: bool,
        limit: u32,
    ) -> Result<Page, StoreError> {
        self.page(range, after, Order::OldestFirst, bodies, limit)
            .await
    }

    /// At most `limit` records of `range` without their bodies, newest first (by
    /// `created_at`, then id), older than `before` (from the newest when `None`): the admin
    /// console's list, a page at a time.
    pub async fn recent_invocations(
        &self,
        range: &RecordRange,
        before: Option<&Cursor>,
        limit: u32,
    ) -> Result<Page, StoreError> {
        self.page(range, before, Order::NewestFirst, false, limit)
            .await
    }

    async fn page(
        &self,
        range: &RecordRange,
        after: Option<&Cursor>,
        order: Order,
        bodies: bool,
        limit: u32,
    ) -> Result<Page, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (db, range, after) = (db.clone(), range.clone(), after.cloned());
                blocking(move || db.invocations_page(&range, after.as_ref(), order, bodies, limit))
                    .await
            }
            Backend::Postgres(db) => {
                db.invocations_page(range, after, order, bodies, limit)
                    .await
            }
        }
    }
}

/// The Responses API's kept answers. Each is its project's: another project's reads as absent.
/// A write on SQLite may wait for another one's (the invocation writer's batch, a retention
/// batch, another process's): it is made on a blocking thread, not on the serving one. On PostgreSQL,
/// NUL (which its TEXT cannot hold, and JSON text never has) is kept as U+FFFD.
impl Store {
    /// Keeps `response`; an id already kept is replaced (a retried write is harmless).
    /// Taken whole: a conversation may be large, and SQLite writes it on another thread.
    pub async fn put_response(&self, response: StoredResponse) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let db = db.clone();
                blocking(move || db.put_response(&response)).await
            }
            Backend::Postgres(db) => db.put_response(&response).await,
        }
    }

    /// The kept response `id` of `project_id` (None when absent or another project's).
    pub async fn response(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<StoredResponse>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.response(project_id, id),
            Backend::Postgres(db) => db.response(project_id, id).await,
        }
    }

    /// What the kept response `id` of `project_id` was made with and how large its
    /// conversation is, if there is one: what [`Store::response`] and
    /// [`Store::conversation`] read without the texts (which may be large).
    pub async fn response_head(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<ResponseHead>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.response_head(project_id, id),
            Backend::Postgres(db) => db.response_head(project_id, id).await,
        }
    }

    /// The conversation the kept response `id` of `project_id` ends (None when absent or
    /// another project's): its turn and those of the responses it continues, in one query.
    /// A walk stops after [`CONVERSATION_TURNS`] turns.
    pub async fn conversation(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.conversation(project_id, id),
            Backend::Postgres(db) => db.conversation(project_id, id).await,
        }
    }

    /// Deletes the kept response `id` of `project_id`; whether there was one.
    pub async fn delete_response(&self, project_id: &str, id: &str) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (db, project_id, id) = (db.clone(), project_id.to_owned(), id.to_owned());
                blocking(move || db.delete_response(&project_id, &id)).await
            }
            Backend::Postgres(db) => db.delete_response(project_id, id).await,
        }
    }

    /// Deletes at most `limit` kept responses created before `cutoff_ms` (Unix ms); how many.
    /// For [`retention`].
    pub async fn delete_responses_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let db = db.clone();
                blocking(move || db.delete_responses_before(cutoff_ms, limit)).await
            }
            Backend::Postgres(db) => db.delete_responses_before(cutoff_ms, limit).await,
        }
    }
}

/// The admin console's sessions signed out before they expired (`server::session`), each by
/// the SHA-256 of its cookie. A row is kept until its cookie expires (each sign-out deletes
/// those past it), so there are never more than the sign-outs of one session lifetime. Whether
/// a session was signed out is cached with the keys, under their stamp or epoch: a sign-out
/// reaches every process and replica as a key revocation does.
impl Store {
    /// Records that the session `session` (its cookie's SHA-256) was signed out; its cookie
    /// expires at `expires_at_ms`.
    pub async fn sign_out_session(
        &self,
        session: &[u8; 32],
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.sign_out_session(session, expires_at_ms),
            Backend::Postgres(db) => db.sign_out_session(session, expires_at_ms).await,
        }
    }

    /// Whether the session `session` was signed out.
    pub async fn session_signed_out(&self, session: &[u8; 32]) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.session_signed_out(session),
            Backend::Postgres(db) => db.session_signed_out(session).await,
        }
    }
}

/// Runs `work` (SQLite's, which may wait in its busy timeout or read many rows) on a blocking
/// thread, off the serving ones.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
}

/// Budgets start from the spend the database recorded.
impl crate::limits::SpendSource for Store {
    fn spent_since<'a>(
        &'a self,
        subject: &'a Subject<'a>,
        since_ms: i64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<f64, String>> + Send + 'a>> {
        Box::pin(async move {
            Store::spent_since(self, subject, since_ms)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests;
