//! Reading a provider's answer, whole or streamed, into a [`Completion`].
//!
//! A plugin describes only its wire format: a [`StreamDecoder`] turns a whole
//! answer, or one event of a streamed one, into calls on an [`Answer`] (text,
//! tool calls, finish reasons, usage, the answering model). [`read_completion`]
//! and [`read_stream`] own the rest, which every provider shares: the status
//! check and the mapping of error answers, the event loop, sending new text
//! and usage to the caller as they arrive, and telling a complete answer from
//! one cut short.
//!
//! ```
//! use gateway_plugin_sdk::http::Response;
//! use gateway_plugin_sdk::sse::Event;
//! use gateway_plugin_sdk::{Answer, FinishReason, ProviderError, Sink, StreamDecoder, read_stream};
//!
//! /// An upstream that streams `data: <text>` events and ends with `data: [END]`.
//! struct Lines;
//!
//! impl StreamDecoder for Lines {
//!     fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
//!         answer.text(0, &String::from_utf8_lossy(body));
//!         answer.complete();
//!         Ok(())
//!     }
//!
//!     fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
//!         if event.data == "[END]" {
//!             answer.finish_reason(0, FinishReason::Stop);
//!             answer.end();
//!         } else {
//!             answer.text(0, &event.data);
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let body = b"data: Hel\n\ndata: lo\n\ndata: [END]\n\n".to_vec();
//! let response = Response::from_chunks(200, Vec::new(), vec![body]);
//! let mut sink = Sink::buffered();
//! let completion = read_stream(response, &mut sink, "m-1", Lines).unwrap();
//! assert_eq!(completion.choices[0].text, "Hello");
//! assert_eq!(sink.sent().len(), 2);
//!
//! // Cut off before its end: an error, not a short answer.
//! let cut = Response::from_chunks(200, Vec::new(), vec![b"data: Hel\n\n".to_vec()]);
//! assert!(read_stream(cut, &mut Sink::buffered(), "m-1", Lines).is_err());
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::eventstream;
use crate::http::Response;
use crate::sse::Event;
use crate::{
    Chunk, Completion, FinishReason, ProviderError, ReasoningDelta, Sink, StreamAssembler,
    TextDelta, ToolCallDelta, Usage,
};

/// One provider's answer format: what [`read_completion`] and [`read_stream`]
/// need to know of it.
///
/// The decoder keeps whatever state its format needs between events (open
/// content blocks, counts); everything that ends up in the completion goes
/// into the [`Answer`].
pub trait StreamDecoder {
    /// Reads a whole answer: a non-streamed one, or the JSON answer a server
    /// sent in one piece although a stream was asked for. Call
    /// [`Answer::complete`] when the body is a complete answer.
    fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError>;

    /// Reads one event of a streamed answer. Call [`Answer::complete`] when
    /// the upstream says the answer is whole (e.g. a finish reason; later
    /// events may still bring usage), [`Answer::end`] at its end marker (no
    /// more events are read).
    ///
    /// Default, for APIs whose events each carry a JSON piece of the answer:
    /// `data: [DONE]` (OpenAI's end marker) ends the answer, empty data is
    /// skipped, any other data is read with [`StreamDecoder::body`].
    fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
        match event.data.trim() {
            "[DONE]" => answer.end(),
            "" => {}
            data => self.body(data.as_bytes(), answer)?,
        }
        Ok(())
    }

    /// Reads one message of an AWS event stream (a response whose
    /// `Content-Type` is `application/vnd.amazon.eventstream`, as Amazon
    /// Bedrock streams), as [`StreamDecoder::event`] reads one Server-Sent
    /// Event.
    ///
    /// Default: an error the upstream sent in the stream (`:message-type`
    /// `exception` or `error`, see [`eventstream::Message::exception`]) is
    /// `ProviderError::Failed("<exception type>: <message>")`; any other
    /// message's payload is read with [`StreamDecoder::body`]. Override it to
    /// tell events apart by their `:event-type` header, or to map exceptions
    /// to other errors (a throttling exception to an upstream 429).
    fn message(
        &mut self,
        message: &eventstream::Message,
        answer: &mut Answer,
    ) -> Result<(), ProviderError> {
        if let Some(exception) = message.exception() {
            return Err(ProviderError::Failed(exception.to_string()));
        }
        self.body(&message.payload, answer)
    }

    /// Called once after the body or the last event of a complete answer,
    /// before the completion is built: settle what the answer left open.
    /// Default: nothing.
    fn end(&mut self, answer: &mut Answer) -> Result<(), ProviderError> {
        let _ = answer;
        Ok(())
    }
}

/// How far an answer got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Progress {
    Open,
    /// The upstream said the answer is whole; events may still follow.
    Complete,
    /// The end marker arrived: stop reading.
    Ended,
}

