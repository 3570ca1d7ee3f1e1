//! A fake Anthropic Messages API on 127.0.0.1 for the anthropic plugin's tests.
//!
//! Every request, whatever its path, gets the next reply of a script: a recorded interaction,
//! an error in Anthropic's shape, any JSON, or a synthetic event stream (which may be cut off
//! by dropping the connection). Every request is kept for assertions. Like the shared
//! `FakeUpstream`, it runs on a [`FakeServer`], so it keeps serving while a test blocks.

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

use crate::support::fake_server::{
    self, Ending, FakeServer, Handler, ReceivedRequest, ScriptedBody, Traffic, lock, wait_until,
    whole,
};
use crate::support::recording::{Interaction, Recording};

/// Pause between the events of a stream, so each travels in its own write and the plugin sees
/// the stream arrive piece by piece.
pub const EVENT_GAP: Duration = Duration::from_millis(2);

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A whole body.
    Full {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// An event stream: each string is written on its own, `gap` apart. With `cut`, the
    /// connection is dropped after the last one instead of ending the body properly.
    Events {
        events: Vec<String>,
        gap: Duration,
        cut: bool,
    },
}

impl Reply {
    /// The recorded answer of `interaction`, streamed event by event when it is a stream.
    pub fn recorded(interaction: &Interaction) -> Reply {
        Self::recorded_with_gap(interaction, EVENT_GAP)
    }

    /// Like [`Reply::recorded`], with `gap` between stream events.
    pub fn recorded_with_gap(interaction: &Interaction, gap: Duration) -> Reply {
        if interaction.is_sse() {
            Reply::Events {
                events: interaction.sse_events(),
                gap,
                cut: false,
            }
        } else {
            Reply::Full {
                status: interaction.response.code,
                content_type: interaction.content_type(),
                headers: Vec::new(),
                body: interaction.response.body.clone(),
            }
        }
    }

    /// `body` as JSON with `status`.
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::Full {
            status,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    /// Any text as an `application/json` answer (for bodies that are not JSON at all).
    pub fn raw_json(status: u16, body: &str) -> Reply {
        Reply::Full {
            status,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }

    /// An error in Anthropic's shape, with `retry-after` when given.
    pub fn error(status: u16, kind: &str, message: &str, retry_after: Option<&str>) -> Reply {
        let body = json!({
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_011CfakeUpstream"
        });
        Reply::Full {
            status,
            content_type: "application/json".into(),
            headers: retry_after
                .map(|value| vec![("retry-after".to_owned(), value.to_owned())])
                .unwrap_or_default(),
            body: body.to_string(),
        }
    }

    /// An event stream of `(event name, data)` pairs.
    pub fn events(events: &[(&str, Value)]) -> Reply {
        Reply::Events {
            events: events.iter().map(|(name, data)| sse(name, data)).collect(),
            gap: EVENT_GAP,
            cut: false,
        }
    }

    /// An event stream whose connection drops after `raw_tail` (e.g. half an event).
    pub fn cut_events(events: &[(&str, Value)], raw_tail: &str) -> Reply {
        let mut events: Vec<String> = events.iter().map(|(name, data)| sse(name, data)).collect();
        events.push(raw_tail.to_owned());
        Reply::Events {
            events,
            gap: EVENT_GAP,
            cut: true,
        }
    }
}

/// One SSE event as Anthropic writes it.
pub fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The server side: the script and what happened.
struct Upstream {
    replies: Mutex<VecDeque<Reply>>,
    traffic: Traffic,
}

/// The running fake upstream; stops when dropped. Derefs to its [`Traffic`] (requests and
/// streams) for assertions.
pub struct AnthropicUpstream {
    traffic: Traffic,
    server: FakeServer,
}

impl Deref for AnthropicUpstream {
    type Target = Traffic;

    fn deref(&self) -> &Traffic {
        &self.traffic
    }
}

impl AnthropicUpstream {
    /// Answers requests with `replies`, in order.
    pub fn start(replies: Vec<Reply>) -> AnthropicUpstream {
        let traffic = Traffic::default();
        let upstream = Upstream {
            replies: Mutex::new(replies.into()),
            traffic: traffic.clone(),
        };
        AnthropicUpstream {
            traffic,
            server: FakeServer::start("fake-anthropic", Arc::new(upstream)),
        }
    }

    /// Replays a recording's interactions in order.
    pub fn replay(recording: &Recording) -> AnthropicUpstream {
        Self::start(recording.interactions.iter().map(Reply::recorded).collect())
    }

    /// The route's base URL: `http://127.0.0.1:PORT/v1`, like `https://api.anthropic.com/v1`.
    pub fn base_url(&self) -> String {
        self.server.base_url("/v1")
    }

    /// Waits until `condition` holds; panics after a minute (a liveness bound, not a timing
    /// assertion).
    pub fn wait_until(&self, what: &str, condition: impl Fn(&AnthropicUpstream) -> bool) {
        wait_until(what, || condition(self));
    }
}

impl Handler for Upstream {
    type Body = ScriptedBody;

    /// Every request, whatever its path, gets the next scripted reply.
    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<ScriptedBody> {
        let received = ReceivedRequest::read(request).await;
        let reply = {
            // Held while recording, so the n-th request recorded gets the n-th reply.
            let mut replies = lock(&self.replies);
            self.traffic.record(received);
            replies.pop_front()
        };
        let reply = reply.unwrap_or_else(|| {
            Reply::error(
                500,
                "api_error",
                "fake upstream: no reply was scripted for this request",
                None,
            )
        });
        match reply {
            Reply::Full {
                status,
                content_type,
                headers,
                body,
            } => whole(status, &content_type, &headers, body),
            Reply::Events { events, gap, cut } => {
                let traffic = self.traffic.clone();
                fake_server::pieces(
                    200,
                    "text/event-stream; charset=utf-8",
                    &[("cache-control".to_owned(), "no-cache".to_owned())],
                    events,
                    gap,
                    if cut { Ending::Cut } else { Ending::Finish },
                    move |outcome| traffic.count_stream(outcome),
                )
            }
        }
    }
}
