//! The `sink` import: `complete_stream`'s partial results, handed to the
//! caller as the plugin produces them.

use super::PluginState;
use crate::plugins::wit::{sink, types};

impl sink::Host for PluginState {
    async fn send(&mut self, chunk: types::Chunk) -> Result<(), ()> {
        match &self.sink {
            Some(sink) => sink.send(chunk.into()).await.map_err(|_| ()),
            // `complete` (not streaming) has no caller to send to; the text is in its result.
            None => Ok(()),
        }
    }
}