/// The answer being read: the completion so far, and what the caller has not
/// been sent yet.
///
/// Streamed text, tool-call pieces and usage given to it reach the caller
/// after each event (by [`read_stream`]); everything reaches the final
/// [`Completion`].
#[derive(Debug)]
pub struct Answer {
    assembler: StreamAssembler,
    model: String,
    /// Logprobs per choice, merged across events.
    logprobs: BTreeMap<u32, Value>,
    /// Text not yet sent to the caller.
    unsent: Vec<TextDelta>,
    /// Tool-call pieces not yet sent to the caller.
    unsent_calls: Vec<ToolCallDelta>,
    /// Reasoning pieces not yet sent to the caller.
    unsent_reasoning: Vec<ReasoningDelta>,
    /// The calls, as `(choice, call)`, whose id / name the caller was sent.
    ids_sent: BTreeSet<(u32, u32)>,
    names_sent: BTreeSet<(u32, u32)>,
    /// The usage changed since the caller was last sent it.
    usage_unsent: bool,
    progress: Progress,
}

impl Answer {
    /// An empty answer to a request for `requested_model`, the model reported
    /// unless the upstream names another ([`Answer::model`]).
    ///
    /// [`read_completion`] and [`read_stream`] make one; make one yourself to
    /// test a decoder event by event.
    pub fn new(requested_model: &str) -> Self {
        Answer {
            assembler: StreamAssembler::new(),
            model: requested_model.to_owned(),
            logprobs: BTreeMap::new(),
            unsent: Vec::new(),
            unsent_calls: Vec::new(),
            unsent_reasoning: Vec::new(),
            ids_sent: BTreeSet::new(),
            names_sent: BTreeSet::new(),
            usage_unsent: false,
            progress: Progress::Open,
        }
    }

    /// The model the upstream says answered; an empty name is ignored (some
    /// servers send `""` in all but one event), the last one wins.
    pub fn model(&mut self, model: &str) {
        if !model.is_empty() {
            model.clone_into(&mut self.model);
        }
    }

    /// Appends `text` to choice `choice` and queues it for the caller. Empty
    /// text sends nothing but makes the choice part of the answer, so that a
    /// choice that never says anything is still reported.
    pub fn text(&mut self, choice: u32, text: &str) {
        self.assembler.push_text(choice, text);
        if text.is_empty() {
            return;
        }
        match self.unsent.last_mut() {
            Some(last) if last.index == choice => last.text.push_str(text),
            _ => self.unsent.push(TextDelta {
                index: choice,
                text: text.to_owned(),
            }),
        }
    }

    /// Adds a piece of tool call `call` of choice `choice`: the id and name
    /// count once (the first non-empty value), `arguments` pieces are
    /// appended. A call still without an id at the end gets
    /// `call_{choice}_{call}`. The pieces are queued for the caller too, who
    /// sees the id and name once and the arguments as they come.
    pub fn tool_call(
        &mut self,
        choice: u32,
        call: u32,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        let id = id.filter(|id| !id.is_empty());
        let name = name.filter(|name| !name.is_empty());
        self.assembler
            .push_tool_call(choice, call, id, name, arguments);
        let id = id.filter(|_| self.ids_sent.insert((choice, call)));
        let name = name.filter(|_| self.names_sent.insert((choice, call)));
        let arguments = arguments.unwrap_or_default();
        if id.is_none() && name.is_none() && arguments.is_empty() {
            return;
        }
        match self.unsent_calls.last_mut() {
            // Another piece of the call just queued: one delta, as for text.
            Some(last)
                if last.index == choice
                    && last.call == call
                    && (id.is_none() || last.id.is_none())
                    && (name.is_none() || last.name.is_none()) =>
            {
                last.id = last.id.take().or(id.map(str::to_owned));
                last.name = last.name.take().or(name.map(str::to_owned));
                last.arguments.push_str(arguments);
            }
            _ => self.unsent_calls.push(ToolCallDelta {
                index: choice,
                call,
                id: id.map(str::to_owned),
                name: name.map(str::to_owned),
                arguments: arguments.to_owned(),
            }),
        }
    }

    /// Appends `text` to reasoning block `block` of choice `choice` and queues
    /// it for the caller. Blocks are kept in the order of their numbers, which
    /// need not start at 0 or follow each other (a provider's content block
    /// index will do); the answer lists them before the choice's text.
    pub fn reasoning(&mut self, choice: u32, block: u32, text: &str) {
        self.assembler
            .push_reasoning(choice, block, text, None, None);
        if !text.is_empty() {
            self.queue_reasoning(choice, block, text, None, None);
        }
    }

    /// Sets the provider's signature of reasoning block `block` (Anthropic's
    /// `signature_delta`), and queues it for the caller.
    pub fn reasoning_signature(&mut self, choice: u32, block: u32, signature: &str) {
        self.assembler
            .push_reasoning(choice, block, "", Some(signature), None);
        self.queue_reasoning(choice, block, "", Some(signature), None);
    }

