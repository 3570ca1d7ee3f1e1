//! A prompt's tokens counted by the gateway, for a token count whose plugin cannot ask its
//! provider (`count-tokens` answered `none`).
//!
//! OpenAI's models are counted with their own tokenizer (tiktoken's BPE ranks, from the
//! `tiktoken-rs` crate, which packs them, rather than a copy of ours): a text-only chat
//! counts exactly, messages framed as OpenAI's cookbook frames them (3 tokens a message, 1 a
//! name, 3 to prime the answer). What no tokenizer here says exactly is marked `estimated`:
//! another family's model (counted with `o200k_base`, a modern BPE close to most), function
//! definitions (each provider writes them into the prompt its own way), and media, by rule:
//! an image 85 tokens at `detail: low` and 765 otherwise (OpenAI's 1024×1024 image at high
//! detail), audio 10 tokens a second of 16 kHz 16-bit mono, a document's text by the
//! tokenizer and its other bytes one token in 4, as the quota's estimate counts.

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::Tokenizer;

use crate::plugins::types::{self, Part, Prompt, Source, TokenCount};

/// OpenAI's chat framing (its cookbook's "How to count tokens with tiktoken").
const PER_MESSAGE: usize = 3;
const PER_NAME: usize = 1;
const REPLY_PRIMING: usize = 3;
/// A function definition's framing beyond its text, and a call's.
const PER_FUNCTION: usize = 8;
const PER_CALL: usize = 1;
const IMAGE_LOW: usize = 85;
const IMAGE: usize = 765;
/// 16 kHz, 16-bit mono: 32,000 bytes a second, 10 tokens a second.
const AUDIO_BYTES_PER_TOKEN: usize = 3_200;
const BYTES_PER_TOKEN: usize = 4;

/// `request`'s prompt, functions included, counted for its model.
pub fn count(request: &types::CompletionRequest) -> TokenCount {
    let exact = tiktoken_rs::tokenizer::get_tokenizer(&request.model).filter(|t| {
        matches!(
            t,
            Tokenizer::O200kBase | Tokenizer::O200kHarmony | Tokenizer::Cl100kBase
        )
    });
    let bpe = match exact {
        Some(Tokenizer::Cl100kBase) => tiktoken_rs::cl100k_base_singleton(),
        _ => tiktoken_rs::o200k_base_singleton(),
    };
    let mut counter = Counter {
        bpe,
        tokens: 0,
        estimated: exact.is_none() || !request.functions.is_empty(),
    };
    match &request.prompt {
        Prompt::Text(text) => counter.text(text),
        Prompt::Chat(messages) => {
            for message in messages {
                counter.message(message);
            }
            counter.tokens += REPLY_PRIMING;
        }
    }
    for function in &request.functions {
        counter.tokens += PER_FUNCTION;
        counter.text(&function.name);
        counter.text(function.description.as_deref().unwrap_or_default());
        counter.text(function.parameters.as_deref().unwrap_or_default());
    }
    TokenCount {
        input_tokens: u32::try_from(counter.tokens).unwrap_or(u32::MAX),
        estimated: counter.estimated,
    }
}

struct Counter {
    bpe: &'static CoreBPE,
    tokens: usize,
    estimated: bool,
}

impl Counter {
    fn text(&mut self, text: &str) {
        // Ordinary: a prompt's `<|endoftext|>` is text to the API, not the special token.
        self.tokens += self.bpe.encode_ordinary(text).len();
    }

    fn message(&mut self, message: &types::Message) {
        self.tokens += PER_MESSAGE;
        self.text(role(message.role));
        if let Some(name) = &message.name {
            self.text(name);
            self.tokens += PER_NAME;
        }
        for part in &message.parts {
            self.part(part);
        }
        if let Some(call) = &message.function_call {
            self.tokens += PER_CALL;
            self.text(&call.name);
            self.text(&call.arguments);
        }
        for call in &message.tool_calls {
            self.tokens += PER_CALL;
            self.text(&call.name);
            self.text(&call.arguments);
        }
    }

