//! The HTTP/1.1 plumbing of the fake upstreams: a server on 127.0.0.1 with its own thread and
//! tokio runtime (so it keeps serving while a test blocks on the gateway, on a CLI command or on
//! the gateway's exit), the record of a received request, and response bodies: whole, or
//! written piece by piece with pauses and optionally cut off by dropping the connection.
//!
//! [`super::FakeUpstream`] and [`super::hostile::HostileUpstream`] add only which answer a
//! request gets.

use std::convert::Infallible;
use std::future::Future;
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
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// Locks `mutex`, ignoring poisoning: a test that panicked while holding it has already failed,
/// and the state stays readable for the others.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a fake upstream does with connections and requests.
pub trait Handler: Send + Sync + 'static {
    /// The response body type.
    type Body: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static;

    /// Called once per accepted connection.
    fn connected(&self) {}

    /// Answers one request.
    fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// A running fake HTTP/1.1 server; stops (closing every connection) when dropped.
pub struct FakeServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeServer {
    /// Binds a free port on 127.0.0.1 and serves `handler` on a thread named `{name}-{port}`.
    pub fn start<H: Handler>(name: &str, handler: Arc<H>) -> FakeServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("bind the {name}: {e}"));
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("fake server address");
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake server runtime");
                runtime.block_on(serve(listener, handler, stopped));
            })
            .unwrap_or_else(|e| panic!("spawn the {name}: {e}"));
        FakeServer {
            addr,
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
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve<H: Handler>(
    listener: std::net::TcpListener,
    handler: Arc<H>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                handler.connected();
                let handler = handler.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        let handler = handler.clone();
                        async move { Ok::<_, Infallible>(handler.handle(request).await) }
                    });
                    // Errors here are the client going away or a scripted cut, both of
                    // which tests provoke on purpose.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
    connections.shutdown().await;
}

/// A request a fake upstream received.
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
    /// Reads `request` whole (a body that fails to arrive counts as empty).
    pub async fn read(request: Request<Incoming>) -> ReceivedRequest {
        let (parts, body) = request.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes().to_vec(),
            Err(_) => Vec::new(),
        };
        ReceivedRequest {
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
        }
    }

    /// The path without its query.
    pub fn path_only(&self) -> &str {
        self.path
            .split_once('?')
            .map_or(&self.path, |(path, _)| path)
    }

    /// Asserts this is a `POST` of a JSON body to `path` (path and query).
    pub fn assert_json_post(&self, path: &str) {
        assert_eq!(self.method, "POST");
        assert_eq!(self.path, path);
        assert!(
            self.header("content-type")
                .is_some_and(|v| v.starts_with("application/json")),
            "{:?}",
            self.header("content-type")
        );
    }

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

/// What a fake upstream saw: every request, in order, and how its streams ended. Shared
/// between the server side (which records) and the test's handle (which asserts); the fake
/// upstreams deref to it, so a test asks `upstream.requests()`.
#[derive(Debug, Clone, Default)]
pub struct Traffic(Arc<Mutex<Seen>>);

#[derive(Debug, Default)]
struct Seen {
    requests: Vec<ReceivedRequest>,
    /// Streams the client dropped before their end.
    aborted_streams: usize,
    /// Streams sent to their end.
    finished_streams: usize,
}

impl Traffic {
    /// Keeps `request` for assertions.
    pub fn record(&self, request: ReceivedRequest) {
        lock(&self.0).requests.push(request);
    }

    /// Counts a stream that ended with `outcome`.
    pub fn count_stream(&self, outcome: Outcome) {
        let mut seen = lock(&self.0);
        match outcome {
            Outcome::Sent => seen.finished_streams += 1,
            Outcome::Abandoned => seen.aborted_streams += 1,
        }
    }

    /// How many requests were received so far (without copying them).
    pub fn request_count(&self) -> usize {
        lock(&self.0).requests.len()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.0).requests.clone()
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
        lock(&self.0).aborted_streams
    }

    /// Streams sent to their end.
    pub fn finished_streams(&self) -> usize {
        lock(&self.0).finished_streams
    }
}

/// Waits until `condition` holds; panics after a minute (a liveness bound, not a timing
/// assertion).
pub fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "fake upstream: gave up waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A whole response: `status`, `content-type`, any further `headers`, and `body` with its
/// length.
pub fn whole(
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
    body: impl Into<Bytes>,
) -> Response<ScriptedBody> {
    respond(
        status,
        content_type,
        headers,
        ScriptedBody::Whole(Some(body.into())),
    )
}

/// How a body written in pieces ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The body ends properly after the last piece.
    Finish,
    /// After the last piece (and one more pause), the connection is dropped without ending the
    /// chunked body.
    Cut,
}

/// What became of a body written in pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every piece was handed to the connection.
    Sent,
    /// The client went away before the last piece.
    Abandoned,
}

/// A response whose body is `pieces`, each its own write, `gap` apart; `done` learns whether
/// every piece went out.
pub fn pieces(
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
    pieces: Vec<String>,
    gap: Duration,
    ending: Ending,
    done: impl FnOnce(Outcome) + Send + 'static,
) -> Response<ScriptedBody> {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        for (i, piece) in pieces.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(gap).await;
            }
            if tx.send(Ok(Bytes::from(piece))).await.is_err() {
                done(Outcome::Abandoned);
                return;
            }
        }
        if ending == Ending::Cut {
            // The pause lets the last piece reach the socket before the cut.
            tokio::time::sleep(gap).await;
            // An error frame makes hyper drop the connection mid-body.
            let _ = tx
                .send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "connection cut on purpose",
                )))
                .await;
        }
        // Dropping the sender ends the body.
        drop(tx);
        done(Outcome::Sent);
    });
    respond(status, content_type, headers, ScriptedBody::Pieces(rx))
}

fn respond(
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
    body: ScriptedBody,
) -> Response<ScriptedBody> {
    let mut response = Response::builder()
        .status(status)
        .header("content-type", content_type);
    for (name, value) in headers {
        response = response.header(name.as_str(), value.as_str());
    }
    response.body(body).expect("valid response")
}

/// A whole body with a known length, or pieces that may end in an error (which aborts the
/// connection).
pub enum ScriptedBody {
    Whole(Option<Bytes>),
    Pieces(mpsc::Receiver<Result<Bytes, std::io::Error>>),
}

impl Body for ScriptedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            ScriptedBody::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ScriptedBody::Pieces(rx) => rx
                .poll_recv(cx)
                .map(|item| item.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ScriptedBody::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ScriptedBody::Whole(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            ScriptedBody::Whole(None) => SizeHint::with_exact(0),
            ScriptedBody::Pieces(_) => SizeHint::default(),
        }
    }
}
