use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use uuid::Uuid;

use super::*;
use crate::store::InvocationStatus;

fn record(n: i64) -> Invocation {
    Invocation {
        project_id: Some("p".into()),
        user_id: Some("u".into()),
        route: Some("r".into()),
        plugin: Some("echo".into()),
        model: Some("m".into()),
        kind: Some("chat".into()),
        status: InvocationStatus::Success,
        http_status: 200,
        cost_usd: Some(0.001),
        duration_ms: 3,
        request: Some(format!(
            "{{\"messages\":[{{\"role\":\"user\",\"content\":\"hi {n}\"}}]}}"
        )),
        response: Some("{\"text\":\"hello\"}".into()),
        ..Invocation::begun(Uuid::now_v7(), 1_700_000_000_000 + n)
    }
}

/// A database that fails (or hangs) on demand; idempotent like the real ones.
#[derive(Clone, Default)]
struct Fake(Arc<FakeState>);

#[derive(Default)]
struct FakeState {
    failing: AtomicBool,
    /// Commits wait while this is true.
    held: Mutex<bool>,
    released: Condvar,
    stored: Mutex<HashSet<Uuid>>,
    /// A record refused for what it holds, as a constraint would.
    refused: Mutex<Option<Uuid>>,
}

impl Fake {
    fn stored(&self) -> HashSet<Uuid> {
        self.0.stored.lock().unwrap().clone()
    }

    fn hold(&self, held: bool) {
        *self.0.held.lock().unwrap() = held;
        self.0.released.notify_all();
    }
}

impl Sink for Fake {
    fn commit(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        let mut held = self.0.held.lock().unwrap();
        while *held {
            held = self.0.released.wait(held).unwrap();
        }
        drop(held);
        if self.0.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Pool("the fake database is down".into()));
        }
        let refused = *self.0.refused.lock().unwrap();
        if batch.iter().any(|r| Some(r.id) == refused) {
            return Err(StoreError::UnknownProject("refused".into()));
        }
        self.0
            .stored
            .lock()
            .unwrap()
            .extend(batch.iter().map(|r| r.id));
        Ok(())
    }
}

/// The real store behind a switch.
struct Flaky {
    store: Store,
    failing: Arc<AtomicBool>,
}

impl Sink for Flaky {
    fn commit(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Pool("connection refused".into()));
        }
        self.store.insert_invocations(batch)
    }
}

/// Lines in the journal's segment files.
fn journaled_lines(dir: &Path) -> usize {
    segment_files(dir)
        .iter()
        .map(|p| {
            std::fs::read(p)
                .unwrap()
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
        })
        .sum()
}

fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

async fn flush_within(log: &InvocationLog, seconds: u64) {
    tokio::time::timeout(Duration::from_secs(seconds), log.flush())
        .await
        .expect("flush hung");
}

#[tokio::test]
async fn records_a_killed_process_journaled_are_written_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join("records");
    let records: Vec<_> = (0..1500).map(record).collect();
    {
        // A process appends (as requests do) and dies before its writer commits.
        let mut journal = Journal::open(&journal_dir).unwrap();
        let mut segment = journal.current.take().unwrap();
        for r in &records {
            segment.append(&journal::encode(r).unwrap()).unwrap();
        }
        // Power loss mid-line: the torn line is skipped, the rest is not.
        let torn = journal::encode(&record(9999)).unwrap();
        segment.append(&torn[..torn.len() / 2]).unwrap();
    }
    let store = Store::open_sqlite(&dir.path().join("g.db")).unwrap();
    let journal = Journal::open(&journal_dir).unwrap();
    assert_eq!(journal.backlog.len(), 1);
    let (log, writer) = InvocationLog::start(store.clone(), Some(journal)).unwrap();
    // The flush of a reader waits for the backlog while the database takes it.
    flush_within(&log, 10).await;
    let mut expected: Vec<_> = records.iter().map(|r| r.id).collect();
    expected.sort();
    assert_eq!(store.stored_ids().await, expected);
    let fresh = record(20_000);
    log.record(fresh.clone()).await;
    drop(log);
    writer.shutdown().await;
    assert_eq!(store.invocation(&fresh.id).await.unwrap(), Some(fresh));
    assert!(
        segment_files(&journal_dir).is_empty(),
        "all committed segments deleted"
    );
}

