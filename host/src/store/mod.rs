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
//! This module is the facade and the choice of backend; the types it speaks in are by domain
//! ([`projects`], [`invocations`], [`responses`], [`error`]), all re-exported here. Where a
//! call's database work runs is decided once, in [`off_thread`] (for SQLite) and in
//! the PostgreSQL backend's `run`.
//!
//! The backends run the same statements ([`sql`], with each one's placeholders) and read
//! their rows into the same types the same way ([`rows`]): what they keep apart is what their
//! dialects or drivers really do differently, each saying why. Their tests are likewise
//! written once (`tests`) and run on both.

mod access;
mod batches;
mod error;
mod files;
mod invocations;
pub mod journal;
mod key_cache;
mod postgres;
mod projects;
pub mod report;
mod responses;
pub mod retention;
mod rows;
mod sql;
mod sqlite;
pub mod writer;

use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use crate::access::Grant;
use crate::limits::{LimitSet, Subject};
pub use access::{AdminToken, AuditEvent, AuditFilter, NewAdminToken, Outcome, UserGrant};
pub use batches::{
    BatchPage, BatchStatus, Finished, LeasedLine, LineResult, MAX_BATCH_LINES, NewBatch, NewLine,
    RunningBatch, StoredBatch,
};
pub use error::StoreError;
pub use files::{CHUNK_BYTES, FileQuery, FinishedUpload, NewUpload, StoredFile};
pub use invocations::{
    Attempt, CacheStatus, GuardOutcome, GuardStage, GuardVerdictKind, Invocation, InvocationFilter,
    InvocationStatus, TokenUsage, UsageTotals,
};
pub(crate) use projects::KeyMatch;
pub use projects::{KeyInfo, KeyRecord, KeyScope, KeySpec, LimitUpdate, Project};
use report::{Cursor, GroupBy, Order, Page, Query, RecordRange, SqlValue, UsageRow};
pub use responses::{CONVERSATION_TURNS, Conversation, Origin, ResponseHead, StoredResponse};
use rows::StoredRow;
use sqlite::Sqlite;
pub use writer::InvocationLog;

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
        let (db, migrated) = Sqlite::open(path)?;
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
}

/// Projects and their keys.
impl Store {
    pub async fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        projects::check_name("name", name)?;
        match &self.backend {
            Backend::Sqlite(db) => {
                let name = name.to_owned();
                off_thread(db, move |db| db.create_project(&name)).await
            }
            Backend::Postgres(db) => db.create_project(name).await,
        }
    }

    pub async fn project_count(&self) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => off_thread(db, |db| db.project_count()).await,
            Backend::Postgres(db) => db.project_count().await,
        }
    }

    /// Every project, oldest first.
    pub async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => off_thread(db, |db| db.projects()).await,
            Backend::Postgres(db) => db.projects().await,
        }
    }

    pub async fn project(&self, id: &str) -> Result<Option<Project>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let id = id.to_owned();
                off_thread(db, move |db| db.project(&id)).await
            }
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
            Backend::Sqlite(db) => {
                let (project_id, update) = (project_id.to_owned(), *update);
                off_thread(db, move |db| db.update_project_limits(&project_id, &update)).await
            }
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
        projects::check_guards(guards)?;
        self.set_project_list(&sql::UPDATE_PROJECT_GUARDS, project_id, guards)
            .await
    }

    /// Replaces a project's `/mcp` tools (globs of `SERVER__TOOL`; empty: all of them), which
    /// its keys are held to besides their own ([`KeyRecord::allows_tool`]). A glob the store
    /// would not keep as a name (over 256 bytes, a control character), an empty one and one
    /// given twice are refused. Like its guards, they travel with the cached keys: every
    /// replica applies them from its next request.
    pub async fn set_project_tools(
        &self,
        project_id: &str,
        tools: &[String],
    ) -> Result<(), StoreError> {
        projects::check_tools(tools)?;
        self.set_project_list(&sql::UPDATE_PROJECT_TOOLS, project_id, tools)
            .await
    }

    /// Replaces the list of a project's that `statement` writes.
    async fn set_project_list(
        &self,
        statement: &'static sql::Sql,
        project_id: &str,
        list: &[String],
    ) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (project_id, list) = (project_id.to_owned(), list.to_vec());
                off_thread(db, move |db| {
                    db.set_project_list(statement, &project_id, &list)
                })
                .await
            }
            Backend::Postgres(db) => db.set_project_list(statement, project_id, list).await,
        }
    }

    /// The keys of `project_id`, revoked ones too, newest first.
    pub async fn project_keys(&self, project_id: &str) -> Result<Vec<KeyInfo>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let project_id = project_id.to_owned();
                off_thread(db, move |db| db.project_keys(&project_id)).await
            }
            Backend::Postgres(db) => db.project_keys(project_id).await,
        }
    }

    /// Creates a key for `project_id` and returns it; only its hash is stored.
    pub async fn create_key(&self, project_id: &str, spec: &KeySpec) -> Result<String, StoreError> {
        spec.check()?;
        let key = crate::keys::generate_key();
        let (prefix, hash) = (crate::keys::key_prefix(&key), crate::keys::hash_key(&key));
        match &self.backend {
            Backend::Sqlite(db) => {
                let (project_id, prefix) = (project_id.to_owned(), prefix.to_owned());
                let spec = spec.clone();
                off_thread(db, move |db| {
                    db.insert_key(&project_id, &prefix, &hash, &spec)
                })
                .await?
            }
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
        let whole_key = matches!(which, KeyMatch::Hash(_));
        let updated = match &self.backend {
            Backend::Sqlite(db) => {
                let update = *update;
                off_thread(db, move |db| db.update_key_limits(&which, &update)).await
            }
            Backend::Postgres(db) => db.update_key_limits(&which, update).await,
        };
        match updated {
            // A whole key is never repeated in an error (errors get logged):
            // its stored prefix names it.
            Err(StoreError::UnknownKey(_)) if whole_key => Err(StoreError::UnknownKey(
                crate::keys::key_prefix(prefix).to_owned(),
            )),
            other => other,
        }
    }

    /// Revokes the keys matching `prefix` (or the one whole key); returns how many.
    pub async fn revoke_keys(&self, prefix: &str) -> Result<usize, StoreError> {
        let which = KeyMatch::of(prefix);
        match &self.backend {
            Backend::Sqlite(db) => off_thread(db, move |db| db.revoke(&which)).await,
            Backend::Postgres(db) => db.revoke(&which).await,
        }
    }

    /// The live (not revoked) key with this hash: on the request path, every request. From
    /// memory when it was verified recently (the common case, answered on the caller's
    /// thread), else from the database.
    pub async fn find_key(&self, hash: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let owned = *hash;
                let read = off_thread(db, move |db| db.read_key(&owned));
                db.key_cache().find(hash, read).await
            }
            Backend::Postgres(db) => db.find_key(hash).await,
        }
    }
}

