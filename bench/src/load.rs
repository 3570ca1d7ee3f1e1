//! The load generator: hyper HTTP/1.1 clients on keep-alive connections,
//! latencies in HDR histograms (nanoseconds, 3 significant digits).
//!
//! - [`closed_loop`]: N connections, each sending its next request as soon as
//!   the previous answer is read. Measures service time and saturation throughput.
//! - [`open_loop`]: requests sent at a constant rate whatever the answers do,
//!   latency counted from the *intended* send time, so a stall shows up as the
//!   queue it causes (no coordinated omission).
//! - [`stream_loop`]: closed loop over streamed answers: time to first frame,
//!   gaps between frames, and each frame's delivery time from the upstream's stamp.
//! - [`hold_streams`]: many streams open at once while a process's memory is sampled.
//!
//! Every function runs on its own single-threaded tokio runtime: the generator
//! takes one core's worth of scheduling at most, and what it leaves running
//! (connections, late answers) ends with the runtime.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;

use crate::sys;
use crate::upstream::TS_MARKER;

/// Longest a finished open-loop run waits for its last answers.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for an answer, or for the next piece of a stream: a hung
/// server fails the run instead of hanging it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// After this many failures without a single success a run gives up.
const GIVE_UP_AFTER_ERRORS: u64 = 200;

/// Where and what to send.
#[derive(Debug, Clone)]
pub struct Target {
    /// `direct`, `proxy` or `gateway` (the `mcp` scenario's paths: more words).
    pub label: &'static str,
    pub addr: SocketAddr,
    /// `POST` with a JSON `body`, or `GET` (no body, no `Content-Type`).
    pub method: Method,
    /// With its query, if any.
    pub path: String,
    /// `None`: no `Authorization` header.
    pub authorization: Option<HeaderValue>,
    pub body: Bytes,
    /// Streamed answers expected (sets `Accept: text/event-stream`).
    pub stream: bool,
    /// `Accept` instead of the one `stream` implies.
    pub accept: Option<HeaderValue>,
    /// More headers (`--header`; MCP's `Mcp-Method` and the like).
    pub headers: Vec<(hyper::header::HeaderName, HeaderValue)>,
    /// What makes an answer a success.
    pub expect: Expect,
}

/// What makes an answer a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A 2xx status.
    Status,
    /// A 2xx status and a JSON-RPC answer with a `result` (no `error`) that is not a tool's
    /// `isError: true`.
    JsonRpcResult,
}

impl Target {
    /// A `POST` of `body` (JSON), answered with a 2xx status.
    pub fn post(label: &'static str, addr: SocketAddr, path: &str, body: Bytes) -> Target {
        Target {
            label,
            addr,
            method: Method::POST,
            path: path.to_owned(),
            authorization: None,
            body,
            stream: false,
            accept: None,
            headers: Vec::new(),
            expect: Expect::Status,
        }
    }

    fn request(&self) -> Result<Request<Full<Bytes>>, String> {
        let host = HeaderValue::from_str(&self.addr.to_string()).map_err(|e| e.to_string())?;
        let mut request = Request::builder();
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let accept = match &self.accept {
            Some(accept) => accept.clone(),
            None if self.stream => HeaderValue::from_static("text/event-stream"),
            None => HeaderValue::from_static("application/json"),
        };
        request = request
            .method(self.method.clone())
            .uri(self.path.as_str())
            .header(HOST, host)
            .header(ACCEPT, accept);
        if self.method != Method::GET {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        request
            .body(Full::new(self.body.clone()))
            .map_err(|e| format!("cannot build the request: {e}"))
    }
}

/// Whether `body`, a 2xx answer's, is a JSON-RPC success: a `result`, no `error`, and not a
/// tool result with `isError: true`. The reason when it is not.
fn json_rpc_failure(body: &[u8]) -> Option<String> {
    let message: serde_json::Value = match serde_json::from_slice(body) {
        Ok(message) => message,
        Err(e) => return Some(format!("not JSON ({e})")),
    };
    let failed = match message.get("result") {
        _ if message.get("error").is_some() => true,
        None => true,
        Some(result) => result.get("isError").and_then(serde_json::Value::as_bool) == Some(true),
    };
    failed.then(|| format!("JSON-RPC failure: {message}"))
}

/// A histogram of nanoseconds from 1 ns to 10 minutes.
pub fn histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, 600_000_000_000, 3).unwrap_or_else(|_| {
        Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits is valid"))
    })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What a non-streaming run measured.
