//! Anthropic's Messages API as the fake serves it: every request, whatever its path, is a
//! generation call answered from the script; errors as `{"type": "error", "error": {"type",
//! "message"}}`; streams as named SSE events.

use serde_json::{Value, json};

use super::{Provider, ReceivedRequest, Reply};

/// The Anthropic Messages API.
pub struct Anthropic;

impl Provider for Anthropic {
    const NAME: &'static str = "fake-anthropic";

    fn is_generation(_path: &str) -> bool {
        true
    }

    fn computed(_request: &ReceivedRequest) -> Option<Reply> {
        None
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

/// One SSE event as Anthropic writes it.
pub fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}
