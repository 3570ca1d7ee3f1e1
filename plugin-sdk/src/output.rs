//! The answer's size the host decided ([`OutputLimit`], a request's `output`).
//!
//! The gateway reserves a request's tokens and cost against the caller's limits and budgets
//! before the plugin runs, for exactly `output.max-tokens` per choice and `output.choices`
//! choices. A plugin asks its upstream for exactly that, over whatever the caller's params say
//! (every name its provider has for the same thing), and fits any reasoning budget inside it.
//! [`HttpProvider`](crate::HttpProvider)'s drivers then check the body the plugin built
//! against it ([`check_output`], through [`HttpProvider::OUTPUT`](crate::HttpProvider::OUTPUT))
//! and refuse to send a request that asks for more: what the gateway reserved is what the
//! upstream may spend, by construction rather than by a list of parameter names.

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::{OutputLimit, ProviderError};

impl OutputLimit {
    /// No limit: the host reserved nothing for the answer (the caller set no size and no limit
    /// counts tokens or cost), one choice.
    pub const NONE: OutputLimit = OutputLimit {
        max_tokens: None,
        choices: 1,
    };

    /// A reasoning budget that fits below `max` tokens, for providers that count reasoning in
    /// the answer's maximum and want the budget under it (Anthropic's Claude): `budget` itself
    /// when it does, else half of `max` (leaving the answer the other half), but never under
    /// `least` (the provider's smallest budget); `None` when even that does not fit.
    ///
    /// ```
    /// use gateway_plugin_sdk::OutputLimit;
    ///
    /// assert_eq!(OutputLimit::fit_budget(2000, 4096, 1024), Some(2000));
    /// assert_eq!(OutputLimit::fit_budget(16384, 4096, 1024), Some(2048));
    /// assert_eq!(OutputLimit::fit_budget(16384, 1500, 1024), Some(1024));
    /// assert_eq!(OutputLimit::fit_budget(16384, 1024, 1024), None);
    /// ```
    pub fn fit_budget(budget: u64, max: u32, least: u32) -> Option<u32> {
        if budget < u64::from(max) {
            return u32::try_from(budget).ok();
        }
        Some((max / 2).max(least)).filter(|fitted| *fitted < max)
    }
}

/// Fits a thinking budget below `max` where Claude's APIs take it, `thinking.budget_tokens` of
/// `fields` (a Messages API body, or Bedrock's `additionalModelRequestFields`), with
/// [`OutputLimit::fit_budget`] (at least `least`, the provider's smallest budget); refuses the
/// request ([`ProviderError::InvalidRequest`] naming the route) when even that does not fit.
/// Fields without a budget are left as they are.
pub fn fit_thinking_budget(
    fields: &mut Map<String, Value>,
    max: u32,
    least: u32,
    route: &str,
) -> Result<(), ProviderError> {
    let Some(budget) = fields
        .get_mut("thinking")
        .and_then(|thinking| thinking.get_mut("budget_tokens"))
    else {
        return Ok(());
    };
    let asked = budget.as_u64().unwrap_or(u64::MAX);
    let Some(fitted) = OutputLimit::fit_budget(asked, max, least) else {
        return Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: max_tokens = {max} leaves no room for thinking (the smallest \
             thinking budget is {least} tokens, and max_tokens must exceed it): raise \
             max_tokens, or ask for no reasoning"
        )));
    };
    *budget = Value::from(fitted);
    Ok(())
}