#[tokio::test]
async fn a_failing_database_loses_nothing_keeps_memory_bounded_and_stores_each_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join("records");
    let store = Store::open_sqlite(&dir.path().join("g.db")).unwrap();
    let failing = Arc::new(AtomicBool::new(true));
    let sink = Flaky {
        store: store.clone(),
        failing: failing.clone(),
    };
    let (log, writer) = start_with(sink, Some(Journal::open(&journal_dir).unwrap())).unwrap();
    let mut expected = Vec::new();
    for round in 0..20 {
        for i in 0..250 {
            let r = record(round * 1000 + i);
            expected.push(r.id);
            log.record(r).await;
        }
        // Attempted, so answered: the records are in the backlog, not in memory.
        flush_within(&log, 5).await;
        assert!(log.sender.0.lock().messages.is_empty());
    }
    assert_eq!(journaled_lines(&journal_dir), expected.len());
    assert!(store.stored_ids().await.is_empty());

    failing.store(false, Ordering::SeqCst);
    expected.sort();
    let deadline = Instant::now() + Duration::from_secs(15);
    while store.stored_ids().await.len() < expected.len() {
        assert!(Instant::now() < deadline, "the backlog was not written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    flush_within(&log, 5).await;
    // A primary key: each record once however often it was handed over.
    assert_eq!(store.stored_ids().await, expected);
    assert_eq!(journaled_lines(&journal_dir), 0);
    drop(log);
    writer.shutdown().await;
    assert!(segment_files(&journal_dir).is_empty());
}

#[tokio::test]
async fn shutdown_with_the_database_down_leaves_the_records_for_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join("records");
    let down = Fake::default();
    down.0.failing.store(true, Ordering::SeqCst);
    let (log, writer) = start_with(down, Some(Journal::open(&journal_dir).unwrap())).unwrap();
    let records: Vec<_> = (0..700).map(record).collect();
    for r in &records {
        log.record(r.clone()).await;
    }
    drop(log);
    tokio::time::timeout(Duration::from_secs(10), writer.shutdown())
        .await
        .expect("shutdown hung");
    assert_eq!(journaled_lines(&journal_dir), records.len());

    let up = Fake::default();
    let (log, writer) = start_with(up.clone(), Some(Journal::open(&journal_dir).unwrap())).unwrap();
    flush_within(&log, 10).await;
    assert_eq!(up.stored(), records.iter().map(|r| r.id).collect());
    drop(log);
    writer.shutdown().await;
    assert!(segment_files(&journal_dir).is_empty());
}

#[tokio::test]
async fn a_slow_database_never_makes_a_request_wait() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join("records");
    let slow = Fake::default();
    slow.hold(true);
    let (log, writer) =
        start_with(slow.clone(), Some(Journal::open(&journal_dir).unwrap())).unwrap();
    let count = 3 * QUEUE_CAPACITY;
    let records: Vec<_> = (0..count as i64).map(record).collect();
    let recording = async {
        for r in &records {
            log.record(r.clone()).await;
        }
    };
    // More than the queue holds, while the writer hangs in a commit.
    tokio::time::timeout(Duration::from_secs(10), recording)
        .await
        .expect("a request waited for the database");
    assert!(log.sender.0.lock().messages.len() <= QUEUE_CAPACITY);
    slow.hold(false);
    flush_within(&log, 20).await;
    assert_eq!(slow.stored(), records.iter().map(|r| r.id).collect());
    drop(log);
    writer.shutdown().await;
    assert!(segment_files(&journal_dir).is_empty());
}

#[tokio::test]
async fn a_record_the_database_refuses_does_not_hold_up_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join("records");
    let db = Fake::default();
    let poison = record(0);
    *db.0.refused.lock().unwrap() = Some(poison.id);
    let (log, writer) = start_with(db.clone(), Some(Journal::open(&journal_dir).unwrap())).unwrap();
    let records: Vec<_> = (1..300).map(record).collect();
    log.record(poison).await;
    for r in &records {
        log.record(r.clone()).await;
    }
    flush_within(&log, 5).await;
    assert_eq!(db.stored(), records.iter().map(|r| r.id).collect());
    drop(log);
    writer.shutdown().await;
    assert!(segment_files(&journal_dir).is_empty());
}

