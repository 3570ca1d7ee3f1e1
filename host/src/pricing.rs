//! What a call cost, from the route's prices or the plugin's defaults.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use crate::config::Price;
use crate::plugins::types;
use crate::store::TokenUsage;

/// The price of `model`: the route's table first, then the plugin's. Exact
/// names win; otherwise the longest known name that `model` extends with a
/// `-suffix` (dated snapshots like `gpt-4o-mini-2024-07-18`).
pub fn price_for(
    route: &BTreeMap<String, Price>,
    plugin: &[types::ModelPrice],
    model: &str,
) -> Option<Price> {
    let plugin_prices = || {
        plugin.iter().map(|p| {
            (
                p.model.as_str(),
                Price {
                    input_per_mtok: p.input_per_mtok,
                    output_per_mtok: p.output_per_mtok,
                },
            )
        })
    };
    lookup(route.iter().map(|(m, p)| (m.as_str(), *p)), model)
        .or_else(|| lookup(plugin_prices(), model))
}

fn lookup<'a>(
    prices: impl Iterator<Item = (&'a str, Price)> + Clone,
    model: &str,
) -> Option<Price> {
    if let Some((_, price)) = prices.clone().find(|(name, _)| *name == model) {
        return Some(price);
    }
    prices
        .filter(|(name, _)| {
            model.len() > name.len()
                && model.starts_with(name)
                && model.as_bytes()[name.len()] == b'-'
        })
        .max_by_key(|(name, _)| name.len())
        .map(|(_, price)| price)
}

pub fn cost(usage: &TokenUsage, price: Price) -> f64 {
    (usage.prompt_tokens as f64 * price.input_per_mtok
        + usage.completion_tokens as f64 * price.output_per_mtok)
        / 1_000_000.0
}

/// Logs an unknown price once per route and model, not once per request.
pub fn warn_unpriced(route: &str, model: &str) {
    static WARNED: Mutex<Option<HashSet<(String, String)>>> = Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if warned
        .get_or_insert_with(HashSet::new)
        .insert((route.to_owned(), model.to_owned()))
    {
        tracing::warn!(
            route,
            model,
            "no price known for this model: its cost is recorded as unknown"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(i: f64, o: f64) -> Price {
        Price {
            input_per_mtok: i,
            output_per_mtok: o,
        }
    }

    #[test]
    fn exact_then_longest_dated_prefix_then_plugin() {
        let route = BTreeMap::from([
            ("gpt-4o".to_owned(), price(2.5, 10.0)),
            ("gpt-4o-mini".to_owned(), price(0.15, 0.6)),
        ]);
        let plugin = vec![types::ModelPrice {
            model: "o4-mini".into(),
            input_per_mtok: 1.1,
            output_per_mtok: 4.4,
        }];
        assert_eq!(price_for(&route, &plugin, "gpt-4o"), Some(price(2.5, 10.0)));
        assert_eq!(
            price_for(&route, &plugin, "gpt-4o-mini-2024-07-18"),
            Some(price(0.15, 0.6))
        );
        assert_eq!(price_for(&route, &plugin, "o4-mini"), Some(price(1.1, 4.4)));
        assert_eq!(price_for(&route, &plugin, "gpt-4omega"), None);
    }

    #[test]
    fn cost_is_per_million_tokens() {
        let usage = TokenUsage {
            prompt_tokens: 1000,
            completion_tokens: 500,
            total_tokens: 1500,
            ..Default::default()
        };
        let c = cost(&usage, price(0.15, 0.6));
        assert!((c - (1000.0 * 0.15 + 500.0 * 0.6) / 1e6).abs() < 1e-15);
    }
}