/// Invocation records and what they add up to.
impl Store {
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
            Backend::Sqlite(db) => {
                let (key, id) = match *subject {
                    Subject::Project(id) => (false, id.to_owned()),
                    Subject::Key(prefix) => (true, prefix.to_owned()),
                };
                off_thread(db, move |db| {
                    let subject = match key {
                        false => Subject::Project(&id),
                        true => Subject::Key(&id),
                    };
                    db.spent_since(&subject, since_ms)
                })
                .await
            }
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
            Backend::Sqlite(db) => {
                let project_id = project_id.to_owned();
                off_thread(db, move |db| db.usage_since(&project_id, since_ms)).await
            }
            Backend::Postgres(db) => db.usage_since(project_id, since_ms).await,
        }
    }

    /// Commits `batch` in one transaction; a record whose id is already
    /// stored is skipped (the journal may hand the same record over twice).
    /// Blocking, for the writer thread (see [`off_thread`]).
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
                off_thread(db, move |db| db.delete_invocations_before(cutoff_ms, limit)).await
            }
            Backend::Postgres(db) => db.delete_invocations_before(cutoff_ms, limit).await,
        }
    }

    pub async fn invocation(&self, id: &Uuid) -> Result<Option<Invocation>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let id = *id;
                off_thread(db, move |db| db.invocation(&id)).await
            }
            Backend::Postgres(db) => db.invocation(id).await,
        }
    }

    pub async fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let filter = filter.clone();
                off_thread(db, move |db| db.list_invocations(&filter)).await
            }
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
                let (range, by) = (range.clone(), by.to_vec());
                off_thread(db, move |db| db.usage(&range, &by)).await
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
                let (range, after) = (range.clone(), after.cloned());
                off_thread(db, move |db| {
                    db.invocations_page(&range, after.as_ref(), order, bodies, limit)
                })
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
/// On PostgreSQL, NUL (which its TEXT cannot hold, and JSON text never has) is kept as U+FFFD.
impl Store {
    /// Keeps `response`; an id already kept is replaced (a retried write is harmless).
    /// Taken whole: a conversation may be large, and SQLite writes it on another thread.
    pub async fn put_response(&self, response: StoredResponse) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => off_thread(db, move |db| db.put_response(&response)).await,
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
            Backend::Sqlite(db) => {
                let (project_id, id) = (project_id.to_owned(), id.to_owned());
                off_thread(db, move |db| db.response(&project_id, &id)).await
            }
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
            Backend::Sqlite(db) => {
                let (project_id, id) = (project_id.to_owned(), id.to_owned());
                off_thread(db, move |db| db.response_head(&project_id, &id)).await
            }
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
            Backend::Sqlite(db) => {
                let (project_id, id) = (project_id.to_owned(), id.to_owned());
                off_thread(db, move |db| db.conversation(&project_id, &id)).await
            }
            Backend::Postgres(db) => db.conversation(project_id, id).await,
        }
    }

    /// Deletes the kept response `id` of `project_id`; whether there was one.
    pub async fn delete_response(&self, project_id: &str, id: &str) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (project_id, id) = (project_id.to_owned(), id.to_owned());
                off_thread(db, move |db| db.delete_response(&project_id, &id)).await
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
                off_thread(db, move |db| db.delete_responses_before(cutoff_ms, limit)).await
            }
            Backend::Postgres(db) => db.delete_responses_before(cutoff_ms, limit).await,
        }
    }
}

