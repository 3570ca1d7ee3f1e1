//! Calls answered whole: the plugin's completion or embeddings, charged, cached, judged by
//! the guards, and written by the surface's codec as one JSON body (or, for a stream held
//! for its guards, as the frames its stream would have sent); a token count; a rerank, its
//! ranking held to the contract whatever the plugin answered; images, recorded without their
//! bytes; a transcript.

use std::sync::Arc;

use super::call::{Call, PricedAs};
use super::guard::Guards;
use super::record::Draft;
use super::stream::redact_completion;
use super::{
    Answering, CompletionCodec, CountCodec, Drawing, Drawn, EmbeddingCodec, Images, Picture,
    Ranked, Reply, Rerank, Transcribe, Whole, Written,
};
use crate::error::ApiError;
use crate::plugins::types;
use crate::state::AppState;
use crate::store::TokenUsage;
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
    let usage = completion.usage.as_ref().map(TokenUsage::from);
    let charged = call.settle(draft, usage, answer).await;
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
    let usage = result.usage.as_ref().map(TokenUsage::from);
    let charged = call.settle(draft, usage, answer).await;
    if let Some(caching) = &caching {
        let kept = crate::cache::Answer::Embeddings(result.clone());
        caching.store(state, kept, charged.cost_usd).await;
    }
    let id = draft.id().to_string();
    let text = codec.embeddings(&call.envelope(&id), &result.vectors, charged.metered());
    Ok(Reply::Json(text, call.answer_headers()))
}

/// A rerank: the query and documents the guards let through (as texts, the query first),
/// ordered by the plugin, its answer held to the contract before the surface writes it.
pub(super) async fn rerank(
    state: &Arc<AppState>,
    draft: &mut Draft,
    mut call: Call,
    guards: Guards<'_>,
    rerank: Rerank,
) -> Result<Reply, ApiError> {
    let Rerank {
        query,
        documents,
        top_n,
        return_documents,
        codec,
    } = rerank;
    let params = guards.params.to_owned();
    let mut texts = Vec::with_capacity(documents.len().saturating_add(1));
    texts.push(query);
    texts.extend(documents);
    // The guards keep the number of texts, so the query is still the first.
    let mut texts = guards
        .check_embedding(state, draft, texts)
        .await?
        .into_iter();
    let query = texts.next().unwrap_or_default();
    let documents: Vec<String> = texts.collect();
    let count = documents.len();
    let kept = return_documents.then(|| documents.clone());
    let request = types::RerankRequest {
        route: types::Route::default(),
        model: call.leg().model.clone(),
        query,
        documents,
        top_n,
        params,
    };
    let result = call.rerank(&state.runtime, request).await;
    let result = result.and_then(|mut reranking| {
        ranked(&mut reranking, count, top_n)?;
        Ok(reranking)
    });
    if result.is_err() {
        call.record_tries(draft);
    }
    let reranking = result?;
    let answer = Some(Answer::default());
    let mut usage = reranking.usage.as_ref().map(TokenUsage::from);
    if let Some(units) = reranking.search_units {
        usage.get_or_insert_with(TokenUsage::default).search_units = Some(units);
    }
    let charged = call.settle(draft, usage, answer).await;
    let id = draft.id().to_string();
    let answer = Ranked {
        results: &reranking.results,
        documents: kept.as_deref(),
        search_units: reranking.search_units,
        // Tokens only where the provider counted them: search units alone are no usage.
        usage: charged.metered().filter(|_| reranking.usage.is_some()),
    };
    let text = codec(&call.envelope(&id), &answer);
    Ok(Reply::Json(text, call.answer_headers()))
}

