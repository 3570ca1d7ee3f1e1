//! Outbound HTTP, a plugin's only way out of its sandbox.
//!
//! The gateway performs the requests: only the host (and port) of the route's
//! `base_url` is reachable, and the call's deadline applies to every step.
//!
//! ```no_run
//! use gateway_plugin_sdk::{http, ProviderError};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Models {
//!     data: Vec<serde_json::Value>,
//! }
//!
//! fn count_models(base_url: &str, key: &str) -> Result<usize, ProviderError> {
//!     let models: Models = http::Request::get(format!("{base_url}/models"))
//!         .bearer(key)
//!         .send()?
//!         .error_for_status()?
//!         .json()?;
//!     Ok(models.data.len())
//! }
//! ```

use std::collections::VecDeque;
use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__private::gateway::provider::http as host;
use crate::{ProviderError, eventstream, ndjson, sse, upstream_error};

/// An outbound HTTP request, built with chained calls and performed by
/// [`Request::send`].
///
/// Its `Debug` output shows header names but never their values, so a request
/// can be logged without leaking the provider key.
#[derive(Clone, PartialEq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Where [`Request::api_key`] sends the provider key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyIn<'a> {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// A header of its own, e.g. `x-api-key`.
    Header(&'a str),
}

impl<'a> KeyIn<'a> {
    /// In `header` when one is named (e.g. by the route's settings), else as a bearer token.
    pub fn header_or_bearer(header: Option<&'a str>) -> Self {
        header.map_or(KeyIn::Bearer, KeyIn::Header)
    }
}

