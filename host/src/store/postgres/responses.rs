//! The Responses API's kept answers in PostgreSQL: written at once, so that a
//! `previous_response_id` reaches them from any replica.

use tokio_postgres::Row;

use super::Postgres;
use super::connect::connection;
use super::invocations::{storable, unstorable};
use crate::store::rows as read;
use crate::store::sql::{self, Dialect};
use crate::store::{CONVERSATION_TURNS, Conversation, ResponseHead, StoreError, StoredResponse};

const POSTGRES: Dialect = Dialect::Postgres;

impl Postgres {
    /// Keeps `response`, NUL (which TEXT cannot hold, and JSON text never has) as U+FFFD.
    pub(in crate::store) async fn put_response(
        &self,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let (id, project_id, invocation_id, created_at) = (
            response.id.clone(),
            response.project_id.clone(),
            response.invocation_id.to_string(),
            response.created_at_ms,
        );
        let (body, context) = (storable(&response.body), storable(&response.context));
        let parent = response.parent.as_deref().map(storable);
        let conversation_bytes = i64::try_from(response.conversation_bytes).unwrap_or(i64::MAX);
        let (route, model) = (
            response.origin.route.as_deref().map(storable),
            response.origin.model.as_deref().map(storable),
        );
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::PUT_RESPONSE.text(POSTGRES))
                .await?;
            client
                .execute(
                    &statement,
                    &[
                        &id,
                        &project_id,
                        &invocation_id,
                        &created_at,
                        &body,
                        &context,
                        &parent,
                        &conversation_bytes,
                        &route,
                        &model,
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    pub(in crate::store) async fn response(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<StoredResponse>, StoreError> {
        self.kept_row(&sql::RESPONSE, project_id, id, read::stored_response)
            .await
    }

    pub(in crate::store) async fn response_head(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<ResponseHead>, StoreError> {
        self.kept_row(&sql::RESPONSE_HEAD, project_id, id, read::response_head)
            .await
    }

    /// The row `query` selects of the kept response `id` of `project_id`, as `read` reads it.
    async fn kept_row<T: Send + 'static>(
        &self,
        query: &'static sql::Sql,
        project_id: &str,
        id: &str,
        read: fn(&Row) -> Result<T, tokio_postgres::Error>,
    ) -> Result<Option<T>, StoreError> {
        if unstorable(&[project_id, id]) {
            return Ok(None);
        }
        let (project_id, id) = (project_id.to_owned(), id.to_owned());
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(query.text(POSTGRES)).await?;
            let row = client.query_opt(&statement, &[&id, &project_id]).await?;
            Ok(row.as_ref().map(read).transpose()?)
        })
        .await
    }

    pub(in crate::store) async fn conversation(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        if unstorable(&[project_id, id]) {
            return Ok(None);
        }
        let (project_id, id) = (project_id.to_owned(), id.to_owned());
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::CONVERSATION.text(POSTGRES))
                .await?;
            let rows = client
                .query(&statement, &[&id, &project_id, &CONVERSATION_TURNS])
                .await?;
            let rows = rows
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
            Ok(read::conversation(rows))
        })
        .await
    }

    pub(in crate::store) async fn delete_response(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        if unstorable(&[project_id, id]) {
            return Ok(false);
        }
        let (project_id, id) = (project_id.to_owned(), id.to_owned());
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::DELETE_RESPONSE.text(POSTGRES))
                .await?;
            Ok(client.execute(&statement, &[&id, &project_id]).await? > 0)
        })
        .await
    }

    /// Deletes at most `limit` kept responses created before `cutoff_ms`; returns how many.
    pub(in crate::store) async fn delete_responses_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::DELETE_OLD_RESPONSES.text(POSTGRES))
                .await?;
            let deleted = client
                .execute(&statement, &[&cutoff_ms, &i64::from(limit)])
                .await?;
            Ok(deleted as usize)
        })
        .await
    }
}
