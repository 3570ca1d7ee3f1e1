//! How the gateway reaches a remote MCP server: its URL, the headers of its credentials and
//! the HTTP client, shared by the server's requests ([`super::server`]) and its notification
//! stream ([`super::listen`]); and the Server-Sent Events both read.

use serde_json::Value;

use super::wire;

/// How a server is reached: its URL, the headers of its credentials, the HTTP client and the
/// byte bound of what it sends. Shared by the requests and the notification listener.
pub struct Link {
    pub id: String,
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    client: reqwest::Client,
    pub max_answer_bytes: usize,
}

impl Link {
    pub fn new(
        id: String,
        url: reqwest::Url,
        headers: reqwest::header::HeaderMap,
        client: reqwest::Client,
        max_answer_bytes: usize,
    ) -> Link {
        Link {
            id,
            url,
            headers,
            client,
            max_answer_bytes,
        }
    }

    /// A POST of `body` with the headers every request carries.
    pub fn post(
        &self,
        body: &Value,
        traceparent: Option<&hyper::header::HeaderValue>,
        version: Option<&str>,
        session: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = self
            .client
            .post(self.url.clone())
            .header("content-type", "application/json")
            .body(body.to_string());
        self.with_headers(request, traceparent, version, session)
            .header("accept", "application/json, text/event-stream")
    }

    /// The GET that opens a session's notification stream (the session era's).
    pub fn get(&self, version: &str, session: &str) -> reqwest::RequestBuilder {
        let request = self.client.get(self.url.clone());
        self.with_headers(request, None, Some(version), Some(session))
            .header("accept", "text/event-stream")
    }

    fn with_headers(
        &self,
        mut request: reqwest::RequestBuilder,
        traceparent: Option<&hyper::header::HeaderValue>,
        version: Option<&str>,
        session: Option<&str>,
    ) -> reqwest::RequestBuilder {
        request = request.headers(self.headers.clone());
        if let Some(version) = version {
            request = request.header(wire::PROTOCOL_VERSION_HEADER, version);
        }
        if let Some(session) = session {
            request = request.header(wire::SESSION_HEADER, session);
        }
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent.clone());
        }
        request
    }
}

/// reqwest's error with its cause: "error sending request" alone does not say
/// "connection refused".
pub fn describe(error: &reqwest::Error) -> String {
    crate::causes::with_causes(error)
}

/// Server-Sent Events cut from a byte stream: each event's `data` lines joined.
#[derive(Default)]
pub struct SseEvents {
    pending: Vec<u8>,
}

impl SseEvents {
    /// The bytes of the event not yet ended: a stream that never ends one is cut by its
    /// reader at the byte bound.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some((end, skip)) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end + skip).take(end).collect();
            let text = String::from_utf8_lossy(&event);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| data.strip_prefix(' ').unwrap_or(data))
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        events
    }
}

/// Where the first event in `bytes` ends, and the length of the blank line that ends it.
fn event_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = bytes
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| (at, 2));
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_across_chunks() {
        let mut events = SseEvents::default();
        assert!(events.push(b"event: message\r\ndata: {\"a\"").is_empty());
        assert_eq!(
            events.push(b":1}\r\n\r\n: ping\n\ndata: x\n"),
            ["{\"a\":1}"]
        );
        assert_eq!(events.push(b"data: y\n\n"), ["x\ny"]);
    }
}
