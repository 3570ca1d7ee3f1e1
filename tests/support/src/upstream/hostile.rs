//! A fake upstream for the hostile plugin: answers that no real provider
//! sends but a broken or malicious one could.
//!
//! It decides by the request path:
//!
//! - `…/huge`: a body of [`HostileUpstream::huge_bytes`] bytes (gigabytes
//!   by default) with its `content-length`, produced lazily 64 KiB at a time,
//!   so the fake itself holds none of it. The bytes actually handed to the
//!   socket are counted ([`HostileUpstream::huge_bytes_sent`]).
//! - `/trickle/…/endless`: a body that never ends, one short chunk
//!   (`tick N `) every [`TRICKLE_GAP`], forever.
//! - any other `…/endless`: [`STALL_CHUNKS`] chunks, then silence with the
//!   connection held open, forever.
//! - anything else: `200 ok`.
//!
//! Every request is counted by path. Like [`super::FakeUpstream`], it runs on the
//! shared HTTP server of the fakes, so it keeps serving while a test blocks.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::{Request, Response};

use super::server::{FakeServer, Handler, lock};

/// Size of each piece of a huge body.
const HUGE_PIECE: usize = 64 * 1024;
/// Default size of a huge body: far more than any test lets a plugin read.
pub const DEFAULT_HUGE_BYTES: u64 = 8 << 30;
/// Pause between the chunks of a trickling endless stream.
pub const TRICKLE_GAP: Duration = Duration::from_millis(100);
/// Chunks a stalling endless stream sends before it goes silent.
pub const STALL_CHUNKS: u64 = 3;

#[derive(Debug, Default)]
struct Stats {
    /// Requests by path.
    requests: Mutex<HashMap<String, u64>>,
    /// Connections accepted.
    connections: AtomicU64,
    /// Bytes of huge bodies handed to hyper.
    huge_sent: AtomicU64,
    /// Chunks of endless bodies handed to hyper.
    endless_chunks: AtomicU64,
    /// Bodies of any kind dropped, at their end or because the client left.
    bodies_dropped: AtomicU64,
}

/// The server side: what it serves and what happened.
struct Upstream {
    stats: Arc<Stats>,
    huge_bytes: u64,
}

/// The running fake; stops when dropped.
pub struct HostileUpstream {
    stats: Arc<Stats>,
    huge_bytes: u64,
    server: FakeServer,
}

impl HostileUpstream {
    /// Huge bodies are [`DEFAULT_HUGE_BYTES`] long.
    pub fn start() -> HostileUpstream {
        Self::with_huge_bytes(DEFAULT_HUGE_BYTES)
    }