/// Personal admin tokens and the audit log ([`access`]).
impl Store {
    /// Runs a statement that changes rows, on the backend; how many it changed.
    async fn execute(&self, query: Query) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => off_thread(db, move |db| db.execute(&query)).await,
            Backend::Postgres(db) => db.execute(query).await,
        }
    }

    /// The live keys `prefix` names (as [`Store::revoke_keys`] matches them), each with its
    /// project's id: whose they are, before a change to them is allowed and recorded.
    pub async fn live_keys(&self, prefix: &str) -> Result<Vec<(String, KeyInfo)>, StoreError> {
        let query = sql::live_keys(self.dialect(), &KeyMatch::of(prefix));
        match &self.backend {
            Backend::Sqlite(db) => {
                off_thread(db, move |db| {
                    db.rows(&query, |row| Ok((row.text(11)?, rows::key_info(row)?)))
                })
                .await
            }
            Backend::Postgres(db) => {
                db.rows(query, |row| Ok((row.text(11)?, rows::key_info(row)?)))
                    .await
            }
        }
    }

    /// Keeps a new token for `token` (whole: only its hash and prefix are stored).
    pub async fn create_admin_token(
        &self,
        token: &str,
        new: &NewAdminToken,
    ) -> Result<AdminToken, StoreError> {
        access::check_token_name(&new.name)?;
        let now = crate::clock::now_ms();
        let prefix = crate::keys::key_prefix(token).to_owned();
        let values = vec![
            SqlValue::Text(crate::encoding::hex(&crate::keys::hash_key(token))),
            SqlValue::Text(prefix.clone()),
            SqlValue::Text(new.name.trim().to_owned()),
            SqlValue::Text(new.grant.role().as_str().to_owned()),
            SqlValue::MaybeText(new.grant.project().map(str::to_owned)),
            SqlValue::Text(new.created_by.clone()),
            SqlValue::Integer(now),
            SqlValue::MaybeInteger(new.expires_at_ms),
        ];
        self.execute(sql::statement(
            &sql::INSERT_ADMIN_TOKEN,
            self.dialect(),
            values,
        ))
        .await?;
        Ok(AdminToken {
            prefix,
            name: new.name.trim().to_owned(),
            grant: new.grant.clone(),
            created_by: new.created_by.clone(),
            created_at_ms: now,
            expires_at_ms: new.expires_at_ms,
            revoked_at_ms: None,
            last_used_at_ms: None,
        })
    }

    /// The token `token` is (live or not: [`AdminToken::live`] tells), noting its use at
    /// `now_ms` (at most once a minute). A token whose stored role is unknown is none.
    pub async fn use_admin_token(
        &self,
        token: &str,
        now_ms: i64,
    ) -> Result<Option<AdminToken>, StoreError> {
        let hash = crate::encoding::hex(&crate::keys::hash_key(token));
        let find = sql::statement(
            &sql::FIND_ADMIN_TOKEN,
            self.dialect(),
            vec![SqlValue::Text(hash.clone())],
        );
        let found = self.admin_token_rows(find).await?.into_iter().next();
        let Some(Ok(token)) = found else {
            return Ok(None);
        };
        if token.live(now_ms) {
            let touch = sql::statement(
                &sql::TOUCH_ADMIN_TOKEN,
                self.dialect(),
                vec![
                    SqlValue::Text(hash),
                    SqlValue::Integer(now_ms),
                    SqlValue::Integer(now_ms.saturating_sub(TOKEN_USE_EVERY_MS)),
                ],
            );
            self.execute(touch).await?;
        }
        Ok(Some(token))
    }

    /// Every token, revoked and expired ones too, newest first (one whose stored role is
    /// unknown is left out, with a warning).
    pub async fn admin_tokens(&self) -> Result<Vec<AdminToken>, StoreError> {
        let all = sql::statement(&sql::ADMIN_TOKENS, self.dialect(), Vec::new());
        let rows = self.admin_token_rows(all).await?;
        Ok(readable(
            rows,
            "an admin token in the database opens nothing",
        ))
    }

    async fn admin_token_rows(
        &self,
        query: Query,
    ) -> Result<Vec<Result<AdminToken, String>>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                off_thread(db, move |db| db.rows(&query, |row| rows::admin_token(row))).await
            }
            Backend::Postgres(db) => db.rows(query, rows::admin_token).await,
        }
    }

    /// Revokes the live tokens whose prefix is `prefix`; how many.
    pub async fn revoke_admin_tokens(&self, prefix: &str) -> Result<usize, StoreError> {
        let values = vec![
            SqlValue::Text(prefix.to_owned()),
            SqlValue::Integer(crate::clock::now_ms()),
        ];
        self.execute(sql::statement(
            &sql::REVOKE_ADMIN_TOKENS,
            self.dialect(),
            values,
        ))
        .await
    }

    /// Gives `email` (lowercased) the role `grant`; false when it held it already.
    pub async fn add_user_grant(
        &self,
        email: &str,
        grant: &Grant,
        created_by: &str,
    ) -> Result<bool, StoreError> {
        let email = email.trim().to_lowercase();
        access::check_email(&email)?;
        let values = vec![
            SqlValue::Text(email),
            SqlValue::Text(grant.role().as_str().to_owned()),
            SqlValue::Text(grant.project().unwrap_or_default().to_owned()),
            SqlValue::Text(created_by.to_owned()),
            SqlValue::Integer(crate::clock::now_ms()),
        ];
        let added = self
            .execute(sql::statement(&sql::ADD_USER_GRANT, self.dialect(), values))
            .await?;
        Ok(added > 0)
    }

    /// Takes `grant` (or, for None, every role) of `email` back; how many roles.
    pub async fn remove_user_grants(
        &self,
        email: &str,
        grant: Option<&Grant>,
    ) -> Result<usize, StoreError> {
        let email = email.trim().to_lowercase();
        let query = match grant {
            None => sql::statement(
                &sql::REMOVE_USER,
                self.dialect(),
                vec![SqlValue::Text(email)],
            ),
            Some(grant) => sql::statement(
                &sql::REMOVE_USER_GRANT,
                self.dialect(),
                vec![
                    SqlValue::Text(email),
                    SqlValue::Text(grant.role().as_str().to_owned()),
                    SqlValue::Text(grant.project().unwrap_or_default().to_owned()),
                ],
            ),
        };
        self.execute(query).await
    }

    /// Every role given to users (`email` None), or those of `email`; one of an unknown role
    /// (written by hand) is left out, with a warning.
    pub async fn user_grants(&self, email: Option<&str>) -> Result<Vec<UserGrant>, StoreError> {
        let query = match email {
            None => sql::statement(&sql::USERS, self.dialect(), Vec::new()),
            Some(email) => sql::statement(
                &sql::USER_GRANTS,
                self.dialect(),
                vec![SqlValue::Text(email.trim().to_lowercase())],
            ),
        };
        let rows = match &self.backend {
            Backend::Sqlite(db) => {
                off_thread(db, move |db| db.rows(&query, |row| rows::user_grant(row))).await?
            }
            Backend::Postgres(db) => db.rows(query, rows::user_grant).await?,
        };
        Ok(readable(
            rows,
            "a user's role in the database holds nothing",
        ))
    }

    /// Appends `event` to the audit log.
    pub async fn append_audit_event(&self, event: &AuditEvent) -> Result<(), StoreError> {
        let json = |value: &Option<serde_json::Value>| value.as_ref().map(|v| v.to_string());
        let values = vec![
            SqlValue::Text(event.id.to_string()),
            SqlValue::Integer(event.at_ms),
            SqlValue::Text(event.actor.clone()),
            SqlValue::Text(event.role.clone()),
            SqlValue::Text(event.via.clone()),
            SqlValue::MaybeText(event.address.clone()),
            SqlValue::Text(event.action.clone()),
            SqlValue::Text(event.endpoint.clone()),
            SqlValue::MaybeText(event.target.clone()),
            SqlValue::MaybeText(json(&event.before)),
            SqlValue::MaybeText(json(&event.after)),
            SqlValue::Text(event.outcome.as_str().to_owned()),
            SqlValue::Integer(i64::from(event.status)),
            SqlValue::MaybeText(event.request_id.map(|id| id.to_string())),
        ];
        self.execute(sql::statement(
            &sql::INSERT_AUDIT_EVENT,
            self.dialect(),
            values,
        ))
        .await?;
        Ok(())
    }

    /// The audit events `filter` selects, in its order, at most its limit.
    pub async fn audit_events(&self, filter: &AuditFilter) -> Result<Vec<AuditEvent>, StoreError> {
        let query = sql::audit_events(self.dialect(), filter);
        match &self.backend {
            Backend::Sqlite(db) => {
                off_thread(db, move |db| db.rows(&query, |row| rows::audit_event(row))).await
            }
            Backend::Postgres(db) => db.rows(query, rows::audit_event).await,
        }
    }

    /// Deletes at most `limit` audit events from before `cutoff_ms`; how many. For
    /// [`retention`], the only deletion of events there is.
    pub async fn delete_audit_events_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        let values = vec![
            SqlValue::Integer(cutoff_ms),
            SqlValue::Integer(i64::from(limit)),
        ];
        let query = sql::statement(&sql::DELETE_OLD_AUDIT_EVENTS, self.dialect(), values);
        match &self.backend {
            Backend::Sqlite(db) => off_thread(db, move |db| db.prune(&query)).await,
            Backend::Postgres(db) => db.execute(query).await,
        }
    }

    fn dialect(&self) -> sql::Dialect {
        match &self.backend {
            Backend::Sqlite(_) => sql::Dialect::Sqlite,
            Backend::Postgres(_) => sql::Dialect::Postgres,
        }
    }
}

