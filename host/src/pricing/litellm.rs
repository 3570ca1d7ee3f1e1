//! Reading the community price list: LiteLLM's `model_prices_and_context_window.json`, one
//! object per model with its `litellm_provider`, `mode` and per-token prices in dollars.
//!
//! What the gateway can price (a chat, completion, embedding or rerank model of a provider one
//! of its plugins serves, priced per token, a rerank's per query too; an image model priced per
//! image, per pixel or per token; a transcription model per second of audio or per token; a
//! speech model per character of input or per token) becomes a [`Price`] under that plugin's
//! name; everything
//! else is counted as skipped, by reason. A file that is not such a list, or an entry the
//! gateway would price whose price fields are not numbers, is refused as a whole and names the
//! entry: an import writes all of a file or nothing.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::PriceTable;
use crate::config::{LongContextPrice, MAX_PER_MTOK, MAX_PER_UNIT, Price, valid_per_mtok};

/// The plugin that serves a provider of the file (its `litellm_provider`), if any.
///
/// Azure is left out on purpose: Azure deployments are named by their owner, so its prices
/// belong in the route's `pricing` table, under the deployment's name.
fn plugin_of(provider: &str) -> Option<&'static str> {
    match provider {
        "openai" | "text-completion-openai" => Some("openai"),
        "anthropic" => Some("anthropic"),
        "gemini" => Some("gemini"),
        "bedrock" | "bedrock_converse" => Some("bedrock"),
        // `vertex_ai-language-models` (Gemini), `-anthropic_models`, `-embedding-models`, and the
        // partner models (`-llama_models`, `-mistral_models`, ...) alike.
        provider if provider == "vertex_ai" || provider.starts_with("vertex_ai-") => Some("vertex"),
        _ => None,
    }
}

/// The name prefixes the file puts before some models' names (`gemini/gemini-2.5-pro`,
/// `vertex_ai/claude-sonnet-4-5@20250929`, `bedrock/us-east-1/...`): a plugin is asked for the
/// model by its name without them.
const NAME_PREFIXES: &[&str] = &[
    "openai/",
    "text-completion-openai/",
    "anthropic/",
    "gemini/",
    "vertex_ai/",
    "bedrock/",
    "bedrock_converse/",
];

/// The modes whose calls are priced by the gateway (per token, a rerank's per query too, an
/// image model's per image, a transcription model's per second, a speech model's per
/// character). An entry without a mode is taken as a chat model, as LiteLLM does.
const PRICED_MODES: &[&str] = &[
    "chat",
    "completion",
    "embedding",
    "responses",
    "rerank",
    "image_generation",
    "audio_transcription",
    "audio_speech",
];

/// Why an entry of the file was not imported.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skip {
    /// Its provider has no gateway plugin (the provider's name).
    Provider(String),
    /// Not a chat, completion, embedding, rerank, image, transcription or speech model (the
    /// mode).
    Mode(String),
    /// No `input_cost_per_token`: priced per character, image, second, request...
    NotPerToken,
    /// A chat or completion model without `output_cost_per_token`.
    NoOutputPrice,
    /// A name qualified by a region or a purchase option (`bedrock/us-east-1/...`,
    /// `bedrock/*/1-month-commitment/...`): the gateway prices a model by its name alone.
    Qualified,
    /// Another name of the file gives the same plugin and model (`vertex_ai/gemini-2.5-pro`
    /// beside `gemini-2.5-pro`): the bare name's entry is the one imported.
    Duplicate,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::Provider(_) => write!(f, "provider without a gateway plugin"),
            Skip::Mode(_) => write!(
                f,
                "not a chat, completion, embedding, rerank, image, transcription or speech model"
            ),
            Skip::NotPerToken => write!(
                f,
                "not priced per token (per character, image, second or request only)"
            ),
            Skip::NoOutputPrice => write!(f, "no output_cost_per_token"),
            Skip::Qualified => write!(f, "name qualified by a region or commitment"),
            Skip::Duplicate => write!(f, "another name for a model already imported"),
        }
    }
}

/// What an import made of a file.
#[derive(Debug, Default)]
pub struct Imported {
    /// The prices, per plugin and model (`as_of` is left for the caller to set).
    pub table: PriceTable,
    /// The entries not imported, each with why.
    pub skipped: Vec<(String, Skip)>,
}

/// Why a file cannot be imported. Nothing is written then.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a model price list: the file must be a JSON object of model entries")]
    NotAnObject,
    #[error("entry {entry:?}: {problem}")]
    Entry { entry: String, problem: String },
    #[error(
        "no model the gateway can price: is this LiteLLM's model_prices_and_context_window.json?"
    )]
    Empty,
}

fn entry_error(entry: &str, problem: impl Into<String>) -> ImportError {
    ImportError::Entry {
        entry: entry.to_owned(),
        problem: problem.into(),
    }
}

