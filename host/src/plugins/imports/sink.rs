//! The `sink` import: `complete_stream`'s partial results, handed to the
//! caller as the plugin produces them.

use super::PluginState;
use crate::plugins::types::Chunk;
use crate::plugins::wit::{sink, types};

impl sink::Host for PluginState {
    async fn send(&mut self, chunk: types::Chunk) -> Result<(), ()> {
        match &self.sink {
            Some(sink) => sink.send(chunk.into()).await.map_err(|_| ()),
            // `complete` (not streaming) has no caller to send to; the text is in its result.
            None => Ok(()),
        }
    }

    async fn send_tool_calls(&mut self, deltas: Vec<sink::ToolCallDelta>) -> Result<(), ()> {
        let chunk = Chunk {
            tool_calls: deltas.into_iter().map(Into::into).collect(),
            ..Chunk::default()
        };
        match &self.sink {
            Some(sink) => sink.send(chunk).await.map_err(|_| ()),
            None => Ok(()),
        }
    }
}