/// Images: the prompt the guards let through, drawn by the plugin, answered with their bytes
/// (or URLs) and recorded with a summary of each in its place.
pub(super) async fn images(
    state: &Arc<AppState>,
    draft: &mut Draft,
    mut call: Call,
    guards: Guards<'_>,
    images: Images,
) -> Result<Reply, ApiError> {
    let Images {
        prompt,
        n,
        size,
        quality,
        urls,
        codec,
    } = images;
    let params = guards.params.to_owned();
    let prompt = guards.check_embedding(state, draft, vec![prompt]).await?;
    let request = types::ImageRequest {
        route: types::Route::default(),
        model: call.leg().model.clone(),
        prompt: prompt.into_iter().next().unwrap_or_default(),
        n,
        size: size.clone(),
        quality: quality.clone(),
        params,
    };
    let result = call.generate_images(&state.runtime, request).await;
    let result = result.and_then(|made| drawn(&made, n).map(|()| made));
    if result.is_err() {
        call.record_tries(draft);
    }
    let made = result?;
    let mut usage = made
        .usage
        .as_ref()
        .map(TokenUsage::from)
        .unwrap_or_default();
    usage.images = u32::try_from(made.images.len()).ok();
    let size = made.size.as_deref().or(size.as_deref());
    let quality = made.quality.as_deref().or(quality.as_deref());
    let price = PricedAs::Image { size, quality };
    let answer = Some(Answer::default());
    let charged = call.settle_as(draft, Some(usage), answer, price).await;
    let id = draft.id().to_string();
    let envelope = call.envelope(&id);
    let created = u64::try_from(crate::clock::now_ms() / 1000).unwrap_or_default();
    let tokens = charged.metered().filter(|_| made.usage.is_some());
    let answer = |picture: fn(&types::GeneratedImage, bool) -> Picture| Drawn {
        images: (made.images.iter())
            .map(|image| Drawing {
                picture: picture(image, urls),
                revised_prompt: image.revised_prompt.as_deref(),
            })
            .collect(),
        created,
        size,
        quality,
        usage: tokens,
    };
    let body = codec(&envelope, &answer(picture));
    let record = codec(&envelope, &answer(summary));
    Ok(Reply::Whole {
        body,
        content_type: "application/json",
        record,
        headers: call.answer_headers(),
    })
}

/// A transcription: the uploaded audio written down by the plugin, answered in the format the
/// surface's codec writes. The guards see no audio, and do not judge the transcript.
pub(super) async fn transcribe(
    state: &Arc<AppState>,
    draft: &mut Draft,
    mut call: Call,
    params: String,
    transcribe: Transcribe,
) -> Result<Reply, ApiError> {
    let Transcribe {
        audio,
        file_name,
        media_type,
        translate,
        codec,
    } = transcribe;
    let request = types::TranscriptionRequest {
        route: types::Route::default(),
        model: call.leg().model.clone(),
        audio,
        file_name,
        media_type,
        translate,
        params,
    };
    let result = call.transcribe(&state.runtime, request).await;
    let result = result.and_then(|transcription| written(&transcription).map(|()| transcription));
    if result.is_err() {
        call.record_tries(draft);
    }
    let transcription = result?;
    let mut usage = (transcription.usage.as_ref())
        .map(TokenUsage::from)
        .unwrap_or_default();
    usage.audio_seconds = transcription.seconds;
    let charged = call
        .settle(draft, Some(usage), Some(Answer::default()))
        .await;
    let id = draft.id().to_string();
    let written = Written {
        transcription: &transcription,
        translate,
        usage: charged.metered().filter(|_| transcription.usage.is_some()),
        seconds: transcription.seconds,
    };
    let rendered = codec.answer(&call.envelope(&id), &written);
    Ok(Reply::Whole {
        record: rendered.body.clone(),
        body: rendered.body,
        content_type: rendered.content_type,
        headers: call.answer_headers(),
    })
}

/// Holds a plugin's transcript to the contract: its times are numbers, each stretch ending no
/// earlier than it starts (a subtitle file of them would not play otherwise).
fn written(transcription: &types::Transcription) -> Result<(), ApiError> {
    let stretches = (transcription.segments.iter()).chain(&transcription.words);
    for stretch in stretches {
        let (start, end) = (stretch.start, stretch.end);
        if !(start.is_finite() && end.is_finite() && 0.0 <= start && start <= end) {
            return Err(ApiError::ProviderFailed(format!(
                "the provider's transcript has a stretch from {start} to {end} seconds"
            )));
        }
    }
    if transcription
        .duration
        .is_some_and(|d| !d.is_finite() || d < 0.0)
    {
        return Err(ApiError::ProviderFailed(
            "the provider's transcript has a duration that is not a length".into(),
        ));
    }
    Ok(())
}

/// Holds a plugin's images to the contract: at least one, at most `n`, each bytes with an
/// image media type or a URL.
fn drawn(made: &types::Images, n: u32) -> Result<(), ApiError> {
    let count = made.images.len();
    if count == 0 || count > n as usize {
        return Err(ApiError::ProviderFailed(format!(
            "the provider made {count} images for a request of {n}"
        )));
    }
    for (i, image) in made.images.iter().enumerate() {
        let wrong = match (&image.source, image.media_type.as_deref()) {
            (types::Source::Bytes(bytes), _) if bytes.is_empty() => Some("no bytes".to_owned()),
            (types::Source::Bytes(_), Some(media_type)) if media_type.starts_with("image/") => None,
            (types::Source::Bytes(_), media_type) => {
                Some(format!("the media type {media_type:?}, not an image's"))
            }
            (types::Source::Url(url), _) if url.is_empty() => Some("an empty URL".to_owned()),
            (types::Source::Url(_), _) => None,
        };
        if let Some(wrong) = wrong {
            return Err(ApiError::ProviderFailed(format!(
                "the provider's image {i} has {wrong}"
            )));
        }
    }
    Ok(())
}

