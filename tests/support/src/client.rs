//! A deliberately small blocking HTTP/1.1 client.
//!
//! Written by hand instead of using reqwest so that tests control every byte
//! they send (invalid JSON, oversized bodies, odd auth headers), read SSE
//! bodies frame by frame as they arrive, and can drop a connection mid-stream
//! to simulate a client that goes away. Every request uses its own connection
//! with `Connection: close`, so nothing is pooled between requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::sse::event_data;

/// Generous: a hung gateway fails the test instead of blocking it forever,
/// while a slow CI machine does not cause spurious failures.
const IO_TIMEOUT: Duration = Duration::from_secs(120);

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names are lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON; panics with the body text when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response (status {}) is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }
}

/// A streamed response read to its end, split into SSE frames.
#[derive(Debug, Clone)]
pub struct SseResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The whole body as received.
    pub raw: String,
    /// Every event's `data`, parsed as JSON, in order. Empty when the answer
    /// was not an event stream (an error answered before streaming began).
    pub frames: Vec<Value>,
}

impl SseResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body parsed as one JSON document (for error answers sent before
    /// the stream started).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.raw).unwrap_or_else(|e| {
            panic!(
                "response (status {}) is not JSON ({e}): {}",
                self.status, self.raw
            )
        })
    }

    /// Whether the answer is an event stream.
    pub fn is_event_stream(&self) -> bool {
        self.header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream"))
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A `multipart/form-data` body with `boundary`: the text `fields`, then, when given, a file
/// field `file` of `(file name, content type, bytes)`.
pub fn form(boundary: &str, fields: &[(&str, &str)], file: Option<(&str, &str, &[u8])>) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .into_bytes(),
        );
    }
    if let Some((name, content_type, bytes)) = file {
        body.extend(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
                 Content-Type: {content_type}\r\n\r\n"
            )
            .into_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend(format!("--{boundary}--\r\n").into_bytes());
    body
}

/// Sends one request and reads the whole response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut conn = Connection::open(addr, method, path, headers, body);
    let body = conn.read_to_end();
    Response {
        status: conn.status,
        headers: conn.headers,
        body,
    }
}

