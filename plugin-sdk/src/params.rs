//! JSON objects the gateway passes as text: the caller's params and the
//! route's settings.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{ProviderError, Route};

/// Parses `request.params` (of a [`crate::CompletionRequest`] or
/// [`crate::EmbeddingRequest`]) as a JSON object. An empty string counts as
/// `{}`.
///
/// Anything that is not a JSON object is [`ProviderError::InvalidRequest`].
pub fn params_object(params: &str) -> Result<Map<String, Value>, ProviderError> {
    if params.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(params) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ProviderError::InvalidRequest(
            "params must be a JSON object".into(),
        )),
        Err(e) => Err(ProviderError::InvalidRequest(format!(
            "params is not valid JSON: {e}"
        ))),
    }
}

/// [`params_object`] without the keys in `owned`: the start of an upstream
/// request body whose `owned` keys (`model`, `messages`, `stream`, ...) the
/// plugin sets itself, so that no caller param overrides them.
pub fn params_object_except(
    params: &str,
    owned: &[&str],
) -> Result<Map<String, Value>, ProviderError> {
    let mut object = params_object(params)?;
    object.retain(|key, _| !owned.contains(&key.as_str()));
    Ok(object)
}

/// Takes out of `params` OpenAI's params that an API without them serves only at their
/// defaults: `n` (1), `response_format` (`{"type": "text"}`), `presence_penalty` and
/// `frequency_penalty` (0), `logprobs` (false), `top_logprobs` (0) and `logit_bias` (`{}`).
/// Null counts as the default. Any other value is [`ProviderError::InvalidRequest`] naming it:
/// "route `ROUTE`: n = 2 is not supported by API (why)", `api` naming the provider's API
/// ("Anthropic's Messages API").
///
/// ```
/// use gateway_plugin_sdk::{params_object, take_default_only_params};
///
/// let mut params = params_object(r#"{"n": 1, "temperature": 0.2}"#).unwrap();
/// take_default_only_params(&mut params, "r", "the API").unwrap();
/// assert_eq!(params.len(), 1);
/// let mut params = params_object(r#"{"logit_bias": {"42": 1}}"#).unwrap();
/// assert!(take_default_only_params(&mut params, "r", "the API").is_err());
/// ```
pub fn take_default_only_params(
    params: &mut Map<String, Value>,
    route: &str,
    api: &str,
) -> Result<(), ProviderError> {
    let unsupported = |what: String, why: &str| {
        ProviderError::InvalidRequest(format!(
            "route `{route}`: {what} is not supported by {api} ({why})"
        ))
    };
    if let Some(n) = params.remove("n")
        && !(n.is_null() || n.as_f64() == Some(1.0))
    {
        let why = "it answers with one choice; leave n out or set it to 1";
        return Err(unsupported(format!("n = {n}"), why));
    }
    if let Some(format) = params.remove("response_format")
        && !(format.is_null() || format.get("type").and_then(Value::as_str) == Some("text"))
    {
        let what = match format.get("type") {
            Some(kind) => format!("response_format of type {kind}"),
            None => "response_format".to_owned(),
        };
        return Err(unsupported(what, "only {\"type\": \"text\"} can be served"));
    }
    for penalty in ["presence_penalty", "frequency_penalty"] {
        if let Some(value) = params.remove(penalty)
            && !(value.is_null() || value.as_f64() == Some(0.0))
        {
            let why = "it has no repetition penalties; leave it out or set it to 0";
            return Err(unsupported(format!("{penalty} = {value}"), why));
        }
    }
    if let Some(logprobs) = params.remove("logprobs")
        && !(logprobs.is_null() || logprobs == Value::Bool(false))
    {
        let why = "it returns no log probabilities";
        return Err(unsupported(format!("logprobs = {logprobs}"), why));
    }
    if let Some(top) = params.remove("top_logprobs")
        && !(top.is_null() || top.as_f64() == Some(0.0))
    {
        let why = "it returns no log probabilities";
        return Err(unsupported(format!("top_logprobs = {top}"), why));
    }
    if let Some(bias) = params.remove("logit_bias")
        && !(bias.is_null() || bias.as_object().is_some_and(Map::is_empty))
    {
        return Err(unsupported("logit_bias".into(), "it has no logit bias"));
    }
    Ok(())
}

