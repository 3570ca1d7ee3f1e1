//! Reading OpenAI's answers: [`Decoder`] turns a chat or legacy completion, whole or event by
//! event, into the SDK's [`Answer`]; [`parse_embeddings`] reads `/embeddings`,
//! [`parse_rerank`] `/rerank`. Pure, so it is unit-tested natively.

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::sse::Event;
use gateway_plugin_sdk::{
    Answer, AudioSink, Embeddings, FinishReason, GeneratedImage, ImageRequest, Images,
    ProviderError, RerankResult, Reranking, Source, Speech, StreamDecoder, TokenCounts,
    TranscriptSegment, Transcription, Usage, embedded_error,
};
use serde_json::Value;

use crate::convert::RerankApi;
use crate::wire::{
    CompletionResponse, EmbeddingResponse, EmbeddingVector, ImagesResponse, RerankResponse,
    SpeechEvent, TeiRank, TranscriptionResponse, VoyageRerankResponse, WireUsage,
};

/// The decoder of chat and legacy completions. The format needs no state of its own: every
/// chunk names its choice, call and model.
#[derive(Default)]
pub struct Decoder;

impl StreamDecoder for Decoder {
    fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
        let response: CompletionResponse =
            serde_json::from_slice(body).map_err(ProviderError::malformed)?;
        if response.choices.is_empty()
            && let Some(error) = response.error.as_ref().filter(|e| !e.is_null())
        {
            return Err(embedded_error(error));
        }
        read(response, answer, true);
        answer.complete();
        Ok(())
    }

    fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            answer.end();
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        if event.event.as_deref() == Some("error") {
            let error = serde_json::from_str::<Value>(data)
                .map(|v| v.get("error").cloned().unwrap_or(v))
                .unwrap_or_else(|_| Value::String(data.to_owned()));
            return Err(embedded_error(&error));
        }
        let chunk: CompletionResponse =
            serde_json::from_str(data).map_err(ProviderError::malformed)?;
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            return Err(embedded_error(error));
        }
        read(chunk, answer, false);
        Ok(())
    }
}

/// Adds a whole answer (`whole`) or a stream chunk to `answer`.
fn read(response: CompletionResponse, answer: &mut Answer, whole: bool) {
    // Azure's first chunk has `"model": ""`, which `Answer::model` ignores.
    answer.model(response.model.as_deref().unwrap_or_default());
    // Groq repeats usage on the finishing chunk and the usage-only chunk; the last one wins.
    if let Some(wire) = &response.usage {
        answer.usage(usage(wire));
    }
    for choice in response.choices {
        let index = choice.index;
        let message = if whole { choice.message } else { choice.delta }.unwrap_or_default();
        // Before the text, which it came before. One of the two names: a server in the middle
        // of renaming the field may send both.
        let reasoning = (message.reasoning_content.filter(|text| !text.is_empty()))
            .or(message.reasoning.filter(|text| !text.is_empty()));
        if let Some(reasoning) = reasoning {
            answer.reasoning(index, 0, &reasoning);
        }
        // Also for empty text: registers the choice even if it never says anything.
        let text = message.content.or(choice.text).unwrap_or_default();
        answer.text(index, &text);
        for (position, call) in message.tool_calls.into_iter().enumerate() {
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            // Streamed pieces name their call, except on servers that send one call per piece
            // in order; a whole answer's calls are in order.
            let call_index = if whole {
                position
            } else {
                call.index.unwrap_or(position)
            };
            let function = match call.function {
                Some(function) => function,
                // A whole call of another kind (custom tools) has nothing the gateway can say.
                None if whole => continue,
                None => Default::default(),
            };
            let (name, arguments) = (function.name.as_deref(), function.arguments.as_deref());
            answer.tool_call(index, call_index, call.id.as_deref(), name, arguments);
        }
        if let Some(call) = message.function_call {
            answer.function_call(index, call.name.as_deref(), call.arguments.as_deref());
        }
        if let Some(logprobs) = choice.logprobs {
            answer.logprobs(index, logprobs);
        }
        // A finish reason completes a stream: some servers end it without `[DONE]`.
        if let Some(reason) = choice.finish_reason.as_deref() {
            answer.finish_reason(index, FinishReason::parse(reason));
            answer.complete();
        }
    }
}

/// Maps OpenAI's usage; a missing total is the sum of the parts. Cached tokens are included in
/// `prompt_tokens`, as the gateway's usage wants them; OpenAI-compatible APIs report no cache
/// writes (OpenAI's are free).
pub fn usage(wire: &WireUsage) -> Usage {
    let prompt = wire.prompt_tokens_details.as_ref();
    Usage::counted(TokenCounts {
        prompt: wire.prompt_tokens,
        completion: wire.completion_tokens,
        total: wire.total_tokens,
        cache_read: (prompt.and_then(|d| d.cached_tokens)).or(wire.prompt_cache_hit_tokens),
        audio_prompt: prompt.and_then(|d| d.audio_tokens),
        reasoning: (wire.completion_tokens_details.as_ref()).and_then(|d| d.reasoning_tokens),
        ..TokenCounts::default()
    })
}

