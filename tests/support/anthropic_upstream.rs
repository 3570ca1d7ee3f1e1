//! A fake Anthropic Messages API on 127.0.0.1 for the anthropic plugin's tests.
//!
//! Every request, whatever its path, gets the next reply of a script: a recorded interaction,
//! an error in Anthropic's shape, any JSON, or a synthetic event stream (which may be cut off
//! by dropping the connection). Every request is kept for assertions. Like the shared
//! `FakeUpstream`, it runs on its own thread and runtime so it keeps serving while a test blocks.

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

use crate::support::recording::{Interaction, Recording};
use crate::support::upstream::ReceivedRequest;

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

#[derive(Debug, Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<ReceivedRequest>,
    /// Streams the client dropped before their end.
    aborted_streams: usize,
}

/// The running fake upstream; stops when dropped.
pub struct AnthropicUpstream {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl AnthropicUpstream {
    /// Answers requests with `replies`, in order.
    pub fn start(replies: Vec<Reply>) -> AnthropicUpstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake upstream");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("fake upstream address");
        let state = Arc::new(Mutex::new(State {
            replies: replies.into(),
            ..State::default()
        }));
        let (stop, stopped) = oneshot::channel();
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fake-anthropic-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake upstream runtime");
                runtime.block_on(serve(listener, thread_state, stopped));
            })
            .expect("spawn the fake upstream");
        AnthropicUpstream {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Replays a recording's interactions in order.
    pub fn replay(recording: &Recording) -> AnthropicUpstream {
        Self::start(recording.interactions.iter().map(Reply::recorded).collect())
    }

    /// The route's base URL: `http://127.0.0.1:PORT/v1`, like `https://api.anthropic.com/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
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
            "expected one upstream request, got {}",
            requests.len()
        );
        requests.into_iter().next().expect("one request")
    }

    /// Streams the client dropped before their end.
    pub fn aborted_streams(&self) -> usize {
        self.lock().aborted_streams
    }

    /// Waits until `condition` holds; panics after a minute (a liveness bound, not a timing
    /// assertion).
    pub fn wait_until(&self, what: &str, condition: impl Fn(&AnthropicUpstream) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !condition(self) {
            assert!(Instant::now() < deadline, "gave up waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for AnthropicUpstream {
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
                    // Errors here are the client going away or a scripted cut.
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
) -> Result<Response<ReplyBody>, Infallible> {
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
    let reply = {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        state.requests.push(received);
        state.replies.pop_front()
    };
    let reply = reply.unwrap_or_else(|| {
        Reply::error(
            500,
            "api_error",
            "fake upstream: no reply was scripted for this request",
            None,
        )
    });
    Ok(match reply {
        Reply::Full {
            status,
            content_type,
            headers,
            body,
        } => {
            let mut response = Response::builder()
                .status(status)
                .header("content-type", content_type);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response
                .body(ReplyBody::Full(Some(Bytes::from(body))))
                .expect("valid response")
        }
        Reply::Events { events, gap, cut } => stream(events, gap, cut, &state),
    })
}

/// Sends `events` as separate writes `gap` apart; with `cut`, fails the body at the end so
/// hyper drops the connection without finishing the chunked body.
fn stream(
    events: Vec<String>,
    gap: Duration,
    cut: bool,
    state: &Arc<Mutex<State>>,
) -> Response<ReplyBody> {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let state = state.clone();
    tokio::spawn(async move {
        for (i, event) in events.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(gap).await;
            }
            if tx.send(Ok(Bytes::from(event))).await.is_err() {
                state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .aborted_streams += 1;
                return;
            }
        }
        if cut {
            let _ = tx
                .send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "scripted cut",
                )))
                .await;
        }
    });
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream; charset=utf-8")
        .header("cache-control", "no-cache")
        .body(ReplyBody::Stream(rx))
        .expect("valid response")
}

/// A whole body with a known length, or a stream of writes that may fail.
enum ReplyBody {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Result<Bytes, std::io::Error>>),
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            ReplyBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ReplyBody::Stream(rx) => rx.poll_recv(cx).map(|b| b.map(|b| b.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ReplyBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReplyBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            ReplyBody::Full(None) => SizeHint::with_exact(0),
            ReplyBody::Stream(_) => SizeHint::default(),
        }
    }
}
