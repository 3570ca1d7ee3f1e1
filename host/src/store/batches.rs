//! Batches (`/v1/batches`): a row each, with their lines in rows of their own that every
//! replica's runner leases a few at a time.
//!
//! A line is leased by a runner (`lease_token` its own, `lease_until` when the lease ends
//! unless renewed) and ended by the runner that still holds it: an answer written by a runner
//! whose lease another took (it was thought dead) is refused, so that a line is answered
//! once into the output however runners die. A line whose runner died is leased again once its
//! lease ends. A batch is finished (its output and error files written) by the one runner
//! that marks it finishing once no line is pending; one that dies half way leaves the mark to
//! go stale and another finishes it.

use super::report::{Query, SqlValue};
use super::rows::StoredRow;
use super::sql;
use super::{Backend, Store, StoreError, off_thread};
use SqlValue::{Bytes, Integer, MaybeInteger, MaybeText, Text};

/// The most lines one batch may hold: OpenAI's bound.
pub const MAX_BATCH_LINES: u32 = 50_000;

/// Why a batch whose validation never ended failed: OpenAI's `errors.data`.
pub(super) const INTERRUPTED: &str = r#"[{"code":"validation_interrupted","message":"the gateway validating this batch's input file stopped before it was done; create the batch again","param":null,"line":null}]"#;

/// A batch's status, as OpenAI names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchStatus {
    /// Its input file being read into lines.
    Validating,
    /// Its input file refused (`errors` says why), or its validation never ended.
    Failed,
    InProgress,
    /// Every line ended: its output files being written.
    Finalizing,
    Completed,
    /// Its completion window ended first: the lines not run are `batch_expired`.
    Expired,
    /// Cancelled: the lines in flight end, the others are `batch_cancelled`.
    Cancelling,
    Cancelled,
}

impl BatchStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BatchStatus::Validating => "validating",
            BatchStatus::Failed => "failed",
            BatchStatus::InProgress => "in_progress",
            BatchStatus::Finalizing => "finalizing",
            BatchStatus::Completed => "completed",
            BatchStatus::Expired => "expired",
            BatchStatus::Cancelling => "cancelling",
            BatchStatus::Cancelled => "cancelled",
        }
    }

    /// A status written by hand or by a newer gateway reads as `failed`: nothing runs it.
    pub fn parse(text: &str) -> BatchStatus {
        match text {
            "validating" => BatchStatus::Validating,
            "in_progress" => BatchStatus::InProgress,
            "finalizing" => BatchStatus::Finalizing,
            "completed" => BatchStatus::Completed,
            "expired" => BatchStatus::Expired,
            "cancelling" => BatchStatus::Cancelling,
            "cancelled" => BatchStatus::Cancelled,
            _ => BatchStatus::Failed,
        }
    }
}

/// A batch as it is created, before its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBatch {
    /// `batch_` and 32 hex digits (a UUIDv7's: ids sort by creation time).
    pub id: String,
    pub project_id: String,
    /// The hash of the key that created it: each line runs as that key (its scope, limits and
    /// budgets; revoked, the lines fail as its requests would).
    pub key_hash: [u8; 32],
    pub endpoint: String,
    pub input_file_id: String,
    pub completion_window: String,
    /// JSON object text.
    pub metadata: Option<String>,
    /// Unix ms.
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// How long its output and error files are kept; None: OpenAI's default for batch output.
    pub output_expires_secs: Option<i64>,
}

/// A batch as `GET /v1/batches/{id}` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredBatch {
    pub id: String,
    pub project_id: String,
    pub endpoint: String,
    pub input_file_id: String,
    pub completion_window: String,
    pub metadata: Option<String>,
    pub status: BatchStatus,
    /// Unix ms, each when the batch reached it.
    pub created_at_ms: i64,
    pub in_progress_at_ms: Option<i64>,
    pub expires_at_ms: i64,
    pub finalizing_at_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
    pub failed_at_ms: Option<i64>,
    pub expired_at_ms: Option<i64>,
    pub cancelling_at_ms: Option<i64>,
    pub cancelled_at_ms: Option<i64>,
    pub output_file_id: Option<String>,
    pub error_file_id: Option<String>,
    /// Why validation refused it: OpenAI's `errors.data`, a JSON array text.
    pub errors: Option<String>,
    pub total: u64,
    /// Lines answered with a 2xx.
    pub completed: u64,
    /// Lines answered otherwise, expired or cancelled.
    pub failed: u64,
    pub output_expires_secs: Option<i64>,
    /// Of the failed, the lines never run (expired or cancelled).
    pub closed: u64,
}