    /// Adds reasoning block `block` the provider does not show, as the opaque
    /// text to send back on the next turn (Anthropic's `redacted_thinking`,
    /// OpenAI's `encrypted_content`), and queues it for the caller.
    pub fn redacted_reasoning(&mut self, choice: u32, block: u32, data: &str) {
        self.assembler
            .push_reasoning(choice, block, "", None, Some(data));
        self.queue_reasoning(choice, block, "", None, Some(data));
    }

    fn queue_reasoning(
        &mut self,
        choice: u32,
        block: u32,
        text: &str,
        signature: Option<&str>,
        redacted: Option<&str>,
    ) {
        match self.unsent_reasoning.last_mut() {
            Some(last)
                if last.index == choice
                    && last.block == block
                    && last.signature.is_none()
                    && last.redacted.is_none() =>
            {
                last.text.push_str(text);
                last.signature = signature.map(str::to_owned);
                last.redacted = redacted.map(str::to_owned);
            }
            _ => self.unsent_reasoning.push(ReasoningDelta {
                index: choice,
                block,
                text: text.to_owned(),
                signature: signature.map(str::to_owned),
                redacted: redacted.map(str::to_owned),
            }),
        }
    }

    /// Adds a piece of the legacy single function call of choice `choice`.
    pub fn function_call(&mut self, choice: u32, name: Option<&str>, arguments: Option<&str>) {
        let name = name.filter(|name| !name.is_empty());
        self.assembler.push_function_call(choice, name, arguments);
    }

    /// Sets why choice `choice` ended (the last value wins).
    pub fn finish_reason(&mut self, choice: u32, reason: FinishReason) {
        self.assembler.finish_reason(choice, reason);
    }

    /// Sets the usage so far (the last value wins: providers report totals)
    /// and queues it for the gateway, so that a stream cut short is still
    /// recorded with what it used.
    pub fn usage(&mut self, usage: Usage) {
        self.assembler.set_usage(usage);
        self.usage_unsent = true;
    }

    /// Adds logprobs of choice `choice`: JSON arrays are concatenated with the
    /// ones given before (streamed pieces), other fields keep their first
    /// non-null value.
    pub fn logprobs(&mut self, choice: u32, logprobs: Value) {
        if !logprobs.is_null() {
            merge_logprobs(self.logprobs.entry(choice).or_insert(Value::Null), logprobs);
        }
    }

    /// The upstream said the answer is whole; later events are still read.
    pub fn complete(&mut self) {
        self.progress = self.progress.max(Progress::Complete);
    }

    /// The upstream's end marker: the answer is whole and no more events are
    /// read.
    pub fn end(&mut self) {
        self.progress = Progress::Ended;
    }

    /// Whether [`Answer::complete`] or [`Answer::end`] was called.
    pub fn is_complete(&self) -> bool {
        self.progress >= Progress::Complete
    }

    /// The text, reasoning, tool-call pieces and usage the caller has not
    /// been sent yet, if any: for a stream loop of one's own, which sends it
    /// with [`Sink::send`] after each event, as [`read_stream`] does.
    pub fn take_unsent(&mut self) -> Option<Chunk> {
        let usage = if std::mem::take(&mut self.usage_unsent) {
            self.assembler.usage()
        } else {
            None
        };
        if self.unsent.is_empty()
            && self.unsent_reasoning.is_empty()
            && self.unsent_calls.is_empty()
            && usage.is_none()
        {
            return None;
        }
        Some(Chunk {
            deltas: std::mem::take(&mut self.unsent),
            reasoning: std::mem::take(&mut self.unsent_reasoning),
            tool_calls: std::mem::take(&mut self.unsent_calls),
            usage,
        })
    }

    /// The completion: choices by index, calls without an id given
    /// `call_{choice}_{position}`, and (as [`StreamAssembler::finish`] does)
    /// `function_call` mirroring the first tool call when a choice has none.
    pub fn finish(mut self) -> Completion {
        let mut completion = self.assembler.finish(self.model);
        for choice in &mut completion.choices {
            if let Some(logprobs) = self.logprobs.remove(&choice.index) {
                choice.logprobs = Some(logprobs.to_string());
            }
            for (position, call) in choice.tool_calls.iter_mut().enumerate() {
                if call.id.is_empty() {
                    call.id = format!("call_{}_{position}", choice.index);
                }
            }
        }
        completion
    }
}

