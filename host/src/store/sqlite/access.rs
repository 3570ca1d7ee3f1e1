//! Admin tokens and audit events in SQLite: statements of [`crate::store::sql`] run on the key
//! lookups' connection (as console sign-outs are: rare, small writes), old events deleted on
//! retention's.

use super::{Sqlite, lock, opened};
use crate::store::StoreError;
use crate::store::report::Query;

impl Sqlite {
    /// Runs a statement that changes rows; how many it changed.
    pub(in crate::store) fn execute(&self, query: &Query) -> Result<usize, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&query.sql)?;
        Ok(stmt.execute(rusqlite::params_from_iter(&query.values))?)
    }

    /// The rows of a query, each as `read` reads it.
    pub(in crate::store) fn rows<T>(
        &self,
        query: &Query,
        read: impl Fn(&rusqlite::Row<'_>) -> Result<T, rusqlite::Error>,
    ) -> Result<Vec<T>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&query.sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(&query.values), |row| read(row))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Runs retention's delete on its own connection.
    pub(in crate::store) fn prune(&self, query: &Query) -> Result<usize, StoreError> {
        let mut pruner = lock(&self.pruner);
        let conn = opened(&mut pruner, &self.path)?;
        let mut stmt = conn.prepare_cached(&query.sql)?;
        Ok(stmt.execute(rusqlite::params_from_iter(&query.values))?)
    }
}
