//! The HTTP server: accepts connections, dispatches paths, shuts down gracefully.

pub mod admin;
mod body;
mod handlers;
mod record;
mod stream;

use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{CONNECTION, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tracing::Instrument;
use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::plugins::PluginRuntime;
use crate::routing::Routes;
use crate::store::{InvocationLog, Store};
use body::{Body, error_response};
use record::Draft;

/// After the grace period, how long requests have to send their last error
/// frame and queue their record before their tasks are dropped.
const ABORT_WAIT: Duration = Duration::from_secs(5);
/// Request headers at most; far above what browsers and SDKs send (hyper's
/// default of 100 is not).
const MAX_HEADERS: usize = 256;

pub struct AppState {
    live: RwLock<Arc<Live>>,
    /// Why the last config edit was refused, until a good one arrives.
    config_error: RwLock<Option<String>>,
    pub runtime: Arc<PluginRuntime>,
    pub store: Store,
    pub log: InvocationLog,
    /// Set when shutdown's grace period is over: requests still running end now.
    abort: watch::Sender<bool>,
}

/// The hot-reloadable part of the state: a request uses one snapshot throughout.
pub struct Live {
    pub config: Config,
    pub routes: Routes,
    pub loaded_at_ms: i64,
}

impl AppState {
    pub fn new(
        config: Config,
        routes: Routes,
        runtime: Arc<PluginRuntime>,
        store: Store,
        log: InvocationLog,
    ) -> AppState {
        AppState {
            live: RwLock::new(Arc::new(Live {
                config,
                routes,
                loaded_at_ms: crate::store::now_ms(),
            })),
            config_error: RwLock::new(None),
            runtime,
            store,
            log,
            abort: watch::Sender::new(false),
        }
    }

    /// Resolves once the requests still in flight must end (shutdown's grace is over).
    pub async fn aborted(&self) {
        let mut abort = self.abort.subscribe();
        if abort.wait_for(|aborted| *aborted).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn abort_in_flight(&self) {
        self.abort.send_replace(true);
    }

    pub fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Swaps in a new config; requests already running keep the one they started with.
    pub fn replace_config(&self, config: Config, routes: Routes) {
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Live {
            config,
            routes,
            loaded_at_ms: crate::store::now_ms(),
        });
        *self.config_error.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    pub fn reject_config(&self, reason: String) {
        *self.config_error.write().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }

    pub fn config_error(&self) -> Option<String> {
        self.config_error
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

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
    let graceful = GracefulShutdown::new();
    let read_timeout = Duration::from_secs(state.live().config.request_read_timeout_secs.get());
    // HTTP/1.1 and HTTP/2 (prior knowledge, h2c) on the same socket.
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
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
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let service = service_fn(move |request| {
            let state = state.clone();
            async move { Ok::<_, Infallible>(dispatch(state, request).await) }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, "connection ended with an error: {e}");
            }
            drop(permit);
            crate::plugins::trim::connection_closed();
        });
    }
    drop(listener);
    let grace = Duration::from_secs(state.live().config.shutdown_grace_secs);
    let drained = graceful.shutdown();
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

async fn dispatch(state: Arc<AppState>, request: Request<Incoming>) -> Response<Body> {
    let id = Uuid::now_v7();
    let span = tracing::info_span!("request", invocation_id = %id,
        method = %request.method(), path = %request.uri().path());
    async move {
        let started = std::time::Instant::now();
        let path = request.uri().path().to_owned();
        let version = request.version();
        let mut response = match (request.method(), path.as_str()) {
            (&Method::POST, "/completions") => {
                handlers::completions(state, request, Draft::new(id)).await
            }
            (&Method::POST, "/embeddings") => {
                handlers::embeddings(state, request, Draft::new(id)).await
            }
            (&Method::GET, "/healthz") => handlers::healthz(&id),
            (&Method::GET, "/admin/plugins") => admin::plugins(state, request, &id),
            (&Method::GET, "/admin/config") => admin::config(state, request, &id),
            (&Method::GET, p) if p.starts_with("/invocations/") => {
                let invocation_id = p["/invocations/".len()..].to_owned();
                handlers::invocation(state, request, &invocation_id, id).await
            }
            (_, "/completions" | "/embeddings") => {
                error_response(&ApiError::MethodNotAllowed("POST"), &id)
            }
            (_, "/healthz" | "/admin/plugins" | "/admin/config") => {
                error_response(&ApiError::MethodNotAllowed("GET"), &id)
            }
            (_, p) if p.starts_with("/invocations/") => {
                error_response(&ApiError::MethodNotAllowed("GET"), &id)
            }
            _ => error_response(
                &ApiError::NotFound(format!("no such endpoint: {path}")),
                &id,
            ),
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
