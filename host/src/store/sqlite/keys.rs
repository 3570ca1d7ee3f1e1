//! Projects and keys in SQLite.

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use super::rows::json_list;
use super::{Sqlite, lock};
use crate::clock::now_ms;
use crate::limits::LimitSet;
use crate::store::rows::{self as read, StoredLimits};
use crate::store::sql::{self, Dialect, KeyValue, Sql};
use crate::store::{KeyInfo, KeyMatch, KeyRecord, KeySpec, LimitUpdate, Project, StoreError};

const SQLITE: Dialect = Dialect::Sqlite;

impl Sqlite {
    pub(in crate::store) fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        let project = Project {
            id: Uuid::now_v7().to_string(),
            name: name.to_owned(),
            created_at_ms: now_ms(),
            limits: LimitSet::default(),
            guards: Vec::new(),
            tools: Vec::new(),
        };
        lock(&self.reader).execute(
            sql::INSERT_PROJECT.text(SQLITE),
            params![project.id, project.name, project.created_at_ms],
        )?;
        Ok(project)
    }

    pub(in crate::store) fn project_count(&self) -> Result<u64, StoreError> {
        let count: i64 =
            lock(&self.reader).query_row(sql::COUNT_PROJECTS.text(SQLITE), [], |row| row.get(0))?;
        Ok(count.max(0) as u64)
    }

    /// Every project, oldest first.
    pub(in crate::store) fn projects(&self) -> Result<Vec<Project>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::PROJECTS.text(SQLITE))?;
        let rows = stmt.query_map([], |row| read::project(row))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub(in crate::store) fn project_keys(&self, id: &str) -> Result<Vec<KeyInfo>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::PROJECT_KEYS.text(SQLITE))?;
        let rows = stmt.query_map([id], |row| read::key_info(row))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub(in crate::store) fn project(&self, id: &str) -> Result<Option<Project>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::PROJECT.text(SQLITE))?;
        Ok(stmt.query_row([id], |row| read::project(row)).optional()?)
    }

    pub(in crate::store) fn update_project_limits(
        &self,
        project_id: &str,
        update: &LimitUpdate,
    ) -> Result<LimitSet, StoreError> {
        let mut conn = lock(&self.reader);
        // IMMEDIATE: the write lock from the read on, so that two updates of
        // different limits cannot each undo the other's.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = tx
            .query_row(sql::PROJECT_LIMITS.text(SQLITE), [project_id], |row| {
                read::StoredRow::limits(row, 0)
            })
            .optional()?
            .ok_or_else(|| StoreError::UnknownProject(project_id.to_owned()))?;
        let limits = update.apply(current);
        write_limits(&tx, &sql::UPDATE_PROJECT_LIMITS, &project_id, &limits)?;
        tx.commit()?;
        drop(conn);
        // Project limits travel inside every cached key of the project.
        self.keys_changed();
        Ok(limits)
    }

    /// Replaces one of a project's lists: `statement` is [`sql::UPDATE_PROJECT_GUARDS`] or
    /// [`sql::UPDATE_PROJECT_TOOLS`].
    pub(in crate::store) fn set_project_list(
        &self,
        statement: &'static Sql,
        project_id: &str,
        list: &[String],
    ) -> Result<(), StoreError> {
        let updated = lock(&self.reader)
            .execute(statement.text(SQLITE), params![project_id, json_list(list)])?;
        if updated == 0 {
            return Err(StoreError::UnknownProject(project_id.to_owned()));
        }
        // A project's guards and tools travel inside every cached key of the project.
        self.keys_changed();
        Ok(())
    }

    pub(in crate::store) fn insert_key(
        &self,
        project_id: &str,
        prefix: &str,
        hash: &[u8; 32],
        spec: &KeySpec,
    ) -> Result<(), StoreError> {
        let stored = StoredLimits::of(&spec.limits);
        let conn = lock(&self.reader);
        // Foreign keys are on, but their error does not say which: asked first.
        let exists: bool = conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM projects WHERE id = ?1)",
            [project_id],
            |row| row.get(0),
        )?;
        if !exists {
            return Err(StoreError::UnknownProject(project_id.to_owned()));
        }
        conn.execute(
            sql::INSERT_KEY.text(SQLITE),
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
                json_list(&spec.scope.tools),
            ],
        )?;
        drop(conn);
        self.keys_changed();
        Ok(())
    }

    /// Changes the limits of the one live key `which` selects; returns its
    /// prefix and its limits as they are now.
    pub(in crate::store) fn update_key_limits(
        &self,
        which: &KeyMatch,
        update: &LimitUpdate,
    ) -> Result<(String, LimitSet), StoreError> {
        let mut conn = lock(&self.reader);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let matched: Vec<(Vec<u8>, String, LimitSet)> = {
            let (query, value) = sql::matching_keys(SQLITE, which);
            let mut stmt = tx.prepare_cached(&query)?;
            let rows = stmt.query_map([value], |row| read::matched_key(row))?;
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
        write_limits(&tx, &sql::UPDATE_KEY_LIMITS, &hash, &limits)?;
        tx.commit()?;
        drop(conn);
        self.keys_changed();
        Ok((prefix, limits))
    }

    /// Revokes the live keys `which` selects; returns how many.
    pub(in crate::store) fn revoke(&self, which: &KeyMatch) -> Result<usize, StoreError> {
        let (query, value) = sql::revoke_keys(SQLITE, which);
        let revoked = lock(&self.reader).execute(&query, params![now_ms(), value])?;
        if revoked > 0 {
            self.keys_changed();
        }
        Ok(revoked)
    }

    /// The live key with this hash, from the database (the facade asks its cache first).
    pub(in crate::store) fn read_key(
        &self,
        hash: &[u8; 32],
    ) -> Result<Option<KeyRecord>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::FIND_KEY.text(SQLITE))?;
        Ok(stmt
            .query_row([&hash[..]], |row| read::key_record(row))
            .optional()?)
    }
}

/// Stores `limits` in the row `sql` (one of the two limit updates) updates, `id` naming it.
fn write_limits(
    tx: &rusqlite::Transaction<'_>,
    sql: &'static Sql,
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
    tx.execute(sql.text(SQLITE), &values[..])?;
    Ok(())
}

impl rusqlite::ToSql for KeyValue {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(match self {
            KeyValue::Hash(hash) => hash.as_slice().into(),
            KeyValue::Pattern(pattern) => pattern.as_str().into(),
        })
    }
}
