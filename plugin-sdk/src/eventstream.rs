//! AWS event streams (`application/vnd.amazon.eventstream`), the binary
//! framing Amazon Bedrock streams its answers in (`ConverseStream`,
//! `InvokeModelWithResponseStream`).
//!
//! Each frame is one [`Message`]: a prelude (the frame's total length and its
//! headers' length, both `u32` big-endian, and a CRC32 of those 8 bytes),
//! typed headers (`:event-type`, `:message-type`, `:content-type`, ...), a
//! payload, and a CRC32 of everything before it.
//!
//! [`Parser`] is a pure incremental parser: feed it the body's bytes as they
//! arrive, split anywhere, and it returns the messages completed so far.
//! [`crate::http::Response::event_stream`] wraps it around a response body,
//! and [`crate::read_stream`] reads such a body through
//! [`crate::StreamDecoder::message`]. [`encode`] writes frames, for tests and
//! fake upstreams.
//!
//! ```
//! use gateway_plugin_sdk::eventstream::{HeaderValue, Parser, encode};
//!
//! let frame = encode(
//!     &[(":event-type", "contentBlockDelta".into()), (":message-type", "event".into())],
//!     br#"{"delta":{"text":"Hi"}}"#,
//! );
//! let mut parser = Parser::new();
//! // Split anywhere: nothing until the frame is whole.
//! assert!(parser.push(&frame[..7]).unwrap().is_empty());
//! let messages = parser.push(&frame[7..]).unwrap();
//! assert_eq!(messages[0].str_header(":event-type"), Some("contentBlockDelta"));
//! assert_eq!(messages[0].payload, br#"{"delta":{"text":"Hi"}}"#);
//! parser.finish().unwrap();
//!
//! // A damaged frame is an error, never a panic.
//! let mut damaged = frame.clone();
//! damaged[20] ^= 1;
//! assert!(Parser::new().push(&damaged).is_err());
//! ```

use std::fmt;

use crate::ProviderError;

/// The largest frame [`Parser`] accepts (16 MiB, in the frame's declared
/// length): a larger one is an error as soon as its prelude arrives, before
/// any of it is buffered. Bedrock's frames are a few hundred bytes.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Total length, headers length, prelude CRC.
const PRELUDE_LEN: usize = 12;
/// The prelude and the message CRC: a frame without headers or payload.
const MIN_FRAME_LEN: usize = PRELUDE_LEN + 4;

/// One message (frame) of an event stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// The headers, in the order sent.
    pub headers: Vec<(String, HeaderValue)>,
    /// The payload (JSON for Bedrock's events and exceptions).
    pub payload: Vec<u8>,
}

/// A header's value: one of the format's ten wire types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    /// Wire types 0 (true) and 1 (false), which carry no value bytes.
    Bool(bool),
    /// Wire type 2: a signed byte.
    Byte(i8),
    /// Wire type 3: an `i16`.
    Short(i16),
    /// Wire type 4: an `i32`.
    Int(i32),
    /// Wire type 5: an `i64`.
    Long(i64),
    /// Wire type 6: up to 65535 bytes.
    Bytes(Vec<u8>),
    /// Wire type 7: up to 65535 bytes of UTF-8.
    String(String),
    /// Wire type 8: milliseconds since the Unix epoch.
    Timestamp(i64),
    /// Wire type 9: a UUID's 16 bytes.
    Uuid([u8; 16]),
}

impl HeaderValue {
    /// The text of a [`HeaderValue::String`], `None` for the other types.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            HeaderValue::String(text) => Some(text),
            _ => None,
        }
    }

    /// The wire type byte.
    fn wire_type(&self) -> u8 {
        match self {
            HeaderValue::Bool(true) => 0,
            HeaderValue::Bool(false) => 1,
            HeaderValue::Byte(_) => 2,
            HeaderValue::Short(_) => 3,
            HeaderValue::Int(_) => 4,
            HeaderValue::Long(_) => 5,
            HeaderValue::Bytes(_) => 6,
            HeaderValue::String(_) => 7,
            HeaderValue::Timestamp(_) => 8,
            HeaderValue::Uuid(_) => 9,
        }
    }
}