impl Request {
    /// A request with `method` (e.g. `"PUT"`) to `url`, without headers or
    /// body.
    pub fn new(method: &str, url: impl Into<String>) -> Self {
        Request {
            method: method.to_owned(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A `GET` request to `url`.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` request to `url`.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// Adds a header. Headers with the same name are all sent.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sets `Authorization: Bearer <key>`, replacing any `Authorization`
    /// header set before.
    pub fn bearer(self, key: &str) -> Self {
        self.replace_header("authorization", &format!("Bearer {key}"))
    }

    /// Adds the provider key, when there is one (non-empty; local servers
    /// often need none), where `key_in` says: `Authorization: Bearer`, or a
    /// header of its own (e.g. `x-api-key`). The key comes first, as in the
    /// Python and JavaScript SDKs; the place is a type of its own, so that
    /// the two cannot be swapped.
    ///
    /// ```
    /// use gateway_plugin_sdk::http::{KeyIn, Request};
    ///
    /// let request = Request::post("https://x").api_key(Some("k"), KeyIn::Header("x-api-key"));
    /// assert_eq!(request.header_value("x-api-key"), Some("k"));
    /// let request = Request::post("https://x").api_key(Some("k"), KeyIn::Bearer);
    /// assert_eq!(request.header_value("authorization"), Some("Bearer k"));
    /// assert!(Request::post("https://x").api_key(Some(""), KeyIn::Bearer).headers().is_empty());
    /// ```
    pub fn api_key(self, key: Option<&str>, key_in: KeyIn<'_>) -> Self {
        match (key.filter(|key| !key.is_empty()), key_in) {
            (None, _) => self,
            (Some(key), KeyIn::Header(header)) => self.header(header, key),
            (Some(key), KeyIn::Bearer) => self.bearer(key),
        }
    }

    /// Asks for the answer as an event stream (`Accept: text/event-stream`)
    /// when `stream`, else as JSON (`Accept: application/json`); replaces any
    /// `Accept` set before.
    pub fn streaming(self, stream: bool) -> Self {
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        self.replace_header("accept", accept)
    }

    /// Sets `Accept` to `media_range` (replacing any set before): for answers that are neither
    /// JSON nor an event stream, such as audio (`audio/*`).
    pub fn accept(self, media_range: &str) -> Self {
        self.replace_header("accept", media_range)
    }

    /// Sets the body to `value` serialized as JSON, and
    /// `Content-Type: application/json` (replacing any `Content-Type` set
    /// before).
    ///
    /// Fails with [`ProviderError::Failed`] when `value` cannot be serialized
    /// (e.g. a map with non-string keys).
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> Result<Self, ProviderError> {
        self.json_sized(value, 0)
    }

    /// [`Request::json`] into a buffer of `capacity` bytes to begin with: a large body
    /// whose size is about known (a conversation's texts and some overhead) is then written
    /// without being moved as it grows, nor left with up to twice its size allocated.
    pub fn json_sized<T: Serialize + ?Sized>(
        self,
        value: &T,
        capacity: usize,
    ) -> Result<Self, ProviderError> {
        let mut body = Vec::with_capacity(capacity);
        serde_json::to_writer(&mut body, value).map_err(|e| {
            ProviderError::Failed(format!("could not serialize the request body: {e}"))
        })?;
        Ok(self
            .replace_header("content-type", "application/json")
            .body(body))
    }

    /// Sets the body (bytes sent as they are; set `Content-Type` with
    /// [`Request::header`]).
    pub fn body(mut self, bytes: Vec<u8>) -> Self {
        self.body = bytes;
        self
    }

    /// The request method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The request URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers, in the order they were set.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The value of the first header named `name` (case-insensitively).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body.
    pub fn body_bytes(&self) -> &[u8] {
        &self.body
    }

    /// Sends the request through the gateway and returns the response once
    /// its status and headers have arrived; read the body from the
    /// [`Response`].
    ///
    /// Every status is a successful send, use [`Response::error_for_status`]
    /// to treat non-2xx answers as errors. Failures map to
    /// [`ProviderError::Timeout`] when the upstream did not answer in time and
    /// to [`ProviderError::Failed`] otherwise (a forbidden host, a connection
    /// failure, an invalid URL). Error messages never include headers.
    ///
    /// Natively (in a plugin's unit tests) it goes to the upstream of the running
    /// [`crate::testing::Call`], and panics outside one.
    pub fn send(self) -> Result<Response, ProviderError> {
        #[cfg(not(target_arch = "wasm32"))]
        return crate::testing::send(self);
        #[cfg(target_arch = "wasm32")]
        {
            let request = host::Request {
                method: self.method,
                url: self.url,
                headers: self.headers,
                body: self.body,
            };
            let response =
                host::send(&request).map_err(|e| http_error(e, "sending the request"))?;
            Ok(Response {
                status: response.status,
                headers: response.headers,
                body: Body::Host(response.body),
            })
        }
    }

    /// Like [`Request::send`], first logging the request line
    /// (`POST https://...`) at debug level when the gateway keeps debug
    /// lines, so that the line costs nothing otherwise.
    ///
    /// Headers and body are never logged; the URL is, so only use it for
    /// URLs that carry no secret (send keys in headers, not in query
    /// strings).
    pub fn send_logged(self) -> Result<Response, ProviderError> {
        if crate::log::enabled(crate::log::Severity::Debug) {
            crate::log::debug(&format!("{} {}", self.method, self.url));
        }
        self.send()
    }

    pub(crate) fn replace_header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.header(name, value)
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &header_names)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// A response: status and headers, and a body read in chunks as it arrives.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The headers, in the order received (names as the host delivers them;
    /// look them up with [`Response::header`]).
    pub headers: Vec<(String, String)>,
    body: Body,
}

#[derive(Debug)]
enum Body {
    /// Still being read from the host.
    // Only `send` creates it, and `send` needs the host (wasm).
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    Host(host::IncomingBody),
    /// Given by [`Response::from_chunks`].
    Chunks(VecDeque<Vec<u8>>),
    /// Fully read, or abandoned after an error.
    Done,
}

impl Response {
    /// A response whose body is `chunks`, delivered one by one by
    /// [`Response::chunk`]: for testing a plugin's response handling
    /// natively.
    pub fn from_chunks(status: u16, headers: Vec<(String, String)>, chunks: Vec<Vec<u8>>) -> Self {
        Response {
            status,
            headers,
            body: Body::Chunks(chunks.into()),
        }
    }

    /// The value of the first header named `name` (case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Whether the `Content-Type` header says JSON (`application/json`, any
    /// parameters and letter case). Useful where a stream was asked for: some
    /// servers ignore the request to stream and answer in one JSON piece.
    pub fn is_json(&self) -> bool {
        self.content_type_is(&["application/json"])
    }

    /// Whether the `Content-Type` header says an AWS event stream
    /// (`application/vnd.amazon.eventstream`, any parameters and letter
    /// case), which [`Response::event_stream`] reads.
    pub fn is_event_stream(&self) -> bool {
        self.content_type_is(&["application/vnd.amazon.eventstream"])
    }

    /// Whether the `Content-Type` header says newline-delimited JSON
    /// (`application/x-ndjson`, `application/ndjson`, `application/jsonl`,
    /// `application/x-jsonlines` or `application/jsonlines`; any parameters
    /// and letter case), which [`Response::ndjson`] reads.
    pub fn is_ndjson(&self) -> bool {
        self.content_type_is(&[
            "application/x-ndjson",
            "application/ndjson",
            "application/jsonl",
            "application/x-jsonlines",
            "application/jsonlines",
        ])
    }

    /// Compares the media type alone: `application/json` must not match
    /// `application/jsonl`.
    fn content_type_is(&self, media_types: &[&str]) -> bool {
        self.header("content-type").is_some_and(|value| {
            let media_type = value.split(';').next().unwrap_or_default().trim();
            media_types
                .iter()
                .any(|m| media_type.eq_ignore_ascii_case(m))
        })
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The next body chunk as it arrives, `None` at the end of the body.
    ///
    /// Errors: [`ProviderError::Timeout`] when the next chunk did not arrive
    /// in time, [`ProviderError::Failed`] for a broken connection or a body
    /// larger than the gateway allows. After an error the body is abandoned.
    pub fn chunk(&mut self) -> Result<Option<Vec<u8>>, ProviderError> {
        loop {
            let next = match &mut self.body {
                Body::Done => return Ok(None),
                Body::Chunks(chunks) => Ok(chunks.pop_front()),
                Body::Host(body) => body.read(),
            };
            match next {
                // Empty chunks carry nothing; callers treat a chunk as progress.
                Ok(Some(chunk)) if chunk.is_empty() => continue,
                Ok(Some(chunk)) => return Ok(Some(chunk)),
                Ok(None) => {
                    // Dropping the host's body releases it right away.
                    self.body = Body::Done;
                    return Ok(None);
                }
                Err(e) => {
                    self.body = Body::Done;
                    return Err(http_error(e, "reading the answer"));
                }
            }
        }
    }

    /// Reads the whole body.
    pub fn bytes(mut self) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk()? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Reads the body and parses it as JSON into `T`.
    ///
    /// A body that does not parse is [`ProviderError::Failed`] naming the
    /// expected type and what was wrong.
    pub fn json<T: DeserializeOwned>(self) -> Result<T, ProviderError> {
        let body = self.bytes()?;
        serde_json::from_slice(&body).map_err(|e| {
            ProviderError::Failed(format!(
                "the provider's answer is not a valid {}: {e}",
                short_type_name(std::any::type_name::<T>())
            ))
        })
    }

    /// Returns the response unchanged when its status is 2xx. Otherwise reads
    /// the body and returns [`ProviderError::Upstream`] with the status, the
    /// provider's message (see [`crate::upstream_error`]) and the
    /// `Retry-After` seconds.
    pub fn error_for_status(self) -> Result<Self, ProviderError> {
        if self.is_success() {
            return Ok(self);
        }
        let status = self.status;
        let retry_after = self.header("retry-after").map(str::to_owned);
        // The status says what matters; a body that fails to arrive only
        // costs the provider's message.
        let body = self.bytes().unwrap_or_default();
        Err(upstream_error(status, &body, retry_after.as_deref()))
    }

    /// Iterates the body as Server-Sent Events, reading chunks lazily.
    ///
    /// The iterator yields each event once complete (including a last event
    /// not followed by a blank line), an `Err` if reading fails (then ends),
    /// and ends with the body.
    pub fn sse(self) -> SseStream {
        Events::new(self)
    }

    /// Iterates the body as newline-delimited JSON, reading chunks lazily:
    /// each non-blank line is an [`sse::Event`] whose `data` is the line (see
    /// [`crate::ndjson`]), including a last line with no newline after it; an
    /// `Err` if reading fails (then ends).
    ///
    /// ```
    /// use gateway_plugin_sdk::http::Response;
    ///
    /// let chunks = vec![b"{\"a\":1}\n{\"b\"".to_vec(), b":2}".to_vec()];
    /// let lines: Vec<_> = Response::from_chunks(200, Vec::new(), chunks)
    ///     .ndjson()
    ///     .map(|line| line.unwrap().data)
    ///     .collect();
    /// assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}"]);
    /// ```
    pub fn ndjson(self) -> NdjsonStream {
        Events::new(self)
    }

    /// Iterates the body as AWS event-stream messages
    /// ([`eventstream::Message`]), reading chunks lazily.
    ///
    /// The iterator yields each message once its frame is whole, and ends
    /// with the body. A malformed frame (see [`eventstream::FrameError`]),
    /// a body that ends inside a frame, or a failed read yields one `Err`
    /// (after the messages before it), then the iterator ends.
    ///
    /// ```
    /// use gateway_plugin_sdk::eventstream::encode;
    /// use gateway_plugin_sdk::http::Response;
    ///
    /// let frame = encode(&[(":event-type", "messageStop".into())], b"{}");
    /// let (head, tail) = frame.split_at(5);
    /// let response = Response::from_chunks(200, Vec::new(), vec![head.to_vec(), tail.to_vec()]);
    /// let messages: Vec<_> = response.event_stream().collect();
    /// assert_eq!(messages[0].as_ref().unwrap().str_header(":event-type"), Some("messageStop"));
    /// assert_eq!(messages.len(), 1);
    /// ```
    pub fn event_stream(self) -> EventStream {
        EventStream {
            response: self,
            parser: eventstream::Parser::new(),
            ready: VecDeque::new(),
            ended: false,
        }
    }
}

/// The body of a [`Response`] as AWS event-stream messages; see
/// [`Response::event_stream`].
#[derive(Debug)]
pub struct EventStream {
    response: Response,
    parser: eventstream::Parser,
    /// Messages parsed and not yet yielded, then the error that ended the
    /// stream, if one did.
    ready: VecDeque<Result<eventstream::Message, ProviderError>>,
    ended: bool,
}

impl Iterator for EventStream {
    type Item = Result<eventstream::Message, ProviderError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item);
            }
            if self.ended {
                return None;
            }
            let read = match self.response.chunk() {
                Ok(Some(chunk)) => self.parser.push(&chunk).and_then(|messages| {
                    self.ready.extend(messages.into_iter().map(Ok));
                    // A fault after those messages is held back until the
                    // next push: ask now rather than wait for more bytes.
                    self.parser.push(&[]).map(drop)
                }),
                Ok(None) => {
                    self.ended = true;
                    std::mem::take(&mut self.parser).finish()
                }
                Err(e) => {
                    self.ended = true;
                    self.ready.push_back(Err(e));
                    continue;
                }
            };
            if let Err(e) = read {
                self.ended = true;
                self.ready.push_back(Err(e.into()));
            }
        }
    }
}

