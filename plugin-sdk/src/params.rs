//! JSON objects the gateway passes as text.

use serde_json::{Map, Value};

use crate::{ProviderError, Route};

/// Parses `request.params` (of a [`crate::CompletionRequest`] or
/// [`crate::EmbeddingRequest`]) as a JSON object. An empty string counts as
/// `{}`.
///
/// Anything that is not a JSON object is [`ProviderError::InvalidRequest`].
pub fn params_object(params: &str) -> Result<Map<String, Value>, ProviderError> {
    parse_object(params, "params")
}

/// Parses the route's plugin settings ([`Route::settings`]: the operator's
/// `[providers.ID.settings]` table of the gateway's config, which the gateway
/// does not read) as a JSON object, like [`params_object`].
pub fn settings_object(route: &Route) -> Result<Map<String, Value>, ProviderError> {
    parse_object(&route.settings, "the route's settings")
}

fn parse_object(text: &str, what: &str) -> Result<Map<String, Value>, ProviderError> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ProviderError::InvalidRequest(format!(
            "{what} must be a JSON object"
        ))),
        Err(e) => Err(ProviderError::InvalidRequest(format!(
            "{what} is not valid JSON: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(settings: &str) -> Route {
        Route {
            id: "r".into(),
            base_url: String::new(),
            api_key: None,
            settings: settings.into(),
        }
    }

    #[test]
    fn empty_is_an_empty_object() {
        assert!(params_object("").unwrap().is_empty());
        assert!(params_object("  \n").unwrap().is_empty());
        assert!(settings_object(&route("")).unwrap().is_empty());
    }

    #[test]
    fn objects_parse() {
        let params = params_object(r#"{"temperature":0.5,"stop":["x"]}"#).unwrap();
        assert_eq!(params["temperature"], 0.5);
        let settings = settings_object(&route(r#"{"legacy_completions":true}"#)).unwrap();
        assert_eq!(settings["legacy_completions"], true);
    }

    #[test]
    fn non_objects_are_invalid_requests() {
        for text in ["[1]", "3", "null", "\"x\"", "{", "{\"a\":}"] {
            match params_object(text) {
                Err(ProviderError::InvalidRequest(message)) => {
                    assert!(message.starts_with("params"), "{message}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            settings_object(&route("[]")),
            Err(ProviderError::InvalidRequest(m)) if m.contains("settings")
        ));
    }
}
