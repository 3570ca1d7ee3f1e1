//! The embedded SQLite backend.
//!
//! WAL mode lets the request path read (key lookups) while the invocation
//! writer commits batches on its own connection.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use uuid::Uuid;

use super::key_cache::KeyCache;
use super::report::{self, Cursor, GroupBy, Page, RecordRange, SqlValue, UsageRow, UsageTally};
use super::{
    Attempt, Invocation, InvocationFilter, InvocationStatus, KeyMatch, KeyRecord, KeyScope,
    KeySpec, LimitUpdate, Migrated, Project, StoreError, StoredLimits, TokenUsage, UsageTotals,
};
use crate::clock::now_ms;
use crate::limits::{LimitSet, Subject};

/// Each entry upgrades the schema by one version (`PRAGMA user_version`). Append only.
const MIGRATIONS: &[&str] = &[
    r#"
    CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE api_keys (
        key_hash BLOB PRIMARY KEY,
        prefix TEXT NOT NULL,
        project_id TEXT NOT NULL REFERENCES projects(id),
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    );
    CREATE INDEX api_keys_prefix ON api_keys(prefix);
    CREATE TABLE invocations (
        id TEXT PRIMARY KEY,
        project_id TEXT,
        user_id TEXT,
        route TEXT,
        plugin TEXT,
        model TEXT,
        type TEXT,
        stream INTEGER NOT NULL,
        status TEXT NOT NULL,
        http_status INTEGER NOT NULL,
        error TEXT,
        provider_error TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        total_tokens INTEGER,
        cached_prompt_tokens INTEGER,
        cache_creation_tokens INTEGER,
        reasoning_tokens INTEGER,
        cost_usd REAL,
        created_at INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        request TEXT,
        response TEXT
    );
    CREATE INDEX invocations_project ON invocations(project_id, created_at);
    CREATE INDEX invocations_user ON invocations(user_id, created_at);
"#,
    // Record retention finds the oldest records by age alone.
    r#"
    CREATE INDEX IF NOT EXISTS invocations_created ON invocations(created_at);
"#,
    // Limits of projects and keys, keys' scopes, and spend counted per key.
    // Limits: NULL is none. routes, models: a JSON array of strings, NULL
    // when empty. expires_at: Unix ms, NULL is never.
    r#"
    ALTER TABLE projects ADD COLUMN rpm INTEGER;
    ALTER TABLE projects ADD COLUMN tpm INTEGER;
    ALTER TABLE projects ADD COLUMN daily_budget_usd REAL;
    ALTER TABLE projects ADD COLUMN monthly_budget_usd REAL;
    ALTER TABLE api_keys ADD COLUMN rpm INTEGER;
    ALTER TABLE api_keys ADD COLUMN tpm INTEGER;
    ALTER TABLE api_keys ADD COLUMN daily_budget_usd REAL;
    ALTER TABLE api_keys ADD COLUMN monthly_budget_usd REAL;
    ALTER TABLE api_keys ADD COLUMN routes TEXT;
    ALTER TABLE api_keys ADD COLUMN models TEXT;
    ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
    ALTER TABLE invocations ADD COLUMN key_prefix TEXT;
    CREATE INDEX invocations_key ON invocations(key_prefix, created_at);
"#,
    // Each upstream attempt of a request that took more than one (retries, fallbacks):
    // a JSON array of `Attempt`s, NULL when empty.
    r#"
    ALTER TABLE invocations ADD COLUMN attempts TEXT;
"#,
];