/// Connects and sends one request (HTTP/1.1, `Connection: close`), reading nothing: the stream
/// is the caller's to read, or to drop (a caller who hangs up before its answer).
pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> TcpStream {
    let stream = TcpStream::connect(addr)
        .unwrap_or_else(|e| panic!("cannot connect to the gateway at {addr}: {e}"));
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("set read timeout");
    stream
        .set_write_timeout(Some(IO_TIMEOUT))
        .expect("set write timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    (&stream)
        .write_all(&message)
        .unwrap_or_else(|e| panic!("cannot send {method} {path}: {e}"));
    stream
}

/// An open response whose body is read incrementally. Dropping it closes the
/// connection, which is how tests disconnect mid-stream.
pub struct Connection {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    framing: Framing,
    /// Decoded body bytes not yet handed out as an SSE event.
    pending: Vec<u8>,
    finished: bool,
}

enum Framing {
    Chunked { remaining_in_chunk: usize },
    Length(usize),
    UntilClose,
}

impl Connection {
    /// Sends the request and reads the status line and headers.
    pub fn open(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Connection {
        let stream = send(addr, method, path, headers, body);
        let mut reader = BufReader::new(stream);
        let status_line = read_line(&mut reader)
            .unwrap_or_else(|| panic!("{method} {path}: connection closed before a status line"));
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("{method} {path}: bad status line {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let line = read_line(&mut reader)
                .unwrap_or_else(|| panic!("{method} {path}: connection closed in the headers"));
            if line.is_empty() {
                break;
            }
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("{method} {path}: bad header line {line:?}"));
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let chunked = find_header(&headers, "transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let framing = if chunked {
            Framing::Chunked {
                remaining_in_chunk: 0,
            }
        } else if let Some(length) = find_header(&headers, "content-length") {
            Framing::Length(
                length
                    .parse()
                    .unwrap_or_else(|_| panic!("{method} {path}: bad content-length {length:?}")),
            )
        } else if method == "HEAD" || status == 204 || status == 304 {
            Framing::Length(0)
        } else {
            Framing::UntilClose
        };
        Connection {
            status,
            headers,
            reader,
            framing,
            pending: Vec::new(),
            finished: false,
        }
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The next piece of decoded body, `None` at its end.
    fn next_piece(&mut self) -> Option<Vec<u8>> {
        if self.finished {
            return None;
        }
        match &mut self.framing {
            Framing::Length(0) => {
                self.finished = true;
                None
            }
            Framing::Length(left) => {
                let mut buf = vec![0; (*left).min(16 * 1024)];
                let n = self.reader.read(&mut buf).expect("read the response body");
                assert!(
                    n > 0,
                    "connection closed {left} bytes before the body's end"
                );
                *left -= n;
                buf.truncate(n);
                Some(buf)
            }
            Framing::UntilClose => {
                let mut buf = vec![0; 16 * 1024];
                let n = self.reader.read(&mut buf).expect("read the response body");
                if n == 0 {
                    self.finished = true;
                    return None;
                }
                buf.truncate(n);
                Some(buf)
            }
            Framing::Chunked { remaining_in_chunk } => {
                if *remaining_in_chunk == 0 {
                    let size_line = read_line(&mut self.reader)
                        .expect("connection closed before the chunked body's end");
                    let size_text = size_line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size_text, 16)
                        .unwrap_or_else(|_| panic!("bad chunk size line {size_line:?}"));
                    if size == 0 {
                        // Trailers, if any, end with an empty line.
                        while let Some(line) = read_line(&mut self.reader) {
                            if line.is_empty() {
                                break;
                            }
                        }
                        self.finished = true;
                        return None;
                    }
                    *remaining_in_chunk = size;
                }
                let mut buf = vec![0; (*remaining_in_chunk).min(16 * 1024)];
                let n = self.reader.read(&mut buf).expect("read a body chunk");
                assert!(n > 0, "connection closed inside a chunk");
                *remaining_in_chunk -= n;
                buf.truncate(n);
                if *remaining_in_chunk == 0 {
                    let end = read_line(&mut self.reader).expect("chunk without its CRLF");
                    assert!(end.is_empty(), "chunk data longer than its size: {end:?}");
                }
                Some(buf)
            }
        }
    }

    /// Reads the rest of the body.
    pub fn read_to_end(&mut self) -> Vec<u8> {
        let mut body = std::mem::take(&mut self.pending);
        while let Some(piece) = self.next_piece() {
            body.extend_from_slice(&piece);
        }
        body
    }

    /// The next SSE event's raw text (without its terminating blank line),
    /// `None` when the body ends. A trailing event without a blank line is
    /// returned too.
    pub fn next_event(&mut self) -> Option<String> {
        loop {
            if let Some((end, sep)) = find_event_end(&self.pending) {
                let event = String::from_utf8_lossy(&self.pending[..end]).into_owned();
                self.pending.drain(..end + sep);
                return Some(event);
            }
            match self.next_piece() {
                Some(piece) => self.pending.extend_from_slice(&piece),
                None => {
                    if self.pending.iter().all(|b| b.is_ascii_whitespace()) {
                        self.pending.clear();
                        return None;
                    }
                    let event = String::from_utf8_lossy(&self.pending).into_owned();
                    self.pending.clear();
                    return Some(event);
                }
            }
        }
    }

    /// The next SSE frame's `data` parsed as JSON, `None` when the body ends.
    pub fn next_frame(&mut self) -> Option<Value> {
        loop {
            let event = self.next_event()?;
            if let Some(data) = event_data(&event) {
                return Some(parse_frame(&data, &event));
            }
        }
    }
}

/// Position and length of the first blank-line separator.
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn parse_frame(data: &str, event: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| {
        panic!("SSE data is not JSON ({e}); clients parse every data line: {event:?}")
    })
}

/// Splits a complete SSE body into frames (every event's data as JSON).
pub fn parse_sse(raw: &str) -> Vec<Value> {
    let normalized = raw.replace("\r\n", "\n");
    normalized
        .split("\n\n")
        .filter_map(|event| event_data(event).map(|data| parse_frame(&data, event)))
        .collect()
}

/// Reads one CRLF- or LF-terminated line without its terminator; `None` at EOF.
fn read_line(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = Vec::new();
    let n = reader.read_until(b'\n', &mut line).expect("read a line");
    if n == 0 {
        return None;
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Some(String::from_utf8_lossy(&line).into_owned())
}