impl From<&str> for HeaderValue {
    fn from(text: &str) -> Self {
        HeaderValue::String(text.to_owned())
    }
}

impl From<String> for HeaderValue {
    fn from(text: String) -> Self {
        HeaderValue::String(text)
    }
}

impl Message {
    /// The value of the first header named exactly `name` (the format's names
    /// are case-sensitive: `:event-type`, `:message-type`, `:exception-type`,
    /// `:content-type`).
    pub fn header(&self, name: &str) -> Option<&HeaderValue> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value)
    }

    /// The value of the first header named `name` when it is a string.
    pub fn str_header(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(HeaderValue::as_str)
    }

    /// When the upstream sent an error in the stream instead of an event
    /// (`:message-type` `exception` or `error`): its kind and text.
    ///
    /// The kind is `:exception-type` (e.g. Bedrock's `throttlingException`),
    /// else `:error-code`, else the message type. The text is the payload's
    /// JSON `message` (or `Message`), else the `:error-message` header, else
    /// the payload itself (cut to a few hundred characters).
    pub fn exception(&self) -> Option<Exception> {
        let message_type = self.str_header(":message-type")?;
        if message_type != "exception" && message_type != "error" {
            return None;
        }
        let kind = (self.str_header(":exception-type"))
            .or_else(|| self.str_header(":error-code"))
            .unwrap_or(message_type)
            .to_owned();
        let from_json = serde_json::from_slice::<serde_json::Value>(&self.payload)
            .ok()
            .and_then(|json| {
                (json.get("message").or_else(|| json.get("Message")))
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            });
        let message = from_json
            .or_else(|| self.str_header(":error-message").map(str::to_owned))
            .unwrap_or_else(|| {
                // An error message, not a place to quote a large payload.
                String::from_utf8_lossy(&self.payload)
                    .chars()
                    .take(300)
                    .collect()
            });
        Some(Exception { kind, message })
    }
}

/// An error the upstream sent inside the stream; see [`Message::exception`].
///
/// Displays as `kind: message` (or `kind` alone without a message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// `:exception-type` (e.g. `throttlingException`,
    /// `validationException`, `modelStreamErrorException`), else
    /// `:error-code`, else the message type.
    pub kind: String,
    /// What the upstream says went wrong (may be empty).
    pub message: String,
}

impl fmt::Display for Exception {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}: {}", self.kind, self.message)
        }
    }
}

/// A malformed event stream: a checksum that does not match, lengths that do
/// not fit, an unknown header type, text that is not UTF-8, a frame over
/// [`MAX_FRAME_LEN`], or a body that ends inside a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    message: String,
}

