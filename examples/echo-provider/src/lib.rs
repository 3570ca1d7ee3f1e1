//! `echo`: a provider plugin that answers with the caller's own words.
//!
//! It needs no network and no key, and answers deterministically, which makes
//! it the gateway's demo route and the starting point for writing a plugin:
//! everything here uses only `gateway-plugin-sdk`.
//!
//! - A text prompt is answered with itself; a chat with its last user message.
//! - Usage counts whitespace-separated words: the input's (every message of a
//!   chat) and the answer's.
//! - Streaming sends one chunk per word.
//! - When the caller asks for a function call, echo calls it with
//!   `{"input": <the input text>}`.
//! - Embeddings are 8-dimensional unit vectors derived from each input's bytes.
//! - Model `fail` fails like an upstream error would.
//! - Images, audio and documents are described after the text they came
//!   with: `[image image/png, 68 bytes]`, `[document application/pdf, https://…]`.

use gateway_plugin_sdk::{
    Choice, Completion, CompletionRequest, EmbeddingRequest, Embeddings, FinishReason,
    FunctionCall, FunctionChoice, Message, ModelPrice, Part, PluginInfo, Prompt, Provider,
    ProviderError, Role, Sink, Source, UpstreamError, Usage, export_provider,
};
use serde_json::json;

/// The plugin. It keeps no state: every request runs in a fresh instance.
struct Echo;

impl Provider for Echo {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "echo".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            models: vec![ModelPrice {
                model: "echo".into(),
                input_per_mtok: 0.0,
                output_per_mtok: 0.0,
            }],
        }
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        fail_if_asked(&request.model)?;
        let (input, input_words) = match &request.prompt {
            Prompt::Text(text) => (text.clone(), words(text)),
            Prompt::Chat(messages) => {
                let last_user = (messages.iter().rev())
                    .find(|m| m.role == Role::User)
                    .map(echoed)
                    .unwrap_or_default();
                let all = messages.iter().map(|m| words(&m.text()));
                (last_user, all.sum())
            }
        };
        let input = input.as_str();

        let (text, function_call, finish_reason) = match function_to_call(&request, input)? {
            Some(name) => {
                let arguments = json!({ "input": input }).to_string();
                let call = FunctionCall { name, arguments };
                (String::new(), Some(call), FinishReason::FunctionCall)
            }
            None => (input.to_owned(), None, FinishReason::Stop),
        };
        let output_words = match &function_call {
            Some(call) => words(&call.arguments),
            None => words(&text),
        };

        Ok(Completion {
            model: request.model,
            choices: vec![Choice {
                index: 0,
                text,
                reasoning: Vec::new(),
                finish_reason: Some(finish_reason),
                function_call,
                tool_calls: Vec::new(),
                logprobs: None,
            }],
            usage: Some(usage(input_words, output_words)),
        })
    }

    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        // A real provider would forward text as the upstream produces it;
        // echo knows its whole answer up front and sends it word by word.
        let completion = Self::complete(request)?;
        for choice in &completion.choices {
            for piece in word_pieces(&choice.text) {
                // An error means the caller is gone: stop and return it.
                sink.text(choice.index, piece)?;
            }
        }
        Ok(completion)
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        fail_if_asked(&request.model)?;
        let vectors = request
            .input
            .iter()
            .map(|s| embedding(s.as_bytes()))
            .collect();
        let input_words = request.input.iter().map(|s| words(s)).sum();
        Ok(Embeddings {
            model: request.model,
            vectors,
            usage: Some(usage(input_words, 0)),
        })
    }
}

export_provider!(Echo);

/// Model `fail` lets callers try the gateway's handling of upstream errors.
fn fail_if_asked(model: &str) -> Result<(), ProviderError> {
    if model == "fail" {
        return Err(ProviderError::Upstream(UpstreamError {
            status: 500,
            message: "echo: asked to fail".into(),
            retry_after: None,
        }));
    }
    Ok(())
}

