//! `legacy`: a provider built directly against the frozen
//! `plugin-sdk/wit/frozen/0.1.0` world, the way a plugin released with gateway 0.1.0 was.
//! The lifecycle tests load it into the current host to prove that plugins
//! built for an earlier compatible WIT version keep serving.
//!
//! It answers `legacy: <prompt>` for text prompts (and the last message's
//! content for chats), streaming the answer as one chunk.

// The generated bindings take every record field as an argument.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    world: "provider",
    path: "../../../wit/frozen/0.1.0",
});

const NAME: &str = "legacy";
const VERSION: &str = "0.1.0";

/// 0.1.0 has nothing but text to stream.
fn stream_extra(_: &CompletionRequest) -> Result<(), ProviderError> {
    Ok(())
}

include!("plugin.rs");