impl StoredBatch {
    /// When it ended (completed, expired, cancelled or failed), if it did.
    pub fn ended_at_ms(&self) -> Option<i64> {
        (self.completed_at_ms)
            .or(self.expired_at_ms)
            .or(self.cancelled_at_ms)
            .or(self.failed_at_ms)
    }
}

/// Which page of a listing: the one after an id (older; None: the newest), or the one just
/// before it (newer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchPage<'a> {
    After(Option<&'a str>),
    Before(&'a str),
}

/// One line of a batch's input, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLine {
    /// 0-based, in the file's order (blank lines not counted).
    pub seq: u32,
    pub custom_id: String,
    /// The request's body, JSON object text.
    pub body: String,
}

/// A batch the runners have work in: lines to run, lines to close, files to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningBatch {
    pub id: String,
    pub project_id: String,
    pub key_hash: Vec<u8>,
    pub endpoint: String,
    pub status: BatchStatus,
    /// Unix ms.
    pub expires_at_ms: i64,
}

/// A line a runner leased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedLine {
    pub seq: u32,
    pub custom_id: String,
    pub body: String,
}

/// How a line ended, as its batch's files tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineResult {
    pub seq: u32,
    pub custom_id: String,
    /// Answered with a 2xx.
    pub ok: bool,
    /// The output (or error) file's line, when it was answered.
    pub result: Option<String>,
    /// Why it was never run (`batch_expired`, `batch_cancelled`), when it was not.
    pub error_code: Option<String>,
}

/// The end a finished batch reached, with its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub status: BatchStatus,
    /// Unix ms.
    pub at_ms: i64,
    pub output_file_id: Option<String>,
    pub error_file_id: Option<String>,
    pub completed: u64,
    pub failed: u64,
    /// Of the failed, the lines never run.
    pub closed: u64,
}

/// Batches.
impl Store {
    /// Keeps `batch`, `validating`, with no lines yet.
    pub async fn create_batch(&self, batch: &NewBatch) -> Result<(), StoreError> {
        let values = vec![
            Text(batch.id.clone()),
            Text(batch.project_id.clone()),
            Bytes(batch.key_hash.to_vec()),
            Text(batch.endpoint.clone()),
            Text(batch.input_file_id.clone()),
            Text(batch.completion_window.clone()),
            MaybeText(batch.metadata.clone()),
            Integer(batch.created_at_ms),
            Integer(batch.expires_at_ms),
            MaybeInteger(batch.output_expires_secs),
        ];
        self.batch_change(&sql::INSERT_BATCH, values)
            .await
            .map(drop)
    }

