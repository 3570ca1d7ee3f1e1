//! The Responses API's kept answers in SQLite: read on the key lookups' connection (WAL: a
//! read never waits for a write), written on a connection of their own, deleted by retention
//! on its.

use rusqlite::{OptionalExtension, params};

use super::{Sqlite, lock, opened};
use crate::store::rows as read;
use crate::store::sql::{self, Dialect};
use crate::store::{CONVERSATION_TURNS, Conversation, ResponseHead, StoreError, StoredResponse};

const SQLITE: Dialect = Dialect::Sqlite;

impl Sqlite {
    pub(in crate::store) fn put_response(
        &self,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let mut slot = lock(&self.responses);
        let conn = opened(&mut slot, &self.path)?;
        let mut stmt = conn.prepare_cached(sql::PUT_RESPONSE.text(SQLITE))?;
        stmt.execute(params![
            response.id,
            response.project_id,
            response.invocation_id.to_string(),
            response.created_at_ms,
            response.body,
            response.context,
            response.parent,
            i64::try_from(response.conversation_bytes).unwrap_or(i64::MAX),
            response.origin.route,
            response.origin.model,
        ])?;
        Ok(())
    }

    pub(in crate::store) fn response(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::RESPONSE.text(SQLITE))?;
        Ok(stmt
            .query_row(params![id, project_id], |row| read::stored_response(row))
            .optional()?)
    }

    pub(in crate::store) fn response_head(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<ResponseHead>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::RESPONSE_HEAD.text(SQLITE))?;
        Ok(stmt
            .query_row(params![id, project_id], |row| read::response_head(row))
            .optional()?)
    }

    pub(in crate::store) fn conversation(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::CONVERSATION.text(SQLITE))?;
        let rows = stmt
            .query_map(params![id, project_id, CONVERSATION_TURNS], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(read::conversation(rows))
    }

    pub(in crate::store) fn delete_response(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let mut slot = lock(&self.responses);
        let conn = opened(&mut slot, &self.path)?;
        let mut stmt = conn.prepare_cached(sql::DELETE_RESPONSE.text(SQLITE))?;
        Ok(stmt.execute(params![id, project_id])? > 0)
    }

    /// Deletes at most `limit` kept responses created before `cutoff_ms`; returns how many.
    pub(in crate::store) fn delete_responses_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        let mut pruner = lock(&self.pruner);
        let conn = opened(&mut pruner, &self.path)?;
        let mut stmt = conn.prepare_cached(sql::DELETE_OLD_RESPONSES.text(SQLITE))?;
        Ok(stmt.execute(params![cutoff_ms, limit])?)
    }
}
