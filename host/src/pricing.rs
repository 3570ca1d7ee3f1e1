//! What a call cost: each token class of its usage times that class's price.
//!
//! Prices come from four places, most specific model name first (see [`price_for`]): the
//! route's `pricing` table in the config, the config's `prices_file` (a table in the same format,
//! written by `gateway prices import` from the community price list, see [`litellm`], and
//! reloaded when it changes), the price table shipped with the gateway (`host/prices.toml`,
//! embedded at build time, dated by its `as_of`), and the models the plugin lists in its
//! `info()`.

pub mod litellm;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{LazyLock, Mutex};

use crate::config::Price;
use crate::plugins::types;
use crate::store::TokenUsage;

/// The shipped price table's text.
const SHIPPED_PRICES: &str = include_str!("../prices.toml");

/// Prices per plugin and model, with the date they were taken.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    /// The day the prices were read from the providers' pricing pages (`YYYY-MM-DD`).
    pub as_of: String,
    /// Plugin name (a route's `plugin`) -> model -> price. Every key of the file but `as_of`
    /// is a plugin: a misspelt plugin name shows as that plugin having no prices.
    pub plugins: BTreeMap<String, BTreeMap<String, Price>>,
}

/// What is wrong with a price table, in words that begin with the key they name.
#[derive(Debug, thiserror::Error)]
pub enum PriceTableError {
    /// Not TOML.
    #[error("{0}")]
    Syntax(#[source] Box<toml::de::Error>),
    #[error("as_of: {0}")]
    AsOf(&'static str),
    #[error("{0}: a plugin's prices must be a table of models")]
    NotATable(String),
    /// An entry that is not a price: `plugin."model": why`.
    #[error("{plugin}.{model:?}: {problem}")]
    Entry {
        plugin: String,
        model: String,
        problem: String,
    },
}

impl PriceTable {
    /// Parses a price table in the format of `host/prices.toml`.
    ///
    /// Entry by entry, so that a refusal names the plugin and model of the entry at fault (serde
    /// tells no place through a flattened map).
    pub fn parse(text: &str) -> Result<PriceTable, PriceTableError> {
        let document: toml::Table = text
            .parse()
            .map_err(|e| PriceTableError::Syntax(Box::new(e)))?;
        let mut table = PriceTable::default();
        for (key, value) in document {
            if key == "as_of" {
                table.as_of = match value {
                    toml::Value::String(date) => date,
                    _ => return Err(PriceTableError::AsOf("must be a date as a string")),
                };
                continue;
            }
            let toml::Value::Table(models) = value else {
                return Err(PriceTableError::NotATable(key));
            };
            let mut prices = BTreeMap::new();
            for (model, price) in models {
                let price: Price =
                    price
                        .try_into()
                        .map_err(|e: toml::de::Error| PriceTableError::Entry {
                            plugin: key.clone(),
                            model: model.clone(),
                            problem: e.message().trim_end().to_owned(),
                        })?;
                prices.insert(model, price);
            }
            table.plugins.insert(key, prices);
        }
        if table.as_of.is_empty() {
            return Err(PriceTableError::AsOf(
                "missing: the day the prices were read",
            ));
        }
        Ok(table)
    }

    /// The table shipped with the gateway. A unit test guarantees it parses; should it ever
    /// not, the error is logged once and calls fall back to route and plugin prices.
    pub fn shipped() -> &'static PriceTable {
        static SHIPPED: LazyLock<PriceTable> =
            LazyLock::new(|| match PriceTable::parse(SHIPPED_PRICES) {
                Ok(table) => table,
                Err(error) => {
                    tracing::error!(%error, "the shipped price table does not parse; ignoring it");
                    PriceTable::default()
                }
            });
        &SHIPPED
    }

    /// The prices of `plugin`'s models, if the table has any.
    pub fn plugin(&self, plugin: &str) -> Option<&BTreeMap<String, Price>> {
        self.plugins.get(plugin)
    }

    /// Reads a prices file (the config's `prices_file`).
    pub fn load(path: &Path) -> Result<PriceTable, PricesFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| PricesFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        PriceTable::parse(&text).map_err(|source| PricesFileError::Parse {
            path: path.display().to_string(),
            source,
        })
    }

