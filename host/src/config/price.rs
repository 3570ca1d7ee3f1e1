//! What a model costs, as a route's `pricing` table and the shipped price table write it.

use serde::{Deserialize, Serialize};

/// What one model costs, in dollars per million tokens of each token class (see
/// [`crate::pricing::cost`] for how a call's usage is priced).
///
/// In the config, a route's `[providers.ID.pricing."MODEL"]` table; in the shipped price table
/// (`host/prices.toml`), one entry per plugin and model. An entry replaces the whole price of
/// its model: fields it leaves out are not taken from another source.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PriceFields")]
pub struct Price {
    /// Prompt tokens neither read from nor written to the provider's cache (audio tokens
    /// aside where `audio_input_per_mtok` prices them).
    pub input_per_mtok: f64,
    /// Completion tokens, reasoning tokens included (providers bill them as output).
    pub output_per_mtok: f64,
    /// Prompt tokens read from the provider's cache (OpenAI cached input, Anthropic cache hits,
    /// Gemini context-cache reads). Absent: `input_per_mtok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    /// Prompt tokens written to the provider's cache (Anthropic cache writes). Absent:
    /// `input_per_mtok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
    /// Audio prompt tokens neither read from nor written to the cache (Gemini's audio input
    /// price). Absent: `input_per_mtok`. Cached audio is billed at the cache prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio_input_per_mtok: Option<f64>,
    /// Higher prices for calls whose prompt is long (Gemini 2.5 Pro above 200k tokens, Claude
    /// Sonnet 4 and 4.5 above 200k): they apply to every token of such a call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long_context: Option<LongContextPrice>,
    /// Dollars per search unit a rerank is billed by (Cohere's and Bedrock's: one query of up
    /// to 100 documents), beside its tokens. Absent: search units cost nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_search_unit: Option<f64>,
    /// Dollars per image a model makes, beside its tokens. An image model's sizes and
    /// qualities are priced by entries of their own (see [`crate::pricing::image_price_for`]).
    /// Absent: images cost nothing beyond their tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_image: Option<f64>,
    /// Dollars per second of audio a transcription is billed by (Whisper's), beside its
    /// tokens. Absent: seconds cost nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_audio_second: Option<f64>,
    /// Dollars per character of input text a speech is billed by (tts-1's), beside its
    /// tokens. Absent: characters cost nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_character: Option<f64>,
}

/// The prices of a call whose prompt (cached and cache-written tokens included) has more than
/// `above_prompt_tokens` tokens. Fields as in [`Price`]; absent cache and audio prices fall back
/// to this tier's `input_per_mtok` (not to the shorter tier's prices).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongContextPrice {
    pub above_prompt_tokens: u32,
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_input_per_mtok: Option<f64>,
}

/// The most a token class may cost, in dollars per million tokens. The dearest models are
/// priced in tens of dollars per million tokens; a million dollars per million (a dollar a
/// token) is no price but a mistake (a per-token price written per million, a corrupted
/// list), and a cost computed from it would exhaust every budget at once.
pub const MAX_PER_MTOK: f64 = 1_000_000.0;

/// The most a unit billed beside tokens may cost, in dollars: a search unit costs a fifth of a
/// cent; a thousand dollars is a price written per thousand units by mistake, or worse.
pub const MAX_PER_UNIT: f64 = 1_000.0;

/// A price that would make every cost it touches meaningless.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key} must be a finite number of dollars {per}, from 0 to {max} (got {value})")]
pub struct BadPrice {
    key: &'static str,
    value: f64,
    per: &'static str,
    max: f64,
}

/// Whether `value` may be a price per million tokens: a number from 0 to [`MAX_PER_MTOK`]
/// (not NaN, not infinite). The one rule for the config, the prices files and `prices
/// import`, so that an import never writes a file the gateway would refuse to load.
pub fn valid_per_mtok(value: f64) -> bool {
    (0.0..=MAX_PER_MTOK).contains(&value)
}

/// [`Price`] as written, before its values are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFields {
    input_per_mtok: f64,
    output_per_mtok: f64,
    #[serde(default)]
    cached_input_per_mtok: Option<f64>,
    #[serde(default)]
    cache_write_per_mtok: Option<f64>,
    #[serde(default)]
    audio_input_per_mtok: Option<f64>,
    #[serde(default)]
    long_context: Option<LongContextPrice>,
    #[serde(default)]
    per_search_unit: Option<f64>,
    #[serde(default)]
    per_image: Option<f64>,
    #[serde(default)]
    per_audio_second: Option<f64>,
    #[serde(default)]
    per_character: Option<f64>,
}

impl TryFrom<PriceFields> for Price {
    type Error = BadPrice;

    fn try_from(fields: PriceFields) -> Result<Price, BadPrice> {
        let mut values = vec![
            ("input_per_mtok", Some(fields.input_per_mtok)),
            ("output_per_mtok", Some(fields.output_per_mtok)),
            ("cached_input_per_mtok", fields.cached_input_per_mtok),
            ("cache_write_per_mtok", fields.cache_write_per_mtok),
            ("audio_input_per_mtok", fields.audio_input_per_mtok),
        ];
        if let Some(long) = &fields.long_context {
            values.extend([
                ("long_context.input_per_mtok", Some(long.input_per_mtok)),
                ("long_context.output_per_mtok", Some(long.output_per_mtok)),
                (
                    "long_context.cached_input_per_mtok",
                    long.cached_input_per_mtok,
                ),
                (
                    "long_context.cache_write_per_mtok",
                    long.cache_write_per_mtok,
                ),
                (
                    "long_context.audio_input_per_mtok",
                    long.audio_input_per_mtok,
                ),
            ]);
        }
        for (key, value) in values {
            if let Some(value) = value
                && !valid_per_mtok(value)
            {
                let (per, max) = ("per million tokens", MAX_PER_MTOK);
                return Err(BadPrice {
                    key,
                    value,
                    per,
                    max,
                });
            }
        }
        let units = [
            ("per_search_unit", "per search unit", fields.per_search_unit),
            ("per_image", "per image", fields.per_image),
            (
                "per_audio_second",
                "per second of audio",
                fields.per_audio_second,
            ),
            ("per_character", "per character", fields.per_character),
        ];
        for (key, per, value) in units {
            if let Some(value) = value
                && !(0.0..=MAX_PER_UNIT).contains(&value)
            {
                let max = MAX_PER_UNIT;
                return Err(BadPrice {
                    key,
                    value,
                    per,
                    max,
                });
            }
        }
        Ok(Price {
            input_per_mtok: fields.input_per_mtok,
            output_per_mtok: fields.output_per_mtok,
            cached_input_per_mtok: fields.cached_input_per_mtok,
            cache_write_per_mtok: fields.cache_write_per_mtok,
            audio_input_per_mtok: fields.audio_input_per_mtok,
            long_context: fields.long_context,
            per_search_unit: fields.per_search_unit,
            per_image: fields.per_image,
            per_audio_second: fields.per_audio_second,
            per_character: fields.per_character,
        })
    }
}

impl Price {
    /// A price with only input and output prices (cache reads and writes, and audio, at the
    /// input price).
    pub fn flat(input_per_mtok: f64, output_per_mtok: f64) -> Price {
        Price {
            input_per_mtok,
            output_per_mtok,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            audio_input_per_mtok: None,
            long_context: None,
            per_search_unit: None,
            per_image: None,
            per_audio_second: None,
            per_character: None,
        }
    }
}
