//! Rows as both backends read them: what the columns of [`super::sql`]'s statements hold, as
//! the store's types.
//!
//! Each backend's row type implements [`StoredRow`], its own reading of a column: what a
//! column holds that is not the type it should be is the backend's business (SQLite stores
//! whatever a hand-written `UPDATE` put there, PostgreSQL refuses it), and so are the two
//! columns stored differently (a key's scope lists, a record's attempts). Which column is
//! which, and what becomes of it, is written once here.

use std::sync::Arc;

use uuid::Uuid;

use super::access::{AdminToken, AuditEvent, Outcome, UserGrant};
use super::files::StoredFile;
use super::report::{self, Cursor, GroupBy, UsageTally};
use super::{
    Attempt, CacheStatus, Conversation, GuardOutcome, Invocation, InvocationStatus, KeyInfo,
    KeyRecord, KeyScope, LimitUpdate, Origin, Project, ResponseHead, StoredResponse, TokenUsage,
    UsageTotals,
};
use crate::access::{Grant, Role};
use crate::limits::LimitSet;

/// One row of a result, read column by column (`index` counts from 0).
pub(super) trait StoredRow {
    type Error;

    fn text(&self, index: usize) -> Result<String, Self::Error>;
    fn optional_text(&self, index: usize) -> Result<Option<String>, Self::Error>;
    fn integer(&self, index: usize) -> Result<i64, Self::Error>;
    fn optional_integer(&self, index: usize) -> Result<Option<i64>, Self::Error>;
    fn real(&self, index: usize) -> Result<f64, Self::Error>;
    fn optional_real(&self, index: usize) -> Result<Option<f64>, Self::Error>;
    fn flag(&self, index: usize) -> Result<bool, Self::Error>;
    fn bytes(&self, index: usize) -> Result<Vec<u8>, Self::Error>;
    /// A record's HTTP status.
    fn http_status(&self, index: usize) -> Result<u16, Self::Error>;
    /// A record's token count.
    fn token_count(&self, index: usize) -> Result<Option<u32>, Self::Error>;
    /// The four limit columns starting at `first` (rpm, tpm, daily, monthly). A value that is
    /// no valid limit (written by hand) is no limit, not an error that would refuse every
    /// request of the key: see [`StoredLimits::limits`].
    fn limits(&self, first: usize) -> Result<LimitSet, Self::Error>;
    /// A key's scope list. Unlike a limit, one that cannot be read is an error: read as empty
    /// it would let the key use every route.
    fn list(&self, index: usize) -> Result<Vec<String>, Self::Error>;
    /// The text of a record's JSON column (its attempts, its guards' outcomes); None for NULL
    /// or for what is no text (SQLite keeps whatever a hand-written `UPDATE` put).
    fn json_text(&self, index: usize) -> Result<Option<String>, Self::Error>;
}

/// A row of [`super::sql::PROJECTS`] or [`super::sql::PROJECT`]. Its guards and tools, like a
/// key's scope, are an error when they cannot be read: read as none, the project's requests
/// would go unchecked, its keys would reach every tool.
pub(super) fn project<R: StoredRow + ?Sized>(row: &R) -> Result<Project, R::Error> {
    Ok(Project {
        id: row.text(0)?,
        name: row.text(1)?,
        created_at_ms: row.integer(2)?,
        limits: row.limits(3)?,
        guards: row.list(7)?,
        tools: row.list(8)?,
    })
}

/// The role a row stores (a token's, a user's), or why it is none the gateway knows (written by
/// hand): such a row holds nothing.
fn stored_grant(role: &str, project: Option<&str>) -> Result<Grant, String> {
    Role::parse(role).and_then(|role| Grant::new(role, project))
}

/// A row of [`super::sql::ADMIN_TOKENS`] or [`super::sql::FIND_ADMIN_TOKEN`]; the inner error
/// when its role (written by hand) is none the gateway knows: such a token opens nothing.
pub(super) fn admin_token<R: StoredRow + ?Sized>(
    row: &R,
) -> Result<Result<AdminToken, String>, R::Error> {
    let (role, project) = (row.text(2)?, row.optional_text(3)?);
    let grant = match stored_grant(&role, project.as_deref()) {
        Ok(grant) => grant,
        Err(message) => return Ok(Err(message)),
    };
    Ok(Ok(AdminToken {
        prefix: row.text(0)?,
        name: row.text(1)?,
        grant,
        created_by: row.text(4)?,
        created_at_ms: row.integer(5)?,
        expires_at_ms: row.optional_integer(6)?,
        revoked_at_ms: row.optional_integer(7)?,
        last_used_at_ms: row.optional_integer(8)?,
    }))
}

