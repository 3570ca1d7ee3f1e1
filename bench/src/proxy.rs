//! The baseline: a bare hyper reverse proxy that forwards every request to the
//! upstream over pooled keep-alive connections and streams the answer back.
//!
//! It does what any gateway must do at the least (accept, parse, forward,
//! relay), on tokio's stock multi-threaded runtime with its default worker
//! count (the gateway now runs one single-threaded runtime per worker), so the
//! difference between the two is what the gateway's own work costs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{CONNECTION, HOST, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

type UpstreamClient = Client<HttpConnector, Incoming>;

/// Serves on `listen`, forwarding to `upstream`, until the process is terminated.
pub fn run(listen: SocketAddr, upstream: SocketAddr) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: UpstreamClient = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        let authority = HeaderValue::from_str(&upstream.to_string())
            .map_err(|e| format!("bad upstream address: {e}"))?;

        crate::serve::serve(listen, "proxy", move || {
            let client = client.clone();
            let authority = authority.clone();
            service_fn(move |request| forward(client.clone(), authority.clone(), upstream, request))
        })
        .await
    })
}

async fn forward(
    client: UpstreamClient,
    authority: HeaderValue,
    upstream: SocketAddr,
    request: Request<Incoming>,
) -> Result<Response<Either<Incoming, Full<Bytes>>>, Infallible> {
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    parts.uri = match Uri::try_from(format!("http://{upstream}{path}")) {
        Ok(uri) => uri,
        Err(_) => return Ok(error(StatusCode::BAD_REQUEST, "bad request target")),
    };
    parts.headers.insert(HOST, authority);
    // Hop-by-hop: the proxy manages its own connections.
    parts.headers.remove(CONNECTION);
    match client.request(Request::from_parts(parts, body)).await {
        Ok(response) => Ok(response.map(Either::Left)),
        Err(e) => {
            eprintln!("upstream request failed: {e}");
            Ok(error(StatusCode::BAD_GATEWAY, "upstream request failed"))
        }
    }
}

fn error(status: StatusCode, text: &'static str) -> Response<Either<Incoming, Full<Bytes>>> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from_static(
        text.as_bytes(),
    ))));
    *response.status_mut() = status;
    response
}
