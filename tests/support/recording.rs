//! Recorded provider traffic (go-vcr cassettes in `tests/recordings/`) and
//! what the gateway should make of it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

/// Where the recordings live: in the repository (`tests/recordings`, with their license).
pub fn recordings_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/recordings"))
}

#[derive(Debug, Clone, Deserialize)]
struct Cassette {
    interactions: Vec<Interaction>,
}

/// One recorded request/response exchange.
#[derive(Debug, Clone, Deserialize)]
pub struct Interaction {
    pub request: RecordedRequest,
    pub response: RecordedResponse,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RecordedRequest {
    pub body: String,
    pub url: String,
    pub method: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RecordedResponse {
    pub body: String,
    #[serde(default)]
    pub headers: BTreeMap<String, Vec<String>>,
    pub code: u16,
}

/// A recording: the interactions of one test case, in order.
#[derive(Debug, Clone)]
pub struct Recording {
    pub name: String,
    pub interactions: Vec<Interaction>,
}

impl Recording {
    /// Loads `tests/recordings/<name>.yaml`.
    pub fn load(name: &str) -> Recording {
        let path = recordings_dir().join(format!("{name}.yaml"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
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

    /// Several recordings played one after the other (for one upstream
    /// serving several calls).
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

/// What a recorded answer says, read the way a client of the provider would.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// Choice 0's text (streamed deltas concatenated).
    pub text: String,
    pub finish_reason: Option<String>,
    /// `(id, name, arguments)` of choice 0's tool calls, arguments reassembled
    /// from their deltas.
    pub tool_calls: Vec<(String, String, String)>,
    /// `(prompt, completion, total)` tokens.
    pub usage: Option<(u64, u64, u64)>,
}

impl Interaction {
    /// The recorded request body as JSON.
    pub fn request_json(&self) -> Value {
        serde_json::from_str(&self.request.body).expect("recorded request body is JSON")
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

    pub fn content_type(&self) -> String {
        self.response
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .and_then(|(_, values)| values.first().cloned())
            .unwrap_or_else(|| "application/json".to_owned())
    }

    pub fn is_sse(&self) -> bool {
        self.content_type().starts_with("text/event-stream")
    }

    /// The recorded SSE body split into events, each with its terminating
    /// blank line, exactly as the provider sent them.
    pub fn sse_events(&self) -> Vec<String> {
        let mut events = Vec::new();
        let mut rest = self.response.body.as_str();
        while let Some(end) = rest.find("\n\n") {
            let event = &rest[..end + 2];
            if !event.trim().is_empty() {
                events.push(event.to_owned());
            }
            rest = &rest[end + 2..];
        }
        if !rest.trim().is_empty() {
            events.push(rest.to_owned());
        }
        events
    }

    /// The JSON payloads of the recorded SSE events (without `[DONE]`).
    pub fn sse_payloads(&self) -> Vec<Value> {
        self.sse_events()
            .iter()
            .filter_map(|event| super::client::event_data(event))
            .filter(|data| data.trim() != "[DONE]")
            .map(|data| serde_json::from_str(&data).expect("recorded SSE data is JSON"))
            .collect()
    }

    /// What the provider answered.
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