/// Reads a price list in LiteLLM's format.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    let Value::Object(entries) = serde_json::from_str::<Value>(text)? else {
        return Err(ImportError::NotAnObject);
    };
    let mut imported = Imported::default();
    // (plugin, model) -> the name of the entry imported there.
    let mut seen: BTreeMap<(&'static str, String), String> = BTreeMap::new();
    for (name, entry) in &entries {
        // The format's own documentation entry, with words where the prices go.
        if name == "sample_spec" {
            continue;
        }
        let Value::Object(fields) = entry else {
            return Err(entry_error(name, "not a JSON object"));
        };
        let provider = match fields.get("litellm_provider") {
            Some(Value::String(provider)) => provider.as_str(),
            Some(other) => {
                return Err(entry_error(
                    name,
                    format!("litellm_provider must be a string, not {}", kind(other)),
                ));
            }
            None => {
                imported
                    .skipped
                    .push((name.clone(), Skip::Provider(String::new())));
                continue;
            }
        };
        let Some(plugin) = plugin_of(provider) else {
            imported
                .skipped
                .push((name.clone(), Skip::Provider(provider.to_owned())));
            continue;
        };
        match fields.get("mode") {
            None => {}
            Some(Value::String(mode)) if PRICED_MODES.contains(&mode.as_str()) => {}
            Some(Value::String(mode)) => {
                imported
                    .skipped
                    .push((name.clone(), Skip::Mode(mode.clone())));
                continue;
            }
            Some(other) => {
                return Err(entry_error(
                    name,
                    format!("mode must be a string, not {}", kind(other)),
                ));
            }
        }
        let model = NAME_PREFIXES
            .iter()
            .find_map(|prefix| name.strip_prefix(prefix))
            .unwrap_or(name);
        // An image model's size (and quality) is a name of its own, as the gateway writes it.
        let image = image_variant(model);
        let model = image
            .as_ref()
            .map_or(model, |(variant, _)| variant.as_str());
        let pixels = image.as_ref().map(|&(_, pixels)| pixels);
        // Vertex names its partner models by publisher (`meta/llama-...`); a Bedrock name with
        // a slash left is a region's or a commitment's price.
        if model.is_empty() || (plugin == "bedrock" && model.contains('/')) {
            imported.skipped.push((name.clone(), Skip::Qualified));
            continue;
        }
        let price = match price_of(name, fields, pixels)? {
            Ok(price) => price,
            Err(skip) => {
                imported.skipped.push((name.clone(), skip));
                continue;
            }
        };
        let key = (plugin, model.to_owned());
        if let Some(earlier) = seen.get(&key) {
            // The bare name's entry is kept, whichever of the two comes first.
            if earlier == model || name != model {
                imported.skipped.push((name.clone(), Skip::Duplicate));
                continue;
            }
            imported.skipped.push((earlier.clone(), Skip::Duplicate));
        }
        seen.insert(key, name.clone());
        imported
            .table
            .plugins
            .entry(plugin.to_owned())
            .or_default()
            .insert(model.to_owned(), price);
    }
    if imported.table.plugins.values().all(BTreeMap::is_empty) {
        return Err(ImportError::Empty);
    }
    Ok(imported)
}

/// LiteLLM names an image model's prices by size and quality `[QUALITY/]W-x-H/MODEL`
/// (`hd/1024-x-1792/dall-e-3`): the gateway's name of the same price (`dall-e-3 hd 1024x1792`,
/// see [`crate::pricing::image_price_for`]) and the size's pixels; `None` for any other name.
fn image_variant(name: &str) -> Option<(String, u64)> {
    let parts: Vec<&str> = name.split('/').collect();
    let (quality, size, model) = match parts.as_slice() {
        [quality, size, model] => (Some(*quality), *size, *model),
        [size, model] => (None, *size, *model),
        _ => return None,
    };
    let (width, height) = size.split_once("-x-")?;
    let (width, height) = (width.parse::<u64>().ok()?, height.parse::<u64>().ok()?);
    let variant = match quality {
        Some(quality) => format!("{model} {quality} {width}x{height}"),
        None => format!("{model} {width}x{height}"),
    };
    Some((variant, width.saturating_mul(height)))
}

