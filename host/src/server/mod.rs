//! The HTTP server: accepts connections, dispatches paths, shuts down gracefully.

pub mod admin;
mod body;
mod handlers;
mod record;
mod stream;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tracing::Instrument;
use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::plugins::PluginRuntime;
use crate::routing::Routes;
use crate::store::{InvocationLog, Store};
use body::{Body, error_response};
use record::Draft;

/// How long shutdown waits for in-flight requests (streams included) to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

pub struct AppState {
    pub config: Config,
    pub routes: Routes,
    pub runtime: Arc<PluginRuntime>,
    pub store: Store,
    pub log: InvocationLog,
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight
/// requests finish (up to a grace period).
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
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
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let service = service_fn(move |request| {
            let state = state.clone();
            async move { Ok::<_, Infallible>(dispatch(state, request).await) }
        });
        let connection = http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(Duration::from_secs(30))
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, "connection ended with an error: {e}");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: waiting for in-flight requests");
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests still running after {SHUTDOWN_GRACE:?}; closing them");
    }
}

async fn dispatch(state: Arc<AppState>, request: Request<Incoming>) -> Response<Body> {
    let id = Uuid::now_v7();
    let span = tracing::info_span!("request", invocation_id = %id,
        method = %request.method(), path = %request.uri().path());
    async move {
        let started = std::time::Instant::now();
        let path = request.uri().path().to_owned();
        let response = match (request.method(), path.as_str()) {
            (&Method::POST, "/completions") => {
                handlers::completions(state, request, Draft::new(id)).await
            }
            (&Method::POST, "/embeddings") => {
                handlers::embeddings(state, request, Draft::new(id)).await
            }
            (&Method::GET, "/healthz") => handlers::healthz(&id),
            (&Method::GET, "/admin/plugins") => admin::plugins(state, request, &id),
            (&Method::GET, p) if p.starts_with("/invocations/") => {
                let invocation_id = p["/invocations/".len()..].to_owned();
                handlers::invocation(state, request, &invocation_id, id).await
            }
            (_, "/completions" | "/embeddings") => {
                error_response(&ApiError::MethodNotAllowed("POST"), &id)
            }
            _ => error_response(
                &ApiError::NotFound(format!("no such endpoint: {path}")),
                &id,
            ),
        };
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
