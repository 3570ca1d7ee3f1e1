//! Google's Gemini API as the fake serves it: `generateContent` and `streamGenerateContent`
//! from the script; `batchEmbedContents` computed from the request; errors as
//! `{"error": {"code", "message", "status"}}`.

use serde_json::{Value, json};

use super::{Provider, ReceivedRequest, Reply, counted_tokens, fake_embedding};
use crate::recording::Recording;

/// The content type Google answers JSON with.
const JSON: &str = "application/json; charset=UTF-8";

/// The Gemini API.
pub struct Gemini;

impl Provider for Gemini {
    const NAME: &'static str = "fake-gemini";

    fn is_generation(path: &str) -> bool {
        path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent")
    }

    fn computed(request: &ReceivedRequest) -> Option<Reply> {
        let path = request.path_only();
        if path.ends_with(":countTokens") {
            return Some(count(request));
        }
        path.ends_with(":batchEmbedContents")
            .then(|| embeddings(request))
    }

    fn error(status: u16, message: &str) -> Reply {
        let status_name = if status == 404 {
            "NOT_FOUND"
        } else {
            "INTERNAL"
        };
        Reply::google_error(status, &format!("fake Gemini API: {message}"), status_name)
    }
}

/// The recording of a Gemini test case: `Google__gemini-2.5-flash__{case}`.
pub fn recording(case: &str) -> Recording {
    Recording::load(&format!("Google__gemini-2.5-flash__{case}"))
}

impl Reply {
    /// A whole JSON body (any text) with Google's content type.
    pub fn gemini_json(status: u16, body: &str) -> Reply {
        Reply::raw(status, JSON, body)
    }

    /// An error in Google's shape.
    pub fn google_error(status: u16, message: &str, status_name: &str) -> Reply {
        let body = json!({"error": {"code": status, "message": message, "status": status_name}});
        Reply::gemini_json(status, &body.to_string())
    }
}

/// `countTokens` of a `generateContentRequest` naming its model, counting [`counted_tokens`]
/// of its contents and function declarations.
fn count(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let generate = &body["generateContentRequest"];
    let named = generate["model"]
        .as_str()
        .is_some_and(|m| m.starts_with("models/"));
    let Some(contents) = generate["contents"].as_array().filter(|_| named) else {
        let message = "countTokens needs a generateContentRequest with its model and contents";
        return Reply::google_error(400, message, "INVALID_ARGUMENT");
    };
    let tools = generate["tools"].as_array().into_iter().flatten();
    let declarations = tools
        .filter_map(|tool| tool["functionDeclarations"].as_array())
        .map(Vec::len)
        .sum();
    let total = counted_tokens(contents.len(), declarations);
    Reply::gemini_json(200, &json!({"totalTokens": total}).to_string())
}

/// Answers `batchEmbedContents` with [`fake_embedding`] of each request's text, in order.
fn embeddings(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let vectors: Vec<Value> = body["requests"]
        .as_array()
        .map(|requests| {
            requests
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let text = r["content"]["parts"][0]["text"]
                        .as_str()
                        .unwrap_or_default();
                    json!({"values": fake_embedding(i, text)})
                })
                .collect()
        })
        .unwrap_or_default();
    Reply::gemini_json(200, &json!({"embeddings": vectors}).to_string())
}
