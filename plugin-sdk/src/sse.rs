//! Server-Sent Events, the framing most streaming APIs use.
//!
//! [`Parser`] is a pure incremental parser: feed it the body's bytes as they
//! arrive, split anywhere, and it returns the events completed so far.
//! [`crate::http::Response::sse`] wraps it around a response body.

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    /// The `event:` field (the event type), if the event had one.
    pub event: Option<String>,
    /// The `data:` lines, joined with `'\n'`.
    pub data: String,
    /// The `id:` field, if the event had one.
    pub id: Option<String>,
}

/// Incremental Server-Sent Events parser.
///
/// Feed bytes in any split with [`Parser::push`]; lines may end in CRLF, LF
/// or CR, lines starting with `:` are comments, and an event ends at a blank
/// line. Call [`Parser::finish`] at the end of the body for a last event that
/// was not followed by a blank line.
///
/// An event is produced when it has at least one `data:` or `event:` line;
/// `retry:` and unknown fields are ignored.
///
/// ```
/// use gateway_plugin_sdk::sse::Parser;
///
/// let mut parser = Parser::new();
/// assert!(parser.push(b"data: {\"a\"").is_empty());
/// let events = parser.push(b":1}\r\n\r\n: keep-alive\n\ndata: [DONE]");
/// assert_eq!(events[0].data, "{\"a\":1}");
/// assert_eq!(parser.finish().unwrap().data, "[DONE]");
/// ```
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The previous byte was a CR, so an LF right after it ends nothing.
    after_cr: bool,
    /// Whether the stream's first bytes were examined for a byte order mark.
    started: bool,
    /// Fields of the event being built.
    pending: Pending,
}