/// An image as the caller gets it: its bytes in base64, or as a `data:` URL when it asked for
/// URLs; the provider's URL as it is.
fn picture(image: &types::GeneratedImage, urls: bool) -> Picture {
    match &image.source {
        types::Source::Url(url) => Picture::Url(url.clone()),
        types::Source::Bytes(bytes) => {
            let data = crate::encoding::base64_encode(bytes);
            if urls {
                let media_type = image.media_type.as_deref().unwrap_or_default();
                Picture::Url(format!("data:{media_type};base64,{data}"))
            } else {
                Picture::Base64(data)
            }
        }
    }
}

/// An image as its record keeps it: what it was, never its bytes (the provider's URL, which
/// holds none, as it is).
fn summary(image: &types::GeneratedImage, _: bool) -> Picture {
    match &image.source {
        types::Source::Url(url) => Picture::Url(url.clone()),
        types::Source::Bytes(bytes) => Picture::Summary(serde_json::json!({
            "kind": "image",
            "media_type": image.media_type,
            "bytes": bytes.len(),
            "sha256": crate::encoding::sha256_hex(bytes),
        })),
    }
}

/// Holds a plugin's ranking of `documents` documents to the contract the caller relies on:
/// each index a document's and at most once, each score a number; then the most relevant
/// first (ties in the plugin's order), at most `top_n`.
fn ranked(
    reranking: &mut types::Reranking,
    documents: usize,
    top_n: Option<u32>,
) -> Result<(), ApiError> {
    let mut seen = vec![false; documents];
    for result in &reranking.results {
        let index = result.index;
        let wrong = match seen.get_mut(index as usize) {
            None => Some(format!("a document {index} of {documents}")),
            Some(true) => Some(format!("document {index} twice")),
            Some(seen) => {
                *seen = true;
                None
            }
        };
        if let Some(wrong) = wrong {
            return Err(ApiError::ProviderFailed(format!(
                "the provider ranked {wrong}"
            )));
        }
        if !result.relevance_score.is_finite() {
            return Err(ApiError::ProviderFailed(format!(
                "the provider scored document {index} {}",
                result.relevance_score
            )));
        }
    }
    let results = &mut reranking.results;
    results.sort_by(|a, b| b.relevance_score.total_cmp(&a.relevance_score));
    if let Some(top_n) = top_n {
        results.truncate(usize::try_from(top_n).unwrap_or(usize::MAX));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reranking(results: &[(u32, f64)]) -> types::Reranking {
        types::Reranking {
            model: "m".into(),
            results: (results.iter())
                .map(|&(index, relevance_score)| types::RerankResult {
                    index,
                    relevance_score,
                })
                .collect(),
            usage: None,
            search_units: None,
        }
    }

    fn order(reranking: &types::Reranking) -> Vec<u32> {
        reranking.results.iter().map(|r| r.index).collect()
    }

    #[test]
    fn a_ranking_is_sorted_by_score_and_cut_to_top_n() {
        let mut answer = reranking(&[(0, 0.1), (1, 0.9), (2, 0.5), (3, 0.5)]);
        ranked(&mut answer, 4, None).unwrap();
        assert_eq!(order(&answer), [1, 2, 3, 0]);
        ranked(&mut answer, 4, Some(2)).unwrap();
        assert_eq!(order(&answer), [1, 2]);
    }

    #[test]
    fn a_ranking_of_documents_that_are_not_there_is_refused() {
        for (results, why) in [
            (&[(0, 0.1), (2, 0.2)][..], "ranked a document 2 of 2"),
            (&[(1, 0.1), (1, 0.2)][..], "ranked document 1 twice"),
            (&[(0, f64::NAN)][..], "scored document 0 NaN"),
        ] {
            let error = ranked(&mut reranking(results), 2, None).unwrap_err();
            assert!(
                matches!(&error, ApiError::ProviderFailed(message) if message.ends_with(why)),
                "{error:?}"
            );
        }
    }
}
