//! Newline-delimited JSON (NDJSON, JSON Lines), the framing of APIs that stream one JSON
//! value a line (Ollama's, and many in-house ones).
//!
//! [`Parser`] cuts the body into lines as it arrives, split anywhere, and hands each
//! non-blank line on as an [`Event`] whose `data` is the line: a decoder reads NDJSON with
//! the same [`crate::StreamDecoder::event`] it would read SSE with, and the default one
//! (`[DONE]` ends, anything else is [`crate::StreamDecoder::body`]) needs no change.
//! [`crate::http::Response::ndjson`] wraps it around a response body.

use crate::sse::Event;

/// Incremental NDJSON line splitter.
///
/// Lines end in LF (a CR before it is dropped); blank lines are skipped; the
/// line is decoded as UTF-8 once whole, so characters split across chunks stay
/// intact. Call [`Parser::finish`] at the end of the body for a last line with
/// no newline after it.
///
/// ```
/// use gateway_plugin_sdk::ndjson::Parser;
///
/// let mut parser = Parser::new();
/// assert!(parser.push(b"{\"a\"").is_empty());
/// let lines = parser.push(b":1}\r\n\n{\"b\":2}\n{\"c\"");
/// assert_eq!(lines[0].data, "{\"a\":1}");
/// assert_eq!(lines[1].data, "{\"b\":2}");
/// assert_eq!(parser.finish().unwrap().data, "{\"c\"");
/// ```
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes the next bytes of the stream and returns the lines they
    /// completed, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut lines = Vec::new();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..end]);
            lines.extend(self.take_line());
            rest = &rest[end + 1..];
        }
        self.line.extend_from_slice(rest);
        lines
    }

    /// Ends the stream: the last line, if the body did not end with a
    /// newline. The parser is then ready for a new stream.
    pub fn finish(&mut self) -> Option<Event> {
        self.take_line()
    }

    fn take_line(&mut self) -> Option<Event> {
        let line = std::mem::take(&mut self.line);
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        (!text.is_empty()).then(|| Event {
            data: text.to_owned(),
            ..Event::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<String> {
        let mut parser = Parser::new();
        let mut lines: Vec<String> = chunks
            .iter()
            .flat_map(|chunk| parser.push(chunk))
            .map(|e| e.data)
            .collect();
        lines.extend(parser.finish().map(|e| e.data));
        lines
    }

    #[test]
    fn every_split_gives_the_same_lines() {
        let body = "{\"t\":\"h\u{e9}\"}\r\n\n  \n{\"t\":\"\u{1F600}\"}\n[DONE]".as_bytes();
        let whole = all(&[body]);
        assert_eq!(
            whole,
            ["{\"t\":\"h\u{e9}\"}", "{\"t\":\"\u{1F600}\"}", "[DONE]"]
        );
        for a in 0..=body.len() {
            for b in a..=body.len() {
                assert_eq!(
                    all(&[&body[..a], &body[a..b], &body[b..]]),
                    whole,
                    "{a} {b}"
                );
            }
        }
    }

    #[test]
    fn a_body_that_ends_with_a_newline_has_no_extra_line() {
        assert_eq!(all(&[b"{}\n"]), ["{}"]);
        assert!(all(&[b"\n\r\n"]).is_empty());
        let mut parser = Parser::new();
        assert!(parser.finish().is_none());
    }
}
