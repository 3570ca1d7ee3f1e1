//! The gateway's [`Usage`] from the counts a provider reports, each provider counting its prompt,
//! cache and reasoning a little differently: one constructor, so that every plugin fills the
//! same fields by the same rules.

use crate::Usage;

impl Usage {
    /// Usage of `prompt` and `completion` tokens, their sum as the total and
    /// no cache or reasoning details.
    pub fn new(prompt: u32, completion: u32) -> Self {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt.saturating_add(completion),
            cached_prompt_tokens: None,
            cache_creation_tokens: None,
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    }

    /// The usage of an answer from the counts its provider reported (see [`TokenCounts`]):
    /// what the gateway's `prompt_tokens` and `completion_tokens` include, the provider may
    /// count apart, and those parts are added to them; a missing count is 0, a missing total
    /// the sum of prompt and completion.
    ///
    /// ```
    /// use gateway_plugin_sdk::{TokenCounts, Usage};
    ///
    /// // Anthropic's `input_tokens` leaves the cache's reads and writes out.
    /// let usage = Usage::counted(TokenCounts {
    ///     prompt: Some(10),
    ///     completion: Some(5),
    ///     cache_read: Some(100),
    ///     cache_write: Some(20),
    ///     cache_apart: true,
    ///     ..TokenCounts::default()
    /// });
    /// assert_eq!((usage.prompt_tokens, usage.total_tokens), (130, 135));
    /// assert_eq!(usage.cached_prompt_tokens, Some(100));
    /// ```
    pub fn counted(counts: TokenCounts) -> Self {
        let apart = |counted: bool, part: Option<u32>| part.filter(|_| counted).unwrap_or(0);
        let prompt = counts
            .prompt
            .unwrap_or(0)
            .saturating_add(apart(counts.cache_apart, counts.cache_read))
            .saturating_add(apart(counts.cache_apart, counts.cache_write));
        let completion = counts
            .completion
            .unwrap_or(0)
            .saturating_add(apart(counts.reasoning_apart, counts.reasoning));
        let usage = Usage::new(prompt, completion);
        Usage {
            total_tokens: counts.total.unwrap_or(usage.total_tokens),
            cached_prompt_tokens: counts.cache_read,
            cache_creation_tokens: counts.cache_write,
            reasoning_tokens: counts.reasoning,
            image_prompt_tokens: counts.image_prompt,
            audio_prompt_tokens: counts.audio_prompt,
            ..usage
        }
    }
}

/// The token counts of one answer as its provider reports them, any of them missing, for
/// [`Usage::counted`]. The gateway's prompt count includes the cache's reads and writes and
/// its completion count the reasoning; a provider that counts them apart says so
/// (`cache_apart`, `reasoning_apart`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCounts {
    /// The prompt's tokens.
    pub prompt: Option<u32>,
    /// The answer's tokens.
    pub completion: Option<u32>,
    /// The total, when the provider reports one.
    pub total: Option<u32>,
    /// Prompt tokens read from the provider's cache.
    pub cache_read: Option<u32>,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: Option<u32>,
    /// Whether `prompt` leaves `cache_read` and `cache_write` out (Anthropic's and Bedrock's
    /// input tokens).
    pub cache_apart: bool,
    /// The answer's reasoning tokens.
    pub reasoning: Option<u32>,
    /// Whether `completion` leaves `reasoning` out (Gemini's candidates' tokens).
    pub reasoning_apart: bool,
    /// Prompt tokens of images.
    pub image_prompt: Option<u32>,
    /// Prompt tokens of audio.
    pub audio_prompt: Option<u32>,
}
