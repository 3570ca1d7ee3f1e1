//! The HTTP transport: the listener and its worker threads, the connection
//! cap, HTTP/1.1 and HTTP/2, dispatch by method and path, graceful shutdown.
//! What a model endpoint does with its request is the [`crate::flow`]'s
//! business, in the wire format of its [`crate::surfaces`] codec.
//!
//! Beside the model endpoints it serves `GET /invocations/{id}` (`invocations`), `GET
//! /metrics` (here, or only on the `metrics_listen` socket), the admin API ([`admin`]) and the
//! admin console (`console`, signed in with a `session` cookie; wrong admin tokens are
//! throttled per client address by [`crate::limits::SignInThrottle`]). `connection` holds
//! each connection's deadlines, and [`app`] wires `gateway serve` top to bottom.

pub mod admin;
pub mod app;
mod connection;
mod console;
mod invocations;
mod session;
mod sign_on;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{CONNECTION, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::Instrument;
use uuid::Uuid;

use crate::error::ApiError;
use crate::flow::{self, Surface};
use crate::http::{Body, error_response, json_response};
use crate::state::AppState;
use crate::surfaces::{anthropic, commonbase, gemini, models, openai};

/// After the grace period, how long requests have to send their last error
/// frame and queue their record before their tasks are dropped.
const ABORT_WAIT: Duration = Duration::from_secs(5);
/// Request headers at most; far above what browsers and SDKs send (hyper's
/// default of 100 is not).
const MAX_HEADERS: usize = 256;
/// What a model endpoint answers a method other than POST.
const POST_ONLY: ApiError = ApiError::MethodNotAllowed("POST");
/// Open connections at most on `metrics_listen` (scrapers hold one or two each).
const METRICS_CONNECTIONS: usize = 64;

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("listening socket: {0}")]
    Socket(std::io::Error),
    #[error("cannot start worker thread {index}: {source}")]
    Worker {
        index: usize,
        source: std::io::Error,
    },
}

/// Serves on `workers` threads until `shutdown` resolves, then stops
/// accepting and lets in-flight requests finish (up to a grace period).
///
/// Every worker is a thread with its own single-threaded runtime accepting
/// from the same listening socket: a connection, and every request on it, is
/// served start to end on one thread (plugin instance and upstream connection
/// included), without the cross-thread wakeups a work-stealing runtime makes
/// at every step.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    workers: usize,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError> {
    let listener = listener.into_std().map_err(ServeError::Socket)?;
    let (stop, stopping) = tokio::sync::watch::channel(false);
    // Shared by every worker: the cap is on the process's connections.
    let connections = Arc::new(Semaphore::new(state.live().config.max_connections.get()));
    let mut finished = Vec::with_capacity(workers);
    for index in 1..=workers.max(1) {
        let listener = listener.try_clone().map_err(ServeError::Socket)?;
        let state = state.clone();
        let connections = connections.clone();
        let mut stopping = stopping.clone();
        let (done, finish) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || {
                crate::worker::enter(index, workers.max(1));
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let runtime = match runtime {
                    Ok(runtime) => runtime,
                    Err(e) => return tracing::error!("worker {index}: no runtime: {e}"),
                };
                state.serving_load.register(runtime.metrics());
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(e) => return tracing::error!("worker {index}: {e}"),
                    };
                    let stop = async move {
                        let _ = stopping.wait_for(|stop| *stop).await;
                    };
                    accept_loop(listener, state, connections, stop).await;
                });
                // Tasks still running past the grace period end here, before
                // shutdown goes on to drain the invocation log.
                drop(runtime);
                drop(done);
            })
            .map_err(|source| ServeError::Worker { index, source })?;
        finished.push(finish);
    }
    drop(listener);
    shutdown.await;
    tracing::info!("shutting down: waiting for in-flight requests");
    let _ = stop.send(true);
    for finish in finished {
        let _ = finish.await;
    }
    Ok(())
}