/// Parses an answer of `/embeddings`: one vector per input, in input order.
pub fn parse_embeddings(
    body: &[u8],
    requested_model: &str,
    inputs: usize,
) -> Result<Embeddings, ProviderError> {
    let response: EmbeddingResponse =
        serde_json::from_slice(body).map_err(ProviderError::malformed)?;
    let mut data = response.data;
    if data.len() != inputs {
        let count = data.len();
        return Err(ProviderError::malformed(format!(
            "{count} embeddings for {inputs} inputs"
        )));
    }
    data.sort_by_key(|d| d.index);
    let vectors = data
        .into_iter()
        .map(|d| match d.embedding {
            EmbeddingVector::Floats(vector) => Ok(vector),
            EmbeddingVector::Base64(text) => decode_base64_f32(&text),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Embeddings {
        model: response
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        vectors,
        usage: response.usage.as_ref().map(usage),
    })
}

/// Decodes a base64 embedding (`encoding_format: "base64"`): little-endian f32s. Padding is
/// optional, and the URL-safe alphabet is accepted too (some OpenAI-compatible servers use it).
fn decode_base64_f32(text: &str) -> Result<Vec<f32>, ProviderError> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    let bytes = STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|_| ProviderError::malformed("an embedding is neither floats nor base64"))?;
    if bytes.len() % 4 != 0 {
        return Err(ProviderError::malformed(
            "a base64 embedding is not a whole number of f32s",
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// Reads `/audio/speech`'s event stream (`stream_format: "sse"`): each `speech.audio.delta`'s
/// audio to the caller as it comes, the tokens from `speech.audio.done`. A stream that ends
/// before that event was cut short: an error, so the caller's answer is cut too.
pub fn read_speech_events(
    response: Response,
    audio: &mut AudioSink,
    model: &str,
) -> Result<Speech, ProviderError> {
    use base64::Engine as _;
    for event in response.sse() {
        let event = event?;
        let event: SpeechEvent<'_> = serde_json::from_str(&event.data)
            .map_err(|_| ProviderError::malformed("a speech event that is not JSON"))?;
        match event.kind.as_deref() {
            Some("speech.audio.delta") => {
                let data = (event.audio).ok_or_else(|| {
                    ProviderError::malformed("a speech.audio.delta without audio")
                })?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.as_bytes())
                    .map_err(|_| {
                        ProviderError::malformed("a speech event's audio is not base64")
                    })?;
                audio.send(&bytes)?;
            }
            Some("speech.audio.done") => {
                let usage = event.usage.map(|usage| {
                    Usage::counted(TokenCounts {
                        prompt: usage.input_tokens,
                        completion: usage.output_tokens,
                        total: usage.total_tokens,
                        ..TokenCounts::default()
                    })
                });
                return Ok(Speech {
                    model: model.to_owned(),
                    usage,
                });
            }
            _ if event.error.as_ref().is_some_and(|e| !e.is_null()) => {
                return Err(missing(event.error.as_ref(), "a speech event"));
            }
            _ => {}
        }
    }
    Err(ProviderError::Failed(
        "the speech's event stream ended before speech.audio.done".into(),
    ))
}

/// Why an answer lacks `what`: the error a compatible server answered with status 200, else an
/// answer the plugin cannot read.
fn missing(error: Option<&Value>, what: &str) -> ProviderError {
    match error.filter(|e| !e.is_null()) {
        Some(error) => embedded_error(error),
        None => ProviderError::malformed(what),
    }
}

/// Parses an answer of `/images/generations`: each image's bytes (decoded from `b64_json`) or
/// URL, its media type by the answer's `output_format` (else the request's, else PNG, OpenAI's
/// default), GPT Image's tokens, size and quality. Checking the count is the gateway's.
pub fn parse_images(
    body: &[u8],
    request: &ImageRequest,
    asked_format: Option<&str>,
) -> Result<Images, ProviderError> {
    use base64::Engine as _;
    let response: ImagesResponse<'_> =
        serde_json::from_slice(body).map_err(ProviderError::malformed)?;
    let Some(data) = response.data else {
        return Err(missing(
            response.error.as_ref(),
            "an images answer without `data`",
        ));
    };
    let format = response.output_format.as_deref().or(asked_format);
    let media_type = match format.unwrap_or("png") {
        "jpeg" | "jpg" => "image/jpeg",
        "webp" => "image/webp",
        _ => "image/png",
    };
    let images = data
        .into_iter()
        .map(|image| {
            let source = match (image.b64_json, image.url) {
                (Some(data), _) => Source::Bytes(
                    base64::engine::general_purpose::STANDARD
                        .decode(data.as_bytes())
                        .map_err(|_| {
                            ProviderError::malformed("an image's b64_json is not base64")
                        })?,
                ),
                (None, Some(url)) => Source::Url(url),
                (None, None) => {
                    return Err(ProviderError::malformed(
                        "an image with neither b64_json nor url",
                    ));
                }
            };
            let media_type = matches!(source, Source::Bytes(_)).then(|| media_type.to_owned());
            Ok(GeneratedImage {
                source,
                media_type,
                revised_prompt: image.revised_prompt.filter(|p| !p.is_empty()),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let usage = response.usage.map(|usage| {
        Usage::counted(TokenCounts {
            prompt: usage.input_tokens,
            completion: usage.output_tokens,
            total: usage.total_tokens,
            image_prompt: usage.input_tokens_details.and_then(|d| d.image_tokens),
            ..TokenCounts::default()
        })
    });
    Ok(Images {
        model: request.model.clone(),
        images,
        usage,
        size: response.size.or_else(|| request.size.clone()),
        quality: response.quality.or_else(|| request.quality.clone()),
    })
}

/// Parses an answer of `/audio/transcriptions` (or `/translations`) as `json` or
/// `verbose_json`: the text, language, duration, segments and words, and what the provider
/// bills: tokens (`usage.type: "tokens"`), or seconds (`usage.type: "duration"`; a server that
/// reports no usage but the audio's `duration` is taken to bill that, rounded up).
pub fn parse_transcription(body: &[u8], model: &str) -> Result<Transcription, ProviderError> {
    let response: TranscriptionResponse =
        serde_json::from_slice(body).map_err(ProviderError::malformed)?;
    let Some(text) = response.text else {
        return Err(missing(
            response.error.as_ref(),
            "a transcription without `text`",
        ));
    };
    let wire = response.usage.unwrap_or_default();
    let tokens = wire.kind.as_deref() == Some("tokens") || wire.input_tokens.is_some();
    let usage = tokens.then(|| {
        Usage::counted(TokenCounts {
            prompt: wire.input_tokens,
            completion: wire.output_tokens,
            total: wire.total_tokens,
            audio_prompt: wire.input_token_details.and_then(|d| d.audio_tokens),
            ..TokenCounts::default()
        })
    });
    let seconds = match wire.seconds {
        Some(seconds) => Some(seconds),
        None if !tokens => response.duration,
        None => None,
    };
    let seconds = seconds.map(|s| s.ceil().clamp(0.0, f64::from(u32::MAX)) as u32);
    let stretch = |start, end, text| TranscriptSegment { start, end, text };
    Ok(Transcription {
        model: model.to_owned(),
        text,
        language: response.language.filter(|l| !l.is_empty()),
        duration: response.duration,
        segments: (response.segments.unwrap_or_default().into_iter())
            .map(|s| stretch(s.start, s.end, s.text))
            .collect(),
        words: (response.words.unwrap_or_default().into_iter())
            .map(|w| stretch(w.start, w.end, w.word))
            .collect(),
        usage,
        seconds,
    })
}

/// Parses an answer of `/rerank` in `api`'s format into its scores, in the server's order, as
/// given; an answer that is not the format's JSON is refused. Checking the indices, sorting
/// and cutting to `top_n` are the gateway's, one rule for every provider (`ranked` in
/// host/src/flow/whole.rs).
pub fn parse_rerank(
    api: RerankApi,
    body: &[u8],
    requested_model: &str,
) -> Result<Reranking, ProviderError> {
    let result = |index, relevance_score| RerankResult {
        index,
        relevance_score,
    };
    let (model, results, wire_usage, search_units): (_, Vec<_>, _, _) = match api {
        RerankApi::Cohere => {
            let response: RerankResponse =
                serde_json::from_slice(body).map_err(ProviderError::malformed)?;
            let Some(scored) = response.results else {
                // Some compatible servers answer errors with status 200.
                return Err(missing(
                    response.error.as_ref(),
                    "a rerank answer without `results`",
                ));
            };
            let units = (response.meta.and_then(|meta| meta.billed_units))
                .and_then(|billed| billed.search_units);
            let results = scored.iter().map(|r| result(r.index, r.relevance_score));
            (response.model, results.collect(), response.usage, units)
        }
        RerankApi::Voyage => {
            let response: VoyageRerankResponse =
                serde_json::from_slice(body).map_err(ProviderError::malformed)?;
            let results = response.data.iter();
            let results = results.map(|r| result(r.index, r.relevance_score));
            (response.model, results.collect(), response.usage, None)
        }
        RerankApi::Tei => {
            let ranks: Vec<TeiRank> =
                serde_json::from_slice(body).map_err(ProviderError::malformed)?;
            let results = ranks.iter().map(|rank| result(rank.index, rank.score));
            (None, results.collect(), None, None)
        }
    };
    Ok(Reranking {
        model: model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        results,
        usage: wire_usage.as_ref().and_then(rerank_usage),
        search_units,
    })
}

/// The tokens a rerank read, as prompt tokens: the total where the server reports one (a
/// rerank writes nothing), else its prompt tokens; `None` when it reports neither.
fn rerank_usage(wire: &WireUsage) -> Option<Usage> {
    let read = wire.total_tokens.or(wire.prompt_tokens)?;
    Some(Usage::counted(TokenCounts {
        prompt: Some(read),
        total: Some(read),
        ..TokenCounts::default()
    }))
}