/// A row of [`super::sql::USERS`]; the inner error for a role the gateway does not know.
pub(super) fn user_grant<R: StoredRow + ?Sized>(
    row: &R,
) -> Result<Result<UserGrant, String>, R::Error> {
    let (role, project) = (row.text(1)?, row.text(2)?);
    let project = Some(project.as_str()).filter(|p| !p.is_empty());
    let grant = match stored_grant(&role, project) {
        Ok(grant) => grant,
        Err(message) => return Ok(Err(message)),
    };
    Ok(Ok(UserGrant {
        email: row.text(0)?,
        grant,
        created_by: row.text(3)?,
        created_at_ms: row.integer(4)?,
    }))
}

/// A row of [`super::sql::audit_events`]. What was written by hand and cannot be read as its
/// type is shown as near as it can be (an id as nil, a JSON text as a string), never hidden.
pub(super) fn audit_event<R: StoredRow + ?Sized>(row: &R) -> Result<AuditEvent, R::Error> {
    let json = |text: Option<String>| {
        text.map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
    };
    Ok(AuditEvent {
        id: Uuid::parse_str(&row.text(0)?).unwrap_or_default(),
        at_ms: row.integer(1)?,
        actor: row.text(2)?,
        role: row.text(3)?,
        via: row.text(4)?,
        address: row.optional_text(5)?,
        action: row.text(6)?,
        endpoint: row.text(7)?,
        target: row.optional_text(8)?,
        before: json(row.optional_text(9)?),
        after: json(row.optional_text(10)?),
        outcome: Outcome::parse(&row.text(11)?).unwrap_or(Outcome::Failed),
        status: u16::try_from(row.integer(12)?).unwrap_or(0),
        request_id: row
            .optional_text(13)?
            .and_then(|id| Uuid::parse_str(&id).ok()),
    })
}

/// The row of [`super::sql::FIND_KEY`]: the key, its project's limits, guards and tools.
pub(super) fn key_record<R: StoredRow + ?Sized>(row: &R) -> Result<KeyRecord, R::Error> {
    Ok(KeyRecord {
        project_id: row.text(0)?,
        prefix: row.text(1)?,
        limits: row.limits(2)?,
        project_limits: row.limits(6)?,
        scope: KeyScope {
            routes: row.list(10)?,
            models: row.list(11)?,
            expires_at_ms: row.optional_integer(12)?,
            tools: row.list(14)?,
        },
        project_guards: Arc::from(row.list(13)?),
        project_tools: Arc::from(row.list(15)?),
    })
}

/// A row of [`super::sql::PROJECT_KEYS`].
pub(super) fn key_info<R: StoredRow + ?Sized>(row: &R) -> Result<KeyInfo, R::Error> {
    Ok(KeyInfo {
        prefix: row.text(0)?,
        created_at_ms: row.integer(1)?,
        revoked_at_ms: row.optional_integer(2)?,
        limits: row.limits(3)?,
        scope: KeyScope {
            routes: row.list(7)?,
            models: row.list(8)?,
            expires_at_ms: row.optional_integer(9)?,
            tools: row.list(10)?,
        },
    })
}

/// A row of [`super::sql::matching_keys`]: the key's hash, its prefix and its limits.
pub(super) fn matched_key<R: StoredRow + ?Sized>(
    row: &R,
) -> Result<(Vec<u8>, String, LimitSet), R::Error> {
    Ok((row.bytes(0)?, row.text(1)?, row.limits(2)?))
}

/// The row of [`super::sql::USAGE_SINCE`].
pub(super) fn usage_totals<R: StoredRow + ?Sized>(row: &R) -> Result<UsageTotals, R::Error> {
    let count = |index| -> Result<u64, R::Error> { Ok(row.integer(index)?.max(0) as u64) };
    Ok(UsageTotals {
        requests: count(0)?,
        prompt_tokens: count(1)?,
        completion_tokens: count(2)?,
        total_tokens: count(3)?,
        cost_usd: row.real(4)?,
    })
}

