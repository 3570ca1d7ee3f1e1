//! Invocation records leave the request path through a queue and are written
//! in batches by one dedicated thread: one transaction for whatever has
//! queued up since the last one.
//!
//! A request only appends to the queue under a short lock. The writer is
//! woken only when it sleeps with nothing to do; while records keep coming it
//! commits, pauses [`COALESCE`] and takes the next batch without being
//! signalled, so a busy gateway pays no wakeup per record (a `spawn_blocking`
//! per batch, or a channel whose every send wakes a task, cost several
//! context switches per request; see BENCHMARKS.md). A flush ends the pause.
//!
//! With a [`Journal`], a request also writes its record to the journal's
//! current segment under that same lock, before its answer is sent; so the
//! queue's order is the segment's, and the records the writer takes are
//! exactly those of the segment it closes as it takes them (it creates the
//! next segment before taking the lock, which then only swaps files). Once
//! they are committed the segment is deleted. When a commit fails (the
//! database is down or slow) the segment stays on disk as backlog, the
//! records in memory are dropped, and the writer replays the backlog, oldest
//! first, with exponential backoff; so memory stays bounded, requests never
//! wait for the database, and a record is lost only with the disk (or when
//! the database refuses the record itself, e.g. a value it cannot store: that
//! one is logged, and the rest of its batch stored). The backlog an earlier
//! process left is replayed the same way, in the background.
//!
//! Without a journal nothing is dropped either while the process lives: a
//! full queue makes the sender wait (backpressure), and shutdown drains the
//! queue before the process exits.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use super::journal::{self, Journal, Segment, SegmentReader};
use super::{Invocation, Store, StoreError};

/// Most records per transaction; bounds the time one commit holds the database.
const MAX_BATCH: usize = 512;
const QUEUE_CAPACITY: usize = 8192;
/// How long the writer lets records gather after a commit before the next:
/// a record waits at most this (plus a commit) before it is stored, unless a
/// flush asks for it. Each commit and journal segment has a fixed cost (the
/// B-tree pages it rewrites into SQLite's WAL, a file created, closed and
/// deleted): under saturating load the writer thread's CPU per request fell
/// by ~40% from 2 ms to 20 ms (BENCHMARKS.md, issue 25).
const COALESCE: Duration = Duration::from_millis(20);
/// The backlog's retry delay after the first failed commit, doubling up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// While the database is down, records stay in one segment (a file per batch
/// would be thousands of files a minute); past this size it is closed so that
/// the backlog is replayed and deleted piece by piece.
const ROTATE_BYTES: u64 = 64 << 20;
/// Journal file errors are logged at most this often, not once per record.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// How long shutdown keeps replaying backlog; the rest waits for the next start.
const SHUTDOWN_REPLAY: Duration = Duration::from_secs(3);

/// Where batches go: the [`Store`], or in tests a sink that fails on demand.
trait Sink: Send + 'static {
    /// Commits `batch` in one transaction; records already stored are skipped.
    fn commit(&self, batch: &[Invocation]) -> Result<(), StoreError>;
}

impl Sink for Store {
    fn commit(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        self.insert_invocations(batch)
    }
}

enum Message {
    Record {
        invocation: Box<Invocation>,
        /// Written to the journal's current segment.
        journaled: bool,
    },
    /// Answered once everything queued before it was attempted.
    Flush(oneshot::Sender<()>),
}

struct Queue {
    messages: Vec<Message>,
    /// The writer is waiting on the condvar and must be signalled.
    writer_asleep: bool,
    /// The writer is letting records gather ([`Shared::pause`]): only a flush or
    /// closing signals it.
    writer_pausing: bool,
    /// Every [`InvocationLog`] is gone: drain and stop.
    closed: bool,
    /// The journal segment requests append to; `None` without a journal.
    segment: Option<Segment>,
    /// Lines appended to `segment`, and their bytes.
    segment_records: u64,
    segment_bytes: u64,
    /// Every record in `segment` is also in `messages`, so committing those
    /// makes the segment deletable. Cleared when a record goes only to the
    /// segment (a full queue) or records are taken without closing it.
    segment_clean: bool,
    /// Appends that failed since the writer last looked, and the last error.
    append_failures: u64,
    append_error: Option<String>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake_writer: Condvar,
    /// Senders waiting for room in a full queue.
    room: Notify,
    /// A journal is open: requests encode their records for it.
    journaled: bool,
    /// Commits the database failed or records it refused, since start (for the metrics).
    write_failures: std::sync::atomic::AtomicU64,
}