#[derive(Debug, Clone)]
pub struct LoadResult {
    pub latency: Histogram<u64>,
    /// Answers with a 2xx status inside the measuring window.
    pub ok: u64,
    /// Successful answers including the warm-up (for CPU time per request).
    pub all_ok: u64,
    /// Failed requests (transport errors, non-2xx) inside the window.
    pub errors: u64,
    /// Open loop only: requests still unanswered when the run gave up waiting.
    pub unfinished: u64,
    /// The measuring window.
    pub window: Duration,
    /// The first failure, for the report.
    pub first_error: Option<String>,
}

impl LoadResult {
    fn new(window: Duration) -> LoadResult {
        LoadResult {
            latency: histogram(),
            ok: 0,
            all_ok: 0,
            errors: 0,
            unfinished: 0,
            window,
            first_error: None,
        }
    }

    /// Successful answers per second.
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.window.as_secs_f64().max(1e-9)
    }

    fn merge(&mut self, other: &LoadResult) {
        let _ = self.latency.add(&other.latency);
        self.ok += other.ok;
        self.all_ok += other.all_ok;
        self.errors += other.errors;
        self.unfinished += other.unfinished;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }

    fn error(&mut self, e: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }
}

fn runtime() -> Result<Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the load generator's runtime: {e}"))
}

/// Opens one keep-alive HTTP/1.1 connection.
async fn connect(addr: SocketAddr) -> Result<SendRequest<Full<Bytes>>, String> {
    let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("cannot connect to {addr} within {REQUEST_TIMEOUT:?}"))?
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake with {addr} failed: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// Sends one request and reads the whole answer; a non-2xx status is an error.
async fn exchange(sender: &mut SendRequest<Full<Bytes>>, target: &Target) -> Result<(), String> {
    tokio::time::timeout(REQUEST_TIMEOUT, exchange_inner(sender, target))
        .await
        .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
}

async fn exchange_inner(
    sender: &mut SendRequest<Full<Bytes>>,
    target: &Target,
) -> Result<(), String> {
    sender
        .ready()
        .await
        .map_err(|e| format!("connection lost: {e}"))?;
    let response = sender
        .send_request(target.request()?)
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the answer failed: {e}"))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!(
            "status {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    match target.expect {
        Expect::Status => Ok(()),
        Expect::JsonRpcResult => match json_rpc_failure(&body) {
            None => Ok(()),
            Some(failure) => Err(failure.chars().take(400).collect()),
        },
    }
}

/// `concurrency` connections in a closed loop: `warmup` unmeasured, then `duration` measured.
pub fn closed_loop(
    target: &Target,
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<LoadResult, String> {
    run_workers(
        target,
        concurrency,
        warmup,
        duration,
        LoadResult::new(duration),
        LoadResult::merge,
        "load",
        |target, sender, measure_from, until| {
            closed_worker(target, sender, measure_from, until, duration)
        },
    )
}

/// Opens `concurrency` connections to `target`, then runs one `worker` per
/// connection on it, measuring from `warmup` after the start for `duration`,
/// and merges what the workers return into `total`. `kind` names the workers
/// in the error when one panics.
#[allow(clippy::too_many_arguments)]
fn run_workers<R, W, F>(
    target: &Target,
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
    mut total: R,
    merge: fn(&mut R, &R),
    kind: &str,
    worker: W,
) -> Result<R, String>
where
    R: Send + 'static,
    W: Fn(Target, SendRequest<Full<Bytes>>, Instant, Instant) -> F,
    F: Future<Output = R> + Send + 'static,
{
    let rt = runtime()?;
    rt.block_on(async {
        let mut senders = Vec::with_capacity(concurrency);
        for _ in 0..concurrency {
            senders.push(connect(target.addr).await?);
        }
        let measure_from = Instant::now() + warmup;
        let until = measure_from + duration;
        let mut workers = Vec::with_capacity(concurrency);
        for sender in senders {
            workers.push(tokio::spawn(worker(
                target.clone(),
                sender,
                measure_from,
                until,
            )));
        }
        for handle in workers {
            let result = handle
                .await
                .map_err(|e| format!("a {kind} worker failed: {e}"))?;
            merge(&mut total, &result);
        }
        Ok(total)
    })
}

/// After a failed exchange: pauses (a persistent failure must not spin) and
/// replaces `sender` with a fresh connection, as a broken one cannot be reused.
async fn reconnect(sender: &mut SendRequest<Full<Bytes>>, addr: SocketAddr) -> Result<(), String> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    *sender = connect(addr).await?;
    Ok(())
}

