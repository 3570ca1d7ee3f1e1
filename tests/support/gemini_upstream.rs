//! A fake Gemini API on 127.0.0.1, for the gemini plugin's tests.
//!
//! `generateContent` and `streamGenerateContent` calls are answered from a script, in order:
//! recorded interactions (streams sent event by event, with the recorded status and content
//! type) or literal answers (for errors, malformed bodies and streams cut short).
//! `batchEmbedContents` is computed from the request. Every request is kept for assertions.
//!
//! It is separate from [`crate::support::upstream::FakeUpstream`], which serves OpenAI's paths, and
//! runs on the same [`FakeServer`], so it keeps serving while a test blocks.

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

use crate::support::fake_server::{
    self, Ending, FakeServer, Handler, ReceivedRequest, ScriptedBody, Traffic, lock, whole,
};
use crate::support::recording::{Interaction, Recording};
use crate::support::upstream::fake_embedding;

/// Pause between the pieces of a streamed answer, so each travels in its own write and the
/// plugin sees the stream arrive piece by piece.
const PIECE_GAP: Duration = Duration::from_millis(2);

/// The recording of a Gemini test case: `Google__gemini-2.5-flash__{case}`.
pub fn recording(case: &str) -> Recording {
    Recording::load(&format!("Google__gemini-2.5-flash__{case}"))
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A recorded interaction's response.
    Recorded(Box<Interaction>),
    /// A literal response: its body is sent in `pieces` (separate writes); with `abort` the
    /// connection is dropped after the last piece instead of ending the body properly.
    Raw {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        pieces: Vec<String>,
        abort: bool,
    },
}

impl Answer {
    /// A whole JSON body.
    pub fn json(status: u16, body: &str) -> Answer {
        Answer::Raw {
            status,
            content_type: "application/json; charset=UTF-8".into(),
            headers: Vec::new(),
            pieces: vec![body.to_owned()],
            abort: false,
        }
    }

