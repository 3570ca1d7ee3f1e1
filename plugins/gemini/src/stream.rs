//! Reading answers: a `generateContent` answer is one [`GenerateContentResponse`], a stream is a
//! sequence of them (each event carries the new parts, the last one the finish reason and the
//! final usage). [`Decoder`] reads both into the SDK's [`Answer`], so streamed and whole answers
//! are read alike; the SDK's drivers do the rest.

use std::collections::BTreeMap;

use gateway_plugin_sdk::sse::Event;
use gateway_plugin_sdk::{
    Answer, Embeddings, FinishReason, ProviderError, StreamDecoder, TokenCounts, Usage,
    embedded_error,
};
use serde_json::{Value, json};

use crate::wire::{
    BatchEmbedResponse, GenerateContentResponse, LogprobsCandidate, LogprobsResult, UsageMetadata,
};

/// Reads `GenerateContentResponse`s into an [`Answer`].
#[derive(Debug, Default)]
pub struct Decoder {
    choices: BTreeMap<u32, ChoiceState>,
}

/// What the decoder keeps of one choice between events.
#[derive(Debug, Default)]
struct ChoiceState {
    /// The function calls seen so far (they number the next one).
    calls: u32,
    /// The finish reason, set on the answer at its end because `STOP` after function calls is
    /// `ToolCalls`.
    reason: Option<FinishReason>,
    /// The reasoning blocks opened so far (they number the next one).
    blocks: u32,
    /// The block thought summaries are being added to: the run of thought parts goes on until a
    /// part that is not a thought, or a signed thought part, ends it.
    open_thought: Option<u32>,
}

impl ChoiceState {
    fn next_block(&mut self) -> u32 {
        let block = self.blocks;
        self.blocks += 1;
        block
    }
}

impl StreamDecoder for Decoder {
    fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
        // Without `alt=sse` (a proxy may drop it) a stream is one JSON array of responses.
        let responses = if body.trim_ascii_start().starts_with(b"[") {
            serde_json::from_slice(body)
        } else {
            serde_json::from_slice(body).map(|response| vec![response])
        };
        for response in responses.map_err(ProviderError::malformed)? {
            self.push(response, answer)?;
        }
        Ok(())
    }

    fn event(&mut self, event: &Event, answer: &mut Answer) -> Result<(), ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        self.push(
            serde_json::from_str(data).map_err(ProviderError::malformed)?,
            answer,
        )
    }

    fn end(&mut self, answer: &mut Answer) -> Result<(), ProviderError> {
        for (&index, state) in &self.choices {
            match &state.reason {
                Some(FinishReason::Stop) if state.calls > 0 => {
                    answer.finish_reason(index, FinishReason::ToolCalls)
                }
                Some(reason) => answer.finish_reason(index, reason.clone()),
                None => {}
            }
        }
        Ok(())
    }
}

impl Decoder {
    /// Takes one response (a whole answer, or a streamed event).
    fn push(
        &mut self,
        response: GenerateContentResponse,
        answer: &mut Answer,
    ) -> Result<(), ProviderError> {
        if let Some(error) = response.error.as_ref().filter(|e| !e.is_null()) {
            return Err(embedded_error(error));
        }
        answer.model(response.model_version.as_deref().unwrap_or_default());
        if let Some(wire) = &response.usage_metadata {
            answer.usage(usage(wire));
        }
        let blocked = response.prompt_feedback.and_then(|f| f.block_reason);
        if response.candidates.is_empty() && blocked.is_some() {
            // The prompt was refused: one empty, filtered choice says so.
            answer.text(0, "");
            self.choices.entry(0).or_default().reason = Some(FinishReason::ContentFilter);
            answer.complete();
        }
        for (position, candidate) in response.candidates.into_iter().enumerate() {
            let index = candidate
                .index
                .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
            // Registers the choice even if it never says anything.
            answer.text(index, "");
            if let Some(result) = &candidate.logprobs_result {
                answer.logprobs(index, logprobs(result));
            }
            let state = self.choices.entry(index).or_default();
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                let signature = part.thought_signature.filter(|s| !s.is_empty());
                if part.thought == Some(true) {
                    // A thought summary: reasoning text, of the run's block.
                    let block = match state.open_thought {
                        Some(block) => block,
                        None => state.next_block(),
                    };
                    state.open_thought = Some(block);
                    answer.reasoning(index, block, part.text.as_deref().unwrap_or_default());
                    if let Some(signature) = signature {
                        answer.reasoning_signature(index, block, &signature);
                        state.open_thought = None;
                    }
                    continue;
                }
                state.open_thought = None;
                if let Some(signature) = signature {
                    // The signature of an answer part (a function call, text): a block of its
                    // own, without text, which `convert` puts back on the same kind of part.
                    let block = state.next_block();
                    answer.reasoning_signature(index, block, &signature);
                }
                if let Some(call) = part.function_call {
                    let arguments = match call.args {
                        None | Some(Value::Null) => "{}".to_owned(),
                        Some(args) => args.to_string(),
                    };
                    let (id, name) = (call.id.as_deref(), call.name.as_deref());
                    answer.tool_call(index, state.calls, id, name, Some(&arguments));
                    state.calls += 1;
                } else if let Some(text) = part.text {
                    answer.text(index, &text);
                }
            }
            if let Some(finish) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                state.reason = Some(finish_reason(&finish));
                answer.complete();
            }
        }
        Ok(())
    }
}

