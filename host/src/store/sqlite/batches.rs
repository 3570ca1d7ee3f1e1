//! Batches in SQLite, on a connection of their own: a batch's thousands of lines go in, and
//! the runners' leases and answers are written, without holding the key lookups' connection
//! while they wait for SQLite's write lock.

use rusqlite::params;

use super::{Sqlite, lock, opened};
use crate::store::report::Query;
use crate::store::sql::{self, Dialect};
use crate::store::{NewLine, StoreError};

impl Sqlite {
    fn with_batches<T>(
        &self,
        work: impl FnOnce(&mut rusqlite::Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut slot = lock(&self.batches);
        work(opened(&mut slot, &self.path)?)
    }

    /// Runs `statements` in one transaction: the rows each changed.
    pub(in crate::store) fn batch_transaction(
        &self,
        statements: &[Query],
    ) -> Result<Vec<usize>, StoreError> {
        self.with_batches(|conn| {
            let tx = conn.transaction()?;
            let mut changed = Vec::with_capacity(statements.len());
            for query in statements {
                let mut stmt = tx.prepare_cached(&query.sql)?;
                changed.push(stmt.execute(rusqlite::params_from_iter(&query.values))?);
            }
            tx.commit()?;
            Ok(changed)
        })
    }

    /// The rows of `query`, each as `read` reads it.
    pub(in crate::store) fn batch_rows<T>(
        &self,
        query: &Query,
        read: impl Fn(&rusqlite::Row<'_>) -> Result<T, rusqlite::Error>,
    ) -> Result<Vec<T>, StoreError> {
        self.with_batches(|conn| {
            let mut stmt = conn.prepare_cached(&query.sql)?;
            let rows =
                stmt.query_map(rusqlite::params_from_iter(&query.values), |row| read(row))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    pub(in crate::store) fn put_batch_lines(
        &self,
        batch_id: &str,
        lines: &[NewLine],
    ) -> Result<(), StoreError> {
        self.with_batches(|conn| {
            let tx = conn.transaction()?;
            {
                let mut stmt = tx.prepare_cached(sql::PUT_BATCH_LINE.text(Dialect::Sqlite))?;
                for line in lines {
                    stmt.execute(params![batch_id, line.seq, line.custom_id, line.body])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }
}