/// The entry's price, or why it has none the gateway can use; `Err` when a price field is
/// not a number, negative or not finite. `pixels`: the size of an image model's entry, whose
/// price may be per pixel.
fn price_of(
    name: &str,
    fields: &Map<String, Value>,
    pixels: Option<u64>,
) -> Result<Result<Price, Skip>, ImportError> {
    let mode = fields.get("mode").and_then(Value::as_str).unwrap_or("chat");
    // A field's number as the file writes it: none when absent or null, refused when not a
    // number.
    let number = |field: &str| -> Result<Option<&serde_json::Number>, ImportError> {
        match fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(number)) => Ok(Some(number)),
            Some(other) => Err(entry_error(
                name,
                format!("{field} must be a number, not {}", kind(other)),
            )),
        }
    };
    // A per-token price, as the price per million tokens.
    let get = |field: &str| -> Result<Option<f64>, ImportError> {
        let Some(number) = number(field)? else {
            return Ok(None);
        };
        match number.as_f64() {
            Some(value) if value.is_finite() && value >= 0.0 => {
                let per_mtok = per_million(value).ok_or_else(|| {
                    entry_error(name, format!("{field}: {value} cannot be converted"))
                })?;
                // Held to the rule the gateway loads the file with: a price it would refuse
                // (1e308 a token is infinite per million) is refused, not written.
                if !valid_per_mtok(per_mtok) {
                    return Err(entry_error(
                        name,
                        format!(
                            "{field} of {number} dollars a token is over the most a price \
                             may be: {MAX_PER_MTOK} dollars per million tokens ({} dollar a token)",
                            MAX_PER_MTOK / 1e6
                        ),
                    ));
                }
                Ok(Some(per_mtok))
            }
            _ => Err(entry_error(
                name,
                format!("{field} must be a dollar amount, not negative (got {number})"),
            )),
        }
    };
    // A price per unit billed beside tokens, in dollars as the file writes it.
    let get_per_unit = |field: &str| -> Result<Option<f64>, ImportError> {
        let Some(number) = number(field)? else {
            return Ok(None);
        };
        match number.as_f64() {
            Some(value) if (0.0..=MAX_PER_UNIT).contains(&value) => Ok(Some(value)),
            _ => Err(entry_error(
                name,
                format!("{field} must be a dollar amount from 0 to {MAX_PER_UNIT} (got {number})"),
            )),
        }
    };
    // LiteLLM's query is a search unit: one call of up to 100 documents, as Cohere and Bedrock
    // bill their reranks.
    let per_search_unit = match get_per_unit("input_cost_per_query")? {
        Some(0.0) | None => None,
        price => price,
    };
    // An image's price: given per image, else per pixel of the entry's size.
    let per_image = match (get_per_unit("output_cost_per_image")?, pixels) {
        (Some(price), _) => Some(price),
        (None, Some(pixels)) => match get_per_unit("input_cost_per_pixel")? {
            Some(per_pixel) => {
                let price = per_pixel * pixels as f64;
                if price > MAX_PER_UNIT {
                    return Err(entry_error(
                        name,
                        format!(
                            "input_cost_per_pixel: {price} dollars an image is over {MAX_PER_UNIT}"
                        ),
                    ));
                }
                Some(price)
            }
            None => None,
        },
        (None, None) => None,
    }
    .filter(|_| mode == "image_generation");
    // A transcription's price per second of audio (Whisper's).
    let per_audio_second = get_per_unit("input_cost_per_second")?
        .filter(|price| mode == "audio_transcription" && *price > 0.0);
    // A speech's price per character of its input text (tts-1's). Only a speech model's is
    // read: a chat or embedding model priced per character (Vertex's older ones) is priced by
    // its tokens or not at all.
    let per_character = match mode {
        "audio_speech" => get_per_unit("input_cost_per_character")?.filter(|price| *price > 0.0),
        _ => None,
    };
    // Priced by a unit beside tokens: tokens it does not price cost nothing.
    let by_unit = per_image.is_some() || per_audio_second.is_some() || per_character.is_some();
    let input = match get("input_cost_per_token")? {
        Some(input) => input,
        // A rerank billed by the query alone reads no tokens the gateway would price, nor does
        // an image model billed by the image.
        None if mode == "rerank" && per_search_unit.is_some() => 0.0,
        None if by_unit => 0.0,
        None => return Ok(Err(Skip::NotPerToken)),
    };
    // GPT Image's output is image tokens, and GPT-4o mini TTS's audio tokens, each priced
    // under a name of its own: the completion tokens of those calls.
    let output = match get("output_cost_per_token")? {
        None if mode == "image_generation" => get("output_cost_per_image_token")?,
        None if mode == "audio_speech" => get("output_cost_per_audio_token")?,
        output => output,
    };
    let output = match output {
        Some(output) => output,
        // Embeddings and reranks produce no tokens to bill; an image billed by the image no
        // tokens to price.
        None if mode == "embedding" || mode == "rerank" => 0.0,
        None if by_unit => 0.0,
        None => return Ok(Err(Skip::NoOutputPrice)),
    };
    let cached = get("cache_read_input_token_cost")?;
    let write = get("cache_creation_input_token_cost")?;
    // Equal to the input price it changes nothing: left out, as the shipped table does.
    let audio = get("input_cost_per_audio_token")?.filter(|audio| *audio != input);
    let mut long_context = None;
    // The lowest threshold the entry prices (LiteLLM names one per tier, in thousands of
    // prompt tokens: `input_cost_per_token_above_200k_tokens`); the gateway has one tier.
    let threshold = fields
        .keys()
        .filter_map(|key| {
            key.strip_prefix("input_cost_per_token_above_")?
                .strip_suffix("k_tokens")?
                .parse::<u32>()
                .ok()
        })
        .min();
    if let Some(thousands) = threshold {
        let tier = |field: &str| get(&format!("{field}_above_{thousands}k_tokens"));
        if let Some(long_input) = tier("input_cost_per_token")? {
            // What the tier does not price is priced as below it, as LiteLLM bills it.
            long_context = Some(LongContextPrice {
                above_prompt_tokens: thousands.saturating_mul(1000),
                input_per_mtok: long_input,
                output_per_mtok: tier("output_cost_per_token")?.unwrap_or(output),
                cached_input_per_mtok: tier("cache_read_input_token_cost")?.or(cached),
                cache_write_per_mtok: tier("cache_creation_input_token_cost")?.or(write),
                audio_input_per_mtok: tier("input_cost_per_audio_token")?.or(audio),
            });
        }
    }
    Ok(Ok(Price {
        input_per_mtok: input,
        output_per_mtok: output,
        cached_input_per_mtok: cached,
        cache_write_per_mtok: write,
        audio_input_per_mtok: audio,
        long_context,
        per_search_unit,
        per_image,
        per_audio_second,
        per_character,
    }))
}