impl FrameError {
    fn new(message: impl Into<String>) -> Self {
        FrameError {
            message: message.into(),
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FrameError {}

/// A broken stream is the upstream's fault: [`ProviderError::Failed`] through
/// [`ProviderError::malformed`].
impl From<FrameError> for ProviderError {
    fn from(error: FrameError) -> Self {
        ProviderError::malformed(format_args!("invalid event stream: {error}"))
    }
}

/// Incremental event-stream parser.
///
/// Feed bytes in any split with [`Parser::push`]; every split gives the same
/// messages and the same error. It buffers at most the one frame being
/// received, and never one declared larger than [`MAX_FRAME_LEN`]. Call
/// [`Parser::finish`] at the end of the body: bytes left over are a frame
/// cut short.
///
/// After an error the parser stays failed: every later `push` and `finish`
/// returns the same error.
#[derive(Debug, Default)]
pub struct Parser {
    /// The start of the frame being received, when a push ended inside it.
    partial: Vec<u8>,
    /// The first error met, kept for every later call.
    error: Option<FrameError>,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes the next bytes of the stream and returns the messages they
    /// completed, in order.
    ///
    /// A malformed frame is an error. When messages were completed before it
    /// in the same bytes they are returned first, and the error comes from
    /// the next call (an empty `push` will do, or [`Parser::finish`]), so no
    /// message before the fault is lost.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<Vec<Message>, FrameError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let mut messages = Vec::new();
        loop {
            match self.next(&mut bytes) {
                Ok(Some(message)) => messages.push(message),
                Ok(None) => return Ok(messages),
                Err(error) => {
                    self.error = Some(error.clone());
                    self.partial = Vec::new();
                    return if messages.is_empty() {
                        Err(error)
                    } else {
                        Ok(messages)
                    };
                }
            }
        }
    }

    /// Ends the stream: an error when a frame was cut short (or an earlier
    /// error is pending).
    pub fn finish(self) -> Result<(), FrameError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if self.partial.is_empty() {
            return Ok(());
        }
        let expected = match self.partial.get(..PRELUDE_LEN) {
            // The prelude was checked when it arrived.
            Some(prelude) => format!("of {}", prelude_total(prelude)),
            None => format!("of at least {MIN_FRAME_LEN}"),
        };
        Err(FrameError::new(format!(
            "the stream ended inside a frame: {} bytes {expected} arrived",
            self.partial.len()
        )))
    }

    /// The next whole message from `partial` and `bytes`, consuming what it
    /// uses of `bytes`; `None` once all of `bytes` is consumed into
    /// `partial`.
    fn next(&mut self, bytes: &mut &[u8]) -> Result<Option<Message>, FrameError> {
        if self.partial.is_empty() && bytes.len() >= PRELUDE_LEN {
            // A frame wholly in `bytes` is read from there, not copied.
            let total = check_prelude(&bytes[..PRELUDE_LEN])?;
            if let Some((frame, rest)) = bytes.split_at_checked(total) {
                *bytes = rest;
                return decode_frame(frame).map(Some);
            }
        }
        if self.partial.len() < PRELUDE_LEN {
            let wanted = PRELUDE_LEN - self.partial.len();
            let (head, rest) = bytes.split_at(wanted.min(bytes.len()));
            self.partial.extend_from_slice(head);
            *bytes = rest;
            if self.partial.len() < PRELUDE_LEN {
                return Ok(None);
            }
        }
        // Checked before any of the frame's body is buffered.
        let total = check_prelude(&self.partial[..PRELUDE_LEN])?;
        let wanted = total - self.partial.len();
        let (body, rest) = bytes.split_at(wanted.min(bytes.len()));
        self.partial.extend_from_slice(body);
        *bytes = rest;
        if self.partial.len() < total {
            return Ok(None);
        }
        let frame = std::mem::take(&mut self.partial);
        decode_frame(&frame).map(Some)
    }
}

fn be_u32(bytes: &[u8]) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_be_bytes(word)
}

/// The total length a prelude (12 bytes) declares.
fn prelude_total(prelude: &[u8]) -> usize {
    be_u32(prelude) as usize
}

/// Checks a prelude (12 bytes): its CRC first, so that damaged lengths are
/// reported as damage, then that its lengths fit. Returns the frame's total
/// length.
fn check_prelude(prelude: &[u8]) -> Result<usize, FrameError> {
    let declared = be_u32(&prelude[8..]);
    let actual = crc32fast::hash(&prelude[..8]);
    if declared != actual {
        return Err(FrameError::new(format!(
            "prelude checksum mismatch (the frame says {declared:08x}, its bytes give {actual:08x})"
        )));
    }
    let total = prelude_total(prelude);
    let headers = be_u32(&prelude[4..]) as usize;
    if total < MIN_FRAME_LEN {
        return Err(FrameError::new(format!(
            "frame length {total} is below the {MIN_FRAME_LEN}-byte minimum"
        )));
    }
    if total > MAX_FRAME_LEN {
        return Err(FrameError::new(format!(
            "frame length {total} is over the {MAX_FRAME_LEN}-byte limit"
        )));
    }
    if headers > total - MIN_FRAME_LEN {
        return Err(FrameError::new(format!(
            "headers length {headers} does not fit in a frame of {total} bytes"
        )));
    }
    Ok(total)
}