async fn closed_worker(
    target: Target,
    mut sender: SendRequest<Full<Bytes>>,
    measure_from: Instant,
    until: Instant,
    window: Duration,
) -> LoadResult {
    let mut result = LoadResult::new(window);
    let mut failures_in_a_row = 0u64;
    loop {
        let sent = Instant::now();
        if sent >= until {
            break;
        }
        let outcome = exchange(&mut sender, &target).await;
        let measured = sent >= measure_from;
        match outcome {
            Ok(()) => {
                failures_in_a_row = 0;
                result.all_ok += 1;
                if measured {
                    let _ = result.latency.record(nanos(sent.elapsed()).max(1));
                    result.ok += 1;
                }
            }
            Err(e) => {
                failures_in_a_row += 1;
                if measured || failures_in_a_row > GIVE_UP_AFTER_ERRORS {
                    result.error(e);
                }
                if failures_in_a_row > GIVE_UP_AFTER_ERRORS {
                    break;
                }
                if let Err(e) = reconnect(&mut sender, target.addr).await {
                    result.error(e);
                    break;
                }
            }
        }
    }
    result
}

/// Shared state of an open-loop run.
struct OpenLoop {
    target: Target,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    connections: Semaphore,
    measure_from: Instant,
    result: Mutex<LoadResult>,
    outstanding: AtomicU64,
}

