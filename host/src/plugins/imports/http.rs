//! The `http` import: a plugin's only way out of its sandbox. Requests go
//! only to the hosts its route allows, within the route's limits, over the
//! route's connection pools ([`crate::plugins::upstream::Upstream`]), one per serving
//! thread.

use std::pin::Pin;
use std::task::{Context, Poll};

use wasmtime::component::Resource;

use super::PluginState;
use crate::plugins::upstream::{AnswerBody, Outgoing, SendError, Upstream};
use crate::plugins::wit::http;

const TRACEPARENT: ::http::HeaderName = ::http::HeaderName::from_static("traceparent");
const TRACESTATE: ::http::HeaderName = ::http::HeaderName::from_static("tracestate");

/// A spawned task that ends with whoever awaits it (a cancelled plugin call
/// must not leave its upstream request running).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One upstream response body being read by a plugin.
pub struct IncomingBody {
    body: AnswerBody,
    read: u64,
}

fn transport_error(error: SendError) -> http::HttpError {
    if error.timed_out {
        http::HttpError::Timeout(error.message)
    } else {
        http::HttpError::Transport(error.message)
    }
}

impl http::Host for PluginState {
    async fn send(&mut self, request: http::Request) -> Result<http::Response, http::HttpError> {
        let upstream = &self.sandbox.upstream;
        let target = upstream
            .parse_url(&request.url)
            .map_err(|e| http::HttpError::InvalidRequest(format!("bad URL: {e}")))?;
        self.http_requests += 1;
        if self.http_requests > self.sandbox.limits.max_http_requests {
            tracing::warn!(invocation_id = %self.invocation_id, plugin = %self.plugin,
                "plugin exceeded its outbound request limit");
            return Err(http::HttpError::ForbiddenHost(format!(
                "more than {} upstream requests in one call",
                self.sandbox.limits.max_http_requests
            )));
        }
        if !self.sandbox.allowed.permits(&target.url) {
            let host = target.url.host_str().unwrap_or("").to_owned();
            tracing::warn!(invocation_id = %self.invocation_id, plugin = %self.plugin, %host,
                "plugin tried to reach a host its route does not allow");
            return Err(http::HttpError::ForbiddenHost(host));
        }
        let method = ::http::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| http::HttpError::InvalidRequest("bad method".into()))?;
        let mut headers = ::http::HeaderMap::with_capacity(request.headers.len() + 1);
        for (name, value) in &request.headers {
            let name = ::http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| http::HttpError::InvalidRequest(format!("bad header name {name}")))?;
            let value = ::http::HeaderValue::from_str(value).map_err(|_| {
                // Never echo the value: it is often a key.
                http::HttpError::InvalidRequest(format!("bad value for header {name}"))
            })?;
            headers.append(name, value);
        }
        // The host's trace context wins over any a plugin set: it is the try's own.
        if let Some(trace) = &self.trace_headers {
            headers.insert(TRACEPARENT, trace.traceparent.clone());
            match &trace.tracestate {
                Some(state) => headers.insert(TRACESTATE, state.clone()),
                None => headers.remove(TRACESTATE),
            };
        }
        if let Some(credentials) = &target.basic_auth {
            headers
                .entry(::http::header::AUTHORIZATION)
                .or_insert_with(|| credentials.clone());
        }
        // What reqwest sent by default, which providers' examples assume.
        headers
            .entry(::http::header::ACCEPT)
            .or_insert(::http::HeaderValue::from_static("*/*"));
        let outgoing = Outgoing {
            method,
            headers,
            body: request.body,
        };
        let pending = Upstream::send(upstream.client(), target, outgoing);
        // Sending runs as a task of its own rather than on the plugin's fiber:
        // the HTTP client's deep call stack would otherwise stay resident in
        // every pooled fiber stack (1000 streams: 188 MiB instead of 173).
        let sending = AbortOnDrop(tokio::spawn(tokio::time::timeout(
            self.sandbox.limits.first_byte_timeout,
            pending,
        )));
        let response = sending
            .await
            .map_err(|e| http::HttpError::Transport(format!("the request task failed: {e}")))?
            .map_err(|_| http::HttpError::Timeout("no answer from the upstream".into()))?
            .map_err(|e| {
                let error = transport_error(e);
                if matches!(error, http::HttpError::Transport(_)) {
                    self.trace.note_transport_failure();
                }
                error
            })?;
        let status = response.status.as_u16();
        let headers = response
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = self
            .table
            .push(IncomingBody {
                body: response.body,
                read: 0,
            })
            .map_err(|e| http::HttpError::Transport(e.to_string()))?;
        Ok(http::Response {
            status,
            headers,
            body,
        })
    }
}

impl http::HostIncomingBody for PluginState {
    async fn read(
        &mut self,
        body: Resource<IncomingBody>,
    ) -> Result<Option<Vec<u8>>, http::HttpError> {
        let limits = self.sandbox.limits;
        let body = self
            .table
            .get_mut(&body)
            .map_err(|e| http::HttpError::InvalidRequest(e.to_string()))?;
        let chunk = tokio::time::timeout(limits.idle_timeout, body.body.chunk())
            .await
            .map_err(|_| http::HttpError::Timeout("the upstream stopped sending".into()))?
            .map_err(transport_error)?;
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        body.read += chunk.len() as u64;
        if body.read > limits.max_response_bytes {
            return Err(http::HttpError::TooLarge(limits.max_response_bytes));
        }
        Ok(Some(chunk.to_vec()))
    }

    async fn drop(&mut self, body: Resource<IncomingBody>) -> wasmtime::Result<()> {
        self.table.delete(body)?;
        Ok(())
    }
}