/// A row of [`super::sql::select_invocation`].
pub(super) fn invocation<R: StoredRow + ?Sized>(row: &R) -> Result<Invocation, R::Error> {
    let usage = match row.token_count(12)? {
        None => None,
        Some(prompt_tokens) => Some(TokenUsage {
            prompt_tokens,
            completion_tokens: row.token_count(13)?.unwrap_or(0),
            total_tokens: row.token_count(14)?.unwrap_or(0),
            cached_prompt_tokens: row.token_count(15)?,
            cache_creation_tokens: row.token_count(16)?,
            reasoning_tokens: row.token_count(17)?,
            image_prompt_tokens: row.token_count(25)?,
            audio_prompt_tokens: row.token_count(26)?,
            search_units: row.token_count(30)?,
            images: row.token_count(31)?,
            audio_seconds: row.token_count(32)?,
            characters: row.token_count(33)?,
        }),
    };
    Ok(Invocation {
        id: Uuid::parse_str(&row.text(0)?).unwrap_or_default(),
        project_id: row.optional_text(1)?,
        user_id: row.optional_text(2)?,
        route: row.optional_text(3)?,
        plugin: row.optional_text(4)?,
        model: row.optional_text(5)?,
        kind: row.optional_text(6)?,
        stream: row.flag(7)?,
        status: InvocationStatus::parse(&row.text(8)?),
        http_status: row.http_status(9)?,
        error: row.optional_text(10)?,
        provider_error: row.optional_text(11)?,
        usage,
        cost_usd: row.optional_real(18)?,
        created_at_ms: row.integer(19)?,
        duration_ms: row.integer(20)?,
        request: row.optional_text(21)?,
        response: row.optional_text(22)?,
        key_prefix: row.optional_text(23)?,
        attempts: json_list(row.json_text(24)?),
        guards: json_list(row.json_text(27)?),
        cache: row
            .optional_text(28)?
            .as_deref()
            .and_then(CacheStatus::parse),
        saved_cost_usd: row.optional_real(29)?,
        batch_id: row.optional_text(34)?,
        custom_id: row.optional_text(35)?,
    })
}

/// The row of [`super::sql::RESPONSE`]. An invocation id that is no UUID (written by hand)
/// reads as the nil one: the response is still worth giving back.
pub(super) fn stored_response<R: StoredRow + ?Sized>(row: &R) -> Result<StoredResponse, R::Error> {
    Ok(StoredResponse {
        id: row.text(0)?,
        project_id: row.text(1)?,
        invocation_id: Uuid::parse_str(&row.text(2)?).unwrap_or_default(),
        created_at_ms: row.integer(3)?,
        body: row.text(4)?,
        context: row.text(5)?,
        parent: row.optional_text(6)?,
        conversation_bytes: row.integer(7)?.max(0) as u64,
        origin: origin(row, 8)?,
    })
}

/// A row of [`super::sql::FILE`] and the listings'.
pub(super) fn stored_file<R: StoredRow + ?Sized>(row: &R) -> Result<StoredFile, R::Error> {
    Ok(StoredFile {
        id: row.text(0)?,
        project_id: row.text(1)?,
        filename: row.text(2)?,
        purpose: row.text(3)?,
        bytes: row.integer(4)?.max(0) as u64,
        created_at_ms: row.integer(5)?,
        expires_at_ms: row.optional_integer(6)?,
    })
}

/// The row of [`super::sql::RESPONSE_HEAD`].
pub(super) fn response_head<R: StoredRow + ?Sized>(row: &R) -> Result<ResponseHead, R::Error> {
    Ok(ResponseHead {
        origin: origin(row, 0)?,
        conversation_bytes: row.integer(2)?.max(0) as u64,
    })
}

/// The rows of [`super::sql::CONVERSATION`], each `(parent, context)`, the first turn first.
pub(super) fn conversation(rows: Vec<(Option<String>, String)>) -> Option<Conversation> {
    let (first_parent, _) = rows.first()?;
    if let Some(deleted) = first_parent {
        return Some(Conversation::Broken {
            deleted: deleted.clone(),
        });
    }
    Some(Conversation::Whole(
        rows.into_iter().map(|(_, context)| context).collect(),
    ))
}