/// What the writer has still to do and what failed, as the metrics show it.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriterStats {
    /// Records in memory waiting for the database (not counting a journal backlog on disk).
    pub queued: u64,
    pub write_failures: u64,
}

impl Queue {
    fn has_flush(&self) -> bool {
        self.messages
            .iter()
            .any(|message| matches!(message, Message::Flush(_)))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self, queue: &mut Queue) {
        if queue.writer_asleep {
            queue.writer_asleep = false;
            self.wake_writer.notify_one();
        }
    }

    /// Journals (when `line` is given) and queues a record. Gives it back
    /// when the queue is full and the record is not safe in the journal.
    fn push_record(
        &self,
        invocation: Box<Invocation>,
        line: Option<&Result<Vec<u8>, String>>,
    ) -> Result<(), Box<Invocation>> {
        let mut guard = self.lock();
        let queue = &mut *guard;
        let mut journaled = false;
        if let (Some(line), Some(segment)) = (line, queue.segment.as_mut()) {
            let appended = match line {
                Ok(line) => segment
                    .append(line)
                    .map(|()| line.len())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.clone()),
            };
            match appended {
                Ok(bytes) => {
                    journaled = true;
                    queue.segment_records += 1;
                    queue.segment_bytes += bytes as u64;
                }
                Err(e) => {
                    queue.append_failures += 1;
                    queue.append_error = Some(e);
                }
            }
        }
        if queue.messages.len() >= QUEUE_CAPACITY {
            if !journaled {
                return Err(invocation);
            }
            // Safe on disk: the writer replays it from the segment rather
            // than this request waiting for a slow database.
            queue.segment_clean = false;
        } else {
            queue.messages.push(Message::Record {
                invocation,
                journaled,
            });
        }
        self.wake(queue);
        Ok(())
    }

    fn push_flush(&self, done: oneshot::Sender<()>) {
        let mut queue = self.lock();
        queue.messages.push(Message::Flush(done));
        if queue.writer_pausing {
            self.wake_writer.notify_one();
        }
        self.wake(&mut queue);
    }

    /// Lets records gather for `pause` after a commit; a flush, or the last
    /// handle closing the queue, ends the pause early.
    fn pause(&self, pause: Duration) {
        let deadline = Instant::now() + pause;
        let mut queue = self.lock();
        queue.writer_pausing = true;
        // Checked on waking only (a timeout, a flush, closing): not once per record.
        while !queue.closed && !queue.has_flush() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            queue = self
                .wake_writer
                .wait_timeout(queue, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        queue.writer_pausing = false;
    }
}

/// Closes the queue when the last [`InvocationLog`] clone is dropped.
struct Sender(Arc<Shared>);

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.wake_writer.notify_one();
    }
}

/// Handle for recording invocations; cheap to clone.
#[derive(Clone)]
pub struct InvocationLog {
    sender: Arc<Sender>,
}

/// Owns the writer thread; [`InvocationWriter::shutdown`] waits for the queue to drain.
pub struct InvocationWriter {
    done: oneshot::Receiver<()>,
}

impl InvocationLog {
    /// Starts the writer thread, which writes to `store` through `journal`
    /// (and replays the backlog the journal holds), or straight to `store`
    /// without one.
    pub fn start(
        store: Store,
        journal: Option<Journal>,
    ) -> std::io::Result<(InvocationLog, InvocationWriter)> {
        start_with(store, journal)
    }