    /// Keeps `lines` of the batch `batch_id` (validating), in one transaction.
    pub async fn put_batch_lines(
        &self,
        batch_id: &str,
        lines: Vec<NewLine>,
    ) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                let batch_id = batch_id.to_owned();
                off_thread(db, move |db| db.put_batch_lines(&batch_id, &lines)).await
            }
            Backend::Postgres(db) => db.put_batch_lines(batch_id, lines).await,
        }
    }

    /// The batch `batch_id`, validated with `total` lines, in progress from `now_ms`; false
    /// when it is no longer validating (cancelled meanwhile).
    pub async fn start_batch(
        &self,
        batch_id: &str,
        total: u32,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let values = vec![
            Text(batch_id.to_owned()),
            Integer(now_ms),
            Integer(i64::from(total)),
        ];
        Ok(self.batch_change(&sql::START_BATCH, values).await? == 1)
    }

    /// The batch `batch_id` refused by its validation (`errors`: OpenAI's `errors.data`, a
    /// JSON array text), its lines deleted.
    pub async fn fail_batch(
        &self,
        batch_id: &str,
        errors: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let fail = self.batch_statement(
            &sql::FAIL_BATCH,
            vec![
                Text(batch_id.to_owned()),
                Integer(now_ms),
                Text(errors.to_owned()),
            ],
        );
        let delete =
            self.batch_statement(&sql::DELETE_BATCH_LINES, vec![Text(batch_id.to_owned())]);
        self.batch_transaction(vec![fail, delete]).await.map(drop)
    }

    /// The batch `id` of `project_id` (None when absent or another project's).
    pub async fn batch(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Option<StoredBatch>, StoreError> {
        let values = vec![Text(id.to_owned()), Text(project_id.to_owned())];
        let query = self.batch_statement(&sql::BATCH, values);
        let mut rows = self
            .batch_rows(query, |row| stored_batch(row), stored_batch)
            .await?;
        Ok(rows.pop())
    }

    /// A page of `project_id`'s batches whose ids begin with `prefix` (one API's), at most
    /// `limit`, newest first.
    pub async fn batches(
        &self,
        project_id: &str,
        prefix: &str,
        page: BatchPage<'_>,
        limit: u32,
    ) -> Result<Vec<StoredBatch>, StoreError> {
        let (statement, from) = match page {
            BatchPage::After(after) => (&sql::BATCHES, after),
            BatchPage::Before(before) => (&sql::BATCHES_BEFORE, Some(before)),
        };
        let values = vec![
            Text(project_id.to_owned()),
            MaybeText(from.map(str::to_owned)),
            Integer(i64::from(limit)),
            // The prefixes are letters and `_`, which `LIKE` reads as any one character: no
            // id of another API begins as a prefix so read.
            Text(format!("{prefix}%")),
        ];
        let query = self.batch_statement(statement, values);
        let mut batches = self
            .batch_rows(query, |row| stored_batch(row), stored_batch)
            .await?;
        if matches!(page, BatchPage::Before(_)) {
            batches.reverse();
        }
        Ok(batches)
    }

    /// `project_id`'s newest `limit` batches of either API (what an operator sees of them),
    /// the newest first.
    pub async fn project_batches(
        &self,
        project_id: &str,
        limit: u32,
    ) -> Result<Vec<StoredBatch>, StoreError> {
        let values = vec![Text(project_id.to_owned()), Integer(i64::from(limit))];
        let query = self.batch_statement(&sql::PROJECT_BATCHES, values);
        self.batch_rows(query, |row| stored_batch(row), stored_batch)
            .await
    }

    /// Deletes the batch `id` of `project_id` if it ended (its files are not: the caller's);
    /// false when it had not or was absent.
    pub async fn delete_batch(&self, project_id: &str, id: &str) -> Result<bool, StoreError> {
        let values = vec![Text(id.to_owned()), Text(project_id.to_owned())];
        Ok(self.batch_change(&sql::DELETE_BATCH, values).await? == 1)
    }

    /// Cancels the batch `id` of `project_id` if it is validating or in progress: `cancelling`
    /// from `now_ms`, its lines not in flight closed as `batch_cancelled`. False when it was
    /// not (absent, or past them).
    pub async fn cancel_batch(
        &self,
        project_id: &str,
        id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let cancel = self.batch_statement(
            &sql::CANCEL_BATCH,
            vec![
                Text(id.to_owned()),
                Text(project_id.to_owned()),
                Integer(now_ms),
            ],
        );
        let close = self.close_statement(id, "batch_cancelled", now_ms);
        let changed = self.batch_transaction(vec![cancel, close]).await?;
        Ok(changed.first() == Some(&1))
    }

    /// The batches some runner has work in, the oldest first: at most `limit`.
    pub async fn running_batches(&self, limit: u32) -> Result<Vec<RunningBatch>, StoreError> {
        let query = self.batch_statement(&sql::RUNNING_BATCHES, vec![Integer(i64::from(limit))]);
        self.batch_rows(query, |row| running_batch(row), running_batch)
            .await
    }

    /// Leases at most `limit` pending lines of `batch_id` no runner holds at `now_ms` to the
    /// runner `owner` until `until_ms`, the first first.
    pub async fn lease_lines(
        &self,
        batch_id: &str,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
        limit: u32,
    ) -> Result<Vec<LeasedLine>, StoreError> {
        let values = vec![
            Text(batch_id.to_owned()),
            Integer(now_ms),
            Text(owner.to_owned()),
            Integer(until_ms),
            Integer(i64::from(limit)),
        ];
        let query = self.batch_statement(&sql::LEASE_LINES, values);
        let mut lines = self
            .batch_rows(query, |row| leased_line(row), leased_line)
            .await?;
        // `RETURNING` has no order.
        lines.sort_by_key(|line| line.seq);
        Ok(lines)
    }

    /// Holds every pending line `owner` leased until `until_ms`.
    pub async fn renew_leases(&self, owner: &str, until_ms: i64) -> Result<(), StoreError> {
        let values = vec![Text(owner.to_owned()), Integer(until_ms)];
        self.batch_change(&sql::RENEW_LEASES, values)
            .await
            .map(drop)
    }

    /// Ends line `seq` of `batch_id` with its answer (`result`, the output file's line), if
    /// `owner` still holds it; false when another runner took it (the answer is dropped).
    pub async fn end_line(
        &self,
        batch_id: &str,
        seq: u32,
        owner: &str,
        ok: bool,
        result: String,
    ) -> Result<bool, StoreError> {
        let values = vec![
            Text(batch_id.to_owned()),
            Integer(i64::from(seq)),
            Text(owner.to_owned()),
            Integer(i64::from(ok)),
            Text(result),
        ];
        Ok(self.batch_change(&sql::END_LINE, values).await? == 1)
    }

    /// Gives line `seq` of `batch_id` back, not to be leased before `not_before_ms` (a rate
    /// limit's wait, or now: shutdown).
    pub async fn release_line(
        &self,
        batch_id: &str,
        seq: u32,
        owner: &str,
        not_before_ms: i64,
    ) -> Result<(), StoreError> {
        let values = vec![
            Text(batch_id.to_owned()),
            Integer(i64::from(seq)),
            Text(owner.to_owned()),
            Integer(not_before_ms),
        ];
        self.batch_change(&sql::RELEASE_LINE, values)
            .await
            .map(drop)
    }

    /// Ends every pending line of `batch_id` not in flight at `now_ms` as never run, for
    /// `code` (`batch_expired`, `batch_cancelled`).
    pub async fn close_lines(
        &self,
        batch_id: &str,
        code: &'static str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let query = self.close_statement(batch_id, code, now_ms);
        self.batch_transaction(vec![query]).await.map(drop)
    }

    fn close_statement(&self, batch_id: &str, code: &str, now_ms: i64) -> Query {
        let values = vec![
            Text(batch_id.to_owned()),
            Text(code.to_owned()),
            Integer(now_ms),
        ];
        self.batch_statement(&sql::CLOSE_LINES, values)
    }

    /// Marks `batch_id` as being finished by the caller from `now_ms` (`finalizing`, unless
    /// cancelling), if no line is pending and no other runner marked it after
    /// `stale_before_ms`; false otherwise.
    pub async fn begin_finishing(
        &self,
        batch_id: &str,
        now_ms: i64,
        stale_before_ms: i64,
    ) -> Result<bool, StoreError> {
        let values = vec![
            Text(batch_id.to_owned()),
            Integer(now_ms),
            Integer(stale_before_ms),
        ];
        Ok(self.batch_change(&sql::BEGIN_FINISHING, values).await? == 1)
    }

    /// At most `limit` ended lines of `batch_id` after `after_seq` (-1: from the first), in
    /// order.
    pub async fn line_results(
        &self,
        batch_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<LineResult>, StoreError> {
        let values = vec![
            Text(batch_id.to_owned()),
            Integer(after_seq),
            Integer(i64::from(limit)),
        ];
        let query = self.batch_statement(&sql::LINE_RESULTS, values);
        self.batch_rows(query, |row| line_result(row), line_result)
            .await
    }

    /// Ends `batch_id`, which the caller marked finishing at `marked_ms`, as `finished` says,
    /// and deletes its lines. False when another runner took the mark over (it was stale).
    pub async fn finish_batch(
        &self,
        batch_id: &str,
        marked_ms: i64,
        finished: &Finished,
    ) -> Result<bool, StoreError> {
        let finish = self.batch_statement(
            &sql::FINISH_BATCH,
            vec![
                Text(batch_id.to_owned()),
                Integer(marked_ms),
                Text(finished.status.as_str().to_owned()),
                Integer(finished.at_ms),
                MaybeText(finished.output_file_id.clone()),
                MaybeText(finished.error_file_id.clone()),
                Integer(count_value(finished.completed)),
                Integer(count_value(finished.failed)),
                Integer(count_value(finished.closed)),
            ],
        );
        // Deletes nothing unless the finish above changed the batch: its status is final.
        let delete =
            self.batch_statement(&sql::DELETE_ENDED_LINES_OF, vec![Text(batch_id.to_owned())]);
        let changed = self.batch_transaction(vec![finish, delete]).await?;
        Ok(changed.first() == Some(&1))
    }

    /// Fails the batches whose validation began before `stale_before_ms` and never ended (its
    /// gateway died), and deletes the lines of ended batches left behind: how many failed.
    pub async fn fail_stale_batches(
        &self,
        now_ms: i64,
        stale_before_ms: i64,
    ) -> Result<usize, StoreError> {
        let fail = self.batch_statement(
            &sql::FAIL_STALE_BATCHES,
            vec![
                Integer(now_ms),
                Integer(stale_before_ms),
                Text(INTERRUPTED.to_owned()),
            ],
        );
        let delete = self.batch_statement(&sql::DELETE_ENDED_BATCH_LINES, Vec::new());
        let changed = self.batch_transaction(vec![fail, delete]).await?;
        Ok(changed.first().copied().unwrap_or(0))
    }

    fn batch_statement(&self, statement: &'static sql::Sql, values: Vec<SqlValue>) -> Query {
        sql::statement(statement, self.dialect(), values)
    }

    /// Runs one statement of the batches': the rows it changed.
    async fn batch_change(
        &self,
        statement: &'static sql::Sql,
        values: Vec<SqlValue>,
    ) -> Result<usize, StoreError> {
        let query = self.batch_statement(statement, values);
        let changed = self.batch_transaction(vec![query]).await?;
        Ok(changed.first().copied().unwrap_or(0))
    }

    /// Runs `statements` in one transaction (on SQLite, on the batches' own connection): the
    /// rows each changed.
    async fn batch_transaction(&self, statements: Vec<Query>) -> Result<Vec<usize>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                off_thread(db, move |db| db.batch_transaction(&statements)).await
            }
            Backend::Postgres(db) => db.transaction(statements).await,
        }
    }

    /// The rows of `query` (on SQLite, on the batches' own connection), each read by the
    /// backend's reader (the same function of [`super::rows`], for each backend's row).
    async fn batch_rows<T: Send + 'static>(
        &self,
        query: Query,
        sqlite: impl Fn(&rusqlite::Row<'_>) -> Result<T, rusqlite::Error> + Send + 'static,
        postgres: impl Fn(&tokio_postgres::Row) -> Result<T, tokio_postgres::Error> + Send + 'static,
    ) -> Result<Vec<T>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => off_thread(db, move |db| db.batch_rows(&query, sqlite)).await,
            Backend::Postgres(db) => db.rows(query, postgres).await,
        }
    }
}

