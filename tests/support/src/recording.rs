//! Recorded provider traffic: go-vcr YAML cassettes of real calls to the providers (OpenAI,
//! Azure, Anthropic, Gemini, OpenAI-compatible servers), one file per test case, kept in the
//! repository's `tests/recordings/` (Apache-2.0, origin in its README). The plugins' unit tests
//! feed their bodies to the mapping code; the integration tests replay them from a fake
//! upstream and compare the gateway's answer with [`Interaction::answer`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::sse;

/// The repository's recordings: `tests/recordings`, with their license.
pub fn recordings_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings")
}

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
    /// The request method (empty when the cassette has none).
    #[serde(default)]
    pub method: String,
}

/// The recorded response of an [`Interaction`].
#[derive(Debug, Clone, Deserialize)]
pub struct RecordedResponse {
    /// The response body as received: JSON, or the whole SSE stream.
    pub body: String,
    /// Header values by name, as recorded.
    #[serde(default)]
    pub headers: BTreeMap<String, Vec<String>>,
    /// The HTTP status.
    pub code: u16,
}

/// A recording: the interactions of one test case, in order.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The file name without `.yaml`, or the names of concatenated recordings.
    pub name: String,
    /// The exchanges, in the order they happened.
    pub interactions: Vec<Interaction>,
}

impl Recording {
    /// Loads `tests/recordings/<name>.yaml`: only the repository's, so a fresh clone runs its
    /// integration tests on what it holds.
    pub fn load(name: &str) -> Recording {
        Self::read(name, &recordings_dir().join(format!("{name}.yaml")))
    }

    /// Loads recording `name` from the first directory of the plugins' search order
    /// (see [`recording_path`]).
    pub fn find(name: &str) -> Recording {
        Self::read(name, &recording_path(name))
    }

    /// Panics when the file is missing, is not a go-vcr cassette, or holds no interaction.
    fn read(name: &str, path: &Path) -> Recording {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
            panic!(
                "cannot read recording {} ({e}); it belongs in tests/recordings",
                path.display()
            )
        });
        let cassette: Cassette = serde_norway::from_str(&text).unwrap_or_else(|e| {
            panic!("recording {} is not a go-vcr cassette: {e}", path.display())
        });
        assert!(
            !cassette.interactions.is_empty(),
            "recording {name} has no interactions"
        );
        Recording {
            name: name.to_owned(),
            interactions: cassette.interactions,
        }
    }

    /// Several recordings played one after the other (for one upstream serving several calls).
    pub fn concat(recordings: &[Recording]) -> Recording {
        Recording {
            name: recordings
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            interactions: recordings
                .iter()
                .flat_map(|r| r.interactions.iter().cloned())
                .collect(),
        }
    }

    /// Interaction number `index` (from 0); panics naming the recording when there is none.
    pub fn interaction(&self, index: usize) -> &Interaction {
        self.interactions.get(index).unwrap_or_else(|| {
            panic!(
                "recording {} has {} interaction(s), not {}",
                self.name,
                self.interactions.len(),
                index + 1
            )
        })
    }
}

/// The directories the plugins' unit tests search, in order: `$GATEWAY_RECORDINGS` (to try new
/// recordings before adding them) and the repository's `tests/recordings`.
fn search_dirs() -> impl Iterator<Item = PathBuf> {
    [
        std::env::var_os("GATEWAY_RECORDINGS").map(PathBuf::from),
        Some(recordings_dir()),
    ]
    .into_iter()
    .flatten()
}

/// The path of recording `name` (the file name without `.yaml`), from the first directory of
/// the plugins' search order that has it; panics when none has it.
pub fn recording_path(name: &str) -> PathBuf {
    let file = format!("{name}.yaml");
    search_dirs()
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
/// order they happened, found the plugins' way ([`recording_path`]).
pub fn recording(name: &str) -> Vec<Interaction> {
    Recording::find(name).interactions
}

/// What a recorded OpenAI-style answer says, read the way a client of the provider would.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// Choice 0's text (streamed deltas concatenated).
    pub text: String,
    /// Choice 0's finish reason.
    pub finish_reason: Option<String>,
    /// `(id, name, arguments)` of choice 0's tool calls, arguments reassembled from their
    /// deltas.
    pub tool_calls: Vec<(String, String, String)>,
    /// `(prompt, completion, total)` tokens.
    pub usage: Option<(u64, u64, u64)>,
}

impl Interaction {
    /// The request body parsed as JSON; panics when it is not JSON.
    pub fn request_json(&self) -> Value {
        serde_json::from_str(&self.request.body).expect("recorded request body is JSON")
    }

