//! A fake OpenAI-compatible upstream on 127.0.0.1.
//!
//! It runs on its own thread and tokio runtime, so it keeps serving while a
//! test blocks (on the gateway's response, on a CLI command, or on the
//! gateway's exit during a graceful shutdown).
//!
//! Chat completions are answered from a script: a recording replayed in
//! order, an error, a slow synthetic stream, or no answer at all.
//! `/embeddings` and the legacy `/completions` are synthesized from the
//! request. Every request is kept for assertions.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

pub use super::fake_server::ReceivedRequest;
use super::fake_server::{
    self, Ending, FakeServer, Handler, ScriptedBody, Traffic, lock, wait_until, whole,
};
use super::recording::{Interaction, Recording};

/// Pause between SSE events of a replayed stream, so each event travels in
/// its own write and the plugin sees the stream arrive piece by piece.
const REPLAY_EVENT_GAP: Duration = Duration::from_millis(2);

/// How chat completions (and, for errors, every request) are answered.
#[derive(Debug, Clone)]
enum Script {
    /// Chat completions get a 500: the test did not expect one.
    Unscripted,
    /// The recording's interactions, one per chat completion, in order.
    Replay(VecDeque<Interaction>),
    /// Every request gets this error.
    Error {
        status: u16,
        body: String,
        retry_after: Option<String>,
    },
    /// Chat completions stream `frames` words, one every `gap`.
    Slow { frames: usize, gap: Duration },
    /// Requests are read but never answered.
    Hang,
}

/// The server side: the script and what happened.
struct Upstream {
    traffic: Traffic,
    script: Mutex<Script>,
}

/// The running fake upstream; stops when dropped. Derefs to its [`Traffic`] (requests and
/// streams) for assertions.
pub struct FakeUpstream {
    traffic: Traffic,
    server: FakeServer,
}

impl Deref for FakeUpstream {
    type Target = Traffic;

    fn deref(&self) -> &Traffic {
        &self.traffic
    }
}

impl FakeUpstream {
    /// Answers embeddings and legacy completions only.
    pub fn start() -> FakeUpstream {
        Self::with_script(Script::Unscripted)
    }

    /// Replays `tests/recordings/<name>.yaml`.
    pub fn replay(name: &str) -> FakeUpstream {
        Self::replay_recording(&Recording::load(name))
    }

    /// Replays a loaded recording.
    pub fn replay_recording(recording: &Recording) -> FakeUpstream {
        Self::with_script(Script::Replay(
            recording.interactions.iter().cloned().collect(),
        ))
    }

    /// Answers every request with `status` and `body`, plus `Retry-After`
    /// when given.
    pub fn error(status: u16, body: &str, retry_after: Option<&str>) -> FakeUpstream {
        Self::with_script(Script::Error {
            status,
            body: body.to_owned(),
            retry_after: retry_after.map(str::to_owned),
        })
    }

    /// Answers every request with an error in OpenAI's shape.
    pub fn openai_error(
        status: u16,
        message: &str,
        code: &str,
        retry_after: Option<&str>,
    ) -> FakeUpstream {
        let kind = match status {
            401 => "invalid_request_error",
            404 => "invalid_request_error",
            429 => "rate_limit_exceeded",
            _ => "server_error",
        };
        let body = json!({
            "error": {"message": message, "type": kind, "param": null, "code": code}
        });
        Self::error(status, &body.to_string(), retry_after)
    }

    /// Streams chat completions slowly: `frames` words, one every `gap`.
    pub fn slow_stream(frames: usize, gap: Duration) -> FakeUpstream {
        Self::with_script(Script::Slow { frames, gap })
    }

    /// Never answers (for timeouts).
    pub fn hang() -> FakeUpstream {
        Self::with_script(Script::Hang)
    }