pub(super) struct Sqlite {
    /// Key lookups, project/key administration and invocation reads.
    reader: Mutex<Connection>,
    /// Invocation batches only, so a large batch never delays a key lookup's lock.
    writer: Mutex<Connection>,
    /// Record retention's deletes, opened on first use: a batch of deletes holds
    /// neither the request path's nor the invocation writer's lock.
    pruner: Mutex<Option<Connection>>,
    path: PathBuf,
    keys: KeyCache,
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // With WAL, NORMAL loses at most the last commits on power loss, never consistency.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll back).
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sqlite {
    pub(super) fn open(path: &Path) -> Result<(Sqlite, Migrated), StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Directory(dir.display().to_string(), e))?;
        }
        let mut conn = open_connection(path)?;
        let migrated = migrate(&mut conn)?;
        let db = Sqlite {
            reader: Mutex::new(conn),
            writer: Mutex::new(open_connection(path)?),
            pruner: Mutex::new(None),
            path: path.to_owned(),
            keys: KeyCache::open(path),
        };
        Ok((db, migrated))
    }

    pub(super) fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        let project = Project {
            id: Uuid::now_v7().to_string(),
            name: name.to_owned(),
            created_at_ms: now_ms(),
            limits: LimitSet::default(),
        };
        lock(&self.reader).execute(
            "INSERT INTO projects (id, name, created_at) VALUES (?1, ?2, ?3)",
            params![project.id, project.name, project.created_at_ms],
        )?;
        Ok(project)
    }

    pub(super) fn project_count(&self) -> Result<u64, StoreError> {
        let count: i64 =
            lock(&self.reader).query_row("SELECT count(*) FROM projects", [], |row| row.get(0))?;
        Ok(count.max(0) as u64)
    }

    /// Every project, oldest first.
    pub(super) fn projects(&self) -> Result<Vec<Project>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&format!("{SELECT_PROJECT} ORDER BY created_at, id"))?;
        let rows = stmt.query_map([], project_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub(super) fn project(&self, id: &str) -> Result<Option<Project>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&format!("{SELECT_PROJECT} WHERE id = ?1"))?;
        Ok(stmt.query_row([id], project_from_row).optional()?)
    }

    pub(super) fn update_project_limits(
        &self,
        project_id: &str,
        update: &LimitUpdate,
    ) -> Result<LimitSet, StoreError> {
        let mut conn = lock(&self.reader);
        // IMMEDIATE: the write lock from the read on, so that two updates of
        // different limits cannot each undo the other's.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = tx
            .query_row(
                "SELECT rpm, tpm, daily_budget_usd, monthly_budget_usd FROM projects WHERE id = ?1",
                [project_id],
                |row| limits_at(row, 0),
            )
            .optional()?
            .ok_or_else(|| StoreError::UnknownProject(project_id.to_owned()))?;
        let limits = update.apply(current);
        write_limits(&tx, UPDATE_PROJECT_LIMITS, &project_id, &limits)?;
        tx.commit()?;
        drop(conn);
        // Project limits travel inside every cached key of the project.
        self.keys_changed();
        Ok(limits)
    }

    pub(super) fn insert_key(
        &self,
        project_id: &str,
        prefix: &str,
        hash: &[u8; 32],
        spec: &KeySpec,
    ) -> Result<(), StoreError> {
        let stored = StoredLimits::of(&spec.limits);
        let conn = lock(&self.reader);
        let exists: bool = conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM projects WHERE id = ?1)",
            [project_id],
            |row| row.get(0),
        )?;
        if !exists {
            return Err(StoreError::UnknownProject(project_id.to_owned()));
        }
        conn.execute(
            "INSERT INTO api_keys (key_hash, prefix, project_id, created_at, rpm, tpm,
                daily_budget_usd, monthly_budget_usd, routes, models, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                &hash[..],
                prefix,
                project_id,
                now_ms(),
                stored.rpm,
                stored.tpm,
                stored.daily_budget_usd,
                stored.monthly_budget_usd,
                json_list(&spec.scope.routes),
                json_list(&spec.scope.models),
                spec.scope.expires_at_ms,
            ],
        )?;
        drop(conn);
        self.keys_changed();
        Ok(())
    }

    /// Changes the limits of the one live key `which` selects; returns its
    /// prefix and its limits as they are now.
    pub(super) fn update_key_limits(
        &self,
        which: &KeyMatch,
        update: &LimitUpdate,
    ) -> Result<(String, LimitSet), StoreError> {
        let mut conn = lock(&self.reader);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let matched: Vec<(Vec<u8>, String, LimitSet)> = {
            let (condition, value) = key_condition(which, 1);
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT key_hash, prefix, rpm, tpm, daily_budget_usd, monthly_budget_usd
                 FROM api_keys WHERE {condition} AND revoked_at IS NULL"
            ))?;
            let rows = stmt.query_map([value], |row| {
                Ok((row.get(0)?, row.get(1)?, limits_at(row, 2)?))
            })?;
            rows.collect::<Result<_, _>>()?
        };
        let (hash, prefix, current) = match &matched[..] {
            [] => return Err(StoreError::UnknownKey(which.shown())),
            [one] => one.clone(),
            more => {
                return Err(StoreError::AmbiguousKey {
                    prefix: which.shown(),
                    count: more.len(),
                });
            }
        };
        let limits = update.apply(current);
        write_limits(&tx, UPDATE_KEY_LIMITS, &hash, &limits)?;
        tx.commit()?;
        drop(conn);
        self.keys_changed();
        Ok((prefix, limits))
    }

    /// After a key change commits: running gateways must not keep serving from their caches.
    fn keys_changed(&self) {
        if let Err(e) = self.keys.keys_changed() {
            tracing::error!(
                "the key change is stored, but running gateways were not told \
                 ({e}); they see it within {}s",
                super::key_cache::MAX_AGE.as_secs()
            );
        }
    }

    /// Revokes the live keys `which` selects; returns how many.
    pub(super) fn revoke(&self, which: &KeyMatch) -> Result<usize, StoreError> {
        let (condition, value) = key_condition(which, 2);
        let revoked = lock(&self.reader).execute(
            &format!(
                "UPDATE api_keys SET revoked_at = ?1 WHERE {condition} AND revoked_at IS NULL"
            ),
            params![now_ms(), value],
        )?;
        if revoked > 0 {
            self.keys_changed();
        }
        Ok(revoked)
    }

    pub(super) fn find_key(&self, hash: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        self.keys.find(hash, || {
            let conn = lock(&self.reader);
            let mut stmt = conn.prepare_cached(
                "SELECT k.project_id, k.prefix, k.rpm, k.tpm, k.daily_budget_usd,
                    k.monthly_budget_usd, p.rpm, p.tpm, p.daily_budget_usd, p.monthly_budget_usd,
                    k.routes, k.models, k.expires_at
                 FROM api_keys k JOIN projects p ON p.id = k.project_id
                 WHERE k.key_hash = ?1 AND k.revoked_at IS NULL",
            )?;
            Ok(stmt
                .query_row([&hash[..]], |row| {
                    Ok(KeyRecord {
                        project_id: row.get(0)?,
                        prefix: row.get(1)?,
                        limits: limits_at(row, 2)?,
                        project_limits: limits_at(row, 6)?,
                        scope: KeyScope {
                            routes: list_at(row, 10)?,
                            models: list_at(row, 11)?,
                            expires_at_ms: row.get(12)?,
                        },
                    })
                })
                .optional()?)
        })
    }

    /// The cost recorded for `subject` since `since_ms`.
    pub(super) fn spent_since(
        &self,
        subject: &Subject<'_>,
        since_ms: i64,
    ) -> Result<f64, StoreError> {
        let (sql, id) = match subject {
            Subject::Project(id) => (SPENT_BY_PROJECT, id),
            Subject::Key(prefix) => (SPENT_BY_KEY, prefix),
        };
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql)?;
        Ok(stmt.query_row(params![id, since_ms], |row| row.get(0))?)
    }

    pub(super) fn usage_since(
        &self,
        project_id: &str,
        since_ms: i64,
    ) -> Result<UsageTotals, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT count(*), TOTAL(prompt_tokens), TOTAL(completion_tokens), TOTAL(total_tokens),
                TOTAL(cost_usd)
             FROM invocations WHERE project_id = ?1 AND created_at >= ?2",
        )?;
        Ok(stmt.query_row(params![project_id, since_ms], |row| {
            // TOTAL: a float, 0.0 over no rows or only NULLs (SUM would be NULL).
            let tokens =
                |index| -> rusqlite::Result<u64> { Ok(row.get::<_, f64>(index)?.max(0.0) as u64) };
            Ok(UsageTotals {
                requests: row.get::<_, i64>(0)?.max(0) as u64,
                prompt_tokens: tokens(1)?,
                completion_tokens: tokens(2)?,
                total_tokens: tokens(3)?,
                cost_usd: row.get(4)?,
            })
        })?)
    }

    pub(super) fn insert_invocations(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT OR IGNORE INTO invocations (id, project_id, user_id, route, plugin, model, type, stream,
                    status, http_status, error, provider_error, prompt_tokens, completion_tokens,
                    total_tokens, cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
                    cost_usd, created_at, duration_ms, request, response, key_prefix, attempts)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                    ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)",
            )?;
            for inv in batch {
                let usage = inv.usage.as_ref();
                stmt.execute(params![
                    inv.id.to_string(),
                    inv.project_id,
                    inv.user_id,
                    inv.route,
                    inv.plugin,
                    inv.model,
                    inv.kind,
                    inv.stream,
                    inv.status.as_str(),
                    inv.http_status,
                    inv.error,
                    inv.provider_error,
                    usage.map(|u| u.prompt_tokens),
                    usage.map(|u| u.completion_tokens),
                    usage.map(|u| u.total_tokens),
                    usage.and_then(|u| u.cached_prompt_tokens),
                    usage.and_then(|u| u.cache_creation_tokens),
                    usage.and_then(|u| u.reasoning_tokens),
                    inv.cost_usd,
                    inv.created_at_ms,
                    inv.duration_ms,
                    inv.request,
                    inv.response,
                    inv.key_prefix,
                    attempts_json(&inv.attempts),
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes at most `limit` invocation records created before `cutoff_ms`;
    /// returns how many it deleted.
    pub(super) fn delete_invocations_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        let mut pruner = self.pruner.lock().unwrap_or_else(|p| p.into_inner());
        let conn = match &mut *pruner {
            Some(conn) => conn,
            empty => empty.insert(open_connection(&self.path)?),
        };
        // The bundled SQLite has no DELETE ... LIMIT; the subquery walks the
        // created_at index and stops at `limit`.
        let mut stmt = conn.prepare_cached(DELETE_OLD_INVOCATIONS)?;
        Ok(stmt.execute(params![cutoff_ms, limit])?)
    }

    pub(super) fn invocation(&self, id: &Uuid) -> Result<Option<Invocation>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&format!("{SELECT_INVOCATION} WHERE id = ?1"))?;
        Ok(stmt
            .query_row([id.to_string()], invocation_from_row)
            .optional()?)
    }

    pub(super) fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&format!(
            "{SELECT_INVOCATION} WHERE (?1 IS NULL OR project_id = ?1) AND (?2 IS NULL OR user_id = ?2)
             ORDER BY created_at DESC, id DESC LIMIT ?3"
        ))?;
        let rows = stmt.query_map(
            params![filter.project_id, filter.user_id, filter.limit],
            invocation_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub(super) fn usage(
        &self,
        range: &RecordRange,
        by: &[GroupBy],
    ) -> Result<Vec<UsageRow>, StoreError> {
        let mut conn = lock(&self.reader);
        // One read transaction: both queries see the same snapshot (WAL).
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let mut tally = UsageTally::default();
        {
            let totals = report::totals_query(range, by, placeholder);
            let mut stmt = tx.prepare(&totals.sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(&totals.values))?;
            while let Some(row) = rows.next()? {
                let first = by.len();
                let mut counts = [0i64; 8];
                for (offset, count) in counts.iter_mut().enumerate() {
                    *count = row.get(first + offset)?;
                }
                tally.totals(group_at(row, by)?, counts, row.get(first + 8)?);
            }
            let durations = report::durations_query(range, by, placeholder);
            let mut stmt = tx.prepare(&durations.sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(&durations.values))?;
            while let Some(row) = rows.next()? {
                tally.duration(group_at(row, by)?, row.get(by.len())?);
            }
        }
        tx.commit()?;
        Ok(tally.finish())
    }

    pub(super) fn invocations_page(
        &self,
        range: &RecordRange,
        after: Option<&Cursor>,
        bodies: bool,
        limit: u32,
    ) -> Result<Page, StoreError> {
        let select = if bodies {
            SELECT_INVOCATION
        } else {
            SELECT_INVOCATION_WITHOUT_BODIES
        };
        let query = report::page_query(select, range, after, limit, placeholder);
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&query.sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(&query.values))?;
        let (mut records, mut last) = (Vec::new(), None);
        while let Some(row) = rows.next()? {
            records.push(invocation_from_row(row)?);
            last = Some(Cursor::new(
                row.get(CREATED_AT_COLUMN)?,
                row.get(ID_COLUMN)?,
            ));
        }
        Ok(Page::of(records, last, limit))
    }
}