    /// The records waiting in memory and the writes that failed, read now.
    pub fn stats(&self) -> WriterStats {
        let shared = &self.sender.0;
        let queued = shared
            .lock()
            .messages
            .iter()
            .filter(|message| matches!(message, Message::Record { .. }))
            .count();
        WriterStats {
            queued: queued as u64,
            write_failures: shared
                .write_failures
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Records `invocation`: with a journal, it is on disk when this returns.
    pub async fn record(&self, invocation: Invocation) {
        let shared = &self.sender.0;
        // Encoded outside the lock: the lock covers one write and a push.
        let line = shared
            .journaled
            .then(|| journal::encode(&invocation).map_err(|e| e.to_string()));
        let mut invocation = Box::new(invocation);
        loop {
            // Registered before trying, so room made in between is not missed.
            let room = shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match shared.push_record(invocation, line.as_ref()) {
                Ok(()) => return,
                Err(back) => invocation = back,
            }
            room.await;
        }
    }

    /// Waits until every record queued so far was attempted: committed, or
    /// (the database failing) kept in the journal's backlog. While the
    /// database takes records, it also waits for the backlog to be written,
    /// so that a reader after it sees what an earlier process journaled.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        // A flush marker never waits for room: it carries no data.
        self.sender.0.push_flush(done);
        let _ = wait.await;
    }
}

impl InvocationWriter {
    /// Waits for every queued record to be written (or, the database
    /// failing, left in the journal). Call after all [`InvocationLog`]
    /// handles are dropped, or it waits for them.
    pub async fn shutdown(self) {
        if self.done.await.is_err() {
            tracing::error!("the invocation writer thread ended abnormally");
        }
    }
}

fn start_with<S: Sink>(
    sink: S,
    journal: Option<Journal>,
) -> std::io::Result<(InvocationLog, InvocationWriter)> {
    let mut journal = journal;
    let segment = journal.as_mut().and_then(|j| j.current.take());
    let shared = Arc::new(Shared {
        journaled: segment.is_some(),
        queue: Mutex::new(Queue {
            messages: Vec::new(),
            writer_asleep: false,
            writer_pausing: false,
            closed: false,
            segment,
            segment_records: 0,
            segment_bytes: 0,
            segment_clean: true,
            append_failures: 0,
            append_error: None,
        }),
        wake_writer: Condvar::new(),
        room: Notify::new(),
        write_failures: std::sync::atomic::AtomicU64::new(0),
    });
    let (finished, done) = oneshot::channel();
    let mut writer = Writer {
        sink,
        shared: shared.clone(),
        journal,
        spare: None,
        reader: None,
        pending: Vec::new(),
        outage: None,
        replayed: 0,
        flushes: Vec::new(),
        append_errors: Throttle::default(),
        file_errors: Throttle::default(),
    };
    std::thread::Builder::new()
        .name("invocation-writer".into())
        .spawn(move || {
            writer.run();
            // Dropped before shutdown is told: the journal's lock goes with it, and a
            // journal opened again after `shutdown` must not find it still held.
            drop(writer);
            let _ = finished.send(());
        })?;
    let log = InvocationLog {
        sender: Arc::new(Sender(shared)),
    };
    Ok((log, InvocationWriter { done }))
}

/// The database failed a commit; records go to the backlog until a retry
/// of it succeeds.
struct Outage {
    retry_at: Instant,
    delay: Duration,
    /// Records moved to the backlog since it began, for the log.
    backlogged: u64,
}

/// What one turn took from the queue.
struct Taken {
    records: Vec<Invocation>,
    /// Records that are in no segment (their append failed).
    unjournaled: Vec<usize>,
    /// The segment closed by this take: it holds exactly `records` when clean.
    closed: Option<(Segment, bool)>,
    any_message: bool,
    append_failures: u64,
    append_error: Option<String>,
}

/// Rate-limits an error log: counts what it does not log.
#[derive(Default)]
struct Throttle {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    /// Whether to log now, and how many occurrences the log covers.
    fn due(&mut self, count: u64) -> Option<u64> {
        self.suppressed += count;
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < ERROR_LOG_INTERVAL)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

struct Writer<S> {
    sink: S,
    shared: Arc<Shared>,
    /// The backlog and the segment numbering; `None` without a journal.
    journal: Option<Journal>,
    /// The next segment, created before the lock is taken.
    spare: Option<Segment>,
    /// The backlog segment being replayed (the backlog's front).
    reader: Option<SegmentReader>,
    /// Backlog records read and not yet committed.
    pending: Vec<Invocation>,
    outage: Option<Outage>,
    /// Records written from the backlog since it was last empty.
    replayed: u64,
    /// Flushes whose records were attempted, waiting for the backlog.
    flushes: Vec<oneshot::Sender<()>>,
    append_errors: Throttle,
    file_errors: Throttle,
}

impl<S: Sink> Writer<S> {
    fn run(&mut self) {
        while let Some(taken) = self.take() {
            let any_message = taken.any_message;
            if self.journal.is_some() {
                self.write_journaled(taken);
                self.replay_step();
            } else {
                for chunk in taken.records.chunks(MAX_BATCH) {
                    write_batch(&self.sink, chunk);
                }
            }
            let waiting = !self.flushes.is_empty();
            self.answer_flushes();
            if any_message && !waiting {
                self.shared.pause(COALESCE);
            }
        }
        self.finish();
    }

    fn has_backlog(&self) -> bool {
        !self.pending.is_empty() || self.journal.as_ref().is_some_and(|j| !j.backlog.is_empty())
    }

