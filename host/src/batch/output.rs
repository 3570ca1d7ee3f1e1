//! A finished batch's files: its lines' answers in order, written to the store a chunk at a
//! time as `batch_output` files. OpenAI's batch has the 2xx ones in its output file and the
//! rest (with the lines never run) in its error file; Anthropic's has every line's result in
//! one file, its results.

use bytes::BytesMut;

use crate::clock::now_ms;
use crate::state::AppState;
use crate::store::{
    BatchStatus, CHUNK_BYTES, Finished, FinishedUpload, NewUpload, RunningBatch, StoreError,
};
use crate::surfaces::{anthropic, openai};

/// Lines read from the store at a time.
const PAGE: u32 = 500;

/// Writes `batch`'s files: the end it reached, with them.
pub(super) async fn write(state: &AppState, batch: &RunningBatch) -> Result<Finished, StoreError> {
    // Read after the batch was marked finishing: a cancel that came since the runner's look is
    // in its status (the mark keeps `cancelling`).
    let stored = state.store.batch(&batch.project_id, &batch.id).await?;
    let cancelled =
        stored.as_ref().map_or(batch.status, |stored| stored.status) == BatchStatus::Cancelling;
    let expires_secs = stored
        .and_then(|stored| stored.output_expires_secs)
        .unwrap_or(openai::batches::OUTPUT_FILE_SECS);
    let messages = batch.endpoint == anthropic::batches::ENDPOINT;
    let mut output = Writer::new(
        batch,
        if messages { "results" } else { "output" },
        expires_secs,
    );
    let mut errors = Writer::new(batch, "error", expires_secs);
    let (mut completed, mut failed, mut closed, mut expired) = (0u64, 0u64, 0u64, false);
    let mut after = -1i64;
    loop {
        let page = state.store.line_results(&batch.id, after, PAGE).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = i64::from(last.seq);
        for line in page {
            let text = match (line.result, line.error_code.as_deref()) {
                (Some(result), _) => result,
                (None, code) => {
                    let is_expired = code == Some("batch_expired");
                    expired |= is_expired;
                    closed += 1;
                    if messages {
                        anthropic::batches::never_run_line(&line.custom_id, is_expired)
                    } else {
                        openai::batches::never_run_line(&line.custom_id, is_expired)
                    }
                }
            };
            if line.ok {
                completed += 1;
            } else {
                failed += 1;
            }
            if line.ok || messages {
                output.push(state, &text).await?;
            } else {
                errors.push(state, &text).await?;
            }
        }
    }
    let status = if cancelled {
        BatchStatus::Cancelled
    } else if expired {
        BatchStatus::Expired
    } else {
        BatchStatus::Completed
    };
    Ok(Finished {
        status,
        at_ms: now_ms(),
        output_file_id: output.finish(state).await?,
        error_file_id: errors.finish(state).await?,
        completed,
        failed,
        closed,
    })
}

/// One of a batch's files, begun at its first line.
struct Writer {
    project_id: String,
    filename: String,
    expires_secs: i64,
    upload: Option<NewUpload>,
    chunk: BytesMut,
    seq: u32,
    bytes: u64,
}

impl Writer {
    fn new(batch: &RunningBatch, which: &str, expires_secs: i64) -> Writer {
        Writer {
            project_id: batch.project_id.clone(),
            filename: format!("{}_{which}.jsonl", batch.id),
            expires_secs,
            upload: None,
            chunk: BytesMut::new(),
            seq: 0,
            bytes: 0,
        }
    }

    async fn push(&mut self, state: &AppState, line: &str) -> Result<(), StoreError> {
        if self.upload.is_none() {
            let upload = NewUpload {
                id: format!("file-{}", uuid::Uuid::now_v7().simple()),
                project_id: self.project_id.clone(),
                created_at_ms: now_ms(),
                // Written by the gateway, not the caller: a batch's answers are kept whatever
                // the project's quota (they count in it once whole).
                reserved: 0,
            };
            state.store.begin_upload(&upload, u64::MAX).await?;
            self.upload = Some(upload);
        }
        let mut data = line.as_bytes();
        self.bytes += data.len() as u64 + 1;
        while !data.is_empty() {
            let room = CHUNK_BYTES - self.chunk.len();
            let (now, later) = data.split_at(room.min(data.len()));
            self.chunk.extend_from_slice(now);
            data = later;
            self.flush_full(state).await?;
        }
        self.chunk.extend_from_slice(b"\n");
        self.flush_full(state).await
    }

    async fn flush_full(&mut self, state: &AppState) -> Result<(), StoreError> {
        if self.chunk.len() < CHUNK_BYTES {
            return Ok(());
        }
        self.flush(state).await
    }

    async fn flush(&mut self, state: &AppState) -> Result<(), StoreError> {
        let Some(upload) = &self.upload else {
            return Ok(());
        };
        if self.chunk.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.chunk, BytesMut::new()).freeze();
        state
            .store
            .put_file_chunk(&upload.id, self.seq, full)
            .await?;
        self.seq += 1;
        Ok(())
    }

    /// The file made whole; None when no line went into it.
    async fn finish(mut self, state: &AppState) -> Result<Option<String>, StoreError> {
        self.flush(state).await?;
        let Some(upload) = self.upload.take() else {
            return Ok(None);
        };
        let finished = FinishedUpload {
            filename: self.filename,
            purpose: "batch_output".into(),
            bytes: self.bytes,
            expires_at_ms: Some(
                upload
                    .created_at_ms
                    .saturating_add(self.expires_secs.saturating_mul(1000)),
            ),
        };
        let file = state.store.finish_upload(&upload, finished).await?;
        Ok(file.map(|file| file.id))
    }
}