#[derive(Debug, Default)]
struct Pending {
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes the next bytes of the stream and returns the events they
    /// completed, in order.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        if !self.started {
            // The BOM may itself arrive split; wait until it can be decided.
            let seen = self.line.len() + bytes.len();
            let mut head = self.line.clone();
            head.extend_from_slice(&bytes[..bytes.len().min(BOM.len())]);
            if seen < BOM.len() && BOM.starts_with(&head) {
                self.line = head;
                return events;
            }
            self.started = true;
            if head.starts_with(BOM) {
                bytes = &bytes[BOM.len() - self.line.len()..];
                self.line.clear();
            }
        }
        for &byte in bytes {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.end_line(&mut events);
                    self.after_cr = true;
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    /// Ends the stream: returns the last event if the stream stopped without
    /// the blank line that would have completed it. The parser is then ready
    /// for a new stream.
    pub fn finish(&mut self) -> Option<Event> {
        if !self.line.is_empty() {
            // A non-empty line never completes an event, so nothing is lost.
            self.end_line(&mut Vec::new());
        }
        let last = self.dispatch();
        *self = Self::default();
        last
    }

    fn end_line(&mut self, events: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            events.extend(self.dispatch());
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        // Decoding whole lines keeps multi-byte characters split across
        // chunks intact.
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => match &mut self.pending.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(&value);
                }
                None => self.pending.data = Some(value.into_owned()),
            },
            b"event" => self.pending.event = Some(value.into_owned()),
            // The spec ignores ids containing NUL.
            b"id" if !value.contains('\0') => self.pending.id = Some(value.into_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self) -> Option<Event> {
        let pending = std::mem::take(&mut self.pending);
        if pending.data.is_none() && pending.event.is_none() {
            return None;
        }
        Some(Event {
            event: pending.event,
            data: pending.data.unwrap_or_default(),
            id: pending.id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(text: &str) -> Event {
        Event {
            data: text.into(),
            ..Event::default()
        }
    }

    /// Parses `stream` fed in pieces of `size` bytes, including `finish`.
    fn parse_in_pieces(stream: &[u8], size: usize) -> Vec<Event> {
        let mut parser = Parser::new();
        let mut events = Vec::new();
        for piece in stream.chunks(size) {
            events.extend(parser.push(piece));
        }
        events.extend(parser.finish());
        events
    }

    #[test]
    fn events_end_at_blank_lines() {
        let mut parser = Parser::new();
        let events = parser.push(b"data: one\n\ndata: two\n\n");
        assert_eq!(events, vec![data("one"), data("two")]);
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn every_split_gives_the_same_events() {
        let stream = "\u{feff}: hello\r\nevent: delta\r\nid: 7\r\ndata: {\"t\":\"héllo\"}\r\n\r\n\
                      data: a\ndata:b\ndata:  c\n\n\
                      data: cr\r\rdata: last"
            .as_bytes();
        let expected = vec![
            Event {
                event: Some("delta".into()),
                data: "{\"t\":\"héllo\"}".into(),
                id: Some("7".into()),
            },
            data("a\nb\n c"),
            data("cr"),
            data("last"),
        ];
        for size in 1..=stream.len() {
            assert_eq!(parse_in_pieces(stream, size), expected, "pieces of {size}");
        }
    }

    #[test]
    fn crlf_split_between_pushes_is_one_line_end() {
        let mut parser = Parser::new();
        assert!(parser.push(b"data: x\r").is_empty());
        // The LF completes the CRLF; only the next CRLF is the blank line.
        assert!(parser.push(b"\n").is_empty());
        assert_eq!(parser.push(b"\r\n"), vec![data("x")]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let events = parse_in_pieces(b": ping\n\n:\nretry: 100\nfoo: bar\n\ndata: x\n\n", 64);
        assert_eq!(events, vec![data("x")]);
    }

    #[test]
    fn field_without_colon_and_empty_data() {
        let events = parse_in_pieces(b"data\n\ndata:\ndata:\n\n", 64);
        assert_eq!(events, vec![data(""), data("\n")]);
    }

    #[test]
    fn event_without_data_is_kept() {
        let events = parse_in_pieces(b"event: ping\n\n", 64);
        assert_eq!(
            events,
            vec![Event {
                event: Some("ping".into()),
                ..Event::default()
            }]
        );
    }

    #[test]
    fn final_event_without_blank_line() {
        let mut parser = Parser::new();
        assert!(parser.push(b"data: {\"done\":true}\n").is_empty());
        assert_eq!(parser.finish(), Some(data("{\"done\":true}")));
        // Without a line end at all.
        assert!(parser.push(b"data: tail").is_empty());
        assert_eq!(parser.finish(), Some(data("tail")));
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn only_a_leading_bom_is_removed() {
        assert_eq!(
            parse_in_pieces(b"\xEF\xBB\xBFdata: a\n\n", 1),
            vec![data("a")]
        );
        let mut parser = Parser::new();
        assert!(parser.push(b"\xEF\xBB").is_empty());
        assert_eq!(parser.push(b"data: b\n\n"), vec![]);
        let events = parse_in_pieces(b"data: \xEF\xBB\xBFc\n\n", 3);
        assert_eq!(events, vec![data("\u{feff}c")]);
    }

    #[test]
    fn short_stream_that_is_not_a_bom() {
        assert_eq!(parse_in_pieces(b"\n", 1), vec![]);
        assert_eq!(parse_in_pieces(b"da", 1), vec![]);
        assert_eq!(parse_in_pieces(b"data:x", 1), vec![data("x")]);
    }
}

/// Property tests: the parser's promise that a stream may arrive split
/// anywhere, checked on generated streams.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;

    /// One non-blank line of a stream.
    #[derive(Debug, Clone)]
    enum Line {
        /// `:` and text.
        Comment(String),
        /// `name:` then the rest of the line (which may start with spaces).
        Field { name: &'static str, rest: String },
        /// A field name alone, no colon.
        Bare(&'static str),
    }

    impl Line {
        fn text(&self) -> String {
            match self {
                Line::Comment(text) => format!(":{text}"),
                Line::Field { name, rest } => format!("{name}:{rest}"),
                Line::Bare(name) => (*name).to_owned(),
            }
        }
    }

    /// A generated stream: blocks of lines, each ended by a blank line except
    /// possibly the last.
    #[derive(Debug, Clone)]
    struct Stream {
        bom: bool,
        blocks: Vec<Vec<Line>>,
        /// Line ends, drawn in turn for every line including blank ones.
        ends: Vec<&'static str>,
        /// Whether the last block has its blank line.
        last_blank: bool,
        /// Whether the very last line has its line end.
        last_end: bool,
    }

    impl Stream {
        fn bytes(&self) -> Vec<u8> {
            let mut out = String::new();
            if self.bom {
                out.push('\u{feff}');
            }
            let mut ends = self.ends.iter().cycle();
            let mut previous = "";
            let mut end = |out: &mut String, blank: bool| {
                let mut next = *ends.next().unwrap_or(&"\n");
                // After a CR, a lone LF would merge into a CRLF instead of
                // ending a blank line.
                if blank && previous == "\r" && next == "\n" {
                    next = "\r\n";
                }
                out.push_str(next);
                previous = next;
            };
            for (i, block) in self.blocks.iter().enumerate() {
                let last_block = i + 1 == self.blocks.len();
                for (j, line) in block.iter().enumerate() {
                    out.push_str(&line.text());
                    let last_line = last_block && j + 1 == block.len();
                    if !(last_line && !self.last_blank && !self.last_end) {
                        end(&mut out, false);
                    }
                }
                if !last_block || self.last_blank {
                    end(&mut out, true);
                }
            }
            out.into_bytes()
        }

        /// The events the stream holds, per the parser's documented rules
        /// (an event needs `data` or `event`; `data` lines join with `\n`; an
        /// id with NUL is ignored; one space after the colon is dropped).
        fn events(&self) -> Vec<Event> {
            let mut events = Vec::new();
            for block in &self.blocks {
                let (mut event, mut data, mut id) = (None, None::<String>, None);
                for line in block {
                    let (name, value) = match line {
                        Line::Comment(_) => continue,
                        Line::Field { name, rest } => {
                            (*name, rest.strip_prefix(' ').unwrap_or(rest).to_owned())
                        }
                        Line::Bare(name) => (*name, String::new()),
                    };
                    match name {
                        "data" => match &mut data {
                            Some(data) => {
                                data.push('\n');
                                data.push_str(&value);
                            }
                            None => data = Some(value),
                        },
                        "event" => event = Some(value),
                        "id" if !value.contains('\0') => id = Some(value),
                        _ => {}
                    }
                }
                if data.is_some() || event.is_some() {
                    events.push(Event {
                        event,
                        data: data.unwrap_or_default(),
                        id,
                    });
                }
            }
            events
        }
    }

    /// Text without line ends: ASCII with colons and spaces (the characters
    /// that matter to the parser), or any characters, multi-byte included.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ :a-z0-9{}\"]{0,12}",
            "[^\r\n]{0,8}",
            // A value starting with spaces: only the first one is dropped.
            "  ?[é€😀a]{0,4}",
        ]
    }

    fn line() -> impl Strategy<Value = Line> {
        let name = prop::sample::select(vec!["data", "event", "id", "retry", "dat", "datas"]);
        prop_oneof![
            1 => text().prop_map(Line::Comment),
            6 => (name.clone(), text()).prop_map(|(name, rest)| Line::Field { name, rest }),
            1 => name.prop_map(Line::Bare),
        ]
    }

    fn stream() -> impl Strategy<Value = Stream> {
        (
            any::<bool>(),
            prop::collection::vec(prop::collection::vec(line(), 0..5), 0..8),
            prop::collection::vec(prop::sample::select(vec!["\n", "\r\n", "\r"]), 1..6),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(bom, blocks, ends, last_blank, last_end)| Stream {
                bom,
                blocks,
                ends,
                last_blank,
                last_end,
            })
    }

    /// Feeds `bytes` cut at `cuts` (positions, in any order, repeats making
    /// empty pushes), then finishes.
    fn parse_split(bytes: &[u8], cuts: &[Index]) -> Vec<Event> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut parser = Parser::new();
        let mut events = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            events.extend(parser.push(&bytes[from..cut]));
            from = cut;
        }
        events.extend(parser.finish());
        events
    }

    fn parse_whole(bytes: &[u8]) -> Vec<Event> {
        let mut parser = Parser::new();
        let mut events = parser.push(bytes);
        events.extend(parser.finish());
        events
    }

    fn parse_bytewise(bytes: &[u8]) -> Vec<Event> {
        let mut parser = Parser::new();
        let mut events: Vec<Event> = bytes.iter().flat_map(|b| parser.push(&[*b])).collect();
        events.extend(parser.finish());
        events
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn any_split_of_a_valid_stream_gives_its_events(
            stream in stream(),
            cuts in prop::collection::vec(any::<Index>(), 0..12),
        ) {
            let bytes = stream.bytes();
            let whole = parse_whole(&bytes);
            prop_assert_eq!(&whole, &stream.events());
            prop_assert_eq!(&parse_split(&bytes, &cuts), &whole);
            prop_assert_eq!(&parse_bytewise(&bytes), &whole);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_split_the_same(
            // A BOM, part of one or none first: the start is handled apart.
            bom in 0..=BOM.len(),
            body in prop::collection::vec(
                // Mostly pieces the parser looks for, so that fields and
                // events form; any byte besides.
                prop_oneof![
                    3 => prop::sample::select(vec![
                        &b"data"[..], b"event", b"id", b":", b" ", b"\r", b"\n", b"\r\n", BOM,
                        b"\xEF\xBB", b"\xC3", b"\xA9", b"x",
                    ])
                    .prop_map(<[u8]>::to_vec),
                    1 => any::<u8>().prop_map(|b| vec![b]),
                ],
                0..100,
            ),
            cuts in prop::collection::vec(any::<Index>(), 0..12),
        ) {
            let bytes = [&BOM[..bom], &body.concat()].concat();
            let whole = parse_whole(&bytes);
            prop_assert_eq!(&parse_split(&bytes, &cuts), &whole);
            prop_assert_eq!(&parse_bytewise(&bytes), &whole);
        }
    }
}
