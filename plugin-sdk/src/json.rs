//! JSON helpers: [`to_value`] and [`with_entry`] for building upstream requests,
//! and lenient deserializers for reading provider answers with serde.
//!
//! Providers and the many servers that imitate them disagree on details: a
//! list sent as `null`, a token count sent as `20.0` or as the string `"20"`.
//! A plugin should not fail a whole answer over such a detail, least of all
//! over a statistic. Use these functions with `#[serde(deserialize_with)]`:
//!
//! ```
//! use gateway_plugin_sdk::json;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Answer {
//!     #[serde(default, deserialize_with = "json::null_as_default")]
//!     choices: Vec<String>,
//!     #[serde(default, deserialize_with = "json::count")]
//!     prompt_tokens: Option<u32>,
//! }
//!
//! let answer: Answer =
//!     serde_json::from_str(r#"{"choices": null, "prompt_tokens": 20.0}"#).unwrap();
//! assert!(answer.choices.is_empty());
//! assert_eq!(answer.prompt_tokens, Some(20));
//! ```
//!
//! Pair each with `#[serde(default)]` so that a missing field is accepted as
//! well as a `null` one.

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

use crate::{ProviderError, Usage};

/// `serde_json::to_value` for an upstream request's parts: a failure (a map
/// with non-string keys, a float that is not finite) is
/// [`ProviderError::Failed`].
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, ProviderError> {
    serde_json::to_value(value)
        .map_err(|e| ProviderError::Failed(format!("cannot encode the upstream request: {e}")))
}

/// `object` with one more entry, `key`: `value`, serialized in place: the same JSON as
/// inserting `to_value(value)` into a copy of `object`, without building that copy or a
/// [`Value`] of `value`. For the large part of an upstream body (a conversation), whose tree
/// of values would cost many times its text. `key` must not be in `object` (remove it
/// first); the entries are written in key order, as a [`Map`] writes its own.
///
/// ```
/// use gateway_plugin_sdk::json::with_entry;
/// use serde_json::{Map, Value, json};
///
/// let Value::Object(params) = json!({"model": "m", "temperature": 0.5}) else { unreachable!() };
/// let body = with_entry(&params, "messages", &["hi"]);
/// assert_eq!(
///     serde_json::to_string(&body).unwrap(),
///     r#"{"messages":["hi"],"model":"m","temperature":0.5}"#
/// );
/// ```
pub fn with_entry<'a, T: Serialize + ?Sized>(
    object: &'a Map<String, Value>,
    key: &'a str,
    value: &'a T,
) -> WithEntry<'a, T> {
    WithEntry { object, key, value }
}

/// A JSON object and one more entry, from [`with_entry`].
pub struct WithEntry<'a, T: ?Sized> {
    object: &'a Map<String, Value>,
    key: &'a str,
    value: &'a T,
}

impl<T: Serialize + ?Sized> Serialize for WithEntry<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.object.len() + 1))?;
        // In key order, as a `Map` (sorted keys) would write the object with the entry in it.
        let mut pending = true;
        for (key, value) in self.object {
            if pending && self.key < key.as_str() {
                map.serialize_entry(self.key, self.value)?;
                pending = false;
            }
            map.serialize_entry(key, value)?;
        }
        if pending {
            map.serialize_entry(self.key, self.value)?;
        }
        map.end()
    }
}

/// Deserializes `null` as the type's default (e.g. `"choices": null` as an
/// empty list); any other value must deserialize as `T`.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Deserializes a token count: any non-negative JSON number (some servers
/// send `20.0`), clamped to `u32`. `null`, a negative number, or a value of
/// another type (a string included) is `None` rather than an error.
pub fn count<'de, D>(deserializer: D) -> Result<Option<u32>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Number(n) => number_count(&n),
        _ => None,
    })
}

/// Like [`count`], and also accepts a string holding a non-negative integer
/// (`"20"`, surrounding whitespace allowed): the form Google's JSON mapping
/// gives 64-bit integers.
pub fn count_or_numeric_string<'de, D>(deserializer: D) -> Result<Option<u32>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Number(n) => number_count(&n),
        Value::String(s) => s.trim().parse::<u64>().ok().map(saturating_u32),
        _ => None,
    })
}

