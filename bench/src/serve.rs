//! The accept loop both bench servers (the fake upstream and the bare proxy)
//! share, so the two differ only in what they answer.

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

type BoxError = Box<dyn Error + Send + Sync>;

/// Binds `listen`, announces `http://ADDR` on stdout as `bench {name}
/// listening on …` (the parent process reads the address from that line), and
/// serves every connection over HTTP/1.1 with the service `make_service`
/// builds for it, until the process is terminated.
pub async fn serve<F, S, B>(listen: SocketAddr, name: &str, make_service: F) -> Result<(), String>
where
    F: Fn() -> S,
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    println!("bench {name} listening on http://{addr}");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors under a connection storm: back off, don't spin.
                eprintln!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = make_service();
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
