//! Provider keys never leave the gateway in what it answers, records or logs.
//!
//! An upstream may echo the request's `Authorization` header in its error
//! text, and a plugin may log what it was sent; every such text passes
//! through [`Secrets::redact`] with the keys of the request it belongs to.

use std::borrow::Cow;
use std::sync::Arc;

/// What a key is replaced with.
pub const REDACTED: &str = "[redacted]";

/// The keys one request carries: the route's own and the caller's `Provider-API-Key`.
#[derive(Clone, Default, Debug)]
pub struct Secrets(Option<Arc<[String]>>);

impl Secrets {
    /// The non-empty keys among `keys`, longest first so that a key that
    /// contains another is replaced whole.
    pub fn new<'a>(keys: impl IntoIterator<Item = Option<&'a str>>) -> Secrets {
        let mut keys: Vec<String> = keys
            .into_iter()
            .flatten()
            .map(str::trim)
            .filter(|key| !key.is_empty())
            .map(str::to_owned)
            .collect();
        if keys.is_empty() {
            return Secrets(None);
        }
        keys.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        keys.dedup();
        Secrets(Some(keys.into()))
    }

    /// `text` with every occurrence of a key replaced by [`REDACTED`].
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let Some(keys) = &self.0 else {
            return Cow::Borrowed(text);
        };
        let mut text = Cow::Borrowed(text);
        for key in keys.iter() {
            if text.contains(key.as_str()) {
                text = Cow::Owned(text.replace(key.as_str(), REDACTED));
            }
        }
        text
    }

    /// [`Secrets::redact`] for an owned string: no copy when nothing matches.
    pub fn redact_owned(&self, text: String) -> String {
        match self.redact(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_of_every_key_is_replaced() {
        let secrets = Secrets::new([Some("sk-route-123"), None, Some("sk-caller"), Some("  ")]);
        assert_eq!(
            secrets.redact("Bearer sk-route-123 / sk-caller / sk-route-123"),
            "Bearer [redacted] / [redacted] / [redacted]"
        );
        assert!(matches!(secrets.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_key_containing_another_is_replaced_whole() {
        let secrets = Secrets::new([Some("abc"), Some("abcdef")]);
        assert_eq!(secrets.redact("xabcdefx abc"), "x[redacted]x [redacted]");
    }

    #[test]
    fn no_keys_change_nothing() {
        let secrets = Secrets::new([None, Some("")]);
        assert_eq!(secrets.redact_owned("Bearer x".into()), "Bearer x");
    }
}