// Rows as both backends read them, as [`super::rows`]' readers are: here, since the store's
// facade of batches runs their statements itself.

/// A row of [`super::sql::BATCH`] and [`super::sql::BATCHES`].
fn stored_batch<R: StoredRow + ?Sized>(row: &R) -> Result<StoredBatch, R::Error> {
    Ok(StoredBatch {
        id: row.text(0)?,
        project_id: row.text(1)?,
        endpoint: row.text(2)?,
        input_file_id: row.text(3)?,
        completion_window: row.text(4)?,
        metadata: row.optional_text(5)?,
        status: BatchStatus::parse(&row.text(6)?),
        created_at_ms: row.integer(7)?,
        in_progress_at_ms: row.optional_integer(8)?,
        expires_at_ms: row.integer(9)?,
        finalizing_at_ms: row.optional_integer(10)?,
        completed_at_ms: row.optional_integer(11)?,
        failed_at_ms: row.optional_integer(12)?,
        expired_at_ms: row.optional_integer(13)?,
        cancelling_at_ms: row.optional_integer(14)?,
        cancelled_at_ms: row.optional_integer(15)?,
        output_file_id: row.optional_text(16)?,
        error_file_id: row.optional_text(17)?,
        errors: row.optional_text(18)?,
        total: count(row.integer(19)?),
        completed: count(row.integer(20)?),
        failed: count(row.integer(21)?),
        output_expires_secs: row.optional_integer(22)?,
        closed: count(row.integer(23)?),
    })
}

