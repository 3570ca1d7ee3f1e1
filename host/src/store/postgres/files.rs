//! Files in PostgreSQL: each chunk its own statement, so that a slow upload holds no
//! transaction open; an upload's reservation taken under its project's row lock.

use bytes::Bytes;

use super::Postgres;
use super::connect::connection;
use super::invocations::{storable, unstorable};
use crate::store::rows as read;
use crate::store::sql::{self, Dialect};
use crate::store::{FileQuery, NewUpload, StoreError, StoredFile};

const POSTGRES: Dialect = Dialect::Postgres;

impl Postgres {
    /// Reserves the upload's bytes. Under READ COMMITTED, two uploads' inserts at once would
    /// each sum the project's files without the other's row and both pass the quota: the
    /// project's row, locked first, makes them take turns.
    pub(in crate::store) async fn begin_upload(
        &self,
        upload: &NewUpload,
        quota: i64,
    ) -> Result<bool, StoreError> {
        let (id, project_id, created_at) = (
            upload.id.clone(),
            upload.project_id.clone(),
            upload.created_at_ms,
        );
        let reserved = i64::try_from(upload.reserved).unwrap_or(i64::MAX);
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            let tx = client.transaction().await?;
            tx.query_opt(
                "SELECT 1 FROM projects WHERE id = $1 FOR UPDATE",
                &[&project_id],
            )
            .await?;
            let statement = tx.prepare_cached(sql::BEGIN_UPLOAD.text(POSTGRES)).await?;
            let inserted = tx
                .execute(
                    &statement,
                    &[&id, &project_id, &reserved, &created_at, &quota],
                )
                .await?;
            tx.commit().await?;
            Ok(inserted == 1)
        })
        .await
    }

    pub(in crate::store) async fn put_file_chunk(
        &self,
        file_id: &str,
        seq: u32,
        data: Bytes,
    ) -> Result<(), StoreError> {
        let file_id = file_id.to_owned();
        let seq = i32::try_from(seq).unwrap_or(i32::MAX);
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::PUT_FILE_CHUNK.text(POSTGRES))
                .await?;
            client
                .execute(&statement, &[&file_id, &seq, &data.as_ref()])
                .await?;
            Ok(())
        })
        .await
    }

    pub(in crate::store) async fn finish_upload(
        &self,
        file: &StoredFile,
    ) -> Result<bool, StoreError> {
        let (id, project_id) = (file.id.clone(), file.project_id.clone());
        let (filename, purpose) = (storable(&file.filename), storable(&file.purpose));
        let bytes = i64::try_from(file.bytes).unwrap_or(i64::MAX);
        let expires_at = file.expires_at_ms;
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::FINISH_UPLOAD.text(POSTGRES))
                .await?;
            let updated = client
                .execute(
                    &statement,
                    &[&id, &project_id, &filename, &purpose, &bytes, &expires_at],
                )
                .await?;
            Ok(updated == 1)
        })
        .await
    }

    pub(in crate::store) async fn abandon_upload(&self, file_id: &str) -> Result<(), StoreError> {
        let file_id = file_id.to_owned();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::ABANDON_UPLOAD.text(POSTGRES))
                .await?;
            client.execute(&statement, &[&file_id]).await?;
            Ok(())
        })
        .await
    }

    pub(in crate::store) async fn file(
        &self,
        project_id: &str,
        id: &str,
        now_ms: i64,
    ) -> Result<Option<StoredFile>, StoreError> {
        if unstorable(&[project_id, id]) {
            return Ok(None);
        }
        let (project_id, id) = (project_id.to_owned(), id.to_owned());
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(sql::FILE.text(POSTGRES)).await?;
            let row = client
                .query_opt(&statement, &[&id, &project_id, &now_ms])
                .await?;
            Ok(row.as_ref().map(read::stored_file).transpose()?)
        })
        .await
    }

    pub(in crate::store) async fn files(
        &self,
        project_id: &str,
        query: &FileQuery,
    ) -> Result<Vec<StoredFile>, StoreError> {
        let asked = [
            Some(project_id),
            query.purpose.as_deref(),
            query.after.as_deref(),
        ];
        if unstorable(&asked.into_iter().flatten().collect::<Vec<_>>()) {
            return Ok(Vec::new());
        }
        let statement = match query.newest_first {
            true => &sql::FILES_NEWEST_FIRST,
            false => &sql::FILES_OLDEST_FIRST,
        };
        let (project_id, query) = (project_id.to_owned(), query.clone());
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(statement.text(POSTGRES)).await?;
            let limit = i64::from(query.limit);
            let rows = client
                .query(
                    &statement,
                    &[
                        &project_id,
                        &query.now_ms,
                        &query.purpose,
                        &query.after,
                        &limit,
                    ],
                )
                .await?;
            Ok(rows
                .iter()
                .map(read::stored_file)
                .collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub(in crate::store) async fn file_chunk(
        &self,
        file_id: &str,
        seq: u32,
    ) -> Result<Option<Bytes>, StoreError> {
        if unstorable(&[file_id]) {
            return Ok(None);
        }
        let file_id = file_id.to_owned();
        let seq = i32::try_from(seq).unwrap_or(i32::MAX);
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::FILE_CHUNK.text(POSTGRES))
                .await?;
            let row = client.query_opt(&statement, &[&file_id, &seq]).await?;
            let data: Option<Vec<u8>> = row.map(|row| row.try_get(0)).transpose()?;
            Ok(data.map(Bytes::from))
        })
        .await
    }

    pub(in crate::store) async fn delete_file(
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
                .prepare_cached(sql::DELETE_FILE.text(POSTGRES))
                .await?;
            Ok(client.execute(&statement, &[&id, &project_id]).await? > 0)
        })
        .await
    }

    pub(in crate::store) async fn delete_expired_files(
        &self,
        now_ms: i64,
        stale_before_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::DELETE_EXPIRED_FILES.text(POSTGRES))
                .await?;
            let deleted = client
                .execute(&statement, &[&now_ms, &stale_before_ms, &i64::from(limit)])
                .await?;
            Ok(deleted as usize)
        })
        .await
    }
}