    fn with_script(script: Script) -> FakeUpstream {
        let traffic = Traffic::default();
        let upstream = Upstream {
            traffic: traffic.clone(),
            script: Mutex::new(script),
        };
        FakeUpstream {
            traffic,
            server: FakeServer::start("fake-upstream", Arc::new(upstream)),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// A base URL for a route: `http://127.0.0.1:PORT<prefix>`, e.g. prefix `/v1`.
    pub fn base_url(&self, prefix: &str) -> String {
        self.server.base_url(prefix)
    }

    /// Waits until `condition` holds; panics after a minute (a liveness
    /// bound, not a timing assertion).
    pub fn wait_until(&self, what: &str, condition: impl Fn(&FakeUpstream) -> bool) {
        wait_until(what, || condition(self));
    }
}

impl Handler for Upstream {
    type Body = ScriptedBody;

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<ScriptedBody> {
        let received = ReceivedRequest::read(request).await;
        self.traffic.record(received.clone());

        let path = received.path_only().to_owned();
        // The script decides first: errors and hangs apply to every endpoint.
        let action = {
            let mut script = lock(&self.script);
            if let Script::Error {
                status,
                body,
                retry_after,
            } = &*script
            {
                Action::Error(*status, body.clone(), retry_after.clone())
            } else if matches!(*script, Script::Hang) {
                Action::Hang
            } else if path.ends_with("/embeddings") {
                Action::Embeddings
            } else if path.ends_with("/chat/completions") {
                match &mut *script {
                    Script::Replay(queue) => match queue.pop_front() {
                        Some(interaction) => Action::Replay(Box::new(interaction)),
                        None => {
                            Action::Unexpected("every recorded interaction was already replayed")
                        }
                    },
                    Script::Slow { frames, gap } => Action::Slow(*frames, *gap),
                    _ => Action::Unexpected("no chat completion answer was scripted"),
                }
            } else if path.ends_with("/completions") {
                Action::Legacy
            } else {
                Action::Unexpected("unknown path")
            }
        };
        match action {
            Action::Error(status, body, retry_after) => {
                let headers: Vec<(String, String)> = retry_after
                    .map(|value| vec![("retry-after".to_owned(), value)])
                    .unwrap_or_default();
                whole(status, "application/json", &headers, body)
            }
            Action::Hang => {
                // Held until the gateway gives up and closes the connection.
                std::future::pending::<()>().await;
                unreachable!("a pending future never completes")
            }
            Action::Embeddings => embeddings(&received),
            Action::Legacy => legacy_completion(&received, &self.traffic),
            Action::Replay(interaction) => replay(&interaction, &self.traffic),
            Action::Slow(frames, gap) => slow_stream(frames, gap, &self.traffic),
            Action::Unexpected(why) => full(
                500,
                "application/json",
                json!({"error": {"message": format!("fake upstream: {why}: {path}"), "type": "server_error"}})
                    .to_string(),
            ),
        }
    }
}

enum Action {
    Error(u16, String, Option<String>),
    Hang,
    Embeddings,
    Legacy,
    Replay(Box<Interaction>),
    Slow(usize, Duration),
    Unexpected(&'static str),
}

fn full(status: u16, content_type: &str, body: String) -> Response<ScriptedBody> {
    whole(status, content_type, &[], body)
}

/// Sends `events` as separate body writes, pausing `gap` between them;
/// counts the stream as finished or aborted.
fn stream(
    status: u16,
    content_type: &str,
    events: Vec<String>,
    gap: Duration,
    traffic: &Traffic,
) -> Response<ScriptedBody> {
    let traffic = traffic.clone();
    fake_server::pieces(
        status,
        content_type,
        &[("cache-control".to_owned(), "no-cache".to_owned())],
        events,
        gap,
        Ending::Finish,
        move |outcome| traffic.count_stream(outcome),
    )
}

fn replay(interaction: &Interaction, traffic: &Traffic) -> Response<ScriptedBody> {
    let content_type = interaction.content_type();
    if interaction.is_sse() {
        stream(
            interaction.response.code,
            &content_type,
            interaction.sse_events(),
            REPLAY_EVENT_GAP,
            traffic,
        )
    } else {
        full(
            interaction.response.code,
            &content_type,
            interaction.response.body.clone(),
        )
    }
}

fn sse_event(payload: &Value) -> String {
    format!("data: {payload}\n\n")
}

/// The word the slow stream sends as its `i`th piece of text.
pub fn slow_word(i: usize) -> String {
    format!("w{i} ")
}

fn slow_stream(frames: usize, gap: Duration, traffic: &Traffic) -> Response<ScriptedBody> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": 0, "model": "slow-model",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "usage": null
        })
    };
    let mut events = vec![sse_event(&chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ))];
    for i in 0..frames {
        events.push(sse_event(&chunk(
            json!({"content": slow_word(i)}),
            Value::Null,
        )));
    }
    events.push(sse_event(&chunk(json!({}), json!("stop"))));
    events.push(sse_event(&json!({
        "id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": 0, "model": "slow-model",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": frames, "total_tokens": 5 + frames}
    })));
    events.push("data: [DONE]\n\n".to_owned());
    stream(
        200,
        "text/event-stream; charset=utf-8",
        events,
        gap,
        traffic,
    )
}

/// The inputs of an embeddings or legacy request (`input` or `prompt`), as a list.
fn inputs(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => Vec::new(),
    }
}

/// The vector the fake upstream computes for input number `index`: exactly
/// representable in f32, so tests compare it exactly.
pub fn fake_embedding(index: usize, input: &str) -> Vec<f64> {
    vec![index as f64 + 0.5, input.len() as f64, -0.25]
}

fn embeddings(request: &ReceivedRequest) -> Response<ScriptedBody> {
    let body = request.json();
    let inputs = inputs(&body["input"]);
    let words: usize = inputs.iter().map(|s| s.split_whitespace().count()).sum();
    // Reverse order: the plugin must sort by `index`.
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, input)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(i, input)}))
        .collect();
    let answer = json!({
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": words, "total_tokens": words}
    });
    full(200, "application/json", answer.to_string())
}

/// The text the fake upstream's legacy completion answers for `prompt`.
pub fn legacy_text(prompt: &str) -> String {
    format!("legacy: {prompt}")
}

fn legacy_completion(request: &ReceivedRequest, traffic: &Traffic) -> Response<ScriptedBody> {
    let body = request.json();
    let prompt = inputs(&body["prompt"]).join("\n");
    let text = legacy_text(&prompt);
    let prompt_tokens = prompt.split_whitespace().count();
    let completion_tokens = text.split_whitespace().count();
    let usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens
    });
    if body["stream"].as_bool() == Some(true) {
        let chunk = |text: &str, finish: Value, usage: Value| {
            json!({
                "id": "cmpl-fake", "object": "text_completion", "created": 0, "model": body["model"],
                "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish}],
                "usage": usage
            })
        };
        let mut events: Vec<String> = text
            .split_inclusive(' ')
            .map(|word| sse_event(&chunk(word, Value::Null, Value::Null)))
            .collect();
        events.push(sse_event(&chunk("", json!("stop"), Value::Null)));
        events.push(sse_event(&json!({
            "id": "cmpl-fake", "object": "text_completion", "created": 0, "model": body["model"],
            "choices": [], "usage": usage
        })));
        events.push("data: [DONE]\n\n".to_owned());
        return stream(200, "text/event-stream", events, REPLAY_EVENT_GAP, traffic);
    }
    let answer = json!({
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": "stop"}],
        "usage": usage
    });
    full(200, "application/json", answer.to_string())
}
