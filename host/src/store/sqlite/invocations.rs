//! Invocation records in SQLite: the writer's batches, retention's deletes, reads, spend and
//! reports.

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use super::{Sqlite, lock, opened};
use crate::limits::Subject;
use crate::store::report::{
    self, Cursor, GroupBy, Order, Page, RecordRange, SqlValue, UsageRow, UsageTally,
};
use crate::store::rows::{self as read, attempts_json, guards_json};
use crate::store::sql::{self, Dialect, invocation_columns};
use crate::store::{CacheStatus, Invocation, InvocationFilter, StoreError, UsageTotals};

const SQLITE: Dialect = Dialect::Sqlite;

/// Row by row, each skipped if its id is stored: a statement of arrays as PostgreSQL's takes
/// them needs functions SQLite lacks, and one row's insert is cheap within a transaction.
const INSERT_INVOCATION: &str = concat!(
    "INSERT OR IGNORE INTO invocations (",
    invocation_columns!("request, response", "attempts", "guards"),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
        ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32,
        ?33, ?34, ?35, ?36)"
);

/// The bundled SQLite has no DELETE ... LIMIT; the subquery walks the
/// created_at index by rowid (which PostgreSQL has not) and stops at the limit.
pub(super) const DELETE_OLD_INVOCATIONS: &str = "DELETE FROM invocations WHERE rowid IN
    (SELECT rowid FROM invocations WHERE created_at < ?1 LIMIT ?2)";

impl Sqlite {
    pub(in crate::store) fn insert_invocations(
        &self,
        batch: &[Invocation],
    ) -> Result<(), StoreError> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(INSERT_INVOCATION)?;
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
                    usage.and_then(|u| u.image_prompt_tokens),
                    usage.and_then(|u| u.audio_prompt_tokens),
                    guards_json(&inv.guards),
                    inv.cache.map(CacheStatus::as_str),
                    inv.saved_cost_usd,
                    usage.and_then(|u| u.search_units),
                    usage.and_then(|u| u.images),
                    usage.and_then(|u| u.audio_seconds),
                    usage.and_then(|u| u.characters),
                    inv.batch_id,
                    inv.custom_id,
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes at most `limit` invocation records created before `cutoff_ms`;
    /// returns how many it deleted.
    pub(in crate::store) fn delete_invocations_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        let mut pruner = lock(&self.pruner);
        let conn = opened(&mut pruner, &self.path)?;
        let mut stmt = conn.prepare_cached(DELETE_OLD_INVOCATIONS)?;
        Ok(stmt.execute(params![cutoff_ms, limit])?)
    }

    pub(in crate::store) fn invocation(&self, id: &Uuid) -> Result<Option<Invocation>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&sql::invocation(SQLITE))?;
        Ok(stmt
            .query_row([id.to_string()], |row| read::invocation(row))
            .optional()?)
    }

    pub(in crate::store) fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        let query = sql::list_invocations(SQLITE, filter);
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&query.sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(&query.values), |row| {
            read::invocation(row)
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The cost recorded for `subject` since `since_ms`.
    pub(in crate::store) fn spent_since(
        &self,
        subject: &Subject<'_>,
        since_ms: i64,
    ) -> Result<f64, StoreError> {
        let (sql, id) = match subject {
            Subject::Project(id) => (&sql::SPENT_BY_PROJECT, id),
            Subject::Key(prefix) => (&sql::SPENT_BY_KEY, prefix),
        };
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql.text(SQLITE))?;
        Ok(stmt.query_row(params![id, since_ms], |row| row.get(0))?)
    }

    pub(in crate::store) fn usage_since(
        &self,
        project_id: &str,
        since_ms: i64,
    ) -> Result<UsageTotals, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::USAGE_SINCE.text(SQLITE))?;
        Ok(stmt.query_row(params![project_id, since_ms], |row| read::usage_totals(row))?)
    }

    pub(in crate::store) fn usage(
        &self,
        range: &RecordRange,
        by: &[GroupBy],
    ) -> Result<Vec<UsageRow>, StoreError> {
        let mut conn = lock(&self.reader);
        // One read transaction: both queries see the same snapshot (WAL).
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let mut tally = UsageTally::default();
        {
            let totals = report::totals_query(range, by, SQLITE.placeholder());
            let mut stmt = tx.prepare(&totals.sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(&totals.values))?;
            while let Some(row) = rows.next()? {
                read::tally_totals(&mut tally, row, by)?;
            }
            let durations = report::durations_query(range, by, SQLITE.placeholder());
            let mut stmt = tx.prepare(&durations.sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(&durations.values))?;
            while let Some(row) = rows.next()? {
                read::tally_duration(&mut tally, row, by)?;
            }
        }
        tx.commit()?;
        Ok(tally.finish())
    }

    pub(in crate::store) fn invocations_page(
        &self,
        range: &RecordRange,
        after: Option<&Cursor>,
        order: Order,
        bodies: bool,
        limit: u32,
    ) -> Result<Page, StoreError> {
        let query = sql::invocations_page(SQLITE, range, after, order, bodies, limit);
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&query.sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(&query.values))?;
        let (mut records, mut last) = (Vec::new(), None);
        while let Some(row) = rows.next()? {
            records.push(read::invocation(row)?);
            last = Some(read::cursor(row)?);
        }
        Ok(Page::of(records, last, limit))
    }
}

impl rusqlite::ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(match self {
            SqlValue::Text(text) => text.as_str().into(),
            SqlValue::Integer(n) => (*n).into(),
            SqlValue::MaybeText(text) => return text.to_sql(),
            SqlValue::MaybeInteger(n) => return n.to_sql(),
            SqlValue::Bytes(bytes) => bytes.as_slice().into(),
        })
    }
}
