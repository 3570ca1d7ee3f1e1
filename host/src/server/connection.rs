//! One client connection's deadlines, HTTP/1.1 and HTTP/2 alike: its first request must
//! arrive within `request_read_timeout_secs` of the accept, and once none is in flight it is
//! closed `client_idle_timeout_secs` after its last answer. A socket that sends nothing, or a
//! preface and nothing, so cannot hold a `max_connections` slot for longer than that.
//!
//! hyper has neither deadline for HTTP/2 nor for a connection still telling HTTP/1 from
//! HTTP/2 (its HTTP/1 header timeout starts only once HTTP/1 is known), hence this watch.

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use hyper_util::server::graceful::GracefulConnection;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::http::Body;

/// Once a deadline passed, how long the connection has to close by itself (an HTTP/2 client
/// reads its GOAWAY) before it is dropped.
const LINGER: Duration = Duration::from_secs(1);

/// One request more begun, in [`Activity`]'s high half.
const BEGUN: u64 = 1 << 32;
/// The requests in flight, [`Activity`]'s low half.
const IN_FLIGHT: u64 = BEGUN - 1;

/// The requests of one connection: how many began (high 32 bits, wrapping) and how many are
/// in flight (low 32 bits), in one word so that a request costs one atomic add when it
/// begins and one subtract when its answer is sent.
#[derive(Default)]
pub(super) struct Activity(AtomicU64);

impl Activity {
    /// A request began: it is in flight until the guard, moved into its answer's body
    /// ([`Tracked`]), is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.0.fetch_add(BEGUN + 1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    fn load(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A request in flight on its connection.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An answer's body, whose request stays in flight until hyper has sent it all (or the
/// client left): a stream keeps its connection open however long it is quiet.
pub(super) struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl Tracked {
    pub(super) fn new(body: Body, in_flight: InFlight) -> Tracked {
        Tracked {
            body,
            _in_flight: in_flight,
        }
    }
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = crate::http::BodyCut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, crate::http::BodyCut>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// How long a connection may wait for its first request, and then between requests.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    pub first_request: Duration,
    pub idle: Duration,
}

/// Serves `connection` until it ends. It is closed gracefully (requests in flight finish;
/// HTTP/2 says GOAWAY) when `stop` changes, or when a deadline passes with no request in
/// flight; dropped if it has not closed [`LINGER`] later with still none in flight.
///
/// The deadline moves only when the connection task sees its last request end (one timer
/// reset per request on HTTP/1.1, like hyper's own header timer it replaces); a deadline that
/// passes with requests in flight is set again `idle` later.
pub(super) async fn serve<C: GracefulConnection>(
    connection: C,
    activity: &Activity,
    deadlines: Deadlines,
    mut stop: watch::Receiver<()>,
) -> Result<(), C::Error> {
    let mut connection = pin!(connection);
    // The receiver lives as long as the connection: shutdown waits for every one to go.
    let mut stopped = pin!(stop.changed());
    let mut stop_seen = false;
    let mut timer = pin!(tokio::time::sleep(deadlines.first_request));
    let mut seen = activity.load();
    let mut closing = false;
    poll_fn(|cx| {
        if !stop_seen && stopped.as_mut().poll(cx).is_ready() {
            stop_seen = true;
            if !closing {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
        loop {
            if let Poll::Ready(result) = connection.as_mut().poll(cx) {
                return Poll::Ready(result);
            }
            let now = activity.load();
            if now != seen {
                seen = now;
                if !closing && now & IN_FLIGHT == 0 {
                    timer.as_mut().reset(Instant::now() + deadlines.idle);
                }
            }
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if activity.load() & IN_FLIGHT != 0 {
                let wait = if closing { LINGER } else { deadlines.idle };
                timer.as_mut().reset(Instant::now() + wait);
                continue;
            }
            if closing {
                return Poll::Ready(Ok(()));
            }
            closing = true;
            connection.as_mut().graceful_shutdown();
            timer.as_mut().reset(Instant::now() + LINGER);
        }
    })
    .await
}