    /// Models priced, every plugin's together.
    pub fn len(&self) -> usize {
        self.plugins.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table in the format of `host/prices.toml`, one line per model, after `header` (each
    /// of its lines made a comment). [`PriceTable::parse`] reads back the same table.
    pub fn to_toml(&self, header: &str) -> String {
        let mut text = String::new();
        for line in header.lines() {
            text.push_str(format!("# {line}").trim_end());
            text.push('\n');
        }
        text.push_str(&format!("\nas_of = {}\n", toml_string(&self.as_of)));
        for (plugin, models) in &self.plugins {
            let bare = !plugin.is_empty()
                && plugin
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if bare {
                text.push_str(&format!("\n[{plugin}]\n"));
            } else {
                text.push_str(&format!("\n[{}]\n", toml_string(plugin)));
            }
            for (model, price) in models {
                text.push_str(&format!("{} = {}\n", toml_string(model), price_toml(price)));
            }
        }
        text
    }
}

/// Why a prices file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PricesFileError {
    #[error("cannot read prices file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid prices file {path}: {source}")]
    Parse {
        path: String,
        source: PriceTableError,
    },
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// A price as a TOML inline table, in the field order of `host/prices.toml`.
fn price_toml(price: &Price) -> String {
    // `{:?}` is the shortest decimal that reads back as the same double, with a `.0` on whole
    // numbers (and an exponent for very small ones): a TOML float either way.
    let mut fields = vec![format!("input_per_mtok = {:?}", price.input_per_mtok)];
    let optional = [
        ("audio_input_per_mtok", price.audio_input_per_mtok),
        ("cached_input_per_mtok", price.cached_input_per_mtok),
        ("cache_write_per_mtok", price.cache_write_per_mtok),
    ];
    fields.extend(
        optional
            .iter()
            .filter_map(|(key, value)| value.map(|value| format!("{key} = {value:?}"))),
    );
    fields.push(format!("output_per_mtok = {:?}", price.output_per_mtok));
    if let Some(long) = &price.long_context {
        let mut tier = vec![
            format!("above_prompt_tokens = {}", long.above_prompt_tokens),
            format!("input_per_mtok = {:?}", long.input_per_mtok),
        ];
        let optional = [
            ("audio_input_per_mtok", long.audio_input_per_mtok),
            ("cached_input_per_mtok", long.cached_input_per_mtok),
            ("cache_write_per_mtok", long.cache_write_per_mtok),
        ];
        tier.extend(
            optional
                .iter()
                .filter_map(|(key, value)| value.map(|value| format!("{key} = {value:?}"))),
        );
        tier.push(format!("output_per_mtok = {:?}", long.output_per_mtok));
        fields.push(format!("long_context = {{ {} }}", tier.join(", ")));
    }
    let units = [
        ("per_search_unit", price.per_search_unit),
        ("per_image", price.per_image),
        ("per_audio_second", price.per_audio_second),
        ("per_character", price.per_character),
    ];
    fields.extend(
        (units.iter()).filter_map(|(key, value)| value.map(|value| format!("{key} = {value:?}"))),
    );
    format!("{{ {} }}", fields.join(", "))
}

/// The price of `model` on a route served by the plugin named `plugin`.
///
/// Sources, in order of precedence: the route's `pricing` table, the prices file's entries for
/// `plugin` (`imported`, the config's `prices_file`; empty without one), the shipped table's,
/// and the plugin's own `info()` list. The most specific name wins across all of them: an
/// exact name first, otherwise the longest known name that `model` extends with a `-suffix`
/// (dated snapshots such as `gpt-4o-mini-2024-07-18`) or an `@version` (Vertex's
/// `claude-sonnet-4@20250514`); for the same name, the earlier source wins. So a route's
/// `gpt-4o` price covers `gpt-4o-2024-08-06` but not `gpt-4o-mini`, which the shipped table
/// names exactly.
///
/// A Bedrock cross-region inference profile (`us.anthropic.claude-...`, `eu.`, `apac.`,
/// `global.`, ...) is priced by its own name where a source has it (some regions' profiles
/// cost more), else by the model's name without the geography.
pub fn price_for(
    route: &BTreeMap<String, Price>,
    imported: &PriceTable,
    plugin: &str,
    plugin_models: &[types::ModelPrice],
    model: &str,
) -> Option<Price> {
    let tables = [
        imported.plugin(plugin),
        PriceTable::shipped().plugin(plugin),
    ];
    price_in(route, &tables, plugin_models, model).or_else(|| {
        let base = without_geography(model)?;
        price_in(route, &tables, plugin_models, base)
    })
}

/// The price of the images `model` makes at `size` and `quality` (as the provider billed them,
/// else as the caller asked): the entry named `MODEL QUALITY SIZE` (`dall-e-3 hd 1024x1792`),
/// else `MODEL SIZE`, else `MODEL QUALITY` (each by its exact name, in the sources' order of
/// precedence), else the model's own as [`price_for`] finds it, which is its default size's and
/// quality's.
pub fn image_price_for(
    route: &BTreeMap<String, Price>,
    imported: &PriceTable,
    plugin: &str,
    plugin_models: &[types::ModelPrice],
    model: &str,
    size: Option<&str>,
    quality: Option<&str>,
) -> Option<Price> {
    let variants = [
        size.zip(quality)
            .map(|(size, quality)| format!("{model} {quality} {size}")),
        size.map(|size| format!("{model} {size}")),
        quality.map(|quality| format!("{model} {quality}")),
    ];
    // A variant is its exact name: by prefix, `dall-e-3 hd` would take `dall-e`'s price.
    let named = |name: &String| {
        let tables = [
            imported.plugin(plugin),
            PriceTable::shipped().plugin(plugin),
        ];
        (route.get(name).copied()).or_else(|| {
            tables
                .iter()
                .flatten()
                .find_map(|table| table.get(name).copied())
        })
    };
    (variants.iter().flatten())
        .find_map(named)
        .or_else(|| price_for(route, imported, plugin, plugin_models, model))
}

/// The geographies of Bedrock's cross-region inference profiles, the first part of their ids.
const PROFILE_GEOGRAPHIES: &[&str] = &[
    "us", "eu", "apac", "au", "jp", "ca", "in", "us-gov", "global",
];

/// `model` without the geography of a cross-region inference profile id
/// (`us.anthropic.claude-sonnet-4-20250514-v1:0` -> `anthropic.claude-sonnet-4-20250514-v1:0`):
/// a geography, then a provider and its model.
fn without_geography(model: &str) -> Option<&str> {
    let (geography, rest) = model.split_once('.')?;
    (PROFILE_GEOGRAPHIES.contains(&geography) && rest.contains('.')).then_some(rest)
}

/// [`price_for`] against given tables (in precedence order) instead of the imported and
/// shipped ones.
fn price_in(
    route: &BTreeMap<String, Price>,
    tables: &[Option<&BTreeMap<String, Price>>],
    plugin_models: &[types::ModelPrice],
    model: &str,
) -> Option<Price> {
    // Only `model` itself and its prefixes that end before a `-` or `@` can match it
    // (`specificity`): looked up in each table rather than every name in it compared, which
    // for the shipped table was a few hundred comparisons a request.
    let candidates = || {
        std::iter::once(model).chain(model.match_indices(['-', '@']).map(|(at, _)| &model[..at]))
    };
    let tables = std::iter::once(route).chain(tables.iter().flatten().copied());
    // Visited in precedence order: route, tables, plugin.
    let known = tables
        .flat_map(|table| candidates().filter_map(move |name| table.get_key_value(name)))
        .map(|(name, price)| (name.as_str(), *price))
        .chain(plugin_models.iter().map(|p| {
            (
                p.model.as_str(),
                Price::flat(p.input_per_mtok, p.output_per_mtok),
            )
        }));
    let mut best: Option<(usize, Price)> = None;
    for (name, price) in known {
        let Some(specificity) = specificity(name, model) else {
            continue;
        };
        // Only a strictly more specific name replaces the best so far, so for equally specific
        // names the earlier source wins.
        if best.is_none_or(|(best_specificity, _)| specificity > best_specificity) {
            best = Some((specificity, price));
        }
    }
    best.map(|(_, price)| price)
}

/// How well the known name `name` matches the requested `model`: exact beats everything, then
/// the longer of the names `model` extends with `-suffix` or `@version`. `None` when it does not
/// match.
///
/// A suffix that starts with a number of one or two digits is a new version of the model
/// (`claude-opus-4` → `claude-opus-4-1`, `claude-opus-4-1@20250805`), which has its own price;
/// snapshot suffixes are dates (`-2024-07-18`, `-20250929`, `-0613`, `-001`) or words
/// (`-latest`, `-preview-09-2025`), and Vertex's `@` versions (`@20250514`, `@default`).
fn specificity(name: &str, model: &str) -> Option<usize> {
    if name == model {
        return Some(usize::MAX);
    }
    let rest = model.strip_prefix(name)?;
    if let Some(version) = rest.strip_prefix('@') {
        return (!version.is_empty()).then_some(name.len());
    }
    let suffix = rest.strip_prefix('-')?;
    let first = suffix.split(['-', '@']).next().unwrap_or_default();
    let is_version =
        !first.is_empty() && first.len() <= 2 && first.bytes().all(|b| b.is_ascii_digit());
    (!suffix.is_empty() && !is_version).then_some(name.len())
}

/// The dollar cost of `usage` at `price`.
///
/// Each token class has its own price: prompt tokens read from the provider's cache at the
/// cached-input price, prompt tokens written to it at the cache-write price, the remaining
/// (uncached) prompt tokens at the input price, and completion tokens at the output price.
/// Where the price has an audio input price, the prompt's audio tokens are taken out of the
/// uncached ones first (no more than there are) and billed at it instead: providers do not tell
/// how much of the cached prompt was audio, so cached audio stays at the cached-input price.
/// Reasoning (thinking) tokens are part of the completion tokens and billed as output, as every
/// provider does. When the prompt is longer than the price's long-context threshold, the
/// long-context prices apply to every token. A rerank's search units cost the price's
/// `per_search_unit` each, a model's images its `per_image` each, a transcription's seconds
/// of audio its `per_audio_second` each, and a speech's characters of input its
/// `per_character` each, beside their tokens.
///
/// The plugins report the classes this way: `prompt_tokens` includes both
/// `cached_prompt_tokens` and `cache_creation_tokens` (OpenAI's `cached_tokens` and Gemini's
/// `cachedContentTokenCount` are part of their prompt counts already; the Anthropic plugin adds
/// `cache_read_input_tokens` and `cache_creation_input_tokens` to `input_tokens`); it includes
/// `audio_prompt_tokens` too (the Gemini plugin's `AUDIO` entry of `promptTokensDetails`).
pub fn cost(usage: &TokenUsage, price: Price) -> f64 {
    let rates = Rates::of(&price, usage.prompt_tokens);
    let cached = usage.cached_prompt_tokens.unwrap_or(0);
    let written = usage.cache_creation_tokens.unwrap_or(0);
    // Saturating: a provider reporting more cached than prompt tokens must not wrap around.
    let uncached = usage
        .prompt_tokens
        .saturating_sub(cached)
        .saturating_sub(written);
    // More audio than uncached tokens is capped likewise: the rest of the audio was cached.
    let audio = usage.audio_prompt_tokens.unwrap_or(0).min(uncached);
    let other = uncached - audio;
    let tokens = (f64::from(other) * rates.input
        + f64::from(audio) * rates.audio_input
        + f64::from(cached) * rates.cached_input
        + f64::from(written) * rates.cache_write
        + f64::from(usage.completion_tokens) * rates.output)
        / 1_000_000.0;
    let search_units = f64::from(usage.search_units.unwrap_or(0));
    let images = f64::from(usage.images.unwrap_or(0));
    let seconds = f64::from(usage.audio_seconds.unwrap_or(0));
    let characters = f64::from(usage.characters.unwrap_or(0));
    tokens
        + search_units * price.per_search_unit.unwrap_or(0.0)
        + images * price.per_image.unwrap_or(0.0)
        + seconds * price.per_audio_second.unwrap_or(0.0)
        + characters * price.per_character.unwrap_or(0.0)
}

/// The per-class prices that apply to one call.
struct Rates {
    input: f64,
    audio_input: f64,
    cached_input: f64,
    cache_write: f64,
    output: f64,
}

impl Rates {
    fn of(price: &Price, prompt_tokens: u32) -> Rates {
        match price.long_context {
            Some(long) if prompt_tokens > long.above_prompt_tokens => Rates {
                input: long.input_per_mtok,
                audio_input: long.audio_input_per_mtok.unwrap_or(long.input_per_mtok),
                cached_input: long.cached_input_per_mtok.unwrap_or(long.input_per_mtok),
                cache_write: long.cache_write_per_mtok.unwrap_or(long.input_per_mtok),
                output: long.output_per_mtok,
            },
            _ => Rates {
                input: price.input_per_mtok,
                audio_input: price.audio_input_per_mtok.unwrap_or(price.input_per_mtok),
                cached_input: price.cached_input_per_mtok.unwrap_or(price.input_per_mtok),
                cache_write: price.cache_write_per_mtok.unwrap_or(price.input_per_mtok),
                output: price.output_per_mtok,
            },
        }
    }
}

/// Most (route, model) pairs [`warn_unpriced`] remembers: the model name comes from the
/// caller, so without a bound every invented name would be kept for the life of the process.
const MAX_WARNED: usize = 1024;

/// Logs an unknown price once per route and model, not once per request. After
/// [`MAX_WARNED`] distinct pairs, says so once and logs further ones only at debug level.
pub fn warn_unpriced(route: &str, model: &str) {
    static WARNED: Mutex<Option<WarnedOnce>> = Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    match warned
        .get_or_insert_with(|| WarnedOnce::new(MAX_WARNED))
        .note(route, model)
    {
        Novelty::New => tracing::warn!(
            route,
            model,
            "no price known for this model: its cost is recorded as unknown"
        ),
        Novelty::Seen => {}
        Novelty::FirstBeyondBound => tracing::warn!(
            route,
            model,
            "no price known for this model: its cost is recorded as unknown; {MAX_WARNED} \
             unpriced models have been reported, further ones are logged at debug level only"
        ),
        Novelty::BeyondBound => tracing::debug!(
            route,
            model,
            "no price known for this model: its cost is recorded as unknown"
        ),
    }
}

/// What [`WarnedOnce::note`] makes of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Novelty {
    /// Not seen before: now remembered.
    New,
    /// Remembered already.
    Seen,
    /// Not remembered, and the set is full: the first such pair.
    FirstBeyondBound,
    /// Not remembered, and the set is full, as it was for an earlier pair.
    BeyondBound,
}

/// A set of (route, model) pairs that stops growing at its bound. Full, it keeps what it has
/// rather than evict: evicting would warn again about pairs a caller cycles through.
struct WarnedOnce {
    /// Route -> models: looked up by borrowed names, so a pair seen before costs no allocation.
    pairs: HashMap<String, HashSet<String>>,
    len: usize,
    bound: usize,
    overflowed: bool,
}

impl WarnedOnce {
    fn new(bound: usize) -> WarnedOnce {
        WarnedOnce {
            pairs: HashMap::new(),
            len: 0,
            bound,
            overflowed: false,
        }
    }