/// A row of [`super::sql::RUNNING_BATCHES`].
fn running_batch<R: StoredRow + ?Sized>(row: &R) -> Result<RunningBatch, R::Error> {
    Ok(RunningBatch {
        id: row.text(0)?,
        project_id: row.text(1)?,
        key_hash: row.bytes(2)?,
        endpoint: row.text(3)?,
        status: BatchStatus::parse(&row.text(4)?),
        expires_at_ms: row.integer(5)?,
    })
}

/// A row of a lease's `RETURNING seq, custom_id, body`.
fn leased_line<R: StoredRow + ?Sized>(row: &R) -> Result<LeasedLine, R::Error> {
    Ok(LeasedLine {
        seq: line_seq(row.integer(0)?),
        custom_id: row.text(1)?,
        body: row.text(2)?,
    })
}

/// A row of [`super::sql::LINE_RESULTS`].
fn line_result<R: StoredRow + ?Sized>(row: &R) -> Result<LineResult, R::Error> {
    Ok(LineResult {
        seq: line_seq(row.integer(0)?),
        custom_id: row.text(1)?,
        ok: row.integer(2)? != 0,
        result: row.optional_text(3)?,
        error_code: row.optional_text(4)?,
    })
}

/// A line's number, as kept (never out of range but by hand).
fn line_seq(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// Counts as the store keeps them.
fn count(value: i64) -> u64 {
    value.max(0) as u64
}

fn count_value(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
