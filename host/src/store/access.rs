//! Who may manage the gateway, and what they did: personal admin tokens ([`AdminToken`]: only
//! their hash and prefix are stored, like project keys) and the audit log ([`AuditEvent`],
//! append-only: the store adds and reads events, and retention deletes old ones; both backends
//! refuse an `UPDATE` of one with a trigger).

use uuid::Uuid;

use super::error::StoreError;
use crate::access::Grant;

/// A personal admin token as the store lists it (never the token).
#[derive(Debug, Clone, PartialEq)]
pub struct AdminToken {
    /// Its first [`crate::keys::PREFIX_LEN`] characters.
    pub prefix: String,
    /// What its maker called it.
    pub name: String,
    pub grant: Grant,
    /// Who made it, as audit events name actors.
    pub created_by: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    /// When it last opened the admin API (written at most once a minute).
    pub last_used_at_ms: Option<i64>,
}

impl AdminToken {
    /// Whether it opens the admin API at `now_ms`: not revoked, not expired.
    pub fn live(&self, now_ms: i64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms.is_none_or(|at| now_ms < at)
    }
}

/// A token to make.
#[derive(Debug, Clone)]
pub struct NewAdminToken {
    pub name: String,
    pub grant: Grant,
    pub created_by: String,
    pub expires_at_ms: Option<i64>,
}

/// A role an owner gave a user of the console (`gateway users add`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserGrant {
    /// The user's email, lowercase, as their ID token's `email` claim names them.
    pub email: String,
    pub grant: Grant,
    pub created_by: String,
    pub created_at_ms: i64,
}

/// Refuses what is no email address a provider would name a user by.
pub(super) fn check_email(email: &str) -> Result<(), StoreError> {
    let valid = email.len() <= 254
        && matches!(email.split_once('@'), Some((user, host)) if !user.is_empty() && host.contains('.'))
        && !email.chars().any(|c| c.is_whitespace() || c.is_control());
    if valid {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            field: "email",
            message: format!("{email:?} is not an email address"),
        })
    }
}

/// How a change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done.
    Ok,
    /// Not allowed: no or a wrong credential, or a role that may not.
    Refused,
    /// Allowed, and not done: a wrong value, a missing target, the database.
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Outcome> {
        [Outcome::Ok, Outcome::Refused, Outcome::Failed]
            .into_iter()
            .find(|outcome| outcome.as_str() == text)
    }
}

/// One change through the admin API, the console or the CLI, or one sign-in.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// A UUIDv7: events sort by it as by time.
    pub id: Uuid,
    pub at_ms: i64,
    /// `admin_token`, `token:PREFIX`, `user:EMAIL`, `cli:OS_USER`, or `unknown` (a refused
    /// credential).
    pub actor: String,
    /// The actor's roles (`owner`, `project_admin:ID`, ...), `none` when refused unknown.
    pub role: String,
    /// `api`, `console` or `cli`.
    pub via: String,
    /// The client's address; None from the CLI.
    pub address: Option<String>,
    /// What was done: `key.create`, `project.limits.set`, `sign_in.failed`, ...
    pub action: String,
    /// The endpoint as the role table names it (`POST /admin/projects/{id}/keys`), or the
    /// CLI's verb (`gateway key create`).
    pub endpoint: String,
    /// What it was done to: `project:ID`, `key:PREFIX`, `token:PREFIX`.
    pub target: Option<String>,
    /// The target before and after (JSON, never a secret).
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
    pub outcome: Outcome,
    /// The HTTP status answered (0 from the CLI... its exit: 0 done, 1 not).
    pub status: u16,
    /// The answer's `invocationId` (the admin API's request id), when there was one.
    pub request_id: Option<Uuid>,
}

/// Which events to read, oldest first.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub actor: Option<String>,
    pub action: Option<String>,
    pub outcome: Option<Outcome>,
    /// Only events after this one (a page's last), in the order asked.
    pub after: Option<Uuid>,
    /// Newest first instead.
    pub newest_first: bool,
    pub limit: u32,
}

/// Refuses a token name that is empty, long, or holds a control character.
pub(super) fn check_token_name(name: &str) -> Result<(), StoreError> {
    if name.trim().is_empty() {
        return Err(StoreError::Invalid {
            field: "name",
            message: "give the token a name (what it is for)".into(),
        });
    }
    super::projects::check_name("name", name)
}