/// Deserializes a length of time in seconds: a non-negative, finite JSON number, or a string
/// holding one (`"9.52"`, as some transcription servers write a duration). Anything else is
/// `None` rather than an error.
///
/// ```
/// use serde::Deserialize;
/// use serde_json::json;
///
/// #[derive(Deserialize)]
/// struct Audio {
///     #[serde(deserialize_with = "gateway_plugin_sdk::json::lenient_seconds")]
///     duration: Option<f64>,
/// }
/// let read = |v| Audio::deserialize(v).unwrap().duration;
/// assert_eq!(read(json!({"duration": 9.52})), Some(9.52));
/// assert_eq!(read(json!({"duration": " 3 "})), Some(3.0));
/// assert_eq!(read(json!({"duration": -1})), None);
/// assert_eq!(read(json!({"duration": "soon"})), None);
/// ```
pub fn lenient_seconds<'de, D>(deserializer: D) -> Result<Option<f64>, D::Error>
where
    D: Deserializer<'de>,
{
    let seconds = match Value::deserialize(deserializer)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    Ok(seconds.filter(|s| s.is_finite() && *s >= 0.0))
}

/// Reads a usage object with the gateway's field names, which OpenAI-style
/// APIs share: `prompt_tokens`, `completion_tokens` and `total_tokens` (their
/// sum when missing), each read leniently as by [`count`] (missing is 0).
/// Other fields are ignored; cache and reasoning details stay `None`.
///
/// ```
/// use gateway_plugin_sdk::Usage;
/// use serde::Deserialize;
/// use serde_json::json;
///
/// let usage = Usage::deserialize(&json!({"prompt_tokens": 9, "completion_tokens": 3.0})).unwrap();
/// assert_eq!(usage, Usage::new(9, 3));
/// assert!(Usage::deserialize(&json!(null)).is_err());
/// ```
impl<'de> Deserialize<'de> for Usage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Counts {
            #[serde(default, deserialize_with = "count")]
            prompt_tokens: Option<u32>,
            #[serde(default, deserialize_with = "count")]
            completion_tokens: Option<u32>,
            #[serde(default, deserialize_with = "count")]
            total_tokens: Option<u32>,
        }
        let counts = Counts::deserialize(deserializer)?;
        let usage = Usage::new(
            counts.prompt_tokens.unwrap_or(0),
            counts.completion_tokens.unwrap_or(0),
        );
        Ok(Usage {
            total_tokens: counts.total_tokens.unwrap_or(usage.total_tokens),
            ..usage
        })
    }
}

fn number_count(n: &Number) -> Option<u32> {
    n.as_u64().map(saturating_u32).or_else(|| {
        n.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            // `as` saturates, which is the clamping wanted here.
            .map(|f| f as u32)
    })
}

fn saturating_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug, Default)]
    struct Counts {
        #[serde(default, deserialize_with = "count")]
        number: Option<u32>,
        #[serde(default, deserialize_with = "count_or_numeric_string")]
        either: Option<u32>,
        #[serde(default, deserialize_with = "null_as_default")]
        list: Vec<u32>,
    }

    fn counts(json: &str) -> Counts {
        serde_json::from_str(json).expect("parses")
    }

    #[test]
    fn numbers() {
        let c = counts(r#"{"number": 20, "either": 20.7}"#);
        assert_eq!((c.number, c.either), (Some(20), Some(20)));
        let c = counts(r#"{"number": 1e12, "either": 99999999999}"#);
        assert_eq!((c.number, c.either), (Some(u32::MAX), Some(u32::MAX)));
        let c = counts(r#"{"number": -1, "either": -0.5}"#);
        assert_eq!((c.number, c.either), (None, None));
        let c = counts(r#"{}"#);
        assert_eq!((c.number, c.either), (None, None));
    }

    #[test]
    fn strings_and_other_types() {
        let c = counts(r#"{"number": "20", "either": " 20 "}"#);
        assert_eq!((c.number, c.either), (None, Some(20)));
        let c = counts(r#"{"number": null, "either": "-3"}"#);
        assert_eq!((c.number, c.either), (None, None));
        let c = counts(r#"{"number": [1], "either": {"a": 1}}"#);
        assert_eq!((c.number, c.either), (None, None));
        let c = counts(r#"{"either": "99999999999"}"#);
        assert_eq!(c.either, Some(u32::MAX));
    }

    #[test]
    fn null_lists() {
        assert!(counts(r#"{"list": null}"#).list.is_empty());
        assert_eq!(counts(r#"{"list": [1, 2]}"#).list, [1, 2]);
        assert!(serde_json::from_str::<Counts>(r#"{"list": "x"}"#).is_err());
    }
}
