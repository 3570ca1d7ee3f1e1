//! Files a project uploaded (`/v1/files`), kept in the database so that every replica serves
//! them: a row of what the file is ([`StoredFile`]) and its bytes in rows of at most
//! [`CHUNK_BYTES`], written as they arrive and read back one at a time, so that neither an
//! upload nor a download holds a whole file in memory.
//!
//! An upload first reserves the most it may take against its project's quota (the whole
//! check and insert in one statement, under the project's row lock on PostgreSQL: uploads
//! at once cannot each see room for themselves and together pass it); its row stays
//! invisible until the upload is whole ([`Store::finish_file`]), and one whose gateway died
//! half way is deleted by [`Store::delete_expired_files`] a day later, giving its reservation
//! back.

use bytes::Bytes;

use super::{Backend, Store, StoreError, off_thread};

/// The most bytes of a file one row holds: a download reads one row at a time, an upload
/// writes one when it has this much.
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// An upload whose row is still reserved this long after it began is taken for one its
/// gateway never finished (killed half way) and deleted.
pub const STALE_UPLOAD_MS: i64 = 24 * 60 * 60 * 1000;

/// A file of a project, as `GET /v1/files/{id}` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// `file-` and 32 hex digits (a UUIDv7's: ids sort by creation time).
    pub id: String,
    pub project_id: String,
    pub filename: String,
    pub purpose: String,
    pub bytes: u64,
    /// Unix ms.
    pub created_at_ms: i64,
    /// Unix ms; after it the file is gone (read as absent, deleted by retention).
    pub expires_at_ms: Option<i64>,
}

/// An upload begun: its row reserved against the quota, not yet listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUpload {
    pub id: String,
    pub project_id: String,
    /// Unix ms.
    pub created_at_ms: i64,
    /// The most bytes it may hold: what it reserves of the quota until it is whole.
    pub reserved: u64,
}

/// An upload made whole: what the form said of it and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedUpload {
    pub filename: String,
    pub purpose: String,
    pub bytes: u64,
    pub expires_at_ms: Option<i64>,
}

/// Which of a project's files a listing reads, as `GET /v1/files`'s query says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileQuery {
    pub purpose: Option<String>,
    /// The id the page starts after (in `newest_first`'s order).
    pub after: Option<String>,
    /// The most files read.
    pub limit: u32,
    pub newest_first: bool,
    /// Unix ms: files expired by then are not listed.
    pub now_ms: i64,
}

/// Files.
impl Store {
    /// Reserves `upload.reserved` bytes of `project_quota` for a new upload. False: the
    /// project's files and uploads hold too much for it (nothing is written).
    pub async fn begin_upload(
        &self,
        upload: &NewUpload,
        project_quota: u64,
    ) -> Result<bool, StoreError> {
        let quota = i64::try_from(project_quota).unwrap_or(i64::MAX);
        match &self.backend {
            Backend::Sqlite(db) => {
                let upload = upload.clone();
                off_thread(db, move |db| db.begin_upload(&upload, quota)).await
            }
            Backend::Postgres(db) => db.begin_upload(upload, quota).await,
        }
    }

    /// Keeps chunk `seq` (0, 1, … in order) of the upload `file_id`: at most [`CHUNK_BYTES`].
    pub async fn put_file_chunk(
        &self,
        file_id: &str,
        seq: u32,
        data: Bytes,
    ) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let file_id = file_id.to_owned();
                off_thread(db, move |db| db.put_file_chunk(&file_id, seq, &data)).await
            }
            Backend::Postgres(db) => db.put_file_chunk(file_id, seq, data).await,
        }
    }

    /// Makes the upload `upload` whole: listed and read from now on, reserving only its bytes.
    /// None when there is no such upload any more (deleted as stale).
    pub async fn finish_upload(
        &self,
        upload: &NewUpload,
        finished: FinishedUpload,
    ) -> Result<Option<StoredFile>, StoreError> {
        let file = StoredFile {
            id: upload.id.clone(),
            project_id: upload.project_id.clone(),
            filename: finished.filename,
            purpose: finished.purpose,
            bytes: finished.bytes,
            created_at_ms: upload.created_at_ms,
            expires_at_ms: finished.expires_at_ms,
        };
        let done = match &self.backend {
            Backend::Sqlite(db) => {
                let file = file.clone();
                off_thread(db, move |db| db.finish_upload(&file)).await?
            }
            Backend::Postgres(db) => db.finish_upload(&file).await?,
        };
        Ok(done.then_some(file))
    }

    /// Deletes an upload that will not be finished (refused, or its client gone), chunks and
    /// reservation.
    pub async fn abandon_upload(&self, file_id: &str) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let file_id = file_id.to_owned();
                off_thread(db, move |db| db.abandon_upload(&file_id)).await
            }
            Backend::Postgres(db) => db.abandon_upload(file_id).await,
        }
    }

    /// The file `id` of `project_id`, unless it expired by `now_ms` (None when absent, not
    /// whole yet, or another project's).
    pub async fn file(
        &self,
        project_id: &str,
        id: &str,
        now_ms: i64,
    ) -> Result<Option<StoredFile>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (project_id, id) = (project_id.to_owned(), id.to_owned());
                off_thread(db, move |db| db.file(&project_id, &id, now_ms)).await
            }
            Backend::Postgres(db) => db.file(project_id, id, now_ms).await,
        }
    }

    /// A page of `project_id`'s files, as `query` asks.
    pub async fn files(
        &self,
        project_id: &str,
        query: &FileQuery,
    ) -> Result<Vec<StoredFile>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (project_id, query) = (project_id.to_owned(), query.clone());
                off_thread(db, move |db| db.files(&project_id, &query)).await
            }
            Backend::Postgres(db) => db.files(project_id, query).await,
        }
    }

    /// Chunk `seq` of the file `file_id` (None past its last). The file is its project's: the
    /// caller read it with [`Store::file`] first.
    pub async fn file_chunk(&self, file_id: &str, seq: u32) -> Result<Option<Bytes>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let file_id = file_id.to_owned();
                off_thread(db, move |db| db.file_chunk(&file_id, seq)).await
            }
            Backend::Postgres(db) => db.file_chunk(file_id, seq).await,
        }
    }

    /// Deletes the whole file `id` of `project_id` and its bytes; false when there was none.
    pub async fn delete_file(&self, project_id: &str, id: &str) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let (project_id, id) = (project_id.to_owned(), id.to_owned());
                off_thread(db, move |db| db.delete_file(&project_id, &id)).await
            }
            Backend::Postgres(db) => db.delete_file(project_id, id).await,
        }
    }

    /// Deletes at most `limit` files expired by `now_ms` and uploads begun before
    /// [`STALE_UPLOAD_MS`] ago and never finished; returns how many.
    pub async fn delete_expired_files(&self, now_ms: i64, limit: u32) -> Result<usize, StoreError> {
        let stale_before = now_ms.saturating_sub(STALE_UPLOAD_MS);
        match &self.backend {
            Backend::Sqlite(db) => {
                off_thread(db, move |db| {
                    db.delete_expired_files(now_ms, stale_before, limit)
                })
                .await
            }
            Backend::Postgres(db) => db.delete_expired_files(now_ms, stale_before, limit).await,
        }
    }
}