/// Where an upstream body says how long its answer may be: paths of object keys from the
/// body's top (`&["generationConfig", "maxOutputTokens"]`).
#[derive(Debug, Clone, Copy)]
pub struct OutputFields {
    /// The fields that bound each choice's completion tokens, reasoning included. When the
    /// host set a limit, one at least must be present and none may exceed it.
    pub max_tokens: &'static [&'static [&'static str]],
    /// The fields that ask for several choices (OpenAI's `n` and `best_of`, Gemini's
    /// `candidateCount`); absent means one. None may exceed the host's `choices`. Empty for an
    /// API that answers with one choice only.
    pub choices: &'static [&'static [&'static str]],
}

/// Refuses (as [`ProviderError::Failed`]: the plugin's fault, not the caller's) an upstream
/// `body` that asks for more than `limit`, or that leaves the answer's length to the provider
/// while the host set one. Without a limit (`max_tokens: None`) the host reserved nothing for
/// the answer and every body passes.
///
/// ```
/// use gateway_plugin_sdk::{OutputLimit, check_output, output::OutputFields};
///
/// const OPENAI: OutputFields = OutputFields {
///     max_tokens: &[&["max_completion_tokens"], &["max_tokens"]],
///     choices: &[&["n"]],
/// };
/// let limit = OutputLimit { max_tokens: Some(100), choices: 1 };
/// assert!(check_output(&limit, &OPENAI, br#"{"max_tokens": 100}"#).is_ok());
/// assert!(check_output(&limit, &OPENAI, br#"{"max_tokens": 100, "n": 2}"#).is_err());
/// assert!(check_output(&limit, &OPENAI, br#"{"max_completion_tokens": 101}"#).is_err());
/// assert!(check_output(&limit, &OPENAI, br#"{"temperature": 0}"#).is_err());
/// ```
pub fn check_output(
    limit: &OutputLimit,
    fields: &OutputFields,
    body: &[u8],
) -> Result<(), ProviderError> {
    let Some(max_tokens) = limit.max_tokens else {
        return Ok(());
    };
    let paths: Vec<&[&str]> = fields
        .max_tokens
        .iter()
        .chain(fields.choices)
        .copied()
        .collect();
    let mut found = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    Find {
        paths: paths.iter().copied().enumerate().collect(),
        found: &mut found,
    }
    .deserialize(&mut deserializer)
    .map_err(|e| ProviderError::Failed(format!("the upstream request is not JSON: {e}")))?;
    let over = |path: &[&str], value: &Value, most: u32| {
        ProviderError::Failed(format!(
            "the plugin asked its upstream for {} = {value}, more than the gateway's limit of \
             {most} (which is what it reserved): the request was not sent",
            path.join(".")
        ))
    };
    let tokens = fields.max_tokens.len();
    let mut bounded = false;
    for (slot, value) in &found {
        let (path, most) = if *slot < tokens {
            (fields.max_tokens[*slot], max_tokens)
        } else {
            (fields.choices[*slot - tokens], limit.choices)
        };
        if value.is_null() && *slot >= tokens {
            continue;
        }
        match value.as_u64() {
            Some(asked) if asked <= u64::from(most) => bounded |= *slot < tokens,
            _ => return Err(over(path, value, most)),
        }
    }
    if !bounded {
        let names: Vec<String> = fields.max_tokens.iter().map(|p| p.join(".")).collect();
        return Err(ProviderError::Failed(format!(
            "the plugin left the answer's length to its upstream (no {}), but the gateway \
             reserved {max_tokens} tokens a choice: the request was not sent",
            names.join(" or ")
        )));
    }
    Ok(())
}

/// Finds the values at `paths` (numbered) in one pass over a JSON text, skipping everything
/// else without building it (a body may carry megabytes of base64 media). A key that repeats
/// is found each time: an upstream may read either occurrence.
struct Find<'p, 'f> {
    paths: Vec<(usize, &'p [&'p str])>,
    found: &'f mut Vec<(usize, Value)>,
}

impl<'de> DeserializeSeed<'de> for Find<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.paths.iter().any(|(_, path)| path.is_empty()) {
            let value = Value::deserialize(deserializer)?;
            for (slot, path) in self.paths {
                let mut at = Some(&value);
                for key in path {
                    at = at.and_then(|v| v.get(key));
                }
                if let Some(at) = at {
                    self.found.push((slot, at.clone()));
                }
            }
            return Ok(());
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Find<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Every key of a large body goes by here: borrowed, and matched before anything is
        // allocated for it (callgrind: an owned key and a path list each cost ~3% of a
        // request's instructions with limits on the key).
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let wanted = |(_, path): &&(usize, &[&str])| path.first() == Some(&key.as_ref());
            if !self.paths.iter().any(|path| wanted(&path)) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let paths = (self.paths.iter())
                .filter(wanted)
                .map(|(slot, path)| (*slot, &path[1..]))
                .collect();
            map.next_value_seed(Find {
                paths,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// An object's key, borrowed from the body when it holds no escape (as keys do).
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object's key")
    }
    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(std::borrow::Cow::Borrowed(key)))
    }
    fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key(std::borrow::Cow::Owned(key.to_owned())))
    }
    fn visit_string<E>(self, key: String) -> Result<Key<'de>, E> {
        Ok(Key(std::borrow::Cow::Owned(key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escaped_key_is_read_as_its_text() {
        let l = limit(10, 1);
        assert!(check_output(&l, &OPENAI, br#"{"max\u005ftokens": 500}"#).is_err());
        assert!(check_output(&l, &OPENAI, br#"{"max\u005ftokens": 10}"#).is_ok());
    }

    const GEMINI: OutputFields = OutputFields {
        max_tokens: &[&["generationConfig", "maxOutputTokens"]],
        choices: &[&["generationConfig", "candidateCount"]],
    };
    const OPENAI: OutputFields = OutputFields {
        max_tokens: &[&["max_completion_tokens"], &["max_tokens"]],
        choices: &[&["n"], &["best_of"]],
    };

    fn limit(max_tokens: u32, choices: u32) -> OutputLimit {
        OutputLimit {
            max_tokens: Some(max_tokens),
            choices,
        }
    }

    #[test]
    fn nested_fields_are_found_past_large_values() {
        let media = "A".repeat(100_000);
        let body = format!(
            r#"{{"contents": [{{"parts": [{{"inlineData": {{"data": "{media}"}}}}]}}],
                "generationConfig": {{"temperature": 0, "maxOutputTokens": 50, "candidateCount": 2}}}}"#
        );
        assert!(check_output(&limit(50, 2), &GEMINI, body.as_bytes()).is_ok());
        let err = check_output(&limit(49, 2), &GEMINI, body.as_bytes()).unwrap_err();
        assert!(
            format!("{err:?}").contains("generationConfig.maxOutputTokens = 50"),
            "{err:?}"
        );
        assert!(check_output(&limit(50, 1), &GEMINI, body.as_bytes()).is_err());
    }

    #[test]
    fn every_occurrence_and_every_name_is_held_to_the_limit() {
        let l = limit(10, 1);
        // A repeated key: an upstream may read the last one.
        assert!(check_output(&l, &OPENAI, br#"{"max_tokens": 5, "max_tokens": 500}"#).is_err());
        // Two names, one within the limit.
        let both = br#"{"max_completion_tokens": 10, "max_tokens": 90000}"#;
        assert!(check_output(&l, &OPENAI, both).is_err());
        assert!(check_output(&l, &OPENAI, br#"{"max_tokens": 10, "best_of": 3}"#).is_err());
        assert!(check_output(&l, &OPENAI, br#"{"max_tokens": 10, "n": null}"#).is_ok());
        // Not a count: refused rather than guessed.
        assert!(check_output(&l, &OPENAI, br#"{"max_tokens": "10"}"#).is_err());
        assert!(check_output(&l, &OPENAI, br#"{"max_tokens": 1e9}"#).is_err());
        // Nothing bounds the answer: the provider's default could exceed the reservation.
        assert!(check_output(&l, &OPENAI, br#"{"max_tokens": null}"#).is_err());
        assert!(check_output(&l, &OPENAI, br#"[1, 2]"#).is_err());
    }

    #[test]
    fn without_a_limit_every_body_passes() {
        let none = OutputLimit {
            max_tokens: None,
            choices: 1,
        };
        assert!(check_output(&none, &OPENAI, br#"{"n": 9}"#).is_ok());
        assert!(check_output(&none, &OPENAI, b"not json").is_ok());
    }
}
