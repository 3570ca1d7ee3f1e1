//! `legacy012`: the `legacy` plugin built against the frozen
//! `plugin-sdk/wit/frozen/0.1.2` world, the last of the 0.1 line, which a
//! 0.2 host serves through its 0.1 bindings. Besides text it streams a piece
//! of a tool call through 0.1.2's `sink.send-tool-calls` when the request
//! offers functions (the completion itself stays text, as `legacy`'s).

// The generated bindings take every record field as an argument.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    world: "provider",
    path: "../../../wit/frozen/0.1.2",
});

const NAME: &str = "legacy012";
const VERSION: &str = "0.1.2";

/// A piece of a call of the first function offered, through the 0.1.2 import.
fn stream_extra(request: &CompletionRequest) -> Result<(), ProviderError> {
    let Some(function) = request.functions.first() else {
        return Ok(());
    };
    let delta = sink::ToolCallDelta {
        index: 0,
        call: 0,
        id: Some("call_legacy012".into()),
        name: Some(function.name.clone()),
        arguments: "{}".into(),
    };
    sink::send_tool_calls(&[delta]).map_err(|()| ProviderError::Failed("the caller left".into()))
}

include!("../../legacy/src/plugin.rs");
