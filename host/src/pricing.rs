//! What a call cost: each token class of its usage times that class's price.
//!
//! Prices come from three places, most specific model name first (see [`price_for`]): the
//! route's `pricing` table in the config, the price table shipped with the gateway
//! (`host/prices.toml`, embedded at build time, dated by its `as_of`), and the models the plugin
//! lists in its `info()`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{LazyLock, Mutex};

use serde::Deserialize;

use crate::config::Price;
use crate::plugins::types;
use crate::store::TokenUsage;

/// The shipped price table's text.
const SHIPPED_PRICES: &str = include_str!("../prices.toml");

/// Prices per plugin and model, with the date they were taken.
// No `deny_unknown_fields`: serde cannot combine it with `flatten`; every other key is a
// plugin, and a misspelt plugin name shows as that plugin having no prices.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PriceTable {
    /// The day the prices were read from the providers' pricing pages (`YYYY-MM-DD`).
    pub as_of: String,
    /// Plugin name (a route's `plugin`) -> model -> price.
    #[serde(flatten)]
    pub plugins: BTreeMap<String, BTreeMap<String, Price>>,
}

impl PriceTable {
    /// Parses a price table in the format of `host/prices.toml`.
    pub fn parse(text: &str) -> Result<PriceTable, toml::de::Error> {
        toml::from_str(text)
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
}

/// The price of `model` on a route served by the plugin named `plugin`.
///
/// Sources, in order of precedence: the route's `pricing` table, the shipped table's entries
/// for `plugin`, and the plugin's own `info()` list. The most specific name wins across all
/// of them: an exact name first, otherwise the longest known name that `model` extends with
/// a `-suffix` (dated snapshots such as `gpt-4o-mini-2024-07-18`); for the same name, the
/// earlier source wins. So a route's `gpt-4o` price covers `gpt-4o-2024-08-06` but not
/// `gpt-4o-mini`, which the shipped table names exactly.
pub fn price_for(
    route: &BTreeMap<String, Price>,
    plugin: &str,
    plugin_models: &[types::ModelPrice],
    model: &str,
) -> Option<Price> {
    price_in(
        route,
        PriceTable::shipped().plugin(plugin),
        plugin_models,
        model,
    )
}

/// [`price_for`] against a given table instead of the shipped one.
fn price_in(
    route: &BTreeMap<String, Price>,
    table: Option<&BTreeMap<String, Price>>,
    plugin_models: &[types::ModelPrice],
    model: &str,
) -> Option<Price> {
    // Visited in precedence order: route, table, plugin.
    let known = route
        .iter()
        .map(|(name, price)| (name.as_str(), *price))
        .chain(
            table
                .into_iter()
                .flatten()
                .map(|(name, price)| (name.as_str(), *price)),
        )
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
/// the longer of the names `model` extends with `-suffix`. `None` when it does not match.
///
/// A suffix that starts with a number of one or two digits is a new version of the model
/// (`claude-opus-4` → `claude-opus-4-1`), which has its own price; snapshot suffixes are dates
/// (`-2024-07-18`, `-20250929`, `-0613`, `-001`) or words (`-latest`, `-preview-09-2025`).
fn specificity(name: &str, model: &str) -> Option<usize> {
    if name == model {
        return Some(usize::MAX);
    }
    let suffix = model.strip_prefix(name)?.strip_prefix('-')?;
    let first = suffix.split('-').next().unwrap_or_default();
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
/// long-context prices apply to every token.
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
    (f64::from(other) * rates.input
        + f64::from(audio) * rates.audio_input
        + f64::from(cached) * rates.cached_input
        + f64::from(written) * rates.cache_write
        + f64::from(usage.completion_tokens) * rates.output)
        / 1_000_000.0
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
        let find = |model| price_in(&route, None, &plugin, model);
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
        let find = |model| price_in(&route, Some(&table), &plugin, model);
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
        let find = |model| price_in(&route, Some(&table), &[], model);
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
        let find = |model| price_in(&BTreeMap::new(), Some(&table), &[], model);
        assert_eq!(find("claude-opus-4-1"), None);
        assert_eq!(find("claude-opus-4-6-20260101"), None);
        assert_eq!(find("claude-opus-4-20250514"), Some(price(15.0, 75.0)));
        assert_eq!(find("gemini-2.0-flash-001"), Some(price(0.1, 0.4)));
        assert_eq!(find("gpt-4-0613"), Some(price(30.0, 60.0)));
        assert_eq!(find("gpt-4-latest"), Some(price(30.0, 60.0)));
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
        for plugin in ["openai", "anthropic", "gemini"] {
            assert!(
                table.plugin(plugin).is_some_and(|m| !m.is_empty()),
                "no prices for {plugin}"
            );
        }
        let get = |plugin: &str, model: &str| {
            price_in(&BTreeMap::new(), table.plugin(plugin), &[], model)
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
