//! Calls answered whole: the plugin's completion or embeddings, charged, cached, judged by
//! the guards, and written by the surface's codec as one JSON body (or, for a stream held
//! for its guards, as the frames its stream would have sent).

use std::sync::Arc;

use super::call::Call;
use super::record::Draft;
use super::stream::redact_completion;
use super::{Answering, CompletionCodec, CountCodec, EmbeddingCodec, Reply, Whole};
use crate::error::ApiError;
use crate::plugins::types;
use crate::state::AppState;
use crate::traces::Answer;

/// A completion, answered once the plugin's answer is whole.
pub(super) async fn complete<C: CompletionCodec>(
    state: &Arc<AppState>,
    draft: &mut Draft,
    mut call: Call,
    request: types::CompletionRequest,
    answering: Answering<C>,
) -> Result<Reply, ApiError> {
    let Answering {
        codec,
        mut guarded,
        caching,
        stream,
    } = answering;
    let completion = call.complete(&state.runtime, request).await;
    if completion.is_err() {
        call.record_tries(draft);
    }
    let completion = completion?;
    let answer = Some(Answer::of(&completion));
    let charged = call.settle(draft, completion.usage.as_ref(), answer).await;
    if let Some(caching) = &caching {
        let mut kept = completion.clone();
        redact_completion(draft.current_secrets(), &mut kept);
        let kept = crate::cache::Answer::Completion(kept);
        caching.store(state, kept, charged.cost_usd).await;
    }
    let completion = match &mut guarded {
        Some(guarded) => guarded.check_answer(state, draft, completion).await?,
        None => completion,
    };
    let id = draft.id().to_string();
    let whole = Whole {
        codec,
        envelope: call.envelope(&id),
        completion,
        usage: charged.metered(),
        stream,
    };
    Ok(whole.reply(state, draft, call.answer_headers()).await)
}

/// A token count: nothing generated, nothing charged (no provider bills one).
pub(super) async fn count(
    state: &Arc<AppState>,
    draft: &mut Draft,
    mut call: Call,
    request: types::CompletionRequest,
    codec: CountCodec,
) -> Result<Reply, ApiError> {
    let result = call.count_tokens(&state.runtime, request).await;
    if result.is_err() {
        call.record_tries(draft);
    }
    let count = result?;
    call.settle(draft, None, Some(Answer::default())).await;
    let id = draft.id().to_string();
    let text = codec(&call.envelope(&id), count);
    Ok(Reply::Json(text, call.answer_headers()))
}

/// Embeddings: the plugin's vectors, one for each input.
pub(super) async fn embed<E: EmbeddingCodec>(
    state: &Arc<AppState>,
    draft: &mut Draft,
    mut call: Call,
    request: types::EmbeddingRequest,
    codec: E,
    caching: Option<super::cache::Caching>,
) -> Result<Reply, ApiError> {
    let inputs = request.input.len();
    let result = call.embed(&state.runtime, request).await;
    if result.is_err() {
        call.record_tries(draft);
    }
    let result = result?;
    if result.vectors.len() != inputs {
        call.record_tries(draft);
        return Err(ApiError::ProviderFailed(format!(
            "the provider returned {} embeddings for {inputs} inputs",
            result.vectors.len(),
        )));
    }
    let answer = Some(Answer::default());
    let charged = call.settle(draft, result.usage.as_ref(), answer).await;
    if let Some(caching) = &caching {
        let kept = crate::cache::Answer::Embeddings(result.clone());
        caching.store(state, kept, charged.cost_usd).await;
    }
    let id = draft.id().to_string();
    let text = codec.embeddings(&call.envelope(&id), &result.vectors, charged.metered());
    Ok(Reply::Json(text, call.answer_headers()))
}