/// One worker's loop: accepts connections until `stop`, then drains them:
/// requests in flight get the config's grace period to finish; those still
/// running then end with an error and their record.
async fn accept_loop(
    listener: TcpListener,
    state: Arc<AppState>,
    connections: Arc<Semaphore>,
    stop: impl std::future::Future<Output = ()>,
) {
    // Every connection holds a receiver until it ends: a send asks them to close, and
    // `closed` is when the last one did.
    let (stop_connections, _) = watch::channel(());
    // HTTP/1.1 and HTTP/2 (prior knowledge, h2c) on the same socket. Headers that stop
    // coming are the connection's deadlines' business (`connection::serve`), for both.
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_headers(MAX_HEADERS);
    builder.http2().timer(TokioTimer::new());
    tokio::pin!(stop);
    loop {
        // Over max_connections, new connections wait in the listen backlog.
        let permit = tokio::select! {
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = &mut stop => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off, don't spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let stop = stop_connections.subscribe();
        serve_connection(&builder, &state, stream, peer, permit, stop);
    }
    drop(listener);
    drain(&state, stop_connections).await;
}

/// Serves one accepted connection in a task of its own, which gives its `permit` back when
/// the connection ends; `stop` asks it to close.
fn serve_connection(
    builder: &auto::Builder<TokioExecutor>,
    state: &Arc<AppState>,
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    stop: watch::Receiver<()>,
) {
    let _ = stream.set_nodelay(true);
    let deadlines = {
        let config = &state.live().config;
        connection::Deadlines {
            first_request: Duration::from_secs(config.request_read_timeout_secs.get()),
            idle: Duration::from_secs(config.client_idle_timeout_secs.get()),
        }
    };
    let activity = Arc::new(connection::Activity::default());
    let service = service_fn({
        let state = state.clone();
        let activity = activity.clone();
        move |request| {
            let in_flight = activity.begin();
            let state = state.clone();
            async move {
                let response = dispatch(state, request, peer.ip()).await;
                Ok::<_, Infallible>(response.map(|body| connection::Tracked::new(body, in_flight)))
            }
        }
    });
    let served = builder
        .serve_connection(TokioIo::new(stream), service)
        .into_owned();
    tokio::spawn(async move {
        if let Err(e) = connection::serve(served, &activity, deadlines, stop).await {
            tracing::debug!(%peer, "connection ended with an error: {e}");
        }
        drop(permit);
        crate::plugins::trim::connection_closed();
    });
}

/// Asks every connection to close once its request is answered, and waits for them, and for
/// the calls whose callers left ([`AppState::apart`]), for `shutdown_grace_secs`; then ends
/// the requests still running (recorded as cancelled).
async fn drain(state: &AppState, stop_connections: watch::Sender<()>) {
    let grace = Duration::from_secs(state.live().config.shutdown_grace_secs);
    stop_connections.send_replace(());
    let drained = async {
        stop_connections.closed().await;
        state.apart_ended().await;
    };
    tokio::pin!(drained);
    if tokio::time::timeout(grace, &mut drained).await.is_err() {
        tracing::warn!(
            "requests still running after the {grace:?} grace period: ending them (recorded as cancelled)"
        );
        state.abort_in_flight();
        if tokio::time::timeout(ABORT_WAIT, drained).await.is_err() {
            tracing::error!("some connections did not close after their requests were ended");
        }
    }
}

/// The path as logs show it: `/admin/keys/KEY...` and `/admin/tokens/TOKEN` may name a whole
/// key or admin token, of which only the stored prefix is shown.
fn logged_path(path: &str) -> std::borrow::Cow<'_, str> {
    let Some((base, rest)) = ["/admin/keys/", "/admin/tokens/"]
        .into_iter()
        .find_map(|base| path.strip_prefix(base).map(|rest| (base, rest)))
    else {
        return path.into();
    };
    let (key, tail) = rest
        .split_once('/')
        .map_or((rest, None), |(k, t)| (k, Some(t)));
    let shown: String = key.chars().take(crate::keys::PREFIX_LEN).collect();
    match tail {
        None => format!("{base}{shown}").into(),
        Some(tail) => format!("{base}{shown}/{tail}").into(),
    }
}

/// `GET /metrics`: the Prometheus text format, behind `metrics_token` when the config sets one.
fn metrics(state: &AppState, request: &Request<Incoming>, id: &Uuid) -> Response<Body> {
    if state.metrics_listen.is_some() {
        return error_response(
            &ApiError::NotFound("metrics are served on this gateway's metrics_listen".into()),
            id,
        );
    }
    metrics_text(state, request, id)
}