/// A per-token price as the price per million tokens, exactly as the file writes it.
///
/// Multiplying by a million in binary floating point is not exact (`1.25e-08 * 1e6` is
/// `0.012499999999999999`), and a price stored that way would make every cost a hair off the
/// one computed from the file. So the decimal point is moved instead: the shortest decimal
/// that reads back as the same double (the digits the file wrote, for any file written by a
/// program) has its exponent raised by six, and is read again as the nearest double, as a TOML
/// file writing `0.0125` would be.
pub fn per_million(per_token: f64) -> Option<f64> {
    let text = format!("{per_token:e}");
    let (digits, exponent) = text.split_once('e')?;
    let exponent: i32 = exponent.parse().ok()?;
    format!("{digits}e{}", exponent + 6).parse().ok()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// How an import changes the prices file it replaces.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// `plugin/model` of the models new to the file.
    pub added: Vec<String>,
    /// `plugin/model` of the models whose price changed.
    pub changed: Vec<String>,
    pub unchanged: usize,
    /// `plugin/model` of the models the new file no longer has.
    pub removed: Vec<String>,
}

/// What replacing `old` by `new` adds, changes and removes.
pub fn changes(old: &PriceTable, new: &PriceTable) -> Changes {
    let flat = |table: &PriceTable| -> BTreeMap<String, Price> {
        table
            .plugins
            .iter()
            .flat_map(|(plugin, models)| {
                models
                    .iter()
                    .map(move |(model, price)| (format!("{plugin}/{model}"), *price))
            })
            .collect()
    };
    let (old, new) = (flat(old), flat(new));
    let mut changes = Changes::default();
    for (name, price) in &new {
        match old.get(name) {
            None => changes.added.push(name.clone()),
            Some(before) if before != price => changes.changed.push(name.clone()),
            Some(_) => changes.unchanged += 1,
        }
    }
    changes.removed = old
        .keys()
        .filter(|name| !new.contains_key(*name))
        .cloned()
        .collect();
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(name: &str, entry: Value) -> Result<Imported, ImportError> {
        import(&json!({ name: entry }).to_string())
    }

    fn price(imported: &Imported, plugin: &str, model: &str) -> Price {
        *imported
            .table
            .plugin(plugin)
            .and_then(|models| models.get(model))
            .unwrap_or_else(|| panic!("no {plugin}/{model} in {:?}", imported.table))
    }

    #[test]
    fn per_token_prices_become_exact_per_million_prices() {
        for (per_token, per_million_text) in [
            (3e-06, "3"),
            (1.25e-08, "0.0125"),
            (4.2e-09, "0.0042"),
            (3.3e-07, "0.33"),
            (5.46875e-07, "0.546875"),
            (2.0345052083e-09, "0.0020345052083"),
            (1.5e-05, "15"),
            (0.0001375, "137.5"),
            (0.0, "0"),
        ] {
            let expected: f64 = per_million_text.parse().expect("a number");
            assert_eq!(per_million(per_token), Some(expected), "{per_token}");
        }
        // What multiplying would have stored instead.
        assert_ne!(1.25e-08 * 1e6, 0.0125);
    }

    #[test]
    fn an_image_model_is_priced_per_image_by_size_and_quality() {
        let dall_e = json!({"litellm_provider": "openai", "mode": "image_generation",
            "input_cost_per_pixel": 6.539e-08, "output_cost_per_pixel": 0.0});
        let imported = one("hd/1024-x-1792/dall-e-3", dall_e).unwrap();
        let hd = price(&imported, "openai", "dall-e-3 hd 1024x1792");
        let per_image = hd.per_image.expect("a price per image");
        assert!((per_image - 0.12).abs() < 1e-4, "{per_image}");
        assert_eq!((hd.input_per_mtok, hd.output_per_mtok), (0.0, 0.0));
        let small = json!({"litellm_provider": "openai", "mode": "image_generation",
            "input_cost_per_pixel": 2.4414e-07});
        let imported = one("256-x-256/dall-e-2", small).unwrap();
        let per_image = price(&imported, "openai", "dall-e-2 256x256").per_image;
        assert!((per_image.unwrap() - 0.016).abs() < 1e-4, "{per_image:?}");
        // Per image, on Vertex and Bedrock.
        let imagen = json!({"litellm_provider": "vertex_ai-image-models", "mode": "image_generation",
            "output_cost_per_image": 0.04});
        let imported = one("vertex_ai/imagen-4.0-generate-001", imagen).unwrap();
        let imagen = price(&imported, "vertex", "imagen-4.0-generate-001");
        assert_eq!(imagen.per_image, Some(0.04));
        // GPT Image by tokens, its output as LiteLLM names it: image tokens.
        let gpt_image = json!({"litellm_provider": "openai", "mode": "image_generation",
            "input_cost_per_token": 5e-06, "output_cost_per_image_token": 4e-05});
        let imported = one("gpt-image-1", gpt_image).unwrap();
        let gpt_image = price(&imported, "openai", "gpt-image-1");
        assert_eq!(
            (gpt_image.input_per_mtok, gpt_image.output_per_mtok),
            (5.0, 40.0)
        );
        assert_eq!(gpt_image.per_image, None);
        // No price the gateway can use: skipped, not refused; an absurd one refused.
        let none = json!({"litellm_provider": "openai", "mode": "image_generation"});
        assert!(one("dall-e-9", none).is_err(), "nothing to import");
        let absurd = json!({"litellm_provider": "openai", "mode": "image_generation",
            "input_cost_per_pixel": 1.0});
        let refused = one("hd/1024-x-1792/dall-e-3", absurd).expect_err("refused");
        assert!(
            refused.to_string().contains("input_cost_per_pixel"),
            "{refused}"
        );
    }

    #[test]
    fn a_transcription_model_is_priced_per_second_or_per_token() {
        let whisper = json!({"litellm_provider": "openai", "mode": "audio_transcription",
            "input_cost_per_second": 0.0001, "output_cost_per_second": 0.0001});
        let imported = one("whisper-1", whisper).unwrap();
        let whisper = price(&imported, "openai", "whisper-1");
        assert_eq!(whisper.per_audio_second, Some(0.0001));
        assert_eq!(
            (whisper.input_per_mtok, whisper.output_per_mtok),
            (0.0, 0.0)
        );
        let tokens = json!({"litellm_provider": "openai", "mode": "audio_transcription",
            "input_cost_per_token": 2.5e-06, "input_cost_per_audio_token": 6e-06,
            "output_cost_per_token": 1e-05});
        let imported = one("gpt-4o-transcribe", tokens).unwrap();
        let tokens = price(&imported, "openai", "gpt-4o-transcribe");
        assert_eq!(tokens.per_audio_second, None);
        assert_eq!(
            (
                tokens.input_per_mtok,
                tokens.audio_input_per_mtok,
                tokens.output_per_mtok
            ),
            (2.5, Some(6.0), 10.0)
        );
    }

    #[test]
    fn a_speech_model_is_priced_per_character_or_per_token() {
        // LiteLLM's tts-1 entry, as it is.
        let tts = json!({"input_cost_per_character": 1.5e-05, "litellm_provider": "openai",
            "mode": "audio_speech", "supported_endpoints": ["/v1/audio/speech"]});
        let imported = one("tts-1", tts).unwrap();
        let tts = price(&imported, "openai", "tts-1");
        assert_eq!(tts.per_character, Some(1.5e-05));
        assert_eq!((tts.input_per_mtok, tts.output_per_mtok), (0.0, 0.0));
        assert_eq!((tts.per_audio_second, tts.per_image), (None, None));
        // GPT-4o mini TTS by tokens: its audio output tokens are the completion tokens.
        let tokens = json!({"litellm_provider": "openai", "mode": "audio_speech",
            "input_cost_per_token": 2.5e-06, "output_cost_per_audio_token": 1.2e-05});
        let imported = one("gpt-4o-mini-tts", tokens).unwrap();
        let tokens = price(&imported, "openai", "gpt-4o-mini-tts");
        assert_eq!(
            (
                tokens.input_per_mtok,
                tokens.output_per_mtok,
                tokens.per_character
            ),
            (2.5, 12.0, None)
        );
        // A plain output price comes first, as for any model.
        let both = json!({"litellm_provider": "openai", "mode": "audio_speech",
            "input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05,
            "output_cost_per_audio_token": 1.2e-05});
        let imported = one("gpt-4o-mini-tts", both).unwrap();
        assert_eq!(
            price(&imported, "openai", "gpt-4o-mini-tts").output_per_mtok,
            10.0
        );
        // Audio tokens are another mode's output only where it says so: a chat model with no
        // output price is still skipped.
        let chat = json!({"litellm_provider": "openai", "mode": "chat",
            "input_cost_per_token": 2.5e-06, "output_cost_per_audio_token": 1.2e-05,
            "output_cost_per_token": null});
        let file = json!({"gpt-audio-x": chat, "tts-1": {"litellm_provider": "openai",
            "mode": "audio_speech", "input_cost_per_character": 1.5e-05}});
        let imported = import(&file.to_string()).unwrap();
        assert_eq!(
            imported.skipped,
            [("gpt-audio-x".to_owned(), Skip::NoOutputPrice)]
        );
        // A speech entry with neither price is skipped; an absurd one refused.
        let none = json!({"litellm_provider": "openai", "mode": "audio_speech"});
        let file = json!({"tts-9": none, "tts-1": {"litellm_provider": "openai",
            "mode": "audio_speech", "input_cost_per_character": 1.5e-05}});
        let imported = import(&file.to_string()).unwrap();
        assert_eq!(imported.skipped, [("tts-9".to_owned(), Skip::NotPerToken)]);
        let absurd = json!({"litellm_provider": "openai", "mode": "audio_speech",
            "input_cost_per_character": 5000.0});
        let refused = one("tts-1", absurd).expect_err("refused");
        assert!(
            refused.to_string().contains("input_cost_per_character"),
            "{refused}"
        );
    }

    #[test]
    fn a_rerank_is_priced_per_query_as_search_units() {
        let imported = one(
            "bedrock/cohere.rerank-v3-5:0",
            json!({"litellm_provider": "bedrock", "mode": "rerank",
                "input_cost_per_query": 0.002, "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0}),
        )
        .unwrap();
        let rerank = price(&imported, "bedrock", "cohere.rerank-v3-5:0");
        assert_eq!(rerank.per_search_unit, Some(0.002));
        assert_eq!((rerank.input_per_mtok, rerank.output_per_mtok), (0.0, 0.0));
        // Per query alone, and per token alone (Jina's and Voyage's are: no query price).
        let per_query = json!({"litellm_provider": "bedrock", "mode": "rerank",
            "input_cost_per_query": 0.001});
        let imported = one("amazon.rerank-v1:0", per_query).unwrap();
        let rerank = price(&imported, "bedrock", "amazon.rerank-v1:0");
        assert_eq!(rerank.per_search_unit, Some(0.001));
        let per_token = json!({"litellm_provider": "bedrock", "mode": "rerank",
            "input_cost_per_token": 2e-08});
        let imported = one("some.rerank-v1:0", per_token).unwrap();
        let rerank = price(&imported, "bedrock", "some.rerank-v1:0");
        assert_eq!(
            (rerank.input_per_mtok, rerank.per_search_unit),
            (0.02, None)
        );
        let absurd = json!({"litellm_provider": "bedrock", "mode": "rerank",
            "input_cost_per_query": 2000.0});
        let refused = one("amazon.rerank-v1:0", absurd).expect_err("refused");
        assert!(
            refused.to_string().contains("input_cost_per_query"),
            "{refused}"
        );
    }

    #[test]
    fn every_price_class_and_the_long_context_tier_are_read() {
        let imported = one(
            "gemini/gemini-2.5-pro",
            json!({
                "litellm_provider": "gemini", "mode": "chat",
                "input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05,
                "cache_read_input_token_cost": 1.25e-07,
                "input_cost_per_audio_token": 1.25e-06,
                "input_cost_per_token_above_200k_tokens": 2.5e-06,
                "output_cost_per_token_above_200k_tokens": 1.5e-05,
                "cache_read_input_token_cost_above_200k_tokens": 2.5e-07,
                "output_cost_per_reasoning_token": 1e-05,
                "max_input_tokens": 1048576
            }),
        )
        .expect("imports");
        assert_eq!(
            price(&imported, "gemini", "gemini-2.5-pro"),
            Price {
                input_per_mtok: 1.25,
                output_per_mtok: 10.0,
                cached_input_per_mtok: Some(0.125),
                cache_write_per_mtok: None,
                // The same as the input price: left out.
                audio_input_per_mtok: None,
                long_context: Some(LongContextPrice {
                    above_prompt_tokens: 200_000,
                    input_per_mtok: 2.5,
                    output_per_mtok: 15.0,
                    cached_input_per_mtok: Some(0.25),
                    cache_write_per_mtok: None,
                    audio_input_per_mtok: None,
                }),
                per_search_unit: None,
                per_image: None,
                per_audio_second: None,
                per_character: None,
            }
        );
        let imported = one(
            "anthropic.claude-haiku-5-5",
            json!({
                "litellm_provider": "bedrock_converse", "mode": "chat",
                "input_cost_per_token": 1e-07, "output_cost_per_token": 5e-07,
                "cache_read_input_token_cost": 1e-08, "cache_creation_input_token_cost": 1.25e-07,
                "cache_creation_input_token_cost_above_1hr": 2e-07,
                "input_cost_per_token_above_100k_tokens": 5e-07,
                "output_cost_per_token_above_100k_tokens": 2.5e-06,
                "input_cost_per_audio_token": 7e-07
            }),
        )
        .expect("imports");
        let haiku = price(&imported, "bedrock", "anthropic.claude-haiku-5-5");
        assert_eq!(
            (
                haiku.cached_input_per_mtok,
                haiku.cache_write_per_mtok,
                haiku.audio_input_per_mtok
            ),
            (Some(0.01), Some(0.125), Some(0.7))
        );
        // Cache prices the tier leaves out are those below it.
        assert_eq!(
            haiku.long_context,
            Some(LongContextPrice {
                above_prompt_tokens: 100_000,
                input_per_mtok: 0.5,
                output_per_mtok: 2.5,
                cached_input_per_mtok: Some(0.01),
                cache_write_per_mtok: Some(0.125),
                audio_input_per_mtok: Some(0.7),
            })
        );
    }

    #[test]
    fn providers_map_to_plugins_and_names_lose_their_prefixes() {
        let chat = |provider: &str| {
            json!({"litellm_provider": provider, "mode": "chat",
                "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06})
        };
        let file = json!({
            "gpt-4o": chat("openai"),
            "gpt-3.5-turbo-instruct": chat("text-completion-openai"),
            "claude-sonnet-4-5": chat("anthropic"),
            "gemini/gemini-2.5-flash": chat("gemini"),
            "gemini-2.5-flash": chat("vertex_ai-language-models"),
            "vertex_ai/claude-sonnet-4-5@20250929": chat("vertex_ai-anthropic_models"),
            "vertex_ai/meta/llama-4-scout-17b-16e-instruct-maas": chat("vertex_ai-llama_models"),
            "us.anthropic.claude-opus-4-6-v1": chat("bedrock_converse"),
            "meta.llama3-3-70b-instruct-v1:0": chat("bedrock"),
            "bedrock/us-east-1/anthropic.claude-3-haiku-20240307-v1:0": chat("bedrock"),
            "azure/gpt-4o": chat("azure"),
            "accounts/fireworks/models/llama": chat("fireworks_ai"),
        });
        let imported = import(&file.to_string()).expect("imports");
        let names: Vec<String> = imported
            .table
            .plugins
            .iter()
            .flat_map(|(plugin, models)| models.keys().map(move |m| format!("{plugin}/{m}")))
            .collect();
        assert_eq!(
            names,
            [
                "anthropic/claude-sonnet-4-5",
                "bedrock/meta.llama3-3-70b-instruct-v1:0",
                "bedrock/us.anthropic.claude-opus-4-6-v1",
                "gemini/gemini-2.5-flash",
                "openai/gpt-3.5-turbo-instruct",
                "openai/gpt-4o",
                "vertex/claude-sonnet-4-5@20250929",
                "vertex/gemini-2.5-flash",
                "vertex/meta/llama-4-scout-17b-16e-instruct-maas",
            ]
        );
        let mut skipped = imported.skipped.clone();
        skipped.sort();
        assert_eq!(
            skipped,
            [
                (
                    "accounts/fireworks/models/llama".to_owned(),
                    Skip::Provider("fireworks_ai".into())
                ),
                ("azure/gpt-4o".to_owned(), Skip::Provider("azure".into())),
                (
                    "bedrock/us-east-1/anthropic.claude-3-haiku-20240307-v1:0".to_owned(),
                    Skip::Qualified
                ),
            ]
        );
    }

    #[test]
    fn what_is_not_priced_per_token_is_skipped_with_its_reason() {
        let file = json!({
            "sample_spec": {"input_cost_per_token": 0.0, "max_tokens": "words, not a number",
                "litellm_provider": "one of https://docs.litellm.ai/docs/providers"},
            "dall-e-2-edit": {"litellm_provider": "openai", "mode": "image_edit",
                "output_cost_per_image": 0.02},
            "omni-moderation-latest": {"litellm_provider": "openai", "mode": "moderation",
                "input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
            "multimodalembedding": {"litellm_provider": "vertex_ai-embedding-models",
                "mode": "embedding", "input_cost_per_character": 2e-07},
            "text-embedding-005": {"litellm_provider": "vertex_ai-embedding-models",
                "mode": "embedding", "input_cost_per_character": 2.5e-08,
                "input_cost_per_token": 1e-07},
            "gpt-image-1": {"litellm_provider": "openai", "mode": "chat",
                "input_cost_per_token": 5e-06},
            "gemini-2.5-pro": {"litellm_provider": "vertex_ai-language-models",
                "input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05},
            "vertex_ai/gemini-2.5-pro": {"litellm_provider": "vertex_ai-language-models",
                "input_cost_per_token": 9e-06, "output_cost_per_token": 9e-05},
        });
        let imported = import(&file.to_string()).expect("imports");
        let mut skipped = imported.skipped.clone();
        skipped.sort();
        let reason = |name: &str, skip| (name.to_owned(), skip);
        assert_eq!(
            skipped,
            [
                reason("dall-e-2-edit", Skip::Mode("image_edit".into())),
                reason("gpt-image-1", Skip::NoOutputPrice),
                reason("multimodalembedding", Skip::NotPerToken),
                reason("omni-moderation-latest", Skip::Mode("moderation".into())),
                reason("vertex_ai/gemini-2.5-pro", Skip::Duplicate),
            ]
        );
        // An embedding model has no output price to give.
        assert_eq!(
            price(&imported, "vertex", "text-embedding-005"),
            Price::flat(0.1, 0.0)
        );
        // The bare name's entry wins over the prefixed one, whichever comes first.
        assert_eq!(
            price(&imported, "vertex", "gemini-2.5-pro").input_per_mtok,
            1.25
        );
    }

    #[test]
    fn a_malformed_file_or_entry_is_refused_naming_the_entry() {
        let refused = |text: &str| import(text).expect_err("refused").to_string();
        assert!(refused("{\"gpt-4o\": ").starts_with("not JSON"));
        assert!(refused("[1, 2]").contains("JSON object of model entries"));
        assert!(refused("{}").contains("no model the gateway can price"));
        let message = refused(
            &json!({"gpt-4o": {"litellm_provider": "openai", "mode": "chat",
                "input_cost_per_token": "2.5e-06", "output_cost_per_token": 1e-05}})
            .to_string(),
        );
        assert_eq!(
            message,
            "entry \"gpt-4o\": input_cost_per_token must be a number, not a string"
        );
        let message = refused(
            &json!({"gpt-4o": {"litellm_provider": "openai",
                "input_cost_per_token": -1e-06, "output_cost_per_token": 1e-05}})
            .to_string(),
        );
        assert!(
            message.starts_with("entry \"gpt-4o\": input_cost_per_token"),
            "{message}"
        );
        assert!(refused(&json!({"gpt-4o": 3}).to_string()).contains("not a JSON object"));
        assert!(
            refused(&json!({"gpt-4o": {"litellm_provider": 7}}).to_string())
                .contains("litellm_provider must be a string")
        );
        // Entries the gateway would not import are not held to its types.
        let imported = import(
            &json!({
                "gpt-4o": {"litellm_provider": "openai", "input_cost_per_token": 1e-06,
                    "output_cost_per_token": 1e-06},
                "bedrock/guardrails": {"litellm_provider": "bedrock", "mode": "guardrail",
                    "guardrail_cost_per_unit": {"units": 0.1}},
                "other/model": {"litellm_provider": "elsewhere", "input_cost_per_token": "?"}
            })
            .to_string(),
        )
        .expect("imports");
        assert_eq!(imported.skipped.len(), 2);
    }

    #[test]
    fn a_price_the_gateway_would_not_load_is_refused_naming_the_entry_and_the_value() {
        for (field, per_token) in [
            // Infinite per million tokens.
            ("input_cost_per_token", "1e308"),
            ("output_cost_per_token", "1.5"),
            ("cache_read_input_token_cost", "1e300"),
            ("input_cost_per_token_above_200k_tokens", "2"),
        ] {
            // Written as the list writes numbers (a JSON literal), beside sane prices.
            let mut entry = json!({"litellm_provider": "openai", "mode": "chat",
                "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06});
            entry[field] = serde_json::from_str(per_token).unwrap();
            // As the list wrote it, in serde_json's notation (`1e+308`).
            let per_token = entry[field].to_string();
            let file = json!({"gpt-4o": {"litellm_provider": "openai",
                "input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06},
                "gpt-absurd": entry});
            let message = import(&file.to_string()).expect_err(field).to_string();
            assert_eq!(
                message,
                format!(
                    "entry \"gpt-absurd\": {field} of {per_token} dollars a token is over the \
                     most a price may be: 1000000 dollars per million tokens (1 dollar a token)"
                )
            );
        }
        // The bound itself is a price.
        let mut at_bound = one(
            "gpt-dear",
            json!({"litellm_provider": "openai", "input_cost_per_token": 1,
                "output_cost_per_token": 1}),
        )
        .expect("imports");
        assert_eq!(
            price(&at_bound, "openai", "gpt-dear"),
            Price::flat(MAX_PER_MTOK, MAX_PER_MTOK)
        );
        at_bound.table.as_of = "2026-11-28".into();
        let text = at_bound.table.to_toml("");
        let loaded = crate::pricing::PriceTable::parse(&text)
            .unwrap_or_else(|e| panic!("what an import writes loads: {e}\n{text}"));
        assert_eq!(loaded, at_bound.table);
    }

    #[test]
    fn changes_count_added_changed_unchanged_and_removed_models() {
        let table = |entries: &[(&str, &str, f64)]| {
            let mut table = PriceTable::default();
            for (plugin, model, input) in entries {
                table
                    .plugins
                    .entry((*plugin).to_owned())
                    .or_default()
                    .insert((*model).to_owned(), Price::flat(*input, 1.0));
            }
            table
        };
        let old = table(&[
            ("openai", "a", 1.0),
            ("openai", "b", 1.0),
            ("vertex", "c", 1.0),
        ]);
        let new = table(&[
            ("openai", "a", 1.0),
            ("openai", "b", 2.0),
            ("bedrock", "d", 1.0),
        ]);
        assert_eq!(
            changes(&old, &new),
            Changes {
                added: vec!["bedrock/d".into()],
                changed: vec!["openai/b".into()],
                unchanged: 1,
                removed: vec!["vertex/c".into()],
            }
        );
    }
}
