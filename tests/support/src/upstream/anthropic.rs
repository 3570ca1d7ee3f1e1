//! Anthropic's Messages API as the fake serves it: every request, whatever its path, is a
//! generation call answered from the script, but `/messages/count_tokens`, computed ([`count`]);
//! errors as `{"type": "error", "error": {"type", "message"}}`; streams as named SSE events.

use serde_json::{Value, json};

use super::{Provider, ReceivedRequest, Reply, counted_tokens};

/// The Anthropic Messages API.
pub struct Anthropic;

impl Provider for Anthropic {
    const NAME: &'static str = "fake-anthropic";

    fn is_generation(_path: &str) -> bool {
        true
    }

    fn computed(request: &ReceivedRequest) -> Option<Reply> {
        (request.path_only().ends_with("/messages/count_tokens")).then(|| count(request))
    }

    fn error(status: u16, message: &str) -> Reply {
        Reply::anthropic_error(
            status,
            "api_error",
            &format!("fake upstream: {message}"),
            None,
        )
    }
}

/// The fields `count_tokens` takes: Anthropic refuses any other with 400.
const COUNT_FIELDS: [&str; 6] = [
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
];

/// `count_tokens`, as strict as Anthropic's about its body, counting [`counted_tokens`].
fn count(request: &ReceivedRequest) -> Reply {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&request.body) else {
        return Reply::anthropic_error(400, "invalid_request_error", "not a JSON object", None);
    };
    if let Some(extra) = body
        .keys()
        .find(|key| !COUNT_FIELDS.contains(&key.as_str()))
    {
        let message = format!("{extra}: Extra inputs are not permitted");
        return Reply::anthropic_error(400, "invalid_request_error", &message, None);
    }
    let length = |field: &str| {
        body.get(field)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    if body.get("model").and_then(Value::as_str).is_none() || length("messages") == 0 {
        let message = "model and messages: Field required";
        return Reply::anthropic_error(400, "invalid_request_error", message, None);
    }
    let tokens = counted_tokens(length("messages"), length("tools"));
    Reply::json(200, &json!({"input_tokens": tokens}))
}

impl Reply {
    /// An error in Anthropic's shape, with `retry-after` when given.
    pub fn anthropic_error(
        status: u16,
        kind: &str,
        message: &str,
        retry_after: Option<&str>,
    ) -> Reply {
        let body = json!({
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_011CfakeUpstream"
        });
        Reply::json(status, &body).retry_after(retry_after)
    }

    /// An event stream of `(event name, data)` pairs, as Anthropic writes them.
    pub fn anthropic_events(events: &[(&str, Value)]) -> Reply {
        Reply::events(events.iter().map(|(name, data)| sse(name, data)).collect())
    }

    /// An event stream whose connection drops after `raw_tail` (e.g. half an event).
    pub fn anthropic_cut_events(events: &[(&str, Value)], raw_tail: &str) -> Reply {
        let mut events: Vec<String> = events.iter().map(|(name, data)| sse(name, data)).collect();
        events.push(raw_tail.to_owned());
        Reply::events(events).cut()
    }
}

/// The thinking a [`Reply::anthropic_thinking`] answer shows, its signature, and its text.
pub const THINKING: &str = "Let me think.";
pub const THINKING_SIGNATURE: &str = "sig-abc";
pub const THINKING_TEXT: &str = "Olá";

impl Reply {
    /// A whole answer that thought first: a `thinking` block with its signature, then text.
    pub fn anthropic_thinking() -> Reply {
        Reply::json(
            200,
            &json!({"id": "msg_1", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "thinking", "thinking": THINKING, "signature": THINKING_SIGNATURE},
                    {"type": "text", "text": THINKING_TEXT}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 20}}),
        )
    }

    /// The same as a stream, as Anthropic streams thinking: `thinking_delta`s (the thinking in
    /// two pieces), a `signature_delta`, a `redacted_thinking` block (`opaque`), then the text;
    /// it stopped at the stop sequence `END`.
    pub fn anthropic_thinking_stream() -> Reply {
        let start = json!({"type": "message_start", "message": {"id": "msg_2", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}});
        let delta = |index: u32, delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
        let block = |index: u32, content_block: Value| json!({"type": "content_block_start", "index": index, "content_block": content_block});
        let stop = |index: u32| json!({"type": "content_block_stop", "index": index});
        let (first, rest) = THINKING.split_at(7);
        Reply::anthropic_events(&[
            ("message_start", start),
            (
                "content_block_start",
                block(
                    0,
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                ),
            ),
            (
                "content_block_delta",
                delta(0, json!({"type": "thinking_delta", "thinking": first})),
            ),
            (
                "content_block_delta",
                delta(0, json!({"type": "thinking_delta", "thinking": rest})),
            ),
            (
                "content_block_delta",
                delta(
                    0,
                    json!({"type": "signature_delta", "signature": THINKING_SIGNATURE}),
                ),
            ),
            ("content_block_stop", stop(0)),
            (
                "content_block_start",
                block(1, json!({"type": "redacted_thinking", "data": "opaque"})),
            ),
            ("content_block_stop", stop(1)),
            (
                "content_block_start",
                block(2, json!({"type": "text", "text": ""})),
            ),
            (
                "content_block_delta",
                delta(2, json!({"type": "text_delta", "text": THINKING_TEXT})),
            ),
            ("content_block_stop", stop(2)),
            (
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
                "usage": {"output_tokens": 20}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ])
    }
}

/// One SSE event as Anthropic writes it.
pub fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}