#[test]
fn only_errors_about_the_data_drop_records() {
    let sqlite = |code| {
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            None,
        ))
    };
    assert!(!is_transient(&sqlite(rusqlite::ffi::SQLITE_CONSTRAINT)));
    assert!(is_transient(&sqlite(rusqlite::ffi::SQLITE_BUSY)));
    assert!(is_transient(&sqlite(rusqlite::ffi::SQLITE_FULL)));
    assert!(is_transient(&StoreError::Pool("refused".into())));
    assert!(is_transient(&StoreError::Task("gone".into())));
}

#[tokio::test]
async fn without_a_journal_flush_returns_even_when_the_database_fails() {
    let down = Fake::default();
    down.0.failing.store(true, Ordering::SeqCst);
    let (log, writer) = start_with(down, None).unwrap();
    log.record(record(1)).await;
    flush_within(&log, 5).await;
    drop(log);
    writer.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("g.db")).unwrap();
    let (log, writer) = InvocationLog::start(store.clone(), None).unwrap();
    let r = record(2);
    log.record(r.clone()).await;
    flush_within(&log, 5).await;
    assert_eq!(store.invocation(&r.id).await.unwrap(), Some(r));
    drop(log);
    writer.shutdown().await;
}

#[tokio::test]
async fn an_unwritable_journal_does_not_fail_requests() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join("records");
    let up = Fake::default();
    let mut journal = Journal::open(&journal_dir).unwrap();
    // A segment whose writes fail, as on a full disk.
    let read_only = std::fs::File::open(journal.current.as_ref().unwrap().path.clone()).unwrap();
    journal.current = Some(Segment::for_test(
        journal.current.take().unwrap(),
        read_only,
    ));
    let (log, writer) = start_with(up.clone(), Some(journal)).unwrap();
    let records: Vec<_> = (0..100).map(record).collect();
    for r in &records {
        log.record(r.clone()).await;
    }
    flush_within(&log, 5).await;
    assert_eq!(up.stored(), records.iter().map(|r| r.id).collect());
    drop(log);
    writer.shutdown().await;
}

/// Per-record cost of `record()` on the request path, with and without
/// the journal: `cargo test --release -p gateway --lib store::writer -- --ignored --nocapture`.
#[tokio::test(flavor = "current_thread")]
#[ignore = "a measurement"]
async fn measure_record_cost() {
    const N: usize = 200_000;
    for (body_bytes, with_journal) in [(1000, false), (1000, true), (100, false), (100, true)] {
        let body = "x".repeat(body_bytes);
        let sample = |n: i64| Invocation {
            request: Some(format!("{{\"prompt\":\"{body}\"}}")),
            response: Some(format!("{{\"text\":\"{body}\"}}")),
            ..record(n)
        };
        let dir = tempfile::tempdir().unwrap();
        let journal = with_journal.then(|| Journal::open(&dir.path().join("records")).unwrap());
        let (log, writer) = start_with(Fake::default(), journal).unwrap();
        let records: Vec<_> = (0..N as i64).map(sample).collect();
        let started = Instant::now();
        for r in records {
            log.record(r).await;
        }
        let elapsed = started.elapsed();
        drop(log);
        writer.shutdown().await;
        let encode_started = Instant::now();
        let mut bytes = 0;
        for i in 0..N as i64 {
            bytes += journal::encode(&sample(i)).unwrap().len();
        }
        let with_sample = encode_started.elapsed();
        let sample_started = Instant::now();
        for i in 0..N as i64 {
            std::hint::black_box(sample(i));
        }
        let encode = with_sample.saturating_sub(sample_started.elapsed());
        println!(
            "journal={with_journal}: record() {:.0} ns/record ({} B lines; encoding alone {:.0} ns)",
            elapsed.as_nanos() as f64 / N as f64,
            bytes / N,
            encode.as_nanos() as f64 / N as f64,
        );
    }
}