/// Decodes a whole frame whose prelude was checked.
fn decode_frame(frame: &[u8]) -> Result<Message, FrameError> {
    let (covered, crc) = frame.split_at(frame.len() - 4);
    let declared = be_u32(crc);
    let actual = crc32fast::hash(covered);
    if declared != actual {
        return Err(FrameError::new(format!(
            "message checksum mismatch (the frame says {declared:08x}, its bytes give {actual:08x})"
        )));
    }
    let headers_len = be_u32(&frame[4..]) as usize;
    let (headers, payload) = covered[PRELUDE_LEN..].split_at(headers_len);
    Ok(Message {
        headers: decode_headers(headers)?,
        payload: payload.to_vec(),
    })
}

/// Reads the headers section, every header wholly inside it.
fn decode_headers(mut bytes: &[u8]) -> Result<Vec<(String, HeaderValue)>, FrameError> {
    let mut headers = Vec::new();
    while !bytes.is_empty() {
        let name_len = usize::from(take(&mut bytes, 1, "a header name's length")?[0]);
        let name = take(&mut bytes, name_len, "a header name")?;
        let name = std::str::from_utf8(name)
            .map_err(|_| FrameError::new("a header name is not UTF-8"))?
            .to_owned();
        let field = |what: &str| format!("the value of header {name:?} ({what})");
        let value_type = take(&mut bytes, 1, &field("its type"))?[0];
        let value = match value_type {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(i8::from_be_bytes(array(&mut bytes, &field("a byte"))?)),
            3 => HeaderValue::Short(i16::from_be_bytes(array(&mut bytes, &field("a short"))?)),
            4 => HeaderValue::Int(i32::from_be_bytes(array(&mut bytes, &field("an int"))?)),
            5 => HeaderValue::Long(i64::from_be_bytes(array(&mut bytes, &field("a long"))?)),
            6 | 7 => {
                let len = u16::from_be_bytes(array(&mut bytes, &field("its length"))?);
                let value = take(&mut bytes, usize::from(len), &field("its bytes"))?;
                if value_type == 6 {
                    HeaderValue::Bytes(value.to_vec())
                } else {
                    let text = std::str::from_utf8(value).map_err(|_| {
                        FrameError::new(format!("header {name:?} is a string but not UTF-8"))
                    })?;
                    HeaderValue::String(text.to_owned())
                }
            }
            8 => HeaderValue::Timestamp(i64::from_be_bytes(array(
                &mut bytes,
                &field("a timestamp"),
            )?)),
            9 => HeaderValue::Uuid(array(&mut bytes, &field("a UUID"))?),
            other => {
                return Err(FrameError::new(format!(
                    "header {name:?} has unknown value type {other}"
                )));
            }
        };
        headers.push((name, value));
    }
    Ok(headers)
}

/// Takes `len` bytes off the front of the headers section; `what` names them
/// when the section ends first.
fn take<'a>(bytes: &mut &'a [u8], len: usize, what: &str) -> Result<&'a [u8], FrameError> {
    let (head, rest) = bytes.split_at_checked(len).ok_or_else(|| {
        FrameError::new(format!(
            "{what} runs past the end of the headers ({len} bytes wanted, {} left)",
            bytes.len()
        ))
    })?;
    *bytes = rest;
    Ok(head)
}

fn array<const N: usize>(bytes: &mut &[u8], what: &str) -> Result<[u8; N], FrameError> {
    let mut array = [0; N];
    array.copy_from_slice(take(bytes, N, what)?);
    Ok(array)
}