/// Requests at a constant `rate` per second for `warmup + duration`, at most
/// `max_connections` in flight; latency from each request's intended send time.
pub fn open_loop(
    target: &Target,
    rate: f64,
    warmup: Duration,
    duration: Duration,
    max_connections: usize,
) -> Result<LoadResult, String> {
    if !rate.is_finite() || rate <= 0.0 {
        return Err(format!("bad rate {rate}"));
    }
    let rt = runtime()?;
    let start = Instant::now() + Duration::from_millis(20);
    let shared = Arc::new(OpenLoop {
        target: target.clone(),
        idle: Mutex::new(Vec::new()),
        connections: Semaphore::new(max_connections),
        measure_from: start + warmup,
        result: Mutex::new(LoadResult::new(duration)),
        outstanding: AtomicU64::new(0),
    });
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = ((warmup + duration).as_secs_f64() * rate).round() as u64;

    // The pacer is an OS thread with tight timer slack: tokio's timer has
    // millisecond resolution, far too coarse for sub-millisecond intervals.
    let handle = rt.handle().clone();
    let pacer_shared = shared.clone();
    let pacer = std::thread::Builder::new()
        .name("bench-pacer".into())
        .spawn(move || {
            sys::set_timer_slack(1_000);
            for i in 0..total {
                let intended = start + interval.mul_f64(i as f64);
                let now = Instant::now();
                if intended > now {
                    std::thread::sleep(intended - now);
                }
                pacer_shared.outstanding.fetch_add(1, Ordering::SeqCst);
                handle.spawn(open_request(pacer_shared.clone(), intended));
            }
        })
        .map_err(|e| format!("cannot start the pacer thread: {e}"))?;

    rt.block_on(async {
        while !pacer.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while shared.outstanding.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let _ = pacer.join();
    let unfinished = shared.outstanding.load(Ordering::SeqCst);
    let mut result = lock(&shared.result).clone();
    result.unfinished = unfinished;
    drop(rt);
    Ok(result)
}

async fn open_request(shared: Arc<OpenLoop>, intended: Instant) {
    let outcome = open_exchange(&shared).await;
    let done = Instant::now();
    if intended >= shared.measure_from {
        let mut result = lock(&shared.result);
        match outcome {
            Ok(()) => {
                let _ = result
                    .latency
                    .record(nanos(done.saturating_duration_since(intended)).max(1));
                result.ok += 1;
            }
            Err(e) => result.error(e),
        }
    }
    shared.outstanding.fetch_sub(1, Ordering::SeqCst);
}

async fn open_exchange(shared: &OpenLoop) -> Result<(), String> {
    let _permit = shared
        .connections
        .acquire()
        .await
        .map_err(|e| format!("connection limit: {e}"))?;
    let reused = lock(&shared.idle).pop();
    let mut sender = match reused {
        Some(sender) if !sender.is_closed() => sender,
        _ => connect(shared.target.addr).await?,
    };
    exchange(&mut sender, &shared.target).await?;
    lock(&shared.idle).push(sender);
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a streaming run measured (all in nanoseconds).
#[derive(Debug, Clone)]
pub struct StreamResult {
    /// Request sent to the first content frame received.
    pub first_frame: Histogram<u64>,
    /// Between consecutive content frames of one stream.
    pub gap: Histogram<u64>,
    /// How much longer each gap arrived than the upstream wrote it
    /// (`gap here − gap at the upstream`, negative values as 0): the
    /// upstream's own timer jitter cancels out.
    pub stretch: Histogram<u64>,
    /// Upstream's write of a frame to its arrival here.
    pub delivery: Histogram<u64>,
    pub streams: u64,
    pub frames: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl StreamResult {
    fn new() -> StreamResult {
        StreamResult {
            first_frame: histogram(),
            gap: histogram(),
            stretch: histogram(),
            delivery: histogram(),
            streams: 0,
            frames: 0,
            errors: 0,
            first_error: None,
        }
    }

    fn error(&mut self, e: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }

    fn merge(&mut self, other: &StreamResult) {
        let _ = self.first_frame.add(&other.first_frame);
        let _ = self.gap.add(&other.gap);
        let _ = self.stretch.add(&other.stretch);
        let _ = self.delivery.add(&other.delivery);
        self.streams += other.streams;
        self.frames += other.frames;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

/// Timings of one stream, kept only if it started inside the window.
#[derive(Default)]
struct OneStream {
    first_frame: Option<u64>,
    gaps: Vec<u64>,
    stretches: Vec<u64>,
    deliveries: Vec<u64>,
}

/// Reads a streamed answer, timing every content frame (`@ts=` marker).
async fn read_stream(
    sender: &mut SendRequest<Full<Bytes>>,
    target: &Target,
    expected_frames: u32,
    on_first_frame: impl FnOnce(),
) -> Result<OneStream, String> {
    tokio::time::timeout(REQUEST_TIMEOUT, sender.ready())
        .await
        .map_err(|_| format!("the connection stayed busy for {REQUEST_TIMEOUT:?}"))?
        .map_err(|e| format!("connection lost: {e}"))?;
    let request = target.request()?;
    let sent = sys::now_ns();
    let response = tokio::time::timeout(REQUEST_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status();
    let mut body = response.into_body();
    if !status.is_success() {
        let text = match tokio::time::timeout(REQUEST_TIMEOUT, body.collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            _ => Bytes::new(),
        };
        return Err(format!(
            "status {status}: {}",
            String::from_utf8_lossy(&text[..text.len().min(300)])
        ));
    }
    let mut timing = OneStream::default();
    let mut on_first_frame = Some(on_first_frame);
    let mut pending: Vec<u8> = Vec::new();
    // (arrival, upstream stamp) of the previous content frame.
    let mut previous: Option<(u64, u64)> = None;
    let mut seen = 0u32;
    while let Some(frame) = tokio::time::timeout(REQUEST_TIMEOUT, body.frame())
        .await
        .map_err(|_| format!("the stream stalled for {REQUEST_TIMEOUT:?}"))?
    {
        let frame = frame.map_err(|e| format!("reading the stream failed: {e}"))?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let arrived = sys::now_ns();
        pending.extend_from_slice(data);
        // Only whole lines: a marker may be split across two reads.
        let Some(end) = pending.iter().rposition(|&b| b == b'\n') else {
            continue;
        };
        for stamp in stamps(&pending[..=end]) {
            seen += 1;
            if timing.first_frame.is_none() {
                timing.first_frame = Some(arrived.saturating_sub(sent));
                if let Some(callback) = on_first_frame.take() {
                    callback();
                }
            }
            if let Some((previous_arrival, previous_stamp)) = previous {
                let gap = arrived.saturating_sub(previous_arrival);
                timing.gaps.push(gap);
                timing
                    .stretches
                    .push(gap.saturating_sub(stamp.saturating_sub(previous_stamp)));
            }
            previous = Some((arrived, stamp));
            timing.deliveries.push(arrived.saturating_sub(stamp));
        }
        pending.drain(..=end);
    }
    if seen != expected_frames {
        return Err(format!(
            "expected {expected_frames} content frames, got {seen}"
        ));
    }
    Ok(timing)
}

/// The `@ts=NANOS` stamps in `text`, in order.
fn stamps(text: &[u8]) -> Vec<u64> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.windows(TS_MARKER.len()).position(|w| w == TS_MARKER) {
        rest = &rest[at + TS_MARKER.len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if let Some(value) = std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
        {
            found.push(value);
        }
    }
    found
}

/// `concurrency` connections each streaming one answer after another.
pub fn stream_loop(
    target: &Target,
    concurrency: usize,
    expected_frames: u32,
    warmup: Duration,
    duration: Duration,
) -> Result<StreamResult, String> {
    run_workers(
        target,
        concurrency,
        warmup,
        duration,
        StreamResult::new(),
        StreamResult::merge,
        "stream",
        |target, mut sender, measure_from, until| async move {
            let mut result = StreamResult::new();
            let mut failures_in_a_row = 0u64;
            loop {
                let started = Instant::now();
                if started >= until {
                    break;
                }
                match read_stream(&mut sender, &target, expected_frames, || {}).await {
                    Ok(timing) => {
                        failures_in_a_row = 0;
                        if started >= measure_from {
                            result.streams += 1;
                            result.frames += timing.deliveries.len() as u64;
                            if let Some(first) = timing.first_frame {
                                let _ = result.first_frame.record(first.max(1));
                            }
                            for gap in timing.gaps {
                                let _ = result.gap.record(gap.max(1));
                            }
                            for stretch in timing.stretches {
                                let _ = result.stretch.record(stretch.max(1));
                            }
                            for delivery in timing.deliveries {
                                let _ = result.delivery.record(delivery.max(1));
                            }
                        }
                    }
                    Err(e) => {
                        failures_in_a_row += 1;
                        result.error(e);
                        if failures_in_a_row > GIVE_UP_AFTER_ERRORS {
                            break;
                        }
                        if let Err(e) = reconnect(&mut sender, target.addr).await {
                            result.error(e);
                            break;
                        }
                    }
                }
            }
            result
        },
    )
}

/// What [`hold_streams`] saw.
#[derive(Debug, Clone, Default)]
pub struct HoldResult {
    /// Streams that delivered their first frame.
    pub started: u64,
    /// Streams that delivered every frame.
    pub completed: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Memory of the sampled process once every stream had started.
    pub all_started: Option<sys::Memory>,
    /// The highest RSS sampled while streams were open, KiB.
    pub peak_rss_kib: u64,
}

/// Opens `count` streams at once (one connection each), samples `pid`'s
/// memory every few milliseconds while they run, and returns when all ended.
pub fn hold_streams(
    target: &Target,
    count: usize,
    expected_frames: u32,
    pid: u32,
) -> Result<HoldResult, String> {
    let rt = runtime()?;
    rt.block_on(async {
        let started = Arc::new(AtomicU64::new(0));
        let ended = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::with_capacity(count);
        for _ in 0..count {
            let target = target.clone();
            let started = started.clone();
            let ended = ended.clone();
            tasks.push(tokio::spawn(async move {
                let outcome = async {
                    let mut sender = connect(target.addr).await?;
                    read_stream(&mut sender, &target, expected_frames, || {
                        started.fetch_add(1, Ordering::SeqCst);
                    })
                    .await
                }
                .await;
                ended.fetch_add(1, Ordering::SeqCst);
                outcome.map(|_| ())
            }));
        }
        let mut result = HoldResult::default();
        let total = count as u64;
        while ended.load(Ordering::SeqCst) < total {
            if let Some(memory) = sys::memory(pid) {
                result.peak_rss_kib = result.peak_rss_kib.max(memory.rss_kib);
                if result.all_started.is_none() && started.load(Ordering::SeqCst) == total {
                    result.all_started = Some(memory);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for task in tasks {
            match task.await {
                Ok(Ok(())) => result.completed += 1,
                Ok(Err(e)) => {
                    result.errors += 1;
                    result.first_error.get_or_insert(e);
                }
                Err(e) => {
                    result.errors += 1;
                    result.first_error.get_or_insert(e.to_string());
                }
            }
        }
        result.started = started.load(Ordering::SeqCst);
        Ok(result)
    })
}

/// Sends one request on a fresh connection and reads the answer (cold start).
pub async fn once(target: &Target) -> Result<(), String> {
    let mut sender = connect(target.addr).await?;
    exchange(&mut sender, target).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_rpc_answer_succeeds_with_a_result_only() {
        assert_eq!(
            json_rpc_failure(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#),
            None
        );
        for failure in [
            &br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
            b"not json",
        ] {
            assert!(json_rpc_failure(failure).is_some());
        }
    }

    #[test]
    fn stamps_are_found_wherever_they_are() {
        let text = b"data: {\"text\":\"@ts=12;\"}\n\ndata: {\"a\":\"@ts=7;@ts=9;\"}\n\n";
        assert_eq!(stamps(text), vec![12, 7, 9]);
        assert!(stamps(b"data: [DONE]\n\n").is_empty());
    }
}