/// The rows whose stored role the gateway knows; each other one is left out with a warning
/// that says `why` and its role.
fn readable<T>(rows: Vec<Result<T, String>>, why: &str) -> Vec<T> {
    rows.into_iter()
        .filter_map(|row| {
            row.inspect_err(|message| tracing::warn!("{why}: {message}"))
                .ok()
        })
        .collect()
}

/// A token used again within this is not written again ([`Store::use_admin_token`]).
const TOKEN_USE_EVERY_MS: i64 = 60_000;

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
            Backend::Sqlite(db) => {
                let session = *session;
                off_thread(db, move |db| db.sign_out_session(&session, expires_at_ms)).await
            }
            Backend::Postgres(db) => db.sign_out_session(session, expires_at_ms).await,
        }
    }

    /// Whether the session `session` was signed out: on every request of the admin console,
    /// from memory as a key is (see [`Store::find_key`]).
    pub async fn session_signed_out(&self, session: &[u8; 32]) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let owned = *session;
                let read = off_thread(db, move |db| db.read_signed_out(&owned));
                let signed_out = db.session_cache().find(session, read).await?;
                Ok(signed_out.unwrap_or(false))
            }
            Backend::Postgres(db) => db.session_signed_out(session).await,
        }
    }
}

/// Where SQLite's work runs, one rule for every call of the facade: what is answered from
/// memory (a key or console session verified recently, [`key_cache`]) on the caller's thread;
/// everything that reaches the database here, on tokio's blocking pool.
///
/// Why off the caller's thread: a serving thread runs one single-threaded runtime for all its
/// connections (BENCHMARKS.md), so a call that blocks it stalls every request on it, and any
/// SQLite call may block: on the disk, on its connection's mutex (which an admin change holds
/// through its `IMMEDIATE` transaction), or in the busy timeout (up to 5 s) behind another
/// connection's or process's write (the writer's batch, retention's deletes). Why not the
/// cache hits too: a hop wakes a pool thread and then the caller's, two context switches
/// (BENCHMARKS.md: they are what a request's time goes to at low load), measured at 20-50 µs
/// on a busy 2-core VM (issue 47), where a hit costs a `pread` of the stamp file and a map
/// lookup, well under 1 µs. So the per-request calls stay on the serving thread: the
/// key (a hit; its limits and guards come with it), and its record (queued for the
/// [`writer`]'s own thread, the one caller of SQLite outside this rule:
/// [`Store::insert_invocations`]). What pays the hop reaches the disk anyway: a key or
/// session not in memory, a budget's first spend of its period, kept responses, admin and
/// report calls. PostgreSQL's queries likewise never run on the caller's thread: on the
/// backend's own runtime (`postgres`).
async fn off_thread<T: Send + 'static>(
    db: &Arc<Sqlite>,
    work: impl FnOnce(&Sqlite) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || work(&db))
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
