//! Record retention: with `record_retention_days` set, invocation records and
//! kept responses (the Responses API's `store: true`) older than that are
//! deleted in the background, once at start and then every [`EVERY`]; with
//! `audit_retention_days`, audit events likewise ([`spawn_audit`]: the only
//! deletion of an audit event there is). Uploaded files past their expiry, and uploads a
//! killed gateway never finished, are deleted whatever the config says ([`spawn_files`]),
//! every [`FILES_EVERY`].
//!
//! A pass deletes in rounds: each deletes a batch of at most [`BATCH`] records
//! and one of at most [`BATCH`] responses (while either has some left), each
//! batch its own short transaction on a connection of its own, with a [`PAUSE`]
//! between rounds: the invocation writer, which waits out a batch in SQLite's
//! busy timeout, is never held up for more than one batch, and shutdown for
//! more than one round.

use std::time::Duration;

use super::{Store, StoreError};
use crate::clock::now_ms;

/// Records (or responses) per delete statement.
pub const BATCH: u32 = 1000;
/// Between two rounds of a pass: lets the invocation writer commit.
pub const PAUSE: Duration = Duration::from_millis(50);
/// Between two passes.
pub const EVERY: Duration = Duration::from_secs(3600);

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Between two sweeps of expired files: an expired file is read as gone at once, so this
/// only bounds how long its bytes stay on disk.
pub const FILES_EVERY: Duration = Duration::from_secs(600);
/// Files per delete statement: up to 200 MiB each, their chunks go with them.
pub const FILES_BATCH: u32 = 20;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Invocation records deleted.
    pub deleted: u64,
    /// Kept responses deleted.
    pub responses: u64,
    /// Rounds of deletes run: one more than the most full batches of records or of responses
    /// (the round that sees the end of both).
    pub batches: u32,
}

/// A pass that stopped on a database error, after deleting `deleted` records and `responses`
/// kept responses.
#[derive(Debug, thiserror::Error)]
#[error("{source} (after deleting {deleted} records and {responses} responses)")]
pub struct PassFailed {
    pub deleted: u64,
    pub responses: u64,
    pub source: StoreError,
}

/// Starts deleting records and kept responses older than `days` days: a pass now, then one
/// every [`EVERY`]. The task runs until the runtime ends.
pub fn spawn(store: Store, days: u32) -> tokio::task::JoinHandle<()> {
    hourly(days, move |cutoff_ms| {
        let store = store.clone();
        async move {
            match pass(&store, cutoff_ms, BATCH, PAUSE).await {
                Ok(Pass {
                    deleted: 0,
                    responses: 0,
                    ..
                }) => tracing::debug!(
                    days,
                    "no invocation records or kept responses past the retention period"
                ),
                Ok(Pass {
                    deleted,
                    responses,
                    batches,
                }) => tracing::info!(
                    deleted,
                    responses,
                    batches,
                    days,
                    "deleted invocation records and kept responses older than \
                     record_retention_days"
                ),
                Err(e) => tracing::warn!(
                    days,
                    "deleting old invocation records and kept responses failed: {e}; \
                     retrying in {}s",
                    EVERY.as_secs()
                ),
            }
        }
    })
}

/// Runs `pass` with the cutoff of `days` days ago now, then every [`EVERY`], until the runtime
/// ends.
fn hourly<Run, Passed>(days: u32, mut pass: Run) -> tokio::task::JoinHandle<()>
where
    Run: FnMut(i64) -> Passed + Send + 'static,
    Passed: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            pass(now_ms().saturating_sub(i64::from(days) * DAY_MS)).await;
        }
    })
}

/// Starts deleting audit events older than `days` days: a pass now, then one every [`EVERY`],
/// each in batches of [`BATCH`] with [`PAUSE`] between them.
pub fn spawn_audit(store: Store, days: u32) -> tokio::task::JoinHandle<()> {
    hourly(days, move |cutoff_ms| {
        let store = store.clone();
        async move {
            match audit_pass(&store, cutoff_ms, BATCH, PAUSE).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(
                    deleted,
                    days,
                    "deleted audit events older than audit_retention_days"
                ),
                Err(e) => tracing::warn!(
                    days,
                    "deleting old audit events failed: {e}; retrying in {}s",
                    EVERY.as_secs()
                ),
            }
        }
    })
}

/// A batch still validating this long after it was created lost its gateway (a 200 MB input
/// file is read in well under a minute).
const STALE_VALIDATION_MS: i64 = 60 * 60 * 1000;

/// Starts deleting expired files and abandoned uploads, and failing batches whose validation
/// never ended: a sweep now, then one every [`FILES_EVERY`]. The task runs until the runtime
/// ends.
pub fn spawn_files(store: Store) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(FILES_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let now = now_ms();
            match files_pass(&store, now, FILES_BATCH, PAUSE).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "deleted expired or abandoned files"),
                Err(e) => tracing::warn!(
                    "deleting expired files failed: {e}; retrying in {}s",
                    FILES_EVERY.as_secs()
                ),
            }
            let stale_before = now.saturating_sub(STALE_VALIDATION_MS);
            match store.fail_stale_batches(now, stale_before).await {
                Ok(0) => {}
                Ok(failed) => tracing::warn!(
                    failed,
                    "failed batches whose validation never ended (their gateway stopped)"
                ),
                Err(e) => tracing::warn!("failing stale batches failed: {e}"),
            }
        }
    })
}

/// Deletes every file expired by `now_ms` and every upload abandoned, `batch` at a time; how
/// many.
pub async fn files_pass(
    store: &Store,
    now_ms: i64,
    batch: u32,
    pause: Duration,
) -> Result<u64, StoreError> {
    in_batches(batch, pause, |batch| {
        store.delete_expired_files(now_ms, batch)
    })
    .await
}