/// The body of a [`Response`] as Server-Sent Events; see [`Response::sse`].
pub type SseStream = Events<sse::Parser>;

/// The body of a [`Response`] as newline-delimited JSON; see [`Response::ndjson`].
pub type NdjsonStream = Events<ndjson::Parser>;

/// A parser of a text framing into [`sse::Event`]s, fed the body as it arrives:
/// [`sse::Parser`], [`ndjson::Parser`].
pub trait EventParser: Default {
    /// The events the next bytes completed.
    fn push(&mut self, bytes: &[u8]) -> Vec<sse::Event>;
    /// The last event, left open by the end of the body.
    fn finish(&mut self) -> Option<sse::Event>;
}

impl EventParser for sse::Parser {
    fn push(&mut self, bytes: &[u8]) -> Vec<sse::Event> {
        sse::Parser::push(self, bytes)
    }

    fn finish(&mut self) -> Option<sse::Event> {
        sse::Parser::finish(self)
    }
}

impl EventParser for ndjson::Parser {
    fn push(&mut self, bytes: &[u8]) -> Vec<sse::Event> {
        ndjson::Parser::push(self, bytes)
    }

    fn finish(&mut self) -> Option<sse::Event> {
        ndjson::Parser::finish(self)
    }
}

/// The body of a [`Response`] as events of a text framing ([`SseStream`],
/// [`NdjsonStream`]).
#[derive(Debug)]
pub struct Events<P> {
    response: Response,
    parser: P,
    ready: VecDeque<sse::Event>,
    ended: bool,
}