/// Encodes one frame: `headers` in order, then `payload`, with both
/// checksums. For tests and fake upstreams; [`Parser`] reads it back.
///
/// # Panics
///
/// When the format cannot carry the message: a header name over 255 bytes, a
/// string or bytes value over 65535 bytes, a frame over 4 GiB.
pub fn encode(headers: &[(&str, HeaderValue)], payload: &[u8]) -> Vec<u8> {
    let mut encoded_headers = Vec::new();
    for (name, value) in headers {
        let name_len = u8::try_from(name.len())
            .unwrap_or_else(|_| panic!("header name {name:?} is over 255 bytes"));
        encoded_headers.push(name_len);
        encoded_headers.extend_from_slice(name.as_bytes());
        encoded_headers.push(value.wire_type());
        match value {
            HeaderValue::Bool(_) => {}
            HeaderValue::Byte(v) => encoded_headers.extend_from_slice(&v.to_be_bytes()),
            HeaderValue::Short(v) => encoded_headers.extend_from_slice(&v.to_be_bytes()),
            HeaderValue::Int(v) => encoded_headers.extend_from_slice(&v.to_be_bytes()),
            HeaderValue::Long(v) | HeaderValue::Timestamp(v) => {
                encoded_headers.extend_from_slice(&v.to_be_bytes())
            }
            HeaderValue::Bytes(bytes) => push_sized(&mut encoded_headers, name, bytes),
            HeaderValue::String(text) => push_sized(&mut encoded_headers, name, text.as_bytes()),
            HeaderValue::Uuid(uuid) => encoded_headers.extend_from_slice(uuid),
        }
    }
    let total = MIN_FRAME_LEN + encoded_headers.len() + payload.len();
    let total = u32::try_from(total).unwrap_or_else(|_| panic!("a frame of {total} bytes"));
    let headers_len = u32::try_from(encoded_headers.len()).unwrap_or(u32::MAX);
    let mut frame = Vec::with_capacity(total as usize);
    frame.extend_from_slice(&total.to_be_bytes());
    frame.extend_from_slice(&headers_len.to_be_bytes());
    frame.extend_from_slice(&crc32fast::hash(&frame).to_be_bytes());
    frame.extend_from_slice(&encoded_headers);
    frame.extend_from_slice(payload);
    frame.extend_from_slice(&crc32fast::hash(&frame).to_be_bytes());
    frame
}

