//! Batches in PostgreSQL: a batch's lines go in a group to a transaction.

use super::Postgres;
use super::connect::connection;
use super::invocations::{sql_params, storable};
use crate::store::report::Query;
use crate::store::sql::{self, Dialect};
use crate::store::{NewLine, StoreError};

impl Postgres {
    /// Runs `statements` in one transaction: the rows each changed.
    pub(in crate::store) async fn transaction(
        &self,
        statements: Vec<Query>,
    ) -> Result<Vec<usize>, StoreError> {
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            let tx = client.transaction().await?;
            let mut changed = Vec::with_capacity(statements.len());
            for query in &statements {
                let statement = tx.prepare_cached(&query.sql).await?;
                let count = tx.execute(&statement, &sql_params(&query.values)).await?;
                changed.push(usize::try_from(count).unwrap_or(usize::MAX));
            }
            tx.commit().await?;
            Ok(changed)
        })
        .await
    }

    pub(in crate::store) async fn put_batch_lines(
        &self,
        batch_id: &str,
        lines: Vec<NewLine>,
    ) -> Result<(), StoreError> {
        let batch_id = batch_id.to_owned();
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            let tx = client.transaction().await?;
            let statement = tx
                .prepare_cached(sql::PUT_BATCH_LINE.text(Dialect::Postgres))
                .await?;
            for line in &lines {
                let (custom_id, body) = (storable(&line.custom_id), storable(&line.body));
                let seq = i64::from(line.seq);
                tx.execute(&statement, &[&batch_id, &seq, &custom_id, &body])
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
