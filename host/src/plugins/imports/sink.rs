//! The `sink` import: `complete_stream`'s partial results, and `speak`'s audio, handed to the
//! caller as the plugin produces them.

use bytes::Bytes;
use tokio::sync::mpsc;

use super::PluginState;
use crate::plugins::types::Chunk;
use crate::plugins::wit::{sink, types};

/// Where a call's partial results go: one kind per call, so a plugin that sends the other
/// kind (text while it speaks, audio while it completes) sends to nobody.
pub enum Sink {
    /// A streamed completion's chunks.
    Chunks(mpsc::Sender<Chunk>),
    /// A speech's audio, as the plugin sends it.
    Audio(mpsc::Sender<Bytes>),
}

impl PluginState {
    /// Hands `chunk` to the caller; an error when the caller is gone.
    pub(in crate::plugins) async fn send_chunk(&mut self, chunk: Chunk) -> Result<(), ()> {
        match &self.sink {
            Some(Sink::Chunks(sink)) => sink.send(chunk).await.map_err(|_| ()),
            // `complete` (not streaming) has no caller to send to; the text is in its result.
            Some(Sink::Audio(_)) | None => Ok(()),
        }
    }

    /// Hands `bytes` of audio to the caller; an error when the caller is gone.
    async fn send_audio(&mut self, bytes: Vec<u8>) -> Result<(), ()> {
        match &self.sink {
            Some(Sink::Audio(sink)) if !bytes.is_empty() => {
                sink.send(Bytes::from(bytes)).await.map_err(|_| ())
            }
            // Only `speak` has a caller waiting for audio.
            _ => Ok(()),
        }
    }
}

impl sink::Host for PluginState {
    async fn send(&mut self, chunk: types::Chunk) -> Result<(), ()> {
        self.send_chunk(chunk.into()).await
    }

    async fn send_audio(&mut self, bytes: Vec<u8>) -> Result<(), ()> {
        PluginState::send_audio(self, bytes).await
    }
}