/// A bytes or string value: its `u16` length, then it.
fn push_sized(into: &mut Vec<u8>, name: &str, value: &[u8]) {
    let len = u16::try_from(value.len())
        .unwrap_or_else(|_| panic!("the value of header {name:?} is over 65535 bytes"));
    into.extend_from_slice(&len.to_be_bytes());
    into.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;

    fn every_type() -> Vec<(&'static str, HeaderValue)> {
        vec![
            ("true", HeaderValue::Bool(true)),
            ("false", HeaderValue::Bool(false)),
            ("byte", HeaderValue::Byte(-7)),
            ("short", HeaderValue::Short(-300)),
            ("int", HeaderValue::Int(-70_000)),
            ("long", HeaderValue::Long(i64::MIN + 1)),
            ("bytes", HeaderValue::Bytes(vec![0, 255, 1])),
            ("string", "héllo".into()),
            ("timestamp", HeaderValue::Timestamp(1_764_201_600_000)),
            ("uuid", HeaderValue::Uuid(*b"0123456789abcdef")),
            ("empty", HeaderValue::String(String::new())),
        ]
    }

    fn message(headers: &[(&str, HeaderValue)], payload: &[u8]) -> Message {
        Message {
            headers: (headers.iter())
                .map(|(name, value)| ((*name).to_owned(), value.clone()))
                .collect(),
            payload: payload.to_vec(),
        }
    }

    /// Every message and the outcome: `Ok` or the error, from `finish` if not
    /// before.
    fn parse(pushes: &[&[u8]]) -> (Vec<Message>, Result<(), FrameError>) {
        let mut parser = Parser::new();
        let mut messages = Vec::new();
        for bytes in pushes {
            match parser.push(bytes) {
                Ok(more) => messages.extend(more),
                Err(error) => return (messages, Err(error)),
            }
        }
        (messages, parser.finish())
    }

    fn parse_split(bytes: &[u8], cuts: &[Index]) -> (Vec<Message>, Result<(), FrameError>) {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            pieces.push(&bytes[from..cut]);
            from = cut;
        }
        parse(&pieces)
    }

    fn parse_bytewise(bytes: &[u8]) -> (Vec<Message>, Result<(), FrameError>) {
        let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
        parse(&pieces)
    }

    fn error_of(bytes: &[u8]) -> String {
        match parse(&[bytes]) {
            (_, Err(error)) => error.to_string(),
            other => panic!("no error: {other:?}"),
        }
    }

    /// A prelude declaring `total` and `headers` bytes, with its checksum.
    fn prelude(total: u32, headers: u32) -> Vec<u8> {
        let mut prelude = [total.to_be_bytes(), headers.to_be_bytes()].concat();
        prelude.extend_from_slice(&crc32fast::hash(&prelude).to_be_bytes());
        prelude
    }

    /// Re-signs a frame whose bytes were changed: both checksums made right.
    fn resign(frame: &mut [u8]) {
        let crc = crc32fast::hash(&frame[..8]);
        frame[8..12].copy_from_slice(&crc.to_be_bytes());
        let end = frame.len() - 4;
        let crc = crc32fast::hash(&frame[..end]);
        frame[end..].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn every_header_type_round_trips() {
        let headers = every_type();
        let frame = encode(&headers, b"{}");
        let (messages, end) = parse(&[&frame]);
        assert_eq!(end, Ok(()));
        assert_eq!(messages, [message(&headers, b"{}")]);
        // One at a time too: each type's length is its own.
        for header in headers {
            let frame = encode(std::slice::from_ref(&header), b"");
            assert_eq!(parse(&[&frame]).0, [message(&[header], b"")]);
        }
    }

    #[test]
    fn known_frames() {
        // A payload alone, then with one string header: frames other
        // implementations of the format produce for these inputs.
        let bare = encode(&[], br#"{"foo": "bar"}"#);
        assert_eq!(bare[..12], [0, 0, 0, 30, 0, 0, 0, 0, 186, 242, 246, 138]);
        assert_eq!(bare[26..], [174, 114, 88, 228]);
        let typed = encode(
            &[("content-type", "application/json".into())],
            br#"{"foo": "bar"}"#,
        );
        assert_eq!(typed[..12], [0, 0, 0, 62, 0, 0, 0, 32, 64, 93, 249, 70]);
        assert_eq!(typed[58..], [111, 162, 191, 59]);
        assert_eq!(encode(&[], b"").len(), MIN_FRAME_LEN);
    }

    #[test]
    fn headers_are_looked_up_by_exact_name() {
        let m = message(
            &[
                (":event-type", "messageStart".into()),
                (":event-type", "ignored".into()),
                ("n", HeaderValue::Int(1)),
            ],
            b"",
        );
        assert_eq!(m.str_header(":event-type"), Some("messageStart"));
        assert_eq!(m.str_header(":Event-Type"), None);
        assert_eq!(m.header("n"), Some(&HeaderValue::Int(1)));
        assert_eq!(m.str_header("n"), None);
        assert_eq!(m.exception(), None);
    }

    #[test]
    fn exceptions_and_errors() {
        let throttled = message(
            &[
                (":message-type", "exception".into()),
                (":exception-type", "throttlingException".into()),
            ],
            br#"{"message":"Too many requests"}"#,
        );
        let exception = throttled.exception().unwrap();
        assert_eq!(exception.kind, "throttlingException");
        assert_eq!(
            exception.to_string(),
            "throttlingException: Too many requests"
        );
        let error = message(
            &[
                (":message-type", "error".into()),
                (":error-code", "InternalFailure".into()),
                (":error-message", "broke".into()),
            ],
            b"",
        );
        assert_eq!(
            error.exception().unwrap().to_string(),
            "InternalFailure: broke"
        );
        let bare = message(&[(":message-type", "exception".into())], &[b'x'; 1000]);
        let exception = bare.exception().unwrap();
        assert_eq!(
            (exception.kind.as_str(), exception.message.len()),
            ("exception", 300)
        );
        let quiet = message(&[(":message-type", "error".into())], b"");
        assert_eq!(quiet.exception().unwrap().to_string(), "error");
        let event = message(&[(":message-type", "event".into())], b"{}");
        assert_eq!(event.exception(), None);
    }

    #[test]
    fn bad_checksums() {
        let frame = encode(&[(":event-type", "messageStop".into())], b"{}");
        let mut prelude = frame.clone();
        prelude[9] ^= 0x10;
        assert!(error_of(&prelude).starts_with("prelude checksum mismatch"));
        let mut body = frame.clone();
        body[frame.len() - 6] ^= 0x10;
        assert!(error_of(&body).starts_with("message checksum mismatch"));
        // A damaged length is caught by the prelude's checksum, not trusted.
        let mut length = frame;
        length[3] = 0xff;
        assert!(error_of(&length).starts_with("prelude checksum mismatch"));
    }

    #[test]
    fn lengths_that_do_not_fit() {
        assert_eq!(
            error_of(&prelude(15, 0)),
            "frame length 15 is below the 16-byte minimum"
        );

        let mut frame = encode(&[], b"abcd");
        frame[4..8].copy_from_slice(&5u32.to_be_bytes());
        resign(&mut frame);
        assert_eq!(
            error_of(&frame),
            "headers length 5 does not fit in a frame of 20 bytes"
        );

        // A header whose value runs past the headers section.
        let mut frame = encode(&[("s", "abc".into())], b"");
        frame[4..8].copy_from_slice(&6u32.to_be_bytes());
        resign(&mut frame);
        assert!(error_of(&frame).contains("runs past the end of the headers"));
    }

    #[test]
    fn oversized_frames_fail_before_they_are_buffered() {
        let mut parser = Parser::new();
        let error = parser
            .push(&prelude(MAX_FRAME_LEN as u32 + 1, 0))
            .unwrap_err();
        assert!(
            error.to_string().contains("over the 16777216-byte limit"),
            "{error}"
        );
        // Failed for good, and nothing kept.
        assert_eq!(parser.partial.capacity(), 0);
        assert_eq!(parser.push(b"more"), Err(error.clone()));
        assert_eq!(parser.finish(), Err(error));
        // The limit itself is allowed (only the prelude arrives here).
        assert_eq!(
            Parser::new().push(&prelude(MAX_FRAME_LEN as u32, 0)),
            Ok(Vec::new())
        );
    }

    #[test]
    fn unknown_types_and_bad_text() {
        let mut frame = encode(&[("h", HeaderValue::Bool(true))], b"");
        frame[14] = 10;
        resign(&mut frame);
        assert_eq!(error_of(&frame), "header \"h\" has unknown value type 10");

        let mut frame = encode(&[("h", "ab".into())], b"");
        frame[17] = 0xff;
        resign(&mut frame);
        assert_eq!(error_of(&frame), "header \"h\" is a string but not UTF-8");

        let mut frame = encode(&[("h", HeaderValue::Bool(true))], b"");
        frame[13] = 0xc3;
        resign(&mut frame);
        assert_eq!(error_of(&frame), "a header name is not UTF-8");

        // Bytes need not be UTF-8.
        let frame = encode(&[("h", HeaderValue::Bytes(vec![0xff]))], b"");
        assert!(parse(&[&frame]).1.is_ok());
    }

    #[test]
    fn a_stream_cut_short() {
        let frame = encode(&[(":event-type", "messageStop".into())], b"{}");
        assert_eq!(
            parse(&[&frame[..5]]).1.unwrap_err().to_string(),
            "the stream ended inside a frame: 5 bytes of at least 16 arrived"
        );
        let cut = &frame[..frame.len() - 1];
        assert_eq!(
            parse(&[cut]).1.unwrap_err().to_string(),
            format!(
                "the stream ended inside a frame: {} bytes of {} arrived",
                cut.len(),
                frame.len()
            )
        );
        assert_eq!(parse(&[]), (Vec::new(), Ok(())));
    }

    #[test]
    fn messages_before_a_fault_are_kept() {
        let good = encode(&[], b"1");
        let mut bad = encode(&[], b"2");
        bad[13] ^= 1;
        let mut parser = Parser::new();
        let bytes = [good.clone(), bad, good].concat();
        assert_eq!(parser.push(&bytes).unwrap().len(), 1);
        assert!(
            (parser.push(&[]).unwrap_err().to_string()).starts_with("message checksum mismatch")
        );
    }

    #[test]
    fn frame_errors_are_provider_failures() {
        let error = FrameError::new("bad");
        assert_eq!(
            ProviderError::from(error),
            ProviderError::Failed(
                "malformed response from upstream: invalid event stream: bad".into()
            )
        );
    }

    fn header_value() -> impl Strategy<Value = HeaderValue> {
        prop_oneof![
            any::<bool>().prop_map(HeaderValue::Bool),
            any::<i8>().prop_map(HeaderValue::Byte),
            any::<i16>().prop_map(HeaderValue::Short),
            any::<i32>().prop_map(HeaderValue::Int),
            any::<i64>().prop_map(HeaderValue::Long),
            prop::collection::vec(any::<u8>(), 0..20).prop_map(HeaderValue::Bytes),
            "[a-zA-Z:é😀-]{0,12}".prop_map(HeaderValue::String),
            any::<i64>().prop_map(HeaderValue::Timestamp),
            any::<[u8; 16]>().prop_map(HeaderValue::Uuid),
        ]
    }

    fn messages() -> impl Strategy<Value = Vec<Message>> {
        let header = ("[:a-z-]{0,12}", header_value());
        let message = (
            prop::collection::vec(header, 0..5),
            prop::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(|(headers, payload)| Message { headers, payload });
        prop::collection::vec(message, 0..6)
    }

    fn encode_all(messages: &[Message]) -> Vec<u8> {
        (messages.iter())
            .flat_map(|m| {
                let headers: Vec<(&str, HeaderValue)> = (m.headers.iter())
                    .map(|(name, value)| (name.as_str(), value.clone()))
                    .collect();
                encode(&headers, &m.payload)
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn any_split_of_a_stream_gives_its_messages(
            messages in messages(),
            cuts in prop::collection::vec(any::<Index>(), 0..12),
        ) {
            let bytes = encode_all(&messages);
            let whole = parse(&[&bytes]);
            prop_assert_eq!(&whole, &(messages, Ok(())));
            prop_assert_eq!(&parse_split(&bytes, &cuts), &whole);
            prop_assert_eq!(&parse_bytewise(&bytes), &whole);
        }

        #[test]
        fn any_damaged_byte_is_an_error_in_every_split(
            messages in messages().prop_filter("a frame to damage", |m| !m.is_empty()),
            at in any::<Index>(),
            flip in 1..=255u8,
            cuts in prop::collection::vec(any::<Index>(), 0..12),
        ) {
            let mut bytes = encode_all(&messages);
            let at = at.index(bytes.len());
            bytes[at] ^= flip;
            let whole = parse(&[&bytes]);
            // CRC32 catches every change within 32 bits: never a valid parse.
            prop_assert!(whole.1.is_err());
            // The frames before the damaged one still arrive, in any split.
            prop_assert!(messages.starts_with(&whole.0));
            prop_assert_eq!(&parse_split(&bytes, &cuts), &whole);
            prop_assert_eq!(&parse_bytewise(&bytes), &whole);
        }

        #[test]
        fn any_headers_with_right_checksums_never_panic(
            headers in prop::collection::vec(
                prop_oneof![
                    3 => (0..=11u8).prop_map(|b| vec![b]),
                    1 => prop::sample::select(vec![&b"\x00\x02"[..], b"\xff", b"\xc3", b"ab"])
                        .prop_map(<[u8]>::to_vec),
                    1 => any::<u8>().prop_map(|b| vec![b]),
                ],
                0..40,
            ),
            cuts in prop::collection::vec(any::<Index>(), 0..6),
        ) {
            let headers = headers.concat();
            let mut frame = encode(&[], &headers);
            frame[4..8].copy_from_slice(&(headers.len() as u32).to_be_bytes());
            resign(&mut frame);
            let whole = parse(&[&frame]);
            prop_assert_eq!(&parse_split(&frame, &cuts), &whole);
            if let (messages, Ok(())) = &whole {
                // Valid: it encodes back to the same bytes.
                prop_assert_eq!(&encode_all(messages), &frame);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_split_the_same(
            bytes in prop::collection::vec(any::<u8>(), 0..64),
            cuts in prop::collection::vec(any::<Index>(), 0..6),
        ) {
            let whole = parse(&[&bytes]);
            prop_assert_eq!(&parse_split(&bytes, &cuts), &whole);
        }
    }
}
