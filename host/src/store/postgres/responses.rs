//! The Responses API's kept answers in PostgreSQL: written at once, so that a
//! `previous_response_id` reaches them from any replica.

use super::Postgres;
use super::connect::connection;
use super::invocations::storable;
use crate::store::rows as read;
use crate::store::sql::{self, Dialect};
use crate::store::{Origin, StoreError, StoredResponse};

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
        if unstorable(project_id, id) {
            return Ok(None);
        }
        let (project_id, id) = (project_id.to_owned(), id.to_owned());
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(sql::RESPONSE.text(POSTGRES)).await?;
            let row = client.query_opt(&statement, &[&id, &project_id]).await?;
            Ok(row.as_ref().map(read::stored_response).transpose()?)
        })
        .await
    }

    pub(in crate::store) async fn response_origin(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<Origin>, StoreError> {
        if unstorable(project_id, id) {
            return Ok(None);
        }
        let (project_id, id) = (project_id.to_owned(), id.to_owned());
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::RESPONSE_ORIGIN.text(POSTGRES))
                .await?;
            let row = client.query_opt(&statement, &[&id, &project_id]).await?;
            Ok(row.as_ref().map(read::response_origin).transpose()?)
        })
        .await
    }

    pub(in crate::store) async fn delete_response(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        if unstorable(project_id, id) {
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

/// Whether a name asked for holds NUL, which no stored one does (TEXT cannot): the server
/// would refuse the query rather than find nothing, and an id is the caller's to give.
fn unstorable(project_id: &str, id: &str) -> bool {
    project_id.contains('\0') || id.contains('\0')
}
