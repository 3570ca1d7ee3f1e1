//! Admin tokens and audit events in PostgreSQL: statements of [`crate::store::sql`] with their
//! values, each on a connection of the pool.

use tokio_postgres::Row;

use super::Postgres;
use super::connect::connection;
use super::invocations::sql_params;
use crate::store::StoreError;
use crate::store::report::Query;

impl Postgres {
    /// Runs a statement that changes rows; how many it changed.
    pub(in crate::store) async fn execute(&self, query: Query) -> Result<usize, StoreError> {
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(&query.sql).await?;
            let changed = client
                .execute(&statement, &sql_params(&query.values))
                .await?;
            Ok(usize::try_from(changed).unwrap_or(usize::MAX))
        })
        .await
    }

    /// The rows of a query, each as `read` reads it.
    pub(in crate::store) async fn rows<T: Send + 'static>(
        &self,
        query: Query,
        read: impl Fn(&Row) -> Result<T, tokio_postgres::Error> + Send + 'static,
    ) -> Result<Vec<T>, StoreError> {
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(&query.sql).await?;
            let rows = client.query(&statement, &sql_params(&query.values)).await?;
            Ok(rows.iter().map(&read).collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }
}