    /// Huge bodies are `huge_bytes` long.
    pub fn with_huge_bytes(huge_bytes: u64) -> HostileUpstream {
        let stats = Arc::new(Stats::default());
        let upstream = Upstream {
            stats: stats.clone(),
            huge_bytes,
        };
        HostileUpstream {
            stats,
            huge_bytes,
            server: FakeServer::start("hostile-upstream", Arc::new(upstream)),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `http://127.0.0.1:PORT<prefix>`; prefix `/trickle` makes endless
    /// streams trickle instead of stalling.
    pub fn base_url(&self, prefix: &str) -> String {
        self.server.base_url(prefix)
    }

    /// The length of the huge bodies it serves.
    pub fn huge_bytes(&self) -> u64 {
        self.huge_bytes
    }

    /// Requests received whose path ends with `suffix`.
    pub fn requests_ending_with(&self, suffix: &str) -> u64 {
        lock(&self.stats.requests)
            .iter()
            .filter(|(path, _)| path.ends_with(suffix))
            .map(|(_, count)| count)
            .sum()
    }

    /// Requests received, of any path.
    pub fn total_requests(&self) -> u64 {
        self.requests_ending_with("")
    }

    /// Connections accepted.
    pub fn connections(&self) -> u64 {
        self.stats.connections.load(Ordering::Relaxed)
    }

    /// Bytes of huge bodies handed to the connection so far.
    pub fn huge_bytes_sent(&self) -> u64 {
        self.stats.huge_sent.load(Ordering::Relaxed)
    }

    /// Chunks of endless bodies handed to the connection so far.
    pub fn endless_chunks(&self) -> u64 {
        self.stats.endless_chunks.load(Ordering::Relaxed)
    }

    /// Response bodies dropped (finished, or abandoned by the client).
    pub fn bodies_dropped(&self) -> u64 {
        self.stats.bodies_dropped.load(Ordering::Relaxed)
    }
}

impl Handler for Upstream {
    type Body = HostileBody;

    fn connected(&self) {
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<HostileBody> {
        let path = request.uri().path().to_owned();
        *lock(&self.stats.requests).entry(path.clone()).or_default() += 1;
        let (content_type, kind) = if path.ends_with("/huge") {
            (
                "application/octet-stream",
                Kind::Huge {
                    left: self.huge_bytes,
                },
            )
        } else if path.ends_with("/endless") && path.starts_with("/trickle/") {
            (
                "text/plain",
                Kind::Trickle {
                    next: Box::pin(tokio::time::sleep(TRICKLE_GAP)),
                    sent: 0,
                },
            )
        } else if path.ends_with("/endless") {
            ("text/plain", Kind::Stall { sent: 0 })
        } else {
            ("text/plain", Kind::Small(Some(Bytes::from_static(b"ok"))))
        };
        let mut response = Response::builder()
            .status(200)
            .header("content-type", content_type);
        if let Kind::Huge { left } = kind {
            response = response.header("content-length", left);
        }
        response
            .body(HostileBody {
                kind,
                stats: self.stats.clone(),
            })
            .expect("valid response")
    }
}

enum Kind {
    Small(Option<Bytes>),
    Huge {
        left: u64,
    },
    Trickle {
        next: Pin<Box<tokio::time::Sleep>>,
        sent: u64,
    },
    Stall {
        sent: u64,
    },
}

struct HostileBody {
    kind: Kind,
    stats: Arc<Stats>,
}

/// The zeros every piece of a huge body shares.
fn huge_piece() -> Bytes {
    static PIECE: [u8; HUGE_PIECE] = [0; HUGE_PIECE];
    Bytes::from_static(&PIECE)
}

impl Body for HostileBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match &mut this.kind {
            Kind::Small(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Huge { left } => {
                if *left == 0 {
                    return Poll::Ready(None);
                }
                let size = (*left).min(HUGE_PIECE as u64);
                *left -= size;
                this.stats.huge_sent.fetch_add(size, Ordering::Relaxed);
                // `size` is at most HUGE_PIECE, so it fits a usize.
                let piece = huge_piece().slice(..size as usize);
                Poll::Ready(Some(Ok(Frame::data(piece))))
            }
            Kind::Trickle { next, sent } => {
                if next.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                next.as_mut()
                    .reset(tokio::time::Instant::now() + TRICKLE_GAP);
                *sent += 1;
                this.stats.endless_chunks.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!("tick {sent} "))))))
            }
            Kind::Stall { sent } => {
                if *sent >= STALL_CHUNKS {
                    // Silence: no waker is kept, so this body never produces
                    // another frame; hyper drops it when the client leaves.
                    return Poll::Pending;
                }
                *sent += 1;
                this.stats.endless_chunks.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!("tick {sent} "))))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Small(bytes) => bytes.is_none(),
            Kind::Huge { left } => *left == 0,
            Kind::Trickle { .. } | Kind::Stall { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Small(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Kind::Small(None) => SizeHint::with_exact(0),
            Kind::Huge { left } => SizeHint::with_exact(*left),
            Kind::Trickle { .. } | Kind::Stall { .. } => SizeHint::default(),
        }
    }
}

impl Drop for HostileBody {
    fn drop(&mut self) {
        self.stats.bodies_dropped.fetch_add(1, Ordering::Relaxed);
    }
}
