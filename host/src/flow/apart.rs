//! A request's flow on the heap, polled by its caller's future while the caller waits. hyper
//! drops that future when the caller disconnects; the flow then moves to a task of its own,
//! runs to its end, and is recorded (`cancelled`, status 499, charged what it used): a call cut
//! off there would leave no record and charge nothing of what its upstream still bills.
//!
//! Boxed (one copy of its future, into the box), the flow moves as a pointer; a task spawned for
//! every request instead would copy its future into the task and through the task's stages
//! (callgrind: ~90k instructions of memcpy a request, +20%), and wake a second task, to serve
//! the few callers who leave.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tracing::Instrument;

use super::record::{CLIENT_CLOSED_REQUEST, Draft};
use super::{Reply, Surface};
use crate::error::ApiError;
use crate::state::AppState;

/// What a flow ends with: its draft, and how it went.
pub(super) type Ended = (Draft, Result<Reply, ApiError>);

/// A flow that outlives its caller: see the module's doc.
pub(super) struct Flowing<S, F>
where
    S: Surface,
    F: Future<Output = Ended> + Send + 'static,
{
    /// `None` once it ended.
    work: Option<Pin<Box<F>>>,
    state: Arc<AppState>,
    surface: PhantomData<fn() -> S>,
}

impl<S, F> Flowing<S, F>
where
    S: Surface,
    F: Future<Output = Ended> + Send + 'static,
{
    pub fn new(state: Arc<AppState>, work: Pin<Box<F>>) -> Self {
        Flowing {
            work: Some(work),
            state,
            surface: PhantomData,
        }
    }
}

impl<S, F> Future for Flowing<S, F>
where
    S: Surface,
    F: Future<Output = Ended> + Send + 'static,
{
    type Output = Ended;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended> {
        // Polled again after its end (which a caller does not do), it never ends again.
        let Some(work) = self.work.as_mut() else {
            return Poll::Pending;
        };
        let ended = ready!(work.as_mut().poll(cx));
        self.work = None;
        Poll::Ready(ended)
    }
}

impl<S, F> Drop for Flowing<S, F>
where
    S: Surface,
    F: Future<Output = Ended> + Send + 'static,
{
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        // Without a runtime the process is going away, and the flow with it; shutdown ended
        // it (recorded) before that.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let state = self.state.clone();
        let apart = state.apart();
        // The request's span: tracing enters it while its future is dropped.
        let span = tracing::Span::current();
        runtime.spawn(
            async move {
                let (draft, result) = work.await;
                let started = draft.started();
                drop(super::finish::<S>(&state, draft, result, true).await);
                // The access log's line, which the caller's side no longer writes; its status
                // is nginx's for a caller who closed the connection first.
                tracing::info!(
                    status = CLIENT_CLOSED_REQUEST,
                    elapsed_us = started.elapsed().as_micros() as u64,
                    "the caller left before the answer"
                );
                drop(apart);
            }
            .instrument(span),
        );
    }
}