/// The function echo should call instead of answering, if any.
fn function_to_call(
    request: &CompletionRequest,
    input: &str,
) -> Result<Option<String>, ProviderError> {
    let first = request.functions.first().map(|f| f.name.clone());
    match &request.function_choice {
        Some(FunctionChoice::Named(name)) => Ok(Some(name.clone())),
        Some(FunctionChoice::Required) => first.map(Some).ok_or_else(|| {
            ProviderError::InvalidRequest("functionCall \"required\" needs functions".into())
        }),
        // Like OpenAI, offering functions without a choice means "auto".
        Some(FunctionChoice::Auto) | None if input.starts_with("call ") => Ok(first),
        _ => Ok(None),
    }
}

/// A message's text, with each image, audio clip or document it carries
/// described after it (`[image image/png, 68 bytes]`), so a caller can see
/// what reached the plugin.
fn echoed(message: &Message) -> String {
    let mut echoed = message.text().into_owned();
    for part in &message.parts {
        let (media_type, source) = match part {
            Part::Image(image) => (image.media_type(), &image.source),
            Part::Document(document) => (document.media_type(), &document.source),
            Part::Audio(audio) => {
                echoed.push_str(&format!(
                    " [audio {}, {} bytes]",
                    audio.format,
                    audio.data.len()
                ));
                continue;
            }
            Part::Text(_) | Part::Reasoning(_) => continue,
        };
        let size = match source {
            Source::Bytes(bytes) => format!("{} bytes", bytes.len()),
            Source::Url(url) => url.clone(),
        };
        echoed.push_str(&format!(" [{} {media_type}, {size}]", part.kind()));
    }
    echoed
}

fn words(text: &str) -> u32 {
    u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
}

fn usage(prompt_tokens: u32, completion_tokens: u32) -> Usage {
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens.saturating_add(completion_tokens),
        cached_prompt_tokens: None,
        cache_creation_tokens: None,
        reasoning_tokens: None,
        image_prompt_tokens: None,
        audio_prompt_tokens: None,
    }
}