fn metrics_text(state: &AppState, request: &Request<Incoming>, id: &Uuid) -> Response<Body> {
    if !state.metrics.enabled() {
        return error_response(
            &ApiError::NotFound(
                "metrics are off in this gateway's config (metrics = false)".into(),
            ),
            id,
        );
    }
    let live = state.live();
    if let Some(token) = live
        .config
        .metrics_token
        .as_deref()
        .filter(|t| !t.is_empty())
        && !crate::auth::carries_token(request.headers(), token)
    {
        return error_response(&ApiError::MetricsUnauthorized, id);
    }
    let writer = state.log.stats();
    let text = state.metrics.render(
        crate::metrics::WriterState {
            queue_depth: writer.queued,
            write_failures: writer.write_failures,
        },
        state.runtime.counts(),
        state.cache.bytes(),
    );
    crate::http::typed_response(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        text,
        id,
    )
}

/// Serves `GET /metrics` (and `GET /healthz`, for the scraper's own checks) on the
/// `metrics_listen` socket until the task is dropped. Scrapes are rare and cheap: one task
/// per connection on the caller's runtime, HTTP/1.1 only, away from the serving workers.
/// It holds the state weakly: the invocation writer's shutdown waits for every strong handle,
/// and a scraper's kept-alive connection must not hold it (a scrape after serving ended gets
/// 503).
pub async fn serve_metrics(listener: TcpListener, state: std::sync::Weak<AppState>) {
    let Some(read_timeout) = state
        .upgrade()
        .map(|state| Duration::from_secs(state.live().config.request_read_timeout_secs.get()))
    else {
        return;
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .max_headers(MAX_HEADERS);
    let connections = Arc::new(Semaphore::new(METRICS_CONNECTIONS));
    loop {
        let Ok(permit) = connections.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("metrics_listen: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let id = Uuid::now_v7();
            let response = match (request.method(), request.uri().path()) {
                (&Method::GET, "/metrics") => match state.upgrade() {
                    Some(state) => metrics_text(&state, &request, &id),
                    None => error_response(&ApiError::ShuttingDown, &id),
                },
                (&Method::GET, "/healthz") => {
                    json_response(StatusCode::OK, &json!({"status": "ok"}), &id)
                }
                (_, "/metrics" | "/healthz") => {
                    error_response(&ApiError::MethodNotAllowed("GET"), &id)
                }
                (_, path) => error_response(
                    &ApiError::NotFound(format!("no such endpoint on metrics_listen: {path}")),
                    &id,
                ),
            };
            std::future::ready(Ok::<_, Infallible>(response))
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
}

/// A model endpoint: a POST runs the flow; any other method is refused, and recorded like
/// every request that reaches one.
async fn model<S: Surface>(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: Uuid,
) -> Response<Body> {
    if request.method() == Method::POST {
        flow::serve::<S>(state, request, id).await
    } else {
        flow::refuse::<S>(state, request, id, POST_ONLY).await
    }
}

/// Every endpoint but the model endpoints, by its path and then its method.
async fn other(
    state: Arc<AppState>,
    request: Request<Incoming>,
    path: &str,
    id: Uuid,
    client: std::net::IpAddr,
) -> Response<Body> {
    let get = request.method() == Method::GET;
    let only_get = || error_response(&ApiError::MethodNotAllowed("GET"), &id);
    if let Some(response_id) = path.strip_prefix("/v1/responses/") {
        return match *request.method() {
            Method::GET => openai::responses::get(state, request, response_id, id).await,
            Method::DELETE => openai::responses::delete(state, request, response_id, id).await,
            _ => openai::error_response(&ApiError::MethodNotAllowed("GET, DELETE"), &id),
        };
    }
    if let Some(rest) = path.strip_prefix("/v1/files")
        && (rest.is_empty() || rest.starts_with('/'))
    {
        // Boxed: uploads add nothing to the size of every model request's future.
        return Box::pin(openai::files::serve(state, request, rest, id)).await;
    }
    if let Some(rest) = path.strip_prefix("/v1/batches")
        && (rest.is_empty() || rest.starts_with('/'))
    {
        // Boxed, as the files' are.
        return Box::pin(openai::batches::serve(state, request, rest, id)).await;
    }
    if let Some(rest) = path.strip_prefix("/v1/messages/batches")
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return Box::pin(anthropic::batches::serve(state, request, rest, id)).await;
    }
    if gemini::unknown_method(path, request.method()) {
        let error = ApiError::NotFound(format!("no such method of a model: {path}"));
        return gemini::error_response(&error, &id);
    }
    if path == "/v1/models" || path.starts_with("/v1/models/") || gemini::lists_models(path) {
        if !get {
            let error = ApiError::MethodNotAllowed("GET");
            return models::error_response(request.headers(), request.uri(), &error, &id);
        }
        let model =
            (path.strip_prefix("/v1/models/")).or_else(|| path.strip_prefix("/v1beta/models/"));
        return match model {
            Some(model) => models::retrieve(state, request, model, id).await,
            None => models::list(state, request, id).await,
        };
    }
    if let Some(invocation_id) = path.strip_prefix("/invocations/") {
        if !get {
            return only_get();
        }
        return invocations::get(state, request, invocation_id, id).await;
    }
    match path {
        "/healthz" | "/metrics" if !get => only_get(),
        "/healthz" => json_response(StatusCode::OK, &json!({"status": "ok"}), &id),
        "/metrics" => metrics(&state, &request, &id),
        // Every admin endpoint: `admin` answers every method (405s included), each as its
        // role table says. Boxed, as the console's: the operators' endpoints add nothing to
        // the size of every model request's future.
        p if admin::manages(p) => Box::pin(admin::manage(state, request, &id, client)).await,
        p if console::serves(p) => Box::pin(console::serve(state, request, &id, client)).await,
        _ => error_response(
            &ApiError::NotFound(format!("no such endpoint: {path}")),
            &id,
        ),
    }
}

/// Answers `request`, which came from `client` (the connection's peer: behind a proxy, the
/// proxy).
async fn dispatch(
    state: Arc<AppState>,
    request: Request<Incoming>,
    client: std::net::IpAddr,
) -> Response<Body> {
    let id = Uuid::now_v7();
    // `trace_id` is recorded by model endpoints whose request has a trace.
    let span = tracing::info_span!("request", invocation_id = %id,
        method = %request.method(), path = %logged_path(request.uri().path()),
        trace_id = tracing::field::Empty);
    async move {
        let started = std::time::Instant::now();
        let path = request.uri().path().to_owned();
        let version = request.version();
        let mut response = match path.as_str() {
            "/completions" => model::<commonbase::Completions>(state, request, id).await,
            "/embeddings" => model::<commonbase::Embeddings>(state, request, id).await,
            "/v1/messages" => model::<anthropic::Messages>(state, request, id).await,
            "/v1/messages/count_tokens" => {
                model::<anthropic::CountTokens>(state, request, id).await
            }
            "/v1/chat/completions" => model::<openai::ChatCompletions>(state, request, id).await,
            "/v1/completions" => model::<openai::Completions>(state, request, id).await,
            "/v1/embeddings" => model::<openai::Embeddings>(state, request, id).await,
            "/v1/responses" => model::<openai::Responses>(state, request, id).await,
            "/v1/responses/input_tokens" => model::<openai::InputTokens>(state, request, id).await,
            // Cohere's v2 client sends its rerank to `/v2/`.
            "/v1/rerank" | "/v2/rerank" => model::<openai::Rerank>(state, request, id).await,
            "/v1/images/generations" => model::<openai::Images>(state, request, id).await,
            "/v1/audio/transcriptions" => model::<openai::Transcriptions>(state, request, id).await,
            "/v1/audio/translations" => model::<openai::Translations>(state, request, id).await,
            "/v1/audio/speech" => model::<openai::Speech>(state, request, id).await,
            // A model's method in Gemini's API: `/v1beta/models/{model}:generateContent`, ….
            p if gemini::endpoint(p).is_some() => model::<gemini::Models>(state, request, id).await,
            // Boxed: tool calls add nothing to the size of every model request's future.
            "/mcp" => Box::pin(crate::mcp::serve(state, request, id)).await,
            path => other(state, request, path, id, client).await,
        };
        // A client too slow to send its request does not keep the connection.
        if response.status() == StatusCode::REQUEST_TIMEOUT && version < Version::HTTP_2 {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        tracing::info!(
            status = response.status().as_u16(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "answered"
        );
        response
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_whole_key_in_an_admin_path_is_not_logged() {
        let key = crate::keys::generate_key();
        let path = format!("/admin/keys/{key}/limits");
        let shown = super::logged_path(&path);
        assert!(!shown.contains(&key), "{shown}");
        assert_eq!(
            shown,
            format!("/admin/keys/{}/limits", crate::keys::key_prefix(&key))
        );
        assert!(!super::logged_path(&format!("/admin/keys/{key}")).contains(&key));
        let token = crate::keys::generate_admin_token();
        let path = format!("/admin/tokens/{token}");
        let shown = format!("/admin/tokens/{}", crate::keys::key_prefix(&token));
        assert_eq!(super::logged_path(&path), shown);
        assert_eq!(super::logged_path("/completions"), "/completions");
    }
}
