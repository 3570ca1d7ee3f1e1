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
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::recording::{Interaction, Recording};

/// Pause between SSE events of a replayed stream, so each event travels in
/// its own write and the plugin sees the stream arrive piece by piece.
const REPLAY_EVENT_GAP: Duration = Duration::from_millis(2);

/// A request the upstream received.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Lowercased names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl ReceivedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "upstream request body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

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

#[derive(Debug, Default)]
struct State {
    requests: Vec<ReceivedRequest>,
    /// Streams the client dropped before their end.
    aborted_streams: usize,
    /// Streams sent to their end.
    finished_streams: usize,
}

/// The running fake upstream; stops when dropped.
pub struct FakeUpstream {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeUpstream {
    /// Answers embeddings and legacy completions only.
    pub fn start() -> FakeUpstream {
        Self::with_script(Script::Unscripted)
    }

    /// Replays `shared/recordings/<name>.yaml`.
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
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake upstream");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("fake upstream address");
        let state = Arc::new(Mutex::new(State::default()));
        let script = Arc::new(Mutex::new(script));
        let (stop, stopped) = oneshot::channel();
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fake-upstream-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake upstream runtime");
                runtime.block_on(serve(listener, thread_state, script, stopped));
            })
            .expect("spawn the fake upstream");
        FakeUpstream {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A base URL for a route: `http://127.0.0.1:PORT<prefix>`, e.g. prefix `/v1`.
    pub fn base_url(&self, prefix: &str) -> String {
        format!("http://{}{prefix}", self.addr)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        self.lock().requests.clone()
    }

    /// The only request received; panics unless there was exactly one.
    pub fn single_request(&self) -> ReceivedRequest {
        let requests = self.requests();
        assert_eq!(
            requests.len(),
            1,
            "expected one upstream request, got {}: {:?}",
            requests.len(),
            requests.iter().map(|r| &r.path).collect::<Vec<_>>()
        );
        requests.into_iter().next().expect("one request")
    }

    /// Streams the client dropped before their end.
    pub fn aborted_streams(&self) -> usize {
        self.lock().aborted_streams
    }

    /// Streams sent to their end.
    pub fn finished_streams(&self) -> usize {
        self.lock().finished_streams
    }

    /// Waits until `condition` holds; panics after a minute (a liveness
    /// bound, not a timing assertion).
    pub fn wait_until(&self, what: &str, condition: impl Fn(&FakeUpstream) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !condition(self) {
            assert!(
                Instant::now() < deadline,
                "fake upstream: gave up waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
    script: Arc<Mutex<Script>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                let script = script.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        handle(request, state.clone(), script.clone())
                    });
                    // Errors here are the client going away, which tests provoke on purpose.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
    connections.shutdown().await;
}

async fn handle(
    request: Request<Incoming>,
    state: Arc<Mutex<State>>,
    script: Arc<Mutex<Script>>,
) -> Result<Response<UpstreamBody>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    let received = ReceivedRequest {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .requests
        .push(received.clone());

    let path = parts.uri.path().to_owned();
    // The script decides first: errors and hangs apply to every endpoint.
    let action = {
        let mut script = script.lock().unwrap_or_else(|e| e.into_inner());
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
                    None => Action::Unexpected("every recorded interaction was already replayed"),
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
    let response = match action {
        Action::Error(status, body, retry_after) => {
            let mut response = full(status, "application/json", body);
            if let Some(value) = retry_after {
                response.headers_mut().insert(
                    "retry-after",
                    value.parse().expect("valid retry-after header"),
                );
            }
            response
        }
        Action::Hang => {
            // Held until the gateway gives up and closes the connection.
            std::future::pending::<()>().await;
            unreachable!("a pending future never completes")
        }
        Action::Embeddings => embeddings(&received),
        Action::Legacy => legacy_completion(&received, &state),
        Action::Replay(interaction) => replay(&interaction, &state),
        Action::Slow(frames, gap) => slow_stream(frames, gap, &state),
        Action::Unexpected(why) => full(
            500,
            "application/json",
            json!({"error": {"message": format!("fake upstream: {why}: {path}"), "type": "server_error"}})
                .to_string(),
        ),
    };
    Ok(response)
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

fn full(status: u16, content_type: &str, body: String) -> Response<UpstreamBody> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(UpstreamBody::Full(Some(Bytes::from(body))))
        .expect("valid response")
}

/// Sends `events` as separate body writes, pausing `gap` between them;
/// counts the stream as finished or aborted.
fn stream(
    status: u16,
    content_type: &str,
    events: Vec<String>,
    gap: Duration,
    state: &Arc<Mutex<State>>,
) -> Response<UpstreamBody> {
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let state = state.clone();
    tokio::spawn(async move {
        for (i, event) in events.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(gap).await;
            }
            if tx.send(Bytes::from(event)).await.is_err() {
                state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .aborted_streams += 1;
                return;
            }
        }
        // Dropping the sender ends the body.
        drop(tx);
        state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .finished_streams += 1;
    });
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-cache")
        .body(UpstreamBody::Stream(rx))
        .expect("valid response")
}

fn replay(interaction: &Interaction, state: &Arc<Mutex<State>>) -> Response<UpstreamBody> {
    let content_type = interaction.content_type();
    if interaction.is_sse() {
        stream(
            interaction.response.code,
            &content_type,
            interaction.sse_events(),
            REPLAY_EVENT_GAP,
            state,
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

fn slow_stream(frames: usize, gap: Duration, state: &Arc<Mutex<State>>) -> Response<UpstreamBody> {
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
    stream(200, "text/event-stream; charset=utf-8", events, gap, state)
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

fn embeddings(request: &ReceivedRequest) -> Response<UpstreamBody> {
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

fn legacy_completion(
    request: &ReceivedRequest,
    state: &Arc<Mutex<State>>,
) -> Response<UpstreamBody> {
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
        return stream(200, "text/event-stream", events, REPLAY_EVENT_GAP, state);
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

/// A whole body with a known length, or a stream of writes.
enum UpstreamBody {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            UpstreamBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            UpstreamBody::Stream(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, UpstreamBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            UpstreamBody::Full(None) => SizeHint::with_exact(0),
            UpstreamBody::Stream(_) => SizeHint::default(),
        }
    }
}