impl<P: EventParser> Events<P> {
    fn new(response: Response) -> Self {
        Events {
            response,
            parser: P::default(),
            ready: VecDeque::new(),
            ended: false,
        }
    }
}

impl<P: EventParser> Iterator for Events<P> {
    type Item = Result<sse::Event, ProviderError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            if self.ended {
                return None;
            }
            match self.response.chunk() {
                Ok(Some(chunk)) => self.ready.extend(self.parser.push(&chunk)),
                Ok(None) => {
                    self.ended = true;
                    self.ready.extend(self.parser.finish());
                }
                Err(e) => {
                    self.ended = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Maps the host's HTTP errors; `doing` says which step failed.
fn http_error(error: host::HttpError, doing: &str) -> ProviderError {
    match error {
        host::HttpError::Timeout(detail) => ProviderError::Timeout(format!(
            "the provider did not answer in time ({doing}): {detail}"
        )),
        host::HttpError::ForbiddenHost(host) => ProviderError::Failed(format!(
            "the gateway does not allow requests to {host}; only the route's base_url is reachable"
        )),
        host::HttpError::TooLarge(limit) => ProviderError::Failed(format!(
            "the provider's answer is larger than the gateway allows ({limit} bytes)"
        )),
        host::HttpError::Transport(detail) => {
            ProviderError::Failed(format!("HTTP failure {doing}: {detail}"))
        }
        host::HttpError::InvalidRequest(detail) => {
            ProviderError::Failed(format!("invalid HTTP request: {detail}"))
        }
    }
}

/// `alloc::vec::Vec<my_plugin::Answer>` -> `Vec<Answer>`: module paths only
/// add noise to an error message.
fn short_type_name(full: &str) -> String {
    full.split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .map(|part| part.rsplit("::").next().unwrap_or(part))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn response(status: u16, headers: &[(&str, &str)], chunks: &[&str]) -> Response {
        Response::from_chunks(
            status,
            headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            chunks.iter().map(|c| c.as_bytes().to_vec()).collect(),
        )
    }

    #[test]
    fn request_builder() {
        let request = Request::post("https://api.example.com/v1/chat")
            .header("Authorization", "Bearer old")
            .header("X-Trace", "1")
            .bearer("sk-secret")
            .json(&serde_json::json!({"model": "m"}))
            .unwrap();
        assert_eq!(request.method(), "POST");
        assert_eq!(request.url(), "https://api.example.com/v1/chat");
        assert_eq!(
            request.header_value("AUTHORIZATION"),
            Some("Bearer sk-secret")
        );
        assert_eq!(
            request.header_value("content-type"),
            Some("application/json")
        );
        assert_eq!(request.header_value("x-trace"), Some("1"));
        assert_eq!(request.headers().len(), 3);
        assert_eq!(request.body_bytes(), br#"{"model":"m"}"#);
        let debug = format!("{request:?}");
        assert!(!debug.contains("sk-secret"), "{debug}");
        assert_eq!(Request::get("u").method(), "GET");
        assert_eq!(Request::new("PUT", "u").body(vec![1]).body_bytes(), [1]);
    }

    #[test]
    fn unserializable_json_body() {
        let map: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(matches!(
            Request::post("u").json(&map),
            Err(ProviderError::Failed(_))
        ));
    }

    #[test]
    fn body_reading() {
        let mut r = response(200, &[("Content-Type", "text/plain")], &["ab", "", "c"]);
        assert!(r.is_success());
        assert_eq!(r.header("content-type"), Some("text/plain"));
        assert_eq!(r.header("missing"), None);
        assert_eq!(r.chunk().unwrap(), Some(b"ab".to_vec()));
        assert_eq!(r.chunk().unwrap(), Some(b"c".to_vec()));
        assert_eq!(r.chunk().unwrap(), None);
        assert_eq!(r.chunk().unwrap(), None);
        assert_eq!(response(200, &[], &["a", "b"]).bytes().unwrap(), b"ab");
    }

    #[test]
    fn json_content_type() {
        assert!(
            response(
                200,
                &[("Content-Type", " Application/JSON; charset=utf-8")],
                &[]
            )
            .is_json()
        );
        assert!(!response(200, &[("Content-Type", "text/event-stream")], &[]).is_json());
        assert!(!response(200, &[], &[]).is_json());
    }

    #[test]
    fn json_bodies() {
        #[derive(Deserialize, Debug)]
        struct Answer {
            #[allow(dead_code)]
            choices: Vec<u32>,
        }
        assert!(
            response(200, &[], &["{\"choices\":", "[1]}"])
                .json::<Answer>()
                .is_ok()
        );
        match response(200, &[], &["{}"]).json::<Vec<Answer>>() {
            Err(ProviderError::Failed(message)) => {
                assert!(message.contains("not a valid Vec<Answer>"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn error_for_status() {
        assert!(response(204, &[], &[]).error_for_status().is_ok());
        let error = response(
            429,
            &[("Retry-After", "3")],
            &[r#"{"error":{"message":"slow down"}}"#],
        )
        .error_for_status()
        .unwrap_err();
        assert_eq!(
            error,
            ProviderError::Upstream(crate::UpstreamError {
                status: 429,
                message: "slow down".into(),
                retry_after: Some(3),
            })
        );
    }

    #[test]
    fn sse_stream() {
        let events: Vec<_> = response(200, &[], &["data: a\n", "\ndata: b\n\nda", "ta: c"])
            .sse()
            .map(|e| e.unwrap().data)
            .collect();
        assert_eq!(events, ["a", "b", "c"]);
    }

    #[test]
    fn event_stream_content_type() {
        let eventstream = "application/vnd.amazon.eventstream";
        assert!(response(200, &[("Content-Type", eventstream)], &[]).is_event_stream());
        assert!(!response(200, &[("Content-Type", eventstream)], &[]).is_json());
        assert!(!response(200, &[("Content-Type", "text/event-stream")], &[]).is_event_stream());
    }

    #[test]
    fn event_stream_ends_after_an_error() {
        use eventstream::{HeaderValue, encode};

        let one = encode(&[("n", HeaderValue::Int(1))], b"a");
        let two = encode(&[("n", HeaderValue::Int(2))], b"b");
        let mut bad = encode(&[], b"c");
        bad[13] ^= 1;
        let chunks = vec![
            one[..3].to_vec(),
            [&one[3..], &two[..], &bad[..], &one[..]].concat(),
            one.clone(),
        ];
        let items: Vec<_> = Response::from_chunks(200, Vec::new(), chunks)
            .event_stream()
            .collect();
        assert_eq!(items.len(), 3, "{items:?}");
        assert_eq!(items[0].as_ref().unwrap().payload, b"a");
        assert_eq!(items[1].as_ref().unwrap().payload, b"b");
        match &items[2] {
            Err(ProviderError::Failed(message)) => {
                assert!(message.contains("message checksum mismatch"), "{message}")
            }
            other => panic!("{other:?}"),
        }

        // Cut inside a frame: the messages before it, then an error.
        let chunks = vec![[&one[..], &two[..5]].concat()];
        let items: Vec<_> = Response::from_chunks(200, Vec::new(), chunks)
            .event_stream()
            .collect();
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(
            matches!(&items[1], Err(ProviderError::Failed(m)) if m.contains("ended inside a frame"))
        );
    }

    #[test]
    fn short_type_names() {
        assert_eq!(
            short_type_name("alloc::vec::Vec<my_plugin::Answer>"),
            "Vec<Answer>"
        );
        assert_eq!(short_type_name("serde_json::value::Value"), "Value");
        assert_eq!(
            short_type_name("(u32, alloc::string::String)"),
            "(u32, String)"
        );
    }
}
