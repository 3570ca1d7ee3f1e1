//! Talking to the gateway's `POST /v1/messages` the way Anthropic's SDKs do: the key in
//! `x-api-key`, `anthropic-version` set, and event streams read by their `event:` names (which
//! the SDKs dispatch on).

use serde_json::Value;

use crate::client::{Response, SseResponse};
use crate::harness::Gateway;
use crate::sse::{event_data, split_events};

/// The Messages API version Anthropic's SDKs send.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
pub const MESSAGES_PATH: &str = "/v1/messages";

/// The headers of an Anthropic SDK call with `key`, then `extra`.
fn sdk_headers<'a>(key: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![("x-api-key", key), ("anthropic-version", ANTHROPIC_VERSION)];
    headers.extend_from_slice(extra);
    headers
}

/// POSTs `body` to `/v1/messages` with the test project's key in `x-api-key`.
pub fn post_messages(gw: &Gateway, extra_headers: &[(&str, &str)], body: &Value) -> Response {
    let headers = sdk_headers(&gw.key, extra_headers);
    gw.request(
        "POST",
        MESSAGES_PATH,
        None,
        &headers,
        body.to_string().as_bytes(),
    )
}

/// Streams `body` from `/v1/messages` (the caller sets `"stream": true`) with the test
/// project's key in `x-api-key`, read to its end.
pub fn stream_messages(gw: &Gateway, extra_headers: &[(&str, &str)], body: &Value) -> SseResponse {
    let headers = sdk_headers(&gw.key, extra_headers);
    gw.post_stream_with_headers(MESSAGES_PATH, None, &headers, body)
}

/// `(event name, data)` of every event of an SSE body; panics on an event without a name or
/// whose data is not JSON.
pub fn named_events(raw: &str) -> Vec<(String, Value)> {
    split_events(raw)
        .iter()
        .map(|event| {
            let name = event
                .lines()
                .find_map(|line| line.strip_prefix("event:"))
                .map(|name| name.trim().to_owned())
                .unwrap_or_else(|| panic!("an event without a name: {event:?}"));
            let data =
                event_data(event).unwrap_or_else(|| panic!("an event without data: {event:?}"));
            let data: Value = serde_json::from_str(&data)
                .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {event:?}"));
            (name, data)
        })
        .collect()
}
