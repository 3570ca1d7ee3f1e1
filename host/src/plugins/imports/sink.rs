//! The `sink` import: `complete_stream`'s partial results, handed to the
//! caller as the plugin produces them.

use super::PluginState;
use crate::plugins::types::Chunk;
use crate::plugins::wit::{sink, types};

impl PluginState {
    /// Hands `chunk` to the caller; an error when the caller is gone.
    pub(in crate::plugins) async fn send_chunk(&mut self, chunk: Chunk) -> Result<(), ()> {
        match &self.sink {
            Some(sink) => sink.send(chunk).await.map_err(|_| ()),
            // `complete` (not streaming) has no caller to send to; the text is in its result.
            None => Ok(()),
        }
    }
}

impl sink::Host for PluginState {
    async fn send(&mut self, chunk: types::Chunk) -> Result<(), ()> {
        self.send_chunk(chunk.into()).await
    }
}