const UPDATE_PROJECT_LIMITS: &str = "UPDATE projects SET rpm = ?2, tpm = ?3,
    daily_budget_usd = ?4, monthly_budget_usd = ?5 WHERE id = ?1";
const UPDATE_KEY_LIMITS: &str = "UPDATE api_keys SET rpm = ?2, tpm = ?3,
    daily_budget_usd = ?4, monthly_budget_usd = ?5 WHERE key_hash = ?1";

/// Stores `limits` in the row `sql` (one of the two above) updates, `id` naming it.
fn write_limits(
    tx: &rusqlite::Transaction<'_>,
    sql: &str,
    id: &dyn rusqlite::ToSql,
    limits: &LimitSet,
) -> Result<(), StoreError> {
    let stored = StoredLimits::of(limits);
    let values: [&dyn rusqlite::ToSql; 5] = [
        id,
        &stored.rpm,
        &stored.tpm,
        &stored.daily_budget_usd,
        &stored.monthly_budget_usd,
    ];
    tx.execute(sql, &values[..])?;
    Ok(())
}

const DELETE_OLD_INVOCATIONS: &str = "DELETE FROM invocations WHERE rowid IN
    (SELECT rowid FROM invocations WHERE created_at < ?1 LIMIT ?2)";

/// `SELECT` of every column [`invocation_from_row`] reads, `$bodies` standing for the
/// request and response columns.
macro_rules! select_invocation {
    ($bodies:literal) => {
        concat!(
            "SELECT id, project_id, user_id, route, plugin, model, type, stream,
    status, http_status, error, provider_error, prompt_tokens, completion_tokens, total_tokens,
    cached_prompt_tokens, cache_creation_tokens, reasoning_tokens, cost_usd, created_at,
    duration_ms, ",
            $bodies,
            ", key_prefix, attempts FROM invocations"
        )
    };
}
const SELECT_INVOCATION: &str = select_invocation!("request, response");
/// An export without bodies: they are most of a record's bytes.
const SELECT_INVOCATION_WITHOUT_BODIES: &str = select_invocation!("NULL, NULL");
/// Where [`SELECT_INVOCATION`] has `id` and `created_at`: an export page's cursor.
const ID_COLUMN: usize = 0;
const CREATED_AT_COLUMN: usize = 19;

fn placeholder(n: usize) -> String {
    format!("?{n}")
}

impl rusqlite::ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(match self {
            SqlValue::Text(text) => text.as_str().into(),
            SqlValue::Integer(n) => (*n).into(),
        })
    }
}

/// A report row's group values, its first `by.len()` columns.
fn group_at(row: &Row<'_>, by: &[GroupBy]) -> rusqlite::Result<Vec<Option<String>>> {
    by.iter()
        .enumerate()
        .map(|(index, group)| match group {
            GroupBy::Day => Ok(row.get::<_, Option<i64>>(index)?.map(report::day_name)),
            _ => row.get(index),
        })
        .collect()
}

// TOTAL: a float, 0.0 when nothing (or only NULL) was recorded. Each walks
// its (subject, created_at) index.
const SPENT_BY_PROJECT: &str =
    "SELECT TOTAL(cost_usd) FROM invocations WHERE project_id = ?1 AND created_at >= ?2";
const SPENT_BY_KEY: &str =
    "SELECT TOTAL(cost_usd) FROM invocations WHERE key_prefix = ?1 AND created_at >= ?2";

const SELECT_PROJECT: &str = "SELECT id, name, created_at, rpm, tpm, daily_budget_usd,
    monthly_budget_usd FROM projects";

fn project_from_row(row: &Row<'_>) -> rusqlite::Result<Project> {
    Ok(Project {
        id: row.get(0)?,
        name: row.get(1)?,
        created_at_ms: row.get(2)?,
        limits: limits_at(row, 3)?,
    })
}

/// The four limit columns starting at `first` (rpm, tpm, daily, monthly).
/// SQLite stores whatever a hand-written UPDATE put there: a value of
/// another type is no limit, as an out-of-range one is.
fn limits_at(row: &Row<'_>, first: usize) -> rusqlite::Result<LimitSet> {
    let integer = |index: usize| -> rusqlite::Result<Option<i64>> {
        Ok(match row.get_ref(first + index)? {
            ValueRef::Integer(n) => Some(n),
            _ => None,
        })
    };
    let real = |index: usize| -> rusqlite::Result<Option<f64>> {
        Ok(match row.get_ref(first + index)? {
            ValueRef::Real(usd) => Some(usd),
            ValueRef::Integer(usd) => Some(usd as f64),
            _ => None,
        })
    };
    Ok(StoredLimits {
        rpm: integer(0)?,
        tpm: integer(1)?,
        daily_budget_usd: real(2)?,
        monthly_budget_usd: real(3)?,
    }
    .limits())
}

