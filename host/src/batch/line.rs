//! One line of a batch, run through the flow and kept as its line of the output.

use std::sync::Arc;

use http_body_util::BodyExt as _;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request};
use serde_json::Value;

use crate::clock::now_ms;
use crate::flow::{self, Line, LineAnswer};
use crate::state::AppState;
use crate::store::{LeasedLine, RunningBatch};
use crate::surfaces::{anthropic, openai};

/// Runs `leased` of `batch` as the batch's key and keeps its answer if `owner` still holds it.
pub(super) async fn run(
    state: Arc<AppState>,
    owner: String,
    batch: Arc<RunningBatch>,
    leased: LeasedLine,
) {
    let seq = leased.seq;
    if let Err(e) = answer(&state, &owner, &batch, leased).await {
        // Its lease runs out and a runner takes it again.
        tracing::warn!(
            batch = batch.id,
            line = seq,
            "a batch line's answer was not kept: {e}"
        );
    }
}

async fn answer(
    state: &Arc<AppState>,
    owner: &str,
    batch: &RunningBatch,
    leased: LeasedLine,
) -> Result<(), crate::store::StoreError> {
    let LeasedLine {
        seq,
        custom_id,
        body,
    } = leased;
    let messages = batch.endpoint == anthropic::batches::ENDPOINT;
    let Ok(key_hash) = <[u8; 32]>::try_from(batch.key_hash.as_slice()) else {
        let why = "the batch's key is unreadable";
        let result = if messages {
            anthropic::batches::failed_line(&custom_id, why)
        } else {
            openai::batches::failed_line(&custom_id, "invalid_batch", why)
        };
        let kept = (state.store)
            .end_line(&batch.id, seq, owner, false, result)
            .await?;
        if kept {
            state
                .metrics
                .batch_lines(super::api(&batch.endpoint), "failed", 1);
        }
        return Ok(());
    };
    let mut request = Request::new(());
    *request.method_mut() = Method::POST;
    *request.uri_mut() = hyper::Uri::from_static(endpoint_path(&batch.endpoint));
    request
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let (head, ()) = request.into_parts();
    let line = Line {
        head,
        body: body.into(),
        key_hash,
        batch_id: batch.id.clone(),
        custom_id: custom_id.clone(),
    };
    let LineAnswer {
        invocation_id,
        response,
        again_after,
    } = match batch.endpoint.as_str() {
        "/v1/chat/completions" => flow::run_line::<openai::ChatCompletions>(state, line).await,
        "/v1/completions" => flow::run_line::<openai::Completions>(state, line).await,
        "/v1/embeddings" => flow::run_line::<openai::Embeddings>(state, line).await,
        anthropic::batches::ENDPOINT => flow::run_line::<anthropic::Messages>(state, line).await,
        _ => flow::run_line::<openai::Responses>(state, line).await,
    };
    let api = super::api(&batch.endpoint);
    if let Some(wait) = again_after {
        let not_before = now_ms().saturating_add(i64::try_from(wait.as_millis()).unwrap_or(0));
        state.metrics.batch_lines(api, "retried", 1);
        return state
            .store
            .release_line(&batch.id, seq, owner, not_before)
            .await;
    }
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            // An answer cut short (shutdown half way): run it again.
            tracing::warn!(
                batch = batch.id,
                line = seq,
                "a batch line's answer broke off: {e}"
            );
            state.metrics.batch_lines(api, "retried", 1);
            return state
                .store
                .release_line(&batch.id, seq, owner, now_ms())
                .await;
        }
    };
    let body = serde_json::from_slice::<Value>(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let result = if messages {
        anthropic::batches::result_line(&custom_id, status.is_success(), body)
    } else {
        openai::batches::output_line(&invocation_id, &custom_id, status.as_u16(), body)
    };
    let kept = state
        .store
        .end_line(&batch.id, seq, owner, status.is_success(), result)
        .await?;
    if kept {
        let result = if status.is_success() {
            "succeeded"
        } else {
            "failed"
        };
        state.metrics.batch_lines(api, result, 1);
    } else {
        tracing::warn!(
            batch = batch.id,
            line = seq,
            "another gateway took this batch line over (its lease ran out): this answer is not kept"
        );
    }
    Ok(())
}

/// The batch's endpoint as a static path (one a batch may name).
fn endpoint_path(endpoint: &str) -> &'static str {
    (openai::batches::ENDPOINTS.into_iter())
        .chain([anthropic::batches::ENDPOINT])
        .find(|known| *known == endpoint)
        .unwrap_or("/v1/responses")
}
