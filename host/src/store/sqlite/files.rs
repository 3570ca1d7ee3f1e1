//! Files in SQLite: every statement on the files' own connection (WAL: a download's reads
//! never wait for another connection's writes), one short transaction each, so that an upload
//! arriving slowly holds SQLite's write lock a chunk at a time, never for the whole upload.

use bytes::Bytes;
use rusqlite::{OptionalExtension, params};

use super::{Sqlite, lock, opened};
use crate::store::rows as read;
use crate::store::sql::{self, Dialect};
use crate::store::{FileQuery, NewUpload, StoreError, StoredFile};

const SQLITE: Dialect = Dialect::Sqlite;

impl Sqlite {
    /// The files' connection, opened now if it is not yet.
    fn with_files<T>(
        &self,
        work: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut slot = lock(&self.files);
        work(opened(&mut slot, &self.path)?)
    }

    pub(in crate::store) fn begin_upload(
        &self,
        upload: &NewUpload,
        quota: i64,
    ) -> Result<bool, StoreError> {
        let reserved = i64::try_from(upload.reserved).unwrap_or(i64::MAX);
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::BEGIN_UPLOAD.text(SQLITE))?;
            let inserted = stmt.execute(params![
                upload.id,
                upload.project_id,
                reserved,
                upload.created_at_ms,
                quota
            ])?;
            Ok(inserted == 1)
        })
    }

    pub(in crate::store) fn put_file_chunk(
        &self,
        file_id: &str,
        seq: u32,
        data: &Bytes,
    ) -> Result<(), StoreError> {
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::PUT_FILE_CHUNK.text(SQLITE))?;
            stmt.execute(params![file_id, seq, data.as_ref()])?;
            Ok(())
        })
    }

    pub(in crate::store) fn finish_upload(&self, file: &StoredFile) -> Result<bool, StoreError> {
        let bytes = i64::try_from(file.bytes).unwrap_or(i64::MAX);
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::FINISH_UPLOAD.text(SQLITE))?;
            let updated = stmt.execute(params![
                file.id,
                file.project_id,
                file.filename,
                file.purpose,
                bytes,
                file.expires_at_ms
            ])?;
            Ok(updated == 1)
        })
    }

    pub(in crate::store) fn abandon_upload(&self, file_id: &str) -> Result<(), StoreError> {
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::ABANDON_UPLOAD.text(SQLITE))?;
            stmt.execute(params![file_id])?;
            Ok(())
        })
    }

    pub(in crate::store) fn file(
        &self,
        project_id: &str,
        id: &str,
        now_ms: i64,
    ) -> Result<Option<StoredFile>, StoreError> {
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::FILE.text(SQLITE))?;
            Ok(stmt
                .query_row(params![id, project_id, now_ms], |row| {
                    read::stored_file(row)
                })
                .optional()?)
        })
    }

    pub(in crate::store) fn files(
        &self,
        project_id: &str,
        query: &FileQuery,
    ) -> Result<Vec<StoredFile>, StoreError> {
        let statement = match query.newest_first {
            true => &sql::FILES_NEWEST_FIRST,
            false => &sql::FILES_OLDEST_FIRST,
        };
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(statement.text(SQLITE))?;
            let rows = stmt.query_map(
                params![
                    project_id,
                    query.now_ms,
                    query.purpose,
                    query.after,
                    i64::from(query.limit)
                ],
                |row| read::stored_file(row),
            )?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    pub(in crate::store) fn file_chunk(
        &self,
        file_id: &str,
        seq: u32,
    ) -> Result<Option<Bytes>, StoreError> {
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::FILE_CHUNK.text(SQLITE))?;
            let data: Option<Vec<u8>> = stmt
                .query_row(params![file_id, seq], |row| row.get(0))
                .optional()?;
            Ok(data.map(Bytes::from))
        })
    }

    pub(in crate::store) fn delete_file(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::DELETE_FILE.text(SQLITE))?;
            Ok(stmt.execute(params![id, project_id])? > 0)
        })
    }

    pub(in crate::store) fn delete_expired_files(
        &self,
        now_ms: i64,
        stale_before_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        self.with_files(|conn| {
            let mut stmt = conn.prepare_cached(sql::DELETE_EXPIRED_FILES.text(SQLITE))?;
            Ok(stmt.execute(params![now_ms, stale_before_ms, limit])?)
        })
    }
}
