//! Where a call goes: the route's settings, the model's publisher and the method's URL.
//! Everything here is pure (no I/O), so it is unit-tested natively.

use std::num::NonZeroU64;

use gateway_plugin_sdk::{ProviderError, Route};
use serde::Deserialize;

/// The plugin's settings from the route's `[providers.ID.settings]` table (other keys are
/// refused, so that a misspelt one does not go unnoticed).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The Google Cloud project id the models are called in.
    pub project: String,
    /// The region (`us-central1`, `europe-west4`, ...) or `global`.
    pub location: String,
    /// The environment variable holding the path of the service account's JSON key: the host
    /// reads the file into the route's secret `credentials_file`.
    #[serde(default)]
    pub credentials_file_env: Option<String>,
    /// The environment variable holding the JSON key itself: the route's secret `credentials`.
    #[serde(default)]
    pub credentials_env: Option<String>,
    /// Claude's `max_tokens` when the caller gives none (the anthropic plugin's setting).
    #[serde(default)]
    pub default_max_tokens: Option<NonZeroU64>,
}

impl Settings {
    /// The route's settings, with the project and the location checked (they go into the URL).
    pub fn of(route: &Route) -> Result<Settings, ProviderError> {
        let settings: Settings = route.settings()?;
        for (name, value) in [
            ("project", &settings.project),
            ("location", &settings.location),
        ] {
            if value.trim().is_empty() {
                return Err(ProviderError::Failed(format!(
                    "route `{}`: settings.{name} is empty; set the Google Cloud {name}",
                    route.id
                )));
            }
        }
        Ok(settings)
    }
}

/// Who publishes a model on Vertex AI, which decides its URL, its body and its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publisher {
    /// Gemini and Google's embedding models: the Gemini API's bodies.
    Google,
    /// Claude: the Messages API's bodies.
    Anthropic,
}

impl Publisher {
    /// `claude*` models are Anthropic's; every other model is Google's.
    pub fn of(model: &str) -> Publisher {
        if model.trim().starts_with("claude") {
            Publisher::Anthropic
        } else {
            Publisher::Google
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Publisher::Google => "google",
            Publisher::Anthropic => "anthropic",
        }
    }

    /// The method of a completion: `generateContent` / `streamGenerateContent?alt=sse` for
    /// Google's models, `rawPredict` / `streamRawPredict` for Claude.
    pub fn completion_method(self, stream: bool) -> &'static str {
        match (self, stream) {
            (Publisher::Google, false) => "generateContent",
            (Publisher::Google, true) => "streamGenerateContent?alt=sse",
            (Publisher::Anthropic, false) => "rawPredict",
            (Publisher::Anthropic, true) => "streamRawPredict",
        }
    }
}

/// Every byte but RFC 3986's unreserved characters and `@` (Vertex's Claude versions:
/// `claude-sonnet-4@20250514`, a character paths may carry as it is) is encoded, so that no
/// character of a setting or a model name can change the URL's meaning.
const ENCODED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'@');

fn encoded(text: &str) -> percent_encoding::PercentEncode<'_> {
    percent_encoding::utf8_percent_encode(text.trim(), ENCODED)
}

/// The Vertex AI endpoint of `location`, the base URL the route should have:
/// `https://{location}-aiplatform.googleapis.com`, or `https://aiplatform.googleapis.com`
/// for `global`.
pub fn endpoint(location: &str) -> String {
    match location.trim() {
        "global" => "https://aiplatform.googleapis.com".to_owned(),
        location => format!("https://{location}-aiplatform.googleapis.com"),
    }
}

/// The URL of `method` on `model`:
/// `{base_url}/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}`.
/// The route's `base_url` is the endpoint's origin (the sandbox lets the plugin reach its host
/// only); without one, the error names the endpoint of the route's location.
pub fn model_url(
    route: &Route,
    settings: &Settings,
    model: &str,
    method: &str,
) -> Result<String, ProviderError> {
    let base = route.checked_base_url(&endpoint(&settings.location))?;
    let model = model.trim();
    if model.is_empty() || model.contains('/') {
        return Err(ProviderError::InvalidRequest(format!(
            "{model:?} is not a Vertex AI model id (e.g. gemini-2.5-flash, \
             claude-sonnet-4@20250514)"
        )));
    }
    Ok(format!(
        "{base}/v1/projects/{}/locations/{}/publishers/{}/models/{}:{method}",
        encoded(&settings.project),
        encoded(&settings.location),
        Publisher::of(model).as_str(),
        encoded(model),
    ))
}