/// Merges a piece of logprobs into the choice's so far.
fn merge_logprobs(into: &mut Value, piece: Value) {
    match (into, piece) {
        (Value::Object(acc), Value::Object(piece)) => {
            for (key, value) in piece {
                match (acc.get_mut(&key), value) {
                    (Some(Value::Array(existing)), Value::Array(more)) => existing.extend(more),
                    (Some(existing), value) if existing.is_null() => *existing = value,
                    (None, value) => {
                        acc.insert(key, value);
                    }
                    _ => {}
                }
            }
        }
        (slot, piece) if slot.is_null() => *slot = piece,
        _ => {}
    }
}

/// Reads a non-streamed answer with `decoder`.
///
/// A non-2xx status is [`ProviderError::Upstream`] with the provider's message
/// ([`crate::http::Response::error_for_status`]).
pub fn read_completion(
    response: Response,
    requested_model: &str,
    mut decoder: impl StreamDecoder,
) -> Result<Completion, ProviderError> {
    let response = response.error_for_status()?;
    let mut answer = Answer::new(requested_model);
    decoder.body(&response.bytes()?, &mut answer)?;
    decoder.end(&mut answer)?;
    Ok(answer.finish())
}

/// How a streamed answer's body is cut into events ([`read_stream_framed`],
/// [`crate::HttpProvider::FRAMING`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// By the response's `Content-Type`: JSON is one whole answer
    /// ([`StreamDecoder::body`]: a server that ignored the request to
    /// stream), an AWS event stream is [`Framing::EventStream`],
    /// newline-delimited JSON ([`Response::is_ndjson`]) is
    /// [`Framing::Ndjson`], anything else is [`Framing::Sse`].
    #[default]
    Auto,
    /// Server-Sent Events, each read with [`StreamDecoder::event`].
    Sse,
    /// Newline-delimited JSON: each non-blank line read with
    /// [`StreamDecoder::event`] as an [`Event`] whose `data` is the line (see
    /// [`crate::ndjson`]), so the default `event` reads it unchanged.
    Ndjson,
    /// AWS event-stream messages, each read with [`StreamDecoder::message`];
    /// a malformed frame is [`ProviderError::Failed`].
    EventStream,
}

/// Reads a streamed answer with `decoder`, sending new text, tool-call pieces
/// and usage through `sink` after each event: [`read_stream_framed`] with
/// [`Framing::Auto`], the framing told by the response's `Content-Type`.
pub fn read_stream(
    response: Response,
    sink: &mut Sink,
    requested_model: &str,
    decoder: impl StreamDecoder,
) -> Result<Completion, ProviderError> {
    read_stream_framed(response, sink, requested_model, decoder, Framing::Auto)
}

/// Reads a streamed answer of `framing` with `decoder`, sending new text,
/// tool-call pieces and usage through `sink` after each event.
///
/// A framing other than [`Framing::Auto`] reads the body that way whatever
/// its `Content-Type` says (some servers label newline-delimited JSON
/// `application/json` or `text/plain`). The stream must reach
/// [`Answer::complete`] (or [`Answer::end`]) before the body ends; otherwise
/// it was cut off and the result is
/// `ProviderError::Failed("stream ended early")`, since its text may be
/// incomplete. A failed [`Sink::send`] (the caller left) ends the call with
/// its error.
///
/// ```
/// use gateway_plugin_sdk::http::Response;
/// use gateway_plugin_sdk::{
///     Answer, Framing, ProviderError, Sink, StreamDecoder, read_stream_framed,
/// };
///
/// /// `{"text": "..."}` a line, then `{"done": true}`.
/// struct Lines;
///
/// impl StreamDecoder for Lines {
///     fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
///         let line: serde_json::Value =
///             serde_json::from_slice(body).map_err(ProviderError::malformed)?;
///         answer.text(0, line["text"].as_str().unwrap_or_default());
///         if line["done"] == true {
///             answer.end();
///         }
///         Ok(())
///     }
/// }
///
/// let body = b"{\"text\":\"Hel\"}\n{\"text\":\"lo\"}\n{\"done\":true}\n".to_vec();
/// let headers = vec![("content-type".into(), "text/plain".into())];
/// let response = Response::from_chunks(200, headers, vec![body]);
/// let mut sink = Sink::buffered();
/// let completion = read_stream_framed(response, &mut sink, "m-1", Lines, Framing::Ndjson).unwrap();
/// assert_eq!(completion.choices[0].text, "Hello");
/// assert_eq!(sink.sent().len(), 2);
/// ```
pub fn read_stream_framed(
    response: Response,
    sink: &mut Sink,
    requested_model: &str,
    mut decoder: impl StreamDecoder,
    framing: Framing,
) -> Result<Completion, ProviderError> {
    let response = response.error_for_status()?;
    let mut answer = Answer::new(requested_model);
    let framing = match framing {
        Framing::Auto if response.is_json() => None,
        Framing::Auto if response.is_event_stream() => Some(Framing::EventStream),
        Framing::Auto if response.is_ndjson() => Some(Framing::Ndjson),
        Framing::Auto => Some(Framing::Sse),
        forced => Some(forced),
    };
    match framing {
        None => {
            decoder.body(&response.bytes()?, &mut answer)?;
            send_unsent(&mut answer, sink)?;
        }
        Some(Framing::EventStream) => {
            let messages = response.event_stream();
            read_events(messages, &mut answer, sink, |m, a| decoder.message(m, a))?;
        }
        Some(Framing::Ndjson) => read_events(response.ndjson(), &mut answer, sink, |e, a| {
            decoder.event(e, a)
        })?,
        Some(Framing::Sse | Framing::Auto) => {
            read_events(response.sse(), &mut answer, sink, |e, a| {
                decoder.event(e, a)
            })?
        }
    }
    if !answer.is_complete() {
        return Err(ProviderError::Failed("stream ended early".into()));
    }
    decoder.end(&mut answer)?;
    Ok(answer.finish())
}