    /// An error in Google's shape: `{"error": {"code", "message", "status"}}`.
    pub fn google_error(status: u16, message: &str, status_name: &str) -> Answer {
        let body = json!({"error": {"code": status, "message": message, "status": status_name}});
        Answer::json(status, &body.to_string())
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Answer {
        if let Answer::Raw { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// A `text/event-stream` body sent in `pieces`.
    pub fn event_stream(pieces: &[&str], abort: bool) -> Answer {
        Answer::Raw {
            status: 200,
            content_type: "text/event-stream".into(),
            headers: Vec::new(),
            pieces: pieces.iter().map(|p| (*p).to_owned()).collect(),
            abort,
        }
    }
}

/// How generation calls are answered.
#[derive(Debug, Default)]
struct Script {
    /// Answers of generation calls, in order.
    answers: VecDeque<Answer>,
    /// When set, the answer to every request (embeddings included).
    always: Option<Answer>,
}

/// The server side: the script and what happened.
struct Upstream {
    script: Mutex<Script>,
    traffic: Traffic,
}

/// The running fake Gemini API; stops when dropped. Derefs to its [`Traffic`] (requests) for
/// assertions.
pub struct GeminiUpstream {
    traffic: Traffic,
    server: FakeServer,
}

impl Deref for GeminiUpstream {
    type Target = Traffic;

    fn deref(&self) -> &Traffic {
        &self.traffic
    }
}

impl GeminiUpstream {
    /// Answers embeddings only.
    pub fn embeddings() -> GeminiUpstream {
        Self::start(Script::default())
    }

    /// Replays a Gemini recording (see [`recording`]).
    pub fn replay(case: &str) -> GeminiUpstream {
        Self::replay_recording(&recording(case))
    }

    /// Replays a loaded recording's interactions, one per generation call.
    pub fn replay_recording(recording: &Recording) -> GeminiUpstream {
        Self::script(
            recording
                .interactions
                .iter()
                .map(|i| Answer::Recorded(Box::new(i.clone())))
                .collect(),
        )
    }

    /// Answers generation calls with `answers`, in order.
    pub fn script(answers: Vec<Answer>) -> GeminiUpstream {
        Self::start(Script {
            answers: answers.into(),
            always: None,
        })
    }

    /// Answers every request with `answer`.
    pub fn always(answer: Answer) -> GeminiUpstream {
        Self::start(Script {
            answers: VecDeque::new(),
            always: Some(answer),
        })
    }

    fn start(script: Script) -> GeminiUpstream {
        let traffic = Traffic::default();
        let upstream = Upstream {
            script: Mutex::new(script),
            traffic: traffic.clone(),
        };
        GeminiUpstream {
            traffic,
            server: FakeServer::start("fake-gemini", Arc::new(upstream)),
        }
    }

    /// A base URL for a route: `http://127.0.0.1:PORT<prefix>`, e.g. prefix `/v1beta`.
    pub fn base_url(&self, prefix: &str) -> String {
        self.server.base_url(prefix)
    }
}

impl Handler for Upstream {
    type Body = ScriptedBody;

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<ScriptedBody> {
        let received = ReceivedRequest::read(request).await;
        let path = received.path_only().to_owned();
        let answer = {
            // Held while recording, so the n-th request recorded gets the n-th answer.
            let mut script = lock(&self.script);
            self.traffic.record(received.clone());
            if let Some(answer) = &script.always {
                Some(answer.clone())
            } else if path.ends_with(":batchEmbedContents") {
                None
            } else if path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent")
            {
                Some(script.answers.pop_front().unwrap_or_else(|| {
                    Answer::google_error(500, "fake Gemini API: no answer was scripted", "INTERNAL")
                }))
            } else {
                Some(Answer::google_error(
                    404,
                    &format!("fake Gemini API: unknown path {path}"),
                    "NOT_FOUND",
                ))
            }
        };
        match answer {
            None => embeddings(&received),
            Some(Answer::Recorded(interaction)) => recorded(&interaction),
            Some(Answer::Raw {
                status,
                content_type,
                headers,
                pieces,
                abort,
            }) => pieced(status, &content_type, &headers, pieces, abort),
        }
    }
}

/// A recorded response: streams event by event (Google ends events with CRLF CRLF).
fn recorded(interaction: &Interaction) -> Response<ScriptedBody> {
    let body = &interaction.response.body;
    let pieces = if interaction.is_sse() {
        split_events(body)
    } else {
        vec![body.clone()]
    };
    pieced(
        interaction.response.code,
        &interaction.content_type(),
        &[],
        pieces,
        false,
    )
}

/// `body`'s SSE events, each with its terminating blank line.
pub fn split_events(body: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut rest = body;
    loop {
        let end = [("\r\n\r\n", 4), ("\n\n", 2)]
            .iter()
            .filter_map(|(separator, len)| rest.find(separator).map(|at| at + len))
            .min();
        match end {
            Some(end) => {
                events.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
            None => break,
        }
    }
    if !rest.trim().is_empty() {
        events.push(rest.to_owned());
    }
    events
}

/// `pieces` as one whole body when there is one and no abort, else as separate writes.
fn pieced(
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
    pieces: Vec<String>,
    abort: bool,
) -> Response<ScriptedBody> {
    if pieces.len() == 1 && !abort {
        let body = pieces.into_iter().next().unwrap_or_default();
        return whole(status, content_type, headers, body);
    }
    let ending = if abort { Ending::Cut } else { Ending::Finish };
    fake_server::pieces(
        status,
        content_type,
        headers,
        pieces,
        PIECE_GAP,
        ending,
        |_| {},
    )
}

/// Answers `batchEmbedContents` with [`fake_embedding`] of each request's text, in order.
fn embeddings(request: &ReceivedRequest) -> Response<ScriptedBody> {
    let body = request.json();
    let vectors: Vec<Value> = body["requests"]
        .as_array()
        .map(|requests| {
            requests
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let text = r["content"]["parts"][0]["text"]
                        .as_str()
                        .unwrap_or_default();
                    json!({"values": fake_embedding(i, text)})
                })
                .collect()
        })
        .unwrap_or_default();
    pieced(
        200,
        "application/json; charset=UTF-8",
        &[],
        vec![json!({"embeddings": vectors}).to_string()],
        false,
    )
}