    fn part(&mut self, part: &Part) {
        match part {
            Part::Text(text) => self.text(text),
            Part::Reasoning(reasoning) => self.text(&reasoning.text),
            Part::Image(image) => {
                self.estimated = true;
                self.tokens += match image.detail.as_deref() {
                    Some("low") => IMAGE_LOW,
                    _ => IMAGE,
                };
            }
            Part::Audio(audio) => {
                self.estimated = true;
                self.tokens += audio.data.len().div_ceil(AUDIO_BYTES_PER_TOKEN);
            }
            Part::Document(document) => {
                self.estimated = true;
                match &document.source {
                    Source::Bytes(bytes) => match std::str::from_utf8(bytes) {
                        Ok(text) => self.text(text),
                        Err(_) => self.tokens += bytes.len().div_ceil(BYTES_PER_TOKEN),
                    },
                    Source::Url(_) => {}
                }
            }
        }
    }
}

fn role(role: types::Role) -> &'static str {
    match role {
        types::Role::System => "system",
        types::Role::User => "user",
        types::Role::Assistant => "assistant",
        types::Role::Function => "function",
        types::Role::Tool => "tool",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(model: &str, messages: &[(types::Role, &str)]) -> types::CompletionRequest {
        let messages = messages.iter();
        types::CompletionRequest {
            route: types::Route::default(),
            model: model.into(),
            prompt: Prompt::Chat(
                messages
                    .map(|(role, text)| {
                        types::Message::new(*role, vec![Part::Text((*text).into())])
                    })
                    .collect(),
            ),
            functions: Vec::new(),
            function_choice: None,
            reasoning: None,
            output: types::OutputLimit::default(),
            params: "{}".into(),
        }
    }

    #[test]
    fn openai_chat_counts_as_the_cookbook_does() {
        // Counted by hand: "user" is 1 token, "Hello!" 2 ("Hello", "!"), in both tokenizers:
        // 3 framing + 1 + 2 + 3 priming.
        let count = count(&chat("gpt-4o", &[(types::Role::User, "Hello!")]));
        assert_eq!(
            count,
            TokenCount {
                input_tokens: 9,
                estimated: false
            }
        );
        let old = count_of("gpt-4", "Hello!");
        assert_eq!(old.input_tokens, 9);
        assert!(!old.estimated);
    }

    fn count_of(model: &str, text: &str) -> TokenCount {
        count(&chat(model, &[(types::Role::User, text)]))
    }

    #[test]
    fn other_models_functions_and_media_are_estimates() {
        assert!(count_of("claude-sonnet-4-5", "Hello!").estimated);
        let mut request = chat("gpt-4o", &[(types::Role::User, "Hello!")]);
        request.functions.push(types::FunctionDef {
            name: "get_weather".into(),
            description: None,
            parameters: Some(r#"{"type":"object"}"#.into()),
        });
        let with_function = count(&request);
        assert!(with_function.estimated);
        assert!(with_function.input_tokens > 9 + PER_FUNCTION as u32);

        let mut request = chat("gpt-4o", &[(types::Role::User, "Hello!")]);
        if let Prompt::Chat(messages) = &mut request.prompt {
            messages[0].parts.push(Part::Image(types::Image {
                source: Source::Url("https://example.com/a.png".into()),
                media_type: None,
                detail: Some("low".into()),
            }));
        }
        assert_eq!(
            count(&request),
            TokenCount {
                input_tokens: 9 + IMAGE_LOW as u32,
                estimated: true
            }
        );
    }

    #[test]
    fn special_token_text_is_ordinary_text() {
        let count = count_of("gpt-4o", "<|endoftext|>");
        assert!(count.input_tokens > 3 + 1 + 1 + 3);
    }
}