    fn note(&mut self, route: &str, model: &str) -> Novelty {
        if self
            .pairs
            .get(route)
            .is_some_and(|models| models.contains(model))
        {
            return Novelty::Seen;
        }
        if self.len < self.bound {
            self.pairs
                .entry(route.to_owned())
                .or_default()
                .insert(model.to_owned());
            self.len += 1;
            Novelty::New
        } else if self.overflowed {
            Novelty::BeyondBound
        } else {
            self.overflowed = true;
            Novelty::FirstBeyondBound
        }
    }

    /// Pairs remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.pairs.values().map(HashSet::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LongContextPrice;

    fn price(i: f64, o: f64) -> Price {
        Price::flat(i, o)
    }

    fn cached_price(input: f64, output: f64, cached: f64, write: f64) -> Price {
        Price {
            cached_input_per_mtok: Some(cached),
            cache_write_per_mtok: Some(write),
            ..Price::flat(input, output)
        }
    }

    fn usage(prompt: u32, completion: u32) -> TokenUsage {
        TokenUsage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            ..Default::default()
        }
    }

    fn plugin_model(model: &str, input: f64, output: f64) -> types::ModelPrice {
        types::ModelPrice {
            model: model.into(),
            input_per_mtok: input,
            output_per_mtok: output,
        }
    }

