//! Invocation records leave the request path through a queue and are written
//! in batches: one transaction for whatever has queued up since the last one.
//!
//! Nothing is dropped: a full queue makes the sender wait (backpressure), and
//! shutdown drains the queue before the process exits.

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::{Invocation, Store};

/// Most records per transaction; bounds the time one commit holds the writer.
const MAX_BATCH: usize = 512;
const QUEUE_CAPACITY: usize = 8192;

enum Message {
    Record(Box<Invocation>),
    /// Answered once everything queued before it is committed.
    Flush(oneshot::Sender<()>),
}

/// Handle for recording invocations; cheap to clone.
#[derive(Clone)]
pub struct InvocationLog {
    tx: mpsc::Sender<Message>,
}

/// Owns the writer task; [`InvocationWriter::shutdown`] waits for the queue to drain.
pub struct InvocationWriter {
    task: JoinHandle<()>,
}

impl InvocationLog {
    /// Starts the writer task on the current runtime.
    pub fn start(store: Store) -> (InvocationLog, InvocationWriter) {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let task = tokio::spawn(write_loop(store, rx));
        (InvocationLog { tx }, InvocationWriter { task })
    }

    pub async fn record(&self, invocation: Invocation) {
        let id = invocation.id;
        if self
            .tx
            .send(Message::Record(Box::new(invocation)))
            .await
            .is_err()
        {
            // Only possible once shutdown has finished draining, after every request ended.
            tracing::error!(invocation_id = %id, "invocation log closed; record lost");
        }
    }

    /// Waits until every record queued so far is committed.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Message::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

impl InvocationWriter {
    /// Waits for every queued record to be written. Call after all
    /// [`InvocationLog`] handles are dropped, or it waits for them.
    pub async fn shutdown(self) {
        if let Err(e) = self.task.await {
            tracing::error!("invocation writer failed: {e}");
        }
    }
}

async fn write_loop(store: Store, mut rx: mpsc::Receiver<Message>) {
    let mut batch = Vec::new();
    let mut waiting = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                Message::Record(invocation) => batch.push(*invocation),
                Message::Flush(done) => waiting.push(done),
            }
            next = if batch.len() < MAX_BATCH {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        if !batch.is_empty() {
            write_batch(&store, std::mem::take(&mut batch)).await;
        }
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

async fn write_batch(store: &Store, batch: Vec<Invocation>) {
    let count = batch.len();
    let batch = std::sync::Arc::new(batch);
    // One retry covers a transient SQLITE_BUSY beyond the busy timeout; after that the
    // records are logged so an operator can still see what was lost.
    for attempt in 0..2 {
        match store.insert_invocations(batch.clone()).await {
            Ok(()) => return,
            Err(e) if attempt == 0 => {
                tracing::warn!("writing {count} invocation records failed, retrying: {e}")
            }
            Err(e) => {
                for inv in batch.iter() {
                    tracing::error!(invocation_id = %inv.id, status = inv.status.as_str(),
                        http_status = inv.http_status, "invocation record not stored: {e}");
                }
            }
        }
    }
}