    /// Whether the request body asked for a stream (`"stream": true`, as the OpenAI and
    /// Anthropic APIs spell it). Gemini says so in the URL instead.
    pub fn requests_stream(&self) -> bool {
        serde_json::from_str::<Value>(&self.request.body)
            .ok()
            .and_then(|v| v.get("stream").and_then(Value::as_bool))
            .unwrap_or(false)
    }

    /// The recorded URL's path, e.g. `/v1/chat/completions`.
    pub fn path(&self) -> String {
        let url = &self.request.url;
        let after_scheme = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
        match after_scheme.find('/') {
            Some(i) => after_scheme[i..].to_owned(),
            None => "/".to_owned(),
        }
    }

    /// The path prefix a route's `base_url` needs so that the plugin asks for
    /// [`Interaction::path`], e.g. `/v1` or `/openai/v1`.
    pub fn base_path(&self) -> String {
        let path = self.path();
        path.strip_suffix("/chat/completions")
            .unwrap_or_else(|| panic!("recorded request is not a chat completion: {path}"))
            .to_owned()
    }

    /// The recorded response's content type (`application/json` when none was recorded).
    pub fn content_type(&self) -> String {
        self.response
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .and_then(|(_, values)| values.first().cloned())
            .unwrap_or_else(|| "application/json".to_owned())
    }

    /// Whether the response is an event stream.
    pub fn is_sse(&self) -> bool {
        self.content_type().starts_with("text/event-stream")
    }

    /// The recorded SSE body split into events, each with its terminating blank line, exactly
    /// as the provider sent them.
    pub fn sse_events(&self) -> Vec<String> {
        sse::split_events(&self.response.body)
    }

    /// The JSON payloads of the recorded SSE events (without `[DONE]`).
    pub fn sse_payloads(&self) -> Vec<Value> {
        self.sse_events()
            .iter()
            .filter_map(|event| sse::event_data(event))
            .filter(|data| data.trim() != "[DONE]")
            .map(|data| serde_json::from_str(&data).expect("recorded SSE data is JSON"))
            .collect()
    }

    /// What the provider answered, for OpenAI's wire format (chat completions, whole or
    /// streamed).
    pub fn answer(&self) -> Answer {
        if self.is_sse() {
            self.streamed_answer()
        } else {
            self.plain_answer()
        }
    }

    fn plain_answer(&self) -> Answer {
        let body: Value =
            serde_json::from_str(&self.response.body).expect("recorded response body is JSON");
        let choice = &body["choices"][0];
        let message = &choice["message"];
        let tool_calls = message["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|call| {
                        (
                            str_of(&call["id"]),
                            str_of(&call["function"]["name"]),
                            str_of(&call["function"]["arguments"]),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Answer {
            text: str_of(&message["content"]),
            finish_reason: choice["finish_reason"].as_str().map(str::to_owned),
            tool_calls,
            usage: usage_of(&body["usage"]),
        }
    }

    fn streamed_answer(&self) -> Answer {
        let mut answer = Answer::default();
        // Tool calls keyed by their index within choice 0.
        let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
        for payload in self.sse_payloads() {
            if let Some(usage) = usage_of(&payload["usage"]) {
                answer.usage = Some(usage);
            }
            let Some(choices) = payload["choices"].as_array() else {
                continue;
            };
            for choice in choices {
                if choice["index"].as_u64().unwrap_or(0) != 0 {
                    continue;
                }
                let delta = &choice["delta"];
                if let Some(text) = delta["content"].as_str() {
                    answer.text.push_str(text);
                }
                if let Some(deltas) = delta["tool_calls"].as_array() {
                    for call in deltas {
                        let index = call["index"].as_u64().unwrap_or(0);
                        let entry = calls.entry(index).or_default();
                        if let Some(id) = call["id"].as_str() {
                            entry.0 = id.to_owned();
                        }
                        if let Some(name) = call["function"]["name"].as_str() {
                            entry.1.push_str(name);
                        }
                        if let Some(arguments) = call["function"]["arguments"].as_str() {
                            entry.2.push_str(arguments);
                        }
                    }
                }
                if let Some(reason) = choice["finish_reason"].as_str() {
                    answer.finish_reason = Some(reason.to_owned());
                }
            }
        }
        answer.tool_calls = calls.into_values().collect();
        answer
    }
}

fn str_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn usage_of(value: &Value) -> Option<(u64, u64, u64)> {
    Some((
        value["prompt_tokens"].as_u64()?,
        value["completion_tokens"].as_u64()?,
        value["total_tokens"].as_u64()?,
    ))
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