/// Maps a Gemini `finishReason`. `STOP` on a candidate that called functions is decided at the
/// end of the answer (it becomes `ToolCalls`).
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Maps a `logprobsResult` to OpenAI's logprobs object (`{"content": [{"token", "logprob",
/// "bytes", "top_logprobs"}]}`), the shape callers of `logprobs: true` read (and the SDK
/// concatenates across a stream's events): one entry per chosen token, with the top candidates
/// of the same decoding step.
pub fn logprobs(result: &LogprobsResult) -> Value {
    let token = |candidate: &LogprobsCandidate| {
        let text = candidate.token.as_deref().unwrap_or_default();
        json!({
            "token": text,
            "logprob": candidate.log_probability.unwrap_or(0.0),
            "bytes": text.as_bytes(),
        })
    };
    let content: Vec<Value> = result
        .chosen_candidates
        .iter()
        .enumerate()
        .map(|(step, chosen)| {
            let top: Vec<Value> = result
                .top_candidates
                .get(step)
                .map(|top| top.candidates.iter().map(token).collect())
                .unwrap_or_default();
            let mut entry = token(chosen);
            entry["top_logprobs"] = Value::Array(top);
            entry
        })
        .collect();
    json!({ "content": content })
}

/// Maps `usageMetadata`.
///
/// `promptTokensDetails` gives the prompt's image and audio tokens (its `IMAGE` and `AUDIO`
/// entries; none when Gemini lists no such entry).
///
/// Thoughts are billed as output, so they count as completion tokens (and are reported as
/// reasoning tokens); tool-use prompt tokens (results of built-in tools fed back to the model)
/// are billed as input, so they count as prompt tokens. A missing total is the sum of the parts.
pub fn usage(wire: &UsageMetadata) -> Usage {
    let modality = |name: &str| {
        let mut counts = (wire.prompt_tokens_details.iter())
            .filter(|detail| detail.modality.as_deref() == Some(name))
            .filter_map(|detail| detail.token_count)
            .peekable();
        counts.peek()?;
        Some(counts.fold(0u32, u32::saturating_add))
    };
    let prompt = (wire.prompt_token_count.unwrap_or(0))
        .saturating_add(wire.tool_use_prompt_token_count.unwrap_or(0));
    Usage::counted(TokenCounts {
        prompt: Some(prompt),
        completion: wire.candidates_token_count,
        total: wire.total_token_count,
        cache_read: wire.cached_content_token_count,
        reasoning: wire.thoughts_token_count,
        reasoning_apart: true,
        image_prompt: modality("IMAGE"),
        audio_prompt: modality("AUDIO"),
        ..TokenCounts::default()
    })
}

/// Reads an answer of `batchEmbedContents`: one vector per input, in input order.
pub fn read_embeddings(
    body: &[u8],
    requested_model: &str,
    inputs: usize,
) -> Result<Embeddings, ProviderError> {
    let response: BatchEmbedResponse =
        serde_json::from_slice(body).map_err(ProviderError::malformed)?;
    if response.embeddings.len() != inputs {
        return Err(ProviderError::malformed(format!(
            "{} embeddings for {inputs} inputs",
            response.embeddings.len()
        )));
    }
    Ok(Embeddings {
        model: requested_model.to_owned(),
        vectors: response.embeddings.into_iter().map(|e| e.values).collect(),
        // Google reports no token counts for embeddings.
        usage: None,
    })
}