/// The event loop of [`read_stream`], whatever the framing: `read` each
/// event into `answer`, send what it added, stop at the end marker.
fn read_events<E>(
    events: impl Iterator<Item = Result<E, ProviderError>>,
    answer: &mut Answer,
    sink: &mut Sink,
    mut read: impl FnMut(&E, &mut Answer) -> Result<(), ProviderError>,
) -> Result<(), ProviderError> {
    for event in events {
        read(&event?, answer)?;
        send_unsent(answer, sink)?;
        if answer.progress == Progress::Ended {
            break;
        }
    }
    Ok(())
}

fn send_unsent(answer: &mut Answer, sink: &mut Sink) -> Result<(), ProviderError> {
    match answer.take_unsent() {
        Some(chunk) => sink.send(chunk),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data: text`, `data: usage P C`, `data: stop` (complete), `data: end`.
    struct Script;

    impl StreamDecoder for Script {
        fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
            for line in String::from_utf8_lossy(body).lines() {
                self.event(
                    &Event {
                        data: line.to_owned(),
                        ..Event::default()
                    },
                    answer,
                )?;
            }
            Ok(())
        }

        fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
            let words: Vec<&str> = event.data.split(' ').collect();
            match words.as_slice() {
                ["stop"] => {
                    answer.finish_reason(0, FinishReason::Stop);
                    answer.complete();
                }
                ["end"] => answer.end(),
                ["usage", p, c] => answer.usage(Usage::new(
                    p.parse().map_err(ProviderError::malformed)?,
                    c.parse().map_err(ProviderError::malformed)?,
                )),
                ["model", m] => answer.model(m),
                ["fail"] => return Err(ProviderError::Failed("upstream said fail".into())),
                _ => answer.text(0, &event.data),
            }
            Ok(())
        }
    }

    fn sse(events: &[&str]) -> Response {
        let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        Response::from_chunks(
            200,
            vec![("content-type".into(), "text/event-stream".into())],
            vec![body.into_bytes()],
        )
    }

    #[test]
    fn streams_text_and_usage_after_each_event() {
        let mut sink = Sink::buffered();
        let completion = read_stream(
            sse(&[
                "model m-2",
                "Hel",
                "lo",
                "usage 3 2",
                "stop",
                "end",
                "ignored",
            ]),
            &mut sink,
            "m-1",
            Script,
        )
        .unwrap();
        assert_eq!(completion.model, "m-2");
        assert_eq!(completion.choices[0].text, "Hello");
        assert_eq!(
            completion.choices[0].finish_reason,
            Some(FinishReason::Stop)
        );
        assert_eq!(completion.usage, Some(Usage::new(3, 2)));
        let sent: Vec<(Vec<&str>, Option<u32>)> = sink
            .sent()
            .iter()
            .map(|c| {
                (
                    c.deltas.iter().map(|d| d.text.as_str()).collect(),
                    c.usage.map(|u| u.total_tokens),
                )
            })
            .collect();
        assert_eq!(
            sent,
            [(vec!["Hel"], None), (vec!["lo"], None), (vec![], Some(5))]
        );
    }

    #[test]
    fn a_complete_answer_may_end_with_the_body() {
        let completion = read_stream(
            sse(&["Hi", "stop", "usage 1 1"]),
            &mut Sink::buffered(),
            "m",
            Script,
        )
        .unwrap();
        assert_eq!(completion.usage, Some(Usage::new(1, 1)));
    }

    #[test]
    fn a_stream_cut_short_is_an_error() {
        let mut sink = Sink::buffered();
        let error = read_stream(sse(&["Hi", "usage 1 1"]), &mut sink, "m", Script).unwrap_err();
        assert_eq!(error, ProviderError::Failed("stream ended early".into()));
        // What arrived was still sent, usage included, so it is recorded.
        assert_eq!(sink.sent().len(), 2);
    }

    #[test]
    fn decoder_errors_and_error_statuses_end_the_call() {
        let error = read_stream(sse(&["Hi", "fail"]), &mut Sink::buffered(), "m", Script);
        assert_eq!(
            error,
            Err(ProviderError::Failed("upstream said fail".into()))
        );
        let response = Response::from_chunks(
            429,
            vec![("retry-after".into(), "7".into())],
            vec![br#"{"error":{"message":"slow down"}}"#.to_vec()],
        );
        match read_completion(response, "m", Script) {
            Err(ProviderError::Upstream(e)) => {
                assert_eq!(
                    (e.status, e.message.as_str(), e.retry_after),
                    (429, "slow down", Some(7))
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_json_answer_to_a_stream_request_is_sent_in_one_chunk() {
        let response = Response::from_chunks(
            200,
            vec![("Content-Type".into(), "application/json".into())],
            vec![b"Hel\nlo\nstop".to_vec()],
        );
        let mut sink = Sink::buffered();
        let completion = read_stream(response, &mut sink, "m", Script).unwrap();
        assert_eq!(completion.choices[0].text, "Hello");
        assert_eq!(sink.sent().len(), 1);
        assert_eq!(sink.sent()[0].deltas[0].text, "Hello");
    }

    #[test]
    fn a_whole_answer_needs_no_end_marker() {
        let response = Response::from_chunks(200, Vec::new(), vec![b"Hi".to_vec()]);
        let completion = read_completion(response, "m", Script).unwrap();
        assert_eq!(completion.choices[0].text, "Hi");
        assert_eq!(completion.model, "m");
    }

    #[test]
    fn calls_without_ids_get_one_and_logprobs_merge() {
        let mut answer = Answer::new("m");
        answer.tool_call(1, 0, Some(""), Some("f"), Some("{}"));
        answer.tool_call(1, 1, Some("given"), Some("g"), None);
        answer.logprobs(1, serde_json::json!({"content": [1], "refusal": null}));
        answer.logprobs(1, serde_json::json!({"content": [2], "refusal": "x"}));
        answer.logprobs(1, Value::Null);
        let completion = answer.finish();
        let choice = &completion.choices[0];
        assert_eq!(choice.tool_calls[0].id, "call_1_0");
        assert_eq!(choice.tool_calls[1].id, "given");
        assert_eq!(
            choice.function_call.as_ref().map(|c| c.name.as_str()),
            Some("f")
        );
        assert_eq!(
            choice.logprobs.as_deref(),
            Some(r#"{"content":[1,2],"refusal":"x"}"#)
        );
    }

    #[test]
    fn tool_call_pieces_are_sent_once_each_with_id_and_name_first() {
        let mut answer = Answer::new("m");
        answer.tool_call(0, 0, Some("c1"), Some("f"), None);
        answer.tool_call(0, 0, None, None, Some("{\"a\""));
        let first = answer.take_unsent().unwrap().tool_calls;
        answer.tool_call(0, 0, Some("c1"), Some("f"), Some(":1}"));
        answer.tool_call(0, 1, None, Some("g"), Some(""));
        answer.tool_call(0, 1, Some("c2"), None, Some("{}"));
        let second = answer.take_unsent().unwrap().tool_calls;
        let seen =
            |deltas: &[ToolCallDelta]| -> Vec<(u32, Option<String>, Option<String>, String)> {
                deltas
                    .iter()
                    .map(|d| (d.call, d.id.clone(), d.name.clone(), d.arguments.clone()))
                    .collect()
            };
        assert_eq!(
            seen(&first),
            [(0, Some("c1".into()), Some("f".into()), "{\"a\"".into())]
        );
        assert_eq!(
            seen(&second),
            [
                (0, None, None, ":1}".into()),
                (1, Some("c2".into()), Some("g".into()), "{}".into()),
            ]
        );
        assert!(answer.take_unsent().is_none());
        let completion = answer.finish();
        assert_eq!(completion.choices[0].tool_calls[0].arguments, "{\"a\":1}");
    }

    #[test]
    fn read_stream_sends_tool_call_pieces_through_the_sink() {
        struct Calls;
        impl StreamDecoder for Calls {
            fn body(&mut self, _: &[u8], _: &mut Answer) -> Result<(), ProviderError> {
                Ok(())
            }
            fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
                match event.data.as_str() {
                    "end" => {
                        answer.finish_reason(0, FinishReason::ToolCalls);
                        answer.end();
                    }
                    "start" => answer.tool_call(0, 0, Some("id"), Some("f"), None),
                    piece => answer.tool_call(0, 0, None, None, Some(piece)),
                }
                Ok(())
            }
        }
        let mut sink = Sink::buffered();
        let completion = read_stream(sse(&["start", "{}", "end"]), &mut sink, "m", Calls).unwrap();
        let calls = sink.sent_tool_calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0].name.as_deref(), Some("f"));
        assert_eq!(calls[1].arguments, "{}");
        assert_eq!(completion.choices[0].tool_calls[0].arguments, "{}");
    }

    #[test]
    fn reasoning_streams_before_text_and_is_kept_by_block() {
        struct Thinking;
        impl StreamDecoder for Thinking {
            fn body(&mut self, _: &[u8], _: &mut Answer) -> Result<(), ProviderError> {
                Ok(())
            }
            fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
                match event.data.split_once(' ') {
                    Some(("think", text)) => answer.reasoning(0, 0, text),
                    Some(("sign", signature)) => answer.reasoning_signature(0, 0, signature),
                    Some(("hidden", data)) => answer.redacted_reasoning(0, 2, data),
                    Some(("say", text)) => answer.text(0, text),
                    _ => {
                        answer.finish_reason(0, FinishReason::Stop);
                        answer.end();
                    }
                }
                Ok(())
            }
        }
        let mut sink = Sink::buffered();
        let events = ["think a", "think b", "sign S", "hidden H", "say hi", "end"];
        let completion = read_stream(sse(&events), &mut sink, "m", Thinking).unwrap();
        let sent: Vec<(u32, &str, Option<&str>, Option<&str>)> = (sink.sent_reasoning().iter())
            .map(|d| {
                (
                    d.block,
                    d.text.as_str(),
                    d.signature.as_deref(),
                    d.redacted.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            sent,
            [
                (0, "a", None, None),
                (0, "b", None, None),
                (0, "", Some("S"), None),
                (2, "", None, Some("H")),
            ]
        );
        let choice = &completion.choices[0];
        assert_eq!(choice.text, "hi");
        assert_eq!(choice.reasoning.len(), 2);
        assert_eq!(choice.reasoning[0].text, "ab");
        assert_eq!(choice.reasoning[0].signature.as_deref(), Some("S"));
        assert_eq!(choice.reasoning[1].redacted.as_deref(), Some("H"));
    }

    /// Bedrock-like messages: `:event-type` `delta` carries text, `stop`
    /// completes, `usage` carries `P C`; the rest through the default.
    struct Frames;

    impl StreamDecoder for Frames {
        fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
            Script.body(body, answer)
        }

        fn message(
            &mut self,
            message: &eventstream::Message,
            answer: &mut Answer,
        ) -> Result<(), ProviderError> {
            match message.str_header(":event-type") {
                Some("delta") => answer.text(0, &String::from_utf8_lossy(&message.payload)),
                Some("stop") => {
                    answer.finish_reason(0, FinishReason::Stop);
                    answer.complete();
                }
                _ => return Script.message(message, answer),
            }
            Ok(())
        }
    }

    fn frame(event_type: &str, payload: &str) -> Vec<u8> {
        eventstream::encode(
            &[
                (":event-type", event_type.into()),
                (":content-type", "application/json".into()),
                (":message-type", "event".into()),
            ],
            payload.as_bytes(),
        )
    }

    fn exception(kind: &str, message: &str) -> Vec<u8> {
        eventstream::encode(
            &[
                (":exception-type", kind.into()),
                (":content-type", "application/json".into()),
                (":message-type", "exception".into()),
            ],
            serde_json::json!({ "message": message })
                .to_string()
                .as_bytes(),
        )
    }

    fn event_stream(chunks: Vec<Vec<u8>>) -> Response {
        let content_type = "application/vnd.amazon.eventstream";
        Response::from_chunks(
            200,
            vec![("Content-Type".into(), content_type.into())],
            chunks,
        )
    }

    #[test]
    fn event_streams_are_read_message_by_message() {
        let body = [
            frame("delta", "Hel"),
            frame("delta", "lo"),
            frame("other", "usage 3 2"),
            frame("stop", "{}"),
        ]
        .concat();
        // Chunks that cut frames anywhere.
        let chunks: Vec<Vec<u8>> = body.chunks(7).map(<[u8]>::to_vec).collect();
        let mut sink = Sink::buffered();
        let completion = read_stream(event_stream(chunks), &mut sink, "m", Frames).unwrap();
        assert_eq!(completion.choices[0].text, "Hello");
        assert_eq!(completion.usage, Some(Usage::new(3, 2)));
        let sent: Vec<usize> = sink.sent().iter().map(|c| c.deltas.len()).collect();
        assert_eq!(sent, [1, 1, 0]);

        // Without its end: cut off, what arrived still sent.
        let mut sink = Sink::buffered();
        let error = read_stream(
            event_stream(vec![frame("delta", "Hel")]),
            &mut sink,
            "m",
            Frames,
        );
        assert_eq!(
            error,
            Err(ProviderError::Failed("stream ended early".into()))
        );
        assert_eq!(sink.sent().len(), 1);
    }

    #[test]
    fn a_damaged_frame_ends_the_call() {
        let mut damaged = frame("delta", "lo");
        let last = damaged.len() - 1;
        damaged[last] ^= 0x40;
        let body = [frame("delta", "Hel"), damaged, frame("stop", "{}")].concat();
        let mut sink = Sink::buffered();
        match read_stream(event_stream(vec![body]), &mut sink, "m", Frames) {
            Err(ProviderError::Failed(message)) => assert!(
                message.contains("invalid event stream: message checksum mismatch"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        // The frame before the damage was read and sent.
        assert_eq!(sink.sent().len(), 1);
    }

    #[test]
    fn exceptions_in_an_event_stream_fail_the_call() {
        let body = [
            frame("delta", "Hel"),
            exception("modelStreamErrorException", "the model broke"),
            frame("stop", "{}"),
        ]
        .concat();
        let error = read_stream(event_stream(vec![body]), &mut Sink::buffered(), "m", Frames);
        assert_eq!(
            error,
            Err(ProviderError::Failed(
                "modelStreamErrorException: the model broke".into()
            ))
        );
    }

    #[test]
    fn text_of_one_choice_is_sent_as_one_delta() {
        let mut answer = Answer::new("m");
        answer.text(0, "a");
        answer.text(0, "b");
        answer.text(1, "");
        answer.text(1, "c");
        let chunk = answer.take_unsent().unwrap();
        let deltas: Vec<(u32, &str)> = chunk
            .deltas
            .iter()
            .map(|d| (d.index, d.text.as_str()))
            .collect();
        assert_eq!(deltas, [(0, "ab"), (1, "c")]);
        assert_eq!(answer.take_unsent(), None);
        assert_eq!(answer.finish().choices.len(), 2);
    }

    fn lines(content_type: &str, body: &str) -> Response {
        Response::from_chunks(
            200,
            vec![("Content-Type".into(), content_type.into())],
            body.as_bytes().chunks(3).map(<[u8]>::to_vec).collect(),
        )
    }

    #[test]
    fn newline_delimited_json_is_told_by_its_content_type_or_named() {
        let body = "model m-2\nHel\r\n\nlo\nusage 3 2\nstop";
        for content_type in [
            "application/x-ndjson",
            "Application/JSONL; charset=utf-8",
            "application/x-jsonlines",
        ] {
            let mut sink = Sink::buffered();
            let completion =
                read_stream(lines(content_type, body), &mut sink, "m-1", Script).unwrap();
            assert_eq!(completion.choices[0].text, "Hello", "{content_type}");
            assert_eq!(completion.model, "m-2");
            assert_eq!(completion.usage, Some(Usage::new(3, 2)));
            // `Hel`, `lo`, the usage: each line's news is sent as it is read.
            assert_eq!(sink.sent().len(), 3, "{content_type}");
        }
        // Named, it is read as lines whatever the label says; unnamed, `text/plain` is SSE,
        // which this body has no event of.
        let named = read_stream_framed(
            lines("text/plain", body),
            &mut Sink::buffered(),
            "m-1",
            Script,
            Framing::Ndjson,
        );
        assert_eq!(named.unwrap().choices[0].text, "Hello");
        let unnamed = read_stream(
            lines("text/plain", body),
            &mut Sink::buffered(),
            "m-1",
            Script,
        );
        assert!(matches!(unnamed, Err(ProviderError::Failed(m)) if m == "stream ended early"));
        // A stream of lines cut before its end is an error, not a short answer.
        let cut = read_stream(
            lines("application/x-ndjson", "Hel\nlo\n"),
            &mut Sink::buffered(),
            "m-1",
            Script,
        );
        assert!(cut.is_err());
    }

    #[test]
    fn json_is_the_media_type_itself_not_a_prefix_of_it() {
        assert!(lines("application/json; charset=utf-8", "").is_json());
        assert!(!lines("application/jsonl", "").is_json());
        assert!(!lines("application/json-seq", "").is_json());
        assert!(lines("application/jsonl", "").is_ndjson());
        assert!(!lines("application/json", "").is_ndjson());
    }

    #[test]
    fn a_named_framing_reads_sse_and_event_streams_too() {
        let sse_body = "data: Hel\n\ndata: lo\n\ndata: stop\n\n";
        let named = read_stream_framed(
            lines("application/octet-stream", sse_body),
            &mut Sink::buffered(),
            "m-1",
            Script,
            Framing::Sse,
        );
        assert_eq!(named.unwrap().choices[0].text, "Hello");
        let frames = [b"Hel".as_slice(), b"lo", b"stop"]
            .map(|payload| crate::eventstream::encode(&[], payload))
            .concat();
        let response = Response::from_chunks(200, Vec::new(), vec![frames]);
        let named = read_stream_framed(
            response,
            &mut Sink::buffered(),
            "m-1",
            Script,
            Framing::EventStream,
        );
        assert_eq!(named.unwrap().choices[0].text, "Hello");
    }
}