impl Route {
    /// The route's plugin settings (the operator's `[providers.ID.settings]`
    /// table, which the gateway passes on without reading it) as `T`.
    ///
    /// Give `T` `#[serde(deny_unknown_fields)]`, so that a misspelt setting
    /// is refused rather than silently ignored, and `#[serde(default)]` for
    /// optional settings. Any problem is the operator's, not the caller's:
    /// [`ProviderError::Failed`] naming the route and the setting.
    ///
    /// ```
    /// use gateway_plugin_sdk::{ProviderError, Route};
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, Default)]
    /// #[serde(default, deny_unknown_fields)]
    /// struct Settings {
    ///     legacy: bool,
    /// }
    ///
    /// let route = |settings: &str| Route {
    ///     id: "r".into(),
    ///     base_url: "https://x".into(),
    ///     api_key: None,
    ///     settings: settings.into(),
    ///     secrets: Vec::new(),
    /// };
    /// assert!(route(r#"{"legacy": true}"#).settings::<Settings>().unwrap().legacy);
    /// assert!(!route("").settings::<Settings>().unwrap().legacy);
    /// assert_eq!(
    ///     route(r#"{"legacy": 1}"#).settings::<Settings>().err(),
    ///     Some(ProviderError::Failed(
    ///         "route `r`: setting `legacy`: invalid type: integer `1`, expected a boolean".into()
    ///     ))
    /// );
    /// ```
    pub fn settings<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        let text = match self.settings.trim() {
            "" => "{}",
            text => text,
        };
        // serde would read a struct from a JSON array too, by position.
        if !text.starts_with('{') {
            return Err(ProviderError::Failed(format!(
                "route `{}`: settings must be a JSON object",
                self.id
            )));
        }
        let mut deserializer = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
            let path = e.path().to_string();
            // serde_json places errors by line and column of a text the
            // operator never wrote (the gateway made it from TOML).
            let message = e.into_inner().to_string();
            let message = match message.rsplit_once(" at line ") {
                Some((message, _)) => message.to_owned(),
                None => message,
            };
            ProviderError::Failed(if path == "." || path == "?" {
                format!("route `{}`: settings: {message}", self.id)
            } else {
                format!("route `{}`: setting `{path}`: {message}", self.id)
            })
        })
    }
}

/// Takes OpenAI's `stop` and Anthropic's `stop_sequences` out of `params` (each a string or a
/// list of strings), and returns their sequences merged in order, each once; refuses
/// ([`ProviderError::InvalidRequest`] naming the route and the param) a value that is not text.
///
/// ```
/// use gateway_plugin_sdk::{params_object, take_stop_sequences};
/// use serde_json::json;
///
/// let mut params = params_object(r#"{"stop": ["a", "b"], "stop_sequences": "b"}"#).unwrap();
/// assert_eq!(take_stop_sequences(&mut params, "r").unwrap(), [json!("b"), json!("a")]);
/// assert!(params.is_empty());
/// let mut params = params_object(r#"{"stop": 1}"#).unwrap();
/// assert!(take_stop_sequences(&mut params, "r").is_err());
/// ```
pub fn take_stop_sequences(
    params: &mut Map<String, Value>,
    route: &str,
) -> Result<Vec<Value>, ProviderError> {
    let mut sequences: Vec<Value> = Vec::new();
    for name in ["stop_sequences", "stop"] {
        let items = match params.remove(name) {
            None | Some(Value::Null) => continue,
            Some(Value::Array(items)) => items,
            Some(single) => vec![single],
        };
        for item in items {
            if !item.is_string() {
                return Err(ProviderError::InvalidRequest(format!(
                    "route `{route}`: {name} must be a string or a list of strings"
                )));
            }
            if !sequences.contains(&item) {
                sequences.push(item);
            }
        }
    }
    Ok(sequences)
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
            secrets: Vec::new(),
        }
    }

    #[test]
    fn empty_is_an_empty_object() {
        assert!(params_object("").unwrap().is_empty());
        assert!(params_object("  \n").unwrap().is_empty());
    }

    #[test]
    fn objects_parse() {
        let params = params_object(r#"{"temperature":0.5,"stop":["x"]}"#).unwrap();
        assert_eq!(params["temperature"], 0.5);
    }

    #[test]
    fn params_except_owned_keys() {
        let body = params_object_except(r#"{"model":"x","temperature":1}"#, &["model"]).unwrap();
        assert_eq!(Value::Object(body), serde_json::json!({"temperature": 1}));
    }

    #[derive(serde::Deserialize, Debug, Default, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Settings {
        header: Option<String>,
        max: u32,
    }

    #[test]
    fn typed_settings_name_the_setting() {
        assert_eq!(route("").settings::<Settings>(), Ok(Settings::default()));
        assert_eq!(
            route(r#"{"max": 3, "header": null}"#).settings::<Settings>(),
            Ok(Settings {
                header: None,
                max: 3
            })
        );
        let failed = |settings: &str| match route(settings).settings::<Settings>() {
            Err(ProviderError::Failed(message)) => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            failed(r#"{"max": -1}"#),
            "route `r`: setting `max`: invalid value: integer `-1`, expected u32"
        );
        let unknown = failed(r#"{"maxx": 1}"#);
        assert!(
            unknown.starts_with("route `r`: setting `maxx`: unknown field `maxx`, expected"),
            "{unknown}"
        );
        assert_eq!(failed("[1]"), "route `r`: settings must be a JSON object");
        assert_eq!(
            failed("{"),
            "route `r`: settings: EOF while parsing an object"
        );
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
    }
}