/// A scope list as stored: NULL when empty, else a JSON array.
fn json_list(list: &[String]) -> Option<String> {
    if list.is_empty() {
        return None;
    }
    serde_json::to_string(list).ok()
}

/// A scope list column. Unlike a limit, one that cannot be read is an error:
/// read as empty it would let the key use every route.
fn list_at(row: &Row<'_>, index: usize) -> rusqlite::Result<Vec<String>> {
    let Some(text) = row.get::<_, Option<String>>(index)? else {
        return Ok(Vec::new());
    };
    serde_json::from_str(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// The condition selecting the keys `which` names, as parameter `?{param}`,
/// and that parameter's value.
fn key_condition(which: &KeyMatch, param: usize) -> (String, rusqlite::types::Value) {
    match which {
        KeyMatch::Hash(hash) => (format!("key_hash = ?{param}"), hash.to_vec().into()),
        KeyMatch::Pattern(pattern) => (
            format!("prefix LIKE ?{param} ESCAPE '\\'"),
            pattern.clone().into(),
        ),
    }
}

fn invocation_from_row(row: &Row<'_>) -> rusqlite::Result<Invocation> {
    let id: String = row.get(0)?;
    let status: String = row.get(8)?;
    let prompt_tokens: Option<u32> = row.get(12)?;
    let usage = match prompt_tokens {
        None => None,
        Some(prompt_tokens) => Some(TokenUsage {
            prompt_tokens,
            completion_tokens: row.get::<_, Option<u32>>(13)?.unwrap_or(0),
            total_tokens: row.get::<_, Option<u32>>(14)?.unwrap_or(0),
            cached_prompt_tokens: row.get(15)?,
            cache_creation_tokens: row.get(16)?,
            reasoning_tokens: row.get(17)?,
        }),
    };
    Ok(Invocation {
        id: Uuid::parse_str(&id).unwrap_or_default(),
        project_id: row.get(1)?,
        user_id: row.get(2)?,
        route: row.get(3)?,
        plugin: row.get(4)?,
        model: row.get(5)?,
        kind: row.get(6)?,
        stream: row.get(7)?,
        status: InvocationStatus::parse(&status),
        http_status: row.get(9)?,
        error: row.get(10)?,
        provider_error: row.get(11)?,
        usage,
        cost_usd: row.get(18)?,
        created_at_ms: row.get(19)?,
        duration_ms: row.get(20)?,
        request: row.get(21)?,
        response: row.get(22)?,
        key_prefix: row.get(23)?,
        attempts: attempts_at(row, 24)?,
    })
}

/// A record's attempts as stored: NULL when there are none, else a JSON array.
fn attempts_json(attempts: &[Attempt]) -> Option<String> {
    if attempts.is_empty() {
        return None;
    }
    serde_json::to_string(attempts).ok()
}

/// The attempts column. What does not read as a list of attempts (a hand-edited value) reads
/// as none: the record is still worth showing, and nothing is decided from its attempts.
fn attempts_at(row: &Row<'_>, index: usize) -> rusqlite::Result<Vec<Attempt>> {
    Ok(match row.get_ref(index)? {
        ValueRef::Text(json) => serde_json::from_slice(json).unwrap_or_default(),
        _ => Vec::new(),
    })
}

/// Applies the migrations the database lacks, each in its own transaction
/// (which also holds off another process migrating at the same time: SQLite
/// takes the write lock at the first statement, and the version is read again
/// under it).
fn migrate(conn: &mut Connection) -> Result<Migrated, StoreError> {
    let known = MIGRATIONS.len() as i64;
    let user_version = |conn: &Connection| -> Result<i64, StoreError> {
        Ok(conn.query_row("PRAGMA user_version", [], |row| row.get(0))?)
    };
    let from = user_version(conn)?;
    let too_new = |found| StoreError::SchemaTooNew {
        backend: "SQLite",
        found,
        known,
    };
    if from > known {
        return Err(too_new(from));
    }
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version = user_version(&tx)?;
        if version > known {
            return Err(too_new(version));
        }
        let Some(migration) = MIGRATIONS.get(version.max(0) as usize) else {
            break;
        };
        tx.execute_batch(migration)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
    Ok(Migrated { from, to: known })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_hash_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = Sqlite::open(&dir.path().join("sub/g.db")).unwrap();
        let project = db.create_project("p").unwrap();
        let hash = [7u8; 32];
        db.insert_key(&project.id, "gw_abcdef123456", &hash, &KeySpec::default())
            .unwrap();
        assert_eq!(
            db.find_key(&hash).unwrap(),
            Some(KeyRecord {
                project_id: project.id.clone(),
                prefix: "gw_abcdef123456".into(),
                limits: LimitSet::default(),
                project_limits: LimitSet::default(),
                scope: KeyScope::default(),
            })
        );
        assert_eq!(db.revoke(&KeyMatch::of("gw_abcdef")).unwrap(), 1);
        assert!(db.find_key(&hash).unwrap().is_none());
        assert_eq!(db.revoke(&KeyMatch::of("gw_abcdef")).unwrap(), 0);
        assert!(matches!(
            db.insert_key("nope", "gw_x", &[1; 32], &KeySpec::default()),
            Err(StoreError::UnknownProject(_))
        ));
    }

    #[test]
    fn reopening_does_not_rerun_migrations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let (db, migrated) = Sqlite::open(&path).unwrap();
        assert_eq!(migrated.from, 0);
        db.create_project("p").unwrap();
        let (db, migrated) = Sqlite::open(&path).unwrap();
        assert_eq!(migrated.from, migrated.to);
        assert_eq!(db.project_count().unwrap(), 1);
    }

    #[test]
    fn a_database_of_the_first_schema_gains_the_created_at_index_and_keeps_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO invocations (id, stream, status, http_status, created_at, duration_ms)
                 VALUES ('old', 0, 'success', 200, 5, 1)",
                [],
            )
            .unwrap();
        }
        let (db, _) = Sqlite::open(&path).unwrap();
        let conn = lock(&db.reader);
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        let indexed: bool = conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM sqlite_master
                 WHERE type = 'index' AND name = 'invocations_created')",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert!(indexed);
        let count: i64 = conn
            .query_row("SELECT count(*) FROM invocations", [], |row| row.get(0))
            .unwrap();
        assert_eq!(count, 1);
    }

    #[test]
    fn deleting_old_records_walks_the_created_at_index() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = Sqlite::open(&dir.path().join("g.db")).unwrap();
        let conn = lock(&db.reader);
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {DELETE_OLD_INVOCATIONS}"))
            .unwrap();
        let plan: Vec<String> = stmt
            .query_map(params![0, 10], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // Without the index this is a SCAN of the whole table on every pass,
        // however few records are old.
        assert!(
            plan.iter()
                .any(|step| step.contains("USING COVERING INDEX invocations_created")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.starts_with("SCAN")),
            "{plan:?}"
        );
    }

    #[test]
    fn a_schema_newer_than_the_binary_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        drop(Sqlite::open(&path).unwrap());
        let newer = MIGRATIONS.len() as i64 + 1;
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", newer)
            .unwrap();
        let error = Sqlite::open(&path)
            .err()
            .expect("a newer schema is refused");
        assert!(
            matches!(error, StoreError::SchemaTooNew { found, .. } if found == newer),
            "{error}"
        );
        assert!(error.to_string().contains("newer than this gateway knows"));
    }

    #[test]
    fn a_record_stored_twice_is_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = Sqlite::open(&dir.path().join("g.db")).unwrap();
        let record = Invocation {
            status: InvocationStatus::Success,
            http_status: 200,
            cost_usd: Some(0.5),
            duration_ms: 1,
            response: Some("first".into()),
            ..Invocation::begun(Uuid::now_v7(), 1)
        };
        db.insert_invocations(std::slice::from_ref(&record))
            .unwrap();
        let again = Invocation {
            response: Some("second".into()),
            ..record.clone()
        };
        db.insert_invocations(&[again]).unwrap();
        assert_eq!(db.invocation(&record.id).unwrap(), Some(record));
    }

    fn open(dir: &tempfile::TempDir) -> Sqlite {
        Sqlite::open(&dir.path().join("g.db")).unwrap().0
    }

    fn limits(rpm: u32, tpm: u64, daily: f64, monthly: f64) -> LimitSet {
        LimitSet {
            rpm: Some(rpm),
            tpm: Some(tpm),
            daily_budget_usd: Some(daily),
            monthly_budget_usd: Some(monthly),
        }
    }

    #[test]
    fn a_v1_database_migrates_to_v2_and_keeps_its_keys_and_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        // Schema v1 (before limits): the first two migrations.
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
            conn.execute_batch(
                "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
                 INSERT INTO api_keys (key_hash, prefix, project_id, created_at)
                    VALUES (x'0707070707070707070707070707070707070707070707070707070707070707',
                            'gw_0123456789ab', 'p1', 6);
                 INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
                    created_at, duration_ms)
                    VALUES ('0190b3a2-0000-7000-8000-000000000001', 'p1', 0, 'success', 200, 0.5,
                            10, 1);",
            )
            .unwrap();
        }
        let (db, migrated) = Sqlite::open(&path).unwrap();
        assert_eq!(
            migrated,
            Migrated {
                from: 2,
                to: MIGRATIONS.len() as i64
            }
        );
        assert_eq!(
            db.find_key(&[7; 32]).unwrap(),
            Some(KeyRecord {
                project_id: "p1".into(),
                prefix: "gw_0123456789ab".into(),
                limits: LimitSet::default(),
                project_limits: LimitSet::default(),
                scope: KeyScope::default(),
            })
        );
        assert_eq!(
            db.projects().unwrap(),
            [Project {
                id: "p1".into(),
                name: "old".into(),
                created_at_ms: 5,
                limits: LimitSet::default(),
            }]
        );
        let id = Uuid::parse_str("0190b3a2-0000-7000-8000-000000000001").unwrap();
        let old = db.invocation(&id).unwrap().unwrap();
        assert_eq!((old.key_prefix, old.cost_usd), (None, Some(0.5)));
        assert!(old.attempts.is_empty());
        assert_eq!(db.spent_since(&Subject::Project("p1"), 0).unwrap(), 0.5);
        assert_eq!(
            db.spent_since(&Subject::Key("gw_0123456789ab"), 0).unwrap(),
            0.0
        );
    }

    #[test]
    fn project_limits_round_trip_and_partial_updates_keep_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let first = db.create_project("first").unwrap();
        let second = db.create_project("second").unwrap();
        assert_eq!(first.limits, LimitSet::default());
        assert_eq!(db.project(&first.id).unwrap(), Some(first.clone()));
        assert_eq!(db.project("nope").unwrap(), None);
        assert_eq!(db.projects().unwrap(), [first.clone(), second.clone()]);

        let set = db
            .update_project_limits(
                &first.id,
                &LimitUpdate::replace(limits(60, 1000, 1.5, 20.0)),
            )
            .unwrap();
        assert_eq!(set, limits(60, 1000, 1.5, 20.0));
        assert_eq!(db.project(&first.id).unwrap().unwrap().limits, set);
        // The other project is untouched.
        assert_eq!(
            db.project(&second.id).unwrap().unwrap().limits,
            LimitSet::default()
        );

        let partial = LimitUpdate {
            tpm: Some(5000),
            ..LimitUpdate::default()
        };
        let now = db.update_project_limits(&first.id, &partial).unwrap();
        assert_eq!(now, limits(60, 5000, 1.5, 20.0));

        // 0 clears.
        let clear = LimitUpdate {
            rpm: Some(0),
            daily_budget_usd: Some(0.0),
            ..LimitUpdate::default()
        };
        let now = db.update_project_limits(&first.id, &clear).unwrap();
        let expected = LimitSet {
            rpm: None,
            daily_budget_usd: None,
            ..limits(60, 5000, 1.5, 20.0)
        };
        assert_eq!(now, expected);
        assert_eq!(db.project(&first.id).unwrap().unwrap().limits, expected);
        let stored_rpm: Option<i64> = lock(&db.reader)
            .query_row(
                "SELECT rpm FROM projects WHERE id = ?1",
                [&first.id],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(stored_rpm, None, "a cleared limit is NULL, not 0");

        assert!(matches!(
            db.update_project_limits("nope", &partial),
            Err(StoreError::UnknownProject(id)) if id == "nope"
        ));
    }

    #[test]
    fn key_limits_round_trip_and_name_exactly_one_live_key() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let project = db.create_project("p").unwrap();
        let spec = KeySpec {
            // A zero given at creation is stored as no limit.
            limits: LimitSet {
                rpm: Some(0),
                ..limits(10, 100, 1.0, 2.0)
            },
            scope: KeyScope::default(),
        };
        db.insert_key(&project.id, "gw_shared0000001", &[1; 32], &spec)
            .unwrap();
        db.insert_key(
            &project.id,
            "gw_shared0000002",
            &[2; 32],
            &KeySpec::default(),
        )
        .unwrap();
        let expected = LimitSet {
            rpm: None,
            ..limits(10, 100, 1.0, 2.0)
        };
        assert_eq!(db.find_key(&[1; 32]).unwrap().unwrap().limits, expected);

        let update = LimitUpdate {
            rpm: Some(30),
            monthly_budget_usd: Some(0.0),
            ..LimitUpdate::default()
        };
        let (prefix, now) = db
            .update_key_limits(&KeyMatch::of("gw_shared0000001"), &update)
            .unwrap();
        assert_eq!(prefix, "gw_shared0000001");
        let expected = LimitSet {
            rpm: Some(30),
            monthly_budget_usd: None,
            ..expected
        };
        assert_eq!(now, expected);
        assert_eq!(db.find_key(&[1; 32]).unwrap().unwrap().limits, expected);
        // The other key is untouched.
        assert_eq!(
            db.find_key(&[2; 32]).unwrap().unwrap().limits,
            LimitSet::default()
        );

        // By hash (a whole key).
        let (prefix, now) = db
            .update_key_limits(&KeyMatch::Hash([2; 32]), &update)
            .unwrap();
        assert_eq!(prefix, "gw_shared0000002");
        assert_eq!(now.rpm, Some(30));

        // `_` in what is given matches itself only, and is shown as given.
        let error = db
            .update_key_limits(&KeyMatch::of("gw_shared"), &update)
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::AmbiguousKey { prefix, count: 2 } if prefix == "gw_shared"),
            "{error}"
        );
        let error = db
            .update_key_limits(&KeyMatch::of("gw%shared"), &update)
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::UnknownKey(shown) if shown == "gw%shared"),
            "{error}"
        );

        // Revoked keys are not live: the prefix is no longer ambiguous.
        assert_eq!(db.revoke(&KeyMatch::Hash([2; 32])).unwrap(), 1);
        let (prefix, _) = db
            .update_key_limits(&KeyMatch::of("gw_shared"), &update)
            .unwrap();
        assert_eq!(prefix, "gw_shared0000001");
        assert!(matches!(
            db.update_key_limits(&KeyMatch::Hash([2; 32]), &update),
            Err(StoreError::UnknownKey(_))
        ));
    }

    #[tokio::test]
    async fn errors_about_a_whole_key_name_only_its_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::Store::open_sqlite(&dir.path().join("g.db")).unwrap();
        let project = store.create_project("p").await.unwrap();
        let key = store
            .create_key(&project.id, &KeySpec::default())
            .await
            .unwrap();
        let update = LimitUpdate {
            rpm: Some(5),
            ..LimitUpdate::default()
        };
        let (prefix, now) = store.update_key_limits(&key, &update).await.unwrap();
        assert_eq!(prefix, crate::keys::key_prefix(&key));
        assert_eq!(now.rpm, Some(5));
        assert_eq!(store.revoke_keys(&key).await.unwrap(), 1);
        let error = store.update_key_limits(&key, &update).await.unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, StoreError::UnknownKey(_)), "{text}");
        assert!(!text.contains(&key), "{text}");
        assert!(text.contains(crate::keys::key_prefix(&key)), "{text}");
    }

    #[test]
    fn limit_changes_are_seen_at_once_through_the_cache_of_every_handle() {
        let dir = tempfile::tempdir().unwrap();
        let (db, other) = (open(&dir), open(&dir));
        let project = db.create_project("p").unwrap();
        db.insert_key(
            &project.id,
            "gw_0123456789ab",
            &[9; 32],
            &KeySpec::default(),
        )
        .unwrap();
        // Both cache the key (with its project's limits).
        assert_eq!(
            db.find_key(&[9; 32]).unwrap().unwrap().project_limits,
            LimitSet::default()
        );
        assert_eq!(
            other.find_key(&[9; 32]).unwrap().unwrap().project_limits,
            LimitSet::default()
        );
        // Cached: a change behind the store's back goes unseen (so what
        // follows is seen through invalidation, not a fresh read).
        lock(&db.reader)
            .execute("UPDATE projects SET rpm = 1", [])
            .unwrap();
        assert_eq!(
            db.find_key(&[9; 32]).unwrap().unwrap().project_limits.rpm,
            None
        );

        let set = LimitUpdate {
            rpm: Some(7),
            ..LimitUpdate::default()
        };
        db.update_project_limits(&project.id, &set).unwrap();
        assert_eq!(
            db.find_key(&[9; 32]).unwrap().unwrap().project_limits.rpm,
            Some(7)
        );
        assert_eq!(
            other
                .find_key(&[9; 32])
                .unwrap()
                .unwrap()
                .project_limits
                .rpm,
            Some(7)
        );

        other
            .update_key_limits(&KeyMatch::of("gw_0123"), &set)
            .unwrap();
        assert_eq!(db.find_key(&[9; 32]).unwrap().unwrap().limits.rpm, Some(7));
    }

    #[test]
    fn key_scopes_and_expiry_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let project = db.create_project("p").unwrap();
        let scope = KeyScope {
            routes: vec!["openai".into(), "odd \"route\"".into()],
            models: vec!["anthropic/claude-3-5-haiku".into()],
            expires_at_ms: Some(1_900_000_000_000),
        };
        let spec = KeySpec {
            limits: LimitSet::default(),
            scope: scope.clone(),
        };
        db.insert_key(&project.id, "gw_scoped0000001", &[1; 32], &spec)
            .unwrap();
        db.insert_key(
            &project.id,
            "gw_open000000001",
            &[2; 32],
            &KeySpec::default(),
        )
        .unwrap();
        assert_eq!(db.find_key(&[1; 32]).unwrap().unwrap().scope, scope);
        assert_eq!(
            db.find_key(&[2; 32]).unwrap().unwrap().scope,
            KeyScope::default()
        );
        let (routes, models, expires): (Option<String>, Option<String>, Option<i64>) = lock(
            &db.reader,
        )
        .query_row(
            "SELECT routes, models, expires_at FROM api_keys WHERE prefix = 'gw_open000000001'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
        assert_eq!((routes, models, expires), (None, None, None));
    }

    #[test]
    fn stored_values_that_are_no_limit_read_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let project = db.create_project("p").unwrap();
        db.insert_key(
            &project.id,
            "gw_0123456789ab",
            &[9; 32],
            &KeySpec::default(),
        )
        .unwrap();
        lock(&db.reader)
            .execute_batch(
                "UPDATE projects SET rpm = -5, tpm = 'many', daily_budget_usd = 0,
                    monthly_budget_usd = -1;
                 UPDATE api_keys SET rpm = 5000000000, tpm = 0, daily_budget_usd = 'x',
                    monthly_budget_usd = 3;",
            )
            .unwrap();
        let record = db.find_key(&[9; 32]).unwrap().unwrap();
        assert_eq!(record.project_limits, LimitSet::default());
        assert_eq!(
            record.limits,
            LimitSet {
                monthly_budget_usd: Some(3.0),
                ..LimitSet::default()
            }
        );
        assert_eq!(
            db.project(&project.id).unwrap().unwrap().limits,
            LimitSet::default()
        );
    }

    fn spend(project: &str, key: Option<&str>, cost: Option<f64>, at: i64) -> Invocation {
        Invocation {
            project_id: Some(project.into()),
            key_prefix: key.map(str::to_owned),
            status: InvocationStatus::Success,
            http_status: 200,
            usage: cost.map(|_| TokenUsage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                ..TokenUsage::default()
            }),
            cost_usd: cost,
            ..Invocation::begun(Uuid::now_v7(), at)
        }
    }

    #[test]
    fn spend_and_usage_add_up_the_period_of_one_subject() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        db.insert_invocations(&[
            spend("a", Some("gw_a1"), Some(0.25), 1_000),
            spend("a", Some("gw_a1"), Some(0.5), 2_000),
            spend("a", Some("gw_a2"), Some(0.125), 2_000),
            // Refused by a limit: recorded, no usage, no cost.
            spend("a", Some("gw_a2"), None, 3_000),
            // Before the period.
            spend("a", Some("gw_a1"), Some(8.0), 999),
            spend("b", Some("gw_b1"), Some(4.0), 2_000),
        ])
        .unwrap();
        assert_eq!(
            db.spent_since(&Subject::Project("a"), 1_000).unwrap(),
            0.875
        );
        assert_eq!(db.spent_since(&Subject::Project("a"), 0).unwrap(), 8.875);
        assert_eq!(db.spent_since(&Subject::Project("b"), 1_000).unwrap(), 4.0);
        assert_eq!(db.spent_since(&Subject::Key("gw_a1"), 1_000).unwrap(), 0.75);
        assert_eq!(
            db.spent_since(&Subject::Key("gw_a2"), 1_000).unwrap(),
            0.125
        );
        assert_eq!(db.spent_since(&Subject::Key("gw_a2"), 2_500).unwrap(), 0.0);
        assert_eq!(db.spent_since(&Subject::Key("nobody"), 0).unwrap(), 0.0);

        assert_eq!(
            db.usage_since("a", 1_000).unwrap(),
            UsageTotals {
                requests: 4,
                prompt_tokens: 30,
                completion_tokens: 15,
                total_tokens: 45,
                cost_usd: 0.875,
            }
        );
        assert_eq!(
            db.usage_since("a", 2_500).unwrap(),
            UsageTotals {
                requests: 1,
                ..UsageTotals::default()
            }
        );
        assert_eq!(db.usage_since("nobody", 0).unwrap(), UsageTotals::default());
    }

    fn query_plan(db: &Sqlite, sql: &str) -> Vec<String> {
        let conn = lock(&db.reader);
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        stmt.query_map(params!["x", 0], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn spend_queries_walk_their_subjects_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        // Budgets read this on a request's path: a SCAN would read every record.
        let plan = query_plan(&db, SPENT_BY_KEY);
        assert!(
            plan.iter()
                .any(|step| step
                    .contains("USING INDEX invocations_key (key_prefix=? AND created_at>?)")),
            "{plan:?}"
        );
        let plan = query_plan(&db, SPENT_BY_PROJECT);
        assert!(
            plan.iter().any(|step| step
                .contains("USING INDEX invocations_project (project_id=? AND created_at>?)")),
            "{plan:?}"
        );
    }

    #[test]
    fn the_key_prefix_of_a_record_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let record = spend("a", Some("gw_0123456789ab"), Some(0.5), 1);
        let bare = Invocation::begun(Uuid::now_v7(), 2);
        db.insert_invocations(&[record.clone(), bare.clone()])
            .unwrap();
        assert_eq!(db.invocation(&record.id).unwrap(), Some(record));
        assert_eq!(db.invocation(&bare.id).unwrap(), Some(bare));
    }

    fn attempts() -> Vec<Attempt> {
        vec![
            Attempt {
                route: "primary".into(),
                target: Some("a.example:8443".into()),
                status: Some(503),
                error: Some("upstream".into()),
                duration_ms: 12,
            },
            Attempt {
                route: "primary".into(),
                target: None,
                status: None,
                error: Some("connection \"refused\"\n".into()),
                duration_ms: 0,
            },
            Attempt {
                route: "fallback".into(),
                target: Some("b.example".into()),
                status: Some(200),
                error: None,
                duration_ms: i64::MAX,
            },
        ]
    }

    #[test]
    fn invocations_round_trip_every_field() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let full = Invocation {
            id: Uuid::now_v7(),
            project_id: Some("p".into()),
            key_prefix: Some("gw_0123456789ab".into()),
            user_id: Some("u".into()),
            route: Some("fallback".into()),
            plugin: Some("pl".into()),
            model: Some("m".into()),
            kind: Some("chat".into()),
            stream: true,
            status: InvocationStatus::Cancelled,
            http_status: 499,
            error: Some("e".into()),
            provider_error: Some("pe".into()),
            usage: Some(TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 2,
                total_tokens: 3,
                cached_prompt_tokens: Some(4),
                cache_creation_tokens: Some(5),
                reasoning_tokens: Some(u32::MAX),
            }),
            cost_usd: Some(0.25),
            created_at_ms: 2_000,
            duration_ms: 7,
            request: Some(r#"{"a":1}"#.into()),
            response: Some("not json".into()),
            attempts: attempts(),
        };
        let bare = Invocation {
            http_status: 400,
            ..Invocation::begun(Uuid::now_v7(), 1_000)
        };
        db.insert_invocations(&[full.clone(), bare.clone()])
            .unwrap();
        assert_eq!(db.invocation(&full.id).unwrap(), Some(full.clone()));
        assert_eq!(db.invocation(&bare.id).unwrap(), Some(bare.clone()));
        let listed = db
            .list_invocations(&InvocationFilter {
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(listed, [full.clone(), bare.clone()]);
        let conn = lock(&db.reader);
        let stored = |id: &Uuid| -> Option<String> {
            conn.query_row(
                "SELECT attempts FROM invocations WHERE id = ?1",
                [id.to_string()],
                |row| row.get(0),
            )
            .unwrap()
        };
        // No attempts: NULL, not an empty array in every record.
        assert_eq!(stored(&bare.id), None);
        let json: serde_json::Value = serde_json::from_str(&stored(&full.id).unwrap()).unwrap();
        assert_eq!(json[0]["target"], "a.example:8443");
        assert_eq!(json[2]["duration_ms"], i64::MAX);
    }

    #[test]
    fn attempts_that_do_not_read_as_attempts_read_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let record = Invocation {
            attempts: attempts(),
            ..Invocation::begun(Uuid::now_v7(), 1)
        };
        db.insert_invocations(std::slice::from_ref(&record))
            .unwrap();
        for value in [
            rusqlite::types::Value::Text("not json".into()),
            rusqlite::types::Value::Text(r#"[{"route":"r"}]"#.into()),
            rusqlite::types::Value::Text(r#"{"route":"r"}"#.into()),
            rusqlite::types::Value::Integer(42),
            rusqlite::types::Value::Blob(b"[]".to_vec()),
        ] {
            lock(&db.writer)
                .execute(
                    "UPDATE invocations SET attempts = ?1 WHERE id = ?2",
                    params![value, record.id.to_string()],
                )
                .unwrap();
            let read = db.invocation(&record.id).unwrap().unwrap();
            assert!(read.attempts.is_empty(), "{value:?}");
            assert_eq!(read.id, record.id);
        }
    }

    #[test]
    fn a_v2_database_migrates_to_v3_and_keeps_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        // Schema v2 (before attempts): the first three migrations.
        {
            let conn = Connection::open(&path).unwrap();
            for migration in &MIGRATIONS[..3] {
                conn.execute_batch(migration).unwrap();
            }
            conn.pragma_update(None, "user_version", 3).unwrap();
            conn.execute_batch(
                "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
                 INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
                    created_at, duration_ms, response, key_prefix)
                    VALUES ('0190b3a2-0000-7000-8000-000000000001', 'p1', 0, 'success', 200, 0.5,
                            10, 1, 'kept', 'gw_0123456789ab');",
            )
            .unwrap();
        }
        let (db, migrated) = Sqlite::open(&path).unwrap();
        assert_eq!(migrated, Migrated { from: 3, to: 4 });
        assert_eq!(MIGRATIONS.len(), 4);
        let id = Uuid::parse_str("0190b3a2-0000-7000-8000-000000000001").unwrap();
        let old = db.invocation(&id).unwrap().unwrap();
        assert_eq!(
            (
                old.project_id.as_deref(),
                old.key_prefix.as_deref(),
                old.response.as_deref(),
                old.cost_usd
            ),
            (Some("p1"), Some("gw_0123456789ab"), Some("kept"), Some(0.5))
        );
        assert!(old.attempts.is_empty());
        let new = Invocation {
            attempts: attempts(),
            ..Invocation::begun(Uuid::now_v7(), 20)
        };
        db.insert_invocations(std::slice::from_ref(&new)).unwrap();
        assert_eq!(db.invocation(&new.id).unwrap(), Some(new));
        assert_eq!(db.spent_since(&Subject::Project("p1"), 0).unwrap(), 0.5);
    }

    fn read_usage(db: &Sqlite, range: &RecordRange, by: &[GroupBy]) -> Vec<UsageRow> {
        db.usage(range, by).unwrap()
    }

    #[test]
    fn usage_adds_up_each_group_with_nearest_rank_percentiles() {
        use super::report::fixture::{self, DAY0, DAY1};
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        db.insert_invocations(&fixture::records()).unwrap();

        let all = read_usage(&db, &RecordRange::default(), &[]);
        assert_eq!(
            all,
            [UsageRow {
                group: vec![],
                requests: 5,
                errors: 2,
                prompt_tokens: 31,
                completion_tokens: 16,
                total_tokens: 47,
                cached_prompt_tokens: 3,
                cache_creation_tokens: 1,
                reasoning_tokens: 3,
                cost_usd: 0.75,
                // Durations 0, 50, 100, 200, 300: ranks 3 and 5.
                p50_duration_ms: Some(100),
                p95_duration_ms: Some(300),
            }]
        );

        let by_day = read_usage(&db, &RecordRange::default(), &[GroupBy::Day]);
        type Summary = (Vec<Option<String>>, u64, u64, Option<i64>, Option<i64>);
        let summary = |rows: &[UsageRow]| -> Vec<Summary> {
            rows.iter()
                .map(|r| {
                    let percentiles = (r.p50_duration_ms, r.p95_duration_ms);
                    (
                        r.group.clone(),
                        r.requests,
                        r.errors,
                        percentiles.0,
                        percentiles.1,
                    )
                })
                .collect()
        };
        let day = |d: &str| vec![Some(d.to_owned())];
        assert_eq!(
            summary(&by_day),
            [
                (day("2026-05-01"), 3, 1, Some(100), Some(300)),
                (day("2026-05-02"), 2, 1, Some(0), Some(200)),
            ]
        );

        let by_model = read_usage(&db, &RecordRange::default(), &[GroupBy::Model]);
        assert_eq!(
            summary(&by_model),
            [
                (day("m1"), 3, 1, Some(100), Some(200)),
                (day("m2"), 1, 0, Some(300), Some(300)),
                (vec![None], 1, 1, Some(0), Some(0)),
            ]
        );
        assert_eq!(by_model[0].prompt_tokens, 11);
        assert_eq!(by_model[0].cost_usd, 0.75);
        assert_eq!(by_model[1].cost_usd, 0.0, "no known cost");

        // [since, until): the first day's second record up to the last record, excluded.
        let middle = RecordRange {
            project_id: None,
            since_ms: Some(DAY0 + 2_000),
            until_ms: Some(DAY1 + 5),
        };
        assert_eq!(read_usage(&db, &middle, &[])[0].requests, 3);
        let b = RecordRange {
            project_id: Some("b".into()),
            ..RecordRange::default()
        };
        assert_eq!(
            summary(&read_usage(&db, &b, &[GroupBy::Key])),
            [(day("gw_b_key000000"), 2, 2, Some(0), Some(50))]
        );
        let none = RecordRange {
            since_ms: Some(DAY1 + 6),
            ..RecordRange::default()
        };
        let empty = read_usage(&db, &none, &[]);
        assert_eq!((empty[0].requests, empty[0].p50_duration_ms), (0, None));
        assert!(read_usage(&db, &none, &[GroupBy::Model]).is_empty());
    }

    /// Every page of an export, `limit` records each.
    fn export_all(
        db: &Sqlite,
        range: &RecordRange,
        bodies: bool,
        limit: u32,
    ) -> (Vec<Invocation>, usize) {
        let (mut records, mut pages, mut after) = (Vec::new(), 0, None);
        loop {
            let page = db
                .invocations_page(range, after.as_ref(), bodies, limit)
                .unwrap();
            pages += 1;
            records.extend(page.records);
            match page.next {
                Some(next) => after = Some(next),
                None => return (records, pages),
            }
        }
    }

    #[test]
    fn an_export_reads_each_record_once_oldest_first_across_pages_of_equal_times() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        // Four records a millisecond (ids not in insertion order within one), stored newest first.
        let mut records: Vec<Invocation> = (0..26)
            .map(|n| Invocation {
                project_id: Some(if n % 3 == 0 { "a" } else { "b" }.into()),
                request: Some("body".into()),
                ..Invocation::begun(
                    Uuid::from_u128(
                        (n as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C834),
                    ),
                    1_000 + n / 4,
                )
            })
            .collect();
        db.insert_invocations(&records.iter().rev().cloned().collect::<Vec<_>>())
            .unwrap();
        records.sort_by_key(|r| (r.created_at_ms, r.id.to_string()));

        let (read, pages) = export_all(&db, &RecordRange::default(), true, 4);
        assert_eq!(read, records);
        assert_eq!(pages, 7, "six full pages and a last one of two");
        let range = RecordRange {
            project_id: Some("b".into()),
            since_ms: Some(1_001),
            until_ms: Some(1_006),
        };
        let (read, _) = export_all(&db, &range, false, 3);
        let expected: Vec<_> = records
            .iter()
            .filter(|r| {
                r.project_id.as_deref() == Some("b") && (1_001..1_006).contains(&r.created_at_ms)
            })
            .map(|r| Invocation {
                request: None,
                ..r.clone()
            })
            .collect();
        assert_eq!(read, expected, "without bodies: no request");
        // A full last page is followed by an empty one.
        let (read, pages) = export_all(&db, &RecordRange::default(), false, 13);
        assert_eq!((read.len(), pages), (26, 3));
    }

    #[test]
    fn an_export_page_walks_the_created_at_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let after = Cursor::new(5, "x".into());
        let range = RecordRange {
            since_ms: Some(1),
            ..RecordRange::default()
        };
        let query = report::page_query(SELECT_INVOCATION, &range, Some(&after), 1000, placeholder);
        let conn = lock(&db.reader);
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", query.sql))
            .unwrap();
        let plan: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(&query.values), |row| {
                row.get::<_, String>(3)
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // Sorted only within one created_at (ties), never the whole rest of the table.
        assert!(
            plan.iter()
                .any(|step| step.contains("USING INDEX invocations_created")),
            "{plan:?}"
        );
        assert!(
            !plan
                .iter()
                .any(|step| step == "USE TEMP B-TREE FOR ORDER BY"),
            "{plan:?}"
        );
    }
}