    /// Waits for work and takes the queue; `None` once it is closed and empty.
    fn take(&mut self) -> Option<Taken> {
        if self.spare.is_none()
            && let Some(journal) = self.journal.as_mut()
        {
            match journal.create_segment() {
                Ok(segment) => self.spare = Some(segment),
                Err(e) => {
                    if let Some(n) = self.file_errors.due(1) {
                        tracing::error!(dir = %journal.dir().display(), occurrences = n,
                            "cannot create an invocation journal segment: {e}");
                    }
                }
            }
        }
        let has_backlog = self.has_backlog();
        let mut queue = self.shared.lock();
        if self.outage.is_some() && !has_backlog && queue.segment_records == 0 {
            // Nothing is waiting for the database: the next batch finds out whether it is back.
            self.outage = None;
        }
        // Backlog to replay is work to do now, or (the database failing) at the next retry.
        let deadline = match &self.outage {
            Some(outage) => Some(outage.retry_at),
            None if has_backlog => Some(Instant::now()),
            None => None,
        };
        while queue.messages.is_empty() && !queue.closed {
            let now = Instant::now();
            match deadline {
                Some(at) if at <= now => break,
                Some(at) => {
                    queue.writer_asleep = true;
                    queue = self
                        .shared
                        .wake_writer
                        .wait_timeout(queue, at - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                None => {
                    queue.writer_asleep = true;
                    queue = self
                        .shared
                        .wake_writer
                        .wait(queue)
                        .unwrap_or_else(|p| p.into_inner());
                }
            }
        }
        queue.writer_asleep = false;
        if queue.messages.is_empty() && queue.closed {
            return None;
        }

        // While the database fails, the segment is kept (and records are
        // dropped from memory) until a retry is due with no other backlog to
        // probe with, the segment is big, or the process stops.
        let retry_due = self
            .outage
            .as_ref()
            .is_none_or(|o| o.retry_at <= Instant::now());
        let rotate = queue.segment_records > 0
            && self.spare.is_some()
            && (self.outage.is_none()
                || queue.closed
                || queue.segment_bytes >= ROTATE_BYTES
                || (retry_due && !has_backlog));
        let closed = if rotate {
            let clean = std::mem::replace(&mut queue.segment_clean, true);
            queue.segment_records = 0;
            queue.segment_bytes = 0;
            std::mem::replace(&mut queue.segment, self.spare.take()).map(|s| (s, clean))
        } else {
            if queue.segment_records > 0 {
                queue.segment_clean = false;
            }
            None
        };
        let messages = std::mem::take(&mut queue.messages);
        let append_failures = std::mem::take(&mut queue.append_failures);
        let append_error = queue.append_error.take();
        drop(queue);
        self.shared.room.notify_waiters();

        let mut taken = Taken {
            records: Vec::with_capacity(messages.len()),
            unjournaled: Vec::new(),
            closed,
            any_message: !messages.is_empty(),
            append_failures,
            append_error,
        };
        for message in messages {
            match message {
                Message::Record {
                    invocation,
                    journaled,
                } => {
                    if !journaled && self.journal.is_some() {
                        taken.unjournaled.push(taken.records.len());
                    }
                    taken.records.push(*invocation);
                }
                Message::Flush(done) => self.flushes.push(done),
            }
        }
        Some(taken)
    }

    fn write_journaled(&mut self, mut taken: Taken) {
        if taken.append_failures > 0
            && let Some(n) = self.append_errors.due(taken.append_failures)
        {
            let error = taken.append_error.as_deref().unwrap_or("unknown error");
            tracing::error!(
                records = n,
                "invocation records could not be written to the journal ({error}): they are \
                 written to the database from memory, and would be lost if the process died first"
            );
        }
        let committed = if taken.records.is_empty() {
            true
        } else if self.outage.is_none() {
            self.commit_live(&taken.records)
        } else {
            false
        };
        if !committed {
            if let Some(outage) = self.outage.as_mut() {
                outage.backlogged += taken.records.len() as u64;
            }
            if !taken.unjournaled.is_empty() {
                self.journal_again(&taken.records, &taken.unjournaled, taken.closed.as_mut());
            }
        }
        if let Some((segment, clean)) = taken.closed {
            let Segment { path, .. } = segment;
            if committed && clean {
                if let Err(e) = std::fs::remove_file(&path) {
                    // Replayed at the next start: a duplicate is skipped.
                    self.file_error(&path, &e);
                }
            } else if let Some(journal) = self.journal.as_mut() {
                journal.backlog.push_back(path);
            }
        }
    }

    fn commit_live(&mut self, records: &[Invocation]) -> bool {
        records
            .chunks(MAX_BATCH)
            .all(|chunk| self.commit_isolating(chunk))
    }

    /// Commits `batch`; true unless the database is failing (then the
    /// outage begins or goes on). A batch the database rejects for what it
    /// holds is committed record by record, and the records it refuses are
    /// logged and dropped: kept, one such record would stop every other.
    fn commit_isolating(&mut self, batch: &[Invocation]) -> bool {
        match self.sink.commit(batch) {
            Ok(()) => return true,
            Err(e) if is_transient(&e) => {
                self.failed(&e);
                return false;
            }
            Err(_) => {}
        }
        for record in batch {
            match self.sink.commit(std::slice::from_ref(record)) {
                Ok(()) => {}
                Err(e) if is_transient(&e) => {
                    self.failed(&e);
                    return false;
                }
                Err(e) => {
                    self.shared
                        .write_failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::error!(invocation_id = %record.id,
                    status = record.status.as_str(), http_status = record.http_status,
                    "invocation record not stored: the database refuses it: {e}")
                }
            }
        }
        true
    }

    /// Writes records whose append failed to the backlog after all, so that a
    /// failing database does not lose them; logs those it cannot.
    fn journal_again(
        &mut self,
        records: &[Invocation],
        indices: &[usize],
        closed: Option<&mut (Segment, bool)>,
    ) {
        let lines = indices.iter().map(|&i| (i, journal::encode(&records[i])));
        let mut lost = Vec::new();
        match closed {
            // Ours alone now: no lock needed.
            Some((segment, _)) => {
                for (i, line) in lines {
                    if line.ok().and_then(|l| segment.append(&l).ok()).is_none() {
                        lost.push(i);
                    }
                }
            }
            None => {
                let mut guard = self.shared.lock();
                let queue = &mut *guard;
                for (i, line) in lines {
                    let appended = match (line, queue.segment.as_mut()) {
                        (Ok(line), Some(segment)) => segment.append(&line).is_ok(),
                        _ => false,
                    };
                    if appended {
                        queue.segment_records += 1;
                        queue.segment_clean = false;
                    } else {
                        lost.push(i);
                    }
                }
            }
        }
        for i in lost {
            let inv = &records[i];
            tracing::error!(invocation_id = %inv.id, status = inv.status.as_str(),
                http_status = inv.http_status,
                "invocation record not stored: neither the database nor the journal took it");
        }
    }

    /// Commits the next chunk of backlog, when the database is taking
    /// records or a retry is due.
    fn replay_step(&mut self) {
        if self
            .outage
            .as_ref()
            .is_some_and(|o| o.retry_at > Instant::now())
        {
            return;
        }
        if self.pending.is_empty() {
            self.pending = self.read_backlog();
            if self.pending.is_empty()
                && let Some(outage) = self.outage.as_mut()
            {
                // Nothing to retry with yet: wait a delay rather than spin.
                outage.retry_at = Instant::now() + outage.delay;
            }
        }
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            if self.commit_isolating(&pending) {
                self.replayed += pending.len() as u64;
                if let Some(outage) = self.outage.take() {
                    tracing::info!(
                        backlogged = outage.backlogged,
                        "the database takes invocation records again: writing the journal's \
                         backlog"
                    );
                }
            } else {
                self.pending = pending;
            }
        }
        if self.replayed > 0 && !self.has_backlog() {
            tracing::info!(
                "{} invocation records written from the journal",
                self.replayed
            );
            self.replayed = 0;
        }
    }

    /// The next chunk of the oldest backlog segment; deletes segments read
    /// to their end (everything read before was committed).
    fn read_backlog(&mut self) -> Vec<Invocation> {
        loop {
            let Some(journal) = self.journal.as_mut() else {
                return Vec::new();
            };
            let Some(path) = journal.backlog.front().cloned() else {
                return Vec::new();
            };
            let reader = match self.reader.as_mut() {
                Some(reader) => reader,
                None => match SegmentReader::open(&path) {
                    Ok(reader) => self.reader.insert(reader),
                    Err(e) => {
                        // Left on disk for the next start; this process cannot read it.
                        journal.backlog.pop_front();
                        self.file_error(&path, &e);
                        continue;
                    }
                },
            };
            match reader.next_chunk(MAX_BATCH) {
                Ok(chunk) if !chunk.is_empty() => return chunk,
                Ok(_) => {
                    if let Err(e) = std::fs::remove_file(reader.path()) {
                        self.file_error(&path, &e);
                    }
                }
                Err(e) => self.file_error(&path, &e),
            }
            self.reader = None;
            if let Some(journal) = self.journal.as_mut() {
                journal.backlog.pop_front();
            }
        }
    }

    fn failed(&mut self, error: &StoreError) {
        self.shared
            .write_failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = Instant::now();
        match self.outage.as_mut() {
            Some(outage) => {
                outage.delay = (outage.delay * 2).min(RETRY_MAX);
                outage.retry_at = now + outage.delay;
                tracing::debug!("invocation backlog retry failed: {error}");
            }
            None => {
                let dir = self.journal.as_ref().map(|j| j.dir().display().to_string());
                tracing::warn!(
                    journal = dir.as_deref().unwrap_or("-"),
                    "the database does not take invocation records ({error}): keeping them in \
                     the journal and retrying"
                );
                self.outage = Some(Outage {
                    retry_at: now + RETRY_FIRST,
                    delay: RETRY_FIRST,
                    backlogged: 0,
                });
            }
        }
    }

    fn file_error(&mut self, path: &Path, error: &std::io::Error) {
        if let Some(n) = self.file_errors.due(1) {
            tracing::error!(file = %path.display(), occurrences = n,
                "invocation journal: {error}");
        }
    }

    /// Flushes are answered once the backlog is written, or cannot be now.
    fn answer_flushes(&mut self) {
        if self.outage.is_some() || !self.has_backlog() {
            for done in self.flushes.drain(..) {
                let _ = done.send(());
            }
        }
    }

    /// After the last take: replays backlog for a moment, then leaves the
    /// rest (and any uncommitted segment) on disk for the next start.
    fn finish(&mut self) {
        if self.journal.is_some() {
            let until = Instant::now() + SHUTDOWN_REPLAY;
            // One attempt even during an outage: the database may be back.
            if let Some(outage) = self.outage.as_mut() {
                outage.retry_at = Instant::now();
            }
            while self.has_backlog() && Instant::now() < until {
                self.replay_step();
                if self.outage.is_some() {
                    break;
                }
            }
            let current = {
                let mut queue = self.shared.lock();
                let records = queue.segment_records;
                queue.segment.take().map(|s| (s, records))
            };
            let spare = self.spare.take().map(|s| (s, 0));
            for (segment, records) in current.into_iter().chain(spare) {
                if records == 0 {
                    if let Err(e) = std::fs::remove_file(&segment.path) {
                        self.file_error(&segment.path, &e);
                    }
                } else if let Some(journal) = self.journal.as_mut() {
                    journal.backlog.push_back(segment.path);
                }
            }
            self.reader = None;
            if let Some(journal) = &self.journal
                && !journal.backlog.is_empty()
            {
                tracing::warn!(dir = %journal.dir().display(),
                    "{} invocation journal segment(s) not yet in the database: the next start \
                     writes them", journal.backlog.len());
            }
        }
        for done in self.flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Whether a failed commit may succeed later unchanged (the database is
/// down, busy, misconfigured or out of resources) rather than refusing what
/// the batch holds. Only errors about the data count as refusals: a wrong
/// one drops records, so anything else waits in the journal.
fn is_transient(error: &StoreError) -> bool {
    match error {
        // Data exception (e.g. a NUL in text), integrity constraint, a program
        // limit (a value too large).
        StoreError::Postgres(e) => !e
            .code()
            .is_some_and(|code| matches!(code.code().get(..2), Some("22" | "23" | "54"))),
        StoreError::Sqlite(e) => {
            use rusqlite::ErrorCode as C;
            !matches!(
                e.sqlite_error_code(),
                Some(C::ConstraintViolation | C::TypeMismatch | C::TooBig)
            )
        }
        StoreError::UnknownProject(_) => false,
        _ => true,
    }
}

fn write_batch<S: Sink>(sink: &S, batch: &[Invocation]) {
    let count = batch.len();
    // One retry covers a transient SQLITE_BUSY beyond the busy timeout; after that the
    // records are logged so an operator can still see what was lost.
    for attempt in 0..2 {
        match sink.commit(batch) {
            Ok(()) => return,
            Err(e) if attempt == 0 => {
                tracing::warn!("writing {count} invocation records failed, retrying: {e}")
            }
            Err(e) => {
                for inv in batch {
                    tracing::error!(invocation_id = %inv.id, status = inv.status.as_str(),
                        http_status = inv.http_status, "invocation record not stored: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
