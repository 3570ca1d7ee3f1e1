//! Invocation records leave the request path through a queue and are written
//! in batches by one dedicated thread: one transaction for whatever has
//! queued up since the last one.
//!
//! A request only appends to the queue under a short lock. The writer is
//! woken only when it sleeps with nothing to do; while records keep coming it
//! commits, pauses [`COALESCE`] and takes the next batch without being
//! signalled, so a busy gateway pays no wakeup per record (a `spawn_blocking`
//! per batch, or a channel whose every send wakes a task, cost several
//! context switches per request; see BENCHMARKS.md).
//!
//! Nothing is dropped: a full queue makes the sender wait (backpressure), and
//! shutdown drains the queue before the process exits.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use super::{Invocation, Store};

/// Most records per transaction; bounds the time one commit holds the database.
const MAX_BATCH: usize = 512;
const QUEUE_CAPACITY: usize = 8192;
/// How long the writer lets records gather after a commit before the next:
/// a record waits at most this (plus a commit) before it is stored.
const COALESCE: Duration = Duration::from_millis(2);

enum Message {
    Record(Box<Invocation>),
    /// Answered once everything queued before it is committed.
    Flush(oneshot::Sender<()>),
}

#[derive(Default)]
struct Queue {
    messages: Vec<Message>,
    /// The writer is waiting on the condvar and must be signalled.
    writer_asleep: bool,
    /// Every [`InvocationLog`] is gone: drain and stop.
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake_writer: Condvar,
    /// Senders waiting for room in a full queue.
    room: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `message` unless the queue is full (then gives it back).
    fn push(&self, message: Message, bypass_capacity: bool) -> Result<(), Message> {
        let mut queue = self.lock();
        if !bypass_capacity && queue.messages.len() >= QUEUE_CAPACITY {
            return Err(message);
        }
        queue.messages.push(message);
        if queue.writer_asleep {
            queue.writer_asleep = false;
            self.wake_writer.notify_one();
        }
        Ok(())
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
    /// Starts the writer thread.
    pub fn start(store: Store) -> std::io::Result<(InvocationLog, InvocationWriter)> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake_writer: Condvar::new(),
            room: Notify::new(),
        });
        let (finished, done) = oneshot::channel();
        let writer_shared = shared.clone();
        std::thread::Builder::new()
            .name("invocation-writer".into())
            .spawn(move || {
                write_loop(&store, &writer_shared);
                let _ = finished.send(());
            })?;
        let log = InvocationLog {
            sender: Arc::new(Sender(shared)),
        };
        Ok((log, InvocationWriter { done }))
    }

    pub async fn record(&self, invocation: Invocation) {
        let shared = &self.sender.0;
        let mut message = Message::Record(Box::new(invocation));
        loop {
            // Registered before trying, so room made in between is not missed.
            let room = shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match shared.push(message, false) {
                Ok(()) => return,
                Err(back) => message = back,
            }
            room.await;
        }
    }

    /// Waits until every record queued so far is committed.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        // A flush marker never waits for room: it carries no data.
        if self.sender.0.push(Message::Flush(done), true).is_ok() {
            let _ = wait.await;
        }
    }
}

impl InvocationWriter {
    /// Waits for every queued record to be written. Call after all
    /// [`InvocationLog`] handles are dropped, or it waits for them.
    pub async fn shutdown(self) {
        if self.done.await.is_err() {
            tracing::error!("the invocation writer thread ended abnormally");
        }
    }
}

fn write_loop(store: &Store, shared: &Shared) {
    loop {
        let messages = {
            let mut queue = shared.lock();
            while queue.messages.is_empty() {
                if queue.closed {
                    return;
                }
                queue.writer_asleep = true;
                queue = shared
                    .wake_writer
                    .wait(queue)
                    .unwrap_or_else(|p| p.into_inner());
            }
            queue.writer_asleep = false;
            std::mem::take(&mut queue.messages)
        };
        shared.room.notify_waiters();

        let mut batch = Vec::with_capacity(messages.len().min(MAX_BATCH));
        let mut waiting = Vec::new();
        for message in messages {
            match message {
                Message::Record(invocation) => {
                    batch.push(*invocation);
                    if batch.len() == MAX_BATCH {
                        write_batch(store, &batch);
                        batch.clear();
                    }
                }
                Message::Flush(done) => waiting.push(done),
            }
        }
        if !batch.is_empty() {
            write_batch(store, &batch);
        }
        let flushed = !waiting.is_empty();
        for done in waiting {
            let _ = done.send(());
        }
        if !flushed {
            std::thread::sleep(COALESCE);
        }
    }
}

fn write_batch(store: &Store, batch: &[Invocation]) {
    let count = batch.len();
    // One retry covers a transient SQLITE_BUSY beyond the busy timeout; after that the
    // records are logged so an operator can still see what was lost.
    for attempt in 0..2 {
        match store.insert_invocations(batch) {
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