/// A kept response's route and model, the columns from `at` on.
fn origin<R: StoredRow + ?Sized>(row: &R, at: usize) -> Result<Origin, R::Error> {
    Ok(Origin {
        route: row.optional_text(at)?,
        model: row.optional_text(at + 1)?,
    })
}

/// Where an export page that ends with this row of [`super::sql::select_invocation`] ends.
pub(super) fn cursor<R: StoredRow + ?Sized>(row: &R) -> Result<Cursor, R::Error> {
    Ok(Cursor::new(
        row.integer(super::sql::CREATED_AT_COLUMN)?,
        row.text(super::sql::ID_COLUMN)?,
    ))
}

/// A report row's group values, its first `by.len()` columns.
fn group<R: StoredRow + ?Sized>(row: &R, by: &[GroupBy]) -> Result<Vec<Option<String>>, R::Error> {
    by.iter()
        .enumerate()
        .map(|(index, group)| match group {
            GroupBy::Day => Ok(row.optional_integer(index)?.map(report::day_name)),
            GroupBy::Hour => Ok(row.optional_integer(index)?.map(report::hour_name)),
            _ => row.optional_text(index),
        })
        .collect()
}

/// Adds a row of [`report::totals_query`] to `tally`.
pub(super) fn tally_totals<R: StoredRow + ?Sized>(
    tally: &mut UsageTally,
    row: &R,
    by: &[GroupBy],
) -> Result<(), R::Error> {
    let first = by.len();
    let mut counts = [0i64; 8];
    for (offset, count) in counts.iter_mut().enumerate() {
        *count = row.integer(first + offset)?;
    }
    tally.totals(group(row, by)?, counts, row.real(first + 8)?);
    Ok(())
}

/// Adds a row of [`report::durations_query`] to `tally`.
pub(super) fn tally_duration<R: StoredRow + ?Sized>(
    tally: &mut UsageTally,
    row: &R,
    by: &[GroupBy],
) -> Result<(), R::Error> {
    tally.duration(group(row, by)?, row.integer(by.len())?);
    Ok(())
}

/// A record's attempts as stored: NULL when there are none, else a JSON array.
pub(super) fn attempts_json(attempts: &[Attempt]) -> Option<String> {
    if attempts.is_empty() {
        return None;
    }
    serde_json::to_string(attempts).ok()
}

/// A record's guard outcomes as stored: NULL when no guard ran, else a JSON array.
pub(super) fn guards_json(guards: &[GuardOutcome]) -> Option<String> {
    if guards.is_empty() {
        return None;
    }
    serde_json::to_string(guards).ok()
}

/// A record's attempts or guard outcomes from the JSON text of their column. What does not
/// read as such a list (a hand-edited value) reads as none: the record is still worth showing,
/// and nothing is decided from these.
fn json_list<T: serde::de::DeserializeOwned>(json: Option<String>) -> Vec<T> {
    json.and_then(|json| serde_json::from_str(&json).ok())
        .unwrap_or_default()
}

/// One subject's limits as their four columns hold them (NULL: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct StoredLimits {
    pub(super) rpm: Option<i64>,
    pub(super) tpm: Option<i64>,
    pub(super) daily_budget_usd: Option<f64>,
    pub(super) monthly_budget_usd: Option<f64>,
}

impl StoredLimits {
    /// What `limits` is stored as: zeros (and non-positive budgets) as NULL.
    pub(super) fn of(limits: &LimitSet) -> StoredLimits {
        let limits = LimitUpdate::replace(*limits).apply(LimitSet::default());
        StoredLimits {
            rpm: limits.rpm.map(i64::from),
            tpm: limits.tpm.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
            daily_budget_usd: limits.daily_budget_usd,
            monthly_budget_usd: limits.monthly_budget_usd,
        }
    }

    /// The limits the columns hold. A value that is no valid limit (written
    /// by hand: negative, zero, out of range) is no limit, not an error that
    /// would refuse every request of the key.
    pub(super) fn limits(self) -> LimitSet {
        let budget = |usd: Option<f64>| usd.filter(|usd| usd.is_finite() && *usd > 0.0);
        LimitSet {
            rpm: self
                .rpm
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0),
            tpm: self
                .tpm
                .and_then(|n| u64::try_from(n).ok())
                .filter(|n| *n > 0),
            daily_budget_usd: budget(self.daily_budget_usd),
            monthly_budget_usd: budget(self.monthly_budget_usd),
        }
    }
}
