//! A fake Gemini API on 127.0.0.1, for the gemini plugin's tests.
//!
//! `generateContent` and `streamGenerateContent` calls are answered from a script, in order:
//! recorded interactions (streams sent event by event, with the recorded status and content
//! type) or literal answers (for errors, malformed bodies and streams cut short).
//! `batchEmbedContents` is computed from the request. Every request is kept for assertions.
//!
//! It is separate from [`crate::support::upstream::FakeUpstream`], which serves OpenAI's paths, and runs
//! the same way: its own thread and tokio runtime, so it keeps serving while a test blocks.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::support::recording::{Interaction, Recording};
use crate::support::upstream::{ReceivedRequest, fake_embedding};

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

#[derive(Debug, Default)]
struct State {
    requests: Vec<ReceivedRequest>,
    /// Answers of generation calls, in order.
    script: VecDeque<Answer>,
    /// When set, the answer to every request (embeddings included).
    always: Option<Answer>,
}

/// The running fake Gemini API; stops when dropped.
pub struct GeminiUpstream {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl GeminiUpstream {
    /// Answers embeddings only.
    pub fn embeddings() -> GeminiUpstream {
        Self::start(State::default())
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
        Self::start(State {
            script: answers.into(),
            ..State::default()
        })
    }

    /// Answers every request with `answer`.
    pub fn always(answer: Answer) -> GeminiUpstream {
        Self::start(State {
            always: Some(answer),
            ..State::default()
        })
    }

    fn start(state: State) -> GeminiUpstream {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake Gemini API");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("fake Gemini API address");
        let state = Arc::new(Mutex::new(state));
        let (stop, stopped) = oneshot::channel();
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fake-gemini-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake Gemini API runtime");
                runtime.block_on(serve(listener, thread_state, stopped));
            })
            .expect("spawn the fake Gemini API");
        GeminiUpstream {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// A base URL for a route: `http://127.0.0.1:PORT<prefix>`, e.g. prefix `/v1beta`.
    pub fn base_url(&self, prefix: &str) -> String {
        format!("http://{}{prefix}", self.addr)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
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
}

impl Drop for GeminiUpstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

async fn serve(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
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
                connections.spawn(async move {
                    let service = service_fn(move |request| handle(request, state.clone()));
                    // Errors here are the client going away, or an answer aborted on purpose.
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
) -> Result<Response<FakeBody>, Infallible> {
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
    let path = parts.uri.path().to_owned();
    let answer = {
        let mut state = lock(&state);
        state.requests.push(received.clone());
        if let Some(answer) = &state.always {
            Some(answer.clone())
        } else if path.ends_with(":batchEmbedContents") {
            None
        } else if path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent") {
            Some(state.script.pop_front().unwrap_or_else(|| {
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
    Ok(match answer {
        None => embeddings(&received),
        Some(Answer::Recorded(interaction)) => recorded(&interaction),
        Some(Answer::Raw {
            status,
            content_type,
            headers,
            pieces,
            abort,
        }) => {
            let mut response = pieced(status, &content_type, pieces, abort);
            for (name, value) in headers {
                response.headers_mut().insert(
                    hyper::header::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                    value.parse().expect("header value"),
                );
            }
            response
        }
    })
}

/// A recorded response: streams event by event (Google ends events with CRLF CRLF).
fn recorded(interaction: &Interaction) -> Response<FakeBody> {
    let body = &interaction.response.body;
    let pieces = if interaction.is_sse() {
        split_events(body)
    } else {
        vec![body.clone()]
    };
    pieced(
        interaction.response.code,
        &interaction.content_type(),
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

fn pieced(status: u16, content_type: &str, pieces: Vec<String>, abort: bool) -> Response<FakeBody> {
    let body = if pieces.len() == 1 && !abort {
        FakeBody::Full(pieces.into_iter().next().map(Bytes::from))
    } else {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        tokio::spawn(async move {
            for (i, piece) in pieces.into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(PIECE_GAP).await;
                }
                if tx.send(Ok(Bytes::from(piece))).await.is_err() {
                    return;
                }
            }
            if abort {
                tokio::time::sleep(PIECE_GAP).await;
                // An error frame makes hyper drop the connection mid-body.
                let _ = tx
                    .send(Err(std::io::Error::other("connection cut on purpose")))
                    .await;
            }
        });
        FakeBody::Stream(rx)
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(body)
        .expect("valid response")
}

/// Answers `batchEmbedContents` with [`fake_embedding`] of each request's text, in order.
fn embeddings(request: &ReceivedRequest) -> Response<FakeBody> {
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
        vec![json!({"embeddings": vectors}).to_string()],
        false,
    )
}

/// A whole body, or pieces that may end in an error (which aborts the connection).
enum FakeBody {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Result<Bytes, std::io::Error>>),
}

impl Body for FakeBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            FakeBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            FakeBody::Stream(rx) => rx
                .poll_recv(cx)
                .map(|item| item.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, FakeBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            FakeBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            FakeBody::Full(None) => SizeHint::with_exact(0),
            FakeBody::Stream(_) => SizeHint::default(),
        }
    }
}
