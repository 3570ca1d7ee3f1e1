//! Recorded provider traffic: go-vcr YAML cassettes of real calls to the providers (OpenAI,
//! Azure, Anthropic, Gemini, OpenAI-compatible servers), one file per test case, kept in the
//! repository's `tests/recordings/` (Apache-2.0, origin in its README). The plugins replay their
//! request and response bodies through their mapping code.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Cassette {
    interactions: Vec<Interaction>,
}

/// One recorded exchange: the request sent and the response received.
#[derive(Debug, Clone, Deserialize)]
pub struct Interaction {
    /// What the client sent.
    pub request: RecordedRequest,
    /// What the provider answered.
    pub response: RecordedResponse,
}

/// The recorded request of an [`Interaction`].
#[derive(Debug, Clone, Deserialize)]
pub struct RecordedRequest {
    /// The request body as sent (JSON for every provider call recorded).
    pub body: String,
    /// The request URL (empty when the cassette has none).
    #[serde(default)]
    pub url: String,
}

/// The recorded response of an [`Interaction`].
#[derive(Debug, Clone, Deserialize)]
pub struct RecordedResponse {
    /// The response body as received: JSON, or the whole SSE stream.
    pub body: String,
}

impl Interaction {
    /// The request body parsed as JSON; panics when it is not JSON.
    pub fn request_json(&self) -> Value {
        serde_json::from_str(&self.request.body).expect("recorded request is JSON")
    }

    /// Whether the request body asked for a stream (`"stream": true`, as the OpenAI and
    /// Anthropic APIs spell it). Gemini says so in the URL instead.
    pub fn requests_stream(&self) -> bool {
        serde_json::from_str::<Value>(&self.request.body)
            .ok()
            .and_then(|v| v.get("stream").and_then(Value::as_bool))
            .unwrap_or(false)
    }
}

/// The directories searched for recordings, in order: `$GATEWAY_RECORDINGS` (to try new
/// recordings before adding them) and the repository's `tests/recordings`. Nothing outside the
/// repository: a fresh clone runs its tests on what it holds.
fn candidate_dirs() -> impl Iterator<Item = PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    [
        std::env::var_os("GATEWAY_RECORDINGS").map(PathBuf::from),
        Some(workspace.join("tests/recordings")),
    ]
    .into_iter()
    .flatten()
}

/// The path of recording `name` (the file name without `.yaml`), from the first directory of
/// the search order that has it.
///
/// Panics when none has it: the tests cannot run without the recordings.
pub fn recording_path(name: &str) -> PathBuf {
    let file = format!("{name}.yaml");
    candidate_dirs()
        .map(|dir| dir.join(&file))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "recording {file} not found: set GATEWAY_RECORDINGS to the directory of the \
                 go-vcr YAML files"
            )
        })
}

/// The interactions of recording `name` (e.g. `"OpenAI__openai-gpt-4o-mini__simple"`), in the
/// order they happened.
///
/// Panics when the file is missing, is not a go-vcr cassette, or holds no interaction.
pub fn recording(name: &str) -> Vec<Interaction> {
    let path = recording_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let cassette: Cassette =
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert!(!cassette.interactions.is_empty(), "{name}: no interactions");
    cassette.interactions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_block_and_quoted_bodies() {
        // Block literal bodies (`|`, `|+`).
        let simple = recording("OpenAI__openai-gpt-4o-mini__simple");
        assert_eq!(simple.len(), 1);
        assert_eq!(simple[0].request_json()["model"], "gpt-4o-mini");
        assert!(!simple[0].requests_stream());
        let answer: Value = serde_json::from_str(&simple[0].response.body).expect("answer JSON");
        assert!(answer["choices"].is_array(), "{answer}");
        // Double-quoted bodies with escapes, and the URL.
        let streamed = recording("Google__gemini-2.5-flash__simple_streaming");
        assert!(streamed[0].request.url.contains(":streamGenerateContent"));
        assert!(streamed[0].response.body.starts_with("data: {"));
        let openai_stream = recording("OpenAI__openai-gpt-4o-mini__simple_streaming");
        assert!(openai_stream[0].requests_stream());
    }

    #[test]
    #[should_panic(expected = "not found")]
    fn missing_recording_panics() {
        recording("No__such__recording");
    }
}