    fn assert_close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() <= 1e-12 * expected.abs().max(1.0),
            "{actual} != {expected}"
        );
    }

    #[test]
    fn exact_then_longest_dated_prefix_then_plugin() {
        let route = BTreeMap::from([
            ("gpt-4o".to_owned(), price(2.5, 10.0)),
            ("gpt-4o-mini".to_owned(), price(0.15, 0.6)),
        ]);
        let plugin = vec![plugin_model("o4-mini", 1.1, 4.4)];
        let find = |model| price_in(&route, &[], &plugin, model);
        assert_eq!(find("gpt-4o"), Some(price(2.5, 10.0)));
        assert_eq!(find("gpt-4o-mini-2024-07-18"), Some(price(0.15, 0.6)));
        assert_eq!(find("o4-mini"), Some(price(1.1, 4.4)));
        assert_eq!(find("gpt-4omega"), None);
        assert_eq!(find("gpt-4o-"), None);
    }

    #[test]
    fn route_beats_table_beats_plugin_for_the_same_name() {
        let route = BTreeMap::from([("m".to_owned(), price(1.0, 1.0))]);
        let table = BTreeMap::from([
            ("m".to_owned(), price(2.0, 2.0)),
            ("t".to_owned(), price(2.0, 2.0)),
        ]);
        let plugin = vec![
            plugin_model("m", 3.0, 3.0),
            plugin_model("t", 3.0, 3.0),
            plugin_model("p", 3.0, 3.0),
        ];
        let find = |model| price_in(&route, &[Some(&table)], &plugin, model);
        assert_eq!(find("m"), Some(price(1.0, 1.0)));
        assert_eq!(find("m-2025-01-01"), Some(price(1.0, 1.0)));
        assert_eq!(find("t"), Some(price(2.0, 2.0)));
        assert_eq!(find("p-latest"), Some(price(3.0, 3.0)));
        assert_eq!(find("q"), None);
    }

    #[test]
    fn the_most_specific_name_wins_across_sources() {
        // The route prices gpt-4o; gpt-4o-mini is a different model, priced by the table.
        let route = BTreeMap::from([("gpt-4o".to_owned(), price(9.0, 9.0))]);
        let table = BTreeMap::from([("gpt-4o-mini".to_owned(), price(0.15, 0.6))]);
        let find = |model| price_in(&route, &[Some(&table)], &[], model);
        assert_eq!(find("gpt-4o-mini"), Some(price(0.15, 0.6)));
        assert_eq!(find("gpt-4o-mini-2024-07-18"), Some(price(0.15, 0.6)));
        assert_eq!(find("gpt-4o-2024-08-06"), Some(price(9.0, 9.0)));
    }

    #[test]
    fn a_short_numeric_suffix_is_a_new_version_not_a_snapshot() {
        let table = BTreeMap::from([
            ("claude-opus-4".to_owned(), price(15.0, 75.0)),
            ("gemini-2.0-flash".to_owned(), price(0.1, 0.4)),
            ("gpt-4".to_owned(), price(30.0, 60.0)),
        ]);
        let find = |model| price_in(&BTreeMap::new(), &[Some(&table)], &[], model);
        assert_eq!(find("claude-opus-4-1"), None);
        assert_eq!(find("claude-opus-4-6-20260101"), None);
        assert_eq!(find("claude-opus-4-20250514"), Some(price(15.0, 75.0)));
        assert_eq!(find("gemini-2.0-flash-001"), Some(price(0.1, 0.4)));
        assert_eq!(find("gpt-4-0613"), Some(price(30.0, 60.0)));
        assert_eq!(find("gpt-4-latest"), Some(price(30.0, 60.0)));
    }

    #[test]
    fn vertex_at_versions_are_snapshots_of_their_model() {
        let table = BTreeMap::from([
            ("claude-sonnet-4".to_owned(), price(3.0, 15.0)),
            ("claude-opus-4".to_owned(), price(15.0, 75.0)),
            ("claude-opus-4-1".to_owned(), price(15.0, 75.0)),
            ("claude-opus-4-5".to_owned(), price(5.0, 25.0)),
        ]);
        let find = |model| price_in(&BTreeMap::new(), &[Some(&table)], &[], model);
        assert_eq!(find("claude-sonnet-4@20250514"), Some(price(3.0, 15.0)));
        assert_eq!(find("claude-opus-4-5@20251101"), Some(price(5.0, 25.0)));
        assert_eq!(find("claude-opus-4-1@20250805"), Some(price(15.0, 75.0)));
        // A new version with an @ version is not the older model's snapshot.
        assert_eq!(find("claude-opus-4-6@default"), None);
        assert_eq!(find("claude-sonnet-4@"), None);
    }

    fn table_of(entries: &[(&str, &str, Price)]) -> PriceTable {
        let mut table = PriceTable {
            as_of: "2026-11-27".into(),
            ..PriceTable::default()
        };
        for (plugin, model, price) in entries {
            table
                .plugins
                .entry((*plugin).to_owned())
                .or_default()
                .insert((*model).to_owned(), *price);
        }
        table
    }

    #[test]
    fn cross_region_profiles_are_priced_by_their_own_name_else_by_the_model() {
        let base = "anthropic.claude-sonnet-4-20250514-v1:0";
        let imported = table_of(&[
            ("bedrock", base, price(3.0, 15.0)),
            ("bedrock", "us.anthropic.claude-test-9-v1", price(5.5, 27.5)),
            ("bedrock", "anthropic.claude-test-9-v1", price(5.0, 25.0)),
        ]);
        let find = |model: &str| price_for(&BTreeMap::new(), &imported, "bedrock", &[], model);
        for profile in ["us", "eu", "apac", "global", "us-gov", "jp"] {
            assert_eq!(
                find(&format!("{profile}.{base}")),
                Some(price(3.0, 15.0)),
                "{profile}"
            );
        }
        assert_eq!(
            find("us.anthropic.claude-test-9-v1"),
            Some(price(5.5, 27.5))
        );
        assert_eq!(
            find("eu.anthropic.claude-test-9-v1"),
            Some(price(5.0, 25.0))
        );
        // Not a geography, or no provider after it.
        assert_eq!(find(&format!("xx.{base}")), None);
        assert_eq!(without_geography("us.model"), None);
        // A route's price of the profile itself comes first.
        let route = BTreeMap::from([(format!("us.{base}"), price(1.0, 1.0))]);
        assert_eq!(
            price_for(&route, &imported, "bedrock", &[], &format!("us.{base}")),
            Some(price(1.0, 1.0))
        );
    }

    #[test]
    fn the_prices_file_comes_after_the_route_and_before_the_shipped_table() {
        let imported = table_of(&[
            ("openai", "gpt-4o-mini", price(1.0, 2.0)),
            ("openai", "my-model", price(3.0, 4.0)),
        ]);
        let find = |route: &BTreeMap<String, Price>, model: &str| {
            price_for(route, &imported, "openai", &[], model)
        };
        let none = BTreeMap::new();
        assert_eq!(find(&none, "gpt-4o-mini-2024-07-18"), Some(price(1.0, 2.0)));
        assert_eq!(find(&none, "my-model"), Some(price(3.0, 4.0)));
        // What the file does not have: the shipped table's.
        assert_eq!(find(&none, "gpt-4.1").map(|p| p.input_per_mtok), Some(2.0));
        let route = BTreeMap::from([("gpt-4o-mini".to_owned(), price(9.0, 9.0))]);
        assert_eq!(find(&route, "gpt-4o-mini"), Some(price(9.0, 9.0)));
        // Another plugin's entries do not price this one's models.
        assert_eq!(
            price_for(&none, &imported, "anthropic", &[], "my-model"),
            None
        );
    }

    #[test]
    fn a_written_table_reads_back_the_same() {
        let full = Price {
            audio_input_per_mtok: Some(0.7),
            long_context: Some(LongContextPrice {
                above_prompt_tokens: 200_000,
                input_per_mtok: 2.5,
                output_per_mtok: 15.0,
                cached_input_per_mtok: Some(0.25),
                cache_write_per_mtok: Some(0.0125),
                audio_input_per_mtok: None,
            }),
            ..cached_price(1.25, 10.0, 0.125, 1.5625)
        };
        let table = table_of(&[
            ("vertex", "claude-sonnet-4@20250514", full),
            (
                "bedrock",
                "us.amazon.nova-micro-v1:0",
                cached_price(0.035, 0.14, 0.00875, 0.035),
            ),
            ("openai", "odd \"name\" \\ here", price(1e-9, 0.0)),
            ("some plugin", "m", price(1.0, 2.0)),
            (
                "openai",
                "rerank-v3.5",
                Price {
                    per_search_unit: Some(0.002),
                    ..price(0.0, 0.0)
                },
            ),
            (
                "openai",
                "dall-e-3 hd 1024x1792",
                Price {
                    per_image: Some(0.12),
                    ..price(0.0, 0.0)
                },
            ),
            (
                "openai",
                "whisper-1",
                Price {
                    per_audio_second: Some(0.0001),
                    ..price(0.0, 0.0)
                },
            ),
            (
                "openai",
                "tts-1",
                Price {
                    per_character: Some(0.000015),
                    ..price(0.0, 0.0)
                },
            ),
        ]);
        let text = table.to_toml("Written by a test.\nSecond line.");
        assert!(
            text.starts_with("# Written by a test.\n# Second line.\n"),
            "{text}"
        );
        assert!(text.contains("\n[bedrock]\n"), "{text}");
        let read = PriceTable::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(read.as_of, table.as_of);
        assert_eq!(read.plugins, table.plugins);
        assert!(text.contains(
            "\"us.amazon.nova-micro-v1:0\" = { input_per_mtok = 0.035, cached_input_per_mtok = 0.00875, cache_write_per_mtok = 0.035, output_per_mtok = 0.14 }"
        ), "{text}");
        // The units a price bills by beside tokens are written too (a rerank's were not).
        assert!(text.contains(
            "\"rerank-v3.5\" = { input_per_mtok = 0.0, output_per_mtok = 0.0, per_search_unit = 0.002 }"
        ), "{text}");
        assert!(
            text.contains("\"whisper-1\" = { input_per_mtok = 0.0, output_per_mtok = 0.0, per_audio_second = 0.0001 }"),
            "{text}"
        );
        assert!(
            text.contains("\"tts-1\" = { input_per_mtok = 0.0, output_per_mtok = 0.0, per_character = 1.5e-5 }"),
            "{text}"
        );
    }

    #[test]
    fn an_image_is_priced_by_its_size_and_quality_entry_else_by_its_model_s() {
        let per_image = |dollars| Price {
            per_image: Some(dollars),
            ..price(0.0, 0.0)
        };
        let imported = table_of(&[
            ("p", "dall-e-3", per_image(0.04)),
            ("p", "dall-e-3 hd", per_image(0.08)),
            ("p", "dall-e-3 1024x1792", per_image(0.08)),
            ("p", "dall-e-3 hd 1024x1792", per_image(0.12)),
            ("p", "dall-e", per_image(9.0)),
        ]);
        let none = BTreeMap::new();
        let at = |route: &BTreeMap<String, Price>, model, size, quality| {
            image_price_for(route, &imported, "p", &[], model, size, quality)
                .and_then(|price| price.per_image)
        };
        let wide = Some("1024x1792");
        assert_eq!(at(&none, "dall-e-3", wide, Some("hd")), Some(0.12));
        assert_eq!(at(&none, "dall-e-3", wide, Some("standard")), Some(0.08));
        assert_eq!(
            at(&none, "dall-e-3", Some("1024x1024"), Some("hd")),
            Some(0.08)
        );
        assert_eq!(at(&none, "dall-e-3", Some("1024x1024"), None), Some(0.04));
        assert_eq!(at(&none, "dall-e-3", None, None), Some(0.04));
        // A snapshot takes its model's price, not a variant's by prefix.
        assert_eq!(at(&none, "dall-e-3-2025", wide, Some("hd")), Some(0.04));
        // The route's entry comes first, as for any model.
        let route = BTreeMap::from([("dall-e-3 hd".to_owned(), per_image(0.5))]);
        assert_eq!(
            at(&route, "dall-e-3", Some("1024x1024"), Some("hd")),
            Some(0.5)
        );
        // Images beside tokens: 3 images at 0.08 and a million prompt tokens at 1.
        let usage = TokenUsage {
            prompt_tokens: 1_000_000,
            total_tokens: 1_000_000,
            images: Some(3),
            ..TokenUsage::default()
        };
        let both = Price {
            per_image: Some(0.08),
            ..price(1.0, 0.0)
        };
        assert!((cost(&usage, both) - 1.24).abs() < 1e-9);
    }

    #[test]
    fn speech_is_priced_per_character_beside_its_tokens() {
        // tts-1: 1,200 characters at $15 a million.
        let speech = TokenUsage {
            characters: Some(1200),
            ..TokenUsage::default()
        };
        let tts = Price {
            per_character: Some(0.000015),
            ..price(0.0, 0.0)
        };
        assert_close(cost(&speech, tts), 1200.0 * 0.000015);
        // Beside tokens, and beside the other units, each at its own price.
        let both = TokenUsage {
            characters: Some(1000),
            audio_seconds: Some(10),
            ..usage(1_000_000, 0)
        };
        let units = Price {
            per_character: Some(0.00003),
            per_audio_second: Some(0.0001),
            ..price(1.0, 0.0)
        };
        assert_close(cost(&both, units), 1.0 + 1000.0 * 0.00003 + 10.0 * 0.0001);
        // Without a price per character, characters cost nothing.
        assert_close(cost(&speech, Price::flat(1.0, 1.0)), 0.0);
    }

    #[test]
    fn a_price_per_character_is_a_dollar_amount_the_table_checks() {
        let parse = |value: &str| {
            PriceTable::parse(&format!(
                "as_of = \"d\"\n[openai]\n\"tts-1\" = {{ input_per_mtok = 0.0, \
                 output_per_mtok = 0.0, per_character = {value} }}\n"
            ))
        };
        let table = parse("0.000015").expect("a price");
        assert_eq!(
            table.plugins["openai"]["tts-1"].per_character,
            Some(0.000015)
        );
        for bad in ["-0.000015", "inf", "nan", "1e9"] {
            let message = parse(bad).expect_err(bad).to_string();
            assert!(
                message.starts_with("openai.\"tts-1\": ")
                    && message
                        .contains("per_character must be a finite number of dollars per character"),
                "{bad}: {message}"
            );
        }
    }

    #[test]
    fn a_table_that_does_not_parse_names_the_entry_at_fault() {
        let refused = |text: &str| PriceTable::parse(text).expect_err("refused").to_string();
        let message = refused(
            "as_of = \"2026-11-27\"\n[openai]\n\"ok\" = { input_per_mtok = 1.0, output_per_mtok = 1.0 }\n\
             \"gpt-x\" = { input_per_mtok = \"3\", output_per_mtok = 1.0 }\n",
        );
        assert!(
            message.starts_with("openai.\"gpt-x\": ") && message.contains("string"),
            "{message}"
        );
        let message = refused(
            "as_of = \"d\"\n[openai]\n\"m\" = { input_per_mtok = -1.0, output_per_mtok = 1.0 }\n",
        );
        assert!(
            message.contains("input_per_mtok must be a finite number"),
            "{message}"
        );
        let message = refused(
            "as_of = \"d\"\n[openai]\n\"m\" = { input_per_mtk = 1.0, output_per_mtok = 1.0 }\n",
        );
        assert!(message.contains("input_per_mtk"), "{message}");
        assert!(refused("[openai]\n").starts_with("as_of: missing"));
        assert!(refused("as_of = \"d\"\nopenai = 3\n").starts_with("openai: "));
        assert!(refused("as_of = ").contains("TOML parse error"));
    }

    #[test]
    fn cost_is_per_million_tokens() {
        let c = cost(&usage(1000, 500), price(0.15, 0.6));
        assert_close(c, (1000.0 * 0.15 + 500.0 * 0.6) / 1e6);
    }

    #[test]
    fn each_token_class_has_its_own_price() {
        // Anthropic-style: 100 plain input, 1000 cache reads, 200 cache writes, 50 output.
        let anthropic = TokenUsage {
            cached_prompt_tokens: Some(1000),
            cache_creation_tokens: Some(200),
            ..usage(1300, 50)
        };
        assert_close(
            cost(&anthropic, cached_price(3.0, 15.0, 0.30, 3.75)),
            (100.0 * 3.0 + 1000.0 * 0.30 + 200.0 * 3.75 + 50.0 * 15.0) / 1e6,
        );
        // OpenAI-style: cached tokens inside the prompt, reasoning inside the completion.
        let openai = TokenUsage {
            cached_prompt_tokens: Some(1024),
            reasoning_tokens: Some(300),
            ..usage(2048, 400)
        };
        assert_close(
            cost(
                &openai,
                Price {
                    cached_input_per_mtok: Some(0.075),
                    ..price(0.15, 0.60)
                },
            ),
            (1024.0 * 0.15 + 1024.0 * 0.075 + 400.0 * 0.60) / 1e6,
        );
    }

    #[test]
    fn absent_cache_prices_fall_back_to_the_input_price() {
        let u = TokenUsage {
            cached_prompt_tokens: Some(600),
            cache_creation_tokens: Some(100),
            ..usage(1000, 10)
        };
        assert_close(cost(&u, price(2.0, 8.0)), (1000.0 * 2.0 + 10.0 * 8.0) / 1e6);
    }

    #[test]
    fn more_cached_than_prompt_tokens_does_not_wrap() {
        let u = TokenUsage {
            cached_prompt_tokens: Some(500),
            ..usage(100, 0)
        };
        assert_close(
            cost(&u, cached_price(1.0, 1.0, 0.5, 1.0)),
            500.0 * 0.5 / 1e6,
        );
    }

    #[test]
    fn long_prompts_switch_every_class_to_the_long_context_prices() {
        let p = Price {
            long_context: Some(LongContextPrice {
                above_prompt_tokens: 200_000,
                input_per_mtok: 2.50,
                output_per_mtok: 15.0,
                cached_input_per_mtok: Some(0.25),
                cache_write_per_mtok: None,
                audio_input_per_mtok: None,
            }),
            ..cached_price(1.25, 10.0, 0.125, 1.25)
        };
        let at_threshold = TokenUsage {
            cached_prompt_tokens: Some(100_000),
            ..usage(200_000, 1000)
        };
        assert_close(
            cost(&at_threshold, p),
            (100_000.0 * 1.25 + 100_000.0 * 0.125 + 1000.0 * 10.0) / 1e6,
        );
        let above = TokenUsage {
            cached_prompt_tokens: Some(100_000),
            cache_creation_tokens: Some(1),
            ..usage(200_001, 1000)
        };
        assert_close(
            cost(&above, p),
            // The long tier has no cache-write price: its input price applies.
            (100_000.0 * 2.50 + 100_000.0 * 0.25 + 2.50 + 1000.0 * 15.0) / 1e6,
        );
    }

    /// Gemini 2.5 Flash: text 0.30, audio 1.00, cache reads 0.03, output 2.50.
    fn with_audio(audio: Option<f64>) -> Price {
        Price {
            audio_input_per_mtok: audio,
            ..cached_price(0.30, 2.50, 0.03, 0.30)
        }
    }

    #[test]
    fn audio_prompt_tokens_are_billed_at_the_audio_price() {
        // 1000 prompt tokens, 600 of them audio; 10 output.
        let u = TokenUsage {
            audio_prompt_tokens: Some(600),
            image_prompt_tokens: Some(100),
            ..usage(1000, 10)
        };
        assert_close(
            cost(&u, with_audio(Some(1.00))),
            // Images are billed as text.
            (400.0 * 0.30 + 600.0 * 1.00 + 10.0 * 2.50) / 1e6,
        );
        // Cached tokens are taken out first, at the cached price whatever their modality; the
        // audio is billed out of the uncached rest.
        let cached = TokenUsage {
            cached_prompt_tokens: Some(200),
            ..u
        };
        assert_close(
            cost(&cached, with_audio(Some(1.00))),
            (200.0 * 0.30 + 600.0 * 1.00 + 200.0 * 0.03 + 10.0 * 2.50) / 1e6,
        );
    }

    #[test]
    fn an_absent_audio_price_is_the_input_price() {
        let u = TokenUsage {
            audio_prompt_tokens: Some(600),
            ..usage(1000, 10)
        };
        assert_close(
            cost(&u, with_audio(None)),
            (1000.0 * 0.30 + 10.0 * 2.50) / 1e6,
        );
        assert_eq!(
            cost(&u, with_audio(None)),
            cost(&usage(1000, 10), with_audio(None))
        );
        // No audio tokens: the audio price changes nothing.
        assert_eq!(
            cost(&usage(1000, 10), with_audio(Some(1.00))),
            cost(&usage(1000, 10), with_audio(None))
        );
    }

    #[test]
    fn more_audio_than_uncached_tokens_saturates() {
        // 1000 prompt tokens, 900 of them cached; the provider says 600 were audio: only the
        // 100 uncached ones can be billed at the audio price.
        let u = TokenUsage {
            cached_prompt_tokens: Some(900),
            audio_prompt_tokens: Some(600),
            ..usage(1000, 10)
        };
        assert_close(
            cost(&u, with_audio(Some(1.00))),
            (100.0 * 1.00 + 900.0 * 0.03 + 10.0 * 2.50) / 1e6,
        );
        // More audio than prompt tokens.
        let over = TokenUsage {
            audio_prompt_tokens: Some(u32::MAX),
            ..usage(50, 0)
        };
        assert_close(cost(&over, with_audio(Some(1.00))), 50.0 * 1.00 / 1e6);
    }

    #[test]
    fn the_long_context_tier_has_its_own_audio_price() {
        let long = |audio| LongContextPrice {
            above_prompt_tokens: 1000,
            input_per_mtok: 2.0,
            output_per_mtok: 4.0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            audio_input_per_mtok: audio,
        };
        let u = TokenUsage {
            audio_prompt_tokens: Some(600),
            ..usage(1001, 10)
        };
        let p = |audio| Price {
            long_context: Some(long(audio)),
            ..with_audio(Some(1.00))
        };
        assert_close(
            cost(&u, p(Some(5.0))),
            (401.0 * 2.0 + 600.0 * 5.0 + 10.0 * 4.0) / 1e6,
        );
        // Absent in the tier: the tier's input price, not the shorter tier's audio price.
        assert_close(cost(&u, p(None)), (1001.0 * 2.0 + 10.0 * 4.0) / 1e6);
    }

    #[test]
    fn shipped_table_parses_is_dated_and_prices_each_provider() {
        let table = PriceTable::parse(SHIPPED_PRICES).expect("host/prices.toml parses");
        let date = table.as_of.as_bytes();
        assert!(
            date.len() == 10
                && date[4] == b'-'
                && date[7] == b'-'
                && date
                    .iter()
                    .enumerate()
                    .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit()),
            "as_of must be YYYY-MM-DD: {:?}",
            table.as_of
        );
        for plugin in ["openai", "anthropic", "gemini", "bedrock", "vertex"] {
            assert!(
                table.plugin(plugin).is_some_and(|m| !m.is_empty()),
                "no prices for {plugin}"
            );
        }
        let get = |plugin: &str, model: &str| {
            price_in(&BTreeMap::new(), &[table.plugin(plugin)], &[], model)
                .unwrap_or_else(|| panic!("no price for {plugin}/{model}"))
        };
        let gpt4o_mini = get("openai", "gpt-4o-mini-2024-07-18");
        assert_eq!(
            (
                gpt4o_mini.input_per_mtok,
                gpt4o_mini.cached_input_per_mtok,
                gpt4o_mini.output_per_mtok
            ),
            (0.15, Some(0.075), 0.60)
        );
        // Anthropic: cache reads 0.1x input, 5-minute cache writes 1.25x.
        let sonnet = get("anthropic", "claude-sonnet-4-5-20250929");
        assert_eq!(
            (
                sonnet.input_per_mtok,
                sonnet.output_per_mtok,
                sonnet.cached_input_per_mtok,
                sonnet.cache_write_per_mtok
            ),
            (3.0, 15.0, Some(0.30), Some(3.75))
        );
        let flash = get("gemini", "gemini-2.5-flash");
        assert_eq!(
            (
                flash.input_per_mtok,
                flash.output_per_mtok,
                flash.cached_input_per_mtok
            ),
            (0.30, 2.50, Some(0.03))
        );
        assert_eq!(get("gemini", "gemini-2.5-flash-lite").input_per_mtok, 0.10);
        // Audio input, where Google prices it apart from text, image and video.
        for (model, audio) in [
            ("gemini-2.5-flash", Some(1.00)),
            ("gemini-2.5-flash-lite", Some(0.30)),
            ("gemini-2.0-flash-001", Some(0.70)),
            ("gemini-2.5-pro", None),
        ] {
            assert_eq!(get("gemini", model).audio_input_per_mtok, audio, "{model}");
        }
        assert_eq!(get("openai", "gpt-4o-mini").audio_input_per_mtok, None);
        assert_eq!(get("gemini", "gemini-2.5-pro").input_per_mtok, 1.25);
        for model in [
            "gpt-4.1-mini",
            "gpt-5-nano",
            "o3",
            "o4-mini",
            "text-embedding-3-small",
        ] {
            get("openai", model);
        }
        // The first gpt-4o snapshot has its own price; later ones are gpt-4o's.
        assert_eq!(get("openai", "gpt-4o-2024-05-13").input_per_mtok, 5.0);
        assert_eq!(get("openai", "gpt-4o-2024-11-20").input_per_mtok, 2.5);
    }

    #[test]
    fn shipped_table_prices_speech_by_the_character_or_by_tokens() {
        let get = |model: &str| {
            price_for(
                &BTreeMap::new(),
                &PriceTable::default(),
                "openai",
                &[],
                model,
            )
            .unwrap_or_else(|| panic!("no price for openai/{model}"))
        };
        for (model, per_character) in [("tts-1", 0.000015), ("tts-1-hd", 0.00003)] {
            let price = get(model);
            assert_eq!(price.per_character, Some(per_character), "{model}");
            assert_eq!(
                (price.input_per_mtok, price.output_per_mtok),
                (0.0, 0.0),
                "{model}"
            );
        }
        // By tokens, its audio as completion tokens; its snapshots too, not as gpt-4o-mini.
        for model in ["gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-03-20"] {
            let price = get(model);
            assert_eq!(
                (
                    price.input_per_mtok,
                    price.output_per_mtok,
                    price.per_character
                ),
                (0.60, 12.00, None),
                "{model}"
            );
        }
    }

    #[test]
    fn shipped_table_prices_bedrock_and_vertex_models() {
        let get = |plugin: &str, model: &str| {
            price_for(&BTreeMap::new(), &PriceTable::default(), plugin, &[], model)
                .unwrap_or_else(|| panic!("no price for {plugin}/{model}"))
        };
        let io = |price: Price| (price.input_per_mtok, price.output_per_mtok);
        let sonnet = get("bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0");
        assert_eq!(
            (
                io(sonnet),
                sonnet.cached_input_per_mtok,
                sonnet.cache_write_per_mtok
            ),
            ((3.0, 15.0), Some(0.30), Some(3.75))
        );
        assert!(sonnet.long_context.is_some());
        // A geography's profile costs 10% more; a global one is the model's price.
        assert_eq!(
            io(get(
                "bedrock",
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
            )),
            (3.30, 16.50)
        );
        assert_eq!(
            io(get(
                "bedrock",
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
            )),
            (3.0, 15.0)
        );
        // Profiles priced as their model: every geography of an older one.
        assert_eq!(
            io(get(
                "bedrock",
                "us.anthropic.claude-3-5-haiku-20241022-v1:0"
            )),
            (0.80, 4.0)
        );
        assert_eq!(
            io(get("bedrock", "us.meta.llama3-3-70b-instruct-v1:0")),
            (0.72, 0.72)
        );
        for model in [
            "anthropic.claude-sonnet-4-20250514-v1:0",
            "anthropic.claude-haiku-4-5-20251001-v1:0",
            "anthropic.claude-opus-4-1-20250805-v1:0",
            "anthropic.claude-opus-4-6-v1",
            "amazon.nova-micro-v1:0",
            "amazon.nova-lite-v1:0",
            "amazon.nova-pro-v1:0",
            "meta.llama4-maverick-17b-instruct-v1:0",
            "mistral.mistral-large-2407-v1:0",
        ] {
            get("bedrock", model);
        }
        assert_eq!(io(get("bedrock", "amazon.nova-micro-v1:0")), (0.035, 0.14));
        for (model, input) in [
            ("amazon.titan-embed-text-v2:0", 0.02),
            ("cohere.embed-english-v3", 0.10),
            ("cohere.embed-multilingual-v3", 0.10),
        ] {
            assert_eq!(io(get("bedrock", model)), (input, 0.0), "{model}");
        }
        // Vertex: Gemini at Vertex's prices, Claude by its `@` versions.
        let pro = get("vertex", "gemini-2.5-pro");
        assert_eq!(io(pro), (1.25, 10.0));
        assert_eq!(pro.long_context.map(|l| l.input_per_mtok), Some(2.50));
        assert_eq!(io(get("vertex", "gemini-2.5-flash")), (0.30, 2.50));
        assert_eq!(io(get("vertex", "gemini-2.5-flash-lite")), (0.10, 0.40));
        assert_eq!(io(get("vertex", "gemini-2.0-flash-001")), (0.15, 0.60));
        assert_eq!(io(get("vertex", "claude-sonnet-4@20250514")), (3.0, 15.0));
        assert_eq!(io(get("vertex", "claude-sonnet-4-5@20250929")), (3.0, 15.0));
        assert_eq!(io(get("vertex", "claude-haiku-4-5@20251001")), (1.0, 5.0));
        assert_eq!(io(get("vertex", "claude-opus-4-1@20250805")), (15.0, 75.0));
        assert_eq!(io(get("vertex", "claude-opus-4-5@20251101")), (5.0, 25.0));
        assert_eq!(io(get("vertex", "text-embedding-005")), (0.10, 0.0));
        assert_eq!(io(get("vertex", "gemini-embedding-001")), (0.15, 0.0));
    }

    #[test]
    fn shipped_table_is_consistent() {
        let table = PriceTable::parse(SHIPPED_PRICES).expect("parses");
        for (plugin, models) in &table.plugins {
            for (model, price) in models {
                let place = format!("{plugin}/{model}");
                // A cache read never costs more than a plain input token.
                if let Some(cached) = price.cached_input_per_mtok {
                    assert!(cached <= price.input_per_mtok, "{place}");
                }
                // Audio input is never cheaper than text where a provider prices it apart.
                if let Some(audio) = price.audio_input_per_mtok {
                    assert!(audio >= price.input_per_mtok, "{place}");
                }
                if let Some(long) = price.long_context {
                    assert!(long.input_per_mtok >= price.input_per_mtok, "{place}");
                    assert!(long.above_prompt_tokens > 0, "{place}");
                }
                // An image size's or quality's entry is its model's, which is priced by the image
                // too (a misspelt model would leave the variant unreachable).
                if let Some((base, variant)) = model.split_once(' ') {
                    let base = models
                        .get(base)
                        .unwrap_or_else(|| panic!("{place}: no {base}"));
                    assert!(
                        base.per_image.is_some() && price.per_image.is_some(),
                        "{place}"
                    );
                    let words: Vec<&str> = variant.split(' ').collect();
                    assert!(!words.is_empty() && words.len() <= 2, "{place}");
                }
            }
        }
    }

    #[test]
    fn unpriced_pairs_are_warned_once_and_remembered_up_to_the_bound() {
        let mut warned = WarnedOnce::new(MAX_WARNED);
        assert_eq!(warned.note("r", "known"), Novelty::New);
        assert_eq!(warned.note("r", "known"), Novelty::Seen);
        // The same model on another route is another pair.
        assert_eq!(warned.note("other", "known"), Novelty::New);
        let mut novelties = Vec::new();
        for i in 0..10_000 {
            novelties.push(warned.note("r", &format!("invented-{i}")));
            assert!(
                warned.len() <= MAX_WARNED,
                "{} pairs remembered",
                warned.len()
            );
        }
        assert_eq!(warned.len(), MAX_WARNED);
        let count = |kind| novelties.iter().filter(|n| **n == kind).count();
        assert_eq!(count(Novelty::New), MAX_WARNED - 2);
        assert_eq!(count(Novelty::FirstBeyondBound), 1);
        assert_eq!(count(Novelty::BeyondBound), 10_000 - (MAX_WARNED - 2) - 1);
        // Pairs remembered before the set filled up are still warned only once.
        assert_eq!(warned.note("r", "known"), Novelty::Seen);
        assert_eq!(warned.note("r", "invented-0"), Novelty::Seen);
        assert_eq!(warned.note("r", "invented-9999"), Novelty::BeyondBound);
    }
}