/// Splits `text` into words, each with the whitespace that follows it
/// (leading whitespace stays with the first word), so the pieces join back
/// into `text`.
fn word_pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut after_space = false;
    for (i, c) in text.char_indices() {
        // A word starting after whitespace ends the piece before it, unless
        // that piece is only leading whitespace.
        if after_space && !c.is_whitespace() && !text[start..i].trim().is_empty() {
            pieces.push(&text[start..i]);
            start = i;
        }
        after_space = c.is_whitespace();
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// A unit vector that depends only on `bytes`: an FNV-1a hash of the bytes
/// seeds a SplitMix64 sequence, whose values, mapped to [-1, 1], are then
/// normalized.
fn embedding(bytes: &[u8]) -> Vec<f32> {
    let mut state = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let raw: Vec<f32> = (0..8)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            // The top 24 bits convert to f32 exactly.
            (z >> 40) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        let mut unit = vec![0.0; 8];
        unit[0] = 1.0;
        return unit;
    }
    raw.iter().map(|x| x / norm).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_plugin_sdk::{FunctionDef, Message, Route};

    fn request(model: &str, prompt: Prompt) -> CompletionRequest {
        CompletionRequest {
            route: Route {
                id: "demo".into(),
                base_url: String::new(),
                api_key: None,
                settings: "{}".into(),
                secrets: Vec::new(),
            },
            model: model.into(),
            prompt,
            functions: Vec::new(),
            function_choice: None,
            reasoning: None,
            output: gateway_plugin_sdk::OutputLimit::NONE,
            params: "{}".into(),
        }
    }

    fn message(role: Role, content: &str) -> Message {
        Message::text_message(role, content)
    }

    #[test]
    fn text_prompt_is_echoed_with_word_usage() {
        let c = Echo::complete(request("echo", Prompt::Text("hello  there world".into()))).unwrap();
        assert_eq!(c.model, "echo");
        assert_eq!(c.choices[0].text, "hello  there world");
        assert_eq!(c.choices[0].finish_reason, Some(FinishReason::Stop));
        assert_eq!(c.usage, Some(usage(3, 3)));
    }

    #[test]
    fn chat_answers_the_last_user_message() {
        let chat = Prompt::Chat(vec![
            message(Role::System, "be brief"),
            message(Role::User, "first question"),
            message(Role::Assistant, "an answer"),
            message(Role::User, "second"),
        ]);
        let c = Echo::complete(request("any-model", chat)).unwrap();
        assert_eq!(c.model, "any-model");
        assert_eq!(c.choices[0].text, "second");
        assert_eq!(c.usage, Some(usage(7, 1)));
    }

    #[test]
    fn streams_one_chunk_per_word() {
        let mut sink = Sink::buffered();
        let c = Echo::complete_stream(
            request("echo", Prompt::Text(" one two\nthree ".into())),
            &mut sink,
        )
        .unwrap();
        let pieces: Vec<&str> = sink
            .sent()
            .iter()
            .map(|chunk| chunk.deltas[0].text.as_str())
            .collect();
        assert_eq!(pieces, [" one ", "two\n", "three "]);
        assert_eq!(pieces.concat(), c.choices[0].text);
    }

    #[test]
    fn function_calls() {
        let mut r = request("echo", Prompt::Text("call me \"maybe\"".into()));
        r.functions = vec![FunctionDef {
            name: "first".into(),
            description: None,
            parameters: None,
        }];
        let call = |r: &CompletionRequest| Echo::complete(r.clone()).unwrap().choices[0].clone();

        let auto = call(&r);
        assert_eq!(auto.finish_reason, Some(FinishReason::FunctionCall));
        assert_eq!(auto.text, "");
        let function_call = auto.function_call.unwrap();
        assert_eq!(function_call.name, "first");
        assert_eq!(function_call.arguments, r#"{"input":"call me \"maybe\""}"#);

        r.function_choice = Some(FunctionChoice::Named("other".into()));
        assert_eq!(call(&r).function_call.unwrap().name, "other");

        r.prompt = Prompt::Text("no call".into());
        r.function_choice = Some(FunctionChoice::Auto);
        assert_eq!(call(&r).function_call, None);
        r.function_choice = Some(FunctionChoice::Required);
        assert_eq!(call(&r).function_call.unwrap().name, "first");
        r.function_choice = Some(FunctionChoice::None);
        r.prompt = Prompt::Text("call it".into());
        assert_eq!(call(&r).function_call, None);
    }

    #[test]
    fn model_fail_is_an_upstream_error() {
        let error = Echo::complete(request("fail", Prompt::Text("x".into()))).unwrap_err();
        assert!(
            matches!(error, ProviderError::Upstream(e) if e.status == 500 && e.message == "echo: asked to fail")
        );
    }

    #[test]
    fn embeddings_are_deterministic_unit_vectors() {
        let input = vec![
            "a".to_string(),
            "b".to_string(),
            String::new(),
            "a".to_string(),
        ];
        let e = Echo::embed(EmbeddingRequest {
            route: request("echo", Prompt::Text(String::new())).route,
            model: "echo".into(),
            input,
            params: String::new(),
        })
        .unwrap();
        assert_eq!(e.vectors.len(), 4);
        for v in &e.vectors {
            assert_eq!(v.len(), 8);
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        }
        assert_eq!(e.vectors[0], e.vectors[3]);
        // Similar inputs still get clearly different vectors.
        let cosine: f32 = e.vectors[0]
            .iter()
            .zip(&e.vectors[1])
            .map(|(x, y)| x * y)
            .sum();
        assert!(cosine < 0.9, "{cosine}");
        assert_eq!(e.usage, Some(usage(3, 0)));
    }
}