/// Deletes every audit event from before `cutoff_ms`, `batch` at a time; how many.
pub async fn audit_pass(
    store: &Store,
    cutoff_ms: i64,
    batch: u32,
    pause: Duration,
) -> Result<u64, StoreError> {
    in_batches(batch, pause, |batch| {
        store.delete_audit_events_before(cutoff_ms, batch)
    })
    .await
}

/// Runs `delete` (which deletes at most the `batch` it is given and says how many it did) until
/// a batch is not full, with `pause` between batches; how many in all.
async fn in_batches<Delete, Deleted>(
    batch: u32,
    pause: Duration,
    mut delete: Delete,
) -> Result<u64, StoreError>
where
    Delete: FnMut(u32) -> Deleted,
    Deleted: std::future::Future<Output = Result<usize, StoreError>>,
{
    let mut deleted = 0u64;
    loop {
        let done = delete(batch).await?;
        deleted += done as u64;
        if done < batch as usize {
            return Ok(deleted);
        }
        tokio::time::sleep(pause).await;
    }
}

/// Deletes every record and kept response created before `cutoff_ms`, in rounds of at most
/// `batch` of each with `pause` between rounds.
pub async fn pass(
    store: &Store,
    cutoff_ms: i64,
    batch: u32,
    pause: Duration,
) -> Result<Pass, PassFailed> {
    let mut done = Pass::default();
    let failed = |done: &Pass| {
        let done = *done;
        move |source| PassFailed {
            deleted: done.deleted,
            responses: done.responses,
            source,
        }
    };
    // Whether the last batch of each was full: more may be left.
    let (mut records_left, mut responses_left) = (true, true);
    loop {
        if records_left {
            let deleted = store
                .delete_invocations_before(cutoff_ms, batch)
                .await
                .map_err(failed(&done))?;
            done.deleted += deleted as u64;
            records_left = deleted >= batch as usize;
        }
        if responses_left {
            let deleted = store
                .delete_responses_before(cutoff_ms, batch)
                .await
                .map_err(failed(&done))?;
            done.responses += deleted as u64;
            responses_left = deleted >= batch as usize;
        }
        done.batches += 1;
        if !records_left && !responses_left {
            return Ok(done);
        }
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Invocation, InvocationStatus};

    fn record(created_at_ms: i64) -> Invocation {
        Invocation {
            project_id: Some("p".into()),
            route: Some("r".into()),
            plugin: Some("echo".into()),
            model: Some("m".into()),
            kind: Some("text".into()),
            status: InvocationStatus::Success,
            http_status: 200,
            duration_ms: 1,
            request: Some("{}".into()),
            response: Some("{}".into()),
            ..Invocation::begun(uuid::Uuid::now_v7(), created_at_ms)
        }
    }

    #[tokio::test]
    async fn a_pass_deletes_exactly_the_old_records_in_batches() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("g.db")).unwrap();
        let cutoff_ms = now_ms() - 30 * DAY_MS;
        let old: Vec<_> = (0..35).map(|i| record(cutoff_ms - 1 - i * 1000)).collect();
        // A record made exactly at the cutoff is not older than it.
        let mut kept: Vec<_> = (0..5).map(|i| record(cutoff_ms + i * 1000)).collect();
        kept.push(record(now_ms()));
        let mut all = old.clone();
        all.extend(kept.iter().cloned());
        store.insert_invocations(&all).unwrap();

        let done = pass(&store, cutoff_ms, 10, Duration::ZERO).await.unwrap();
        assert_eq!(
            done,
            Pass {
                deleted: 35,
                responses: 0,
                batches: 4
            }
        );
        let mut expected: Vec<_> = kept.iter().map(|r| r.id).collect();
        expected.sort();
        assert_eq!(store.stored_ids().await, expected);

        // Nothing left to delete: one statement that finds nothing.
        let again = pass(&store, cutoff_ms, 10, Duration::ZERO).await.unwrap();
        assert_eq!(
            again,
            Pass {
                deleted: 0,
                responses: 0,
                batches: 1
            }
        );
        assert_eq!(store.stored_ids().await, expected);
    }

    #[tokio::test]
    async fn a_full_last_batch_takes_one_more_statement_to_see_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("g.db")).unwrap();
        let old: Vec<_> = (0..20).map(|i| record(1000 + i)).collect();
        store.insert_invocations(&old).unwrap();
        let done = pass(&store, 2000, 10, Duration::ZERO).await.unwrap();
        assert_eq!(
            done,
            Pass {
                deleted: 20,
                responses: 0,
                batches: 3
            }
        );
        assert!(store.stored_ids().await.is_empty());
    }

    #[tokio::test]
    async fn the_invocation_writer_keeps_committing_during_a_pass() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("g.db")).unwrap();
        let old: Vec<_> = (0..2000).map(|i| record(1000 + i)).collect();
        store.insert_invocations(&old).unwrap();
        let (log, writer) = crate::store::InvocationLog::start(store.clone(), None).unwrap();
        let fresh: Vec<_> = (0..50).map(|_| record(now_ms())).collect();
        let pruning = pass(&store, 1_000_000, 100, Duration::from_millis(1));
        let writing = async {
            for r in &fresh {
                log.record(r.clone()).await;
                tokio::task::yield_now().await;
            }
            log.flush().await;
        };
        let (done, ()) = tokio::join!(pruning, writing);
        assert_eq!(done.unwrap().deleted, 2000);
        drop(log);
        writer.shutdown().await;
        let mut expected: Vec<_> = fresh.iter().map(|r| r.id).collect();
        expected.sort();
        assert_eq!(store.stored_ids().await, expected);
    }
}
